/* test_position_embedding.c: KerasHub's PositionEmbedding (keras_hub.layers.PositionEmbedding) on the
 * CPU: forward and gradients against PyTorch (fixtures/gen_position_embedding.py), finite
 * differences, the glorot_uniform default, errors, Keras configs (KerasHub's Keras 3 entry with its
 * module and registered_name, keras_nlp's Keras 2 one, a .keras round trip), and the encoder
 * classifier (zoo/transformer.c), which now uses it + Add: the same computation as its former
 * custom layer (x + P), given the same weights. */
#include "json_harness.h"
#include "layer_harness.h"
#include "transformer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void test_fixtures(void **state) {
    (void)state;
    run_case("posemb_full", tnt_position_embedding(6, TNT_INIT_DEFAULT, NULL));
    run_case("posemb_short", tnt_position_embedding(9, TNT_INIT_DEFAULT, NULL));
    run_case("posemb_lead", tnt_position_embedding(7, TNT_INIT_ZEROS, NULL));
}

static void test_finite_differences(void **state) {
    (void)state;
    fd_check(tnt_position_embedding(5, TNT_INIT_DEFAULT, NULL), TNT_SHAPE(3, 4), 3);
    fd_check(tnt_position_embedding(4, TNT_INIT_DEFAULT, NULL), TNT_SHAPE(2, 4, 2), 2);
}

/* Keras's GlorotUniform on (sequence_length, hidden): U(-l, l), l = sqrt(6 / (L + H)) */
static void test_glorot_default(void **state) {
    (void)state;
    const int L = 40, H = 24;
    tnt_model *m = seq1(TNT_SHAPE(30, H), tnt_position_embedding(L, TNT_INIT_DEFAULT, "pos"));
    tu_ok(tnt_model_build(m, TNT_SHAPE(30, H)));
    const char *name;
    tnt_shape s;
    float *w;
    tu_ok(tnt_model_weight(m, 0, &name, &s, &w));
    assert_string_equal(name, "pos/embeddings:0");
    assert_int_equal(s.ndim, 2);
    assert_int_equal(s.dim[0], L);
    assert_int_equal(s.dim[1], H);
    const double limit = sqrt(6.0 / (L + H));
    double sq = 0;
    for (int i = 0; i < L * H; i++) {
        assert_true(fabs(w[i]) <= limit);
        sq += (double)w[i] * w[i];
    }
    const double sd = sqrt(sq / (L * H)), want = limit / sqrt(3.0); /* 960 draws: within 10% */
    if (fabs(sd - want) > 0.1 * want) fail_msg("glorot_uniform: std %g, expected about %g", sd, want);
    tnt_model_free(m);
}

static void test_errors(void **state) {
    (void)state;
    assert_null(tnt_position_embedding(0, TNT_INIT_DEFAULT, NULL));
    tu_error_contains("sequence_length 0");
    /* a sequence longer than sequence_length, and an input without features */
    tnt_model *m = tnt_sequential("s");
    tu_ok(tnt_model_add(m, tnt_input_layer(TNT_SHAPE(8, 4), NULL)));
    assert_int_equal(tnt_model_add(m, tnt_position_embedding(6, TNT_INIT_DEFAULT, "pos")), TNT_ERR_SHAPE);
    tu_error_contains("8 steps, longer than sequence_length 6");
    tnt_model_free(m);
    m = tnt_sequential("s");
    tu_ok(tnt_model_add(m, tnt_input_layer(TNT_SHAPE(8), NULL)));
    assert_int_equal(tnt_model_add(m, tnt_position_embedding(8, TNT_INIT_DEFAULT, "pos")), TNT_ERR_SHAPE);
    tu_error_contains("expected at least 2");
    tnt_model_free(m);
}

/* The model's weight 0 (the embeddings) as read from a config, with its initializer's marks. */
static void check_read(const char *layer_json, int length, int features, bool zeros) {
    char shape[32];
    snprintf(shape, sizeof shape, "[null, %d, %d]", length - 1, features);
    tnt_model *m = seq_from_layer_json(shape, layer_json);
    if (!m) fail_msg("%s", tnt_last_error());
    tu_ok(tnt_model_build(m, TNT_SHAPE(length - 1, features)));
    assert_int_equal(tnt_model_count_params(m), length * features);
    const char *name;
    tnt_shape s;
    float *w;
    tu_ok(tnt_model_weight(m, 0, &name, &s, &w));
    assert_string_equal(name, "position_embedding/embeddings:0");
    float mx = 0;
    for (int i = 0; i < length * features; i++) mx = fmaxf(mx, fabsf(w[i]));
    if (zeros) assert_true(mx == 0.0f);
    else assert_true(mx > 0.0f && mx <= sqrtf(6.0f / (float)(length + features)));
    char *json = to_json(m);
    assert_non_null(strstr(json, "\"class_name\":\"PositionEmbedding\""));
    char want[48];
    snprintf(want, sizeof want, "\"sequence_length\":%d", length);
    assert_non_null(strstr(json, want));
    free(json);
    tnt_model_free(m);
}

static void test_keras_configs(void **state) {
    (void)state;
    /* KerasHub in a Keras 3 file: module, registered_name, Keras 3 objects, build_config */
    check_read("{\"module\": \"keras_hub.src.layers.modeling.position_embedding\", \"class_name\": \"PositionEmbedding\", "
               "\"config\": {\"name\": \"position_embedding\", \"trainable\": true, \"dtype\": {\"module\": \"keras\", "
               "\"class_name\": \"DTypePolicy\", \"config\": {\"name\": \"float32\"}, \"registered_name\": null}, "
               "\"sequence_length\": 16, \"initializer\": {\"module\": \"keras.initializers\", \"class_name\": "
               "\"GlorotUniform\", \"config\": {\"seed\": null}, \"registered_name\": null}}, \"registered_name\": "
               "\"keras_hub>PositionEmbedding\", \"build_config\": {\"input_shape\": [null, 15, 8]}}",
               16, 8, false);
    /* keras_nlp in a Keras 2 (tf.keras) file, zeros */
    check_read("{\"class_name\": \"PositionEmbedding\", \"config\": {\"name\": \"position_embedding\", \"trainable\": "
               "true, \"dtype\": \"float32\", \"sequence_length\": 12, \"initializer\": {\"class_name\": \"Zeros\", "
               "\"config\": {}}}}",
               12, 6, true);
    /* the default initializer when the key is absent: glorot_uniform */
    check_read("{\"class_name\": \"PositionEmbedding\", \"config\": {\"name\": \"position_embedding\", "
               "\"sequence_length\": 5}}",
               5, 3, false);
    /* a missing sequence_length is named */
    assert_null(seq_from_layer_json("[null, 4, 2]", "{\"class_name\": \"PositionEmbedding\", \"config\": {\"name\": \"p\"}}"));
    tu_error_contains("sequence_length");
    /* the JSON round trip */
    free(round_trip(seq1(TNT_SHAPE(5, 3), tnt_position_embedding(7, TNT_INIT_ZEROS, "pos"))));
}

/* A .keras file (Keras 3's zip): the initializer becomes a Keras 3 object; loaded back, the same
 * weights and outputs. */
static void test_keras_file(void **state) {
    (void)state;
    tnt_graph *g = tnt_graph_new();
    tnt_ktensor x = tnt_graph_input(g, TNT_SHAPE(5, 3), "x");
    tnt_ktensor p = tnt_call(g, tnt_position_embedding(6, TNT_INIT_DEFAULT, "position_embedding"), x);
    tnt_ktensor y = tnt_call2(g, tnt_add("add"), x, p);
    tnt_model *m = tnt_functional(g, 1, &x, 1, &y, "posemb");
    tnt_graph_free(g);
    assert_non_null(m);
    const char *path = tu_tmp_path("posemb.keras");
    tu_ok(tnt_save_model(m, path, NULL));
    tnt_model *back = tnt_load_model(path, false);
    if (!back) fail_msg("%s", tnt_last_error());
    float in[2 * 15];
    tu_fill(in, 30, 3);
    tnt_tensor t = {.shape = TNT_SHAPE(2, 5, 3), .data = in}, *a = NULL, *b = NULL;
    tu_ok(tnt_predict_on_batch(m, &t, &a));
    tu_ok(tnt_predict_on_batch(back, &t, &b));
    tu_assert_bitwise(b->data, a->data, 30, "outputs after a .keras round trip");
    /* x + P[:5] */
    const char *name;
    tnt_shape s;
    float *w;
    tu_ok(tnt_model_weight(back, 0, &name, &s, &w));
    for (int i = 0; i < 30; i++) assert_true(a->data[i] == in[i] + w[i % 15]);
    char *json = to_json(back);
    assert_non_null(strstr(json, "\"initializer\":{\"class_name\":\"GlorotUniform\""));
    free(json);
    tnt_tensor_free(a), tnt_tensor_free(b);
    tnt_model_free(m), tnt_model_free(back);
}

/* ---- the encoder classifier: the former custom layer as the reference -------------------------- */

typedef struct seq_dims {
    int64_t n; /* seq * d, set by build */
} seq_dims;

static tnt_status old_pos_build(tnt_layer *l, tnt_shape in, tnt_shape *out, void *user) {
    if (in.ndim != 2) return tnt_set_error(TNT_ERR_SHAPE, "expected (seq, d)");
    if (tnt_layer_add_weight(l, "embeddings", in, TNT_INIT_ZEROS, true) < 0) return TNT_ERR_ARG;
    ((seq_dims *)user)->n = in.dim[0] * in.dim[1];
    *out = in;
    return TNT_OK;
}

static tnt_status old_pos_forward(tnt_layer *l, int64_t batch, const float *x, float *y, bool training, void *user) {
    (void)training;
    const int64_t n = ((seq_dims *)user)->n;
    const float *p = tnt_layer_weight_value(l, 0);
    for (int64_t b = 0; b < batch; b++)
        for (int64_t i = 0; i < n; i++) y[b * n + i] = x[b * n + i] + p[i];
    return TNT_OK;
}

static tnt_status old_pos_backward(tnt_layer *l, int64_t batch, const float *x, const float *y, const float *dy,
                                   float *dx, void *user) {
    (void)x, (void)y;
    const int64_t n = ((seq_dims *)user)->n;
    float *dp = tnt_layer_weight_grad(l, 0);
    if (dx) memcpy(dx, dy, (size_t)(batch * n) * sizeof(float));
    memset(dp, 0, (size_t)n * sizeof(float));
    for (int64_t b = 0; b < batch; b++)
        for (int64_t i = 0; i < n; i++) dp[i] += dy[b * n + i];
    return TNT_OK;
}

/* zoo/transformer.c's encoder classifier as it was: the custom layer x + P */
static tnt_model *old_classifier(int vocab, int seq, int d, int heads, int ffn, int layers, int classes) {
    char nm[64];
    tnt_graph *g = tnt_graph_new();
    tnt_ktensor ids = tnt_graph_input(g, TNT_SHAPE(seq), "ids");
    tnt_ktensor x = tnt_call(g, tnt_embedding(vocab, d, false, "embedding"), ids);
    seq_dims *sd = calloc(1, sizeof *sd);
    tnt_custom_layer_def def = {.class_name = "PositionEmbedding", .user = sd, .build = old_pos_build,
                                .forward = old_pos_forward, .backward = old_pos_backward, .destroy = free};
    x = tnt_call(g, tnt_custom_layer(&def, "position_embedding"), x);
    const tnt_ktensor none = {-1};
    for (int i = 0; i < layers; i++) {
        snprintf(nm, sizeof nm, "layer%d_attention", i);
        tnt_ktensor a = tnt_call_attention(g, tnt_multi_head_attention(heads, d / heads, &(tnt_attention_opts){.name = nm}),
                                           x, x, none, none, false);
        snprintf(nm, sizeof nm, "layer%d_add1", i);
        x = tnt_call2(g, tnt_add(nm), x, a);
        snprintf(nm, sizeof nm, "layer%d_norm1", i);
        x = tnt_call(g, tnt_layer_normalization(1e-5f, nm), x);
        snprintf(nm, sizeof nm, "layer%d_linear1", i);
        tnt_ktensor f = tnt_call(g, tnt_dense(ffn, &(tnt_layer_opts){.name = nm, .activation = TNT_ACT_RELU}), x);
        snprintf(nm, sizeof nm, "layer%d_linear2", i);
        f = tnt_call(g, tnt_dense(d, &(tnt_layer_opts){.name = nm}), f);
        snprintf(nm, sizeof nm, "layer%d_add2", i);
        x = tnt_call2(g, tnt_add(nm), x, f);
        snprintf(nm, sizeof nm, "layer%d_norm2", i);
        x = tnt_call(g, tnt_layer_normalization(1e-5f, nm), x);
    }
    x = tnt_call(g, tnt_global_average_pooling1d("mean"), x);
    x = tnt_call(g, tnt_dense(classes, &(tnt_layer_opts){.name = "out"}), x);
    tnt_model *m = tnt_functional(g, 1, &ids, 1, &x, "transformer_encoder_classifier");
    tnt_graph_free(g);
    return m;
}

enum { VOCAB = 50, SEQ = 10, D = 12, HEADS = 3, FFN = 20, LAYERS = 2, CLASSES = 3, NS = 24, B = 8 };

/* bench_train's set-up (SGD 0.01, momentum 0.9, logits) on the weights w: the losses of 3 epochs and
 * the weights after them */
static void train(tnt_model *m, const float *w, int64_t n, const float *ids, const float *labels, double loss[3],
                  float *after) {
    tu_ok(tnt_set_weights(m, w, n));
    tnt_optimizer_opts oo = {.learning_rate = 0.01f, .momentum = 0.9f};
    tu_ok(tnt_compile(m, &(tnt_compile_opts){.optimizer = tnt_optimizer_new("sgd", &oo),
                                             .loss = TNT_SPARSE_CATEGORICAL_CROSSENTROPY, .from_logits = true,
                                             .device = TNT_DEVICE_CPU}));
    tnt_dataset *ds = tnt_dataset_batch(tnt_dataset_from_arrays(ids, TNT_SHAPE(SEQ), labels, TNT_SHAPE(), NS, false), B,
                                        false);
    tnt_history *h = NULL;
    tu_ok(tnt_fit(m, ds, &(tnt_fit_opts){.epochs = 3}, &h));
    for (int e = 0; e < 3; e++) loss[e] = tnt_history_get(h, "loss", e);
    tu_ok(tnt_get_weights(m, after, n));
    tnt_history_free(h);
    tnt_dataset_free(ds);
}

static void test_classifier_same_as_custom_layer(void **state) {
    (void)state;
    assert_int_equal(transformer_encoder_classifier_params(8000, 128, 256, 4, 1024, 4, 2), 5240322);
    tnt_model *m = transformer_encoder_classifier(8000, 128, 256, 4, 1024, 4, 2);
    assert_non_null(m);
    assert_int_equal(tnt_model_count_params(m), 5240322);
    tnt_model_free(m);

    tnt_model *now = transformer_encoder_classifier(VOCAB, SEQ, D, HEADS, FFN, LAYERS, CLASSES);
    tnt_model *was = old_classifier(VOCAB, SEQ, D, HEADS, FFN, LAYERS, CLASSES);
    assert_non_null(now);
    assert_non_null(was);
    const int64_t n = tnt_model_count_params(now);
    assert_int_equal(tnt_model_count_params(was), n);
    /* the same weights in the same order, by name */
    assert_int_equal(tnt_model_num_weights(now), tnt_model_num_weights(was));
    for (int i = 0; i < tnt_model_num_weights(now); i++) {
        const char *a, *b;
        tnt_shape sa, sb;
        float *da, *db;
        tu_ok(tnt_model_weight(now, i, &a, &sa, &da));
        tu_ok(tnt_model_weight(was, i, &b, &sb, &db));
        assert_string_equal(a, b);
        assert_true(tnt__shape_equal(sa, sb));
    }
    /* the position weights start at zeros in both */
    float *w = malloc((size_t)n * sizeof(float)), *w1 = malloc((size_t)n * sizeof(float)),
          *w2 = malloc((size_t)n * sizeof(float));
    tu_ok(tnt_get_weights(now, w, n));
    const int64_t pos0 = (int64_t)VOCAB * D;
    for (int64_t i = 0; i < SEQ * D; i++) assert_true(w[pos0 + i] == 0.0f);
    tu_fill(w, n, 17);
    for (int64_t i = 0; i < n; i++) w[i] *= 0.3f;
    float ids[NS * SEQ], labels[NS];
    for (int i = 0; i < NS * SEQ; i++) ids[i] = (float)((i * 7919) % VOCAB);
    for (int i = 0; i < NS; i++) labels[i] = (float)(i % CLASSES);
    double l1[3], l2[3];
    train(now, w, n, ids, labels, l1, w1);
    train(was, w, n, ids, labels, l2, w2);
    for (int e = 0; e < 3; e++)
        if (l1[e] != l2[e]) fail_msg("epoch %d: loss %.9g with PositionEmbedding + Add, %.9g before", e + 1, l1[e], l2[e]);
    tu_assert_bitwise(w1, w2, n, "weights after 3 epochs: PositionEmbedding + Add against the custom layer");
    free(w), free(w1), free(w2);
    tnt_model_free(now), tnt_model_free(was);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixtures),
        cmocka_unit_test(test_finite_differences),
        cmocka_unit_test(test_glorot_default),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_keras_configs),
        cmocka_unit_test(test_keras_file),
        cmocka_unit_test(test_classifier_same_as_custom_layer),
    };
    return cmocka_run_group_tests(tests, tu_tmpdir_setup, tu_tmpdir_teardown);
}

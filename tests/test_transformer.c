/* test_transformer.c: the Transformer builders of zoo/transformer.c.
 * - the encoder classifier has the torch peer's parameter count (5,240,322) and shapes;
 * - Model Garden's base and big Transformers (graphs only, never compiled: building does not
 *   allocate weights) have the hand-derived counts 61,362,176 and 210,804,736, attention layers
 *   without biases and one shared (vocab, hidden) embedding;
 * - the tied embedding's gradient (the two lookups plus the logits' contribution, added once per
 *   step) equals finite differences of the loss (label smoothing, ignore_class 0, dropout off);
 * - padding invariance (the masks): logits at the real positions of sentences padded to length 6
 *   equal those of the same sentences at length 3 (source padding keys are masked in the encoder
 *   and encoder-decoder attention, the decoder is causal), with the same weights;
 * - the tiny Transformer learns a synthetic copy task (the loss falls) with Adam and the Model
 *   Garden learning-rate schedule. */
#include "testutil.h"

#include "transformer.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void test_classifier_params(void **state) {
    (void)state;
    tnt_model *m = transformer_encoder_classifier(8000, 128, 256, 4, 1024, 4, 2);
    if (!m) fail_msg("classifier: %s", tnt_last_error());
    assert_int_equal(tnt_model_count_params(m), 5240322); /* torch_models.py --model transformer */
    assert_int_equal(transformer_encoder_classifier_params(8000, 128, 256, 4, 1024, 4, 2), 5240322);
    tnt_shape in = tnt_model_input_shape_at(m, 0), out = tnt_model_output_shape_at(m, 0);
    assert_int_equal(in.ndim, 1);
    assert_int_equal(in.dim[0], 128);
    assert_int_equal(out.ndim, 1);
    assert_int_equal(out.dim[0], 2);
    tnt_model_free(m);
    /* a small one: the formula holds for other sizes too */
    m = transformer_encoder_classifier(50, 10, 12, 3, 20, 2, 3);
    assert_non_null(m);
    assert_int_equal(tnt_model_count_params(m), transformer_encoder_classifier_params(50, 10, 12, 3, 20, 2, 3));
    tnt_model_free(m);
    assert_null(transformer_encoder_classifier(50, 10, 12, 5, 20, 2, 3)); /* 12 % 5 */
    tu_error_contains("multiple of heads");
}

/* Weights of the layer called name (from tnt_model_weight's "layer/weight:0" names). */
static int layer_weights(tnt_model *m, const char *layer) {
    int k = 0;
    size_t n = strlen(layer);
    for (int i = 0; i < tnt_model_num_weights(m); i++) {
        const char *name;
        tnt_shape s;
        float *d;
        tu_ok(tnt_model_weight(m, i, &name, &s, &d));
        if (!strncmp(name, layer, n) && name[n] == '/') k++;
    }
    return k;
}

static void check_model_garden(const transformer_params *p, int64_t expected) {
    assert_int_equal(transformer_model_garden_params(p), expected);
    tnt_model *m = transformer_model(p, 32, NULL);
    if (!m) fail_msg("%s: %s", p->name, tnt_last_error());
    assert_int_equal(tnt_model_count_params(m), expected);
    assert_int_equal(tnt_model_num_inputs(m), 2);
    tnt_shape out = tnt_model_output_shape_at(m, 0);
    assert_int_equal(out.ndim, 2);
    assert_int_equal(out.dim[0], 32);
    assert_int_equal(out.dim[1], p->vocab_size);
    tnt_model_free(m);
}

static void test_model_garden_counts(void **state) {
    (void)state;
    /* V*H + N*(4H^2 + 4H + 2HF + F + H) + 2H + N*(8H^2 + 6H + 2HF + F + H) + 2H (transformer.h) */
    check_model_garden(&TRANSFORMER_BASE_PARAMS, 17258496 + 18903040 + 25200640); /* 61,362,176 */
    check_model_garden(&TRANSFORMER_BIG_PARAMS, 34516992 + 75554816 + 100732928); /* 210,804,736 */
    assert_int_equal(transformer_model_garden_params(&TRANSFORMER_BASE_PARAMS), 61362176);
    assert_int_equal(transformer_model_garden_params(&TRANSFORMER_BIG_PARAMS), 210804736);
    /* structure: one shared embedding, bias-free attention, FFN with biases (tiny: cheap to compile) */
    tnt_model *m = transformer_model(&TRANSFORMER_TINY_PARAMS, 8, NULL);
    assert_non_null(m);
    tu_ok(tnt_compile(m, &(tnt_compile_opts){.optimizer = tnt_adam(0.001f), .loss = TNT_SPARSE_CATEGORICAL_CROSSENTROPY,
                                             .from_logits = true}));
    assert_int_equal(layer_weights(m, "embedding_shared_weights"), 1);
    assert_int_equal(layer_weights(m, "encoder0_self_attention"), 4);  /* q, k, v, output kernels */
    assert_int_equal(layer_weights(m, "decoder1_encdec_attention"), 4);
    assert_int_equal(layer_weights(m, "decoder1_ffn_filter"), 2);       /* kernel, bias */
    assert_int_equal(layer_weights(m, "presoftmax_linear"), 0);         /* reads the embedding */
    assert_int_equal(tnt_model_count_params(m), transformer_model_garden_params(&TRANSFORMER_TINY_PARAMS));
    tnt_model_free(m);
    assert_non_null(transformer_params_by_name("big"));
    assert_null(transformer_params_by_name("huge"));
}

/* Copy task: the target is the source; lengths 1..T-1 (at least one pad), ids 1..V-1. */
static void make_copy_data(float *x, float *y, int n, int T, int V, uint64_t seed) {
    uint64_t r = seed * 0x9e3779b97f4a7c15ull + 1;
    for (int i = 0; i < n; i++) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        int len = 1 + (int)((r >> 33) % (uint64_t)(T - 1));
        for (int t = 0; t < T; t++) {
            r = r * 6364136223846793005ull + 1442695040888963407ull;
            float id = t < len ? (float)(1 + (r >> 33) % (uint64_t)(V - 1)) : 0.0f;
            x[i * 2 * T + t] = id;         /* source */
            x[i * 2 * T + T + t] = id;     /* target (the decoder input, shifted inside) */
            y[i * T + t] = id;             /* labels */
        }
    }
}

static const transformer_params SMALL = {
    .name = "small", .vocab_size = 11, .hidden_size = 8, .num_hidden_layers = 1, .num_heads = 2, .filter_size = 16,
    .label_smoothing = 0.1f, .learning_rate = 2.0f, .learning_rate_warmup_steps = 10,
    .adam_beta1 = 0.9f, .adam_beta2 = 0.997f, .adam_epsilon = 1e-9f, .max_length = 6, .batch_size = 4};

static double eval_loss(tnt_model *m, tnt_dataset *ds) {
    tnt_logs logs;
    tu_ok(tnt_evaluate(m, ds, &(tnt_eval_opts){.verbose = 0}, &logs));
    double v = NAN;
    assert_true(tnt_logs_get(&logs, "loss", &v));
    return v;
}

/* The shared embedding's gradient (one SGD step with learning rate 1: w - w' = g) against central
 * differences of the evaluated loss: rows of ids in the source only, the target only, both, and the
 * padding row 0 (only the logits reach it: lookups of id 0 are zeroed). */
static void test_tied_embedding_gradient(void **state) {
    (void)state;
    enum { T = 6, NS = 4 };
    float x[NS * 2 * T], y[NS * T];
    make_copy_data(x, y, NS, T, SMALL.vocab_size, 3);
    /* make the source and the target differ: target ids shifted by 1 (mod 1..10) where not pad */
    for (int i = 0; i < NS; i++)
        for (int t = 0; t < T; t++) {
            float *tg = &x[i * 2 * T + T + t];
            if (*tg != 0) *tg = (float)(1 + ((int)*tg) % 10), y[i * T + t] = *tg;
        }
    tnt_model *m = transformer_model(&SMALL, T, NULL);
    assert_non_null(m);
    tu_ok(tnt_compile(m, &(tnt_compile_opts){.optimizer = tnt_sgd(1.0f), .loss = TNT_SPARSE_CATEGORICAL_CROSSENTROPY,
                                             .from_logits = true, .label_smoothing = 0.1f,
                                             .has_ignore_class = true, .ignore_class = 0, .seed = 7}));
    tu_ok(transformer_init_weights(m, &SMALL, 7));
    tnt_dataset *ds = tnt_dataset_batch(tnt_dataset_from_arrays(x, TNT_SHAPE(2 * T), y, TNT_SHAPE(T), NS, false), NS, false);
    float *w = tnt_layer_weight_value(tnt_model_get_layer(m, "embedding_shared_weights"), 0);
    assert_non_null(w);
    const int H = SMALL.hidden_size, V = SMALL.vocab_size;
    float *w0 = malloc((size_t)(V * H) * sizeof(float));
    memcpy(w0, w, (size_t)(V * H) * sizeof(float));
    /* finite differences first (the model is unchanged by evaluate) */
    bool in_src[16] = {0}, in_tgt[16] = {0};
    for (int i = 0; i < NS; i++)
        for (int t = 0; t < T; t++) in_src[(int)x[i * 2 * T + t]] = true, in_tgt[(int)x[i * 2 * T + T + t]] = true;
    int rows[4] = {0, -1, -1, -1}; /* pad, source only, target only, both */
    for (int v = 1; v < V; v++) {
        if (in_src[v] && !in_tgt[v] && rows[1] < 0) rows[1] = v;
        if (!in_src[v] && in_tgt[v] && rows[2] < 0) rows[2] = v;
        if (in_src[v] && in_tgt[v] && rows[3] < 0) rows[3] = v;
    }
    double fd[4][8];
    const float eps = 2e-3f;
    for (int k = 0; k < 4; k++) {
        if (rows[k] < 0) continue;
        for (int h = 0; h < H; h++) {
            float *p = &w[rows[k] * H + h], keep = *p;
            *p = keep + eps;
            double lp = eval_loss(m, ds);
            *p = keep - eps;
            double lm = eval_loss(m, ds);
            *p = keep;
            fd[k][h] = (lp - lm) / (2.0 * eps);
        }
    }
    tu_ok(tnt_fit(m, ds, &(tnt_fit_opts){.epochs = 1}, NULL));
    int checked = 0;
    for (int k = 0; k < 4; k++) {
        if (rows[k] < 0) continue;
        for (int h = 0; h < H; h++) {
            double g = (double)w0[rows[k] * H + h] - (double)w[rows[k] * H + h];
            if (fabs(g - fd[k][h]) > 2e-3 + 2e-2 * fabs(fd[k][h]))
                fail_msg("embedding row %d (%s) column %d: gradient %.6g, finite differences %.6g", rows[k],
                         k == 0 ? "padding" : k == 1 ? "source only" : k == 2 ? "target only" : "both", h, g, fd[k][h]);
            checked++;
        }
    }
    assert_true(checked >= 3 * H);
    /* the padding row gets the logits' gradient only: nonzero */
    double pad = 0;
    for (int h = 0; h < H; h++) pad += fabs((double)w0[h] - (double)w[h]);
    assert_true(pad > 1e-6);
    free(w0);
    tnt_dataset_free(ds);
    tnt_model_free(m);
}

static void test_padding_invariance(void **state) {
    (void)state;
    enum { NS = 3, SHORT = 3, LONG = 6 };
    /* sources of lengths 1..3, targets of lengths 3, 2, 1 */
    const float src[NS][SHORT] = {{4, 0, 0}, {5, 7, 0}, {9, 2, 3}}, tgt[NS][SHORT] = {{6, 1, 8}, {3, 10, 0}, {2, 0, 0}};
    float xs[NS * 2 * SHORT], xl[NS * 2 * LONG] = {0};
    for (int i = 0; i < NS; i++)
        for (int t = 0; t < SHORT; t++) {
            xs[i * 2 * SHORT + t] = src[i][t], xs[i * 2 * SHORT + SHORT + t] = tgt[i][t];
            xl[i * 2 * LONG + t] = src[i][t], xl[i * 2 * LONG + LONG + t] = tgt[i][t];
        }
    tnt_model *ms = transformer_model(&SMALL, SHORT, NULL), *ml = transformer_model(&SMALL, LONG, NULL);
    assert_non_null(ms);
    assert_non_null(ml);
    const tnt_compile_opts co = {.loss = TNT_SPARSE_CATEGORICAL_CROSSENTROPY, .from_logits = true, .seed = 9};
    tnt_compile_opts c1 = co, c2 = co;
    c1.optimizer = tnt_sgd(0.1f), c2.optimizer = tnt_sgd(0.1f);
    tu_ok(tnt_compile(ms, &c1));
    tu_ok(tnt_compile(ml, &c2));
    tu_ok(transformer_init_weights(ms, &SMALL, 9));
    const int64_t n = tnt_model_count_params(ms);
    assert_int_equal(n, tnt_model_count_params(ml)); /* no positional weights: the same weights */
    float *w = malloc((size_t)n * sizeof(float));
    tu_ok(tnt_get_weights(ms, w, n));
    tu_ok(tnt_set_weights(ml, w, n));
    tnt_tensor *ys = NULL, *yl = NULL;
    tu_ok(tnt_predict_on_batch(ms, &(tnt_tensor){TNT_SHAPE(NS, 2 * SHORT), xs}, &ys));
    tu_ok(tnt_predict_on_batch(ml, &(tnt_tensor){TNT_SHAPE(NS, 2 * LONG), xl}, &yl));
    const int V = SMALL.vocab_size;
    for (int i = 0; i < NS; i++)
        tu_assert_close(yl->data + i * LONG * V, ys->data + i * SHORT * V, SHORT * V, 1e-4, 1e-5, "logits, padded vs short");
    /* the padded positions are not inert inputs (their encoder input is the position encoding):
     * the equality above holds because they are masked as keys. The comparison is sensitive: a
     * real token in their place changes the outputs. */
    xl[2 * LONG + 4] = 7; /* second sentence, source position 4 */
    tnt_tensor *y2 = NULL;
    tu_ok(tnt_predict_on_batch(ml, &(tnt_tensor){TNT_SHAPE(NS, 2 * LONG), xl}, &y2));
    double diff = 0;
    for (int k = 0; k < SHORT * V; k++) diff += fabs((double)y2->data[LONG * V + k] - (double)yl->data[LONG * V + k]);
    assert_true(diff > 1e-4);
    tnt_tensor_free(ys), tnt_tensor_free(yl), tnt_tensor_free(y2);
    free(w);
    tnt_model_free(ms), tnt_model_free(ml);
}

static void test_tiny_learns_copy(void **state) {
    (void)state;
    enum { T = 8, NS = 256, B = 32 };
    transformer_params p = TRANSFORMER_TINY_PARAMS;
    p.vocab_size = 16, p.hidden_size = 32, p.filter_size = 64, p.learning_rate_warmup_steps = 40;
    float *x = malloc(sizeof(float) * NS * 2 * T), *y = malloc(sizeof(float) * NS * T);
    make_copy_data(x, y, NS, T, p.vocab_size, 1);
    tnt_model *m = transformer_model(&p, T, NULL);
    assert_non_null(m);
    tnt_optimizer *opt = tnt_optimizer_new("adam", &(tnt_optimizer_opts){.learning_rate = 1e-3f, .beta_1 = p.adam_beta1,
                                                                         .beta_2 = p.adam_beta2, .epsilon = p.adam_epsilon});
    tu_ok(tnt_compile(m, &(tnt_compile_opts){.optimizer = opt, .loss = TNT_SPARSE_CATEGORICAL_CROSSENTROPY, .from_logits = true,
                                             .label_smoothing = p.label_smoothing, .has_ignore_class = true,
                                             .ignore_class = 0, .metrics = "sparse_categorical_accuracy"}));
    tu_ok(transformer_init_weights(m, &p, 1));
    tnt_dataset *ds = tnt_dataset_batch(tnt_dataset_shuffle(tnt_dataset_from_arrays(x, TNT_SHAPE(2 * T), y, TNT_SHAPE(T), NS, false),
                                                            NS, 1), B, true);
    tnt_callback cb = transformer_lr_callback(&p);
    tnt_history *h = NULL;
    tu_ok(tnt_fit(m, ds, &(tnt_fit_opts){.epochs = 6, .callbacks = &cb, .n_callbacks = 1}, &h));
    double first = tnt_history_get(h, "loss", 0), last = tnt_history_get(h, "loss", 5);
    double acc = tnt_history_get(h, "sparse_categorical_accuracy", 5);
    print_message("tiny copy task: loss %.4f -> %.4f, accuracy %.3f, lr at step 48 %.5f\n", first, last, acc,
                  transformer_learning_rate(&p, 48));
    assert_true(isfinite(last));
    assert_true(last < 0.8 * first);
    /* the schedule: 0 at step 0, linear warm-up, then rsqrt */
    assert_true(transformer_learning_rate(&p, 0) == 0.0);
    assert_true(fabs(transformer_learning_rate(&p, 40) - (double)p.learning_rate / sqrt(32.0) / sqrt(40.0)) < 1e-12);
    assert_true(fabs(transformer_learning_rate(&p, 160) - (double)p.learning_rate / sqrt(32.0) / sqrt(160.0)) < 1e-12);
    assert_true(fabs(transformer_learning_rate(&p, 20) - 0.5 * transformer_learning_rate(&p, 40)) < 1e-12);
    assert_int_equal(tnt_optimizer_iterations(tnt_model_optimizer(m)), 6 * (NS / B));
    tnt_history_free(h);
    tnt_dataset_free(ds);
    tnt_model_free(m);
    free(x), free(y);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_classifier_params),
        cmocka_unit_test(test_model_garden_counts),
        cmocka_unit_test(test_tied_embedding_gradient),
        cmocka_unit_test(test_padding_invariance),
        cmocka_unit_test(test_tiny_learns_copy),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

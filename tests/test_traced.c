/* test_traced.c: the traced layer (an operation graph behind the layer contract).
 *
 * A Dense written as a graph (matmul + add + relu on two weights) trains as the built-in Dense
 * (weights and losses within 1e-6) from the same start; a two-input traced layer with a custom
 * class name survives a Keras JSON round trip (read back through the "tnt_ops" key) and
 * whole-model .h5 and .keras saves and loads with equal predictions; Keras's MultiHeadAttention
 * written with einsum and softmax equals the built-in layer, before and after training; a Keras 2
 * model with TFOpLambda and SlicingOpLambda layers predicts as NumPy, round-trips and trains;
 * errors name the layer, the shapes and an unmapped TensorFlow function. */
#include "testutil.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { N = 40, IN = 4, UNITS = 3, BATCH = 8 };
static float xs[N * IN], ys[N * 2];

static tnt_opgraph *dense_graph(int in, int units, bool relu) {
    tnt_opgraph *g = tnt_opgraph_new();
    int x = tnt_opgraph_input(g, TNT_SHAPE(TNT_DIM_NONE, in));
    int k = tnt_opgraph_weight(g, "kernel", TNT_SHAPE(in, units), "glorot_uniform", true);
    int b = tnt_opgraph_weight(g, "bias", TNT_SHAPE(units), "zeros", true);
    int y = tnt_opgraph_op(g, "matmul", 2, (int[]){x, k}, NULL);
    y = tnt_opgraph_op(g, "add", 2, (int[]){y, b}, NULL);
    if (relu) y = tnt_opgraph_op(g, "relu", 1, (int[]){y}, NULL);
    assert_true(y >= 0);
    tu_ok(tnt_opgraph_output(g, y));
    return g;
}

static tnt_model *mlp(bool traced) {
    tnt_model *m = tnt_sequential(NULL);
    tu_ok(tnt_model_add(m, tnt_input_layer(TNT_SHAPE(IN), NULL)));
    tnt_layer *first = traced ? tnt_traced_layer(dense_graph(IN, UNITS, true), "MyDense", "hidden")
                              : tnt_dense(UNITS, &(tnt_layer_opts){.name = "hidden", .activation = TNT_ACT_RELU});
    assert_non_null(first);
    tu_ok(tnt_model_add(m, first));
    tu_ok(tnt_model_add(m, tnt_dense(2, &(tnt_layer_opts){.name = "out"})));
    tu_ok(tnt_compile(m, &(tnt_compile_opts){.optimizer = tnt_adam(0.02f), .loss = TNT_MEAN_SQUARED_ERROR, .seed = 5}));
    return m;
}

static void make_data(void) {
    tu_fill(xs, N * IN, 11);
    for (int i = 0; i < N; i++) {
        ys[2 * i] = xs[i * IN] * xs[i * IN + 1] + 0.5f * xs[i * IN + 2];
        ys[2 * i + 1] = fabsf(xs[i * IN + 3]) - 0.3f;
    }
}

static void test_dense_as_graph_equals_dense(void **state) {
    (void)state;
    make_data();
    tnt_model *a = mlp(false), *b = mlp(true);
    int64_t n = tnt_model_count_params(a);
    assert_int_equal(n, tnt_model_count_params(b));
    float *wa = malloc((size_t)n * sizeof(float)), *wb = malloc((size_t)n * sizeof(float));
    tu_ok(tnt_get_weights(a, wa, n));
    tu_ok(tnt_set_weights(b, wa, n));
    tnt_dataset *ds = tnt_dataset_batch(tnt_dataset_from_arrays(xs, TNT_SHAPE(IN), ys, TNT_SHAPE(2), N, false), BATCH, false);
    tnt_history *ha, *hb;
    tu_ok(tnt_fit(a, ds, &(tnt_fit_opts){.epochs = 4}, &ha));
    tu_ok(tnt_fit(b, ds, &(tnt_fit_opts){.epochs = 4}, &hb));
    tu_ok(tnt_get_weights(a, wa, n));
    tu_ok(tnt_get_weights(b, wb, n));
    tu_assert_close(wb, wa, n, 1e-6, 1e-6, "traced Dense weights against Dense");
    for (int e = 0; e < 4; e++) {
        double la = tnt_history_get(ha, "loss", e), lb = tnt_history_get(hb, "loss", e);
        if (!(fabs(la - lb) <= 1e-6 * fabs(la) + 1e-7)) fail_msg("epoch %d loss: traced %.9g, Dense %.9g", e, lb, la);
    }
    assert_true(tnt_history_get(ha, "loss", 3) < tnt_history_get(ha, "loss", 0));
    assert_string_equal(tnt_layer_class(tnt_model_get_layer(b, "hidden")), "MyDense");
    tnt_history_free(ha), tnt_history_free(hb);
    tnt_dataset_free(ds);
    free(wa), free(wb);
    tnt_model_free(a), tnt_model_free(b);
}

/* f(x, y) = [sum(x * w, -1, keepdims) + mean(y^2, -1, keepdims), x[:, ::-1] - y[:, :3]] with y
 * (2, 2) per sample read flat */
static tnt_layer *two_input_layer(void) {
    tnt_opgraph *g = tnt_opgraph_new();
    int x = tnt_opgraph_input(g, TNT_SHAPE(TNT_DIM_NONE, 3));
    int y = tnt_opgraph_input(g, TNT_SHAPE(TNT_DIM_NONE, 2, 2));
    int w = tnt_opgraph_weight(g, "w", TNT_SHAPE(3), "random_normal", true);
    int yf = tnt_opgraph_op(g, "reshape", 1, (int[]){y}, "{\"shape\": [-1, 4]}");
    int a = tnt_opgraph_op(g, "multiply", 2, (int[]){x, w}, NULL);
    a = tnt_opgraph_op(g, "sum", 1, (int[]){a}, "{\"axis\": -1, \"keepdims\": true}");
    int b = tnt_opgraph_op(g, "square", 1, (int[]){yf}, NULL);
    b = tnt_opgraph_op(g, "mean", 1, (int[]){b}, "{\"axis\": [-1], \"keepdims\": true}");
    int s = tnt_opgraph_op(g, "add", 2, (int[]){a, b}, NULL);
    int rev = tnt_opgraph_op(g, "slice", 1, (int[]){x}, "{\"spec\": [[null, null, null], [null, null, -1]]}");
    int y2 = tnt_opgraph_op(g, "slice", 1, (int[]){yf}, "{\"spec\": [\"...\", [null, 3, null]]}");
    int d = tnt_opgraph_op(g, "subtract", 2, (int[]){rev, y2}, NULL);
    int out = tnt_opgraph_op(g, "concatenate", 2, (int[]){s, d}, "{\"axis\": -1}");
    assert_true(out >= 0);
    tu_ok(tnt_opgraph_output(g, out));
    tnt_layer *l = tnt_traced_layer(g, "PairMix", "pair_mix");
    assert_non_null(l);
    return l;
}

static tnt_model *two_input_model(void) {
    tnt_graph *g = tnt_graph_new();
    tnt_ktensor ins[2] = {tnt_graph_input(g, TNT_SHAPE(3), "x"), tnt_graph_input(g, TNT_SHAPE(2, 2), "y")};
    tnt_ktensor h = tnt_call_n(g, two_input_layer(), 2, ins);
    tnt_ktensor out = tnt_call(g, tnt_dense(2, NULL), h);
    tnt_model *m = tnt_functional(g, 2, ins, 1, &out, "pair");
    tnt_graph_free(g);
    assert_non_null(m);
    return m;
}

static void predict(tnt_model *m, const float *x, const float *y, float *out) {
    float packed[5 * 7]; /* several inputs: each row holds input 0, then input 1 */
    for (int i = 0; i < 5; i++) memcpy(packed + i * 7, x + i * 3, 3 * sizeof(float)),
                                memcpy(packed + i * 7 + 3, y + i * 4, 4 * sizeof(float));
    tnt_tensor *res = NULL;
    tu_ok(tnt_predict_on_batch(m, &(tnt_tensor){TNT_SHAPE(5, 7), packed}, &res));
    memcpy(out, res->data, 10 * sizeof(float));
    tnt_tensor_free(res);
}

static void test_json_h5_and_keras_round_trip(void **state) {
    (void)state;
    tnt_model *m = two_input_model();
    tu_ok(tnt_compile(m, &(tnt_compile_opts){.optimizer = tnt_sgd(0.1f), .loss = TNT_MEAN_SQUARED_ERROR, .seed = 3}));
    float x[15], y[20], p0[10], p1[10], p2[10];
    tu_fill(x, 15, 1), tu_fill(y, 20, 2);
    predict(m, x, y, p0);
    char *json = NULL;
    tu_ok(tnt_model_to_json(m, &json));
    assert_non_null(strstr(json, "\"class_name\":\"PairMix\""));
    assert_non_null(strstr(json, "\"tnt_ops\""));
    tnt_model *back = tnt_model_from_json(json);
    if (!back) fail_msg("from_json: %s", tnt_last_error());
    free(json);
    int64_t n = tnt_model_count_params(m);
    float *w = malloc((size_t)n * sizeof(float));
    tu_ok(tnt_get_weights(m, w, n));
    tu_ok(tnt_set_weights(back, w, n));
    predict(back, x, y, p1);
    tu_assert_close(p1, p0, 10, 1e-6, 1e-7, "predictions after a JSON round trip");
    tnt_model_free(back);

    const char *path = tu_tmp_path("pair.h5");
    tu_ok(tnt_save_model(m, path, NULL));
    tnt_model *loaded = tnt_load_model(path, true);
    if (!loaded) fail_msg("load_model: %s", tnt_last_error());
    predict(loaded, x, y, p2);
    tu_assert_bitwise(p2, p0, 10, "predictions after an .h5 round trip");
    assert_string_equal(tnt_layer_class(tnt_model_get_layer(loaded, "pair_mix")), "PairMix");
    tnt_model_free(loaded);

    /* and a Keras 3 .keras file (config.json with tnt_ops, the weights under the class's name) */
    const char *kpath = tu_tmp_path("pair.keras");
    tu_ok(tnt_save_model(m, kpath, NULL));
    loaded = tnt_load_model(kpath, true);
    if (!loaded) fail_msg("load_model .keras: %s", tnt_last_error());
    float p3[10];
    predict(loaded, x, y, p3);
    tu_assert_bitwise(p3, p0, 10, "predictions after a .keras round trip");
    tnt_model_free(loaded);
    free(w);
    tnt_model_free(m);
}

/* Keras's MultiHeadAttention (query and value, key = value) written as operations, with Keras's
 * weight layout and its einsum equations, in a model against the built-in layer: equal outputs,
 * and equal weights after training (1e-5). */
enum { TQ = 4, TV = 5, DM = 6, HEADS = 2, KD = 3, NA = 24, PACK = (TQ + TV) * DM };

static int weighted(tnt_opgraph *g, const char *eq, int x, int kernel, int bias) {
    char attrs[64];
    snprintf(attrs, sizeof attrs, "{\"equation\": \"%s\"}", eq);
    int y = tnt_opgraph_op(g, "einsum", 2, (int[]){x, kernel}, attrs);
    return bias >= 0 ? tnt_opgraph_op(g, "add", 2, (int[]){y, bias}, NULL) : y;
}

static tnt_layer *attention_graph(void) {
    tnt_opgraph *g = tnt_opgraph_new();
    int q = tnt_opgraph_input(g, TNT_SHAPE(TNT_DIM_NONE, TQ, DM));
    int v = tnt_opgraph_input(g, TNT_SHAPE(TNT_DIM_NONE, TV, DM));
    int w[8];
    const char *names[8] = {"query/kernel", "query/bias", "key/kernel", "key/bias", "value/kernel", "value/bias",
                            "attention_output/kernel", "attention_output/bias"};
    for (int i = 0; i < 8; i++) {
        tnt_shape s = i == 6 ? TNT_SHAPE(HEADS, KD, DM) : i == 7 ? TNT_SHAPE(DM) : i % 2 ? TNT_SHAPE(HEADS, KD)
                                                                                         : TNT_SHAPE(DM, HEADS, KD);
        w[i] = tnt_opgraph_weight(g, names[i], s, i % 2 ? "zeros" : "glorot_uniform", true);
    }
    int qh = weighted(g, "abc,cde->abde", q, w[0], w[1]);
    int kh = weighted(g, "abc,cde->abde", v, w[2], w[3]);
    int vh = weighted(g, "abc,cde->abde", v, w[4], w[5]);
    char scale[64];
    snprintf(scale, sizeof scale, "{\"value\": %.9g}", 1.0 / sqrt((double)KD));
    int sc = tnt_opgraph_op(g, "constant", 0, NULL, scale);
    qh = tnt_opgraph_op(g, "multiply", 2, (int[]){qh, sc}, NULL);
    int scores = tnt_opgraph_op(g, "einsum", 2, (int[]){kh, qh}, "{\"equation\": \"aecd,abcd->acbe\"}");
    int probs = tnt_opgraph_op(g, "softmax", 1, (int[]){scores}, "{\"axis\": -1}");
    int ctx = tnt_opgraph_op(g, "einsum", 2, (int[]){probs, vh}, "{\"equation\": \"acbe,aecd->abcd\"}");
    int out = weighted(g, "abcd,cde->abe", ctx, w[6], w[7]);
    assert_true(out >= 0);
    tu_ok(tnt_opgraph_output(g, out));
    tnt_layer *l = tnt_traced_layer(g, "MyAttention", "attention");
    assert_non_null(l);
    return l;
}

static tnt_model *attention_model(bool traced) {
    tnt_graph *g = tnt_graph_new();
    tnt_ktensor ins[2] = {tnt_graph_input(g, TNT_SHAPE(TQ, DM), "q"), tnt_graph_input(g, TNT_SHAPE(TV, DM), "v")};
    tnt_ktensor h = traced ? tnt_call_n(g, attention_graph(), 2, ins)
                           : tnt_call_attention(g, tnt_multi_head_attention(HEADS, KD, &(tnt_attention_opts){
                                                                                 .name = "attention"}),
                                                ins[0], ins[1], (tnt_ktensor){-1}, (tnt_ktensor){-1}, false);
    h = tnt_call(g, tnt_global_average_pooling1d(NULL), h);
    tnt_ktensor out = tnt_call(g, tnt_dense(2, NULL), h);
    tnt_model *m = tnt_functional(g, 2, ins, 1, &out, NULL);
    tnt_graph_free(g);
    if (!m) fail_msg("attention model: %s", tnt_last_error());
    /* SGD: the key bias's exact gradient is zero (softmax ignores a constant per query row), and
     * Adam would turn the rounding noise of either engine into full-size steps */
    tu_ok(tnt_compile(m, &(tnt_compile_opts){.optimizer = tnt_sgd(0.1f), .loss = TNT_MEAN_SQUARED_ERROR, .seed = 4}));
    return m;
}

static void test_attention_as_graph_equals_mha(void **state) {
    (void)state;
    static float x[NA * PACK], y[NA * 2];
    tu_fill(x, NA * PACK, 31);
    for (int i = 0; i < NA; i++) y[2 * i] = x[i * PACK] * x[i * PACK + 30], y[2 * i + 1] = x[i * PACK + 7] - 0.5f;
    tnt_model *a = attention_model(false), *b = attention_model(true);
    int64_t n = tnt_model_count_params(a);
    assert_int_equal(n, tnt_model_count_params(b));
    float *wa = malloc((size_t)n * sizeof(float)), *wb = malloc((size_t)n * sizeof(float));
    tu_ok(tnt_get_weights(a, wa, n));
    for (int64_t i = 0; i < n; i++) wa[i] += 0.05f * (float)((i * 37) % 11 - 5) / 5.0f; /* non-zero biases too */
    tu_ok(tnt_set_weights(a, wa, n));
    tu_ok(tnt_set_weights(b, wa, n));
    tnt_tensor *pa, *pb;
    tu_ok(tnt_predict_on_batch(a, &(tnt_tensor){TNT_SHAPE(NA, PACK), x}, &pa));
    tu_ok(tnt_predict_on_batch(b, &(tnt_tensor){TNT_SHAPE(NA, PACK), x}, &pb));
    tu_assert_close(pb->data, pa->data, NA * 2, 1e-5, 1e-6, "attention as operations against MultiHeadAttention");
    tnt_tensor_free(pa), tnt_tensor_free(pb);
    tnt_dataset *ds = tnt_dataset_batch(tnt_dataset_from_arrays(x, TNT_SHAPE(PACK), y, TNT_SHAPE(2), NA, false), 8, false);
    tnt_history *ha, *hb;
    tu_ok(tnt_fit(a, ds, &(tnt_fit_opts){.epochs = 3}, &ha));
    tu_ok(tnt_fit(b, ds, &(tnt_fit_opts){.epochs = 3}, &hb));
    tu_ok(tnt_get_weights(a, wa, n));
    tu_ok(tnt_get_weights(b, wb, n));
    tu_assert_close(wb, wa, n, 1e-5, 1e-6, "attention weights after training");
    for (int e = 0; e < 3; e++) {
        double la = tnt_history_get(ha, "loss", e), lb = tnt_history_get(hb, "loss", e);
        if (!(fabs(la - lb) <= 1e-5 * fabs(la) + 1e-7)) fail_msg("epoch %d loss: traced %.9g, MHA %.9g", e, lb, la);
    }
    assert_true(tnt_history_get(ha, "loss", 2) < tnt_history_get(ha, "loss", 0));
    tnt_history_free(ha), tnt_history_free(hb);
    tnt_dataset_free(ds);
    free(wa), free(wb);
    tnt_model_free(a), tnt_model_free(b);
}

/* Keras 2 TFOpLambda and SlicingOpLambda layers (fixtures/tfop_model.json, gen_ops.py: the model
 * as Keras 2 writes it, the Dense weights, an input batch and NumPy's output). */
static cJSON *read_json_file(const char *path) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *txt = malloc((size_t)n + 1);
    assert_int_equal(fread(txt, 1, (size_t)n, f), (size_t)n);
    txt[n] = 0;
    fclose(f);
    cJSON *j = cJSON_Parse(txt);
    free(txt);
    assert_non_null(j);
    return j;
}

static void floats_of(const cJSON *o, float *out, int64_t n) {
    const cJSON *e;
    int64_t i = 0;
    cJSON_ArrayForEach(e, cJSON_GetObjectItem(o, "data")) {
        assert_true(i < n);
        out[i++] = (float)e->valuedouble;
    }
    assert_int_equal(i, n);
}

static void test_keras2_tf_op_layers(void **state) {
    (void)state;
    cJSON *fx = read_json_file("fixtures/tfop_model.json");
    char *json = cJSON_PrintUnformatted(cJSON_GetObjectItem(fx, "model"));
    tnt_model *m = tnt_model_from_json(json);
    if (!m) fail_msg("from_json: %s", tnt_last_error());
    float w[15], x[20], want[25], got[25];
    floats_of(cJSON_GetObjectItem(fx, "kernel"), w, 12);
    floats_of(cJSON_GetObjectItem(fx, "bias"), w + 12, 3);
    floats_of(cJSON_GetObjectItem(fx, "x"), x, 20);
    floats_of(cJSON_GetObjectItem(fx, "y"), want, 25);
    assert_int_equal(tnt_model_count_params(m), 15);
    tu_ok(tnt_set_weights(m, w, 15));
    tnt_tensor *res = NULL;
    tu_ok(tnt_predict_on_batch(m, &(tnt_tensor){TNT_SHAPE(5, 4), x}, &res));
    assert_int_equal(tnt_shape_numel(res->shape), 25);
    tu_assert_close(res->data, want, 25, 1e-5, 1e-6, "TFOpLambda model against NumPy");
    memcpy(got, res->data, sizeof got);
    tnt_tensor_free(res);
    assert_string_equal(tnt_layer_class(tnt_model_get_layer(m, "tf.__operators__.getitem")), "SlicingOpLambda");

    /* written back (the traced operations under tnt_ops) and read again */
    char *back = NULL;
    tu_ok(tnt_model_to_json(m, &back));
    tnt_model *m2 = tnt_model_from_json(back);
    if (!m2) fail_msg("from_json of the written model: %s", tnt_last_error());
    tu_ok(tnt_set_weights(m2, w, 15));
    tu_ok(tnt_predict_on_batch(m2, &(tnt_tensor){TNT_SHAPE(5, 4), x}, &res));
    tu_assert_bitwise(res->data, got, 25, "TFOpLambda model after a JSON round trip");
    tnt_tensor_free(res);
    free(back);
    tnt_model_free(m2);

    /* it trains: the gradient reaches Dense through every TensorFlow call */
    tu_ok(tnt_compile(m, &(tnt_compile_opts){.optimizer = tnt_sgd(0.05f), .loss = TNT_MEAN_SQUARED_ERROR, .seed = 1}));
    float target[25] = {0};
    tnt_dataset *ds = tnt_dataset_batch(tnt_dataset_from_arrays(x, TNT_SHAPE(4), target, TNT_SHAPE(5), 5, false), 5, false);
    tnt_history *h;
    tu_ok(tnt_fit(m, ds, &(tnt_fit_opts){.epochs = 5}, &h));
    assert_true(tnt_history_get(h, "loss", 4) < tnt_history_get(h, "loss", 0));
    tnt_history_free(h);
    tnt_dataset_free(ds);
    tnt_model_free(m);

    /* a TensorFlow function without a mapping is named */
    char *bad = strstr(json, "\"function\":\"nn.relu\"");
    assert_non_null(bad);
    memcpy(bad, "\"function\":\"nn.selu\"", strlen("\"function\":\"nn.selu\""));
    assert_null(tnt_model_from_json(json));
    tu_error_contains("TFOpLambda calls the TensorFlow function \"nn.selu\", which this library does not map");
    free(json);
    cJSON_Delete(fx);
}

/* Under mixed_bfloat16 the traced layer keeps float32 compute (it has no bf16 engine): its
 * outputs equal the float32 layer's bit for bit, and its policy goes through the Keras config. */
static tnt_model *traced_only(void) {
    tnt_model *m = tnt_sequential(NULL);
    tu_ok(tnt_model_add(m, tnt_input_layer(TNT_SHAPE(IN), NULL)));
    tu_ok(tnt_model_add(m, tnt_traced_layer(dense_graph(IN, UNITS, true), "MyDense", "hidden")));
    return m;
}

static void test_mixed_precision_policy(void **state) {
    (void)state;
    make_data();
    tnt_model *f32 = traced_only();
    tu_ok(tnt_mixed_precision_set_global_policy("mixed_bfloat16"));
    tnt_model *mixed = traced_only();
    tu_ok(tnt_mixed_precision_set_global_policy("float32"));
    tu_ok(tnt_model_build(f32, TNT_SHAPE(IN)));
    tu_ok(tnt_model_build(mixed, TNT_SHAPE(IN)));
    int64_t n = tnt_model_count_params(f32);
    float *w = malloc((size_t)n * sizeof(float));
    tu_ok(tnt_get_weights(f32, w, n));
    tu_ok(tnt_set_weights(mixed, w, n));
    tnt_tensor *a, *b;
    tu_ok(tnt_predict_on_batch(f32, &(tnt_tensor){TNT_SHAPE(N, IN), xs}, &a));
    tu_ok(tnt_predict_on_batch(mixed, &(tnt_tensor){TNT_SHAPE(N, IN), xs}, &b));
    tu_assert_bitwise(b->data, a->data, N * UNITS, "traced layer under mixed_bfloat16 against float32");
    char *json = NULL;
    tu_ok(tnt_model_to_json(mixed, &json));
    assert_non_null(strstr(json, "mixed_bfloat16"));
    tnt_model *back = tnt_model_from_json(json);
    assert_non_null(back);
    free(json);
    tu_ok(tnt_model_to_json(back, &json));
    assert_non_null(strstr(json, "mixed_bfloat16"));
    free(json);
    tnt_tensor_free(a), tnt_tensor_free(b);
    free(w);
    tnt_model_free(back), tnt_model_free(f32), tnt_model_free(mixed);
}

static void test_errors(void **state) {
    (void)state;
    tnt_model *m = tnt_sequential(NULL);
    tu_ok(tnt_model_add(m, tnt_input_layer(TNT_SHAPE(5), NULL)));
    assert_int_not_equal(tnt_model_add(m, tnt_traced_layer(dense_graph(IN, UNITS, false), NULL, "bad")), TNT_OK);
    tu_error_contains("layer \"bad\" (TracedLayer)");
    tu_error_contains("input 0 has shape (5,), its graph expects (None, 4)");
    tnt_model_free(m);

    /* an output without the batch axis */
    tnt_opgraph *g = tnt_opgraph_new();
    int x = tnt_opgraph_input(g, TNT_SHAPE(TNT_DIM_NONE, 3));
    tu_ok(tnt_opgraph_output(g, tnt_opgraph_op(g, "sum", 1, (int[]){x}, NULL)));
    m = tnt_sequential(NULL);
    tu_ok(tnt_model_add(m, tnt_input_layer(TNT_SHAPE(3), NULL)));
    assert_int_not_equal(tnt_model_add(m, tnt_traced_layer(g, NULL, "total")), TNT_OK);
    tu_error_contains("must keep the batch axis first");
    tnt_model_free(m);
    assert_null(tnt_traced_layer(NULL, NULL, NULL));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dense_as_graph_equals_dense),
        cmocka_unit_test(test_json_h5_and_keras_round_trip),
        cmocka_unit_test(test_attention_as_graph_equals_mha),
        cmocka_unit_test(test_keras2_tf_op_layers),
        cmocka_unit_test(test_mixed_precision_policy),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, tu_tmpdir_setup, tu_tmpdir_teardown);
}

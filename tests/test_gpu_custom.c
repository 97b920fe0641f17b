/* test_gpu_custom.c: on the emulated device (TNT_GPU_EMULATE=1; scripts/gpu_check.sh also runs it on
 * a real GPU), in test_gpu_model.c's style: each model trains once on the CPU engine and once on the
 * device with the same seed and data, and the two must agree.
 *   - C custom layers (tnt_custom_layer_def) run their host functions with their data going
 *     through the host: one with weights (a per-feature scale and a state counter its forward
 *     updates), one without (x^3 / 4), in a model with Dense layers around them; the INFO line
 *     naming each such layer comes once per model.
 *   - KerasHub's PositionEmbedding + Add (its device path), with a sequence shorter than
 *     sequence_length, and the benchmark's encoder classifier (zoo/transformer.c) at a small size. */
#include "testutil.h"

#include "core/config.h"
#include "gpu/gpu.h"
#include "model/device.h"
#include "model/model.h"
#include "transformer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { N = 48, SEQ = 6, FEAT = 4, CLASSES = 3, BATCH = 16 };

static float xs[N * SEQ * FEAT], ys[N], ids[N * SEQ];
static double RTOL = 1e-5, ATOL = 1e-6;

/* ---- custom layers ------------------------------------------------------------------------- */

/* "FeatureScale": y = x * s (s per feature, ones at the start, trainable), and "calls", a state
 * weight its training forward counts up (non-trainable: it must come back from the host too) */
typedef struct scale_dims {
    int64_t rows, feat; /* per sample: rows of feat */
} scale_dims;

static tnt_status scale_build(tnt_layer *l, tnt_shape in, tnt_shape *out, void *user) {
    scale_dims *d = user;
    d->feat = in.dim[in.ndim - 1];
    d->rows = tnt_shape_numel(in) / d->feat;
    if (tnt_layer_add_weight(l, "scale", TNT_SHAPE(d->feat), TNT_INIT_ONES, true) < 0) return TNT_ERR_ARG;
    if (tnt_layer_add_weight(l, "calls", TNT_SHAPE(1), TNT_INIT_ZEROS, false) < 0) return TNT_ERR_ARG;
    *out = in;
    return TNT_OK;
}

static tnt_status scale_forward(tnt_layer *l, int64_t batch, const float *x, float *y, bool training, void *user) {
    const scale_dims *d = user;
    const float *s = tnt_layer_weight_value(l, 0);
    float *calls = tnt_layer_weight_value(l, 1);
    for (int64_t r = 0; r < batch * d->rows; r++)
        for (int64_t f = 0; f < d->feat; f++) y[r * d->feat + f] = x[r * d->feat + f] * s[f];
    if (training) calls[0] += 1.0f;
    return TNT_OK;
}

static tnt_status scale_backward(tnt_layer *l, int64_t batch, const float *x, const float *y, const float *dy,
                                 float *dx, void *user) {
    (void)y;
    const scale_dims *d = user;
    const float *s = tnt_layer_weight_value(l, 0);
    float *ds = tnt_layer_weight_grad(l, 0);
    for (int64_t f = 0; f < d->feat; f++) ds[f] = 0.0f;
    for (int64_t r = 0; r < batch * d->rows; r++)
        for (int64_t f = 0; f < d->feat; f++) {
            ds[f] += dy[r * d->feat + f] * x[r * d->feat + f];
            if (dx) dx[r * d->feat + f] = dy[r * d->feat + f] * s[f];
        }
    return TNT_OK;
}

static tnt_layer *feature_scale(const char *name) {
    scale_dims *d = calloc(1, sizeof *d);
    tnt_custom_layer_def def = {.class_name = "FeatureScale", .user = d, .build = scale_build,
                                .forward = scale_forward, .backward = scale_backward, .destroy = free};
    return tnt_custom_layer(&def, name);
}

/* "Cube": y = x^3 / 4, no weight */
static tnt_status cube_build(tnt_layer *l, tnt_shape in, tnt_shape *out, void *user) {
    (void)l;
    *(int64_t *)user = tnt_shape_numel(in);
    *out = in;
    return TNT_OK;
}

static tnt_status cube_forward(tnt_layer *l, int64_t batch, const float *x, float *y, bool training, void *user) {
    (void)l, (void)training;
    const int64_t n = batch * *(int64_t *)user;
    for (int64_t i = 0; i < n; i++) y[i] = 0.25f * x[i] * x[i] * x[i];
    return TNT_OK;
}

static tnt_status cube_backward(tnt_layer *l, int64_t batch, const float *x, const float *y, const float *dy,
                                float *dx, void *user) {
    (void)l, (void)y;
    const int64_t n = batch * *(int64_t *)user;
    for (int64_t i = 0; dx && i < n; i++) dx[i] = 0.75f * x[i] * x[i] * dy[i];
    return TNT_OK;
}

static tnt_layer *cube(const char *name) {
    int64_t *n = calloc(1, sizeof *n);
    tnt_custom_layer_def def = {.class_name = "Cube", .user = n, .build = cube_build, .forward = cube_forward,
                                .backward = cube_backward, .destroy = free};
    return tnt_custom_layer(&def, name);
}

/* Dense (6 steps x 4 features -> 5), FeatureScale, Cube, Flatten, Dense(softmax): the custom
 * layers between device layers, the first one's input gradient needed */
static tnt_model *custom_model(void) {
    tnt_model *m = tnt_sequential("custom");
    tu_ok(tnt_model_add(m, tnt_input_layer(TNT_SHAPE(SEQ, FEAT), NULL)));
    tu_ok(tnt_model_add(m, tnt_dense(5, &(tnt_layer_opts){.activation = TNT_ACT_TANH})));
    tu_ok(tnt_model_add(m, feature_scale("the_scale")));
    tu_ok(tnt_model_add(m, cube("the_cube")));
    tu_ok(tnt_model_add(m, tnt_flatten(NULL)));
    tu_ok(tnt_model_add(m, tnt_dense(CLASSES, &(tnt_layer_opts){.activation = TNT_ACT_SOFTMAX})));
    return m;
}

/* ---- PositionEmbedding ---------------------------------------------------------------------- */

/* Dense features, + PositionEmbedding(10) over 6 steps (glorot_uniform), the mean over the steps */
static tnt_model *posemb_model(void) {
    tnt_graph *g = tnt_graph_new();
    tnt_ktensor x = tnt_graph_input(g, TNT_SHAPE(SEQ, FEAT), "x");
    tnt_ktensor h = tnt_call(g, tnt_dense(8, &(tnt_layer_opts){.activation = TNT_ACT_RELU}), x);
    tnt_ktensor p = tnt_call(g, tnt_position_embedding(10, TNT_INIT_DEFAULT, "position_embedding"), h);
    h = tnt_call2(g, tnt_add("position_add"), h, p);
    h = tnt_call(g, tnt_global_average_pooling1d(NULL), h);
    h = tnt_call(g, tnt_dense(CLASSES, &(tnt_layer_opts){.activation = TNT_ACT_SOFTMAX}), h);
    tnt_model *m = tnt_functional(g, 1, &x, 1, &h, "posemb");
    tnt_graph_free(g);
    return m;
}

static tnt_model *classifier_model(void) { return transformer_encoder_classifier(10, SEQ, 8, 2, 16, 1, CLASSES); }

/* ---- training on both ----------------------------------------------------------------------- */

typedef struct run {
    float *w;
    int64_t n;
    float *state; /* the non-trainable weights after training */
    int64_t n_state;
    double loss[3];
    float pred[BATCH * CLASSES];
    bool on_device, host_logged;
} run;

static run train(tnt_model *(*make)(void), const float *x, tnt_shape in, bool logits, tnt_device dev) {
    tnt_model *m = make();
    assert_non_null(m);
    tnt_optimizer_opts oo = {.learning_rate = 0.01f};
    tu_ok(tnt_compile(m, &(tnt_compile_opts){.optimizer = tnt_optimizer_new("adam", &oo),
                                             .loss = TNT_SPARSE_CATEGORICAL_CROSSENTROPY, .from_logits = logits,
                                             .seed = 5, .device = dev}));
    tnt_dataset *ds = tnt_dataset_batch(tnt_dataset_from_arrays(x, in, ys, TNT_SHAPE(), N, false), BATCH, false);
    tnt_history *h = NULL;
    tu_ok(tnt_fit(m, ds, &(tnt_fit_opts){.epochs = 3}, &h));
    run r = {.n = tnt_model_count_params(m), .on_device = m->on_device, .host_logged = m->host_path_logged};
    r.w = malloc((size_t)r.n * sizeof(float));
    tu_ok(tnt_get_weights(m, r.w, r.n));
    for (int e = 0; e < 3; e++) r.loss[e] = tnt_history_get(h, "loss", e);
    r.n_state = m->n_state;
    r.state = malloc((size_t)(r.n_state ? r.n_state : 1) * sizeof(float));
    tu_ok(tnt__model_host_weights(m));
    memcpy(r.state, m->state, (size_t)r.n_state * sizeof(float));
    tnt_tensor t = {.shape = in, .data = (float *)x}, *y = NULL;
    t.shape.ndim = in.ndim + 1;
    for (int d = in.ndim; d > 0; d--) t.shape.dim[d] = in.dim[d - 1];
    t.shape.dim[0] = BATCH;
    tu_ok(tnt_predict_on_batch(m, &t, &y));
    memcpy(r.pred, y->data, sizeof r.pred);
    tnt_tensor_free(y);
    tnt_history_free(h);
    tnt_dataset_free(ds);
    tnt_model_free(m);
    return r;
}

static void assert_same_run(const run *cpu, const run *gpu, const char *what) {
    assert_false(cpu->on_device);
    assert_true(gpu->on_device);
    assert_int_equal(cpu->n, gpu->n);
    tu_assert_close(gpu->w, cpu->w, cpu->n, RTOL, ATOL, what);
    assert_int_equal(cpu->n_state, gpu->n_state);
    tu_assert_close(gpu->state, cpu->state, cpu->n_state, RTOL, ATOL, what);
    tu_assert_close(gpu->pred, cpu->pred, BATCH * CLASSES, RTOL, ATOL, what);
    for (int e = 0; e < 3; e++)
        if (fabs(gpu->loss[e] - cpu->loss[e]) > RTOL * fabs(cpu->loss[e]) + ATOL)
            fail_msg("%s: loss of epoch %d: GPU %.9g, CPU %.9g", what, e + 1, gpu->loss[e], cpu->loss[e]);
}

static void free_run(run *r) { free(r->w), free(r->state); }

static void test_custom_layers_equal_cpu(void **state) {
    (void)state;
    run cpu = train(custom_model, xs, TNT_SHAPE(SEQ, FEAT), false, TNT_DEVICE_CPU);
    run gpu = train(custom_model, xs, TNT_SHAPE(SEQ, FEAT), false, TNT_DEVICE_GPU);
    assert_same_run(&cpu, &gpu, "custom layers through the host");
    assert_true(gpu.host_logged);
    /* FeatureScale's state counted the 3 x 3 training forwards on the device too */
    assert_int_equal(gpu.n_state, 1);
    assert_true(gpu.state[0] == 9.0f);
    free_run(&cpu), free_run(&gpu);
}

/* The INFO line: each custom layer named once per model, however many fits. */
static void test_custom_layers_info_line(void **state) {
    (void)state;
    const char *path = tu_tmp_path("gpu_custom_log.txt");
    fflush(stderr);
    int saved = dup(STDERR_FILENO);
    assert_non_null(freopen(path, "w", stderr));
    tnt_model *m = custom_model();
    tnt_optimizer_opts oo = {.learning_rate = 0.01f};
    tu_ok(tnt_compile(m, &(tnt_compile_opts){.optimizer = tnt_optimizer_new("sgd", &oo),
                                             .loss = TNT_SPARSE_CATEGORICAL_CROSSENTROPY, .device = TNT_DEVICE_GPU}));
    tnt_dataset *ds = tnt_dataset_batch(tnt_dataset_from_arrays(xs, TNT_SHAPE(SEQ, FEAT), ys, TNT_SHAPE(), N, false),
                                        BATCH, false);
    tnt_status s1 = tnt_fit(m, ds, &(tnt_fit_opts){.epochs = 1}, NULL);
    tnt_status s2 = tnt_fit(m, ds, &(tnt_fit_opts){.epochs = 1}, NULL);
    fflush(stderr);
    dup2(saved, STDERR_FILENO);
    close(saved);
    tu_ok(s1);
    tu_ok(s2);
    assert_true(m->on_device);
    tnt_dataset_free(ds);
    tnt_model_free(m);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char line[1024];
    int scale = 0, cube_lines = 0, other = 0;
    while (fgets(line, sizeof line, f))
        if (strstr(line, "go through the host")) {
            if (strstr(line, "INFO") && strstr(line, "layer \"the_scale\" (FeatureScale)")) scale++;
            else if (strstr(line, "INFO") && strstr(line, "layer \"the_cube\" (Cube)")) cube_lines++;
            else other++;
        }
    fclose(f);
    assert_int_equal(scale, 1);
    assert_int_equal(cube_lines, 1);
    assert_int_equal(other, 0);
}

static void test_position_embedding_equals_cpu(void **state) {
    (void)state;
    run cpu = train(posemb_model, xs, TNT_SHAPE(SEQ, FEAT), false, TNT_DEVICE_CPU);
    run gpu = train(posemb_model, xs, TNT_SHAPE(SEQ, FEAT), false, TNT_DEVICE_GPU);
    assert_same_run(&cpu, &gpu, "PositionEmbedding + Add");
    free_run(&cpu), free_run(&gpu);
}

static void test_encoder_classifier_equals_cpu(void **state) {
    (void)state;
    run cpu = train(classifier_model, ids, TNT_SHAPE(SEQ), true, TNT_DEVICE_CPU);
    run gpu = train(classifier_model, ids, TNT_SHAPE(SEQ), true, TNT_DEVICE_GPU);
    assert_same_run(&cpu, &gpu, "the encoder classifier");
    free_run(&cpu), free_run(&gpu);
}

int main(void) {
    if (!getenv("TNT_GPU_EMULATE")) setenv("TNT_GPU_EMULATE", "1", 1); /* ctest sets it too */
    setenv("TNT_LOG_LEVEL", "INFO", 1);                                /* the host path's line */
    if (tnt__config_load() != TNT_OK) return fprintf(stderr, "%s\n", tnt_last_error()), 1;
    const char *why = NULL;
    if (!tnt__gpu_available(&why)) return printf("test_gpu_custom: no device: %s\n", why), 77;
    if (!tnt__gpu_emulated()) RTOL = 1e-3, ATOL = 1e-4; /* a real GPU (GPU-DESIGN.md section 5) */
    tu_fill(xs, N * SEQ * FEAT, 7);
    for (int i = 0; i < N; i++) {
        float s = 0;
        for (int j = 0; j < SEQ * FEAT; j++) s += xs[i * SEQ * FEAT + j] * (j % 3 ? 1.0f : -0.8f);
        ys[i] = (float)(s > 0.3f ? 2 : s > -0.3f ? 1 : 0);
    }
    for (int i = 0; i < N * SEQ; i++) ids[i] = floorf((xs[i] + 1.0f) * 5.0f); /* 0 .. 9 */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_custom_layers_equal_cpu),
        cmocka_unit_test(test_custom_layers_info_line),
        cmocka_unit_test(test_position_embedding_equals_cpu),
        cmocka_unit_test(test_encoder_classifier_equals_cpu),
    };
    return cmocka_run_group_tests(tests, tu_tmpdir_setup, tu_tmpdir_teardown);
}

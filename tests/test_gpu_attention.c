/* test_gpu_attention.c: MultiHeadAttention's device path (layers/attention/attention_gpu.c) on
 * the emulated device (TNT_GPU_EMULATE=1) against the CPU layer (attention.c), whose values
 * test_layers_attention.c checks against PyTorch:
 *   - the layer alone: forward output, dquery, dvalue, dkey and every weight gradient within 1e-5
 *     for self- and cross-attention, value_dim != key_dim, output_dim, no bias, each mask, the
 *     causal mask, fully masked rows and dropout in training at a sample offset (the device draws
 *     the CPU's mask); inference with dropout configured is the identity on both
 *   - a Transformer block (Embedding, causal self-attention with dropout, Add, LayerNormalization,
 *     Dense) trained with SGD (momentum) on the device equals the CPU engine: weights, losses, predictions;
 *     before this path, dispatch kept it on the CPU. */
#include "gpu_device_util.h"
#include "testutil.h"

#include "core/config.h"
#include "gpu/gpu.h"
#include "layers/layer.h"
#include "model/device.h"
#include "model/model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static double RTOL = 1e-5, ATOL = 1e-6;

/* ---- the layer alone -------------------------------------------------------------------------- */

typedef struct mcase {
    const char *what;
    int heads, key_dim, value_dim, output_dim;
    bool no_bias;
    int64_t tq, tv, dq, dv, dk;
    bool am, qm, vm, causal;
    float dropout;
    bool training;
} mcase;

/* A mask of 1 and 0 with about a third masked; with row > 0 (the attention mask: per samples of
 * `per` values) each sample's first row of `row` values fully masked. */
static void fill_mask(float *m, int64_t n, int64_t row, int64_t per, uint64_t seed) {
    tu_fill(m, n, seed);
    for (int64_t i = 0; i < n; i++) m[i] = m[i] > -0.33f ? 1.0f : 0.0f;
    if (row > 0)
        for (int64_t i = 0; i < n; i += per) memset(m + i, 0, (size_t)row * sizeof(float));
}

static void check_layer(const mcase *k) {
    enum { B = 3 };
    const int64_t offset = 5; /* the batch's global sample offset */
    tnt_layer *l = tnt_multi_head_attention(k->heads, k->key_dim, &(tnt_attention_opts){
        .value_dim = k->value_dim, .output_dim = k->output_dim, .no_bias = k->no_bias, .dropout = k->dropout});
    assert_non_null(l);
    tu_ok(tnt__attention_configure(l, k->am, k->qm, k->vm, k->causal));
    tnt_shape in[6] = {TNT_SHAPE(k->tq, k->dq), TNT_SHAPE(k->tv, k->dv), TNT_SHAPE(k->tv, k->dk)};
    int n = 3;
    if (k->am) in[n++] = TNT_SHAPE(k->tq, k->tv);
    if (k->qm) in[n++] = TNT_SHAPE(k->tq);
    if (k->vm) in[n++] = TNT_SHAPE(k->tv);
    l->n_inputs = n;
    for (int i = 0; i < n; i++) l->in_shapes[i] = in[i];
    l->in_shape = in[0];
    l->seed = 1234;
    tu_ok(l->ops->build_multi(l, n, in, &l->out_shape));
    assert_non_null(l->ops->gpu);
    const char *why = NULL;
    assert_true(!l->ops->gpu->supported || l->ops->gpu->supported(l, &why));

    /* weights: host values and gradients; device copies of the values, device gradients */
    for (int i = 0; i < l->n_weights; i++) {
        int64_t c = tnt_shape_numel(l->weights[i].shape);
        l->weights[i].value = calloc((size_t)c, sizeof(float));
        l->weights[i].grad = calloc((size_t)c, sizeof(float));
        tnt__weight_init(&l->weights[i], 40 + (uint64_t)i);
        if (i % 2) tu_fill(l->weights[i].value, c, 70 + (uint64_t)i); /* nonzero biases */
        l->weights[i].d_value = dev_up(l->weights[i].value, c);
        l->weights[i].d_grad = tnt__gpu_malloc((size_t)c * sizeof(float));
    }
    float *x[6], *dx[6];
    void *dev_x[6], *dev_dx[6];
    int64_t cnt[6];
    for (int i = 0; i < n; i++) {
        cnt[i] = B * tnt_shape_numel(in[i]);
        x[i] = malloc((size_t)cnt[i] * sizeof(float));
        if (i < 3) tu_fill(x[i], cnt[i], 10 + (uint64_t)i);
        else fill_mask(x[i], cnt[i], in[i].ndim == 2 ? k->tv : 0, tnt_shape_numel(in[i]), 20 + (uint64_t)i);
        dev_x[i] = dev_up(x[i], cnt[i]);
        dx[i] = calloc((size_t)cnt[i], sizeof(float));
        dev_dx[i] = tnt__gpu_malloc((size_t)cnt[i] * sizeof(float));
    }
    const int64_t ny = B * tnt_shape_numel(l->out_shape);
    float *y = malloc((size_t)ny * sizeof(float)), *dy = malloc((size_t)ny * sizeof(float));
    tu_fill(dy, ny, 33);
    void *dev_y = tnt__gpu_malloc((size_t)ny * sizeof(float)), *dev_dy = dev_up(dy, ny);

    /* the CPU */
    void *plan = l->ops->plan_create(l, B);
    size_t wsn = l->ops->workspace_size(l, plan, B);
    void *ws = tnt__alloc(wsn);
    tnt__fwd_args fa = {.batch = B, .x = x[0], .n_inputs = n, .xs = (const float *const *)x, .y = y, .workspace = ws,
                        .training = k->training, .seed = 77, .sample_offset = offset};
    tu_ok(l->ops->forward(l, plan, &fa));
    tnt__bwd_args ba = {.batch = B, .x = x[0], .y = y, .dy = dy, .dx = dx[0], .workspace = ws, .sample_offset = offset,
                        .n_inputs = n, .xs = (const float *const *)x, .dxs = dx};
    tu_ok(l->ops->backward(l, plan, &ba));

    /* the device */
    const tnt__gpu_ops *g = l->ops->gpu;
    void *gplan = g->plan_create ? g->plan_create(l, B) : NULL;
    size_t gwsn = g->workspace_size ? g->workspace_size(l, gplan, B) : 0;
    void *gws = tnt__gpu_malloc(gwsn ? gwsn : 1);
    tnt__fwd_args ga = {.batch = B, .x = dev_x[0], .n_inputs = n, .xs = (const float *const *)dev_x, .y = dev_y,
                        .workspace = gws, .training = k->training, .seed = 77, .sample_offset = offset};
    tu_ok(g->forward(l, gplan, &ga));
    tnt__bwd_args gb = {.batch = B, .x = dev_x[0], .y = dev_y, .dy = dev_dy, .dx = dev_dx[0], .workspace = gws,
                        .sample_offset = offset, .n_inputs = n, .xs = (const float *const *)dev_x,
                        .dxs = (float *const *)dev_dx};
    tu_ok(g->backward(l, gplan, &gb));

    char what[160];
    float *got = dev_down(dev_y, ny);
    snprintf(what, sizeof what, "%s: output", k->what);
    tu_assert_close(got, y, ny, RTOL, ATOL, what);
    free(got);
    static const char *names[6] = {"dquery", "dvalue", "dkey", "dmask", "dmask", "dmask"};
    for (int i = 0; i < n; i++) {
        got = dev_down(dev_dx[i], cnt[i]);
        snprintf(what, sizeof what, "%s: %s (input %d)", k->what, names[i], i);
        tu_assert_close(got, dx[i], cnt[i], RTOL, ATOL, what);
        free(got);
    }
    for (int i = 0; i < l->n_weights; i++) {
        int64_t c = tnt_shape_numel(l->weights[i].shape);
        got = dev_down(l->weights[i].d_grad, c);
        snprintf(what, sizeof what, "%s: gradient of %s", k->what, l->weights[i].name);
        tu_assert_close(got, l->weights[i].grad, c, RTOL, ATOL * 10, what);
        free(got);
    }

    if (g->plan_destroy) g->plan_destroy(gplan);
    tnt__gpu_free(gws);
    tnt__free(ws);
    l->ops->plan_destroy(plan);
    for (int i = 0; i < n; i++) free(x[i]), free(dx[i]), tnt__gpu_free(dev_x[i]), tnt__gpu_free(dev_dx[i]);
    free(y), free(dy);
    tnt__gpu_free(dev_y), tnt__gpu_free(dev_dy);
    for (int i = 0; i < l->n_weights; i++) {
        free(l->weights[i].value), free(l->weights[i].grad);
        tnt__gpu_free(l->weights[i].d_value), tnt__gpu_free(l->weights[i].d_grad);
        l->weights[i].value = l->weights[i].grad = l->weights[i].d_value = l->weights[i].d_grad = NULL;
    }
    tnt_layer_free(l);
}

static void test_layer_equals_cpu(void **state) {
    (void)state;
    const mcase cases[] = {
        {"self-attention", 2, 4, 0, 0, false, 5, 5, 6, 6, 6, false, false, false, false, 0, true},
        {"cross-attention, value_dim, output_dim", 3, 4, 5, 7, false, 4, 6, 6, 3, 5, false, false, false, false, 0, true},
        {"no bias", 2, 3, 0, 0, true, 4, 4, 5, 5, 5, false, false, false, false, 0, true},
        {"attention mask (fully masked rows)", 2, 4, 0, 0, false, 4, 5, 6, 3, 4, true, false, false, false, 0, true},
        {"query and value masks", 2, 4, 3, 0, false, 5, 4, 6, 3, 4, false, true, true, false, 0, true},
        {"every mask and causal", 2, 4, 0, 0, false, 5, 5, 6, 6, 6, true, true, true, true, 0, true},
        {"causal, Tq < Tv", 1, 8, 0, 0, false, 3, 6, 4, 4, 4, false, false, false, true, 0, true},
        {"dropout, training", 2, 4, 0, 0, false, 6, 6, 6, 6, 6, false, false, false, false, 0.3f, true},
        {"dropout, masks and causal, training", 3, 2, 4, 5, false, 5, 5, 4, 4, 4, true, false, true, true, 0.5f, true},
        {"dropout, inference", 2, 4, 0, 0, false, 4, 4, 6, 6, 6, false, false, false, false, 0.3f, false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check_layer(&cases[i]);
}

/* ---- a Transformer block trained on the device ------------------------------------------------ */

enum { N = 48, T = 6, VOCAB = 11, D = 8, CLASSES = 3, BATCH = 12 };
static float ids[N * T], labels[N];

static void make_data(void) {
    tu_fill(ids, N * T, 5);
    for (int i = 0; i < N * T; i++) ids[i] = floorf((ids[i] + 1.0f) * 0.5f * VOCAB * 0.999f);
    for (int i = 0; i < N; i++) {
        float s = 0;
        for (int t = 0; t < T; t++) s += ids[i * T + t] * (t % 2 ? 1.0f : -1.0f);
        labels[i] = s > 1.0f ? 2.0f : s < -1.0f ? 0.0f : 1.0f;
    }
}

/* ids -> Embedding -> causal self-attention (dropout) -> Add -> LayerNormalization -> Dense(relu)
 * -> Flatten -> Dense(softmax) */
static tnt_model *transformer_block(void) {
    tnt_graph *g = tnt_graph_new();
    tnt_ktensor in = tnt_graph_input(g, TNT_SHAPE(T), NULL);
    tnt_ktensor e = tnt_call(g, tnt_embedding(VOCAB, D, false, NULL), in);
    tnt_layer *mha = tnt_multi_head_attention(2, 4, &(tnt_attention_opts){.dropout = 0.2f, .name = "mha"});
    tnt_ktensor a = tnt_call_attention(g, mha, e, e, (tnt_ktensor){-1}, (tnt_ktensor){-1}, true);
    tnt_ktensor r = tnt_call(g, tnt_layer_normalization(0, NULL), tnt_call2(g, tnt_add(NULL), e, a));
    tnt_ktensor f = tnt_call(g, tnt_dense(D, &(tnt_layer_opts){.activation = TNT_ACT_RELU}), r);
    tnt_ktensor out = tnt_call(g, tnt_dense(CLASSES, &(tnt_layer_opts){.activation = TNT_ACT_SOFTMAX}),
                               tnt_call(g, tnt_flatten(NULL), f));
    tnt_model *m = tnt_functional(g, 1, &in, 1, &out, "transformer");
    tnt_graph_free(g);
    assert_non_null(m);
    return m;
}

typedef struct run {
    float *w;
    int64_t n;
    double loss[2], val_loss[2];
    float pred[BATCH * CLASSES];
    bool on_device;
} run;

static tnt_dataset *dataset(int64_t batch) {
    return tnt_dataset_batch(tnt_dataset_from_arrays(ids, TNT_SHAPE(T), labels, TNT_SHAPE(), N, false), batch, false);
}

static run train(tnt_device dev) {
    tnt_model *m = transformer_block();
    /* SGD with momentum, not Adam: the key bias's gradient is zero up to rounding (softmax ignores
     * a constant added to a row), which Adam would turn into steps of the learning rate */
    tu_ok(tnt_compile(m, &(tnt_compile_opts){.optimizer = tnt_optimizer_new("sgd", &(tnt_optimizer_opts){
                                                 .learning_rate = 0.05f, .momentum = 0.9f}),
                                             .loss = TNT_SPARSE_CATEGORICAL_CROSSENTROPY, .seed = 3, .device = dev}));
    tnt_dataset *ds = dataset(BATCH), *val = dataset(20);
    tnt_history *h = NULL;
    tu_ok(tnt_fit(m, ds, &(tnt_fit_opts){.epochs = 2, .validation_data = val}, &h));
    run r = {.n = tnt_model_count_params(m), .on_device = m->on_device};
    r.w = malloc((size_t)r.n * sizeof(float));
    tu_ok(tnt_get_weights(m, r.w, r.n));
    tnt_tensor x = {.shape = TNT_SHAPE(BATCH, T), .data = ids}, *y = NULL;
    tu_ok(tnt_predict_on_batch(m, &x, &y));
    memcpy(r.pred, y->data, sizeof r.pred);
    tnt_tensor_free(y);
    for (int e = 0; e < 2; e++) r.loss[e] = tnt_history_get(h, "loss", e), r.val_loss[e] = tnt_history_get(h, "val_loss", e);
    tnt_history_free(h);
    tnt_dataset_free(ds), tnt_dataset_free(val);
    tnt_model_free(m);
    return r;
}

static void test_transformer_block_equals_cpu(void **state) {
    (void)state;
    char why[512];
    tnt_model *m = transformer_block();
    tu_ok(tnt_compile(m, &(tnt_compile_opts){.optimizer = tnt_sgd(0.1f), .loss = TNT_SPARSE_CATEGORICAL_CROSSENTROPY,
                                             .device = TNT_DEVICE_GPU}));
    if (!tnt__model_device_check(m, why, sizeof why)) fail_msg("the Transformer block stays on the CPU: %s", why);
    tnt_model_free(m);
    run cpu = train(TNT_DEVICE_CPU), gpu = train(TNT_DEVICE_GPU);
    assert_false(cpu.on_device);
    assert_true(gpu.on_device);
    assert_int_equal(cpu.n, gpu.n);
    tu_assert_close(gpu.w, cpu.w, cpu.n, RTOL, ATOL, "Transformer block: weights after 2 epochs");
    tu_assert_close(gpu.pred, cpu.pred, BATCH * CLASSES, RTOL, ATOL, "Transformer block: predictions");
    for (int e = 0; e < 2; e++) {
        if (!(fabs(gpu.loss[e] - cpu.loss[e]) <= RTOL * fabs(cpu.loss[e]) + ATOL))
            fail_msg("loss of epoch %d: GPU %.9g, CPU %.9g", e + 1, gpu.loss[e], cpu.loss[e]);
        if (!(fabs(gpu.val_loss[e] - cpu.val_loss[e]) <= RTOL * fabs(cpu.val_loss[e]) + ATOL))
            fail_msg("val_loss of epoch %d: GPU %.9g, CPU %.9g", e + 1, gpu.val_loss[e], cpu.val_loss[e]);
    }
    /* training moved the weights (the comparison is not between two untouched models) */
    tnt_model *fresh = transformer_block();
    float *w0 = malloc((size_t)cpu.n * sizeof(float));
    tu_ok(tnt_compile(fresh, &(tnt_compile_opts){.optimizer = tnt_sgd(0.1f), .loss = TNT_SPARSE_CATEGORICAL_CROSSENTROPY,
                                                 .seed = 3, .device = TNT_DEVICE_CPU}));
    tu_ok(tnt_get_weights(fresh, w0, cpu.n));
    double moved = 0;
    for (int64_t i = 0; i < cpu.n; i++) moved = fmax(moved, fabs(gpu.w[i] - w0[i]));
    assert_true(moved > 1e-3);
    free(w0);
    tnt_model_free(fresh);
    free(cpu.w), free(gpu.w);
}

int main(void) {
    if (!getenv("TNT_GPU_EMULATE")) setenv("TNT_GPU_EMULATE", "1", 1);
    if (tnt__config_load() != TNT_OK) return fprintf(stderr, "%s\n", tnt_last_error()), 1;
    const char *why = NULL;
    if (!tnt__gpu_available(&why)) return printf("test_gpu_attention: no device: %s\n", why), 77;
    if (!tnt__gpu_emulated()) RTOL = 1e-3, ATOL = 1e-4; /* a real GPU (GPU-DESIGN.md section 5) */
    if (tnt__gpu_open(0) != TNT_OK) return fprintf(stderr, "%s\n", tnt_last_error()), 1;
    make_data();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layer_equals_cpu),
        cmocka_unit_test(test_transformer_block_equals_cpu),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

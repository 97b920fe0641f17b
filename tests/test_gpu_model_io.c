/* test_gpu_model_io.c: models with several inputs and outputs trained on the emulated device
 * (TNT_GPU_EMULATE=1) equal the CPU engine: the packed batch goes up once and each input is
 * unpacked on the device; each output (and a fused loss's logits) comes down for its loss, and each
 * loss gradient goes up. Checked: weights after 2 epochs, the total and per-output losses of each
 * epoch, validation losses, and predict's packed outputs, within 1e-5:
 *   - two inputs (ids through an Embedding, features through a Dense), joined; two outputs with
 *     different losses and loss weights (softmax cross-entropy, fused; mean squared error), one of
 *     them also read by the other head (its gradient is the loss's plus the head's)
 *   - a Transformer block whose attention mask is a second input (MultiHeadAttention's masks on
 *     the device) */
#include "testutil.h"

#include "core/config.h"
#include "gpu/gpu.h"
#include "model/device.h"
#include "model/model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { N = 40, T = 5, VOCAB = 9, F = 4, BATCH = 10, CLASSES = 3 };

static double RTOL = 1e-5, ATOL = 1e-6;

/* ---- two inputs, two outputs ------------------------------------------------------------------- */

/* per sample: T ids, then F features; labels: a class, then F regression targets */
static float x2[N * (T + F)], y2[N * (1 + F)];

static void make_two_heads_data(void) {
    tu_fill(x2, N * (T + F), 17);
    for (int i = 0; i < N; i++) {
        float *x = x2 + i * (T + F), s = 0;
        for (int t = 0; t < T; t++) x[t] = floorf((x[t] + 1.0f) * 0.5f * VOCAB * 0.999f), s += x[t] * (t % 2 ? 1 : -1);
        y2[i * (1 + F)] = s > 1 ? 2.0f : s < -1 ? 0.0f : 1.0f;
        for (int j = 0; j < F; j++) y2[i * (1 + F) + 1 + j] = x[T + j] * 0.5f - x[T + (j + 1) % F] * 0.25f;
    }
}

static tnt_model *two_heads(void) {
    tnt_graph *g = tnt_graph_new();
    tnt_ktensor ins[2] = {tnt_graph_input(g, TNT_SHAPE(T), "ids"), tnt_graph_input(g, TNT_SHAPE(F), "features")};
    tnt_ktensor e = tnt_call(g, tnt_flatten(NULL), tnt_call(g, tnt_embedding(VOCAB, 3, false, NULL), ins[0]));
    tnt_ktensor f = tnt_call(g, tnt_dense(6, &(tnt_layer_opts){.activation = TNT_ACT_TANH}), ins[1]);
    tnt_ktensor h = tnt_call(g, tnt_dense(8, &(tnt_layer_opts){.activation = TNT_ACT_RELU}),
                             tnt_call2(g, tnt_concatenate(-1, NULL), e, f));
    /* the regression head, also read by the class head */
    tnt_ktensor reg = tnt_call(g, tnt_dense(F, &(tnt_layer_opts){.name = "reg"}), h);
    tnt_ktensor cls = tnt_call(g, tnt_dense(CLASSES, &(tnt_layer_opts){.activation = TNT_ACT_SOFTMAX, .name = "cls"}),
                               tnt_call2(g, tnt_concatenate(-1, NULL), h, reg));
    tnt_ktensor outs[2] = {cls, reg};
    tnt_model *m = tnt_functional(g, 2, ins, 2, outs, "two_heads");
    tnt_graph_free(g);
    assert_non_null(m);
    return m;
}

/* ---- a Transformer block with its attention mask as a second input ------------------------------ */

/* per sample: T ids, then a (T, T) mask of 1 and 0 */
static float x3[N * (T + T * T)], y3[N];

static void make_masked_data(void) {
    tu_fill(x3, N * (T + T * T), 23);
    for (int i = 0; i < N; i++) {
        float *x = x3 + i * (T + T * T), s = 0;
        for (int t = 0; t < T; t++) x[t] = floorf((x[t] + 1.0f) * 0.5f * VOCAB * 0.999f), s += x[t] * (t % 2 ? 1 : -1);
        for (int j = 0; j < T * T; j++) x[T + j] = x[T + j] > -0.4f || j % (T + 1) == 0 ? 1.0f : 0.0f;
        y3[i] = s > 1 ? 2.0f : s < -1 ? 0.0f : 1.0f;
    }
}

static tnt_model *masked_block(void) {
    tnt_graph *g = tnt_graph_new();
    tnt_ktensor ins[2] = {tnt_graph_input(g, TNT_SHAPE(T), "ids"), tnt_graph_input(g, TNT_SHAPE(T, T), "mask")};
    tnt_ktensor e = tnt_call(g, tnt_embedding(VOCAB, 8, false, NULL), ins[0]);
    tnt_ktensor a = tnt_call_attention(g, tnt_multi_head_attention(2, 4, &(tnt_attention_opts){.dropout = 0.1f}), e, e,
                                       (tnt_ktensor){-1}, ins[1], false);
    tnt_ktensor r = tnt_call(g, tnt_layer_normalization(0, NULL), tnt_call2(g, tnt_add(NULL), e, a));
    tnt_ktensor out = tnt_call(g, tnt_dense(CLASSES, &(tnt_layer_opts){.activation = TNT_ACT_SOFTMAX}),
                               tnt_call(g, tnt_flatten(NULL), r));
    tnt_model *m = tnt_functional(g, 2, ins, 1, &out, "masked_block");
    tnt_graph_free(g);
    assert_non_null(m);
    return m;
}

/* ---- training on both engines ------------------------------------------------------------------- */

typedef struct setup {
    const char *what;
    tnt_model *(*make)(void);
    const float *x, *y;
    int64_t x_per, y_per, out_per;
    int n_outputs;
    const char *out_loss[2]; /* History keys of the per-output losses (NULL: none) */
    /* SGD with momentum instead of Adam: attention's key bias has a gradient of zero up to
     * rounding (softmax ignores a constant added to a row), which Adam would turn into steps of the
     * learning rate in either direction */
    bool sgd;
} setup;

typedef struct run {
    float *w, *pred;
    int64_t n;
    double loss[2], val_loss[2], out_loss[2][2];
    bool on_device;
} run;

static tnt_dataset *dataset(const setup *s, int64_t batch) {
    return tnt_dataset_batch(tnt_dataset_from_arrays(s->x, TNT_SHAPE(s->x_per), s->y, TNT_SHAPE(s->y_per), N, false),
                             batch, false);
}

static run train(const setup *su, tnt_device dev) {
    tnt_model *m = su->make();
    const tnt_loss_kind losses[2] = {TNT_SPARSE_CATEGORICAL_CROSSENTROPY, TNT_MEAN_SQUARED_ERROR};
    const float weights[2] = {1.0f, 0.5f};
    tnt_optimizer *opt = su->sgd ? tnt_optimizer_new("sgd", &(tnt_optimizer_opts){.learning_rate = 0.05f, .momentum = 0.9f})
                                 : tnt_optimizer_new("adam", &(tnt_optimizer_opts){.learning_rate = 0.01f});
    tnt_compile_opts co = {.optimizer = opt,
                           .loss = TNT_SPARSE_CATEGORICAL_CROSSENTROPY, .seed = 11, .device = dev};
    if (su->n_outputs == 2) co.output_losses = losses, co.n_output_losses = 2, co.loss_weights = weights, co.n_loss_weights = 2;
    tu_ok(tnt_compile(m, &co));
    tnt_dataset *ds = dataset(su, BATCH), *val = dataset(su, 16);
    tnt_history *h = NULL;
    tu_ok(tnt_fit(m, ds, &(tnt_fit_opts){.epochs = 2, .validation_data = val}, &h));
    run r = {.n = tnt_model_count_params(m), .on_device = m->on_device};
    r.w = malloc((size_t)r.n * sizeof(float));
    tu_ok(tnt_get_weights(m, r.w, r.n));
    tnt_tensor *pred = NULL;
    tu_ok(tnt_predict(m, val, NULL, &pred)); /* on the device after a device fit: outputs packed */
    assert_int_equal(pred->shape.dim[0], N);
    assert_int_equal(pred->shape.dim[1], su->out_per);
    r.pred = malloc((size_t)(N * su->out_per) * sizeof(float));
    memcpy(r.pred, pred->data, (size_t)(N * su->out_per) * sizeof(float));
    tnt_tensor_free(pred);
    for (int e = 0; e < 2; e++) {
        r.loss[e] = tnt_history_get(h, "loss", e), r.val_loss[e] = tnt_history_get(h, "val_loss", e);
        for (int k = 0; k < 2; k++) r.out_loss[k][e] = su->out_loss[k] ? tnt_history_get(h, su->out_loss[k], e) : 0;
    }
    tnt_history_free(h);
    tnt_dataset_free(ds), tnt_dataset_free(val);
    tnt_model_free(m);
    return r;
}

static void close_scalar(double gpu, double cpu, const char *what, const char *key, int e) {
    if (!(fabs(gpu - cpu) <= RTOL * fabs(cpu) + ATOL))
        fail_msg("%s: %s of epoch %d: GPU %.9g, CPU %.9g", what, key, e + 1, gpu, cpu);
}

static void check_setup(const setup *su) {
    char why[512];
    tnt_model *m = su->make();
    tu_ok(tnt_compile(m, &(tnt_compile_opts){.optimizer = tnt_sgd(0.1f), .loss = TNT_SPARSE_CATEGORICAL_CROSSENTROPY,
                                             .device = TNT_DEVICE_GPU}));
    if (!tnt__model_device_check(m, why, sizeof why)) fail_msg("%s stays on the CPU: %s", su->what, why);
    tnt_model_free(m);
    run cpu = train(su, TNT_DEVICE_CPU), gpu = train(su, TNT_DEVICE_GPU);
    assert_false(cpu.on_device);
    assert_true(gpu.on_device);
    assert_int_equal(cpu.n, gpu.n);
    char what[160];
    snprintf(what, sizeof what, "%s: weights after 2 epochs", su->what);
    tu_assert_close(gpu.w, cpu.w, cpu.n, RTOL, ATOL, what);
    snprintf(what, sizeof what, "%s: predictions (packed)", su->what);
    tu_assert_close(gpu.pred, cpu.pred, N * su->out_per, RTOL, ATOL, what);
    for (int e = 0; e < 2; e++) {
        close_scalar(gpu.loss[e], cpu.loss[e], su->what, "loss", e);
        close_scalar(gpu.val_loss[e], cpu.val_loss[e], su->what, "val_loss", e);
        for (int k = 0; k < 2; k++)
            if (su->out_loss[k]) {
                assert_true(cpu.out_loss[k][e] > 0);
                close_scalar(gpu.out_loss[k][e], cpu.out_loss[k][e], su->what, su->out_loss[k], e);
            }
    }
    free(cpu.w), free(gpu.w), free(cpu.pred), free(gpu.pred);
}

static void test_two_inputs_two_outputs(void **state) {
    (void)state;
    const setup su = {"two inputs, two outputs", two_heads, x2, y2, T + F, 1 + F, CLASSES + F, 2, {"cls_loss", "reg_loss"}, false};
    check_setup(&su);
}

static void test_attention_mask_input(void **state) {
    (void)state;
    const setup su = {"Transformer block with a mask input", masked_block, x3, y3, T + T * T, 1, CLASSES, 1, {NULL, NULL}, true};
    check_setup(&su);
}

int main(void) {
    if (!getenv("TNT_GPU_EMULATE")) setenv("TNT_GPU_EMULATE", "1", 1);
    if (tnt__config_load() != TNT_OK) return fprintf(stderr, "%s\n", tnt_last_error()), 1;
    const char *why = NULL;
    if (!tnt__gpu_available(&why)) return printf("test_gpu_model_io: no device: %s\n", why), 77;
    if (!tnt__gpu_emulated()) RTOL = 1e-3, ATOL = 1e-4; /* a real GPU (GPU-DESIGN.md section 5) */
    make_two_heads_data();
    make_masked_data();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_two_inputs_two_outputs),
        cmocka_unit_test(test_attention_mask_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

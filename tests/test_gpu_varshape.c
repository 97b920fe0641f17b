/* test_gpu_varshape.c: models with variable (None) input dimensions on the device. The model is
 * rebuilt for each batch's shape and a device plan made per (batch size, input shape), as the CPU
 * engine does (model/plan.c's cache of TNT_PLAN_CACHE plans; the device arena grows to the
 * largest). Against the CPU engine on the emulated device (TNT_GPU_EMULATE=1; scripts/gpu_check.sh
 * runs it on a GPU):
 *   - a Conv1D text model on Input(shape=(None, 8)) (Conv1D same, GlobalMaxPooling1D, Dense
 *     softmax) and an Embedding model on Input(shape=(None,)) (Embedding, GlobalAveragePooling1D,
 *     Dense softmax; the loss on the host: TNT_GPU_DEVICE_LOSS=0), trained on padded batches
 *     (tnt_dataset_padded_batch: each batch its own longest sample, five lengths, more than the
 *     plan cache holds) on the device equal the same training on the CPU;
 *   - predict and evaluate with lengths the training never saw (longer: the arena grows; shorter)
 *     equal the CPU engine with the same weights, on device plans;
 *   - the device memory does not grow across shapes: the same after one epoch and after three
 *     more (plans evicted and made again), at most TNT_PLAN_CACHE plans, and none left once the
 *     model is freed (tnt__gpu_emulated_live_bytes);
 *   - Dot's device path (strided GEMMs; rank 1 and 2, either contraction axis) against the CPU
 *     engine, and cnn_seq2seq's attention (Dot with axes (2, 2) and (2, 1), Softmax) on padded
 *     batches == CPU;
 *   - a strided "same" Conv2D on (None, None, 3), whose device path depends on the size (its
 *     padding is unlike on the two sides at even sizes only): refused for the GPU, naming the
 *     size, where the other sizes need cuDNN (the emulated device); trained at 10x12 then 9x7
 *     with im2col for every size == CPU. */
#include "gpu_device_util.h"
#include "testutil.h"

#include "core/config.h"
#include "gpu/api.h"
#include "gpu/gpu.h"
#include "model/device.h"
#include "model/model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NONE TNT_DIM_NONE

enum { N = 40, BATCH = 8, LONGEST = 12, CH = 8, VOCAB = 30 };
/* each batch's longest sample: five shapes, more than the plan cache's four */
static const int BATCH_LONGEST[N / BATCH] = {5, 12, 7, 9, 4};

static int len[N];
static float conv_x[N * LONGEST * CH], ids_x[N * LONGEST], labels[N];
static int32_t conv_ext[N * 2], ids_ext[N];

/* Emulated: the CPU's sgemm and formulas, sums in another order than oneDNN's. A real GPU: its
 * own order at every step (GPU-DESIGN.md section 5). */
static double RTOL = 1e-4, ATOL = 1e-5;

static void make_data(void) {
    for (int i = 0; i < N; i++) {
        int longest = BATCH_LONGEST[i / BATCH];
        len[i] = i % BATCH == 3 ? longest : 1 + (i * 5) % longest;
        labels[i] = (float)(i % 4);
        for (int t = 0; t < LONGEST; t++) {
            for (int c = 0; c < CH; c++)
                conv_x[(i * LONGEST + t) * CH + c] =
                    t < len[i] ? sinf(0.37f * (float)(i + 1) + 0.91f * (float)t + 0.53f * (float)c) : 0.0f;
            ids_x[i * LONGEST + t] = t < len[i] ? (float)(1 + (i * 7 + t * 3) % (VOCAB - 1)) : 0.0f;
        }
        conv_ext[2 * i] = len[i], conv_ext[2 * i + 1] = CH, ids_ext[i] = len[i];
    }
}

static tnt_dataset *padded(bool conv, int64_t batch) {
    tnt_dataset *src = conv ? tnt_dataset_from_arrays(conv_x, TNT_SHAPE(LONGEST, CH), labels, TNT_SHAPE(), N, false)
                            : tnt_dataset_from_arrays(ids_x, TNT_SHAPE(LONGEST), labels, TNT_SHAPE(), N, false);
    assert_non_null(src);
    tu_ok(tnt_dataset_set_extents(src, conv ? conv_ext : ids_ext, NULL));
    tnt_dataset *ds = tnt_dataset_padded_batch(src, batch, false, NULL, NULL, 0, 0);
    assert_non_null(ds);
    return ds;
}

/* Input(shape=(None, 8)) -> Conv1D -> GlobalMaxPooling1D -> Dense, or Input(shape=(None,)) ->
 * Embedding -> GlobalAveragePooling1D -> Dense */
static tnt_model *make_model(bool conv) {
    tnt_model *m = tnt_sequential(conv ? "conv_text" : "bag_of_words");
    if (conv) {
        tu_ok(tnt_model_add(m, tnt_input_layer(TNT_SHAPE(NONE, CH), NULL)));
        tu_ok(tnt_model_add(
            m, tnt_conv1d(6, 3, &(tnt_layer_opts){.padding = TNT_PADDING_SAME, .activation = TNT_ACT_RELU})));
        tu_ok(tnt_model_add(m, tnt_global_max_pooling1d(NULL)));
    } else {
        tu_ok(tnt_model_add(m, tnt_input_layer(TNT_SHAPE(NONE), NULL)));
        tu_ok(tnt_model_add(m, tnt_embedding(VOCAB, 6, false, NULL)));
        tu_ok(tnt_model_add(m, tnt_global_average_pooling1d(NULL)));
    }
    tu_ok(tnt_model_add(m, tnt_dense(4, &(tnt_layer_opts){.activation = TNT_ACT_SOFTMAX})));
    assert_true(m->variable);
    return m;
}

static void compile(tnt_model *m, tnt_device dev) {
    tu_ok(tnt_compile(m, &(tnt_compile_opts){.optimizer = tnt_sgd(0.1f), .loss = TNT_SPARSE_CATEGORICAL_CROSSENTROPY,
                                             .metrics = "accuracy", .seed = 5, .device = dev}));
}

static float *weights_of(tnt_model *m) {
    int64_t n = tnt_model_count_params(m);
    float *w = malloc((size_t)n * sizeof *w);
    tu_ok(tnt_get_weights(m, w, n));
    return w;
}

static void set_device_loss(bool on) {
    setenv("TNT_GPU_DEVICE_LOSS", on ? "1" : "0", 1);
    tu_ok(tnt__config_load());
}

/* the device plans cached now: how many, and whether one was made for input length t */
static int device_plans(const tnt_model *m, int64_t t, bool *has_t) {
    int n = 0;
    if (has_t) *has_t = false;
    for (int i = 0; i < TNT_PLAN_CACHE; i++) {
        const tnt__plan *p = &m->plans[i];
        if (!p->layer_plans || !p->device) continue;
        n++;
        if (has_t && p->in_shapes[0].dim[0] == t) *has_t = true;
        assert_true(p->arena_bytes <= m->dev->arena_bytes);
    }
    return n;
}

/* ---- training on padded batches ---------------------------------------------------------------- */

static void trains_like_cpu(bool conv) {
    set_device_loss(conv); /* the Embedding model: the loss and its gradient on the host */
    tnt_model *cpu = make_model(conv), *dev = make_model(conv);
    compile(cpu, TNT_DEVICE_CPU), compile(dev, TNT_DEVICE_GPU);
    tnt_dataset *ds = padded(conv, BATCH);
    tnt_history *hc = NULL, *hd = NULL;
    tu_ok(tnt_fit(cpu, ds, &(tnt_fit_opts){.epochs = 3}, &hc));
    tu_ok(tnt_fit(dev, ds, &(tnt_fit_opts){.epochs = 3}, &hd));
    assert_false(cpu->on_device);
    assert_true(dev->on_device);
    /* five lengths went through a cache of four: the plans of the last four batches */
    assert_int_equal(device_plans(dev, 0, NULL), TNT_PLAN_CACHE);
    double lc = tnt_history_get(hc, "loss", 2), ld = tnt_history_get(hd, "loss", 2);
    print_message("%s, 15 steps on 5 lengths: loss %.7f on the CPU, %.7f on the device\n", conv ? "Conv1D" : "Embedding",
                  lc, ld);
    assert_true(fabs(ld - lc) < 1e-4 * (1 + fabs(lc)));
    assert_true(tnt_history_get(hc, "loss", 2) < tnt_history_get(hc, "loss", 0)); /* it learns */
    int64_t n = tnt_model_count_params(cpu);
    float *wc = weights_of(cpu), *wd = weights_of(dev);
    if (tnt__gpu_emulated())
        tu_assert_close(wd, wc, n, RTOL, ATOL, conv ? "Conv1D model's weights" : "Embedding model's weights");
    double d = 0, big = 1e-30;
    for (int64_t i = 0; i < n; i++) d = fmax(d, fabs((double)wd[i] - wc[i])), big = fmax(big, fabs(wc[i]));
    assert_true(d / big < 1e-3);
    free(wc), free(wd);
    tnt_history_free(hc), tnt_history_free(hd);
    tnt_dataset_free(ds);
    tnt_model_free(cpu), tnt_model_free(dev);
    set_device_loss(true);
}

static void test_conv1d_trains_like_cpu(void **state) {
    (void)state;
    trains_like_cpu(true);
}

static void test_embedding_trains_like_cpu(void **state) {
    (void)state;
    trains_like_cpu(false);
}

/* ---- predict and evaluate with new lengths ------------------------------------------------------ */

static tnt_tensor *predict(tnt_model *m, bool conv, int64_t t, int64_t rows) {
    tnt_tensor *x = tnt_tensor_new(conv ? TNT_SHAPE(rows, t, CH) : TNT_SHAPE(rows, t)), *y = NULL;
    for (int64_t i = 0; i < rows * t * (conv ? CH : 1); i++)
        x->data[i] = conv ? sinf(0.11f * (float)i) : (float)(1 + (i * 11) % (VOCAB - 1));
    tu_ok(tnt_predict_on_batch(m, x, &y));
    tnt_tensor_free(x);
    return y;
}

static void new_lengths(bool conv) {
    tnt_model *dev = make_model(conv), *cpu = make_model(conv);
    compile(dev, TNT_DEVICE_GPU), compile(cpu, TNT_DEVICE_CPU);
    tnt_dataset *ds = padded(conv, BATCH);
    tu_ok(tnt_fit(dev, ds, &(tnt_fit_opts){.epochs = 1}, NULL));
    tnt_dataset_free(ds);
    assert_true(dev->on_device);
    float *w = weights_of(dev);
    tu_ok(tnt_set_weights(cpu, w, tnt_model_count_params(cpu)));
    free(w);
    const size_t arena = dev->dev->arena_bytes;
    /* 9 samples of 17 steps are more than any training batch (the arena grows), of 2 fewer; then
     * 17 again */
    const int64_t lengths[] = {17, 2, 17};
    for (size_t k = 0; k < TNT_ARRAY_LEN(lengths); k++) {
        tnt_tensor *yd = predict(dev, conv, lengths[k], 9), *yc = predict(cpu, conv, lengths[k], 9);
        bool made = false;
        device_plans(dev, lengths[k], &made);
        assert_true(made); /* on a device plan for that length */
        assert_int_equal(yd->shape.ndim, 2);
        assert_int_equal(yd->shape.dim[0], 9), assert_int_equal(yd->shape.dim[1], 4);
        char what[64];
        snprintf(what, sizeof what, "predict, length %lld", (long long)lengths[k]);
        tu_assert_close(yd->data, yc->data, 9 * 4, tnt__gpu_emulated() ? 1e-5 : 1e-3, 1e-6, what);
        tnt_tensor_free(yd), tnt_tensor_free(yc);
    }
    assert_true(dev->dev->arena_bytes > arena);
    /* evaluate on padded batches of other sizes and lengths than fit's: every sample 2 longer
     * (the padding zeros join it), batches of 5 */
    for (int i = 0; i < N; i++) conv_ext[2 * i] = ids_ext[i] = len[i] + 2 < LONGEST ? len[i] + 2 : LONGEST;
    tnt_dataset *other = padded(conv, 5);
    tnt_logs ld = {0}, lc = {0};
    tu_ok(tnt_evaluate(dev, other, NULL, &ld));
    tu_ok(tnt_evaluate(cpu, other, NULL, &lc));
    assert_true(dev->on_device);
    double a, b;
    assert_true(tnt_logs_get(&ld, "loss", &a) && tnt_logs_get(&lc, "loss", &b));
    print_message("%s, evaluate on lengths + 2: loss %.7f on the device, %.7f on the CPU\n",
                  conv ? "Conv1D" : "Embedding", a, b);
    const bool emulated = tnt__gpu_emulated();
    assert_true(fabs(a - b) < (emulated ? 1e-5 : 1e-4) * (1 + fabs(b)));
    assert_true(tnt_logs_get(&ld, "accuracy", &a) && tnt_logs_get(&lc, "accuracy", &b));
    assert_true(fabs(a - b) < (emulated ? 1e-9 : 1.0 / N + 1e-9)); /* a GPU's sums may flip one near tie */
    tnt_dataset_free(other);
    make_data();
    tnt_model_free(dev), tnt_model_free(cpu);
}

static void test_new_lengths_equal_cpu(void **state) {
    (void)state;
    new_lengths(true);
    new_lengths(false);
}

/* ---- the device memory across shapes ---------------------------------------------------------- */

static void test_memory_bounded(void **state) {
    (void)state;
    if (!tnt__gpu_emulated()) skip();
    const size_t before = tnt__gpu_emulated_live_bytes();
    tnt_model *m = make_model(true);
    compile(m, TNT_DEVICE_GPU);
    tnt_dataset *ds = padded(true, BATCH);
    tu_ok(tnt_fit(m, ds, &(tnt_fit_opts){.epochs = 1}, NULL));
    const size_t one = tnt__gpu_emulated_live_bytes(), arena = m->dev->arena_bytes;
    tu_ok(tnt_fit(m, ds, &(tnt_fit_opts){.epochs = 3}, NULL));
    const size_t four = tnt__gpu_emulated_live_bytes();
    print_message("device memory after 1 epoch %zu bytes, after 3 more %zu (arena %zu)\n", one - before,
                  four - before, arena);
    assert_int_equal(four, one);
    assert_int_equal(m->dev->arena_bytes, arena);
    assert_int_equal(device_plans(m, 0, NULL), TNT_PLAN_CACHE);
    /* the last four batches' plans, the longest batch's (12) among them */
    bool longest = false;
    device_plans(m, LONGEST, &longest);
    assert_true(longest);
    tnt_dataset_free(ds);
    tnt_model_free(m);
    assert_int_equal(tnt__gpu_emulated_live_bytes(), before);
}

/* ---- attention over a sequence of any length: Dot on the device ----------------------------------- */

/* x (None, 8): scores = Dot(axes 2)(Dense(x), Dense(x)) (T, T), Softmax, Dot(axes (2, 1))(weights,
 * x) (T, 8) (the second operand contracted along its first axis), GlobalAveragePooling1D, Dense */
static tnt_model *attention_model(void) {
    tnt_graph *g = tnt_graph_new();
    tnt_ktensor x = tnt_graph_input(g, TNT_SHAPE(NONE, CH), "steps");
    tnt_ktensor q = tnt_call(g, tnt_dense(CH, &(tnt_layer_opts){.name = "query"}), x);
    tnt_ktensor k = tnt_call(g, tnt_dense(CH, &(tnt_layer_opts){.name = "key"}), x);
    tnt_ktensor w = tnt_call2(g, tnt_dot(2, 2, false, "scores"), q, k);
    w = tnt_call(g, tnt_softmax_layer(-1, "attention"), w);
    tnt_ktensor c = tnt_call2(g, tnt_dot(2, 1, false, "context"), w, x);
    c = tnt_call(g, tnt_global_average_pooling1d("pool"), c);
    c = tnt_call(g, tnt_dense(4, &(tnt_layer_opts){.activation = TNT_ACT_SOFTMAX, .name = "out"}), c);
    tnt_model *m = tnt_functional(g, 1, &x, 1, &c, "attention");
    tnt_graph_free(g);
    assert_non_null(m);
    assert_true(m->variable);
    return m;
}

/* Dot of inputs of shapes a and b (batch excluded) along axes (Keras's, batch = 0) on both sides:
 * output and both input gradients, within the sums' order (the device's GEMMs, the CPU's double
 * loop) */
static void dot_case(int ax1, int ax2, tnt_shape a, tnt_shape b) {
    enum { B = 3 };
    tnt_layer *l = tnt_dot(ax1, ax2, false, NULL);
    assert_non_null(l);
    tnt_shape in[2] = {a, b};
    tu_ok(l->ops->build_multi(l, 2, in, &l->out_shape));
    l->in_shape = in[0];
    const int64_t n[2] = {B * tnt_shape_numel(a), B * tnt_shape_numel(b)}, ny = B * tnt_shape_numel(l->out_shape);
    float *xh[2], *dxc[2], *xd[2], *dxd[2];
    for (int j = 0; j < 2; j++) {
        xh[j] = malloc((size_t)n[j] * sizeof(float)), dxc[j] = malloc((size_t)n[j] * sizeof(float));
        tu_fill(xh[j], n[j], 50 + j);
    }
    float *dy = malloc((size_t)ny * sizeof(float)), *yc = malloc((size_t)ny * sizeof(float));
    tu_fill(dy, ny, 52);
    tnt__fwd_args fa = {.batch = B, .x = xh[0], .n_inputs = 2, .xs = (const float **)xh, .y = yc, .training = true};
    tu_ok(l->ops->forward(l, NULL, &fa));
    tnt__bwd_args ba = {.batch = B, .x = xh[0], .n_inputs = 2, .xs = (const float **)xh, .y = yc, .dy = dy,
                        .dx = dxc[0], .dxs = dxc};
    tu_ok(l->ops->backward(l, NULL, &ba));
    const char *why = "";
    assert_true(l->ops->gpu->supported(l, &why));
    for (int j = 0; j < 2; j++) xd[j] = dev_up(xh[j], n[j]), dxd[j] = dev_up(xh[j], n[j]); /* overwritten */
    float *y_dev = tnt__gpu_malloc((size_t)ny * sizeof(float)), *dy_dev = dev_up(dy, ny);
    tnt__fwd_args fd = {.batch = B, .x = xd[0], .n_inputs = 2, .xs = (const float **)xd, .y = y_dev, .training = true};
    tu_ok(l->ops->gpu->forward(l, NULL, &fd));
    tnt__bwd_args bd = {.batch = B, .x = xd[0], .n_inputs = 2, .xs = (const float **)xd, .y = y_dev, .dy = dy_dev,
                        .dx = dxd[0], .dxs = dxd};
    tu_ok(l->ops->gpu->backward(l, NULL, &bd));
    char w[160], sa[64], sb[64];
    snprintf(w, sizeof w, "Dot(axes %d, %d) of %s and %s: output", ax1, ax2, tnt_shape_str(a, sa, sizeof sa),
             tnt_shape_str(b, sb, sizeof sb));
    float *yh = dev_down(y_dev, ny);
    tu_assert_close(yh, yc, ny, 1e-5, 1e-6, w);
    for (int j = 0; j < 2; j++) {
        float *g = dev_down(dxd[j], n[j]);
        snprintf(w, sizeof w, "Dot(axes %d, %d) of %s and %s: dx%d", ax1, ax2, sa, sb, j);
        tu_assert_close(g, dxc[j], n[j], 1e-5, 1e-6, w);
        free(g), free(xh[j]), free(dxc[j]);
        tnt__gpu_free(xd[j]), tnt__gpu_free(dxd[j]);
    }
    free(yh), free(dy), free(yc);
    tnt__gpu_free(y_dev), tnt__gpu_free(dy_dev);
    tnt_layer_free(l);
}

/* every case of dot.c: rank 1 and 2, each contraction axis, on the device's strided GEMMs */
static void test_dot(void **state) {
    (void)state;
    dot_case(1, 1, TNT_SHAPE(6), TNT_SHAPE(6));
    dot_case(2, 1, TNT_SHAPE(4, 6), TNT_SHAPE(6));
    dot_case(1, 2, TNT_SHAPE(6), TNT_SHAPE(5, 6));
    dot_case(2, 2, TNT_SHAPE(4, 6), TNT_SHAPE(5, 6));
    dot_case(1, 1, TNT_SHAPE(6, 4), TNT_SHAPE(6, 5));
    dot_case(2, 1, TNT_SHAPE(4, 6), TNT_SHAPE(6, 5));
    dot_case(1, 2, TNT_SHAPE(6, 4), TNT_SHAPE(5, 6));
    dot_case(-1, -2, TNT_SHAPE(4, 6), TNT_SHAPE(6, 1)); /* a single free column */
    tnt_layer *l = tnt_dot(2, 2, true, NULL); /* normalize: refused, with its reason */
    tnt_shape in[2] = {TNT_SHAPE(4, 6), TNT_SHAPE(5, 6)}, out;
    tu_ok(l->ops->build_multi(l, 2, in, &out));
    const char *why = NULL;
    assert_false(l->ops->gpu->supported(l, &why));
    assert_non_null(strstr(why, "normalize"));
    tnt_layer_free(l);
}

/* cnn_seq2seq's attention (two Dots, axes (2, 2) and (2, 1)) on padded batches of five lengths */
static void test_attention_trains_like_cpu(void **state) {
    (void)state;
    tnt_model *cpu = attention_model(), *dev = attention_model();
    compile(cpu, TNT_DEVICE_CPU), compile(dev, TNT_DEVICE_GPU);
    tnt_dataset *ds = padded(true, BATCH);
    tnt_history *hc = NULL, *hd = NULL;
    tu_ok(tnt_fit(cpu, ds, &(tnt_fit_opts){.epochs = 3}, &hc));
    tu_ok(tnt_fit(dev, ds, &(tnt_fit_opts){.epochs = 3}, &hd));
    assert_true(dev->on_device);
    double lc = tnt_history_get(hc, "loss", 2), ld = tnt_history_get(hd, "loss", 2);
    print_message("attention, 15 steps on 5 lengths: loss %.7f on the CPU, %.7f on the device\n", lc, ld);
    assert_true(fabs(ld - lc) < 1e-4 * (1 + fabs(lc)));
    int64_t n = tnt_model_count_params(cpu);
    float *wc = weights_of(cpu), *wd = weights_of(dev);
    tu_assert_close(wd, wc, n, RTOL, ATOL, "attention model's weights");
    free(wc), free(wd);
    tnt_history_free(hc), tnt_history_free(hd);
    tnt_dataset_free(ds);
    tnt_model_free(cpu), tnt_model_free(dev);
}

/* ---- Conv2D on (None, None, 3): its device path depends on the size ------------------------------ */

/* Conv2D(4, 3x3, strides 2, same, relu), GlobalAveragePooling2D, Dense(2, softmax) */
static tnt_model *fcn_model(void) {
    tnt_model *m = tnt_sequential("fcn");
    tu_ok(tnt_model_add(m, tnt_input_layer(TNT_SHAPE(NONE, NONE, 3), NULL)));
    tu_ok(tnt_model_add(m, tnt_conv2d(4, 3, 3, &(tnt_layer_opts){.strides = {2, 2}, .padding = TNT_PADDING_SAME,
                                                                .activation = TNT_ACT_RELU})));
    tu_ok(tnt_model_add(m, tnt_global_average_pooling2d(NULL)));
    tu_ok(tnt_model_add(m, tnt_dense(2, &(tnt_layer_opts){.activation = TNT_ACT_SOFTMAX})));
    return m;
}

static void set_conv_paths(const char *im2col) {
    setenv("TNT_GPU_CONV_IM2COL", im2col, 1);
    setenv("TNT_GPU_CONV_DIRECT", "0", 1);
    tu_ok(tnt__config_load());
}

/* 12 images of h x w, labels 0 and 1, batches of 4 */
static void fit_size(tnt_model *m, int64_t h, int64_t w, tnt_status want) {
    enum { IMAGES = 12 };
    float *x = malloc((size_t)(IMAGES * h * w * 3) * sizeof *x), y[IMAGES];
    tu_fill(x, IMAGES * h * w * 3, (uint64_t)(h * w));
    for (int i = 0; i < IMAGES; i++) y[i] = (float)(i % 2);
    tnt_dataset *ds =
        tnt_dataset_batch(tnt_dataset_from_arrays(x, TNT_SHAPE(h, w, 3), y, TNT_SHAPE(), IMAGES, false), 4, false);
    assert_int_equal(tnt_fit(m, ds, &(tnt_fit_opts){.epochs = 2}, NULL), want);
    tnt_dataset_free(ds);
    free(x);
}

/* Under the default settings a strided "same" Conv2D has the device's own kernels (im2col) only
 * where it pads unlike on the two sides (even sizes); the others need cuDNN, which the emulated
 * device lacks: the model is refused for the GPU before it trains, naming the size, and auto
 * trains it on the CPU. */
static void test_size_dependent_path_refused(void **state) {
    (void)state;
    if (!tnt__gpu_emulated()) skip(); /* a GPU with cuDNN takes every size */
    set_conv_paths("0");
    tnt_model *m = fcn_model();
    tu_ok(tnt_compile(m, &(tnt_compile_opts){.optimizer = tnt_sgd(0.1f), .loss = TNT_SPARSE_CATEGORICAL_CROSSENTROPY,
                                             .device = TNT_DEVICE_GPU}));
    fit_size(m, 10, 12, TNT_ERR_UNSUPPORTED);
    print_message("%s\n", tnt_last_error());
    assert_non_null(strstr(tnt_last_error(), "at a None dimension of 65"));
    assert_non_null(strstr(tnt_last_error(), "cuDNN"));
    assert_false(m->on_device);
    tnt_model_free(m);
    m = fcn_model();
    tu_ok(tnt_compile(m, &(tnt_compile_opts){.optimizer = tnt_sgd(0.1f), .loss = TNT_SPARSE_CATEGORICAL_CROSSENTROPY,
                                             .device = TNT_DEVICE_AUTO}));
    fit_size(m, 10, 12, TNT_OK);
    assert_false(m->on_device);
    tnt_model_free(m);
    set_conv_paths("512");
}

/* With im2col for every size (TNT_GPU_CONV_IM2COL), training on 10x12 then 9x7 images (padding
 * unlike, then alike on the two sides) on the device equals the CPU engine. */
static void test_conv2d_sizes_train_like_cpu(void **state) {
    (void)state;
    set_conv_paths("512");
    tnt_model *cpu = fcn_model(), *dev = fcn_model();
    tu_ok(tnt_compile(cpu, &(tnt_compile_opts){.optimizer = tnt_sgd(0.1f), .loss = TNT_SPARSE_CATEGORICAL_CROSSENTROPY,
                                               .seed = 3, .device = TNT_DEVICE_CPU}));
    tu_ok(tnt_compile(dev, &(tnt_compile_opts){.optimizer = tnt_sgd(0.1f), .loss = TNT_SPARSE_CATEGORICAL_CROSSENTROPY,
                                               .seed = 3, .device = TNT_DEVICE_GPU}));
    fit_size(cpu, 10, 12, TNT_OK), fit_size(dev, 10, 12, TNT_OK);
    fit_size(cpu, 9, 7, TNT_OK), fit_size(dev, 9, 7, TNT_OK);
    assert_true(dev->on_device);
    int64_t n = tnt_model_count_params(cpu);
    float *wc = weights_of(cpu), *wd = weights_of(dev);
    tu_assert_close(wd, wc, n, RTOL, ATOL, "Conv2D model's weights after 10x12 and 9x7");
    free(wc), free(wd);
    tnt_model_free(cpu), tnt_model_free(dev);
}

int main(void) {
    /* ctest: the emulated device; scripts/gpu_check.sh runs it on a GPU with TNT_GPU_EMULATE=0 */
    if (!getenv("TNT_GPU_EMULATE")) setenv("TNT_GPU_EMULATE", "1", 1);
    if (tnt_init(NULL, NULL) != TNT_OK) return fprintf(stderr, "tnt_init: %s\n", tnt_last_error()), 1;
    const char *why = NULL;
    if (!tnt__gpu_available(&why)) return printf("test_gpu_varshape: no device: %s\n", why), 77;
    if (!tnt__gpu_emulated()) RTOL = 1e-3, ATOL = 1e-4;
    make_data();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conv1d_trains_like_cpu),
        cmocka_unit_test(test_embedding_trains_like_cpu),
        cmocka_unit_test(test_new_lengths_equal_cpu),
        cmocka_unit_test(test_memory_bounded),
        cmocka_unit_test(test_dot),
        cmocka_unit_test(test_attention_trains_like_cpu),
        cmocka_unit_test(test_size_dependent_path_refused),
        cmocka_unit_test(test_conv2d_sizes_train_like_cpu),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* test_gpu_model.c: device-resident training on the emulated device (TNT_GPU_EMULATE=1: device
 * memory is host memory, kernels run their host build, sgemm is the CPU's), so every control path
 * of the model's GPU side runs here: device plans and buffers, the upload of the batch, the loss on
 * the host, backward on the device, the optimizer on the device, the host copy synced on demand.
 * Each model trains twice with the same seed and data, once on the CPU engine and once on the
 * device, and the two must agree within 1e-5 (the emulated sgemm is the CPU's, the kernels compute
 * the CPU's formulas). Also: get/set weights, save and load during and after device training, and
 * dispatch (TNT_DEVICE / compile's device): the first layer without a GPU path named. */
#include "testutil.h"

#include "core/config.h"
#include "gpu/gpu.h"
#include "model/device.h"
#include "model/model.h"
#include "classic.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { N = 96, FEAT = 12, CLASSES = 4, BATCH = 16 };

static float xs[N * FEAT], ys[N], ids[N * FEAT];
/* Emulated, the device's sgemm is the CPU's and the kernels its formulas: 1e-5. On a real GPU
 * (scripts/gpu_check.sh runs this program with TNT_GPU_EMULATE=0) cuBLAS and cuDNN sum in other
 * orders: GPU-DESIGN.md section 5's 1e-3 for weights after training. */
static double RTOL = 1e-5, ATOL = 1e-6;
static const float *cur_x = xs; /* the inputs dataset() serves: xs, or ids for the Embedding model */

static void make_data(void) {
    tu_fill(xs, N * FEAT, 7);
    for (int i = 0; i < N; i++) {
        float s = 0, t = 0;
        for (int j = 0; j < FEAT; j++) s += xs[i * FEAT + j] * (j % 2 ? 1.0f : -0.7f), t += xs[i * FEAT + j] * (j < 6);
        ys[i] = (float)((s > 0) * 2 + (t > 0));
    }
    for (int i = 0; i < N * FEAT; i++) ids[i] = floorf((xs[i] + 1.0f) * 5.0f); /* 0 .. 9 */
}

static tnt_dataset *dataset(int64_t batch) {
    return tnt_dataset_batch(tnt_dataset_from_arrays(cur_x, TNT_SHAPE(2, 2, 3), ys, TNT_SHAPE(), N, false), batch, false);
}

/* Flatten (a view), Dense with fused activations (one needs its input: swish), Dropout, an
 * Activation layer, a softmax output whose cross-entropy runs on the logits */
static tnt_model *small_model(void) {
    tnt_model *m = tnt_sequential("small");
    tu_ok(tnt_model_add(m, tnt_input_layer(TNT_SHAPE(2, 2, 3), NULL)));
    tu_ok(tnt_model_add(m, tnt_flatten(NULL)));
    tu_ok(tnt_model_add(m, tnt_dense(16, &(tnt_layer_opts){.activation = TNT_ACT_RELU})));
    tu_ok(tnt_model_add(m, tnt_dropout(0.25f, 0, NULL)));
    tu_ok(tnt_model_add(m, tnt_dense(10, &(tnt_layer_opts){.activation = TNT_ACT_SWISH})));
    tu_ok(tnt_model_add(m, tnt_activation_layer(TNT_ACT_TANH, NULL)));
    tu_ok(tnt_model_add(m, tnt_dense(CLASSES, &(tnt_layer_opts){.activation = TNT_ACT_SOFTMAX})));
    return m;
}

/* pooling over channels-last images: average (same padding, stride 1), zero padding and cropping,
 * then max */
static tnt_model *pool_model(void) {
    tnt_model *m = tnt_sequential("pool");
    tu_ok(tnt_model_add(m, tnt_input_layer(TNT_SHAPE(2, 2, 3), NULL)));
    tu_ok(tnt_model_add(m, tnt_dense(6, &(tnt_layer_opts){.activation = TNT_ACT_ELU})));
    tu_ok(tnt_model_add(m, tnt_average_pooling2d(2, 2, &(tnt_layer_opts){.padding = TNT_PADDING_SAME, .strides = {1, 1}})));
    tu_ok(tnt_model_add(m, tnt_zero_padding2d(1, 2, 0, 1, NULL))); /* (5, 3) */
    tu_ok(tnt_model_add(m, tnt_cropping2d(1, 0, 0, 1, NULL)));     /* (4, 2) */
    tu_ok(tnt_model_add(m, tnt_max_pooling2d(2, 2, NULL)));
    tu_ok(tnt_model_add(m, tnt_flatten(NULL)));
    tu_ok(tnt_model_add(m, tnt_dense(CLASSES, &(tnt_layer_opts){.activation = TNT_ACT_SOFTMAX})));
    return m;
}

/* a functional graph: Add (of two and of three) with its folded relu, a Dense layer called twice (its weight gradients
 * summed through the shared scratch), tensors read by several nodes (gradients added), global
 * average and max pooling, Concatenate along the last and a middle axis */
static tnt_model *residual_model(void) {
    tnt_graph *g = tnt_graph_new();
    tnt_ktensor in = tnt_graph_input(g, TNT_SHAPE(2, 2, 3), NULL);
    tnt_ktensor d1 = tnt_call(g, tnt_dense(6, &(tnt_layer_opts){.activation = TNT_ACT_RELU}), in);
    tnt_ktensor d2 = tnt_call(g, tnt_dense(6, NULL), d1);
    tnt_ktensor a = tnt_call(g, tnt_activation_layer(TNT_ACT_RELU, NULL), tnt_call2(g, tnt_add(NULL), d1, d2));
    tnt_layer *shared = tnt_dense(6, &(tnt_layer_opts){.activation = TNT_ACT_SIGMOID});
    tnt_ktensor s1 = tnt_call(g, shared, a);
    tnt_ktensor s2 = tnt_call(g, shared, s1);
    tnt_ktensor p = tnt_call2(g, tnt_add(NULL), tnt_call(g, tnt_global_average_pooling2d(NULL), s2),
                              tnt_call(g, tnt_global_max_pooling2d(NULL), a));
    /* joined with the input along the channels, and along the width */
    tnt_ktensor j = tnt_call(g, tnt_flatten(NULL), tnt_call2(g, tnt_concatenate(-1, NULL), in, s1));
    tnt_ktensor w = tnt_call(g, tnt_flatten(NULL), tnt_call2(g, tnt_concatenate(2, NULL), d2, a));
    /* Add of three with its folded relu, one input the model's (no gradient wanted there) */
    tnt_ktensor e1 = tnt_call(g, tnt_dense(3, NULL), in);
    tnt_ktensor three[3] = {in, e1, tnt_call(g, tnt_dense(3, NULL), e1)};
    tnt_ktensor t = tnt_call(g, tnt_activation_layer(TNT_ACT_RELU, NULL), tnt_call_n(g, tnt_add(NULL), 3, three));
    tnt_ktensor parts[4] = {p, j, w, tnt_call(g, tnt_flatten(NULL), t)};
    p = tnt_call_n(g, tnt_concatenate(-1, NULL), 4, parts);
    tnt_ktensor out = tnt_call(g, tnt_dense(CLASSES, &(tnt_layer_opts){.activation = TNT_ACT_SOFTMAX}), p);
    tnt_model *m = tnt_functional(g, 1, &in, 1, &out, "residual");
    tnt_graph_free(g);
    return m;
}

/* ids -> Embedding -> Permute -> LayerNormalization over the last axis (trains on ids) */
static tnt_model *embedding_model(void) {
    tnt_model *m = tnt_sequential("emb");
    tu_ok(tnt_model_add(m, tnt_input_layer(TNT_SHAPE(2, 2, 3), NULL)));
    tu_ok(tnt_model_add(m, tnt_embedding(10, 5, false, NULL)));
    tu_ok(tnt_model_add(m, tnt_permute(4, (const int[]){2, 4, 1, 3}, NULL))); /* (2, 5, 2, 3) */
    tu_ok(tnt_model_add(m, tnt_layer_normalization(0, NULL)));
    tu_ok(tnt_model_add(m, tnt_dense(4, &(tnt_layer_opts){.activation = TNT_ACT_GELU})));
    tu_ok(tnt_model_add(m, tnt_flatten(NULL)));
    tu_ok(tnt_model_add(m, tnt_dense(CLASSES, &(tnt_layer_opts){.activation = TNT_ACT_SOFTMAX})));
    return m;
}

/* BatchNormalization with its folded relu, one over the channels-last axis without beta, one over
 * axis 1 (inner cells after the channel) without gamma */
static tnt_model *bn_model(void) {
    tnt_model *m = tnt_sequential("bn");
    tu_ok(tnt_model_add(m, tnt_input_layer(TNT_SHAPE(2, 2, 3), NULL)));
    /* no bias: its gradient through BatchNormalization is zero up to rounding, which Adam would
     * blow up to steps of the learning rate in either direction */
    tu_ok(tnt_model_add(m, tnt_dense(6, &(tnt_layer_opts){.no_bias = true})));
    tu_ok(tnt_model_add(m, tnt_batch_normalization_with(&(tnt_batch_norm_opts){.momentum = 0.9f, .no_center = true})));
    tu_ok(tnt_model_add(m, tnt_activation_layer(TNT_ACT_RELU, NULL)));
    tu_ok(tnt_model_add(m, tnt_batch_normalization_with(&(tnt_batch_norm_opts){.axis = 1, .no_scale = true})));
    tu_ok(tnt_model_add(m, tnt_flatten(NULL)));
    tu_ok(tnt_model_add(m, tnt_dense(CLASSES, &(tnt_layer_opts){.activation = TNT_ACT_SOFTMAX})));
    return m;
}

/* Keras's trainable: false: a frozen Dense (out of the update) and a frozen BatchNormalization
 * (also in inference mode) */
static tnt_model *frozen_model(void) {
    tnt_model *m = tnt_sequential("frozen");
    tnt_layer *d = tnt_dense(8, &(tnt_layer_opts){.activation = TNT_ACT_TANH}), *bn = tnt_batch_normalization(0, 0, NULL);
    tu_ok(tnt_layer_set_trainable(d, false));
    tu_ok(tnt_layer_set_trainable(bn, false));
    tu_ok(tnt_model_add(m, tnt_input_layer(TNT_SHAPE(2, 2, 3), NULL)));
    tu_ok(tnt_model_add(m, tnt_flatten(NULL)));
    tu_ok(tnt_model_add(m, d));
    tu_ok(tnt_model_add(m, bn));
    tu_ok(tnt_model_add(m, tnt_dense(CLASSES, &(tnt_layer_opts){.activation = TNT_ACT_SOFTMAX})));
    return m;
}

typedef struct run {
    float *w;         /* the weights after training (malloc'd) */
    float pred[BATCH * CLASSES]; /* predict_on_batch of the first samples after training */
    int64_t n;
    double loss[4];   /* History's loss per epoch */
    double val_loss[4]; /* ... and the validation loss (evaluated on the device after a device epoch) */
    bool on_device;
} run;

static tnt_model *compiled(tnt_model *(*make)(void), const char *opt, const tnt_optimizer_opts *oo, tnt_device dev) {
    tnt_model *m = make();
    assert_non_null(m);
    tu_ok(tnt_compile(m, &(tnt_compile_opts){.optimizer = tnt_optimizer_new(opt, oo),
                                             .loss = TNT_SPARSE_CATEGORICAL_CROSSENTROPY, .metrics = "accuracy",
                                             .seed = 5, .device = dev}));
    return m;
}

static run train(tnt_model *(*make)(void), const char *opt, const tnt_optimizer_opts *oo, tnt_device dev, int epochs,
                 const tnt_fit_opts *extra) {
    tnt_model *m = compiled(make, opt, oo, dev);
    tnt_dataset *ds = dataset(BATCH);
    tnt_history *h = NULL;
    tnt_fit_opts fo = extra ? *extra : (tnt_fit_opts){0};
    fo.epochs = epochs;
    tnt_dataset *val = dataset(40); /* 2 batches of 40 and one of 16: more device plans */
    fo.validation_data = val;
    tu_ok(tnt_fit(m, ds, &fo, &h));
    run r = {.n = tnt_model_count_params(m), .on_device = m->on_device};
    r.w = malloc((size_t)r.n * sizeof(float));
    tu_ok(tnt_get_weights(m, r.w, r.n));
    tnt_tensor x = {.shape = TNT_SHAPE(BATCH, 2, 2, 3), .data = (float *)cur_x}, *y = NULL;
    tu_ok(tnt_predict_on_batch(m, &x, &y)); /* inference: on the device after a device fit */
    memcpy(r.pred, y->data, sizeof r.pred);
    tnt_tensor_free(y);
    for (int e = 0; e < epochs && e < 4; e++)
        r.loss[e] = tnt_history_get(h, "loss", e), r.val_loss[e] = tnt_history_get(h, "val_loss", e);
    tnt_dataset_free(val);
    tnt_history_free(h);
    tnt_dataset_free(ds);
    tnt_model_free(m);
    return r;
}

static void assert_same_run(const run *cpu, const run *gpu, int epochs, const char *what) {
    assert_false(cpu->on_device);
    assert_true(gpu->on_device);
    assert_int_equal(cpu->n, gpu->n);
    tu_assert_close(gpu->w, cpu->w, cpu->n, RTOL, ATOL, what);
    tu_assert_close(gpu->pred, cpu->pred, BATCH * CLASSES, RTOL, ATOL, what);
    for (int e = 0; e < epochs; e++)
        if (fabs(gpu->loss[e] - cpu->loss[e]) > RTOL * fabs(cpu->loss[e]) + ATOL)
            fail_msg("%s: loss of epoch %d: GPU %.9g, CPU %.9g", what, e + 1, gpu->loss[e], cpu->loss[e]);
    for (int e = 0; e < epochs; e++)
        if (!(fabs(gpu->val_loss[e] - cpu->val_loss[e]) <= RTOL * fabs(cpu->val_loss[e]) + ATOL))
            fail_msg("%s: val_loss of epoch %d: GPU %.9g, CPU %.9g", what, e + 1, gpu->val_loss[e], cpu->val_loss[e]);
}

/* SGD, momentum, Nesterov, Adam, AMSGrad, AdamW, RMSprop (plain, momentum, centered), Adagrad,
 * Adadelta, Adamax, Nadam: 2 epochs of 6 steps each, with Dropout's masks drawn on the device */
static void test_small_model_equals_cpu(void **state) {
    (void)state;
    struct { const char *name; tnt_optimizer_opts o; } cases[] = {
        {"sgd", {.learning_rate = 0.1f}},
        {"sgd", {.learning_rate = 0.05f, .momentum = 0.9f}},
        {"sgd", {.learning_rate = 0.05f, .momentum = 0.9f, .nesterov = true}},
        {"adam", {.learning_rate = 0.01f}},
        {"adam", {.learning_rate = 0.01f, .amsgrad = true}},
        {"adamw", {.learning_rate = 0.01f, .weight_decay = 0.05f}},
        {"rmsprop", {.learning_rate = 0.005f}},
        {"rmsprop", {.learning_rate = 0.005f, .momentum = 0.5f, .centered = true}},
        {"sgd", {.learning_rate = 0.1f, .momentum = 0.5f, .clipvalue = 0.01f}},
        {"adagrad", {.learning_rate = 0.05f}},
        {"adadelta", {.learning_rate = 1.0f}},
        {"adamax", {.learning_rate = 0.01f}},
        {"nadam", {.learning_rate = 0.01f}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char what[64];
        snprintf(what, sizeof what, "%s case %zu", cases[i].name, i);
        run cpu = train(small_model, cases[i].name, &cases[i].o, TNT_DEVICE_CPU, 2, NULL);
        run gpu = train(small_model, cases[i].name, &cases[i].o, TNT_DEVICE_GPU, 2, NULL);
        assert_same_run(&cpu, &gpu, 2, what);
        free(cpu.w), free(gpu.w);
    }
    tnt_model *(*models[])(void) = {pool_model, residual_model, embedding_model, bn_model, frozen_model};
    const char *names[] = {"pooling", "residual graph", "embedding and layer normalization", "batch normalization",
                           "frozen layers"};
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
        tnt_optimizer_opts o = {.learning_rate = 0.01f};
        cur_x = models[i] == embedding_model ? ids : xs;
        run cpu = train(models[i], "adam", &o, TNT_DEVICE_CPU, 2, NULL);
        run gpu = train(models[i], "adam", &o, TNT_DEVICE_GPU, 2, NULL);
        assert_same_run(&cpu, &gpu, 2, names[i]);
        free(cpu.w), free(gpu.w);
    }
    cur_x = xs;
}

/* a bad id fails the device step with the CPU's message */
static void test_embedding_bad_id(void **state) {
    (void)state;
    float bad[N * FEAT];
    memcpy(bad, ids, sizeof bad);
    bad[2 * FEAT + 5] = 10; /* sample 2, position 5 */
    tnt_model *m = compiled(embedding_model, "sgd", NULL, TNT_DEVICE_GPU);
    tnt_dataset *ds = tnt_dataset_batch(tnt_dataset_from_arrays(bad, TNT_SHAPE(2, 2, 3), ys, TNT_SHAPE(), N, false), BATCH, false);
    assert_int_equal(tnt_fit(m, ds, NULL, NULL), TNT_ERR_ARG);
    tu_error_contains("id 10 at position 5 of sample 2 is not an integer in [0, 10)");
    assert_true(m->on_device);
    tnt_dataset_free(ds);
    tnt_model_free(m);
}

/* The MLP of the benchmark (784-4096-4096-4096-10), 3 steps of 8 samples */
static float mlp_x[24 * 784], mlp_y[24];

static void test_mlp_equals_cpu(void **state) {
    (void)state;
    tu_fill(mlp_x, 24 * 784, 3);
    for (int i = 0; i < 24; i++) mlp_y[i] = (float)(i * 7 % 10);
    float *w[2];
    int64_t n = 0;
    double loss[2];
    for (int g = 0; g < 2; g++) {
        tnt_model *m = mlp_model();
        assert_non_null(m);
        tu_ok(tnt_compile(m, &(tnt_compile_opts){.optimizer = tnt_sgd(0.01f), .loss = TNT_SPARSE_CATEGORICAL_CROSSENTROPY,
                                                 .seed = 9, .device = g ? TNT_DEVICE_GPU : TNT_DEVICE_CPU}));
        tnt_dataset *ds = tnt_dataset_batch(tnt_dataset_from_arrays(mlp_x, TNT_SHAPE(28, 28, 1), mlp_y, TNT_SHAPE(), 24,
                                                                    false), 8, false);
        tnt_history *h = NULL;
        tu_ok(tnt_fit(m, ds, &(tnt_fit_opts){.epochs = 1}, &h));
        assert_int_equal(m->on_device, g == 1);
        loss[g] = tnt_history_get(h, "loss", 0);
        n = tnt_model_count_params(m);
        w[g] = malloc((size_t)n * sizeof(float));
        tu_ok(tnt_get_weights(m, w[g], n));
        tnt_history_free(h);
        tnt_dataset_free(ds);
        tnt_model_free(m);
    }
    tu_assert_close(w[1], w[0], n, RTOL, ATOL, "MLP weights after 3 steps");
    assert_true(fabs(loss[1] - loss[0]) <= RTOL * fabs(loss[0]));
    free(w[0]), free(w[1]);
}

/* ---- the host copy during and after device training --------------------------------------- */

typedef struct probe {
    int64_t n;
    float *seen[8]; /* get_weights after each batch of the first epoch */
    int count;
    bool set_at_epoch_end; /* sets every weight to 0.5 x itself after epoch 1 */
    char saved[512];       /* where epoch 1's end saved the weights (tnt_save_weights) */
} probe;

static tnt_status probe_batch_end(tnt_model *m, int64_t batch, const tnt_logs *logs, void *user) {
    (void)logs;
    probe *p = user;
    if (p->count < 8 && batch == p->count) {
        p->seen[p->count] = malloc((size_t)p->n * sizeof(float));
        tnt_status s = tnt_get_weights(m, p->seen[p->count], p->n);
        p->count++;
        return s;
    }
    return TNT_OK;
}

static tnt_status probe_epoch_end(tnt_model *m, int epoch, const tnt_logs *logs, void *user) {
    (void)logs;
    probe *p = user;
    if (!p->set_at_epoch_end || epoch != 0) return TNT_OK;
    tnt_status s = tnt_save_weights(m, p->saved, NULL); /* during training: the device's weights */
    if (s != TNT_OK) return s;
    float *w = malloc((size_t)p->n * sizeof(float));
    s = tnt_get_weights(m, w, p->n);
    for (int64_t i = 0; i < p->n; i++) w[i] *= 0.5f;
    if (s == TNT_OK) s = tnt_set_weights(m, w, p->n);
    free(w);
    return s;
}

static run train_probed(tnt_device dev, probe *p) {
    tnt_callback cb = {.on_train_batch_end = probe_batch_end, .on_epoch_end = probe_epoch_end, .user = p};
    p->n = 0;
    tnt_model *m = small_model();
    p->n = tnt_model_count_params(m);
    tnt_model_free(m);
    tnt_fit_opts fo = {.callbacks = &cb, .n_callbacks = 1};
    return train(small_model, "adam", &(tnt_optimizer_opts){.learning_rate = 0.01f}, dev, 2, &fo);
}

/* get_weights after every step sees the device's weights; set_weights between epochs reaches the
 * device: both as the CPU engine */
static void test_get_set_weights_during_training(void **state) {
    (void)state;
    probe pc = {.set_at_epoch_end = true}, pg = {.set_at_epoch_end = true};
    snprintf(pc.saved, sizeof pc.saved, "%s", tu_tmp_path("epoch1_cpu.h5"));
    snprintf(pg.saved, sizeof pg.saved, "%s", tu_tmp_path("epoch1_gpu.h5"));
    run cpu = train_probed(TNT_DEVICE_CPU, &pc);
    run gpu = train_probed(TNT_DEVICE_GPU, &pg);
    /* the files saved during training hold the same weights */
    float *wc = malloc((size_t)pc.n * sizeof(float)), *wg = malloc((size_t)pc.n * sizeof(float));
    tnt_model *mc = small_model(), *mg = small_model();
    tu_ok(tnt_load_weights(mc, pc.saved, false));
    tu_ok(tnt_load_weights(mg, pg.saved, false));
    tu_ok(tnt_get_weights(mc, wc, pc.n));
    tu_ok(tnt_get_weights(mg, wg, pc.n));
    tu_assert_close(wg, wc, pc.n, RTOL, ATOL, "weights saved at the end of epoch 1, during training");
    tu_assert_close(wg, pg.seen[pg.count - 1], pc.n, 0, 0, "the saved file holds the weights of the last step");
    tnt_model_free(mc), tnt_model_free(mg);
    free(wc), free(wg);
    assert_int_equal(pc.count, N / BATCH);
    assert_int_equal(pg.count, N / BATCH);
    for (int k = 0; k < pc.count; k++) {
        tu_assert_close(pg.seen[k], pc.seen[k], pc.n, RTOL, ATOL, "weights seen by a batch callback");
        if (k) assert_true(memcmp(pg.seen[k], pg.seen[k - 1], (size_t)pg.n * sizeof(float)) != 0); /* they moved */
    }
    for (int k = 0; k < pc.count; k++) free(pc.seen[k]), free(pg.seen[k]); /* after: k + 1 reads k */
    assert_same_run(&cpu, &gpu, 2, "set_weights after epoch 1");
    free(cpu.w), free(gpu.w);
}

/* Saving after device training writes the trained weights (a CPU model loading the file predicts
 * as the device model); loading into a device model between fits reaches the device. */
static void test_save_load(void **state) {
    (void)state;
    char path[512], wpath[512];
    snprintf(path, sizeof path, "%s", tu_tmp_path("gpu_model.h5"));
    snprintf(wpath, sizeof wpath, "%s", tu_tmp_path("gpu_weights.h5"));
    tnt_model *g = compiled(small_model, "adam", &(tnt_optimizer_opts){.learning_rate = 0.01f}, TNT_DEVICE_GPU);
    tnt_dataset *ds = dataset(BATCH);
    tu_ok(tnt_fit(g, ds, &(tnt_fit_opts){.epochs = 1}, NULL));
    assert_true(g->on_device);
    tu_ok(tnt_save_model(g, path, NULL));
    tu_ok(tnt_save_weights(g, wpath, NULL));
    /* the device model predicts on the device; the loaded model on the CPU */
    tnt_tensor x = {.shape = TNT_SHAPE(N, 2, 2, 3), .data = xs};
    tnt_tensor *pg = NULL, *pc = NULL;
    tu_ok(tnt_predict_on_batch(g, &x, &pg));
    tnt_model *c = tnt_load_model(path, true);
    assert_non_null(c);
    tu_ok(tnt_predict_on_batch(c, &x, &pc));
    assert_false(c->on_device);
    tu_assert_close(pg->data, pc->data, N * CLASSES, RTOL, ATOL, "predictions: device model and its saved file on the CPU");
    /* a second epoch from the file's state: on the device after load_weights into the device
     * model, and on the CPU from the loaded whole model (weights and Adam's slots) */
    tnt_model *g2 = compiled(small_model, "adam", &(tnt_optimizer_opts){.learning_rate = 0.01f}, TNT_DEVICE_GPU);
    tu_ok(tnt_fit(g2, ds, &(tnt_fit_opts){.epochs = 1}, NULL)); /* other weights on its device */
    tu_ok(tnt_load_weights(g2, wpath, false));
    float *w1 = malloc((size_t)tnt_model_count_params(g) * sizeof(float)), *w2 = malloc((size_t)tnt_model_count_params(g) * sizeof(float));
    int64_t n = tnt_model_count_params(g);
    tu_ok(tnt_get_weights(g2, w2, n));
    tu_ok(tnt_get_weights(g, w1, n));
    tu_assert_bitwise(w2, w1, n, "weights after load_weights into a device model");
    tnt_tensor *pg2 = NULL;
    tu_ok(tnt_predict_on_batch(g2, &x, &pg2)); /* on the device: the loaded weights went up */
    assert_true(g2->on_device);
    tu_assert_close(pg2->data, pc->data, N * CLASSES, RTOL, ATOL, "device predictions after load_weights");
    /* one more epoch after the saves, predictions and loads: as a CPU model trained in two fits */
    tnt_model *r = compiled(small_model, "adam", &(tnt_optimizer_opts){.learning_rate = 0.01f}, TNT_DEVICE_CPU);
    tu_ok(tnt_fit(r, ds, &(tnt_fit_opts){.epochs = 1}, NULL));
    tu_ok(tnt_fit(r, ds, &(tnt_fit_opts){.epochs = 1}, NULL));
    tu_ok(tnt_fit(g, ds, &(tnt_fit_opts){.epochs = 1}, NULL));
    assert_true(g->on_device);
    tu_ok(tnt_get_weights(g, w1, n));
    tu_ok(tnt_get_weights(r, w2, n));
    tu_assert_close(w1, w2, n, RTOL, ATOL, "a second fit on the device against two fits on the CPU");
    tnt_model_free(r);
    free(w1), free(w2);
    tnt_tensor_free(pg), tnt_tensor_free(pc), tnt_tensor_free(pg2);
    tnt_model_free(g), tnt_model_free(g2), tnt_model_free(c);
    tnt_dataset_free(ds);
}

/* ---- dispatch --------------------------------------------------------------------------------- */

/* GaussianNoise has no GPU path (on any device) */
static tnt_model *noise_model(void) {
    tnt_model *m = tnt_sequential("noisy");
    tu_ok(tnt_model_add(m, tnt_input_layer(TNT_SHAPE(2, 2, 3), NULL)));
    tu_ok(tnt_model_add(m, tnt_dense(5, &(tnt_layer_opts){.activation = TNT_ACT_RELU})));
    tu_ok(tnt_model_add(m, tnt_gaussian_noise(0.1f, 0, "the_noise")));
    tu_ok(tnt_model_add(m, tnt_flatten(NULL)));
    tu_ok(tnt_model_add(m, tnt_dense(CLASSES, &(tnt_layer_opts){.activation = TNT_ACT_SOFTMAX})));
    return m;
}

/* Conv2D needs cuDNN, which the emulated device lacks */
static tnt_model *conv_model(void) {
    tnt_model *m = tnt_sequential("conv");
    /* 3x3 "same" on 4 channels: padded alike on both sides, 36 taps (more than TNT_GPU_CONV_DIRECT's
     * 32), so cuDNN's (2x2 "same" pads after only: im2col; 3 channels: the direct kernels) */
    tu_ok(tnt_model_add(m, tnt_input_layer(TNT_SHAPE(2, 2, 4), NULL)));
    tu_ok(tnt_model_add(m, tnt_conv2d(4, 3, 3, &(tnt_layer_opts){.name = "the_conv", .padding = TNT_PADDING_SAME})));
    tu_ok(tnt_model_add(m, tnt_flatten(NULL)));
    tu_ok(tnt_model_add(m, tnt_dense(CLASSES, &(tnt_layer_opts){.activation = TNT_ACT_SOFTMAX})));
    return m;
}

static void test_dispatch(void **state) {
    (void)state;
    char why[512];
    tnt_dataset *ds = dataset(BATCH);
    /* gpu: an error naming the layer and its class */
    tnt_model *m = compiled(noise_model, "sgd", NULL, TNT_DEVICE_GPU);
    assert_false(tnt__model_device_check(m, why, sizeof why));
    assert_string_equal(why, "layer \"the_noise\" (GaussianNoise): has no GPU path");
    assert_int_equal(tnt_fit(m, ds, &(tnt_fit_opts){.epochs = 1}, NULL), TNT_ERR_UNSUPPORTED);
    tu_error_contains("cannot train on the GPU");
    tu_error_contains("layer \"the_noise\" (GaussianNoise)");
    tnt_model_free(m);
    /* Conv2D on a device without cuDNN: named with the reason */
    m = compiled(conv_model, "sgd", NULL, TNT_DEVICE_GPU);
    if (!tnt__gpu_cudnn()) {
        assert_false(tnt__model_device_check(m, why, sizeof why));
        assert_non_null(strstr(why, "layer \"the_conv\" (Conv2D): needs cuDNN"));
    }
    tnt_model_free(m);
    /* auto: the CPU, and the fit runs */
    m = compiled(noise_model, "sgd", NULL, TNT_DEVICE_AUTO);
    tu_ok(tnt_fit(m, ds, &(tnt_fit_opts){.epochs = 1}, NULL));
    assert_false(m->on_device);
    assert_true(m->device_reason_logged);
    tnt_model_free(m);
    /* auto with everything on the device: the GPU; cpu: the CPU even so */
    m = compiled(small_model, "sgd", NULL, TNT_DEVICE_AUTO);
    assert_true(tnt__model_device_check(m, why, sizeof why));
    tu_ok(tnt_fit(m, ds, &(tnt_fit_opts){.epochs = 1}, NULL));
    assert_true(m->on_device);
    /* compiled again for the CPU: the device's weights come back first */
    float *before = malloc((size_t)tnt_model_count_params(m) * sizeof(float)), *after = malloc((size_t)tnt_model_count_params(m) * sizeof(float));
    tu_ok(tnt_get_weights(m, before, tnt_model_count_params(m)));
    tu_ok(tnt_compile(m, &(tnt_compile_opts){.optimizer = tnt_sgd(0.0f), .loss = TNT_SPARSE_CATEGORICAL_CROSSENTROPY,
                                             .device = TNT_DEVICE_CPU}));
    assert_false(m->on_device);
    assert_null(m->dev);
    tu_ok(tnt_get_weights(m, after, tnt_model_count_params(m)));
    tu_assert_bitwise(after, before, tnt_model_count_params(m), "weights after compiling a device model for the CPU");
    tu_ok(tnt_fit(m, ds, &(tnt_fit_opts){.epochs = 1}, NULL));
    assert_false(m->on_device);
    free(before), free(after);
    tnt_model_free(m);
    /* a bad device value */
    m = small_model();
    assert_int_equal(tnt_compile(m, &(tnt_compile_opts){.optimizer = tnt_sgd(0.1f), .loss = TNT_SPARSE_CATEGORICAL_CROSSENTROPY,
                                                       .device = (tnt_device)7}),
                     TNT_ERR_ARG);
    tu_error_contains("device 7");
    tnt_model_free(m);
    tnt_dataset_free(ds);
}

int main(void) {
    if (!getenv("TNT_GPU_EMULATE")) setenv("TNT_GPU_EMULATE", "1", 1); /* ctest sets it too */
    if (tnt__config_load() != TNT_OK) return fprintf(stderr, "%s\n", tnt_last_error()), 1;
    const char *why = NULL;
    if (!tnt__gpu_available(&why)) return printf("test_gpu_model: no device: %s\n", why), 77;
    if (!tnt__gpu_emulated()) RTOL = 1e-3, ATOL = 1e-4; /* a real GPU (GPU-DESIGN.md section 5) */
    make_data();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_small_model_equals_cpu),
        cmocka_unit_test(test_embedding_bad_id),
        cmocka_unit_test(test_get_set_weights_during_training),
        cmocka_unit_test(test_save_load),
        cmocka_unit_test(test_dispatch),
        cmocka_unit_test(test_mlp_equals_cpu),
    };
    return cmocka_run_group_tests(tests, tu_tmpdir_setup, tu_tmpdir_teardown);
}

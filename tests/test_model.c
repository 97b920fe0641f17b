/* test_model.c: Sequential models end to end: shape inference errors, summary, weights access,
 * gradients of a whole model against finite differences, fit/evaluate/predict with History,
 * the last partial batch, determinism, and LeNet-5 on a Fashion-MNIST subset. */
#include "testutil.h"

#include "data/dataset.h"
#include "model/model.h"
#include "objectives/loss.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static tnt_model *mlp(tnt_activation out_act, int classes) {
    tnt_model *m = tnt_sequential("mlp");
    tu_ok(tnt_model_add(m, tnt_input_layer(TNT_SHAPE(4, 3), NULL)));
    tu_ok(tnt_model_add(m, tnt_flatten(NULL)));
    tu_ok(tnt_model_add(m, tnt_dense(8, &(tnt_layer_opts){.activation = TNT_ACT_TANH})));
    tu_ok(tnt_model_add(m, tnt_dense(classes, &(tnt_layer_opts){.activation = out_act})));
    return m;
}

static void test_shape_errors_name_layer_and_shapes(void **state) {
    (void)state;
    tnt_model *m = tnt_sequential("bad");
    tu_ok(tnt_model_add(m, tnt_input_layer(TNT_SHAPE(28, 28, 1), NULL)));
    tu_ok(tnt_model_add(m, tnt_flatten(NULL)));
    /* Conv2D after Flatten: rank 1 input */
    assert_int_equal(tnt_model_add(m, tnt_conv2d(4, 3, 3, NULL)), TNT_ERR_SHAPE);
    tu_error_contains("conv2d");
    tu_error_contains("(784,)");
    assert_int_equal(tnt_model_num_layers(m), 2);
    /* NULL layer from a failed constructor keeps its message */
    assert_int_not_equal(tnt_model_add(m, tnt_dense(0, NULL)), TNT_OK);
    tu_error_contains("0");
    /* duplicate names */
    tu_ok(tnt_model_add(m, tnt_dense(3, &(tnt_layer_opts){.name = "out"})));
    assert_int_equal(tnt_model_add(m, tnt_dense(3, &(tnt_layer_opts){.name = "out"})), TNT_ERR_ARG);
    tu_error_contains("\"out\"");
    /* InputLayer not first */
    assert_int_equal(tnt_model_add(m, tnt_input_layer(TNT_SHAPE(3), NULL)), TNT_ERR_ARG);
    tnt_model_free(m);

    /* deferred build through tnt_model_build */
    m = tnt_sequential(NULL);
    tu_ok(tnt_model_add(m, tnt_dense(5, NULL)));
    tu_ok(tnt_model_add(m, tnt_dense(2, NULL)));
    assert_int_equal(tnt_compile(m, &(tnt_compile_opts){.optimizer = tnt_sgd(0.1f), .loss = TNT_MEAN_SQUARED_ERROR}),
                     TNT_ERR_STATE);
    tu_error_contains("input shape unknown");
    tu_ok(tnt_model_build(m, TNT_SHAPE(3)));
    assert_int_equal(tnt_model_count_params(m), 3 * 5 + 5 + 5 * 2 + 2);
    assert_string_equal(tnt_layer_name(tnt_model_layer(m, 1)), "dense_1");
    tnt_model_free(m);
}

static void test_compile_errors(void **state) {
    (void)state;
    tnt_model *m = mlp(TNT_ACT_SOFTMAX, 3);
    assert_int_equal(tnt_compile(m, &(tnt_compile_opts){.optimizer = tnt_sgd(0.1f)}), TNT_ERR_ARG);
    tu_error_contains("loss");
    assert_int_equal(tnt_compile(m, &(tnt_compile_opts){.optimizer = tnt_sgd(0.1f),
                                                        .loss = TNT_SPARSE_CATEGORICAL_CROSSENTROPY,
                                                        .metrics = "accuracy,bogus"}), TNT_ERR_ARG);
    tu_error_contains("bogus");
    assert_int_not_equal(tnt_compile(m, &(tnt_compile_opts){.optimizer = tnt_optimizer_new("ftrl", NULL),
                                                            .loss = TNT_MEAN_SQUARED_ERROR}), TNT_OK);
    tu_error_contains("trl");
    tnt_dataset *ds = tnt_dataset_batch(tnt_dataset_from_arrays((float[12]){0}, TNT_SHAPE(4, 3), (float[1]){0},
                                                                TNT_SHAPE(), 1, true), 1, false);
    assert_int_equal(tnt_fit(m, ds, NULL, NULL), TNT_ERR_STATE);
    tu_error_contains("not compiled");
    tnt_dataset_free(ds);
    tnt_model_free(m);
}

static void test_summary_and_weights(void **state) {
    (void)state;
    tnt_model *m = mlp(TNT_ACT_SOFTMAX, 3);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    tu_ok(tnt_model_summary(m, f));
    fclose(f);
    assert_non_null(strstr(buf, "dense (Dense)"));
    assert_non_null(strstr(buf, "(None, 8)"));
    assert_non_null(strstr(buf, "Total params: 131"));
    free(buf);
    assert_int_equal(tnt_model_num_weights(m), 4);
    const char *name;
    tnt_shape shape;
    float *data;
    tu_ok(tnt_model_weight(m, 0, &name, &shape, &data));
    assert_string_equal(name, "dense/kernel:0");
    assert_int_equal(shape.dim[0], 12);
    assert_int_equal(shape.dim[1], 8);
    /* glorot_uniform within its limit, bias zero */
    float limit = sqrtf(6.0f / 20.0f);
    for (int i = 0; i < 96; i++) assert_true(fabsf(data[i]) <= limit);
    tu_ok(tnt_model_weight(m, 1, &name, &shape, &data));
    for (int i = 0; i < 8; i++) assert_float_equal(data[i], 0.0f, 0.0);
    /* get/set round trip in Keras order */
    int64_t n = tnt_model_count_params(m);
    float *w = malloc((size_t)n * sizeof(float)), *w2 = malloc((size_t)n * sizeof(float));
    tu_ok(tnt_get_weights(m, w, n));
    for (int64_t i = 0; i < n; i++) w[i] = (float)i;
    tu_ok(tnt_set_weights(m, w, n));
    tu_ok(tnt_get_weights(m, w2, n));
    assert_memory_equal(w, w2, (size_t)n * sizeof(float));
    tu_ok(tnt_model_weight(m, 3, &name, &shape, &data));
    assert_string_equal(name, "dense_1/bias:0");
    assert_float_equal(data[0], (float)(n - 3), 0.0);
    assert_int_equal(tnt_set_weights(m, w, n - 1), TNT_ERR_ARG);
    tu_error_contains("130");
    assert_int_equal(tnt_model_weight(m, 4, NULL, NULL, NULL), TNT_ERR_ARG);
    free(w), free(w2);
    tnt_model_free(m);
}

/* tnt_model_copy_weights: the weights named, and no other, from one model into another (a
 * trained one's into a fresh one: its predictions then match on those layers); bad indices and
 * shapes fail before anything is written, naming both weights and shapes. */
static void test_copy_weights_between_models(void **state) {
    (void)state;
    tnt_model *a = mlp(TNT_ACT_SOFTMAX, 3), *b = mlp(TNT_ACT_SOFTMAX, 3), *c = mlp(TNT_ACT_SOFTMAX, 5);
    tu_ok(tnt_model_set_seed(b, 99));
    int64_t n = tnt_model_count_params(a);
    float *wa = malloc((size_t)n * sizeof(float)), *wb = malloc((size_t)n * sizeof(float));
    float *wb2 = malloc((size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++) wa[i] = (float)i * 0.01f;
    tu_ok(tnt_set_weights(a, wa, n));
    tu_ok(tnt_get_weights(b, wb, n));
    tu_ok(tnt_model_copy_weights(b, a, 2, (int[]){2, 3}, (int[]){2, 3})); /* dense_1's kernel and bias */
    tu_ok(tnt_get_weights(b, wb2, n));
    assert_memory_equal(wb2, wb, 12 * 8 * sizeof(float) + 8 * sizeof(float)); /* dense's, untouched */
    assert_memory_equal(wb2 + 104, wa + 104, (size_t)(n - 104) * sizeof(float));
    /* every pair checked before anything is written */
    assert_int_equal(tnt_model_copy_weights(b, a, 2, (int[]){0, 4}, (int[]){0, 0}), TNT_ERR_ARG);
    tu_error_contains("weight 4");
    assert_int_equal(tnt_model_copy_weights(b, a, 2, (int[]){0, 1}, (int[]){0, 0}), TNT_ERR_SHAPE);
    tu_error_contains("dense/bias");
    tu_error_contains("(8,)");
    tu_error_contains("(12, 8)");
    assert_int_equal(tnt_model_copy_weights(c, a, 1, (int[]){2}, (int[]){2}), TNT_ERR_SHAPE);
    tu_error_contains("(8, 5)");
    assert_int_equal(tnt_model_copy_weights(b, NULL, 0, NULL, NULL), TNT_ERR_ARG);
    tnt_shape shape;
    float *data;
    tu_ok(tnt_model_weight(b, 0, NULL, &shape, &data));
    assert_memory_equal(data, wb, 96 * sizeof(float));
    free(wa), free(wb), free(wb2);
    tnt_model_free(a), tnt_model_free(b), tnt_model_free(c);
}

/* Loss of the whole model on a batch (double precision sum), for finite differences. */
static double model_loss(tnt_model *m, const float *x, const float *y, int64_t n, float *grads_out) {
    tnt__plan *p = tnt__model_plan(m, n);
    assert_non_null(p);
    float *pred;
    tnt__step st = {.global_n = n, .training = true, .seed = tnt__model_training_seed(m)};
    tu_ok(tnt__model_forward(m, p, x, &st, &pred));
    (void)pred;
    double sum;
    tu_ok(tnt__loss_compute(m->loss, m->from_logits || m->fused_output_loss[0], n, tnt__model_output_size(m),
                            tnt__plan_loss_input(m, p, 0, x), y, 1.0 / (double)n, tnt__plan_output_grad(m, p, 0), &sum));
    if (grads_out) {
        tu_ok(tnt__model_backward(m, p, x, &st));
        memcpy(grads_out, m->grads, (size_t)m->n_params * sizeof(float));
    }
    return sum / (double)n;
}

static void gradient_check(tnt_activation out_act, tnt_loss_kind loss, bool from_logits) {
    enum { N = 5 };
    tnt_model *m = mlp(out_act, 3);
    tu_ok(tnt_compile(m, &(tnt_compile_opts){.optimizer = tnt_sgd(0.1f), .loss = loss, .from_logits = from_logits}));
    float x[N * 12], y[N * 3];
    tu_fill(x, N * 12, 1);
    int64_t ny = loss == TNT_SPARSE_CATEGORICAL_CROSSENTROPY ? N : N * 3;
    for (int i = 0; i < ny; i++) y[i] = loss == TNT_SPARSE_CATEGORICAL_CROSSENTROPY ? (float)(i % 3)
                                        : loss == TNT_CATEGORICAL_CROSSENTROPY ? (i % 3 == i / 3 % 3 ? 1.0f : 0.0f)
                                        : 0.3f * (float)(i % 4);
    int64_t np = m->n_params;
    float *g = malloc((size_t)np * sizeof(float));
    model_loss(m, x, y, N, g);
    for (int64_t i = 0; i < np; i += 3) {
        float keep = m->params[i];
        double h = 1e-2;
        m->params[i] = keep + (float)h;
        double lp = model_loss(m, x, y, N, NULL);
        m->params[i] = keep - (float)h;
        double lm = model_loss(m, x, y, N, NULL);
        m->params[i] = keep;
        double fd = (lp - lm) / (2 * h);
        if (fabs(fd - g[i]) > 2e-3 + 2e-2 * fabs(fd))
            fail_msg("param %lld: backward %.6g, finite difference %.6g (act %d loss %d)", (long long)i,
                     g[i], fd, out_act, loss);
    }
    free(g);
    tnt_model_free(m);
}

static void test_model_gradients_vs_finite_differences(void **state) {
    (void)state;
    gradient_check(TNT_ACT_SOFTMAX, TNT_SPARSE_CATEGORICAL_CROSSENTROPY, false); /* fused path */
    gradient_check(TNT_ACT_SOFTMAX, TNT_CATEGORICAL_CROSSENTROPY, false);
    gradient_check(TNT_ACT_LINEAR, TNT_SPARSE_CATEGORICAL_CROSSENTROPY, true);
    gradient_check(TNT_ACT_SIGMOID, TNT_BINARY_CROSSENTROPY, false);
    gradient_check(TNT_ACT_LINEAR, TNT_MEAN_SQUARED_ERROR, false);
}

/* A separable toy problem: the label is the argmax of 3 fixed projections of x. */
static tnt_dataset *toy_data(int64_t n, int64_t batch, uint64_t seed) {
    float *x = malloc((size_t)n * 12 * sizeof(float)), *y = malloc((size_t)n * sizeof(float));
    tu_fill(x, n * 12, seed);
    for (int64_t i = 0; i < n; i++) {
        float s[3] = {0};
        for (int j = 0; j < 12; j++) s[j % 3] += x[i * 12 + j] * (j < 6 ? 1.0f : -0.5f);
        y[i] = (float)(s[0] > s[1] ? (s[0] > s[2] ? 0 : 2) : (s[1] > s[2] ? 1 : 2));
    }
    tnt_dataset *ds = tnt_dataset_from_arrays(x, TNT_SHAPE(4, 3), y, TNT_SHAPE(), n, true);
    free(x), free(y);
    return tnt_dataset_batch(tnt_dataset_shuffle(ds, n, 3), batch, false);
}

static tnt_history *train_toy(float *weights_out) {
    tnt_model *m = mlp(TNT_ACT_SOFTMAX, 3);
    tu_ok(tnt_compile(m, &(tnt_compile_opts){.optimizer = tnt_optimizer_new("adam", &(tnt_optimizer_opts){.learning_rate = 0.01f}),
                                             .loss = TNT_SPARSE_CATEGORICAL_CROSSENTROPY, .metrics = "accuracy", .seed = 5}));
    tnt_dataset *train = toy_data(250, 32, 1), *val = toy_data(100, 40, 2); /* 250 = 7*32 + 26 */
    tnt_history *h;
    tu_ok(tnt_fit(m, train, &(tnt_fit_opts){.epochs = 6, .validation_data = val, .validation_freq = 2}, &h));
    assert_int_equal(tnt_history_epochs(h), 6);
    assert_true(tnt_history_get(h, "loss", 5) < tnt_history_get(h, "loss", 0));
    assert_true(isnan(tnt_history_get(h, "val_loss", 0)));
    assert_false(isnan(tnt_history_get(h, "val_loss", 1)));
    /* evaluate equals the validation figures of the last epoch (no training in between) */
    tnt_logs logs;
    tu_ok(tnt_evaluate(m, val, NULL, &logs));
    double v;
    assert_true(tnt_logs_get(&logs, "loss", &v));
    assert_float_equal(v, tnt_history_get(h, "val_loss", 5), 1e-9);
    assert_true(tnt_logs_get(&logs, "accuracy", &v));
    assert_true(v > 0.6);
    /* predict returns every row in order; they match predict_on_batch */
    tnt_tensor *out, *one;
    tu_ok(tnt_predict(m, val, NULL, &out));
    assert_int_equal(out->shape.dim[0], 100);
    assert_int_equal(out->shape.dim[1], 3);
    tnt_dataset_iter *it = tnt_dataset_iter_new(val, 0);
    tnt_batch b;
    assert_int_equal(tnt_dataset_iter_next(it, &b), 1);
    tu_ok(tnt_predict_on_batch(m, &b.x, &one));
    tu_assert_close(one->data, out->data, 40 * 3, 1e-6, 1e-7, "predict");
    for (int i = 0; i < 3; i++) assert_float_equal(out->data[i * 3] + out->data[i * 3 + 1] + out->data[i * 3 + 2], 1.0, 1e-5);
    tnt_tensor_free(out), tnt_tensor_free(one);
    tnt_dataset_iter_free(it);
    if (weights_out) tu_ok(tnt_get_weights(m, weights_out, tnt_model_count_params(m)));
    tnt_dataset_free(train), tnt_dataset_free(val);
    tnt_model_free(m);
    return h;
}

static void test_fit_evaluate_predict_and_determinism(void **state) {
    (void)state;
    float w1[131], w2[131];
    tnt_history *h1 = train_toy(w1), *h2 = train_toy(w2);
    assert_memory_equal(w1, w2, sizeof w1); /* bitwise identical runs */
    for (int e = 0; e < 6; e++) assert_true(tnt_history_get(h1, "loss", e) == tnt_history_get(h2, "loss", e));
    tnt_history_free(h1), tnt_history_free(h2);
}

/* Epoch loss is the exact mean over samples, including the last partial batch. */
static void test_epoch_loss_is_sample_mean(void **state) {
    (void)state;
    tnt_model *m = mlp(TNT_ACT_LINEAR, 2);
    tu_ok(tnt_compile(m, &(tnt_compile_opts){.optimizer = tnt_sgd(0.0f), .loss = TNT_MEAN_SQUARED_ERROR, .metrics = "mae"}));
    /* learning rate 0 -> SGD default 0.01; use set_lr to freeze */
    tu_ok(tnt_optimizer_set_lr(tnt_model_optimizer(m), 0.0f));
    enum { N = 10 };
    float x[N * 12], y[N * 2];
    tu_fill(x, N * 12, 9);
    tu_fill(y, N * 2, 10);
    tnt_dataset *ds = tnt_dataset_batch(tnt_dataset_from_arrays(x, TNT_SHAPE(4, 3), y, TNT_SHAPE(2), N, true), 4, false);
    tnt_history *h;
    tu_ok(tnt_fit(m, ds, &(tnt_fit_opts){.epochs = 1}, &h));
    tnt_tensor xt = {.shape = TNT_SHAPE(N, 4, 3), .data = x}, *out;
    tu_ok(tnt_predict_on_batch(m, &xt, &out));
    double mse = 0, mae = 0;
    for (int i = 0; i < N * 2; i++) {
        double d = out->data[i] - y[i];
        mse += d * d / 2;
        mae += fabs(d) / 2;
    }
    assert_float_equal(tnt_history_get(h, "loss", 0), mse / N, 1e-6);
    assert_float_equal(tnt_history_get(h, "mean_absolute_error", 0), mae / N, 1e-6);
    tnt_tensor_free(out);
    tnt_history_free(h);
    tnt_dataset_free(ds);
    tnt_model_free(m);
}

static void test_bad_data_errors(void **state) {
    (void)state;
    tnt_model *m = mlp(TNT_ACT_SOFTMAX, 3);
    tu_ok(tnt_compile(m, &(tnt_compile_opts){.optimizer = tnt_sgd(0.1f), .loss = TNT_SPARSE_CATEGORICAL_CROSSENTROPY}));
    float x[24] = {0}, y[2] = {0, 7};
    tnt_dataset *wrong_shape = tnt_dataset_batch(tnt_dataset_from_arrays(x, TNT_SHAPE(12), y, TNT_SHAPE(), 2, true), 2, false);
    assert_int_equal(tnt_fit(m, wrong_shape, NULL, NULL), TNT_ERR_SHAPE);
    tu_error_contains("(12,)");
    tu_error_contains("(4, 3)");
    tnt_dataset *bad_label = tnt_dataset_batch(tnt_dataset_from_arrays(x, TNT_SHAPE(4, 3), y, TNT_SHAPE(), 2, true), 2, false);
    assert_int_equal(tnt_fit(m, bad_label, NULL, NULL), TNT_ERR_ARG);
    tu_error_contains("7");
    tnt_dataset *unbatched = tnt_dataset_from_arrays(x, TNT_SHAPE(4, 3), y, TNT_SHAPE(), 2, true);
    assert_int_equal(tnt_fit(m, unbatched, NULL, NULL), TNT_ERR_ARG);
    tu_error_contains("not batched");
    assert_int_equal(tnt_fit(m, wrong_shape, &(tnt_fit_opts){.epochs = 2, .initial_epoch = 2}, NULL), TNT_ERR_ARG);
    tu_error_contains("initial_epoch 2");
    tnt_dataset *forever = tnt_dataset_repeat(tnt_dataset_batch(tnt_dataset_from_arrays(x, TNT_SHAPE(4, 3), y, TNT_SHAPE(), 2, true), 2, false), -1);
    assert_int_equal(tnt_fit(m, forever, NULL, NULL), TNT_ERR_ARG); /* would never end an epoch */
    tu_error_contains("steps_per_epoch is 0");
    tnt_dataset_free(wrong_shape), tnt_dataset_free(bad_label), tnt_dataset_free(unbatched), tnt_dataset_free(forever);
    tnt_model_free(m);
}

/* A test layer with a non-trainable weight, as BatchNormalization's moving statistics: y = x + s,
 * where s (init ones) is state, not a parameter. */
static tnt_status shift_build(tnt_layer *l, tnt_shape in, tnt_shape *out) {
    int k = tnt__layer_add_weight(l, "shift", TNT_SHAPE(tnt_shape_numel(in)), TNT_INIT_ONES, 0, 0);
    if (k < 0) return TNT_ERR_ARG;
    l->weights[k].trainable = false;
    *out = in;
    return TNT_OK;
}
static tnt_status shift_forward(tnt_layer *l, void *plan, const tnt__fwd_args *a) {
    (void)plan;
    int64_t c = tnt_shape_numel(l->in_shape);
    for (int64_t i = 0; i < a->batch * c; i++) a->y[i] = a->x[i] + l->weights[0].value[i % c];
    return TNT_OK;
}
static tnt_status shift_backward(tnt_layer *l, void *plan, const tnt__bwd_args *a) {
    (void)plan;
    if (a->dx) memcpy(a->dx, a->dy, (size_t)(a->batch * tnt_shape_numel(l->in_shape)) * sizeof(float));
    return TNT_OK;
}
static const tnt__layer_ops shift_ops = {.class_name = "Shift", .build = shift_build,
                                         .forward = shift_forward, .backward = shift_backward};

static void test_non_trainable_weights(void **state) {
    (void)state;
    tnt_model *m = tnt_sequential("nt");
    tu_ok(tnt_model_add(m, tnt_input_layer(TNT_SHAPE(4, 3), NULL)));
    tu_ok(tnt_model_add(m, tnt_flatten(NULL)));
    tu_ok(tnt_model_add(m, tnt_dense(5, &(tnt_layer_opts){.activation = TNT_ACT_TANH})));
    tu_ok(tnt_model_add(m, tnt__layer_new(&shift_ops, NULL, NULL)));
    tu_ok(tnt_model_add(m, tnt_dense(3, &(tnt_layer_opts){.activation = TNT_ACT_SOFTMAX})));
    tu_ok(tnt_compile(m, &(tnt_compile_opts){.optimizer = tnt_optimizer_new("sgd", &(tnt_optimizer_opts){.learning_rate = 0.1f, .momentum = 0.9f, .weight_decay = 0.1f}),
                                             .loss = TNT_SPARSE_CATEGORICAL_CROSSENTROPY}));
    int64_t total = 12 * 5 + 5 + 5 + 5 * 3 + 3;
    assert_int_equal(tnt_model_count_params(m), total);
    assert_int_equal(m->n_params, total - 5); /* the gradient buffer has no room for state */
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    tu_ok(tnt_model_summary(m, f));
    fclose(f);
    assert_non_null(strstr(buf, "Trainable params: 83"));
    assert_non_null(strstr(buf, "Non-trainable params: 5"));
    free(buf);
    tnt_dataset *ds = toy_data(64, 16, 4);
    tu_ok(tnt_fit(m, ds, &(tnt_fit_opts){.epochs = 2}, NULL));
    /* neither the optimizer nor weight decay touched the state */
    float w[88];
    tu_ok(tnt_get_weights(m, w, total));
    for (int i = 0; i < 5; i++) assert_float_equal(w[65 + i], 1.0f, 0.0); /* Keras order: dense, shift, dense_1 */
    const char *name;
    tu_ok(tnt_model_weight(m, 2, &name, NULL, NULL));
    assert_string_equal(name, "shift/shift:0");
    tnt_dataset_free(ds);
    tnt_model_free(m);
}

static int scale(const float *x, const float *y, float *xo, float *yo, void *user) {
    (void)user;
    for (int i = 0; i < 784; i++) xo[i] = x[i] / 255.0f;
    *yo = *y;
    return 0;
}

/* LeNet-5 on 2048 Fashion-MNIST images: the loss must fall within one epoch. */
static void test_lenet5_smoke(void **state) {
    (void)state;
    const char *dir = "/usr/share/datasets/fashion-mnist";
    tnt_model *m = tnt_sequential("lenet5");
    tnt_layer_opts same_relu = {.padding = TNT_PADDING_SAME, .activation = TNT_ACT_RELU};
    tu_ok(tnt_model_add(m, tnt_input_layer(TNT_SHAPE(28, 28, 1), NULL)));
    tu_ok(tnt_model_add(m, tnt_conv2d(20, 5, 5, &same_relu)));
    tu_ok(tnt_model_add(m, tnt_max_pooling2d(2, 2, NULL)));
    tu_ok(tnt_model_add(m, tnt_conv2d(50, 5, 5, &same_relu)));
    tu_ok(tnt_model_add(m, tnt_max_pooling2d(2, 2, NULL)));
    tu_ok(tnt_model_add(m, tnt_flatten(NULL)));
    tu_ok(tnt_model_add(m, tnt_dense(500, &(tnt_layer_opts){.activation = TNT_ACT_RELU})));
    tu_ok(tnt_model_add(m, tnt_dense(10, &(tnt_layer_opts){.activation = TNT_ACT_SOFTMAX})));
    assert_int_equal(tnt_model_count_params(m), 1256080);
    tu_ok(tnt_compile(m, &(tnt_compile_opts){.optimizer = tnt_adam(1e-3f), .loss = TNT_SPARSE_CATEGORICAL_CROSSENTROPY,
                                             .metrics = "accuracy"}));
    char img[256], lbl[256];
    snprintf(img, sizeof img, "%s/train-images-idx3-ubyte.gz", dir);
    snprintf(lbl, sizeof lbl, "%s/train-labels-idx1-ubyte.gz", dir);
    tnt_dataset *train = tnt_dataset_from_idx(img, lbl);
    train = tnt_dataset_map(tnt_dataset_take(train, 2048), scale, NULL, NULL, NULL);
    train = tnt_dataset_batch(tnt_dataset_shuffle(train, 2048, 42), 64, true);
    tnt_history *h;
    tu_ok(tnt_fit(m, train, &(tnt_fit_opts){.epochs = 2}, &h));
    double l0 = tnt_history_get(h, "loss", 0), l1 = tnt_history_get(h, "loss", 1);
    double acc = tnt_history_get(h, "accuracy", 1);
    assert_true(l0 < 2.0 && l1 < l0);
    assert_true(acc > 0.6);
    tnt_history_free(h);
    tnt_dataset_free(train);
    tnt_model_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shape_errors_name_layer_and_shapes),
        cmocka_unit_test(test_compile_errors),
        cmocka_unit_test(test_summary_and_weights),
        cmocka_unit_test(test_copy_weights_between_models),
        cmocka_unit_test(test_model_gradients_vs_finite_differences),
        cmocka_unit_test(test_fit_evaluate_predict_and_determinism),
        cmocka_unit_test(test_epoch_loss_is_sample_mean),
        cmocka_unit_test(test_bad_data_errors),
        cmocka_unit_test(test_non_trainable_weights),
        cmocka_unit_test(test_lenet5_smoke),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    tnt_finalize();
    return rc;
}

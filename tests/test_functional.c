/* test_functional.c: Functional models (the graph API): branch-and-merge and shared-layer models
 * against finite differences, several inputs and outputs, a model used as a layer, a Sequential
 * and a Functional build of one network training identically, sequence masks reaching
 * MultiHeadAttention, summary connections, and the errors of bad graphs. */
#include "testutil.h"

#include "model/model.h"
#include "objectives/loss.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Total loss over all outputs (labels packed per sample), and the gradient into m->grads. */
static double graph_loss(tnt_model *m, const float *x, const float *y, int64_t n, bool grad) {
    tnt__plan *p = tnt__model_plan(m, n);
    assert_non_null(p);
    float *pred;
    tnt__step st = {.global_n = n, .training = true, .seed = tnt__model_training_seed(m)};
    tu_ok(tnt__model_forward(m, p, x, &st, &pred));
    int64_t per = 0, col = 0;
    for (int k = 0; k < m->n_outputs; k++) per += tnt_shape_numel(tnt_model_output_shape_at(m, k));
    double total = 0;
    for (int k = 0; k < m->n_outputs; k++) {
        int64_t c = tnt_shape_numel(tnt_model_output_shape_at(m, k));
        float *yk = malloc((size_t)(n * c) * sizeof(float));
        for (int64_t i = 0; i < n; i++) memcpy(yk + i * c, y + i * per + col, (size_t)c * sizeof(float));
        col += c;
        double sum;
        tu_ok(tnt__loss_compute(m->loss, m->from_logits || m->fused_output_loss[k], n, c, tnt__plan_loss_input(m, p, k, x),
                                yk, 1.0 / (double)n, tnt__plan_output_grad(m, p, k), &sum));
        total += sum / (double)n;
        free(yk);
    }
    if (grad) tu_ok(tnt__model_backward(m, p, x, &st));
    return total;
}

/* Every parameter's gradient against central differences of the loss. */
static void check_gradients(tnt_model *m, int64_t n) {
    int64_t in = tnt_shape_numel(m->input_shape), per = 0;
    for (int k = 0; k < m->n_outputs; k++) per += tnt_shape_numel(tnt_model_output_shape_at(m, k));
    float *x = malloc((size_t)(n * in) * sizeof(float)), *y = malloc((size_t)(n * per) * sizeof(float));
    tu_fill(x, n * in, 3);
    tu_fill(y, n * per, 4);
    graph_loss(m, x, y, n, true);
    int64_t np = m->n_params;
    float *g = malloc((size_t)np * sizeof(float));
    memcpy(g, m->grads, (size_t)np * sizeof(float));
    double worst = 0;
    for (int64_t i = 0; i < np; i++) {
        float keep = m->params[i];
        const float h = 1e-2f;
        m->params[i] = keep + h;
        double lp = graph_loss(m, x, y, n, false);
        m->params[i] = keep - h;
        double lm = graph_loss(m, x, y, n, false);
        m->params[i] = keep;
        double fd = (lp - lm) / (2.0 * h);
        double err = fabs(fd - g[i]) / (fabs(fd) + 1e-2);
        if (err > worst) worst = err;
        if (err > 2e-2) fail_msg("param %lld: backward %g, finite differences %g", (long long)i, g[i], fd);
    }
    assert_true(worst < 2e-2);
    free(x), free(y), free(g);
}

static void compile_mse(tnt_model *m) {
    tu_ok(tnt_compile(m, &(tnt_compile_opts){.optimizer = tnt_sgd(0.05f), .loss = TNT_MEAN_SQUARED_ERROR}));
}

static tnt_layer *dense(int units, tnt_activation act, const char *name) {
    return tnt_dense(units, &(tnt_layer_opts){.activation = act, .name = name});
}

/* in -> two branches -> Add and Concatenate -> Dense: the merge gradients reach both branches. */
static void test_branch_and_merge_gradients(void **state) {
    (void)state;
    tnt_graph *g = tnt_graph_new();
    tnt_ktensor in = tnt_graph_input(g, TNT_SHAPE(6), NULL);
    tnt_ktensor a = tnt_call(g, dense(5, TNT_ACT_TANH, NULL), in);
    tnt_ktensor b = tnt_call(g, dense(5, TNT_ACT_SIGMOID, NULL), in);
    tnt_ktensor sum = tnt_call2(g, tnt_add(NULL), a, b);
    tnt_ktensor prod = tnt_call2(g, tnt_multiply(NULL), a, sum);
    tnt_ktensor cat = tnt_call_n(g, tnt_concatenate(-1, NULL), 3, (tnt_ktensor[]){sum, prod, in});
    tnt_ktensor out = tnt_call(g, dense(3, TNT_ACT_LINEAR, NULL), cat);
    tnt_model *m = tnt_functional(g, 1, &in, 1, &out, "branches");
    tnt_graph_free(g);
    assert_non_null(m);
    assert_int_equal(tnt_model_count_params(m), 2 * (6 * 5 + 5) + 16 * 3 + 3);
    compile_mse(m);
    check_gradients(m, 4);
    tnt_model_free(m);
}

/* One Dense called twice (and a tensor read by three layers): gradients of both calls add up. */
static void test_shared_layer_gradients(void **state) {
    (void)state;
    tnt_graph *g = tnt_graph_new();
    tnt_ktensor in = tnt_graph_input(g, TNT_SHAPE(4), NULL);
    tnt_layer *shared = dense(4, TNT_ACT_TANH, "shared");
    tnt_ktensor h1 = tnt_call(g, shared, in);
    tnt_ktensor h2 = tnt_call(g, shared, h1);
    tnt_ktensor h3 = tnt_call2(g, tnt_add(NULL), h2, h1);
    tnt_ktensor out = tnt_call(g, dense(2, TNT_ACT_LINEAR, NULL), h3);
    tnt_model *m = tnt_functional(g, 1, &in, 1, &out, NULL);
    tnt_graph_free(g);
    assert_non_null(m);
    assert_int_equal(tnt_model_count_params(m), 20 + 10);
    assert_int_equal(tnt_model_num_layers(m), 4); /* input, shared, add, dense */
    compile_mse(m);
    check_gradients(m, 3);
    /* the summary lists both calls of the shared layer */
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    tu_ok(tnt_model_summary(m, f));
    fclose(f);
    assert_non_null(strstr(buf, "Connected to"));
    assert_non_null(strstr(buf, "shared[0][0]"));
    assert_non_null(strstr(buf, "shared[1][0]"));
    free(buf);
    tnt_model_free(m);
}

/* Two inputs (fed packed per sample) and two outputs (one loss each, summed). */
static void test_multi_input_output(void **state) {
    (void)state;
    tnt_graph *g = tnt_graph_new();
    tnt_ktensor ins[2] = {tnt_graph_input(g, TNT_SHAPE(3), "a"), tnt_graph_input(g, TNT_SHAPE(2, 2), "b")};
    tnt_ktensor fb = tnt_call(g, tnt_flatten(NULL), ins[1]);
    tnt_ktensor cat = tnt_call2(g, tnt_concatenate(-1, NULL), ins[0], fb);
    tnt_ktensor h = tnt_call(g, dense(6, TNT_ACT_TANH, NULL), cat);
    tnt_ktensor outs[2] = {tnt_call(g, dense(2, TNT_ACT_LINEAR, "out_a"), h), tnt_call(g, dense(1, TNT_ACT_SIGMOID, "out_b"), h)};
    tnt_model *m = tnt_functional(g, 2, ins, 2, outs, "two_heads");
    tnt_graph_free(g);
    assert_non_null(m);
    assert_int_equal(tnt_model_num_inputs(m), 2);
    assert_int_equal(tnt_model_num_outputs(m), 2);
    assert_int_equal(tnt_model_input_shape(m).dim[0], 7);
    assert_int_equal(tnt_model_output_shape_at(m, 1).dim[0], 1);
    compile_mse(m);
    check_gradients(m, 3);

    /* fit: per-output losses are logged under the output layers' names and add up */
    enum { N = 64 };
    float x[N * 7], y[N * 3];
    tu_fill(x, N * 7, 9);
    for (int i = 0; i < N; i++) {
        y[i * 3] = x[i * 7] + x[i * 7 + 3];
        y[i * 3 + 1] = x[i * 7 + 1] - x[i * 7 + 6];
        y[i * 3 + 2] = x[i * 7 + 2] > 0 ? 1.0f : 0.0f;
    }
    tnt_dataset *ds = tnt_dataset_batch(tnt_dataset_from_arrays(x, TNT_SHAPE(7), y, TNT_SHAPE(3), N, true), 16, false);
    tnt_history *h2;
    tu_ok(tnt_fit(m, ds, &(tnt_fit_opts){.epochs = 30}, &h2));
    double first = tnt_history_get(h2, "loss", 0), last = tnt_history_get(h2, "loss", 29);
    double la = tnt_history_get(h2, "out_a_loss", 29), lb = tnt_history_get(h2, "out_b_loss", 29);
    assert_true(last < 0.7 * first);
    assert_true(fabs(la + lb - last) < 1e-5 * fabs(last) + 1e-7);
    tnt_tensor *pred;
    tu_ok(tnt_predict(m, ds, NULL, &pred));
    assert_int_equal(pred->shape.dim[0], N);
    assert_int_equal(pred->shape.dim[1], 3);
    tnt_tensor_free(pred);
    tnt_history_free(h2);
    tnt_dataset_free(ds);
    tnt_model_free(m);
}

/* The same network as Sequential and as Functional, same weights: identical training. */
static void test_sequential_equals_functional(void **state) {
    (void)state;
    tnt_model *s = tnt_sequential(NULL);
    tu_ok(tnt_model_add(s, tnt_input_layer(TNT_SHAPE(8, 8, 1), NULL)));
    tu_ok(tnt_model_add(s, tnt_conv2d(4, 3, 3, &(tnt_layer_opts){.activation = TNT_ACT_RELU})));
    tu_ok(tnt_model_add(s, tnt_max_pooling2d(2, 2, NULL)));
    tu_ok(tnt_model_add(s, tnt_flatten(NULL)));
    tu_ok(tnt_model_add(s, tnt_dense(3, &(tnt_layer_opts){.activation = TNT_ACT_SOFTMAX})));
    tnt_graph *g = tnt_graph_new();
    tnt_ktensor in = tnt_graph_input(g, TNT_SHAPE(8, 8, 1), NULL);
    tnt_ktensor x = tnt_call(g, tnt_conv2d(4, 3, 3, &(tnt_layer_opts){.activation = TNT_ACT_RELU}), in);
    x = tnt_call(g, tnt_flatten(NULL), tnt_call(g, tnt_max_pooling2d(2, 2, NULL), x));
    x = tnt_call(g, tnt_dense(3, &(tnt_layer_opts){.activation = TNT_ACT_SOFTMAX}), x);
    tnt_model *f = tnt_functional(g, 1, &in, 1, &x, NULL);
    tnt_graph_free(g);
    assert_non_null(f);
    int64_t n = tnt_model_count_params(s);
    assert_int_equal(n, tnt_model_count_params(f));
    float *w = malloc((size_t)n * sizeof(float));
    tu_ok(tnt_get_weights(s, w, n));
    tu_ok(tnt_set_weights(f, w, n));
    enum { N = 40 };
    float xs[N * 64], ys[N];
    tu_fill(xs, N * 64, 5);
    for (int i = 0; i < N; i++) ys[i] = (float)(i % 3);
    tnt_dataset *ds = tnt_dataset_batch(tnt_dataset_from_arrays(xs, TNT_SHAPE(8, 8, 1), ys, TNT_SHAPE(1), N, true), 8, false);
    tnt_history *hs, *hf;
    tnt_model *both[2] = {s, f};
    tnt_history **hist[2] = {&hs, &hf};
    for (int k = 0; k < 2; k++) {
        tu_ok(tnt_compile(both[k], &(tnt_compile_opts){.optimizer = tnt_adam(0.01f), .loss = TNT_SPARSE_CATEGORICAL_CROSSENTROPY,
                                                       .metrics = "accuracy"}));
        tu_ok(tnt_fit(both[k], ds, &(tnt_fit_opts){.epochs = 3}, hist[k]));
    }
    for (int e = 0; e < 3; e++) {
        assert_true(tnt_history_get(hs, "loss", e) == tnt_history_get(hf, "loss", e));
        assert_true(tnt_history_get(hs, "accuracy", e) == tnt_history_get(hf, "accuracy", e));
    }
    float *w2 = malloc((size_t)n * sizeof(float));
    tu_ok(tnt_get_weights(s, w, n));
    tu_ok(tnt_get_weights(f, w2, n));
    assert_memory_equal(w, w2, (size_t)n * sizeof(float));
    free(w), free(w2);
    tnt_history_free(hs), tnt_history_free(hf);
    tnt_dataset_free(ds);
    tnt_model_free(s), tnt_model_free(f);
}

/* A model called as a layer inside another: its layers and weights come along. */
static void test_nested_model(void **state) {
    (void)state;
    tnt_model *inner = tnt_sequential("inner");
    tu_ok(tnt_model_add(inner, tnt_input_layer(TNT_SHAPE(5), NULL)));
    tu_ok(tnt_model_add(inner, dense(4, TNT_ACT_TANH, "inner_a")));
    tu_ok(tnt_model_add(inner, dense(3, TNT_ACT_LINEAR, "inner_b")));
    float *inner_w = malloc(39 * sizeof(float));
    tu_ok(tnt_get_weights(inner, inner_w, 39)); /* initialized: the outer model must keep these */
    tnt_graph *g = tnt_graph_new();
    tnt_ktensor in = tnt_graph_input(g, TNT_SHAPE(5), NULL), mid;
    tu_ok(tnt_call_model(g, inner, 1, &in, &mid));
    tnt_ktensor out = tnt_call(g, dense(2, TNT_ACT_LINEAR, "head"), mid);
    tnt_model *m = tnt_functional(g, 1, &in, 1, &out, "outer");
    tnt_graph_free(g);
    tnt_model_free(inner); /* the outer model keeps the layers */
    assert_non_null(m);
    assert_int_equal(tnt_model_count_params(m), 39 + 8);
    float w[47];
    tu_ok(tnt_get_weights(m, w, 47));
    assert_memory_equal(w, inner_w, 39 * sizeof(float));
    compile_mse(m);
    check_gradients(m, 3);
    free(inner_w);
    tnt_model_free(m);
}

/* Embedding(mask_zero) -> MultiHeadAttention equals the same network given the mask explicitly. */
static void test_sequence_mask_reaches_attention(void **state) {
    (void)state;
    enum { T = 5, V = 7, D = 4, N = 3 };
    tnt_graph *g = tnt_graph_new();
    tnt_ktensor ids = tnt_graph_input(g, TNT_SHAPE(T), NULL);
    tnt_ktensor e = tnt_call(g, tnt_embedding(V, D, true, "emb"), ids);
    tnt_ktensor a = tnt_call_attention(g, tnt_multi_head_attention(2, 3, &(tnt_attention_opts){.name = "mha"}), e, e,
                                       (tnt_ktensor){-1}, (tnt_ktensor){-1}, false);
    tnt_model *masked = tnt_functional(g, 1, &ids, 1, &a, NULL);
    tnt_graph_free(g);
    assert_non_null(masked);

    g = tnt_graph_new();
    tnt_ktensor ins[2] = {tnt_graph_input(g, TNT_SHAPE(T), NULL), tnt_graph_input(g, TNT_SHAPE(T, T), NULL)};
    e = tnt_call(g, tnt_embedding(V, D, false, "emb"), ins[0]);
    a = tnt_call_attention(g, tnt_multi_head_attention(2, 3, &(tnt_attention_opts){.name = "mha"}), e, e,
                           (tnt_ktensor){-1}, ins[1], false);
    tnt_model *explicit_mask = tnt_functional(g, 2, ins, 1, &a, NULL);
    tnt_graph_free(g);
    assert_non_null(explicit_mask);

    int64_t n = tnt_model_count_params(masked);
    float *w = malloc((size_t)n * sizeof(float));
    tu_ok(tnt_get_weights(masked, w, n));
    tu_ok(tnt_set_weights(explicit_mask, w, n));
    float x1[N * T] = {3, 1, 4, 0, 0, 2, 6, 0, 0, 0, 5, 5, 5, 5, 5};
    float x2[N * (T + T * T)];
    for (int i = 0; i < N; i++) {
        memcpy(x2 + i * (T + T * T), x1 + i * T, T * sizeof(float));
        for (int q = 0; q < T; q++)
            for (int k = 0; k < T; k++)
                x2[i * (T + T * T) + T + q * T + k] = x1[i * T + q] != 0 && x1[i * T + k] != 0;
    }
    tnt_tensor *y1, *y2;
    tu_ok(tnt_predict_on_batch(masked, &(tnt_tensor){TNT_SHAPE(N, T), x1}, &y1));
    tu_ok(tnt_predict_on_batch(explicit_mask, &(tnt_tensor){TNT_SHAPE(N, T + T * T), x2}, &y2));
    tu_assert_close(y1->data, y2->data, N * T * D, 1e-6, 1e-7, "masked attention");
    tnt_tensor_free(y1), tnt_tensor_free(y2);
    free(w);
    tnt_model_free(masked), tnt_model_free(explicit_mask);
}

/* conv -> BN -> relu -> conv -> BN -> Add -> relu -> pooling -> Dense; with block_fold a Reshape
 * view before each relu keeps the model from folding it into the BN or the Add. */
static tnt_model *bn_relu_model(bool block_fold) {
    tnt_graph *g = tnt_graph_new();
    tnt_ktensor in = tnt_graph_input(g, TNT_SHAPE(6, 6, 3), NULL);
    tnt_layer_opts same = {.padding = TNT_PADDING_SAME};
    tnt_ktensor x = tnt_call(g, tnt_batch_normalization(0, 0, NULL), tnt_call(g, tnt_conv2d(4, 3, 3, &same), in));
    if (block_fold) x = tnt_call(g, tnt_reshape(TNT_SHAPE(6, 6, 4), NULL), x);
    tnt_ktensor r = tnt_call(g, tnt_activation_layer(TNT_ACT_RELU, NULL), x);
    tnt_ktensor y = tnt_call(g, tnt_batch_normalization(0, 0, NULL), tnt_call(g, tnt_conv2d(4, 3, 3, &same), r));
    y = tnt_call2(g, tnt_add(NULL), y, r);
    if (block_fold) y = tnt_call(g, tnt_reshape(TNT_SHAPE(6, 6, 4), NULL), y);
    y = tnt_call(g, tnt_activation_layer(TNT_ACT_RELU, NULL), y);
    y = tnt_call(g, tnt_dense(3, NULL), tnt_call(g, tnt_global_average_pooling2d(NULL), y));
    tnt_model *m = tnt_functional(g, 1, &in, 1, &y, NULL);
    tnt_graph_free(g);
    assert_non_null(m);
    compile_mse(m);
    return m;
}

/* The relus folded into BatchNormalization and Add compute what the Activation layers do. */
static void test_folded_bn_relu_equals_separate(void **state) {
    (void)state;
    tnt_model *folded = bn_relu_model(false), *separate = bn_relu_model(true);
    int64_t n = tnt_model_count_params(folded);
    assert_int_equal(n, tnt_model_count_params(separate));
    float *w = malloc((size_t)n * sizeof(float));
    tu_ok(tnt_get_weights(folded, w, n));
    tu_ok(tnt_set_weights(separate, w, n));
    int folds = 0;
    for (int i = 0; i < folded->n_nodes; i++) folds += folded->nodes[i].folded;
    for (int i = 0; i < separate->n_nodes; i++) assert_false(separate->nodes[i].folded);
    assert_int_equal(folds, 2); /* into the first BN, and into the Add */
    enum { N = 5 };
    float x[N * 108], y[N * 3];
    tu_fill(x, N * 108, 21);
    tu_fill(y, N * 3, 22);
    double lf = graph_loss(folded, x, y, N, true), ls = graph_loss(separate, x, y, N, true);
    assert_true(fabs(lf - ls) <= 1e-6 * fabs(ls));
    tu_assert_close(folded->grads, separate->grads, folded->n_params, 1e-5, 1e-7, "gradients");
    free(w);
    tnt_model_free(folded), tnt_model_free(separate);
}

static void test_graph_errors(void **state) {
    (void)state;
    tnt_graph *g = tnt_graph_new();
    tnt_ktensor in = tnt_graph_input(g, TNT_SHAPE(4), "x");
    tnt_ktensor other = tnt_graph_input(g, TNT_SHAPE(3), "other");
    /* a failed call propagates */
    tnt_ktensor bad = tnt_call(g, tnt_conv2d(2, 3, 3, NULL), in);
    assert_true(bad.id < 0);
    tu_error_contains("(4,)");
    tnt_ktensor worse = tnt_call(g, tnt_dense(2, NULL), bad);
    assert_true(worse.id < 0);
    tu_error_contains("failed call");
    assert_null(tnt_functional(g, 1, &in, 1, &worse, NULL));
    /* a shared layer on another shape */
    tnt_layer *d = tnt_dense(2, NULL);
    assert_true(tnt_call(g, d, in).id >= 0);
    assert_true(tnt_call(g, d, other).id < 0);
    tu_error_contains("shared layer");
    /* Add on mismatched shapes names them */
    assert_true(tnt_call2(g, tnt_add(NULL), in, other).id < 0);
    tu_error_contains("(3,)");
    /* an output depending on an input not given */
    tnt_ktensor sum = tnt_call2(g, tnt_concatenate(-1, NULL), in, other);
    assert_true(sum.id >= 0);
    assert_null(tnt_functional(g, 1, &in, 1, &sum, NULL));
    tu_error_contains("\"other\"");
    /* a non-input tensor as model input */
    assert_null(tnt_functional(g, 1, &sum, 1, &sum, NULL));
    tu_error_contains("tnt_graph_input");
    /* duplicate layer names */
    assert_true(tnt_call(g, tnt_dense(2, &(tnt_layer_opts){.name = "twice"}), in).id >= 0);
    assert_true(tnt_call(g, tnt_dense(2, &(tnt_layer_opts){.name = "twice"}), in).id < 0);
    tu_error_contains("\"twice\"");
    /* a layer owned by a Sequential model cannot join a graph */
    tnt_model *s = tnt_sequential(NULL);
    tnt_layer *owned = tnt_dense(2, NULL);
    tu_ok(tnt_model_add(s, owned));
    assert_true(tnt_call(g, owned, in).id < 0);
    tu_error_contains("tnt_call_model");
    tnt_model_free(s);
    /* NULLs */
    assert_true(tnt_call(g, NULL, in).id < 0);
    assert_true(tnt_call(NULL, tnt_dense(1, NULL), in).id < 0);
    tnt_graph_free(g);
}

int main(void) {
    tnt_init(NULL, NULL);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_branch_and_merge_gradients),
        cmocka_unit_test(test_shared_layer_gradients),
        cmocka_unit_test(test_multi_input_output),
        cmocka_unit_test(test_sequential_equals_functional),
        cmocka_unit_test(test_nested_model),
        cmocka_unit_test(test_sequence_mask_reaches_attention),
        cmocka_unit_test(test_folded_bn_relu_equals_separate),
        cmocka_unit_test(test_graph_errors),
    };
    int r = cmocka_run_group_tests(tests, NULL, NULL);
    tnt_finalize();
    return r;
}

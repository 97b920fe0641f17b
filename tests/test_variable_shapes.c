/* test_variable_shapes.c: models with variable (None) input dimensions. A fully convolutional
 * model and an LSTM model with TNT_DIM_NONE inputs predict on several sizes (back and forth)
 * exactly as models made for each fixed size with the same weights; training on one size then
 * another equals the fixed-size models trained in turn, bitwise; the shapes report None (-1)
 * where they vary, summary and JSON say None/null; .h5 and .keras round trips keep the variable
 * dimensions; several inputs take their shapes from tnt_model_set_input_shapes; errors name the
 * bad shape (wrong rank, a fixed dimension that differs, a weight that would depend on a None
 * dimension, packed inputs without shapes). */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NONE TNT_DIM_NONE

/* Conv2D(4, 3x3, same, relu), MaxPooling2D(2), Conv2D(2, 3x3, valid) on (h, w, 3) */
static tnt_model *conv_model(int64_t h, int64_t w) {
    tnt_graph *g = tnt_graph_new();
    tnt_ktensor in = tnt_graph_input(g, TNT_SHAPE(h, w, 3), "image");
    tnt_ktensor x = tnt_call(g, tnt_conv2d(4, 3, 3, &(tnt_layer_opts){.padding = TNT_PADDING_SAME, .activation = TNT_ACT_RELU, .name = "c1"}), in);
    x = tnt_call(g, tnt_max_pooling2d(2, 2, &(tnt_layer_opts){.name = "pool"}), x);
    x = tnt_call(g, tnt_conv2d(2, 3, 3, &(tnt_layer_opts){.name = "c2"}), x);
    tnt_model *m = tnt_functional(g, 1, &in, 1, &x, "fcn");
    tnt_graph_free(g);
    assert_non_null(m);
    return m;
}

/* LSTM(5, return_sequences), Dense(3) on (t, 4) */
static tnt_model *lstm_model(int64_t t) {
    tnt_model *m = tnt_sequential("seq");
    tu_ok(tnt_model_add(m, tnt_input_layer(TNT_SHAPE(t, 4), "steps")));
    tu_ok(tnt_model_add(m, tnt_lstm(5, &(tnt_rnn_opts){.return_sequences = true, .name = "lstm"})));
    tu_ok(tnt_model_add(m, tnt_dense(3, &(tnt_layer_opts){.name = "out"})));
    return m;
}

static void copy_weights(tnt_model *from, tnt_model *to) {
    int64_t n = tnt_model_count_params(from);
    assert_int_equal(n, tnt_model_count_params(to));
    float *w = malloc((size_t)n * sizeof *w);
    tu_ok(tnt_get_weights(from, w, n));
    tu_ok(tnt_set_weights(to, w, n));
    free(w);
}

static tnt_tensor *predict(tnt_model *m, tnt_shape s, uint64_t seed) {
    tnt_tensor *x = tnt_tensor_new(s), *y = NULL;
    tu_fill(x->data, tnt_shape_numel(s), seed);
    tu_ok(tnt_predict_on_batch(m, x, &y));
    tnt_tensor_free(x);
    return y;
}

/* The variable model predicts on shape s exactly as a fixed one made for it. */
static void check_size(tnt_model *var, tnt_model *fixed, tnt_shape s) {
    copy_weights(var, fixed);
    tnt_tensor *a = predict(var, s, 3), *b = predict(fixed, s, 3);
    assert_int_equal(a->shape.ndim, b->shape.ndim);
    for (int i = 0; i < a->shape.ndim; i++) assert_int_equal(a->shape.dim[i], b->shape.dim[i]);
    tu_assert_bitwise(a->data, b->data, tnt_shape_numel(a->shape), "variable against fixed");
    tnt_tensor_free(a), tnt_tensor_free(b);
}

static void test_fully_convolutional(void **state) {
    (void)state;
    tnt_model *m = conv_model(NONE, NONE);
    tnt_shape in = tnt_model_input_shape(m), out = tnt_model_output_shape_at(m, 0);
    assert_int_equal(in.ndim, 3);
    assert_int_equal(in.dim[0], -1), assert_int_equal(in.dim[1], -1), assert_int_equal(in.dim[2], 3);
    assert_int_equal(out.dim[0], -1), assert_int_equal(out.dim[1], -1), assert_int_equal(out.dim[2], 2);
    tnt_model *a = conv_model(12, 12), *b = conv_model(9, 17);
    check_size(m, a, TNT_SHAPE(2, 12, 12, 3));
    check_size(m, b, TNT_SHAPE(3, 9, 17, 3));
    check_size(m, a, TNT_SHAPE(2, 12, 12, 3)); /* back to the first size: its plan again */
    /* (3, 9, 17) pools to (4, 8): the valid 3x3 gives (2, 6) */
    tnt_tensor *y = predict(m, TNT_SHAPE(1, 9, 17, 3), 5);
    assert_int_equal(y->shape.dim[1], 2), assert_int_equal(y->shape.dim[2], 6);
    tnt_tensor_free(y);
    /* the summary and the JSON keep None */
    char *buf = NULL, *json = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    tu_ok(tnt_model_summary(m, f));
    fclose(f);
    assert_non_null(strstr(buf, "(None, None, None, 4)"));
    tu_ok(tnt_model_to_json(m, &json));
    assert_non_null(strstr(json, "\"batch_input_shape\":[null,null,null,3]"));
    tnt_model *back = tnt_model_from_json(json);
    assert_non_null(back);
    assert_int_equal(tnt_model_input_shape(back).dim[0], -1);
    check_size(back, b, TNT_SHAPE(1, 9, 17, 3));
    free(buf), free(json);
    tnt_model_free(back), tnt_model_free(a), tnt_model_free(b), tnt_model_free(m);
}

static void test_sequence_lengths(void **state) {
    (void)state;
    tnt_model *m = lstm_model(NONE), *a = lstm_model(3), *b = lstm_model(8);
    assert_int_equal(tnt_model_output_shape(m).dim[0], -1);
    assert_int_equal(tnt_model_output_shape(m).dim[1], 3);
    check_size(m, b, TNT_SHAPE(4, 8, 4));
    check_size(m, a, TNT_SHAPE(5, 3, 4));
    check_size(m, b, TNT_SHAPE(4, 8, 4));
    /* through a dataset: the outputs are sized for its shape before the first batch */
    float x[7 * 3 * 4];
    tu_fill(x, 7 * 3 * 4, 6);
    tnt_dataset *ds = tnt_dataset_batch(tnt_dataset_from_arrays(x, TNT_SHAPE(3, 4), NULL, TNT_SHAPE(), 7, false), 4, false);
    tnt_tensor *y = NULL, *ya = NULL, *xa = tnt_tensor_new(TNT_SHAPE(7, 3, 4));
    tu_ok(tnt_predict(m, ds, NULL, &y));
    memcpy(xa->data, x, sizeof x);
    tu_ok(tnt_predict_on_batch(a, xa, &ya));
    assert_int_equal(y->shape.ndim, 3), assert_int_equal(y->shape.dim[1], 3), assert_int_equal(y->shape.dim[2], 3);
    tu_assert_close(y->data, ya->data, 7 * 3 * 3, 1e-6, 1e-7, "predict over a dataset of length 3");
    tnt_tensor_free(y), tnt_tensor_free(ya), tnt_tensor_free(xa);
    tnt_dataset_free(ds);
    tnt_model_free(a), tnt_model_free(b), tnt_model_free(m);
}

/* SGD without momentum keeps no state but the step count: training on one size then another
 * equals the fixed models trained in turn, the weights handed from one to the next. */
static void fit_on(tnt_model *m, int64_t h, int64_t w, uint64_t seed) {
    enum { N = 12 };
    float *x = malloc((size_t)(N * h * w * 3) * sizeof *x);
    int64_t out = ((h / 2) - 2) * ((w / 2) - 2) * 2;
    float *y = malloc((size_t)(N * out) * sizeof *y);
    tu_fill(x, N * h * w * 3, seed);
    tu_fill(y, N * out, seed + 1);
    tnt_dataset *ds = tnt_dataset_batch(tnt_dataset_from_arrays(x, TNT_SHAPE(h, w, 3), y, TNT_SHAPE((h / 2) - 2, (w / 2) - 2, 2), N, false), 4, false);
    tu_ok(tnt_fit(m, ds, &(tnt_fit_opts){.epochs = 2}, NULL));
    tnt_dataset_free(ds);
    free(x), free(y);
}

static void compile_sgd(tnt_model *m) {
    tu_ok(tnt_compile(m, &(tnt_compile_opts){.optimizer = tnt_sgd(0.05f), .loss = TNT_MEAN_SQUARED_ERROR, .seed = 4}));
}

static void test_training(void **state) {
    (void)state;
    tnt_model *m = conv_model(NONE, NONE), *a = conv_model(10, 14), *b = conv_model(16, 8);
    compile_sgd(m), compile_sgd(a), compile_sgd(b);
    copy_weights(m, a);
    fit_on(m, 10, 14, 1), fit_on(a, 10, 14, 1);
    copy_weights(a, b);
    fit_on(m, 16, 8, 2), fit_on(b, 16, 8, 2);
    int64_t n = tnt_model_count_params(m);
    float *wm = malloc((size_t)n * sizeof *wm), *wb = malloc((size_t)n * sizeof *wb);
    tu_ok(tnt_get_weights(m, wm, n));
    tu_ok(tnt_get_weights(b, wb, n));
    tu_assert_bitwise(wm, wb, n, "weights after training on two sizes");
    free(wm), free(wb);
    tnt_model_free(a), tnt_model_free(b), tnt_model_free(m);
}

/* Whole-model files keep the None dimensions. */
static void test_files(void **state) {
    (void)state;
    const char *names[] = {"var.h5", "var.keras"};
    tnt_model *m = lstm_model(NONE), *fixed = lstm_model(6);
    compile_sgd(m);
    for (int k = 0; k < 2; k++) {
        const char *path = tu_tmp_path(names[k]);
        tu_ok(tnt_save_model(m, path, NULL));
        tnt_model *back = tnt_load_model(path, true);
        assert_non_null(back);
        assert_int_equal(tnt_model_input_shape(back).dim[0], -1);
        copy_weights(m, fixed);
        tnt_tensor *a = predict(back, TNT_SHAPE(2, 6, 4), 8), *b = predict(fixed, TNT_SHAPE(2, 6, 4), 8);
        tu_assert_bitwise(a->data, b->data, tnt_shape_numel(a->shape), names[k]);
        tnt_tensor_free(a), tnt_tensor_free(b);
        tnt_model_free(back);
    }
    tnt_model_free(fixed), tnt_model_free(m);
}

/* Two inputs: their values come packed, so the shapes are given. */
static void test_several_inputs(void **state) {
    (void)state;
    tnt_graph *g = tnt_graph_new();
    tnt_ktensor a = tnt_graph_input(g, TNT_SHAPE(NONE, 3), "a"), b = tnt_graph_input(g, TNT_SHAPE(NONE, 3), "b");
    tnt_ktensor s = tnt_call2(g, tnt_add(NULL), a, b);
    tnt_ktensor y = tnt_call(g, tnt_dense(2, &(tnt_layer_opts){.name = "d"}), s);
    tnt_model *m = tnt_functional(g, 2, (tnt_ktensor[]){a, b}, 1, &y, "two");
    tnt_graph_free(g);
    assert_non_null(m);
    assert_int_equal(tnt_model_input_shape(m).dim[0], -1);
    tnt_tensor *x = tnt_tensor_new(TNT_SHAPE(2, 30)), *out = NULL;
    tu_fill(x->data, 60, 2);
    assert_int_equal(tnt_predict_on_batch(m, x, &out), TNT_ERR_STATE);
    tu_error_contains("tnt_model_set_input_shapes");
    tnt_shape shapes[2] = {TNT_SHAPE(5, 3), TNT_SHAPE(5, 3)};
    tu_ok(tnt_model_set_input_shapes(m, 2, shapes));
    tu_ok(tnt_predict_on_batch(m, x, &out));
    assert_int_equal(out->shape.dim[1], 5), assert_int_equal(out->shape.dim[2], 2);
    /* out[i, t] = dense(a[i, t] + b[i, t]) */
    const char *wn;
    float *kernel, *bias;
    tu_ok(tnt_model_weight(m, 0, &wn, NULL, &kernel));
    tu_ok(tnt_model_weight(m, 1, &wn, NULL, &bias));
    for (int i = 0; i < 2; i++)
        for (int t = 0; t < 5; t++)
            for (int u = 0; u < 2; u++) {
                double v = bias[u];
                for (int c = 0; c < 3; c++) v += (x->data[i * 30 + t * 3 + c] + x->data[i * 30 + 15 + t * 3 + c]) * kernel[c * 2 + u];
                assert_float_equal(out->data[i * 10 + t * 2 + u], v, 1e-5);
            }
    tnt_tensor_free(out), tnt_tensor_free(x);
    shapes[1] = TNT_SHAPE(5, 4);
    assert_int_equal(tnt_model_set_input_shapes(m, 2, shapes), TNT_ERR_SHAPE);
    tu_error_contains("input 1 of model \"two\" has shape (5, 4), the model expects (None, 3)");
    tnt_model_free(m);
}

static void test_errors(void **state) {
    (void)state;
    tnt_model *m = conv_model(NONE, NONE);
    tnt_tensor *x = tnt_tensor_new(TNT_SHAPE(1, 8, 8, 5)), *y = NULL;
    assert_int_equal(tnt_predict_on_batch(m, x, &y), TNT_ERR_SHAPE);
    tu_error_contains("has shape (8, 8, 5), the model expects (None, None, 3)");
    tnt_tensor_free(x);
    /* too small for the valid convolution after pooling: named, and the model still works */
    x = tnt_tensor_new(TNT_SHAPE(1, 3, 3, 3));
    assert_int_not_equal(tnt_predict_on_batch(m, x, &y), TNT_OK);
    tu_error_contains("\"c2\"");
    tnt_tensor_free(x);
    tnt_tensor_free(predict(m, TNT_SHAPE(1, 8, 8, 3), 1));
    tnt_model_free(m);
    /* Flatten of a None dimension, then Dense: its kernel would depend on it */
    m = tnt_sequential("bad");
    tu_ok(tnt_model_add(m, tnt_input_layer(TNT_SHAPE(NONE, 4), "x")));
    tu_ok(tnt_model_add(m, tnt_flatten("f")));
    assert_int_equal(tnt_model_add(m, tnt_dense(2, &(tnt_layer_opts){.name = "d"})), TNT_ERR_SHAPE);
    tu_error_contains("layer \"d\" (Dense): its weight kernel has shape");
    tnt_model_free(m);
    assert_null(tnt_input_layer(TNT_SHAPE(4, -2), "x"));
    tu_error_contains("TNT_DIM_NONE");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fully_convolutional), cmocka_unit_test(test_sequence_lengths),
        cmocka_unit_test(test_training),            cmocka_unit_test(test_files),
        cmocka_unit_test(test_several_inputs),      cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, tu_tmpdir_setup, tu_tmpdir_teardown);
}

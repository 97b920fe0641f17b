/* test_keras_layouts.c: layouts the survey of public Keras files met (scripts/keras_survey.sh,
 * fixtures/gen_keras_layouts.py): tf.keras 2.14's .keras weights under
 * _layer_checkpoint_dependencies, tf.keras 2.15's written on Windows ("layers\dense" as one group
 * name), both predicting as their NumPy rebuilds; a Sequential saved unbuilt (no input shape, no
 * weights) loads and is built at its first call as Keras builds it, and the same config with
 * weights in the file is refused as Keras refuses it; Keras 2.0's numpy values in a config
 * ({"type": "ndarray", "value": v}); LSTM's unit_forget_bias over any bias_initializer (Keras's
 * LSTMCell: [init(units), ones(units), init(2 units)]). */
#include "json_harness.h"

#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void check_predictions(tnt_model *m, const char *yname) {
    tnt_shape xs, ys;
    float *x = tu_load("layouts_x", &xs), *y = tu_load(yname, &ys);
    tnt_tensor *in = tnt_tensor_new(xs);
    memcpy(in->data, x, sizeof(float) * (size_t)tnt_shape_numel(xs));
    tnt_tensor *out = NULL;
    tu_ok(tnt_predict_on_batch(m, in, &out));
    assert_int_equal(tnt_shape_numel(out->shape), tnt_shape_numel(ys));
    tu_assert_close(out->data, y, tnt_shape_numel(ys), 1e-5, 1e-6, yname);
    tnt_tensor_free(out), tnt_tensor_free(in);
    free(x), free(y);
}

static void test_tfkeras_214_layout(void **state) {
    (void)state;
    tnt_model *m = tnt_load_model("fixtures/tfkeras214.keras", false);
    if (!m) fail_msg("%s", tnt_last_error());
    check_predictions(m, "tfkeras214_y");
    tnt_model_free(m);
}

static void test_tfkeras_215_windows_layout(void **state) {
    (void)state;
    tnt_model *m = tnt_load_model("fixtures/tfkeras215_windows.keras", false);
    if (!m) fail_msg("%s", tnt_last_error());
    check_predictions(m, "tfkeras215_windows_y");
    /* written back in Keras 3's own layout, and read again */
    const char *again = tu_tmp_path("windows_again.keras");
    tu_ok(tnt_save_model(m, again, NULL));
    tnt_model *back = tnt_load_model(again, false);
    if (!back) fail_msg("%s", tnt_last_error());
    check_predictions(back, "tfkeras215_windows_y");
    tnt_model_free(back), tnt_model_free(m);
}

/* Embedding(100, 4) -> Flatten, never built: built by the first batch's shape (2, 7): (2, 28). */
static void test_unbuilt_sequential(void **state) {
    (void)state;
    tnt_model *m = tnt_load_model("fixtures/unbuilt_sequential.h5", false);
    if (!m) fail_msg("%s", tnt_last_error());
    tnt_tensor *in = tnt_tensor_new(TNT_SHAPE(2, 7)), *out = NULL;
    for (int i = 0; i < 14; i++) in->data[i] = (float)(i * 7 % 100);
    tu_ok(tnt_predict_on_batch(m, in, &out));
    assert_int_equal(out->shape.ndim, 2);
    assert_int_equal(out->shape.dim[0], 2);
    assert_int_equal(out->shape.dim[1], 28);
    /* RandomUniform(-0.05, 0.05) embeddings, as Keras draws them for an unbuilt model */
    for (int i = 0; i < 56; i++) assert_true(out->data[i] >= -0.05f && out->data[i] <= 0.05f);
    tnt_tensor_free(out), tnt_tensor_free(in);
    tnt_model_free(m);

    assert_null(tnt_load_model("fixtures/unbuilt_with_weights.h5", false));
    tu_error_contains("no input shape, yet the file holds 1 weight array(s)");
}

/* Keras 2.0.5's LeakyReLU(alpha 0.3) as its config wrote it: max(x, 0.3 x). */
static void test_keras20_ndarray_value(void **state) {
    (void)state;
    tnt_model *m = seq_from_layer_json("[null, 4]", "{\"class_name\": \"LeakyReLU\", \"config\": {\"alpha\": "
                                                    "{\"type\": \"ndarray\", \"value\": 0.30000001192092896}, "
                                                    "\"trainable\": true, \"name\": \"leaky_re_lu_2\"}}");
    if (!m) fail_msg("%s", tnt_last_error());
    tnt_tensor *in = tnt_tensor_new(TNT_SHAPE(1, 4)), *out = NULL;
    const float x[4] = {-2.0f, -0.5f, 0.25f, 3.0f};
    memcpy(in->data, x, sizeof x);
    tu_ok(tnt_predict_on_batch(m, in, &out));
    for (int i = 0; i < 4; i++) {
        float want = x[i] > 0 ? x[i] : 0.3f * x[i];
        assert_true(fabsf(out->data[i] - want) < 1e-6f);
    }
    tnt_tensor_free(out), tnt_tensor_free(in);
    tnt_model_free(m);
}

/* unit_forget_bias with bias_initializer Constant(0.5) and ones: the bias is init everywhere but
 * ones on the forget gate's units (Keras's LSTMCell.build). */
static void test_unit_forget_bias_any_initializer(void **state) {
    (void)state;
    static const struct {
        const char *init;
        float other;
    } cases[] = {{"{\"class_name\": \"Constant\", \"config\": {\"value\": 0.5}}", 0.5f}, {"\"ones\"", 1.0f},
                 {"\"zeros\"", 0.0f}};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        char layer[512];
        snprintf(layer, sizeof layer, "{\"class_name\": \"LSTM\", \"config\": {\"name\": \"l\", \"units\": 3, "
                 "\"unit_forget_bias\": true, \"bias_initializer\": %s}}", cases[c].init);
        tnt_model *m = seq_from_layer_json("[null, 5, 2]", layer);
        if (!m) fail_msg("%s: %s", cases[c].init, tnt_last_error());
        int64_t n = tnt_model_count_params(m);
        assert_int_equal(n, 2 * 12 + 3 * 12 + 12);
        float w[72];
        tu_ok(tnt_get_weights(m, w, n));
        const float *bias = w + n - 12; /* gates i, f, c, o */
        for (int i = 0; i < 12; i++) assert_true(bias[i] == (i >= 3 && i < 6 ? 1.0f : cases[c].other));
        tnt_model_free(m);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tfkeras_214_layout),
        cmocka_unit_test(test_tfkeras_215_windows_layout),
        cmocka_unit_test(test_unbuilt_sequential),
        cmocka_unit_test(test_keras20_ndarray_value),
        cmocka_unit_test(test_unit_forget_bias_any_initializer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

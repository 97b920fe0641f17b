/* test_keras_real.c: real Keras 2 files, written by Keras itself (taken from deeplearning4j's
 * dl4j-test-resources, Apache-2.0; sources and commits in fixtures/keras_real/README.md), loaded
 * with tnt_load_model (whole-model .h5) and tnt_model_from_json + tnt_load_weights (a
 * model.to_json() + save_weights() pair). Predictions are compared with an independent PyTorch
 * rebuild of each network (fixtures/gen_keras_real.py) within rtol 1e-5, atol 1e-6, and for one
 * file also with the predictions Keras itself stored beside it. */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DIR "fixtures/keras_real/"
#define RTOL 1e-5
#define ATOL 1e-6

static char *read_text(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) fail_msg("cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    assert_non_null(s);
    assert_int_equal(fread(s, 1, (size_t)n, f), (size_t)n);
    s[n] = 0;
    fclose(f);
    return s;
}

/* Predicts fixtures keras_real/<name>_x on m and compares with keras_real/<name>_y. */
static void check_predictions(tnt_model *m, const char *name) {
    char xn[128], yn[128];
    snprintf(xn, sizeof xn, "keras_real/%s_x", name);
    snprintf(yn, sizeof yn, "keras_real/%s_y", name);
    tnt_shape xs, ys;
    float *x = tu_load(xn, &xs), *y = tu_load(yn, &ys);
    tnt_tensor *in = tnt_tensor_new(xs);
    memcpy(in->data, x, sizeof(float) * (size_t)tnt_shape_numel(xs));
    tnt_tensor *out = NULL;
    tu_ok(tnt_predict_on_batch(m, in, &out));
    assert_int_equal(out->shape.ndim, ys.ndim);
    for (int i = 0; i < ys.ndim; i++) assert_int_equal(out->shape.dim[i], ys.dim[i]);
    tu_assert_close(out->data, y, tnt_shape_numel(ys), RTOL, ATOL, name);
    tnt_tensor_free(out);
    tnt_tensor_free(in);
    free(x);
    free(y);
}

static tnt_model *load_full(const char *file, bool compile) {
    tnt_model *m = tnt_load_model(file, compile);
    if (!m) fail_msg("tnt_load_model(%s, %s): %s", file, compile ? "true" : "false", tnt_last_error());
    return m;
}

/* Keras 2.1.3, Sequential as a bare list: Conv2D(1, 3x3) BatchNormalization(eps 1e-3) ReLU
 * Conv2D(1, 3x3) Flatten Dense(1), compiled with Adam and mse. */
static void test_cnn_batch_norm(void **state) {
    (void)state;
    tnt_model *m = load_full(DIR "cnn_batch_norm.h5", true);
    assert_non_null(tnt_model_optimizer(m));
    check_predictions(m, "cnn_batch_norm");
    tnt_model_free(m);
}

/* Keras 2.0.9: Dense(64, relu) Dense(10, softmax), compiled with Adam, categorical_crossentropy
 * and the metric "accuracy". */
static void test_optimizers_adam(void **state) {
    (void)state;
    tnt_model *m = load_full(DIR "optimizers_adam.h5", true);
    assert_string_equal(tnt_optimizer_name(tnt_model_optimizer(m)), "Adam");
    assert_float_equal(tnt_optimizer_get_lr(tnt_model_optimizer(m)), 0.001f, 1e-9);
    check_predictions(m, "optimizers_adam");
    tnt_model_free(m);
}

/* The same architecture with other weights, compiled with Adadelta; Keras 2.0.9 stores the rate
 * as "lr" (1.0, Keras 2.0's Adadelta default; today's default, which we use, is 0.001). */
static void test_optimizers_adadelta(void **state) {
    (void)state;
    tnt_model *m = load_full(DIR "optimizers_adadelta.h5", true);
    assert_string_equal(tnt_optimizer_name(tnt_model_optimizer(m)), "Adadelta");
    assert_float_equal(tnt_optimizer_get_lr(tnt_model_optimizer(m)), 1.0f, 1e-7);
    check_predictions(m, "optimizers_adadelta");
    tnt_model_free(m);
}

/* Keras 2.3.1: Embedding(7, 4) Flatten Dense(1, relu), compiled with SGD and the loss "logcosh":
 * compile=true loads it compiled with log_cosh; compile=false without an optimizer. */
static void test_custom_loss(void **state) {
    (void)state;
    tnt_model *c = tnt_load_model(DIR "custom_loss.h5", true);
    tu_ok(c ? TNT_OK : TNT_ERR_FORMAT);
    tnt_compile_opts o;
    char met[128];
    tu_ok(tnt_model_compile_opts(c, &o, met, sizeof met));
    assert_int_equal(o.loss, TNT_LOG_COSH);
    tnt_model_free(c);
    tnt_model *m = load_full(DIR "custom_loss.h5", false);
    assert_null(tnt_model_optimizer(m));
    check_predictions(m, "custom_loss");
    tnt_model_free(m);
}

/* tf.keras 2.2.4-tf, Functional ("Model"): Input(5) Embedding(10, 8) Dense(4), not compiled. */
static void test_tfkeras_misc_0(void **state) {
    (void)state;
    tnt_model *m = load_full(DIR "tfkeras_misc_0.h5", false);
    check_predictions(m, "tfkeras_misc_0");
    tnt_model_free(m);
}

/* Keras 2.3.1: model.to_json() + save_weights(): Dense(3) Activation(softmax). Also checked
 * against the predictions Keras stored itself (simple_sparse_xent_mlp_inputs_and_outputs.h5). */
static void test_simple_sparse_xent_json_weights(void **state) {
    (void)state;
    char *json = read_text(DIR "simple_sparse_xent_mlp.json");
    tnt_model *m = tnt_model_from_json(json);
    free(json);
    if (!m) fail_msg("tnt_model_from_json: %s", tnt_last_error());
    tu_ok(tnt_load_weights(m, DIR "simple_sparse_xent_mlp_weights.h5", false));
    check_predictions(m, "simple_sparse_xent_mlp");
    check_predictions(m, "simple_sparse_xent_mlp_keras");
    tnt_model_free(m);

    /* by_name as well */
    json = read_text(DIR "simple_sparse_xent_mlp.json");
    m = tnt_model_from_json(json);
    free(json);
    assert_non_null(m);
    tu_ok(tnt_load_weights(m, DIR "simple_sparse_xent_mlp_weights.h5", true));
    check_predictions(m, "simple_sparse_xent_mlp");
    tnt_model_free(m);
}

/* The same network saved whole, compiled with RMSprop, sparse_categorical_crossentropy and
 * "accuracy". */
static void test_simple_sparse_xent_model(void **state) {
    (void)state;
    tnt_model *m = load_full(DIR "simple_sparse_xent_mlp_model.h5", true);
    assert_string_equal(tnt_optimizer_name(tnt_model_optimizer(m)), "RMSprop");
    assert_float_equal(tnt_optimizer_get_lr(tnt_model_optimizer(m)), 1e-4f, 1e-10);
    check_predictions(m, "simple_sparse_xent_mlp_model");
    check_predictions(m, "simple_sparse_xent_mlp_keras");
    tnt_model_free(m);
}

/* Recurrent networks, loaded uncompiled: LSTM and SimpleRNN of Keras 2.0.6 / 2.0.8 / 2.1.3 (Keras 2's
 * hard_sigmoid recurrent activation, input dropout that inference ignores, Functional and
 * Sequential) and tf.keras 2.2.4-tf stacks with RepeatVector, relu activations and Bidirectional
 * wrappers (concat; LSTM and SimpleRNN, last output and sequences). SimpleRNN also
 * against the predictions Keras stored beside it. */
static void test_recurrent(void **state) {
    (void)state;
    static const char *const names[] = {"simple_lstm", "simple_rnn", "lstm_functional", "tfkeras_rnn_126",
                                        "tfkeras_rnn_134", "tfkeras_rnn_128", "tfkeras_rnn_135", "tfkeras_rnn_121"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        char path[160];
        bool model_file = !strncmp(names[i], "simple_", 7);
        snprintf(path, sizeof path, DIR "%s%s.h5", names[i], model_file ? "_model" : "");
        tnt_model *m = load_full(path, false);
        check_predictions(m, names[i]);
        if (!strcmp(names[i], "simple_rnn")) check_predictions(m, "simple_rnn_keras");
        tnt_model_free(m);
    }
}

/* Whole-model files <name>.h5 of the layers beyond the basic ones: Masking (mask_value 0 and 2)
 * before an LSTM, Keras 2.2.0. */
static void test_more_layers(void **state) {
    (void)state;
    static const char *const names[] = {"masking_zero_lstm", "masking_two_lstm"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        char path[160];
        snprintf(path, sizeof path, DIR "%s.h5", names[i]);
        tnt_model *m = load_full(path, false);
        check_predictions(m, names[i]);
        tnt_model_free(m);
    }
}

/* Keras 2.0.6 and 2.1.3 whole-model files keep optimizer weights in Keras 2.0's layout
 * ("training/RMSprop/Variable:0"): loaded compiled, the model keeps its optimizer class and rate,
 * the optimizer starts afresh (as Keras's load_model does), and predictions are unchanged. */
static void test_legacy_optimizer_weights(void **state) {
    (void)state;
    static const char *const names[] = {"simple_lstm", "simple_rnn"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        char path[160];
        snprintf(path, sizeof path, DIR "%s_model.h5", names[i]);
        tnt_model *m = load_full(path, true);
        tnt_compile_opts co;
        char metrics[128];
        tu_ok(tnt_model_compile_opts(m, &co, metrics, sizeof metrics));
        assert_non_null(co.optimizer);
        assert_int_equal(tnt_optimizer_iterations(co.optimizer), 0);
        check_predictions(m, names[i]);
        tnt_model_free(m);
    }
}

/* tf.keras 2.2.4-tf: Conv1D, BatchNormalization and MaxPooling1D blocks, then Dense layers, every
 * kernel with kernel_regularizer L1L2(l1=0, l2=1e-4): predictions as the rebuild, and the loss of
 * its training configuration (categorical cross-entropy) in evaluate grows by exactly 1e-4 * sum(kernel^2) over the four kernels. */
static void test_kernel_regularizer(void **state) {
    (void)state;
    /* compiled here with a fresh Adam: the file's optimizer weights (tf.keras 2.2 layout) would start afresh anyway */
    tnt_model *m = load_full(DIR "conv1d_l2_regularized.h5", false);
    tu_ok(tnt_compile(m, &(tnt_compile_opts){.optimizer = tnt_adam(1e-3f), .loss = TNT_CATEGORICAL_CROSSENTROPY}));
    check_predictions(m, "conv1d_l2_regularized");
    char *json = NULL;
    tu_ok(tnt_model_to_json(m, &json));
    assert_non_null(strstr(json, "\"kernel_regularizer\":{\"class_name\":\"L1L2\",\"config\":{\"l1\":0,\"l2\":0.0001}}"));
    free(json);
    tnt_shape xs;
    float *x = tu_load("keras_real/conv1d_l2_regularized_x", &xs), y[2 * 10] = {0};
    y[3] = y[10 + 7] = 1;
    tnt_dataset *ds = tnt_dataset_batch(tnt_dataset_from_arrays(x, TNT_SHAPE(2048, 1), y, TNT_SHAPE(10), 2, false), 2, false);
    int kernels = 0;
    double penalty = 1e-4f * tu_sum_squares(m, "kernel", &kernels), with = 0, without = 0;
    assert_int_equal(kernels, 4);
    tnt_logs logs;
    tu_ok(tnt_evaluate(m, ds, NULL, &logs));
    assert_true(tnt_logs_get(&logs, "loss", &with));
    static const char *const layers[] = {"conv1d", "conv1d_1", "dense", "dense_1"};
    for (int i = 0; i < 4; i++)
        tu_ok(tnt_layer_set_regularizer(tnt_model_get_layer(m, layers[i]), "kernel_regularizer", TNT_REG_NONE, 0, 0));
    tu_ok(tnt_evaluate(m, ds, NULL, &logs));
    assert_true(tnt_logs_get(&logs, "loss", &without));
    assert_true(penalty > 1e-4);
    if (fabs((with - without) - penalty) > 1e-6 * penalty)
        fail_msg("loss %.10g without penalties %.10g: difference %.10g, expected %.10g", with, without, with - without,
                 penalty);
    tnt_dataset_free(ds);
    free(x);
    tnt_model_free(m);
}

/* Keras 3.9.2 .keras zip (MIT, 2mdtln/FlowNet-ANN): Sequential Dense(128, relu) Dropout Dense(64)
 * LeakyReLU(0.2) Dense(32) LeakyReLU Dense(2), DTypePolicy dtypes, initializers with module,
 * compile_config Adam + "mse", optimizer/vars (iteration, learning rate, m and v per weight). */
static void test_keras3_zip(void **state) {
    (void)state;
    tnt_model *m = load_full(DIR "flownet_final.keras", true);
    tnt_compile_opts co;
    char metrics[64];
    tu_ok(tnt_model_compile_opts(m, &co, metrics, sizeof metrics));
    assert_int_equal(co.loss, TNT_MEAN_SQUARED_ERROR);
    assert_string_equal(tnt_optimizer_name(co.optimizer), "Adam");
    assert_true(fabsf(tnt_optimizer_get_lr(co.optimizer) - 0.001f) < 1e-9f);
    assert_true(tnt_optimizer_iterations(co.optimizer) > 0); /* restored from optimizer/vars/0 */
    check_predictions(m, "flownet_final");
    tnt_model_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cnn_batch_norm),
        cmocka_unit_test(test_optimizers_adam),
        cmocka_unit_test(test_optimizers_adadelta),
        cmocka_unit_test(test_custom_loss),
        cmocka_unit_test(test_tfkeras_misc_0),
        cmocka_unit_test(test_simple_sparse_xent_json_weights),
        cmocka_unit_test(test_simple_sparse_xent_model),
        cmocka_unit_test(test_recurrent),
        cmocka_unit_test(test_more_layers),
        cmocka_unit_test(test_legacy_optimizer_weights),
        cmocka_unit_test(test_kernel_regularizer),
        cmocka_unit_test(test_keras3_zip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* test_keras_real_cnn.c: real Keras files with channels_first layers, 3-D layers, ConvLSTM2D and
 * Keras 1 configs, written by
 * Keras itself (deeplearning4j's dl4j-test-resources, Apache-2.0; sources and commits in
 * fixtures/keras_real/README.md), loaded with tnt_load_model. Predictions are compared with an
 * independent PyTorch rebuild of each network (fixtures/gen_keras_real_cnn.py) within rtol 1e-5,
 * atol 1e-6, and where dl4j ships them, with the predictions Keras itself made. A loaded
 * channels-first model also trains (a step of SGD changes its weights and lowers its loss). */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DIR "fixtures/keras_real/"

/* Predicts fixtures keras_real/<name>_x on m and compares with keras_real/<name>_y. */
static void check_predictions(tnt_model *m, const char *name) {
    char xn[128], yn[128];
    snprintf(xn, sizeof xn, "keras_real/%s_x", name);
    snprintf(yn, sizeof yn, "keras_real/%s_y", name);
    tnt_shape xs, ys;
    float *x = tu_load(xn, &xs), *y = tu_load(yn, &ys);
    tnt_tensor *in = tnt_tensor_new(xs), *out = NULL;
    memcpy(in->data, x, sizeof(float) * (size_t)tnt_shape_numel(xs));
    tu_ok(tnt_predict_on_batch(m, in, &out));
    assert_int_equal(out->shape.ndim, ys.ndim);
    for (int i = 0; i < ys.ndim; i++) assert_int_equal(out->shape.dim[i], ys.dim[i]);
    tu_assert_close(out->data, y, tnt_shape_numel(ys), 1e-5, 1e-6, name);
    tnt_tensor_free(out);
    tnt_tensor_free(in);
    free(x);
    free(y);
}

static tnt_model *load(const char *file) {
    char path[256];
    snprintf(path, sizeof path, DIR "%s", file);
    tnt_model *m = tnt_load_model(path, false);
    if (!m) fail_msg("tnt_load_model(%s): %s", path, tnt_last_error());
    return m;
}

/* Keras 2.3.1 Conv1D(channels_first) on (3, 16): k3 s2 same sigmoid, and k2 dilation 2 valid;
 * also against the predictions Keras stored beside each file. */
static void test_conv1d_channels_first(void **state) {
    (void)state;
    static const char *const files[][2] = {{"conv1d_cf_same", "conv1d_k3_s2_d1_cf_same_model.h5"},
                                           {"conv1d_cf_valid_d2", "conv1d_k2_s1_d2_cf_valid_model.h5"}};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        tnt_model *m = load(files[i][1]);
        check_predictions(m, files[i][0]);
        char keras[64];
        snprintf(keras, sizeof keras, "%s_keras", files[i][0]);
        check_predictions(m, keras);
        tnt_model_free(m);
    }
}

/* tf.keras 2.2.4-tf, Functional chains on (3, 10, 10): DepthwiseConv2D or Conv2DTranspose with
 * data_format channels_first, then channels_last SpatialDropout2D, ZeroPadding2D, UpSampling2D,
 * Cropping2D and AveragePooling2D reading that tensor as it lies, twice, and GlobalMaxPooling2D. */
static void test_mixed_formats_2d(void **state) {
    (void)state;
    static const char *const names[] = {"tfkeras_cnn2d_42", "tfkeras_cnn2d_54"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        char file[64];
        snprintf(file, sizeof file, "%s.h5", names[i]);
        tnt_model *m = load(file);
        check_predictions(m, names[i]);
        tnt_model_free(m);
    }
}

/* tf.keras 2.2.4-tf on (10, 10, 10, 3): Conv3D(4, 3, same, tanh) SpatialDropout3D Cropping3D
 * MaxPooling3D, twice; and Conv3D SpatialDropout3D AveragePooling3D, twice. */
static void test_3d(void **state) {
    (void)state;
    static const char *const names[] = {"tfkeras_cnn3d_16", "tfkeras_cnn3d_19"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        char file[64];
        snprintf(file, sizeof file, "%s.h5", names[i]);
        tnt_model *m = load(file);
        check_predictions(m, names[i]);
        tnt_model_free(m);
    }
}

/* tf.keras 2.2.4-tf ConvLSTM2D(4, 3x3, tanh, hard_sigmoid, return_sequences) twice: in
 * Bidirectional (go_backwards, same, channels_first: the concat runs along the width), plain (valid,
 * go_backwards, channels_first), plain (same, go_backwards, channels_last), Bidirectional (valid,
 * channels_last). The file's weight groups nest the wrapped layers as Keras 2 writes them. */
static void test_conv_lstm2d(void **state) {
    (void)state;
    static const char *const names[] = {"tfkeras_convlstm2d_0", "tfkeras_convlstm2d_9", "tfkeras_convlstm2d_17",
                                        "tfkeras_convlstm2d_26"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        char file[64];
        snprintf(file, sizeof file, "%s.h5", names[i]);
        tnt_model *m = load(file);
        check_predictions(m, names[i]);
        tnt_model_free(m);
    }
}

/* Keras 1.2.2 files, whose configs use Keras 1's names (output_dim, nb_filter, nb_row/nb_col,
 * border_mode, subsample, dim_ordering, init, inner_init, bias) and whose weights are named W, U, b:
 * Convolution2D Reshape Convolution2D Flatten Dense, and SimpleRNN. They load as Keras 2 reads
 * them and write back with Keras 2's names. */
static void test_keras1_configs(void **state) {
    (void)state;
    static const char *const names[] = {"keras1_conv2d_reshape", "keras1_simple_rnn"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        char file[64];
        snprintf(file, sizeof file, "%s.h5", names[i]);
        tnt_model *m = load(file);
        check_predictions(m, names[i]);
        char *json = NULL;
        tu_ok(tnt_model_to_json(m, &json));
        assert_non_null(strstr(json, i == 0 ? "\"filters\":6" : "\"units\":6"));
        assert_null(strstr(json, "output_dim"));
        free(json);
        tnt_model_free(m);
    }
}

/* tf.keras 2.2.4-tf LocallyConnected2D(4, 3x3, tanh, implementation 1) twice in a chain of
 * channels-last padding, upsampling, cropping and pooling layers: channels_first (its bias
 * reshaped onto the (4, rows, cols) output, as Keras's bias_add does) and channels_last. */
static void test_locally_connected(void **state) {
    (void)state;
    static const char *const names[] = {"tfkeras_cnn2d_32", "tfkeras_cnn2d_92"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        char file[64];
        snprintf(file, sizeof file, "%s.h5", names[i]);
        tnt_model *m = load(file);
        check_predictions(m, names[i]);
        tnt_model_free(m);
    }
}

/* Keras 1.2.2 files whose weights are in Keras 1's layout, converted on load as Keras 2 does: LSTM's
 * 12 arrays (gates i c f o), Bidirectional's 24, Convolution1D's 4-D kernel (k, 1, in, out) of a
 * file trained on Theano; against a NumPy rebuild from Keras 1's own definitions
 * (fixtures/gen_keras1_weights.py), and for the LSTM + Dense model against the predictions Keras
 * stored beside it (float32 Keras: within 1e-5). */
static void test_keras1_weights(void **state) {
    (void)state;
    static const char *const names[] = {"keras1_lstm", "keras1_embedding_conv1d", "keras1_bidirectional_lstm"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        char file[64];
        snprintf(file, sizeof file, "%s.h5", names[i]);
        tnt_model *m = load(file);
        check_predictions(m, names[i]);
        tnt_model_free(m);
    }
    tnt_model *m = load("keras1_simple_lstm_model.h5");
    tnt_shape xs, ys;
    float *x = tu_load("keras_real/keras1_simple_lstm_keras_x", &xs), *y = tu_load("keras_real/keras1_simple_lstm_keras_y", &ys);
    tnt_tensor *in = tnt_tensor_new(xs), *out = NULL;
    memcpy(in->data, x, sizeof(float) * (size_t)tnt_shape_numel(xs));
    tu_ok(tnt_predict_on_batch(m, in, &out));
    assert_int_equal(tnt_shape_numel(out->shape), tnt_shape_numel(ys));
    tu_assert_close(out->data, y, tnt_shape_numel(ys), 1e-5, 1e-5, "Keras's own predictions");
    tnt_tensor_free(out);
    tnt_tensor_free(in);
    free(x), free(y);
    tnt_model_free(m);
}

/* Synthetic files (h5py, fixtures/gen_keras1_weights.py) in the legacy layouts no real file here
 * has: a Keras 1 Convolution2D with dim_ordering th (kernel (filters, in, kh, kw), transposed on
 * load), a Keras 1 GRU as 9 arrays, and a Keras 2 file trained on Theano (backend "theano": the
 * kernel is flipped, so the model computes Theano's true convolution). */
static void test_legacy_synthetic(void **state) {
    (void)state;
    static const char *const names[] = {"legacy_k1_conv2d_th", "legacy_k1_gru", "legacy_theano_conv2d"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        char path[96], xn[64], yn[64];
        snprintf(path, sizeof path, "fixtures/%s.h5", names[i]);
        snprintf(xn, sizeof xn, "%s_x", names[i]);
        snprintf(yn, sizeof yn, "%s_y", names[i]);
        tnt_model *m = tnt_load_model(path, false);
        if (!m) fail_msg("tnt_load_model(%s): %s", path, tnt_last_error());
        tnt_shape xs, ys;
        float *x = tu_load(xn, &xs), *y = tu_load(yn, &ys);
        tnt_tensor *in = tnt_tensor_new(xs), *out = NULL;
        memcpy(in->data, x, sizeof(float) * (size_t)tnt_shape_numel(xs));
        tu_ok(tnt_predict_on_batch(m, in, &out));
        assert_int_equal(tnt_shape_numel(out->shape), tnt_shape_numel(ys));
        tu_assert_close(out->data, y, tnt_shape_numel(ys), 1e-5, 1e-6, names[i]);
        tnt_tensor_free(out);
        tnt_tensor_free(in);
        free(x), free(y);
        tnt_model_free(m);
    }
}

/* The channels-first Conv2DTranspose chain compiled and trained on its own predictions shifted:
 * the loss falls over a few SGD steps, and training keeps the channels_first config. */
static void test_channels_first_trains(void **state) {
    (void)state;
    tnt_model *m = load("tfkeras_cnn2d_54.h5");
    tu_ok(tnt_compile(m, &(tnt_compile_opts){.optimizer = tnt_sgd(0.5f), .loss = TNT_MEAN_SQUARED_ERROR}));
    tnt_shape xs;
    float *x = tu_load("keras_real/tfkeras_cnn2d_54_x", &xs), y[2 * 10];
    for (int i = 0; i < 20; i++) y[i] = 0.5f;
    tnt_dataset *ds = tnt_dataset_batch(tnt_dataset_from_arrays(x, TNT_SHAPE(3, 10, 10), y, TNT_SHAPE(10), 2, false), 2, false);
    tnt_history *h;
    tu_ok(tnt_fit(m, ds, &(tnt_fit_opts){.epochs = 5}, &h));
    double l0 = tnt_history_get(h, "loss", 0), l4 = tnt_history_get(h, "loss", 4);
    if (!(l4 < l0)) fail_msg("loss %g after 5 epochs, %g after 1", l4, l0);
    char *json = NULL;
    tu_ok(tnt_model_to_json(m, &json));
    assert_non_null(strstr(json, "\"data_format\":\"channels_first\""));
    free(json);
    tnt_history_free(h);
    tnt_dataset_free(ds);
    free(x);
    tnt_model_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conv1d_channels_first),
        cmocka_unit_test(test_mixed_formats_2d),
        cmocka_unit_test(test_3d),
        cmocka_unit_test(test_conv_lstm2d),
        cmocka_unit_test(test_keras1_configs),
        cmocka_unit_test(test_locally_connected),
        cmocka_unit_test(test_keras1_weights),
        cmocka_unit_test(test_legacy_synthetic),
        cmocka_unit_test(test_channels_first_trains),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

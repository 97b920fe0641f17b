/* test_json_layers.c: Keras JSON configs of the activation, convolution-transpose, 1-D, 3-D,
 * noise and preprocessing layers both ways: every constructor's config round trips (config ->
 * JSON -> config gives the same string), Keras 2 and Keras 3 spellings load with the right
 * semantics (checked through the layers' outputs), Keras 1 configs load under Keras 2's names, and
 * bad values name the layer and key. */
#include "json_harness.h"
#include "layers/layer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The model's output for x (n samples). */
static void predict(tnt_model *m, const float *x, int64_t n, float *y) {
    tnt_shape in = tnt_model_input_shape(m);
    tnt_shape s = {.ndim = in.ndim + 1, .dim = {n}};
    for (int d = 0; d < in.ndim; d++) s.dim[d + 1] = in.dim[d];
    tnt_tensor xt = {.data = (float *)x, .shape = s};
    tnt_tensor *yt = NULL;
    tu_ok(tnt_predict_on_batch(m, &xt, &yt));
    memcpy(y, yt->data, (size_t)tnt_shape_numel(yt->shape) * sizeof(float));
    tnt_tensor_free(yt);
}

/* Loads one layer from its Keras JSON on input (batch_input_shape text), predicts x (one sample)
 * and compares with want. */
static void expect_output(const char *shape, const char *layer, const float *x, const float *want, int64_t n) {
    tnt_model *m = seq_from_layer_json(shape, layer);
    if (!m) fail_msg("from_json: %s\n%s", tnt_last_error(), layer);
    float y[64];
    predict(m, x, 1, y);
    tu_assert_close(y, want, n, 1e-6, 1e-6, layer);
    tnt_model_free(m);
}

static void test_activation_round_trips(void **state) {
    (void)state;
    check_layer(TNT_SHAPE(5), tnt_relu_layer(INFINITY, 0, 0, NULL), "ReLU",
                "\"max_value\":null,\"negative_slope\":0,\"threshold\":0");
    check_layer(TNT_SHAPE(5), tnt_relu_layer(6.0f, 0.1f, 0.5f, NULL), "ReLU",
                "\"max_value\":6,\"negative_slope\":0.1,\"threshold\":0.5");
    check_layer(TNT_SHAPE(5), tnt_leaky_relu_layer(0.3f, NULL), "LeakyReLU", "\"alpha\":0.3");
    check_layer(TNT_SHAPE(5), tnt_elu_layer(0.7f, NULL), "ELU", "\"alpha\":0.7");
    check_layer(TNT_SHAPE(5), tnt_thresholded_relu(1.0f, NULL), "ThresholdedReLU", "\"theta\":1");
    check_layer(TNT_SHAPE(4, 3), tnt_prelu(1, (int[]){1}, TNT_INIT_DEFAULT, NULL), "PReLU",
                "\"alpha_initializer\":{\"class_name\":\"Zeros\",\"config\":{}},\"alpha_regularizer\":null,"
                "\"alpha_constraint\":null,\"shared_axes\":[1]");
    check_layer(TNT_SHAPE(4, 3), tnt_prelu(0, NULL, TNT_INIT_ONES, NULL), "PReLU", "\"shared_axes\":null");
    check_layer(TNT_SHAPE(4, 3), tnt_softmax_layer(1, NULL), "Softmax", "\"axis\":1");
}

static void test_activation_keras_spellings(void **state) {
    (void)state;
    const float x[4] = {-2.0f, -0.5f, 0.5f, 3.0f};
    /* Keras 3 LeakyReLU: negative_slope */
    expect_output("[null, 4]", "{\"class_name\": \"LeakyReLU\", \"config\": {\"name\": \"l\", \"negative_slope\": 0.1}}",
                  x, (const float[]){-0.2f, -0.05f, 0.5f, 3.0f}, 4);
    /* Keras 2 LeakyReLU: alpha, default 0.3 */
    expect_output("[null, 4]", "{\"class_name\": \"LeakyReLU\", \"config\": {\"name\": \"l\", \"alpha\": 0.2}}", x,
                  (const float[]){-0.4f, -0.1f, 0.5f, 3.0f}, 4);
    expect_output("[null, 4]", "{\"class_name\": \"LeakyReLU\", \"config\": {\"name\": \"l\", \"dtype\": null}}", x,
                  (const float[]){-0.6f, -0.15f, 0.5f, 3.0f}, 4);
    /* ReLU: max_value as a float, unknown keys ignored */
    expect_output("[null, 4]", "{\"class_name\": \"ReLU\", \"config\": {\"name\": \"r\", \"max_value\": 1.0, "
                  "\"negative_slope\": 0.0, \"threshold\": 0.0, \"future_key\": [1]}}",
                  x, (const float[]){0, 0, 0.5f, 1.0f}, 4);
    expect_output("[null, 4]", "{\"class_name\": \"ThresholdedReLU\", \"config\": {\"name\": \"t\"}}", x,
                  (const float[]){0, 0, 0, 3.0f}, 4);
    expect_output("[null, 4]", "{\"class_name\": \"ELU\", \"config\": {\"name\": \"e\"}}", x,
                  (const float[]){expm1f(-2.0f), expm1f(-0.5f), 0.5f, 3.0f}, 4);
    /* Softmax: axis as a one-element list; PReLU: shared_axes as an integer */
    float e = expf(1.0f);
    expect_output("[null, 2, 2]", "{\"class_name\": \"Softmax\", \"config\": {\"name\": \"s\", \"axis\": [1]}}",
                  (const float[]){0, 0, 1, 0}, (const float[]){1 / (1 + e), 0.5f, e / (1 + e), 0.5f}, 4);
    expect_output("[null, 2, 2]", "{\"class_name\": \"PReLU\", \"config\": {\"name\": \"p\", \"shared_axes\": 1, "
                  "\"alpha_initializer\": \"ones\"}}", x, x, 4);
}

static void test_activation_errors(void **state) {
    (void)state;
    tnt_model *m = seq_from_layer_json("[null, 4]", "{\"class_name\": \"ReLU\", \"config\": {\"name\": \"r\", "
                                                    "\"max_value\": -1}}");
    assert_null(m);
    tu_error_contains("\"r\"");
    tu_error_contains("max_value -1");
    m = seq_from_layer_json("[null, 4]", "{\"class_name\": \"Softmax\", \"config\": {\"name\": \"s\", \"axis\": [1, 2]}}");
    assert_null(m);
    tu_error_contains("\"s\" (Softmax)");
    tu_error_contains("2 axes");
    m = seq_from_layer_json("[null, 4]", "{\"class_name\": \"PReLU\", \"config\": {\"name\": \"p\", "
                                         "\"alpha_regularizer\": {\"class_name\": \"L2\", \"config\": {\"l2\": -1}}}}");
    assert_null(m);
    tu_error_contains("alpha_regularizer");
    tu_error_contains("l2 -1");
    m = seq_from_layer_json("[null, 4]", "{\"class_name\": \"ELU\", \"config\": {\"name\": \"e\", \"alpha\": \"big\"}}");
    assert_null(m);
    tu_error_contains("\"alpha\"");
}

static void test_conv_transpose_configs(void **state) {
    (void)state;
    check_layer(TNT_SHAPE(4, 4, 3),
                tnt_conv2d_transpose(5, 3, 2, (int[]){1, 0}, &(tnt_layer_opts){.strides = {2, 2},
                                     .padding = TNT_PADDING_SAME, .activation = TNT_ACT_RELU}),
                "Conv2DTranspose", "\"filters\":5,\"kernel_size\":[3,2],\"strides\":[2,2],\"padding\":\"same\","
                "\"output_padding\":[1,0],\"data_format\":\"channels_last\",\"dilation_rate\":[1,1],\"activation\":\"relu\"");
    check_layer(TNT_SHAPE(4, 4, 3), tnt_conv2d_transpose(2, 3, 3, NULL, &(tnt_layer_opts){.no_bias = true}),
                "Conv2DTranspose", "\"output_padding\":null");
    check_layer(TNT_SHAPE(6, 3), tnt_conv1d_transpose(4, 3, 1, &(tnt_layer_opts){.strides = {2}}),
                "Conv1DTranspose", "\"kernel_size\":[3],\"strides\":[2],\"padding\":\"valid\",\"output_padding\":[1]");
    /* Keras 2.2 spelling of the class, integer kernel_size, 1 for true */
    tnt_model *m = seq_from_layer_json("[null, 3, 3, 2]", "{\"class_name\": \"Convolution2DTranspose\", \"config\": "
                                       "{\"name\": \"up\", \"filters\": 4, \"kernel_size\": 2, \"strides\": 2, "
                                       "\"use_bias\": 1, \"padding\": \"valid\"}}");
    if (!m) fail_msg("from_json: %s", tnt_last_error());
    assert_true(tnt__shape_equal(tnt_model_output_shape(m), TNT_SHAPE(6, 6, 4)));
    assert_int_equal(tnt_model_count_params(m), 2 * 2 * 4 * 2 + 4);
    tnt_model_free(m);
    m = seq_from_layer_json("[null, 3, 3, 2]", "{\"class_name\": \"Conv2DTranspose\", \"config\": {\"name\": \"up\", "
                            "\"filters\": 4, \"kernel_size\": [3, 3], \"strides\": [2, 2], \"output_padding\": [2, 2]}}");
    assert_null(m);
    tu_error_contains("\"up\" (Conv2DTranspose)");
    tu_error_contains("output_padding (2, 2)");
}

static void test_batch_norm_configs(void **state) {
    (void)state;
    check_layer(TNT_SHAPE(4, 3), tnt_batch_normalization_with(&(tnt_batch_norm_opts){.no_scale = true}),
                "BatchNormalization", "\"center\":true,\"scale\":false");
    /* Keras: scale 0 (a 1/0 boolean), center false: only the moving statistics remain */
    tnt_model *m = seq_from_layer_json("[null, 5]", "{\"class_name\": \"BatchNormalization\", \"config\": {\"name\": "
                                       "\"bn\", \"axis\": -1, \"center\": false, \"scale\": 0}}");
    if (!m) fail_msg("from_json: %s", tnt_last_error());
    assert_int_equal(tnt_model_count_params(m), 10);
    tnt_layer *l = tnt_model_get_layer(m, "bn");
    assert_int_equal(l->n_weights, 2);
    assert_string_equal(l->weights[0].name, "moving_mean");
    tnt_model_free(m);
}

static void test_noise_and_pooling_configs(void **state) {
    (void)state;
    check_layer(TNT_SHAPE(6, 3), tnt_spatial_dropout1d(0.25f, 0, NULL), "SpatialDropout1D", "\"rate\":0.25,\"seed\":null");
    check_layer(TNT_SHAPE(4, 4, 3), tnt_spatial_dropout2d(0.5f, 9, NULL), "SpatialDropout2D",
                "\"rate\":0.5,\"data_format\":\"channels_last\",\"seed\":9");
    check_layer(TNT_SHAPE(5), tnt_gaussian_noise(0.1f, 0, NULL), "GaussianNoise", "\"stddev\":0.1");
    check_layer(TNT_SHAPE(5), tnt_gaussian_dropout(0.3f, 0, NULL), "GaussianDropout", "\"rate\":0.3");
    check_layer(TNT_SHAPE(5), tnt_alpha_dropout(0.1f, 0, NULL), "AlphaDropout", "\"rate\":0.1,\"noise_shape\":null");
    check_layer(TNT_SHAPE(5), tnt_activity_regularization(0.01f, 0, NULL), "ActivityRegularization",
                "\"l1\":0.01,\"l2\":0");
    check_layer(TNT_SHAPE(6, 3), tnt_global_max_pooling1d(NULL), "GlobalMaxPooling1D", "\"keepdims\":false");
    check_layer(TNT_SHAPE(2, 3, 4, 3), tnt_global_average_pooling3d(NULL), "GlobalAveragePooling3D", NULL);
    check_layer(TNT_SHAPE(2, 3, 4, 3), tnt_global_max_pooling3d(NULL), "GlobalMaxPooling3D", NULL);
    /* inference: identity; Keras 2 GlobalMaxPool1D alias */
    const float x[4] = {1, -2, 3, 0.5f};
    expect_output("[null, 4]", "{\"class_name\": \"GaussianNoise\", \"config\": {\"name\": \"g\", \"stddev\": 0.3}}", x, x, 4);
    expect_output("[null, 2, 2]", "{\"class_name\": \"GlobalMaxPool1D\", \"config\": {\"name\": \"g\"}}", x,
                  (const float[]){3, 0.5f}, 2);
    check_layer(TNT_SHAPE(5), tnt_rescaling(1.0f / 255.0f, -1.0f, NULL), "Rescaling", "\"scale\":0.003921569,\"offset\":-1");
    expect_output("[null, 4]", "{\"class_name\": \"Rescaling\", \"config\": {\"name\": \"r\", \"scale\": 0.5, \"offset\": 1}}",
                  x, (const float[]){1.5f, 0.0f, 2.5f, 1.25f}, 4);
    tnt_model *m = seq_from_layer_json("[null, 4]", "{\"class_name\": \"AlphaDropout\", \"config\": {\"name\": \"a\", "
                                       "\"rate\": 1.5}}");
    assert_null(m);
    tu_error_contains("\"a\" (AlphaDropout)");
    tu_error_contains("rate 1.5");
}

/* The activations by name, Keras 2's and Keras 3's hard_sigmoid told apart by the file's version. */
static void test_activation_names(void **state) {
    (void)state;
    const float x[4] = {-2.0f, -0.5f, 0.5f, 3.0f};
    const char *layer = "{\"class_name\": \"Activation\", \"config\": {\"name\": \"a\", \"activation\": \"hard_sigmoid\"}}";
    expect_output("[null, 4]", layer, x, (const float[]){0.1f, 0.4f, 0.6f, 1.0f}, 4); /* Keras 2: 0.2x + 0.5 */
    char json[1024];
    /* Keras 3 (InputLayer batch_shape): relu6(x + 3) / 6 */
    snprintf(json, sizeof json, "{\"class_name\": \"Sequential\", \"config\": {\"name\": \"s\", \"layers\": "
             "[{\"class_name\": \"InputLayer\", \"config\": {\"batch_shape\": [null, 4], \"name\": \"in\"}}, %s]}}",
             layer);
    const float v3[4] = {1.0f / 6, 2.5f / 6, 3.5f / 6, 1.0f};
    for (int k = 0; k < 2; k++) {
        tnt_model *m = tnt_model_from_json(json);
        if (!m) fail_msg("from_json: %s", tnt_last_error());
        float y[4];
        predict(m, x, 1, y);
        tu_assert_close(y, v3, 4, 1e-6, 1e-6, "hard_sigmoid of a Keras 3 file");
        char *out = to_json(m);
        assert_non_null(strstr(out, "\"activation\":\"hard_sigmoid_v3\""));
        free(out);
        tnt_model_free(m);
        /* the same by the keras_version of a Keras 2 style JSON */
        snprintf(json, sizeof json, "{\"class_name\": \"Sequential\", \"keras_version\": \"3.3.3\", \"config\": "
                 "{\"name\": \"s\", \"layers\": [{\"class_name\": \"InputLayer\", \"config\": {\"batch_input_shape\": "
                 "[null, 4], \"name\": \"in\"}}, %s]}}", layer);
    }
    /* a recurrent layer's recurrent_activation too */
    snprintf(json, sizeof json, "{\"class_name\": \"Sequential\", \"config\": {\"name\": \"s\", \"layers\": "
             "[{\"class_name\": \"InputLayer\", \"config\": {\"batch_shape\": [null, 3, 2], \"name\": \"in\"}}, "
             "{\"class_name\": \"GRU\", \"config\": {\"name\": \"g\", \"units\": 2, \"recurrent_activation\": "
             "\"hard_sigmoid\", \"reset_after\": true}}]}}");
    tnt_model *m = tnt_model_from_json(json);
    if (!m) fail_msg("from_json: %s", tnt_last_error());
    char *out = to_json(m);
    assert_non_null(strstr(out, "\"recurrent_activation\":\"hard_sigmoid_v3\""));
    free(out);
    tnt_model_free(m);
    /* Keras 3's other names, and round trips of the new ones */
    expect_output("[null, 4]", "{\"class_name\": \"Dense\", \"config\": {\"name\": \"d\", \"units\": 1, "
                  "\"activation\": \"hard_swish\", \"kernel_initializer\": \"ones\"}}", x, (const float[]){4.0f / 6}, 1);
    check_layer(TNT_SHAPE(5), tnt_activation_layer(TNT_ACT_SOFTSIGN, NULL), "Activation", "\"activation\":\"softsign\"");
    check_layer(TNT_SHAPE(5), tnt_dense(3, &(tnt_layer_opts){.activation = TNT_ACT_MISH}), "Dense", "\"activation\":\"mish\"");
    check_layer(TNT_SHAPE(5), tnt_dense(3, &(tnt_layer_opts){.activation = TNT_ACT_HARD_SIGMOID}), "Dense",
                "\"activation\":\"hard_sigmoid\"");
    m = seq_from_layer_json("[null, 4]", "{\"class_name\": \"Dense\", \"config\": {\"name\": \"d\", \"units\": 2, "
                            "\"activation\": \"glu\"}}");
    assert_null(m);
    tu_error_contains("\"d\" (Dense)");
    tu_error_contains("\"glu\" (it halves the last axis");
}

/* Keras 1 configs load under Keras 2's names (as Keras 2's legacy interfaces rename them), with
 * the semantics checked through the outputs. */
static void test_keras1_configs(void **state) {
    (void)state;
    const float x[4] = {1, -2, 3, 0.5f};
    /* Dense: output_dim, init, bias false, W_regularizer */
    tnt_model *m = seq_from_layer_json("[null, 4]", "{\"class_name\": \"Dense\", \"config\": {\"name\": \"d\", "
                                       "\"output_dim\": 3, \"init\": \"zero\", \"bias\": false, \"activation\": \"linear\", "
                                       "\"W_regularizer\": {\"l1\": 0.0, \"l2\": 0.5, \"name\": \"WeightRegularizer\"}, "
                                       "\"input_dtype\": \"float32\"}}");
    if (!m) fail_msg("%s", tnt_last_error());
    assert_int_equal(tnt_model_count_params(m), 12); /* no bias */
    char *json = to_json(m);
    assert_non_null(strstr(json, "\"units\":3"));
    assert_non_null(strstr(json, "\"kernel_regularizer\":{\"class_name\":\"L1L2\",\"config\":{\"l1\":0,\"l2\":0.5}}"));
    free(json);
    tnt_model_free(m);
    /* MaxPooling1D: pool_length, stride, border_mode */
    expect_output("[null, 4, 1]", "{\"class_name\": \"MaxPooling1D\", \"config\": {\"name\": \"p\", \"pool_length\": 2, "
                  "\"stride\": 1, \"border_mode\": \"same\"}}", x, (const float[]){1, 3, 3, 0.5f}, 4);
    /* Convolution2D with dim_ordering th: channels first; nb_row x nb_col 1x1 of ones sums the channels */
    expect_output("[null, 2, 1, 2]", "{\"class_name\": \"Convolution2D\", \"config\": {\"name\": \"c\", "
                  "\"nb_filter\": 1, \"nb_row\": 1, \"nb_col\": 1, \"init\": \"one\", \"border_mode\": \"valid\", "
                  "\"subsample\": [1, 1], \"dim_ordering\": \"th\", \"bias\": false, \"activation\": \"linear\"}}",
                  x, (const float[]){4, -1.5f}, 2);
    /* LSTM: inner_activation, inner_init, forget_bias_init "one" (unit_forget_bias), consume_less */
    m = seq_from_layer_json("[null, 3, 2]", "{\"class_name\": \"LSTM\", \"config\": {\"name\": \"l\", \"output_dim\": 2, "
                            "\"inner_activation\": \"hard_sigmoid\", \"inner_init\": \"orthogonal\", \"init\": "
                            "\"glorot_uniform\", \"forget_bias_init\": \"one\", \"consume_less\": \"gpu\", "
                            "\"dropout_W\": 0.0, \"dropout_U\": 0.0}}");
    if (!m) fail_msg("%s", tnt_last_error());
    json = to_json(m);
    assert_non_null(strstr(json, "\"recurrent_activation\":\"hard_sigmoid\""));
    assert_non_null(strstr(json, "\"unit_forget_bias\":true"));
    free(json);
    tnt_model_free(m);
    /* Embedding keeps output_dim; its init is embeddings_initializer, its Keras 1 dropout is dropped */
    m = seq_from_layer_json("[null, 2]", "{\"class_name\": \"Embedding\", \"config\": {\"name\": \"e\", \"input_dim\": 5, "
                            "\"output_dim\": 3, \"init\": \"uniform\", \"dropout\": 0.2, \"input_length\": 2}}");
    if (!m) fail_msg("%s", tnt_last_error());
    assert_int_equal(tnt_model_count_params(m), 15);
    tnt_model_free(m);
}

int main(void) {
    tnt_init(NULL, NULL);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_activation_round_trips),
        cmocka_unit_test(test_activation_keras_spellings),
        cmocka_unit_test(test_activation_errors),
        cmocka_unit_test(test_conv_transpose_configs),
        cmocka_unit_test(test_batch_norm_configs),
        cmocka_unit_test(test_noise_and_pooling_configs),
        cmocka_unit_test(test_keras1_configs),
        cmocka_unit_test(test_activation_names),
    };
    int r = cmocka_run_group_tests(tests, NULL, NULL);
    tnt_finalize();
    return r;
}

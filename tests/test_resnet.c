/* test_resnet.c: the ResNet builders of zoo/resnet.c. ResNet-50 against
 * tf.keras.applications.ResNet50(include_top=True, weights=None, classes=1000,
 * input_shape=(224, 224, 3)): parameter counts (total, trainable, non-trainable), the 177 layers
 * of model.layers in Keras's order of creation with their names and classes, output shapes of
 * named layers; ResNet-18/34 shapes and counts; ResNet-18 training on 32x32 synthetic data with a
 * falling loss; bad arguments. */
#include "testutil.h"

#include "model/model.h"
#include "resnet.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The output shape of the node calling the layer named name (without batch). */
static tnt_shape layer_out_shape(const tnt_model *m, const char *name) {
    for (int i = 0; i < m->n_nodes; i++)
        if (!strcmp(m->nodes[i].layer->name, name)) return m->tensor_shape[m->nodes[i].out];
    fail_msg("no layer named %s", name);
    return (tnt_shape){0};
}

static void assert_shape(tnt_shape s, tnt_shape want, const char *what) {
    char a[64], b[64];
    bool same = s.ndim == want.ndim;
    for (int i = 0; same && i < s.ndim; i++) same = s.dim[i] == want.dim[i];
    if (!same) fail_msg("%s: shape %s, expected %s", what, tnt_shape_str(s, a, sizeof a), tnt_shape_str(want, b, sizeof b));
}

static void count(tnt_model *m, int64_t *trainable, int64_t *non_trainable) {
    *trainable = *non_trainable = 0;
    for (int i = 0; i < m->n_layers; i++) {
        const tnt_layer *l = m->layers[i];
        for (int j = 0; j < l->n_weights; j++)
            *(l->weights[j].trainable ? trainable : non_trainable) += tnt_shape_numel(l->weights[j].shape);
    }
}

/* The names of Keras's ResNet50 model.layers, in order of creation (keras/applications/resnet.py:
 * ResNet, stack1, block1). */
static int keras_resnet50_names(char names[][64]) {
    int n = 0;
    const char *stem[] = {"input_1", "conv1_pad", "conv1_conv", "conv1_bn", "conv1_relu", "pool1_pad", "pool1_pool"};
    for (int i = 0; i < 7; i++) strcpy(names[n++], stem[i]);
    const int blocks[4] = {3, 4, 6, 3};
    const char *with_shortcut[] = {"_0_conv", "_0_bn"};
    const char *body[] = {"_1_conv", "_1_bn", "_1_relu", "_2_conv", "_2_bn", "_2_relu", "_3_conv", "_3_bn", "_add", "_out"};
    for (int s = 0; s < 4; s++)
        for (int b = 1; b <= blocks[s]; b++) {
            if (b == 1)
                for (int k = 0; k < 2; k++) snprintf(names[n++], 64, "conv%d_block%d%s", s + 2, b, with_shortcut[k]);
            for (int k = 0; k < 10; k++) snprintf(names[n++], 64, "conv%d_block%d%s", s + 2, b, body[k]);
        }
    strcpy(names[n++], "avg_pool");
    strcpy(names[n++], "predictions");
    return n;
}

static void test_resnet50_matches_keras(void **state) {
    (void)state;
    tnt_model *m = resnet50(1000, 224);
    if (!m) fail_msg("resnet50: %s", tnt_last_error());
    assert_int_equal(tnt_model_count_params(m), 25636712);
    int64_t tr, nt;
    count(m, &tr, &nt);
    assert_int_equal(tr, 25583592);
    assert_int_equal(nt, 53120);

    static char want[200][64];
    int n = keras_resnet50_names(want);
    assert_int_equal(n, 177);
    assert_int_equal(tnt_model_num_layers(m), 177);
    for (int i = 0; i < n; i++)
        if (strcmp(tnt_layer_name(tnt_model_layer(m, i)), want[i]))
            fail_msg("layer %d is %s, Keras has %s", i, tnt_layer_name(tnt_model_layer(m, i)), want[i]);
    int conv = 0, bn = 0, relu = 0, add = 0;
    for (int i = 0; i < n; i++) {
        const char *c = tnt_layer_class(tnt_model_layer(m, i));
        conv += !strcmp(c, "Conv2D"), bn += !strcmp(c, "BatchNormalization"), relu += !strcmp(c, "Activation"),
            add += !strcmp(c, "Add");
    }
    assert_int_equal(conv, 53);
    assert_int_equal(bn, 53);
    assert_int_equal(relu, 49);
    assert_int_equal(add, 16);
    assert_string_equal(tnt_layer_class(tnt_model_get_layer(m, "conv1_pad")), "ZeroPadding2D");
    assert_string_equal(tnt_layer_class(tnt_model_get_layer(m, "pool1_pool")), "MaxPooling2D");
    assert_string_equal(tnt_layer_class(tnt_model_get_layer(m, "avg_pool")), "GlobalAveragePooling2D");
    assert_string_equal(tnt_layer_class(tnt_model_get_layer(m, "predictions")), "Dense");

    assert_shape(tnt_model_input_shape(m), TNT_SHAPE(224, 224, 3), "input");
    assert_shape(layer_out_shape(m, "conv1_pad"), TNT_SHAPE(230, 230, 3), "conv1_pad");
    assert_shape(layer_out_shape(m, "conv1_conv"), TNT_SHAPE(112, 112, 64), "conv1_conv");
    assert_shape(layer_out_shape(m, "pool1_pool"), TNT_SHAPE(56, 56, 64), "pool1_pool");
    assert_shape(layer_out_shape(m, "conv2_block1_0_conv"), TNT_SHAPE(56, 56, 256), "conv2_block1_0_conv");
    assert_shape(layer_out_shape(m, "conv2_block3_out"), TNT_SHAPE(56, 56, 256), "conv2_block3_out");
    assert_shape(layer_out_shape(m, "conv3_block1_1_conv"), TNT_SHAPE(28, 28, 128), "conv3_block1_1_conv");
    assert_shape(layer_out_shape(m, "conv4_block6_out"), TNT_SHAPE(14, 14, 1024), "conv4_block6_out");
    assert_shape(layer_out_shape(m, "conv5_block3_out"), TNT_SHAPE(7, 7, 2048), "conv5_block3_out");
    assert_shape(layer_out_shape(m, "avg_pool"), TNT_SHAPE(2048), "avg_pool");
    assert_shape(tnt_model_output_shape(m), TNT_SHAPE(1000), "predictions");

    /* weights in Keras's get_weights() order and shapes */
    const char *wname;
    tnt_shape ws;
    float *data;
    tu_ok(tnt_model_weight(m, 0, &wname, &ws, &data));
    assert_string_equal(wname, "conv1_conv/kernel:0");
    assert_shape(ws, TNT_SHAPE(7, 7, 3, 64), wname);
    tu_ok(tnt_model_weight(m, 1, &wname, &ws, &data));
    assert_string_equal(wname, "conv1_conv/bias:0");
    tu_ok(tnt_model_weight(m, 2, &wname, &ws, &data));
    assert_string_equal(wname, "conv1_bn/gamma:0");
    tu_ok(tnt_model_weight(m, 5, &wname, &ws, &data));
    assert_string_equal(wname, "conv1_bn/moving_variance:0");
    tu_ok(tnt_model_weight(m, 6, &wname, &ws, &data));
    assert_string_equal(wname, "conv2_block1_0_conv/kernel:0");
    assert_shape(ws, TNT_SHAPE(1, 1, 64, 256), wname);
    int nw = tnt_model_num_weights(m);
    assert_int_equal(nw, 320); /* Keras: len(model.weights) */
    tu_ok(tnt_model_weight(m, nw - 2, &wname, &ws, &data));
    assert_string_equal(wname, "predictions/kernel:0");
    assert_shape(ws, TNT_SHAPE(2048, 1000), wname);
    /* BN hyperparameters: momentum 0.99, epsilon 1.001e-5 (Keras's ResNet) */
    tnt_model_free(m);

    /* another input size and class count, as Keras's input_shape/classes */
    m = resnet50(10, 64);
    if (!m) fail_msg("resnet50(10, 64): %s", tnt_last_error());
    assert_shape(layer_out_shape(m, "conv5_block3_out"), TNT_SHAPE(2, 2, 2048), "conv5_block3_out at 64x64");
    assert_int_equal(tnt_model_count_params(m), 25636712 - 2049 * 990);
    tnt_model_free(m);
}

static void test_resnet18_34_shapes(void **state) {
    (void)state;
    tnt_model *m = resnet18(10, 32);
    if (!m) fail_msg("resnet18: %s", tnt_last_error());
    assert_string_equal(tnt_layer_name(tnt_model_layer(m, 1)), "conv1_conv");
    assert_shape(layer_out_shape(m, "conv1_relu"), TNT_SHAPE(32, 32, 64), "conv1_relu (CIFAR stem)");
    assert_null(tnt_model_get_layer(m, "pool1_pool"));
    assert_null(tnt_model_get_layer(m, "conv2_block1_0_conv")); /* 64 -> 64, stride 1: identity */
    assert_non_null(tnt_model_get_layer(m, "conv3_block1_0_conv"));
    assert_shape(layer_out_shape(m, "conv2_block2_out"), TNT_SHAPE(32, 32, 64), "conv2_block2_out");
    assert_shape(layer_out_shape(m, "conv3_block1_1_conv"), TNT_SHAPE(16, 16, 128), "conv3_block1_1_conv");
    assert_shape(layer_out_shape(m, "conv5_block2_out"), TNT_SHAPE(4, 4, 512), "conv5_block2_out");
    assert_shape(tnt_model_output_shape(m), TNT_SHAPE(10), "predictions");
    /* torchvision resnet18(num_classes=10) with the 3x3 stem: 11,173,962 parameters, plus the BN
     * moving statistics (2 x 4800) */
    int64_t tr, nt;
    count(m, &tr, &nt);
    assert_int_equal(tr, 11173962);
    assert_int_equal(nt, 9600);
    tnt_model_free(m);

    m = resnet34(10, 32);
    if (!m) fail_msg("resnet34: %s", tnt_last_error());
    count(m, &tr, &nt);
    assert_int_equal(tr, 21282122); /* torchvision resnet34(num_classes=10), 3x3 stem */
    assert_shape(layer_out_shape(m, "conv4_block6_out"), TNT_SHAPE(8, 8, 256), "conv4_block6_out");
    tnt_model_free(m);

    /* the ImageNet stem at 224: torchvision resnet18(num_classes=1000), 11,689,512 parameters */
    m = resnet18(1000, 224);
    if (!m) fail_msg("resnet18(1000, 224): %s", tnt_last_error());
    count(m, &tr, &nt);
    assert_int_equal(tr, 11689512);
    assert_shape(layer_out_shape(m, "pool1_pool"), TNT_SHAPE(56, 56, 64), "pool1_pool");
    assert_shape(layer_out_shape(m, "conv5_block2_out"), TNT_SHAPE(7, 7, 512), "conv5_block2_out");
    tnt_model_free(m);
}

/* ResNet-18 on 32x32 synthetic data: a few steps on one fixed batch, the loss falls. */
static void test_resnet18_trains(void **state) {
    (void)state;
    enum { N = 8, CLASSES = 10, STEPS = 4 };
    float *x = malloc((size_t)N * 32 * 32 * 3 * sizeof(float)), y[N];
    tu_fill(x, (int64_t)N * 32 * 32 * 3, 5);
    for (int i = 0; i < N; i++) y[i] = (float)(i % CLASSES);
    tnt_model *m = resnet18(CLASSES, 32);
    assert_non_null(m);
    tu_ok(tnt_compile(m, &(tnt_compile_opts){.optimizer = tnt_optimizer_new("sgd", &(tnt_optimizer_opts){.learning_rate = 0.02f, .momentum = 0.9f}),
                                             .loss = TNT_SPARSE_CATEGORICAL_CROSSENTROPY, .metrics = "accuracy", .seed = 7}));
    tnt_dataset *ds = tnt_dataset_batch(tnt_dataset_from_arrays(x, TNT_SHAPE(32, 32, 3), y, TNT_SHAPE(), N, false), N, true);
    tnt_history *h;
    tu_ok(tnt_fit(m, ds, &(tnt_fit_opts){.epochs = STEPS}, &h));
    double prev = INFINITY;
    for (int e = 0; e < STEPS; e++) {
        double loss = tnt_history_get(h, "loss", e);
        print_message("step %d: loss %.4f\n", e, loss);
        assert_true(isfinite(loss));
        if (!(loss < prev)) fail_msg("loss did not fall at step %d: %.5f after %.5f", e, loss, prev);
        prev = loss;
    }
    assert_true(prev < tnt_history_get(h, "loss", 0) * 0.9);
    tnt_history_free(h);
    tnt_dataset_free(ds);
    tnt_model_free(m);
    free(x);
}

static void test_bad_arguments(void **state) {
    (void)state;
    assert_null(resnet50(0, 224));
    assert_true(strlen(tnt_last_error()) > 0);
    assert_null(resnet50(1000, 0));
    assert_null(resnet18(10, -3));
    assert_null(resnet_build(&(resnet_config){.arch = 42, .classes = 10, .image_size = 32}));
    assert_null(resnet_build(NULL));
    assert_int_equal(resnet_arch_from_name("resnet34"), RESNET34);
    assert_int_equal(resnet_arch_from_name("resnet101"), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resnet50_matches_keras),
        cmocka_unit_test(test_resnet18_34_shapes),
        cmocka_unit_test(test_resnet18_trains),
        cmocka_unit_test(test_bad_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

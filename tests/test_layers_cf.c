/* test_layers_cf.c: data_format channels_first, BatchNormalization on other axes, and the 3-D
 * layers, driven through the layer contract (tests/layer_harness.c):
 *   - PyTorch references (tests/fixtures/gen_layers_cf.py) for Conv3D, MaxPooling3D,
 *     AveragePooling3D, UpSampling3D, ZeroPadding3D, Cropping3D, UpSampling2D bilinear (channels
 *     first and last) and BatchNormalization with axis 1 or a middle axis, plus finite differences;
 *   - every class with a data_format, channels first against channels last on the permuted input,
 *     with the same weights: y, dx and the weight gradients agree (so channels_first inherits the
 *     PyTorch-checked semantics of channels_last); Flatten(channels_first) gives channels-last
 *     order, as Keras; SpatialDropout drops the same (sample, channel) pairs;
 *   - a channels-first model read from Keras JSON predicts and trains as its channels-last twin;
 *   - ConvLSTM2D (channels last and first, go_backwards, strides) against a PyTorch rebuild of
 *     Keras's cell, finite differences (alone and in Bidirectional), a JSON round trip;
 *   - Normalization (Keras preprocessing) with its statistics as constants or weights, against
 *     PyTorch; its weights through an .h5 file;
 *   - JSON round trips and errors. */
#include "layer_harness.h"
#include "json_harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/dnnl_util.h"

static tnt_layer *cf(tnt_layer *l) {
    assert_non_null(l);
    tu_ok(tnt_layer_set_data_format(l, TNT_CHANNELS_FIRST));
    return l;
}

/* ---- PyTorch references ------------------------------------------------------------------- */

static void test_conv3d_fixtures(void **state) {
    (void)state;
    tnt_layer_opts o = {.activation = TNT_ACT_RELU};
    run_case("conv3d_valid_cf", cf(tnt_conv3d(3, (int[]){2, 3, 2}, &o)));
    o = (tnt_layer_opts){.strides = {2, 2, 2}, .padding = TNT_PADDING_SAME, .activation = TNT_ACT_TANH};
    run_case("conv3d_same_s2", tnt_conv3d(2, (int[]){3, 3, 3}, &o));
    o = (tnt_layer_opts){.dilation = {1, 2, 2}, .padding = TNT_PADDING_SAME, .no_bias = true};
    run_case("conv3d_dil_cf", cf(tnt_conv3d(2, (int[]){2, 2, 3}, &o)));
}

static void test_3d_fixtures(void **state) {
    (void)state;
    tnt_layer_opts o = {.strides = {2, 2, 2}, .padding = TNT_PADDING_SAME};
    run_case("maxpool3d_same_cf", cf(tnt_max_pooling3d((int[]){2, 2, 3}, &o)));
    run_case("maxpool3d_valid", tnt_max_pooling3d((int[]){2, 2, 2}, NULL));
    o = (tnt_layer_opts){.strides = {2, 1, 2}, .padding = TNT_PADDING_SAME};
    run_case("avgpool3d_same", tnt_average_pooling3d((int[]){3, 2, 2}, &o));
    o = (tnt_layer_opts){.strides = {1, 1, 1}};
    run_case("avgpool3d_s1_cf", cf(tnt_average_pooling3d((int[]){2, 2, 2}, &o)));
    run_case("up3d_cf", cf(tnt_upsampling3d((int[]){2, 1, 3}, NULL)));
    run_case("up3d", tnt_upsampling3d((int[]){1, 2, 2}, NULL));
    run_case("zpad3d_cf", cf(tnt_zero_padding3d((const int[3][2]){{1, 0}, {2, 1}, {0, 2}}, NULL)));
    run_case("crop3d", tnt_cropping3d((const int[3][2]){{1, 2}, {0, 1}, {2, 1}}, NULL));
    run_case("bilinear_2x3", tnt_upsampling2d(2, 3, "bilinear", NULL));
    run_case("bilinear_3x2_cf", cf(tnt_upsampling2d(3, 2, "bilinear", NULL)));
}

/* BatchNormalization with Keras axis `axis` on fixture NAME: training forward, moving statistics
 * (Keras momentum 0.9, starting at zeros and ones), dx, dgamma, dbeta. */
static void bn_axis_case(const char *name, int axis) {
    char f[128];
    tnt_shape xs;
    snprintf(f, sizeof f, "%s_x", name);
    float *x = tu_load(f, &xs);
    tnt_shape in = {.ndim = xs.ndim - 1};
    for (int i = 1; i < xs.ndim; i++) in.dim[i - 1] = xs.dim[i];
    tnt_layer *l = tnt_batch_normalization_with(&(tnt_batch_norm_opts){.momentum = 0.9f, .axis = axis});
    drv d;
    drv_init(&d, l, in, xs.dim[0]);
    memcpy(d.x, x, (size_t)in_numel(&d) * sizeof(float));
    free(x);
    int64_t c = in.dim[(axis < 0 ? axis + in.ndim + 1 : axis) - 1];
    assert_int_equal(tnt_shape_numel(l->weights[0].shape), c);
    snprintf(f, sizeof f, "%s_gamma", name);
    load_into(l->weights[0].value, f, c);
    snprintf(f, sizeof f, "%s_beta", name);
    load_into(l->weights[1].value, f, c);
    snprintf(f, sizeof f, "%s_dy", name);
    load_into(d.dy, f, out_numel(&d));
    drv_forward(&d, false);
    snprintf(f, sizeof f, "%s_y", name);
    check(d.y, f, out_numel(&d), "y");
    snprintf(f, sizeof f, "%s_mm1", name);
    check(l->weights[2].value, f, c, "moving_mean");
    snprintf(f, sizeof f, "%s_mv1", name);
    check(l->weights[3].value, f, c, "moving_variance");
    drv_backward(&d, true, false);
    snprintf(f, sizeof f, "%s_dx", name);
    check(d.dx, f, in_numel(&d), "dx");
    snprintf(f, sizeof f, "%s_dgamma", name);
    check(l->weights[0].grad, f, c, "dgamma");
    snprintf(f, sizeof f, "%s_dbeta", name);
    check(l->weights[1].grad, f, c, "dbeta");
    drv_free(&d, true);
}

static void test_batch_norm_axis_fixtures(void **state) {
    (void)state;
    bn_axis_case("bnax_nchw", 1);
    bn_axis_case("bnax_ncl", 1);
    bn_axis_case("bnax_mid", 2);
    bn_axis_case("bnax_mid", -2); /* the same axis counted from the end */
    bn_axis_case("bnax_ncdhw", 1);
}

static void test_finite_differences(void **state) {
    (void)state;
    tnt_layer_opts o = {.strides = {1, 2, 1}, .padding = TNT_PADDING_SAME, .activation = TNT_ACT_TANH};
    fd_check(cf(tnt_conv3d(2, (int[]){2, 2, 2}, &o)), TNT_SHAPE(2, 3, 4, 3), 2);
    o = (tnt_layer_opts){.padding = TNT_PADDING_SAME, .strides = {2, 2, 2}};
    fd_check(tnt_average_pooling3d((int[]){2, 3, 2}, &o), TNT_SHAPE(3, 4, 3, 2), 2);
    fd_check(cf(tnt_average_pooling3d((int[]){2, 2, 2}, &o)), TNT_SHAPE(2, 3, 4, 3), 2); /* max: fixtures only */
    fd_check(tnt_upsampling2d(3, 2, "bilinear", NULL), TNT_SHAPE(3, 4, 2), 2);
    fd_check(cf(tnt_upsampling2d(2, 2, "bilinear", NULL)), TNT_SHAPE(2, 3, 3), 2);
    fd_check(tnt_batch_normalization_with(&(tnt_batch_norm_opts){.axis = 1}), TNT_SHAPE(3, 4, 5), 3);
    fd_check(cf(tnt_conv1d(3, 3, &(tnt_layer_opts){.padding = TNT_PADDING_CAUSAL, .dilation = {2}})),
             TNT_SHAPE(2, 7), 2);
}

/* ---- channels first against channels last ------------------------------------------------- */

/* (n, s..., c) <-> (n, c, s...) for a per-sample shape cl of spatial axes then channels */
static void to_first(const float *src, float *dst, int64_t n, tnt_shape cl) {
    int64_t c = cl.dim[cl.ndim - 1], s = tnt_shape_numel(cl) / c;
    for (int64_t b = 0; b < n; b++)
        for (int64_t p = 0; p < s; p++)
            for (int64_t k = 0; k < c; k++) dst[(b * c + k) * s + p] = src[(b * s + p) * c + k];
}

static tnt_shape first_shape(tnt_shape cl) {
    tnt_shape f = {.ndim = cl.ndim, .dim = {cl.dim[cl.ndim - 1]}};
    for (int i = 0; i + 1 < cl.ndim; i++) f.dim[i + 1] = cl.dim[i];
    return f;
}

/* Two fresh layers of one class, cl channels last and fc channels first (set here), on the
 * channels-last input shape in: the same weights, x and its permutation, dy and its permutation
 * (as is when same_out: an output without channel axis), forward in training and backward. The
 * channels-first results must be the permuted channels-last ones. */
static void check_equiv(tnt_layer *cl, tnt_layer *fc, tnt_shape in, bool same_out) {
    const char *cls = tnt_layer_class(cl);
    tu_ok(tnt_layer_set_data_format(fc, TNT_CHANNELS_FIRST));
    assert_int_equal(tnt_layer_data_format(fc), TNT_CHANNELS_FIRST);
    drv a, b;
    const int64_t batch = 2;
    drv_init(&a, cl, in, batch);
    drv_init(&b, fc, first_shape(in), batch);
    tnt_shape oa = cl->out_shape, ob = fc->out_shape;
    char s1[64], s2[64];
    if (!tnt__shape_equal(same_out ? oa : first_shape(oa), ob))
        fail_msg("%s: channels-first output %s for channels-last %s", cls, tnt_shape_str(ob, s1, sizeof s1),
                 tnt_shape_str(oa, s2, sizeof s2));
    assert_int_equal(cl->n_weights, fc->n_weights);
    for (int i = 0; i < cl->n_weights; i++) {
        assert_true(tnt__shape_equal(cl->weights[i].shape, fc->weights[i].shape));
        int64_t n = tnt_shape_numel(cl->weights[i].shape);
        tu_fill(cl->weights[i].value, n, 40 + (uint64_t)i);
        if (!strcmp(cl->weights[i].name, "moving_variance"))
            for (int64_t j = 0; j < n; j++) cl->weights[i].value[j] += 2.0f; /* positive */
        memcpy(fc->weights[i].value, cl->weights[i].value, (size_t)n * sizeof(float));
    }
    tu_fill(a.x, in_numel(&a), 5);
    to_first(a.x, b.x, batch, in);
    tu_fill(a.dy, out_numel(&a), 6);
    if (same_out) memcpy(b.dy, a.dy, (size_t)out_numel(&a) * sizeof(float));
    else to_first(a.dy, b.dy, batch, oa);
    if (cl->ops->is_view) { /* Flatten: the model aliases y to x and never runs it */
        memcpy(a.y, a.x, (size_t)in_numel(&a) * sizeof(float));
        memcpy(a.dx, a.dy, (size_t)in_numel(&a) * sizeof(float));
    } else {
        drv_forward(&a, false);
        drv_backward(&a, true, false);
    }
    drv_forward(&b, false);
    drv_backward(&b, true, false);
    float *want = malloc((size_t)TNT_MAX(in_numel(&a), out_numel(&a)) * sizeof(float));
    char what[96];
    if (same_out) memcpy(want, a.y, (size_t)out_numel(&a) * sizeof(float));
    else to_first(a.y, want, batch, oa);
    snprintf(what, sizeof what, "%s channels_first y", cls);
    tu_assert_close(b.y, want, out_numel(&a), 1e-5, 1e-5, what);
    to_first(a.dx, want, batch, in);
    snprintf(what, sizeof what, "%s channels_first dx", cls);
    tu_assert_close(b.dx, want, in_numel(&a), 1e-5, 1e-5, what);
    for (int i = 0; i < cl->n_weights; i++) {
        int64_t n = tnt_shape_numel(cl->weights[i].shape);
        snprintf(what, sizeof what, "%s channels_first %s", cls, cl->weights[i].name);
        if (cl->weights[i].trainable) tu_assert_close(fc->weights[i].grad, cl->weights[i].grad, n, 1e-4, 1e-5, what);
        else tu_assert_close(fc->weights[i].value, cl->weights[i].value, n, 1e-5, 1e-6, what); /* moving stats */
    }
    free(want);
    drv_free(&a, true);
    drv_free(&b, true);
}

#define EQUIV(expr, in) check_equiv((expr), (expr), (in), false)
#define EQUIV_FLAT(expr, in) check_equiv((expr), (expr), (in), true)

static void test_convolutions_equal_channels_last(void **state) {
    (void)state;
    tnt_layer_opts o = {.strides = {2}, .padding = TNT_PADDING_SAME, .activation = TNT_ACT_RELU};
    EQUIV(tnt_conv1d(3, 3, &o), TNT_SHAPE(7, 2));
    o = (tnt_layer_opts){.padding = TNT_PADDING_CAUSAL, .dilation = {2}, .activation = TNT_ACT_TANH};
    EQUIV(tnt_conv1d(2, 2, &o), TNT_SHAPE(6, 3));
    o = (tnt_layer_opts){.padding = TNT_PADDING_SAME, .activation = TNT_ACT_ELU};
    EQUIV(tnt_conv2d(4, 3, 3, &o), TNT_SHAPE(5, 6, 3));
    o = (tnt_layer_opts){.strides = {2, 1}, .no_bias = true};
    EQUIV(tnt_conv2d(2, 2, 3, &o), TNT_SHAPE(6, 5, 2));
    o = (tnt_layer_opts){.strides = {2, 2}, .padding = TNT_PADDING_SAME, .activation = TNT_ACT_SIGMOID};
    EQUIV(tnt_conv2d_transpose(3, 3, 3, NULL, &o), TNT_SHAPE(3, 4, 2));
    o = (tnt_layer_opts){.strides = {3}};
    EQUIV(tnt_conv1d_transpose(2, 2, -1, &o), TNT_SHAPE(4, 3));
    o = (tnt_layer_opts){.padding = TNT_PADDING_SAME, .activation = TNT_ACT_TANH};
    EQUIV(tnt_depthwise_conv2d(3, 3, 2, &o), TNT_SHAPE(5, 4, 3));
    EQUIV(tnt_separable_conv2d(4, 3, 3, 2, &o), TNT_SHAPE(5, 4, 3));
    o = (tnt_layer_opts){.strides = {1, 2, 2}, .padding = TNT_PADDING_SAME, .activation = TNT_ACT_RELU};
    EQUIV(tnt_conv3d(3, (int[]){2, 3, 3}, &o), TNT_SHAPE(3, 5, 4, 2));
    /* one channel in and out: the two layouts coincide (no reorder, a plain copy) */
    EQUIV(tnt_conv2d(1, 3, 3, &(tnt_layer_opts){.padding = TNT_PADDING_SAME}), TNT_SHAPE(4, 5, 1));
    EQUIV(tnt_conv3d(1, (int[]){1, 2, 2}, NULL), TNT_SHAPE(2, 3, 3, 1));
}

static void test_spatial_layers_equal_channels_last(void **state) {
    (void)state;
    tnt_layer_opts o = {.strides = {2, 2}, .padding = TNT_PADDING_SAME};
    EQUIV(tnt_max_pooling2d(3, 3, &o), TNT_SHAPE(5, 6, 3));
    EQUIV(tnt_average_pooling2d(3, 3, &o), TNT_SHAPE(5, 6, 3));
    o = (tnt_layer_opts){.strides = {1}, .padding = TNT_PADDING_SAME};
    EQUIV(tnt_max_pooling1d(3, &o), TNT_SHAPE(7, 3));
    EQUIV(tnt_average_pooling1d(2, NULL), TNT_SHAPE(7, 3));
    EQUIV(tnt_max_pooling3d((int[]){2, 2, 2}, NULL), TNT_SHAPE(4, 4, 5, 2));
    EQUIV(tnt_average_pooling3d((int[]){2, 2, 2}, &(tnt_layer_opts){.padding = TNT_PADDING_SAME}), TNT_SHAPE(3, 4, 5, 2));
    EQUIV_FLAT(tnt_global_average_pooling1d(NULL), TNT_SHAPE(6, 4));
    EQUIV_FLAT(tnt_global_max_pooling1d(NULL), TNT_SHAPE(6, 4));
    EQUIV_FLAT(tnt_global_average_pooling2d(NULL), TNT_SHAPE(3, 4, 5));
    EQUIV_FLAT(tnt_global_max_pooling2d(NULL), TNT_SHAPE(3, 4, 5));
    EQUIV_FLAT(tnt_global_average_pooling3d(NULL), TNT_SHAPE(2, 3, 4, 3));
    EQUIV_FLAT(tnt_global_max_pooling3d(NULL), TNT_SHAPE(2, 3, 4, 3));
    EQUIV(tnt_zero_padding2d(1, 2, 0, 3, NULL), TNT_SHAPE(3, 4, 2));
    EQUIV(tnt_zero_padding3d((const int[3][2]){{1, 0}, {0, 2}, {1, 1}}, NULL), TNT_SHAPE(2, 3, 2, 3));
    EQUIV(tnt_cropping2d(1, 0, 2, 1, NULL), TNT_SHAPE(4, 5, 2));
    EQUIV(tnt_cropping3d((const int[3][2]){{0, 1}, {1, 1}, {2, 0}}, NULL), TNT_SHAPE(3, 4, 5, 2));
    EQUIV(tnt_upsampling2d(2, 3, NULL, NULL), TNT_SHAPE(3, 2, 3));
    EQUIV(tnt_upsampling2d(3, 2, "bilinear", NULL), TNT_SHAPE(3, 4, 2));
    EQUIV(tnt_upsampling3d((int[]){2, 1, 2}, NULL), TNT_SHAPE(2, 3, 2, 3));
    EQUIV(tnt_spatial_dropout2d(0.5f, 9, NULL), TNT_SHAPE(3, 4, 6));
    EQUIV(tnt_spatial_dropout3d(0.5f, 9, NULL), TNT_SHAPE(2, 3, 2, 6));
    /* Keras's Flatten(channels_first) flattens in channels-last order: the same output */
    EQUIV_FLAT(tnt_flatten(NULL), TNT_SHAPE(3, 4, 2));
    EQUIV_FLAT(tnt_flatten(NULL), TNT_SHAPE(5, 3));
}

/* BatchNormalization(axis=1) on (c, spatial...) against axis=-1 on (spatial..., c) */
static void test_batch_norm_axis_equals_last(void **state) {
    (void)state;
    const tnt_batch_norm_opts o1 = {.axis = 1, .momentum = 0.8f}, olast = {.momentum = 0.8f};
    tnt_shape shapes[] = {TNT_SHAPE(4, 5, 3), TNT_SHAPE(7, 2), TNT_SHAPE(2, 3, 4, 3)};
    for (size_t i = 0; i < TNT_ARRAY_LEN(shapes); i++) {
        tnt_layer *cl = tnt_batch_normalization_with(&olast), *f = tnt_batch_normalization_with(&o1);
        drv a, b;
        drv_init(&a, cl, shapes[i], 3);
        drv_init(&b, f, first_shape(shapes[i]), 3);
        tu_fill(a.x, in_numel(&a), 5);
        to_first(a.x, b.x, 3, shapes[i]);
        tu_fill(a.dy, out_numel(&a), 6);
        to_first(a.dy, b.dy, 3, shapes[i]);
        drv_forward(&a, false);
        drv_forward(&b, false);
        drv_backward(&a, true, false);
        drv_backward(&b, true, false);
        float *want = malloc((size_t)in_numel(&a) * sizeof(float));
        to_first(a.y, want, 3, shapes[i]);
        tu_assert_close(b.y, want, in_numel(&a), 1e-5, 1e-5, "BatchNormalization axis 1 y");
        to_first(a.dx, want, 3, shapes[i]);
        tu_assert_close(b.dx, want, in_numel(&a), 1e-4, 1e-5, "BatchNormalization axis 1 dx");
        for (int w = 0; w < 4; w++) {
            int64_t n = tnt_shape_numel(cl->weights[w].shape);
            tu_assert_close(w < 2 ? f->weights[w].grad : f->weights[w].value, w < 2 ? cl->weights[w].grad : cl->weights[w].value,
                            n, 1e-4, 1e-5, cl->weights[w].name);
        }
        free(want);
        drv_free(&a, true);
        drv_free(&b, true);
    }
}

/* ---- a model read from Keras JSON ---------------------------------------------------------- */

static const char *CF_MODEL =
    "{\"class_name\": \"Sequential\", \"config\": {\"name\": \"cf\", \"layers\": ["
    "{\"class_name\": \"InputLayer\", \"config\": {\"name\": \"in\", \"batch_input_shape\": [null, 2, 6, 5]}},"
    "{\"class_name\": \"Conv2D\", \"config\": {\"name\": \"c1\", \"filters\": 3, \"kernel_size\": [3, 3], "
    "\"padding\": \"same\", \"data_format\": \"channels_first\", \"activation\": \"relu\"}},"
    "{\"class_name\": \"BatchNormalization\", \"config\": {\"name\": \"bn\", \"axis\": 1}},"
    "{\"class_name\": \"MaxPooling2D\", \"config\": {\"name\": \"p\", \"data_format\": \"channels_first\"}},"
    "{\"class_name\": \"ZeroPadding2D\", \"config\": {\"name\": \"z\", \"padding\": [[1, 0], [0, 1]], "
    "\"data_format\": \"channels_first\"}},"
    "{\"class_name\": \"Flatten\", \"config\": {\"name\": \"f\", \"data_format\": \"channels_first\"}},"
    "{\"class_name\": \"Dense\", \"config\": {\"name\": \"d\", \"units\": 4}}]}}";

static tnt_model *cl_twin(void) {
    tnt_model *m = tnt_sequential("cl");
    tu_ok(tnt_model_add(m, tnt_conv2d(3, 3, 3, &(tnt_layer_opts){.padding = TNT_PADDING_SAME, .activation = TNT_ACT_RELU})));
    tu_ok(tnt_model_add(m, tnt_batch_normalization(0, 0, NULL)));
    tu_ok(tnt_model_add(m, tnt_max_pooling2d(2, 2, NULL)));
    tu_ok(tnt_model_add(m, tnt_zero_padding2d(1, 0, 0, 1, NULL)));
    tu_ok(tnt_model_add(m, tnt_flatten(NULL)));
    tu_ok(tnt_model_add(m, tnt_dense(4, NULL)));
    tu_ok(tnt_model_build(m, TNT_SHAPE(6, 5, 2)));
    return m;
}

static void test_channels_first_model_from_json(void **state) {
    (void)state;
    tnt_model *f = tnt_model_from_json(CF_MODEL), *l = cl_twin();
    if (!f) fail_msg("from_json: %s", tnt_last_error());
    int64_t np = tnt_model_count_params(l);
    assert_int_equal(tnt_model_count_params(f), np);
    float *w = malloc((size_t)np * sizeof(float));
    tu_ok(tnt_get_weights(l, w, np));
    tu_ok(tnt_set_weights(f, w, np));
    const int64_t n = 8;
    tnt_tensor *xl = tnt_tensor_new(TNT_SHAPE(n, 6, 5, 2)), *xf = tnt_tensor_new(TNT_SHAPE(n, 2, 6, 5)), *yl, *yf;
    tu_fill(xl->data, n * 60, 3);
    to_first(xl->data, xf->data, n, TNT_SHAPE(6, 5, 2));
    tu_ok(tnt_predict_on_batch(l, xl, &yl));
    tu_ok(tnt_predict_on_batch(f, xf, &yf));
    tu_assert_close(yf->data, yl->data, n * 4, 1e-5, 1e-6, "channels-first model predictions");
    /* one epoch of SGD on each: the same weights after it */
    float *t = malloc((size_t)(n * 4) * sizeof(float));
    tu_fill(t, n * 4, 4);
    tnt_model *ms[2] = {l, f};
    tnt_tensor *xs[2] = {xl, xf};
    float *after[2];
    for (int i = 0; i < 2; i++) {
        tu_ok(tnt_compile(ms[i], &(tnt_compile_opts){.optimizer = tnt_sgd(0.1f), .loss = TNT_MEAN_SQUARED_ERROR}));
        tnt_shape per = {.ndim = 3, .dim = {xs[i]->shape.dim[1], xs[i]->shape.dim[2], xs[i]->shape.dim[3]}};
        tnt_dataset *ds = tnt_dataset_batch(tnt_dataset_from_arrays(xs[i]->data, per, t, TNT_SHAPE(4), n, false), 4, false);
        tu_ok(tnt_fit(ms[i], ds, &(tnt_fit_opts){.epochs = 1, .verbose = 0}, NULL));
        tnt_dataset_free(ds);
        after[i] = malloc((size_t)np * sizeof(float));
        tu_ok(tnt_get_weights(ms[i], after[i], np));
    }
    tu_assert_close(after[1], after[0], np, 1e-4, 1e-5, "weights after training");
    char *json = to_json(f);
    assert_non_null(strstr(json, "\"data_format\":\"channels_first\""));
    assert_non_null(strstr(json, "\"axis\":[1]"));
    free(json);
    free(after[0]), free(after[1]), free(t), free(w);
    tnt_tensor_free(xl), tnt_tensor_free(xf), tnt_tensor_free(yl), tnt_tensor_free(yf);
    tnt_model_free(l);
    tnt_model_free(f);
}

/* ---- ConvLSTM2D --------------------------------------------------------------------------- */

/* Fixture NAME (x, w0..w2 = kernel, recurrent_kernel, bias, dy) on l (consumed): y, dx, dw0..2. */
static void clstm_case(const char *name, tnt_layer *l) {
    char f[128];
    tnt_shape xs;
    snprintf(f, sizeof f, "%s_x", name);
    float *x = tu_load(f, &xs);
    tnt_shape in = {.ndim = xs.ndim - 1};
    for (int i = 1; i < xs.ndim; i++) in.dim[i - 1] = xs.dim[i];
    drv d;
    drv_init(&d, l, in, xs.dim[0]);
    memcpy(d.x, x, (size_t)in_numel(&d) * sizeof(float));
    free(x);
    assert_int_equal(l->n_weights, 3);
    for (int i = 0; i < 3; i++) {
        snprintf(f, sizeof f, "%s_w%d", name, i);
        load_into(l->weights[i].value, f, tnt_shape_numel(l->weights[i].shape));
    }
    snprintf(f, sizeof f, "%s_dy", name);
    load_into(d.dy, f, out_numel(&d));
    drv_forward(&d, false);
    snprintf(f, sizeof f, "%s_y", name);
    check(d.y, f, out_numel(&d), "y");
    poison_grads(l);
    drv_backward(&d, true, false);
    snprintf(f, sizeof f, "%s_dx", name);
    check(d.dx, f, in_numel(&d), "dx");
    for (int i = 0; i < 3; i++) {
        snprintf(f, sizeof f, "%s_dw%d", name, i);
        check(l->weights[i].grad, f, tnt_shape_numel(l->weights[i].shape), l->weights[i].name);
    }
    drv_free(&d, true);
}

static void test_conv_lstm2d(void **state) {
    (void)state;
    tnt_conv_lstm_opts o = {.rnn.return_sequences = true, .padding = TNT_PADDING_SAME};
    clstm_case("clstm_seq", tnt_conv_lstm2d(3, 3, 2, &o));
    o = (tnt_conv_lstm_opts){.rnn = {.go_backwards = true, .recurrent_activation = "hard_sigmoid"}};
    clstm_case("clstm_back_cf", cf(tnt_conv_lstm2d(2, 3, 3, &o)));
    o = (tnt_conv_lstm_opts){.rnn = {.go_backwards = true, .return_sequences = true, .activation = "relu"},
                             .strides = {2, 2}, .padding = TNT_PADDING_SAME};
    clstm_case("clstm_s2", tnt_conv_lstm2d(2, 2, 2, &o));
    o = (tnt_conv_lstm_opts){.rnn.return_sequences = true, .padding = TNT_PADDING_SAME};
    fd_check(tnt_conv_lstm2d(2, 2, 2, &o), TNT_SHAPE(3, 3, 2, 2), 2);
    o = (tnt_conv_lstm_opts){.rnn.go_backwards = true};
    fd_check(cf(tnt_conv_lstm2d(2, 2, 2, &o)), TNT_SHAPE(3, 2, 3, 3), 2);
    /* in Bidirectional: the backward copy keeps the format, the sequences reverse along time */
    o = (tnt_conv_lstm_opts){.rnn.return_sequences = true, .padding = TNT_PADDING_SAME};
    fd_check(tnt_bidirectional(cf(tnt_conv_lstm2d(2, 2, 2, &o)), NULL, TNT_MERGE_CONCAT, NULL), TNT_SHAPE(3, 2, 2, 3), 2);
    fd_check(tnt_bidirectional(tnt_conv_lstm2d(2, 2, 2, &o), NULL, TNT_MERGE_MUL, NULL), TNT_SHAPE(3, 2, 3, 2), 2);
    /* channels first equals channels last on the permuted steps */
    o = (tnt_conv_lstm_opts){.rnn.return_sequences = true, .padding = TNT_PADDING_SAME, .strides = {1, 2}};
    tnt_layer *cl = tnt_conv_lstm2d(2, 3, 3, &o);
    check_layer(TNT_SHAPE(3, 4, 5, 2), cl, "ConvLSTM2D", "\"return_sequences\":true");
    o.rnn.name = "clstm";
    check_layer(TNT_SHAPE(3, 2, 4, 5), cf(tnt_conv_lstm2d(2, 3, 3, &o)), "ConvLSTM2D",
                "\"data_format\":\"channels_first\"");
    assert_null(tnt_conv_lstm2d(2, 3, 3, &(tnt_conv_lstm_opts){.rnn.recurrent_dropout = 1.0f}));
    tu_error_contains("ConvLSTM2D: dropout 0, recurrent_dropout 1");
    assert_null(tnt_conv_lstm2d(2, 3, 3, &(tnt_conv_lstm_opts){.rnn.stateful = true}));
    tu_error_contains("ConvLSTM2D: stateful true is not supported");
    assert_null(tnt_conv_lstm2d(2, 3, 3, &(tnt_conv_lstm_opts){.rnn.activation = "swish"}));
    tu_error_contains("activation \"swish\"");
}

/* ---- Normalization ------------------------------------------------------------------------ */

/* Fixture NAME on l (consumed); with weights, mean and variance are loaded into them. */
static void norm_case(const char *name, tnt_layer *l) {
    char f[128];
    tnt_shape xs;
    snprintf(f, sizeof f, "%s_x", name);
    float *x = tu_load(f, &xs);
    tnt_shape in = {.ndim = xs.ndim - 1};
    for (int i = 1; i < xs.ndim; i++) in.dim[i - 1] = xs.dim[i];
    drv d;
    drv_init(&d, l, in, xs.dim[0]);
    memcpy(d.x, x, (size_t)in_numel(&d) * sizeof(float));
    free(x);
    if (l->n_weights) {
        assert_int_equal(l->n_weights, 3);
        assert_false(l->weights[0].trainable || l->weights[1].trainable || l->weights[2].trainable);
        snprintf(f, sizeof f, "%s_mean", name);
        load_into(l->weights[0].value, f, tnt_shape_numel(l->weights[0].shape));
        snprintf(f, sizeof f, "%s_var", name);
        load_into(l->weights[1].value, f, tnt_shape_numel(l->weights[1].shape));
    }
    snprintf(f, sizeof f, "%s_dy", name);
    load_into(d.dy, f, out_numel(&d));
    drv_forward(&d, false);
    snprintf(f, sizeof f, "%s_y", name);
    check(d.y, f, out_numel(&d), "y");
    drv_backward(&d, true, false);
    snprintf(f, sizeof f, "%s_dx", name);
    check(d.dx, f, in_numel(&d), "dx");
    drv_free(&d, true);
}

static void test_normalization(void **state) {
    (void)state;
    tnt_shape s;
    float *m = tu_load("norm_last_mean", &s), *v = tu_load("norm_last_var", &s);
    norm_case("norm_last", tnt_normalization(&(tnt_normalization_opts){.mean = m, .variance = v, .n_values = 5}));
    free(m), free(v);
    norm_case("norm_axes", tnt_normalization(&(tnt_normalization_opts){.n_axes = 2, .axes = {1, -1}}));
    m = tu_load("norm_none_invert_mean", &s), v = tu_load("norm_none_invert_var", &s);
    norm_case("norm_none_invert", tnt_normalization(&(tnt_normalization_opts){.n_axes = -1, .mean = m, .variance = v,
                                                                              .n_values = 1, .invert = true}));
    free(m), free(v);
    /* JSON: constants in the config (Keras 2.6+), weights (adapt()) otherwise */
    check_layer(TNT_SHAPE(3, 2), tnt_normalization(&(tnt_normalization_opts){.mean = (float[]){1, 2},
                                                                             .variance = (float[]){4, 9}, .n_values = 2}),
                "Normalization", "\"mean\":[1,2],\"variance\":[4,9]");
    check_layer(TNT_SHAPE(3, 2), tnt_normalization(&(tnt_normalization_opts){.n_axes = -1}), "Normalization",
                "\"axis\":null,\"mean\":null");
    /* the weights (count is a scalar) through an .h5 file */
    tnt_model *a = seq1(TNT_SHAPE(4, 3), tnt_normalization(&(tnt_normalization_opts){.n_axes = 1, .axes = {1}}));
    assert_int_equal(tnt_model_num_weights(a), 3);
    float w[4 + 4 + 1] = {0.5f, -1, 2, 0, 1, 4, 0.25f, 9, 123};
    const char *name;
    tnt_shape ws;
    float *p;
    for (int i = 0, at = 0; i < 3; i++) {
        tu_ok(tnt_model_weight(a, i, &name, &ws, &p));
        memcpy(p, w + at, (size_t)tnt_shape_numel(ws) * sizeof(float));
        at += (int)tnt_shape_numel(ws);
    }
    tu_tmpdir_setup(NULL);
    const char *path = tu_tmp_path("norm.h5");
    tu_ok(tnt_save_weights(a, path, NULL));
    tnt_model *b = seq1(TNT_SHAPE(4, 3), tnt_normalization(&(tnt_normalization_opts){.n_axes = 1, .axes = {1}}));
    tu_ok(tnt_load_weights(b, path, false));
    tu_ok(tnt_model_weight(b, 2, &name, &ws, &p));
    assert_string_equal(name, "normalization/count:0");
    assert_int_equal(ws.ndim, 0);
    assert_true(p[0] == 123.0f);
    tnt_tensor *x = tnt_tensor_new(TNT_SHAPE(1, 4, 3)), *y;
    for (int i = 0; i < 12; i++) x->data[i] = (float)i;
    tu_ok(tnt_predict_on_batch(b, x, &y));
    for (int i = 0; i < 12; i++) /* row r: (x - mean[r]) / sqrt(var[r]); var 0 gives the 1e-7 floor */
        assert_float_equal(y->data[i], ((float)i - w[i / 3]) / fmaxf(sqrtf(w[4 + i / 3]), 1e-7f), 1e-3 * fabsf(y->data[i]) + 1e-6);
    tnt_tensor_free(x), tnt_tensor_free(y);
    tnt_model_free(a), tnt_model_free(b);
    tu_tmpdir_teardown(NULL);
    assert_null(tnt_normalization(&(tnt_normalization_opts){.mean = (float[]){0}, .variance = (float[]){-1}, .n_values = 1}));
    tu_error_contains("variance -1");
    tnt_layer *l = tnt_normalization(&(tnt_normalization_opts){.mean = (float[]){0, 1}, .variance = (float[]){1, 1},
                                                               .n_values = 2, .name = "nz"});
    tnt_shape out;
    assert_int_equal(l->ops->build(l, TNT_SHAPE(3, 4), &out), TNT_ERR_SHAPE);
    tu_error_contains("Normalization \"nz\": 2 mean and variance values for input shape (3, 4) (expected 1 or 4");
    tnt_layer_free(l);
}

/* ---- JSON and errors ---------------------------------------------------------------------- */

static void test_json_round_trips(void **state) {
    (void)state;
    const char *cf_key = "\"data_format\":\"channels_first\"";
    check_layer(TNT_SHAPE(2, 7), cf(tnt_conv1d(3, 3, NULL)), "Conv1D", cf_key);
    check_layer(TNT_SHAPE(2, 5, 6), cf(tnt_conv2d(3, 3, 3, NULL)), "Conv2D", cf_key);
    check_layer(TNT_SHAPE(2, 4, 5, 6), cf(tnt_conv3d(3, (int[]){2, 2, 2}, NULL)), "Conv3D", "\"kernel_size\":[2,2,2]");
    check_layer(TNT_SHAPE(4, 5, 6, 2), tnt_conv3d(3, (int[]){3, 1, 2}, &(tnt_layer_opts){.strides = {1, 2, 1}}),
                "Conv3D", "\"strides\":[1,2,1]");
    check_layer(TNT_SHAPE(2, 5, 6), cf(tnt_conv2d_transpose(3, 3, 3, NULL, NULL)), "Conv2DTranspose", cf_key);
    check_layer(TNT_SHAPE(2, 5, 6), cf(tnt_depthwise_conv2d(3, 3, 1, NULL)), "DepthwiseConv2D", cf_key);
    check_layer(TNT_SHAPE(2, 5, 6), cf(tnt_separable_conv2d(2, 3, 3, 1, NULL)), "SeparableConv2D", cf_key);
    check_layer(TNT_SHAPE(2, 4, 6), cf(tnt_max_pooling2d(2, 2, NULL)), "MaxPooling2D", cf_key);
    check_layer(TNT_SHAPE(2, 4, 6, 4), cf(tnt_average_pooling3d((int[]){2, 2, 2}, NULL)), "AveragePooling3D",
                "\"pool_size\":[2,2,2]");
    check_layer(TNT_SHAPE(4, 6, 4, 2), tnt_max_pooling3d((int[]){1, 2, 2}, NULL), "MaxPooling3D", "\"pool_size\":[1,2,2]");
    check_layer(TNT_SHAPE(2, 8), cf(tnt_max_pooling1d(2, NULL)), "MaxPooling1D", cf_key);
    check_layer(TNT_SHAPE(2, 8), cf(tnt_global_average_pooling1d(NULL)), "GlobalAveragePooling1D", cf_key);
    check_layer(TNT_SHAPE(2, 4, 3), cf(tnt_global_max_pooling2d(NULL)), "GlobalMaxPooling2D", cf_key);
    check_layer(TNT_SHAPE(2, 4, 3), cf(tnt_zero_padding2d(1, 2, 3, 4, NULL)), "ZeroPadding2D", "[[1,2],[3,4]]");
    check_layer(TNT_SHAPE(2, 4, 3, 3), cf(tnt_zero_padding3d((const int[3][2]){{1, 2}, {3, 4}, {5, 6}}, NULL)),
                "ZeroPadding3D", "[[1,2],[3,4],[5,6]]");
    check_layer(TNT_SHAPE(5, 4, 6, 3), tnt_cropping3d((const int[3][2]){{1, 2}, {0, 1}, {2, 2}}, NULL), "Cropping3D",
                "[[1,2],[0,1],[2,2]]");
    check_layer(TNT_SHAPE(2, 4, 3), cf(tnt_upsampling2d(2, 2, "bilinear", NULL)), "UpSampling2D",
                "\"interpolation\":\"bilinear\"");
    check_layer(TNT_SHAPE(2, 4, 3, 2), cf(tnt_upsampling3d((int[]){1, 2, 3}, NULL)), "UpSampling3D", "\"size\":[1,2,3]");
    check_layer(TNT_SHAPE(2, 4, 3, 2), cf(tnt_spatial_dropout3d(0.3f, 0, NULL)), "SpatialDropout3D", cf_key);
    check_layer(TNT_SHAPE(2, 4, 3), cf(tnt_flatten(NULL)), "Flatten", cf_key);
    check_layer(TNT_SHAPE(3, 4, 5), tnt_batch_normalization_with(&(tnt_batch_norm_opts){.axis = 1}), "BatchNormalization",
                "\"axis\":[1]");
    check_layer(TNT_SHAPE(3, 4, 5), tnt_batch_normalization_with(&(tnt_batch_norm_opts){.axis = -2}),
                "BatchNormalization", "\"axis\":[2]");
    /* Keras 1's dim_ordering "th" is channels first */
    tnt_model *m = seq_from_layer_json("[null, 2, 5, 5]", "{\"class_name\": \"MaxPooling2D\", \"config\": {\"name\": "
                                       "\"p\", \"dim_ordering\": \"th\"}}");
    if (!m) fail_msg("%s", tnt_last_error());
    tnt_shape out = tnt_model_output_shape_at(m, 0);
    assert_true(tnt__shape_equal(out, TNT_SHAPE(2, 2, 2)));
    tnt_model_free(m);
}

static void test_errors(void **state) {
    (void)state;
    tnt_layer *l = tnt_dense(3, &(tnt_layer_opts){.name = "d"});
    assert_int_equal(tnt_layer_set_data_format(l, TNT_CHANNELS_FIRST), TNT_ERR_UNSUPPORTED);
    tu_error_contains("Dense \"d\": data_format \"channels_first\" (this class has no data_format)");
    tnt_layer_free(l);
    l = tnt_conv2d(2, 3, 3, &(tnt_layer_opts){.name = "c"});
    assert_int_equal(tnt_layer_set_data_format(l, (tnt_data_format)7), TNT_ERR_ARG);
    tu_error_contains("Conv2D \"c\": data_format 7");
    tu_ok(tnt_layer_set_data_format(l, TNT_CHANNELS_FIRST));
    tnt_shape out;
    assert_int_equal(l->ops->build(l, TNT_SHAPE(5, 5), &out), TNT_ERR_SHAPE);
    tu_error_contains("Conv2D \"c\": input shape (5, 5) has rank 2 (expected 3: channels, height, width)");
    tnt_model *m = tnt_sequential(NULL);
    tu_ok(tnt_model_add(m, l));
    assert_int_equal(tnt_layer_set_data_format(l, TNT_CHANNELS_LAST), TNT_ERR_ARG);
    tu_error_contains("after the layer joined a model");
    tnt_model_free(m);
    assert_null(tnt_conv3d(2, (int[]){2, 0, 2}, NULL));
    tu_error_contains("Conv3D: kernel_size (2, 0, 2)");
    assert_null(tnt_conv3d(2, (int[]){2, 2, 2}, &(tnt_layer_opts){.strides = {2, 1, 1}, .dilation = {1, 1, 2}}));
    tu_error_contains("not both");
    assert_null(tnt_max_pooling3d((int[]){2, -1, 2}, NULL));
    tu_error_contains("MaxPooling3D: pool_size (2, -1, 2)");
    assert_null(tnt_zero_padding3d((const int[3][2]){{0, 0}, {1, -1}, {0, 0}}, "z"));
    tu_error_contains("ZeroPadding3D \"z\": padding ((0, 0), (1, -1), (0, 0))");
    assert_null(tnt_upsampling3d((int[]){1, 0, 1}, "u"));
    tu_error_contains("UpSampling3D \"u\": size (1, 0, 1)");
    l = tnt_batch_normalization_with(&(tnt_batch_norm_opts){.axis = 4, .name = "bn"});
    assert_int_equal(l->ops->build(l, TNT_SHAPE(3, 4, 5), &out), TNT_ERR_SHAPE);
    tu_error_contains("BatchNormalization \"bn\": axis 4 of input shape (3, 4, 5) (expected 1..3 or -3..-1");
    tnt_layer_free(l);
    l = tnt_cropping3d((const int[3][2]){{1, 1}, {0, 0}, {0, 0}}, "cr");
    tu_ok(tnt_layer_set_data_format(l, TNT_CHANNELS_FIRST));
    assert_int_equal(l->ops->build(l, TNT_SHAPE(4, 2, 3, 3), &out), TNT_ERR_SHAPE);
    tu_error_contains("Cropping3D \"cr\": cropping ((1, 1), (0, 0), (0, 0)) leaves nothing of input shape (4, 2, 3, 3)");
    tnt_layer_free(l);
    expect_error("{\"class_name\": \"Sequential\", \"config\": {\"layers\": [{\"class_name\": \"BatchNormalization\", "
                 "\"config\": {\"name\": \"b\", \"axis\": [1, 2], \"batch_input_shape\": [null, 3, 4]}}]}}",
                 (const char *const[]){"\"b\"", "axis: expected one axis", NULL});
    expect_error("{\"class_name\": \"Sequential\", \"config\": {\"layers\": [{\"class_name\": \"LayerNormalization\", "
                 "\"config\": {\"name\": \"ln\", \"axis\": 1, \"batch_input_shape\": [null, 3, 4]}}]}}",
                 (const char *const[]){"\"ln\"", "axis 1 of input shape (3, 4) (only the last axis", NULL});
}

static int teardown(void **state) {
    (void)state;
    tnt__dnnl_shutdown();
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conv3d_fixtures),
        cmocka_unit_test(test_3d_fixtures),
        cmocka_unit_test(test_batch_norm_axis_fixtures),
        cmocka_unit_test(test_finite_differences),
        cmocka_unit_test(test_convolutions_equal_channels_last),
        cmocka_unit_test(test_spatial_layers_equal_channels_last),
        cmocka_unit_test(test_batch_norm_axis_equals_last),
        cmocka_unit_test(test_channels_first_model_from_json),
        cmocka_unit_test(test_conv_lstm2d),
        cmocka_unit_test(test_normalization),
        cmocka_unit_test(test_json_round_trips),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, teardown);
}

/* test_variable_dist.c: a model with variable (None) input dimensions trains data-parallel as it
 * does serially, run by ctest under mpirun with 2 and 3 ranks: a fully convolutional model
 * (None, None, 2) and a GRU model (None, 3) fit on one input size, then on another, then on the
 * first again (each size instantiates the model and gets its own plans); the weights and the
 * losses equal serial training within 1e-5 relative and are bitwise equal on all ranks. The
 * fingerprint that every rank must share is the model's (None stays None), not the shape the data
 * gave it. Under TNT_DEVICE=auto on the emulated device (ctest's test_variable_dist_np2_gpu, with
 * im2col for the convolutions) the conv model trains there, a device plan per size, serial and
 * distributed alike. */
#include "testutil.h"

#include "comm/comm.h"
#include "model/model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NONE TNT_DIM_NONE

static tnt_model *conv_model(bool distributed) {
    tnt_graph *g = tnt_graph_new();
    tnt_ktensor in = tnt_graph_input(g, TNT_SHAPE(NONE, NONE, 2), "image");
    tnt_ktensor x = tnt_call(g, tnt_conv2d(3, 3, 3, &(tnt_layer_opts){.padding = TNT_PADDING_SAME, .activation = TNT_ACT_TANH}), in);
    x = tnt_call(g, tnt_conv2d(1, 1, 1, NULL), x);
    tnt_model *m = tnt_functional(g, 1, &in, 1, &x, "fcn");
    tnt_graph_free(g);
    assert_non_null(m);
    if (distributed) tu_ok(tnt_distribute(m));
    tu_ok(tnt_compile(m, &(tnt_compile_opts){.optimizer = tnt_adam(0.01f), .loss = TNT_MEAN_SQUARED_ERROR, .seed = 3}));
    return m;
}

static tnt_model *gru_model(bool distributed) {
    tnt_model *m = tnt_sequential("gru");
    tu_ok(tnt_model_add(m, tnt_input_layer(TNT_SHAPE(NONE, 3), "steps")));
    tu_ok(tnt_model_add(m, tnt_gru(4, NULL)));
    tu_ok(tnt_model_add(m, tnt_dense(2, &(tnt_layer_opts){.activation = TNT_ACT_SOFTMAX})));
    if (distributed) tu_ok(tnt_distribute(m));
    tu_ok(tnt_compile(m, &(tnt_compile_opts){.optimizer = tnt_adam(0.01f), .loss = TNT_SPARSE_CATEGORICAL_CROSSENTROPY, .seed = 3}));
    return m;
}

/* n samples of shape x (and targets of shape y, or class ids when y has no dims) */
static tnt_dataset *data(tnt_shape x, tnt_shape y, int64_t n, uint64_t seed, float **keep) {
    int64_t xs = tnt_shape_numel(x), ys = tnt_shape_numel(y);
    float *buf = malloc((size_t)(n * (xs + ys)) * sizeof *buf);
    tu_fill(buf, n * (xs + ys), seed);
    if (y.ndim == 0)
        for (int64_t i = 0; i < n; i++) buf[n * xs + i] = (float)(i % 2);
    *keep = buf;
    return tnt_dataset_batch(tnt_dataset_from_arrays(buf, x, buf + n * xs, y, n, false), 10, false);
}

static void check(bool conv) {
    tnt_model *s = conv ? conv_model(false) : gru_model(false), *d = conv ? conv_model(true) : gru_model(true);
    tnt_shape sizes[3][2] = {{TNT_SHAPE(6, 5, 2), TNT_SHAPE(6, 5, 1)},
                             {TNT_SHAPE(4, 9, 2), TNT_SHAPE(4, 9, 1)},
                             {TNT_SHAPE(6, 5, 2), TNT_SHAPE(6, 5, 1)}};
    if (!conv)
        for (int k = 0; k < 3; k++) sizes[k][0] = TNT_SHAPE(k == 1 ? 7 : 3, 3), sizes[k][1] = TNT_SHAPE();
    char what[96];
    for (int k = 0; k < 3; k++) {
        float *keep;
        tnt_dataset *ds = data(sizes[k][0], sizes[k][1], 25, (uint64_t)k + 1, &keep); /* 25: a partial batch */
        tnt_history *hs, *hd;
        tu_ok(tnt_fit(s, ds, &(tnt_fit_opts){.epochs = 2}, &hs));
        tu_ok(tnt_fit(d, ds, &(tnt_fit_opts){.epochs = 2}, &hd));
        snprintf(what, sizeof what, "%s, size %d, %d ranks", conv ? "conv" : "GRU", k, tnt_get_size());
        for (int e = 0; e < 2; e++) {
            double a = tnt_history_get(hs, "loss", e), b = tnt_history_get(hd, "loss", e);
            if (!(fabs(a - b) <= 1e-5 * fabs(a) + 1e-7)) fail_msg("%s epoch %d loss: distributed %.9g, serial %.9g", what, e, b, a);
        }
        tnt_history_free(hs), tnt_history_free(hd);
        tnt_dataset_free(ds);
        free(keep);
    }
    const char *device = getenv("TNT_DEVICE");
    if (conv && device && !strcmp(device, "auto")) assert_true(s->on_device && d->on_device);
    int64_t n = tnt_model_count_params(s);
    float *ws = malloc((size_t)n * sizeof(float)), *wd = malloc((size_t)n * sizeof(float)), *master = malloc((size_t)n * sizeof(float));
    tu_ok(tnt_get_weights(s, ws, n));
    tu_ok(tnt_get_weights(d, wd, n));
    tu_assert_close(wd, ws, n, 1e-5, 1e-6, what);
    memcpy(master, wd, (size_t)n * sizeof(float));
    tu_ok(tnt__bcast_f32(master, n));
    assert_memory_equal(master, wd, (size_t)n * sizeof(float));
    free(ws), free(wd), free(master);
    tnt_model_free(s), tnt_model_free(d);
}

static void test_conv_equals_serial(void **state) {
    (void)state;
    check(true);
}

static void test_gru_equals_serial(void **state) {
    (void)state;
    check(false);
}

int main(int argc, char **argv) {
    if (tnt_init(&argc, &argv) != TNT_OK) {
        fprintf(stderr, "tnt_init: %s\n", tnt_last_error());
        return 1;
    }
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_conv_equals_serial), cmocka_unit_test(test_gru_equals_serial)};
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    tnt_finalize();
    return rc;
}

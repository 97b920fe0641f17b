/* test_layers_noise.c: Dropout with a noise_shape, SpatialDropout1D/2D, GaussianNoise, GaussianDropout, AlphaDropout and
 * ActivityRegularization: identity at inference, the noise statistics Keras's formulas give
 * (rates, means, variances, AlphaDropout's preserved mean and variance), whole channels dropped
 * by SpatialDropout, the same noise whatever the split of the batch (sample_offset), and
 * backward against finite differences (the step's noise is fixed by its seed). */
#include "layer_harness.h"
#include "model/model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Forward (and backward with dy, if given) of n samples starting at global sample offset. */
static void run_at(tnt_layer *l, int64_t n, int64_t offset, const float *x, float *y, const float *dy, float *dx,
                   bool training) {
    uint64_t ws = 0;
    tnt__fwd_args fa = {.batch = n, .x = x, .y = y, .workspace = &ws, .training = training, .seed = 99,
                        .sample_offset = offset};
    tu_ok(l->ops->forward(l, NULL, &fa));
    if (!dy) return;
    tnt__bwd_args ba = {.batch = n, .x = x, .y = y, .dy = dy, .dx = dx, .workspace = &ws, .sample_offset = offset};
    tu_ok(l->ops->backward(l, NULL, &ba));
}

static tnt_layer *built(tnt_layer *l, tnt_shape in) {
    assert_non_null(l);
    tu_ok(l->ops->build(l, in, &l->out_shape));
    l->in_shape = in;
    l->seed = 5;
    return l;
}

#define N_SAMPLES 64
#define PER 120 /* (10, 12) */

static tnt_layer *make(int kind, const char *name) {
    switch (kind) {
    case 0: return tnt_spatial_dropout1d(0.3f, 0, name);
    case 1: return tnt_gaussian_noise(0.5f, 0, name);
    case 2: return tnt_gaussian_dropout(0.2f, 0, name);
    case 3: return tnt_alpha_dropout(0.25f, 0, name);
    default: return tnt_activity_regularization(0.01f, 0.02f, name);
    }
}

static void test_inference_identity_and_split(void **state) {
    (void)state;
    float *x = malloc(N_SAMPLES * PER * sizeof(float)), *y = malloc(N_SAMPLES * PER * sizeof(float));
    float *y2 = malloc(N_SAMPLES * PER * sizeof(float)), *dx = malloc(N_SAMPLES * PER * sizeof(float));
    float *dx2 = malloc(N_SAMPLES * PER * sizeof(float));
    tu_fill(x, N_SAMPLES * PER, 3);
    for (int kind = 0; kind < 5; kind++) {
        tnt_layer *l = built(make(kind, NULL), TNT_SHAPE(10, 12));
        run_at(l, N_SAMPLES, 0, x, y, x, dx, false);
        tu_assert_close(y, x, N_SAMPLES * PER, 0, 0, "inference forward is the identity");
        tu_assert_close(dx, x, N_SAMPLES * PER, 0, 0, "inference backward is the identity");
        /* the whole batch at once, and as two ranks' shares (20 + 44 samples) */
        run_at(l, N_SAMPLES, 0, x, y, x, dx, true);
        run_at(l, 20, 0, x, y2, x, dx2, true);
        run_at(l, N_SAMPLES - 20, 20, x + 20 * PER, y2 + 20 * PER, x + 20 * PER, dx2 + 20 * PER, true);
        tu_assert_close(y2, y, N_SAMPLES * PER, 0, 0, "split forward");
        tu_assert_close(dx2, dx, N_SAMPLES * PER, 0, 0, "split backward");
        tnt_layer_free(l);
    }
    free(x), free(y), free(y2), free(dx), free(dx2);
}

/* Mean and variance of v. */
static void moments(const float *v, int64_t n, double *mean, double *var) {
    double s = 0, q = 0;
    for (int64_t i = 0; i < n; i++) s += v[i];
    *mean = s / (double)n;
    for (int64_t i = 0; i < n; i++) q += (v[i] - *mean) * (v[i] - *mean);
    *var = q / (double)n;
}

static void test_statistics(void **state) {
    (void)state;
    const int64_t n = 4096, per = 64, total = n * per;
    float *x = malloc((size_t)total * sizeof(float)), *y = malloc((size_t)total * sizeof(float));
    float *r = malloc((size_t)total * sizeof(float));
    double mean, var;
    /* SpatialDropout1D on (steps 8, channels 8): each (sample, channel) all kept (scaled) or all 0 */
    for (int64_t i = 0; i < total; i++) x[i] = 1.0f;
    tnt_layer *l = built(tnt_spatial_dropout1d(0.3f, 0, NULL), TNT_SHAPE(8, 8));
    run_at(l, n, 0, x, y, NULL, NULL, true);
    int64_t dropped = 0;
    for (int64_t s = 0; s < n; s++)
        for (int64_t c = 0; c < 8; c++) {
            float v0 = y[s * per + c];
            assert_true(v0 == 0.0f || fabsf(v0 - 1.0f / 0.7f) < 1e-6f);
            for (int64_t t = 1; t < 8; t++) assert_true(y[s * per + t * 8 + c] == v0);
            dropped += v0 == 0.0f;
        }
    assert_true(fabs((double)dropped / (double)(n * 8) - 0.3) < 0.02);
    tnt_layer_free(l);
    /* GaussianNoise: y - x ~ N(0, 0.5^2) */
    tu_fill(x, total, 4);
    l = built(tnt_gaussian_noise(0.5f, 0, NULL), TNT_SHAPE(per));
    run_at(l, n, 0, x, y, NULL, NULL, true);
    for (int64_t i = 0; i < total; i++) r[i] = y[i] - x[i];
    moments(r, total, &mean, &var);
    assert_true(fabs(mean) < 0.01 && fabs(var - 0.25) < 0.01);
    tnt_layer_free(l);
    /* GaussianDropout: y / x ~ N(1, rate / (1 - rate)) */
    for (int64_t i = 0; i < total; i++) x[i] = 2.0f;
    l = built(tnt_gaussian_dropout(0.2f, 0, NULL), TNT_SHAPE(per));
    run_at(l, n, 0, x, y, NULL, NULL, true);
    for (int64_t i = 0; i < total; i++) r[i] = y[i] / x[i];
    moments(r, total, &mean, &var);
    assert_true(fabs(mean - 1.0) < 0.01 && fabs(var - 0.25) < 0.01);
    tnt_layer_free(l);
    /* AlphaDropout keeps zero mean and unit variance of standard normal inputs (its purpose) */
    for (int64_t i = 0; i < total; i++) x[i] = tnt__rand_normal(77, (uint64_t)i);
    l = built(tnt_alpha_dropout(0.25f, 0, NULL), TNT_SHAPE(per));
    run_at(l, n, 0, x, y, NULL, NULL, true);
    moments(y, total, &mean, &var);
    if (!(fabs(mean) < 0.02 && fabs(var - 1.0) < 0.03)) fail_msg("AlphaDropout mean %g var %g", mean, var);
    tnt_layer_free(l);
    free(x), free(y), free(r);
}

static void test_finite_differences(void **state) {
    (void)state;
    fd_check(tnt_spatial_dropout2d(0.4f, 3, NULL), TNT_SHAPE(2, 3, 4), 3);
    fd_check(tnt_gaussian_noise(0.3f, 3, NULL), TNT_SHAPE(7), 2);
    fd_check(tnt_gaussian_dropout(0.3f, 3, NULL), TNT_SHAPE(7), 2);
    fd_check(tnt_alpha_dropout(0.3f, 3, NULL), TNT_SHAPE(9), 3);
    fd_check(tnt_activity_regularization(0.1f, 0, NULL), TNT_SHAPE(4), 2);
}

static void test_errors(void **state) {
    (void)state;
    assert_null(tnt_spatial_dropout1d(1.0f, 0, NULL));
    tu_error_contains("SpatialDropout1D: rate 1");
    assert_null(tnt_alpha_dropout(-0.1f, 0, NULL));
    tu_error_contains("AlphaDropout: rate -0.1");
    assert_null(tnt_gaussian_noise(INFINITY, 0, NULL));
    tu_error_contains("GaussianNoise: stddev inf");
    assert_null(tnt_gaussian_dropout(NAN, 0, NULL));
    tu_error_contains("GaussianDropout: rate nan");
    assert_null(tnt_activity_regularization(-1.0f, 0, NULL));
    tu_error_contains("ActivityRegularization: l1 -1");
    tnt_shape out;
    tnt_layer *l = tnt_spatial_dropout2d(0.5f, 0, "sd");
    assert_int_equal(l->ops->build(l, TNT_SHAPE(4, 5), &out), TNT_ERR_SHAPE);
    tu_error_contains("SpatialDropout2D \"sd\": input shape (4, 5) has rank 2 (expected 3");
    tnt_layer_free(l);
}

/* Dropout with Keras's noise_shape, read from a Keras config: one draw per position of the noise
 * shape, shared along its axes of size 1; the same masks over any split of the batch. */
static tnt_layer *noise_dropout(const char *noise, tnt_model **m) {
    char json[512];
    snprintf(json, sizeof json,
             "{\"class_name\": \"Sequential\", \"config\": {\"name\": \"s\", \"layers\": [{\"class_name\": "
             "\"InputLayer\", \"config\": {\"batch_input_shape\": [null, 10, 12]}}, {\"class_name\": \"Dropout\", "
             "\"config\": {\"name\": \"d\", \"rate\": 0.4, \"noise_shape\": %s}}]}}", noise);
    *m = tnt_model_from_json(json);
    if (!*m) return NULL;
    for (int i = 0; i < (*m)->n_layers; i++)
        if (!strcmp((*m)->layers[i]->name, "d")) return (*m)->layers[i];
    return NULL;
}

static void test_dropout_noise_shape(void **state) {
    (void)state;
    float *x = malloc(N_SAMPLES * PER * sizeof(float)), *y = malloc(N_SAMPLES * PER * sizeof(float));
    float *y2 = malloc(N_SAMPLES * PER * sizeof(float)), *dx = malloc(N_SAMPLES * PER * sizeof(float));
    for (int i = 0; i < N_SAMPLES * PER; i++) x[i] = 1.0f + (float)(i % 7);
    const char *noises[] = {"[null, 1, 12]", "[null, 1, 1]", "[1, 10, 12]"};
    for (int v = 0; v < 3; v++) {
        tnt_model *m;
        tnt_layer *l = noise_dropout(noises[v], &m);
        if (!l) fail_msg("%s: %s", noises[v], tnt_last_error());
        run_at(l, N_SAMPLES, 0, x, y, x, dx, true);
        int64_t kept = 0;
        for (int64_t s = 0; s < N_SAMPLES; s++)
            for (int t = 0; t < 10; t++)
                for (int c = 0; c < 12; c++) {
                    int64_t i = s * PER + t * 12 + c;
                    bool keep = y[i] != 0.0f;
                    kept += keep;
                    if (keep) assert_float_equal(y[i], x[i] / 0.6f, 1e-5);
                    assert_float_equal(dx[i], y[i], 0); /* backward: the same mask times dy (= x) */
                    /* shared draws: along the time axis (v 0), the whole sample (v 1), the batch (v 2) */
                    int64_t ref = v == 0 ? s * PER + c : v == 1 ? s * PER : t * 12 + c;
                    assert_int_equal(keep, y[ref] != 0.0f);
                }
        double frac = (double)kept / (N_SAMPLES * PER);
        if (v < 2) assert_true(frac > 0.3 && frac < 0.9); /* 1 - rate = 0.6 (64 samples or 768 columns drawn) */
        run_at(l, 20, 0, x, y2, NULL, NULL, true); /* two ranks' shares draw alike */
        run_at(l, N_SAMPLES - 20, 20, x + 20 * PER, y2 + 20 * PER, NULL, NULL, true);
        tu_assert_close(y2, y, N_SAMPLES * PER, 0, 0, "noise_shape: split forward");
        tnt_model_free(m);
    }
    tnt_model *m;
    assert_null(noise_dropout("[null, 3, 12]", &m));
    tu_error_contains("noise_shape entry 1 is 3 for an axis of 10");
    assert_null(noise_dropout("[null, 1]", &m));
    tu_error_contains("noise_shape has 2 entries for an input of rank 3");
    free(x), free(y), free(y2), free(dx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dropout_noise_shape),
        cmocka_unit_test(test_inference_identity_and_split),
        cmocka_unit_test(test_statistics),
        cmocka_unit_test(test_finite_differences),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

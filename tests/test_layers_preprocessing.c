/* test_layers_preprocessing.c: Keras's image preprocessing layers Resizing, CenterCrop, RandomFlip,
 * RandomTranslation, RandomRotation, RandomZoom, RandomCrop, RandomContrast and RandomBrightness: forward and backward against PyTorch
 * (tests/fixtures/gen_preprocessing.py: F.interpolate, grid_sample, NumPy's symmetric pad for
 * TensorFlow's reflect fill), the random layers the identity at inference and the same draws for
 * any split of the batch (sample_offset), flips exact, gradients by finite differences, configs
 * round trips through the model JSON, and bad arguments refused with their value named. */
#include "json_harness.h"
#include "layer_harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 16
#define H 5
#define W 6
#define C 2
#define PER (H * W * C)

/* Forward and backward of the fixture case name (x (n, h, w, c) -> y). */
static void fixture_case_at(const char *name, tnt_layer *l, bool training) {
    assert_non_null(l);
    char f[128];
    tnt_shape xs, ys;
    snprintf(f, sizeof f, "%s_x", name);
    float *x = tu_load(f, &xs);
    snprintf(f, sizeof f, "%s_dy", name);
    float *dy = tu_load(f, &ys);
    tnt_shape in = TNT_SHAPE(xs.dim[1], xs.dim[2], xs.dim[3]);
    float *y = calloc((size_t)tnt_shape_numel(ys), sizeof(float)), *dx = calloc((size_t)tnt_shape_numel(xs), sizeof(float));
    l->seed = 3;
    run_layer(l, in, xs.dim[0], x, y, dy, dx, training);
    snprintf(f, sizeof f, "%s_y", name);
    check(y, f, tnt_shape_numel(ys), "forward");
    snprintf(f, sizeof f, "%s_dx", name);
    check(dx, f, tnt_shape_numel(xs), "backward");
    free(x), free(dy), free(y), free(dx);
    tnt_layer_free(l);
}

static void fixture_case(const char *name, tnt_layer *l) { fixture_case_at(name, l, true); }

static void test_resizing_and_center_crop(void **state) {
    (void)state;
    fixture_case("pre_resize_down", tnt_resizing(4, 5, NULL, false, NULL));
    fixture_case("pre_resize_up", tnt_resizing(11, 7, "bilinear", false, NULL));
    fixture_case("pre_resize_nearest", tnt_resizing(4, 13, "nearest", false, NULL));
    fixture_case("pre_resize_crop", tnt_resizing(4, 4, NULL, true, NULL));
    fixture_case("pre_center_crop", tnt_center_crop(5, 4, NULL));
    fixture_case("pre_center_crop_small", tnt_center_crop(6, 6, NULL));
    fixture_case_at("pre_random_crop_infer", tnt_random_crop(5, 4, 0, NULL), false);
}

/* RandomCrop in training: every output is a window of its input at some offset, several offsets
 * occur, backward puts dy back in that window, and a split batch draws the same. */
static void test_random_crop_training(void **state) {
    (void)state;
    enum { CH = 3, CW = 4, IN = H * W * C, OUT = CH * CW * C };
    float *x = malloc(N * IN * sizeof(float)), *y = malloc(N * OUT * sizeof(float)), *dy = malloc(N * OUT * sizeof(float));
    float *dx = malloc(N * IN * sizeof(float)), *y2 = malloc(N * OUT * sizeof(float)), *dx2 = malloc(N * IN * sizeof(float));
    tu_fill(x, N * IN, 31);
    tu_fill(dy, N * OUT, 32);
    tnt_layer *l = tnt_random_crop(CH, CW, 0, NULL);
    assert_non_null(l);
    l->seed = 2;
    tnt_shape out;
    tu_ok(l->ops->build(l, TNT_SHAPE(H, W, C), &out));
    assert_int_equal(out.ndim, 3);
    assert_true(out.dim[0] == CH && out.dim[1] == CW && out.dim[2] == C);
    l->in_shape = TNT_SHAPE(H, W, C);
    l->out_shape = out;
    uint64_t ws = 0;
    tnt__fwd_args fa = {.batch = N, .x = x, .y = y, .workspace = &ws, .training = true, .seed = 11};
    tu_ok(l->ops->forward(l, NULL, &fa));
    tnt__bwd_args ba = {.batch = N, .x = x, .y = y, .dy = dy, .dx = dx, .workspace = &ws};
    tu_ok(l->ops->backward(l, NULL, &ba));
    int offsets_seen[H * W] = {0}, distinct = 0;
    for (int s = 0; s < N; s++) {
        int found = -1;
        for (int t = 0; t <= H - CH && found < 0; t++)
            for (int u = 0; u <= W - CW && found < 0; u++) {
                bool same = true;
                for (int i = 0; i < CH && same; i++)
                    for (int j = 0; j < CW * C && same; j++)
                        same = y[s * OUT + i * CW * C + j] == x[s * IN + ((t + i) * W + u) * C + j];
                if (same) found = t * W + u;
            }
        assert_true(found >= 0);
        distinct += !offsets_seen[found]++;
        int t = found / W, u = found % W;
        for (int i = 0; i < H; i++)
            for (int j = 0; j < W * C; j++) {
                bool inside = i >= t && i < t + CH && j >= u * C && j < (u + CW) * C;
                float want = inside ? dy[s * OUT + (i - t) * CW * C + (j - u * C)] : 0.0f;
                assert_true(dx[s * IN + i * W * C + j] == want);
            }
    }
    assert_true(distinct >= 3);
    /* two ranks' shares: 7 + 9 samples */
    tnt__fwd_args f1 = {.batch = 7, .x = x, .y = y2, .workspace = &ws, .training = true, .seed = 11};
    tu_ok(l->ops->forward(l, NULL, &f1));
    tnt__bwd_args b1 = {.batch = 7, .x = x, .y = y2, .dy = dy, .dx = dx2, .workspace = &ws};
    tu_ok(l->ops->backward(l, NULL, &b1));
    tnt__fwd_args f2 = {.batch = N - 7, .x = x + 7 * IN, .y = y2 + 7 * OUT, .workspace = &ws, .training = true,
                        .seed = 11, .sample_offset = 7};
    tu_ok(l->ops->forward(l, NULL, &f2));
    tnt__bwd_args b2 = {.batch = N - 7, .x = x + 7 * IN, .y = y2 + 7 * OUT, .dy = dy + 7 * OUT, .dx = dx2 + 7 * IN,
                        .workspace = &ws, .sample_offset = 7};
    tu_ok(l->ops->backward(l, NULL, &b2));
    tu_assert_bitwise(y2, y, N * OUT, "a split batch crops the same windows");
    tu_assert_bitwise(dx2, dx, N * IN, "a split batch's backward is the same");
    tnt_layer_free(l);
    free(x), free(y), free(dy), free(dx), free(y2), free(dx2);
}

/* Fixed factors (lower == upper): one deterministic map per image, against grid_sample. */
static void test_random_affine_values(void **state) {
    (void)state;
    tnt_image_fill zero = {.fill_mode = "constant"};
    fixture_case("pre_rotation", tnt_random_rotation(0.1f, 0.1f, &zero, 0, NULL));
    fixture_case("pre_zoom", tnt_random_zoom(-0.3f, -0.3f, 0.2f, 0.2f, &zero, 0, NULL));
    fixture_case("pre_translation", tnt_random_translation(-0.2f, -0.2f, 0.35f, 0.35f, &zero, 0, NULL));
    /* Keras's default fill_mode, reflect (NULL options) */
    fixture_case("pre_translation_reflect", tnt_random_translation(2.0f / 6, 2.0f / 6, -0.375f, -0.375f, NULL, 0, NULL));
}


/* The layer on samples [offset, offset + n) of x, training. */
static void run_at(tnt_layer *l, int64_t n, int64_t offset, const float *x, float *y, const float *dy, float *dx,
                   bool training) {
    uint64_t ws = 0;
    tnt__fwd_args fa = {.batch = n, .x = x, .y = y, .workspace = &ws, .training = training, .seed = 11,
                        .sample_offset = offset};
    tu_ok(l->ops->forward(l, NULL, &fa));
    tnt__bwd_args ba = {.batch = n, .x = x, .y = y, .dy = dy, .dx = dx, .workspace = &ws, .sample_offset = offset};
    tu_ok(l->ops->backward(l, NULL, &ba));
}

static tnt_layer *make_random(int kind) {
    switch (kind) {
    case 0: return tnt_random_flip(NULL, 0, NULL);
    case 1: return tnt_random_translation(-0.2f, 0.3f, -0.25f, 0.1f, NULL, 0, NULL);
    case 2: return tnt_random_rotation(-0.2f, 0.2f, NULL, 0, NULL);
    case 3: return tnt_random_zoom(-0.3f, 0.4f, NAN, NAN, NULL, 0, NULL);
    case 4: return tnt_random_contrast(0.5f, 0.5f, -100, 100, 0, NULL);
    default: return tnt_random_brightness(-0.2f, 0.2f, -100, 100, 0, NULL);
    }
}

static void test_random_inference_identity_and_split(void **state) {
    (void)state;
    float *x = malloc(N * PER * sizeof(float)), *dy = malloc(N * PER * sizeof(float));
    float *y = malloc(N * PER * sizeof(float)), *dx = malloc(N * PER * sizeof(float));
    float *y2 = malloc(N * PER * sizeof(float)), *dx2 = malloc(N * PER * sizeof(float));
    tu_fill(x, N * PER, 5);
    tu_fill(dy, N * PER, 6);
    for (int kind = 0; kind < 6; kind++) {
        tnt_layer *l = make_random(kind);
        assert_non_null(l);
        l->seed = 9;
        tnt_shape out;
        tu_ok(l->ops->build(l, TNT_SHAPE(H, W, C), &out));
        l->in_shape = l->out_shape = out;
        run_at(l, N, 0, x, y, dy, dx, false);
        tu_assert_bitwise(y, x, N * PER, "inference forward is the identity");
        tu_assert_bitwise(dx, dy, N * PER, "inference backward is the identity");
        run_at(l, N, 0, x, y, dy, dx, true);
        run_at(l, 5, 0, x, y2, dy, dx2, true); /* two ranks' shares: 5 + 11 samples */
        run_at(l, N - 5, 5, x + 5 * PER, y2 + 5 * PER, dy + 5 * PER, dx2 + 5 * PER, true);
        tu_assert_bitwise(y2, y, N * PER, "a split batch draws the same (forward)");
        tu_assert_bitwise(dx2, dx, N * PER, "a split batch draws the same (backward)");
        int changed = 0;
        for (int s = 0; s < N; s++) changed += memcmp(x + s * PER, y + s * PER, PER * sizeof(float)) != 0;
        assert_true(changed >= N / 4); /* training transforms most samples */
        tnt_layer_free(l);
    }
    free(x), free(dy), free(y), free(dx), free(y2), free(dx2);
}

/* Every RandomFlip output is the sample itself or its exact mirror, all four occur, and the
 * one-axis modes only flip their axis. */
static void test_random_flip_exact(void **state) {
    (void)state;
    const char *modes[] = {"horizontal_and_vertical", "horizontal", "vertical"};
    float *x = malloc(N * PER * sizeof(float)), *y = malloc(N * PER * sizeof(float));
    float *dx = malloc(N * PER * sizeof(float));
    tu_fill(x, N * PER, 8);
    for (int m = 0; m < 3; m++) {
        tnt_layer *l = tnt_random_flip(modes[m], 1234, NULL);
        assert_non_null(l);
        tnt_shape out;
        tu_ok(l->ops->build(l, TNT_SHAPE(H, W, C), &out));
        l->in_shape = l->out_shape = out;
        run_at(l, N, 0, x, y, x, dx, true);
        int seen[4] = {0};
        for (int s = 0; s < N; s++) {
            int found = -1;
            for (int f = 0; f < 4 && found < 0; f++) {
                bool same = true;
                for (int i = 0; i < H && same; i++)
                    for (int j = 0; j < W && same; j++)
                        for (int k = 0; k < C; k++) {
                            int si = f & 2 ? H - 1 - i : i, sj = f & 1 ? W - 1 - j : j;
                            if (y[s * PER + (i * W + j) * C + k] != x[s * PER + (si * W + sj) * C + k]) same = false;
                        }
                if (same) found = f;
            }
            assert_true(found >= 0);
            seen[found]++;
            /* backward of a flip is the same flip: dx of dy = x is y */
            assert_memory_equal(dx + s * PER, y + s * PER, PER * sizeof(float));
        }
        if (m == 0) assert_true(seen[0] && seen[1] && seen[2] && seen[3]);
        if (m == 1) assert_true(seen[0] && seen[1] && !seen[2] && !seen[3]);
        if (m == 2) assert_true(seen[0] && seen[2] && !seen[1] && !seen[3]);
        tnt_layer_free(l);
    }
    free(x), free(y), free(dx);
}

/* backward is the adjoint of forward: <forward(x), dy> == <x, backward(dy)> for random maps. */
static void test_random_adjoint(void **state) {
    (void)state;
    float *x = malloc(N * PER * sizeof(float)), *dy = malloc(N * PER * sizeof(float));
    float *y = malloc(N * PER * sizeof(float)), *dx = malloc(N * PER * sizeof(float));
    tu_fill(x, N * PER, 15);
    tu_fill(dy, N * PER, 16);
    const char *fills[] = {"reflect", "wrap", "nearest", "constant"};
    for (int kind = 1; kind < 4; kind++)
        for (int f = 0; f < 4; f++) {
            tnt_image_fill opt = {.fill_mode = fills[f], .fill_value = 0};
            tnt_layer *l = kind == 1   ? tnt_random_translation(-0.4f, 0.4f, -0.4f, 0.4f, &opt, 7, NULL)
                           : kind == 2 ? tnt_random_rotation(-0.5f, 0.5f, &opt, 7, NULL)
                                       : tnt_random_zoom(-0.5f, 0.8f, -0.2f, 0.9f, &opt, 7, NULL);
            assert_non_null(l);
            tnt_shape out;
            tu_ok(l->ops->build(l, TNT_SHAPE(H, W, C), &out));
            l->in_shape = l->out_shape = out;
            run_at(l, N, 0, x, y, dy, dx, true);
            double a = 0, b = 0;
            for (int i = 0; i < N * PER; i++) a += (double)y[i] * dy[i], b += (double)x[i] * dx[i];
            if (fabs(a - b) > 1e-3 * (fabs(a) + 1)) fail_msg("kind %d fill %s: <y, dy> %g, <x, dx> %g", kind, fills[f], a, b);
            tnt_layer_free(l);
        }
    free(x), free(dy), free(y), free(dx);
}

/* RandomContrast: each sample is (x - mean) * f + mean per channel for one f in [1 - lower,
 * 1 + upper], then clipped; RandomBrightness: x + delta, delta in [lower, upper] * range, clipped;
 * backward the adjoint where nothing clipped, and zero where the clip binds. */
static void test_random_color_formulas(void **state) {
    (void)state;
    float *x = malloc(N * PER * sizeof(float)), *dy = malloc(N * PER * sizeof(float));
    float *y = malloc(N * PER * sizeof(float)), *dx = malloc(N * PER * sizeof(float));
    tu_fill(x, N * PER, 21);
    tu_fill(dy, N * PER, 22);
    for (int i = 0; i < N * PER; i++) x[i] = 100.0f + 60.0f * x[i]; /* pixel-like values in [40, 160] */
    for (int clip = 0; clip < 2; clip++)
        for (int kind = 0; kind < 2; kind++) {
            float vmin = clip ? 50.0f : -1e4f, vmax = clip ? 150.0f : 1e4f;
            tnt_layer *l = kind == 0 ? tnt_random_contrast(0.6f, 0.9f, vmin, vmax, 0, NULL)
                                     : tnt_random_brightness(-0.3f, 0.4f, vmin, vmax, 0, NULL);
            assert_non_null(l);
            l->seed = 4;
            tnt_shape out;
            tu_ok(l->ops->build(l, TNT_SHAPE(H, W, C), &out));
            l->in_shape = l->out_shape = out;
            run_at(l, N, 0, x, y, dy, dx, true);
            double lo_seen = 1e9, hi_seen = -1e9;
            for (int s = 0; s < N; s++) {
                const float *xs = x + s * PER, *ys = y + s * PER;
                double mean[C] = {0};
                for (int i = 0; i < PER; i++) mean[i % C] += xs[i] / (double)(H * W);
                /* f (or delta) from the first value, then every value must follow it */
                double f = kind == 0 ? (ys[0] - mean[0]) / (xs[0] - mean[0]) : ys[0] - xs[0];
                if (clip) { /* recover it from a value that the clip left alone */
                    for (int i = 0; i < PER; i++)
                        if (ys[i] > vmin && ys[i] < vmax) {
                            f = kind == 0 ? (ys[i] - mean[i % C]) / (xs[i] - mean[i % C]) : ys[i] - xs[i];
                            break;
                        }
                }
                lo_seen = fmin(lo_seen, f), hi_seen = fmax(hi_seen, f);
                for (int i = 0; i < PER; i++) {
                    double v = kind == 0 ? (xs[i] - mean[i % C]) * f + mean[i % C] : xs[i] + f;
                    v = fmin(fmax(v, vmin), vmax);
                    if (fabs(ys[i] - v) > 1e-3 * (1 + fabs(v))) fail_msg("kind %d sample %d [%d]: %g, formula %g", kind, s, i, ys[i], v);
                    /* brightness: dy passes where the clip did not bind, else 0 */
                    double raw = xs[i] + f, want = raw < vmin || raw > vmax ? 0.0 : dy[s * PER + i];
                    if (kind == 1 && fabs(raw - vmin) > 1e-3 && fabs(raw - vmax) > 1e-3 && dx[s * PER + i] != want)
                        fail_msg("brightness sample %d [%d]: dx %g, expected %g", s, i, dx[s * PER + i], want);
                }
            }
            double rlo = kind == 0 ? 1 - 0.6 : -0.3 * (vmax - vmin), rhi = kind == 0 ? 1 + 0.9 : 0.4 * (vmax - vmin);
            assert_true(lo_seen >= rlo - 1e-4 && hi_seen <= rhi + 1e-4 && hi_seen - lo_seen > 0.2 * (rhi - rlo));
            if (!clip && kind == 0) { /* contrast is linear: backward is its adjoint */
                double ya = 0, xb = 0;
                for (int i = 0; i < N * PER; i++) ya += (double)y[i] * dy[i], xb += (double)x[i] * dx[i];
                if (fabs(ya - xb) > 1e-4 * (fabs(ya) + 1)) fail_msg("contrast: <y, dy> %g, <x, dx> %g", ya, xb);
            }
            tnt_layer_free(l);
        }
    free(x), free(dy), free(y), free(dx);
}

static void test_configs_round_trip(void **state) {
    (void)state;
    check_layer(TNT_SHAPE(8, 9, 3), tnt_resizing(4, 5, "nearest", true, "rs"), "Resizing",
                "\"crop_to_aspect_ratio\":true");
    check_layer(TNT_SHAPE(8, 9, 3), tnt_center_crop(4, 5, "cc"), "CenterCrop", "\"width\":5");
    check_layer(TNT_SHAPE(8, 9, 3), tnt_random_crop(4, 5, 77, "rc"), "RandomCrop", "\"seed\":77");
    check_layer(TNT_SHAPE(8, 9, 3), tnt_random_flip("vertical", 3, "fl"), "RandomFlip", "\"mode\":\"vertical\"");
    tnt_image_fill opt = {.fill_mode = "constant", .interpolation = "nearest", .fill_value = 0.5f};
    check_layer(TNT_SHAPE(8, 9, 3), tnt_random_translation(-0.1f, 0.2f, -0.3f, 0.3f, &opt, 0, "tr"),
                "RandomTranslation", "\"fill_mode\":\"constant\"");
    check_layer(TNT_SHAPE(8, 9, 3), tnt_random_rotation(-0.25f, 0.5f, NULL, 0, "ro"), "RandomRotation",
                "\"factor\":[-0.25,0.5]");
    check_layer(TNT_SHAPE(8, 9, 3), tnt_random_zoom(-0.25f, 0.5f, NAN, NAN, NULL, 0, "zo"), "RandomZoom",
                "\"width_factor\":null");
    check_layer(TNT_SHAPE(8, 9, 3), tnt_random_contrast(0.2f, 0.2f, 0, 255, 0, "co"), "RandomContrast",
                "\"factor\":[0.2,0.2]");
    check_layer(TNT_SHAPE(8, 9, 3), tnt_random_brightness(-0.1f, 0.3f, 0, 1, 0, "br"), "RandomBrightness",
                "\"value_range\":[0,1]");
    /* Keras's forms: a single factor f means (-f, f); Keras 3's tuple object */
    const char *from_keras = "{\"class_name\":\"RandomRotation\",\"config\":{\"name\":\"r\",\"factor\":0.25}}";
    tnt_model *m = seq_from_layer_json("[null, 8, 8, 3]", from_keras);
    assert_non_null(m);
    char *json = to_json(m);
    assert_non_null(strstr(json, "\"factor\":[-0.25,0.25]"));
    assert_non_null(strstr(json, "\"fill_mode\":\"reflect\""));
    free(json);
    tnt_model_free(m);
    /* as Keras 3 writes them: dtype policies, data_format, tuples as {"class_name": "__tuple__"} */
    const char *k3[] = {
        "{\"class_name\":\"RandomZoom\",\"config\":{\"name\":\"z\",\"trainable\":true,\"dtype\":{\"module\":"
        "\"keras\",\"class_name\":\"DTypePolicy\",\"config\":{\"name\":\"float32\"},\"registered_name\":null},"
        "\"height_factor\":{\"class_name\":\"__tuple__\",\"items\":[-0.2,0.3]},\"width_factor\":null,"
        "\"fill_mode\":\"reflect\",\"interpolation\":\"bilinear\",\"seed\":null,\"fill_value\":0.0,"
        "\"data_format\":\"channels_last\"}}",
        "{\"class_name\":\"Resizing\",\"config\":{\"name\":\"r\",\"trainable\":true,\"height\":4,\"width\":4,"
        "\"interpolation\":\"bilinear\",\"crop_to_aspect_ratio\":false,\"pad_to_aspect_ratio\":false,"
        "\"fill_mode\":\"constant\",\"fill_value\":0.0,\"antialias\":false,\"data_format\":\"channels_last\"}}",
        "{\"class_name\":\"RandomBrightness\",\"config\":{\"name\":\"b\",\"factor\":0.2,"
        "\"value_range\":[0,1],\"seed\":7,\"data_format\":\"channels_last\"}}",
    };
    const char *want[] = {"\"height_factor\":[-0.2,0.3]", "\"height\":4", "\"factor\":[-0.2,0.2]"};
    for (int i = 0; i < 3; i++) {
        m = seq_from_layer_json("[null, 8, 8, 3]", k3[i]);
        if (!m) fail_msg("Keras 3 config %d: %s", i, tnt_last_error());
        json = to_json(m);
        if (!strstr(json, want[i])) fail_msg("Keras 3 config %d read back as %s", i, json);
        free(json);
        tnt_model_free(m);
    }
    /* what this library does not run is refused by name */
    const char *pad = "{\"class_name\":\"Resizing\",\"config\":{\"name\":\"r\",\"height\":4,\"width\":4,"
                      "\"pad_to_aspect_ratio\":true}}";
    assert_null(seq_from_layer_json("[null, 8, 8, 3]", pad));
    tu_error_contains("pad_to_aspect_ratio");
}

static void test_bad_arguments(void **state) {
    (void)state;
    assert_null(tnt_resizing(0, 5, NULL, false, NULL));
    tu_error_contains("height 0");
    assert_null(tnt_resizing(4, 5, "bicubic", false, NULL));
    tu_error_contains("bicubic");
    assert_null(tnt_random_flip("diagonal", 0, NULL));
    tu_error_contains("diagonal");
    tnt_image_fill opt = {.fill_mode = "mirror"};
    assert_null(tnt_random_rotation(-0.1f, 0.1f, &opt, 0, NULL));
    tu_error_contains("mirror");
    assert_null(tnt_random_translation(-1.5f, 0.1f, 0, 0, NULL, 0, NULL));
    tu_error_contains("-1.5");
    assert_null(tnt_random_zoom(0.3f, 0.1f, NAN, NAN, NULL, 0, NULL));
    tu_error_contains("lower <= upper");
    tnt_layer *l = tnt_random_zoom(0.1f, 0.2f, NAN, NAN, NULL, 0, NULL);
    tnt_shape out;
    assert_int_equal(l->ops->build(l, TNT_SHAPE(8, 3), &out), TNT_ERR_SHAPE);
    tu_error_contains("(height, width, channels)");
    tnt_layer_free(l);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resizing_and_center_crop),
        cmocka_unit_test(test_random_affine_values),
        cmocka_unit_test(test_random_crop_training),
        cmocka_unit_test(test_random_inference_identity_and_split),
        cmocka_unit_test(test_random_flip_exact),
        cmocka_unit_test(test_random_adjoint),
        cmocka_unit_test(test_random_color_formulas),
        cmocka_unit_test(test_configs_round_trip),
        cmocka_unit_test(test_bad_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

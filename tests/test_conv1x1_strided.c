/* test_conv1x1_strided.c: strided 1x1 Conv2D / Conv1D (kernel 1, stride above 1, NHWC input) against
 * a reference in double: the output, the kernel and bias gradients and dx, several times in a row.
 * oneDNN 2.x's jit 1x1 backward-weights kernel writes past its reduce-to-unit-stride workspace when
 * there are fewer input channels than its block (8 on AVX2, 16 on AVX-512) and gives a wrong kernel
 * gradient that changes from run to run (oneDNN issue #6035); conv2d.c steers such layers away from
 * it. ctest also runs this program with the ISA capped at AVX2 (test_conv1x1_strided_avx2), both
 * with OMP_NUM_THREADS=2. */
#include "layer_harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/dnnl_util.h"
#include "layers/convolutional/conv2d.h"
#include "layers/layer.h"

typedef struct geometry {
    int n, h, w, c, filters, sh, sw;
} geometry;

/* The strided 1x1 convolution in double, NHWC, kernel (c, filters) (Keras HWIO with h = w = 1),
 * padding "valid" (for a 1x1 kernel "same" pads nothing either). */
static void reference(const geometry *g, int oh, int ow, const float *x, const float *k, const float *b,
                      const float *dy, double *y, double *dk, double *db, double *dx) {
    const int c = g->c, f = g->filters;
    memset(dk, 0, sizeof(double) * (size_t)c * f);
    memset(db, 0, sizeof(double) * (size_t)f);
    memset(dx, 0, sizeof(double) * (size_t)g->n * g->h * g->w * c);
    for (int n = 0; n < g->n; n++)
        for (int i = 0; i < oh; i++)
            for (int j = 0; j < ow; j++) {
                const float *xp = x + (((size_t)n * g->h + (size_t)i * g->sh) * g->w + (size_t)j * g->sw) * c;
                double *dxp = dx + (((size_t)n * g->h + (size_t)i * g->sh) * g->w + (size_t)j * g->sw) * c;
                const size_t o = (((size_t)n * oh + i) * ow + j) * f;
                for (int q = 0; q < f; q++) {
                    double s = b[q];
                    for (int ci = 0; ci < c; ci++) s += (double)xp[ci] * k[(size_t)ci * f + q];
                    y[o + q] = s;
                    db[q] += dy[o + q];
                    for (int ci = 0; ci < c; ci++) {
                        dk[(size_t)ci * f + q] += (double)xp[ci] * dy[o + q];
                        dxp[ci] += (double)k[(size_t)ci * f + q] * dy[o + q];
                    }
                }
            }
}

/* |got - ref| <= 1e-5 * (1 + |ref|) elementwise (sums of at most a few hundred products of values
 * in [-1, 1)), naming the first mismatch. */
static void expect_close(const float *got, const double *ref, int64_t n, const char *what, const geometry *g, int run) {
    for (int64_t i = 0; i < n; i++)
        if (!(fabs(got[i] - ref[i]) <= 1e-5 * (1.0 + fabs(ref[i]))))
            fail_msg("%s of a 1x1 conv, input %dx%dx%dx%d, %d filters, stride (%d, %d), run %d: element %lld is "
                     "%.7g, expected %.7g",
                     what, g->n, g->h, g->w, g->c, g->filters, g->sh, g->sw, run, (long long)i, got[i], ref[i]);
}

/* One layer: forward, then backward `runs` times (gradients poisoned before each), every result
 * against the reference. conv1d: the same as Conv1D (h must be 1, sh 1). */
static void check_geometry(geometry g, bool conv1d, int runs) {
    tnt_layer_opts o = {.strides = {conv1d ? g.sw : g.sh, g.sw}, .padding = TNT_PADDING_VALID};
    tnt_layer *l = conv1d ? tnt_conv1d(g.filters, 1, &o) : tnt_conv2d(g.filters, 1, 1, &o);
    drv d;
    drv_init(&d, l, conv1d ? TNT_SHAPE(g.w, g.c) : TNT_SHAPE(g.h, g.w, g.c), g.n);
    const int oh = (g.h - 1) / g.sh + 1, ow = (g.w - 1) / g.sw + 1;
    assert_int_equal(out_numel(&d), (int64_t)g.n * oh * ow * g.filters);
    float *k = l->weights[0].value, *b = l->weights[1].value;
    tu_fill(d.x, in_numel(&d), 11 + (uint64_t)g.c);
    tu_fill(k, (int64_t)g.c * g.filters, 12);
    tu_fill(b, g.filters, 13);
    tu_fill(d.dy, out_numel(&d), 14);
    double *y = malloc(sizeof(double) * (size_t)out_numel(&d)), *dk = malloc(sizeof(double) * (size_t)g.c * g.filters),
           *db = malloc(sizeof(double) * (size_t)g.filters), *dx = malloc(sizeof(double) * (size_t)in_numel(&d));
    reference(&g, oh, ow, d.x, k, b, d.dy, y, dk, db, dx);

    drv_forward(&d, false);
    expect_close(d.y, y, out_numel(&d), "output", &g, 0);
    for (int r = 0; r < runs; r++) {
        poison_grads(l);
        for (int64_t i = 0; i < in_numel(&d); i++) d.dx[i] = 1e6f;
        drv_backward(&d, true, false);
        expect_close(l->weights[0].grad, dk, (int64_t)g.c * g.filters, "kernel gradient", &g, r);
        expect_close(l->weights[1].grad, db, g.filters, "bias gradient", &g, r);
        expect_close(d.dx, dx, in_numel(&d), "dx", &g, r);
    }
    free(y), free(dk), free(db), free(dx);
    drv_free(&d, true);
}

/* The reported case (3x6x8x4, 9 filters, stride 2) and the other channel counts below the block. */
static void test_few_channels(void **state) {
    (void)state;
    static const int channels[] = {1, 3, 4, 7};
    for (size_t i = 0; i < TNT_ARRAY_LEN(channels); i++)
        check_geometry((geometry){3, 6, 8, channels[i], 9, 2, 2}, false, 8);
}

/* Strides in one axis only, stride 3, odd sizes, a larger image and batch (more work per thread). */
static void test_few_channels_other_shapes(void **state) {
    (void)state;
    static const geometry gs[] = {
        {3, 6, 8, 3, 9, 2, 1}, {3, 6, 8, 3, 9, 1, 2}, {2, 7, 9, 5, 4, 3, 3},
        {8, 16, 16, 3, 16, 2, 2}, {4, 32, 32, 4, 8, 2, 2}, {5, 9, 11, 2, 33, 2, 3},
    };
    for (size_t i = 0; i < TNT_ARRAY_LEN(gs); i++) check_geometry(gs[i], false, 4);
}

/* Channel counts at and above the block (8 and 16) and between: the unaffected and the edge cases. */
static void test_more_channels(void **state) {
    (void)state;
    static const int channels[] = {8, 9, 12, 15, 16, 17, 24, 32, 40, 64};
    for (size_t i = 0; i < TNT_ARRAY_LEN(channels); i++)
        check_geometry((geometry){3, 6, 8, channels[i], 9, 2, 2}, false, 3);
    check_geometry((geometry){2, 8, 8, 256, 64, 2, 2}, false, 2); /* ResNet's strided 1x1, small */
}

/* Conv1D with kernel 1 and stride 2 runs the same Conv2D plan (height 1). */
static void test_conv1d(void **state) {
    (void)state;
    static const int channels[] = {1, 3, 7, 16};
    for (size_t i = 0; i < TNT_ARRAY_LEN(channels); i++)
        check_geometry((geometry){4, 1, 20, channels[i], 9, 1, 2}, true, 4);
}

/* Which implementation the plan's backward-weights primitive runs, for a Conv2D of these sizes. */
static const char *bwd_weights_impl(geometry g, void **plan_out, tnt_layer **l_out) {
    tnt_layer_opts o = {.strides = {g.sh, g.sw}};
    tnt_layer *l = tnt_conv2d(g.filters, 1, 1, &o);
    assert_non_null(l);
    l->in_shape = TNT_SHAPE(g.h, g.w, g.c);
    tu_ok(l->ops->build(l, l->in_shape, &l->out_shape));
    void *plan = l->ops->plan_create(l, g.n);
    if (!plan) fail_msg("plan_create: %s", tnt_last_error());
    *plan_out = plan, *l_out = l;
    return tnt__conv_bwd_weights_impl(plan);
}

/* The affected layers avoid the jit 1x1 kernel for backward weights; the others keep oneDNN's
 * first choice (ResNet's strided 1x1 with 256 channels stays on jit_1x1 where oneDNN ranks it first). */
static void test_implementation_choice(void **state) {
    (void)state;
    void *plan;
    tnt_layer *l;
    const char *impl = bwd_weights_impl((geometry){3, 6, 8, 4, 9, 2, 2}, &plan, &l);
    printf("  3x6x8x4, stride 2, backward weights: %s\n", impl);
    assert_null(strstr(impl, "jit_1x1"));
    tnt__conv_plan_destroy(plan);
    tnt_layer_free(l);

    static const geometry kept[] = {{2, 8, 8, 256, 64, 2, 2}, {3, 6, 8, 4, 9, 1, 1}};
    for (size_t i = 0; i < TNT_ARRAY_LEN(kept); i++) {
        impl = bwd_weights_impl(kept[i], &plan, &l);
        /* oneDNN's own first choice for the same descriptors */
        tnt__conv_mds m;
        tu_ok(tnt__conv_mds_init(l->priv, kept[i].n, &m));
        dnnl_convolution_desc_t bw;
        assert_int_equal(dnnl_dilated_convolution_backward_weights_desc_init(&bw, dnnl_convolution_direct, &m.x, &m.w,
                                                                             &m.b, &m.y, m.strides, m.dil, m.pl, m.pr),
                         dnnl_success);
        tnt__prim fwd, first; /* created as the plan's: the forward primitive as the hint */
        tu_ok(tnt__conv_create_fwd(l, &m, &m.x, &m.w, false, &fwd));
        tu_ok(tnt__prim_create(&first, &bw, NULL, fwd.pd));
        const char *want = "";
        dnnl_primitive_desc_query(first.pd, dnnl_query_impl_info_str, 0, &want);
        printf("  %dx%dx%dx%d, stride %d, backward weights: %s (oneDNN's first: %s)\n", kept[i].n, kept[i].h,
               kept[i].w, kept[i].c, kept[i].sh, impl, want);
        assert_string_equal(impl, want);
        tnt__prim_destroy(&first);
        tnt__prim_destroy(&fwd);
        tnt__conv_plan_destroy(plan);
        tnt_layer_free(l);
    }
}

static int teardown(void **state) {
    (void)state;
    tnt__dnnl_shutdown();
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_few_channels),
        cmocka_unit_test(test_few_channels_other_shapes),
        cmocka_unit_test(test_more_channels),
        cmocka_unit_test(test_conv1d),
        cmocka_unit_test(test_implementation_choice),
    };
    return cmocka_run_group_tests(tests, NULL, teardown);
}

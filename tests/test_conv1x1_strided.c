/* test_conv1x1_strided.c: strided 1x1 Conv2D / Conv1D (kernel 1, stride above 1, NHWC input) against
 * a reference in double (Conv3D too): the output, the kernel and bias gradients and dx, several times
 * in a row.
 * oneDNN 2.x's jit 1x1 backward-weights kernel writes past its reduce-to-unit-stride workspace when
 * there are fewer input channels than its block (8 on AVX2, 16 on AVX-512) and gives a wrong kernel
 * gradient that changes from run to run (oneDNN issue #6035); conv2d.c steers such layers away from
 * it. ctest runs this program with OMP_NUM_THREADS=2, and with the ISA capped at AVX2 on 2 threads
 * (test_conv1x1_strided_avx2: wrong gradients without the workaround) and on 1 thread
 * (test_conv1x1_strided_avx2_1thread: heap corruption, valgrind's "0 bytes after" the scratchpad). */
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
    int d, sd; /* Conv3D's depth and its stride (0: a 2-D or 1-D layer) */
} geometry;

/* The strided 1x1 convolution in double, channels last (depth d, 1 for 2-D), kernel (c, filters)
 * (Keras's HWIO / DHWIO with 1x1 windows), padding "valid" (for a 1x1 kernel "same" pads nothing
 * either). */
static void reference(const geometry *g, int od, int oh, int ow, const float *x, const float *k, const float *b,
                      const float *dy, double *y, double *dk, double *db, double *dx) {
    const int c = g->c, f = g->filters;
    memset(dk, 0, sizeof(double) * (size_t)c * f);
    memset(db, 0, sizeof(double) * (size_t)f);
    memset(dx, 0, sizeof(double) * (size_t)g->n * g->d * g->h * g->w * c);
    size_t o = 0; /* the output pixel, in order */
    for (int n = 0; n < g->n; n++)
        for (int e = 0; e < od; e++)
            for (int i = 0; i < oh; i++)
                for (int j = 0; j < ow; j++, o += (size_t)f) {
                    const size_t in = ((((size_t)n * g->d + (size_t)e * g->sd) * g->h + (size_t)i * g->sh) * g->w +
                                       (size_t)j * g->sw) * c;
                    for (int q = 0; q < f; q++) {
                        double s = b[q];
                        for (int ci = 0; ci < c; ci++) s += (double)x[in + ci] * k[(size_t)ci * f + q];
                        y[o + q] = s;
                        db[q] += dy[o + q];
                        for (int ci = 0; ci < c; ci++) {
                            dk[(size_t)ci * f + q] += (double)x[in + ci] * dy[o + q];
                            dx[in + ci] += (double)k[(size_t)ci * f + q] * dy[o + q];
                        }
                    }
                }
}

/* |got - ref| <= 1e-5 * (1 + |ref|) elementwise (sums of at most a few hundred products of values
 * in [-1, 1)), naming the first mismatch. */
static void expect_close(const float *got, const double *ref, int64_t n, const char *what, const geometry *g, int run) {
    for (int64_t i = 0; i < n; i++)
        if (!(fabs(got[i] - ref[i]) <= 1e-5 * (1.0 + fabs(ref[i]))))
            fail_msg("%s of a 1x1 conv, input %dx%dx%dx%dx%d, %d filters, stride (%d, %d, %d), run %d: element %lld "
                     "is %.7g, expected %.7g",
                     what, g->n, g->d, g->h, g->w, g->c, g->filters, g->sd, g->sh, g->sw, run, (long long)i, got[i],
                     ref[i]);
}

typedef enum { CONV2D, CONV1D, CONV3D } conv_kind;

/* One layer: forward, then backward `runs` times (gradients poisoned before each), every result
 * against the reference. CONV1D: h must be 1 and sh 1; CONV3D: depth g.d, stride g.sd. */
static void check_geometry(geometry g, conv_kind kind, int runs) {
    if (kind != CONV3D) g.d = g.sd = 1;
    tnt_layer_opts o = {.padding = TNT_PADDING_VALID};
    tnt_layer *l;
    tnt_shape in;
    if (kind == CONV1D) {
        o.strides[0] = g.sw;
        l = tnt_conv1d(g.filters, 1, &o), in = TNT_SHAPE(g.w, g.c);
    } else if (kind == CONV3D) {
        o.strides[0] = g.sd, o.strides[1] = g.sh, o.strides[2] = g.sw;
        l = tnt_conv3d(g.filters, (const int[3]){1, 1, 1}, &o), in = TNT_SHAPE(g.d, g.h, g.w, g.c);
    } else {
        o.strides[0] = g.sh, o.strides[1] = g.sw;
        l = tnt_conv2d(g.filters, 1, 1, &o), in = TNT_SHAPE(g.h, g.w, g.c);
    }
    drv d;
    drv_init(&d, l, in, g.n);
    const int od = (g.d - 1) / g.sd + 1, oh = (g.h - 1) / g.sh + 1, ow = (g.w - 1) / g.sw + 1;
    assert_int_equal(out_numel(&d), (int64_t)g.n * od * oh * ow * g.filters);
    float *k = l->weights[0].value, *b = l->weights[1].value;
    tu_fill(d.x, in_numel(&d), 11 + (uint64_t)g.c);
    tu_fill(k, (int64_t)g.c * g.filters, 12);
    tu_fill(b, g.filters, 13);
    tu_fill(d.dy, out_numel(&d), 14);
    double *y = malloc(sizeof(double) * (size_t)out_numel(&d)), *dk = malloc(sizeof(double) * (size_t)g.c * g.filters),
           *db = malloc(sizeof(double) * (size_t)g.filters), *dx = malloc(sizeof(double) * (size_t)in_numel(&d));
    reference(&g, od, oh, ow, d.x, k, b, d.dy, y, dk, db, dx);

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
        check_geometry((geometry){3, 6, 8, channels[i], 9, 2, 2, 0, 0}, CONV2D, 8);
}

/* Strides in one axis only, stride 3, odd sizes, a larger image and batch (more work per thread). */
static void test_few_channels_other_shapes(void **state) {
    (void)state;
    static const geometry gs[] = {
        {3, 6, 8, 3, 9, 2, 1, 0, 0}, {3, 6, 8, 3, 9, 1, 2, 0, 0}, {2, 7, 9, 5, 4, 3, 3, 0, 0},
        {8, 16, 16, 3, 16, 2, 2, 0, 0}, {4, 32, 32, 4, 8, 2, 2, 0, 0}, {5, 9, 11, 2, 33, 2, 3, 0, 0},
    };
    for (size_t i = 0; i < TNT_ARRAY_LEN(gs); i++) check_geometry(gs[i], CONV2D, 4);
}

/* Channel counts at and above the block (8 and 16) and between: the unaffected and the edge cases. */
static void test_more_channels(void **state) {
    (void)state;
    static const int channels[] = {8, 9, 12, 15, 16, 17, 24, 32, 40, 64};
    for (size_t i = 0; i < TNT_ARRAY_LEN(channels); i++)
        check_geometry((geometry){3, 6, 8, channels[i], 9, 2, 2, 0, 0}, CONV2D, 3);
    check_geometry((geometry){2, 8, 8, 256, 64, 2, 2, 0, 0}, CONV2D, 2); /* ResNet's strided 1x1, small */
}

/* Conv1D with kernel 1 and stride 2 runs the same Conv2D plan (height 1). */
static void test_conv1d(void **state) {
    (void)state;
    static const int channels[] = {1, 3, 7, 16};
    for (size_t i = 0; i < TNT_ARRAY_LEN(channels); i++)
        check_geometry((geometry){4, 1, 20, channels[i], 9, 1, 2, 0, 0}, CONV1D, 4);
}

/* Conv3D (5-D descriptors on the same engine) with strides in depth, in the image, in both. */
static void test_conv3d(void **state) {
    (void)state;
    static const geometry gs[] = {
        {2, 6, 8, 3, 9, 2, 2, 4, 2}, {2, 6, 8, 4, 9, 2, 2, 5, 1},
        {2, 6, 8, 7, 9, 1, 1, 6, 2}, {2, 6, 8, 16, 9, 2, 2, 4, 2},
    };
    for (size_t i = 0; i < TNT_ARRAY_LEN(gs); i++) check_geometry(gs[i], CONV3D, 4);
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
    const char *impl = bwd_weights_impl((geometry){3, 6, 8, 4, 9, 2, 2, 0, 0}, &plan, &l);
    printf("  3x6x8x4, stride 2, backward weights: %s\n", impl);
    assert_null(strstr(impl, "jit_1x1"));
    tnt__conv_plan_destroy(plan);
    tnt_layer_free(l);

    static const geometry kept[] = {{2, 8, 8, 256, 64, 2, 2, 0, 0}, {3, 6, 8, 4, 9, 1, 1, 0, 0}};
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
        cmocka_unit_test(test_conv3d),
        cmocka_unit_test(test_implementation_choice),
    };
    return cmocka_run_group_tests(tests, NULL, teardown);
}

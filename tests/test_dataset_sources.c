/* test_dataset_sources.c: the dataset sources: arrays, IDX and NPY files (the tiny fixtures of
 * tests/fixtures/gen_data.py and the real Fashion-MNIST files), and the error message of each bad
 * or damaged file. The pipeline ops are in test_dataset_pipeline.c. */
#include "testutil.h"

#include "data/dataset.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define FMNIST "/usr/share/datasets/fashion-mnist/"
#define DATA "fixtures/data/"
#define SCALAR ((tnt_shape){.ndim = 0})

static void test_arrays(void **state) {
    (void)state;
    float x[12], y[4];
    for (int i = 0; i < 12; i++) x[i] = (float)i;
    for (int i = 0; i < 4; i++) y[i] = (float)(10 * i);
    for (int copy = 0; copy < 2; copy++) {
        tnt_dataset *ds = tnt_dataset_from_arrays(x, TNT_SHAPE(3), y, SCALAR, 4, copy);
        assert_non_null(ds);
        assert_int_equal(tnt_dataset_cardinality(ds), 4);
        assert_true(tnt_dataset_has_labels(ds));
        assert_false(tnt_dataset_is_batched(ds));
        assert_int_equal(tnt_dataset_x_shape(ds).ndim, 1);
        assert_int_equal(tnt_dataset_y_shape(ds).ndim, 0);
        tnt_dataset_iter *it = tnt_dataset_iter_new(ds, 0);
        tnt_batch b;
        for (int i = 0; i < 4; i++) {
            assert_int_equal(tnt_dataset_iter_next(it, &b), 1);
            assert_int_equal(b.n, 1);
            assert_int_equal(b.x.shape.ndim, 2);
            assert_int_equal(b.x.shape.dim[0], 1);
            assert_int_equal(b.x.shape.dim[1], 3);
            assert_int_equal(b.y.shape.ndim, 1);
            tu_assert_close(b.x.data, x + 3 * i, 3, 0, 0, "b.x.data");
            assert_true(b.y.data[0] == y[i]);
        }
        assert_int_equal(tnt_dataset_iter_next(it, &b), 0);
        tnt_dataset_iter_free(it);
        tnt_dataset_free(ds);
    }
    /* no labels */
    tnt_dataset *ds = tnt_dataset_batch(tnt_dataset_from_arrays(x, TNT_SHAPE(2, 2), NULL, SCALAR, 3, false), 2, false);
    assert_false(tnt_dataset_has_labels(ds));
    tnt_dataset_iter *it = tnt_dataset_iter_new(ds, 0);
    tnt_batch b;
    assert_int_equal(tnt_dataset_iter_next(it, &b), 1);
    assert_null(b.y.data);
    assert_int_equal(b.x.shape.ndim, 3);
    tu_assert_close(b.x.data, x, 8, 0, 0, "b.x.data");
    tnt_dataset_iter_free(it);
    tnt_dataset_free(ds);
    /* bad arguments */
    assert_null(tnt_dataset_from_arrays(x, SCALAR, NULL, SCALAR, -3, true));
    tu_error_contains("n -3");
    assert_null(tnt_dataset_from_arrays(NULL, SCALAR, NULL, SCALAR, 5, true));
    tu_error_contains("x is NULL");
    assert_null(tnt_dataset_from_arrays(x, TNT_SHAPE(2, -1), NULL, SCALAR, 1, true));
    tu_error_contains("(2, None)");
    assert_null(tnt_dataset_from_arrays(x, TNT_SHAPE(1, 1, 1, 1, 1, 1, 1, 1), NULL, SCALAR, 1, true));
    tu_error_contains("8 dimensions");
    assert_null(tnt_dataset_iter_new(NULL, 0));
    tu_error_contains("NULL");
}


static void check_idx_small(const char *images, const char *labels) {
    tnt_dataset *ds = tnt_dataset_from_idx(images, labels);
    if (!ds) fail_msg("%s", tnt_last_error());
    tnt_shape xs = tnt_dataset_x_shape(ds);
    assert_int_equal(xs.ndim, 3);
    assert_int_equal(xs.dim[0], 3), assert_int_equal(xs.dim[1], 2), assert_int_equal(xs.dim[2], 1);
    assert_int_equal(tnt_dataset_y_shape(ds).ndim, 0);
    assert_int_equal(tnt_dataset_cardinality(ds), 5);
    ds = tnt_dataset_batch(ds, 5, false);
    tnt_dataset_iter *it = tnt_dataset_iter_new(ds, 0);
    tnt_batch b;
    assert_int_equal(tnt_dataset_iter_next(it, &b), 1);
    assert_int_equal(b.x.shape.ndim, 4);
    assert_int_equal(b.y.shape.ndim, 1);
    for (int i = 0; i < 30; i++) assert_true(b.x.data[i] == (float)(i * 9 % 256));
    static const float lbl[] = {3, 1, 4, 1, 5};
    tu_assert_close(b.y.data, lbl, 5, 0, 0, "b.y.data");
    tnt_dataset_iter_free(it);
    tnt_dataset_free(ds);
}

static void test_idx(void **state) {
    (void)state;
    check_idx_small(DATA "img3.idx", DATA "lbl5.idx");
    check_idx_small(DATA "img3.idx.gz", DATA "lbl5.idx.gz");
    check_idx_small(DATA "img3.idx", DATA "lbl5.idx.gz");
    tnt_dataset *ds = tnt_dataset_from_idx(DATA "img2d.idx", NULL); /* 2-D: no channel axis */
    assert_non_null(ds);
    assert_false(tnt_dataset_has_labels(ds));
    assert_int_equal(tnt_dataset_x_shape(ds).ndim, 1);
    assert_int_equal(tnt_dataset_x_shape(ds).dim[0], 3);
    assert_int_equal(tnt_dataset_cardinality(ds), 4);
    tnt_dataset_free(ds);
}

static void test_idx_errors(void **state) {
    (void)state;
    assert_null(tnt_dataset_from_idx(DATA "nope.idx.gz", DATA "lbl5.idx"));
    tu_error_contains("\"" DATA "nope.idx.gz\": No such file");
    assert_null(tnt_dataset_from_idx(DATA "img3.idx", DATA "missing-labels"));
    tu_error_contains("missing-labels");
    assert_null(tnt_dataset_from_idx(DATA "img3.idx", DATA "img3.idx.gz"));
    tu_error_contains("idx: \"" DATA "img3.idx.gz\": bad magic 0x00000803 (expected labels 0x00000801)");
    assert_null(tnt_dataset_from_idx(DATA "lbl5.idx", NULL));
    tu_error_contains("bad magic 0x00000801 (expected images 0x00000803");
    assert_null(tnt_dataset_from_idx(DATA "x_f4_v1.npy", NULL));
    tu_error_contains("bad magic 0x934e554d");
    assert_null(tnt_dataset_from_idx(DATA "img3_trunc.idx", DATA "lbl5.idx"));
    tu_error_contains("truncated: expected 30 data bytes, got 20");
    assert_null(tnt_dataset_from_idx(DATA "img3_trunc.idx.gz", NULL));
    tu_error_contains("img3_trunc.idx.gz\": truncated: expected 30 data bytes, got 20");
    assert_null(tnt_dataset_from_idx(DATA "short_header.idx", NULL));
    tu_error_contains("truncated header (2 of 4 bytes)");
    assert_null(tnt_dataset_from_idx(DATA "img3.idx", DATA "lbl4.idx"));
    tu_error_contains("have 5 samples but labels \"" DATA "lbl4.idx\" have 4");
    assert_null(tnt_dataset_from_idx(NULL, NULL));
    tu_error_contains("images_path is NULL");
    assert_null(tnt_dataset_from_idx("fixtures", NULL));
    tu_error_contains("\"fixtures\": Is a directory");
}

static tnt_dataset *npy_or_fail(const char *x, const char *y) {
    tnt_dataset *ds = tnt_dataset_from_npy(x, y);
    if (!ds) fail_msg("%s", tnt_last_error());
    return ds;
}

/* All samples of ds (consumed) in one batch: x into xs (cap values), y into ys. */
static void first_batch(tnt_dataset *ds, float *xs, int64_t cap, float *ys) {
    int64_t xn = tnt_shape_numel(tnt_dataset_x_shape(ds)), n = tnt_dataset_cardinality(ds);
    ds = tnt_dataset_batch(ds, n, false);
    tnt_dataset_iter *it = tnt_dataset_iter_new(ds, 0);
    tnt_batch b;
    assert_int_equal(tnt_dataset_iter_next(it, &b), 1);
    assert_true(n * xn <= cap);
    memcpy(xs, b.x.data, (size_t)(n * xn) * sizeof(float));
    if (ys) memcpy(ys, b.y.data, (size_t)n * sizeof(float));
    tnt_dataset_iter_free(it);
    tnt_dataset_free(ds);
}

static void test_npy(void **state) {
    (void)state;
    static const struct { const char *file; int kind; } files[] = {
        {"x_f4_v1.npy", 0}, {"x_f8_v2.npy", 0}, {"x_i1_v3.npy", 1}, {"x_i2_v1.npy", 1},
        {"x_i4_v2.npy", 1}, {"x_i8_v1.npy", 1}, {"x_u1_v1.npy", 2}, {"x_u2_v3.npy", 2},
        {"x_u4_v1.npy", 2}, {"x_u8_v2.npy", 2}, {"x_b1_v1.npy", 3},
    };
    for (size_t f = 0; f < TNT_ARRAY_LEN(files); f++) {
        char path[128];
        snprintf(path, sizeof path, DATA "%s", files[f].file);
        tnt_dataset *ds = npy_or_fail(path, DATA "y_i8.npy");
        tnt_shape xs = tnt_dataset_x_shape(ds);
        assert_int_equal(xs.ndim, 2);
        assert_int_equal(xs.dim[0], 2), assert_int_equal(xs.dim[1], 3);
        assert_int_equal(tnt_dataset_y_shape(ds).ndim, 0);
        assert_int_equal(tnt_dataset_cardinality(ds), 4);
        float x[24], y[4], want[24];
        first_batch(ds, x, 24, y);
        for (int i = 0; i < 24; i++)
            want[i] = files[f].kind == 0 ? i * 0.5f - 3 : files[f].kind == 1 ? i - 12.0f
                    : files[f].kind == 2 ? 3.0f * i : (i % 3 == 0);
        for (int i = 0; i < 24; i++)
            if (x[i] != want[i]) fail_msg("%s[%d]: %g != %g", files[f].file, i, x[i], want[i]);
        for (int i = 0; i < 4; i++) assert_true(y[i] == 7.0f + i);
    }
    tnt_dataset *ds = npy_or_fail(DATA "y_i8.npy", NULL); /* 1-D: scalar samples, no labels */
    assert_int_equal(tnt_dataset_x_shape(ds).ndim, 0);
    assert_false(tnt_dataset_has_labels(ds));
    tnt_dataset_free(ds);
}

static void test_npy_errors(void **state) {
    (void)state;
    assert_null(tnt_dataset_from_npy(DATA "absent.npy", NULL));
    tu_error_contains("npy: \"" DATA "absent.npy\": No such file");
    assert_null(tnt_dataset_from_npy(DATA "x_fortran.npy", NULL));
    tu_error_contains("x_fortran.npy\": fortran_order True is not supported");
    assert_null(tnt_dataset_from_npy(DATA "x_c8.npy", NULL));
    tu_error_contains("unsupported dtype '<c8'");
    assert_null(tnt_dataset_from_npy(DATA "x_be_f4.npy", NULL));
    tu_error_contains("unsupported dtype '>f4'");
    assert_null(tnt_dataset_from_npy(DATA "x_struct.npy", NULL));
    tu_error_contains("structured arrays are not supported");
    assert_null(tnt_dataset_from_npy(DATA "x_trunc.npy", NULL));
    tu_error_contains("truncated: expected 96 data bytes, file has 86");
    assert_null(tnt_dataset_from_npy(DATA "x_version9.npy", NULL));
    tu_error_contains("version 9.0 (expected 1.0, 2.0 or 3.0)");
    assert_null(tnt_dataset_from_npy(DATA "img3.idx", NULL));
    tu_error_contains("img3.idx\": bad magic");
    assert_null(tnt_dataset_from_npy(DATA "short_header.idx", NULL));
    tu_error_contains("2 bytes is too short");
    assert_null(tnt_dataset_from_npy(DATA "x_f4_v1.npy", DATA "y_3.npy"));
    tu_error_contains("has 4 samples but y \"" DATA "y_3.npy\" has 3");
    assert_null(tnt_dataset_from_npy(DATA "x_f4_v1.npy", DATA "x_c8.npy"));
    tu_error_contains("x_c8.npy");
    assert_null(tnt_dataset_from_npy("fixtures", NULL));
    tu_error_contains("\"fixtures\": Is a directory");
    assert_null(tnt_dataset_from_npy(NULL, NULL));
    tu_error_contains("x_path is NULL");
}

/* Every prefix of a file, and the header with bytes changed, loads or fails with a message
 * naming the file: never a crash (this test earns its keep under ASan). */
static void test_damaged_files(void **state) {
    (void)state;
    static const char *files[] = {DATA "x_f8_v2.npy", DATA "img3.idx", DATA "img3.idx.gz"};
    char tmp[] = "/tmp/tnt_dataset_XXXXXX";
    int fd = mkstemp(tmp);
    assert_true(fd >= 0);
    close(fd);
    for (size_t f = 0; f < TNT_ARRAY_LEN(files); f++) {
        bool npy = strstr(files[f], ".npy") != NULL;
        FILE *in = fopen(files[f], "rb");
        assert_non_null(in);
        unsigned char buf[512];
        size_t len = fread(buf, 1, sizeof buf, in);
        fclose(in);
        for (size_t cut = 0; cut <= len + 400; cut++) {
            /* cut < len: a prefix; beyond: byte (cut - len) % 128 of the header changed */
            unsigned char copy[512];
            memcpy(copy, buf, len);
            size_t n = cut < len ? cut : len;
            if (cut > len) copy[(cut - len) % 128 % len] ^= (unsigned char)(1u << (cut % 8));
            FILE *out = fopen(tmp, "wb");
            assert_non_null(out);
            fwrite(copy, 1, n, out);
            fclose(out);
            tnt__error_clear();
            tnt_dataset *ds = npy ? tnt_dataset_from_npy(tmp, NULL) : tnt_dataset_from_idx(tmp, NULL);
            if (ds && cut < len) fail_msg("%s cut to %zu of %zu bytes loaded", files[f], cut, len);
            if (ds) { /* whatever loaded must iterate */
                tnt_dataset_iter *it = tnt_dataset_iter_new(ds, 0);
                tnt_batch b;
                assert_non_null(it);
                while (tnt_dataset_iter_next(it, &b) == 1) continue;
                tnt_dataset_iter_free(it);
                tnt_dataset_free(ds);
            } else {
                tu_error_contains(tmp);
            }
        }
    }
    remove(tmp);
}

static void test_fashion_mnist(void **state) {
    (void)state;
    FILE *f = fopen(FMNIST "train-images-idx3-ubyte.gz", "rb");
    if (!f) skip();
    fclose(f);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    tnt_dataset *train = tnt_dataset_from_idx(FMNIST "train-images-idx3-ubyte.gz", FMNIST "train-labels-idx1-ubyte.gz");
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (!train) fail_msg("%s", tnt_last_error());
    tnt_dataset *test = tnt_dataset_from_idx(FMNIST "t10k-images-idx3-ubyte.gz", FMNIST "t10k-labels-idx1-ubyte.gz");
    if (!test) fail_msg("%s", tnt_last_error());
    assert_int_equal(tnt_dataset_cardinality(train), 60000);
    assert_int_equal(tnt_dataset_cardinality(test), 10000);
    tnt_shape xs = tnt_dataset_x_shape(train);
    assert_int_equal(xs.ndim, 3);
    assert_int_equal(xs.dim[0], 28), assert_int_equal(xs.dim[1], 28), assert_int_equal(xs.dim[2], 1);
    /* first labels and image as Python reads them (gen_data.py) */
    static float want[784], x32[32 * 784], y32[32];
    first_batch(npy_or_fail(DATA "fmnist_train_labels_head.npy", NULL), want, 32, NULL);
    first_batch(tnt_dataset_take(train, 32), x32, 32 * 784, y32);
    tu_assert_close(y32, want, 32, 0, 0, "y32");
    first_batch(npy_or_fail(DATA "fmnist_train_image0.npy", NULL), want, 784, NULL);
    tu_assert_close(x32, want, 784, 0, 0, "x32");
    first_batch(npy_or_fail(DATA "fmnist_t10k_labels_head.npy", NULL), want, 32, NULL);
    first_batch(tnt_dataset_take(test, 32), x32, 32 * 784, y32);
    tu_assert_close(y32, want, 32, 0, 0, "y32");
    /* a shuffled epoch in batches of 64 (with prefetch) sees every label once */
    float sum_ref[1];
    first_batch(npy_or_fail(DATA "fmnist_train_label_sum.npy", NULL), sum_ref, 1, NULL);
    tnt_dataset *ds = tnt_dataset_prefetch(
        tnt_dataset_batch(tnt_dataset_shuffle(tnt_dataset_from_idx(FMNIST "train-images-idx3-ubyte.gz",
                                                                   FMNIST "train-labels-idx1-ubyte.gz"),
                                              60000, 42),
                          64, false),
        2);
    assert_int_equal(tnt_dataset_cardinality(ds), 938);
    struct timespec t2, t3;
    clock_gettime(CLOCK_MONOTONIC, &t2);
    tnt_dataset_iter *it = tnt_dataset_iter_new(ds, 1);
    tnt_batch b;
    double sum = 0;
    int64_t n = 0;
    int r;
    while ((r = tnt_dataset_iter_next(it, &b)) == 1) {
        for (int64_t i = 0; i < b.n; i++) sum += b.y.data[i];
        n += b.n;
    }
    assert_int_equal(r, 0);
    clock_gettime(CLOCK_MONOTONIC, &t3);
    tnt_dataset_iter_free(it);
    tnt_dataset_free(ds);
    assert_int_equal(n, 60000);
    assert_true(sum == sum_ref[0]);
    printf("fashion-mnist: load %.3f s, one epoch of 938 batches of 64 %.3f s\n",
           (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec),
           (double)(t3.tv_sec - t2.tv_sec) + 1e-9 * (double)(t3.tv_nsec - t2.tv_nsec));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_arrays),
        cmocka_unit_test(test_idx),
        cmocka_unit_test(test_idx_errors),
        cmocka_unit_test(test_npy),
        cmocka_unit_test(test_npy_errors),
        cmocka_unit_test(test_damaged_files),
        cmocka_unit_test(test_fashion_mnist),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* test_dataset_hostile.c: IDX and NPY files that declare more than they hold (terabytes in 116
 * bytes, 2G-value samples of an empty array), hold more than they declare (trailing junk, plain
 * and gzip) or no samples at all fail fast, with little memory and a message naming the file and
 * the sizes; the same file without the junk loads. */
#include "testutil.h"

#include "core/core.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>
#include <zlib.h>

/* Writes n bytes to a new temp file; its name goes to path (PATH_MAX). */
static void write_temp(char *path, const void *bytes, size_t n) {
    strcpy(path, "/tmp/tnt_hostile_XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, bytes, n), (ssize_t)n);
    close(fd);
}

/* Loads path, which must fail fast (well under a second, little memory) naming needle. */
static void expect_fast_failure(const char *path, bool npy, const char *needle) {
    struct rusage r0, r1;
    getrusage(RUSAGE_SELF, &r0);
    double t0 = tnt__now();
    tnt_dataset *ds = npy ? tnt_dataset_from_npy(path, NULL) : tnt_dataset_from_idx(path, NULL);
    double dt = tnt__now() - t0;
    getrusage(RUSAGE_SELF, &r1);
    if (ds) fail_msg("%s loaded", path);
    tu_error_contains(path);
    tu_error_contains(needle);
    if (dt > 0.2) fail_msg("%s: %.3f s to fail", path, dt);
    if (r1.ru_maxrss - r0.ru_maxrss > 64 * 1024) fail_msg("%s: peak memory grew by %ld KB", path, r1.ru_maxrss - r0.ru_maxrss);
}

/* Tiny files that declare huge arrays, no samples or more data than they declare. */
static void test_hostile_sizes(void **state) {
    (void)state;
    char path[PATH_MAX];
    /* IDX: 60000 images of 46341 x 46341 (2^40 bytes of data) in 116 bytes */
    unsigned char idx[16 + 100] = {0, 0, 8, 3, 0, 0, 0xea, 0x60, 0, 0, 0xb5, 0x05, 0, 0, 0xb5, 0x05};
    write_temp(path, idx, sizeof idx);
    expect_fast_failure(path, false, "too large");
    remove(path);
    idx[6] = 0, idx[7] = 1, idx[10] = 0x80, idx[11] = 0, idx[14] = 0x80, idx[15] = 0; /* 1 x 32768 x 32768 */
    write_temp(path, idx, sizeof idx);
    expect_fast_failure(path, false, "truncated: expected 1073741824 data bytes, got 100");
    remove(path);
    idx[7] = 0; /* 0 samples of 2^30 values: nothing would bound a batch of them */
    write_temp(path, idx, 16);
    expect_fast_failure(path, false, "declares 0 samples");
    remove(path);
    /* 201,328,643 samples of 0 x 32768 in 16 bytes (found by fuzz_idx): an epoch of empty samples
     * that never ends; the sample shape names the dimension */
    unsigned char empty[16] = {0, 0, 8, 3, 0x0c, 0, 8, 3, 0, 0, 0, 0, 0, 0, 0x80, 0};
    write_temp(path, empty, sizeof empty);
    expect_fast_failure(path, false, "dimension 1 of the sample shape has size 0");
    remove(path);
    /* trailing junk: img3.idx (5 x 3 x 2) with 7 bytes more */
    unsigned char img3[16 + 30 + 7] = {0, 0, 8, 3, 0, 0, 0, 5, 0, 0, 0, 3, 0, 0, 0, 2};
    write_temp(path, img3, sizeof img3);
    expect_fast_failure(path, false, "7 bytes of trailing junk after the 30 data bytes");
    remove(path);
    write_temp(path, img3, sizeof img3 - 7); /* the same without them loads */
    tnt_dataset *ds = tnt_dataset_from_idx(path, NULL);
    assert_non_null(ds);
    assert_int_equal(tnt_dataset_cardinality(ds), 5);
    tnt_dataset_free(ds);
    remove(path);
    /* ... and compressed: gzip of the header, 30 data bytes and one more */
    strcpy(path, "/tmp/tnt_hostile_XXXXXX.gz");
    int fd = mkstemps(path, 3);
    assert_true(fd >= 0);
    gzFile gz = gzdopen(fd, "wb");
    assert_int_equal(gzwrite(gz, img3, 16 + 31), 16 + 31);
    gzclose(gz);
    expect_fast_failure(path, false, "trailing junk after the 30 data bytes");
    remove(path);

    /* NPY: 0 samples of 2^31 - 1 float32 values each (an 80-byte file) */
    char npy[128] = "\x93NUMPY\x01\x00\x76\x00{'descr': '<f4', 'fortran_order': False, 'shape': (0, 2147483647), }";
    size_t hl = strlen(npy + 10);
    memset(npy + 10 + hl, ' ', 128 - 10 - hl - 1);
    npy[127] = '\n';
    write_temp(path, npy, sizeof npy);
    expect_fast_failure(path, true, "shape has 0 samples");
    remove(path);
    memcpy(strstr(npy + 10, "(0, "), "(9, ", 4); /* 9 such samples: 77 GB declared, none there */
    write_temp(path, npy, sizeof npy);
    expect_fast_failure(path, true, "truncated: expected 77309411292 data bytes, file has 0");
    remove(path);
    char zero[128 + 1] = {0}; /* 9 samples of 0 x 7 (no data): no values to train on, refused */
    memcpy(zero, npy, 128);
    memcpy(strstr(zero + 10, "(9, 2147483647)"), "(9, 0, 7)      ", 15);
    write_temp(path, zero, 128);
    expect_fast_failure(path, true, "dimension 1 of the shape has size 0");
    remove(path);
    char junk[128 + 16] = {0}; /* shape (3,): 12 data bytes, then 4 more */
    memcpy(junk, npy, 128);
    memcpy(strstr(junk + 10, "(9, 2147483647)"), "(3,)           ", 15);
    write_temp(path, junk, sizeof junk);
    expect_fast_failure(path, true, "4 bytes of trailing junk after the 12 data bytes");
    remove(path);
}

/* Arrays: a sample shape with a 0 dimension is refused naming the dimension (x and y alike). */
static void test_zero_sample_dimension(void **state) {
    (void)state;
    float x[4] = {0}, y[2] = {0};
    assert_null(tnt_dataset_from_arrays(x, TNT_SHAPE(2, 0), y, TNT_SHAPE(1), 2, false));
    tu_error_contains("x_shape (2, 0) has dimension 1 of size 0 (expected >= 1)");
    assert_null(tnt_dataset_from_arrays(x, TNT_SHAPE(2), y, TNT_SHAPE(0), 2, true));
    tu_error_contains("y_shape (0,) has dimension 0 of size 0");
    tnt_dataset *ds = tnt_dataset_from_arrays(x, TNT_SHAPE(2), y, TNT_SHAPE(1), 2, true);
    assert_non_null(ds);
    tnt_dataset_free(ds);
}

int main(void) {
    tnt_init(NULL, NULL);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hostile_sizes),
        cmocka_unit_test(test_zero_sample_dimension),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    tnt_finalize();
    return rc;
}

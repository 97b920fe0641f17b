/* test_dataset_padded.c: tf.data's padded_batch in the C pipeline (src/data/padded.c): samples of
 * different lengths stored padded to a common shape with their extents; each batch padded to its
 * own longest sample (tf.data's rule for None dimensions) or to a fixed size with a fill value;
 * every rank's share has the shape of the whole global batch; bad extents, shapes and maps
 * refused with the value named. Expected batches are written out by hand from the rule. */
#include "testutil.h"

#include "data/dataset.h"

#include <stdlib.h>
#include <string.h>

#define N 5
#define LONGEST 4
/* sample i: (len_i, 2) values 10 * (i + 1) + position, labels (len_i,) = i + 1 */
static const int32_t LEN[N] = {2, 4, 1, 3, 2};

static tnt_dataset *sequences(void) {
    float x[N * LONGEST * 2] = {0}, y[N * LONGEST] = {0};
    int32_t xe[N * 2], ye[N];
    for (int i = 0; i < N; i++) {
        for (int t = 0; t < LEN[i]; t++) {
            x[(i * LONGEST + t) * 2] = x[(i * LONGEST + t) * 2 + 1] = (float)(10 * (i + 1) + t);
            y[i * LONGEST + t] = (float)(i + 1);
        }
        xe[2 * i] = LEN[i], xe[2 * i + 1] = 2, ye[i] = LEN[i];
    }
    tnt_dataset *ds = tnt_dataset_from_arrays(x, TNT_SHAPE(LONGEST, 2), y, TNT_SHAPE(LONGEST), N, true);
    assert_non_null(ds);
    tu_ok(tnt_dataset_set_extents(ds, xe, ye));
    return ds;
}

/* x of a batch of samples [first, first + n) padded to length t with fill */
static void expect_batch(const tnt_batch *b, int first, int n, int t, float fill) {
    assert_int_equal(b->n, n);
    assert_int_equal(b->x.shape.ndim, 3);
    assert_int_equal(b->x.shape.dim[1], t);
    assert_int_equal(b->y.shape.dim[1], t);
    for (int i = 0; i < n; i++)
        for (int s = 0; s < t; s++) {
            int k = first + i;
            float want = s < LEN[k] ? (float)(10 * (k + 1) + s) : fill;
            assert_float_equal(b->x.data[(i * t + s) * 2 + 1], want, 0);
            assert_float_equal(b->y.data[i * t + s], s < LEN[k] ? (float)(k + 1) : fill, 0);
        }
}

static void test_each_batch_its_own_longest(void **state) {
    (void)state;
    tnt_dataset *ds = tnt_dataset_padded_batch(sequences(), 2, false, NULL, NULL, 0, 0);
    assert_non_null(ds);
    assert_int_equal(tnt_dataset_x_shape(ds).dim[0], LONGEST); /* the declared shape: the largest */
    tnt_dataset_iter *it = tnt_dataset_iter_new(ds, 0);
    tnt_batch b;
    assert_int_equal(tnt_dataset_iter_next(it, &b), 1);
    expect_batch(&b, 0, 2, 4, 0);
    assert_int_equal(tnt_dataset_iter_next(it, &b), 1);
    expect_batch(&b, 2, 2, 3, 0);
    assert_int_equal(tnt_dataset_iter_next(it, &b), 1);
    expect_batch(&b, 4, 1, 2, 0);
    assert_int_equal(tnt_dataset_iter_next(it, &b), 0);
    tnt_dataset_iter_free(it);
    tnt_dataset_free(ds);
}

static void test_fixed_size_and_fill(void **state) {
    (void)state;
    tnt_shape px = {.ndim = 2, .dim = {6, -1}}, py = {.ndim = 1, .dim = {6}};
    tnt_dataset *ds = tnt_dataset_prefetch(tnt_dataset_padded_batch(sequences(), 3, true, &px, &py, -1, -1), 2);
    assert_non_null(ds);
    assert_int_equal(tnt_dataset_cardinality(ds), 1);
    tnt_dataset_iter *it = tnt_dataset_iter_new(ds, 0);
    tnt_batch b;
    assert_int_equal(tnt_dataset_iter_next(it, &b), 1);
    expect_batch(&b, 0, 3, 6, -1);
    assert_int_equal(tnt_dataset_iter_next(it, &b), 0); /* drop_remainder */
    tnt_dataset_iter_free(it);
    tnt_dataset_free(ds);
}

static void test_shares_have_the_global_batch_shape(void **state) {
    (void)state;
    tnt_dataset *ds = tnt_dataset_padded_batch(sequences(), 4, false, NULL, NULL, 0, 0);
    for (int p = 0; p < 3; p++) { /* 4 samples on 3 ranks: shares of 2, 1, 1; the longest (4) is in the first */
        tnt_dataset_iter *it = tnt_dataset_iter_new(ds, 0);
        tnt_batch b;
        int64_t global_n;
        assert_int_equal(tnt__dataset_iter_next_part(it, p, 3, &b, &global_n), 1);
        assert_int_equal(global_n, 4);
        expect_batch(&b, p == 0 ? 0 : p + 1, p == 0 ? 2 : 1, 4, 0);
        tnt_dataset_iter_free(it);
    }
    tnt_dataset_free(ds);
}

static void test_refusals(void **state) {
    (void)state;
    tnt_shape small = {.ndim = 2, .dim = {3, 2}};
    tnt_dataset *ds = tnt_dataset_padded_batch(sequences(), 2, false, &small, NULL, 0, 0);
    tnt_dataset_iter *it = tnt_dataset_iter_new(ds, 0);
    tnt_batch b;
    assert_true(tnt_dataset_iter_next(it, &b) < 0); /* sample 1 has 4 values on axis 0 */
    tu_error_contains("4 values on axis 0, more than the padded shape's 3");
    tnt_dataset_iter_free(it);
    tnt_dataset_free(ds);
    tnt_shape wrong = {.ndim = 1, .dim = {4}};
    assert_null(tnt_dataset_padded_batch(sequences(), 2, false, &wrong, NULL, 0, 0));
    tu_error_contains("has 1 dimensions");
    int32_t bad[N * 2] = {5, 2};
    tnt_dataset *src = sequences();
    assert_int_equal(tnt_dataset_set_extents(src, bad, NULL), TNT_ERR_ARG);
    tu_error_contains("x extent 5 of sample 0, axis 0 (expected 0..4)");
    tnt_dataset_free(src);
}

static int copy_fn(const float *xi, const float *yi, float *xo, float *yo, void *user) {
    (void)xi, (void)yi, (void)xo, (void)yo, (void)user;
    return 0;
}

static void test_maps_refused(void **state) {
    (void)state;
    assert_null(tnt_dataset_padded_batch(tnt_dataset_map(sequences(), copy_fn, NULL, NULL, NULL), 2, false, NULL,
                                         NULL, 0, 0));
    tu_error_contains("padded_batch: a map before it");
    assert_null(tnt_dataset_map(tnt_dataset_padded_batch(sequences(), 2, false, NULL, NULL, 0, 0), copy_fn, NULL, NULL,
                                NULL));
    tu_error_contains("map: after padded_batch");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_each_batch_its_own_longest),
        cmocka_unit_test(test_fixed_size_and_fill),
        cmocka_unit_test(test_shares_have_the_global_batch_shape),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_maps_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

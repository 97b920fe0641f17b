/* test_dataset_pipeline.c: the dataset pipeline ops on array sources: shuffle against a Python
 * reference (tests/fixtures/gen_data.py), batch, map, repeat, take, skip, prefetch, per-rank
 * shares (next_part), and the error message of each bad argument. The sources are in
 * test_dataset_sources.c. */
#include "testutil.h"

#include "data/dataset.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DATA "fixtures/data/"
#define SCALAR ((tnt_shape){.ndim = 0})

/* n scalar samples: x = i, y = 100 + i. */
static tnt_dataset *range_ds(int64_t n) {
    float *x = malloc((size_t)(n ? n : 1) * sizeof(float)), *y = malloc((size_t)(n ? n : 1) * sizeof(float));
    for (int64_t i = 0; i < n; i++) x[i] = (float)i, y[i] = 100.0f + (float)i;
    tnt_dataset *ds = tnt_dataset_from_arrays(x, SCALAR, y, SCALAR, n, true);
    free(x), free(y);
    assert_non_null(ds);
    return ds;
}

/* One iteration: the first x value of every sample into out, the size of each element into
 * sizes (may be NULL). Checks that y = 100 + x when the dataset has labels. Returns the count of
 * samples; *nelem the count of elements. */
static int64_t collect(tnt_dataset *ds, int64_t epoch, float *out, int64_t cap, int64_t *sizes,
                       int64_t *nelem) {
    tnt_dataset_iter *it = tnt_dataset_iter_new(ds, epoch);
    if (!it) fail_msg("iter_new: %s", tnt_last_error());
    int64_t total = 0, k = 0, xn = tnt_shape_numel(tnt_dataset_x_shape(ds));
    tnt_batch b;
    int r;
    while ((r = tnt_dataset_iter_next(it, &b)) == 1) {
        assert_int_equal(b.x.shape.dim[0], b.n);
        if (sizes) sizes[k] = b.n;
        k++;
        for (int64_t i = 0; i < b.n; i++) {
            if (total >= cap) fail_msg("more than %lld samples", (long long)cap);
            out[total++] = b.x.data[i * xn];
        }
    }
    if (r < 0) fail_msg("iter_next: %s", tnt_last_error());
    assert_int_equal(tnt_dataset_iter_next(it, &b), 0); /* the end repeats */
    tnt_dataset_iter_free(it);
    if (nelem) *nelem = k;
    return total;
}

static void assert_floats(const float *a, const float *b, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        if (a[i] != b[i]) fail_msg("index %lld: %g != %g", (long long)i, a[i], b[i]);
}

static bool is_permutation(const float *v, int64_t n) {
    bool *seen = calloc((size_t)n, 1), ok = true;
    for (int64_t i = 0; i < n && ok; i++) {
        int64_t k = (int64_t)v[i];
        ok = k >= 0 && k < n && !seen[k];
        if (ok) seen[k] = true;
    }
    free(seen);
    return ok;
}

static void test_batch(void **state) {
    (void)state;
    float v[16];
    int64_t sizes[8], nelem;
    tnt_dataset *ds = tnt_dataset_batch(range_ds(10), 4, false);
    assert_true(tnt_dataset_is_batched(ds));
    assert_int_equal(tnt_dataset_cardinality(ds), 3);
    assert_int_equal(collect(ds, 0, v, 16, sizes, &nelem), 10);
    assert_int_equal(nelem, 3);
    assert_int_equal(sizes[0], 4), assert_int_equal(sizes[1], 4), assert_int_equal(sizes[2], 2);
    for (int i = 0; i < 10; i++) assert_true(v[i] == (float)i);
    tnt_dataset_free(ds);

    ds = tnt_dataset_batch(range_ds(10), 4, true);
    assert_int_equal(tnt_dataset_cardinality(ds), 2);
    assert_int_equal(collect(ds, 0, v, 16, sizes, &nelem), 8);
    assert_int_equal(nelem, 2);
    tnt_dataset_free(ds);

    ds = tnt_dataset_batch(range_ds(8), 4, true); /* exact: nothing dropped */
    assert_int_equal(tnt_dataset_cardinality(ds), 2);
    assert_int_equal(collect(ds, 0, v, 16, NULL, &nelem), 8);
    tnt_dataset_free(ds);

    assert_null(tnt_dataset_batch(range_ds(4), 0, false));
    tu_error_contains("batch: batch_size 0 (expected > 0)");
    assert_null(tnt_dataset_batch(range_ds(4), -2, true));
    tu_error_contains("batch_size -2");
    assert_null(tnt_dataset_batch(tnt_dataset_batch(range_ds(4), 2, false), 2, false));
    tu_error_contains("already batched");
    /* a failed constructor's NULL passes through the ops with its message intact */
    assert_null(tnt_dataset_from_arrays(NULL, SCALAR, NULL, SCALAR, 2, true));
    assert_null(tnt_dataset_prefetch(tnt_dataset_batch(tnt_dataset_shuffle(NULL, 4, 1), 2, true), 2));
    tu_error_contains("x is NULL");
}

static void test_shuffle_determinism(void **state) {
    (void)state;
    enum { N = 100 };
    float a[N], b[N], c[N], d[N];
    tnt_dataset *ds = tnt_dataset_shuffle(range_ds(N), N, 42);
    assert_int_equal(tnt_dataset_cardinality(ds), N);
    assert_int_equal(collect(ds, 0, a, N, NULL, NULL), N);
    assert_int_equal(collect(ds, 0, b, N, NULL, NULL), N);
    assert_int_equal(collect(ds, 1, c, N, NULL, NULL), N);
    assert_floats(a, b, N);
    assert_true(memcmp(a, c, sizeof a) != 0);
    assert_true(is_permutation(a, N));
    assert_true(is_permutation(c, N));
    tnt_dataset_free(ds);
    ds = tnt_dataset_shuffle(range_ds(N), N, 0); /* no seed: the default 42 */
    collect(ds, 0, d, N, NULL, NULL);
    assert_floats(a, d, N);
    tnt_dataset_free(ds);
    ds = tnt_dataset_shuffle(range_ds(N), N, 43); /* another seed, another order */
    collect(ds, 0, d, N, NULL, NULL);
    assert_true(memcmp(a, d, sizeof a) != 0);
    tnt_dataset_free(ds);
    /* a buffer far beyond the data is a full permutation, allocated only for the data */
    ds = tnt_dataset_shuffle(range_ds(N), (int64_t)1 << 40, 42);
    collect(ds, 0, d, N, NULL, NULL);
    assert_true(is_permutation(d, N));
    tnt_dataset_free(ds);
    /* buffer of 1 keeps the order; a buffer of k emits position p from the first p + k inputs */
    ds = tnt_dataset_shuffle(range_ds(N), 1, 42);
    collect(ds, 3, d, N, NULL, NULL);
    for (int i = 0; i < N; i++) assert_true(d[i] == (float)i);
    tnt_dataset_free(ds);
    ds = tnt_dataset_shuffle(range_ds(N), 5, 42);
    collect(ds, 0, d, N, NULL, NULL);
    assert_true(is_permutation(d, N));
    for (int i = 0; i < N; i++) assert_true(d[i] <= (float)(i + 4));
    tnt_dataset_free(ds);
    /* shuffling batches moves whole batches */
    int64_t sizes[8], nelem;
    ds = tnt_dataset_shuffle(tnt_dataset_batch(range_ds(10), 3, false), 4, 8);
    assert_int_equal(tnt_dataset_cardinality(ds), 4);
    assert_int_equal(collect(ds, 0, d, N, sizes, &nelem), 10);
    assert_true(is_permutation(d, 10));
    for (int64_t e = 0, off = 0; e < nelem; off += sizes[e++]) {
        assert_true(sizes[e] == 3 || (sizes[e] == 1 && d[off] == 9.0f));
        for (int64_t i = 1; i < sizes[e]; i++) assert_true(d[off + i] == d[off] + (float)i);
        assert_true((int64_t)d[off] % 3 == 0);
    }
    tnt_dataset_free(ds);
    assert_null(tnt_dataset_shuffle(range_ds(3), 0, 1));
    tu_error_contains("buffer_size 0");
}

/* The orders gen_data.py computes with the same generator and tf.data's buffer algorithm. */
static void test_shuffle_reference(void **state) {
    (void)state;
    static const int64_t cases[][4] = {{10, 4, 7, 0}, {10, 4, 7, 1}, {10, 1, 7, 0}, {10, 10, 7, 0}, {10, 3, 123, 5}};
    tnt_dataset *ref = tnt_dataset_from_npy(DATA "shuffle_ref.npy", NULL);
    if (!ref) fail_msg("%s", tnt_last_error());
    tnt_dataset_iter *it = tnt_dataset_iter_new(ref, 0);
    tnt_batch b;
    for (size_t c = 0; c < TNT_ARRAY_LEN(cases); c++) {
        assert_int_equal(tnt_dataset_iter_next(it, &b), 1);
        assert_int_equal(b.x.shape.dim[1], cases[c][0]);
        tnt_dataset *ds = tnt_dataset_shuffle(range_ds(cases[c][0]), cases[c][1], (uint64_t)cases[c][2]);
        float got[10];
        collect(ds, cases[c][3], got, 10, NULL, NULL);
        assert_floats(got, b.x.data, 10);
        tnt_dataset_free(ds);
    }
    tnt_dataset_iter_free(it);
    tnt_dataset_free(ref);
}

static void test_repeat_take_skip(void **state) {
    (void)state;
    float v[64];
    int64_t sizes[16], nelem;
    tnt_dataset *ds = tnt_dataset_repeat(range_ds(5), 3);
    assert_int_equal(tnt_dataset_cardinality(ds), 15);
    assert_int_equal(collect(ds, 0, v, 64, NULL, NULL), 15);
    for (int i = 0; i < 15; i++) assert_true(v[i] == (float)(i % 5));
    tnt_dataset_free(ds);

    ds = tnt_dataset_take(tnt_dataset_repeat(range_ds(5), -1), 12);
    assert_int_equal(tnt_dataset_cardinality(ds), 12);
    assert_int_equal(collect(ds, 0, v, 64, NULL, NULL), 12);
    for (int i = 0; i < 12; i++) assert_true(v[i] == (float)(i % 5));
    tnt_dataset_free(ds);
    ds = tnt_dataset_skip(tnt_dataset_repeat(range_ds(5), -1), 2);
    assert_int_equal(tnt_dataset_cardinality(ds), -1);
    tnt_dataset_free(ds);

    ds = tnt_dataset_skip(range_ds(5), 2);
    assert_int_equal(tnt_dataset_cardinality(ds), 3);
    assert_int_equal(collect(ds, 0, v, 64, NULL, NULL), 3);
    assert_true(v[0] == 2.0f && v[2] == 4.0f);
    tnt_dataset_free(ds);
    ds = tnt_dataset_skip(range_ds(5), 9);
    assert_int_equal(tnt_dataset_cardinality(ds), 0);
    assert_int_equal(collect(ds, 0, v, 64, NULL, NULL), 0);
    tnt_dataset_free(ds);
    ds = tnt_dataset_skip(range_ds(5), -1); /* -1: everything */
    assert_int_equal(tnt_dataset_cardinality(ds), 0);
    assert_int_equal(collect(ds, 0, v, 64, NULL, NULL), 0);
    tnt_dataset_free(ds);
    ds = tnt_dataset_take(range_ds(5), -1); /* -1: all */
    assert_int_equal(tnt_dataset_cardinality(ds), 5);
    assert_int_equal(collect(ds, 0, v, 64, NULL, NULL), 5);
    tnt_dataset_free(ds);
    ds = tnt_dataset_take(range_ds(5), 0);
    assert_int_equal(tnt_dataset_cardinality(ds), 0);
    assert_int_equal(collect(ds, 0, v, 64, NULL, NULL), 0);
    tnt_dataset_free(ds);
    ds = tnt_dataset_repeat(range_ds(5), 0);
    assert_int_equal(tnt_dataset_cardinality(ds), 0);
    assert_int_equal(collect(ds, 0, v, 64, NULL, NULL), 0);
    tnt_dataset_free(ds);
    ds = tnt_dataset_repeat(range_ds(0), -1); /* forever over nothing ends */
    assert_int_equal(tnt_dataset_cardinality(ds), 0);
    assert_int_equal(collect(ds, 0, v, 64, NULL, NULL), 0);
    tnt_dataset_free(ds);

    /* after batch, the ops count batches: 5 samples -> batches 2,2,1 -> x3 -> skip 1 -> take 6 */
    ds = tnt_dataset_take(tnt_dataset_skip(tnt_dataset_repeat(tnt_dataset_batch(range_ds(5), 2, false), 3), 1), 6);
    assert_int_equal(tnt_dataset_cardinality(ds), 6);
    assert_int_equal(collect(ds, 0, v, 64, sizes, &nelem), 10);
    assert_int_equal(nelem, 6);
    static const int64_t want_sizes[] = {2, 1, 2, 2, 1, 2};
    static const float want[] = {2, 3, 4, 0, 1, 2, 3, 4, 0, 1};
    for (int i = 0; i < 6; i++) assert_int_equal(sizes[i], want_sizes[i]);
    assert_floats(v, want, 10);
    tnt_dataset_free(ds);

    /* repeat before batch: batches cross the repetition boundary, as in tf.data */
    ds = tnt_dataset_batch(tnt_dataset_repeat(range_ds(5), 2), 4, false);
    assert_int_equal(tnt_dataset_cardinality(ds), 3);
    assert_int_equal(collect(ds, 0, v, 64, sizes, &nelem), 10);
    assert_int_equal(sizes[1], 4);
    assert_true(v[4] == 4.0f && v[5] == 0.0f);
    tnt_dataset_free(ds);

    /* shuffle then repeat: each repetition is a new permutation */
    ds = tnt_dataset_repeat(tnt_dataset_shuffle(range_ds(20), 20, 9), 2);
    assert_int_equal(collect(ds, 0, v, 64, NULL, NULL), 40);
    assert_true(is_permutation(v, 20) && is_permutation(v + 20, 20));
    assert_true(memcmp(v, v + 20, 20 * sizeof(float)) != 0);
    float w[40];
    collect(ds, 0, w, 64, NULL, NULL);
    assert_floats(v, w, 40);
    tnt_dataset_free(ds);
}

/* x -> 2x, y -> y + 1 (same shapes) */
static int double_x(const float *xi, const float *yi, float *xo, float *yo, void *user) {
    (void)user;
    xo[0] = 2 * xi[0];
    yo[0] = yi[0] + 1;
    return 0;
}

/* (2, 3) -> (2,): row sums; y untouched (left as the copy) */
static int row_sums(const float *xi, const float *yi, float *xo, float *yo, void *user) {
    (void)yi, (void)yo;
    ++*(int *)user;
    xo[0] = xi[0] + xi[1] + xi[2];
    xo[1] = xi[3] + xi[4] + xi[5];
    return 0;
}

/* fails on x == 7 */
static int fail_at_7(const float *xi, const float *yi, float *xo, float *yo, void *user) {
    (void)yi, (void)yo, (void)user;
    xo[0] = xi[0];
    return xi[0] == 7.0f ? 3 : 0;
}

static void test_map(void **state) {
    (void)state;
    float x[24], y[4];
    for (int i = 0; i < 24; i++) x[i] = (float)i;
    for (int i = 0; i < 4; i++) y[i] = (float)i;
    int calls = 0;
    tnt_shape two = TNT_SHAPE(2);
    for (int after = 0; after < 2; after++) { /* map before and after batch */
        tnt_dataset *ds = tnt_dataset_from_arrays(x, TNT_SHAPE(2, 3), y, SCALAR, 4, false);
        if (after) ds = tnt_dataset_map(tnt_dataset_batch(ds, 3, false), row_sums, &calls, &two, NULL);
        else ds = tnt_dataset_batch(tnt_dataset_map(ds, row_sums, &calls, &two, NULL), 3, false);
        assert_non_null(ds);
        assert_int_equal(tnt_dataset_x_shape(ds).ndim, 1);
        assert_int_equal(tnt_dataset_x_shape(ds).dim[0], 2);
        tnt_dataset_iter *it = tnt_dataset_iter_new(ds, 0);
        tnt_batch b;
        assert_int_equal(tnt_dataset_iter_next(it, &b), 1);
        assert_int_equal(b.n, 3);
        assert_int_equal(b.x.shape.ndim, 2);
        assert_int_equal(b.x.shape.dim[1], 2);
        static const float want[] = {3, 12, 21, 30, 39, 48};
        assert_floats(b.x.data, want, 6);
        assert_floats(b.y.data, y, 3);
        assert_int_equal(tnt_dataset_iter_next(it, &b), 1);
        assert_int_equal(b.n, 1);
        assert_true(b.x.data[0] == 57.0f && b.x.data[1] == 66.0f);
        assert_int_equal(tnt_dataset_iter_next(it, &b), 0);
        tnt_dataset_iter_free(it);
        tnt_dataset_free(ds);
    }
    assert_int_equal(calls, 8);
    /* a chain of maps applies in order: ((x*2)*2) then sums */
    calls = 0;
    tnt_dataset *ds = tnt_dataset_from_arrays(x, TNT_SHAPE(2, 3), y, SCALAR, 4, false);
    ds = tnt_dataset_map(tnt_dataset_shuffle(tnt_dataset_map(ds, double_x, NULL, NULL, NULL), 4, 1), double_x, NULL,
                         NULL, NULL);
    ds = tnt_dataset_map(tnt_dataset_batch(ds, 4, false), row_sums, &calls, &two, NULL);
    tnt_dataset_iter *it = tnt_dataset_iter_new(ds, 0);
    tnt_batch b;
    assert_int_equal(tnt_dataset_iter_next(it, &b), 1);
    for (int i = 0; i < 4; i++) {
        int s = (int)b.y.data[i] - 2; /* the sample: y + 1 + 1 */
        assert_true(s >= 0 && s < 4);
        assert_true(b.x.data[2 * i] == 4 * x[6 * s] + x[6 * s + 1] + x[6 * s + 2]);
        assert_true(b.x.data[2 * i + 1] == x[6 * s + 3] + x[6 * s + 4] + x[6 * s + 5]);
    }
    tnt_dataset_iter_free(it);
    tnt_dataset_free(ds);
    /* a failing fn stops the iteration with a message naming the sample */
    ds = tnt_dataset_batch(tnt_dataset_map(range_ds(10), fail_at_7, NULL, NULL, NULL), 4, false);
    it = tnt_dataset_iter_new(ds, 0);
    assert_int_equal(tnt_dataset_iter_next(it, &b), 1);
    assert_int_equal(tnt_dataset_iter_next(it, &b), TNT_ERR_ARG);
    tu_error_contains("returned 3 for sample 7");
    tnt__error_clear();
    assert_int_equal(tnt_dataset_iter_next(it, &b), TNT_ERR_ARG); /* the error repeats */
    tu_error_contains("sample 7");
    tnt_dataset_iter_free(it);
    tnt_dataset_free(ds);
    /* bad arguments */
    assert_null(tnt_dataset_map(range_ds(2), NULL, NULL, NULL, NULL));
    tu_error_contains("fn is NULL");
    ds = tnt_dataset_from_arrays(x, SCALAR, NULL, SCALAR, 2, false);
    assert_null(tnt_dataset_map(ds, double_x, NULL, NULL, &two));
    tu_error_contains("no labels");
    tnt_shape bad = TNT_SHAPE(3, -2);
    assert_null(tnt_dataset_map(range_ds(2), double_x, NULL, &bad, NULL));
    tu_error_contains("(3, None)");
}

/* the pipeline of the prefetch tests: shuffle, map, batch 7 of 50 samples */
static tnt_dataset *pipeline(bool prefetch, int64_t batch) {
    tnt_dataset *ds = tnt_dataset_batch(
        tnt_dataset_map(tnt_dataset_shuffle(range_ds(50), 16, 5), double_x, NULL, NULL, NULL), batch, false);
    return prefetch ? tnt_dataset_prefetch(ds, 3) : ds;
}

static void test_prefetch(void **state) {
    (void)state;
    float a[64], b[64];
    int64_t sa[16], sb[16], na, nb;
    tnt_dataset *plain = pipeline(false, 7), *pf = pipeline(true, 7);
    assert_int_equal(tnt_dataset_cardinality(pf), 8);
    for (int epoch = 0; epoch < 3; epoch++) {
        assert_int_equal(collect(plain, epoch, a, 64, sa, &na), 50);
        assert_int_equal(collect(pf, epoch, b, 64, sb, &nb), 50);
        assert_int_equal(na, nb);
        assert_floats(a, b, 50);
        for (int i = 0; i < na; i++) assert_int_equal(sa[i], sb[i]);
    }
    tnt_dataset_free(plain);
    tnt_dataset_free(pf);
    /* errors from the thread reach the caller with their message */
    tnt_dataset *ds = tnt_dataset_prefetch(tnt_dataset_batch(tnt_dataset_map(range_ds(20), fail_at_7, NULL, NULL, NULL), 3, false), 4);
    tnt_dataset_iter *it = tnt_dataset_iter_new(ds, 0);
    tnt_batch bt;
    assert_int_equal(tnt_dataset_iter_next(it, &bt), 1);
    assert_int_equal(tnt_dataset_iter_next(it, &bt), 1);
    tnt__error_clear();
    assert_int_equal(tnt_dataset_iter_next(it, &bt), TNT_ERR_ARG);
    tu_error_contains("returned 3 for sample 7");
    assert_int_equal(tnt_dataset_iter_next(it, &bt), TNT_ERR_ARG);
    tnt_dataset_iter_free(it);
    tnt_dataset_free(ds);
    /* freeing while the thread runs ahead on an endless dataset: stops and joins */
    ds = tnt_dataset_prefetch(tnt_dataset_batch(tnt_dataset_repeat(range_ds(10), -1), 4, true), -1);
    assert_int_equal(tnt_dataset_cardinality(ds), -1);
    for (int round = 0; round < 3; round++) {
        it = tnt_dataset_iter_new(ds, round);
        for (int i = 0; i < round; i++) assert_int_equal(tnt_dataset_iter_next(it, &bt), 1);
        tnt_dataset_iter_free(it);
    }
    tnt_dataset_free(ds);
    /* unbatched prefetch, prefetch inside the pipeline, and a bad buffer size */
    ds = tnt_dataset_prefetch(range_ds(5), 2);
    assert_int_equal(collect(ds, 0, a, 64, NULL, NULL), 5);
    tnt_dataset_free(ds);
    ds = tnt_dataset_batch(tnt_dataset_prefetch(range_ds(5), 1), 2, false);
    assert_int_equal(collect(ds, 0, a, 64, sa, &na), 5);
    assert_int_equal(na, 3);
    for (int i = 0; i < 5; i++) assert_true(a[i] == (float)i);
    tnt_dataset_free(ds);
    assert_null(tnt_dataset_prefetch(range_ds(5), 0));
    tu_error_contains("buffer_size 0");
}

/* Shares of each batch over nparts, checked against the whole batches of the same pipeline. */
static void check_parts(bool prefetch, int64_t batch, int nparts) {
    tnt_dataset *ds = pipeline(prefetch, batch), *whole = pipeline(false, batch);
    float all[64];
    int64_t sizes[64], nelem;
    assert_int_equal(collect(whole, 2, all, 64, sizes, &nelem), 50);
    tnt_dataset_iter **its = calloc((size_t)nparts, sizeof *its);
    for (int p = 0; p < nparts; p++) its[p] = tnt_dataset_iter_new(ds, 2);
    int64_t off = 0;
    for (int64_t e = 0; e < nelem; e++) {
        int64_t lo = off;
        for (int p = 0; p < nparts; p++) {
            tnt_batch b;
            int64_t gn = -1;
            assert_int_equal(tnt__dataset_iter_next_part(its[p], p, nparts, &b, &gn), 1);
            assert_int_equal(gn, sizes[e]);
            int64_t want = sizes[e] / nparts + (p < sizes[e] % nparts);
            assert_int_equal(b.n, want);
            assert_int_equal(b.x.shape.dim[0], want);
            assert_int_equal(b.y.shape.dim[0], want);
            for (int64_t i = 0; i < b.n; i++) {
                assert_true(b.x.data[i] == all[lo + i]);
                assert_true(b.y.data[i] == all[lo + i] / 2 + 101);
            }
            lo += b.n;
        }
        off += sizes[e];
        assert_int_equal(lo, off);
    }
    for (int p = 0; p < nparts; p++) {
        tnt_batch b;
        assert_int_equal(tnt__dataset_iter_next_part(its[p], p, nparts, &b, NULL), 0);
        tnt_dataset_iter_free(its[p]);
    }
    free(its);
    tnt_dataset_free(ds);
    tnt_dataset_free(whole);
}

static void test_next_part(void **state) {
    (void)state;
    /* n=10 over 3 parts: 4, 3, 3 and in order */
    tnt_dataset *ds = tnt_dataset_batch(range_ds(10), 10, false);
    static const int64_t want_n[] = {4, 3, 3}, want_lo[] = {0, 4, 7};
    for (int p = 0; p < 3; p++) {
        tnt_dataset_iter *it = tnt_dataset_iter_new(ds, 0);
        tnt_batch b;
        int64_t gn;
        assert_int_equal(tnt__dataset_iter_next_part(it, p, 3, &b, &gn), 1);
        assert_int_equal(gn, 10);
        assert_int_equal(b.n, want_n[p]);
        for (int i = 0; i < b.n; i++) assert_true(b.x.data[i] == (float)(want_lo[p] + i));
        tnt_dataset_iter_free(it);
    }
    tnt_dataset_free(ds);
    for (int pf = 0; pf < 2; pf++) {
        check_parts(pf, 7, 3);  /* 7,7,...,1: the last batch leaves parts empty */
        check_parts(pf, 10, 3);
        check_parts(pf, 2, 4);  /* shares of 0 samples */
        check_parts(pf, 16, 1);
    }
    /* bad requests */
    ds = tnt_dataset_prefetch(tnt_dataset_batch(range_ds(10), 4, false), 2);
    tnt_dataset_iter *it = tnt_dataset_iter_new(ds, 0);
    tnt_batch b;
    assert_int_equal(tnt__dataset_iter_next_part(it, 3, 3, &b, NULL), TNT_ERR_ARG);
    tu_error_contains("part 3 of 3");
    assert_int_equal(tnt__dataset_iter_next_part(it, 0, 2, &b, NULL), 1);
    assert_int_equal(tnt__dataset_iter_next_part(it, 1, 2, &b, NULL), TNT_ERR_ARG);
    tu_error_contains("part 1 of 2");
    tnt_dataset_iter_free(it);
    tnt_dataset_free(ds);
    ds = range_ds(4);
    it = tnt_dataset_iter_new(ds, 0);
    assert_int_equal(tnt__dataset_iter_next_part(it, 0, 2, &b, NULL), TNT_ERR_ARG);
    tu_error_contains("unbatched");
    int64_t gn;
    assert_int_equal(tnt__dataset_iter_next_part(it, 0, 1, &b, &gn), 1);
    assert_int_equal(gn, 1);
    tnt_dataset_iter_free(it);
    tnt_dataset_free(ds);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_batch),
        cmocka_unit_test(test_shuffle_determinism),
        cmocka_unit_test(test_shuffle_reference),
        cmocka_unit_test(test_repeat_take_skip),
        cmocka_unit_test(test_map),
        cmocka_unit_test(test_prefetch),
        cmocka_unit_test(test_next_part),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

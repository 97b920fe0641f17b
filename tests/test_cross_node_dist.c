/* test_cross_node_dist.c: the node-aware reducer's own cross-node allreduce (comm/cross_node.c,
 * TNT_CROSS_NODE), run by ctest under mpirun with 1 to 5 ranks (the participants). For every
 * algorithm (ring, halving, doubling, auto, and MPI's) and odd sizes from 0 to 100,003 floats:
 * the sum equals MPI_Allreduce's within 1e-6 (relative to the sum of magnitudes), every rank holds
 * bitwise the same values, and a second run repeats them bitwise; bfloat16 on the wire (the
 * compressed path's operation) likewise, within bfloat16's rounding of a double reference; auto
 * picks by the cost model (doubling for small messages, halving over q's factors for large). */
#include "testutil.h"

#include "comm/cross_node.h"
#include "comm/reducer.h"
#include "core/core.h"

#include <math.h>
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

static const int64_t sizes[] = {0, 1, 2, 3, 5, 7, 17, 31, 1000, 4099, 100003};
static const tnt__cross_algo algos[] = {TNT__CROSS_RING, TNT__CROSS_HALVING, TNT__CROSS_DOUBLING, TNT__CROSS_AUTO,
                                        TNT__CROSS_MPI};
static const char *const algo_names[] = {"auto", "mpi", "ring", "halving", "doubling"};

static int rank, size;

/* Every rank's copy of x equals rank 0's, bit for bit. */
static void assert_same_on_every_rank(const void *x, int64_t bytes, const char *what) {
    char *root = malloc((size_t)bytes + 1);
    memcpy(root, x, (size_t)bytes);
    assert_int_equal(MPI_Bcast(root, (int)bytes, MPI_BYTE, 0, MPI_COMM_WORLD), MPI_SUCCESS);
    int differs = memcmp(root, x, (size_t)bytes) != 0, any = 0;
    MPI_Allreduce(&differs, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (any) fail_msg("%s: the ranks hold different values", what);
    free(root);
}

static void test_float_sum_equals_mpi(void **state) {
    (void)state;
    for (size_t a = 0; a < TNT_ARRAY_LEN(algos); a++)
        for (size_t k = 0; k < TNT_ARRAY_LEN(sizes); k++) {
            int64_t n = sizes[k];
            float *x = malloc((size_t)(n + 1) * sizeof(float)), *ref = malloc((size_t)(n + 1) * sizeof(float));
            float *mag = malloc((size_t)(n + 1) * sizeof(float)), *again = malloc((size_t)(n + 1) * sizeof(float));
            tu_fill(x, n, 1000 * (uint64_t)rank + (uint64_t)n + 7);
            for (int64_t i = 0; i < n; i++) x[i] *= (float)(1 + i % 7), mag[i] = fabsf(x[i]);
            memcpy(again, x, (size_t)n * sizeof(float));
            MPI_Allreduce(x, ref, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
            MPI_Allreduce(MPI_IN_PLACE, mag, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
            assert_int_equal(tnt__cross_allreduce(x, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, algos[a]), MPI_SUCCESS);
            for (int64_t i = 0; i < n; i++)
                if (!(fabs((double)x[i] - ref[i]) <= 1e-6 * fmax(1.0, mag[i])))
                    fail_msg("%s, %lld floats, %d ranks: element %lld is %.9g, MPI_Allreduce %.9g", algo_names[algos[a]],
                             (long long)n, size, (long long)i, x[i], ref[i]);
            assert_int_equal(tnt__cross_allreduce(again, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, algos[a]), MPI_SUCCESS);
            if (algos[a] != TNT__CROSS_MPI) { /* ours: every rank the same bits, on every run */
                assert_same_on_every_rank(x, n * (int64_t)sizeof(float), algo_names[algos[a]]);
                tu_assert_bitwise(x, again, n, algo_names[algos[a]]);
            }
            free(x), free(ref), free(mag), free(again);
        }
}

static void test_bf16_wire(void **state) {
    (void)state;
    MPI_Op op;
    assert_int_equal(tnt__bf16_sum_op(&op), MPI_SUCCESS);
    for (size_t a = 0; a < TNT_ARRAY_LEN(algos); a++) {
        int64_t n = 4099;
        float *x = malloc((size_t)n * sizeof(float)), *got = malloc((size_t)n * sizeof(float));
        uint16_t *wire = malloc((size_t)n * sizeof(uint16_t));
        double *ref = malloc((size_t)n * sizeof(double)), *mag = malloc((size_t)n * sizeof(double));
        tu_fill(x, n, 77 + (uint64_t)rank);
        tnt__bf16_compress(wire, x, n);
        tnt__bf16_decompress(got, wire, n); /* what each rank puts on the wire */
        for (int64_t i = 0; i < n; i++) ref[i] = got[i], mag[i] = fabs(got[i]);
        MPI_Allreduce(MPI_IN_PLACE, ref, (int)n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        MPI_Allreduce(MPI_IN_PLACE, mag, (int)n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        assert_int_equal(tnt__cross_allreduce(wire, n, MPI_UINT16_T, op, MPI_COMM_WORLD, algos[a]), MPI_SUCCESS);
        tnt__bf16_decompress(got, wire, n);
        /* each of the q - 1 additions rounds to 8 significant bits: 2^-8 of the magnitudes each */
        for (int64_t i = 0; i < n; i++)
            if (!(fabs(got[i] - ref[i]) <= (size > 1 ? size - 1 : 1) * 0x1p-8 * mag[i] + 1e-30))
                fail_msg("bf16 %s: element %lld is %.6g, the double sum %.6g", algo_names[algos[a]], (long long)i,
                         got[i], ref[i]);
        if (algos[a] != TNT__CROSS_MPI) assert_same_on_every_rank(wire, n * 2, algo_names[algos[a]]);
        free(x), free(got), free(wire), free(ref), free(mag);
    }
    MPI_Op_free(&op);
}

static void test_auto_choice(void **state) {
    (void)state;
    /* small messages: the fewest steps; large: the fewest bytes, without the fold off a power of two */
    assert_int_equal(tnt__cross_choose(TNT__CROSS_AUTO, 4096, 24), TNT__CROSS_DOUBLING);
    assert_int_equal(tnt__cross_choose(TNT__CROSS_AUTO, 4096, 16), TNT__CROSS_DOUBLING);
    assert_int_equal(tnt__cross_choose(TNT__CROSS_AUTO, 8 << 20, 16), TNT__CROSS_HALVING);
    assert_int_equal(tnt__cross_choose(TNT__CROSS_AUTO, 8 << 20, 24), TNT__CROSS_HALVING);
    assert_int_equal(tnt__cross_choose(TNT__CROSS_AUTO, 8 << 20, 3), TNT__CROSS_HALVING);
    for (int a = TNT__CROSS_MPI; a <= TNT__CROSS_DOUBLING; a++) /* an algorithm asked is the one run */
        assert_int_equal(tnt__cross_choose((tnt__cross_algo)a, 1 << 20, 24), a);
    /* each rank's additions: the ring and halving (q - 1)/q of the message, doubling log2 q of it
     * (off a power of two, the folding ranks one whole message more) */
    assert_int_equal(tnt__cross_combined(TNT__CROSS_RING, 2400, 24), 2300);
    assert_int_equal(tnt__cross_combined(TNT__CROSS_HALVING, 2400, 24), 2300);
    assert_int_equal(tnt__cross_combined(TNT__CROSS_DOUBLING, 100, 16), 400);
    assert_int_equal(tnt__cross_combined(TNT__CROSS_DOUBLING, 100, 24), 500);
}

int main(int argc, char **argv) {
    tu_ok(tnt_init(&argc, &argv));
    int started = 0; /* without mpirun tnt_init starts no MPI: this test starts its own */
    MPI_Initialized(&started);
    if (!started) MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_float_sum_equals_mpi),
        cmocka_unit_test(test_bf16_wire),
        cmocka_unit_test(test_auto_choice),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    tnt_finalize();
    if (!started) MPI_Finalize();
    return failed;
}

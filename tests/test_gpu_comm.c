/* test_gpu_comm.c: how GPU ranks sum their gradients (TNT_GPU_COMM, comm/gpu_comm.c), the choice of
 * one rank for every combination of its inputs: the setting, the ranks, whether NCCL loaded (and
 * the loader's reason when not), and how many ranks share the GPU; and the emulated device's answer
 * (no NCCL, unless a test installs a stand-in). The agreement between ranks and the sums themselves
 * run in test_gpu_model_dist (2 ranks) and test_gpu_fallback (the loader, a fake NCCL). */
#include "testutil.h"

#include "comm/comm.h"
#include "core/config.h"
#include "gpu/gpu.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void expect(tnt__gpu_comm_inputs in, int comm, const char *why) {
    char line[320] = "unset";
    int got = tnt__gpu_comm_choose(&in, line, sizeof line);
    if (got != comm || strcmp(line, why))
        fail_msg("setting %d, %d ranks, nccl %d, shared by %d: got %s \"%s\", expected %s \"%s\"", in.setting, in.ranks,
                 in.nccl, in.shared_by, got == TNT__GPU_COMM_NCCL ? "nccl" : "host", line,
                 comm == TNT__GPU_COMM_NCCL ? "nccl" : "host", why);
}

static void test_choice(void **state) {
    (void)state;
    const int H = TNT__GPU_COMM_HOST, N = TNT__GPU_COMM_NCCL;
    for (int setting = TNT__GPU_COMM_AUTO; setting <= TNT__GPU_COMM_NCCL; setting++) {
        /* one rank sums nothing: host, silently */
        expect((tnt__gpu_comm_inputs){setting, 1, true, "", 1}, H, "");
        /* mpi asked for */
        if (setting == TNT__GPU_COMM_HOST) {
            expect((tnt__gpu_comm_inputs){setting, 4, true, "", 1}, H, "TNT_GPU_COMM=mpi");
            continue;
        }
        /* auto and nccl: NCCL where it loaded and each rank has its own GPU */
        expect((tnt__gpu_comm_inputs){setting, 4, true, "", 1}, N, "");
        expect((tnt__gpu_comm_inputs){setting, 2, false, "no libnccl.so.2", 1}, H, "no libnccl.so.2");
        expect((tnt__gpu_comm_inputs){setting, 2, false, "libnccl.so.2 lacks ncclAllReduce", 1}, H,
               "libnccl.so.2 lacks ncclAllReduce");
        expect((tnt__gpu_comm_inputs){setting, 2, false, NULL, 1}, H, "no NCCL");
        expect((tnt__gpu_comm_inputs){setting, 2, true, "", 2}, H, "2 ranks share this GPU (NCCL takes one rank per GPU)");
        expect((tnt__gpu_comm_inputs){setting, 8, true, "", 3}, H, "3 ranks share this GPU (NCCL takes one rank per GPU)");
        expect((tnt__gpu_comm_inputs){setting, 2, true, "", -1}, H,
               "the GPU was opened outside tnt_init's device choice (TNT_DEVICE=cpu with a model compiled for the GPU): "
               "which ranks share it is unknown, and NCCL takes one rank per GPU");
    }
}

/* standing in for NCCL on the emulated device: the sum of one rank is the data itself */
static int standin_calls;
static tnt_status standin(float *d, int64_t n, tnt__gpu_stream s) {
    (void)d, (void)n, (void)s;
    standin_calls++;
    return TNT_OK;
}

static void test_emulated(void **state) {
    (void)state;
    if (!tnt__gpu_emulated()) return; /* a GPU: test_real_nccl */
    const char *why = NULL;
    assert_true(tnt__gpu_available(NULL));
    assert_false(tnt__gpu_nccl_available(&why));
    assert_string_equal(why, "the emulated device has no NCCL");
    assert_int_equal(tnt__gpu_nccl_version(), 0);
    tnt__gpu_nccl_standin = standin;
    assert_true(tnt__gpu_nccl_available(&why));
    assert_string_equal(why, "");
    char id[TNT__GPU_NCCL_ID_BYTES];
    tu_ok(tnt__gpu_open(0));
    tu_ok(tnt__gpu_nccl_unique_id(id));
    assert_int_equal(tnt__gpu_nccl_open(id, 2, 2), TNT_ERR_ARG);
    tu_error_contains("rank 2 of 2");
    tu_ok(tnt__gpu_nccl_open(id, 1, 0));
    float *d = tnt__gpu_malloc(16 * sizeof(float));
    assert_non_null(d);
    tu_ok(tnt__gpu_nccl_allreduce(d, 16, TNT__GPU_COPY));
    assert_int_equal(standin_calls, 1);
    /* past the allocation: refused as a GPU would fault, naming the call */
    assert_int_equal(tnt__gpu_nccl_allreduce(d, 17, TNT__GPU_COPY), TNT_ERR_ARG);
    tu_error_contains("tnt__gpu_nccl_allreduce");
    assert_int_equal(tnt__gpu_nccl_allreduce(d, -1, TNT__GPU_COPY), TNT_ERR_ARG);
    tu_error_contains("n = -1");
    tnt__gpu_free(d);
    tnt__gpu_close();
    assert_false(tnt__gpu_nccl_is_open());
    tnt__gpu_nccl_standin = NULL;
    /* one rank: host, whatever the setting */
    int comm = -1;
    tu_ok(tnt__gpu_comm_open(&comm));
    assert_int_equal(comm, TNT__GPU_COMM_HOST);
}

/* On a GPU (scripts/gpu_check.sh, TNT_GPU_EMULATE=0) with NCCL: the project's declarations against
 * the real library, through a communicator of one rank (two ranks cannot share one GPU in NCCL):
 * the id, ncclCommInitRank, an in-place sum on the copy stream (one rank's sum is its data), the
 * communicator left when the device closes. */
static void test_real_nccl(void **state) {
    (void)state;
    const char *why = NULL;
    if (tnt__gpu_emulated()) return;
    if (!tnt__gpu_nccl_available(&why)) {
        print_message("no NCCL here: %s\n", why);
        return;
    }
    const int v = tnt__gpu_nccl_version();
    print_message("NCCL %d.%d.%d\n", v / 10000, v % 10000 / 100, v % 100);
    char id[TNT__GPU_NCCL_ID_BYTES];
    tu_ok(tnt__gpu_open(0));
    tu_ok(tnt__gpu_nccl_unique_id(id));
    tu_ok(tnt__gpu_nccl_open(id, 1, 0));
    enum { n = 1 << 20 };
    float *h = malloc(n * sizeof(float)), *back = malloc(n * sizeof(float)), *d = tnt__gpu_malloc(n * sizeof(float));
    assert_true(h && back && d);
    tu_fill(h, n, 5);
    tu_ok(tnt__gpu_copy_to_device(d, h, n * sizeof(float), TNT__GPU_COPY));
    for (int i = 0; i < 3; i++) tu_ok(tnt__gpu_nccl_allreduce(d + i * 1000, n - i * 1000, TNT__GPU_COPY));
    tu_ok(tnt__gpu_copy_to_host(back, d, n * sizeof(float), TNT__GPU_COPY));
    tu_ok(tnt__gpu_sync(TNT__GPU_COPY));
    tu_assert_bitwise(back, h, n, "one rank's NCCL sum");
    tnt__gpu_free(d);
    free(h), free(back);
    tnt__gpu_close();
    assert_false(tnt__gpu_nccl_is_open());
}

int main(void) {
    if (!getenv("TNT_GPU_EMULATE")) setenv("TNT_GPU_EMULATE", "1", 1); /* 0: a GPU (gpu_check.sh) */
    if (tnt__config_load() != TNT_OK) return 1;
    const char *why = NULL;
    if (!tnt__gpu_available(&why)) return printf("test_gpu_comm: no device: %s\n", why), 77;
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_choice), cmocka_unit_test(test_emulated),
                                       cmocka_unit_test(test_real_nccl)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}

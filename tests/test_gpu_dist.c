/* test_gpu_dist.c: the device each rank takes in tnt_init, under mpirun, on the emulated backend
 * (TNT_GPU_EMULATE=N stands for N GPUs per node). GPU_DIST_CASE picks the case (MPI starts once
 * per process):
 *   share (default): TNT_DEVICE=gpu, 2 emulated GPUs: rank r (all on one node) takes GPU r % 2;
 *   mixed_auto: TNT_DEVICE=auto, only rank 0 has a GPU: every rank runs on the CPU and says why
 *   (rank 0: how many ranks cannot use one; the others: their own reason);
 *   mixed_gpu: TNT_DEVICE=gpu, only rank 0 has a GPU: tnt_init fails on every rank, naming rank 1
 *   and its reason;
 *   launched: the settings as the launcher exported them (tests/launcher/test_launcher_gpu.sh):
 *   TNT_DEVICE=cpu gives the CPU, else rank r takes emulated GPU r % TNT_GPU_EMULATE. */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *scenario(void) {
    const char *c = getenv("GPU_DIST_CASE");
    return c && *c ? c : "share";
}

/* the launcher's rank, before tnt_init (Open MPI's or Hydra's variable) */
static int launcher_rank(void) {
    const char *r = getenv("OMPI_COMM_WORLD_RANK");
    if (!r) r = getenv("PMI_RANK");
    return r ? atoi(r) : 0;
}

static void test_device_per_rank(void **state) {
    (void)state;
    const char *c = scenario();
    const int rank = launcher_rank();
    setenv("TNT_LOG_LEVEL", "ERROR", 1);
    if (!strcmp(c, "launched")) {
        tu_ok(tnt_init(NULL, NULL));
        const char *device = getenv("TNT_DEVICE"), *emulate = getenv("TNT_GPU_EMULATE");
        char expect[160] = "cpu: TNT_DEVICE=cpu";
        if (device && strcmp(device, "cpu") && emulate)
            snprintf(expect, sizeof expect, "gpu %d: emulated device", rank % atoi(emulate));
        if (strcmp(tnt_gpu_status(), expect)) fail_msg("rank %d: \"%s\", expected \"%s\"", rank, tnt_gpu_status(), expect);
        printf("rank %d: %s\n", rank, tnt_gpu_status());
        tnt_finalize();
        return;
    }
    if (!strcmp(c, "share")) {
        setenv("TNT_DEVICE", "gpu", 1);
        setenv("TNT_GPU_EMULATE", "2", 1);
    } else {
        setenv("TNT_DEVICE", strcmp(c, "mixed_gpu") ? "auto" : "gpu", 1);
        if (rank == 0) setenv("TNT_GPU_EMULATE", "1", 1);
        else setenv("TNT_CUDA_LIBDIR", "/nonexistent/cuda", 1); /* a reason the test can name */
    }
    const tnt_status s = tnt_init(NULL, NULL);
    char expect[160];
    if (!strcmp(c, "mixed_gpu")) {
        assert_int_equal(s, TNT_ERR_UNSUPPORTED);
        const char *why = "TNT_DEVICE=gpu: no usable GPU: TNT_CUDA_LIBDIR: /nonexistent/cuda is not a folder";
        if (!strstr(tnt_last_error(), why) || (rank != 1 && !strstr(tnt_last_error(), "rank 1: ")))
            fail_msg("rank %d: tnt_init's error \"%s\"", rank, tnt_last_error());
        return;
    }
    tu_ok(s);
    assert_int_equal(tnt_get_rank(), rank);
    const int size = tnt_get_size();
    if (!strcmp(c, "share")) {
        snprintf(expect, sizeof expect, "gpu %d: emulated device", rank % 2);
        assert_int_equal(tnt_gpu_device_count(), 2);
    } else if (size == 1) {
        snprintf(expect, sizeof expect, "gpu 0: emulated device"); /* rank 0 alone has its GPU */
    } else if (rank == 0) { /* its GPU stays unused: the others' count */
        snprintf(expect, sizeof expect, "cpu: %d of %d ranks cannot use a GPU", size - 1, size);
    } else { /* a rank without a GPU says its own reason */
        snprintf(expect, sizeof expect, "cpu: TNT_CUDA_LIBDIR: /nonexistent/cuda is not a folder");
    }
    if (strcmp(tnt_gpu_status(), expect)) fail_msg("rank %d of %d: \"%s\", expected \"%s\"", rank, size, tnt_gpu_status(), expect);
    tnt_finalize();
    /* after tnt_finalize: what the backend offers (the settings as the test set them) */
    if (!strcmp(c, "share")) assert_string_equal(tnt_gpu_status(), "gpus: 2 found, tnt_init chooses one");
    else if (rank > 0) assert_string_equal(tnt_gpu_status(), "cpu: TNT_CUDA_LIBDIR: /nonexistent/cuda is not a folder");
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_device_per_rank)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* test_gpu.c: the GPU runtime on a real GPU (exit 77, "skipped" for ctest, without a usable one;
 * the reason is printed). The GPU check script runs it where a GPU is present; here it also runs
 * on the emulated device (ctest test_gpu_emulated, TNT_GPU_EMULATE=1), which proves the program.
 *
 * Checks: the device opens (name, driver, cuBLAS, cuDNN and NCCL as loaded); 64 MiB round trips
 * through device memory with pinned and pageable host buffers on both streams; the copy stream
 * waiting for the compute stream through an event; sgemm and strided sgemm in every transposition
 * against a triple loop in double within 1e-4 relative with TF32 off (and within 1e-2 with it
 * on); a kernel of the PTX (tnt_k_scale, y = a x) launched and compared bitwise with the host;
 * an unknown kernel name named in the error; close and open again. --quick (for compute-sanitizer):
 * 1 MiB instead of 64 MiB of copies, no TF32 pass. Any other argument is a usage error (exit 2). */
#include "testutil.h"

#include "core/config.h"
#include "gpu/api.h"
#include "gpu/host_kernels.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool quick;

static void test_copies(void **state) {
    (void)state;
    const size_t n = quick ? (size_t)1 << 18 : (size_t)16 << 20; /* 1 or 64 MiB of floats */
    float *pinned = tnt__gpu_host_malloc(n * sizeof(float)), *pageable = malloc(n * sizeof(float));
    float *d = tnt__gpu_malloc(n * sizeof(float)), *d2 = tnt__gpu_malloc(n * sizeof(float));
    assert_true(pinned && pageable && d && d2);
    for (size_t i = 0; i < n; i++) pinned[i] = (float)(i % 1000003) * 0.25f;
    tu_ok(tnt__gpu_copy_to_device(d, pinned, n * sizeof(float), TNT__GPU_COPY));
    tu_ok(tnt__gpu_sync(TNT__GPU_COPY));
    tu_ok(tnt__gpu_memset_zero(d2, n * sizeof(float), TNT__GPU_COMPUTE));
    tu_ok(tnt__gpu_copy_on_device(d2 + 1, d, (n - 1) * sizeof(float), TNT__GPU_COMPUTE));
    /* the copy stream reads d2 only after the compute stream wrote it */
    tnt__gpu_event *written = tnt__gpu_event_create();
    assert_non_null(written);
    tu_ok(tnt__gpu_event_record(written, TNT__GPU_COMPUTE));
    tu_ok(tnt__gpu_stream_wait(TNT__GPU_COPY, written));
    tu_ok(tnt__gpu_copy_to_host(pageable, d2, n * sizeof(float), TNT__GPU_COPY));
    tu_ok(tnt__gpu_sync(TNT__GPU_COPY));
    assert_true(pageable[0] == 0.f);
    size_t bad = 0;
    for (size_t i = 1; i < n; i++) bad += pageable[i] != pinned[i - 1];
    if (bad) fail_msg("%zu of %zu floats differ after the round trip", bad, n);
    /* an odd byte count and offset: memset by bytes */
    tu_ok(tnt__gpu_memset_zero((char *)d + 1, 7, TNT__GPU_COMPUTE));
    unsigned char bytes[9];
    tu_ok(tnt__gpu_copy_to_host(bytes, d, sizeof bytes, TNT__GPU_COMPUTE));
    tu_ok(tnt__gpu_sync(TNT__GPU_COMPUTE));
    unsigned char expect[9];
    memcpy(expect, pinned, sizeof expect);
    memset(expect + 1, 0, 7);
    assert_memory_equal(bytes, expect, sizeof bytes);
    tnt__gpu_event_destroy(written);
    tnt__gpu_free(d);
    tnt__gpu_free(d2);
    tnt__gpu_host_free(pinned);
    free(pageable);
}

static void reference_gemm(bool ta, bool tb, int m, int n, int k, float alpha, const float *a, int lda,
                           const float *b, int ldb, float beta, float *c, int ldc) {
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            double s = 0;
            for (int p = 0; p < k; p++)
                s += (double)(ta ? a[(size_t)p * lda + i] : a[(size_t)i * lda + p]) *
                     (tb ? b[(size_t)j * ldb + p] : b[(size_t)p * ldb + j]);
            c[(size_t)i * ldc + j] = (float)(alpha * s + beta * (double)c[(size_t)i * ldc + j]);
        }
}

static float *to_device(const float *x, size_t n) {
    float *d = tnt__gpu_malloc(n * sizeof(float));
    assert_non_null(d);
    tu_ok(tnt__gpu_copy_to_device(d, x, n * sizeof(float), TNT__GPU_COMPUTE));
    return d;
}

/* one product of every transposition, batch matrices at strides with gaps; rtol against double */
static void check_gemms(int batch, double rtol) {
    const int m = 67, n = 129, k = 300, pad = 5;
    for (int t = 0; t < 4; t++) {
        const bool ta = t & 1, tb = t & 2;
        const int lda = (ta ? m : k) + pad, ldb = (tb ? k : n) + pad, ldc = n + pad;
        const size_t sa = (size_t)(ta ? k : m) * lda + 3, sb = (size_t)(tb ? n : k) * ldb, sc = (size_t)m * ldc + 7;
        float *a = malloc(sa * batch * sizeof(float)), *b = malloc(sb * batch * sizeof(float));
        float *c = malloc(sc * batch * sizeof(float)), *expect = malloc(sc * batch * sizeof(float));
        tu_fill(a, (int64_t)(sa * batch), 100 + t);
        tu_fill(b, (int64_t)(sb * batch), 200 + t);
        tu_fill(c, (int64_t)(sc * batch), 300 + t);
        memcpy(expect, c, sc * batch * sizeof(float));
        for (int i = 0; i < batch; i++)
            reference_gemm(ta, tb, m, n, k, 0.5f, a + i * sa, lda, b + i * sb, ldb, 2.f, expect + i * sc, ldc);
        float *da = to_device(a, sa * batch), *db = to_device(b, sb * batch), *dc = to_device(c, sc * batch);
        if (batch == 1) tu_ok(tnt__gpu_sgemm(ta, tb, m, n, k, 0.5f, da, lda, db, ldb, 2.f, dc, ldc));
        else
            tu_ok(tnt__gpu_sgemm_strided(ta, tb, m, n, k, 0.5f, da, lda, (int64_t)sa, db, ldb, (int64_t)sb, 2.f, dc,
                                         ldc, (int64_t)sc, batch));
        tu_ok(tnt__gpu_copy_to_host(c, dc, sc * batch * sizeof(float), TNT__GPU_COMPUTE));
        tu_ok(tnt__gpu_sync(TNT__GPU_COMPUTE));
        char what[64];
        snprintf(what, sizeof what, "%s sgemm %c%c", batch > 1 ? "strided" : "", ta ? 'T' : 'N', tb ? 'T' : 'N');
        tu_assert_close(c, expect, (int64_t)(sc * batch), rtol, rtol, what);
        tnt__gpu_free(da);
        tnt__gpu_free(db);
        tnt__gpu_free(dc);
        free(a), free(b), free(c), free(expect);
    }
}

static void test_sgemm(void **state) {
    (void)state;
    tnt__gpu_set_tf32(false);
    check_gemms(1, 1e-4);
    check_gemms(3, 1e-4);
    if (quick) return;
    tnt__gpu_set_tf32(true); /* 10-bit mantissas: about 1e-3 relative over k = 300 */
    check_gemms(1, 1e-2);
    tnt__gpu_set_tf32(false);
}

static void test_kernel(void **state) {
    (void)state;
    if (tnt__gpu_emulated() && !tnt__gpu_host_kernel_find("tnt_k_scale")) {
        printf("skipped: the emulated device has no host build of tnt_k_scale (gpu/host_kernels.c)\n");
        return;
    }
    const long long n = (1 << 20) + 3;
    float *x = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float));
    tu_fill(x, n, 7);
    float *dx = to_device(x, (size_t)n), *dy = tnt__gpu_malloc((size_t)n * sizeof(float));
    assert_non_null(dy);
    float a = -1.75f;
    void *args[] = {&dx, &dy, (void *)&n, &a};
    tu_ok(tnt__gpu_launch("tnt_k_scale", tnt__gpu_grid_for(n, 256), 256, 0, args));
    tu_ok(tnt__gpu_copy_to_host(y, dy, (size_t)n * sizeof(float), TNT__GPU_COMPUTE));
    tu_ok(tnt__gpu_sync(TNT__GPU_COMPUTE));
    float *expect = malloc(n * sizeof(float));
    for (long long i = 0; i < n; i++) expect[i] = a * x[i]; /* one rounding: bitwise on any IEEE device */
    tu_assert_bitwise(y, expect, n, "tnt_k_scale");
    /* again, in place, from the function cache: y = 0.5 y */
    float half = 0.5f;
    void *again[] = {&dy, &dy, (void *)&n, &half};
    tu_ok(tnt__gpu_launch("tnt_k_scale", tnt__gpu_grid_for(n, 128), 128, 0, again));
    tu_ok(tnt__gpu_copy_to_host(y, dy, (size_t)n * sizeof(float), TNT__GPU_COMPUTE));
    tu_ok(tnt__gpu_sync(TNT__GPU_COMPUTE));
    for (long long i = 0; i < n; i++) expect[i] *= 0.5f;
    tu_assert_bitwise(y, expect, n, "tnt_k_scale in place");
    free(expect);
    assert_int_equal(tnt__gpu_launch("tnt_no_such_kernel", 1, 32, 0, args), TNT_ERR_ARG);
    tu_error_contains("'tnt_no_such_kernel'");
    tnt__gpu_free(dx);
    tnt__gpu_free(dy);
    free(x), free(y);
}

static void test_reopen(void **state) {
    (void)state;
    const int ordinal = tnt__gpu_ordinal(), count = tnt__gpu_device_count();
    /* another device while one is open: refused; beyond the devices: refused */
    assert_int_equal(tnt__gpu_open(count > 1 ? (ordinal + 1) % count : count), count > 1 ? TNT_ERR_STATE : TNT_ERR_ARG);
    tnt__gpu_close();
    assert_false(tnt__gpu_is_open());
    tu_ok(tnt__gpu_open(ordinal));
    float *d = tnt__gpu_malloc(1024);
    assert_non_null(d);
    tu_ok(tnt__gpu_memset_zero(d, 1024, TNT__GPU_COMPUTE));
    tu_ok(tnt__gpu_sync(TNT__GPU_COMPUTE));
    tnt__gpu_free(d);
    tnt__gpu_close();
}

int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) quick = true;
        else return fprintf(stderr, "test_gpu: unknown argument '%s' (usage: test_gpu [--quick])\n", argv[i]), 2;
    }
    if (tnt__config_load() != TNT_OK) return fprintf(stderr, "test_gpu: %s\n", tnt_last_error()), 1;
    const char *why;
    if (!tnt__gpu_available(&why)) {
        printf("test_gpu: skipped: no usable GPU: %s\n", why);
        return 77;
    }
    const int64_t ordinal = tnt__config_get()->gpu_ordinal;
    if (tnt__gpu_open(ordinal >= 0 ? (int)ordinal : 0) != TNT_OK) {
        fprintf(stderr, "test_gpu: FAILED to open the GPU: %s\n", tnt_last_error());
        return 1;
    }
    if (tnt__gpu_emulated()) {
        printf("test_gpu: the emulated device\n");
    } else {
        printf("test_gpu: GPU %d of %d: %s; driver API %d, cuDNN %s%d, NCCL %s%d\n", tnt__gpu_ordinal(),
               tnt__gpu_device_count(), tnt__gpu_device_name(), tnt__cuda.driver_version,
               tnt__cuda.has_cudnn ? "" : "absent ", tnt__cuda.cudnn_version, tnt__cuda.has_nccl ? "" : "absent ",
               tnt__cuda.nccl_version);
        if (tnt__cuda.has_cudnn && !tnt__gpu_cudnn())
            return fprintf(stderr, "test_gpu: FAILED: cuDNN loaded but no handle\n"), 1;
    }
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_copies), cmocka_unit_test(test_sgemm),
                                       cmocka_unit_test(test_kernel), cmocka_unit_test(test_reopen)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* test_gpu_runtime.c: the GPU runtime (src/gpu/gpu.h) on the emulated device (TNT_GPU_EMULATE=1),
 * which runs every call on the host: device and pinned memory, copies on both streams, events,
 * sgemm and strided sgemm in every transposition against a plain triple loop in double, and the
 * errors a GPU would give (or fault on): host pointers where device memory is expected, copies
 * past an allocation, unknown kernels, waiting for an event never recorded, host code reading
 * device memory (a SIGSEGV with a message). Runs everywhere. */
#include "testutil.h"

#include "core/config.h"
#include "gpu/api.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

/* before the device opens: every call refuses with TNT_ERR_STATE, nothing crashes */
static void test_before_open(void **state) {
    (void)state;
    const char *why = NULL;
    assert_true(tnt__gpu_available(&why));
    assert_string_equal(why, "");
    assert_true(tnt__gpu_emulated());
    assert_int_equal(tnt__gpu_device_count(), 1);
    assert_false(tnt__gpu_is_open());
    assert_int_equal(tnt__gpu_ordinal(), -1);
    assert_string_equal(tnt__gpu_device_name(), "");
    assert_null(tnt__gpu_malloc(16));
    tu_error_contains("no GPU is open");
    assert_int_equal(tnt__gpu_sync(TNT__GPU_COMPUTE), TNT_ERR_STATE);
    assert_null(tnt__gpu_event_create());
    assert_null(tnt__gpu_cudnn());
    tnt__gpu_free(NULL);
}

static void test_open(void **state) {
    (void)state;
    assert_int_equal(tnt__gpu_open(1), TNT_ERR_ARG); /* one emulated device */
    tu_error_contains("GPU 1: expected 0 to 0");
    tu_ok(tnt__gpu_open(0));
    tu_ok(tnt__gpu_open(0)); /* again: nothing */
    assert_true(tnt__gpu_is_open());
    assert_int_equal(tnt__gpu_ordinal(), 0);
    assert_string_equal(tnt__gpu_device_name(), "emulated device");
    assert_null(tnt__gpu_cudnn()); /* no cuDNN on the emulated device: conv layers stay on the CPU */
    assert_true(tnt__gpu_grid_for(1, 256) == 1 && tnt__gpu_grid_for(0, 256) == 1);
    assert_true(tnt__gpu_grid_for(1000, 256) == 4);
    assert_true(tnt__gpu_grid_for(INT64_C(1) << 40, 256) >= 1); /* capped, not overflowing */
}

static void test_memory_and_copies(void **state) {
    (void)state;
    enum { N = 1000 };
    const size_t before = tnt__gpu_emulated_live_bytes();
    float *d = tnt__gpu_malloc(N * sizeof(float)), *d2 = tnt__gpu_malloc(N * sizeof(float));
    assert_non_null(d);
    assert_non_null(d2);
    assert_int_equal((uintptr_t)d % 256, 0);
    assert_int_equal(tnt__gpu_emulated_live_bytes() - before, 2 * N * sizeof(float));
    /* fresh device memory is not zero: NaN, so that a kernel reading it unwritten shows */
    float first;
    tu_ok(tnt__gpu_copy_to_host(&first, d, sizeof first, TNT__GPU_COMPUTE));
    assert_true(isnan(first));

    float *host = tnt__gpu_host_malloc(N * sizeof(float)), back[N];
    assert_non_null(host);
    for (int i = 0; i < N; i++) host[i] = (float)i * 0.5f - 7.f;
    tu_ok(tnt__gpu_copy_to_device(d, host, N * sizeof(float), TNT__GPU_COPY));
    tu_ok(tnt__gpu_sync(TNT__GPU_COPY));
    /* on the device: the first half to the second half of d2, then the second half of d2 back */
    tu_ok(tnt__gpu_memset_zero(d2, N * sizeof(float), TNT__GPU_COMPUTE));
    tu_ok(tnt__gpu_copy_on_device(d2 + N / 2, d, N / 2 * sizeof(float), TNT__GPU_COMPUTE));
    tu_ok(tnt__gpu_copy_to_host(back, d2, N * sizeof(float), TNT__GPU_COMPUTE));
    tu_ok(tnt__gpu_sync(TNT__GPU_COMPUTE));
    for (int i = 0; i < N / 2; i++) {
        assert_true(back[i] == 0.f);
        assert_true(back[N / 2 + i] == host[i]);
    }
    /* a zero-byte copy with no buffers is nothing; an empty allocation is still a distinct address */
    tu_ok(tnt__gpu_copy_to_device(NULL, NULL, 0, TNT__GPU_COMPUTE));
    void *empty = tnt__gpu_malloc(0);
    assert_non_null(empty);
    assert_true(empty != d && empty != d2);
    tnt__gpu_free(empty);
    tnt__gpu_host_free(host);
    tnt__gpu_free(d);
    tnt__gpu_free(d2);
    assert_int_equal(tnt__gpu_emulated_live_bytes(), before);
}

/* what a GPU would fault on (or race with) is an error naming the call and the argument */
static void test_pointer_errors(void **state) {
    (void)state;
    float host[64] = {0};
    float *d = tnt__gpu_malloc(64 * sizeof(float));
    assert_non_null(d);
    assert_int_equal(tnt__gpu_copy_to_device(host, d, 16, TNT__GPU_COMPUTE), TNT_ERR_ARG); /* swapped */
    tu_error_contains("tnt__gpu_copy_to_device: destination");
    tu_error_contains("not inside a device allocation");
    assert_int_equal(tnt__gpu_copy_to_device(d + 1, host, 64 * sizeof(float), TNT__GPU_COMPUTE), TNT_ERR_ARG);
    tu_error_contains("not inside a device allocation"); /* 4 bytes past the end */
    assert_int_equal(tnt__gpu_copy_to_host(d, d, 16, TNT__GPU_COMPUTE), TNT_ERR_ARG);
    tu_error_contains("destination");
    tu_error_contains("is device memory");
    assert_int_equal(tnt__gpu_copy_on_device(d, host, 16, TNT__GPU_COPY), TNT_ERR_ARG);
    tu_error_contains("tnt__gpu_copy_on_device: source");
    assert_int_equal(tnt__gpu_memset_zero(host, 16, TNT__GPU_COPY), TNT_ERR_ARG);
    assert_int_equal(tnt__gpu_copy_to_host(host, d, 16, (tnt__gpu_stream)7), TNT_ERR_ARG);
    tu_error_contains("stream 7");
    assert_int_equal(tnt__gpu_copy_to_host(NULL, d, 16, TNT__GPU_COMPUTE), TNT_ERR_ARG);
    tu_error_contains("NULL");
    tnt__gpu_free(d);
    /* freed memory is no longer device memory */
    assert_int_equal(tnt__gpu_copy_to_device(d, host, 16, TNT__GPU_COMPUTE), TNT_ERR_ARG);
}

static void test_events(void **state) {
    (void)state;
    enum { N = 256 };
    tnt__gpu_event *e = tnt__gpu_event_create();
    assert_non_null(e);
    assert_int_equal(tnt__gpu_stream_wait(TNT__GPU_COMPUTE, e), TNT_ERR_STATE);
    tu_error_contains("never recorded");
    assert_int_equal(tnt__gpu_event_sync(e), TNT_ERR_STATE);
    assert_int_equal(tnt__gpu_event_record(NULL, TNT__GPU_COPY), TNT_ERR_ARG);
    assert_int_equal(tnt__gpu_event_record(e, (tnt__gpu_stream)2), TNT_ERR_ARG);
    assert_int_equal(tnt__gpu_stream_wait(TNT__GPU_COPY, NULL), TNT_ERR_ARG);
    /* the pattern of the reducer: compute writes a bucket, the copy stream waits, copies it out */
    float *d = tnt__gpu_malloc(N * sizeof(float));
    float *pinned = tnt__gpu_host_malloc(N * sizeof(float)), src[N];
    for (int i = 0; i < N; i++) src[i] = (float)(i * i % 97);
    tu_ok(tnt__gpu_copy_to_device(d, src, sizeof src, TNT__GPU_COMPUTE));
    tu_ok(tnt__gpu_event_record(e, TNT__GPU_COMPUTE));
    tu_ok(tnt__gpu_stream_wait(TNT__GPU_COPY, e));
    tu_ok(tnt__gpu_copy_to_host(pinned, d, sizeof src, TNT__GPU_COPY));
    tnt__gpu_event *done = tnt__gpu_event_create();
    tu_ok(tnt__gpu_event_record(done, TNT__GPU_COPY));
    tu_ok(tnt__gpu_event_sync(done));
    assert_memory_equal(pinned, src, sizeof src);
    tnt__gpu_event_destroy(e);
    tnt__gpu_event_destroy(done);
    tnt__gpu_event_destroy(NULL);
    tnt__gpu_host_free(pinned);
    tnt__gpu_free(d);
}

/* The emulated copy stream runs late: what it does is seen only once an event, a sync or a free
 * orders it, as on a GPU, where an unordered reader may see it or not. */
static void test_copy_stream_late(void **state) {
    (void)state;
    enum { N = 64 };
    float *d = tnt__gpu_malloc(N * sizeof(float)), *d2 = tnt__gpu_malloc(N * sizeof(float));
    float *pinned = tnt__gpu_host_malloc(N * sizeof(float)), pageable[N], back[N];
    tnt__gpu_event *up = tnt__gpu_event_create();
    assert_true(d && d2 && pinned && up);
    for (int i = 0; i < N; i++) pageable[i] = (float)i, pinned[i] = (float)(100 + i);
    tu_ok(tnt__gpu_memset_zero(d, sizeof back, TNT__GPU_COMPUTE));
    /* pageable: the source is read at the call; the device sees it once the compute stream waits */
    tu_ok(tnt__gpu_copy_to_device(d, pageable, sizeof pageable, TNT__GPU_COPY));
    pageable[0] = -1.0f;
    assert_int_equal(tnt__gpu_emu_copies_pending(), 1);
    tu_ok(tnt__gpu_copy_on_device(d2, d, sizeof back, TNT__GPU_COMPUTE)); /* no wait: the old zeros */
    tu_ok(tnt__gpu_copy_to_host(back, d2, sizeof back, TNT__GPU_COMPUTE));
    assert_true(back[0] == 0.0f && back[N - 1] == 0.0f);
    tu_ok(tnt__gpu_event_record(up, TNT__GPU_COPY));
    tu_ok(tnt__gpu_stream_wait(TNT__GPU_COMPUTE, up));
    assert_int_equal(tnt__gpu_emu_copies_pending(), 0);
    tu_ok(tnt__gpu_copy_to_host(back, d, sizeof back, TNT__GPU_COMPUTE));
    assert_true(back[0] == 0.0f && back[N - 1] == (float)(N - 1));
    /* page-locked: read when the copy runs, so a host write before the event counts */
    tu_ok(tnt__gpu_copy_to_device(d, pinned, N * sizeof(float), TNT__GPU_COPY));
    pinned[1] = 7.0f;
    tu_ok(tnt__gpu_event_record(up, TNT__GPU_COPY));
    tu_ok(tnt__gpu_event_sync(up));
    tu_ok(tnt__gpu_copy_to_host(back, d, sizeof back, TNT__GPU_COMPUTE));
    assert_true(back[0] == 100.0f && back[1] == 7.0f);
    /* to page-locked memory: written when the stream gets there, not before */
    pinned[2] = -5.0f;
    tu_ok(tnt__gpu_copy_to_host(pinned, d, N * sizeof(float), TNT__GPU_COPY));
    assert_true(pinned[2] == -5.0f);
    tu_ok(tnt__gpu_sync(TNT__GPU_COPY));
    assert_true(pinned[2] == 102.0f);
    /* a compute write after a pending copy's queueing hands it the new bytes: the race a missing
     * event would be on a GPU */
    tu_ok(tnt__gpu_copy_to_host(pinned, d, N * sizeof(float), TNT__GPU_COPY));
    tu_ok(tnt__gpu_memset_zero(d, N * sizeof(float), TNT__GPU_COMPUTE));
    tu_ok(tnt__gpu_memset_zero(d2, N * sizeof(float), TNT__GPU_COPY));
    tnt__gpu_free(d); /* cuMemFree waits for the device: the copies run first */
    assert_int_equal(tnt__gpu_emu_copies_pending(), 0);
    assert_true(pinned[3] == 0.0f);
    /* to pageable memory: the stream drains before the call returns */
    tu_ok(tnt__gpu_copy_to_host(back, d2, sizeof back, TNT__GPU_COPY));
    assert_true(back[5] == 0.0f);
    tnt__gpu_event_destroy(up);
    tnt__gpu_host_free(pinned);
    tnt__gpu_free(d2);
}

/* C = alpha op(A) op(B) + beta C, row-major, in double: the reference */
static void reference_gemm(bool ta, bool tb, int m, int n, int k, float alpha, const float *a, int lda,
                           const float *b, int ldb, float beta, float *c, int ldc) {
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            double s = 0;
            for (int p = 0; p < k; p++) s += (double)(ta ? a[p * lda + i] : a[i * lda + p]) * (tb ? b[j * ldb + p] : b[p * ldb + j]);
            c[i * ldc + j] = (float)(alpha * s + beta * (double)c[i * ldc + j]);
        }
}

/* a host matrix of rows x ld floats, random, and its device copy */
static float *device_copy(const float *host, size_t n) {
    float *d = tnt__gpu_malloc(n * sizeof(float));
    assert_non_null(d);
    tu_ok(tnt__gpu_copy_to_device(d, host, n * sizeof(float), TNT__GPU_COMPUTE));
    return d;
}

static void test_sgemm(void **state) {
    (void)state;
    const int m = 7, n = 13, k = 5, pad = 3;
    for (int t = 0; t < 4; t++) {
        const bool ta = t & 1, tb = t & 2;
        const int lda = (ta ? m : k) + pad, ldb = (tb ? k : n) + pad, ldc = n + pad;
        const int a_rows = ta ? k : m, b_rows = tb ? n : k;
        float *a = malloc(sizeof(float) * a_rows * lda), *b = malloc(sizeof(float) * b_rows * ldb);
        float *c = malloc(sizeof(float) * m * ldc), *expect = malloc(sizeof(float) * m * ldc);
        tu_fill(a, a_rows * lda, 11 + t);
        tu_fill(b, b_rows * ldb, 21 + t);
        tu_fill(c, m * ldc, 31 + t);
        memcpy(expect, c, sizeof(float) * m * ldc);
        reference_gemm(ta, tb, m, n, k, 0.75f, a, lda, b, ldb, -0.5f, expect, ldc);
        float *da = device_copy(a, (size_t)a_rows * lda), *db = device_copy(b, (size_t)b_rows * ldb);
        float *dc = device_copy(c, (size_t)m * ldc);
        tu_ok(tnt__gpu_sgemm(ta, tb, m, n, k, 0.75f, da, lda, db, ldb, -0.5f, dc, ldc));
        tu_ok(tnt__gpu_copy_to_host(c, dc, sizeof(float) * m * ldc, TNT__GPU_COMPUTE));
        tu_ok(tnt__gpu_sync(TNT__GPU_COMPUTE));
        tu_assert_close(c, expect, m * ldc, 1e-5, 1e-6, ta ? (tb ? "sgemm TT" : "sgemm TN") : (tb ? "sgemm NT" : "sgemm NN"));
        tnt__gpu_free(da);
        tnt__gpu_free(db);
        tnt__gpu_free(dc);
        free(a), free(b), free(c), free(expect);
    }
}

static void test_sgemm_strided(void **state) {
    (void)state;
    const int m = 4, n = 6, k = 9, batch = 3;
    for (int t = 0; t < 4; t++) {
        const bool ta = t & 1, tb = t & 2;
        const int lda = ta ? m : k, ldb = (tb ? k : n) + 1, ldc = n;
        const int a_rows = ta ? k : m, b_rows = tb ? n : k;
        /* strides larger than a matrix: gaps between them stay untouched */
        const int sa = a_rows * lda + 5, sb = b_rows * ldb, sc = m * ldc + 2;
        const int na = sa * batch, nb = sb * batch, nc = sc * batch;
        float *a = malloc(sizeof(float) * na), *b = malloc(sizeof(float) * nb), *c = malloc(sizeof(float) * nc);
        float *expect = malloc(sizeof(float) * nc);
        tu_fill(a, na, 41 + t);
        tu_fill(b, nb, 51 + t);
        tu_fill(c, nc, 61 + t);
        memcpy(expect, c, sizeof(float) * nc);
        for (int i = 0; i < batch; i++)
            reference_gemm(ta, tb, m, n, k, 1.f, a + i * sa, lda, b + i * sb, ldb, 1.f, expect + i * sc, ldc);
        float *da = device_copy(a, na), *db = device_copy(b, nb), *dc = device_copy(c, nc);
        tu_ok(tnt__gpu_sgemm_strided(ta, tb, m, n, k, 1.f, da, lda, sa, db, ldb, sb, 1.f, dc, ldc, sc, batch));
        tu_ok(tnt__gpu_copy_to_host(c, dc, sizeof(float) * nc, TNT__GPU_COMPUTE));
        tu_assert_close(c, expect, nc, 1e-5, 1e-6, "strided sgemm");
        /* a stride of 0 for A: one matrix against every B (attention's shared projection) */
        memcpy(expect, c, sizeof(float) * nc);
        for (int i = 0; i < batch; i++)
            reference_gemm(ta, tb, m, n, k, 2.f, a, lda, b + i * sb, ldb, 0.f, expect + i * sc, ldc);
        tu_ok(tnt__gpu_sgemm_strided(ta, tb, m, n, k, 2.f, da, lda, 0, db, ldb, sb, 0.f, dc, ldc, sc, batch));
        tu_ok(tnt__gpu_copy_to_host(c, dc, sizeof(float) * nc, TNT__GPU_COMPUTE));
        tu_assert_close(c, expect, nc, 1e-5, 1e-6, "strided sgemm, stride_a 0");
        tnt__gpu_free(da);
        tnt__gpu_free(db);
        tnt__gpu_free(dc);
        free(a), free(b), free(c), free(expect);
    }
}

static void test_sgemm_errors(void **state) {
    (void)state;
    float host[64] = {0};
    float *d = tnt__gpu_malloc(64 * sizeof(float));
    assert_int_equal(tnt__gpu_sgemm(false, false, 4, 4, 4, 1.f, host, 4, d, 4, 0.f, d, 4), TNT_ERR_ARG);
    tu_error_contains("matrix a");
    assert_int_equal(tnt__gpu_sgemm(false, false, 4, 4, 4, 1.f, d, 3, d, 4, 0.f, d, 4), TNT_ERR_ARG);
    tu_error_contains("lda = 3");
    assert_int_equal(tnt__gpu_sgemm(false, false, 2, 4, 20, 1.f, d, 20, d, 4, 0.f, d, 4), TNT_ERR_ARG);
    tu_error_contains("matrix b"); /* B is 20 x 4: 80 floats past a 64-float allocation */
    assert_int_equal(tnt__gpu_sgemm(false, false, 9, 8, 1, 1.f, d, 1, d, 8, 0.f, d, 8), TNT_ERR_ARG);
    tu_error_contains("matrix c"); /* 72 floats past a 64-float allocation */
    assert_int_equal(tnt__gpu_sgemm(false, false, -1, 4, 4, 1.f, d, 4, d, 4, 0.f, d, 4), TNT_ERR_ARG);
    tu_error_contains("m = -1");
    assert_int_equal(tnt__gpu_sgemm_strided(false, false, 2, 2, 2, 1.f, d, 2, 4, d, 2, 4, 0.f, d, 2, 4, 17),
                     TNT_ERR_ARG); /* 17 matrices of 4 floats: 68 > 64 */
    tu_ok(tnt__gpu_sgemm_strided(false, false, 2, 2, 2, 1.f, d, 2, 4, d, 2, 4, 0.f, d + 32, 2, 4, 8));
    tu_ok(tnt__gpu_sgemm(false, false, 0, 4, 4, 1.f, NULL, 4, NULL, 4, 0.f, NULL, 4)); /* empty: nothing */
    tnt__gpu_free(d);
}

static void test_launch_errors(void **state) {
    (void)state;
    float *d = tnt__gpu_malloc(64);
    long long n = 16;
    void *args[] = {&d, &n};
    assert_int_equal(tnt__gpu_launch("tnt_no_such_kernel", 1, 64, 0, args), TNT_ERR_ARG);
    tu_error_contains("'tnt_no_such_kernel'");
    assert_int_equal(tnt__gpu_launch("tnt_no_such_kernel", 0, 64, 0, args), TNT_ERR_ARG);
    tu_error_contains("grid 0");
    assert_int_equal(tnt__gpu_launch("tnt_no_such_kernel", 1, 2048, 0, args), TNT_ERR_ARG);
    tu_error_contains("2048 threads");
    assert_int_equal(tnt__gpu_launch(NULL, 1, 64, 0, args), TNT_ERR_ARG);
    tnt__gpu_free(d);
}

/* Host code that reads device memory crashes on a GPU; on the emulated device as well, with a
 * message: this program again (/proc/self/exe --touch-device-memory) reads a device float after a
 * good copy, and must die of SIGSEGV having said why. */
static void test_host_touch_faults(void **state) {
    (void)state;
    int err[2];
    assert_int_equal(pipe(err), 0);
    fflush(stdout);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(err[1], STDERR_FILENO);
        close(err[0]);
        execl("/proc/self/exe", "test_gpu_runtime", "--touch-device-memory", (char *)NULL);
        _exit(3);
    }
    close(err[1]);
    char text[2048];
    size_t n = 0;
    ssize_t got;
    while (n < sizeof text - 1 && (got = read(err[0], text + n, sizeof text - 1 - n)) > 0) n += (size_t)got;
    text[n] = 0;
    close(err[0]);
    int status = 0;
    waitpid(pid, &status, 0);
#ifdef __SANITIZE_ADDRESS__ /* AddressSanitizer's handler comes after ours: it reports the SEGV and exits */
    if (!WIFEXITED(status) || WEXITSTATUS(status) == 0 || !strstr(text, "AddressSanitizer: SEGV"))
        fail_msg("expected AddressSanitizer's SEGV report, got status %d; stderr:\n%s", status, text);
#else
    if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGSEGV)
        fail_msg("expected SIGSEGV, got status %d; stderr:\n%s", status, text);
#endif
    if (!strstr(text, "host code touched emulated GPU memory (TNT_GPU_EMULATE) outside the GPU runtime's calls"))
        fail_msg("no message on stderr:\n%s", text);
    if (!strstr(text, "copied fine\n")) fail_msg("the good copy did not run:\n%s", text);
}

/* the child of test_host_touch_faults */
static int touch_device_memory(void) {
    if (tnt__config_load() != TNT_OK || tnt__gpu_open(0) != TNT_OK) return 1;
    float *d = tnt__gpu_malloc(64 * sizeof(float)), x[64] = {0};
    if (!d || tnt__gpu_copy_to_device(d, x, sizeof x, TNT__GPU_COMPUTE) != TNT_OK) return 1;
    fprintf(stderr, "copied fine\n");
    volatile float v = d[3]; /* a host read of device memory */
    (void)v;
    return 0;
}

/* the last test: everything freed, and after close the device refuses again */
static void test_close(void **state) {
    (void)state;
    assert_int_equal(tnt__gpu_emulated_live_allocations(), 0);
    assert_int_equal(tnt__gpu_emulated_live_bytes(), 0);
    tnt__gpu_close();
    assert_false(tnt__gpu_is_open());
    assert_null(tnt__gpu_malloc(4));
    tu_error_contains("no GPU is open");
    tu_ok(tnt__gpu_open(0)); /* and opens again */
    tnt__gpu_close();
}

int main(int argc, char **argv) {
    setenv("TNT_GPU_EMULATE", "1", 1);
    if (argc > 1 && !strcmp(argv[1], "--touch-device-memory")) return touch_device_memory();
    if (tnt__config_load() != TNT_OK) return fprintf(stderr, "%s\n", tnt_last_error()), 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_before_open),   cmocka_unit_test(test_open),
        cmocka_unit_test(test_memory_and_copies), cmocka_unit_test(test_pointer_errors),
        cmocka_unit_test(test_events),        cmocka_unit_test(test_copy_stream_late),
        cmocka_unit_test(test_sgemm),
        cmocka_unit_test(test_sgemm_strided), cmocka_unit_test(test_sgemm_errors),
        cmocka_unit_test(test_launch_errors), cmocka_unit_test(test_host_touch_faults),
        cmocka_unit_test(test_close),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

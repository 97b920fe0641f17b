/* test_gpu_fallback.c: the GPU backend's loader and the device choice of tnt_init on a machine
 * without a usable GPU. The loader runs once per process, so each case runs in a child process
 * with its own environment: no driver at all (TNT_CUDA_DRIVER pointing into an empty folder), the
 * CUDA SDK's stub libcuda.so (where installed), fake drivers built by the tests (no device; a
 * function missing), a bad TNT_CUDA_LIBDIR. Each gives the CPU with its one-line reason;
 * TNT_DEVICE=gpu makes the reason an error of tnt_init, auto one INFO line; the emulated device
 * (TNT_GPU_EMULATE=N) stands for N GPUs in the choice of ordinal. */
#include "testutil.h"

#include "core/config.h"
#include "comm/comm.h"
#include "gpu/api.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define STUB "/usr/local/cuda/lib64/stubs/libcuda.so"

typedef struct outcome {
    int init_status; /* tnt_init's, or TNT_OK when the case does not call it */
    bool available;
    int device_count;
    char why[256], gpu_status[384], error[1024], log[4096];
    char body[1024]; /* what a case's own checks found wrong ("" when all held) */
} outcome;

/* A case's own checks, run in the child after the settings are read: "" or what went wrong. */
typedef void (*case_body)(char *wrong, size_t size);

static const char *const gpu_settings[] = {"TNT_DEVICE", "TNT_GPU_COMM", "TNT_GPU_ORDINAL", "TNT_CUDA_LIBDIR",
                                           "TNT_CUDA_DRIVER", "TNT_GPU_EMULATE", "TNT_GPU_TF32", "TNT_LOG_LEVEL",
                                           "TNT_NCCL_LIBRARY"};

/* Runs one case in a child: the settings `env` ("NAME=VALUE", NULL-terminated) on top of none of
 * the GPU settings; tnt_init (init) or only the loader. Its stderr is kept in log. */
static outcome run_case_body(const char *const *env, bool init, case_body body) {
    outcome o;
    memset(&o, 0, sizeof o);
    char log_path[] = "/tmp/tnt_gpu_fallback_XXXXXX";
    int log_fd = mkstemp(log_path);
    assert_true(log_fd >= 0);
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        dup2(log_fd, STDERR_FILENO);
        for (size_t i = 0; i < TNT_ARRAY_LEN(gpu_settings); i++) unsetenv(gpu_settings[i]);
        for (const char *const *e = env; *e; e++) putenv((char *)*e);
        outcome r;
        memset(&r, 0, sizeof r);
        const char *why = "";
        if (init) {
            r.init_status = tnt_init(NULL, NULL);
            snprintf(r.error, sizeof r.error, "%s", r.init_status != TNT_OK ? tnt_last_error() : "");
        } else if (tnt__config_load() != TNT_OK) {
            r.init_status = TNT_ERR_ARG;
            snprintf(r.error, sizeof r.error, "%s", tnt_last_error());
        }
        if (r.init_status == TNT_OK) {
            r.available = tnt__gpu_available(&why);
            snprintf(r.why, sizeof r.why, "%s", why);
            r.device_count = tnt_gpu_device_count();
            snprintf(r.gpu_status, sizeof r.gpu_status, "%s", tnt_gpu_status());
        }
        if (body && r.init_status == TNT_OK) body(r.body, sizeof r.body);
        if (init && r.init_status == TNT_OK) tnt_finalize();
        fflush(stderr);
        _exit(write(fds[1], &r, sizeof r) == (ssize_t)sizeof r ? 0 : 3);
    }
    close(fds[1]);
    ssize_t got = read(fds[0], &o, sizeof o);
    close(fds[0]);
    int wstatus = 0;
    waitpid(pid, &wstatus, 0);
    FILE *f = fdopen(log_fd, "r");
    rewind(f);
    size_t n = fread(o.log, 1, sizeof o.log - 1, f);
    o.log[n] = 0;
    fclose(f);
    unlink(log_path);
    if (got != (ssize_t)sizeof o || !WIFEXITED(wstatus) || WEXITSTATUS(wstatus) != 0)
        fail_msg("the case's child failed (status %d); its stderr:\n%s", wstatus, o.log);
    return o;
}

static outcome run_case(const char *const *env, bool init) { return run_case_body(env, init, NULL); }

static void expect_cpu(const outcome *o, const char *reason) {
    assert_int_equal(o->init_status, TNT_OK);
    assert_false(o->available);
    assert_int_equal(o->device_count, 0);
    if (strcmp(o->why, reason)) fail_msg("reason \"%s\", expected \"%s\"", o->why, reason);
}

/* no driver anywhere: an empty folder */
static void test_no_driver(void **state) {
    (void)state;
    char dir[] = "/tmp/tnt_no_cuda_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char setting[128];
    snprintf(setting, sizeof setting, "TNT_CUDA_DRIVER=%s/libcuda.so.1", dir);
    const char *env[] = {setting, NULL};
    outcome o = run_case(env, false);
    char reason[160];
    snprintf(reason, sizeof reason, "no %s/libcuda.so.1", dir);
    expect_cpu(&o, reason);
    rmdir(dir);
    /* and by the normal search, where this machine has no driver */
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (h) {
        dlclose(h);
        return;
    }
    const char *none[] = {NULL};
    o = run_case(none, false);
    expect_cpu(&o, "no libcuda.so.1");
}

/* the SDK's stub: every function there, cuInit refuses */
static void test_sdk_stub(void **state) {
    (void)state;
    struct stat st;
    if (stat(STUB, &st) != 0) {
        printf("skipped: no %s (no CUDA toolkit here)\n", STUB);
        return;
    }
    const char *env[] = {"TNT_CUDA_DRIVER=" STUB, NULL};
    outcome o = run_case(env, false);
    expect_cpu(&o, "cuInit: CUDA_ERROR_STUB_LIBRARY (34)");
}

static void test_fake_no_device(void **state) {
    (void)state;
    const char *env[] = {"TNT_CUDA_DRIVER=" FAKE_CUDA_NODEVICE, NULL};
    outcome o = run_case(env, false);
    expect_cpu(&o, "cuInit: CUDA_ERROR_NO_DEVICE (100)");
}

static void test_fake_missing_symbol(void **state) {
    (void)state;
    const char *env[] = {"TNT_CUDA_DRIVER=" FAKE_CUDA_MISSING, NULL};
    outcome o = run_case(env, false);
    expect_cpu(&o, FAKE_CUDA_MISSING " lacks cuLaunchKernel (a driver older than CUDA 11.5?)");
}

static void test_bad_libdir(void **state) {
    (void)state;
    const char *env[] = {"TNT_CUDA_LIBDIR=/usr/lib:/nonexistent/cuda/lib", "TNT_CUDA_DRIVER=" FAKE_CUDA_NODEVICE, NULL};
    outcome o = run_case(env, false);
    expect_cpu(&o, "TNT_CUDA_LIBDIR: /nonexistent/cuda/lib is not a folder");
}

#ifdef TNT_GPU_KERNELS
/* C = op(A) op(B) row-major in double */
static void row_major_gemm(bool ta, bool tb, int m, int n, int k, const float *a, int lda, const float *b, int ldb,
                           float *c, int ldc) {
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            double s = 0;
            for (int p = 0; p < k; p++) s += (double)(ta ? a[p * lda + i] : a[i * lda + p]) * (tb ? b[j * ldb + p] : b[p * ldb + j]);
            c[i * ldc + j] = (float)s;
        }
}

#define WRONG(...) return (void)snprintf(wrong, size, __VA_ARGS__)

/* The runtime's real-device code over the working fake driver and the fake cuBLAS (host memory
 * behind both): open, copies, the row-major to column-major mapping of sgemm, TF32's math mode,
 * an unknown kernel, the errors of the check macro. */
static void real_path_body(char *wrong, size_t size) {
    if (tnt__gpu_emulated() || tnt__gpu_device_count() != 2) WRONG("expected the fake driver's 2 devices");
    if (tnt__gpu_open(1) != TNT_OK) WRONG("open: %s", tnt_last_error());
    if (strcmp(tnt__gpu_device_name(), "Fake GPU B (0000:02:00.0)")) WRONG("name \"%s\"", tnt__gpu_device_name());
    enum { M = 5, N = 7, K = 3, LD = 9 };
    float a[M * LD], b[N * LD], c[M * LD], expect[M * LD]; /* A is M x K or K x M (M > K), B K x N or N x K */
    for (int i = 0; i < M * LD; i++) a[i] = (float)(i % 11) - 5.f;
    for (int i = 0; i < N * LD; i++) b[i] = (float)(i % 7) * 0.5f - 1.f;
    float *da = tnt__gpu_malloc(sizeof a), *db = tnt__gpu_malloc(sizeof b), *dc = tnt__gpu_malloc(sizeof c);
    if (!da || !db || !dc) WRONG("malloc: %s", tnt_last_error());
    if (tnt__gpu_copy_to_device(da, a, sizeof a, TNT__GPU_COPY) || tnt__gpu_copy_to_device(db, b, sizeof b, TNT__GPU_COMPUTE))
        WRONG("copy: %s", tnt_last_error());
    for (int t = 0; t < 4; t++) {
        const bool ta = t & 1, tb = t & 2;
        if (tnt__gpu_memset_zero(dc, sizeof c, TNT__GPU_COMPUTE) ||
            tnt__gpu_sgemm(ta, tb, M, N, K, 1.f, da, LD, db, LD, 0.f, dc, LD) ||
            tnt__gpu_copy_to_host(c, dc, sizeof c, TNT__GPU_COMPUTE) || tnt__gpu_sync(TNT__GPU_COMPUTE))
            WRONG("sgemm %d: %s", t, tnt_last_error());
        memset(expect, 0, sizeof expect);
        row_major_gemm(ta, tb, M, N, K, a, LD, b, LD, expect, LD);
        if (memcmp(c, expect, sizeof c)) WRONG("sgemm trans_a %d trans_b %d: the row-major result differs", ta, tb);
    }
    /* two batches of the N x N transposed product at strides */
    if (tnt__gpu_sgemm_strided(false, false, 2, 3, 2, 1.f, da, 2, 4, db, 3, 6, 0.f, dc, 3, 6, 2) ||
        tnt__gpu_copy_to_host(c, dc, 12 * sizeof(float), TNT__GPU_COMPUTE))
        WRONG("strided: %s", tnt_last_error());
    for (int i = 0; i < 2; i++) {
        row_major_gemm(false, false, 2, 3, 2, a + 4 * i, 2, b + 6 * i, 3, expect + 6 * i, 3);
        if (memcmp(c + 6 * i, expect + 6 * i, 6 * sizeof(float))) WRONG("strided sgemm batch %d differs", i);
    }
    void *h = dlopen(FAKE_CUBLAS, RTLD_NOW | RTLD_LOCAL);
    const int *mode = h ? dlsym(h, "fake_cublas_math_mode") : NULL;
    if (!mode || *mode != TNT_CUBLAS_DEFAULT_MATH) WRONG("cuBLAS's math mode at open: %d", mode ? *mode : -2);
    tnt__gpu_set_tf32(true);
    if (*mode != TNT_CUBLAS_TF32_TENSOR_OP_MATH) WRONG("TF32 on: math mode %d", *mode);
    tnt__gpu_set_tf32(false);
    if (*mode != TNT_CUBLAS_DEFAULT_MATH) WRONG("TF32 off: math mode %d", *mode);
    /* cuBLAS's own refusal comes through the check macro with the call and the status name */
    if (tnt__gpu_sgemm(false, false, 2, 2, 2, 42.f, da, 2, db, 2, 0.f, dc, 2) != TNT_ERR_BACKEND ||
        !strstr(tnt_last_error(), "gpu/blas.c:") || !strstr(tnt_last_error(), ": cublasSgemm_v2(tnt__gpu.cublas, ") ||
        !strstr(tnt_last_error(), "): CUBLAS_STATUS_EXECUTION_FAILED (13)"))
        WRONG("a failing cublasSgemm_v2: %s", tnt_last_error());
    void *args[] = {&da};
    if (tnt__gpu_launch("tnt_k_scale", 1, 32, 0, args) != TNT_ERR_ARG ||
        !strstr(tnt_last_error(), "no kernel named 'tnt_k_scale' in the PTX (cuModuleGetFunction: CUDA_ERROR_NOT_FOUND)"))
        WRONG("launch of a kernel the module lacks: %s", tnt_last_error());
    if (tnt__gpu_malloc((size_t)1 << 40) || !strstr(tnt_last_error(), "CUDA_ERROR_OUT_OF_MEMORY (2); 1024 of 2048 MiB free"))
        WRONG("1 TiB: %s", tnt_last_error());
    tnt__gpu_free(da);
    tnt__gpu_free(db);
    tnt__gpu_free(dc);
    tnt__gpu_close();
    wrong[0] = 0;
}
#endif

/* the working fake driver: without GPU kernels in the build the loader stops there; with them the
 * real-device code runs over the fake cuBLAS */
static void test_fake_working(void **state) {
    (void)state;
    const char *env[] = {"TNT_CUDA_DRIVER=" FAKE_CUDA_WORKING, "TNT_CUDA_LIBDIR=" FAKE_CUBLAS_DIR, NULL};
#ifndef TNT_GPU_KERNELS
    outcome o = run_case(env, false);
    expect_cpu(&o, "built without GPU kernels (TNT_GPU=OFF, or no clang-14 at configure time)");
#else
    outcome o = run_case_body(env, false, real_path_body);
    assert_true(o.available);
    assert_int_equal(o.device_count, 2);
    if (o.body[0]) fail_msg("%s\n%s", o.body, o.log);
    /* tnt_init: local rank 0 takes GPU 0 */
    const char *init_env[] = {"TNT_DEVICE=gpu", "TNT_CUDA_DRIVER=" FAKE_CUDA_WORKING,
                              "TNT_CUDA_LIBDIR=" FAKE_CUBLAS_DIR, NULL};
    o = run_case(init_env, true);
    assert_int_equal(o.init_status, TNT_OK);
    assert_string_equal(o.gpu_status, "gpu 0: Fake GPU A (0000:01:00.0)");
#endif
}

/* NCCL over the working fake driver: what the loader makes of no library, a library missing a
 * function and one too old (the GPU stays usable, gradients go through the host: the reason
 * named), and the runtime over the working fake NCCL (its id, one rank, an in-place sum on the
 * copy stream, the communicator left when the device closes) */
static const char *expected_nccl_why; /* set before the fork: the child reads it */

static void nccl_absent_body(char *wrong, size_t size) {
    const char *why = NULL;
    if (!tnt__gpu_available(NULL)) WRONG("the GPU itself should stay usable without NCCL");
    if (tnt__gpu_nccl_available(&why) || strcmp(why, expected_nccl_why))
        WRONG("NCCL's reason \"%s\", expected \"%s\"", why ? why : "(none)", expected_nccl_why);
    if (tnt__gpu_nccl_version() != 0) WRONG("version %d without NCCL", tnt__gpu_nccl_version());
    char id[TNT__GPU_NCCL_ID_BYTES];
    if (tnt__gpu_nccl_unique_id(id) != TNT_ERR_UNSUPPORTED || !strstr(tnt_last_error(), expected_nccl_why))
        WRONG("unique id without NCCL: %s", tnt_last_error());
    /* the choice: host staging, with the loader's reason */
    char line[320];
    tnt__gpu_comm_inputs in = {.setting = TNT__GPU_COMM_NCCL, .ranks = 2, .nccl = false, .nccl_why = why, .shared_by = 1};
    if (tnt__gpu_comm_choose(&in, line, sizeof line) != TNT__GPU_COMM_HOST || strcmp(line, expected_nccl_why))
        WRONG("choice: \"%s\"", line);
    wrong[0] = 0;
}

static void nccl_working_body(char *wrong, size_t size) {
    const char *why = NULL;
    if (!tnt__gpu_nccl_available(&why)) WRONG("NCCL unavailable: %s", why);
    if (tnt__gpu_nccl_version() != 22809) WRONG("version %d", tnt__gpu_nccl_version());
    void *h = dlopen(FAKE_NCCL_WORKING, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    int *sums = h ? dlsym(h, "fake_nccl_sums") : NULL, *dtype = h ? dlsym(h, "fake_nccl_last_dtype") : NULL;
    int *op = h ? dlsym(h, "fake_nccl_last_op") : NULL, *destroyed = h ? dlsym(h, "fake_nccl_destroyed") : NULL;
    size_t *count = h ? dlsym(h, "fake_nccl_last_count") : NULL;
    const void **send = h ? dlsym(h, "fake_nccl_last_send") : NULL, **recv = h ? dlsym(h, "fake_nccl_last_recv") : NULL;
    CUstream *stream = h ? dlsym(h, "fake_nccl_last_stream") : NULL;
    if (!sums || !dtype || !op || !destroyed || !count || !send || !recv || !stream) WRONG("the fake NCCL's records");
    char id[TNT__GPU_NCCL_ID_BYTES];
    if (tnt__gpu_nccl_allreduce(NULL, 4, TNT__GPU_COPY) != TNT_ERR_STATE) WRONG("a sum before open: %s", tnt_last_error());
    if (tnt__gpu_open(0) || tnt__gpu_nccl_unique_id(id) || tnt__gpu_nccl_open(id, 1, 0))
        WRONG("open: %s", tnt_last_error());
    if (tnt__gpu_nccl_open(id, 2, 1) != TNT_ERR_STATE || !strstr(tnt_last_error(), "already open as rank 0 of 1"))
        WRONG("opened again otherwise: %s", tnt_last_error());
    float *d = tnt__gpu_malloc(64 * sizeof(float));
    if (!d || tnt__gpu_nccl_allreduce(d + 8, 40, TNT__GPU_COPY)) WRONG("sum: %s", tnt_last_error());
    if (*sums != 1 || *count != 40 || *send != d + 8 || *recv != d + 8 || *dtype != TNT_NCCL_FLOAT32 ||
        *op != TNT_NCCL_SUM || *stream != tnt__gpu.streams[TNT__GPU_COPY])
        WRONG("the sum's arguments: %d calls, count %zu, dtype %d, op %d, in place %d, copy stream %d", *sums, *count,
              *dtype, *op, *send == d + 8 && *recv == d + 8, *stream == tnt__gpu.streams[TNT__GPU_COPY]);
    if (tnt__gpu_nccl_allreduce(d, 0, TNT__GPU_COPY) || *sums != 1) WRONG("an empty sum reached NCCL");
    tnt__gpu_free(d);
    tnt__gpu_close();
    if (*destroyed != 1 || tnt__gpu_nccl_is_open()) WRONG("the communicator outlived the device");
    tnt__gpu_comm_inputs in = {.setting = TNT__GPU_COMM_AUTO, .ranks = 2, .nccl = true, .shared_by = 1};
    char line[320];
    if (tnt__gpu_comm_choose(&in, line, sizeof line) != TNT__GPU_COMM_NCCL || line[0]) WRONG("choice: \"%s\"", line);
    wrong[0] = 0;
}

static void test_fake_nccl(void **state) {
    (void)state;
#ifndef TNT_GPU_KERNELS
    print_message("built without GPU kernels: the loader stops before NCCL (test_gpu_comm checks the choice)\n");
#else
    struct { const char *lib, *why; } cases[] = {
        {"TNT_NCCL_LIBRARY=/nonexistent/libnccl.so.2", "no /nonexistent/libnccl.so.2"},
        {"TNT_NCCL_LIBRARY=" FAKE_NCCL_MISSING, FAKE_NCCL_MISSING " lacks ncclAllReduce"},
        {"TNT_NCCL_LIBRARY=" FAKE_NCCL_OLD, "NCCL 2.7.8 is too old (2.10 or newer)"},
    };
    for (size_t i = 0; i < TNT_ARRAY_LEN(cases); i++) {
        const char *env[] = {"TNT_CUDA_DRIVER=" FAKE_CUDA_WORKING, "TNT_CUDA_LIBDIR=" FAKE_CUBLAS_DIR, cases[i].lib, NULL};
        expected_nccl_why = cases[i].why;
        outcome o = run_case_body(env, false, nccl_absent_body);
        assert_true(o.available);
        if (o.body[0]) fail_msg("%s: %s\n%s", cases[i].lib, o.body, o.log);
    }
    const char *env[] = {"TNT_CUDA_DRIVER=" FAKE_CUDA_WORKING, "TNT_CUDA_LIBDIR=" FAKE_CUBLAS_DIR,
                         "TNT_NCCL_LIBRARY=" FAKE_NCCL_WORKING, NULL};
    outcome o = run_case_body(env, false, nccl_working_body);
    if (o.body[0]) fail_msg("%s\n%s", o.body, o.log);
#endif
}

/* tnt_init: cpu never loads anything; gpu without a backend is an error naming the reason; auto
 * (the default) runs on the CPU with one INFO line */
static void test_init_choice(void **state) {
    (void)state;
    const char *cpu[] = {"TNT_DEVICE=cpu", "TNT_CUDA_DRIVER=" FAKE_CUDA_NODEVICE, NULL};
    outcome o = run_case(cpu, true);
    assert_int_equal(o.init_status, TNT_OK);
    assert_string_equal(o.gpu_status, "cpu: TNT_DEVICE=cpu");

    const char *unset[] = {"TNT_CUDA_DRIVER=" FAKE_CUDA_NODEVICE, NULL}; /* the default: auto */
    o = run_case(unset, true);
    assert_int_equal(o.init_status, TNT_OK);
    assert_string_equal(o.gpu_status, "cpu: cuInit: CUDA_ERROR_NO_DEVICE (100)");

    const char *gpu[] = {"TNT_DEVICE=gpu", "TNT_CUDA_DRIVER=" FAKE_CUDA_NODEVICE, NULL};
    o = run_case(gpu, true);
    assert_int_equal(o.init_status, TNT_ERR_UNSUPPORTED);
    if (!strstr(o.error, "TNT_DEVICE=gpu: no usable GPU: cuInit: CUDA_ERROR_NO_DEVICE (100)"))
        fail_msg("tnt_init's error: %s", o.error);

    const char *autom[] = {"TNT_DEVICE=AUTO", "TNT_LOG_LEVEL=INFO", "TNT_CUDA_DRIVER=" FAKE_CUDA_NODEVICE, NULL};
    o = run_case(autom, true);
    assert_int_equal(o.init_status, TNT_OK);
    assert_string_equal(o.gpu_status, "cpu: cuInit: CUDA_ERROR_NO_DEVICE (100)");
    const char *line = "INFO: [rank 0] TNT_DEVICE=auto: running on the CPU: cuInit: CUDA_ERROR_NO_DEVICE (100)\n";
    const char *at = strstr(o.log, line);
    if (!at || strstr(at + strlen(line), "TNT_DEVICE=auto")) fail_msg("expected the INFO line once in:\n%s", o.log);

    const char *quiet[] = {"TNT_DEVICE=auto", "TNT_CUDA_DRIVER=" FAKE_CUDA_NODEVICE, NULL};
    o = run_case(quiet, true);
    assert_string_equal(o.log, ""); /* at the default level (WARNING) nothing is said */
}

/* the emulated backend: TNT_GPU_EMULATE GPUs; one process takes GPU 0 (local rank 0), or
 * TNT_GPU_ORDINAL's */
static void test_init_emulated(void **state) {
    (void)state;
    const char *one[] = {"TNT_DEVICE=gpu", "TNT_GPU_EMULATE=1", NULL};
    outcome o = run_case(one, true);
    assert_int_equal(o.init_status, TNT_OK);
    assert_true(o.available);
    assert_int_equal(o.device_count, 1);
    assert_string_equal(o.gpu_status, "gpu 0: emulated device");

    const char *ordinal[] = {"TNT_DEVICE=auto", "TNT_GPU_EMULATE=3", "TNT_GPU_ORDINAL=2", NULL};
    o = run_case(ordinal, true);
    assert_int_equal(o.init_status, TNT_OK);
    assert_int_equal(o.device_count, 3);
    assert_string_equal(o.gpu_status, "gpu 2: emulated device");

    const char *beyond[] = {"TNT_DEVICE=auto", "TNT_GPU_EMULATE=2", "TNT_GPU_ORDINAL=2", NULL};
    o = run_case(beyond, true);
    assert_int_equal(o.init_status, TNT_ERR_ARG);
    if (!strstr(o.error, "TNT_GPU_ORDINAL=2: this node has 2 GPUs (0 to 1)")) fail_msg("error: %s", o.error);
}

/* bad values of the GPU settings name the variable and what it takes */
static void test_bad_settings(void **state) {
    (void)state;
    static const struct {
        const char *setting, *message;
    } cases[] = {
        {"TNT_DEVICE=tpu", "TNT_DEVICE=tpu: expected auto, cpu or gpu"},
        {"TNT_GPU_COMM=gloo", "TNT_GPU_COMM=gloo: expected auto, host, mpi or nccl"},
        {"TNT_GPU_ORDINAL=-1", "TNT_GPU_ORDINAL=-1: expected an integer from 0 to 1023"},
        {"TNT_GPU_EMULATE=yes", "TNT_GPU_EMULATE=yes: expected an integer from 0 to 64"},
        {"TNT_GPU_TF32=maybe", "TNT_GPU_TF32=maybe: expected 1, 0, true, false, yes or no"},
    };
    for (size_t i = 0; i < TNT_ARRAY_LEN(cases); i++) {
        const char *env[] = {cases[i].setting, NULL};
        outcome o = run_case(env, true);
        assert_int_equal(o.init_status, TNT_ERR_ARG);
        if (!strstr(o.error, cases[i].message)) fail_msg("%s: error \"%s\"", cases[i].setting, o.error);
    }
    /* good ones parse */
    const char *good[] = {"TNT_GPU_COMM=MPI", "TNT_GPU_TF32=1", "TNT_CUDA_LIBDIR=/tmp", NULL};
    outcome o = run_case(good, true);
    assert_int_equal(o.init_status, TNT_OK);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_driver),        cmocka_unit_test(test_sdk_stub),
        cmocka_unit_test(test_fake_no_device),   cmocka_unit_test(test_fake_missing_symbol),
        cmocka_unit_test(test_bad_libdir),       cmocka_unit_test(test_fake_working),
        cmocka_unit_test(test_init_choice),      cmocka_unit_test(test_fake_nccl),
        cmocka_unit_test(test_init_emulated),    cmocka_unit_test(test_bad_settings),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* test_gpu_fallback.c: the GPU backend's loader and the device choice of tnt_init on a machine
 * without a usable GPU. The loader runs once per process, so each case runs in a child process
 * with its own environment: no driver at all (TNT_CUDA_DRIVER pointing into an empty folder), the
 * CUDA SDK's stub libcuda.so (where installed), fake drivers built by the tests (no device; a
 * function missing), a bad TNT_CUDA_LIBDIR. Each gives the CPU with its one-line reason;
 * TNT_DEVICE=gpu makes the reason an error of tnt_init, auto one INFO line; the emulated device
 * (TNT_GPU_EMULATE=N) stands for N GPUs in the choice of ordinal. */
#include "testutil.h"

#include "core/config.h"
#include "gpu/gpu.h"

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
} outcome;

static const char *const gpu_settings[] = {"TNT_DEVICE", "TNT_GPU_COMM", "TNT_GPU_ORDINAL", "TNT_CUDA_LIBDIR",
                                           "TNT_CUDA_DRIVER", "TNT_GPU_EMULATE", "TNT_GPU_TF32", "TNT_LOG_LEVEL"};

/* Runs one case in a child: the settings `env` ("NAME=VALUE", NULL-terminated) on top of none of
 * the GPU settings; tnt_init (init) or only the loader. Its stderr is kept in log. */
static outcome run_case(const char *const *env, bool init) {
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

/* tnt_init: cpu (the default) never loads anything; gpu without a backend is an error naming the
 * reason; auto runs on the CPU with one INFO line */
static void test_init_choice(void **state) {
    (void)state;
    const char *cpu[] = {"TNT_CUDA_DRIVER=" FAKE_CUDA_NODEVICE, NULL};
    outcome o = run_case(cpu, true);
    assert_int_equal(o.init_status, TNT_OK);
    assert_string_equal(o.gpu_status, "cpu: TNT_DEVICE=cpu");

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
        cmocka_unit_test(test_bad_libdir),       cmocka_unit_test(test_init_choice),
        cmocka_unit_test(test_init_emulated),    cmocka_unit_test(test_bad_settings),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

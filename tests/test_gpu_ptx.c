/* test_gpu_ptx.c: the PTX embedded in the library (tnt__gpu_ptx, built by clang-14 where
 * TNT_GPU_KERNELS is defined; exit 77, a ctest SKIP, elsewhere):
 *   (no option)  .version 7.5, .target sm_80, an .entry for every kernel of kernel_list.h (the names
 *                the host table and the launcher use), no call to a function the PTX does not
 *                define (the libm trap: a logf in a kernel becomes `.extern .func logf`);
 *   --ptxas      NVIDIA's assembler accepts it for sm_80 and sm_90 (the driver's JIT does the same
 *                on an H100), where ptxas exists (PATH or /usr/local/cuda/bin), else exit 77;
 *   --nvcc       nvcc compiles the same source to PTX with an .entry for every kernel, where nvcc
 *                exists, else exit 77. */
#include "testutil.h"

#include "gpu/host_kernels.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const kernel_names[] = {
#define TNT_K(name, ...) #name,
#include "gpu/kernels/kernel_list.h"
#undef TNT_K
};
#define N_KERNELS (sizeof kernel_names / sizeof kernel_names[0])

/* 1 when ptx has ".entry NAME(" */
static int has_entry(const char *ptx, const char *name) {
    char pat[160];
    snprintf(pat, sizeof pat, ".entry %s(", name);
    return strstr(ptx, pat) != NULL;
}

/* 1 when ptx defines (not only declares with .extern) the function name */
static int defines_func(const char *ptx, const char *name) {
    const size_t len = strlen(name);
    for (const char *p = strstr(ptx, ".func"); p; p = strstr(p + 5, ".func")) {
        const char *line = p;
        while (line > ptx && line[-1] != '\n') line--;
        if (strstr(line, ".extern") && strstr(line, ".extern") < p) continue;
        const char *q = p + 5;
        while (*q == ' ' || *q == '\t') q++;
        if (*q == '(') { /* return value */
            q = strchr(q, ')');
            if (!q) return 0;
            q++;
            while (*q == ' ' || *q == '\t') q++;
        }
        if (!strncmp(q, name, len) && (q[len] == '(' || q[len] == ' ' || q[len] == '\n' || q[len] == ';'))
            return 1;
    }
    return 0;
}

/* The names of functions called but not defined, and of .extern functions, written into out
 * (comma-separated); returns how many. */
static int undefined_calls(const char *ptx, char *out, size_t cap) {
    int bad = 0;
    out[0] = 0;
    for (const char *p = strstr(ptx, ".extern"); p; p = strstr(p + 7, ".extern")) {
        const char *e = strchr(p, '\n');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (strlen(out) + n + 3 < cap) strncat(out, p, n), strcat(out, "; ");
        bad++;
    }
    for (const char *p = strstr(ptx, "call"); p; p = strstr(p + 4, "call")) {
        if (p > ptx && (p[-1] != ' ' && p[-1] != '\t')) continue; /* part of a longer word */
        const char *q = p + 4;
        if (!strncmp(q, ".uni", 4)) q += 4;
        if (*q != ' ' && *q != '\t') continue;
        while (*q == ' ' || *q == '\t') q++;
        if (*q == '(') { /* (retval), */
            q = strchr(q, ')');
            if (!q) break;
            q++;
            while (*q == ',' || *q == ' ' || *q == '\t') q++;
        }
        char name[128];
        size_t n = 0;
        while (n + 1 < sizeof name && (isalnum((unsigned char)q[n]) || q[n] == '_' || q[n] == '$' || q[n] == '.'))
            name[n] = q[n], n++;
        name[n] = 0;
        if (n && !defines_func(ptx, name)) {
            if (strlen(out) + n + 3 < cap) strcat(out, name), strcat(out, "; ");
            bad++;
        }
    }
    return bad;
}

static void test_checker_finds_libm_call(void **state) {
    (void)state; /* the check itself: what clang writes for a kernel that calls logf */
    const char *bad = ".version 7.5\n.target sm_80\n.extern .func  (.param .b32 func_retval0) logf\n"
                      "(\n\t.param .b32 logf_param_0\n)\n;\n.visible .entry k(\n)\n{\n"
                      "\tcall.uni (retval0), \n\tlogf, \n\t(\n\tparam0\n\t);\n\tret;\n}\n";
    char out[512];
    assert_int_equal(undefined_calls(bad, out, sizeof out) > 0, 1);
    assert_non_null(strstr(out, "logf"));
    const char *good = ".func  (.param .b32 func_retval0) helper(\n)\n{\n}\n.visible .entry k(\n)\n{\n"
                       "\tcall.uni (retval0), \n\thelper, \n\t(\n\t);\n}\n";
    assert_int_equal(undefined_calls(good, out, sizeof out), 0);
}

#ifdef TNT_GPU_KERNELS
static void test_embedded_ptx(void **state) {
    (void)state;
    const char *ptx = tnt__gpu_ptx;
    assert_true(strlen(ptx) > 1000);
    if (!strstr(ptx, "\n.version 7.5\n")) fail_msg("the embedded PTX is not .version 7.5");
    if (!strstr(ptx, "\n.target sm_80\n")) fail_msg("the embedded PTX is not .target sm_80");
    int entries = 0;
    for (const char *p = strstr(ptx, ".entry "); p; p = strstr(p + 7, ".entry ")) entries++;
    for (size_t i = 0; i < N_KERNELS; i++) {
        if (!has_entry(ptx, kernel_names[i])) fail_msg("the embedded PTX has no .entry %s", kernel_names[i]);
        if (!tnt__gpu_host_kernel_find(kernel_names[i])) fail_msg("no host build of %s", kernel_names[i]);
    }
    /* no kernel missing from the list (the launcher finds kernels by the list's names) */
    assert_int_equal(entries, (int)N_KERNELS);
    char out[2048];
    if (undefined_calls(ptx, out, sizeof out)) fail_msg("the PTX calls undefined functions: %s", out);
    printf("embedded PTX: %zu bytes, %d kernels\n", strlen(ptx), entries);
}
#endif

/* PATH's program, else /usr/local/cuda/bin's; NULL when neither */
static const char *find_tool(const char *name, char *buf, size_t cap) {
    const char *path = getenv("PATH");
    char dirs[4096];
    snprintf(dirs, sizeof dirs, "%s:/usr/local/cuda/bin", path ? path : "");
    for (char *save = NULL, *d = strtok_r(dirs, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
        snprintf(buf, cap, "%s/%s", d, name);
        if (access(buf, X_OK) == 0) return buf;
    }
    return NULL;
}

static char *read_all(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    if (s && fread(s, 1, (size_t)n, f) != (size_t)n) n = 0;
    if (s) s[n] = 0;
    fclose(f);
    return s;
}

static int run_ptxas(void) {
#ifndef TNT_GPU_KERNELS
    printf("SKIP: built without GPU kernels (TNT_GPU=OFF or no clang-14)\n");
    return 77;
#else
    char tool[4200];
    if (!find_tool("ptxas", tool, sizeof tool)) {
        printf("SKIP: no ptxas (PATH, /usr/local/cuda/bin)\n");
        return 77;
    }
    char dir[] = "/tmp/tnt_ptx_XXXXXX", file[64], cmd[8600];
    if (!mkdtemp(dir)) return perror("mkdtemp"), 1;
    snprintf(file, sizeof file, "%s/kernels.ptx", dir);
    FILE *f = fopen(file, "w");
    if (!f || fputs(tnt__gpu_ptx, f) < 0 || fclose(f)) return perror(file), 1;
    int rc = 0;
    const char *archs[] = {"sm_80", "sm_90"};
    for (int i = 0; i < 2 && rc == 0; i++) {
        snprintf(cmd, sizeof cmd, "'%s' -arch=%s '%s' -o /dev/null", tool, archs[i], file);
        rc = system(cmd);
        printf("%s: %s\n", cmd, rc == 0 ? "ok" : "FAILED");
    }
    unlink(file), rmdir(dir);
    return rc == 0 ? 0 : 1;
#endif
}

static int run_nvcc(void) {
    char tool[4200];
    if (!find_tool("nvcc", tool, sizeof tool)) {
        printf("SKIP: no nvcc (PATH, /usr/local/cuda/bin)\n");
        return 77;
    }
    char dir[] = "/tmp/tnt_nvcc_XXXXXX", file[64], cmd[8600];
    if (!mkdtemp(dir)) return perror("mkdtemp"), 1;
    snprintf(file, sizeof file, "%s/kernels.ptx", dir);
    /* from tests/ (the ctest working directory) */
    snprintf(cmd, sizeof cmd, "'%s' -ptx -arch=compute_90 ../src/gpu/kernels/kernels.cu -o '%s'", tool, file);
    int rc = system(cmd);
    char *ptx = rc == 0 ? read_all(file) : NULL;
    unlink(file), rmdir(dir);
    if (!ptx) return printf("%s: FAILED\n", cmd), 1;
    int missing = 0;
    for (size_t i = 0; i < N_KERNELS; i++)
        if (!has_entry(ptx, kernel_names[i])) printf("nvcc's PTX has no .entry %s\n", kernel_names[i]), missing++;
    free(ptx);
    printf("%s: %s (%zu kernels)\n", cmd, missing ? "FAILED" : "ok", N_KERNELS);
    return missing ? 1 : 0;
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "--ptxas")) return run_ptxas();
    if (argc > 1 && !strcmp(argv[1], "--nvcc")) return run_nvcc();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_checker_finds_libm_call),
#ifdef TNT_GPU_KERNELS
        cmocka_unit_test(test_embedded_ptx),
#endif
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
#ifndef TNT_GPU_KERNELS
    if (!failed) printf("SKIP: built without GPU kernels (TNT_GPU=OFF or no clang-14): no PTX to check\n");
    return failed ? failed : 77;
#else
    return failed;
#endif
}

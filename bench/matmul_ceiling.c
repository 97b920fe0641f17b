/* matmul_ceiling.c: this core's own matrix-product ceiling, the yardstick for the model rows of
 * `make bench`. One oneDNN matmul primitive, m = n = k (2048 unless --size), f32 and, where the
 * CPU has avx512_bf16 (or AMX), bf16 inputs with f32 accumulation and output. Threads come from
 * OMP_NUM_THREADS (the benchmark sets 1). Prints one line:
 *   isa=<oneDNN's effective ISA> f32_gflops=... bf16_gflops=...|n/a
 * Each figure is the best of --reps runs after one warm-up run. */
#include <dnnl.h>

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#define CHECK(call)                                                                                \
    do {                                                                                           \
        dnnl_status_t s_ = (call);                                                                 \
        if (s_ != dnnl_success) {                                                                  \
            fprintf(stderr, "matmul_ceiling: %s failed (status %d)\n", #call, (int)s_);            \
            goto fail;                                                                             \
        }                                                                                          \
    } while (0)

/* GFLOP/s of the best of reps runs of an n x n x n matmul with inputs of type `dt`; 0 when the
 * primitive cannot be made (no implementation for that type on this CPU). */
static double matmul_gflops(dnnl_engine_t eng, dnnl_stream_t st, dnnl_data_type_t dt, int64_t n, int reps) {
    double best = 0;
    dnnl_memory_desc_t amd, bmd, cmd;
    dnnl_dims_t dims = {n, n};
    dnnl_matmul_desc_t d;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_primitive_t prim = NULL;
    dnnl_memory_t a = NULL, b = NULL, c = NULL;
    CHECK(dnnl_memory_desc_init_by_tag(&amd, 2, dims, dt, dnnl_ab));
    CHECK(dnnl_memory_desc_init_by_tag(&bmd, 2, dims, dt, dnnl_ab));
    CHECK(dnnl_memory_desc_init_by_tag(&cmd, 2, dims, dnnl_f32, dnnl_ab));
    CHECK(dnnl_matmul_desc_init(&d, &amd, &bmd, NULL, &cmd));
    if (dnnl_primitive_desc_create(&pd, &d, NULL, eng, NULL) != dnnl_success) return 0;
    CHECK(dnnl_primitive_create(&prim, pd));
    CHECK(dnnl_memory_create(&a, &amd, eng, DNNL_MEMORY_ALLOCATE));
    CHECK(dnnl_memory_create(&b, &bmd, eng, DNNL_MEMORY_ALLOCATE));
    CHECK(dnnl_memory_create(&c, &cmd, eng, DNNL_MEMORY_ALLOCATE));
    /* Ordinary values (zeros or denormals could time a different path); bf16 is the top half
     * of the f32 bits. */
    void *pa, *pb;
    CHECK(dnnl_memory_get_data_handle(a, &pa));
    CHECK(dnnl_memory_get_data_handle(b, &pb));
    for (int64_t i = 0; i < n * n; i++) {
        float v = 0.5f + (float)(i % 7) * 0.125f;
        if (dt == dnnl_f32) ((float *)pa)[i] = ((float *)pb)[i] = v;
        else {
            uint32_t bits;
            memcpy(&bits, &v, sizeof bits);
            ((uint16_t *)pa)[i] = ((uint16_t *)pb)[i] = (uint16_t)(bits >> 16);
        }
    }
    dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, c}};
    for (int r = 0; r <= reps; r++) {
        double t = now();
        CHECK(dnnl_primitive_execute(prim, st, 3, args));
        CHECK(dnnl_stream_wait(st));
        double gf = 2.0 * (double)n * (double)n * (double)n / (now() - t) / 1e9;
        if (r > 0 && gf > best) best = gf; /* r = 0 is the warm-up */
    }
fail:
    if (a) dnnl_memory_destroy(a);
    if (b) dnnl_memory_destroy(b);
    if (c) dnnl_memory_destroy(c);
    if (prim) dnnl_primitive_destroy(prim);
    if (pd) dnnl_primitive_desc_destroy(pd);
    return best;
}

static const char *isa_name(dnnl_cpu_isa_t isa) {
    switch (isa) {
    case dnnl_cpu_isa_avx512_core_amx: return "avx512_core_amx";
    case dnnl_cpu_isa_avx512_core_bf16: return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_vnni: return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core: return "avx512_core";
    case dnnl_cpu_isa_avx2_vnni: return "avx2_vnni";
    case dnnl_cpu_isa_avx2: return "avx2";
    default: return "other";
    }
}

int main(int argc, char **argv) {
    int64_t n = 2048;
    int reps = 5;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--size")) n = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--reps")) reps = atoi(argv[i + 1]);
        else {
            fprintf(stderr, "usage: %s [--size N] [--reps R]\n", argv[0]);
            return 2;
        }
    }
    dnnl_engine_t eng = NULL;
    dnnl_stream_t st = NULL;
    if (dnnl_engine_create(&eng, dnnl_cpu, 0) != dnnl_success ||
        dnnl_stream_create(&st, eng, dnnl_stream_default_flags) != dnnl_success) {
        fprintf(stderr, "matmul_ceiling: no oneDNN CPU engine\n");
        return 1;
    }
    dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
    double f32 = matmul_gflops(eng, st, dnnl_f32, n, reps);
    /* bf16 only where the CPU computes it natively: oneDNN would otherwise emulate it or refuse */
    bool native_bf16 = isa == dnnl_cpu_isa_avx512_core_bf16 || isa == dnnl_cpu_isa_avx512_core_amx;
    double bf16 = native_bf16 ? matmul_gflops(eng, st, dnnl_bf16, n, reps) : 0;
    printf("isa=%s size=%lld f32_gflops=%.1f", isa_name(isa), (long long)n, f32);
    if (bf16 > 0) printf(" bf16_gflops=%.1f\n", bf16);
    else printf(" bf16_gflops=n/a\n");
    dnnl_stream_destroy(st);
    dnnl_engine_destroy(eng);
    return f32 > 0 ? 0 : 1;
}

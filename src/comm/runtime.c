/* runtime.c: process-wide runtime (settings, ranks, logging). Without the launcher a program is
 * one rank; the data-parallel runtime adds MPI underneath without changing these calls. */
#include "core/config.h"
#include "comm/comm.h"
#include "comm/launcher_env.h"
#include "core/timeline.h"
#include "kernels/dnnl_util.h"
#include "kernels/sgemm.h"

#include <stdio.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

static struct {
    bool initialized;
    int rank, size;
} rt = {.size = 1};

tnt_status tnt_init(int *argc, char ***argv) {
    if (rt.initialized) return TNT_OK;
    tnt__cpu_check_linked();
#if defined(__x86_64__) || defined(__i386__)
    /* Flush denormals to zero, as TensorFlow does on its CPU threads: late in training tiny
     * gradients and optimizer moments turn denormal and slow every kernel down (measured: an
     * epoch of LeNet-5 with Adam went from 39 to 65 ms/step). Threads started later (OpenMP,
     * comm, prefetch) inherit the setting. */
    _mm_setcsr(_mm_getcsr() | 0x8040); /* FTZ | DAZ */
#endif
    /* before MPI: a bad setting (every rank has the same environment) fails every rank alike */
    tnt_status s = tnt__config_load();
    if (s != TNT_OK) return tnt__error_prefix(s, "tnt_init: ");
    const tnt__config *c = tnt__config_get();
    if ((s = tnt__dnnl_cap_isa(c->max_cpu_isa)) != TNT_OK) return tnt__error_prefix(s, "tnt_init: ");
    /* Started by a launcher: MPI starts, and the world must be the launcher's, or this process
     * would train alone while the others do the same (every rank stops with the message). */
    tnt__launch launch;
    tnt__launch_detect(c, &launch);
    if ((s = tnt__world_init(argc, argv, launch.by || c->force_mpi)) != TNT_OK) return s;
    char library[128];
    tnt__world_library(library, sizeof library);
    s = tnt__launch_check(&launch, tnt__world_rank(), tnt__world_size(), library[0] ? library : NULL);
    if (s != TNT_OK) {
        tnt__world_finalize();
        return tnt__error_prefix(s, "tnt_init: ");
    }
    rt.rank = tnt__world_rank();
    rt.size = tnt__world_size();
    /* the device (TNT_DEVICE): every rank agrees, or every rank fails with the same message */
    if ((s = tnt__device_choose()) != TNT_OK) {
        tnt__world_finalize();
        return tnt__error_prefix(s, "tnt_init: ");
    }
    rt.initialized = true;
    if (c->timeline[0]) { /* the ranks' events on rank 0's clock */
        double origin = rt.rank == 0 ? tnt__timeline_now() : 0.0;
        if ((s = tnt__allreduce_sum_f64(&origin, 1)) != TNT_OK) return tnt__error_prefix(s, "tnt_init: ");
        tnt__timeline_start(rt.rank, rt.size, origin);
    }
    if (rt.size > 1 && !tnt__world_comm_thread_ok()) {
        /* The cluster's MPI decides, not the user: train anyway, in the engine that needs no
         * comm thread. Asked for less (TNT_MPI_THREAD_LEVEL): said only at INFO. */
        bool asked_less = c->mpi_thread_level < TNT__THREAD_SERIALIZED;
        tnt_log(asked_less ? TNT_LOG_INFO : TNT_LOG_WARNING,
                "MPI provides %s (%s): gradient allreduces run in the nonblocking engine, all MPI calls "
                "from the main thread (the comm-thread engine needs MPI_THREAD_SERIALIZED)",
                tnt__thread_level_name(tnt__world_thread_level()),
                asked_less ? "TNT_MPI_THREAD_LEVEL asked for no more" : "asked for MPI_THREAD_SERIALIZED");
    }
    return TNT_OK;
}

void tnt_finalize(void) {
    if (tnt__timeline_finish() != TNT_OK) tnt_log(TNT_LOG_ERROR, "%s", tnt_last_error());
    tnt__device_release();
    tnt__dnnl_shutdown();
    tnt__sgemm_release();
    tnt__world_finalize();
    rt.initialized = false;
}

int tnt_get_rank(void) { return rt.rank; }
int tnt_get_size(void) { return rt.size; }
int tnt_get_master_rank(void) { return 0; }
bool tnt_is_master_rank(void) { return rt.rank == 0; }

void tnt_log(tnt_log_level level, const char *fmt, ...) {
    static const char *names[] = {"DEBUG", "INFO", "WARNING", "ERROR"};
    const tnt__config *c = tnt__config_get();
    if ((int)level < c->log_level || (unsigned)level > TNT_LOG_ERROR) return;
    if (rt.rank != 0 && !c->log_on_all_devices) return;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "[tarantella] %s: [rank %d] %s\n", names[level], rt.rank, msg);
}

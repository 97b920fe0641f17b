/* world.c: MPI start-up and the collectives the runtime needs, each with its error checked and
 * turned into a tnt_status. MPI starts only under mpirun (or with TNT_FORCE_MPI=1: tnt_init
 * decides); a program started on its own is one rank with no MPI at all. */
#include "comm/reducer.h"
#include "comm/wait.h"
#include "core/config.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

static struct {
    bool initialized_by_us;
    bool active;
    int rank, size;
    int thread_level; /* provided by MPI_Init_thread (a tnt__thread_level) */
} world = {.size = 1, .thread_level = TNT__THREAD_MULTIPLE};

static const int mpi_levels[] = {MPI_THREAD_SINGLE, MPI_THREAD_FUNNELED, MPI_THREAD_SERIALIZED, MPI_THREAD_MULTIPLE};

static int level_of(int mpi_level) {
    int l = TNT__THREAD_SINGLE;
    for (int i = 0; i < 4; i++)
        if (mpi_level >= mpi_levels[i]) l = i;
    return l;
}

const char *tnt__thread_level_name(int level) {
    static const char *const names[] = {"MPI_THREAD_SINGLE", "MPI_THREAD_FUNNELED", "MPI_THREAD_SERIALIZED",
                                        "MPI_THREAD_MULTIPLE"};
    return level >= 0 && level < 4 ? names[level] : "an unknown thread level";
}

static tnt_status mpi_error(int code, const char *call) {
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(code, msg, &len);
    return tnt__error(TNT_ERR_MPI, "MPI: %s failed on rank %d: %.*s", call, world.rank, len, msg);
}
#define MPI_CHECK(call)                                                                           \
    do {                                                                                          \
        int rc_ = (call);                                                                         \
        if (rc_ != MPI_SUCCESS) return mpi_error(rc_, #call);                                     \
    } while (0)
/* A collective started nonblocking (its request is rq_) and waited for by tnt__wait. */
#define MPI_COLLECTIVE(call, what)                                                                \
    do {                                                                                          \
        MPI_Request rq_;                                                                          \
        int rc_ = (call);                                                                         \
        if (rc_ == MPI_SUCCESS) rc_ = tnt__wait(1, &rq_, what);                                   \
        if (rc_ != MPI_SUCCESS) return mpi_error(rc_, #call);                                     \
    } while (0)

/* A large collective: all ranks meet first (tnt__wait_arrival), then call runs blocking. */
#define MPI_BULK_COLLECTIVE(call, what)                                                           \
    do {                                                                                          \
        int rc_ = tnt__wait_arrival(what);                                                        \
        if (rc_ == MPI_SUCCESS) rc_ = (call);                                                     \
        if (rc_ != MPI_SUCCESS) return mpi_error(rc_, #call);                                     \
    } while (0)

/* MPI_Iallreduce(MPI_IN_PLACE, ...). SimGrid 3.32's SMPI copies an in-place buffer into a
 * temporary that it frees when MPI_Iallreduce returns, before the request completes (a crash over
 * ~2.5 MB, a read of freed memory below); its blocking MPI_Allreduce keeps the temporary through the call, so
 * under SMPI the sum is done there and *rq is MPI_REQUEST_NULL (done). */
static int iallreduce_in_place(void *buf, int n, MPI_Datatype type, MPI_Op op, MPI_Comm comm, MPI_Request *rq) {
#ifdef TNT_SMPI
    *rq = MPI_REQUEST_NULL;
    return MPI_Allreduce(MPI_IN_PLACE, buf, n, type, op, comm);
#else
    return MPI_Iallreduce(MPI_IN_PLACE, buf, n, type, op, comm, rq);
#endif
}

tnt_status tnt__world_init(int *argc, char ***argv, bool start_mpi) {
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited) {
        if (!start_mpi) return TNT_OK;
        /* The comm thread waits inside MPI while backward computes on the same cores: a waiting
         * MPI that yields leaves the core to the computation (measured: +5-10% at 2 ranks). */
        setenv("OMPI_MCA_mpi_yield_when_idle", "1", 0);
        /* Any level will do: below MPI_THREAD_SERIALIZED the gradient allreduces run in the
         * nonblocking engine, every MPI call from the main thread (tnt__world_comm_thread_ok). */
        int provided, asked = tnt__config_get()->mpi_thread_level;
        MPI_CHECK(MPI_Init_thread(argc, argv, mpi_levels[asked], &provided));
        world.initialized_by_us = true;
        world.thread_level = level_of(provided);
    } else {
        int provided;
        MPI_CHECK(MPI_Query_thread(&provided));
        world.thread_level = level_of(provided);
    }
    /* errors come back as codes, so that a failing collective gives a message, not an abort */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &world.rank));
    MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &world.size));
    world.active = world.size > 1;
    const tnt__config *c = tnt__config_get();
    if (world.active)
        MPI_CHECK(tnt__wait_init(world.rank, world.size, c->stall_check_seconds, c->stall_shutdown_seconds));
    return TNT_OK;
}

/* MPICH before 4.2 with its UCX netmod can deadlock inside MPI_Finalize between hosts (over TCP
 * in up to one job in three here): a rank waits in a PMI barrier, where nothing progresses UCX, while
 * another rank's disconnect waits for it (pmodels/mpich#6596 removed that barrier). Any MPI program
 * hangs there, not only ours. Once every rank has met in tnt__wait_finalize the job's work is done,
 * so a rank still inside MPI_Finalize after TNT_FINALIZE_TIMEOUT_SECONDS ends itself, status 0,
 * with a line saying why, rather than hold the job forever. */
static struct {
    atomic_bool returned;
    double seconds;
} finalize_watch;

static void *finalize_watchdog(void *arg) {
    (void)arg;
    struct timespec nap = {0, 50 * 1000 * 1000};
    for (double waited = 0; waited < finalize_watch.seconds; waited += 0.05) {
        if (atomic_load(&finalize_watch.returned)) return NULL;
        nanosleep(&nap, NULL);
    }
    if (atomic_load(&finalize_watch.returned)) return NULL;
    fprintf(stderr,
            "[tarantella] WARNING: [rank %d] MPI_Finalize has not returned %.0f s after every rank finished "
            "(MPICH before 4.2 can deadlock there between hosts: pmodels/mpich#6596); this rank ends now, "
            "status 0 (TNT_FINALIZE_TIMEOUT_SECONDS)\n",
            world.rank, finalize_watch.seconds);
    fflush(NULL);
    _exit(0);
}

static void finalize_mpi(bool every_rank_done) {
    pthread_t watchdog;
    double limit = (double)tnt__config_get()->finalize_timeout_seconds;
    atomic_store(&finalize_watch.returned, false);
    finalize_watch.seconds = limit;
    bool watched = every_rank_done && limit > 0 && pthread_create(&watchdog, NULL, finalize_watchdog, NULL) == 0;
    MPI_Finalize();
    atomic_store(&finalize_watch.returned, true);
    if (watched) pthread_join(watchdog, NULL);
}

void tnt__world_finalize(void) {
    int fin = 0;
    MPI_Finalized(&fin);
    bool every_rank_done = world.active && !fin && tnt__wait_finalize();
    if (world.active && !fin) tnt__reducer_release_windows();
    if (world.initialized_by_us && !fin) finalize_mpi(every_rank_done);
    world.initialized_by_us = false;
    world.active = false;
    world.rank = 0;
    world.size = 1;
    world.thread_level = TNT__THREAD_MULTIPLE;
}

int tnt__world_thread_level(void) { return world.thread_level; }
bool tnt__world_comm_thread_ok(void) { return world.thread_level >= TNT__THREAD_SERIALIZED; }

void tnt__world_library(char *buf, size_t size) {
    char v[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    if (size == 0) return;
    buf[0] = '\0';
    if (MPI_Get_library_version(v, &len) != MPI_SUCCESS) return;
    /* the first line up to a ',', blanks folded: "Open MPI v4.1.4", "MPICH Version: 4.0.2" */
    size_t o = 0;
    for (int i = 0; i < len && v[i] && v[i] != '\n' && v[i] != ',' && o + 1 < size; i++) {
        bool blank = v[i] == ' ' || v[i] == '\t';
        if (blank && (o == 0 || buf[o - 1] == ' ')) continue;
        buf[o++] = blank ? ' ' : v[i];
    }
    while (o > 0 && buf[o - 1] == ' ') o--;
    buf[o] = '\0';
}

int tnt__world_rank(void) { return world.rank; }
int tnt__world_size(void) { return world.size; }
bool tnt__world_active(void) { return world.active; }

#define CHUNK TNT__COLLECTIVE_MAX_FLOATS /* see wait.h */

tnt_status tnt__allreduce_sum_f64(double *x, int64_t n) {
    if (!world.active || n == 0) return TNT_OK;
    for (int64_t off = 0; off < n; off += CHUNK)
        MPI_BULK_COLLECTIVE(MPI_Allreduce(MPI_IN_PLACE, x + off, (int)TNT_MIN(CHUNK, n - off), MPI_DOUBLE, MPI_SUM,
                                          MPI_COMM_WORLD), "allreduce");
    return TNT_OK;
}

tnt_status tnt__allreduce_sum_i64(int64_t *x, int64_t n) {
    if (!world.active || n == 0) return TNT_OK;
    MPI_COLLECTIVE(iallreduce_in_place(x, (int)n, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD, &rq_), "allreduce");
    return TNT_OK;
}

tnt_status tnt__allreduce_sum_f32(float *x, int64_t n) {
    if (!world.active || n == 0) return TNT_OK;
    for (int64_t off = 0; off < n; off += CHUNK)
        MPI_BULK_COLLECTIVE(MPI_Allreduce(MPI_IN_PLACE, x + off, (int)TNT_MIN(CHUNK, n - off), MPI_FLOAT, MPI_SUM,
                                          MPI_COMM_WORLD), "allreduce");
    return TNT_OK;
}

tnt_status tnt__bcast_f32(float *x, int64_t n) {
    if (!world.active || n == 0) return TNT_OK;
    for (int64_t off = 0; off < n; off += CHUNK)
        MPI_BULK_COLLECTIVE(MPI_Bcast(x + off, (int)TNT_MIN(CHUNK, n - off), MPI_FLOAT, 0, MPI_COMM_WORLD),
                            "broadcast");
    return TNT_OK;
}

tnt_status tnt__barrier(void) {
    if (!world.active) return TNT_OK;
    MPI_COLLECTIVE(MPI_Ibarrier(MPI_COMM_WORLD, &rq_), "barrier");
    return TNT_OK;
}

tnt_status tnt__gatherv_f32(const float *x, int64_t n, bool all, float **out, int64_t *counts, int64_t *displs) {
    *out = NULL;
    int p = world.size;
    if (!world.active) {
        counts[0] = n;
        displs[0] = 0;
        *out = malloc((size_t)(n ? n : 1) * sizeof(float));
        if (!*out) return tnt__error(TNT_ERR_NOMEM, "gather: out of memory for %lld floats", (long long)n);
        memcpy(*out, x, (size_t)n * sizeof(float));
        return TNT_OK;
    }
    MPI_COLLECTIVE(MPI_Iallgather(&n, 1, MPI_INT64_T, counts, 1, MPI_INT64_T, MPI_COMM_WORLD, &rq_), "gather");
    int64_t total = 0;
    for (int r = 0; r < p; r++) {
        displs[r] = total;
        total += counts[r];
    }
    if (total > INT32_MAX)
        return tnt__error(TNT_ERR_UNSUPPORTED, "gather: %lld values exceed MPI's int count", (long long)total);
    int *ic = malloc((size_t)p * sizeof(int)), *id = malloc((size_t)p * sizeof(int));
    bool receive = all || world.rank == 0;
    float *buf = receive ? malloc((size_t)(total ? total : 1) * sizeof(float)) : NULL;
    if (!ic || !id || (receive && !buf)) {
        free(ic), free(id), free(buf);
        return tnt__error(TNT_ERR_NOMEM, "gather: out of memory for %lld floats", (long long)total);
    }
    for (int r = 0; r < p; r++) ic[r] = (int)counts[r], id[r] = (int)displs[r];
    MPI_Request rq;
    int rc = all ? MPI_Iallgatherv(x, (int)n, MPI_FLOAT, buf, ic, id, MPI_FLOAT, MPI_COMM_WORLD, &rq)
                 : MPI_Igatherv(x, (int)n, MPI_FLOAT, buf, ic, id, MPI_FLOAT, 0, MPI_COMM_WORLD, &rq);
    if (rc == MPI_SUCCESS) rc = tnt__wait(1, &rq, "gather");
    free(ic), free(id);
    if (rc != MPI_SUCCESS) {
        free(buf);
        return mpi_error(rc, all ? "MPI_Allgatherv" : "MPI_Gatherv");
    }
    *out = buf;
    return TNT_OK;
}

uint64_t tnt__fnv1a(uint64_t h, const void *data, size_t len) {
    const unsigned char *p = data;
    if (h == 0) h = 1469598103934665603ull;
    for (size_t i = 0; i < len; i++) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

tnt_status tnt__check_same(const char *who, const char *const *names, const uint64_t *values, int k) {
    if (!world.active || k == 0) return TNT_OK;
    int p = world.size;
    uint64_t *all = malloc((size_t)p * (size_t)k * sizeof(uint64_t));
    if (!all) return tnt__error(TNT_ERR_NOMEM, "%s: out of memory checking ranks", who);
    MPI_Request rq;
    int rc = MPI_Iallgather(values, k, MPI_UINT64_T, all, k, MPI_UINT64_T, MPI_COMM_WORLD, &rq);
    if (rc == MPI_SUCCESS) rc = tnt__wait(1, &rq, "configuration check");
    if (rc != MPI_SUCCESS) {
        free(all);
        return mpi_error(rc, "MPI_Allgather");
    }
    tnt_status s = TNT_OK;
    for (int r = 1; r < p && s == TNT_OK; r++)
        for (int j = 0; j < k; j++)
            if (all[(size_t)r * k + j] != all[j]) {
                s = tnt__error(TNT_ERR_MPI,
                               "%s: rank %d has a different %s than the master (fingerprint %016llx, master %016llx): "
                               "every rank must run the same program with the same configuration",
                               who, r, names[j], (unsigned long long)all[(size_t)r * k + j], (unsigned long long)all[j]);
                break;
            }
    free(all);
    return s;
}

tnt_status tnt__agree(tnt_status local, int64_t *sums, int k) {
    if (!world.active) return local;
    int64_t buf[8];
    if (k > 7) return tnt__error(TNT_ERR_ARG, "agree: %d values (at most 7)", k);
    buf[0] = local != TNT_OK;
    if (k) memcpy(buf + 1, sums, (size_t)k * sizeof *buf);
    MPI_COLLECTIVE(iallreduce_in_place(buf, k + 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD, &rq_), "agreement");
    if (k) memcpy(sums, buf + 1, (size_t)k * sizeof *buf);
    if (buf[0] == 0) return TNT_OK;
    /* the lowest failing rank tells everyone its status and message */
    int me = local != TNT_OK ? world.rank : world.size, first;
    MPI_COLLECTIVE(MPI_Iallreduce(&me, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD, &rq_), "agreement");
    struct {
        int32_t status;
        char msg[1000];
    } report = {0};
    if (world.rank == first) {
        report.status = (int32_t)local;
        snprintf(report.msg, sizeof report.msg, "%s", tnt_last_error());
    }
    MPI_COLLECTIVE(MPI_Ibcast(&report, (int)sizeof report, MPI_BYTE, first, MPI_COMM_WORLD, &rq_), "agreement");
    if (world.rank == first) return local;
    return tnt__error((tnt_status)report.status, "rank %d: %s", first, report.msg);
}

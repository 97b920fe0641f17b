/* wait.c: every collective is started nonblocking and waited for here, which gives three things
 * a blocking MPI call cannot:
 *  - a waiting rank sleeps between polls instead of spinning on a core once it has waited
 *    SPIN_SECONDS (the sleep grows with the time waited, so a short wait stays short);
 *  - a stall inspector, after Horovod's: each rank tells the master (a small message on a
 *    duplicate communicator) which collective it entered and where training was. A master that
 *    waits longer than TNT_STALL_CHECK_SECONDS logs the ranks that have not arrived and where each
 *    was last seen; after TNT_STALL_SHUTDOWN_SECONDS the job is aborted;
 *  - lone failures end the job: a rank that raised an error no collective shared with the others
 *    aborts at tnt_finalize instead of leaving them waiting forever. */
#include "comm/wait.h"

#include <stdatomic.h>
#include <stdio.h>
#include <sched.h>
#include <time.h>

/* where a rank was when it entered a collective (sent to the master as bytes) */
typedef struct report {
    int64_t seq, epoch, step;
    char what[32], phase[24];
} report;

typedef struct seen {
    report last;
    double at; /* master's clock when it arrived */
    bool any;
} seen;

#define RING 8      /* reports in flight from one rank: small messages complete at once */
#define LONE_WAIT 3 /* seconds a failed rank waits at tnt_finalize for the others */

static struct {
    bool on;
    MPI_Comm ctl;
    int rank, size;
    double check, shutdown;
    uint64_t seq;            /* collectives entered, the same on every rank */
    uint64_t agreed_errors;  /* errors raised before the last collective completed */
    seen *seen;              /* master: per rank */
    report ring[RING];
    MPI_Request ring_req[RING];
    int ring_next;
    _Atomic int64_t epoch, step;
    _Atomic(const char *) phase;
} w;

void tnt__comm_set_position(int64_t epoch, int64_t step, const char *phase) {
    atomic_store(&w.epoch, epoch);
    atomic_store(&w.step, step);
    atomic_store(&w.phase, phase);
}

int tnt__wait_init(int rank, int size, int64_t check_seconds, int64_t shutdown_seconds) {
    w.rank = rank, w.size = size;
    w.check = (double)check_seconds, w.shutdown = (double)shutdown_seconds;
    w.seq = 0;
    w.agreed_errors = tnt__error_count();
    for (int i = 0; i < RING; i++) w.ring_req[i] = MPI_REQUEST_NULL;
    tnt__comm_set_position(0, 0, "start");
    if (rank == 0 && !(w.seen = calloc((size_t)size, sizeof *w.seen))) return MPI_ERR_NO_MEM;
    int rc = MPI_Comm_dup(MPI_COMM_WORLD, &w.ctl);
    if (rc == MPI_SUCCESS) MPI_Comm_set_errhandler(w.ctl, MPI_ERRORS_RETURN);
    w.on = rc == MPI_SUCCESS;
    return rc;
}

static void position(report *r, const char *what) {
    r->seq = (int64_t)w.seq;
    r->epoch = atomic_load(&w.epoch);
    r->step = atomic_load(&w.step);
    snprintf(r->what, sizeof r->what, "%s", what);
    snprintf(r->phase, sizeof r->phase, "%s", atomic_load(&w.phase));
}

static void note(int from, const report *r) {
    w.seen[from] = (seen){*r, MPI_Wtime(), true};
}

/* The master takes in every report that has arrived. */
static void drain(void) {
    for (;;) {
        int flag = 0;
        MPI_Status st;
        if (MPI_Iprobe(MPI_ANY_SOURCE, 1, w.ctl, &flag, &st) != MPI_SUCCESS || !flag) return;
        report r;
        if (MPI_Recv(&r, (int)sizeof r, MPI_BYTE, st.MPI_SOURCE, 1, w.ctl, MPI_STATUS_IGNORE) != MPI_SUCCESS) return;
        note(st.MPI_SOURCE, &r);
    }
}

/* Tells the master this rank entered collective number seq. A report whose slot is still in
 * flight is skipped: the master then sees this rank where it was a little earlier. */
static void announce(const char *what) {
    report r;
    position(&r, what);
    if (w.rank == 0) {
        note(0, &r);
        drain();
        return;
    }
    int k = w.ring_next, done = 1;
    if (w.ring_req[k] != MPI_REQUEST_NULL) MPI_Test(&w.ring_req[k], &done, MPI_STATUS_IGNORE);
    if (!done) return;
    w.ring[k] = r;
    if (MPI_Isend(&w.ring[k], (int)sizeof r, MPI_BYTE, 0, 1, w.ctl, &w.ring_req[k]) == MPI_SUCCESS)
        w.ring_next = (k + 1) % RING;
}

/* The master's account of a stall: one line naming each missing rank and where it was. */
static void stall_message(char *msg, size_t cap, double waited, const char *what) {
    report me;
    position(&me, what);
    int len = snprintf(msg, cap, "stall: rank 0 has waited %.0f s in %s (epoch %lld, step %lld, %s) for rank(s):",
                       waited, what, (long long)me.epoch, (long long)me.step, me.phase);
    double now = MPI_Wtime();
    for (int r = 1; r < w.size && len > 0 && (size_t)len < cap; r++) {
        const seen *s = &w.seen[r];
        if (s->any && s->last.seq >= (int64_t)w.seq) continue; /* arrived */
        if (!s->any)
            len += snprintf(msg + len, cap - (size_t)len, " %d (never reported);", r);
        else
            len += snprintf(msg + len, cap - (size_t)len, " %d (last seen %.0f s ago in %s, epoch %lld, step %lld, %s);",
                            r, now - s->at, s->last.what, (long long)s->last.epoch, (long long)s->last.step,
                            s->last.phase);
    }
}

static void abort_job(const char *msg) {
    fprintf(stderr, "[tarantella] ERROR: [rank %d] %s\n", w.rank, msg);
    fflush(stderr);
    /* the line goes through the MPI launcher's output forwarding, which the abort tears down:
     * MPICH's Hydra lost it once (the faults test's stall shutdown in a CI run); give it a moment */
    struct timespec forwarded = {0, 200 * 1000 * 1000};
    nanosleep(&forwarded, NULL);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

/* Seconds a wait polls without sleeping: a large allreduce only advances inside MPI calls (Open
 * MPI's shared-memory pipeline moves a fragment per call), and naps between them cut the MLP's
 * 147 MB allreduce from 2.2 to 0.3 GB/s; a stalled rank still stops burning a core after this. */
#define SPIN_SECONDS 0.5

static void nap(double waited) {
    if (waited < SPIN_SECONDS) {
#ifndef OPEN_MPI
        /* Open MPI yields inside MPI_Testall (mpi_yield_when_idle, world.c); MPICH spins, and
         * ranks sharing cores then waited out each other's time slices (test_dist, 2 ranks on 2
         * busy cores under MPICH: 16.6 s, 6.6 s with this yield) */
        sched_yield();
#endif
        return;
    }
    /* a tenth of the time waited so far, up to 5 ms: at most ~10% later than a spin */
    double d = waited / 10;
    d = d < 20e-6 ? 20e-6 : d > 5e-3 ? 5e-3 : d;
    struct timespec ts = {0, (long)(d * 1e9)};
    nanosleep(&ts, NULL);
}

/* Polls until reqs complete or, with limit > 0, limit seconds pass (returns MPI_ERR_PENDING). */
static int wait_polling(int n, MPI_Request *reqs, const char *what, double limit) {
    double t0 = MPI_Wtime(), next_check = w.check;
    for (;;) {
        int flag = 0;
        int rc = MPI_Testall(n, reqs, &flag, MPI_STATUSES_IGNORE);
        if (rc != MPI_SUCCESS || flag) return rc;
        double waited = MPI_Wtime() - t0;
        if (limit > 0 && waited >= limit) return MPI_ERR_PENDING;
        if (w.rank == 0) drain();
        char msg[1024];
        if (w.check > 0 && waited >= next_check && w.rank == 0) {
            stall_message(msg, sizeof msg, waited, what);
            fprintf(stderr, "[tarantella] WARNING: [rank 0] %s\n", msg);
            next_check += w.check;
        }
        /* the master, which knows who is missing, speaks first; the others follow if it cannot */
        double grace = w.rank == 0 ? 0 : 2;
        if (w.shutdown > 0 && waited >= w.shutdown + grace) {
            if (w.rank == 0) {
                stall_message(msg, sizeof msg, waited, what);
            } else {
                report me;
                position(&me, what);
                snprintf(msg, sizeof msg, "stall: rank %d has waited %.0f s in %s (epoch %lld, step %lld, %s)", w.rank,
                         waited, what, (long long)me.epoch, (long long)me.step, me.phase);
            }
            size_t len = strlen(msg);
            snprintf(msg + len, sizeof msg - len, " shutting the job down (TNT_STALL_SHUTDOWN_SECONDS=%.0f)",
                     w.shutdown);
            abort_job(msg);
        }
        nap(waited);
    }
}

int tnt__wait(int n, MPI_Request *reqs, const char *what) {
    if (!w.on) return MPI_Waitall(n, reqs, MPI_STATUSES_IGNORE);
    uint64_t errors = tnt__error_count();
    w.seq++;
    announce(what);
    int rc = wait_polling(n, reqs, what, 0);
    /* every rank got here: errors raised before were either shared or got over */
    if (rc == MPI_SUCCESS) w.agreed_errors = errors;
    return rc;
}

int tnt__wait_arrival(const char *what) {
    if (!w.on) return MPI_SUCCESS;
    MPI_Request rq;
    int rc = MPI_Ibarrier(MPI_COMM_WORLD, &rq);
    return rc == MPI_SUCCESS ? tnt__wait(1, &rq, what) : rc;
}

bool tnt__wait_finalize(void) {
    if (!w.on) return false;
    bool alone = tnt__error_count() > w.agreed_errors;
    MPI_Request req;
    int rc = MPI_Ibarrier(w.ctl, &req);
    if (rc == MPI_SUCCESS && alone) {
        w.seq++;
        announce("tnt_finalize");
        rc = wait_polling(1, &req, "tnt_finalize", LONE_WAIT);
        if (rc == MPI_ERR_PENDING) {
            char msg[1200];
            snprintf(msg, sizeof msg, "failed while the other ranks went on: %s; aborting the job", tnt_last_error());
            abort_job(msg);
        }
    } else if (rc == MPI_SUCCESS) {
        rc = tnt__wait(1, &req, "tnt_finalize");
    }
    for (int i = 0; i < RING; i++)
        if (w.ring_req[i] != MPI_REQUEST_NULL) MPI_Request_free(&w.ring_req[i]);
    if (w.rank == 0) drain();
    MPI_Comm_free(&w.ctl);
    free(w.seen);
    w.seen = NULL;
    w.on = false;
    return rc == MPI_SUCCESS;
}

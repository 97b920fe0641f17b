/* wait.h: private to comm/: how every collective of the runtime is waited for (wait.c). */
#ifndef TNT_COMM_WAIT_H
#define TNT_COMM_WAIT_H

#include "comm/comm.h"

#include <mpi.h>

/* The most floats one collective carries; larger buffers go in pieces. Open MPI's allreduce
 * takes a temporary buffer of the message's size, and glibc serves one over 32 MiB with fresh
 * pages from mmap at every call: on this VM a 147 MB allreduce ran at 0.06 GB/s whole and at
 * 0.5 GB/s in 16 MiB pieces (2 ranks, loaded machine). */
#define TNT__COLLECTIVE_MAX_FLOATS ((int64_t)1 << 22)

/* Starts the stall inspector on a duplicate of MPI_COMM_WORLD (its own traffic never matches
 * the runtime's collectives); check_seconds and shutdown_seconds as in TNT_STALL_*. */
int tnt__wait_init(int rank, int size, int64_t check_seconds, int64_t shutdown_seconds);
/* Waits for reqs[0, n) of the collective named what, polling with a growing sleep instead of
 * spinning. The master logs which ranks are missing every check_seconds; after
 * shutdown_seconds the job is aborted. Returns an MPI error code. */
int tnt__wait(int n, MPI_Request *reqs, const char *what);
/* Waits, as tnt__wait, until every rank has entered the collective named what; the caller then
 * runs it blocking. A large blocking collective is Open MPI's fast path (a nonblocking
 * MPI_Iallreduce runs on libnbc: 0.3 against 2.5 GB/s for the MLP's 147 MB), and once every rank
 * has arrived no one is missing for it to stall on. Costs one small barrier. */
int tnt__wait_arrival(const char *what);
/* Meets every rank once more before MPI_Finalize. A rank that raised an error the others never
 * learned (it stops alone while they wait for it) aborts the job with its message when the
 * others do not come within a few seconds. Returns whether every rank met (then the job's work is
 * done on every rank). */
bool tnt__wait_finalize(void);

#endif

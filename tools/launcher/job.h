/* job.h: the launcher owns its job (job.c): mpirun dies with the launcher, ranks left behind by
 * an interrupted mpirun are ended, and the job's Open MPI segments in /dev/shm do not outlive it. */
#ifndef TNT_LAUNCHER_JOB_H
#define TNT_LAUNCHER_JOB_H

#include <sys/types.h>
#include <time.h>

typedef struct tnt_job {
    pid_t launcher;
    time_t started;
    char **shm_before; /* /dev/shm entries that existed before the job (NULL-terminated) */
} tnt_job;

/* Before fork: the launcher adopts processes orphaned under it (ranks whose mpirun died). */
void tnt_job_begin(tnt_job *job);
/* In the forked child, before exec: it gets SIGTERM when the launcher dies, even by SIGKILL. */
void tnt_job_child(const tnt_job *job);
/* After mpirun exited: ends and reaps what is left of the job, removes its stale segments. */
void tnt_job_end(tnt_job *job);

#endif

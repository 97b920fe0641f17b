/* cleanup.h: tarantella --cleanup: ends a running PROGRAM on every host, the local one through
 * /proc, the others through mpirun's rsh agent (ssh) and pgrep. */
#ifndef TNT_LAUNCHER_CLEANUP_H
#define TNT_LAUNCHER_CLEANUP_H

#include <stdbool.h>

#include "hostfile.h"

/* Sends SIGTERM (SIGKILL with force) to the processes of prog (PROGRAM ARGS, NULL-terminated) on
 * each host of h, or only prints what it would do with dry_run. 0 when all ended, else 1. */
int cleanup_hosts(char **prog, bool force, bool dry_run, const hostlist *h);

#endif

/* forward.h: runs a child (mpirun, or the rsh agent of --cleanup) and forwards the launcher's
 * signals to it, so Ctrl+C or SIGTERM stops mpirun, which then stops all ranks on all hosts. */
#ifndef TNT_LAUNCHER_FORWARD_H
#define TNT_LAUNCHER_FORWARD_H

#include <stdbool.h>

/* Runs argv (NULL-terminated) with execvp in a child, forwarding SIGINT, SIGTERM, SIGHUP, SIGUSR1
 * and SIGUSR2; returns the exit code to report (128+N when the child died of signal N or when
 * the launcher was stopped by signal N). */
int run_forwarding(char **argv);
/* Whether the launcher was asked to stop (SIGINT, SIGTERM or SIGHUP) during a run_forwarding. */
bool run_interrupted(void);

#endif

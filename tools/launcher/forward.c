/* forward.c: see forward.h. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "forward.h"

#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "job.h"

/* Signal handlers can only reach state through globals: the child's pid and what was forwarded. */
static volatile sig_atomic_t g_child_pid = 0;
static volatile sig_atomic_t g_interrupt = 0;   /* first SIGINT/SIGTERM/SIGHUP received */
static volatile sig_atomic_t g_last_fwd_sec = -100;
static volatile sig_atomic_t g_stops = 0;       /* SIGINT/SIGTERM/SIGHUP received */

/* The third interrupt kills mpirun: it normally exits at the second, but one that is itself stuck
 * (1 of 7 runs of the faults test on a loaded machine) would hold the launcher, whose waitpid
 * then never returns; once mpirun is gone the launcher ends the ranks it left (job.c). */
#define STOPS_TO_KILL 3

static const int FORWARDED[] = {SIGINT, SIGTERM, SIGHUP, SIGUSR1, SIGUSR2};
#define N_FORWARDED (sizeof FORWARDED / sizeof FORWARDED[0])

static void on_signal(int sig, siginfo_t *si, void *ctx) {
    (void)ctx;
    bool stop = sig == SIGINT || sig == SIGTERM || sig == SIGHUP;
    if (stop && !g_interrupt) g_interrupt = sig;
    if (stop && ++g_stops >= STOPS_TO_KILL && g_child_pid > 0) {
        kill((pid_t)g_child_pid, SIGKILL);
        return;
    }
    /* Ctrl+C at a terminal reaches the whole foreground process group, mpirun included
     * (si_code SI_KERNEL). Forwarding it again would count as mpirun's "second Ctrl+C", on which
     * it exits at once and leaves its ranks running. */
    if (si && si->si_code == SI_KERNEL) return;
    pid_t child = (pid_t)g_child_pid;
    if (child <= 0) return;
    if (stop) { /* the same for a burst (e.g. a signal sent to launcher and mpirun together) */
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if ((long)now.tv_sec - (long)g_last_fwd_sec < 2) return;
        g_last_fwd_sec = (sig_atomic_t)now.tv_sec;
    }
    kill(child, sig);
}

bool run_interrupted(void) { return g_interrupt != 0; }

int run_forwarding(char **argv) {
    sigset_t block, old;
    sigemptyset(&block);
    for (size_t k = 0; k < N_FORWARDED; k++) sigaddset(&block, FORWARDED[k]);
    struct sigaction sa = {0}, saved[N_FORWARDED];
    sa.sa_sigaction = on_signal;
    sa.sa_flags = SA_SIGINFO;
    sigfillset(&sa.sa_mask);
    /* Blocked across fork so a signal cannot arrive before the child's pid is known. */
    sigprocmask(SIG_BLOCK, &block, &old);
    for (size_t k = 0; k < N_FORWARDED; k++) sigaction(FORWARDED[k], &sa, &saved[k]);
    fflush(NULL);
    tnt_job job;
    tnt_job_begin(&job);
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "tarantella: cannot start '%s': fork: %s\n", argv[0], strerror(errno));
        sigprocmask(SIG_SETMASK, &old, NULL);
        tnt_job_end(&job);
        return 1;
    }
    if (pid == 0) {
        tnt_job_child(&job);
        for (size_t k = 0; k < N_FORWARDED; k++) signal(FORWARDED[k], SIG_DFL);
        sigprocmask(SIG_SETMASK, &old, NULL);
        execvp(argv[0], argv);
        fprintf(stderr, "tarantella: cannot run '%s': %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    g_child_pid = pid;
    sigprocmask(SIG_SETMASK, &old, NULL);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) {
            fprintf(stderr, "tarantella: waitpid: %s\n", strerror(errno));
            return 1;
        }
    }
    g_child_pid = 0;
    tnt_job_end(&job);
    for (size_t k = 0; k < N_FORWARDED; k++) sigaction(FORWARDED[k], &saved[k], NULL);
    /* Interrupted: report the signal so scripts see the job was stopped, whatever mpirun says
     * (Open MPI's exits 1, MPICH's Hydra at times 0, one killed at the third interrupt -9). */
    if (g_interrupt) return 128 + g_interrupt;
    if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
    return WEXITSTATUS(status);
}

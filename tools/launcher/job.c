/* job.c: see job.h. mpirun ends its ranks when it gets SIGTERM, but not when it is killed or
 * when a second Ctrl+C makes it exit at once: then the ranks go on training and their shared
 * memory stays in /dev/shm. The launcher is their subreaper, so it can find and end them. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "job.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define SHM_DIR "/dev/shm"

static bool listed(char **names, const char *name) {
    for (size_t i = 0; names && names[i]; i++)
        if (!strcmp(names[i], name)) return true;
    return false;
}

/* Open MPI's shared-memory transports (vader, sm) name their segments so */
static bool is_ompi_segment(const char *name) {
    return !strncmp(name, "vader_segment.", 14) || !strncmp(name, "sm_segment.", 11);
}

static char **list_shm(void) {
    size_t n = 0;
    char **v = calloc(1, sizeof *v);
    DIR *d = opendir(SHM_DIR);
    for (struct dirent *e; v && d && (e = readdir(d));) {
        if (!is_ompi_segment(e->d_name)) continue;
        char **w = realloc(v, (n + 2) * sizeof *v);
        if (!w) break;
        v = w;
        if ((v[n] = strdup(e->d_name))) v[++n] = NULL;
    }
    if (d) closedir(d);
    return v;
}

static void free_list(char **v) {
    for (size_t i = 0; v && v[i]; i++) free(v[i]);
    free(v);
}

/* Whether any live process maps /dev/shm/name (then it belongs to a running job). */
static bool mapped(const char *name) {
    char needle[512];
    snprintf(needle, sizeof needle, SHM_DIR "/%s", name);
    DIR *d = opendir("/proc");
    bool hit = false;
    for (struct dirent *e; d && !hit && (e = readdir(d));) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
        char path[300], line[1024];
        snprintf(path, sizeof path, "/proc/%s/maps", e->d_name);
        FILE *f = fopen(path, "r");
        while (f && !hit && fgets(line, sizeof line, f)) hit = strstr(line, needle) != NULL;
        if (f) fclose(f);
    }
    if (d) closedir(d);
    return hit;
}

/* The launcher's remaining children: mpirun's orphans, adopted by the subreaper. */
static int signal_children(pid_t self, int sig) {
    int n = 0;
    DIR *d = opendir("/proc");
    for (struct dirent *e; d && (e = readdir(d));) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
        char path[300], buf[512];
        snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
        FILE *f = fopen(path, "r");
        size_t len = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
        if (f) fclose(f);
        buf[len] = '\0';
        const char *rp = strrchr(buf, ')'); /* the name may hold spaces and parentheses */
        int ppid;
        char state;
        if (!rp || sscanf(rp + 1, " %c %d", &state, &ppid) != 2 || ppid != self || state == 'Z') continue;
        kill((pid_t)atol(e->d_name), sig);
        n++;
    }
    if (d) closedir(d);
    return n;
}

void tnt_job_begin(tnt_job *job) {
    job->launcher = getpid();
    job->started = time(NULL);
    job->shm_before = list_shm();
    prctl(PR_SET_CHILD_SUBREAPER, 1);
}

void tnt_job_child(const tnt_job *job) {
    /* SIGTERM, not SIGKILL: mpirun then ends its ranks on every host */
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != job->launcher) _exit(1); /* the launcher died before prctl */
}

void tnt_job_end(tnt_job *job) {
    pid_t self = getpid();
    if (signal_children(self, SIGTERM) > 0) {
        fprintf(stderr, "tarantella: ending ranks that mpirun left running\n");
        for (int k = 0; k < 20 && signal_children(self, 0) > 0; k++) {
            while (waitpid(-1, NULL, WNOHANG) > 0) {}
            usleep(100000);
        }
        signal_children(self, SIGKILL);
    }
    while (waitpid(-1, NULL, 0) > 0 || errno == EINTR) {} /* until ECHILD */
    char **now = list_shm();
    for (size_t i = 0; now && now[i]; i++) {
        char path[512];
        struct stat st;
        snprintf(path, sizeof path, SHM_DIR "/%s", now[i]);
        if (listed(job->shm_before, now[i]) || stat(path, &st) != 0 || st.st_mtime < job->started) continue;
        if (!mapped(now[i])) unlink(path);
    }
    free_list(now);
    free_list(job->shm_before);
    job->shm_before = NULL;
}

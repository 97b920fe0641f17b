/* cleanup.c: see cleanup.h. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "cleanup.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "forward.h"
#include "util.h"

static bool host_is_local(const char *name) {
    if (!strcasecmp(name, "localhost") || !strcmp(name, "127.0.0.1")) return true;
    char me[256] = "";
    if (gethostname(me, sizeof me - 1) != 0) return false;
    /* Same short name, and one of the two is short: "node1" is "node1.cluster" and vice versa. */
    size_t nl = strcspn(name, "."), ml = strcspn(me, ".");
    return nl == ml && !strncasecmp(name, me, nl) &&
           (!name[nl] || !me[ml] || !strcasecmp(name, me));
}

static bool read_cmdline(pid_t pid, strv *out) {
    char path[64], buf[8192];
    snprintf(path, sizeof path, "/proc/%d/cmdline", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f) return false;
    size_t len = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[len] = '\0';
    for (size_t off = 0; off < len; off += strlen(buf + off) + 1) sv_push(out, buf + off);
    return out->n > 0;
}

/* Parent pid and state letter from /proc/PID/stat ("pid (comm) S ppid ..."; comm may hold
 * spaces and parentheses, so parse after the last ')'). */
static bool read_stat(pid_t pid, pid_t *ppid, char *state) {
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f) return false;
    size_t len = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[len] = '\0';
    char *rp = strrchr(buf, ')');
    int pp = 0;
    if (!rp || sscanf(rp + 1, " %c %d", state, &pp) != 2) return false;
    *ppid = pp;
    return true;
}

static bool alive(pid_t pid) {
    pid_t pp;
    char st;
    return read_stat(pid, &pp, &st) && st != 'Z' && st != 'X';
}

/* A rank of PROGRAM: its argv holds PROGRAM (same base name) followed by ARGS (and maybe more
 * arguments). That also catches ranks under an interpreter or wrapper. Launchers (mpirun, this program) also carry
 * PROGRAM in argv but are left alone: they end by themselves once their ranks are gone. */
static bool is_rank_of(const strv *cmd, char **prog) {
    static const char *const launchers[] = {"mpirun", "mpiexec", "orterun", "orted",
                                            "prterun", "tarantella", NULL};
    for (int k = 0; launchers[k]; k++)
        if (!strcmp(base_name(cmd->v[0]), launchers[k])) return false;
    size_t nprog = 0;
    while (prog[nprog]) nprog++;
    for (size_t i = 0; i + nprog <= cmd->n; i++) {
        if (strcmp(base_name(cmd->v[i]), base_name(prog[0])) != 0) continue;
        size_t k = 1;
        while (k < nprog && !strcmp(cmd->v[i + k], prog[k])) k++;
        if (k == nprog) return true;
    }
    return false;
}

static int cleanup_local(const char *host, char **prog, bool force, bool dry_run,
                         const char *what) {
    /* Never signal ourselves or an ancestor (the shell that runs us may carry PROGRAM too). */
    pid_t skip[64];
    int nskip = 0;
    for (pid_t p = getpid(); p > 1 && nskip < 64;) {
        skip[nskip++] = p;
        char st;
        if (!read_stat(p, &p, &st)) break;
    }
    char self[PATH_MAX];
    ssize_t self_len = readlink("/proc/self/exe", self, sizeof self - 1);
    DIR *d = opendir("/proc");
    if (!d) {
        fprintf(stderr, "tarantella: %s: cannot list processes: /proc: %s\n", host,
                strerror(errno));
        return 1;
    }
    const int sig = force ? SIGKILL : SIGTERM;
    const char *signame = force ? "SIGKILL" : "SIGTERM";
    pid_t *hit = NULL;
    size_t nhit = 0;
    int rc = 0;
    for (struct dirent *e; (e = readdir(d));) {
        long v;
        if (!parse_long(e->d_name, 2, INT_MAX, &v)) continue;
        pid_t pid = (pid_t)v;
        bool mine = false;
        for (int k = 0; k < nskip; k++) mine |= skip[k] == pid;
        /* Other launchers, whatever their file is called, end by themselves (see is_rank_of). */
        char exe_path[64], exe[PATH_MAX];
        snprintf(exe_path, sizeof exe_path, "/proc/%d/exe", (int)pid);
        ssize_t len = readlink(exe_path, exe, sizeof exe - 1);
        if (len > 0 && self_len > 0 && len == self_len && !memcmp(exe, self, (size_t)len))
            mine = true;
        strv cmd = {0};
        if (!mine && read_cmdline(pid, &cmd) && is_rank_of(&cmd, prog) && alive(pid)) {
            pid_t *h = realloc(hit, (nhit + 1) * sizeof *h);
            if (!h) die_oom();
            hit = h;
            hit[nhit++] = pid;
        }
        sv_free(&cmd);
    }
    closedir(d);
    if (nhit == 0) {
        printf("%s: no process of '%s' running\n", host, what);
        free(hit);
        return 0;
    }
    printf("%s: %s %s to %zu process%s of '%s':", host, dry_run ? "would send" : "sending",
           signame, nhit, nhit == 1 ? "" : "es", what);
    for (size_t k = 0; k < nhit; k++) printf(" %d", (int)hit[k]);
    putchar('\n');
    if (dry_run) {
        free(hit);
        return 0;
    }
    for (size_t k = 0; k < nhit; k++)
        if (kill(hit[k], sig) != 0 && errno != ESRCH) {
            fprintf(stderr, "tarantella: %s: cannot signal pid %d: %s\n", host, (int)hit[k],
                    strerror(errno));
            rc = 1;
        }
    /* Wait a little so "done" means done (the ranks' parent, mpirun, reaps them). */
    size_t left = nhit;
    for (int tick = 0; tick < 50 && left > 0; tick++) {
        nanosleep(&(struct timespec){0, 100000000}, NULL);
        left = 0;
        for (size_t k = 0; k < nhit; k++) left += alive(hit[k]);
    }
    if (left > 0) {
        fprintf(stderr, "tarantella: %s: %zu process%s of '%s' still running 5 s after %s%s\n",
                host, left, left == 1 ? "" : "es", what, signame,
                force ? "" : "; try --cleanup --force");
        rc = 1;
    } else if (rc == 0) {
        printf("%s: all ended\n", host);
    }
    free(hit);
    return rc;
}

/* Extended regex (pkill -f) for the words "PROGRAM ARGS" in a command line, with PROGRAM's
 * first letter in brackets so the pattern does not match the remote shell that runs pkill. */
static char *cleanup_regex(char **prog) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) die_oom();
    fputs("(^|[ /])", f);
    for (int k = 0; prog[k]; k++) {
        const char *s = k == 0 ? base_name(prog[0]) : prog[k];
        if (k > 0) fputc(' ', f);
        for (const char *p = s; *p; p++) {
            if (k == 0 && p == s && isalnum((unsigned char)*p)) fprintf(f, "[%c]", *p);
            else if (strchr("\\.[]()*+?{}|^$", *p)) fprintf(f, "\\%c", *p);
            else fputc(*p, f);
        }
    }
    fputs("( |$)", f);
    if (fclose(f) != 0) die_oom();
    return buf;
}

static int cleanup_remote(const char *host, char **prog, bool force, bool dry_run,
                          const char *what) {
    /* The rsh agent mpirun uses (Open MPI's, else Hydra's launcher program); Open MPI allows
     * alternatives separated by ':', take the first. */
    const char *agent = getenv("OMPI_MCA_plm_rsh_agent");
    if (!agent || !*agent) agent = getenv("HYDRA_LAUNCHER_EXEC");
    if (!agent || !*agent) agent = "ssh";
    char *first = strndup(agent, strcspn(agent, ":"));
    if (!first) die_oom();
    strv argv = {0};
    sv_split_words(&argv, first);
    free(first);
    if (argv.n == 0) sv_push(&argv, "ssh");
    sv_push(&argv, host);
    /* pkill -f alone would also hit launchers there (or this very launcher when the "remote"
     * host is this one under another name), so the remote side applies the local rule: pgrep,
     * then skip its own ancestors, mpirun and launchers (by process name). It exits 0 also when
     * nothing matched, so any other status (ssh: 255) is a failure. Host names are validated,
     * so they are safe to embed. */
    const char *sig = force ? "KILL" : "TERM";
    char *re = cleanup_regex(prog), *qre = shell_quoted(re);
    char *script = xasprintf(
        "command -v pgrep >/dev/null || { echo \"%s: pgrep not found\" >&2; exit 3; }; k=; f=0; "
        "a=\" \"; q=$$; while [ \"${q:-1}\" -gt 1 ]; do a=\"$a$q \"; "
        "q=$(ps -o ppid= -p $q | tr -d \" \"); done; "
        "for p in $(pgrep -f %s); do case $a in *\" $p \"*) continue ;; esac; "
        "case $(cat /proc/$p/comm 2>/dev/null) in "
        "mpirun|mpiexec|orterun|orted|prterun|tarantella|\"\") ;; "
        "*) if kill -%s $p; then k=\"$k $p\"; else f=1; fi ;; esac; done; "
        "if [ -n \"$k\" ]; then echo \"%s: sent SIG%s to$k\"; "
        "else echo \"%s: no matching process running\"; fi; exit $f",
        host, qre, sig, host, sig, host);
    char *qscript = shell_quoted(script);
    /* The agent hands its arguments to the remote login shell: one command string, run by sh. */
    sv_push_owned(&argv, xasprintf("sh -c %s", qscript));
    free(re);
    free(qre);
    free(script);
    free(qscript);
    printf("%s: %s '%s' through '%s'\n", host, dry_run ? "would end" : "ending", what,
           argv.v[0]);
    if (dry_run) {
        for (size_t k = 0; k < argv.n; k++) {
            shell_quote(stdout, argv.v[k]);
            putchar(k + 1 < argv.n ? ' ' : '\n');
        }
    }
    int rc = 0;
    fflush(stdout);
    if (!dry_run && (rc = run_forwarding(argv.v)) != 0) {
        fprintf(stderr, "tarantella: %s: cleanup failed: '%s' exited with %d\n", host,
                argv.v[0], rc);
        rc = 1;
    }
    sv_free(&argv);
    return rc;
}

int cleanup_hosts(char **prog, bool force, bool dry_run, const hostlist *h) {
    char *what = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&what, &len);
    if (!f) die_oom();
    for (int k = 0; prog[k]; k++) fprintf(f, "%s%s", k ? " " : "", prog[k]);
    if (fclose(f) != 0) die_oom();
    int rc = 0;
    for (size_t i = 0; i < h->n; i++) {
        const char *host = h->names[i];
        rc |= host_is_local(host) ? cleanup_local(host, prog, force, dry_run, what)
                                  : cleanup_remote(host, prog, force, dry_run, what);
    }
    fflush(stdout);
    free(what);
    return rc ? 1 : 0;
}

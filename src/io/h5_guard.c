/* h5_guard.c: loads of HDF5 files run their parse step in a forked child with a time limit (see
 * h5.h for why). The child writes its answer into a shared anonymous mapping made before the
 * fork (a pipe moved 100 MB in 64 KB turns, and a copy-on-write image costs a page fault a
 * page), then a header (status, message length, answer length) and the message to a pipe, and
 * _exits; the parent reads the pipe against the deadline, kills a child that overruns it and
 * reports one that died of a signal. */
#include "io/h5.h"
#include "core/config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct reply_head {
    int32_t status;
    uint32_t msg_len;
    uint64_t data_len;
} reply_head;

static bool write_all(int fd, const void *p, size_t n) {
    while (n > 0) {
        ssize_t k = write(fd, p, n);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return false;
        p = (const char *)p + k, n -= (size_t)k;
    }
    return true;
}

/* The child: parse, report, _exit (no atexit handlers, no stdio flush, no MPI). A crash must
 * end it, whatever handlers the program installed (a test harness, a crash reporter). */
static void child(int fd, tnt__h5_parse_fn parse, void *ctx, tnt__h5_answer *a) {
    static const int fatal[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGSYS};
    for (size_t i = 0; i < TNT_ARRAY_LEN(fatal); i++) signal(fatal[i], SIG_DFL);
    if (a->populate) madvise(a->data, a->cap, MADV_POPULATE_WRITE); /* fork left the mapping unmapped */
    a->len = 0;
    tnt_status s = parse(ctx, a);
    reply_head h = {.status = s, .data_len = s == TNT_OK ? a->len : 0};
    const char *msg = s == TNT_OK ? "" : tnt_last_error();
    h.msg_len = (uint32_t)strlen(msg);
    _exit(write_all(fd, &h, sizeof h) && write_all(fd, msg, h.msg_len) ? 0 : 1);
}

/* Reads n bytes before the deadline: 0, or -1 (end of data or error) or -2 (time is up). */
static int read_until(int fd, void *p, size_t n, double deadline) {
    while (n > 0) {
        double left = deadline - tnt__now();
        if (left <= 0) return -2;
        struct pollfd pf = {.fd = fd, .events = POLLIN};
        int r = poll(&pf, 1, (int)(left * 1000) + 1);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return -1;
        if (r == 0) continue;
        ssize_t k = read(fd, p, n);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return -1;
        p = (char *)p + k, n -= (size_t)k;
    }
    return 0;
}

/* Seconds a parse may take: TNT_H5_TIME_LIMIT, else 60 plus 1 per 10 MB of file (reading at
 * 10 MB/s from a busy network file system; a 100 MB file parses in well under a second here). */
static double time_limit(const char *path) {
    int64_t limit = tnt__config_get()->h5_time_limit_s;
    if (limit > 0) return (double)limit;
    struct stat st;
    return 60.0 + (stat(path, &st) == 0 ? (double)st.st_size / 1e7 : 0);
}

tnt_status tnt__h5_answer_new(tnt__h5_answer *a, size_t cap, bool populate, const char *who, const char *path) {
    *a = (tnt__h5_answer){.cap = cap, .populate = populate};
    /* without populate, pages are allocated as they are written: cap only bounds the answer */
    void *p = mmap(NULL, cap + 1, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return tnt__error(TNT_ERR_NOMEM, "%s %s: mmap of %zu bytes: %s", who, path, cap, strerror(errno));
    /* writable at once (MAP_POPULATE maps them for reading: each first write still faulted) */
    if (populate) madvise(p, cap, MADV_POPULATE_WRITE);
    a->data = p;
    return TNT_OK;
}

void tnt__h5_answer_free(tnt__h5_answer *a) {
    if (a->data) munmap(a->data, a->cap + 1);
    *a = (tnt__h5_answer){0};
}

tnt_status tnt__h5_isolated(const char *who, const char *path, tnt__h5_parse_fn parse, void *ctx, tnt__h5_answer *a) {
    double limit = time_limit(path), deadline = tnt__now() + limit;
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) return tnt__error(TNT_ERR_IO, "%s %s: pipe: %s", who, path, strerror(errno));
    fflush(NULL); /* nothing buffered here is written twice */
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(fds[0]), close(fds[1]);
        return tnt__error(TNT_ERR_IO, "%s %s: fork: %s", who, path, strerror(e));
    }
    if (pid == 0) {
        close(fds[0]);
        child(fds[1], parse, ctx, a);
    }
    close(fds[1]);
    tnt_status s = TNT_OK;
    reply_head h;
    char msg[1024];
    int r = read_until(fds[0], &h, sizeof h, deadline);
    if (r == 0 && h.status != TNT_OK) {
        size_t n = TNT_MIN((size_t)h.msg_len, sizeof msg - 1);
        r = read_until(fds[0], msg, n, deadline);
        msg[r == 0 ? n : 0] = '\0';
        s = tnt__error(h.status < 0 && h.status >= TNT_ERR_MPI ? (tnt_status)h.status : TNT_ERR_FORMAT, "%s", msg);
    } else if (r == 0 && (h.msg_len != 0 || h.data_len > a->cap)) {
        s = tnt__error(TNT_ERR_FORMAT, "%s %s: the reader handed back %llu bytes (at most %zu expected)", who, path,
                       (unsigned long long)h.data_len, a->cap);
    }
    close(fds[0]);
    if (r == -2) kill(pid, SIGKILL);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) continue;
    if (r == -2)
        s = tnt__error(TNT_ERR_FORMAT, "%s %s: gave up after %.0f s: the HDF5 library loops on this file (damaged or "
                       "hostile?; on a slow file system set TNT_H5_TIME_LIMIT to more seconds)", who, path, limit);
    else if (WIFSIGNALED(status))
        s = tnt__error(TNT_ERR_FORMAT, "%s %s: the HDF5 library crashed reading this file (signal %d, %s): the file "
                       "is damaged or hostile", who, path, WTERMSIG(status), strsignal(WTERMSIG(status)));
    else if (r != 0)
        s = tnt__error(TNT_ERR_FORMAT, "%s %s: the reader process ended without an answer (exit %d): the file is "
                       "damaged or hostile?", who, path, WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    a->len = s == TNT_OK ? (size_t)h.data_len : 0;
    return s;
}

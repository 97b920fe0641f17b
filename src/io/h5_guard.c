/* h5_guard.c: loads of HDF5 files run their parse step in a forked child with a time limit (see
 * h5.h for why). The child writes a header (status, message length, data length), the message
 * and the data to a pipe, then _exits; the parent reads them against the deadline, kills a child
 * that overruns it and reports one that died of a signal. What the parent receives is bounded by
 * the caller's max_len before anything is allocated. */
#include "io/h5.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
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

/* The child: parse, send, _exit (no atexit handlers, no stdio flush, no MPI). A crash must end
 * it, whatever handlers the program installed (a test harness, a crash reporter). */
static void child(int fd, tnt__h5_parse_fn parse, void *ctx) {
    static const int fatal[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGSYS};
    for (size_t i = 0; i < TNT_ARRAY_LEN(fatal); i++) signal(fatal[i], SIG_DFL);
    struct iovec out[TNT__H5_MAX_OUT];
    int n_out = 0;
    tnt_status s = parse(ctx, out, &n_out);
    reply_head h = {.status = s};
    const char *msg = s == TNT_OK ? "" : tnt_last_error();
    h.msg_len = (uint32_t)strlen(msg);
    for (int i = 0; s == TNT_OK && i < n_out; i++) h.data_len += out[i].iov_len;
    bool ok = write_all(fd, &h, sizeof h) && write_all(fd, msg, h.msg_len);
    for (int i = 0; ok && s == TNT_OK && i < n_out; i++) ok = write_all(fd, out[i].iov_base, out[i].iov_len);
    _exit(ok ? 0 : 1);
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
    const char *e = getenv("TNT_H5_TIME_LIMIT");
    char *end;
    double v = e ? strtod(e, &end) : 0;
    if (e && end != e && !*end && v > 0) return v;
    struct stat st;
    return 60.0 + (stat(path, &st) == 0 ? (double)st.st_size / 1e7 : 0);
}

tnt_status tnt__h5_isolated(const char *who, const char *path, tnt__h5_parse_fn parse, void *ctx, size_t max_len,
                            void **result, size_t *len) {
    *result = NULL, *len = 0;
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
        child(fds[1], parse, ctx);
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
    } else if (r == 0 && (h.msg_len != 0 || h.data_len > max_len)) {
        s = tnt__error(TNT_ERR_FORMAT, "%s %s: the reader handed back %llu bytes (at most %zu expected)", who, path,
                       (unsigned long long)h.data_len, max_len);
    } else if (r == 0) {
        *result = malloc(h.data_len ? (size_t)h.data_len : 1);
        if (!*result) s = tnt__error(TNT_ERR_NOMEM, "%s %s: out of memory for %llu bytes", who, path,
                                     (unsigned long long)h.data_len);
        else if ((r = read_until(fds[0], *result, (size_t)h.data_len, deadline)) == 0) *len = (size_t)h.data_len;
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
    else if (r != 0 && s == TNT_OK)
        s = tnt__error(TNT_ERR_FORMAT, "%s %s: the reader process ended without an answer (exit %d): the file is "
                       "damaged or hostile?", who, path, WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    if (s != TNT_OK) {
        free(*result);
        *result = NULL, *len = 0;
    }
    return s;
}

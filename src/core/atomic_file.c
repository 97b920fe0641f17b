/* atomic_file.c: write a file so that a reader sees the old file or the new one, never a torn
 * one: fill a temp file in the same directory, fsync it, rename it over the target, fsync the
 * directory. Temp files of writers that died (kill -9 during a save) are removed by the next
 * write to the same path. */
#include "core/atomic_file.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static tnt_status fsync_path(const char *p, bool dir) {
    int fd = open(p, dir ? (O_RDONLY | O_DIRECTORY) : O_RDONLY);
    if (fd < 0) return tnt__error(TNT_ERR_IO, "%s: cannot open for fsync: %s", p, strerror(errno));
    int rc = fsync(fd), e = errno;
    close(fd);
    /* some file systems cannot fsync a directory (EINVAL): not a failure of ours */
    if (rc != 0 && !(dir && (e == EINVAL || e == EBADF)))
        return tnt__error(TNT_ERR_IO, "%s: fsync failed: %s", p, strerror(e));
    return TNT_OK;
}

/* Removes dir/base.tmp.PID for every PID that is no process here. (On a directory shared between
 * hosts a PID may be another host's live writer: only the master writes shared files.) */
static void remove_dead_temps(const char *dir, const char *base) {
    DIR *d = opendir(dir);
    if (!d) return;
    size_t blen = strlen(base);
    for (struct dirent *e; (e = readdir(d));) {
        const char *n = e->d_name;
        if (strncmp(n, base, blen) || strncmp(n + blen, ".tmp.", 5)) continue;
        char *end;
        errno = 0;
        long pid = strtol(n + blen + 5, &end, 10);
        if (errno || *end || pid <= 0 || n[blen + 5] < '0' || n[blen + 5] > '9') continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue; /* alive (EPERM: someone else's) */
        char *p = malloc(strlen(dir) + strlen(n) + 2);
        if (!p) break;
        sprintf(p, "%s/%s", dir, n);
        unlink(p);
        free(p);
    }
    closedir(d);
}

tnt_status tnt__atomic_write_path(const char *path, tnt__write_fn fill, void *ctx) {
    if (!path || !*path) return tnt__error(TNT_ERR_ARG, "write: path is NULL or empty");
    size_t len = strlen(path);
    char *tmp = malloc(len + 32), *dir = malloc(len + 2);
    if (!tmp || !dir) {
        free(tmp), free(dir);
        return tnt__error(TNT_ERR_NOMEM, "%s: out of memory", path);
    }
    snprintf(tmp, len + 32, "%s.tmp.%ld", path, (long)getpid());
    const char *slash = strrchr(path, '/');
    if (!slash) strcpy(dir, ".");
    else if (slash == path) strcpy(dir, "/");
    else {
        memcpy(dir, path, (size_t)(slash - path));
        dir[slash - path] = '\0';
    }
    remove_dead_temps(dir, slash ? slash + 1 : path);
    tnt_status s = fill(tmp, ctx);
    if (s == TNT_OK) s = fsync_path(tmp, false);
    if (s == TNT_OK && rename(tmp, path) != 0)
        s = tnt__error(TNT_ERR_IO, "%s: cannot rename %s over it: %s", path, tmp, strerror(errno));
    if (s != TNT_OK) unlink(tmp); /* may not exist */
    else s = fsync_path(dir, true);
    free(tmp), free(dir);
    return s;
}

typedef struct data_ctx {
    const void *data;
    size_t len;
} data_ctx;

static tnt_status write_data(const char *tmp, void *ctx) {
    const data_ctx *c = ctx;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd < 0) return tnt__error(TNT_ERR_IO, "%s: cannot create: %s", tmp, strerror(errno));
    const char *p = c->data;
    size_t left = c->len;
    while (left > 0) {
        ssize_t k = write(fd, p, left);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) {
            int e = k < 0 ? errno : ENOSPC;
            close(fd);
            return tnt__error(TNT_ERR_IO, "%s: write failed: %s", tmp, strerror(e));
        }
        p += k, left -= (size_t)k;
    }
    if (close(fd) != 0) return tnt__error(TNT_ERR_IO, "%s: write failed: %s", tmp, strerror(errno));
    return TNT_OK;
}

tnt_status tnt__atomic_write_data(const char *path, const void *data, size_t len) {
    if (!data && len) return tnt__error(TNT_ERR_ARG, "write %s: data is NULL", path ? path : "(null)");
    data_ctx c = {data, len};
    return tnt__atomic_write_path(path, write_data, &c);
}

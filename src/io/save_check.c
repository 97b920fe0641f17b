/* save_check.c: what a save needs, checked before anything is written, and before training
 * starts where a save will follow it (tnt_save_opts.check_only, ModelCheckpoint, tnt-train
 * --save), so that a typo or a bad name fails in seconds, not after the whole training. */
#include "io/save_check.h"

#include "model/model.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

/* HDF5 reads '/' in a link name as a path ("a/b" saves as group b inside a group a, which then
 * collides with a layer "a"), and "." names the group itself; Keras 3 refuses '/' in names. */
static tnt_status check_name(const char *what, const char *name, const char *who, const char *path) {
    if (!name[0] || !strcmp(name, ".") || strchr(name, '/'))
        return tnt__error(TNT_ERR_ARG, "%s %s: %s name \"%s\" cannot be saved (a Keras file's names are HDF5 group "
                          "names: not empty, not \".\", no '/'); rename it", who, path, what, name);
    return TNT_OK;
}

tnt_status tnt__check_save_names(const tnt_model *m, const char *who, const char *path) {
    /* weight names may hold '/' on purpose: nested weights ("forward_gru/kernel") are paths */
    tnt_status s = TNT_OK;
    for (int i = 0; i < m->n_layers && s == TNT_OK; i++) s = check_name("layer", m->layers[i]->name, who, path);
    return s;
}

tnt_status tnt__check_save_path(const char *path, bool make_dir, const char *who) {
    if (!path || !*path) return tnt__error(TNT_ERR_ARG, "%s: the path is NULL or empty", who);
    size_t len = strlen(path);
    char *dir = malloc(len + 2), *probe = malloc(len + 48);
    if (!dir || !probe) {
        free(dir), free(probe);
        return tnt__error(TNT_ERR_NOMEM, "%s %s: out of memory", who, path);
    }
    const char *slash = strrchr(path, '/');
    snprintf(dir, len + 2, "%.*s", slash ? (slash == path ? 1 : (int)(slash - path)) : 1, slash ? path : ".");
    tnt_status s = TNT_OK;
    struct stat st;
    if (make_dir) /* mkdir -p, as Keras 3 makes a checkpoint's directory */
        for (char *p = dir + 1; s == TNT_OK; p++) {
            char c = *p;
            if (c != '/' && c != '\0') continue;
            *p = '\0';
            if (mkdir(dir, 0777) != 0 && errno != EEXIST)
                s = tnt__error(TNT_ERR_IO, "%s %s: cannot create the directory %s: %s", who, path, dir, strerror(errno));
            *p = c;
            if (!c) break;
        }
    if (s == TNT_OK && stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        s = tnt__error(TNT_ERR_IO, "%s %s: is a directory", who, path);
    /* a probe file beside the target: the save writes a temporary file there, then renames it
     * (access() would not do: it says yes to root on a read-only file system) */
    snprintf(probe, len + 48, "%s/.tnt-probe.%ld", dir, (long)getpid());
    int fd = s == TNT_OK ? open(probe, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600) : -1;
    if (s == TNT_OK && fd < 0) s = tnt__error(TNT_ERR_IO, "%s %s: cannot write there: %s", who, path, strerror(errno));
    if (fd >= 0) close(fd), unlink(probe);
    free(dir), free(probe);
    return s;
}

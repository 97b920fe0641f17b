/* atomic_file.h: atomic file writes, for every file the library saves (weights, models,
 * checkpoints, NPY arrays, CSV logs). */
#ifndef TNT_ATOMIC_FILE_H
#define TNT_ATOMIC_FILE_H

#include "core/core.h"

#include <stddef.h>

/* Writes the file at path atomically: fill(tmp, ctx) creates and fills "path.tmp.<pid>" (in the
 * same directory, so that the rename stays within one file system); the temp file is then
 * fsync'ed, renamed over path and the directory fsync'ed. On any failure (fill's status or a
 * system call's) the temp file is removed, an existing file at path is left untouched, and the
 * error is returned (fill's own message, or one naming the path and strerror). */
typedef tnt_status (*tnt__write_fn)(const char *tmp_path, void *ctx);
tnt_status tnt__atomic_write_path(const char *path, tnt__write_fn fill, void *ctx);

/* The same for a buffer of bytes (text formats). */
tnt_status tnt__atomic_write_data(const char *path, const void *data, size_t len);

#endif

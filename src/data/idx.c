/* idx.c: IDX (MNIST format) source. Files are read whole into memory as uint8 through zlib,
 * which reads gzip-compressed and plain files alike; samples are converted to float32 only when
 * materialized. */
#include "data/pipeline.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#define IDX_IMAGES 0x00000803u
#define IDX_LABELS 0x00000801u

/* Reads up to n bytes; returns the count read, or -1 with the zlib message in *msg. */
static int64_t read_full(gzFile gz, void *buf, int64_t n, const char **msg) {
    int64_t got = 0;
    while (got < n) {
        unsigned chunk = (unsigned)TNT_MIN(n - got, (int64_t)1 << 30);
        int r = gzread(gz, (unsigned char *)buf + got, chunk);
        if (r < 0) {
            int code;
            *msg = gzerror(gz, &code);
            return got > 0 ? got : -1;
        }
        if (r == 0) { /* zlib reports a truncated stream as a soft error after the data */
            int code;
            const char *m = gzerror(gz, &code);
            if (code != Z_OK) *msg = m;
            break;
        }
        got += r;
    }
    return got;
}

/* " (zlib: ...)" when zlib reported something, for messages about short reads. */
static const char *zlib_note(const char *msg, char *buf, size_t size) {
    if (!msg || !*msg) return "";
    snprintf(buf, size, " (zlib: %s)", msg);
    return buf;
}

/* Loads one IDX file into col; *n receives the sample count. */
static tnt_status idx_load(const char *path, bool labels, tnt__column *col, int64_t *n) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return tnt__error(TNT_ERR_IO, "idx: \"%s\": %s", path, strerror(errno));
    struct stat st;
    int e = fstat(fd, &st) != 0 ? errno : S_ISDIR(st.st_mode) ? EISDIR : 0; /* open() accepts directories */
    if (e) {
        close(fd);
        return tnt__error(TNT_ERR_IO, "idx: \"%s\": %s", path, strerror(e));
    }
    gzFile gz = gzdopen(fd, "rb");
    if (!gz) {
        close(fd);
        return tnt__error(TNT_ERR_NOMEM, "idx: \"%s\": cannot start zlib", path);
    }
    gzbuffer(gz, 1 << 17);
    tnt_status s = TNT_OK;
    const char *zmsg = "";
    char note[160];
    unsigned char head[4 + 4 * 255];
    int64_t got = read_full(gz, head, 4, &zmsg);
    if (got < 4) {
        s = tnt__error(TNT_ERR_FORMAT, "idx: \"%s\": truncated header (%lld of 4 bytes)%s", path,
                       (long long)TNT_MAX(got, 0), zlib_note(zmsg, note, sizeof note));
        goto done;
    }
    uint32_t magic = (uint32_t)head[0] << 24 | (uint32_t)head[1] << 16 | (uint32_t)head[2] << 8 | head[3];
    int ndim = head[3];
    if (labels && magic != IDX_LABELS) {
        s = tnt__error(TNT_ERR_FORMAT, "idx: \"%s\": bad magic 0x%08x (expected labels 0x%08x)", path,
                       magic, IDX_LABELS);
        goto done;
    }
    if (!labels && (head[0] || head[1] || head[2] != 0x08 || ndim < 2 || ndim > TNT_MAX_DIMS)) {
        s = tnt__error(TNT_ERR_FORMAT,
                       "idx: \"%s\": bad magic 0x%08x (expected images 0x%08x, or unsigned bytes "
                       "0x000008NN with 2..%d dimensions)",
                       path, magic, IDX_IMAGES, TNT_MAX_DIMS);
        goto done;
    }
    got = read_full(gz, head + 4, 4 * ndim, &zmsg);
    if (got < 4 * ndim) {
        s = tnt__error(TNT_ERR_FORMAT, "idx: \"%s\": truncated header (%lld of %d bytes)%s", path,
                       (long long)(4 + TNT_MAX(got, 0)), 4 + 4 * ndim, zlib_note(zmsg, note, sizeof note));
        goto done;
    }
    int64_t dims[TNT_MAX_DIMS] = {0}, total = 1;
    for (int i = 0; i < ndim; i++) {
        const unsigned char *d = head + 4 + 4 * i;
        dims[i] = (int64_t)((uint32_t)d[0] << 24 | (uint32_t)d[1] << 16 | (uint32_t)d[2] << 8 | d[3]);
        if (dims[i] > 0 && total > ((int64_t)1 << 40) / dims[i]) {
            s = tnt__error(TNT_ERR_FORMAT, "idx: \"%s\": dimension %d of size %lld makes the file too large",
                           path, i, (long long)dims[i]);
            goto done;
        }
        total *= dims[i];
    }
    if (dims[0] == 0) {
        s = tnt__error(TNT_ERR_FORMAT, "idx: \"%s\": declares 0 samples (an empty file is no dataset)", path);
        goto done;
    }
    /* a sample of no values would make a 16-byte file an epoch of billions of empty samples */
    for (int i = 1; i < ndim; i++)
        if (dims[i] == 0) {
            s = tnt__error(TNT_ERR_FORMAT, "idx: \"%s\": dimension %d of the sample shape has size 0 "
                           "(expected every sample dimension >= 1)", path, i);
            goto done;
        }
    /* A plain file's size is known: the declared data must be exactly what follows the header,
     * checked before anything is allocated (a 16-byte file may declare terabytes). */
    int64_t have = (int64_t)st.st_size - (4 + 4 * ndim);
    if (S_ISREG(st.st_mode) && gzdirect(gz) && have != total) {
        s = have < total ? tnt__error(TNT_ERR_FORMAT, "idx: \"%s\": truncated: expected %lld data bytes, got %lld",
                                      path, (long long)total, (long long)have)
                         : tnt__error(TNT_ERR_FORMAT, "idx: \"%s\": %lld bytes of trailing junk after the %lld data "
                                      "bytes the header declares", path, (long long)(have - total), (long long)total);
        goto done;
    }
    /* images of 3-D files are (rows, cols) and get a channel axis, as Keras expects (NHWC) */
    tnt_shape shape = {.ndim = ndim - 1};
    for (int i = 1; i < ndim; i++) shape.dim[i - 1] = dims[i];
    if (ndim == 3) shape.dim[shape.ndim++] = 1;
    /* a compressed file's size is known only by decompressing: the buffer grows with the data
     * that really arrives, never to more than twice of it */
    unsigned char *data = NULL;
    got = 0;
    for (int64_t cap = gzdirect(gz) ? total : TNT_MIN(total, (int64_t)1 << 20);; cap = TNT_MIN(total, 2 * cap)) {
        unsigned char *p = realloc(data, cap ? (size_t)cap : 1);
        if (!p) {
            free(data);
            s = tnt__error(TNT_ERR_NOMEM, "idx: \"%s\": out of memory for %lld bytes", path, (long long)cap);
            goto done;
        }
        data = p;
        int64_t r = read_full(gz, data + got, cap - got, &zmsg);
        got += TNT_MAX(r, 0);
        if (got < cap || cap == total) break;
    }
    if (got < total) {
        free(data);
        s = tnt__error(TNT_ERR_FORMAT, "idx: \"%s\": truncated: expected %lld data bytes, got %lld%s",
                       path, (long long)total, (long long)got, zlib_note(zmsg, note, sizeof note));
        goto done;
    }
    /* one read past the data makes zlib check the gzip trailer (CRC and length); a byte there
     * is data the header does not declare */
    unsigned char extra;
    int code = Z_OK, r = gzread(gz, &extra, 1);
    if (r < 0 || (gzerror(gz, &code), code != Z_OK)) {
        free(data);
        s = tnt__error(TNT_ERR_FORMAT, "idx: \"%s\": corrupt or truncated gzip stream%s", path,
                       zlib_note(gzerror(gz, &code), note, sizeof note));
        goto done;
    }
    if (r > 0) {
        free(data);
        s = tnt__error(TNT_ERR_FORMAT, "idx: \"%s\": trailing junk after the %lld data bytes the header declares",
                       path, (long long)total);
        goto done;
    }
    *col = (tnt__column){.data = data, .dtype = TNT__U8, .shape = shape, .own = TNT__OWN_FREE, .base = data};
    *n = dims[0];
done:
    gzclose(gz);
    return s;
}

tnt_dataset *tnt_dataset_from_idx(const char *images_path, const char *labels_path) {
    if (!images_path) {
        tnt__error(TNT_ERR_ARG, "idx: images_path is NULL");
        return NULL;
    }
    tnt__column x = {0}, y = {0};
    int64_t nx = 0, ny = 0;
    if (idx_load(images_path, false, &x, &nx) != TNT_OK) return NULL;
    if (labels_path) {
        if (idx_load(labels_path, true, &y, &ny) != TNT_OK) {
            tnt__column_release(&x);
            return NULL;
        }
        if (nx != ny) {
            tnt__error(TNT_ERR_SHAPE, "idx: images \"%s\" have %lld samples but labels \"%s\" have %lld",
                       images_path, (long long)nx, labels_path, (long long)ny);
            tnt__column_release(&x);
            tnt__column_release(&y);
            return NULL;
        }
    }
    return tnt__dataset_source("idx", nx, &x, labels_path ? &y : NULL);
}

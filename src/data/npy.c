/* npy.c: NPY source. The file is memory-mapped, so opening a large array costs nothing and a
 * rank touches only the pages of the samples it decodes; values are converted to float32 at
 * materialization. */
#include "data/pipeline.h"
#include "core/atomic_file.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* Finds key's value in the header dict ("'key': value"); NULL when absent. */
static const char *dict_value(const char *h, const char *key) {
    char pat[32];
    for (int q = 0; q < 2; q++) {
        snprintf(pat, sizeof pat, q ? "\"%s\"" : "'%s'", key);
        const char *p = strstr(h, pat);
        if (!p) continue;
        p += strlen(pat);
        while (isspace((unsigned char)*p)) p++;
        if (*p++ != ':') return NULL;
        while (isspace((unsigned char)*p)) p++;
        return p;
    }
    return NULL;
}

static tnt_status parse_descr(const char *path, const char *v, tnt__dtype *dt) {
    char d[32] = "";
    if (v && (*v == '\'' || *v == '"')) {
        const char *end = strchr(v + 1, *v);
        if (end && end - v - 1 < (long)sizeof d) memcpy(d, v + 1, (size_t)(end - v - 1));
    }
    if (!v || !d[0])
        return tnt__error(TNT_ERR_UNSUPPORTED, "npy: \"%s\": descr %.40s: not a simple dtype (structured arrays are not supported)",
                          path, v ? v : "missing");
    static const struct { const char *name; tnt__dtype dt; } known[] = {
        {"f4", TNT__F32}, {"f8", TNT__F64}, {"i1", TNT__I8},  {"i2", TNT__I16},
        {"i4", TNT__I32}, {"i8", TNT__I64}, {"u1", TNT__U8},  {"u2", TNT__U16},
        {"u4", TNT__U32}, {"u8", TNT__U64}, {"b1", TNT__BOOL},
    };
    /* '<' little-endian, '|' no byte order (1 byte), '=' native (this library runs on LE) */
    bool byte_order_ok = d[0] == '<' || d[0] == '|' || d[0] == '=' || (d[0] == '>' && d[2] == '1');
    for (size_t i = 0; byte_order_ok && i < TNT_ARRAY_LEN(known); i++)
        if (!strcmp(d + 1, known[i].name)) {
            *dt = known[i].dt;
            return TNT_OK;
        }
    return tnt__error(TNT_ERR_UNSUPPORTED,
                      "npy: \"%s\": unsupported dtype '%s' (expected little-endian f4, f8, i1, i2, i4, i8, "
                      "u1, u2, u4, u8 or b1)", path, d);
}

/* Parses "(60000, 28, 28)" into dims; returns the count or -1. */
static int parse_shape(const char *v, int64_t *dims, int max) {
    if (!v || *v++ != '(') return -1;
    int n = 0;
    for (;;) {
        while (isspace((unsigned char)*v)) v++;
        if (*v == ')') return n;
        if (!isdigit((unsigned char)*v) || n == max) return -1;
        char *end;
        long long x = strtoll(v, &end, 10);
        if (x < 0 || x > ((int64_t)1 << 40)) return -1;
        dims[n++] = x;
        v = end;
        if (*v == 'L') v++; /* Python 2 longs */
        while (isspace((unsigned char)*v)) v++;
        if (*v == ',') v++;
        else if (*v != ')') return -1;
    }
}

/* Parses the header at p (len bytes) into dtype, shape; rejects Fortran order. */
static tnt_status parse_header(const char *path, const unsigned char *p, size_t len, tnt__dtype *dt,
                               int64_t *dims, int *ndim) {
    char *h = malloc(len + 1);
    if (!h) return tnt__error(TNT_ERR_NOMEM, "npy: \"%s\": out of memory for the header", path);
    memcpy(h, p, len);
    h[len] = '\0';
    tnt_status s = parse_descr(path, dict_value(h, "descr"), dt);
    const char *fo = dict_value(h, "fortran_order");
    const char *sh = dict_value(h, "shape");
    if (s) goto done;
    if (!fo || (strncmp(fo, "True", 4) && strncmp(fo, "False", 5))) {
        s = tnt__error(TNT_ERR_FORMAT, "npy: \"%s\": header has no fortran_order True/False: %.80s", path, h);
        goto done;
    }
    *ndim = parse_shape(sh, dims, TNT_MAX_DIMS);
    if (*ndim < 0) {
        s = tnt__error(TNT_ERR_FORMAT, "npy: \"%s\": bad or missing shape (at most %d dimensions): %.80s",
                       path, TNT_MAX_DIMS, h);
        goto done;
    }
    if (*ndim == 0) {
        s = tnt__error(TNT_ERR_SHAPE, "npy: \"%s\": a 0-d array has no sample axis (expected shape (n, ...))", path);
        goto done;
    }
    if (!strncmp(fo, "True", 4) && *ndim > 1)
        s = tnt__error(TNT_ERR_UNSUPPORTED,
                       "npy: \"%s\": fortran_order True is not supported (save a C-order array, e.g. np.ascontiguousarray)",
                       path);
done:
    free(h);
    return s;
}

/* Maps one NPY file into col; *n receives the length of the first axis. */
static tnt_status npy_load(const char *path, tnt__column *col, int64_t *n) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return tnt__error(TNT_ERR_IO, "npy: \"%s\": %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return tnt__error(TNT_ERR_IO, "npy: \"%s\": %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) { /* mmap needs a regular file */
        close(fd);
        return tnt__error(TNT_ERR_IO, "npy: \"%s\": %s", path,
                          S_ISDIR(st.st_mode) ? strerror(EISDIR) : "not a regular file");
    }
    size_t size = (size_t)st.st_size;
    if (size < 10) {
        close(fd);
        return tnt__error(TNT_ERR_FORMAT, "npy: \"%s\": %zu bytes is too short for an NPY file", path, size);
    }
    unsigned char *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd);
    if (map == MAP_FAILED) return tnt__error(TNT_ERR_IO, "npy: \"%s\": mmap: %s", path, strerror(e));
    tnt_status s = TNT_OK;
    if (memcmp(map, "\x93NUMPY", 6) != 0) {
        s = tnt__error(TNT_ERR_FORMAT, "npy: \"%s\": bad magic (expected \\x93NUMPY)", path);
        goto fail;
    }
    int major = map[6], minor = map[7];
    if (major < 1 || major > 3 || minor != 0) {
        s = tnt__error(TNT_ERR_UNSUPPORTED, "npy: \"%s\": version %d.%d (expected 1.0, 2.0 or 3.0)", path,
                       major, minor);
        goto fail;
    }
    size_t start = major == 1 ? 10 : 12;
    size_t hlen = major == 1 ? (size_t)(map[8] | map[9] << 8)
                             : (size_t)map[8] | (size_t)map[9] << 8 | (size_t)map[10] << 16 | (size_t)map[11] << 24;
    if (size < start || size - start < hlen) {
        s = tnt__error(TNT_ERR_FORMAT, "npy: \"%s\": truncated header (%zu bytes announced, file has %zu)",
                       path, hlen, size);
        goto fail;
    }
    tnt__dtype dt = TNT__F32;
    int64_t dims[TNT_MAX_DIMS] = {0};
    int ndim = 0;
    if ((s = parse_header(path, map + start, hlen, &dt, dims, &ndim))) goto fail;
    tnt_shape shape = {.ndim = ndim - 1};
    int64_t total = dims[0];
    for (int i = 1; i < ndim; i++) {
        shape.dim[i - 1] = dims[i];
        if (dims[i] > 0 && total > ((int64_t)1 << 40) / dims[i]) {
            s = tnt__error(TNT_ERR_FORMAT, "npy: \"%s\": shape too large", path);
            goto fail;
        }
        total *= dims[i];
    }
    /* with no samples, nothing bounds the sample shape (a later batch of 2G-value samples) */
    if (dims[0] == 0) {
        s = tnt__error(TNT_ERR_FORMAT, "npy: \"%s\": shape has 0 samples (an empty array is no dataset)", path);
        goto fail;
    }
    for (int i = 1; i < ndim; i++)
        if (dims[i] == 0) {
            s = tnt__error(TNT_ERR_FORMAT, "npy: \"%s\": dimension %d of the shape has size 0 (expected every "
                           "sample dimension >= 1)", path, i);
            goto fail;
        }
    size_t need = (size_t)total * tnt__dtype_size(dt), have = size - start - hlen;
    if (have != need) {
        s = have < need ? tnt__error(TNT_ERR_FORMAT, "npy: \"%s\": truncated: expected %zu data bytes, file has %zu",
                                     path, need, have)
                        : tnt__error(TNT_ERR_FORMAT, "npy: \"%s\": %zu bytes of trailing junk after the %zu data "
                                     "bytes the header declares", path, have - need, need);
        goto fail;
    }
    *col = (tnt__column){.data = map + start + hlen, .dtype = dt, .shape = shape,
                         .own = TNT__OWN_MUNMAP, .base = map, .base_len = size};
    *n = dims[0];
    return TNT_OK;
fail:
    munmap(map, size);
    return s;
}

tnt_dataset *tnt_dataset_from_npy(const char *x_path, const char *y_path) {
    if (!x_path) {
        tnt__error(TNT_ERR_ARG, "npy: x_path is NULL");
        return NULL;
    }
    tnt__column x = {0}, y = {0};
    int64_t nx = 0, ny = 0;
    if (npy_load(x_path, &x, &nx) != TNT_OK) return NULL;
    if (y_path) {
        if (npy_load(y_path, &y, &ny) != TNT_OK) {
            tnt__column_release(&x);
            return NULL;
        }
        if (nx != ny) {
            tnt__error(TNT_ERR_SHAPE, "npy: x \"%s\" has %lld samples but y \"%s\" has %lld", x_path,
                       (long long)nx, y_path, (long long)ny);
            tnt__column_release(&x);
            tnt__column_release(&y);
            return NULL;
        }
    }
    return tnt__dataset_source("npy", nx, &x, y_path ? &y : NULL);
}

/* ---- writing ----------------------------------------------------------------------------- */

tnt_status tnt_save_npy(const char *path, const tnt_tensor *t) {
    if (!path || !t || (!t->data && tnt_shape_numel(t->shape) > 0))
        return tnt__error(TNT_ERR_ARG, "save_npy: NULL path or tensor");
    /* version 1.0: magic, version, header length, then the dict padded with spaces and a
     * newline to a multiple of 64 bytes */
    char dict[256], shape[160] = "";
    size_t at = 0;
    for (int i = 0; i < t->shape.ndim; i++)
        at += (size_t)snprintf(shape + at, sizeof shape - at, "%lld%s", (long long)t->shape.dim[i],
                               t->shape.ndim == 1 ? "," : i + 1 < t->shape.ndim ? ", " : "");
    int dn = snprintf(dict, sizeof dict, "{'descr': '<f4', 'fortran_order': False, 'shape': (%s), }", shape);
    size_t header = 10 + (size_t)dn + 1, padded = (header + 63) / 64 * 64;
    size_t data_bytes = (size_t)tnt_shape_numel(t->shape) * sizeof(float);
    unsigned char *buf = malloc(padded + data_bytes);
    if (!buf) return tnt__error(TNT_ERR_NOMEM, "save_npy: out of memory for %zu bytes", padded + data_bytes);
    memcpy(buf, "\x93NUMPY\x01\x00", 8);
    uint16_t hlen = (uint16_t)(padded - 10);
    buf[8] = (unsigned char)(hlen & 0xff);
    buf[9] = (unsigned char)(hlen >> 8);
    memcpy(buf + 10, dict, (size_t)dn);
    memset(buf + 10 + dn, ' ', padded - 10 - (size_t)dn - 1);
    buf[padded - 1] = '\n';
    if (data_bytes) memcpy(buf + padded, t->data, data_bytes); /* x86-64: little-endian floats */
    tnt_status s = tnt__atomic_write_data(path, buf, padded + data_bytes);
    free(buf);
    return s;
}

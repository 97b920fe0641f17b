/* tfevents.c: TensorBoard event files, written without a protobuf library.
 *
 * A file is a sequence of TFRecords: uint64 length, uint32 masked CRC-32C of the length bytes,
 * the data, uint32 masked CRC-32C of the data (all little-endian; mask: rotate right by 15 and
 * add 0xa282ead8). Each record is a serialized tensorflow.Event:
 *   Event   { double wall_time = 1; int64 step = 2; string file_version = 3; Summary summary = 5; }
 *   Summary { repeated Value value = 1; }
 *   Value   { string tag = 1; float simple_value = 2; SummaryMetadata metadata = 9; TensorProto tensor = 8; }
 * Scalars are simple_value; a histogram is TensorFlow 2's: a float64 tensor of [left edge, right
 * edge, count] rows with metadata plugin "histograms" (tensorboard's histogram summary_v2).
 * The first record carries file_version "brain.Event:2", as TensorFlow writes it. Records are
 * appended and flushed as they come, so TensorBoard can read a run while it trains. */
#include "io/tfevents.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

struct tnt__tfevents {
    FILE *f;
    char path[4096];
};

/* CRC-32C (Castagnoli), reflected polynomial 0x82f63b78, bytewise table */
static uint32_t crc32c(const uint8_t *p, size_t n) {
    static uint32_t table[256];
    static int ready;
    if (!ready) { /* idempotent: a race writes the same values */
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t c = i;
            for (int k = 0; k < 8; k++) c = c & 1 ? (c >> 1) ^ 0x82f63b78u : c >> 1;
            table[i] = c;
        }
        ready = 1;
    }
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++) c = table[(c ^ p[i]) & 0xff] ^ (c >> 8);
    return c ^ 0xffffffffu;
}

uint32_t tnt__crc32c(const void *data, size_t n) { return crc32c(data, n); }

static uint32_t masked_crc(const uint8_t *p, size_t n) {
    uint32_t c = crc32c(p, n);
    return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

/* ---- a tiny protobuf encoder into a fixed buffer ------------------------------------------- */

typedef struct pb {
    uint8_t buf[2048];
    size_t n;
    bool overflow;
} pb;

static void put(pb *b, const void *p, size_t n) {
    if (b->n + n > sizeof b->buf) {
        b->overflow = true;
        return;
    }
    memcpy(b->buf + b->n, p, n);
    b->n += n;
}

static void varint(pb *b, uint64_t v) {
    do {
        uint8_t byte = (uint8_t)(v & 0x7f);
        v >>= 7;
        if (v) byte |= 0x80;
        put(b, &byte, 1);
    } while (v);
}

static void key(pb *b, int field, int wire) { varint(b, (uint64_t)(field << 3 | wire)); }

static void bytes_field(pb *b, int field, const void *p, size_t n) {
    key(b, field, 2);
    varint(b, n);
    put(b, p, n);
}

static void le(pb *b, uint64_t v, int bytes) {
    uint8_t out[8];
    for (int i = 0; i < bytes; i++) out[i] = (uint8_t)(v >> (8 * i));
    put(b, out, (size_t)bytes);
}

static double now(void) {
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (double)tv.tv_sec + tv.tv_usec * 1e-6;
}

static tnt_status write_record(tnt__tfevents *w, const pb *event) {
    if (event->overflow) return tnt__error(TNT_ERR_ARG, "tensorboard: event larger than %zu bytes", sizeof event->buf);
    pb head = {0};
    le(&head, event->n, 8);
    uint32_t c1 = masked_crc(head.buf, 8), c2 = masked_crc(event->buf, event->n);
    pb crc1 = {0}, crc2 = {0};
    le(&crc1, c1, 4);
    le(&crc2, c2, 4);
    if (fwrite(head.buf, 1, 8, w->f) != 8 || fwrite(crc1.buf, 1, 4, w->f) != 4 ||
        fwrite(event->buf, 1, event->n, w->f) != event->n || fwrite(crc2.buf, 1, 4, w->f) != 4 || fflush(w->f))
        return tnt__error(TNT_ERR_IO, "tensorboard: writing %s: %s", w->path, strerror(errno));
    return TNT_OK;
}

static void event_head(pb *e, int64_t step, bool with_step) {
    uint64_t bits;
    double t = now();
    memcpy(&bits, &t, sizeof bits);
    key(e, 1, 1);
    le(e, bits, 8);
    if (with_step) {
        key(e, 2, 0);
        varint(e, (uint64_t)step);
    }
}

/* mkdir -p */
static tnt_status make_dirs(const char *dir) {
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s", dir) >= (int)sizeof tmp)
        return tnt__error(TNT_ERR_ARG, "tensorboard: log_dir is too long");
    for (char *p = tmp + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            if (mkdir(tmp, 0777) && errno != EEXIST)
                return tnt__error(TNT_ERR_IO, "tensorboard: cannot create %s: %s", tmp, strerror(errno));
            *p = '/';
        }
    if (mkdir(tmp, 0777) && errno != EEXIST)
        return tnt__error(TNT_ERR_IO, "tensorboard: cannot create %s: %s", tmp, strerror(errno));
    return TNT_OK;
}

tnt__tfevents *tnt__tfevents_open(const char *log_dir, const char *suffix) {
    if (!log_dir || !log_dir[0]) {
        tnt__error(TNT_ERR_ARG, "tensorboard: log_dir is empty");
        return NULL;
    }
    if (make_dirs(log_dir) != TNT_OK) return NULL;
    tnt__tfevents *w = tnt__calloc(1, sizeof *w);
    if (!w) return NULL;
    char host[256] = "localhost";
    gethostname(host, sizeof host - 1);
    /* TensorFlow's name: events.out.tfevents.<seconds>.<host>.<pid>.<n>.v2 */
    static int counter;
    snprintf(w->path, sizeof w->path, "%s/events.out.tfevents.%lld.%s.%d.%d%s.v2", log_dir, (long long)now(), host,
             (int)getpid(), counter++, suffix ? suffix : "");
    w->f = fopen(w->path, "wb");
    if (!w->f) {
        tnt__error(TNT_ERR_IO, "tensorboard: cannot create %s: %s", w->path, strerror(errno));
        free(w);
        return NULL;
    }
    pb e = {0};
    event_head(&e, 0, false);
    bytes_field(&e, 3, "brain.Event:2", 13);
    if (write_record(w, &e) != TNT_OK) {
        tnt__tfevents_close(w);
        return NULL;
    }
    return w;
}

tnt_status tnt__tfevents_scalar(tnt__tfevents *w, const char *tag, float value, int64_t step) {
    if (!w || !tag) return tnt__error(TNT_ERR_ARG, "tensorboard: NULL writer or tag");
    pb v = {0}, summary = {0}, e = {0};
    bytes_field(&v, 1, tag, strlen(tag));
    uint32_t bits;
    memcpy(&bits, &value, sizeof bits);
    key(&v, 2, 5);
    le(&v, bits, 4);
    bytes_field(&summary, 1, v.buf, v.n);
    event_head(&e, step, true);
    bytes_field(&e, 5, summary.buf, summary.n);
    if (v.overflow || summary.overflow) e.overflow = true;
    return write_record(w, &e);
}

/* tensorboard 2.11's histogram buckets (plugins/histogram/summary_v2.py, _buckets): 30 of equal
 * width over [min, max], a value in bucket floor((x - min) / width), the last one closed at max;
 * all values equal: one bucket [x - 0.5, x + 0.5]; no values: none. rows: 30 x 3 doubles. */
static int histogram_buckets(const float *data, int64_t n, double *rows) {
    enum { BUCKETS = 30 };
    if (n <= 0) return 0;
    double lo = data[0], hi = data[0];
    for (int64_t i = 1; i < n; i++) {
        if (data[i] < lo) lo = data[i];
        if (data[i] > hi) hi = data[i];
    }
    if (hi == lo) {
        rows[0] = lo - 0.5, rows[1] = lo + 0.5, rows[2] = (double)n;
        return 1;
    }
    double width = (hi - lo) / BUCKETS;
    for (int b = 0; b < BUCKETS; b++) {
        rows[3 * b] = lo + (hi - lo) * b / BUCKETS; /* tf.linspace(min, max, 31), the last edge max */
        rows[3 * b + 1] = b == BUCKETS - 1 ? hi : lo + (hi - lo) * (b + 1) / BUCKETS;
        rows[3 * b + 2] = 0;
    }
    for (int64_t i = 0; i < n; i++) {
        int b = (int)floor((data[i] - lo) / width);
        rows[3 * (b < BUCKETS - 1 ? b : BUCKETS - 1) + 2] += 1;
    }
    return BUCKETS;
}

tnt_status tnt__tfevents_histogram(tnt__tfevents *w, const char *tag, const float *data, int64_t n, int64_t step) {
    if (!w || !tag || (n > 0 && !data)) return tnt__error(TNT_ERR_ARG, "tensorboard: NULL writer, tag or data");
    double rows[90];
    int k = histogram_buckets(data, n, rows);
    pb plugin = {0}, meta = {0}, dim = {0}, shape = {0}, tensor = {0}, v = {0}, summary = {0}, e = {0};
    bytes_field(&plugin, 1, "histograms", 10);
    bytes_field(&plugin, 2, "", 0); /* HistogramPluginData version 0: empty */
    bytes_field(&meta, 1, plugin.buf, plugin.n);
    key(&meta, 4, 0);
    varint(&meta, 2); /* DATA_CLASS_TENSOR */
    key(&dim, 1, 0);
    varint(&dim, (uint64_t)k);
    bytes_field(&shape, 2, dim.buf, dim.n);
    dim = (pb){0};
    key(&dim, 1, 0);
    varint(&dim, 3);
    bytes_field(&shape, 2, dim.buf, dim.n);
    key(&tensor, 1, 0);
    varint(&tensor, 2); /* DT_DOUBLE */
    bytes_field(&tensor, 2, shape.buf, shape.n);
    uint8_t content[sizeof rows];
    for (int i = 0; i < 3 * k; i++) {
        uint64_t bits;
        memcpy(&bits, &rows[i], sizeof bits);
        for (int j = 0; j < 8; j++) content[8 * i + j] = (uint8_t)(bits >> (8 * j)); /* little-endian */
    }
    bytes_field(&tensor, 4, content, (size_t)(24 * k));
    bytes_field(&v, 1, tag, strlen(tag));
    bytes_field(&v, 9, meta.buf, meta.n);
    bytes_field(&v, 8, tensor.buf, tensor.n);
    bytes_field(&summary, 1, v.buf, v.n);
    event_head(&e, step, true);
    bytes_field(&e, 5, summary.buf, summary.n);
    if (tensor.overflow || v.overflow || summary.overflow) e.overflow = true;
    return write_record(w, &e);
}

const char *tnt__tfevents_path(const tnt__tfevents *w) { return w ? w->path : ""; }

void tnt__tfevents_close(tnt__tfevents *w) {
    if (!w) return;
    if (w->f) fclose(w->f);
    free(w);
}

/* backup.c: Keras's BackupAndRestore. The master writes backup_dir/backup.tnt atomically at every
 * epoch end and, with save_freq N, every N batches; every rank reads it at the start of fit, and
 * fit resumes from the epoch and batch it names (fit skips the batches of that epoch already
 * trained: the shuffle is a function of the dataset's seed and the epoch, so they are the same).
 * The file holds all that the next step depends on, so a resumed run is bitwise the unbroken one
 * on the same number of ranks: the trainable weights, the non-trainable state (moving
 * statistics), the optimizer's slots, iterations (which also key the dropout masks and a
 * learning-rate schedule), its rate and Nadam's momentum product, and the model's step counter.
 *
 * Our own format rather than an .h5: it must hold the position and the optimizer's whole state,
 * exactly, and be checked before anything is loaded. Native byte order (a backup serves a restart
 * on the same machines), all counts 64-bit:
 *   "TNTBACK1", then int64: version 1, epoch, step, ranks, seed, model step, iterations,
 *   u_product (double), learning rate (double), optimizer kind, slots, n_params, n_state,
 *   n_weights; per weight: trainable, ndim, dims[ndim], name length, name (no terminator);
 *   params, state, slot 0, slot 1, ... (float32); FNV-1a 64 of all the bytes before it. */
#include "callbacks/callbacks.h"
#include "comm/comm.h"
#include "core/atomic_file.h"
#include "io/save_check.h"
#include "model/model.h"
#include "model/device.h"
#include "optimizers/optimizer.h"
#include "training/parallel.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAGIC "TNTBACK1"
enum { VERSION = 1, N_HEADER = 14, MAX_NAME = 4096 };

typedef struct backup {
    char *dir, *path;
    int64_t save_freq; /* 0: at epoch ends only */
    bool delete_checkpoint;
    int epoch;
    int64_t since_save;
} backup;

/* ---- writing (master) ------------------------------------------------------------------------ */

typedef struct writer {
    int fd;
    uint64_t h;
    const char *path;
    tnt_status s;
} writer;

static void put(writer *w, const void *p, size_t n) {
    w->h = tnt__fnv1a(w->h, p, n);
    for (const char *c = p; n > 0 && w->s == TNT_OK;) {
        ssize_t k = write(w->fd, c, n);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) w->s = tnt__error(TNT_ERR_IO, "%s: write failed: %s", w->path, strerror(k < 0 ? errno : ENOSPC));
        else c += k, n -= (size_t)k;
    }
}
static void put_i64(writer *w, int64_t v) { put(w, &v, sizeof v); }

typedef struct save_ctx {
    tnt_model *m;
    int64_t epoch, step;
} save_ctx;

static tnt_status fill(const char *tmp, void *ctx) {
    const save_ctx *c = ctx;
    tnt_model *m = c->m;
    const tnt_optimizer *o = m->optimizer;
    writer w = {.fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666), .path = tmp};
    if (w.fd < 0) return tnt__error(TNT_ERR_IO, "%s: cannot create: %s", tmp, strerror(errno));
    int n_weights = tnt_model_num_weights(m);
    double u = o->nadam_u_product, lr = o->learning_rate;
    put(&w, MAGIC, 8);
    int64_t head[N_HEADER] = {VERSION, c->epoch, c->step, tnt_get_size(), (int64_t)m->seed, m->step, o->iterations,
                              0, 0, o->kind, o->n_slots, m->n_params, m->n_state, n_weights};
    memcpy(&head[7], &u, sizeof u);
    memcpy(&head[8], &lr, sizeof lr);
    put(&w, head, sizeof head);
    for (int i = 0; i < m->n_layers; i++)
        for (int j = 0; j < m->layers[i]->n_weights; j++) {
            const tnt__weight *x = &m->layers[i]->weights[j];
            char name[2 * TNT_NAME_MAX + 8];
            int len = snprintf(name, sizeof name, "%s/%s:0", m->layers[i]->name, x->name);
            put_i64(&w, x->trainable);
            put_i64(&w, x->shape.ndim);
            put(&w, x->shape.dim, (size_t)x->shape.ndim * sizeof x->shape.dim[0]);
            put_i64(&w, len);
            put(&w, name, (size_t)len);
        }
    put(&w, m->params, (size_t)m->n_params * sizeof(float));
    put(&w, m->state, (size_t)m->n_state * sizeof(float));
    for (int k = 0; k < o->n_slots; k++) put(&w, o->slots[k], (size_t)m->n_params * sizeof(float));
    uint64_t h = w.h;
    put(&w, &h, sizeof h);
    if (close(w.fd) != 0 && w.s == TNT_OK) w.s = tnt__error(TNT_ERR_IO, "%s: write failed: %s", tmp, strerror(errno));
    return w.s;
}

/* The master writes; every rank learns the outcome (a full disk stops all alike). */
static tnt_status save(tnt_model *m, backup *b, int64_t epoch, int64_t step) {
    tnt_status s = tnt__model_host_weights(m); /* the device's newer weights and slots first */
    if (s == TNT_OK && tnt_is_master_rank()) s = tnt__atomic_write_path(b->path, fill, &(save_ctx){m, epoch, step});
    if (tnt__is_parallel(m)) s = tnt__agree(s, NULL, 0);
    b->since_save = 0;
    return s != TNT_OK ? tnt__error_prefix(s, "BackupAndRestore: ") : TNT_OK;
}

/* ---- reading (every rank) -------------------------------------------------------------------- */

typedef struct state {
    int64_t head[N_HEADER];
    float *data; /* params, state, slots */
    uint64_t hash;
} state;

typedef struct reader {
    FILE *f;
    uint64_t h;
    int64_t left; /* bytes of the file not read yet */
} reader;

static bool get(reader *r, void *p, size_t n) {
    if ((int64_t)n > r->left || fread(p, 1, n, r->f) != n) return false;
    r->left -= (int64_t)n;
    r->h = tnt__fnv1a(r->h, p, n);
    return true;
}

static const char *shape_str(int64_t ndim, const int64_t *dims, char *buf, size_t size) {
    tnt_shape s = {.ndim = (int)ndim};
    memcpy(s.dim, dims, (size_t)ndim * sizeof dims[0]);
    return tnt_shape_str(s, buf, size);
}

/* Reads and checks the table of weights against m: the backup must be of this model. */
static tnt_status check_weights(const tnt_model *m, reader *r, int64_t n_weights, const char *path) {
    if (n_weights != tnt_model_num_weights(m))
        return tnt__error(TNT_ERR_ARG, "%s holds %lld weights, model \"%s\" has %d: the backup is of another model; "
                          "not loaded (remove it to start afresh)", path, (long long)n_weights, m->name,
                          tnt_model_num_weights(m));
    int64_t i = 0;
    for (int l = 0; l < m->n_layers; l++)
        for (int j = 0; j < m->layers[l]->n_weights; j++, i++) {
            const tnt__weight *x = &m->layers[l]->weights[j];
            int64_t trainable, ndim, dims[TNT_MAX_DIMS], len;
            char name[MAX_NAME + 1], a[128], b[128];
            if (!get(r, &trainable, 8) || !get(r, &ndim, 8) || ndim < 0 || ndim > TNT_MAX_DIMS ||
                !get(r, dims, (size_t)ndim * 8) || !get(r, &len, 8) || len < 0 || len > MAX_NAME ||
                !get(r, name, (size_t)len))
                return tnt__error(TNT_ERR_FORMAT, "%s: weight %lld: truncated or damaged entry", path, (long long)i);
            name[len] = '\0';
            bool same = trainable == x->trainable && ndim == x->shape.ndim &&
                        !memcmp(dims, x->shape.dim, (size_t)ndim * sizeof dims[0]);
            if (!same)
                return tnt__error(TNT_ERR_ARG, "%s is of another model: its weight %lld is \"%s\" %s%s, model \"%s\" has "
                                  "\"%s/%s:0\" %s%s; not loaded (remove the backup to start afresh)", path, (long long)i,
                                  name, shape_str(ndim, dims, a, sizeof a), trainable ? "" : " (non-trainable)", m->name,
                                  m->layers[l]->name, x->name, tnt_shape_str(x->shape, b, sizeof b),
                                  x->trainable ? "" : " (non-trainable)");
        }
    return TNT_OK;
}

/* Reads path into st (nothing of m changes); *found false when there is no backup. */
static tnt_status read_backup(const tnt_model *m, const char *path, state *st, bool *found) {
    *found = false;
    struct stat sb;
    if (stat(path, &sb) != 0)
        return errno == ENOENT ? TNT_OK : tnt__error(TNT_ERR_IO, "%s: %s", path, strerror(errno));
    *found = true;
    reader r = {.f = fopen(path, "rb"), .left = (int64_t)sb.st_size};
    if (!r.f) return tnt__error(TNT_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    tnt_status s = TNT_OK;
    char magic[8];
    int64_t *h = st->head;
    const tnt_optimizer *o = m->optimizer;
    if (!get(&r, magic, 8) || memcmp(magic, MAGIC, 8) || !get(&r, h, sizeof st->head) || h[0] != VERSION) {
        s = tnt__error(TNT_ERR_FORMAT, "%s: not a backup of this library (version %d)", path, VERSION);
        goto done;
    }
    if ((s = check_weights(m, &r, h[13], path)) != TNT_OK) goto done;
    if (h[9] != o->kind || h[10] != o->n_slots || h[11] != m->n_params || h[12] != m->n_state) {
        s = tnt__error(TNT_ERR_ARG, "%s: optimizer kind %lld with %lld slots over %lld + %lld values there, %s with %d slots "
                       "over %lld + %lld here; not loaded (remove the backup to start afresh)", path, (long long)h[9],
                       (long long)h[10], (long long)h[11], (long long)h[12], o->name, o->n_slots, (long long)m->n_params,
                       (long long)m->n_state);
        goto done;
    }
    int64_t n = m->n_params * (1 + o->n_slots) + m->n_state;
    if (r.left != n * (int64_t)sizeof(float) + 8) { /* before the allocation */
        s = tnt__error(TNT_ERR_FORMAT, "%s: %lld bytes of values, %lld expected (truncated or damaged)", path,
                       (long long)r.left - 8, (long long)(n * (int64_t)sizeof(float)));
        goto done;
    }
    uint64_t want;
    if (!(st->data = malloc((size_t)n * sizeof(float) + 1))) {
        s = tnt__error(TNT_ERR_NOMEM, "%s: out of memory", path);
        goto done;
    }
    if (!get(&r, st->data, (size_t)n * sizeof(float))) {
        s = tnt__error(TNT_ERR_IO, "%s: read failed", path);
        goto done;
    }
    st->hash = r.h;
    if (fread(&want, 8, 1, r.f) != 1 || want != st->hash)
        s = tnt__error(TNT_ERR_FORMAT, "%s: checksum mismatch: the file is damaged; not loaded", path);
    else if (h[1] < 0 || h[2] < 0 || h[6] < 0)
        s = tnt__error(TNT_ERR_FORMAT, "%s: epoch %lld, step %lld, iterations %lld", path, (long long)h[1],
                       (long long)h[2], (long long)h[6]);
done:
    fclose(r.f);
    return s;
}

static void apply(tnt_model *m, const state *st) {
    const int64_t *h = st->head;
    tnt_optimizer *o = m->optimizer;
    const float *p = st->data;
    memcpy(m->params, p, (size_t)m->n_params * sizeof(float));
    memcpy(m->state, p + m->n_params, (size_t)m->n_state * sizeof(float));
    for (int k = 0; k < o->n_slots; k++)
        memcpy(o->slots[k], p + m->n_params * (1 + k) + m->n_state, (size_t)m->n_params * sizeof(float));
    double u, lr;
    memcpy(&u, &h[7], sizeof u);
    memcpy(&lr, &h[8], sizeof lr);
    o->iterations = h[6];
    o->nadam_u_product = u;
    o->schedule_step = -1; /* a schedule computes the rate of the next step afresh */
    if (!o->schedule) o->learning_rate = (float)lr;
    m->step = h[5];
    m->resume_epoch = (int)h[1];
    m->resume_step = h[2];
}

/* ---- the callback ---------------------------------------------------------------------------- */

/* The directory exists (made if absent) and takes files: checked before training starts. */
static tnt_status prepare_dir(const backup *b) {
    return tnt__check_save_path(b->path, true, "BackupAndRestore: backup_dir");
}

static tnt_status on_begin(tnt_model *m, const tnt_logs *logs, void *user) {
    (void)logs;
    backup *b = user;
    bool parallel = tnt__is_parallel(m);
    b->epoch = 0;
    b->since_save = 0;
    state st = {0};
    bool found = false;
    tnt_status s = tnt_is_master_rank() ? prepare_dir(b) : TNT_OK;
    if (s == TNT_OK) s = tnt__model_setup_weights(m);
    if (s == TNT_OK) s = read_backup(m, b->path, &st, &found);
    if (s != TNT_OK && !strstr(tnt_last_error(), "BackupAndRestore")) tnt__error_prefix(s, "BackupAndRestore: ");
    int64_t seen = found;
    if (parallel) s = tnt__agree(s, &seen, 1);
    if (s == TNT_OK && seen != 0 && seen != tnt_get_size())
        s = tnt__error(TNT_ERR_IO, "BackupAndRestore: %s: %lld of %d ranks see a backup there (backup_dir must be on a "
                       "file system that every host shares)", b->path, (long long)seen, tnt_get_size());
    if (s == TNT_OK && seen && parallel)
        s = tnt__check_same("BackupAndRestore", (const char *const[]){"backup"}, &st.hash, 1);
    if (s == TNT_OK && seen) s = tnt__model_host_written(m); /* uploaded before the next device step */
    if (s == TNT_OK && seen) {
        apply(m, &st);
        if (st.head[3] != tnt_get_size())
            tnt_log(TNT_LOG_WARNING, "BackupAndRestore: %s was written on %lld ranks, training resumes on %d: the same "
                    "training, but not bitwise the same sums", b->path, (long long)st.head[3], tnt_get_size());
        if ((uint64_t)st.head[4] != m->seed)
            tnt_log(TNT_LOG_WARNING, "BackupAndRestore: %s was written with seed %llu, this model has %llu: dropout "
                    "masks differ from the interrupted run", b->path, (unsigned long long)st.head[4],
                    (unsigned long long)m->seed);
        tnt_log(TNT_LOG_INFO, "BackupAndRestore: resuming from %s at epoch %d, batch %lld", b->path, m->resume_epoch + 1,
                (long long)m->resume_step);
        b->epoch = m->resume_epoch;
    }
    free(st.data);
    return s;
}

static tnt_status on_epoch_begin(tnt_model *m, int epoch, const tnt_logs *logs, void *user) {
    (void)m, (void)logs;
    ((backup *)user)->epoch = epoch;
    return TNT_OK;
}

static tnt_status on_batch_end(tnt_model *m, int64_t batch, const tnt_logs *logs, void *user) {
    (void)logs;
    backup *b = user;
    return ++b->since_save >= b->save_freq ? save(m, b, b->epoch, batch + 1) : TNT_OK;
}

/* Also with save_freq N: a backup at a batch cannot tell the epoch's last batch, after which a
 * resumed fit would skip the whole epoch. */
static tnt_status on_epoch_end(tnt_model *m, int epoch, const tnt_logs *logs, void *user) {
    (void)logs;
    return save(m, user, epoch + 1, 0);
}

static tnt_status on_end(tnt_model *m, const tnt_logs *logs, void *user) {
    (void)logs;
    backup *b = user;
    if (!b->delete_checkpoint) return TNT_OK;
    if (tnt_is_master_rank()) {
        unlink(b->path);
        rmdir(b->dir); /* only when nothing else is in it */
    }
    /* a next fit with this callback must not find the file on a rank that runs ahead */
    return tnt__is_parallel(m) ? tnt__barrier() : TNT_OK;
}

static void destroy(void *user) {
    backup *b = user;
    free(b->dir);
    free(b->path);
    free(b);
}

tnt_callback tnt_backup_and_restore(const char *backup_dir, int64_t save_freq, bool delete_checkpoint) {
    if (!backup_dir || !backup_dir[0] || save_freq < 0) {
        tnt__error(TNT_ERR_ARG, "BackupAndRestore: backup_dir \"%s\", save_freq %lld (expected a directory and save_freq "
                   ">= 0, 0 meaning \"epoch\")", backup_dir ? backup_dir : "(null)", (long long)save_freq);
        return tnt__callback_failed(TNT_ERR_ARG);
    }
    backup *b = tnt__calloc(1, sizeof *b);
    size_t n = strlen(backup_dir);
    if (b && (b->dir = tnt__strdup(backup_dir)) && (b->path = malloc(n + 16)))
        snprintf(b->path, n + 16, "%s/backup.tnt", backup_dir);
    if (!b || !b->path) {
        if (b) destroy(b);
        return tnt__callback_failed(TNT_ERR_NOMEM);
    }
    b->save_freq = save_freq;
    b->delete_checkpoint = delete_checkpoint;
    return (tnt_callback){.user = b, .on_train_begin = on_begin, .on_train_end = on_end, .on_epoch_begin = on_epoch_begin,
                          .on_epoch_end = on_epoch_end, .on_train_batch_end = save_freq > 0 ? on_batch_end : NULL,
                          .destroy = destroy};
}

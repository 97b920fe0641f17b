/* checkpoint.c: Keras's ModelCheckpoint, and its file-name templates (Python's str.format). */
#include "core/core.h"
#include "callbacks/callbacks.h"
#include "comm/comm.h"
#include "io/save_check.h"
#include "model/model.h"
#include "training/parallel.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One replacement field of Python's str.format: value (integer when is_int) under spec. */
static tnt_status format_field(const char *name, const char *spec, bool is_int, long long iv, double dv, char *out,
                               size_t size) {
    const char *s = spec;
    char sign = 0, zero = 0, type = 0;
    int width = -1, prec = -1;
    if (*s == '+' || *s == '-' || *s == ' ') sign = *s++;
    if (*s == '0') zero = *s++;
    if (isdigit((unsigned char)*s)) width = (int)strtol(s, (char **)&s, 10);
    if (*s == '.') {
        s++;
        if (!isdigit((unsigned char)*s)) goto bad;
        prec = (int)strtol(s, (char **)&s, 10);
    }
    if (*s && strchr("dfFeEgG%", *s)) type = *s++;
    if (*s) goto bad;
    if (type == 'd' && !is_int)
        return tnt__error(TNT_ERR_ARG, "format_filepath: {%s:%s}: format code 'd' for a float value", name, spec);
    char f[32], body[128];
    char flags[4] = {0};
    int nf = 0;
    if (sign && sign != '-') flags[nf++] = sign;
    if (zero) flags[nf++] = '0';
    if (is_int && (type == 0 || type == 'd')) {
        if (prec >= 0) return tnt__error(TNT_ERR_ARG, "format_filepath: {%s:%s}: precision for an integer", name, spec);
        snprintf(f, sizeof f, "%%%s%s%dlld", flags, width >= 0 ? "" : "", width >= 0 ? width : 0);
        snprintf(body, sizeof body, f, iv);
    } else {
        double v = is_int ? (double)iv : dv;
        if (type == 0 && prec < 0) { /* str(float), padded */
            char r[64];
            tnt__py_float_str(v, r, sizeof r);
            if (sign == '+' && v >= 0) memmove(r + 1, r, strlen(r) + 1), r[0] = '+';
            if (sign == ' ' && v >= 0) memmove(r + 1, r, strlen(r) + 1), r[0] = ' ';
            int pad = width - (int)strlen(r);
            if (pad > 0 && zero) {
                int at = (r[0] == '-' || r[0] == '+' || r[0] == ' ') ? 1 : 0;
                snprintf(body, sizeof body, "%.*s%0*d%s", at, r, pad, 0, r + at);
            } else {
                snprintf(body, sizeof body, "%*s", width > 0 ? width : 0, r);
            }
        } else {
            char t = type == 0 ? 'g' : type == '%' ? 'f' : type;
            if (type == '%') v *= 100.0, width = width > 0 ? width - 1 : width;
            snprintf(f, sizeof f, "%%%s%d.%d%c", flags, width >= 0 ? width : 0, prec >= 0 ? prec : 6, t);
            snprintf(body, sizeof body, f, v);
            if (type == '%') strcat(body, "%");
        }
    }
    if (strlen(body) >= size) return tnt__error(TNT_ERR_ARG, "format_filepath: the name is too long");
    memcpy(out, body, strlen(body) + 1);
    return TNT_OK;
bad:
    return tnt__error(TNT_ERR_ARG, "format_filepath: {%s:%s}: unsupported format spec (expected "
                                   "[+- ][0][width][.precision][d|f|e|g|%%])", name, spec);
}

tnt_status tnt_format_filepath(const char *tmpl, int epoch, int64_t batch, const tnt_logs *logs, char *buf,
                               size_t size) {
    if (!tmpl || !buf || size == 0) return tnt__error(TNT_ERR_ARG, "format_filepath: NULL argument");
    size_t k = 0;
    const char *p = tmpl;
    tnt_status s;
    while (*p) {
        char piece[160];
        if ((p[0] == '{' && p[1] == '{') || (p[0] == '}' && p[1] == '}')) {
            piece[0] = p[0], piece[1] = 0;
            p += 2;
        } else if (*p == '}') {
            return tnt__error(TNT_ERR_ARG, "format_filepath: \"%s\": single '}' (write }} for a brace)", tmpl);
        } else if (*p == '{') {
            const char *end = strchr(p, '}');
            if (!end) return tnt__error(TNT_ERR_ARG, "format_filepath: \"%s\": '{' without '}'", tmpl);
            char field[128], name[TNT_LOG_NAME_MAX + 1];
            size_t len = (size_t)(end - p - 1);
            if (len >= sizeof field) return tnt__error(TNT_ERR_ARG, "format_filepath: \"%s\": field too long", tmpl);
            memcpy(field, p + 1, len);
            field[len] = 0;
            char *colon = strchr(field, ':');
            const char *spec = colon ? colon + 1 : "";
            if (colon) *colon = 0;
            if (strlen(field) > TNT_LOG_NAME_MAX || !field[0] || strpbrk(field, "!.[{"))
                return tnt__error(TNT_ERR_ARG, "format_filepath: \"%s\": field {%s} is not a plain name", tmpl,
                                  field);
            snprintf(name, sizeof name, "%s", field);
            double v;
            if (!strcmp(name, "epoch")) s = format_field(name, spec, true, epoch, 0, piece, sizeof piece);
            else if (!strcmp(name, "batch") && batch >= 0) s = format_field(name, spec, true, batch, 0, piece, sizeof piece);
            else if (logs && tnt_logs_get(logs, name, &v)) s = format_field(name, spec, false, 0, v, piece, sizeof piece);
            else {
                char avail[TNT_MAX_LOGS * (TNT_LOG_NAME_MAX + 2) + 16] = "epoch";
                if (batch >= 0) strcat(avail, ", batch");
                for (int i = 0; logs && i < logs->n; i++) strcat(avail, ", "), strcat(avail, logs->names[i]);
                return tnt__error(TNT_ERR_ARG, "format_filepath: \"%s\": {%s} is not in the logs (available: %s)",
                                  tmpl, name, avail);
            }
            if (s != TNT_OK) return s;
            p = end + 1;
        } else {
            piece[0] = *p++, piece[1] = 0;
        }
        size_t n = strlen(piece);
        if (k + n >= size)
            return tnt__error(TNT_ERR_ARG, "format_filepath: \"%s\": the name needs more than %zu bytes", tmpl, size - 1);
        memcpy(buf + k, piece, n);
        k += n;
    }
    buf[k] = 0;
    return TNT_OK;
}

/* ---------------------------------------------------------------------------------------------
 * ModelCheckpoint. Every rank calls tnt_save_weights, or tnt_save_model when not
 * save_weights_only (the master writes, all meet at its
 * barrier), so the callback is not master_only; the decisions depend on the logs alone, which
 * are the same on every rank.
 * ------------------------------------------------------------------------------------------- */
typedef struct checkpoint {
    char *filepath;
    char monitor[TNT_LOG_NAME_MAX];
    bool greater, save_best_only, has_threshold;
    double threshold, best;
    int verbose;
    int64_t save_freq; /* 0: each epoch */
    tnt_save_opts save;
    bool weights_only; /* false: the whole model (tnt_save_model) */
    int epoch;
    int64_t last_batch, since_save;
} checkpoint;

static tnt_status ck_train_begin(tnt_model *m, const tnt_logs *logs, void *user) {
    (void)logs;
    checkpoint *c = user;
    c->best = c->has_threshold ? c->threshold : c->greater ? -INFINITY : INFINITY;
    c->epoch = 0;
    c->last_batch = -1;
    c->since_save = 0;
    /* what the saves need, checked now rather than after the first epoch: the names, and the
     * directory (made if missing, as Keras 3 does) unless its own name comes from the template */
    tnt_status s = TNT_OK;
    if (tnt_is_master_rank() || c->save.save_all_devices) {
        const char *slash = strrchr(c->filepath, '/');
        s = tnt__check_save_names(m, "ModelCheckpoint", c->filepath);
        if (s == TNT_OK && !(slash && memchr(c->filepath, '{', (size_t)(slash - c->filepath))))
            s = tnt__check_save_path(c->filepath, true, "ModelCheckpoint");
    }
    return tnt__is_parallel(m) ? tnt__agree(s, NULL, 0) : s;
}

static tnt_status ck_epoch_begin(tnt_model *m, int epoch, const tnt_logs *logs, void *user) {
    (void)m, (void)logs;
    ((checkpoint *)user)->epoch = epoch;
    return TNT_OK;
}

static tnt_status ck_save(tnt_model *m, checkpoint *c, int epoch, int64_t batch, const tnt_logs *logs) {
    char path[4096];
    tnt_status s = tnt_format_filepath(c->filepath, epoch + 1, batch >= 0 ? batch + 1 : -1, logs, path, sizeof path);
    if (s != TNT_OK) return tnt__error_prefix(s, "ModelCheckpoint: ");
    if (c->save_best_only) {
        double cur;
        if (!tnt_logs_get(logs, c->monitor, &cur)) {
            tnt_log(TNT_LOG_WARNING, "Can save best model only with %s available, skipping.", c->monitor);
            return TNT_OK;
        }
        if (!(c->greater ? cur > c->best : cur < c->best)) {
            if (c->verbose > 0) tnt__callback_say("\nEpoch %05d: %s did not improve from %0.5f\n", epoch + 1, c->monitor, c->best);
            return TNT_OK;
        }
        if (c->verbose > 0)
            tnt__callback_say("\nEpoch %05d: %s improved from %0.5f to %0.5f, saving model to %s\n", epoch + 1, c->monitor, c->best,
                cur, path);
        c->best = cur;
    } else if (c->verbose > 0) {
        tnt__callback_say("\nEpoch %05d: saving model to %s\n", epoch + 1, path);
    }
    s = c->weights_only ? tnt_save_weights(m, path, &c->save) : tnt_save_model(m, path, &c->save);
    if (s != TNT_OK) return tnt__error_prefix(s, "ModelCheckpoint: ");
    return TNT_OK;
}

static tnt_status ck_batch_end(tnt_model *m, int64_t batch, const tnt_logs *logs, void *user) {
    checkpoint *c = user;
    /* Keras's _should_save_on_batch: a batch index that does not grow starts a new epoch */
    c->since_save += batch <= c->last_batch ? batch + 1 : batch - c->last_batch;
    c->last_batch = batch;
    if (c->since_save < c->save_freq) return TNT_OK;
    c->since_save = 0;
    return ck_save(m, c, c->epoch, batch, logs);
}

static tnt_status ck_epoch_end(tnt_model *m, int epoch, const tnt_logs *logs, void *user) {
    checkpoint *c = user;
    return c->save_freq == 0 ? ck_save(m, c, epoch, -1, logs) : TNT_OK;
}

static void ck_destroy(void *user) {
    checkpoint *c = user;
    free(c->filepath);
    free(c);
}

tnt_callback tnt_model_checkpoint(const char *filepath, const tnt_checkpoint_opts *opts) {
    tnt_checkpoint_opts o = opts ? *opts : (tnt_checkpoint_opts){0};
    const char *monitor = o.monitor ? o.monitor : "val_loss";
    if (!filepath || !filepath[0]) {
        tnt__error(TNT_ERR_ARG, "ModelCheckpoint: filepath is NULL or empty");
        return tnt__callback_failed(TNT_ERR_ARG);
    }
    if (!tnt__callback_check_mode(o.mode, "ModelCheckpoint")) return tnt__callback_failed(TNT_ERR_ARG);
    if (strlen(monitor) >= TNT_LOG_NAME_MAX || !monitor[0] || o.save_freq < 0) {
        tnt__error(TNT_ERR_ARG, "ModelCheckpoint: monitor \"%s\", save_freq %lld (expected a name, save_freq >= 0)",
                   monitor, (long long)o.save_freq);
        return tnt__callback_failed(TNT_ERR_ARG);
    }
    checkpoint *c = tnt__calloc(1, sizeof *c);
    if (!c || !(c->filepath = tnt__strdup(filepath))) {
        free(c);
        return tnt__callback_failed(TNT_ERR_NOMEM);
    }
    snprintf(c->monitor, sizeof c->monitor, "%s", monitor);
    c->greater = o.mode == TNT_MODE_MAX ||
                 (o.mode == TNT_MODE_AUTO && (strstr(monitor, "acc") || !strncmp(monitor, "fmeasure", 8)));
    c->save_best_only = o.save_best_only;
    c->has_threshold = o.has_initial_value_threshold;
    c->threshold = o.initial_value_threshold;
    c->verbose = o.verbose;
    c->save_freq = o.save_freq;
    c->save.save_all_devices = o.save_all_devices;
    c->weights_only = o.save_weights_only;
    c->last_batch = -1;
    /* a batch function only with save_freq N: it makes fit compute exact logs at every step */
    return (tnt_callback){.user = c, .on_train_begin = ck_train_begin, .on_epoch_begin = ck_epoch_begin,
                          .on_epoch_end = ck_epoch_end, .on_train_batch_end = o.save_freq > 0 ? ck_batch_end : NULL,
                          .destroy = ck_destroy};
}

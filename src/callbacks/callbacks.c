/* callbacks.c: Keras's built-in callbacks (keras.callbacks of Keras 2.11): EarlyStopping,
 * ReduceLROnPlateau, LearningRateScheduler, TerminateOnNaN and CSVLogger (ModelCheckpoint is in
 * checkpoint.c), each a tnt_callback whose user is the callback's state. The logs fit hands over
 * are exact global figures, identical on every rank, so the decisions below (stop, reduce, save) are the same on
 * every rank without any communication here. Messages (verbose) are printed by the master. */
#include "core/core.h"
#include "callbacks/callbacks.h"
#include "model/model.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void tnt_callback_free(tnt_callback *cb) {
    if (!cb) return;
    if (cb->destroy && cb->user) cb->destroy(cb->user);
    memset(cb, 0, sizeof *cb);
}

/* A constructor that failed returns this: fit fails with the constructor's status. */
static tnt_status failed_arg(tnt_model *m, const tnt_logs *logs, void *user) {
    (void)m, (void)logs, (void)user;
    return tnt__error(TNT_ERR_ARG, "fit: a callback whose constructor failed was passed (check callback.user "
                                   "after constructing it)");
}
static tnt_status failed_unsupported(tnt_model *m, const tnt_logs *logs, void *user) {
    (void)m, (void)logs, (void)user;
    return tnt__error(TNT_ERR_UNSUPPORTED, "fit: a ModelCheckpoint with save_weights_only=false was passed: "
                                           "whole-model saving is not supported yet (set save_weights_only)");
}
tnt_callback tnt__callback_failed(tnt_status s) {
    return (tnt_callback){.on_train_begin = s == TNT_ERR_UNSUPPORTED ? failed_unsupported : failed_arg};
}

void tnt__callback_say(const char *fmt, ...) {
    if (!tnt_is_master_rank()) return;
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    fflush(stdout);
}

static void warn_missing(const char *what, const char *monitor, const tnt_logs *logs) {
    char avail[TNT_MAX_LOGS * (TNT_LOG_NAME_MAX + 2) + 1] = "";
    for (int i = 0; i < logs->n; i++) {
        if (i) strcat(avail, ",");
        strcat(avail, logs->names[i]);
    }
    tnt_log(TNT_LOG_WARNING, "%s conditioned on metric `%s` which is not available. Available metrics are: %s", what,
            monitor, avail);
}

bool tnt__callback_check_mode(tnt_monitor_mode mode, const char *who) {
    if (mode == TNT_MODE_AUTO || mode == TNT_MODE_MIN || mode == TNT_MODE_MAX) return true;
    tnt__error(TNT_ERR_ARG, "%s: mode %d is not auto (0), min (1) or max (2)", who, (int)mode);
    return false;
}

static bool ends_with(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !strcmp(s + a - b, suffix);
}

/* Python's str(float) (repr): the shortest digits that read back as v; fixed notation for
 * decimal exponents -4..15, scientific ("1e-05") otherwise. */
static void py_float_digits(double v, bool single, char *buf, size_t size);
void tnt__py_float_str(double v, char *buf, size_t size) { py_float_digits(v, false, buf, size); }
/* The same for a float32 (a learning rate): the shortest digits that read back as that float. */
static void py_float32_str(float v, char *buf, size_t size) { py_float_digits((double)v, true, buf, size); }

static void py_float_digits(double v, bool single, char *buf, size_t size) {
    if (isnan(v)) {
        snprintf(buf, size, "nan");
        return;
    }
    if (isinf(v)) {
        snprintf(buf, size, v < 0 ? "-inf" : "inf");
        return;
    }
    if (v == 0) {
        snprintf(buf, size, signbit(v) ? "-0.0" : "0.0");
        return;
    }
    char e[40];
    int p = 1;
    for (; p < 17; p++) {
        snprintf(e, sizeof e, "%.*e", p - 1, v);
        if (single ? (float)strtod(e, NULL) == (float)v : strtod(e, NULL) == v) break;
    }
    snprintf(e, sizeof e, "%.*e", p - 1, v);
    /* e: [-]d[.ddd]e[+-]xx */
    char digits[24];
    int nd = 0;
    const char *c = e;
    bool neg = *c == '-';
    if (neg) c++;
    for (; *c && *c != 'e'; c++)
        if (isdigit((unsigned char)*c)) digits[nd++] = *c;
    digits[nd] = 0;
    int ex = atoi(c + 1);
    char out[64];
    size_t k = 0;
    if (neg) out[k++] = '-';
    if (ex < -4 || ex >= 16) {
        out[k++] = digits[0];
        if (nd > 1) {
            out[k++] = '.';
            for (int i = 1; i < nd; i++) out[k++] = digits[i];
        }
        k += (size_t)sprintf(out + k, "e%c%02d", ex < 0 ? '-' : '+', ex < 0 ? -ex : ex);
    } else if (ex < 0) {
        out[k++] = '0', out[k++] = '.';
        for (int i = 0; i < -ex - 1; i++) out[k++] = '0';
        for (int i = 0; i < nd; i++) out[k++] = digits[i];
        out[k] = 0;
    } else {
        for (int i = 0; i <= ex; i++) out[k++] = i < nd ? digits[i] : '0';
        out[k++] = '.';
        if (nd > ex + 1)
            for (int i = ex + 1; i < nd; i++) out[k++] = digits[i];
        else
            out[k++] = '0';
        out[k] = 0;
    }
    snprintf(buf, size, "%s", out);
}

/* ---------------------------------------------------------------------------------------------
 * EarlyStopping
 * ------------------------------------------------------------------------------------------- */
typedef struct early_stopping {
    char monitor[TNT_LOG_NAME_MAX];
    double min_delta; /* signed: negative for min, as Keras's */
    bool greater;
    int patience, verbose, start_from_epoch;
    bool has_baseline, restore;
    double baseline;
    /* state of one fit */
    int wait, stopped_epoch, best_epoch;
    double best;
    float *best_weights;
    int64_t n_weights;
} early_stopping;

static bool es_improved(const early_stopping *e, double cur, double ref) {
    return e->greater ? cur - e->min_delta > ref : cur - e->min_delta < ref;
}

static tnt_status es_train_begin(tnt_model *m, const tnt_logs *logs, void *user) {
    (void)m, (void)logs;
    early_stopping *e = user;
    e->wait = 0;
    e->stopped_epoch = 0;
    e->best_epoch = 0;
    e->best = e->greater ? -INFINITY : INFINITY;
    free(e->best_weights);
    e->best_weights = NULL;
    return TNT_OK;
}

static tnt_status es_keep_weights(tnt_model *m, early_stopping *e) {
    int64_t n = tnt_model_count_params(m);
    if (!e->best_weights || e->n_weights != n) {
        free(e->best_weights);
        e->n_weights = n;
        if (!(e->best_weights = malloc((size_t)(n ? n : 1) * sizeof(float))))
            return tnt__error(TNT_ERR_NOMEM, "EarlyStopping: out of memory for a copy of %lld weights", (long long)n);
    }
    return tnt_get_weights(m, e->best_weights, n);
}

static tnt_status es_epoch_end(tnt_model *m, int epoch, const tnt_logs *logs, void *user) {
    early_stopping *e = user;
    double cur;
    if (!tnt_logs_get(logs, e->monitor, &cur)) {
        warn_missing("Early stopping", e->monitor, logs);
        return TNT_OK;
    }
    if (epoch < e->start_from_epoch) return TNT_OK;
    tnt_status s;
    if (e->restore && !e->best_weights && (s = es_keep_weights(m, e)) != TNT_OK) return s;
    e->wait++;
    if (es_improved(e, cur, e->best)) {
        e->best = cur;
        e->best_epoch = epoch;
        if (e->restore && (s = es_keep_weights(m, e)) != TNT_OK) return s;
        if (!e->has_baseline || es_improved(e, cur, e->baseline)) e->wait = 0;
        return TNT_OK;
    }
    if (e->wait >= e->patience && epoch > 0) {
        e->stopped_epoch = epoch;
        tnt_model_stop_training(m);
        if (e->restore && e->best_weights) {
            if (e->verbose > 0)
                tnt__callback_say("Restoring model weights from the end of the best epoch: %d.\n", e->best_epoch + 1);
            if ((s = tnt_set_weights(m, e->best_weights, e->n_weights)) != TNT_OK) return s;
        }
    }
    return TNT_OK;
}

static tnt_status es_train_end(tnt_model *m, const tnt_logs *logs, void *user) {
    (void)m, (void)logs;
    early_stopping *e = user;
    if (e->stopped_epoch > 0 && e->verbose > 0) tnt__callback_say("Epoch %05d: early stopping\n", e->stopped_epoch + 1);
    free(e->best_weights); /* Keras keeps them; here they would only hold memory */
    e->best_weights = NULL;
    return TNT_OK;
}

static void es_destroy(void *user) {
    early_stopping *e = user;
    free(e->best_weights);
    free(e);
}

tnt_callback tnt_early_stopping(const tnt_early_stopping_opts *opts) {
    tnt_early_stopping_opts o = opts ? *opts : (tnt_early_stopping_opts){0};
    const char *monitor = o.monitor ? o.monitor : "val_loss";
    if (!tnt__callback_check_mode(o.mode, "EarlyStopping")) return tnt__callback_failed(TNT_ERR_ARG);
    if (strlen(monitor) >= TNT_LOG_NAME_MAX || !monitor[0]) {
        tnt__error(TNT_ERR_ARG, "EarlyStopping: monitor \"%s\" is empty or too long", monitor);
        return tnt__callback_failed(TNT_ERR_ARG);
    }
    if (o.patience < 0 || o.start_from_epoch < 0 || isnan(o.min_delta)) {
        tnt__error(TNT_ERR_ARG, "EarlyStopping: patience %d, start_from_epoch %d, min_delta %g (expected >= 0)",
                   o.patience, o.start_from_epoch, o.min_delta);
        return tnt__callback_failed(TNT_ERR_ARG);
    }
    early_stopping *e = tnt__calloc(1, sizeof *e);
    if (!e) return tnt__callback_failed(TNT_ERR_NOMEM);
    snprintf(e->monitor, sizeof e->monitor, "%s", monitor);
    e->greater = o.mode == TNT_MODE_MAX ||
                 (o.mode == TNT_MODE_AUTO && (ends_with(monitor, "acc") || ends_with(monitor, "accuracy") ||
                                              ends_with(monitor, "auc")));
    e->min_delta = e->greater ? fabs(o.min_delta) : -fabs(o.min_delta);
    e->patience = o.patience;
    e->verbose = o.verbose;
    e->start_from_epoch = o.start_from_epoch;
    e->has_baseline = o.has_baseline;
    e->baseline = o.baseline;
    e->restore = o.restore_best_weights;
    e->best = e->greater ? -INFINITY : INFINITY;
    return (tnt_callback){.user = e, .on_train_begin = es_train_begin, .on_epoch_end = es_epoch_end,
                          .on_train_end = es_train_end, .destroy = es_destroy};
}

int tnt_early_stopping_stopped_epoch(const tnt_callback *cb) {
    if (!cb || !cb->user || cb->on_epoch_end != es_epoch_end) return -1;
    return ((const early_stopping *)cb->user)->stopped_epoch;
}

double tnt_early_stopping_best(const tnt_callback *cb) {
    if (!cb || !cb->user || cb->on_epoch_end != es_epoch_end) return NAN;
    return ((const early_stopping *)cb->user)->best;
}

/* ---------------------------------------------------------------------------------------------
 * ReduceLROnPlateau
 * ------------------------------------------------------------------------------------------- */
typedef struct reduce_lr {
    char monitor[TNT_LOG_NAME_MAX];
    double factor, min_delta, min_lr;
    int patience, verbose, cooldown;
    bool greater;
    int wait, cooldown_counter;
    double best;
} reduce_lr;

static tnt_status rl_train_begin(tnt_model *m, const tnt_logs *logs, void *user) {
    (void)m, (void)logs;
    reduce_lr *r = user;
    r->best = r->greater ? -INFINITY : INFINITY;
    r->wait = r->cooldown_counter = 0;
    return TNT_OK;
}

static tnt_status rl_epoch_end(tnt_model *m, int epoch, const tnt_logs *logs, void *user) {
    reduce_lr *r = user;
    double cur;
    if (!tnt_logs_get(logs, r->monitor, &cur)) {
        warn_missing("Learning rate reduction is", r->monitor, logs);
        return TNT_OK;
    }
    if (r->cooldown_counter > 0) {
        r->cooldown_counter--;
        r->wait = 0;
    }
    if (r->greater ? cur > r->best + r->min_delta : cur < r->best - r->min_delta) {
        r->best = cur;
        r->wait = 0;
    } else if (r->cooldown_counter <= 0) {
        r->wait++;
        if (r->wait >= r->patience) {
            tnt_optimizer *opt = tnt_model_optimizer(m);
            float old_lr = tnt_optimizer_get_lr(opt);
            if (old_lr > (float)r->min_lr) {
                double new_lr = fmax((double)old_lr * r->factor, r->min_lr);
                tnt_status s = tnt_optimizer_set_lr(opt, (float)new_lr);
                if (s != TNT_OK) return tnt__error_prefix(s, "ReduceLROnPlateau: ");
                if (r->verbose > 0) {
                    char b[64];
                    py_float32_str((float)new_lr, b, sizeof b);
                    tnt__callback_say("\nEpoch %05d: ReduceLROnPlateau reducing learning rate to %s.\n", epoch + 1, b);
                }
                r->cooldown_counter = r->cooldown;
                r->wait = 0;
            }
        }
    }
    return TNT_OK;
}

tnt_callback tnt_reduce_lr_on_plateau(const tnt_reduce_lr_opts *opts) {
    tnt_reduce_lr_opts o = opts ? *opts : (tnt_reduce_lr_opts){0};
    const char *monitor = o.monitor ? o.monitor : "val_loss";
    if (!tnt__callback_check_mode(o.mode, "ReduceLROnPlateau")) return tnt__callback_failed(TNT_ERR_ARG);
    double factor = o.factor == 0 ? 0.1 : o.factor;
    if (!(factor < 1.0) || factor < 0) {
        tnt__error(TNT_ERR_ARG, "ReduceLROnPlateau: factor %g (ReduceLROnPlateau does not support a factor >= 1.0)",
                   factor);
        return tnt__callback_failed(TNT_ERR_ARG);
    }
    if (strlen(monitor) >= TNT_LOG_NAME_MAX || !monitor[0] || o.cooldown < 0 || !(o.min_lr >= 0) ||
        isnan(o.min_delta)) {
        tnt__error(TNT_ERR_ARG, "ReduceLROnPlateau: monitor \"%s\", cooldown %d, min_lr %g, min_delta %g (expected "
                                "a name, cooldown >= 0, min_lr >= 0)", monitor, o.cooldown, o.min_lr, o.min_delta);
        return tnt__callback_failed(TNT_ERR_ARG);
    }
    reduce_lr *r = tnt__calloc(1, sizeof *r);
    if (!r) return tnt__callback_failed(TNT_ERR_NOMEM);
    snprintf(r->monitor, sizeof r->monitor, "%s", monitor);
    r->factor = factor;
    r->patience = o.patience == 0 ? 10 : o.patience < 0 ? 0 : o.patience;
    r->min_delta = o.min_delta == 0 ? 1e-4 : o.min_delta < 0 ? 0 : o.min_delta;
    r->min_lr = o.min_lr;
    r->cooldown = o.cooldown;
    r->verbose = o.verbose;
    r->greater = o.mode == TNT_MODE_MAX || (o.mode == TNT_MODE_AUTO && strstr(monitor, "acc"));
    r->best = r->greater ? -INFINITY : INFINITY;
    return (tnt_callback){.user = r, .on_train_begin = rl_train_begin, .on_epoch_end = rl_epoch_end, .destroy = free,
                          .adds_lr = true};
}

/* ---------------------------------------------------------------------------------------------
 * LearningRateScheduler
 * ------------------------------------------------------------------------------------------- */
typedef struct lr_scheduler {
    tnt_lr_scheduler_fn fn;
    void *user;
    int verbose;
} lr_scheduler;

static tnt_status ls_epoch_begin(tnt_model *m, int epoch, const tnt_logs *logs, void *user) {
    (void)logs;
    lr_scheduler *l = user;
    tnt_optimizer *opt = tnt_model_optimizer(m);
    float lr = l->fn(epoch, tnt_optimizer_get_lr(opt), l->user);
    tnt_status s = tnt_optimizer_set_lr(opt, lr);
    if (s != TNT_OK) return tnt__error_prefix(s, "LearningRateScheduler (epoch %d): ", epoch);
    if (l->verbose > 0) {
        char b[64];
        py_float32_str(lr, b, sizeof b);
        tnt__callback_say("\nEpoch %05d: LearningRateScheduler setting learning rate to %s.\n", epoch + 1, b);
    }
    return TNT_OK;
}

tnt_callback tnt_learning_rate_scheduler(tnt_lr_scheduler_fn schedule, void *user, int verbose) {
    if (!schedule) {
        tnt__error(TNT_ERR_ARG, "LearningRateScheduler: schedule function is NULL");
        return tnt__callback_failed(TNT_ERR_ARG);
    }
    lr_scheduler *l = tnt__calloc(1, sizeof *l);
    if (!l) return tnt__callback_failed(TNT_ERR_NOMEM);
    *l = (lr_scheduler){schedule, user, verbose};
    return (tnt_callback){.user = l, .on_epoch_begin = ls_epoch_begin, .destroy = free, .adds_lr = true};
}

/* ---------------------------------------------------------------------------------------------
 * TerminateOnNaN
 * ------------------------------------------------------------------------------------------- */
/* fit stops after the batch whose global loss is NaN or infinite, on every rank alike. */
static tnt_status tn_batch_end(tnt_model *m, int64_t batch, const tnt_logs *logs, void *user) {
    (void)user;
    double loss;
    if (tnt_logs_get(logs, "loss", &loss) && !isfinite(loss)) {
        tnt__callback_say("Batch %lld: Invalid loss, terminating training\n", (long long)batch);
        tnt_model_stop_training(m);
    }
    return TNT_OK;
}

tnt_callback tnt_terminate_on_nan(void) {
    return (tnt_callback){.on_train_batch_end = tn_batch_end};
}

/* ---------------------------------------------------------------------------------------------
 * CSVLogger
 * ------------------------------------------------------------------------------------------- */
typedef struct csv_logger {
    char *filename;
    char sep;
    bool append, append_header;
    FILE *f;
    int n_keys;
    char keys[TNT_MAX_LOGS][TNT_LOG_NAME_MAX];
} csv_logger;

static tnt_status csv_train_begin(tnt_model *m, const tnt_logs *logs, void *user) {
    (void)m, (void)logs;
    csv_logger *c = user;
    if (c->f) fclose(c->f);
    c->append_header = true;
    c->n_keys = -1;
    if (c->append) {
        FILE *r = fopen(c->filename, "r");
        if (r) {
            c->append_header = fgetc(r) == EOF; /* Keras: not bool(len(f.readline())) */
            fclose(r);
        }
    }
    if (!(c->f = fopen(c->filename, c->append ? "a" : "w")))
        return tnt__error(TNT_ERR_IO, "CSVLogger: cannot open \"%s\": %s", c->filename, strerror(errno));
    return TNT_OK;
}

static int cmp_key(const void *a, const void *b) { return strcmp(a, b); }

static tnt_status csv_epoch_end(tnt_model *m, int epoch, const tnt_logs *logs, void *user) {
    (void)m;
    csv_logger *c = user;
    if (!c->f) return tnt__error(TNT_ERR_STATE, "CSVLogger: on_epoch_end before on_train_begin");
    if (c->n_keys < 0) { /* the keys of the first epoch, sorted as Python's sorted() (code points) */
        c->n_keys = logs->n;
        memcpy(c->keys, logs->names, sizeof c->keys);
        qsort(c->keys, (size_t)c->n_keys, TNT_LOG_NAME_MAX, cmp_key);
        if (c->append_header) {
            fputs("epoch", c->f);
            for (int i = 0; i < c->n_keys; i++) fprintf(c->f, "%c%s", c->sep, c->keys[i]);
            fputs("\r\n", c->f);
        }
    }
    fprintf(c->f, "%d", epoch);
    for (int i = 0; i < c->n_keys; i++) {
        double v;
        char b[64] = "NA"; /* Keras writes NA for a key missing when training stops */
        if (tnt_logs_get(logs, c->keys[i], &v)) tnt__py_float_str(v, b, sizeof b);
        fprintf(c->f, "%c%s", c->sep, b);
    }
    fputs("\r\n", c->f);
    if (fflush(c->f) != 0 || ferror(c->f))
        return tnt__error(TNT_ERR_IO, "CSVLogger: cannot write \"%s\": %s", c->filename, strerror(errno));
    return TNT_OK;
}

static tnt_status csv_train_end(tnt_model *m, const tnt_logs *logs, void *user) {
    (void)m, (void)logs;
    csv_logger *c = user;
    int rc = c->f ? fclose(c->f) : 0;
    c->f = NULL;
    if (rc != 0) return tnt__error(TNT_ERR_IO, "CSVLogger: cannot close \"%s\": %s", c->filename, strerror(errno));
    return TNT_OK;
}

static void csv_destroy(void *user) {
    csv_logger *c = user;
    if (c->f) fclose(c->f);
    free(c->filename);
    free(c);
}

tnt_callback tnt_csv_logger(const char *filename, char separator, bool append) {
    if (!filename || !filename[0]) {
        tnt__error(TNT_ERR_ARG, "CSVLogger: filename is NULL or empty");
        return tnt__callback_failed(TNT_ERR_ARG);
    }
    if (separator == '\r' || separator == '\n' || separator == '"') {
        tnt__error(TNT_ERR_ARG, "CSVLogger: separator %d cannot separate CSV fields", separator);
        return tnt__callback_failed(TNT_ERR_ARG);
    }
    csv_logger *c = tnt__calloc(1, sizeof *c);
    if (!c || !(c->filename = tnt__strdup(filename))) {
        free(c);
        return tnt__callback_failed(TNT_ERR_NOMEM);
    }
    c->sep = separator ? separator : ',';
    c->append = append;
    c->n_keys = -1;
    return (tnt_callback){.user = c, .on_train_begin = csv_train_begin, .on_epoch_end = csv_epoch_end,
                          .on_train_end = csv_train_end, .destroy = csv_destroy, .master_only = true};
}


/* history.c: Keras's logs dict as a small fixed table, and the History of a fit. */
#include "training/history.h"

#include <math.h>
#include <stdio.h>

bool tnt_logs_get(const tnt_logs *logs, const char *name, double *value) {
    if (!logs || !name) return false;
    for (int i = 0; i < logs->n; i++)
        if (!strcmp(logs->names[i], name)) {
            if (value) *value = logs->values[i];
            return true;
        }
    return false;
}

void tnt__logs_set(tnt_logs *logs, const char *prefix, const char *name, double value) {
    static bool warned_cut, warned_full; /* once per process: a log line per batch would flood */
    char full[TNT_LOG_NAME_MAX];
    int len = snprintf(full, sizeof full, "%s%s", prefix ? prefix : "", name);
    if (len >= (int)sizeof full && !warned_cut) {
        warned_cut = true;
        tnt_log(TNT_LOG_WARNING, "log entry \"%s%s\" is longer than %d characters: cut to \"%s\"",
                prefix ? prefix : "", name, TNT_LOG_NAME_MAX - 1, full);
    }
    for (int i = 0; i < logs->n; i++)
        if (!strcmp(logs->names[i], full)) {
            logs->values[i] = value;
            return;
        }
    if (logs->n >= TNT_MAX_LOGS) {
        if (!warned_full) {
            warned_full = true;
            tnt_log(TNT_LOG_WARNING, "logs hold at most %d entries: \"%s\" and any further ones are not logged",
                    TNT_MAX_LOGS, full);
        }
        return;
    }
    snprintf(logs->names[logs->n], TNT_LOG_NAME_MAX, "%s", full);
    logs->values[logs->n++] = value;
}

void tnt__logs_merge(tnt_logs *dst, const tnt_logs *src, const char *prefix) {
    for (int i = 0; i < src->n; i++) tnt__logs_set(dst, prefix, src->names[i], src->values[i]);
}

tnt_history *tnt__history_new(void) { return tnt__calloc(1, sizeof(tnt_history)); }

tnt_status tnt__history_append(tnt_history *h, int epoch, const tnt_logs *logs) {
    if (h->n == h->cap) {
        int cap = h->cap ? 2 * h->cap : 16;
        tnt_logs *nl = realloc(h->logs, (size_t)cap * sizeof *nl);
        int *ne = realloc(h->epoch, (size_t)cap * sizeof *ne);
        if (nl) h->logs = nl;
        if (ne) h->epoch = ne;
        if (!nl || !ne) return tnt__error(TNT_ERR_NOMEM, "history: out of memory");
        h->cap = cap;
    }
    h->logs[h->n] = *logs;
    h->epoch[h->n++] = epoch;
    return TNT_OK;
}

int tnt_history_epochs(const tnt_history *h) { return h ? h->n : 0; }

const tnt_logs *tnt_history_logs(const tnt_history *h, int i) {
    return h && i >= 0 && i < h->n ? &h->logs[i] : NULL;
}

double tnt_history_get(const tnt_history *h, const char *name, int i) {
    double v;
    const tnt_logs *l = tnt_history_logs(h, i);
    return l && tnt_logs_get(l, name, &v) ? v : NAN;
}

void tnt_history_free(tnt_history *h) {
    if (!h) return;
    free(h->logs);
    free(h->epoch);
    free(h);
}

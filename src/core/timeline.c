/* timeline.c: the trace's events in memory, one file per rank, the launcher's merge and the
 * step summary (timeline.h). */
#include "core/timeline.h"
#include "core/config.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define MAX_EVENTS (1 << 22) /* ~300 MB at most; later events are counted, not kept */

typedef struct event {
    double t0, dur;
    const char *cat;
    char name[44];
    int lane;
} event;

bool tnt__timeline_on;

static struct {
    event *ev;
    size_t n, cap, dropped;
    int rank, size;
    double origin;
    pthread_mutex_t mu;
} tl = {.mu = PTHREAD_MUTEX_INITIALIZER};

static _Thread_local int lane_of_thread;

static double wall_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

void tnt__timeline_start(int rank, int size, double origin_us) {
    tl.rank = rank, tl.size = size, tl.origin = origin_us;
    tl.n = tl.dropped = 0;
    tnt__timeline_on = true;
}

double tnt__timeline_now(void) { return wall_us() - tl.origin; }

void tnt__timeline_lane(int lane) { lane_of_thread = lane; }

void tnt__timeline_event(const char *cat, const char *name, int index, double t0, double t1) {
    event e = {.t0 = t0, .dur = t1 - t0, .cat = cat, .lane = lane_of_thread};
    if (index >= 0) snprintf(e.name, sizeof e.name, "%s %d", name, index);
    else snprintf(e.name, sizeof e.name, "%s", name);
    pthread_mutex_lock(&tl.mu);
    if (tl.n == tl.cap && tl.cap < MAX_EVENTS) {
        size_t cap = tl.cap ? tl.cap * 2 : 4096;
        event *ev = realloc(tl.ev, cap * sizeof *ev);
        if (ev) tl.ev = ev, tl.cap = cap;
    }
    if (tl.n < tl.cap) tl.ev[tl.n++] = e;
    else tl.dropped++;
    pthread_mutex_unlock(&tl.mu);
}

/* ---- the step summary ---------------------------------------------------------------------- */

/* The categories the summary adds up (each event counts once: phases have their own names). */
static const char *const summed[] = {"step", "forward", "backward", "exposed", "optimizer", "data", "callback",
                                     "reduction", "agreement", "reduction.update"};
enum { N_SUMMED = 10 };

typedef struct totals {
    double sum[N_SUMMED];
    int64_t steps;
} totals;

static void add_event(totals *t, const char *cat, double dur) {
    for (int k = 0; k < N_SUMMED; k++)
        if (!strcmp(cat, summed[k])) {
            t->sum[k] += dur;
            if (k == 0) t->steps++;
        }
}

static void print_summary(FILE *out, const char *path, const totals *per_rank, int ranks) {
    totals all = {0};
    for (int r = 0; r < ranks; r++) {
        for (int k = 0; k < N_SUMMED; k++) all.sum[k] += per_rank[r].sum[k];
        all.steps += per_rank[r].steps;
    }
    if (all.steps == 0) {
        fprintf(out, "[tarantella] timeline %s: %d rank(s), no training steps\n", path, ranks);
        return;
    }
    double ms[N_SUMMED];
    for (int k = 0; k < N_SUMMED; k++) ms[k] = all.sum[k] / (double)all.steps / 1000.0; /* per rank-step */
    double other = ms[0] - ms[1] - ms[2] - ms[3] - ms[4] - ms[5] - ms[6] - ms[8];
    fprintf(out, "[tarantella] timeline %s: %d rank(s), %lld steps each; per step (ms, mean over ranks):\n", path,
            ranks, (long long)(all.steps / ranks));
    fprintf(out, "[tarantella]   step %.2f = forward %.2f + step agreement %.2f + backward %.2f + reduction wait %.2f + "
            "optimizer %.2f + data %.2f + callbacks %.2f + other (loss, metrics) %.2f\n", ms[0], ms[1], ms[8], ms[2],
            ms[3], ms[4], ms[5], ms[6], other);
    if (ranks > 1 || ms[7] > 0) {
        double hidden = ms[7] > 0 ? 1.0 - (ms[3] < ms[7] ? ms[3] : ms[7]) / ms[7] : 0.0;
        char update[96] = "";
        if (ms[9] > 0) /* the sharded optimizer's update on the comm thread (TNT_OVERLAP_OPTIMIZER) */
            snprintf(update, sizeof update, " (the optimizer's update of this rank's slices %.2f of it)", ms[9]);
        fprintf(out, "[tarantella]   gradient reduction %.2f ms a step on the comm thread%s, %.0f%% of it hidden behind "
                "backward\n", ms[7], update, 100.0 * hidden);
        for (int r = 0; r < ranks && ranks > 1; r++) {
            const totals *t = &per_rank[r];
            double n = t->steps ? (double)t->steps * 1000.0 : 1.0;
            fprintf(out, "[tarantella]   rank %d: step %.2f, forward %.2f, backward %.2f, reduction wait %.2f, "
                    "optimizer %.2f, reduction %.2f\n", r, t->sum[0] / n, t->sum[1] / n, t->sum[2] / n,
                    t->sum[3] / n, t->sum[4] / n, t->sum[7] / n);
        }
    }
}

/* ---- files ----------------------------------------------------------------------------------- */

static void put_string(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') fputc('\\', f);
        if ((unsigned char)*s < 0x20) fprintf(f, "\\u%04x", (unsigned char)*s);
        else fputc(*s, f);
    }
    fputc('"', f);
}

/* One event a line, so that the merge can take lines: the metadata naming the rank and lanes,
 * then the events. */
static void write_events(FILE *f, bool *first) {
    static const char *const lanes[] = {"compute", "comm thread"};
    char line[160];
    snprintf(line, sizeof line, "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": %d, \"args\": {\"name\": \"rank %d\"}}",
             tl.rank, tl.rank);
    fprintf(f, "%s%s", *first ? "" : ",\n", line);
    *first = false;
    for (int k = 0; k < 2; k++)
        fprintf(f, ",\n{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": %d, \"tid\": %d, \"args\": {\"name\": \"%s\"}}",
                tl.rank, k, lanes[k]);
    for (size_t i = 0; i < tl.n; i++) {
        const event *e = &tl.ev[i];
        fputs(",\n{\"name\": ", f);
        put_string(f, e->name);
        fprintf(f, ", \"cat\": \"%s\", \"ph\": \"X\", \"ts\": %.3f, \"dur\": %.3f, \"pid\": %d, \"tid\": %d}", e->cat,
                e->t0, e->dur, tl.rank, e->lane);
    }
}

tnt_status tnt__timeline_finish(void) {
    if (!tnt__timeline_on) return TNT_OK;
    tnt__timeline_on = false;
    const char *path = tnt__config_get()->timeline;
    char file[1100];
    if (tl.size > 1) snprintf(file, sizeof file, "%s.rank%d", path, tl.rank);
    else snprintf(file, sizeof file, "%s", path);
    FILE *f = fopen(file, "w");
    tnt_status s = TNT_OK;
    if (!f) {
        s = tnt__error(TNT_ERR_IO, "timeline: cannot write %s", file);
    } else {
        bool first = true;
        fputs("{\"traceEvents\": [\n", f);
        write_events(f, &first);
        fprintf(f, "\n],\n\"displayTimeUnit\": \"ms\", \"otherData\": {\"rank\": %d, \"ranks\": %d, \"dropped_events\": %zu}}\n",
                tl.rank, tl.size, tl.dropped);
        if (fclose(f) != 0) s = tnt__error(TNT_ERR_IO, "timeline: cannot write %s", file);
    }
    if (s == TNT_OK && tl.size == 1) {
        totals t = {0};
        for (size_t i = 0; i < tl.n; i++) add_event(&t, tl.ev[i].cat, tl.ev[i].dur);
        print_summary(stderr, path, &t, 1);
    }
    free(tl.ev);
    tl.ev = NULL;
    tl.n = tl.cap = 0;
    return s;
}

/* The value after "key": in a line this file wrote. */
static const char *field(const char *line, const char *key) {
    const char *p = strstr(line, key);
    return p ? p + strlen(key) : NULL;
}

tnt_status tnt_timeline_merge(const char *path, int n_ranks, FILE *out) {
    if (!path || n_ranks < 1) return tnt__error(TNT_ERR_ARG, "timeline merge: path %s, %d ranks", path ? path : "NULL", n_ranks);
    totals *per_rank = calloc((size_t)n_ranks, sizeof *per_rank);
    char tmp[1100], file[1100];
    snprintf(tmp, sizeof tmp, "%s.merging", path);
    FILE *f = per_rank ? fopen(tmp, "w") : NULL;
    if (!f) {
        free(per_rank);
        return tnt__error(TNT_ERR_IO, "timeline merge: cannot write %s", tmp);
    }
    fputs("{\"traceEvents\": [\n", f);
    bool first = true;
    int found = 0;
    char *line = NULL;
    size_t cap = 0;
    for (int r = 0; r < n_ranks; r++) {
        snprintf(file, sizeof file, "%s.rank%d", path, r);
        FILE *in = fopen(file, "r");
        if (!in) continue;
        found++;
        ssize_t len;
        while ((len = getline(&line, &cap, in)) > 0) {
            if (strncmp(line, "{\"name\"", 7) != 0) continue; /* header, footer */
            while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == ',')) line[--len] = '\0';
            fprintf(f, "%s%s", first ? "" : ",\n", line);
            first = false;
            const char *cat = field(line, "\"cat\": \""), *dur = field(line, "\"dur\": ");
            if (cat && dur) {
                char c[32];
                if (sscanf(cat, "%31[^\"]", c) == 1) add_event(&per_rank[r], c, strtod(dur, NULL));
            }
        }
        fclose(in);
    }
    free(line);
    fprintf(f, "\n],\n\"displayTimeUnit\": \"ms\", \"otherData\": {\"ranks\": %d}}\n", n_ranks);
    bool ok = fclose(f) == 0;
    if (!found) {
        remove(tmp);
        free(per_rank);
        return tnt__error(TNT_ERR_IO, "timeline merge: no file %s.rank<N> for %d ranks", path, n_ranks);
    }
    if (!ok || rename(tmp, path) != 0) {
        remove(tmp);
        free(per_rank);
        return tnt__error(TNT_ERR_IO, "timeline merge: cannot write %s", path);
    }
    for (int r = 0; r < n_ranks; r++) {
        snprintf(file, sizeof file, "%s.rank%d", path, r);
        remove(file);
    }
    if (out) {
        if (found < n_ranks) fprintf(out, "[tarantella] timeline %s: %d of %d rank files found\n", path, found, n_ranks);
        print_summary(out, path, per_rank, n_ranks);
    }
    free(per_rank);
    return TNT_OK;
}

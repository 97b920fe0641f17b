/* progress.c: Keras-style progress bar and per-epoch lines. Output is on the master rank only. */
#include "training/progress.h"
#include "core/config.h"

#include <unistd.h>

bool tnt__output_is_tty(FILE *out) {
    /* under the launcher, ranks write to mpirun's pseudo-terminals: the launcher tells */
    int told = tnt__config_get()->stdout_tty;
    if (told >= 0 && (out == stdout || fileno(out) == STDOUT_FILENO)) return told == 1;
    return isatty(fileno(out));
}

void tnt__progress_start(tnt__progress *p, FILE *out, int verbose, int64_t target) {
    p->out = out ? out : stdout;
    p->verbose = tnt_is_master_rank() || tnt__config_get()->output_on_all_devices ? verbose : 0;
    p->tty = tnt__output_is_tty(p->out);
    p->target = target;
    p->seen = 0;
    p->start = p->last_draw = tnt__now();
}

static void print_logs(FILE *out, const tnt_logs *logs) {
    for (int i = 0; logs && i < logs->n; i++) fprintf(out, " - %s: %.4f", logs->names[i], logs->values[i]);
}

static void print_time_per_step(FILE *out, double elapsed, int64_t steps) {
    double per = steps > 0 ? elapsed / (double)steps : 0;
    if (per >= 1) fprintf(out, " %.0fs/step", per);
    else if (per >= 1e-3) fprintf(out, " %.0fms/step", per * 1e3);
    else fprintf(out, " %.0fus/step", per * 1e6);
}

static void draw_bar(tnt__progress *p, int64_t step) {
    const int width = 30;
    if (p->target > 0) {
        int digits = snprintf(NULL, 0, "%lld", (long long)p->target);
        int done = (int)((double)width * (double)step / (double)p->target);
        if (done > width) done = width;
        fprintf(p->out, "%*lld/%lld [", digits, (long long)step, (long long)p->target);
        for (int i = 0; i < width; i++)
            fputc(i < done - (step < p->target) ? '=' : (i == done - 1 && step < p->target) ? '>' : '.', p->out);
        fputc(']', p->out);
    } else {
        fprintf(p->out, "%7lld/Unknown", (long long)step);
    }
}

void tnt__progress_update(tnt__progress *p, int64_t step, const tnt_logs *logs) {
    p->seen = step;
    if (p->verbose != 1 || !p->tty) return;
    double now = tnt__now();
    if (now - p->last_draw < 0.1 && step != p->target) return;
    p->last_draw = now;
    fputc('\r', p->out);
    draw_bar(p, step);
    if (p->target > 0 && step < p->target) {
        double eta = (now - p->start) / (double)step * (double)(p->target - step);
        fprintf(p->out, " - ETA: %.0fs", eta);
    }
    print_logs(p->out, logs);
    fputs("\033[K", p->out);
    fflush(p->out);
}

void tnt__progress_finish(tnt__progress *p, const tnt_logs *logs, const char *val_prefix) {
    (void)val_prefix;
    if (!p->verbose) return;
    double elapsed = tnt__now() - p->start;
    if (p->verbose == 1) {
        if (p->tty) fputc('\r', p->out);
        if (p->target <= 0) p->target = p->seen;
        draw_bar(p, p->seen);
        fprintf(p->out, " - %.0fs", elapsed);
        print_time_per_step(p->out, elapsed, p->seen);
    } else {
        fprintf(p->out, "%lld/%lld - %.0fs", (long long)p->seen, (long long)(p->target > 0 ? p->target : p->seen), elapsed);
        print_time_per_step(p->out, elapsed, p->seen);
    }
    print_logs(p->out, logs);
    if (p->tty && p->verbose == 1) fputs("\033[K", p->out);
    fputc('\n', p->out);
    fflush(p->out);
}

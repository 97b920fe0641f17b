/* progress.h: Keras-style progress output (ProgbarLogger): a live bar on a terminal, one line
 * per epoch otherwise (verbose 1), or one line per epoch always (verbose 2). */
#ifndef TNT_PROGRESS_H
#define TNT_PROGRESS_H

#include "core/core.h"

#include <stdio.h>

typedef struct tnt__progress {
    FILE *out;
    int verbose;
    bool tty;
    int64_t target; /* steps, -1 unknown */
    int64_t seen;
    double start, last_draw;
} tnt__progress;

void tnt__progress_start(tnt__progress *p, FILE *out, int verbose, int64_t target);
/* logs may be NULL (predict) */
void tnt__progress_update(tnt__progress *p, int64_t step, const tnt_logs *logs);
/* Final line; val_prefix non-NULL means validation entries are part of logs. */
void tnt__progress_finish(tnt__progress *p, const tnt_logs *logs, const char *val_prefix);
/* Whether out is the user's terminal (TNT_STDOUT_TTY from the launcher wins for stdout). */
bool tnt__output_is_tty(FILE *out);

#endif

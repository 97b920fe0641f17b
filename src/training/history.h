/* history.h: logs and History internals. */
#ifndef TNT_HISTORY_H
#define TNT_HISTORY_H

#include "core/core.h"

struct tnt_history {
    int n, cap;
    tnt_logs *logs;
    int *epoch;
};

/* Sets prefix+name (adds it when absent; past TNT_MAX_LOGS entries, or a name past TNT_LOG_NAME_MAX,
 * warns once and drops or cuts it). */
void tnt__logs_set(tnt_logs *logs, const char *prefix, const char *name, double value);
void tnt__logs_merge(tnt_logs *dst, const tnt_logs *src, const char *prefix);
tnt_history *tnt__history_new(void);
tnt_status tnt__history_append(tnt_history *h, int epoch, const tnt_logs *logs);

#endif

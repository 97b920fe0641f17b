/* timeline.h: a trace of where training time goes (TNT_TIMELINE=PATH, tarantella --timeline),
 * in Chrome's trace-event format (Perfetto and chrome://tracing open it): per rank, each layer's
 * forward and backward, each gradient bucket's reduction (its phases on the comm thread), the
 * optimizer, data waits, callbacks and the steps, as complete ("X") events. Recording is a
 * branch on one flag when off. With several ranks each writes PATH.rank<N> at tnt_finalize,
 * which the launcher merges (tnt_timeline_merge); one process writes PATH and prints the step
 * summary itself. */
#ifndef TNT_CORE_TIMELINE_H
#define TNT_CORE_TIMELINE_H

#include "core/core.h"

extern bool tnt__timeline_on;

/* Starts recording for this rank; origin_us: the job's common time origin (rank 0's clock). */
void tnt__timeline_start(int rank, int size, double origin_us);
/* Microseconds since the origin (the wall clock: ranks on one host share it). */
double tnt__timeline_now(void);
/* The calling thread's lane in the trace (0: compute, the default; 1: comm thread). */
void tnt__timeline_lane(int lane);
/* One event from t0 to t1 (tnt__timeline_now); name is copied, index >= 0 is appended to it
 * ("bucket 3"); cat: a string literal ("forward", "backward", "reduction", "reduction.sum", ...). */
void tnt__timeline_event(const char *cat, const char *name, int index, double t0, double t1);
/* Writes this rank's file and frees the events (tnt_finalize). */
tnt_status tnt__timeline_finish(void);

/* t0 = TNT_TL_BEGIN(); ... TNT_TL_END(cat, name, index, t0): nothing when off */
#define TNT_TL_BEGIN() (tnt__timeline_on ? tnt__timeline_now() : 0.0)
#define TNT_TL_END(cat, name, index, t0)                                                          \
    do {                                                                                          \
        if (tnt__timeline_on) tnt__timeline_event((cat), (name), (index), (t0), tnt__timeline_now()); \
    } while (0)

#endif

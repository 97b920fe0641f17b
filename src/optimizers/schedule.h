/* schedule.h: internal view of the learning-rate schedules (tnt_lr_schedule). The optimizer
 * evaluates its schedule once per step with the 0-based step index (Keras calls
 * schedule(optimizer.iterations) before incrementing). */
#ifndef TNT_TRAIN_SCHEDULE_H
#define TNT_TRAIN_SCHEDULE_H

#include "tarantella.h"

/* The value at step (>= 0), computed in double and rounded to float once. */
double tnt__lr_schedule_eval(const tnt_lr_schedule *s, int64_t step);

#endif

/* callbacks.h: helpers shared by the built-in callbacks (callbacks.c, checkpoint.c). */
#ifndef TNT_CALLBACKS_H
#define TNT_CALLBACKS_H

#include "core/core.h"

/* What a constructor that failed returns: user NULL, and fit fails with status s. */
tnt_callback tnt__callback_failed(tnt_status s);
/* printf on the master rank only (verbose messages), flushed. */
void tnt__callback_say(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;
/* Whether mode is auto, min or max (sets the error otherwise). */
bool tnt__callback_check_mode(tnt_monitor_mode mode, const char *who);
/* Python's str(float): shortest round-trip digits, "1e-05", "12.0", "nan". */
void tnt__py_float_str(double v, char *buf, size_t size);

#endif

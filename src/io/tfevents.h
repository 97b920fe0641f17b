/* tfevents.h: TensorBoard event files (scalars and histograms), for the TensorBoard callback. */
#ifndef TNT_IO_TFEVENTS_H
#define TNT_IO_TFEVENTS_H

#include "core/core.h"

typedef struct tnt__tfevents tnt__tfevents;

/* Creates log_dir (and parents) and a new event file in it, TensorFlow's name with suffix (may
 * be NULL) before ".v2"; writes the file_version record. NULL + error on failure. */
tnt__tfevents *tnt__tfevents_open(const char *log_dir, const char *suffix);
/* Appends one scalar (TensorBoard's simple_value) and flushes. */
tnt_status tnt__tfevents_scalar(tnt__tfevents *w, const char *tag, float value, int64_t step);
/* Appends the histogram of n values (TensorFlow 2's summary: 30 buckets, see tfevents.c) and flushes. */
tnt_status tnt__tfevents_histogram(tnt__tfevents *w, const char *tag, const float *data, int64_t n, int64_t step);
const char *tnt__tfevents_path(const tnt__tfevents *w);
void tnt__tfevents_close(tnt__tfevents *w);
/* CRC-32C (Castagnoli) of n bytes, unmasked. */
uint32_t tnt__crc32c(const void *data, size_t n);

#endif

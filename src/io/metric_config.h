/* metric_config.h: a compiled metric as Keras writes it in a file's training_config (a name, or a
 * metric object's {"class_name", "config"} when the name alone would not say it) and back. */
#ifndef TNT_IO_METRIC_CONFIG_H
#define TNT_IO_METRIC_CONFIG_H

#include "objectives/metrics.h"

#include <cjson/cJSON.h>

/* The entry for metric mt logged as name: the name when it parses back to the same metric, else
 * Keras's serialized metric object (class name, its name and its parameters). NULL: no memory. */
cJSON *tnt__metric_config(const tnt__metric *mt, const char *name);
/* A serialized metric object x ({"class_name", "config"}) as a metric spec ("name=key:param")
 * into out. */
tnt_status tnt__metric_spec_from_config(const cJSON *x, char *out, size_t size, const char *path);

#endif

/* tf_ops.h: Keras 2's TFOpLambda and SlicingOpLambda layers as traced layers (tf_ops.c). */
#ifndef TNT_TF_OPS_H
#define TNT_TF_OPS_H

#include "layers/layer.h"

#include <cjson/cJSON.h>

/* The tensor references of one inbound node, in the order the layer takes them as inputs (those
 * of the first argument, then the keyword arguments'); the caller deletes the list. */
cJSON *tnt__tfop_refs(const cJSON *node);
/* How many outputs the call of the node makes (split: its parts; otherwise 1). */
int tnt__tfop_outputs(const cJSON *cfg, const cJSON *node);
/* The traced layer of class cls (TFOpLambda or SlicingOpLambda) with config cfg for the call of
 * node, whose n_inputs tensors (tnt__tfop_refs) have shapes (without batch); NULL with an error
 * naming who and the TensorFlow function when it has no mapping. */
tnt_layer *tnt__tfop_layer(const char *cls, const cJSON *cfg, const char *name, const cJSON *node, int n_inputs,
                           const tnt_shape *shapes, const char *who);

#endif

/* wrapper.h: what Keras's layer wrappers (Bidirectional, TimeDistributed) share (wrapper.c): an
 * inner layer that is built and run through the layer contract by its wrapper, whose weights are
 * the wrapper's own (views the model assigns to the wrapper), and whose Keras config nests in the
 * wrapper's as {"class_name", "config"}. */
#ifndef TNT_WRAPPER_H
#define TNT_WRAPPER_H

#include "layers/layer.h"

struct tnt__kj_ctx;

/* Builds inner on n input shapes (without batch), as the model builds a layer. */
tnt_status tnt__wrapper_build_inner(tnt_layer *outer, tnt_layer *inner, int n, const tnt_shape *in);
/* Declares inner's weights as outer's, each name prefixed with prefix ("forward_lstm/kernel"; NULL:
 * the inner name unchanged). */
tnt_status tnt__wrapper_adopt_weights(tnt_layer *outer, tnt_layer *inner, const char *prefix);
/* Points inner's weights at outer's weights first.. (values and gradients, and their device views)
 * and gives inner a seed derived from outer's, before each call of inner. */
void tnt__wrapper_bind(tnt_layer *outer, int first, tnt_layer *inner, uint64_t salt);
/* key: {"class_name": ..., "config": {"name": name, "trainable", "dtype", inner's keys}}, with the
 * wrapper's regularizers and constraints (taken from inner, tnt__wrapper_take_rules) in it. */
tnt_status tnt__wrapper_inner_config(const tnt_layer *outer, const tnt_layer *inner, const char *name, struct cJSON *c,
                                     const char *key);
/* Moves inner's weight regularizers and constraints to outer, which applies them by key to its
 * copies of inner's weights (same names, or prefixed: "forward_lstm/kernel"). An activity
 * regularizer inside a wrapper is refused: Keras divides its penalty by the inner layer's own
 * batch (batch * steps in TimeDistributed). Errors name the wrapper class cls. */
tnt_status tnt__wrapper_take_rules(tnt_layer *outer, tnt_layer *inner, const char *cls);
/* a and b have the same regularizers and constraints (Bidirectional's two layers must). */
bool tnt__wrapper_same_rules(const tnt_layer *a, const tnt_layer *b);
/* The layer that config[key] describes; NULL with an error naming the wrapper. */
tnt_layer *tnt__wrapper_inner_from_config(const struct cJSON *c, const char *key, const struct tnt__kj_ctx *k);

#endif

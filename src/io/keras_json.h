/* keras_json.h: helpers for the layers' get_config (Keras 2 JSON architecture, keras_json.c).
 * A layer's get_config adds its own keys to a cJSON object that already holds name, trainable and
 * dtype; the helpers write Keras's spellings of the shared pieces. */
#ifndef TNT_KERAS_JSON_H
#define TNT_KERAS_JSON_H

#include "layers/layer.h"

#include <cjson/cJSON.h>

/* In get_config: a cJSON_Add...() result that must not be NULL, and a helper's status. */
#define TNT_KJ(x)                                                                                 \
    do {                                                                                          \
        if (!(x)) return tnt__error(TNT_ERR_NOMEM, "JSON config: out of memory");                 \
    } while (0)
#define TNT_KJ_S(x)                                                                               \
    do {                                                                                          \
        tnt_status s_ = (x);                                                                      \
        if (s_ != TNT_OK) return s_;                                                              \
    } while (0)

/* Each returns TNT_OK, or TNT_ERR_NOMEM when cJSON could not allocate. */
/* key: {"class_name": "GlorotUniform", "config": {"seed": null}} for init (never DEFAULT). */
tnt_status tnt__kj_add_initializer(cJSON *c, const char *key, tnt_initializer init);
/* "activation": "relu"; TNT_ERR_UNSUPPORTED for a leaky relu slope Keras's name cannot carry. */
tnt_status tnt__kj_add_activation(cJSON *c, tnt_activation act, float alpha);
/* key: [v0, v1, ...] */
tnt_status tnt__kj_add_ints(cJSON *c, const char *key, int n, const int *v);
/* key: [[top, bottom], [left, right]], and "data_format": "channels_last" (ZeroPadding2D,
 * Cropping2D) */
tnt_status tnt__kj_add_2d_margins(cJSON *c, const char *key, int top, int bottom, int left, int right);
/* key: null, for each key of a NULL-terminated list (regularizers, constraints) */
tnt_status tnt__kj_add_nulls(cJSON *c, const char *const *keys);
/* The regularizer and constraint keys of Dense and Conv*: kernel_regularizer, ... */
extern const char *const tnt__kj_kernel_nulls[];
/* A float as the shortest decimal that reads back to it (0.99f -> 0.99), as Python prints it. */
double tnt__kj_f(float v);
/* Keras padding name: "valid", "same", "causal" */
const char *tnt__kj_padding_name(tnt_padding p);

/* MultiHeadAttention call arguments beyond query and value (attention.c): whether an
 * attention_mask input is used, and use_causal_mask. */
void tnt__attention_call_info(const tnt_layer *l, bool *has_attention_mask, bool *use_causal_mask);

#endif

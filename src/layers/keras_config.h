/* keras_config.h: a layer's Keras config both ways (keras_config.c), and the registry of Keras
 * class names (registry.c).
 *
 * Writing (get_config): the layer adds its own keys to a cJSON object that already holds name,
 * trainable and dtype; the tnt__kj_add_* helpers write Keras's spellings of the shared pieces.
 * Reading (from_config): the layer reads its own keys with the tnt__kj_* readers below and calls
 * its public constructor. Every reader returns TNT_OK or an error that names the layer, its class
 * and the bad key ("from_json: layer \"dense_1\" (Dense): key \"units\": expected an integer").
 * Keras's leniency: unknown keys are ignored, a boolean may be written 1 or 0, a tuple may be a
 * list or Keras 3's {"class_name": "__tuple__", "items": [...]}, and null means "absent". */
#ifndef TNT_KERAS_CONFIG_H
#define TNT_KERAS_CONFIG_H

#include "layers/layer.h"

#include <cjson/cJSON.h>

/* The layer being read, for messages: its name and its Keras class as the file spells it. */
typedef struct tnt__kj_ctx {
    const char *name, *cls;
} tnt__kj_ctx;

/* ---- the registry (registry.c) ------------------------------------------------------------ */

/* The ops of the layer class Keras calls cls ("Conv2D", or an alias such as "Convolution2D");
 * NULL when this library has no such class. Every class listed has a from_config. */
const tnt__layer_ops *tnt__layer_class_find(const char *cls);

/* ---- writing, in get_config ------------------------------------------------------------- */

/* A cJSON_Add...() result that must not be NULL, and a helper's status. */
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
/* key: [[before, after], ...] for n axes from pairs[2n] (ZeroPadding2D/3D, Cropping2D/3D) */
tnt_status tnt__kj_add_margins(cJSON *c, const char *key, int n, const int *pairs);
/* "data_format": the layer's, "channels_last" or "channels_first" */
tnt_status tnt__kj_add_data_format(cJSON *c, const tnt_layer *l);
/* key: null, for each key of a NULL-terminated list (regularizers, constraints) */
tnt_status tnt__kj_add_nulls(cJSON *c, const char *const *keys);
/* The regularizer and constraint keys of Dense, Conv* and MultiHeadAttention: kernel_regularizer,
 * bias_regularizer, activity_regularizer, kernel_constraint, bias_constraint. */
extern const char *const tnt__kj_kernel_nulls[];
/* A float as the shortest decimal that reads back to it (0.99f -> 0.99), as Python prints it. */
double tnt__kj_f(float v);
/* Keras padding name: "valid", "same", "causal" */
const char *tnt__kj_padding_name(tnt_padding p);
/* "batch_input_shape": [null, d1, ...]: a model's input shape s, in its first layer's config. */
tnt_status tnt__kj_add_batch_shape(cJSON *c, tnt_shape s);

/* ---- reading, in from_config ------------------------------------------------------------ */

/* A reader's status: on failure from_config returns NULL (the reader has set the error). */
#define TNT_KJ_READ(x)                                                                            \
    do {                                                                                          \
        if ((x) != TNT_OK) return NULL;                                                           \
    } while (0)

/* Sets the error "from_json: layer "<name>" (<cls>): <message>" and returns s. */
tnt_status tnt__kj_error(const tnt__kj_ctx *k, tnt_status s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* As tnt__kj_error, but returns NULL: a from_config's way out when it rejects a value. */
tnt_layer *tnt__kj_fail(const tnt__kj_ctx *k, tnt_status s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* l, or NULL with the constructor's error prefixed by the layer and class: from_config's return. */
tnt_layer *tnt__kj_built(tnt_layer *l, const tnt__kj_ctx *k);

/* config[key], NULL when config is not an object or lacks key. */
const cJSON *tnt__kj_item(const cJSON *config, const char *key);
/* v is missing or null: Keras's "not set". */
bool tnt__kj_absent(const cJSON *v);
/* v is a whole number in int range: *out = v. */
bool tnt__kj_as_int(const cJSON *v, int *out);
/* The items of a tuple: v itself when a list, the "items" of Keras 3's {"class_name": "__tuple__",
 * "items": [...]}; NULL otherwise. */
const cJSON *tnt__kj_list(const cJSON *v);

/* Keras's random preprocessing layers. "seed": a whole number >= 0; absent or null: 0 (draw from
 * the model's seed). A factor: a number x (the range [-x, x]; with symmetric false, [x, x]) or a
 * (lower, upper) pair; absent: an error when required, else *lo and *hi as they were and *set
 * (may be NULL) false. */
tnt_status tnt__kj_seed(const cJSON *config, uint64_t *seed, const tnt__kj_ctx *k);
tnt_status tnt__kj_factor(const cJSON *config, const char *key, bool required, bool symmetric, float *lo, float *hi,
                          bool *set, const tnt__kj_ctx *k);
/* Scalars. An absent key is an error when required, else *out = def. */
tnt_status tnt__kj_int(const cJSON *config, const char *key, bool required, int def, int *out, const tnt__kj_ctx *k);
tnt_status tnt__kj_num(const cJSON *config, const char *key, bool required, double def, double *out,
                       const tnt__kj_ctx *k);
/* true / false, or 1 / 0 */
tnt_status tnt__kj_bool(const cJSON *config, const char *key, bool def, bool *out, const tnt__kj_ctx *k);
/* The boolean key must be want (absent: the default, which is want). */
tnt_status tnt__kj_want_bool(const cJSON *config, const char *key, bool want, const tnt__kj_ctx *k);
/* A string; NULL when absent or null; NULL with the error set and *bad = true when not a string. */
const char *tnt__kj_str(const cJSON *config, const char *key, bool *bad, const tnt__kj_ctx *k);

/* Tuples. n integers: a tuple of n, or one integer meaning n copies (Keras accepts both); absent:
 * def (NULL: zeros) unless required. */
tnt_status tnt__kj_ints(const cJSON *config, const char *key, bool required, int n, const int *def, int *out,
                        const tnt__kj_ctx *k);
/* The same for sizes, strides and rates: every value must be >= 1. */
tnt_status tnt__kj_sizes(const cJSON *config, const char *key, bool required, int n, const int *def, int *out,
                        const tnt__kj_ctx *k);
/* A required tuple of 1..max integers (Reshape's target_shape, Permute's dims): out[0 .. *n). */
tnt_status tnt__kj_int_list(const cJSON *config, const char *key, int max, int *out, int *n, const tnt__kj_ctx *k);
/* ZeroPadding2D/3D's padding, Cropping2D/3D's cropping over n axes: an integer, n integers (each
 * for both sides) or n (before, after) pairs, into pairs[2n]; absent: def everywhere. */
tnt_status tnt__kj_margins(const cJSON *config, const char *key, int n, int def, int *pairs, const tnt__kj_ctx *k);

/* Keras objects. */
/* "activation": a Keras name; absent: linear. */
tnt_status tnt__kj_activation(const cJSON *config, tnt_activation *act, const tnt__kj_ctx *k);
/* An initializer: a name ("glorot_uniform"), {"class_name": "GlorotUniform", "config": {...}} (Keras
 * 3's with "module" and "registered_name"), every class, snake-case, alias and "V2" name Keras 1,
 * 2 and 3 write (OrthogonalInitializer, IdentityInitializer, GlorotUniformV2, ...), VarianceScaling
 * (Keras 2.0-2.2's spelling of Glorot, He and LeCun, which it becomes), and parameters other than
 * the enum's as an interned spec (layer.h); absent: def. */
tnt_status tnt__kj_init(const cJSON *config, const char *key, tnt_initializer def, tnt_initializer *out,
                        const tnt__kj_ctx *k);
/* v (an initializer, regularizer or constraint object) is Keras's own, not a custom class: its
 * module Keras's or TensorFlow's and its registered_name null (or its class name). */
tnt_status tnt__kj_builtin_object(const cJSON *v, const char *key, const tnt__kj_ctx *k);
/* The initializer must be want (layers whose initializers are fixed). */
tnt_status tnt__kj_want_init(const cJSON *config, const char *key, tnt_initializer want, const tnt__kj_ctx *k);
/* "padding": "valid" (also when absent), "same" or "causal". */
tnt_status tnt__kj_padding(const cJSON *config, tnt_padding *p, const tnt__kj_ctx *k);
/* "data_format" is absent, null, "channels_last" or "channels_first". tnt__layer_from_config then
 * sets a channels-first layer's format (through the class's set_data_format, an error for a class
 * without one); tnt__kj_channels_first says whether the config asks for it (Keras 1's
 * dim_ordering "th" too). */
tnt_status tnt__kj_check_data_format(const cJSON *config, const tnt__kj_ctx *k);
bool tnt__kj_channels_first(const cJSON *config);
/* Each key of a NULL-terminated list (regularizers, constraints and other options this library
 * does not implement) is absent or null. */
tnt_status tnt__kj_check_nulls(const cJSON *config, const char *const *keys, const tnt__kj_ctx *k);

/* Keras 1 configs (output_dim, nb_filter, nb_row/nb_col, border_mode, subsample, init, inner_init,
 * W_regularizer, bias, ...): a copy with Keras 2's names, as Keras 2's legacy interfaces convert
 * them (the caller deletes it); NULL when config has no Keras 1 key. dim_ordering stays: the
 * format reader takes "th" as channels_first. */
cJSON *tnt__kj_keras1(const cJSON *config, const char *cls);

/* Keras 3 architectures: src/io/keras_json.c sets the flag while it reads one (this thread only).
 * Keras 3 renamed one behaviour: its hard_sigmoid is relu6(x + 3) / 6, where Keras 2's is
 * clip(0.2 x + 0.5, 0, 1); tnt__kj_activation then reads it as TNT_ACT_HARD_SIGMOID_V3, and
 * tnt__kj_keras3_names gives a copy of a config whose activation or recurrent_activation is
 * "hard_sigmoid" with "hard_sigmoid_v3" there (the caller deletes it; NULL when nothing changes or
 * the flag is off), which tnt__layer_from_config hands to every class, recurrent ones included.
 * Keras 2's hard_sigmoid in a Keras 3 file (the .keras files we write) is "hard_sigmoid_keras2". */
void tnt__kj_set_keras3(bool on);
bool tnt__kj_keras3(void);
cJSON *tnt__kj_keras3_names(const cJSON *config);

/* A model's input shape, in an InputLayer's or a first layer's config: "batch_input_shape" (Keras
 * 2) or "batch_shape" (Keras 3), a tuple [null, d1, ...] whose batch size is left out of s. */
bool tnt__kj_has_batch_shape(const cJSON *config);
tnt_status tnt__kj_batch_shape(const cJSON *config, tnt_shape *s, const tnt__kj_ctx *k);

/* BatchNormalization's and LayerNormalization's shared keys. */
/* axis: a single axis, an integer or a list of one as Keras writes it after build (counting the
 * batch axis; negative from the end); absent: -1. The layer resolves it against its input in build. */
tnt_status tnt__kj_norm_axis(const cJSON *config, int *axis, const tnt__kj_ctx *k);
/* center and scale (default true), beta zeros, gamma ones, and no beta/gamma regularizers or
 * constraints. */
tnt_status tnt__kj_center_scale(const cJSON *config, bool *center, bool *scale, tnt_initializer *beta,
                                tnt_initializer *gamma, const tnt__kj_ctx *k);

#endif

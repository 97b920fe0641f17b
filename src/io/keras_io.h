/* keras_io.h: what the Keras file readers and writers of src/io share (internal).
 *   keras3_weights.c  the Keras 3 weights layout (model.weights.h5 inside a .keras zip, and
 *                     .weights.h5 files)
 *   keras_zip.c       the Keras 3 .keras zip (metadata.json, config.json, model.weights.h5)
 *   compile_config.c  compile settings (training_config, compile_config), shared by .h5 and .keras
 *   h5_model.c        optimizer variables, shared by .h5 and .keras */
#ifndef TNT_KERAS_IO_H
#define TNT_KERAS_IO_H

#include "io/h5.h"
#include "model/model.h"

#include <cjson/cJSON.h>
#include <hdf5.h>

/* What a file holds, by its first bytes (not its name). */
typedef enum tnt__file_kind {
    TNT__FILE_UNKNOWN,
    TNT__FILE_ZIP,  /* "PK\3\4": a Keras 3 .keras archive */
    TNT__FILE_HDF5, /* "\211HDF\r\n\032\n" */
    TNT__FILE_JSON, /* '{' after white space */
} tnt__file_kind;

/* The kind of the file at path; TNT__FILE_UNKNOWN with an error naming who, the path and the first
 * bytes when it is none of these (or unreadable). */
tnt__file_kind tnt__file_kind_of(const char *path, const char *who);

/* The layers of Keras's model.layers (a Sequential model's InputLayer is not listed). */
bool tnt__keras_listed(const tnt_model *m, const tnt_layer *l);

/* One entry of Keras's model.layers (keras_entries.c): a layer, or a nested model with the
 * weights of all its layers, as Keras's _legacy_weights lists them (all trainable ones first,
 * layer by layer, then the non-trainable ones). */
typedef struct tnt__entry {
    const char *name;
    tnt_layer *layer;   /* NULL for a nested model */
    int scope;          /* the nested model's scope (-1 for a layer) */
    int n;              /* weights */
    tnt__weight **w;
    tnt_layer **owner;  /* the layer holding w[i] */
    char **names;       /* Keras 2 weight names: "dense/kernel:0", "inner/dense/kernel:0" */
} tnt__entry;
/* The entries of m (scope -1) or of one of its nested models, in Keras's order. */
tnt_status tnt__entries(const tnt_model *m, int scope, tnt__entry **out, int *n);
void tnt__entries_free(tnt__entry *e, int n);
/* h5_weights.c: where weight w of m goes in buffers params and state laid out as m->params and
 * m->state (what a reader in the child process fills). */
float *tnt__weight_destination(const tnt_model *m, const tnt__weight *w, float *params, float *state);

/* h5_legacy.c: Keras 1 files (keras1: no keras_version beside layer_names) and Theano-trained ones
 * (theano: backend "theano"). Whether entry e's weights need Keras 2's conversion; then reading the
 * n_names datasets names[] of group g (gname in messages), converted and checked against e's
 * weights, into params and state. */
bool tnt__h5_legacy_applies(const tnt__entry *e, bool keras1, bool theano);
tnt_status tnt__h5_legacy_read_entry(const tnt_model *m, hid_t g, const char *gname, char *const *names, int n_names,
                                     const tnt__entry *e, bool keras1, bool theano, const char *path, float *params,
                                     float *state);

/* Keras 3 layout: true when file (or group) f holds a "layers" group and no Keras 2 layer_names. */
bool tnt__keras3_is_layout(hid_t f);
/* Writes vars, layers/<snake_case class>[_N]/vars/<i> ... of m into f. */
tnt_status tnt__keras3_write_weights(tnt_model *m, hid_t f, const char *path);
/* Reads m's weights from f into params and state (tnt__weight_destination), checking every
 * variable's presence, count and shape. */
tnt_status tnt__keras3_read_weights(tnt_model *m, hid_t f, const char *path, float *params, float *state);

/* compile_config.c: compiles m as a Keras training_config (.h5) or compile_config (.keras) says. */
tnt_status tnt__compile_from_config(tnt_model *m, const cJSON *config, const char *path);
/* compile_config.c: the training_config of a compiled m as a cJSON object (caller frees). */
tnt_status tnt__training_config(const tnt_model *m, cJSON **out);
/* h5_model.c: optimizer variables as Keras 3 keeps them (group/vars/0 iteration, 1 learning
 * rate, then the slots in Keras's order). */
tnt_status tnt__keras3_write_optimizer(tnt_model *m, hid_t group, const char *path);
/* Reads them into *it, *lr and slots (slot k at slots + k * n_params, laid out as m->params);
 * *it = -1 when the file's variables do not fit this optimizer (it then starts afresh). */
tnt_status tnt__keras3_read_optimizer(tnt_model *m, hid_t group, const char *path, int64_t *it, float *lr, float *slots);

/* keras_zip.c: entry name of the zip archive at path, read whole (NUL-terminated; sizes checked
 * first); *buf NULL (and TNT_OK) when absent and !required. */
tnt_status tnt__keras_zip_entry(const char *path, const char *name, char **buf, size_t *len, bool required);
/* An HDF5 file opened read-only on an image in memory (in the child of tnt__h5_isolated). */
hid_t tnt__h5_open_image(const void *image, size_t len);
/* keras_zip.c */
tnt_status tnt__keras_zip_save(tnt_model *m, const char *path, const tnt_save_opts *opts);
tnt_model *tnt__keras_zip_load(const char *path, bool compile);

#endif

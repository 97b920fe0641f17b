/* npy_inputs.h: the inputs of a model with several of them, given by name on the command line
 * (--input NAME=X.npy, repeatable), for tnt-predict and tnt-train. */
#ifndef TNT_TOOLS_NPY_INPUTS_H
#define TNT_TOOLS_NPY_INPUTS_H

#include <tarantella.h>

#include <stdbool.h>

/* All samples of one NPY file: n rows of shape (without the sample axis). */
typedef struct npy_array {
    float *data;
    int64_t n;
    tnt_shape shape;
} npy_array;
/* Reads path whole; false with a message on stderr (prog names the program). */
bool npy_read(const char *prog, const char *path, npy_array *a);

/* specs[i] is "NAME=X.npy", one per input of m, NAME as tnt_model_io_name gives it. Checks each
 * array against its input (None dimensions take the file's sizes, fixed via
 * tnt_model_set_input_shapes) and packs the samples as a dataset element holds them: input 0's
 * values, then input 1's, ... per sample; out->shape is (total,). */
bool npy_pack_inputs(const char *prog, tnt_model *m, int n_specs, char *const *specs, npy_array *out);

#endif

/* h5.h: what the HDF5 files share (h5_weights.c, h5_model.c, h5_guard.c). */
#ifndef TNT_IO_H5_H
#define TNT_IO_H5_H

#include "core/core.h"

#include <hdf5.h>

/* ---- reading untrusted files (h5_guard.c) -------------------------------------------------- */

/* libhdf5 1.10 crashes (a wild read in H5HG_read under H5Aread) or loops for ever (H5C_protect)
 * on some damaged files, whatever the caller checks first. So libhdf5 meets a file to load only
 * in a child process with a time limit: the parse step runs there on a copy-on-write image of
 * the caller's memory (less the buffers of 1 MB and more: tnt__alloc keeps them out of fork) and
 * writes its answer into memory shared with the caller. */
typedef struct tnt__h5_answer {
    char *data;    /* cap bytes shared with the child, which writes them; the caller reads len */
    size_t cap, len;
    bool populate; /* all cap bytes will be written: their pages are mapped at once */
} tnt__h5_answer;
/* populate: map every page now (a page fault costs ~30 us on a virtual machine: 1.7 s for the
 * 25000 pages of ResNet-50's weights, one by one). */
tnt_status tnt__h5_answer_new(tnt__h5_answer *a, size_t cap, bool populate, const char *who, const char *path);
void tnt__h5_answer_free(tnt__h5_answer *a);
/* The parse step: reads the file and writes its answer into a->data (never more than a->cap
 * bytes), setting a->len; or returns an error (its message goes to the caller). */
typedef tnt_status (*tnt__h5_parse_fn)(void *ctx, tnt__h5_answer *a);
/* Runs parse in a child; on success a->len bytes of a->data hold its answer. who and path name
 * the load in messages: the child's error, a crash (signal), or a child that ran past the time
 * limit (TNT_H5_TIME_LIMIT seconds, default 60 plus 1 per 10 MB of file). */
tnt_status tnt__h5_isolated(const char *who, const char *path, tnt__h5_parse_fn parse, void *ctx, tnt__h5_answer *a);

/* ---- shared by the readers and writers (h5_weights.c) -------------------------------------- */

void tnt__h5_quiet(void);
/* Opens path read-only into *f after the checks every load makes (readable, an HDF5 file);
 * messages start with who. */
tnt_status tnt__h5_open(const char *who, const char *path, hid_t *f);
/* H5Dread of a whole dataset (file space = memory space = all), after checks libhdf5 1.10
 * skips, without which H5Dread copies past its buffers (found by fuzz_zip): the file's number
 * type is a plain 1, 2, 4 or 8-byte one, and a compact dataset holds the bytes its shape needs. */
herr_t tnt__h5_dread(hid_t d, hid_t mem_type, void *out);
/* Why the last tnt__h5_dread failed, for messages: a refused dataset, a checksum mismatch, or
 * damage in general. */
const char *tnt__h5_read_failure(void);
/* A float32 or int64 dataset in Keras layout; non-scalar ones are chunked with the Fletcher-32
 * checksum filter, so that a damaged byte fails the read instead of loading. */
hid_t tnt__h5_create_dataset(hid_t g, const char *name, hid_t type, const tnt_shape *shape, hid_t lcpl);
tnt_status tnt__h5_write_scalar_str(hid_t obj, const char *name, const char *value, const char *path);
tnt_status tnt__h5_write_names(hid_t obj, const char *name, char *const *v, int n, const char *path);
/* The strings of attribute name (or name0, name1, ...): *v receives n malloc'd strings in a
 * malloc'd array (free each and the array); *found is false when the attribute is absent. */
tnt_status tnt__h5_read_strs(hid_t obj, const char *name, const char *where, char ***v, int *n, bool *found);

/* tnt_save_weights, and tnt_save_model (h5_model.c) with the weights in group "model_weights" and
 * the rest added by extra: the master (or every rank) writes, every rank returns the same status. */
typedef tnt_status (*tnt__h5_extra_fn)(tnt_model *m, hid_t file, const char *path, void *ctx);
tnt_status tnt__h5_save(tnt_model *m, const char *path, const tnt_save_opts *opts, const char *who,
                        const char *group, tnt__h5_extra_fn extra, void *ctx);
/* Reads the weights of path for m in this process (tnt_load_weights runs it in the child) into
 * params and state, laid out as m->params and m->state. */
tnt_status tnt__h5_read_weights(tnt_model *m, const char *path, bool by_name, float *params, float *state);

#endif

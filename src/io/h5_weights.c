/* h5_weights.c: Keras 2 HDF5 weights files (model.save_weights("w.h5") / model.load_weights),
 * following keras/src/saving/legacy/hdf5_format.py:
 *   root attributes  layer_names   fixed-length byte strings, one per layer of model.layers (a
 *                                  Sequential model's InputLayer is not among them, a Functional
 *                                  model's are), split into layer_names0, layer_names1, ... when
 *                                  larger than HDF5_OBJECT_HEADER_LIMIT (64512 bytes)
 *                    backend, keras_version
 *   /<layer>         a group per layer (created in order of name) with attribute weight_names
 *                    ("dense/kernel:0", ...; trainable weights first, then non-trainable, as
 *                    _legacy_weights; an empty float64 array for a weightless layer)
 *   /<layer>/<weight name>   float32 datasets in Keras layout (written chunked with the
 *                    Fletcher-32 checksum, which h5py and Keras read as any other dataset)
 *   /top_level_model_weights  an empty group (weights of the model itself: none here)
 * Reading also takes variable-length strings, chunked attributes and a full-model file's
 * model_weights group; it runs in a child process (h5_guard.c). The pieces h5_model.c
 * (whole-model files) shares are the tnt__h5_* functions (io/h5.h). */
#include "io/h5.h"
#include "io/save_check.h"
#include "io/keras_io.h"

#include "core/atomic_file.h"
#include "comm/comm.h"
#include "model/model.h"
#include "model/device.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define HDF5_OBJECT_HEADER_LIMIT 64512
/* bounds on what a file may declare before anything is read: names per attribute (and chunks of
 * one), bytes per fixed-length name (a model_config string is variable-length) */
#define MAX_NAMES 1000000
#define MAX_NAME_BYTES (1 << 20)
/* the Keras version whose layout is written (Keras reads it to decide on legacy conversions) */
#define TNT__KERAS_VERSION "2.15.0"

/* ---- helpers --------------------------------------------------------------------------------- */

void tnt__h5_quiet(void) { H5Eset_auto2(H5E_DEFAULT, NULL, NULL); }

static void close_id(hid_t id) {
    if (id < 0) return;
    switch (H5Iget_type(id)) {
    case H5I_FILE: H5Fclose(id); break;
    case H5I_GROUP: H5Gclose(id); break;
    case H5I_DATASET: H5Dclose(id); break;
    case H5I_ATTR: H5Aclose(id); break;
    case H5I_DATATYPE: H5Tclose(id); break;
    case H5I_DATASPACE: H5Sclose(id); break;
    case H5I_GENPROP_LST: H5Pclose(id); break;
    default: break;
    }
}

static void shape_str(const tnt_shape *s, char *buf, size_t size) {
    size_t o = (size_t)snprintf(buf, size, "(");
    for (int i = 0; i < s->ndim && o < size; i++)
        o += (size_t)snprintf(buf + o, size - o, "%s%lld", i ? ", " : "", (long long)s->dim[i]);
    if (o < size) snprintf(buf + o, size - o, s->ndim == 1 ? ",)" : ")");
}

bool tnt__keras_listed(const tnt_model *m, const tnt_layer *l) { return tnt__model_keras_functional(m) || !tnt__is_input_layer(l); }

/* ---- string attributes ----------------------------------------------------------------------- */

typedef struct strlist {
    int n, cap;
    char **s;
} strlist;

static void strlist_free(strlist *l) {
    for (int i = 0; i < l->n; i++) free(l->s[i]);
    free(l->s);
    *l = (strlist){0};
}

static tnt_status strlist_push(strlist *l, const char *s, size_t len) {
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 16;
        char **p = realloc(l->s, (size_t)cap * sizeof *p);
        if (!p) return tnt__error(TNT_ERR_NOMEM, "out of memory reading names");
        l->s = p, l->cap = cap;
    }
    char *c = malloc(len + 1);
    if (!c) return tnt__error(TNT_ERR_NOMEM, "out of memory reading names");
    memcpy(c, s, len);
    c[len] = '\0';
    l->s[l->n++] = c;
    return TNT_OK;
}

/* Appends the strings of attribute name of obj (fixed- or variable-length; an empty array of any
 * type gives none). where names the object in messages. */
static tnt_status read_str_attr(hid_t obj, const char *name, const char *where, strlist *out) {
    tnt_status s = TNT_OK;
    hid_t a = H5Aopen(obj, name, H5P_DEFAULT), space = -1, type = -1, mem = -1;
    void *buf = NULL;
    if (a < 0) return tnt__error(TNT_ERR_FORMAT, "%s: cannot open attribute %s", where, name);
    space = H5Aget_space(a);
    type = H5Aget_type(a);
    hssize_t n = space >= 0 ? H5Sget_simple_extent_npoints(space) : -1;
    if (n < 0 || type < 0) {
        s = tnt__error(TNT_ERR_FORMAT, "%s: attribute %s is unreadable", where, name);
        goto done;
    }
    if (n == 0) goto done;
    /* checked before libhdf5 reads: Keras writes a scalar or a list of names */
    H5S_class_t sc = H5Sget_simple_extent_type(space);
    if ((sc != H5S_SCALAR && sc != H5S_SIMPLE) || H5Sget_simple_extent_ndims(space) > 1 || n > MAX_NAMES) {
        s = tnt__error(TNT_ERR_FORMAT, "%s: attribute %s has %d dimensions and %lld elements (expected a list of at "
                       "most %d strings)", where, name, H5Sget_simple_extent_ndims(space), (long long)n, MAX_NAMES);
        goto done;
    }
    if (H5Tget_class(type) != H5T_STRING) {
        s = tnt__error(TNT_ERR_FORMAT, "%s: attribute %s holds no strings", where, name);
        goto done;
    }
    htri_t var = H5Tis_variable_str(type);
    mem = H5Tcopy(H5T_C_S1);
    if (var > 0) {
        H5Tset_size(mem, H5T_VARIABLE);
        H5Tset_cset(mem, H5Tget_cset(type));
        char **v = calloc((size_t)n, sizeof *v);
        if (!v) {
            s = tnt__error(TNT_ERR_NOMEM, "out of memory reading %s", name);
            goto done;
        }
        if (H5Aread(a, mem, v) < 0) {
            free(v);
            s = tnt__error(TNT_ERR_FORMAT, "%s: cannot read attribute %s", where, name);
            goto done;
        }
        for (hssize_t i = 0; i < n && s == TNT_OK; i++) s = strlist_push(out, v[i] ? v[i] : "", v[i] ? strlen(v[i]) : 0);
        H5Dvlen_reclaim(mem, space, H5P_DEFAULT, v);
        free(v);
    } else {
        size_t size = H5Tget_size(type);
        if (size == 0 || size > MAX_NAME_BYTES) {
            s = tnt__error(TNT_ERR_FORMAT, "%s: attribute %s has strings of %zu bytes (expected 1 to %d)", where, name,
                           size, MAX_NAME_BYTES);
            goto done;
        }
        H5Tset_size(mem, size);
        H5Tset_strpad(mem, H5T_STR_NULLPAD);
        buf = malloc((size_t)n * size);
        if (!buf) {
            s = tnt__error(TNT_ERR_NOMEM, "out of memory reading %s", name);
            goto done;
        }
        if (H5Aread(a, mem, buf) < 0) {
            s = tnt__error(TNT_ERR_FORMAT, "%s: cannot read attribute %s", where, name);
            goto done;
        }
        for (hssize_t i = 0; i < n && s == TNT_OK; i++) {
            const char *p = (const char *)buf + (size_t)i * size;
            s = strlist_push(out, p, strnlen(p, size));
        }
    }
done:
    free(buf);
    close_id(mem), close_id(type), close_id(space), close_id(a);
    return s;
}

/* Keras's load_attributes_from_hdf5_group: name, else name0, name1, ...; *found false when
 * neither exists. */
static tnt_status read_names(hid_t obj, const char *name, const char *where, strlist *out, bool *found) {
    *found = false;
    if (H5Aexists(obj, name) > 0) {
        *found = true;
        return read_str_attr(obj, name, where, out);
    }
    char chunk[96];
    for (int k = 0; k < MAX_NAMES; k++) {
        snprintf(chunk, sizeof chunk, "%s%d", name, k);
        if (H5Aexists(obj, chunk) <= 0) break;
        *found = true;
        tnt_status s = read_str_attr(obj, chunk, where, out);
        if (s != TNT_OK) return s;
    }
    return TNT_OK;
}

/* Fixed-length (NULLPAD, as numpy's 'S' dtype) string array attribute; Keras's
 * save_attributes_to_hdf5_group: split in chunks (np.array_split) while one exceeds the limit;
 * none at all is an empty float64 array (np.asarray([])). */
tnt_status tnt__h5_write_names(hid_t obj, const char *name, char *const *v, int n, const char *path) {
    tnt_status s = TNT_OK;
    hid_t type = -1, space = -1, a = -1;
    if (n == 0) {
        hsize_t zero = 0;
        space = H5Screate_simple(1, &zero, NULL);
        a = space >= 0 ? H5Acreate2(obj, name, H5T_IEEE_F64LE, space, H5P_DEFAULT, H5P_DEFAULT) : -1;
        if (a < 0) s = tnt__error(TNT_ERR_IO, "%s: cannot write attribute %s", path, name);
        close_id(a), close_id(space);
        return s;
    }
    size_t width = 1;
    for (int i = 0; i < n; i++) width = TNT_MAX(width, strlen(v[i]));
    int chunks = 1;
    while (((size_t)((n + chunks - 1) / chunks)) * width > HDF5_OBJECT_HEADER_LIMIT) chunks++;
    char *buf = calloc((size_t)n, width);
    type = H5Tcopy(H5T_C_S1);
    if (!buf || type < 0) {
        free(buf);
        close_id(type);
        return tnt__error(TNT_ERR_NOMEM, "%s: out of memory writing %s", path, name);
    }
    H5Tset_size(type, width);
    H5Tset_strpad(type, H5T_STR_NULLPAD);
    for (int i = 0; i < n; i++) memcpy(buf + (size_t)i * width, v[i], strlen(v[i]));
    int start = 0;
    for (int c = 0; c < chunks && s == TNT_OK; c++) {
        int count = n / chunks + (c < n % chunks); /* np.array_split: the first n % chunks get one more */
        char an[96];
        if (chunks == 1) snprintf(an, sizeof an, "%s", name);
        else snprintf(an, sizeof an, "%s%d", name, c);
        hsize_t dim = (hsize_t)count;
        space = H5Screate_simple(1, &dim, NULL);
        a = space >= 0 ? H5Acreate2(obj, an, type, space, H5P_DEFAULT, H5P_DEFAULT) : -1;
        if (a < 0 || H5Awrite(a, type, buf + (size_t)start * width) < 0)
            s = tnt__error(TNT_ERR_IO, "%s: cannot write attribute %s", path, an);
        close_id(a), close_id(space);
        a = space = -1;
        start += count;
    }
    free(buf);
    close_id(type);
    return s;
}

/* A scalar variable-length ASCII string attribute (what h5py makes of Keras's bytes values). */
tnt_status tnt__h5_write_scalar_str(hid_t obj, const char *name, const char *value, const char *path) {
    hid_t type = H5Tcopy(H5T_C_S1), space = H5Screate(H5S_SCALAR), a = -1;
    tnt_status s = TNT_OK;
    if (type >= 0) {
        H5Tset_size(type, H5T_VARIABLE);
        H5Tset_cset(type, H5T_CSET_ASCII);
    }
    if (type >= 0 && space >= 0) a = H5Acreate2(obj, name, type, space, H5P_DEFAULT, H5P_DEFAULT);
    if (a < 0 || H5Awrite(a, type, &value) < 0) s = tnt__error(TNT_ERR_IO, "%s: cannot write attribute %s", path, name);
    close_id(a), close_id(space), close_id(type);
    return s;
}

tnt_status tnt__h5_read_strs(hid_t obj, const char *name, const char *where, char ***v, int *n, bool *found) {
    strlist l = {0};
    tnt_status s = read_names(obj, name, where, &l, found);
    if (s != TNT_OK) {
        strlist_free(&l);
        *v = NULL, *n = 0;
        return s;
    }
    *v = l.s, *n = l.n;
    return TNT_OK;
}

/* ---- saving ---------------------------------------------------------------------------------- */

/* Chunks of at most this many bytes (slabs along the leading axes): whole weights in practice. */
#define CHUNK_MAX_BYTES (16 << 20)

hid_t tnt__h5_create_dataset(hid_t g, const char *name, hid_t type, const tnt_shape *shape, hid_t lcpl) {
    hsize_t dims[TNT_MAX_DIMS], chunk[TNT_MAX_DIMS];
    int64_t n = tnt_shape_numel(*shape);
    for (int i = 0; i < shape->ndim; i++) dims[i] = chunk[i] = (hsize_t)shape->dim[i];
    hid_t space = shape->ndim ? H5Screate_simple(shape->ndim, dims, NULL) : H5Screate(H5S_SCALAR);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE), d = -1;
    if (space < 0 || dcpl < 0) goto done;
    /* a chunk cannot be empty, nor can a scalar be chunked: those stay contiguous */
    if (shape->ndim > 0 && n > 0) {
        size_t bytes = (size_t)n * H5Tget_size(type);
        for (int i = 0; i < shape->ndim; i++)
            while (bytes > CHUNK_MAX_BYTES && chunk[i] > 1) {
                bytes = bytes / chunk[i] * ((chunk[i] + 1) / 2);
                chunk[i] = (chunk[i] + 1) / 2;
            }
        if (H5Pset_chunk(dcpl, shape->ndim, chunk) < 0 || H5Pset_fletcher32(dcpl) < 0) goto done;
    }
    d = H5Dcreate2(g, name, type, space, lcpl, dcpl, H5P_DEFAULT);
done:
    close_id(dcpl), close_id(space);
    return d;
}

static herr_t note_checksum_error(unsigned n, const H5E_error2_t *e, void *found) {
    (void)n;
    if (e->maj_num == H5E_PLINE || (e->desc && strstr(e->desc, "checksum"))) *(bool *)found = true;
    return 0;
}

static _Thread_local const char *refused; /* why the last tnt__h5_dread refused a dataset */

const char *tnt__h5_read_failure(void) {
    if (refused) return refused;
    bool checksum = false;
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, note_checksum_error, &checksum);
    return checksum ? "checksum mismatch: the data in the file is damaged" : "truncated or corrupt file?";
}

/* A plain number type: 1, 2, 4 or 8 bytes, all bits used. A damaged size (65535 bytes of a
 * 32-bit float) makes H5Dread's conversion copy past the chunk it read. */
static bool plain_number_type(hid_t type) {
    H5T_class_t cls = H5Tget_class(type);
    size_t size = H5Tget_size(type);
    return (cls == H5T_FLOAT || cls == H5T_INTEGER) && (size == 1 || size == 2 || size == 4 || size == 8) &&
           !(cls == H5T_FLOAT && size == 1) && H5Tget_precision(type) == 8 * size && H5Tget_offset(type) == 0;
}

herr_t tnt__h5_dread(hid_t d, hid_t mem_type, void *out) {
    hid_t dcpl = H5Dget_create_plist(d), space = H5Dget_space(d), type = H5Dget_type(d);
    refused = NULL;
    if (dcpl < 0 || space < 0 || type < 0) refused = "unreadable dataset header: the file is damaged";
    else if (!plain_number_type(type)) refused = "its number type is damaged or not a plain integer or float";
    else if (H5Pget_layout(dcpl) == H5D_COMPACT) { /* data kept in the header: as many bytes as the shape needs */
        hssize_t n = H5Sget_simple_extent_npoints(space);
        if (n < 0 || H5Dget_storage_size(d) < (hsize_t)n * H5Tget_size(type))
            refused = "its compact data holds fewer bytes than its shape needs: the file is damaged";
    }
    bool bad = refused != NULL;
    if (dcpl >= 0) H5Pclose(dcpl);
    if (space >= 0) H5Sclose(space);
    if (type >= 0) H5Tclose(type);
    return bad ? -1 : H5Dread(d, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, out);
}

static int cmp_entry_name(const void *a, const void *b) {
    return strcmp((*(const tnt__entry *const *)a)->name, (*(const tnt__entry *const *)b)->name);
}

/* Group g gets weight_names and the datasets of entry e's weights. */
static tnt_status write_entry(hid_t g, const tnt__entry *e, const char *path) {
    tnt_status s = tnt__h5_write_names(g, "weight_names", e->names, e->n, path);
    hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
    if (lcpl < 0) return tnt__error(TNT_ERR_IO, "%s: HDF5 property list", path);
    H5Pset_create_intermediate_group(lcpl, 1);
    for (int j = 0; j < e->n && s == TNT_OK; j++) {
        hid_t d = tnt__h5_create_dataset(g, e->names[j], H5T_IEEE_F32LE, &e->w[j]->shape, lcpl);
        if (d < 0 || H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, e->w[j]->value) < 0)
            s = tnt__error(TNT_ERR_IO, "%s: cannot write dataset %s/%s", path, e->name, e->names[j]);
        close_id(d);
    }
    close_id(lcpl);
    return s;
}

/* The whole file is made in memory (HDF5's core driver, no backing store) and its image written
 * by tnt__atomic_write_data: HDF5 never meets a failing disk (a file it cannot flush stays open
 * inside the library), and our own write reports the error and removes the temp file. */

/* who names the operation in messages; the weights layout goes into group (NULL: the root), then
 * extra (may be NULL) adds what else the file holds. */
static tnt_status make_image(tnt_model *m, const char *path, const char *who, const char *group,
                             tnt__h5_extra_fn extra, void *ctx, void **image, size_t *size) {
    *image = NULL, *size = 0;
    tnt__entry *es = NULL;
    int n = 0;
    tnt_status s = tnt__entries(m, -1, &es, &n);
    const tnt__entry **sorted = tnt__calloc((size_t)n + 1, sizeof *sorted);
    char **names = tnt__calloc((size_t)n + 1, sizeof *names);
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS), f = -1, root = -1;
    if (s != TNT_OK || !sorted || !names || fapl < 0) {
        s = tnt__error(TNT_ERR_NOMEM, "%s %s: out of memory", who, path);
        goto done;
    }
    for (int i = 0; i < n; i++) names[i] = (char *)es[i].name, sorted[i] = &es[i];
    /* Keras: groups made in order of layer name */
    qsort(sorted, (size_t)n, sizeof *sorted, cmp_entry_name);

    if (H5Pset_fapl_core(fapl, 1 << 20, 0) >= 0) f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    if (f < 0) {
        s = tnt__error(TNT_ERR_IO, "%s %s: HDF5 cannot make the file in memory", who, path);
        goto done;
    }
    root = group ? H5Gcreate2(f, group, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT) : H5Gopen2(f, "/", H5P_DEFAULT);
    if (root < 0) {
        s = tnt__error(TNT_ERR_IO, "%s %s: cannot create group %s", who, path, group ? group : "/");
        goto done;
    }
    s = tnt__h5_write_names(root, "layer_names", names, n, path);
    if (s == TNT_OK) s = tnt__h5_write_scalar_str(root, "backend", "tensorflow", path);
    if (s == TNT_OK) s = tnt__h5_write_scalar_str(root, "keras_version", TNT__KERAS_VERSION, path);
    for (int i = 0; i < n && s == TNT_OK; i++) {
        hid_t g = H5Gcreate2(root, sorted[i]->name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        if (g < 0) s = tnt__error(TNT_ERR_IO, "%s %s: cannot create group %s", who, path, sorted[i]->name);
        else s = write_entry(g, sorted[i], path);
        close_id(g);
    }
    if (s == TNT_OK) { /* Keras 2.13+: the model's own weights (none) */
        hid_t g = H5Gcreate2(root, "top_level_model_weights", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        if (g < 0) s = tnt__error(TNT_ERR_IO, "%s %s: cannot create group top_level_model_weights", who, path);
        else s = tnt__h5_write_names(g, "weight_names", NULL, 0, path);
        close_id(g);
    }
    if (s == TNT_OK && extra) s = extra(m, f, path, ctx);
    if (s == TNT_OK) {
        /* without the flush, the image holds stale metadata (HDF5 1.10) */
        ssize_t k = H5Fflush(f, H5F_SCOPE_GLOBAL) >= 0 ? H5Fget_file_image(f, NULL, 0) : -1;
        if (k > 0 && (*image = malloc((size_t)k)) && H5Fget_file_image(f, *image, (size_t)k) == k) *size = (size_t)k;
        else {
            free(*image);
            *image = NULL;
            s = tnt__error(TNT_ERR_IO, "%s %s: cannot get the HDF5 file image", who, path);
        }
    }
done:
    close_id(root);
    if (f >= 0 && H5Fclose(f) < 0 && s == TNT_OK) s = tnt__error(TNT_ERR_IO, "%s %s: HDF5 close failed", who, path);
    if (s != TNT_OK) {
        free(*image);
        *image = NULL, *size = 0;
    }
    close_id(fapl);
    free(sorted), free(names);
    tnt__entries_free(es, n);
    return s;
}

tnt_status tnt__h5_save(tnt_model *m, const char *path, const tnt_save_opts *opts, const char *who,
                        const char *group, tnt__h5_extra_fn extra, void *ctx) {
    tnt_status s = TNT_OK;
    if (!m || !path || !*path) s = tnt__error(TNT_ERR_ARG, "%s: model or path is NULL", who);
    else s = tnt__model_setup_weights(m);
    bool writer = tnt__world_rank() == 0 || (opts && opts->save_all_devices);
    if (s == TNT_OK && writer) s = tnt__check_save_names(m, who, path);
    if (s == TNT_OK && writer && opts && opts->check_only) s = tnt__check_save_path(path, false, who);
    else if (s == TNT_OK && writer) {
        tnt__h5_quiet();
        void *image;
        size_t size;
        s = make_image(m, path, who, group, extra, ctx, &image, &size);
        if (s == TNT_OK) s = tnt__atomic_write_data(path, image, size);
        if (s != TNT_OK && !strstr(tnt_last_error(), path)) tnt__error_prefix(s, "%s %s: ", who, path);
        free(image);
    }
    /* every rank returns the same status (and waits for the file to be complete) */
    return tnt__agree(s, NULL, 0);
}

tnt_status tnt_save_weights(tnt_model *m, const char *path, const tnt_save_opts *opts) {
    tnt_status s = tnt__model_host_weights(m); /* the device's newer weights first */
    if (s != TNT_OK) return s;
    return tnt__h5_save(m, path, opts, "save_weights", NULL, NULL, NULL);
}

/* ---- loading --------------------------------------------------------------------------------- */

/* Where weight w of m goes in params and state (laid out as m->params and m->state). */
float *tnt__weight_destination(const tnt_model *m, const tnt__weight *w, float *params, float *state) {
    return w->trainable ? params + (w->value - m->params) : state + (w->value - m->state);
}

/* Reads the weights of file group gname for model entry e into params and state; keras1 and
 * theano: the file's weights are Keras 1's or Theano's (h5_legacy.c converts those that differ). */
static tnt_status read_entry(const tnt_model *m, hid_t root, const char *gname, const tnt__entry *e, const char *path,
                             float *params, float *state, bool keras1, bool theano) {
    tnt_status s = TNT_OK;
    char where[TNT_NAME_MAX + 64];
    const char *kind = e->layer ? "layer" : "nested model";
    snprintf(where, sizeof where, "%s: group \"%s\"", path, gname);
    hid_t g = H5Oexists_by_name(root, gname, H5P_DEFAULT) > 0 ? H5Gopen2(root, gname, H5P_DEFAULT) : -1;
    if (g < 0) return tnt__error(TNT_ERR_FORMAT, "load_weights %s: layer \"%s\" is listed but its group is missing", path, gname);
    strlist wn = {0};
    bool found;
    s = read_names(g, "weight_names", where, &wn, &found);
    bool legacy = s == TNT_OK && tnt__h5_legacy_applies(e, keras1, theano);
    if (legacy) s = tnt__h5_legacy_read_entry(m, g, gname, wn.s, wn.n, e, keras1, theano, path, params, state);
    else if (s == TNT_OK && wn.n != e->n)
        s = tnt__error(TNT_ERR_SHAPE,
                       "load_weights %s: weight count mismatch for %s \"%s\" (\"%s\" in the file): the %s "
                       "has %d weight(s), the file %d",
                       path, kind, e->name, gname, kind, e->n, wn.n);
    for (int j = 0; !legacy && j < wn.n && s == TNT_OK; j++) {
        const tnt__weight *w = e->w[j];
        const char *lname = e->owner[j]->name;
        hid_t d = H5Oexists_by_name(g, wn.s[j], H5P_DEFAULT) > 0 ? H5Dopen2(g, wn.s[j], H5P_DEFAULT) : -1;
        if (d < 0) {
            s = tnt__error(TNT_ERR_FORMAT, "load_weights %s: layer \"%s\": weight \"%s\": dataset %s/%s is missing", path,
                           lname, w->name, gname, wn.s[j]);
            break;
        }
        hid_t space = H5Dget_space(d), type = H5Dget_type(d);
        int nd = space >= 0 ? H5Sget_simple_extent_ndims(space) : -1;
        hsize_t dims[32];
        H5T_class_t cls = type >= 0 ? H5Tget_class(type) : H5T_NO_CLASS;
        if (nd < 0 || nd > 32 || H5Sget_simple_extent_dims(space, dims, NULL) < 0) {
            s = tnt__error(TNT_ERR_FORMAT, "load_weights %s: dataset %s/%s is unreadable", path, gname, wn.s[j]);
        } else if ((cls != H5T_FLOAT && cls != H5T_INTEGER) || H5Tget_size(type) > 8) {
            s = tnt__error(TNT_ERR_FORMAT, "load_weights %s: dataset %s/%s is not numeric (a float or integer of at "
                           "most 8 bytes)", path, gname, wn.s[j]);
        } else {
            bool same = nd == w->shape.ndim;
            for (int k = 0; same && k < nd; k++) same = (int64_t)dims[k] == w->shape.dim[k];
            if (!same) {
                char fs[256], ms[256];
                tnt_shape file_shape = {.ndim = nd > TNT_MAX_DIMS ? TNT_MAX_DIMS : nd};
                for (int k = 0; k < file_shape.ndim; k++) file_shape.dim[k] = (int64_t)dims[k];
                shape_str(&file_shape, fs, sizeof fs);
                shape_str(&w->shape, ms, sizeof ms);
                s = tnt__error(TNT_ERR_SHAPE,
                               "load_weights %s: shape mismatch in layer \"%s\" for weight \"%s\" (%s in the file): "
                               "the file has shape %s%s, the model %s",
                               path, lname, w->name, wn.s[j], fs, nd > TNT_MAX_DIMS ? " (more dims)" : "", ms);
            } else {
                if (tnt_shape_numel(w->shape) &&
                    tnt__h5_dread(d, H5T_NATIVE_FLOAT, tnt__weight_destination(m, w, params, state)) < 0)
                    s = tnt__error(TNT_ERR_FORMAT, "load_weights %s: cannot read dataset %s/%s (%s)", path, gname,
                                   wn.s[j], tnt__h5_read_failure());
            }
        }
        close_id(type), close_id(space), close_id(d);
    }
    strlist_free(&wn);
    close_id(g);
    return s;
}

tnt_status tnt__h5_open(const char *who, const char *path, hid_t *f) {
    tnt__h5_quiet();
    *f = -1;
    if (access(path, R_OK) != 0) return tnt__error(TNT_ERR_IO, "%s %s: %s", who, path, strerror(errno));
    htri_t is = H5Fis_hdf5(path);
    if (is <= 0)
        return tnt__error(TNT_ERR_FORMAT, "%s %s: %s", who, path,
                          is == 0 ? "not an HDF5 file" : "unreadable as HDF5 (truncated or corrupt file?)");
    *f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (*f < 0) return tnt__error(TNT_ERR_FORMAT, "%s %s: cannot open the HDF5 file (truncated or corrupt?)", who, path);
    return TNT_OK;
}

tnt_status tnt__h5_read_weights(tnt_model *m, const char *path, bool by_name, float *params, float *state) {
    hid_t f, root = -1;
    tnt_status s = tnt__h5_open("load_weights", path, &f);
    if (s != TNT_OK) return s;
    if (tnt__keras3_is_layout(f)) { /* model.save_weights("w.weights.h5") of Keras 3 */
        char where[4096];
        snprintf(where, sizeof where, "load_weights %s", path);
        s = tnt__keras3_read_weights(m, f, where, params, state);
        H5Fclose(f);
        return s;
    }
    strlist names = {0}, weighted = {0};
    tnt__entry *es = NULL;
    int n_es = 0;
    if ((s = tnt__entries(m, -1, &es, &n_es)) != TNT_OK) goto done;
    /* a full-model file (model.save("m.h5")) keeps the weights in model_weights */
    if (H5Aexists(f, "layer_names") <= 0 && H5Aexists(f, "layer_names0") <= 0 &&
        H5Lexists(f, "model_weights", H5P_DEFAULT) > 0)
        root = H5Gopen2(f, "model_weights", H5P_DEFAULT);
    else root = H5Gopen2(f, "/", H5P_DEFAULT);
    if (root < 0) {
        s = tnt__error(TNT_ERR_FORMAT, "load_weights %s: cannot open the root group", path);
        goto done;
    }
    bool found;
    s = read_names(root, "layer_names", path, &names, &found);
    if (s == TNT_OK && !found)
        s = tnt__error(TNT_ERR_FORMAT, "load_weights %s: no layer_names attribute: not a Keras 2 HDF5 weights file", path);
    if (s != TNT_OK) goto done;
    /* Keras 2 and 3 write keras_version and backend beside layer_names; Keras 1 neither (Keras 2
     * then converts Keras 1 weights, and Theano's convolution kernels whatever the version) */
    strlist backend = {0};
    bool keras1 = H5Aexists(root, "keras_version") <= 0, theano = false;
    if (H5Aexists(root, "backend") > 0 && read_names(root, "backend", path, &backend, &found) == TNT_OK)
        theano = backend.n == 1 && !strcmp(backend.s[0], "theano");
    strlist_free(&backend);

    if (!by_name) {
        /* Keras: the file's layers with weight names against the model's layers with weights */
        for (int i = 0; i < names.n && s == TNT_OK; i++) {
            hid_t g = H5Lexists(root, names.s[i], H5P_DEFAULT) > 0 ? H5Gopen2(root, names.s[i], H5P_DEFAULT) : -1;
            if (g < 0) {
                s = tnt__error(TNT_ERR_FORMAT, "load_weights %s: layer \"%s\" is listed but its group is missing", path, names.s[i]);
                break;
            }
            strlist wn = {0};
            char where[TNT_NAME_MAX + 64];
            snprintf(where, sizeof where, "%s: group \"%s\"", path, names.s[i]);
            s = read_names(g, "weight_names", where, &wn, &found);
            if (s == TNT_OK && wn.n > 0) s = strlist_push(&weighted, names.s[i], strlen(names.s[i]));
            strlist_free(&wn);
            close_id(g);
        }
        if (s != TNT_OK) goto done;
        int n_model = 0;
        for (int i = 0; i < n_es; i++) n_model += es[i].n > 0;
        if (n_model != weighted.n) {
            s = tnt__error(TNT_ERR_SHAPE,
                           "load_weights %s: layer count mismatch: the model has %d layer(s) with weights, the file %d",
                           path, n_model, weighted.n);
            goto done;
        }
        int k = 0;
        for (int i = 0; i < n_es && s == TNT_OK; i++)
            if (es[i].n > 0) s = read_entry(m, root, weighted.s[k++], &es[i], path, params, state, keras1, theano);
    } else {
        for (int i = 0; i < names.n && s == TNT_OK; i++) {
            const tnt__entry *e = NULL;
            for (int j = 0; j < n_es && !e; j++)
                if (strcmp(es[j].name, names.s[i]) == 0) e = &es[j];
            if (!e) continue; /* not in the model: ignored */
            s = read_entry(m, root, names.s[i], e, path, params, state, keras1, theano);
        }
    }
done:
    tnt__entries_free(es, n_es);
    strlist_free(&names), strlist_free(&weighted);
    close_id(root);
    H5Fclose(f);
    return s;
}

/* ---- the load, parsed in a child process (h5_guard.c) ---------------------------------------- */

typedef struct weights_job {
    tnt_model *m;
    const char *path;
    bool by_name;
} weights_job;

/* In the child: the weights into the answer, laid out as params then state. (The child has no
 * copy of the model's buffers: core's tnt__alloc leaves them out of fork.) */
static tnt_status parse_weights(void *ctx, tnt__h5_answer *a) {
    weights_job *j = ctx;
    float *params = (float *)a->data;
    a->len = (size_t)(j->m->n_params + j->m->n_state) * sizeof(float);
    return tnt__h5_read_weights(j->m, j->path, j->by_name, params, params + j->m->n_params);
}

tnt_status tnt_load_weights(tnt_model *m, const char *path, bool by_name) {
    if (!m || !path || !*path) return tnt__error(TNT_ERR_ARG, "load_weights: model or path is NULL");
    tnt_status s = tnt__model_setup_weights(m);
    if (s == TNT_OK) s = tnt__model_host_written(m); /* uploaded again before the next device pass */
    if (s != TNT_OK) return s;
    size_t np = (size_t)m->n_params * sizeof(float), ns = (size_t)m->n_state * sizeof(float);
    tnt__h5_answer a;
    if ((s = tnt__h5_answer_new(&a, np + ns, true, "load_weights", path)) != TNT_OK) return s;
    if (by_name) { /* a load in order reads every weight; one by name keeps the others */
        memcpy(a.data, m->params, np);
        memcpy(a.data + np, m->state, ns);
    }
    s = tnt__h5_isolated("load_weights", path, parse_weights, &(weights_job){m, path, by_name}, &a);
    if (s == TNT_OK && a.len != np + ns) s = tnt__error(TNT_ERR_FORMAT, "load_weights %s: the reader handed back %zu "
                                                        "bytes of weights, not %zu", path, a.len, np + ns);
    if (s == TNT_OK) { /* all read and checked: only now the model changes */
        memcpy(m->params, a.data, np);
        memcpy(m->state, a.data + np, ns);
        /* weights_synced is left as it is: every rank loads the same file (a flag set on some
         * ranks only would make the next distributed fit broadcast on those alone) */
    }
    tnt__h5_answer_free(&a);
    return s;
}

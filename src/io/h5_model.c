/* h5_model.c: Keras 2 whole-model HDF5 files (model.save("m.h5") / keras.models.load_model), as
 * keras/src/saving/legacy/hdf5_format.py save_model_to_hdf5 writes them:
 *   root attributes   model_config     the architecture (tnt_model_to_json), a scalar string
 *                     training_config  {"loss": ..., "metrics": [...], "weighted_metrics": null,
 *                                       "loss_weights": null or [...], "optimizer_config":
 *                                       {"class_name": "Adam", "config": {...}}} (compiled models
 *                                       only; compile_config.c makes and reads it)
 *                     keras_version, backend
 *   /model_weights    the weights layout of tnt_save_weights (h5_weights.c)
 *   /optimizer_weights  attribute weight_names, the optimizer's variables() in Keras 2.11+ order:
 *                     "iteration:0" (int64 scalar: the optimizer creates it first), then the slot
 *                     variables as build() creates them, named "<Opt>/<slot>/<layer>/<weight>:0"
 *                     (add_variable_from_reference under the name scope of the optimizer's name).
 *                     Adam, Adadelta, Adamax and Nadam create their two slots per variable in one
 *                     loop (m/kernel, v/kernel, m/bias, ...); Adam's vhat and RMSprop's slots
 *                     come one kind after another (velocity/..., then momentum/..., ...).
 * The loss is written as its name when compiled with no options, else as Keras's loss class
 * ({"class_name": "SparseCategoricalCrossentropy", "config": {...}}); metrics as the names given
 * to compile. A learning-rate schedule is not stored: the config holds the rate for the next step
 * (a loaded model trains on with that constant rate). Keras creates SGD's "m" slot even without
 * momentum; we have no such slot, so such a file lists iteration:0 only (Keras's
 * load_model then warns that the optimizer weights do not match and starts it afresh). */
#include "io/h5.h"
#include "io/keras_io.h"
#include "layers/keras_config.h"

#include "comm/comm.h"
#include "model/model.h"
#include "model/device.h"
#include "objectives/loss.h"
#include "optimizers/optimizer.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#define TNT__KERAS_VERSION "2.15.0" /* as h5_weights.c writes */

static void free_strs(char **v, int n) {
    for (int i = 0; i < n; i++) free(v[i]);
    free(v);
}

/* ---- the optimizer's variables ---------------------------------------------------------------- */

/* The model's trainable weights in Keras's order (model.trainable_weights: layer by layer in
 * order, each layer's weights in its order). out may be NULL (count only). */
static int trainable_weights(tnt_model *m, tnt__weight **out, tnt_layer **owner) {
    int n = 0;
    for (int i = 0; i < m->n_layers; i++)
        for (int j = 0; j < m->layers[i]->n_weights; j++)
            if (m->layers[i]->weights[j].trainable) {
                if (out) out[n] = &m->layers[i]->weights[j], owner[n] = m->layers[i];
                n++;
            }
    return n;
}

/* Entry e (0-based, after iteration:0) of the optimizer's slot variables in Keras's creation
 * order: slot *k of weight *v. ns slots, nw weights. */
static void slot_entry(const tnt_optimizer *o, int ns, int nw, int e, int *k, int *v) {
    /* the first `inter` slots are created together per weight, the others kind after kind */
    int inter = (o->kind == TNT__OPT_ADAM || o->kind == TNT__OPT_ADADELTA || o->kind == TNT__OPT_ADAMAX ||
                 o->kind == TNT__OPT_NADAM)
                    ? TNT_MIN(ns, 2)
                    : TNT_MIN(ns, 1);
    if (e < inter * nw) {
        *v = e / inter, *k = e % inter;
    } else {
        e -= inter * nw;
        *k = inter + e / nw, *v = e % nw;
    }
}

typedef struct opt_layout {
    int ns, nw, n; /* slots, weights, names (1 + ns * nw) */
    tnt__weight **w;
    tnt_layer **owner;
    char **names;
} opt_layout;

static void layout_free(opt_layout *L) {
    free(L->w), free(L->owner);
    if (L->names) free_strs(L->names, L->n);
    *L = (opt_layout){0};
}

static tnt_status layout_make(tnt_model *m, opt_layout *L) {
    tnt_optimizer *o = m->optimizer;
    *L = (opt_layout){0};
    L->ns = tnt__optimizer_num_slots(o);
    L->nw = trainable_weights(m, NULL, NULL);
    L->n = 1 + L->ns * L->nw;
    L->w = calloc((size_t)L->nw + 1, sizeof *L->w);
    L->owner = calloc((size_t)L->nw + 1, sizeof *L->owner);
    L->names = calloc((size_t)L->n, sizeof *L->names);
    if (!L->w || !L->owner || !L->names) goto nomem;
    trainable_weights(m, L->w, L->owner);
    if (!(L->names[0] = strdup("iteration:0"))) goto nomem;
    for (int e = 0; e < L->n - 1; e++) {
        int k, v;
        slot_entry(o, L->ns, L->nw, e, &k, &v);
        char scope[512]; /* a nested model's weights: "Adam/m/inner/dense/kernel:0" */
        tnt__scope_path(m, tnt__layer_scope(m, L->owner[v]), scope, sizeof scope);
        size_t len = strlen(o->name) + strlen(tnt__optimizer_slot_name(o, k)) + strlen(scope) + strlen(L->owner[v]->name) +
                     strlen(L->w[v]->name) + 8;
        if (!(L->names[1 + e] = malloc(len))) goto nomem;
        snprintf(L->names[1 + e], len, "%s/%s/%s%s%s/%s:0", o->name, tnt__optimizer_slot_name(o, k), scope,
                 *scope ? "/" : "", L->owner[v]->name, L->w[v]->name);
    }
    return TNT_OK;
nomem:
    layout_free(L);
    return tnt__error(TNT_ERR_NOMEM, "out of memory");
}

/* The slice of slot k that belongs to weight w. */
static float *slot_slice(tnt_model *m, int k, const tnt__weight *w) {
    float *base = tnt__optimizer_slot(m->optimizer, k);
    return base ? base + (w->value - m->params) : NULL;
}

/* ---- saving ------------------------------------------------------------------------------------ */

static tnt_status write_optimizer(tnt_model *m, hid_t f, const char *path) {
    opt_layout L;
    tnt_status s = layout_make(m, &L);
    if (s != TNT_OK) return s;
    hid_t g = H5Gcreate2(f, "optimizer_weights", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), lcpl = H5Pcreate(H5P_LINK_CREATE);
    if (g < 0 || lcpl < 0) s = tnt__error(TNT_ERR_IO, "save_model %s: cannot create group optimizer_weights", path);
    if (s == TNT_OK) s = tnt__h5_write_names(g, "weight_names", L.names, L.n, path);
    if (s == TNT_OK) {
        H5Pset_create_intermediate_group(lcpl, 1);
        hid_t d = tnt__h5_create_dataset(g, L.names[0], H5T_STD_I64LE, &(tnt_shape){.ndim = 0}, lcpl);
        int64_t it = m->optimizer->iterations;
        if (d < 0 || H5Dwrite(d, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, &it) < 0)
            s = tnt__error(TNT_ERR_IO, "save_model %s: cannot write optimizer_weights/%s", path, L.names[0]);
        if (d >= 0) H5Dclose(d);
    }
    for (int e = 0; e < L.n - 1 && s == TNT_OK; e++) {
        int k, v;
        slot_entry(m->optimizer, L.ns, L.nw, e, &k, &v);
        const tnt__weight *w = L.w[v];
        const float *data = slot_slice(m, k, w);
        if (!data || w->value < m->params || w->value >= m->params + m->n_params) {
            s = tnt__error(TNT_ERR_STATE, "save_model %s: the optimizer's slots are not allocated for weight %s/%s",
                           path, L.owner[v]->name, w->name);
            break;
        }
        hid_t d = tnt__h5_create_dataset(g, L.names[1 + e], H5T_IEEE_F32LE, &w->shape, lcpl);
        if (d < 0 || H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0)
            s = tnt__error(TNT_ERR_IO, "save_model %s: cannot write optimizer_weights/%s", path, L.names[1 + e]);
        if (d >= 0) H5Dclose(d);
    }
    if (lcpl >= 0) H5Pclose(lcpl);
    if (g >= 0) H5Gclose(g);
    layout_free(&L);
    return s;
}

static tnt_status fill_model(tnt_model *m, hid_t f, const char *path, void *ctx) {
    (void)ctx;
    char *json = NULL;
    tnt_status s = tnt_model_to_json(m, &json);
    if (s != TNT_OK) return tnt__error_prefix(s, "save_model %s: model_config: ", path);
    s = tnt__h5_write_scalar_str(f, "model_config", json, path);
    free(json);
    if (s == TNT_OK) s = tnt__h5_write_scalar_str(f, "keras_version", TNT__KERAS_VERSION, path);
    if (s == TNT_OK) s = tnt__h5_write_scalar_str(f, "backend", "tensorflow", path);
    if (s != TNT_OK || !m->compiled || !m->optimizer) return s;
    cJSON *tc;
    if ((s = tnt__training_config(m, &tc)) != TNT_OK) return s;
    char *text = cJSON_PrintUnformatted(tc);
    cJSON_Delete(tc);
    s = text ? tnt__h5_write_scalar_str(f, "training_config", text, path) : tnt__error(TNT_ERR_NOMEM, "training_config: out of memory");
    free(text);
    if (s == TNT_OK) s = write_optimizer(m, f, path);
    return s;
}

tnt_status tnt_save_model(tnt_model *m, const char *path, const tnt_save_opts *opts) {
    size_t n = path ? strlen(path) : 0;
    tnt_status s = tnt__model_host_weights(m); /* the device's newer weights first */
    if (s != TNT_OK) return s;
    if (m && n > 6 && !strcmp(path + n - 6, ".keras")) return tnt__keras_zip_save(m, path, opts);
    return tnt__h5_save(m, path, opts, "save_model", "model_weights", fill_model, NULL);
}

/* ---- loading ----------------------------------------------------------------------------------- */

/* The single string of a scalar string attribute; NULL with an error when absent. */
static char *read_str(hid_t f, const char *name, const char *path) {
    if (H5Aexists(f, name) <= 0) {
        tnt__error(TNT_ERR_FORMAT, "load_model %s: no %s attribute%s", path, name,
                   strcmp(name, "model_config") == 0
                       ? ": not a Keras whole-model file (a weights file? use tnt_load_weights)"
                       : "");
        return NULL;
    }
    char **v;
    int n;
    bool found;
    if (tnt__h5_read_strs(f, name, path, &v, &n, &found) != TNT_OK) {
        tnt__error_prefix(TNT_ERR_FORMAT, "load_model: ");
        return NULL;
    }
    if (n != 1) {
        free_strs(v, n);
        tnt__error(TNT_ERR_FORMAT, "load_model %s: attribute %s holds %d strings (expected one)", path, name, n);
        return NULL;
    }
    char *s = v[0];
    free(v);
    return s;
}

/* Reads the iteration count and the slots of optimizer_weights into *it and slots (slot k at
 * slots + k * n_params, laid out as m->params); *it = -1 when the file has none. */
static tnt_status read_optimizer(tnt_model *m, hid_t f, const char *path, int64_t *it, float *slots) {
    if (H5Lexists(f, "optimizer_weights", H5P_DEFAULT) <= 0) {
        tnt_log(TNT_LOG_WARNING, "load_model %s: no optimizer_weights: the optimizer starts afresh", path);
        *it = -1; /* the caller leaves the optimizer as compiled */
        return TNT_OK;
    }
    opt_layout L;
    tnt_status s = layout_make(m, &L);
    if (s != TNT_OK) return s;
    hid_t g = H5Gopen2(f, "optimizer_weights", H5P_DEFAULT);
    char **names = NULL;
    int n = 0;
    bool found = false;
    if (g < 0) s = tnt__error(TNT_ERR_FORMAT, "load_model %s: cannot open group optimizer_weights", path);
    if (s == TNT_OK) s = tnt__h5_read_strs(g, "weight_names", path, &names, &n, &found);
    if (s == TNT_OK && !found) s = tnt__error(TNT_ERR_FORMAT, "load_model %s: optimizer_weights has no weight_names", path);
    if (s == TNT_OK && n > 0 && strcmp(names[0], "iteration:0") != 0) {
        /* Keras <= 2.10 named the optimizer's variables otherwise ("Adam/iter:0" and
         * "Adam/dense/kernel/m:0" in tf.keras 2.3-2.10, "training/Adam/Variable_3:0" before) and
         * kept other slots (RMSprop "rms"); Keras's own load_model then starts the optimizer
         * afresh with a warning, and so does this */
        tnt_log(TNT_LOG_WARNING,
                "load_model %s: optimizer_weights in the layout of Keras <= 2.10 (\"%.64s\", ...): the %s "
                "optimizer starts afresh, as Keras's load_model does",
                path, names[0], m->optimizer->name);
        *it = -1;
        free_strs(names, n);
        H5Gclose(g);
        layout_free(&L);
        return TNT_OK;
    }
    if (s == TNT_OK && n != L.n)
        s = tnt__error(TNT_ERR_SHAPE,
                       "load_model %s: optimizer_weights holds %d variable(s), the %s optimizer of this model %d "
                       "(iteration and %d slot(s) for %d weight(s))",
                       path, n, m->optimizer->name, L.n, L.ns, L.nw);
    for (int i = 0; i < n && s == TNT_OK; i++)
        if (strcmp(names[i], L.names[i]) != 0)
            s = tnt__error(TNT_ERR_FORMAT, "load_model %s: optimizer_weights: variable %d is \"%s\", expected \"%s\"", path,
                           i, names[i], L.names[i]);
    for (int i = 0; i < L.n && s == TNT_OK; i++) {
        hid_t d = H5Oexists_by_name(g, L.names[i], H5P_DEFAULT) > 0 ? H5Dopen2(g, L.names[i], H5P_DEFAULT) : -1;
        if (d < 0) {
            s = tnt__error(TNT_ERR_FORMAT, "load_model %s: dataset optimizer_weights/%s is missing", path, L.names[i]);
            break;
        }
        hid_t space = H5Dget_space(d);
        int nd = space >= 0 ? H5Sget_simple_extent_ndims(space) : -1;
        hsize_t dims[32];
        if (nd < 0 || nd > 32 || H5Sget_simple_extent_dims(space, dims, NULL) < 0) {
            s = tnt__error(TNT_ERR_FORMAT, "load_model %s: dataset optimizer_weights/%s is unreadable", path, L.names[i]);
        } else if (i == 0) {
            if (nd != 0) s = tnt__error(TNT_ERR_SHAPE, "load_model %s: optimizer_weights/%s is not a scalar", path, L.names[0]);
            else if (tnt__h5_dread(d, H5T_NATIVE_INT64, it) < 0 || *it < 0)
                s = tnt__error(TNT_ERR_FORMAT, "load_model %s: cannot read optimizer_weights/%s (%s)", path, L.names[0],
                               *it < 0 ? "a negative count" : tnt__h5_read_failure());
        } else {
            int k, v;
            slot_entry(m->optimizer, L.ns, L.nw, i - 1, &k, &v);
            const tnt__weight *w = L.w[v];
            bool same = nd == w->shape.ndim;
            for (int j = 0; same && j < nd; j++) same = (int64_t)dims[j] == w->shape.dim[j];
            if (!same) {
                char fs[160] = "(", ms[96];
                for (int j = 0; j < nd && j < 8; j++)
                    snprintf(fs + strlen(fs), sizeof fs - strlen(fs), "%s%lld", j ? ", " : "", (long long)dims[j]);
                strcat(fs, ")");
                s = tnt__error(TNT_ERR_SHAPE, "load_model %s: shape mismatch for optimizer_weights/%s: the file has %s, the weight %s",
                               path, L.names[i], fs, tnt_shape_str(w->shape, ms, sizeof ms));
            } else if (tnt_shape_numel(w->shape) > 0 &&
                       tnt__h5_dread(d, H5T_NATIVE_FLOAT,
                                     slots + (size_t)k * (size_t)m->n_params + (w->value - m->params)) < 0) {
                s = tnt__error(TNT_ERR_FORMAT, "load_model %s: cannot read optimizer_weights/%s (%s)", path, L.names[i],
                               tnt__h5_read_failure());
            }
        }
        if (space >= 0) H5Sclose(space);
        H5Dclose(d);
    }
    if (names) free_strs(names, n);
    if (g >= 0) H5Gclose(g);
    layout_free(&L);
    return s;
}

/* ---- Keras 3 optimizer variables (.keras) -------------------------------------------------------- */

/* Keras 3's optimizer.variables: iterations (int64), learning_rate (float32), then the slots in
 * the order of Keras 2.11+ (slot_entry), stored as <group>/vars/<index>. */
tnt_status tnt__keras3_write_optimizer(tnt_model *m, hid_t group, const char *path) {
    opt_layout L;
    tnt_status s = layout_make(m, &L);
    if (s != TNT_OK) return s;
    hid_t g = H5Gcreate2(group, "vars", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    int64_t it = m->optimizer->iterations;
    float lr = tnt_optimizer_get_lr(m->optimizer);
    const tnt_shape scalar = {0};
    if (g < 0) s = tnt__error(TNT_ERR_IO, "%s: cannot create group optimizer/vars", path);
    for (int e = -2; e < L.n - 1 && s == TNT_OK; e++) {
        int k = 0, v = 0;
        if (e >= 0) slot_entry(m->optimizer, L.ns, L.nw, e, &k, &v);
        const float *data = e >= 0 ? slot_slice(m, k, L.w[v]) : NULL;
        char name[16];
        snprintf(name, sizeof name, "%d", 2 + e);
        hid_t d = tnt__h5_create_dataset(g, name, e == -2 ? H5T_STD_I64LE : H5T_IEEE_F32LE, e >= 0 ? &L.w[v]->shape : &scalar,
                                         H5P_DEFAULT);
        herr_t w = d < 0 || (e >= 0 && !data) ? -1
                   : e == -2                  ? H5Dwrite(d, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, &it)
                                              : H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, e >= 0 ? data : &lr);
        if (w < 0) s = tnt__error(TNT_ERR_IO, "%s: cannot write optimizer/vars/%s", path, name);
        if (d >= 0) H5Dclose(d);
    }
    if (g >= 0) H5Gclose(g);
    layout_free(&L);
    return s;
}

/* Reads dataset name of g into out (memory type mem) after checking its shape. */
static tnt_status read_exact(hid_t g, const char *name, hid_t mem, const tnt_shape *shape, void *out, const char *path) {
    hid_t d = H5Oexists_by_name(g, name, H5P_DEFAULT) > 0 ? H5Dopen2(g, name, H5P_DEFAULT) : -1;
    if (d < 0) return tnt__error(TNT_ERR_FORMAT, "%s: optimizer/vars/%s is missing", path, name);
    hid_t space = H5Dget_space(d);
    int nd = space >= 0 ? H5Sget_simple_extent_ndims(space) : -1;
    hsize_t dims[32];
    bool same = nd == shape->ndim && H5Sget_simple_extent_dims(space, dims, NULL) >= 0;
    for (int j = 0; same && j < nd; j++) same = (int64_t)dims[j] == shape->dim[j];
    char ms[96];
    tnt_status s = TNT_OK;
    if (!same)
        s = tnt__error(TNT_ERR_SHAPE, "%s: optimizer/vars/%s does not have the shape %s of its variable", path, name,
                       tnt_shape_str(*shape, ms, sizeof ms));
    else if (tnt_shape_numel(*shape) > 0 && tnt__h5_dread(d, mem, out) < 0)
        s = tnt__error(TNT_ERR_FORMAT, "%s: cannot read optimizer/vars/%s (%s)", path, name, tnt__h5_read_failure());
    if (space >= 0) H5Sclose(space);
    H5Dclose(d);
    return s;
}

tnt_status tnt__keras3_read_optimizer(tnt_model *m, hid_t group, const char *path, int64_t *it, float *lr, float *slots) {
    *it = -1;
    opt_layout L;
    tnt_status s = layout_make(m, &L);
    if (s != TNT_OK) return s;
    hid_t g = H5Lexists(group, "vars", H5P_DEFAULT) > 0 ? H5Gopen2(group, "vars", H5P_DEFAULT) : -1;
    H5G_info_t info = {0};
    if (g < 0 || H5Gget_info(g, &info) < 0 || (int)info.nlinks != L.n + 1) {
        /* as Keras's load_model: variables that do not match leave the optimizer fresh */
        tnt_log(TNT_LOG_WARNING, "%s: the file has %d optimizer variable(s), the %s optimizer here %d: the optimizer "
                "starts afresh", path, g < 0 ? 0 : (int)info.nlinks, m->optimizer->name, L.n + 1);
    } else {
        const tnt_shape scalar = {0};
        int64_t count = 0;
        s = read_exact(g, "0", H5T_NATIVE_INT64, &scalar, &count, path);
        if (s == TNT_OK) s = read_exact(g, "1", H5T_NATIVE_FLOAT, &scalar, lr, path);
        for (int e = 0; e < L.n - 1 && s == TNT_OK; e++) {
            int k, v;
            slot_entry(m->optimizer, L.ns, L.nw, e, &k, &v);
            char name[16];
            snprintf(name, sizeof name, "%d", 2 + e);
            s = read_exact(g, name, H5T_NATIVE_FLOAT, &L.w[v]->shape,
                           slots + (size_t)k * (size_t)m->n_params + (size_t)(L.w[v]->value - m->params), path);
        }
        if (s == TNT_OK && (count < 0 || !(*lr >= 0)))
            s = tnt__error(TNT_ERR_FORMAT, "%s: optimizer iterations %lld or learning rate %g out of range", path,
                           (long long)count, *lr);
        if (s == TNT_OK) *it = count;
    }
    if (g >= 0) H5Gclose(g);
    layout_free(&L);
    return s;
}

/* ---- the load, parsed in child processes (h5_guard.c) ----------------------------------------- */

typedef struct model_job {
    const char *path;
    bool compile, compiled;
    tnt_model *m;
} model_job;

/* In the child: model_config, then training_config when compiling and present, each with its
 * terminating NUL. */
static tnt_status parse_configs(void *ctx, tnt__h5_answer *a) {
    model_job *j = ctx;
    hid_t f;
    tnt_status s = tnt__h5_open("load_model", j->path, &f);
    if (s != TNT_OK) return s;
    char *mc = read_str(f, "model_config", j->path), *tc = NULL;
    if (!mc) s = TNT_ERR_FORMAT;
    if (s == TNT_OK && j->compile && H5Aexists(f, "training_config") > 0 && !(tc = read_str(f, "training_config", j->path)))
        s = TNT_ERR_FORMAT;
    H5Fclose(f);
    for (const char *str = mc; s == TNT_OK && str; str = str == mc ? tc : NULL) {
        size_t n = strlen(str) + 1;
        if (n > a->cap - a->len) s = tnt__error(TNT_ERR_FORMAT, "load_model %s: strings longer than the file", j->path);
        else memcpy(a->data + a->len, str, n), a->len += n;
    }
    free(mc);
    free(tc);
    return s;
}

static herr_t count_dataset(hid_t o, const char *name, const H5O_info_t *info, void *n) {
    (void)o, (void)name;
    if (info->type == H5O_TYPE_DATASET) ++*(int64_t *)n;
    return 0;
}

/* The number of datasets under model_weights (a model saved unbuilt has none). */
static tnt_status parse_weight_count(void *ctx, tnt__h5_answer *a) {
    model_job *j = ctx;
    hid_t f;
    tnt_status s = tnt__h5_open("load_model", j->path, &f);
    if (s != TNT_OK) return s;
    int64_t n = 0;
    hid_t g = H5Lexists(f, "model_weights", H5P_DEFAULT) > 0 ? H5Gopen2(f, "model_weights", H5P_DEFAULT) : -1;
    if (g >= 0 && H5Ovisit(g, H5_INDEX_NAME, H5_ITER_NATIVE, count_dataset, &n) < 0)
        s = tnt__error(TNT_ERR_FORMAT, "load_model %s: model_weights is unreadable", j->path);
    if (g >= 0) H5Gclose(g);
    H5Fclose(f);
    memcpy(a->data, &n, sizeof n), a->len = sizeof n;
    return s;
}

/* The answer of parse_state: the iteration count (first: 8-byte aligned), params, state, then
 * (compiled) the slots. */
static size_t state_bytes(const tnt_model *m, bool compiled) {
    size_t np = (size_t)m->n_params * sizeof(float), ns = (size_t)m->n_state * sizeof(float);
    return sizeof(int64_t) + np + ns + (compiled ? (size_t)tnt__optimizer_num_slots(m->optimizer) * np : 0);
}

static tnt_status parse_state(void *ctx, tnt__h5_answer *a) {
    model_job *j = ctx;
    tnt_model *m = j->m;
    int64_t *it = (int64_t *)a->data;
    float *params = (float *)(it + 1), *state = params + m->n_params;
    a->len = state_bytes(m, j->compiled);
    *it = -1;
    tnt_status s = tnt__h5_read_weights(m, j->path, false, params, state);
    if (s == TNT_OK && j->compiled) {
        hid_t f;
        s = tnt__h5_open("load_model", j->path, &f);
        if (s == TNT_OK) s = read_optimizer(m, f, j->path, it, state + m->n_state);
        if (f >= 0) H5Fclose(f);
    }
    return s;
}

tnt_model *tnt_load_model(const char *path, bool compile) {
    if (!path || !*path) {
        tnt__error(TNT_ERR_ARG, "load_model: path is NULL or empty");
        return NULL;
    }
    struct stat st;
    if (stat(path, &st) != 0) {
        tnt__error(TNT_ERR_IO, "load_model %s: %s", path, strerror(errno));
        return NULL;
    }
    switch (tnt__file_kind_of(path, "load_model")) {
    case TNT__FILE_ZIP: return tnt__keras_zip_load(path, compile);
    case TNT__FILE_HDF5: break;
    case TNT__FILE_JSON:
        tnt__error(TNT_ERR_FORMAT, "load_model %s: a JSON architecture without weights: read it with "
                   "tnt_model_from_json, then tnt_load_weights", path);
        return NULL;
    default: return NULL;
    }
    model_job j = {.path = path, .compile = compile};
    tnt_model *m = NULL;
    const char *tc = NULL;
    /* the strings come from the file: they cannot be longer than it */
    tnt__h5_answer cfg, a = {0};
    tnt_status s = tnt__h5_answer_new(&cfg, (size_t)st.st_size + 2, false, "load_model", path);
    if (s == TNT_OK) s = tnt__h5_isolated("load_model", path, parse_configs, &j, &cfg);
    size_t ml = s == TNT_OK ? strnlen(cfg.data, cfg.len) : 0;
    if (s == TNT_OK && (ml == cfg.len || (ml + 1 < cfg.len && cfg.data[cfg.len - 1])))
        s = tnt__error(TNT_ERR_FORMAT, "load_model %s: the reader handed back unterminated strings", path);
    if (s == TNT_OK && ml + 1 < cfg.len) tc = cfg.data + ml + 1;
    if (s == TNT_OK && !(m = tnt_model_from_json(cfg.data))) s = tnt__error_prefix(TNT_ERR_FORMAT, "load_model %s: model_config: ", path);
    if (s == TNT_OK && tc) {
        cJSON *config = cJSON_Parse(tc);
        s = cJSON_IsObject(config) ? tnt__compile_from_config(m, config, path)
                                   : tnt__error(TNT_ERR_FORMAT, "load_model %s: training_config is not a JSON object", path);
        cJSON_Delete(config);
    }
    if (s == TNT_OK && !m->has_input_shape) { /* a Sequential saved unbuilt (Keras builds it at its first call) */
        tnt__h5_answer w = {0};
        int64_t n = -1;
        if ((s = tnt__h5_answer_new(&w, sizeof n, false, "load_model", path)) == TNT_OK &&
            (s = tnt__h5_isolated("load_model", path, parse_weight_count, &j, &w)) == TNT_OK && w.len == sizeof n)
            memcpy(&n, w.data, sizeof n);
        if (w.data) tnt__h5_answer_free(&w);
        if (s == TNT_OK && n != 0)
            s = tnt__error(TNT_ERR_FORMAT, "load_model %s: the model has no input shape, yet the file holds %lld weight "
                           "array(s)", path, (long long)n);
        if (s == TNT_OK) {
            tnt__h5_answer_free(&cfg);
            return m; /* unbuilt, without weights, as Keras loads it */
        }
    }
    if (s == TNT_OK) s = tnt__model_setup_weights(m);
    int slots = s == TNT_OK && tc ? tnt__optimizer_num_slots(m->optimizer) : 0;
    for (int k = 0; k < slots && s == TNT_OK; k++)
        if (!tnt__optimizer_slot(m->optimizer, k))
            s = tnt__error(TNT_ERR_STATE, "load_model %s: the optimizer's slots are not allocated", path);
    j.m = m, j.compiled = tc != NULL;
    if (s == TNT_OK) s = tnt__h5_answer_new(&a, state_bytes(m, j.compiled), true, "load_model", path);
    if (s == TNT_OK) {
        size_t np = (size_t)m->n_params * sizeof(float), ns = (size_t)m->n_state * sizeof(float);
        s = tnt__h5_isolated("load_model", path, parse_state, &j, &a);
        if (s == TNT_OK && a.len != state_bytes(m, j.compiled))
            s = tnt__error(TNT_ERR_FORMAT, "load_model %s: the reader handed back %zu bytes of weights and slots", path, a.len);
        int64_t it;
        memcpy(&it, a.data, sizeof it);
        const char *weights = a.data + sizeof it;
        if (s == TNT_OK) {
            memcpy(m->params, weights, np);
            memcpy(m->state, weights + np, ns);
        }
        if (s == TNT_OK && it >= 0) { /* -1: the file has no optimizer state */
            for (int k = 0; k < slots; k++)
                memcpy(tnt__optimizer_slot(m->optimizer, k), weights + np + ns + (size_t)k * np, np);
            s = tnt__optimizer_set_iterations(m->optimizer, it);
        }
    }
    tnt__h5_answer_free(&cfg), tnt__h5_answer_free(&a);
    if (s != TNT_OK) {
        tnt_model_free(m);
        return NULL;
    }
    return m;
}

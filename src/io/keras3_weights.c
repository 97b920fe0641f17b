/* keras3_weights.c: the Keras 3 weights layout, as keras/src/saving/saving_lib.py writes it
 * (model.weights.h5 inside a .keras zip, and model.save_weights("w.weights.h5")):
 *   /vars                          the model's own variables (none here)
 *   /layers/<name>/vars/<i>        each layer of model.layers, <name> its class name in snake case
 *                                  ("Conv2D" -> "conv2d"), made unique among its siblings in
 *                                  layer order with _1, _2, ... ("dense", "dense_1"); <i> counts
 *                                  the layer's own variables, trainable first
 *   recurrent layers keep theirs in their cell (layers/lstm/cell/vars/0), Bidirectional in its
 *   forward_layer and backward_layer (layers/bidirectional/forward_layer/cell/vars/0),
 *   TimeDistributed in its layer (layers/time_distributed/layer/vars/0).
 * Paths are made from classes, not layer names: Keras does not rely on names, which differ from
 * one instance of a model to the next. */
#include "io/keras_io.h"
#include "layers/keras_config.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#define PATH_MAX_LEN 512

/* A root link named "layers\\..." (a file written on Windows, see spelled), found by iteration. */
static herr_t note_backslash_layers(hid_t g, const char *name, const H5L_info_t *info, void *found) {
    (void)g, (void)info;
    if (!strncmp(name, "layers\\", 7)) *(bool *)found = true;
    return *(bool *)found ? 1 : 0;
}

bool tnt__keras3_is_layout(hid_t f) {
    if (H5Aexists(f, "layer_names") > 0 || H5Aexists(f, "layer_names0") > 0) return false;
    if (H5Lexists(f, "layers", H5P_DEFAULT) > 0 || H5Lexists(f, "_layer_checkpoint_dependencies", H5P_DEFAULT) > 0)
        return true;
    bool found = false;
    hsize_t idx = 0;
    H5Literate(f, H5_INDEX_NAME, H5_ITER_NATIVE, &idx, note_backslash_layers, &found);
    return found;
}

/* An object path exists in f (every group on the way too). */
static bool exists(hid_t f, const char *p) { return H5Oexists_by_name(f, p, H5P_DEFAULT) > 0; }

/* The spelling of layer path inner (+ rest) that f uses: Keras 3's "layers/dense" + "/vars"; tf-keras
 * 2.13-2.14's .keras files named a model's layer list "_layer_checkpoint_dependencies"; tf-keras on
 * Windows joined the layer path with backslashes ("layers\\dense" as one group name, then
 * "/vars"), which Keras reads back there. The canonical spelling when none exists (for errors). */
static const char *spelled(hid_t f, const char *inner, const char *rest, char *out, size_t size) {
    for (int variant = 0; variant < 4; variant++) {
        char buf[2 * PATH_MAX_LEN] = "";
        const char *c = inner;
        while (*c) { /* component by component */
            size_t n = strcspn(c, "/");
            bool layers = n == 6 && !strncmp(c, "layers", 6);
            snprintf(buf + strlen(buf), sizeof buf - strlen(buf), "%s%.*s", *buf ? (variant & 2 ? "\\" : "/") : "",
                     (int)(layers && (variant & 1) ? 30 : n), layers && (variant & 1) ? "_layer_checkpoint_dependencies" : c);
            c += n + (c[n] == '/');
        }
        snprintf(out, size, "%s%s", buf, rest);
        if (exists(f, out)) return out;
    }
    snprintf(out, size, "%s%s", inner, rest);
    return out;
}

/* Keras's naming.to_snake_case: drop non-word characters, then "_" before each capital that
 * starts a lowercase run ("(.)([A-Z][a-z]+)"), then between a lowercase letter and a capital
 * ("([a-z])([A-Z])"), then lowercase: "BatchNormalization" -> "batch_normalization", "ReLU" ->
 * "re_lu", "Conv2DTranspose" -> "conv2d_transpose". */
static void snake_case(const char *cls, char *out, size_t size) {
    char a[PATH_MAX_LEN], b[PATH_MAX_LEN];
    size_t n = 0, o = 0;
    for (const char *c = cls; *c && n + 1 < sizeof a; c++)
        if (isalnum((unsigned char)*c) || *c == '_') a[n++] = *c;
    a[n] = '\0';
    for (size_t i = 0; i < n && o + 2 < sizeof b;) {
        if (i + 2 < n && isupper((unsigned char)a[i + 1]) && islower((unsigned char)a[i + 2])) {
            b[o++] = a[i++], b[o++] = '_', b[o++] = a[i++];
            while (i < n && islower((unsigned char)a[i]) && o + 1 < sizeof b) b[o++] = a[i++];
        } else {
            b[o++] = a[i++];
        }
    }
    b[o] = '\0';
    o = 0;
    for (size_t i = 0; b[i] && o + 2 < size;) {
        if (islower((unsigned char)b[i]) && isupper((unsigned char)b[i + 1])) {
            out[o++] = b[i++], out[o++] = '_', out[o++] = (char)tolower((unsigned char)b[i++]);
        } else {
            out[o++] = (char)tolower((unsigned char)b[i++]);
        }
    }
    out[o] = '\0';
}

static bool is_recurrent(const char *cls) {
    return !strcmp(cls, "LSTM") || !strcmp(cls, "GRU") || !strcmp(cls, "SimpleRNN") || !strcmp(cls, "CuDNNLSTM") ||
           !strcmp(cls, "CuDNNGRU");
}

/* The class of the layer a wrapper (Bidirectional, TimeDistributed) holds, from its config. */
static tnt_status wrapped_class(const tnt_layer *l, char *out, size_t size) {
    cJSON *c = cJSON_CreateObject();
    if (!c) return tnt__error(TNT_ERR_NOMEM, "out of memory");
    tnt_status s = l->ops->get_config ? l->ops->get_config(l, c) : TNT_OK;
    const cJSON *cls = tnt__kj_item(tnt__kj_item(c, "layer"), "class_name");
    if (s == TNT_OK && !cJSON_IsString(cls))
        s = tnt__error(TNT_ERR_STATE, "layer \"%s\" (%s): no inner layer class in its config", l->name, l->ops->class_name);
    if (s == TNT_OK) snprintf(out, size, "%s", cls->valuestring);
    cJSON_Delete(c);
    return s;
}

/* Group paths, relative to the layer's group, of the variables of layer l in save_own_variables
 * order (trainable first): sub[i] the group holding variable w[i] as vars/<idx[i]>. */
typedef struct layer_vars {
    int n;
    tnt__weight *w[TNT_MAX_LAYER_WEIGHTS];
    const char *sub[TNT_MAX_LAYER_WEIGHTS];
    int idx[TNT_MAX_LAYER_WEIGHTS];
} layer_vars;

static tnt_status layer_vars_of(tnt_layer *l, layer_vars *v) {
    *v = (layer_vars){0};
    for (int pass = 0; pass < 2; pass++)
        for (int j = 0; j < l->n_weights; j++)
            if (l->weights[j].trainable == (pass == 0)) v->w[v->n++] = &l->weights[j];
    const char *cls = l->ops->class_name;
    bool bidi = !strcmp(cls, "Bidirectional"), td = !strcmp(cls, "TimeDistributed");
    char inner[TNT_NAME_MAX] = "";
    if (bidi || td) {
        tnt_status s = wrapped_class(l, inner, sizeof inner);
        if (s != TNT_OK) return s;
    }
    bool cell = is_recurrent(bidi || td ? inner : cls);
    for (int i = 0; i < v->n; i++) {
        bool backward = bidi && i >= v->n / 2;
        v->idx[i] = backward ? i - v->n / 2 : i;
        v->sub[i] = bidi ? (backward ? (cell ? "backward_layer/cell" : "backward_layer")
                                     : (cell ? "forward_layer/cell" : "forward_layer"))
                  : td   ? (cell ? "layer/cell" : "layer")
                         : (cell ? "cell" : "");
    }
    return TNT_OK;
}

static tnt_status empty_vars(hid_t f, const char *at, const char *path);

/* The group paths of the entries of scope s of m (-1: m itself) under prefix ("" or
 * "layers/functional/"): each listed layer's goes to paths[its index in m->layers], each nested
 * model's groups are made on the way (an empty vars group, as Keras makes for every saveable). */
static tnt_status scope_paths(const tnt_model *m, int sc, const char *prefix, char (*paths)[PATH_MAX_LEN],
                              hid_t f, const char *path) {
    int n = tnt__scope_entries(m, sc, tnt__keras_listed, NULL, NULL, 0);
    tnt_layer **ls = tnt__calloc((size_t)n + 1, sizeof *ls);
    int *scs = tnt__calloc((size_t)n + 1, sizeof *scs);
    tnt_status s = ls && scs ? TNT_OK : tnt__error(TNT_ERR_NOMEM, "%s: out of memory", path);
    if (s == TNT_OK) tnt__scope_entries(m, sc, tnt__keras_listed, ls, scs, n);
    for (int i = 0; i < n && s == TNT_OK; i++) {
        const char *cls = ls[i] ? ls[i]->ops->class_name : m->scopes[scs[i]].sequential ? "Sequential" : "Functional";
        char base[PATH_MAX_LEN - 32], at[PATH_MAX_LEN];
        snake_case(cls, base, sizeof base);
        int same = 0; /* Keras's counter per class name in each container */
        for (int j = 0; j < i; j++)
            same += !strcmp(ls[j] ? ls[j]->ops->class_name : m->scopes[scs[j]].sequential ? "Sequential" : "Functional", cls);
        int len = same ? snprintf(at, sizeof at, "%slayers/%s_%d", prefix, base, same)
                       : snprintf(at, sizeof at, "%slayers/%s", prefix, base);
        if (len < 0 || (size_t)len + 40 >= sizeof at) {
            s = tnt__error(TNT_ERR_UNSUPPORTED, "%s: models nested too deep for a path of %d bytes", path, PATH_MAX_LEN);
            break;
        }
        if (ls[i]) {
            for (int k = 0; k < m->n_layers; k++)
                if (m->layers[k] == ls[i]) memcpy(paths[k], at, sizeof at);
            continue;
        }
        if (f >= 0) s = empty_vars(f, at, path);
        strcat(at, "/");
        if (s == TNT_OK) s = scope_paths(m, scs[i], at, paths, f, path);
    }
    free(ls), free(scs);
    return s;
}

/* The group path of each listed layer of m ("layers/dense_1", "layers/functional/layers/dense"),
 * in m->layers order; "" for layers Keras does not list. f >= 0: the groups of nested models
 * are made in f. */
static tnt_status layer_paths(const tnt_model *m, char (*paths)[PATH_MAX_LEN], hid_t f, const char *path) {
    for (int i = 0; i < m->n_layers; i++) paths[i][0] = '\0';
    return scope_paths(m, -1, "", paths, f, path);
}

static hid_t make_groups(hid_t f, const char *path) {
    hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
    if (lcpl < 0) return -1;
    H5Pset_create_intermediate_group(lcpl, 1);
    hid_t g = H5Lexists(f, path, H5P_DEFAULT) > 0 ? H5Gopen2(f, path, H5P_DEFAULT)
                                                  : H5Gcreate2(f, path, lcpl, H5P_DEFAULT, H5P_DEFAULT);
    H5Pclose(lcpl);
    return g;
}

/* An empty "vars" group at path (Keras makes one for every saveable). */
static tnt_status empty_vars(hid_t f, const char *at, const char *path) {
    char p[2 * PATH_MAX_LEN + 8];
    snprintf(p, sizeof p, "%s%svars", at, *at ? "/" : "");
    hid_t g = make_groups(f, p);
    if (g < 0) return tnt__error(TNT_ERR_IO, "%s: cannot create group %s", path, p);
    H5Gclose(g);
    return TNT_OK;
}

tnt_status tnt__keras3_write_weights(tnt_model *m, hid_t f, const char *path) {
    char (*paths)[PATH_MAX_LEN] = tnt__calloc((size_t)m->n_layers + 1, sizeof *paths);
    if (!paths) return tnt__error(TNT_ERR_NOMEM, "%s: out of memory", path);
    tnt_status s = empty_vars(f, "", path);
    if (s == TNT_OK) s = layer_paths(m, paths, f, path);
    for (int i = 0; i < m->n_layers && s == TNT_OK; i++) {
        if (!paths[i][0]) continue;
        layer_vars v;
        if ((s = layer_vars_of(m->layers[i], &v)) != TNT_OK) break;
        /* Keras makes a vars group for every saveable on the way: layers/lstm/vars (empty), then
         * layers/lstm/cell/vars */
        s = empty_vars(f, paths[i], path);
        for (int k = 0; k < v.n && s == TNT_OK; k++) {
            char at[2 * PATH_MAX_LEN];
            snprintf(at, sizeof at, "%s/%s", paths[i], v.sub[k]);
            for (char *slash = strchr(at + strlen(paths[i]) + 1, '/'); slash && s == TNT_OK; slash = strchr(slash + 1, '/')) {
                *slash = '\0';
                s = empty_vars(f, at, path);
                *slash = '/';
            }
        }
        for (int k = 0; k < v.n && s == TNT_OK; k++) {
            char p[2 * PATH_MAX_LEN];
            snprintf(p, sizeof p, "%s%s%s/vars", paths[i], *v.sub[k] ? "/" : "", v.sub[k]);
            hid_t g = make_groups(f, p);
            snprintf(p + strlen(p), sizeof p - strlen(p), "/%d", v.idx[k]);
            const tnt_shape *sh = &v.w[k]->shape;
            char idx[16];
            snprintf(idx, sizeof idx, "%d", v.idx[k]);
            hid_t d = g >= 0 ? tnt__h5_create_dataset(g, idx, H5T_IEEE_F32LE, sh, H5P_DEFAULT) : -1;
            if (d < 0 || H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.w[k]->value) < 0)
                s = tnt__error(TNT_ERR_IO, "%s: cannot write dataset %s (layer \"%s\", weight \"%s\")", path, p,
                               m->layers[i]->name, v.w[k]->name);
            if (d >= 0) H5Dclose(d);
            if (g >= 0) H5Gclose(g);
        }
    }
    free(paths);
    return s;
}

/* Number of members of group path in f (-1 if it is not a group). */
static int64_t group_size(hid_t f, const char *p) {
    if (H5Lexists(f, p, H5P_DEFAULT) <= 0) return -1;
    H5G_info_t info;
    return H5Gget_info_by_name(f, p, &info, H5P_DEFAULT) < 0 ? -1 : (int64_t)info.nlinks;
}

/* Reads dataset p of f into out after checking its shape against w's. */
static tnt_status read_var(hid_t f, const char *p, const tnt_layer *l, const tnt__weight *w, const char *path, float *out) {
    hid_t d = H5Oexists_by_name(f, p, H5P_DEFAULT) > 0 ? H5Dopen2(f, p, H5P_DEFAULT) : -1;
    if (d < 0)
        return tnt__error(TNT_ERR_FORMAT, "%s: layer \"%s\" (%s): weight \"%s\": dataset %s is missing", path, l->name,
                          l->ops->class_name, w->name, p);
    tnt_status s = TNT_OK;
    hid_t space = H5Dget_space(d), type = H5Dget_type(d);
    int nd = space >= 0 ? H5Sget_simple_extent_ndims(space) : -1;
    hsize_t dims[32];
    H5T_class_t cls = type >= 0 ? H5Tget_class(type) : H5T_NO_CLASS;
    if (nd < 0 || nd > 32 || H5Sget_simple_extent_dims(space, dims, NULL) < 0 || (cls != H5T_FLOAT && cls != H5T_INTEGER)) {
        s = tnt__error(TNT_ERR_FORMAT, "%s: dataset %s is unreadable or not numeric", path, p);
    } else {
        bool same = nd == w->shape.ndim;
        for (int k = 0; same && k < nd; k++) same = (int64_t)dims[k] == w->shape.dim[k];
        if (!same) {
            char fs[160] = "(", ms[96];
            for (int k = 0; k < nd && k < 8; k++)
                snprintf(fs + strlen(fs), sizeof fs - strlen(fs), "%s%llu", k ? ", " : "", (unsigned long long)dims[k]);
            strcat(fs, ")");
            s = tnt__error(TNT_ERR_SHAPE, "%s: shape mismatch in layer \"%s\" for weight \"%s\" (%s): the file has %s, the model %s",
                           path, l->name, w->name, p, fs, tnt_shape_str(w->shape, ms, sizeof ms));
        } else if (tnt_shape_numel(w->shape) > 0 && tnt__h5_dread(d, H5T_NATIVE_FLOAT, out) < 0) {
            s = tnt__error(TNT_ERR_FORMAT, "%s: cannot read dataset %s (%s)", path, p, tnt__h5_read_failure());
        }
    }
    if (type >= 0) H5Tclose(type);
    if (space >= 0) H5Sclose(space);
    H5Dclose(d);
    return s;
}

tnt_status tnt__keras3_read_weights(tnt_model *m, hid_t f, const char *path, float *params, float *state) {
    char (*paths)[PATH_MAX_LEN] = tnt__calloc((size_t)m->n_layers + 1, sizeof *paths);
    tnt_status s = paths ? layer_paths(m, paths, -1, path) : tnt__error(TNT_ERR_NOMEM, "%s: out of memory", path);
    for (int i = 0; i < m->n_layers && s == TNT_OK; i++) {
        tnt_layer *l = m->layers[i];
        if (!paths[i][0] || l->n_weights == 0) continue;
        layer_vars v;
        if ((s = layer_vars_of(l, &v)) != TNT_OK) break;
        for (int k = 0; k < v.n && s == TNT_OK; k++) {
            char inner[2 * PATH_MAX_LEN], g[2 * PATH_MAX_LEN + 8], p[2 * PATH_MAX_LEN + 24];
            snprintf(inner, sizeof inner, "%s%s%s", paths[i], *v.sub[k] ? "/" : "", v.sub[k]);
            spelled(f, inner, "/vars", g, sizeof g);
            snprintf(p, sizeof p, "%s/%d", g, v.idx[k]);
            /* the group holds exactly the variables expected of it */
            int expected = 0;
            for (int j = 0; j < v.n; j++) expected += !strcmp(v.sub[j], v.sub[k]);
            int64_t have = group_size(f, g);
            if (have >= 0 && have != expected)
                s = tnt__error(TNT_ERR_SHAPE, "%s: %s holds %lld variable(s), layer \"%s\" (%s) expects %d there", path, g,
                               (long long)have, l->name, l->ops->class_name, expected);
            else s = read_var(f, p, l, v.w[k], path, tnt__weight_destination(m, v.w[k], params, state));
        }
    }
    free(paths);
    return s;
}

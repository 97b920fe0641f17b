/* keras_entries.c: the entries of Keras's model.layers with their weights, as the HDF5 files list
 * them: each layer of the model itself, and each model nested in it as one entry holding the
 * weights of all its layers (Keras 2's _legacy_weights: the trainable weights of its layers in
 * order, then the non-trainable ones, a frozen layer's among them). Keras 2 and 3 load such a
 * file by position (hdf5_format.load_weights_from_hdf5_group): the k-th group with weights to the
 * k-th layer with weights, its weight_names in order to that order. A nested model's weights are named after the scopes they
 * sit in ("inner/dense/kernel:0"), so that layers of the same name in different models do not
 * collide. */
#include "io/keras_io.h"

#include <stdio.h>

/* Appends weight w of layer l (in scope ls) to e. */
static bool push(const tnt_model *m, tnt__entry *e, tnt__weight *w, tnt_layer *l, int ls, int *cap) {
    if (e->n == *cap) {
        int c = *cap ? 2 * *cap : 8;
        tnt__weight **nw = realloc(e->w, (size_t)c * sizeof *nw);
        if (nw) e->w = nw;
        tnt_layer **no = realloc(e->owner, (size_t)c * sizeof *no);
        if (no) e->owner = no;
        char **nn = realloc(e->names, (size_t)c * sizeof *nn);
        if (nn) e->names = nn;
        if (!nw || !no || !nn) return false;
        *cap = c;
    }
    char path[512];
    tnt__scope_path(m, ls, path, sizeof path);
    size_t len = strlen(path) + strlen(l->name) + strlen(w->name) + 8;
    char *name = malloc(len);
    if (!name) return false;
    snprintf(name, len, "%s%s%s/%s:0", path, *path ? "/" : "", l->name, w->name);
    e->w[e->n] = w, e->owner[e->n] = l, e->names[e->n] = name;
    e->n++;
    return true;
}

/* The weights of entry e: of its layer, or of every layer inside its nested model: Keras's
 * trainable_weights (those of layers not frozen), then its non_trainable_weights (the rest: a
 * frozen layer's all, in their order), each in layer order. */
static bool fill(const tnt_model *m, tnt__entry *e) {
    int cap = 0;
    for (int pass = 0; pass < 2; pass++) /* trainable, then non-trainable */
        for (int i = 0; i < m->n_layers; i++) {
            tnt_layer *l = m->layers[i];
            int ls = tnt__layer_scope(m, l);
            if (e->layer ? l != e->layer : ls < 0 || !tnt__scope_within(m, ls, e->scope)) continue;
            for (int j = 0; j < l->n_weights; j++)
                if ((l->weights[j].trainable && !l->frozen) == (pass == 0) && !push(m, e, &l->weights[j], l, ls, &cap))
                    return false;
        }
    return true;
}

tnt_status tnt__entries(const tnt_model *m, int scope, tnt__entry **out, int *n) {
    *out = NULL, *n = 0;
    int k = tnt__scope_entries(m, scope, tnt__keras_listed, NULL, NULL, 0);
    tnt_layer **ls = tnt__calloc((size_t)k + 1, sizeof *ls);
    int *scs = tnt__calloc((size_t)k + 1, sizeof *scs);
    tnt__entry *e = tnt__calloc((size_t)k + 1, sizeof *e);
    bool ok = ls && scs && e;
    if (ok) tnt__scope_entries(m, scope, tnt__keras_listed, ls, scs, k);
    for (int i = 0; ok && i < k; i++) {
        e[i].layer = ls[i];
        e[i].scope = ls[i] ? -1 : scs[i];
        e[i].name = ls[i] ? ls[i]->name : m->scopes[scs[i]].name;
        ok = fill(m, &e[i]);
    }
    free(ls), free(scs);
    if (!ok) {
        tnt__entries_free(e, k);
        return tnt__error(TNT_ERR_NOMEM, "model \"%s\": out of memory listing its layers", m->name);
    }
    *out = e, *n = k;
    return TNT_OK;
}

void tnt__entries_free(tnt__entry *e, int n) {
    for (int i = 0; e && i < n; i++) {
        for (int j = 0; j < e[i].n; j++) free(e[i].names[j]);
        free(e[i].w), free(e[i].owner), free(e[i].names);
    }
    free(e);
}

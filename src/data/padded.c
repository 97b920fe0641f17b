/* padded.c: tf.data's padded_batch in the pipeline. The source holds samples of different shapes
 * padded to a common one, with each sample's extent per axis; a padded batch takes the largest
 * extent of the global batch on each free axis (or the fixed size given), so each batch is only
 * as long as its longest sample, and every rank's share of it has the shape the whole batch has
 * in a serial run. */
#include "data/pipeline.h"

bool tnt__chain_has(const tnt_dataset *ds, tnt__op op) {
    for (; ds; ds = ds->in)
        if (ds->op == op) return true;
    return false;
}

static const tnt_dataset *source_of(const tnt_dataset *ds) {
    while (ds->in) ds = ds->in;
    return ds;
}

static tnt_status copy_extents(const tnt_dataset *src, const int32_t *ext, tnt_shape shape, int32_t **out,
                               const char *what) {
    if (!ext) return TNT_OK;
    size_t count = (size_t)(src->n * shape.ndim);
    for (size_t i = 0; i < count; i++) {
        int64_t d = shape.dim[i % (size_t)shape.ndim];
        if (ext[i] < 0 || ext[i] > d)
            return tnt__error(TNT_ERR_ARG, "set_extents: %s extent %d of sample %lld, axis %d (expected 0..%lld)",
                              what, (int)ext[i], (long long)(i / (size_t)shape.ndim), (int)(i % (size_t)shape.ndim),
                              (long long)d);
    }
    if (!(*out = malloc(count ? count * sizeof **out : 1))) return TNT_ERR_NOMEM;
    if (count) memcpy(*out, ext, count * sizeof **out);
    return TNT_OK;
}

tnt_status tnt_dataset_set_extents(tnt_dataset *ds, const int32_t *x_ext, const int32_t *y_ext) {
    if (!ds) return tnt__error(TNT_ERR_ARG, "set_extents: dataset is NULL");
    if (ds->op != TNT__OP_SOURCE) return tnt__error(TNT_ERR_ARG, "set_extents: the dataset is not a source");
    if (y_ext && !ds->has_y) return tnt__error(TNT_ERR_ARG, "set_extents: y extents given, the dataset has no labels");
    int32_t *xe = NULL, *ye = NULL;
    tnt_status s = copy_extents(ds, x_ext, ds->x_shape, &xe, "x");
    if (s == TNT_OK) s = copy_extents(ds, y_ext, ds->y_shape, &ye, "y");
    if (s != TNT_OK) {
        free(xe);
        return s;
    }
    free(ds->x_ext);
    free(ds->y_ext);
    ds->x_ext = xe, ds->y_ext = ye;
    return TNT_OK;
}

/* The declared (largest) shape of a padded element: the fixed sizes, else the input's. */
static tnt_status padded_shape(const char *what, tnt_shape in, const tnt_shape *want, int64_t *pad, tnt_shape *out) {
    char a[96], b[96];
    *out = in;
    for (int i = 0; i < in.ndim; i++) pad[i] = -1;
    if (!want) return TNT_OK;
    if (want->ndim != in.ndim)
        return tnt__error(TNT_ERR_SHAPE, "padded_batch: padded %s shape %s has %d dimensions, the elements %s have %d",
                          what, tnt_shape_str(*want, a, sizeof a), want->ndim, tnt_shape_str(in, b, sizeof b), in.ndim);
    for (int i = 0; i < in.ndim; i++) {
        if (want->dim[i] < -1 || want->dim[i] == 0)
            return tnt__error(TNT_ERR_SHAPE, "padded_batch: padded %s shape %s: dimension %d is %lld (expected > 0, "
                              "or -1: the batch's longest)", what, tnt_shape_str(*want, a, sizeof a), i,
                              (long long)want->dim[i]);
        pad[i] = want->dim[i];
        if (pad[i] > 0) out->dim[i] = pad[i];
    }
    return TNT_OK;
}

tnt_dataset *tnt_dataset_padded_batch(tnt_dataset *in, int64_t batch_size, bool drop_remainder,
                                      const tnt_shape *padded_x, const tnt_shape *padded_y, float fill_x,
                                      float fill_y) {
    if (!in) return NULL;
    if (tnt__chain_has(in, TNT__OP_MAP)) {
        tnt__error(TNT_ERR_UNSUPPORTED, "padded_batch: a map before it (the samples' extents are the source's)");
        tnt_dataset_free(in);
        return NULL;
    }
    int64_t pad_x[TNT_MAX_DIMS] = {0}, pad_y[TNT_MAX_DIMS] = {0};
    tnt_shape xs, ys = in->y_shape;
    if (padded_shape("x", in->x_shape, padded_x, pad_x, &xs) != TNT_OK ||
        (in->has_y && padded_shape("y", in->y_shape, padded_y, pad_y, &ys) != TNT_OK)) {
        tnt_dataset_free(in);
        return NULL;
    }
    tnt_dataset *ds = tnt_dataset_batch(in, batch_size, drop_remainder);
    if (!ds) return NULL;
    ds->padded = true;
    ds->x_shape = xs, ds->y_shape = ys;
    ds->n_parts = 0;
    memcpy(ds->pad_x, pad_x, sizeof pad_x);
    memcpy(ds->pad_y, pad_y, sizeof pad_y);
    ds->fill_x = fill_x, ds->fill_y = fill_y;
    return ds;
}

/* One side (x or y) of the batch: the fixed sizes, else the largest extent of its samples. */
static tnt_status side_shape(const char *what, tnt_shape full, const int32_t *ext, const int64_t *pad,
                             const int64_t *idx, int64_t n, tnt_shape *out) {
    *out = full;
    for (int i = 0; i < full.ndim; i++) {
        int64_t big = 0;
        for (int64_t k = 0; k < n; k++) big = TNT_MAX(big, ext ? ext[idx[k] * full.ndim + i] : full.dim[i]);
        if (pad[i] < 0) out->dim[i] = big;
        else if (big > pad[i])
            return tnt__error(TNT_ERR_SHAPE, "padded_batch: a %s sample has %lld values on axis %d, more than the "
                              "padded shape's %lld", what, (long long)big, i, (long long)pad[i]);
        else out->dim[i] = pad[i];
    }
    return TNT_OK;
}

tnt_status tnt__padded_shapes(const tnt_dataset_iter *it, const int64_t *idx, int64_t n, tnt_shape *xs,
                              tnt_shape *ys) {
    const tnt_dataset *p = it->padded, *src = source_of(p);
    tnt_status s = side_shape("x", src->x_shape, src->x_ext, p->pad_x, idx, n, xs);
    if (s == TNT_OK && p->has_y) s = side_shape("y", src->y_shape, src->y_ext, p->pad_y, idx, n, ys);
    return s;
}

/* Places a sample of shape full (its values: ext on each axis) into out of shape shape. */
static void place(const float *sample, tnt_shape full, const int32_t *ext, tnt_shape shape, float fill, float *out) {
    int nd = full.ndim;
    int64_t total = tnt_shape_numel(shape);
    for (int64_t i = 0; i < total; i++) out[i] = fill;
    if (nd == 0) {
        out[0] = sample[0];
        return;
    }
    int64_t e[TNT_MAX_DIMS], pos[TNT_MAX_DIMS] = {0};
    for (int i = 0; i < nd; i++) {
        e[i] = ext ? ext[i] : full.dim[i];
        if (e[i] == 0) return;
    }
    for (;;) { /* one run of the last axis per position of the others */
        int64_t so = 0, oo = 0;
        for (int i = 0; i < nd - 1; i++) so = so * full.dim[i] + pos[i], oo = oo * shape.dim[i] + pos[i];
        memcpy(out + oo * shape.dim[nd - 1], sample + so * full.dim[nd - 1], (size_t)e[nd - 1] * sizeof(float));
        int i = nd - 2;
        while (i >= 0 && ++pos[i] == e[i]) pos[i--] = 0;
        if (i < 0) return;
    }
}

tnt_status tnt__materialize_padded(const tnt_dataset_iter *it, const int64_t *idx, int64_t n, tnt_shape xs,
                                   tnt_shape ys, float *x, float *y) {
    const tnt_dataset *p = it->padded, *src = it->src;
    const tnt__column *cx = &src->x, *cy = &src->y;
    size_t xbytes = (size_t)cx->numel * tnt__dtype_size(cx->dtype);
    size_t ybytes = (size_t)cy->numel * tnt__dtype_size(cy->dtype);
    int64_t xo = tnt_shape_numel(xs), yo = tnt_shape_numel(ys);
    for (int64_t i = 0; i < n; i++) {
        int64_t s = idx[i];
        tnt__convert_to_f32(cx->data + (size_t)s * xbytes, cx->dtype, cx->numel, it->pad_sx);
        place(it->pad_sx, cx->shape, src->x_ext ? src->x_ext + s * cx->shape.ndim : NULL, xs, p->fill_x, x + i * xo);
        if (!src->has_y) continue;
        tnt__convert_to_f32(cy->data + (size_t)s * ybytes, cy->dtype, cy->numel, it->pad_sy);
        place(it->pad_sy, cy->shape, src->y_ext ? src->y_ext + s * cy->shape.ndim : NULL, ys, p->fill_y, y + i * yo);
    }
    return TNT_OK;
}

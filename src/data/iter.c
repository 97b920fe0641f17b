/* iter.c: iterating a dataset: the index streams of the ops (one state per node), the
 * materialization of an element's samples through the map chain, and the public iterator. All
 * buffers are allocated once per iterator, so a step does no allocation. */
#include "data/pipeline.h"

#include <stdio.h>

/* The key a repeat gives its input for repetition r, so that each repetition reshuffles. */
static uint64_t repeat_key(uint64_t key, int64_t r) {
    return tnt__rand_u64(key ^ 0x52455045415431ull, (uint64_t)r);
}

/* Starts nodes k.. afresh for the iteration identified by key. */
static void reset_from(tnt_dataset_iter *it, int k, uint64_t key) {
    for (; k < it->depth; k++) {
        tnt__node_it *s = &it->nodes[k];
        s->key = key;
        s->pos = s->count = 0;
        s->flag = s->done = false;
        s->draws = 0;
        s->seed = tnt__rand_u64(s->ds->seed, key);
        if (s->ds->op == TNT__OP_REPEAT) {
            s->done = s->ds->count == 0;
            key = repeat_key(key, 0);
        }
    }
}

static int node_next(tnt_dataset_iter *it, int k, int64_t *out, int64_t *len);

/* tf.data shuffle: fill a buffer, then emit a uniformly chosen slot and refill it from the
 * input; once the input ends, drain the buffer in random order. */
static int shuffle_next(tnt_dataset_iter *it, int k, int64_t *out, int64_t *len) {
    tnt__node_it *s = &it->nodes[k];
    int64_t w = s->ds->width;
    int r;
    if (!s->done) { /* first call: fill */
        while (s->count < s->cap) {
            if ((r = node_next(it, k + 1, s->buf + s->count * w, &s->len[s->count])) < 0) return r;
            if (r == 0) {
                s->flag = true;
                break;
            }
            s->count++;
        }
        s->done = true;
    }
    if (s->count == 0) return 0;
    int64_t j = (int64_t)(tnt__rand_u64(s->seed, s->draws++) % (uint64_t)s->count);
    *len = s->len[j];
    memcpy(out, s->buf + j * w, (size_t)*len * sizeof *out);
    if (!s->flag) {
        if ((r = node_next(it, k + 1, s->buf + j * w, &s->len[j])) < 0) return r;
        if (r == 1) return 1;
        s->flag = true;
    }
    s->count--; /* input ended: move the last element into the emptied slot */
    if (j != s->count) {
        memcpy(s->buf + j * w, s->buf + s->count * w, (size_t)s->len[s->count] * sizeof *out);
        s->len[j] = s->len[s->count];
    }
    return 1;
}

static int batch_next(tnt_dataset_iter *it, int k, int64_t *out, int64_t *len) {
    const tnt_dataset *ds = it->nodes[k].ds;
    int64_t n = 0, one;
    while (n < ds->count) {
        int r = node_next(it, k + 1, out + n, &one);
        if (r < 0) return r;
        if (r == 0) break;
        n++;
    }
    if (n == 0 || (n < ds->count && ds->drop_remainder)) return 0;
    *len = n;
    return 1;
}

static int repeat_next(tnt_dataset_iter *it, int k, int64_t *out, int64_t *len) {
    tnt__node_it *s = &it->nodes[k];
    while (!s->done) {
        int r = node_next(it, k + 1, out, len);
        if (r != 0) {
            s->flag = true;
            return r;
        }
        s->pos++;
        /* an empty repetition ends an infinite repeat instead of spinning forever */
        if ((s->ds->count >= 0 && s->pos >= s->ds->count) || !s->flag) {
            s->done = true;
            break;
        }
        s->flag = false;
        reset_from(it, k + 1, repeat_key(s->key, s->pos));
    }
    return 0;
}

/* The next element of node k: its source indices into out (room for the node's width). */
static int node_next(tnt_dataset_iter *it, int k, int64_t *out, int64_t *len) {
    tnt__node_it *s = &it->nodes[k];
    const tnt_dataset *ds = s->ds;
    int r;
    switch (ds->op) {
    case TNT__OP_SOURCE:
        if (s->pos >= ds->n) return 0;
        out[0] = s->pos++;
        *len = 1;
        return 1;
    case TNT__OP_SHUFFLE: return shuffle_next(it, k, out, len);
    case TNT__OP_BATCH: return batch_next(it, k, out, len);
    case TNT__OP_REPEAT: return repeat_next(it, k, out, len);
    case TNT__OP_TAKE:
        if (ds->count >= 0 && s->pos >= ds->count) return 0;
        if ((r = node_next(it, k + 1, out, len)) == 1) s->pos++;
        return r;
    case TNT__OP_SKIP:
        while (!s->done && (ds->count < 0 || s->pos < ds->count)) {
            if ((r = node_next(it, k + 1, out, len)) <= 0) return r;
            s->pos++;
        }
        s->done = true;
        return node_next(it, k + 1, out, len);
    case TNT__OP_MAP:
    case TNT__OP_PREFETCH: return node_next(it, k + 1, out, len);
    }
    return tnt__error(TNT_ERR_STATE, "dataset: unknown op %d", (int)ds->op);
}

/* Decodes samples idx[0..n) through the map chain into rows of x and y. */
static int materialize(tnt_dataset_iter *it, const int64_t *idx, int64_t n, float *x, float *y) {
    const tnt_dataset *src = it->src;
    const tnt__column *cx = &src->x, *cy = &src->y;
    size_t xbytes = (size_t)cx->numel * tnt__dtype_size(cx->dtype);
    size_t ybytes = (size_t)cy->numel * tnt__dtype_size(cy->dtype);
    int64_t xo = tnt_shape_numel(it->ds->x_shape), yo = tnt_shape_numel(it->ds->y_shape);
    bool has_y = src->has_y;
    for (int64_t i = 0; i < n; i++) {
        int64_t s = idx[i];
        float *ox = x + i * xo, *oy = has_y ? y + i * yo : NULL;
        float *px = it->nmaps ? it->sx[0] : ox, *py = it->nmaps ? it->sy[0] : oy;
        tnt__convert_to_f32(cx->data + (size_t)s * xbytes, cx->dtype, cx->numel, px);
        if (has_y) tnt__convert_to_f32(cy->data + (size_t)s * ybytes, cy->dtype, cy->numel, py);
        for (int m = 0; m < it->nmaps; m++) {
            const tnt_dataset *map = it->maps[m], *in = map->in;
            bool last = m == it->nmaps - 1;
            float *qx = last ? ox : it->sx[(m + 1) & 1];
            float *qy = has_y ? (last ? oy : it->sy[(m + 1) & 1]) : NULL;
            /* unchanged shapes start as a copy, so fn may edit only what it needs */
            if (tnt__shape_equal(in->x_shape, map->x_shape))
                memcpy(qx, px, (size_t)tnt_shape_numel(map->x_shape) * sizeof(float));
            if (has_y && tnt__shape_equal(in->y_shape, map->y_shape))
                memcpy(qy, py, (size_t)tnt_shape_numel(map->y_shape) * sizeof(float));
            int rc = map->fn(px, py, qx, qy, map->user);
            if (rc != 0)
                return tnt__error(TNT_ERR_ARG, "map: function returned %d for sample %lld", rc,
                                  (long long)s);
            px = qx, py = qy;
        }
    }
    return TNT_OK;
}

int tnt__iter_produce(tnt_dataset_iter *it, int part, int nparts, tnt__slot *slot) {
    int64_t n = 0;
    int r = node_next(it, 0, it->item, &n);
    if (r <= 0) return r;
    int64_t base = n / nparts, rem = n % nparts;
    int64_t lo = part * base + TNT_MIN(part, rem), cnt = base + (part < rem);
    slot->shaped = it->padded != NULL;
    if (it->padded) { /* the shapes of the whole batch, then this share in them */
        if ((r = tnt__padded_shapes(it, it->item, n, &slot->xs, &slot->ys)) < 0) return r;
        r = tnt__materialize_padded(it, it->item + lo, cnt, slot->xs, slot->ys, slot->x, slot->y);
    } else {
        r = materialize(it, it->item + lo, cnt, slot->x, slot->y);
    }
    if (r < 0) return r;
    slot->n = cnt;
    slot->global_n = n;
    return 1;
}

tnt_status tnt__slot_init(const tnt_dataset_iter *it, tnt__slot *s) {
    const tnt_dataset *ds = it->ds;
    s->x = tnt__alloc((size_t)(ds->width * tnt_shape_numel(ds->x_shape)) * sizeof(float));
    if (!s->x) return TNT_ERR_NOMEM;
    if (ds->has_y) {
        s->y = tnt__alloc((size_t)(ds->width * tnt_shape_numel(ds->y_shape)) * sizeof(float));
        if (!s->y) return TNT_ERR_NOMEM;
    }
    return TNT_OK;
}

void tnt__slot_release(tnt__slot *s) {
    tnt__free(s->x);
    tnt__free(s->y);
    s->x = s->y = NULL;
}

/* Per-node state and the map chain's scratch buffers. */
static tnt_status iter_setup(tnt_dataset_iter *it) {
    int64_t xmax = 0, ymax = 0, pf_buffer = 0;
    int k = 0;
    for (const tnt_dataset *d = it->ds; d; d = d->in, k++) {
        tnt__node_it *s = &it->nodes[k];
        s->ds = d;
        xmax = TNT_MAX(xmax, tnt_shape_numel(d->x_shape));
        ymax = TNT_MAX(ymax, tnt_shape_numel(d->y_shape));
        if (d->op == TNT__OP_MAP) it->nmaps++;
        if (d->op == TNT__OP_PREFETCH) pf_buffer = TNT_MAX(pf_buffer, d->count);
        if (d->op == TNT__OP_BATCH && d->padded) it->padded = d;
        if (d->op == TNT__OP_SHUFFLE) {
            /* a buffer larger than the input never fills past the input */
            s->cap = d->in->card >= 0 ? TNT_MIN(d->count, TNT_MAX(d->in->card, 1)) : d->count;
            if (s->cap > ((int64_t)1 << 40) / d->width)
                return tnt__error(TNT_ERR_NOMEM, "shuffle: buffer_size %lld is too large for elements of %lld samples",
                                  (long long)d->count, (long long)d->width);
            s->buf = malloc((size_t)(s->cap * d->width) * sizeof(int64_t));
            s->len = malloc((size_t)s->cap * sizeof(int64_t));
            if (!s->buf || !s->len)
                return tnt__error(TNT_ERR_NOMEM, "shuffle: out of memory for a buffer of %lld elements",
                                  (long long)d->count);
        }
        if (!d->in) it->src = d;
    }
    it->item = tnt__calloc((size_t)it->ds->width, sizeof(int64_t));
    it->maps = tnt__calloc((size_t)it->nmaps + 1, sizeof *it->maps);
    if (!it->item || !it->maps) return TNT_ERR_NOMEM;
    int m = it->nmaps;
    for (const tnt_dataset *d = it->ds; d; d = d->in)
        if (d->op == TNT__OP_MAP) it->maps[--m] = d;
    if (it->nmaps) {
        for (int b = 0; b < 2; b++) {
            if (!(it->sx[b] = tnt__alloc((size_t)xmax * sizeof(float)))) return TNT_ERR_NOMEM;
            if (!(it->sy[b] = tnt__alloc((size_t)ymax * sizeof(float)))) return TNT_ERR_NOMEM;
        }
    }
    if (it->padded) {
        if (!(it->pad_sx = tnt__alloc((size_t)TNT_MAX(it->src->x.numel, 1) * sizeof(float)))) return TNT_ERR_NOMEM;
        if (!(it->pad_sy = tnt__alloc((size_t)TNT_MAX(it->src->y.numel, 1) * sizeof(float)))) return TNT_ERR_NOMEM;
    }
    if (pf_buffer > 0) {
        if (!(it->pf = tnt__prefetch_new(it, pf_buffer))) return TNT_ERR_NOMEM;
    } else {
        tnt_status s = tnt__slot_init(it, &it->direct);
        if (s) return s;
    }
    return TNT_OK;
}

tnt_dataset_iter *tnt_dataset_iter_new(tnt_dataset *ds, int64_t epoch) {
    if (!ds) {
        tnt__error(TNT_ERR_ARG, "dataset_iter_new: dataset is NULL");
        return NULL;
    }
    tnt_dataset_iter *it = tnt__calloc(1, sizeof *it);
    if (!it) return NULL;
    it->ds = ds;
    it->depth = ds->depth;
    it->nodes = tnt__calloc((size_t)ds->depth, sizeof *it->nodes);
    if (!it->nodes || iter_setup(it) != TNT_OK) {
        tnt_dataset_iter_free(it);
        return NULL;
    }
    reset_from(it, 0, (uint64_t)epoch);
    return it;
}

void tnt_dataset_iter_free(tnt_dataset_iter *it) {
    if (!it) return;
    tnt__prefetch_free(it->pf); /* joins the thread before its buffers go */
    for (int k = 0; it->nodes && k < it->depth; k++) {
        free(it->nodes[k].buf);
        free(it->nodes[k].len);
    }
    free(it->nodes);
    free(it->item);
    free(it->maps);
    for (int b = 0; b < 2; b++) {
        tnt__free(it->sx[b]);
        tnt__free(it->sy[b]);
    }
    tnt__slot_release(&it->direct);
    tnt__free(it->pad_sx);
    tnt__free(it->pad_sy);
    free(it);
}

int tnt__dataset_iter_next_part(tnt_dataset_iter *it, int part, int nparts, tnt_batch *out,
                                int64_t *global_n) {
    if (!it || !out) return tnt__error(TNT_ERR_ARG, "dataset_iter_next: %s is NULL", it ? "out" : "iterator");
    memset(out, 0, sizeof *out);
    if (global_n) *global_n = 0;
    if (nparts < 1 || part < 0 || part >= nparts)
        return tnt__error(TNT_ERR_ARG, "dataset_iter_next: part %d of %d (expected 0 <= part < nparts)",
                          part, nparts);
    if (nparts > 1 && !it->ds->batched)
        return tnt__error(TNT_ERR_ARG,
                          "dataset_iter_next: splitting an unbatched dataset into %d parts (batch it first)",
                          nparts);
    const tnt__slot *s = &it->direct;
    int r;
    if (it->pf) {
        r = tnt__prefetch_next(it->pf, part, nparts, &s);
    } else if (it->finished) {
        r = it->direct.status;
        if (r < 0) tnt__error(r, "%s", it->direct.msg);
    } else {
        r = tnt__iter_produce(it, part, nparts, &it->direct);
        if (r != 1) { /* repeat the end, or the error, on later calls */
            it->finished = true;
            it->direct.status = r;
            if (r < 0) snprintf(it->direct.msg, sizeof it->direct.msg, "%s", tnt_last_error());
        }
    }
    if (r != 1) return r;
    const tnt_dataset *ds = it->ds;
    out->n = ds->batched ? s->n : 1;
    tnt_shape xs = s->shaped ? s->xs : ds->x_shape, ys = s->shaped ? s->ys : ds->y_shape;
    out->x = (tnt_tensor){.shape = tnt__shape_with_batch(out->n, xs), .data = s->x};
    if (ds->has_y) out->y = (tnt_tensor){.shape = tnt__shape_with_batch(out->n, ys), .data = s->y};
    if (global_n) *global_n = s->global_n;
    return 1;
}

int tnt_dataset_iter_next(tnt_dataset_iter *it, tnt_batch *out) {
    return tnt__dataset_iter_next_part(it, 0, 1, out, NULL);
}

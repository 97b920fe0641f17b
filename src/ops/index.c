/* index.c: indexing and values: strided slicing x[...] (indices, start:stop:step with negative
 * values and steps, None, one ellipsis; NumPy's clamping), take (gather along an axis, negative
 * indices wrap), one_hot, cast, constants and zeros_like / ones_like / full_like.
 *
 * Slicing is one strided walk: per input axis a start, a step and a count (1 for an index), so
 * forward copies along it and backward adds dy back along it. take's backward scatters-adds. */
#include "ops/ops.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>

enum { I_SLICE, I_TAKE, I_ONE_HOT, I_CAST, I_CONSTANT, I_ZEROS_LIKE, I_ONES_LIKE, I_FULL_LIKE };

/* ---- attributes ---- */

static tnt_status slice_bound(const cJSON *v, int64_t *out, bool *has, const char *what) {
    *has = false;
    if (!v || cJSON_IsNull(v)) return TNT_OK;
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || fabs(v->valuedouble) > 9e15)
        return tnt__error(TNT_ERR_ARG, "attribute \"spec\": slice %s is not an int or null", what);
    *out = (int64_t)v->valuedouble, *has = true;
    return TNT_OK;
}

/* "spec": [item, ...] with item an int (index), null (newaxis), "..." (ellipsis), or a slice
 * [start, stop, step] / {"start": ..., "stop": ..., "step": ...} whose entries may be null. */
static tnt_status parse_slice(tnt__op_attr *a, const cJSON *spec) {
    const cJSON *e;
    bool ellipsis = false;
    if (!cJSON_IsArray(spec) || cJSON_GetArraySize(spec) > TNT__MAX_SLICE)
        return tnt__error(TNT_ERR_ARG, "attribute \"spec\" is not a list of at most %d items", TNT__MAX_SLICE);
    cJSON_ArrayForEach(e, spec) {
        tnt__slice_item *it = &a->slice[a->n_slice++];
        memset(it, 0, sizeof *it);
        if (cJSON_IsNull(e)) {
            it->kind = TNT__SL_NEWAXIS;
        } else if (cJSON_IsString(e) && strcmp(e->valuestring, "...") == 0) {
            if (ellipsis) return tnt__error(TNT_ERR_ARG, "attribute \"spec\": more than one ellipsis");
            ellipsis = true, it->kind = TNT__SL_ELLIPSIS;
        } else if (cJSON_IsNumber(e)) {
            bool has;
            it->kind = TNT__SL_INDEX;
            tnt_status s = slice_bound(e, &it->start, &has, "index");
            if (s != TNT_OK) return s;
        } else if (cJSON_IsArray(e) || cJSON_IsObject(e)) {
            const cJSON *b = cJSON_IsArray(e) ? cJSON_GetArrayItem(e, 0) : cJSON_GetObjectItemCaseSensitive(e, "start"),
                        *x = cJSON_IsArray(e) ? cJSON_GetArrayItem(e, 1) : cJSON_GetObjectItemCaseSensitive(e, "stop"),
                        *st = cJSON_IsArray(e) ? cJSON_GetArrayItem(e, 2) : cJSON_GetObjectItemCaseSensitive(e, "step");
            bool has_step;
            it->kind = TNT__SL_RANGE, it->step = 1;
            tnt_status s = slice_bound(b, &it->start, &it->has_start, "start");
            if (s == TNT_OK) s = slice_bound(x, &it->stop, &it->has_stop, "stop");
            if (s == TNT_OK) s = slice_bound(st, &it->step, &has_step, "step");
            if (s != TNT_OK) return s;
            if (!has_step) it->step = 1;
            if (it->step == 0) return tnt__error(TNT_ERR_ARG, "attribute \"spec\": slice step 0");
        } else {
            return tnt__error(TNT_ERR_ARG, "attribute \"spec\": an item is not an int, null, \"...\" or a slice");
        }
    }
    return TNT_OK;
}

/* Flattens a nested list of numbers into a->data with its shape. */
static tnt_status read_values(const cJSON *v, tnt__op_attr *a, int depth, int64_t *n, int64_t cap) {
    if (cJSON_IsNumber(v) || cJSON_IsBool(v)) {
        if (*n >= cap) return tnt__error(TNT_ERR_ARG, "attribute \"value\": ragged nested lists");
        a->data[(*n)++] = cJSON_IsBool(v) ? (float)cJSON_IsTrue(v) : (float)v->valuedouble;
        return TNT_OK;
    }
    if (!cJSON_IsArray(v) || depth >= TNT_MAX_DIMS)
        return tnt__error(TNT_ERR_ARG, "attribute \"value\": expected numbers in nested lists of depth <= %d", TNT_MAX_DIMS);
    int len = cJSON_GetArraySize(v);
    if (a->data_shape.ndim <= depth) a->data_shape.ndim = depth + 1, a->data_shape.dim[depth] = len;
    else if (a->data_shape.dim[depth] != len) return tnt__error(TNT_ERR_ARG, "attribute \"value\": ragged nested lists");
    const cJSON *e;
    cJSON_ArrayForEach(e, v) {
        tnt_status s = read_values(e, a, depth + 1, n, cap);
        if (s != TNT_OK) return s;
    }
    return TNT_OK;
}

static int64_t count_numbers(const cJSON *v) {
    if (!cJSON_IsArray(v)) return 1;
    int64_t n = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, v) n += count_numbers(e);
    return n;
}

static tnt_status parse_index(tnt__opnode *n, const cJSON *attrs) {
    tnt__op_attr *a = &n->a;
    tnt_status s = TNT_OK;
    switch (n->kind % 256) {
    case I_SLICE: return parse_slice(a, cJSON_GetObjectItemCaseSensitive(attrs, "spec"));
    case I_TAKE: return tnt__oa_axes(attrs, "axis", a);
    case I_ONE_HOT:
        a->axes[0] = -1, a->n_axes = 1, a->i0 = 0;
        s = tnt__oa_int(attrs, "num_classes", &a->i0);
        if (s == TNT_OK) s = tnt__oa_axes(attrs, "axis", a);
        if (s == TNT_OK && a->i0 < 1) s = tnt__error(TNT_ERR_ARG, "num_classes %lld (expected >= 1)", (long long)a->i0);
        return s;
    case I_CAST:
        if (!cJSON_GetObjectItemCaseSensitive(attrs, "dtype")) return tnt__error(TNT_ERR_ARG, "attribute \"dtype\" is missing");
        return tnt__oa_dtype(attrs, "dtype", &a->dtype);
    case I_FULL_LIKE: return tnt__oa_num(attrs, "fill_value", &a->f0);
    case I_CONSTANT: {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(attrs, "value");
        if (!v) return tnt__error(TNT_ERR_ARG, "attribute \"value\" is missing");
        s = tnt__oa_dtype(attrs, "dtype", &a->dtype);
        tnt__op_attr shape_attr = {0};
        if (s == TNT_OK) s = tnt__oa_ints(attrs, "shape", &shape_attr);
        if (s != TNT_OK) return s;
        int64_t cap = count_numbers(v), got = 0;
        if (!(a->data = tnt__calloc((size_t)cap + 1, sizeof(float)))) return TNT_ERR_NOMEM;
        a->data_shape.ndim = 0;
        if ((s = read_values(v, a, 0, &got, cap)) != TNT_OK) return s;
        if (shape_attr.n_ints && !cJSON_IsArray(v)) { /* a scalar filled into "shape" */
            tnt_shape sh = {.ndim = shape_attr.n_ints};
            for (int d = 0; d < sh.ndim; d++) sh.dim[d] = shape_attr.ints[d];
            if (sh.ndim > TNT_MAX_DIMS || tnt_shape_numel(sh) < 0 || tnt_shape_numel(sh) > (1 << 26))
                return tnt__error(TNT_ERR_ARG, "attribute \"shape\": bad constant shape");
            float fill = a->data[0];
            free(a->data);
            if (!(a->data = tnt__calloc((size_t)tnt_shape_numel(sh) + 1, sizeof(float)))) return TNT_ERR_NOMEM;
            for (int64_t i = 0; i < tnt_shape_numel(sh); i++) a->data[i] = fill;
            a->data_shape = sh;
        }
        if (a->dtype == TNT__I32)
            for (int64_t i = 0; i < tnt_shape_numel(a->data_shape); i++) a->data[i] = truncf(a->data[i]);
        return TNT_OK;
    }
    }
    return TNT_OK;
}

/* ---- slicing geometry ---- */

typedef struct slice_geom {
    tnt_shape w;                 /* per input axis: count (1 for an index) */
    int64_t ist[TNT_MAX_DIMS];   /* input strides times steps */
    int64_t in_off;
    tnt_shape out;
} slice_geom;

static tnt_status slice_geometry(const tnt__opnode *n, tnt_shape x, slice_geom *g) {
    const tnt__op_attr *a = &n->a;
    int consumed = 0;
    for (int i = 0; i < a->n_slice; i++)
        consumed += a->slice[i].kind == TNT__SL_INDEX || a->slice[i].kind == TNT__SL_RANGE;
    char sx[96];
    if (consumed > x.ndim)
        return tnt__op_error(n, TNT_ERR_SHAPE, "%d indices for shape %s", consumed, tnt_shape_str(x, sx, sizeof sx));
    int64_t xst[TNT_MAX_DIMS];
    tnt__strides(x, xst);
    g->w = x, g->in_off = 0, g->out.ndim = 0;
    int d = 0;
    bool had_ellipsis = false;
    for (int i = 0; i <= a->n_slice; i++) {
        tnt__slice_item it = {.kind = TNT__SL_ELLIPSIS};
        if (i < a->n_slice) it = a->slice[i];
        else if (had_ellipsis) break; /* the implicit trailing ellipsis */
        if (it.kind == TNT__SL_NEWAXIS) {
            if (g->out.ndim >= TNT_MAX_DIMS) return tnt__op_error(n, TNT_ERR_SHAPE, "rank above %d", TNT_MAX_DIMS);
            g->out.dim[g->out.ndim++] = 1;
            continue;
        }
        if (it.kind == TNT__SL_ELLIPSIS) {
            had_ellipsis = true;
            int rest = 0; /* axes the items after the ellipsis consume */
            for (int j = i + 1; j < a->n_slice; j++) rest += a->slice[j].kind == TNT__SL_INDEX || a->slice[j].kind == TNT__SL_RANGE;
            int fill = x.ndim - d - rest;
            for (int k = 0; k < fill; k++, d++) {
                g->ist[d] = xst[d];
                if (g->out.ndim >= TNT_MAX_DIMS) return tnt__op_error(n, TNT_ERR_SHAPE, "rank above %d", TNT_MAX_DIMS);
                g->out.dim[g->out.ndim++] = x.dim[d];
            }
            continue;
        }
        int64_t size = x.dim[d];
        if (it.kind == TNT__SL_INDEX) {
            int64_t k = it.start < 0 ? it.start + size : it.start;
            if (k < 0 || k >= size)
                return tnt__op_error(n, TNT_ERR_SHAPE, "index %lld is out of range for axis %d of shape %s (size %lld)",
                                     (long long)it.start, d, tnt_shape_str(x, sx, sizeof sx), (long long)size);
            g->w.dim[d] = 1, g->ist[d] = 0, g->in_off += k * xst[d];
            d++;
            continue;
        }
        int64_t step = it.step, start, stop, count;
        if (step > 0) {
            start = it.has_start ? (it.start < 0 ? it.start + size : it.start) : 0;
            stop = it.has_stop ? (it.stop < 0 ? it.stop + size : it.stop) : size;
            start = TNT_MIN(TNT_MAX(start, 0), size), stop = TNT_MIN(TNT_MAX(stop, 0), size);
            count = stop > start ? (stop - start + step - 1) / step : 0;
        } else {
            start = it.has_start ? (it.start < 0 ? it.start + size : it.start) : size - 1;
            stop = it.has_stop ? (it.stop < 0 ? it.stop + size : it.stop) : -1;
            start = TNT_MIN(TNT_MAX(start, -1), size - 1), stop = TNT_MIN(TNT_MAX(stop, -1), size - 1);
            count = start > stop ? (start - stop + (-step) - 1) / (-step) : 0;
        }
        g->w.dim[d] = count, g->ist[d] = xst[d] * step, g->in_off += count ? start * xst[d] : 0;
        if (g->out.ndim >= TNT_MAX_DIMS) return tnt__op_error(n, TNT_ERR_SHAPE, "rank above %d", TNT_MAX_DIMS);
        g->out.dim[g->out.ndim++] = count;
        d++;
    }
    return TNT_OK;
}

/* ---- the operations ---- */

static tnt_status infer_index(const tnt__opnode *n, const tnt__ten *in, tnt__ten *out) {
    const tnt__op_attr *a = &n->a;
    tnt_status s = TNT_OK;
    out[0].dt = n->n_in ? in[0].dt : a->dtype;
    switch (n->kind % 256) {
    case I_SLICE: {
        slice_geom g;
        s = slice_geometry(n, in[0].s, &g);
        out[0].s = g.out;
        return s;
    }
    case I_TAKE: {
        tnt_shape x = in[0].s, idx = in[1].s, o = {0};
        int ax = 0;
        if (!a->has_axis) x = (tnt_shape){1, {tnt_shape_numel(in[0].s)}};
        else if ((s = tnt__axis(n, a->axes[0], x.ndim, &ax)) != TNT_OK) return s;
        if (x.ndim - 1 + idx.ndim > TNT_MAX_DIMS) return tnt__op_error(n, TNT_ERR_SHAPE, "rank above %d", TNT_MAX_DIMS);
        for (int d = 0; d < ax; d++) o.dim[o.ndim++] = x.dim[d];
        for (int d = 0; d < idx.ndim; d++) o.dim[o.ndim++] = idx.dim[d];
        for (int d = ax + 1; d < x.ndim; d++) o.dim[o.ndim++] = x.dim[d];
        out[0].s = o;
        return TNT_OK;
    }
    case I_ONE_HOT: {
        tnt_shape x = in[0].s;
        int ax;
        if (x.ndim + 1 > TNT_MAX_DIMS) return tnt__op_error(n, TNT_ERR_SHAPE, "rank above %d", TNT_MAX_DIMS);
        if ((s = tnt__axis(n, a->axes[0], x.ndim + 1, &ax)) != TNT_OK) return s;
        out[0].s.ndim = x.ndim + 1;
        for (int d = 0, k = 0; d <= x.ndim; d++) out[0].s.dim[d] = d == ax ? a->i0 : x.dim[k++];
        out[0].dt = TNT__F32;
        return TNT_OK;
    }
    case I_CAST: out[0].s = in[0].s, out[0].dt = a->dtype; return TNT_OK;
    case I_CONSTANT: out[0].s = a->data_shape, out[0].dt = a->dtype; return TNT_OK;
    default: out[0].s = in[0].s; return TNT_OK; /* *_like */
    }
}

/* An index value read from a float: whole, and wrapped into [0, size); error naming it. */
static tnt_status index_at(const tnt__opnode *n, float v, int64_t size, int64_t *out) {
    int64_t k = v >= -(float)size && v < (float)size ? (int64_t)v : INT64_MIN; /* no cast out of range */
    if (k == INT64_MIN || (float)k != v)
        return tnt__op_error(n, TNT_ERR_ARG, "index %g is out of range for size %lld", v, (long long)size);
    *out = k < 0 ? k + size : k;
    return TNT_OK;
}

/* take: x viewed as (outer, size, inner) along the axis */
static void take_geom(const tnt__opnode *n, tnt_shape xs, int64_t *outer, int64_t *size, int64_t *inner) {
    int ax = 0;
    if (!n->a.has_axis) xs = (tnt_shape){1, {tnt_shape_numel(xs)}};
    else tnt__axis(n, n->a.axes[0], xs.ndim, &ax);
    *outer = *inner = 1;
    for (int d = 0; d < xs.ndim; d++)
        if (d < ax) *outer *= xs.dim[d];
        else if (d > ax) *inner *= xs.dim[d];
    *size = xs.dim[ax];
}

static tnt_status forward_index(tnt__opctx *c) {
    const tnt__opnode *n = c->node;
    const tnt__op_attr *a = &n->a;
    float *y = c->out[0].d;
    int64_t total = tnt_shape_numel(c->out[0].s);
    switch (n->kind % 256) {
    case I_SLICE: {
        slice_geom g;
        slice_geometry(n, c->in[0].s, &g);
        int64_t ost[TNT_MAX_DIMS];
        tnt__strides(g.w, ost);
        memset(y, 0, (size_t)total * sizeof(float));
        tnt__strided_add(g.w, y, ost, c->in[0].d + g.in_off, g.ist);
        return TNT_OK;
    }
    case I_TAKE: {
        int64_t outer, size, inner, ni = tnt_shape_numel(c->in[1].s);
        take_geom(n, c->in[0].s, &outer, &size, &inner);
        for (int64_t j = 0; j < ni; j++) {
            int64_t k = 0;
            tnt_status s = index_at(n, c->in[1].d[j], size, &k);
            if (s != TNT_OK) return s;
            for (int64_t o = 0; o < outer; o++)
                memcpy(y + (o * ni + j) * inner, c->in[0].d + (o * size + k) * inner, (size_t)inner * sizeof(float));
        }
        return TNT_OK;
    }
    case I_ONE_HOT: {
        int ax;
        tnt__axis(n, a->axes[0], c->in[0].s.ndim + 1, &ax);
        int64_t outer = 1, inner = 1;
        for (int d = 0; d < c->in[0].s.ndim; d++)
            if (d < ax) outer *= c->in[0].s.dim[d];
            else inner *= c->in[0].s.dim[d];
        memset(y, 0, (size_t)total * sizeof(float));
        for (int64_t o = 0; o < outer; o++)
            for (int64_t i = 0; i < inner; i++) {
                float v = c->in[0].d[o * inner + i];
                int64_t k = v >= 0 && v < (float)a->i0 ? (int64_t)v : -1;
                if (k >= 0 && (float)k == v) y[(o * a->i0 + k) * inner + i] = 1.0f; /* else zeros, as tf */
            }
        return TNT_OK;
    }
    case I_CAST:
        for (int64_t i = 0; i < total; i++) {
            float v = c->in[0].d[i];
            y[i] = a->dtype == TNT__BOOL ? (float)(v != 0) : a->dtype == TNT__I32 ? truncf(v) : v;
        }
        return TNT_OK;
    case I_CONSTANT: memcpy(y, a->data, (size_t)total * sizeof(float)); return TNT_OK;
    default: {
        float v = n->kind % 256 == I_ZEROS_LIKE ? 0.0f : n->kind % 256 == I_ONES_LIKE ? 1.0f : (float)a->f0;
        for (int64_t i = 0; i < total; i++) y[i] = v;
        return TNT_OK;
    }
    }
}

static tnt_status backward_index(tnt__opctx *c) {
    const tnt__opnode *n = c->node;
    float *dx = c->din[0];
    const float *g = c->dout[0];
    if (!dx) return TNT_OK;
    switch (n->kind % 256) {
    case I_SLICE: {
        slice_geom sg;
        slice_geometry(n, c->in[0].s, &sg);
        int64_t ost[TNT_MAX_DIMS];
        tnt__strides(sg.w, ost);
        tnt__strided_add(sg.w, dx + sg.in_off, sg.ist, g, ost);
        return TNT_OK;
    }
    case I_TAKE: {
        int64_t outer, size, inner, ni = tnt_shape_numel(c->in[1].s);
        take_geom(n, c->in[0].s, &outer, &size, &inner);
        for (int64_t j = 0; j < ni; j++) {
            int64_t k = 0;
            tnt_status s = index_at(n, c->in[1].d[j], size, &k);
            if (s != TNT_OK) return s;
            for (int64_t o = 0; o < outer; o++) {
                float *d = dx + (o * size + k) * inner;
                const float *gy = g + (o * ni + j) * inner;
                for (int64_t i = 0; i < inner; i++) d[i] += gy[i];
            }
        }
        return TNT_OK;
    }
    case I_CAST: { /* float to float only (the plan gives no gradient to int and bool outputs) */
        int64_t total = tnt_shape_numel(c->in[0].s);
        for (int64_t i = 0; i < total; i++) dx[i] += g[i];
        return TNT_OK;
    }
    }
    return TNT_OK;
}

const tnt__op_def tnt__ops_index[] = {
    {"slice", 1, 1, parse_index, infer_index, forward_index, backward_index},
    {"take", 2, 2, parse_index, infer_index, forward_index, backward_index},
    {"one_hot", 1, 1, parse_index, infer_index, forward_index, NULL},
    {"cast", 1, 1, parse_index, infer_index, forward_index, backward_index},
    {"constant", 0, 0, parse_index, infer_index, forward_index, NULL},
    {"zeros_like", 1, 1, parse_index, infer_index, forward_index, NULL},
    {"ones_like", 1, 1, parse_index, infer_index, forward_index, NULL},
    {"full_like", 1, 1, parse_index, infer_index, forward_index, NULL},
    {0}};

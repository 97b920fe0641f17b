/* shape.c: operations that move values without arithmetic: reshape, transpose, expand_dims,
 * squeeze, broadcast_to, concatenate, stack, split, tile, repeat, pad. Each is a strided copy
 * (tnt__strided_add into zeros) and its backward the same walk the other way, which sums where
 * forward copied one value to several places (broadcast_to, tile, repeat). */
#include "ops/ops.h"

#include <cjson/cJSON.h>
#include <stdio.h>

enum { S_RESHAPE, S_TRANSPOSE, S_EXPAND_DIMS, S_SQUEEZE, S_BROADCAST_TO, S_CONCATENATE, S_STACK, S_SPLIT, S_TILE,
       S_REPEAT, S_PAD };

/* a * b when both are >= 0 and the product stays below 2^40 (larger shapes are refused) */
static bool mul_ok(int64_t a, int64_t b, int64_t *out) {
    if (a < 0 || b < 0 || (a && b > ((int64_t)1 << 40) / a)) return false;
    *out = a * b;
    return true;
}

static tnt_status parse_shape_op(tnt__opnode *n, const cJSON *attrs) {
    tnt__op_attr *a = &n->a;
    tnt_status s = TNT_OK;
    switch (n->kind % 256) {
    case S_RESHAPE:
    case S_BROADCAST_TO:
        if (!cJSON_GetObjectItemCaseSensitive(attrs, "shape")) return tnt__error(TNT_ERR_ARG, "attribute \"shape\" is missing");
        return tnt__oa_ints(attrs, "shape", a);
    case S_TRANSPOSE: return tnt__oa_axes(attrs, "axes", a);
    case S_EXPAND_DIMS:
        s = tnt__oa_axes(attrs, "axis", a);
        if (s == TNT_OK && !a->has_axis) s = tnt__error(TNT_ERR_ARG, "attribute \"axis\" is missing");
        return s;
    case S_SQUEEZE: return tnt__oa_axes(attrs, "axis", a);
    case S_CONCATENATE:
    case S_STACK:
        a->axes[0] = 0, a->n_axes = 1;
        return tnt__oa_axes(attrs, "axis", a);
    case S_SPLIT: {
        a->axes[0] = 0, a->n_axes = 1;
        s = tnt__oa_axes(attrs, "axis", a);
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(attrs, "indices_or_sections");
        if (s != TNT_OK) return s;
        if (cJSON_IsNumber(v)) {
            s = tnt__oa_int(attrs, "indices_or_sections", &a->i0);
            if (s == TNT_OK && (a->i0 < 1 || a->i0 > TNT__MAX_OP_IN))
                s = tnt__error(TNT_ERR_ARG, "indices_or_sections %lld (expected 1..%d sections)", (long long)a->i0,
                               TNT__MAX_OP_IN);
            n->n_out = (int)a->i0;
            return s;
        }
        if (!cJSON_IsArray(v)) return tnt__error(TNT_ERR_ARG, "attribute \"indices_or_sections\" is missing");
        s = tnt__oa_ints(attrs, "indices_or_sections", a);
        for (int i = 0; s == TNT_OK && i < a->n_ints; i++)
            if (a->ints[i] < 0 || (i && a->ints[i] < a->ints[i - 1]))
                s = tnt__error(TNT_ERR_ARG, "indices_or_sections: split points must be ascending and >= 0");
        n->n_out = a->n_ints + 1;
        return s;
    }
    case S_TILE:
        s = tnt__oa_ints(attrs, "repeats", a);
        for (int i = 0; s == TNT_OK && i < a->n_ints; i++)
            if (a->ints[i] < 1) s = tnt__error(TNT_ERR_ARG, "repeats: %lld (expected >= 1)", (long long)a->ints[i]);
        if (s == TNT_OK && (a->n_ints < 1 || a->n_ints > TNT_MAX_DIMS))
            s = tnt__error(TNT_ERR_ARG, "attribute \"repeats\": expected 1..%d counts", TNT_MAX_DIMS);
        return s;
    case S_REPEAT:
        s = tnt__oa_int(attrs, "repeats", &a->i0);
        if (s == TNT_OK && a->i0 < 1)
            s = tnt__error(TNT_ERR_ARG, "attribute \"repeats\": expected one count >= 1 (per-element counts are not "
                           "supported)");
        if (s == TNT_OK) s = tnt__oa_axes(attrs, "axis", a);
        return s;
    case S_PAD: {
        const cJSON *pw = cJSON_GetObjectItemCaseSensitive(attrs, "pad_width"), *mode = cJSON_GetObjectItemCaseSensitive(attrs, "mode"), *e;
        if (mode && !(cJSON_IsString(mode) && strcmp(mode->valuestring, "constant") == 0))
            return tnt__error(TNT_ERR_UNSUPPORTED, "mode %s (only \"constant\" is supported)",
                              cJSON_IsString(mode) ? mode->valuestring : "?");
        s = tnt__oa_num(attrs, "constant_values", &a->f0);
        if (s != TNT_OK) return s;
        if (!cJSON_IsArray(pw)) return tnt__error(TNT_ERR_ARG, "attribute \"pad_width\" is missing");
        a->n_ints = 0;
        cJSON_ArrayForEach(e, pw) { /* [[b, a], ...] or one [b, a] for every axis */
            const cJSON *pair = cJSON_IsArray(e) ? e : pw;
            if (cJSON_GetArraySize(pair) != 2 || a->n_ints >= 2 * TNT_MAX_DIMS)
                return tnt__error(TNT_ERR_ARG, "attribute \"pad_width\": expected pairs [before, after]");
            for (int k = 0; k < 2; k++) {
                const cJSON *x = cJSON_GetArrayItem(pair, k);
                if (!cJSON_IsNumber(x) || x->valuedouble < 0 || x->valuedouble > 1e9 || x->valuedouble != (int64_t)x->valuedouble)
                    return tnt__error(TNT_ERR_ARG, "attribute \"pad_width\": widths must be ints >= 0");
                a->ints[a->n_ints++] = (int64_t)x->valuedouble;
            }
            if (pair == pw) {
                a->flag = true; /* one pair for all axes */
                break;
            }
        }
        return TNT_OK;
    }
    }
    return TNT_OK;
}

static tnt_status infer_shape_op(const tnt__opnode *n, const tnt__ten *in, tnt__ten *out) {
    const tnt__op_attr *a = &n->a;
    tnt_shape x = in[0].s, o = {0};
    char sx[96], so[96];
    tnt_status s = TNT_OK;
    out[0].dt = in[0].dt;
    switch (n->kind % 256) {
    case S_RESHAPE:
    case S_BROADCAST_TO: {
        int unknown = -1;
        int64_t known = 1;
        o.ndim = a->n_ints;
        if (o.ndim > TNT_MAX_DIMS) return tnt__op_error(n, TNT_ERR_SHAPE, "target rank %d is above %d", o.ndim, TNT_MAX_DIMS);
        for (int d = 0; d < o.ndim; d++) {
            o.dim[d] = a->ints[d];
            if (a->ints[d] == -1 && n->kind % 256 == S_RESHAPE && unknown < 0) unknown = d;
            else if (a->ints[d] < 0) return tnt__op_error(n, TNT_ERR_SHAPE, "target size %lld at axis %d", (long long)a->ints[d], d);
            else if (!mul_ok(known, a->ints[d], &known))
                return tnt__op_error(n, TNT_ERR_SHAPE, "target shape too large");
        }
        if (n->kind % 256 == S_BROADCAST_TO) {
            tnt_shape b;
            s = tnt__broadcast(n, x, o, &b);
            if (s == TNT_OK && !tnt__shape_equal(b, o))
                s = tnt__op_error(n, TNT_ERR_SHAPE, "shape %s cannot be broadcast to %s", tnt_shape_str(x, sx, sizeof sx),
                                  tnt_shape_str(o, so, sizeof so));
            break;
        }
        if (unknown >= 0 && known > 0 && tnt_shape_numel(x) % known == 0) o.dim[unknown] = tnt_shape_numel(x) / known;
        if (tnt_shape_numel(o) != tnt_shape_numel(x) || (unknown >= 0 && known == 0))
            return tnt__op_error(n, TNT_ERR_SHAPE, "cannot reshape %s (%lld values) into %s",
                                 tnt_shape_str(x, sx, sizeof sx), (long long)tnt_shape_numel(x),
                                 tnt_shape_str(o, so, sizeof so));
        break;
    }
    case S_TRANSPOSE: {
        bool seen[TNT_MAX_DIMS] = {0};
        if (a->has_axis && a->n_axes != x.ndim)
            return tnt__op_error(n, TNT_ERR_SHAPE, "axes name %d axes for shape %s", a->n_axes, tnt_shape_str(x, sx, sizeof sx));
        o.ndim = x.ndim;
        for (int d = 0; d < x.ndim; d++) {
            int ax = x.ndim - 1 - d;
            if (a->has_axis && (s = tnt__axis(n, a->axes[d], x.ndim, &ax)) != TNT_OK) return s;
            if (seen[ax]) return tnt__op_error(n, TNT_ERR_ARG, "axes repeat axis %d", a->axes[d]);
            seen[ax] = true;
            o.dim[d] = x.dim[ax];
        }
        break;
    }
    case S_EXPAND_DIMS: {
        bool add[TNT_MAX_DIMS] = {0};
        int r = x.ndim + a->n_axes;
        if (r > TNT_MAX_DIMS) return tnt__op_error(n, TNT_ERR_SHAPE, "rank %d is above %d", r, TNT_MAX_DIMS);
        for (int i = 0; i < a->n_axes; i++) {
            int ax;
            if ((s = tnt__axis(n, a->axes[i], r, &ax)) != TNT_OK) return s;
            add[ax] = true;
        }
        o.ndim = r;
        for (int d = 0, k = 0; d < r; d++) o.dim[d] = add[d] ? 1 : x.dim[k++];
        break;
    }
    case S_SQUEEZE: {
        bool drop[TNT_MAX_DIMS] = {0};
        for (int d = 0; !a->has_axis && d < x.ndim; d++) drop[d] = x.dim[d] == 1;
        for (int i = 0; a->has_axis && i < a->n_axes; i++) {
            int ax;
            if ((s = tnt__axis(n, a->axes[i], x.ndim, &ax)) != TNT_OK) return s;
            if (x.dim[ax] != 1)
                return tnt__op_error(n, TNT_ERR_SHAPE, "cannot squeeze axis %d of shape %s (size %lld, not 1)", a->axes[i],
                                     tnt_shape_str(x, sx, sizeof sx), (long long)x.dim[ax]);
            drop[ax] = true;
        }
        for (int d = 0; d < x.ndim; d++)
            if (!drop[d]) o.dim[o.ndim++] = x.dim[d];
        break;
    }
    case S_CONCATENATE:
    case S_STACK: {
        bool stack = n->kind % 256 == S_STACK;
        int ax;
        if ((s = tnt__axis(n, a->axes[0], x.ndim + stack, &ax)) != TNT_OK) return s;
        for (int k = 1; k < n->n_in; k++) {
            bool ok = in[k].s.ndim == x.ndim;
            for (int d = 0; ok && d < x.ndim; d++) ok = in[k].s.dim[d] == x.dim[d] || (!stack && d == ax);
            if (!ok)
                return tnt__op_error(n, TNT_ERR_SHAPE, "input %d has shape %s, input 0 %s (%s)", k,
                                     tnt_shape_str(in[k].s, so, sizeof so), tnt_shape_str(x, sx, sizeof sx),
                                     stack ? "stacked shapes must be equal" : "only the joined axis may differ");
            if (in[k].dt == TNT__F32) out[0].dt = TNT__F32;
        }
        if (stack) {
            if (x.ndim + 1 > TNT_MAX_DIMS) return tnt__op_error(n, TNT_ERR_SHAPE, "rank above %d", TNT_MAX_DIMS);
            o.ndim = x.ndim + 1;
            for (int d = 0, k = 0; d < o.ndim; d++) o.dim[d] = d == ax ? n->n_in : x.dim[k++];
        } else {
            o = x;
            o.dim[ax] = 0;
            for (int k = 0; k < n->n_in; k++) o.dim[ax] += in[k].s.dim[ax];
        }
        break;
    }
    case S_SPLIT: {
        int ax;
        if ((s = tnt__axis(n, a->axes[0], x.ndim, &ax)) != TNT_OK) return s;
        if (a->n_ints == 0 && x.dim[ax] % a->i0)
            return tnt__op_error(n, TNT_ERR_SHAPE, "axis %d of shape %s (size %lld) does not split into %lld equal parts",
                                 a->axes[0], tnt_shape_str(x, sx, sizeof sx), (long long)x.dim[ax], (long long)a->i0);
        for (int k = 0; k < n->n_out; k++) {
            int64_t b = a->n_ints ? (k ? a->ints[k - 1] : 0) : k * (x.dim[ax] / a->i0);
            int64_t e = a->n_ints ? (k < a->n_ints ? a->ints[k] : x.dim[ax]) : (k + 1) * (x.dim[ax] / a->i0);
            b = TNT_MIN(b, x.dim[ax]), e = TNT_MIN(TNT_MAX(e, b), x.dim[ax]);
            out[k].s = x, out[k].s.dim[ax] = e - b, out[k].dt = in[0].dt;
        }
        return TNT_OK;
    }
    case S_TILE: {
        int r = TNT_MAX(x.ndim, a->n_ints);
        o.ndim = r;
        for (int d = 0; d < r; d++) {
            int dx = d - (r - x.ndim), dr = d - (r - a->n_ints);
            if (!mul_ok(dx >= 0 ? x.dim[dx] : 1, dr >= 0 ? a->ints[dr] : 1, &o.dim[d]))
                return tnt__op_error(n, TNT_ERR_SHAPE, "tile repeats too large");
        }
        break;
    }
    case S_REPEAT: {
        int ax = 0;
        if (!a->has_axis) x = (tnt_shape){1, {tnt_shape_numel(x)}};
        else if ((s = tnt__axis(n, a->axes[0], x.ndim, &ax)) != TNT_OK) return s;
        o = x;
        if (!mul_ok(x.dim[ax], a->i0, &o.dim[ax])) return tnt__op_error(n, TNT_ERR_SHAPE, "repeats too large");
        break;
    }
    case S_PAD: {
        if (!a->flag && a->n_ints != 2 * x.ndim)
            return tnt__op_error(n, TNT_ERR_SHAPE, "pad_width has %d pairs for shape %s", a->n_ints / 2,
                                 tnt_shape_str(x, sx, sizeof sx));
        o = x;
        for (int d = 0; d < x.ndim; d++) o.dim[d] += a->flag ? a->ints[0] + a->ints[1] : a->ints[2 * d] + a->ints[2 * d + 1];
        break;
    }
    }
    out[0].s = o;
    return s;
}

/* The copy of a shape-moving operation as one strided walk: over shape w, out at ost and in at ist. */
typedef struct move {
    tnt_shape w;
    int64_t ost[TNT_MAX_DIMS], ist[TNT_MAX_DIMS];
    int64_t out_off;
} move;

/* tile and repeat walk (reps, size) pairs; axes with one repeat are not doubled */
static tnt_status move_pairs(const tnt__opnode *n, tnt_shape x, const int64_t *reps, bool rep_inner, move *m) {
    int64_t xst[TNT_MAX_DIMS], acc = 1, ost_d[TNT_MAX_DIMS];
    tnt__strides(x, xst);
    for (int d = x.ndim - 1; d >= 0; d--) ost_d[d] = acc, acc *= x.dim[d] * reps[d];
    m->w.ndim = 0;
    for (int d = 0; d < x.ndim; d++) {
        if (m->w.ndim + 1 + (reps[d] > 1) > TNT_MAX_DIMS)
            return tnt__op_error(n, TNT_ERR_UNSUPPORTED, "repeats on more than %d axes at once", TNT_MAX_DIMS / 2);
        int k = m->w.ndim;
        if (reps[d] > 1 && !rep_inner) { /* tile: (rep, size) */
            m->w.dim[k] = reps[d], m->ost[k] = ost_d[d] * x.dim[d], m->ist[k] = 0, k++;
            m->w.dim[k] = x.dim[d], m->ost[k] = ost_d[d], m->ist[k] = xst[d], k++;
        } else if (reps[d] > 1) { /* repeat: (size, rep) */
            m->w.dim[k] = x.dim[d], m->ost[k] = ost_d[d] * reps[d], m->ist[k] = xst[d], k++;
            m->w.dim[k] = reps[d], m->ost[k] = ost_d[d], m->ist[k] = 0, k++;
        } else {
            m->w.dim[k] = x.dim[d], m->ost[k] = ost_d[d], m->ist[k] = xst[d], k++;
        }
        m->w.ndim = k;
    }
    return TNT_OK;
}

/* The walk of single-input operations (all but concatenate, stack, split). */
static tnt_status move_of(const tnt__opnode *n, tnt_shape x, tnt_shape o, move *m) {
    const tnt__op_attr *a = &n->a;
    m->out_off = 0;
    switch (n->kind % 256) {
    case S_TRANSPOSE: {
        int64_t os[TNT_MAX_DIMS];
        tnt__strides(o, os);
        m->w = x;
        tnt__strides(x, m->ist);
        for (int d = 0; d < x.ndim; d++) {
            int ax = x.ndim - 1 - d;
            if (a->has_axis) tnt__axis(n, a->axes[d], x.ndim, &ax);
            m->ost[ax] = os[d];
        }
        return TNT_OK;
    }
    case S_BROADCAST_TO:
        m->w = o;
        tnt__strides(o, m->ost);
        tnt__bstrides(x, o, m->ist);
        return TNT_OK;
    case S_TILE: {
        int r = o.ndim;
        tnt_shape xp = {.ndim = r};
        int64_t reps[TNT_MAX_DIMS];
        for (int d = 0; d < r; d++) {
            int dx = d - (r - x.ndim), dr = d - (r - a->n_ints);
            xp.dim[d] = dx >= 0 ? x.dim[dx] : 1;
            reps[d] = dr >= 0 ? a->ints[dr] : 1;
        }
        return move_pairs(n, xp, reps, false, m);
    }
    case S_REPEAT: {
        int64_t reps[TNT_MAX_DIMS];
        tnt_shape xp = x;
        int ax = 0;
        if (!a->has_axis) xp = (tnt_shape){1, {tnt_shape_numel(x)}};
        else tnt__axis(n, a->axes[0], x.ndim, &ax);
        for (int d = 0; d < xp.ndim; d++) reps[d] = d == ax ? a->i0 : 1;
        return move_pairs(n, xp, reps, true, m);
    }
    case S_PAD: {
        int64_t os[TNT_MAX_DIMS];
        tnt__strides(o, os);
        m->w = x;
        tnt__strides(x, m->ist);
        for (int d = 0; d < x.ndim; d++) {
            m->ost[d] = os[d];
            m->out_off += os[d] * (a->flag ? a->ints[0] : a->ints[2 * d]);
        }
        return TNT_OK;
    }
    default: /* reshape, expand_dims, squeeze: the same values in the same order */
        m->w = (tnt_shape){1, {tnt_shape_numel(x)}};
        m->ost[0] = m->ist[0] = 1;
        return TNT_OK;
    }
}

/* Joined axis of concatenate/stack/split: outer blocks, and each part's block length. */
static int64_t join_outer(tnt_shape whole, int ax, int64_t *after) {
    int64_t outer = 1;
    *after = 1;
    for (int d = 0; d < whole.ndim; d++)
        if (d < ax) outer *= whole.dim[d];
        else if (d > ax) *after *= whole.dim[d];
    return outer;
}

/* Copies between the whole (joined) tensor and its parts: to_whole, or back (accumulating). */
static void join_copy(const tnt__opnode *n, tnt_shape whole, float *wd, int n_parts, const tnt__ten *parts,
                      float *const *part_d, bool to_whole, bool stack) {
    int ax;
    tnt__axis(n, n->a.axes[0], whole.ndim, &ax);
    int64_t after, outer = join_outer(whole, ax, &after), row = whole.dim[ax] * after;
    int64_t at = 0;
    for (int k = 0; k < n_parts; k++) {
        int64_t len = (stack ? 1 : parts[k].s.dim[ax]) * after;
        float *pd = part_d[k];
        if (pd)
            for (int64_t o = 0; o < outer; o++) {
                float *w = wd + o * row + at;
                float *p = pd + o * len;
                if (to_whole) memcpy(w, p, (size_t)len * sizeof(float));
                else for (int64_t i = 0; i < len; i++) p[i] += w[i];
            }
        at += len;
    }
}

static tnt_status forward_shape_op(tnt__opctx *c) {
    const tnt__opnode *n = c->node;
    int op = n->kind % 256;
    if (op == S_CONCATENATE || op == S_STACK) {
        float *parts[TNT__MAX_OP_IN];
        for (int k = 0; k < c->n_in; k++) parts[k] = c->in[k].d;
        join_copy(n, c->out[0].s, c->out[0].d, c->n_in, c->in, parts, true, op == S_STACK);
        return TNT_OK;
    }
    if (op == S_SPLIT) { /* split is concatenate backward, with copies */
        float *parts[TNT__MAX_OP_IN];
        for (int k = 0; k < c->n_out; k++) {
            parts[k] = c->out[k].d;
            memset(parts[k], 0, (size_t)tnt_shape_numel(c->out[k].s) * sizeof(float));
        }
        join_copy(n, c->in[0].s, c->in[0].d, c->n_out, c->out, parts, false, false);
        return TNT_OK;
    }
    move m;
    tnt_status s = move_of(n, c->in[0].s, c->out[0].s, &m);
    if (s != TNT_OK) return s;
    float *y = c->out[0].d;
    int64_t total = tnt_shape_numel(c->out[0].s);
    memset(y, 0, (size_t)total * sizeof(float));
    tnt__strided_add(m.w, y + m.out_off, m.ost, c->in[0].d, m.ist);
    if (op == S_PAD && n->a.f0 != 0) { /* the border takes the constant: mark the interior first */
        float *inside = tnt__scratch_get(c->scratch, (size_t)total * sizeof(float)), one = 1.0f;
        int64_t zero[TNT_MAX_DIMS] = {0};
        if (!inside) return TNT_ERR_NOMEM;
        memset(inside, 0, (size_t)total * sizeof(float));
        tnt__strided_add(m.w, inside + m.out_off, m.ost, &one, zero);
        for (int64_t i = 0; i < total; i++)
            if (inside[i] == 0) y[i] = (float)n->a.f0;
    }
    return TNT_OK;
}

static tnt_status backward_shape_op(tnt__opctx *c) {
    const tnt__opnode *n = c->node;
    int op = n->kind % 256;
    if (op == S_CONCATENATE || op == S_STACK) {
        join_copy(n, c->out[0].s, (float *)c->dout[0], c->n_in, c->in, c->din, false, op == S_STACK);
        return TNT_OK;
    }
    if (op == S_SPLIT) {
        int ax;
        tnt__axis(n, n->a.axes[0], c->in[0].s.ndim, &ax);
        int64_t after, outer = join_outer(c->in[0].s, ax, &after), row = c->in[0].s.dim[ax] * after, at = 0;
        for (int k = 0; k < c->n_out; k++) {
            int64_t len = c->out[k].s.dim[ax] * after;
            for (int64_t o = 0; c->dout[k] && o < outer; o++)
                for (int64_t i = 0; i < len; i++) c->din[0][o * row + at + i] += c->dout[k][o * len + i];
            at += len;
        }
        return TNT_OK;
    }
    move m;
    tnt_status s = move_of(n, c->in[0].s, c->out[0].s, &m);
    if (s != TNT_OK) return s;
    tnt__strided_add(m.w, c->din[0], m.ist, c->dout[0] + m.out_off, m.ost);
    return TNT_OK;
}

#define SHAPE_OP(name, lo, hi) {name, lo, hi, parse_shape_op, infer_shape_op, forward_shape_op, backward_shape_op}

const tnt__op_def tnt__ops_shape[] = {
    SHAPE_OP("reshape", 1, 1), SHAPE_OP("transpose", 1, 1), SHAPE_OP("expand_dims", 1, 1),
    SHAPE_OP("squeeze", 1, 1), SHAPE_OP("broadcast_to", 1, 1), SHAPE_OP("concatenate", 1, TNT__MAX_OP_IN),
    SHAPE_OP("stack", 1, TNT__MAX_OP_IN), SHAPE_OP("split", 1, 1), SHAPE_OP("tile", 1, 1), SHAPE_OP("repeat", 1, 1),
    SHAPE_OP("pad", 1, 1), {0}};

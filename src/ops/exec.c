/* exec.c: plans (shapes of every value for concrete input shapes, the forward arena, the
 * gradient arena reused by liveness), forward and reverse-mode evaluation, and the tensor
 * helpers the operations share (broadcasting, strides, strided copy-add, scratch memory).
 *
 * Storage: a node's outputs live in the caller's workspace from forward to backward (the VJPs
 * read them); a graph output produced by a node is written straight into the caller's output
 * buffer. Gradients of intermediate values live in a plan-owned arena: walking the nodes last to
 * first, a value's gradient is needed from its last consumer to its producer, and a first-fit
 * placement lets values whose intervals do not meet share bytes. Fewer bytes and passes where the
 * graph allows (a Transformer block in keras.ops: these brought it from 0.81-0.83 to 0.92-0.96 of
 * the same block from the library's layers, CPU time at 1 thread): an add's operand read by
 * nothing else takes the output's gradient bytes (grad_alias); an add or a unary operation whose
 * backward reads only its output writes over such an operand (in_place_operand); a gradient whose
 * only contribution comes from a matmul or einsum is written by it, not zeroed first (fresh). */
#include "ops/ops.h"

#include <math.h>
#include <stdio.h>

#define ALIGN_FLOATS 16 /* 64 bytes */

struct tnt__opplan {
    const tnt_opgraph *g;
    int nv, leaves;         /* values; inputs + weights */
    tnt__ten *val;          /* shape and dtype of every value */
    int64_t *fwd_off;       /* floats into the workspace; -1: a leaf or bound to an output */
    int *out_bind;          /* graph output a node value is written into, or -1 */
    int *alias;             /* a view (reshape, expand_dims, squeeze, identity, stop_gradient):
                               the value whose storage it reads, or -1 */
    size_t ws_floats;
    bool *needs_grad;       /* float value that depends on something differentiated */
    bool *has_src;          /* its gradient receives a contribution */
    bool *runs;             /* per node: backward runs */
    int *last_use;          /* highest consuming node; n_nodes for a graph output */
    int64_t *grad_off;      /* floats into grad arena; -1: none (leaf, or aliased to the output's) */
    int *alias_out;         /* the graph output whose incoming gradient is this value's, or -1 */
    bool *fresh;            /* its gradient's one contribution comes from a matmul or einsum, which
                               writes it (beta 0): no zeroing before */
    int *grad_alias;        /* an add's (subtract's first) operand of the output's shape that nothing
                               else reads: its gradient is the output's (that value id), else -1 */
    float *grad;            /* the arena */
    size_t grad_floats;
    bool input_grads;
    tnt__scratch scratch;
};

/* ---- tensor helpers ---- */

void *tnt__scratch_get(tnt__scratch *s, size_t bytes) {
    bytes = bytes ? (bytes + 63) & ~(size_t)63 : 64; /* never NULL for an empty tensor */
    s->peak += bytes;
    if (s->used + bytes <= s->cap) {
        void *p = s->base + s->used;
        s->used += bytes;
        return p;
    }
    if (s->n_extra == (int)TNT_ARRAY_LEN(s->extra)) {
        tnt__error(TNT_ERR_NOMEM, "operation scratch: too many allocations");
        return NULL;
    }
    void *p = tnt__alloc(bytes);
    if (p) s->extra[s->n_extra++] = p;
    return p;
}

/* After a node: frees the overflow and grows the block to the peak for the next time. */
static void scratch_reset(tnt__scratch *s) {
    for (int i = 0; i < s->n_extra; i++) tnt__free(s->extra[i]);
    s->n_extra = 0;
    if (s->peak > s->cap) {
        tnt__free(s->base);
        s->base = tnt__alloc(s->peak);
        s->cap = s->base ? s->peak : 0;
    }
    s->used = s->peak = 0;
}

tnt_status tnt__axis(const tnt__opnode *n, int axis, int rank, int *out) {
    int a = axis < 0 ? axis + rank : axis;
    if (a < 0 || a >= rank)
        return tnt__op_error(n, TNT_ERR_SHAPE, "axis %d is out of range for rank %d (expected %d..%d)", axis, rank,
                             -rank, rank - 1);
    *out = a;
    return TNT_OK;
}

tnt_status tnt__broadcast(const tnt__opnode *n, tnt_shape a, tnt_shape b, tnt_shape *out) {
    tnt_shape o = {.ndim = TNT_MAX(a.ndim, b.ndim)};
    for (int d = 0; d < o.ndim; d++) {
        int da = d - (o.ndim - a.ndim), db = d - (o.ndim - b.ndim);
        int64_t x = da >= 0 ? a.dim[da] : 1, y = db >= 0 ? b.dim[db] : 1;
        if (x != y && x != 1 && y != 1) {
            char sa[96], sb[96];
            return tnt__op_error(n, TNT_ERR_SHAPE, "shapes %s and %s do not broadcast (axis %d: %lld against %lld)",
                                 tnt_shape_str(a, sa, sizeof sa), tnt_shape_str(b, sb, sizeof sb), d - o.ndim,
                                 (long long)x, (long long)y);
        }
        o.dim[d] = x == 1 ? y : x;
    }
    *out = o;
    return TNT_OK;
}

void tnt__strides(tnt_shape s, int64_t *st) {
    int64_t acc = 1;
    for (int d = s.ndim - 1; d >= 0; d--) st[d] = acc, acc *= s.dim[d];
}

void tnt__bstrides(tnt_shape s, tnt_shape out, int64_t *st) {
    int64_t own[TNT_MAX_DIMS];
    tnt__strides(s, own);
    for (int d = 0; d < out.ndim; d++) {
        int ds = d - (out.ndim - s.ndim);
        st[d] = ds >= 0 && s.dim[ds] != 1 ? own[ds] : 0;
    }
}

void tnt__strided_add(tnt_shape s, float *dst, const int64_t *dstst, const float *src, const int64_t *srcst) {
    int64_t n = tnt_shape_numel(s);
    if (n == 0) return;
    if (s.ndim == 0) {
        dst[0] += src[0];
        return;
    }
    int64_t idx[TNT_MAX_DIMS] = {0}, inner = s.dim[s.ndim - 1];
    int last = s.ndim - 1;
    int64_t io = 0, is = 0;
    for (int64_t done = 0; done < n; done += inner) {
        const int64_t so = srcst[last], doo = dstst[last];
        float *d = dst + io;
        const float *sp = src + is;
        if (doo == 1 && so == 1) /* the common rows: contiguous on both sides (vectorized) */
            for (int64_t i = 0; i < inner; i++) d[i] += sp[i];
        else if (doo == 0) {     /* a sum along the row */
            float acc = 0;
            for (int64_t i = 0; i < inner; i++) acc += sp[i * so];
            d[0] += acc;
        } else
            for (int64_t i = 0; i < inner; i++) d[i * doo] += sp[i * so];
        for (int d = last - 1; d >= 0; d--) {
            idx[d]++, io += dstst[d], is += srcst[d];
            if (idx[d] < s.dim[d]) break;
            io -= dstst[d] * s.dim[d], is -= srcst[d] * s.dim[d], idx[d] = 0;
        }
    }
}

/* Rows along the last axis, in explicit lanes: GCC vectorizes the lanes without reassociating a
 * serial sum (which -O3 leaves scalar: a chain of dependent adds), and the order stays fixed, so
 * results are the same on every run and every rank. */
#define ROW_LANES 8

double tnt__row_sum(const float *x, int64_t n) {
    double l[ROW_LANES] = {0}, s = 0;
    int64_t i = 0;
    for (; i + ROW_LANES <= n; i += ROW_LANES)
        for (int j = 0; j < ROW_LANES; j++) l[j] += x[i + j];
    for (int j = 0; j < ROW_LANES; j++) s += l[j];
    for (; i < n; i++) s += x[i];
    return s;
}

double tnt__row_sqdev(const float *x, int64_t n, double mean) {
    double l[ROW_LANES] = {0}, s = 0;
    int64_t i = 0;
    for (; i + ROW_LANES <= n; i += ROW_LANES)
        for (int j = 0; j < ROW_LANES; j++) l[j] += ((double)x[i + j] - mean) * ((double)x[i + j] - mean);
    for (int j = 0; j < ROW_LANES; j++) s += l[j];
    for (; i < n; i++) s += ((double)x[i] - mean) * ((double)x[i] - mean);
    return s;
}

float tnt__row_max(const float *x, int64_t n) {
    float l[2 * ROW_LANES], m = -INFINITY;
    for (int j = 0; j < 2 * ROW_LANES; j++) l[j] = -INFINITY;
    int64_t i = 0;
    for (; i + 2 * ROW_LANES <= n; i += 2 * ROW_LANES)
        for (int j = 0; j < 2 * ROW_LANES; j++) l[j] = x[i + j] > l[j] ? x[i + j] : l[j];
    for (int j = 0; j < 2 * ROW_LANES; j++) m = l[j] > m ? l[j] : m;
    for (; i < n; i++) m = x[i] > m ? x[i] : m;
    return m;
}

float tnt__row_dot(const float *a, const float *b, int64_t n) {
    float l[2 * ROW_LANES] = {0}, s = 0;
    int64_t i = 0;
    for (; i + 2 * ROW_LANES <= n; i += 2 * ROW_LANES)
        for (int j = 0; j < 2 * ROW_LANES; j++) l[j] += a[i + j] * b[i + j];
    for (int j = 0; j < 2 * ROW_LANES; j++) s += l[j];
    for (; i < n; i++) s += a[i] * b[i];
    return s;
}

/* ---- plans ---- */

static bool is_view(const tnt__op_def *def) {
    static const char *const views[] = {"reshape", "expand_dims", "squeeze", "identity", "stop_gradient"};
    for (size_t i = 0; i < TNT_ARRAY_LEN(views); i++)
        if (!strcmp(def->name, views[i])) return true;
    return false;
}

/* A shape whose element count is below 2^36 (256 GiB of floats), computed without overflow. */
static bool numel_ok(tnt_shape s) {
    int64_t n = 1;
    for (int d = 0; d < s.ndim; d++) {
        if (s.dim[d] < 0) return false;
        if (s.dim[d] && n > ((int64_t)1 << 36) / s.dim[d]) return false;
        n *= s.dim[d];
    }
    return true;
}

static size_t padded(int64_t n) { return (size_t)((n + ALIGN_FLOATS - 1) / ALIGN_FLOATS * ALIGN_FLOATS); }

/* First-fit offset for a gradient live on nodes [lo, hi] beside those placed already. */
static int64_t place(const tnt__opplan *p, int v, int64_t size, const int *lo, const int *hi) {
    int64_t off = 0;
    for (bool moved = true; moved;) {
        moved = false;
        for (int u = 0; u < p->nv; u++) {
            if (u == v || p->grad_off[u] < 0 || hi[u] < lo[v] || hi[v] < lo[u]) continue;
            int64_t us = (int64_t)padded(tnt_shape_numel(p->val[u].s));
            if (p->grad_off[u] < off + size && off < p->grad_off[u] + us) off = p->grad_off[u] + us, moved = true;
        }
    }
    return off;
}

/* An operation writes its output over an operand of the same shape when nothing else reads that
 * operand and no backward needs its values: the operation is an add or subtract (whose backward
 * reads no values) or a unary one whose backward reads only its output, the operand came from a
 * matmul, einsum, add or subtract (whose backward reads only their inputs) and neither is a graph
 * output (the bias adds, residuals and ReLU of a Transformer block: less forward storage, no
 * fresh lines to fill). The operand, or -1. */
static int in_place_operand(const tnt__opplan *p, const tnt__opnode *n, const int *reads, const int *producer) {
    static const char *const hosts[] = {"matmul", "einsum", "add", "subtract"};
    static const char *const writers[] = {"add", "subtract", "relu", "exp", "tanh", "sigmoid", "sqrt", "rsqrt",
                                          "reciprocal", "expm1"};
    const char *name = tnt__op_get(n->kind)->name;
    bool writer = false;
    for (size_t w = 0; w < TNT_ARRAY_LEN(writers); w++) writer |= !strcmp(name, writers[w]);
    if (!writer) return -1;
    for (int k = 0; k < p->g->n_outputs; k++)
        if (p->g->outputs[k] == n->out0) return -1;
    for (int k = 0; k < n->n_in; k++) {
        int v = n->in[k];
        if (v < p->leaves || reads[v] != 1 || p->fwd_off[v] < 0 || !tnt__shape_equal(p->val[v].s, p->val[n->out0].s))
            continue;
        const char *from = tnt__op_get(p->g->nodes[producer[v]].kind)->name;
        for (size_t h = 0; h < TNT_ARRAY_LEN(hosts); h++)
            if (!strcmp(from, hosts[h])) return v;
    }
    return -1;
}

void tnt__opplan_destroy(tnt__opplan *p) {
    if (!p) return;
    free(p->val), free(p->fwd_off), free(p->out_bind), free(p->alias), free(p->needs_grad), free(p->has_src), free(p->runs);
    free(p->last_use), free(p->grad_off), free(p->alias_out), free(p->grad_alias), free(p->fresh);
    tnt__free(p->grad);
    scratch_reset(&p->scratch);
    tnt__free(p->scratch.base);
    free(p);
}

tnt__opplan *tnt__opplan_create(const tnt_opgraph *g, const tnt_shape *in_shapes, bool input_grads) {
    char a[96], b[96];
    tnt__opplan *p = tnt__calloc(1, sizeof *p);
    if (!p) return NULL;
    p->g = g, p->nv = g->n_values, p->leaves = g->n_inputs + g->n_weights, p->input_grads = input_grads;
    int nv = p->nv, nn = g->n_nodes;
    p->val = tnt__calloc((size_t)nv + 1, sizeof *p->val);
    p->fwd_off = tnt__calloc((size_t)nv + 1, sizeof *p->fwd_off);
    p->out_bind = tnt__calloc((size_t)nv + 1, sizeof *p->out_bind);
    p->alias = tnt__calloc((size_t)nv + 1, sizeof *p->alias);
    p->needs_grad = tnt__calloc((size_t)nv + 1, 1);
    p->has_src = tnt__calloc((size_t)nv + 1, 1);
    p->runs = tnt__calloc((size_t)nn + 1, 1);
    p->last_use = tnt__calloc((size_t)nv + 1, sizeof *p->last_use);
    p->grad_off = tnt__calloc((size_t)nv + 1, sizeof *p->grad_off);
    p->alias_out = tnt__calloc((size_t)nv + 1, sizeof *p->alias_out);
    p->grad_alias = tnt__calloc((size_t)nv + 1, sizeof *p->grad_alias);
    p->fresh = tnt__calloc((size_t)nv + 1, 1);
    int *lo = tnt__calloc((size_t)nv + 1, sizeof *lo), *reads = tnt__calloc((size_t)nv + 1, sizeof *reads);
    if (!p->val || !p->fwd_off || !p->out_bind || !p->alias || !p->needs_grad || !p->has_src || !p->runs || !p->last_use ||
        !p->grad_off || !p->alias_out || !p->grad_alias || !p->fresh || !lo || !reads)
        goto fail;
    for (int i = 0; i < g->n_inputs; i++) {
        tnt_shape want = g->inputs[i], got = in_shapes[i];
        bool ok = want.ndim == got.ndim;
        for (int d = 0; ok && d < got.ndim; d++) ok = want.dim[d] == TNT_DIM_NONE || want.dim[d] == got.dim[d];
        if (!ok) {
            tnt__error(TNT_ERR_SHAPE, "operation graph: input %d has shape %s (the graph expects %s)", i,
                       tnt_shape_str(got, a, sizeof a), tnt_shape_str(want, b, sizeof b));
            goto fail;
        }
        p->val[i] = (tnt__ten){.s = got, .dt = TNT__F32};
        p->needs_grad[i] = input_grads;
    }
    for (int i = 0; i < g->n_weights; i++) {
        p->val[g->n_inputs + i] = (tnt__ten){.s = g->weights[i].shape, .dt = TNT__F32};
        p->needs_grad[g->n_inputs + i] = g->weights[i].trainable;
    }
    for (int v = 0; v < nv; v++) p->fwd_off[v] = -1, p->out_bind[v] = -1, p->last_use[v] = -1, p->grad_off[v] = -1,
                                 p->alias_out[v] = -1, p->alias[v] = -1, p->grad_alias[v] = -1;
    for (int i = 0; i < nn; i++) {
        for (int k = 0; k < g->nodes[i].n_in; k++) reads[g->nodes[i].in[k]]++;
        for (int k = 0; k < g->nodes[i].n_out; k++) lo[g->nodes[i].out0 + k] = i; /* the producer */
    }
    for (int k = 0; k < g->n_outputs; k++) reads[g->outputs[k]]++;
    /* shapes, forward storage */
    for (int i = 0; i < nn; i++) {
        const tnt__opnode *n = &g->nodes[i];
        const tnt__op_def *def = tnt__op_get(n->kind);
        tnt__ten in[TNT__MAX_OP_IN];
        bool any_grad = false;
        for (int k = 0; k < n->n_in; k++) {
            in[k] = p->val[n->in[k]];
            any_grad |= p->needs_grad[n->in[k]];
            p->last_use[n->in[k]] = i;
        }
        if (def->infer(n, in, &p->val[n->out0]) != TNT_OK) goto fail;
        for (int k = 0; k < n->n_out; k++) {
            int v = n->out0 + k;
            if (!numel_ok(p->val[v].s)) {
                tnt__op_error(n, TNT_ERR_SHAPE, "output %d would have shape %s: more than 2^36 values", k,
                              tnt_shape_str(p->val[v].s, a, sizeof a));
                goto fail;
            }
            p->needs_grad[v] = any_grad && def->backward && p->val[v].dt == TNT__F32;
            if (is_view(def)) { /* the same values in the same order: read the input's storage */
                p->alias[v] = p->alias[n->in[0]] >= 0 ? p->alias[n->in[0]] : n->in[0];
                continue;
            }
            int host = in_place_operand(p, n, reads, lo);
            if (host >= 0) {
                p->fwd_off[v] = p->fwd_off[host];
                continue;
            }
            p->fwd_off[v] = (int64_t)p->ws_floats;
            p->ws_floats += padded(tnt_shape_numel(p->val[v].s));
        }
    }
    for (int k = 0; k < g->n_outputs; k++) {
        int v = g->outputs[k];
        p->last_use[v] = nn;
        if (v >= p->leaves && p->out_bind[v] < 0 && p->alias[v] < 0) p->out_bind[v] = k;
    }
    /* which backward steps run, and which gradients exist (last node first) */
    for (int k = 0; k < g->n_outputs; k++) p->has_src[g->outputs[k]] = p->needs_grad[g->outputs[k]];
    for (int i = nn - 1; i >= 0; i--) {
        const tnt__opnode *n = &g->nodes[i];
        for (int k = 0; k < n->n_out; k++) p->runs[i] |= p->has_src[n->out0 + k];
        if (!p->runs[i]) continue;
        for (int k = 0; k < n->n_in; k++)
            if (p->needs_grad[n->in[k]]) p->has_src[n->in[k]] = true;
    }
    /* gradient arena: value v lives on nodes [producer (lo), last_use] */
    /* An add passes its output's gradient unchanged to an operand of the same shape: when nothing
     * else reads that operand, its gradient is the output's bytes (no copy, no zeroing; the bias
     * adds and residuals of a Transformer block), live from the operand's producer on. */
    for (int i = 0; i < nn; i++) {
        const tnt__opnode *n = &g->nodes[i];
        const char *name = tnt__op_get(n->kind)->name;
        bool add = !strcmp(name, "add"), sub = !strcmp(name, "subtract");
        for (int k = 0; (add || sub) && k < (add ? 2 : 1); k++) {
            int v = n->in[k];
            if (v < p->leaves || !p->has_src[v] || !p->has_src[n->out0] || reads[v] != 1 ||
                !tnt__shape_equal(p->val[v].s, p->val[n->out0].s))
                continue;
            p->grad_alias[v] = n->out0;
            break;
        }
    }
    for (int v = nv - 1; v >= p->leaves; v--) { /* the last of a chain of aliases lives longest */
        int root = v;
        while (p->grad_alias[root] >= 0) root = p->grad_alias[root];
        if (root != v) lo[root] = TNT_MIN(lo[root], lo[v]);
    }
    for (int v = p->leaves; v < nv; v++) {
        if (!p->has_src[v] || p->grad_alias[v] >= 0) continue;
        int uses = 0;
        for (int k = 0; k < g->n_outputs; k++) uses += g->outputs[k] == v;
        if (uses == 1 && reads[v] == 1) {
            for (int k = 0; k < g->n_outputs; k++)
                if (g->outputs[k] == v) p->alias_out[v] = k;
            continue;
        }
        int64_t size = (int64_t)padded(tnt_shape_numel(p->val[v].s));
        p->grad_off[v] = 0; /* marks it placed while place() skips v itself */
        p->grad_off[v] = place(p, v, size, lo, p->last_use);
        p->grad_floats = TNT_MAX(p->grad_floats, (size_t)(p->grad_off[v] + size));
    }
    for (int v = p->leaves; v < nv; v++) {
        int root = v;
        while (p->grad_alias[root] >= 0) root = p->grad_alias[root];
        if (root != v) p->grad_off[v] = p->grad_off[root], p->alias_out[v] = p->alias_out[root];
    }
    /* a leaf's or an arena gradient whose only reader is a matmul or einsum: written, not zeroed */
    for (int i = 0; i < nn; i++) {
        const tnt__opnode *n = &g->nodes[i];
        const char *name = tnt__op_get(n->kind)->name;
        if (strcmp(name, "matmul") && strcmp(name, "einsum")) continue;
        for (int k = 0; k < n->n_in; k++) {
            int v = n->in[k];
            p->fresh[v] = reads[v] == 1 && p->needs_grad[v] &&
                          (v < p->leaves || (p->grad_off[v] >= 0 && p->grad_alias[v] < 0));
        }
    }
    if (!(p->grad = tnt__alloc(TNT_MAX(p->grad_floats, (size_t)ALIGN_FLOATS) * sizeof(float)))) goto fail; /* never NULL */
    free(lo), free(reads);
    return p;
fail:
    free(lo), free(reads);
    tnt__opplan_destroy(p);
    return NULL;
}

tnt_shape tnt__opplan_shape(const tnt__opplan *p, int v) { return p->val[v].s; }
tnt__dt tnt__opplan_dtype(const tnt__opplan *p, int v) { return p->val[v].dt; }
size_t tnt__opplan_workspace(const tnt__opplan *p) { return p->ws_floats * sizeof(float); }

static float *value_ptr(const tnt__opplan *p, const tnt__opstep *st, int v) {
    const tnt_opgraph *g = p->g;
    if (v < g->n_inputs) return (float *)st->inputs[v];
    if (v < p->leaves) return st->weights[v - g->n_inputs];
    if (p->alias[v] >= 0) return value_ptr(p, st, p->alias[v]);
    if (p->out_bind[v] >= 0) return st->outputs[p->out_bind[v]];
    return (float *)st->workspace + p->fwd_off[v];
}

static void make_ctx(tnt__opplan *p, const tnt__opstep *st, const tnt__opnode *n, tnt__ten *in, tnt__ten *out,
                     tnt__opctx *c) {
    for (int k = 0; k < n->n_in; k++) in[k] = p->val[n->in[k]], in[k].d = value_ptr(p, st, n->in[k]);
    for (int k = 0; k < n->n_out; k++) out[k] = p->val[n->out0 + k], out[k].d = value_ptr(p, st, n->out0 + k);
    *c = (tnt__opctx){.node = n, .n_in = n->n_in, .n_out = n->n_out, .in = in, .out = out,
                      .scratch = &p->scratch, .training = st->training, .sample_offset = st->sample_offset,
                      .seed = tnt__hash64(st->seed ^ tnt__hash64(0xA5A5ull + (uint64_t)n->index + n->a.seed * 7919u))};
}

tnt_status tnt__opplan_forward(tnt__opplan *p, const tnt__opstep *st) {
    const tnt_opgraph *g = p->g;
    tnt__ten in[TNT__MAX_OP_IN], out[TNT__MAX_OP_IN];
    for (int i = 0; i < g->n_nodes; i++) {
        const tnt__opnode *n = &g->nodes[i];
        if (p->alias[n->out0] >= 0) continue; /* a view computes nothing */
        tnt__opctx c;
        make_ctx(p, st, n, in, out, &c);
        tnt_status s = tnt__op_get(n->kind)->forward(&c);
        scratch_reset(&p->scratch);
        if (s != TNT_OK) return s;
    }
    for (int k = 0; k < g->n_outputs; k++) {
        int v = g->outputs[k];
        if (p->out_bind[v] == k) continue;
        memcpy(st->outputs[k], value_ptr(p, st, v), (size_t)tnt_shape_numel(p->val[v].s) * sizeof(float));
    }
    return TNT_OK;
}

/* Where value v's gradient accumulates: the caller's leaf buffers or the arena (NULL: none). */
static float *grad_ptr(tnt__opplan *p, int v, const float *const *douts, float *const *dinputs,
                       float *const *dweights) {
    const tnt_opgraph *g = p->g;
    if (!p->needs_grad[v]) return NULL;
    if (v < g->n_inputs) return dinputs ? dinputs[v] : NULL;
    if (v < p->leaves) return dweights ? dweights[v - g->n_inputs] : NULL;
    if (p->alias_out[v] >= 0) return (float *)douts[p->alias_out[v]];
    return p->grad_off[v] >= 0 ? p->grad + p->grad_off[v] : NULL;
}

/* Zeroes the gradients of node n's inputs that it would have written (fresh), when it does not run. */
static void zero_fresh(tnt__opplan *p, const tnt__opnode *n, float *const *din, const float *const *douts,
                       float *const *dinputs, float *const *dweights) {
    for (int k = 0; k < n->n_in; k++) {
        int v = n->in[k];
        float *d = !p->fresh[v] ? NULL : din ? din[k] : grad_ptr(p, v, douts, dinputs, dweights);
        if (d) memset(d, 0, (size_t)tnt_shape_numel(p->val[v].s) * sizeof(float));
    }
}

tnt_status tnt__opplan_backward(tnt__opplan *p, const tnt__opstep *st, const float *const *douts,
                                float *const *dinputs, float *const *dweights) {
    const tnt_opgraph *g = p->g;
    int nn = g->n_nodes;
    for (int i = 0; dinputs && i < g->n_inputs; i++)
        if (dinputs[i] && !p->fresh[i]) memset(dinputs[i], 0, (size_t)tnt_shape_numel(p->val[i].s) * sizeof(float));
    for (int i = 0; dweights && i < g->n_weights; i++)
        if (dweights[i] && !p->fresh[g->n_inputs + i])
            memset(dweights[i], 0, (size_t)tnt_shape_numel(p->val[g->n_inputs + i].s) * sizeof(float));
    /* zero the arena gradients that start at node i (before its backward), outputs at the start */
    for (int i = nn; i >= 0; i--) {
        for (int v = p->leaves; v < p->nv; v++)
            if (p->grad_off[v] >= 0 && p->last_use[v] == i && p->grad_alias[v] < 0 && !p->fresh[v])
                memset(p->grad + p->grad_off[v], 0, (size_t)tnt_shape_numel(p->val[v].s) * sizeof(float));
        if (i == nn) {
            for (int k = 0; k < g->n_outputs; k++) {
                int v = g->outputs[k];
                float *gv = grad_ptr(p, v, douts, dinputs, dweights);
                if (!gv || !douts || !douts[k] || p->alias_out[v] == k) continue;
                int64_t m = tnt_shape_numel(p->val[v].s);
                for (int64_t e = 0; e < m; e++) gv[e] += douts[k][e];
            }
            continue;
        }
        const tnt__opnode *n = &g->nodes[i];
        if (!p->runs[i]) {
            zero_fresh(p, n, NULL, douts, dinputs, dweights);
            continue;
        }
        tnt__ten in[TNT__MAX_OP_IN], out[TNT__MAX_OP_IN];
        float *din[TNT__MAX_OP_IN];
        const float *dout[TNT__MAX_OP_IN];
        tnt__opctx c;
        make_ctx(p, st, n, in, out, &c);
        bool any_in = false, any_out = false;
        for (int k = 0; k < n->n_in; k++) {
            din[k] = p->grad_alias[n->in[k]] == n->out0 ? NULL /* holds the output's already */
                                                        : grad_ptr(p, n->in[k], douts, dinputs, dweights);
            any_in |= din[k] != NULL;
        }
        for (int k = 0; k < n->n_out; k++) {
            int v = n->out0 + k;
            dout[k] = p->has_src[v] ? grad_ptr(p, v, douts, dinputs, dweights) : NULL;
            if (p->alias_out[v] >= 0 && (!douts || !douts[p->alias_out[v]])) dout[k] = NULL;
            any_out |= dout[k] != NULL;
        }
        if (!any_in || !any_out) { /* no contribution this time: what it would write is zero */
            zero_fresh(p, n, din, douts, dinputs, dweights);
            continue;
        }
        bool over[TNT__MAX_OP_IN];
        for (int k = 0; k < n->n_in; k++) over[k] = p->fresh[n->in[k]];
        c.din = din, c.dout = dout, c.din_overwrite = over;
        tnt_status s = tnt__op_get(n->kind)->backward(&c);
        scratch_reset(&p->scratch);
        if (s != TNT_OK) return s;
    }
    return TNT_OK;
}

/* bidirectional.c: Keras Bidirectional over a recurrent layer (LSTM, GRU, SimpleRNN, their CuDNN
 * forms, ConvLSTM2D, whose plans it keeps for its convolutions). The forward layer reads the
 * sequence in order, the backward one (go_backwards flipped, or the user's backward_layer)
 * reversed; with return_sequences the backward outputs are reversed back into input order and
 * masked steps output zeros (Keras forces zero_output_for_mask there). The outputs merge by
 * concat, sum, mul or ave (concat on the last axis, as Keras, whatever the output's rank), or stay
 * two outputs (merge_mode None). With return_state the states follow: the forward layer's h (c),
 * then the backward one's; initial states come as inputs after the sequence in the same order.
 * Weights: the forward layer's, then the backward layer's, named as Keras 2 files have them
 * ("forward_lstm_1/kernel"). A sequence mask reaches both layers.
 *
 * Workspace: the two inner workspaces, then yf and yb (the inner outputs, yb in input order),
 * dyf and dyb (their gradients), and the backward layer's dx before it is added to the forward's.
 * On the device (recurrent layers with a device path; no states or merge_mode None) the
 * inner layers run their GPU paths, yb stays in its processing order and the merge kernels
 * (gpu/kernels/rnn.cu tnt_k_bidi_merge*) read it reversed. */
#include "layers/recurrent/rnn_common.h"
#include "layers/wrapper.h"

#include "gpu/gpu.h"
#include "layers/keras_config.h"

#include <stdio.h>

extern const tnt__layer_ops tnt__bidirectional_ops;

typedef struct bidi {
    tnt_layer *fwd, *bwd;
    tnt_merge_mode mode;
    char fwd_name[TNT_NAME_MAX], bwd_name[TNT_NAME_MAX]; /* the wrapped layers' own names */
    bool user_backward;                                   /* backward_layer was given */
    int64_t out_f;                                        /* values per sample of one direction */
    int n_states;                                         /* per direction with return_state, else 0 */
    int n_init;                                           /* from build: initial-state inputs per direction */
} bidi;

/* The outputs before the states: 2 with merge_mode None, else 1. */
static int n_merged(const bidi *b) { return b->mode == TNT_MERGE_NONE ? 2 : 1; }

/* The inputs of one direction (dir 0 forward, 1 backward) from the wrapper's: the sequence, that
 * direction's initial states, the mask. Returns their count. */
static int inner_inputs(const tnt_layer *l, int n, int dir, const void *const *all, const void **part) {
    const bidi *b = l->priv;
    int k = 0;
    part[k++] = all[0];
    for (int j = 0; j < b->n_init; j++) part[k++] = all[1 + dir * b->n_init + j];
    if (l->mask_input) part[k++] = all[n - 1];
    return k;
}

static const char *const merge_names[] = {"concat", "sum", "mul", "ave"};

static tnt_status bidi_build_multi(tnt_layer *l, int n, const tnt_shape *in, tnt_shape *out) {
    bidi *b = l->priv;
    tnt_status s;
    int n_init = n - 1 - (l->mask_input ? 1 : 0), ns = tnt__rnn_n_states(tnt__rnn_of(b->fwd));
    if (n_init != 0 && n_init != 2 * ns)
        return tnt__error(TNT_ERR_ARG, "Bidirectional \"%s\": called on %d inputs (expected the sequence, then %d "
                          "initial states (the forward layer's, then the backward one's) or none%s)", l->name, n,
                          2 * ns, l->mask_input ? ", then the sequence mask" : "");
    b->n_init = n_init / 2;
    l->n_weights = 0;
    b->fwd->mask_input = b->bwd->mask_input = l->mask_input;
    const void *shapes[TNT_MAX_LAYER_INPUTS];
    tnt_shape fin[TNT_MAX_LAYER_INPUTS], bin[TNT_MAX_LAYER_INPUTS];
    for (int k = 0; k < n; k++) shapes[k] = &in[k];
    const void *part[TNT_MAX_LAYER_INPUTS];
    int nf = inner_inputs(l, n, 0, shapes, part);
    for (int k = 0; k < nf; k++) fin[k] = *(const tnt_shape *)part[k];
    inner_inputs(l, n, 1, shapes, part);
    for (int k = 0; k < nf; k++) bin[k] = *(const tnt_shape *)part[k];
    if ((s = tnt__wrapper_build_inner(l, b->fwd, nf, fin)) != TNT_OK ||
        (s = tnt__wrapper_build_inner(l, b->bwd, nf, bin)) != TNT_OK)
        return s;
    char a[96], c[96];
    if (!tnt__shape_equal(b->fwd->out_shape, b->bwd->out_shape))
        return tnt__error(TNT_ERR_SHAPE, "Bidirectional \"%s\": the forward layer outputs %s, the backward one %s "
                          "(expected the same)", l->name, tnt_shape_str(b->fwd->out_shape, a, sizeof a),
                          tnt_shape_str(b->bwd->out_shape, c, sizeof c));
    if ((s = tnt__wrapper_adopt_weights(l, b->fwd, b->fwd->name)) != TNT_OK ||
        (s = tnt__wrapper_adopt_weights(l, b->bwd, b->bwd->name)) != TNT_OK)
        return s;
    b->out_f = tnt_shape_numel(b->fwd->out_shape);
    *out = b->fwd->out_shape;
    if (b->mode == TNT_MERGE_CONCAT) out->dim[out->ndim - 1] *= 2;
    if (b->mode == TNT_MERGE_NONE) l->out_shapes[1] = b->bwd->out_shape;
    for (int k = 0; k < b->n_states; k++) /* forward states, then backward ones */
        l->out_shapes[n_merged(b) + k] = l->out_shapes[n_merged(b) + b->n_states + k] = b->fwd->out_shapes[1 + k];
    return TNT_OK;
}

static tnt_status bidi_build(tnt_layer *l, tnt_shape in, tnt_shape *out) { return bidi_build_multi(l, 1, &in, out); }

typedef struct bidi_ws {
    void *wf, *wb;
    float *yf, *yb, *dyf, *dyb, *dxb;
} bidi_ws;

static size_t align64(size_t n) { return (n + 63) / 64 * 64; }

/* The inner layers' plans for one batch size (recurrent layers on the engine have none), on the
 * CPU or (device) their GPU paths' plans. */
typedef struct bidi_plan {
    tnt_layer *fwd, *bwd;
    void *pf, *pb;
    bool device;
} bidi_plan;

static void inner_plan_destroy(const tnt_layer *inner, bool device, void *plan) {
    void (*destroy)(void *) = device ? inner->ops->gpu->plan_destroy : inner->ops->plan_destroy;
    if (plan && destroy) destroy(plan);
}

static void bidi_plan_destroy(void *plan) {
    bidi_plan *p = plan;
    if (!p) return;
    inner_plan_destroy(p->fwd, p->device, p->pf);
    inner_plan_destroy(p->bwd, p->device, p->pb);
    free(p);
}

static void *bidi_plan_create(tnt_layer *l, int64_t batch) {
    bidi *b = l->priv;
    bidi_plan *p = tnt__calloc(1, sizeof *p);
    if (!p) return NULL;
    p->fwd = b->fwd, p->bwd = b->bwd;
    if (b->fwd->ops->plan_create &&
        (!(p->pf = b->fwd->ops->plan_create(b->fwd, batch)) || !(p->pb = b->bwd->ops->plan_create(b->bwd, batch)))) {
        bidi_plan_destroy(p);
        return NULL;
    }
    return p;
}

static size_t inner_workspace(tnt_layer *inner, bool device, void *plan, int64_t batch) {
    size_t (*size)(tnt_layer *, void *, int64_t) = device ? inner->ops->gpu->workspace_size : inner->ops->workspace_size;
    return size ? align64(size(inner, plan, batch)) : 0;
}

static size_t bidi_layout(tnt_layer *l, const bidi_plan *plan, int64_t batch, void *base, bidi_ws *w) {
    bidi *b = l->priv;
    const bool dev = plan && plan->device;
    size_t sf = inner_workspace(b->fwd, dev, plan ? plan->pf : NULL, batch);
    size_t sb = inner_workspace(b->bwd, dev, plan ? plan->pb : NULL, batch);
    size_t ny = align64((size_t)(batch * b->out_f) * sizeof(float));
    size_t nx = align64((size_t)(batch * tnt_shape_numel(l->in_shape)) * sizeof(float));
    char *p = base;
    if (w) *w = (bidi_ws){p, p + sf, (float *)(p + sf + sb), (float *)(p + sf + sb + ny),
                          (float *)(p + sf + sb + 2 * ny), (float *)(p + sf + sb + 3 * ny),
                          (float *)(p + sf + sb + 4 * ny)};
    return sf + sb + 4 * ny + nx;
}

static size_t bidi_workspace_size(tnt_layer *l, void *plan, int64_t batch) {
    return bidi_layout(l, plan, batch, NULL, NULL);
}

/* Reverses v (batch, steps, units...) along the steps, in place: units values per step. */
static void reverse_steps(float *v, int64_t batch, int64_t steps, int64_t units) {
    for (int64_t b = 0; b < batch; b++)
        for (int64_t s = 0; s < steps / 2; s++) {
            float *p = v + (b * steps + s) * units, *q = v + (b * steps + steps - 1 - s) * units;
            for (int64_t u = 0; u < units; u++) {
                float t = p[u];
                p[u] = q[u];
                q[u] = t;
            }
        }
}

static bool returns_sequences(const bidi *b) { return tnt__rnn_returns_sequences(b->fwd); }

/* Carves the step's workspace and points both layers at their weights: returns the units of one
 * direction (the output's last axis). */
static int64_t prepare(tnt_layer *l, const bidi_plan *plan, int64_t batch, void *workspace, bidi_ws *w) {
    bidi *b = l->priv;
    bidi_layout(l, plan, batch, workspace, w);
    tnt__wrapper_bind(l, 0, b->fwd, 1);
    tnt__wrapper_bind(l, b->fwd->n_weights, b->bwd, 2);
    return b->fwd->out_shape.dim[b->fwd->out_shape.ndim - 1];
}

static tnt_status bidi_forward(tnt_layer *l, void *plan, const tnt__fwd_args *a) {
    bidi *b = l->priv;
    bidi_plan *p = plan;
    bidi_ws w;
    const int64_t units = prepare(l, p, a->batch, a->workspace, &w), B = a->batch, n = b->out_f;
    const int64_t steps = b->fwd->out_shape.dim[0]; /* with return_sequences */
    tnt__fwd_args af = *a, ab = *a;
    const float *xf[TNT_MAX_LAYER_INPUTS], *xb[TNT_MAX_LAYER_INPUTS];
    float *yfs[TNT_MAX_LAYER_OUTPUTS] = {w.yf}, *ybs[TNT_MAX_LAYER_OUTPUTS] = {w.yb};
    for (int k = 0; k < b->n_states; k++) /* the states go straight to the wrapper's outputs */
        yfs[1 + k] = a->ys[n_merged(b) + k], ybs[1 + k] = a->ys[n_merged(b) + b->n_states + k];
    const float *const *xs_all = a->xs ? a->xs : &a->x; /* callers with one input may leave xs NULL */
    int n_all = a->xs ? a->n_inputs : 1;
    af.n_inputs = inner_inputs(l, n_all, 0, (const void *const *)xs_all, (const void **)xf);
    ab.n_inputs = inner_inputs(l, n_all, 1, (const void *const *)xs_all, (const void **)xb);
    af.xs = xf, ab.xs = xb;
    af.y = w.yf, af.ys = yfs, af.workspace = w.wf, af.preact = NULL;
    ab.y = w.yb, ab.ys = ybs, ab.workspace = w.wb, ab.preact = NULL;
    af.n_outputs = ab.n_outputs = 1 + b->n_states;
    tnt_status s;
    if ((s = b->fwd->ops->forward(b->fwd, p ? p->pf : NULL, &af)) != TNT_OK ||
        (s = b->bwd->ops->forward(b->bwd, p ? p->pb : NULL, &ab)) != TNT_OK)
        return s;
    if (returns_sequences(b)) reverse_steps(w.yb, B, steps, n / steps);
    if (b->mode == TNT_MERGE_NONE) {
        memcpy(a->ys[0], w.yf, (size_t)(B * n) * sizeof(float));
        memcpy(a->ys[1], w.yb, (size_t)(B * n) * sizeof(float));
        return TNT_OK;
    }
    for (int64_t r = 0; r < B * n / units; r++) {
        const float *f = w.yf + r * units, *g = w.yb + r * units;
        float *y = a->y + r * units * (b->mode == TNT_MERGE_CONCAT ? 2 : 1);
        for (int64_t u = 0; u < units; u++) {
            switch (b->mode) {
            case TNT_MERGE_CONCAT: y[u] = f[u], y[units + u] = g[u]; break;
            case TNT_MERGE_SUM: y[u] = f[u] + g[u]; break;
            case TNT_MERGE_MUL: y[u] = f[u] * g[u]; break;
            default: y[u] = 0.5f * (f[u] + g[u]); break;
            }
        }
    }
    return TNT_OK;
}

static tnt_status bidi_backward(tnt_layer *l, void *plan, const tnt__bwd_args *a) {
    bidi *b = l->priv;
    bidi_plan *p = plan;
    bidi_ws w;
    const int64_t units = prepare(l, p, a->batch, a->workspace, &w), B = a->batch, n = b->out_f;
    const int64_t steps = b->fwd->out_shape.dim[0];
    if (b->mode == TNT_MERGE_NONE || !a->dy) { /* each output's gradient, zeros where none */
        const float *d0 = a->dy, *d1 = b->mode == TNT_MERGE_NONE ? a->dys[1] : NULL;
        for (int64_t i = 0; i < B * n; i++) w.dyf[i] = d0 ? d0[i] : 0.0f, w.dyb[i] = d1 ? d1[i] : 0.0f;
    }
    for (int64_t r = 0; a->dy && b->mode != TNT_MERGE_NONE && r < B * n / units; r++) {
        const float *f = w.yf + r * units, *g = w.yb + r * units;
        const float *dy = a->dy + r * units * (b->mode == TNT_MERGE_CONCAT ? 2 : 1);
        float *df = w.dyf + r * units, *dg = w.dyb + r * units;
        for (int64_t u = 0; u < units; u++) {
            switch (b->mode) {
            case TNT_MERGE_CONCAT: df[u] = dy[u], dg[u] = dy[units + u]; break;
            case TNT_MERGE_SUM: df[u] = dg[u] = dy[u]; break;
            case TNT_MERGE_MUL: df[u] = dy[u] * g[u], dg[u] = dy[u] * f[u]; break;
            default: df[u] = dg[u] = 0.5f * dy[u]; break;
            }
        }
    }
    if (returns_sequences(b)) reverse_steps(w.dyb, B, steps, n / steps);
    tnt__bwd_args af = *a, ab = *a;
    const float *xf[TNT_MAX_LAYER_INPUTS], *xb[TNT_MAX_LAYER_INPUTS];
    float *dxf[TNT_MAX_LAYER_INPUTS] = {0}, *dxb[TNT_MAX_LAYER_INPUTS] = {0};
    const float *dyf[TNT_MAX_LAYER_OUTPUTS] = {w.dyf}, *dyb[TNT_MAX_LAYER_OUTPUTS] = {w.dyb};
    for (int k = 0; k < b->n_states; k++)
        dyf[1 + k] = a->dys[n_merged(b) + k], dyb[1 + k] = a->dys[n_merged(b) + b->n_states + k];
    const float *const *xs_all = a->xs ? a->xs : &a->x;
    int n_all = a->xs ? a->n_inputs : 1;
    af.n_inputs = inner_inputs(l, n_all, 0, (const void *const *)xs_all, (const void **)xf);
    ab.n_inputs = inner_inputs(l, n_all, 1, (const void *const *)xs_all, (const void **)xb);
    if (a->dxs) {
        inner_inputs(l, n_all, 0, (const void *const *)a->dxs, (const void **)dxf);
        inner_inputs(l, n_all, 1, (const void *const *)a->dxs, (const void **)dxb);
    }
    dxf[0] = a->dx, dxb[0] = a->dx ? w.dxb : NULL;
    af.xs = xf, ab.xs = xb, af.dxs = dxf, ab.dxs = dxb;
    af.n_outputs = ab.n_outputs = 1 + b->n_states;
    af.dys = dyf, ab.dys = dyb, af.ys = ab.ys = NULL;
    af.dy = w.dyf, af.y = w.yf, af.workspace = w.wf;
    ab.dy = w.dyb, ab.y = w.yb, ab.workspace = w.wb, ab.dx = dxb[0];
    tnt_status s;
    if ((s = b->fwd->ops->backward(b->fwd, p ? p->pf : NULL, &af)) != TNT_OK ||
        (s = b->bwd->ops->backward(b->bwd, p ? p->pb : NULL, &ab)) != TNT_OK)
        return s;
    if (a->dx)
        for (int64_t i = 0; i < B * tnt_shape_numel(l->in_shape); i++) a->dx[i] += w.dxb[i];
    return TNT_OK;
}

/* ---- on the device: the inner layers' GPU paths (rnn_gpu.c), the merge as one kernel ---------- */

static bool bidi_gpu_supported(const tnt_layer *l, const char **why) {
    const bidi *b = l->priv;
    const char *no = NULL;
    if (b->mode == TNT_MERGE_NONE) no = "merge_mode None has no device path yet";
    else if (b->n_states) no = "return_state has no device path yet";
    else if (b->n_init) no = "initial states as inputs have no device path yet";
    else if (!b->fwd->ops->gpu || !b->bwd->ops->gpu) no = "its ConvLSTM2D has no device path yet";
    if (no) {
        if (why) *why = no;
        return false;
    }
    for (int k = 0; k < 2; k++) {
        const tnt_layer *in = k ? b->bwd : b->fwd;
        if (in->ops->gpu->supported && !in->ops->gpu->supported(in, why)) return false;
    }
    return true;
}

static void *bidi_gpu_plan_create(tnt_layer *l, int64_t batch) {
    bidi *b = l->priv;
    bidi_plan *p = tnt__calloc(1, sizeof *p);
    if (!p) return NULL;
    p->fwd = b->fwd, p->bwd = b->bwd, p->device = true;
    void *(*cf)(tnt_layer *, int64_t) = b->fwd->ops->gpu->plan_create;
    void *(*cb)(tnt_layer *, int64_t) = b->bwd->ops->gpu->plan_create;
    if ((cf && !(p->pf = cf(b->fwd, batch))) || (cb && !(p->pb = cb(b->bwd, batch)))) {
        bidi_plan_destroy(p);
        return NULL;
    }
    return p;
}

/* the merge kernels' geometry: rows of steps S (1 without return_sequences) of units U */
static void merge_geometry(const bidi *b, long long *S, long long *U) {
    const tnt_shape o = b->fwd->out_shape;
    *U = o.dim[o.ndim - 1];
    *S = b->out_f / *U;
}

static tnt_status bidi_gpu_forward(tnt_layer *l, void *plan, const tnt__fwd_args *a) {
    bidi *b = l->priv;
    bidi_plan *p = plan;
    bidi_ws w;
    prepare(l, p, a->batch, a->workspace, &w);
    tnt__fwd_args af = *a, ab = *a;
    float *yfs[1] = {w.yf}, *ybs[1] = {w.yb};
    const float *xf[TNT_MAX_LAYER_INPUTS], *xb[TNT_MAX_LAYER_INPUTS]; /* the sequence, the mask */
    const float *const *xs_all = a->xs ? a->xs : &a->x;
    const int n_all = a->xs ? a->n_inputs : 1;
    af.n_inputs = inner_inputs(l, n_all, 0, (const void *const *)xs_all, (const void **)xf);
    ab.n_inputs = inner_inputs(l, n_all, 1, (const void *const *)xs_all, (const void **)xb);
    af.xs = xf, ab.xs = xb, af.n_outputs = ab.n_outputs = 1;
    af.y = w.yf, af.ys = yfs, af.workspace = w.wf, af.preact = NULL;
    ab.y = w.yb, ab.ys = ybs, ab.workspace = w.wb, ab.preact = NULL;
    tnt_status s;
    if ((s = b->fwd->ops->gpu->forward(b->fwd, p->pf, &af)) != TNT_OK ||
        (s = b->bwd->ops->gpu->forward(b->bwd, p->pb, &ab)) != TNT_OK)
        return s;
    long long B = a->batch, S, U;
    merge_geometry(b, &S, &U);
    int mode = (int)b->mode, reverse = returns_sequences(b);
    float *y = a->y;
    void *args[] = {&w.yf, &w.yb, &y, &B, &S, &U, &mode, &reverse};
    return tnt__gpu_launch("tnt_k_bidi_merge", tnt__gpu_grid_for(B * S * U, 256), 256, 0, args);
}

static tnt_status bidi_gpu_backward(tnt_layer *l, void *plan, const tnt__bwd_args *a) {
    bidi *b = l->priv;
    bidi_plan *p = plan;
    bidi_ws w;
    prepare(l, p, a->batch, a->workspace, &w);
    long long B = a->batch, S, U, nx = a->batch * tnt_shape_numel(l->in_shape);
    merge_geometry(b, &S, &U);
    int mode = (int)b->mode, reverse = returns_sequences(b);
    const float *dy = a->dy;
    void *args[] = {&dy, &w.yf, &w.yb, &w.dyf, &w.dyb, &B, &S, &U, &mode, &reverse};
    tnt_status s = tnt__gpu_launch("tnt_k_bidi_merge_bwd", tnt__gpu_grid_for(B * S * U, 256), 256, 0, args);
    if (s != TNT_OK) return s;
    tnt__bwd_args af = *a, ab = *a;
    const float *dyf[1] = {w.dyf}, *dyb[1] = {w.dyb};
    const float *xf[TNT_MAX_LAYER_INPUTS], *xb[TNT_MAX_LAYER_INPUTS];
    float *dxf[TNT_MAX_LAYER_INPUTS] = {0}, *dxb[TNT_MAX_LAYER_INPUTS] = {0};
    const float *const *xs_all = a->xs ? a->xs : &a->x;
    const int n_all = a->xs ? a->n_inputs : 1;
    af.n_inputs = inner_inputs(l, n_all, 0, (const void *const *)xs_all, (const void **)xf);
    ab.n_inputs = inner_inputs(l, n_all, 1, (const void *const *)xs_all, (const void **)xb);
    if (a->dxs) { /* the mask's gradient slot: zeros from either layer */
        inner_inputs(l, n_all, 0, (const void *const *)a->dxs, (const void **)dxf);
        inner_inputs(l, n_all, 1, (const void *const *)a->dxs, (const void **)dxb);
    }
    dxf[0] = a->dx, dxb[0] = a->dx ? w.dxb : NULL;
    af.xs = xf, ab.xs = xb, af.n_outputs = ab.n_outputs = 1;
    af.dys = dyf, ab.dys = dyb, af.ys = ab.ys = NULL, af.dxs = dxf, ab.dxs = dxb;
    af.dy = w.dyf, af.y = w.yf, af.workspace = w.wf;
    ab.dy = w.dyb, ab.y = w.yb, ab.workspace = w.wb, ab.dx = dxb[0];
    if ((s = b->fwd->ops->gpu->backward(b->fwd, p->pf, &af)) != TNT_OK ||
        (s = b->bwd->ops->gpu->backward(b->bwd, p->pb, &ab)) != TNT_OK || !a->dx)
        return s;
    float one = 1.0f, *dx = a->dx; /* dx = dx + 1 dxb, as the CPU's dx += dxb */
    void *add[] = {&w.dxb, &dx, &nx, &one};
    return tnt__gpu_launch("tnt_k_axpy", tnt__gpu_grid_for(nx, 256), 256, 0, add);
}

static const tnt__gpu_ops bidi_gpu_ops = {
    .supported = bidi_gpu_supported,
    .plan_create = bidi_gpu_plan_create,
    .plan_destroy = bidi_plan_destroy,
    .workspace_size = bidi_workspace_size,
    .forward = bidi_gpu_forward,
    .backward = bidi_gpu_backward,
};

static void bidi_destroy(tnt_layer *l) {
    bidi *b = l->priv;
    tnt_layer_free(b->fwd);
    tnt_layer_free(b->bwd);
    free(b);
}

static bool bidi_keeps_mask(const tnt_layer *l) { return returns_sequences(l->priv); }

/* ---- Keras config ------------------------------------------------------------------------- */

static tnt_status bidi_get_config(const tnt_layer *l, cJSON *c) {
    const bidi *b = l->priv;
    TNT_KJ_S(tnt__wrapper_inner_config(l, b->fwd, b->fwd_name, c, "layer"));
    if (b->mode == TNT_MERGE_NONE) TNT_KJ(cJSON_AddNullToObject(c, "merge_mode"));
    else TNT_KJ(cJSON_AddStringToObject(c, "merge_mode", merge_names[b->mode]));
    if (b->user_backward) TNT_KJ_S(tnt__wrapper_inner_config(l, b->bwd, b->bwd_name, c, "backward_layer"));
    return TNT_OK;
}

static tnt_layer *bidi_from_config(const cJSON *c, const tnt__kj_ctx *k) {
    const cJSON *mm = tnt__kj_item(c, "merge_mode");
    tnt_merge_mode mode = TNT_MERGE_CONCAT;
    if (cJSON_IsNull(mm)) mode = TNT_MERGE_NONE;
    else if (mm) {
        int found = -1;
        for (int i = 0; cJSON_IsString(mm) && i < 4; i++)
            if (!strcmp(mm->valuestring, merge_names[i])) found = i;
        if (found < 0) return tnt__kj_fail(k, TNT_ERR_FORMAT, "merge_mode: expected concat, sum, mul, ave or null");
        mode = (tnt_merge_mode)found;
    }
    tnt_layer *fwd = tnt__wrapper_inner_from_config(c, "layer", k), *bwd = NULL;
    if (!fwd) return NULL;
    if (!tnt__kj_absent(tnt__kj_item(c, "backward_layer")) && !(bwd = tnt__wrapper_inner_from_config(c, "backward_layer", k))) {
        tnt_layer_free(fwd);
        return NULL;
    }
    return tnt__kj_built(tnt_bidirectional(fwd, bwd, mode, k->name), k);
}

static void bidi_reset_states(tnt_layer *l) {
    bidi *b = l->priv;
    if (b->fwd->ops->reset_states) b->fwd->ops->reset_states(b->fwd);
    if (b->bwd->ops->reset_states) b->bwd->ops->reset_states(b->bwd);
}

const tnt__layer_ops tnt__bidirectional_ops = {
    .class_name = "Bidirectional",
    .build = bidi_build,
    .build_multi = bidi_build_multi,
    .plan_create = bidi_plan_create,
    .plan_destroy = bidi_plan_destroy,
    .workspace_size = bidi_workspace_size,
    .forward = bidi_forward,
    .backward = bidi_backward,
    .destroy = bidi_destroy,
    .reset_states = bidi_reset_states,
    .get_config = bidi_get_config,
    .from_config = bidi_from_config,
    .consumes_mask = true,
    .keeps_mask = bidi_keeps_mask,
    .gpu = &bidi_gpu_ops,
};

/* "forward_" + the wrapped layer's name (its Keras base name when automatic) */
static void inner_name(tnt_layer *inner, const char *side, char *own, size_t size) {
    if (inner->auto_name) tnt__layer_base_name(inner->ops->class_name, own, size);
    else snprintf(own, size, "%s", inner->name);
    snprintf(inner->name, sizeof inner->name, "%s_%.*s", side, TNT_NAME_MAX - 10, own);
    inner->auto_name = false;
}

tnt_layer *tnt_bidirectional(tnt_layer *forward, tnt_layer *backward_layer, tnt_merge_mode mode, const char *name) {
    const char *bad = NULL;
    tnt__rnn *rf = tnt__rnn_of(forward), *rb = backward_layer ? tnt__rnn_of(backward_layer) : rf;
    if (!forward) bad = "the forward layer is NULL (its constructor failed?)";
    else if (!rf || !rb) bad = "the wrapped layers must be recurrent (LSTM, GRU, SimpleRNN, ConvLSTM2D)";
    else if (backward_layer && tnt__is_conv_lstm2d(forward) != tnt__is_conv_lstm2d(backward_layer))
        bad = "the forward and backward layers must be of one kind";
    else if (forward->refs > 0 || (backward_layer && backward_layer->refs > 0) || forward->built)
        bad = "the wrapped layers must be new (not in a model, graph or other wrapper)";
    else if (rf->return_sequences != rb->return_sequences) bad = "the two layers differ in return_sequences";
    else if (rf->return_state != rb->return_state) bad = "the two layers differ in return_state";
    else if (backward_layer && rf->go_backwards == rb->go_backwards)
        bad = "backward_layer must process the sequence in the other direction (go_backwards)";
    else if ((unsigned)mode > TNT_MERGE_NONE) bad = "merge mode out of range";
    else if (backward_layer && !tnt__wrapper_same_rules(forward, backward_layer))
        bad = "the forward and backward layers have different regularizers or constraints (not supported: the "
              "wrapper keeps one set for both)";
    bool unsupported = bad && strstr(bad, "not supported");
    if (bad) {
        tnt__error(unsupported ? TNT_ERR_UNSUPPORTED : TNT_ERR_ARG, "Bidirectional: %s", bad);
        tnt_layer_free(forward);
        tnt_layer_free(backward_layer);
        return NULL;
    }
    bidi *b = tnt__calloc(1, sizeof *b);
    tnt_layer *bwd = backward_layer ? backward_layer : tnt__rnn_clone(forward, NULL); /* no rules */
    tnt_layer *l = b && bwd ? tnt__layer_new(&tnt__bidirectional_ops, name, b) : NULL;
    if (!l) {
        free(b);
        tnt_layer_free(forward);
        tnt_layer_free(bwd);
        return NULL;
    }
    b->mode = mode;
    b->n_states = rf->return_state ? tnt__rnn_n_states(rf) : 0;
    l->n_outputs = n_merged(b) + 2 * b->n_states;
    b->fwd = forward;
    b->bwd = bwd;
    b->user_backward = backward_layer != NULL;
    if (!backward_layer) {
        tnt__rnn *r = tnt__rnn_of(bwd);
        r->go_backwards = !r->go_backwards;
        if (!forward->auto_name) snprintf(bwd->name, sizeof bwd->name, "%s", forward->name), bwd->auto_name = false;
    }
    inner_name(forward, "forward", b->fwd_name, sizeof b->fwd_name);
    inner_name(bwd, "backward", b->bwd_name, sizeof b->bwd_name);
    /* Keras forces zero outputs on masked steps when the sequences are returned */
    tnt__rnn_of(forward)->zero_output_for_mask = rf->return_sequences;
    tnt__rnn_of(bwd)->zero_output_for_mask = rf->return_sequences;
    /* the regularizers of both layers (equal) act on both copies: "forward_x/kernel", "backward_x/kernel" */
    if (tnt__wrapper_take_rules(l, forward, "Bidirectional") != TNT_OK ||
        (backward_layer && tnt__wrapper_take_rules(l, bwd, "Bidirectional") != TNT_OK)) {
        tnt_layer_free(l);
        return NULL;
    }
    return l;
}

/* concatenate.c: Keras Concatenate(axis): joins two or more inputs along one axis. Keras counts
 * the batch axis as 0, so axis 1 is the first non-batch axis and -1 (the default) the last;
 * axis 0 (the batch) is not supported. Inputs have the same rank and agree in every dimension but
 * the axis. No weights, no plan, no workspace.
 *
 * Seen without the batch, an input (d0, ..., d_{r-1}) joined on non-batch axis a is
 * (outer, len_k * inner) with outer = batch * d0 * ... * d_{a-1} and inner = d_{a+1} * ... ; the
 * output row of length sum_k(len_k * inner) is the inputs' rows one after another. Backward
 * copies each input's slice of dy back (dxs[k] NULL: skipped). Rows are shared out across OpenMP
 * threads when the tensor is large. The inputs' sequence masks, and'ed, pass on (src/model/graph.c),
 * as Keras does when joining features; joining along the steps axis with masks is not supported. */
#include "gpu/gpu.h"
#include "layers/keras_config.h"
#include "layers/layer.h"

#include <stdio.h>

typedef struct concat_cfg {
    int axis; /* as given (Keras) */
    int n;
    int64_t outer;                       /* per sample: product of the dims before the axis */
    int64_t row[TNT_MAX_LAYER_INPUTS];   /* per input: len_k * inner */
    int64_t out_row;                     /* sum of row[] */
} concat_cfg;

#define CONCAT_PAR_MIN 65536

static tnt_status concat_build(tnt_layer *l, int n, const tnt_shape *in, tnt_shape *out) {
    concat_cfg *c = l->priv;
    char a[96], b[96];
    if (n < 2)
        return tnt__error(TNT_ERR_ARG,
                          "Concatenate \"%s\" (axis %d): called on %d input(s) of shape %s (expected at least 2)",
                          l->name, c->axis, n, n > 0 ? tnt_shape_str(in[0], a, sizeof a) : "()");
    const int r = in[0].ndim;
    if (r < 1)
        return tnt__error(TNT_ERR_SHAPE,
                          "Concatenate \"%s\" (axis %d): input 0 has shape %s without a non-batch axis "
                          "(concatenation along the batch axis is not supported)",
                          l->name, c->axis, tnt_shape_str(in[0], a, sizeof a));
    /* Keras axis -> index into the non-batch shape */
    int ax = c->axis < 0 ? r + c->axis : c->axis - 1;
    if (c->axis == 0 || c->axis == -(r + 1))
        return tnt__error(TNT_ERR_UNSUPPORTED,
                          "Concatenate \"%s\": axis %d is the batch axis for inputs of shape %s (batch "
                          "excluded); concatenation along the batch is not supported (expected 1..%d or "
                          "-%d..-1)", l->name, c->axis, tnt_shape_str(in[0], a, sizeof a), r, r);
    if (ax < 0 || ax >= r)
        return tnt__error(TNT_ERR_ARG,
                          "Concatenate \"%s\": axis %d is out of range for inputs of shape %s (batch "
                          "excluded, rank %d with the batch; expected 1..%d or -%d..-1)",
                          l->name, c->axis, tnt_shape_str(in[0], a, sizeof a), r + 1, r, r);
    for (int k = 1; k < n; k++) {
        bool ok = in[k].ndim == r;
        for (int d = 0; ok && d < r; d++) ok = d == ax || in[k].dim[d] == in[0].dim[d];
        if (!ok)
            return tnt__error(TNT_ERR_SHAPE,
                              "Concatenate \"%s\" (axis %d): input %d has shape %s and input 0 has shape "
                              "%s (batch excluded); all dimensions but the concatenation axis must agree",
                              l->name, c->axis, k, tnt_shape_str(in[k], a, sizeof a),
                              tnt_shape_str(in[0], b, sizeof b));
    }
    for (int k = 0; k < n; k++)
        for (int d = 0; d < r; d++)
            if (in[k].dim[d] <= 0)
                return tnt__error(TNT_ERR_SHAPE, "Concatenate \"%s\" (axis %d): input %d has shape %s with an "
                                  "empty dimension", l->name, c->axis, k, tnt_shape_str(in[k], a, sizeof a));
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < ax; d++) outer *= in[0].dim[d];
    for (int d = ax + 1; d < r; d++) inner *= in[0].dim[d];
    *out = in[0];
    out->dim[ax] = 0;
    c->out_row = 0;
    for (int k = 0; k < n; k++) {
        out->dim[ax] += in[k].dim[ax];
        c->row[k] = in[k].dim[ax] * inner;
        c->out_row += c->row[k];
    }
    c->n = n;
    c->outer = outer;
    return TNT_OK;
}

static tnt_status concat_forward(tnt_layer *l, void *plan, const tnt__fwd_args *a) {
    (void)plan;
    const concat_cfg *c = l->priv;
    if (a->n_inputs != c->n || !a->xs)
        return tnt__error(TNT_ERR_STATE, "Concatenate \"%s\": forward with %d input(s), built for %d",
                          l->name, a->n_inputs, c->n);
    const int64_t rows = a->batch * c->outer, R = c->out_row;
#pragma omp parallel for schedule(static) if (rows * R >= CONCAT_PAR_MIN)
    for (int64_t i = 0; i < rows; i++) {
        float *y = a->y + i * R;
        for (int k = 0; k < c->n; k++) {
            memcpy(y, a->xs[k] + i * c->row[k], (size_t)c->row[k] * sizeof(float));
            y += c->row[k];
        }
    }
    if (a->preact && a->preact != a->y) memcpy(a->preact, a->y, (size_t)(rows * R) * sizeof(float));
    return TNT_OK;
}

static tnt_status concat_backward(tnt_layer *l, void *plan, const tnt__bwd_args *a) {
    (void)plan;
    const concat_cfg *c = l->priv;
    if (a->n_inputs != c->n || !a->dxs)
        return tnt__error(TNT_ERR_STATE, "Concatenate \"%s\": backward with %d input(s), built for %d",
                          l->name, a->n_inputs, c->n);
    const int64_t rows = a->batch * c->outer, R = c->out_row;
#pragma omp parallel for schedule(static) if (rows * R >= CONCAT_PAR_MIN)
    for (int64_t i = 0; i < rows; i++) {
        const float *g = a->dy + i * R;
        for (int k = 0; k < c->n; k++) {
            if (a->dxs[k]) memcpy(a->dxs[k] + i * c->row[k], g, (size_t)c->row[k] * sizeof(float));
            g += c->row[k];
        }
    }
    return TNT_OK;
}

/* ---- on the device: one strided copy per input (gpu/kernels/misc.cu tnt_k_copy_cols) -------- */

#define GPU_BLOCK 256

/* rows of cols values: y[r ld_y + off_y + j] = x[r ld_x + off_x + j] */
static tnt_status copy_cols(const float *x, float *y, long long rows, long long cols, long long ld_x, long long off_x,
                            long long ld_y, long long off_y) {
    int accumulate = 0;
    void *args[] = {&x, &y, &rows, &cols, &ld_x, &off_x, &ld_y, &off_y, &accumulate};
    return tnt__gpu_launch("tnt_k_copy_cols", tnt__gpu_grid_for(rows * cols, GPU_BLOCK), GPU_BLOCK, 0, args);
}

static tnt_status concat_gpu_forward(tnt_layer *l, void *plan, const tnt__fwd_args *a) {
    (void)plan;
    const concat_cfg *c = l->priv;
    const long long rows = a->batch * c->outer, R = c->out_row;
    tnt_status s = TNT_OK;
    long long off = 0;
    for (int k = 0; k < c->n && s == TNT_OK; off += c->row[k], k++)
        s = copy_cols(a->xs[k], a->y, rows, c->row[k], c->row[k], 0, R, off);
    if (s == TNT_OK && a->preact && a->preact != a->y)
        s = tnt__gpu_copy_on_device(a->preact, a->y, (size_t)(rows * R) * sizeof(float), TNT__GPU_COMPUTE);
    return s;
}

static tnt_status concat_gpu_backward(tnt_layer *l, void *plan, const tnt__bwd_args *a) {
    (void)plan;
    const concat_cfg *c = l->priv;
    const long long rows = a->batch * c->outer, R = c->out_row;
    tnt_status s = TNT_OK;
    long long off = 0;
    for (int k = 0; k < c->n && s == TNT_OK; off += c->row[k], k++)
        if (a->dxs[k]) s = copy_cols(a->dy, a->dxs[k], rows, c->row[k], R, off, c->row[k], 0);
    return s;
}

static const tnt__gpu_ops concat_gpu_ops = {.forward = concat_gpu_forward, .backward = concat_gpu_backward};

static void concat_destroy(tnt_layer *l) { free(l->priv); }

static tnt_status concat_get_config(const tnt_layer *l, cJSON *c) {
    const concat_cfg *p = l->priv;
    TNT_KJ(cJSON_AddNumberToObject(c, "axis", p->axis));
    return TNT_OK;
}

static tnt_layer *concat_from_config(const cJSON *c, const tnt__kj_ctx *k) {
    int axis = 0;
    TNT_KJ_READ(tnt__kj_int(c, "axis", false, -1, &axis, k));
    return tnt__kj_built(tnt_concatenate(axis, k->name), k);
}

const tnt__layer_ops tnt__concatenate_ops = {
    .class_name = "Concatenate",
    .from_config = concat_from_config,
    .get_config = concat_get_config,
    .build_multi = concat_build,
    .forward = concat_forward,
    .backward = concat_backward,
    .backward_reads = tnt__reads_nothing,
    .gpu = &concat_gpu_ops,
    .destroy = concat_destroy,
    .supports_masking = true,
};

tnt_layer *tnt_concatenate(int axis, const char *name) {
    concat_cfg *c = tnt__calloc(1, sizeof *c);
    if (!c) return NULL;
    c->axis = axis;
    tnt_layer *l = tnt__layer_new(&tnt__concatenate_ops, name, c);
    if (!l) free(c);
    return l;
}

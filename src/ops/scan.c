/* scan.c: operations along one axis: cumsum (axis null: the flattened input, as NumPy), softmax
 * and log_softmax (axis default -1; max-subtracted in double). Each runs over lines: the input as
 * (outer, size, inner) with element (o, j, i) at (o * size + j) * inner + i. */
#include "kernels/vexp.h"
#include "ops/ops.h"

#include <math.h>

enum { C_CUMSUM, C_SOFTMAX, C_LOG_SOFTMAX };

static tnt_status parse_scan(tnt__opnode *n, const struct cJSON *attrs) {
    if (n->kind % 256 != C_CUMSUM) n->a.axes[0] = -1, n->a.n_axes = 1, n->a.has_axis = true;
    tnt_status s = tnt__oa_axes(attrs, "axis", &n->a);
    if (s == TNT_OK && n->a.has_axis && n->a.n_axes != 1)
        s = tnt__error(TNT_ERR_ARG, "attribute \"axis\": expected one axis");
    return s;
}

static tnt_status infer_scan(const tnt__opnode *n, const tnt__ten *in, tnt__ten *out) {
    int ax;
    out[0].dt = n->kind % 256 == C_CUMSUM ? in[0].dt : TNT__F32;
    if (!n->a.has_axis) {
        out[0].s = (tnt_shape){1, {tnt_shape_numel(in[0].s)}};
        return TNT_OK;
    }
    out[0].s = in[0].s;
    return tnt__axis(n, n->a.axes[0], in[0].s.ndim, &ax);
}

static void lines(const tnt__opnode *n, tnt_shape s, int64_t *outer, int64_t *size, int64_t *inner) {
    int ax = 0;
    if (!n->a.has_axis) s = (tnt_shape){1, {tnt_shape_numel(s)}};
    else tnt__axis(n, n->a.axes[0], s.ndim, &ax);
    *outer = *inner = 1;
    for (int d = 0; d < s.ndim; d++)
        if (d < ax) *outer *= s.dim[d];
        else if (d > ax) *inner *= s.dim[d];
    *size = s.dim[ax];
}

#define EACH_LINE(...)                                                                           \
    for (int64_t o = 0; o < outer; o++)                                                           \
        for (int64_t i = 0; i < inner; i++) {                                                     \
            const int64_t base = o * size * inner + i;                                            \
            __VA_ARGS__;                                                                          \
        }

static tnt_status forward_scan(tnt__opctx *c) {
    int64_t outer, size, inner;
    lines(c->node, c->in[0].s, &outer, &size, &inner);
    const float *x = c->in[0].d;
    float *y = c->out[0].d;
    switch (c->node->kind % 256) {
    case C_CUMSUM:
        EACH_LINE({
            double acc = 0;
            for (int64_t j = 0; j < size; j++) acc += x[base + j * inner], y[base + j * inner] = (float)acc;
        });
        break;
    case C_SOFTMAX:
    case C_LOG_SOFTMAX: {
        bool logp = c->node->kind % 256 == C_LOG_SOFTMAX;
        if (inner == 1 && !logp) { /* the last axis: contiguous lines in float */
            for (int64_t o = 0; o < outer; o++) {
                const float *xl = x + o * size;
                float *yl = y + o * size, mx = tnt__row_max(xl, size);
                if (isinf(mx)) mx = 0; /* all -inf: the NaNs of exp(-inf - -inf) avoided */
                const float inv = 1.0f / tnt__exp_shifted_sum(xl, yl, size, mx);
                for (int64_t j = 0; j < size; j++) yl[j] *= inv;
            }
            break;
        }
        EACH_LINE({
            float m = -INFINITY;
            for (int64_t j = 0; j < size; j++) m = fmaxf(m, x[base + j * inner]);
            double sum = 0;
            for (int64_t j = 0; j < size; j++) sum += exp((double)x[base + j * inner] - m);
            double lse = log(sum);
            for (int64_t j = 0; j < size; j++) {
                double z = (double)x[base + j * inner] - m;
                y[base + j * inner] = (float)(logp ? z - lse : exp(z - lse));
            }
        });
        break;
    }
    }
    return TNT_OK;
}

static tnt_status backward_scan(tnt__opctx *c) {
    int64_t outer, size, inner;
    lines(c->node, c->in[0].s, &outer, &size, &inner);
    const float *y = c->out[0].d, *g = c->dout[0];
    float *dx = c->din[0];
    switch (c->node->kind % 256) {
    case C_CUMSUM: /* dx_j = sum of g_k for k >= j */
        EACH_LINE({
            double acc = 0;
            for (int64_t j = size - 1; j >= 0; j--) acc += g[base + j * inner], dx[base + j * inner] += (float)acc;
        });
        break;
    case C_SOFTMAX: /* dx = y * (g - sum(g * y)) */
        if (inner == 1) {
            for (int64_t o = 0; o < outer; o++) {
                const float *yl = y + o * size, *gl = g + o * size;
                float *dl = dx + o * size;
                const float dot = tnt__row_dot(gl, yl, size);
                for (int64_t j = 0; j < size; j++) dl[j] += yl[j] * (gl[j] - dot);
            }
            break;
        }
        EACH_LINE({
            double dot = 0;
            for (int64_t j = 0; j < size; j++) dot += (double)g[base + j * inner] * y[base + j * inner];
            for (int64_t j = 0; j < size; j++)
                dx[base + j * inner] += (float)(y[base + j * inner] * (g[base + j * inner] - dot));
        });
        break;
    case C_LOG_SOFTMAX: /* dx = g - softmax * sum(g) */
        EACH_LINE({
            double sum = 0;
            for (int64_t j = 0; j < size; j++) sum += g[base + j * inner];
            for (int64_t j = 0; j < size; j++)
                dx[base + j * inner] += (float)(g[base + j * inner] - exp((double)y[base + j * inner]) * sum);
        });
        break;
    }
    return TNT_OK;
}

const tnt__op_def tnt__ops_scan[] = {
    {"cumsum", 1, 1, parse_scan, infer_scan, forward_scan, backward_scan},
    {"softmax", 1, 1, parse_scan, infer_scan, forward_scan, backward_scan},
    {"log_softmax", 1, 1, parse_scan, infer_scan, forward_scan, backward_scan},
    {0}};

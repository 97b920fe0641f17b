/* zero_padding.c: ZeroPadding1D, ZeroPadding2D and ZeroPadding3D (Keras): zeros around the
 * spatial axes, (steps, c) -> (l+steps+r, c), (h, w, c) -> (t+h+b, l+w+r, c) and (d, h, w, c)
 * likewise; backward takes the interior of the gradient. One code for all three: the spatial axes
 * are (d, h, w) with the missing leading ones of size 1, and each output row along w is zeros, a
 * copy of an input row, zeros.
 * channels_first (2D, 3D): (c, spatial...) of n samples is n * c single-channel images in memory
 * (tnt__channels_last_view), padded by the same loops. No plan and no workspace. */
#include "gpu/gpu.h"
#include "gpu/kernels/kargs.h"
#include "layers/keras_config.h"
#include "layers/layer.h"

typedef struct zpad_cfg {
    int spatial;       /* 1, 2 or 3 */
    int pad[3][2];     /* (before, after) per axis d, h, w */
    /* from build: the padded image in (d, h, w, c) with c = 1 and planes = channels when channels
     * first; in and out sizes per axis */
    int64_t in[3], out[3], c, planes;
} zpad_cfg;

static tnt_status zpad_build(tnt_layer *l, tnt_shape in, tnt_shape *out) {
    zpad_cfg *c = l->priv;
    static const char *const axes[] = {"", "steps, channels", "height, width, channels", "depth, height, width, channels"};
    char b[96];
    if (in.ndim != c->spatial + 1)
        return tnt__error(TNT_ERR_SHAPE, "%s \"%s\": input shape %s has rank %d (expected %d: %s%s)", l->ops->class_name,
                          l->name, tnt_shape_str(in, b, sizeof b), in.ndim, c->spatial + 1, axes[c->spatial],
                          l->channels_first ? ", channels first" : "");
    for (int i = 0; i < in.ndim; i++)
        if (in.dim[i] <= 0)
            return tnt__error(TNT_ERR_SHAPE, "%s \"%s\": input shape %s has an empty dimension", l->ops->class_name,
                              l->name, tnt_shape_str(in, b, sizeof b));
    tnt_shape v = tnt__channels_last_view(l, in, &c->planes), o = v;
    for (int a = 0; a < 3; a++) {
        int i = a - (3 - c->spatial); /* axis of the view, < 0 for a missing leading axis */
        c->in[a] = i < 0 ? 1 : v.dim[i];
        c->out[a] = c->in[a] + c->pad[a][0] + c->pad[a][1];
        if (i >= 0) o.dim[i] = c->out[a];
    }
    c->c = v.dim[c->spatial];
    *out = tnt__channels_first_shape(l, o, c->planes);
    return TNT_OK;
}

/* x: (n, d, h, w, C) -> y: (n, d', h', w', C) with n = batch * planes */
static tnt_status zpad_forward(tnt_layer *l, void *plan, const tnt__fwd_args *a) {
    (void)plan;
    const zpad_cfg *c = l->priv;
    const int64_t C = c->c, row_in = c->in[2] * C, row_out = c->out[2] * C, rows = c->out[0] * c->out[1];
    const int64_t n_rows = a->batch * c->planes * rows;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < n_rows; r++) {
        int64_t n = r / rows, i = r % rows / c->out[1] - c->pad[0][0], j = r % c->out[1] - c->pad[1][0];
        float *yo = a->y + r * row_out;
        if (i < 0 || i >= c->in[0] || j < 0 || j >= c->in[1]) {
            memset(yo, 0, (size_t)row_out * sizeof(float));
            continue;
        }
        memset(yo, 0, (size_t)(c->pad[2][0] * C) * sizeof(float));
        memcpy(yo + c->pad[2][0] * C, a->x + ((n * c->in[0] + i) * c->in[1] + j) * row_in, (size_t)row_in * sizeof(float));
        memset(yo + c->pad[2][0] * C + row_in, 0, (size_t)(c->pad[2][1] * C) * sizeof(float));
    }
    if (a->preact) /* no activation: the pre-activation is the output */
        memcpy(a->preact, a->y, (size_t)(n_rows * row_out) * sizeof(float));
    return TNT_OK;
}

/* dy: (n, d', h', w', C) -> dx: (n, d, h, w, C), the interior of dy */
static tnt_status zpad_backward(tnt_layer *l, void *plan, const tnt__bwd_args *a) {
    (void)plan;
    const zpad_cfg *c = l->priv;
    if (!a->dx) return TNT_OK;
    const int64_t C = c->c, row_in = c->in[2] * C, row_out = c->out[2] * C, rows = c->in[0] * c->in[1];
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < a->batch * c->planes * rows; r++) {
        int64_t n = r / rows, i = r % rows / c->in[1] + c->pad[0][0], j = r % c->in[1] + c->pad[1][0];
        memcpy(a->dx + r * row_in, a->dy + ((n * c->out[0] + i) * c->out[1] + j) * row_out + c->pad[2][0] * C,
               (size_t)row_in * sizeof(float));
    }
    return TNT_OK;
}

/* ---- on the device: one box copy each way (gpu/kernels/misc.cu tnt_k_box_copy) ------------- */

#define GPU_BLOCK 256

/* y (n, out..., c) cell o = x (n, in..., c) cell o - off, or 0 outside x */
static tnt_status zpad_box(const zpad_cfg *c, int64_t batch, bool forward, const float *x, float *y) {
    tnt_k_box g = {.n = batch * c->planes, .c = c->c};
    for (int a = 0; a < 3; a++) {
        g.in[a] = (int)(forward ? c->in[a] : c->out[a]);
        g.out[a] = (int)(forward ? c->out[a] : c->in[a]);
        g.off[a] = (forward ? c->pad[a][0] : -c->pad[a][0]);
    }
    float zero = 0.0f;
    int64_t n = g.n * g.out[0] * g.out[1] * g.out[2] * g.c;
    void *args[] = {&g, &x, &y, &zero};
    return tnt__gpu_launch("tnt_k_box_copy", tnt__gpu_grid_for(n, GPU_BLOCK), GPU_BLOCK, 0, args);
}

static tnt_status zpad_gpu_forward(tnt_layer *l, void *plan, const tnt__fwd_args *a) {
    (void)plan;
    tnt_status s = zpad_box(l->priv, a->batch, true, a->x, a->y);
    if (s == TNT_OK && a->preact)
        s = tnt__gpu_copy_on_device(a->preact, a->y, (size_t)(a->batch * tnt_shape_numel(l->out_shape)) * sizeof(float),
                                    TNT__GPU_COMPUTE);
    return s;
}

static tnt_status zpad_gpu_backward(tnt_layer *l, void *plan, const tnt__bwd_args *a) {
    (void)plan;
    return a->dx ? zpad_box(l->priv, a->batch, false, a->dy, a->dx) : TNT_OK;
}

static const tnt__gpu_ops zpad_gpu_ops = {.forward = zpad_gpu_forward, .backward = zpad_gpu_backward};

static void zpad_destroy(tnt_layer *l) { free(l->priv); }

/* Keras: ZeroPadding1D's padding (left, right); 2D and 3D ((before, after), ...) and data_format */
static tnt_status zpad_get_config(const tnt_layer *l, cJSON *c) {
    const zpad_cfg *p = l->priv;
    if (p->spatial == 1) return tnt__kj_add_ints(c, "padding", 2, p->pad[2]);
    TNT_KJ_S(tnt__kj_add_margins(c, "padding", p->spatial, p->pad[3 - p->spatial]));
    return tnt__kj_add_data_format(c, l);
}

static tnt_layer *zpad_from_config(const cJSON *c, const tnt__kj_ctx *k, int spatial) {
    int p[6] = {0};
    if (spatial == 1) {
        static const int ones[2] = {1, 1};
        TNT_KJ_READ(tnt__kj_ints(c, "padding", false, 2, ones, p, k));
        return tnt__kj_built(tnt_zero_padding1d(p[0], p[1], k->name), k);
    }
    TNT_KJ_READ(tnt__kj_margins(c, "padding", spatial, 1, p, k));
    TNT_KJ_READ(tnt__kj_check_data_format(c, k));
    if (spatial == 2) return tnt__kj_built(tnt_zero_padding2d(p[0], p[1], p[2], p[3], k->name), k);
    return tnt__kj_built(tnt_zero_padding3d((const int(*)[2])p, k->name), k);
}

static tnt_layer *zpad1d_from_config(const cJSON *c, const tnt__kj_ctx *k) { return zpad_from_config(c, k, 1); }
static tnt_layer *zpad2d_from_config(const cJSON *c, const tnt__kj_ctx *k) { return zpad_from_config(c, k, 2); }
static tnt_layer *zpad3d_from_config(const cJSON *c, const tnt__kj_ctx *k) { return zpad_from_config(c, k, 3); }

#define ZPAD_OPS(var, cls, fromcfg, fmt)                                                          \
    const tnt__layer_ops var = {                                                                 \
        .class_name = cls,                                                                        \
        .from_config = fromcfg,                                                                   \
        .get_config = zpad_get_config,                                                            \
        .build = zpad_build,                                                                      \
        .forward = zpad_forward,                                                                  \
        .backward = zpad_backward,                                                                \
        .backward_reads = tnt__reads_nothing,                                                     \
        .destroy = zpad_destroy,                                                                  \
        .set_data_format = fmt,                                                                   \
        .gpu = &zpad_gpu_ops,                                                                     \
    };
ZPAD_OPS(tnt__zero_padding1d_ops, "ZeroPadding1D", zpad1d_from_config, NULL)
ZPAD_OPS(tnt__zero_padding2d_ops, "ZeroPadding2D", zpad2d_from_config, tnt__layer_take_data_format)
ZPAD_OPS(tnt__zero_padding3d_ops, "ZeroPadding3D", zpad3d_from_config, tnt__layer_take_data_format)

/* pad: (before, after) for each of the spatial axes, the last ones of (d, h, w) */
static tnt_layer *zpad_new(const tnt__layer_ops *ops, int spatial, const int *pad, const char *name) {
    for (int i = 0; i < 2 * spatial; i++)
        if (pad[i] < 0) {
            static const char *const form[] = {"", "(left, right)", "((top, bottom), (left, right))",
                                               "((front, back), (top, bottom), (left, right))"};
            char b[96];
            tnt__error(TNT_ERR_ARG, "%s \"%s\": padding %s (expected >= 0: %s)", ops->class_name, name ? name : "",
                       tnt__margins_str(b, sizeof b, spatial, pad), form[spatial]);
            return NULL;
        }
    zpad_cfg *c = tnt__calloc(1, sizeof *c);
    if (!c) return NULL;
    c->spatial = spatial;
    memcpy(c->pad[3 - spatial], pad, (size_t)(2 * spatial) * sizeof(int));
    tnt_layer *l = tnt__layer_new(ops, name, c);
    if (!l) free(c);
    return l;
}

tnt_layer *tnt_zero_padding1d(int left, int right, const char *name) {
    return zpad_new(&tnt__zero_padding1d_ops, 1, (int[]){left, right}, name);
}

tnt_layer *tnt_zero_padding2d(int top, int bottom, int left, int right, const char *name) {
    return zpad_new(&tnt__zero_padding2d_ops, 2, (int[]){top, bottom, left, right}, name);
}

tnt_layer *tnt_zero_padding3d(const int padding[3][2], const char *name) {
    if (!padding) {
        tnt__error(TNT_ERR_ARG, "ZeroPadding3D \"%s\": padding is NULL", name ? name : "");
        return NULL;
    }
    return zpad_new(&tnt__zero_padding3d_ops, 3, &padding[0][0], name);
}

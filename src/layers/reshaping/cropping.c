/* cropping.c: Cropping1D, Cropping2D and Cropping3D (Keras): the input without its border along
 * the spatial axes, (steps, c) -> (steps-l-r, c), (h, w, c) -> (h-t-b, w-l-r, c) and (d, h, w, c)
 * likewise; an error when nothing would be left. Backward puts the gradient back in place, zeros
 * on the cropped border. One code for all three: the spatial axes are (d, h, w) with the missing
 * leading ones of size 1.
 * channels_first (2D, 3D): (c, spatial...) of n samples is n * c single-channel images in memory
 * (tnt__channels_last_view), cropped by the same loops. No plan and no workspace. */
#include "gpu/gpu.h"
#include "gpu/kernels/kargs.h"
#include "layers/keras_config.h"
#include "layers/layer.h"

#include <stdio.h>

typedef struct crop_cfg {
    int spatial;     /* 1, 2 or 3 */
    int crop[3][2];  /* (before, after) per axis d, h, w */
    /* from build, as in zero_padding.c */
    int64_t in[3], out[3], c, planes;
} crop_cfg;

static tnt_status crop_build(tnt_layer *l, tnt_shape in, tnt_shape *out) {
    crop_cfg *c = l->priv;
    static const char *const axes[] = {"", "steps, channels", "height, width, channels", "depth, height, width, channels"};
    char b[96], m[96];
    if (in.ndim != c->spatial + 1)
        return tnt__error(TNT_ERR_SHAPE, "%s \"%s\": input shape %s has rank %d (expected %d: %s%s)", l->ops->class_name,
                          l->name, tnt_shape_str(in, b, sizeof b), in.ndim, c->spatial + 1, axes[c->spatial],
                          l->channels_first ? ", channels first" : "");
    for (int i = 0; i < in.ndim; i++)
        if (in.dim[i] <= 0)
            return tnt__error(TNT_ERR_SHAPE, "%s \"%s\": input shape %s has an empty dimension", l->ops->class_name,
                              l->name, tnt_shape_str(in, b, sizeof b));
    int64_t planes;
    tnt_shape v = tnt__channels_last_view(l, in, &planes), o = v;
    bool empty = false;
    for (int a = 0; a < 3; a++) {
        int i = a - (3 - c->spatial); /* axis of the view, < 0 for a missing leading axis */
        c->in[a] = i < 0 ? 1 : v.dim[i];
        c->out[a] = c->in[a] - c->crop[a][0] - c->crop[a][1];
        if (i >= 0) o.dim[i] = TNT_MAX(c->out[a], 0);
        empty |= c->out[a] <= 0;
    }
    c->c = v.dim[c->spatial];
    c->planes = planes;
    if (empty) {
        char ob[96];
        return tnt__error(TNT_ERR_SHAPE, "%s \"%s\": cropping %s leaves nothing of input shape %s: output would be %s",
                          l->ops->class_name, l->name, tnt__margins_str(m, sizeof m, c->spatial, c->crop[3 - c->spatial]),
                          tnt_shape_str(in, b, sizeof b), tnt_shape_str(tnt__channels_first_shape(l, o, planes), ob, sizeof ob));
    }
    *out = tnt__channels_first_shape(l, o, planes);
    return TNT_OK;
}

/* x: (n, d, h, w, C) -> y: (n, d', h', w', C) with n = batch * planes */
static tnt_status crop_forward(tnt_layer *l, void *plan, const tnt__fwd_args *a) {
    (void)plan;
    const crop_cfg *c = l->priv;
    const int64_t C = c->c, row_in = c->in[2] * C, row_out = c->out[2] * C, rows = c->out[0] * c->out[1];
    const int64_t n_rows = a->batch * c->planes * rows;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < n_rows; r++) {
        int64_t n = r / rows, i = r % rows / c->out[1] + c->crop[0][0], j = r % c->out[1] + c->crop[1][0];
        memcpy(a->y + r * row_out, a->x + ((n * c->in[0] + i) * c->in[1] + j) * row_in + c->crop[2][0] * C,
               (size_t)row_out * sizeof(float));
    }
    if (a->preact) /* no activation: the pre-activation is the output */
        memcpy(a->preact, a->y, (size_t)(n_rows * row_out) * sizeof(float));
    return TNT_OK;
}

/* dy: (n, d', h', w', C) -> dx: (n, d, h, w, C), dy in place and zeros on the border */
static tnt_status crop_backward(tnt_layer *l, void *plan, const tnt__bwd_args *a) {
    (void)plan;
    const crop_cfg *c = l->priv;
    if (!a->dx) return TNT_OK;
    const int64_t C = c->c, row_in = c->in[2] * C, row_out = c->out[2] * C, rows = c->in[0] * c->in[1];
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < a->batch * c->planes * rows; r++) {
        int64_t n = r / rows, i = r % rows / c->in[1] - c->crop[0][0], j = r % c->in[1] - c->crop[1][0];
        float *gi = a->dx + r * row_in;
        if (i < 0 || i >= c->out[0] || j < 0 || j >= c->out[1]) {
            memset(gi, 0, (size_t)row_in * sizeof(float));
            continue;
        }
        memset(gi, 0, (size_t)(c->crop[2][0] * C) * sizeof(float));
        memcpy(gi + c->crop[2][0] * C, a->dy + ((n * c->out[0] + i) * c->out[1] + j) * row_out,
               (size_t)row_out * sizeof(float));
        memset(gi + c->crop[2][0] * C + row_out, 0, (size_t)(c->crop[2][1] * C) * sizeof(float));
    }
    return TNT_OK;
}

/* ---- on the device: one box copy each way (gpu/kernels/misc.cu tnt_k_box_copy) ------------- */

#define GPU_BLOCK 256

/* y (n, out..., c) cell o = x (n, in..., c) cell o - off, or 0 outside x */
static tnt_status crop_box(const crop_cfg *c, int64_t batch, bool forward, const float *x, float *y) {
    tnt_k_box g = {.n = batch * c->planes, .c = c->c};
    for (int a = 0; a < 3; a++) {
        g.in[a] = (int)(forward ? c->in[a] : c->out[a]);
        g.out[a] = (int)(forward ? c->out[a] : c->in[a]);
        g.off[a] = -(forward ? c->crop[a][0] : -c->crop[a][0]);
    }
    float zero = 0.0f;
    int64_t n = g.n * g.out[0] * g.out[1] * g.out[2] * g.c;
    void *args[] = {&g, &x, &y, &zero};
    return tnt__gpu_launch("tnt_k_box_copy", tnt__gpu_grid_for(n, GPU_BLOCK), GPU_BLOCK, 0, args);
}

static tnt_status crop_gpu_forward(tnt_layer *l, void *plan, const tnt__fwd_args *a) {
    (void)plan;
    tnt_status s = crop_box(l->priv, a->batch, true, a->x, a->y);
    if (s == TNT_OK && a->preact)
        s = tnt__gpu_copy_on_device(a->preact, a->y, (size_t)(a->batch * tnt_shape_numel(l->out_shape)) * sizeof(float),
                                    TNT__GPU_COMPUTE);
    return s;
}

static tnt_status crop_gpu_backward(tnt_layer *l, void *plan, const tnt__bwd_args *a) {
    (void)plan;
    return a->dx ? crop_box(l->priv, a->batch, false, a->dy, a->dx) : TNT_OK;
}

static const tnt__gpu_ops crop_gpu_ops = {.forward = crop_gpu_forward, .backward = crop_gpu_backward};

static void crop_destroy(tnt_layer *l) { free(l->priv); }

/* Keras: Cropping1D's cropping (left, right); 2D and 3D ((before, after), ...) and data_format */
static tnt_status crop_get_config(const tnt_layer *l, cJSON *c) {
    const crop_cfg *p = l->priv;
    if (p->spatial == 1) return tnt__kj_add_ints(c, "cropping", 2, p->crop[2]);
    TNT_KJ_S(tnt__kj_add_margins(c, "cropping", p->spatial, p->crop[3 - p->spatial]));
    return tnt__kj_add_data_format(c, l);
}

static tnt_layer *crop_from_config(const cJSON *c, const tnt__kj_ctx *k, int spatial) {
    int p[6] = {0};
    if (spatial == 1) {
        static const int ones[2] = {1, 1};
        TNT_KJ_READ(tnt__kj_ints(c, "cropping", false, 2, ones, p, k));
        return tnt__kj_built(tnt_cropping1d(p[0], p[1], k->name), k);
    }
    TNT_KJ_READ(tnt__kj_margins(c, "cropping", spatial, 0, p, k));
    TNT_KJ_READ(tnt__kj_check_data_format(c, k));
    if (spatial == 2) return tnt__kj_built(tnt_cropping2d(p[0], p[1], p[2], p[3], k->name), k);
    return tnt__kj_built(tnt_cropping3d((const int(*)[2])p, k->name), k);
}

static tnt_layer *crop1d_from_config(const cJSON *c, const tnt__kj_ctx *k) { return crop_from_config(c, k, 1); }
static tnt_layer *crop2d_from_config(const cJSON *c, const tnt__kj_ctx *k) { return crop_from_config(c, k, 2); }
static tnt_layer *crop3d_from_config(const cJSON *c, const tnt__kj_ctx *k) { return crop_from_config(c, k, 3); }

#define CROP_OPS(var, cls, fromcfg, fmt)                                                          \
    const tnt__layer_ops var = {                                                                 \
        .class_name = cls,                                                                        \
        .from_config = fromcfg,                                                                   \
        .get_config = crop_get_config,                                                            \
        .build = crop_build,                                                                      \
        .forward = crop_forward,                                                                  \
        .backward = crop_backward,                                                                \
        .destroy = crop_destroy,                                                                  \
        .set_data_format = fmt,                                                                   \
        .gpu = &crop_gpu_ops,                                                                     \
    };
CROP_OPS(tnt__cropping1d_ops, "Cropping1D", crop1d_from_config, NULL)
CROP_OPS(tnt__cropping2d_ops, "Cropping2D", crop2d_from_config, tnt__layer_take_data_format)
CROP_OPS(tnt__cropping3d_ops, "Cropping3D", crop3d_from_config, tnt__layer_take_data_format)

/* crop: (before, after) for each of the spatial axes, the last ones of (d, h, w) */
static tnt_layer *crop_new(const tnt__layer_ops *ops, int spatial, const int *crop, const char *name) {
    for (int i = 0; i < 2 * spatial; i++)
        if (crop[i] < 0) {
            static const char *const form[] = {"", "(left, right)", "((top, bottom), (left, right))",
                                               "((front, back), (top, bottom), (left, right))"};
            char b[96];
            tnt__error(TNT_ERR_ARG, "%s \"%s\": cropping %s (expected >= 0: %s)", ops->class_name, name ? name : "",
                       tnt__margins_str(b, sizeof b, spatial, crop), form[spatial]);
            return NULL;
        }
    crop_cfg *c = tnt__calloc(1, sizeof *c);
    if (!c) return NULL;
    c->spatial = spatial;
    memcpy(c->crop[3 - spatial], crop, (size_t)(2 * spatial) * sizeof(int));
    tnt_layer *l = tnt__layer_new(ops, name, c);
    if (!l) free(c);
    return l;
}

tnt_layer *tnt_cropping1d(int left, int right, const char *name) {
    return crop_new(&tnt__cropping1d_ops, 1, (int[]){left, right}, name);
}

tnt_layer *tnt_cropping2d(int top, int bottom, int left, int right, const char *name) {
    return crop_new(&tnt__cropping2d_ops, 2, (int[]){top, bottom, left, right}, name);
}

tnt_layer *tnt_cropping3d(const int cropping[3][2], const char *name) {
    if (!cropping) {
        tnt__error(TNT_ERR_ARG, "Cropping3D \"%s\": cropping is NULL", name ? name : "");
        return NULL;
    }
    return crop_new(&tnt__cropping3d_ops, 3, &cropping[0][0], name);
}

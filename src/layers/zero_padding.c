/* zero_padding.c: ZeroPadding2D (Keras) over NHWC input: (h, w, c) -> (h+top+bottom,
 * w+left+right, c), zeros around the input; ZeroPadding1D: (steps, c) -> (left+steps+right, c),
 * the same code on (steps, 1, c). Backward takes the interior of the gradient. No plan and no
 * workspace. */
#include "layers/keras_config.h"
#include "layers/layer.h"

typedef struct zpad_cfg {
    int top, bottom, left, right;
    int64_t ih, iw, c, oh, ow; /* from build */
} zpad_cfg;

static tnt_status zpad_build(tnt_layer *l, tnt_shape in, tnt_shape *out) {
    zpad_cfg *c = l->priv;
    char b[96];
    if (in.ndim != 3)
        return tnt__error(TNT_ERR_SHAPE,
                          "%s \"%s\": input shape %s has rank %d (expected 3: height, "
                          "width, channels)",
                          l->ops->class_name, l->name, tnt_shape_str(in, b, sizeof b), in.ndim);
    if (in.dim[0] <= 0 || in.dim[1] <= 0 || in.dim[2] <= 0)
        return tnt__error(TNT_ERR_SHAPE, "%s \"%s\": input shape %s has an empty dimension",
                          l->ops->class_name, l->name, tnt_shape_str(in, b, sizeof b));
    c->ih = in.dim[0];
    c->iw = in.dim[1];
    c->c = in.dim[2];
    c->oh = c->ih + c->top + c->bottom;
    c->ow = c->iw + c->left + c->right;
    *out = TNT_SHAPE(c->oh, c->ow, c->c);
    return TNT_OK;
}

/* ZeroPadding1D: (steps, c) as (steps, 1, c), padded on the steps axis (top, bottom) only */
static tnt_status zpad1d_build(tnt_layer *l, tnt_shape in, tnt_shape *out) {
    return tnt__build_steps_as_2d(l, in, out, zpad_build);
}

/* x: (batch, ih, iw, C) -> y: (batch, oh, ow, C), x at rows [top, top+ih), cols [left, left+iw) */
static tnt_status zpad_forward(tnt_layer *l, void *plan, const tnt__fwd_args *a) {
    (void)plan;
    const zpad_cfg *c = l->priv;
    const int64_t C = c->c, row_in = c->iw * C, row_out = c->ow * C;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < a->batch * c->oh; r++) {
        int64_t n = r / c->oh, i = r % c->oh - c->top;
        float *yo = a->y + r * row_out;
        if (i < 0 || i >= c->ih) {
            memset(yo, 0, (size_t)row_out * sizeof(float));
            continue;
        }
        memset(yo, 0, (size_t)(c->left * C) * sizeof(float));
        memcpy(yo + c->left * C, a->x + (n * c->ih + i) * row_in, (size_t)row_in * sizeof(float));
        memset(yo + c->left * C + row_in, 0, (size_t)(c->right * C) * sizeof(float));
    }
    if (a->preact) /* no activation: the pre-activation is the output */
        memcpy(a->preact, a->y, (size_t)(a->batch * c->oh * row_out) * sizeof(float));
    return TNT_OK;
}

/* dy: (batch, oh, ow, C) -> dx: (batch, ih, iw, C), the interior of dy */
static tnt_status zpad_backward(tnt_layer *l, void *plan, const tnt__bwd_args *a) {
    (void)plan;
    const zpad_cfg *c = l->priv;
    if (!a->dx) return TNT_OK;
    const int64_t C = c->c, row_in = c->iw * C, row_out = c->ow * C;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < a->batch * c->ih; r++) {
        int64_t n = r / c->ih, i = r % c->ih;
        memcpy(a->dx + r * row_in, a->dy + (n * c->oh + i + c->top) * row_out + c->left * C,
               (size_t)row_in * sizeof(float));
    }
    return TNT_OK;
}

static void zpad_destroy(tnt_layer *l) { free(l->priv); }

static tnt_status zpad_get_config(const tnt_layer *l, cJSON *c) {
    const zpad_cfg *p = l->priv;
    return tnt__kj_add_2d_margins(c, "padding", p->top, p->bottom, p->left, p->right);
}

static tnt_layer *zpad_from_config(const cJSON *c, const tnt__kj_ctx *k) {
    int p[4] = {0};
    TNT_KJ_READ(tnt__kj_2d_margins(c, "padding", 1, p, k));
    return tnt__kj_built(tnt_zero_padding2d(p[0], p[1], p[2], p[3], k->name), k);
}

const tnt__layer_ops tnt__zero_padding2d_ops = {
    .class_name = "ZeroPadding2D",
    .from_config = zpad_from_config,
    .get_config = zpad_get_config,
    .build = zpad_build,
    .forward = zpad_forward,
    .backward = zpad_backward,
    .destroy = zpad_destroy,
};

static tnt_layer *zpad_new(const tnt__layer_ops *ops, int top, int bottom, int left, int right, const char *name) {
    zpad_cfg *c = tnt__calloc(1, sizeof *c);
    if (!c) return NULL;
    *c = (zpad_cfg){.top = top, .bottom = bottom, .left = left, .right = right};
    tnt_layer *l = tnt__layer_new(ops, name, c);
    if (!l) free(c);
    return l;
}

tnt_layer *tnt_zero_padding2d(int top, int bottom, int left, int right, const char *name) {
    if (top < 0 || bottom < 0 || left < 0 || right < 0) {
        tnt__error(TNT_ERR_ARG,
                   "ZeroPadding2D \"%s\": padding ((%d, %d), (%d, %d)) (expected >= 0: "
                   "((top, bottom), (left, right)))",
                   name ? name : "", top, bottom, left, right);
        return NULL;
    }
    return zpad_new(&tnt__zero_padding2d_ops, top, bottom, left, right, name);
}

static tnt_status zpad1d_get_config(const tnt_layer *l, cJSON *c) {
    const zpad_cfg *p = l->priv;
    return tnt__kj_add_ints(c, "padding", 2, (int[]){p->top, p->bottom});
}

static tnt_layer *zpad1d_from_config(const cJSON *c, const tnt__kj_ctx *k) {
    static const int ones[2] = {1, 1};
    int p[2];
    TNT_KJ_READ(tnt__kj_ints(c, "padding", false, 2, ones, p, k));
    return tnt__kj_built(tnt_zero_padding1d(p[0], p[1], k->name), k);
}

const tnt__layer_ops tnt__zero_padding1d_ops = {
    .class_name = "ZeroPadding1D",
    .from_config = zpad1d_from_config,
    .get_config = zpad1d_get_config,
    .build = zpad1d_build,
    .forward = zpad_forward,
    .backward = zpad_backward,
    .destroy = zpad_destroy,
};

tnt_layer *tnt_zero_padding1d(int left, int right, const char *name) {
    if (left < 0 || right < 0) {
        tnt__error(TNT_ERR_ARG, "ZeroPadding1D \"%s\": padding (%d, %d) (expected >= 0: (left, right))",
                   name ? name : "", left, right);
        return NULL;
    }
    return zpad_new(&tnt__zero_padding1d_ops, left, right, 0, 0, name);
}

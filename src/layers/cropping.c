/* cropping.c: Cropping2D (Keras) over NHWC input: (h, w, c) -> (h-top-bottom, w-left-right, c),
 * the input without its border rows and columns; an error when nothing would be left.
 * Cropping1D: (steps, c) -> (steps-left-right, c), the same code on (steps, 1, c). Backward
 * puts the gradient back in place, zeros on the cropped border. No plan and no workspace. */
#include "layers/keras_config.h"
#include "layers/layer.h"

typedef struct crop_cfg {
    int top, bottom, left, right;
    int64_t ih, iw, c, oh, ow; /* from build */
} crop_cfg;

static tnt_status crop_build(tnt_layer *l, tnt_shape in, tnt_shape *out) {
    crop_cfg *c = l->priv;
    char b[96];
    if (in.ndim != 3)
        return tnt__error(TNT_ERR_SHAPE,
                          "%s \"%s\": input shape %s has rank %d (expected 3: height, "
                          "width, channels)",
                          l->ops->class_name, l->name, tnt_shape_str(in, b, sizeof b), in.ndim);
    if (in.dim[0] <= 0 || in.dim[1] <= 0 || in.dim[2] <= 0)
        return tnt__error(TNT_ERR_SHAPE, "%s \"%s\": input shape %s has an empty dimension",
                          l->ops->class_name, l->name, tnt_shape_str(in, b, sizeof b));
    int64_t oh = in.dim[0] - c->top - c->bottom, ow = in.dim[1] - c->left - c->right;
    if (oh <= 0 || ow <= 0)
        return tnt__error(TNT_ERR_SHAPE,
                          "%s \"%s\": cropping ((%d, %d), (%d, %d)) leaves nothing of input "
                          "shape %s: output would be (%lld, %lld, %lld)",
                          l->ops->class_name, l->name, c->top, c->bottom, c->left, c->right,
                          tnt_shape_str(in, b, sizeof b), (long long)oh, (long long)ow,
                          (long long)in.dim[2]);
    c->ih = in.dim[0];
    c->iw = in.dim[1];
    c->c = in.dim[2];
    c->oh = oh;
    c->ow = ow;
    *out = TNT_SHAPE(c->oh, c->ow, c->c);
    return TNT_OK;
}

/* Cropping1D: (steps, c) as (steps, 1, c), cropped on the steps axis (top, bottom) only */
static tnt_status crop1d_build(tnt_layer *l, tnt_shape in, tnt_shape *out) {
    return tnt__build_steps_as_2d(l, in, out, crop_build);
}

/* x: (batch, ih, iw, C) -> y: (batch, oh, ow, C), rows [top, top+oh), cols [left, left+ow) of x */
static tnt_status crop_forward(tnt_layer *l, void *plan, const tnt__fwd_args *a) {
    (void)plan;
    const crop_cfg *c = l->priv;
    const int64_t C = c->c, row_in = c->iw * C, row_out = c->ow * C;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < a->batch * c->oh; r++) {
        int64_t n = r / c->oh, i = r % c->oh;
        memcpy(a->y + r * row_out, a->x + (n * c->ih + i + c->top) * row_in + c->left * C,
               (size_t)row_out * sizeof(float));
    }
    if (a->preact) /* no activation: the pre-activation is the output */
        memcpy(a->preact, a->y, (size_t)(a->batch * c->oh * row_out) * sizeof(float));
    return TNT_OK;
}

/* dy: (batch, oh, ow, C) -> dx: (batch, ih, iw, C), dy in place and zeros on the border */
static tnt_status crop_backward(tnt_layer *l, void *plan, const tnt__bwd_args *a) {
    (void)plan;
    const crop_cfg *c = l->priv;
    if (!a->dx) return TNT_OK;
    const int64_t C = c->c, row_in = c->iw * C, row_out = c->ow * C;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < a->batch * c->ih; r++) {
        int64_t n = r / c->ih, i = r % c->ih - c->top;
        float *gi = a->dx + r * row_in;
        if (i < 0 || i >= c->oh) {
            memset(gi, 0, (size_t)row_in * sizeof(float));
            continue;
        }
        memset(gi, 0, (size_t)(c->left * C) * sizeof(float));
        memcpy(gi + c->left * C, a->dy + (n * c->oh + i) * row_out, (size_t)row_out * sizeof(float));
        memset(gi + c->left * C + row_out, 0, (size_t)(c->right * C) * sizeof(float));
    }
    return TNT_OK;
}

static void crop_destroy(tnt_layer *l) { free(l->priv); }

static tnt_status crop_get_config(const tnt_layer *l, cJSON *c) {
    const crop_cfg *p = l->priv;
    return tnt__kj_add_2d_margins(c, "cropping", p->top, p->bottom, p->left, p->right);
}

static tnt_layer *crop_from_config(const cJSON *c, const tnt__kj_ctx *k) {
    int p[4] = {0};
    TNT_KJ_READ(tnt__kj_2d_margins(c, "cropping", 0, p, k));
    return tnt__kj_built(tnt_cropping2d(p[0], p[1], p[2], p[3], k->name), k);
}

const tnt__layer_ops tnt__cropping2d_ops = {
    .class_name = "Cropping2D",
    .from_config = crop_from_config,
    .get_config = crop_get_config,
    .build = crop_build,
    .forward = crop_forward,
    .backward = crop_backward,
    .destroy = crop_destroy,
};

static tnt_layer *crop_new(const tnt__layer_ops *ops, int top, int bottom, int left, int right, const char *name) {
    crop_cfg *c = tnt__calloc(1, sizeof *c);
    if (!c) return NULL;
    *c = (crop_cfg){.top = top, .bottom = bottom, .left = left, .right = right};
    tnt_layer *l = tnt__layer_new(ops, name, c);
    if (!l) free(c);
    return l;
}

tnt_layer *tnt_cropping2d(int top, int bottom, int left, int right, const char *name) {
    if (top < 0 || bottom < 0 || left < 0 || right < 0) {
        tnt__error(TNT_ERR_ARG,
                   "Cropping2D \"%s\": cropping ((%d, %d), (%d, %d)) (expected >= 0: "
                   "((top, bottom), (left, right)))",
                   name ? name : "", top, bottom, left, right);
        return NULL;
    }
    return crop_new(&tnt__cropping2d_ops, top, bottom, left, right, name);
}

static tnt_status crop1d_get_config(const tnt_layer *l, cJSON *c) {
    const crop_cfg *p = l->priv;
    return tnt__kj_add_ints(c, "cropping", 2, (int[]){p->top, p->bottom});
}

static tnt_layer *crop1d_from_config(const cJSON *c, const tnt__kj_ctx *k) {
    static const int ones[2] = {1, 1};
    int p[2];
    TNT_KJ_READ(tnt__kj_ints(c, "cropping", false, 2, ones, p, k));
    return tnt__kj_built(tnt_cropping1d(p[0], p[1], k->name), k);
}

const tnt__layer_ops tnt__cropping1d_ops = {
    .class_name = "Cropping1D",
    .from_config = crop1d_from_config,
    .get_config = crop1d_get_config,
    .build = crop1d_build,
    .forward = crop_forward,
    .backward = crop_backward,
    .destroy = crop_destroy,
};

tnt_layer *tnt_cropping1d(int left, int right, const char *name) {
    if (left < 0 || right < 0) {
        tnt__error(TNT_ERR_ARG, "Cropping1D \"%s\": cropping (%d, %d) (expected >= 0: (left, right))",
                   name ? name : "", left, right);
        return NULL;
    }
    return crop_new(&tnt__cropping1d_ops, left, right, 0, 0, name);
}

/* upsampling.c: UpSampling2D (Keras) over NHWC input with interpolation "nearest":
 * (h, w, c) -> (h*size_h, w*size_w, c), each cell repeated over a size_h x size_w block.
 * Backward sums the gradient over each block. "bilinear" is refused as unsupported. No plan and
 * no workspace. */
#include "layers/keras_config.h"
#include "layers/layer.h"

#include <string.h>

typedef struct up_cfg {
    int sh, sw;
    int64_t ih, iw, c, oh, ow; /* from build */
} up_cfg;

static tnt_status up_build(tnt_layer *l, tnt_shape in, tnt_shape *out) {
    up_cfg *c = l->priv;
    char b[96];
    if (in.ndim != 3)
        return tnt__error(TNT_ERR_SHAPE,
                          "UpSampling2D \"%s\": input shape %s has rank %d (expected 3: height, "
                          "width, channels)",
                          l->name, tnt_shape_str(in, b, sizeof b), in.ndim);
    if (in.dim[0] <= 0 || in.dim[1] <= 0 || in.dim[2] <= 0)
        return tnt__error(TNT_ERR_SHAPE, "UpSampling2D \"%s\": input shape %s has an empty dimension",
                          l->name, tnt_shape_str(in, b, sizeof b));
    c->ih = in.dim[0];
    c->iw = in.dim[1];
    c->c = in.dim[2];
    c->oh = c->ih * c->sh;
    c->ow = c->iw * c->sw;
    *out = TNT_SHAPE(c->oh, c->ow, c->c);
    return TNT_OK;
}

/* x: (batch, ih, iw, C) -> y: (batch, ih*sh, iw*sw, C), y[i][j] = x[i/sh][j/sw] */
static tnt_status up_forward(tnt_layer *l, void *plan, const tnt__fwd_args *a) {
    (void)plan;
    const up_cfg *c = l->priv;
    const int64_t C = c->c, row_in = c->iw * C, row_out = c->ow * C;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < a->batch * c->oh; r++) {
        int64_t n = r / c->oh, i = r % c->oh / c->sh;
        const float *xi = a->x + (n * c->ih + i) * row_in;
        float *yo = a->y + r * row_out;
        for (int64_t j = 0; j < c->iw; j++)
            for (int s = 0; s < c->sw; s++)
                memcpy(yo + (j * c->sw + s) * C, xi + j * C, (size_t)C * sizeof(float));
    }
    if (a->preact) /* no activation: the pre-activation is the output */
        memcpy(a->preact, a->y, (size_t)(a->batch * c->oh * row_out) * sizeof(float));
    return TNT_OK;
}

/* dy: (batch, ih*sh, iw*sw, C) -> dx: (batch, ih, iw, C), the sum of each sh x sw block */
static tnt_status up_backward(tnt_layer *l, void *plan, const tnt__bwd_args *a) {
    (void)plan;
    const up_cfg *c = l->priv;
    if (!a->dx) return TNT_OK;
    const int64_t C = c->c, row_in = c->iw * C, row_out = c->ow * C;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < a->batch * c->ih; r++) {
        int64_t n = r / c->ih, i = r % c->ih;
        float *gi = a->dx + r * row_in;
        memset(gi, 0, (size_t)row_in * sizeof(float));
        for (int t = 0; t < c->sh; t++) {
            const float *go = a->dy + (n * c->oh + i * c->sh + t) * row_out;
            for (int64_t j = 0; j < c->iw; j++)
                for (int s = 0; s < c->sw; s++) {
                    const float *g = go + (j * c->sw + s) * C;
                    for (int64_t ch = 0; ch < C; ch++) gi[j * C + ch] += g[ch];
                }
        }
    }
    return TNT_OK;
}

static void up_destroy(tnt_layer *l) { free(l->priv); }

static tnt_status up_get_config(const tnt_layer *l, cJSON *c) {
    const up_cfg *p = l->priv;
    TNT_KJ_S(tnt__kj_add_ints(c, "size", 2, (int[]){p->sh, p->sw}));
    TNT_KJ(cJSON_AddStringToObject(c, "data_format", "channels_last"));
    TNT_KJ(cJSON_AddStringToObject(c, "interpolation", "nearest"));
    return TNT_OK;
}

static tnt_layer *up_from_config(const cJSON *c, const tnt__kj_ctx *k) {
    static const int two[2] = {2, 2};
    int sz[2] = {0};
    bool bad = false;
    TNT_KJ_READ(tnt__kj_sizes(c, "size", false, 2, two, sz, k));
    TNT_KJ_READ(tnt__kj_check_data_format(c, k));
    const char *interp = tnt__kj_str(c, "interpolation", &bad, k);
    if (bad) return NULL;
    return tnt__kj_built(tnt_upsampling2d(sz[0], sz[1], interp, k->name), k);
}

const tnt__layer_ops tnt__upsampling2d_ops = {
    .class_name = "UpSampling2D",
    .from_config = up_from_config,
    .get_config = up_get_config,
    .build = up_build,
    .forward = up_forward,
    .backward = up_backward,
    .destroy = up_destroy,
};

tnt_layer *tnt_upsampling2d(int size_h, int size_w, const char *interpolation, const char *name) {
    const char *nm = name ? name : "";
    if (size_h <= 0 || size_w <= 0) {
        tnt__error(TNT_ERR_ARG, "UpSampling2D \"%s\": size (%d, %d) (expected > 0)", nm, size_h,
                   size_w);
        return NULL;
    }
    if (interpolation && strcmp(interpolation, "nearest") != 0) {
        if (strcmp(interpolation, "bilinear") == 0)
            tnt__error(TNT_ERR_UNSUPPORTED,
                       "UpSampling2D \"%s\": interpolation \"bilinear\" is not supported (only "
                       "\"nearest\")",
                       nm);
        else
            tnt__error(TNT_ERR_ARG,
                       "UpSampling2D \"%s\": interpolation \"%s\" (expected \"nearest\")", nm,
                       interpolation);
        return NULL;
    }
    up_cfg *c = tnt__calloc(1, sizeof *c);
    if (!c) return NULL;
    *c = (up_cfg){.sh = size_h, .sw = size_w};
    tnt_layer *l = tnt__layer_new(&tnt__upsampling2d_ops, name, c);
    if (!l) free(c);
    return l;
}

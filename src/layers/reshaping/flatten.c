/* flatten.c: Flatten, (d1, ..., dn) -> (d1*...*dn).
 * channels_last (Keras's default): the values in their order, which for (h, w, c) is NHWC order. A
 * view: the model aliases its output to its input and never calls forward or backward.
 * channels_first: Keras first moves the channel axis (the first non-batch one) to the end, so
 * (c, h, w) flattens in (h, w, c) order and a Dense after it sees the same feature order in both
 * formats. That is a transpose, so this variant is a real layer (flatten_cf_ops), put in place by
 * set_data_format. */
#include "layers/keras_config.h"
#include "layers/layer.h"

static tnt_status flatten_build(tnt_layer *l, tnt_shape in, tnt_shape *out) {
    (void)l;
    *out = (tnt_shape){.ndim = 1, .dim = {tnt_shape_numel(in)}};
    return TNT_OK;
}

/* The channel count and the spatial cells per channel (1 and all for an input of rank 1). */
static void cf_dims(const tnt_layer *l, int64_t *C, int64_t *S) {
    *C = l->in_shape.ndim >= 2 ? l->in_shape.dim[0] : 1;
    *S = tnt_shape_numel(l->in_shape) / *C;
}

/* x: (batch, C, S) -> y: (batch, S, C) */
static tnt_status flatten_cf_forward(tnt_layer *l, void *plan, const tnt__fwd_args *a) {
    (void)plan;
    int64_t C, S;
    cf_dims(l, &C, &S);
#pragma omp parallel for schedule(static)
    for (int64_t n = 0; n < a->batch; n++)
        for (int64_t s = 0; s < S; s++)
            for (int64_t ch = 0; ch < C; ch++) a->y[(n * S + s) * C + ch] = a->x[(n * C + ch) * S + s];
    if (a->preact) memcpy(a->preact, a->y, (size_t)(a->batch * C * S) * sizeof(float));
    return TNT_OK;
}

/* dy: (batch, S, C) -> dx: (batch, C, S) */
static tnt_status flatten_cf_backward(tnt_layer *l, void *plan, const tnt__bwd_args *a) {
    (void)plan;
    if (!a->dx) return TNT_OK;
    int64_t C, S;
    cf_dims(l, &C, &S);
#pragma omp parallel for schedule(static)
    for (int64_t n = 0; n < a->batch; n++)
        for (int64_t ch = 0; ch < C; ch++)
            for (int64_t s = 0; s < S; s++) a->dx[(n * C + ch) * S + s] = a->dy[(n * S + s) * C + ch];
    return TNT_OK;
}

static tnt_status flatten_get_config(const tnt_layer *l, cJSON *c) { return tnt__kj_add_data_format(c, l); }

static tnt_layer *flatten_from_config(const cJSON *c, const tnt__kj_ctx *k) {
    TNT_KJ_READ(tnt__kj_check_data_format(c, k));
    return tnt__kj_built(tnt_flatten(k->name), k);
}

static tnt_status flatten_set_data_format(tnt_layer *l, bool channels_first);

const tnt__layer_ops tnt__flatten_ops = {
    .class_name = "Flatten",
    .from_config = flatten_from_config,
    .get_config = flatten_get_config,
    .build = flatten_build,
    .is_view = true,
    .set_data_format = flatten_set_data_format,
};

static const tnt__layer_ops flatten_cf_ops = {
    .class_name = "Flatten",
    .from_config = flatten_from_config,
    .get_config = flatten_get_config,
    .build = flatten_build,
    .forward = flatten_cf_forward,
    .backward = flatten_cf_backward,
    .set_data_format = flatten_set_data_format,
};

static tnt_status flatten_set_data_format(tnt_layer *l, bool channels_first) {
    l->channels_first = channels_first;
    l->ops = channels_first ? &flatten_cf_ops : &tnt__flatten_ops;
    return TNT_OK;
}

tnt_layer *tnt_flatten(const char *name) { return tnt__layer_new(&tnt__flatten_ops, name, NULL); }

/* flatten.c: Flatten, (h, w, c) -> (h*w*c) in NHWC order, which is Keras's order. A view: the
 * model aliases its output to its input and never calls forward or backward. */
#include "layers/keras_config.h"
#include "layers/layer.h"

static tnt_status flatten_build(tnt_layer *l, tnt_shape in, tnt_shape *out) {
    (void)l;
    *out = (tnt_shape){.ndim = 1, .dim = {tnt_shape_numel(in)}};
    return TNT_OK;
}

static tnt_status flatten_get_config(const tnt_layer *l, cJSON *c) {
    (void)l;
    TNT_KJ(cJSON_AddStringToObject(c, "data_format", "channels_last"));
    return TNT_OK;
}

static tnt_layer *flatten_from_config(const cJSON *c, const tnt__kj_ctx *k) {
    TNT_KJ_READ(tnt__kj_check_data_format(c, k));
    return tnt__kj_built(tnt_flatten(k->name), k);
}

const tnt__layer_ops tnt__flatten_ops = {
    .class_name = "Flatten",
    .from_config = flatten_from_config,
    .get_config = flatten_get_config,
    .build = flatten_build,
    .is_view = true,
};

tnt_layer *tnt_flatten(const char *name) { return tnt__layer_new(&tnt__flatten_ops, name, NULL); }

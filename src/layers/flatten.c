/* flatten.c: Flatten, (h, w, c) -> (h*w*c) in NHWC order, which is Keras's order. A view: the
 * model aliases its output to its input and never calls forward or backward. */
#include "layers/layer.h"

static tnt_status flatten_build(tnt_layer *l, tnt_shape in, tnt_shape *out) {
    (void)l;
    *out = (tnt_shape){.ndim = 1, .dim = {tnt_shape_numel(in)}};
    return TNT_OK;
}

static const tnt__layer_ops flatten_ops = {
    .class_name = "Flatten",
    .build = flatten_build,
    .is_view = true,
};

tnt_layer *tnt_flatten(const char *name) { return tnt__layer_new(&flatten_ops, name, NULL); }

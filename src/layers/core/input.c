/* input.c: InputLayer, which only fixes the model's input shape. Its output aliases its input. */
#include "layers/layer.h"

typedef struct input_priv {
    tnt_shape shape;
    tnt__dtype_policy dtype; /* Keras's dtype: float32, or an integer type (ids, carried as float32) */
} input_priv;

/* in: a concrete shape; the declared one may have None (-1) dimensions, which any size fills */
static tnt_status input_build(tnt_layer *l, tnt_shape in, tnt_shape *out) {
    input_priv *p = l->priv;
    bool fits = in.ndim == p->shape.ndim;
    for (int i = 0; fits && i < in.ndim; i++) fits = p->shape.dim[i] < 0 ? in.dim[i] > 0 : in.dim[i] == p->shape.dim[i];
    if (!fits) {
        char a[96], b[96];
        return tnt__error(TNT_ERR_SHAPE, "InputLayer \"%s\": got input shape %s, declared %s",
                          l->name, tnt_shape_str(in, a, sizeof a), tnt_shape_str(p->shape, b, sizeof b));
    }
    *out = in;
    return TNT_OK;
}

static void input_destroy(tnt_layer *l) { free(l->priv); }

static const tnt__layer_ops input_ops = {
    .class_name = "InputLayer",
    .build = input_build,
    .destroy = input_destroy,
    .is_view = true,
};

bool tnt__is_input_layer(const tnt_layer *l) { return l->ops == &input_ops; }

tnt_shape tnt__input_layer_shape(const tnt_layer *l) { return ((input_priv *)l->priv)->shape; }

void tnt__input_layer_set_dtype(tnt_layer *l, tnt__dtype_policy p) { ((input_priv *)l->priv)->dtype = p; }

tnt__dtype_policy tnt__input_layer_dtype(const tnt_layer *l) { return ((input_priv *)l->priv)->dtype; }

tnt_layer *tnt_input_layer(tnt_shape shape, const char *name) {
    char b[96];
    if (shape.ndim < 1 || shape.ndim > TNT_MAX_DIMS - 1) {
        tnt__error(TNT_ERR_SHAPE, "InputLayer: shape %s has %d dimensions (expected 1..%d, batch excluded)",
                   tnt_shape_str(shape, b, sizeof b), shape.ndim, TNT_MAX_DIMS - 1);
        return NULL;
    }
    for (int i = 0; i < shape.ndim; i++)
        if (shape.dim[i] == 0 || shape.dim[i] < TNT_DIM_NONE) {
            tnt__error(TNT_ERR_SHAPE, "InputLayer: shape %s has dimension %d = %lld (expected > 0, or TNT_DIM_NONE)",
                       tnt_shape_str(shape, b, sizeof b), i, (long long)shape.dim[i]);
            return NULL;
        }
    input_priv *p = tnt__calloc(1, sizeof *p);
    if (!p) return NULL;
    p->shape = shape;
    tnt_layer *l = tnt__layer_new(&input_ops, name, p);
    if (!l) free(p);
    return l;
}

/* custom.c: user-defined layers (tnt_custom_layer_def) behind the layer contract, and the weight
 * accessors they use (tnt_layer_add_weight, tnt_layer_weight_value, tnt_layer_weight_grad).
 *
 * Each custom layer carries its own tnt__layer_ops (in its private state) so that its class name
 * is the user's: tnt_layer_class() and the automatic name ("PositionEmbedding" ->
 * "position_embedding") follow Keras. build, forward and backward call the user's functions with
 * the layer and def->user; destroy calls def->destroy(user) once, when the layer is freed (not when
 * tnt_custom_layer fails: then the caller still owns user). A failing user function's status is
 * passed on, with the layer named in front of its message (or a message saying it gave none).
 *
 * Weights: tnt_layer_add_weight, only inside the layer's build, declares a weight with Keras's
 * fans for the variance-scaling initializers (rank 0: 1, 1; rank 1: shape[0], shape[0]; rank r >=
 * 2: receptive field rf = prod(shape[0 .. r-3]), fan_in = shape[r-2] * rf, fan_out = shape[r-1] *
 * rf) and TNT_INIT_DEFAULT resolved to glorot_uniform (Keras add_weight's default). Weights that
 * are not trainable are state: they get no gradient (tnt_layer_weight_grad returns NULL).
 *
 * On the device the user's host functions run as they are, through the host (layers/host_bridge.c:
 * the layer's values and weights come down, its functions run, the results go back up). */
#include "gpu/gpu.h"
#include "layers/layer.h"

#include <ctype.h>
#include <stdio.h>

typedef struct custom_priv {
    tnt__layer_ops ops; /* per layer: class_name is the user's */
    char class_name[TNT_NAME_MAX];
    tnt_custom_layer_def def;
    bool in_build; /* tnt_layer_add_weight is allowed */
} custom_priv;

/* Passes on a user function's failure with the layer named; s != TNT_OK. */
static tnt_status custom_fail(tnt_layer *l, tnt_status s, const char *what) {
    if (s > 0 || s < TNT_ERR_MPI) s = TNT_ERR_ARG; /* not a tnt_status: report a failure anyway */
    if (tnt_last_error()[0] == '\0')
        return tnt__error(s, "custom layer %s \"%s\": %s failed (%s) without a message",
                          l->ops->class_name, l->name, what, tnt_status_name(s));
    char head[2 * TNT_NAME_MAX + 32];
    snprintf(head, sizeof head, "custom layer %s \"%s\": ", l->ops->class_name, l->name);
    if (strncmp(tnt_last_error(), head, strlen(head)) == 0) return s; /* already named (add_weight) */
    return tnt__error_prefix(s, "%s%s: ", head, what);
}

static tnt_status custom_build(tnt_layer *l, tnt_shape in, tnt_shape *out) {
    custom_priv *p = l->priv;
    char a[96], b[96];
    l->n_weights = 0; /* a failed build may be retried */
    tnt_shape o = {0};
    p->in_build = true;
    tnt__error_clear();
    tnt_status s = p->def.build(l, in, &o, p->def.user);
    p->in_build = false;
    if (s != TNT_OK) {
        l->n_weights = 0;
        return custom_fail(l, s, "build");
    }
    bool ok = o.ndim >= 0 && o.ndim <= TNT_MAX_DIMS;
    for (int d = 0; ok && d < o.ndim; d++) ok = o.dim[d] > 0;
    if (!ok) {
        l->n_weights = 0;
        if (o.ndim < 0 || o.ndim > TNT_MAX_DIMS)
            return tnt__error(TNT_ERR_SHAPE, "custom layer %s \"%s\": build gave an output shape of rank %d "
                              "for input shape %s (expected 0..%d)", l->ops->class_name, l->name, o.ndim,
                              tnt_shape_str(in, a, sizeof a), TNT_MAX_DIMS);
        return tnt__error(TNT_ERR_SHAPE, "custom layer %s \"%s\": build gave output shape %s for input shape "
                          "%s (every dimension must be > 0)", l->ops->class_name, l->name,
                          tnt_shape_str(o, b, sizeof b), tnt_shape_str(in, a, sizeof a));
    }
    *out = o;
    return TNT_OK;
}

static tnt_status custom_forward(tnt_layer *l, void *plan, const tnt__fwd_args *a) {
    (void)plan;
    custom_priv *p = l->priv;
    tnt__error_clear();
    tnt_status s = p->def.forward(l, a->batch, a->x, a->y, a->training, p->def.user);
    if (s != TNT_OK) return custom_fail(l, s, "forward");
    if (a->preact && a->preact != a->y)
        memcpy(a->preact, a->y, (size_t)(a->batch * tnt_shape_numel(l->out_shape)) * sizeof(float));
    return TNT_OK;
}

static tnt_status custom_backward(tnt_layer *l, void *plan, const tnt__bwd_args *a) {
    (void)plan;
    custom_priv *p = l->priv;
    bool needed = a->dx != NULL;
    for (int i = 0; !needed && i < l->n_weights; i++) needed = l->weights[i].trainable && l->weights[i].grad;
    if (!needed) return TNT_OK; /* nothing to compute: an inference-only layer may sit here */
    if (!p->def.backward)
        return tnt__error(TNT_ERR_UNSUPPORTED,
                          "custom layer %s \"%s\": training needs its gradients but the layer has no "
                          "backward function (set tnt_custom_layer_def.backward, or freeze its weights "
                          "and keep it where no input gradient is needed)",
                          l->ops->class_name, l->name);
    tnt__error_clear();
    tnt_status s = p->def.backward(l, a->batch, a->x, a->y, a->dy, a->dx, p->def.user);
    if (s != TNT_OK) return custom_fail(l, s, "backward");
    return TNT_OK;
}

static void custom_destroy(tnt_layer *l) {
    custom_priv *p = l->priv;
    if (!p) return;
    if (p->def.destroy) p->def.destroy(p->def.user);
    l->priv = NULL;
    free(p);
}

static bool is_identifier(const char *s) {
    if (!(isalpha((unsigned char)s[0]) || s[0] == '_')) return false;
    for (const char *q = s; *q; q++)
        if (!(isalnum((unsigned char)*q) || *q == '_')) return false;
    return true;
}

tnt_layer *tnt_custom_layer(const tnt_custom_layer_def *def, const char *name) {
    if (!def) {
        tnt__error(TNT_ERR_ARG, "tnt_custom_layer: def is NULL");
        return NULL;
    }
    if (!def->class_name || !def->class_name[0]) {
        tnt__error(TNT_ERR_ARG, "tnt_custom_layer: class_name is %s (required, e.g. \"PositionEmbedding\")",
                   def->class_name ? "empty" : "NULL");
        return NULL;
    }
    size_t len = strlen(def->class_name);
    if (len >= TNT_NAME_MAX || !is_identifier(def->class_name)) {
        tnt__error(TNT_ERR_ARG, "tnt_custom_layer: class_name \"%.*s%s\" (expected an identifier of letters, "
                   "digits and '_' not starting with a digit, at most %d characters)",
                   40, def->class_name, len > 40 ? "..." : "", TNT_NAME_MAX - 1);
        return NULL;
    }
    const char *missing = !def->build ? "build" : !def->forward ? "forward" : NULL;
    if (missing) {
        tnt__error(TNT_ERR_ARG, "tnt_custom_layer: class %s: the %s function is NULL (build and forward are "
                   "required; backward is needed for training; destroy is optional)",
                   def->class_name, missing);
        return NULL;
    }
    custom_priv *p = tnt__calloc(1, sizeof *p);
    if (!p) return NULL;
    snprintf(p->class_name, sizeof p->class_name, "%s", def->class_name);
    p->def = *def;
    p->def.class_name = p->class_name;
    p->ops = (tnt__layer_ops){
        .class_name = p->class_name,
        .build = custom_build,
        .forward = custom_forward,
        .backward = custom_backward,
        .destroy = custom_destroy,
        .gpu = &tnt__host_bridge_gpu_ops, /* on a device: through the host (layers/host_bridge.c) */
    };
    tnt_layer *l = tnt__layer_new(&p->ops, name, p);
    if (!l) free(p); /* the caller keeps user: destroy is not called */
    return l;
}

int tnt_layer_add_weight(tnt_layer *l, const char *name, tnt_shape shape, tnt_initializer init, bool trainable) {
    char b[96];
    if (!l) {
        tnt__error(TNT_ERR_ARG, "tnt_layer_add_weight: layer is NULL");
        return -1;
    }
    if (l->ops->build != custom_build || !((custom_priv *)l->priv)->in_build) {
        tnt__error(TNT_ERR_STATE, "tnt_layer_add_weight: layer \"%s\" (%s): weights can only be declared in "
                   "the build function of a custom layer", l->name, l->ops->class_name);
        return -1;
    }
    const char *cls = l->ops->class_name;
    if (!name || !name[0] || strlen(name) >= TNT_NAME_MAX) {
        tnt__error(TNT_ERR_ARG, "custom layer %s \"%s\": weight name %s (expected 1..%d characters)", cls,
                   l->name, !name ? "NULL" : !name[0] ? "\"\"" : "too long", TNT_NAME_MAX - 1);
        return -1;
    }
    for (int i = 0; i < l->n_weights; i++)
        if (strcmp(l->weights[i].name, name) == 0) {
            tnt__error(TNT_ERR_ARG, "custom layer %s \"%s\": weight \"%s\" declared twice", cls, l->name, name);
            return -1;
        }
    if (shape.ndim < 0 || shape.ndim > TNT_MAX_DIMS) {
        tnt__error(TNT_ERR_SHAPE, "custom layer %s \"%s\": weight \"%s\" has rank %d (expected 0..%d)", cls,
                   l->name, name, shape.ndim, TNT_MAX_DIMS);
        return -1;
    }
    for (int d = 0; d < shape.ndim; d++)
        if (shape.dim[d] <= 0) {
            tnt__error(TNT_ERR_SHAPE, "custom layer %s \"%s\": weight \"%s\" has shape %s (every dimension "
                       "must be > 0)", cls, l->name, name, tnt_shape_str(shape, b, sizeof b));
            return -1;
        }
    if (!tnt__init_valid(init, TNT_INIT_ORTHOGONAL)) {
        tnt__error(TNT_ERR_ARG, "custom layer %s \"%s\": weight \"%s\": unknown initializer %d", cls, l->name,
                   name, (int)init);
        return -1;
    }
    /* Keras's _compute_fans */
    const int r = shape.ndim;
    int64_t fan_in = 1, fan_out = 1;
    if (r == 1) {
        fan_in = fan_out = shape.dim[0];
    } else if (r >= 2) {
        int64_t rf = 1;
        for (int d = 0; d < r - 2; d++) rf *= shape.dim[d];
        fan_in = shape.dim[r - 2] * rf;
        fan_out = shape.dim[r - 1] * rf;
    }
    if (init == TNT_INIT_DEFAULT) init = TNT_INIT_GLOROT_UNIFORM;
    if (l->n_weights >= TNT_MAX_LAYER_WEIGHTS) {
        tnt__error(TNT_ERR_ARG, "custom layer %s \"%s\": weight \"%s\": more than %d weights", cls, l->name,
                   name, TNT_MAX_LAYER_WEIGHTS);
        return -1;
    }
    int k = tnt__layer_add_weight(l, name, shape, init, fan_in, fan_out);
    if (k < 0) return -1;
    l->weights[k].trainable = trainable;
    return k;
}

static tnt__weight *weight_at(tnt_layer *l, int i, const char *who) {
    if (!l) {
        tnt__error(TNT_ERR_ARG, "%s: layer is NULL", who);
        return NULL;
    }
    if (i < 0 || i >= l->n_weights) {
        tnt__error(TNT_ERR_ARG, "%s: layer \"%s\" (%s) has no weight %d (it has %d)", who, l->name,
                   l->ops->class_name, i, l->n_weights);
        return NULL;
    }
    return &l->weights[i];
}

float *tnt_layer_weight_value(tnt_layer *l, int i) {
    tnt__weight *w = weight_at(l, i, "tnt_layer_weight_value");
    if (!w) return NULL;
    if (!w->value)
        tnt__error(TNT_ERR_STATE, "tnt_layer_weight_value: weight \"%s\" of layer \"%s\" has no storage yet "
                   "(the model assigns it after build)", w->name, l->name);
    return w->value;
}

float *tnt_layer_weight_grad(tnt_layer *l, int i) {
    tnt__weight *w = weight_at(l, i, "tnt_layer_weight_grad");
    if (!w) return NULL;
    if (!w->trainable)
        tnt__error(TNT_ERR_ARG, "tnt_layer_weight_grad: weight \"%s\" of layer \"%s\" is not trainable (no "
                   "gradient)", w->name, l->name);
    return w->trainable ? w->grad : NULL;
}

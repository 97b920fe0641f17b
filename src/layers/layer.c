/* layer.c: layer allocation, weight declaration and Keras initializers. */
#include "layers/layer.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>

tnt_layer *tnt__layer_new(const tnt__layer_ops *ops, const char *name, void *priv) {
    tnt_layer *l = tnt__calloc(1, sizeof *l);
    if (!l) return NULL;
    l->ops = ops;
    l->priv = priv;
    l->activation = TNT_ACT_LINEAR;
    l->n_outputs = 1;
    l->dtype_policy = tnt__dtype_policy_global();
    if (name && name[0]) {
        if (strlen(name) >= TNT_NAME_MAX) {
            tnt__error(TNT_ERR_ARG, "%s: name \"%.40s...\" is %zu characters (at most %d)",
                       ops->class_name, name, strlen(name), TNT_NAME_MAX - 1);
            free(l);
            return NULL;
        }
        snprintf(l->name, sizeof l->name, "%s", name);
    } else {
        l->auto_name = true;
    }
    return l;
}

tnt_status tnt__build_steps_as_2d(tnt_layer *l, tnt_shape in, tnt_shape *out,
                                  tnt_status (*build_2d)(tnt_layer *l, tnt_shape in, tnt_shape *out)) {
    char b[96];
    if (in.ndim != 2)
        return tnt__error(TNT_ERR_SHAPE, "%s \"%s\": input shape %s has rank %d (expected 2: steps, channels)",
                          l->ops->class_name, l->name, tnt_shape_str(in, b, sizeof b), in.ndim);
    tnt_status s = build_2d(l, TNT_SHAPE(in.dim[0], 1, in.dim[1]), out);
    if (s == TNT_OK) *out = TNT_SHAPE(out->dim[0], out->dim[2]);
    return s;
}

tnt_status tnt__layer_take_data_format(tnt_layer *l, bool channels_first) {
    l->channels_first = channels_first;
    return TNT_OK;
}

tnt_status tnt_layer_set_data_format(tnt_layer *l, tnt_data_format format) {
    if (!l) return tnt__error(TNT_ERR_ARG, "tnt_layer_set_data_format: the layer is NULL");
    if (format != TNT_CHANNELS_LAST && format != TNT_CHANNELS_FIRST)
        return tnt__error(TNT_ERR_ARG, "%s \"%s\": data_format %d (expected TNT_CHANNELS_LAST or TNT_CHANNELS_FIRST)",
                          l->ops->class_name, l->name, (int)format);
    if (!l->ops->set_data_format)
        return tnt__error(TNT_ERR_UNSUPPORTED, "%s \"%s\": data_format \"%s\" (this class has no data_format)",
                          l->ops->class_name, l->name, format == TNT_CHANNELS_FIRST ? "channels_first" : "channels_last");
    if (l->built || l->refs > 0)
        return tnt__error(TNT_ERR_ARG, "%s \"%s\": data_format set after the layer joined a model", l->ops->class_name,
                          l->name);
    return l->ops->set_data_format(l, format == TNT_CHANNELS_FIRST);
}

tnt_data_format tnt_layer_data_format(const tnt_layer *l) {
    return l && l->channels_first ? TNT_CHANNELS_FIRST : TNT_CHANNELS_LAST;
}

tnt_shape tnt__channels_last_view(const tnt_layer *l, tnt_shape in, int64_t *planes) {
    *planes = 1;
    if (!l->channels_first || in.ndim < 1) return in;
    tnt_shape v = {.ndim = in.ndim};
    *planes = in.dim[0];
    for (int i = 1; i < in.ndim; i++) v.dim[i - 1] = in.dim[i];
    v.dim[in.ndim - 1] = 1;
    return v;
}

tnt_shape tnt__channels_first_shape(const tnt_layer *l, tnt_shape out, int64_t planes) {
    if (!l->channels_first || out.ndim < 1) return out;
    tnt_shape v = {.ndim = out.ndim, .dim = {out.dim[out.ndim - 1] * planes}};
    for (int i = 0; i + 1 < out.ndim; i++) v.dim[i + 1] = out.dim[i];
    return v;
}

char *tnt__margins_str(char *buf, size_t size, int n, const int *p) {
    if (n == 1) {
        snprintf(buf, size, "(%d, %d)", p[0], p[1]);
        return buf;
    }
    size_t k = (size_t)snprintf(buf, size, "(");
    for (int i = 0; i < n && k < size; i++)
        k += (size_t)snprintf(buf + k, size - k, "%s(%d, %d)", i ? ", " : "", p[2 * i], p[2 * i + 1]);
    if (k < size) snprintf(buf + k, size - k, ")");
    return buf;
}

void tnt_layer_free(tnt_layer *l) {
    if (!l) return;
    if (l->refs > 1) { /* shared by graphs or models: the last owner frees it */
        l->refs--;
        return;
    }
    for (int j = 0; j < l->n_weights; j++) free(l->weights[j].saved);
    free(l->rules);
    if (l->ops->destroy) l->ops->destroy(l);
    free(l);
}

const char *tnt_layer_name(const tnt_layer *l) { return l ? l->name : ""; }
const char *tnt_layer_class(const tnt_layer *l) { return l ? l->ops->class_name : ""; }

int tnt__layer_add_weight(tnt_layer *l, const char *name, tnt_shape shape, tnt_initializer init,
                          int64_t fan_in, int64_t fan_out) {
    if (l->n_weights >= TNT_MAX_LAYER_WEIGHTS) {
        tnt__error(TNT_ERR_ARG, "layer \"%s\": more than %d weights", l->name, TNT_MAX_LAYER_WEIGHTS);
        return -1;
    }
    tnt__weight *w = &l->weights[l->n_weights];
    memset(w, 0, sizeof *w);
    snprintf(w->name, sizeof w->name, "%s", name);
    w->shape = shape;
    w->init = tnt__layer_init_for(l, name, init);
    w->fan_in = fan_in;
    w->fan_out = fan_out;
    w->trainable = true;
    return l->n_weights++;
}

void tnt__layer_base_name(const char *cls, char *out, size_t size) {
    /* Keras: insert '_' before an upper-case letter that follows a lower-case letter or digit,
     * and before "Upper lower" after an upper run: "Conv2D" -> "conv2d", "MaxPooling2D" ->
     * "max_pooling2d", "InputLayer" -> "input_layer". */
    size_t j = 0;
    for (size_t i = 0; cls[i] && j + 2 < size; i++) {
        char c = cls[i];
        if (i > 0 && isupper((unsigned char)c) &&
            (islower((unsigned char)cls[i - 1]) ||
             (isupper((unsigned char)cls[i - 1]) && islower((unsigned char)cls[i + 1]))))
            out[j++] = '_';
        out[j++] = (char)tolower((unsigned char)c);
    }
    out[j] = '\0';
}

/* Keras Orthogonal: a (rows, cols) matrix (rows = all axes but the last) with orthonormal
 * columns, or rows when rows < cols: Gram-Schmidt on the columns of a normal (max, min) matrix
 * gives Keras's q * sign(diag(r)), whose diagonal of r is positive by construction. */
static void init_orthogonal(tnt__weight *w, uint64_t seed) {
    int64_t cols = w->shape.ndim ? w->shape.dim[w->shape.ndim - 1] : 1;
    int64_t rows = tnt_shape_numel(w->shape) / (cols ? cols : 1);
    int64_t n = rows > cols ? rows : cols, k = rows > cols ? cols : rows;
    double *q = tnt__calloc((size_t)(n * k), sizeof *q); /* (n, k), column j at q[i * k + j] */
    if (!q) { /* out of memory: a scaled normal keeps training possible */
        for (int64_t i = 0; i < rows * cols; i++) w->value[i] = tnt__rand_normal(seed, (uint64_t)i) / sqrtf((float)n);
        return;
    }
    for (int64_t i = 0; i < n * k; i++) q[i] = tnt__rand_normal(seed, (uint64_t)i);
    for (int64_t j = 0; j < k; j++) {
        for (int64_t p = 0; p < j; p++) {
            double dot = 0;
            for (int64_t i = 0; i < n; i++) dot += q[i * k + j] * q[i * k + p];
            for (int64_t i = 0; i < n; i++) q[i * k + j] -= dot * q[i * k + p];
        }
        double norm = 0;
        for (int64_t i = 0; i < n; i++) norm += q[i * k + j] * q[i * k + j];
        norm = sqrt(norm);
        for (int64_t i = 0; i < n; i++) q[i * k + j] /= norm > 0 ? norm : 1.0;
    }
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++)
            w->value[r * cols + c] = (float)(rows >= cols ? q[r * k + c] : q[c * k + r]);
    free(q);
}

void tnt__weight_init(tnt__weight *w, uint64_t seed) {
    int64_t n = tnt_shape_numel(w->shape);
    const tnt__init_spec *spec = tnt__init_spec_of(w->init);
    if (spec) {
        tnt_initializer keep = w->init;
        tnt__weight_init_spec(w, spec, seed);
        w->init = keep;
        return;
    }
    if (w->init == TNT__INIT_UNIT_FORGET_BIAS) {
        tnt__weight base = *w; /* the bias_initializer over the whole vector (fans: its length) */
        base.init = w->ufb_base == TNT_INIT_DEFAULT ? TNT_INIT_ZEROS : w->ufb_base;
        base.fan_in = base.fan_out = n;
        tnt__weight_init(&base, seed);
        for (int64_t i = w->fan_in; i < w->fan_out && i < n; i++) w->value[i] = 1.0f;
        return;
    }
    double fan_in = (double)(w->fan_in > 0 ? w->fan_in : 1);
    double fan_out = (double)(w->fan_out > 0 ? w->fan_out : 1);
    double scale = 1.0, mode_fan = 1.0;
    bool uniform = true;
    switch (w->init) {
    case TNT_INIT_ZEROS:
    case TNT_INIT_DEFAULT:
        memset(w->value, 0, (size_t)n * sizeof(float));
        return;
    case TNT_INIT_ONES:
        for (int64_t i = 0; i < n; i++) w->value[i] = 1.0f;
        return;
    case TNT_INIT_RANDOM_UNIFORM:
        for (int64_t i = 0; i < n; i++) w->value[i] = (2.0f * tnt__rand_uniform(seed, (uint64_t)i) - 1.0f) * 0.05f;
        return;
    case TNT_INIT_RANDOM_NORMAL:
        for (int64_t i = 0; i < n; i++) w->value[i] = tnt__rand_normal(seed, (uint64_t)i) * 0.05f;
        return;
    case TNT_INIT_ORTHOGONAL:
        init_orthogonal(w, seed);
        return;
    case TNT_INIT_GLOROT_UNIFORM: mode_fan = (fan_in + fan_out) / 2; break;
    case TNT_INIT_GLOROT_NORMAL: mode_fan = (fan_in + fan_out) / 2; uniform = false; break;
    case TNT_INIT_HE_UNIFORM: mode_fan = fan_in; scale = 2.0; break;
    case TNT_INIT_HE_NORMAL: mode_fan = fan_in; scale = 2.0; uniform = false; break;
    case TNT_INIT_LECUN_UNIFORM: mode_fan = fan_in; break;
    case TNT_INIT_LECUN_NORMAL: mode_fan = fan_in; uniform = false; break;
    }
    double var = scale / mode_fan;
    if (uniform) {
        float limit = (float)sqrt(3.0 * var);
        for (int64_t i = 0; i < n; i++)
            w->value[i] = (2.0f * tnt__rand_uniform(seed, (uint64_t)i) - 1.0f) * limit;
    } else {
        /* Keras VarianceScaling: truncated normal with stddev sqrt(var) / .87962566 */
        float stddev = (float)(sqrt(var) / 0.87962566103423978);
        for (int64_t i = 0; i < n; i++)
            w->value[i] = tnt__rand_truncated_normal(seed, (uint64_t)i) * stddev;
    }
}

/* Keras's trainable: false (tnt_layer.frozen; fit.c and batch_norm.c act on it) */
tnt_status tnt_layer_set_trainable(tnt_layer *l, bool trainable) {
    if (!l) return tnt__error(TNT_ERR_ARG, "set_trainable: layer is NULL");
    l->frozen = !trainable;
    return TNT_OK;
}

bool tnt_layer_trainable(const tnt_layer *l) { return l && !l->frozen; }

unsigned tnt__reads_inputs(const tnt_layer *l) {
    (void)l;
    return TNT__READS_INPUTS;
}
unsigned tnt__reads_nothing(const tnt_layer *l) {
    (void)l;
    return 0;
}

tnt_initializer tnt__layer_init_for(const tnt_layer *l, const char *weight, tnt_initializer def) {
    for (int i = 0; l && i < l->n_inits; i++)
        if (!strcmp(l->inits[i].weight, weight)) return l->inits[i].init;
    return def;
}

tnt_status tnt__layer_set_init(tnt_layer *l, const char *weight, tnt_initializer init) {
    for (int i = 0; i < l->n_inits; i++)
        if (!strcmp(l->inits[i].weight, weight)) {
            l->inits[i].init = init;
            return TNT_OK;
        }
    if (l->n_inits == (int)TNT_ARRAY_LEN(l->inits) || strlen(weight) >= sizeof l->inits[0].weight)
        return tnt__error(TNT_ERR_ARG, "layer \"%s\": initializer of weight \"%s\": no room", l->name, weight);
    snprintf(l->inits[l->n_inits].weight, sizeof l->inits[0].weight, "%s", weight);
    l->inits[l->n_inits++].init = init;
    return TNT_OK;
}

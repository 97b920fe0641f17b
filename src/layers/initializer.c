/* initializer.c: the interned initializer specs of layer.h (Keras's initializers with the
 * parameters a file gives them), and how a weight is drawn from one. */
#include "layers/layer.h"

#include <math.h>
#include <pthread.h>

static pthread_mutex_t specs_lock = PTHREAD_MUTEX_INITIALIZER;
static tnt__init_spec specs[TNT__INIT_SPEC_MAX];
static int n_specs;

int tnt__init_intern(const tnt__init_spec *spec) {
    int found = -1;
    pthread_mutex_lock(&specs_lock);
    for (int i = 0; i < n_specs && found < 0; i++)
        if (specs[i].kind == spec->kind && specs[i].a == spec->a && specs[i].b == spec->b &&
            specs[i].mode == spec->mode && specs[i].dist == spec->dist)
            found = i;
    if (found < 0 && n_specs < TNT__INIT_SPEC_MAX) {
        specs[n_specs] = *spec;
        found = n_specs++;
    }
    pthread_mutex_unlock(&specs_lock);
    if (found < 0)
        return tnt__error(TNT_ERR_UNSUPPORTED, "initializers: more than %d distinct parameterized initializers in "
                          "one process", TNT__INIT_SPEC_MAX), -1;
    return TNT__INIT_SPEC_BASE + found;
}

const tnt__init_spec *tnt__init_spec_of(tnt_initializer init) {
    int i = (int)init - TNT__INIT_SPEC_BASE;
    pthread_mutex_lock(&specs_lock);
    const tnt__init_spec *s = i >= 0 && i < n_specs ? &specs[i] : NULL; /* entries never move */
    pthread_mutex_unlock(&specs_lock);
    return s;
}

bool tnt__init_valid(tnt_initializer init, tnt_initializer last) {
    return ((int)init >= 0 && (int)init <= (int)last) || tnt__init_spec_of(init) != NULL;
}

/* The weight as Keras's 2-D view for Identity and Orthogonal: (all axes but the last, the last). */
static void rows_cols(const tnt__weight *w, int64_t *rows, int64_t *cols) {
    *cols = w->shape.ndim ? w->shape.dim[w->shape.ndim - 1] : 1;
    *rows = tnt_shape_numel(w->shape) / (*cols ? *cols : 1);
}

void tnt__weight_init_spec(tnt__weight *w, const tnt__init_spec *sp, uint64_t seed) {
    int64_t n = tnt_shape_numel(w->shape), rows, cols;
    switch (sp->kind) {
    case TNT__IK_RANDOM_NORMAL:
        for (int64_t i = 0; i < n; i++) w->value[i] = (float)(sp->a + sp->b * tnt__rand_normal(seed, (uint64_t)i));
        return;
    case TNT__IK_RANDOM_UNIFORM:
        for (int64_t i = 0; i < n; i++)
            w->value[i] = (float)(sp->a + (sp->b - sp->a) * tnt__rand_uniform(seed, (uint64_t)i));
        return;
    case TNT__IK_TRUNCATED_NORMAL:
        for (int64_t i = 0; i < n; i++)
            w->value[i] = (float)(sp->a + sp->b * tnt__rand_truncated_normal(seed, (uint64_t)i));
        return;
    case TNT__IK_CONSTANT:
        for (int64_t i = 0; i < n; i++) w->value[i] = (float)sp->a;
        return;
    case TNT__IK_IDENTITY:
        rows_cols(w, &rows, &cols);
        for (int64_t r = 0; r < rows; r++)
            for (int64_t c = 0; c < cols; c++) w->value[r * cols + c] = r == c ? (float)sp->a : 0.0f;
        return;
    case TNT__IK_ORTHOGONAL:
        w->init = TNT_INIT_ORTHOGONAL;
        tnt__weight_init(w, seed);
        w->init = (tnt_initializer)0; /* restored by the caller */
        for (int64_t i = 0; i < n; i++) w->value[i] *= (float)sp->a;
        return;
    case TNT__IK_VARIANCE_SCALING: {
        double fan_in = (double)(w->fan_in > 0 ? w->fan_in : 1), fan_out = (double)(w->fan_out > 0 ? w->fan_out : 1);
        double fan = sp->mode == TNT__FAN_IN ? fan_in : sp->mode == TNT__FAN_OUT ? fan_out : (fan_in + fan_out) / 2;
        double var = sp->a / fan;
        if (sp->dist == TNT__DIST_UNIFORM) {
            double limit = sqrt(3.0 * var);
            for (int64_t i = 0; i < n; i++)
                w->value[i] = (float)((2.0 * tnt__rand_uniform(seed, (uint64_t)i) - 1.0) * limit);
        } else if (sp->dist == TNT__DIST_UNTRUNCATED) {
            for (int64_t i = 0; i < n; i++) w->value[i] = (float)(sqrt(var) * tnt__rand_normal(seed, (uint64_t)i));
        } else { /* Keras: truncated at 2 stddev, stddev corrected by .87962566 for the truncation */
            double sd = sqrt(var) / 0.87962566103423978;
            for (int64_t i = 0; i < n; i++) w->value[i] = (float)(sd * tnt__rand_truncated_normal(seed, (uint64_t)i));
        }
        return;
    }
    }
}

/* layer_harness.c: see layer_harness.h. */
#include "layer_harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int64_t in_numel(const drv *d) { return d->batch * tnt_shape_numel(d->l->in_shape); }
int64_t out_numel(const drv *d) { return d->batch * tnt_shape_numel(d->l->out_shape); }

/* Builds l for in (without batch), gives each weight a value and grad array, makes a plan and
 * workspace for batch, and zeroed activation buffers. */
void drv_init(drv *d, tnt_layer *l, tnt_shape in, int64_t batch) {
    memset(d, 0, sizeof *d);
    assert_non_null(l);
    d->l = l;
    d->batch = batch;
    l->in_shape = in;
    tu_ok(l->ops->build(l, in, &l->out_shape));
    for (int i = 0; i < l->n_weights; i++) {
        int64_t n = tnt_shape_numel(l->weights[i].shape);
        l->weights[i].value = calloc((size_t)n, sizeof(float));
        l->weights[i].grad = calloc((size_t)n, sizeof(float));
        tnt__weight_init(&l->weights[i], 1234 + (uint64_t)i);
    }
    if (l->ops->plan_create) { /* layers without oneDNN primitives have no plan */
        d->plan = l->ops->plan_create(l, batch);
        if (!d->plan) fail_msg("plan_create: %s", tnt_last_error());
    }
    size_t ws = l->ops->workspace_size ? l->ops->workspace_size(l, d->plan, batch) : 0;
    d->ws = tnt__alloc(ws ? ws : 64);
    d->x = calloc((size_t)in_numel(d), sizeof(float));
    d->dx = calloc((size_t)in_numel(d), sizeof(float));
    d->y = calloc((size_t)out_numel(d), sizeof(float));
    d->pre = calloc((size_t)out_numel(d), sizeof(float));
    d->dy = calloc((size_t)out_numel(d), sizeof(float));
}

/* Frees the buffers and the plan; frees the layer too when free_layer. */
void drv_free(drv *d, bool free_layer) {
    tnt_layer *l = d->l;
    if (d->plan && l->ops->plan_destroy) l->ops->plan_destroy(d->plan);
    tnt__free(d->ws);
    free(d->x), free(d->y), free(d->pre), free(d->dy), free(d->dx);
    if (free_layer) {
        for (int i = 0; i < l->n_weights; i++) free(l->weights[i].value), free(l->weights[i].grad);
        tnt_layer_free(l);
    }
}

void drv_forward(drv *d, bool want_preact) {
    tnt__fwd_args a = {.batch = d->batch, .x = d->x, .y = d->y, .preact = want_preact ? d->pre : NULL,
                       .workspace = d->ws, .training = true, .seed = 1};
    tu_ok(d->l->ops->forward(d->l, d->plan, &a));
}

void drv_backward(drv *d, bool want_dx, bool dy_is_preact) {
    tnt__bwd_args a = {.batch = d->batch, .x = d->x, .y = d->y, .dy = d->dy,
                       .dx = want_dx ? d->dx : NULL, .workspace = d->ws, .dy_is_preact = dy_is_preact};
    tu_ok(d->l->ops->backward(d->l, d->plan, &a));
}

/* Fills every weight gradient with garbage, to prove that backward overwrites it. */
void poison_grads(tnt_layer *l) {
    for (int i = 0; i < l->n_weights; i++) {
        int64_t n = tnt_shape_numel(l->weights[i].shape);
        for (int64_t j = 0; j < n; j++) l->weights[i].grad[j] = 1e6f;
    }
}

/* ---- comparison with the PyTorch fixtures ------------------------------------------------- */

float max_abs(const float *x, int64_t n) {
    float m = 0;
    for (int64_t i = 0; i < n; i++) m = fmaxf(m, fabsf(x[i]));
    return m;
}

/* rtol 1e-4; atol scaled to the tensor (sums of many products cancel to near zero). */
void check(const float *got, const char *fixture, int64_t n, const char *what) {
    tnt_shape s;
    float *ref = tu_load(fixture, &s);
    assert_int_equal(tnt_shape_numel(s), n);
    char label[160];
    snprintf(label, sizeof label, "%s: %s", fixture, what);
    tu_assert_close(got, ref, n, 1e-4, 1e-5 * fmax(1.0, max_abs(ref, n)), label);
    free(ref);
}

void load_into(float *dst, const char *fixture, int64_t n) {
    tnt_shape s;
    float *src = tu_load(fixture, &s);
    assert_int_equal(tnt_shape_numel(s), n);
    memcpy(dst, src, (size_t)n * sizeof(float));
    free(src);
}

bool fixture_exists(const char *fixture) {
    char path[512];
    snprintf(path, sizeof path, "fixtures/%s.bin", fixture);
    FILE *f = fopen(path, "rb");
    if (f) fclose(f);
    return f != NULL;
}

/* Runs one fixture case on layer l (consumed): forward (with and without preact), backward with
 * dx, without dx, and with dy already the pre-activation gradient. */
void run_case(const char *name, tnt_layer *l) {
    char f[128];
    tnt_shape xs;
    snprintf(f, sizeof f, "%s_x", name);
    float *x = tu_load(f, &xs);
    tnt_shape in = {.ndim = xs.ndim - 1};
    for (int i = 1; i < xs.ndim; i++) in.dim[i - 1] = xs.dim[i];
    drv d;
    drv_init(&d, l, in, xs.dim[0]);
    memcpy(d.x, x, (size_t)in_numel(&d) * sizeof(float));
    free(x);
    const char *wnames[2] = {"w", "b"};
    for (int i = 0; i < l->n_weights; i++) {
        snprintf(f, sizeof f, "%s_%s", name, wnames[i]);
        load_into(l->weights[i].value, f, tnt_shape_numel(l->weights[i].shape));
    }
    snprintf(f, sizeof f, "%s_dy", name);
    load_into(d.dy, f, out_numel(&d));

    /* forward, without and with the pre-activation output */
    drv_forward(&d, false);
    snprintf(f, sizeof f, "%s_y", name);
    check(d.y, f, out_numel(&d), "y");
    memset(d.y, 0, (size_t)out_numel(&d) * sizeof(float));
    drv_forward(&d, true);
    check(d.y, f, out_numel(&d), "y (preact requested)");
    snprintf(f, sizeof f, "%s_pre", name);
    if (fixture_exists(f)) check(d.pre, f, out_numel(&d), "preact");

    /* backward with dx */
    poison_grads(l);
    drv_backward(&d, true, false);
    snprintf(f, sizeof f, "%s_dx", name);
    check(d.dx, f, in_numel(&d), "dx");
    const char *gnames[2] = {"dw", "db"};
    for (int i = 0; i < l->n_weights; i++) {
        snprintf(f, sizeof f, "%s_%s", name, gnames[i]);
        check(l->weights[i].grad, f, tnt_shape_numel(l->weights[i].shape), gnames[i]);
    }

    /* backward without dx: same weight gradients, dx untouched */
    poison_grads(l);
    for (int64_t i = 0; i < in_numel(&d); i++) d.dx[i] = 7.0f;
    drv_backward(&d, false, false);
    for (int64_t i = 0; i < in_numel(&d); i++) assert_true(d.dx[i] == 7.0f);
    for (int i = 0; i < l->n_weights; i++) {
        snprintf(f, sizeof f, "%s_%s", name, gnames[i]);
        check(l->weights[i].grad, f, tnt_shape_numel(l->weights[i].shape), "grad (dx NULL)");
    }

    /* dy given as the pre-activation gradient (the fused softmax + cross-entropy path) */
    snprintf(f, sizeof f, "%s_dpre", name);
    if (l->activation != TNT_ACT_LINEAR && fixture_exists(f)) {
        load_into(d.dy, f, out_numel(&d));
        poison_grads(l);
        drv_forward(&d, true);
        drv_backward(&d, true, true);
        snprintf(f, sizeof f, "%s_dx", name);
        check(d.dx, f, in_numel(&d), "dx (dy_is_preact)");
        for (int i = 0; i < l->n_weights; i++) {
            snprintf(f, sizeof f, "%s_%s", name, gnames[i]);
            check(l->weights[i].grad, f, tnt_shape_numel(l->weights[i].shape), "grad (dy_is_preact)");
        }
    }
    drv_free(&d, true);
}


/* L = sum(y * r) in double, for the current x and weights. */
double fd_loss(drv *d, const float *r) {
    drv_forward(d, false);
    double s = 0;
    for (int64_t i = 0; i < out_numel(d); i++) s += (double)d->y[i] * r[i];
    return s;
}



/* Central differences of L against backward's dx and weight gradients, for every entry of x and
 * of each weight (the cases are small). */
void fd_check(tnt_layer *l, tnt_shape in, int64_t batch) {
    drv d;
    drv_init(&d, l, in, batch);
    tu_fill(d.x, in_numel(&d), 11);
    tu_fill(d.dy, out_numel(&d), 12);
    for (int i = 0; i < l->n_weights; i++)
        tu_fill(l->weights[i].value, tnt_shape_numel(l->weights[i].shape), 13 + (uint64_t)i);
    drv_forward(&d, false);
    drv_backward(&d, true, false);
    const float h = 1e-2f;
    fd_target t[1 + TNT_MAX_LAYER_WEIGHTS];
    int nt = 0;
    t[nt++] = (fd_target){d.x, d.dx, in_numel(&d), "dx"};
    for (int i = 0; i < l->n_weights; i++)
        t[nt++] = (fd_target){l->weights[i].value, l->weights[i].grad,
                              tnt_shape_numel(l->weights[i].shape), l->weights[i].name};
    for (int k = 0; k < nt; k++) {
        for (int64_t i = 0; i < t[k].n; i++) {
            float old = t[k].v[i];
            t[k].v[i] = old + h;
            double lp = fd_loss(&d, d.dy);
            t[k].v[i] = old - h;
            double lm = fd_loss(&d, d.dy);
            t[k].v[i] = old;
            double num = (lp - lm) / (2.0 * h), ana = t[k].g[i];
            if (fabs(num - ana) > 2e-3 + 1e-2 * fabs(num))
                fail_msg("%s %s[%lld]: backward %.6g, finite difference %.6g", tnt_layer_class(l),
                         t[k].what, (long long)i, ana, num);
        }
    }
    drv_free(&d, true);
}

void run_layer(tnt_layer *l, tnt_shape in, int64_t n, const float *x, float *y,
                      const float *dy, float *dx, bool training) {
    tnt_shape out;
    tu_ok(l->ops->build(l, in, &out));
    l->in_shape = in;
    l->out_shape = out;
    void *plan = l->ops->plan_create ? l->ops->plan_create(l, n) : NULL;
    if (l->ops->plan_create && !plan) fail_msg("plan_create: %s", tnt_last_error());
    size_t ws = l->ops->workspace_size ? l->ops->workspace_size(l, plan, n) : 0;
    void *work = calloc(1, ws + 8);
    tnt__fwd_args fa = {.batch = n, .x = x, .y = y, .workspace = work, .training = training, .seed = 7};
    tu_ok(l->ops->forward(l, plan, &fa));
    if (dy) {
        tnt__bwd_args ba = {.batch = n, .x = x, .y = y, .dy = dy, .dx = dx, .workspace = work};
        tu_ok(l->ops->backward(l, plan, &ba));
    }
    if (plan) l->ops->plan_destroy(plan);
    free(work);
}

/* Two plans of one layer side by side (the model caches the full and the last partial batch):
 * the batch-1 plan must give the first sample of the batch-2 results. Fixtures: <name>_x (2 or
 * more samples), _<wnames[i]> for the weights, _dy, _y, _dx. Frees the layer. */
void check_two_plans(tnt_layer *l, const char *name, int n_weights, const char *const *wnames) {
    char f[128];
    tnt_shape xs;
    snprintf(f, sizeof f, "%s_x", name);
    float *x = tu_load(f, &xs);
    assert_true(xs.dim[0] >= 2); /* the first two samples are used */
    tnt_shape in = {.ndim = xs.ndim - 1};
    for (int i = 1; i < xs.ndim; i++) in.dim[i - 1] = xs.dim[i];
    drv d2, d1;
    drv_init(&d2, l, in, 2);
    assert_int_equal(l->n_weights, n_weights);
    for (int i = 0; i < n_weights; i++) {
        snprintf(f, sizeof f, "%s_%s", name, wnames[i]);
        load_into(l->weights[i].value, f, tnt_shape_numel(l->weights[i].shape));
    }
    memset(&d1, 0, sizeof d1);
    d1.l = l, d1.batch = 1;
    d1.plan = l->ops->plan_create(l, 1);
    assert_non_null(d1.plan);
    d1.ws = tnt__alloc(l->ops->workspace_size(l, d1.plan, 1) + 64);
    d1.x = calloc((size_t)in_numel(&d1), sizeof(float));
    d1.dx = calloc((size_t)in_numel(&d1), sizeof(float));
    d1.y = calloc((size_t)out_numel(&d1), sizeof(float));
    d1.pre = calloc((size_t)out_numel(&d1), sizeof(float));
    d1.dy = calloc((size_t)out_numel(&d1), sizeof(float));
    memcpy(d2.x, x, (size_t)in_numel(&d2) * sizeof(float));
    memcpy(d1.x, x, (size_t)in_numel(&d1) * sizeof(float));
    snprintf(f, sizeof f, "%s_dy", name);
    float *dy = tu_load(f, NULL);
    memcpy(d2.dy, dy, (size_t)out_numel(&d2) * sizeof(float));
    memcpy(d1.dy, dy, (size_t)out_numel(&d1) * sizeof(float));
    drv_forward(&d2, false);
    drv_forward(&d1, false);
    drv_backward(&d1, true, false);
    drv_backward(&d2, true, false);
    snprintf(f, sizeof f, "%s_y", name);
    float *y = tu_load(f, NULL);
    snprintf(f, sizeof f, "%s_dx", name);
    float *dx = tu_load(f, NULL);
    tu_assert_close(d1.y, y, out_numel(&d1), 1e-4, 1e-5, "y batch 1");
    tu_assert_close(d2.y, y, out_numel(&d2), 1e-4, 1e-5, "y batch 2");
    tu_assert_close(d1.dx, dx, in_numel(&d1), 1e-4, 1e-5, "dx batch 1");
    tu_assert_close(d2.dx, dx, in_numel(&d2), 1e-4, 1e-5, "dx batch 2");
    free(x), free(dy), free(y), free(dx);
    drv_free(&d1, false);
    drv_free(&d2, true);
}

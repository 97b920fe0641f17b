/* layer_harness.h: drives one layer through the layer contract without a model (build, weights,
 * plan, workspace, forward, backward), compares with PyTorch fixtures and checks gradients by
 * finite differences. Shared by the layer tests. */
#ifndef TNT_LAYER_HARNESS_H
#define TNT_LAYER_HARNESS_H

#include "testutil.h"

#include "layers/layer.h"

typedef struct drv {
    tnt_layer *l;
    int64_t batch;
    void *plan;
    void *ws;
    float *x, *y, *pre, *dy, *dx; /* (batch, in...) / (batch, out...) */
} drv;

typedef struct fd_target {
    float *v, *g; /* values and backward's gradient */
    int64_t n;
    const char *what;
} fd_target;

int64_t in_numel(const drv *d);
int64_t out_numel(const drv *d);
void drv_init(drv *d, tnt_layer *l, tnt_shape in, int64_t batch);
void drv_free(drv *d, bool free_layer);
void drv_forward(drv *d, bool want_preact);
void drv_backward(drv *d, bool want_dx, bool dy_is_preact);
void poison_grads(tnt_layer *l);
float max_abs(const float *x, int64_t n);
void check(const float *got, const char *fixture, int64_t n, const char *what);
void load_into(float *dst, const char *fixture, int64_t n);
bool fixture_exists(const char *fixture);
void run_case(const char *name, tnt_layer *l);
double fd_loss(drv *d, const float *r);
void fd_check(tnt_layer *l, tnt_shape in, int64_t batch);
/* A weightless layer on n samples: build, plan, forward and (if dy) backward. */
void run_layer(tnt_layer *l, tnt_shape in, int64_t n, const float *x, float *y, const float *dy,
               float *dx, bool training);
/* Two plans of one built layer side by side (the model caches the full and the last partial batch):
 * the batch-1 plan must give the first sample of the batch-2 results (fixtures <name>_x, _dy, _y,
 * _dx and _<wnames[i]>). Frees l. */
void check_two_plans(tnt_layer *l, const char *name, int n_weights, const char *const *wnames);

#endif

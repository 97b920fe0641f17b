/* permute.c: Permute (Keras): reorders the non-batch axes. dims is 1-based as in Keras: output
 * axis i is input axis dims[i]; (seq, features) with dims (2, 1) -> (features, seq).
 * Backward is the inverse permutation of dy. Both run one strided gather: the destination (y, or
 * dx) is walked in order as rows of its last axis, parallel over those rows, each row read with
 * the source stride of the axis that the destination's last axis comes from (gathers: writes stay
 * sequential). */
#include "gpu/gpu.h"
#include "gpu/kernels/kargs.h"
#include "layers/keras_config.h"
#include "layers/layer.h"

#include <stdio.h>

/* One strided gather: dst (per sample, shape dim[0..n)) walked in order; dst axis i steps src by
 * src_stride[i]. */
typedef struct permute_walk {
    int64_t dim[TNT_MAX_DIMS];
    int64_t src_stride[TNT_MAX_DIMS];
} permute_walk;

typedef struct permute_cfg {
    int n;
    int perm[TNT_MAX_DIMS]; /* 0-based: output axis i is input axis perm[i] */
    permute_walk fwd, bwd;  /* from build: y from x, and dx from dy (the inverse permutation) */
    int64_t numel;          /* values per sample */
} permute_cfg;

static void dims_str(const int *dims, int n, char *buf, size_t size) {
    size_t j = (size_t)snprintf(buf, size, "(");
    for (int i = 0; i < n && j < size; i++)
        j += (size_t)snprintf(buf + j, size - j, i ? ", %d" : "%d", dims[i]);
    if (j < size) snprintf(buf + j, size - j, n == 1 ? ",)" : ")");
}

static tnt_status permute_build(tnt_layer *l, tnt_shape in, tnt_shape *out) {
    permute_cfg *c = l->priv;
    char b[96], d[96];
    int dims1[TNT_MAX_DIMS];
    for (int i = 0; i < c->n; i++) dims1[i] = c->perm[i] + 1;
    dims_str(dims1, c->n, d, sizeof d);
    if (in.ndim != c->n)
        return tnt__error(TNT_ERR_SHAPE,
                          "Permute \"%s\": input shape %s has rank %d but dims %s permutes %d axes "
                          "(expected an input of rank %d)",
                          l->name, tnt_shape_str(in, b, sizeof b), in.ndim, d, c->n, c->n);
    for (int i = 0; i < in.ndim; i++)
        if (in.dim[i] <= 0)
            return tnt__error(TNT_ERR_SHAPE, "Permute \"%s\": input shape %s has an empty dimension",
                              l->name, tnt_shape_str(in, b, sizeof b));
    out->ndim = c->n;
    for (int i = 0; i < c->n; i++) out->dim[i] = in.dim[c->perm[i]];
    int64_t xs[TNT_MAX_DIMS], ys[TNT_MAX_DIMS], sx = 1, sy = 1; /* row-major strides of x and y */
    for (int i = c->n - 1; i >= 0; i--) {
        xs[i] = sx, sx *= in.dim[i];
        ys[i] = sy, sy *= out->dim[i];
    }
    c->numel = sx;
    for (int i = 0; i < c->n; i++) {
        c->fwd.dim[i] = out->dim[i];
        c->fwd.src_stride[i] = xs[c->perm[i]];     /* y axis i is x axis perm[i] */
        c->bwd.dim[c->perm[i]] = out->dim[i];
        c->bwd.src_stride[c->perm[i]] = ys[i];     /* x axis perm[i] is y axis i */
    }
    return TNT_OK;
}

/* dst[o] = src[offset(o)] for every sample: dst walked as rows of its last axis, in parallel. */
static void permute_copy(const permute_walk *w, int n, int64_t numel, int64_t batch, const float *src,
                         float *dst) {
    const int last = n - 1;
    const int64_t L = w->dim[last], ls = w->src_stride[last];
    const int64_t rows_per = numel / L, rows = batch * rows_per;
#pragma omp parallel for schedule(static) if (batch * numel > 65536)
    for (int64_t r = 0; r < rows; r++) {
        int64_t rem = r % rows_per, off = r / rows_per * numel;
        for (int i = last - 1; i >= 0; i--) { /* decode the row index into dst's axes */
            off += (rem % w->dim[i]) * w->src_stride[i];
            rem /= w->dim[i];
        }
        float *o = dst + r * L;
        const float *p = src + off;
        if (ls == 1) {
            memcpy(o, p, (size_t)L * sizeof(float));
        } else {
            for (int64_t k = 0; k < L; k++) o[k] = p[k * ls];
        }
    }
}

static tnt_status permute_forward(tnt_layer *l, void *plan, const tnt__fwd_args *a) {
    (void)plan;
    const permute_cfg *c = l->priv;
    permute_copy(&c->fwd, c->n, c->numel, a->batch, a->x, a->y);
    if (a->preact && a->preact != a->y)
        memcpy(a->preact, a->y, (size_t)(a->batch * c->numel) * sizeof(float));
    return TNT_OK;
}

static tnt_status permute_backward(tnt_layer *l, void *plan, const tnt__bwd_args *a) {
    (void)plan;
    const permute_cfg *c = l->priv;
    if (a->dx) permute_copy(&c->bwd, c->n, c->numel, a->batch, a->dy, a->dx);
    return TNT_OK;
}

/* ---- on the device: the same gather (gpu/kernels/misc.cu tnt_k_permute) ------------------- */

#define GPU_BLOCK 256

static tnt_status permute_gpu_copy(const permute_walk *w, int n, int64_t numel, int64_t batch, const float *src,
                                   float *dst) {
    tnt_k_perm p = {.n = batch, .numel = numel, .ndim = n};
    for (int i = 0; i < n; i++) p.dim[i] = w->dim[i], p.src_stride[i] = w->src_stride[i];
    void *args[] = {&p, &src, &dst};
    return tnt__gpu_launch("tnt_k_permute", tnt__gpu_grid_for(batch * numel, GPU_BLOCK), GPU_BLOCK, 0, args);
}

static bool permute_gpu_supported(const tnt_layer *l, const char **why) {
    if (((const permute_cfg *)l->priv)->n <= 8) return true;
    *why = "more than 8 axes have no device path";
    return false;
}

static tnt_status permute_gpu_forward(tnt_layer *l, void *plan, const tnt__fwd_args *a) {
    (void)plan;
    const permute_cfg *c = l->priv;
    tnt_status s = permute_gpu_copy(&c->fwd, c->n, c->numel, a->batch, a->x, a->y);
    if (s == TNT_OK && a->preact && a->preact != a->y)
        s = tnt__gpu_copy_on_device(a->preact, a->y, (size_t)(a->batch * c->numel) * sizeof(float), TNT__GPU_COMPUTE);
    return s;
}

static tnt_status permute_gpu_backward(tnt_layer *l, void *plan, const tnt__bwd_args *a) {
    (void)plan;
    const permute_cfg *c = l->priv;
    return a->dx ? permute_gpu_copy(&c->bwd, c->n, c->numel, a->batch, a->dy, a->dx) : TNT_OK;
}

static const tnt__gpu_ops permute_gpu_ops = {
    .supported = permute_gpu_supported,
    .forward = permute_gpu_forward,
    .backward = permute_gpu_backward,
};

static void permute_destroy(tnt_layer *l) { free(l->priv); }

static tnt_status permute_get_config(const tnt_layer *l, cJSON *c) {
    const permute_cfg *p = l->priv;
    int v[TNT_MAX_DIMS];
    for (int i = 0; i < p->n; i++) v[i] = p->perm[i] + 1; /* Keras: 1-based */
    return tnt__kj_add_ints(c, "dims", p->n, v);
}

static tnt_layer *permute_from_config(const cJSON *c, const tnt__kj_ctx *k) {
    int v[TNT_MAX_DIMS] = {0}, n = 0;
    TNT_KJ_READ(tnt__kj_int_list(c, "dims", TNT_MAX_DIMS - 1, v, &n, k));
    return tnt__kj_built(tnt_permute(n, v, k->name), k);
}

const tnt__layer_ops tnt__permute_ops = {
    .class_name = "Permute",
    .from_config = permute_from_config,
    .get_config = permute_get_config,
    .build = permute_build,
    .forward = permute_forward,
    .backward = permute_backward,
    .destroy = permute_destroy,
    .gpu = &permute_gpu_ops,
};

tnt_layer *tnt_permute(int n, const int *dims, const char *name) {
    if (n < 1 || n >= TNT_MAX_DIMS) {
        tnt__error(TNT_ERR_ARG, "Permute: n %d (expected 1 to %d: the number of non-batch axes)", n,
                   TNT_MAX_DIMS - 1);
        return NULL;
    }
    if (!dims) {
        tnt__error(TNT_ERR_ARG, "Permute: dims is NULL (expected %d axes, a permutation of 1..%d)", n, n);
        return NULL;
    }
    char d[96];
    bool seen[TNT_MAX_DIMS] = {false};
    for (int i = 0; i < n; i++) {
        if (dims[i] < 1 || dims[i] > n || seen[dims[i] - 1]) {
            dims_str(dims, n, d, sizeof d);
            tnt__error(TNT_ERR_ARG,
                       "Permute: dims %s is not a permutation of 1..%d (entry %d is %d%s; axes are "
                       "1-based and exclude the batch axis)",
                       d, n, i, dims[i], dims[i] >= 1 && dims[i] <= n ? ", a repeat" : ", out of range");
            return NULL;
        }
        seen[dims[i] - 1] = true;
    }
    permute_cfg *c = tnt__calloc(1, sizeof *c);
    if (!c) return NULL;
    c->n = n;
    for (int i = 0; i < n; i++) c->perm[i] = dims[i] - 1;
    tnt_layer *l = tnt__layer_new(&tnt__permute_ops, name, c);
    if (!l) free(c);
    return l;
}

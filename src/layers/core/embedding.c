/* embedding.c: Embedding (Keras): integer ids, stored as float32, look up rows of a table
 * "embeddings" (input_dim, output_dim): input (...) -> output (..., output_dim).
 *
 * Forward checks every id (an integer in [0, input_dim)) before it copies anything, so a bad id
 * fails the step with TNT_ERR_ARG and a message naming the id, its position and the range.
 * Backward: the table's gradient is a scatter-add of dy's rows (repeated ids accumulate, rows not
 * seen are zero); ids have no gradient, so dx (when asked) is zeros.
 *
 * Parallelism (vocabularies of 8000-40000 x 256-1024): the gradient is zeroed by rows across
 * threads, then the scatter is split across threads by column blocks of the table: each thread
 * adds its columns of every dy row in id order, so there are no races, no atomics, and the sums do
 * not depend on the number of threads.
 *
 * mask_zero: id 0 is padding; the graph asks tnt__embedding_mask_zero and derives the sequence
 * mask (ids != 0) itself. Embedding does not pass on an incoming mask (supports_masking false). */
#include "gpu/gpu.h"
#include "layers/keras_config.h"
#include "layers/layer.h"

#include <math.h>
#include <omp.h>
#include <stdio.h>

typedef struct emb_cfg {
    int input_dim, output_dim;
    bool mask_zero;
    tnt_initializer init; /* embeddings_initializer: Keras's RandomUniform(-0.05, 0.05) unless a file says */
} emb_cfg;

static tnt_status emb_build(tnt_layer *l, tnt_shape in, tnt_shape *out) {
    emb_cfg *c = l->priv;
    char b[96];
    if (in.ndim < 1 || in.ndim >= TNT_MAX_DIMS)
        return tnt__error(TNT_ERR_SHAPE,
                          "Embedding \"%s\": input shape %s has rank %d (expected 1 to %d: the ids "
                          "of a sequence, ...)",
                          l->name, tnt_shape_str(in, b, sizeof b), in.ndim, TNT_MAX_DIMS - 1);
    for (int i = 0; i < in.ndim; i++)
        if (in.dim[i] <= 0)
            return tnt__error(TNT_ERR_SHAPE, "Embedding \"%s\": input shape %s has an empty dimension",
                              l->name, tnt_shape_str(in, b, sizeof b));
    l->n_weights = 0;
    if (tnt__layer_add_weight(l, "embeddings", TNT_SHAPE(c->input_dim, c->output_dim),
                              c->init, c->input_dim, c->output_dim) < 0)
        return TNT_ERR_ARG;
    /* An integer dtype (Keras: int32 embeddings, which no gradient reaches) */
    if (tnt__policy_is_integer(l->dtype_policy)) l->weights[0].trainable = false;
    *out = in;
    out->dim[out->ndim++] = c->output_dim;
    return TNT_OK;
}

/* The position of the first id of x[0..n) that is not an integer in [0, input_dim), or -1. */
static int64_t first_bad_id(const float *x, int64_t n, int input_dim) {
    const float lim = (float)input_dim;
    int64_t bad = n; /* the smallest bad position: the reported id is the first one */
#pragma omp parallel for schedule(static) reduction(min : bad) if (n > 65536)
    for (int64_t i = 0; i < n; i++) {
        const float v = x[i];
        if (!(v >= 0.0f && v < lim && v == floorf(v)) && i < bad) bad = i;
    }
    return bad < n ? bad : -1;
}

/* x: (batch, ...) ids -> y: (batch, ..., output_dim) */
static tnt_status emb_forward(tnt_layer *l, void *plan, const tnt__fwd_args *a) {
    (void)plan;
    const emb_cfg *c = l->priv;
    const int64_t n = a->batch * tnt_shape_numel(l->in_shape), D = c->output_dim;
    int64_t bad = first_bad_id(a->x, n, c->input_dim);
    if (bad >= 0) {
        const int64_t per = tnt_shape_numel(l->in_shape);
        return tnt__error(TNT_ERR_ARG,
                          "Embedding \"%s\": id %g at position %lld of sample %lld is not an integer "
                          "in [0, %d) (input_dim %d)",
                          l->name, (double)a->x[bad], (long long)(bad % per), (long long)(bad / per),
                          c->input_dim, c->input_dim);
    }
    const float *table = l->weights[0].value;
#pragma omp parallel for schedule(static) if (n * D > 32768)
    for (int64_t i = 0; i < n; i++)
        memcpy(a->y + i * D, table + (int64_t)a->x[i] * D, (size_t)D * sizeof(float));
    if (tnt__policy_is_integer(l->dtype_policy)) /* Keras's integer variables: the values cast to int */
        for (int64_t i = 0; i < n * D; i++) a->y[i] = truncf(a->y[i]);
    if (a->preact && a->preact != a->y) memcpy(a->preact, a->y, (size_t)(n * D) * sizeof(float));
    return TNT_OK;
}

/* dy: (batch, ..., output_dim) -> grad (input_dim, output_dim) overwritten; dx zeros */
static tnt_status emb_backward(tnt_layer *l, void *plan, const tnt__bwd_args *a) {
    (void)plan;
    const emb_cfg *c = l->priv;
    const int64_t n = a->batch * tnt_shape_numel(l->in_shape), D = c->output_dim, V = c->input_dim;
    float *g = l->weights[0].grad;
    if (a->dx) memset(a->dx, 0, (size_t)n * sizeof(float));
    if (!g) return TNT_OK;
    const float *x = a->x, *dy = a->dy;
    const bool par = V * D + n * D > 65536;
#pragma omp parallel if (par)
    {
        const int64_t T = omp_get_num_threads(), t = omp_get_thread_num();
        /* zero: rows split across threads */
        const int64_t r0 = V * t / T, r1 = V * (t + 1) / T;
        memset(g + r0 * D, 0, (size_t)((r1 - r0) * D) * sizeof(float));
#pragma omp barrier
        /* scatter: columns split across threads, in blocks of 16 floats (a cache line) */
        const int64_t blocks = (D + 15) / 16;
        const int64_t c0 = TNT_MIN(D, blocks * t / T * 16), c1 = TNT_MIN(D, blocks * (t + 1) / T * 16);
        if (c1 > c0) {
            for (int64_t i = 0; i < n; i++) {
                const int64_t id = (int64_t)x[i];
                if (id < 0 || id >= V) continue; /* forward rejected it already */
                float *gr = g + id * D;
                const float *d = dy + i * D;
                for (int64_t k = c0; k < c1; k++) gr[k] += d[k];
            }
        }
    }
    return TNT_OK;
}

static void emb_destroy(tnt_layer *l) { free(l->priv); }

static tnt_status emb_get_config(const tnt_layer *l, cJSON *c) {
    const emb_cfg *p = l->priv;
    TNT_KJ(cJSON_AddNumberToObject(c, "input_dim", p->input_dim));
    TNT_KJ(cJSON_AddNumberToObject(c, "output_dim", p->output_dim));
    TNT_KJ_S(tnt__kj_add_initializer(c, "embeddings_initializer", p->init));
    static const char *const nulls[] = {"embeddings_regularizer", "activity_regularizer", "embeddings_constraint",
                                        NULL};
    TNT_KJ_S(tnt__kj_add_nulls(c, nulls));
    TNT_KJ(cJSON_AddBoolToObject(c, "mask_zero", p->mask_zero));
    TNT_KJ(cJSON_AddNullToObject(c, "input_length"));
    return TNT_OK;
}

static tnt_layer *embedding_from_config(const cJSON *c, const tnt__kj_ctx *k) {
    int in_dim = 0, out_dim = 0;
    bool mask_zero = false;
    TNT_KJ_READ(tnt__kj_int(c, "input_dim", true, 0, &in_dim, k));
    TNT_KJ_READ(tnt__kj_int(c, "output_dim", true, 0, &out_dim, k));
    TNT_KJ_READ(tnt__kj_bool(c, "mask_zero", false, &mask_zero, k));
    tnt_initializer init;
    TNT_KJ_READ(tnt__kj_init(c, "embeddings_initializer", TNT_INIT_RANDOM_UNIFORM, &init, k));
    static const char *const nulls[] = {"embeddings_regularizer", "activity_regularizer", "embeddings_constraint",
                                        NULL};
    TNT_KJ_READ(tnt__kj_check_nulls(c, nulls, k));
    tnt_layer *l = tnt_embedding(in_dim, out_dim, mask_zero, k->name);
    if (l) ((emb_cfg *)l->priv)->init = init;
    return tnt__kj_built(l, k);
}

/* ---- on the device: the ids checked first (the first bad position comes back to the host, so
 * the error names it as above), then a gather; backward sorts the positions by id (counts, their
 * offsets, the positions in order: the shared scratch) and sums dy's rows per id in token order,
 * the CPU's sums, one thread per gradient element --------------------------------------------- */

#define GPU_BLOCK 256
#define GPU_CHECK_BLOCKS 64 /* blocks of the id check: their minima come back to the host */

static bool emb_gpu_supported(const tnt_layer *l, const char **why) {
    if (!tnt__policy_is_integer(l->dtype_policy)) return true;
    *why = "an integer dtype has no device path";
    return false;
}

static size_t emb_gpu_workspace(tnt_layer *l, void *plan, int64_t batch) {
    (void)l, (void)plan, (void)batch;
    return GPU_CHECK_BLOCKS * sizeof(long long);
}

/* scratch: [count (input_dim ints)][offset (input_dim ints)][order (ids ints)] */
static size_t emb_gpu_scratch(tnt_layer *l, void *plan, int64_t batch) {
    (void)plan;
    const emb_cfg *c = l->priv;
    return (size_t)(2 * (int64_t)c->input_dim + batch * tnt_shape_numel(l->in_shape)) * sizeof(int);
}

static tnt_status emb_gpu_forward(tnt_layer *l, void *plan, const tnt__fwd_args *a) {
    (void)plan;
    const emb_cfg *c = l->priv;
    long long n = a->batch * tnt_shape_numel(l->in_shape), D = c->output_dim, bad[GPU_CHECK_BLOCKS];
    int dim = c->input_dim;
    void *check[] = {(void *)&a->x, &n, &dim, (void *)&a->workspace};
    tnt_status s = tnt__gpu_launch("tnt_k_embedding_bad_ids", GPU_CHECK_BLOCKS, GPU_BLOCK, 0, check);
    if (s == TNT_OK) s = tnt__gpu_copy_to_host(bad, a->workspace, sizeof bad, TNT__GPU_COMPUTE);
    if (s == TNT_OK) s = tnt__gpu_sync(TNT__GPU_COMPUTE);
    if (s != TNT_OK) return s;
    long long first = n;
    for (int b = 0; b < GPU_CHECK_BLOCKS; b++) first = bad[b] < first ? bad[b] : first;
    if (first < n) {
        const int64_t per = tnt_shape_numel(l->in_shape);
        float id = 0;
        if ((s = tnt__gpu_copy_to_host(&id, a->x + first, sizeof id, TNT__GPU_COMPUTE)) != TNT_OK ||
            (s = tnt__gpu_sync(TNT__GPU_COMPUTE)) != TNT_OK)
            return s;
        return tnt__error(TNT_ERR_ARG,
                          "Embedding \"%s\": id %g at position %lld of sample %lld is not an integer "
                          "in [0, %d) (input_dim %d)",
                          l->name, (double)id, (long long)(first % per), (long long)(first / per), c->input_dim,
                          c->input_dim);
    }
    const float *table = l->weights[0].d_value;
    void *args[] = {(void *)&a->x, &table, (void *)&a->y, &n, &D};
    s = tnt__gpu_launch("tnt_k_embedding_fwd", tnt__gpu_grid_for(n * D, GPU_BLOCK), GPU_BLOCK, 0, args);
    if (s == TNT_OK && a->preact && a->preact != a->y)
        s = tnt__gpu_copy_on_device(a->preact, a->y, (size_t)(n * D) * sizeof(float), TNT__GPU_COMPUTE);
    return s;
}

static tnt_status emb_gpu_backward(tnt_layer *l, void *plan, const tnt__bwd_args *a) {
    (void)plan;
    const emb_cfg *c = l->priv;
    long long n = a->batch * tnt_shape_numel(l->in_shape), D = c->output_dim, V = c->input_dim;
    float *g = l->weights[0].d_grad;
    tnt_status s = a->dx ? tnt__gpu_memset_zero(a->dx, (size_t)n * sizeof(float), TNT__GPU_COMPUTE) : TNT_OK;
    if (s != TNT_OK || !g) return s;
    if (n > INT32_MAX) return tnt__error(TNT_ERR_UNSUPPORTED, "Embedding \"%s\": %lld ids in a batch on the GPU "
                                                                "(at most %d)", l->name, n, INT32_MAX);
    int *count = a->scratch, *offset = count + V, *order = offset + V;
    const float *ids = a->x, *dy = a->dy;
    void *count_args[] = {&ids, &count, &n, &V}, *offset_args[] = {&count, &offset, &V};
    void *order_args[] = {&ids, &offset, &order, &n, &V}, *grad_args[] = {&dy, &count, &offset, &order, &g, &D, &V};
    s = tnt__gpu_launch("tnt_k_embedding_count", tnt__gpu_grid_for(V, GPU_BLOCK), GPU_BLOCK, 0, count_args);
    if (s == TNT_OK) s = tnt__gpu_launch("tnt_k_embedding_offsets", 1, 1024, 0, offset_args);
    if (s == TNT_OK)
        s = tnt__gpu_launch("tnt_k_embedding_order", tnt__gpu_grid_for(V, GPU_BLOCK), GPU_BLOCK, 0, order_args);
    if (s == TNT_OK)
        s = tnt__gpu_launch("tnt_k_embedding_grad", tnt__gpu_grid_for(V * D, GPU_BLOCK), GPU_BLOCK, 0, grad_args);
    return s;
}

static const tnt__gpu_ops emb_gpu_ops = {
    .supported = emb_gpu_supported,
    .workspace_size = emb_gpu_workspace,
    .scratch_size = emb_gpu_scratch,
    .forward = emb_gpu_forward,
    .backward = emb_gpu_backward,
};

const tnt__layer_ops tnt__embedding_ops = {
    .class_name = "Embedding",
    .from_config = embedding_from_config,
    .get_config = emb_get_config,
    .build = emb_build,
    .forward = emb_forward,
    .backward = emb_backward,
    .destroy = emb_destroy,
    .supports_masking = false,
    .gpu = &emb_gpu_ops,
};

bool tnt__embedding_mask_zero(const tnt_layer *l) {
    return l && l->ops == &tnt__embedding_ops && ((const emb_cfg *)l->priv)->mask_zero;
}

tnt_layer *tnt_embedding(int input_dim, int output_dim, bool mask_zero, const char *name) {
    if (input_dim <= 0) {
        tnt__error(TNT_ERR_ARG, "Embedding: input_dim %d (expected > 0: the vocabulary size)", input_dim);
        return NULL;
    }
    if (output_dim <= 0) {
        tnt__error(TNT_ERR_ARG, "Embedding: output_dim %d (expected > 0)", output_dim);
        return NULL;
    }
    if (input_dim > (1 << 24)) { /* ids are float32: larger integers are not all representable */
        tnt__error(TNT_ERR_ARG,
                   "Embedding: input_dim %d (expected at most %d: ids are stored as float32)",
                   input_dim, 1 << 24);
        return NULL;
    }
    emb_cfg *c = tnt__calloc(1, sizeof *c);
    if (!c) return NULL;
    c->input_dim = input_dim;
    c->output_dim = output_dim;
    c->mask_zero = mask_zero;
    c->init = TNT_INIT_RANDOM_UNIFORM;
    tnt_layer *l = tnt__layer_new(&tnt__embedding_ops, name, c);
    if (!l) free(c);
    return l;
}

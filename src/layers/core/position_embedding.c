/* position_embedding.c: KerasHub's PositionEmbedding (keras_hub.layers.PositionEmbedding, formerly
 * keras_nlp's): a learned weight "embeddings" (sequence_length, hidden); call(inputs) returns its
 * first seq rows broadcast to the inputs' shape (..., seq, hidden), seq <= sequence_length. The
 * output does not depend on the inputs' values: the usual use is Add()([x, PositionEmbedding(L)(x)]).
 *
 * Backward: the inputs' gradient is zeros; the weight's gradient is dy summed over every leading
 * row (batch and any axes before seq), rows added in order (0 + dy[0] + dy[1] ...: the same bits
 * on the CPU and the device, whatever the threads), and zeros in the rows past seq.
 * KerasHub's start_index call argument (a slice further down the table) is not offered: 0. */
#include "gpu/gpu.h"
#include "layers/keras_config.h"
#include "layers/layer.h"

#include <omp.h>

typedef struct posemb_cfg {
    int sequence_length;
    tnt_initializer init; /* KerasHub's default: glorot_uniform */
} posemb_cfg;

static tnt_status posemb_build(tnt_layer *l, tnt_shape in, tnt_shape *out) {
    const posemb_cfg *c = l->priv;
    char b[96];
    if (in.ndim < 2)
        return tnt__error(TNT_ERR_SHAPE, "PositionEmbedding \"%s\": input shape %s has rank %d (expected at least 2: "
                          "(..., sequence, features))", l->name, tnt_shape_str(in, b, sizeof b), in.ndim);
    for (int i = 0; i < in.ndim; i++)
        if (in.dim[i] <= 0)
            return tnt__error(TNT_ERR_SHAPE, "PositionEmbedding \"%s\": input shape %s has an empty dimension", l->name,
                              tnt_shape_str(in, b, sizeof b));
    if (in.dim[in.ndim - 2] > c->sequence_length)
        return tnt__error(TNT_ERR_SHAPE, "PositionEmbedding \"%s\": input shape %s has a sequence of %lld steps, longer "
                          "than sequence_length %d", l->name, tnt_shape_str(in, b, sizeof b),
                          (long long)in.dim[in.ndim - 2], c->sequence_length);
    const int64_t features = in.dim[in.ndim - 1];
    l->n_weights = 0;
    /* Keras's fans of a (rows, cols) weight: fan_in rows, fan_out cols */
    if (tnt__layer_add_weight(l, "embeddings", TNT_SHAPE(c->sequence_length, features), c->init, c->sequence_length,
                              features) < 0)
        return TNT_ERR_ARG;
    *out = in;
    return TNT_OK;
}

/* The broadcast's sizes: rows (batch and leading axes) of cols = seq * features values each, and the
 * weight's size. */
static void posemb_sizes(const tnt_layer *l, int64_t batch, int64_t *rows, int64_t *cols, int64_t *table) {
    const tnt_shape in = l->in_shape;
    *cols = in.dim[in.ndim - 2] * in.dim[in.ndim - 1];
    *rows = batch * (tnt_shape_numel(in) / *cols);
    *table = tnt_shape_numel(l->weights[0].shape);
}

static tnt_status posemb_forward(tnt_layer *l, void *plan, const tnt__fwd_args *a) {
    (void)plan;
    int64_t rows, cols, table;
    posemb_sizes(l, a->batch, &rows, &cols, &table);
    const float *p = l->weights[0].value;
#pragma omp parallel for schedule(static) if (rows * cols > 65536)
    for (int64_t r = 0; r < rows; r++) memcpy(a->y + r * cols, p, (size_t)cols * sizeof(float));
    if (a->preact && a->preact != a->y) memcpy(a->preact, a->y, (size_t)(rows * cols) * sizeof(float));
    return TNT_OK;
}

static tnt_status posemb_backward(tnt_layer *l, void *plan, const tnt__bwd_args *a) {
    (void)plan;
    int64_t rows, cols, table;
    posemb_sizes(l, a->batch, &rows, &cols, &table);
    if (a->dx) memset(a->dx, 0, (size_t)(rows * cols) * sizeof(float));
    float *g = l->weights[0].grad;
    if (!g) return TNT_OK;
    const float *dy = a->dy;
    /* columns split across threads in blocks of 16 (a cache line); each sums its rows in order */
    const int64_t blocks = (cols + 15) / 16;
#pragma omp parallel for schedule(static) if (rows * cols > 65536)
    for (int64_t bk = 0; bk < blocks; bk++) {
        const int64_t c0 = bk * 16, c1 = TNT_MIN(cols, c0 + 16);
        for (int64_t c = c0; c < c1; c++) g[c] = rows > 0 ? dy[c] : 0.0f;
        for (int64_t r = 1; r < rows; r++)
            for (int64_t c = c0; c < c1; c++) g[c] += dy[r * cols + c];
    }
    memset(g + cols, 0, (size_t)(table - cols) * sizeof(float));
    return TNT_OK;
}

/* ---- on the device: a broadcast copy forward; backward sums dy over the rows in order, one thread
 * per column (tnt_k_col_sums: the CPU's bits), no atomics --------------------------------------- */

#define GPU_BLOCK 256

static tnt_status posemb_gpu_forward(tnt_layer *l, void *plan, const tnt__fwd_args *a) {
    (void)plan;
    int64_t rows, cols, table;
    posemb_sizes(l, a->batch, &rows, &cols, &table);
    long long r = rows, c = cols;
    const float *p = l->weights[0].d_value;
    void *args[] = {(void *)&a->y, &p, &r, &c};
    tnt_status s = tnt__gpu_launch("tnt_k_bias_set", tnt__gpu_grid_for(r * c, GPU_BLOCK), GPU_BLOCK, 0, args);
    if (s == TNT_OK && a->preact && a->preact != a->y)
        s = tnt__gpu_copy_on_device(a->preact, a->y, (size_t)(rows * cols) * sizeof(float), TNT__GPU_COMPUTE);
    return s;
}

static tnt_status posemb_gpu_backward(tnt_layer *l, void *plan, const tnt__bwd_args *a) {
    (void)plan;
    int64_t rows, cols, table;
    posemb_sizes(l, a->batch, &rows, &cols, &table);
    tnt_status s = a->dx ? tnt__gpu_memset_zero(a->dx, (size_t)(rows * cols) * sizeof(float), TNT__GPU_COMPUTE) : TNT_OK;
    float *g = l->weights[0].d_grad;
    if (s != TNT_OK || !g) return s;
    s = tnt__gpu_col_sums(a->dy, g, rows, cols);
    if (s == TNT_OK && table > cols)
        s = tnt__gpu_memset_zero(g + cols, (size_t)(table - cols) * sizeof(float), TNT__GPU_COMPUTE);
    return s;
}

static const tnt__gpu_ops posemb_gpu_ops = {
    .forward = posemb_gpu_forward,
    .backward = posemb_gpu_backward,
};

static void posemb_destroy(tnt_layer *l) { free(l->priv); }

static tnt_status posemb_get_config(const tnt_layer *l, cJSON *c) {
    const posemb_cfg *p = l->priv;
    TNT_KJ(cJSON_AddNumberToObject(c, "sequence_length", p->sequence_length));
    TNT_KJ_S(tnt__kj_add_initializer(c, "initializer", p->init));
    return TNT_OK;
}

static tnt_layer *posemb_from_config(const cJSON *c, const tnt__kj_ctx *k) {
    int len = 0;
    tnt_initializer init;
    TNT_KJ_READ(tnt__kj_int(c, "sequence_length", true, 0, &len, k));
    TNT_KJ_READ(tnt__kj_init(c, "initializer", TNT_INIT_GLOROT_UNIFORM, &init, k));
    return tnt__kj_built(tnt_position_embedding(len, init, k->name), k);
}

const tnt__layer_ops tnt__position_embedding_ops = {
    .class_name = "PositionEmbedding",
    .from_config = posemb_from_config,
    .get_config = posemb_get_config,
    .build = posemb_build,
    .forward = posemb_forward,
    .backward = posemb_backward,
    .destroy = posemb_destroy,
    .gpu = &posemb_gpu_ops,
};

tnt_layer *tnt_position_embedding(int sequence_length, tnt_initializer initializer, const char *name) {
    if (sequence_length <= 0) {
        tnt__error(TNT_ERR_ARG, "PositionEmbedding: sequence_length %d (expected > 0: the longest sequence)",
                   sequence_length);
        return NULL;
    }
    if (initializer == TNT_INIT_DEFAULT) initializer = TNT_INIT_GLOROT_UNIFORM;
    if (!tnt__init_valid(initializer, TNT_INIT_ORTHOGONAL)) {
        tnt__error(TNT_ERR_ARG, "PositionEmbedding: unknown initializer %d", (int)initializer);
        return NULL;
    }
    posemb_cfg *c = tnt__calloc(1, sizeof *c);
    if (!c) return NULL;
    c->sequence_length = sequence_length;
    c->init = initializer;
    tnt_layer *l = tnt__layer_new(&tnt__position_embedding_ops, name, c);
    if (!l) free(c);
    return l;
}

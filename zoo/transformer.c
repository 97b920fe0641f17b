/* transformer.c: the Transformer builders of transformer.h (see there for the architecture and
 * the choices made). The classifier's learned positions are KerasHub's PositionEmbedding (a built-in
 * layer with a device path) added to the tokens. Custom layers of the Transformer model (weights in
 * Keras order, the public custom-layer API only):
 *   EmbeddingSharedWeights  (T) ids -> (T, H): W[id] * sqrt(H), 0 for id 0; owns W (V, H)
 *   EmbeddingLinear         (T, H) -> (T, V): x @ W^T with the embedding's W (no weight of its own)
 *   RelativePositionEmbedding (T, H) -> (T, H): x + the sinusoidal encoding
 *   ShiftTargets            (T) ids -> (T) ids: [0, ids[0 .. T-2]]
 *   PaddingMask             (T) ids -> (T, T): mask[i][j] = ids[j] != 0
 * The kernels here are plain C (one thread): the logits GEMMs are the only heavy ones, and they
 * only matter for the big vocabularies of base/big. */
#include "transformer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(t)                                                                                  \
    do {                                                                                          \
        if ((t).id < 0) goto fail;                                                                \
    } while (0)

/* ---- helpers ---------------------------------------------------------------------------- */

static bool id_ok(float v, int64_t vocab, int64_t *id) {
    if (!(v >= 0.0f) || v >= (float)vocab || v != floorf(v)) return false;
    *id = (int64_t)v;
    return true;
}

/* ---- a) the encoder classifier ---------------------------------------------------------- */

int64_t transformer_encoder_classifier_params(int vocab, int seq, int d, int heads, int ffn, int layers,
                                              int classes) {
    (void)heads;
    const int64_t D = d, F = ffn;
    const int64_t attn = 4 * D * D + 4 * D;       /* in_proj (3 d x d + 3 d), out_proj (d x d + d) */
    const int64_t ff = D * F + F + F * D + D;     /* linear1, linear2 */
    const int64_t norms = 2 * 2 * D;              /* norm1, norm2 */
    return (int64_t)vocab * D + (int64_t)seq * D + layers * (attn + ff + norms) + D * classes + classes;
}

tnt_model *transformer_encoder_classifier(int vocab, int seq, int d, int heads, int ffn, int layers, int classes) {
    if (vocab < 1 || seq < 1 || d < 1 || heads < 1 || ffn < 1 || layers < 0 || classes < 1 || d % heads) {
        tnt_set_error(TNT_ERR_ARG, "transformer_encoder_classifier: bad sizes (vocab %d, seq %d, d %d, heads %d, "
                      "ffn %d, layers %d, classes %d; d must be a multiple of heads)", vocab, seq, d, heads, ffn, layers, classes);
        return NULL;
    }
    char nm[64];
    tnt_graph *g = tnt_graph_new();
    if (!g) return NULL;
    tnt_model *m = NULL;
    tnt_ktensor ids = tnt_graph_input(g, TNT_SHAPE(seq), "ids");
    tnt_ktensor x = tnt_call(g, tnt_embedding(vocab, d, false, "embedding"), ids);
    CHECK(x);
    /* KerasHub's PositionEmbedding (zeros, as the peer's learned positions) added to the tokens */
    tnt_ktensor pos = tnt_call(g, tnt_position_embedding(seq, TNT_INIT_ZEROS, "position_embedding"), x);
    CHECK(pos);
    x = tnt_call2(g, tnt_add("position_add"), x, pos);
    CHECK(x);
    const tnt_ktensor none = {-1};
    for (int i = 0; i < layers; i++) {
        snprintf(nm, sizeof nm, "layer%d_attention", i);
        tnt_ktensor a = tnt_call_attention(g, tnt_multi_head_attention(heads, d / heads, &(tnt_attention_opts){.name = nm}),
                                           x, x, none, none, false);
        snprintf(nm, sizeof nm, "layer%d_add1", i);
        x = tnt_call2(g, tnt_add(nm), x, a);
        snprintf(nm, sizeof nm, "layer%d_norm1", i);
        x = tnt_call(g, tnt_layer_normalization(1e-5f, nm), x);
        snprintf(nm, sizeof nm, "layer%d_linear1", i);
        tnt_ktensor f = tnt_call(g, tnt_dense(ffn, &(tnt_layer_opts){.name = nm, .activation = TNT_ACT_RELU}), x);
        snprintf(nm, sizeof nm, "layer%d_linear2", i);
        f = tnt_call(g, tnt_dense(d, &(tnt_layer_opts){.name = nm}), f);
        snprintf(nm, sizeof nm, "layer%d_add2", i);
        x = tnt_call2(g, tnt_add(nm), x, f);
        snprintf(nm, sizeof nm, "layer%d_norm2", i);
        x = tnt_call(g, tnt_layer_normalization(1e-5f, nm), x);
        CHECK(x);
    }
    x = tnt_call(g, tnt_global_average_pooling1d("mean"), x);
    x = tnt_call(g, tnt_dense(classes, &(tnt_layer_opts){.name = "out"}), x);
    CHECK(x);
    m = tnt_functional(g, 1, &ids, 1, &x, "transformer_encoder_classifier");
fail:
    tnt_graph_free(g);
    return m;
}

/* ---- b) Model Garden's Transformer ------------------------------------------------------- */

const transformer_params TRANSFORMER_TINY_PARAMS = {
    .name = "tiny", .vocab_size = 64, .hidden_size = 64, .num_hidden_layers = 2, .num_heads = 4,
    .filter_size = 128, .layer_postprocess_dropout = 0.1f, .attention_dropout = 0.1f, .relu_dropout = 0.1f,
    .label_smoothing = 0.1f, .learning_rate = 0.5f, .learning_rate_warmup_steps = 100,
    .adam_beta1 = 0.9f, .adam_beta2 = 0.997f, .adam_epsilon = 1e-9f, .max_length = 16, .batch_size = 64};
const transformer_params TRANSFORMER_BASE_PARAMS = {
    .name = "base", .vocab_size = 33708, .hidden_size = 512, .num_hidden_layers = 6, .num_heads = 8,
    .filter_size = 2048, .layer_postprocess_dropout = 0.1f, .attention_dropout = 0.1f, .relu_dropout = 0.1f,
    .label_smoothing = 0.1f, .learning_rate = 2.0f, .learning_rate_warmup_steps = 16000,
    .adam_beta1 = 0.9f, .adam_beta2 = 0.997f, .adam_epsilon = 1e-9f, .max_length = 256, .batch_size = 8};
const transformer_params TRANSFORMER_BIG_PARAMS = {
    .name = "big", .vocab_size = 33708, .hidden_size = 1024, .num_hidden_layers = 6, .num_heads = 16,
    .filter_size = 4096, .layer_postprocess_dropout = 0.3f, .attention_dropout = 0.1f, .relu_dropout = 0.1f,
    .label_smoothing = 0.1f, .learning_rate = 2.0f, .learning_rate_warmup_steps = 16000,
    .adam_beta1 = 0.9f, .adam_beta2 = 0.997f, .adam_epsilon = 1e-9f, .max_length = 256, .batch_size = 8};

const transformer_params *transformer_params_by_name(const char *name) {
    if (!name) return NULL;
    if (!strcmp(name, "tiny")) return &TRANSFORMER_TINY_PARAMS;
    if (!strcmp(name, "base")) return &TRANSFORMER_BASE_PARAMS;
    if (!strcmp(name, "big")) return &TRANSFORMER_BIG_PARAMS;
    return NULL;
}

int64_t transformer_model_garden_params(const transformer_params *p) {
    const int64_t V = p->vocab_size, H = p->hidden_size, F = p->filter_size, N = p->num_hidden_layers;
    const int64_t ffn = H * F + F + F * H + H;
    const int64_t enc = N * (4 * H * H + 2 * 2 * H + ffn) + 2 * H;
    const int64_t dec = N * (8 * H * H + 3 * 2 * H + ffn) + 2 * H;
    return V * H + enc + dec;
}

double transformer_learning_rate(const transformer_params *p, int64_t step) {
    const double s = (double)step, w = (double)p->learning_rate_warmup_steps;
    double lr = p->learning_rate / sqrt((double)p->hidden_size);
    lr *= s / w < 1.0 ? s / w : 1.0;
    return lr / sqrt(s > w ? s : w);
}

static tnt_status lr_begin(tnt_model *m, int64_t batch, const tnt_logs *logs, void *user) {
    (void)batch, (void)logs;
    tnt_optimizer *o = tnt_model_optimizer(m);
    return tnt_optimizer_set_lr(o, (float)transformer_learning_rate(user, tnt_optimizer_iterations(o)));
}

tnt_callback transformer_lr_callback(const transformer_params *p) {
    return (tnt_callback){.user = (void *)p, .on_train_batch_begin = lr_begin};
}

/* Shared state of the embedding and the logits layers. Both layers hold a reference. */
typedef struct shared_emb {
    int refs;
    int64_t vocab, hidden, t;
    tnt_layer *emb;    /* the EmbeddingSharedWeights layer (set in its build) */
    float *dw_logits;  /* (V, H): the logits' contribution to dW of this step */
    float *wt;         /* (H, V): W^T for the logits forward */
    bool pending;      /* dw_logits holds a contribution not yet added */
} shared_emb;

static void shared_release(void *user) {
    shared_emb *s = user;
    if (--s->refs > 0) return;
    free(s->dw_logits);
    free(s->wt);
    free(s);
}

static tnt_status emb_build(tnt_layer *l, tnt_shape in, tnt_shape *out, void *user) {
    shared_emb *s = user;
    if (in.ndim != 1)
        return tnt_set_error(TNT_ERR_SHAPE, "EmbeddingSharedWeights: expected ids (T), got rank %d", in.ndim);
    if (tnt_layer_add_weight(l, "weights", TNT_SHAPE(s->vocab, s->hidden), TNT_INIT_RANDOM_NORMAL, true) < 0)
        return TNT_ERR_ARG;
    s->emb = l;
    s->t = in.dim[0];
    *out = TNT_SHAPE(in.dim[0], s->hidden);
    return TNT_OK;
}

static tnt_status emb_forward(tnt_layer *l, int64_t batch, const float *x, float *y, bool training, void *user) {
    (void)training;
    const shared_emb *s = user;
    const int64_t H = s->hidden, rows = batch * s->t;
    const float *w = tnt_layer_weight_value(l, 0);
    if (!w) return TNT_ERR_STATE;
    const float scale = sqrtf((float)H);
    for (int64_t r = 0; r < rows; r++) {
        int64_t id;
        if (!id_ok(x[r], s->vocab, &id))
            return tnt_set_error(TNT_ERR_ARG, "EmbeddingSharedWeights: id %g outside [0, %lld)", (double)x[r],
                               (long long)s->vocab);
        float *yr = y + r * H;
        if (id == 0) {
            memset(yr, 0, (size_t)H * sizeof(float));
            continue;
        }
        const float *wr = w + id * H;
        for (int64_t h = 0; h < H; h++) yr[h] = wr[h] * scale;
    }
    return TNT_OK;
}

static tnt_status emb_backward(tnt_layer *l, int64_t batch, const float *x, const float *y, const float *dy,
                               float *dx, void *user) {
    (void)y;
    shared_emb *s = user;
    const int64_t H = s->hidden, V = s->vocab, rows = batch * s->t;
    float *dw = tnt_layer_weight_grad(l, 0);
    if (!dw) return TNT_ERR_STATE;
    if (dx) memset(dx, 0, (size_t)rows * sizeof(float)); /* ids: no gradient */
    if (s->pending) { /* the first of this step's embedding calls: add the logits' part once */
        memcpy(dw, s->dw_logits, (size_t)(V * H) * sizeof(float));
        s->pending = false;
    } else {
        memset(dw, 0, (size_t)(V * H) * sizeof(float));
    }
    const float scale = sqrtf((float)H);
    for (int64_t r = 0; r < rows; r++) {
        int64_t id = (int64_t)x[r];
        if (id <= 0 || id >= V) continue; /* padding rows were zeroed: no gradient */
        float *g = dw + id * H;
        const float *d = dy + r * H;
        for (int64_t h = 0; h < H; h++) g[h] += scale * d[h];
    }
    return TNT_OK;
}

static tnt_status lin_build(tnt_layer *l, tnt_shape in, tnt_shape *out, void *user) {
    (void)l;
    shared_emb *s = user;
    if (!s->emb)
        return tnt_set_error(TNT_ERR_STATE, "EmbeddingLinear: call the EmbeddingSharedWeights layer first");
    if (in.ndim != 2 || in.dim[1] != s->hidden)
        return tnt_set_error(TNT_ERR_SHAPE, "EmbeddingLinear: expected input (T, %lld)", (long long)s->hidden);
    *out = TNT_SHAPE(in.dim[0], s->vocab);
    return TNT_OK;
}

/* y (rows, V) = x (rows, H) @ W^T, through wt = W^T (H, V): rows of y updated by axpys over V
 * (vectorizable), four rows at a time, V in blocks that stay in cache. */
static void logits_forward(const float *x, const float *wt, float *y, int64_t rows, int64_t H, int64_t V) {
    enum { VB = 512 };
    for (int64_t v0 = 0; v0 < V; v0 += VB) {
        const int64_t vn = V - v0 < VB ? V - v0 : VB;
        int64_t r = 0;
        for (; r + 4 <= rows; r += 4) {
            float *y0 = y + r * V + v0, *y1 = y0 + V, *y2 = y1 + V, *y3 = y2 + V;
            memset(y0, 0, (size_t)vn * sizeof(float)), memset(y1, 0, (size_t)vn * sizeof(float));
            memset(y2, 0, (size_t)vn * sizeof(float)), memset(y3, 0, (size_t)vn * sizeof(float));
            for (int64_t h = 0; h < H; h++) {
                const float a0 = x[r * H + h], a1 = x[(r + 1) * H + h], a2 = x[(r + 2) * H + h],
                            a3 = x[(r + 3) * H + h];
                const float *w = wt + h * V + v0;
                for (int64_t v = 0; v < vn; v++) {
                    y0[v] += a0 * w[v], y1[v] += a1 * w[v], y2[v] += a2 * w[v], y3[v] += a3 * w[v];
                }
            }
        }
        for (; r < rows; r++) {
            float *y0 = y + r * V + v0;
            memset(y0, 0, (size_t)vn * sizeof(float));
            for (int64_t h = 0; h < H; h++) {
                const float a0 = x[r * H + h];
                const float *w = wt + h * V + v0;
                for (int64_t v = 0; v < vn; v++) y0[v] += a0 * w[v];
            }
        }
    }
}

static tnt_status lin_forward(tnt_layer *l, int64_t batch, const float *x, float *y, bool training, void *user) {
    (void)l, (void)training;
    shared_emb *s = user;
    const int64_t H = s->hidden, V = s->vocab;
    const float *w = tnt_layer_weight_value(s->emb, 0);
    if (!w) return TNT_ERR_STATE;
    /* allocated at the first use, not in build: building the big model stays cheap */
    if (!s->wt && !(s->wt = malloc((size_t)(V * H) * sizeof(float))))
        return tnt_set_error(TNT_ERR_NOMEM, "EmbeddingLinear: out of memory for W^T (%lld x %lld)", (long long)H,
                             (long long)V);
    for (int64_t v = 0; v < V; v++)
        for (int64_t h = 0; h < H; h++) s->wt[h * V + v] = w[v * H + h];
    logits_forward(x, s->wt, y, batch * s->t, H, V);
    return TNT_OK;
}

static tnt_status lin_backward(tnt_layer *l, int64_t batch, const float *x, const float *y, const float *dy,
                               float *dx, void *user) {
    (void)l, (void)y;
    shared_emb *s = user;
    const int64_t H = s->hidden, V = s->vocab, rows = batch * s->t;
    const float *w = tnt_layer_weight_value(s->emb, 0);
    if (!w) return TNT_ERR_STATE;
    if (!s->dw_logits && !(s->dw_logits = malloc((size_t)(V * H) * sizeof(float))))
        return tnt_set_error(TNT_ERR_NOMEM, "EmbeddingLinear: out of memory for dW (%lld x %lld)", (long long)V,
                             (long long)H);
    if (dx) /* dx (rows, H) = dy (rows, V) @ W (V, H) */
        for (int64_t r = 0; r < rows; r++) {
            float *d = dx + r * H;
            memset(d, 0, (size_t)H * sizeof(float));
            const float *g = dy + r * V;
            for (int64_t v = 0; v < V; v++) {
                const float a = g[v];
                if (a == 0.0f) continue;
                const float *wr = w + v * H;
                for (int64_t h = 0; h < H; h++) d[h] += a * wr[h];
            }
        }
    /* dW (V, H) = dy^T (V, rows) @ x (rows, H): for each v, a sum of x rows; rows in blocks */
    enum { RB = 256 };
    memset(s->dw_logits, 0, (size_t)(V * H) * sizeof(float));
    for (int64_t r0 = 0; r0 < rows; r0 += RB) {
        const int64_t rn = rows - r0 < RB ? rows - r0 : RB;
        for (int64_t v = 0; v < V; v++) {
            float *g = s->dw_logits + v * H;
            for (int64_t r = r0; r < r0 + rn; r++) {
                const float a = dy[r * V + v];
                const float *xr = x + r * H;
                for (int64_t h = 0; h < H; h++) g[h] += a * xr[h];
            }
        }
    }
    s->pending = true;
    return TNT_OK;
}

/* Sinusoidal position encoding (Model Garden's RelativePositionEmbedding / get_position_encoding). */
typedef struct sin_pos {
    int64_t t, h;
    float *table; /* (t, h) */
} sin_pos;

static void sin_pos_free(void *user) {
    sin_pos *p = user;
    free(p->table);
    free(p);
}

static tnt_status sin_build(tnt_layer *l, tnt_shape in, tnt_shape *out, void *user) {
    (void)l;
    sin_pos *p = user;
    if (in.ndim != 2) return tnt_set_error(TNT_ERR_SHAPE, "RelativePositionEmbedding: expected (T, H)");
    p->t = in.dim[0], p->h = in.dim[1];
    free(p->table);
    p->table = malloc((size_t)(p->t * p->h) * sizeof(float));
    if (!p->table) return TNT_ERR_NOMEM;
    const int64_t nts = p->h / 2;
    const double inc = log(1.0e4 / 1.0) / (double)(nts - 1 > 1 ? nts - 1 : 1);
    for (int64_t pos = 0; pos < p->t; pos++) {
        float *row = p->table + pos * p->h;
        memset(row, 0, (size_t)p->h * sizeof(float)); /* odd H: the last channel stays 0 (tf pads) */
        for (int64_t i = 0; i < nts; i++) {
            /* float32 as TF: inv_timescale and position * inv_timescale in float */
            const float inv = (float)exp((double)i * -inc);
            const float st = (float)pos * inv;
            row[i] = sinf(st);
            row[nts + i] = cosf(st);
        }
    }
    *out = in;
    return TNT_OK;
}

static tnt_status sin_forward(tnt_layer *l, int64_t batch, const float *x, float *y, bool training, void *user) {
    (void)l, (void)training;
    const sin_pos *p = user;
    const int64_t n = p->t * p->h;
    for (int64_t b = 0; b < batch; b++)
        for (int64_t i = 0; i < n; i++) y[b * n + i] = x[b * n + i] + p->table[i];
    return TNT_OK;
}

static tnt_status sin_backward(tnt_layer *l, int64_t batch, const float *x, const float *y, const float *dy,
                               float *dx, void *user) {
    (void)l, (void)x, (void)y;
    const sin_pos *p = user;
    if (dx) memcpy(dx, dy, (size_t)(batch * p->t * p->h) * sizeof(float));
    return TNT_OK;
}

/* ShiftTargets and PaddingMask: functions of the ids, no gradient. */
static tnt_status shift_build(tnt_layer *l, tnt_shape in, tnt_shape *out, void *user) {
    (void)l;
    if (in.ndim != 1) return tnt_set_error(TNT_ERR_SHAPE, "ShiftTargets: expected ids (T)");
    *(int64_t *)user = in.dim[0];
    *out = in;
    return TNT_OK;
}

static tnt_status shift_forward(tnt_layer *l, int64_t batch, const float *x, float *y, bool training, void *user) {
    (void)l, (void)training;
    const int64_t T = *(int64_t *)user;
    for (int64_t b = 0; b < batch; b++) {
        y[b * T] = 0.0f;
        for (int64_t t = 1; t < T; t++) y[b * T + t] = x[b * T + t - 1];
    }
    return TNT_OK;
}

static tnt_status ids_backward(tnt_layer *l, int64_t batch, const float *x, const float *y, const float *dy,
                               float *dx, void *user) {
    (void)l, (void)y, (void)dy, (void)x;
    const int64_t T = *(int64_t *)user;
    if (dx) memset(dx, 0, (size_t)(batch * T) * sizeof(float));
    return TNT_OK;
}

static tnt_status mask_build(tnt_layer *l, tnt_shape in, tnt_shape *out, void *user) {
    (void)l;
    if (in.ndim != 1) return tnt_set_error(TNT_ERR_SHAPE, "PaddingMask: expected ids (T)");
    *(int64_t *)user = in.dim[0];
    *out = TNT_SHAPE(in.dim[0], in.dim[0]);
    return TNT_OK;
}

static tnt_status mask_forward(tnt_layer *l, int64_t batch, const float *x, float *y, bool training, void *user) {
    (void)l, (void)training;
    const int64_t T = *(int64_t *)user;
    for (int64_t b = 0; b < batch; b++)
        for (int64_t i = 0; i < T; i++)
            for (int64_t j = 0; j < T; j++) y[(b * T + i) * T + j] = x[b * T + j] != 0.0f ? 1.0f : 0.0f;
    return TNT_OK;
}

static tnt_layer *weightless(const char *cls, tnt_status (*build)(tnt_layer *, tnt_shape, tnt_shape *, void *),
                             tnt_status (*fwd)(tnt_layer *, int64_t, const float *, float *, bool, void *),
                             tnt_status (*bwd)(tnt_layer *, int64_t, const float *, const float *, const float *,
                                               float *, void *),
                             void *user, void (*destroy)(void *), const char *name) {
    if (!user) return NULL;
    tnt_custom_layer_def def = {.class_name = cls, .user = user, .build = build, .forward = fwd,
                                .backward = bwd, .destroy = destroy};
    tnt_layer *l = tnt_custom_layer(&def, name);
    if (!l) destroy(user);
    return l;
}

static tnt_layer *sinusoidal_position(const char *name) {
    return weightless("RelativePositionEmbedding", sin_build, sin_forward, sin_backward,
                      calloc(1, sizeof(sin_pos)), sin_pos_free, name);
}

/* x + dropout(y) (dropout skipped at rate 0). */
static tnt_ktensor residual(tnt_graph *g, tnt_ktensor x, tnt_ktensor y, float rate, const char *prefix) {
    char nm[96];
    if (rate > 0) {
        snprintf(nm, sizeof nm, "%s_dropout", prefix);
        y = tnt_call(g, tnt_dropout(rate, 0, nm), y);
    }
    snprintf(nm, sizeof nm, "%s_add", prefix);
    return tnt_call2(g, tnt_add(nm), x, y);
}

static tnt_ktensor layer_norm(tnt_graph *g, tnt_ktensor x, const char *prefix) {
    char nm[96];
    snprintf(nm, sizeof nm, "%s_norm", prefix);
    return tnt_call(g, tnt_layer_normalization(1e-6f, nm), x);
}

static tnt_ktensor attention(tnt_graph *g, const transformer_params *p, tnt_ktensor q, tnt_ktensor kv,
                             tnt_ktensor mask, bool causal, const char *prefix) {
    char nm[96];
    snprintf(nm, sizeof nm, "%s_attention", prefix);
    tnt_attention_opts o = {.name = nm, .no_bias = true, .dropout = p->attention_dropout};
    return tnt_call_attention(g, tnt_multi_head_attention(p->num_heads, p->hidden_size / p->num_heads, &o), q, kv,
                              (tnt_ktensor){-1}, mask, causal);
}

static tnt_ktensor ffn(tnt_graph *g, const transformer_params *p, tnt_ktensor x, const char *prefix) {
    char nm[96];
    snprintf(nm, sizeof nm, "%s_filter", prefix);
    x = tnt_call(g, tnt_dense(p->filter_size, &(tnt_layer_opts){.name = nm, .activation = TNT_ACT_RELU}), x);
    if (p->relu_dropout > 0) {
        snprintf(nm, sizeof nm, "%s_relu_dropout", prefix);
        x = tnt_call(g, tnt_dropout(p->relu_dropout, 0, nm), x);
    }
    snprintf(nm, sizeof nm, "%s_output", prefix);
    return tnt_call(g, tnt_dense(p->hidden_size, &(tnt_layer_opts){.name = nm}), x);
}

tnt_model *transformer_model(const transformer_params *p, int max_length, const char *name) {
    if (!p || max_length < 1 || p->vocab_size < 2 || p->hidden_size < 2 || p->num_heads < 1 ||
        p->hidden_size % p->num_heads || p->filter_size < 1 || p->num_hidden_layers < 0) {
        tnt_set_error(TNT_ERR_ARG, "transformer_model: bad parameters (sizes must be positive, hidden_size a "
                      "multiple of num_heads) or max_length %d", max_length);
        return NULL;
    }
    const int N = p->num_hidden_layers;
    char nm[32];
    tnt_model *m = NULL;
    tnt_layer *lin = NULL;
    tnt_graph *g = tnt_graph_new();
    if (!g) return NULL;
    shared_emb *se = calloc(1, sizeof *se);
    if (!se) goto fail;
    se->vocab = p->vocab_size, se->hidden = p->hidden_size, se->refs = 1;
    tnt_layer *emb = tnt_custom_layer(&(tnt_custom_layer_def){.class_name = "EmbeddingSharedWeights", .user = se,
                                                               .build = emb_build, .forward = emb_forward,
                                                               .backward = emb_backward,
                                                               .destroy = shared_release},
                                      "embedding_shared_weights");
    if (!emb) {
        free(se);
        goto fail;
    }
    se->refs++; /* the logits layer's reference, released by it (or below if it is not made) */
    lin = tnt_custom_layer(&(tnt_custom_layer_def){.class_name = "EmbeddingLinear", .user = se,
                                                               .build = lin_build, .forward = lin_forward,
                                                               .backward = lin_backward,
                                                               .destroy = shared_release},
                                      "presoftmax_linear");
    if (!lin) {
        shared_release(se);
        tnt_layer_free(emb);
        goto fail;
    }

    tnt_ktensor inputs = tnt_graph_input(g, TNT_SHAPE(max_length), "inputs");
    tnt_ktensor targets = tnt_graph_input(g, TNT_SHAPE(max_length), "targets");
    /* encoder */
    tnt_ktensor mask = tnt_call(g, weightless("PaddingMask", mask_build, mask_forward, ids_backward,
                                              malloc(sizeof(int64_t)), free, "padding_mask"), inputs);
    tnt_ktensor x = tnt_call(g, emb, inputs); /* consumes emb; called again for the targets */
    x = tnt_call(g, sinusoidal_position("encoder_position"), x);
    if (p->layer_postprocess_dropout > 0)
        x = tnt_call(g, tnt_dropout(p->layer_postprocess_dropout, 0, "encoder_input_dropout"), x);
    CHECK(x);
    CHECK(mask);
    for (int i = 0; i < N; i++) {
        snprintf(nm, sizeof nm, "encoder%d_self", i);
        tnt_ktensor y = layer_norm(g, x, nm);
        y = attention(g, p, y, y, mask, false, nm);
        x = residual(g, x, y, p->layer_postprocess_dropout, nm);
        snprintf(nm, sizeof nm, "encoder%d_ffn", i);
        y = ffn(g, p, layer_norm(g, x, nm), nm);
        x = residual(g, x, y, p->layer_postprocess_dropout, nm);
        CHECK(x);
    }
    tnt_ktensor enc = tnt_call(g, tnt_layer_normalization(1e-6f, "encoder_output_norm"), x);
    CHECK(enc);
    /* decoder */
    tnt_ktensor shifted = tnt_call(g, weightless("ShiftTargets", shift_build, shift_forward, ids_backward,
                                                 malloc(sizeof(int64_t)), free, "shift_targets"), targets);
    x = tnt_call(g, emb, shifted); /* the shared embedding's second call */
    x = tnt_call(g, sinusoidal_position("decoder_position"), x);
    if (p->layer_postprocess_dropout > 0)
        x = tnt_call(g, tnt_dropout(p->layer_postprocess_dropout, 0, "decoder_input_dropout"), x);
    CHECK(x);
    for (int i = 0; i < N; i++) {
        snprintf(nm, sizeof nm, "decoder%d_self", i);
        tnt_ktensor y = layer_norm(g, x, nm);
        y = attention(g, p, y, y, (tnt_ktensor){-1}, true, nm);
        x = residual(g, x, y, p->layer_postprocess_dropout, nm);
        snprintf(nm, sizeof nm, "decoder%d_encdec", i);
        y = attention(g, p, layer_norm(g, x, nm), enc, mask, false, nm);
        x = residual(g, x, y, p->layer_postprocess_dropout, nm);
        snprintf(nm, sizeof nm, "decoder%d_ffn", i);
        y = ffn(g, p, layer_norm(g, x, nm), nm);
        x = residual(g, x, y, p->layer_postprocess_dropout, nm);
        CHECK(x);
    }
    x = tnt_call(g, tnt_layer_normalization(1e-6f, "decoder_output_norm"), x);
    tnt_ktensor logits = tnt_call(g, lin, x);
    lin = NULL;
    CHECK(logits);
    tnt_ktensor ins[2] = {inputs, targets};
    m = tnt_functional(g, 2, ins, 1, &logits, name ? name : "transformer_v2");
fail:
    if (lin) tnt_layer_free(lin); /* not called: still ours */
    tnt_graph_free(g);
    return m;
}

/* splitmix64 and Box-Muller: a reproducible normal(0, std) fill */
static uint64_t splitmix(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

tnt_status transformer_init_weights(tnt_model *m, const transformer_params *p, uint64_t seed) {
    tnt_layer *l = tnt_model_get_layer(m, "embedding_shared_weights");
    if (!l) return TNT_ERR_ARG;
    float *w = tnt_layer_weight_value(l, 0);
    if (!w) return TNT_ERR_STATE;
    const int64_t n = (int64_t)p->vocab_size * p->hidden_size;
    const double std = 1.0 / sqrt((double)p->hidden_size);
    uint64_t st = seed ? seed : 42;
    for (int64_t i = 0; i < n; i += 2) {
        double u1 = ((double)(splitmix(&st) >> 11) + 1.0) * 0x1.0p-53, u2 = (double)(splitmix(&st) >> 11) * 0x1.0p-53;
        double r = sqrt(-2.0 * log(u1));
        w[i] = (float)(std * r * cos(2.0 * M_PI * u2));
        if (i + 1 < n) w[i + 1] = (float)(std * r * sin(2.0 * M_PI * u2));
    }
    return TNT_OK;
}

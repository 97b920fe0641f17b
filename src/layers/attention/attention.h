/* attention.h: what MultiHeadAttention's float32 code (attention.c) shares with its bf16 engine
 * for mixed_bfloat16 (attention_bf16.c): the configuration, the masks, softmax and dropout (both
 * engines run them in float32, on the same scores), and the weights by role. */
#ifndef TNT_ATTENTION_H
#define TNT_ATTENTION_H

#include "layers/layer.h"

/* the weights, in Keras's order (WT_, not W_: W_OK is <unistd.h>'s access() mode, which smpicc includes) */
enum { WT_QK, WT_QB, WT_KK, WT_KB, WT_VK, WT_VB, WT_OK, WT_OB, WT_COUNT };

typedef struct tnt__mha_cfg {
    int heads, key_dim, value_dim, output_dim;
    float dropout;
    bool use_bias;
    tnt_initializer kernel_init, bias_init;
    bool has_attention_mask, has_query_mask, has_value_mask, causal;
    /* from build */
    int64_t tq, tv, dq, dv, dk, out;
    int widx[WT_COUNT]; /* weight index of each role, -1 when absent (no bias) */
    uint16_t *w16;     /* bf16 engine: the four kernels in bf16, converted by each forward */
} tnt__mha_cfg;

/* How many mask inputs follow query, value and key. */
int tnt__mha_n_masks(const tnt__mha_cfg *c);
/* The optional mask inputs among xs, NULL where absent. */
void tnt__mha_mask_inputs(const tnt__mha_cfg *c, const float *const *xs, const float **am, const float **qm,
                          const float **vm);
/* The combined mask row for (b, t) into m (Tv) as 1/0; false when nothing is masked. */
bool tnt__mha_mask_row(const tnt__mha_cfg *c, const float *am, const float *qm, const float *vm, int64_t b,
                       int64_t t, float *m);
/* One row of the masked softmax in place: s (n) scores -> probabilities; m (n) 1/0 or NULL. */
void tnt__mha_softmax_row(float *s, const float *m, int64_t n);
/* pd (Tq, Tv) = dropout(p) of the (b, h) block; gb: b's index in the global batch. */
void tnt__mha_dropout_block(const tnt__mha_cfg *c, uint64_t seed, int64_t gb, int64_t h, const float *p, float *pd);
/* The value and gradient of the weight with a role (WT_QK ...), NULL when absent. */
const float *tnt__mha_wval(tnt_layer *l, int role);
float *tnt__mha_wgrad(tnt_layer *l, int role);

/* The bf16 engine: the layer contract's plan (also made for float32 layers, then empty). */
void *tnt__mha_plan_create(tnt_layer *l, int64_t batch);
void tnt__mha_plan_destroy(void *plan);
/* True for a bf16 plan; the functions below serve only those. */
bool tnt__mha_plan_bf16(const void *plan);
size_t tnt__mha_bf16_workspace_size(tnt_layer *l, void *plan, int64_t batch);
tnt_status tnt__mha_bf16_forward(tnt_layer *l, void *plan, const tnt__fwd_args *a);
tnt_status tnt__mha_bf16_backward(tnt_layer *l, void *plan, const tnt__bwd_args *a);

/* The device path (attention_gpu.c). */
extern const tnt__gpu_ops tnt__mha_gpu_ops;

#endif

/* attention.cu: MultiHeadAttention's softmax over the keys, forward with its masks and backward
 * through dropout, as layers/attention/attention.c (the products around it are cuBLAS's strided
 * batched GEMMs; the dropout of the probabilities is tnt_k_dropout over the (B, H, Tq, Tv) buffer
 * with base = the global sample offset times H Tq Tv, which is the CPU's drop_index).
 *
 * Contract (scores, p, g: (B, H, Tq, Tv); one block per row (b, h, t), any grid; blockDim a power
 * of two <= 1024):
 *   tnt_k_mha_softmax(float *s, const float *attention_mask, const float *query_mask,
 *                     const float *value_mask, i64 B, i64 H, i64 Tq, i64 Tv, int causal)
 *       in place: masked scores (any mask 0, or s > t when causal) get -1e9 added in float32, as
 *       Keras; then the softmax over s. Masks (1 attend, 0 masked; NULL: none): attention_mask
 *       (B, Tq, Tv), query_mask (B, Tq), value_mask (B, Tv)
 *   tnt_k_mha_softmax_bwd(const float *p, const float *pd, float *g, i64 rows, i64 Tv, float dscale)
 *       in place, g = dPd on entry: with dropout (pd, the dropped probabilities, not NULL) g = g
 *       dscale where pd != 0 or p == 0, else 0; then g = p (g - sum_s p g) (dS)
 */
#include "kmath.h"

KERNEL void tnt_k_mha_softmax(float *s, const float *attention_mask, const float *query_mask,
                              const float *value_mask, i64 B, i64 H, i64 Tq, i64 Tv, int causal) {
    SHARED float red[K_MAX_BLOCK];
    SHARED double redd[K_MAX_BLOCK];
    BLOCK_STRIDE(r, B * H * Tq) {
        const i64 t = r % Tq, b = r / Tq / H;
        float *sr = s + r * Tv;
        const int masked = attention_mask || query_mask || value_mask || (causal && t < Tv - 1);
        if (masked) {
            const int q_on = !query_mask || query_mask[b * Tq + t] != 0.0f;
            THREAD_STRIDE(j, Tv) {
                int on = q_on;
                if (attention_mask) on = on && attention_mask[(b * Tq + t) * Tv + j] != 0.0f;
                if (value_mask) on = on && value_mask[b * Tv + j] != 0.0f;
                if (causal) on = on && j <= t;
                if (!on) sr[j] = sr[j] + -1e9f;
            }
            SYNC();
        }
        float m = -K_INF;
        THREAD_STRIDE(j, Tv) m = k_fmaxf(m, sr[j]);
        m = block_max(red, m);
        double sum = 0.0;
        THREAD_STRIDE(j, Tv) {
            const float e = k_expf(sr[j] - m);
            sr[j] = e;
            sum += e;
        }
        const float inv = (float)(1.0 / block_sum_d(redd, sum));
        THREAD_STRIDE(j, Tv) sr[j] *= inv;
    }
}

KERNEL void tnt_k_mha_softmax_bwd(const float *p, const float *pd, float *g, i64 rows, i64 Tv, float dscale) {
    SHARED double redd[K_MAX_BLOCK];
    BLOCK_STRIDE(r, rows) {
        const float *pr = p + r * Tv;
        float *gr = g + r * Tv;
        if (pd) {
            const float *pdr = pd + r * Tv;
            THREAD_STRIDE(j, Tv) gr[j] = pdr[j] != 0.0f || pr[j] == 0.0f ? gr[j] * dscale : 0.0f;
        }
        double dot = 0.0;
        THREAD_STRIDE(j, Tv) dot += pr[j] * gr[j];
        const float d = (float)block_sum_d(redd, dot);
        THREAD_STRIDE(j, Tv) gr[j] = pr[j] * (gr[j] - d);
    }
}

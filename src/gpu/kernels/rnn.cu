/* rnn.cu: the cells of LSTM, GRU (reset_after true and false) and SimpleRNN, one time step at a
 * time, forward and backward, as layers/recurrent/rnn_common.c computes them (the same formulas,
 * the same activations from their outputs, the same order of operations). The GEMMs around them
 * (x W for all steps, p R per step, and backward's transposes) are cuBLAS's; the caller is
 * layers/recurrent/rnn_gpu.c, whose header comment gives the workspace layout.
 *
 * Buffers are batch-major and indexed by the input step t: z (B, T, gU) with g gates (LSTM i f c o,
 * GRU z r h, SimpleRNN 1), h, p, c, ac (B, T, U), rh (GRU reset_after (B, T, 3U): p R + b_rec;
 * reset_before (B, T, U): r p), carries dh, dc, dp (B, U). One thread per (b, u) of a step: every
 * gate of unit u of row b is that thread's. Steps of g (kargs.h tnt_k_rnn): t (this step), tprev
 * (the one before in processing order, -1 for the first: state zeros), tnext (-1 for the last).
 *
 * Contract (any grid and block; grid-stride over B U):
 *   tnt_k_rnn_init(tnt_k_rnn g, const float *h0, const float *rmask, float *p)
 *       initial states: p at the first step t = h0 (B, U) (times rmask), before its matmul
 *   tnt_k_rnn_fwd(tnt_k_rnn g, float *z, const float *rh, float *h, float *p, float *c, float *ac,
 *                 float *y, const float *rmask, const float *h0, const float *c0)
 *       step t's cell from z = x W + b_in + p R (GRU reset_after: rh = p R + b_rec; reset_before: z
 *       and r already activated by tnt_k_rnn_gru_rp and z_h's matmul read r p): z becomes the gate
 *       values, h (and c, ac = act(c)) step t's state; y row b (stride g.ld_y, NULL: none) = h;
 *       p at step tnext = h (times rmask (B, U) with recurrent dropout, NULL: none). The state
 *       before the first step (tprev -1) is h0, c0 (B, U) with g.has_init, else zeros (p at t = 0).
 *       A row whose mask (B, T) is 0 at t (NULL: none) keeps the state before (h, c) and outputs
 *       it, or zeros with g.zero_output
 *   tnt_k_rnn_gru_rp(tnt_k_rnn g, float *z, const float *p, float *rp)
 *       GRU reset_before, between p R_zr and (r p) R_h: z and r = rec_act(.), rp = r p (step t)
 *   tnt_k_rnn_bwd(tnt_k_rnn g, float *z, float *rh, const float *h, const float *c, const float *ac,
 *                 float *dh, float *dc, const float *dp, const float *rmask, const float *dy,
 *                 const float *h0, const float *c0, const float *mask)
 *       step t's gate gradients in place of its gate values (z, and rh for reset_after), from
 *       dh = dh + dp rmask (dp NULL: the last step, nothing to add; rmask NULL: 1) + dy (row b at
 *       stride g.ld_y; NULL: none); dh and dc become what passes to the step before outside the
 *       recurrent matmul (LSTM, SimpleRNN: 0; GRU: dh z; LSTM's dc: dc f); the state before the
 *       first step as in tnt_k_rnn_fwd; a masked row's gate gradients are 0 and dh, dc pass on (dy
 *       not added with g.zero_output)
 *   tnt_k_rnn_carry(const float *dh, const float *dp, const float *rmask, float *out, i64 n)
 *       out = dh + dp rmask (rmask NULL: 1): the initial state's gradient after the first step
 *   tnt_k_rnn_gru_rp_bwd(tnt_k_rnn g, float *z, const float *p, float *drp)
 *       GRU reset_before, after drp (B, U) = d pre(hh) R_h^T: dr = drp p rec_act'(r), drp *= r
 *   tnt_k_rnn_drop_in(const float *x, const float *mask, float *y, i64 B, i64 T, i64 I)
 *       y (B, T, I) = x (B, T, I) times mask (B, I) over every step (y may be x): input dropout,
 *       and its gradient on dx
 *   Bidirectional (layers/recurrent/bidirectional.c) over yf, yb (B, S, U) (S = T with
 *   return_sequences, else 1), the backward layer's in its processing order: with reverse its step
 *   S - 1 - s meets the forward layer's step s. mode: concat 0 (y (B, S, 2U)), sum 1, mul 2, ave 3
 *   (y (B, S, U)), as tnt_merge_mode.
 *   tnt_k_bidi_merge(const float *yf, const float *yb, float *y, i64 B, i64 S, i64 U, int mode,
 *                    int reverse)
 *   tnt_k_bidi_merge_bwd(const float *dy, const float *yf, const float *yb, float *dyf, float *dyb,
 *                        i64 B, i64 S, i64 U, int mode, int reverse)
 *       dyf, dyb (B, S, U) from dy, dyb in the backward layer's processing order
 *   The sequence mask the recurrent layers read (model/graph.c's hidden mask layer):
 *   tnt_k_make_mask(const float *x, float *y, i64 n, i64 group, float mask_value)
 *       y[i] = 1 where one of x[i group .. (i + 1) group) differs from mask_value, else 0
 *       (Embedding mask_zero: group 1, mask_value 0; Masking: group = the features)
 *   RepeatVector (layers/reshaping/repeat_vector.c; the bridge of encoder-decoder RNNs):
 *   tnt_k_repeat_fwd(const float *x, float *y, i64 B, i64 n, i64 F)     y (B, n, F) = x (B, F) n times
 *   tnt_k_repeat_bwd(const float *dy, float *dx, i64 B, i64 n, i64 F)
 *       dx (B, F) = the sum of dy's n copies, in copy order (the CPU's)
 */
#include "kargs.h"
#include "kmath.h"

/* rnn_common.c's activations from the CPU's own formulas: sigmoid from e = exp(-|x|), tanh from
 * e = exp(-2|x|) and its Taylor series below |x| = 1/16 (kmath.h k_expf is the CPU's exp) */
DEV float rnn_act(int a, float x) {
    switch (a) {
    case K_RNN_TANH: {
        const float ax = k_fabsf(x), x2 = x * x;
        if (ax < 0.0625f) return x + x * x2 * (-1.0f / 3.0f + x2 * (2.0f / 15.0f + x2 * (-17.0f / 315.0f)));
        const float e = k_expf(-2.0f * ax), t = (1.0f - e) / (1.0f + e);
        return x < 0.0f ? -t : t;
    }
    case K_RNN_SIGMOID: {
        const float e = k_expf(-k_fabsf(x)), s = 1.0f / (1.0f + e);
        return x < 0.0f ? e * s : s;
    }
    case K_RNN_HARD_SIGMOID: return k_fminf(k_fmaxf(0.2f * x + 0.5f, 0.0f), 1.0f);
    case K_RNN_HARD_SIGMOID_V3: return k_fminf(k_fmaxf(x + 3.0f, 0.0f), 6.0f) / 6.0f;
    case K_RNN_RELU: return k_fmaxf(x, 0.0f);
    default: return x;
    }
}

/* act'(x) from y = act(x): rnn_common.h tnt__rnn_act_grad */
DEV float rnn_act_grad(int a, float y) {
    switch (a) {
    case K_RNN_TANH: return 1.0f - y * y;
    case K_RNN_SIGMOID: return y * (1.0f - y);
    case K_RNN_HARD_SIGMOID: return y > 0.0f && y < 1.0f ? 0.2f : 0.0f;
    case K_RNN_HARD_SIGMOID_V3: return y > 0.0f && y < 1.0f ? 1.0f / 6.0f : 0.0f;
    case K_RNN_RELU: return y > 0.0f ? 1.0f : 0.0f;
    default: return 1.0f;
    }
}

KERNEL void tnt_k_rnn_init(tnt_k_rnn g, const float *h0, const float *rmask, float *p) {
    GRID_STRIDE(i, g.B * g.U) {
        const i64 b = i / g.U, u = i - b * g.U;
        p[(b * g.T + g.t) * g.U + u] = rmask ? h0[i] * rmask[i] : h0[i];
    }
}

KERNEL void tnt_k_rnn_fwd(tnt_k_rnn g, float *z, const float *rh, float *h, float *p, float *c, float *ac, float *y,
                          const float *rmask, const float *h0, const float *c0, const float *mask) {
    const i64 U = g.U, T = g.T, gu = (g.cell == K_RNN_LSTM ? 4 : g.cell == K_RNN_GRU ? 3 : 1) * U;
    GRID_STRIDE(i, g.B * U) {
        const i64 b = i / U, u = i - b * U;
        float *zr = z + (b * T + g.t) * gu;
        const i64 row = (b * T + g.t) * U, prev = (b * T + g.tprev) * U;
        const float hp = g.tprev >= 0 ? h[prev + u] : g.has_init ? h0[i] : 0.0f;
        float hn;
        const int masked = mask && mask[b * T + g.t] == 0.0f;
        if (masked) {
            hn = hp;
            if (g.cell == K_RNN_LSTM) c[row + u] = g.tprev >= 0 ? c[prev + u] : g.has_init ? c0[i] : 0.0f;
        } else if (g.cell == K_RNN_SIMPLE) {
            hn = zr[u] = rnn_act(g.act, zr[u]);
        } else if (g.cell == K_RNN_LSTM) {
            const float cp = g.tprev >= 0 ? c[prev + u] : g.has_init ? c0[i] : 0.0f;
            const float ig = zr[u] = rnn_act(g.rec_act, zr[u]);
            const float fg = zr[U + u] = rnn_act(g.rec_act, zr[U + u]);
            const float cg = zr[2 * U + u] = rnn_act(g.act, zr[2 * U + u]);
            const float og = zr[3 * U + u] = rnn_act(g.rec_act, zr[3 * U + u]);
            const float cn = c[row + u] = fg * cp + ig * cg;
            const float a = ac[row + u] = rnn_act(g.act, cn);
            hn = og * a;
        } else {
            if (g.reset_after) {
                const float *rr = rh + (b * T + g.t) * gu;
                zr[u] = rnn_act(g.rec_act, zr[u] + rr[u]);
                zr[U + u] = rnn_act(g.rec_act, zr[U + u] + rr[U + u]);
                zr[2 * U + u] = zr[2 * U + u] + zr[U + u] * rr[2 * U + u];
            }
            const float hh = zr[2 * U + u] = rnn_act(g.act, zr[2 * U + u]);
            hn = zr[u] * hp + (1.0f - zr[u]) * hh;
        }
        h[row + u] = hn;
        if (y) y[b * g.ld_y + u] = masked && g.zero_output ? 0.0f : hn;
        if (g.tprev < 0 && !g.has_init) p[row + u] = 0.0f;
        if (g.tnext >= 0) p[(b * T + g.tnext) * U + u] = rmask ? hn * rmask[i] : hn;
    }
}

KERNEL void tnt_k_rnn_gru_rp(tnt_k_rnn g, float *z, const float *p, float *rp) {
    const i64 U = g.U, T = g.T;
    GRID_STRIDE(i, g.B * U) {
        const i64 b = i / U, u = i - b * U, row = (b * T + g.t) * U;
        float *zr = z + (b * T + g.t) * 3 * U;
        zr[u] = rnn_act(g.rec_act, zr[u]);
        zr[U + u] = rnn_act(g.rec_act, zr[U + u]);
        rp[row + u] = zr[U + u] * (g.tprev >= 0 || g.has_init ? p[row + u] : 0.0f); /* else not yet written */
    }
}

KERNEL void tnt_k_rnn_bwd(tnt_k_rnn g, float *z, float *rh, const float *h, const float *c, const float *ac, float *dh,
                          float *dc, const float *dp, const float *rmask, const float *dy, const float *h0,
                          const float *c0, const float *mask) {
    const i64 U = g.U, T = g.T, gu = (g.cell == K_RNN_LSTM ? 4 : g.cell == K_RNN_GRU ? 3 : 1) * U;
    GRID_STRIDE(i, g.B * U) {
        const i64 b = i / U, u = i - b * U;
        float *zr = z + (b * T + g.t) * gu;
        const i64 row = (b * T + g.t) * U, prev = (b * T + g.tprev) * U;
        float d = dh[i];
        if (dp) d = d + dp[i] * (rmask ? rmask[i] : 1.0f);
        const int masked = mask && mask[b * T + g.t] == 0.0f;
        if (dy && !(masked && g.zero_output)) d = d + dy[b * g.ld_y + u];
        if (masked) { /* the state passed through: no gate gradient */
            for (i64 k = 0; k < gu; k += U) zr[k + u] = 0.0f;
            if (g.cell == K_RNN_GRU && g.reset_after)
                for (i64 k = 0; k < gu; k += U) rh[(b * T + g.t) * gu + k + u] = 0.0f;
            dh[i] = d;
        } else if (g.cell == K_RNN_SIMPLE) {
            zr[u] = d * rnn_act_grad(g.act, zr[u]);
            dh[i] = 0.0f;
        } else if (g.cell == K_RNN_LSTM) {
            const float ig = zr[u], fg = zr[U + u], cg = zr[2 * U + u], og = zr[3 * U + u], a = ac[row + u];
            const float cp = g.tprev >= 0 ? c[prev + u] : g.has_init ? c0[i] : 0.0f;
            const float dct = dc[i] + d * og * rnn_act_grad(g.act, a);
            zr[3 * U + u] = d * a * rnn_act_grad(g.rec_act, og);
            zr[u] = dct * cg * rnn_act_grad(g.rec_act, ig);
            zr[U + u] = dct * cp * rnn_act_grad(g.rec_act, fg);
            zr[2 * U + u] = dct * ig * rnn_act_grad(g.act, cg);
            dc[i] = dct * fg;
            dh[i] = 0.0f;
        } else {
            const float zz = zr[u], hh = zr[2 * U + u], hp = g.tprev >= 0 ? h[prev + u] : g.has_init ? h0[i] : 0.0f;
            const float da = zr[2 * U + u] = d * (1.0f - zz) * rnn_act_grad(g.act, hh); /* d pre(hh) */
            zr[u] = d * (hp - hh) * rnn_act_grad(g.rec_act, zz);
            dh[i] = d * zz;
            if (g.reset_after) {
                float *rr = rh + (b * T + g.t) * gu;
                const float r = zr[U + u];
                zr[U + u] = da * rr[2 * U + u] * rnn_act_grad(g.rec_act, r);
                rr[u] = zr[u], rr[U + u] = zr[U + u], rr[2 * U + u] = da * r;
            }
        }
    }
}

KERNEL void tnt_k_rnn_carry(const float *dh, const float *dp, const float *rmask, float *out, i64 n) {
    GRID_STRIDE(i, n) out[i] = dh[i] + dp[i] * (rmask ? rmask[i] : 1.0f);
}

KERNEL void tnt_k_rnn_gru_rp_bwd(tnt_k_rnn g, float *z, const float *p, float *drp) {
    const i64 U = g.U, T = g.T;
    GRID_STRIDE(i, g.B * U) {
        const i64 b = i / U, u = i - b * U;
        float *zr = z + (b * T + g.t) * 3 * U;
        const float r = zr[U + u];
        zr[U + u] = drp[i] * p[(b * T + g.t) * U + u] * rnn_act_grad(g.rec_act, r);
        drp[i] = drp[i] * r;
    }
}

KERNEL void tnt_k_rnn_drop_in(const float *x, const float *mask, float *y, i64 B, i64 T, i64 I) {
    GRID_STRIDE(i, B * T * I) {
        const i64 b = i / (T * I), k = i % I;
        y[i] = x[i] * mask[b * I + k];
    }
}

KERNEL void tnt_k_bidi_merge(const float *yf, const float *yb, float *y, i64 B, i64 S, i64 U, int mode, int reverse) {
    GRID_STRIDE(i, B * S * U) {
        const i64 r = i / U, u = i - r * U, b = r / S, s = r - b * S;
        const float f = yf[i], g = yb[(b * S + (reverse ? S - 1 - s : s)) * U + u];
        if (mode == 0) y[r * 2 * U + u] = f, y[r * 2 * U + U + u] = g;
        else if (mode == 1) y[i] = f + g;
        else if (mode == 2) y[i] = f * g;
        else y[i] = 0.5f * (f + g);
    }
}

KERNEL void tnt_k_bidi_merge_bwd(const float *dy, const float *yf, const float *yb, float *dyf, float *dyb, i64 B, i64 S,
                                 i64 U, int mode, int reverse) {
    GRID_STRIDE(i, B * S * U) {
        const i64 r = i / U, u = i - r * U, b = r / S, s = r - b * S, j = (b * S + (reverse ? S - 1 - s : s)) * U + u;
        if (mode == 0) dyf[i] = dy[r * 2 * U + u], dyb[j] = dy[r * 2 * U + U + u];
        else if (mode == 1) dyf[i] = dyb[j] = dy[i];
        else if (mode == 2) dyf[i] = dy[i] * yb[j], dyb[j] = dy[i] * yf[i];
        else dyf[i] = dyb[j] = 0.5f * dy[i];
    }
}

KERNEL void tnt_k_repeat_fwd(const float *x, float *y, i64 B, i64 n, i64 F) {
    GRID_STRIDE(i, B * n * F) {
        const i64 k = i % F, b = i / (n * F);
        y[i] = x[b * F + k];
    }
}

KERNEL void tnt_k_repeat_bwd(const float *dy, float *dx, i64 B, i64 n, i64 F) {
    GRID_STRIDE(i, B * F) {
        const i64 b = i / F, k = i - b * F;
        const float *d = dy + b * n * F + k;
        float s = d[0];
        for (i64 r = 1; r < n; r++) s = s + d[r * F];
        dx[i] = s;
    }
}

KERNEL void tnt_k_make_mask(const float *x, float *y, i64 n, i64 group, float mask_value) {
    GRID_STRIDE(i, n) {
        float kept = 0.0f;
        for (i64 f = 0; f < group; f++)
            if (x[i * group + f] != mask_value) kept = 1.0f;
        y[i] = kept;
    }
}

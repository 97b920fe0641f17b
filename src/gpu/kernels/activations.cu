/* activations.cu: the Keras activations of kernels/activation.c and activation_c.c, forward and
 * backward, with the same formulas (the oneDNN ones as oneDNN defines them: relu and leaky relu,
 * sigmoid, tanh and elu backward from the output y; gelu (erf), swish, softplus and the plain-C
 * ones backward from the input x).
 *
 * Contract (act: the tnt_activation value, K_ACT_* below; alpha: the layer's alpha, 0 for the
 * default as tnt__act_default_alpha: leaky relu 0.2, elu 1; relu ignores it, as the CPU's):
 *   tnt_k_act_fwd(int act, float alpha, const float *x, float *y, i64 n)      elementwise y = f(x);
 *       y may be x. Not for softmax, log_softmax, sparsemax (row kernels below).
 *   tnt_k_act_bwd(int act, float alpha, const float *x, const float *y, const float *dy, float *dx, i64 n)
 *       dx = dy f'(.); reads x or y as tnt__act_backward_needs_src says (the other may be NULL);
 *       dx may be dy.
 *   tnt_k_add_act(const float *a, const float *b, float *y, int act, float alpha, i64 n)
 *       y = f(a + b) (y may be a or b): Add with its folded activation in one pass; bitwise
 *       tnt_k_add then tnt_k_act_fwd
 *   tnt_k_act_bwd_y2(int act, float alpha, const float *y, const float *dy, float *dx0, float *dx1, i64 n)
 *       dx0 = dx1 = dy f'(.) for an activation whose gradient reads y only (relu, leaky_relu,
 *       sigmoid, tanh, elu); dx1 NULL: one output. Add's backward: two inputs' gradients in one
 *       pass; bitwise tnt_k_act_bwd
 *   tnt_k_bias_act_fwd(float *pre, const float *bias, float *y, int act, float alpha, i64 rows, i64 cols)
 *       Dense's and Conv's epilogue in one pass: pre (rows, cols) += bias (cols; NULL: none), then
 *       y = f(pre) elementwise (y may be pre when the pre-activation is not kept); bitwise
 *       tnt_k_bias_add then tnt_k_act_fwd
 *   The activation layers with parameters (layers/activations/advanced_activations.c, the same
 *   formulas; kind: 0 ReLU, 1 LeakyReLU, 2 ELU, 3 ThresholdedReLU):
 *   tnt_k_elt_fwd(const float *x, float *y, i64 n, int kind, float max_value, float slope,
 *                 float threshold, float alpha)
 *   tnt_k_elt_bwd(const float *x, const float *dy, float *dx, i64 n, same parameters)   dx = dy f'(x)
 *   Row kernels over x (rows, cols), one block per row (any grid), blockDim <= 1024:
 *   tnt_k_softmax_fwd(const float *x, float *y, i64 rows, i64 cols)
 *   tnt_k_softmax_bwd(const float *y, const float *dy, float *dx, i64 rows, i64 cols)
 *       dx = y (dy - sum_j dy_j y_j)
 *   tnt_k_log_softmax_fwd(const float *x, float *y, i64 rows, i64 cols)     y = x - max - log(sum exp)
 *   tnt_k_log_softmax_bwd(const float *y, const float *dy, float *dx, i64 rows, i64 cols)
 *       dx = dy - exp(y) sum_j dy_j
 *   tnt_k_sparsemax_fwd(const float *x, float *y, i64 rows, i64 cols)   one thread per row, O(cols^2)
 *   tnt_k_sparsemax_bwd(const float *y, const float *dy, float *dx, i64 rows, i64 cols)  one thread per row
 */
#include "kmath.h"

enum {
    K_ACT_LINEAR, K_ACT_RELU, K_ACT_SIGMOID, K_ACT_TANH, K_ACT_SOFTMAX, K_ACT_ELU, K_ACT_SELU, K_ACT_GELU,
    K_ACT_SWISH, K_ACT_SOFTPLUS, K_ACT_LEAKY_RELU, K_ACT_SOFTSIGN, K_ACT_HARD_SIGMOID, K_ACT_HARD_SIGMOID_V3,
    K_ACT_HARD_SILU, K_ACT_EXPONENTIAL, K_ACT_RELU6, K_ACT_MISH, K_ACT_LOG_SOFTMAX, K_ACT_CELU, K_ACT_HARD_TANH,
    K_ACT_TANH_SHRINK, K_ACT_SOFT_SHRINK, K_ACT_HARD_SHRINK, K_ACT_SQUAREPLUS, K_ACT_LOG_SIGMOID,
    K_ACT_SPARSE_PLUS, K_ACT_SPARSE_SIGMOID, K_ACT_SPARSEMAX, K_ACT_COUNT
};

#define K_SELU_ALPHA 1.67326324235437728f
#define K_SELU_SCALE 1.05070098735548049f

DEV float k_act_alpha(int act, float alpha) {
    if (alpha != 0.0f) return alpha;
    return act == K_ACT_LEAKY_RELU ? 0.2f : act == K_ACT_ELU ? 1.0f : 0.0f;
}

DEV float k_clampf(float x, float lo, float hi) { return k_fminf(k_fmaxf(x, lo), hi); }

DEV float k_gelu(float x) {
    const double xd = x;
    return (float)(0.5 * xd * (1.0 + k_erf(xd * 0.70710678118654752440)));
}
DEV float k_gelu_grad(float x) { /* Phi(x) + x phi(x) */
    const double xd = x;
    const double cdf = 0.5 * (1.0 + k_erf(xd * 0.70710678118654752440));
    return (float)(cdf + xd * k_exp_d(-0.5 * xd * xd) * 0.39894228040143267794);
}

DEV float k_act1(int act, float a, float x) {
    switch (act) {
    case K_ACT_RELU: return x > 0.0f ? x : 0.0f; /* alpha ignored, as the CPU's relu */
    case K_ACT_LEAKY_RELU: return x > 0.0f ? x : x * a;
    case K_ACT_SIGMOID: return k_sigmoidf(x);
    case K_ACT_TANH: return k_tanhf(x);
    case K_ACT_ELU: return x > 0.0f ? x : a * k_expm1f(x);
    case K_ACT_GELU: return k_gelu(x);
    case K_ACT_SWISH: return x * k_sigmoidf(x);
    case K_ACT_SOFTPLUS: return k_softplusf(x);
    case K_ACT_SELU: return x > 0.0f ? K_SELU_SCALE * x : K_SELU_SCALE * K_SELU_ALPHA * k_expm1f(x);
    case K_ACT_SOFTSIGN: return x / (1.0f + k_fabsf(x));
    case K_ACT_HARD_SIGMOID: return k_clampf(0.2f * x + 0.5f, 0.0f, 1.0f);
    case K_ACT_HARD_SIGMOID_V3: return k_clampf(x + 3.0f, 0.0f, 6.0f) / 6.0f;
    case K_ACT_HARD_SILU: return x * (k_clampf(x + 3.0f, 0.0f, 6.0f) / 6.0f);
    case K_ACT_EXPONENTIAL: return k_expf(x);
    case K_ACT_RELU6: return k_clampf(x, 0.0f, 6.0f);
    case K_ACT_MISH: return x * k_tanhf(k_softplusf(x));
    case K_ACT_CELU: return k_fmaxf(x, 0.0f) + k_expm1f(k_fminf(x, 0.0f));
    case K_ACT_HARD_TANH: return k_clampf(x, -1.0f, 1.0f);
    case K_ACT_TANH_SHRINK: return x - k_tanhf(x);
    case K_ACT_SOFT_SHRINK: return x > 0.5f ? x - 0.5f : x < -0.5f ? x + 0.5f : 0.0f;
    case K_ACT_HARD_SHRINK: return k_fabsf(x) > 0.5f ? x : 0.0f;
    case K_ACT_SQUAREPLUS: return 0.5f * (x + k_sqrtf(x * x + 4.0f));
    case K_ACT_LOG_SIGMOID: return -k_softplusf(-x);
    case K_ACT_SPARSE_PLUS: return x <= -1.0f ? 0.0f : x < 1.0f ? 0.25f * (x + 1.0f) * (x + 1.0f) : x;
    case K_ACT_SPARSE_SIGMOID: return x <= -1.0f ? 0.0f : x >= 1.0f ? 1.0f : 0.5f * (x + 1.0f);
    default: return x; /* linear */
    }
}

/* dx for one element: dy f'(.) from x or y, as the CPU engine computes it */
DEV float k_act_grad1(int act, float a, float x, float y, float dy) {
    switch (act) {
    case K_ACT_RELU: return y > 0.0f ? dy : 0.0f;
    case K_ACT_LEAKY_RELU: return y > 0.0f ? dy : dy * a;
    case K_ACT_SIGMOID: return dy * y * (1.0f - y);
    case K_ACT_TANH: return dy * (1.0f - y * y);
    case K_ACT_ELU: return y > 0.0f ? dy : dy * (y + a);
    case K_ACT_GELU: return dy * k_gelu_grad(x);
    case K_ACT_SWISH: {
        const float s = k_sigmoidf(x);
        return dy * (s + x * s * (1.0f - s));
    }
    case K_ACT_SOFTPLUS: return dy * k_sigmoidf(x);
    case K_ACT_SELU: return dy * (x > 0.0f ? K_SELU_SCALE : K_SELU_SCALE * K_SELU_ALPHA * k_expf(x));
    case K_ACT_SOFTSIGN: {
        const float d = 1.0f + k_fabsf(x);
        return dy * (1.0f / (d * d));
    }
    case K_ACT_HARD_SIGMOID: return dy * (x > -2.5f && x < 2.5f ? 0.2f : 0.0f);
    case K_ACT_HARD_SIGMOID_V3: return dy * (x > -3.0f && x < 3.0f ? 1.0f / 6.0f : 0.0f);
    case K_ACT_HARD_SILU: return dy * (x <= -3.0f ? 0.0f : x >= 3.0f ? 1.0f : (2.0f * x + 3.0f) / 6.0f);
    case K_ACT_EXPONENTIAL: return dy * k_expf(x);
    case K_ACT_RELU6: return dy * (x > 0.0f && x < 6.0f ? 1.0f : 0.0f);
    case K_ACT_MISH: {
        const float t = k_tanhf(k_softplusf(x));
        return dy * (t + x * (1.0f - t * t) * k_sigmoidf(x));
    }
    case K_ACT_CELU: return dy * (x > 0.0f ? 1.0f : k_expf(x));
    case K_ACT_HARD_TANH: return dy * (x > -1.0f && x < 1.0f ? 1.0f : 0.0f);
    case K_ACT_TANH_SHRINK: {
        const float t = k_tanhf(x);
        return dy * (t * t);
    }
    case K_ACT_SOFT_SHRINK:
    case K_ACT_HARD_SHRINK: return dy * (k_fabsf(x) > 0.5f ? 1.0f : 0.0f);
    case K_ACT_SQUAREPLUS: return dy * (0.5f * (1.0f + x / k_sqrtf(x * x + 4.0f)));
    case K_ACT_LOG_SIGMOID: return dy * k_sigmoidf(-x);
    case K_ACT_SPARSE_PLUS: return dy * (x <= -1.0f ? 0.0f : x < 1.0f ? 0.5f * (x + 1.0f) : 1.0f);
    case K_ACT_SPARSE_SIGMOID: return dy * (x > -1.0f && x < 1.0f ? 0.5f : 0.0f);
    default: return dy; /* linear */
    }
}

KERNEL void tnt_k_act_fwd(int act, float alpha, const float *x, float *y, i64 n) {
    const float a = k_act_alpha(act, alpha);
    GRID_STRIDE(i, n) y[i] = k_act1(act, a, x[i]);
}

KERNEL void tnt_k_bias_act_fwd(float *pre, const float *bias, float *y, int act, float alpha, i64 rows, i64 cols) {
    const float a = k_act_alpha(act, alpha);
    GRID_STRIDE_COLS(i, c, rows, cols) {
        const float v = bias ? pre[i] + bias[c] : pre[i];
        pre[i] = v;
        y[i] = k_act1(act, a, v);
    }
}

KERNEL void tnt_k_add_act(const float *a, const float *b, float *y, int act, float alpha, i64 n) {
    const float al = k_act_alpha(act, alpha);
    GRID_STRIDE(i, n) y[i] = k_act1(act, al, a[i] + b[i]);
}

KERNEL void tnt_k_act_bwd_y2(int act, float alpha, const float *y, const float *dy, float *dx0, float *dx1, i64 n) {
    const float a = k_act_alpha(act, alpha);
    GRID_STRIDE(i, n) {
        const float g = k_act_grad1(act, a, 0.0f, y[i], dy[i]);
        dx0[i] = g;
        if (dx1) dx1[i] = g;
    }
}

KERNEL void tnt_k_act_bwd(int act, float alpha, const float *x, const float *y, const float *dy, float *dx, i64 n) {
    const float a = k_act_alpha(act, alpha);
    const int from_y = act == K_ACT_RELU || act == K_ACT_LEAKY_RELU || act == K_ACT_SIGMOID || act == K_ACT_TANH ||
                       act == K_ACT_ELU;
    GRID_STRIDE(i, n) dx[i] = k_act_grad1(act, a, from_y ? 0.0f : x[i], from_y ? y[i] : 0.0f, dy[i]);
}

KERNEL void tnt_k_softmax_fwd(const float *x, float *y, i64 rows, i64 cols) {
    SHARED float red[K_MAX_BLOCK];
    SHARED double redd[K_MAX_BLOCK];
    BLOCK_STRIDE(r, rows) {
        const float *xr = x + r * cols;
        float *yr = y + r * cols;
        float m = -K_INF;
        THREAD_STRIDE(j, cols) m = k_fmaxf(m, xr[j]);
        m = block_max(red, m);
        double s = 0.0; /* in double: long rows keep float's precision whatever the block size */
        THREAD_STRIDE(j, cols) {
            const float e = k_expf(xr[j] - m);
            yr[j] = e;
            s += e;
        }
        const float inv = (float)(1.0 / block_sum_d(redd, s));
        THREAD_STRIDE(j, cols) yr[j] *= inv;
    }
}

KERNEL void tnt_k_softmax_bwd(const float *y, const float *dy, float *dx, i64 rows, i64 cols) {
    SHARED double red[K_MAX_BLOCK];
    BLOCK_STRIDE(r, rows) {
        const float *yr = y + r * cols, *dyr = dy + r * cols;
        float *dxr = dx + r * cols;
        double sd = 0.0;
        THREAD_STRIDE(j, cols) sd += dyr[j] * yr[j];
        const float s = (float)block_sum_d(red, sd);
        THREAD_STRIDE(j, cols) dxr[j] = yr[j] * (dyr[j] - s);
    }
}

KERNEL void tnt_k_log_softmax_fwd(const float *x, float *y, i64 rows, i64 cols) {
    SHARED float redf[K_MAX_BLOCK];
    SHARED double red[K_MAX_BLOCK];
    BLOCK_STRIDE(r, rows) {
        const float *xr = x + r * cols;
        float *yr = y + r * cols;
        float m = -K_INF;
        THREAD_STRIDE(j, cols) m = k_fmaxf(m, xr[j]);
        m = block_max(redf, m);
        double s = 0.0;
        THREAD_STRIDE(j, cols) s += (double)k_expf(xr[j] - m);
        s = block_sum_d(red, s);
        const float lse = m + k_logf((float)s);
        THREAD_STRIDE(j, cols) yr[j] = xr[j] - lse;
    }
}

KERNEL void tnt_k_log_softmax_bwd(const float *y, const float *dy, float *dx, i64 rows, i64 cols) {
    SHARED double red[K_MAX_BLOCK];
    BLOCK_STRIDE(r, rows) {
        const float *yr = y + r * cols, *dyr = dy + r * cols;
        float *dxr = dx + r * cols;
        double s = 0.0;
        THREAD_STRIDE(j, cols) s += dyr[j];
        const float sf = (float)block_sum_d(red, s);
        THREAD_STRIDE(j, cols) dxr[j] = dyr[j] - k_expf(yr[j]) * sf;
    }
}

/* Sparsemax (Martins & Astudillo 2016): x_j is in the support when 1 + k_j x_j > s_j, with k_j and
 * s_j the count and sum of the values >= x_j (ties counted as the sorted order would, before j);
 * tau = (sum of the support - 1) / |support|. The CPU sorts; this counts, same support and sums
 * in double. */
KERNEL void tnt_k_sparsemax_fwd(const float *x, float *y, i64 rows, i64 cols) {
    GRID_STRIDE(r, rows) {
        const float *xr = x + r * cols;
        float *yr = y + r * cols;
        double sum = 0.0;
        i64 k = 0;
        for (i64 j = 0; j < cols; j++) {
            i64 kj = 0;
            double sj = 0.0;
            for (i64 i = 0; i < cols; i++)
                if (xr[i] > xr[j] || (xr[i] == xr[j] && i <= j)) kj++, sj += xr[i];
            if (1.0 + (double)kj * xr[j] > sj) k++, sum += xr[j];
        }
        const float tau = (float)((sum - 1.0) / (double)(k ? k : 1));
        for (i64 j = 0; j < cols; j++) yr[j] = k_fmaxf(xr[j] - tau, 0.0f);
    }
}

KERNEL void tnt_k_sparsemax_bwd(const float *y, const float *dy, float *dx, i64 rows, i64 cols) {
    GRID_STRIDE(r, rows) {
        const float *yr = y + r * cols, *dyr = dy + r * cols;
        float *dxr = dx + r * cols;
        double s = 0.0;
        i64 k = 0;
        for (i64 j = 0; j < cols; j++)
            if (yr[j] > 0.0f) s += dyr[j], k++;
        const float mean = k ? (float)(s / (double)k) : 0.0f;
        for (i64 j = 0; j < cols; j++) dxr[j] = yr[j] > 0.0f ? dyr[j] - mean : 0.0f;
    }
}

/* advanced_activations.c's relu_f, elt_f and their derivatives */
DEV float k_elt_f(int kind, float x, float max_value, float slope, float threshold, float alpha) {
    if (kind == 0) {
        const float pos = k_fminf(k_fmaxf(x > threshold ? x : 0.0f, 0.0f), max_value);
        return pos - slope * k_fmaxf(threshold - x, 0.0f);
    }
    if (kind == 1) return x > 0.0f ? x : slope * x;
    if (kind == 2) return x > 0.0f ? x : alpha * k_expm1f(x);
    return x > threshold ? x : 0.0f;
}

DEV float k_elt_df(int kind, float x, float max_value, float slope, float threshold, float alpha) {
    if (kind == 0) return (x > threshold && x > 0.0f && x <= max_value ? 1.0f : 0.0f) + (x < threshold ? slope : 0.0f);
    if (kind == 1) return x > 0.0f ? 1.0f : slope;
    if (kind == 2) return x > 0.0f ? 1.0f : alpha * k_expf(x);
    return x > threshold ? 1.0f : 0.0f;
}

KERNEL void tnt_k_elt_fwd(const float *x, float *y, i64 n, int kind, float max_value, float slope, float threshold,
                          float alpha) {
    GRID_STRIDE(i, n) y[i] = k_elt_f(kind, x[i], max_value, slope, threshold, alpha);
}

KERNEL void tnt_k_elt_bwd(const float *x, const float *dy, float *dx, i64 n, int kind, float max_value, float slope,
                          float threshold, float alpha) {
    GRID_STRIDE(i, n) dx[i] = dy[i] * k_elt_df(kind, x[i], max_value, slope, threshold, alpha);
}

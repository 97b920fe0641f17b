/* activation_c.c: the Keras activations oneDNN has no primitive for (or none with Keras's exact
 * constants), in plain C over a (rows, cols) float array: SELU, softsign, both hard sigmoids,
 * hard_silu, exponential, relu6, mish, celu, hard_tanh, tanh_shrink, soft_shrink, hard_shrink,
 * squareplus, log_sigmoid, sparse_plus, sparse_sigmoid (elementwise; backward from the input x),
 * and log_softmax and sparsemax over each row of cols values (backward from the output y).
 * Formulas as keras/src/backend/tensorflow/nn.py (Keras 3) and keras/backend.py (Keras 2). */
#include "kernels/activation.h"

#include <math.h>
#include <stdlib.h>

static const float selu_alpha = 1.67326324235437728f, selu_scale = 1.05070098735548049f;

bool tnt__act_is_c(tnt_activation act) { return act == TNT_ACT_SELU || act >= TNT_ACT_SOFTSIGN; }

bool tnt__act_c_rowwise(tnt_activation act) { return act == TNT_ACT_LOG_SOFTMAX || act == TNT_ACT_SPARSEMAX; }

static float softplus(float x) { return x > 0 ? x + log1pf(expf(-x)) : log1pf(expf(x)); }
static float sigmoid(float x) { return x >= 0 ? 1.0f / (1.0f + expf(-x)) : expf(x) / (1.0f + expf(x)); }

/* y = f(x) of an elementwise activation */
static float fwd1(tnt_activation act, float x) {
    switch (act) {
    case TNT_ACT_SELU: return x > 0 ? selu_scale * x : selu_scale * selu_alpha * expm1f(x);
    case TNT_ACT_SOFTSIGN: return x / (1.0f + fabsf(x));
    case TNT_ACT_HARD_SIGMOID: return fminf(fmaxf(0.2f * x + 0.5f, 0.0f), 1.0f);
    case TNT_ACT_HARD_SIGMOID_V3: return fminf(fmaxf(x + 3.0f, 0.0f), 6.0f) / 6.0f;
    case TNT_ACT_HARD_SILU: return x * (fminf(fmaxf(x + 3.0f, 0.0f), 6.0f) / 6.0f);
    case TNT_ACT_EXPONENTIAL: return expf(x);
    case TNT_ACT_RELU6: return fminf(fmaxf(x, 0.0f), 6.0f);
    case TNT_ACT_MISH: return x * tanhf(softplus(x));
    case TNT_ACT_CELU: return fmaxf(x, 0.0f) + expm1f(fminf(x, 0.0f));
    case TNT_ACT_HARD_TANH: return fminf(fmaxf(x, -1.0f), 1.0f);
    case TNT_ACT_TANH_SHRINK: return x - tanhf(x);
    case TNT_ACT_SOFT_SHRINK: return x > 0.5f ? x - 0.5f : x < -0.5f ? x + 0.5f : 0.0f;
    case TNT_ACT_HARD_SHRINK: return fabsf(x) > 0.5f ? x : 0.0f;
    case TNT_ACT_SQUAREPLUS: return 0.5f * (x + sqrtf(x * x + 4.0f));
    case TNT_ACT_LOG_SIGMOID: return -softplus(-x);
    case TNT_ACT_SPARSE_PLUS: return x <= -1.0f ? 0.0f : x < 1.0f ? 0.25f * (x + 1.0f) * (x + 1.0f) : x;
    case TNT_ACT_SPARSE_SIGMOID: return x <= -1.0f ? 0.0f : x >= 1.0f ? 1.0f : 0.5f * (x + 1.0f);
    default: return x;
    }
}

/* f'(x) of an elementwise activation */
static float grad1(tnt_activation act, float x) {
    switch (act) {
    case TNT_ACT_SELU: return x > 0 ? selu_scale : selu_scale * selu_alpha * expf(x);
    case TNT_ACT_SOFTSIGN: {
        float d = 1.0f + fabsf(x);
        return 1.0f / (d * d);
    }
    case TNT_ACT_HARD_SIGMOID: return x > -2.5f && x < 2.5f ? 0.2f : 0.0f;
    case TNT_ACT_HARD_SIGMOID_V3: return x > -3.0f && x < 3.0f ? 1.0f / 6.0f : 0.0f;
    case TNT_ACT_HARD_SILU: return x <= -3.0f ? 0.0f : x >= 3.0f ? 1.0f : (2.0f * x + 3.0f) / 6.0f;
    case TNT_ACT_EXPONENTIAL: return expf(x);
    case TNT_ACT_RELU6: return x > 0.0f && x < 6.0f ? 1.0f : 0.0f;
    case TNT_ACT_MISH: {
        float t = tanhf(softplus(x));
        return t + x * (1.0f - t * t) * sigmoid(x);
    }
    case TNT_ACT_CELU: return x > 0 ? 1.0f : expf(x);
    case TNT_ACT_HARD_TANH: return x > -1.0f && x < 1.0f ? 1.0f : 0.0f;
    case TNT_ACT_TANH_SHRINK: {
        float t = tanhf(x);
        return t * t;
    }
    case TNT_ACT_SOFT_SHRINK:
    case TNT_ACT_HARD_SHRINK: return fabsf(x) > 0.5f ? 1.0f : 0.0f;
    case TNT_ACT_SQUAREPLUS: return 0.5f * (1.0f + x / sqrtf(x * x + 4.0f));
    case TNT_ACT_LOG_SIGMOID: return sigmoid(-x);
    case TNT_ACT_SPARSE_PLUS: return x <= -1.0f ? 0.0f : x < 1.0f ? 0.5f * (x + 1.0f) : 1.0f;
    case TNT_ACT_SPARSE_SIGMOID: return x > -1.0f && x < 1.0f ? 0.5f : 0.0f;
    default: return 1.0f;
    }
}

static int desc(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x < y) - (x > y);
}

/* Sparsemax of one row (Martins & Astudillo 2016, as Keras): tau from the sorted row, y = max(x - tau, 0). */
static void sparsemax_row(const float *x, float *y, int64_t n, float *sorted) {
    memcpy(sorted, x, (size_t)n * sizeof(float));
    qsort(sorted, (size_t)n, sizeof(float), desc);
    double cum = 0, cum_k = 0;
    int64_t k = 0;
    for (int64_t j = 0; j < n; j++) {
        cum += sorted[j];
        if (sorted[j] - (cum - 1.0) / (double)(j + 1) > 0) k = j + 1, cum_k = cum;
    }
    float tau = (float)((cum_k - 1.0) / (double)(k ? k : 1));
    for (int64_t j = 0; j < n; j++) y[j] = fmaxf(x[j] - tau, 0.0f);
}

tnt_status tnt__act_c_forward(tnt_activation act, int64_t rows, int64_t cols, const float *x, float *y) {
    int64_t n = rows * cols;
    if (act == TNT_ACT_LOG_SOFTMAX) {
        for (int64_t r = 0; r < rows; r++) {
            const float *xr = x + r * cols;
            float *yr = y + r * cols, m = -INFINITY;
            for (int64_t j = 0; j < cols; j++) m = fmaxf(m, xr[j]);
            double s = 0;
            for (int64_t j = 0; j < cols; j++) s += exp((double)(xr[j] - m));
            float lse = m + (float)log(s);
            for (int64_t j = 0; j < cols; j++) yr[j] = xr[j] - lse;
        }
        return TNT_OK;
    }
    if (act == TNT_ACT_SPARSEMAX) {
        float *sorted = malloc((size_t)(cols ? cols : 1) * sizeof(float));
        if (!sorted) return tnt__error(TNT_ERR_NOMEM, "sparsemax: out of memory");
        for (int64_t r = 0; r < rows; r++) sparsemax_row(x + r * cols, y + r * cols, cols, sorted);
        free(sorted);
        return TNT_OK;
    }
    for (int64_t i = 0; i < n; i++) y[i] = fwd1(act, x[i]);
    return TNT_OK;
}

tnt_status tnt__act_c_backward(tnt_activation act, int64_t rows, int64_t cols, const float *x, const float *y,
                               const float *dy, float *dx) {
    int64_t n = rows * cols;
    if (act == TNT_ACT_LOG_SOFTMAX) { /* dx = dy - softmax(x) sum(dy), softmax = exp(y) */
        for (int64_t r = 0; r < rows; r++) {
            const float *yr = y + r * cols, *dyr = dy + r * cols;
            float *dxr = dx + r * cols;
            double s = 0;
            for (int64_t j = 0; j < cols; j++) s += dyr[j];
            for (int64_t j = 0; j < cols; j++) dxr[j] = dyr[j] - expf(yr[j]) * (float)s;
        }
        return TNT_OK;
    }
    if (act == TNT_ACT_SPARSEMAX) { /* on the support S (y > 0): dx = dy - mean over S of dy; 0 off it */
        for (int64_t r = 0; r < rows; r++) {
            const float *yr = y + r * cols, *dyr = dy + r * cols;
            float *dxr = dx + r * cols;
            double s = 0;
            int64_t k = 0;
            for (int64_t j = 0; j < cols; j++)
                if (yr[j] > 0) s += dyr[j], k++;
            float mean = k ? (float)(s / (double)k) : 0.0f;
            for (int64_t j = 0; j < cols; j++) dxr[j] = yr[j] > 0 ? dyr[j] - mean : 0.0f;
        }
        return TNT_OK;
    }
    for (int64_t i = 0; i < n; i++) dx[i] = dy[i] * grad1(act, x[i]);
    return TNT_OK;
}

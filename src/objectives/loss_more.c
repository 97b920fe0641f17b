/* loss_more.c: the other Keras 2 losses (keras/losses.py), one row of the last axis at a time,
 * with their gradients: Kullback-Leibler divergence, hinge, squared hinge, categorical hinge,
 * Huber, log-cosh, Poisson, mean absolute percentage error, mean squared logarithmic error and
 * cosine similarity. Each returns the row's loss; d (may be NULL) gets scale * d(loss)/d(p). */
#include "objectives/loss.h"

#include "core/core.h"

#include <math.h>

/* backend.epsilon() as the float32 constant Keras's tensors hold */
#define EPS ((double)1e-7f)

bool tnt__loss_is_hinge(tnt_loss_kind kind) { return kind == TNT_HINGE || kind == TNT_SQUARED_HINGE; }

bool tnt__hinge_labels_binary(const float *y, int64_t count) {
    for (int64_t i = 0; i < count; i++)
        if (y[i] != 0.0f && y[i] != 1.0f) return false;
    return true;
}

/* sum(y log(y / p)) with y and p clipped to [eps, 1]; the clip passes the gradient inside */
static double kld_row(const float *p, const float *y, int64_t c, double scale, float *d) {
    double l = 0;
    for (int64_t j = 0; j < c; j++) {
        double yt = fmin(fmax((double)y[j], EPS), 1.0), pv = (double)p[j], pc = fmin(fmax(pv, EPS), 1.0);
        l += yt * log(yt / pc);
        if (d) d[j] = (pv >= EPS && pv <= 1.0) ? (float)(-yt / pc * scale) : 0.0f;
    }
    return l;
}

/* (squared) hinge: mean(max(1 - y p, 0)[^2]); y in {0, 1} was mapped to {-1, 1} (to_pm1) */
static double hinge_row(const float *p, const float *y, int64_t c, bool squared, bool to_pm1, double scale, float *d) {
    double l = 0, gs = scale / (double)c;
    for (int64_t j = 0; j < c; j++) {
        double yt = to_pm1 ? 2.0 * y[j] - 1.0 : (double)y[j], m = 1.0 - yt * (double)p[j];
        /* tf.maximum gives the gradient to its first argument on a tie */
        double h = m >= 0 ? m : 0;
        l += squared ? h * h : h;
        if (d) d[j] = (float)(m >= 0 ? -yt * (squared ? 2.0 * h : 1.0) * gs : 0.0);
    }
    return l / (double)c;
}

/* max(0, max((1 - y) p) - sum(y p) + 1) */
static double categorical_hinge_row(const float *p, const float *y, int64_t c, double scale, float *d) {
    double pos = 0, neg = -INFINITY;
    int64_t arg = 0;
    for (int64_t j = 0; j < c; j++) {
        double yj = y[j], pj = p[j];
        pos += yj * pj;
        if ((1.0 - yj) * pj > neg) neg = (1.0 - yj) * pj, arg = j;
    }
    double v = neg - pos + 1.0;
    if (d)
        for (int64_t j = 0; j < c; j++)
            d[j] = v >= 0 ? (float)((-(double)y[j] + (j == arg ? 1.0 - (double)y[j] : 0.0)) * scale) : 0.0f;
    return v > 0 ? v : 0;
}

/* mean(where(|e| <= delta, e^2 / 2, delta |e| - delta^2 / 2)), e = p - y */
static double huber_row(const float *p, const float *y, int64_t c, double delta, double scale, float *d) {
    double l = 0, gs = scale / (double)c;
    for (int64_t j = 0; j < c; j++) {
        double e = (double)p[j] - (double)y[j], a = fabs(e);
        l += a <= delta ? 0.5 * e * e : delta * a - 0.5 * delta * delta;
        if (d) d[j] = (float)((a <= delta ? e : (e > 0 ? delta : -delta)) * gs);
    }
    return l / (double)c;
}

/* mean(x + softplus(-2x) - log 2), x = p - y (log cosh x, stable for large |x|) */
static double logcosh_row(const float *p, const float *y, int64_t c, double scale, float *d) {
    double l = 0, gs = scale / (double)c;
    for (int64_t j = 0; j < c; j++) {
        double x = (double)p[j] - (double)y[j], z = -2.0 * x;
        double softplus = z > 0 ? z + log1p(exp(-z)) : log1p(exp(z));
        l += x + softplus - log(2.0);
        if (d) d[j] = (float)(tanh(x) * gs);
    }
    return l / (double)c;
}

/* mean(p - y log(p + eps)) */
static double poisson_row(const float *p, const float *y, int64_t c, double scale, float *d) {
    double l = 0, gs = scale / (double)c;
    for (int64_t j = 0; j < c; j++) {
        double pj = p[j], yj = y[j];
        l += pj - yj * log(pj + EPS);
        if (d) d[j] = (float)((1.0 - yj / (pj + EPS)) * gs);
    }
    return l / (double)c;
}

/* 100 mean(|y - p| / max(|y|, eps)) */
static double mape_row(const float *p, const float *y, int64_t c, double scale, float *d) {
    double l = 0, gs = 100.0 * scale / (double)c;
    for (int64_t j = 0; j < c; j++) {
        double e = (double)p[j] - (double)y[j], den = fmax(fabs((double)y[j]), EPS);
        l += fabs(e) / den;
        if (d) d[j] = (float)((e > 0 ? 1.0 : e < 0 ? -1.0 : 0.0) / den * gs);
    }
    return 100.0 * l / (double)c;
}

/* mean((log(max(p, eps) + 1) - log(max(y, eps) + 1))^2) */
static double msle_row(const float *p, const float *y, int64_t c, double scale, float *d) {
    double l = 0, gs = scale / (double)c;
    for (int64_t j = 0; j < c; j++) {
        double pm = fmax((double)p[j], EPS), e = log(pm + 1.0) - log(fmax((double)y[j], EPS) + 1.0);
        l += e * e;
        if (d) d[j] = (double)p[j] >= EPS ? (float)(2.0 * e / (pm + 1.0) * gs) : 0.0f;
    }
    return l / (double)c;
}

/* -sum(l2_normalize(y) l2_normalize(p)); l2_normalize(x) = x / sqrt(max(sum x^2, 1e-12)) */
static double cosine_row(const float *p, const float *y, int64_t c, double scale, float *d) {
    double sp = 0, sy = 0, dot = 0;
    for (int64_t j = 0; j < c; j++) sp += (double)p[j] * p[j], sy += (double)y[j] * y[j], dot += (double)p[j] * y[j];
    double np = sqrt(fmax(sp, 1e-12)), ny = sqrt(fmax(sy, 1e-12)), cosv = dot / (np * ny);
    if (d)
        for (int64_t j = 0; j < c; j++) {
            /* the max passes no gradient to sum p^2 below 1e-12 */
            double g = (double)y[j] / (ny * np) - (sp > 1e-12 ? cosv * (double)p[j] / (np * np) : 0.0);
            d[j] = (float)(-g * scale);
        }
    return -cosv;
}

double tnt__loss_more_row(tnt_loss_kind kind, const float *p, const float *y, int64_t c, double delta, bool to_pm1,
                          double scale, float *d) {
    switch (kind) {
    case TNT_KL_DIVERGENCE: return kld_row(p, y, c, scale, d);
    case TNT_HINGE: return hinge_row(p, y, c, false, to_pm1, scale, d);
    case TNT_SQUARED_HINGE: return hinge_row(p, y, c, true, to_pm1, scale, d);
    case TNT_CATEGORICAL_HINGE: return categorical_hinge_row(p, y, c, scale, d);
    case TNT_HUBER: return huber_row(p, y, c, delta, scale, d);
    case TNT_LOG_COSH: return logcosh_row(p, y, c, scale, d);
    case TNT_POISSON: return poisson_row(p, y, c, scale, d);
    case TNT_MEAN_ABSOLUTE_PERCENTAGE_ERROR: return mape_row(p, y, c, scale, d);
    case TNT_MEAN_SQUARED_LOGARITHMIC_ERROR: return msle_row(p, y, c, scale, d);
    case TNT_COSINE_SIMILARITY: return cosine_row(p, y, c, scale, d);
    default: return NAN;
    }
}

/* loss.c: Keras 2 losses (keras/losses.py over keras/backend.py) with their gradients: sparse
 * and categorical cross-entropy (from logits or from probabilities), binary cross-entropy,
 * mean squared and mean absolute error. Per-sample values are summed in double in sample order,
 * so the sum does not depend on threads; the loss is O(n*c) and negligible next to the model. */
#include "objectives/loss.h"

#include "core/core.h"

#include <ctype.h>
#include <math.h>

/* Keras's backend.epsilon() = 1e-7, as the float32 tensors Keras clips with: the clip range is
 * [float32(1e-7), float32(1) - float32(1e-7)]. */
#define CLIP_LO ((double)1e-7f)
#define CLIP_HI ((double)(1.0f - 1e-7f))
/* BCE adds the Python float epsilon() inside the logs. */
#define BCE_EPS 1e-7

static const char *const LOSS_NAMES[] = {
    [TNT_LOSS_NONE] = "none",
    [TNT_SPARSE_CATEGORICAL_CROSSENTROPY] = "sparse_categorical_crossentropy",
    [TNT_CATEGORICAL_CROSSENTROPY] = "categorical_crossentropy",
    [TNT_BINARY_CROSSENTROPY] = "binary_crossentropy",
    [TNT_MEAN_SQUARED_ERROR] = "mean_squared_error",
    [TNT_MEAN_ABSOLUTE_ERROR] = "mean_absolute_error",
    [TNT_KL_DIVERGENCE] = "kl_divergence",
    [TNT_HINGE] = "hinge",
    [TNT_SQUARED_HINGE] = "squared_hinge",
    [TNT_CATEGORICAL_HINGE] = "categorical_hinge",
    [TNT_HUBER] = "huber",
    [TNT_LOG_COSH] = "log_cosh",
    [TNT_POISSON] = "poisson",
    [TNT_MEAN_ABSOLUTE_PERCENTAGE_ERROR] = "mean_absolute_percentage_error",
    [TNT_MEAN_SQUARED_LOGARITHMIC_ERROR] = "mean_squared_logarithmic_error",
    [TNT_COSINE_SIMILARITY] = "cosine_similarity",
};

const char *tnt_loss_name(tnt_loss_kind loss) {
    if ((int)loss < 0 || (size_t)loss >= TNT_ARRAY_LEN(LOSS_NAMES)) return "unknown";
    return LOSS_NAMES[loss];
}

/* Lower case without '_', so that Keras's function names ("mean_squared_error") and class names
 * ("MeanSquaredError") compare equal. Returns false when the name does not fit. */
static bool normalize(const char *s, char *out, size_t size) {
    size_t j = 0;
    for (; *s; s++) {
        if (*s == '_') continue;
        if (j + 1 >= size) return false;
        out[j++] = (char)tolower((unsigned char)*s);
    }
    out[j] = '\0';
    return true;
}

int tnt_loss_from_name(const char *name) {
    static const struct { const char *key; tnt_loss_kind kind; } ALIASES[] = {
        {"sparsecategoricalcrossentropy", TNT_SPARSE_CATEGORICAL_CROSSENTROPY},
        {"categoricalcrossentropy", TNT_CATEGORICAL_CROSSENTROPY},
        {"binarycrossentropy", TNT_BINARY_CROSSENTROPY},
        {"meansquarederror", TNT_MEAN_SQUARED_ERROR},
        {"mse", TNT_MEAN_SQUARED_ERROR},
        {"meanabsoluteerror", TNT_MEAN_ABSOLUTE_ERROR},
        {"mae", TNT_MEAN_ABSOLUTE_ERROR},
        {"kldivergence", TNT_KL_DIVERGENCE},
        {"kld", TNT_KL_DIVERGENCE},
        {"kullbackleiblerdivergence", TNT_KL_DIVERGENCE},
        {"hinge", TNT_HINGE},
        {"squaredhinge", TNT_SQUARED_HINGE},
        {"categoricalhinge", TNT_CATEGORICAL_HINGE},
        {"huber", TNT_HUBER},
        {"huberloss", TNT_HUBER},
        {"logcosh", TNT_LOG_COSH},
        {"poisson", TNT_POISSON},
        {"meanabsolutepercentageerror", TNT_MEAN_ABSOLUTE_PERCENTAGE_ERROR},
        {"mape", TNT_MEAN_ABSOLUTE_PERCENTAGE_ERROR},
        {"meansquaredlogarithmicerror", TNT_MEAN_SQUARED_LOGARITHMIC_ERROR},
        {"msle", TNT_MEAN_SQUARED_LOGARITHMIC_ERROR},
        {"cosinesimilarity", TNT_COSINE_SIMILARITY},
    };
    char key[64];
    if (name && normalize(name, key, sizeof key))
        for (size_t i = 0; i < TNT_ARRAY_LEN(ALIASES); i++)
            if (!strcmp(key, ALIASES[i].key)) return (int)ALIASES[i].kind;
    tnt__error(TNT_ERR_ARG,
               "unknown loss \"%s\": expected one of sparse_categorical_crossentropy, categorical_crossentropy, "
               "binary_crossentropy, mean_squared_error (mse), mean_absolute_error (mae), kl_divergence (kld), "
               "hinge, squared_hinge, categorical_hinge, huber, log_cosh, poisson, mean_absolute_percentage_error "
               "(mape), mean_squared_logarithmic_error (msle), cosine_similarity",
               name ? name : "(null)");
    return -1;
}

static double clip(double v) { return v < CLIP_LO ? CLIP_LO : v > CLIP_HI ? CLIP_HI : v; }
/* tf.clip_by_value passes the gradient where lo <= v <= hi */
static bool in_clip(double v) { return v >= CLIP_LO && v <= CLIP_HI; }

/* Class index of sample i, validated: an integer in [0, c). */
static tnt_status sparse_label(const float *y, int64_t i, int64_t c, int64_t *out) {
    double v = y[i];
    if (!(v >= 0 && v < (double)c) || v != floor(v))
        return tnt__error(TNT_ERR_ARG,
                          "sparse_categorical_crossentropy: label %g of sample %lld is %s: expected an integer "
                          "class index in [0, %lld)",
                          v, (long long)i,
                          isnan(v) ? "not a number" : (isfinite(v) && v != floor(v)) ? "not an integer" : "out of range",
                          (long long)c);
    *out = (int64_t)v;
    return TNT_OK;
}

/* max and log-sum-exp of a row of logits */
static double row_lse(const float *x, int64_t c, double *max_out) {
    double mx = x[0];
    for (int64_t j = 1; j < c; j++)
        if (x[j] > mx) mx = x[j];
    double se = 0;
    for (int64_t j = 0; j < c; j++) se += exp((double)x[j] - mx);
    *max_out = mx;
    return mx + log(se);
}

/* Cross-entropy from logits; y is NULL for sparse labels (then label is the class). The label
 * weights of a dense row are y[0..c), smoothed to y (1 - s) + s / c; the gradient is
 * softmax * sum(y) - y, the exact gradient of the loss also when a row of y does not sum to 1. */
static double ce_logits_row(const float *x, const float *y, int64_t label, int64_t c, double s, double scale,
                            float *d) {
    double mx, lse = row_lse(x, c, &mx);
    double loss = 0, ysum = 0, keep = 1.0 - s, spread = s / (double)c;
    if (!y && s == 0) {
        loss = lse - (double)x[label];
        ysum = 1;
    } else {
        /* zero labels are skipped so that a -inf logit with label 0 contributes 0, not NaN */
        for (int64_t j = 0; j < c; j++) {
            double yj = (y ? (double)y[j] : (double)(j == label)) * keep + spread;
            if (yj != 0) loss += yj * (lse - (double)x[j]), ysum += yj;
        }
    }
    if (d)
        for (int64_t j = 0; j < c; j++) {
            double sm = exp((double)x[j] - lse);
            double yj = (y ? (double)y[j] : (j == label ? 1.0 : 0.0)) * keep + spread;
            d[j] = (float)((sm * ysum - yj) * scale);
        }
    return loss;
}

/* Sparse CE from probabilities, as Keras: logits = log(clip(p)), then
 * sparse_softmax_cross_entropy_with_logits: log(sum_j r_j) - log(r_label). */
static double sparse_ce_probs_row(const float *p, int64_t label, int64_t c, double scale, float *d) {
    double s = 0;
    for (int64_t j = 0; j < c; j++) s += clip(p[j]);
    double ry = clip(p[label]);
    if (d)
        for (int64_t j = 0; j < c; j++) {
            double g = in_clip(p[j]) ? 1.0 / s - (j == label ? 1.0 / ry : 0.0) : 0.0;
            d[j] = (float)(g * scale);
        }
    return log(s) - log(ry);
}

/* Categorical CE from probabilities, as Keras: q = p / sum(p), r = clip(q), -sum y log r.
 * Gradient through the normalization: dL/dp_i = (g_i - sum_j g_j q_j) / s, g_j = -y_j / r_j
 * where the clip passes the gradient. */
static double ce_probs_row(const float *p, const float *y, int64_t c, double scale, float *d) {
    double s = 0;
    for (int64_t j = 0; j < c; j++) s += p[j];
    double loss = 0, dot = 0;
    for (int64_t j = 0; j < c; j++) {
        double q = p[j] / s;
        if (y[j] != 0) loss -= (double)y[j] * log(clip(q));
        if (in_clip(q)) dot += -(double)y[j] / clip(q) * q;
    }
    if (d)
        for (int64_t j = 0; j < c; j++) {
            double q = p[j] / s;
            double g = in_clip(q) ? -(double)y[j] / clip(q) : 0.0;
            d[j] = (float)((g - dot) / s * scale);
        }
    return loss;
}

tnt_status tnt__loss_compute(tnt_loss_kind kind, bool from_logits, int64_t n, int64_t c, const float *pred,
                             const float *y_true, double inv_batch, float *dpred, double *loss_sum) {
    return tnt__loss_compute_opts(kind, from_logits, NULL, n, c, pred, y_true, inv_batch, dpred, loss_sum, NULL);
}

tnt_status tnt__loss_compute_opts(tnt_loss_kind kind, bool from_logits, const tnt__loss_opts *o, int64_t n,
                                  int64_t c, const float *pred, const float *y_true, double inv_batch, float *dpred,
                                  double *loss_sum, int64_t *valid) {
    tnt__loss_opts none = {0};
    if (!o) o = &none;
    const double smooth = o->label_smoothing;
    float *smoothed = NULL; /* a dense row of labels smoothed, for the probability paths */
    int64_t n_valid = 0;
    if (smooth != 0 && kind != TNT_SPARSE_CATEGORICAL_CROSSENTROPY && kind != TNT_CATEGORICAL_CROSSENTROPY &&
        kind != TNT_BINARY_CROSSENTROPY)
        return tnt__error(TNT_ERR_ARG, "%s: label_smoothing %g applies to the cross-entropies only", tnt_loss_name(kind), smooth);
    if (smooth != 0 && kind == TNT_SPARSE_CATEGORICAL_CROSSENTROPY && !from_logits)
        return tnt__error(TNT_ERR_UNSUPPORTED, "sparse_categorical_crossentropy: label_smoothing needs logits "
                          "(from_logits, or a softmax output layer, whose logits the loss then reads)");
    if (smooth != 0 && !from_logits && (smoothed = malloc((size_t)c * sizeof(float))) == NULL)
        return tnt__error(TNT_ERR_NOMEM, "%s: out of memory", tnt_loss_name(kind));
    if (kind <= TNT_LOSS_NONE || kind >= TNT_LOSS_KIND_COUNT)
        return tnt__error(TNT_ERR_ARG, "loss %d is not a known loss", (int)kind);
    if (n < 0 || c < 1)
        return tnt__error(TNT_ERR_SHAPE, "%s: %lld samples of %lld outputs: expected n >= 0 and c >= 1",
                          tnt_loss_name(kind), (long long)n, (long long)c);
    if (!loss_sum || (n > 0 && (!pred || !y_true)))
        return tnt__error(TNT_ERR_ARG, "%s: prediction, label or result pointer is NULL", tnt_loss_name(kind));
    double total = 0;
    const double inv_c = 1.0 / (double)c;
    const double delta = o->huber_delta > 0 ? o->huber_delta : 1.0;
    /* Keras's hinge maps labels to {-1, 1} when all of the batch's are in {0, 1} */
    const bool to_pm1 = tnt__loss_is_hinge(kind) && n > 0 && tnt__hinge_labels_binary(y_true, n * c);
    for (int64_t i = 0; i < n; i++) {
        const float *p = pred + i * c;
        float *d = dpred ? dpred + i * c : NULL;
        double l = 0;
        switch (kind) {
        case TNT_SPARSE_CATEGORICAL_CROSSENTROPY: {
            int64_t label = 0;
            if (o->has_ignore_class && y_true[i] == (float)o->ignore_class) {
                if (d) memset(d, 0, (size_t)c * sizeof(float));
                n_valid--;
                break;
            }
            tnt_status s = sparse_label(y_true, i, c, &label);
            if (s != TNT_OK) {
                free(smoothed);
                return s;
            }
            l = from_logits ? ce_logits_row(p, NULL, label, c, smooth, inv_batch, d)
                            : sparse_ce_probs_row(p, label, c, inv_batch, d);
            break;
        }
        case TNT_CATEGORICAL_CROSSENTROPY: {
            const float *y = y_true + i * c;
            if (smoothed) {
                for (int64_t j = 0; j < c; j++) smoothed[j] = (float)(y[j] * (1.0 - smooth) + smooth / (double)c);
                y = smoothed;
            }
            l = from_logits ? ce_logits_row(p, y, -1, c, smooth, inv_batch, d) : ce_probs_row(p, y, c, inv_batch, d);
            break;
        }
        case TNT_BINARY_CROSSENTROPY: {
            const float *y = y_true + i * c;
            if (smooth != 0) {
                if (!smoothed && (smoothed = malloc((size_t)c * sizeof(float))) == NULL)
                    return tnt__error(TNT_ERR_NOMEM, "%s: out of memory", tnt_loss_name(kind));
                for (int64_t j = 0; j < c; j++) smoothed[j] = (float)(y[j] * (1.0 - smooth) + 0.5 * smooth);
                y = smoothed;
            }
            const double gs = inv_batch * inv_c;
            for (int64_t j = 0; j < c; j++) {
                double x = p[j], z = y[j];
                if (from_logits) {
                    /* tf.nn.sigmoid_cross_entropy_with_logits: stable for any |x| */
                    l += (x > 0 ? x : 0) - x * z + log1p(exp(-fabs(x)));
                    if (d) {
                        double e = exp(-fabs(x)), sig = x >= 0 ? 1.0 / (1.0 + e) : e / (1.0 + e);
                        d[j] = (float)((sig - z) * gs);
                    }
                } else {
                    double r = clip(x);
                    l -= z * log(r + BCE_EPS) + (1 - z) * log(1 - r + BCE_EPS);
                    if (d) d[j] = in_clip(x) ? (float)((-z / (r + BCE_EPS) + (1 - z) / (1 - r + BCE_EPS)) * gs) : 0.0f;
                }
            }
            l *= inv_c;
            break;
        }
        case TNT_MEAN_SQUARED_ERROR: {
            const float *y = y_true + i * c;
            const double gs = 2.0 * inv_batch * inv_c;
            for (int64_t j = 0; j < c; j++) {
                double e = (double)p[j] - (double)y[j];
                l += e * e;
                if (d) d[j] = (float)(e * gs);
            }
            l *= inv_c;
            break;
        }
        case TNT_MEAN_ABSOLUTE_ERROR: {
            const float *y = y_true + i * c;
            const double gs = inv_batch * inv_c;
            for (int64_t j = 0; j < c; j++) {
                double e = (double)p[j] - (double)y[j];
                l += fabs(e);
                if (d) d[j] = (float)((e > 0 ? gs : e < 0 ? -gs : 0.0));
            }
            l *= inv_c;
            break;
        }
        default:
            l = tnt__loss_more_row(kind, p, y_true + i * c, c, delta, to_pm1, inv_batch, d);
            break;
        }
        total += l;
        n_valid++;
    }
    free(smoothed);
    *loss_sum = total;
    if (valid) *valid = n_valid;
    return TNT_OK;
}

/* metrics.c: parsing of Keras metric names and per-batch (sum, count) updates with Keras 2
 * semantics (keras/metrics/metrics.py, keras/utils/metrics_utils.py). */
#include "objectives/metrics.h"

#include "core/core.h"
#include "objectives/loss.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>

static const char *const KIND_NAMES[TNT__METRIC_COUNT] = {
    [TNT__METRIC_ACCURACY] = "accuracy",
    [TNT__METRIC_CROSSENTROPY] = "crossentropy",
    [TNT__METRIC_SPARSE_CATEGORICAL_ACCURACY] = "sparse_categorical_accuracy",
    [TNT__METRIC_CATEGORICAL_ACCURACY] = "categorical_accuracy",
    [TNT__METRIC_BINARY_ACCURACY] = "binary_accuracy",
    [TNT__METRIC_SPARSE_TOP_K] = "sparse_top_k_categorical_accuracy",
    [TNT__METRIC_TOP_K] = "top_k_categorical_accuracy",
    [TNT__METRIC_MSE] = "mean_squared_error",
    [TNT__METRIC_MAE] = "mean_absolute_error",
    [TNT__METRIC_SPARSE_CE] = "sparse_categorical_crossentropy",
    [TNT__METRIC_CE] = "categorical_crossentropy",
    [TNT__METRIC_BCE] = "binary_crossentropy",
    [TNT__METRIC_KLD] = "kl_divergence",
    [TNT__METRIC_HINGE] = "hinge",
    [TNT__METRIC_SQUARED_HINGE] = "squared_hinge",
    [TNT__METRIC_CATEGORICAL_HINGE] = "categorical_hinge",
    [TNT__METRIC_LOGCOSH] = "logcosh",
    [TNT__METRIC_POISSON] = "poisson",
    [TNT__METRIC_MAPE] = "mean_absolute_percentage_error",
    [TNT__METRIC_MSLE] = "mean_squared_logarithmic_error",
    [TNT__METRIC_COSINE] = "cosine_similarity",
    [TNT__METRIC_RMSE] = "root_mean_squared_error",
    [TNT__METRIC_EQUAL] = "equal_accuracy",
    [TNT__METRIC_TP] = "true_positives",
    [TNT__METRIC_FP] = "false_positives",
    [TNT__METRIC_TN] = "true_negatives",
    [TNT__METRIC_FN] = "false_negatives",
    [TNT__METRIC_PRECISION] = "precision",
    [TNT__METRIC_RECALL] = "recall",
    [TNT__METRIC_AUC] = "auc",
    [TNT__METRIC_PR_AUC] = "pr_auc",
    [TNT__METRIC_PRECISION_AT_RECALL] = "precision_at_recall",
    [TNT__METRIC_RECALL_AT_PRECISION] = "recall_at_precision",
    [TNT__METRIC_SENSITIVITY_AT_SPECIFICITY] = "sensitivity_at_specificity",
    [TNT__METRIC_SPECIFICITY_AT_SENSITIVITY] = "specificity_at_sensitivity",
};

const char *tnt__metric_kind_name(int kind) {
    return kind >= 0 && kind < TNT__METRIC_COUNT ? KIND_NAMES[kind] : "unknown";
}

/* Accepted names, compared lower-case without '_' (Keras function and class names). */
static const struct { const char *key; int kind; } NAMES[] = {
    {"accuracy", TNT__METRIC_ACCURACY},
    {"acc", TNT__METRIC_ACCURACY},
    {"crossentropy", TNT__METRIC_CROSSENTROPY},
    {"ce", TNT__METRIC_CROSSENTROPY},
    {"sparsecategoricalaccuracy", TNT__METRIC_SPARSE_CATEGORICAL_ACCURACY},
    {"categoricalaccuracy", TNT__METRIC_CATEGORICAL_ACCURACY},
    {"binaryaccuracy", TNT__METRIC_BINARY_ACCURACY},
    {"sparsetopkcategoricalaccuracy", TNT__METRIC_SPARSE_TOP_K},
    {"topkcategoricalaccuracy", TNT__METRIC_TOP_K},
    {"meansquarederror", TNT__METRIC_MSE},
    {"mse", TNT__METRIC_MSE},
    {"meanabsoluteerror", TNT__METRIC_MAE},
    {"mae", TNT__METRIC_MAE},
    {"sparsecategoricalcrossentropy", TNT__METRIC_SPARSE_CE},
    {"categoricalcrossentropy", TNT__METRIC_CE},
    {"binarycrossentropy", TNT__METRIC_BCE},
    {"kldivergence", TNT__METRIC_KLD},
    {"kld", TNT__METRIC_KLD},
    {"kullbackleiblerdivergence", TNT__METRIC_KLD},
    {"hinge", TNT__METRIC_HINGE},
    {"squaredhinge", TNT__METRIC_SQUARED_HINGE},
    {"categoricalhinge", TNT__METRIC_CATEGORICAL_HINGE},
    {"logcosh", TNT__METRIC_LOGCOSH},
    {"logcosherror", TNT__METRIC_LOGCOSH},
    {"poisson", TNT__METRIC_POISSON},
    {"meanabsolutepercentageerror", TNT__METRIC_MAPE},
    {"mape", TNT__METRIC_MAPE},
    {"meansquaredlogarithmicerror", TNT__METRIC_MSLE},
    {"msle", TNT__METRIC_MSLE},
    {"cosinesimilarity", TNT__METRIC_COSINE},
    {"rootmeansquarederror", TNT__METRIC_RMSE},
    {"equalaccuracy", TNT__METRIC_EQUAL},
    {"truepositives", TNT__METRIC_TP},
    {"falsepositives", TNT__METRIC_FP},
    {"truenegatives", TNT__METRIC_TN},
    {"falsenegatives", TNT__METRIC_FN},
    {"precision", TNT__METRIC_PRECISION},
    {"recall", TNT__METRIC_RECALL},
    {"auc", TNT__METRIC_AUC},
    {"prauc", TNT__METRIC_PR_AUC},
    {"precisionatrecall", TNT__METRIC_PRECISION_AT_RECALL},
    {"recallatprecision", TNT__METRIC_RECALL_AT_PRECISION},
    {"sensitivityatspecificity", TNT__METRIC_SENSITIVITY_AT_SPECIFICITY},
    {"specificityatsensitivity", TNT__METRIC_SPECIFICITY_AT_SENSITIVITY},
};
#define VALID_METRICS                                                                             \
    "accuracy (acc), sparse_categorical_accuracy, categorical_accuracy, binary_accuracy, "        \
    "sparse_top_k_categorical_accuracy[:K], top_k_categorical_accuracy[:K], mean_squared_error "  \
    "(mse), mean_absolute_error (mae), crossentropy (ce), sparse_categorical_crossentropy, "      \
    "categorical_crossentropy, binary_crossentropy, kl_divergence (kld), hinge, squared_hinge, "       \
    "categorical_hinge, logcosh, poisson, mean_absolute_percentage_error (mape), "                    \
    "mean_squared_logarithmic_error (msle), cosine_similarity, root_mean_squared_error, "              \
    "equal_accuracy, true_positives, false_positives, true_negatives, false_negatives, precision, "    \
    "recall (binary_accuracy and the last six with an optional \":THRESHOLD\")"

/* Which label layout a kind reads: 1 = one class index per sample, 0 = c values, -1 = either. */
static int needs_sparse(int kind) {
    switch (kind) {
    case TNT__METRIC_ACCURACY:
    case TNT__METRIC_CROSSENTROPY: return -1;
    case TNT__METRIC_SPARSE_CATEGORICAL_ACCURACY:
    case TNT__METRIC_SPARSE_TOP_K:
    case TNT__METRIC_SPARSE_CE: return 1;
    default: return 0;
    }
}

static bool is_space(char ch) { return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r'; }

/* Parses one trimmed entry [s, s+len) into *m. */
static bool takes_threshold(int kind) {
    return kind == TNT__METRIC_BINARY_ACCURACY || (kind >= TNT__METRIC_TP && kind <= TNT__METRIC_RECALL);
}

int tnt__metric_kind_of(const char *name) {
    char key[TNT__METRIC_NAME_MAX];
    size_t j = 0;
    for (const char *q = name; *q; q++) {
        if (*q == ':' || *q == '=' || *q == '@' || *q == '~' || j + 1 >= sizeof key) return -1;
        if (*q != '_') key[j++] = (char)tolower((unsigned char)*q);
    }
    key[j] = '\0';
    for (size_t i = 0; i < TNT_ARRAY_LEN(NAMES); i++)
        if (!strcmp(key, NAMES[i].key)) return NAMES[i].kind;
    return -1;
}

static tnt_status parse_one(const char *s, size_t len, tnt_loss_kind loss, tnt__metric *m) {
    /* "~...": weighted by the sample weights */
    if (len && s[0] == '~') {
        tnt_status st = parse_one(s + 1, len - 1, loss, m);
        if (st == TNT_OK) m->weighted = true;
        return st;
    }
    /* "...@K": output K only */
    const char *at = len ? memchr(s, '@', len) : NULL;
    if (at) {
        char *end;
        char digits[16];
        size_t dl = len - (size_t)(at - s) - 1;
        if (dl == 0 || dl >= sizeof digits)
            return tnt__error(TNT_ERR_ARG, "metric \"%.*s\": expected an output index after '@'", (int)len, s);
        memcpy(digits, at + 1, dl);
        digits[dl] = '\0';
        long k = strtol(digits, &end, 10);
        if (*end || k < 0 || k > 1000)
            return tnt__error(TNT_ERR_ARG, "metric \"%.*s\": output index \"%s\" is not valid", (int)len, s, digits);
        tnt_status st = parse_one(s, (size_t)(at - s), loss, m);
        if (st == TNT_OK) m->output = (int)k;
        return st;
    }
    /* "logname=spec": the spec's metric, logged as logname */
    const char *eq = memchr(s, '=', len);
    size_t name_len = len;
    if (eq) {
        name_len = (size_t)(eq - s);
        if (name_len == 0 || name_len + 1 == len)
            return tnt__error(TNT_ERR_ARG, "metric \"%.*s\": expected name=metric", (int)len, s);
        if (name_len >= TNT__METRIC_NAME_MAX)
            return tnt__error(TNT_ERR_ARG, "metric \"%.*s\": name longer than %d characters", (int)len, s,
                              TNT__METRIC_NAME_MAX - 1);
        char logname[TNT__METRIC_NAME_MAX];
        memcpy(logname, s, name_len);
        logname[name_len] = '\0';
        tnt_status st = parse_one(eq + 1, len - name_len - 1, loss, m);
        if (st == TNT_OK) memcpy(m->name, logname, name_len + 1);
        return st;
    }
    if (len >= TNT__METRIC_NAME_MAX)
        return tnt__error(TNT_ERR_ARG, "metric \"%.*s\": name longer than %d characters", (int)len, s,
                          TNT__METRIC_NAME_MAX - 1);
    char entry[TNT__METRIC_NAME_MAX], key[TNT__METRIC_NAME_MAX];
    memcpy(entry, s, len);
    entry[len] = '\0';
    /* base name without '_', lower case, up to an optional ":K" */
    size_t j = 0;
    const char *colon = strchr(entry, ':');
    for (const char *q = entry; *q && q != colon; q++)
        if (*q != '_') key[j++] = (char)tolower((unsigned char)*q);
    key[j] = '\0';
    int kind = -1;
    for (size_t i = 0; i < TNT_ARRAY_LEN(NAMES); i++)
        if (!strcmp(key, NAMES[i].key)) kind = NAMES[i].kind;
    if (kind < 0) return tnt__error(TNT_ERR_ARG, "unknown metric \"%s\": expected one of " VALID_METRICS, entry);
    int k = 0;
    float threshold = 0.5f;
    bool at_target = kind >= TNT__METRIC_PRECISION_AT_RECALL && kind <= TNT__METRIC_SPECIFICITY_AT_SENSITIVITY;
    if (at_target && !colon)
        return tnt__error(TNT_ERR_ARG, "metric \"%s\": expected its target as \"%s:VALUE\" (a rate in [0, 1])", entry,
                          entry);
    if (at_target) {
        char *end;
        errno = 0;
        double v = strtod(colon + 1, &end);
        if (end == colon + 1 || *end || errno || !(v >= 0 && v <= 1))
            return tnt__error(TNT_ERR_ARG, "metric \"%s\": target \"%s\" is not valid: expected a number in [0, 1]",
                              entry, colon + 1);
        threshold = (float)v;
    }
    if (kind == TNT__METRIC_SPARSE_TOP_K || kind == TNT__METRIC_TOP_K) k = 5; /* Keras's default */
    if (at_target) {
        /* read above */
    } else if (colon && takes_threshold(kind)) {
        char *end;
        errno = 0;
        double v = strtod(colon + 1, &end);
        if (end == colon + 1 || *end || errno || !(v >= 0 && v <= 1))
            return tnt__error(TNT_ERR_ARG, "metric \"%s\": threshold \"%s\" is not valid: expected a number in [0, 1]",
                              entry, colon + 1);
        threshold = (float)v;
    } else if (colon && (kind == TNT__METRIC_AUC || kind == TNT__METRIC_PR_AUC)) {
        char *end;
        errno = 0;
        long v = strtol(colon + 1, &end, 10);
        if (end == colon + 1 || *end || errno || v < 2 || v > TNT__AUC_MAX_THRESHOLDS)
            return tnt__error(TNT_ERR_ARG, "metric \"%s\": num_thresholds \"%s\" is not valid: expected 2..%d", entry,
                              colon + 1, TNT__AUC_MAX_THRESHOLDS);
        k = (int)v;
    } else if (colon) {
        if (!k)
            return tnt__error(TNT_ERR_ARG, "metric \"%s\": a \":K\" suffix only applies to the top-k metrics (a "
                              "threshold to binary_accuracy and the confusion-matrix metrics)", entry);
        char *end;
        errno = 0;
        long v = strtol(colon + 1, &end, 10);
        if (end == colon + 1 || *end || errno || v < 1 || v > 1000000000L)
            return tnt__error(TNT_ERR_ARG, "metric \"%s\": k \"%s\" is not valid: expected a positive integer", entry,
                              colon + 1);
        k = (int)v;
    }
    memset(m, 0, sizeof *m);
    memcpy(m->name, entry, len + 1);
    m->kind = kind;
    bool curve = kind == TNT__METRIC_AUC || kind == TNT__METRIC_PR_AUC || at_target;
    m->k = curve ? 0 : k;
    m->num_thresholds = curve ? (k ? k : TNT__AUC_MAX_THRESHOLDS) : 0;
    m->threshold = threshold;
    m->output = -1;
    m->loss = loss;
    return loss == TNT_LOSS_NONE ? TNT_OK : tnt__metric_check_loss(m, loss);
}

tnt_status tnt__metric_check_loss(const tnt__metric *m, tnt_loss_kind loss) {
    int kind = m->kind;
    const char *entry = m->name;
    int need = needs_sparse(kind);
    bool sparse = loss == TNT_SPARSE_CATEGORICAL_CROSSENTROPY;
    if (need == 1 && !sparse)
        return tnt__error(TNT_ERR_ARG,
                          "metric \"%s\" needs integer class labels (one per sample), but loss %s takes one label "
                          "per output; use %s",
                          entry, tnt_loss_name(loss),
                          kind == TNT__METRIC_SPARSE_TOP_K ? "top_k_categorical_accuracy"
                          : kind == TNT__METRIC_SPARSE_CE  ? "categorical_crossentropy"
                                                           : "categorical_accuracy or accuracy");
    if (need == 0 && sparse)
        return tnt__error(TNT_ERR_ARG,
                          "metric \"%s\" needs one label per output, but loss sparse_categorical_crossentropy takes "
                          "one class index per sample; use %s",
                          entry,
                          kind == TNT__METRIC_TOP_K ? "sparse_top_k_categorical_accuracy"
                          : kind == TNT__METRIC_CE  ? "sparse_categorical_crossentropy"
                                                    : "sparse_categorical_accuracy or accuracy");
    return TNT_OK;
}

int tnt__metrics_parse(const char *spec, tnt_loss_kind loss, tnt__metric *out, int max_out) {
    if (!spec) return 0;
    const char *p = spec;
    while (is_space(*p)) p++;
    if (!*p) return 0;
    int count = 0, index = 0;
    for (const char *s = spec;; index++) {
        const char *e = strchr(s, ',');
        if (!e) e = s + strlen(s);
        const char *a = s, *b = e;
        while (a < b && is_space(*a)) a++;
        while (b > a && is_space(b[-1])) b--;
        if (a == b) {
            tnt__error(TNT_ERR_ARG, "metrics \"%s\": entry %d is empty", spec, index + 1);
            return -1;
        }
        if (count >= max_out) {
            tnt__error(TNT_ERR_ARG, "metrics \"%s\": more than %d metrics", spec, max_out);
            return -1;
        }
        if (parse_one(a, (size_t)(b - a), loss, &out[count]) != TNT_OK) return -1;
        for (int i = 0; i < count; i++)
            if (!strcmp(out[i].name, out[count].name) &&
                (out[i].output < 0 || out[count].output < 0 || out[i].output == out[count].output)) {
                tnt__error(TNT_ERR_ARG, "metrics \"%s\": \"%s\" is listed twice", spec, out[count].name);
                return -1;
            }
        count++;
        if (!*e) break;
        s = e + 1;
    }
    return count;
}

int tnt__metric_resolve(const tnt__metric *m, int64_t c) {
    bool sparse = m->loss == TNT_SPARSE_CATEGORICAL_CROSSENTROPY;
    if (m->kind == TNT__METRIC_ACCURACY)
        return c == 1 ? TNT__METRIC_BINARY_ACCURACY
               : sparse ? TNT__METRIC_SPARSE_CATEGORICAL_ACCURACY
                        : TNT__METRIC_CATEGORICAL_ACCURACY;
    if (m->kind == TNT__METRIC_CROSSENTROPY)
        return c == 1 ? TNT__METRIC_BCE : sparse ? TNT__METRIC_SPARSE_CE : TNT__METRIC_CE;
    return m->kind;
}

bool tnt__metric_sparse_labels(const tnt__metric *m, int64_t c) { return needs_sparse(tnt__metric_resolve(m, c)) == 1; }

/* tf.argmax over a row: the first index of the maximum */
static int64_t argmax(const float *x, int64_t c) {
    int64_t best = 0;
    for (int64_t j = 1; j < c; j++)
        if (x[j] > x[best]) best = j;
    return best;
}

/* tf.math.in_top_k for one row: label (as cast to int32, truncating) is in the top k when fewer
 * than k entries are strictly greater than its score. */
static bool in_top_k(const float *x, int64_t c, double label, int k) {
    if (!(label > -1.0 && label < (double)c)) return false; /* covers NaN; (int) truncates toward 0 */
    int64_t t = (int64_t)label;
    float target = x[t];
    if (!isfinite(target)) return false;
    int64_t greater = 0;
    for (int64_t j = 0; j < c && greater < k; j++)
        if (x[j] > target) greater++;
    return greater < k;
}

tnt_status tnt__metric_update(const tnt__metric *m, int64_t n, int64_t c, const float *pred, const float *y_true,
                              double *sum, double *count) {
    if (!m || !sum || !count) return tnt__error(TNT_ERR_ARG, "metric update: NULL argument");
    if (n < 0 || c < 1)
        return tnt__error(TNT_ERR_SHAPE, "metric \"%s\": %lld samples of %lld outputs: expected n >= 0 and c >= 1",
                          m->name, (long long)n, (long long)c);
    if (n > 0 && (!pred || !y_true))
        return tnt__error(TNT_ERR_ARG, "metric \"%s\": prediction or label buffer is NULL", m->name);
    int kind = tnt__metric_resolve(m, c);
    double total = 0;
    switch (kind) {
    case TNT__METRIC_SPARSE_CATEGORICAL_ACCURACY:
        /* metrics_utils.sparse_categorical_matches: argmax cast to the label's float type */
        for (int64_t i = 0; i < n; i++) total += (double)argmax(pred + i * c, c) == (double)y_true[i];
        break;
    case TNT__METRIC_CATEGORICAL_ACCURACY:
        for (int64_t i = 0; i < n; i++) total += argmax(pred + i * c, c) == argmax(y_true + i * c, c);
        break;
    case TNT__METRIC_BINARY_ACCURACY:
        /* y_true == (y_pred > threshold), averaged over the last axis */
        for (int64_t i = 0; i < n; i++) {
            int64_t hits = 0;
            for (int64_t j = 0; j < c; j++) hits += (pred[i * c + j] > m->threshold ? 1.0f : 0.0f) == y_true[i * c + j];
            total += (double)hits / (double)c;
        }
        break;
    case TNT__METRIC_SPARSE_TOP_K:
        for (int64_t i = 0; i < n; i++) total += in_top_k(pred + i * c, c, y_true[i], m->k);
        break;
    case TNT__METRIC_TOP_K:
        for (int64_t i = 0; i < n; i++) total += in_top_k(pred + i * c, c, (double)argmax(y_true + i * c, c), m->k);
        break;
    case TNT__METRIC_MSE:
    case TNT__METRIC_MAE:
        for (int64_t i = 0; i < n; i++) {
            double s = 0;
            for (int64_t j = 0; j < c; j++) {
                double e = (double)pred[i * c + j] - (double)y_true[i * c + j];
                s += kind == TNT__METRIC_MSE ? e * e : fabs(e);
            }
            total += s / (double)c;
        }
        break;
    case TNT__METRIC_SPARSE_CE:
    case TNT__METRIC_CE:
    case TNT__METRIC_BCE: {
        tnt_loss_kind lk = kind == TNT__METRIC_SPARSE_CE ? TNT_SPARSE_CATEGORICAL_CROSSENTROPY
                           : kind == TNT__METRIC_CE      ? TNT_CATEGORICAL_CROSSENTROPY
                                                         : TNT_BINARY_CROSSENTROPY;
        /* Keras's metric functions default to from_logits=False */
        tnt_status s = tnt__loss_compute(lk, false, n, c, pred, y_true, 0.0, NULL, &total);
        if (s != TNT_OK) return tnt__error_prefix(s, "metric \"%s\": ", m->name);
        break;
    }
    case TNT__METRIC_EQUAL: /* tf.equal(y_true, y_pred), the mean over everything */
        for (int64_t i = 0; i < n; i++) {
            int64_t hits = 0;
            for (int64_t j = 0; j < c; j++) hits += pred[i * c + j] == y_true[i * c + j];
            total += (double)hits / (double)c;
        }
        break;
    case TNT__METRIC_TP:
    case TNT__METRIC_FP:
    case TNT__METRIC_TN:
    case TNT__METRIC_FN:
    case TNT__METRIC_PRECISION:
    case TNT__METRIC_RECALL: {
        /* metrics_utils.update_confusion_matrix_variables: a label is positive when it is not 0,
         * a prediction when it exceeds the threshold; every value of every row counts */
        double tp = 0, fp = 0, tn = 0, fn = 0;
        for (int64_t i = 0; i < n * c; i++) {
            bool pp = pred[i] > m->threshold, lp = y_true[i] != 0.0f;
            tp += pp && lp, fp += pp && !lp, tn += !pp && !lp, fn += !pp && lp;
        }
        double counted = kind == TNT__METRIC_PRECISION ? tp + fp : kind == TNT__METRIC_RECALL ? tp + fn : (double)(n * c);
        *sum += kind == TNT__METRIC_FP ? fp : kind == TNT__METRIC_TN ? tn : kind == TNT__METRIC_FN ? fn : tp;
        *count += counted;
        return TNT_OK;
    }
    case TNT__METRIC_KLD:
    case TNT__METRIC_HINGE:
    case TNT__METRIC_SQUARED_HINGE:
    case TNT__METRIC_CATEGORICAL_HINGE:
    case TNT__METRIC_LOGCOSH:
    case TNT__METRIC_POISSON:
    case TNT__METRIC_MAPE:
    case TNT__METRIC_MSLE:
    case TNT__METRIC_COSINE:
    case TNT__METRIC_RMSE: {
        static const tnt_loss_kind AS_LOSS[] = {TNT_KL_DIVERGENCE, TNT_HINGE, TNT_SQUARED_HINGE, TNT_CATEGORICAL_HINGE,
                                                TNT_LOG_COSH, TNT_POISSON, TNT_MEAN_ABSOLUTE_PERCENTAGE_ERROR,
                                                TNT_MEAN_SQUARED_LOGARITHMIC_ERROR, TNT_COSINE_SIMILARITY,
                                                TNT_MEAN_SQUARED_ERROR};
        tnt_status s = tnt__loss_compute(AS_LOSS[kind - TNT__METRIC_KLD], false, n, c, pred, y_true, 0.0, NULL, &total);
        if (s != TNT_OK) return tnt__error_prefix(s, "metric \"%s\": ", m->name);
        if (kind == TNT__METRIC_COSINE) total = -total; /* the metric is the similarity itself */
        break;
    }
    default: return tnt__error(TNT_ERR_ARG, "metric \"%s\": unknown kind %d", m->name, m->kind);
    }
    *sum += total;
    *count += (double)n;
    return TNT_OK;
}

double tnt__metric_value(const tnt__metric *m, double sum, double count) {
    switch (m->kind) {
    case TNT__METRIC_TP:
    case TNT__METRIC_FP:
    case TNT__METRIC_TN:
    case TNT__METRIC_FN: return sum;
    case TNT__METRIC_PRECISION:
    case TNT__METRIC_RECALL: return count > 0 ? sum / count : 0.0;
    case TNT__METRIC_RMSE: return count > 0 ? sqrt(sum / count) : NAN;
    default: return count > 0 ? sum / count : NAN;
    }
}

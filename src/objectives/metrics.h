/* metrics.h: Keras metrics named in tnt_compile_opts.metrics, kept as (sum, count) pairs so
 * that epoch values are exact sample means and aggregate exactly across batches and ranks. */
#ifndef TNT_TRAIN_METRICS_H
#define TNT_TRAIN_METRICS_H

#include "tarantella.h"

typedef enum tnt__metric_kind {
    /* "accuracy"/"acc" and "crossentropy"/"ce": resolved at update time from the output size c
     * and the loss, by Keras's rule (compile_utils._get_metric_object): c == 1 -> binary; sparse
     * labels (loss sparse_categorical_crossentropy) -> sparse categorical; else categorical. */
    TNT__METRIC_ACCURACY = 0,
    TNT__METRIC_CROSSENTROPY,
    TNT__METRIC_SPARSE_CATEGORICAL_ACCURACY,
    TNT__METRIC_CATEGORICAL_ACCURACY,
    TNT__METRIC_BINARY_ACCURACY,
    TNT__METRIC_SPARSE_TOP_K, /* sparse_top_k_categorical_accuracy */
    TNT__METRIC_TOP_K,        /* top_k_categorical_accuracy */
    TNT__METRIC_MSE,
    TNT__METRIC_MAE,
    TNT__METRIC_SPARSE_CE, /* the cross-entropies as metrics: from probabilities, as Keras */
    TNT__METRIC_CE,
    TNT__METRIC_BCE,
    /* the other losses as metrics (Keras's metric classes of the same names) */
    TNT__METRIC_KLD,
    TNT__METRIC_HINGE,
    TNT__METRIC_SQUARED_HINGE,
    TNT__METRIC_CATEGORICAL_HINGE,
    TNT__METRIC_LOGCOSH,
    TNT__METRIC_POISSON,
    TNT__METRIC_MAPE,
    TNT__METRIC_MSLE,
    TNT__METRIC_COSINE,   /* cosine_similarity: +cos, unlike the loss */
    TNT__METRIC_RMSE,     /* sqrt of the mean squared error over everything seen */
    TNT__METRIC_EQUAL,    /* Keras's Accuracy class: the fraction of values equal to their label */
    /* the confusion-matrix family at one threshold (pred > threshold, label != 0 is positive):
     * counts logged as sums; precision = TP / (TP + FP) and recall = TP / (TP + FN) as (sum, count),
     * 0 when the count is 0 (Keras's div_no_nan) */
    TNT__METRIC_TP,
    TNT__METRIC_FP,
    TNT__METRIC_TN,
    TNT__METRIC_FN,
    TNT__METRIC_PRECISION,
    TNT__METRIC_RECALL,
    /* Keras's AUC (multi_label=False, summation "interpolation"): the ROC or the PR curve's area
     * from TP/FP/TN/FN counts at num_thresholds thresholds (":N", default 200), kept in a curve
     * slot (tnt__curve_*) */
    TNT__METRIC_AUC,
    TNT__METRIC_PR_AUC,
    /* Keras's SensitivitySpecificityBase family on the same counts (thresholds 0, 1/(T-1), ..., 1):
     * the best of one rate where the other reaches the target (":target", kept in threshold) */
    TNT__METRIC_PRECISION_AT_RECALL,
    TNT__METRIC_RECALL_AT_PRECISION,
    TNT__METRIC_SENSITIVITY_AT_SPECIFICITY,
    TNT__METRIC_SPECIFICITY_AT_SENSITIVITY,
    TNT__METRIC_COUNT
} tnt__metric_kind;

#define TNT__METRIC_NAME_MAX 48

typedef struct tnt__metric {
    char name[TNT__METRIC_NAME_MAX]; /* the log key: the name as written, e.g. "acc", "mse",
                                        "sparse_top_k_categorical_accuracy:3" */
    int kind;                        /* tnt__metric_kind */
    int k;                           /* top-k: k (default 5); else 0 */
    float threshold;                 /* binary accuracy and the confusion family (default 0.5) */
    int output;                      /* "spec@K": output K only (Keras's metrics per output); -1: all */
    int num_thresholds;              /* AUC: Keras's num_thresholds (default 200) */
    tnt_loss_kind loss;              /* the compiled loss, which fixes the label layout */
    bool weighted;                   /* "~spec": weighted by the sample weights (Keras's
                                        weighted_metrics); other metrics ignore them */
} tnt__metric;

/* Parses a comma-separated list of Keras metric names (spaces allowed around names; names are
 * matched case-insensitively and with or without underscores, so Keras class names such as
 * "SparseCategoricalAccuracy" work too). Top-k metrics take k = 5 or a ":K" suffix; binary
 * accuracy and the confusion family a threshold as ":T" (default 0.5). "logname=spec" logs the
 * metric spec under logname (Keras's name= argument); a final "@K" computes it on output K only
 * (Keras's metrics given per output), e.g. "mae@1". A leading "~" weights the metric by the
 * sample weights (Keras's weighted_metrics; the others are unweighted), e.g. "~weighted_mae=mae".
 * A metric whose
 * labels do not fit the loss (e.g. categorical_accuracy with sparse labels) is an error, as are
 * unknown names, empty entries, duplicates and more than max_out metrics. Returns the count (0
 * for NULL or ""), or -1 with tnt_last_error() naming the offending entry. */
int tnt__metrics_parse(const char *spec, tnt_loss_kind loss, tnt__metric *out, int max_out);
/* The kind a plain metric name (no ":", "=", "@" or "~") stands for, -1 for none; raises no error. */
int tnt__metric_kind_of(const char *name);

/* TNT_ERR_ARG (naming the metric and what to use instead) when m's labels do not fit a loss's
 * layout (a sparse metric on dense labels or the reverse). tnt__metrics_parse with loss
 * TNT_LOSS_NONE skips this check. */
tnt_status tnt__metric_check_loss(const tnt__metric *m, tnt_loss_kind loss);

/* The concrete kind a metric computes for c outputs per sample (resolves accuracy/crossentropy). */
int tnt__metric_resolve(const tnt__metric *m, int64_t c);
/* Whether m reads one class index per position (sparse labels) for c outputs per position. */
bool tnt__metric_sparse_labels(const tnt__metric *m, int64_t c);
/* Whether metric m is computed on output k. */
static inline bool tnt__metric_on_output(const tnt__metric *m, int k) { return m->output < 0 || m->output == k; }
/* Keras name of a kind, e.g. "sparse_categorical_accuracy". */
const char *tnt__metric_kind_name(int kind);
/* The metric's value from its (sum, count) over batches and ranks: the mean sum / count (NaN when
 * nothing was counted), the sum for the confusion counts, 0 / 0 = 0 for precision and recall, and
 * the square root of the mean for root_mean_squared_error. */
double tnt__metric_value(const tnt__metric *m, double sum, double count);

/* Adds one batch: *sum += the sum over the n samples of the per-sample metric value, *count += n.
 * pred (n, c) is the model output (probabilities, or logits when the model ends without softmax:
 * argmax and top-k are the same either way); y_true is (n) class indices for sparse metrics, else
 * (n, c). Semantics are Keras's: argmax ties go to the first index (tf.argmax); binary accuracy
 * thresholds at 0.5 (pred > 0.5) and averages over the c outputs; top-k counts a sample when fewer
 * than k classes score strictly higher than the label's (tf.math.in_top_k: ties at the boundary
 * count as in), and a label that is out of range or whose score is not finite never counts. */
tnt_status tnt__metric_update(const tnt__metric *m, int64_t n, int64_t c, const float *pred, const float *y_true,
                              double *sum, double *count);

/* AUC's state: TP, FP, TN, FN at each threshold, as doubles that sum across batches and ranks. */
#define TNT__AUC_MAX_THRESHOLDS 200
#define TNT__CURVE_SIZE (4 * TNT__AUC_MAX_THRESHOLDS)
#define TNT__CURVE_SLOTS 8 /* AUC-family metrics (times the outputs each applies to) per model */
static inline bool tnt__metric_is_curve(const tnt__metric *m) {
    return m->kind >= TNT__METRIC_AUC && m->kind <= TNT__METRIC_SPECIFICITY_AT_SENSITIVITY;
}
/* Adds one batch's counts (each value of each row weighted by weight) to curve. */
tnt_status tnt__curve_update(const tnt__metric *m, int64_t n, int64_t c, const float *pred, const float *y_true,
                             double weight, double *curve);
/* The area under the curve the counts describe (Keras's AUC.result()). */
double tnt__curve_value(const tnt__metric *m, const double *curve);

#endif

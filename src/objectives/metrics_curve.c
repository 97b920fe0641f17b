/* metrics_curve.c: Keras's AUC (keras/metrics/confusion_metrics.py, metrics_utils.py) with
 * multi_label=False and summation_method "interpolation": TP, FP, TN and FN counted at
 * num_thresholds thresholds over every value of every row (a label is positive when it is not
 * 0, a prediction when it exceeds the threshold), summed across batches and ranks; the result is
 * the trapezoidal area under the ROC curve, or under the PR curve by Davis & Goadrich's
 * interpolation (metrics_utils's interpolate_pr_auc). */
#include "objectives/metrics.h"

#include "core/core.h"

#include <math.h>

/* Keras's thresholds, as float32: AUC's -eps, 1/(T-1), ..., (T-2)/(T-1), 1 + eps; the
 * SensitivitySpecificityBase family's 0 and 1 at the ends */
static float threshold(int kind, int i, int t) {
    bool auc = kind == TNT__METRIC_AUC || kind == TNT__METRIC_PR_AUC;
    if (i == 0) return auc ? 0.0f - 1e-7f : 0.0f;
    if (i == t - 1) return auc ? 1.0f + 1e-7f : 1.0f;
    return (float)((double)i / (double)(t - 1));
}

tnt_status tnt__curve_update(const tnt__metric *m, int64_t n, int64_t c, const float *pred, const float *y_true,
                             double weight, double *curve) {
    const int t = m->num_thresholds;
    if (t < 2 || t > TNT__AUC_MAX_THRESHOLDS)
        return tnt__error(TNT_ERR_ARG, "metric \"%s\": %d thresholds", m->name, t);
    float th[TNT__AUC_MAX_THRESHOLDS];
    for (int i = 0; i < t; i++) th[i] = threshold(m->kind, i, t);
    double *tp = curve, *fp = curve + t, *tn = curve + 2 * t, *fn = curve + 3 * t;
    for (int64_t v = 0; v < n * c; v++) {
        bool pos = y_true[v] != 0.0f;
        float p = pred[v];
        for (int i = 0; i < t; i++) {
            bool pp = p > th[i];
            if (pos) *(pp ? &tp[i] : &fn[i]) += weight;
            else *(pp ? &fp[i] : &tn[i]) += weight;
        }
    }
    return TNT_OK;
}

static double div_no_nan(double a, double b) { return b != 0 ? a / b : 0.0; }

double tnt__curve_value(const tnt__metric *m, const double *curve) {
    const int t = m->num_thresholds;
    const double *tp = curve, *fp = curve + t, *tn = curve + 2 * t, *fn = curve + 3 * t;
    double auc = 0;
    if (m->kind >= TNT__METRIC_PRECISION_AT_RECALL) {
        /* _find_max_under_constraint: the largest dependent rate among the thresholds whose
         * constrained rate reaches the target; 0 when none does */
        double best = 0;
        bool any = false;
        for (int i = 0; i < t; i++) {
            double recall = div_no_nan(tp[i], tp[i] + fn[i]), precision = div_no_nan(tp[i], tp[i] + fp[i]);
            double specificity = div_no_nan(tn[i], tn[i] + fp[i]), cons, dep;
            switch (m->kind) {
            case TNT__METRIC_PRECISION_AT_RECALL: cons = recall, dep = precision; break;
            case TNT__METRIC_RECALL_AT_PRECISION: cons = precision, dep = recall; break;
            case TNT__METRIC_SENSITIVITY_AT_SPECIFICITY: cons = specificity, dep = recall; break;
            default: cons = recall, dep = specificity; break;
            }
            if (cons >= (double)m->threshold && (!any || dep > best)) best = dep, any = true;
        }
        return best;
    }
    if (m->kind == TNT__METRIC_PR_AUC) {
        for (int i = 0; i + 1 < t; i++) {
            double dtp = tp[i] - tp[i + 1], p0 = tp[i] + fp[i], p1 = tp[i + 1] + fp[i + 1];
            double dp = p0 - p1;
            double slope = div_no_nan(dtp, dp > 0 ? dp : 0);
            double intercept = tp[i + 1] - slope * p1;
            double ratio = (p0 > 0 && p1 > 0) ? div_no_nan(p0, p1 > 0 ? p1 : 0) : 1.0;
            double denom = tp[i + 1] + fn[i + 1];
            auc += div_no_nan(slope * (dtp + intercept * log(ratio)), denom > 0 ? denom : 0);
        }
        return auc;
    }
    for (int i = 0; i + 1 < t; i++) {
        double x0 = div_no_nan(fp[i], fp[i] + tn[i]), x1 = div_no_nan(fp[i + 1], fp[i + 1] + tn[i + 1]);
        double y0 = div_no_nan(tp[i], tp[i] + fn[i]), y1 = div_no_nan(tp[i + 1], tp[i + 1] + fn[i + 1]);
        auc += (x0 - x1) * (y0 + y1) / 2.0;
    }
    return auc;
}

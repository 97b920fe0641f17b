/* standalone.c: Keras's loss and metric objects used outside fit (loss(y_true, y_pred),
 * metric.update_state / result): the same code as training, on arrays the caller holds. The
 * metric's state is a flat array of doubles (sum, count, then an AUC's counts), so that a caller
 * can keep it, add batches and reset it. */
#include "objectives/loss.h"
#include "objectives/metrics.h"

#include "core/core.h"

#include <math.h>

int64_t tnt_metric_state_size(void) { return 2 + TNT__CURVE_SIZE; }

/* positions per sample and values per position of an output (n, ..., c) seen without its batch */
static tnt_status layout(tnt_shape out, const char *who, int64_t *positions, int64_t *c) {
    if (out.ndim < 0 || out.ndim > TNT_MAX_DIMS)
        return tnt__error(TNT_ERR_SHAPE, "%s: output of rank %d", who, out.ndim);
    int64_t numel = tnt_shape_numel(out);
    *c = out.ndim ? out.dim[out.ndim - 1] : 1;
    if (numel <= 0 || *c <= 0) return tnt__error(TNT_ERR_SHAPE, "%s: empty output", who);
    *positions = numel / *c;
    return TNT_OK;
}

static tnt_status parse(const char *spec, tnt_loss_kind loss, tnt__metric *m) {
    int n = tnt__metrics_parse(spec, TNT_LOSS_NONE, m, 1);
    if (n != 1) return n < 0 ? tnt_last_status() : tnt__error(TNT_ERR_ARG, "metric: empty name");
    tnt_status s = loss != TNT_LOSS_NONE ? tnt__metric_check_loss(m, loss) : TNT_OK;
    m->loss = loss;
    return s;
}

tnt_status tnt_metric_update_state(const char *spec, tnt_loss_kind loss, tnt_shape out, int64_t n, const float *pred,
                                   const float *y_true, const float *sample_weight, double *state) {
    tnt__metric m;
    int64_t positions = 0, c = 0;
    tnt_status s = parse(spec, loss, &m);
    if (s == TNT_OK) s = layout(out, m.name, &positions, &c);
    if (s != TNT_OK) return s;
    if (n < 0 || (n > 0 && (!pred || !y_true)) || !state) return tnt__error(TNT_ERR_ARG, "metric \"%s\": NULL argument", m.name);
    bool sparse = loss == TNT_SPARSE_CATEGORICAL_CROSSENTROPY && !tnt__metric_is_curve(&m);
    int64_t per_y = sparse ? positions : positions * c;
    if (!sample_weight) { /* the batch at once: a hinge's label mapping is the whole batch's, as Keras */
        if (tnt__metric_is_curve(&m)) return tnt__curve_update(&m, n * positions, c, pred, y_true, 1.0, state + 2);
        return tnt__metric_update(&m, n * positions, c, pred, y_true, &state[0], &state[1]);
    }
    for (int64_t i = 0; i < n; i++) {
        double w = sample_weight[i];
        const float *p = pred + i * positions * c, *y = y_true + i * per_y;
        if (tnt__metric_is_curve(&m)) {
            s = tnt__curve_update(&m, positions, c, p, y, w, state + 2);
        } else {
            double sum = 0, count = 0;
            s = tnt__metric_update(&m, positions, c, p, y, &sum, &count);
            state[0] += w * sum, state[1] += w * count;
        }
        if (s != TNT_OK) return s;
    }
    return TNT_OK;
}

tnt_status tnt_metric_result(const char *spec, tnt_loss_kind loss, const double *state, double *value) {
    tnt__metric m;
    tnt_status s = parse(spec, loss, &m);
    if (s != TNT_OK) return s;
    if (!state || !value) return tnt__error(TNT_ERR_ARG, "metric \"%s\": NULL argument", m.name);
    *value = tnt__metric_is_curve(&m) ? tnt__curve_value(&m, state + 2) : tnt__metric_value(&m, state[0], state[1]);
    return TNT_OK;
}

tnt_status tnt_loss_value(tnt_loss_kind kind, bool from_logits, float label_smoothing, float huber_delta,
                          tnt_shape out, int64_t n, const float *pred, const float *y_true, const float *sample_weight,
                          double *value) {
    int64_t positions = 0, c = 0;
    tnt_status s = layout(out, tnt_loss_name(kind), &positions, &c);
    if (s != TNT_OK) return s;
    if (n <= 0 || !pred || !y_true || !value)
        return tnt__error(TNT_ERR_ARG, "%s: %lld samples or a NULL argument", tnt_loss_name(kind), (long long)n);
    tnt__loss_opts o = {.label_smoothing = label_smoothing, .huber_delta = huber_delta};
    int64_t per_y = kind == TNT_SPARSE_CATEGORICAL_CROSSENTROPY ? positions : positions * c;
    double total = 0;
    if (!sample_weight) {
        s = tnt__loss_compute_opts(kind, from_logits, &o, n * positions, c, pred, y_true, 0.0, NULL, &total, NULL);
        *value = total / (double)(n * positions);
        return s;
    }
    for (int64_t i = 0; i < n; i++) { /* Keras: sum_i w_i loss_i / n (SUM_OVER_BATCH_SIZE) */
        double l = 0;
        s = tnt__loss_compute_opts(kind, from_logits, &o, positions, c, pred + i * positions * c, y_true + i * per_y,
                                   0.0, NULL, &l, NULL);
        if (s != TNT_OK) return s;
        total += (sample_weight ? sample_weight[i] : 1.0) * l / (double)positions;
    }
    *value = total / (double)n;
    return TNT_OK;
}

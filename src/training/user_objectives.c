/* user_objectives.c: the user's losses and metrics in fit and evaluate (see user_objectives.h).
 * The per-sample sums and the Metric classes' state go into the pass's accumulator like the
 * built-in figures, so they are summed over ranks with them. */
#include "training/user_objectives.h"

#include "objectives/traced_loss.h"

float *tnt__sample_weights(const tnt_batch *b, int64_t stride, int64_t per, bool weighted, tnt_status *s) {
    if (!weighted) return NULL;
    float *sw = malloc((size_t)(b->n ? b->n : 1) * sizeof *sw);
    if (!sw) {
        *s = tnt__error(TNT_ERR_NOMEM, "loss: out of memory for sample weights");
        return NULL;
    }
    for (int64_t i = 0; i < b->n; i++) sw[i] = b->y.data[i * stride + per];
    return sw;
}

tnt_status tnt__user_loss(tnt_model *m, int k, const tnt__metric *mets, int64_t n, int64_t positions, int64_t c,
                          int64_t lk, const float *in, const float *pred, const float *y, const float *sw, double scale,
                          float *grad, double *loss_sum, double *sum, double *count,
                          double (*curve)[TNT__CURVE_SIZE]) {
    const int64_t numel = positions * c;
    tnt_status s = tnt__traced_loss_compute(m->traced_loss[k], n, in, y, sw, scale, grad, loss_sum);
    for (int j = 0; j < m->n_metrics && s == TNT_OK; j++) {
        if (!tnt__metric_on_output(&mets[j], k) || tnt__user_metric(m, j)) continue;
        /* built-in metrics read one label per output value, or a class index per position (sparse) */
        int64_t want = tnt__metric_sparse_labels(&mets[j], c) ? positions : numel;
        if (lk != want)
            return tnt__error(TNT_ERR_UNSUPPORTED, "metric \"%s\" with a loss function whose labels have %lld values "
                              "per sample for an output of %lld (it reads %lld)", mets[j].name, (long long)lk,
                              (long long)numel, (long long)want);
        for (int64_t i = 0; i < n && s == TNT_OK; i++) {
            double wi = sw && mets[j].weighted ? sw[i] : 1.0, ms = 0, mc = 0; /* Keras 2.4+: weighted_metrics only */
            if (m->curve_slot[k][j] >= 0) {
                s = tnt__curve_update(&mets[j], positions, c, pred + i * numel, y + i * lk, wi,
                                      curve[m->curve_slot[k][j]]);
                continue;
            }
            s = tnt__metric_update(&mets[j], positions, c, pred + i * numel, y + i * lk, &ms, &mc);
            sum[j] += wi * ms, count[j] += wi * mc;
        }
    }
    return s;
}

tnt_status tnt__user_metrics(tnt_model *m, int k, const tnt__metric *mets, int64_t n, int64_t lk, const float *pred,
                             const float *y, const float *sw, double *sum, double *count, double *state) {
    tnt_status s = TNT_OK;
    double wsum = 0;
    for (int64_t i = 0; i < n; i++) wsum += sw ? (double)sw[i] : 1.0;
    for (int j = 0; j < m->n_metrics && s == TNT_OK; j++) {
        if (!tnt__metric_on_output(&mets[j], k)) continue;
        /* sample weights reach Keras's weighted_metrics only (Keras 2.4+) */
        const float *swj = mets[j].weighted ? sw : NULL;
        if (m->traced_metric[j]) { /* a function: the mean of its per-sample values, as Keras's */
            int64_t want = tnt__traced_loss_labels(m->traced_metric[j]);
            if (want != lk)
                return tnt__error(TNT_ERR_SHAPE, "metric \"%s\": its function takes %lld label values per sample, "
                                  "output %d has %lld", mets[j].name, (long long)want, k, (long long)lk);
            s = tnt__traced_loss_compute(m->traced_metric[j], n, pred, y, swj, 0.0, NULL, &sum[j]);
            count[j] += swj ? wsum : (double)n;
        } else if (m->state_metric[j]) { /* a Metric class: its state */
            int64_t want = tnt__state_metric_labels(m->state_metric[j]);
            if (want != lk)
                return tnt__error(TNT_ERR_SHAPE, "metric \"%s\": its update takes %lld label values per sample, "
                                  "output %d has %lld", mets[j].name, (long long)want, k, (long long)lk);
            s = tnt__state_metric_update(m->state_metric[j], n, pred, y, swj, state + m->state_metric_off[j]);
        }
    }
    return s;
}

/* fit.c: fit, evaluate and predict (compile.c: compile). One training step: this rank's share of
 * the global batch, forward, loss summed over the local samples and scaled by 1/global batch,
 * backward (last layer first) into the flat gradient buffer while fused buckets are allreduced,
 * one optimizer pass over the flat buffers. Loss and metrics are kept as (sum, count) so that
 * epoch figures are exact sample means, as Keras reports them, summed over ranks. */
#include "data/dataset.h"
#include "core/timeline.h"
#include "comm/comm.h"
#include "training/history.h"
#include "model/model.h"
#include "model/device.h"
#include "training/parallel.h"
#include "training/progress.h"
#include "objectives/loss.h"
#include "objectives/traced_loss.h"
#include "training/user_objectives.h"
#include "optimizers/optimizer.h"
#include "layers/regularizer.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>

/* Running sums of one pass over data: the loss and each metric of each output as (sum, count).
 * With several outputs the loss is the sum of the outputs' losses times their loss_weights, and
 * out_loss the unweighted loss of each output, as Keras's. */
typedef struct accum {
    double loss_sum, loss_count;
    double out_loss[TNT_MAX_IO];
    double sum[TNT_MAX_IO][TNT_MAX_METRICS], count[TNT_MAX_IO][TNT_MAX_METRICS];
    double state[TNT__METRIC_STATE_MAX]; /* the user's Metric classes' state (m->state_metric) */
    double curve[TNT__CURVE_SLOTS][TNT__CURVE_SIZE]; /* AUC counts (m->curve_slot) */
} accum;

/* Keras 2 names the figures of output k after its layer: "dense_1_loss", "dense_1_accuracy". */
static const char *output_prefix(const tnt_model *m, int k, char *buf, size_t size) {
    if (m->n_outputs == 1) return NULL;
    snprintf(buf, size, "%s_", tnt__model_output_name(m, k));
    return buf;
}

static void accum_logs(const tnt_model *m, const accum *a, tnt_logs *logs) {
    logs->n = 0;
    double count = a->loss_count > 0 ? a->loss_count : NAN;
    tnt__logs_set(logs, NULL, "loss", a->loss_sum / count);
    for (int o = 0; o < m->n_outputs && m->n_outputs > 1; o++) {
        char pre[TNT_NAME_MAX + 2];
        tnt__logs_set(logs, output_prefix(m, o, pre, sizeof pre), "loss", a->out_loss[o] / count);
    }
    for (int o = 0; o < m->n_outputs; o++)
        for (int k = 0; k < m->n_metrics; k++) {
            char pre[TNT_NAME_MAX + 2];
            if (!tnt__metric_on_output(&m->metrics[k], o)) continue;
            int slot = m->curve_slot[o][k];
            tnt__logs_set(logs, output_prefix(m, o, pre, sizeof pre), m->metrics[k].name,
                          m->state_metric[k] ? tnt__state_metric_result(m->state_metric[k], a->state + m->state_metric_off[k])
                          : slot >= 0 ? tnt__curve_value(&m->metrics[k], a->curve[slot])
                                    : tnt__metric_value(&m->metrics[k], a->sum[o][k], a->count[o][k]));
        }
}

static void accum_add(const tnt_model *m, accum *acc, const accum *step) {
    acc->loss_sum += step->loss_sum;
    acc->loss_count += step->loss_count;
    for (int o = 0; o < m->n_outputs; o++) {
        acc->out_loss[o] += step->out_loss[o];
        for (int k = 0; k < m->n_metrics; k++) acc->sum[o][k] += step->sum[o][k], acc->count[o][k] += step->count[o][k];
    }
    for (int64_t i = 0; i < m->n_metric_state; i++) acc->state[i] += step->state[i];
    for (int i = 0; i < TNT__CURVE_SLOTS; i++)
        for (int t = 0; t < TNT__CURVE_SIZE; t++) acc->curve[i][t] += step->curve[i][t];
}

/* Label values per sample for output k: sparse labels have one per position (all axes but the
 * last, the classes), others one per output value. */
static int64_t labels_per_sample(const tnt_model *m, int k) {
    if (m->traced_loss[k]) return tnt__traced_loss_labels(m->traced_loss[k]);
    tnt_shape out = m->tensor_shape[m->outputs[k]];
    int64_t n = tnt_shape_numel(out);
    return m->output_loss[k] == TNT_SPARSE_CATEGORICAL_CROSSENTROPY ? n / out.dim[out.ndim - 1] : n;
}

static bool ignores_labels(const tnt_model *m) { return m->loss_opts && m->loss_opts->has_ignore_class; }

void tnt_model_stop_training(tnt_model *m) {
    if (m) m->stop_training = true;
}

/* A model with None input dimensions takes the shapes of the data before a pass over it (the
 * sizes of its outputs follow): a single input's, or several inputs' as the dataset records
 * them (tnt_dataset_set_x_parts); else several inputs keep the caller's. */
static tnt_status instance_for(tnt_model *m, const tnt_dataset *data, const char *who) {
    if (!m->variable || !data) return TNT_OK;
    const tnt_shape *parts;
    if (m->n_inputs > 1) {
        if (tnt_dataset_x_parts(data, &parts) != m->n_inputs) return TNT_OK;
        return tnt__model_instantiate(m, parts, who);
    }
    tnt_shape xs = tnt_dataset_x_shape(data);
    return tnt__model_instantiate(m, &xs, who);
}

/* Sample weights per sample in a weighted batch after its labels: one for every output, or one per
 * output (Keras's list of sample weights of a multi-output model); 0 when not weighted. */
static int64_t weights_per_sample(const tnt_model *m, const tnt_batch *b, bool weighted) {
    if (!weighted) return 0;
    int64_t per = 0, total = b->n ? tnt_shape_numel(b->y.shape) / b->n : 0;
    for (int k = 0; k < m->n_outputs; k++) per += labels_per_sample(m, k);
    return m->n_outputs > 1 && total - per == m->n_outputs ? m->n_outputs : 1;
}

/* Checks a batch against the model: input shape and label count per sample. */
static tnt_status check_batch(tnt_model *m, const tnt_batch *b, bool need_labels, bool weighted, const char *who) {
    char a[96], c[96];
    tnt_shape xs = b->x.shape;
    xs.ndim--;
    memmove(xs.dim, xs.dim + 1, (size_t)xs.ndim * sizeof xs.dim[0]);
    /* variable (None) dimensions: a single input takes the batch's shape; several inputs come
     * packed, so their shapes are the caller's (tnt_model_set_input_shapes) */
    if (m->variable && m->n_inputs == 1) {
        tnt_status s = tnt__model_instantiate(m, &xs, who);
        if (s != TNT_OK) return s;
    } else if (m->variable && !m->inst_known) {
        return tnt__error(TNT_ERR_STATE, "%s: model \"%s\" has %d inputs with variable (None) dimensions: fix their "
                          "shapes with tnt_model_set_input_shapes first (the dataset packs them)", who, m->name, m->n_inputs);
    } else {
        tnt_status s = tnt__model_sync_layers(m, who); /* layers shared with a model run since */
        if (s != TNT_OK) return s;
    }
    if (!tnt__shape_equal(xs, m->input_shape))
        return tnt__error(TNT_ERR_SHAPE, "%s: dataset elements have shape %s, model \"%s\" expects input %s",
                          who, tnt_shape_str(xs, a, sizeof a), m->name, tnt_shape_str(m->input_shape, c, sizeof c));
    if (!need_labels) return TNT_OK;
    int64_t per = b->n && b->y.data ? tnt_shape_numel(b->y.shape) / b->n : 0;
    int64_t want = 0;
    for (int k = 0; k < m->n_outputs; k++) want += labels_per_sample(m, k);
    want += weights_per_sample(m, b, weighted);
    if (!b->y.data && want == 0) return TNT_OK; /* losses that read no labels (a layer's add_loss only) */
    if (!b->y.data) return tnt__error(TNT_ERR_ARG, "%s: dataset has no labels (y)", who);
    if (b->n && per != want)
        return tnt__error(TNT_ERR_SHAPE, "%s: labels have %lld values per sample (shape %s), loss %s with output %s expects %lld%s",
                          who, (long long)per, tnt_shape_str(b->y.shape, a, sizeof a), tnt_loss_name(m->loss),
                          tnt_shape_str(m->output_shape, c, sizeof c), (long long)want,
                          weighted ? " (the labels and a sample weight, or one per output)" : "");
    if (weighted && ignores_labels(m))
        return tnt__error(TNT_ERR_UNSUPPORTED, "%s: sample weights with ignore_class are not supported", who);
    return TNT_OK;
}

/* Loss and metrics of one forward pass; with_grad: the loss gradients are written to the
 * outputs' gradient buffers. Labels of several outputs come packed per sample. An output of rank
 * > 1, e.g. a sequence (T, classes), runs on n*T rows of its last axis; each sample's loss is the
 * mean over its positions, as Keras's (a metric counts every position). With ignore_class the loss is summed over the positions not ignored, and
 * acc->loss_count counts them (the caller scales the gradient by the global count). */
static tnt_status loss_and_metrics(tnt_model *m, tnt__plan *p, const float *x, const tnt_batch *b,
                                   double inv_batch, bool with_grad, bool weighted, accum *acc) {
    int64_t per = 0, col = 0, valid_total = 0;
    for (int k = 0; k < m->n_outputs; k++) per += labels_per_sample(m, k);
    const int64_t n_w = weights_per_sample(m, b, weighted);
    const int64_t stride = per + n_w; /* a sample's labels, then its weight (or one per output) */
    float *labels = NULL;
    tnt_status s = TNT_OK;
    bool ignore = ignores_labels(m);
    for (int k = 0; k < m->n_outputs && s == TNT_OK; k++) {
        tnt_shape os = m->tensor_shape[m->outputs[k]];
        int64_t lk = labels_per_sample(m, k), c = tnt_shape_numel(os), numel = c;
        /* Keras reduces every loss and metric over the last axis, then averages the positions
         * (all other axes): one row per position, whatever the output's rank */
        int64_t positions = os.ndim > 1 ? c / os.dim[os.ndim - 1] : 1;
        int64_t rows = b->n * positions;
        c /= positions;
        const float *y = b->y.data;
        if (m->n_outputs > 1 || weighted) {
            if (!labels && !(labels = malloc((size_t)(b->n * per + 1) * sizeof(float))))
                return tnt__error(TNT_ERR_NOMEM, "loss: out of memory for labels");
            for (int64_t i = 0; i < b->n; i++)
                memcpy(labels + i * lk, b->y.data + i * stride + col, (size_t)lk * sizeof(float));
            y = labels;
            col += lk;
        }
        double loss_sum = 0;
        int64_t valid = 0;
        /* Keras's loss_weights scale output k's share of the total loss and of its gradient */
        double w = m->loss_weights[k];
        const float *in = tnt__plan_loss_input(m, p, k, x), *pred = tnt__plan_output(m, p, k, x);
        float *grad = with_grad ? tnt__plan_output_grad(m, p, k) : NULL;
        bool logits = m->from_logits || m->fused_output_loss[k];
        const tnt_loss_kind kind = m->output_loss[k];
        /* the metrics read the labels as this output's loss lays them out */
        tnt__metric mets[TNT_MAX_METRICS];
        for (int j = 0; j < m->n_metrics; j++) mets[j] = m->metrics[j], mets[j].loss = kind;
        /* this output's sample weights: the one column, or its own of one per output */
        float *sw = m->traced_loss[k] || m->n_metrics
                        ? tnt__sample_weights(b, stride, per + (n_w > 1 ? k : 0), weighted, &s) : NULL;
        if (s != TNT_OK) break;
        if (m->traced_loss[k]) { /* the user's loss function: per-sample losses, already the mean over positions */
            s = tnt__user_loss(m, k, mets, b->n, positions, c, lk, in, pred, y, sw, w * inv_batch, grad, &loss_sum,
                               acc->sum[k], acc->count[k], acc->curve);
            loss_sum *= (double)positions;
        } else if (!weighted) {
            s = tnt__loss_compute_opts(kind, logits, m->loss_opts, rows, c, in, y,
                                       w * (ignore ? 1.0 : inv_batch / (double)positions), grad, &loss_sum, &valid);
            for (int j = 0; j < m->n_metrics && s == TNT_OK; j++)
                if (m->curve_slot[k][j] >= 0)
                    s = tnt__curve_update(&mets[j], rows, c, pred, y, 1.0, acc->curve[m->curve_slot[k][j]]);
                else if (tnt__metric_on_output(&mets[j], k) && !tnt__user_metric(m, j))
                    s = tnt__metric_update(&mets[j], rows, c, pred, y, &acc->sum[k][j], &acc->count[k][j]);
        } else {
            /* Keras's sample_weight: sample i's loss (and gradient) times w_i, the sum still divided
             * by the batch size; the weighted metrics' values and counts times w_i (weighted means),
             * the other metrics' unweighted (Keras 2.4+) */
            for (int64_t i = 0; i < b->n && s == TNT_OK; i++) {
                double wi = b->y.data[i * stride + per + (n_w > 1 ? k : 0)], li = 0, ms, mc;
                if (!isfinite(wi)) {
                    s = tnt__error(TNT_ERR_ARG, "sample weight %g of sample %lld is not a finite number", wi, (long long)i);
                    break;
                }
                s = tnt__loss_compute_opts(kind, logits, m->loss_opts, positions, c, in + i * numel, y + i * lk,
                                           w * wi * inv_batch / (double)positions, grad ? grad + i * numel : NULL, &li,
                                           NULL);
                loss_sum += wi * li;
                for (int j = 0; j < m->n_metrics && s == TNT_OK; j++) {
                    double mw = mets[j].weighted ? wi : 1.0;
                    if (m->curve_slot[k][j] >= 0) {
                        s = tnt__curve_update(&mets[j], positions, c, pred + i * numel, y + i * lk, mw,
                                              acc->curve[m->curve_slot[k][j]]);
                        continue;
                    }
                    if (!tnt__metric_on_output(&mets[j], k) || tnt__user_metric(m, j)) continue;
                    ms = mc = 0;
                    s = tnt__metric_update(&mets[j], positions, c, pred + i * numel, y + i * lk, &ms, &mc);
                    acc->sum[k][j] += mw * ms, acc->count[k][j] += mw * mc;
                }
            }
        }
        if (s == TNT_OK) s = tnt__user_metrics(m, k, mets, b->n, lk, pred, y, sw, acc->sum[k], acc->count[k], acc->state);
        free(sw);
        if (s != TNT_OK) break;
        if (!ignore) loss_sum /= (double)positions;
        valid_total += valid;
        acc->loss_sum += w * loss_sum;
        acc->out_loss[k] += loss_sum;
    }
    free(labels);
    if (s == TNT_OK) acc->loss_count += ignore ? (double)valid_total : (double)b->n;
    return s;
}

/* The weight regularizers' penalty (the same on every rank: the weights are). */
static double weight_penalty(const tnt_model *m) {
    double sum = 0;
    for (int i = 0; i < m->n_layers; i++)
        if (m->layers[i]->rules) sum += tnt__layer_weight_penalty(m->layers[i]);
    return sum;
}

/* Keras reports the loss plus the regularization penalties (model.losses): the weights' and the
 * activity penalty of the last forward over its n samples divided by the batch size, counted
 * once for each of the counted samples (or labelled positions) the pass added to a. Over the
 * ranks of a step, the shares' activity penalties sum to the global one. */
static void add_penalties(const tnt_model *m, accum *a, double counted, int64_t n, double weights) {
    a->loss_sum += counted * (weights + m->activity_penalty / (double)n);
}

/* Keras's trainable: false (a frozen layer, tnt_layer.frozen): its weights are none of the
 * optimizer's variables. Their gradients are zeroed before the update (out of a global clipnorm
 * too) and their values kept through it (weight decay, constraints): freeze copies them out,
 * thaw puts them back and frees the copy. NULL when no layer is frozen. */
static tnt_status freeze(tnt_model *m, float **copy) {
    *copy = NULL;
    size_t n = 0, o = 0;
    for (int i = 0; i < m->n_layers; i++)
        for (int j = 0; m->layers[i]->frozen && j < m->layers[i]->n_weights; j++)
            if (m->layers[i]->weights[j].grad) n += (size_t)tnt_shape_numel(m->layers[i]->weights[j].shape);
    if (n == 0) return TNT_OK;
    if (!(*copy = malloc(n * sizeof **copy))) return tnt__error(TNT_ERR_NOMEM, "fit: out of memory");
    for (int i = 0; i < m->n_layers; i++)
        for (int j = 0; m->layers[i]->frozen && j < m->layers[i]->n_weights; j++) {
            tnt__weight *w = &m->layers[i]->weights[j];
            if (!w->grad) continue;
            size_t k = (size_t)tnt_shape_numel(w->shape);
            memcpy(*copy + o, w->value, k * sizeof(float));
            memset(w->grad, 0, k * sizeof(float));
            o += k;
        }
    return TNT_OK;
}

static void thaw(tnt_model *m, float *copy) {
    size_t o = 0;
    for (int i = 0; copy && i < m->n_layers; i++)
        for (int j = 0; m->layers[i]->frozen && j < m->layers[i]->n_weights; j++) {
            tnt__weight *w = &m->layers[i]->weights[j];
            if (!w->grad) continue;
            size_t k = (size_t)tnt_shape_numel(w->shape);
            memcpy(w->value, copy + o, k * sizeof(float));
            o += k;
        }
    free(copy);
}

/* After the optimizer update: each rank projects the same weights the same way. */
static tnt_status apply_constraints(tnt_model *m) {
    for (int i = 0; i < m->n_layers; i++) {
        tnt_status s = m->layers[i]->rules ? tnt__layer_apply_constraints(m->layers[i]) : TNT_OK;
        if (s != TNT_OK) return tnt__error_prefix(s, "fit: ");
    }
    return TNT_OK;
}

/* Multiplies every output's loss gradient by scale. */
static void scale_output_grads(tnt_model *m, tnt__plan *p, int64_t n, float scale) {
    for (int k = 0; k < m->n_outputs; k++) {
        float *d = tnt__plan_output_grad(m, p, k);
        int64_t len = n * tnt_shape_numel(m->tensor_shape[m->outputs[k]]);
        for (int64_t i = 0; i < len; i++) d[i] *= scale;
    }
}

/* One training step. Returns 1 after a step, 0 at the end of the data, or a negative status;
 * every rank returns the same. */
static int train_step(tnt_model *m, tnt__feed *f, accum *acc, const tnt_callback *cbs, int n_cbs, int64_t index) {
    tnt_batch b = {0};
    tnt__step st = {.training = true, .parallel = tnt__is_parallel(m)};
    double t0 = TNT_TL_BEGIN();
    int r = tnt__feed_next(f, &b, &st);
    TNT_TL_END("data", "next batch", -1, t0);
    tnt_status s = r < 0 ? (tnt_status)r : TNT_OK;
    /* on_train_batch_begin once the batch exists (none after the last), with no logs, as Keras;
     * a failure takes the step's agreement path */
    const tnt_logs no_logs = {0};
    for (int i = 0; r == 1 && i < n_cbs && s == TNT_OK; i++)
        if (cbs[i].on_train_batch_begin && (!cbs[i].master_only || tnt_is_master_rank()))
            s = cbs[i].on_train_batch_begin(m, index, &no_logs, cbs[i].user);
    if (r == 1 && s == TNT_OK) s = check_batch(m, &b, true, f->weighted, "fit");
    /* a global batch smaller than the ranks leaves some shares empty: those ranks add zero
     * gradients (below) and take part in the allreduce as the others do */
    accum step = {0};
    tnt__plan *p = NULL;
    bool have = r == 1 && b.n > 0 && s == TNT_OK;
    if (have) {
        tnt__warn_small_micro_batch(m, b.n);
        if (!(p = tnt__model_plan(m, b.n))) s = TNT_ERR_BACKEND;
    }
    int go = tnt__parallel_step_enter(m, &st, s, have);
    if (go <= 0) return go;
    if (have && s == TNT_OK) {
        float *pred;
        st.seed = tnt__model_training_seed(m);
        s = tnt__model_forward(m, p, b.x.data, &st, &pred);
        /* the loss is summed over local samples and divided by the global batch, so the sum over
         * ranks is the serial mean; unsplit feeds learn the global count below */
        if (s == TNT_OK)
            s = loss_and_metrics(m, p, b.x.data, &b, f->split || !st.parallel ? 1.0 / (double)st.global_n : 1.0,
                                 true, f->weighted, &step);
        if (s == TNT_OK) add_penalties(m, &step, step.loss_count, b.n, weight_penalty(m));
    }
    tnt__step_counts counts = {r == 1, have ? b.n : 0, (int64_t)step.loss_count};
    if ((go = tnt__parallel_step_begin(m, &st, s, &counts)) <= 0) return go;
    if (counts.samples == 0) return 1; /* no rank had samples: nothing to learn */
    /* the mean over the global batch (or its positions not ignored) */
    if (have && ignores_labels(m))
        scale_output_grads(m, p, b.n, counts.positions ? (float)(1.0 / (double)counts.positions) : 0.0f);
    else if (have && !f->split && st.parallel)
        scale_output_grads(m, p, b.n, (float)(1.0 / (double)counts.samples));
    st.activity_grad_scale = 1.0 / (double)(f->split || !st.parallel ? st.global_n : counts.samples);
    if (have) s = tnt__model_backward(m, p, b.x.data, &st);
    else memset(m->grads, 0, (size_t)m->n_params * sizeof(float)); /* an empty share adds nothing */
    if ((s = tnt__parallel_step_end(m, &st, s)) != TNT_OK) return s;
    /* The weight penalties' gradients join the summed data gradients after the allreduce: they
     * depend on the weights alone, which every rank holds the same, so each rank adds them once,
     * exactly as serial training does (no 1/p scaling, no rounding that depends on p). */
    for (int i = 0; i < m->n_layers; i++)
        if (m->layers[i]->rules) tnt__layer_add_penalty_grads(m->layers[i]);
    t0 = TNT_TL_BEGIN();
    float *frozen = NULL; /* frozen layers' weights, put back after the update */
    if ((s = m->on_device ? tnt__dev_freeze(m, &frozen) : freeze(m, &frozen)) != TNT_OK) return s;
    if ((s = tnt__parallel_optimizer_step(m, &st)) == TNT_OK) {
        tnt__optimizer_finish_step(m->optimizer);
        s = apply_constraints(m);
    }
    if (m->on_device) tnt__dev_thaw(m, frozen);
    else thaw(m, frozen);
    if (s != TNT_OK) return s;
    TNT_TL_END("optimizer", "optimizer", -1, t0);
    accum_add(m, acc, &step);
    return 1;
}

/* Sums of all ranks (exact aggregation: sums and counts, never means of means). */
static tnt_status accum_global(const tnt_model *m, const accum *local, accum *global, bool parallel) {
    *global = *local;
    if (!parallel) return TNT_OK;
    /* the curves in use only (AUC's counts are most of the struct) */
    int curves = 0;
    for (int k = 0; k < m->n_outputs; k++)
        for (int j = 0; j < m->n_metrics; j++)
            if (m->curve_slot[k][j] >= curves) curves = m->curve_slot[k][j] + 1;
    size_t bytes = offsetof(accum, curve) + (size_t)curves * sizeof global->curve[0];
    return tnt__allreduce_sum_f64((double *)global, (int64_t)(bytes / sizeof(double)));
}

/* master_only callbacks (Tarantella's run_on_all_ranks=False) run on the master rank only. */
/* As CALL_CB for (model, index, logs) callbacks, giving callbacks with local_logs this rank's
 * own figures (Tarantella's aggregate_logs=False) instead of the global ones. */
#define CALL_CB_LOGS(cbs, n, fn, model, index, global, local)                                     \
    do {                                                                                          \
        double tl0_ = TNT_TL_BEGIN();                                                             \
        for (int i_ = 0; i_ < (n); i_++)                                                          \
            if ((cbs)[i_].fn && (!(cbs)[i_].master_only || tnt_is_master_rank())) {               \
                tnt_status cs_ = (cbs)[i_].fn(model, index, (cbs)[i_].local_logs ? (local) : (global), \
                                              (cbs)[i_].user);                                    \
                if (cs_ != TNT_OK) {                                                              \
                    s = cs_;                                                                      \
                    goto done;                                                                    \
                }                                                                                 \
            }                                                                                     \
        if (n) TNT_TL_END("callback", #fn, -1, tl0_);                                            \
    } while (0)

#define CALL_CB(cbs, n, fn, ...)                                                                  \
    do {                                                                                          \
        double tl0_ = TNT_TL_BEGIN();                                                             \
        for (int i_ = 0; i_ < (n); i_++)                                                          \
            if ((cbs)[i_].fn && (!(cbs)[i_].master_only || tnt_is_master_rank())) {               \
                tnt_status cs_ = (cbs)[i_].fn(__VA_ARGS__, (cbs)[i_].user);                       \
                if (cs_ != TNT_OK) {                                                              \
                    s = cs_;                                                                      \
                    goto done;                                                                    \
                }                                                                                 \
            }                                                                                     \
        if (n) TNT_TL_END("callback", #fn, -1, tl0_);                                            \
    } while (0)

/* As CALL_CB, inside a loop that must reach the ranks' agreement: the first failure lands in
 * status and the remaining callbacks are skipped (the caller breaks out). */
#define CALL_CB_SOFT(status, cbs, n, fn, ...)                                                     \
    do {                                                                                          \
        for (int i_ = 0; i_ < (n) && (status) == TNT_OK; i_++)                                    \
            if ((cbs)[i_].fn && (!(cbs)[i_].master_only || tnt_is_master_rank()))                 \
                (status) = (cbs)[i_].fn(__VA_ARGS__, (cbs)[i_].user);                             \
    } while (0)

/* on_predict_batch_end with the batch's n rows of predictions readable (tnt_model_batch_outputs);
 * a predict inside the hook has its own and leaves these. */
static tnt_status predict_batch_end(tnt_model *m, const tnt_callback *cbs, int n_cbs, int64_t step, const float *pred,
                                    int64_t n) {
    const float *outer = m->batch_outputs;
    int64_t outer_n = m->batch_outputs_n;
    tnt_logs empty = {0};
    tnt_status s = TNT_OK;
    m->batch_outputs = pred, m->batch_outputs_n = n;
    CALL_CB_SOFT(s, cbs, n_cbs, on_predict_batch_end, m, step, &empty);
    m->batch_outputs = outer, m->batch_outputs_n = outer_n;
    return s;
}

/* Places each rank's rows of every global batch back into dataset order: batch j of global size
 * n_j was split into contiguous shares (n_j/p, the first n_j%p ranks one more). */
static void reorder_rows(float *dst, const float *gathered, const int64_t *displs, const int64_t *batch_n,
                         int64_t n_batches, int p, int64_t c) {
    int64_t *cursor = calloc((size_t)p, sizeof *cursor);
    if (!cursor) return;
    int64_t row = 0;
    for (int64_t j = 0; j < n_batches; j++)
        for (int r = 0; r < p; r++) {
            int64_t share = batch_n[j] / p + (r < batch_n[j] % p);
            memcpy(dst + row * c, gathered + displs[r] + cursor[r] * c, (size_t)(share * c) * sizeof(float));
            cursor[r] += share;
            row += share;
        }
    free(cursor);
}

/* Forward-only pass over data, accumulating loss/metrics (evaluate) or outputs (predict). A
 * distributed model processes its share of each batch; the figures are combined exactly at the
 * end and the outputs gathered in dataset order. */
static tnt_status run_inference(tnt_model *m, tnt_dataset *data, const tnt_eval_opts *o, bool labels,
                                tnt_logs *logs, tnt_tensor **out, const char *who) {
    tnt_status s = TNT_OK;
    accum acc = {0};
    tnt__feed f = {0};
    float *rows = NULL, *gathered = NULL;
    int64_t *batch_n = NULL, n_batches = 0, cap_batches = 0;
    int64_t n_rows = 0, cap_rows = 0, c = tnt__model_output_size(m), n_batches_seen = 0;
    tnt_shape out_shape = m->output_shape; /* predict: the outputs' shape, the same for every batch */
    const tnt_callback *cbs = o ? o->callbacks : NULL;
    int n_cbs = o ? o->n_callbacks : 0;
    tnt__progress prog;
    tnt_logs empty = {0};
    bool parallel = tnt__is_parallel(m);
    if (!data) return tnt__error(TNT_ERR_ARG, "%s: dataset is NULL", who);
    if (!tnt_dataset_is_batched(data))
        return tnt__error(TNT_ERR_ARG, "%s: dataset is not batched (use tnt_dataset_batch)", who);
    if ((s = instance_for(m, data, who)) != TNT_OK) return s;
    c = tnt__model_output_size(m); /* of the instance for this data */
    out_shape = m->output_shape;
    if (labels) CALL_CB(cbs, n_cbs, on_test_begin, m, &empty);
    else CALL_CB(cbs, n_cbs, on_predict_begin, m, &empty);
    f.split = parallel && !(o && o->no_distribute);
    f.weighted = o && o->sample_weights;
    f.it = tnt_dataset_iter_new(data, 0);
    if (!f.it) {
        s = TNT_ERR_ARG;
        goto done;
    }
    tnt__progress_start(&prog, o && o->out ? o->out : stdout, o ? o->verbose : 0,
                        o && o->steps > 0 ? o->steps : tnt_dataset_cardinality(data));
    /* No collective runs inside the loop, so a rank that fails stops early and the ranks agree
     * on the outcome once, after it. */
    tnt_status local = TNT_OK;
    for (int64_t step = 0; !(o && o->steps > 0 && step >= o->steps); step++) {
        tnt_batch b;
        /* each batch its own draws of the random operations that run in inference (a traced
         * random_normal), the same on every rank: keyed on the batch index and the model's seed */
        tnt__step st = {.seed = tnt__hash64(m->seed ^ (0x9E3779B97F4A7C15ull * (uint64_t)(step + 1)))};
        int r = tnt__feed_next(&f, &b, &st);
        if (r <= 0) {
            local = (tnt_status)r;
            break;
        }
        if (!labels) {
            if (n_batches == cap_batches) {
                cap_batches = cap_batches ? 2 * cap_batches : 64;
                int64_t *nb = realloc(batch_n, (size_t)cap_batches * sizeof *nb);
                if (!nb) {
                    local = tnt__error(TNT_ERR_NOMEM, "%s: out of memory", who);
                    break;
                }
                batch_n = nb;
            }
            batch_n[n_batches++] = st.global_n;
        }
        if (labels) CALL_CB_SOFT(local, cbs, n_cbs, on_test_batch_begin, m, step, &empty);
        else CALL_CB_SOFT(local, cbs, n_cbs, on_predict_batch_begin, m, step, &empty);
        if (local != TNT_OK) break;
        if (b.n == 0) { /* an empty share: the hooks still see the batch */
            if (labels) {
                tnt_logs cur;
                accum_logs(m, &acc, &cur);
                CALL_CB_SOFT(local, cbs, n_cbs, on_test_batch_end, m, step, &cur);
            } else {
                local = predict_batch_end(m, cbs, n_cbs, step, &(float){0}, 0);
            }
            if (local != TNT_OK) break;
            continue;
        }
        if ((local = check_batch(m, &b, labels, f.weighted, who)) != TNT_OK) break;
        tnt__plan *p = tnt__model_plan(m, b.n);
        float *pred;
        if (!p) {
            local = TNT_ERR_BACKEND;
            break;
        }
        if ((local = tnt__model_forward(m, p, b.x.data, &st, &pred)) != TNT_OK) break;
        if (labels) {
            double counted = acc.loss_count;
            if ((local = loss_and_metrics(m, p, b.x.data, &b, 1.0 / (double)st.global_n, false, f.weighted, &acc)) !=
                TNT_OK)
                break;
            add_penalties(m, &acc, acc.loss_count - counted, b.n, weight_penalty(m));
            tnt_logs cur;
            accum_logs(m, &acc, &cur);
            /* running figures are exact only with one rank; in parallel the bar shows steps */
            tnt__progress_update(&prog, step + 1, parallel ? NULL : &cur);
            CALL_CB_SOFT(local, cbs, n_cbs, on_test_batch_end, m, step, &cur);
            if (local != TNT_OK) break;
        } else {
            /* batches of other shapes (padded batches each as long as their longest): outputs of
             * other shapes, which one array cannot hold (Keras gives a RaggedTensor) */
            if (n_batches_seen++ == 0) out_shape = m->output_shape;
            if (!tnt__shape_equal(out_shape, m->output_shape)) {
                char a[96], c2[96];
                local = tnt__error(TNT_ERR_SHAPE, "%s: batch %lld gives outputs of shape %s, the batches before %s (one "
                                   "array holds one shape: predict each batch (predict_on_batch), or pad to one length "
                                   "(padded_shapes))", who, (long long)step, tnt_shape_str(m->output_shape, a, sizeof a),
                                   tnt_shape_str(out_shape, c2, sizeof c2));
                break;
            }
            c = tnt__model_output_size(m);
            if (n_rows + b.n > cap_rows) {
                int64_t cap = TNT_MAX(2 * cap_rows, n_rows + b.n);
                float *nr = realloc(rows, (size_t)(cap * c) * sizeof(float));
                if (!nr) {
                    local = tnt__error(TNT_ERR_NOMEM, "%s: out of memory for %lld output rows", who, (long long)cap);
                    break;
                }
                rows = nr;
                cap_rows = cap;
            }
            memcpy(rows + n_rows * c, pred, (size_t)(b.n * c) * sizeof(float));
            n_rows += b.n;
            tnt__progress_update(&prog, step + 1, NULL);
            local = predict_batch_end(m, cbs, n_cbs, step, pred, b.n);
            if (local != TNT_OK) break;
        }
    }
    if ((s = parallel ? tnt__agree(local, NULL, 0) : local) != TNT_OK) goto done;
    if (labels) {
        accum total;
        tnt_logs res;
        if ((s = accum_global(m, &acc, &total, parallel)) != TNT_OK) goto done;
        accum_logs(m, &total, &res);
        tnt__progress_finish(&prog, &res, NULL);
        if (logs) *logs = res;
        CALL_CB(cbs, n_cbs, on_test_end, m, &res);
    } else {
        tnt__progress_finish(&prog, NULL, NULL);
        int p = parallel ? tnt_get_size() : 1;
        bool all = o && o->all_ranks;
        int64_t counts[p], displs[p];
        if (!parallel) { /* this rank's rows are all the rows */
            gathered = rows;
            rows = NULL;
            counts[0] = n_rows * c;
            displs[0] = 0;
        } else if ((s = tnt__gatherv_f32(rows ? rows : (float[1]){0}, n_rows * c, all, &gathered, counts, displs)) != TNT_OK) {
            goto done;
        }
        int64_t total = gathered ? (displs[p - 1] + counts[p - 1]) / (c ? c : 1) : 0;
        tnt_tensor *t = tnt_tensor_new(tnt__shape_with_batch(total, out_shape));
        if (!t) {
            s = TNT_ERR_NOMEM;
            goto done;
        }
        if (total && f.split) reorder_rows(t->data, gathered, displs, batch_n, n_batches, p, c);
        else if (total) memcpy(t->data, gathered, (size_t)(total * c) * sizeof(float));
        *out = t;
        CALL_CB(cbs, n_cbs, on_predict_end, m, &empty);
    }
done:
    free(rows);
    free(gathered);
    free(batch_n);
    tnt_dataset_iter_free(f.it);
    return s;
}

/* An unbatched dataset with a micro-batch size becomes a borrowed batched view with the global
 * batch micro x ranks; *view (NULL when unused) is freed by the caller. */
static tnt_dataset *batched(tnt_dataset *ds, int64_t micro, tnt_dataset **view) {
    *view = NULL;
    if (!ds || micro <= 0 || tnt_dataset_is_batched(ds)) return ds;
    *view = tnt__dataset_batch_view(ds, micro * tnt_get_size(), false);
    return *view ? *view : ds;
}

static tnt_status require_compiled(const tnt_model *m, const char *who) {
    if (!m) return tnt__error(TNT_ERR_ARG, "%s: model is NULL", who);
    if (!m->compiled)
        return tnt__error(TNT_ERR_STATE, "%s: model \"%s\" is not compiled (call tnt_compile first)", who, m->name);
    return TNT_OK;
}

tnt_status tnt_evaluate(tnt_model *m, tnt_dataset *data, const tnt_eval_opts *opts, tnt_logs *logs) {
    tnt_status s = require_compiled(m, "evaluate");
    if (m && tnt__is_parallel(m)) s = tnt__agree(s, NULL, 0);
    tnt_dataset *view;
    data = batched(data, opts ? opts->micro_batch_size : 0, &view);
    if (s == TNT_OK) s = tnt__prepare_parallel(m, "evaluate", opts && opts->no_distribute ? NULL : data, NULL, NULL);
    if (s == TNT_OK) s = run_inference(m, data, opts, true, logs, NULL, "evaluate");
    tnt__dataset_view_free(view);
    return s;
}

tnt_status tnt_predict(tnt_model *m, tnt_dataset *data, const tnt_eval_opts *opts, tnt_tensor **out) {
    if (!m) return tnt__error(TNT_ERR_ARG, "predict: model is NULL");
    if (!out) return tnt__error(TNT_ERR_ARG, "predict: out is NULL");
    *out = NULL;
    tnt_status s = tnt__model_setup_weights(m);
    if (tnt__is_parallel(m)) s = tnt__agree(s, NULL, 0);
    tnt_dataset *view;
    data = batched(data, opts ? opts->micro_batch_size : 0, &view);
    if (s == TNT_OK) s = tnt__prepare_parallel(m, "predict", opts && opts->no_distribute ? NULL : data, NULL, NULL);
    if (s == TNT_OK) s = run_inference(m, data, opts, false, NULL, out, "predict");
    tnt__dataset_view_free(view);
    return s;
}

tnt_status tnt_predict_on_batch(tnt_model *m, const tnt_tensor *x, tnt_tensor **out) {
    if (!m || !x || !out) return tnt__error(TNT_ERR_ARG, "predict_on_batch: NULL argument");
    *out = NULL;
    tnt_status s = TNT_OK;
    if (!m->has_input_shape && x->shape.ndim >= 2) { /* Keras builds a model without one at its first call */
        tnt_shape in = {.ndim = x->shape.ndim - 1};
        for (int d = 1; d < x->shape.ndim; d++) in.dim[d - 1] = x->shape.dim[d];
        if ((s = tnt_model_build(m, in)) != TNT_OK) return tnt__error_prefix(s, "predict_on_batch: ");
    }
    if ((s = tnt__model_setup_weights(m)) != TNT_OK) return s;
    tnt_batch b = {.n = x->shape.ndim ? x->shape.dim[0] : 0, .x = *x};
    if ((s = check_batch(m, &b, false, false, "predict_on_batch")) != TNT_OK) return s;
    if (b.n == 0) return tnt__error(TNT_ERR_ARG, "predict_on_batch: batch of 0 samples");
    tnt__plan *p = tnt__model_plan(m, b.n);
    if (!p) return TNT_ERR_BACKEND;
    float *pred;
    if ((s = tnt__model_forward(m, p, x->data, &(tnt__step){.global_n = b.n}, &pred)) != TNT_OK) return s;
    tnt_tensor *t = tnt_tensor_new(tnt__shape_with_batch(b.n, m->output_shape));
    if (!t) return TNT_ERR_NOMEM;
    memcpy(t->data, pred, (size_t)(b.n * tnt__model_output_size(m)) * sizeof(float));
    *out = t;
    return TNT_OK;
}

static tnt_status check_fit_args(tnt_model *m, tnt_dataset *train, tnt_fit_opts *o) {
    tnt_status s = require_compiled(m, "fit");
    if (s != TNT_OK) return s;
    if (!train) return tnt__error(TNT_ERR_ARG, "fit: training dataset is NULL");
    if (!tnt_dataset_is_batched(train))
        return tnt__error(TNT_ERR_ARG, "fit: training dataset is not batched (use tnt_dataset_batch)");
    if (o->steps_per_epoch <= 0 && tnt_dataset_cardinality(train) < 0) /* an epoch would never end */
        return tnt__error(TNT_ERR_ARG, "fit: the training dataset repeats forever and steps_per_epoch is %lld "
                          "(expected > 0 for an infinite dataset)", (long long)o->steps_per_epoch);
    if (o->epochs <= 0) o->epochs = 1;
    if (o->validation_freq <= 0) o->validation_freq = 1;
    if (o->initial_epoch < 0 || o->initial_epoch >= o->epochs)
        return tnt__error(TNT_ERR_ARG, "fit: initial_epoch %d (expected 0 <= initial_epoch < epochs = %d)",
                          o->initial_epoch, o->epochs);
    if (o->validation_data && !tnt_dataset_is_batched(o->validation_data))
        return tnt__error(TNT_ERR_ARG, "fit: validation dataset is not batched (use tnt_dataset_batch)");
    if (!o->out) o->out = stdout;
    return TNT_OK;
}

static tnt_status fit_loop(tnt_model *m, tnt_dataset *train, tnt_fit_opts *opts, tnt_history **history);

tnt_status tnt_fit(tnt_model *m, tnt_dataset *train, const tnt_fit_opts *opts, tnt_history **history) {
    if (history) *history = NULL;
    if (!m) return tnt__error(TNT_ERR_ARG, "fit: model is NULL");
    tnt_fit_opts o = opts ? *opts : (tnt_fit_opts){0};
    tnt_dataset *train_view, *val_view;
    train = batched(train, o.micro_batch_size, &train_view);
    o.validation_data = batched(o.validation_data, o.micro_batch_size, &val_view);
    tnt_status s = fit_loop(m, train, &o, history);
    tnt_status d = tnt__parallel_detach(m);
    if (s == TNT_OK) s = d;
    /* after a fit on the device the host copy is current again (code that reads the layers' own
     * views sees the trained weights) */
    tnt_status hs = tnt__model_host_weights(m);
    if (s == TNT_OK) s = hs;
    tnt__dataset_view_free(train_view);
    tnt__dataset_view_free(val_view);
    return s;
}

/* A callback that stopped training on one rank (from its local logs, say) stops every rank. */
static tnt_status agree_stop(tnt_model *m, bool parallel) {
    if (!parallel) return TNT_OK;
    int64_t stop = m->stop_training;
    tnt_status s = tnt__agree(TNT_OK, &stop, 1);
    m->stop_training = stop > 0;
    return s;
}

static tnt_status fit_loop(tnt_model *m, tnt_dataset *train, tnt_fit_opts *opts, tnt_history **history) {
    tnt_fit_opts o = *opts;
    tnt_status s = check_fit_args(m, train, &o);
    bool parallel = tnt__is_parallel(m);
    /* all ranks agree before the first collective, so a bad argument on one rank cannot hang
     * the others */
    if (parallel) s = tnt__agree(s, NULL, 0);
    if (s != TNT_OK) return s;
    /* the device (every rank's choice joins the fingerprints of prepare_parallel) */
    if ((s = tnt__model_choose_device(m, "fit")) != TNT_OK && !parallel) return s;
    if (parallel && (s = tnt__agree(s, NULL, 0)) != TNT_OK) return s;
    if ((s = tnt__prepare_parallel(m, "fit", train, o.validation_data, &o)) != TNT_OK) return s;
    tnt_history *h = tnt__history_new();
    if (!h) return TNT_ERR_NOMEM;
    tnt__feed f = {.split = parallel && !o.no_distribute, .weighted = o.sample_weights};
    const tnt_callback *cbs = o.callbacks;
    int n_cbs = o.n_callbacks;
    bool batch_logs = false; /* exact logs at every step */
    bool batch_stops = false; /* a batch callback may stop training after any step */
    for (int i = 0; i < n_cbs; i++) {
        batch_logs |= cbs[i].on_train_batch_end != NULL;
        batch_stops |= cbs[i].on_train_batch_begin != NULL || cbs[i].on_train_batch_end != NULL;
    }
    /* Running figures need a metrics allreduce per step: only when a live bar (on the master's
     * terminal) or a batch callback reads them. The master decides, so that every rank issues
     * the same collectives. */
    if (o.verbose == 1 && tnt_is_master_rank() && tnt__output_is_tty(o.out)) batch_logs = true;
    if (parallel) {
        int64_t ranks_wanting[2] = {batch_logs, batch_stops};
        if ((s = tnt__agree(TNT_OK, ranks_wanting, 2)) != TNT_OK) {
            tnt_history_free(h);
            return s;
        }
        batch_logs = ranks_wanting[0] > 0;
        batch_stops = ranks_wanting[1] > 0;
    }
    tnt_logs logs = {0};
    m->stop_training = false;
    m->resume_epoch = -1;
    CALL_CB(cbs, n_cbs, on_train_begin, m, &logs);
    int first_epoch = m->resume_epoch >= 0 ? m->resume_epoch : o.initial_epoch;
    int64_t skip = m->resume_epoch >= 0 ? m->resume_step : 0; /* batches a backup had trained */
    int64_t steps_hint = o.steps_per_epoch > 0 ? o.steps_per_epoch : tnt_dataset_cardinality(train);
    for (int epoch = first_epoch; epoch < o.epochs && !m->stop_training; epoch++) {
        accum acc = {0}, total;
        tnt__progress prog;
        logs.n = 0;
        tnt__progress_start(&prog, o.out, o.verbose, steps_hint);
        if (prog.verbose) fprintf(o.out, "Epoch %d/%d\n", epoch + 1, o.epochs);
        CALL_CB(cbs, n_cbs, on_epoch_begin, m, epoch, &logs);
        f.it = tnt_dataset_iter_new(train, epoch);
        if (!f.it) {
            s = TNT_ERR_ARG;
            goto done;
        }
        /* several inputs: the training data's shapes again (validation may have others) */
        if (m->n_inputs > 1 && (s = instance_for(m, train, "fit")) != TNT_OK) goto done;
        int64_t step = 0;
        for (; step < skip; step++) { /* the same batches: the order depends on the epoch only */
            tnt_batch b;
            tnt__step st;
            int r = tnt__feed_next(&f, &b, &st);
            if (r < 0) {
                s = (tnt_status)r;
                goto done;
            }
            if (r == 0) break;
        }
        skip = 0;
        for (; !(o.steps_per_epoch > 0 && step >= o.steps_per_epoch); step++) {
            tnt__comm_set_position(epoch + 1, step + 1, "training step");
            double tl0 = TNT_TL_BEGIN();
            int r = train_step(m, &f, &acc, cbs, n_cbs, step);
            if (r == 1) TNT_TL_END("step", "step", (int)step + 1, tl0);
            if (r < 0) {
                s = (tnt_status)r;
                goto done;
            }
            if (r == 0) break;
            if (batch_logs) {
                if ((s = accum_global(m, &acc, &total, parallel)) != TNT_OK) goto done;
                accum_logs(m, &total, &logs);
            }
            tnt_logs local;
            accum_logs(m, &acc, &local);
            CALL_CB_LOGS(cbs, n_cbs, on_train_batch_end, m, step, &logs, &local);
            tnt__progress_update(&prog, step + 1, &logs);
            /* As in Keras, a stop takes effect after the batch; the epoch still ends (its logs,
             * validation and callbacks) with the batches run. */
            if (batch_stops) {
                if ((s = agree_stop(m, parallel)) != TNT_OK) goto done;
                if (m->stop_training) {
                    step++;
                    break;
                }
            }
        }
        tnt_dataset_iter_free(f.it);
        f.it = NULL;
        if (step == 0) {
            s = tnt__error(TNT_ERR_ARG, "fit: the training dataset yielded no batches in epoch %d", epoch + 1);
            goto done;
        }
        tnt__comm_set_position(epoch + 1, step, "end of epoch");
        if ((s = accum_global(m, &acc, &total, parallel)) != TNT_OK) goto done;
        accum_logs(m, &total, &logs);
        tnt_logs local; /* this rank's own training figures, for callbacks with local_logs */
        accum_logs(m, &acc, &local);
        if (o.validation_data && (epoch + 1) % o.validation_freq == 0) {
            tnt_logs val = {0};
            tnt_eval_opts eo = {.callbacks = cbs, .n_callbacks = n_cbs, .out = o.out,
                                .no_distribute = o.no_distribute_validation,
                                .sample_weights = o.validation_sample_weights};
            if ((s = run_inference(m, o.validation_data, &eo, true, &val, NULL, "fit (validation)")) != TNT_OK)
                goto done;
            tnt__logs_merge(&logs, &val, "val_");
            tnt__logs_merge(&local, &val, "val_");
        }
        tnt__progress_finish(&prog, &logs, NULL);
        /* Keras's order: the callbacks in the order given, then the History; ReduceLROnPlateau
         * and LearningRateScheduler put the rate (before their own change) into the logs that
         * the callbacks after them and the History see: Keras 2's "lr", Keras 3's "learning_rate" */
        for (int i = 0; i < n_cbs; i++) {
            if (cbs[i].adds_lr) {
                double lr = tnt_optimizer_get_lr(m->optimizer);
                tnt__logs_set(&logs, NULL, "lr", lr), tnt__logs_set(&logs, NULL, "learning_rate", lr);
                tnt__logs_set(&local, NULL, "lr", lr), tnt__logs_set(&local, NULL, "learning_rate", lr);
            }
            CALL_CB_LOGS(cbs + i, 1, on_epoch_end, m, epoch, &logs, &local);
        }
        if ((s = tnt__history_append(h, epoch, &logs)) != TNT_OK) goto done;
        if ((s = agree_stop(m, parallel)) != TNT_OK) goto done;
    }
    CALL_CB(cbs, n_cbs, on_train_end, m, &logs);
done:
    tnt_dataset_iter_free(f.it);
    if (s == TNT_OK && history) *history = h;
    else tnt_history_free(h);
    return s;
}

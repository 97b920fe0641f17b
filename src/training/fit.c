/* fit.c: fit (inference.c: evaluate and predict; compile.c: compile). One training step: this
 * rank's share of the global batch, forward, loss summed over the local samples and scaled by
 * 1/global batch, backward (last layer first) into the flat gradient buffer while fused buckets
 * are allreduced, one optimizer pass over the flat buffers. Loss and metrics are kept as (sum,
 * count) so that epoch figures are exact sample means, as Keras reports them, summed over ranks. */
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
#include "training/fit_internal.h"
#include "training/device_loss.h"
#include "model/device_rules.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>

/* Keras 2 names the figures of output k after its layer: "dense_1_loss", "dense_1_accuracy". */
static const char *output_prefix(const tnt_model *m, int k, char *buf, size_t size) {
    if (m->n_outputs == 1) return NULL;
    snprintf(buf, size, "%s_", tnt__model_output_name(m, k));
    return buf;
}

void tnt__accum_logs(const tnt_model *m, const accum *a, tnt_logs *logs) {
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
tnt_status tnt__instance_for(tnt_model *m, const tnt_dataset *data, const char *who) {
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
tnt_status tnt__check_batch(tnt_model *m, const tnt_batch *b, bool need_labels, bool weighted, const char *who) {
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
tnt_status tnt__loss_and_metrics(tnt_model *m, tnt__plan *p, const float *x, const tnt_batch *b,
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

/* The weight regularizers' penalty (the same on every rank: the weights are); on the device, as
 * the last forward's sums gave it (model/device_rules.h). */
double tnt__weight_penalty(const tnt_model *m) {
    if (m->on_device) return m->device_weight_penalty;
    double sum = 0;
    for (int i = 0; i < m->n_layers; i++)
        if (m->layers[i]->rules) sum += tnt__layer_weight_penalty(m->layers[i]);
    return sum;
}

/* Keras reports the loss plus the regularization penalties (model.losses): the weights' and the
 * activity penalty of the last forward over its n samples divided by the batch size, counted
 * once for each of the counted samples (or labelled positions) the pass added to a. Over the
 * ranks of a step, the shares' activity penalties sum to the global one. */
void tnt__add_penalties(const tnt_model *m, accum *a, double counted, int64_t n, double weights) {
    a->loss_sum += counted * (weights + m->activity_penalty / (double)n);
}

/* After the optimizer update: each rank projects the same weights the same way (a frozen layer's
 * are none of the optimizer's variables, and Keras constrains only those). */
static tnt_status apply_constraints(tnt_model *m) {
    for (int i = 0; i < m->n_layers; i++) {
        tnt_status s = m->layers[i]->rules && !m->layers[i]->frozen ? tnt__layer_apply_constraints(m->layers[i]) : TNT_OK;
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
    if (s == TNT_OK) s = tnt__model_note_frozen(m); /* after the callbacks, before the update reads them */
    if (r == 1 && s == TNT_OK) s = tnt__check_batch(m, &b, true, f->weighted, "fit");
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
    /* the loss is summed over local samples and divided by the global batch, so the sum over
     * ranks is the serial mean; unsplit feeds learn the global count below */
    const double inv_batch = f->split || !st.parallel ? 1.0 / (double)st.global_n : 1.0;
    /* On the device with a built-in loss (device_loss.h) the step queues forward, the loss
     * gradient and backward without waiting; the host computes the loss value and the metrics
     * from the outputs copied down meanwhile, before the optimizer (a failure there, a bad label,
     * still stops the step before the update). Its counts need no loss value: every sample counts. */
    st.device_loss = have && s == TNT_OK && tnt__device_loss_applies(m, p, f->weighted);
    if (have && s == TNT_OK) {
        float *pred;
        st.seed = tnt__model_training_seed(m);
        s = tnt__model_forward(m, p, b.x.data, &st, &pred);
        if (s == TNT_OK && !st.device_loss)
            s = tnt__loss_and_metrics(m, p, b.x.data, &b, inv_batch, true, f->weighted, &step);
        if (s == TNT_OK && !st.device_loss) tnt__add_penalties(m, &step, step.loss_count, b.n, tnt__weight_penalty(m));
    }
    /* the outputs' copies in flight are waited for on every way out (they write host_buf) */
    const bool outputs_pending = st.device_loss && s == TNT_OK;
    tnt__step_counts counts = {r == 1, have ? b.n : 0, st.device_loss ? b.n : (int64_t)step.loss_count};
    if ((go = tnt__parallel_step_begin(m, &st, s, &counts)) <= 0) {
        if (outputs_pending) (void)tnt__plan_outputs_wait(m, p);
        return go;
    }
    if (counts.samples == 0) return 1; /* no rank had samples: nothing to learn */
    if (st.device_loss) /* unsplit feeds: the global count, known now */
        s = tnt__device_loss_grad(m, p, &b, f->split || !st.parallel ? inv_batch : 1.0 / (double)counts.samples);
    /* the mean over the global batch (or its positions not ignored) */
    else if (have && ignores_labels(m))
        scale_output_grads(m, p, b.n, counts.positions ? (float)(1.0 / (double)counts.positions) : 0.0f);
    else if (have && !f->split && st.parallel)
        scale_output_grads(m, p, b.n, (float)(1.0 / (double)counts.samples));
    st.activity_grad_scale = 1.0 / (double)(f->split || !st.parallel ? st.global_n : counts.samples);
    if (have) { /* every rank with samples runs backward (its buckets join the sums) */
        tnt_status bs = tnt__model_backward(m, p, b.x.data, &st);
        if (s == TNT_OK) s = bs;
    } else { /* an empty share adds nothing (to a kernel the node computes: no rows) */
        memset(m->grads, 0, (size_t)m->n_params * sizeof(float));
        if (st.node_dw) tnt__reducer_node_dw_stash_none(st.reducer);
    }
    if (outputs_pending) { /* while the device runs backward */
        tnt_status ws = tnt__plan_outputs_wait(m, p);
        if (s == TNT_OK) s = ws;
        if (s == TNT_OK) s = tnt__loss_and_metrics(m, p, b.x.data, &b, inv_batch, false, f->weighted, &step);
        if (s == TNT_OK) tnt__add_penalties(m, &step, step.loss_count, b.n, tnt__weight_penalty(m));
    }
    if ((s = tnt__parallel_step_end(m, &st, s)) != TNT_OK) return s;
    /* The weight penalties' gradients join the summed data gradients after the allreduce: they
     * depend on the weights alone, which every rank holds the same, so each rank adds them once,
     * exactly as serial training does (no 1/p scaling, no rounding that depends on p). */
    for (int i = 0; i < m->n_layers && !m->on_device; i++) /* the device's: tnt__dev_optimizer_step */
        if (m->layers[i]->rules) tnt__layer_add_penalty_grads(m->layers[i]);
    t0 = TNT_TL_BEGIN();
    /* frozen layers' weights: on the CPU the update leaves them out (m->frozen); the device's
     * update is one pass over all, so their values are put back after it */
    float *frozen = NULL;
    if (m->on_device && (s = tnt__dev_freeze(m, &frozen)) != TNT_OK) return s;
    if ((s = tnt__parallel_optimizer_step(m, &st)) == TNT_OK) {
        tnt__optimizer_finish_step(m->optimizer);
        s = m->on_device ? tnt__dev_apply_constraints(m) : apply_constraints(m);
    }
    if (m->on_device) tnt__dev_thaw(m, frozen);
    if (s != TNT_OK) return s;
    TNT_TL_END("optimizer", "optimizer", -1, t0);
    accum_add(m, acc, &step);
    return 1;
}

/* Sums of all ranks (exact aggregation: sums and counts, never means of means). */
tnt_status tnt__accum_global(const tnt_model *m, const accum *local, accum *global, bool parallel) {
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

/* An unbatched dataset with a micro-batch size becomes a borrowed batched view with the global
 * batch micro x ranks; *view (NULL when unused) is freed by the caller. */
tnt_dataset *tnt__batched(tnt_dataset *ds, int64_t micro, tnt_dataset **view) {
    *view = NULL;
    if (!ds || micro <= 0 || tnt_dataset_is_batched(ds)) return ds;
    *view = tnt__dataset_batch_view(ds, micro * tnt_get_size(), false);
    return *view ? *view : ds;
}

tnt_status tnt__require_compiled(const tnt_model *m, const char *who) {
    if (!m) return tnt__error(TNT_ERR_ARG, "%s: model is NULL", who);
    if (!m->compiled)
        return tnt__error(TNT_ERR_STATE, "%s: model \"%s\" is not compiled (call tnt_compile first)", who, m->name);
    return TNT_OK;
}

static tnt_status check_fit_args(tnt_model *m, tnt_dataset *train, tnt_fit_opts *o) {
    tnt_status s = tnt__require_compiled(m, "fit");
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
    train = tnt__batched(train, o.micro_batch_size, &train_view);
    o.validation_data = tnt__batched(o.validation_data, o.micro_batch_size, &val_view);
    /* the buffers stay in a node-aware reducer's window for the next fit (model/window.h) */
    m->in_fit = true;
    tnt_status s = fit_loop(m, train, &o, history);
    m->in_fit = false;
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
        if (m->n_inputs > 1 && (s = tnt__instance_for(m, train, "fit")) != TNT_OK) goto done;
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
                if ((s = tnt__accum_global(m, &acc, &total, parallel)) != TNT_OK) goto done;
                tnt__accum_logs(m, &total, &logs);
            }
            tnt_logs local;
            tnt__accum_logs(m, &acc, &local);
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
        if ((s = tnt__accum_global(m, &acc, &total, parallel)) != TNT_OK) goto done;
        tnt__accum_logs(m, &total, &logs);
        tnt_logs local; /* this rank's own training figures, for callbacks with local_logs */
        tnt__accum_logs(m, &acc, &local);
        if (o.validation_data && (epoch + 1) % o.validation_freq == 0) {
            tnt_logs val = {0};
            tnt_eval_opts eo = {.callbacks = cbs, .n_callbacks = n_cbs, .out = o.out,
                                .no_distribute = o.no_distribute_validation,
                                .sample_weights = o.validation_sample_weights};
            if ((s = tnt__run_inference(m, o.validation_data, &eo, true, &val, NULL, "fit (validation)")) != TNT_OK)
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

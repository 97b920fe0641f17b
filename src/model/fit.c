/* fit.c: compile, fit, evaluate and predict. One training step: forward, loss summed over the
 * batch's samples and scaled by 1/batch, backward (last layer first) into the flat gradient
 * buffer, one optimizer pass over the flat buffers. Loss and metrics are kept as (sum, count)
 * so that epoch figures are exact sample means, as Keras reports them. */
#include "data/dataset.h"
#include "model/history.h"
#include "model/model.h"
#include "model/progress.h"
#include "train/loss.h"
#include "train/optimizer.h"

#include <math.h>
#include <stdio.h>

tnt_status tnt__model_setup_weights(tnt_model *m);

/* Running sums of one pass over data: loss and each metric as (sum, count). */
typedef struct accum {
    double loss_sum, loss_count;
    double sum[TNT_MAX_METRICS], count[TNT_MAX_METRICS];
} accum;

static void accum_logs(const tnt_model *m, const accum *a, tnt_logs *logs) {
    logs->n = 0;
    tnt__logs_set(logs, NULL, "loss", a->loss_count > 0 ? a->loss_sum / a->loss_count : NAN);
    for (int k = 0; k < m->n_metrics; k++)
        tnt__logs_set(logs, NULL, m->metrics[k].name, a->count[k] > 0 ? a->sum[k] / a->count[k] : NAN);
}

tnt_status tnt_compile(tnt_model *m, const tnt_compile_opts *opts) {
    if (!m) {
        if (opts) tnt_optimizer_free(opts->optimizer);
        return tnt__error(TNT_ERR_ARG, "compile: model is NULL");
    }
    if (!opts) return tnt__error(TNT_ERR_ARG, "compile: options are NULL (optimizer and loss are required)");
    if (!opts->optimizer)
        return tnt__error_prefix(TNT_ERR_ARG, "compile: model \"%s\": optimizer is NULL (its constructor failed?): ", m->name);
    tnt_status s = TNT_OK;
    if (opts->loss <= TNT_LOSS_NONE || opts->loss > TNT_MEAN_ABSOLUTE_ERROR) {
        s = tnt__error(TNT_ERR_ARG, "compile: model \"%s\": loss %d is not a known loss", m->name, (int)opts->loss);
        goto fail;
    }
    int nm = tnt__metrics_parse(opts->metrics, opts->loss, m->metrics, TNT_MAX_METRICS);
    if (nm < 0) {
        s = tnt__error_prefix(TNT_ERR_ARG, "compile: model \"%s\": ", m->name);
        goto fail;
    }
    m->n_metrics = nm;
    if (opts->seed) m->seed = opts->seed;
    if ((s = tnt__model_setup_weights(m)) != TNT_OK) goto fail;
    if ((s = tnt__optimizer_prepare(opts->optimizer, m->n_params)) != TNT_OK) goto fail;
    tnt_optimizer_free(m->optimizer);
    m->optimizer = opts->optimizer;
    m->loss = opts->loss;
    m->from_logits = opts->from_logits;
    const tnt_layer *last = m->layers[m->n_layers - 1];
    /* Keras in graph mode computes cross-entropy from the logits under a softmax (or sigmoid for
     * binary cross-entropy) output: the same numerically stable fused path here. */
    bool ce = opts->loss == TNT_SPARSE_CATEGORICAL_CROSSENTROPY || opts->loss == TNT_CATEGORICAL_CROSSENTROPY;
    m->fused_output_loss = !opts->from_logits &&
                           ((ce && last->activation == TNT_ACT_SOFTMAX) ||
                            (opts->loss == TNT_BINARY_CROSSENTROPY && last->activation == TNT_ACT_SIGMOID));
    m->compiled = true;
    return TNT_OK;
fail:
    tnt_optimizer_free(opts->optimizer);
    return s;
}

void tnt_model_stop_training(tnt_model *m) {
    if (m) m->stop_training = true;
}

/* Checks a batch against the model: input shape and label count per sample. */
static tnt_status check_batch(const tnt_model *m, const tnt_batch *b, bool need_labels, const char *who) {
    char a[96], c[96];
    tnt_shape xs = b->x.shape;
    xs.ndim--;
    memmove(xs.dim, xs.dim + 1, (size_t)xs.ndim * sizeof xs.dim[0]);
    if (!tnt__shape_equal(xs, m->input_shape))
        return tnt__error(TNT_ERR_SHAPE, "%s: dataset elements have shape %s, model \"%s\" expects input %s",
                          who, tnt_shape_str(xs, a, sizeof a), m->name, tnt_shape_str(m->input_shape, c, sizeof c));
    if (!need_labels) return TNT_OK;
    if (!b->y.data) return tnt__error(TNT_ERR_ARG, "%s: dataset has no labels (y)", who);
    int64_t per = b->n ? tnt_shape_numel(b->y.shape) / b->n : 0;
    int64_t want = m->loss == TNT_SPARSE_CATEGORICAL_CROSSENTROPY ? 1 : tnt__model_output_size(m);
    if (b->n && per != want)
        return tnt__error(TNT_ERR_SHAPE, "%s: labels have %lld values per sample (shape %s), loss %s with output %s expects %lld",
                          who, (long long)per, tnt_shape_str(b->y.shape, a, sizeof a), tnt_loss_name(m->loss),
                          tnt_shape_str(m->output_shape, c, sizeof c), (long long)want);
    return TNT_OK;
}

/* Loss and metrics of one forward pass; dpred (may be NULL) receives the loss gradient. */
static tnt_status loss_and_metrics(tnt_model *m, tnt__plan *p, const float *pred, const tnt_batch *b,
                                   double inv_batch, float *dpred, accum *acc) {
    int64_t c = tnt__model_output_size(m);
    const float *loss_in = m->fused_output_loss ? (const float *)((char *)m->arena + p->preact_offset) : pred;
    double loss_sum = 0;
    tnt_status s = tnt__loss_compute(m->loss, m->from_logits || m->fused_output_loss, b->n, c, loss_in,
                                     b->y.data, inv_batch, dpred, &loss_sum);
    if (s != TNT_OK) return s;
    acc->loss_sum += loss_sum;
    acc->loss_count += (double)b->n;
    for (int k = 0; k < m->n_metrics; k++)
        if ((s = tnt__metric_update(&m->metrics[k], b->n, c, pred, b->y.data, &acc->sum[k], &acc->count[k])) != TNT_OK)
            return s;
    return TNT_OK;
}

static tnt_status train_step(tnt_model *m, const tnt_batch *b, accum *acc) {
    tnt__plan *p = tnt__model_plan(m, b->n);
    if (!p) return TNT_ERR_BACKEND;
    float *pred;
    tnt_status s = tnt__model_forward(m, p, b->x.data, true, &pred);
    if (s != TNT_OK) return s;
    float *dpred = (float *)((char *)m->arena + p->grad_offset[0]);
    if ((s = loss_and_metrics(m, p, pred, b, 1.0 / (double)b->n, dpred, acc)) != TNT_OK) return s;
    if ((s = tnt__model_backward(m, p, b->x.data, dpred)) != TNT_OK) return s;
    if ((s = tnt__optimizer_apply(m->optimizer, m->params, m->grads, 0, m->n_params)) != TNT_OK) return s;
    tnt__optimizer_finish_step(m->optimizer);
    return TNT_OK;
}

#define CALL_CB(cbs, n, fn, ...)                                                                  \
    do {                                                                                          \
        for (int i_ = 0; i_ < (n); i_++)                                                          \
            if ((cbs)[i_].fn) {                                                                   \
                tnt_status cs_ = (cbs)[i_].fn(__VA_ARGS__, (cbs)[i_].user);                       \
                if (cs_ != TNT_OK) {                                                              \
                    s = cs_;                                                                      \
                    goto done;                                                                    \
                }                                                                                 \
            }                                                                                     \
    } while (0)

/* Forward-only pass over data, accumulating loss/metrics (evaluate) or outputs (predict). */
static tnt_status run_inference(tnt_model *m, tnt_dataset *data, const tnt_eval_opts *o, bool labels,
                                tnt_logs *logs, tnt_tensor **out, const char *who) {
    tnt_status s = TNT_OK;
    accum acc = {0};
    tnt_dataset_iter *it = NULL;
    float *rows = NULL;
    int64_t n_rows = 0, cap_rows = 0, c = tnt__model_output_size(m);
    const tnt_callback *cbs = o ? o->callbacks : NULL;
    int n_cbs = o ? o->n_callbacks : 0;
    int verbose = o ? o->verbose : 0;
    tnt__progress prog;
    tnt_logs empty = {0};
    if (!data) return tnt__error(TNT_ERR_ARG, "%s: dataset is NULL", who);
    if (!tnt_dataset_is_batched(data))
        return tnt__error(TNT_ERR_ARG, "%s: dataset is not batched (use tnt_dataset_batch)", who);
    if (labels) CALL_CB(cbs, n_cbs, on_test_begin, m, &empty);
    else CALL_CB(cbs, n_cbs, on_predict_begin, m, &empty);
    it = tnt_dataset_iter_new(data, 0);
    if (!it) {
        s = TNT_ERR_ARG;
        goto done;
    }
    int64_t steps = o && o->steps > 0 ? o->steps : tnt_dataset_cardinality(data);
    tnt__progress_start(&prog, o && o->out ? o->out : stdout, verbose, steps);
    tnt_batch b;
    for (int64_t step = 0; !(o && o->steps > 0 && step >= o->steps); step++) {
        int r = tnt_dataset_iter_next(it, &b);
        if (r < 0) {
            s = (tnt_status)r;
            goto done;
        }
        if (r == 0) break;
        if (b.n == 0) continue;
        if ((s = check_batch(m, &b, labels, who)) != TNT_OK) goto done;
        tnt__plan *p = tnt__model_plan(m, b.n);
        if (!p) {
            s = TNT_ERR_BACKEND;
            goto done;
        }
        float *pred;
        if ((s = tnt__model_forward(m, p, b.x.data, false, &pred)) != TNT_OK) goto done;
        if (labels) {
            if ((s = loss_and_metrics(m, p, pred, &b, 1.0 / (double)b.n, NULL, &acc)) != TNT_OK) goto done;
            tnt_logs cur;
            accum_logs(m, &acc, &cur);
            tnt__progress_update(&prog, step + 1, &cur);
        } else {
            if (n_rows + b.n > cap_rows) {
                int64_t cap = TNT_MAX(2 * cap_rows, n_rows + b.n);
                float *nr = realloc(rows, (size_t)(cap * c) * sizeof(float));
                if (!nr) {
                    s = tnt__error(TNT_ERR_NOMEM, "%s: out of memory for %lld output rows", who, (long long)cap);
                    goto done;
                }
                rows = nr;
                cap_rows = cap;
            }
            memcpy(rows + n_rows * c, pred, (size_t)(b.n * c) * sizeof(float));
            n_rows += b.n;
            tnt__progress_update(&prog, step + 1, NULL);
        }
    }
    if (labels) {
        tnt_logs res;
        accum_logs(m, &acc, &res);
        tnt__progress_finish(&prog, &res, NULL);
        if (logs) *logs = res;
        CALL_CB(cbs, n_cbs, on_test_end, m, &res);
    } else {
        tnt__progress_finish(&prog, NULL, NULL);
        tnt_tensor *t = tnt_tensor_new(tnt__shape_with_batch(n_rows, m->output_shape));
        if (!t) {
            s = TNT_ERR_NOMEM;
            goto done;
        }
        if (n_rows) memcpy(t->data, rows, (size_t)(n_rows * c) * sizeof(float));
        *out = t;
        CALL_CB(cbs, n_cbs, on_predict_end, m, &empty);
    }
done:
    free(rows);
    tnt_dataset_iter_free(it);
    return s;
}

static tnt_status require_compiled(const tnt_model *m, const char *who) {
    if (!m) return tnt__error(TNT_ERR_ARG, "%s: model is NULL", who);
    if (!m->compiled)
        return tnt__error(TNT_ERR_STATE, "%s: model \"%s\" is not compiled (call tnt_compile first)", who, m->name);
    return TNT_OK;
}

tnt_status tnt_evaluate(tnt_model *m, tnt_dataset *data, const tnt_eval_opts *opts, tnt_logs *logs) {
    tnt_status s = require_compiled(m, "evaluate");
    if (s != TNT_OK) return s;
    return run_inference(m, data, opts, true, logs, NULL, "evaluate");
}

tnt_status tnt_predict(tnt_model *m, tnt_dataset *data, const tnt_eval_opts *opts, tnt_tensor **out) {
    if (!m) return tnt__error(TNT_ERR_ARG, "predict: model is NULL");
    if (!out) return tnt__error(TNT_ERR_ARG, "predict: out is NULL");
    *out = NULL;
    tnt_status s = tnt__model_setup_weights(m);
    if (s != TNT_OK) return s;
    return run_inference(m, data, opts, false, NULL, out, "predict");
}

tnt_status tnt_predict_on_batch(tnt_model *m, const tnt_tensor *x, tnt_tensor **out) {
    if (!m || !x || !out) return tnt__error(TNT_ERR_ARG, "predict_on_batch: NULL argument");
    *out = NULL;
    tnt_status s = tnt__model_setup_weights(m);
    if (s != TNT_OK) return s;
    tnt_batch b = {.n = x->shape.ndim ? x->shape.dim[0] : 0, .x = *x};
    if ((s = check_batch(m, &b, false, "predict_on_batch")) != TNT_OK) return s;
    if (b.n == 0) return tnt__error(TNT_ERR_ARG, "predict_on_batch: batch of 0 samples");
    tnt__plan *p = tnt__model_plan(m, b.n);
    if (!p) return TNT_ERR_BACKEND;
    float *pred;
    if ((s = tnt__model_forward(m, p, x->data, false, &pred)) != TNT_OK) return s;
    tnt_tensor *t = tnt_tensor_new(tnt__shape_with_batch(b.n, m->output_shape));
    if (!t) return TNT_ERR_NOMEM;
    memcpy(t->data, pred, (size_t)(b.n * tnt__model_output_size(m)) * sizeof(float));
    *out = t;
    return TNT_OK;
}

tnt_status tnt_fit(tnt_model *m, tnt_dataset *train, const tnt_fit_opts *opts, tnt_history **history) {
    tnt_status s = require_compiled(m, "fit");
    if (history) *history = NULL;
    if (s != TNT_OK) return s;
    if (!train) return tnt__error(TNT_ERR_ARG, "fit: training dataset is NULL");
    if (!tnt_dataset_is_batched(train))
        return tnt__error(TNT_ERR_ARG, "fit: training dataset is not batched (use tnt_dataset_batch)");
    tnt_fit_opts o = opts ? *opts : (tnt_fit_opts){0};
    if (o.epochs <= 0) o.epochs = 1;
    if (o.validation_freq <= 0) o.validation_freq = 1;
    if (o.initial_epoch < 0 || o.initial_epoch >= o.epochs)
        return tnt__error(TNT_ERR_ARG, "fit: initial_epoch %d (expected 0 <= initial_epoch < epochs = %d)",
                          o.initial_epoch, o.epochs);
    if (o.validation_data && !tnt_dataset_is_batched(o.validation_data))
        return tnt__error(TNT_ERR_ARG, "fit: validation dataset is not batched (use tnt_dataset_batch)");
    if (!o.out) o.out = stdout;
    tnt_history *h = tnt__history_new();
    if (!h) return TNT_ERR_NOMEM;
    tnt_dataset_iter *it = NULL;
    const tnt_callback *cbs = o.callbacks;
    int n_cbs = o.n_callbacks;
    tnt_logs logs = {0};
    m->stop_training = false;
    CALL_CB(cbs, n_cbs, on_train_begin, m, &logs);
    int64_t steps_hint = o.steps_per_epoch > 0 ? o.steps_per_epoch : tnt_dataset_cardinality(train);
    for (int epoch = o.initial_epoch; epoch < o.epochs && !m->stop_training; epoch++) {
        accum acc = {0};
        tnt__progress prog;
        logs.n = 0;
        if (o.verbose) fprintf(o.out, "Epoch %d/%d\n", epoch + 1, o.epochs);
        tnt__progress_start(&prog, o.out, o.verbose, steps_hint);
        CALL_CB(cbs, n_cbs, on_epoch_begin, m, epoch, &logs);
        it = tnt_dataset_iter_new(train, epoch);
        if (!it) {
            s = TNT_ERR_ARG;
            goto done;
        }
        int64_t step = 0;
        for (; !(o.steps_per_epoch > 0 && step >= o.steps_per_epoch); step++) {
            tnt_batch b;
            int r = tnt_dataset_iter_next(it, &b);
            if (r < 0) {
                s = (tnt_status)r;
                goto done;
            }
            if (r == 0) break;
            if ((s = check_batch(m, &b, true, "fit")) != TNT_OK) goto done;
            if (b.n == 0) continue;
            CALL_CB(cbs, n_cbs, on_train_batch_begin, m, step, &logs);
            if ((s = train_step(m, &b, &acc)) != TNT_OK) goto done;
            accum_logs(m, &acc, &logs);
            CALL_CB(cbs, n_cbs, on_train_batch_end, m, step, &logs);
            tnt__progress_update(&prog, step + 1, &logs);
        }
        tnt_dataset_iter_free(it);
        it = NULL;
        if (step == 0) {
            s = tnt__error(TNT_ERR_ARG, "fit: the training dataset yielded no batches in epoch %d", epoch + 1);
            goto done;
        }
        accum_logs(m, &acc, &logs);
        tnt_logs val = {0};
        bool has_val = false;
        if (o.validation_data && (epoch + 1) % o.validation_freq == 0) {
            tnt_eval_opts eo = {.verbose = 0, .callbacks = cbs, .n_callbacks = n_cbs, .out = o.out};
            if ((s = run_inference(m, o.validation_data, &eo, true, &val, NULL, "fit (validation)")) != TNT_OK)
                goto done;
            tnt__logs_merge(&logs, &val, "val_");
            has_val = true;
        }
        tnt__progress_finish(&prog, &logs, has_val ? "val_" : NULL);
        if ((s = tnt__history_append(h, epoch, &logs)) != TNT_OK) goto done;
        CALL_CB(cbs, n_cbs, on_epoch_end, m, epoch, &logs);
    }
    CALL_CB(cbs, n_cbs, on_train_end, m, &logs);
done:
    tnt_dataset_iter_free(it);
    if (s == TNT_OK && history) *history = h;
    else tnt_history_free(h);
    return s;
}

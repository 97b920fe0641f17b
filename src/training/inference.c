/* inference.c: evaluate and predict, the forward-only passes over data (fit.c: fit, whose
 * validation runs here too). The loss/metric sums and the batch checks are fit.c's, shared
 * through fit_internal.h. */
#include "data/dataset.h"
#include "comm/comm.h"
#include "model/model.h"
#include "training/parallel.h"
#include "training/progress.h"
#include "training/fit_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
tnt_status tnt__run_inference(tnt_model *m, tnt_dataset *data, const tnt_eval_opts *o, bool labels,
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
    if ((s = tnt__instance_for(m, data, who)) != TNT_OK) return s;
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
                tnt__accum_logs(m, &acc, &cur);
                CALL_CB_SOFT(local, cbs, n_cbs, on_test_batch_end, m, step, &cur);
            } else {
                local = predict_batch_end(m, cbs, n_cbs, step, &(float){0}, 0);
            }
            if (local != TNT_OK) break;
            continue;
        }
        if ((local = tnt__check_batch(m, &b, labels, f.weighted, who)) != TNT_OK) break;
        tnt__plan *p = tnt__model_plan(m, b.n);
        float *pred;
        if (!p) {
            local = TNT_ERR_BACKEND;
            break;
        }
        if ((local = tnt__model_forward(m, p, b.x.data, &st, &pred)) != TNT_OK) break;
        if (labels) {
            double counted = acc.loss_count;
            if ((local = tnt__loss_and_metrics(m, p, b.x.data, &b, 1.0 / (double)st.global_n, false, f.weighted, &acc)) !=
                TNT_OK)
                break;
            tnt__add_penalties(m, &acc, acc.loss_count - counted, b.n, tnt__weight_penalty(m));
            tnt_logs cur;
            tnt__accum_logs(m, &acc, &cur);
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
        if ((s = tnt__accum_global(m, &acc, &total, parallel)) != TNT_OK) goto done;
        tnt__accum_logs(m, &total, &res);
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

tnt_status tnt_evaluate(tnt_model *m, tnt_dataset *data, const tnt_eval_opts *opts, tnt_logs *logs) {
    tnt_status s = tnt__require_compiled(m, "evaluate");
    if (m && tnt__is_parallel(m)) s = tnt__agree(s, NULL, 0);
    tnt_dataset *view;
    data = tnt__batched(data, opts ? opts->micro_batch_size : 0, &view);
    if (s == TNT_OK) s = tnt__prepare_parallel(m, "evaluate", opts && opts->no_distribute ? NULL : data, NULL, NULL);
    if (s == TNT_OK) s = tnt__run_inference(m, data, opts, true, logs, NULL, "evaluate");
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
    data = tnt__batched(data, opts ? opts->micro_batch_size : 0, &view);
    if (s == TNT_OK) s = tnt__prepare_parallel(m, "predict", opts && opts->no_distribute ? NULL : data, NULL, NULL);
    if (s == TNT_OK) s = tnt__run_inference(m, data, opts, false, NULL, out, "predict");
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
    if ((s = tnt__check_batch(m, &b, false, false, "predict_on_batch")) != TNT_OK) return s;
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

/* compile.c: tnt_compile. Checks the loss, its options, the metrics and Keras's loss_weights,
 * allocates and initializes the weights once, and decides per output whether the loss runs fused
 * on the logits of a softmax (sigmoid) output layer, as Keras does in graph mode. */
#include "model/model.h"
#include "model/device.h"
#include "model/window.h"
#include "objectives/loss.h"
#include "objectives/traced_loss.h"
#include "objectives/metrics.h"
#include "optimizers/optimizer.h"
#include "layers/regularizer.h"

#include <math.h>
#include <stdio.h>

/* Output k is produced by a softmax (sigmoid) that only the loss reads. */
static tnt_activation output_activation(const tnt_model *m, int k) {
    int t = m->outputs[k];
    for (int i = 0; i < m->n_nodes; i++)
        for (int j = 0; j < m->nodes[i].n_in; j++)
            if (m->nodes[i].in[j] == t) return TNT_ACT_LINEAR; /* also read by another layer */
    for (int i = 0; i < m->n_nodes; i++)
        if (m->nodes[i].out == t) /* an activity penalty needs the gradient w.r.t. the output itself */
            return tnt__layer_has_activity_rule(m->nodes[i].layer) ? TNT_ACT_LINEAR : m->nodes[i].layer->activation;
    return TNT_ACT_LINEAR;
}

/* Keras's loss_weights: one finite weight >= 0 per output; w receives them (all 1 when none). */
static tnt_status check_loss_weights(const tnt_model *m, const tnt_compile_opts *opts, float *w) {
    for (int k = 0; k < m->n_outputs; k++) w[k] = 1.0f;
    if (!opts->loss_weights && opts->n_loss_weights == 0) return TNT_OK;
    if (!opts->loss_weights || opts->n_loss_weights != m->n_outputs) {
        char names[256] = "";
        for (int k = 0; k < m->n_outputs; k++)
            snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", k ? ", " : "", tnt__model_output_name(m, k));
        return tnt__error(TNT_ERR_ARG, "compile: model \"%s\": loss_weights %s %d values, the model has %d output%s (%s)",
                          m->name, opts->loss_weights ? "has" : "is NULL with", opts->n_loss_weights, m->n_outputs,
                          m->n_outputs == 1 ? "" : "s", names);
    }
    for (int k = 0; k < m->n_outputs; k++) {
        float x = opts->loss_weights[k];
        if (!isfinite(x) || x < 0)
            return tnt__error(TNT_ERR_ARG, "compile: model \"%s\": loss_weights[%d] (output %s) is %g: expected a finite "
                              "number >= 0", m->name, k, tnt__model_output_name(m, k), x);
        w[k] = x;
    }
    return TNT_OK;
}

tnt_status tnt_compile(tnt_model *m, const tnt_compile_opts *opts) {
    if (!m) {
        if (opts) tnt_optimizer_free(opts->optimizer);
        return tnt__error(TNT_ERR_ARG, "compile: model is NULL");
    }
    if (!opts) return tnt__error(TNT_ERR_ARG, "compile: options are NULL (optimizer and loss are required)");
    if (!opts->optimizer)
        return tnt__error_prefix(TNT_ERR_ARG, "compile: model \"%s\": optimizer is NULL (its constructor failed?): ", m->name);
    /* the model's own optimizer is kept with its state, as Keras's compile(optimizer=model.optimizer) */
    bool own_optimizer = opts->optimizer == m->optimizer;
    tnt_status s = TNT_OK;
    if (opts->device < TNT_DEVICE_DEFAULT || opts->device > TNT_DEVICE_GPU) {
        s = tnt__error(TNT_ERR_ARG, "compile: model \"%s\": device %d (expected a tnt_device: default, cpu, auto or gpu)",
                       m->name, (int)opts->device);
        goto fail;
    }
    if (opts->loss <= TNT_LOSS_NONE || opts->loss >= TNT_LOSS_KIND_COUNT) {
        s = tnt__error(TNT_ERR_ARG, "compile: model \"%s\": loss %d is not a known loss", m->name, (int)opts->loss);
        goto fail;
    }
    tnt_loss_kind kinds[TNT_MAX_IO];
    bool mixed = false;
    if (opts->output_losses && opts->n_output_losses != m->n_outputs) {
        s = tnt__error(TNT_ERR_ARG, "compile: model \"%s\": %d losses for %d outputs (one per output)", m->name,
                       opts->n_output_losses, m->n_outputs);
        goto fail;
    }
    for (int k = 0; k < m->n_outputs; k++) {
        kinds[k] = opts->output_losses ? opts->output_losses[k] : opts->loss;
        if (kinds[k] <= TNT_LOSS_NONE || kinds[k] >= TNT_LOSS_KIND_COUNT) {
            s = tnt__error(TNT_ERR_ARG, "compile: model \"%s\": loss %d of output %d is not a known loss", m->name,
                           (int)kinds[k], k);
            goto fail;
        }
        mixed |= kinds[k] != kinds[0];
    }
    if (mixed && (opts->label_smoothing != 0 || opts->has_ignore_class || opts->huber_delta != 0)) {
        s = tnt__error(TNT_ERR_UNSUPPORTED, "compile: model \"%s\": label_smoothing, ignore_class and huber delta "
                       "need the same loss on every output", m->name);
        goto fail;
    }
    /* a metric's labels must fit the loss of each output it applies to (all, or "@K" one) */
    int nm = tnt__metrics_parse(opts->metrics, TNT_LOSS_NONE, m->metrics, TNT_MAX_METRICS);
    for (int j = 0; j < nm; j++) {
        if (m->metrics[j].output >= m->n_outputs) {
            s = tnt__error(TNT_ERR_ARG, "compile: model \"%s\": metric \"%s\" is for output %d of %d", m->name,
                           m->metrics[j].name, m->metrics[j].output, m->n_outputs);
            goto fail;
        }
        for (int k = 0; k < m->n_outputs; k++)
            if (tnt__metric_on_output(&m->metrics[j], k) && tnt__metric_check_loss(&m->metrics[j], kinds[k]) != TNT_OK) {
                nm = -1;
                break;
            }
        if (nm < 0) break;
        m->metrics[j].loss = kinds[m->metrics[j].output >= 0 ? m->metrics[j].output : 0];
    }
    if (nm < 0) {
        s = tnt__error_prefix(TNT_ERR_ARG, "compile: model \"%s\": ", m->name);
        goto fail;
    }
    int slots = 0; /* AUC: a curve of counts per (output, metric) */
    for (int k = 0; k < m->n_outputs; k++)
        for (int j = 0; j < TNT_MAX_METRICS; j++) {
            bool curve = j < nm && tnt__metric_is_curve(&m->metrics[j]) && tnt__metric_on_output(&m->metrics[j], k);
            m->curve_slot[k][j] = (signed char)(curve ? slots++ : -1);
        }
    if (slots > TNT__CURVE_SLOTS) {
        s = tnt__error(TNT_ERR_UNSUPPORTED, "compile: model \"%s\": %d AUC metrics over its outputs (at most %d)",
                       m->name, slots, TNT__CURVE_SLOTS);
        goto fail;
    }
    m->n_metrics = nm;
    if (opts->label_smoothing < 0 || opts->label_smoothing > 1 || opts->label_smoothing != opts->label_smoothing) {
        s = tnt__error(TNT_ERR_ARG, "compile: model \"%s\": label_smoothing %g (expected 0 <= s <= 1)", m->name,
                       opts->label_smoothing);
        goto fail;
    }
    if (opts->has_ignore_class && opts->loss != TNT_SPARSE_CATEGORICAL_CROSSENTROPY) {
        s = tnt__error(TNT_ERR_ARG, "compile: model \"%s\": ignore_class applies to sparse_categorical_crossentropy, not %s",
                       m->name, tnt_loss_name(opts->loss));
        goto fail;
    }
    if (opts->label_smoothing != 0 && opts->loss != TNT_SPARSE_CATEGORICAL_CROSSENTROPY &&
        opts->loss != TNT_CATEGORICAL_CROSSENTROPY && opts->loss != TNT_BINARY_CROSSENTROPY) {
        s = tnt__error(TNT_ERR_ARG, "compile: model \"%s\": label_smoothing applies to the cross-entropies, not %s",
                       m->name, tnt_loss_name(opts->loss));
        goto fail;
    }
    if (!(opts->huber_delta >= 0) || (opts->huber_delta != 0 && opts->loss != TNT_HUBER)) {
        s = tnt__error(TNT_ERR_ARG, "compile: model \"%s\": huber delta %g (expected a number > 0, with loss huber)",
                       m->name, opts->huber_delta);
        goto fail;
    }
    float weights[TNT_MAX_IO]; /* copied first: opts may hold the model's own (tnt_model_compile_opts) */
    if ((s = check_loss_weights(m, opts, weights)) != TNT_OK) goto fail;
    free(m->loss_opts);
    m->loss_opts = NULL;
    if (opts->label_smoothing != 0 || opts->has_ignore_class || opts->huber_delta != 0) {
        if (!(m->loss_opts = malloc(sizeof *m->loss_opts))) {
            s = TNT_ERR_NOMEM;
            goto fail;
        }
        *m->loss_opts = (tnt__loss_opts){opts->label_smoothing, opts->has_ignore_class, opts->ignore_class,
                                         opts->huber_delta};
    }
    if (opts->seed) m->seed = opts->seed;
    if ((s = tnt__model_setup_weights(m)) != TNT_OK) goto fail;
    for (int i = 0; i < m->n_layers; i++)
        if ((s = tnt__layer_check_rules(m->layers[i])) != TNT_OK) {
            tnt__error_prefix(s, "compile: model \"%s\": ", m->name);
            goto fail;
        }
    if ((s = tnt__optimizer_prepare(opts->optimizer, m->n_params)) != TNT_OK) goto fail;
    /* the next fit chooses its device again: the host copy takes the device's weights and slots */
    if ((s = tnt__model_host_weights(m)) != TNT_OK) goto fail;
    if ((s = tnt__model_detach_window(m)) != TNT_OK) goto fail; /* the old optimizer's slots may be there */
    tnt__model_dev_free(m);
    m->device_request = opts->device;
    m->device_reason_logged = false;
    if (!own_optimizer) tnt_optimizer_free(m->optimizer);
    m->optimizer = opts->optimizer;
    m->loss = m->n_outputs ? kinds[0] : opts->loss;
    memcpy(m->output_loss, kinds, (size_t)m->n_outputs * sizeof kinds[0]);
    m->mixed_losses = mixed;
    m->from_logits = opts->from_logits;
    memcpy(m->loss_weights, weights, sizeof weights);
    m->has_loss_weights = opts->loss_weights != NULL;
    /* Keras in graph mode computes cross-entropy from the logits under a softmax (or sigmoid for
     * binary cross-entropy) output: the same numerically stable fused path here. */
    for (int k = 0; k < m->n_outputs; k++) {
        tnt_activation act = output_activation(m, k);
        bool ce = kinds[k] == TNT_SPARSE_CATEGORICAL_CROSSENTROPY || kinds[k] == TNT_CATEGORICAL_CROSSENTROPY;
        m->fused_output_loss[k] = !opts->from_logits && ((ce && act == TNT_ACT_SOFTMAX) ||
                                                         (kinds[k] == TNT_BINARY_CROSSENTROPY && act == TNT_ACT_SIGMOID));
    }
    for (int k = 0; k < TNT_MAX_IO; k++) tnt__traced_loss_free(m->traced_loss[k]), m->traced_loss[k] = NULL;
    for (int j = 0; j < TNT_MAX_METRICS; j++) {
        tnt__traced_loss_free(m->traced_metric[j]), m->traced_metric[j] = NULL;
        tnt__state_metric_free(m->state_metric[j]), m->state_metric[j] = NULL;
    }
    m->n_metric_state = 0;
    tnt__model_clear_plans(m); /* the plans know where the fused logits go */
    m->compiled = true;
    m->weights_synced = false; /* broadcast from the master at the first use */
    return TNT_OK;
fail:
    if (!own_optimizer) tnt_optimizer_free(opts->optimizer);
    return s;
}


tnt_status tnt_model_set_loss_graph(tnt_model *m, int output, const char *json) {
    if (!m) return tnt__error(TNT_ERR_ARG, "tnt_model_set_loss_graph: model is NULL");
    if (!m->compiled)
        return tnt__error(TNT_ERR_STATE, "tnt_model_set_loss_graph: model \"%s\" is not compiled", m->name);
    if (output < 0 || output >= m->n_outputs)
        return tnt__error(TNT_ERR_ARG, "tnt_model_set_loss_graph: output %d of model \"%s\" (it has %d)", output,
                          m->name, m->n_outputs);
    char who[TNT_NAME_MAX + 64];
    snprintf(who, sizeof who, "model \"%s\" output %d", m->name, output);
    tnt__traced_loss *t = NULL;
    if (json && !(t = tnt__traced_loss_new(json, m->tensor_shape[m->outputs[output]], who))) return tnt_last_status();
    tnt__traced_loss_free(m->traced_loss[output]);
    m->traced_loss[output] = t;
    /* the user's loss reads the output itself, never the logits under it */
    tnt_activation act = output_activation(m, output);
    tnt_loss_kind kind = m->output_loss[output];
    bool ce = kind == TNT_SPARSE_CATEGORICAL_CROSSENTROPY || kind == TNT_CATEGORICAL_CROSSENTROPY;
    m->fused_output_loss[output] = !t && !m->from_logits && ((ce && act == TNT_ACT_SOFTMAX) ||
                                                             (kind == TNT_BINARY_CROSSENTROPY && act == TNT_ACT_SIGMOID));
    tnt__model_clear_plans(m);
    return TNT_OK;
}

static tnt_status add_metric(tnt_model *m, const char *name, int output, const char *json, const char *result_json) {
    if (!m) return tnt__error(TNT_ERR_ARG, "tnt_model_add_metric_graph: model is NULL");
    if (!m->compiled)
        return tnt__error(TNT_ERR_STATE, "tnt_model_add_metric_graph: model \"%s\" is not compiled", m->name);
    bool weighted = name && name[0] == '~'; /* one of Keras's weighted_metrics */
    if (weighted) name++;
    if (!name || !*name || strlen(name) >= TNT__METRIC_NAME_MAX)
        return tnt__error(TNT_ERR_ARG, "tnt_model_add_metric_graph: name \"%s\" (expected 1 to %d characters)",
                          name ? name : "(null)", TNT__METRIC_NAME_MAX - 1);
    if (output < 0 || output >= m->n_outputs || !json)
        return tnt__error(TNT_ERR_ARG, "tnt_model_add_metric_graph: metric \"%s\": output %d of model \"%s\" (it has "
                          "%d)%s", name, output, m->name, m->n_outputs, json ? "" : ", json is NULL");
    if (m->n_metrics >= TNT_MAX_METRICS)
        return tnt__error(TNT_ERR_UNSUPPORTED, "tnt_model_add_metric_graph: model \"%s\" has %d metrics (at most %d)",
                          m->name, m->n_metrics, TNT_MAX_METRICS);
    for (int j = 0; j < m->n_metrics; j++)
        if (!strcmp(m->metrics[j].name, name) && tnt__metric_on_output(&m->metrics[j], output))
            return tnt__error(TNT_ERR_ARG, "tnt_model_add_metric_graph: model \"%s\" has a metric \"%s\" already",
                              m->name, name);
    char who[TNT_NAME_MAX + 64];
    snprintf(who, sizeof who, "metric \"%s\"", name);
    tnt__traced_loss *t = NULL;
    tnt__state_metric *sm = NULL;
    if (!result_json) {
        if (!(t = tnt__traced_loss_new(json, m->tensor_shape[m->outputs[output]], who))) return tnt_last_status();
    } else {
        if (!(sm = tnt__state_metric_new(json, result_json, m->tensor_shape[m->outputs[output]], who)))
            return tnt_last_status();
        if (weighted && !tnt__state_metric_takes_weights(sm)) {
            tnt__state_metric_free(sm);
            return tnt__error(TNT_ERR_ARG, "tnt_model_add_metric_state_graphs: %s is weighted (\"~\") but its update "
                              "graph takes no sample weights (a third input of shape (None,))", who);
        }
        if (m->n_metric_state + tnt__state_metric_size(sm) > TNT__METRIC_STATE_MAX) {
            tnt__state_metric_free(sm);
            return tnt__error(TNT_ERR_UNSUPPORTED, "%s: its state of %lld values with the others' %lld is more than %d",
                              who, (long long)tnt__state_metric_size(sm), (long long)m->n_metric_state,
                              TNT__METRIC_STATE_MAX);
        }
    }
    int j = m->n_metrics++;
    tnt__metric *mt = &m->metrics[j];
    *mt = (tnt__metric){.kind = TNT__METRIC_MSE, .output = m->n_outputs > 1 ? output : -1,
                        .loss = m->output_loss[output], .weighted = weighted};
    snprintf(mt->name, sizeof mt->name, "%s", name);
    for (int k = 0; k < TNT_MAX_IO; k++) m->curve_slot[k][j] = -1;
    m->traced_metric[j] = t;
    m->state_metric[j] = sm;
    if (sm) m->state_metric_off[j] = m->n_metric_state, m->n_metric_state += tnt__state_metric_size(sm);
    return TNT_OK;
}

tnt_status tnt_model_add_metric_graph(tnt_model *m, const char *name, int output, const char *json) {
    return add_metric(m, name, output, json, NULL);
}

tnt_status tnt_model_add_metric_state_graphs(tnt_model *m, const char *name, int output, const char *update_json,
                                             const char *result_json) {
    if (!result_json) return tnt__error(TNT_ERR_ARG, "tnt_model_add_metric_state_graphs: result_json is NULL");
    return add_metric(m, name, output, update_json, result_json);
}

int64_t tnt_model_loss_graph_labels(const tnt_model *m, int output) {
    if (!m || output < 0 || output >= m->n_outputs || !m->traced_loss[output]) return -1;
    return tnt__traced_loss_labels(m->traced_loss[output]);
}

/* traced_loss.c: the user's loss function run as an operation graph (ops/exec.c) on a batch:
 * forward gives the per-sample losses, backward from scale * w_i / positions gives d/d(y_pred).
 * One plan is kept for the last batch size (a fit sees one or two: the batch and the last). */
#include "objectives/traced_loss.h"

#include "core/core.h"
#include "ops/ops.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

struct tnt__traced_loss {
    tnt_opgraph *g;
    char *json;
    tnt_shape y_shape; /* per sample */
    int pred_in;       /* y_pred's input: 1, or 0 for a graph of y_pred alone (no labels) */
    char name[64];     /* the graph's "name" */
    tnt__opplan *plan;
    int64_t plan_n;
    void *ws;
    float *out, *dout;
    int64_t out_numel;
};

static void drop_plan(tnt__traced_loss *t) {
    tnt__opplan_destroy(t->plan);
    tnt__free(t->ws);
    tnt__free(t->out);
    tnt__free(t->dout);
    t->plan = NULL, t->ws = NULL, t->out = t->dout = NULL, t->plan_n = -1;
}

void tnt__traced_loss_free(tnt__traced_loss *t) {
    if (!t) return;
    drop_plan(t);
    tnt_opgraph_free(t->g);
    free(t->json);
    free(t);
}

/* Shape s without its batch axis. */
static tnt_shape per_sample(tnt_shape s) {
    tnt_shape r = {.ndim = s.ndim - 1};
    for (int d = 1; d < s.ndim; d++) r.dim[d - 1] = s.dim[d];
    return r;
}

tnt__traced_loss *tnt__traced_loss_new(const char *json, tnt_shape pred_shape, const char *who) {
    char a[96], b[96];
    tnt_opgraph *g = tnt_opgraph_from_json(json);
    if (!g) return tnt__error_prefix(TNT_ERR_FORMAT, "%s: loss graph: ", who), NULL;
    if (g->n_inputs < 1 || g->n_inputs > 2 || g->n_outputs != 1) {
        tnt__error(TNT_ERR_ARG, "%s: a loss graph takes 2 inputs (y_true, y_pred), or y_pred alone, and gives 1 "
                   "output, this one %d and %d", who, g->n_inputs, g->n_outputs);
        goto fail;
    }
    const int pred_in = g->n_inputs - 1;
    if (g->n_weights != 0) {
        tnt__error(TNT_ERR_UNSUPPORTED, "%s: a loss graph with weights of its own (%d) is not supported", who,
                   g->n_weights);
        goto fail;
    }
    for (int k = 0; k < g->n_inputs; k++) {
        tnt_shape s = g->inputs[k];
        bool is_pred = k == pred_in;
        bool fits = s.ndim >= 1 && s.dim[0] == TNT_DIM_NONE && (!is_pred || s.ndim == pred_shape.ndim + 1);
        for (int d = 1; fits && d < s.ndim; d++)
            fits = s.dim[d] != TNT_DIM_NONE && (!is_pred || s.dim[d] == pred_shape.dim[d - 1]);
        if (!fits) {
            tnt__error(TNT_ERR_SHAPE, "%s: the loss graph's %s has shape %s: expected (None%s%s) with the model output %s",
                       who, is_pred ? "y_pred" : "y_true", tnt_shape_str(s, a, sizeof a), is_pred ? ", " : ", ...",
                       is_pred ? "..." : "", tnt_shape_str(pred_shape, b, sizeof b));
            goto fail;
        }
    }
    tnt__traced_loss *t = calloc(1, sizeof *t);
    if (!t || !(t->json = tnt__strdup(json))) {
        free(t);
        tnt__error(TNT_ERR_NOMEM, "%s: out of memory", who);
        goto fail;
    }
    t->g = g;
    t->pred_in = pred_in;
    cJSON *root = cJSON_Parse(json);
    const cJSON *nm = cJSON_GetObjectItemCaseSensitive(root, "name");
    snprintf(t->name, sizeof t->name, "%s", cJSON_IsString(nm) && nm->valuestring[0] ? nm->valuestring : "traced_loss");
    cJSON_Delete(root);
    t->y_shape = pred_in ? per_sample(g->inputs[0]) : (tnt_shape){.ndim = 1, .dim = {0}};
    t->plan_n = -1;
    return t;
fail:
    tnt_opgraph_free(g);
    return NULL;
}

int64_t tnt__traced_loss_labels(const tnt__traced_loss *t) { return tnt_shape_numel(t->y_shape); }

const char *tnt__traced_loss_json(const tnt__traced_loss *t) { return t->json; }
const char *tnt__traced_loss_name(const tnt__traced_loss *t) { return t->name; }

static tnt_status plan_for(tnt__traced_loss *t, int64_t n) {
    if (t->plan && t->plan_n == n) return TNT_OK;
    drop_plan(t);
    tnt_shape in[2] = {tnt__shape_with_batch(n, t->y_shape), tnt__shape_with_batch(n, per_sample(t->g->inputs[t->pred_in]))};
    if (!(t->plan = tnt__opplan_create(t->g, t->pred_in ? in : in + 1, true)))
        return tnt__error_prefix(TNT_ERR_SHAPE, "loss function: ");
    tnt_shape os = tnt__opplan_shape(t->plan, t->g->outputs[0]);
    char a[96];
    if (os.ndim > 0 && os.dim[0] != n) {
        drop_plan(t);
        return tnt__error(TNT_ERR_SHAPE, "loss function: its result has shape %s on a batch of %lld: expected the "
                          "loss per sample (batch axis first) or a scalar", tnt_shape_str(os, a, sizeof a), (long long)n);
    }
    if (tnt__opplan_dtype(t->plan, t->g->outputs[0]) != TNT__F32) {
        drop_plan(t);
        return tnt__error(TNT_ERR_ARG, "loss function: its result is %s, expected float",
                          tnt__dt_name(tnt__opplan_dtype(t->plan, t->g->outputs[0])));
    }
    t->out_numel = tnt_shape_numel(os);
    size_t ws = tnt__opplan_workspace(t->plan);
    t->ws = tnt__alloc(ws ? ws : 64);
    t->out = tnt__alloc((size_t)(t->out_numel ? t->out_numel : 1) * sizeof(float));
    t->dout = tnt__alloc((size_t)(t->out_numel ? t->out_numel : 1) * sizeof(float));
    if (!t->ws || !t->out || !t->dout) {
        drop_plan(t);
        return tnt__error(TNT_ERR_NOMEM, "loss function: out of memory");
    }
    t->plan_n = n;
    return TNT_OK;
}

tnt_status tnt__traced_loss_compute(tnt__traced_loss *t, int64_t n, const float *pred, const float *y, const float *w,
                                    double scale, float *dpred, double *loss_sum) {
    if (n == 0) return TNT_OK;
    tnt_status s = plan_for(t, n);
    if (s != TNT_OK) return s;
    const float *ins[2] = {y, pred};
    float *outs[1] = {t->out};
    tnt__opstep st = {.inputs = ins + 1 - t->pred_in, .outputs = outs, .workspace = t->ws, .training = true};
    if ((s = tnt__opplan_forward(t->plan, &st)) != TNT_OK) return tnt__error_prefix(s, "loss function: ");
    const bool scalar = t->out_numel == 1 && tnt__opplan_shape(t->plan, t->g->outputs[0]).ndim == 0;
    const int64_t per = scalar ? 1 : t->out_numel / n;
    double sum = 0, wsum = 0;
    for (int64_t i = 0; i < n; i++) wsum += w ? (double)w[i] : 1.0;
    if (scalar) {
        sum = (double)t->out[0] * wsum; /* the batch mean, for each of its (weighted) samples */
        t->dout[0] = (float)(scale * wsum);
    } else {
        for (int64_t i = 0; i < n; i++) {
            double wi = w ? (double)w[i] : 1.0, li = 0;
            for (int64_t j = 0; j < per; j++) {
                li += t->out[i * per + j];
                t->dout[i * per + j] = (float)(scale * wi / (double)per);
            }
            sum += wi * li / (double)per;
        }
    }
    *loss_sum += sum;
    if (!dpred) return TNT_OK;
    const float *douts[1] = {t->dout};
    float *dins[2] = {NULL, dpred};
    if ((s = tnt__opplan_backward(t->plan, &st, douts, dins + 1 - t->pred_in, NULL)) != TNT_OK)
        return tnt__error_prefix(s, "loss function: ");
    return TNT_OK;
}

/* ---- metrics with state ---- */

#define STATE_MAX TNT__MAX_OP_IN

struct tnt__state_metric {
    tnt__traced_loss *update; /* its graph and plan cache (the loss machinery's, without backward) */
    tnt_opgraph *result;
    tnt__opplan *result_plan;
    int n_state;
    int64_t numel[STATE_MAX], off[STATE_MAX], size;
    bool takes_weights; /* a third input: the sample weights, (None,) */
    float *ones;        /* the weights fed when the batch has none (Keras's sample_weight=None) */
    int64_t ones_n;
};

void tnt__state_metric_free(tnt__state_metric *t) {
    if (!t) return;
    tnt__traced_loss_free(t->update);
    tnt__opplan_destroy(t->result_plan);
    tnt_opgraph_free(t->result);
    free(t->ones);
    free(t);
}

tnt__state_metric *tnt__state_metric_new(const char *update_json, const char *result_json, tnt_shape pred_shape,
                                         const char *who) {
    tnt__state_metric *t = calloc(1, sizeof *t);
    if (!t) return tnt__error(TNT_ERR_NOMEM, "%s: out of memory", who), NULL;
    tnt_opgraph *u = tnt_opgraph_from_json(update_json);
    if (!u) {
        tnt__error_prefix(TNT_ERR_FORMAT, "%s: update graph: ", who);
        goto fail;
    }
    /* the loss checks on (y_true, y_pred), with one output; the outputs are checked per plan below */
    int n_out = u->n_outputs;
    if (n_out < 1 || n_out > STATE_MAX) {
        tnt__error(TNT_ERR_ARG, "%s: the update graph has %d outputs (1 to %d state variables)", who, n_out, STATE_MAX);
        tnt_opgraph_free(u);
        goto fail;
    }
    tnt_opgraph_free(u);
    /* t->update holds the graph; its plan code needs one output: keep them all by a wrapper */
    if (!(t->update = calloc(1, sizeof *t->update)) || !(t->update->json = tnt__strdup(update_json)) ||
        !(t->update->g = tnt_opgraph_from_json(update_json))) {
        tnt__error(TNT_ERR_NOMEM, "%s: out of memory", who);
        goto fail;
    }
    t->update->plan_n = -1;
    t->update->pred_in = 1;
    const tnt_opgraph *g = t->update->g;
    t->takes_weights = g->n_inputs == 3;
    if (g->n_inputs < 2 || g->n_inputs > 3 || g->n_weights != 0 || g->inputs[1].ndim != pred_shape.ndim + 1 ||
        (t->takes_weights && (g->inputs[2].ndim != 1 || g->inputs[2].dim[0] != TNT_DIM_NONE))) {
        tnt__error(TNT_ERR_ARG, "%s: the update graph takes 2 inputs (y_true, y_pred of the output's rank) or 3 (and "
                   "the sample weights, of shape (None,)) and no weights", who);
        goto fail;
    }
    t->update->y_shape = per_sample(g->inputs[0]);
    t->n_state = n_out;
    if (!(t->result = tnt_opgraph_from_json(result_json))) {
        tnt__error_prefix(TNT_ERR_FORMAT, "%s: result graph: ", who);
        goto fail;
    }
    if (t->result->n_inputs != n_out || t->result->n_outputs != 1 || t->result->n_weights != 0) {
        tnt__error(TNT_ERR_ARG, "%s: the result graph takes %d inputs (one per state variable) and gives 1 output, "
                   "this one %d and %d", who, n_out, t->result->n_inputs, t->result->n_outputs);
        goto fail;
    }
    for (int k = 0; k < n_out; k++) {
        t->numel[k] = tnt_shape_numel(t->result->inputs[k]);
        t->off[k] = t->size;
        t->size += t->numel[k];
    }
    if (!(t->result_plan = tnt__opplan_create(t->result, t->result->inputs, false))) {
        tnt__error_prefix(TNT_ERR_SHAPE, "%s: result graph: ", who);
        goto fail;
    }
    if (tnt_shape_numel(tnt__opplan_shape(t->result_plan, t->result->outputs[0])) != 1) {
        tnt__error(TNT_ERR_SHAPE, "%s: the result is not a scalar", who);
        goto fail;
    }
    return t;
fail:
    tnt__state_metric_free(t);
    return NULL;
}

int64_t tnt__state_metric_labels(const tnt__state_metric *t) { return tnt_shape_numel(t->update->y_shape); }
int64_t tnt__state_metric_size(const tnt__state_metric *t) { return t->size; }
bool tnt__state_metric_takes_weights(const tnt__state_metric *t) { return t->takes_weights; }

tnt_status tnt__state_metric_update(tnt__state_metric *t, int64_t n, const float *pred, const float *y, const float *sw,
                                    double *state) {
    if (n == 0) return TNT_OK;
    tnt__traced_loss *u = t->update;
    if (t->takes_weights && !sw) {
        if (t->ones_n < n) {
            float *o = realloc(t->ones, (size_t)n * sizeof *o);
            if (!o) return tnt__error(TNT_ERR_NOMEM, "metric update: out of memory");
            t->ones = o, t->ones_n = n;
            for (int64_t i = 0; i < n; i++) o[i] = 1.0f;
        }
        sw = t->ones;
    }
    if (!u->plan || u->plan_n != n) {
        drop_plan(u);
        tnt_shape in[3] = {tnt__shape_with_batch(n, u->y_shape), tnt__shape_with_batch(n, per_sample(u->g->inputs[1])),
                           {.ndim = 1, .dim = {n}}};
        if (!(u->plan = tnt__opplan_create(u->g, in, false))) return tnt__error_prefix(TNT_ERR_SHAPE, "metric update: ");
        size_t ws = tnt__opplan_workspace(u->plan);
        if (!(u->ws = tnt__alloc(ws ? ws : 64)) || !(u->out = tnt__alloc((size_t)(t->size ? t->size : 1) * sizeof(float)))) {
            drop_plan(u);
            return tnt__error(TNT_ERR_NOMEM, "metric update: out of memory");
        }
        char a[96];
        for (int k = 0; k < t->n_state; k++) {
            tnt_shape s = tnt__opplan_shape(u->plan, u->g->outputs[k]);
            if (tnt_shape_numel(s) != t->numel[k]) {
                drop_plan(u);
                return tnt__error(TNT_ERR_SHAPE, "metric update: state variable %d receives shape %s on a batch of %lld, "
                                  "expected %lld values", k, tnt_shape_str(s, a, sizeof a), (long long)n,
                                  (long long)t->numel[k]);
            }
        }
        u->plan_n = n;
    }
    const float *ins[3] = {y, pred, sw};
    float *outs[STATE_MAX];
    for (int k = 0; k < t->n_state; k++) outs[k] = u->out + t->off[k];
    tnt__opstep st = {.inputs = ins, .outputs = outs, .workspace = u->ws, .training = false};
    tnt_status s = tnt__opplan_forward(u->plan, &st);
    if (s != TNT_OK) return tnt__error_prefix(s, "metric update: ");
    for (int64_t i = 0; i < t->size; i++) state[i] += u->out[i];
    return TNT_OK;
}

double tnt__state_metric_result(tnt__state_metric *t, const double *state) {
    float *vals = malloc((size_t)(t->size ? t->size : 1) * sizeof *vals);
    size_t wsb = tnt__opplan_workspace(t->result_plan);
    void *ws = tnt__alloc(wsb ? wsb : 64);
    float out = NAN;
    if (vals && ws) {
        const float *ins[STATE_MAX];
        for (int64_t i = 0; i < t->size; i++) vals[i] = (float)state[i];
        for (int k = 0; k < t->n_state; k++) ins[k] = vals + t->off[k];
        float *outs[1] = {&out};
        tnt__opstep st = {.inputs = ins, .outputs = outs, .workspace = ws};
        if (tnt__opplan_forward(t->result_plan, &st) != TNT_OK) out = NAN;
    }
    free(vals);
    tnt__free(ws);
    return out;
}

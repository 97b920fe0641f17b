/* traced.c: a layer that runs an operation graph (ops/ops.h) with its own weights: the user's
 * Keras code (a custom Layer's call, a Lambda, symbolic arithmetic) traced once into operations.
 *
 * Behind the ordinary contract: the graph's weights are the layer's (views into the model's flat
 * buffers, so the optimizer, the allreduce and the weight files see them as any layer's), a plan
 * per batch size resolves the graph's shapes for (batch, input shape...), forward keeps the
 * graph's values in the layer workspace for backward, which writes the input gradients and the
 * weight gradients (overwriting). Random operations draw with the layer's seed, the step's seed
 * and the global sample index, so any split across ranks draws alike. Masks do not pass through.
 * Computation is float32 whatever the dtype policy.
 *
 * Keras config: the graph is the key "tnt_ops" (the JSON of tnt_opgraph_to_json), the weights'
 * constraints (add_weight's constraint=, projected after each optimizer update as a built-in
 * layer's kernel_constraint) the key "tnt_constraints": {weight name: Keras constraint}. A file whose
 * layer class this library does not know but whose config carries "tnt_ops" is read as a traced
 * layer of that class name (src/io/keras_json.c). */
#include "layers/keras_config.h"
#include "layers/layer.h"
#include "layers/regularizer.h"
#include "ops/ops.h"

#include <stdio.h>

typedef struct traced_priv {
    tnt__layer_ops ops; /* per layer: class_name is the user's */
    char class_name[TNT_NAME_MAX];
    tnt_opgraph *g;
    cJSON *user_config; /* the config's other keys (a custom layer's get_config), written back as read */
    int n_losses;       /* the graph's last outputs are losses the layer adds (config "tnt_losses") */
} traced_priv;

/* Output shapes for a batch of n, or an error. */
static tnt_status output_shapes(tnt_layer *l, int n_in, const tnt_shape *in, int64_t batch, tnt_shape *outs) {
    traced_priv *p = l->priv;
    tnt_shape full[TNT__MAX_OP_IN];
    for (int k = 0; k < n_in; k++) full[k] = tnt__shape_with_batch(batch, in[k]);
    tnt__opplan *plan = tnt__opplan_create(p->g, full, false);
    if (!plan) return tnt_last_error()[0] ? TNT_ERR_SHAPE : TNT_ERR_NOMEM;
    for (int k = 0; k < p->g->n_outputs; k++) outs[k] = tnt__opplan_shape(plan, p->g->outputs[k]);
    tnt__opplan_destroy(plan);
    return TNT_OK;
}

static tnt_status traced_build(tnt_layer *l, int n_in, const tnt_shape *in, tnt_shape *out) {
    traced_priv *p = l->priv;
    const tnt_opgraph *g = p->g;
    char a[96], b[96];
    if (n_in != g->n_inputs)
        return tnt__error(TNT_ERR_ARG, "called on %d input(s), its graph takes %d", n_in, g->n_inputs);
    for (int k = 0; k < n_in; k++) {
        bool fits = g->inputs[k].ndim == in[k].ndim + 1;
        for (int d = 0; fits && d < in[k].ndim; d++)
            fits = g->inputs[k].dim[d + 1] == TNT_DIM_NONE || g->inputs[k].dim[d + 1] == in[k].dim[d];
        if (!fits)
            return tnt__error(TNT_ERR_SHAPE, "input %d has shape %s, its graph expects %s (batch axis first)", k,
                              tnt_shape_str(in[k], a, sizeof a), tnt_shape_str(g->inputs[k], b, sizeof b));
    }
    /* the outputs must keep the batch axis: shapes at two batch sizes differ in axis 0 only */
    tnt_shape o2[TNT__MAX_OP_IN], o3[TNT__MAX_OP_IN];
    tnt_status s = output_shapes(l, n_in, in, 2, o2);
    if (s == TNT_OK) s = output_shapes(l, n_in, in, 3, o3);
    if (s != TNT_OK) return s;
    for (int k = l->n_outputs; k < g->n_outputs; k++)
        if (tnt_shape_numel(o2[k]) != 1 || tnt_shape_numel(o3[k]) != 1)
            return tnt__error(TNT_ERR_SHAPE, "graph output %d, an added loss, has shape %s: expected a scalar", k,
                              tnt_shape_str(o2[k], a, sizeof a));
    for (int k = 0; k < l->n_outputs; k++) {
        bool ok = o2[k].ndim >= 1 && o2[k].dim[0] == 2 && o3[k].dim[0] == 3;
        for (int d = 1; ok && d < o2[k].ndim; d++) ok = o2[k].dim[d] == o3[k].dim[d];
        if (!ok)
            return tnt__error(TNT_ERR_SHAPE, "graph output %d has shape %s for a batch of 2 and %s for 3 (an output "
                              "must keep the batch axis first)", k, tnt_shape_str(o2[k], a, sizeof a),
                              tnt_shape_str(o3[k], b, sizeof b));
        tnt_shape no_batch = {.ndim = o2[k].ndim - 1};
        for (int d = 1; d < o2[k].ndim; d++) no_batch.dim[d - 1] = o2[k].dim[d];
        l->out_shapes[k] = no_batch;
    }
    *out = l->out_shapes[0];
    /* the graph's weights are the layer's, with Keras's fans (add_weight's _compute_fans) */
    l->n_weights = 0;
    tnt__kj_ctx k = {l->name, l->ops->class_name};
    for (int i = 0; i < g->n_weights; i++) {
        const tnt__opweight *w = &g->weights[i];
        cJSON *c = cJSON_CreateObject();
        cJSON_AddStringToObject(c, "initializer", w->initializer);
        tnt_initializer init;
        s = tnt__kj_init(c, "initializer", TNT_INIT_GLOROT_UNIFORM, &init, &k);
        cJSON_Delete(c);
        if (s != TNT_OK) return s;
        const int r = w->shape.ndim;
        int64_t fan_in = 1, fan_out = 1, rf = 1;
        if (r == 1) fan_in = fan_out = w->shape.dim[0];
        for (int d = 0; d < r - 2; d++) rf *= w->shape.dim[d];
        if (r >= 2) fan_in = w->shape.dim[r - 2] * rf, fan_out = w->shape.dim[r - 1] * rf;
        int at = tnt__layer_add_weight(l, w->name, w->shape, init, fan_in, fan_out);
        if (at < 0) return tnt_last_error()[0] ? TNT_ERR_ARG : TNT_ERR_NOMEM;
        l->weights[at].trainable = w->trainable;
    }
    return TNT_OK;
}

static void *traced_plan_create(tnt_layer *l, int64_t batch) {
    traced_priv *p = l->priv;
    tnt_shape full[TNT__MAX_OP_IN];
    for (int k = 0; k < l->n_inputs; k++) full[k] = tnt__shape_with_batch(batch, l->in_shapes[k]);
    tnt__opplan *plan = tnt__opplan_create(p->g, full, true);
    if (!plan) tnt__error_prefix(TNT_ERR_SHAPE, "layer \"%s\" (%s): ", l->name, l->ops->class_name);
    return plan;
}

static void traced_plan_destroy(void *plan) { tnt__opplan_destroy(plan); }

/* The workspace: the step's seed and training flag (backward recomputes dropout masks from
 * them) and the added losses (floats from LOSS_AT), then the graph's values. */
#define STEP_BYTES 64
#define LOSS_AT 16
#define MAX_LOSSES ((STEP_BYTES - LOSS_AT) / (int)sizeof(float))

static size_t traced_workspace(tnt_layer *l, void *plan, int64_t batch) {
    (void)l, (void)batch;
    return STEP_BYTES + tnt__opplan_workspace(plan);
}

static tnt__opstep step_of(tnt_layer *l, const float *const *xs, float *const *ys, void *ws, bool training,
                           uint64_t seed, int64_t offset, float **weights) {
    for (int i = 0; i < l->n_weights; i++) weights[i] = l->weights[i].value;
    return (tnt__opstep){.inputs = xs, .weights = weights, .outputs = ys, .workspace = (char *)ws + STEP_BYTES,
                         .training = training,
                         .seed = tnt__hash64(l->seed ^ seed), .sample_offset = offset};
}

static tnt_status traced_forward(tnt_layer *l, void *plan, const tnt__fwd_args *a) {
    const traced_priv *p = l->priv;
    float *weights[TNT_MAX_LAYER_WEIGHTS], *outs[TNT__MAX_OP_IN];
    for (int k = 0; k < l->n_outputs; k++) outs[k] = a->ys[k];
    for (int j = 0; j < p->n_losses; j++) outs[l->n_outputs + j] = (float *)((char *)a->workspace + LOSS_AT) + j;
    tnt__opstep st = step_of(l, a->xs, outs, a->workspace, a->training, a->seed, a->sample_offset, weights);
    uint64_t *step = a->workspace;
    step[0] = st.seed, step[1] = a->training;
    tnt_status s = tnt__opplan_forward(plan, &st);
    if (s != TNT_OK) return tnt__error_prefix(s, "layer \"%s\" (%s): ", l->name, l->ops->class_name);
    if (a->preact && a->preact != a->y)
        memcpy(a->preact, a->y, (size_t)(a->batch * tnt_shape_numel(l->out_shape)) * sizeof(float));
    return TNT_OK;
}

static tnt_status traced_backward(tnt_layer *l, void *plan, const tnt__bwd_args *a) {
    float *weights[TNT_MAX_LAYER_WEIGHTS], *grads[TNT_MAX_LAYER_WEIGHTS];
    for (int i = 0; i < l->n_weights; i++) grads[i] = l->weights[i].trainable ? l->weights[i].grad : NULL;
    const uint64_t *step = a->workspace;
    tnt__opstep st = step_of(l, a->xs, (float *const *)a->ys, a->workspace, step[1] != 0, 0, a->sample_offset, weights);
    st.seed = step[0]; /* the forward's */
    const traced_priv *p = l->priv;
    const float *douts[TNT__MAX_OP_IN];
    float scale = (float)a->added_loss_scale;
    float *outs[TNT__MAX_OP_IN];
    for (int k = 0; k < l->n_outputs; k++) douts[k] = a->dys[k], outs[k] = (float *)a->ys[k];
    for (int j = 0; j < p->n_losses; j++) {
        douts[l->n_outputs + j] = &scale;
        outs[l->n_outputs + j] = (float *)((char *)a->workspace + LOSS_AT) + j;
    }
    st.outputs = outs;
    tnt_status s = tnt__opplan_backward(plan, &st, douts, a->dxs, grads);
    if (s != TNT_OK) return tnt__error_prefix(s, "layer \"%s\" (%s): ", l->name, l->ops->class_name);
    return TNT_OK;
}

static double traced_added_loss(const tnt_layer *l, const void *workspace) {
    const traced_priv *p = l->priv;
    double sum = 0;
    for (int j = 0; j < p->n_losses; j++) sum += ((const float *)((const char *)workspace + LOSS_AT))[j];
    return sum;
}

static void traced_destroy(tnt_layer *l) {
    traced_priv *p = l->priv;
    if (!p) return;
    tnt_opgraph_free(p->g);
    cJSON_Delete(p->user_config);
    free(p);
    l->priv = NULL;
}

static tnt_status traced_get_config(const tnt_layer *l, cJSON *c) {
    const traced_priv *p = l->priv;
    char *txt = tnt_opgraph_to_json(p->g);
    if (!txt) return TNT_ERR_NOMEM;
    cJSON *graph = cJSON_Parse(txt);
    free(txt);
    if (!graph) return tnt__error(TNT_ERR_NOMEM, "layer \"%s\": out of memory", l->name);
    TNT_KJ(cJSON_AddItemToObject(c, "tnt_ops", graph));
    cJSON *cons = NULL;
    for (int i = 0; l->rules && i < l->rules->n; i++) {
        const tnt__rule *r = &l->rules->r[i];
        if (!r->weight[0]) continue;
        if (!cons) TNT_KJ(cons = cJSON_AddObjectToObject(c, "tnt_constraints"));
        cJSON *o = tnt__rule_json(r);
        TNT_KJ(o);
        TNT_KJ(cJSON_AddItemToObject(cons, r->weight, o));
    }
    const cJSON *e;
    cJSON_ArrayForEach(e, p->user_config) {
        if (e->string && !cJSON_GetObjectItemCaseSensitive(c, e->string))
            TNT_KJ(cJSON_AddItemToObject(c, e->string, cJSON_Duplicate(e, true)));
    }
    return TNT_OK;
}

/* "tnt_constraints": {weight name: constraint}, each a rule on that weight of the graph. */
static tnt_status read_constraints(tnt_layer *l, const tnt_opgraph *g, const cJSON *c, const tnt__kj_ctx *k) {
    const cJSON *cons = tnt__kj_item(c, "tnt_constraints"), *e;
    if (tnt__kj_absent(cons)) return TNT_OK;
    if (!cJSON_IsObject(cons))
        return tnt__kj_error(k, TNT_ERR_FORMAT, "tnt_constraints: expected {weight name: constraint}");
    cJSON_ArrayForEach(e, cons) {
        if (tnt__kj_absent(e)) continue;
        int w = 0;
        while (w < g->n_weights && strcmp(g->weights[w].name, e->string)) w++;
        if (w == g->n_weights)
            return tnt__kj_error(k, TNT_ERR_FORMAT, "tnt_constraints: \"%.64s\" is not a weight of the graph",
                                 e->string);
        tnt__rule r = {.is_constraint = true};
        snprintf(r.weight, sizeof r.weight, "%s", e->string);
        snprintf(r.key, sizeof r.key, "%.*s_constraint", TNT_NAME_MAX - 12, e->string);
        tnt_status s = tnt__kj_read_constraint(e, &r, k);
        if (s == TNT_OK) s = tnt__layer_set_rule(l, &r);
        if (s != TNT_OK) return s;
    }
    return TNT_OK;
}

static tnt_layer *traced_from_config(const cJSON *c, const tnt__kj_ctx *k) {
    const cJSON *v = tnt__kj_item(c, "tnt_ops");
    char *txt = cJSON_IsString(v) ? NULL : cJSON_IsObject(v) ? cJSON_PrintUnformatted(v) : NULL;
    if (!cJSON_IsString(v) && !txt) return tnt__kj_fail(k, TNT_ERR_FORMAT, "tnt_ops: missing, or not a graph object");
    tnt_opgraph *g = tnt_opgraph_from_json(txt ? txt : v->valuestring);
    free(txt);
    if (!g) return tnt__kj_fail(k, TNT_ERR_FORMAT, "tnt_ops: %s", tnt_last_error());
    int64_t n_losses = 0;
    const cJSON *nl = tnt__kj_item(c, "tnt_losses");
    if (nl && (!cJSON_IsNumber(nl) || nl->valuedouble != (double)(int64_t)nl->valuedouble || nl->valuedouble < 0 ||
               nl->valuedouble >= g->n_outputs || nl->valuedouble > MAX_LOSSES)) {
        int n_out = g->n_outputs;
        tnt_opgraph_free(g);
        return tnt__kj_fail(k, TNT_ERR_FORMAT, "tnt_losses: expected the number of the graph's last outputs that are "
                            "added losses (0 to %d, fewer than its %d outputs)", (int)MAX_LOSSES, n_out);
    }
    if (nl) n_losses = (int64_t)nl->valuedouble;
    tnt_layer *l = tnt_traced_layer(g, k->cls, k->name);
    if (l) { /* keep the user's own keys (units, ...) so that Keras's from_config finds them */
        traced_priv *p = l->priv;
        p->n_losses = (int)n_losses;
        l->n_outputs -= p->n_losses;
        if (p->n_losses) p->ops.added_loss = traced_added_loss;
        p->user_config = cJSON_Duplicate(c, true);
        for (const char **key = (const char *[]){"tnt_ops", "tnt_constraints", "batch_input_shape", "batch_shape", NULL};
             *key; key++)
            if (p->user_config) cJSON_DeleteItemFromObjectCaseSensitive(p->user_config, *key);
        if (read_constraints(l, p->g, c, k) != TNT_OK) {
            tnt_layer_free(l);
            return NULL;
        }
    }
    return l;
}

const tnt__layer_ops tnt__traced_ops = {
    .class_name = "TracedLayer",
    .build_multi = traced_build,
    .plan_create = traced_plan_create,
    .plan_destroy = traced_plan_destroy,
    .workspace_size = traced_workspace,
    .forward = traced_forward,
    .backward = traced_backward,
    .destroy = traced_destroy,
    .get_config = traced_get_config,
    .from_config = traced_from_config,
    .gpu = &tnt__host_bridge_gpu_ops, /* its graph runs on the host, the model around it on the device */
};

tnt_layer *tnt_traced_layer(tnt_opgraph *g, const char *class_name, const char *name) {
    if (!g) {
        tnt__error(TNT_ERR_ARG, "tnt_traced_layer: graph is NULL");
        return NULL;
    }
    const char *cls = class_name && class_name[0] ? class_name : "TracedLayer";
    const char *why = g->n_inputs < 1 || g->n_inputs > TNT_MAX_LAYER_INPUTS ? "inputs"
                      : g->n_outputs < 1 || g->n_outputs > TNT_MAX_LAYER_OUTPUTS ? "outputs"
                      : g->n_weights > TNT_MAX_LAYER_WEIGHTS ? "weights"
                      : strlen(cls) >= TNT_NAME_MAX ? "characters in the class name" : NULL;
    if (why) {
        tnt__error(TNT_ERR_ARG, "tnt_traced_layer %s: the graph has %d inputs, %d outputs and %d weights (a layer "
                   "takes 1..%d inputs, 1..%d outputs, at most %d weights; class names under %d characters): too "
                   "many or too few %s", cls, g->n_inputs, g->n_outputs, g->n_weights, TNT_MAX_LAYER_INPUTS,
                   TNT_MAX_LAYER_OUTPUTS, TNT_MAX_LAYER_WEIGHTS, TNT_NAME_MAX, why);
        tnt_opgraph_free(g);
        return NULL;
    }
    traced_priv *p = tnt__calloc(1, sizeof *p);
    if (!p) {
        tnt_opgraph_free(g);
        return NULL;
    }
    snprintf(p->class_name, sizeof p->class_name, "%s", cls);
    p->g = g;
    p->ops = tnt__traced_ops;
    p->ops.class_name = p->class_name;
    tnt_layer *l = tnt__layer_new(&p->ops, name, p);
    if (!l) {
        traced_destroy(&(tnt_layer){.priv = p});
        return NULL;
    }
    l->n_outputs = g->n_outputs;
    return l;
}

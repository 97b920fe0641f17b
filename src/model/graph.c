/* graph.c: Keras's functional API. A graph records inputs and layer calls as nodes over symbolic
 * tensors (it reuses the model's node storage); tnt_functional cuts a model out of it between
 * given inputs and outputs. Sequence masks (Embedding mask_zero) are tensors of the graph too:
 * a hidden node computes ids != 0, and the mask follows the layers that support masking. */
#include "model/model.h"

#include "gpu/gpu.h"

#include <pthread.h>
#include <stdio.h>

struct tnt_graph {
    tnt_model *m;  /* nodes, tensors and the layers the graph owns */
    int *mask;     /* [tensor]: the tensor holding its sequence mask, or -1 */
    bool *is_mask; /* [tensor]: made by a hidden mask node */
    int cap;
};

/* ---- the hidden mask layers ------------------------------------------------------------- */

/* The mask a layer makes from its input: Embedding(mask_zero) 1 where the id is not 0; Masking 1
 * at the steps (vectors along the last axis) with a value other than mask_value. */
typedef struct make_mask_cfg {
    float mask_value;
    bool per_step; /* Masking: one mask value per vector along the last axis */
} make_mask_cfg;

static tnt_status make_mask_build(tnt_layer *l, tnt_shape in, tnt_shape *out) {
    const make_mask_cfg *c = l->priv;
    *out = in;
    if (c->per_step) out->ndim--;
    return TNT_OK;
}

static tnt_status make_mask_forward(tnt_layer *l, void *plan, const tnt__fwd_args *a) {
    (void)plan;
    const make_mask_cfg *c = l->priv;
    int64_t group = c->per_step ? l->in_shape.dim[l->in_shape.ndim - 1] : 1;
    int64_t n = a->batch * tnt_shape_numel(l->out_shape);
    for (int64_t i = 0; i < n; i++)
        a->y[i] = tnt__masking_step_kept(a->x + i * group, group, c->mask_value) ? 1.0f : 0.0f;
    return TNT_OK;
}

/* Masks carry no gradient: every input's is zeros. */
static tnt_status mask_backward(tnt_layer *l, void *plan, const tnt__bwd_args *a) {
    (void)plan;
    for (int k = 0; k < a->n_inputs; k++) {
        float *dx = a->dxs ? a->dxs[k] : k == 0 ? a->dx : NULL;
        if (dx) memset(dx, 0, (size_t)(a->batch * tnt_shape_numel(l->in_shapes[k])) * sizeof(float));
    }
    return TNT_OK;
}

static void make_mask_destroy(tnt_layer *l) { free(l->priv); }

/* On the device: the same masks (gpu/kernels/rnn.cu tnt_k_make_mask), zeros for the gradients. */
static tnt_status make_mask_gpu_forward(tnt_layer *l, void *plan, const tnt__fwd_args *a) {
    (void)plan;
    const make_mask_cfg *c = l->priv;
    long long group = c->per_step ? l->in_shape.dim[l->in_shape.ndim - 1] : 1;
    long long n = a->batch * tnt_shape_numel(l->out_shape);
    float value = c->mask_value, *y = a->y;
    void *args[] = {(void *)&a->x, &y, &n, &group, &value};
    return tnt__gpu_launch("tnt_k_make_mask", tnt__gpu_grid_for(n, 256), 256, 0, args);
}

static tnt_status mask_gpu_backward(tnt_layer *l, void *plan, const tnt__bwd_args *a) {
    (void)plan;
    tnt_status s = TNT_OK;
    for (int k = 0; k < a->n_inputs && s == TNT_OK; k++) {
        float *dx = a->dxs ? a->dxs[k] : k == 0 ? a->dx : NULL;
        if (dx)
            s = tnt__gpu_memset_zero(dx, (size_t)(a->batch * tnt_shape_numel(l->in_shapes[k])) * sizeof(float),
                                     TNT__GPU_COMPUTE);
    }
    return s;
}

static const tnt__gpu_ops make_mask_gpu_ops = {.forward = make_mask_gpu_forward, .backward = mask_gpu_backward};

static const tnt__layer_ops make_mask_ops = {
    .class_name = "NotEqual",
    .build = make_mask_build,
    .forward = make_mask_forward,
    .backward = mask_backward,
    .destroy = make_mask_destroy,
    .gpu = &make_mask_gpu_ops,
};

/* Keras merge layers (Add, Concatenate, ...): the output is masked where any input is (an input
 * without a mask counts as unmasked). */
static tnt_status mask_and_build(tnt_layer *l, int n, const tnt_shape *in, tnt_shape *out) {
    char a[96], b[96];
    for (int k = 1; k < n; k++)
        if (!tnt__shape_equal(in[k], in[0]))
            return tnt__error(TNT_ERR_SHAPE, "the sequence masks of the inputs of a merge have shapes %s and %s "
                              "(expected the same steps)", tnt_shape_str(in[0], a, sizeof a),
                              tnt_shape_str(in[k], b, sizeof b));
    (void)l;
    *out = in[0];
    return TNT_OK;
}

static tnt_status mask_and_forward(tnt_layer *l, void *plan, const tnt__fwd_args *a) {
    (void)plan;
    int64_t n = a->batch * tnt_shape_numel(l->out_shape);
    memcpy(a->y, a->xs[0], (size_t)n * sizeof(float));
    for (int k = 1; k < a->n_inputs; k++)
        for (int64_t i = 0; i < n; i++) a->y[i] *= a->xs[k][i];
    return TNT_OK;
}

/* y = mask 0, then y = y mask k for each next one (the CPU's order) */
static tnt_status mask_and_gpu_forward(tnt_layer *l, void *plan, const tnt__fwd_args *a) {
    (void)plan;
    long long n = a->batch * tnt_shape_numel(l->out_shape);
    tnt_status s = tnt__gpu_copy_on_device(a->y, a->xs[0], (size_t)n * sizeof(float), TNT__GPU_COMPUTE);
    float *y = a->y;
    for (int k = 1; k < a->n_inputs && s == TNT_OK; k++) {
        void *args[] = {&y, (void *)&a->xs[k], &y, &n};
        s = tnt__gpu_launch("tnt_k_mul", tnt__gpu_grid_for(n, 256), 256, 0, args);
    }
    return s;
}

static const tnt__gpu_ops mask_and_gpu_ops = {.forward = mask_and_gpu_forward, .backward = mask_gpu_backward};

static const tnt__layer_ops mask_and_ops = {
    .class_name = "LogicalAnd",
    .build_multi = mask_and_build,
    .forward = mask_and_forward,
    .backward = mask_backward,
    .gpu = &mask_and_gpu_ops,
};

/* ---- names ------------------------------------------------------------------------------- */

/* Keras's process-wide counters per class: "dense", "dense_1", ... so that layers of different
 * graphs (a model used inside another) never share a name. Input layers count from 1. */
static pthread_mutex_t names_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    char base[TNT_NAME_MAX];
    int next;
} names[512];
static int n_names;

static void auto_name(tnt_layer *l) {
    char base[TNT_NAME_MAX];
    bool input = tnt__is_input_layer(l);
    if (input) snprintf(base, sizeof base, "input");
    else tnt__layer_base_name(l->ops->class_name, base, sizeof base);
    pthread_mutex_lock(&names_lock);
    int i = 0;
    while (i < n_names && strcmp(names[i].base, base)) i++;
    if (i == n_names && n_names < 512) {
        snprintf(names[i].base, sizeof names[i].base, "%s", base);
        names[i].next = input ? 1 : 0;
        n_names++;
    }
    int k = i < 512 ? names[i].next++ : (int)(tnt__hash64((uint64_t)(uintptr_t)l) % 1000000);
    pthread_mutex_unlock(&names_lock);
    if (k == 0) snprintf(l->name, sizeof l->name, "%.*s", TNT_NAME_MAX - 1, base);
    else snprintf(l->name, sizeof l->name, "%.*s_%d", TNT_NAME_MAX - 12, base, k);
    l->auto_name = false;
}

/* ---- graph ------------------------------------------------------------------------------- */

tnt_graph *tnt_graph_new(void) {
    tnt_graph *g = tnt__calloc(1, sizeof *g);
    if (!g) return NULL;
    g->m = tnt__functional_new("graph");
    if (!g->m) {
        free(g);
        return NULL;
    }
    return g;
}

void tnt_graph_free(tnt_graph *g) {
    if (!g) return;
    tnt_model_free(g->m);
    free(g->mask);
    free(g->is_mask);
    free(g);
}

static const tnt_ktensor bad = {-1};

/* Keeps the per-tensor mask arrays as long as the tensor arrays. */
static bool track(tnt_graph *g, int t, int mask, bool is_mask) {
    if (t >= g->cap) {
        int cap = g->cap ? 2 * g->cap : 64;
        while (cap <= t) cap *= 2;
        int *nm = realloc(g->mask, (size_t)cap * sizeof *nm);
        if (nm) g->mask = nm;
        bool *ni = realloc(g->is_mask, (size_t)cap * sizeof *ni);
        if (ni) g->is_mask = ni;
        if (!nm || !ni) return false;
        g->cap = cap;
    }
    g->mask[t] = mask;
    g->is_mask[t] = is_mask;
    return true;
}

static tnt_status check_tensor(const tnt_graph *g, tnt_ktensor t, const char *who, int k) {
    if (t.id < 0 || t.id >= g->m->n_tensors)
        return tnt__error_prefix(TNT_ERR_ARG, "%s: input %d is %s (id %d): ", who, k,
                                 t.id < 0 ? "the result of a failed call" : "not a tensor of this graph", t.id);
    if (g->is_mask[t.id]) return tnt__error(TNT_ERR_ARG, "%s: input %d is an internal mask tensor", who, k);
    return TNT_OK;
}

tnt_ktensor tnt_graph_input(tnt_graph *g, tnt_shape shape, const char *name) {
    if (!g) {
        tnt__error(TNT_ERR_ARG, "graph_input: graph is NULL");
        return bad;
    }
    tnt_layer *l = tnt_input_layer(shape, name);
    if (!l) return bad;
    if (l->auto_name) auto_name(l);
    int ext = tnt__model_add_tensor(g->m, tnt__probe_shape(shape)); /* None: a stand-in size */
    if (ext < 0 || !track(g, ext, -1, false) || tnt__model_own_layer(g->m, l, false) != TNT_OK) {
        tnt_layer_free(l);
        return bad;
    }
    int out = tnt__model_add_node(g->m, l, 1, &ext);
    if (out < 0 || !track(g, out, -1, false)) return bad;
    return (tnt_ktensor){out};
}

tnt_layer *tnt__graph_input_layer(tnt_graph *g, tnt_ktensor t) {
    for (int i = 0; g && i < g->m->n_nodes; i++)
        if (g->m->nodes[i].out == t.id && tnt__is_input_layer(g->m->nodes[i].layer)) return g->m->nodes[i].layer;
    return NULL;
}

static tnt_ktensor add_call(tnt_graph *g, tnt_layer *l, int n, const int *in_, bool hidden);

/* A hidden node of the graph (a mask computation) on the given tensors. */
static int add_hidden(tnt_graph *g, const tnt__layer_ops *ops, void *priv, int n, const int *in) {
    tnt_layer *ml = tnt__layer_new(ops, ops == &make_mask_ops ? "sequence_mask" : "merged_mask", priv);
    if (!ml) {
        free(priv);
        return -1;
    }
    if (tnt__model_own_layer(g->m, ml, true) != TNT_OK) {
        tnt_layer_free(ml);
        return -1;
    }
    ml->refs = 1;
    return add_call(g, ml, n, in, true).id;
}

/* The mask of a layer's output that merges several inputs: their masks, and'ed when they differ;
 * -1 for none, -2 on failure. */
static int merged_mask(tnt_graph *g, int n, const int *in) {
    int masks[TNT_MAX_LAYER_INPUTS], n_masks = 0;
    for (int k = 0; k < n; k++) {
        int mk = g->mask[in[k]];
        bool seen = mk < 0;
        for (int j = 0; j < n_masks && !seen; j++) seen = masks[j] == mk;
        if (!seen) masks[n_masks++] = mk;
    }
    if (n_masks <= 1) return n_masks ? masks[0] : -1;
    int mt = add_hidden(g, &mask_and_ops, NULL, n_masks, masks);
    return mt < 0 ? -2 : mt;
}

/* Adds the node and derives the output's mask. A layer that consumes the mask gets it as one
 * more input. */
static tnt_ktensor add_call(tnt_graph *g, tnt_layer *l, int n, const int *in_, bool hidden) {
    int in[TNT_MAX_LAYER_INPUTS + 1];
    memcpy(in, in_, (size_t)n * sizeof *in);
    int in_mask = g->mask[in[0]];
    if (l->ops->consumes_mask && in_mask >= 0) in[n++] = in_mask;
    if (l->ops->consumes_mask && !l->built) l->mask_input = in_mask >= 0;
    if (l->ops->consumes_mask && l->built && l->mask_input != (in_mask >= 0)) {
        tnt__error(TNT_ERR_ARG, "layer \"%s\" (%s): called %s a sequence mask, its first call %s (a shared layer needs "
                   "the same)", l->name, l->ops->class_name, in_mask >= 0 ? "with" : "without",
                   l->mask_input ? "with one" : "without");
        return bad;
    }
    int out = tnt__model_add_node(g->m, l, n, in);
    if (out < 0) return bad;
    for (int k = 0; k < l->n_outputs; k++) /* other outputs (states) carry no mask */
        if (!track(g, out + k, -1, hidden)) return bad;
    if (l->ops->consumes_mask) /* output 0, and the others of its shape (merge_mode None), not states */
        for (int k = 0; k < l->n_outputs; k++)
            g->mask[out + k] = l->ops->keeps_mask && l->ops->keeps_mask(l) &&
                                       tnt__shape_equal(g->m->tensor_shape[out + k], g->m->tensor_shape[out])
                                   ? in_mask : -1;
    else if (l->ops->supports_masking) {
        int mt = merged_mask(g, n, in); /* may grow g->mask */
        if (mt == -2) return bad;
        g->mask[out] = mt;
    }
    float mask_value = 0;
    bool per_step = tnt__masking_value(l, &mask_value);
    if (!hidden && (per_step || tnt__embedding_mask_zero(l))) {
        make_mask_cfg *c = tnt__calloc(1, sizeof *c);
        if (!c) return bad;
        *c = (make_mask_cfg){mask_value, per_step};
        int mt = add_hidden(g, &make_mask_ops, c, 1, in);
        if (mt < 0) return bad;
        g->mask[out] = mt;
    }
    return (tnt_ktensor){out};
}

/* The first call takes the layer into the graph (consumed even if the call fails). */
static tnt_status take_layer(tnt_graph *g, tnt_layer *l, const char *who) {
    for (int i = 0; i < g->m->n_layers; i++)
        if (g->m->layers[i] == l) return TNT_OK; /* a shared layer's next call */
    if (l->refs > 0)
        return tnt__error(TNT_ERR_ARG, "%s: layer \"%s\" belongs to a model or another graph (use tnt_call_model "
                          "to call a model's layers)", who, l->name);
    if (l->auto_name) auto_name(l);
    /* names are unique among the graph's own layers and nested models (not inside those) */
    bool taken = false;
    for (int i = 0; i < g->m->n_scopes; i++)
        taken |= g->m->scopes[i].parent < 0 && !strcmp(g->m->scopes[i].name, l->name);
    for (int i = 0; i < g->m->n_layers || taken; i++)
        if (taken || (!strcmp(g->m->layers[i]->name, l->name) && tnt__layer_scope(g->m, g->m->layers[i]) < 0)) {
            tnt__error(TNT_ERR_ARG, "%s: a layer named \"%s\" already exists in the graph (names must be unique)",
                       who, l->name);
            tnt_layer_free(l);
            return TNT_ERR_ARG;
        }
    if (tnt__model_own_layer(g->m, l, false) != TNT_OK) {
        tnt_layer_free(l);
        return TNT_ERR_NOMEM;
    }
    l->refs = 1;
    return TNT_OK;
}

tnt_ktensor tnt_call_n(tnt_graph *g, tnt_layer *layer, int n, const tnt_ktensor *inputs) {
    const char *who = "call";
    if (!layer) {
        tnt__error_prefix(TNT_ERR_ARG, "%s: layer is NULL (its constructor failed?): ", who);
        return bad;
    }
    if (!g || !inputs || n < 1 || n > TNT_MAX_LAYER_INPUTS) {
        tnt__error(TNT_ERR_ARG, "%s: layer \"%s\": %s", who, layer->name,
                   !g ? "graph is NULL" : !inputs ? "inputs are NULL" : "number of inputs out of 1..16");
        if (layer->refs == 0) tnt_layer_free(layer);
        return bad;
    }
    if (take_layer(g, layer, who) != TNT_OK) return bad;
    int in[TNT_MAX_LAYER_INPUTS];
    for (int k = 0; k < n; k++) {
        if (check_tensor(g, inputs[k], who, k) != TNT_OK) return bad;
        in[k] = inputs[k].id;
    }
    return add_call(g, layer, n, in, false);
}

int tnt_call_outputs(tnt_graph *g, tnt_layer *layer, int n_inputs, const tnt_ktensor *inputs, int cap,
                     tnt_ktensor *outputs) {
    if (!outputs || cap < 1) {
        tnt__error(TNT_ERR_ARG, "call_outputs: outputs is NULL or cap %d < 1", cap);
        if (layer && layer->refs == 0) tnt_layer_free(layer);
        return -1;
    }
    tnt_ktensor y = tnt_call_n(g, layer, n_inputs, inputs);
    if (y.id < 0) return -1;
    int n = layer->n_outputs;
    for (int k = 0; k < n && k < cap; k++) outputs[k] = (tnt_ktensor){y.id + k};
    return n;
}

tnt_ktensor tnt_call(tnt_graph *g, tnt_layer *layer, tnt_ktensor x) { return tnt_call_n(g, layer, 1, &x); }

tnt_ktensor tnt_call2(tnt_graph *g, tnt_layer *layer, tnt_ktensor a, tnt_ktensor b) {
    return tnt_call_n(g, layer, 2, (tnt_ktensor[]){a, b});
}

tnt_ktensor tnt_call_attention(tnt_graph *g, tnt_layer *layer, tnt_ktensor query, tnt_ktensor value,
                               tnt_ktensor key, tnt_ktensor attention_mask, bool use_causal_mask) {
    const char *who = "call_attention";
    if (!layer || !g) {
        tnt__error(TNT_ERR_ARG, "%s: %s is NULL", who, layer ? "graph" : "layer");
        if (layer && layer->refs == 0) tnt_layer_free(layer);
        return bad;
    }
    if (take_layer(g, layer, who) != TNT_OK) return bad;
    tnt_ktensor parts[3] = {query, value, key.id < 0 ? value : key};
    int in[TNT_MAX_LAYER_INPUTS], n = 0;
    for (int k = 0; k < 3; k++) {
        if (check_tensor(g, parts[k], who, k) != TNT_OK) return bad;
        in[n++] = parts[k].id;
    }
    bool has_attention = attention_mask.id >= 0;
    if (has_attention) {
        if (check_tensor(g, attention_mask, who, 3) != TNT_OK) return bad;
        in[n++] = attention_mask.id;
    }
    /* Keras: the query's mask, and the key's (or else the value's) mask */
    int qmask = g->mask[query.id];
    int vmask = key.id >= 0 && g->mask[key.id] >= 0 ? g->mask[key.id] : g->mask[value.id];
    if (qmask >= 0) in[n++] = qmask;
    if (vmask >= 0) in[n++] = vmask;
    if (!layer->built &&
        tnt__attention_configure(layer, has_attention, qmask >= 0, vmask >= 0, use_causal_mask) != TNT_OK)
        return bad;
    tnt_ktensor out = add_call(g, layer, n, in, false);
    if (out.id >= 0) g->mask[out.id] = qmask; /* Keras: the output keeps the query's mask */
    return out;
}

static bool is_hidden(const tnt_model *m, const tnt_layer *l) {
    for (int i = 0; i < m->n_hidden; i++)
        if (m->hidden[i] == l) return true;
    return false;
}

/* The scope of the graph for a call of inner: the one of an earlier call of it, or a new one
 * followed by copies of inner's own scopes (in their order: scope + 1 + k for inner's k). */
static tnt_status call_scope(tnt_graph *g, const tnt_model *inner, int *scope) {
    tnt_model *gm = g->m;
    for (int i = 0; i < gm->n_scopes; i++)
        if (gm->scopes[i].key == inner && gm->scopes[i].parent < 0) {
            *scope = i;
            return TNT_OK;
        }
    for (int i = 0; i < gm->n_layers; i++)
        if (!strcmp(gm->layers[i]->name, inner->name) && tnt__layer_scope(gm, gm->layers[i]) < 0)
            return tnt__error(TNT_ERR_ARG, "call_model: the graph has a layer named \"%s\" already (the nested model's "
                              "name must be unique among its layers and nested models)", inner->name);
    tnt__scope sc = {.sequential = !tnt__model_keras_functional(inner), .parent = -1, .key = inner,
                     .n_in = inner->n_inputs, .n_out = inner->n_outputs, .model = (tnt_model *)inner};
    snprintf(sc.name, sizeof sc.name, "%s", inner->name);
    tnt_status s = tnt__scope_push(gm, &sc, scope);
    for (int k = 0; k < inner->n_scopes && s == TNT_OK; k++) {
        tnt__scope c = inner->scopes[k];
        int idx;
        c.parent = c.parent < 0 ? *scope : *scope + 1 + c.parent;
        c.n_calls = 0; /* the inner model's calls of it live in its config */
        c.key = NULL;
        s = tnt__scope_push(gm, &c, &idx);
    }
    return s;
}

tnt_status tnt_call_model(tnt_graph *g, tnt_model *inner, int n_inputs, const tnt_ktensor *inputs,
                          tnt_ktensor *outputs) {
    const char *who = "call_model";
    if (!g || !inner || !inputs || !outputs) return tnt__error(TNT_ERR_ARG, "%s: NULL argument", who);
    if (!inner->has_input_shape)
        return tnt__error(TNT_ERR_STATE, "%s: model \"%s\" has no input shape yet", who, inner->name);
    if (n_inputs != inner->n_inputs)
        return tnt__error(TNT_ERR_ARG, "%s: model \"%s\" has %d inputs, called on %d", who, inner->name,
                          inner->n_inputs, n_inputs);
    int *map = tnt__calloc((size_t)inner->n_tensors, sizeof *map);
    if (!map) return TNT_ERR_NOMEM;
    int scope = -1;
    tnt_status s = call_scope(g, inner, &scope);
    for (int t = 0; t < inner->n_tensors; t++) map[t] = -1;
    /* called on shapes other than its own: a model with None dimensions takes them; any other runs
     * its layers on them, as Keras does after its warning (its weights must keep their shapes).
     * The inner model gets its own shapes back after; each model rebuilds shared layers when
     * it runs (tnt__model_sync_layers). */
    tnt_shape own, got[TNT_MAX_IO];
    bool differ = false;
    for (int k = 0; k < n_inputs && s == TNT_OK; k++) {
        if ((s = check_tensor(g, inputs[k], who, k)) != TNT_OK) break;
        own = inner->tensor_shape[inner->inputs[k]], got[k] = g->m->tensor_shape[inputs[k].id];
        if (!tnt__shape_equal(own, got[k])) {
            differ = true;
            tnt_shape decl = inner->input_decl[k];
            bool fits = decl.ndim == got[k].ndim;
            for (int i = 0; fits && i < decl.ndim; i++) fits = decl.dim[i] < 0 || decl.dim[i] == got[k].dim[i];
            char a[96], b[96];
            if (!fits)
                tnt_log(TNT_LOG_WARNING, "Model was constructed with shape %s for input %d of model \"%s\", but it was "
                        "called on an input with incompatible shape %s.", tnt_shape_str(decl, a, sizeof a), k,
                        inner->name, tnt_shape_str(got[k], b, sizeof b));
        }
        map[inner->inputs[k]] = inputs[k].id;
    }
    tnt_shape *own_tensors = NULL; /* the inner model's tensor shapes, given back after */
    if (s == TNT_OK && differ) {
        char w[TNT_NAME_MAX + 48];
        snprintf(w, sizeof w, "%s: model \"%s\": ", who, inner->name);
        own_tensors = tnt__calloc((size_t)inner->n_tensors, sizeof *own_tensors);
        if (!own_tensors) s = TNT_ERR_NOMEM;
        else memcpy(own_tensors, inner->tensor_shape, (size_t)inner->n_tensors * sizeof *own_tensors);
        if (s == TNT_OK) s = tnt__model_rebuild_for(inner, got, w);
    }
    /* the inner nodes join the graph with the same layers; input layers are skipped */
    for (int i = 0; i < inner->n_nodes && s == TNT_OK; i++) {
        const tnt__node *n = &inner->nodes[i];
        if (tnt__is_input_layer(n->layer)) {
            map[n->out] = map[n->in[0]];
            continue;
        }
        bool hidden = is_hidden(inner, n->layer);
        if ((s = tnt__model_own_layer(g->m, n->layer, hidden)) != TNT_OK) break;
        int in[TNT_MAX_LAYER_INPUTS];
        for (int k = 0; k < n->n_in; k++) in[k] = map[n->in[k]];
        int out = tnt__model_add_node(g->m, n->layer, n->n_in, in);
        bool tracked = out >= 0;
        for (int k = 0; k < tnt__node_n_out(n) && tracked; k++) tracked = track(g, out + k, -1, hidden);
        if (!tracked) {
            s = out < 0 ? tnt__error_prefix(TNT_ERR_SHAPE, "%s: model \"%s\": ", who, inner->name) : TNT_ERR_NOMEM;
            break;
        }
        /* the inner model's own nodes belong to its scope, its nested models' to theirs */
        g->m->nodes[g->m->n_nodes - 1].scope = 1 + (n->scope ? scope + n->scope : scope);
        if (n->layer->ops->supports_masking) g->mask[out] = g->mask[in[0]];
        for (int k = 0; k < tnt__node_n_out(n) && n->layer->ops->consumes_mask; k++)
            g->mask[out + k] = n->layer->mask_input && n->layer->ops->keeps_mask && n->layer->ops->keeps_mask(n->layer) &&
                                       tnt__shape_equal(g->m->tensor_shape[out + k], g->m->tensor_shape[out])
                                   ? in[n->n_in - 1] : -1;
        for (int k = 0; k < tnt__node_n_out(n); k++) map[n->out + k] = out + k;
    }
    for (int k = 0; k < inner->n_outputs; k++) outputs[k] = (tnt_ktensor){s == TNT_OK ? map[inner->outputs[k]] : -1};
    /* the inner model's shapes are its own again; its layers stay built for this call's until it
     * runs on its own (tnt__model_sync_layers) */
    if (own_tensors) memcpy(inner->tensor_shape, own_tensors, (size_t)inner->n_tensors * sizeof *own_tensors);
    free(own_tensors);
    if (s == TNT_OK) {
        int in[TNT_MAX_IO], out[TNT_MAX_IO];
        for (int k = 0; k < n_inputs; k++) in[k] = inputs[k].id;
        for (int k = 0; k < inner->n_outputs; k++) out[k] = outputs[k].id;
        s = tnt__scope_add_call(g->m, scope, in, out);
    }
    free(map);
    return s;
}

tnt_shape tnt_ktensor_shape(const tnt_graph *g, tnt_ktensor t) {
    if (!g || t.id < 0 || t.id >= g->m->n_tensors) return (tnt_shape){0};
    return g->m->tensor_shape[t.id];
}

/* ---- cutting a model out of the graph ---------------------------------------------------- */

/* Another layer of m (not l) of the same scope has l's name. */
static bool name_taken(const tnt_model *m, const tnt_layer *l, int scope) {
    for (int i = 0; i < m->n_layers; i++)
        if (m->layers[i] != l && !strcmp(m->layers[i]->name, l->name) && tnt__layer_scope(m, m->layers[i]) == scope)
            return true;
    return false;
}

tnt_model *tnt_functional(tnt_graph *g, int n_inputs, const tnt_ktensor *inputs, int n_outputs,
                          const tnt_ktensor *outputs, const char *name) {
    const char *who = "functional";
    if (!g || !inputs || !outputs) {
        tnt__error(TNT_ERR_ARG, "%s: NULL argument", who);
        return NULL;
    }
    if (n_inputs < 1 || n_inputs > TNT_MAX_IO || n_outputs < 1 || n_outputs > TNT_MAX_IO) {
        tnt__error(TNT_ERR_ARG, "%s: %d inputs and %d outputs (expected 1..%d of each)", who, n_inputs, n_outputs, TNT_MAX_IO);
        return NULL;
    }
    const tnt_model *gm = g->m;
    for (int k = 0; k < n_outputs; k++) {
        if (check_tensor(g, outputs[k], who, k) != TNT_OK) return NULL;
        for (int j = 0; j < k; j++)
            if (outputs[j].id == outputs[k].id) {
                tnt__error(TNT_ERR_ARG, "%s: output %d repeats output %d", who, k, j);
                return NULL;
            }
    }
    /* the graph input behind each model input: the InputLayer node's outer tensor */
    int ext[TNT_MAX_IO];
    for (int k = 0; k < n_inputs; k++) {
        ext[k] = -1;
        if (check_tensor(g, inputs[k], who, k) != TNT_OK) return NULL;
        for (int i = 0; i < gm->n_nodes; i++)
            if (gm->nodes[i].out == inputs[k].id && tnt__is_input_layer(gm->nodes[i].layer)) ext[k] = gm->nodes[i].in[0];
        if (ext[k] < 0) {
            tnt__error(TNT_ERR_ARG, "%s: input %d is not made by tnt_graph_input", who, k);
            return NULL;
        }
    }
    bool *need = tnt__calloc((size_t)gm->n_tensors + (size_t)gm->n_nodes, sizeof *need);
    int *map = tnt__calloc((size_t)gm->n_tensors, sizeof *map);
    tnt_model *m = tnt__functional_new(name);
    if (!need || !map || !m) goto fail;
    bool *node_needed = need + gm->n_tensors;
    for (int k = 0; k < n_outputs; k++) need[outputs[k].id] = true;
    for (int i = gm->n_nodes - 1; i >= 0; i--) {
        const tnt__node *n = &gm->nodes[i];
        bool needed = false;
        for (int k = 0; k < tnt__node_n_out(n); k++) needed |= need[n->out + k];
        if (!needed) continue;
        node_needed[i] = true;
        if (tnt__is_input_layer(n->layer)) {
            bool given = false;
            for (int k = 0; k < n_inputs; k++) given |= inputs[k].id == n->out;
            if (!given) {
                tnt__error(TNT_ERR_ARG, "%s: the outputs depend on input \"%s\", which is not among the model's inputs",
                           who, n->layer->name);
                goto fail;
            }
            continue;
        }
        for (int k = 0; k < n->n_in; k++) need[n->in[k]] = true;
    }
    for (int t = 0; t < gm->n_tensors; t++) map[t] = -1;
    m->n_inputs = n_inputs;
    for (int k = 0; k < n_inputs; k++) {
        for (int j = 0; j < k; j++)
            if (ext[j] == ext[k]) {
                tnt__error(TNT_ERR_ARG, "%s: input %d repeats input %d", who, k, j);
                goto fail;
            }
        if ((map[ext[k]] = m->inputs[k] = tnt__model_add_tensor(m, gm->tensor_shape[ext[k]])) < 0) goto fail;
    }
    for (int i = 0; i < gm->n_nodes; i++) {
        const tnt__node *n = &gm->nodes[i];
        if (!node_needed[i]) continue;
        tnt_layer *l = n->layer;
        if (!is_hidden(gm, l) && name_taken(m, l, n->scope - 1)) {
            tnt__error(TNT_ERR_ARG, "%s: two layers are named \"%s\" (names must be unique in a model, or in a nested "
                       "model)", who, l->name);
            goto fail;
        }
        if (tnt__model_own_layer(m, l, is_hidden(gm, l)) != TNT_OK) goto fail;
        int in[TNT_MAX_LAYER_INPUTS];
        for (int k = 0; k < n->n_in; k++) in[k] = map[n->in[k]];
        if ((map[n->out] = tnt__model_add_node(m, l, n->n_in, in)) < 0) goto fail;
        for (int k = 1; k < tnt__node_n_out(n); k++) map[n->out + k] = map[n->out] + k;
        m->nodes[m->n_nodes - 1].scope = n->scope;
    }
    /* the nested models, their calls on this model's tensors (-1 where cut away) */
    for (int i = 0; i < gm->n_scopes; i++) {
        int idx;
        if (tnt__scope_push(m, &gm->scopes[i], &idx) != TNT_OK) goto fail;
        m->scopes[idx].key = NULL;
        for (int c = 0; c < m->scopes[idx].n_calls; c++)
            for (int k = 0; k < TNT_MAX_IO; k++) {
                tnt__scope_call *sc = &m->scopes[idx].calls[c];
                if (sc->in[k] >= 0) sc->in[k] = map[sc->in[k]];
                if (sc->out[k] >= 0) sc->out[k] = map[sc->out[k]];
            }
    }
    m->n_outputs = n_outputs;
    for (int k = 0; k < n_outputs; k++) m->outputs[k] = map[outputs[k].id];
    tnt__model_set_io_shapes(m);
    if (tnt__model_analyse(m) != TNT_OK) goto fail;
    free(need);
    free(map);
    return m;
fail:
    free(need);
    free(map);
    tnt_model_free(m);
    return NULL;
}

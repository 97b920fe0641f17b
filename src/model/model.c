/* model.c: Sequential models: adding layers with shape inference, the flat parameter and
 * gradient buffers, weight access, summary, and the per-batch-size execution plans with the
 * forward and backward passes. */
#include "model/model.h"
#include "dist/dist.h"
#include "train/optimizer.h"

#include <stdio.h>

tnt_model *tnt_sequential(const char *name) {
    tnt_model *m = tnt__calloc(1, sizeof *m);
    if (!m) return NULL;
    const char *n = name && name[0] ? name : "sequential";
    if (strlen(n) >= TNT_NAME_MAX) {
        tnt__error(TNT_ERR_ARG, "sequential: name \"%.40s...\" is %zu characters (at most %d)", n,
                   strlen(n), TNT_NAME_MAX - 1);
        free(m);
        return NULL;
    }
    snprintf(m->name, sizeof m->name, "%s", n);
    m->seed = 42;
    return m;
}

static void plan_free(tnt_model *m, tnt__plan *p) {
    if (p->layer_plans)
        for (int i = 0; i < m->n_layers; i++)
            if (p->layer_plans[i] && m->layers[i]->ops->plan_destroy)
                m->layers[i]->ops->plan_destroy(p->layer_plans[i]);
    free(p->layer_plans);
    free(p->act_offset);
    free(p->act_is_input);
    free(p->ws_offset);
    memset(p, 0, sizeof *p);
}

static void plans_clear(tnt_model *m) {
    for (int i = 0; i < TNT_PLAN_CACHE; i++) plan_free(m, &m->plans[i]);
}

void tnt_model_free(tnt_model *m) {
    if (!m) return;
    plans_clear(m);
    tnt__free(m->arena);
    for (int i = 0; i < m->n_layers; i++) tnt_layer_free(m->layers[i]);
    free(m->layers);
    tnt__free(m->params);
    tnt__free(m->grads);
    tnt__free(m->state);
    free(m->grad_end);
    tnt__reducer_free(m->reducer);
    tnt_optimizer_free(m->optimizer);
    free(m);
}

/* Keras-style automatic name: "dense", then "dense_1", "dense_2", ... unique in the model. */
static void assign_name(tnt_model *m, tnt_layer *l) {
    char base[TNT_NAME_MAX];
    tnt__layer_base_name(l->ops->class_name, base, sizeof base);
    for (int k = 0;; k++) {
        char cand[TNT_NAME_MAX];
        if (k == 0) snprintf(cand, sizeof cand, "%.*s", TNT_NAME_MAX - 1, base);
        else snprintf(cand, sizeof cand, "%.*s_%d", TNT_NAME_MAX - 12, base, k);
        if (!tnt_model_get_layer(m, cand)) {
            memcpy(l->name, cand, sizeof cand);
            return;
        }
    }
}

static tnt_status build_layer(tnt_model *m, tnt_layer *l, int index, tnt_shape in) {
    l->in_shape = in;
    l->seed = tnt__hash64(m->seed * 1000003ull + (uint64_t)index);
    tnt_status s = l->ops->build(l, in, &l->out_shape);
    if (s != TNT_OK) {
        char b[96];
        return tnt__error_prefix(s, "model \"%s\": layer %d \"%s\" (%s) with input shape %s: ",
                                 m->name, index, l->name, l->ops->class_name,
                                 tnt_shape_str(in, b, sizeof b));
    }
    l->built = true;
    return TNT_OK;
}

tnt_status tnt_model_add(tnt_model *m, tnt_layer *l) {
    if (!l) return tnt__error_prefix(TNT_ERR_ARG, "model_add: layer is NULL (its constructor failed?): ");
    if (!m) {
        tnt_layer_free(l);
        return tnt__error(TNT_ERR_ARG, "model_add: model is NULL");
    }
    if (m->compiled || m->weights_ready) {
        tnt_layer_free(l);
        return tnt__error(TNT_ERR_STATE, "model \"%s\": cannot add layers after compile or first use", m->name);
    }
    if (l->auto_name) assign_name(m, l);
    else if (tnt_model_get_layer(m, l->name)) {
        tnt__error(TNT_ERR_ARG, "model \"%s\": a layer named \"%s\" already exists (names must be unique)",
                   m->name, l->name);
        tnt_layer_free(l);
        return TNT_ERR_ARG;
    }
    if (tnt__is_input_layer(l)) {
        if (m->n_layers > 0) {
            tnt__error(TNT_ERR_ARG, "model \"%s\": InputLayer \"%s\" must be the first layer", m->name, l->name);
            tnt_layer_free(l);
            return TNT_ERR_ARG;
        }
        m->has_input_shape = true;
        m->input_shape = m->output_shape = tnt__input_layer_shape(l);
    }
    if (m->has_input_shape) {
        tnt_status s = build_layer(m, l, m->n_layers, m->output_shape);
        if (s != TNT_OK) {
            tnt_layer_free(l);
            return s;
        }
        m->output_shape = l->out_shape;
    }
    if (m->n_layers == m->cap_layers) {
        int cap = m->cap_layers ? 2 * m->cap_layers : 8;
        tnt_layer **nl = realloc(m->layers, (size_t)cap * sizeof *nl);
        if (!nl) {
            tnt_layer_free(l);
            return tnt__error(TNT_ERR_NOMEM, "model \"%s\": out of memory adding a layer", m->name);
        }
        m->layers = nl;
        m->cap_layers = cap;
    }
    m->layers[m->n_layers++] = l;
    return TNT_OK;
}

tnt_status tnt_model_build(tnt_model *m, tnt_shape input_shape) {
    if (!m) return tnt__error(TNT_ERR_ARG, "model_build: model is NULL");
    if (m->has_input_shape) {
        if (tnt__shape_equal(input_shape, m->input_shape)) return TNT_OK;
        char a[96], b[96];
        return tnt__error(TNT_ERR_SHAPE, "model \"%s\": already built for input %s, got %s", m->name,
                          tnt_shape_str(m->input_shape, a, sizeof a), tnt_shape_str(input_shape, b, sizeof b));
    }
    tnt_shape s = input_shape;
    for (int i = 0; i < s.ndim; i++)
        if (s.dim[i] <= 0) {
            char b[96];
            return tnt__error(TNT_ERR_SHAPE, "model \"%s\": input shape %s: dimensions must be > 0",
                              m->name, tnt_shape_str(s, b, sizeof b));
        }
    for (int i = 0; i < m->n_layers; i++) {
        tnt_status st = build_layer(m, m->layers[i], i, s);
        if (st != TNT_OK) return st;
        s = m->layers[i]->out_shape;
    }
    m->has_input_shape = true;
    m->input_shape = input_shape;
    m->output_shape = s;
    return TNT_OK;
}

/* Allocates the flat buffers (backward order) and initializes the weights. Trainable weights go
 * to the parameter buffer, which has a gradient twin, the optimizer's slots and the allreduce;
 * non-trainable ones (BatchNormalization's moving statistics) to the state buffer, which has
 * none of these. */
tnt_status tnt__model_setup_weights(tnt_model *m) {
    if (m->weights_ready) return TNT_OK;
    if (!m->has_input_shape)
        return tnt__error(TNT_ERR_STATE, "model \"%s\": input shape unknown (add an InputLayer or call tnt_model_build)", m->name);
    if (m->n_layers == 0) return tnt__error(TNT_ERR_STATE, "model \"%s\": has no layers", m->name);
    int64_t trainable = 0, state = 0;
    for (int i = 0; i < m->n_layers; i++)
        for (int j = 0; j < m->layers[i]->n_weights; j++) {
            const tnt__weight *w = &m->layers[i]->weights[j];
            *(w->trainable ? &trainable : &state) += tnt_shape_numel(w->shape);
        }
    m->params = tnt__alloc((size_t)trainable * sizeof(float));
    m->grads = tnt__alloc((size_t)trainable * sizeof(float));
    m->state = tnt__alloc((size_t)state * sizeof(float));
    m->grad_end = tnt__calloc((size_t)m->n_layers, sizeof(int64_t));
    if (!m->params || !m->grads || !m->state || !m->grad_end) {
        tnt__free(m->params);
        tnt__free(m->grads);
        tnt__free(m->state);
        free(m->grad_end);
        m->params = m->grads = m->state = NULL;
        m->grad_end = NULL;
        return TNT_ERR_NOMEM;
    }
    int64_t off = 0, state_off = 0;
    for (int i = m->n_layers - 1; i >= 0; i--) {
        tnt_layer *l = m->layers[i];
        for (int j = 0; j < l->n_weights; j++) {
            tnt__weight *w = &l->weights[j];
            int64_t n = tnt_shape_numel(w->shape);
            if (w->trainable) {
                w->value = m->params + off;
                w->grad = m->grads + off;
                off += n;
            } else {
                w->value = m->state + state_off;
                w->grad = NULL;
                state_off += n;
            }
            tnt__weight_init(w, tnt__hash64(l->seed + 7919ull * (uint64_t)(j + 1)));
        }
        m->grad_end[i] = off;
    }
    m->n_params = trainable;
    m->n_state = state;
    m->weights_ready = true;
    return TNT_OK;
}

int64_t tnt_model_count_params(const tnt_model *m) {
    if (!m) return 0;
    int64_t total = 0;
    for (int i = 0; i < m->n_layers; i++)
        for (int j = 0; j < m->layers[i]->n_weights; j++)
            total += tnt_shape_numel(m->layers[i]->weights[j].shape);
    return total;
}

tnt_shape tnt_model_input_shape(const tnt_model *m) { return m ? m->input_shape : (tnt_shape){0}; }
tnt_shape tnt_model_output_shape(const tnt_model *m) { return m ? m->output_shape : (tnt_shape){0}; }
int tnt_model_num_layers(const tnt_model *m) { return m ? m->n_layers : 0; }
tnt_layer *tnt_model_layer(const tnt_model *m, int i) {
    return m && i >= 0 && i < m->n_layers ? m->layers[i] : NULL;
}
tnt_layer *tnt_model_get_layer(const tnt_model *m, const char *name) {
    if (!m || !name) return NULL;
    for (int i = 0; i < m->n_layers; i++)
        if (!strcmp(m->layers[i]->name, name)) return m->layers[i];
    return NULL;
}
tnt_optimizer *tnt_model_optimizer(const tnt_model *m) { return m ? m->optimizer : NULL; }
int64_t tnt__model_output_size(const tnt_model *m) { return tnt_shape_numel(m->output_shape); }

int tnt_model_num_weights(const tnt_model *m) {
    int n = 0;
    for (int i = 0; m && i < m->n_layers; i++) n += m->layers[i]->n_weights;
    return n;
}

static tnt__weight *weight_at(const tnt_model *m, int index, tnt_layer **layer) {
    for (int i = 0; i < m->n_layers; i++) {
        if (index < m->layers[i]->n_weights) {
            *layer = m->layers[i];
            return &m->layers[i]->weights[index];
        }
        index -= m->layers[i]->n_weights;
    }
    return NULL;
}

tnt_status tnt_model_weight(tnt_model *m, int i, const char **name, tnt_shape *shape, float **data) {
    if (!m) return tnt__error(TNT_ERR_ARG, "model_weight: model is NULL");
    tnt_status s = tnt__model_setup_weights(m);
    if (s != TNT_OK) return s;
    tnt_layer *l;
    tnt__weight *w = weight_at(m, i, &l);
    if (!w)
        return tnt__error(TNT_ERR_ARG, "model \"%s\": weight index %d (expected 0..%d)", m->name, i,
                          tnt_model_num_weights(m) - 1);
    static _Thread_local char full[2 * TNT_NAME_MAX + 8];
    snprintf(full, sizeof full, "%s/%s:0", l->name, w->name);
    if (name) *name = full;
    if (shape) *shape = w->shape;
    if (data) *data = w->value;
    return TNT_OK;
}

tnt_status tnt_get_weights(const tnt_model *m, float *buf, int64_t n) {
    if (!m || !buf) return tnt__error(TNT_ERR_ARG, "get_weights: model or buffer is NULL");
    tnt_status s = tnt__model_setup_weights((tnt_model *)m);
    if (s != TNT_OK) return s;
    if (n != m->n_params + m->n_state)
        return tnt__error(TNT_ERR_ARG, "get_weights: buffer of %lld floats, model \"%s\" has %lld",
                          (long long)n, m->name, (long long)(m->n_params + m->n_state));
    for (int i = 0; i < m->n_layers; i++)
        for (int j = 0; j < m->layers[i]->n_weights; j++) {
            const tnt__weight *w = &m->layers[i]->weights[j];
            int64_t k = tnt_shape_numel(w->shape);
            memcpy(buf, w->value, (size_t)k * sizeof(float));
            buf += k;
        }
    return TNT_OK;
}

tnt_status tnt_set_weights(tnt_model *m, const float *buf, int64_t n) {
    if (!m || !buf) return tnt__error(TNT_ERR_ARG, "set_weights: model or buffer is NULL");
    tnt_status s = tnt__model_setup_weights(m);
    if (s != TNT_OK) return s;
    if (n != m->n_params + m->n_state)
        return tnt__error(TNT_ERR_ARG, "set_weights: buffer of %lld floats, model \"%s\" has %lld",
                          (long long)n, m->name, (long long)(m->n_params + m->n_state));
    for (int i = 0; i < m->n_layers; i++)
        for (int j = 0; j < m->layers[i]->n_weights; j++) {
            tnt__weight *w = &m->layers[i]->weights[j];
            int64_t k = tnt_shape_numel(w->shape);
            memcpy(w->value, buf, (size_t)k * sizeof(float));
            buf += k;
        }
    m->weights_synced = false; /* the master's weights are broadcast at the next use */
    return TNT_OK;
}

/* 1234567 -> "1,234,567" */
static char *with_commas(int64_t v, char *buf, size_t size) {
    char raw[32];
    int len = snprintf(raw, sizeof raw, "%lld", (long long)v), j = 0;
    for (int i = 0; i < len && (size_t)j + 2 < size; i++) {
        if (i > 0 && (len - i) % 3 == 0) buf[j++] = ',';
        buf[j++] = raw[i];
    }
    buf[j] = '\0';
    return buf;
}

tnt_status tnt_model_summary(const tnt_model *m, FILE *out) {
    if (!m) return tnt__error(TNT_ERR_ARG, "summary: model is NULL");
    if (!out) out = stdout;
    const char *rule = "_________________________________________________________________";
    const char *dbl = "=================================================================";
    fprintf(out, "Model: \"%s\"\n%s\n", m->name, rule);
    fprintf(out, " %-28s%-26s%-10s\n%s\n", "Layer (type)", "Output Shape", "Param #", dbl);
    int64_t total = 0, trainable = 0;
    for (int i = 0; i < m->n_layers; i++) {
        const tnt_layer *l = m->layers[i];
        char col[80], shape[96], n[32];
        int64_t params = 0;
        for (int j = 0; j < l->n_weights; j++) {
            int64_t k = tnt_shape_numel(l->weights[j].shape);
            params += k;
            if (l->weights[j].trainable) trainable += k;
        }
        total += params;
        snprintf(col, sizeof col, "%s (%s)", l->name, l->ops->class_name);
        if (l->built) tnt_shape_str(tnt__shape_with_batch(-1, l->out_shape), shape, sizeof shape);
        else snprintf(shape, sizeof shape, "multiple");
        fprintf(out, " %-28s%-26s%-10s\n", col, shape, with_commas(params, n, sizeof n));
        fprintf(out, "%s\n", i + 1 < m->n_layers ? "" : dbl);
    }
    char n[32];
    fprintf(out, "Total params: %s\n", with_commas(total, n, sizeof n));
    fprintf(out, "Trainable params: %s\n", with_commas(trainable, n, sizeof n));
    fprintf(out, "Non-trainable params: %s\n%s\n", with_commas(total - trainable, n, sizeof n), rule);
    return TNT_OK;
}

/* ---- plans ------------------------------------------------------------------------------- */

static size_t align64(size_t x) { return (x + 63) & ~(size_t)63; }

static tnt_status plan_init(tnt_model *m, tnt__plan *p, int64_t batch) {
    int L = m->n_layers;
    p->batch = batch;
    p->layer_plans = tnt__calloc((size_t)L, sizeof(void *));
    p->act_offset = tnt__calloc((size_t)L + 1, sizeof(size_t));
    p->act_is_input = tnt__calloc((size_t)L + 1, sizeof(bool));
    p->ws_offset = tnt__calloc((size_t)L, sizeof(size_t));
    if (!p->layer_plans || !p->act_offset || !p->act_is_input || !p->ws_offset) return TNT_ERR_NOMEM;
    size_t off = 0, max_act = 0;
    p->act_is_input[0] = true;
    for (int i = 0; i < L; i++) {
        tnt_layer *l = m->layers[i];
        if (l->ops->plan_create) {
            p->layer_plans[i] = l->ops->plan_create(l, batch);
            if (!p->layer_plans[i])
                return tnt__error_prefix(TNT_ERR_BACKEND, "model \"%s\": layer \"%s\" (%s), batch %lld: ",
                                         m->name, l->name, l->ops->class_name, (long long)batch);
        }
        size_t bytes = (size_t)(batch * tnt_shape_numel(l->out_shape)) * sizeof(float);
        max_act = TNT_MAX(max_act, bytes);
        max_act = TNT_MAX(max_act, (size_t)(batch * tnt_shape_numel(l->in_shape)) * sizeof(float));
        if (l->ops->is_view) {
            p->act_offset[i + 1] = p->act_offset[i];
            p->act_is_input[i + 1] = p->act_is_input[i];
        } else {
            p->act_offset[i + 1] = off;
            off += align64(bytes);
        }
        if (l->ops->workspace_size) {
            p->ws_offset[i] = off;
            off += align64(l->ops->workspace_size(l, p->layer_plans[i], batch));
        }
    }
    p->grad_offset[0] = off;
    off += align64(max_act);
    p->grad_offset[1] = off;
    off += align64(max_act);
    p->preact_offset = off;
    off += align64((size_t)(batch * tnt_shape_numel(m->output_shape)) * sizeof(float));
    p->arena_bytes = off;
    if (off > m->arena_bytes) {
        tnt__free(m->arena);
        m->arena_bytes = 0;
        m->arena = tnt__alloc(off);
        if (!m->arena) return TNT_ERR_NOMEM;
        m->arena_bytes = off;
    }
    return TNT_OK;
}

tnt__plan *tnt__model_plan(tnt_model *m, int64_t batch) {
    tnt__plan *victim = &m->plans[0];
    for (int i = 0; i < TNT_PLAN_CACHE; i++) {
        tnt__plan *p = &m->plans[i];
        if (p->batch == batch && p->layer_plans) {
            p->last_use = ++m->plan_clock;
            return p;
        }
        if (p->last_use < victim->last_use) victim = p;
    }
    plan_free(m, victim);
    if (plan_init(m, victim, batch) != TNT_OK) {
        plan_free(m, victim);
        return NULL;
    }
    victim->last_use = ++m->plan_clock;
    return victim;
}

float *tnt__plan_act(tnt_model *m, tnt__plan *p, int i, const float *x) {
    if (p->act_is_input[i]) return (float *)x;
    return (float *)((char *)m->arena + p->act_offset[i]);
}

static void *ws_ptr(tnt_model *m, tnt__plan *p, int i) {
    return m->layers[i]->ops->workspace_size ? (char *)m->arena + p->ws_offset[i] : NULL;
}

tnt_status tnt__model_forward(tnt_model *m, tnt__plan *p, const float *x, bool training, float **out) {
    uint64_t step_seed = tnt__hash64(m->seed ^ (0xD1B54A32D192ED03ull * (uint64_t)(m->step + 1)));
    if (training) m->step++;
    for (int i = 0; i < m->n_layers; i++) {
        tnt_layer *l = m->layers[i];
        if (l->ops->is_view) continue;
        tnt__fwd_args a = {
            .batch = p->batch,
            .x = tnt__plan_act(m, p, i, x),
            .y = tnt__plan_act(m, p, i + 1, x),
            .preact = (i == m->n_layers - 1 && m->fused_output_loss)
                          ? (float *)((char *)m->arena + p->preact_offset) : NULL,
            .workspace = ws_ptr(m, p, i),
            .training = training,
            .seed = step_seed,
            .sample_offset = m->sample_offset,
        };
        tnt_status s = l->ops->forward(l, p->layer_plans[i], &a);
        if (s != TNT_OK)
            return tnt__error_prefix(s, "layer \"%s\" (%s) forward: ", l->name, l->ops->class_name);
    }
    *out = tnt__plan_act(m, p, m->n_layers, x);
    return TNT_OK;
}

tnt_status tnt__model_backward(tnt_model *m, tnt__plan *p, const float *x, const float *dpred) {
    const float *dy = dpred;
    int first_trainable = m->n_layers; /* layers before the first weighted one need no dx */
    for (int i = 0; i < m->n_layers; i++)
        if (m->layers[i]->n_weights > 0) {
            first_trainable = i;
            break;
        }
    for (int i = m->n_layers - 1; i >= 0; i--) {
        tnt_layer *l = m->layers[i];
        if (l->ops->is_view) continue;
        bool need_dx = i > first_trainable;
        float *dx = NULL;
        if (need_dx) {
            float *g0 = (float *)((char *)m->arena + p->grad_offset[0]);
            float *g1 = (float *)((char *)m->arena + p->grad_offset[1]);
            dx = (dy == g0) ? g1 : g0;
        }
        tnt__bwd_args a = {
            .batch = p->batch,
            .x = tnt__plan_act(m, p, i, x),
            .y = tnt__plan_act(m, p, i + 1, x),
            .dy = dy,
            .dx = dx,
            .workspace = ws_ptr(m, p, i),
            .dy_is_preact = (i == m->n_layers - 1 && m->fused_output_loss),
            .sample_offset = m->sample_offset,
        };
        tnt_status s = l->ops->backward(l, p->layer_plans[i], &a);
        if (s != TNT_OK)
            return tnt__error_prefix(s, "layer \"%s\" (%s) backward: ", l->name, l->ops->class_name);
        if (m->reducer && l->n_weights > 0) tnt__reducer_ready(m->reducer, m->grad_end[i]);
        if (!need_dx) break;
        dy = dx;
    }
    return TNT_OK;
}

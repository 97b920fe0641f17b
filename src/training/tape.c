/* tape.c: custom training loops (Keras's tf.GradientTape around a model call, then
 * optimizer.apply_gradients). A forward pass on the caller's batch is kept for one backward that
 * starts from gradients given w.r.t. the model's outputs (the loss was differentiated outside, as
 * an operation graph: ops/run.c), and gives each weight's gradient; on p ranks these are averaged
 * over the ranks, as Horovod's DistributedGradientTape does, so a loop over each rank's shard steps
 * as the serial loop over the global batch. The update runs the model's optimizer on the weights
 * given, in one pass per weight over the flat buffers (slots persist across steps, as in fit). */
#include "comm/comm.h"
#include "layers/regularizer.h"
#include "model/device.h"
#include "model/model.h"
#include "model/window.h"
#include "optimizers/optimizer.h"
#include "training/parallel.h"

#include <string.h>

/* What backward needs of the last tape forward. */
typedef struct tnt__tape tnt__tape;
struct tnt__tape {
    tnt__plan *plan;
    tnt__step st;
    float *x;   /* the batch (plans of single-input models read it in place) */
    int64_t n;
    bool kept;  /* a forward waits for its backward */
    bool fused[TNT_MAX_IO]; /* the compiled fused softmax/sigmoid losses, restored by backward */
    bool unfused;
};

static void tape_free(struct tnt__tape *t) {
    if (!t) return;
    tnt__free(t->x);
    free(t);
}

/* The weight of index i in tnt_model_weight order, and its layer. */
static tnt__weight *weight_of(const tnt_model *m, int i, tnt_layer **layer) {
    for (int k = 0; k < m->n_layers; k++) {
        if (i < m->layers[k]->n_weights) {
            *layer = m->layers[k];
            return &m->layers[k]->weights[i];
        }
        i -= m->layers[k]->n_weights;
    }
    return NULL;
}

bool tnt_model_weight_trainable(const tnt_model *m, int i) {
    tnt_layer *l = NULL;
    const tnt__weight *w = m && i >= 0 ? weight_of(m, i, &l) : NULL;
    return w && w->trainable && !l->frozen;
}

/* The batch's input shape against the model's (variable dimensions: the model is built again for
 * them), as fit checks a batch. */
static tnt_status check_input(tnt_model *m, tnt_shape xs, const char *who) {
    char a[96], c[96];
    xs.ndim--;
    memmove(xs.dim, xs.dim + 1, (size_t)xs.ndim * sizeof xs.dim[0]);
    tnt_status s;
    if (m->variable && m->n_inputs == 1) s = tnt__model_instantiate(m, &xs, who);
    else if (m->variable && !m->inst_known)
        s = tnt__error(TNT_ERR_STATE, "%s: model \"%s\" has several inputs with variable (None) dimensions: fix "
                       "their shapes with tnt_model_set_input_shapes first", who, m->name);
    else s = tnt__model_sync_layers(m, who);
    if (s == TNT_OK && !tnt__shape_equal(xs, m->input_shape))
        s = tnt__error(TNT_ERR_SHAPE, "%s: the batch has shape %s per sample, model \"%s\" expects input %s", who,
                       tnt_shape_str(xs, a, sizeof a), m->name, tnt_shape_str(m->input_shape, c, sizeof c));
    return s;
}

/* Every rank's batch size (all collective: each rank puts its own at its place); the global
 * batch and this rank's first sample in it, so dropout draws as on the global batch. */
static tnt_status global_batch(int64_t n, int64_t *global_n, int64_t *offset) {
    int size = tnt_get_size(), rank = tnt_get_rank();
    int64_t *all = tnt__calloc((size_t)size, sizeof *all);
    if (!all) return tnt__error(TNT_ERR_NOMEM, "GradientTape: out of memory");
    all[rank] = n;
    tnt_status s = tnt__allreduce_sum_i64(all, size);
    *global_n = *offset = 0;
    for (int r = 0; r < size; r++) {
        *global_n += all[r];
        if (r < rank) *offset += all[r];
    }
    free(all);
    return s;
}

tnt_status tnt_model_tape_forward(tnt_model *m, const tnt_tensor *x, bool training, bool input_grads,
                                  tnt_tensor **out) {
    const char *who = "GradientTape (model call)";
    if (!m || !x || !x->data || !out) return tnt__error(TNT_ERR_ARG, "%s: NULL argument", who);
    *out = NULL;
    tnt_status s = TNT_OK;
    if (!m->has_input_shape && x->shape.ndim >= 2) { /* Keras builds a model at its first call */
        tnt_shape in = {.ndim = x->shape.ndim - 1};
        for (int d = 1; d < x->shape.ndim; d++) in.dim[d - 1] = x->shape.dim[d];
        if ((s = tnt_model_build(m, in)) != TNT_OK) return tnt__error_prefix(s, "%s: ", who);
    }
    if (m->on_device)
        return tnt__error(TNT_ERR_UNSUPPORTED, "%s: model \"%s\" trains on the GPU; custom training loops run on "
                          "the CPU (TNT_DEVICE=cpu)", who, m->name);
    if ((s = tnt__model_setup_weights(m)) != TNT_OK) return s;
    /* a custom loop's gradients are its own, averaged over the ranks by the tape */
    if (!m->in_fit && (s = tnt__model_detach_window(m)) != TNT_OK) return s;
    int64_t n = x->shape.ndim ? x->shape.dim[0] : 0;
    if (n <= 0) return tnt__error(TNT_ERR_ARG, "%s: a batch of 0 samples", who);
    if ((s = check_input(m, x->shape, who)) != TNT_OK) return s;
    if (!m->tape) {
        if (!(m->tape = calloc(1, sizeof *m->tape))) return tnt__error(TNT_ERR_NOMEM, "%s: out of memory", who);
        m->tape_free = tape_free;
    }
    tnt__tape *t = m->tape;
    t->kept = false;
    bool parallel = tnt__is_parallel(m);
    /* the loss is the user's, on the outputs: a compiled fused softmax/sigmoid loss is undone */
    bool any_fused = false;
    for (int k = 0; k < m->n_outputs; k++) any_fused |= m->fused_output_loss[k];
    if (any_fused) {
        memcpy(t->fused, m->fused_output_loss, sizeof t->fused);
        memset(m->fused_output_loss, 0, sizeof m->fused_output_loss);
        t->unfused = true;
        tnt__model_clear_plans(m);
    }
    if (m->input_grads != input_grads) { /* the plans differ: the inputs' gradients are kept or not */
        m->input_grads = input_grads;
        tnt__model_clear_plans(m);
    }
    if (parallel && (s = tnt__prepare_parallel(m, who, NULL, NULL, NULL)) != TNT_OK) return s;
    tnt__step st = {.global_n = n, .training = training, .parallel = parallel};
    if (parallel && (s = global_batch(n, &st.global_n, &st.sample_offset)) != TNT_OK) return s;
    if (training) st.seed = tnt__model_training_seed(m);
    st.activity_grad_scale = 1.0 / (double)n;
    size_t bytes = (size_t)tnt_shape_numel(x->shape) * sizeof(float);
    tnt__free(t->x);
    if (!(t->x = tnt__alloc(bytes ? bytes : 4))) return tnt__error(TNT_ERR_NOMEM, "%s: out of memory", who);
    memcpy(t->x, x->data, bytes);
    tnt__plan *p = tnt__model_plan(m, n);
    if (!p) return TNT_ERR_BACKEND;
    float *pred;
    if ((s = tnt__model_forward(m, p, t->x, &st, &pred)) != TNT_OK) return s;
    tnt_tensor *o = tnt_tensor_new(tnt__shape_with_batch(n, m->output_shape));
    if (!o) return tnt__error(TNT_ERR_NOMEM, "%s: out of memory", who);
    memcpy(o->data, pred, (size_t)(n * tnt__model_output_size(m)) * sizeof(float));
    *out = o;
    t->plan = p, t->st = st, t->n = n, t->kept = true;
    return TNT_OK;
}

tnt_status tnt_model_tape_penalty(tnt_model *m, double *value) {
    if (!m || !value) return tnt__error(TNT_ERR_ARG, "GradientTape: NULL argument");
    double sum = 0;
    for (int i = 0; i < m->n_layers; i++)
        if (m->layers[i]->rules) sum += tnt__layer_weight_penalty(m->layers[i]);
    *value = sum + (m->tape && m->tape->n ? m->activity_penalty / (double)m->tape->n : 0.0);
    return TNT_OK;
}

/* Puts the compiled fused losses back (their plans differ). */
static void restore_fused(tnt_model *m) {
    tnt__tape *t = m->tape;
    if (!t || !t->unfused) return;
    memcpy(m->fused_output_loss, t->fused, sizeof t->fused);
    t->unfused = false;
    tnt__model_clear_plans(m);
}

/* Adds scale times the weight penalties' gradients to the data gradients in m->grads. */
static tnt_status add_penalty_grads(tnt_model *m, float scale) {
    bool any = false;
    for (int i = 0; i < m->n_layers; i++) any |= m->layers[i]->rules != NULL;
    if (!any || scale == 0.0f) return TNT_OK;
    float *data = tnt__alloc((size_t)m->n_params * sizeof(float) + 4);
    if (!data) return tnt__error(TNT_ERR_NOMEM, "GradientTape: out of memory");
    memcpy(data, m->grads, (size_t)m->n_params * sizeof(float));
    memset(m->grads, 0, (size_t)m->n_params * sizeof(float));
    for (int i = 0; i < m->n_layers; i++)
        if (m->layers[i]->rules) tnt__layer_add_penalty_grads(m->layers[i]);
    for (int64_t i = 0; i < m->n_params; i++) m->grads[i] = data[i] + scale * m->grads[i];
    tnt__free(data);
    return TNT_OK;
}

/* The inputs' gradients of the last backward, packed per sample as the inputs are. */
static tnt_status input_grads(tnt_model *m, float *dx) {
    tnt__tape *t = m->tape;
    int64_t per = 0, col = 0;
    for (int k = 0; k < m->n_inputs; k++) per += tnt_shape_numel(m->tensor_shape[m->inputs[k]]);
    for (int k = 0; k < m->n_inputs; k++) {
        int64_t c = tnt_shape_numel(m->tensor_shape[m->inputs[k]]);
        const float *g = tnt__plan_input_grad(m, t->plan, k);
        for (int64_t i = 0; i < t->n; i++) {
            if (g) memcpy(dx + i * per + col, g + i * c, (size_t)c * sizeof(float));
            else memset(dx + i * per + col, 0, (size_t)c * sizeof(float));
        }
        col += c;
    }
    return TNT_OK;
}

tnt_status tnt_model_tape_backward(tnt_model *m, const tnt_tensor *dout, float penalty_scale, float *const *grads,
                                   float *dx) {
    const char *who = "GradientTape.gradient";
    if (!m || !dout || !dout->data) return tnt__error(TNT_ERR_ARG, "%s: NULL argument", who);
    tnt__tape *t = m->tape;
    if (!t || !t->kept)
        return tnt__error(TNT_ERR_STATE, "%s: model \"%s\" has no recorded call to differentiate", who, m->name);
    t->kept = false;
    int64_t per = tnt__model_output_size(m);
    if (tnt_shape_numel(dout->shape) != t->n * per) {
        restore_fused(m);
        return tnt__error(TNT_ERR_SHAPE, "%s: the outputs' gradient has %lld values, model \"%s\" gave %lld", who,
                          (long long)tnt_shape_numel(dout->shape), m->name, (long long)(t->n * per));
    }
    tnt__plan *p = t->plan;
    /* the packed per-sample outputs' gradient into each output's gradient buffer */
    int64_t col = 0;
    for (int k = 0; k < m->n_outputs; k++) {
        int64_t c = tnt_shape_numel(m->tensor_shape[m->outputs[k]]);
        float *d = tnt__plan_output_grad(m, p, k);
        for (int64_t i = 0; i < t->n; i++) memcpy(d + i * c, dout->data + i * per + col, (size_t)c * sizeof(float));
        col += c;
    }
    tnt__step st = t->st;
    st.activity_grad_scale = penalty_scale / (double)t->n;
    tnt_status s = tnt__model_backward(m, p, t->x, &st);
    if (s == TNT_OK && dx) {
        if (!m->input_grads)
            s = tnt__error(TNT_ERR_STATE, "%s: model \"%s\": its call kept no input gradients", who, m->name);
        else s = input_grads(m, dx);
    }
    bool parallel = tnt__is_parallel(m);
    if (parallel) { /* Horovod's average; a failed rank still joins the collectives */
        s = tnt__agree(s, NULL, 0);
        if (s == TNT_OK) s = tnt__allreduce_sum_f32(m->grads, m->n_params);
        float inv = 1.0f / (float)tnt_get_size();
        for (int64_t i = 0; s == TNT_OK && i < m->n_params; i++) m->grads[i] *= inv;
    }
    /* the weight penalties depend on the weights alone, the same on every rank: added once */
    if (s == TNT_OK) s = add_penalty_grads(m, penalty_scale);
    restore_fused(m);
    if (s != TNT_OK) return s;
    int nw = tnt_model_num_weights(m);
    for (int i = 0; grads && i < nw; i++) {
        tnt_layer *l = NULL;
        tnt__weight *w = weight_of(m, i, &l);
        if (!grads[i]) continue;
        size_t k = (size_t)tnt_shape_numel(w->shape);
        if (w->grad && !l->frozen) memcpy(grads[i], w->grad, k * sizeof(float));
        else memset(grads[i], 0, k * sizeof(float));
    }
    return TNT_OK;
}

tnt_status tnt_model_set_optimizer(tnt_model *m, tnt_optimizer *opt) {
    if (!m || !opt) {
        tnt_optimizer_free(opt);
        return tnt__error(TNT_ERR_ARG, "apply_gradients: NULL model or optimizer");
    }
    if (opt == m->optimizer) return TNT_OK;
    tnt_status s = tnt__model_setup_weights(m);
    if (s == TNT_OK) s = tnt__optimizer_prepare(opt, m->n_params);
    if (s == TNT_OK) s = tnt__model_detach_window(m); /* the old optimizer's slots may be there */
    if (s != TNT_OK) {
        tnt_optimizer_free(opt);
        return s;
    }
    tnt_optimizer_free(m->optimizer);
    m->optimizer = opt;
    return TNT_OK;
}

tnt_status tnt_model_apply_gradients(tnt_model *m, int n, const int *index, const float *const *grads) {
    const char *who = "apply_gradients";
    if (!m || (n && (!index || !grads))) return tnt__error(TNT_ERR_ARG, "%s: NULL argument", who);
    if (!m->optimizer)
        return tnt__error(TNT_ERR_STATE, "%s: model \"%s\" has no optimizer", who, m->name);
    tnt_status s = tnt__model_setup_weights(m);
    if (s != TNT_OK) return s;
    if (m->on_device)
        return tnt__error(TNT_ERR_UNSUPPORTED, "%s: model \"%s\" trains on the GPU; custom training loops run on "
                          "the CPU (TNT_DEVICE=cpu)", who, m->name);
    int nw = tnt_model_num_weights(m);
    for (int j = 0; j < n; j++) {
        tnt_layer *l = NULL;
        tnt__weight *w = index[j] >= 0 && index[j] < nw ? weight_of(m, index[j], &l) : NULL;
        if (!w) return tnt__error(TNT_ERR_ARG, "%s: weight index %d (model \"%s\" has %d)", who, index[j], m->name, nw);
        if (!w->grad || l->frozen)
            return tnt__error(TNT_ERR_ARG, "%s: weight \"%s/%s\" of model \"%s\" is not trainable", who, l->name,
                              w->name, m->name);
        if (!grads[j]) return tnt__error(TNT_ERR_ARG, "%s: the gradient of \"%s/%s\" is None", who, l->name, w->name);
    }
    /* the given gradients into the flat buffer, then one pass of the optimizer over each */
    for (int j = 0; j < n; j++) {
        tnt_layer *l = NULL;
        tnt__weight *w = weight_of(m, index[j], &l);
        memcpy(w->grad, grads[j], (size_t)tnt_shape_numel(w->shape) * sizeof(float));
    }
    if ((s = tnt__model_host_written(m)) != TNT_OK) return s;
    for (int j = 0; j < n && s == TNT_OK; j++) {
        tnt_layer *l = NULL;
        tnt__weight *w = weight_of(m, index[j], &l);
        int64_t b = w->grad - m->grads;
        s = tnt__optimizer_apply(m->optimizer, m->params, m->grads, b, b + tnt_shape_numel(w->shape));
    }
    if (s != TNT_OK) return s;
    tnt__optimizer_finish_step(m->optimizer);
    for (int i = 0; i < m->n_layers && s == TNT_OK; i++)
        if (m->layers[i]->rules) s = tnt__layer_apply_constraints(m->layers[i]);
    return s;
}

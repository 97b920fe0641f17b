/* run.c: an operation graph run once on given data, outside any layer (tnt_opgraph_run): the
 * operations a custom training loop applies to a model's outputs under Keras's GradientTape (the
 * loss), forward for their values and backward for the gradient w.r.t. those outputs. */
#include "ops/ops.h"

#include <string.h>

/* Shapes of the inputs given; an error names the one missing. */
static tnt_status input_shapes(const tnt_opgraph *g, const tnt_tensor *const *inputs, tnt_shape *shapes) {
    for (int i = 0; i < g->n_inputs; i++) {
        if (!inputs[i] || !inputs[i]->data)
            return tnt__error(TNT_ERR_ARG, "opgraph_run: input %d is NULL (the graph has %d inputs)", i, g->n_inputs);
        shapes[i] = inputs[i]->shape;
    }
    return TNT_OK;
}

tnt_status tnt_opgraph_run(const tnt_opgraph *g, const tnt_tensor *const *inputs, tnt_tensor **outputs,
                           const tnt_tensor *const *douts, tnt_tensor **dinputs) {
    if (!g || (g->n_inputs && !inputs) || !outputs)
        return tnt__error(TNT_ERR_ARG, "opgraph_run: NULL graph, inputs or outputs");
    if (g->n_weights)
        return tnt__error(TNT_ERR_UNSUPPORTED, "opgraph_run: a graph with weights of its own (%d) runs only as a "
                          "layer", g->n_weights);
    for (int k = 0; k < g->n_outputs; k++) outputs[k] = NULL;
    for (int i = 0; dinputs && i < g->n_inputs; i++) dinputs[i] = NULL;
    tnt_shape shapes[TNT__MAX_OP_IN];
    tnt_status s = input_shapes(g, inputs, shapes);
    if (s != TNT_OK) return s;
    tnt__opplan *p = tnt__opplan_create(g, shapes, douts != NULL);
    if (!p) return tnt__error_prefix(TNT_ERR_SHAPE, "opgraph_run: ");
    void *ws = tnt__alloc(tnt__opplan_workspace(p) + 64);
    const float *in[TNT__MAX_OP_IN];
    float *out[TNT__MAX_OP_IN], *dout[TNT__MAX_OP_IN], *din[TNT__MAX_OP_IN];
    for (int i = 0; i < g->n_inputs; i++) in[i] = inputs[i]->data;
    s = ws ? TNT_OK : TNT_ERR_NOMEM;
    for (int k = 0; k < g->n_outputs && s == TNT_OK; k++) {
        if (!(outputs[k] = tnt_tensor_new(tnt__opplan_shape(p, g->outputs[k])))) s = TNT_ERR_NOMEM;
        else out[k] = outputs[k]->data;
    }
    tnt__opstep st = {.inputs = in, .outputs = out, .workspace = ws, .training = true};
    if (s == TNT_OK) s = tnt__opplan_forward(p, &st);
    if (s == TNT_OK && douts) {
        for (int k = 0; k < g->n_outputs && s == TNT_OK; k++) {
            tnt_shape os = tnt__opplan_shape(p, g->outputs[k]);
            dout[k] = douts[k] ? douts[k]->data : NULL;
            if (douts[k] && tnt_shape_numel(douts[k]->shape) != tnt_shape_numel(os)) {
                char a[96], b[96];
                s = tnt__error(TNT_ERR_SHAPE, "opgraph_run: the gradient of output %d has shape %s, the output %s", k,
                               tnt_shape_str(douts[k]->shape, a, sizeof a), tnt_shape_str(os, b, sizeof b));
            }
        }
        for (int i = 0; i < g->n_inputs && s == TNT_OK; i++) {
            din[i] = NULL;
            if (!dinputs) continue;
            if (!(dinputs[i] = tnt_tensor_new(shapes[i]))) s = TNT_ERR_NOMEM;
            else din[i] = dinputs[i]->data;
        }
        if (s == TNT_OK) s = tnt__opplan_backward(p, &st, (const float *const *)dout, din, NULL);
    }
    if (s == TNT_ERR_NOMEM) tnt__error(s, "opgraph_run: out of memory");
    tnt__free(ws);
    tnt__opplan_destroy(p);
    if (s != TNT_OK) {
        for (int k = 0; k < g->n_outputs; k++) tnt_tensor_free(outputs[k]), outputs[k] = NULL;
        for (int i = 0; dinputs && i < g->n_inputs; i++) tnt_tensor_free(dinputs[i]), dinputs[i] = NULL;
    }
    return s;
}

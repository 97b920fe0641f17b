/* fuzz_opgraph.c: libFuzzer target for the operation-graph JSON (tnt_opgraph_from_json: what a
 * Keras file carries under a traced layer's "tnt_ops" key) and its evaluator (ops/exec.c). Any
 * input is rejected with a message or gives a graph whose JSON reads back to the same JSON; a
 * graph that plans for its inputs (None sizes taken as 3) and is small enough runs forward and
 * backward, each of which succeeds or fails with a message: never a crash or an out-of-bounds
 * access in a shape rule, a kernel or the arena placement. */
#include "fuzz.h"

#include "ops/ops.h"
#include "tarantella.h"

#include <stdlib.h>
#include <string.h>

/* Beyond this many floats in all a graph is not run: a legitimate graph may be large (and an
 * einsum's work grows faster than its tensors), the fuzzer looks for faults, not big graphs. */
#define MAX_RUN_FLOATS ((int64_t)1 << 20)

static float *filled(int64_t n, float scale) {
    float *p = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    for (int64_t i = 0; p && i < n; i++) p[i] = scale * (float)((i % 7) - 3);
    return p;
}

/* Plans g for concrete inputs and runs forward and backward once. */
static void run(const tnt_opgraph *g) {
    tnt_shape shapes[TNT__MAX_OP_IN];
    int64_t total = 0;
    for (int i = 0; i < g->n_inputs; i++) {
        shapes[i] = g->inputs[i];
        for (int d = 0; d < shapes[i].ndim; d++)
            if (shapes[i].dim[d] == TNT_DIM_NONE) shapes[i].dim[d] = 3;
        if ((total += tnt_shape_numel(shapes[i])) > MAX_RUN_FLOATS) return;
    }
    for (int w = 0; w < g->n_weights; w++)
        if ((total += tnt_shape_numel(g->weights[w].shape)) > MAX_RUN_FLOATS) return;
    tnt__opplan *p = tnt__opplan_create(g, shapes, true);
    if (!p) {
        FUZZ_CHECK(tnt_last_error()[0]);
        return;
    }
    total += (int64_t)(tnt__opplan_workspace(p) / sizeof(float));
    for (int k = 0; k < g->n_outputs; k++) total += tnt_shape_numel(tnt__opplan_shape(p, g->outputs[k]));
    if (total > MAX_RUN_FLOATS) {
        tnt__opplan_destroy(p);
        return;
    }
    const float *ins[TNT__MAX_OP_IN];
    float *in_store[TNT__MAX_OP_IN], *dins[TNT__MAX_OP_IN], *weights[TNT__MAX_OP_IN], *dweights[TNT__MAX_OP_IN];
    float *outs[TNT__MAX_OP_IN], *douts[TNT__MAX_OP_IN];
    for (int i = 0; i < g->n_inputs; i++) {
        int64_t n = tnt_shape_numel(shapes[i]);
        ins[i] = in_store[i] = filled(n, 0.25f), dins[i] = filled(n, 0);
    }
    for (int w = 0; w < g->n_weights; w++) {
        int64_t n = tnt_shape_numel(g->weights[w].shape);
        weights[w] = filled(n, 0.125f), dweights[w] = filled(n, 0);
    }
    for (int k = 0; k < g->n_outputs; k++) {
        int64_t n = tnt_shape_numel(tnt__opplan_shape(p, g->outputs[k]));
        outs[k] = filled(n, 0), douts[k] = filled(n, 0.5f);
    }
    void *ws = tnt__alloc(tnt__opplan_workspace(p) + 64);
    FUZZ_CHECK(ws);
    tnt__opstep st = {.inputs = ins, .weights = weights, .outputs = outs, .workspace = ws, .training = true, .seed = 7};
    if (tnt__opplan_forward(p, &st) != TNT_OK) {
        FUZZ_CHECK(tnt_last_error()[0]);
    } else if (tnt__opplan_backward(p, &st, (const float *const *)douts, dins, dweights) != TNT_OK) {
        FUZZ_CHECK(tnt_last_error()[0]);
    }
    tnt__free(ws);
    for (int i = 0; i < g->n_inputs; i++) free(in_store[i]), free(dins[i]);
    for (int w = 0; w < g->n_weights; w++) free(weights[w]), free(dweights[w]);
    for (int k = 0; k < g->n_outputs; k++) free(outs[k]), free(douts[k]);
    tnt__opplan_destroy(p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *s = malloc(size + 1);
    if (!s) return 0;
    memcpy(s, data, size);
    s[size] = '\0';
    tnt_opgraph *g = tnt_opgraph_from_json(s);
    free(s);
    if (!g) {
        FUZZ_CHECK(tnt_last_error()[0]); /* a failure must say why */
        return 0;
    }
    char *a = tnt_opgraph_to_json(g), *b = NULL;
    FUZZ_CHECK(a);
    tnt_opgraph *r = tnt_opgraph_from_json(a);
    FUZZ_CHECK(r && (b = tnt_opgraph_to_json(r)) && !strcmp(a, b)); /* round trip */
    free(a), free(b);
    tnt_opgraph_free(r);
    run(g);
    tnt_opgraph_free(g);
    return 0;
}

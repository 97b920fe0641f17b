/* test_mixed_precision_dist.c: a mixed_bfloat16 model trained data-parallel, run by ctest under
 * mpirun with 1 and 2 ranks. Each rank trains a serial copy (every sample, one process) and a
 * distributed one side by side, both mixed_bfloat16 (Conv2D, Dense and MultiHeadAttention in
 * bf16), and checks:
 *   - the gradient of one step equals the serial one within float32 rounding (1e-5 relative):
 *     ranks reduce float32 gradients (a bf16 allreduce would be off by ~4e-3);
 *   - after 3 epochs the weights and losses equal serial training within bf16 tolerance, and the
 *     weights are bitwise the same on every rank. */
#include "testutil.h"

#include "comm/comm.h"
#include "model/model.h"
#include "model/window.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { N = 96, BATCH = 16, T = 6, D = 8, CLASSES = 3 };
static float xs[N * T * D], ys[N];

static void make_data(void) {
    tu_fill(xs, N * T * D, 21);
    for (int i = 0; i < N; i++) {
        float s = 0, t = 0;
        for (int j = 0; j < T * D; j++) *(j % 2 ? &s : &t) += xs[i * T * D + j];
        ys[i] = s > 0.3f ? 2.0f : t > 0 ? 1.0f : 0.0f;
    }
}

/* (T, D) -> Conv1D(8, 3, same, relu) -> self-attention (2 heads of 4) + residual -> Flatten ->
 * Dense(12, relu) -> Dense(3, softmax), all made under the mixed_bfloat16 global policy. */
static tnt_model *model(void) {
    tu_ok(tnt_mixed_precision_set_global_policy("mixed_bfloat16"));
    tnt_graph *g = tnt_graph_new();
    tnt_ktensor in = tnt_graph_input(g, TNT_SHAPE(T, D), "in");
    tnt_ktensor c = tnt_call(g, tnt_conv1d(8, 3, &(tnt_layer_opts){.padding = TNT_PADDING_SAME, .activation = TNT_ACT_RELU}), in);
    tnt_ktensor a = tnt_call_attention(g, tnt_multi_head_attention(2, 4, NULL), c, c, (tnt_ktensor){-1}, (tnt_ktensor){-1}, false);
    tnt_ktensor s = tnt_call2(g, tnt_add(NULL), c, a);
    tnt_ktensor f = tnt_call(g, tnt_flatten(NULL), s);
    tnt_ktensor h = tnt_call(g, tnt_dense(12, &(tnt_layer_opts){.activation = TNT_ACT_RELU}), f);
    tnt_ktensor o = tnt_call(g, tnt_dense(CLASSES, &(tnt_layer_opts){.activation = TNT_ACT_SOFTMAX}), h);
    tnt_model *m = tnt_functional(g, 1, &in, 1, &o, "mixed");
    tnt_graph_free(g);
    tu_ok(tnt_mixed_precision_set_global_policy("float32"));
    assert_non_null(m);
    for (int i = 0; i < m->n_layers; i++) assert_string_equal(tnt_layer_dtype_policy(m->layers[i]), "mixed_bfloat16");
    return m;
}

/* Trains for epochs (steps_per_epoch 0: all); weights into w, the loss History into h. */
static tnt_model *train(bool dist, int epochs, int64_t steps, float *w, int64_t n, tnt_history **h) {
    tnt_model *m = model();
    if (dist) tu_ok(tnt_distribute(m));
    tu_ok(tnt_compile(m, &(tnt_compile_opts){.optimizer = tnt_adam(5e-3f), .loss = TNT_SPARSE_CATEGORICAL_CROSSENTROPY,
                                             .seed = 5}));
    tnt_dataset *ds = tnt_dataset_batch(tnt_dataset_from_arrays(xs, TNT_SHAPE(T, D), ys, TNT_SHAPE(), N, false), BATCH, false);
    tu_ok(tnt_fit(m, ds, &(tnt_fit_opts){.epochs = epochs, .steps_per_epoch = steps}, h));
    assert_int_equal(tnt_model_count_params(m), n);
    tu_ok(tnt_get_weights(m, w, n));
    tnt_dataset_free(ds);
    return m;
}

static double rel_diff(const float *a, const float *b, int64_t n) {
    double d = 0, s = 0;
    for (int64_t i = 0; i < n; i++) d += fabs((double)a[i] - b[i]), s += fabs((double)b[i]);
    return d / s;
}

static void test_gradients_reduced_in_float32(void **state) {
    (void)state;
    tnt_model *probe = model();
    const int64_t n = tnt_model_count_params(probe);
    tnt_model_free(probe);
    float *ws = malloc((size_t)n * sizeof(float)), *wd = malloc((size_t)n * sizeof(float));
    tnt_history *hs = NULL, *hd = NULL;
    tnt_model *s = train(false, 1, 1, ws, n, &hs), *d = train(true, 1, 1, wd, n, &hd);
    /* the step's gradient (a sum over the global batch): float32 sums in another order only; a
     * model leaving the node's window takes the sums into its own gradients (model/window.h) */
    tu_ok(tnt__model_detach_window(d));
    double e = rel_diff(d->grads, s->grads, n);
    if (e > 1e-5) fail_msg("rank %d of %d: reduced gradient off the serial one by %.3g (relative L1)", tnt_get_rank(), tnt_get_size(), e);
    assert_true(rel_diff(wd, ws, n) < 1e-5);
    tnt_model_free(s), tnt_model_free(d);
    tnt_history_free(hs), tnt_history_free(hd);
    free(ws), free(wd);
}

static void test_training_equals_serial(void **state) {
    (void)state;
    enum { EPOCHS = 3 };
    tnt_model *probe = model();
    const int64_t n = tnt_model_count_params(probe);
    tnt_model_free(probe);
    float *ws = malloc((size_t)n * sizeof(float)), *wd = malloc((size_t)n * sizeof(float));
    tnt_history *hs = NULL, *hd = NULL;
    tnt_model_free(train(false, EPOCHS, 0, ws, n, &hs));
    tnt_model_free(train(true, EPOCHS, 0, wd, n, &hd));
    double e = rel_diff(wd, ws, n);
    if (e > 1e-3) fail_msg("rank %d of %d: weights off serial by %.3g (relative L1)", tnt_get_rank(), tnt_get_size(), e);
    for (int k = 0; k < EPOCHS; k++) {
        double ls = tnt_history_get(hs, "loss", k), ld = tnt_history_get(hd, "loss", k);
        if (fabs(ls - ld) > 1e-3 * ls) fail_msg("epoch %d: loss %.6f distributed, %.6f serial", k, ld, ls);
    }
    assert_true(tnt_history_get(hd, "loss", EPOCHS - 1) < tnt_history_get(hd, "loss", 0));
    float *master = malloc((size_t)n * sizeof(float));
    memcpy(master, wd, (size_t)n * sizeof(float));
    tu_ok(tnt__bcast_f32(master, n));
    assert_memory_equal(master, wd, (size_t)n * sizeof(float));
    tnt_history_free(hs), tnt_history_free(hd);
    free(ws), free(wd), free(master);
}

int main(int argc, char **argv) {
    if (tnt_init(&argc, &argv) != TNT_OK) {
        fprintf(stderr, "tnt_init: %s\n", tnt_last_error());
        return 1;
    }
    make_data();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gradients_reduced_in_float32),
        cmocka_unit_test(test_training_equals_serial),
    };
    int r = cmocka_run_group_tests(tests, NULL, NULL);
    tnt_finalize();
    return r;
}

/* test_traced_loss.c: a loss and a metric of the user's own as operation graphs
 * (tnt_model_set_loss_graph, tnt_model_add_metric_graph). A traced MSE trains to the same weights
 * and logs as the built-in one; a traced mean absolute error as a metric logs the built-in mae;
 * misuse fails naming what is wrong (before compile, a y_pred that is not the output's shape, a
 * result without the batch axis). */
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { N = 32, IN = 5, OUT = 3, BATCH = 8 };

static tnt_model *small_model(void) {
    tnt_model *m = tnt_sequential("traced_loss");
    assert_non_null(m);
    tu_ok(tnt_model_add(m, tnt_input_layer(TNT_SHAPE(IN), NULL)));
    tu_ok(tnt_model_add(m, tnt_dense(OUT, &(tnt_layer_opts){.activation = TNT_ACT_TANH})));
    return m;
}

/* mean over the last axis of op(y_pred - y_true); op "square" (MSE) or "abs" (MAE). The result
 * per sample, or (bad_reduce) reduced over the batch axis instead. */
static char *error_graph(const char *op, bool bad_reduce, int pred_width) {
    tnt_opgraph *g = tnt_opgraph_new();
    int yt = tnt_opgraph_input(g, TNT_SHAPE(TNT_DIM_NONE, OUT));
    int yp = tnt_opgraph_input(g, TNT_SHAPE(TNT_DIM_NONE, pred_width));
    int d = tnt_opgraph_op(g, "subtract", 2, (int[]){yp, yt}, NULL);
    int e = tnt_opgraph_op(g, op, 1, (int[]){d}, NULL);
    int r = tnt_opgraph_op(g, "mean", 1, (int[]){e}, bad_reduce ? "{\"axis\": 0}" : "{\"axis\": -1}");
    assert_true(r >= 0);
    tu_ok(tnt_opgraph_output(g, r));
    char *js = tnt_opgraph_to_json(g);
    assert_non_null(js);
    tnt_opgraph_free(g);
    return js;
}

static tnt_dataset *data(void) {
    static float x[N * IN], y[N * OUT];
    tu_fill(x, N * IN, 3);
    tu_fill(y, N * OUT, 4);
    return tnt_dataset_batch(tnt_dataset_from_arrays(x, TNT_SHAPE(IN), y, TNT_SHAPE(OUT), N, true), BATCH, false);
}

static tnt_history *train(tnt_model *m, const float *w0, int64_t n) {
    tu_ok(tnt_set_weights(m, w0, n));
    tnt_dataset *ds = data();
    tnt_history *h = NULL;
    tu_ok(tnt_fit(m, ds, &(tnt_fit_opts){.epochs = 2, .verbose = 0}, &h));
    tnt_dataset_free(ds);
    return h;
}

static void test_traced_mse_trains_as_builtin(void **state) {
    (void)state;
    tnt_model *a = small_model(), *b = small_model();
    tu_ok(tnt_compile(a, &(tnt_compile_opts){.optimizer = tnt_sgd(0.1f), .loss = TNT_MEAN_SQUARED_ERROR,
                                             .metrics = "mae", .seed = 7}));
    tu_ok(tnt_compile(b, &(tnt_compile_opts){.optimizer = tnt_sgd(0.1f), .loss = TNT_MEAN_SQUARED_ERROR, .seed = 7}));
    char *mse = error_graph("square", false, OUT), *mae = error_graph("abs", false, OUT);
    tu_ok(tnt_model_set_loss_graph(b, 0, mse));
    tu_ok(tnt_model_add_metric_graph(b, "my_mae", 0, mae));
    int64_t n = tnt_model_count_params(a);
    float *w0 = malloc((size_t)n * sizeof *w0), *wa = malloc((size_t)n * sizeof *wa), *wb = malloc((size_t)n * sizeof *wb);
    tu_fill(w0, n, 9);
    for (int64_t i = 0; i < n; i++) w0[i] *= 0.5f;
    tnt_history *ha = train(a, w0, n), *hb = train(b, w0, n);
    for (int e = 0; e < 2; e++) {
        double la = tnt_history_get(ha, "loss", e), lb = tnt_history_get(hb, "loss", e);
        assert_true(fabs(la - lb) <= 1e-6 * fabs(la));
        double ma = tnt_history_get(ha, "mae", e), mb = tnt_history_get(hb, "my_mae", e);
        assert_true(fabs(ma - mb) <= 1e-6 * fabs(ma));
    }
    tu_ok(tnt_get_weights(a, wa, n));
    tu_ok(tnt_get_weights(b, wb, n));
    tu_assert_close(wb, wa, n, 1e-6, 1e-7, "weights after 2 epochs");
    tnt_history_free(ha);
    tnt_history_free(hb);
    free(w0), free(wa), free(wb), free(mse), free(mae);
    tnt_model_free(a);
    tnt_model_free(b);
}

static void test_misuse_is_named(void **state) {
    (void)state;
    tnt_model *m = small_model();
    char *good = error_graph("square", false, OUT), *wide = error_graph("square", false, OUT + 1),
         *batchless = error_graph("square", true, OUT);
    assert_int_equal(tnt_model_set_loss_graph(m, 0, good), TNT_ERR_STATE);
    tu_error_contains("not compiled");
    tu_ok(tnt_compile(m, &(tnt_compile_opts){.optimizer = tnt_sgd(0.1f), .loss = TNT_MEAN_SQUARED_ERROR}));
    assert_int_equal(tnt_model_set_loss_graph(m, 1, good), TNT_ERR_ARG);
    tu_error_contains("output 1");
    assert_int_equal(tnt_model_set_loss_graph(m, 0, wide), TNT_ERR_SHAPE);
    tu_error_contains("y_pred");
    assert_int_equal(tnt_model_set_loss_graph(m, 0, "{\"format\": \"nope\"}"), TNT_ERR_FORMAT);
    tu_ok(tnt_model_set_loss_graph(m, 0, batchless));
    tnt_dataset *ds = data();
    assert_int_not_equal(tnt_fit(m, ds, &(tnt_fit_opts){.epochs = 1, .verbose = 0}, NULL), TNT_OK);
    tu_error_contains("expected the loss per sample");
    tnt_dataset_free(ds);
    free(good), free(wide), free(batchless);
    tnt_model_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_traced_mse_trains_as_builtin),
        cmocka_unit_test(test_misuse_is_named),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

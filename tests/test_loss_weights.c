/* test_loss_weights.c: Keras's loss_weights on two-output models. The gradient fit computes with
 * weights (2, 0.5) against central differences of the hand-weighted loss 2 * loss_a + 0.5 *
 * loss_b (computed here from the outputs, outside fit), for MSE and for softmax heads with sparse
 * cross-entropy (the fused logits path); that gradient is also 2 g_a + 0.5 g_b of the runs with
 * weights (1, 0) and (0, 1); "loss" is the weighted sum while "<output>_loss" stays unweighted;
 * the weights survive .h5 and .keras round trips; a compile_config names them as a list or a dict
 * by output; bad weights fail naming the value. */
#include "testutil.h"

#include "io/keras_io.h"
#include "model/model.h"
#include "objectives/loss.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { N = 8, IN = 5 };

static tnt_layer *dense(int units, tnt_activation act, const char *name) {
    return tnt_dense(units, &(tnt_layer_opts){.activation = act, .name = name});
}

/* in(5) -> Dense(6, tanh) -> out_a Dense(3, act) and out_b Dense(4, act). */
static tnt_model *two_heads(tnt_activation act) {
    tnt_graph *g = tnt_graph_new();
    tnt_ktensor in = tnt_graph_input(g, TNT_SHAPE(IN), NULL);
    tnt_ktensor h = tnt_call(g, dense(6, TNT_ACT_TANH, "trunk"), in);
    tnt_ktensor outs[2] = {tnt_call(g, dense(3, act, "out_a"), h), tnt_call(g, dense(4, act, "out_b"), h)};
    tnt_model *m = tnt_functional(g, 1, &in, 2, outs, "two_heads");
    tnt_graph_free(g);
    assert_non_null(m);
    return m;
}

static void compile_weighted(tnt_model *m, tnt_loss_kind loss, const float *w) {
    tu_ok(tnt_compile(m, &(tnt_compile_opts){.optimizer = tnt_sgd(0.1f), .loss = loss, .seed = 7,
                                             .loss_weights = w, .n_loss_weights = w ? 2 : 0}));
}

/* Label values per sample: one class index per sparse output, else the output's size. */
static int64_t labels_of(const tnt_model *m, int k) {
    return m->loss == TNT_SPARSE_CATEGORICAL_CROSSENTROPY ? 1 : tnt_shape_numel(tnt_model_output_shape_at(m, k));
}

/* The hand-weighted mean loss w[0] * loss_a + w[1] * loss_b from a forward pass (no gradient). */
static double weighted_loss(tnt_model *m, const float *x, const float *y, const float *w) {
    tnt__plan *p = tnt__model_plan(m, N);
    assert_non_null(p);
    float *pred;
    tnt__step st = {.global_n = N, .training = true, .seed = tnt__model_training_seed(m)};
    tu_ok(tnt__model_forward(m, p, x, &st, &pred));
    int64_t per = labels_of(m, 0) + labels_of(m, 1), col = 0;
    double total = 0;
    for (int k = 0; k < 2; k++) {
        int64_t c = tnt_shape_numel(tnt_model_output_shape_at(m, k)), lk = labels_of(m, k);
        float yk[N * 8];
        for (int i = 0; i < N; i++) memcpy(yk + i * lk, y + i * per + col, (size_t)lk * sizeof(float));
        col += lk;
        double sum;
        tu_ok(tnt__loss_compute(m->loss, m->fused_output_loss[k], N, c, tnt__plan_loss_input(m, p, k, x), yk, 1.0, NULL, &sum));
        total += w[k] * sum / N;
    }
    return total;
}

/* One fit step over one batch of N; m->grads then holds its gradient; the weights are put back. */
static tnt_logs fit_one_batch(tnt_model *m, const float *x, const float *y, float *grads) {
    int64_t np = tnt_model_count_params(m), per = labels_of(m, 0) + labels_of(m, 1);
    float *keep = malloc((size_t)np * sizeof(float));
    tu_ok(tnt_get_weights(m, keep, np));
    tnt_dataset *ds = tnt_dataset_batch(tnt_dataset_from_arrays(x, TNT_SHAPE(IN), y, TNT_SHAPE(per), N, true), N, false);
    tnt_history *h;
    tu_ok(tnt_fit(m, ds, &(tnt_fit_opts){.epochs = 1}, &h));
    tnt_logs logs = *tnt_history_logs(h, 0);
    memcpy(grads, m->grads, (size_t)m->n_params * sizeof(float));
    tu_ok(tnt_set_weights(m, keep, np));
    tnt_history_free(h);
    tnt_dataset_free(ds);
    free(keep);
    return logs;
}

static double log_of(const tnt_logs *logs, const char *name) {
    double v = NAN;
    if (!tnt_logs_get(logs, name, &v)) fail_msg("logs have no \"%s\"", name);
    return v;
}

static void check_weighted(tnt_loss_kind loss, tnt_activation act) {
    const float w[2] = {2.0f, 0.5f}, only_a[2] = {1, 0}, only_b[2] = {0, 1};
    float x[N * IN], y[N * 7];
    tu_fill(x, N * IN, 3);
    tu_fill(y, N * 7, 4);
    if (loss == TNT_SPARSE_CATEGORICAL_CROSSENTROPY) /* class indices: out_a of 3 classes, out_b of 4 */
        for (int i = 0; i < N; i++) y[i * 2] = (float)(i % 3), y[i * 2 + 1] = (float)((i * 5 + 1) % 4);
    tnt_model *m = two_heads(act);
    compile_weighted(m, loss, w);
    if (act == TNT_ACT_SOFTMAX) assert_true(m->fused_output_loss[0] && m->fused_output_loss[1]);
    int64_t np = m->n_params;
    float *g = malloc((size_t)np * sizeof(float)), *ga = malloc((size_t)np * sizeof(float)),
          *gb = malloc((size_t)np * sizeof(float));
    tnt_logs logs = fit_one_batch(m, x, y, g);

    /* the gradient against central differences of the hand-weighted loss */
    double worst = 0;
    for (int64_t i = 0; i < np; i++) {
        float keep = m->params[i];
        const float h = 1e-2f;
        m->params[i] = keep + h;
        double lp = weighted_loss(m, x, y, w);
        m->params[i] = keep - h;
        double lm = weighted_loss(m, x, y, w);
        m->params[i] = keep;
        double fd = (lp - lm) / (2.0 * h), err = fabs(fd - g[i]) / (fabs(fd) + 1e-2);
        if (err > worst) worst = err;
        if (err > 2e-2) fail_msg("param %lld: fit's gradient %g, finite differences %g", (long long)i, g[i], fd);
    }
    /* the logged loss is the weighted sum of the unweighted per-output losses */
    double la = log_of(&logs, "out_a_loss"), lb = log_of(&logs, "out_b_loss"), total = log_of(&logs, "loss");
    assert_true(fabs(total - (2.0 * la + 0.5 * lb)) <= 1e-12 * fabs(total));
    assert_true(fabs(total - weighted_loss(m, x, y, w)) <= 1e-5 * fabs(total));

    /* (1, 0) and (0, 1): the same per-output losses, and g = 2 g_a + 0.5 g_b */
    compile_weighted(m, loss, only_a);
    tnt_logs la_logs = fit_one_batch(m, x, y, ga);
    compile_weighted(m, loss, only_b);
    tnt_logs lb_logs = fit_one_batch(m, x, y, gb);
    assert_true(log_of(&la_logs, "out_a_loss") == la && log_of(&lb_logs, "out_b_loss") == lb);
    assert_true(log_of(&la_logs, "loss") == la && log_of(&lb_logs, "loss") == lb);
    for (int64_t i = 0; i < np; i++) ga[i] = 2.0f * ga[i] + 0.5f * gb[i];
    tu_assert_close(g, ga, np, 1e-5, 1e-7, "gradient with weights (2, 0.5) against 2 g_a + 0.5 g_b");
    /* weight 0: out_b's own kernel and bias get no gradient */
    compile_weighted(m, loss, only_a);
    fit_one_batch(m, x, y, ga);
    const char *name;
    tnt_shape shape;
    float *data;
    for (int i = 0; i < tnt_model_num_weights(m); i++) {
        tu_ok(tnt_model_weight(m, i, &name, &shape, &data));
        if (strncmp(name, "out_b/", 6)) continue;
        const float *gw = ga + (data - m->params); /* the gradient buffer is laid out as the parameters' */
        for (int64_t j = 0; j < tnt_shape_numel(shape); j++)
            if (gw[j] != 0) fail_msg("%s: gradient %g with loss weight 0", name, gw[j]);
    }
    free(g), free(ga), free(gb);
    tnt_model_free(m);
}

static void test_mse_weighted_gradients(void **state) {
    (void)state;
    check_weighted(TNT_MEAN_SQUARED_ERROR, TNT_ACT_LINEAR);
}

static void test_sparse_ce_fused_weighted_gradients(void **state) {
    (void)state;
    check_weighted(TNT_SPARSE_CATEGORICAL_CROSSENTROPY, TNT_ACT_SOFTMAX);
}

static void check_weights(const tnt_model *m, float a, float b) {
    char met[64];
    tnt_compile_opts co;
    tu_ok(tnt_model_compile_opts(m, &co, met, sizeof met));
    assert_non_null(co.loss_weights);
    assert_int_equal(co.n_loss_weights, 2);
    assert_true(co.loss_weights[0] == a && co.loss_weights[1] == b);
}

/* tnt_save_model writes them (.h5 training_config, .keras compile_config) and load reads them. */
static void test_files_round_trip(void **state) {
    (void)state;
    const float w[2] = {2.0f, 0.5f};
    const char *paths[2] = {tu_tmp_path("lw.h5"), tu_tmp_path("lw.keras")};
    for (int f = 0; f < 2; f++) {
        tnt_model *m = two_heads(TNT_ACT_LINEAR);
        compile_weighted(m, TNT_MEAN_SQUARED_ERROR, w);
        tu_ok(tnt_save_model(m, paths[f], NULL));
        tnt_model *back = tnt_load_model(paths[f], true);
        if (!back) fail_msg("load %s: %s", paths[f], tnt_last_error());
        check_weights(back, 2.0f, 0.5f);
        tnt_model_free(back), tnt_model_free(m);
    }
    /* no loss_weights given: none reported, and the file says null */
    tnt_model *m = two_heads(TNT_ACT_LINEAR);
    compile_weighted(m, TNT_MEAN_SQUARED_ERROR, NULL);
    char met[64];
    tnt_compile_opts co;
    tu_ok(tnt_model_compile_opts(m, &co, met, sizeof met));
    assert_null(co.loss_weights);
    cJSON *tc;
    tu_ok(tnt__training_config(m, &tc));
    assert_true(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(tc, "loss_weights")));
    cJSON_Delete(tc);
    tnt_model_free(m);
}

/* Compiles a fresh two-output model from a compile_config text; returns its status. */
static tnt_status from_config(const char *json, tnt_model **out) {
    tnt_model *m = two_heads(TNT_ACT_LINEAR);
    cJSON *c = cJSON_Parse(json);
    assert_non_null(c);
    tnt_status s = tnt__compile_from_config(m, c, "cfg");
    cJSON_Delete(c);
    if (out) *out = m;
    else tnt_model_free(m);
    return s;
}

static void test_config_forms_and_errors(void **state) {
    (void)state;
    tnt_model *m;
    /* a dict by output name (Keras: an output left out weighs 1) and a list */
    tu_ok(from_config("{\"loss\": \"mse\", \"optimizer\": \"sgd\", \"loss_weights\": {\"out_b\": 0.25}}", &m));
    check_weights(m, 1.0f, 0.25f);
    tnt_model_free(m);
    tu_ok(from_config("{\"loss\": \"mse\", \"optimizer\": \"sgd\", \"loss_weights\": [3, 0]}", &m));
    check_weights(m, 3.0f, 0.0f);
    tnt_model_free(m);
    assert_int_equal(from_config("{\"loss\": \"mse\", \"optimizer\": \"sgd\", \"loss_weights\": {\"out_c\": 1}}", NULL),
                     TNT_ERR_ARG);
    tu_error_contains("loss_weights names \"out_c\", which is not an output of model \"two_heads\" (its outputs: out_a, out_b)");
    assert_int_equal(from_config("{\"loss\": \"mse\", \"optimizer\": \"sgd\", \"loss_weights\": [1, 2, 3]}", NULL),
                     TNT_ERR_ARG);
    tu_error_contains("load_model cfg: compile: model \"two_heads\": loss_weights has 3 values, the model has 2 outputs (out_a, out_b)");
    assert_int_equal(from_config("{\"loss\": \"mse\", \"optimizer\": \"sgd\", \"loss_weights\": [1, -2]}", NULL),
                     TNT_ERR_ARG);
    tu_error_contains("loss_weights[1] (output out_b) is -2: expected a finite number >= 0");
    assert_int_equal(from_config("{\"loss\": \"mse\", \"optimizer\": \"sgd\", \"loss_weights\": [1, \"x\"]}", NULL),
                     TNT_ERR_FORMAT);
    tu_error_contains("loss_weights[1] is not a number");
    assert_int_equal(from_config("{\"loss\": \"mse\", \"optimizer\": \"sgd\", \"loss_weights\": \"x\"}", NULL),
                     TNT_ERR_FORMAT);
    tu_error_contains("loss_weights is neither a list, a dict nor a number");

    /* the C API: a count that differs, NULL with a count, a NaN, an infinity */
    m = two_heads(TNT_ACT_LINEAR);
    const float three[3] = {1, 1, 1}, nan2[2] = {1, NAN}, inf2[2] = {INFINITY, 1};
    tnt_compile_opts co = {.optimizer = tnt_sgd(0.1f), .loss = TNT_MEAN_SQUARED_ERROR, .loss_weights = three, .n_loss_weights = 3};
    assert_int_equal(tnt_compile(m, &co), TNT_ERR_ARG);
    tu_error_contains("loss_weights has 3 values, the model has 2 outputs (out_a, out_b)");
    co = (tnt_compile_opts){.optimizer = tnt_sgd(0.1f), .loss = TNT_MEAN_SQUARED_ERROR, .n_loss_weights = 2};
    assert_int_equal(tnt_compile(m, &co), TNT_ERR_ARG);
    tu_error_contains("loss_weights is NULL with 2 values");
    co = (tnt_compile_opts){.optimizer = tnt_sgd(0.1f), .loss = TNT_MEAN_SQUARED_ERROR, .loss_weights = nan2, .n_loss_weights = 2};
    assert_int_equal(tnt_compile(m, &co), TNT_ERR_ARG);
    tu_error_contains("loss_weights[1] (output out_b) is nan");
    co = (tnt_compile_opts){.optimizer = tnt_sgd(0.1f), .loss = TNT_MEAN_SQUARED_ERROR, .loss_weights = inf2, .n_loss_weights = 2};
    assert_int_equal(tnt_compile(m, &co), TNT_ERR_ARG);
    tu_error_contains("loss_weights[0] (output out_a) is inf");
    assert_false(m->compiled);
    tnt_model_free(m);
}

/* One output: the weight scales the loss ("loss" is w * the unweighted loss). */
static void test_single_output(void **state) {
    (void)state;
    float x[N * IN], y[N * 2];
    tu_fill(x, N * IN, 5);
    tu_fill(y, N * 2, 6);
    double loss[2];
    for (int r = 0; r < 2; r++) {
        tnt_model *m = tnt_sequential("one");
        tu_ok(tnt_model_add(m, tnt_input_layer(TNT_SHAPE(IN), NULL)));
        tu_ok(tnt_model_add(m, dense(2, TNT_ACT_LINEAR, NULL)));
        const float w = 3.0f;
        tu_ok(tnt_compile(m, &(tnt_compile_opts){.optimizer = tnt_sgd(0.1f), .loss = TNT_MEAN_SQUARED_ERROR, .seed = 3,
                                                 .loss_weights = r ? &w : NULL, .n_loss_weights = r}));
        tnt_dataset *ds = tnt_dataset_batch(tnt_dataset_from_arrays(x, TNT_SHAPE(IN), y, TNT_SHAPE(2), N, true), N, false);
        tnt_logs logs;
        tu_ok(tnt_evaluate(m, ds, NULL, &logs));
        loss[r] = log_of(&logs, "loss");
        tnt_dataset_free(ds);
        tnt_model_free(m);
    }
    assert_true(fabs(loss[1] - 3.0 * loss[0]) <= 1e-12 * loss[1]);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mse_weighted_gradients),
        cmocka_unit_test(test_sparse_ce_fused_weighted_gradients),
        cmocka_unit_test(test_files_round_trip),
        cmocka_unit_test(test_config_forms_and_errors),
        cmocka_unit_test(test_single_output),
    };
    return cmocka_run_group_tests(tests, tu_tmpdir_setup, tu_tmpdir_teardown);
}

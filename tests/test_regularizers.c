/* test_regularizers.c: Keras regularizers and constraints. Training with weight and activity
 * penalties and MaxNorm/NonNeg constraints equals a float64 PyTorch rebuild (fixtures/
 * gen_regularizers.py): each step's reported loss, the weights after three SGD steps, evaluate's
 * loss. Constraints hold after training; the penalties and constraints round-trip through Keras
 * JSON (every spelling Keras writes) and .h5 files; bad values fail with clear errors. */
#include "testutil.h"
#include "json_harness.h"
#include "model/model.h"
#include "optimizers/optimizer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The model of gen_regularizers.py: Dense(4, tanh) and Dense(3) with their penalties and
 * constraints. */
static tnt_model *reference_model(void) {
    tnt_model *m = tnt_sequential("m");
    tu_ok(tnt_model_add(m, tnt_input_layer(TNT_SHAPE(5), NULL)));
    tnt_layer *d1 = tnt_dense(4, &(tnt_layer_opts){.name = "d1", .activation = TNT_ACT_TANH});
    tnt_layer *d2 = tnt_dense(3, &(tnt_layer_opts){.name = "d2"});
    tu_ok(tnt_layer_set_regularizer(d1, "kernel_regularizer", TNT_REG_L2, 0, 0.01f));
    tu_ok(tnt_layer_set_regularizer(d1, "bias_regularizer", TNT_REG_L1, 0.02f, 0));
    tu_ok(tnt_layer_set_regularizer(d1, "activity_regularizer", TNT_REG_L2, 0, 0.05f));
    tu_ok(tnt_layer_set_constraint(d1, "kernel_constraint",
                                   &(tnt_constraint){.kind = TNT_MAX_NORM, .max_value = 0.6f}));
    tu_ok(tnt_layer_set_regularizer(d2, "kernel_regularizer", TNT_REG_L1L2, 0.01f, 0.02f));
    tu_ok(tnt_layer_set_regularizer(d2, "activity_regularizer", TNT_REG_L1, 0.03f, 0));
    tu_ok(tnt_layer_set_constraint(d2, "bias_constraint", &(tnt_constraint){.kind = TNT_NON_NEG}));
    tu_ok(tnt_model_add(m, d1));
    tu_ok(tnt_model_add(m, d2));
    return m;
}

static void compile_sgd(tnt_model *m) {
    tu_ok(tnt_compile(m, &(tnt_compile_opts){.optimizer = tnt_sgd(0.1f), .loss = TNT_MEAN_SQUARED_ERROR}));
}

static tnt_dataset *rows(const float *x, const float *y, int64_t from, int64_t n) {
    return tnt_dataset_batch(tnt_dataset_from_arrays(x + from * 5, TNT_SHAPE(5), y + from * 3, TNT_SHAPE(3), n, false),
                             n, false);
}

/* Three steps of one batch each: fit reports data loss plus penalties, as Keras. */
static void test_training_equals_pytorch(void **state) {
    (void)state;
    tnt_shape s;
    float *x = tu_load("reg_x", &s), *y = tu_load("reg_y", &s), *w0 = tu_load("reg_w0", &s);
    float *w3 = tu_load("reg_w3", &s), *losses = tu_load("reg_losses", &s);
    tnt_model *m = reference_model();
    compile_sgd(m);
    int64_t n = tnt_model_count_params(m);
    assert_int_equal(n, 5 * 4 + 4 + 4 * 3 + 3);
    tu_ok(tnt_set_weights(m, w0, n));
    for (int step = 0; step < 3; step++) {
        tnt_dataset *ds = rows(x, y, 2 * step, 2);
        tnt_history *h = NULL;
        tu_ok(tnt_fit(m, ds, &(tnt_fit_opts){.epochs = 1}, &h));
        float loss = (float)tnt_history_get(h, "loss", 0);
        tu_assert_close(&loss, &losses[step], 1, 1e-5, 1e-6, "loss of the step");
        tnt_history_free(h);
        tnt_dataset_free(ds);
    }
    float *w = malloc((size_t)n * sizeof *w);
    tu_ok(tnt_get_weights(m, w, n));
    tu_assert_close(w, w3, n, 0, 1e-5, "weights after 3 SGD steps");
    tnt_dataset *all = rows(x, y, 0, 6);
    tnt_logs logs;
    tu_ok(tnt_evaluate(m, all, NULL, &logs));
    double ev = 0;
    assert_true(tnt_logs_get(&logs, "loss", &ev));
    float evf = (float)ev;
    tu_assert_close(&evf, &losses[3], 1, 1e-5, 1e-6, "evaluate's loss");
    tnt_dataset_free(all);
    tnt_model_free(m);
    free(w), free(x), free(y), free(w0), free(w3), free(losses);
}

/* Longer training with a large learning rate: every column norm of the MaxNorm kernel stays
 * within its bound, and the NonNeg bias non-negative, after every epoch. */
static void test_constraints_hold_after_training(void **state) {
    (void)state;
    float x[64 * 5], y[64 * 3];
    tu_fill(x, 64 * 5, 3);
    tu_fill(y, 64 * 3, 4);
    for (int i = 0; i < 64 * 3; i++) y[i] = 3.0f * y[i] - 1.0f; /* pushes the bias negative */
    tnt_model *m = reference_model();
    compile_sgd(m);
    tnt_dataset *ds = tnt_dataset_batch(tnt_dataset_from_arrays(x, TNT_SHAPE(5), y, TNT_SHAPE(3), 64, false), 8, false);
    const char *name;
    tnt_shape shape;
    float *kernel, *bias;
    bool saw_zero_bias = false;
    for (int epoch = 0; epoch < 5; epoch++) {
        tu_ok(tnt_fit(m, ds, &(tnt_fit_opts){.epochs = 1}, NULL));
        tu_ok(tnt_model_weight(m, 0, &name, &shape, &kernel));
        assert_int_equal(shape.dim[0], 5);
        for (int j = 0; j < 4; j++) {
            double norm = 0;
            for (int i = 0; i < 5; i++) norm += (double)kernel[i * 4 + j] * kernel[i * 4 + j];
            if (sqrt(norm) > 0.6 + 1e-6) fail_msg("epoch %d: column %d has norm %g > 0.6", epoch, j, sqrt(norm));
        }
        tu_ok(tnt_model_weight(m, 3, &name, &shape, &bias));
        for (int j = 0; j < 3; j++) {
            if (bias[j] < 0) fail_msg("epoch %d: NonNeg bias[%d] = %g", epoch, j, (double)bias[j]);
            saw_zero_bias |= bias[j] == 0;
        }
    }
    assert_true(saw_zero_bias); /* the constraint acted, not just the data */
    tnt_dataset_free(ds);
    tnt_model_free(m);
}

/* A frozen layer is none of the optimizer's variables (Keras): trained for an epoch, then frozen,
 * through fits with AdamW (weight decay) its weights stay bitwise as they were, though its
 * MaxNorm constraint and its L2 penalty would move them, and so do its optimizer slots (Adam's
 * moments would decay), while the other layer trains; thawed, it trains again. */
static void test_frozen_layer_out_of_the_update(void **state) {
    (void)state;
    float x[64 * 5], y[64 * 3];
    tu_fill(x, 64 * 5, 5);
    tu_fill(y, 64 * 3, 6);
    tnt_model *m = reference_model();
    tnt_layer *d1 = tnt_model_get_layer(m, "d1");
    tu_ok(tnt_compile(m, &(tnt_compile_opts){.optimizer = tnt_adamw(0.05f, 0.2f), .loss = TNT_MEAN_SQUARED_ERROR}));
    tnt_dataset *ds = tnt_dataset_batch(tnt_dataset_from_arrays(x, TNT_SHAPE(5), y, TNT_SHAPE(3), 64, false), 8, false);
    tu_ok(tnt_fit(m, ds, &(tnt_fit_opts){.epochs = 1}, NULL));
    tu_ok(tnt_layer_set_constraint(d1, "kernel_constraint", &(tnt_constraint){.kind = TNT_MAX_NORM, .max_value = 0.05f}));
    tu_ok(tnt_layer_set_trainable(d1, false));
    int64_t n = tnt_model_count_params(m);
    float *before = malloc((size_t)n * sizeof(float)), *after = malloc((size_t)n * sizeof(float));
    tu_ok(tnt_get_weights(m, before, n));
    const tnt_optimizer *o = tnt_model_optimizer(m);
    const int64_t d1_n = 5 * 4 + 4;
    const int64_t at[2] = {d1->weights[0].grad - m->grads, d1->weights[1].grad - m->grads}; /* kernel, bias */
    float slots[2][2][5 * 4];
    for (int k = 0; k < 2; k++)
        for (int j = 0; j < 2; j++) memcpy(slots[k][j], o->slots[k] + at[j], (j ? 4 : 20) * sizeof(float));
    tu_ok(tnt_fit(m, ds, &(tnt_fit_opts){.epochs = 2}, NULL));
    tu_ok(tnt_get_weights(m, after, n));
    assert_memory_equal(before, after, (size_t)d1_n * sizeof(float)); /* d1's kernel and bias, Keras order */
    double moved = 0;
    for (int64_t i = d1_n; i < n; i++) moved += fabs((double)after[i] - before[i]);
    assert_true(moved > 1e-3);
    assert_int_equal(o->n_slots, 2);
    for (int k = 0; k < 2; k++)
        for (int j = 0; j < 2; j++) assert_memory_equal(slots[k][j], o->slots[k] + at[j], (j ? 4 : 20) * sizeof(float));
    /* thawed again: it trains from the next fit on */
    tu_ok(tnt_layer_set_trainable(d1, true));
    tu_ok(tnt_fit(m, ds, &(tnt_fit_opts){.epochs = 1}, NULL));
    tu_ok(tnt_get_weights(m, before, n));
    moved = 0;
    for (int64_t i = 0; i < d1_n; i++) moved += fabs((double)after[i] - before[i]);
    assert_true(moved > 1e-3);
    free(before), free(after);
    tnt_dataset_free(ds);
    tnt_model_free(m);
}

/* One step on zeros leaves the kernels' gradients zero: the weights after it are the constraints'
 * projections, UnitNorm over a Conv2D kernel's axes [0, 1, 2] and MinMaxNorm over a Dense
 * kernel's axis 0, as gen_regularizers.py computes them. */
static void test_norm_constraints_equal_numpy(void **state) {
    (void)state;
    tnt_shape s;
    float *w0 = tu_load("reg_constraints_w0", &s), *w1 = tu_load("reg_constraints_w1", &s);
    tnt_model *m = tnt_sequential("m");
    tu_ok(tnt_model_add(m, tnt_input_layer(TNT_SHAPE(3, 3, 3), NULL)));
    tnt_layer *conv = tnt_conv2d(4, 2, 2, &(tnt_layer_opts){.no_bias = true});
    tnt_layer *dense = tnt_dense(4, &(tnt_layer_opts){.no_bias = true});
    tu_ok(tnt_layer_set_constraint(conv, "kernel_constraint",
                                   &(tnt_constraint){.kind = TNT_UNIT_NORM, .n_axes = 3, .axes = {0, 1, 2}}));
    tu_ok(tnt_layer_set_constraint(dense, "kernel_constraint",
                                   &(tnt_constraint){.kind = TNT_MIN_MAX_NORM, .min_value = 0.5f, .max_value = 1.5f,
                                                     .rate = 0.7f}));
    tu_ok(tnt_model_add(m, conv));
    tu_ok(tnt_model_add(m, tnt_flatten(NULL)));
    tu_ok(tnt_model_add(m, dense));
    compile_sgd(m);
    int64_t n = tnt_model_count_params(m);
    assert_int_equal(n, 2 * 2 * 3 * 4 + 16 * 4);
    tu_ok(tnt_set_weights(m, w0, n));
    float x[2 * 27] = {0}, y[2 * 4] = {1, 2, 3, 4, 5, 6, 7, 8};
    tnt_dataset *ds = tnt_dataset_batch(tnt_dataset_from_arrays(x, TNT_SHAPE(3, 3, 3), y, TNT_SHAPE(4), 2, false), 2, false);
    tu_ok(tnt_fit(m, ds, &(tnt_fit_opts){.epochs = 1}, NULL));
    float *w = malloc((size_t)n * sizeof *w);
    tu_ok(tnt_get_weights(m, w, n));
    tu_assert_close(w, w1, n, 1e-6, 1e-7, "constrained kernels");
    tnt_dataset_free(ds);
    tnt_model_free(m);
    free(w), free(w0), free(w1);
}

/* ActivityRegularization(l1 0.1, l2 0.2) on the input and an LSTM's recurrent_regularizer: both
 * penalties join evaluate's loss (the activity one divided by the batch size). */
static void test_activity_layer_and_recurrent_penalty(void **state) {
    (void)state;
    tnt_model *m = tnt_sequential("m");
    tu_ok(tnt_model_add(m, tnt_input_layer(TNT_SHAPE(2, 3), NULL)));
    tu_ok(tnt_model_add(m, tnt_activity_regularization(0.1f, 0.2f, NULL)));
    tnt_layer *lstm = tnt_lstm(2, &(tnt_rnn_opts){0});
    tu_ok(tnt_layer_set_regularizer(lstm, "recurrent_regularizer", TNT_REG_L2, 0, 0.3f));
    tu_ok(tnt_model_add(m, lstm));
    compile_sgd(m);
    float x[2 * 6], y[2 * 2] = {0};
    tu_fill(x, 12, 9);
    tnt_dataset *ds = tnt_dataset_batch(tnt_dataset_from_arrays(x, TNT_SHAPE(2, 3), y, TNT_SHAPE(2), 2, false), 2, false);
    double expected = 0, with = 0, without = 0;
    for (int i = 0; i < 12; i++) expected += (0.1 * fabs(x[i]) + 0.2 * x[i] * x[i]) / 2;
    const char *name;
    tnt_shape s;
    float *rk;
    tu_ok(tnt_model_weight(m, 1, &name, &s, &rk));
    assert_non_null(strstr(name, "recurrent_kernel"));
    for (int64_t i = 0; i < tnt_shape_numel(s); i++) expected += 0.3f * (double)rk[i] * rk[i];
    tnt_logs logs;
    tu_ok(tnt_evaluate(m, ds, NULL, &logs));
    assert_true(tnt_logs_get(&logs, "loss", &with));
    tu_ok(tnt_layer_set_regularizer(lstm, "recurrent_regularizer", TNT_REG_NONE, 0, 0));
    assert_int_equal(tnt_layer_set_regularizer(tnt_model_get_layer(m, "activity_regularization"),
                                               "activity_regularizer", TNT_REG_NONE, 0, 0),
                     TNT_ERR_ARG);
    tu_error_contains("has no \"activity_regularizer\""); /* its penalty is its l1 and l2 */
    tnt_model *plain = tnt_sequential("plain");
    tu_ok(tnt_model_add(plain, tnt_input_layer(TNT_SHAPE(2, 3), NULL)));
    tnt_layer *lstm2 = tnt_lstm(2, &(tnt_rnn_opts){0});
    tu_ok(tnt_model_add(plain, lstm2));
    compile_sgd(plain);
    int64_t n = tnt_model_count_params(m);
    float *w = malloc((size_t)n * sizeof *w);
    tu_ok(tnt_get_weights(m, w, n));
    tu_ok(tnt_set_weights(plain, w, n));
    tu_ok(tnt_evaluate(plain, ds, NULL, &logs));
    assert_true(tnt_logs_get(&logs, "loss", &without));
    if (fabs(with - without - expected) > 1e-5 * expected)
        fail_msg("loss %.8g, without penalties %.8g: expected a difference of %.8g", with, without, expected);
    free(w);
    tnt_dataset_free(ds);
    tnt_model_free(plain);
    tnt_model_free(m);
}

/* MultiHeadAttention's kernel_regularizer acts on its four kernels (query/kernel, ...), as Keras
 * passes it to each projection: on zeros with zero biases the loss is that penalty alone. */
static void test_attention_kernels_penalty(void **state) {
    (void)state;
    tnt_graph *g = tnt_graph_new();
    tnt_ktensor q = tnt_graph_input(g, TNT_SHAPE(3, 4), NULL);
    tnt_layer *mha = tnt_multi_head_attention(2, 2, NULL);
    tu_ok(tnt_layer_set_regularizer(mha, "kernel_regularizer", TNT_REG_L2, 0, 0.5f));
    tnt_ktensor none = {-1}, y = tnt_call_attention(g, mha, q, q, none, none, false);
    tnt_model *m = tnt_functional(g, 1, &q, 1, &y, "m");
    if (!m) fail_msg("functional: %s", tnt_last_error());
    tnt_graph_free(g);
    compile_sgd(m);
    float x[3 * 4] = {0}, labels[3 * 4] = {0};
    tnt_dataset *ds = tnt_dataset_batch(tnt_dataset_from_arrays(x, TNT_SHAPE(3, 4), labels, TNT_SHAPE(3, 4), 1, false), 1, false);
    int kernels = 0;
    double expected = 0.5 * tu_sum_squares(m, "/kernel", &kernels), loss = 0;
    assert_int_equal(kernels, 4);
    tnt_logs logs;
    tu_ok(tnt_evaluate(m, ds, NULL, &logs));
    assert_true(tnt_logs_get(&logs, "loss", &loss));
    if (fabs(loss - expected) > 1e-6 * expected) fail_msg("loss %.8g, expected the penalty %.8g", loss, expected);
    tnt_dataset_free(ds);
    tnt_model_free(m);
}

/* Regularizers and constraints of a layer inside TimeDistributed or Bidirectional (from Keras
 * JSON): they act on the wrapper's copies of its weights (both directions of a Bidirectional), as
 * Keras counts the wrapped layer's losses; on zeros with zero labels the loss is the penalty alone.
 * They round-trip inside the wrapped layer's config. An activity regularizer inside a wrapper and
 * a backward_layer with other rules are refused. */
static void test_wrapped_penalties(void **state) {
    (void)state;
    static const char *td =
        "{\"class_name\": \"Sequential\", \"config\": {\"name\": \"s\", \"layers\": [{\"class_name\": "
        "\"TimeDistributed\", \"config\": {\"name\": \"td\", \"batch_input_shape\": [null, 3, 4], \"layer\": "
        "{\"class_name\": \"Dense\", \"config\": {\"name\": \"d\", \"units\": 2, \"kernel_regularizer\": {\"class_name\": "
        "\"L2\", \"config\": {\"l2\": 0.5}}, \"kernel_constraint\": {\"class_name\": \"NonNeg\", \"config\": {}}}}}}, "
        "{\"class_name\": \"Bidirectional\", \"config\": {\"name\": \"bi\", \"layer\": {\"class_name\": \"LSTM\", "
        "\"config\": {\"name\": \"l\", \"units\": 2, \"kernel_regularizer\": {\"class_name\": \"L2\", \"config\": "
        "{\"l2\": 0.1}}, \"recurrent_regularizer\": {\"class_name\": \"L1\", \"config\": {\"l1\": 0.2}}}}}}]}}";
    tnt_model *m = tnt_model_from_json(td);
    if (!m) fail_msg("from_json: %s", tnt_last_error());
    compile_sgd(m);
    float x[3 * 4] = {0}, labels[4] = {0};
    tnt_dataset *ds = tnt_dataset_batch(tnt_dataset_from_arrays(x, TNT_SHAPE(3, 4), labels, TNT_SHAPE(4), 1, false), 1, false);
    int nk = 0, nr = 0;
    double expected = 0.5 * tu_sum_squares(m, "td/kernel", &nk) + 0.1 * tu_sum_squares(m, "_l/kernel", &nr), loss = 0;
    assert_int_equal(nk, 1);
    assert_int_equal(nr, 2); /* forward_l/kernel and backward_l/kernel */
    for (int i = 0; i < tnt_model_num_weights(m); i++) {
        const char *name;
        tnt_shape sh;
        float *v;
        tu_ok(tnt_model_weight(m, i, &name, &sh, &v));
        if (strstr(name, "recurrent_kernel"))
            for (int64_t j = 0; j < tnt_shape_numel(sh); j++) expected += 0.2 * fabs(v[j]), nr++;
    }
    assert_int_equal(nr, 2 + 2 * 2 * 8);
    tnt_logs logs;
    tu_ok(tnt_evaluate(m, ds, NULL, &logs));
    assert_true(tnt_logs_get(&logs, "loss", &loss));
    if (fabs(loss - expected) > 1e-6 * expected) fail_msg("loss %.8g, expected the penalty %.8g", loss, expected);
    tu_ok(tnt_fit(m, ds, &(tnt_fit_opts){.epochs = 3}, NULL)); /* the penalty's gradient pulls; NonNeg holds */
    const char *name;
    tnt_shape sh;
    float *k;
    tu_ok(tnt_model_weight(m, 0, &name, &sh, &k));
    assert_non_null(strstr(name, "kernel"));
    for (int64_t j = 0; j < tnt_shape_numel(sh); j++) assert_true(k[j] >= 0.0f);
    char *json = to_json(m);
    const char *needles[] = {"\"layer\":{\"class_name\":\"Dense\"", "\"kernel_constraint\":{\"class_name\":\"NonNeg\"",
                             "\"recurrent_regularizer\":{\"class_name\":\"L1\",\"config\":{\"l1\":0.2}}"};
    for (size_t i = 0; i < sizeof needles / sizeof *needles; i++)
        if (!strstr(json, needles[i])) fail_msg("JSON lacks %s:\n%s", needles[i], json);
    free(json);
    free(round_trip(m));
    tnt_dataset_free(ds);

    tnt_layer *d = tnt_dense(2, &(tnt_layer_opts){.name = "d"});
    tu_ok(tnt_layer_set_regularizer(d, "activity_regularizer", TNT_REG_L2, 0, 0.1f));
    assert_null(tnt_time_distributed(d, NULL));
    tu_error_contains("TimeDistributed: the wrapped layer \"d\" has an activity_regularizer");
    tnt_layer *f = tnt_lstm(2, &(tnt_rnn_opts){0}), *b = tnt_lstm(2, &(tnt_rnn_opts){.go_backwards = true});
    tu_ok(tnt_layer_set_regularizer(f, "kernel_regularizer", TNT_REG_L2, 0, 0.1f));
    assert_null(tnt_bidirectional(f, b, TNT_MERGE_CONCAT, NULL));
    tu_error_contains("different regularizers or constraints");
}

/* The reference model's JSON spells every rule as Keras 2.3+ does, and reads back to itself. */
static void test_json_round_trip(void **state) {
    (void)state;
    char *json = round_trip(reference_model());
    const char *needles[] = {
        "\"kernel_regularizer\":{\"class_name\":\"L2\",\"config\":{\"l2\":0.01}}",
        "\"bias_regularizer\":{\"class_name\":\"L1\",\"config\":{\"l1\":0.02}}",
        "\"activity_regularizer\":{\"class_name\":\"L2\",\"config\":{\"l2\":0.05}}",
        "\"kernel_constraint\":{\"class_name\":\"MaxNorm\",\"config\":{\"max_value\":0.6,\"axis\":0}}",
        "\"kernel_regularizer\":{\"class_name\":\"L1L2\",\"config\":{\"l1\":0.01,\"l2\":0.02}}",
        "\"bias_constraint\":{\"class_name\":\"NonNeg\",\"config\":{}}",
        "\"bias_constraint\":null",
    };
    for (size_t i = 0; i < sizeof needles / sizeof *needles; i++)
        if (!strstr(json, needles[i])) fail_msg("JSON lacks %s:\n%s", needles[i], json);
    free(json);
}

/* Keras's other spellings: names, Keras 2.0's L1L2, TF 2.x's "l", Keras 3's module, axis lists. */
static void test_json_spellings(void **state) {
    (void)state;
    static const struct {
        const char *layer, *want;
    } cases[] = {
        {"{\"class_name\": \"Dense\", \"config\": {\"name\": \"d\", \"units\": 2, \"kernel_regularizer\": \"l2\"}}",
         "\"kernel_regularizer\":{\"class_name\":\"L2\",\"config\":{\"l2\":0.01}}"},
        {"{\"class_name\": \"Dense\", \"config\": {\"name\": \"d\", \"units\": 2, \"kernel_regularizer\": "
         "{\"class_name\": \"L1L2\", \"config\": {\"l1\": 0.0, \"l2\": 0.0005000000237487257}}}}",
         "\"kernel_regularizer\":{\"class_name\":\"L1L2\",\"config\":{\"l1\":0,\"l2\":0.0005}}"},
        {"{\"class_name\": \"Dense\", \"config\": {\"name\": \"d\", \"units\": 2, \"bias_regularizer\": "
         "{\"class_name\": \"L1\", \"config\": {\"l\": 0.25}}}}",
         "\"bias_regularizer\":{\"class_name\":\"L1\",\"config\":{\"l1\":0.25}}"},
        {"{\"class_name\": \"Dense\", \"config\": {\"name\": \"d\", \"units\": 2, \"kernel_regularizer\": "
         "{\"module\": \"keras.regularizers\", \"class_name\": \"L2\", \"config\": {\"l2\": 0.5}, \"registered_name\": null}}}",
         "\"kernel_regularizer\":{\"class_name\":\"L2\",\"config\":{\"l2\":0.5}}"},
        {"{\"class_name\": \"Conv2D\", \"config\": {\"name\": \"c\", \"filters\": 2, \"kernel_size\": [2, 2], "
         "\"kernel_constraint\": {\"class_name\": \"MinMaxNorm\", \"config\": {\"min_value\": 0.5, \"max_value\": 2, "
         "\"rate\": 0.5, \"axis\": [0, 1, 2]}}}}",
         "\"kernel_constraint\":{\"class_name\":\"MinMaxNorm\",\"config\":{\"min_value\":0.5,\"rate\":0.5,"
         "\"max_value\":2,\"axis\":[0,1,2]}}"},
        {"{\"class_name\": \"Dense\", \"config\": {\"name\": \"d\", \"units\": 2, \"kernel_constraint\": \"unit_norm\"}}",
         "\"kernel_constraint\":{\"class_name\":\"UnitNorm\",\"config\":{\"axis\":0}}"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        tnt_model *m = seq_from_layer_json(strstr(cases[i].layer, "Conv2D") ? "[null, 3, 3, 1]" : "[null, 5]",
                                           cases[i].layer);
        if (!m) fail_msg("case %zu: %s", i, tnt_last_error());
        char *json = to_json(m);
        if (!strstr(json, cases[i].want)) fail_msg("case %zu: JSON lacks %s:\n%s", i, cases[i].want, json);
        free(json);
        tnt_model_free(m);
    }
}

static void test_regularized_layer_classes(void **state) {
    (void)state;
    tnt_layer *lstm = tnt_lstm(3, &(tnt_rnn_opts){0});
    tu_ok(tnt_layer_set_regularizer(lstm, "recurrent_regularizer", TNT_REG_L2, 0, 0.1f));
    check_layer(TNT_SHAPE(4, 2), lstm, "LSTM", "\"recurrent_regularizer\":{\"class_name\":\"L2\"");
    tnt_layer *bn = tnt_batch_normalization(0, 0, NULL);
    tu_ok(tnt_layer_set_regularizer(bn, "gamma_regularizer", TNT_REG_L2, 0, 0.1f));
    check_layer(TNT_SHAPE(4), bn, "BatchNormalization", "\"gamma_regularizer\":{\"class_name\":\"L2\"");
    tnt_layer *emb = tnt_embedding(10, 3, false, NULL);
    tu_ok(tnt_layer_set_regularizer(emb, "embeddings_regularizer", TNT_REG_L1, 0.1f, 0));
    check_layer(TNT_SHAPE(4), emb, "Embedding", "\"embeddings_regularizer\":{\"class_name\":\"L1\"");
}

/* Dense(3, kernel L2(0.5)) with weights 1 on zeros: evaluate's loss is the penalty 0.5 * 15,
 * also after a .h5 round trip. */
static void test_penalty_in_evaluate_and_h5(void **state) {
    (void)state;
    tnt_model *m = tnt_sequential("m");
    tu_ok(tnt_model_add(m, tnt_input_layer(TNT_SHAPE(5), NULL)));
    tnt_layer *d = tnt_dense(3, &(tnt_layer_opts){.no_bias = true});
    tu_ok(tnt_layer_set_regularizer(d, "kernel_regularizer", TNT_REG_L2, 0, 0.5f));
    tu_ok(tnt_model_add(m, d));
    compile_sgd(m);
    float ones[15], x[5] = {0}, y[3] = {0};
    for (int i = 0; i < 15; i++) ones[i] = 1;
    tu_ok(tnt_set_weights(m, ones, 15));
    tnt_dataset *ds = rows(x, y, 0, 1);
    tnt_logs logs;
    double loss = 0;
    tu_ok(tnt_evaluate(m, ds, NULL, &logs));
    assert_true(tnt_logs_get(&logs, "loss", &loss));
    assert_float_equal(loss, 7.5, 1e-6);
    const char *path = "reg_model_test.h5";
    tu_ok(tnt_save_model(m, path, NULL));
    tnt_model *back = tnt_load_model(path, true);
    if (!back) fail_msg("load: %s", tnt_last_error());
    tu_ok(tnt_evaluate(back, ds, NULL, &logs));
    assert_true(tnt_logs_get(&logs, "loss", &loss));
    assert_float_equal(loss, 7.5, 1e-6);
    remove(path);
    tnt_dataset_free(ds);
    tnt_model_free(back);
    tnt_model_free(m);
}

static void test_bad_values(void **state) {
    (void)state;
    tnt_layer *d = tnt_dense(2, NULL);
    assert_int_equal(tnt_layer_set_regularizer(d, "gamma_regularizer", TNT_REG_L2, 0, 0.1f), TNT_ERR_ARG);
    tu_error_contains("has no \"gamma_regularizer\"");
    assert_int_equal(tnt_layer_set_regularizer(d, "kernel_constraint", TNT_REG_L2, 0, 0.1f), TNT_ERR_ARG);
    tu_error_contains("ending in \"_regularizer\"");
    assert_int_equal(tnt_layer_set_regularizer(d, "kernel_regularizer", TNT_REG_L2, 0, -1.0f), TNT_ERR_ARG);
    tu_error_contains("l2 -1");
    assert_int_equal(tnt_layer_set_constraint(d, "kernel_constraint",
                                              &(tnt_constraint){.kind = TNT_MIN_MAX_NORM, .min_value = 3, .max_value = 1}),
                     TNT_ERR_ARG);
    tu_error_contains("min_value 3");
    tnt_layer_free(d);
    expect_error("{\"class_name\": \"Sequential\", \"config\": {\"name\": \"s\", \"layers\": [{\"class_name\": \"Dense\", "
                 "\"config\": {\"name\": \"d\", \"units\": 2, \"batch_input_shape\": [null, 3], \"kernel_regularizer\": "
                 "{\"class_name\": \"SparsityRegularizer\", \"config\": {}}}}]}}",
                 (const char *const[]){"\"d\"", "kernel_regularizer", "SparsityRegularizer", NULL});
    expect_error("{\"class_name\": \"Sequential\", \"config\": {\"name\": \"s\", \"layers\": [{\"class_name\": \"Dense\", "
                 "\"config\": {\"name\": \"d\", \"units\": 2, \"batch_input_shape\": [null, 3], \"gamma_constraint\": "
                 "\"non_neg\"}}]}}",
                 (const char *const[]){"\"d\"", "gamma_constraint", NULL});
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_training_equals_pytorch),
        cmocka_unit_test(test_constraints_hold_after_training),
        cmocka_unit_test(test_frozen_layer_out_of_the_update),
        cmocka_unit_test(test_norm_constraints_equal_numpy),
        cmocka_unit_test(test_activity_layer_and_recurrent_penalty),
        cmocka_unit_test(test_attention_kernels_penalty),
        cmocka_unit_test(test_wrapped_penalties),
        cmocka_unit_test(test_json_round_trip),
        cmocka_unit_test(test_json_spellings),
        cmocka_unit_test(test_regularized_layer_classes),
        cmocka_unit_test(test_penalty_in_evaluate_and_h5),
        cmocka_unit_test(test_bad_values),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

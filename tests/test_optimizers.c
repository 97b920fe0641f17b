/* test_optimizers.c: every optimizer against an independent float64 numpy implementation of
 * the Keras 2.11+ update formulas (fixtures/gen_train.py) over 6 steps with a learning-rate
 * change, plus slicing and thread-count invariance, Keras docstring examples and the errors. */
#include "testutil.h"

#include "core/core.h"
#include "optimizers/optimizer.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

/* (fixture case, optimizer name), as CASES in gen_train.py */
static const struct {
    const char *name, *opt;
} CASES[] = {
    {"sgd", "sgd"},
    {"sgd_default", "sgd"},
    {"sgd_momentum", "sgd"},
    {"sgd_nesterov", "SGD"},
    {"sgd_momentum_wd", "sgd"},
    {"adam", "adam"},
    {"adam_default", "Adam"},
    {"adam_amsgrad", "adam"},
    {"adam_custom", "adam"},
    {"adam_wd", "adam"},
    {"rmsprop", "rmsprop"},
    {"rmsprop_momentum", "RMSprop"},
    {"rmsprop_centered", "rmsprop"},
    {"rmsprop_centered_momentum", "rmsprop"},
    {"adagrad", "adagrad"},
    {"adagrad_custom", "adagrad"},
    {"adadelta", "adadelta"},
    {"adadelta_default", "adadelta"},
    {"adamax", "adamax"},
    {"adamax_custom", "adamax"},
    {"nadam", "nadam"},
    {"nadam_default", "nadam"},
    {"nadam_wd", "NADAM"},
};

enum { LR_CHANGE_STEP = 3 };
/* hyperparameter vector of the fixtures (gen_train.py HP) */
enum { HP_LR, HP_MOMENTUM, HP_NESTEROV, HP_BETA_1, HP_BETA_2, HP_EPSILON, HP_RHO, HP_AMSGRAD, HP_CENTERED,
       HP_INIT_ACC, HP_WEIGHT_DECAY, HP_LR_AFTER, HP_COUNT };

static tnt_optimizer *make(const char *opt, const float *hp) {
    tnt_optimizer_opts o = {
        .learning_rate = hp[HP_LR],
        .momentum = hp[HP_MOMENTUM],
        .nesterov = hp[HP_NESTEROV] != 0,
        .beta_1 = hp[HP_BETA_1],
        .beta_2 = hp[HP_BETA_2],
        .epsilon = hp[HP_EPSILON],
        .rho = hp[HP_RHO],
        .amsgrad = hp[HP_AMSGRAD] != 0,
        .centered = hp[HP_CENTERED] != 0,
        .initial_accumulator_value = hp[HP_INIT_ACC],
        .weight_decay = hp[HP_WEIGHT_DECAY],
    };
    tnt_optimizer *o_ = tnt_optimizer_new(opt, &o);
    if (!o_) fail_msg("optimizer %s: %s", opt, tnt_last_error());
    return o_;
}

static void test_against_reference(void **state) {
    (void)state;
    tnt_shape sp, sg;
    float *p0 = tu_load("opt_p0", &sp), *grads = tu_load("opt_grads", &sg);
    const int64_t n = sp.dim[0], steps = sg.dim[0];
    assert_int_equal(sg.dim[1], n);
    float *p = malloc((size_t)n * sizeof *p);
    for (size_t ci = 0; ci < TNT_ARRAY_LEN(CASES); ci++) {
        char name[96], what[160];
        snprintf(name, sizeof name, "opt_%s_hp", CASES[ci].name);
        tnt_shape sh;
        float *hp = tu_load(name, &sh);
        assert_int_equal(sh.dim[0], HP_COUNT);
        snprintf(name, sizeof name, "opt_%s_params", CASES[ci].name);
        float *want = tu_load(name, NULL);

        tnt_optimizer *o = make(CASES[ci].opt, hp);
        tu_ok(tnt__optimizer_prepare(o, n));
        memcpy(p, p0, (size_t)n * sizeof *p);
        for (int64_t t = 0; t < steps; t++) {
            if (t == LR_CHANGE_STEP) tu_ok(tnt_optimizer_set_lr(o, hp[HP_LR_AFTER]));
            tu_ok(tnt__optimizer_apply(o, p, grads + t * n, 0, n));
            tnt__optimizer_finish_step(o);
            snprintf(what, sizeof what, "%s params after step %lld", CASES[ci].name, (long long)t + 1);
            tu_assert_close(p, want + t * n, n, 1e-5, 1e-7, what);
        }
        assert_int_equal(tnt_optimizer_iterations(o), steps);

        int ns = tnt__optimizer_num_slots(o);
        if (ns > 0) {
            snprintf(name, sizeof name, "opt_%s_slots", CASES[ci].name);
            tnt_shape ss;
            float *slots = tu_load(name, &ss);
            assert_int_equal(ss.dim[0], ns);
            for (int k = 0; k < ns; k++) {
                snprintf(what, sizeof what, "%s slot \"%s\"", CASES[ci].name, tnt__optimizer_slot_name(o, k));
                tu_assert_close(tnt__optimizer_slot(o, k), slots + k * n, n, 1e-5, 1e-7, what);
            }
            free(slots);
        }
        tnt_optimizer_free(o);
        free(hp);
        free(want);
    }
    free(p);
    free(p0);
    free(grads);
}

/* Slot names and order are Keras's (checkpoints rely on them). */
static void test_slot_names(void **state) {
    (void)state;
    static const struct {
        const char *opt;
        tnt_optimizer_opts o;
        const char *slots[3];
    } T[] = {
        {"sgd", {.learning_rate = 0}, {NULL}},
        {"sgd", {.momentum = 0.9f}, {"m"}},
        {"adam", {.learning_rate = 0}, {"m", "v"}},
        {"adam", {.amsgrad = true}, {"m", "v", "vhat"}},
        {"rmsprop", {.learning_rate = 0}, {"velocity"}},
        {"rmsprop", {.momentum = 0.5f, .centered = true}, {"velocity", "momentum", "average_gradient"}},
        {"rmsprop", {.centered = true}, {"velocity", "average_gradient"}},
        {"adagrad", {.learning_rate = 0}, {"accumulator"}},
        {"adadelta", {.learning_rate = 0}, {"accumulated_grad", "accumulated_delta_var"}},
        {"adamax", {.learning_rate = 0}, {"m", "u"}},
        {"nadam", {.learning_rate = 0}, {"m", "v"}},
    };
    for (size_t i = 0; i < TNT_ARRAY_LEN(T); i++) {
        tnt_optimizer *o = tnt_optimizer_new(T[i].opt, &T[i].o);
        assert_non_null(o);
        int k = 0;
        while (k < 3 && T[i].slots[k]) {
            assert_string_equal(tnt__optimizer_slot_name(o, k), T[i].slots[k]);
            k++;
        }
        assert_int_equal(tnt__optimizer_num_slots(o), k);
        assert_null(tnt__optimizer_slot_name(o, k));
        assert_null(tnt__optimizer_slot(o, 0)); /* not prepared yet */
        tu_ok(tnt__optimizer_prepare(o, 10));
        for (int j = 0; j < k; j++) assert_non_null(tnt__optimizer_slot(o, j));
        assert_null(tnt__optimizer_slot(o, k));
        tnt_optimizer_free(o);
    }
}

/* Runs 4 steps of an optimizer over n elements, either in one pass or in slices (given by cut
 * points, applied in reverse order to show order does not matter), with a given thread count. */
static void run_steps(const char *opt, const tnt_optimizer_opts *oo, int64_t n, const int64_t *cuts, int ncuts,
                      int threads, float *p, float **slots_out) {
    tnt_optimizer *o = tnt_optimizer_new(opt, oo);
    assert_non_null(o);
    tu_ok(tnt__optimizer_prepare(o, n));
    float *g = malloc((size_t)n * sizeof *g);
    tu_fill(p, n, 3);
    int saved = omp_get_max_threads();
    omp_set_num_threads(threads);
    for (int t = 0; t < 4; t++) {
        tu_fill(g, n, 100 + (uint64_t)t);
        if (t == 2) tu_ok(tnt_optimizer_set_lr(o, tnt_optimizer_get_lr(o) * 0.5f));
        if (!ncuts) {
            tu_ok(tnt__optimizer_apply(o, p, g, 0, n));
        } else {
            for (int k = ncuts; k >= 0; k--) {
                int64_t b = k == 0 ? 0 : cuts[k - 1], e = k == ncuts ? n : cuts[k];
                tu_ok(tnt__optimizer_apply(o, p, g, b, e));
            }
        }
        tnt__optimizer_finish_step(o);
    }
    omp_set_num_threads(saved);
    for (int k = 0; k < tnt__optimizer_num_slots(o); k++) {
        slots_out[k] = malloc((size_t)n * sizeof(float));
        memcpy(slots_out[k], tnt__optimizer_slot(o, k), (size_t)n * sizeof(float));
    }
    free(g);
    tnt_optimizer_free(o);
}

static void test_slices_and_threads_bitwise(void **state) {
    (void)state;
    static const struct {
        const char *opt;
        tnt_optimizer_opts o;
    } T[] = {
        {"sgd", {.learning_rate = 0.1f, .momentum = 0.9f, .nesterov = true, .weight_decay = 0.01f}},
        {"adam", {.learning_rate = 0.01f, .amsgrad = true}},
        {"rmsprop", {.momentum = 0.5f, .centered = true}},
        {"adagrad", {.learning_rate = 0}},
        {"adadelta", {.learning_rate = 1.0f}},
        {"adamax", {.learning_rate = 0}},
        {"nadam", {.weight_decay = 0.1f}},
    };
    /* large enough for the parallel path, with odd cut points that split vectors */
    const int64_t n = 100003;
    const int64_t cuts[] = {1, 17, 40000, 40001, 99999};
    float *ref = malloc(n * sizeof *ref), *got = malloc(n * sizeof *got);
    for (size_t i = 0; i < TNT_ARRAY_LEN(T); i++) {
        float *rs[3] = {0}, *gs[3] = {0};
        run_steps(T[i].opt, &T[i].o, n, NULL, 0, 1, ref, rs);
        /* slices, 2 threads */
        run_steps(T[i].opt, &T[i].o, n, cuts, (int)TNT_ARRAY_LEN(cuts), 2, got, gs);
        if (memcmp(ref, got, n * sizeof *ref)) fail_msg("%s: sliced/2-thread params differ from one pass", T[i].opt);
        for (int k = 0; k < 3; k++) {
            if (rs[k] && memcmp(rs[k], gs[k], n * sizeof(float)))
                fail_msg("%s: slot %d differs between slicings", T[i].opt, k);
            free(rs[k]);
            free(gs[k]);
        }
        /* one pass, 2 threads */
        run_steps(T[i].opt, &T[i].o, n, NULL, 0, 2, got, gs);
        if (memcmp(ref, got, n * sizeof *ref)) fail_msg("%s: 2-thread params differ from 1 thread", T[i].opt);
        for (int k = 0; k < 3; k++) free(gs[k]);
    }
    free(ref);
    free(got);
}

/* The examples in Keras's docstrings. */
static void test_keras_docstrings(void **state) {
    (void)state;
    /* SGD(0.1): var 1.0, loss var^2/2 -> 0.9 */
    tnt_optimizer *o = tnt_sgd(0.1f);
    tu_ok(tnt__optimizer_prepare(o, 1));
    float v = 1.0f, g;
    g = v;
    tu_ok(tnt__optimizer_apply(o, &v, &g, 0, 1));
    tnt__optimizer_finish_step(o);
    assert_float_equal(v, 0.9f, 1e-7);
    tnt_optimizer_free(o);

    /* SGD(0.1, momentum=0.9): first step 0.1, second 0.18 */
    o = tnt_optimizer_new("sgd", &(tnt_optimizer_opts){.learning_rate = 0.1f, .momentum = 0.9f});
    tu_ok(tnt__optimizer_prepare(o, 1));
    float v0 = v = 1.0f;
    g = v;
    tu_ok(tnt__optimizer_apply(o, &v, &g, 0, 1));
    tnt__optimizer_finish_step(o);
    float v1 = v;
    g = v;
    tu_ok(tnt__optimizer_apply(o, &v, &g, 0, 1));
    tnt__optimizer_finish_step(o);
    assert_float_equal(v0 - v1, 0.1f, 1e-6);
    assert_float_equal(v1 - v, 0.18f, 1e-6);
    tnt_optimizer_free(o);

    /* RMSprop(0.1): var 10.0 -> 9.683772 */
    o = tnt_optimizer_new("rmsprop", &(tnt_optimizer_opts){.learning_rate = 0.1f});
    tu_ok(tnt__optimizer_prepare(o, 1));
    v = 10.0f;
    g = v;
    tu_ok(tnt__optimizer_apply(o, &v, &g, 0, 1));
    assert_float_equal(v, 9.683772f, 1e-6);
    tnt_optimizer_free(o);
}

static void test_defaults_and_state(void **state) {
    (void)state;
    tnt_optimizer *o = tnt_sgd(0.0f); /* 0 = Keras default */
    assert_string_equal(tnt_optimizer_name(o), "SGD");
    assert_float_equal(tnt_optimizer_get_lr(o), 0.01f, 0);
    assert_float_equal(o->momentum, 0.0f, 0);
    assert_false(o->nesterov);
    tu_ok(tnt_optimizer_set_lr(o, 0.0f)); /* set_lr(0) freezes: 0 is a valid rate there */
    assert_float_equal(tnt_optimizer_get_lr(o), 0.0f, 0);
    tnt_optimizer_free(o);

    o = tnt_adam(0.0f);
    assert_string_equal(tnt_optimizer_name(o), "Adam");
    assert_float_equal(o->learning_rate, 0.001f, 0);
    assert_float_equal(o->beta_1, 0.9f, 0);
    assert_float_equal(o->beta_2, 0.999f, 0);
    assert_float_equal(o->epsilon, 1e-7f, 0);
    assert_false(o->amsgrad);
    tnt_optimizer_free(o);

    static const struct {
        const char *name, *keras;
        float lr, rho, eps;
    } D[] = {
        {"RMSprop", "RMSprop", 0.001f, 0.9f, 1e-7f},  {"adadelta", "Adadelta", 0.001f, 0.95f, 1e-7f},
        {"Adagrad", "Adagrad", 0.001f, 0.0f, 1e-7f},  {"ADAMAX", "Adamax", 0.001f, 0.0f, 1e-7f},
        {"nadam", "Nadam", 0.001f, 0.0f, 1e-7f},
    };
    for (size_t i = 0; i < TNT_ARRAY_LEN(D); i++) {
        o = tnt_optimizer_new(D[i].name, NULL);
        assert_non_null(o);
        assert_string_equal(tnt_optimizer_name(o), D[i].keras);
        assert_float_equal(o->learning_rate, D[i].lr, 0);
        assert_float_equal(o->rho, D[i].rho, 0);
        assert_float_equal(o->epsilon, D[i].eps, 0);
        tnt_optimizer_free(o);
    }

    /* Adagrad's accumulators start at initial_accumulator_value (default 0.1); prepare is
     * idempotent for the same size and keeps the state. */
    o = tnt_optimizer_new("adagrad", NULL);
    assert_float_equal(o->initial_accumulator_value, 0.1f, 0);
    tu_ok(tnt__optimizer_prepare(o, 5));
    for (int i = 0; i < 5; i++) assert_float_equal(tnt__optimizer_slot(o, 0)[i], 0.1f, 0);
    float p[5] = {1, 2, 3, 4, 5}, g[5] = {1, 1, 1, 1, 1};
    tu_ok(tnt__optimizer_apply(o, p, g, 0, 5));
    tnt__optimizer_finish_step(o);
    assert_int_equal(tnt_optimizer_iterations(o), 1);
    tu_ok(tnt__optimizer_prepare(o, 5));
    assert_float_equal(tnt__optimizer_slot(o, 0)[0], 1.1f, 1e-7);
    /* an empty slice is a no-op */
    tu_ok(tnt__optimizer_apply(o, p, g, 3, 3));
    tnt_optimizer_free(o);

    /* Nadam's u_product restored from iterations equals the running product. */
    o = tnt_optimizer_new("nadam", NULL);
    tu_ok(tnt__optimizer_prepare(o, 1));
    float q = 1, h = 0.5f;
    for (int t = 0; t < 7; t++) {
        tu_ok(tnt__optimizer_apply(o, &q, &h, 0, 1));
        tnt__optimizer_finish_step(o);
    }
    double up = o->nadam_u_product;
    tu_ok(tnt__optimizer_set_iterations(o, 7));
    assert_float_equal(o->nadam_u_product, up, 1e-15);
    tnt_optimizer_free(o);
}

static void test_errors(void **state) {
    (void)state;
    assert_null(tnt_optimizer_new("ftrl", NULL));
    tu_error_contains("Ftrl is not supported");
    assert_null(tnt_optimizer_new("Ftrl", NULL));
    tu_error_contains("Tarantella");

    assert_null(tnt_optimizer_new("adamx", NULL));
    tu_error_contains("unknown optimizer \"adamx\"");
    tu_error_contains("sgd, adam, adamw, rmsprop, adagrad, adadelta, adamax, nadam");
    assert_null(tnt_optimizer_new(NULL, NULL));
    tu_error_contains("NULL");

    assert_null(tnt_sgd(-0.5f));
    tu_error_contains("learning_rate -0.5");
    tu_error_contains(">= 0");
    assert_null(tnt_adam(NAN));
    tu_error_contains("learning_rate nan");

    assert_null(tnt_optimizer_new("sgd", &(tnt_optimizer_opts){.momentum = 1.5f}));
    tu_error_contains("momentum 1.5");
    assert_null(tnt_optimizer_new("sgd", &(tnt_optimizer_opts){.momentum = -0.1f}));
    tu_error_contains("[0, 1]");
    assert_null(tnt_optimizer_new("adam", &(tnt_optimizer_opts){.beta_1 = 1.0f}));
    tu_error_contains("beta_1 1");
    assert_null(tnt_optimizer_new("adam", &(tnt_optimizer_opts){.epsilon = -1e-8f}));
    tu_error_contains("epsilon");
    assert_null(tnt_optimizer_new("adagrad", &(tnt_optimizer_opts){.initial_accumulator_value = -1}));
    tu_error_contains("initial_accumulator_value -1");
    assert_null(tnt_optimizer_new("adam", &(tnt_optimizer_opts){.weight_decay = -0.1f}));
    tu_error_contains("weight_decay -0.1");
    /* options that do not apply are rejected rather than ignored */
    assert_null(tnt_optimizer_new("adam", &(tnt_optimizer_opts){.momentum = 0.9f}));
    tu_error_contains("option momentum does not apply to Adam");
    assert_null(tnt_optimizer_new("sgd", &(tnt_optimizer_opts){.amsgrad = true}));
    tu_error_contains("amsgrad");

    tnt_optimizer *o = tnt_sgd(0.1f);
    assert_int_equal(tnt_optimizer_set_lr(o, -1.0f), TNT_ERR_ARG);
    tu_error_contains("learning_rate -1");
    assert_int_equal(tnt_optimizer_set_lr(o, INFINITY), TNT_ERR_ARG);
    assert_float_equal(tnt_optimizer_get_lr(o), 0.1f, 0);
    assert_int_equal(tnt_optimizer_set_lr(NULL, 0.1f), TNT_ERR_ARG);

    float p[4] = {0}, g[4] = {0};
    assert_int_equal(tnt__optimizer_apply(o, p, g, 0, 4), TNT_ERR_STATE);
    tu_error_contains("before prepare");
    assert_int_equal(tnt__optimizer_prepare(o, -1), TNT_ERR_ARG);
    tu_ok(tnt__optimizer_prepare(o, 4));
    assert_int_equal(tnt__optimizer_prepare(o, 5), TNT_ERR_STATE);
    tu_error_contains("prepared for 4 parameters");
    assert_int_equal(tnt__optimizer_apply(o, p, g, 2, 5), TNT_ERR_ARG);
    tu_error_contains("[2, 5)");
    assert_int_equal(tnt__optimizer_apply(o, p, g, 3, 2), TNT_ERR_ARG);
    assert_int_equal(tnt__optimizer_apply(o, NULL, g, 0, 4), TNT_ERR_ARG);
    assert_int_equal(tnt__optimizer_set_iterations(o, -2), TNT_ERR_ARG);
    tnt_optimizer_free(o);
    tnt_optimizer_free(NULL);
    assert_null(tnt_optimizer_name(NULL));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_against_reference),
        cmocka_unit_test(test_slot_names),
        cmocka_unit_test(test_slices_and_threads_bitwise),
        cmocka_unit_test(test_keras_docstrings),
        cmocka_unit_test(test_defaults_and_state),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

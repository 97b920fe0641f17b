/* test_schedules.c: the learning-rate schedules against a float64 Python port of Keras's
 * learning_rate_schedule.py and of the Tarantella tutorials' warm-up schedules
 * (fixtures/gen_schedules.py) at steps around every boundary; an optimizer driven by a schedule
 * (once per step, for every slice); AdamW against a numpy port of Keras's adamw.py; the errors. */
#include "testutil.h"

#include "core/core.h"
#include "optimizers/optimizer.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const int64_t PW_B[] = {10, 20, 30};
static const float PW_V[] = {1.0f, 0.5f, 0.1f, 0.01f};
static const int64_t PW1_B[] = {5};
static const float PW1_V[] = {0.3f, 0.2f};
static const int64_t PWW_B[] = {4, 6, 8};
static const float PWW_M[] = {1.0f, 0.1f, 0.01f, 0.001f};

/* as CASES in gen_schedules.py */
static tnt_lr_schedule *make(const char *name) {
    if (!strcmp(name, "exp")) return tnt_exponential_decay(0.1f, 10, 0.5f, false);
    if (!strcmp(name, "exp_staircase")) return tnt_exponential_decay(0.1f, 10, 0.5f, true);
    if (!strcmp(name, "piecewise")) return tnt_piecewise_constant_decay(PW_B, PW_V, 3);
    if (!strcmp(name, "piecewise_one")) return tnt_piecewise_constant_decay(PW1_B, PW1_V, 1);
    if (!strcmp(name, "poly")) return tnt_polynomial_decay(0.1f, 20, 0.0001f, 1.0f, false);
    if (!strcmp(name, "poly_pow2_cycle")) return tnt_polynomial_decay(0.1f, 20, 0.01f, 2.0f, true);
    if (!strcmp(name, "cosine")) return tnt_cosine_decay(0.1f, 20, 0.0f);
    if (!strcmp(name, "cosine_alpha")) return tnt_cosine_decay(0.1f, 20, 0.1f);
    if (!strcmp(name, "cosine_warmup")) return tnt_cosine_decay_warmup(0.0f, 20, 0.05f, 0.2f, 10);
    if (!strcmp(name, "inverse_time")) return tnt_inverse_time_decay(0.1f, 10, 0.5f, false);
    if (!strcmp(name, "inverse_time_staircase")) return tnt_inverse_time_decay(0.1f, 10, 0.5f, true);
    if (!strcmp(name, "exp_warmup")) return tnt_exp_decay_with_warmup(0.01f, 4, 10, 0.9f, false, 5, 1.0f);
    if (!strcmp(name, "exp_warmup_staircase"))
        return tnt_exp_decay_with_warmup(0.02f, 3, 7, 0.5f, true, 10, 0.5f);
    if (!strcmp(name, "piecewise_warmup"))
        return tnt_piecewise_constant_decay_with_warmup(0.1f, 512, 2600, 2, PWW_B, PWW_M, 3);
    return NULL;
}

static const char *CASES[] = {"exp", "exp_staircase", "piecewise", "piecewise_one", "poly", "poly_pow2_cycle",
                              "cosine", "cosine_alpha", "cosine_warmup", "inverse_time",
                              "inverse_time_staircase", "exp_warmup", "exp_warmup_staircase",
                              "piecewise_warmup"};

static void test_against_reference(void **state) {
    (void)state;
    tnt_shape ss;
    float *steps = tu_load("sched_steps", &ss);
    const int64_t n = ss.dim[0];
    float *got = malloc((size_t)n * sizeof *got);
    for (size_t ci = 0; ci < TNT_ARRAY_LEN(CASES); ci++) {
        char name[64];
        snprintf(name, sizeof name, "sched_%s", CASES[ci]);
        tnt_shape sv;
        float *want = tu_load(name, &sv);
        assert_int_equal(sv.dim[0], n);
        tnt_lr_schedule *s = make(CASES[ci]);
        if (!s) fail_msg("%s: %s", CASES[ci], tnt_last_error());
        for (int64_t i = 0; i < n; i++) got[i] = tnt_lr_schedule_value(s, (int64_t)steps[i]);
        tu_assert_close(got, want, n, 2e-6, 1e-9, CASES[ci]);
        tnt_lr_schedule_free(s);
        free(want);
    }
    free(got);
    free(steps);
}

/* A few values by hand, from the Keras formulas. */
static void test_hand_values(void **state) {
    (void)state;
    tnt_lr_schedule *s = tnt_exponential_decay(1.0f, 4, 0.5f, false);
    assert_float_equal(tnt_lr_schedule_value(s, 0), 1.0f, 1e-7);
    assert_float_equal(tnt_lr_schedule_value(s, 2), (float)sqrt(0.5), 1e-7);
    assert_float_equal(tnt_lr_schedule_value(s, 8), 0.25f, 1e-7);
    tnt_lr_schedule_free(s);
    /* piecewise: the boundary step itself still has the earlier value */
    s = tnt_piecewise_constant_decay(PW_B, PW_V, 3);
    assert_float_equal(tnt_lr_schedule_value(s, 10), 1.0f, 0);
    assert_float_equal(tnt_lr_schedule_value(s, 11), 0.5f, 0);
    assert_float_equal(tnt_lr_schedule_value(s, 1000), 0.01f, 0);
    tnt_lr_schedule_free(s);
    /* polynomial past the end: end_lr; cycle restarts: step 30 of 20 -> decay over 40 */
    s = tnt_polynomial_decay(0.1f, 20, 0.0001f, 1.0f, false);
    assert_float_equal(tnt_lr_schedule_value(s, 500), 0.0001f, 1e-9);
    tnt_lr_schedule_free(s);
    s = tnt_polynomial_decay(1.0f, 20, 0.0f, 1.0f, true);
    assert_float_equal(tnt_lr_schedule_value(s, 30), 0.25f, 1e-7);
    tnt_lr_schedule_free(s);
    /* cosine halfway: (1 + cos(pi/2)) / 2 = 0.5 */
    s = tnt_cosine_decay(0.2f, 10, 0.0f);
    assert_float_equal(tnt_lr_schedule_value(s, 5), 0.1f, 1e-7);
    assert_float_equal(tnt_lr_schedule_value(s, 99), 0.0f, 1e-9);
    tnt_lr_schedule_free(s);
    /* ExpDecayWithWarmupSchedule: 0 at step 0, base * ranks at the end of warm-up;
     * num_ranks 0 means tnt_get_size() (1 here) */
    s = tnt_exp_decay_with_warmup(0.1f, 0, 10, 0.5f, false, 4, 1.0f);
    assert_float_equal(tnt_lr_schedule_value(s, 0), 0.0f, 0);
    assert_float_equal(tnt_lr_schedule_value(s, 4), 0.1f * (float)tnt_get_size(), 1e-7);
    tnt_lr_schedule_free(s);
    s = tnt_exp_decay_with_warmup(0.1f, 8, 10, 0.5f, false, 4, 1.0f);
    assert_float_equal(tnt_lr_schedule_value(s, 4), 0.8f, 1e-6);
    assert_float_equal(tnt_lr_schedule_value(s, 10), 0.4f, 1e-6);
    tnt_lr_schedule_free(s);
}

/* SGD with a schedule over 5 steps, each step applied in two slices, equals SGD with the
 * per-step rate s(0), s(1), ... set by hand. */
static void test_sgd_with_schedule(void **state) {
    (void)state;
    enum { N = 9, T = 5 };
    float p[N], q[N], g[N];
    tu_fill(p, N, 1);
    memcpy(q, p, sizeof p);
    tnt_optimizer *a = tnt_optimizer_new("sgd", &(tnt_optimizer_opts){.momentum = 0.5f, .weight_decay = 0.1f});
    tnt_optimizer *b = tnt_optimizer_new("sgd", &(tnt_optimizer_opts){.momentum = 0.5f, .weight_decay = 0.1f});
    assert_non_null(a);
    assert_non_null(b);
    tu_ok(tnt_optimizer_set_schedule(a, tnt_exponential_decay(0.2f, 2, 0.5f, true)));
    tnt_lr_schedule *ref = tnt_exponential_decay(0.2f, 2, 0.5f, true);
    tu_ok(tnt__optimizer_prepare(a, N));
    tu_ok(tnt__optimizer_prepare(b, N));
    for (int t = 0; t < T; t++) {
        tu_fill(g, N, 100 + (uint64_t)t);
        float want_lr = tnt_lr_schedule_value(ref, t);
        assert_float_equal(tnt_optimizer_get_lr(a), want_lr, 0);
        tu_ok(tnt__optimizer_apply(a, p, g, 0, 4));
        tu_ok(tnt__optimizer_apply(a, p, g, 4, N));
        tnt__optimizer_finish_step(a);
        tu_ok(tnt_optimizer_set_lr(b, want_lr));
        tu_ok(tnt__optimizer_apply(b, q, g, 0, N));
        tnt__optimizer_finish_step(b);
    }
    for (int i = 0; i < N; i++) assert_float_equal(p[i], q[i], 0);
    assert_float_equal(tnt_optimizer_get_lr(a), tnt_lr_schedule_value(ref, T), 0);
    /* the rate belongs to the schedule */
    assert_int_equal(tnt_optimizer_set_lr(a, 0.1f), TNT_ERR_STATE);
    tu_error_contains("schedule");
    /* resuming at another step uses the schedule there */
    tu_ok(tnt__optimizer_set_iterations(a, 1));
    assert_float_equal(tnt_optimizer_get_lr(a), tnt_lr_schedule_value(ref, 1), 0);
    /* replacing the schedule frees the old one (checked under ASan) */
    tu_ok(tnt_optimizer_set_schedule(a, tnt_cosine_decay(0.1f, 10, 0.0f)));
    assert_float_equal(tnt_optimizer_get_lr(a), 0.1f * 0.5f * (1.0f + (float)cos(3.14159265358979323846 * 0.1)), 1e-7);
    tnt_lr_schedule_free(ref);
    tnt_optimizer_free(a);
    tnt_optimizer_free(b);
}

static void run_adamw(const char *fixture, tnt_optimizer *o) {
    assert_non_null(o);
    tnt_shape sp, sg, sw;
    float *p = tu_load("adamw_p0", &sp), *grads = tu_load("adamw_grads", &sg), *want = tu_load(fixture, &sw);
    const int64_t n = sp.dim[0], steps = sg.dim[0];
    tu_ok(tnt__optimizer_prepare(o, n));
    for (int64_t t = 0; t < steps; t++) {
        tu_ok(tnt__optimizer_apply(o, p, grads + t * n, 0, n));
        tnt__optimizer_finish_step(o);
        char what[96];
        snprintf(what, sizeof what, "%s step %lld", fixture, (long long)t + 1);
        tu_assert_close(p, want + t * n, n, 1e-5, 1e-6, what);
    }
    free(p), free(grads), free(want);
    tnt_optimizer_free(o);
}

static void test_adamw(void **state) {
    (void)state;
    tnt_optimizer *o = tnt_optimizer_new("AdamW", NULL);
    assert_non_null(o);
    assert_string_equal(tnt_optimizer_name(o), "AdamW");
    assert_float_equal(o->weight_decay, 0.004f, 0);
    assert_float_equal(tnt_optimizer_get_lr(o), 0.001f, 0);
    assert_int_equal(tnt__optimizer_num_slots(o), 2);
    run_adamw("adamw_default_params", o);
    run_adamw("adamw_custom_params", tnt_adamw(0.05f, 0.1f));
    o = tnt_adamw(0, 0.2f);
    tu_ok(tnt_optimizer_set_schedule(o, tnt_exponential_decay(0.05f, 2, 0.5f, false)));
    run_adamw("adamw_sched_params", o);
    /* AdamW takes Adam's options, not SGD's */
    assert_null(tnt_optimizer_new("adamw", &(tnt_optimizer_opts){.momentum = 0.9f}));
    tu_error_contains("momentum does not apply to AdamW");
    assert_null(tnt_adamw(0.01f, -1.0f));
    tu_error_contains("weight_decay");
}

static void test_errors(void **state) {
    (void)state;
    assert_null(tnt_exponential_decay(0.1f, 0, 0.5f, false));
    tu_error_contains("ExponentialDecay: decay_steps 0");
    assert_null(tnt_inverse_time_decay(0.1f, -3, 0.5f, false));
    tu_error_contains("InverseTimeDecay: decay_steps -3");
    assert_null(tnt_polynomial_decay(0.1f, 0, 0.0001f, 1.0f, false));
    tu_error_contains("PolynomialDecay: decay_steps 0");
    assert_null(tnt_cosine_decay(0.1f, 0, 0.0f));
    tu_error_contains("CosineDecay: decay_steps 0");
    assert_null(tnt_exponential_decay(NAN, 10, 0.5f, false));
    tu_error_contains("initial_learning_rate nan");
    assert_null(tnt_polynomial_decay(0.1f, 10, -1.0f, 1.0f, false));
    tu_error_contains("end_learning_rate -1");
    assert_null(tnt_cosine_decay_warmup(0.0f, 10, 0.0f, 0.1f, -1));
    tu_error_contains("warmup_steps -1");

    const int64_t bad_b[] = {10, 10, 30};
    assert_null(tnt_piecewise_constant_decay(bad_b, PW_V, 3));
    tu_error_contains("strictly increasing: boundaries[1] = 10 after boundaries[0] = 10");
    assert_null(tnt_piecewise_constant_decay(NULL, PW_V, 3));
    tu_error_contains("boundaries is NULL");
    assert_null(tnt_piecewise_constant_decay(PW_B, NULL, 3));
    tu_error_contains("values is NULL");
    assert_null(tnt_piecewise_constant_decay(PW_B, PW_V, -1));
    tu_error_contains("n_boundaries -1");
    const float neg_v[] = {1.0f, -0.5f};
    assert_null(tnt_piecewise_constant_decay(PW1_B, neg_v, 1));
    tu_error_contains("values[1] = -0.5");

    assert_null(tnt_exp_decay_with_warmup(0.1f, -2, 10, 0.5f, false, 5, 1.0f));
    tu_error_contains("num_ranks -2");
    assert_null(tnt_exp_decay_with_warmup(0.1f, 1, 10, 0.5f, false, 0, 1.0f));
    tu_error_contains("warmup_steps 0");
    assert_null(tnt_piecewise_constant_decay_with_warmup(0.1f, 0, 100, 1, PWW_B, PWW_M, 3));
    tu_error_contains("batch_size 0");
    assert_null(tnt_piecewise_constant_decay_with_warmup(0.1f, 256, 100, 1, PWW_B, PWW_M, 3));
    tu_error_contains("epoch_size 100");
    assert_null(tnt_piecewise_constant_decay_with_warmup(0.1f, 256, 1000, 1, PWW_B, NULL, 3));
    tu_error_contains("multipliers is NULL");

    tnt_lr_schedule *s = tnt_exponential_decay(0.1f, 10, 0.5f, false);
    assert_true(isnan(tnt_lr_schedule_value(s, -1)));
    tu_error_contains("step -1");
    assert_true(isnan(tnt_lr_schedule_value(NULL, 0)));
    tu_error_contains("schedule is NULL");
    /* set_schedule consumes the schedule even when it fails */
    assert_int_equal(tnt_optimizer_set_schedule(NULL, s), TNT_ERR_ARG);
    tu_error_contains("optimizer is NULL");
    tnt_optimizer *o = tnt_sgd(0.1f);
    assert_int_equal(tnt_optimizer_set_schedule(o, tnt_exponential_decay(0.1f, 0, 0.5f, false)), TNT_ERR_ARG);
    tu_error_contains("schedule is NULL");
    assert_float_equal(tnt_optimizer_get_lr(o), 0.1f, 0); /* unchanged */
    tnt_optimizer_free(o);
    tnt_lr_schedule_free(NULL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_against_reference), cmocka_unit_test(test_hand_values),
        cmocka_unit_test(test_sgd_with_schedule), cmocka_unit_test(test_adamw),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

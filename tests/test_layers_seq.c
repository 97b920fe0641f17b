/* test_layers_seq.c: the sequence layers Embedding, LayerNormalization, Permute and RepeatVector,
 * and Dense on inputs of rank >= 2, driven directly through the layer contract without a model:
 * outputs and gradients against PyTorch references (tests/fixtures/gen_layers_seq.py), larger
 * cases against plain C references (the parallel paths), finite differences, two batch-size plans
 * side by side, shapes, weights and flags, and argument/shape/id errors. The driver is
 * tests/layer_harness.c. */
#include "layer_harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/dnnl_util.h"
#include "layers/layer.h"

/* ---- PyTorch fixtures --------------------------------------------------------------------- */

static void test_embedding_fixtures(void **state) {
    (void)state;
    run_case("emb_seq", tnt_embedding(10, 4, true, NULL)); /* repeated ids and id 0 */
    run_case("emb_rank2", tnt_embedding(7, 5, false, "emb")); /* (3, 4) ids -> (3, 4, 5) */
}

static void test_layer_norm_fixtures(void **state) {
    (void)state;
    run_case("ln_2d", tnt_layer_normalization(0.0f, NULL)); /* 0: Keras's default 1e-3 */
    run_case("ln_3d", tnt_layer_normalization(1e-5f, "ln"));
    run_case("ln_offset", tnt_layer_normalization(0.0f, NULL)); /* mean 50, spread 0.5 */
}

static void test_permute_repeat_fixtures(void **state) {
    (void)state;
    run_case("permute_21", tnt_permute(2, (int[]){2, 1}, NULL));
    run_case("permute_312", tnt_permute(3, (int[]){3, 1, 2}, NULL));
    run_case("permute_132", tnt_permute(3, (int[]){1, 3, 2}, NULL));
    run_case("repeat_3", tnt_repeat_vector(3, NULL));
}

static void test_dense_rank3_fixtures(void **state) {
    (void)state;
    run_case("dense3_linear", tnt_dense(3, NULL));
    run_case("dense3_tanh", tnt_dense(4, &(tnt_layer_opts){.activation = TNT_ACT_TANH}));
    run_case("dense3_relu", tnt_dense(6, &(tnt_layer_opts){.activation = TNT_ACT_RELU}));
    run_case("dense3_gelu_nobias",
             tnt_dense(5, &(tnt_layer_opts){.activation = TNT_ACT_GELU, .no_bias = true}));
}

/* ---- larger cases against plain C references (the OpenMP paths) --------------------------- */

/* Vocabulary 3000 x 100 (not a multiple of the 16-float column blocks), 4 x 300 ids with many
 * repeats: rows equal the table's, the gradient equals a plain scatter-add in double, rows never
 * seen are exactly zero (over poisoned gradients), dx is zeros. */
static void test_embedding_large(void **state) {
    (void)state;
    const int V = 3000, D = 100;
    const int64_t B = 4, T = 300, n = B * T;
    drv d;
    tnt_layer *l = tnt_embedding(V, D, true, NULL);
    drv_init(&d, l, TNT_SHAPE(T), B);
    float *table = l->weights[0].value, *g = l->weights[0].grad;
    bool *seen = calloc((size_t)V, sizeof *seen);
    for (int64_t i = 0; i < n; i++) {
        /* ids concentrated on a few hundred rows, with 0 and V-1 present */
        int64_t id = (i * 7919 + (i / 13) * 31) % 400;
        if (i % 97 == 0) id = V - 1;
        if (i % 50 == 0) id = 0;
        d.x[i] = (float)id;
        seen[id] = true;
    }
    tu_fill(d.dy, out_numel(&d), 5);
    drv_forward(&d, false);
    for (int64_t i = 0; i < n; i++)
        assert_memory_equal(d.y + i * D, table + (int64_t)d.x[i] * D, (size_t)D * sizeof(float));
    poison_grads(l);
    for (int64_t i = 0; i < n; i++) d.dx[i] = 3.0f;
    drv_backward(&d, true, false);
    for (int64_t i = 0; i < n; i++) assert_true(d.dx[i] == 0.0f);
    double *ref = calloc((size_t)V * D, sizeof *ref);
    for (int64_t i = 0; i < n; i++)
        for (int64_t k = 0; k < D; k++) ref[(int64_t)d.x[i] * D + k] += d.dy[i * D + k];
    for (int64_t r = 0; r < V; r++)
        for (int64_t k = 0; k < D; k++) {
            float got = g[r * D + k];
            if (!seen[r]) {
                if (got != 0.0f) fail_msg("row %lld not seen: grad[%lld] = %g", (long long)r, (long long)k, got);
            } else if (fabs(got - ref[r * D + k]) > 1e-4 + 1e-5 * fabs(ref[r * D + k])) {
                fail_msg("grad[%lld][%lld] = %g, expected %g", (long long)r, (long long)k, got,
                         ref[r * D + k]);
            }
        }
    free(ref), free(seen);
    drv_free(&d, true);
}

/* 4 x 16 rows of 300 (parallel path; column blocks not a multiple of 16): y, dx, dgamma, dbeta
 * against the formulas in double. */
static void test_layer_norm_large(void **state) {
    (void)state;
    const int64_t B = 4, S = 16, C = 300, rows = B * S;
    const double eps = 1e-3;
    drv d;
    tnt_layer *l = tnt_layer_normalization(0.0f, NULL);
    drv_init(&d, l, TNT_SHAPE(S, C), B);
    float *gamma = l->weights[0].value, *beta = l->weights[1].value;
    tu_fill(gamma, C, 21), tu_fill(beta, C, 22);
    tu_fill(d.x, rows * C, 23), tu_fill(d.dy, rows * C, 24);
    for (int64_t i = 0; i < rows * C; i++) d.x[i] = d.x[i] * (1.0f + (float)(i / C % 5)) + (float)(i / C % 3);
    drv_forward(&d, false);
    poison_grads(l);
    drv_backward(&d, true, false);
    double *dg = calloc((size_t)C, sizeof *dg), *db = calloc((size_t)C, sizeof *db);
    double *xhat = calloc((size_t)C, sizeof *xhat);
    for (int64_t i = 0; i < rows; i++) {
        const float *x = d.x + i * C, *dy = d.dy + i * C;
        double mu = 0, var = 0, sg = 0, sgx = 0;
        for (int64_t k = 0; k < C; k++) mu += x[k];
        mu /= (double)C;
        for (int64_t k = 0; k < C; k++) var += (x[k] - mu) * (x[k] - mu);
        double r = 1.0 / sqrt(var / (double)C + eps);
        for (int64_t k = 0; k < C; k++) {
            xhat[k] = (x[k] - mu) * r;
            double y = xhat[k] * gamma[k] + beta[k];
            if (fabs(d.y[i * C + k] - y) > 1e-5 + 1e-4 * fabs(y))
                fail_msg("y[%lld][%lld] = %g, expected %g", (long long)i, (long long)k, d.y[i * C + k], y);
            sg += dy[k] * gamma[k];
            sgx += dy[k] * gamma[k] * xhat[k];
            dg[k] += dy[k] * xhat[k];
            db[k] += dy[k];
        }
        for (int64_t k = 0; k < C; k++) {
            double dx = r * (dy[k] * gamma[k] - sg / (double)C - xhat[k] * sgx / (double)C);
            if (fabs(d.dx[i * C + k] - dx) > 1e-4 + 1e-4 * fabs(dx))
                fail_msg("dx[%lld][%lld] = %g, expected %g", (long long)i, (long long)k, d.dx[i * C + k], dx);
        }
    }
    for (int64_t k = 0; k < C; k++) {
        if (fabs(l->weights[0].grad[k] - dg[k]) > 1e-4 + 1e-5 * fabs(dg[k]))
            fail_msg("dgamma[%lld] = %g, expected %g", (long long)k, l->weights[0].grad[k], dg[k]);
        if (fabs(l->weights[1].grad[k] - db[k]) > 1e-4 + 1e-5 * fabs(db[k]))
            fail_msg("dbeta[%lld] = %g, expected %g", (long long)k, l->weights[1].grad[k], db[k]);
    }
    free(dg), free(db), free(xhat);
    drv_free(&d, true);
}

/* Permute (3, 1, 2) of (20, 30, 40) x 3 samples (parallel path), then its backward: dx is dy
 * permuted back, checked index by index. */
static void test_permute_large(void **state) {
    (void)state;
    const int64_t B = 3, A0 = 20, A1 = 30, A2 = 40;
    drv d;
    tnt_layer *l = tnt_permute(3, (int[]){3, 1, 2}, NULL);
    drv_init(&d, l, TNT_SHAPE(A0, A1, A2), B);
    assert_true(tnt__shape_equal(l->out_shape, TNT_SHAPE(A2, A0, A1)));
    tu_fill(d.x, in_numel(&d), 31), tu_fill(d.dy, out_numel(&d), 32);
    drv_forward(&d, false);
    drv_backward(&d, true, false);
    for (int64_t s = 0; s < B; s++)
        for (int64_t i = 0; i < A0; i++)
            for (int64_t j = 0; j < A1; j++)
                for (int64_t k = 0; k < A2; k++) {
                    int64_t xi = ((s * A0 + i) * A1 + j) * A2 + k, yi = ((s * A2 + k) * A0 + i) * A1 + j;
                    assert_true(d.y[yi] == d.x[xi]);
                    assert_true(d.dx[xi] == d.dy[yi]);
                }
    drv_free(&d, true);
}

/* ---- finite differences ------------------------------------------------------------------- */

static void test_finite_differences(void **state) {
    (void)state;
    fd_check(tnt_layer_normalization(0.0f, NULL), TNT_SHAPE(5), 3);
    fd_check(tnt_layer_normalization(1e-5f, NULL), TNT_SHAPE(3, 4), 2);
    fd_check(tnt_dense(5, &(tnt_layer_opts){.activation = TNT_ACT_TANH}), TNT_SHAPE(3, 4), 2);
    fd_check(tnt_dense(3, &(tnt_layer_opts){.no_bias = true}), TNT_SHAPE(2, 3, 4), 2);
    fd_check(tnt_permute(3, (int[]){2, 3, 1}, NULL), TNT_SHAPE(2, 3, 4), 2);
    fd_check(tnt_repeat_vector(4, NULL), TNT_SHAPE(3), 2);
}

/* the batch-1 plan of a rank-3 Dense gives the first sample of the batch-2 results */
static void test_dense_two_plans(void **state) {
    (void)state;
    static const char *const w_b[2] = {"w", "b"};
    check_two_plans(tnt_dense(3, NULL), "dense3_linear", 2, w_b);
}

/* ---- shapes, weights, defaults and flags -------------------------------------------------- */

static void test_shapes_and_flags(void **state) {
    (void)state;
    tnt_shape out;
    tnt_layer *l = tnt_embedding(8000, 256, true, NULL);
    assert_non_null(l);
    assert_string_equal(tnt_layer_class(l), "Embedding");
    assert_true(l->auto_name);
    tu_ok(l->ops->build(l, TNT_SHAPE(128), &out));
    assert_true(tnt__shape_equal(out, TNT_SHAPE(128, 256)));
    assert_int_equal(l->n_weights, 1);
    assert_string_equal(l->weights[0].name, "embeddings");
    assert_true(tnt__shape_equal(l->weights[0].shape, TNT_SHAPE(8000, 256)));
    assert_int_equal(l->weights[0].init, TNT_INIT_RANDOM_UNIFORM);
    assert_true(l->weights[0].trainable);
    tu_ok(l->ops->build(l, TNT_SHAPE(4, 6), &out)); /* any rank: output_dim appended */
    assert_true(tnt__shape_equal(out, TNT_SHAPE(4, 6, 256)));
    assert_int_equal(l->n_weights, 1);
    assert_true(tnt__embedding_mask_zero(l));
    assert_false(l->ops->supports_masking);
    tnt_layer_free(l);
    l = tnt_embedding(10, 3, false, "e");
    assert_string_equal(tnt_layer_name(l), "e");
    assert_false(tnt__embedding_mask_zero(l));
    tnt_layer_free(l);

    l = tnt_layer_normalization(0.0f, NULL);
    assert_string_equal(tnt_layer_class(l), "LayerNormalization");
    tu_ok(l->ops->build(l, TNT_SHAPE(128, 512), &out));
    assert_true(tnt__shape_equal(out, TNT_SHAPE(128, 512)));
    assert_int_equal(l->n_weights, 2);
    assert_string_equal(l->weights[0].name, "gamma");
    assert_string_equal(l->weights[1].name, "beta");
    assert_true(tnt__shape_equal(l->weights[0].shape, TNT_SHAPE(512)));
    assert_true(tnt__shape_equal(l->weights[1].shape, TNT_SHAPE(512)));
    assert_int_equal(l->weights[0].init, TNT_INIT_ONES);
    assert_int_equal(l->weights[1].init, TNT_INIT_ZEROS);
    assert_true(l->ops->supports_masking);
    assert_false(tnt__embedding_mask_zero(l)); /* not an Embedding */
    tnt_layer_free(l);
    assert_false(tnt__embedding_mask_zero(NULL));

    l = tnt_dense(7, NULL);
    tu_ok(l->ops->build(l, TNT_SHAPE(12, 5), &out)); /* (seq, d) -> (seq, units) */
    assert_true(tnt__shape_equal(out, TNT_SHAPE(12, 7)));
    assert_true(tnt__shape_equal(l->weights[0].shape, TNT_SHAPE(5, 7)));
    assert_int_equal(l->weights[0].fan_in, 5);
    assert_int_equal(l->weights[0].fan_out, 7);
    assert_true(tnt__shape_equal(l->weights[1].shape, TNT_SHAPE(7)));
    tu_ok(l->ops->build(l, TNT_SHAPE(2, 3, 5), &out));
    assert_true(tnt__shape_equal(out, TNT_SHAPE(2, 3, 7)));
    assert_int_equal(l->n_weights, 2);
    tu_ok(l->ops->build(l, TNT_SHAPE(9), &out)); /* rank 1 unchanged */
    assert_true(tnt__shape_equal(out, TNT_SHAPE(7)));
    assert_true(l->ops->supports_masking);
    tnt_layer_free(l);
    l = tnt_dropout(0.1f, 1, NULL);
    assert_true(l->ops->supports_masking);
    tnt_layer_free(l);
    l = tnt_activation_layer(TNT_ACT_RELU, NULL);
    assert_true(l->ops->supports_masking);
    tnt_layer_free(l);

    l = tnt_permute(3, (int[]){3, 1, 2}, NULL);
    assert_string_equal(tnt_layer_class(l), "Permute");
    tu_ok(l->ops->build(l, TNT_SHAPE(2, 3, 4), &out));
    assert_true(tnt__shape_equal(out, TNT_SHAPE(4, 2, 3)));
    assert_int_equal(l->n_weights, 0);
    tnt_layer_free(l);
    l = tnt_permute(1, (int[]){1}, NULL); /* identity on rank 1 */
    tu_ok(l->ops->build(l, TNT_SHAPE(6), &out));
    assert_true(tnt__shape_equal(out, TNT_SHAPE(6)));
    tnt_layer_free(l);

    l = tnt_repeat_vector(5, "rv");
    assert_string_equal(tnt_layer_class(l), "RepeatVector");
    tu_ok(l->ops->build(l, TNT_SHAPE(8), &out));
    assert_true(tnt__shape_equal(out, TNT_SHAPE(5, 8)));
    assert_int_equal(l->n_weights, 0);
    tnt_layer_free(l);
}

/* ---- errors ------------------------------------------------------------------------------- */

/* Forward of Embedding "emb" (input_dim 10) on one sample of 4 ids with ids[pos] = bad. */
static void expect_bad_id(float bad, int pos, const char *needle) {
    drv d;
    tnt_layer *l = tnt_embedding(10, 3, false, "emb");
    drv_init(&d, l, TNT_SHAPE(4), 2);
    for (int i = 0; i < 8; i++) d.x[i] = (float)(i % 10);
    d.x[4 + pos] = bad;
    tnt__fwd_args a = {.batch = 2, .x = d.x, .y = d.y, .workspace = d.ws, .training = true};
    assert_int_equal(l->ops->forward(l, d.plan, &a), TNT_ERR_ARG);
    tu_error_contains("Embedding \"emb\"");
    tu_error_contains(needle);
    tu_error_contains("[0, 10)");
    tu_error_contains("sample 1");
    drv_free(&d, true);
}

static void test_embedding_errors(void **state) {
    (void)state;
    expect_bad_id(10.0f, 2, "id 10 at position 2");
    expect_bad_id(2.5f, 0, "id 2.5 at position 0");
    expect_bad_id(-1.0f, 3, "id -1 at position 3");
    expect_bad_id(NAN, 1, "position 1");
    expect_bad_id(1e9f, 1, "id 1e+09");
    assert_null(tnt_embedding(0, 4, false, NULL));
    tu_error_contains("Embedding: input_dim 0");
    assert_null(tnt_embedding(10, -2, false, NULL));
    tu_error_contains("Embedding: output_dim -2");
}

static void expect_build_error(tnt_layer *l, tnt_shape in, const char *needle1, const char *needle2) {
    tnt_shape out;
    assert_non_null(l);
    snprintf(l->name, sizeof l->name, "%s", "lyr");
    assert_int_equal(l->ops->build(l, in, &out), TNT_ERR_SHAPE);
    tu_error_contains("\"lyr\"");
    tu_error_contains(needle1);
    tu_error_contains(needle2);
    tnt_layer_free(l);
}

static void test_errors(void **state) {
    (void)state;
    /* Permute: not a permutation, wrong n, and an input of another rank */
    assert_null(tnt_permute(2, (int[]){1, 1}, NULL));
    tu_error_contains("Permute: dims (1, 1) is not a permutation of 1..2");
    tu_error_contains("a repeat");
    assert_null(tnt_permute(3, (int[]){0, 1, 2}, NULL));
    tu_error_contains("dims (0, 1, 2)");
    tu_error_contains("1-based");
    assert_null(tnt_permute(2, (int[]){1, 3}, NULL));
    tu_error_contains("entry 1 is 3, out of range");
    assert_null(tnt_permute(0, (int[]){1}, NULL));
    tu_error_contains("Permute: n 0");
    assert_null(tnt_permute(2, NULL, NULL));
    tu_error_contains("dims is NULL");
    expect_build_error(tnt_permute(2, (int[]){2, 1}, NULL), TNT_SHAPE(3, 4, 5), "Permute", "rank 3");
    expect_build_error(tnt_permute(3, (int[]){2, 1, 3}, NULL), TNT_SHAPE(3, 4), "(2, 1, 3)",
                       "expected an input of rank 3");

    /* RepeatVector: rank-1 input only, n >= 1 */
    expect_build_error(tnt_repeat_vector(3, NULL), TNT_SHAPE(4, 5), "RepeatVector", "rank 2");
    assert_null(tnt_repeat_vector(0, NULL));
    tu_error_contains("RepeatVector: n 0");

    /* LayerNormalization: epsilon, rank 0 */
    assert_null(tnt_layer_normalization(-1e-3f, NULL));
    tu_error_contains("LayerNormalization: epsilon -0.001");
    assert_null(tnt_layer_normalization(NAN, NULL));
    tu_error_contains("LayerNormalization: epsilon");
    expect_build_error(tnt_layer_normalization(0.0f, NULL), (tnt_shape){.ndim = 0}, "LayerNormalization",
                       "rank 0");
    expect_build_error(tnt_layer_normalization(0.0f, NULL), TNT_SHAPE(3, 0), "(3, 0)", "empty");

    /* Embedding: empty dimension, rank too large for the appended axis; Dense: rank 0, empty */
    expect_build_error(tnt_embedding(5, 2, false, NULL), TNT_SHAPE(0), "Embedding", "empty");
    expect_build_error(tnt_embedding(5, 2, false, NULL), TNT_SHAPE(1, 1, 1, 1, 1, 1, 1, 1),
                       "Embedding", "rank 8");
    expect_build_error(tnt_dense(3, NULL), (tnt_shape){.ndim = 0}, "Dense", "rank 0");
    expect_build_error(tnt_dense(3, NULL), TNT_SHAPE(4, 0), "(4, 0)", "empty");
}

static int teardown(void **state) {
    (void)state;
    tnt__dnnl_shutdown();
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_embedding_fixtures),
        cmocka_unit_test(test_layer_norm_fixtures),
        cmocka_unit_test(test_permute_repeat_fixtures),
        cmocka_unit_test(test_dense_rank3_fixtures),
        cmocka_unit_test(test_embedding_large),
        cmocka_unit_test(test_layer_norm_large),
        cmocka_unit_test(test_permute_large),
        cmocka_unit_test(test_finite_differences),
        cmocka_unit_test(test_dense_two_plans),
        cmocka_unit_test(test_shapes_and_flags),
        cmocka_unit_test(test_embedding_errors),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, teardown);
}

/* Custom training loops in C (include/tarantella_ops.h): an operation graph run once with its
 * backward (tnt_opgraph_run), a model's forward kept for a backward from the outputs' gradient
 * (tnt_model_tape_forward/backward, with the inputs' gradient), and an optimizer update from given
 * gradients (tnt_model_apply_gradients). References: the formulas of a linear layer. */
#include "testutil.h"

#include <math.h>
#include <string.h>

static void test_opgraph_run_forward_and_backward(void **state) {
    (void)state;
    tnt_opgraph *g = tnt_opgraph_new();
    int x = tnt_opgraph_input(g, TNT_SHAPE(2, 3));
    int sq = tnt_opgraph_op(g, "multiply", 2, (int[]){x, x}, NULL);
    tu_ok(tnt_opgraph_output(g, tnt_opgraph_op(g, "sum", 1, (int[]){sq}, NULL)));
    float xv[6] = {0.5f, -1, 2, 1.5f, 0.25f, -0.75f}, seed = 3;
    tnt_tensor in = {TNT_SHAPE(2, 3), xv}, dout = {{.ndim = 0}, &seed}, *out[1], *din[1];
    tu_ok(tnt_opgraph_run(g, (const tnt_tensor *[]){&in}, out, (const tnt_tensor *[]){&dout}, din));
    double want = 0;
    for (int i = 0; i < 6; i++) want += xv[i] * xv[i];
    assert_float_equal(out[0]->data[0], want, 1e-5);
    for (int i = 0; i < 6; i++) assert_float_equal(din[0]->data[i], 2 * 3 * xv[i], 1e-5);
    tnt_tensor_free(out[0]), tnt_tensor_free(din[0]);
    tnt_tensor bad = {TNT_SHAPE(2, 4), xv};
    assert_int_not_equal(tnt_opgraph_run(g, (const tnt_tensor *[]){&bad}, out, NULL, NULL), TNT_OK);
    tu_error_contains("(2, 4)");
    tnt_opgraph_free(g);
}

/* Input (4, 3) -> Flatten -> Dense(2): y = x W + b. */
static tnt_model *linear(void) {
    tnt_model *m = tnt_sequential("lin");
    tu_ok(tnt_model_add(m, tnt_input_layer(TNT_SHAPE(4, 3), NULL)));
    tu_ok(tnt_model_add(m, tnt_flatten(NULL)));
    tu_ok(tnt_model_add(m, tnt_dense(2, NULL)));
    return m;
}

static void test_tape_backward_and_apply_gradients(void **state) {
    (void)state;
    tnt_model *m = linear();
    float *w, *b;
    tu_ok(tnt_model_weight(m, 0, NULL, NULL, &w));
    tu_ok(tnt_model_weight(m, 1, NULL, NULL, &b));
    float w0[24], x[3 * 12], dy[3 * 2], dx[3 * 12];
    memcpy(w0, w, sizeof w0);
    tu_fill(x, 36, 5), tu_fill(dy, 6, 6);
    tnt_tensor xt = {TNT_SHAPE(3, 4, 3), x}, *out;
    tu_ok(tnt_model_tape_forward(m, &xt, true, true, &out));
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 2; j++) {
            double y = b[j];
            for (int k = 0; k < 12; k++) y += x[i * 12 + k] * w0[k * 2 + j];
            assert_float_equal(out->data[i * 2 + j], y, 1e-5);
        }
    tnt_tensor_free(out);
    float gw[24], gb[2];
    tnt_tensor dt = {TNT_SHAPE(3, 2), dy};
    tu_ok(tnt_model_tape_backward(m, &dt, 0, (float *[]){gw, gb}, dx));
    for (int k = 0; k < 12; k++)
        for (int j = 0; j < 2; j++) {
            double g = 0;
            for (int i = 0; i < 3; i++) g += x[i * 12 + k] * dy[i * 2 + j];
            assert_float_equal(gw[k * 2 + j], g, 1e-5);
        }
    for (int i = 0; i < 3; i++)
        for (int k = 0; k < 12; k++)
            assert_float_equal(dx[i * 12 + k], dy[i * 2] * w0[k * 2] + dy[i * 2 + 1] * w0[k * 2 + 1], 1e-5);
    /* one backward per forward */
    assert_int_equal(tnt_model_tape_backward(m, &dt, 0, NULL, NULL), TNT_ERR_STATE);
    /* SGD on the kernel only: the bias keeps its value */
    float b0[2] = {b[0], b[1]};
    tu_ok(tnt_model_set_optimizer(m, tnt_sgd(0.5f)));
    tu_ok(tnt_model_apply_gradients(m, 1, (int[]){0}, (const float *[]){gw}));
    tu_ok(tnt_model_weight(m, 0, NULL, NULL, &w));
    tu_ok(tnt_model_weight(m, 1, NULL, NULL, &b));
    for (int k = 0; k < 24; k++) assert_float_equal(w[k], w0[k] - 0.5f * gw[k], 1e-6);
    assert_float_equal(b[0], b0[0], 0), assert_float_equal(b[1], b0[1], 0);
    assert_int_equal(tnt_optimizer_iterations(tnt_model_optimizer(m)), 1);
    assert_int_equal(tnt_model_apply_gradients(m, 1, (int[]){7}, (const float *[]){gw}), TNT_ERR_ARG);
    tu_error_contains("weight index 7");
    tnt_model_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_opgraph_run_forward_and_backward),
        cmocka_unit_test(test_tape_backward_and_apply_gradients),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

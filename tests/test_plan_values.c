/* test_plan_values.c: forward values that no backward reads lend their storage (model/plan.c,
 * the layers' backward_reads). Two residual blocks whose BatchNormalization outputs only an Add
 * reads, a Dense output only a Concatenate reads, Dropout and ZeroPadding2D: the plan is smaller
 * by exactly those values (the first block's slots serve the second's), and training is bitwise
 * the same as with every value kept, on the CPU and on the emulated device (the layers' GPU
 * paths). A frozen base runs forward only, so none of its values is kept; an output whose
 * activity regularizer reads it in backward is kept. */
#include "testutil.h"

#include "core/config.h"
#include "gpu/gpu.h"
#include "model/model.h"

#include <stdlib.h>
#include <string.h>

enum { N = 32, BATCH = 16, SIDE = 8, CH = 8, CLASSES = 5, IN = SIDE * SIDE * 3 };

static float images[N * IN], labels[N];

static tnt_layer *conv(int filters, int k, tnt_activation act) {
    return tnt_conv2d(filters, k, k, &(tnt_layer_opts){.padding = TNT_PADDING_SAME, .activation = act});
}

/* conv -> BN -> relu, then BN(conv(.)) + BN(conv(.)) -> relu: the two BN outputs only Add reads */
static tnt_ktensor residual_block(tnt_graph *g, tnt_ktensor x) {
    tnt_ktensor a = tnt_call(g, conv(CH, 1, TNT_ACT_LINEAR), x);
    a = tnt_call(g, tnt_batch_normalization(0, 0, NULL), a);
    a = tnt_call(g, tnt_activation_layer(TNT_ACT_RELU, NULL), a);
    tnt_ktensor b = tnt_call(g, tnt_batch_normalization(0, 0, NULL), tnt_call(g, conv(CH, 1, TNT_ACT_LINEAR), a));
    tnt_ktensor c = tnt_call(g, tnt_batch_normalization(0, 0, NULL), tnt_call(g, conv(CH, 1, TNT_ACT_LINEAR), x));
    return tnt_call(g, tnt_activation_layer(TNT_ACT_RELU, NULL), tnt_call2(g, tnt_add(NULL), b, c));
}

/* 1x1 convolutions only, so that every layer has a path on the emulated device too */
static tnt_model *residual_model(void) {
    tnt_graph *g = tnt_graph_new();
    tnt_ktensor in = tnt_graph_input(g, TNT_SHAPE(SIDE, SIDE, 3), NULL);
    tnt_ktensor x = tnt_call(g, tnt_zero_padding2d(1, 1, 1, 1, NULL), in);
    x = tnt_call(g, conv(CH, 1, TNT_ACT_RELU), x);
    x = residual_block(g, x);
    x = residual_block(g, x);
    x = tnt_call(g, tnt_dropout(0.25f, 7, NULL), x);
    x = tnt_call(g, tnt_flatten(NULL), x);
    tnt_ktensor e = tnt_call(g, tnt_dense(16, &(tnt_layer_opts){0}), x);
    tnt_ktensor f = tnt_call(g, tnt_dense(16, &(tnt_layer_opts){0}), e); /* only Concatenate reads f */
    tnt_ktensor cat = tnt_call_n(g, tnt_concatenate(-1, NULL), 2, (tnt_ktensor[]){e, f});
    tnt_ktensor out = tnt_call(g, tnt_dense(CLASSES, &(tnt_layer_opts){.activation = TNT_ACT_SOFTMAX}), cat);
    tnt_model *m = tnt_functional(g, 1, &in, 1, &out, "residual");
    tnt_graph_free(g);
    assert_non_null(m);
    return m;
}

typedef struct run {
    float *w;
    int64_t n;
    size_t arena;
} run;

/* 2 epochs of SGD with momentum; the weights and the training plan's arena */
static run train(bool keep_values, tnt_device dev, int freeze_below) {
    tnt__plan_keep_values = keep_values;
    tnt_model *m = residual_model();
    for (int i = 0; i < freeze_below; i++) tu_ok(tnt_layer_set_trainable(tnt_model_layer(m, i), false));
    tnt_optimizer *opt = tnt_optimizer_new("sgd", &(tnt_optimizer_opts){.learning_rate = 0.05f, .momentum = 0.9f});
    tu_ok(tnt_compile(m, &(tnt_compile_opts){.optimizer = opt,
                                             .loss = TNT_SPARSE_CATEGORICAL_CROSSENTROPY, .seed = 3, .device = dev}));
    tnt_dataset *ds = tnt_dataset_batch(
        tnt_dataset_from_arrays(images, TNT_SHAPE(SIDE, SIDE, 3), labels, TNT_SHAPE(), N, false), BATCH, false);
    tu_ok(tnt_fit(m, ds, &(tnt_fit_opts){.epochs = 2}, NULL));
    assert_int_equal(m->on_device, dev == TNT_DEVICE_GPU);
    run r = {.n = tnt_model_count_params(m), .arena = tnt__model_plan(m, BATCH)->arena_bytes};
    r.w = malloc((size_t)r.n * sizeof(float));
    tu_ok(tnt_get_weights(m, r.w, r.n));
    tnt_dataset_free(ds);
    tnt_model_free(m);
    tnt__plan_keep_values = false;
    return r;
}

static size_t value_bytes(int64_t numel) { return ((size_t)(BATCH * numel) * sizeof(float) + 63) & ~(size_t)63; }

static void check_lent(tnt_device dev) {
    run all = train(true, dev, 0), lent = train(false, dev, 0);
    tu_assert_bitwise(lent.w, all.w, all.n, "weights with values lent");
    /* lent: the second block's two BN outputs take the first block's slots, f fits among them */
    const size_t block = value_bytes((SIDE + 2) * (SIDE + 2) * CH);
    print_message("arena: %zu bytes with every value kept, %zu lent\n", all.arena, lent.arena);
    assert_int_equal(all.arena - lent.arena, 2 * block + value_bytes(16));
    free(all.w), free(lent.w);
}

static void test_cpu_values_lent(void **state) {
    (void)state;
    check_lent(TNT_DEVICE_CPU);
}

static void test_device_values_lent(void **state) {
    (void)state;
    const char *why = NULL;
    if (!tnt__gpu_available(&why)) skip();
    check_lent(TNT_DEVICE_GPU);
}

/* The first nine layers frozen (the input, the padding, the first convolution, the first block
 * but its shortcut's BatchNormalization): backward runs through the Add into that layer alone,
 * which reads its input (the frozen convolution's output); nothing else of the base is kept */
static void test_frozen_base_keeps_nothing(void **state) {
    (void)state;
    const int base = 9;
    run all = train(true, TNT_DEVICE_CPU, base), lent = train(false, TNT_DEVICE_CPU, base);
    tu_assert_bitwise(lent.w, all.w, all.n, "weights of a model with a frozen base, values lent");
    run trains = train(false, TNT_DEVICE_CPU, 0);
    print_message("arena: %zu bytes training all, %zu with the base frozen\n", trains.arena, lent.arena);
    assert_true(lent.arena < trains.arena);
    free(all.w), free(lent.w), free(trains.w);
}

/* A Dense whose output only an Add reads but whose activity regularizer's gradient reads it in
 * backward: kept, while the Dense after the Add takes the lent slot it would have had */
static tnt_model *activity_model(void) {
    tnt_graph *g = tnt_graph_new();
    tnt_ktensor in = tnt_graph_input(g, TNT_SHAPE(6), NULL);
    tnt_layer *reg = tnt_dense(8, &(tnt_layer_opts){0});
    tu_ok(tnt_layer_set_regularizer(reg, "activity_regularizer", TNT_REG_L2, 0, 0.5f));
    tnt_ktensor a = tnt_call(g, reg, in), b = tnt_call(g, tnt_dense(8, &(tnt_layer_opts){0}), in);
    tnt_ktensor s = tnt_call2(g, tnt_add(NULL), a, b);
    tnt_ktensor c = tnt_call(g, tnt_dense(8, &(tnt_layer_opts){0}), s);
    tnt_ktensor t = tnt_call2(g, tnt_add(NULL), c, s);
    tnt_ktensor out = tnt_call(g, tnt_dense(CLASSES, &(tnt_layer_opts){.activation = TNT_ACT_SOFTMAX}), t);
    tnt_model *m = tnt_functional(g, 1, &in, 1, &out, "activity");
    tnt_graph_free(g);
    assert_non_null(m);
    return m;
}

static void test_activity_regularized_output_kept(void **state) {
    (void)state;
    float x[N * 6], *w[2];
    tu_fill(x, N * 6, 21);
    int64_t n = 0;
    for (int k = 0; k < 2; k++) {
        tnt__plan_keep_values = k == 0;
        tnt_model *m = activity_model();
        tu_ok(tnt_compile(m, &(tnt_compile_opts){.optimizer = tnt_sgd(0.1f), .loss = TNT_SPARSE_CATEGORICAL_CROSSENTROPY,
                                                 .seed = 5, .device = TNT_DEVICE_CPU}));
        tnt_dataset *ds = tnt_dataset_batch(tnt_dataset_from_arrays(x, TNT_SHAPE(6), labels, TNT_SHAPE(), N, false),
                                            BATCH, false);
        tu_ok(tnt_fit(m, ds, &(tnt_fit_opts){.epochs = 2}, NULL));
        n = tnt_model_count_params(m);
        w[k] = malloc((size_t)n * sizeof(float));
        tu_ok(tnt_get_weights(m, w[k], n));
        tnt_dataset_free(ds);
        tnt_model_free(m);
    }
    tnt__plan_keep_values = false;
    tu_assert_bitwise(w[1], w[0], n, "weights of a model with an activity regularizer, values lent");
    free(w[0]), free(w[1]);
}

int main(void) {
    /* the emulated device for the GPU paths, unless a real one is asked for */
    if (!getenv("TNT_GPU_EMULATE")) setenv("TNT_GPU_EMULATE", "1", 1);
    if (tnt__config_load() != TNT_OK) return fprintf(stderr, "%s\n", tnt_last_error()), 1;
    tu_fill(images, N * IN, 11);
    for (int i = 0; i < N; i++) labels[i] = (float)(i % CLASSES);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cpu_values_lent),
        cmocka_unit_test(test_device_values_lent),
        cmocka_unit_test(test_frozen_base_keeps_nothing),
        cmocka_unit_test(test_activity_regularized_output_kept),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

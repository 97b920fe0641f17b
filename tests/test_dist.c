/* test_dist.c: the data-parallel runtime, run by ctest under mpirun with 1, 2, 3 and 4 ranks.
 * Each rank trains a serial model (not distributed: every sample, one process) and a distributed
 * copy side by side, and checks: weights and History equal serial within 1e-5 relative, weights
 * bitwise identical on all ranks, runs bitwise repeatable, for every optimizer and fusion
 * threshold, with uneven micro-batches and a last partial batch; evaluate and predict equal
 * serial, also with global batches smaller than the ranks; and bad input (a rank with another
 * batch size or model, a bad label on one rank) fails on every rank with a clear message instead of hanging. */
#include "testutil.h"

#include "comm/comm.h"
#include "core/config.h"
#include "model/model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { N_SAMPLES = 100, BATCH = 16, FEATURES = 12, CLASSES = 3 }; /* 100 = 6*16 + 4 */

static float xs[N_SAMPLES * FEATURES], ys[N_SAMPLES];

static void make_data(void) {
    tu_fill(xs, N_SAMPLES * FEATURES, 11);
    for (int i = 0; i < N_SAMPLES; i++) {
        float s[3] = {0};
        for (int j = 0; j < FEATURES; j++) s[j % 3] += xs[i * FEATURES + j] * (j < 6 ? 1.0f : -0.5f);
        ys[i] = (float)(s[0] > s[1] ? (s[0] > s[2] ? 0 : 2) : (s[1] > s[2] ? 1 : 2));
    }
}

static tnt_dataset *data(int64_t batch, bool shuffle) {
    tnt_dataset *ds = tnt_dataset_from_arrays(xs, TNT_SHAPE(2, 2, 3), ys, TNT_SHAPE(), N_SAMPLES, false);
    if (shuffle) ds = tnt_dataset_shuffle(ds, N_SAMPLES, 42);
    return tnt_dataset_batch(ds, batch, false);
}

typedef struct run_cfg {
    const char *optimizer;
    tnt_optimizer_opts opts;
    bool conv;      /* a small conv model with dropout instead of the MLP */
    int epochs;
    int64_t batch;  /* the global batch; 0: BATCH */
} run_cfg;

static tnt_model *model(bool conv) {
    tnt_model *m = tnt_sequential("m");
    tu_ok(tnt_model_add(m, tnt_input_layer(TNT_SHAPE(2, 2, 3), NULL)));
    if (conv) {
        tu_ok(tnt_model_add(m, tnt_conv2d(6, 2, 2, &(tnt_layer_opts){.padding = TNT_PADDING_SAME, .activation = TNT_ACT_RELU})));
        tu_ok(tnt_model_add(m, tnt_max_pooling2d(2, 2, NULL)));
        tu_ok(tnt_model_add(m, tnt_flatten(NULL)));
        tu_ok(tnt_model_add(m, tnt_dropout(0.3f, 0, NULL)));
    } else {
        tu_ok(tnt_model_add(m, tnt_flatten(NULL)));
        tu_ok(tnt_model_add(m, tnt_dense(10, &(tnt_layer_opts){.activation = TNT_ACT_TANH})));
    }
    tu_ok(tnt_model_add(m, tnt_dense(8, &(tnt_layer_opts){.activation = TNT_ACT_RELU})));
    tu_ok(tnt_model_add(m, tnt_dense(CLASSES, &(tnt_layer_opts){.activation = TNT_ACT_SOFTMAX})));
    return m;
}

/* Trains one model, distributed with these options unless dist is NULL; returns its weights
 * (malloc'd), History and (distributed, more than one rank) its number of gradient buckets. */
static float *train(const run_cfg *c, const tnt_distribute_opts *dist, tnt_history **h, int64_t *n_out, int *buckets) {
    tnt_model *m = model(c->conv);
    if (dist) tu_ok(tnt_distribute_with(m, dist));
    tu_ok(tnt_compile(m, &(tnt_compile_opts){.optimizer = tnt_optimizer_new(c->optimizer, &c->opts),
                                             .loss = TNT_SPARSE_CATEGORICAL_CROSSENTROPY,
                                             .metrics = "accuracy", .seed = 3}));
    tnt_dataset *train_ds = data(c->batch ? c->batch : BATCH, true), *val = data(24, false);
    tu_ok(tnt_fit(m, train_ds, &(tnt_fit_opts){.epochs = c->epochs, .validation_data = val}, h));
    int64_t n = tnt_model_count_params(m);
    float *w = malloc((size_t)n * sizeof(float));
    tu_ok(tnt_get_weights(m, w, n));
    *n_out = n;
    if (buckets) *buckets = m->reducer ? tnt__reducer_num_buckets(m->reducer) : 0;
    tnt_dataset_free(train_ds), tnt_dataset_free(val);
    tnt_model_free(m);
    return w;
}

static void assert_same_on_all_ranks(const float *w, int64_t n) {
    float *master = malloc((size_t)n * sizeof(float));
    memcpy(master, w, (size_t)n * sizeof(float));
    tu_ok(tnt__bcast_f32(master, n));
    if (memcmp(master, w, (size_t)n * sizeof(float)))
        fail_msg("rank %d: weights differ bitwise from the master's", tnt_get_rank());
    free(master);
}

static void compare_with_serial(const run_cfg *c, const tnt_distribute_opts *dist) {
    tnt_history *hs, *hd, *hd2;
    int64_t n;
    float *ws = train(c, NULL, &hs, &n, NULL);
    float *wd = train(c, dist, &hd, &n, NULL);
    float *wd2 = train(c, dist, &hd2, &n, NULL);
    char what[96];
    snprintf(what, sizeof what, "%s weights (ranks %d)", c->optimizer, tnt_get_size());
    tu_assert_close(wd, ws, n, 1e-5, 1e-6, what);
    assert_same_on_all_ranks(wd, n);
    assert_memory_equal(wd, wd2, (size_t)n * sizeof(float)); /* repeatable bitwise */
    const char *keys[] = {"loss", "accuracy", "val_loss", "val_accuracy"};
    for (int e = 0; e < c->epochs; e++)
        for (int k = 0; k < 4; k++) {
            double s = tnt_history_get(hs, keys[k], e), d = tnt_history_get(hd, keys[k], e);
            if (!(fabs(s - d) <= 1e-5 * fabs(s) + 1e-7))
                fail_msg("%s epoch %d %s: distributed %.9g, serial %.9g (ranks %d)", c->optimizer, e, keys[k], d, s,
                         tnt_get_size());
        }
    tnt_history_free(hs), tnt_history_free(hd), tnt_history_free(hd2);
    free(ws), free(wd), free(wd2);
}

static void test_optimizers_equal_serial(void **state) {
    (void)state;
    run_cfg cfgs[] = {
        {"sgd", {.learning_rate = 0.1f}, false, 3, 0},
        {"sgd", {.learning_rate = 0.05f, .momentum = 0.9f}, false, 3, 0},
        {"sgd", {.learning_rate = 0.05f, .momentum = 0.9f, .nesterov = true}, false, 2, 0},
        {"adam", {.learning_rate = 0.01f}, false, 3, 0},
        {"adam", {.learning_rate = 0.01f, .amsgrad = true}, false, 2, 0},
        {"rmsprop", {.learning_rate = 0.01f}, false, 2, 0},
        {"adagrad", {.learning_rate = 0.1f}, false, 2, 0},
        {"adadelta", {.learning_rate = 1.0f}, false, 2, 0},
        {"adamax", {.learning_rate = 0.01f}, false, 2, 0},
        {"nadam", {.learning_rate = 0.01f}, false, 2, 0},
        {"adam", {.learning_rate = 0.01f}, true, 2, 0}, /* conv + pool + dropout */
    };
    for (size_t i = 0; i < sizeof cfgs / sizeof *cfgs; i++) compare_with_serial(&cfgs[i], &(tnt_distribute_opts){0});
}

/* tnt_distribute_with: every fusion threshold and both comm modes train as serial does, with
 * the buckets asked for; with two ranks each gradient is one sum a + b, so all runs are bitwise
 * the same. */
static void test_distribute_options(void **state) {
    (void)state;
    struct {
        tnt_distribute_opts opts;
        int buckets; /* the MLP has 3 layers with weights, 245 floats in all */
    } cases[] = {
        {{.has_fusion_threshold = true, .fusion_threshold_kb = 0}, 3},
        {{.has_fusion_threshold = true, .fusion_threshold_kb = 1048576 /* 1 GB */}, 1},
        {{.comm_mode = TNT_COMM_MODE_NONBLOCKING, .has_fusion_threshold = true, .fusion_threshold_kb = 0}, 3},
        {{.comm_mode = TNT_COMM_MODE_NONBLOCKING}, 1}, /* the default 32 KB holds every layer */
        {{.comm_mode = TNT_COMM_MODE_THREAD}, 1},
    };
    float *first = NULL;
    for (size_t i = 0; i < TNT_ARRAY_LEN(cases); i++) {
        run_cfg c = {"sgd", {.learning_rate = 0.05f, .momentum = 0.9f}, false, 2, 0};
        compare_with_serial(&c, &cases[i].opts);
        tnt_history *h;
        int64_t n;
        int buckets;
        float *w = train(&c, &cases[i].opts, &h, &n, &buckets);
        assert_int_equal(buckets, tnt_get_size() > 1 ? cases[i].buckets : 0);
        if (!first) first = w;
        else if (tnt_get_size() <= 2) assert_memory_equal(w, first, (size_t)n * sizeof(float));
        if (w != first) free(w);
        tnt_history_free(h);
    }
    free(first);
}

/* bfloat16 compression, both engines: every rank ends with bitwise the same weights, runs repeat
 * bitwise, and training stays within bfloat16 rounding of serial (each gradient loses its last 16
 * mantissa bits on the wire: relative 2^-9). One rank has nothing to compress. */
static void test_bf16_compression(void **state) {
    (void)state;
    tnt_comm_mode modes[] = {TNT_COMM_MODE_THREAD, TNT_COMM_MODE_NONBLOCKING};
    run_cfg c = {"adam", {.learning_rate = 0.01f}, false, 2, 0};
    tnt_history *hs;
    int64_t n;
    float *ws = train(&c, NULL, &hs, &n, NULL);
    for (size_t i = 0; i < TNT_ARRAY_LEN(modes); i++) {
        tnt_distribute_opts o = {.comm_mode = modes[i], .compression = TNT_COMPRESSION_BF16,
                                 .has_fusion_threshold = true, .fusion_threshold_kb = 0};
        tnt_history *h, *h2;
        float *w = train(&c, &o, &h, &n, NULL), *w2 = train(&c, &o, &h2, &n, NULL);
        assert_same_on_all_ranks(w, n);
        assert_memory_equal(w, w2, (size_t)n * sizeof(float));
        if (tnt_get_size() == 1) assert_memory_equal(w, ws, (size_t)n * sizeof(float));
        tu_assert_close(w, ws, n, 3e-2, 3e-3, "bf16-compressed weights against serial");
        for (int e = 0; e < c.epochs; e++) {
            double s = tnt_history_get(hs, "loss", e), d = tnt_history_get(h, "loss", e);
            if (!(fabs(s - d) <= 1e-2 * fabs(s))) fail_msg("epoch %d loss: bf16-compressed %.9g, serial %.9g", e, d, s);
        }
        /* the wire really is bfloat16: with more than one rank some weight differs from serial */
        if (tnt_get_size() > 1 && !memcmp(w, ws, (size_t)n * sizeof(float))) fail_msg("bf16 compression changed nothing");
        tnt_history_free(h), tnt_history_free(h2);
        free(w), free(w2);
    }
    tnt_history_free(hs);
    free(ws);
}

/* The engine follows the thread level MPI grants: the comm thread needs MPI_THREAD_SERIALIZED;
 * below (ctest's *_funneled entries ask MPI_Init_thread for MPI_THREAD_FUNNELED) the nonblocking
 * engine runs even when the comm thread is asked for, and training still equals serial (every
 * other test of this program). */
static void test_engine_follows_thread_level(void **state) {
    (void)state;
    int asked = tnt__config_get()->mpi_thread_level, got = tnt__world_thread_level();
    if (tnt_get_size() > 1) assert_int_equal(got, asked); /* Open MPI and MPICH grant what is asked */
    tnt_model *m = model(false);
    tu_ok(tnt_distribute_with(m, &(tnt_distribute_opts){.comm_mode = TNT_COMM_MODE_THREAD}));
    tu_ok(tnt_compile(m, &(tnt_compile_opts){.optimizer = tnt_sgd(0.1f), .loss = TNT_SPARSE_CATEGORICAL_CROSSENTROPY}));
    tnt_dataset *ds = data(BATCH, false);
    tu_ok(tnt_fit(m, ds, NULL, NULL));
    if (tnt_get_size() > 1)
        assert_int_equal(tnt__reducer_mode(m->reducer),
                         got >= TNT__THREAD_SERIALIZED ? TNT_COMM_MODE_THREAD : TNT_COMM_MODE_NONBLOCKING);
    tnt_dataset_free(ds);
    tnt_model_free(m);
}

/* Options given again replace the earlier ones at the next fit; bad ones are errors. */
static void test_distribute_options_replaced_and_checked(void **state) {
    (void)state;
    tnt_model *m = model(false);
    tu_ok(tnt_distribute_with(m, &(tnt_distribute_opts){.has_fusion_threshold = true, .fusion_threshold_kb = 0}));
    tu_ok(tnt_compile(m, &(tnt_compile_opts){.optimizer = tnt_sgd(0.1f), .loss = TNT_SPARSE_CATEGORICAL_CROSSENTROPY}));
    tnt_dataset *ds = data(BATCH, false);
    tu_ok(tnt_fit(m, ds, NULL, NULL));
    if (tnt_get_size() > 1) assert_int_equal(tnt__reducer_num_buckets(m->reducer), 3);
    tu_ok(tnt_distribute(m)); /* back to the configuration's 32 KB */
    tu_ok(tnt_fit(m, ds, NULL, NULL));
    if (tnt_get_size() > 1) assert_int_equal(tnt__reducer_num_buckets(m->reducer), 1);
    tnt_distribute_opts negative = {.has_fusion_threshold = true, .fusion_threshold_kb = -1};
    assert_int_equal(tnt_distribute_with(m, &negative), TNT_ERR_ARG);
    tu_error_contains("fusion_threshold_kb -1");
    assert_int_equal(tnt_distribute_with(m, &(tnt_distribute_opts){.comm_mode = (tnt_comm_mode)7}), TNT_ERR_ARG);
    tu_error_contains("comm_mode 7");
    assert_int_equal(tnt_distribute_with(m, &(tnt_distribute_opts){.compression = (tnt_compression)9}), TNT_ERR_ARG);
    tu_error_contains("compression 9");
    assert_int_equal(tnt_distribute_with(NULL, NULL), TNT_ERR_ARG);
    tnt_dataset_free(ds);
    tnt_model_free(m);
}

static void test_evaluate_predict_equal_serial(void **state) {
    (void)state;
    tnt_model *s = model(false), *d = model(false);
    tu_ok(tnt_distribute(d));
    tnt_compile_opts co = {.loss = TNT_SPARSE_CATEGORICAL_CROSSENTROPY, .metrics = "accuracy,sparse_top_k_categorical_accuracy:2", .seed = 9};
    co.optimizer = tnt_sgd(0.1f);
    tu_ok(tnt_compile(s, &co));
    co.optimizer = tnt_sgd(0.1f);
    tu_ok(tnt_compile(d, &co));
    /* rank-dependent weights on the distributed model: the master's must win (broadcast) */
    int64_t n = tnt_model_count_params(d);
    float *w = malloc((size_t)n * sizeof(float));
    tu_ok(tnt_get_weights(s, w, n));
    if (!tnt_is_master_rank()) for (int64_t i = 0; i < n; i++) w[i] += 1.0f;
    tu_ok(tnt_set_weights(d, w, n));
    tnt_dataset *ds = data(BATCH, false);
    tnt_logs ls, ld;
    tu_ok(tnt_evaluate(s, ds, NULL, &ls));
    tu_ok(tnt_evaluate(d, ds, NULL, &ld));
    for (int k = 0; k < ls.n; k++) {
        double v;
        assert_true(tnt_logs_get(&ld, ls.names[k], &v));
        assert_float_equal(v, ls.values[k], 1e-6 * fabs(ls.values[k]) + 1e-9);
    }
    tnt_tensor *ps, *pd, *pa;
    tu_ok(tnt_predict(s, ds, NULL, &ps));
    tu_ok(tnt_predict(d, ds, NULL, &pd));
    tu_ok(tnt_predict(d, ds, &(tnt_eval_opts){.all_ranks = true}, &pa));
    assert_int_equal(pa->shape.dim[0], N_SAMPLES);
    tu_assert_close(pa->data, ps->data, N_SAMPLES * CLASSES, 1e-6, 1e-7, "predict (all ranks)");
    if (tnt_is_master_rank()) {
        assert_int_equal(pd->shape.dim[0], N_SAMPLES);
        tu_assert_close(pd->data, ps->data, N_SAMPLES * CLASSES, 1e-6, 1e-7, "predict (master)");
    } else {
        assert_int_equal(pd->shape.dim[0], 0);
    }
    tnt_tensor_free(ps), tnt_tensor_free(pd), tnt_tensor_free(pa);
    tnt_dataset_free(ds);
    free(w);
    tnt_model_free(s), tnt_model_free(d);
}

/* A Functional sequence model (shared layer, merge, per-position outputs) with label smoothing and
 * ignore_class: the per-step mean over the positions not ignored uses the global count. */
static tnt_model *sequence_model(bool distributed) {
    enum { T = 5, V = 9 };
    tnt_graph *g = tnt_graph_new();
    tnt_ktensor ids = tnt_graph_input(g, TNT_SHAPE(T), NULL);
    tnt_ktensor e = tnt_call(g, tnt_embedding(V, 4, false, NULL), ids);
    tnt_ktensor h = tnt_call(g, tnt_dense(6, &(tnt_layer_opts){.activation = TNT_ACT_TANH}), e);
    tnt_layer *shared = tnt_dense(6, &(tnt_layer_opts){.activation = TNT_ACT_TANH});
    tnt_ktensor h2 = tnt_call(g, shared, tnt_call(g, shared, h));
    tnt_ktensor out = tnt_call(g, tnt_dense(V, &(tnt_layer_opts){.activation = TNT_ACT_SOFTMAX}),
                               tnt_call2(g, tnt_add(NULL), h, h2));
    tnt_model *m = tnt_functional(g, 1, &ids, 1, &out, NULL);
    tnt_graph_free(g);
    assert_non_null(m);
    if (distributed) tu_ok(tnt_distribute(m));
    tu_ok(tnt_compile(m, &(tnt_compile_opts){.optimizer = tnt_adam(0.02f), .loss = TNT_SPARSE_CATEGORICAL_CROSSENTROPY,
                                             .metrics = "accuracy", .seed = 5, .label_smoothing = 0.1f,
                                             .has_ignore_class = true, .ignore_class = 0}));
    return m;
}

static void test_functional_sequence_model_equals_serial(void **state) {
    (void)state;
    enum { N = 40, T = 5 }; /* the last batch of 4 still spans 4 ranks */
    float x[N * T], y[N * T];
    for (int i = 0; i < N * T; i++) {
        x[i] = (float)((i * 7 + i / 5) % 9);
        y[i] = (i % 4 == 0) ? 0.0f : (float)((int)x[i] * 2 % 9); /* a quarter ignored */
    }
    tnt_dataset *ds = tnt_dataset_batch(tnt_dataset_from_arrays(x, TNT_SHAPE(T), y, TNT_SHAPE(T), N, false), 12, false);
    tnt_model *s = sequence_model(false), *d = sequence_model(true);
    tnt_history *hs, *hd;
    tu_ok(tnt_fit(s, ds, &(tnt_fit_opts){.epochs = 3}, &hs));
    tu_ok(tnt_fit(d, ds, &(tnt_fit_opts){.epochs = 3}, &hd));
    int64_t n = tnt_model_count_params(s);
    float *ws = malloc((size_t)n * sizeof(float)), *wd = malloc((size_t)n * sizeof(float));
    tu_ok(tnt_get_weights(s, ws, n));
    tu_ok(tnt_get_weights(d, wd, n));
    tu_assert_close(wd, ws, n, 1e-5, 1e-6, "functional sequence model weights");
    assert_same_on_all_ranks(wd, n);
    for (int e = 0; e < 3; e++)
        for (int k = 0; k < 2; k++) {
            const char *key = k ? "accuracy" : "loss";
            double a = tnt_history_get(hs, key, e), b = tnt_history_get(hd, key, e);
            if (!(fabs(a - b) <= 1e-5 * fabs(a) + 1e-7)) fail_msg("epoch %d %s: distributed %.9g, serial %.9g", e, key, b, a);
        }
    assert_true(tnt_history_get(hs, "loss", 2) < tnt_history_get(hs, "loss", 0));
    tnt_history_free(hs), tnt_history_free(hd);
    free(ws), free(wd);
    tnt_dataset_free(ds);
    tnt_model_free(s), tnt_model_free(d);
}

/* Hand-sharded data (no_distribute): each rank brings every size-th batch; the result still
 * equals serial training on the whole batches when the shards are interleaved this way. */
static void test_hand_sharded_equals_serial(void **state) {
    (void)state;
    int p = tnt_get_size(), r = tnt_get_rank();
    /* serial: batches of BATCH*p samples; distributed: rank r takes samples [r*BATCH, r*BATCH+BATCH) of each */
    int64_t global = (int64_t)BATCH * p, steps = N_SAMPLES / global;
    if (steps == 0) return;
    float *lx = malloc((size_t)(steps * BATCH * FEATURES) * sizeof(float)), *ly = malloc((size_t)(steps * BATCH) * sizeof(float));
    for (int64_t s = 0; s < steps; s++)
        for (int i = 0; i < BATCH; i++) {
            int64_t src = s * global + r * BATCH + i;
            memcpy(lx + (s * BATCH + i) * FEATURES, xs + src * FEATURES, FEATURES * sizeof(float));
            ly[s * BATCH + i] = ys[src];
        }
    tnt_dataset *local = tnt_dataset_batch(tnt_dataset_from_arrays(lx, TNT_SHAPE(2, 2, 3), ly, TNT_SHAPE(), steps * BATCH, false), BATCH, true);
    tnt_dataset *whole = tnt_dataset_batch(tnt_dataset_take(tnt_dataset_from_arrays(xs, TNT_SHAPE(2, 2, 3), ys, TNT_SHAPE(), N_SAMPLES, false), steps * global), global, true);
    tnt_model *s = model(false), *d = model(false);
    tu_ok(tnt_distribute(d));
    tnt_compile_opts co = {.loss = TNT_SPARSE_CATEGORICAL_CROSSENTROPY, .seed = 4};
    co.optimizer = tnt_adam(0.01f);
    tu_ok(tnt_compile(s, &co));
    co.optimizer = tnt_adam(0.01f);
    tu_ok(tnt_compile(d, &co));
    tnt_history *hs, *hd;
    /* verbose output on the master only must not change which collectives a rank issues */
    FILE *devnull = fopen("/dev/null", "w");
    tu_ok(tnt_fit(s, whole, &(tnt_fit_opts){.epochs = 2, .verbose = 1, .out = devnull}, &hs));
    tu_ok(tnt_fit(d, local, &(tnt_fit_opts){.epochs = 2, .no_distribute = true, .verbose = 1, .out = devnull}, &hd));
    fclose(devnull);
    int64_t n = tnt_model_count_params(s);
    float *a = malloc((size_t)n * sizeof(float)), *b = malloc((size_t)n * sizeof(float));
    tu_ok(tnt_get_weights(s, a, n));
    tu_ok(tnt_get_weights(d, b, n));
    tu_assert_close(b, a, n, 1e-5, 1e-6, "hand-sharded weights");
    assert_float_equal(tnt_history_get(hd, "loss", 1), tnt_history_get(hs, "loss", 1), 1e-5 * tnt_history_get(hs, "loss", 1));
    tnt_history_free(hs), tnt_history_free(hd);
    free(a), free(b), free(lx), free(ly);
    tnt_dataset_free(local), tnt_dataset_free(whole);
    tnt_model_free(s), tnt_model_free(d);
}

/* An unbatched dataset with micro_batch_size: the runtime batches micro x ranks samples. */
/* Global batches smaller than the number of ranks (every one of them with a batch of p - 1, and a
 * last batch of 100 % (p - 1) samples): the ranks without a sample add nothing and training
 * equals serial, as Keras's on one device. */
static void test_batch_smaller_than_ranks_equals_serial(void **state) {
    (void)state;
    int p = tnt_get_size();
    run_cfg c = {"sgd", {.learning_rate = 0.05f, .momentum = 0.9f}, false, 2, p > 2 ? p - 1 : 1};
    compare_with_serial(&c, &(tnt_distribute_opts){0});
    run_cfg a = {"adam", {.learning_rate = 0.01f}, true, 1, 2}; /* conv + dropout, batches of 2 */
    compare_with_serial(&a, &(tnt_distribute_opts){0});
}

static void test_micro_batch_size_equals_serial(void **state) {
    (void)state;
    int64_t micro = 5, global = micro * tnt_get_size();
    tnt_dataset *unbatched = tnt_dataset_shuffle(tnt_dataset_from_arrays(xs, TNT_SHAPE(2, 2, 3), ys, TNT_SHAPE(), N_SAMPLES, false), N_SAMPLES, 42);
    tnt_dataset *whole = data(global, true);
    tnt_model *s = model(false), *d = model(false);
    tu_ok(tnt_distribute(d));
    tnt_compile_opts co = {.loss = TNT_SPARSE_CATEGORICAL_CROSSENTROPY, .seed = 6};
    co.optimizer = tnt_sgd(0.1f);
    tu_ok(tnt_compile(s, &co));
    co.optimizer = tnt_sgd(0.1f);
    tu_ok(tnt_compile(d, &co));
    tu_ok(tnt_fit(s, whole, &(tnt_fit_opts){.epochs = 2}, NULL));
    tu_ok(tnt_fit(d, unbatched, &(tnt_fit_opts){.epochs = 2, .micro_batch_size = micro}, NULL));
    int64_t n = tnt_model_count_params(s);
    float *a = malloc((size_t)n * sizeof(float)), *b = malloc((size_t)n * sizeof(float));
    tu_ok(tnt_get_weights(s, a, n));
    tu_ok(tnt_get_weights(d, b, n));
    tu_assert_close(b, a, n, 1e-5, 1e-6, "micro_batch_size weights");
    tnt_logs ls, ld;
    tu_ok(tnt_evaluate(s, whole, NULL, &ls));
    tu_ok(tnt_evaluate(d, unbatched, &(tnt_eval_opts){.micro_batch_size = micro}, &ld));
    assert_float_equal(ld.values[0], ls.values[0], 1e-5 * ls.values[0]);
    /* without the option an unbatched dataset is still an error, on every rank */
    assert_int_equal(tnt_fit(d, unbatched, NULL, NULL), TNT_ERR_ARG);
    tu_error_contains("not batched");
    free(a), free(b);
    tnt_dataset_free(unbatched), tnt_dataset_free(whole);
    tnt_model_free(s), tnt_model_free(d);
}

/* fit output on the master only, unless TNT_OUTPUT_ON_ALL_DEVICES=1 (--output-on-all-devices) */
static void test_output_on_master_only(void **state) {
    (void)state;
    for (int all = 0; all < 2; all++) {
        if (all) { /* as the launcher's --output-on-all-devices sets it before tnt_init reads it */
            setenv("TNT_OUTPUT_ON_ALL_DEVICES", "1", 1);
            tu_ok(tnt__config_load());
        }
        tnt_model *m = model(false);
        tu_ok(tnt_distribute(m));
        tu_ok(tnt_compile(m, &(tnt_compile_opts){.optimizer = tnt_sgd(0.1f), .loss = TNT_SPARSE_CATEGORICAL_CROSSENTROPY}));
        tnt_dataset *ds = data(BATCH, false);
        char *buf = NULL;
        size_t len = 0;
        FILE *out = open_memstream(&buf, &len);
        tu_ok(tnt_fit(m, ds, &(tnt_fit_opts){.verbose = 2, .out = out}, NULL));
        fclose(out);
        bool printed = strstr(buf, "Epoch 1/1") && strstr(buf, "loss: ");
        assert_int_equal(printed, all || tnt_is_master_rank());
        free(buf);
        tnt_dataset_free(ds);
        tnt_model_free(m);
    }
    unsetenv("TNT_OUTPUT_ON_ALL_DEVICES");
    tu_ok(tnt__config_load());
}

/* The tutorials' rank-dependent code: a callback given on the master only, which stops training
 * there; every rank stops at the same epoch with the same weights. */
static tnt_status count_and_stop(tnt_model *m, int epoch, const tnt_logs *logs, void *user) {
    (void)logs;
    ++*(int *)user;
    if (epoch == 1) tnt_model_stop_training(m);
    return TNT_OK;
}

static void test_callback_on_master_only(void **state) {
    (void)state;
    tnt_model *m = model(false);
    tu_ok(tnt_distribute(m));
    tu_ok(tnt_compile(m, &(tnt_compile_opts){.optimizer = tnt_sgd(0.1f), .loss = TNT_SPARSE_CATEGORICAL_CROSSENTROPY}));
    tnt_dataset *ds = data(BATCH, false);
    int calls = 0;
    tnt_callback cb = {.user = &calls, .on_epoch_end = count_and_stop};
    bool master = tnt_is_master_rank();
    tnt_history *h;
    tu_ok(tnt_fit(m, ds, &(tnt_fit_opts){.epochs = 5, .callbacks = master ? &cb : NULL, .n_callbacks = master}, &h));
    assert_int_equal(tnt_history_epochs(h), 2);
    assert_int_equal(calls, master ? 2 : 0);
    int64_t n = tnt_model_count_params(m);
    float *w = malloc((size_t)n * sizeof(float));
    tu_ok(tnt_get_weights(m, w, n));
    assert_same_on_all_ranks(w, n);
    free(w);
    tnt_history_free(h);
    tnt_dataset_free(ds);
    tnt_model_free(m);
}

/* aggregate_logs=False (local_logs): the epoch loss of this rank's shares; weighted by the
 * shares' sizes, the ranks' figures average to the global one. */
static tnt_status record_loss(tnt_model *m, int epoch, const tnt_logs *logs, void *user) {
    (void)m, (void)epoch;
    return tnt_logs_get(logs, "loss", (double *)user) ? TNT_OK : TNT_ERR_ARG;
}

static void test_local_logs(void **state) {
    (void)state;
    tnt_model *m = model(false);
    tu_ok(tnt_distribute(m));
    tu_ok(tnt_compile(m, &(tnt_compile_opts){.optimizer = tnt_sgd(0.1f), .loss = TNT_SPARSE_CATEGORICAL_CROSSENTROPY}));
    tnt_dataset *ds = data(BATCH, false);
    double local = NAN, global = NAN;
    tnt_callback cbs[2] = {{.user = &local, .on_epoch_end = record_loss, .local_logs = true},
                           {.user = &global, .on_epoch_end = record_loss}};
    tu_ok(tnt_fit(m, ds, &(tnt_fit_opts){.epochs = 1, .callbacks = cbs, .n_callbacks = 2}, NULL));
    int p = tnt_get_size(), r = tnt_get_rank();
    double mine = 0; /* samples this rank saw: its shares of 6 batches of 16 and one of 4 */
    for (int b = 0; b < 7; b++) {
        int n = b < 6 ? BATCH : N_SAMPLES - 6 * BATCH;
        mine += n / p + (r < n % p);
    }
    double sums[2] = {local * mine, mine};
    tu_ok(tnt__allreduce_sum_f64(sums, 2));
    assert_float_equal(sums[1], N_SAMPLES, 0);
    assert_float_equal(sums[0] / sums[1], global, 1e-6 * fabs(global));
    if (p > 1) { /* the shares differ, so some rank's own figure differs from the global one */
        double diff = fabs(local - global);
        tu_ok(tnt__allreduce_sum_f64(&diff, 1));
        assert_true(diff > 1e-6);
    }
    tnt_dataset_free(ds);
    tnt_model_free(m);
}

static void test_bad_input_fails_everywhere(void **state) {
    (void)state;
    int p = tnt_get_size(), r = tnt_get_rank();
    if (p == 1) return;
    /* a rank with a different batch size */
    tnt_model *m = model(false);
    tu_ok(tnt_distribute(m));
    tu_ok(tnt_compile(m, &(tnt_compile_opts){.optimizer = tnt_sgd(0.1f), .loss = TNT_SPARSE_CATEGORICAL_CROSSENTROPY}));
    tnt_dataset *ds = data(r == p - 1 ? BATCH + 1 : BATCH, false);
    assert_int_equal(tnt_fit(m, ds, NULL, NULL), TNT_ERR_MPI);
    tu_error_contains("dataset");
    tu_error_contains("rank");
    tnt_dataset_free(ds);
    /* a rank with a different model */
    tnt_model *other = tnt_sequential("m");
    tu_ok(tnt_model_add(other, tnt_input_layer(TNT_SHAPE(2, 2, 3), NULL)));
    tu_ok(tnt_model_add(other, tnt_flatten(NULL)));
    tu_ok(tnt_model_add(other, tnt_dense(r == 1 ? 4 : 5, NULL)));
    tu_ok(tnt_model_add(other, tnt_dense(CLASSES, &(tnt_layer_opts){.activation = TNT_ACT_SOFTMAX})));
    tu_ok(tnt_distribute(other));
    tu_ok(tnt_compile(other, &(tnt_compile_opts){.optimizer = tnt_sgd(0.1f), .loss = TNT_SPARSE_CATEGORICAL_CROSSENTROPY}));
    ds = data(BATCH, false);
    assert_int_equal(tnt_fit(other, ds, NULL, NULL), TNT_ERR_MPI);
    tu_error_contains("model");
    tnt_dataset_free(ds);
    tnt_model_free(other);
    /* a rank with a layer frozen that the others train: it would update other weights */
    tnt_model *frozen = model(false);
    tu_ok(tnt_distribute(frozen));
    tu_ok(tnt_compile(frozen, &(tnt_compile_opts){.optimizer = tnt_sgd(0.1f), .loss = TNT_SPARSE_CATEGORICAL_CROSSENTROPY}));
    tu_ok(tnt_layer_set_trainable(tnt_model_layer(frozen, tnt_model_num_layers(frozen) - 1), r != 1));
    ds = data(BATCH, false);
    assert_int_equal(tnt_fit(frozen, ds, NULL, NULL), TNT_ERR_MPI);
    tu_error_contains("model");
    tnt_dataset_free(ds);
    tnt_model_free(frozen);
    /* a rank with another compression: its allreduce would read the others' bytes wrongly */
    tnt_model *mixed = model(false);
    tu_ok(tnt_distribute_with(mixed, &(tnt_distribute_opts){.compression = r == 1 ? TNT_COMPRESSION_BF16 : TNT_COMPRESSION_NONE}));
    tu_ok(tnt_compile(mixed, &(tnt_compile_opts){.optimizer = tnt_sgd(0.1f), .loss = TNT_SPARSE_CATEGORICAL_CROSSENTROPY}));
    ds = data(BATCH, false);
    assert_int_equal(tnt_fit(mixed, ds, NULL, NULL), TNT_ERR_MPI);
    tu_error_contains("compression");
    tnt_dataset_free(ds);
    tnt_model_free(mixed);
    /* a bad label that only the last rank sees */
    float y_bad[N_SAMPLES];
    memcpy(y_bad, ys, sizeof y_bad);
    y_bad[BATCH - 1] = 9; /* last sample of the first batch: the last rank's share */
    ds = tnt_dataset_batch(tnt_dataset_from_arrays(xs, TNT_SHAPE(2, 2, 3), y_bad, TNT_SHAPE(), N_SAMPLES, false), BATCH, false);
    assert_int_equal(tnt_fit(m, ds, NULL, NULL), TNT_ERR_ARG);
    tu_error_contains("9");
    if (r != p - 1) tu_error_contains("rank");
    /* a bad argument on one rank only */
    tnt_dataset_free(ds);
    ds = data(BATCH, false);
    assert_int_not_equal(tnt_fit(m, ds, &(tnt_fit_opts){.epochs = 2, .initial_epoch = r == 0 ? 5 : 0}, NULL), TNT_OK);
    tu_error_contains("initial_epoch");
    tnt_dataset_free(ds);
    tnt_model_free(m);
}

int main(int argc, char **argv) {
    if (tnt_init(&argc, &argv) != TNT_OK) {
        fprintf(stderr, "tnt_init: %s\n", tnt_last_error());
        return 1;
    }
    make_data();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_optimizers_equal_serial),
        cmocka_unit_test(test_distribute_options),
        cmocka_unit_test(test_distribute_options_replaced_and_checked),
        cmocka_unit_test(test_bf16_compression),
        cmocka_unit_test(test_engine_follows_thread_level),
        cmocka_unit_test(test_evaluate_predict_equal_serial),
        cmocka_unit_test(test_hand_sharded_equals_serial),
        cmocka_unit_test(test_functional_sequence_model_equals_serial),
        cmocka_unit_test(test_micro_batch_size_equals_serial),
        cmocka_unit_test(test_batch_smaller_than_ranks_equals_serial),
        cmocka_unit_test(test_output_on_master_only),
        cmocka_unit_test(test_callback_on_master_only),
        cmocka_unit_test(test_local_logs),
        cmocka_unit_test(test_bad_input_fails_everywhere),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    tnt_finalize();
    return rc;
}

/* test_gpu_model_dist.c: data-parallel training on the emulated device (TNT_GPU_EMULATE=1), run by
 * ctest under mpirun with 1 and 2 ranks (two ranks share the one emulated device, as two ranks may
 * share one GPU). Gradients are host-staged: each bucket goes to the host once backward wrote it,
 * through the existing reducer, and the sums come back up before the optimizer runs on the device.
 * Each rank trains a serial device model (every sample, no distribution) and a distributed one,
 * with the flat and the node-aware reducer: the weights must equal serial within 1e-5 and be
 * bitwise the same on every rank. A CPU rank beside a GPU rank fails the fingerprint check on
 * every rank with a message naming the device; the sharded optimizer has no device path. */
#include "testutil.h"

#include "comm/comm.h"
#include "core/config.h"
#include "gpu/gpu.h"
#include "model/device.h"
#include "model/model.h"
#include "training/device_loss.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { N = 100, FEAT = 12, CLASSES = 3, BATCH = 16 }; /* 100 = 6 x 16 + 4: a last partial batch */

static float xs[N * FEAT], ys[N];
/* emulated: the CPU's sgemm and formulas; a real GPU (scripts/gpu_check.sh runs this program on
 * one with TNT_GPU_EMULATE=0) sums in other orders: GPU-DESIGN.md section 5's 1e-3 */
static double RTOL = 1e-5, ATOL = 1e-6;

static void make_data(void) {
    tu_fill(xs, N * FEAT, 13);
    for (int i = 0; i < N; i++) {
        float s[3] = {0};
        for (int j = 0; j < FEAT; j++) s[j % 3] += xs[i * FEAT + j] * (j < 6 ? 1.0f : -0.5f);
        ys[i] = (float)(s[0] > s[1] ? (s[0] > s[2] ? 0 : 2) : (s[1] > s[2] ? 1 : 2));
    }
}

static int64_t batch_size = BATCH;
static bool no_distribute; /* each rank feeds its own whole batches (Tarantella's unsplit datasets) */
static const float *labels = ys;
static bool used_staging; /* the last train() on the device staged its buckets in page-locked memory */
static bool used_nccl;    /* ... or summed them with NCCL (the stand-in, emulated) */

static tnt_dataset *dataset(void) {
    tnt_dataset *ds = tnt_dataset_from_arrays(xs, TNT_SHAPE(FEAT), labels, TNT_SHAPE(), N, false);
    return tnt_dataset_batch(tnt_dataset_shuffle(ds, N, 42), batch_size, false);
}

static tnt_model *model(void) {
    tnt_model *m = tnt_sequential("m");
    tu_ok(tnt_model_add(m, tnt_input_layer(TNT_SHAPE(FEAT), NULL)));
    tu_ok(tnt_model_add(m, tnt_dense(16, &(tnt_layer_opts){.activation = TNT_ACT_TANH})));
    tu_ok(tnt_model_add(m, tnt_dropout(0.2f, 0, NULL)));
    tu_ok(tnt_model_add(m, tnt_dense(8, &(tnt_layer_opts){.activation = TNT_ACT_RELU})));
    tu_ok(tnt_model_add(m, tnt_dense(CLASSES, &(tnt_layer_opts){.activation = TNT_ACT_SOFTMAX})));
    return m;
}

static float *train(const tnt_distribute_opts *dist, tnt_device dev, int64_t *n, bool *on_device) {
    tnt_model *m = model();
    if (dist) tu_ok(tnt_distribute_with(m, dist));
    tu_ok(tnt_compile(m, &(tnt_compile_opts){.optimizer = tnt_adam(0.01f), .loss = TNT_SPARSE_CATEGORICAL_CROSSENTROPY,
                                             .seed = 3, .device = dev}));
    tnt_dataset *ds = dataset();
    tu_ok(tnt_fit(m, ds, &(tnt_fit_opts){.epochs = 2, .no_distribute = no_distribute}, NULL));
    *n = tnt_model_count_params(m);
    *on_device = m->on_device;
    used_staging = m->dev && m->dev->staging;
    used_nccl = m->dev && m->dev->nccl;
    float *w = malloc((size_t)*n * sizeof(float));
    tu_ok(tnt_get_weights(m, w, *n));
    tnt_dataset_free(ds);
    tnt_model_free(m);
    return w;
}

static void test_ranks_equal_serial(void **state) {
    (void)state;
    int64_t n, n2;
    bool dev;
    float *serial = train(NULL, TNT_DEVICE_GPU, &n, &dev);
    assert_true(dev);
    float *cpu = train(NULL, TNT_DEVICE_CPU, &n2, &dev);
    tu_assert_close(serial, cpu, n, RTOL, ATOL, "serial: device against CPU");
    free(cpu);
    const tnt_reducer_kind kinds[] = {TNT_REDUCER_FLAT, TNT_REDUCER_NODE};
    for (size_t k = 0; k < 2; k++) {
        char what[96];
        snprintf(what, sizeof what, "%d ranks, %s reducer, against one", tnt_get_size(), k ? "node-aware" : "flat");
        float *w = train(&(tnt_distribute_opts){.reducer = kinds[k], .fusion_threshold_kb = 1, .has_fusion_threshold = true},
                         TNT_DEVICE_GPU, &n2, &dev);
        assert_true(dev);
        assert_int_equal(n, n2);
        tu_assert_close(w, serial, n, RTOL, ATOL, what);
        float *master = malloc((size_t)n * sizeof(float));
        memcpy(master, w, (size_t)n * sizeof(float));
        tu_ok(tnt__bcast_f32(master, n));
        tu_assert_bitwise(w, master, n, "weights on every rank");
        free(master), free(w);
    }
    free(serial);
}

/* The buckets staged in page-locked memory on the copy stream, each handed over once the next is
 * queued, train bitwise as the pageable staging where the host waits for every copy: with each
 * reducer, and with a bucket per layer (1 KB fusion) or one for the whole model. */
static void test_pinned_staging_bitwise(void **state) {
    (void)state;
    const tnt_reducer_kind kinds[] = {TNT_REDUCER_FLAT, TNT_REDUCER_NODE};
    for (size_t k = 0; k < 4; k++) {
        tnt_distribute_opts o = {.reducer = kinds[k % 2], .fusion_threshold_kb = k < 2 ? 1 : 4096,
                                 .has_fusion_threshold = true};
        int64_t n, n2;
        bool dev;
        tnt__dev_pinned_staging = false;
        float *pageable = train(&o, TNT_DEVICE_GPU, &n, &dev);
        assert_true(dev);
        assert_false(used_staging);
        tnt__dev_pinned_staging = true;
        float *pinned = train(&o, TNT_DEVICE_GPU, &n2, &dev);
        assert_true(dev);
        assert_int_equal(used_staging, tnt_get_size() > 1); /* one rank reduces nothing */
        assert_int_equal(n, n2);
        char what[96];
        snprintf(what, sizeof what, "pinned against pageable staging, case %zu, %d ranks", k, tnt_get_size());
        tu_assert_bitwise(pinned, pageable, n, what);
        free(pageable), free(pinned);
    }
}

/* global batches of 1: on 2 ranks one share is empty every step (its rank adds zero gradients) */
static void test_empty_shares(void **state) {
    (void)state;
    batch_size = 1;
    int64_t n;
    bool dev;
    float *serial = train(NULL, TNT_DEVICE_CPU, &n, &dev);
    float *w = train(&(tnt_distribute_opts){0}, TNT_DEVICE_GPU, &n, &dev);
    assert_true(dev);
    tu_assert_close(w, serial, n, RTOL, ATOL, "global batches of 1 on the device against serial");
    free(w), free(serial);
    batch_size = BATCH;
}

static void test_cpu_rank_beside_gpu_rank(void **state) {
    (void)state;
    if (tnt_get_size() == 1) return;
    tnt_model *m = model();
    tu_ok(tnt_distribute(m));
    tu_ok(tnt_compile(m, &(tnt_compile_opts){.optimizer = tnt_sgd(0.1f), .loss = TNT_SPARSE_CATEGORICAL_CROSSENTROPY,
                                             .device = tnt_get_rank() == 1 ? TNT_DEVICE_CPU : TNT_DEVICE_GPU}));
    tnt_dataset *ds = dataset();
    assert_int_equal(tnt_fit(m, ds, NULL, NULL), TNT_ERR_MPI);
    tu_error_contains("training device");
    tu_error_contains("rank 1");
    tnt_model_free(m);
    /* the sharded optimizer: auto stays on the CPU on every rank, gpu fails on every rank */
    m = model();
    tu_ok(tnt_distribute_with(m, &(tnt_distribute_opts){.reducer = TNT_REDUCER_SHARDED}));
    tu_ok(tnt_compile(m, &(tnt_compile_opts){.optimizer = tnt_sgd(0.1f), .loss = TNT_SPARSE_CATEGORICAL_CROSSENTROPY,
                                             .device = TNT_DEVICE_AUTO}));
    tu_ok(tnt_fit(m, ds, NULL, NULL));
    assert_false(m->on_device);
    tu_ok(tnt_compile(m, &(tnt_compile_opts){.optimizer = tnt_sgd(0.1f), .loss = TNT_SPARSE_CATEGORICAL_CROSSENTROPY,
                                             .device = TNT_DEVICE_GPU}));
    assert_int_equal(tnt_fit(m, ds, NULL, NULL), TNT_ERR_UNSUPPORTED);
    tu_error_contains("sharded");
    tnt_model_free(m);
    tnt_dataset_free(ds);
}

/* NCCL's path on the device (buckets of the reducer's plan summed in place on the copy stream,
 * the host reducer idle, the optimizer waiting for the last sum), run on the emulated device with
 * a stand-in for ncclAllReduce that sums through the host with MPI: bitwise the host-staged flat
 * reducer's result (the same sums of the same buckets), one sum per bucket and step. */
static int standin_calls;
static tnt_status standin(float *d, int64_t n, tnt__gpu_stream stream) {
    float *h = malloc((size_t)n * sizeof(float));
    tnt_status s = h ? tnt__gpu_copy_to_host(h, d, (size_t)n * sizeof(float), stream) : TNT_ERR_NOMEM;
    if (s == TNT_OK) s = tnt__gpu_sync(stream);
    if (s == TNT_OK) s = tnt__allreduce_sum_f32(h, n);
    if (s == TNT_OK) s = tnt__gpu_copy_to_device(d, h, (size_t)n * sizeof(float), stream);
    if (s == TNT_OK) s = tnt__gpu_sync(stream);
    free(h);
    standin_calls++;
    return s;
}

static void set_gpu_comm(int comm) { ((tnt__config *)tnt__config_get())->gpu_comm = comm; } /* tests only */

static void test_nccl_path(void **state) {
    (void)state;
    if (!tnt__gpu_emulated()) return; /* a real GPU: scripts/gpu_check.sh runs 2 ranks on it */
    tnt__gpu_nccl_standin = standin;
    for (int kb = 0; kb <= 4096; kb += 4096) { /* a bucket per layer, one for the model */
        tnt_distribute_opts o = {.reducer = TNT_REDUCER_FLAT, .fusion_threshold_kb = kb, .has_fusion_threshold = true};
        int64_t n, n2;
        bool dev;
        set_gpu_comm(TNT__GPU_COMM_HOST);
        float *host = train(&o, TNT_DEVICE_GPU, &n, &dev);
        assert_true(dev);
        assert_false(used_nccl);
        set_gpu_comm(TNT__GPU_COMM_AUTO);
        standin_calls = 0;
        float *nccl = train(&o, TNT_DEVICE_GPU, &n2, &dev);
        assert_true(dev);
        assert_int_equal(n, n2);
        char what[96];
        snprintf(what, sizeof what, "NCCL's path (stand-in), %lld KB buckets, %d ranks", (long long)kb, tnt_get_size());
        if (tnt_get_size() == 1) { /* one rank sums nothing */
            assert_false(used_nccl);
            assert_int_equal(standin_calls, 0);
        } else {
            assert_true(used_nccl);
            assert_false(used_staging);
            /* 2 epochs of 7 steps; a bucket per layer: 3 Dense layers */
            assert_int_equal(standin_calls, 14 * (kb == 0 ? 3 : 1));
        }
        tu_assert_bitwise(nccl, host, n, what);
        free(host), free(nccl);
    }
    /* global batches of 1: on 2 ranks one share is empty every step; that rank sums zeros */
    batch_size = 1;
    int64_t n;
    bool dev;
    set_gpu_comm(TNT__GPU_COMM_HOST);
    float *host = train(&(tnt_distribute_opts){0}, TNT_DEVICE_GPU, &n, &dev);
    set_gpu_comm(TNT__GPU_COMM_AUTO);
    standin_calls = 0;
    float *nccl = train(&(tnt_distribute_opts){0}, TNT_DEVICE_GPU, &n, &dev);
    assert_int_equal(used_nccl, tnt_get_size() > 1);
    assert_int_equal(standin_calls, tnt_get_size() > 1 ? 2 * N : 0); /* one bucket, 2 epochs of N steps */
    tu_assert_bitwise(nccl, host, n, "NCCL's path (stand-in), empty shares");
    free(host), free(nccl);
    batch_size = BATCH;
    tnt__gpu_nccl_standin = NULL;
    set_gpu_comm(TNT__GPU_COMM_AUTO);
}

static void set_device_loss(bool on) { ((tnt__config *)tnt__config_get())->gpu_device_loss = on; } /* tests only */

/* The loss gradient on the device (TNT_GPU_DEVICE_LOSS=1, training/device_loss.c: the counts
 * agreed before backward without the loss value, the host's loss after it) against the host's
 * (=0), with the flat and the node-aware reducer: the same weights on every rank count (bitwise
 * where the split feeds scale by 1 / the global batch alike; within 1e-6 for unsplit feeds, whose
 * host gradients are scaled by the global count afterwards in float), and serial's. */
static void test_device_loss_ranks(void **state) {
    (void)state;
    const tnt_reducer_kind kinds[] = {TNT_REDUCER_FLAT, TNT_REDUCER_NODE};
    for (int unsplit = 0; unsplit < 2; unsplit++)
        for (size_t k = 0; k < 2; k++) {
            tnt_distribute_opts o = {.reducer = kinds[k], .fusion_threshold_kb = 1, .has_fusion_threshold = true};
            int64_t n, n2;
            bool dev;
            no_distribute = unsplit;
            set_device_loss(false);
            float *host = train(&o, TNT_DEVICE_GPU, &n, &dev);
            assert_true(dev);
            set_device_loss(true);
            const int64_t before = tnt__device_loss_launches;
            float *device = train(&o, TNT_DEVICE_GPU, &n2, &dev);
            assert_true(dev);
            assert_int_equal(n, n2);
            assert_int_equal(tnt__device_loss_launches - before, 14); /* 2 epochs of 7 steps (a share each) */
            char what[128];
            snprintf(what, sizeof what, "device loss against the host's, %d ranks, %s reducer, %s feeds", tnt_get_size(),
                     k ? "node-aware" : "flat", unsplit ? "unsplit" : "split");
            if (unsplit) tu_assert_close(device, host, n, 1e-6, 1e-8, what);
            else tu_assert_bitwise(device, host, n, what);
            float *master = malloc((size_t)n * sizeof(float));
            memcpy(master, device, (size_t)n * sizeof(float));
            tu_ok(tnt__bcast_f32(master, n));
            tu_assert_bitwise(device, master, n, "weights on every rank, device loss");
            free(master), free(host), free(device);
        }
    no_distribute = false;
    /* a bad label in one rank's share: every rank fails the step as with the host's loss, and the
     * weights stay those of the steps before, as the host's */
    float bad[N];
    memcpy(bad, ys, sizeof bad);
    bad[37] = (float)CLASSES;
    labels = bad;
    tnt_status got[2];
    float *w[2];
    int64_t n[2];
    for (int on = 0; on < 2; on++) {
        set_device_loss(on);
        tnt_model *m = model();
        tu_ok(tnt_distribute(m));
        tu_ok(tnt_compile(m, &(tnt_compile_opts){.optimizer = tnt_adam(0.01f), .loss = TNT_SPARSE_CATEGORICAL_CROSSENTROPY,
                                                 .seed = 3, .device = TNT_DEVICE_GPU}));
        tnt_dataset *ds = dataset();
        got[on] = tnt_fit(m, ds, &(tnt_fit_opts){.epochs = 1}, NULL);
        if (got[on] == TNT_ERR_ARG) tu_error_contains("label 3 of sample");
        n[on] = tnt_model_count_params(m);
        w[on] = malloc((size_t)n[on] * sizeof(float));
        tu_ok(tnt_get_weights(m, w[on], n[on]));
        tnt_dataset_free(ds);
        tnt_model_free(m);
    }
    labels = ys;
    set_device_loss(true);
    assert_int_not_equal(got[1], TNT_OK);
    assert_int_equal(got[1], got[0]);
    assert_int_equal(n[0], n[1]);
    tu_assert_bitwise(w[1], w[0], n[0], "weights after a bad label on one rank: device loss against the host's");
    free(w[0]), free(w[1]);
}

/* Ranks with different TNT_GPU_COMM settings fail the fingerprint check on every rank, naming it */
static void test_gpu_comm_fingerprint(void **state) {
    (void)state;
    if (tnt_get_size() == 1) return;
    set_gpu_comm(tnt_get_rank() == 1 ? TNT__GPU_COMM_NCCL : TNT__GPU_COMM_HOST);
    tnt_model *m = model();
    tu_ok(tnt_distribute(m));
    tu_ok(tnt_compile(m, &(tnt_compile_opts){.optimizer = tnt_sgd(0.1f), .loss = TNT_SPARSE_CATEGORICAL_CROSSENTROPY,
                                             .device = TNT_DEVICE_GPU}));
    tnt_dataset *ds = dataset();
    assert_int_equal(tnt_fit(m, ds, NULL, NULL), TNT_ERR_MPI);
    tu_error_contains("TNT_GPU_COMM");
    tu_error_contains("rank 1");
    set_gpu_comm(TNT__GPU_COMM_AUTO);
    tu_ok(tnt_fit(m, ds, NULL, NULL)); /* alike again: it trains */
    assert_true(m->on_device);
    tnt_model_free(m);
    tnt_dataset_free(ds);
}

/* TNT_DEVICE=auto (ctest's test_gpu_model_dist_np2_auto): tnt_init opened a GPU on every rank and
 * a model compiled without a device trains there, as the CPU model does */
static void test_setting_auto(void **state) {
    (void)state;
    if (tnt__config_get()->device != TNT__DEVICE_AUTO) return; /* the run without the setting */
    assert_non_null(strstr(tnt_gpu_status(), "gpu "));
    int64_t n;
    bool dev;
    float *w = train(&(tnt_distribute_opts){0}, TNT_DEVICE_DEFAULT, &n, &dev);
    assert_true(dev);
    float *cpu = train(NULL, TNT_DEVICE_CPU, &n, &dev);
    assert_false(dev);
    tu_assert_close(w, cpu, n, RTOL, ATOL, "TNT_DEVICE=auto, distributed, against the CPU serially");
    free(w), free(cpu);
}

int main(int argc, char **argv) {
    if (!getenv("TNT_GPU_EMULATE")) setenv("TNT_GPU_EMULATE", "1", 1); /* read by tnt_init; ctest sets it too */
    if (tnt_init(&argc, &argv) != TNT_OK) {
        fprintf(stderr, "tnt_init: %s\n", tnt_last_error());
        return 1;
    }
    make_data();
    if (!tnt__gpu_emulated()) RTOL = 1e-3, ATOL = 1e-4;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ranks_equal_serial),
        cmocka_unit_test(test_pinned_staging_bitwise),
        cmocka_unit_test(test_empty_shares),
        cmocka_unit_test(test_cpu_rank_beside_gpu_rank),
        cmocka_unit_test(test_setting_auto),
        cmocka_unit_test(test_nccl_path),
        cmocka_unit_test(test_gpu_comm_fingerprint),
        cmocka_unit_test(test_device_loss_ranks),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    tnt_finalize();
    return rc;
}

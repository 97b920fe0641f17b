/* test_callbacks_dist.c: the built-in callbacks on a distributed model, run by ctest under mpirun
 * with 2 ranks. EarlyStopping stops every rank at the same epoch and TerminateOnNaN at the same
 * batch (logs are global figures); master_only callbacks (CSVLogger) run on the master only;
 * ModelCheckpoint runs everywhere but only the master writes files. */
#include "testutil.h"

#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { N = 64, FEATURES = 6, CLASSES = 3, BATCH = 16 };
static float xs[N * FEATURES], ys[N];

static tnt_model *model(void) {
    tnt_model *m = tnt_sequential("m");
    tu_ok(tnt_model_add(m, tnt_input_layer(TNT_SHAPE(FEATURES), NULL)));
    tu_ok(tnt_model_add(m, tnt_dense(8, &(tnt_layer_opts){.activation = TNT_ACT_TANH})));
    tu_ok(tnt_model_add(m, tnt_dense(CLASSES, &(tnt_layer_opts){.activation = TNT_ACT_SOFTMAX})));
    tu_ok(tnt_distribute(m));
    tu_ok(tnt_compile(m, &(tnt_compile_opts){.optimizer = tnt_sgd(0.3f), .loss = TNT_SPARSE_CATEGORICAL_CROSSENTROPY,
                                             .metrics = "accuracy"}));
    return m;
}

static tnt_dataset *data(void) {
    return tnt_dataset_batch(tnt_dataset_from_arrays(xs, TNT_SHAPE(FEATURES), ys, TNT_SHAPE(), N, false), BATCH, false);
}

static void assert_same_int(int v) {
    int lo, hi;
    MPI_Allreduce(&v, &lo, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(&v, &hi, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (lo != hi) fail_msg("rank %d has %d, ranks range from %d to %d", tnt_get_rank(), v, lo, hi);
}

static bool exists(const char *path) { return access(path, F_OK) == 0; }

/* the master's process id, on every rank: file names unique to this run */
static int run_tag(void) {
    int tag = (int)getpid();
    MPI_Bcast(&tag, 1, MPI_INT, 0, MPI_COMM_WORLD);
    return tag;
}

static void test_early_stopping_same_epoch(void **state) {
    (void)state;
    tnt_dataset *ds = data();
    /* forced: only the first epoch improves by 10; patience 1 stops at epoch 1 */
    tnt_model *m = model();
    tnt_callback es = tnt_early_stopping(&(tnt_early_stopping_opts){.monitor = "loss", .min_delta = 10, .patience = 1,
                                                                    .restore_best_weights = true});
    tnt_history *h;
    tu_ok(tnt_fit(m, ds, &(tnt_fit_opts){.epochs = 8, .callbacks = &es, .n_callbacks = 1}, &h));
    assert_int_equal(tnt_history_epochs(h), 2);
    assert_int_equal(tnt_early_stopping_stopped_epoch(&es), 1);
    tnt_history_free(h);
    tnt_callback_free(&es);
    tnt_model_free(m);
    /* data-dependent: accuracy must improve by 0.02 each epoch */
    m = model();
    es = tnt_early_stopping(&(tnt_early_stopping_opts){.monitor = "val_accuracy", .min_delta = 0.02, .patience = 1});
    tu_ok(tnt_fit(m, ds, &(tnt_fit_opts){.epochs = 30, .validation_data = ds, .callbacks = &es, .n_callbacks = 1}, &h));
    assert_same_int(tnt_history_epochs(h));
    assert_same_int(tnt_early_stopping_stopped_epoch(&es));
    int64_t n = tnt_model_count_params(m);
    float *w = malloc((size_t)n * sizeof(float)), *w0 = malloc((size_t)n * sizeof(float));
    tu_ok(tnt_get_weights(m, w, n));
    memcpy(w0, w, (size_t)n * sizeof(float));
    MPI_Bcast(w0, (int)n, MPI_FLOAT, 0, MPI_COMM_WORLD);
    assert_memory_equal(w, w0, (size_t)n * sizeof(float));
    free(w), free(w0);
    tnt_history_free(h);
    tnt_callback_free(&es);
    tnt_model_free(m);
    tnt_dataset_free(ds);
}

static tnt_status count(tnt_model *m, int epoch, const tnt_logs *logs, void *user) {
    (void)m, (void)epoch, (void)logs;
    (*(int *)user)++;
    return TNT_OK;
}

static tnt_status count_batch(tnt_model *m, int64_t batch, const tnt_logs *logs, void *user) {
    (void)m, (void)batch, (void)logs;
    (*(int *)user)++;
    return TNT_OK;
}

/* NaN in one sample of batch 1 reaches one rank's data only, but the batch logs are global: every
 * rank stops after batch 1, with no rank left waiting in a collective. */
static void test_terminate_on_nan_same_batch(void **state) {
    (void)state;
    float saved = xs[1 * BATCH * FEATURES];
    xs[1 * BATCH * FEATURES] = NAN;
    tnt_dataset *ds = data();
    tnt_model *m = model();
    int batches = 0;
    tnt_callback cbs[2] = {tnt_terminate_on_nan(), {.user = &batches, .on_train_batch_end = count_batch}};
    tnt_history *h;
    tu_ok(tnt_fit(m, ds, &(tnt_fit_opts){.epochs = 5, .callbacks = cbs, .n_callbacks = 2}, &h));
    assert_same_int(batches);
    assert_int_equal(batches, 2);
    assert_int_equal(tnt_history_epochs(h), 1);
    tnt_history_free(h);
    tnt_callback_free(&cbs[0]);
    tnt_dataset_free(ds);
    tnt_model_free(m);
    xs[1 * BATCH * FEATURES] = saved;
}

static void test_master_only(void **state) {
    (void)state;
    tnt_dataset *ds = data();
    tnt_model *m = model();
    int r = tnt_get_rank();
    char csv[128];
    /* each rank names its own file: only the master's may appear */
    snprintf(csv, sizeof csv, "/tmp/tnt_cbdist_%d_r%d.csv", run_tag(), r);
    unlink(csv);
    int calls = 0;
    tnt_callback cbs[2] = {tnt_csv_logger(csv, 0, false), {.user = &calls, .on_epoch_end = count, .master_only = true}};
    tu_ok(tnt_fit(m, ds, &(tnt_fit_opts){.epochs = 3, .callbacks = cbs, .n_callbacks = 2}, NULL));
    assert_int_equal(calls, tnt_is_master_rank() ? 3 : 0);
    assert_int_equal(exists(csv), tnt_is_master_rank());
    if (tnt_is_master_rank()) {
        FILE *f = fopen(csv, "r");
        char line[256];
        int lines = 0;
        while (fgets(line, sizeof line, f)) lines++;
        fclose(f);
        assert_int_equal(lines, 4);
    }
    unlink(csv);
    tnt_callback_free(&cbs[0]);
    tnt_dataset_free(ds);
    tnt_model_free(m);
}

static void test_checkpoint_master_writes(void **state) {
    (void)state;
    tnt_dataset *ds = data();
    tnt_model *m = model();
    int r = tnt_get_rank();
    char own[160], shared[160], path[200];
    int tag = run_tag();
    snprintf(own, sizeof own, "/tmp/tnt_cbdist_%d_r%d-{epoch:02d}.h5", tag, r);
    snprintf(shared, sizeof shared, "/tmp/tnt_cbdist_%d_shared-{epoch:02d}-{loss:.2f}.h5", tag);
    tnt_callback cbs[2] = {tnt_model_checkpoint(own, &(tnt_checkpoint_opts){.save_weights_only = true}),
                           tnt_model_checkpoint(shared, &(tnt_checkpoint_opts){.save_weights_only = true,
                                                                               .monitor = "loss",
                                                                               .save_best_only = true})};
    tnt_history *h;
    tu_ok(tnt_fit(m, ds, &(tnt_fit_opts){.epochs = 2, .callbacks = cbs, .n_callbacks = 2}, &h));
    for (int e = 1; e <= 2; e++) {
        snprintf(path, sizeof path, "/tmp/tnt_cbdist_%d_r%d-%02d.h5", tag, r, e);
        assert_int_equal(exists(path), tnt_is_master_rank());
        unlink(path);
        /* the shared name: written by the master, complete on every rank after fit (barrier) */
        snprintf(path, sizeof path, "/tmp/tnt_cbdist_%d_shared-%02d-%.2f.h5", tag, e, tnt_history_get(h, "loss", e - 1));
        assert_true(exists(path));
        if (tnt_is_master_rank()) {
            tnt_model *m2 = model();
            tu_ok(tnt_load_weights(m2, path, false));
            tnt_model_free(m2);
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (tnt_is_master_rank())
        for (int e = 1; e <= 2; e++) {
            snprintf(path, sizeof path, "/tmp/tnt_cbdist_%d_shared-%02d-%.2f.h5", tag, e,
                     tnt_history_get(h, "loss", e - 1));
            unlink(path);
        }
    tnt_history_free(h);
    tnt_callback_free(&cbs[0]);
    tnt_callback_free(&cbs[1]);
    tnt_dataset_free(ds);
    tnt_model_free(m);
}

int main(int argc, char **argv) {
    if (tnt_init(&argc, &argv) != TNT_OK) {
        fprintf(stderr, "tnt_init: %s\n", tnt_last_error());
        return 1;
    }
    tu_fill(xs, N * FEATURES, 3);
    for (int i = 0; i < N; i++) ys[i] = (float)((xs[i * FEATURES] > 0) + (xs[i * FEATURES + 2] > 0.3f));
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_early_stopping_same_epoch),
        cmocka_unit_test(test_terminate_on_nan_same_batch),
        cmocka_unit_test(test_master_only),
        cmocka_unit_test(test_checkpoint_master_writes),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    tnt_finalize();
    return rc;
}

/* restart_prog: a small training run for tests/faults/test_restart.sh. An MLP with Dropout and
 * BatchNormalization (random masks and moving statistics: state a resumed run must get back) on
 * 256 synthetic samples, shuffled, batches of 16 (16 per epoch), Adam, with BackupAndRestore in
 * DIR (every SAVE_FREQ batches, 0: at epoch ends only) unless DIR is "-". At the end the master
 * writes every weight (tnt_get_weights: trainable and moving statistics) to OUT.npy.
 *
 * ACTION at batch BATCH (0-based) of epoch EPOCH (0-based) on rank RANK, once: while MARKER does
 * not exist it creates MARKER and then "kill" SIGKILLs its own process, or "sleep" sleeps 60 s
 * (for the test to stop the launcher meanwhile).
 *
 *   restart_prog OUT.npy EPOCHS SAVE_FREQ HIDDEN DIR [ACTION RANK EPOCH BATCH MARKER] */
#include <tarantella.h>

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { N = 256, IN = 20, CLASSES = 4 };

typedef struct action {
    const char *what, *marker;
    int rank, epoch;
    long batch;
    int now_epoch;
} action;

static tnt_status at_epoch(tnt_model *m, int epoch, const tnt_logs *logs, void *user) {
    (void)m, (void)logs;
    ((action *)user)->now_epoch = epoch;
    return TNT_OK;
}

static tnt_status at_batch(tnt_model *m, int64_t batch, const tnt_logs *logs, void *user) {
    (void)m, (void)logs;
    action *a = user;
    if (tnt_get_rank() != a->rank || a->now_epoch != a->epoch || batch != a->batch || access(a->marker, F_OK) == 0)
        return TNT_OK;
    int fd = open(a->marker, O_WRONLY | O_CREAT, 0644);
    if (fd >= 0) fsync(fd), close(fd);
    fprintf(stderr, "restart_prog: rank %d: %s at epoch %d, batch %ld\n", a->rank, a->what, a->epoch + 1, a->batch);
    if (!strcmp(a->what, "kill")) raise(SIGKILL);
    sleep(60);
    return TNT_OK;
}

int main(int argc, char **argv) {
    if (argc != 6 && argc != 11) {
        fprintf(stderr, "usage: restart_prog OUT.npy EPOCHS SAVE_FREQ HIDDEN DIR [ACTION RANK EPOCH BATCH MARKER]\n");
        return 2;
    }
    if (tnt_init(&argc, &argv) != TNT_OK) {
        fprintf(stderr, "restart_prog: %s\n", tnt_last_error());
        return 1;
    }
    static float x[N * IN], y[N];
    uint64_t state = 7;
    for (int i = 0; i < N * IN; i++) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = (float)((double)(state >> 11) / 9007199254740992.0 * 2 - 1);
    }
    for (int i = 0; i < N; i++) y[i] = (float)((x[i * IN] > 0) + 2 * (x[i * IN + 1] > 0));
    tnt_model *m = tnt_sequential("restart_mlp");
    tnt_model_add(m, tnt_input_layer(TNT_SHAPE(IN), NULL));
    tnt_model_add(m, tnt_dense(atoi(argv[4]), &(tnt_layer_opts){.activation = TNT_ACT_RELU}));
    tnt_model_add(m, tnt_dropout(0.25f, 0, NULL));
    tnt_model_add(m, tnt_dense(16, NULL));
    tnt_model_add(m, tnt_batch_normalization(0, 0, NULL));
    tnt_model_add(m, tnt_dense(CLASSES, &(tnt_layer_opts){.activation = TNT_ACT_SOFTMAX}));
    tnt_status s = tnt_distribute(m);
    if (s == TNT_OK)
        s = tnt_compile(m, &(tnt_compile_opts){.optimizer = tnt_adam(0.01f), .loss = TNT_SPARSE_CATEGORICAL_CROSSENTROPY,
                                               .metrics = "accuracy"});
    tnt_dataset *ds = tnt_dataset_from_arrays(x, TNT_SHAPE(IN), y, TNT_SHAPE(1), N, false);
    ds = tnt_dataset_prefetch(tnt_dataset_batch(tnt_dataset_shuffle(ds, N, 42), 16, false), 2);
    tnt_callback cbs[2];
    int n_cbs = 0;
    action a = {0};
    if (strcmp(argv[5], "-")) cbs[n_cbs++] = tnt_backup_and_restore(argv[5], atol(argv[3]), true);
    if (argc == 11) {
        a = (action){argv[6], argv[10], atoi(argv[7]), atoi(argv[8]), atol(argv[9]), -1};
        cbs[n_cbs++] = (tnt_callback){.user = &a, .on_epoch_begin = at_epoch, .on_train_batch_end = at_batch};
    }
    tnt_history *h = NULL;
    if (s == TNT_OK)
        s = tnt_fit(m, ds, &(tnt_fit_opts){.epochs = atoi(argv[2]), .verbose = 2, .callbacks = cbs, .n_callbacks = n_cbs},
                    &h);
    int64_t n = tnt_model_count_params(m);
    tnt_tensor *w = s == TNT_OK ? tnt_tensor_new(TNT_SHAPE(n)) : NULL;
    if (w && (s = tnt_get_weights(m, w->data, n)) == TNT_OK && tnt_is_master_rank()) s = tnt_save_npy(argv[1], w);
    if (s != TNT_OK) fprintf(stderr, "restart_prog: %s\n", tnt_last_error());
    tnt_tensor_free(w);
    tnt_history_free(h);
    for (int i = 0; i < n_cbs; i++)
        if (cbs[i].destroy) tnt_callback_free(&cbs[i]);
    tnt_dataset_free(ds);
    tnt_model_free(m);
    tnt_finalize();
    return s == TNT_OK ? 0 : 1;
}

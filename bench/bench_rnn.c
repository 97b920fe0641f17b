/* bench_rnn.c: training throughput of a recurrent text classifier through the public API:
 * Embedding(20000, 128) + LSTM(128) or GRU(128) + Dense(2, softmax), sequences of 200 ids, Adam
 * (1e-3), sparse categorical cross-entropy, on one fixed batch of random ids (the same set-up as
 * peers/torch_rnn.py).
 *   bench_rnn --cell lstm|gru [--steps S] [--warmup W] [--batch B] [--seq T]
 * Threads come from OMP_NUM_THREADS; under the launcher (tarantella -n 2) the global batch is
 * split over the ranks. Prints one line: samples/s over the timed steps and the final loss. */
#include <tarantella.h>

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { VOCAB = 20000, EMBED = 128, UNITS = 128 };

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv) {
    const char *cell = "lstm";
    long steps = 20, warmup = 3, batch = 64, seq = 200;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--cell")) cell = argv[i + 1];
        else if (!strcmp(argv[i], "--steps")) steps = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--warmup")) warmup = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--batch")) batch = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--seq")) seq = atol(argv[i + 1]);
        else {
            fprintf(stderr, "usage: %s --cell lstm|gru [--steps S] [--warmup W] [--batch B] [--seq T]\n", argv[0]);
            return 2;
        }
    }
    bool lstm = !strcmp(cell, "lstm");
    if (!lstm && strcmp(cell, "gru")) {
        fprintf(stderr, "bench_rnn: unknown cell '%s' (expected lstm or gru)\n", cell);
        return 2;
    }
    if (tnt_init(&argc, &argv) != TNT_OK) {
        fprintf(stderr, "bench_rnn: %s\n", tnt_last_error());
        return 1;
    }
    int rc = 1;
    float *x = malloc((size_t)(batch * seq) * sizeof(float)), *y = malloc((size_t)batch * sizeof(float));
    tnt_dataset *ds = NULL;
    tnt_history *h = NULL;
    tnt_model *m = tnt_sequential("text_classifier");
    if (!x || !y || !m || tnt_model_add(m, tnt_input_layer(TNT_SHAPE(seq), NULL)) ||
        tnt_model_add(m, tnt_embedding(VOCAB, EMBED, false, NULL)) ||
        tnt_model_add(m, lstm ? tnt_lstm(UNITS, NULL) : tnt_gru(UNITS, NULL)) ||
        tnt_model_add(m, tnt_dense(2, &(tnt_layer_opts){.activation = TNT_ACT_SOFTMAX})) || tnt_distribute(m) ||
        tnt_compile(m, &(tnt_compile_opts){.optimizer = tnt_adam(1e-3f), .loss = TNT_SPARSE_CATEGORICAL_CROSSENTROPY}))
        goto done;
    uint64_t r = 0x9e3779b97f4a7c15ull;
    for (long i = 0; i < batch * seq; i++) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = (float)((r >> 33) % VOCAB);
    }
    for (long i = 0; i < batch; i++) y[i] = (float)(i % 2);
    ds = tnt_dataset_from_arrays(x, TNT_SHAPE(seq), y, TNT_SHAPE(), batch, false);
    ds = tnt_dataset_repeat(tnt_dataset_batch(ds, batch, true), -1);
    if (!ds || tnt_fit(m, ds, &(tnt_fit_opts){.epochs = 1, .steps_per_epoch = warmup}, &h)) goto done;
    tnt_history_free(h);
    double t0 = now();
    if (tnt_fit(m, ds, &(tnt_fit_opts){.epochs = 1, .steps_per_epoch = steps}, &h)) goto done;
    double dt = now() - t0;
    if (tnt_is_master_rank())
        printf("tnt %s ranks=%d threads=%d batch=%ld seq=%ld samples_per_s=%.1f loss=%.4f\n", cell, tnt_get_size(),
               omp_get_max_threads(), batch, seq, (double)steps * (double)batch / dt, tnt_history_get(h, "loss", 0));
    rc = 0;
done:
    if (rc) fprintf(stderr, "bench_rnn: %s\n", tnt_last_error());
    tnt_history_free(h);
    tnt_dataset_free(ds);
    tnt_model_free(m);
    free(x), free(y);
    tnt_finalize();
    return rc;
}

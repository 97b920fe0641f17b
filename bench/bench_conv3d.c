/* bench_conv3d.c: training throughput of the volumetric and spatio-temporal layers through the
 * public API, the same set-up as peers/torch_conv3d.py:
 *   conv3d:   Input(16, 16, 16, 4) Conv3D(16, 3, same, relu) MaxPooling3D(2) Conv3D(32, 3, same,
 *             relu) GlobalAveragePooling3D Dense(10, softmax)
 *   convlstm: Input(8, 16, 16, 4) ConvLSTM2D(16, 3x3, same) GlobalAveragePooling2D Dense(10, softmax)
 * SGD(0.01), sparse categorical cross-entropy, one fixed batch of random inputs; --channels_first
 * runs every layer with data_format channels_first on (C, ...) inputs.
 *   bench_conv3d --model conv3d|convlstm [--channels_first] [--steps S] [--warmup W] [--batch B]
 * Threads come from OMP_NUM_THREADS. Prints one line: samples/s over the timed steps and the loss. */
#include <tarantella.h>

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static tnt_layer *fmt(tnt_layer *l, bool cf) {
    if (l && cf && tnt_layer_set_data_format(l, TNT_CHANNELS_FIRST) != TNT_OK) {
        tnt_layer_free(l);
        return NULL;
    }
    return l;
}

int main(int argc, char **argv) {
    const char *model = "conv3d";
    long steps = 10, warmup = 2, batch = 16;
    bool cf = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--channels_first")) cf = true;
        else if (i + 1 < argc && !strcmp(argv[i], "--model")) model = argv[++i];
        else if (i + 1 < argc && !strcmp(argv[i], "--steps")) steps = atol(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--warmup")) warmup = atol(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--batch")) batch = atol(argv[++i]);
        else {
            fprintf(stderr, "usage: %s --model conv3d|convlstm [--channels_first] [--steps S] [--warmup W] [--batch B]\n",
                    argv[0]);
            return 2;
        }
    }
    bool c3 = !strcmp(model, "conv3d");
    if (!c3 && strcmp(model, "convlstm")) {
        fprintf(stderr, "bench_conv3d: unknown model '%s' (expected conv3d or convlstm)\n", model);
        return 2;
    }
    if (tnt_init(&argc, &argv) != TNT_OK) return 1;
    int rc = 1;
    tnt_shape in = c3 ? (cf ? TNT_SHAPE(4, 16, 16, 16) : TNT_SHAPE(16, 16, 16, 4))
                      : (cf ? TNT_SHAPE(8, 4, 16, 16) : TNT_SHAPE(8, 16, 16, 4));
    int64_t n = tnt_shape_numel(in);
    float *x = malloc((size_t)(batch * n) * sizeof(float)), *y = malloc((size_t)batch * sizeof(float));
    tnt_dataset *ds = NULL;
    tnt_history *h = NULL;
    tnt_model *m = tnt_sequential(model);
    tnt_layer_opts same_relu = {.padding = TNT_PADDING_SAME, .activation = TNT_ACT_RELU};
    tnt_status s = !x || !y || !m ? TNT_ERR_NOMEM : tnt_model_add(m, tnt_input_layer(in, NULL));
    if (c3) {
        if (!s) s = tnt_model_add(m, fmt(tnt_conv3d(16, (int[]){3, 3, 3}, &same_relu), cf));
        if (!s) s = tnt_model_add(m, fmt(tnt_max_pooling3d((int[]){2, 2, 2}, NULL), cf));
        if (!s) s = tnt_model_add(m, fmt(tnt_conv3d(32, (int[]){3, 3, 3}, &same_relu), cf));
        if (!s) s = tnt_model_add(m, fmt(tnt_global_average_pooling3d(NULL), cf));
    } else {
        tnt_conv_lstm_opts o = {.padding = TNT_PADDING_SAME};
        if (!s) s = tnt_model_add(m, fmt(tnt_conv_lstm2d(16, 3, 3, &o), cf));
        if (!s) s = tnt_model_add(m, fmt(tnt_global_average_pooling2d(NULL), cf));
    }
    if (!s) s = tnt_model_add(m, tnt_dense(10, &(tnt_layer_opts){.activation = TNT_ACT_SOFTMAX}));
    if (s || tnt_distribute(m) ||
        tnt_compile(m, &(tnt_compile_opts){.optimizer = tnt_sgd(0.01f), .loss = TNT_SPARSE_CATEGORICAL_CROSSENTROPY}))
        goto done;
    uint64_t r = 0x9e3779b97f4a7c15ull;
    for (long i = 0; i < batch * n; i++) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = (float)((double)(r >> 40) / 16777216.0 * 2.0 - 1.0);
    }
    for (long i = 0; i < batch; i++) y[i] = (float)(i % 10);
    ds = tnt_dataset_from_arrays(x, in, y, TNT_SHAPE(), batch, false);
    ds = tnt_dataset_repeat(tnt_dataset_batch(ds, batch, true), -1);
    if (!ds || tnt_fit(m, ds, &(tnt_fit_opts){.epochs = 1, .steps_per_epoch = warmup}, &h)) goto done;
    tnt_history_free(h);
    double t0 = now();
    if (tnt_fit(m, ds, &(tnt_fit_opts){.epochs = 1, .steps_per_epoch = steps}, &h)) goto done;
    double dt = now() - t0;
    if (tnt_is_master_rank())
        printf("tnt %s%s ranks=%d threads=%d batch=%ld samples_per_s=%.1f loss=%.4f\n", model, cf ? " channels_first" : "",
               tnt_get_size(), omp_get_max_threads(), batch, (double)steps * (double)batch / dt,
               tnt_history_get(h, "loss", 0));
    rc = 0;
done:
    if (rc) fprintf(stderr, "bench_conv3d: %s\n", tnt_last_error());
    tnt_history_free(h);
    tnt_dataset_free(ds);
    tnt_model_free(m);
    free(x), free(y);
    tnt_finalize();
    return rc;
}

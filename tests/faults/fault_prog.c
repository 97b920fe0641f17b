/* fault_prog.c: a small data-parallel training that misbehaves on one rank, for
 * tests/faults/test_faults.sh. Usage: fault_prog MODE RANK STEP DIR
 *   ok        train and exit 0
 *   callback  a batch callback fails on RANK at STEP (the documented way to stop training)
 *   load      RANK fails to load weights from a missing file before fit (a failure outside fit)
 *   stop      RANK stops itself (SIGSTOP) at STEP, as a hung rank would
 *   slow      train for a long time (the launcher is killed meanwhile)
 *   stop_backward, kill_backward
 *             RANK stops itself (SIGSTOP) or dies (SIGKILL) inside backward of its STEP-th training
 *             step (a pass-through custom layer between the dense layers), while the others
 *             reduce the buckets backward has already completed
 * Every rank writes its pid to DIR/pid.RANK first, so the test can check none is left. */
#include <tarantella.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { N = 256, FEATURES = 8, CLASSES = 3, BATCH = 16 };

typedef struct fault {
    const char *mode;
    int rank;
    int64_t step;
} fault;

static tnt_status on_batch(tnt_model *m, int64_t batch, const tnt_logs *logs, void *user) {
    (void)m, (void)logs;
    const fault *f = user;
    if (tnt_get_rank() != f->rank || batch != f->step) return TNT_OK;
    if (!strcmp(f->mode, "callback"))
        return tnt_set_error(TNT_ERR_ARG, "fault_prog: callback failed on rank %d at step %lld", f->rank, (long long)batch);
    if (!strcmp(f->mode, "stop")) raise(SIGSTOP);
    return TNT_OK;
}

/* The probe: y = x, dx = dy; its backward misbehaves as the fault says. */
static int64_t backward_calls;

static tnt_status probe_build(tnt_layer *l, tnt_shape in, tnt_shape *out, void *user) {
    (void)l, (void)user;
    *out = in;
    return TNT_OK;
}

static tnt_status probe_forward(tnt_layer *l, int64_t batch, const float *x, float *y, bool training, void *user) {
    (void)l, (void)training, (void)user;
    memcpy(y, x, (size_t)batch * 16 * sizeof(float));
    return TNT_OK;
}

static tnt_status probe_backward(tnt_layer *l, int64_t batch, const float *x, const float *y, const float *dy,
                                 float *dx, void *user) {
    (void)l, (void)x, (void)y;
    const fault *f = user;
    if (++backward_calls == f->step && tnt_get_rank() == f->rank) {
        if (!strcmp(f->mode, "stop_backward")) raise(SIGSTOP);
        if (!strcmp(f->mode, "kill_backward")) raise(SIGKILL);
    }
    if (dx) memcpy(dx, dy, (size_t)batch * 16 * sizeof(float));
    return TNT_OK;
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: fault_prog ok|callback|load|stop|slow|stop_backward|kill_backward RANK STEP DIR\n");
        return 2;
    }
    fault f = {argv[1], atoi(argv[2]), atoll(argv[3])};
    if (tnt_init(&argc, &argv) != TNT_OK) {
        fprintf(stderr, "fault_prog: %s\n", tnt_last_error());
        return 1;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/pid.%d", argv[4], tnt_get_rank());
    FILE *pf = fopen(path, "w");
    if (pf) fprintf(pf, "%ld\n", (long)getpid()), fclose(pf);

    static float xs[N * FEATURES], ys[N];
    for (int i = 0; i < N * FEATURES; i++) xs[i] = (float)((i * 37) % 11) / 11.0f;
    for (int i = 0; i < N; i++) ys[i] = (float)(i % CLASSES);
    tnt_model *m = tnt_sequential("faults");
    tnt_model_add(m, tnt_input_layer(TNT_SHAPE(FEATURES), NULL));
    tnt_model_add(m, tnt_dense(16, &(tnt_layer_opts){.activation = TNT_ACT_TANH}));
    if (strstr(f.mode, "_backward"))
        tnt_model_add(m, tnt_custom_layer(&(tnt_custom_layer_def){.class_name = "Probe", .user = &f, .build = probe_build,
                                                                  .forward = probe_forward, .backward = probe_backward},
                                          "probe"));
    tnt_model_add(m, tnt_dense(CLASSES, &(tnt_layer_opts){.activation = TNT_ACT_SOFTMAX}));
    tnt_distribute(m);
    tnt_status s = tnt_compile(m, &(tnt_compile_opts){.optimizer = tnt_sgd(0.1f),
                                                      .loss = TNT_SPARSE_CATEGORICAL_CROSSENTROPY});
    if (s == TNT_OK && !strcmp(f.mode, "load") && tnt_get_rank() == f.rank)
        s = tnt_load_weights(m, "/nonexistent/fault_prog.weights.h5", false);
    tnt_dataset *ds = tnt_dataset_batch(tnt_dataset_from_arrays(xs, TNT_SHAPE(FEATURES), ys, TNT_SHAPE(), N, false),
                                        BATCH, false);
    tnt_callback cb = {.user = &f, .on_train_batch_end = on_batch};
    int epochs = !strcmp(f.mode, "slow") ? 1000000 : 3;
    if (s == TNT_OK) s = tnt_fit(m, ds, &(tnt_fit_opts){.epochs = epochs, .callbacks = &cb, .n_callbacks = 1}, NULL);
    if (s != TNT_OK) fprintf(stderr, "fault_prog: rank %d: %s\n", tnt_get_rank(), tnt_last_error());
    tnt_dataset_free(ds);
    tnt_model_free(m);
    tnt_finalize();
    return s == TNT_OK ? 0 : 1;
}

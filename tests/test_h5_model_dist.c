/* test_h5_model_dist.c: whole-model HDF5 files under MPI (ctest runs it with 2 ranks). A
 * distributed model (tnt_distribute) trained 4 epochs unbroken equals, bitwise on every rank, one
 * trained 2 epochs, saved with tnt_save_model (the master writes, every rank returns once the
 * file is complete), loaded with tnt_load_model on every rank, distributed and trained epochs
 * 2..4 with initial_epoch = 2 (Adam, BatchNormalization, a shuffled dataset): all weights on the
 * master; the trainable weights and the optimizer's slots on every rank (BatchNormalization's
 * moving statistics are per rank in a distributed fit, and the file holds the master's, so the
 * other ranks' statistics resume from the master's). */
#include "testutil.h"

#include "comm/comm.h"
#include "model/model.h"
#include "optimizers/optimizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[128]; /* the master's temp directory, the same on every rank */

#define N_SAMPLES 64
#define IN 6

static tnt_model *build(void) {
    tnt_model *m = tnt_sequential("dm");
    tu_ok(tnt_model_add(m, tnt_input_layer(TNT_SHAPE(IN), "inp")));
    tu_ok(tnt_model_add(m, tnt_dense(8, &(tnt_layer_opts){.activation = TNT_ACT_RELU, .name = "d1"})));
    tu_ok(tnt_model_add(m, tnt_batch_normalization(0.9f, 0, "bn")));
    tu_ok(tnt_model_add(m, tnt_dense(3, &(tnt_layer_opts){.activation = TNT_ACT_SOFTMAX, .name = "out"})));
    tu_ok(tnt_compile(m, &(tnt_compile_opts){.optimizer = tnt_adam(0.01f), .loss = TNT_SPARSE_CATEGORICAL_CROSSENTROPY,
                                             .metrics = "accuracy", .seed = 5}));
    tu_ok(tnt_distribute(m));
    return m;
}

static float xs[N_SAMPLES * IN], ys[N_SAMPLES];

static void fit(tnt_model *m, int initial, int epochs) {
    tu_fill(xs, N_SAMPLES * IN, 11);
    for (int i = 0; i < N_SAMPLES; i++) ys[i] = (float)((xs[i * IN] > 0) + (xs[i * IN + 1] > 0.3f));
    tnt_dataset *d = tnt_dataset_from_arrays(xs, TNT_SHAPE(IN), ys, TNT_SHAPE(), N_SAMPLES, false);
    d = tnt_dataset_batch(tnt_dataset_shuffle(d, N_SAMPLES, 7), 32, false); /* 16 per rank on 2 */
    tu_ok(tnt_fit(m, d, &(tnt_fit_opts){.epochs = epochs, .initial_epoch = initial}, NULL));
    tnt_dataset_free(d);
}

static float *weights(tnt_model *m, int64_t *n) {
    *n = tnt_model_count_params(m);
    float *w = malloc((size_t)*n * sizeof(float));
    tu_ok(tnt_get_weights(m, w, *n));
    return w;
}

static void assert_bitwise(const float *a, const float *b, int64_t n, const char *what) {
    for (int64_t i = 0; i < n; i++)
        if (memcmp(&a[i], &b[i], sizeof(float)))
            fail_msg("rank %d: %s: element %lld differs: %.9g vs %.9g", tnt__world_rank(), what, (long long)i, a[i], b[i]);
}

static void test_resume_distributed(void **state) {
    (void)state;
    char path[256];
    snprintf(path, sizeof path, "%s/resume.h5", dir);
    tnt_model *a = build();
    fit(a, 0, 4);

    tnt_model *b = build();
    fit(b, 0, 2);
    tu_ok(tnt_save_model(b, path, NULL));
    struct stat st;
    assert_int_equal(stat(path, &st), 0); /* complete on every rank once save returns */
    tnt_model_free(b);

    tnt_model *c = tnt_load_model(path, true);
    if (!c) fail_msg("rank %d: load_model: %s", tnt__world_rank(), tnt_last_error());
    assert_int_equal(c->optimizer->iterations, 2 * N_SAMPLES / 32);
    tu_ok(tnt_distribute(c));
    fit(c, 2, 4);

    int64_t n, nc;
    float *wa = weights(a, &n), *wc = weights(c, &nc);
    assert_int_equal(n, nc);
    /* BatchNormalization's moving statistics are per rank, and the file holds the master's: all
     * weights are the unbroken run's on the master, the trainable ones on every rank */
    if (tnt__world_rank() == 0) assert_bitwise(wa, wc, n, "weights after resuming");
    assert_int_equal(a->n_params, c->n_params);
    assert_bitwise(a->params, c->params, a->n_params, "trainable weights after resuming");
    /* and the trainable weights are the master's on every rank */
    float *master = malloc((size_t)c->n_params * sizeof(float));
    memcpy(master, c->params, (size_t)c->n_params * sizeof(float));
    tu_ok(tnt__bcast_f32(master, c->n_params));
    assert_bitwise(master, c->params, c->n_params, "trainable weights against the master's");
    for (int k = 0; k < a->optimizer->n_slots; k++)
        assert_bitwise(a->optimizer->slots[k], c->optimizer->slots[k], a->n_params, a->optimizer->slot_names[k]);
    assert_int_equal(a->optimizer->iterations, c->optimizer->iterations);
    free(wa), free(wc), free(master);
    tnt_model_free(c), tnt_model_free(a);
}

int main(int argc, char **argv) {
    tu_ok(tnt_init(&argc, &argv));
    const char *np = getenv("OMPI_COMM_WORLD_SIZE"); /* under mpirun: the world is really there */
    if (np && atoi(np) != tnt__world_size()) {
        fprintf(stderr, "mpirun started %s ranks, the world has %d\n", np, tnt__world_size());
        return 1;
    }
    if (tnt__world_rank() == 0) printf("test_h5_model_dist: %d rank(s)\n", tnt__world_size());
    /* the master makes the directory and tells the others its name (as floats: one per char) */
    float name[sizeof dir] = {0};
    if (tnt__world_rank() == 0) {
        snprintf(dir, sizeof dir, "/tmp/tnt_test_h5m_dist_XXXXXX");
        if (!mkdtemp(dir)) return 1;
        for (size_t i = 0; i < sizeof dir; i++) name[i] = (float)(unsigned char)dir[i];
    }
    if (tnt__bcast_f32(name, (int64_t)(sizeof dir)) != TNT_OK) return 1;
    for (size_t i = 0; i < sizeof dir; i++) dir[i] = (char)(unsigned char)name[i];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resume_distributed),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    tnt__barrier();
    if (tnt__world_rank() == 0) {
        char cmd[256];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        if (system(cmd) != 0) rc = rc ? rc : 1;
    }
    tnt_finalize();
    return rc;
}

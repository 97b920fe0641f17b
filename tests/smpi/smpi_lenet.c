/* smpi_lenet.c: a few LeNet-5 steps data-parallel under SimGrid's SMPI (smpirun -np 4; ranks are
 * simulated in one process), as tests/smpi/test_smpi.sh runs it. Each rank trains a serial copy
 * (every sample, one process) and a distributed copy side by side from the same seed, then prints
 * one line: its rank and world size, the thread level MPI granted, the gradient engine, a
 * fingerprint of the distributed weights, and their largest differences from serial and from the
 * master's (SMPI sums in another order on each rank). Exits 1, saying why, when the world is not 4 ranks, the engine is not the nonblocking
 * one, or the weights or the loss differ from serial beyond float rounding. Builds with smpicc only
 * (CMake TNT_MPI=smpi). LeNet-5's Dense(500) gradient is 4.9 MB: one bucket larger than the ~2.5 MB
 * at which SimGrid 3.32's in-place MPI_Iallreduce crashes (reducer.c's TNT_SMPI send copy). */
#include "classic.h"
#include "comm/comm.h"
#include "model/model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { RANKS = 4, N = 256, BATCH = 64, IMAGE = 28 * 28 };

static float *xs, *ys;

static tnt_model *trained(bool distributed, tnt_history **h) {
    tnt_model *m = lenet5_model();
    if (!m || (distributed && tnt_distribute(m) != TNT_OK)) return NULL;
    tnt_compile_opts co = {.optimizer = tnt_optimizer_new("sgd", &(tnt_optimizer_opts){.learning_rate = 0.05f, .momentum = 0.9f}),
                           .loss = TNT_SPARSE_CATEGORICAL_CROSSENTROPY, .seed = 7};
    if (tnt_compile(m, &co) != TNT_OK) return NULL;
    tnt_dataset *ds = tnt_dataset_batch(tnt_dataset_from_arrays(xs, TNT_SHAPE(28, 28, 1), ys, TNT_SHAPE(), N, false),
                                        BATCH, false);
    tnt_status s = ds ? tnt_fit(m, ds, &(tnt_fit_opts){.epochs = 1, .verbose = 0}, h) : TNT_ERR_NOMEM;
    tnt_dataset_free(ds);
    if (s != TNT_OK) {
        tnt_model_free(m);
        return NULL;
    }
    return m;
}

int main(int argc, char **argv) {
    if (tnt_init(&argc, &argv) != TNT_OK) {
        fprintf(stderr, "smpi_lenet: %s\n", tnt_last_error());
        return 1;
    }
    int rank = tnt_get_rank(), size = tnt_get_size(), rc = 1;
    xs = malloc(N * IMAGE * sizeof(float)), ys = malloc(N * sizeof(float));
    uint64_t state = 12345;
    for (int i = 0; i < N * IMAGE; i++) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        xs[i] = (float)(state >> 40) / (float)(1 << 24);
    }
    for (int i = 0; i < N; i++) ys[i] = (float)(i * 7 % 10);
    tnt_history *hs = NULL, *hd = NULL;
    tnt_model *s = trained(false, &hs), *d = trained(true, &hd);
    if (!s || !d) {
        fprintf(stderr, "smpi_lenet: rank %d: %s\n", rank, tnt_last_error());
        goto out;
    }
    int64_t n = tnt_model_count_params(d);
    float *ws = malloc((size_t)n * sizeof(float)), *wd = malloc((size_t)n * sizeof(float));
    if (!ws || !wd || tnt_get_weights(s, ws, n) != TNT_OK || tnt_get_weights(d, wd, n) != TNT_OK) {
        fprintf(stderr, "smpi_lenet: rank %d: cannot read the weights\n", rank);
        free(ws), free(wd);
        goto out;
    }
    double worst = 0;
    for (int64_t i = 0; i < n; i++) {
        double diff = fabs((double)wd[i] - ws[i]) / (1e-3 + fabs((double)ws[i]));
        if (diff > worst) worst = diff;
    }
    /* SMPI's MPI_Iallreduce sums each rank's own buffer first, so the ranks' sums differ in the
     * last bits (Open MPI's and MPICH's are the same on every rank): compared with the master's */
    float *w0 = malloc((size_t)n * sizeof(float));
    double apart = INFINITY;
    if (w0) {
        memcpy(w0, wd, (size_t)n * sizeof(float));
        if (tnt__bcast_f32(w0, n) == TNT_OK) {
            apart = 0;
            for (int64_t i = 0; i < n; i++) {
                double diff = fabs((double)wd[i] - w0[i]) / (1e-3 + fabs((double)w0[i]));
                if (diff > apart) apart = diff;
            }
        }
        free(w0);
    }
    double loss_s = tnt_history_get(hs, "loss", 0), loss_d = tnt_history_get(hd, "loss", 0);
    const char *engine = d->reducer ? (tnt__reducer_mode(d->reducer) == TNT_COMM_MODE_NONBLOCKING ? "nonblocking"
                                                                                                  : "thread")
                                    : "none";
    printf("smpi_lenet: rank %d of %d: %s, engine %s, weights %016llx, max relative difference from serial %.2e, "
           "from the master's %.2e, loss %.6f (serial %.6f)\n",
           rank, size, tnt__thread_level_name(tnt__world_thread_level()), engine,
           (unsigned long long)tnt__fnv1a(0, wd, (size_t)n * sizeof(float)), worst, apart, loss_d, loss_s);
    fflush(stdout);
    free(ws), free(wd);
    if (size != RANKS) fprintf(stderr, "smpi_lenet: rank %d: a world of %d ranks, expected %d\n", rank, size, RANKS);
    else if (strcmp(engine, "nonblocking")) fprintf(stderr, "smpi_lenet: rank %d: engine %s\n", rank, engine);
    else if (!(worst < 1e-3)) fprintf(stderr, "smpi_lenet: rank %d: weights differ from serial by %.2e\n", rank, worst);
    else if (!(apart < 1e-4)) fprintf(stderr, "smpi_lenet: rank %d: weights differ from the master's by %.2e\n", rank, apart);
    else if (!(fabs(loss_d - loss_s) <= 1e-5 * fabs(loss_s))) fprintf(stderr, "smpi_lenet: rank %d: loss differs\n", rank);
    else rc = 0;
out:
    tnt_history_free(hs), tnt_history_free(hd);
    tnt_model_free(s), tnt_model_free(d);
    free(xs), free(ys);
    tnt_finalize();
    return rc;
}

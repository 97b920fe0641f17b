/* test_h5_dist.c: HDF5 weights under MPI (ctest runs it with 2 ranks). Every rank builds the
 * model with its own seed, so that the weights differ per rank: tnt_save_weights writes only the
 * master's (the file's values are the master's, one inode, no temp files left), every rank
 * returns the same status (a failing master fails every rank), loading on every rank gives
 * bitwise identical weights and predictions, and save_all_devices writes one file per rank. */
#include "testutil.h"

#include "comm/comm.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[128]; /* the master's temp directory, the same on every rank */

static tnt_model *model(uint64_t seed) {
    tnt_model *m = tnt_sequential("m");
    tu_ok(tnt_model_add(m, tnt_input_layer(TNT_SHAPE(4, 4, 2), NULL)));
    tu_ok(tnt_model_add(m, tnt_conv2d(3, 2, 2, &(tnt_layer_opts){.activation = TNT_ACT_RELU})));
    tu_ok(tnt_model_add(m, tnt_batch_normalization(0, 0, NULL)));
    tu_ok(tnt_model_add(m, tnt_flatten(NULL)));
    tu_ok(tnt_model_add(m, tnt_dense(5, NULL)));
    tu_ok(tnt_compile(m, &(tnt_compile_opts){.optimizer = tnt_sgd(0.1f), .loss = TNT_MEAN_SQUARED_ERROR, .seed = seed}));
    return m;
}

static float *weights(tnt_model *m, int64_t *n) {
    *n = tnt_model_count_params(m);
    float *w = malloc((size_t)*n * sizeof(float));
    tu_ok(tnt_get_weights(m, w, *n));
    return w;
}

/* The master's copy of x on every rank. */
static float *master_copy(const float *x, int64_t n) {
    float *c = malloc((size_t)n * sizeof(float));
    memcpy(c, x, (size_t)n * sizeof(float));
    tu_ok(tnt__bcast_f32(c, n));
    return c;
}

static void test_master_writes_all_load(void **state) {
    (void)state;
    int rank = tnt__world_rank();
    char path[256];
    snprintf(path, sizeof path, "%s/w.h5", dir);
    tnt_model *m = model(10 + (uint64_t)rank);
    int64_t n;
    float *mine = weights(m, &n), *master = master_copy(mine, n);
    if (rank != 0) assert_true(memcmp(mine, master, (size_t)n * sizeof(float)) != 0); /* seeds differ */

    tu_ok(tnt_save_weights(m, path, NULL));
    struct stat st;
    assert_int_equal(stat(path, &st), 0); /* complete on every rank once save returns */
    float ino = (float)(st.st_ino % 1000003), ino0 = ino;
    tu_ok(tnt__bcast_f32(&ino0, 1));
    assert_true(ino == ino0);

    /* loading on every rank: everyone holds the master's weights, bitwise */
    tnt_model *l = model(20 + (uint64_t)rank);
    tu_ok(tnt_load_weights(l, path, false));
    float *loaded = weights(l, &n);
    if (memcmp(loaded, master, (size_t)n * sizeof(float)) != 0) fail_msg("rank %d: loaded weights are not the master's", rank);
    float *loaded0 = master_copy(loaded, n);
    assert_true(memcmp(loaded, loaded0, (size_t)n * sizeof(float)) == 0);

    tnt_tensor *x = tnt_tensor_new(TNT_SHAPE(3, 4, 4, 2)), *y = NULL;
    tu_fill(x->data, tnt_shape_numel(x->shape), 8);
    tu_ok(tnt_predict_on_batch(l, x, &y));
    int64_t ny = tnt_shape_numel(y->shape);
    float *y0 = master_copy(y->data, ny);
    assert_true(memcmp(y->data, y0, (size_t)ny * sizeof(float)) == 0);

    /* a second save (over the file) leaves no temp files */
    tu_ok(tnt_save_weights(m, path, NULL));
    tu_ok(tnt__barrier());
    DIR *d = opendir(dir);
    assert_non_null(d);
    struct dirent *e;
    while ((e = readdir(d)))
        if (strstr(e->d_name, ".tmp.")) fail_msg("rank %d: temp file %s left", rank, e->d_name);
    closedir(d);

    free(y0), tnt_tensor_free(y), tnt_tensor_free(x);
    free(mine), free(master), free(loaded), free(loaded0);
    tnt_model_free(l), tnt_model_free(m);
    tu_ok(tnt__barrier());
}

static void test_save_all_devices(void **state) {
    (void)state;
    int rank = tnt__world_rank(), size = tnt__world_size();
    char path[256];
    snprintf(path, sizeof path, "%s/rank%d.h5", dir, rank);
    tnt_model *m = model(30 + (uint64_t)rank);
    tu_ok(tnt_save_weights(m, path, &(tnt_save_opts){.save_all_devices = true}));
    for (int r = 0; r < size; r++) { /* every rank's file exists */
        char p[256];
        struct stat st;
        snprintf(p, sizeof p, "%s/rank%d.h5", dir, r);
        if (stat(p, &st) != 0) fail_msg("rank %d: %s missing", rank, p);
    }
    tnt_model *l = model(40);
    tu_ok(tnt_load_weights(l, path, false)); /* this rank's own weights */
    int64_t n;
    float *a = weights(m, &n), *b = weights(l, &n);
    assert_true(memcmp(a, b, (size_t)n * sizeof(float)) == 0);
    free(a), free(b);
    tnt_model_free(l), tnt_model_free(m);

    /* without save_all_devices, only the master's path is written */
    m = model(50);
    snprintf(path, sizeof path, "%s/only%d.h5", dir, rank);
    tu_ok(tnt_save_weights(m, path, NULL));
    struct stat st;
    assert_int_equal(stat(path, &st) == 0, rank == 0);
    tnt_model_free(m);
    tu_ok(tnt__barrier());
}

static void test_master_failure_fails_all(void **state) {
    (void)state;
    tnt_model *m = model(60);
    char path[256];
    snprintf(path, sizeof path, "%s/no_such_dir/w.h5", dir);
    tnt_status s = tnt_save_weights(m, path, NULL);
    assert_int_not_equal(s, TNT_OK);
    tu_error_contains("no_such_dir");
    tnt_model_free(m);
}

int main(int argc, char **argv) {
    tu_ok(tnt_init(&argc, &argv));
    const char *np = getenv("OMPI_COMM_WORLD_SIZE"); /* under mpirun: the world is really there */
    if (np && atoi(np) != tnt__world_size()) {
        fprintf(stderr, "mpirun started %s ranks, the world has %d\n", np, tnt__world_size());
        return 1;
    }
    if (tnt__world_rank() == 0) printf("test_h5_dist: %d rank(s)\n", tnt__world_size());
    /* the master makes the directory and tells the others its name (as floats: one per char) */
    float name[sizeof dir] = {0};
    if (tnt__world_rank() == 0) {
        snprintf(dir, sizeof dir, "/tmp/tnt_test_h5_dist_XXXXXX");
        if (!mkdtemp(dir)) return 1;
        for (size_t i = 0; i < sizeof dir; i++) name[i] = (float)(unsigned char)dir[i];
    }
    if (tnt__bcast_f32(name, (int64_t)(sizeof dir)) != TNT_OK) return 1;
    for (size_t i = 0; i < sizeof dir; i++) dir[i] = (char)(unsigned char)name[i];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_master_writes_all_load),
        cmocka_unit_test(test_save_all_devices),
        cmocka_unit_test(test_master_failure_fails_all),
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

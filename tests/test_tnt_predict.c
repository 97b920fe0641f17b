/* test_tnt_predict.c: the tnt-predict program end to end. A model saved as Keras JSON + HDF5
 * weights predicts an NPY array through the program, alone and on 2 ranks under mpirun; the rows
 * equal tnt_predict_on_batch in input order. Bad usage exits 2, a failure 1. */
#include "testutil.h"

#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static char program[PATH_MAX], dir[64];

static int run(const char *fmt, ...) {
    char cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    int rc = system(cmd);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static tnt_model *model(void) {
    tnt_model *m = tnt_sequential("cnn");
    tu_ok(tnt_model_add(m, tnt_input_layer(TNT_SHAPE(6, 6, 1), NULL)));
    tu_ok(tnt_model_add(m, tnt_conv2d(3, 3, 3, &(tnt_layer_opts){.activation = TNT_ACT_RELU})));
    tu_ok(tnt_model_add(m, tnt_batch_normalization(0, 0, NULL)));
    tu_ok(tnt_model_add(m, tnt_flatten(NULL)));
    tu_ok(tnt_model_add(m, tnt_dense(4, &(tnt_layer_opts){.activation = TNT_ACT_SOFTMAX})));
    return m;
}

static void check_output(const char *path, const float *want, int64_t n, int64_t c) {
    tnt_dataset *ds = tnt_dataset_from_npy(path, NULL);
    assert_non_null(ds);
    assert_int_equal(tnt_dataset_cardinality(ds), n);
    tnt_dataset_iter *it = tnt_dataset_iter_new(ds, 0);
    tnt_batch b;
    for (int64_t i = 0; i < n; i++) {
        assert_int_equal(tnt_dataset_iter_next(it, &b), 1);
        tu_assert_close(b.x.data, want + i * c, c, 1e-6, 1e-7, "tnt-predict row");
    }
    tnt_dataset_iter_free(it);
    tnt_dataset_free(ds);
}

static void test_predicts_like_the_library(void **state) {
    (void)state;
    enum { N = 11, C = 4 };
    tnt_model *m = model();
    int64_t np = tnt_model_count_params(m);
    float *w = malloc((size_t)np * sizeof(float));
    tu_ok(tnt_get_weights(m, w, np));
    for (int64_t i = 0; i < np; i++) w[i] += 0.01f * (float)(i % 7); /* non-default BN statistics too */
    tu_ok(tnt_set_weights(m, w, np));
    char *json, path[128];
    tu_ok(tnt_model_to_json(m, &json));
    snprintf(path, sizeof path, "%s/model.json", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(json, f);
    fclose(f);
    free(json);
    snprintf(path, sizeof path, "%s/w.h5", dir);
    tu_ok(tnt_save_weights(m, path, NULL));
    tnt_tensor *x = tnt_tensor_new(TNT_SHAPE(N, 6, 6, 1)), *want;
    tu_fill(x->data, N * 36, 5);
    snprintf(path, sizeof path, "%s/in.npy", dir);
    tu_ok(tnt_save_npy(path, x));
    tu_ok(tnt_predict_on_batch(m, x, &want));

    assert_int_equal(run("'%s' %s/model.json %s/in.npy %s/out1.npy --weights %s/w.h5 --batch_size 4", program, dir, dir,
                         dir, dir), 0);
    snprintf(path, sizeof path, "%s/out1.npy", dir);
    check_output(path, want->data, N, C);
    /* 2 ranks: uneven shares of batches of 4 and a last batch of 3, gathered in input order */
    assert_int_equal(run("mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 -x OMP_NUM_THREADS=1 -x ASAN_OPTIONS=detect_leaks=0 "
                         "'%s' %s/model.json %s/in.npy %s/out2.npy --weights=%s/w.h5 --batch_size=4 > /dev/null",
                         program, dir, dir, dir, dir), 0);
    snprintf(path, sizeof path, "%s/out2.npy", dir);
    check_output(path, want->data, N, C);
    /* a whole model (Keras's model.save .h5) needs no --weights */
    snprintf(path, sizeof path, "%s/whole.h5", dir);
    tu_ok(tnt_save_model(m, path, NULL));
    assert_int_equal(run("'%s' %s/whole.h5 %s/in.npy %s/out3.npy", program, dir, dir, dir), 0);
    snprintf(path, sizeof path, "%s/out3.npy", dir);
    check_output(path, want->data, N, C);
    tnt_tensor_free(x), tnt_tensor_free(want);
    free(w);
    tnt_model_free(m);
}

static void test_bad_usage_and_failures(void **state) {
    (void)state;
    assert_int_equal(run("'%s' --help > /dev/null", program), 0);
    assert_int_equal(run("'%s' a.json b.npy c.npy 2> /dev/null", program), 2);              /* .json: no --weights */
    assert_int_equal(run("'%s' a.json b.npy --weights w.h5 2> /dev/null", program), 2);      /* no OUTPUT */
    assert_int_equal(run("'%s' a b c --weights w --batch_size 0 2> /dev/null", program), 2); /* bad batch */
    assert_int_equal(run("'%s' a b c --weights w --frobnicate 2> /dev/null", program), 2);
    assert_int_equal(run("'%s' %s/missing.json b.npy c.npy --weights w.h5 2> /dev/null", program, dir), 1);
    /* the model loads, the weights do not: exit 1 and no output file */
    assert_int_equal(run("'%s' %s/model.json %s/in.npy %s/none.npy --weights %s/in.npy 2> /dev/null", program, dir,
                         dir, dir, dir), 1);
    char path[128];
    snprintf(path, sizeof path, "%s/none.npy", dir);
    assert_int_equal(access(path, F_OK), -1);
}

int main(int argc, char **argv) {
    (void)argc;
    char self[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0) return 1;
    self[len] = '\0';
    snprintf(program, sizeof program, "%s/../bin/tnt-predict", dirname(self)); /* build/tests -> build/bin */
    snprintf(dir, sizeof dir, "/tmp/tnt_predict_XXXXXX");
    if (!mkdtemp(dir)) return 1;
    tnt_init(&argc, &argv);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_predicts_like_the_library),
        cmocka_unit_test(test_bad_usage_and_failures),
    };
    int r = cmocka_run_group_tests(tests, NULL, NULL);
    tnt_finalize();
    run("rm -rf '%s'", dir);
    return r;
}

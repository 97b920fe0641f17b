/* test_tnt_predict.c: the tnt-predict program end to end. A model saved as Keras JSON + HDF5
 * weights predicts an NPY array through the program, alone and on 2 ranks under mpirun; the rows
 * equal tnt_predict_on_batch in input order. A Keras 2 model with TensorFlow function layers
 * predicts as NumPy. Bad usage exits 2, a failure 1. */
#include "testutil.h"

#include <cjson/cJSON.h>
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

static void check_output_tol(const char *path, const float *want, int64_t n, int64_t c, double rtol) {
    tnt_dataset *ds = tnt_dataset_from_npy(path, NULL);
    assert_non_null(ds);
    assert_int_equal(tnt_dataset_cardinality(ds), n);
    tnt_dataset_iter *it = tnt_dataset_iter_new(ds, 0);
    tnt_batch b;
    for (int64_t i = 0; i < n; i++) {
        assert_int_equal(tnt_dataset_iter_next(it, &b), 1);
        tu_assert_close(b.x.data, want + i * c, c, rtol, rtol / 10, "tnt-predict row");
    }
    tnt_dataset_iter_free(it);
    tnt_dataset_free(ds);
}

/* against the library's own prediction */
static void check_output(const char *path, const float *want, int64_t n, int64_t c) {
    check_output_tol(path, want, n, c, 1e-6);
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

/* A Keras 2 model with TensorFlow function layers (TFOpLambda, SlicingOpLambda: fixtures/
 * tfop_model.json from gen_ops.py, with NumPy's output): as Keras 2 wrote it with its weights,
 * and as a whole .h5 whose layers carry their traced operations (tnt_ops), no Python involved. */
static void test_traced_operations(void **state) {
    (void)state;
    FILE *f = fopen("fixtures/tfop_model.json", "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *txt = malloc((size_t)len + 1);
    assert_int_equal(fread(txt, 1, (size_t)len, f), (size_t)len);
    txt[len] = 0;
    fclose(f);
    cJSON *fx = cJSON_Parse(txt);
    free(txt);
    assert_non_null(fx);
    float w[15], want[25];
    tnt_tensor *x = tnt_tensor_new(TNT_SHAPE(5, 4));
    const char *keys[] = {"kernel", "bias", "x", "y"};
    float *dst[] = {w, w + 12, x->data, want};
    for (int k = 0; k < 4; k++) {
        const cJSON *e;
        int i = 0;
        cJSON_ArrayForEach(e, cJSON_GetObjectItem(cJSON_GetObjectItem(fx, keys[k]), "data")) dst[k][i++] = (float)e->valuedouble;
    }
    char *json = cJSON_PrintUnformatted(cJSON_GetObjectItem(fx, "model")), path[128];
    tnt_model *m = tnt_model_from_json(json);
    assert_non_null(m);
    tu_ok(tnt_set_weights(m, w, 15));
    snprintf(path, sizeof path, "%s/tfop.json", dir);
    f = fopen(path, "w");
    assert_non_null(f);
    fputs(json, f);
    fclose(f);
    free(json);
    snprintf(path, sizeof path, "%s/tfop_w.h5", dir);
    tu_ok(tnt_save_weights(m, path, NULL));
    snprintf(path, sizeof path, "%s/tfop_whole.h5", dir);
    tu_ok(tnt_save_model(m, path, NULL));
    snprintf(path, sizeof path, "%s/tfop_in.npy", dir);
    tu_ok(tnt_save_npy(path, x));
    assert_int_equal(run("'%s' %s/tfop.json %s/tfop_in.npy %s/tfop_out1.npy --weights %s/tfop_w.h5", program, dir, dir,
                         dir, dir), 0);
    snprintf(path, sizeof path, "%s/tfop_out1.npy", dir);
    check_output_tol(path, want, 5, 5, 1e-5); /* against NumPy */
    assert_int_equal(run("'%s' %s/tfop_whole.h5 %s/tfop_in.npy %s/tfop_out2.npy", program, dir, dir, dir), 0);
    snprintf(path, sizeof path, "%s/tfop_out2.npy", dir);
    check_output_tol(path, want, 5, 5, 1e-5); /* against NumPy */
    tnt_tensor_free(x);
    tnt_model_free(m);
    cJSON_Delete(fx);
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
        cmocka_unit_test(test_traced_operations),
        cmocka_unit_test(test_bad_usage_and_failures),
    };
    int r = cmocka_run_group_tests(tests, NULL, NULL);
    tnt_finalize();
    run("rm -rf '%s'", dir);
    return r;
}

/* test_save_check.c: what a save needs is checked before anything is written, and before
 * training where a save follows it (issue 13 point 6): a layer name a Keras file cannot hold
 * ("a/b", ".") fails tnt_save_weights / tnt_save_model (.h5 and .keras) naming it, and writes
 * nothing; tnt_save_opts.check_only checks the names and the path and writes nothing;
 * ModelCheckpoint fails fit before the first batch for a bad name or a directory it cannot
 * write, and makes a missing directory as Keras 3 does. */
#include "testutil.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static tnt_model *model_named(const char *name) {
    tnt_model *m = tnt_sequential("m");
    tu_ok(tnt_model_add(m, tnt_input_layer(TNT_SHAPE(4), NULL)));
    tu_ok(tnt_model_add(m, tnt_dense(3, &(tnt_layer_opts){.name = name})));
    tu_ok(tnt_model_add(m, tnt_dense(2, NULL)));
    tu_ok(tnt_compile(m, &(tnt_compile_opts){.optimizer = tnt_sgd(0.1f), .loss = TNT_MEAN_SQUARED_ERROR}));
    return m;
}

static bool exists(const char *path) { return access(path, F_OK) == 0; }

static void test_bad_names_refused(void **state) {
    (void)state;
    const char *names[] = {"a/b", "."};
    for (int i = 0; i < 2; i++) {
        tnt_model *m = model_named(names[i]);
        char want[64];
        snprintf(want, sizeof want, "layer name \"%s\" cannot be saved", names[i]);
        const char *paths[3] = {tu_tmp_path("bad_w.h5"), tu_tmp_path("bad_m.h5"), tu_tmp_path("bad_m.keras")};
        assert_int_equal(tnt_save_weights(m, paths[0], NULL), TNT_ERR_ARG);
        tu_error_contains(want);
        tu_error_contains(paths[0]);
        for (int k = 1; k < 3; k++) {
            assert_int_equal(tnt_save_model(m, paths[k], NULL), TNT_ERR_ARG);
            tu_error_contains(want);
            assert_int_equal(tnt_save_model(m, paths[k], &(tnt_save_opts){.check_only = true}), TNT_ERR_ARG);
            tu_error_contains(want);
        }
        for (int k = 0; k < 3; k++) assert_false(exists(paths[k]));
        tnt_model_free(m);
    }
}

static void test_check_only(void **state) {
    (void)state;
    tnt_model *m = model_named("fine");
    const char *path = tu_tmp_path("ok.h5");
    tu_ok(tnt_save_model(m, path, &(tnt_save_opts){.check_only = true}));
    tu_ok(tnt_save_weights(m, path, &(tnt_save_opts){.check_only = true}));
    assert_false(exists(path)); /* nothing written, no probe left */
    assert_int_equal(tnt_save_model(m, "/nonexistent/dir/out.h5", &(tnt_save_opts){.check_only = true}), TNT_ERR_IO);
    tu_error_contains("save_model /nonexistent/dir/out.h5: cannot write there: No such file or directory");
    assert_int_equal(tnt_save_model(m, "/proc/out.keras", &(tnt_save_opts){.check_only = true}), TNT_ERR_IO);
    tu_error_contains("save_model /proc/out.keras: cannot write there");
    char dir[512];
    snprintf(dir, sizeof dir, "%s", tu_tmp_path("adir"));
    assert_int_equal(mkdir(dir, 0700), 0);
    assert_int_equal(tnt_save_weights(m, dir, &(tnt_save_opts){.check_only = true}), TNT_ERR_IO);
    tu_error_contains("is a directory");
    tnt_model_free(m);
}

static int batches;
static tnt_status count_batch(tnt_model *m, int64_t batch, const tnt_logs *logs, void *user) {
    (void)m, (void)batch, (void)logs, (void)user;
    batches++;
    return TNT_OK;
}

/* fit with a ModelCheckpoint at filepath: its status; *steps receives the batches run. */
static tnt_status fit_with_checkpoint(tnt_model *m, const char *filepath, int *steps) {
    float x[32 * 4], y[32 * 2];
    tu_fill(x, 32 * 4, 1);
    tu_fill(y, 32 * 2, 2);
    tnt_dataset *ds = tnt_dataset_batch(tnt_dataset_from_arrays(x, TNT_SHAPE(4), y, TNT_SHAPE(2), 32, true), 8, false);
    tnt_callback cbs[2] = {tnt_model_checkpoint(filepath, &(tnt_checkpoint_opts){.monitor = "loss"}),
                           {.on_train_batch_end = count_batch}};
    batches = 0;
    tnt_status s = tnt_fit(m, ds, &(tnt_fit_opts){.epochs = 2, .callbacks = cbs, .n_callbacks = 2}, NULL);
    *steps = batches;
    tnt_callback_free(&cbs[0]);
    tnt_dataset_free(ds);
    return s;
}

static void test_checkpoint_checks_before_training(void **state) {
    (void)state;
    int steps;
    tnt_model *m = model_named("a/b");
    assert_int_equal(fit_with_checkpoint(m, tu_tmp_path("ck-{epoch:02d}.h5"), &steps), TNT_ERR_ARG);
    tu_error_contains("ModelCheckpoint");
    tu_error_contains("layer name \"a/b\" cannot be saved");
    assert_int_equal(steps, 0);
    tnt_model_free(m);

    m = model_named("fine");
    assert_int_equal(fit_with_checkpoint(m, "/proc/nope/ck-{epoch}.h5", &steps), TNT_ERR_IO);
    tu_error_contains("ModelCheckpoint /proc/nope/ck-{epoch}.h5: cannot create the directory /proc/nope");
    assert_int_equal(steps, 0);
    /* a missing directory is made (Keras 3); the checkpoints land there */
    char tmpl[512], first[512];
    snprintf(tmpl, sizeof tmpl, "%s/sub/ck-{epoch:02d}.h5", tu_tmp_path("made"));
    snprintf(first, sizeof first, "%s/sub/ck-01.h5", tu_tmp_path("made"));
    tu_ok(fit_with_checkpoint(m, tmpl, &steps));
    assert_int_equal(steps, 8);
    assert_true(exists(first));
    tnt_model_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_names_refused),
        cmocka_unit_test(test_check_only),
        cmocka_unit_test(test_checkpoint_checks_before_training),
    };
    return cmocka_run_group_tests(tests, tu_tmpdir_setup, tu_tmpdir_teardown);
}

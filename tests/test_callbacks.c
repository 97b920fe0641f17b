/* test_callbacks.c: Keras's built-in callbacks (src/callbacks/callbacks.c), single process. Each
 * callback is driven directly with hand-made logs (the decisions epoch by epoch, against Keras
 * 2.11's rules worked out by hand in the comments) and in a real fit. */
#include "testutil.h"

#include <dirent.h>

#include "training/history.h"
#include "model/model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { N = 32, FEATURES = 4, CLASSES = 3, BATCH = 8 };
static float xs[N * FEATURES], ys[N];

static void make_data(void) {
    tu_fill(xs, N * FEATURES, 5);
    for (int i = 0; i < N; i++) ys[i] = (float)((xs[i * FEATURES] > 0) + (xs[i * FEATURES + 1] > 0.5f));
}

static tnt_model *model(float lr) {
    tnt_model *m = tnt_sequential("m");
    tu_ok(tnt_model_add(m, tnt_input_layer(TNT_SHAPE(FEATURES), NULL)));
    tu_ok(tnt_model_add(m, tnt_dense(6, &(tnt_layer_opts){.activation = TNT_ACT_TANH})));
    tu_ok(tnt_model_add(m, tnt_dense(CLASSES, &(tnt_layer_opts){.activation = TNT_ACT_SOFTMAX})));
    tu_ok(tnt_compile(m, &(tnt_compile_opts){.optimizer = tnt_sgd(lr), .loss = TNT_SPARSE_CATEGORICAL_CROSSENTROPY,
                                             .metrics = "accuracy"}));
    return m;
}

static tnt_dataset *data(void) {
    return tnt_dataset_batch(tnt_dataset_from_arrays(xs, TNT_SHAPE(FEATURES), ys, TNT_SHAPE(), N, false), BATCH, false);
}

static tnt_logs logs1(const char *name, double v) {
    tnt_logs l = {.n = 1};
    snprintf(l.names[0], TNT_LOG_NAME_MAX, "%s", name);
    l.values[0] = v;
    return l;
}

/* Runs an epoch-end sequence through cb; returns the epoch at which m->stop_training was set,
 * or -1. */
static int drive_epochs(tnt_callback *cb, tnt_model *m, const char *name, const double *v, int n) {
    tnt_logs empty = {0};
    m->stop_training = false;
    if (cb->on_train_begin) tu_ok(cb->on_train_begin(m, &empty, cb->user));
    for (int e = 0; e < n; e++) {
        tnt_logs l = logs1(name, v[e]);
        if (cb->on_epoch_begin) tu_ok(cb->on_epoch_begin(m, e, &l, cb->user));
        tu_ok(cb->on_epoch_end(m, e, &l, cb->user));
        if (m->stop_training) return e;
    }
    return -1;
}

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    static char buf[4096];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
    return buf;
}

static void test_early_stopping_sequence(void **state) {
    (void)state;
    tnt_model *m = model(0.1f);
    /* min mode, min_delta 0.05, patience 2: 1.0 best, 0.8 best (0.85 < 1), 0.78 (0.83 !< 0.8:
     * wait 1), 0.76 (wait 2 >= 2: stop at epoch 3) */
    tnt_callback es = tnt_early_stopping(&(tnt_early_stopping_opts){.min_delta = 0.05, .patience = 2});
    assert_non_null(es.user);
    assert_false(es.master_only);
    double a[] = {1.0, 0.8, 0.78, 0.76, 0.5};
    assert_int_equal(drive_epochs(&es, m, "val_loss", a, 5), 3);
    assert_int_equal(tnt_early_stopping_stopped_epoch(&es), 3);
    assert_true(tnt_early_stopping_best(&es) == 0.8);
    /* reused: on_train_begin resets the state */
    double a2[] = {1.0, 0.9, 0.8, 0.7, 0.6};
    assert_int_equal(drive_epochs(&es, m, "val_loss", a2, 5), -1);
    assert_int_equal(tnt_early_stopping_stopped_epoch(&es), 0);
    tnt_callback_free(&es);
    assert_null(es.user);
    tnt_callback_free(&es); /* twice: a no-op */

    /* auto on "val_accuracy" means max; patience 1: 0.5, 0.6 best, 0.6 (not > 0.6): stop at 2 */
    es = tnt_early_stopping(&(tnt_early_stopping_opts){.monitor = "val_accuracy", .patience = 1});
    double b[] = {0.5, 0.6, 0.6, 0.7};
    assert_int_equal(drive_epochs(&es, m, "val_accuracy", b, 4), 2);
    tnt_callback_free(&es);

    /* patience 0 never stops at epoch 0 ("only check after the first epoch") */
    es = tnt_early_stopping(&(tnt_early_stopping_opts){.monitor = "loss"});
    double c[] = {1.0, 1.0};
    assert_int_equal(drive_epochs(&es, m, "loss", c, 2), 1);
    tnt_callback_free(&es);

    /* baseline 0.5: improvements that do not beat it do not reset wait; patience 2:
     * 0.9 (best, wait 1), 0.8 (best, wait 2, returns), 0.85 (wait 3 >= 2: stop at 2) */
    es = tnt_early_stopping(&(tnt_early_stopping_opts){.patience = 2, .has_baseline = true, .baseline = 0.5});
    double d[] = {0.9, 0.8, 0.85, 0.4};
    assert_int_equal(drive_epochs(&es, m, "val_loss", d, 4), 2);
    tnt_callback_free(&es);

    /* start_from_epoch 2: epochs 0 and 1 are not monitored */
    es = tnt_early_stopping(&(tnt_early_stopping_opts){.patience = 1, .start_from_epoch = 2});
    double e[] = {0.1, 0.2, 0.3, 0.4, 0.5};
    assert_int_equal(drive_epochs(&es, m, "val_loss", e, 5), 3);
    tnt_callback_free(&es);

    /* a missing monitor warns and never stops */
    es = tnt_early_stopping(NULL);
    assert_int_equal(drive_epochs(&es, m, "loss", c, 2), -1);
    tnt_callback_free(&es);

    /* bad arguments: user NULL, and fit fails with the status */
    es = tnt_early_stopping(&(tnt_early_stopping_opts){.patience = -1});
    assert_null(es.user);
    tu_error_contains("patience");
    tnt_dataset *ds = data();
    assert_int_equal(tnt_fit(m, ds, &(tnt_fit_opts){.epochs = 2, .callbacks = &es, .n_callbacks = 1}, NULL), TNT_ERR_ARG);
    tu_error_contains("constructor failed");
    tnt_dataset_free(ds);
    tnt_model_free(m);
}

static tnt_status record_weights(tnt_model *m, int epoch, const tnt_logs *logs, void *user) {
    (void)logs;
    if (epoch == 0) return tnt_get_weights(m, user, tnt_model_count_params(m));
    return TNT_OK;
}

static void test_early_stopping_fit_restores(void **state) {
    (void)state;
    tnt_model *m = model(0.5f);
    tnt_dataset *ds = data();
    /* min_delta 10: only the first epoch improves; patience 2 stops at epoch 2 and restores the
     * weights of epoch 0 */
    int64_t n = tnt_model_count_params(m);
    float *w0 = malloc((size_t)n * sizeof(float)), *w = malloc((size_t)n * sizeof(float));
    tnt_callback cbs[2] = {{.user = w0, .on_epoch_end = record_weights},
                           tnt_early_stopping(&(tnt_early_stopping_opts){.monitor = "loss", .min_delta = 10,
                                                                         .patience = 2, .restore_best_weights = true,
                                                                         .verbose = 1})};
    tnt_history *h;
    tu_ok(tnt_fit(m, ds, &(tnt_fit_opts){.epochs = 10, .callbacks = cbs, .n_callbacks = 2}, &h));
    assert_int_equal(tnt_history_epochs(h), 3);
    assert_int_equal(tnt_early_stopping_stopped_epoch(&cbs[1]), 2);
    tu_ok(tnt_get_weights(m, w, n));
    assert_memory_equal(w, w0, (size_t)n * sizeof(float));
    tnt_history_free(h);
    /* without restore the weights are those of the last epoch */
    tnt_callback_free(&cbs[1]);
    cbs[1] = tnt_early_stopping(&(tnt_early_stopping_opts){.monitor = "loss", .min_delta = 10, .patience = 1});
    tu_ok(tnt_fit(m, ds, &(tnt_fit_opts){.epochs = 10, .callbacks = cbs, .n_callbacks = 2}, &h));
    assert_int_equal(tnt_history_epochs(h), 2);
    tu_ok(tnt_get_weights(m, w, n));
    assert_true(memcmp(w, w0, (size_t)n * sizeof(float)) != 0);
    tnt_history_free(h);
    tnt_callback_free(&cbs[1]);
    free(w0), free(w);
    tnt_dataset_free(ds);
    tnt_model_free(m);
}

static void test_reduce_lr_on_plateau(void **state) {
    (void)state;
    tnt_model *m = model(1.0f);
    tnt_optimizer *opt = tnt_model_optimizer(m);
    /* constant loss, patience 2, cooldown 1, factor 0.5, min_lr 0.3, min_delta 0:
     * e0 best; e1 wait 1; e2 wait 2: 1.0 -> 0.5, cooldown 1; e3 cooldown ends, wait 1;
     * e4 wait 2: 0.5 -> max(0.25, 0.3) = 0.3; e5 wait 1; e6 wait 2 but lr == min_lr: unchanged */
    tnt_callback r = tnt_reduce_lr_on_plateau(&(tnt_reduce_lr_opts){.monitor = "loss", .factor = 0.5, .patience = 2,
                                                                     .cooldown = 1, .min_lr = 0.3, .min_delta = -1,
                                                                     .verbose = 1});
    assert_non_null(r.user);
    float want[] = {1.0f, 1.0f, 0.5f, 0.5f, 0.3f, 0.3f, 0.3f};
    tnt_logs empty = {0};
    tu_ok(r.on_train_begin(m, &empty, r.user));
    for (int e = 0; e < 7; e++) {
        tnt_logs l = logs1("loss", 1.0);
        tu_ok(r.on_epoch_end(m, e, &l, r.user));
        assert_float_equal(tnt_optimizer_get_lr(opt), want[e], 1e-7);
    }
    tnt_callback_free(&r);

    /* defaults: factor 0.1, patience 10, min_delta 1e-4 (an improvement of 5e-5 is none):
     * reduced at epoch 10 */
    tu_ok(tnt_optimizer_set_lr(opt, 1.0f));
    r = tnt_reduce_lr_on_plateau(NULL);
    tu_ok(r.on_train_begin(m, &empty, r.user));
    for (int e = 0; e <= 10; e++) {
        tnt_logs l = logs1("val_loss", 1.0 - 5e-5 * (e % 2));
        tu_ok(r.on_epoch_end(m, e, &l, r.user));
        assert_float_equal(tnt_optimizer_get_lr(opt), e < 10 ? 1.0f : 0.1f, 1e-7);
    }
    tnt_callback_free(&r);

    /* max mode on accuracy (auto), patience -1 (= 0): every epoch without improvement reduces */
    tu_ok(tnt_optimizer_set_lr(opt, 1.0f));
    r = tnt_reduce_lr_on_plateau(&(tnt_reduce_lr_opts){.monitor = "accuracy", .patience = -1});
    tu_ok(r.on_train_begin(m, &empty, r.user));
    double acc[] = {0.5, 0.6, 0.55, 0.7};
    float want2[] = {1.0f, 1.0f, 0.1f, 0.1f};
    for (int e = 0; e < 4; e++) {
        tnt_logs l = logs1("accuracy", acc[e]);
        tu_ok(r.on_epoch_end(m, e, &l, r.user));
        assert_float_equal(tnt_optimizer_get_lr(opt), want2[e], 1e-7);
    }
    tnt_callback_free(&r);

    r = tnt_reduce_lr_on_plateau(&(tnt_reduce_lr_opts){.factor = 1.5});
    assert_null(r.user);
    tu_error_contains("factor");
    tnt_model_free(m);
}

static float halve_after_first(int epoch, float lr, void *user) {
    (*(int *)user)++;
    return epoch == 0 ? lr : lr * 0.5f;
}

static float bad_rate(int epoch, float lr, void *user) {
    (void)epoch, (void)lr, (void)user;
    return NAN;
}

static void test_learning_rate_scheduler(void **state) {
    (void)state;
    tnt_model *m = model(0.4f);
    tnt_dataset *ds = data();
    int calls = 0;
    tnt_callback s = tnt_learning_rate_scheduler(halve_after_first, &calls, 1);
    assert_non_null(s.user);
    tu_ok(tnt_fit(m, ds, &(tnt_fit_opts){.epochs = 3, .callbacks = &s, .n_callbacks = 1}, NULL));
    assert_int_equal(calls, 3);
    assert_float_equal(tnt_optimizer_get_lr(tnt_model_optimizer(m)), 0.1f, 1e-7);
    tnt_callback_free(&s);
    s = tnt_learning_rate_scheduler(bad_rate, NULL, 0);
    assert_int_equal(tnt_fit(m, ds, &(tnt_fit_opts){.epochs = 3, .callbacks = &s, .n_callbacks = 1}, NULL), TNT_ERR_ARG);
    tu_error_contains("LearningRateScheduler");
    tnt_callback_free(&s);
    s = tnt_learning_rate_scheduler(NULL, NULL, 0);
    assert_null(s.user);
    tnt_dataset_free(ds);
    tnt_model_free(m);
}

static void test_terminate_on_nan(void **state) {
    (void)state;
    tnt_model *m = model(0.1f);
    tnt_callback t = tnt_terminate_on_nan();
    assert_non_null(t.on_train_batch_end);
    m->stop_training = false;
    tnt_logs l = logs1("loss", 0.5);
    tu_ok(t.on_train_batch_end(m, 0, &l, t.user));
    assert_false(m->stop_training);
    l = logs1("loss", INFINITY);
    tu_ok(t.on_train_batch_end(m, 1, &l, t.user));
    assert_true(m->stop_training);
    m->stop_training = false;
    l = logs1("loss", NAN);
    tu_ok(t.on_train_batch_end(m, 2, &l, t.user));
    assert_true(m->stop_training);
    tnt_model_free(m);
    /* a real fit that diverges (MSE on a huge rate) stops after the first epoch */
    m = tnt_sequential("d");
    tu_ok(tnt_model_add(m, tnt_input_layer(TNT_SHAPE(FEATURES), NULL)));
    tu_ok(tnt_model_add(m, tnt_dense(1, NULL)));
    tu_ok(tnt_compile(m, &(tnt_compile_opts){.optimizer = tnt_sgd(1e30f), .loss = TNT_MEAN_SQUARED_ERROR}));
    tnt_dataset *ds = data();
    tnt_history *h;
    tu_ok(tnt_fit(m, ds, &(tnt_fit_opts){.epochs = 5, .callbacks = &t, .n_callbacks = 1}, &h));
    assert_int_equal(tnt_history_epochs(h), 1);
    assert_false(isfinite(tnt_history_get(h, "loss", 0)));
    tnt_history_free(h);
    tnt_callback_free(&t);
    tnt_dataset_free(ds);
    tnt_model_free(m);
}

static tnt_status count_batch(tnt_model *m, int64_t batch, const tnt_logs *logs, void *user) {
    (void)m, (void)batch, (void)logs;
    (*(int *)user)++;
    return TNT_OK;
}

/* As in Keras, fit stops after the batch whose loss is NaN, not at the end of its epoch. */
static void test_terminate_on_nan_at_batch(void **state) {
    (void)state;
    float saved = xs[1 * BATCH * FEATURES];
    xs[1 * BATCH * FEATURES] = NAN; /* the first sample of batch 1 (of 4 per epoch) */
    tnt_dataset *ds = data();
    tnt_model *m = model(0.1f);
    int batches = 0;
    tnt_callback cbs[2] = {tnt_terminate_on_nan(), {.user = &batches, .on_train_batch_end = count_batch}};
    tnt_history *h;
    tu_ok(tnt_fit(m, ds, &(tnt_fit_opts){.epochs = 5, .callbacks = cbs, .n_callbacks = 2}, &h));
    assert_int_equal(batches, 2);
    assert_int_equal(tnt_history_epochs(h), 1);
    assert_true(isnan(tnt_history_get(h, "loss", 0)));
    tnt_history_free(h);
    tnt_callback_free(&cbs[0]);
    tnt_dataset_free(ds);
    tnt_model_free(m);
    xs[1 * BATCH * FEATURES] = saved;
}

static void test_csv_logger(void **state) {
    (void)state;
    const char *path = "/tmp/tnt_test_callbacks.csv";
    unlink(path);
    tnt_model *m = model(0.1f);
    tnt_callback c = tnt_csv_logger(path, 0, false);
    assert_non_null(c.user);
    assert_true(c.master_only);
    tnt_logs empty = {0}, l = {0};
    /* fit's order: loss, accuracy, then val_ entries; the file sorts them */
    l = logs1("loss", 0.5);
    l.n = 3;
    strcpy(l.names[1], "val_loss"), l.values[1] = 0.25;
    strcpy(l.names[2], "accuracy"), l.values[2] = 0.1;
    tu_ok(c.on_train_begin(m, &empty, c.user));
    tu_ok(c.on_epoch_end(m, 0, &l, c.user));
    assert_string_equal(slurp(path), "epoch,accuracy,loss,val_loss\r\n0,0.1,0.5,0.25\r\n");
    l.values[0] = 1e-5, l.values[1] = 12.0, l.values[2] = 1.0 / 3;
    tu_ok(c.on_epoch_end(m, 1, &l, c.user));
    tu_ok(c.on_train_end(m, &empty, c.user));
    assert_string_equal(slurp(path), "epoch,accuracy,loss,val_loss\r\n0,0.1,0.5,0.25\r\n"
                                     "1,0.3333333333333333,1e-05,12.0\r\n");
    tnt_callback_free(&c);
    /* append: rows after the existing ones, no second header; separator ';' */
    c = tnt_csv_logger(path, ';', true);
    tu_ok(c.on_train_begin(m, &empty, c.user));
    l.n = 2; /* the keys are those of the first epoch of this fit */
    tu_ok(c.on_epoch_end(m, 2, &l, c.user));
    tu_ok(c.on_train_end(m, &empty, c.user));
    tu_ok(c.on_train_begin(m, &empty, c.user));
    l.n = 3;
    tu_ok(c.on_epoch_end(m, 3, &l, c.user));
    l.n = 2; /* a key missing later is written as NA */
    tu_ok(c.on_epoch_end(m, 4, &l, c.user));
    tnt_callback_free(&c); /* closes the file without on_train_end */
    assert_string_equal(slurp(path), "epoch,accuracy,loss,val_loss\r\n0,0.1,0.5,0.25\r\n"
                                     "1,0.3333333333333333,1e-05,12.0\r\n2;1e-05;12.0\r\n"
                                     "3;0.3333333333333333;1e-05;12.0\r\n4;NA;1e-05;12.0\r\n");
    /* append to an empty file writes the header */
    fclose(fopen(path, "w"));
    c = tnt_csv_logger(path, 0, true);
    tu_ok(c.on_train_begin(m, &empty, c.user));
    tu_ok(c.on_epoch_end(m, 0, &l, c.user));
    tu_ok(c.on_train_end(m, &empty, c.user));
    assert_string_equal(slurp(path), "epoch,loss,val_loss\r\n0,1e-05,12.0\r\n");
    tnt_callback_free(&c);
    /* in a real fit: one row per epoch, keys of the logs */
    tnt_dataset *ds = data();
    c = tnt_csv_logger(path, 0, false);
    tnt_history *h;
    tu_ok(tnt_fit(m, ds, &(tnt_fit_opts){.epochs = 3, .validation_data = ds, .callbacks = &c, .n_callbacks = 1}, &h));
    char *text = slurp(path);
    assert_true(!strncmp(text, "epoch,accuracy,loss,val_accuracy,val_loss\r\n0,", 45));
    assert_non_null(strstr(text, "\r\n2,"));
    assert_null(strstr(text, "\r\n3,"));
    tnt_history_free(h);
    tnt_callback_free(&c);
    /* an unwritable path fails fit with TNT_ERR_IO */
    c = tnt_csv_logger("/nonexistent-dir/x.csv", 0, false);
    assert_int_equal(tnt_fit(m, ds, &(tnt_fit_opts){.epochs = 1, .callbacks = &c, .n_callbacks = 1}, NULL), TNT_ERR_IO);
    tu_error_contains("/nonexistent-dir/x.csv");
    tnt_callback_free(&c);
    unlink(path);
    tnt_dataset_free(ds);
    tnt_model_free(m);
}

static void test_format_filepath(void **state) {
    (void)state;
    char buf[128];
    tnt_logs l = logs1("val_loss", 0.5234);
    tnt__logs_set(&l, NULL, "loss", 1e-5);
    tu_ok(tnt_format_filepath("ckpt-{epoch:02d}-{val_loss:.2f}.h5", 3, -1, &l, buf, sizeof buf));
    assert_string_equal(buf, "ckpt-03-0.52.h5");
    tu_ok(tnt_format_filepath("w{epoch}_{val_loss:.4f}_{loss}_{{x}}.h5", 12, -1, &l, buf, sizeof buf));
    assert_string_equal(buf, "w12_0.5234_1e-05_{x}.h5");
    tu_ok(tnt_format_filepath("{epoch:03d}-{batch:04d}-{val_loss:8.3f}-{val_loss:e}-{val_loss:.1%}", 7, 250, &l, buf,
                              sizeof buf));
    assert_string_equal(buf, "007-0250-   0.523-5.234000e-01-52.3%");
    tu_ok(tnt_format_filepath("{val_loss:.3}", 1, -1, &l, buf, sizeof buf));
    assert_string_equal(buf, "0.523");
    assert_int_equal(tnt_format_filepath("{epoch}-{batch}", 1, -1, &l, buf, sizeof buf), TNT_ERR_ARG);
    tu_error_contains("{batch}");
    assert_int_equal(tnt_format_filepath("{val_acc:.2f}", 1, -1, &l, buf, sizeof buf), TNT_ERR_ARG);
    tu_error_contains("val_loss");
    assert_int_equal(tnt_format_filepath("{val_loss:d}", 1, -1, &l, buf, sizeof buf), TNT_ERR_ARG);
    assert_int_equal(tnt_format_filepath("{epoch", 1, -1, &l, buf, sizeof buf), TNT_ERR_ARG);
    assert_int_equal(tnt_format_filepath("a}", 1, -1, &l, buf, sizeof buf), TNT_ERR_ARG);
    assert_int_equal(tnt_format_filepath("{epoch:>5}", 1, -1, &l, buf, sizeof buf), TNT_ERR_ARG);
    assert_int_equal(tnt_format_filepath("long-{epoch}", 1, -1, &l, buf, 6), TNT_ERR_ARG);
}

static bool exists(const char *path) { return access(path, F_OK) == 0; }

static void test_model_checkpoint(void **state) {
    (void)state;
    const char *dir = "/tmp/tnt_test_ckpt";
    char tmpl[256], path[256];
    mkdir(dir, 0755);
    snprintf(tmpl, sizeof tmpl, "%s/ckpt-{epoch:02d}-{val_loss:.2f}.h5", dir);
    tnt_model *m = model(0.1f);
    /* save_best_only on val_loss (min): 0.5 saved, 0.6 not, 0.4 saved */
    tnt_callback c = tnt_model_checkpoint(tmpl, &(tnt_checkpoint_opts){.save_best_only = true, .save_weights_only = true,
                                                                       .verbose = 1});
    assert_non_null(c.user);
    assert_false(c.master_only); /* every rank calls tnt_save_weights */
    assert_null(c.on_train_batch_end);
    tnt_logs empty = {0};
    double v[] = {0.5, 0.6, 0.4};
    const char *names[] = {"ckpt-01-0.50.h5", "ckpt-02-0.60.h5", "ckpt-03-0.40.h5"};
    for (int e = 0; e < 3; e++) snprintf(path, sizeof path, "%s/%s", dir, names[e]), unlink(path);
    tu_ok(c.on_train_begin(m, &empty, c.user));
    for (int e = 0; e < 3; e++) {
        tnt_logs l = logs1("val_loss", v[e]);
        tu_ok(c.on_epoch_begin(m, e, &l, c.user));
        tu_ok(c.on_epoch_end(m, e, &l, c.user));
    }
    for (int e = 0; e < 3; e++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[e]);
        assert_int_equal(exists(path), e != 1);
    }
    /* the saved weights load back */
    snprintf(path, sizeof path, "%s/%s", dir, names[2]);
    tnt_model *m2 = model(0.1f);
    tu_ok(tnt_load_weights(m2, path, false));
    int64_t n = tnt_model_count_params(m);
    float *a = malloc((size_t)n * sizeof(float)), *b = malloc((size_t)n * sizeof(float));
    tu_ok(tnt_get_weights(m, a, n));
    tu_ok(tnt_get_weights(m2, b, n));
    assert_memory_equal(a, b, (size_t)n * sizeof(float));
    free(a), free(b);
    tnt_model_free(m2);
    for (int e = 0; e < 3; e++) snprintf(path, sizeof path, "%s/%s", dir, names[e]), unlink(path);
    tnt_callback_free(&c);

    /* a real fit with save_freq 3 batches (4 batches per epoch, 2 epochs: saves after global
     * batches 3 and 6, i.e. epoch 1 batch 3 and epoch 2 batch 2), and one per epoch */
    snprintf(tmpl, sizeof tmpl, "%s/b-{epoch}-{batch}.h5", dir);
    c = tnt_model_checkpoint(tmpl, &(tnt_checkpoint_opts){.save_weights_only = true, .save_freq = 3});
    assert_non_null(c.on_train_batch_end);
    char tmpl2[256];
    snprintf(tmpl2, sizeof tmpl2, "%s/e-{epoch}-{loss:.3f}.h5", dir);
    tnt_callback cbs[2] = {c, tnt_model_checkpoint(tmpl2, &(tnt_checkpoint_opts){.save_weights_only = true})};
    tnt_dataset *ds = data();
    tnt_history *h;
    tu_ok(tnt_fit(m, ds, &(tnt_fit_opts){.epochs = 2, .callbacks = cbs, .n_callbacks = 2}, &h));
    const char *want[] = {"b-1-3.h5", "b-2-2.h5"};
    for (int i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, want[i]);
        assert_true(exists(path));
        unlink(path);
    }
    for (int e = 0; e < 2; e++) {
        snprintf(path, sizeof path, "%s/e-%d-%.3f.h5", dir, e + 1, tnt_history_get(h, "loss", e));
        assert_true(exists(path));
        unlink(path);
    }
    snprintf(path, sizeof path, "%s/b-1-1.h5", dir);
    assert_false(exists(path));
    tnt_history_free(h);
    tnt_callback_free(&cbs[0]);
    tnt_callback_free(&cbs[1]);
    /* the default saves the whole model, which tnt_load_model reads back compiled */
    snprintf(tmpl, sizeof tmpl, "%s/whole-{epoch:02d}.h5", dir);
    c = tnt_model_checkpoint(tmpl, NULL);
    assert_non_null(c.user);
    tu_ok(tnt_fit(m, ds, &(tnt_fit_opts){.epochs = 1, .callbacks = &c, .n_callbacks = 1}, NULL));
    tnt_callback_free(&c);
    DIR *d = opendir(dir);
    assert_non_null(d);
    int whole = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        char file[600];
        snprintf(file, sizeof file, "%s/%s", dir, e->d_name);
        assert_non_null(strstr(file, "/whole-01.h5"));
        tnt_model *loaded = tnt_load_model(file, true);
        assert_non_null(loaded);
        assert_non_null(tnt_model_optimizer(loaded));
        tnt_model_free(loaded);
        unlink(file);
        whole++;
    }
    closedir(d);
    assert_int_equal(whole, 1);
    /* a template naming an absent log fails fit with the name */
    c = tnt_model_checkpoint("/tmp/x-{val_loss}.h5", &(tnt_checkpoint_opts){.save_weights_only = true});
    assert_int_equal(tnt_fit(m, ds, &(tnt_fit_opts){.epochs = 1, .callbacks = &c, .n_callbacks = 1}, NULL), TNT_ERR_ARG);
    tu_error_contains("{val_loss}");
    tnt_callback_free(&c);
    rmdir(dir);
    tnt_dataset_free(ds);
    tnt_model_free(m);
}

int main(void) {
    make_data();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_early_stopping_sequence),
        cmocka_unit_test(test_early_stopping_fit_restores),
        cmocka_unit_test(test_reduce_lr_on_plateau),
        cmocka_unit_test(test_learning_rate_scheduler),
        cmocka_unit_test(test_terminate_on_nan),
        cmocka_unit_test(test_terminate_on_nan_at_batch),
        cmocka_unit_test(test_csv_logger),
        cmocka_unit_test(test_format_filepath),
        cmocka_unit_test(test_model_checkpoint),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* test_tfevents.c: TensorBoard event files and the TensorBoard callback. An independent Python
 * reader (tests/tools/tfevents_read.py: bitwise CRC-32C, protobuf wire format) checks the
 * framing, the masked CRCs and the decoded scalars and histograms; CRC-32C against the standard check value;
 * the callback's train/validation files after a real fit; errors. */
#include "testutil.h"

#include "io/tfevents.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Closes w, reads its file with the independent reader (tools/tfevents_read.py), compares the
 * listing with expected, and removes dir. */
static void close_and_expect(tnt__tfevents *w, const char *dir, const char *expected) {
    char cmd[4608];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 tools/tfevents_read.py '%s'", tnt__tfevents_path(w));
    tnt__tfevents_close(w);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    char out[1024] = {0};
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = '\0';
    assert_int_equal(pclose(p), 0);
    assert_string_equal(out, expected);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

static void test_crc32c_check_value(void **state) {
    (void)state;
    assert_int_equal(tnt__crc32c("123456789", 9), 0xE3069283u);
}

static void test_scalars_read_back(void **state) {
    (void)state;
    char dir[] = "/tmp/tnt_tfevents_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char logdir[256];
    snprintf(logdir, sizeof logdir, "%s/run/train", dir); /* parents are created */
    tnt__tfevents *w = tnt__tfevents_open(logdir, NULL);
    assert_non_null(w);
    tu_ok(tnt__tfevents_scalar(w, "epoch_loss", 0.6931f, 0));
    tu_ok(tnt__tfevents_scalar(w, "epoch_accuracy", 0.5f, 0));
    tu_ok(tnt__tfevents_scalar(w, "epoch_loss", 0.25f, 1));
    tu_ok(tnt__tfevents_scalar(w, "epoch_learning_rate", 1e-3f, 300));
    assert_non_null(strstr(tnt__tfevents_path(w), "/events.out.tfevents."));
    close_and_expect(w, dir, "version brain.Event:2\n"
                             "scalar 0 epoch_loss 0.6931\n"
                             "scalar 0 epoch_accuracy 0.5\n"
                             "scalar 1 epoch_loss 0.25\n"
                             "scalar 300 epoch_learning_rate 0.001\n");
}

/* Histograms as tensorboard 2.11's summary_v2 buckets them, read back by the independent reader:
 * 30 buckets of width (max - min) / 30, the last closed at max; equal values one bucket
 * [x - 0.5, x + 0.5]; no values no bucket. Worked out by hand for 0..9 (width 0.3: 0 alone in the
 * first bucket, 9 alone in the last). */
static void test_histograms_read_back(void **state) {
    (void)state;
    char dir[] = "/tmp/tnt_tfevents_XXXXXX";
    assert_non_null(mkdtemp(dir));
    tnt__tfevents *w = tnt__tfevents_open(dir, NULL);
    assert_non_null(w);
    float ten[10], same[4] = {2, 2, 2, 2};
    for (int i = 0; i < 10; i++) ten[i] = (float)i;
    tu_ok(tnt__tfevents_histogram(w, "dense/kernel_0/histogram", ten, 10, 3));
    tu_ok(tnt__tfevents_histogram(w, "same", same, 4, 4));
    tu_ok(tnt__tfevents_histogram(w, "none", NULL, 0, 5));
    assert_int_equal(tnt__tfevents_histogram(w, "x", NULL, 3, 0), TNT_ERR_ARG);
    close_and_expect(w, dir, "version brain.Event:2\n"
                             "histogram 3 dense/kernel_0/histogram histograms class=2 30x3 count=10 "
                             "first=0 0.3 1 last=8.7 9 1\n"
                             "histogram 4 same histograms class=2 1x3 count=4 first=1.5 2.5 4 last=1.5 2.5 4\n"
                             "histogram 5 none histograms class=2 0x3 count=0\n");
}

/* The decoded scalars of the one event file in dir, as the reader prints them. */
static void read_dir(const char *dir, char *out, size_t size) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 tools/tfevents_read.py %s/events.out.tfevents.*", dir);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t n = fread(out, 1, size - 1, p);
    out[n] = '\0';
    assert_int_equal(pclose(p), 0);
}

static void test_tensorboard_callback(void **state) {
    (void)state;
    char dir[] = "/tmp/tnt_tb_XXXXXX";
    assert_non_null(mkdtemp(dir));
    tnt_model *m = tnt_sequential(NULL);
    tu_ok(tnt_model_add(m, tnt_input_layer(TNT_SHAPE(3), NULL)));
    tu_ok(tnt_model_add(m, tnt_dense(2, &(tnt_layer_opts){.activation = TNT_ACT_SOFTMAX})));
    tu_ok(tnt_compile(m, &(tnt_compile_opts){.optimizer = tnt_sgd(0.5f), .loss = TNT_SPARSE_CATEGORICAL_CROSSENTROPY,
                                             .metrics = "accuracy"}));
    float x[24], y[8];
    tu_fill(x, 24, 3);
    for (int i = 0; i < 8; i++) y[i] = (float)(x[i * 3] > 0);
    tnt_dataset *ds = tnt_dataset_batch(tnt_dataset_from_arrays(x, TNT_SHAPE(3), y, TNT_SHAPE(), 8, true), 4, false);
    tnt_callback tb = tnt_tensorboard(dir, &(tnt_tensorboard_opts){.update_freq = 2, .histogram_freq = 2});
    assert_non_null(tb.user);
    tnt_history *h;
    tu_ok(tnt_fit(m, ds, &(tnt_fit_opts){.epochs = 2, .validation_data = ds, .callbacks = &tb, .n_callbacks = 1}, &h));
    char out[2048], sub[64], want[512];
    snprintf(sub, sizeof sub, "%s/train", dir);
    read_dir(sub, out, sizeof out);
    /* epoch scalars with the History's values, the learning rate, batch scalars every 2 steps */
    snprintf(want, sizeof want, "scalar 0 epoch_loss %.6g\n", (double)(float)tnt_history_get(h, "loss", 0));
    assert_non_null(strstr(out, want));
    snprintf(want, sizeof want, "scalar 1 epoch_accuracy %.6g\n", (double)(float)tnt_history_get(h, "accuracy", 1));
    assert_non_null(strstr(out, want));
    assert_non_null(strstr(out, "scalar 1 epoch_learning_rate 0.5\n"));
    assert_non_null(strstr(out, "scalar 2 batch_loss "));
    assert_non_null(strstr(out, "scalar 4 batch_loss "));
    assert_null(strstr(out, "val_"));
    /* histogram_freq 2: epoch 0 only, Keras's tags, every value counted (kernel 3x2, bias 2) */
    assert_non_null(strstr(out, "histogram 0 dense/kernel_0/histogram histograms class=2 30x3 count=6 "));
    assert_non_null(strstr(out, "histogram 0 dense/bias_0/histogram histograms class=2 "));
    assert_null(strstr(out, "histogram 1 "));
    snprintf(sub, sizeof sub, "%s/validation", dir);
    read_dir(sub, out, sizeof out);
    snprintf(want, sizeof want, "scalar 1 epoch_loss %.6g\n", (double)(float)tnt_history_get(h, "val_loss", 1));
    assert_non_null(strstr(out, want));
    tnt_callback_free(&tb);
    assert_null(tb.user);
    assert_null(tnt_tensorboard("", NULL).user);
    assert_null(tnt_tensorboard(dir, &(tnt_tensorboard_opts){.update_freq = -1}).user);
    assert_null(tnt_tensorboard(dir, &(tnt_tensorboard_opts){.histogram_freq = -1}).user);
    tnt_history_free(h);
    tnt_dataset_free(ds);
    tnt_model_free(m);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

static void test_errors(void **state) {
    (void)state;
    assert_null(tnt__tfevents_open("", NULL));
    assert_null(tnt__tfevents_open("/proc/no/such/dir", NULL));
    tu_error_contains("/proc/no");
    assert_int_equal(tnt__tfevents_scalar(NULL, "x", 1.0f, 0), TNT_ERR_ARG);
    char tag[3000];
    memset(tag, 'a', sizeof tag - 1);
    tag[sizeof tag - 1] = '\0';
    char dir[] = "/tmp/tnt_tfevents_XXXXXX";
    assert_non_null(mkdtemp(dir));
    tnt__tfevents *w = tnt__tfevents_open(dir, NULL);
    assert_non_null(w);
    assert_int_equal(tnt__tfevents_scalar(w, tag, 1.0f, 0), TNT_ERR_ARG); /* too long a tag */
    tnt__tfevents_close(w);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crc32c_check_value),
        cmocka_unit_test(test_scalars_read_back),
        cmocka_unit_test(test_histograms_read_back),
        cmocka_unit_test(test_tensorboard_callback),
        cmocka_unit_test(test_errors),
    };
    tnt_init(NULL, NULL);
    int r = cmocka_run_group_tests(tests, NULL, NULL);
    tnt_finalize();
    return r;
}

/* test_tfevents.c: TensorBoard event files. An independent Python reader
 * (tests/tools/tfevents_read.py: bitwise CRC-32C, protobuf wire format) checks the framing, the
 * masked CRCs and the decoded scalars; CRC-32C against the standard check value; errors. */
#include "testutil.h"

#include "io/tfevents.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
    char cmd[4608];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 tools/tfevents_read.py '%s'", tnt__tfevents_path(w));
    assert_non_null(strstr(tnt__tfevents_path(w), "/events.out.tfevents."));
    tnt__tfevents_close(w);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    char out[1024] = {0};
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = '\0';
    assert_int_equal(pclose(p), 0);
    assert_string_equal(out, "version brain.Event:2\n"
                             "scalar 0 epoch_loss 0.6931\n"
                             "scalar 0 epoch_accuracy 0.5\n"
                             "scalar 1 epoch_loss 0.25\n"
                             "scalar 300 epoch_learning_rate 0.001\n");
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

static void test_errors(void **state) {
    (void)state;
    assert_null(tnt__tfevents_open("", NULL));
    assert_null(tnt__tfevents_open("/proc/no/such/dir", NULL));
    tu_error_contains("/proc/no");
    assert_int_equal(tnt__tfevents_scalar(NULL, "x", 1.0f, 0), TNT_ERR_ARG);
    char tag[2000];
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
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

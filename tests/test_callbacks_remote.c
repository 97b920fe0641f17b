/* test_callbacks_remote.c: RemoteMonitor against a local HTTP sink (tests/tools/http_sink.py):
 * one POST per epoch with Keras's form field or JSON body, custom headers, and an unreachable
 * server that only warns. */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static tnt_model *small_model(void) {
    tnt_model *m = tnt_sequential(NULL);
    tu_ok(tnt_model_add(m, tnt_input_layer(TNT_SHAPE(3), NULL)));
    tu_ok(tnt_model_add(m, tnt_dense(2, &(tnt_layer_opts){.activation = TNT_ACT_SOFTMAX})));
    tu_ok(tnt_compile(m, &(tnt_compile_opts){.optimizer = tnt_sgd(0.1f), .loss = TNT_SPARSE_CATEGORICAL_CROSSENTROPY,
                                             .metrics = "accuracy"}));
    return m;
}

/* Trains 2 epochs with a RemoteMonitor posting to a fresh sink; returns what the sink saw. */
static char *post_two_epochs(bool as_json) {
    char dir[] = "/tmp/tnt_remote_XXXXXX", cmd[512], port_file[64], out_file[64];
    assert_non_null(mkdtemp(dir));
    snprintf(port_file, sizeof port_file, "%s/port", dir);
    snprintf(out_file, sizeof out_file, "%s/out", dir);
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 tools/http_sink.py %s %s 2 &", port_file, out_file);
    assert_int_equal(system(cmd), 0);
    int port = 0;
    for (int i = 0; i < 200 && !port; i++) { /* up to 10 s for the sink to start */
        FILE *f = fopen(port_file, "r");
        if (f) {
            if (fscanf(f, "%d", &port) != 1) port = 0;
            fclose(f);
        }
        if (!port) usleep(50000);
    }
    assert_true(port > 0);
    char root[64];
    snprintf(root, sizeof root, "http://127.0.0.1:%d", port);
    const char *headers[] = {"X-Token: secret", NULL};
    tnt_callback rm = tnt_remote_monitor(&(tnt_remote_monitor_opts){.root = root, .path = "/log/",
                                                                    .send_as_json = as_json, .headers = headers});
    assert_non_null(rm.user);
    tnt_model *m = small_model();
    float x[12] = {1, 2, 3, -1, -2, -3, 1, 0, 1, 0, 1, 0}, y[4] = {1, 0, 1, 0};
    tnt_dataset *ds = tnt_dataset_batch(tnt_dataset_from_arrays(x, TNT_SHAPE(3), y, TNT_SHAPE(), 4, true), 2, false);
    tu_ok(tnt_fit(m, ds, &(tnt_fit_opts){.epochs = 2, .callbacks = &rm, .n_callbacks = 1}, NULL));
    char *seen = NULL;
    for (int i = 0; i < 200 && !seen; i++) { /* the sink writes after the second request */
        FILE *f = fopen(out_file, "r");
        if (f) {
            seen = calloc(1, 4096);
            if (fread(seen, 1, 4095, f) == 0) {
                free(seen);
                seen = NULL;
            }
            fclose(f);
        }
        if (!seen) usleep(50000);
    }
    assert_non_null(seen);
    tnt_callback_free(&rm);
    tnt_dataset_free(ds);
    tnt_model_free(m);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
    return seen;
}

static void test_form_field(void **state) {
    (void)state;
    char *seen = post_two_epochs(false);
    /* path|content type|header|body; the body is data=<url-encoded JSON> */
    assert_non_null(strstr(seen, "/log/|application/x-www-form-urlencoded|secret|data=%7B%22epoch%22%3A0%2C%22loss%22%3A"));
    assert_non_null(strstr(seen, "data=%7B%22epoch%22%3A1%2C%22loss%22%3A"));
    assert_non_null(strstr(seen, "%22accuracy%22%3A"));
    free(seen);
}

static void test_json_body(void **state) {
    (void)state;
    char *seen = post_two_epochs(true);
    assert_non_null(strstr(seen, "/log/|application/json|secret|{\"epoch\":0,\"loss\":"));
    assert_non_null(strstr(seen, "{\"epoch\":1,\"loss\":"));
    free(seen);
}

static void test_unreachable_server_only_warns(void **state) {
    (void)state;
    tnt_callback rm = tnt_remote_monitor(&(tnt_remote_monitor_opts){.root = "http://127.0.0.1:1"});
    tnt_model *m = small_model();
    float x[6] = {1, 2, 3, -1, -2, -3}, y[2] = {1, 0};
    tnt_dataset *ds = tnt_dataset_batch(tnt_dataset_from_arrays(x, TNT_SHAPE(3), y, TNT_SHAPE(), 2, true), 2, false);
    tu_ok(tnt_fit(m, ds, &(tnt_fit_opts){.epochs = 1, .callbacks = &rm, .n_callbacks = 1}, NULL));
    tnt_callback_free(&rm);
    char long_field[200];
    memset(long_field, 'f', sizeof long_field - 1);
    long_field[sizeof long_field - 1] = '\0';
    assert_null(tnt_remote_monitor(&(tnt_remote_monitor_opts){.field = long_field}).user);
    tnt_dataset_free(ds);
    tnt_model_free(m);
}

int main(void) {
    tnt_init(NULL, NULL);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_form_field),
        cmocka_unit_test(test_json_body),
        cmocka_unit_test(test_unreachable_server_only_warns),
    };
    int r = cmocka_run_group_tests(tests, NULL, NULL);
    tnt_finalize();
    return r;
}

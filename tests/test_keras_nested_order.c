/* test_keras_nested_order.c: Keras 2 HDF5 files whose nested model's weights come in the order
 * Keras gives a frozen or partly frozen model (trainable: false layers: their weights among the
 * non-trainable ones), and a subclassed model's save_weights loaded into a rebuild with other layer
 * names, all by position as Keras's load_weights_from_hdf5_group; predictions equal the NumPy
 * rebuilds of fixtures/gen_keras_nested_order.py, a file written back keeps Keras's order, and
 * what Keras refuses (layer count, a weight's shape) fails naming the layer and the weight; fit
 * trains the head of a frozen base alone (its BatchNormalization in inference mode), as the
 * PyTorch rebuild. */
#include "testutil.h"
#include "json_harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void check_predictions(tnt_model *m, const char *yname) {
    tnt_shape xs, ys;
    float *x = tu_load("nested_order_x", &xs), *y = tu_load(yname, &ys);
    tnt_tensor *in = tnt_tensor_new(xs);
    memcpy(in->data, x, sizeof(float) * (size_t)tnt_shape_numel(xs));
    tnt_tensor *out = NULL;
    tu_ok(tnt_predict_on_batch(m, in, &out));
    assert_int_equal(tnt_shape_numel(out->shape), tnt_shape_numel(ys));
    tu_assert_close(out->data, y, tnt_shape_numel(ys), 1e-5, 1e-5, yname);
    tnt_tensor_free(out), tnt_tensor_free(in);
    free(x), free(y);
}

static char *read_text(const char *path) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = calloc(1, (size_t)n + 1);
    assert_int_equal(fread(s, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    return s;
}

/* Loads file, checks its prediction, and that it survives an .h5 round trip (written in Keras's
 * order, read back by position). */
static tnt_model *load_and_check(const char *file, const char *yname) {
    tnt_model *m = tnt_load_model(file, false);
    if (!m) fail_msg("%s: %s", file, tnt_last_error());
    check_predictions(m, yname);
    const char *again = tu_tmp_path("nested_again.h5");
    tu_ok(tnt_save_model(m, again, NULL));
    tnt_model *back = tnt_load_model(again, false);
    if (!back) fail_msg("%s: %s", again, tnt_last_error());
    check_predictions(back, yname);
    char *a = to_json(m), *b = to_json(back);
    assert_string_equal(a, b);
    free(a), free(b);
    tnt_model_free(back);
    return m;
}

/* base.trainable = False: the group holds each layer's weights in layer order. */
static void test_frozen_nested_model(void **state) {
    (void)state;
    tnt_model *m = load_and_check("fixtures/nested_frozen.h5", "nested_frozen_y");
    char *json = to_json(m);
    assert_non_null(strstr(json, "\"name\":\"b1\",\"trainable\":false"));
    assert_non_null(strstr(json, "\"name\":\"head\",\"trainable\":true"));
    free(json);
    tnt_model_free(m);
}

/* A trainable nested model with a frozen first layer: its weights follow the trainable ones. */
static void test_partly_frozen_nested_model(void **state) {
    (void)state;
    tnt_model *m = load_and_check("fixtures/nested_partial.h5", "nested_partial_y");
    tnt_model_free(m);
}

/* Keras reads by position: the same file into the model with none of base's layers frozen puts
 * bn/moving_mean (5) where b2's kernel (5, 4) goes, which Keras refuses, and so does this. */
static void test_order_mismatch_refused(void **state) {
    (void)state;
    tnt_model *m = tnt_load_model("fixtures/nested_frozen.h5", false);
    if (!m) fail_msg("%s", tnt_last_error());
    char *json = to_json(m), *p;
    while ((p = strstr(json, "\"trainable\":false"))) memcpy(p, "\"trainable\":true ", 17);
    tnt_model *thawed = tnt_model_from_json(json);
    if (!thawed) fail_msg("%s", tnt_last_error());
    assert_int_not_equal(tnt_load_weights(thawed, "fixtures/nested_frozen.h5", false), TNT_OK);
    tu_error_contains("layer \"b2\"");
    tu_error_contains("weight \"kernel\"");
    tu_error_contains("bn/moving_mean:0");
    free(json);
    tnt_model_free(thawed), tnt_model_free(m);
}

/* Training with the frozen base, as Keras: one SGD(0.1) step of mean squared error updates the head
 * alone (loss and head as the PyTorch rebuild), the base's weights and its BatchNormalization's
 * moving statistics stay (inference mode in a frozen BatchNormalization). */
static void test_frozen_base_trains_head_only(void **state) {
    (void)state;
    tnt_model *m = tnt_load_model("fixtures/nested_frozen.h5", false);
    if (!m) fail_msg("%s", tnt_last_error());
    tu_ok(tnt_compile(m, &(tnt_compile_opts){.optimizer = tnt_sgd(0.1f), .loss = TNT_MEAN_SQUARED_ERROR}));
    int64_t n = tnt_model_count_params(m);
    float *before = malloc((size_t)n * sizeof(float)), *after = malloc((size_t)n * sizeof(float));
    tu_ok(tnt_get_weights(m, before, n));
    tnt_shape xs, ts;
    float *x = tu_load("nested_order_x", &xs), *t = tu_load("nested_frozen_t", &ts);
    float *head = tu_load("nested_frozen_head1", &ts), *loss = tu_load("nested_frozen_loss", &ts);
    tnt_dataset *ds = tnt_dataset_batch(tnt_dataset_from_arrays(x, TNT_SHAPE(6), t, TNT_SHAPE(3), 4, false), 4, false);
    tnt_history *h = NULL;
    tu_ok(tnt_fit(m, ds, &(tnt_fit_opts){.epochs = 1}, &h));
    float got = (float)tnt_history_get(h, "loss", 0);
    tu_assert_close(&got, loss, 1, 1e-5, 1e-6, "loss");
    tu_ok(tnt_get_weights(m, after, n));
    tnt_layer *hl = tnt_model_get_layer(m, "head");
    assert_non_null(hl);
    /* the head: 15 values, the model's last; everything before them unchanged */
    tu_assert_close(after + n - 15, head, 15, 1e-5, 1e-6, "head after one step");
    assert_memory_equal(before, after, (size_t)(n - 15) * sizeof(float));
    tnt_history_free(h);
    tnt_dataset_free(ds);
    free(before), free(after), free(x), free(t), free(head), free(loss);
    tnt_model_free(m);
}

/* The user's rebuild: Sequential, InputLayer (6,), then Dense layers of these names and units. */
static tnt_model *rebuild(int n, const char *const *names, const int *units) {
    char json[2048];
    int o = snprintf(json, sizeof json, "{\"class_name\": \"Sequential\", \"config\": {\"name\": \"rebuilt\", "
                     "\"layers\": [{\"class_name\": \"InputLayer\", \"config\": {\"batch_input_shape\": [null, 6], "
                     "\"name\": \"in\"}}");
    for (int i = 0; i < n; i++)
        o += snprintf(json + o, sizeof json - (size_t)o, ", {\"class_name\": \"Dense\", \"config\": {\"name\": \"%s\", "
                      "\"units\": %d, \"activation\": \"%s\"}}", names[i], units[i], i == 0 ? "relu" : "linear");
    snprintf(json + o, sizeof json - (size_t)o, "]}}");
    tnt_model *m = tnt_model_from_json(json);
    if (!m) fail_msg("%s", tnt_last_error());
    return m;
}

/* A subclassed model's weights (layers dense_7, dense_8 in the file) into a rebuild named fc1,
 * fc2 (fixtures/subclassed_arch.json): by position, as Keras's load_weights. */
static void test_subclassed_weights_by_position(void **state) {
    (void)state;
    char *arch = read_text("fixtures/subclassed_arch.json");
    tnt_model *m = tnt_model_from_json(arch);
    if (!m) fail_msg("%s", tnt_last_error());
    tu_ok(tnt_load_weights(m, "fixtures/subclassed_weights.h5", false));
    check_predictions(m, "subclassed_y");
    tnt_model_free(m);
    free(arch);

    /* one layer more than the file: Keras's "Layer count mismatch" */
    tnt_model *more = rebuild(3, (const char *const[]){"fc1", "fc2", "fc3"}, (const int[]){5, 2, 2});
    assert_int_not_equal(tnt_load_weights(more, "fixtures/subclassed_weights.h5", false), TNT_OK);
    tu_error_contains("layer count mismatch: the model has 3 layer(s) with weights, the file 2");
    tnt_model_free(more);

    /* fc1 of 4 units: dense_7's kernel (6, 5) does not fit (6, 4) */
    tnt_model *narrow = rebuild(2, (const char *const[]){"fc1", "fc2"}, (const int[]){4, 2});
    assert_int_not_equal(tnt_load_weights(narrow, "fixtures/subclassed_weights.h5", false), TNT_OK);
    tu_error_contains("layer \"fc1\" for weight \"kernel\" (my_model/dense_7/kernel:0 in the file)");
    tnt_model_free(narrow);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_frozen_nested_model),
        cmocka_unit_test(test_partly_frozen_nested_model),
        cmocka_unit_test(test_order_mismatch_refused),
        cmocka_unit_test(test_frozen_base_trains_head_only),
        cmocka_unit_test(test_subclassed_weights_by_position),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

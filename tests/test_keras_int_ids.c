/* test_keras_int_ids.c: Keras files whose InputLayer or Embedding has an integer dtype (int32,
 * int64, a Keras 3 DTypePolicy naming one): they load, predict as the NumPy rebuild of
 * fixtures/gen_keras_int_ids.py, and keep their dtypes when written back (Keras 2 JSON, .h5,
 * .keras). An integer Embedding computes as Keras's int32 variable does: its values cast to
 * integers, no gradient reaching it. An integer dtype on another layer (Keras would compute it in
 * integers) is refused naming it; ids beyond 2^24 cannot be float32 and Embedding says so. */
#include "testutil.h"
#include "json_harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zip.h>

static void check_predictions(tnt_model *m, const char *name) {
    char xn[128], yn[128];
    snprintf(xn, sizeof xn, "%s_x", name);
    snprintf(yn, sizeof yn, "%s_y", name);
    tnt_shape xs, ys;
    float *x = tu_load(xn, &xs), *y = tu_load(yn, &ys);
    tnt_tensor *in = tnt_tensor_new(xs);
    memcpy(in->data, x, sizeof(float) * (size_t)tnt_shape_numel(xs));
    tnt_tensor *out = NULL;
    tu_ok(tnt_predict_on_batch(m, in, &out));
    assert_int_equal(tnt_shape_numel(out->shape), tnt_shape_numel(ys));
    tu_assert_close(out->data, y, tnt_shape_numel(ys), 1e-5, 1e-5, name);
    tnt_tensor_free(out), tnt_tensor_free(in);
    free(x), free(y);
}

static char *zip_entry(const char *path, const char *name) {
    int err;
    zip_t *z = zip_open(path, ZIP_RDONLY, &err);
    assert_non_null(z);
    zip_stat_t st;
    assert_int_equal(zip_stat(z, name, 0, &st), 0);
    char *text = calloc(1, (size_t)st.size + 1);
    zip_file_t *f = zip_fopen(z, name, 0);
    assert_non_null(f);
    assert_int_equal(zip_fread(f, text, st.size), (zip_int64_t)st.size);
    zip_fclose(f), zip_close(z);
    return text;
}

/* Keras 2.15 .h5: Input(dtype int32) -> Embedding -> Flatten -> Dense(tanh); the InputLayer keeps
 * int32 through JSON and an .h5 round trip. */
static void test_int32_input_h5(void **state) {
    (void)state;
    tnt_model *m = tnt_load_model("fixtures/int_ids_functional.h5", false);
    if (!m) fail_msg("%s", tnt_last_error());
    check_predictions(m, "int_ids_functional");
    char *json = to_json(m);
    assert_non_null(strstr(json, "\"batch_input_shape\":[null,5],\"dtype\":\"int32\""));
    const char *h5 = tu_tmp_path("int_ids.h5");
    tu_ok(tnt_save_model(m, h5, NULL));
    tnt_model *back = tnt_load_model(h5, false);
    if (!back) fail_msg("%s", tnt_last_error());
    char *json2 = to_json(back);
    assert_string_equal(json, json2);
    check_predictions(back, "int_ids_functional");
    free(json), free(json2);
    tnt_model_free(back), tnt_model_free(m);
}

/* Keras 3.3 .keras: InputLayer int64, Embedding with an int32 DTypePolicy and int32 embeddings; a
 * .keras file written back keeps both (the policy as Keras 3's object). */
static void test_int_policy_keras3(void **state) {
    (void)state;
    tnt_model *m = tnt_load_model("fixtures/int_ids_keras3.keras", false);
    if (!m) fail_msg("%s", tnt_last_error());
    check_predictions(m, "int_ids_keras3");
    const char *path = tu_tmp_path("int_ids.keras");
    tu_ok(tnt_save_model(m, path, NULL));
    char *cfg = zip_entry(path, "config.json");
    assert_non_null(strstr(cfg, "\"batch_input_shape\":[null,5],\"dtype\":\"int64\""));
    assert_non_null(strstr(cfg, "\"dtype\":{\"module\":\"keras\",\"class_name\":\"DTypePolicy\",\"config\":"
                                "{\"name\":\"int32\"},\"registered_name\":null}"));
    tnt_model *back = tnt_load_model(path, false);
    if (!back) fail_msg("%s", tnt_last_error());
    check_predictions(back, "int_ids_keras3");
    free(cfg);
    tnt_model_free(back), tnt_model_free(m);
}

/* Keras's int32 embeddings from RandomUniform(-0.05, 0.05) are its values cast to integers: all 0;
 * training leaves them so (no gradient reaches an integer variable) while the Dense learns. */
static void test_int_embedding_semantics(void **state) {
    (void)state;
    const char *json =
        "{\"class_name\": \"Sequential\", \"config\": {\"name\": \"s\", \"layers\": ["
        "{\"class_name\": \"Embedding\", \"config\": {\"name\": \"e\", \"batch_input_shape\": [null, 3], \"dtype\": "
        "\"int32\", \"input_dim\": 10, \"output_dim\": 2, \"embeddings_initializer\": {\"class_name\": "
        "\"Constant\", \"config\": {\"value\": 2.75}}}},"
        "{\"class_name\": \"Flatten\", \"config\": {\"name\": \"f\"}},"
        "{\"class_name\": \"Dense\", \"config\": {\"name\": \"d\", \"units\": 1, \"kernel_initializer\": \"ones\"}}]}}";
    tnt_model *m = tnt_model_from_json(json);
    if (!m) fail_msg("%s", tnt_last_error());
    tnt_tensor *in = tnt_tensor_new(TNT_SHAPE(2, 3));
    const float ids[6] = {0, 1, 2, 9, 8, 7};
    memcpy(in->data, ids, sizeof ids);
    tnt_tensor *out = NULL;
    tu_ok(tnt_predict_on_batch(m, in, &out));
    /* int32(2.75) = 2 in each of 6 values, summed by the ones kernel */
    assert_true(out->data[0] == 12.0f && out->data[1] == 12.0f);
    tnt_tensor_free(out);
    tu_ok(tnt_compile(m, &(tnt_compile_opts){.optimizer = tnt_sgd(0.1f), .loss = TNT_MEAN_SQUARED_ERROR}));
    float y[2] = {0, 1}, before[10 * 2 + 6 + 1], after[10 * 2 + 6 + 1];
    tu_ok(tnt_get_weights(m, before, 27));
    tnt_dataset *ds = tnt_dataset_batch(tnt_dataset_from_arrays(ids, TNT_SHAPE(3), y, TNT_SHAPE(1), 2, false), 2, false);
    tu_ok(tnt_fit(m, ds, &(tnt_fit_opts){.epochs = 1}, NULL));
    tu_ok(tnt_get_weights(m, after, 27));
    assert_memory_equal(before, after, 20 * sizeof(float)); /* the embeddings */
    assert_true(after[20] != before[20]);                   /* the Dense's kernel moved */
    tnt_dataset_free(ds);
    tnt_tensor_free(in);
    tnt_model_free(m);
}

/* Another layer with an integer dtype, an unknown input dtype, and too many ids for float32. */
static void test_refusals(void **state) {
    (void)state;
    assert_null(seq_from_layer_json("[null, 4]", "{\"class_name\": \"Dense\", \"config\": {\"name\": \"d\", "
                                                 "\"units\": 2, \"dtype\": \"int32\"}}"));
    tu_error_contains("\"d\"");
    tu_error_contains("dtype policy \"int32\"");
    assert_null(seq_from_layer_json("[null, 4]", "{\"class_name\": \"Dense\", \"config\": {\"name\": \"d\", "
                                                 "\"units\": 2, \"dtype\": {\"class_name\": \"DTypePolicy\", "
                                                 "\"config\": {\"name\": \"int64\"}}}}"));
    tu_error_contains("dtype policy \"int64\"");
    assert_null(tnt_model_from_json("{\"class_name\": \"Sequential\", \"config\": {\"name\": \"s\", \"layers\": ["
                                    "{\"class_name\": \"InputLayer\", \"config\": {\"name\": \"in\", "
                                    "\"batch_input_shape\": [null, 3], \"dtype\": \"string\"}}]}}"));
    tu_error_contains("dtype \"string\"");
    assert_null(seq_from_layer_json("[null, 4]", "{\"class_name\": \"Embedding\", \"config\": {\"name\": \"e\", "
                                                 "\"input_dim\": 20000000, \"output_dim\": 2, \"dtype\": \"int64\"}}"));
    tu_error_contains("input_dim 20000000");
    tu_error_contains("float32");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_int32_input_h5),
        cmocka_unit_test(test_int_policy_keras3),
        cmocka_unit_test(test_int_embedding_semantics),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

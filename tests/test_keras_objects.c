/* test_keras_objects.c: Keras's initializers, regularizers and constraints under every name Keras
 * 1, 2 and 3 write (class, snake case, aliases, Keras 2's "V2" forms, Keras 3's
 * OrthogonalInitializer/IdentityInitializer and {"module", "registered_name"} objects), read both
 * ways and written as the file's version writes them: Keras 2 names in JSON and .h5, Keras 3's in
 * a .keras file. The drawn values follow Keras's formulas (Constant, Identity, Orthogonal's
 * orthogonality and gain, TruncatedNormal's 2-stddev bound, VarianceScaling's limit);
 * OrthogonalRegularizer trains as a float64 PyTorch rebuild (fixtures/gen_keras_objects.py). */
#include "testutil.h"
#include "json_harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zip.h>

static char *dense_json(const char *kernel_init) {
    static char buf[2048];
    snprintf(buf, sizeof buf,
             "{\"class_name\": \"Dense\", \"config\": {\"name\": \"d\", \"units\": 5, \"kernel_initializer\": %s}}",
             kernel_init);
    return buf;
}

/* Each spelling Keras writes reads as the class it names; to_json writes Keras 2's. */
static void test_initializer_names(void **state) {
    (void)state;
    static const struct {
        const char *in, *want;
    } cases[] = {
        {"\"glorot_uniform\"", "\"GlorotUniform\""},
        {"\"GlorotUniformV2\"", "\"GlorotUniform\""},
        {"\"he_normalV2\"", "\"HeNormal\""},
        {"\"lecun_uniform\"", "\"LecunUniform\""},
        {"{\"module\": \"keras.initializers\", \"class_name\": \"HeUniform\", \"config\": {\"seed\": null}, "
         "\"registered_name\": null}", "\"HeUniform\""},
        {"{\"module\": \"keras.src.initializers.random_initializers\", \"class_name\": \"GlorotNormal\", \"config\": "
         "{\"seed\": 3}, \"registered_name\": null}", "\"GlorotNormal\""},
        {"{\"module\": \"keras.initializers\", \"class_name\": \"OrthogonalInitializer\", \"config\": {\"gain\": 1.0, "
         "\"seed\": null}, \"registered_name\": null}", "{\"class_name\":\"Orthogonal\",\"config\":{\"gain\":1,"},
        {"\"orthogonal\"", "\"Orthogonal\""},
        {"{\"class_name\": \"OrthogonalV2\", \"config\": {\"gain\": 2.0}}",
         "{\"class_name\":\"Orthogonal\",\"config\":{\"gain\":2,\"seed\":null}}"},
        {"{\"module\": \"keras.initializers\", \"class_name\": \"IdentityInitializer\", \"config\": {\"gain\": 1.0}, "
         "\"registered_name\": null}", "{\"class_name\":\"Identity\",\"config\":{\"gain\":1}}"},
        {"\"identity\"", "{\"class_name\":\"Identity\",\"config\":{\"gain\":1}}"},
        {"{\"class_name\": \"TruncatedNormal\", \"config\": {\"mean\": 0.0, \"stddev\": 0.02, \"seed\": null}}",
         "{\"class_name\":\"TruncatedNormal\",\"config\":{\"mean\":0,\"stddev\":0.02,\"seed\":null}}"},
        {"\"truncated_normal\"", "{\"class_name\":\"TruncatedNormal\",\"config\":{\"mean\":0,\"stddev\":0.05,"},
        {"{\"class_name\": \"RandomNormal\", \"config\": {\"mean\": 0.0, \"stddev\": 0.01, \"seed\": null, "
         "\"dtype\": \"float32\"}}", "{\"class_name\":\"RandomNormal\",\"config\":{\"mean\":0,\"stddev\":0.01,"},
        {"\"normal\"", "{\"class_name\":\"RandomNormal\",\"config\":{\"mean\":0,\"stddev\":0.05,"},
        {"{\"class_name\": \"RandomUniformV2\", \"config\": {\"minval\": -0.1, \"maxval\": 0.3}}",
         "{\"class_name\":\"RandomUniform\",\"config\":{\"minval\":-0.1,\"maxval\":0.3,"},
        {"\"uniform\"", "{\"class_name\":\"RandomUniform\",\"config\":{\"minval\":-0.05,\"maxval\":0.05,"},
        {"{\"class_name\": \"Constant\", \"config\": {\"value\": 0.25}}",
         "{\"class_name\":\"Constant\",\"config\":{\"value\":0.25}}"},
        {"{\"class_name\": \"ConstantV2\", \"config\": {\"value\": 1}}", "{\"class_name\":\"Ones\",\"config\":{}}"},
        {"\"zero\"", "{\"class_name\":\"Zeros\",\"config\":{}}"},
        {"\"one\"", "{\"class_name\":\"Ones\",\"config\":{}}"},
        {"{\"class_name\": \"ZerosV2\", \"config\": {}}", "{\"class_name\":\"Zeros\",\"config\":{}}"},
        {"{\"class_name\": \"VarianceScaling\", \"config\": {\"scale\": 1.0, \"mode\": \"fan_avg\", \"distribution\": "
         "\"uniform\", \"seed\": null}}", "\"GlorotUniform\""},
        {"{\"class_name\": \"VarianceScaling\", \"config\": {\"scale\": 2.0, \"mode\": \"fan_in\", \"distribution\": "
         "\"normal\", \"seed\": null}}", "\"HeNormal\""}, /* Keras 2.0-2.2's he_normal */
        {"{\"class_name\": \"VarianceScaling\", \"config\": {\"scale\": 0.3333333333333333, \"mode\": \"fan_out\", "
         "\"distribution\": \"untruncated_normal\", \"seed\": null}}",
         "\"mode\":\"fan_out\",\"distribution\":\"untruncated_normal\",\"seed\":null}}"},
        {"\"variance_scaling\"", "\"LecunNormal\""}, /* its defaults: scale 1, fan_in, truncated normal */
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        tnt_model *m = seq_from_layer_json("[null, 6]", dense_json(cases[i].in));
        if (!m) fail_msg("case %zu (%s): %s", i, cases[i].in, tnt_last_error());
        char *json = round_trip(m);
        if (!strstr(json, cases[i].want)) fail_msg("case %zu: JSON lacks %s:\n%s", i, cases[i].want, json);
        if (strstr(json, "\"module\"")) fail_msg("case %zu: a Keras 2 JSON with Keras 3's module:\n%s", i, json);
        free(json);
    }
}

/* The kernel (6, 5) of a Dense whose kernel_initializer is init, bias zeros. */
static float *drawn_kernel(const char *init, float *buf) {
    tnt_model *m = seq_from_layer_json("[null, 6]", dense_json(init));
    if (!m) fail_msg("%s: %s", init, tnt_last_error());
    assert_int_equal(tnt_model_count_params(m), 6 * 5 + 5);
    float all[35];
    tu_ok(tnt_get_weights(m, all, 35));
    memcpy(buf, all, 30 * sizeof(float));
    for (int i = 30; i < 35; i++) assert_true(all[i] == 0.0f);
    tnt_model_free(m);
    return buf;
}

/* Keras's formulas: Constant fills, Identity is gain * eye(6, 5), Orthogonal(gain g) gives K^T K =
 * g^2 I (6 >= 5 rows), TruncatedNormal stays within 2 stddev of the mean with about its spread,
 * VarianceScaling(uniform) within sqrt(3 scale / fan). */
static void test_initializer_values(void **state) {
    (void)state;
    float k[30];
    drawn_kernel("{\"class_name\": \"Constant\", \"config\": {\"value\": -0.75}}", k);
    for (int i = 0; i < 30; i++) assert_true(k[i] == -0.75f);
    drawn_kernel("{\"class_name\": \"Identity\", \"config\": {\"gain\": 2.5}}", k);
    for (int r = 0; r < 6; r++)
        for (int c = 0; c < 5; c++) assert_true(k[r * 5 + c] == (r == c ? 2.5f : 0.0f));
    drawn_kernel("{\"module\": \"keras.initializers\", \"class_name\": \"OrthogonalInitializer\", \"config\": "
                 "{\"gain\": 2.0, \"seed\": null}, \"registered_name\": null}", k);
    for (int a = 0; a < 5; a++)
        for (int b = 0; b < 5; b++) {
            double dot = 0;
            for (int r = 0; r < 6; r++) dot += (double)k[r * 5 + a] * k[r * 5 + b];
            assert_true(fabs(dot - (a == b ? 4.0 : 0.0)) < 1e-5);
        }
    drawn_kernel("{\"class_name\": \"TruncatedNormal\", \"config\": {\"mean\": 0.1, \"stddev\": 0.02}}", k);
    double sum = 0, sq = 0;
    for (int i = 0; i < 30; i++) {
        assert_true(k[i] >= 0.06f - 1e-6f && k[i] <= 0.14f + 1e-6f);
        sum += k[i], sq += (double)(k[i] - 0.1) * (k[i] - 0.1);
    }
    assert_true(fabs(sum / 30 - 0.1) < 0.015 && sqrt(sq / 30) > 0.008 && sqrt(sq / 30) < 0.025);
    drawn_kernel("{\"class_name\": \"VarianceScaling\", \"config\": {\"scale\": 3.0, \"mode\": \"fan_out\", "
                 "\"distribution\": \"uniform\"}}", k);
    double limit = sqrt(3.0 * 3.0 / 5.0), maxabs = 0;
    for (int i = 0; i < 30; i++) maxabs = fmax(maxabs, fabs(k[i]));
    assert_true(maxabs <= limit + 1e-6 && maxabs > limit / 2);
    drawn_kernel("{\"class_name\": \"RandomUniform\", \"config\": {\"minval\": 0.5, \"maxval\": 0.5}}", k);
    for (int i = 0; i < 30; i++) assert_true(fabsf(k[i] - 0.5f) < 1e-7f);
    drawn_kernel("{\"class_name\": \"RandomNormal\", \"config\": {\"mean\": -2, \"stddev\": 0}}", k);
    for (int i = 0; i < 30; i++) assert_true(k[i] == -2.0f);
}

/* What Keras refuses, or only its Python code defines, fails naming it. */
static void test_initializer_errors(void **state) {
    (void)state;
    static const struct {
        const char *in, *needle;
    } cases[] = {
        {"{\"module\": \"my_package.inits\", \"class_name\": \"MyInit\", \"config\": {}, \"registered_name\": "
         "\"my_package>MyInit\"}", "custom object \"MyInit\""},
        {"{\"module\": \"keras.initializers\", \"class_name\": \"GlorotUniform\", \"config\": {}, \"registered_name\": "
         "\"Custom>GlorotUniform\"}", "registered_name \"Custom>GlorotUniform\""},
        {"\"STFTInitializer\"", "STFT"},
        {"\"he_something\"", "unsupported initializer \"he_something\""},
        {"{\"class_name\": \"VarianceScaling\", \"config\": {\"mode\": \"fan_sideways\"}}", "fan_sideways"},
        {"{\"class_name\": \"Constant\", \"config\": {\"value\": [1, 2]}}", "not one number"},
        {"{\"class_name\": \"TruncatedNormal\", \"config\": {\"stddev\": -1}}", "stddev -1"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        tnt_model *m = seq_from_layer_json("[null, 6]", dense_json(cases[i].in));
        if (m) fail_msg("case %zu (%s) loaded", i, cases[i].in);
        tu_error_contains(cases[i].needle);
        tu_error_contains("kernel_initializer");
    }
}

/* Regularizer and constraint names of Keras 2 and 3 (Keras 3's l1l2 snake case, its module
 * objects, OrthogonalRegularizer) and a custom one refused. */
static void test_rule_names(void **state) {
    (void)state;
    static const struct {
        const char *key, *in, *want;
    } cases[] = {
        {"kernel_regularizer", "\"l1l2\"", "{\"class_name\":\"L1L2\",\"config\":{\"l1\":0,\"l2\":0}}"},
        {"kernel_regularizer", "\"l1_l2\"", "{\"class_name\":\"L1L2\",\"config\":{\"l1\":0.01,\"l2\":0.01}}"},
        {"kernel_regularizer", "{\"module\": \"keras.regularizers\", \"class_name\": \"OrthogonalRegularizer\", "
         "\"config\": {\"factor\": 0.5, \"mode\": \"columns\"}, \"registered_name\": null}",
         "{\"class_name\":\"OrthogonalRegularizer\",\"config\":{\"factor\":0.5,\"mode\":\"columns\"}}"},
        {"kernel_regularizer", "\"orthogonal_regularizer\"",
         "{\"class_name\":\"OrthogonalRegularizer\",\"config\":{\"factor\":0.01,\"mode\":\"rows\"}}"},
        {"kernel_constraint", "{\"module\": \"keras.constraints\", \"class_name\": \"MaxNorm\", \"config\": "
         "{\"max_value\": 3, \"axis\": 0}, \"registered_name\": null}",
         "{\"class_name\":\"MaxNorm\",\"config\":{\"max_value\":3,\"axis\":0}}"},
        {"kernel_constraint", "\"non_neg\"", "{\"class_name\":\"NonNeg\",\"config\":{}}"},
        {"kernel_constraint", "\"min_max_norm\"",
         "{\"class_name\":\"MinMaxNorm\",\"config\":{\"min_value\":0,\"rate\":1,\"max_value\":1,\"axis\":0}}"},
    };
    char layer[1024];
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        snprintf(layer, sizeof layer, "{\"class_name\": \"Dense\", \"config\": {\"name\": \"d\", \"units\": 5, "
                 "\"%s\": %s}}", cases[i].key, cases[i].in);
        tnt_model *m = seq_from_layer_json("[null, 6]", layer);
        if (!m) fail_msg("case %zu (%s): %s", i, cases[i].in, tnt_last_error());
        char *json = round_trip(m);
        if (!strstr(json, cases[i].want)) fail_msg("case %zu: JSON lacks %s:\n%s", i, cases[i].want, json);
        free(json);
    }
    snprintf(layer, sizeof layer, "{\"class_name\": \"Dense\", \"config\": {\"name\": \"d\", \"units\": 5, "
             "\"kernel_regularizer\": {\"module\": \"__main__\", \"class_name\": \"MyReg\", \"config\": {}, "
             "\"registered_name\": \"MyReg\"}}}");
    assert_null(seq_from_layer_json("[null, 6]", layer));
    tu_error_contains("custom object \"MyReg\"");
    snprintf(layer, sizeof layer, "{\"class_name\": \"Dense\", \"config\": {\"name\": \"d\", \"units\": 5, "
             "\"kernel_regularizer\": {\"class_name\": \"OrthogonalRegularizer\", \"config\": {\"mode\": \"diagonal\"}}}}");
    assert_null(seq_from_layer_json("[null, 6]", layer));
    tu_error_contains("mode \"diagonal\"");
}

/* Normalization layers take every initializer of gamma, beta and the moving statistics (Keras's
 * formulas: BatchNormalization in inference (x - mean) / sqrt(var + eps) * gamma + beta, LayerNorm
 * per row), and write them back. */
static void test_normalization_initializers(void **state) {
    (void)state;
    const char *bn = "{\"class_name\": \"BatchNormalization\", \"config\": {\"name\": \"bn\", \"epsilon\": 0.001, "
                     "\"gamma_initializer\": {\"class_name\": \"Constant\", \"config\": {\"value\": 2.0}}, "
                     "\"beta_initializer\": {\"module\": \"keras.initializers\", \"class_name\": \"Constant\", "
                     "\"config\": {\"value\": 0.5}, \"registered_name\": null}, \"moving_mean_initializer\": \"ones\", "
                     "\"moving_variance_initializer\": {\"class_name\": \"Constant\", \"config\": {\"value\": 3.0}}}}";
    const char *ln = "{\"class_name\": \"LayerNormalization\", \"config\": {\"name\": \"ln\", \"epsilon\": 0.001, "
                     "\"gamma_initializer\": {\"class_name\": \"Constant\", \"config\": {\"value\": 3.0}}, "
                     "\"beta_initializer\": {\"class_name\": \"Constant\", \"config\": {\"value\": -1.0}}}}";
    const float x[8] = {0.5f, -1.0f, 2.0f, 0.0f, 1.5f, 3.0f, -0.25f, 1.0f};
    for (int which = 0; which < 2; which++) {
        tnt_model *m = seq_from_layer_json("[null, 4]", which ? ln : bn);
        if (!m) fail_msg("%s", tnt_last_error());
        tnt_tensor *in = tnt_tensor_new(TNT_SHAPE(2, 4)), *out = NULL;
        memcpy(in->data, x, sizeof x);
        tu_ok(tnt_predict_on_batch(m, in, &out));
        for (int r = 0; r < 2; r++) {
            double mean = 0, var = 0;
            for (int j = 0; j < 4; j++) mean += x[r * 4 + j] / 4.0;
            for (int j = 0; j < 4; j++) var += (x[r * 4 + j] - mean) * (x[r * 4 + j] - mean) / 4.0;
            for (int j = 0; j < 4; j++) {
                double v = x[r * 4 + j];
                double want = which ? (v - mean) / sqrt(var + 0.001) * 3.0 - 1.0 : (v - 1.0) / sqrt(3.001) * 2.0 + 0.5;
                assert_true(fabs(out->data[r * 4 + j] - want) < 1e-5);
            }
        }
        char *json = round_trip(m);
        const char *want = which ? "\"gamma_initializer\":{\"class_name\":\"Constant\",\"config\":{\"value\":3}}"
                                 : "\"moving_variance_initializer\":{\"class_name\":\"Constant\",\"config\":{\"value\":3}}";
        if (!strstr(json, want)) fail_msg("JSON lacks %s:\n%s", want, json);
        free(json);
        tnt_tensor_free(out), tnt_tensor_free(in);
    }
}

static const char *const orthreg_model =
    "{\"module\": \"keras\", \"class_name\": \"Sequential\", \"config\": {\"name\": \"m\", \"layers\": ["
    "{\"module\": \"keras.layers\", \"class_name\": \"InputLayer\", \"config\": {\"batch_shape\": [null, 5], "
    "\"dtype\": \"float32\", \"name\": \"input\"}, \"registered_name\": null},"
    "{\"module\": \"keras.layers\", \"class_name\": \"Dense\", \"config\": {\"name\": \"d1\", \"units\": 4, "
    "\"activation\": \"tanh\", \"kernel_regularizer\": {\"module\": \"keras.regularizers\", \"class_name\": "
    "\"OrthogonalRegularizer\", \"config\": {\"factor\": 0.1, \"mode\": \"rows\"}, \"registered_name\": null}}, "
    "\"registered_name\": null},"
    "{\"module\": \"keras.layers\", \"class_name\": \"Dense\", \"config\": {\"name\": \"d2\", \"units\": 3, "
    "\"kernel_regularizer\": {\"class_name\": \"OrthogonalRegularizer\", \"config\": {\"factor\": 0.2, "
    "\"mode\": \"columns\"}}}, \"registered_name\": null}]}, \"registered_name\": null}";

/* Three SGD steps: each step's loss (data plus both penalties) and the weights after them equal the
 * PyTorch rebuild; a rank-4 kernel under it is refused at compile, naming the weight. */
static void test_orthogonal_regularizer_trains(void **state) {
    (void)state;
    tnt_shape s;
    float *x = tu_load("orthreg_x", &s), *y = tu_load("orthreg_y", &s), *w0 = tu_load("orthreg_w0", &s);
    float *w3 = tu_load("orthreg_w3", &s), *losses = tu_load("orthreg_losses", &s);
    tnt_model *m = tnt_model_from_json(orthreg_model);
    if (!m) fail_msg("%s", tnt_last_error());
    tu_ok(tnt_compile(m, &(tnt_compile_opts){.optimizer = tnt_sgd(0.1f), .loss = TNT_MEAN_SQUARED_ERROR}));
    int64_t n = tnt_model_count_params(m);
    assert_int_equal(n, 5 * 4 + 4 + 4 * 3 + 3);
    tu_ok(tnt_set_weights(m, w0, n));
    for (int step = 0; step < 3; step++) {
        tnt_dataset *ds = tnt_dataset_batch(tnt_dataset_from_arrays(x + 10 * step, TNT_SHAPE(5), y + 6 * step,
                                                                    TNT_SHAPE(3), 2, false), 2, false);
        tnt_history *h = NULL;
        tu_ok(tnt_fit(m, ds, &(tnt_fit_opts){.epochs = 1}, &h));
        float loss = (float)tnt_history_get(h, "loss", 0);
        tu_assert_close(&loss, &losses[step], 1, 1e-5, 1e-6, "loss of the step");
        tnt_history_free(h);
        tnt_dataset_free(ds);
    }
    float got[39];
    tu_ok(tnt_get_weights(m, got, n));
    tu_assert_close(got, w3, n, 1e-5, 1e-6, "weights after three steps");
    tnt_model_free(m);
    free(x), free(y), free(w0), free(w3), free(losses);

    tnt_model *c = seq_from_layer_json("[null, 4, 4, 2]", "{\"class_name\": \"Conv2D\", \"config\": {\"name\": "
                                       "\"conv\", \"filters\": 2, \"kernel_size\": [2, 2], \"kernel_regularizer\": "
                                       "\"orthogonal_regularizer\"}}");
    if (!c) fail_msg("%s", tnt_last_error());
    assert_int_not_equal(tnt_compile(c, &(tnt_compile_opts){.optimizer = tnt_sgd(0.1f), .loss = TNT_MEAN_SQUARED_ERROR}),
                         TNT_OK);
    tu_error_contains("\"kernel\" has rank 4");
    tnt_model_free(c);
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
    zip_fclose(f);
    zip_close(z);
    return text;
}

/* A .keras file written here holds Keras 3.3's forms (module objects, OrthogonalInitializer,
 * IdentityInitializer); an .h5 file Keras 2's; both read back to the same model. */
static void test_written_as_the_version_writes(void **state) {
    (void)state;
    const char *layers = "{\"class_name\": \"LSTM\", \"config\": {\"name\": \"lstm\", \"units\": 3, "
                         "\"kernel_initializer\": {\"class_name\": \"Identity\", \"config\": {\"gain\": 0.5}}, "
                         "\"bias_regularizer\": \"l2\", \"recurrent_constraint\": \"max_norm\"}}";
    tnt_model *m = seq_from_layer_json("[null, 4, 2]", layers);
    if (!m) fail_msg("%s", tnt_last_error());
    char *k2 = to_json(m);
    const char *path = tu_tmp_path("objects.keras"), *h5 = tu_tmp_path("objects.h5");
    tu_ok(tnt_save_model(m, path, NULL));
    tu_ok(tnt_save_model(m, h5, NULL));
    char *cfg = zip_entry(path, "config.json");
    const char *keras3[] = {
        "\"kernel_initializer\":{\"module\":\"keras.initializers\",\"class_name\":\"IdentityInitializer\","
        "\"config\":{\"gain\":0.5},\"registered_name\":null}",
        "\"recurrent_initializer\":{\"module\":\"keras.initializers\",\"class_name\":\"OrthogonalInitializer\","
        "\"config\":{\"gain\":1,\"seed\":null},\"registered_name\":null}",
        "\"bias_initializer\":{\"module\":\"keras.initializers\",\"class_name\":\"Zeros\",\"config\":{},"
        "\"registered_name\":null}",
        "\"bias_regularizer\":{\"module\":\"keras.regularizers\",\"class_name\":\"L2\",\"config\":{\"l2\":0.01},"
        "\"registered_name\":null}",
        "\"recurrent_constraint\":{\"module\":\"keras.constraints\",\"class_name\":\"MaxNorm\",\"config\":"
        "{\"max_value\":2,\"axis\":0},\"registered_name\":null}",
    };
    for (size_t i = 0; i < sizeof keras3 / sizeof *keras3; i++)
        if (!strstr(cfg, keras3[i])) fail_msg("config.json lacks %s:\n%s", keras3[i], cfg);
    const char *keras2[] = {"{\"class_name\":\"Identity\",\"config\":{\"gain\":0.5}}",
                            "\"recurrent_initializer\":{\"class_name\":\"Orthogonal\",\"config\":{\"gain\":1,"};
    for (size_t i = 0; i < sizeof keras2 / sizeof *keras2; i++)
        if (!strstr(k2, keras2[i])) fail_msg("Keras 2 JSON lacks %s:\n%s", keras2[i], k2);
    assert_null(strstr(k2, "\"module\""));
    const char *paths[] = {path, h5};
    for (int i = 0; i < 2; i++) {
        tnt_model *back = tnt_load_model(paths[i], false);
        if (!back) fail_msg("%s: %s", paths[i], tnt_last_error());
        char *j = to_json(back);
        assert_string_equal(j, k2);
        free(j);
        tnt_model_free(back);
    }
    free(cfg), free(k2);
    tnt_model_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_initializer_names),
        cmocka_unit_test(test_initializer_values),
        cmocka_unit_test(test_initializer_errors),
        cmocka_unit_test(test_rule_names),
        cmocka_unit_test(test_normalization_initializers),
        cmocka_unit_test(test_orthogonal_regularizer_trains),
        cmocka_unit_test(test_written_as_the_version_writes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

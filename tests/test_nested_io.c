/* test_nested_io.c: models nested in models, named (dict) inputs and outputs, and the programs
 * that take them. A Functional model calls a nested Sequential twice (a siamese pair) and has a
 * layer of its own named like one inside it (names are unique per scope): .h5, .keras and
 * save_weights files hold the nested model as Keras does (one entry of layer_names, one weights
 * group named after it, all its weights trainable first; layers/sequential/layers/... in .keras);
 * each loads back with identical predictions and JSON, and training resumes bitwise from .h5.
 * A Keras 2 Sequential whose first layer is a Functional model (a pretrained base) loads, predicts
 * as written out by hand and is written back as Sequential. Keras 3 dict input_layers and
 * output_layers are read in Keras's order (sorted keys) and written back as dicts. tnt-predict
 * takes several inputs by name; tnt-inspect reports the nested layers, lists every unsupported
 * layer of a file at once, and fails clearly on a file that is not Keras. */
#include "testutil.h"

#include "io/keras_io.h"

#include <libgen.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static char bin[PATH_MAX];

static int run(const char *fmt, ...) {
    char cmd[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    int rc = system(cmd);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

/* inner: Dense(3, relu) "dense", BatchNormalization "bn"; outer: inner(a), inner(b), Concatenate,
 * Dense(2) "dense" */
static tnt_model *siamese(void) {
    tnt_model *inner = tnt_sequential("inner");
    tu_ok(tnt_model_add(inner, tnt_input_layer(TNT_SHAPE(4), "inner_in")));
    tu_ok(tnt_model_add(inner, tnt_dense(3, &(tnt_layer_opts){.name = "dense", .activation = TNT_ACT_RELU})));
    tu_ok(tnt_model_add(inner, tnt_batch_normalization(0.8f, 0, "bn")));
    tnt_graph *g = tnt_graph_new();
    tnt_ktensor a = tnt_graph_input(g, TNT_SHAPE(4), "a"), b = tnt_graph_input(g, TNT_SHAPE(4), "b"), ya, yb;
    tu_ok(tnt_call_model(g, inner, 1, &a, &ya));
    tu_ok(tnt_call_model(g, inner, 1, &b, &yb));
    tnt_ktensor c = tnt_call2(g, tnt_concatenate(-1, NULL), ya, yb);
    tnt_ktensor y = tnt_call(g, tnt_dense(2, &(tnt_layer_opts){.name = "dense"}), c);
    tnt_model *m = tnt_functional(g, 2, (tnt_ktensor[]){a, b}, 1, &y, "siamese");
    tnt_graph_free(g);
    tnt_model_free(inner);
    assert_non_null(m);
    tu_ok(tnt_compile(m, &(tnt_compile_opts){.optimizer = tnt_adam(0.02f), .loss = TNT_MEAN_SQUARED_ERROR, .seed = 7}));
    return m;
}

enum { N = 16 };
static float xs[N * 8], ys[N * 2];

static void fit(tnt_model *m, int initial, int epochs) {
    tnt_dataset *ds = tnt_dataset_batch(tnt_dataset_from_arrays(xs, TNT_SHAPE(8), ys, TNT_SHAPE(2), N, false), 5, false);
    tu_ok(tnt_fit(m, ds, &(tnt_fit_opts){.epochs = epochs, .initial_epoch = initial}, NULL));
    tnt_dataset_free(ds);
}

static tnt_tensor *predict(tnt_model *m) {
    tnt_tensor *x = tnt_tensor_new(TNT_SHAPE(N, 8)), *y = NULL;
    memcpy(x->data, xs, sizeof xs);
    tu_ok(tnt_predict_on_batch(m, x, &y));
    tnt_tensor_free(x);
    return y;
}

static void same_predictions(tnt_model *a, tnt_model *b, const char *what) {
    tnt_tensor *ya = predict(a), *yb = predict(b);
    tu_assert_bitwise(ya->data, yb->data, tnt_shape_numel(ya->shape), what);
    tnt_tensor_free(ya), tnt_tensor_free(yb);
}

static char *json_of(const tnt_model *m) {
    char *j;
    tu_ok(tnt_model_to_json(m, &j));
    return j;
}

/* The strings of attribute name of object path in file. */
static void check_names(const char *file, const char *obj, const char *name, const char *const *want, int n) {
    hid_t f = H5Fopen(file, H5F_ACC_RDONLY, H5P_DEFAULT), o = H5Oopen(f, obj, H5P_DEFAULT);
    char **v = NULL;
    int got = 0;
    bool found;
    tu_ok(tnt__h5_read_strs(o, name, obj, &v, &got, &found));
    assert_true(found);
    assert_int_equal(got, n);
    for (int i = 0; i < n; i++) {
        if (strcmp(v[i], want[i])) fail_msg("%s %s[%d] = \"%s\", expected \"%s\"", obj, name, i, v[i], want[i]);
        free(v[i]);
    }
    free(v);
    H5Oclose(o), H5Fclose(f);
}

static void test_nested_files(void **state) {
    (void)state;
    tu_fill(xs, N * 8, 3), tu_fill(ys, N * 2, 4);
    tnt_model *m = siamese();
    fit(m, 0, 2);
    char *json = json_of(m);
    assert_non_null(strstr(json, "{\"class_name\":\"Sequential\",\"config\":{\"name\":\"inner\""));
    assert_non_null(strstr(json, "\"inbound_nodes\":[[[\"a\",0,0,{}]],[[\"b\",0,0,{}]]]"));
    assert_non_null(strstr(json, "[[\"inner\",1,0,{}],[\"inner\",2,0,{}]]"));
    const char *h5 = strdup(tu_tmp_path("nested.h5")), *keras = strdup(tu_tmp_path("nested.keras"));
    const char *w = strdup(tu_tmp_path("nested_w.h5"));
    tu_ok(tnt_save_model(m, h5, NULL));
    tu_ok(tnt_save_model(m, keras, NULL));
    tu_ok(tnt_save_weights(m, w, NULL));
    /* Keras 2: the nested model is one entry, its weights in one group, trainable ones first */
    check_names(h5, "model_weights", "layer_names", (const char *const[]){"a", "b", "inner", "concatenate", "dense"}, 5);
    check_names(h5, "model_weights/inner", "weight_names",
                (const char *const[]){"inner/dense/kernel:0", "inner/dense/bias:0", "inner/bn/gamma:0", "inner/bn/beta:0",
                                      "inner/bn/moving_mean:0", "inner/bn/moving_variance:0"}, 6);
    check_names(w, "/inner", "weight_names",
                (const char *const[]){"inner/dense/kernel:0", "inner/dense/bias:0", "inner/bn/gamma:0", "inner/bn/beta:0",
                                      "inner/bn/moving_mean:0", "inner/bn/moving_variance:0"}, 6);
    check_names(h5, "model_weights/dense", "weight_names", (const char *const[]){"dense/kernel:0", "dense/bias:0"}, 2);
    /* Keras 3: layers/sequential/layers/<class> */
    char *image;
    size_t len;
    tu_ok(tnt__keras_zip_entry(keras, "model.weights.h5", &image, &len, true));
    hid_t f = tnt__h5_open_image(image, len);
    assert_true(f >= 0);
    const char *paths[] = {"layers/sequential/vars", "layers/sequential/layers/dense/vars/0",
                           "layers/sequential/layers/dense/vars/1", "layers/sequential/layers/batch_normalization/vars/3",
                           "layers/dense/vars/1", "layers/concatenate/vars"};
    for (int i = 0; i < 6; i++)
        if (H5Lexists(f, paths[i], H5P_DEFAULT) <= 0) fail_msg("%s: no %s", keras, paths[i]);
    H5Fclose(f);
    free(image);
    /* each loads back: same predictions, same architecture */
    const char *files[] = {h5, keras};
    for (int k = 0; k < 2; k++) {
        tnt_model *back = tnt_load_model(files[k], true);
        assert_non_null(back);
        same_predictions(m, back, files[k]);
        char *bj = json_of(back);
        assert_string_equal(bj, json);
        free(bj);
        tnt_model_free(back);
    }
    /* weights by order and by name into a model made from the JSON */
    for (int by_name = 0; by_name < 2; by_name++) {
        tnt_model *c = tnt_model_from_json(json);
        assert_non_null(c);
        tu_ok(tnt_load_weights(c, w, by_name));
        same_predictions(m, c, by_name ? "load_weights by name" : "load_weights in order");
        tnt_model_free(c);
    }
    /* resumed training: 2 epochs, save, load, 1 more equals 3 unbroken epochs */
    tnt_model *r = tnt_load_model(h5, true), *u = siamese();
    assert_non_null(r);
    fit(r, 2, 3);
    fit(u, 0, 3);
    int64_t n = tnt_model_count_params(u);
    float *wr = malloc((size_t)n * sizeof *wr), *wu = malloc((size_t)n * sizeof *wu);
    tu_ok(tnt_get_weights(r, wr, n));
    tu_ok(tnt_get_weights(u, wu, n));
    tu_assert_bitwise(wr, wu, n, "resumed from the nested .h5");
    free(wr), free(wu);
    tnt_model_free(r), tnt_model_free(u);
    free(json);
    free((void *)h5), free((void *)keras), free((void *)w);
    tnt_model_free(m);
}

/* Keras 2.x: Sequential([base, Dense]) with base a Functional model, as tf.keras writes it */
static const char SEQ_OF_MODEL[] =
    "{\"class_name\": \"Sequential\", \"config\": {\"name\": \"clf\", \"layers\": ["
    "{\"class_name\": \"Functional\", \"config\": {\"name\": \"base\", \"layers\": ["
    "{\"class_name\": \"InputLayer\", \"config\": {\"batch_input_shape\": [null, 3], \"name\": \"x\"}, \"name\": \"x\", "
    "\"inbound_nodes\": []},"
    "{\"class_name\": \"Dense\", \"config\": {\"name\": \"dense\", \"units\": 2, \"activation\": \"tanh\"}, \"name\": \"dense\", "
    "\"inbound_nodes\": [[[\"x\", 0, 0, {}]]]}], \"input_layers\": [[\"x\", 0, 0]], \"output_layers\": [[\"dense\", 0, 0]]}},"
    "{\"class_name\": \"Dense\", \"config\": {\"name\": \"dense\", \"units\": 1}}]}}";

static void test_sequential_of_model(void **state) {
    (void)state;
    tnt_model *m = tnt_model_from_json(SEQ_OF_MODEL);
    assert_non_null(m);
    char *json = json_of(m);
    /* written back as tf.keras does: the InputLayer Sequential.add made ("base_input"), then base */
    assert_non_null(strstr(json, "{\"class_name\":\"Sequential\",\"config\":{\"name\":\"clf\",\"layers\":[{\"class_name\":"
                                 "\"InputLayer\""));
    assert_non_null(strstr(json, "\"name\":\"base_input\"}},{\"class_name\":\"Functional\",\"config\":{\"name\":\"base\""));
    free(json);
    /* out = dense2(tanh(dense1(x))) with the weights in Keras order */
    float *k1, *b1, *k2, *b2;
    const char *name;
    tu_ok(tnt_model_weight(m, 0, &name, NULL, &k1));
    assert_string_equal(name, "dense/kernel:0");
    tu_ok(tnt_model_weight(m, 1, &name, NULL, &b1));
    tu_ok(tnt_model_weight(m, 2, &name, NULL, &k2));
    tu_ok(tnt_model_weight(m, 3, &name, NULL, &b2));
    b1[0] = 0.25f, b1[1] = -0.5f, b2[0] = 0.125f;
    tnt_tensor *x = tnt_tensor_new(TNT_SHAPE(2, 3)), *y = NULL;
    tu_fill(x->data, 6, 9);
    tu_ok(tnt_predict_on_batch(m, x, &y));
    for (int i = 0; i < 2; i++) {
        double out = b2[0];
        for (int u = 0; u < 2; u++) {
            double h = b1[u];
            for (int c = 0; c < 3; c++) h += x->data[i * 3 + c] * k1[c * 2 + u];
            out += tanh(h) * k2[u];
        }
        assert_float_equal(y->data[i], out, 1e-5);
    }
    const char *path = tu_tmp_path("seq_of_model.h5");
    tu_ok(tnt_save_model(m, path, NULL));
    check_names(path, "model_weights", "layer_names", (const char *const[]){"base", "dense"}, 2);
    tnt_model *back = tnt_load_model(path, false);
    assert_non_null(back);
    tnt_tensor *y2 = NULL;
    tu_ok(tnt_predict_on_batch(back, x, &y2));
    tu_assert_bitwise(y->data, y2->data, 2, "Sequential of a model, from .h5");
    tnt_tensor_free(x), tnt_tensor_free(y), tnt_tensor_free(y2);
    tnt_model_free(back), tnt_model_free(m);
}

/* Keras 3: inputs and outputs as dicts (keys in another order than sorted) */
static const char DICT_IO[] =
    "{\"class_name\": \"Functional\", \"config\": {\"name\": \"named\", \"layers\": ["
    "{\"class_name\": \"InputLayer\", \"config\": {\"batch_shape\": [null, 2], \"name\": \"price\"}, \"name\": \"price\", \"inbound_nodes\": []},"
    "{\"class_name\": \"InputLayer\", \"config\": {\"batch_shape\": [null, 3], \"name\": \"age\"}, \"name\": \"age\", \"inbound_nodes\": []},"
    "{\"class_name\": \"Concatenate\", \"config\": {\"name\": \"cat\", \"axis\": -1}, \"name\": \"cat\", \"inbound_nodes\": "
    "[{\"args\": [[{\"class_name\": \"__keras_tensor__\", \"config\": {\"shape\": [null, 2], \"keras_history\": [\"price\", 0, 0]}},"
    "{\"class_name\": \"__keras_tensor__\", \"config\": {\"shape\": [null, 3], \"keras_history\": [\"age\", 0, 0]}}]], \"kwargs\": {}}]},"
    "{\"class_name\": \"Dense\", \"config\": {\"name\": \"score\", \"units\": 1}, \"name\": \"score\", \"inbound_nodes\": "
    "[{\"args\": [{\"class_name\": \"__keras_tensor__\", \"config\": {\"shape\": [null, 5], \"keras_history\": [\"cat\", 0, 0]}}], \"kwargs\": {}}]}],"
    "\"input_layers\": {\"price\": [\"price\", 0, 0], \"age\": [\"age\", 0, 0]},"
    "\"output_layers\": {\"z_score\": [\"score\", 0, 0], \"joined\": [\"cat\", 0, 0]}}}";

static void test_dict_inputs(void **state) {
    (void)state;
    tnt_model *m = tnt_model_from_json(DICT_IO);
    assert_non_null(m);
    assert_string_equal(tnt_model_io_name(m, false, 0), "age"); /* sorted, as Keras's tree.flatten */
    assert_string_equal(tnt_model_io_name(m, false, 1), "price");
    assert_string_equal(tnt_model_io_name(m, true, 0), "joined");
    assert_string_equal(tnt_model_io_name(m, true, 1), "z_score");
    assert_null(tnt_model_io_name(m, true, 2));
    assert_int_equal(tnt_model_input_shape_at(m, 0).dim[0], 3);
    char *json = json_of(m);
    assert_non_null(strstr(json, "\"input_layers\":{\"age\":[\"age\",0,0],\"price\":[\"price\",0,0]}"));
    assert_non_null(strstr(json, "\"output_layers\":{\"joined\":[\"cat\",0,0],\"z_score\":[\"score\",0,0]}"));
    /* packed per sample: age (3) then price (2); out: joined = cat(price, age) (5), then score (1) */
    tnt_tensor *x = tnt_tensor_new(TNT_SHAPE(1, 5)), *y = NULL;
    float v[5] = {1, 2, 3, 10, 20};
    memcpy(x->data, v, sizeof v);
    tu_ok(tnt_predict_on_batch(m, x, &y));
    const float joined[5] = {10, 20, 1, 2, 3};
    tu_assert_close(y->data, joined, 5, 0, 0, "the dict model's first output");
    tnt_tensor_free(x), tnt_tensor_free(y);
    free(json);
    tnt_model_free(m);
}

static void save_npy(const char *path, const float *v, tnt_shape s) {
    tnt_tensor *t = tnt_tensor_new(s);
    memcpy(t->data, v, (size_t)tnt_shape_numel(s) * sizeof(float));
    tu_ok(tnt_save_npy(path, t));
    tnt_tensor_free(t);
}

static void test_programs(void **state) {
    (void)state;
    tnt_model *m = siamese();
    char model[512], a[512], b[512], out[512], *dir = strdup(tu_tmp_path(""));
    snprintf(model, sizeof model, "%s/prog.h5", dir);
    snprintf(a, sizeof a, "%s/a.npy", dir), snprintf(b, sizeof b, "%s/b.npy", dir), snprintf(out, sizeof out, "%s/o.npy", dir);
    tu_ok(tnt_save_model(m, model, NULL));
    float va[N * 4], vb[N * 4];
    for (int i = 0; i < N; i++) memcpy(va + i * 4, xs + i * 8, 16), memcpy(vb + i * 4, xs + i * 8 + 4, 16);
    save_npy(a, va, TNT_SHAPE(N, 4)), save_npy(b, vb, TNT_SHAPE(N, 4));
    assert_int_equal(run("'%s/tnt-predict' '%s' --input b='%s' --input a='%s' '%s'", bin, model, b, a, out), 0);
    tnt_dataset *ds = tnt_dataset_batch(tnt_dataset_from_npy(out, NULL), N, false);
    tnt_dataset_iter *it = tnt_dataset_iter_new(ds, 0);
    tnt_batch got;
    assert_int_equal(tnt_dataset_iter_next(it, &got), 1);
    tnt_tensor *want = predict(m);
    tu_assert_close(got.x.data, want->data, N * 2, 1e-6, 1e-7, "tnt-predict with two named inputs");
    tnt_tensor_free(want);
    tnt_dataset_iter_free(it), tnt_dataset_free(ds);
    assert_int_equal(run("'%s/tnt-predict' '%s' '%s' '%s' 2> /dev/null", bin, model, a, out), 2); /* needs --input */
    assert_int_equal(run("'%s/tnt-predict' '%s' --input a='%s' --input c='%s' '%s' 2> /dev/null", bin, model, a, b, out), 1);
    /* tnt-inspect: the nested layers, exit 0 */
    char report[512];
    snprintf(report, sizeof report, "%s/report.txt", dir);
    assert_int_equal(run("'%s/tnt-inspect' '%s' > '%s'", bin, model, report), 0);
    assert_int_equal(run("grep -q 'inner/bn (BatchNormalization)' '%s' && grep -q 'model_weights\\|inner/inner/dense/kernel:0' '%s'"
                         " && grep -q '^loads       yes' '%s'", report, report, report), 0);
    /* every unsupported layer at once, exit 1 */
    char bad[512];
    snprintf(bad, sizeof bad, "%s/bad.json", dir);
    FILE *f = fopen(bad, "w");
    fputs("{\"class_name\": \"Sequential\", \"config\": {\"name\": \"s\", \"layers\": ["
          "{\"class_name\": \"Dense\", \"config\": {\"name\": \"d0\", \"units\": 2, \"batch_input_shape\": [null, 4]}},"
          "{\"class_name\": \"Lambda\", \"config\": {\"name\": \"lam\"}},"
          "{\"class_name\": \"Dense\", \"config\": {\"name\": \"d1\", \"units\": 2, \"activation\": \"frobnicate\"}},"
          "{\"class_name\": \"TensorFlowOpLayer\", \"config\": {\"name\": \"lc\"}}]}}", f);
    fclose(f);
    assert_int_equal(run("'%s/tnt-inspect' '%s' > '%s' 2> /dev/null", bin, bad, report), 1);
    assert_int_equal(run("grep -q 'layer \"lam\": unsupported layer class \"Lambda\"' '%s' && grep -q '\"d1\".*frobnicate' '%s'"
                         " && grep -q 'layer \"lc\": unsupported layer class \"TensorFlowOpLayer\"' '%s'", report, report, report), 0);
    assert_int_equal(run("echo garbage > '%s/g.bin'; '%s/tnt-inspect' '%s/g.bin' > /dev/null 2> '%s'", dir, bin, dir, report), 1);
    assert_int_equal(run("grep -q 'unknown file format' '%s'", report), 0);
    assert_int_equal(run("'%s/tnt-inspect' > /dev/null 2>&1", bin), 2);
    free(dir);
    tnt_model_free(m);
}

int main(int argc, char **argv) {
    (void)argc, (void)argv;
    char self[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0) return 1;
    self[len] = '\0';
    snprintf(bin, sizeof bin, "%s/../bin", dirname(self)); /* build/tests -> build/bin */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nested_files), cmocka_unit_test(test_sequential_of_model),
        cmocka_unit_test(test_dict_inputs),  cmocka_unit_test(test_programs),
    };
    return cmocka_run_group_tests(tests, tu_tmpdir_setup, tu_tmpdir_teardown);
}

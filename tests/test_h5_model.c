/* test_h5_model.c: Keras 2 whole-model HDF5 files (tnt_save_model / tnt_load_model): round trips
 * of compiled models (same predictions; the same optimizer kind, hyperparameters, iterations and
 * slots; loss and metrics) and compile=false; tnt_model_compile_opts and recompiling with the
 * model's own optimizer; resuming training bitwise (4 epochs unbroken equal
 * 2 epochs, save, load, epochs 2..4 with initial_epoch, with Adam, BatchNormalization and a
 * shuffled dataset); ModelCheckpoint with save_weights_only=false; the file's structure read with
 * h5py (skipped without it); malformed files (truncated, model_config missing, bad JSON, a weight
 * shape that does not fit the architecture) give clear errors. */
#include "testutil.h"

#include "model/model.h"
#include "objectives/loss.h"
#include "optimizers/optimizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char tmpdir[256];

static const char *tmp_path(const char *name) {
    static char buf[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", tmpdir, name);
    return buf[k];
}

static int setup_dir(void **state) {
    (void)state;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/tnt_test_h5m_XXXXXX");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown_dir(void **state) {
    (void)state;
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

#define N_SAMPLES 48
#define IN 6

static tnt_model *build(tnt_optimizer *opt, const char *metrics) {
    tnt_model *m = tnt_sequential("resnet_like");
    tu_ok(tnt_model_add(m, tnt_input_layer(TNT_SHAPE(IN), "inp")));
    tu_ok(tnt_model_add(m, tnt_dense(8, &(tnt_layer_opts){.activation = TNT_ACT_RELU, .name = "d1"})));
    tu_ok(tnt_model_add(m, tnt_batch_normalization(0.9f, 0, "bn")));
    tu_ok(tnt_model_add(m, tnt_dense(3, &(tnt_layer_opts){.activation = TNT_ACT_SOFTMAX, .name = "out"})));
    tu_ok(tnt_compile(m, &(tnt_compile_opts){.optimizer = opt, .loss = TNT_SPARSE_CATEGORICAL_CROSSENTROPY,
                                             .metrics = metrics, .seed = 5}));
    return m;
}

static float xs[N_SAMPLES * IN], ys[N_SAMPLES];

static tnt_dataset *data(void) {
    tu_fill(xs, N_SAMPLES * IN, 11);
    for (int i = 0; i < N_SAMPLES; i++) ys[i] = (float)((xs[i * IN] > 0) + (xs[i * IN + 1] > 0.3f));
    tnt_dataset *d = tnt_dataset_from_arrays(xs, TNT_SHAPE(IN), ys, TNT_SHAPE(), N_SAMPLES, false);
    return tnt_dataset_batch(tnt_dataset_shuffle(d, N_SAMPLES, 7), 8, false);
}

static void fit(tnt_model *m, int initial, int epochs) {
    tnt_dataset *d = data();
    tu_ok(tnt_fit(m, d, &(tnt_fit_opts){.epochs = epochs, .initial_epoch = initial}, NULL));
    tnt_dataset_free(d);
}

static float *get_all(tnt_model *m, int64_t *n) {
    *n = tnt_model_count_params(m);
    float *w = malloc((size_t)*n * sizeof(float));
    tu_ok(tnt_get_weights(m, w, *n));
    return w;
}

static void assert_bitwise(const float *a, const float *b, int64_t n, const char *what) {
    for (int64_t i = 0; i < n; i++)
        if (memcmp(&a[i], &b[i], sizeof(float)))
            fail_msg("%s: element %lld differs: %.9g vs %.9g", what, (long long)i, a[i], b[i]);
}

static void assert_same_weights(tnt_model *a, tnt_model *b) {
    int64_t na, nb;
    float *wa = get_all(a, &na), *wb = get_all(b, &nb);
    assert_int_equal(na, nb);
    assert_bitwise(wa, wb, na, "weights");
    free(wa), free(wb);
}

static void assert_same_predictions(tnt_model *a, tnt_model *b) {
    tnt_tensor *x = tnt_tensor_new(TNT_SHAPE(5, IN)), *ya = NULL, *yb = NULL;
    tu_fill(x->data, 5 * IN, 3);
    tu_ok(tnt_predict_on_batch(a, x, &ya));
    tu_ok(tnt_predict_on_batch(b, x, &yb));
    assert_int_equal(tnt_shape_numel(ya->shape), tnt_shape_numel(yb->shape));
    assert_bitwise(ya->data, yb->data, tnt_shape_numel(ya->shape), "predictions");
    tnt_tensor_free(x), tnt_tensor_free(ya), tnt_tensor_free(yb);
}

static void assert_same_optimizer(tnt_model *a, tnt_model *b) {
    const tnt_optimizer *oa = a->optimizer, *ob = b->optimizer;
    assert_non_null(oa);
    assert_non_null(ob);
    assert_string_equal(oa->name, ob->name);
    assert_int_equal(oa->kind, ob->kind);
    assert_true(oa->learning_rate == ob->learning_rate && oa->momentum == ob->momentum && oa->nesterov == ob->nesterov &&
                oa->beta_1 == ob->beta_1 && oa->beta_2 == ob->beta_2 && oa->epsilon == ob->epsilon &&
                oa->rho == ob->rho && oa->amsgrad == ob->amsgrad && oa->centered == ob->centered &&
                oa->initial_accumulator_value == ob->initial_accumulator_value &&
                oa->weight_decay == ob->weight_decay);
    assert_int_equal(oa->iterations, ob->iterations);
    assert_int_equal(oa->n_slots, ob->n_slots);
    assert_int_equal(a->n_params, b->n_params);
    for (int k = 0; k < oa->n_slots; k++) {
        assert_string_equal(oa->slot_names[k], ob->slot_names[k]);
        assert_bitwise(oa->slots[k], ob->slots[k], a->n_params, oa->slot_names[k]);
    }
}

/* ---- round trips --------------------------------------------------------------------------------- */

static void roundtrip(tnt_optimizer *opt, const char *file) {
    tnt_model *m = build(opt, "accuracy");
    fit(m, 0, 2);
    const char *path = tmp_path(file);
    tu_ok(tnt_save_model(m, path, NULL));
    tnt_model *c = tnt_load_model(path, true);
    if (!c) fail_msg("load_model: %s", tnt_last_error());
    assert_true(c->compiled);
    assert_int_equal(c->loss, TNT_SPARSE_CATEGORICAL_CROSSENTROPY);
    assert_int_equal(c->n_metrics, 1);
    assert_string_equal(c->metrics[0].name, "accuracy");
    assert_true(c->optimizer->iterations > 0);
    assert_same_weights(m, c);
    assert_same_predictions(m, c);
    assert_same_optimizer(m, c);

    tnt_model *u = tnt_load_model(path, false);
    if (!u) fail_msg("load_model: %s", tnt_last_error());
    assert_false(u->compiled);
    assert_null(u->optimizer);
    assert_same_predictions(m, u);
    tnt_model_free(u), tnt_model_free(c), tnt_model_free(m);
}

static void test_roundtrip_adam(void **state) {
    (void)state;
    roundtrip(tnt_optimizer_new("adam", &(tnt_optimizer_opts){.learning_rate = 0.02f, .beta_1 = 0.8f, .amsgrad = true}),
              "adam.h5");
}

static void test_roundtrip_others(void **state) {
    (void)state;
    roundtrip(tnt_optimizer_new("rmsprop", &(tnt_optimizer_opts){.momentum = 0.5f, .centered = true}), "rms.h5");
    roundtrip(tnt_optimizer_new("sgd", &(tnt_optimizer_opts){.learning_rate = 0.05f, .momentum = 0.9f, .nesterov = true}),
              "sgd.h5");
    roundtrip(tnt_optimizer_new("nadam", NULL), "nadam.h5");
    roundtrip(tnt_adamw(0.003f, 0.01f), "adamw.h5");
    roundtrip(tnt_optimizer_new("adadelta", &(tnt_optimizer_opts){.learning_rate = 0.5f}), "adadelta.h5");
}

/* Loss options travel as Keras's loss class config. */
static void test_loss_options(void **state) {
    (void)state;
    tnt_model *m = tnt_sequential("lo");
    tu_ok(tnt_model_add(m, tnt_input_layer(TNT_SHAPE(IN), NULL)));
    tu_ok(tnt_model_add(m, tnt_dense(3, NULL)));
    tu_ok(tnt_compile(m, &(tnt_compile_opts){.optimizer = tnt_sgd(0.1f), .loss = TNT_SPARSE_CATEGORICAL_CROSSENTROPY,
                                             .from_logits = true, .label_smoothing = 0.1f, .has_ignore_class = true,
                                             .ignore_class = 2}));
    const char *path = tmp_path("lo.h5");
    tu_ok(tnt_save_model(m, path, NULL));
    tnt_model *c = tnt_load_model(path, true);
    if (!c) fail_msg("load_model: %s", tnt_last_error());
    assert_true(c->from_logits);
    assert_non_null(c->loss_opts);
    assert_true(c->loss_opts->label_smoothing == 0.1f);
    assert_true(c->loss_opts->has_ignore_class);
    assert_int_equal(c->loss_opts->ignore_class, 2);
    tnt_model_free(c), tnt_model_free(m);
}

/* tnt_model_compile_opts gives back what a loaded model was compiled with; compiling again with
 * the model's own optimizer keeps it and its state (Keras's compile(optimizer=model.optimizer)),
 * also when that compile fails. */
static void test_compile_opts(void **state) {
    (void)state;
    tnt_model *a = build(tnt_adam(0.01f), "accuracy,sparse_top_k_categorical_accuracy:2");
    fit(a, 0, 1);
    const char *path = tmp_path("opts.h5");
    tu_ok(tnt_save_model(a, path, NULL));
    tnt_model *c = tnt_load_model(path, true);
    if (!c) fail_msg("load_model: %s", tnt_last_error());
    tnt_compile_opts co;
    char metrics[64];
    tu_ok(tnt_model_compile_opts(c, &co, metrics, sizeof metrics));
    assert_ptr_equal(co.optimizer, c->optimizer);
    assert_int_equal(co.loss, TNT_SPARSE_CATEGORICAL_CROSSENTROPY);
    assert_false(co.from_logits);
    assert_string_equal(metrics, "accuracy,sparse_top_k_categorical_accuracy:2");
    assert_int_equal(tnt_model_compile_opts(c, &co, metrics, 10), TNT_ERR_ARG); /* too small for both */

    tnt_loss_kind loss = co.loss;
    co.loss = (tnt_loss_kind)99;
    assert_int_equal(tnt_compile(c, &co), TNT_ERR_ARG);
    co.loss = loss;
    co.metrics = "accuracy";
    tu_ok(tnt_compile(c, &co));
    assert_ptr_equal(c->optimizer, co.optimizer);
    assert_int_equal(c->n_metrics, 1);
    assert_same_optimizer(a, c);

    tnt_model *u = tnt_load_model(path, false);
    if (!u) fail_msg("load_model: %s", tnt_last_error());
    assert_int_equal(tnt_model_compile_opts(u, &co, metrics, sizeof metrics), TNT_ERR_STATE);
    tu_error_contains("not compiled");
    tnt_model_free(u), tnt_model_free(c), tnt_model_free(a);
}

/* ---- resume -------------------------------------------------------------------------------------- */

static void test_resume_bitwise(void **state) {
    (void)state;
    tnt_model *a = build(tnt_adam(0.01f), "accuracy");
    fit(a, 0, 4);

    tnt_model *b = build(tnt_adam(0.01f), "accuracy");
    fit(b, 0, 2);
    const char *path = tmp_path("resume.h5");
    tu_ok(tnt_save_model(b, path, NULL));
    tnt_model_free(b);
    tnt_model *c = tnt_load_model(path, true);
    if (!c) fail_msg("load_model: %s", tnt_last_error());
    assert_int_equal(c->optimizer->iterations, 2 * N_SAMPLES / 8);
    fit(c, 2, 4);
    assert_int_equal(c->optimizer->iterations, a->optimizer->iterations);
    assert_same_weights(a, c);
    assert_same_optimizer(a, c);

    /* the control: a fresh optimizer (compile=false, then compiled anew) does not give the same */
    tnt_model *d = tnt_load_model(path, false);
    if (!d) fail_msg("load_model: %s", tnt_last_error());
    tu_ok(tnt_compile(d, &(tnt_compile_opts){.optimizer = tnt_adam(0.01f), .loss = TNT_SPARSE_CATEGORICAL_CROSSENTROPY}));
    fit(d, 2, 4);
    int64_t n;
    float *wa = get_all(a, &n), *wd = get_all(d, &n);
    assert_true(memcmp(wa, wd, (size_t)n * sizeof(float)) != 0);
    free(wa), free(wd);
    tnt_model_free(d), tnt_model_free(c), tnt_model_free(a);
}

/* ModelCheckpoint(save_weights_only=false) writes whole-model files that resume exactly. */
static void test_checkpoint_whole_model(void **state) {
    (void)state;
    tnt_model *a = build(tnt_adam(0.01f), NULL);
    fit(a, 0, 4);
    char tmpl[600];
    snprintf(tmpl, sizeof tmpl, "%s/ck_{epoch:02d}.h5", tmpdir);
    tnt_callback cb = tnt_model_checkpoint(tmpl, &(tnt_checkpoint_opts){.monitor = "loss"});
    tnt_model *b = build(tnt_adam(0.01f), NULL);
    tnt_dataset *d = data();
    tu_ok(tnt_fit(b, d, &(tnt_fit_opts){.epochs = 2, .callbacks = &cb, .n_callbacks = 1}, NULL));
    tnt_dataset_free(d);
    tnt_callback_free(&cb);
    tnt_model *c = tnt_load_model(tmp_path("ck_02.h5"), true);
    if (!c) fail_msg("load_model: %s", tnt_last_error());
    assert_same_weights(b, c);
    fit(c, 2, 4);
    assert_same_weights(a, c);
    tnt_model_free(c), tnt_model_free(b), tnt_model_free(a);
}

/* ---- structure (h5py) ------------------------------------------------------------------------------- */

/* Runs python code with the file as sys.argv[1]; NULL when h5py is missing (exit 77). */
static char *py(const char *code, const char *path) {
    const char *script = tmp_path("check.py");
    FILE *f = fopen(script, "w");
    assert_non_null(f);
    fprintf(f, "import sys, json\ntry:\n    import h5py\nexcept ImportError:\n    sys.exit(77)\n%s", code);
    fclose(f);
    char cmd[1400];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 '%s' '%s' 2>&1", script, path);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t cap = 1 << 16, len = 0, k;
    char *out = malloc(cap);
    while ((k = fread(out + len, 1, cap - len - 1, p)) > 0) {
        len += k;
        if (len + 1 == cap) out = realloc(out, cap *= 2);
    }
    out[len] = '\0';
    int rc = pclose(p);
    if (WIFEXITED(rc) && WEXITSTATUS(rc) == 77) {
        free(out);
        return NULL;
    }
    if (rc != 0) fail_msg("python failed: %s", out);
    return out;
}

static void test_structure(void **state) {
    (void)state;
    tnt_model *m = build(tnt_adam(0.01f), "accuracy");
    fit(m, 0, 1);
    const char *path = tmp_path("structure.h5");
    tu_ok(tnt_save_model(m, path, NULL));
    char *out = py("f = h5py.File(sys.argv[1], 'r')\n"
                   "def s(v): return v.decode() if isinstance(v, bytes) else v\n"
                   "mc = json.loads(s(f.attrs['model_config']))\n"
                   "tc = json.loads(s(f.attrs['training_config']))\n"
                   "print('class', mc['class_name'], [l['config']['name'] for l in mc['config']['layers']])\n"
                   "print('loss', tc['loss'], tc['metrics'], tc['weighted_metrics'], tc['loss_weights'])\n"
                   "oc = tc['optimizer_config']\n"
                   "print('opt', oc['class_name'], oc['config']['learning_rate'], oc['config']['beta_1'], "
                   "oc['config']['is_legacy_optimizer'])\n"
                   "print('versions', s(f.attrs['keras_version']), s(f.attrs['backend']))\n"
                   "print('layer_names', [s(x) for x in f['model_weights'].attrs['layer_names']])\n"
                   "g = f['optimizer_weights']\n"
                   "names = [s(x) for x in g.attrs['weight_names']]\n"
                   "print('opt_names', names)\n"
                   "print('iteration', g['iteration:0'].dtype, g['iteration:0'].shape, int(g['iteration:0'][()]))\n"
                   "print('m_kernel', g['Adam/m/d1/kernel:0'].dtype, g['Adam/m/d1/kernel:0'].shape)\n"
                   "print('kernel', f['model_weights/d1/d1/kernel:0'].shape)\n",
                   path);
    if (!out) {
        tnt_model_free(m);
        skip();
    }
    const char *want[] = {
        "class Sequential ['inp', 'd1', 'bn', 'out']",
        "loss sparse_categorical_crossentropy ['accuracy'] None None",
        "opt Adam 0.01 0.9 False",
        "versions 2.15.0 tensorflow",
        "layer_names ['d1', 'bn', 'out']",
        "opt_names ['iteration:0', 'Adam/m/d1/kernel:0', 'Adam/v/d1/kernel:0', 'Adam/m/d1/bias:0', "
        "'Adam/v/d1/bias:0', 'Adam/m/bn/gamma:0', 'Adam/v/bn/gamma:0', 'Adam/m/bn/beta:0', 'Adam/v/bn/beta:0', "
        "'Adam/m/out/kernel:0', 'Adam/v/out/kernel:0', 'Adam/m/out/bias:0', 'Adam/v/out/bias:0']",
        "iteration int64 () 6",
        "m_kernel float32 (6, 8)",
        "kernel (6, 8)",
    };
    for (size_t i = 0; i < sizeof want / sizeof *want; i++)
        if (!strstr(out, want[i])) fail_msg("h5py dump lacks \"%s\":\n%s", want[i], out);
    free(out);
    tnt_model_free(m);
}

/* ---- malformed files ---------------------------------------------------------------------------- */

static void expect_fail(const char *path, const char *needle) {
    tnt_model *m = tnt_load_model(path, true);
    if (m) fail_msg("load_model %s succeeded", path);
    tu_error_contains(needle);
}

static void test_malformed(void **state) {
    (void)state;
    tnt_model *m = build(tnt_adam(0.01f), "accuracy");
    fit(m, 0, 1);
    /* a weights file has no model_config */
    const char *wpath = tmp_path("weights_only.h5");
    tu_ok(tnt_save_weights(m, wpath, NULL));
    expect_fail(wpath, "no model_config attribute");
    expect_fail(tmp_path("absent.h5"), "absent.h5");

    /* bad JSON, a weight shape that does not fit, a wrong optimizer variable count (h5py) */
    char path_buf[512];
    snprintf(path_buf, sizeof path_buf, "%s", tmp_path("edit.h5")); /* tmp_path's buffers rotate */
    const char *path = path_buf;
    char *out;
    tu_ok(tnt_save_model(m, path, NULL));
    out = py("f = h5py.File(sys.argv[1], 'r+')\nf.attrs['model_config'] = b'{\"class_name\": \"Sequential\", '\n", path);
    if (out) {
        free(out);
        expect_fail(path, "model_config");
        tu_ok(tnt_save_model(m, path, NULL));
        out = py("f = h5py.File(sys.argv[1], 'r+')\n"
                 "c = json.loads(f.attrs['model_config'])\n"
                 "for l in c['config']['layers']:\n"
                 "    if l['config']['name'] == 'd1': l['config']['units'] = 9\n"
                 "f.attrs['model_config'] = json.dumps(c).encode()\n",
                 path);
        free(out);
        expect_fail(path, "shape mismatch");
        tu_ok(tnt_save_model(m, path, NULL));
        out = py("f = h5py.File(sys.argv[1], 'r+')\n"
                 "c = json.loads(f.attrs['training_config'])\n"
                 "c['optimizer_config']['config']['amsgrad'] = True\n"
                 "f.attrs['training_config'] = json.dumps(c).encode()\n",
                 path);
        free(out);
        expect_fail(path, "optimizer_weights holds 13 variable(s)");
        tu_ok(tnt_save_model(m, path, NULL));
        out = py("f = h5py.File(sys.argv[1], 'r+')\nf.attrs['training_config'] = b'[1, 2'\n", path);
        free(out);
        expect_fail(path, "training_config");
        /* compile=false does not read the training_config */
        tnt_model *u = tnt_load_model(path, false);
        if (!u) fail_msg("load_model(compile=false): %s", tnt_last_error());
        tnt_model_free(u);
    }

    /* truncated */
    path = tmp_path("trunc.h5");
    tu_ok(tnt_save_model(m, path, NULL));
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    off_t sizes[] = {st.st_size - 100, st.st_size / 2, 600, 100, 10, 0};
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        assert_int_equal(truncate(path, sizes[k]), 0);
        expect_fail(path, "trunc.h5");
    }
    tnt_model_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip_adam),
        cmocka_unit_test(test_roundtrip_others),
        cmocka_unit_test(test_loss_options),
        cmocka_unit_test(test_compile_opts),
        cmocka_unit_test(test_resume_bitwise),
        cmocka_unit_test(test_checkpoint_whole_model),
        cmocka_unit_test(test_structure),
        cmocka_unit_test(test_malformed),
    };
    return cmocka_run_group_tests(tests, setup_dir, teardown_dir);
}

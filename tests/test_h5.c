/* test_h5.c: Keras 2 HDF5 weights (tnt_save_weights / tnt_load_weights): round trips of a
 * Sequential (Conv2D, BatchNormalization, Flatten, Dense) and a Functional model with bitwise
 * identical predictions; files written with h5py the way Keras 2 writes them (fixtures/gen_h5.py:
 * fixed- and variable-length strings, split layer_names0/1 attributes, float64 data) read back;
 * our file's structure against the h5py-written one, dumped by fixtures/check_h5.py (skipped
 * without h5py); by_name loading; the errors (wrong shape, layer count, missing dataset,
 * truncated, not HDF5, no file) leaving the model untouched; atomic saves (no temp file left, the
 * old file kept when a save fails). */
#include "testutil.h"

#include "model/model.h"

#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
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
    snprintf(tmpdir, sizeof tmpdir, "/tmp/tnt_test_h5_XXXXXX");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown_dir(void **state) {
    (void)state;
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

/* Files in dir whose name contains ".tmp." */
static int count_temp_files(const char *dir) {
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) n += strstr(e->d_name, ".tmp.") != NULL;
    closedir(d);
    return n;
}

/* The fixtures' model: InputLayer (4, 4, 2) -> Conv2D(3, 2x2) -> BN -> Flatten -> Dense(5). */
static tnt_model *seq_model(const char *names[4], int units, uint64_t seed) {
    static const char *dflt[4] = {"conv", "bn", "flat", "fc"};
    if (!names) names = dflt;
    tnt_model *m = tnt_sequential("seq");
    tu_ok(tnt_model_add(m, tnt_input_layer(TNT_SHAPE(4, 4, 2), NULL)));
    tu_ok(tnt_model_add(m, tnt_conv2d(3, 2, 2, &(tnt_layer_opts){.activation = TNT_ACT_RELU, .name = names[0]})));
    tu_ok(tnt_model_add(m, tnt_batch_normalization(0, 0, names[1])));
    tu_ok(tnt_model_add(m, tnt_flatten(names[2])));
    tu_ok(tnt_model_add(m, tnt_dense(units, &(tnt_layer_opts){.activation = TNT_ACT_SOFTMAX, .name = names[3]})));
    tu_ok(tnt_compile(m, &(tnt_compile_opts){.optimizer = tnt_sgd(0.1f), .loss = TNT_MEAN_SQUARED_ERROR, .seed = seed}));
    return m;
}

static int64_t n_weights(tnt_model *m) { return tnt_model_count_params(m); }

static float *get_all(tnt_model *m) {
    int64_t n = n_weights(m);
    float *w = malloc((size_t)n * sizeof(float));
    tu_ok(tnt_get_weights(m, w, n));
    return w;
}

/* Every weight filled from a seed (moving variances positive), so that BN's statistics matter. */
static void randomize(tnt_model *m, uint64_t seed) {
    for (int i = 0; i < tnt_model_num_weights(m); i++) {
        const char *name;
        tnt_shape shape;
        float *data;
        tu_ok(tnt_model_weight(m, i, &name, &shape, &data));
        int64_t n = tnt_shape_numel(shape);
        tu_fill(data, n, seed * 100 + (uint64_t)i);
        if (strstr(name, "moving_variance"))
            for (int64_t k = 0; k < n; k++) data[k] = data[k] * data[k] + 0.5f;
    }
}

static tnt_tensor *predict(tnt_model *m, tnt_shape in) {
    tnt_shape s = {.ndim = in.ndim + 1};
    s.dim[0] = 7;
    for (int i = 0; i < in.ndim; i++) s.dim[i + 1] = in.dim[i];
    tnt_tensor *x = tnt_tensor_new(s), *y = NULL;
    tu_fill(x->data, tnt_shape_numel(s), 5);
    tu_ok(tnt_predict_on_batch(m, x, &y));
    tnt_tensor_free(x);
    return y;
}

static void assert_bitwise(const float *a, const float *b, int64_t n, const char *what) {
    if (memcmp(a, b, (size_t)n * sizeof(float)) != 0) {
        for (int64_t i = 0; i < n; i++)
            if (memcmp(&a[i], &b[i], sizeof(float)))
                fail_msg("%s: element %lld differs: %.9g vs %.9g", what, (long long)i, a[i], b[i]);
    }
}

static void assert_same_predictions(tnt_model *a, tnt_model *b, tnt_shape in) {
    tnt_tensor *ya = predict(a, in), *yb = predict(b, in);
    assert_int_equal(tnt_shape_numel(ya->shape), tnt_shape_numel(yb->shape));
    assert_bitwise(ya->data, yb->data, tnt_shape_numel(ya->shape), "predictions");
    tnt_tensor_free(ya), tnt_tensor_free(yb);
}

static void assert_weights_differ(tnt_model *a, tnt_model *b) {
    float *wa = get_all(a), *wb = get_all(b);
    assert_true(memcmp(wa, wb, (size_t)n_weights(a) * sizeof(float)) != 0);
    free(wa), free(wb);
}

static void assert_same_weights(tnt_model *a, tnt_model *b) {
    float *wa = get_all(a), *wb = get_all(b);
    assert_int_equal(n_weights(a), n_weights(b));
    assert_bitwise(wa, wb, n_weights(a), "weights");
    free(wa), free(wb);
}

/* ---- round trips ----------------------------------------------------------------------------- */

static void test_roundtrip_sequential(void **state) {
    (void)state;
    tnt_model *a = seq_model(NULL, 5, 1), *b = seq_model(NULL, 5, 2);
    randomize(a, 1);
    const char *path = tmp_path("seq.h5");
    tu_ok(tnt_save_weights(a, path, NULL));
    assert_int_equal(count_temp_files(tmpdir), 0);
    assert_weights_differ(a, b);
    tu_ok(tnt_load_weights(b, path, false));
    assert_same_weights(a, b);
    assert_same_predictions(a, b, TNT_SHAPE(4, 4, 2));
    /* saving again overwrites */
    randomize(a, 2);
    tu_ok(tnt_save_weights(a, path, &(tnt_save_opts){0}));
    tu_ok(tnt_load_weights(b, path, true));
    assert_same_weights(a, b);
    assert_same_predictions(a, b, TNT_SHAPE(4, 4, 2));
    tnt_model_free(a), tnt_model_free(b);
}

/* A save killed with -9 leaves seq.h5.tmp.PID behind: the next save to that path removes it, but
 * not the temp file of a writer still alive (pid 1 here). */
static void test_dead_writer_temp_removed(void **state) {
    (void)state;
    pid_t dead = fork();
    if (dead == 0) _exit(0);
    assert_true(dead > 0);
    assert_int_equal(waitpid(dead, NULL, 0), dead);
    const char *path = tmp_path("dead.h5");
    char stale[4096], live[4096];
    snprintf(stale, sizeof stale, "%s.tmp.%ld", path, (long)dead);
    snprintf(live, sizeof live, "%s.tmp.1", path);
    FILE *f = fopen(stale, "w");
    assert_non_null(f);
    fclose(f);
    assert_non_null(f = fopen(live, "w"));
    fclose(f);
    tnt_model *m = seq_model(NULL, 5, 1);
    tu_ok(tnt_save_weights(m, path, NULL));
    assert_int_equal(access(stale, F_OK), -1);
    assert_int_equal(access(live, F_OK), 0);
    unlink(live);
    assert_int_equal(count_temp_files(tmpdir), 0);
    tnt_model_free(m);
}

static tnt_model *func_model(uint64_t seed) {
    tnt_graph *g = tnt_graph_new();
    tnt_ktensor in = tnt_graph_input(g, TNT_SHAPE(6), "inp");
    tnt_ktensor a = tnt_call(g, tnt_dense(5, &(tnt_layer_opts){.activation = TNT_ACT_TANH, .name = "da"}), in);
    tnt_ktensor b = tnt_call(g, tnt_dense(5, &(tnt_layer_opts){.activation = TNT_ACT_RELU, .name = "db"}), in);
    tnt_ktensor s = tnt_call2(g, tnt_add("add"), a, b);
    tnt_ktensor n = tnt_call(g, tnt_batch_normalization(0, 0, "bn"), s);
    tnt_ktensor c = tnt_call2(g, tnt_concatenate(-1, "cat"), n, a);
    tnt_ktensor y = tnt_call(g, tnt_dense(3, &(tnt_layer_opts){.name = "out"}), c);
    tnt_model *m = tnt_functional(g, 1, &in, 1, &y, "func");
    tnt_graph_free(g);
    assert_non_null(m);
    tu_ok(tnt_compile(m, &(tnt_compile_opts){.optimizer = tnt_sgd(0.1f), .loss = TNT_MEAN_SQUARED_ERROR, .seed = seed}));
    return m;
}

static void test_roundtrip_functional(void **state) {
    (void)state;
    tnt_model *a = func_model(1), *b = func_model(2);
    randomize(a, 3);
    const char *path = tmp_path("func.h5");
    tu_ok(tnt_save_weights(a, path, NULL));
    assert_weights_differ(a, b);
    tu_ok(tnt_load_weights(b, path, false));
    assert_same_weights(a, b);
    assert_same_predictions(a, b, TNT_SHAPE(6));
    tnt_model_free(a), tnt_model_free(b);
}

/* ---- files written by h5py as Keras does -------------------------------------------------- */

/* fixtures/gen_h5.py: weight w (Keras order), element i: ((7 i + 13 w) % 101 - 50) / 64 */
static void set_fixture_values(tnt_model *m) {
    for (int w = 0; w < tnt_model_num_weights(m); w++) {
        tnt_shape shape;
        float *data;
        tu_ok(tnt_model_weight(m, w, NULL, &shape, &data));
        for (int64_t i = 0; i < tnt_shape_numel(shape); i++) data[i] = (float)((double)((7 * i + 13 * w) % 101 - 50) / 64.0);
    }
}

static void check_fixture_values(tnt_model *m) {
    for (int w = 0; w < tnt_model_num_weights(m); w++) {
        const char *name;
        tnt_shape shape;
        float *data;
        tu_ok(tnt_model_weight(m, w, &name, &shape, &data));
        for (int64_t i = 0; i < tnt_shape_numel(shape); i++) {
            float want = (float)((double)((7 * i + 13 * w) % 101 - 50) / 64.0);
            if (data[i] != want) fail_msg("%s[%lld] = %g, the file has %g", name, (long long)i, data[i], want);
        }
    }
}

static void load_fixture(const char *file) {
    tnt_model *m = seq_model(NULL, 5, 3);
    tu_ok(tnt_load_weights(m, file, false));
    check_fixture_values(m);
    tnt_model_free(m);
    /* by name: the model named as the file */
    const char *names[4] = {"conv2d_3", "batch_normalization_3", "flatten_3", "dense_9"};
    m = seq_model(names, 5, 4);
    tu_ok(tnt_load_weights(m, file, true));
    check_fixture_values(m);
    tnt_model_free(m);
}

static void test_load_keras_fixed(void **state) {
    (void)state;
    load_fixture("fixtures/h5_fixed.h5");
}

static void test_load_keras_vlen(void **state) {
    (void)state;
    load_fixture("fixtures/h5_vlen.h5");
}

static void test_load_keras_split(void **state) {
    (void)state;
    load_fixture("fixtures/h5_split.h5");
}

/* Runs fixtures/check_h5.py on path into a malloc'd string; NULL when h5py is missing. */
static char *dump(const char *path) {
    char cmd[700];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 fixtures/check_h5.py '%s' 2>&1", path);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t cap = 1 << 16, len = 0;
    char *out = malloc(cap);
    size_t k;
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
    if (rc != 0) fail_msg("check_h5.py %s failed: %s", path, out);
    return out;
}

/* Replaces each from in s by the shorter to, in place; returns the count. */
static int replace_all(char *s, const char *from, const char *to) {
    int n = 0;
    size_t lf = strlen(from), lt = strlen(to);
    for (char *p; (p = strstr(s, from)); n++) {
        memcpy(p, to, lt);
        memmove(p + lt, p + lf, strlen(p + lf) + 1);
        s = p + lt;
    }
    return n;
}

/* Our file of the fixtures' model named and valued as fixtures/h5_fixed.h5 (written by h5py as
 * Keras 2 does) has the same attributes (names, string types and padding), groups, dataset paths,
 * dtypes, shapes and values; its datasets are chunked (layout 2) with the Fletcher-32 checksum
 * where Keras's are contiguous (layout 1), and h5py reads them so. */
static void test_structure_matches_keras(void **state) {
    (void)state;
    const char *names[4] = {"conv2d_3", "batch_normalization_3", "flatten_3", "dense_9"};
    tnt_model *m = seq_model(names, 5, 3);
    set_fixture_values(m);
    const char *path = tmp_path("structure.h5");
    tu_ok(tnt_save_weights(m, path, NULL));
    char *ours = dump(path), *keras = dump("fixtures/h5_fixed.h5");
    if (!ours || !keras) {
        free(ours), free(keras);
        tnt_model_free(m);
        skip(); /* no h5py */
    }
    assert_int_equal(replace_all(ours, "layout=2 fletcher32", "layout=1"), 8); /* all 8 datasets */
    if (strcmp(ours, keras) != 0) fail_msg("our file:\n%s\nKeras's (h5py):\n%s", ours, keras);
    assert_non_null(strstr(ours, "attr /@layer_names fixed size=21 pad=1 cset=0 shape=(4,) ['conv2d_3', "
                                 "'batch_normalization_3', 'flatten_3', 'dense_9']"));
    assert_non_null(strstr(ours, "dataset dense_9/dense_9/kernel:0 float32 (27, 5)"));
    assert_non_null(strstr(ours, "attr flatten_3@weight_names float64 shape=(0,) []"));
    free(ours), free(keras);

    /* a Functional model lists its InputLayer (and a weightless Add, Concatenate) */
    tnt_model *f = func_model(1);
    path = tmp_path("func_structure.h5");
    tu_ok(tnt_save_weights(f, path, NULL));
    ours = dump(path);
    assert_non_null(ours);
    if (!strstr(ours, "attr /@layer_names fixed size=3 pad=1 cset=0 shape=(7,) ['inp', 'da', 'db', 'add', 'bn', "
                      "'cat', 'out']"))
        fail_msg("functional file:\n%s", ours);
    assert_non_null(strstr(ours, "attr inp@weight_names float64 shape=(0,) []"));
    assert_non_null(strstr(ours, "attr cat@weight_names float64 shape=(0,) []"));
    assert_non_null(strstr(ours, "attr bn@weight_names fixed size=20 pad=1 cset=0 shape=(4,) ['bn/gamma:0', "
                                 "'bn/beta:0', 'bn/moving_mean:0', 'bn/moving_variance:0']"));
    assert_non_null(strstr(ours, "dataset out/out/kernel:0 float32 (10, 3)"));
    free(ours);
    tnt_model_free(f);
    tnt_model_free(m);
}

/* ---- by name ------------------------------------------------------------------------------- */

static void test_by_name(void **state) {
    (void)state;
    tnt_model *a = seq_model(NULL, 5, 1);
    randomize(a, 4);
    const char *path = tmp_path("byname.h5");
    tu_ok(tnt_save_weights(a, path, NULL));
    /* "fc" renamed: it keeps its own weights, the others are loaded */
    const char *names[4] = {"conv", "bn", "flat", "fc_other"};
    tnt_model *b = seq_model(names, 5, 2);
    float *before = get_all(b);
    tu_ok(tnt_load_weights(b, path, true));
    for (int i = 0; i < tnt_model_num_weights(b); i++) {
        const char *nm;
        char name[160];
        tnt_shape shape;
        float *wb, *wa;
        tu_ok(tnt_model_weight(b, i, &nm, &shape, &wb));
        snprintf(name, sizeof name, "%s", nm); /* nm is overwritten by the next call */
        tu_ok(tnt_model_weight(a, i, NULL, NULL, &wa));
        int64_t off = 0;
        for (int k = 0; k < i; k++) {
            tnt_shape sk;
            tu_ok(tnt_model_weight(b, k, NULL, &sk, NULL));
            off += tnt_shape_numel(sk);
        }
        const float *want = strncmp(name, "fc_other/", 9) == 0 ? before + off : wa;
        assert_bitwise(wb, want, tnt_shape_numel(shape), name);
    }
    free(before);
    tnt_model_free(b);

    /* by order the names do not matter */
    b = seq_model(names, 5, 2);
    tu_ok(tnt_load_weights(b, path, false));
    assert_same_weights(a, b);
    assert_same_predictions(a, b, TNT_SHAPE(4, 4, 2));
    tnt_model_free(b);
    tnt_model_free(a);
}

/* ---- errors -------------------------------------------------------------------------------- */

static void expect_error(tnt_model *m, const char *path, bool by_name, tnt_status want, const char *needle) {
    float *before = get_all(m);
    tnt_status s = tnt_load_weights(m, path, by_name);
    if (s != want) fail_msg("load %s: %s (%s), expected %s", path, tnt_status_name(s), tnt_last_error(), tnt_status_name(want));
    if (needle) tu_error_contains(needle);
    float *after = get_all(m);
    assert_bitwise(after, before, n_weights(m), "weights after a failed load"); /* untouched */
    free(before), free(after);
}

static void test_wrong_shape(void **state) {
    (void)state;
    tnt_model *m = seq_model(NULL, 6, 1);
    expect_error(m, "fixtures/h5_fixed.h5", false, TNT_ERR_SHAPE, "\"fc\"");
    tu_error_contains("\"kernel\"");
    tu_error_contains("(27, 5)");
    tu_error_contains("(27, 6)");
    const char *names[4] = {"conv2d_3", "batch_normalization_3", "flatten_3", "dense_9"};
    tnt_model *n = seq_model(names, 6, 1);
    expect_error(n, "fixtures/h5_fixed.h5", true, TNT_ERR_SHAPE, "\"dense_9\"");
    tu_error_contains("(27, 6)");
    tnt_model_free(n);
    tnt_model_free(m);
}

static void test_layer_count_mismatch(void **state) {
    (void)state;
    tnt_model *m = tnt_sequential("extra");
    tu_ok(tnt_model_add(m, tnt_input_layer(TNT_SHAPE(6), NULL)));
    tu_ok(tnt_model_add(m, tnt_dense(4, NULL)));
    tu_ok(tnt_model_add(m, tnt_dense(3, NULL)));
    tu_ok(tnt_compile(m, &(tnt_compile_opts){.optimizer = tnt_sgd(0.1f), .loss = TNT_MEAN_SQUARED_ERROR}));
    expect_error(m, "fixtures/h5_fixed.h5", false, TNT_ERR_SHAPE, "the model has 2 layer(s) with weights, the file 3");
    tnt_model_free(m);
}

static void test_missing_dataset(void **state) {
    (void)state;
    tnt_model *m = seq_model(NULL, 5, 1);
    expect_error(m, "fixtures/h5_missing.h5", false, TNT_ERR_FORMAT, "dense_9/bias:0");
    tu_error_contains("missing");
    tnt_model_free(m);
}

static void test_truncated(void **state) {
    (void)state;
    tnt_model *m = seq_model(NULL, 5, 1);
    const char *path = tmp_path("trunc.h5");
    tu_ok(tnt_save_weights(m, path, NULL));
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    off_t sizes[] = {st.st_size - 100, st.st_size / 2, 600, 100, 10, 0};
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        assert_int_equal(truncate(path, sizes[k]), 0);
        tnt_status s = tnt_load_weights(m, path, false);
        assert_int_not_equal(s, TNT_OK);
        tu_error_contains("trunc.h5");
    }
    expect_error(m, path, false, TNT_ERR_FORMAT, "not an HDF5 file"); /* empty file */
    tnt_model_free(m);
}

static void test_not_hdf5_and_no_file(void **state) {
    (void)state;
    tnt_model *m = seq_model(NULL, 5, 1);
    const char *path = tmp_path("text.h5");
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("{\"class_name\": \"Sequential\"}\n", f);
    fclose(f);
    expect_error(m, path, false, TNT_ERR_FORMAT, "not an HDF5 file");
    expect_error(m, tmp_path("nonexistent.h5"), false, TNT_ERR_IO, "nonexistent.h5");
    tu_error_contains("No such file");
    /* an HDF5 file that is not a Keras weights file */
    expect_error(m, "fixtures/h5_not_weights.h5", false, TNT_ERR_FORMAT, "no layer_names attribute");
    tnt_model_free(m);
}

/* ---- atomic saves -------------------------------------------------------------------------- */

static void test_atomic_failures(void **state) {
    (void)state;
    tnt_model *m = seq_model(NULL, 5, 1), *big;
    randomize(m, 7);
    const char *path = tmp_path("atomic.h5");
    tu_ok(tnt_save_weights(m, path, NULL));

    /* a directory that does not exist */
    assert_int_not_equal(tnt_save_weights(m, tmp_path("no_dir/w.h5"), NULL), TNT_OK);
    tu_error_contains("no_dir/w.h5");

    /* the path is a directory: written, but the rename fails; the temp file is removed */
    const char *dir = tmp_path("is_a_dir");
    assert_int_equal(mkdir(dir, 0755), 0);
    assert_int_not_equal(tnt_save_weights(m, dir, NULL), TNT_OK);
    tu_error_contains("is_a_dir");
    assert_int_equal(count_temp_files(tmpdir), 0);

    /* a write that fails half way (file size limit, as a full disk): the old file stays whole */
    big = tnt_sequential("big");
    tu_ok(tnt_model_add(big, tnt_input_layer(TNT_SHAPE(64), NULL)));
    tu_ok(tnt_model_add(big, tnt_dense(512, NULL)));
    tu_ok(tnt_compile(big, &(tnt_compile_opts){.optimizer = tnt_sgd(0.1f), .loss = TNT_MEAN_SQUARED_ERROR}));
    tu_ok(tnt_model_count_params(big) > 0 ? TNT_OK : TNT_ERR_STATE);
    struct rlimit old, lim;
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
    void (*prev)(int) = signal(SIGXFSZ, SIG_IGN);
    lim = old;
    lim.rlim_cur = 32768; /* the dense kernel alone is 128 KiB */
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
    tnt_status s = tnt_save_weights(big, path, NULL);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
    signal(SIGXFSZ, prev);
    if (s == TNT_OK) fail_msg("a save past the file size limit succeeded");
    assert_int_equal(count_temp_files(tmpdir), 0);
    tnt_model *c = seq_model(NULL, 5, 9);
    tu_ok(tnt_load_weights(c, path, false)); /* the old file, whole */
    assert_same_weights(m, c);

    /* an unwritable directory (not for root, who writes anyway) */
    if (geteuid() != 0) {
        const char *ro = tmp_path("ro");
        assert_int_equal(mkdir(ro, 0755), 0);
        char file[600];
        snprintf(file, sizeof file, "%s/w.h5", ro);
        tu_ok(tnt_save_weights(m, file, NULL));
        assert_int_equal(chmod(ro, 0555), 0);
        assert_int_not_equal(tnt_save_weights(big, file, NULL), TNT_OK);
        assert_int_equal(chmod(ro, 0755), 0);
        assert_int_equal(count_temp_files(ro), 0);
        tu_ok(tnt_load_weights(c, file, false));
        assert_same_weights(m, c);
    }
    tnt_model_free(c), tnt_model_free(big), tnt_model_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip_sequential),
        cmocka_unit_test(test_roundtrip_functional),
        cmocka_unit_test(test_load_keras_fixed),
        cmocka_unit_test(test_load_keras_vlen),
        cmocka_unit_test(test_load_keras_split),
        cmocka_unit_test(test_structure_matches_keras),
        cmocka_unit_test(test_by_name),
        cmocka_unit_test(test_wrong_shape),
        cmocka_unit_test(test_layer_count_mismatch),
        cmocka_unit_test(test_missing_dataset),
        cmocka_unit_test(test_truncated),
        cmocka_unit_test(test_dead_writer_temp_removed),
        cmocka_unit_test(test_not_hdf5_and_no_file),
        cmocka_unit_test(test_atomic_failures),
    };
    return cmocka_run_group_tests(tests, setup_dir, teardown_dir);
}

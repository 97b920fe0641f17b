/* lenet5.c: the Tarantella quick start: LeNet-5 on Fashion-MNIST.
 *   lenet5 [--batch_size=64] [--learning_rate=0.01] [--number_epochs=1] [--train_size=N]
 *          [--val_size=N] [--test_size=N] [--shuffle_seed=42] [--data_dir=DIR]
 *          [--optimizer=sgd|adam] [--momentum=M] [--verbose=1] [--threads=T] [--history_file=F]
 *          [--dtype_policy=float32|mixed_bfloat16]
 * The data are the IDX files of Debian's dataset-fashion-mnist. --history_file writes every epoch's
 * figures and the test figures at full precision (master only), as examples/python/quick_start.py
 * does, so that the two can be compared. --dtype_policy: Keras's global mixed precision policy
 * for the model's layers (mixed_bfloat16: bf16 products, float32 weights). */
#include <tarantella.h>

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct args {
    long batch_size, number_epochs, train_size, val_size, test_size, verbose;
    unsigned long shuffle_seed;
    double learning_rate, momentum;
    const char *data_dir, *optimizer, *history_file, *dtype_policy;
} args;

static int usage(const char *prog, const char *bad) {
    if (bad) fprintf(stderr, "%s: unknown or malformed option '%s'\n", prog, bad);
    fprintf(stderr,
            "usage: %s [--batch_size=64] [--learning_rate=0.01] [--number_epochs=1]\n"
            "          [--train_size=60000] [--val_size=0] [--test_size=10000] [--shuffle_seed=42]\n"
            "          [--data_dir=/usr/share/datasets/fashion-mnist] [--optimizer=sgd|adam]\n"
            "          [--momentum=0] [--verbose=1] [--history_file=FILE]\n"
            "          [--dtype_policy=float32|mixed_bfloat16]\n", prog);
    return 2;
}

/* --name=value or --name value; returns the value or NULL */
static const char *opt_value(int argc, char **argv, int *i, const char *name) {
    size_t n = strlen(name);
    if (strncmp(argv[*i], name, n)) return NULL;
    if (argv[*i][n] == '=') return argv[*i] + n + 1;
    if (argv[*i][n] == '\0' && *i + 1 < argc) return argv[++*i];
    return NULL;
}

static bool parse_long(const char *s, long *out, long min) {
    char *end;
    long v = strtol(s, &end, 10);
    if (*s == '\0' || *end != '\0' || v < min) return false;
    *out = v;
    return true;
}

static bool parse_double(const char *s, double *out) {
    char *end;
    double v = strtod(s, &end);
    if (*s == '\0' || *end != '\0' || v < 0) return false;
    *out = v;
    return true;
}

static int parse_args(int argc, char **argv, args *a) {
    *a = (args){.batch_size = 64, .number_epochs = 1, .train_size = 60000, .val_size = 0,
                .test_size = 10000, .verbose = 1, .shuffle_seed = 42, .learning_rate = 0.01,
                .data_dir = "/usr/share/datasets/fashion-mnist", .optimizer = "sgd", .dtype_policy = "float32"};
    for (int i = 1; i < argc; i++) {
        const char *v;
        long seed;
        bool ok = true;
        if ((v = opt_value(argc, argv, &i, "--batch_size"))) ok = parse_long(v, &a->batch_size, 1);
        else if ((v = opt_value(argc, argv, &i, "--number_epochs"))) ok = parse_long(v, &a->number_epochs, 1);
        else if ((v = opt_value(argc, argv, &i, "--train_size"))) ok = parse_long(v, &a->train_size, 1);
        else if ((v = opt_value(argc, argv, &i, "--val_size"))) ok = parse_long(v, &a->val_size, 0);
        else if ((v = opt_value(argc, argv, &i, "--test_size"))) ok = parse_long(v, &a->test_size, 0);
        else if ((v = opt_value(argc, argv, &i, "--verbose"))) ok = parse_long(v, &a->verbose, 0);
        else if ((v = opt_value(argc, argv, &i, "--shuffle_seed"))) {
            ok = parse_long(v, &seed, 0);
            a->shuffle_seed = (unsigned long)seed;
        } else if ((v = opt_value(argc, argv, &i, "--learning_rate"))) ok = parse_double(v, &a->learning_rate);
        else if ((v = opt_value(argc, argv, &i, "--momentum"))) ok = parse_double(v, &a->momentum);
        else if ((v = opt_value(argc, argv, &i, "--data_dir"))) a->data_dir = v;
        else if ((v = opt_value(argc, argv, &i, "--optimizer"))) a->optimizer = v;
        else if ((v = opt_value(argc, argv, &i, "--dtype_policy"))) a->dtype_policy = v;
        else if ((v = opt_value(argc, argv, &i, "--history_file"))) a->history_file = v;
        else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) return usage(argv[0], NULL) - 1;
        else ok = false;
        if (!ok) return usage(argv[0], argv[i]);
    }
    if (a->train_size + a->val_size > 60000) {
        fprintf(stderr, "%s: --train_size %ld + --val_size %ld exceeds the 60000 training images\n",
                argv[0], a->train_size, a->val_size);
        return 2;
    }
    return 0;
}

/* The user's existing model: LeNet-5 as in the Tarantella quick start. */
static tnt_model *lenet5(void) {
    tnt_model *m = tnt_sequential("lenet5");
    tnt_layer_opts same_relu = {.padding = TNT_PADDING_SAME, .activation = TNT_ACT_RELU};
    if (tnt_model_add(m, tnt_input_layer(TNT_SHAPE(28, 28, 1), "input")) ||
        tnt_model_add(m, tnt_conv2d(20, 5, 5, &same_relu)) ||
        tnt_model_add(m, tnt_max_pooling2d(2, 2, NULL)) ||
        tnt_model_add(m, tnt_conv2d(50, 5, 5, &same_relu)) ||
        tnt_model_add(m, tnt_max_pooling2d(2, 2, NULL)) ||
        tnt_model_add(m, tnt_flatten(NULL)) ||
        tnt_model_add(m, tnt_dense(500, &(tnt_layer_opts){.activation = TNT_ACT_RELU})) ||
        tnt_model_add(m, tnt_dense(10, &(tnt_layer_opts){.activation = TNT_ACT_SOFTMAX}))) {
        tnt_model_free(m);
        return NULL;
    }
    return m;
}

static int scale_pixels(const float *x, const float *y, float *xo, float *yo, void *user) {
    (void)user;
    for (int i = 0; i < 28 * 28; i++) xo[i] = x[i] * (1.0f / 255.0f);
    *yo = *y;
    return 0;
}

/* "<name> <epoch> <value>" lines: the fit's epochs, then the test figures with epoch -1. */
static int write_history(const char *path, const tnt_history *h, const tnt_logs *test) {
    FILE *f = fopen(path, "w");
    if (!f) return tnt_set_error(TNT_ERR_IO, "--history_file %s: cannot open", path);
    for (int e = 0; e < tnt_history_epochs(h); e++) {
        const tnt_logs *l = tnt_history_logs(h, e);
        for (int k = 0; k < l->n; k++) fprintf(f, "%s %d %.17g\n", l->names[k], e, l->values[k]);
    }
    for (int k = 0; test && k < test->n; k++) fprintf(f, "%s -1 %.17g\n", test->names[k], test->values[k]);
    return fclose(f) ? tnt_set_error(TNT_ERR_IO, "--history_file %s: cannot write", path) : TNT_OK;
}

static tnt_dataset *load(const char *dir, const char *split, long skip, long take) {
    char images[1024], labels[1024];
    snprintf(images, sizeof images, "%s/%s-images-idx3-ubyte.gz", dir, split);
    snprintf(labels, sizeof labels, "%s/%s-labels-idx1-ubyte.gz", dir, split);
    tnt_dataset *ds = tnt_dataset_from_idx(images, labels);
    if (skip) ds = tnt_dataset_skip(ds, skip);
    ds = tnt_dataset_take(ds, take);
    return tnt_dataset_map(ds, scale_pixels, NULL, NULL, NULL);
}

int main(int argc, char **argv) {
    args a;
    int rc = parse_args(argc, argv, &a);
    if (rc) return rc < 0 ? 0 : rc;
    if (tnt_init(&argc, &argv) != TNT_OK) {
        fprintf(stderr, "lenet5: %s\n", tnt_last_error());
        return 1;
    }

    tnt_model *model = NULL;
    tnt_dataset *train = NULL, *val = NULL, *test = NULL;
    tnt_history *history = NULL;
    rc = 1;
    if (tnt_mixed_precision_set_global_policy(a.dtype_policy)) goto fail;
    model = lenet5();
    if (!model || tnt_distribute(model)) goto fail; /* the one line that makes it data-parallel */
    tnt_optimizer_opts oo = {.learning_rate = (float)a.learning_rate, .momentum = (float)a.momentum};
    if (tnt_compile(model, &(tnt_compile_opts){
                               .optimizer = tnt_optimizer_new(a.optimizer, &oo),
                               .loss = TNT_SPARSE_CATEGORICAL_CROSSENTROPY,
                               .metrics = "sparse_categorical_accuracy"}))
        goto fail;
    if (a.verbose && tnt_is_master_rank()) tnt_model_summary(model, stdout);

    train = load(a.data_dir, "train", 0, a.train_size);
    train = tnt_dataset_shuffle(train, a.train_size, a.shuffle_seed);
    train = tnt_dataset_batch(train, a.batch_size, false);
    train = tnt_dataset_prefetch(train, 2);
    if (!train) goto fail; /* report the first failure, not a later one */
    if (a.val_size > 0) val = tnt_dataset_batch(load(a.data_dir, "train", a.train_size, a.val_size), a.batch_size, false);
    test = tnt_dataset_batch(load(a.data_dir, "t10k", 0, a.test_size), a.batch_size, false);
    if (!train || (a.val_size > 0 && !val) || !test) goto fail;

    struct timespec t0, t1, c0, c1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
    if (tnt_fit(model, train, &(tnt_fit_opts){.epochs = (int)a.number_epochs, .verbose = (int)a.verbose,
                                              .validation_data = val}, &history))
        goto fail;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
    double seconds = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    double cpu = (double)(c1.tv_sec - c0.tv_sec) + 1e-9 * (double)(c1.tv_nsec - c0.tv_nsec);
    tnt_logs logs = {0};
    if (a.test_size > 0) {
        if (tnt_evaluate(model, test, &(tnt_eval_opts){.verbose = (int)a.verbose}, &logs)) goto fail;
        double loss = 0, acc = 0;
        tnt_logs_get(&logs, "loss", &loss);
        tnt_logs_get(&logs, "sparse_categorical_accuracy", &acc);
        if (tnt_is_master_rank())
            printf("test loss %.4f, test accuracy %.2f%% (%ld images, %d threads per rank, %s)\n", loss,
                   100.0 * acc, a.test_size, omp_get_max_threads(), a.dtype_policy);
    }
    if (tnt_is_master_rank()) /* fit's wall and CPU time (the master's, all its threads), validation
                                 included: as quick_start.py reports them */
        printf("training: %.1f samples/s, %.1f samples per CPU second\n",
               (double)(a.number_epochs * a.train_size) / seconds, (double)(a.number_epochs * a.train_size) / cpu);
    if (a.history_file && tnt_is_master_rank() && write_history(a.history_file, history, a.test_size > 0 ? &logs : NULL))
        goto fail;
    rc = 0;
fail:
    if (rc) fprintf(stderr, "lenet5: %s\n", tnt_last_error());
    tnt_history_free(history);
    tnt_dataset_free(train);
    tnt_dataset_free(val);
    tnt_dataset_free(test);
    tnt_model_free(model);
    tnt_finalize();
    return rc;
}

/* tnt-train: trains an existing Keras model with no code.
 *
 *   tarantella -n 4 -- tnt-train model.json --weights w.h5 --data fashion-mnist --epochs 5 \
 *       --batch_size 64 --optimizer adam --learning_rate 1e-3 \
 *       --loss sparse_categorical_crossentropy --metrics accuracy --save out.h5
 *
 * The model is Keras 2 JSON (model.to_json()) or a whole .h5 model (its architecture and weights;
 * it is compiled again from the flags); --weights loads Keras HDF5 weights first. Data:
 *   fashion-mnist            Debian's dataset-fashion-mnist (train split; pixels scaled to [0, 1])
 *   idx:IMAGES,LABELS        IDX files, plain or .gz (values as stored; add --rescale 255)
 *   npy:X.npy,Y.npy          NPY arrays, samples along the first axis
 *   synthetic:N              N random samples of the model's input shape, random class labels
 * Samples are reshaped to the model's input when the sizes agree ((28,28,1) -> (784,)).
 * Exit status: 0 success, 1 a failure (message on stderr), 2 bad usage. */
#include <tarantella.h>

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char USAGE[] =
    "usage: tnt-train MODEL --data SPEC [--weights W.h5] [--epochs 1] [--batch_size 32]\n"
    "                 [--optimizer sgd] [--learning_rate 0.01] [--loss sparse_categorical_crossentropy]\n"
    "                 [--from_logits] [--metrics accuracy] [--validation_data SPEC] [--shuffle_seed 42]\n"
    "                 [--rescale DIVISOR] [--num_samples N] [--save OUT.h5] [--verbose 1] [--help]\n"
    "  MODEL: Keras JSON (model.to_json()) or a whole model saved by model.save (.h5)\n"
    "  SPEC: fashion-mnist | idx:IMAGES,LABELS | npy:X.npy,Y.npy | synthetic:N\n"
    "  --num_samples uses the first N training samples; --save writes the trained model as\n"
    "  Keras's model.save does (.h5: architecture, weights, optimizer state).\n"
    "Run it with `tarantella -n RANKS -- tnt-train ...` to train data-parallel.\n";

typedef struct args {
    const char *model, *weights, *data, *val_data, *optimizer, *loss, *metrics, *save;
    int epochs, verbose;
    long batch_size, num_samples;
    double learning_rate, rescale;
    unsigned long shuffle_seed;
    bool from_logits;
} args;

/* "--name value" or "--name=value"; advances *i past a separate value */
static const char *value_of(int argc, char **argv, int *i, const char *name) {
    size_t n = strlen(name);
    if (strncmp(argv[*i], name, n)) return NULL;
    if (argv[*i][n] == '=') return argv[*i] + n + 1;
    if (argv[*i][n] != '\0') return NULL;
    if (*i + 1 >= argc) {
        fprintf(stderr, "tnt-train: %s needs a value\n", name);
        exit(2);
    }
    return argv[++*i];
}

static double number(const char *name, const char *v, double lo) {
    char *end;
    double d = strtod(v, &end);
    if (*end || !(d >= lo) || !isfinite(d)) {
        fprintf(stderr, "tnt-train: %s \"%s\": expected a number >= %g\n", name, v, lo);
        exit(2);
    }
    return d;
}

static args parse(int argc, char **argv) {
    args a = {.epochs = 1, .verbose = 1, .batch_size = 32, .learning_rate = 0.01, .optimizer = "sgd",
              .loss = "sparse_categorical_crossentropy", .metrics = "accuracy", .shuffle_seed = 42, .rescale = 1};
    for (int i = 1; i < argc; i++) {
        const char *v;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(USAGE, stdout);
            exit(0);
        } else if (!strcmp(argv[i], "--from_logits")) a.from_logits = true;
        else if ((v = value_of(argc, argv, &i, "--weights"))) a.weights = v;
        else if ((v = value_of(argc, argv, &i, "--data"))) a.data = v;
        else if ((v = value_of(argc, argv, &i, "--validation_data"))) a.val_data = v;
        else if ((v = value_of(argc, argv, &i, "--optimizer"))) a.optimizer = v;
        else if ((v = value_of(argc, argv, &i, "--loss"))) a.loss = v;
        else if ((v = value_of(argc, argv, &i, "--metrics"))) a.metrics = v;
        else if ((v = value_of(argc, argv, &i, "--save"))) a.save = v;
        else if ((v = value_of(argc, argv, &i, "--epochs"))) a.epochs = (int)number("--epochs", v, 1);
        else if ((v = value_of(argc, argv, &i, "--verbose"))) a.verbose = (int)number("--verbose", v, 0);
        else if ((v = value_of(argc, argv, &i, "--batch_size"))) a.batch_size = (long)number("--batch_size", v, 1);
        else if ((v = value_of(argc, argv, &i, "--num_samples"))) a.num_samples = (long)number("--num_samples", v, 1);
        else if ((v = value_of(argc, argv, &i, "--learning_rate"))) a.learning_rate = number("--learning_rate", v, 0);
        else if ((v = value_of(argc, argv, &i, "--rescale"))) a.rescale = number("--rescale", v, 1e-30);
        else if ((v = value_of(argc, argv, &i, "--shuffle_seed"))) a.shuffle_seed = (unsigned long)number("--shuffle_seed", v, 0);
        else if (argv[i][0] == '-') {
            fprintf(stderr, "tnt-train: unknown option \"%s\"\n%s", argv[i], USAGE);
            exit(2);
        } else if (!a.model) a.model = argv[i];
        else {
            fprintf(stderr, "tnt-train: unexpected argument \"%s\"\n%s", argv[i], USAGE);
            exit(2);
        }
    }
    if (!a.model || !a.data) {
        fprintf(stderr, "tnt-train: %s\n%s", !a.model ? "MODEL is required" : "--data is required", USAGE);
        exit(2);
    }
    if (tnt_loss_from_name(a.loss) < 0) {
        fprintf(stderr, "tnt-train: --loss: %s\n", tnt_last_error());
        exit(2);
    }
    return a;
}

/* Reshapes each sample to the model's input (same size) and divides it by the rescale divisor. */
static int to_model_input(const float *x_in, const float *y_in, float *x_out, float *y_out, void *user) {
    const double *p = user; /* {divisor, values per sample} */
    (void)y_in, (void)y_out;
    for (int64_t i = 0; i < (int64_t)p[1]; i++) x_out[i] = (float)(x_in[i] / p[0]);
    return 0;
}

/* The dataset of a SPEC, or NULL with a message. The synthetic labels are class indices below
 * the model's last output dimension, drawn with a fixed seed (the same on every rank). */
static tnt_dataset *load_data(const char *spec, const tnt_model *m, double *rescale, float **owned) {
    char a[2048] = "", b[2048] = "";
    const char *comma;
    if (!strcmp(spec, "fashion-mnist")) {
        if (*rescale == 1) *rescale = 255;
        return tnt_dataset_from_idx("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz",
                                    "/usr/share/datasets/fashion-mnist/train-labels-idx1-ubyte.gz");
    }
    if (!strncmp(spec, "synthetic:", 10)) {
        long n = strtol(spec + 10, NULL, 10);
        tnt_shape in = tnt_model_input_shape(m), out = tnt_model_output_shape(m);
        int64_t d = tnt_shape_numel(in), classes = out.dim[out.ndim - 1];
        if (n < 1) {
            fprintf(stderr, "tnt-train: --data %s: expected synthetic:N with N >= 1\n", spec);
            return NULL;
        }
        float *x = malloc((size_t)(n * d + n) * sizeof(float));
        if (!x) return NULL;
        uint64_t s = 42;
        for (int64_t i = 0; i < n * d + n; i++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            double u = (double)(s >> 11) / 9007199254740992.0;
            x[i] = i < n * d ? (float)(2 * u - 1) : (float)(int64_t)(u * (double)classes);
        }
        *owned = x;
        return tnt_dataset_from_arrays(x, in, x + n * d, TNT_SHAPE(), n, false);
    }
    bool idx = !strncmp(spec, "idx:", 4), npy = !strncmp(spec, "npy:", 4);
    if ((idx || npy) && (comma = strchr(spec + 4, ',')) && (size_t)(comma - spec - 4) < sizeof a) {
        memcpy(a, spec + 4, (size_t)(comma - spec - 4));
        snprintf(b, sizeof b, "%s", comma + 1);
        return idx ? tnt_dataset_from_idx(a, b) : tnt_dataset_from_npy(a, b);
    }
    fprintf(stderr, "tnt-train: --data \"%s\": expected fashion-mnist, idx:IMAGES,LABELS, npy:X.npy,Y.npy or synthetic:N\n",
            spec);
    return NULL;
}

static char *read_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = len >= 0 ? malloc((size_t)len + 1) : NULL;
    if (buf && fread(buf, 1, (size_t)len, f) != (size_t)len) {
        free(buf);
        buf = NULL;
    }
    if (buf) buf[len] = '\0';
    fclose(f);
    return buf;
}

/* Shuffled (training only), reshaped/rescaled to the model's input, batched. */
static tnt_dataset *prepare(tnt_dataset *ds, const tnt_model *m, double *map_args, bool shuffle, const args *a) {
    if (!ds) return NULL;
    tnt_shape want = tnt_model_input_shape(m), have = tnt_dataset_x_shape(ds);
    if (tnt_shape_numel(want) != tnt_shape_numel(have)) {
        char w[64], h[64];
        fprintf(stderr, "tnt-train: data samples of shape %s do not fit the model's input %s\n",
                tnt_shape_str(have, h, sizeof h), tnt_shape_str(want, w, sizeof w));
        tnt_dataset_free(ds);
        return NULL;
    }
    map_args[1] = (double)tnt_shape_numel(want);
    if (shuffle && a->num_samples > 0) ds = tnt_dataset_take(ds, a->num_samples);
    ds = tnt_dataset_map(ds, to_model_input, map_args, &want, NULL);
    if (shuffle) ds = tnt_dataset_shuffle(ds, 1 << 16, a->shuffle_seed);
    return tnt_dataset_batch(ds, a->batch_size, false);
}

int main(int argc, char **argv) {
    args a = parse(argc, argv);
    if (tnt_init(&argc, &argv) != TNT_OK) {
        fprintf(stderr, "tnt-train: %s\n", tnt_last_error());
        return 1;
    }
    int rc = 1;
    float *owned = NULL, *owned_val = NULL;
    tnt_dataset *train = NULL, *val = NULL;
    tnt_history *h = NULL;
    double train_map[2] = {a.rescale, 0}, val_map[2] = {a.rescale, 0};
    size_t len = strlen(a.model);
    bool whole = len > 3 && !strcmp(a.model + len - 3, ".h5");
    char *json = whole ? NULL : read_file(a.model);
    bool readable = whole || json != NULL;
    tnt_model *m = whole ? tnt_load_model(a.model, false) : json ? tnt_model_from_json(json) : NULL;
    free(json);
    if (!m) {
        fprintf(stderr, "tnt-train: %s: %s\n", a.model, readable ? tnt_last_error() : "cannot read the file");
        goto done;
    }
    if (a.weights && tnt_load_weights(m, a.weights, false) != TNT_OK) {
        fprintf(stderr, "tnt-train: %s: %s\n", a.weights, tnt_last_error());
        goto done;
    }
    train = prepare(load_data(a.data, m, &train_map[0], &owned), m, train_map, true, &a);
    if (a.val_data) val = prepare(load_data(a.val_data, m, &val_map[0], &owned_val), m, val_map, false, &a);
    if (!train || (a.val_data && !val)) {
        if (tnt_last_error()[0]) fprintf(stderr, "tnt-train: data: %s\n", tnt_last_error());
        goto done;
    }
    tnt_optimizer_opts oo = {.learning_rate = (float)a.learning_rate};
    tnt_compile_opts co = {.optimizer = tnt_optimizer_new(a.optimizer, &oo), .loss = (tnt_loss_kind)tnt_loss_from_name(a.loss),
                           .from_logits = a.from_logits, .metrics = a.metrics};
    if (tnt_distribute(m) != TNT_OK || tnt_compile(m, &co) != TNT_OK ||
        tnt_fit(m, train, &(tnt_fit_opts){.epochs = a.epochs, .verbose = a.verbose, .validation_data = val}, &h) != TNT_OK) {
        fprintf(stderr, "tnt-train: %s\n", tnt_last_error());
        goto done;
    }
    if (a.save && tnt_save_model(m, a.save, NULL) != TNT_OK) {
        fprintf(stderr, "tnt-train: --save %s: %s\n", a.save, tnt_last_error());
        goto done;
    }
    if (tnt_is_master_rank() && a.save) printf("saved the model to %s\n", a.save);
    rc = 0;
done:
    tnt_history_free(h);
    tnt_dataset_free(train);
    tnt_dataset_free(val);
    tnt_model_free(m);
    free(owned);
    free(owned_val);
    tnt_finalize();
    return rc;
}

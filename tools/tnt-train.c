/* tnt-train: trains an existing Keras model with no code, as load_model(MODEL).fit(x, y) would.
 *
 *   tarantella -n 4 -- tnt-train model.h5 --data npy:X.npy,Y.npy --epochs 5 --save out.h5
 *   tarantella -n 4 -- tnt-train model.json --data fashion-mnist --loss sparse_categorical_crossentropy \
 *       --optimizer adam --metrics accuracy
 *
 * A whole-model .h5 saved compiled keeps its loss, optimizer (class, hyperparameters, iterations
 * and slots) and metrics; each flag overrides one of them. A model with no training
 * configuration (JSON, or a .h5 saved uncompiled) needs --loss and --optimizer. Data:
 *   fashion-mnist            Debian's dataset-fashion-mnist (train split; pixels scaled to [0, 1])
 *   idx:IMAGES[,LABELS]      IDX files, plain or .gz (values as stored; add --rescale 255)
 *   npy:X.npy[,Y.npy]        NPY arrays, samples along the first axis
 *   npy:A=XA.npy+B=XB.npy[,Y.npy]  the inputs of a model with several, by name
 *   synthetic:N              N random samples of the model's input shape, with random targets of
 *                            the output's shape and of the kind the loss takes
 * Without targets (no labels file), --target input trains the model to reproduce its input.
 * Samples are reshaped to the model's input when the sizes agree ((28,28,1) -> (784,)).
 * Exit status: 0 success, 1 a failure (message on stderr), 2 bad usage. */
#include <tarantella.h>

#include "common/npy_inputs.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char USAGE[] =
    "usage: tnt-train MODEL --data SPEC [--weights W.h5] [--epochs 1] [--batch_size 32]\n"
    "                 [--loss NAME] [--from_logits] [--optimizer NAME] [--learning_rate LR]\n"
    "                 [--loss_weights W1,W2] [--metrics M1,M2|none] [--target labels|input]\n"
    "                 [--validation_split F]\n"
    "                 [--validation_data SPEC] [--shuffle_seed 42] [--rescale DIVISOR] [--num_samples N]\n"
    "                 [--csv_log FILE.csv] [--save OUT.keras|OUT.h5] [--terminate_on_nan 1] [--verbose 1]\n"
    "                 [--backup_dir DIR [--backup_freq epoch|N]]\n"
    "                 [--help]\n"
    "  MODEL: a whole model saved by Keras's model.save (Keras 3 .keras zip, or .h5), or\n"
    "         model.to_json() (.json); told apart by content\n"
    "  SPEC: fashion-mnist | idx:IMAGES[,LABELS] | npy:X.npy[,Y.npy] | synthetic:N\n"
    "        | npy:NAME=X.npy+NAME2=X2.npy[,Y.npy]  (a model with several inputs, each by name)\n"
    "A model saved compiled trains with its own loss, optimizer (with its state) and metrics, as\n"
    "Keras's load_model(MODEL).fit does; --loss, --from_logits, --loss_weights, --optimizer (a fresh\n"
    "one), --learning_rate and --metrics override each. A model with no training configuration\n"
    "(.json, or a .h5 saved uncompiled) needs --loss and --optimizer.\n"
    "  --loss_weights W1,W2   Keras's loss_weights, one per output in output order: the loss is\n"
    "                         W1 * loss_1 + W2 * loss_2 (each output's own loss is logged unweighted)\n"
    "  --target input         the targets are the inputs (models that reproduce their input)\n"
    "  --validation_split F   validate on the last fraction F of the data, taken before shuffling\n"
    "  --num_samples N        train on the first N samples only\n"
    "  --csv_log FILE         the epoch figures as Keras's CSVLogger writes them\n"
    "  --save OUT             the trained model as Keras's model.save (architecture, weights,\n"
    "                         training configuration, optimizer state): a Keras 3 zip when OUT\n"
    "                         ends in .keras, else Keras 2 HDF5\n"
    "  --terminate_on_nan 0|1 stop after a batch whose loss is NaN or infinite, exit 1 and save\n"
    "                         nothing (Keras's TerminateOnNaN); on by default\n"
    "  --backup_dir DIR       Keras's BackupAndRestore: the training state (weights, optimizer,\n"
    "                         epoch and batch) is backed up to DIR at each epoch end (and every N\n"
    "                         batches with --backup_freq N); a run that finds a backup there\n"
    "                         resumes from it, bitwise; it is removed when training ends\n"
    "Run it with `tarantella -n RANKS -- tnt-train ...` to train data-parallel; with\n"
    "`tarantella --max-restarts K` and --backup_dir a failed job restarts and resumes.\n";

/* Bounds of the integer flags: far above any real use, low enough that sizes cannot overflow. */
#define MAX_EPOCHS 1000000
#define MAX_BATCH (1L << 24)
#define MAX_SAMPLES (1L << 31)

typedef struct args {
    const char *model, *weights, *data, *val_data, *optimizer, *loss, *metrics, *save, *csv_log, *backup_dir;
    long epochs, verbose, batch_size, num_samples, shuffle_seed, terminate_on_nan, backup_freq;
    double learning_rate, rescale, validation_split;
    bool from_logits, target_input;
    float loss_weights[8]; /* --loss_weights: n_loss_weights values (0: the file's) */
    int n_loss_weights;
} args;

static void usage_error(const char *fmt, const char *value) {
    fputs("tnt-train: ", stderr);
    fprintf(stderr, fmt, value);
    fputc('\n', stderr);
    exit(2);
}

/* "--name value" or "--name=value"; advances *i past a separate value */
static const char *value_of(int argc, char **argv, int *i, const char *name) {
    size_t n = strlen(name);
    if (strncmp(argv[*i], name, n)) return NULL;
    if (argv[*i][n] == '=') return argv[*i] + n + 1;
    if (argv[*i][n] != '\0') return NULL;
    if (*i + 1 >= argc) usage_error("%s needs a value", name);
    return argv[++*i];
}

/* A decimal integer in [lo, hi]: no exponent, no fraction, no trailing characters. */
static long integer(const char *name, const char *v, long lo, long hi) {
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (end == v || *end || errno || x < lo || x > hi) {
        fprintf(stderr, "tnt-train: %s \"%s\": expected an integer from %ld to %ld\n", name, v, lo, hi);
        exit(2);
    }
    return (long)x;
}

/* A finite number in [lo, hi] (lo excluded when open_lo). */
static double real(const char *name, const char *v, double lo, bool open_lo, double hi) {
    char *end;
    double d = strtod(v, &end);
    if (end == v || *end || !isfinite(d) || d < lo || (open_lo && d == lo) || d > hi) {
        fprintf(stderr, "tnt-train: %s \"%s\": expected a number %s %g and <= %g\n", name, v, open_lo ? ">" : ">=", lo,
                hi);
        exit(2);
    }
    return d;
}

/* --loss_weights W1,W2,...: numbers >= 0, at most as many as the array holds. */
static void weights_list(args *a, const char *v) {
    const int cap = (int)(sizeof a->loss_weights / sizeof a->loss_weights[0]);
    const char *p = v;
    for (a->n_loss_weights = 0;; p++) {
        char *end;
        double d = strtod(p, &end);
        if (end == p || (*end && *end != ',') || !isfinite(d) || d < 0 || d > 1e30 || a->n_loss_weights == cap) {
            fprintf(stderr, "tnt-train: --loss_weights \"%s\": expected up to %d numbers >= 0 separated by commas, one "
                            "per output\n", v, cap);
            exit(2);
        }
        a->loss_weights[a->n_loss_weights++] = (float)d;
        if (!*(p = end)) break;
    }
}

static void check_names(const args *a) {
    if (a->loss && tnt_loss_from_name(a->loss) < 0) usage_error("--loss \"%s\": not a loss Tarantella has", a->loss);
    if (a->optimizer) {
        tnt_optimizer *o = tnt_optimizer_new(a->optimizer, NULL);
        if (!o) usage_error("--optimizer: %s", tnt_last_error());
        tnt_optimizer_free(o);
    }
    if (a->val_data && a->validation_split > 0) usage_error("%s", "give --validation_data or --validation_split, not both");
    if (a->backup_freq && !a->backup_dir) usage_error("%s", "--backup_freq needs --backup_dir");
}

static args parse(int argc, char **argv) {
    args a = {.epochs = 1, .verbose = 1, .batch_size = 32, .shuffle_seed = 42, .rescale = 1, .terminate_on_nan = 1};
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
        else if ((v = value_of(argc, argv, &i, "--loss_weights"))) weights_list(&a, v);
        else if ((v = value_of(argc, argv, &i, "--save"))) a.save = v;
        else if ((v = value_of(argc, argv, &i, "--csv_log"))) a.csv_log = v;
        else if ((v = value_of(argc, argv, &i, "--backup_dir"))) a.backup_dir = v;
        else if ((v = value_of(argc, argv, &i, "--backup_freq")))
            a.backup_freq = strcmp(v, "epoch") ? integer("--backup_freq", v, 1, LONG_MAX) : 0;
        else if ((v = value_of(argc, argv, &i, "--epochs"))) a.epochs = integer("--epochs", v, 1, MAX_EPOCHS);
        else if ((v = value_of(argc, argv, &i, "--verbose"))) a.verbose = integer("--verbose", v, 0, 2);
        else if ((v = value_of(argc, argv, &i, "--terminate_on_nan")))
            a.terminate_on_nan = integer("--terminate_on_nan", v, 0, 1);
        else if ((v = value_of(argc, argv, &i, "--batch_size"))) a.batch_size = integer("--batch_size", v, 1, MAX_BATCH);
        else if ((v = value_of(argc, argv, &i, "--num_samples")))
            a.num_samples = integer("--num_samples", v, 1, MAX_SAMPLES);
        else if ((v = value_of(argc, argv, &i, "--shuffle_seed")))
            a.shuffle_seed = integer("--shuffle_seed", v, 0, LONG_MAX);
        else if ((v = value_of(argc, argv, &i, "--learning_rate")))
            a.learning_rate = real("--learning_rate", v, 0, true, 1e6);
        else if ((v = value_of(argc, argv, &i, "--rescale"))) a.rescale = real("--rescale", v, 0, true, 1e30);
        else if ((v = value_of(argc, argv, &i, "--validation_split")))
            a.validation_split = real("--validation_split", v, 0, false, 0.999999);
        else if ((v = value_of(argc, argv, &i, "--target"))) {
            if (strcmp(v, "input") && strcmp(v, "labels")) usage_error("--target \"%s\": expected labels or input", v);
            a.target_input = !strcmp(v, "input");
        } else if (argv[i][0] == '-') {
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
    check_names(&a);
    return a;
}

/* ---- the model and how it is compiled -------------------------------------------------------- */

static char *read_text(const char *path) {
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

/* The file starts with a JSON object (an architecture). */
static bool json_text(const char *path) {
    FILE *f = fopen(path, "rb");
    int c = ' ';
    while (f && (c == ' ' || c == '\n' || c == '\r' || c == '\t')) c = fgetc(f);
    if (f) fclose(f);
    return c == '{';
}

/* A whole model, .keras or .h5 (compiled when it was saved compiled), or a JSON architecture:
 * told apart by content (tnt_load_model reads the magic bytes). */
static tnt_model *load_model(const char *path) {
    if (!json_text(path)) {
        tnt_model *m = tnt_load_model(path, true);
        if (!m) fprintf(stderr, "tnt-train: %s\n", tnt_last_error());
        return m;
    }
    char *json = read_text(path);
    if (!json) {
        fprintf(stderr, "tnt-train: %s: %s\n", path, strerror(errno));
        return NULL;
    }
    tnt_model *m = tnt_model_from_json(json);
    free(json);
    if (!m) fprintf(stderr, "tnt-train: %s: %s\n", path, tnt_last_error());
    return m;
}

/* Where each part of the compile configuration came from, for the plan. */
typedef struct origin {
    const char *loss, *optimizer, *metrics, *loss_weights;
} origin;

static const char FROM_FILE[] = "from the model file";

/* Compiles m as the file says, with the flags' overrides; *loss receives the loss. Returns 2 for
 * a model that has no training configuration and no --loss or --optimizer, 1 for a failure, 0 on
 * success. */
static int compile_model(tnt_model *m, const args *a, origin *from, tnt_loss_kind *loss) {
    char file_metrics[1024];
    tnt_compile_opts co;
    bool compiled = tnt_model_compile_opts(m, &co, file_metrics, sizeof file_metrics) == TNT_OK;
    if (!compiled && (!a->loss || !a->optimizer)) {
        const char *missing = a->loss ? "--optimizer" : a->optimizer ? "--loss" : "--loss and --optimizer";
        fprintf(stderr, "tnt-train: %s has no training configuration (a .json model, or a .h5 saved uncompiled): "
                        "give %s\n", a->model, missing);
        return 2;
    }
    if (!compiled) co = (tnt_compile_opts){0};
    *from = compiled ? (origin){FROM_FILE, FROM_FILE, FROM_FILE, FROM_FILE} : (origin){.metrics = "Keras's default"};
    bool recompile = !compiled;
    if (a->loss) {
        /* a loss named on the command line comes with its defaults, as compile(loss="name") */
        co.loss = (tnt_loss_kind)tnt_loss_from_name(a->loss);
        co.from_logits = a->from_logits;
        co.label_smoothing = 0;
        co.has_ignore_class = false;
        from->loss = "--loss";
        recompile = true;
    } else if (a->from_logits && !co.from_logits) {
        co.from_logits = true;
        from->loss = "--from_logits, otherwise from the model file";
        recompile = true;
    }
    if (a->n_loss_weights) {
        co.loss_weights = a->loss_weights;
        co.n_loss_weights = a->n_loss_weights;
        from->loss_weights = "--loss_weights";
        recompile = true;
    }
    if (a->metrics) {
        co.metrics = strcmp(a->metrics, "none") ? a->metrics : NULL;
        from->metrics = "--metrics";
        recompile = true;
    }
    if (a->optimizer) {
        co.optimizer = tnt_optimizer_new(a->optimizer, &(tnt_optimizer_opts){.learning_rate = (float)a->learning_rate});
        from->optimizer = a->learning_rate > 0 ? "--optimizer and --learning_rate" : "--optimizer, Keras's default rate";
        recompile = true;
    } else if (a->learning_rate > 0) {
        if (tnt_optimizer_set_lr(co.optimizer, (float)a->learning_rate) != TNT_OK) {
            fprintf(stderr, "tnt-train: --learning_rate: %s\n", tnt_last_error());
            return 1;
        }
        from->optimizer = "from the model file, --learning_rate";
    }
    if (recompile && tnt_compile(m, &co) != TNT_OK) {
        fprintf(stderr, "tnt-train: %s\n", tnt_last_error());
        return 1;
    }
    *loss = co.loss;
    return 0;
}

/* ---- data ------------------------------------------------------------------------------------- */

/* Samples in memory: x (n x numel(x_shape)) and targets y (n x numel(y_shape); NULL when the
 * data has none, x itself with --target input). */
typedef struct samples {
    float *x, *y;
    int64_t n;
    tnt_shape x_shape, y_shape;
} samples;

static void samples_free(samples *s) {
    if (s->y != s->x) free(s->y);
    free(s->x);
    *s = (samples){0};
}

/* n x per floats, or NULL with a message naming the size. */
static float *alloc_floats(int64_t n, int64_t per, const char *spec) {
    double bytes = (double)n * (double)per * sizeof(float);
    float *p = bytes < (double)SIZE_MAX ? malloc((size_t)n * (size_t)per * sizeof(float) + 1) : NULL;
    if (!p) fprintf(stderr, "tnt-train: --data %s: cannot allocate %.3g GB for %lld samples\n", spec, bytes / 1e9, (long long)n);
    return p;
}

/* Copies every element of ds (consumed) into memory. */
static bool read_all(tnt_dataset *ds, const char *spec, samples *s) {
    if (!ds) {
        fprintf(stderr, "tnt-train: --data %s: %s\n", spec, tnt_last_error());
        return false;
    }
    int64_t n = tnt_dataset_cardinality(ds);
    s->x_shape = tnt_dataset_x_shape(ds);
    s->y_shape = tnt_dataset_has_labels(ds) ? tnt_dataset_y_shape(ds) : (tnt_shape){.ndim = -1};
    int64_t xs = tnt_shape_numel(s->x_shape), ys = s->y_shape.ndim >= 0 ? tnt_shape_numel(s->y_shape) : 0;
    bool ok = (s->x = alloc_floats(n, xs, spec)) && (ys == 0 || (s->y = alloc_floats(n, ys, spec)));
    tnt_dataset_iter *it = ok ? tnt_dataset_iter_new(ds, 0) : NULL;
    tnt_batch b;
    int r = 0;
    while (it && s->n < n && (r = tnt_dataset_iter_next(it, &b)) == 1) {
        memcpy(s->x + s->n * xs, b.x.data, (size_t)xs * sizeof(float));
        if (ys) memcpy(s->y + s->n * ys, b.y.data, (size_t)ys * sizeof(float));
        s->n++;
    }
    if (ok && (!it || r < 0)) fprintf(stderr, "tnt-train: --data %s: %s\n", spec, tnt_last_error());
    ok = ok && it && r >= 0;
    tnt_dataset_iter_free(it);
    tnt_dataset_free(ds);
    if (!ok) samples_free(s);
    return ok;
}

/* Target values per sample for output k: one class index per position for the sparse loss,
 * else one per output value. */
static int64_t targets_per_sample(const tnt_model *m, int k, tnt_loss_kind loss) {
    int64_t traced = tnt_model_loss_graph_labels(m, k); /* a file's loss function (a traced graph) */
    if (traced >= 0) return traced;
    tnt_shape o = tnt_model_output_shape_at(m, k);
    return loss == TNT_SPARSE_CATEGORICAL_CROSSENTROPY ? tnt_shape_numel(o) / o.dim[o.ndim - 1] : tnt_shape_numel(o);
}

static int64_t all_targets_per_sample(const tnt_model *m, tnt_loss_kind loss) {
    int64_t n = 0;
    for (int k = 0; k < tnt_model_num_outputs(m); k++) n += targets_per_sample(m, k, loss);
    return n;
}

/* The shape has a None (variable) dimension: the data gives its size. */
static bool has_none(tnt_shape s) {
    for (int i = 0; i < s.ndim; i++)
        if (s.dim[i] < 0) return true;
    return false;
}

/* Uniform in [0, 1): a fixed-seed LCG, the same on every rank. */
static double uniform(uint64_t *state) {
    *state = *state * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(*state >> 11) / 9007199254740992.0;
}

/* Random targets of output k for one sample, of the kind the loss takes; returns the end of y. */
static float *synthetic_targets(const tnt_model *m, int k, tnt_loss_kind loss, uint64_t *state, float *y) {
    tnt_shape o = tnt_model_output_shape_at(m, k);
    int64_t classes = o.dim[o.ndim - 1], positions = tnt_shape_numel(o) / classes;
    for (int64_t p = 0; p < positions; p++) {
        switch (loss) {
        case TNT_SPARSE_CATEGORICAL_CROSSENTROPY: /* a class index */
            *y++ = (float)(int64_t)(uniform(state) * (double)classes);
            break;
        case TNT_CATEGORICAL_CROSSENTROPY: { /* a one-hot row */
            int64_t label = (int64_t)(uniform(state) * (double)classes);
            for (int64_t c = 0; c < classes; c++) *y++ = (float)(c == label);
            break;
        }
        case TNT_BINARY_CROSSENTROPY:
            for (int64_t c = 0; c < classes; c++) *y++ = (float)(uniform(state) < 0.5);
            break;
        default: /* regression */
            for (int64_t c = 0; c < classes; c++) *y++ = (float)(2 * uniform(state) - 1);
        }
    }
    return y;
}

/* N samples of the model's input shape in [-1, 1), with random targets (none with --target input). */
static bool synthetic(const char *spec, const tnt_model *m, tnt_loss_kind loss, bool target_input, samples *s) {
    char *end;
    errno = 0;
    long long n = strtoll(spec + 10, &end, 10);
    if (end == spec + 10 || *end || errno || n < 1 || n > MAX_SAMPLES) {
        fprintf(stderr, "tnt-train: --data \"%s\": expected synthetic:N with N an integer from 1 to %ld\n", spec, MAX_SAMPLES);
        return false;
    }
    s->x_shape = tnt_model_input_shape(m);
    if (has_none(s->x_shape) || has_none(tnt_model_output_shape(m))) {
        char b[96];
        fprintf(stderr, "tnt-train: --data %s: the model's input %s has variable (None) dimensions: synthetic data "
                        "needs fixed ones; give the samples (npy:X.npy,Y.npy)\n", spec, tnt_shape_str(s->x_shape, b, sizeof b));
        return false;
    }
    int64_t xs = tnt_shape_numel(s->x_shape), ys = target_input ? 0 : all_targets_per_sample(m, loss);
    s->y_shape = target_input ? (tnt_shape){.ndim = -1} : (tnt_shape){.ndim = 1, .dim = {ys}};
    if (!(s->x = alloc_floats(n, xs, spec)) || (ys && !(s->y = alloc_floats(n, ys, spec)))) {
        samples_free(s);
        return false;
    }
    uint64_t state = 42;
    for (int64_t i = 0; i < n * xs; i++) s->x[i] = (float)(2 * uniform(&state) - 1);
    for (int64_t i = 0; ys && i < n; i++) {
        float *y = s->y + i * ys;
        for (int k = 0; k < tnt_model_num_outputs(m); k++) y = synthetic_targets(m, k, loss, &state, y);
    }
    s->n = n;
    return true;
}

/* "A,B" split at the first comma into a and (possibly empty) b. */
static bool split_pair(const char *list, char *a, char *b, size_t size) {
    const char *comma = strchr(list, ',');
    size_t la = comma ? (size_t)(comma - list) : strlen(list);
    if (la >= size || (comma && strlen(comma + 1) >= size)) return false;
    memcpy(a, list, la);
    a[la] = '\0';
    snprintf(b, size, "%s", comma ? comma + 1 : "");
    return true;
}

/* The inputs of a model with several, by name ("a=A.npy+b=B.npy"), packed per sample, and the
 * targets of labels (NULL: none). */
static bool named_inputs(const tnt_model *m, char *x, const char *labels, samples *s) {
    char *specs[8];
    int n = 0;
    for (char *p = strtok(x, "+"); p && n < 8; p = strtok(NULL, "+")) specs[n++] = p;
    npy_array in, y = {0};
    if (!npy_pack_inputs("tnt-train", (tnt_model *)m, n, specs, &in)) return false;
    if (labels && !npy_read("tnt-train", labels, &y)) {
        free(in.data);
        return false;
    }
    if (labels && y.n != in.n) {
        fprintf(stderr, "tnt-train: %s has %lld samples, the inputs %lld\n", labels, (long long)y.n, (long long)in.n);
        free(in.data), free(y.data);
        return false;
    }
    *s = (samples){.x = in.data, .y = y.data, .n = in.n, .x_shape = in.shape, .y_shape = y.shape};
    return true;
}

/* Loads a SPEC into memory; fashion-mnist sets the rescale divisor to 255 unless given. */
static bool load_samples(const char *spec, const tnt_model *m, tnt_loss_kind loss, const args *a, double *rescale,
                         samples *s) {
    char x[2048], y[2048];
    *s = (samples){0};
    if (!strcmp(spec, "fashion-mnist")) {
        if (*rescale == 1) *rescale = 255;
        return read_all(tnt_dataset_from_idx("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz",
                                             a->target_input ? NULL : "/usr/share/datasets/fashion-mnist/train-labels-idx1-ubyte.gz"),
                        spec, s);
    }
    if (!strncmp(spec, "synthetic:", 10)) return synthetic(spec, m, loss, a->target_input, s);
    bool idx = !strncmp(spec, "idx:", 4), npy = !strncmp(spec, "npy:", 4);
    if (npy && split_pair(spec + 4, x, y, sizeof x) && strchr(x, '=')) /* NAME=X.npy+NAME2=X2.npy */
        return named_inputs(m, x, *y ? y : NULL, s);
    if ((idx || npy) && split_pair(spec + 4, x, y, sizeof x) && *x) {
        const char *labels = *y ? y : NULL;
        return read_all(idx ? tnt_dataset_from_idx(x, labels) : tnt_dataset_from_npy(x, labels), spec, s);
    }
    fprintf(stderr, "tnt-train: --data \"%s\": expected fashion-mnist, idx:IMAGES[,LABELS], npy:X.npy[,Y.npy], "
                    "npy:NAME=X.npy+NAME2=X2.npy[,Y.npy] or synthetic:N\n", spec);
    return false;
}

/* Checks the samples against the model, sets the targets (--target input: the inputs) and
 * rescales the inputs. */
static bool fit_to_model(samples *s, const char *spec, const tnt_model *m, tnt_loss_kind loss, const args *a,
                         double rescale) {
    char have[96], want[96];
    tnt_shape in = tnt_model_input_shape(m), out = tnt_model_output_shape(m);
    /* None dimensions: the samples keep their shape (rank and fixed sizes as the model's), and
     * fit checks the targets against the output of that shape */
    bool variable = has_none(in) || has_none(out);
    bool fits = s->x_shape.ndim == in.ndim;
    for (int i = 0; variable && fits && i < in.ndim; i++) fits = in.dim[i] < 0 || in.dim[i] == s->x_shape.dim[i];
    int64_t xs = tnt_shape_numel(s->x_shape), expected = variable ? 0 : all_targets_per_sample(m, loss);
    if (variable ? !fits : xs != tnt_shape_numel(in)) {
        fprintf(stderr, "tnt-train: --data %s: samples of shape %s do not fit the model's input %s\n", spec,
                tnt_shape_str(s->x_shape, have, sizeof have), tnt_shape_str(in, want, sizeof want));
        return false;
    }
    if (a->target_input) {
        free(s->y);
        s->y = s->x;
        s->y_shape = s->x_shape;
    } else if (!s->y) {
        fprintf(stderr, "tnt-train: --data %s has no targets: give a labels file, or --target input to train the "
                        "model to reproduce its input\n", spec);
        return false;
    }
    if (!variable && tnt_shape_numel(s->y_shape) != expected) {
        fprintf(stderr, "tnt-train: --data %s: targets of shape %s do not fit loss %s on the output %s (%lld values "
                        "per sample expected)\n", spec, tnt_shape_str(s->y_shape, have, sizeof have),
                tnt_loss_name(loss), tnt_shape_str(out, want, sizeof want), (long long)expected);
        return false;
    }
    if (!variable) s->x_shape = in;
    if (rescale != 1)
        for (int64_t i = 0; i < s->n * xs; i++) s->x[i] = (float)(s->x[i] / rescale);
    return true;
}

/* A borrowed dataset of samples [first, first + n), shuffled when seed is set, batched. */
static tnt_dataset *batches(const samples *s, int64_t first, int64_t n, bool shuffle, const args *a) {
    int64_t xs = tnt_shape_numel(s->x_shape), ys = tnt_shape_numel(s->y_shape);
    tnt_dataset *ds = tnt_dataset_from_arrays(s->x + first * xs, s->x_shape, s->y + first * ys, s->y_shape, n, false);
    if (shuffle) ds = tnt_dataset_shuffle(ds, n, (uint64_t)a->shuffle_seed);
    ds = tnt_dataset_batch(ds, a->batch_size, false);
    if (!ds) fprintf(stderr, "tnt-train: data: %s\n", tnt_last_error());
    return ds;
}

/* ---- the plan and the output file ------------------------------------------------------------- */

static void print_plan(const tnt_model *m, const args *a, const origin *from, const samples *s, int64_t n_train,
                       int64_t n_val) {
    char in[96], out[96], ys[96], met[1024] = "none";
    tnt_compile_opts co;
    tnt_model_compile_opts(m, &co, met, sizeof met);
    const tnt_optimizer *o = tnt_model_optimizer(m);
    int ranks = tnt_get_size();
    long per_rank = a->batch_size / ranks;
    printf("tnt-train plan\n");
    printf("  model       %s: %lld parameters, input %s, output %s\n", a->model, (long long)tnt_model_count_params(m),
           tnt_shape_str(tnt_model_input_shape(m), in, sizeof in), tnt_shape_str(tnt_model_output_shape(m), out, sizeof out));
    printf("  loss        %s%s (%s)\n", tnt_loss_name(co.loss), co.from_logits ? ", from logits" : "", from->loss);
    if (co.loss_weights) {
        printf("  loss weights");
        for (int k = 0; k < co.n_loss_weights; k++) printf("%s%g", k ? ", " : " ", co.loss_weights[k]);
        printf(" (%s)\n", from->loss_weights);
    }
    printf("  optimizer   %s, learning rate %g, iteration %lld (%s)\n", tnt_optimizer_name(o), tnt_optimizer_get_lr(o),
           (long long)tnt_optimizer_iterations(o), from->optimizer);
    printf("  metrics     %s (%s)\n", met[0] ? met : "none", from->metrics);
    printf("  data        %s: %lld training samples of %s, targets %s%s\n", a->data, (long long)n_train, in,
           tnt_shape_str(s->y_shape, ys, sizeof ys), s->y == s->x ? " (the inputs)" : "");
    if (n_val) printf("  validation  the last %lld samples (--validation_split %g)\n", (long long)n_val, a->validation_split);
    if (a->backup_freq) printf("  backup      %s, every %ld batches and at each epoch end\n", a->backup_dir, a->backup_freq);
    else if (a->backup_dir) printf("  backup      %s, at each epoch end\n", a->backup_dir);
    if (a->val_data) printf("  validation  %s\n", a->val_data);
    printf("  ranks       %d; batch %ld global, %ld%s per rank\n", ranks, a->batch_size, per_rank,
           a->batch_size % ranks ? " or 1 more" : "");
    printf("  epochs      %ld%s%s\n", a->epochs, a->save ? ", then save to " : "", a->save ? a->save : "");
    fflush(stdout);
}

/* The output file can be written and the model's names can be saved (tnt_save_model checks
 * both and writes nothing), so that a typo or a bad layer name fails now, not after training. */
static bool savable(tnt_model *m, const char *path) {
    if (tnt_save_model(m, path, &(tnt_save_opts){.check_only = true}) == TNT_OK) return true;
    fprintf(stderr, "tnt-train: --save: %s\n", tnt_last_error());
    return false;
}

int main(int argc, char **argv) {
    args a = parse(argc, argv);
    if (tnt_init(&argc, &argv) != TNT_OK) {
        fprintf(stderr, "tnt-train: %s\n", tnt_last_error());
        return 1;
    }
    int rc = 1;
    samples train_s = {0}, val_s = {0};
    tnt_dataset *train = NULL, *val = NULL;
    tnt_history *h = NULL;
    tnt_callback cbs[3];
    int n_cbs = 0;
    origin from;
    double rescale = a.rescale, val_rescale = a.rescale;
    tnt_model *m = load_model(a.model);
    if (!m || (a.save && !savable(m, a.save))) goto done;
    if (a.weights && tnt_load_weights(m, a.weights, false) != TNT_OK) {
        fprintf(stderr, "tnt-train: --weights %s: %s\n", a.weights, tnt_last_error());
        goto done;
    }
    tnt_loss_kind loss;
    if ((rc = compile_model(m, &a, &from, &loss)) != 0) goto done;
    rc = 1;
    if (!load_samples(a.data, m, loss, &a, &rescale, &train_s) || !fit_to_model(&train_s, a.data, m, loss, &a, rescale))
        goto done;
    if (a.val_data && (!load_samples(a.val_data, m, loss, &a, &val_rescale, &val_s) ||
                       !fit_to_model(&val_s, a.val_data, m, loss, &a, val_rescale)))
        goto done;
    if (a.num_samples && a.num_samples < train_s.n) train_s.n = a.num_samples;
    /* Keras's validation_split: the last fraction, before any shuffling */
    int64_t n_train = (int64_t)floor((double)train_s.n * (1.0 - a.validation_split)), n_val = train_s.n - n_train;
    if (n_train < 1 || (a.validation_split > 0 && n_val < 1)) {
        fprintf(stderr, "tnt-train: --validation_split %g leaves %lld of %lld samples for training and %lld for "
                        "validation: both need at least one\n", a.validation_split, (long long)n_train,
                (long long)train_s.n, (long long)n_val);
        goto done;
    }
    if (!(train = batches(&train_s, 0, n_train, true, &a))) goto done;
    if (n_val && !(val = batches(&train_s, n_train, n_val, false, &a))) goto done;
    if (a.val_data && !(val = batches(&val_s, 0, val_s.n, false, &a))) goto done;
    if (a.csv_log) cbs[n_cbs++] = tnt_csv_logger(a.csv_log, 0, false);
    if (a.terminate_on_nan) cbs[n_cbs++] = tnt_terminate_on_nan();
    if (a.backup_dir) cbs[n_cbs++] = tnt_backup_and_restore(a.backup_dir, a.backup_freq, true);
    if (tnt_is_master_rank() && a.verbose) print_plan(m, &a, &from, &train_s, n_train, n_val);
    tnt_fit_opts fo = {.epochs = (int)a.epochs, .verbose = (int)a.verbose, .validation_data = val,
                       .callbacks = cbs, .n_callbacks = n_cbs};
    if (tnt_distribute(m) != TNT_OK || tnt_fit(m, train, &fo, &h) != TNT_OK) {
        fprintf(stderr, "tnt-train: %s\n", tnt_last_error());
        goto done;
    }
    /* the figures are global: every rank sees the same loss and takes the same exit */
    int last_epoch = tnt_history_epochs(h) - 1;
    double last_loss = tnt_history_get(h, "loss", last_epoch);
    if (a.terminate_on_nan && !isfinite(last_loss)) {
        if (tnt_is_master_rank())
            fprintf(stderr, "tnt-train: training stopped in epoch %d: the loss is %g%s\n", last_epoch + 1, last_loss,
                    a.save ? "; the model is not saved" : "");
        goto done;
    }
    if (a.save && tnt_save_model(m, a.save, NULL) != TNT_OK) {
        fprintf(stderr, "tnt-train: --save %s: %s\n", a.save, tnt_last_error());
        goto done;
    }
    if (tnt_is_master_rank() && a.save && a.verbose) printf("saved the model to %s\n", a.save);
    rc = 0;
done:
    for (int i = 0; i < n_cbs; i++) tnt_callback_free(&cbs[i]);
    tnt_history_free(h);
    tnt_dataset_free(train);
    tnt_dataset_free(val);
    tnt_model_free(m);
    samples_free(&train_s);
    samples_free(&val_s);
    tnt_finalize();
    return rc;
}

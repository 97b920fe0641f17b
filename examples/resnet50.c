/* resnet50.c: the Tarantella ResNet-50 tutorial (train_imagenet_main.py) in C. The model is
 * tf.keras.applications.ResNet50(include_top=True, weights=None) built by zoo/resnet.c,
 * made data-parallel with one call (tnt_distribute), trained with SGD (momentum 0.9) on the
 * tutorial's PiecewiseConstantDecayWithWarmup schedule (base 0.1 x global batch / 256, 5 warm-up
 * epochs, x0.1 at epochs 30, 60, 80), sparse categorical cross-entropy and accuracy.
 *
 *   tarantella -n 2 -- resnet50 --model_arch=resnet50 --batch_size=64 --train_epochs=3 \
 *       --val_freq=3 --train_num_samples=2560 --val_num_samples=256 --synthetic_data
 *
 * Flags (--name=value or --name value):
 *   --model_arch=resnet50|resnet34|resnet18  (default resnet50; see resnet.h for 18/34)
 *   --batch_size=N         global batch size, split over the ranks (default 64)
 *   --train_epochs=N       (default 1)
 *   --val_freq=N           validate every N epochs (default 1)
 *   --train_num_samples=N  training samples (synthetic: generated; data_dir: the first N, 0 = all;
 *                          default 2560)
 *   --val_num_samples=N    validation samples (default 0: no validation)
 *   --synthetic_data       random images and labels from a fixed seed, the same on every rank
 *   --data_dir=DIR         real data as NPY files: DIR/train_x.npy (N, S, S, 3) and
 *                          DIR/train_y.npy (N,) integer class ids in [0, num_classes), and for
 *                          validation DIR/val_x.npy and DIR/val_y.npy. Images of dtype uint8 are
 *                          scaled to [0, 1]; float32/float64 images are used as stored (store them
 *                          preprocessed). S must equal --image_size.
 *   --shuffle_seed=N       shuffle seed of the training data (default 42; the same on all ranks)
 *   --drop_remainder[=true|false]  drop the last partial batch (default false)
 *   --image_size=S         input resolution S x S x 3 (default 224)
 *   --num_classes=N        (default 1000)
 *   --learning_rate=LR     base learning rate of the schedule for a batch of 256 (default 0.1)
 *   --verbose=0|1|2        (default 1)
 *   --help
 * Bad or unknown flags print a message and exit with status 2. Output comes from the master rank
 * only. */
#include <tarantella.h>

#include "resnet.h"

#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct args {
    resnet_arch arch;
    const char *arch_name;
    long batch_size, train_epochs, val_freq, train_num_samples, val_num_samples, image_size, num_classes,
        verbose;
    unsigned long shuffle_seed;
    bool synthetic, drop_remainder;
    double learning_rate;
    const char *data_dir;
} args;

static const char *prog = "resnet50";

static void usage(FILE *f) {
    fprintf(f,
            "usage: %s [--model_arch=resnet50|resnet34|resnet18] [--batch_size=64] [--train_epochs=1]\n"
            "          [--val_freq=1] [--train_num_samples=2560] [--val_num_samples=0]\n"
            "          (--synthetic_data | --data_dir=DIR) [--shuffle_seed=42] [--drop_remainder[=true|false]]\n"
            "          [--image_size=224] [--num_classes=1000] [--learning_rate=0.1] [--verbose=1] [--help]\n"
            "DIR holds train_x.npy (N,S,S,3) uint8 or float32, train_y.npy (N,) and, for validation,\n"
            "val_x.npy and val_y.npy. Run data-parallel with: tarantella -n RANKS -- %s ...\n",
            prog, prog);
}

static int bad(const char *what, const char *value) {
    fprintf(stderr, "%s: %s '%s'\n", prog, what, value);
    usage(stderr);
    return 2;
}

/* --name=value or --name value; returns the value or NULL. Flags (no value) are handled apart. */
static const char *opt_value(int argc, char **argv, int *i, const char *name, bool *matched) {
    size_t n = strlen(name);
    *matched = false;
    if (strncmp(argv[*i], name, n) || (argv[*i][n] != '=' && argv[*i][n] != '\0')) return NULL;
    *matched = true;
    if (argv[*i][n] == '=') return argv[*i] + n + 1;
    if (*i + 1 < argc) return argv[++*i];
    return NULL;
}

static bool parse_long(const char *s, long *out, long min) {
    char *end;
    if (!s || !*s) return false;
    long v = strtol(s, &end, 10);
    if (*end != '\0' || v < min) return false;
    *out = v;
    return true;
}

static int parse_args(int argc, char **argv, args *a) {
    *a = (args){.arch = RESNET50, .arch_name = "resnet50", .batch_size = 64, .train_epochs = 1, .val_freq = 1,
                .train_num_samples = 2560, .image_size = 224, .num_classes = 1000, .verbose = 1,
                .shuffle_seed = 42, .learning_rate = 0.1};
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i], *v;
        bool m;
        struct { const char *name; long *dst; long min; } longs[] = {
            {"--batch_size", &a->batch_size, 1},          {"--train_epochs", &a->train_epochs, 1},
            {"--val_freq", &a->val_freq, 1},              {"--train_num_samples", &a->train_num_samples, 0},
            {"--val_num_samples", &a->val_num_samples, 0}, {"--image_size", &a->image_size, 1},
            {"--num_classes", &a->num_classes, 1},        {"--verbose", &a->verbose, 0},
        };
        bool done = false;
        for (size_t k = 0; k < sizeof longs / sizeof *longs && !done; k++) {
            v = opt_value(argc, argv, &i, longs[k].name, &m);
            if (!m) continue;
            done = true;
            if (!parse_long(v, longs[k].dst, longs[k].min)) return bad("bad value for", arg);
        }
        if (done) continue;
        if (!strcmp(arg, "--help") || !strcmp(arg, "-h")) {
            usage(stdout);
            return -1;
        } else if (!strcmp(arg, "--synthetic_data") || !strcmp(arg, "--synthetic_data=true")) {
            a->synthetic = true;
        } else if (!strcmp(arg, "--synthetic_data=false")) {
            a->synthetic = false;
        } else if (!strcmp(arg, "--drop_remainder") || !strcmp(arg, "--drop_remainder=true")) {
            a->drop_remainder = true;
        } else if (!strcmp(arg, "--drop_remainder=false")) {
            a->drop_remainder = false;
        } else if ((v = opt_value(argc, argv, &i, "--model_arch", &m)) || m) {
            if (!v || !(a->arch = resnet_arch_from_name(v))) return bad("bad --model_arch (expected resnet50, resnet34 or resnet18):", v ? v : arg);
            a->arch_name = v;
        } else if ((v = opt_value(argc, argv, &i, "--data_dir", &m)) || m) {
            if (!v || !*v) return bad("missing value for", arg);
            a->data_dir = v;
        } else if ((v = opt_value(argc, argv, &i, "--shuffle_seed", &m)) || m) {
            long seed;
            if (!parse_long(v, &seed, 0)) return bad("bad value for", arg);
            a->shuffle_seed = (unsigned long)seed;
        } else if ((v = opt_value(argc, argv, &i, "--learning_rate", &m)) || m) {
            char *end;
            if (!v || !*v || (a->learning_rate = strtod(v, &end), *end) || !(a->learning_rate > 0))
                return bad("bad value for", arg);
        } else {
            return bad("unknown option", arg);
        }
    }
    if (!a->synthetic && !a->data_dir) {
        fprintf(stderr, "%s: give --synthetic_data or --data_dir=DIR\n", prog);
        usage(stderr);
        return 2;
    }
    if (a->arch == RESNET50 && a->image_size < 32) {
        fprintf(stderr, "%s: --image_size %ld is too small for ResNet-50 (at least 32, as Keras)\n", prog, a->image_size);
        return 2;
    }
    if (a->synthetic && a->train_num_samples < 1) {
        fprintf(stderr, "%s: --train_num_samples must be at least 1 with --synthetic_data\n", prog);
        return 2;
    }
    return 0;
}

/* ---- synthetic data: element i is (image from hash(seed, i), label hash(seed, i) % classes);
 * the dataset holds only the indices, the images are made on the prefetch thread. ---- */
#define SYNTHETIC_SEED 0x5eed2024u

static uint64_t splitmix(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

typedef struct synth {
    int64_t pixels; /* S * S * 3 */
} synth;

static int synth_image(const float *x_in, const float *y_in, float *x_out, float *y_out, void *user) {
    const synth *s = user;
    uint64_t state = splitmix(SYNTHETIC_SEED ^ ((uint64_t)x_in[0] << 20));
    for (int64_t p = 0; p < s->pixels; p++) {
        state = splitmix(state);
        x_out[p] = (float)(state >> 40) * (2.0f / 16777216.0f) - 1.0f; /* uniform [-1, 1) */
    }
    *y_out = *y_in;
    return 0;
}

static tnt_dataset *synthetic(const args *a, int64_t first, int64_t n, synth *s) {
    float *idx = malloc((size_t)n * sizeof(float)), *labels = malloc((size_t)n * sizeof(float));
    tnt_dataset *ds = NULL;
    if (idx && labels) {
        for (int64_t i = 0; i < n; i++) {
            idx[i] = (float)(first + i);
            labels[i] = (float)(splitmix(SYNTHETIC_SEED + 7 * (uint64_t)(first + i)) % (uint64_t)a->num_classes);
        }
        ds = tnt_dataset_from_arrays(idx, TNT_SHAPE(1), labels, TNT_SHAPE(), n, true);
        tnt_shape img = TNT_SHAPE(a->image_size, a->image_size, 3);
        ds = tnt_dataset_map(ds, synth_image, s, &img, NULL);
    }
    free(idx), free(labels);
    return ds;
}

/* ---- NPY data ---- */
static int scale_u8(const float *x, const float *y, float *xo, float *yo, void *user) {
    int64_t n = *(const int64_t *)user;
    for (int64_t i = 0; i < n; i++) xo[i] = x[i] * (1.0f / 255.0f);
    *yo = *y;
    return 0;
}

/* true when the NPY file's dtype is uint8 ('|u1'); the header is at most a few hundred bytes */
static bool npy_is_u8(const char *path) {
    char head[512] = {0};
    FILE *f = fopen(path, "rb");
    if (!f) return false;
    size_t n = fread(head, 1, sizeof head - 1, f);
    fclose(f);
    for (size_t i = 0; i + 4 < n; i++)
        if (!memcmp(head + i, "'|u1'", 5)) return true;
    return false;
}

static tnt_dataset *from_npy(const args *a, const char *split, int64_t take, int64_t *pixels) {
    char xp[4096], yp[4096];
    snprintf(xp, sizeof xp, "%s/%s_x.npy", a->data_dir, split);
    snprintf(yp, sizeof yp, "%s/%s_y.npy", a->data_dir, split);
    tnt_dataset *ds = tnt_dataset_from_npy(xp, yp);
    if (!ds) return NULL;
    tnt_shape s = tnt_dataset_x_shape(ds);
    if (s.ndim != 3 || s.dim[0] != a->image_size || s.dim[1] != a->image_size || s.dim[2] != 3) {
        char buf[64];
        fprintf(stderr, "%s: %s holds images of shape %s, expected (%ld, %ld, 3) (--image_size)\n", prog, xp,
                tnt_shape_str(s, buf, sizeof buf), a->image_size, a->image_size);
        tnt_dataset_free(ds);
        return NULL;
    }
    if (take > 0) ds = tnt_dataset_take(ds, take);
    if (npy_is_u8(xp)) ds = tnt_dataset_map(ds, scale_u8, pixels, NULL, NULL);
    return ds;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv) {
    args a;
    int rc = parse_args(argc, argv, &a);
    if (rc) return rc < 0 ? 0 : rc;
    if (tnt_init(&argc, &argv) != TNT_OK) {
        fprintf(stderr, "%s: %s\n", prog, tnt_last_error());
        return 1;
    }
    bool master = tnt_is_master_rank();
    synth syn = {.pixels = a.image_size * a.image_size * 3};
    int64_t pixels = syn.pixels;
    tnt_model *model = NULL;
    tnt_dataset *train = NULL, *val = NULL;
    tnt_history *history = NULL;
    rc = 1;

    model = resnet_build(&(resnet_config){.arch = a.arch, .classes = (int)a.num_classes, .image_size = (int)a.image_size});
    if (!model || tnt_distribute(model)) goto fail; /* the one line that makes it data-parallel */

    /* the training data first: the schedule needs the epoch size */
    if (a.synthetic) {
        train = synthetic(&a, 0, a.train_num_samples, &syn);
        if (a.val_num_samples > 0) val = synthetic(&a, a.train_num_samples, a.val_num_samples, &syn);
    } else {
        train = from_npy(&a, "train", a.train_num_samples, &pixels);
        if (train && a.val_num_samples > 0) val = from_npy(&a, "val", a.val_num_samples, &pixels);
    }
    if (!train || (a.val_num_samples > 0 && !val)) goto fail;
    int64_t epoch_size = tnt_dataset_cardinality(train);
    if (epoch_size < a.batch_size) {
        if (master)
            fprintf(stderr, "%s: %lld training samples, fewer than one global batch of %ld\n", prog,
                    (long long)epoch_size, a.batch_size);
        rc = 2;
        goto out;
    }
    train = tnt_dataset_shuffle(train, epoch_size, a.shuffle_seed);
    train = tnt_dataset_batch(train, a.batch_size, a.drop_remainder);
    train = tnt_dataset_prefetch(train, 2);
    if (val) val = tnt_dataset_prefetch(tnt_dataset_batch(val, a.batch_size, false), 2);
    if (!train || (a.val_num_samples > 0 && !val)) goto fail;

    /* TF official ResNet's LR_SCHEDULE, as the tutorial: (multiplier, epoch) = (1.0, 5 warm-up),
     * (0.1, 30), (0.01, 60), (0.001, 80), on base_lr * batch_size / 256 */
    static const int64_t boundaries[3] = {30, 60, 80};
    static const float multipliers[4] = {1.0f, 0.1f, 0.01f, 0.001f};
    tnt_optimizer *opt = tnt_optimizer_new("sgd", &(tnt_optimizer_opts){.momentum = 0.9f});
    if (!opt) goto fail;
    if (tnt_optimizer_set_schedule(opt, tnt_piecewise_constant_decay_with_warmup((float)a.learning_rate, a.batch_size,
                                                                                 epoch_size, 5, boundaries, multipliers, 3))) {
        tnt_optimizer_free(opt);
        goto fail;
    }
    if (tnt_compile(model, &(tnt_compile_opts){.optimizer = opt, .loss = TNT_SPARSE_CATEGORICAL_CROSSENTROPY,
                                               .metrics = "sparse_categorical_accuracy"}))
        goto fail;
    if (master && a.verbose) {
        printf("%s: %lld parameters, %d rank(s) x %d thread(s), global batch %ld, %lld training samples (%s)\n",
               a.arch_name, (long long)tnt_model_count_params(model), tnt_get_size(), omp_get_max_threads(),
               a.batch_size, (long long)epoch_size, a.synthetic ? "synthetic" : a.data_dir);
        fflush(stdout);
    }

    double t0 = now();
    if (tnt_fit(model, train, &(tnt_fit_opts){.epochs = (int)a.train_epochs, .verbose = (int)a.verbose,
                                              .validation_data = val, .validation_freq = (int)a.val_freq},
                &history))
        goto fail;
    double dt = now() - t0;
    if (master) {
        int last = tnt_history_epochs(history) - 1;
        int64_t per_epoch = a.drop_remainder ? epoch_size / a.batch_size * a.batch_size : epoch_size;
        printf("%s: %ld epoch(s) in %.1f s, %.1f samples/s; loss %.4f, accuracy %.4f", a.arch_name, a.train_epochs, dt,
               (double)per_epoch * (double)a.train_epochs / dt, tnt_history_get(history, "loss", last),
               tnt_history_get(history, "sparse_categorical_accuracy", last));
        double vl = tnt_history_get(history, "val_loss", last);
        if (vl == vl)
            printf("; val_loss %.4f, val_accuracy %.4f", vl, tnt_history_get(history, "val_sparse_categorical_accuracy", last));
        printf("\n");
    }
    rc = 0;
    goto out;
fail:
    fprintf(stderr, "%s: rank %d: %s\n", prog, tnt_get_rank(), tnt_last_error());
out:
    tnt_history_free(history);
    tnt_dataset_free(train);
    tnt_dataset_free(val);
    tnt_model_free(model);
    tnt_finalize();
    return rc;
}

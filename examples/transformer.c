/* transformer.c: the Tarantella Transformer tutorial (transformer_tnt.py) in C, on synthetic data.
 *   transformer [--param_set=tiny|base|big] [--batch_size=N] [--train_epochs=E]
 *               [--epochs_between_evals=K] [--max_length=T] [--num_samples=N] [--task=reverse|copy]
 *               [--learning_rate=LR] [--warmup_steps=W] [--seed=S] [--eval_samples=N] [--verbose=2]
 *
 * The model is Model Garden's Transformer (zoo/transformer.h: shared embedding and
 * logits weights, sinusoidal positions, pre-layer-norm, dropout 0.1; base and big are
 * BASE_PARAMS/BIG_PARAMS, tiny is ours and trains in seconds). The data: random "sentences" of
 * ids 2..vocab-1 with random lengths 1..max_length-2, an end-of-sentence id 1, padded with 0 to
 * max_length; the target is the sentence reversed (or copied) followed by 1.
 *
 * As in the tutorial, the dataset is distributed by hand (data_pipeline.py):
 *   micro_batch_size = batch_size / num_ranks
 *   dataset = dataset.padded_batch(micro_batch_size, drop_remainder=True).shard(num_ranks, rank)
 * i.e. rank r takes micro-batches r, r + size, ...: its contiguous share of every global batch.
 * The model is wrapped with tnt_distribute and fit runs with no_distribute (the gradient is still
 * the mean over all ranks' samples), in a loop of fit(initial_epoch=e, epochs=e+K) with an
 * evaluation in between: the validation loss over every rank's validation shard, and greedy
 * decoding of the first eval_samples validation sentences on the master only (the tutorial
 * translates with a serial model on the master).
 *
 * Optimizer and schedule: Model Garden's Adam (beta_1 0.9, beta_2 0.997, epsilon 1e-9) with its
 * LearningRateSchedule, learning_rate * hidden^-0.5 * min(step/warmup, 1) / sqrt(max(step,
 * warmup)), set before every step by a callback (--learning_rate is the schedule's constant: 2.0 for
 * base and big, 0.5 for tiny).
 * Loss: sparse categorical cross-entropy on the (T, vocab) logits, from logits, label smoothing
 * 0.1 (Keras's y*(1-s) + s/vocab; Model Garden smooths over vocab-1 classes and subtracts the
 * constant entropy floor, which shifts the reported value but not the gradient's direction), and
 * ignore_class 0 (the mean over the non-padding positions of the global batch).
 *
 * Run on 2 ranks: build/bin/tarantella -n 2 -- build/bin/transformer --param_set=tiny */
#include "transformer.h"

#include <tarantella.h>

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct args {
    const char *param_set, *task;
    long batch_size, train_epochs, between, max_length, num_samples, warmup_steps, eval_samples, verbose;
    unsigned long seed;
    double learning_rate;
} args;

static int usage(const char *prog, const char *bad, const char *why) {
    if (bad) fprintf(stderr, "%s: %s '%s'\n", prog, why ? why : "unknown or malformed option", bad);
    fprintf(stderr,
            "usage: %s [--param_set=tiny|base|big] [--batch_size=N] [--train_epochs=E]\n"
            "          [--epochs_between_evals=K] [--max_length=T] [--num_samples=N] [--task=reverse|copy]\n"
            "          [--learning_rate=LR] [--warmup_steps=W] [--seed=S] [--eval_samples=N] [--verbose=0|1|2]\n"
            "  --param_set      tiny (vocab 64, hidden 64, 2+2 layers; default), base or big (Model Garden)\n"
            "  --batch_size     sentences per global batch, a multiple of the number of ranks\n"
            "                   (default: the param set's: tiny 64, base/big 8)\n"
            "  --max_length     padded length of source and target (default: tiny 16, base/big 256)\n"
            "  --num_samples    training sentences (default 4096); validation: a tenth more\n"
            "  --learning_rate  the constant of Model Garden's schedule (base/big 2.0, tiny 0.5)\n"
            "  --warmup_steps   its warm-up (tiny 100, base/big 16000)\n",
            prog);
    return 2;
}

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
    if (*s == '\0' || *end != '\0' || !(v > 0) || v > 1e6) return false;
    *out = v;
    return true;
}

/* 0: ok, 2: bad flags, -1: --help */
static int parse_args(int argc, char **argv, args *a) {
    *a = (args){.param_set = "tiny", .task = "reverse", .train_epochs = 10, .between = 1, .num_samples = 4096,
                .eval_samples = 64, .verbose = 2, .seed = 42};
    for (int i = 1; i < argc; i++) {
        const char *v;
        long seed;
        bool ok = true;
        const char *why = NULL;
        if ((v = opt_value(argc, argv, &i, "--param_set"))) {
            a->param_set = v;
            ok = transformer_params_by_name(v) != NULL;
            why = "--param_set must be tiny, base or big, not";
        } else if ((v = opt_value(argc, argv, &i, "--task"))) {
            a->task = v;
            ok = !strcmp(v, "reverse") || !strcmp(v, "copy");
            why = "--task must be reverse or copy, not";
        } else if ((v = opt_value(argc, argv, &i, "--batch_size"))) ok = parse_long(v, &a->batch_size, 1);
        else if ((v = opt_value(argc, argv, &i, "--train_epochs"))) ok = parse_long(v, &a->train_epochs, 1);
        else if ((v = opt_value(argc, argv, &i, "--epochs_between_evals"))) ok = parse_long(v, &a->between, 1);
        else if ((v = opt_value(argc, argv, &i, "--max_length"))) ok = parse_long(v, &a->max_length, 3);
        else if ((v = opt_value(argc, argv, &i, "--num_samples"))) ok = parse_long(v, &a->num_samples, 1);
        else if ((v = opt_value(argc, argv, &i, "--warmup_steps"))) ok = parse_long(v, &a->warmup_steps, 1);
        else if ((v = opt_value(argc, argv, &i, "--eval_samples"))) ok = parse_long(v, &a->eval_samples, 0);
        else if ((v = opt_value(argc, argv, &i, "--verbose"))) ok = parse_long(v, &a->verbose, 0) && a->verbose <= 2;
        else if ((v = opt_value(argc, argv, &i, "--learning_rate"))) ok = parse_double(v, &a->learning_rate);
        else if ((v = opt_value(argc, argv, &i, "--seed"))) {
            ok = parse_long(v, &seed, 0);
            a->seed = (unsigned long)seed;
        } else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(argv[0], NULL, NULL);
            return -1;
        } else ok = false;
        if (!ok) return usage(argv[0], v ? v : argv[i], v ? why : NULL);
    }
    return 0;
}

enum { EOS = 1 };

static uint64_t lcg(uint64_t *s) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return *s >> 33;
}

/* n sentence pairs: x (n, 2T) = source then target ids, y (n, T) = the target (the labels). */
static void make_data(float *x, float *y, long n, int T, int vocab, bool reverse, uint64_t seed) {
    uint64_t s = seed * 0x9e3779b97f4a7c15ull + 7;
    for (long i = 0; i < n; i++) {
        float *src = x + i * 2 * T, *tgt = src + T;
        int len = 1 + (int)(lcg(&s) % (uint64_t)(T - 2));
        memset(src, 0, sizeof(float) * 2 * (size_t)T);
        for (int t = 0; t < len; t++) src[t] = (float)(2 + lcg(&s) % (uint64_t)(vocab - 2));
        src[len] = EOS;
        for (int t = 0; t < len; t++) tgt[t] = reverse ? src[len - 1 - t] : src[t];
        tgt[len] = EOS;
        memcpy(y + i * T, tgt, sizeof(float) * (size_t)T);
    }
}

/* The tutorial's pipeline: padded_batch(micro, drop_remainder) + shard(size, rank), then shuffled
 * within the shard every epoch. Returns this rank's batched dataset (steps = n / global batch). */
static tnt_dataset *shard(const float *x, const float *y, long n, int T, long global, int size, int rank,
                          bool shuffle, uint64_t seed) {
    const long micro = global / size, nb = n / global, k = nb * micro;
    if (nb == 0) return NULL;
    float *xs = malloc(sizeof(float) * (size_t)(k * 2 * T)), *ys = malloc(sizeof(float) * (size_t)(k * T));
    if (!xs || !ys) {
        free(xs), free(ys);
        return NULL;
    }
    long j = 0;
    for (long b = 0; b < nb; b++) /* micro-batch b * size + rank */
        for (long i = 0; i < micro; i++, j++) {
            long src = (b * size + rank) * micro + i;
            memcpy(xs + j * 2 * T, x + src * 2 * T, sizeof(float) * 2 * (size_t)T);
            memcpy(ys + j * T, y + src * T, sizeof(float) * (size_t)T);
        }
    tnt_dataset *ds = tnt_dataset_from_arrays(xs, TNT_SHAPE(2 * T), ys, TNT_SHAPE(T), k, true);
    free(xs), free(ys);
    if (shuffle) ds = tnt_dataset_shuffle(ds, k, seed);
    return tnt_dataset_batch(ds, micro, true);
}

/* Greedy decoding with the training model (teacher forcing replaced by its own predictions: the
 * causal decoder reads the targets shifted right, so position t sees the ids decided before it).
 * Returns the exact-match rate and writes the token accuracy over the reference's positions. */
static tnt_status greedy_eval(tnt_model *m, const float *x, long n, int T, int vocab, double *exact, double *tokens) {
    *exact = *tokens = 0;
    if (n == 0) return TNT_OK;
    tnt_tensor in = {.shape = TNT_SHAPE(n, 2 * T), .data = malloc(sizeof(float) * (size_t)(n * 2 * T))};
    if (!in.data) return TNT_ERR_NOMEM;
    for (long i = 0; i < n; i++) {
        memcpy(in.data + i * 2 * T, x + i * 2 * T, sizeof(float) * (size_t)T); /* source */
        memset(in.data + i * 2 * T + T, 0, sizeof(float) * (size_t)T);           /* no target yet */
    }
    bool *done = calloc((size_t)n, sizeof *done);
    tnt_status s = done ? TNT_OK : TNT_ERR_NOMEM;
    for (int t = 0; t < T && s == TNT_OK; t++) {
        tnt_tensor *out = NULL;
        if ((s = tnt_predict_on_batch(m, &in, &out)) != TNT_OK) break;
        for (long i = 0; i < n; i++) {
            if (done[i]) continue;
            const float *l = out->data + (i * T + t) * vocab;
            int best = 1;
            for (int v = 2; v < vocab; v++) best = l[v] > l[best] ? v : best; /* never predict padding */
            in.data[i * 2 * T + T + t] = (float)best;
            done[i] = best == EOS;
        }
        tnt_tensor_free(out);
    }
    long match = 0, correct = 0, total = 0;
    for (long i = 0; s == TNT_OK && i < n; i++) {
        const float *ref = x + i * 2 * T + T, *hyp = in.data + i * 2 * T + T;
        bool same = true;
        for (int t = 0; t < T && ref[t] != 0; t++) {
            total++;
            correct += hyp[t] == ref[t];
            same &= hyp[t] == ref[t];
        }
        match += same;
    }
    *exact = (double)match / (double)n;
    *tokens = total ? (double)correct / (double)total : 0;
    free(done);
    free(in.data);
    return s;
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
    transformer_params p = *transformer_params_by_name(a.param_set);
    if (a.max_length) p.max_length = (int)a.max_length;
    if (a.batch_size) p.batch_size = (int)a.batch_size;
    if (a.warmup_steps) p.learning_rate_warmup_steps = a.warmup_steps;
    if (a.learning_rate > 0) p.learning_rate = (float)a.learning_rate;
    const int T = p.max_length, V = p.vocab_size;
    if (tnt_init(&argc, &argv) != TNT_OK) {
        fprintf(stderr, "transformer: %s\n", tnt_last_error());
        return 1;
    }
    const int size = tnt_get_size(), rank = tnt_get_rank();
    const long n_eval = a.num_samples / 10 > p.batch_size ? a.num_samples / 10 : p.batch_size;
    if (p.batch_size % size || a.num_samples < p.batch_size) {
        if (tnt_is_master_rank())
            fprintf(stderr, "transformer: --batch_size %d must be a multiple of the %d ranks and at most "
                    "--num_samples %ld\n", p.batch_size, size, a.num_samples);
        tnt_finalize();
        return 2;
    }

    tnt_model *model = NULL;
    tnt_dataset *train = NULL, *val = NULL;
    float *x = malloc(sizeof(float) * (size_t)((a.num_samples + n_eval) * 2 * T));
    float *y = malloc(sizeof(float) * (size_t)((a.num_samples + n_eval) * T));
    const float *xv = x + a.num_samples * 2 * T, *yv = y + a.num_samples * T;
    rc = 1;
    if (!x || !y) goto fail;
    /* the same data on every rank (same seed); each rank keeps only its shard */
    make_data(x, y, a.num_samples + n_eval, T, V, !strcmp(a.task, "reverse"), a.seed);
    train = shard(x, y, a.num_samples, T, p.batch_size, size, rank, true, a.seed);
    val = shard(xv, yv, n_eval, T, p.batch_size, size, rank, false, 0);
    if (!train || !val) goto fail;

    model = transformer_model(&p, T, NULL);
    if (!model || tnt_distribute(model)) goto fail;
    tnt_optimizer *opt = tnt_optimizer_new("adam", &(tnt_optimizer_opts){.learning_rate = 1e-9f, .beta_1 = p.adam_beta1,
                                                                         .beta_2 = p.adam_beta2, .epsilon = p.adam_epsilon});
    if (tnt_compile(model, &(tnt_compile_opts){.optimizer = opt, .loss = TNT_SPARSE_CATEGORICAL_CROSSENTROPY,
                                               .from_logits = true, .label_smoothing = p.label_smoothing,
                                               .has_ignore_class = true, .ignore_class = 0, .seed = a.seed}))
        goto fail;
    if (transformer_init_weights(model, &p, a.seed)) goto fail;
    if (tnt_is_master_rank()) {
        if (a.verbose) tnt_model_summary(model, stdout);
        printf("Transformer %s: %lld parameters (Model Garden count %lld), %s task, max_length %d, "
               "global batch %d = %d ranks x %d, %ld steps per epoch, %d threads per rank\n",
               p.name, (long long)tnt_model_count_params(model), (long long)transformer_model_garden_params(&p),
               a.task, T, p.batch_size, size, p.batch_size / size, a.num_samples / p.batch_size,
               omp_get_max_threads());
        fflush(stdout);
    }
    tnt_callback lr = transformer_lr_callback(&p);
    for (long e = 0; e < a.train_epochs; e += a.between) {
        long end = e + a.between < a.train_epochs ? e + a.between : a.train_epochs;
        tnt_history *h = NULL;
        double t0 = now();
        /* as our dataset is distributed by hand, disable the automatic distribution */
        if (tnt_fit(model, train, &(tnt_fit_opts){.initial_epoch = (int)e, .epochs = (int)end, .no_distribute = true,
                                                  .verbose = (int)a.verbose, .callbacks = &lr, .n_callbacks = 1},
                    &h))
            goto fail;
        double dt = now() - t0, loss = tnt_history_get(h, "loss", tnt_history_epochs(h) - 1);
        tnt_history_free(h);
        tnt_logs logs;
        if (tnt_evaluate(model, val, &(tnt_eval_opts){.no_distribute = true}, &logs)) goto fail;
        double val_loss = NAN;
        tnt_logs_get(&logs, "loss", &val_loss);
        if (tnt_is_master_rank()) { /* serial inference on the master only, as the tutorial's BLEU */
            double exact, tok;
            long ne = a.eval_samples < n_eval ? a.eval_samples : n_eval;
            if (greedy_eval(model, xv, ne, T, V, &exact, &tok)) /* the other ranks go on: report, don't stop */
                fprintf(stderr, "transformer: greedy decoding failed: %s\n", tnt_last_error());
            printf("epoch %ld: loss %.4f, val_loss %.4f, greedy decoding of %ld validation sentences: token "
                   "accuracy %.3f, exact %.3f; lr %.2e; %.1f sentences/s\n",
                   end, loss, val_loss, ne, tok, exact,
                   (double)tnt_optimizer_get_lr(tnt_model_optimizer(model)),
                   (double)((end - e) * (a.num_samples / p.batch_size) * p.batch_size) / dt);
            fflush(stdout);
        }
    }
    rc = 0;
fail:
    if (rc) fprintf(stderr, "transformer (rank %d): %s\n", rank, tnt_last_error());
    tnt_dataset_free(train);
    tnt_dataset_free(val);
    tnt_model_free(model);
    free(x), free(y);
    tnt_finalize();
    return rc;
}

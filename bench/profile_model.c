/* profile_model.c: where a training step of a benchmark model spends its time, by layer class:
 * every layer's forward and backward are wrapped with timers.
 *   profile_model [--model resnet50|resnet34|resnet18|transformer|mlp|lenet5] [--batch B]
 *                 [--image S] [--steps 3] [--warmup 1] [--policy float32|mixed_bfloat16] [--clock wall|cpu]
 * resnet*: synthetic images of S x S (default 224), batch 16; transformer: the benchmark's encoder
 * classifier (the torch peer's model), sequences of 128 tokens, batch 32; mlp, lenet5: the
 * benchmark's (zoo/classic.h) on synthetic 28x28x1 images, batch 64. Prints, over the timed
 * steps: the step time, forward and backward time per layer class, the slowest layers, and the
 * rest (loss, optimizer, data). Threads from OMP_NUM_THREADS. Under TNT_DEVICE=gpu the layers' device
 * paths are timed, the stream drained around each (the GPU's time per layer).
 * --table FILE also writes what the SMPI scale study (bench/scale) charges per rank: the step
 * time, one optimizer pass over all weights, and per graph node, in forward order, its layer's
 * forward and backward seconds and the gradient prefix complete after its backward. */
#include <tarantella.h>

#include "classic.h"
#include "gpu/gpu.h"
#include "layers/layer.h"
#include "model/model.h"
#include "optimizers/optimizer.h"
#include "resnet.h"
#include "transformer.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* --clock cpu: the process's CPU time instead of the wall clock (on a machine shared with other
 * jobs, the time this process ran; meant for 1 thread) */
static clockid_t clock_id = CLOCK_MONOTONIC;

static double now(void) {
    struct timespec ts;
    clock_gettime(clock_id, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#define MAX_LAYERS 512
typedef struct wrapped {
    tnt_layer *l;
    const tnt__layer_ops *orig;
    tnt__layer_ops copy;
    tnt__gpu_ops gpu_copy; /* the device path, wrapped the same way */
    double fwd, bwd;
} wrapped;
static wrapped W[MAX_LAYERS];
static int n_wrapped;
static bool timing;

static wrapped *find(tnt_layer *l) {
    for (int i = 0; i < n_wrapped; i++)
        if (W[i].l == l) return &W[i];
    abort();
}

static tnt_status fwd(tnt_layer *l, void *plan, const tnt__fwd_args *a) {
    wrapped *w = find(l);
    double t = now();
    tnt_status s = w->orig->forward(l, plan, a);
    if (timing) w->fwd += now() - t;
    return s;
}

static tnt_status bwd(tnt_layer *l, void *plan, const tnt__bwd_args *a) {
    wrapped *w = find(l);
    double t = now();
    tnt_status s = w->orig->backward(l, plan, a);
    if (timing) w->bwd += now() - t;
    return s;
}

/* On the device a layer's work is queued: the stream is drained before and after, so that its
 * time is the layer's own (the drains add a few microseconds per layer). */
static tnt_status gpu_fwd(tnt_layer *l, void *plan, const tnt__fwd_args *a) {
    wrapped *w = find(l);
    tnt_status s = tnt__gpu_sync(TNT__GPU_COMPUTE);
    double t = now();
    if (s == TNT_OK) s = w->orig->gpu->forward(l, plan, a);
    if (s == TNT_OK) s = tnt__gpu_sync(TNT__GPU_COMPUTE);
    if (timing) w->fwd += now() - t;
    return s;
}

static tnt_status gpu_bwd(tnt_layer *l, void *plan, const tnt__bwd_args *a) {
    wrapped *w = find(l);
    tnt_status s = tnt__gpu_sync(TNT__GPU_COMPUTE);
    double t = now();
    if (s == TNT_OK) s = w->orig->gpu->backward(l, plan, a);
    if (s == TNT_OK) s = tnt__gpu_sync(TNT__GPU_COMPUTE);
    if (timing) w->bwd += now() - t;
    return s;
}

static int by_total(const void *a, const void *b) {
    const wrapped *x = a, *y = b;
    double d = (y->fwd + y->bwd) - (x->fwd + x->bwd);
    return d > 0 ? 1 : d < 0 ? -1 : 0;
}

/* One optimizer pass over all weights (the weights change: called after the timed steps). */
static double optimizer_seconds(tnt_model *m) {
    enum { REPEAT = 3 };
    double t0 = now();
    for (int i = 0; i < REPEAT; i++) tnt__optimizer_apply(m->optimizer, m->params, m->grads, 0, m->n_params);
    return (now() - t0) / REPEAT;
}

/* The scale study's table (bench/scale/scale_sim.c reads it): a layer's times go to its first
 * graph node (a layer called twice is counted once, with both calls' time). */
static tnt_status write_table(const char *path, tnt_model *m, const char *model, long batch, double step, long steps) {
    FILE *f = fopen(path, "w");
    if (!f) return tnt__error(TNT_ERR_IO, "profile_model: cannot write %s", path);
    fprintf(f, "# profile_model --table: %s, batch %ld, %d thread(s); seconds per step\n", model, batch, omp_get_max_threads());
    fprintf(f, "model %s\nbatch %ld\nthreads %d\nstep %.6e\nparams %lld\noptimizer %.6e\nnodes %d\n", model, batch,
            omp_get_max_threads(), step, (long long)m->n_params, optimizer_seconds(m), m->n_nodes);
    fprintf(f, "# node forward_s backward_s grad_end layer\n");
    bool *seen = calloc((size_t)n_wrapped + 1, 1);
    for (int i = 0; i < m->n_nodes; i++) {
        double fw = 0, bw = 0;
        for (int k = 0; k < n_wrapped; k++)
            if (W[k].l == m->nodes[i].layer && seen && !seen[k]) {
                fw = W[k].fwd / (double)steps, bw = W[k].bwd / (double)steps;
                seen[k] = true;
            }
        fprintf(f, "%d %.6e %.6e %lld %s\n", i, fw, bw, (long long)m->nodes[i].grad_end, m->nodes[i].layer->name);
    }
    free(seen);
    return fclose(f) == 0 ? TNT_OK : tnt__error(TNT_ERR_IO, "profile_model: cannot write %s", path);
}

int main(int argc, char **argv) {
    const char *model = "resnet50";
    const char *policy = "float32";
    const char *table = NULL;
    long batch = 0, image = 224, steps = 3, warmup = 1;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--model")) model = argv[i + 1];
        else if (!strcmp(argv[i], "--batch")) batch = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--image")) image = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--steps")) steps = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--warmup")) warmup = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--policy")) policy = argv[i + 1];
        else if (!strcmp(argv[i], "--table")) table = argv[i + 1];
        else if (!strcmp(argv[i], "--clock") && !strcmp(argv[i + 1], "cpu")) clock_id = CLOCK_PROCESS_CPUTIME_ID;
        else {
            fprintf(stderr, "usage: %s [--model resnet50|resnet34|resnet18|transformer|mlp|lenet5] [--batch B] [--image S] "
                    "[--steps N] [--warmup W] [--policy float32|mixed_bfloat16] [--clock wall|cpu] [--table FILE]\n", argv[0]);
            return 2;
        }
    }
    bool transformer = !strcmp(model, "transformer");
    bool small = !strcmp(model, "mlp") || !strcmp(model, "lenet5"); /* 28x28x1 images, 10 classes */
    resnet_arch arch = transformer || small ? 0 : resnet_arch_from_name(model);
    if (transformer) image = 128; /* the sequence length */
    if (small) image = 28;
    if (!batch) batch = transformer ? 32 : small ? 64 : 16;
    if ((!transformer && !small && !arch) || batch < 1 || image < 1 || steps < 1 || warmup < 0 || argc % 2 == 0) {
        fprintf(stderr, "profile_model: bad arguments\n");
        return 2;
    }
    if (tnt_init(&argc, &argv) != TNT_OK) {
        fprintf(stderr, "profile_model: %s\n", tnt_last_error());
        return 1;
    }
    if (tnt_mixed_precision_set_global_policy(policy)) {
        fprintf(stderr, "profile_model: %s\n", tnt_last_error());
        return 2;
    }
    tnt_model *m = transformer ? transformer_encoder_classifier(8000, (int)image, 256, 4, 1024, 4, 2)
                   : small     ? (!strcmp(model, "mlp") ? mlp_model() : lenet5_model())
                               : resnet_build(&(resnet_config){.arch = arch, .classes = 1000, .image_size = (int)image});
    float *x = NULL, *y = NULL;
    tnt_dataset *ds = NULL;
    if (!m) goto fail;
    /* as bench_train: plain SGD for LeNet-5 (its peer), momentum 0.9 for the others */
    tnt_optimizer_opts oo = {.learning_rate = 0.01f, .momentum = strcmp(model, "lenet5") ? 0.9f : 0.0f};
    if (tnt_compile(m, &(tnt_compile_opts){.optimizer = tnt_optimizer_new("sgd", &oo), .loss = TNT_SPARSE_CATEGORICAL_CROSSENTROPY,
                                           .from_logits = transformer}))
        goto fail;
    for (int i = 0; i < m->n_layers && n_wrapped < MAX_LAYERS; i++) {
        tnt_layer *l = m->layers[i];
        if (tnt__is_input_layer(l) || l->ops->is_view) continue;
        wrapped *w = &W[n_wrapped++];
        w->l = l, w->orig = l->ops, w->copy = *l->ops;
        w->copy.forward = fwd;
        if (w->copy.backward) w->copy.backward = bwd;
        if (l->ops->gpu) {
            w->gpu_copy = *l->ops->gpu;
            w->gpu_copy.forward = gpu_fwd;
            if (w->gpu_copy.backward) w->gpu_copy.backward = gpu_bwd;
            w->copy.gpu = &w->gpu_copy;
        }
        l->ops = &w->copy;
    }
    tnt_shape sample = transformer ? TNT_SHAPE(image) : TNT_SHAPE(image, image, small ? 1 : 3);
    const long per = tnt_shape_numel(sample), n_classes = transformer ? 2 : small ? 10 : 1000;
    x = malloc((size_t)(batch * per) * sizeof(float));
    y = malloc((size_t)batch * sizeof(float));
    if (!x || !y) goto fail;
    for (long i = 0; i < batch * per; i++) /* token ids, or pixels in [-1, 1) */
        x[i] = transformer ? (float)((i * 2654435761u) % 8000) : (float)((i * 2654435761u) % 1000) / 500.0f - 1.0f;
    for (long i = 0; i < batch; i++) y[i] = (float)((i * 37) % n_classes);
    ds = tnt_dataset_repeat(tnt_dataset_batch(tnt_dataset_from_arrays(x, sample, y, TNT_SHAPE(), batch, false), batch, true), -1);
    if (!ds) goto fail;
    if (warmup && tnt_fit(m, ds, &(tnt_fit_opts){.steps_per_epoch = warmup}, NULL)) goto fail;
    timing = true;
    double t0 = now();
    if (tnt_fit(m, ds, &(tnt_fit_opts){.steps_per_epoch = steps}, NULL)) goto fail;
    double total = (now() - t0) / (double)steps;
    timing = false;

    /* per class */
    const char *classes[32];
    double cf[32] = {0}, cb[32] = {0};
    int cn[32] = {0}, nc = 0;
    double layers_total = 0;
    for (int i = 0; i < n_wrapped; i++) {
        const char *c = W[i].orig->class_name;
        int k = 0;
        while (k < nc && strcmp(classes[k], c)) k++;
        if (k == nc && nc < 32) classes[nc++] = c;
        if (k < 32) cf[k] += W[i].fwd / (double)steps, cb[k] += W[i].bwd / (double)steps, cn[k]++;
        layers_total += (W[i].fwd + W[i].bwd) / (double)steps;
    }
    printf("%s, batch %ld, %s %ld, %d thread(s): %.4f s per step (%.2f samples/s)\n", model, batch,
           transformer ? "sequence" : "image", image, omp_get_max_threads(), total, (double)batch / total);
    printf("| layer class | layers | forward s/step | backward s/step | share of step |\n|---|---|---|---|---|\n");
    for (int k = 0; k < nc; k++)
        printf("| %s | %d | %.4f | %.4f | %.1f%% |\n", classes[k], cn[k], cf[k], cb[k], 100.0 * (cf[k] + cb[k]) / total);
    printf("| rest (loss, optimizer, data, framework) | | | | %.1f%% (%.4f s) |\n", 100.0 * (total - layers_total) / total,
           total - layers_total);
    if (table && write_table(table, m, model, batch, total, steps) != TNT_OK) goto fail;
    qsort(W, (size_t)n_wrapped, sizeof *W, by_total);
    printf("\nslowest layers (s/step forward + backward):\n");
    for (int i = 0; i < 12 && i < n_wrapped; i++)
        printf("  %-22s %-20s %.4f + %.4f\n", W[i].l->name, W[i].orig->class_name, W[i].fwd / (double)steps, W[i].bwd / (double)steps);
    /* restore the ops before freeing (destroy goes through them) */
    for (int i = 0; i < n_wrapped; i++) W[i].l->ops = W[i].orig;
    tnt_dataset_free(ds);
    tnt_model_free(m);
    free(x), free(y);
    tnt_finalize();
    return 0;
fail:
    fprintf(stderr, "profile_model: %s\n", tnt_last_error());
    for (int i = 0; i < n_wrapped; i++) W[i].l->ops = W[i].orig;
    tnt_dataset_free(ds);
    tnt_model_free(m);
    free(x), free(y);
    tnt_finalize();
    return 1;
}

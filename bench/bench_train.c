/* bench_train.c: training throughput of the benchmark models, through the public API.
 *   bench_train --model lenet5|mlp|resnet50|transformer [--steps S] [--warmup W] [--batch B]
 *               [--mixed_bfloat16]
 * Threads come from OMP_NUM_THREADS. Prints one line: samples/s over the timed steps (after
 * warm-up steps) and the final loss. LeNet-5 trains on Fashion-MNIST with SGD(0.01), the MLP
 * (784-4096-4096-4096-10, 36.8M parameters) on synthetic data with SGD(0.01, momentum 0.9): the
 * same set-ups as bench/peers/torch_lenet5.py and torch_models.py. --model transformer: the
 * peer's encoder classifier (zoo/transformer.h, 5.24M parameters, seq 128) on one
 * fixed batch of random ids, SGD(0.01, momentum 0.9) on logits. The line also gives the forward
 * multiply-adds per sample, from which the benchmark counts each step's FLOPs. --mixed_bfloat16:
 * the model is built under Keras's mixed_bfloat16 global policy (policy=... in the line). */
#include <tarantella.h>

#include "classic.h"
#include "comm/comm.h"
#include "model/model.h"
#include "resnet.h"
#include "transformer.h"

#include <omp.h>
#include <sys/resource.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* CPU time of the whole process (all threads): on a machine shared with other jobs, samples per
 * CPU second tell a change in our code from a change in the load. */
static double cpu_seconds(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) + 1e-6 * (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

static int scale(const float *x, const float *y, float *xo, float *yo, void *user) {
    (void)user;
    for (int i = 0; i < 784; i++) xo[i] = x[i] * (1.0f / 255.0f);
    *yo = *y;
    return 0;
}

/* Forward multiply-adds per sample of the layers that hold the matrix products: Dense and the
 * convolutions (each output value costs the kernel's size over one output channel),
 * MultiHeadAttention (its four projections and the two products of attention). Normalization,
 * pooling and elementwise layers are not counted: this is the work a matmul ceiling bounds. */
static double forward_macs_per_sample(const tnt_model *m) {
    double macs = 0;
    for (int i = 0; i < m->n_nodes; i++) {
        const tnt_layer *l = m->nodes[i].layer;
        const char *cls = l->ops->class_name;
        const double out = (double)tnt_shape_numel(m->tensor_shape[m->nodes[i].out]);
        if (!strcmp(cls, "Dense") || !strcmp(cls, "Conv2D") || !strcmp(cls, "Conv1D")) {
            const tnt_shape k = l->weights[0].shape;
            macs += out * (double)tnt_shape_numel(k) / (double)k.dim[k.ndim - 1];
        } else if (!strcmp(cls, "MultiHeadAttention")) {
            /* kernels: query (dq, H, kd), key (dk, H, kd), value (dv, H, vd), output (H, vd, o) */
            const double tq = (double)l->in_shapes[0].dim[0], tv = (double)l->in_shapes[1].dim[0];
            double kern[4];
            int n = 0;
            for (int w = 0; w < l->n_weights && n < 4; w++)
                if (strstr(l->weights[w].name, "kernel")) kern[n++] = (double)tnt_shape_numel(l->weights[w].shape);
            const double hkd = kern[0] / (double)l->in_shapes[0].dim[1], hvd = kern[2] / (double)l->in_shapes[1].dim[1];
            macs += tq * (kern[0] + kern[3]) + tv * (kern[1] + kern[2]) + tq * tv * (hkd + hvd);
        }
    }
    return macs;
}

static tnt_model *build(const char *name) {
    /* the peer's torchvision resnet50(num_classes=1000): Keras's ResNet50 (zoo/resnet.h) */
    if (!strcmp(name, "resnet50")) return resnet50(1000, 224);
    /* the peer's encoder classifier: torch_models.py --model transformer */
    if (!strcmp(name, "transformer")) return transformer_encoder_classifier(8000, 128, 256, 4, 1024, 4, 2);
    return !strcmp(name, "lenet5") ? lenet5_model() : mlp_model();
}

int main(int argc, char **argv) {
    const char *model = "lenet5";
    long steps = 300, warmup = 20, batch = 64, allreduce_reps = 0;
    bool bf16 = false;
    for (int i = 1; i < argc; i += 2) {
        if (!strcmp(argv[i], "--mixed_bfloat16")) {
            bf16 = true;
            i--;
        } else if (i + 1 >= argc) {
            fprintf(stderr, "bench_train: %s needs a value\n", argv[i]);
            return 2;
        } else if (!strcmp(argv[i], "--model")) model = argv[i + 1];
        else if (!strcmp(argv[i], "--steps")) steps = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--warmup")) warmup = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--batch")) batch = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--allreduce")) allreduce_reps = atol(argv[i + 1]);
        else {
            fprintf(stderr, "usage: %s --model lenet5|mlp|resnet50|transformer [--steps S] [--warmup W] [--batch B] [--allreduce REPS] [--mixed_bfloat16]\n", argv[0]);
            return 2;
        }
    }
    if (strcmp(model, "lenet5") && strcmp(model, "resnet50") && strcmp(model, "mlp") && strcmp(model, "transformer")) {
        fprintf(stderr, "bench_train: unknown model '%s' (expected resnet50, lenet5, mlp or transformer)\n", model);
        return 2;
    }
    if (tnt_init(&argc, &argv) != TNT_OK) {
        fprintf(stderr, "bench_train: %s\n", tnt_last_error());
        return 1;
    }
    bool lenet = !strcmp(model, "lenet5");
    bool transformer = !strcmp(model, "transformer"); /* SGD(0.01, momentum 0.9), logits, random ids */
    tnt_model *m = NULL;
    tnt_dataset *ds = NULL;
    float *x = NULL, *y = NULL;
    if (bf16 && tnt_mixed_precision_set_global_policy("mixed_bfloat16")) goto fail;
    if (!(m = build(model)) || tnt_distribute(m)) goto fail;
    tnt_optimizer_opts oo = {.learning_rate = 0.01f, .momentum = lenet ? 0.0f : 0.9f};
    if (tnt_compile(m, &(tnt_compile_opts){.optimizer = tnt_optimizer_new("sgd", &oo),
                                           .loss = TNT_SPARSE_CATEGORICAL_CROSSENTROPY,
                                           .from_logits = transformer}))
        goto fail;
    if (lenet) {
        ds = tnt_dataset_from_idx("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz",
                                  "/usr/share/datasets/fashion-mnist/train-labels-idx1-ubyte.gz");
        ds = tnt_dataset_map(ds, scale, NULL, NULL, NULL);
        ds = tnt_dataset_shuffle(ds, 60000, 42);
    } else if (transformer) { /* one fixed batch of random ids (0..7999) and labels, as the peer */
        x = malloc((size_t)batch * 128 * sizeof(float));
        y = malloc((size_t)batch * sizeof(float));
        if (!x || !y) goto fail;
        uint64_t r = 0x9e3779b97f4a7c15ull;
        for (long i = 0; i < batch * 128; i++) {
            r = r * 6364136223846793005ull + 1442695040888963407ull;
            x[i] = (float)((r >> 33) % 8000);
        }
        for (long i = 0; i < batch; i++) y[i] = (float)(i % 2);
        ds = tnt_dataset_from_arrays(x, TNT_SHAPE(128), y, TNT_SHAPE(), batch, false);
    } else if (!strcmp(model, "resnet50")) {
        /* one fixed batch of synthetic 224x224x3 images in [-1, 1) and labels, SGD(0.01, momentum
         * 0.9): torch_models.py --model resnet50 */
        const long px = 224 * 224 * 3;
        x = malloc((size_t)(batch * px) * sizeof(float));
        y = malloc((size_t)batch * sizeof(float));
        if (!x || !y) goto fail;
        for (long i = 0; i < batch * px; i++) x[i] = (float)((i * 2654435761u) % 1000) / 500.0f - 1.0f;
        for (long i = 0; i < batch; i++) y[i] = (float)((i * 37) % 1000);
        ds = tnt_dataset_from_arrays(x, TNT_SHAPE(224, 224, 3), y, TNT_SHAPE(), batch, false);
    } else {
        x = malloc((size_t)batch * 784 * sizeof(float));
        y = malloc((size_t)batch * sizeof(float));
        if (!x || !y) goto fail;
        for (long i = 0; i < batch * 784; i++) x[i] = (float)((i * 2654435761u) % 1000) / 500.0f - 1.0f;
        for (long i = 0; i < batch; i++) y[i] = (float)(i % 10);
        ds = tnt_dataset_from_arrays(x, TNT_SHAPE(28, 28, 1), y, TNT_SHAPE(), batch, false);
    }
    ds = tnt_dataset_prefetch(tnt_dataset_repeat(tnt_dataset_batch(ds, batch, true), -1), 2);
    if (!ds) goto fail;
    tnt_history *h = NULL;
    if (warmup > 0 && tnt_fit(m, ds, &(tnt_fit_opts){.epochs = 1, .steps_per_epoch = warmup}, &h)) goto fail;
    tnt_history_free(h);
    double t0 = now(), c0 = cpu_seconds();
    if (tnt_fit(m, ds, &(tnt_fit_opts){.epochs = 1, .steps_per_epoch = steps}, &h)) goto fail;
    double dt = now() - t0, cpu = cpu_seconds() - c0;
    double comm = 0, exposed = 0;
    int buckets = 0;
    if (m->reducer) {
        tnt__reducer_stats(m->reducer, &comm, &exposed, NULL);
        buckets = tnt__reducer_num_buckets(m->reducer);
    }
    /* hidden share: the part of allreduce time the compute thread did not wait for */
    if (tnt_is_master_rank())
        printf("tnt %s %s policy=%s params=%lld ranks=%d threads=%d batch=%ld samples_per_s=%.1f loss=%.4f "
               "cpu_samples_per_s=%.1f buckets=%d comm_s=%.3f exposed_s=%.3f hidden=%.2f fwd_macs_per_sample=%.0f device=%s\n",
               tnt_version(), model, tnt_mixed_precision_global_policy(), (long long)tnt_model_count_params(m), tnt_get_size(),
               omp_get_max_threads(), batch, (double)steps * (double)batch / dt,
               tnt_history_get(h, "loss", 0), (double)steps * (double)batch / cpu, buckets, comm, exposed,
               comm > 0 ? 1.0 - (exposed < comm ? exposed : comm) / comm : 0.0, forward_macs_per_sample(m),
               m->on_device ? "gpu" : "cpu");
    tnt_history_free(h);
    if (transformer && tnt_is_master_rank()) { /* peak RSS of this rank (the ranks are alike) */
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        printf("rank0_maxrss_mb=%.1f\n", (double)ru.ru_maxrss / 1024.0);
    }
    if (allreduce_reps > 0 && m->reducer) {
        /* fused buckets (the reducer, all buckets ready at once) against one plain MPI_Allreduce
         * of the same bytes */
        double fused = 1e30, plain = 1e30;
        for (long r = 0; r < allreduce_reps; r++) {
            tnt__barrier();
            double t = now();
            tnt__reducer_begin_step(m->reducer);
            if (tnt__reducer_finish_step(m->reducer)) goto fail;
            double f = now() - t;
            tnt__barrier();
            t = now();
            if (tnt__allreduce_sum_f32(m->grads, m->n_params)) goto fail;
            double p = now() - t;
            fused = f < fused ? f : fused;
            plain = p < plain ? p : plain;
        }
        double bytes = (double)m->n_params * sizeof(float);
        if (tnt_is_master_rank())
            printf("allreduce bytes=%.0f buckets=%d fused_GBps=%.3f plain_GBps=%.3f ratio=%.3f\n", bytes,
                   tnt__reducer_num_buckets(m->reducer), bytes / fused / 1e9, bytes / plain / 1e9, plain / fused);
    }
    tnt_dataset_free(ds);
    tnt_model_free(m);
    free(x), free(y);
    tnt_finalize();
    return 0;
fail:
    fprintf(stderr, "bench_train: %s\n", tnt_last_error());
    tnt_dataset_free(ds);
    tnt_model_free(m);
    free(x), free(y);
    tnt_finalize();
    return 1;
}

/* device.h: a model that trains on the GPU (GPU-DESIGN.md 4.5-4.7). The device holds the flat
 * parameter, gradient and state buffers (the host's layout, so buckets, the allreduce, files and
 * callbacks see the same offsets), the optimizer's slots and the activation arena of the device
 * plans. While it trains, the device owns the weights: the host copy is brought up to date on
 * demand (tnt__model_host_weights: get/set weights, saving, BackupAndRestore, the end of fit) and
 * every write to it (set, load, broadcast) is uploaded before the next device step.
 *
 * Dispatch: a model is all-GPU or all-CPU. The request is compile's device, else the TNT_DEVICE
 * setting: cpu, gpu (an error naming the first reason when it cannot), auto (the GPU when the
 * backend is available and every layer, the optimizer and the model's configuration have a device
 * path, else the CPU with one INFO line naming the first reason). */
#ifndef TNT_MODEL_DEVICE_H
#define TNT_MODEL_DEVICE_H

#include "model/model.h"
#include "gpu/gpu.h"

typedef struct tnt__model_dev {
    float *params, *grads, *state, *shared_scratch; /* device flat buffers, host layout */
    void *arena;                                     /* activations of the device plans */
    size_t arena_bytes;
    bool host_stale;   /* the device holds newer weights than the host copy */
    bool device_stale; /* the host copy was written since the last upload */
    tnt__gpu_event *bucket_done; /* a bucket's gradients are written (compute stream) */
    /* host staging of the buckets: page-locked, so that the copy stream copies asynchronously
     * while the compute stream goes on with backward; a bucket is handed to the reducer once the
     * next one is queued (or at the end of backward) */
    float *staging;              /* n_params floats, page-locked; made at the first bucket */
    tnt__gpu_event *copied[2];   /* a bucket's copy to staging is done (copy stream) */
    int64_t pending_begin, pending_end; /* the bucket still in flight; end 0: none */
    int pending_slot;            /* its event in copied[] */
    /* NCCL (TNT_GPU_COMM, comm/gpu_comm.c): the buckets of the reducer's plan summed in place on
     * the device, on the copy stream as backward completes them, in plan order on every rank */
    bool nccl;                   /* this fit's gradients go through NCCL */
    int nccl_next;               /* the first bucket of the step not yet issued */
    bool nccl_flushed;           /* this step's sums are all issued (backward's flush) */
    tnt__gpu_event *reduced;     /* the step's last sum is done (copy stream) */
    /* the batch's way up (tnt__dev_batch_up): a device buffer the copy stream fills while the
     * compute stream still runs the step before */
    void *batch;
    size_t batch_bytes;
    tnt__gpu_event *batch_up;   /* the batch is in `batch` (copy stream) */
    tnt__gpu_event *batch_used; /* the plan's inputs have taken it (compute stream) */
} tnt__model_dev;

/* Tests: false stages the buckets as before (pageable, the host waiting for each copy), to
 * compare the two paths bitwise. */
extern bool tnt__dev_pinned_staging;

/* Decides where m trains for this fit (who: "fit") and, for the GPU, makes the device buffers and
 * uploads the weights. Errors only when the GPU is required (TNT_DEVICE=gpu) and unusable. */
tnt_status tnt__model_choose_device(tnt_model *m, const char *who);
/* Whether m can train on the GPU; when not, the first reason in why (a phrase naming the layer
 * and its class, the optimizer or the backend's reason). */
bool tnt__model_device_check(const tnt_model *m, char *why, size_t size);
/* The device buffers go; the host copy is brought up to date first. */
void tnt__model_dev_free(tnt_model *m);

/* The host copy is about to be read: download the weights, state and optimizer slots when the
 * device has newer ones. A no-op for a model without device buffers. */
tnt_status tnt__model_host_weights(tnt_model *m);
/* The host copy is about to be written (or handed out writable): brought up to date first, then
 * uploaded before the next device step. */
tnt_status tnt__model_host_written(tnt_model *m);
/* Before a device pass: uploads the host copy if it was written. */
tnt_status tnt__model_dev_ready(tnt_model *m);

/* The device arena, grown to at least bytes (plans keep offsets, not addresses). */
void *tnt__model_dev_arena(tnt_model *m, size_t bytes);

/* The batch (host memory, bytes) to the device for a pass, and where it is there: copied on the
 * copy stream into a staging buffer, so the bytes cross while the compute stream still finishes
 * the previous step (its backward and update read the plan's input tensors); a copy on the compute
 * stream would wait for all that and leave the GPU idle while it runs. Work queued on the compute
 * stream after this sees the batch. The caller moves it into the plan's inputs, then calls
 * tnt__dev_batch_taken, after which the next batch may overwrite it. TNT_GPU_STAGED_INPUT=0: the
 * copy goes on the compute stream into the staging buffer (for measuring one against the other). */
tnt_status tnt__dev_batch_up(tnt_model *m, const float *host, size_t bytes, const float **device);
tnt_status tnt__dev_batch_taken(tnt_model *m);

/* dst[i] += src[i] on the device (tensors read by several nodes, shared layers' gradients). */
tnt_status tnt__dev_add_into(float *dst, const float *src, int64_t n);
/* Backward completed the gradients [begin, end): copied to the host's m->grads once the compute
 * stream has written them, then handed to the reducer (host-staged allreduce). The copy goes on
 * the copy stream into page-locked staging without the host waiting; the bucket before it, whose
 * copy ran meanwhile, is handed over now. */
tnt_status tnt__dev_bucket_ready(tnt_model *m, struct tnt__reducer *r, int64_t begin, int64_t end);
/* The end of backward: the last bucket in flight is handed over (hand_over false, after an
 * error: only waited for). Under NCCL: the buckets not yet issued are issued (after an error too,
 * so that every rank issues the same sums). */
tnt_status tnt__dev_bucket_flush(tnt_model *m, struct tnt__reducer *r, bool hand_over);
/* Chooses for a parallel fit how the gradients are summed (NCCL or host staging; collective). */
tnt_status tnt__dev_comm_prepare(tnt_model *m);
/* Under NCCL, the end of a step: a rank whose backward did not run (an empty share) sums zeros,
 * so that every rank issues the step's sums. */
tnt_status tnt__dev_step_sums(tnt_model *m, struct tnt__reducer *r);
/* The optimizer step on the device: the summed gradients (from the reducer's host buffer when
 * the step was host-staged; under NCCL already on the device once the last sum is done) go up, frozen layers' gradients are zeroed, then one pass over the device
 * flat buffers. */
tnt_status tnt__dev_optimizer_step(tnt_model *m, const tnt__step *st);
/* Keras's trainable: false on the device, as fit.c's freeze and thaw on the host: the frozen
 * layers' values are copied aside (a device buffer; NULL when no layer is frozen) before the
 * update and put back after it. */
tnt_status tnt__dev_freeze(tnt_model *m, float **copy);
void tnt__dev_thaw(tnt_model *m, float *copy);

#endif

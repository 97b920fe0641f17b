/* optimizer.h: internal view of the optimizers (Keras 2.11+ "new" optimizers: SGD, Adam,
 * AdamW, RMSprop, Adagrad, Adadelta, Adamax, Nadam). The model owns one flat parameter buffer and one
 * flat gradient buffer; an optimizer keeps its slot variables as flat buffers of the same length
 * and updates all of them in one fused elementwise pass per step. The struct is defined here so
 * that the model and the checkpoint writer can read the hyperparameters and the state. */
#ifndef TNT_TRAIN_OPTIMIZER_H
#define TNT_TRAIN_OPTIMIZER_H

#include "tarantella.h"

typedef enum tnt__opt_kind {
    TNT__OPT_SGD = 0,
    TNT__OPT_ADAM,
    TNT__OPT_RMSPROP,
    TNT__OPT_ADAGRAD,
    TNT__OPT_ADADELTA,
    TNT__OPT_ADAMAX,
    TNT__OPT_NADAM,
} tnt__opt_kind;

#define TNT__OPT_MAX_SLOTS 3

struct tnt_optimizer {
    tnt__opt_kind kind;
    const char *name; /* Keras class name: "SGD", "Adam", "RMSprop", ... */
    /* Hyperparameters with the defaults resolved (a field that does not apply is 0/false). */
    float learning_rate; /* current value; set_lr changes it between steps */
    float momentum;      /* SGD, RMSprop */
    bool nesterov;       /* SGD */
    float beta_1, beta_2;
    float epsilon;
    float rho;      /* RMSprop, Adadelta */
    bool amsgrad;   /* Adam */
    bool centered;  /* RMSprop */
    float initial_accumulator_value; /* Adagrad */
    float weight_decay;              /* 0: none */
    float clipvalue;                 /* 0: none; else the gradient goes through clip_buf */

    /* Learning-rate schedule (NULL: none). With one, learning_rate is set to
     * schedule(iterations) once per step, at the step's first apply; schedule_step is the
     * iterations value it was computed for (-1: none yet). */
    tnt_lr_schedule *schedule;
    int64_t schedule_step;

    int64_t iterations; /* completed steps (Keras's optimizer.iterations) */
    /* Nadam only: Keras's _u_product, the product of the momentum cache u_1 ... u_iterations
     * (1.0 before the first step). Kept in double; Keras keeps it in float32. */
    double nadam_u_product;

    /* State, allocated by tnt__optimizer_prepare: n_params floats per slot. */
    int64_t n_params; /* -1 until prepared */
    int n_slots;
    const char *slot_names[TNT__OPT_MAX_SLOTS];
    float *slots[TNT__OPT_MAX_SLOTS];
    float *clip_buf; /* clipvalue: the clipped gradient, n_params floats (the model's stays as computed) */
    float *d_slots[TNT__OPT_MAX_SLOTS]; /* the slots on the device while a model trains there
                                           (optimizer_gpu.c); NULL otherwise */
    float *d_clip_buf;                  /* clipvalue on the device: the clipped gradient */
};

/* Allocates the slot buffers for n_params parameters: zeros, except Adagrad's accumulators,
 * which start at initial_accumulator_value. Calling it again with the same n is a no-op (the
 * state is kept); a different n is an error (an optimizer serves one model). */
tnt_status tnt__optimizer_prepare(tnt_optimizer *o, int64_t n_params);

/* One update of params[begin, end) from grads[begin, end) for step t = iterations + 1: a single
 * fused elementwise pass (weight decay, slot updates, parameter update). May be called for
 * several disjoint slices within one step; the result does not depend on the slicing or on the
 * number of OpenMP threads. Call tnt__optimizer_finish_step once after the step's slices. */
tnt_status tnt__optimizer_apply(tnt_optimizer *o, float *params, const float *grads, int64_t begin,
                                int64_t end);
/* Ends a step: iterations++ (and Nadam's u_product advances). */
/* Nadam's step coefficients (momentum cache products), shared by the host and device updates. */
void tnt__optimizer_nadam_coeffs(const tnt_optimizer *o, double *cm, double *cg, double *cv);
void tnt__optimizer_finish_step(tnt_optimizer *o);

/* Restores the step counter (checkpoint resume); recomputes Nadam's u_product for it. */
tnt_status tnt__optimizer_set_iterations(tnt_optimizer *o, int64_t iterations);

/* Slot variables in Keras's order and with Keras's names (SGD with momentum: "m"; Adam: "m", "v"
 * and with amsgrad "vhat"; RMSprop: "velocity", then "momentum" if momentum > 0, then
 * "average_gradient" if centered; Adagrad: "accumulator"; Adadelta: "accumulated_grad",
 * "accumulated_delta_var"; Adamax: "m", "u"; Nadam: "m", "v"). The count is known before
 * prepare; tnt__optimizer_slot returns NULL before prepare or when k is out of range. */
int tnt__optimizer_num_slots(const tnt_optimizer *o);
const char *tnt__optimizer_slot_name(const tnt_optimizer *o, int k);
float *tnt__optimizer_slot(tnt_optimizer *o, int k);

/* ---- on the device (optimizer_gpu.c): the same formulas and per-step scalars, one kernel per
 * step over the device flat buffers. SGD (momentum, Nesterov), Adam (AMSGrad), AdamW, RMSprop. */

/* Whether the update has a device path; when not, *why says what lacks one. */
bool tnt__optimizer_gpu_supported(const tnt_optimizer *o, const char **why);
/* Device slots (n_params floats each, after tnt__optimizer_prepare), filled from the host's. */
tnt_status tnt__optimizer_gpu_prepare(tnt_optimizer *o);
/* Copies of the slots between the host and the device (no-ops without device slots). */
tnt_status tnt__optimizer_gpu_upload(tnt_optimizer *o);
tnt_status tnt__optimizer_gpu_download(tnt_optimizer *o);
void tnt__optimizer_gpu_free(tnt_optimizer *o);
/* tnt__optimizer_apply over device buffers (the schedule's rate is set on the host as there). */
tnt_status tnt__optimizer_apply_gpu(tnt_optimizer *o, float *d_params, const float *d_grads, int64_t begin,
                                    int64_t end);

#endif

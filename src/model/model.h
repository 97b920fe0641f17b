/* model.h: the model's internal structure. A Sequential model is a list of layers with shapes
 * fixed at build time, one flat parameter buffer and one flat gradient buffer (both laid out in
 * backward order: last layer first, so a tail of backward completes a prefix of the gradient
 * buffer), and a cache of execution plans, one per batch size. */
#ifndef TNT_MODEL_H
#define TNT_MODEL_H

#include "layers/layer.h"
#include "train/metrics.h"

#define TNT_PLAN_CACHE 4
#define TNT_MAX_METRICS 8

/* Execution state for one batch size: each layer's plan, and offsets into the model's
 * activation arena. */
typedef struct tnt__plan {
    int64_t batch;
    uint64_t last_use;
    void **layer_plans;    /* [n_layers] */
    size_t *act_offset;    /* [n_layers + 1]: output of layer i-1 (0: the input batch) */
    bool *act_is_input;    /* [n_layers + 1]: aliases the caller's input buffer */
    size_t *ws_offset;     /* [n_layers] */
    size_t grad_offset[2]; /* two ping-pong buffers for activation gradients */
    size_t preact_offset;  /* logits of a fused softmax output */
    size_t arena_bytes;
} tnt__plan;

struct tnt_model {
    char name[TNT_NAME_MAX];
    tnt_layer **layers;
    int n_layers, cap_layers;
    bool has_input_shape;
    tnt_shape input_shape, output_shape;

    float *params, *grads; /* flat buffers of the trainable weights, backward order */
    int64_t n_params;
    float *state;          /* non-trainable weights (moving statistics), backward order */
    int64_t n_state;
    bool weights_ready;    /* buffers allocated and initialized */

    tnt_optimizer *optimizer;
    tnt_loss_kind loss;
    bool from_logits;
    bool fused_output_loss; /* softmax+CE or sigmoid+BCE: the loss runs on the logits */
    tnt__metric metrics[TNT_MAX_METRICS];
    int n_metrics;
    bool compiled;
    uint64_t seed;
    int64_t step; /* forward passes in training, for per-step dropout seeds */
    int64_t sample_offset; /* this rank's first sample in the current global batch */
    bool stop_training;

    /* data parallelism */
    bool distributed;      /* tnt_distribute() was called */
    bool weights_synced;   /* all ranks hold the master's weights */
    int64_t *grad_end;     /* [n_layers]: gradient prefix complete after layer i's backward */
    struct tnt__reducer *reducer; /* gradient allreduce, created at the first distributed fit */
    bool warned_small_batch;

    tnt__plan plans[TNT_PLAN_CACHE];
    uint64_t plan_clock;
    void *arena;
    size_t arena_bytes;
};

/* Allocates the flat buffers (backward order) and initializes the weights, once. */
tnt_status tnt__model_setup_weights(tnt_model *m);
/* Finds or creates the plan for a batch size; NULL + error on failure. */
tnt__plan *tnt__model_plan(tnt_model *m, int64_t batch);
/* Pointer to activation i (0 = input) of a plan; x is the caller's input buffer. */
float *tnt__plan_act(tnt_model *m, tnt__plan *p, int i, const float *x);

/* Forward pass of n samples x -> output (stored in the plan's last activation). */
tnt_status tnt__model_forward(tnt_model *m, tnt__plan *p, const float *x, bool training,
                              float **out);
/* Backward from dpred (gradient w.r.t. the output, or the logits when fused) into m->grads. */
tnt_status tnt__model_backward(tnt_model *m, tnt__plan *p, const float *x, const float *dpred);

/* Output values per sample */
int64_t tnt__model_output_size(const tnt_model *m);

/* internal queries on special layers */
bool tnt__is_input_layer(const tnt_layer *l);
tnt_shape tnt__input_layer_shape(const tnt_layer *l);

#endif

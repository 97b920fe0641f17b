/* model.h: the model's internal structure. A model is a graph of nodes (layer calls) over tensors,
 * in a topological order fixed when the model is made: a Sequential model is a chain, a
 * Functional one any DAG with several inputs and outputs and layers called more than once.
 * Weights live in one flat parameter buffer and one flat gradient buffer, both laid out in the
 * order backward completes them (the last layer first), so a tail of backward completes a prefix
 * of the gradient buffer that the allreduce can start on. Execution plans (oneDNN primitives and
 * arena offsets) are cached per batch size. */
#ifndef TNT_MODEL_H
#define TNT_MODEL_H

#include "layers/layer.h"
#include "objectives/metrics.h"

#define TNT_PLAN_CACHE 4
#define TNT__METRIC_STATE_MAX 256 /* doubles of state of the user's Metric classes, all together */
#define TNT_MAX_METRICS 16
#define TNT_MAX_IO 64 /* model inputs and outputs (a feature extractor returns every layer's output) */

/* One call of a layer: inputs and output are tensor ids of the model. */
typedef struct tnt__node {
    tnt_layer *layer;
    int n_in;
    int in[TNT_MAX_LAYER_INPUTS];
    int out;             /* output 0; a layer with several outputs makes n_out consecutive
                            tensors out, out + 1, ... (tnt__node_n_out) */
    int n_out;
    bool first_backward; /* the first backward of its layer (the last call): writes the weight
                            gradients; later ones (shared layers) add to them */
    bool last_backward;  /* the last backward of its layer: its gradients are complete after it */
    int64_t grad_end;    /* gradient prefix complete after this node's backward */
    bool folded;         /* an Activation(relu) computed by the layer before it (folds_relu): the
                            node is then an identity, like a view */
    int scope;           /* 1 + the index in m->scopes of the nested model this call belongs to;
                            0: the model itself */
} tnt__node;

/* A model nested in this one (Keras's model called as a layer). Its layers join this model's
 * graph (tnt_call_model); the scope remembers which they are and how the model was called, for
 * the Keras files: one entry in the config, one weights group, names unique per scope. */
typedef struct tnt__scope_call {
    int in[TNT_MAX_IO], out[TNT_MAX_IO]; /* tensors of this model; -1 when cut away */
} tnt__scope_call;
typedef struct tnt__scope {
    char name[TNT_NAME_MAX];
    bool sequential;       /* Keras class Sequential, else Functional */
    int parent;            /* the enclosing scope's index, -1: the model itself */
    tnt_model *model;      /* a structural copy of the nested model (its graph, sharing its
                              layers, without weight buffers): what the Keras writers write */
    const void *key;       /* the nested model called (while the graph is made) */
    int n_in, n_out, n_calls;
    tnt__scope_call *calls;
} tnt__scope;

/* Execution state for one batch size. */
typedef struct tnt__plan {
    int64_t batch;
    uint64_t last_use;
    void **layer_plans;   /* [n_nodes] */
    size_t *ws_offset;    /* [n_nodes] */
    size_t *act_offset;   /* [n_tensors]: forward value of each tensor */
    bool *act_is_input;   /* [n_tensors]: aliases the caller's input buffer (single-input models) */
    size_t *grad_offset;  /* [n_tensors]: gradient of each tensor (only valid while live) */
    size_t *dx_offset;    /* [n_nodes * TNT_MAX_LAYER_INPUTS]: where input k's gradient is written */
    signed char *dx_mode; /* same index: 0 not needed, 1 written in place, 2 written to a temporary
                             then added to the tensor's gradient, 3 a view's input sharing the
                             output's gradient storage */
    size_t preact_offset[TNT_MAX_IO]; /* logits of a fused softmax/sigmoid output */
    size_t packed_offset; /* outputs packed per sample, for models with several outputs */
    size_t scratch_offset; /* device plans: the layers' shared scratch (tnt__gpu_ops.scratch_size) */
    size_t arena_bytes;
    tnt_shape in_shapes[TNT_MAX_IO]; /* the input shapes it was made for (variable models) */
    bool device;          /* offsets into the device arena, layer plans of ops->gpu (model/device.h);
                             the input is always copied in (act_is_input all false) */
    /* device plans: host copies of each output, its loss input (the logits when fused) and the
     * gradient the loss writes (one allocation, host_buf), and the outputs packed per sample for
     * models with several (the batch itself goes up through the model's buffer: device.h) */
    float *host_buf, *host_out[TNT_MAX_IO], *host_loss_in[TNT_MAX_IO], *host_out_grad[TNT_MAX_IO], *host_packed;
    /* device plans, the loss gradient on the device (training/device_loss.c): the batch's labels
     * (up to one per output value) in the arena and in host_labels; host_buf is page-locked when
     * host_pinned, so that the outputs come down asynchronously, on the copy stream after
     * forward_done (compute); outputs_ready is recorded after their copies, labels_sent after the
     * labels' (host_labels may be written again) */
    size_t labels_offset;
    float *host_labels;
    bool host_pinned, labels_pending;
    struct tnt__gpu_event *outputs_ready, *labels_sent, *forward_done;
    /* device plans, the penalties (model/device_rules.h): their partial sums in the arena and
     * their host copy, which comes down with the outputs */
    size_t penalty_offset;
    int penalty_terms;
    double *host_penalty;
    bool penalty_pinned;
} tnt__plan;

struct tnt_model {
    char name[TNT_NAME_MAX];
    bool functional;
    bool keras_sequential; /* a Keras Sequential model rebuilt as a graph to carry sequence masks:
                              a chain, written back as Sequential */

    /* the graph */
    tnt__node *nodes;
    int n_nodes, cap_nodes;
    tnt_shape *tensor_shape;     /* [n_tensors]; Sequential: tensor i is the output of node i-1 */
    int *tensor_alias;           /* [n_tensors]: the tensor whose storage it shares (views), or itself */
    int n_tensors, cap_tensors;
    int n_inputs, inputs[TNT_MAX_IO];
    int n_outputs, outputs[TNT_MAX_IO];
    bool inputs_dict, outputs_dict; /* Keras's inputs (outputs) given as a dict: by key, sorted */
    char input_keys[TNT_MAX_IO][TNT_NAME_MAX], output_keys[TNT_MAX_IO][TNT_NAME_MAX]; /* "" if none */
    bool has_input_shape;
    tnt_shape input_shape, output_shape; /* packed: the sum of the inputs' (outputs') sizes when
                                            there are several */

    /* Variable (None) input dimensions (variable.c): input_decl holds the declared shapes, -1 for
     * None. The tensors and layers are those of one concrete instance of the inputs: a stand-in
     * size at first, then the shapes the data brings (tnt__model_instantiate). tensor_var[t]
     * marks (bit d) the dimensions of tensor t that follow the variable ones. */
    bool variable;
    bool inst_known;             /* the instance comes from data or the caller, not a stand-in */
    tnt_shape input_decl[TNT_MAX_IO];
    uint8_t *tensor_var;         /* [n_tensors] once analysed, else NULL */

    /* the distinct layers in order of first call, each holding one reference of this model */
    tnt_layer **layers;
    int n_layers, cap_layers;
    tnt_layer **hidden;          /* internal layers (sequence masks), not listed */
    int n_hidden;
    tnt__scope *scopes;          /* nested models, a parent before its children */
    int n_scopes;

    float *params, *grads; /* flat buffers of the trainable weights, backward order */
    int64_t n_params;
    float *state;          /* non-trainable weights (moving statistics), backward order */
    int64_t n_state;
    float *shared_scratch; /* weight gradients of a shared layer's second and later calls */
    bool weights_ready;    /* buffers allocated and initialized */

    tnt_optimizer *optimizer;
    tnt_loss_kind loss;
    tnt_loss_kind output_loss[TNT_MAX_IO]; /* per output (Keras's list or dict of losses) */
    bool mixed_losses;                     /* the outputs' losses differ */
    bool from_logits;
    struct tnt__loss_opts *loss_opts; /* label smoothing, ignore_class; NULL when none */
    bool fused_output_loss[TNT_MAX_IO]; /* softmax+CE or sigmoid+BCE: the loss runs on the logits */
    struct tnt__traced_loss *traced_loss[TNT_MAX_IO]; /* the user's loss function; NULL: output_loss */
    float loss_weights[TNT_MAX_IO]; /* Keras's loss_weights; 1 when not given */
    bool has_loss_weights;          /* given at compile (written back to Keras files) */
    tnt__metric metrics[TNT_MAX_METRICS];
    signed char curve_slot[TNT_MAX_IO][TNT_MAX_METRICS]; /* AUC state of (output, metric); -1: none */
    int n_metrics;         /* per output */
    struct tnt__traced_loss *traced_metric[TNT_MAX_METRICS]; /* metric j is the user's function; NULL: built in */
    struct tnt__state_metric *state_metric[TNT_MAX_METRICS];  /* metric j is the user's Metric with state */
    int64_t state_metric_off[TNT_MAX_METRICS];               /* its state's place in the pass's state */
    int64_t n_metric_state;                                   /* doubles of state of all of them */
    bool compiled;
    uint64_t seed;
    int64_t step; /* forward passes in training: the dropout step of a model without optimizer */
    double activity_penalty; /* the activity regularizers' penalty in the last forward, summed over
                                its samples (Keras divides it by the batch size) */
    double device_weight_penalty; /* on the device: the weight penalties at the last forward */
    bool stop_training;
    /* a custom training loop's last forward, kept for its backward (training/tape.c), and how
     * to free it (the model knows nothing of it) */
    struct tnt__tape *tape;
    bool input_grads; /* plans also make the inputs' gradients (a model call fed by another's) */
    void (*tape_free)(struct tnt__tape *t);
    /* during on_predict_batch_end: the batch's predictions (tnt_model_batch_outputs) */
    const float *batch_outputs;
    int64_t batch_outputs_n;
    int resume_epoch;      /* set by BackupAndRestore in on_train_begin: fit resumes at this epoch */
    int64_t resume_step;   /* ... after skipping its first resume_step batches (already trained) */

    /* data parallelism */
    bool distributed;      /* tnt_distribute() was called */
    tnt_distribute_opts distribute_opts; /* as given; the configuration fills in the defaults */
    bool weights_synced;   /* all ranks hold the master's weights */
    struct tnt__reducer *reducer; /* gradient allreduce, created at the first distributed fit */
    /* From a fit with a node-aware reducer on, the gradients (and, sharded, the weights and the
     * optimizer's slots) live in its shared window; these are the model's own buffers, taken back
     * before the model is written (model/window.h). */
    bool attached;
    bool in_fit; /* inside tnt_fit: writes to the weights go to the window, as the step's */
    float *grads_home, *params_home;
    int n_slots_shared; /* sharded: the optimizer's slots live only in the window (own ones freed) */
    int64_t node_dw_samples; /* samples a rank's stash of node-computed kernel gradients holds; 0: none */
    /* the frozen layers' trainable weights, n_frozen [begin, end) pairs of the flat buffers in
     * ascending order, merged: out of the optimizer's update (tnt__model_note_frozen) */
    int64_t *frozen;
    int n_frozen;
    uint64_t frozen_noted; /* tnt__model_frozen_signature when m->frozen was made */
    bool warned_small_batch;

    tnt__plan plans[TNT_PLAN_CACHE];
    uint64_t plan_clock;
    uint64_t plans_frozen; /* which layers were frozen when the plans were made (they reach fewer tensors) */
    void *arena;
    size_t arena_bytes;

    /* the GPU (model/device.h) */
    int device_request;        /* compile's tnt_device; TNT_DEVICE_DEFAULT: the TNT_DEVICE setting */
    bool on_device;            /* fit (and the inference that follows) runs on the GPU */
    bool device_reason_logged; /* auto chose the CPU and said why once */
    bool host_path_logged;     /* the layers whose data go through the host, said once on the device */
    struct tnt__model_dev *dev; /* device buffers; NULL when none */
};

/* Keras sees a Functional model (summary, JSON, HDF5 layer lists); a Sequential one rebuilt as a
 * graph (keras_sequential) stays Sequential. */
static inline bool tnt__model_keras_functional(const tnt_model *m) { return m->functional && !m->keras_sequential; }

/* Folds each Activation(relu) that alone reads the output of a layer with folds_relu
 * (BatchNormalization, Add) into that layer: one pass over the data instead of two, forward and
 * backward. Done once, before any plan. */
void tnt__model_fold_activations(tnt_model *m);
/* The node's outputs: tensors n->out .. n->out + tnt__node_n_out(n) - 1. */
static inline int tnt__node_n_out(const tnt__node *n) { return n->n_out > 1 ? n->n_out : 1; }
/* The node that makes tensor t (-1: a model input), and which of its outputs t is. */
int tnt__tensor_producer(const tnt_model *m, int t, int *index);

/* The node passes its input through (a view, or a folded activation). */
static inline bool tnt__node_is_alias(const tnt__node *n) { return n->layer->ops->is_view || n->folded; }

/* Which layers are frozen, as a hash: the plans and m->frozen are made again when it changes. */
uint64_t tnt__model_frozen_signature(const tnt_model *m);
/* Notes the frozen layers' weights in m->frozen (before a step: a callback may change them); a
 * no-op while the frozen layers stay the same. */
tnt_status tnt__model_note_frozen(tnt_model *m);

/* Allocates the flat buffers (backward order) and initializes the weights, once. */
tnt_status tnt__model_setup_weights(tnt_model *m);
/* Moves the gradient buffer to grads (n_params floats): m->grads and every weight's gradient
 * view point there afterwards (the values are not copied). */
void tnt__model_bind_grads(tnt_model *m, float *grads);
/* The same for the trainable weights' buffer (m->params and every trainable weight's value). */
void tnt__model_bind_params(tnt_model *m, float *params);
/* Drops the cached plans (after the graph or the loss configuration changed). */
void tnt__model_clear_plans(tnt_model *m);
/* Finds or creates the plan for a batch size; NULL + error on failure. */
tnt__plan *tnt__model_plan(tnt_model *m, int64_t batch);
/* Tests: every forward value kept to the end of the step, as before plans lent storage (plan.c) */
extern bool tnt__plan_keep_values;

/* One forward (and backward) pass over a batch: what the layers need beyond the data. fit,
 * evaluate and predict make one per step; {0} is an inference pass on one process. */
typedef struct tnt__step {
    int64_t global_n;      /* samples of the global batch (all ranks) */
    int64_t sample_offset; /* this rank's first sample in the global batch */
    bool training;
    uint64_t seed;         /* dropout masks of a training step (tnt__model_training_seed) */
    bool parallel;         /* one rank's share of a global batch: collective layers
                              (SyncBatchNormalization) reduce over the ranks */
    struct tnt__reducer *reducer; /* allreduces the gradients backward completes; NULL: none */
    bool device_reduces;          /* NCCL sums them on the device (the reducer gives only its
                                     bucket plan; its host side stays idle) */
    bool node_dw;                 /* the node computes its registered kernel gradients this step
                                     (every rank alike: tnt__parallel_step_begin) */
    bool update_overlaps;         /* the sharded optimizer updates this rank's slices on the comm
                                     thread during backward (tnt__parallel_step_begin) */
    double activity_grad_scale;   /* 1 / the global batch size: Keras 2 divides the activity
                                     penalty by the batch size */
    bool device_loss;             /* device plans: the loss gradient is written on the device
                                     (training/device_loss.c): forward leaves the outputs' copies
                                     to the host in flight (tnt__plan_outputs_wait), backward
                                     uploads no host gradient */
} tnt__step;

/* The dropout seed of the next training step; counts the step. The masks follow the
 * optimizer's step count, which a loaded checkpoint restores, so a resumed run draws the masks
 * an unbroken one would. */
uint64_t tnt__model_training_seed(tnt_model *m);
/* Forward pass of the plan's batch x (packed inputs) -> *out: the output, packed per sample when
 * the model has several. */
tnt_status tnt__model_forward(tnt_model *m, tnt__plan *p, const float *x, const tnt__step *st,
                              float **out);
/* Output k of the last forward (batch, output_shape_k...), and the buffer its loss gradient is
 * written to (w.r.t. the output, or its logits when fused_output_loss[k]). */
float *tnt__plan_output(tnt_model *m, tnt__plan *p, int k, const float *x);
float *tnt__plan_output_grad(tnt_model *m, tnt__plan *p, int k);
/* The loss input of output k: the logits when the loss is fused, else the output. */
float *tnt__plan_loss_input(tnt_model *m, tnt__plan *p, int k, const float *x);
/* The gradient of input k after backward (plans made with m->input_grads), or NULL. */
float *tnt__plan_input_grad(tnt_model *m, tnt__plan *p, int k);
/* After a forward with st->device_loss: waits for the outputs' copies to the host (and packs
 * several per sample), so that the host copies above may be read. */
tnt_status tnt__plan_outputs_wait(tnt_model *m, tnt__plan *p);
/* Backward from the output gradients into m->grads, handing each completed prefix of them to
 * st->reducer. */
tnt_status tnt__model_backward(tnt_model *m, tnt__plan *p, const float *x, const tnt__step *st);

/* Values per sample of the (packed) output */
int64_t tnt__model_output_size(const tnt_model *m);
/* Keras's name of output k: the name of the layer that produces it. */
const char *tnt__model_output_name(const tnt_model *m, int k);

/* Adds a node calling l on tensors in[] (whose shapes are known) and a new output tensor; builds
 * l on first use or checks the shapes of a later call. Returns the output tensor or -1. */
int tnt__model_add_node(tnt_model *m, tnt_layer *l, int n_in, const int *in);
/* An empty Functional model (graph.c fills it). */
tnt_model *tnt__functional_new(const char *name);
/* A new tensor of this shape with no producer; -1 on failure. */
int tnt__model_add_tensor(tnt_model *m, tnt_shape shape);
/* Keeps one reference to l in the model's layer list (or hidden list); no-op if present. */
tnt_status tnt__model_own_layer(tnt_model *m, tnt_layer *l, bool hidden);
/* Fixes inputs/outputs and the packed shapes; done by Sequential build and tnt_functional. */
void tnt__model_set_io_shapes(tnt_model *m);

/* ---- variable dimensions (variable.c) ---- */

/* The stand-in size of a None dimension while a model is being made (a thread's setting; the
 * Keras readers retry larger ones when a model does not build with the first). */
int64_t tnt__probe_dim(void);
void tnt__probe_set(int64_t v);
/* decl with each None (-1) replaced by the stand-in size */
tnt_shape tnt__probe_shape(tnt_shape decl);
/* Called once a model's inputs are fixed: records the declared shapes, and for a model with None
 * dimensions builds it for a second stand-in to learn which dimensions of every tensor follow
 * them (tensor_var). Fails, naming the layer, when a weight's shape depends on them. */
tnt_status tnt__model_analyse(tnt_model *m);
/* Rebuilds m's layers for these concrete input shapes (one per input; checked against the
 * declared ones) unless it already has them; on failure m keeps its previous instance. */
tnt_status tnt__model_instantiate(tnt_model *m, const tnt_shape *in, const char *who);
/* Builds again the layers of m that another model sharing them has built for other shapes since
 * (a nested model run on its own, or called on other shapes), for m's own tensor shapes. */
tnt_status tnt__model_sync_layers(tnt_model *m, const char *who);
/* Builds m's layers and tensors for input shapes in[] without checking the declared ones (a nested
 * model called on other shapes: its InputLayers pass them through); on failure m keeps its
 * previous shapes. */
tnt_status tnt__model_rebuild_for(tnt_model *m, const tnt_shape *in, const char *who);
/* The declared shape of tensor t: its instance's with -1 in the variable dimensions. */
tnt_shape tnt__model_tensor_decl(const tnt_model *m, int t);

/* ---- nested models (scope.c) ---- */

/* The scope of layer l (of its first call): an index in m->scopes, or -1 for m itself. */
int tnt__layer_scope(const tnt_model *m, const tnt_layer *l);
/* Scope s is inside scope outer (or is it); outer -1: m itself, which holds every scope. */
bool tnt__scope_within(const tnt_model *m, int s, int outer);
/* The names from the outermost scope down to s, joined by '/' ("" for -1). */
void tnt__scope_path(const tnt_model *m, int s, char *buf, size_t size);
/* The entries of Keras's model.layers of scope s (-1: m itself), in order: a layer (*layer set,
 * *scope -1) or a directly nested model (*layer NULL, *scope its index). listed: whether a layer
 * counts (tnt__keras_listed). Returns the number of entries, written to at most cap of the
 * arrays (either may be NULL to count). */
int tnt__scope_entries(const tnt_model *m, int s, bool (*listed)(const tnt_model *, const tnt_layer *),
                       tnt_layer **layers, int *scopes, int cap);
/* A copy of src's graph (nodes, tensors, scopes) sharing its layers, without weight buffers or
 * plans; NULL on failure. */
tnt_model *tnt__model_shadow(const tnt_model *src);
/* Appends a copy of t (its model shadowed, its calls copied) to m's scopes; *index receives its
 * index. */
tnt_status tnt__scope_push(tnt_model *m, const tnt__scope *t, int *index);
/* Appends a call of scope s on these tensors. */
tnt_status tnt__scope_add_call(tnt_model *m, int s, const int *in, const int *out);
void tnt__scopes_free(tnt_model *m);

/* internal queries on special layers */
bool tnt__is_input_layer(const tnt_layer *l);
tnt_shape tnt__input_layer_shape(const tnt_layer *l);
/* The InputLayer whose output is t (tnt_graph_input's), or NULL. */
tnt_layer *tnt__graph_input_layer(tnt_graph *g, tnt_ktensor t);
bool tnt__layer_has_trainable(const tnt_layer *l);
/* Builds l for these input shapes, or checks them against the first build (shared layers). */
tnt_status tnt__layer_build(tnt_layer *l, int n_in, const tnt_shape *in, const char *who);

#endif

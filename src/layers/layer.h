/* layer.h: the internal contract between a layer and the model.
 *
 * A layer is a small table of functions (tnt__layer_ops) plus private state. The model calls:
 *   build        once, when the input shape is known: infer the output shape, declare weights;
 *   plan_create  once per batch size: create oneDNN primitives for that shape (cached by the
 *                model, so the last partial batch does not recreate the full-batch plan);
 *   forward / backward every step, with buffers from the model's activation arena.
 * Weights are views into the model's flat parameter and gradient buffers, assigned after build.
 *
 * Adding a layer class: one file here with its forward, backward, get_config and from_config (the
 * Keras config both ways, through the helpers of layers/keras_config.h) and a non-static ops
 * table tnt__<name>_ops, plus one line in registry.c mapping the Keras class name to that table. */
#ifndef TNT_LAYER_H
#define TNT_LAYER_H

#include "core/core.h"

struct cJSON;       /* <cjson/cJSON.h>: layer configs */
struct tnt__kj_ctx; /* layers/keras_config.h: the layer being read, for messages */

#define TNT_MAX_LAYER_WEIGHTS 32 /* a traced layer holds all of a custom layer's weights: a Transformer
                                   block written as operations has 16 */
#define TNT_MAX_LAYER_INPUTS 16
#define TNT_MAX_LAYER_OUTPUTS 8 /* recurrent layers with return_state: 1 + states; Bidirectional
                                   with merge_mode None and return_state: 2 + 2 * 2 */
#define TNT_NAME_MAX 64

typedef struct tnt__weight {
    char name[TNT_NAME_MAX];  /* "kernel", "bias" */
    tnt_shape shape;
    tnt_initializer init;     /* resolved: never TNT_INIT_DEFAULT after build */
    tnt_initializer ufb_base; /* TNT__INIT_UNIT_FORGET_BIAS: the bias_initializer under the ones */
    int64_t fan_in, fan_out;  /* for variance-scaling initializers */
    float *value;             /* view into the model's parameter buffer */
    float *grad;              /* view into the model's gradient buffer; NULL when not trainable */
    bool trainable;           /* false: state (moving statistics) that the optimizer, the gradient
                                 buffer and the allreduce never see; set it in build */
    float *saved;             /* the values of a layer that outlived its model (NULL if none): a
                                 later model starts from them instead of the initializer */
    float *d_value, *d_grad;  /* device views into the model's device flat buffers while it trains
                                 on a GPU (model/device.c); NULL otherwise */
} tnt__weight;

typedef struct tnt__fwd_args {
    int64_t batch;      /* samples in this step */
    const float *x;     /* (batch, in_shape...): input 0 */
    int n_inputs;       /* 1, or more for layers with build_multi */
    const float *const *xs; /* all inputs, xs[0] == x: (batch, in_shapes[k]...) */
    float *y;           /* (batch, out_shape...): output 0 */
    int n_outputs;      /* l->n_outputs */
    float *const *ys;   /* all outputs, ys[0] == y: (batch, out_shapes[k]...) */
    float *preact;      /* NULL, or (batch, out_shape...): also store the value before the fused
                           activation (the loss uses logits for a fused softmax + cross-entropy) */
    void *workspace;    /* workspace_size bytes, kept until backward of the same step */
    void *scratch;      /* device plans: the shared scratch_size bytes, valid during this call only */
    bool training;
    uint64_t seed;      /* per-step random seed (dropout) */
    int64_t sample_offset; /* index of x's first sample in the global batch, so that random
                              masks are the same whatever the split across ranks */
    bool parallel;      /* data-parallel step: this call sees one rank's micro-batch, and every
                           rank makes the same call (SyncBatchNormalization reduces across them) */
} tnt__fwd_args;

/* A kernel gradient the node computes (data parallel, node-aware reducer; issue 25): instead of
 * writing dW = x^T · dpre, the layer copies x (rows, in) and dpre (rows, units) here, at these
 * pitches, and sets rows; the rank of the node that owns each slice of dW computes it over every
 * rank's rows. Only Dense (float32) is handed one. */
typedef struct tnt__dw_stash {
    float *x, *dpre;
    int64_t ldx, lddpre; /* pitches in floats (>= in, >= units) */
    int64_t cap_rows;    /* rows that fit */
    int64_t rows;        /* set by the layer */
} tnt__dw_stash;

typedef struct tnt__bwd_args {
    int64_t batch;
    const float *x;     /* the forward input 0 */
    const float *y;     /* the forward output 0 */
    const float *dy;    /* (batch, out_shape...): gradient of output 0; NULL (zero) only for
                           layers with several outputs, when nothing reads output 0 */
    int n_outputs;
    const float *const *ys;  /* all forward outputs, ys[0] == y */
    const float *const *dys; /* gradient of each output, dys[0] == dy; NULL where nothing reads
                                that output (its gradient is zero) */
    float *dx;          /* (batch, in_shape...), NULL when the input gradient is not needed */
    void *workspace;
    void *scratch;      /* as in tnt__fwd_args */
    bool dy_is_preact;  /* dy is already the gradient before the fused activation */
    int64_t sample_offset;
    int n_inputs;
    const float *const *xs; /* all forward inputs, xs[0] == x */
    float *const *dxs;  /* gradient of each input (dxs[0] == dx), each NULL when not needed;
                           written (overwritten), never accumulated */
    bool parallel;      /* as in tnt__fwd_args */
    double added_loss_scale; /* ops->added_loss: d(the loss fit minimizes) / d(the added losses) */
    tnt__dw_stash *dw_stash; /* NULL: write the kernel gradient (see tnt__dw_stash) */
} tnt__bwd_args;

/* Keras dtype policies (layers/dtype_policy.c): mixed_bfloat16 layers with a bf16 engine (Dense,
 * Conv1D/2D, DepthwiseConv2D, MultiHeadAttention) compute in bf16; every layer keeps float32
 * weights and activations, and carries its policy through Keras configs. The integer ones (and
 * bool) are an InputLayer's or an Embedding's dtype in a Keras file: integer ids, carried here as
 * float32 (exact up to 2^24, which Embedding's input_dim may not pass) and written back as read. */
typedef enum tnt__dtype_policy {
    TNT__POLICY_FLOAT32 = 0,
    TNT__POLICY_MIXED_BF16,
    TNT__POLICY_INT8,
    TNT__POLICY_INT16,
    TNT__POLICY_INT32,
    TNT__POLICY_INT64,
    TNT__POLICY_UINT8,
    TNT__POLICY_UINT16,
    TNT__POLICY_UINT32,
    TNT__POLICY_UINT64,
    TNT__POLICY_BOOL,
} tnt__dtype_policy;
static inline bool tnt__policy_is_integer(tnt__dtype_policy p) { return p >= TNT__POLICY_INT8; }
/* An input layer's dtype (InputLayer's "dtype": float32 or an integer type). */
void tnt__input_layer_set_dtype(tnt_layer *l, tnt__dtype_policy p);
tnt__dtype_policy tnt__input_layer_dtype(const tnt_layer *l);

/* The GPU path of a layer class (GPU-DESIGN.md 4.4): the CPU signatures, with every pointer of
 * tnt__fwd_args / tnt__bwd_args (workspace included) a device address, and the weights read
 * through d_value / d_grad. build, the Keras configs and the registry stay shared. Views and
 * folded activations run nothing on either device. */
typedef struct tnt__gpu_ops {
    /* May be NULL (every configuration of the class runs). Otherwise false and *why (one phrase:
     * "bf16 policy", "needs cuDNN") when this layer's configuration has no device path. */
    bool (*supported)(const tnt_layer *l, const char **why);
    void *(*plan_create)(tnt_layer *l, int64_t batch); /* may be NULL */
    void (*plan_destroy)(void *plan);
    size_t (*workspace_size)(tnt_layer *l, void *plan, int64_t batch); /* device bytes; may be NULL */
    /* Device bytes used only within one forward or one backward call (cuDNN's workspace, bf16
     * copies of the operands): one region that every layer of the plan shares, given to each call
     * as a->scratch. May be NULL: none. */
    size_t (*scratch_size)(tnt_layer *l, void *plan, int64_t batch);
    tnt_status (*forward)(tnt_layer *l, void *plan, const tnt__fwd_args *a);
    tnt_status (*backward)(tnt_layer *l, void *plan, const tnt__bwd_args *a);
    /* The layer's data go through the host (custom layers: the user's host functions), which the
     * model says once when it trains on the device. */
    bool via_host;
} tnt__gpu_ops;

/* The device path of a layer that has only host code (layers/host_bridge.c): its values and weights
 * come down, its own forward and backward run on the host, the results go back up (via_host). */
extern const tnt__gpu_ops tnt__host_bridge_gpu_ops;

typedef struct tnt__layer_ops {
    const char *class_name; /* Keras class name: "Dense" */
    /* Infer out_shape from in_shape (both without batch) and declare weights with
     * tnt__layer_add_weight. Errors name the layer and the shapes. */
    tnt_status (*build)(tnt_layer *l, tnt_shape in_shape, tnt_shape *out_shape);
    /* Layers with several outputs (l->n_outputs > 1, fixed by the constructor) give output 0's
     * shape in *out_shape as any layer, and the others' in l->out_shapes[1..] in build. */
    /* Layers with several inputs (merge layers, MultiHeadAttention) set this instead of build:
     * n_inputs shapes (1 <= n <= TNT_MAX_LAYER_INPUTS); the layer checks n itself. */
    tnt_status (*build_multi)(tnt_layer *l, int n_inputs, const tnt_shape *in_shapes, tnt_shape *out_shape);
    /* Execution state for one batch size (may return a non-NULL dummy); NULL + error on failure.
     * May be NULL in the table: the layer then needs no plan. */
    void *(*plan_create)(tnt_layer *l, int64_t batch);
    void (*plan_destroy)(void *plan);
    /* Bytes of workspace per step for this plan (0 if none). May be NULL. */
    size_t (*workspace_size)(tnt_layer *l, void *plan, int64_t batch);
    tnt_status (*forward)(tnt_layer *l, void *plan, const tnt__fwd_args *a);
    /* Writes dx (if requested) and this layer's weight gradients (overwriting, not adding). */
    tnt_status (*backward)(tnt_layer *l, void *plan, const tnt__bwd_args *a);
    /* Frees priv (not the layer). May be NULL. */
    void (*destroy)(tnt_layer *l);
    /* True when y can alias x (in-place layers such as Flatten/Reshape): the model then gives
     * forward x == y storage and skips copies. May be false. */
    bool is_view;
    /* Keras supports_masking: the output keeps the sequence mask of input 0 (set by an Embedding
     * with mask_zero). Layers without it drop the mask. */
    bool supports_masking;
    /* Recurrent layers and their wrappers: the sequence mask of input 0, when there is one, is
     * appended as one more input (batch, steps) of 1 and 0 (its gradient is zeros); keeps_mask
     * (may be NULL: no) says whether the output carries the mask on (return_sequences). */
    bool consumes_mask;
    bool (*keeps_mask)(const tnt_layer *l); /* with several outputs: output 0 and those of its shape */
    /* The layer runs MPI collectives in a parallel training step (SyncBatchNormalization): the
     * model then keeps every MPI call on the compute thread, in the same order on every rank. */
    bool collective;
    /* Keras's data_format option: NULL when the class has none. Called before build with
     * channels_first true or false; tnt__layer_take_data_format (layer.c) stores it in
     * l->channels_first, which build reads (Flatten also trades its view for a transpose). */
    tnt_status (*set_data_format)(tnt_layer *l, bool channels_first);
    /* Losses the layer adds to the model's loss (Keras's add_loss in a custom layer's call): their
     * sum in the forward that used workspace; NULL: none. Backward gets their gradient's scale in
     * tnt__bwd_args.added_loss_scale. */
    double (*added_loss)(const tnt_layer *l, const void *workspace);
    /* The layer applies l->activation == TNT_ACT_RELU itself, in the same pass: the model folds
     * an Activation("relu") that alone reads its output into it (BatchNormalization, Add). */
    bool folds_relu;
    /* Keras get_config(): adds the layer's own keys (units, activation, kernel_initializer, ...)
     * to config, which already holds name, trainable and dtype (src/io/keras_json.c writes those).
     * May be NULL: the base keys only. */
    tnt_status (*get_config)(const tnt_layer *l, struct cJSON *config);
    /* Keras from_config(): a new layer named k->name from the keys get_config writes (and Keras's
     * other spellings of them), through its public constructor; NULL with an error naming the
     * layer, its class and the bad key or value (tnt__kj_error). Unknown keys are ignored. NULL in
     * the table for classes the registry does not list (InputLayer, custom layers). */
    tnt_layer *(*from_config)(const struct cJSON *config, const struct tnt__kj_ctx *k);
    /* Which of forward's values its backward reads (TNT__READS_INPUTS, TNT__READS_OUTPUTS), on
     * the CPU and the GPU path alike; the output also whenever l->activation is not linear (the
     * fused activation's backward reads it). NULL: both. A value that no backward reads lives
     * only from its producer's forward to its last reader's: the plan lends its storage to later
     * values (model/plan.c), so a layer that reads what it does not declare reads another's. */
    unsigned (*backward_reads)(const tnt_layer *l);
    /* The GPU path (NULL: CPU only; dispatch then names the layer). */
    const tnt__gpu_ops *gpu;
    /* Stateful layers (recurrent stateful=True): their carried states back to zeros. May be NULL. */
    void (*reset_states)(tnt_layer *l);
} tnt__layer_ops;

enum { TNT__READS_INPUTS = 1, TNT__READS_OUTPUTS = 2 };
/* backward_reads for layers whose backward reads their inputs only, or none of the values */
unsigned tnt__reads_inputs(const tnt_layer *l);
unsigned tnt__reads_nothing(const tnt_layer *l);

struct tnt_layer {
    const tnt__layer_ops *ops;
    char name[TNT_NAME_MAX];
    bool auto_name;           /* name to be assigned Keras-style by the model */
    tnt_shape in_shape, out_shape;   /* in_shape == in_shapes[0], out_shape == out_shapes[0] */
    int n_outputs;            /* 1, or more: Keras's list of outputs (LSTM return_state: output, h,
                                 c; Bidirectional merge_mode None: forward, backward) */
    tnt_shape out_shapes[TNT_MAX_LAYER_OUTPUTS];
    bool mask_input;          /* consumes_mask layers: the graph appended the sequence mask as
                                 the last input (set before build) */
    int n_inputs;
    tnt_shape in_shapes[TNT_MAX_LAYER_INPUTS];
    int n_weights;
    tnt__weight weights[TNT_MAX_LAYER_WEIGHTS];
    tnt_activation activation; /* the fused activation, TNT_ACT_LINEAR if none */
    float activation_alpha;
    uint64_t seed;            /* set by the model before build: derived from the model seed */
    bool channels_first;      /* Keras data_format "channels_first": the channels are the first
                                 non-batch axis (NCHW), for classes with set_data_format */
    bool built;
    bool frozen;              /* Keras's trainable: false, from a file (or its nested model's):
                                 its weights then come with the non-trainable ones in Keras 2's
                                 HDF5 order (_legacy_weights), and configs write it back */
    int refs;                 /* owners (graphs and models); tnt_layer_free drops one */
    int n_inits;              /* initializers a Keras config gave by weight name (tnt__layer_set_init) */
    struct { char weight[24]; tnt_initializer init; } inits[4];
    struct tnt__rules *rules; /* regularizers and constraints (layers/regularizer.h); NULL: none */
    tnt__dtype_policy dtype_policy; /* the global policy when made; set before build */
    void *priv;
};

/* Allocates a layer with ops and priv; name NULL means automatic. NULL + error on failure. */
tnt_layer *tnt__layer_new(const tnt__layer_ops *ops, const char *name, void *priv);
/* The initializer of weight name: one a Keras config set (a BatchNormalization's gamma_initializer:
 * zeros for a zero-init residual, RandomNormal(1, 0.02) in a GAN), else def. add_weight uses it. */
tnt_initializer tnt__layer_init_for(const tnt_layer *l, const char *weight, tnt_initializer def);
tnt_status tnt__layer_set_init(tnt_layer *l, const char *weight, tnt_initializer init);
/* Declares a weight during build; returns its index or -1 with an error. */
int tnt__layer_add_weight(tnt_layer *l, const char *name, tnt_shape shape, tnt_initializer init,
                          int64_t fan_in, int64_t fan_out);
/* Snake-case Keras base name for automatic names: "Conv2D" -> "conv2d" */
void tnt__layer_base_name(const char *class_name, char *out, size_t size);
/* Build of the 1-D form of a layer over (h, w, c) (ZeroPadding1D, Cropping1D, UpSampling1D):
 * (steps, c) is built as (steps, 1, c) by build_2d, and the output is given back as (steps', c). */
tnt_status tnt__build_steps_as_2d(tnt_layer *l, tnt_shape in, tnt_shape *out,
                                  tnt_status (*build_2d)(tnt_layer *l, tnt_shape in, tnt_shape *out));

/* The usual set_data_format: stores the choice in l->channels_first. */
tnt_status tnt__layer_take_data_format(tnt_layer *l, bool channels_first);
/* A channels-first layer that treats every channel alike (pooling, padding, cropping, upsampling):
 * (channels, spatial...) of n samples is in memory (n * channels, spatial..., 1), so it runs its
 * channels-last code on n * channels single-channel samples; build gives that code the shape
 * (spatial..., 1) and keeps the channel count. */
tnt_shape tnt__channels_last_view(const tnt_layer *l, tnt_shape in, int64_t *planes);
/* Moves the channel axis back: (spatial..., c) -> (c, spatial...) when channels first. */
tnt_shape tnt__channels_first_shape(const tnt_layer *l, tnt_shape out, int64_t planes);

/* "(l, r)" for one axis, "((t, b), (l, r))" for more: margins as Keras writes them, into buf. */
char *tnt__margins_str(char *buf, size_t size, int n_axes, const int *pairs);

/* Layer-specific queries and settings used by the graph (implemented in the layer's file). */
/* Embedding: true when mask_zero was set (the graph then derives the sequence mask ids != 0). */
bool tnt__embedding_mask_zero(const tnt_layer *l);
/* Masking: true, and its mask_value, when l is a Masking layer (the graph then derives the sequence
 * mask: steps with a feature other than mask_value). */
bool tnt__masking_value(const tnt_layer *l, float *mask_value);
/* Keras Masking's rule: whether one step of `features` values has a value other than mask_value. */
bool tnt__masking_step_kept(const float *step, int64_t features, float mask_value);
/* MultiHeadAttention: which optional inputs follow query, value and key (always inputs 0, 1, 2),
 * in this order: attention_mask (batch, Tq, Tv), query_mask (batch, Tq), value_mask (batch, Tv),
 * each 1 = attend, 0 = masked; and Keras's use_causal_mask. Called by the graph before build. */
tnt_status tnt__attention_configure(tnt_layer *l, bool has_attention_mask, bool has_query_mask,
                                    bool has_value_mask, bool use_causal_mask);
/* MultiHeadAttention call arguments beyond query and value, for writing a call: whether an
 * attention_mask input is used, and use_causal_mask. */
void tnt__attention_call_info(const tnt_layer *l, bool *has_attention_mask, bool *use_causal_mask);

/* The traced layer (core/traced.c): its table, whose from_config reads a config carrying the
 * operation graph ("tnt_ops") for a layer class of the user's own (any class name). */
extern const tnt__layer_ops tnt__traced_ops;

/* Dtype policies: Keras's name of p; the policy called name (NULL and an error naming it and the
 * supported ones when unknown; who prefixes the message). */
const char *tnt__dtype_policy_name(tnt__dtype_policy p);
tnt_status tnt__dtype_policy_parse(const char *name, tnt__dtype_policy *p, const char *who);
/* The layer computes in bf16: its policy is mixed_bfloat16 and the CPU computes bf16 natively
 * (otherwise it runs float32, with a warning once per process). Layers ask in plan_create. */
bool tnt__layer_bf16(const tnt_layer *l);
/* The global policy (tnt_mixed_precision_set_global_policy), which new layers take. */
tnt__dtype_policy tnt__dtype_policy_global(void);
/* A layer config's "dtype": a policy name (Keras 2), a {"class_name": "DTypePolicy" (Keras 3; also
 * FloatDTypePolicy, Policy), "config": {"name": ...}} object, or null/absent (the global policy). */
tnt_status tnt__kj_dtype_policy(const struct cJSON *config, tnt__dtype_policy *p, const struct tnt__kj_ctx *k);
/* An InputLayer config's "dtype": a float type (float32; float16, float64 and bfloat16 inputs are
 * cast to float32, as Keras casts them for the next layer) or an integer one (ids); absent:
 * float32. */
tnt_status tnt__kj_input_dtype(const struct cJSON *config, tnt__dtype_policy *p, const struct tnt__kj_ctx *k);

/* Internal initializer of LSTM's unit_forget_bias: the weight's ufb_base (Keras's bias_initializer;
 * zeros when unset), and ones in [fan_in, fan_out) (the forget gate's slice of the bias), as
 * Keras's LSTMCell concatenates them. */
#define TNT__INIT_UNIT_FORGET_BIAS ((tnt_initializer)64)
/* Initializers with parameters the enum does not carry (Keras's TruncatedNormal(stddev 0.02),
 * VarianceScaling(scale 1/3, fan_out), Constant(0.1), Identity, Orthogonal(gain 2), RandomNormal(0,
 * 0.01), ...): interned specs (initializer.c) whose tnt_initializer is TNT__INIT_SPEC_BASE + index. */
typedef enum tnt__init_kind {
    TNT__IK_RANDOM_NORMAL,    /* a mean, b stddev */
    TNT__IK_RANDOM_UNIFORM,   /* a minval, b maxval */
    TNT__IK_TRUNCATED_NORMAL, /* a mean, b stddev: redrawn beyond 2 stddev */
    TNT__IK_CONSTANT,         /* a value */
    TNT__IK_IDENTITY,         /* a gain: gain * eye(rows, cols) over (all axes but the last, the last) */
    TNT__IK_ORTHOGONAL,       /* a gain */
    TNT__IK_VARIANCE_SCALING, /* a scale, mode, dist */
} tnt__init_kind;
typedef enum { TNT__FAN_IN, TNT__FAN_OUT, TNT__FAN_AVG } tnt__fan_mode;
typedef enum { TNT__DIST_TRUNCATED, TNT__DIST_UNTRUNCATED, TNT__DIST_UNIFORM } tnt__init_dist;
typedef struct tnt__init_spec {
    tnt__init_kind kind;
    double a, b;
    tnt__fan_mode mode;
    tnt__init_dist dist;
} tnt__init_spec;
#define TNT__INIT_SPEC_BASE 4096
#define TNT__INIT_SPEC_MAX 256
/* The initializer of spec (an equal one if already interned); -1 with an error when the table is
 * full. */
int tnt__init_intern(const tnt__init_spec *spec);
/* init's spec, or NULL for the enum's own initializers. */
const tnt__init_spec *tnt__init_spec_of(tnt_initializer init);
/* init is one of the enum's up to last, or an interned spec: what a layer's options may hold. */
bool tnt__init_valid(tnt_initializer init, tnt_initializer last);
/* Fills a weight from its initializer, with a seed per weight. */
void tnt__weight_init(tnt__weight *w, uint64_t seed);
/* The same for an interned spec (initializer.c). */
void tnt__weight_init_spec(tnt__weight *w, const tnt__init_spec *spec, uint64_t seed);

#endif

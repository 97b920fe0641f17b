/* tarantella.h: public API of libtarantella, a Keras-style deep-learning engine in C with a
 * data-parallel runtime on MPI.
 *
 * Conventions
 * - Every public symbol starts with tnt_. Handles are opaque.
 * - Calls that can fail return tnt_status (TNT_OK == 0) or NULL; tnt_last_error() then gives a
 *   message that names the bad value. Bad input never aborts the process.
 * - Ownership: a function that takes a handle "consumes" it when documented so (layers added to a
 *   model, datasets passed to a dataset op, an optimizer passed to compile). A consumed handle is
 *   freed by its new owner, even when the call fails. Everything else is borrowed.
 * - Tensors are float32, row-major, channels last (NHWC). Shapes given to layers and datasets
 *   exclude the batch dimension.
 */
#ifndef TARANTELLA_H
#define TARANTELLA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define TNT_API __attribute__((visibility("default")))
#else
#define TNT_API
#endif

#define TNT_VERSION_MAJOR 0
#define TNT_VERSION_MINOR 1
#define TNT_VERSION_PATCH 0
#define TNT_VERSION_STRING "0.1.0"

/* ---------------------------------------------------------------------------------------------
 * Status and errors
 * ------------------------------------------------------------------------------------------- */
typedef enum tnt_status {
    TNT_OK = 0,
    TNT_ERR_ARG = -1,         /* a bad argument value */
    TNT_ERR_SHAPE = -2,       /* shapes that do not fit */
    TNT_ERR_IO = -3,          /* a file could not be opened, read or written */
    TNT_ERR_FORMAT = -4,      /* a file or string has the wrong format */
    TNT_ERR_NOMEM = -5,       /* out of memory */
    TNT_ERR_STATE = -6,       /* call out of order (e.g. fit before compile) */
    TNT_ERR_BACKEND = -7,     /* oneDNN failed */
    TNT_ERR_UNSUPPORTED = -8, /* a valid request this library does not support */
    TNT_ERR_MPI = -9,         /* MPI failed, or ranks disagree */
} tnt_status;

/* Message of the last failed call on this thread ("" when none). */
TNT_API const char *tnt_last_error(void);
/* Status of that error where it arose (TNT_OK when none): the kind of failure of a call that
 * returns NULL, e.g. TNT_ERR_IO for tnt_load_model on a missing file. */
TNT_API tnt_status tnt_last_status(void);
/* Name of a status code, e.g. "TNT_ERR_SHAPE". */
TNT_API const char *tnt_status_name(tnt_status status);
/* Sets this thread's last error (for custom layers and callbacks); returns status. */
TNT_API tnt_status tnt_set_error(tnt_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* Version of the library linked at run time, e.g. "0.1.0". */
TNT_API const char *tnt_version(void);

/* ---------------------------------------------------------------------------------------------
 * Runtime and ranks. Without the launcher the program runs as one rank.
 * ------------------------------------------------------------------------------------------- */
/* Reads the TNT_* settings from the environment, once (README.md lists them; a bad value is
 * TNT_ERR_ARG naming the variable), and starts MPI when the launcher started the program. */
TNT_API tnt_status tnt_init(int *argc, char ***argv);
TNT_API void tnt_finalize(void);
TNT_API int tnt_get_rank(void);
TNT_API int tnt_get_size(void);
TNT_API int tnt_get_master_rank(void);
TNT_API bool tnt_is_master_rank(void);
/* GPUs this process can use (0 without a usable backend: no driver, no device, a build without
 * GPU kernels), and the device tnt_init chose by TNT_DEVICE, in one line: "gpu 0: NVIDIA H100 80GB
 * HBM3 (0000:1b:00.0)", "cpu: TNT_DEVICE=cpu", "cpu: no libcuda.so.1"; before tnt_init what the
 * backend offers ("gpus: 4 found, tnt_init chooses one", "cpu: no libcuda.so.1"). */
TNT_API int tnt_gpu_device_count(void);
TNT_API const char *tnt_gpu_status(void);
/* TF32 tensor cores for float32 GEMMs and convolutions on the GPU (tf.config.experimental.
 * enable_tensor_float_32_execution): off by default (TNT_GPU_TF32=1 turns it on); this call wins. */
TNT_API void tnt_gpu_set_tf32(bool enabled);
TNT_API bool tnt_gpu_tf32_enabled(void);

typedef enum tnt_log_level { TNT_LOG_DEBUG, TNT_LOG_INFO, TNT_LOG_WARNING, TNT_LOG_ERROR } tnt_log_level;
/* printf-style log line, prefixed with level and rank; printed on the master only unless
 * TNT_LOG_ON_ALL_DEVICES is set. The level threshold comes from TNT_LOG_LEVEL, as tnt_init read it
 * (WARNING before tnt_init). */
TNT_API void tnt_log(tnt_log_level level, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* ---------------------------------------------------------------------------------------------
 * Shapes and tensors
 * ------------------------------------------------------------------------------------------- */
#define TNT_MAX_DIMS 8
typedef struct tnt_shape {
    int ndim;
    int64_t dim[TNT_MAX_DIMS];
} tnt_shape;
/* TNT_SHAPE(28, 28, 1) */
#define TNT_SHAPE(...)                                                                            \
    ((tnt_shape){.ndim = (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)),              \
                 .dim = {__VA_ARGS__}})
TNT_API int64_t tnt_shape_numel(tnt_shape shape);
/* Writes "(28, 28, 1)" into buf; returns buf. */
TNT_API char *tnt_shape_str(tnt_shape shape, char *buf, size_t size);

/* A float32 array with a shape. Owned by whoever created it unless documented otherwise. */
typedef struct tnt_tensor {
    tnt_shape shape;
    float *data;
} tnt_tensor;
TNT_API tnt_tensor *tnt_tensor_new(tnt_shape shape); /* zero-filled */
TNT_API void tnt_tensor_free(tnt_tensor *t);

/* ---------------------------------------------------------------------------------------------
 * Layers (Keras names and defaults). Options structs may be NULL; zero fields mean the Keras
 * default. Constructors return NULL on bad arguments (see tnt_last_error()).
 * ------------------------------------------------------------------------------------------- */
typedef struct tnt_layer tnt_layer;

typedef enum tnt_activation {
    TNT_ACT_LINEAR = 0,
    TNT_ACT_RELU,
    TNT_ACT_SIGMOID,
    TNT_ACT_TANH,
    TNT_ACT_SOFTMAX,    /* over the last axis */
    TNT_ACT_ELU,        /* alpha 1 */
    TNT_ACT_SELU,
    TNT_ACT_GELU,       /* exact (erf), Keras's default approximate=False */
    TNT_ACT_SWISH,      /* also called silu */
    TNT_ACT_SOFTPLUS,
    TNT_ACT_LEAKY_RELU, /* alpha 0.2 as tf.nn.leaky_relu; the LeakyReLU layer's 0.3 via alpha */
    TNT_ACT_SOFTSIGN,   /* x / (1 + |x|) */
    TNT_ACT_HARD_SIGMOID,    /* Keras 2: clip(0.2 x + 0.5, 0, 1) */
    TNT_ACT_HARD_SIGMOID_V3, /* Keras 3's hard_sigmoid, relu6(x + 3) / 6 ("hard_sigmoid_v3" here) */
    TNT_ACT_HARD_SILU,  /* x relu6(x + 3) / 6, also called hard_swish */
    TNT_ACT_EXPONENTIAL,
    TNT_ACT_RELU6,
    TNT_ACT_MISH,       /* x tanh(softplus(x)) */
    TNT_ACT_LOG_SOFTMAX, /* over the last axis */
    TNT_ACT_CELU,       /* alpha 1 */
    TNT_ACT_HARD_TANH,  /* clip(x, -1, 1) */
    TNT_ACT_TANH_SHRINK, /* x - tanh(x) */
    TNT_ACT_SOFT_SHRINK, /* threshold 0.5 */
    TNT_ACT_HARD_SHRINK, /* threshold 0.5 */
    TNT_ACT_SQUAREPLUS, /* (x + sqrt(x^2 + 4)) / 2 */
    TNT_ACT_LOG_SIGMOID,
    TNT_ACT_SPARSE_PLUS,
    TNT_ACT_SPARSE_SIGMOID,
    TNT_ACT_SPARSEMAX,  /* over the last axis */
    TNT_ACT_COUNT
} tnt_activation;
/* Keras name ("relu", "silu", "hard_swish", ...) to enum; -1 when unknown. Keras 3's glu (it halves
 * the last axis) and threshold (it takes arguments) are not activations here. */
TNT_API int tnt_activation_from_name(const char *name);
TNT_API const char *tnt_activation_name(tnt_activation act);

/* CAUSAL: Conv1D only (left padding (kernel_size - 1) * dilation, as Keras). */
typedef enum tnt_padding { TNT_PADDING_VALID = 0, TNT_PADDING_SAME, TNT_PADDING_CAUSAL } tnt_padding;

typedef enum tnt_initializer {
    TNT_INIT_DEFAULT = 0, /* glorot_uniform for kernels, zeros for biases */
    TNT_INIT_GLOROT_UNIFORM,
    TNT_INIT_GLOROT_NORMAL,
    TNT_INIT_HE_UNIFORM,
    TNT_INIT_HE_NORMAL,
    TNT_INIT_LECUN_UNIFORM,
    TNT_INIT_LECUN_NORMAL,
    TNT_INIT_ZEROS,
    TNT_INIT_ONES,
    TNT_INIT_RANDOM_UNIFORM, /* Keras RandomUniform(-0.05, 0.05): Embedding's default */
    TNT_INIT_RANDOM_NORMAL,  /* Keras RandomNormal(0, 0.05) */
    TNT_INIT_ORTHOGONAL,     /* Keras Orthogonal(gain 1): recurrent kernels' default */
} tnt_initializer;

typedef struct tnt_layer_opts {
    const char *name; /* NULL: Keras-style automatic name, e.g. "dense_1" */
    tnt_activation activation;
    float activation_alpha; /* leaky relu slope; 0 = default */
    bool no_bias;           /* use_bias=False */
    tnt_initializer kernel_initializer, bias_initializer;
    int strides[3];  /* conv/pool, per spatial axis (1-D: [0], 2-D: [0..1], 3-D: [0..2]); 0 = Keras
                        default (1 for conv, the pool size for pooling) */
    tnt_padding padding;
    int dilation[3]; /* conv, per spatial axis as strides; 0 = 1 */
} tnt_layer_opts;

/* A dimension of TNT_DIM_NONE (Keras's None) takes any size: the model is re-instantiated for
 * the shapes the data brings (fully convolutional and sequence models); no weight may depend on
 * it. The shape queries then report -1 there. */
#define TNT_DIM_NONE (-1)
TNT_API tnt_layer *tnt_input_layer(tnt_shape shape, const char *name);
TNT_API tnt_layer *tnt_dense(int units, const tnt_layer_opts *opts);
TNT_API tnt_layer *tnt_conv2d(int filters, int kernel_h, int kernel_w, const tnt_layer_opts *opts);
TNT_API tnt_layer *tnt_max_pooling2d(int pool_h, int pool_w, const tnt_layer_opts *opts);
TNT_API tnt_layer *tnt_average_pooling2d(int pool_h, int pool_w, const tnt_layer_opts *opts);
TNT_API tnt_layer *tnt_flatten(const char *name);
/* target excludes the batch dimension; one entry may be -1 (inferred) */
TNT_API tnt_layer *tnt_reshape(tnt_shape target, const char *name);
/* seed 0: derived from the model seed and the layer's position */
TNT_API tnt_layer *tnt_dropout(float rate, uint64_t seed, const char *name);
TNT_API tnt_layer *tnt_activation_layer(tnt_activation act, const tnt_layer_opts *opts);
/* (h, w, c) -> (c): the mean (GlobalAveragePooling2D) or maximum (GlobalMaxPooling2D) of each
 * channel, keepdims=False; the max gradient is split equally among tied maxima. */
TNT_API tnt_layer *tnt_global_average_pooling2d(const char *name);
TNT_API tnt_layer *tnt_global_max_pooling2d(const char *name);
/* (h, w, c) -> (h+top+bottom, w+left+right, c), zeros around; Keras padding
 * ((top, bottom), (left, right)), each >= 0. */
TNT_API tnt_layer *tnt_zero_padding2d(int top, int bottom, int left, int right, const char *name);
/* (h, w, c) -> (h-top-bottom, w-left-right, c); building fails if no row or column is left. */
TNT_API tnt_layer *tnt_cropping2d(int top, int bottom, int left, int right, const char *name);
/* (h, w, c) -> (h*size_h, w*size_w, c); interpolation NULL or "nearest" (each cell repeated) or
 * "bilinear" (TensorFlow 2's half-pixel resize, as tf.keras 2.x and Keras 3). */
TNT_API tnt_layer *tnt_upsampling2d(int size_h, int size_w, const char *interpolation, const char *name);
/* (steps, in) -> (out_steps, filters): Keras Conv1D, kernel (kernel_size, in, filters); uses
 * opts->strides[0], dilation[0], padding (valid, same or causal), activation, no_bias. */
TNT_API tnt_layer *tnt_conv1d(int filters, int kernel_size, const tnt_layer_opts *opts);
/* (steps, c) -> (out_steps, c): Keras MaxPooling1D; opts->strides[0] (0: pool_size), padding. */
TNT_API tnt_layer *tnt_max_pooling1d(int pool_size, const tnt_layer_opts *opts);
/* (steps, c) -> (c): the mean of each channel over the steps (keepdims=False). */
TNT_API tnt_layer *tnt_global_average_pooling1d(const char *name);
/* Keras BatchNormalization over the last axis (channels, or features for rank-1 inputs). */
TNT_API tnt_layer *tnt_batch_normalization(float momentum /* 0 = 0.99 */, float epsilon /* 0 = 1e-3 */, const char *name);

/* Custom layers: the user supplies shape inference, forward and backward, and declares weights
 * in build with tnt_layer_add_weight. Each function gets the layer and user; any may fail with a
 * status (and tnt_set_error for the message). Single input, single output. */
typedef struct tnt_custom_layer_def {
    const char *class_name; /* e.g. "PositionEmbedding"; required */
    void *user;
    /* Required: the output shape (without batch) from the input shape; declare weights here. */
    tnt_status (*build)(tnt_layer *l, tnt_shape in_shape, tnt_shape *out_shape, void *user);
    /* Required: y (batch, out...) from x (batch, in...). */
    tnt_status (*forward)(tnt_layer *l, int64_t batch, const float *x, float *y, bool training, void *user);
    /* Required for training: dx (NULL when not needed) and every trainable weight's gradient
     * (tnt_layer_weight_grad, to be overwritten, not added to) from dy. */
    tnt_status (*backward)(tnt_layer *l, int64_t batch, const float *x, const float *y, const float *dy,
                           float *dx, void *user);
    void (*destroy)(void *user); /* may be NULL; called once when the layer is freed */
} tnt_custom_layer_def;
TNT_API tnt_layer *tnt_custom_layer(const tnt_custom_layer_def *def, const char *name);
/* In build: declares a weight; returns its index, or -1 with an error. */
TNT_API int tnt_layer_add_weight(tnt_layer *l, const char *name, tnt_shape shape, tnt_initializer init,
                                 bool trainable);
/* In forward and backward: the values of weight i, and its gradient (NULL when not trainable). */
TNT_API float *tnt_layer_weight_value(tnt_layer *l, int i);
TNT_API float *tnt_layer_weight_grad(tnt_layer *l, int i);
TNT_API const char *tnt_layer_name(const tnt_layer *layer);
TNT_API const char *tnt_layer_class(const tnt_layer *layer);
/* Frees a layer that was never added to a model. */
TNT_API void tnt_layer_free(tnt_layer *layer);
/* Keras mixed precision, "float32" or "mixed_bfloat16": Dense, Conv and attention layers compute
 * in bf16 (avx512_bf16 or AMX; elsewhere float32, with a warning), weights, optimizer state and the
 * loss stay float32. Layers made afterwards take it; tnt_layer_set_dtype_policy sets one layer's. */
TNT_API tnt_status tnt_mixed_precision_set_global_policy(const char *name);
TNT_API const char *tnt_mixed_precision_global_policy(void);
/* Whether mixed_bfloat16 layers compute in bf16 here: the CPU has avx512_bf16 or AMX and neither
 * ONEDNN_MAX_CPU_ISA nor TNT_MAX_CPU_ISA caps the ISA below it. Else they compute float32, bit
 * for bit as under the float32 policy. */
TNT_API bool tnt_mixed_precision_native(void);
#include "tarantella_layers.h" /* ReLU, Conv2DTranspose, ...: the rest of Keras's layers */
#include "tarantella_ops.h"    /* operation graphs (custom Keras code) and the traced layer */

/* ---------------------------------------------------------------------------------------------
 * Optimizers (Keras 2.11+ formulas and defaults). Hyperparameters of 0 mean the Keras default,
 * except where a 0 is meaningful (momentum, which defaults to 0 anyway).
 * ------------------------------------------------------------------------------------------- */
typedef struct tnt_optimizer tnt_optimizer;
typedef struct tnt_optimizer_opts {
    float learning_rate;
    float momentum;  /* SGD, RMSprop */
    bool nesterov;   /* SGD */
    float beta_1, beta_2, epsilon, rho;
    bool amsgrad;    /* Adam */
    bool centered;   /* RMSprop */
    float initial_accumulator_value; /* Adagrad; default 0.1 */
    float weight_decay; /* decoupled weight decay, as Keras's optimizers' weight_decay */
    float clipvalue;    /* Keras clipvalue: each gradient value clipped to [-clipvalue, clipvalue]
                           before the update (after the ranks' sum); 0: none */
} tnt_optimizer_opts;
/* name: "sgd", "adam", "adamw", "rmsprop", "adagrad", "adadelta", "adamax", "nadam"
 * (case-insensitive). "adamw" is Keras's AdamW: Adam with decoupled weight decay, weight_decay
 * defaulting to 0.004. "ftrl" is rejected: it is not supported (as in Tarantella). */
TNT_API tnt_optimizer *tnt_optimizer_new(const char *name, const tnt_optimizer_opts *opts);
TNT_API tnt_optimizer *tnt_sgd(float learning_rate);
TNT_API tnt_optimizer *tnt_adam(float learning_rate);
/* AdamW; 0 for either argument means its default (0.001, 0.004). */
TNT_API tnt_optimizer *tnt_adamw(float learning_rate, float weight_decay);
TNT_API void tnt_optimizer_free(tnt_optimizer *opt);
TNT_API float tnt_optimizer_get_lr(const tnt_optimizer *opt);
TNT_API tnt_status tnt_optimizer_set_lr(tnt_optimizer *opt, float learning_rate);
TNT_API int64_t tnt_optimizer_iterations(const tnt_optimizer *opt);
TNT_API const char *tnt_optimizer_name(const tnt_optimizer *opt);

/* ---------------------------------------------------------------------------------------------
 * Learning-rate schedules (Keras's keras.optimizers.schedules, and the warm-up schedules of the
 * Tarantella tutorials). A schedule maps the 0-based step, the optimizer's iteration count
 * before the step, to a learning rate. Constructors return NULL on bad arguments
 * (decay_steps <= 0, non-increasing boundaries, NULL arrays, ...).
 * ------------------------------------------------------------------------------------------- */
typedef struct tnt_lr_schedule tnt_lr_schedule;
/* initial * decay_rate^(step / decay_steps); the exponent floored if staircase. */
TNT_API tnt_lr_schedule *tnt_exponential_decay(float initial, int64_t decay_steps, float decay_rate,
                                               bool staircase);
/* values[0] while step <= boundaries[0], values[i] while boundaries[i-1] < step <= boundaries[i],
 * values[n_boundaries] after; boundaries strictly increasing, values has n_boundaries + 1 entries. */
TNT_API tnt_lr_schedule *tnt_piecewise_constant_decay(const int64_t *boundaries, const float *values,
                                                      int n_boundaries);
/* (initial - end_lr) * (1 - step / decay_steps)^power + end_lr, step capped at decay_steps;
 * with cycle, decay_steps grows to the next multiple of itself instead. Keras defaults:
 * end_lr 0.0001, power 1, cycle false. */
TNT_API tnt_lr_schedule *tnt_polynomial_decay(float initial, int64_t decay_steps, float end_lr, float power,
                                              bool cycle);
/* initial * ((1 - alpha) * 0.5 * (1 + cos(pi * min(step, decay_steps) / decay_steps)) + alpha). */
TNT_API tnt_lr_schedule *tnt_cosine_decay(float initial, int64_t decay_steps, float alpha);
/* Keras 2.13+ CosineDecay with warmup_target: linear from initial to warmup_target over
 * warmup_steps, then the cosine decay from warmup_target over decay_steps. */
TNT_API tnt_lr_schedule *tnt_cosine_decay_warmup(float initial, int64_t decay_steps, float alpha,
                                                 float warmup_target, int64_t warmup_steps);
/* initial / (1 + decay_rate * step / decay_steps); the quotient floored if staircase. */
TNT_API tnt_lr_schedule *tnt_inverse_time_decay(float initial, int64_t decay_steps, float decay_rate,
                                                bool staircase);
/* The ResNet-50 tutorial's ExpDecayWithWarmupSchedule. initial = base_lr * num_ranks (linear
 * scaling rule; num_ranks 0 means tnt_get_size() at the time of the call); for
 * step <= warmup_steps: initial * warmup_rate * step / warmup_steps (0 at step 0), after that
 * tnt_exponential_decay(initial, decay_steps, decay_rate, staircase). */
TNT_API tnt_lr_schedule *tnt_exp_decay_with_warmup(float base_lr, int num_ranks, int64_t decay_steps,
                                                   float decay_rate, bool staircase, int64_t warmup_steps,
                                                   float warmup_rate);
/* The tutorial's PiecewiseConstantDecayWithWarmup (TF official ResNet): the linear scaling rule
 * by the global batch size, rescaled = base_lr * batch_size / 256 (base_lr 0.1 there);
 * steps_per_epoch = epoch_size / batch_size (integer division); for
 * step < warmup_epochs * steps_per_epoch: rescaled * step / warmup_steps, after that piecewise
 * constant with boundaries[i] * steps_per_epoch (boundaries in epochs) and values
 * rescaled * multipliers[i] (n_boundaries + 1 multipliers). */
TNT_API tnt_lr_schedule *tnt_piecewise_constant_decay_with_warmup(float base_lr, int64_t batch_size,
                                                                  int64_t epoch_size, int64_t warmup_epochs,
                                                                  const int64_t *boundaries,
                                                                  const float *multipliers, int n_boundaries);
/* The value at step >= 0 (NaN with an error for a NULL schedule or a negative step). */
TNT_API float tnt_lr_schedule_value(const tnt_lr_schedule *s, int64_t step);
TNT_API void tnt_lr_schedule_free(tnt_lr_schedule *s);
/* Consumes s (also on failure; NULL is an error). The optimizer then uses
 * lr = s(iterations) for every step, as Keras does; tnt_optimizer_get_lr returns the value for
 * the next step and tnt_optimizer_set_lr is refused. A second call replaces the schedule. */
TNT_API tnt_status tnt_optimizer_set_schedule(tnt_optimizer *opt, tnt_lr_schedule *s);

/* ---------------------------------------------------------------------------------------------
 * Losses and metrics
 * ------------------------------------------------------------------------------------------- */
typedef enum tnt_loss_kind {
    TNT_LOSS_NONE = 0,
    TNT_SPARSE_CATEGORICAL_CROSSENTROPY,
    TNT_CATEGORICAL_CROSSENTROPY,
    TNT_BINARY_CROSSENTROPY,
    TNT_MEAN_SQUARED_ERROR,
    TNT_MEAN_ABSOLUTE_ERROR,
    TNT_KL_DIVERGENCE,      /* sum y log(y / p), y and p clipped to [1e-7, 1] */
    TNT_HINGE,              /* mean max(1 - y p, 0); labels all in {0, 1} become {-1, 1} */
    TNT_SQUARED_HINGE,      /* mean max(1 - y p, 0)^2, labels as hinge */
    TNT_CATEGORICAL_HINGE,  /* max(0, max((1 - y) p) - sum y p + 1) */
    TNT_HUBER,              /* mean of e^2/2 where |e| <= delta, else delta |e| - delta^2/2 */
    TNT_LOG_COSH,           /* mean log cosh(p - y) */
    TNT_POISSON,            /* mean p - y log(p + 1e-7) */
    TNT_MEAN_ABSOLUTE_PERCENTAGE_ERROR, /* 100 mean |y - p| / max(|y|, 1e-7) */
    TNT_MEAN_SQUARED_LOGARITHMIC_ERROR, /* mean (log(max(p, 1e-7) + 1) - log(max(y, 1e-7) + 1))^2 */
    TNT_COSINE_SIMILARITY,  /* -sum l2_normalize(y) l2_normalize(p) */
    TNT_LOSS_KIND_COUNT     /* not a loss: the number of kinds */
} tnt_loss_kind;
TNT_API int tnt_loss_from_name(const char *name); /* -1 when unknown */
TNT_API const char *tnt_loss_name(tnt_loss_kind loss);
/* Keras's loss objects called outside fit, loss(y_true, y_pred, sample_weight): n samples of
 * outputs of shape out (batch excluded), labels laid out as for training; *value = sum_i w_i
 * loss_i / n (w NULL: all 1), each loss_i reduced over the last axis and averaged over the rest. */
TNT_API tnt_status tnt_loss_value(tnt_loss_kind kind, bool from_logits, float label_smoothing, float huber_delta,
                                  tnt_shape out, int64_t n, const float *pred, const float *y_true,
                                  const float *sample_weight, double *value);
/* Keras's metric objects outside fit: update_state adds n samples to state (tnt_metric_state_size
 * doubles, zeroed by the caller to reset), result reads the value. spec: a metric name as compile
 * takes it ("auc", "precision:0.3", ...); loss: the label layout (sparse labels with
 * TNT_SPARSE_CATEGORICAL_CROSSENTROPY; TNT_LOSS_NONE: one label per output value). */
TNT_API int64_t tnt_metric_state_size(void);
TNT_API tnt_status tnt_metric_update_state(const char *spec, tnt_loss_kind loss, tnt_shape out, int64_t n,
                                           const float *pred, const float *y_true, const float *sample_weight,
                                           double *state);
TNT_API tnt_status tnt_metric_result(const char *spec, tnt_loss_kind loss, const double *state, double *value);

#include "tarantella/data.h" /* datasets: a tf.data-like pipeline, tnt_batch, iterators */

/* ---------------------------------------------------------------------------------------------
 * Logs, history and callbacks
 * ------------------------------------------------------------------------------------------- */
#define TNT_MAX_LOGS 64     /* entries beyond it are dropped with a warning */
#define TNT_LOG_NAME_MAX 96 /* longer names are cut with a warning */
/* Keras's logs dict: "loss", "accuracy", "val_loss", ... */
typedef struct tnt_logs {
    int n;
    char names[TNT_MAX_LOGS][TNT_LOG_NAME_MAX];
    double values[TNT_MAX_LOGS];
} tnt_logs;
/* Returns false when name is absent. */
TNT_API bool tnt_logs_get(const tnt_logs *logs, const char *name, double *value);

typedef struct tnt_history tnt_history;
TNT_API int tnt_history_epochs(const tnt_history *h);
/* The logs of the i-th epoch run by fit (0-based), NULL when out of range. */
TNT_API const tnt_logs *tnt_history_logs(const tnt_history *h, int i);
/* value of name at epoch i; NAN when absent */
TNT_API double tnt_history_get(const tnt_history *h, const char *name, int i);
TNT_API void tnt_history_free(tnt_history *h);

typedef struct tnt_model tnt_model;
/* A custom callback: any pointer may be NULL. Return a nonzero status to stop training with an
 * error. logs may be modified by earlier callbacks. */
typedef struct tnt_callback {
    void *user;
    tnt_status (*on_train_begin)(tnt_model *m, const tnt_logs *logs, void *user);
    tnt_status (*on_train_end)(tnt_model *m, const tnt_logs *logs, void *user);
    tnt_status (*on_epoch_begin)(tnt_model *m, int epoch, const tnt_logs *logs, void *user);
    tnt_status (*on_epoch_end)(tnt_model *m, int epoch, const tnt_logs *logs, void *user);
    tnt_status (*on_train_batch_begin)(tnt_model *m, int64_t batch, const tnt_logs *logs, void *user);
    tnt_status (*on_train_batch_end)(tnt_model *m, int64_t batch, const tnt_logs *logs, void *user);
    tnt_status (*on_test_begin)(tnt_model *m, const tnt_logs *logs, void *user);
    tnt_status (*on_test_end)(tnt_model *m, const tnt_logs *logs, void *user);
    tnt_status (*on_predict_begin)(tnt_model *m, const tnt_logs *logs, void *user);
    tnt_status (*on_predict_end)(tnt_model *m, const tnt_logs *logs, void *user);
    /* Frees user (tnt_callback_free calls it); NULL: nothing to free. */
    void (*destroy)(void *user);
    /* Tarantella's run_on_all_ranks=False: fit, evaluate and predict call this callback's
     * functions on the master rank only. Default false: every rank, with the same (global) logs. */
    bool master_only;
    /* Tarantella's aggregate_logs=False: on_train_batch_end and on_epoch_end receive this rank's
     * own training figures (its share of every batch) instead of the exact global ones; the
     * validation figures stay global. Default false. */
    bool local_logs;
    /* evaluate's (and fit's validation's) and predict's batch hooks, as Keras calls them: begin with
     * empty logs; test_batch_end with the running loss and metrics of this rank's batches so far
     * (the global figures with one rank), predict_batch_end with empty logs and the batch's
     * predictions readable by tnt_model_batch_outputs (Keras's logs["outputs"]). */
    tnt_status (*on_test_batch_begin)(tnt_model *m, int64_t batch, const tnt_logs *logs, void *user);
    tnt_status (*on_test_batch_end)(tnt_model *m, int64_t batch, const tnt_logs *logs, void *user);
    tnt_status (*on_predict_batch_begin)(tnt_model *m, int64_t batch, const tnt_logs *logs, void *user);
    tnt_status (*on_predict_batch_end)(tnt_model *m, int64_t batch, const tnt_logs *logs, void *user);
    /* Keras's ReduceLROnPlateau and LearningRateScheduler put the learning rate into the epoch's
     * logs: with this set, fit adds "lr" (and Keras 3's "learning_rate") to the epoch-end logs
     * just before this callback's on_epoch_end, so the callbacks after it and the History (which
     * comes last, as in Keras) see it. */
    bool adds_lr;
} tnt_callback;
/* Asks fit to stop at the end of the current epoch (EarlyStopping's model.stop_training). */
TNT_API void tnt_model_stop_training(tnt_model *m);
/* Inside on_predict_batch_end: the batch's predictions (Keras's logs["outputs"]) at *data, valid
 * during the hook, of *shape (the batch's rows, then tnt_model_output_shape: several outputs
 * packed per row). This rank's rows: on p ranks its share of the global batch (none when the
 * batch has fewer samples than ranks). TNT_ERR_STATE outside the hook. */
TNT_API tnt_status tnt_model_batch_outputs(const tnt_model *m, const float **data, tnt_shape *shape);
/* The seed the model's weights are drawn from when first needed (and dropout's, unless compile
 * gives one); 0 = 42. Weights already drawn keep their values: set it right after making the
 * model, so that the same seed gives the same weights whatever reads them first (Keras's
 * set_random_seed). TNT_ERR_ARG for a NULL model. */
TNT_API tnt_status tnt_model_set_seed(tnt_model *m, uint64_t seed);

#include "tarantella_callbacks.h" /* EarlyStopping, ModelCheckpoint, ...: Keras's built-in callbacks */

/* ---------------------------------------------------------------------------------------------
 * Models
 * ------------------------------------------------------------------------------------------- */
/* An empty Sequential model. */
TNT_API tnt_model *tnt_sequential(const char *name);
/* Appends a layer; consumes it. The first layer must be an InputLayer, unless
 * tnt_model_build() is given the input shape. Shape errors are reported here, naming the layer
 * and both shapes, once the input shape is known. */
TNT_API tnt_status tnt_model_add(tnt_model *m, tnt_layer *layer);
/* Fixes the input shape (without batch) when the model has no InputLayer. */
TNT_API tnt_status tnt_model_build(tnt_model *m, tnt_shape input_shape);
TNT_API void tnt_model_free(tnt_model *m);

/* Functional models (Keras's functional API). A graph holds symbolic tensors (Keras's
 * KerasTensor) made by inputs and layer calls; a model is then cut from it by naming inputs and
 * outputs. Symbolic tensors are small values that the graph owns; a failed call returns one with
 * id < 0, and passing it on fails the next call too, so a whole graph can be checked once, at
 * tnt_functional. Tensors of a multi-input model are fed as one dataset element holding the
 * inputs' values one after the other (per sample); the same for the labels of several outputs.
 *
 *   tnt_graph *g = tnt_graph_new();
 *   tnt_ktensor in = tnt_graph_input(g, TNT_SHAPE(32, 32, 3), "image");
 *   tnt_ktensor x = tnt_call(g, tnt_conv2d(16, 3, 3, &(tnt_layer_opts){.padding = TNT_PADDING_SAME}), in);
 *   tnt_ktensor y = tnt_call2(g, tnt_add(NULL), x, tnt_call(g, tnt_conv2d(16, 1, 1, NULL), in));
 *   tnt_model *m = tnt_functional(g, 1, &in, 1, &y, "resnet_block");
 *   tnt_graph_free(g);
 */
typedef struct tnt_graph tnt_graph;
typedef struct tnt_ktensor {
    int id; /* < 0: the call that made it failed */
} tnt_ktensor;
TNT_API tnt_graph *tnt_graph_new(void);
/* Models cut from the graph stay valid after it is freed. */
TNT_API void tnt_graph_free(tnt_graph *g);
/* An input (Keras's keras.Input) of shape without batch; name NULL: "input_1", ... */
TNT_API tnt_ktensor tnt_graph_input(tnt_graph *g, tnt_shape shape, const char *name);
/* Calls layer on inputs. The first call consumes the layer (also on failure); calling the same
 * layer again shares its weights (the gradients of all calls are summed). Every call must see
 * the same input shapes. */
TNT_API tnt_ktensor tnt_call(tnt_graph *g, tnt_layer *layer, tnt_ktensor x);
TNT_API tnt_ktensor tnt_call2(tnt_graph *g, tnt_layer *layer, tnt_ktensor a, tnt_ktensor b);
TNT_API tnt_ktensor tnt_call_n(tnt_graph *g, tnt_layer *layer, int n, const tnt_ktensor *inputs);
/* Calls a layer with several outputs (Keras's list of outputs: a recurrent layer with
 * return_state gives output, h (and c for LSTM); Bidirectional with merge_mode NONE gives the
 * forward and backward outputs, then the states): writes up to cap of them to outputs and
 * returns how many the layer has (-1 on failure). tnt_call returns output 0 of such a layer.
 * A recurrent layer's (or Bidirectional's) inputs after the sequence are its initial states
 * (Keras's initial_state=[h, c]; Bidirectional: the forward ones, then the backward ones). */
TNT_API int tnt_call_outputs(tnt_graph *g, tnt_layer *layer, int n_inputs, const tnt_ktensor *inputs, int cap,
                             tnt_ktensor *outputs);
/* MultiHeadAttention(query, value, key, attention_mask, use_causal_mask) as Keras: key.id < 0
 * means key = value; attention_mask.id < 0 means none, otherwise a (Tq, Tv) tensor of 1 (attend)
 * and 0 (masked). Sequence masks of query and value (Embedding mask_zero) are applied too. */
TNT_API tnt_ktensor tnt_call_attention(tnt_graph *g, tnt_layer *layer, tnt_ktensor query, tnt_ktensor value,
                                       tnt_ktensor key, tnt_ktensor attention_mask, bool use_causal_mask);
/* Calls a model as a layer: its layers join the graph with their weights (shared with inner:
 * train through the outer model once it is used). inner is borrowed. outputs receives
 * tnt_model_num_outputs(inner) tensors. */
TNT_API tnt_status tnt_call_model(tnt_graph *g, tnt_model *inner, int n_inputs, const tnt_ktensor *inputs,
                                  tnt_ktensor *outputs);
/* The model from inputs to outputs; layers not on a path between them are left out. */
TNT_API tnt_model *tnt_functional(tnt_graph *g, int n_inputs, const tnt_ktensor *inputs, int n_outputs,
                                  const tnt_ktensor *outputs, const char *name);
TNT_API tnt_shape tnt_ktensor_shape(const tnt_graph *g, tnt_ktensor t);
TNT_API int tnt_model_num_inputs(const tnt_model *m);
TNT_API int tnt_model_num_outputs(const tnt_model *m);
/* Shape of input or output i (without batch; -1 where it follows a TNT_DIM_NONE input). */
TNT_API tnt_shape tnt_model_input_shape_at(const tnt_model *m, int i);
TNT_API tnt_shape tnt_model_output_shape_at(const tnt_model *m, int i);
/* As above, for the input shapes last used (None dimensions filled: the data's sizes). */
TNT_API tnt_shape tnt_model_output_shape_now(const tnt_model *m, int i);
/* The name of input (output) i: its key when the Keras model's inputs (outputs) are a dict,
 * else its InputLayer's (its producing layer's) name; NULL when out of range. */
TNT_API const char *tnt_model_io_name(const tnt_model *m, bool output, int i);
/* Fills the None dimensions of the inputs (one shape each, batch excluded) for the next calls;
 * needed only for several inputs, whose values datasets pack (a single input takes the data's). */
TNT_API tnt_status tnt_model_set_input_shapes(tnt_model *m, int n, const tnt_shape *shapes);
/* Keras's model.reset_states(): the states of its stateful recurrent layers back to zeros. */
TNT_API void tnt_model_reset_states(tnt_model *m);
TNT_API void tnt_layer_reset_states(tnt_layer *l); /* one layer's (Keras layer.reset_states()) */

/* Makes the model data-parallel: the Tarantella "wrap" line. fit, evaluate and predict then split
 * each global batch of the dataset into one micro-batch per rank, weights are broadcast from the
 * master at the first use after compile or set_weights, gradients are summed with fused
 * allreduces overlapped with backward, and losses and metrics are combined exactly. With one
 * rank (no launcher) it changes nothing. Call it before or after compile. */
TNT_API tnt_status tnt_distribute(tnt_model *m);

/* How the gradient allreduces run alongside backward. */
typedef enum tnt_comm_mode {
    TNT_COMM_MODE_DEFAULT = 0, /* TNT_COMM_MODE as read by tnt_init (default thread) */
    TNT_COMM_MODE_THREAD,      /* a comm thread runs blocking MPI_Allreduce calls */
    TNT_COMM_MODE_NONBLOCKING, /* MPI_Iallreduce, progressed by the compute thread */
} tnt_comm_mode;

/* How gradients travel in the allreduce. */
typedef enum tnt_compression {
    TNT_COMPRESSION_DEFAULT = 0, /* TNT_COMPRESSION as read by tnt_init (default none) */
    TNT_COMPRESSION_NONE,        /* float32 */
    TNT_COMPRESSION_BF16,        /* bfloat16 on the wire, each sum in float32 (as Horovod's fp16) */
} tnt_compression;

/* How the gradients of one node's ranks are summed. */
typedef enum tnt_reducer_kind {
    TNT_REDUCER_DEFAULT = 0, /* TNT_REDUCER as read by tnt_init (default auto: sharded for a model
                              * that trains on the CPU, node on a GPU) */
    TNT_REDUCER_FLAT,        /* one MPI_Allreduce per bucket across all ranks */
    TNT_REDUCER_NODE,        /* node-aware: the ranks of a node sum their buckets in shared memory,
                              * each its slice; the slices cross nodes as allreduces */
    TNT_REDUCER_SHARDED,     /* node-aware with a sharded optimizer (ZeRO-1): each rank of a node
                              * updates its slice of the weights; optimizer slots live once per node */
} tnt_reducer_kind;

typedef struct tnt_distribute_opts {
    /* Gradient buckets are cut at layer boundaries once they hold fusion_threshold_kb KB (0: one
     * bucket per layer); at most 2147483647. Only read when has_fusion_threshold is set;
     * otherwise TNT_FUSION_THRESHOLD_KB as read by tnt_init (default 32). */
    bool has_fusion_threshold;
    int64_t fusion_threshold_kb;
    /* A model with SyncBatchNormalization always runs nonblocking: its layers' own collectives
     * cannot share MPI with a comm thread. */
    tnt_comm_mode comm_mode;
    tnt_compression compression;
    /* Node-aware reductions need the comm thread and the same number of ranks on every node;
     * otherwise (nonblocking engine, SyncBatchNormalization, one rank per node) they run flat. */
    tnt_reducer_kind reducer;
} tnt_distribute_opts;
/* tnt_distribute with options (NULL: as tnt_distribute). Calling it again replaces the options;
 * they take effect at the next fit. */
TNT_API tnt_status tnt_distribute_with(tnt_model *m, const tnt_distribute_opts *opts);

/* Timeline (TNT_TIMELINE=PATH): every rank records its layers' forward and backward, the gradient
 * buckets' reductions, the optimizer, data waits and callbacks; with several ranks each writes
 * PATH.rank<N> at tnt_finalize. This merges them into one Chrome trace-event file PATH (the
 * launcher calls it after the job), removes them, and prints the step summary to out (NULL: no
 * summary): where the time of a step went and how much of the reduction backward hid. */
TNT_API tnt_status tnt_timeline_merge(const char *path, int n_ranks, FILE *out);

/* Where fit trains (TNT_DEVICE): the CPU; the GPU, or an error naming why not; auto: the GPU when
 * one is usable and every layer, the optimizer and the model have a device path, else the CPU
 * with one INFO line naming the first reason. */
typedef enum tnt_device {
    TNT_DEVICE_DEFAULT = 0, /* the TNT_DEVICE setting */
    TNT_DEVICE_CPU,
    TNT_DEVICE_AUTO,
    TNT_DEVICE_GPU,
} tnt_device;

typedef struct tnt_compile_opts {
    tnt_optimizer *optimizer; /* consumed; the model's own is kept, with its state */
    tnt_loss_kind loss;
    bool from_logits;
    /* comma-separated Keras metric names: "accuracy", "sparse_categorical_accuracy",
     * "categorical_accuracy", "binary_accuracy", "top_k_categorical_accuracy",
     * "sparse_top_k_categorical_accuracy" (k = 5, or "...:K"), "mean_squared_error",
     * "mean_absolute_error" */
    const char *metrics;
    uint64_t seed; /* weight initialization and dropout; 0 = 42 */
    /* Cross-entropies: Keras's label_smoothing (the targets become y * (1 - s) + s / classes). */
    float label_smoothing;
    /* Sparse categorical cross-entropy: Keras's ignore_class. Positions whose label is
     * ignore_class add nothing, and the loss is the mean over the other positions (of the global
     * batch). Only read when has_ignore_class is set. */
    bool has_ignore_class;
    int ignore_class;
    /* Keras's loss_weights, one per output in output order (n_loss_weights == the number of
     * outputs), each finite and >= 0: fit minimizes and logs as "loss" sum_k w_k * loss_k, while
     * "<output>_loss" stays unweighted. NULL: all 1. */
    const float *loss_weights;
    int n_loss_weights;
    /* TNT_HUBER: Keras's delta (> 0); 0 = 1.0 */
    float huber_delta;
    /* Keras's compile(loss=[...] or {...}): a loss per output in output order (n_output_losses ==
     * the number of outputs), overriding loss (which then names the first); NULL: loss for every
     * output. Different losses take no label_smoothing, ignore_class or huber_delta. */
    const tnt_loss_kind *output_losses;
    int n_output_losses;
    tnt_device device; /* where fit trains; TNT_DEVICE_DEFAULT: the TNT_DEVICE setting */
} tnt_compile_opts;
/* Outputs of rank > 1, e.g. (T, ..., classes): every loss and metric reduces over the last axis
 * and averages the positions (all other axes), as Keras; sparse categorical cross-entropy takes
 * one label per position (labels (T, ...)). */
TNT_API tnt_status tnt_compile(tnt_model *m, const tnt_compile_opts *opts);
/* What a compiled model was compiled with (TNT_ERR_STATE if it was not): optimizer (the model's
 * own), loss and its options (loss_weights borrowed from the model; NULL when not given), metrics
 * (comma-separated, written to metrics[size]), seed. */
TNT_API tnt_status tnt_model_compile_opts(const tnt_model *m, tnt_compile_opts *opts, char *metrics, size_t size);

typedef struct tnt_fit_opts {
    int epochs;        /* 0 = 1 */
    int initial_epoch;
    tnt_dataset *validation_data; /* borrowed; NULL: none */
    int validation_freq;          /* 0 = 1 */
    int verbose;                  /* 0 silent, 1 progress bar, 2 one line per epoch */
    int64_t steps_per_epoch;      /* 0 = until the dataset ends */
    const tnt_callback *callbacks;
    int n_callbacks;
    FILE *out; /* progress output; NULL = stdout */
    /* Distributed models: the datasets are not split across ranks; each rank brings its own
     * (sharded by hand with the rank API). The gradient is still the exact mean over all ranks'
     * samples. */
    bool no_distribute;
    bool no_distribute_validation;
    /* Unbatched datasets (training and validation): batch them here with a global batch of
     * micro_batch_size x ranks (Tarantella's tnt_micro_batch_size). 0: datasets must be batched. */
    int64_t micro_batch_size;
    /* Keras's sample_weight: every sample's labels end with one more value, its weight (after the
     * labels of all outputs). The loss is sum w_i loss_i / batch size and the metrics are weighted
     * means (their counts weighted), as Keras's. For the training and the validation dataset. */
    bool sample_weights;
    bool validation_sample_weights;
} tnt_fit_opts;
/* Trains on a batched dataset (borrowed). *history (may be NULL) receives a new History that the
 * caller frees. */
TNT_API tnt_status tnt_fit(tnt_model *m, tnt_dataset *train, const tnt_fit_opts *opts,
                           tnt_history **history);

typedef struct tnt_eval_opts {
    int verbose;
    int64_t steps; /* 0 = until the dataset ends */
    const tnt_callback *callbacks;
    int n_callbacks;
    FILE *out;
    bool no_distribute; /* distributed models: each rank evaluates its own dataset */
    bool all_ranks;     /* predict: every rank receives all rows (default: the master only;
                           the other ranks receive a tensor of 0 rows) */
    int64_t micro_batch_size; /* as in tnt_fit_opts, for an unbatched dataset */
    bool sample_weights;      /* evaluate: as in tnt_fit_opts */
} tnt_eval_opts;
/* Loss and metrics over a batched dataset, as Keras's evaluate(return_dict=True). */
TNT_API tnt_status tnt_evaluate(tnt_model *m, tnt_dataset *data, const tnt_eval_opts *opts,
                                tnt_logs *logs);
/* Outputs for every sample of a batched dataset, in dataset order: *out receives a new tensor of
 * shape (n, output_shape...). */
TNT_API tnt_status tnt_predict(tnt_model *m, tnt_dataset *data, const tnt_eval_opts *opts,
                               tnt_tensor **out);
/* Forward pass on an in-memory batch x of shape (n, input_shape...) without a dataset. A
 * Sequential model without an input shape is built from x's, as Keras builds it at its first call. */
TNT_API tnt_status tnt_predict_on_batch(tnt_model *m, const tnt_tensor *x, tnt_tensor **out);

/* Keras-like summary table. */
TNT_API tnt_status tnt_model_summary(const tnt_model *m, FILE *out);
TNT_API int64_t tnt_model_count_params(const tnt_model *m);
TNT_API tnt_shape tnt_model_input_shape(const tnt_model *m);
TNT_API tnt_shape tnt_model_output_shape(const tnt_model *m);
TNT_API int tnt_model_num_layers(const tnt_model *m);
TNT_API tnt_layer *tnt_model_layer(const tnt_model *m, int i);
TNT_API tnt_layer *tnt_model_get_layer(const tnt_model *m, const char *name);
TNT_API tnt_optimizer *tnt_model_optimizer(const tnt_model *m);

/* Weights in Keras's get_weights() order: layer by layer in forward order, each layer's weights
 * in Keras order (kernel, bias). */
TNT_API int tnt_model_num_weights(const tnt_model *m);
/* A view of weight i: its full name ("dense/kernel:0"), shape and data (borrowed, writable;
 * writing it changes the model). */
TNT_API tnt_status tnt_model_weight(tnt_model *m, int i, const char **name, tnt_shape *shape,
                                    float **data);
/* Copies all weights into buf (n floats, n == tnt_model_count_params). */
TNT_API tnt_status tnt_get_weights(const tnt_model *m, float *buf, int64_t n);
TNT_API tnt_status tnt_set_weights(tnt_model *m, const float *buf, int64_t n);
/* Copies weight src_index[k] of src into weight dst_index[k] of dst, k < n, shapes equal (layers
 * shared by two models, as Keras keeps them one): no copy of the other weights of either. */
TNT_API tnt_status tnt_model_copy_weights(tnt_model *dst, const tnt_model *src, int n, const int *src_index,
                                          const int *dst_index);

/* ---------------------------------------------------------------------------------------------
 * Keras files. Saving happens on the master rank only, followed by a barrier (save_all_devices:
 * every rank writes its own file); loading happens on every rank, with no broadcast. Files are
 * written atomically: a temporary file beside the target, fsync, rename.
 * ------------------------------------------------------------------------------------------- */
typedef struct tnt_save_opts {
    bool save_all_devices; /* every rank saves (to the same path: use distinct paths per rank) */
    bool check_only; /* write nothing: check that path takes a file and every name can be saved */
} tnt_save_opts;
/* Keras 2's HDF5 weights layout (model.save_weights("w.h5")): root attribute layer_names, a group
 * per layer with weight_names, datasets at the paths weight_names gives, Keras kernel layouts. */
TNT_API tnt_status tnt_save_weights(tnt_model *m, const char *path, const tnt_save_opts *opts);
/* Reads Keras 2 HDF5 weights (fixed- or variable-length string attributes, attributes split into
 * layer_names0, layer_names1, ...). by_name=false: layer by layer in order (weightless layers
 * skipped), names of layers may differ; by_name=true: matched by layer name, unmatched layers
 * kept. Shapes are checked; a mismatch names the layer, the weight and both shapes. */
TNT_API tnt_status tnt_load_weights(tnt_model *m, const char *path, bool by_name);
/* A path ending in ".keras": Keras 3's zip (metadata.json, config.json with compile_config,
 * model.weights.h5 as layers/<snake_case class>[_N]/vars/<i>, optimizer/vars). Otherwise
 * Keras 2's whole-model HDF5 file (model.save("m.h5")): root attributes model_config (the
 * tnt_model_to_json architecture), training_config (loss, metrics and optimizer_config, as Keras
 * 2.11+ writes them; compiled models only), keras_version, backend; group model_weights (the
 * tnt_save_weights layout); group optimizer_weights (compiled models): "iteration:0" (int64) and
 * the slot variables in Keras's order and names ("Adam/m/dense/kernel:0", ...). A learning-rate
 * schedule is not stored: the file keeps the rate of the next step as a constant. Saved as
 * tnt_save_weights: master only (save_all_devices: every rank), atomically, same status on every
 * rank. */
TNT_API tnt_status tnt_save_model(tnt_model *m, const char *path, const tnt_save_opts *opts);
/* Reads a whole-model file, .keras zip or .h5 (told apart by magic bytes, not name; another
 * format is an error naming its first bytes): the model from model_config, its weights; with
 * compile and a training_config, compiled with the stored loss, metrics and optimizer, whose
 * iterations and slots are restored, so that training resumes exactly (fit with initial_epoch).
 * compile=false (or no training_config): an uncompiled model. NULL on failure (missing or
 * malformed attributes, bad JSON, shape mismatches, truncated files), with tnt_last_error().
 * Every rank loads the file itself (no broadcast). */
TNT_API tnt_model *tnt_load_model(const char *path, bool compile);

/* Describes a Keras file (.keras, .h5, .weights.h5, .json) on out: format, Keras version,
 * training configuration, weights (names and shapes), every layer or setting that cannot be
 * loaded (all at once, with the layers' names) and the summary. TNT_OK when it loads. */
TNT_API tnt_status tnt_inspect(const char *path, FILE *out);

/* Keras 2 JSON architecture (model.to_json()): Sequential (dict with "layers", or the old bare
 * list) and Functional ("Model"/"Functional" with inbound_nodes, input_layers, output_layers).
 * *json receives a malloc'd string the caller frees. Unknown keys are ignored; an unsupported
 * layer class names the layer and the class; a syntax error gives its line and column. */
TNT_API tnt_status tnt_model_to_json(const tnt_model *m, char **json);
TNT_API tnt_model *tnt_model_from_json(const char *json);
/* A new model with the same architecture and freshly initialized weights (Keras clone_model). */
TNT_API tnt_model *tnt_clone_model(const tnt_model *m);

#ifdef __cplusplus
}
#endif
#endif /* TARANTELLA_H */

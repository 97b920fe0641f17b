/* rnn_common.h: the recurrent engine shared by LSTM, GRU and SimpleRNN (rnn_common.c), and the
 * queries the wrappers (Bidirectional) use. Each class file holds its ops table, constructor and
 * Keras config; build, forward (the time loop) and backward (through time) live here. */
#ifndef TNT_RNN_COMMON_H
#define TNT_RNN_COMMON_H

#include "layers/layer.h"

typedef enum tnt__rnn_cell { TNT__RNN_SIMPLE, TNT__RNN_LSTM, TNT__RNN_GRU } tnt__rnn_cell;

/* The activations a cell may use: each has a derivative computable from its output. */
typedef enum tnt__rnn_act {
    TNT__RNN_TANH,
    TNT__RNN_SIGMOID,
    TNT__RNN_HARD_SIGMOID,    /* Keras 2: clip(0.2x + 0.5, 0, 1) */
    TNT__RNN_HARD_SIGMOID_V3, /* Keras 3: relu6(x + 3) / 6 */
    TNT__RNN_RELU,
    TNT__RNN_LINEAR,
} tnt__rnn_act;

typedef struct tnt__rnn {
    tnt__rnn_cell cell;
    bool cudnn; /* CuDNNLSTM / CuDNNGRU: input and recurrent biases */
    int units;
    tnt__rnn_act act, rec_act;
    bool use_bias, return_sequences, go_backwards, unit_forget_bias, reset_after, zero_output_for_mask;
    bool return_state; /* outputs: the output, then the final states h (and c): l->n_outputs */
    int n_init;        /* from build: initial-state inputs after the sequence (0 or the states) */
    float dropout, recurrent_dropout;
    tnt_initializer kernel_init, recurrent_init, bias_init;
    int64_t steps, features; /* from build: input (steps, features) */
    /* stateful: the final h (then c) of each row of the last batch, (state_rows, U) each; a
     * batch of another size starts from zeros (each rank carries its own rows) */
    bool stateful;
    float *state;
    int64_t state_rows;
} tnt__rnn;

/* The device path (rnn_gpu.c) every recurrent class shares. */
extern const tnt__gpu_ops tnt__rnn_gpu_ops;

/* The ops table of a recurrent class: everything but the class name is shared. */
#define RNN_OPS(var, cls, from_config_fn)                                                        \
    const tnt__layer_ops var = {                                                                 \
        .class_name = cls,                                                                       \
        .build = tnt__rnn_build,                                                                 \
        .build_multi = tnt__rnn_build_multi,                                                     \
        .workspace_size = tnt__rnn_workspace_size,                                               \
        .forward = tnt__rnn_forward,                                                             \
        .backward = tnt__rnn_backward,                                                           \
        .destroy = tnt__rnn_destroy,                                                             \
        .reset_states = tnt__rnn_reset_states,                                                   \
        .get_config = tnt__rnn_get_config,                                                       \
        .from_config = from_config_fn,                                                           \
        .consumes_mask = true,                                                                   \
        .keeps_mask = tnt__rnn_returns_sequences,                                                \
        .gpu = &tnt__rnn_gpu_ops,                                                                \
    }

/* A recurrent layer of this cell from the public options (validated; errors name the class). */
tnt_layer *tnt__rnn_new(const tnt__layer_ops *ops, tnt__rnn_cell cell, bool cudnn, int units, const tnt_rnn_opts *o);
/* The ops entries every recurrent class shares. */
tnt_status tnt__rnn_build(tnt_layer *l, tnt_shape in, tnt_shape *out);
tnt_status tnt__rnn_build_multi(tnt_layer *l, int n, const tnt_shape *in, tnt_shape *out);
size_t tnt__rnn_workspace_size(tnt_layer *l, void *plan, int64_t batch);
tnt_status tnt__rnn_forward(tnt_layer *l, void *plan, const tnt__fwd_args *a);
tnt_status tnt__rnn_backward(tnt_layer *l, void *plan, const tnt__bwd_args *a);
void tnt__rnn_destroy(tnt_layer *l);
void tnt__rnn_reset_states(tnt_layer *l);
/* Keras get_config keys shared by the classes (units, activations, flags, initializers). */
tnt_status tnt__rnn_get_config(const tnt_layer *l, struct cJSON *c);
bool tnt__rnn_returns_sequences(const tnt_layer *l);
/* Keras from_config of a recurrent class: the keys get_config writes, and Keras 2's older
 * spellings (GRU without reset_after is reset_before). */
struct tnt__kj_ctx;
tnt_layer *tnt__rnn_from_config(const struct cJSON *c, const struct tnt__kj_ctx *k, const tnt__layer_ops *ops,
                                tnt__rnn_cell cell, bool cudnn);

/* Gate columns of a cell: 4U for LSTM (i, f, c, o), 3U for GRU (z, r, h), U for SimpleRNN. */
static inline int64_t tnt__rnn_gate_units(const tnt__rnn *r) {
    return (r->cell == TNT__RNN_LSTM ? 4 : r->cell == TNT__RNN_GRU ? 3 : 1) * (int64_t)r->units;
}

/* States of a cell: 2 (h, c) for LSTM, else 1 (h). */
static inline int tnt__rnn_n_states(const tnt__rnn *r) { return r->cell == TNT__RNN_LSTM ? 2 : 1; }

/* The engine state of a recurrent layer, or NULL when l is not one. ConvLSTM2D (conv_lstm2d.c)
 * counts: its state begins with a tnt__rnn whose flags (return_sequences, go_backwards) Bidirectional
 * reads and sets, though its own code runs it. */
tnt__rnn *tnt__rnn_of(const tnt_layer *l);
/* A new unbuilt layer of the same class and configuration (Bidirectional's backward copy). */
tnt_layer *tnt__rnn_clone(const tnt_layer *l, const char *name);
/* conv_lstm2d.c: l is a ConvLSTM2D; a new unbuilt one like it (data_format included). */
bool tnt__is_conv_lstm2d(const tnt_layer *l);
tnt_layer *tnt__conv_lstm2d_clone(const tnt_layer *l);
/* Keras name of an activation this engine runs ("tanh", "hard_sigmoid", ...), and back. */
const char *tnt__rnn_act_name(tnt__rnn_act a);
bool tnt__rnn_act_from_name(const char *name, tnt__rnn_act *a);
/* scale[b, j] (B, n) for the batch's global samples sample_offset + b: 0 with probability rate,
 * else 1/(1-rate); the same whatever the split of the batch across ranks. */
void tnt__rnn_dropout_scales(float *scale, int64_t B, int64_t n, float rate, uint64_t seed, int64_t sample_offset);
/* v[0..n) = act(v) in place */
void tnt__rnn_act_apply(tnt__rnn_act a, float *v, int64_t n);
/* act'(x) from the output y = act(x) */
static inline float tnt__rnn_act_grad(tnt__rnn_act a, float y) {
    switch (a) {
    case TNT__RNN_TANH: return 1.0f - y * y;
    case TNT__RNN_SIGMOID: return y * (1.0f - y);
    case TNT__RNN_HARD_SIGMOID: return y > 0.0f && y < 1.0f ? 0.2f : 0.0f;
    case TNT__RNN_HARD_SIGMOID_V3: return y > 0.0f && y < 1.0f ? 1.0f / 6.0f : 0.0f;
    case TNT__RNN_RELU: return y > 0.0f ? 1.0f : 0.0f;
    case TNT__RNN_LINEAR: return 1.0f;
    }
    return 0.0f;
}

#endif

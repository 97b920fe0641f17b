/* tarantella_ops.h: operation graphs (the user's own Keras code on the C engine) and the traced
 * layer that runs one. Included by tarantella.h.
 *
 * An operation graph is a small tensor program: inputs (the layer's inputs, axis 0 the batch),
 * weights (the layer's own), nodes (an operation with attributes and input value ids) and outputs.
 * Value ids count inputs first, then weights, then each node's outputs in order (most operations
 * have one; split has several). Operations follow keras.ops and NumPy: names, argument order,
 * broadcasting, negative axes. Every operation with a float output has a backward (its
 * vector-Jacobian product), except comparisons, argmax/argmin, one_hot and casts to int or bool,
 * whose outputs carry no gradient, and stop_gradient.
 *
 * The same graph is written as JSON (tnt_opgraph_to_json), the form a Keras file carries for
 * tnt-predict:
 *   {"format": "tnt_ops", "version": 1,
 *    "inputs": [{"shape": [null, 4]}],
 *    "weights": [{"name": "kernel", "shape": [4, 3], "initializer": "glorot_uniform", "trainable": true}],
 *    "nodes": [{"op": "matmul", "in": [0, 1]}, {"op": "sum", "in": [2], "axis": -1, "keepdims": true}],
 *    "outputs": [3]}
 * A node's attributes sit beside "op" and "in". The operations (keras.ops names and semantics;
 * "axis" is an int or a list, negative counting from the end, absent or null meaning the default):
 *   one input: negative abs sign exp log log1p expm1 sqrt rsqrt square reciprocal sin cos tanh
 *     sigmoid relu relu6 softplus softsign silu erf floor ceil round identity logical_not
 *     stop_gradient; gelu {approximate: true}; elu {alpha: 1}; leaky_relu {negative_slope: 0.2};
 *     clip {x_min, x_max}
 *   two inputs, broadcast: add subtract multiply divide power maximum minimum squared_difference
 *     floor_divide mod; without gradient: equal not_equal less less_equal greater greater_equal
 *     logical_and logical_or; where(cond, x, y)
 *   reductions {axis (absent: all), keepdims: false}: sum mean max min prod var std logsumexp any
 *     all; argmax argmin {axis: one or absent (flattened)}
 *   matmul(a, b) (NumPy's, batched); einsum {equation} on one or two inputs ("...", implicit output)
 *   reshape {shape, one -1}; transpose {axes}; expand_dims {axis}; squeeze {axis};
 *     broadcast_to {shape}; concatenate {axis: 0}; stack {axis: 0}; split {indices_or_sections:
 *     count or split points, axis: 0} (one output per part); tile {repeats}; repeat {repeats,
 *     axis (absent: flattened)}; pad {pad_width: [[before, after], ...], constant_values: 0}
 *   slice {spec: [item, ...]}: an int (index), null (newaxis), "..." (ellipsis), [start, stop,
 *     step] or {"start", "stop", "step"} with nulls; take(x, indices) {axis (absent: flattened)};
 *     one_hot {num_classes, axis: -1}; cast {dtype}; constant {value: number or nested lists,
 *     shape (fills a number), dtype}; zeros_like ones_like full_like {fill_value}
 *   cumsum {axis (absent: flattened)}; softmax log_softmax {axis: -1}
 *   random_uniform {minval: 0, maxval: 1, seed}, random_normal {mean: 0, stddev: 1, seed} (shaped
 *     like their input, axis 0 the samples); dropout {rate, training_only: true, seed} */
#ifndef TARANTELLA_OPS_H
#define TARANTELLA_OPS_H

typedef struct tnt_opgraph tnt_opgraph;

TNT_API tnt_opgraph *tnt_opgraph_new(void);
TNT_API void tnt_opgraph_free(tnt_opgraph *g);
/* Adds an input; returns its value id or -1 with an error. TNT_DIM_NONE dimensions take any size
 * (axis 0 of a traced layer's input is the batch). Inputs come before weights and nodes. */
TNT_API int tnt_opgraph_input(tnt_opgraph *g, tnt_shape shape);
/* Adds a weight (Keras initializer name, NULL: glorot_uniform); returns its value id or -1. */
TNT_API int tnt_opgraph_weight(tnt_opgraph *g, const char *name, tnt_shape shape, const char *initializer,
                               bool trainable);
/* Adds an operation on the values in[0..n_in) with attributes as a JSON object (NULL: none), e.g.
 * tnt_opgraph_op(g, "sum", 1, (int[]){x}, "{\"axis\": [-1], \"keepdims\": true}"). Returns the
 * value id of its first output, or -1 with an error naming the operation and the bad attribute. */
TNT_API int tnt_opgraph_op(tnt_opgraph *g, const char *op, int n_in, const int *in, const char *attrs_json);
/* Marks a value as the next output. */
TNT_API tnt_status tnt_opgraph_output(tnt_opgraph *g, int value);
/* The graph as JSON (the caller frees it with free()); NULL with an error. */
TNT_API char *tnt_opgraph_to_json(const tnt_opgraph *g);
/* A graph from its JSON; NULL with an error naming the node and the bad key. */
TNT_API tnt_opgraph *tnt_opgraph_from_json(const char *json);
TNT_API int tnt_opgraph_n_values(const tnt_opgraph *g);

/* A layer that runs g (taken over: the layer frees it, also when this fails) with g's weights as
 * its own. class_name is its Keras class (NULL: "TracedLayer"). The graph's inputs are the layer's
 * inputs and its outputs the layer's outputs; masks do not pass through. */
TNT_API tnt_layer *tnt_traced_layer(tnt_opgraph *g, const char *class_name, const char *name);

/* A loss of the user's own (Keras's loss(y_true, y_pred) function, traced): after tnt_compile,
 * output's loss becomes the graph of json (copied): inputs y_true then y_pred, axis 0 the batch
 * (y_pred's shape the output's; y_true's gives the labels per sample that fit reads, in the
 * packing of tnt_compile's losses); one float output, the loss per sample ((batch,)), per
 * position ((batch, ...), averaged per sample as Keras's sum-over-batch-size) or a scalar (the
 * batch mean). fit differentiates it through the operations' backward; the data-parallel sums
 * stay exact for per-sample losses (a scalar counts as its batch's mean). json NULL: the
 * compiled loss again. tnt_compile clears it. A graph of y_pred alone reads no labels (a model
 * whose layers add their losses: fit then takes data without labels). */
typedef struct tnt_model tnt_model;
TNT_API tnt_status tnt_model_set_loss_graph(tnt_model *m, int output, const char *json);
/* Label values per sample that output's loss graph reads; -1 when output has no loss graph. */
TNT_API int64_t tnt_model_loss_graph_labels(const tnt_model *m, int output);
/* A metric of the user's own (Keras's metric function of (y_true, y_pred), traced), after
 * tnt_compile (which clears it): the graph as for a loss, logged under name as the mean of its
 * per-sample values over the samples seen (sums over ranks, exact), on output (of several: one
 * output; the log key then takes the output's prefix as Keras's). A name "~name" weights it by
 * the sample weights (Keras's weighted_metrics); else sample weights do not reach it. */
TNT_API tnt_status tnt_model_add_metric_graph(tnt_model *m, const char *name, int output, const char *json);
/* A metric with state of the user's own (keras.metrics.Metric with add_weight state, update_state
 * and result): update_json takes y_true, y_pred (as a loss graph) and optionally the sample
 * weights (a third input of shape (None,)), and gives each state variable's increment for the
 * batch (no batch axis); result_json takes the state variables (their shapes as its inputs,
 * starting at zero) and gives the scalar logged under name. The state is summed over batches and
 * ranks (exact for additive increments). A name "~name" (Keras's weighted_metrics; its graph must
 * take the weights) gets the batch's sample weights; otherwise a graph that takes them gets ones. */
TNT_API tnt_status tnt_model_add_metric_state_graphs(tnt_model *m, const char *name, int output,
                                                     const char *update_json, const char *result_json);

/* An operation graph run once on data (Keras's eager operations on a model's outputs under a
 * GradientTape): forward on inputs (one per graph input, float32 storage, the batch axis
 * included), outputs[k] made for each output (the caller frees them). With douts (one per output
 * in its shape; a NULL entry: zero) backward follows, and dinputs (when not NULL) receives a new
 * tensor per input with the gradient w.r.t. it. A graph with weights is refused. */
TNT_API tnt_status tnt_opgraph_run(const tnt_opgraph *g, const tnt_tensor *const *inputs, tnt_tensor **outputs,
                                   const tnt_tensor *const *douts, tnt_tensor **dinputs);

/* Custom training loops (Keras's tf.GradientTape around model calls, optimizer.apply_gradients).
 * tnt_model_tape_forward runs forward on x (the packed inputs, as tnt_predict_on_batch), in
 * training mode when asked (Dropout draws, BatchNormalization normalizes by the batch and updates
 * its moving statistics), and keeps what backward reads; *out: the packed outputs (caller frees).
 * On a distributed model every rank passes its own batch (its first use broadcasts the master's
 * weights; dropout draws as on the ranks' batches concatenated). tnt_model_tape_backward takes the
 * gradient of a loss w.r.t. those outputs (dout, packed as out) and writes each weight's gradient
 * to grads[i] (tnt_model_weight order; NULL: not wanted; zeros for one not trainable), plus
 * penalty_scale times the gradient of the regularization penalties; on p ranks the gradients are
 * averaged over the ranks (Horovod's DistributedGradientTape) and every rank must call it.
 * tnt_model_tape_penalty: those penalties after the last tape forward (Keras's
 * sum(model.losses)). A forward with input_grads keeps the inputs' gradients: backward then
 * writes them to dx (packed as x; NULL: not wanted), the rank's own (a model call fed by
 * another's output, as a GAN's generator feeds its discriminator). */
TNT_API tnt_status tnt_model_tape_forward(tnt_model *m, const tnt_tensor *x, bool training, bool input_grads,
                                          tnt_tensor **out);
TNT_API tnt_status tnt_model_tape_backward(tnt_model *m, const tnt_tensor *dout, float penalty_scale,
                                           float *const *grads, float *dx);
TNT_API tnt_status tnt_model_tape_penalty(tnt_model *m, double *value);
/* Weight i is one the optimizer trains (Keras's trainable_weights). */
TNT_API bool tnt_model_weight_trainable(const tnt_model *m, int i);
typedef struct tnt_optimizer tnt_optimizer;
/* The optimizer of the model's updates (taken over; the previous one is freed), with fresh slots. */
TNT_API tnt_status tnt_model_set_optimizer(tnt_model *m, tnt_optimizer *opt);
/* One update by the model's optimizer of the n weights index[j] (tnt_model_weight order, any
 * order, each trainable) from grads[j]; the others keep their values and slots. */
TNT_API tnt_status tnt_model_apply_gradients(tnt_model *m, int n, const int *index, const float *const *grads);

#endif

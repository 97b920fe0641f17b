/* simple_rnn.c: Keras SimpleRNN, h = act(x W + h_prev R + b); the engine is rnn_common.c. */
#include "layers/recurrent/rnn_common.h"

#include "layers/keras_config.h"

extern const tnt__layer_ops tnt__simple_rnn_ops;

static tnt_layer *simple_rnn_from_config(const cJSON *c, const tnt__kj_ctx *k) {
    return tnt__rnn_from_config(c, k, &tnt__simple_rnn_ops, TNT__RNN_SIMPLE, false);
}

RNN_OPS(tnt__simple_rnn_ops, "SimpleRNN", simple_rnn_from_config);

tnt_layer *tnt_simple_rnn(int units, const tnt_rnn_opts *opts) {
    return tnt__rnn_new(&tnt__simple_rnn_ops, TNT__RNN_SIMPLE, false, units, opts);
}

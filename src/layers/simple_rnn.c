/* simple_rnn.c: Keras SimpleRNN, h = act(x W + h_prev R + b); the engine is rnn_common.c. */
#include "layers/rnn_common.h"

RNN_OPS(simple_rnn_ops, "SimpleRNN");

tnt_layer *tnt_simple_rnn(int units, const tnt_rnn_opts *opts) {
    return tnt__rnn_new(&simple_rnn_ops, TNT__RNN_SIMPLE, false, units, opts);
}

/* gru.c: Keras GRU (reset_after true, the default since Keras 2.3, or false) and Keras 2's
 * CuDNNGRU (reset_after with the bias as one (6*units) vector: input then recurrent). Gates z, r,
 * h; the engine is rnn_common.c. */
#include "layers/rnn_common.h"

RNN_OPS(gru_ops, "GRU");
RNN_OPS(cudnn_gru_ops, "CuDNNGRU");

tnt_layer *tnt_gru(int units, const tnt_rnn_opts *opts) {
    return tnt__rnn_new(&gru_ops, TNT__RNN_GRU, false, units, opts);
}

tnt_layer *tnt_cudnn_gru(int units, const tnt_rnn_opts *opts) {
    return tnt__rnn_new(&cudnn_gru_ops, TNT__RNN_GRU, true, units, opts);
}

/* lstm.c: Keras LSTM and Keras 2's CuDNNLSTM (the same math; cuDNN's double bias (8*units),
 * whose halves add up). Gates i, f, c, o; the engine is rnn_common.c. */
#include "layers/rnn_common.h"

RNN_OPS(lstm_ops, "LSTM");
RNN_OPS(cudnn_lstm_ops, "CuDNNLSTM");

tnt_layer *tnt_lstm(int units, const tnt_rnn_opts *opts) {
    return tnt__rnn_new(&lstm_ops, TNT__RNN_LSTM, false, units, opts);
}

tnt_layer *tnt_cudnn_lstm(int units, const tnt_rnn_opts *opts) {
    return tnt__rnn_new(&cudnn_lstm_ops, TNT__RNN_LSTM, true, units, opts);
}

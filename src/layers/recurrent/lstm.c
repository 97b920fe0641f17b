/* lstm.c: Keras LSTM and Keras 2's CuDNNLSTM (the same math; cuDNN's double bias (8*units),
 * whose halves add up). Gates i, f, c, o; the engine is rnn_common.c. */
#include "layers/recurrent/rnn_common.h"

#include "layers/keras_config.h"

extern const tnt__layer_ops tnt__lstm_ops;
extern const tnt__layer_ops tnt__cudnn_lstm_ops;

static tnt_layer *lstm_from_config(const cJSON *c, const tnt__kj_ctx *k) {
    return tnt__rnn_from_config(c, k, &tnt__lstm_ops, TNT__RNN_LSTM, false);
}

RNN_OPS(tnt__lstm_ops, "LSTM", lstm_from_config);

static tnt_layer *cudnn_lstm_from_config(const cJSON *c, const tnt__kj_ctx *k) {
    return tnt__rnn_from_config(c, k, &tnt__cudnn_lstm_ops, TNT__RNN_LSTM, true);
}

RNN_OPS(tnt__cudnn_lstm_ops, "CuDNNLSTM", cudnn_lstm_from_config);

tnt_layer *tnt_lstm(int units, const tnt_rnn_opts *opts) {
    return tnt__rnn_new(&tnt__lstm_ops, TNT__RNN_LSTM, false, units, opts);
}

tnt_layer *tnt_cudnn_lstm(int units, const tnt_rnn_opts *opts) {
    return tnt__rnn_new(&tnt__cudnn_lstm_ops, TNT__RNN_LSTM, true, units, opts);
}

/* gru.c: Keras GRU (reset_after true, the default since Keras 2.3, or false) and Keras 2's
 * CuDNNGRU (reset_after with the bias as one (6*units) vector: input then recurrent). Gates z, r,
 * h; the engine is rnn_common.c. */
#include "layers/recurrent/rnn_common.h"

#include "layers/keras_config.h"

extern const tnt__layer_ops tnt__gru_ops;
extern const tnt__layer_ops tnt__cudnn_gru_ops;

static tnt_layer *gru_from_config(const cJSON *c, const tnt__kj_ctx *k) {
    return tnt__rnn_from_config(c, k, &tnt__gru_ops, TNT__RNN_GRU, false);
}

RNN_OPS(tnt__gru_ops, "GRU", gru_from_config);

static tnt_layer *cudnn_gru_from_config(const cJSON *c, const tnt__kj_ctx *k) {
    return tnt__rnn_from_config(c, k, &tnt__cudnn_gru_ops, TNT__RNN_GRU, true);
}

RNN_OPS(tnt__cudnn_gru_ops, "CuDNNGRU", cudnn_gru_from_config);

tnt_layer *tnt_gru(int units, const tnt_rnn_opts *opts) {
    return tnt__rnn_new(&tnt__gru_ops, TNT__RNN_GRU, false, units, opts);
}

tnt_layer *tnt_cudnn_gru(int units, const tnt_rnn_opts *opts) {
    return tnt__rnn_new(&tnt__cudnn_gru_ops, TNT__RNN_GRU, true, units, opts);
}

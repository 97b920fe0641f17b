/* transformer.h: Transformer model builders on the Functional API (shared by
 * examples/transformer.c, the benchmark and the tests).
 *
 * a) transformer_encoder_classifier: the PyTorch peer of ../shared/bench/torch_models.py
 *    (--model transformer) layer for layer: Embedding(vocab, d) + a learned position embedding
 *    (KerasHub's PositionEmbedding, a (seq, d) weight, zeros at the start as the peer's
 *    nn.Parameter(torch.zeros), added to the tokens by an Add "position_add"), layers x nn.TransformerEncoderLayer(d, heads, ffn,
 *    dropout 0, relu, post-norm: x = LN(x + MHA(x)); x = LN(x + FFN(x)), LayerNorm epsilon 1e-5),
 *    the mean over the sequence (GlobalAveragePooling1D) and Dense(classes) (logits). Attention
 *    and FFN layers have biases, as torch's. Parameters:
 *      vocab*d + seq*d + layers*(4*d*d + 4*d + 2*d*ffn + ffn + d + 4*d) + d*classes + classes
 *    (8000, 128, 256, 4, 1024, 4, 2: 5,240,322, as torch_models.py prints).
 *
 * b) transformer_model: the Transformer of Vaswani et al. as in the TensorFlow Model Garden
 *    (official/nlp/transformer, later official/legacy/transformer; the one the Tarantella tutorial
 *    trains):
 *    - ONE shared weight matrix (vocab, hidden) (EmbeddingSharedWeights): the source and the
 *      target lookups (rows of padding id 0 zeroed, then multiplied by sqrt(hidden), as
 *      official/nlp/transformer/embedding_layer.py; the later legacy copy comments the zeroing
 *      out) and the output logits x @ W^T. Implemented with two custom layers that share state:
 *      "EmbeddingSharedWeights" owns the weight and is called twice (a shared layer: the engine
 *      sums the gradients of both calls), "EmbeddingLinear" reads the same values and hands its
 *      weight gradient to the embedding, which adds it once per step in its first backward call
 *      (the logits' backward always runs before both embedding calls' backward).
 *      Initialization: normal(0, hidden^-0.5) as Model Garden (transformer_init_weights, after
 *      compile).
 *    - sinusoidal position encodings (sin on the first hidden/2 channels, cos on the rest,
 *      timescales 1..1e4) added by a weightless custom layer; the targets are shifted right by one
 *      (pad 0 in front, drop the last id) before the decoder's embedding lookup, as Model Garden.
 *    - pre-layer-norm sublayers: x + dropout(sublayer(LayerNorm(x))), LayerNorm epsilon 1e-6, and a
 *      final LayerNorm after the encoder and after the decoder stack.
 *    - attention: Keras MultiHeadAttention(num_heads, key_dim = hidden/num_heads) WITHOUT biases
 *      (Model Garden's attention_layer.py: EinsumDense query/key/value/output_transform with
 *      bias_axes=None); queries scaled by key_dim^-0.5 (the same in both). The FFN:
 *      Dense(filter, relu, bias) -> dropout(relu_dropout) -> Dense(hidden, bias).
 *    - masks: Model Garden adds -1e9 to the attention logits of source PADDING KEYS
 *      (get_padding_bias(inputs): [batch, 1, 1, length]) in the encoder self-attention and in
 *      the encoder-decoder attention, and a causal bias in the decoder self-attention. Here a
 *      weightless custom layer "PaddingMask" turns the source ids into the attention_mask
 *      (T, T) with mask[i][j] = (ids[j] != 0), and MultiHeadAttention adds (1 - mask) * -1e9 to
 *      the scores: the same. Embedding(mask_zero) semantics would NOT be the same: Keras also masks
 *      the padded query rows (and the layers' outputs would carry a mask); Model Garden does not.
 *      The decoder self-attention uses use_causal_mask only (Model Garden does not mask target
 *      padding there: padded targets come last and causally reach no real position).
 *      Source and target have the same padded length (max_length), so one mask serves both the
 *      encoder self-attention (Tq = Tv = Ts) and the encoder-decoder attention (Tq = Tt = Ts).
 *    - dropout: layer_postprocess_dropout after embedding + position encoding and on every
 *      sublayer output, attention_dropout on the attention probabilities, relu_dropout in the
 *      FFN.
 *    Inputs: "inputs" (max_length) source ids and "targets" (max_length) target ids, fed as one
 *    dataset element of 2 * max_length ids (source, then target); output: logits
 *    (max_length, vocab_size). Train with sparse categorical cross-entropy from logits, labels =
 *    the targets, label_smoothing, ignore_class 0.
 *    Parameters (Model Garden, by hand; transformer_model_garden_param_count):
 *      V*H                                         shared embedding
 *      + N*(4*H*H + 2*2*H + 2*H*F + F + H) + 2*H   encoder: attention (no bias), 2 LayerNorms, FFN;
 *                                                  final LayerNorm
 *      + N*(8*H*H + 3*2*H + 2*H*F + F + H) + 2*H   decoder: self and enc-dec attention, 3 LayerNorms
 *    base (V 33708, H 512, F 2048, N 6):  17,258,496 + 18,903,040 + 25,200,640 = 61,362,176
 *    big  (V 33708, H 1024, F 4096, N 6): 34,516,992 + 75,554,816 + 100,732,928 = 210,804,736
 *
 * All builders return NULL with tnt_last_error() set on failure. Building does not allocate the
 * weights (tnt_compile does), so the big model can be built and counted cheaply. */
#ifndef TNT_EXAMPLES_TRANSFORMER_H
#define TNT_EXAMPLES_TRANSFORMER_H

#include <tarantella.h>

tnt_model *transformer_encoder_classifier(int vocab, int seq, int d, int heads, int ffn, int layers, int classes);
/* The parameter count of the torch peer with these sizes (the formula above). */
int64_t transformer_encoder_classifier_params(int vocab, int seq, int d, int heads, int ffn, int layers,
                                              int classes);

/* Model Garden's model_params (BASE_PARAMS, BIG_PARAMS) and a tiny set for quick runs. */
typedef struct transformer_params {
    const char *name;
    int vocab_size, hidden_size, num_hidden_layers, num_heads, filter_size;
    float layer_postprocess_dropout, attention_dropout, relu_dropout;
    float label_smoothing;
    float learning_rate;                /* the schedule's constant (2.0) */
    int64_t learning_rate_warmup_steps; /* 16000 */
    float adam_beta1, adam_beta2, adam_epsilon;
    int max_length, batch_size; /* defaults of the example program (sentences per global batch) */
} transformer_params;

/* tiny: vocab 64, hidden 64, 2+2 layers, 4 heads, filter 128, schedule constant 0.5 with 100
 * warm-up steps (ours, to train in seconds; Model Garden's TINY_PARAMS keeps the 33708 vocabulary
 * and 6 layers); base and big: Model Garden's BASE_PARAMS and BIG_PARAMS (big:
 * layer_postprocess_dropout 0.3 as there). */
extern const transformer_params TRANSFORMER_TINY_PARAMS, TRANSFORMER_BASE_PARAMS, TRANSFORMER_BIG_PARAMS;
/* "tiny", "base", "big"; NULL when unknown. */
const transformer_params *transformer_params_by_name(const char *name);
/* Model Garden's parameter count for p (the formula above). */
int64_t transformer_model_garden_params(const transformer_params *p);

tnt_model *transformer_model(const transformer_params *p, int max_length, const char *name);
/* After tnt_compile (which allocates the weights): the shared embedding drawn from
 * normal(0, hidden^-0.5) (Box-Muller from seed), as Model Garden's EmbeddingSharedWeights. Run it
 * on every rank with the same seed (or rely on the master's broadcast at the first fit). */
tnt_status transformer_init_weights(tnt_model *m, const transformer_params *p, uint64_t seed);

/* Model Garden's LearningRateSchedule: learning_rate * hidden^-0.5 * min(1, step / warmup) /
 * sqrt(max(step, warmup)) = 2 * H^-0.5 * min(step * warmup^-1.5, step^-0.5), at the 0-based step
 * (the optimizer's iteration count before the step, so 0 at the first step as in Model Garden). */
double transformer_learning_rate(const transformer_params *p, int64_t step);
/* A callback that sets the optimizer's rate from transformer_learning_rate before every training
 * step (runs on every rank; the iteration count is the same everywhere). p must outlive fit.
 * The optimizer must not have a schedule. */
tnt_callback transformer_lr_callback(const transformer_params *p);

#endif

/* tarantella_layers.h: the Keras layers beyond the basic ones (included by tarantella.h, after
 * tnt_layer_opts and the basic constructors; not meant to be included on its own). Shapes
 * exclude the batch axis; axes in Keras's numbering count the batch axis as 0. */
#ifndef TARANTELLA_LAYERS_H
#define TARANTELLA_LAYERS_H

/* Keras data_format. Channels last (the default) is (spatial..., channels); channels first is
 * (channels, spatial...), PyTorch's NCHW. Set it on a new layer, before it joins a model, for the
 * classes that have the option in Keras: Conv1D/2D/3D, Conv1D/2DTranspose, DepthwiseConv2D,
 * SeparableConv2D, the pooling and global pooling layers, ZeroPadding2D/3D, Cropping2D/3D,
 * UpSampling2D/3D, SpatialDropout2D/3D and Flatten (which then flattens in channels-last order, as
 * Keras does); other classes refuse it. Kernels keep Keras's layout in both formats. */
typedef enum tnt_data_format { TNT_CHANNELS_LAST = 0, TNT_CHANNELS_FIRST = 1 } tnt_data_format;
TNT_API tnt_status tnt_layer_set_data_format(tnt_layer *l, tnt_data_format format);
TNT_API tnt_data_format tnt_layer_data_format(const tnt_layer *l);

/* Keras DepthwiseConv2D: (h, w, c) -> (oh, ow, c * depth_multiplier); depthwise_kernel
 * (kh, kw, c, depth_multiplier), bias (c * depth_multiplier). opts: strides, padding (valid or
 * same), dilation, activation, no_bias, kernel_initializer (the depthwise initializer). */
TNT_API tnt_layer *tnt_depthwise_conv2d(int kernel_h, int kernel_w, int depth_multiplier, const tnt_layer_opts *opts);
/* Keras SeparableConv2D: a depthwise convolution, then a 1x1 convolution to filters channels;
 * depthwise_kernel (kh, kw, c, depth_multiplier), pointwise_kernel (1, 1, c * depth_multiplier,
 * filters), bias (filters). depth_multiplier 0 = 1. */
TNT_API tnt_layer *tnt_separable_conv2d(int filters, int kernel_h, int kernel_w, int depth_multiplier,
                                        const tnt_layer_opts *opts);
/* Keras Embedding: (seq) integer ids stored as floats -> (seq, output_dim); embeddings
 * (input_dim, output_dim) initialized uniform(-0.05, 0.05). An id outside [0, input_dim) fails
 * the step with an error naming it. mask_zero: id 0 is padding, and the sequence mask reaches
 * the layers that support masking (MultiHeadAttention uses it as Keras does). */
TNT_API tnt_layer *tnt_embedding(int input_dim, int output_dim, bool mask_zero, const char *name);
/* KerasHub's PositionEmbedding (keras_hub.layers.PositionEmbedding): (..., seq, features) ->
 * the first seq rows of its weight embeddings (sequence_length, features), broadcast to the input's
 * shape (seq <= sequence_length; the input's values are not read: add it with tnt_add).
 * initializer TNT_INIT_DEFAULT = glorot_uniform, as KerasHub. */
TNT_API tnt_layer *tnt_position_embedding(int sequence_length, tnt_initializer initializer, const char *name);
/* Keras LayerNormalization over the last axis: gamma (ones), beta (zeros); epsilon 0 = 1e-3. */
TNT_API tnt_layer *tnt_layer_normalization(float epsilon, const char *name);
/* Keras Permute: dims is a permutation of 1..n of the non-batch axes (1-based, as Keras). */
TNT_API tnt_layer *tnt_permute(int n, const int *dims, const char *name);
/* Keras RepeatVector: (features) -> (n, features). */
TNT_API tnt_layer *tnt_repeat_vector(int n, const char *name);
/* Keras SyncBatchNormalization: BatchNormalization whose training statistics (mean and variance,
 * and the gradient sums in backward) are reduced over all ranks of a distributed model, so that
 * the result equals BatchNormalization on the whole global batch. Same weights and defaults. */
TNT_API tnt_layer *tnt_sync_batch_normalization(float momentum, float epsilon, const char *name);

/* Merge layers: called on two or more inputs (Subtract: exactly two) whose shapes broadcast as
 * Keras's: a lower rank gets axes of size 1 after the batch, then each dimension agrees or is 1.
 * Concatenate joins along axis (Keras: -1 = last; counts the batch axis as 0, so axis 1 is the
 * first non-batch axis); the other dimensions must agree. */
TNT_API tnt_layer *tnt_add(const char *name);
TNT_API tnt_layer *tnt_subtract(const char *name);
TNT_API tnt_layer *tnt_multiply(const char *name);
TNT_API tnt_layer *tnt_average(const char *name);
TNT_API tnt_layer *tnt_maximum(const char *name);
TNT_API tnt_layer *tnt_minimum(const char *name);
TNT_API tnt_layer *tnt_concatenate(int axis, const char *name);
/* Keras Dot(axes=(axis1, axis2), normalize): per sample, the dot product of two inputs of rank 1 or
 * 2 (batch excluded) along axis1 of the first and axis2 of the second (Keras's axes: 1 is the first
 * non-batch axis, -1 the last); normalize: L2-normalized along those axes first (cosine). */
TNT_API tnt_layer *tnt_dot(int axis1, int axis2, bool normalize, const char *name);

/* Keras MultiHeadAttention. Call it with tnt_call_attention. Weights in Keras order:
 * query/kernel (dq, heads, key_dim), query/bias (heads, key_dim), key/kernel (dk, heads,
 * key_dim), key/bias, value/kernel (dv, heads, value_dim), value/bias (heads, value_dim),
 * attention_output/kernel (heads, value_dim, out), attention_output/bias (out). */
typedef struct tnt_attention_opts {
    const char *name;
    int value_dim;     /* 0 = key_dim */
    float dropout;     /* on the attention probabilities, training only */
    bool no_bias;      /* use_bias=False */
    int output_dim;    /* Keras output_shape; 0 = the query's last dimension */
    tnt_initializer kernel_initializer, bias_initializer;
} tnt_attention_opts;
TNT_API tnt_layer *tnt_multi_head_attention(int num_heads, int key_dim, const tnt_attention_opts *opts);

/* Keras ReLU: y = (x > threshold ? x : 0) clipped to [0, max_value], minus
 * negative_slope * max(threshold - x, 0). max_value INFINITY: none (Keras None). */
TNT_API tnt_layer *tnt_relu_layer(float max_value, float negative_slope, float threshold, const char *name);
/* Keras LeakyReLU: y = x > 0 ? x : alpha * x (Keras's default alpha is 0.3). */
TNT_API tnt_layer *tnt_leaky_relu_layer(float alpha, const char *name);
/* Keras ELU: y = x > 0 ? x : alpha * (exp(x) - 1) (Keras's default alpha is 1). */
TNT_API tnt_layer *tnt_elu_layer(float alpha, const char *name);
/* Keras ThresholdedReLU: y = x > theta ? x : 0 (Keras's default theta is 1). */
TNT_API tnt_layer *tnt_thresholded_relu(float theta, const char *name);
/* Keras PReLU: y = x > 0 ? x : alpha * x with a learned alpha of the input's shape, size 1 along
 * each of the shared axes (1-based non-batch axes, as Keras); alpha_init DEFAULT = zeros. */
TNT_API tnt_layer *tnt_prelu(int n_shared_axes, const int *shared_axes, tnt_initializer alpha_init,
                             const char *name);
/* Keras Softmax layer over axis (-1 = last). */
TNT_API tnt_layer *tnt_softmax_layer(int axis, const char *name);

/* Keras Conv2DTranspose: (h, w, in) -> (oh, ow, filters), kernel (kh, kw, filters, in), bias
 * (filters). output_padding: {h, w}, each below its stride, or NULL for Keras's None. Output size
 * as Keras: valid h*s + max(k - s, 0), same h*s, or with output_padding p (h - 1)*s + k - 2*pad
 * + p (pad 0 for valid, k/2 for same; k the dilated kernel). opts: strides, padding (valid or
 * same), dilation, activation, no_bias, initializers. */
TNT_API tnt_layer *tnt_conv2d_transpose(int filters, int kernel_h, int kernel_w, const int *output_padding,
                                        const tnt_layer_opts *opts);
/* Keras Conv1DTranspose: (steps, in) -> (out_steps, filters), kernel (kernel_size, filters, in);
 * output_padding -1 for None; opts as Conv2DTranspose, using strides[0] and dilation[0]. */
TNT_API tnt_layer *tnt_conv1d_transpose(int filters, int kernel_size, int output_padding, const tnt_layer_opts *opts);

/* Keras GlobalMaxPooling1D: (steps, c) -> (c); GlobalAveragePooling3D, GlobalMaxPooling3D:
 * (d, h, w, c) -> (c). keepdims=False; max gradients split equally among tied maxima. */
TNT_API tnt_layer *tnt_global_max_pooling1d(const char *name);
TNT_API tnt_layer *tnt_global_average_pooling3d(const char *name);
TNT_API tnt_layer *tnt_global_max_pooling3d(const char *name);

/* Keras BatchNormalization (SyncBatchNormalization when sync) with all its options; momentum and
 * epsilon 0 mean Keras's 0.99 and 1e-3. no_center: no beta (Keras center=False); no_scale: no
 * gamma (scale=False); the weights are then, in Keras order, those that remain. axis: the channel
 * axis as Keras counts it (0 is the batch, 1 the first axis of the input shape; negative from the
 * end, 0 here means -1, the last): 1 for channels-first images. */
typedef struct tnt_batch_norm_opts {
    const char *name;
    float momentum, epsilon;
    bool no_center, no_scale;
    bool sync;
    int axis;
} tnt_batch_norm_opts;
TNT_API tnt_layer *tnt_batch_normalization_with(const tnt_batch_norm_opts *opts);

/* Training-time noise, identity at inference; seed 0 derives it from the model seed. The noise of
 * a value depends on its sample's index in the global batch, so a data-parallel step is exact.
 * SpatialDropout1D (steps, c) / SpatialDropout2D (h, w, c): whole channels dropped per sample,
 * the rest scaled by 1/(1-rate); GaussianNoise: x + stddev * N(0, 1); GaussianDropout:
 * x * N(1, rate/(1-rate)); AlphaDropout: Keras's SELU-preserving dropout. */
TNT_API tnt_layer *tnt_spatial_dropout1d(float rate, uint64_t seed, const char *name);
TNT_API tnt_layer *tnt_spatial_dropout2d(float rate, uint64_t seed, const char *name);
TNT_API tnt_layer *tnt_spatial_dropout3d(float rate, uint64_t seed, const char *name);
TNT_API tnt_layer *tnt_gaussian_noise(float stddev, uint64_t seed, const char *name);
TNT_API tnt_layer *tnt_gaussian_dropout(float rate, uint64_t seed, const char *name);
TNT_API tnt_layer *tnt_alpha_dropout(float rate, uint64_t seed, const char *name);
/* Keras ActivityRegularization: identity, whose output adds an activity regularizer L1L2(l1, l2)
 * to the training loss (see tnt_layer_set_regularizer). */
TNT_API tnt_layer *tnt_activity_regularization(float l1, float l2, const char *name);

/* Keras Resizing: (h, w, c) -> (height, width, c); interpolation NULL or "bilinear" (as
 * tf.image.resize: half-pixel centers, no antialias) or "nearest"; crop_to_aspect_ratio first takes
 * the largest centered window of the target's aspect ratio. */
TNT_API tnt_layer *tnt_resizing(int height, int width, const char *interpolation, bool crop_to_aspect_ratio,
                                const char *name);
/* Keras CenterCrop: the centered (height, width) window; a smaller input is resized to it (bilinear,
 * after a centered crop to the target's aspect ratio), as Keras. */
TNT_API tnt_layer *tnt_center_crop(int height, int width, const char *name);

/* Keras RandomCrop: in training a (height, width) window at a random offset per image (drawn from
 * the global sample index, seed 0: the model's); at inference, or from a smaller input, the largest
 * centered window of the target's aspect ratio resized to it (bilinear), as Keras. */
TNT_API tnt_layer *tnt_random_crop(int height, int width, uint64_t seed, const char *name);

/* Keras's random image augmentations on (h, w, c), active only in training (identity at
 * inference); draws keyed on the global sample index, so any split of the batch over ranks draws
 * the same. seed 0: derived from the model's seed. Factors are (lower, upper) ranges: translation
 * in fractions of the height/width (positive: down/right), rotation in turns (fraction of 2 pi,
 * counterclockwise), zoom as 1 + factor (positive: zoom out); RandomZoom's width range NAN, NAN:
 * the height's zoom (aspect ratio kept). */
typedef struct tnt_image_fill {
    const char *fill_mode;     /* NULL or "reflect" (Keras's default), "wrap", "nearest", "constant" */
    const char *interpolation; /* NULL or "bilinear", "nearest" */
    float fill_value;          /* for "constant" */
} tnt_image_fill;
/* mode NULL or "horizontal_and_vertical", "horizontal", "vertical": each flipped with probability 1/2 */
TNT_API tnt_layer *tnt_random_flip(const char *mode, uint64_t seed, const char *name);
TNT_API tnt_layer *tnt_random_translation(float height_lo, float height_hi, float width_lo, float width_hi,
                                          const tnt_image_fill *fill, uint64_t seed, const char *name);
TNT_API tnt_layer *tnt_random_rotation(float lo, float hi, const tnt_image_fill *fill, uint64_t seed,
                                       const char *name);
TNT_API tnt_layer *tnt_random_zoom(float height_lo, float height_hi, float width_lo, float width_hi,
                                   const tnt_image_fill *fill, uint64_t seed, const char *name);

/* Keras RandomContrast: per image a factor f in [1 - lower, 1 + upper], each channel
 * (x - mean) * f + mean, clipped to [value_min, value_max] (Keras: (0, 255)); RandomBrightness:
 * per image (a value in [lower, upper]) * (value_max - value_min) added, then clipped. Training
 * only, draws keyed on the global sample index as above. */
TNT_API tnt_layer *tnt_random_contrast(float lower, float upper, float value_min, float value_max, uint64_t seed,
                                       const char *name);
TNT_API tnt_layer *tnt_random_brightness(float lower, float upper, float value_min, float value_max, uint64_t seed,
                                         const char *name);

/* Keras Rescaling: y = x * scale + offset. */
TNT_API tnt_layer *tnt_rescaling(float scale, float offset, const char *name);
/* Keras Normalization (preprocessing) with given statistics: y = (x - mean) / max(sqrt(variance),
 * 1e-7), or with invert x * that + mean. One mean and variance per index of the kept axes (Keras's
 * axis, counting the batch axis: n_axes 0 = the default -1; -1 = None, one value for all). mean
 * and variance (n_values each: 1, broadcast, or one per index) are copied; NULL: the layer has
 * the non-trainable weights mean, variance and count that tf.keras writes after adapt(), to load. */
typedef struct tnt_normalization_opts {
    const char *name;
    int n_axes;
    int axes[TNT_MAX_DIMS];
    const float *mean, *variance;
    int64_t n_values;
    bool invert;
} tnt_normalization_opts;
TNT_API tnt_layer *tnt_normalization(const tnt_normalization_opts *opts);

/* Recurrent layers (Keras LSTM, GRU, SimpleRNN) over (timesteps, features) -> (units), or
 * (timesteps, units) with return_sequences. Weights in Keras layout: kernel (features, g*units),
 * recurrent_kernel (units, g*units), bias, with g gates: LSTM 4 (i, f, c, o), GRU 3 (z, r, h),
 * SimpleRNN 1. Bias: LSTM and SimpleRNN (g*units); GRU (2, 3*units) (input and recurrent
 * biases) with reset_after, (3*units) without. A sequence mask (Embedding mask_zero) reaches
 * them in a graph: masked steps keep the previous state and output (zeros with
 * zero_output_for_mask). Dropout masks are drawn per global sample index, so a data-parallel
 * step draws what a serial one does. */
typedef struct tnt_rnn_opts {
    const char *name;
    const char *activation;           /* Keras name; NULL: "tanh" */
    const char *recurrent_activation; /* NULL: "sigmoid" (LSTM, GRU); "hard_sigmoid" is Keras 2's
                                         clip(0.2x + 0.5, 0, 1), "hard_sigmoid_v3" Keras 3's
                                         relu6(x + 3) / 6 */
    bool return_sequences;
    bool return_state;       /* outputs: the output, then the final h (and c for LSTM): tnt_call_outputs */
    bool go_backwards;       /* process the sequence reversed (the output sequence too, as Keras) */
    bool stateful;           /* Keras stateful: each batch starts from the previous batch's final
                                states, row by row (tnt_model_reset_states zeroes them) */
    bool no_bias;            /* use_bias=False */
    bool no_unit_forget_bias; /* LSTM: unit_forget_bias=False (default: forget bias starts at 1) */
    bool reset_before;       /* GRU: reset_after=False (Keras 1/2.2 GRU) */
    bool zero_output_for_mask;
    float dropout, recurrent_dropout; /* in [0, 1) */
    tnt_initializer kernel_initializer;    /* default glorot_uniform */
    tnt_initializer recurrent_initializer; /* default orthogonal */
    tnt_initializer bias_initializer;      /* default zeros */
} tnt_rnn_opts;
TNT_API tnt_layer *tnt_lstm(int units, const tnt_rnn_opts *opts);
TNT_API tnt_layer *tnt_gru(int units, const tnt_rnn_opts *opts);
TNT_API tnt_layer *tnt_simple_rnn(int units, const tnt_rnn_opts *opts);
/* Keras 2's CuDNNLSTM and CuDNNGRU: the same math (tanh/sigmoid, GRU reset_after) with cuDNN's
 * double bias: LSTM (8*units) whose two halves add up, GRU (6*units) = input then recurrent. */
TNT_API tnt_layer *tnt_cudnn_lstm(int units, const tnt_rnn_opts *opts);
TNT_API tnt_layer *tnt_cudnn_gru(int units, const tnt_rnn_opts *opts);

/* Keras ConvLSTM2D over (timesteps, h, w, channels) (channels first: (timesteps, channels, h, w))
 * -> (timesteps, oh, ow, filters) with return_sequences, else (oh, ow, filters): an LSTM whose
 * input transform is a convolution (strides, padding valid or same, dilation) and whose recurrent
 * transform is a "same" convolution. rnn: activation, recurrent_activation (NULL: tanh, sigmoid),
 * return_sequences, go_backwards, return_state (outputs h, c of shape (oh, ow, filters) after the
 * output), dropout (of the input, one mask per sample for all steps), recurrent_dropout (of the
 * state, likewise), no_bias, no_unit_forget_bias, initializers and name; stateful and initial
 * states are not supported. Weights: kernel (kh, kw,
 * channels, 4 filters), recurrent_kernel (kh, kw, filters, 4 filters), bias (4 filters), gates
 * i f c o. */
typedef struct tnt_conv_lstm_opts {
    tnt_rnn_opts rnn;
    int strides[2], dilation[2]; /* 0 = 1 */
    tnt_padding padding;
} tnt_conv_lstm_opts;
TNT_API tnt_layer *tnt_conv_lstm2d(int filters, int kernel_h, int kernel_w, const tnt_conv_lstm_opts *opts);

/* Keras Bidirectional merge modes; NONE is Keras merge_mode=None: two outputs (tnt_call_outputs). */
typedef enum tnt_merge_mode {
    TNT_MERGE_CONCAT = 0,
    TNT_MERGE_SUM,
    TNT_MERGE_MUL,
    TNT_MERGE_AVE,
    TNT_MERGE_NONE
} tnt_merge_mode;
/* Keras Bidirectional over a recurrent layer (consumed): forward runs it, backward runs
 * backward_layer (consumed; NULL: a copy of forward with go_backwards flipped), whose output
 * sequence is reversed back before the merge. Weights: the forward layer's, then the backward
 * one's, named "forward_<name>/kernel", ... as Keras 2 files have them. */
TNT_API tnt_layer *tnt_bidirectional(tnt_layer *forward, tnt_layer *backward_layer, tnt_merge_mode mode,
                                     const char *name);
/* Keras TimeDistributed: applies inner (consumed; any single-input layer) to every timestep:
 * (T, ...) -> (T, inner's output...), as one call on batch * T samples. */
TNT_API tnt_layer *tnt_time_distributed(tnt_layer *inner, const char *name);

/* Keras Masking: steps (vectors along the last axis) whose values all equal mask_value are zeroed,
 * and in a graph (tnt_call) they are masked for the layers after it (recurrent layers,
 * GlobalAveragePooling1D), as Embedding(mask_zero) masks id 0. */
TNT_API tnt_layer *tnt_masking(float mask_value, const char *name);

/* The Keras 1-D layers over (steps, channels): ZeroPadding1D (left, right zero steps), Cropping1D
 * (left, right steps removed), UpSampling1D (each step repeated size times), and AveragePooling1D
 * (opts: strides (0: pool_size) and padding valid or same; a window's mean over its real steps). */
TNT_API tnt_layer *tnt_zero_padding1d(int left, int right, const char *name);
TNT_API tnt_layer *tnt_cropping1d(int left, int right, const char *name);
TNT_API tnt_layer *tnt_upsampling1d(int size, const char *name);
TNT_API tnt_layer *tnt_average_pooling1d(int pool_size, const tnt_layer_opts *opts);

/* The Keras 3-D layers over (depth, height, width, channels): ZeroPadding3D and Cropping3D
 * ({{front, back}, {top, bottom}, {left, right}} cells added or removed), UpSampling3D (each cell
 * repeated size[0] x size[1] x size[2] times), MaxPooling3D and AveragePooling3D (opts: strides[3]
 * (0: pool_size) and padding valid or same, as the 2-D ones). */
/* Keras Conv3D: (d, h, w, in) -> (od, oh, ow, filters), kernel (kd, kh, kw, in, filters), bias
 * (filters); opts: strides[3], dilation[3], padding (valid or same), activation, no_bias,
 * initializers, as Conv2D's. */
TNT_API tnt_layer *tnt_conv3d(int filters, const int kernel_size[3], const tnt_layer_opts *opts);
/* Keras Conv3DTranspose: (d, h, w, in) -> (od, oh, ow, filters), kernel (kd, kh, kw, filters, in),
 * bias (filters); output_padding {d, h, w} or NULL (None); sizes and opts as Conv2DTranspose's,
 * with strides[3]; dilation 1 only. */
TNT_API tnt_layer *tnt_conv3d_transpose(int filters, const int kernel_size[3], const int *output_padding,
                                        const tnt_layer_opts *opts);
/* Keras LocallyConnected1D and LocallyConnected2D: a convolution whose weights differ at every
 * output position. implementation 1 (or 0): padding "valid", (steps, in) -> (out_steps, filters),
 * kernel (out_steps, kernel_size * in, filters), bias (out_steps, filters); (h, w, in) ->
 * (oh, ow, filters), kernel (oh * ow, kh * kw * in, filters), bias (oh, ow, filters).
 * implementation 2: Keras's dense masked kernel (input dims..., output dims...), 3: its sparse
 * list (Keras's sorted conv_kernel_idxs), each with padding valid or same. opts: strides, padding, activation, no_bias, initializers; data_format through
 * tnt_layer_set_data_format. */
TNT_API tnt_layer *tnt_locally_connected1d(int filters, int kernel_size, int implementation, const tnt_layer_opts *opts);
TNT_API tnt_layer *tnt_locally_connected2d(int filters, int kernel_h, int kernel_w, int implementation,
                                           const tnt_layer_opts *opts);
TNT_API tnt_layer *tnt_zero_padding3d(const int padding[3][2], const char *name);
TNT_API tnt_layer *tnt_cropping3d(const int cropping[3][2], const char *name);
TNT_API tnt_layer *tnt_upsampling3d(const int size[3], const char *name);
TNT_API tnt_layer *tnt_max_pooling3d(const int pool_size[3], const tnt_layer_opts *opts);
TNT_API tnt_layer *tnt_average_pooling3d(const int pool_size[3], const tnt_layer_opts *opts);

/* Keras regularizers: the loss fit and evaluate report (and train) gains l1 * sum|w| + l2 *
 * sum(w^2) for each regularized weight w, and for an activity regularizer the same penalty on the
 * layer's output divided by the batch size (Keras 2). key is one of the layer's Keras config keys:
 * "kernel_regularizer", "bias_regularizer", "recurrent_regularizer", "depthwise_regularizer",
 * "pointwise_regularizer", "gamma_regularizer", "beta_regularizer", "embeddings_regularizer",
 * "alpha_regularizer", "activity_regularizer". L1 uses l1, L2 uses l2, L1L2 both (finite, >= 0);
 * NONE removes it. Set activity regularizers before compile. */
typedef enum tnt_regularizer_kind { TNT_REG_NONE, TNT_REG_L1, TNT_REG_L2, TNT_REG_L1L2, TNT_REG_ORTHOGONAL } tnt_regularizer_kind;
TNT_API tnt_status tnt_layer_set_regularizer(tnt_layer *l, const char *key, tnt_regularizer_kind kind, float l1,
                                             float l2);
/* Keras's OrthogonalRegularizer(factor, mode) on a rank-2 weight (compile refuses another rank):
 * factor * 0.5 * sum over i != j of |n_i . n_j| / (size * (size - 1) / 2), n_i the L2-normalized
 * rows (columns when columns) of the weight, size their count. */
TNT_API tnt_status tnt_layer_set_orthogonal_regularizer(tnt_layer *l, const char *key, float factor, bool columns);

/* Keras constraints, applied to a weight after each optimizer update. With norms taken over axes
 * of the weight (Keras's axis: for a Dense kernel (in, out) axis 0 is one norm per output unit):
 * MaxNorm rescales to at most max_value (0: Keras's 2); NonNeg zeroes negative values; UnitNorm
 * divides by the norm; MinMaxNorm moves the norm by rate (0: Keras's 1) towards [min_value,
 * max_value] (max_value 0: Keras's 1). Norms get Keras's epsilon 1e-7. */
typedef enum tnt_constraint_kind {
    TNT_CONSTRAINT_NONE,
    TNT_MAX_NORM,
    TNT_NON_NEG,
    TNT_UNIT_NORM,
    TNT_MIN_MAX_NORM
} tnt_constraint_kind;
typedef struct tnt_constraint {
    tnt_constraint_kind kind;
    float max_value, min_value, rate;
    int n_axes;               /* 0: Keras's default axis 0 */
    int axes[TNT_MAX_DIMS];   /* weight axes, negative from the end */
} tnt_constraint;
/* key: "kernel_constraint", "bias_constraint", "recurrent_constraint", ... as for regularizers
 * (no activity); c NULL or kind NONE removes it. */
TNT_API tnt_status tnt_layer_set_constraint(tnt_layer *l, const char *key, const tnt_constraint *c);

/* Keras's layer.trainable: false freezes the layer: fit leaves its weights as they are (they are
 * none of the optimizer's variables), a BatchNormalization runs in inference mode (its moving
 * statistics, not updated), and Keras 2 HDF5 files list its weights among the non-trainable ones
 * (a frozen nested model's in layer order), as Keras does. Read from and written to Keras configs. */
TNT_API tnt_status tnt_layer_set_trainable(tnt_layer *l, bool trainable);
TNT_API bool tnt_layer_trainable(const tnt_layer *l);

/* A layer's Keras dtype policy, "float32" or "mixed_bfloat16" (tnt_mixed_precision_set_global_policy
 * gives the default); set before the layer is built, as Keras's dtype= argument. */
TNT_API tnt_status tnt_layer_set_dtype_policy(tnt_layer *l, const char *name);
TNT_API const char *tnt_layer_dtype_policy(const tnt_layer *l);

#endif

/* tarantella_layers.h: more Keras layers (included by tarantella.h, after the core layer
 * constructors; not meant to be included on its own). Shapes exclude the batch axis; axes in
 * Keras's numbering count the batch axis as 0. */
#ifndef TARANTELLA_LAYERS_H
#define TARANTELLA_LAYERS_H

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

/* Keras BatchNormalization (SyncBatchNormalization when sync) over the last axis with all its
 * options; momentum and epsilon 0 mean Keras's 0.99 and 1e-3. no_center: no beta (Keras
 * center=False); no_scale: no gamma (scale=False); the weights are then, in Keras order, those
 * that remain. */
typedef struct tnt_batch_norm_opts {
    const char *name;
    float momentum, epsilon;
    bool no_center, no_scale;
    bool sync;
} tnt_batch_norm_opts;
TNT_API tnt_layer *tnt_batch_normalization_with(const tnt_batch_norm_opts *opts);

/* Training-time noise, identity at inference; seed 0 derives it from the model seed. The noise of
 * a value depends on its sample's index in the global batch, so a data-parallel step is exact.
 * SpatialDropout1D (steps, c) / SpatialDropout2D (h, w, c): whole channels dropped per sample,
 * the rest scaled by 1/(1-rate); GaussianNoise: x + stddev * N(0, 1); GaussianDropout:
 * x * N(1, rate/(1-rate)); AlphaDropout: Keras's SELU-preserving dropout. */
TNT_API tnt_layer *tnt_spatial_dropout1d(float rate, uint64_t seed, const char *name);
TNT_API tnt_layer *tnt_spatial_dropout2d(float rate, uint64_t seed, const char *name);
TNT_API tnt_layer *tnt_gaussian_noise(float stddev, uint64_t seed, const char *name);
TNT_API tnt_layer *tnt_gaussian_dropout(float rate, uint64_t seed, const char *name);
TNT_API tnt_layer *tnt_alpha_dropout(float rate, uint64_t seed, const char *name);
/* Keras ActivityRegularization: identity, whose output adds an activity regularizer L1L2(l1, l2)
 * to the training loss (see tnt_layer_set_regularizer). */
TNT_API tnt_layer *tnt_activity_regularization(float l1, float l2, const char *name);

/* Keras Rescaling: y = x * scale + offset. */
TNT_API tnt_layer *tnt_rescaling(float scale, float offset, const char *name);

/* Keras regularizers: the loss fit and evaluate report (and train) gains l1 * sum|w| + l2 *
 * sum(w^2) for each regularized weight w, and for an activity regularizer the same penalty on the
 * layer's output divided by the batch size (Keras 2). key is one of the layer's Keras config keys:
 * "kernel_regularizer", "bias_regularizer", "recurrent_regularizer", "depthwise_regularizer",
 * "pointwise_regularizer", "gamma_regularizer", "beta_regularizer", "embeddings_regularizer",
 * "alpha_regularizer", "activity_regularizer". L1 uses l1, L2 uses l2, L1L2 both (finite, >= 0);
 * NONE removes it. Set activity regularizers before compile. */
typedef enum tnt_regularizer_kind { TNT_REG_NONE, TNT_REG_L1, TNT_REG_L2, TNT_REG_L1L2 } tnt_regularizer_kind;
TNT_API tnt_status tnt_layer_set_regularizer(tnt_layer *l, const char *key, tnt_regularizer_kind kind, float l1,
                                             float l2);

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

#endif

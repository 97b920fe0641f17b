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
/* Keras ActivityRegularization: identity; the l1/l2 penalty on its output is not yet added to
 * the loss (it awaits the model's regularization-penalty mechanism). */
TNT_API tnt_layer *tnt_activity_regularization(float l1, float l2, const char *name);

/* Keras Rescaling: y = x * scale + offset. */
TNT_API tnt_layer *tnt_rescaling(float scale, float offset, const char *name);

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

#endif

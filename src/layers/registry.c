/* registry.c: the Keras layer classes this library reads, by the class name a Keras file gives
 * (aliases included), each pointing to the ops table of the layer file that implements it; that
 * table's from_config reads the class's config.
 *
 * Adding a layer class: write its file in src/layers/ (forward, backward, get_config, from_config,
 * and a non-static `const tnt__layer_ops tnt__<name>_ops`), then add one line below:
 *     X("KerasClassName", tnt__<name>_ops)
 * The line declares the table and lists it; src/io/keras_json.c needs no change. */
#include "layers/keras_config.h"

/* Every line ends with a backslash, the last one too, so that adding a line touches no other. */
#define TNT_KERAS_CLASSES(X) \
    X("Dense", tnt__dense_ops) \
    X("Conv2D", tnt__conv2d_ops) \
    X("Convolution2D", tnt__conv2d_ops) \
    X("Conv1D", tnt__conv1d_ops) \
    X("Convolution1D", tnt__conv1d_ops) \
    X("DepthwiseConv2D", tnt__depthwise_conv2d_ops) \
    X("SeparableConv2D", tnt__separable_conv2d_ops) \
    X("SeparableConvolution2D", tnt__separable_conv2d_ops) \
    X("MaxPooling2D", tnt__max_pooling2d_ops) \
    X("MaxPool2D", tnt__max_pooling2d_ops) \
    X("AveragePooling2D", tnt__average_pooling2d_ops) \
    X("AvgPool2D", tnt__average_pooling2d_ops) \
    X("MaxPooling1D", tnt__max_pooling1d_ops) \
    X("MaxPool1D", tnt__max_pooling1d_ops) \
    X("GlobalAveragePooling2D", tnt__global_average_pooling2d_ops) \
    X("GlobalAvgPool2D", tnt__global_average_pooling2d_ops) \
    X("GlobalMaxPooling2D", tnt__global_max_pooling2d_ops) \
    X("GlobalMaxPool2D", tnt__global_max_pooling2d_ops) \
    X("GlobalAveragePooling1D", tnt__global_average_pooling1d_ops) \
    X("GlobalAvgPool1D", tnt__global_average_pooling1d_ops) \
    X("ZeroPadding2D", tnt__zero_padding2d_ops) \
    X("Cropping2D", tnt__cropping2d_ops) \
    X("UpSampling2D", tnt__upsampling2d_ops) \
    X("Flatten", tnt__flatten_ops) \
    X("Reshape", tnt__reshape_ops) \
    X("Permute", tnt__permute_ops) \
    X("RepeatVector", tnt__repeat_vector_ops) \
    X("Dropout", tnt__dropout_ops) \
    X("Activation", tnt__activation_ops) \
    X("BatchNormalization", tnt__batch_normalization_ops) \
    X("SyncBatchNormalization", tnt__sync_batch_normalization_ops) \
    X("LayerNormalization", tnt__layer_normalization_ops) \
    X("Embedding", tnt__embedding_ops) \
    X("MultiHeadAttention", tnt__multi_head_attention_ops) \
    X("Add", tnt__add_ops) \
    X("Subtract", tnt__subtract_ops) \
    X("Multiply", tnt__multiply_ops) \
    X("Average", tnt__average_ops) \
    X("Maximum", tnt__maximum_ops) \
    X("Minimum", tnt__minimum_ops) \
    X("Concatenate", tnt__concatenate_ops) \
    X("Dot", tnt__dot_ops) \
    X("LSTM", tnt__lstm_ops) \
    X("CuDNNLSTM", tnt__cudnn_lstm_ops) \
    X("GRU", tnt__gru_ops) \
    X("CuDNNGRU", tnt__cudnn_gru_ops) \
    X("SimpleRNN", tnt__simple_rnn_ops) \
    X("Bidirectional", tnt__bidirectional_ops) \
    X("TimeDistributed", tnt__time_distributed_ops) \
    X("ReLU", tnt__relu_ops) \
    X("LeakyReLU", tnt__leaky_relu_ops) \
    X("ELU", tnt__elu_ops) \
    X("ThresholdedReLU", tnt__thresholded_relu_ops) \
    X("PReLU", tnt__prelu_ops) \
    X("Softmax", tnt__softmax_ops) \
    X("Conv2DTranspose", tnt__conv2d_transpose_ops) \
    X("Convolution2DTranspose", tnt__conv2d_transpose_ops) \
    X("Conv1DTranspose", tnt__conv1d_transpose_ops) \
    X("Convolution1DTranspose", tnt__conv1d_transpose_ops) \
    X("GlobalMaxPooling1D", tnt__global_max_pooling1d_ops) \
    X("GlobalMaxPool1D", tnt__global_max_pooling1d_ops) \
    X("GlobalAveragePooling3D", tnt__global_average_pooling3d_ops) \
    X("GlobalAvgPool3D", tnt__global_average_pooling3d_ops) \
    X("GlobalMaxPooling3D", tnt__global_max_pooling3d_ops) \
    X("GlobalMaxPool3D", tnt__global_max_pooling3d_ops) \
    X("SpatialDropout1D", tnt__spatial_dropout1d_ops) \
    X("SpatialDropout2D", tnt__spatial_dropout2d_ops) \
    X("GaussianNoise", tnt__gaussian_noise_ops) \
    X("Masking", tnt__masking_ops) \
    X("ZeroPadding1D", tnt__zero_padding1d_ops) \
    X("Cropping1D", tnt__cropping1d_ops) \
    X("UpSampling1D", tnt__upsampling1d_ops) \
    X("AveragePooling1D", tnt__average_pooling1d_ops) \
    X("AvgPool1D", tnt__average_pooling1d_ops) \
    X("GaussianDropout", tnt__gaussian_dropout_ops) \
    X("AlphaDropout", tnt__alpha_dropout_ops) \
    X("ActivityRegularization", tnt__activity_regularization_ops) \
    X("Rescaling", tnt__rescaling_ops) \
    X("ZeroPadding3D", tnt__zero_padding3d_ops) \
    X("Cropping3D", tnt__cropping3d_ops) \
    X("UpSampling3D", tnt__upsampling3d_ops) \
    X("MaxPooling3D", tnt__max_pooling3d_ops) \
    X("MaxPool3D", tnt__max_pooling3d_ops) \
    X("AveragePooling3D", tnt__average_pooling3d_ops) \
    X("AvgPool3D", tnt__average_pooling3d_ops) \
    X("SpatialDropout3D", tnt__spatial_dropout3d_ops) \
    X("Conv3D", tnt__conv3d_ops) \
    X("Convolution3D", tnt__conv3d_ops) \
    X("Normalization", tnt__normalization_ops) \
    X("ConvLSTM2D", tnt__conv_lstm2d_ops) \
    X("LocallyConnected1D", tnt__locally_connected1d_ops) \
    X("LocallyConnected2D", tnt__locally_connected2d_ops) \
    X("Conv3DTranspose", tnt__conv3d_transpose_ops) \
    X("Convolution3DTranspose", tnt__conv3d_transpose_ops) \
    X("Resizing", tnt__resizing_ops) \
    X("CenterCrop", tnt__center_crop_ops) \
    X("RandomFlip", tnt__random_flip_ops) \
    X("RandomTranslation", tnt__random_translation_ops) \
    X("RandomRotation", tnt__random_rotation_ops) \
    X("RandomZoom", tnt__random_zoom_ops) \
    X("RandomContrast", tnt__random_contrast_ops) \
    X("RandomBrightness", tnt__random_brightness_ops) \
    X("RandomCrop", tnt__random_crop_ops) \
    X("PositionEmbedding", tnt__position_embedding_ops) /* KerasHub's (keras_nlp's) */ \
    /* end of TNT_KERAS_CLASSES */

#define DECLARE_OPS(cls, ops) extern const tnt__layer_ops ops;
TNT_KERAS_CLASSES(DECLARE_OPS)

#define LIST_CLASS(cls, ops) {cls, &ops},
static const struct {
    const char *cls;
    const tnt__layer_ops *ops;
} classes[] = {TNT_KERAS_CLASSES(LIST_CLASS)};

const tnt__layer_ops *tnt__layer_class_find(const char *cls) {
    for (size_t i = 0; i < TNT_ARRAY_LEN(classes); i++)
        if (!strcmp(classes[i].cls, cls)) return classes[i].ops;
    return NULL;
}

/* registry.c: the Keras layer classes this library reads, by the class name a Keras file gives
 * (aliases included), each pointing to the ops table of the layer file that implements it; that
 * table's from_config reads the class's config.
 *
 * Adding a layer class: write its file in src/layers/ (forward, backward, get_config, from_config,
 * and a non-static `const tnt__layer_ops tnt__<name>_ops`), then add one line below:
 *     X("KerasClassName", tnt__<name>_ops)
 * The line declares the table and lists it; src/io/keras_json.c needs no change. */
#include "layers/keras_config.h"

#define TNT_KERAS_CLASSES(X)                                                                      \
    X("Dense", tnt__dense_ops)                                                                   \
    X("ReLU", tnt__relu_ops)                                                                     \
    X("LeakyReLU", tnt__leaky_relu_ops)                                                          \
    X("ELU", tnt__elu_ops)                                                                       \
    X("ThresholdedReLU", tnt__thresholded_relu_ops)                                              \
    X("PReLU", tnt__prelu_ops)                                                                   \
    X("Softmax", tnt__softmax_ops)                                                               \
    X("Conv2DTranspose", tnt__conv2d_transpose_ops)                                              \
    X("Convolution2DTranspose", tnt__conv2d_transpose_ops)                                       \
    X("Conv1DTranspose", tnt__conv1d_transpose_ops)                                              \
    X("Convolution1DTranspose", tnt__conv1d_transpose_ops)

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

/* classic.c: LeNet-5 and the MLP of the benchmark (see classic.h). */
#include "classic.h"

static tnt_model *finish(tnt_model *m, tnt_status s) {
    if (s) {
        tnt_model_free(m);
        return NULL;
    }
    return m;
}

tnt_model *lenet5_model(void) {
    tnt_model *m = tnt_sequential("lenet5");
    tnt_layer_opts same_relu = {.padding = TNT_PADDING_SAME, .activation = TNT_ACT_RELU};
    return finish(m, tnt_model_add(m, tnt_input_layer(TNT_SHAPE(28, 28, 1), NULL)) ||
                         tnt_model_add(m, tnt_conv2d(20, 5, 5, &same_relu)) ||
                         tnt_model_add(m, tnt_max_pooling2d(2, 2, NULL)) ||
                         tnt_model_add(m, tnt_conv2d(50, 5, 5, &same_relu)) ||
                         tnt_model_add(m, tnt_max_pooling2d(2, 2, NULL)) || tnt_model_add(m, tnt_flatten(NULL)) ||
                         tnt_model_add(m, tnt_dense(500, &(tnt_layer_opts){.activation = TNT_ACT_RELU})) ||
                         tnt_model_add(m, tnt_dense(10, &(tnt_layer_opts){.activation = TNT_ACT_SOFTMAX})));
}

tnt_model *mlp_model(void) {
    tnt_model *m = tnt_sequential("mlp");
    tnt_layer_opts relu = {.activation = TNT_ACT_RELU};
    return finish(m, tnt_model_add(m, tnt_input_layer(TNT_SHAPE(28, 28, 1), NULL)) ||
                         tnt_model_add(m, tnt_flatten(NULL)) || tnt_model_add(m, tnt_dense(4096, &relu)) ||
                         tnt_model_add(m, tnt_dense(4096, &relu)) || tnt_model_add(m, tnt_dense(4096, &relu)) ||
                         tnt_model_add(m, tnt_dense(10, &(tnt_layer_opts){.activation = TNT_ACT_SOFTMAX})));
}

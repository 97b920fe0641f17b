/* classic.h: the two small models of the benchmark, as its PyTorch peers build them
 * (bench/peers/torch_lenet5.py, torch_models.py --model mlp); shared by bench_train and
 * profile_model.
 *   lenet5_model: Tarantella's quick-start LeNet-5 on 28x28x1 images: Conv2D(20, 5, same, relu),
 *     MaxPooling2D(2), Conv2D(50, 5, same, relu), MaxPooling2D(2), Flatten, Dense(500, relu),
 *     Dense(10, softmax); 1,256,080 parameters.
 *   mlp_model: 784-4096-4096-4096-10 (ReLU, softmax output) on 28x28x1 images; 36,765,706
 *     parameters.
 * Both return NULL with tnt_last_error() set on failure. */
#ifndef TNT_ZOO_CLASSIC_H
#define TNT_ZOO_CLASSIC_H

#include <tarantella.h>

tnt_model *lenet5_model(void);
tnt_model *mlp_model(void);

#endif

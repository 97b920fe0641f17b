/* fuzz_h5_weights.c: libFuzzer target for tnt_load_weights on the input as a file, into the
 * model of tests/fixtures/h5_*.h5 (Conv2D, BatchNormalization, Flatten, Dense), in order and by
 * name. A load fails with a message and leaves the weights as they were, or succeeds; it never
 * crashes or hangs (libhdf5 parses in a child process with a time limit: its coverage is not
 * seen here, the containment is what this target checks). */
#include "fuzz.h"

#include "tarantella.h"

#include <stdlib.h>
#include <string.h>

static tnt_model *model;
static float *before, *after;
static int64_t n;

static tnt_model *fixture_model(void) {
    tnt_model *m = tnt_sequential("seq");
    tnt_layer_opts relu = {.activation = TNT_ACT_RELU, .name = "conv2d_3"};
    tnt_layer_opts softmax = {.activation = TNT_ACT_SOFTMAX, .name = "dense_9"};
    if (tnt_model_add(m, tnt_input_layer(TNT_SHAPE(4, 4, 2), NULL)) || tnt_model_add(m, tnt_conv2d(3, 2, 2, &relu)) ||
        tnt_model_add(m, tnt_batch_normalization(0, 0, "batch_normalization_3")) ||
        tnt_model_add(m, tnt_flatten("flatten_3")) || tnt_model_add(m, tnt_dense(5, &softmax)))
        fuzz_fail("build the model", __FILE__, __LINE__);
    return m;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!model) {
        model = fixture_model();
        n = tnt_model_count_params(model);
        before = malloc((size_t)n * sizeof(float)), after = malloc((size_t)n * sizeof(float));
        FUZZ_CHECK(before && after);
    }
    const char *path = fuzz_temp_file(data, size, ".h5");
    for (int by_name = 0; by_name < 2; by_name++) {
        FUZZ_CHECK(tnt_get_weights(model, before, n) == TNT_OK);
        if (tnt_load_weights(model, path, by_name) != TNT_OK) {
            FUZZ_CHECK(strstr(tnt_last_error(), path)); /* the message names the file */
            FUZZ_CHECK(tnt_get_weights(model, after, n) == TNT_OK);
            FUZZ_CHECK(!memcmp(before, after, (size_t)n * sizeof(float))); /* unchanged */
        }
    }
    return 0;
}

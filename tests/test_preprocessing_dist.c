/* test_preprocessing_dist.c: a model that begins with Keras's random image augmentations
 * (RandomCrop, RandomFlip, RandomRotation, RandomZoom, RandomTranslation, RandomContrast,
 * RandomBrightness), trained data-parallel under mpirun, equals the same model trained serially:
 * each augmentation draws from the sample's index in the global batch, so any split of the batch
 * over ranks draws the same transforms (weights and History within 1e-5, weights bitwise the same
 * on every rank). */
#include "testutil.h"

#include "comm/comm.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { N_SAMPLES = 60, BATCH = 16, SIDE = 8, CH = 3, PER = SIDE * SIDE * CH, CLASSES = 3 }; /* 60 = 3*16 + 12 */

static float xs[N_SAMPLES * PER], ys[N_SAMPLES];

static tnt_model *augmented_model(void) {
    tnt_model *m = tnt_sequential("aug");
    tu_ok(tnt_model_add(m, tnt_input_layer(TNT_SHAPE(SIDE, SIDE, CH), NULL)));
    tu_ok(tnt_model_add(m, tnt_random_crop(7, 7, 0, NULL)));
    tu_ok(tnt_model_add(m, tnt_random_flip("horizontal", 0, NULL)));
    tu_ok(tnt_model_add(m, tnt_random_rotation(-0.1f, 0.1f, NULL, 0, NULL)));
    tu_ok(tnt_model_add(m, tnt_random_zoom(-0.1f, 0.1f, NAN, NAN, NULL, 0, NULL)));
    tu_ok(tnt_model_add(m, tnt_random_translation(-0.1f, 0.1f, -0.1f, 0.1f, NULL, 0, NULL)));
    tu_ok(tnt_model_add(m, tnt_random_contrast(0.2f, 0.2f, -100, 100, 0, NULL)));
    tu_ok(tnt_model_add(m, tnt_random_brightness(-0.01f, 0.01f, -100, 100, 0, NULL)));
    tu_ok(tnt_model_add(m, tnt_conv2d(4, 3, 3, &(tnt_layer_opts){.activation = TNT_ACT_RELU})));
    tu_ok(tnt_model_add(m, tnt_flatten(NULL)));
    tu_ok(tnt_model_add(m, tnt_dense(CLASSES, &(tnt_layer_opts){.activation = TNT_ACT_SOFTMAX})));
    return m;
}

static float *train(bool distributed, tnt_history **h, int64_t *n_out) {
    tnt_model *m = augmented_model();
    if (distributed) tu_ok(tnt_distribute_with(m, &(tnt_distribute_opts){0}));
    tu_ok(tnt_compile(m, &(tnt_compile_opts){.optimizer = tnt_optimizer_new("adam", &(tnt_optimizer_opts){.learning_rate = 0.01f}),
                                             .loss = TNT_SPARSE_CATEGORICAL_CROSSENTROPY, .metrics = "accuracy",
                                             .seed = 5}));
    tnt_dataset *ds = tnt_dataset_batch(
        tnt_dataset_shuffle(tnt_dataset_from_arrays(xs, TNT_SHAPE(SIDE, SIDE, CH), ys, TNT_SHAPE(), N_SAMPLES, false),
                            N_SAMPLES, 42),
        BATCH, false);
    tu_ok(tnt_fit(m, ds, &(tnt_fit_opts){.epochs = 2}, h));
    int64_t n = tnt_model_count_params(m);
    float *w = malloc((size_t)n * sizeof(float));
    tu_ok(tnt_get_weights(m, w, n));
    *n_out = n;
    tnt_dataset_free(ds);
    tnt_model_free(m);
    return w;
}

static void test_augmented_training_equals_serial(void **state) {
    (void)state;
    tnt_history *hs, *hd;
    int64_t n;
    float *ws = train(false, &hs, &n), *wd = train(true, &hd, &n);
    char what[64];
    snprintf(what, sizeof what, "weights (ranks %d)", tnt_get_size());
    tu_assert_close(wd, ws, n, 1e-5, 1e-6, what);
    float *master = malloc((size_t)n * sizeof(float));
    memcpy(master, wd, (size_t)n * sizeof(float));
    tu_ok(tnt__bcast_f32(master, n));
    assert_memory_equal(master, wd, (size_t)n * sizeof(float));
    for (int e = 0; e < 2; e++) {
        double s = tnt_history_get(hs, "loss", e), d = tnt_history_get(hd, "loss", e);
        if (!(fabs(s - d) <= 1e-5 * fabs(s) + 1e-7))
            fail_msg("epoch %d loss: distributed %.9g, serial %.9g (ranks %d)", e, d, s, tnt_get_size());
    }
    tnt_history_free(hs), tnt_history_free(hd);
    free(ws), free(wd), free(master);
}

int main(int argc, char **argv) {
    if (tnt_init(&argc, &argv) != TNT_OK) {
        fprintf(stderr, "tnt_init: %s\n", tnt_last_error());
        return 1;
    }
    tu_fill(xs, N_SAMPLES * PER, 17);
    for (int i = 0; i < N_SAMPLES; i++) { /* the class: which channel is brightest on average */
        double s[CH] = {0};
        for (int j = 0; j < PER; j++) s[j % CH] += xs[i * PER + j];
        ys[i] = (float)(s[0] > s[1] ? (s[0] > s[2] ? 0 : 2) : (s[1] > s[2] ? 1 : 2));
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_augmented_training_equals_serial),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    tnt_finalize();
    return rc;
}

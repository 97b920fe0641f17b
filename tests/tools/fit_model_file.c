/* fit_model_file: what a C API user writes to train a compiled Keras whole-model file as
 * load_model(MODEL).fit(x, x, shuffle=True) would, for test_tnt_train.sh to compare with tnt-train:
 * tnt_load_model(MODEL, true) (the file's loss, optimizer with its state, metrics), the samples
 * of X.npy as inputs and as targets, shuffled each epoch from SEED, batched, data-parallel under
 * the launcher; the epoch figures go to OUT.csv (tnt_csv_logger).
 *
 *   fit_model_file MODEL.h5 X.npy EPOCHS BATCH_SIZE SEED OUT.csv */
#include <tarantella.h>

#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    if (argc != 7) {
        fprintf(stderr, "usage: fit_model_file MODEL.h5 X.npy EPOCHS BATCH_SIZE SEED OUT.csv\n");
        return 2;
    }
    if (tnt_init(&argc, &argv) != TNT_OK) {
        fprintf(stderr, "fit_model_file: %s\n", tnt_last_error());
        return 1;
    }
    tnt_model *m = tnt_load_model(argv[1], true);
    tnt_dataset *ds = tnt_dataset_from_npy(argv[2], argv[2]);
    if (ds) ds = tnt_dataset_shuffle(ds, tnt_dataset_cardinality(ds), strtoull(argv[5], NULL, 10));
    ds = tnt_dataset_batch(ds, atol(argv[4]), false);
    tnt_callback csv = tnt_csv_logger(argv[6], 0, false);
    int rc = 0;
    if (!m || !ds || tnt_distribute(m) != TNT_OK ||
        tnt_fit(m, ds, &(tnt_fit_opts){.epochs = atoi(argv[3]), .callbacks = &csv, .n_callbacks = 1}, NULL) != TNT_OK) {
        fprintf(stderr, "fit_model_file: %s\n", tnt_last_error());
        rc = 1;
    }
    tnt_callback_free(&csv);
    tnt_dataset_free(ds);
    tnt_model_free(m);
    tnt_finalize();
    return rc;
}

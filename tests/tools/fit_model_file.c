/* fit_model_file: what a C API user writes to train a compiled Keras whole-model file as
 * load_model(MODEL).fit(x, y, shuffle=True) would, for test_tnt_train.sh to compare with tnt-train:
 * tnt_load_model(MODEL, true) (the file's loss, optimizer with its state, metrics), the samples
 * of X.npy as inputs and as targets (or Y.npy as targets), shuffled each epoch from SEED, batched,
 * data-parallel under the launcher; the epoch figures go to OUT.csv (tnt_csv_logger). W1,W2,...:
 * the model is compiled again, keeping its optimizer and state, with these loss_weights.
 *
 *   fit_model_file MODEL.h5 X.npy EPOCHS BATCH_SIZE SEED OUT.csv [Y.npy [W1,W2,...]] */
#include <tarantella.h>

#include <stdio.h>
#include <stdlib.h>

/* Compiles m again as it was, with the loss weights of the list w ("2,0.5"). */
static tnt_status set_loss_weights(tnt_model *m, const char *w) {
    float weights[8];
    int n = 0;
    for (char *end; *w && n < 8; w = *end ? end + 1 : end) weights[n++] = strtof(w, &end);
    char metrics[256];
    tnt_compile_opts co;
    tnt_status s = tnt_model_compile_opts(m, &co, metrics, sizeof metrics);
    co.loss_weights = weights;
    co.n_loss_weights = n;
    return s == TNT_OK ? tnt_compile(m, &co) : s;
}

int main(int argc, char **argv) {
    if (argc < 7 || argc > 9) {
        fprintf(stderr, "usage: fit_model_file MODEL.h5 X.npy EPOCHS BATCH_SIZE SEED OUT.csv [Y.npy [W1,W2]]\n");
        return 2;
    }
    if (tnt_init(&argc, &argv) != TNT_OK) {
        fprintf(stderr, "fit_model_file: %s\n", tnt_last_error());
        return 1;
    }
    tnt_model *m = tnt_load_model(argv[1], true);
    tnt_dataset *ds = tnt_dataset_from_npy(argv[2], argc > 7 ? argv[7] : argv[2]);
    if (ds) ds = tnt_dataset_shuffle(ds, tnt_dataset_cardinality(ds), strtoull(argv[5], NULL, 10));
    ds = tnt_dataset_batch(ds, atol(argv[4]), false);
    tnt_callback csv = tnt_csv_logger(argv[6], 0, false);
    int rc = 0;
    if (!m || !ds || (argc > 8 && set_loss_weights(m, argv[8]) != TNT_OK) || tnt_distribute(m) != TNT_OK ||
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

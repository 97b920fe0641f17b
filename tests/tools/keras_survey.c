/* keras_survey: loads each Keras whole-model file named on the command line as a user would
 * (tnt_load_model(path, false)) and, for a model with one input, runs one forward pass on a batch
 * of two zero samples (None dimensions 8, else 32 or 128 where 8 is too small; a Sequential saved
 * unbuilt, without an input shape, gets (2, 8): Keras builds it at its first call). One line per file
 * on stdout:
 *   OK <path>                       loaded and predicted (or loaded, for several inputs)
 *   FAIL <path>: <tnt_last_error()> loading or the forward pass failed
 * scripts/keras_survey.sh runs it over the .h5 files of dl4j-test-resources and sums the lines.
 *
 *   keras_survey FILE... */
#include <tarantella.h>

#include <stdio.h>

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: keras_survey FILE...\n");
        return 2;
    }
    int ok = 0;
    for (int i = 1; i < argc; i++) {
        tnt_model *m = tnt_load_model(argv[i], false);
        tnt_status s = m ? TNT_OK : TNT_ERR_ARG;
        /* None (variable) input dimensions: 8, or larger where a deep convolution needs it */
        static const int64_t sizes[] = {8, 32, 128};
        bool var = false;
        for (size_t k = 0; m && tnt_model_num_inputs(m) == 1 && k < sizeof sizes / sizeof *sizes; k++) {
            tnt_shape in = tnt_model_input_shape_at(m, 0), b = {.ndim = in.ndim + 1, .dim = {2}};
            if (in.ndim == 0) b = (tnt_shape){.ndim = 2, .dim = {2, sizes[k]}}; /* unbuilt: Keras builds at the call */
            for (int d = 0; d < in.ndim; d++) {
                b.dim[d + 1] = in.dim[d] == TNT_DIM_NONE ? sizes[k] : in.dim[d];
                var |= in.dim[d] == TNT_DIM_NONE;
            }
            tnt_tensor *x = tnt_tensor_new(b), *y = NULL;
            s = x ? tnt_predict_on_batch(m, x, &y) : TNT_ERR_NOMEM;
            tnt_tensor_free(x);
            tnt_tensor_free(y);
            if (s == TNT_OK || !var) break;
        }
        if (s == TNT_OK) {
            ok++;
            printf("OK %s\n", argv[i]);
        } else {
            printf("FAIL %s: %s\n", argv[i], tnt_last_error());
        }
        tnt_model_free(m);
        fflush(stdout);
    }
    fprintf(stderr, "keras_survey: %d of %d load\n", ok, argc - 1);
    return 0;
}

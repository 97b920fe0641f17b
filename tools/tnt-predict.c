/* tnt-predict: inference of a saved Keras model on an NPY array, written as NPY in input order.
 *
 *   tnt-predict MODEL.h5|MODEL.keras INPUT.npy OUTPUT.npy [--batch_size N] [--verbose]
 *   tnt-predict MODEL.json INPUT.npy OUTPUT.npy --weights W.h5 [--batch_size N] [--verbose]
 *   tnt-predict MODEL --input NAME=X.npy [--input NAME2=X2.npy ...] OUTPUT.npy   (several inputs)
 *   tarantella -n 4 -- tnt-predict ...     (data-parallel: each rank runs its share of every
 *                                           batch; the master gathers and writes the rows)
 * It prints nothing but errors unless --verbose (progress, library warnings, what was written).
 * Exit status: 0 success, 1 a failure (message on stderr), 2 bad usage. */
#include <tarantella.h>

#include "common/npy_inputs.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char USAGE[] =
    "usage: tnt-predict MODEL INPUT.npy OUTPUT.npy [--weights W.h5] [--batch_size N] [--verbose]\n"
    "       tnt-predict MODEL --input NAME=X.npy [--input NAME=X.npy ...] OUTPUT.npy [options]\n"
    "  MODEL        a whole model saved by Keras's model.save (Keras 3 .keras zip, or .h5), or\n"
    "               the architecture as model.to_json() writes it (.json, with --weights)\n"
    "  INPUT.npy    samples along the first axis (any numeric dtype; converted to float32); None\n"
    "               (variable) dimensions of the model's input take the file's sizes\n"
    "  --input      one input of a model with several, by name (its dict key in Keras 3, else its\n"
    "               InputLayer's name); repeat it for each input\n"
    "  OUTPUT.npy   the model's outputs, float32, one row per input sample, in input order (several\n"
    "               outputs: one row holds output 0's values, then output 1's, ...)\n"
    "  --weights    Keras HDF5 weights (model.save_weights); required with a .json model\n"
    "  --batch_size global batch size (default 32)\n"
    "  --verbose    a progress bar, the library's warnings and a line on what was written;\n"
    "               without it only errors are printed\n"
    "Run it with `tarantella -n RANKS -- tnt-predict ...` to split every batch across ranks.\n";

static char *read_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len + 4096 + 1 > cap) {
            cap = cap ? 2 * cap : 65536;
            char *nb = realloc(buf, cap);
            if (!nb) {
                free(buf);
                fclose(f);
                return NULL;
            }
            buf = nb;
        }
        size_t n = fread(buf + len, 1, 4096, f);
        len += n;
        if (n < 4096) break;
    }
    fclose(f);
    buf[len] = '\0';
    return buf;
}

static int fail(const char *what) {
    fprintf(stderr, "tnt-predict: %s: %s\n", what, tnt_last_error());
    tnt_finalize();
    return 1;
}

/* The file starts with a JSON object (an architecture; a file that cannot be read: its name ends
 * in .json); anything else goes to tnt_load_model, which tells .keras zips and .h5 files apart by
 * their magic bytes. */
static bool json_text(const char *path) {
    FILE *f = fopen(path, "rb");
    size_t n = strlen(path);
    if (!f) return n > 5 && !strcmp(path + n - 5, ".json");
    int c = ' ';
    while (c == ' ' || c == '\n' || c == '\r' || c == '\t') c = fgetc(f);
    fclose(f);
    return c == '{';
}

int main(int argc, char **argv) {
    const char *pos[3] = {0}, *weights = NULL;
    char *inputs[8];
    long batch = 32;
    int n_pos = 0, n_inputs = 0;
    bool verbose = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(USAGE, stdout);
            return 0;
        }
        if (!strcmp(argv[i], "--verbose")) {
            verbose = true;
            continue;
        }
        bool is_weights = !strncmp(argv[i], "--weights", 9), is_batch = !strncmp(argv[i], "--batch_size", 12);
        bool is_input = !strcmp(argv[i], "--input") || !strncmp(argv[i], "--input=", 8);
        if (is_weights || is_batch || is_input) { /* "--opt value" or "--opt=value" */
            const char *name = argv[i], *eq = strchr(name, '=');
            const char *v = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
            if (!v) {
                fprintf(stderr, "tnt-predict: %s needs a value\n%s", name, USAGE);
                return 2;
            }
            if (is_weights) {
                weights = v;
                continue;
            }
            if (is_input) {
                if (!strchr(v, '=') || n_inputs == 8) {
                    fprintf(stderr, "tnt-predict: --input \"%s\": expected NAME=X.npy (at most 8)\n", v);
                    return 2;
                }
                inputs[n_inputs++] = (char *)v;
                continue;
            }
            char *end;
            batch = strtol(v, &end, 10);
            if (*end || batch < 1) {
                fprintf(stderr, "tnt-predict: --batch_size \"%s\": expected a positive integer\n", v);
                return 2;
            }
        } else if (argv[i][0] == '-' && argv[i][1]) {
            fprintf(stderr, "tnt-predict: unknown option \"%s\"\n%s", argv[i], USAGE);
            return 2;
        } else if (n_pos < 3) {
            pos[n_pos++] = argv[i];
        } else {
            fprintf(stderr, "tnt-predict: unexpected argument \"%s\"\n%s", argv[i], USAGE);
            return 2;
        }
    }
    /* with --input: MODEL OUTPUT */
    int want = n_inputs ? 2 : 3;
    const char *out_path = pos[want - 1];
    bool whole = n_pos == want && !json_text(pos[0]);
    if (n_pos != want || (!whole && !weights)) {
        fprintf(stderr, "tnt-predict: %s\n%s",
                n_pos != want ? (n_inputs ? "expected MODEL and OUTPUT with --input" : "expected MODEL, INPUT and OUTPUT")
                              : "--weights is required with a .json model", USAGE);
        return 2;
    }
    if (!verbose) setenv("TNT_LOG_LEVEL", "ERROR", 0); /* a level the user set explicitly wins */
    if (tnt_init(&argc, &argv) != TNT_OK) return fail("init");
    tnt_model *m = NULL;
    if (whole) {
        m = tnt_load_model(pos[0], false);
    } else {
        char *json = read_file(pos[0]);
        if (!json) {
            fprintf(stderr, "tnt-predict: cannot read \"%s\"\n", pos[0]);
            tnt_finalize();
            return 1;
        }
        m = tnt_model_from_json(json);
        free(json);
    }
    if (!m) return fail(pos[0]);
    tnt_tensor *out = NULL;
    tnt_dataset *ds = NULL;
    npy_array packed = {0};
    int rc = 0;
    const char *stage = weights;
    if (weights && tnt_load_weights(m, weights, false) != TNT_OK) goto error;
    if (tnt_model_num_inputs(m) > 1 && !n_inputs) {
        fprintf(stderr, "tnt-predict: %s has %d inputs: give each with --input NAME=X.npy\n", pos[0],
                tnt_model_num_inputs(m));
        rc = 2;
        goto done;
    }
    if (n_inputs) { /* several inputs: packed per sample, as a dataset element holds them */
        if (!npy_pack_inputs("tnt-predict", m, n_inputs, inputs, &packed)) {
            rc = 1;
            goto done;
        }
        stage = "inputs";
        ds = tnt_dataset_batch(tnt_dataset_from_arrays(packed.data, packed.shape, NULL, TNT_SHAPE(), packed.n, false),
                               batch, false);
    } else {
        stage = pos[1];
        ds = tnt_dataset_batch(tnt_dataset_from_npy(pos[1], NULL), batch, false);
    }
    if (!ds) goto error;
    stage = "predict";
    if (tnt_distribute(m) != TNT_OK || tnt_predict(m, ds, &(tnt_eval_opts){.verbose = verbose}, &out) != TNT_OK)
        goto error;
    stage = out_path;
    if (tnt_is_master_rank() && tnt_save_npy(out_path, out) != TNT_OK) goto error;
    if (tnt_is_master_rank() && verbose) {
        char shape[96];
        printf("wrote the outputs, shape %s, to %s\n", tnt_shape_str(out->shape, shape, sizeof shape), out_path);
    }
    goto done;
error:
    fprintf(stderr, "tnt-predict: %s: %s\n", stage, tnt_last_error());
    rc = 1;
done:
    tnt_tensor_free(out);
    tnt_dataset_free(ds);
    free(packed.data);
    tnt_model_free(m);
    tnt_finalize();
    return rc;
}

/* tnt-inspect: what a Keras file holds and whether Tarantella loads it.
 *
 *   tnt-inspect FILE     (.keras, .h5, .weights.h5 or .json; told apart by content)
 *
 * Prints the format, the Keras version that wrote it, the training configuration, the weights
 * (names and shapes), every layer or setting that cannot be loaded (all of them, with the layers'
 * names) and the model's summary. Exit status: 0 the file loads (a weights file: it reads), 1 it
 * does not (the reason on stderr), 2 bad usage. */
#include <tarantella.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char USAGE[] = "usage: tnt-inspect FILE\n"
                            "  FILE  a Keras model or weights file: .keras, .h5 (model.save or save_weights),\n"
                            "        .weights.h5 or .json (model.to_json)\n"
                            "Exit status: 0 it loads, 1 it does not, 2 bad usage.\n";

int main(int argc, char **argv) {
    if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        fputs(USAGE, stdout);
        return 0;
    }
    if (argc != 2 || argv[1][0] == '-') {
        fputs(USAGE, stderr);
        return 2;
    }
    setenv("TNT_LOG_LEVEL", "ERROR", 0); /* the report says what went wrong */
    if (tnt_init(&argc, &argv) != TNT_OK) {
        fprintf(stderr, "tnt-inspect: init: %s\n", tnt_last_error());
        return 1;
    }
    int rc = 0;
    if (tnt_inspect(argv[1], stdout) != TNT_OK) {
        fflush(stdout);
        fprintf(stderr, "tnt-inspect: %s\n", tnt_last_error());
        rc = 1;
    }
    tnt_finalize();
    return rc;
}

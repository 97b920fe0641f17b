/* fuzz_h5_model.c: libFuzzer target for tnt_load_model (compiled) on the input as a file (HDF5,
 * or a .keras zip: the format goes by content): a model, or NULL with a message naming the file;
 * never a crash or a hang (the parse runs in a child process with a time limit). tnt_inspect
 * reads the same file: a report, or an error, never a crash. */
#include "fuzz.h"

#include "tarantella.h"

#include <stdio.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_temp_file(data, size, ".h5");
    tnt_model *m = tnt_load_model(path, true);
    if (!m) FUZZ_CHECK(strstr(tnt_last_error(), path));
    tnt_model_free(m);
    FILE *null = fopen("/dev/null", "w");
    if (null) {
        if (tnt_inspect(path, null) != TNT_OK) FUZZ_CHECK(tnt_last_error()[0] != '\0');
        fclose(null);
    }
    return 0;
}

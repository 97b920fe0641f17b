/* fuzz_h5_model.c: libFuzzer target for tnt_load_model (compiled) on the input as a file: a
 * model, or NULL with a message naming the file; never a crash or a hang (the parse runs in a
 * child process with a time limit). */
#include "fuzz.h"

#include "tarantella.h"

#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_temp_file(data, size, ".h5");
    tnt_model *m = tnt_load_model(path, true);
    if (!m) FUZZ_CHECK(strstr(tnt_last_error(), path));
    tnt_model_free(m);
    return 0;
}

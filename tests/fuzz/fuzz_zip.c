/* fuzz_zip.c: libFuzzer target for the Keras 3 .keras reader (src/io/keras_zip.c): the input as a
 * zip file given to tnt_load_model (compiled): a model, or NULL with a message naming the file;
 * never a crash, a hang or an allocation the archive's real bytes do not justify. The archive and
 * its JSON entries are parsed in this process (libzip, cJSON), model.weights.h5 in the HDF5
 * child. */
#include "fuzz.h"

#include "tarantella.h"

#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_temp_file(data, size, ".keras");
    tnt_model *m = tnt_load_model(path, true);
    if (!m) FUZZ_CHECK(strstr(tnt_last_error(), path));
    else FUZZ_CHECK(tnt_model_num_layers(m) > 0);
    tnt_model_free(m);
    return 0;
}

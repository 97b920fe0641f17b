/* fuzz_npy.c: libFuzzer target for tnt_dataset_from_npy (see fuzz_dataset.c). */
#include "fuzz.h"

#include "tarantella.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    return fuzz_dataset(data, size, tnt_dataset_from_npy, ".npy");
}

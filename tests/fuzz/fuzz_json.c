/* fuzz_json.c: libFuzzer target for tnt_model_from_json (not part of the CMake build).
 * Any input must be rejected with an error or give a model whose JSON reads back to the same
 * JSON. Build and run (clang; the reader instrumented, the rest of the library from build/):
 *
 *   make                                  # build/lib/libtarantella_static.a
 *   clang -g -O1 -fsanitize=fuzzer,address -Iinclude -Isrc -I/usr/include/hdf5/serial \
 *     tests/fuzz/fuzz_json.c src/io/keras_json.c -o /tmp/fuzz_json \
 *     build/lib/libtarantella_static.a $(pkg-config --libs libcjson) -ldnnl -lz -lgomp \
 *     -L/usr/lib/x86_64-linux-gnu/openmpi/lib -lmpi -L/usr/lib/x86_64-linux-gnu/hdf5/serial -lhdf5 -lcurl -lm
 *   mkdir -p /tmp/json_corpus && cp tests/fixtures/keras_*.json /tmp/json_corpus/
 *   /tmp/fuzz_json -max_total_time=120 -max_len=8192 /tmp/json_corpus
 */
#include "tarantella.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *s = malloc(size + 1);
    if (!s) return 0;
    memcpy(s, data, size);
    s[size] = '\0';
    tnt_model *m = tnt_model_from_json(s);
    if (!m) {
        if (!tnt_last_error()[0]) __builtin_trap(); /* a failure must say why */
    } else {
        char *a = NULL, *b = NULL;
        if (tnt_model_to_json(m, &a) == TNT_OK) {
            tnt_model *r = tnt_model_from_json(a);
            if (!r || tnt_model_to_json(r, &b) != TNT_OK || strcmp(a, b)) __builtin_trap(); /* round trip */
            free(b);
            tnt_model_free(r);
        }
        free(a);
        tnt_model_free(m);
    }
    free(s);
    return 0;
}

/* fuzz_json.c: libFuzzer target for tnt_model_from_json. Any input must be rejected with an
 * error or give a model whose JSON reads back to the same JSON. */
#include "fuzz.h"

#include "tarantella.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *s = malloc(size + 1);
    if (!s) return 0;
    memcpy(s, data, size);
    s[size] = '\0';
    tnt_model *m = tnt_model_from_json(s);
    if (!m) {
        FUZZ_CHECK(tnt_last_error()[0]); /* a failure must say why */
    } else {
        char *a = NULL, *b = NULL;
        if (tnt_model_to_json(m, &a) == TNT_OK) {
            tnt_model *r = tnt_model_from_json(a);
            FUZZ_CHECK(r && tnt_model_to_json(r, &b) == TNT_OK && !strcmp(a, b)); /* round trip */
            free(b);
            tnt_model_free(r);
        }
        free(a);
        tnt_model_free(m);
    }
    free(s);
    return 0;
}

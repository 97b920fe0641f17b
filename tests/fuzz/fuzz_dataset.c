/* fuzz_dataset.c: the body of the NPY and IDX targets (fuzz_npy.c, fuzz_idx.c): the input as a
 * file loads, or fails with a message naming it; a loaded dataset iterates to its end in batches
 * and holds no more values than the file could (declared sizes are checked against the data). */
#include "fuzz.h"

#include "tarantella.h"

#include <string.h>

int fuzz_dataset(const uint8_t *data, size_t size, tnt_dataset *(*load)(const char *, const char *), const char *suffix) {
    const char *path = fuzz_temp_file(data, size, suffix);
    tnt_dataset *ds = load(path, NULL);
    if (!ds) {
        FUZZ_CHECK(strstr(tnt_last_error(), path));
        return 0;
    }
    int64_t n = tnt_dataset_cardinality(ds);
    FUZZ_CHECK(n >= 1);
    ds = tnt_dataset_batch(ds, 7, false);
    FUZZ_CHECK(ds);
    tnt_dataset_iter *it = tnt_dataset_iter_new(ds, 0);
    FUZZ_CHECK(it);
    tnt_batch b;
    int64_t seen = 0, values = 0;
    int r;
    while ((r = tnt_dataset_iter_next(it, &b)) == 1) {
        seen += b.n;
        values += tnt_shape_numel(b.x.shape);
    }
    FUZZ_CHECK(r == 0 && seen == n);
    /* gzip aside, every value comes from at least one byte of the file */
    FUZZ_CHECK((size >= 2 && data[0] == 0x1f && data[1] == 0x8b) || values <= (int64_t)size);
    tnt_dataset_iter_free(it);
    tnt_dataset_free(ds);
    return 0;
}

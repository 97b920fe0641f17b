/* fuzz.h: what the libFuzzer targets share (tests/fuzz/fuzz_*.c). Each target defines
 * LLVMFuzzerTestOneInput; clang -fsanitize=fuzzer links it to libFuzzer (-DTNT_FUZZ=ON), and
 * replay.c links it to a main that feeds it the committed corpus (the fuzz_replay_* tests). */
#ifndef TNT_FUZZ_H
#define TNT_FUZZ_H

#include "tarantella.h"

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Writes the input to this process's temp file (made once, removed at exit) and returns its
 * path: the loaders under test take paths. */
const char *fuzz_temp_file(const uint8_t *data, size_t size, const char *suffix);

/* Stops the run as a crash would (the input is saved): a property of the target failed. */
#define FUZZ_CHECK(cond)                                                                          \
    do {                                                                                          \
        if (!(cond)) fuzz_fail(#cond, __FILE__, __LINE__);                                        \
    } while (0)
void fuzz_fail(const char *what, const char *file, int line);

/* The NPY and IDX targets (fuzz_dataset.c): load the input as a file with load, iterate it. */
int fuzz_dataset(const uint8_t *data, size_t size, tnt_dataset *(*load)(const char *, const char *), const char *suffix);

#endif

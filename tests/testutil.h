/* testutil.h: helpers shared by the cmocka tests: reference fixtures written by the PyTorch
 * scripts in tests/fixtures/, tolerance checks that print both values, and finite differences. */
#ifndef TNT_TESTUTIL_H
#define TNT_TESTUTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tarantella.h"

/* Loads fixtures/NAME.bin (format of tests/fixtures/fixture_io.py: "TNTF", int32 ndim, int64
 * dims[ndim], float32 data, little-endian). Fails the test when missing. Caller frees. */
float *tu_load(const char *name, tnt_shape *shape);
/* Asserts |a-b| <= atol + rtol*|b| elementwise, printing the first mismatch with its index. */
void tu_assert_close_(const float *a, const float *b, int64_t n, double rtol, double atol,
                      const char *what, const char *file, int line);
#define tu_assert_close(a, b, n, rtol, atol, what)                                                \
    tu_assert_close_((a), (b), (n), (rtol), (atol), (what), __FILE__, __LINE__)
/* Asserts a status is TNT_OK, printing tnt_last_error() otherwise. */
#define tu_ok(call)                                                                               \
    do {                                                                                          \
        tnt_status s_ = (call);                                                                   \
        if (s_ != TNT_OK) fail_msg("%s -> %s: %s", #call, tnt_status_name(s_), tnt_last_error()); \
    } while (0)
/* Asserts that tnt_last_error() contains needle. */
#define tu_error_contains(needle)                                                                 \
    do {                                                                                          \
        if (!strstr(tnt_last_error(), (needle)))                                                  \
            fail_msg("error \"%s\" does not mention \"%s\"", tnt_last_error(), (needle));          \
    } while (0)
/* sum(w^2) in double over the model's weights whose name contains part; *count (may be NULL)
 * receives how many there are. */
double tu_sum_squares(tnt_model *m, const char *part, int *count);
/* Deterministic pseudo-random fill in [-1, 1). */
void tu_fill(float *x, int64_t n, uint64_t seed);
/* A fresh temporary directory for a cmocka group (setup and teardown of
 * cmocka_run_group_tests, the teardown removing it), and paths in it (one of 4 rotating static
 * buffers: copy a path that must outlive 3 more calls). */
int tu_tmpdir_setup(void **state);
/* Asserts a and b hold the same n floats bit for bit, naming what and the first difference. */
void tu_assert_bitwise(const float *a, const float *b, int64_t n, const char *what);
int tu_tmpdir_teardown(void **state);
const char *tu_tmp_path(const char *name);

#endif

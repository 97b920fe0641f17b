/* testutil.c: fixture loading and tolerance checks for the tests. */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

float *tu_load(const char *name, tnt_shape *shape) {
    char path[512];
    snprintf(path, sizeof path, "fixtures/%s.bin", name);
    FILE *f = fopen(path, "rb");
    if (!f) fail_msg("fixture %s missing (run tests/fixtures/*.py)", path);
    char magic[4];
    int32_t ndim;
    if (fread(magic, 1, 4, f) != 4 || memcmp(magic, "TNTF", 4) || fread(&ndim, 4, 1, f) != 1 ||
        ndim < 0 || ndim > TNT_MAX_DIMS)
        fail_msg("fixture %s: bad header", path);
    tnt_shape s = {.ndim = ndim};
    if (ndim && fread(s.dim, 8, (size_t)ndim, f) != (size_t)ndim) fail_msg("fixture %s: bad dims", path);
    int64_t n = tnt_shape_numel(s);
    float *data = malloc((size_t)(n ? n : 1) * sizeof(float));
    if (fread(data, sizeof(float), (size_t)n, f) != (size_t)n) fail_msg("fixture %s: short data", path);
    fclose(f);
    if (shape) *shape = s;
    return data;
}

void tu_assert_close_(const float *a, const float *b, int64_t n, double rtol, double atol,
                      const char *what, const char *file, int line) {
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (!(d <= atol + rtol * fabs((double)b[i])))
            fail_msg("%s:%d: %s[%lld]: got %.9g, expected %.9g (diff %.3g, rtol %g, atol %g)", file,
                     line, what, (long long)i, a[i], b[i], d, rtol, atol);
    }
}

void tu_fill(float *x, int64_t n, uint64_t seed) {
    uint64_t s = seed * 6364136223846793005ull + 1442695040888963407ull;
    for (int64_t i = 0; i < n; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = (float)((s >> 40) * (1.0 / 16777216.0) * 2.0 - 1.0);
    }
}

double tu_sum_squares(tnt_model *m, const char *part, int *count) {
    double sum = 0;
    int n = 0;
    for (int i = 0; i < tnt_model_num_weights(m); i++) {
        const char *name;
        tnt_shape s;
        float *w;
        tu_ok(tnt_model_weight(m, i, &name, &s, &w));
        if (!strstr(name, part)) continue;
        n++;
        for (int64_t k = 0; k < tnt_shape_numel(s); k++) sum += (double)w[k] * w[k];
    }
    if (count) *count = n;
    return sum;
}

static char tu_tmpdir[256];

int tu_tmpdir_setup(void **state) {
    (void)state;
    snprintf(tu_tmpdir, sizeof tu_tmpdir, "/tmp/tnt_test_XXXXXX");
    return mkdtemp(tu_tmpdir) ? 0 : -1;
}

int tu_tmpdir_teardown(void **state) {
    (void)state;
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tu_tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

const char *tu_tmp_path(const char *name) {
    static char buf[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", tu_tmpdir, name);
    return buf[k];
}

void tu_assert_bitwise(const float *a, const float *b, int64_t n, const char *what) {
    for (int64_t i = 0; i < n; i++)
        if (memcmp(&a[i], &b[i], sizeof(float)))
            fail_msg("%s: element %lld differs: %.9g vs %.9g", what, (long long)i, a[i], b[i]);
}

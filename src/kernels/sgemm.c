/* sgemm.c: see sgemm.h. */
#include "kernels/sgemm.h"

#include "kernels/dnnl_util.h"

#include <string.h>

enum {
    ALIASING_PITCH = 512,  /* floats: 2 KB */
    PAD = 16,              /* floats added to an aliasing pitch */
    PANEL_ROWS = 256,
    PANEL_FLOATS = 1 << 20 /* at most 4 MB of panels: fewer rows for wide operands */
};

static _Thread_local float *panel_buf;
static _Thread_local size_t panel_cap;

void tnt__sgemm_release(void) {
    tnt__free(panel_buf);
    panel_buf = NULL;
    panel_cap = 0;
}

static float *panel(size_t floats) {
    if (floats > panel_cap) {
        tnt__free(panel_buf);
        panel_cap = 0;
        if (!(panel_buf = tnt__alloc(floats * sizeof(float)))) return NULL;
        panel_cap = floats;
    }
    return panel_buf;
}

static tnt_status sgemm(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda, const float *b, int64_t ldb,
                        float beta, float *c) {
    dnnl_status_t s = dnnl_sgemm('T', 'N', m, n, k, 1.0f, a, lda, b, ldb, beta, c, n);
    return s == dnnl_success ? TNT_OK : tnt__dnnl_error(s, "dnnl_sgemm", __FILE__, __LINE__);
}

tnt_status tnt__sgemm_tn_strided(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda, const float *b,
                                 int64_t ldb, float beta, float *c, int64_t ldc) {
    if (m == 0 || n == 0) return TNT_OK;
    dnnl_status_t s = dnnl_sgemm('T', 'N', m, n, k, 1.0f, a, lda, b, ldb, beta, c, ldc);
    return s == dnnl_success ? TNT_OK : tnt__dnnl_error(s, "dnnl_sgemm", __FILE__, __LINE__);
}

tnt_status tnt__sgemm_tn(int64_t m, int64_t n, int64_t k, const float *a, const float *b, float beta, float *c) {
    if (m % ALIASING_PITCH && n % ALIASING_PITCH) return sgemm(m, n, k, a, m, b, n, beta, c);
    /* only an operand whose pitch aliases is copied; the other is read where it lies */
    const bool copy_a = m % ALIASING_PITCH == 0, copy_b = n % ALIASING_PITCH == 0;
    const int64_t lda = copy_a ? m + PAD : m, ldb = copy_b ? n + PAD : n;
    const int64_t per_row = (copy_a ? lda : 0) + (copy_b ? ldb : 0);
    const int64_t rows = TNT_MIN(k, TNT_MAX((int64_t)16, TNT_MIN((int64_t)PANEL_ROWS, PANEL_FLOATS / per_row)));
    float *pa = panel((size_t)(rows * per_row));
    if (!pa) return tnt__error(TNT_ERR_NOMEM, "sgemm: out of memory for a %lld-row panel", (long long)rows);
    float *pb = copy_a ? pa + rows * lda : pa;
    for (int64_t k0 = 0; k0 < k; k0 += rows) {
        const int64_t kk = TNT_MIN(rows, k - k0);
        const float *ak = a + k0 * m, *bk = b + k0 * n;
        for (int64_t i = 0; i < kk; i++) {
            if (copy_a) memcpy(pa + i * lda, ak + i * m, (size_t)m * sizeof(float));
            if (copy_b) memcpy(pb + i * ldb, bk + i * n, (size_t)n * sizeof(float));
        }
        tnt_status s = sgemm(m, n, kk, copy_a ? pa : ak, lda, copy_b ? pb : bk, ldb, k0 ? 1.0f : beta, c);
        if (s != TNT_OK) return s;
    }
    return TNT_OK;
}

/* matmul.c: see matmul.h. */
#include "kernels/matmul.h"

#include <immintrin.h>
#include <stdio.h>

/* A memory descriptor (batch.., rows, cols) with the given pitch and batch strides; trans: the
 * matrix is stored as (cols, rows). */
static tnt_status operand_md(dnnl_memory_desc_t *md, dnnl_data_type_t dt, const int64_t batch[2], int64_t rows,
                             int64_t cols, bool trans, int64_t ld, const int64_t bs[2]) {
    tnt_status status = TNT_OK;
    dnnl_dims_t dims, strides;
    int nb = batch[0] > 0 ? (batch[1] > 0 ? 2 : 1) : 0;
    const int64_t stored_cols = trans ? rows : cols, pitch = ld > 0 ? ld : stored_cols;
    const int64_t plane = (trans ? cols : rows) * pitch;
    for (int i = 0; i < nb; i++) dims[i] = batch[i];
    dims[nb] = rows, dims[nb + 1] = cols;
    strides[nb] = trans ? 1 : pitch;
    strides[nb + 1] = trans ? pitch : 1;
    if (nb == 2) {
        strides[1] = bs[1] > 0 ? bs[1] : plane;
        strides[0] = bs[0] > 0 ? bs[0] : strides[1] * batch[1];
    } else if (nb == 1) {
        strides[0] = bs[0] > 0 ? bs[0] : plane;
    }
    TNT_DNNL(dnnl_memory_desc_init_by_strides(md, nb + 2, dims, dt, strides));
fail:
    return status;
}

/* Reads the packed layout: the VNNI form when its blocking is (x@k, y@n, 2@k). */
static void read_packing(tnt__mm *mm) {
    const dnnl_memory_desc_t *md = tnt__prim_md(&mm->prim, dnnl_query_weights_md, 0);
    const dnnl_blocking_desc_t *bl = &md->format_desc.blocking;
    const int nd = md->ndims;
    mm->vnni = md->format_kind == dnnl_blocked && nd == 2 && md->data_type == dnnl_bf16 && bl->inner_nblks == 3 &&
               bl->inner_idxs[0] == 0 && bl->inner_idxs[1] == 1 && bl->inner_idxs[2] == 0 && bl->inner_blks[2] == 2 &&
               md->offset0 == 0;
    if (!mm->vnni) return;
    mm->px = bl->inner_blks[0], mm->py = bl->inner_blks[1];
    mm->ps0 = bl->strides[0], mm->ps1 = bl->strides[1];
    mm->kp = md->padded_dims[0], mm->np = md->padded_dims[1];
    mm->vnni = mm->kp % (2 * mm->px) == 0 && mm->np % mm->py == 0;
}

tnt_status tnt__mm_create(tnt__mm *mm, const tnt__mm_desc *d) {
    tnt_status status = TNT_OK;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t ops = NULL;
    memset(mm, 0, sizeof *mm);
    mm->d = *d;
    dnnl_memory_desc_t amd, bmd, cmd, biasmd;
    int nb = d->batch[0] > 0 ? (d->batch[1] > 0 ? 2 : 1) : 0;
    if ((status = operand_md(&amd, d->dt, d->batch, d->m, d->k, d->ta, d->lda, d->sa)) != TNT_OK ||
        (status = operand_md(&cmd, d->c_bf16 ? dnnl_bf16 : dnnl_f32, d->batch, d->m, d->n, false, d->ldc, d->sc)) != TNT_OK)
        return status;
    if (d->packed_b) {
        dnnl_dims_t bd = {d->k, d->n};
        TNT_DNNL(dnnl_memory_desc_init_by_tag(&bmd, 2, bd, d->dt, dnnl_format_tag_any));
    } else if ((status = operand_md(&bmd, d->dt, d->batch, d->k, d->n, d->tb, d->ldb, d->sb)) != TNT_OK) {
        return status;
    }
    if (d->bias) {
        dnnl_dims_t bd = {1, 1, 1, 1};
        bd[nb + 1] = d->n;
        TNT_DNNL(dnnl_memory_desc_init_by_tag(&biasmd, nb + 2, bd, dnnl_f32, nb == 2 ? dnnl_abcd : nb ? dnnl_abc : dnnl_ab));
    }
    dnnl_matmul_desc_t md;
    TNT_DNNL(dnnl_matmul_desc_init(&md, &amd, &bmd, d->bias ? &biasmd : NULL, &cmd));
    TNT_DNNL(dnnl_primitive_attr_create(&attr));
    if (d->alpha != 0.0f && d->alpha != 1.0f) TNT_DNNL(dnnl_primitive_attr_set_output_scales(attr, 1, 0, &d->alpha));
    if (d->accumulate || d->eltwise != dnnl_alg_kind_undef) {
        TNT_DNNL(dnnl_post_ops_create(&ops));
        if (d->accumulate) TNT_DNNL(dnnl_post_ops_append_sum(ops, 1.0f));
        if (d->eltwise != dnnl_alg_kind_undef) TNT_DNNL(dnnl_post_ops_append_eltwise(ops, 1.0f, d->eltwise, d->eltwise_alpha, 0.0f));
        TNT_DNNL(dnnl_primitive_attr_set_post_ops(attr, ops));
    }
    if ((status = tnt__prim_create(&mm->prim, &md, attr, NULL)) != TNT_OK) {
        tnt__error_prefix(status, "matmul %s (%lld x %lld) x (%lld x %lld)%s: ", d->dt == dnnl_bf16 ? "bf16" : "f32",
                          (long long)d->m, (long long)d->k, (long long)d->k, (long long)d->n, nb ? " batched" : "");
        goto fail;
    }
    if ((status = tnt__memory(&mm->a, &amd, NULL, false)) ||
        (status = tnt__memory(&mm->b, tnt__prim_md(&mm->prim, dnnl_query_weights_md, 0), NULL, false)) ||
        (status = tnt__memory(&mm->c, &cmd, NULL, false)) ||
        (d->bias && (status = tnt__memory(&mm->bias, &biasmd, NULL, false))))
        goto fail;
    if (d->packed_b) read_packing(mm);
    if (ops) dnnl_post_ops_destroy(ops);
    dnnl_primitive_attr_destroy(attr);
    return TNT_OK;
fail:
    if (ops) dnnl_post_ops_destroy(ops);
    if (attr) dnnl_primitive_attr_destroy(attr);
    tnt__mm_destroy(mm);
    return status;
}

tnt_status tnt__mm_run(tnt__mm *mm, const void *a, const void *b, const float *bias, void *c) {
    dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, mm->a}, {DNNL_ARG_WEIGHTS, mm->b}, {DNNL_ARG_DST, mm->c}};
    int n = 3;
    tnt__set_data(mm->a, a);
    tnt__set_data(mm->b, b);
    tnt__set_data(mm->c, c);
    if (mm->d.bias) {
        tnt__set_data(mm->bias, bias);
        args[n++] = (dnnl_exec_arg_t){DNNL_ARG_BIAS, mm->bias};
    }
    return tnt__prim_exec(&mm->prim, n, args);
}

bool tnt__mm_reference(const tnt__mm *mm) {
    const char *impl = "";
    dnnl_primitive_desc_query(mm->prim.pd, dnnl_query_impl_info_str, 0, &impl);
    return !strncmp(impl, "ref", 3);
}

size_t tnt__mm_packed_bytes(const tnt__mm *mm) {
    return dnnl_memory_desc_get_size(tnt__prim_md(&mm->prim, dnnl_query_weights_md, 0));
}

bool tnt__mm_same_packing(const tnt__mm *x, const tnt__mm *y) {
    return dnnl_memory_desc_equal(tnt__prim_md(&x->prim, dnnl_query_weights_md, 0),
                                  tnt__prim_md(&y->prim, dnnl_query_weights_md, 0));
}

/* Two values as one VNNI pair: lo in the low half. */
static inline uint32_t pair(float lo, float hi) {
    return (uint32_t)tnt__bf16_from_float(lo) | (uint32_t)tnt__bf16_from_float(hi) << 16;
}

/* The AVX-512 BF16 kernels of the VNNI packing (for the build's -march, chosen at run time; a CPU
 * that computes bf16 natively has them). */
#define AVX512BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))

/* One destination row of pairs: row[c] = (r0[c], r1[c]) for c < nn. */
AVX512BF16 static void pairs_avx512(const float *r0, const float *r1, int64_t nn, uint32_t *row) {
    /* cvtne2ps gives r0's 16 values then r1's; vpermw interleaves them */
    const __m512i idx = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22, 6,
                                         21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    for (int64_t c = 0; c < nn; c += 16) {
        __mmask16 m = (__mmask16)(nn - c >= 16 ? 0xffff : (1u << (nn - c)) - 1);
        __m512i v = (__m512i)_mm512_cvtne2ps_pbh(_mm512_maskz_loadu_ps(m, r1 + c), _mm512_maskz_loadu_ps(m, r0 + c));
        _mm512_mask_storeu_epi32(row + c, m, _mm512_permutexvar_epi16(idx, v));
    }
}

/* Transposed source, 16 pair-rows of one tile: for c < nn, the 32 values src[c * ld + 0 .. 32) (k
 * pairs, fewer when kk < 32, zeros after) become column c of rows t[i * y], i < 16. Sixteen
 * columns at a time: converted (cvtne2ps leaves each pair in one dword), then a 16 x 16 dword
 * transpose. */
AVX512BF16 static void pairs_t_avx512(const float *src, int64_t ld, int64_t kk, int64_t nn, uint32_t *t, int64_t y) {
    const __mmask16 lo = (__mmask16)(kk >= 16 ? 0xffff : (1u << kk) - 1);
    const __mmask16 hi = (__mmask16)(kk >= 32 ? 0xffff : kk > 16 ? (1u << (kk - 16)) - 1 : 0);
    for (int64_t c0 = 0; c0 < nn; c0 += 16) {
        __m512i r[16], u[16];
        for (int j = 0; j < 16; j++) {
            if (c0 + j < nn) {
                const float *p = src + (c0 + j) * ld;
                r[j] = (__m512i)_mm512_cvtne2ps_pbh(_mm512_maskz_loadu_ps(hi, p + 16), _mm512_maskz_loadu_ps(lo, p));
            } else {
                r[j] = _mm512_setzero_si512();
            }
        }
        /* 16 x 16 transpose: 32-bit, 64-bit, 128-bit and 256-bit interleaves */
        for (int j = 0; j < 16; j += 2) {
            u[j] = _mm512_unpacklo_epi32(r[j], r[j + 1]);
            u[j + 1] = _mm512_unpackhi_epi32(r[j], r[j + 1]);
        }
        for (int j = 0; j < 16; j += 4) {
            r[j] = _mm512_unpacklo_epi64(u[j], u[j + 2]);
            r[j + 1] = _mm512_unpackhi_epi64(u[j], u[j + 2]);
            r[j + 2] = _mm512_unpacklo_epi64(u[j + 1], u[j + 3]);
            r[j + 3] = _mm512_unpackhi_epi64(u[j + 1], u[j + 3]);
        }
        for (int j = 0; j < 4; j++) { /* 128-bit lanes: rows j, j+4 and j+8, j+12 */
            u[j] = _mm512_shuffle_i32x4(r[j], r[j + 4], 0x88);
            u[j + 4] = _mm512_shuffle_i32x4(r[j], r[j + 4], 0xdd);
            u[j + 8] = _mm512_shuffle_i32x4(r[j + 8], r[j + 12], 0x88);
            u[j + 12] = _mm512_shuffle_i32x4(r[j + 8], r[j + 12], 0xdd);
        }
        for (int j = 0; j < 8; j++) {
            r[j] = _mm512_shuffle_i32x4(u[j], u[j + 8], 0x88);
            r[j + 8] = _mm512_shuffle_i32x4(u[j], u[j + 8], 0xdd);
        }
        /* r[i] is now pair-row i of the 16 columns */
        const __mmask16 m = (__mmask16)(nn - c0 >= 16 ? 0xffff : (1u << (nn - c0)) - 1);
        for (int i = 0; i < 16; i++) _mm512_mask_storeu_epi32(t + i * y + c0, m, r[i]);
    }
}

static bool have_avx512bf16(void) {
    static int have = -1;
    if (have < 0) {
        __builtin_cpu_init();
        have = __builtin_cpu_supports("avx512bf16") ? 1 : 0;
    }
    return have;
}

/* The VNNI form: element (k, n) at (k / 2x) * s0 + (n / y) * s1 + ((k % 2x) / 2) * 2y + (n % y) * 2 +
 * k % 2, zeros in the padding. One (2x, y) tile at a time: its source rows (or, transposed, its
 * columns) and its destination stay in L1. */
static void pack_vnni(const tnt__mm *mm, const float *src, int64_t ld, bool trans, uint32_t *dst) {
    const int64_t K = mm->d.k, N = mm->d.n, x = mm->px, y = mm->py;
    const int64_t kb_n = mm->kp / (2 * x), nb_n = mm->np / y;
    const bool fast = have_avx512bf16(), fast_t = fast && x == 16;
    /* plain source: along its rows (tiles of one k block side by side); transposed: along the rows
     * of the transpose (tiles of one n block) */
#pragma omp parallel for collapse(2) schedule(static) if (K * N >= 65536)
    for (int64_t o = 0; o < (trans ? nb_n : kb_n); o++)
        for (int64_t q = 0; q < (trans ? kb_n : nb_n); q++) {
            const int64_t nb = trans ? o : q, kb = trans ? q : o;
            uint32_t *t = dst + (kb * mm->ps0 + nb * mm->ps1) / 2; /* (x, y) pairs */
            const int64_t n0 = nb * y, nn = TNT_MAX(0, TNT_MIN(y, N - n0)), k0 = kb * 2 * x;
            if (trans && fast_t) {
                pairs_t_avx512(src + n0 * ld + k0, ld, TNT_MAX(0, TNT_MIN(2 * x, K - k0)), nn, t, y);
                for (int64_t i = 0; i < x && nn < y; i++) memset(t + i * y + nn, 0, (size_t)(y - nn) * sizeof *t);
                continue;
            }
            for (int64_t i = 0; i < x; i++) {
                const int64_t k = k0 + 2 * i;
                uint32_t *row = t + i * y;
                if (k + 1 < K && !trans) { /* both rows in range: the common case */
                    const float *r0 = src + k * ld + n0, *r1 = r0 + ld;
                    if (fast) pairs_avx512(r0, r1, nn, row);
                    else
                        for (int64_t c = 0; c < nn; c++) row[c] = pair(r0[c], r1[c]);
                } else if (k + 1 < K) {
                    for (int64_t c = 0; c < nn; c++) {
                        const float *p = src + (n0 + c) * ld + k;
                        row[c] = pair(p[0], p[1]);
                    }
                } else {
                    for (int64_t c = 0; c < nn; c++) {
                        float lo = k < K ? (trans ? src[(n0 + c) * ld + k] : src[k * ld + n0 + c]) : 0.0f;
                        row[c] = pair(lo, 0.0f);
                    }
                }
                for (int64_t c = nn; c < y; c++) row[c] = 0;
            }
        }
}

tnt_status tnt__mm_pack_b(tnt__mm *mm, const float *src, int64_t ld, bool trans, void *packed) {
    tnt_status status = TNT_OK;
    if (mm->vnni) {
        pack_vnni(mm, src, ld, trans, packed);
        return TNT_OK;
    }
    tnt__reorder *r = &mm->pack[trans];
    if (!r->prim) {
        dnnl_memory_desc_t from;
        static const int64_t none[2] = {0, 0};
        if ((status = operand_md(&from, dnnl_f32, none, mm->d.k, mm->d.n, trans, ld, none)) != TNT_OK ||
            (status = tnt__reorder_create(r, &from, tnt__prim_md(&mm->prim, dnnl_query_weights_md, 0))) != TNT_OK)
            return status;
        if (!r->prim) { /* the same layout: a plain copy */
            memcpy(packed, src, (size_t)(mm->d.k * mm->d.n) * sizeof(float));
            return TNT_OK;
        }
    }
    return tnt__reorder_run(r, src, packed);
}

void tnt__mm_destroy(tnt__mm *mm) {
    tnt__prim_destroy(&mm->prim);
    dnnl_memory_t *mems[] = {&mm->a, &mm->b, &mm->c, &mm->bias};
    for (size_t i = 0; i < TNT_ARRAY_LEN(mems); i++)
        if (*mems[i]) dnnl_memory_destroy(*mems[i]);
    tnt__reorder_destroy(&mm->pack[0]);
    tnt__reorder_destroy(&mm->pack[1]);
    memset(mm, 0, sizeof *mm);
}

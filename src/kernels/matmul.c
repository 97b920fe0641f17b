/* matmul.c: see matmul.h. */
#include "kernels/matmul.h"

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
    if ((status = operand_md(&bmd, d->dt, d->batch, d->k, d->n, d->tb, d->ldb, d->sb)) != TNT_OK) return status;
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

void tnt__mm_destroy(tnt__mm *mm) {
    tnt__prim_destroy(&mm->prim);
    dnnl_memory_t *mems[] = {&mm->a, &mm->b, &mm->c, &mm->bias};
    for (size_t i = 0; i < TNT_ARRAY_LEN(mems); i++)
        if (*mems[i]) dnnl_memory_destroy(*mems[i]);
    memset(mm, 0, sizeof *mm);
}

tnt_status tnt__sgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float *a, int64_t lda, const float *b,
                      int64_t ldb, float beta, float *c, int64_t ldc) {
    if (m == 0 || n == 0) return TNT_OK;
    if (k == 0) { /* oneDNN wants k > 0: C = beta C */
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) c[i * ldc + j] *= beta;
        return TNT_OK;
    }
    dnnl_status_t st = dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, 1.0f, a, lda, b, ldb, beta, c, ldc);
    if (st != dnnl_success)
        return tnt__error(TNT_ERR_BACKEND, "dnnl_sgemm (%lld x %lld) x (%lld x %lld) failed (status %d)", (long long)m,
                          (long long)k, (long long)k, (long long)n, (int)st);
    return TNT_OK;
}

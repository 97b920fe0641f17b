/* dnnl_util.c: engine, errors, memory and reorder helpers over oneDNN. */
#include "kernels/dnnl_util.h"

#include "core/config.h"

#include <stdio.h>

static dnnl_engine_t engine;
static dnnl_stream_t stream;
static dnnl_memory_t scratch_mem;
static void *scratch_buf;
static size_t scratch_bytes;

static const char *dnnl_status_str(dnnl_status_t s) {
    switch (s) {
    case dnnl_success: return "success";
    case dnnl_out_of_memory: return "out of memory";
    case dnnl_invalid_arguments: return "invalid arguments";
    case dnnl_unimplemented: return "unimplemented (no kernel for these shapes/layouts)";
    case dnnl_iterator_ends: return "iterator ends";
    case dnnl_runtime_error: return "runtime error";
    case dnnl_not_required: return "not required";
    }
    return "unknown status";
}

tnt_status tnt__dnnl_error(dnnl_status_t s, const char *call, const char *file, int line) {
    return tnt__error(TNT_ERR_BACKEND, "oneDNN: %s failed with %s (%s:%d)", call,
                      dnnl_status_str(s), file, line);
}

dnnl_engine_t tnt__engine(void) {
    if (!engine) {
        dnnl_status_t s = dnnl_engine_create(&engine, dnnl_cpu, 0);
        if (s != dnnl_success) {
            tnt__dnnl_error(s, "dnnl_engine_create", __FILE__, __LINE__);
            engine = NULL;
        }
    }
    return engine;
}

dnnl_stream_t tnt__stream(void) {
    if (!stream && tnt__engine()) {
        dnnl_status_t s = dnnl_stream_create(&stream, engine, dnnl_stream_default_flags);
        if (s != dnnl_success) {
            tnt__dnnl_error(s, "dnnl_stream_create", __FILE__, __LINE__);
            stream = NULL;
        }
    }
    return stream;
}

void tnt__dnnl_shutdown(void) {
    if (scratch_mem) dnnl_memory_destroy(scratch_mem);
    tnt__free(scratch_buf);
    scratch_mem = NULL;
    scratch_buf = NULL;
    scratch_bytes = 0;
    if (stream) dnnl_stream_destroy(stream);
    if (engine) dnnl_engine_destroy(engine);
    stream = NULL;
    engine = NULL;
}

tnt_status tnt__md(dnnl_memory_desc_t *md, int ndims, const int64_t *dims, dnnl_format_tag_t tag) {
    tnt_status status = TNT_OK;
    TNT_DNNL(dnnl_memory_desc_init_by_tag(md, ndims, dims, dnnl_f32, tag));
fail:
    return status;
}

tnt_status tnt__memory(dnnl_memory_t *mem, const dnnl_memory_desc_t *md, void *data, bool own) {
    tnt_status status = TNT_OK;
    if (!tnt__engine()) return TNT_ERR_BACKEND;
    TNT_DNNL(dnnl_memory_create(mem, md, engine, own ? DNNL_MEMORY_ALLOCATE : DNNL_MEMORY_NONE));
    if (!own && data) TNT_DNNL(dnnl_memory_set_data_handle(*mem, data));
fail:
    return status;
}

void tnt__set_data(dnnl_memory_t mem, const void *data) {
    dnnl_memory_set_data_handle(mem, (void *)data);
}

/* The own path's case: f32 -> f32, the source blocked as (out 16, in 16) with the input channel
 * block outer (oneDNN's ABcd16b16a, gOIhw16i16o ...: inner blocks 16@a 16@b, idxs {b, a}), the
 * destination plain with the output channel (dim a) at stride 1, same dims, no padding in the
 * destination. a, b: the output and input channel dims (0, 1; 1, 2 for grouped weights). */
static bool own_reorder_case(const dnnl_memory_desc_t *s, const dnnl_memory_desc_t *d) {
    const dnnl_blocking_desc_t *sb = &s->format_desc.blocking, *db = &d->format_desc.blocking;
    if (s->data_type != dnnl_f32 || d->data_type != dnnl_f32 || s->format_kind != dnnl_blocked ||
        d->format_kind != dnnl_blocked || s->ndims != d->ndims || s->ndims < 3 || s->ndims > 6 || s->offset0 ||
        d->offset0 || sb->inner_nblks != 2 || sb->inner_blks[0] != 16 || sb->inner_blks[1] != 16 || db->inner_nblks)
        return false;
    const int a = sb->inner_idxs[1], b = sb->inner_idxs[0];
    if (b != a + 1 || db->strides[a] != 1) return false;
    for (int i = 0; i < s->ndims; i++)
        if (s->dims[i] != d->dims[i] || d->padded_dims[i] != d->dims[i]) return false;
    return true;
}

/* dst[...] = src[...] for the own case: for every outer position and input channel, the 16 output
 * channels of a block are contiguous on both sides. */
static void own_reorder_run(const dnnl_memory_desc_t *s, const dnnl_memory_desc_t *d, const float *src, float *dst) {
    const dnnl_blocking_desc_t *sb = &s->format_desc.blocking, *db = &d->format_desc.blocking;
    const int nd = s->ndims, a = sb->inner_idxs[1], b = a + 1;
    int64_t outer = 1; /* the dims other than a and b (groups, spatial), flattened */
    for (int i = 0; i < nd; i++)
        if (i != a && i != b) outer *= s->dims[i];
    const int64_t A = s->dims[a], B = s->dims[b], nab = (s->padded_dims[a] / 16) * (s->padded_dims[b] / 16);
#pragma omp parallel for collapse(2) schedule(static) if (outer * nab >= 64)
    for (int64_t q = 0; q < outer; q++)
        for (int64_t blk = 0; blk < nab; blk++) {
            const int64_t ob = blk / (s->padded_dims[b] / 16), ib = blk % (s->padded_dims[b] / 16);
            int64_t so = ob * sb->strides[a] + ib * sb->strides[b], doff = 0, rest = q;
            for (int i = nd - 1; i >= 0; i--) { /* q's position in the other dims */
                if (i == a || i == b) continue;
                const int64_t x = rest % s->dims[i];
                rest /= s->dims[i];
                so += x * sb->strides[i];
                doff += x * db->strides[i];
            }
            const int64_t o0 = ob * 16, no = TNT_MIN(16, A - o0);
            for (int64_t ii = 0; ii < 16 && ib * 16 + ii < B; ii++)
                memcpy(dst + doff + (ib * 16 + ii) * db->strides[b] + o0, src + so + ii * 16, (size_t)no * sizeof(float));
        }
}

tnt_status tnt__reorder_create(tnt__reorder *r, const dnnl_memory_desc_t *src,
                               const dnnl_memory_desc_t *dst) {
    tnt_status status = TNT_OK;
    dnnl_primitive_desc_t pd = NULL;
    memset(r, 0, sizeof *r);
    if (dnnl_memory_desc_equal(src, dst)) return TNT_OK;
    if (!tnt__engine()) return TNT_ERR_BACKEND;
    TNT_DNNL(dnnl_reorder_primitive_desc_create(&pd, src, engine, dst, engine, NULL));
    TNT_DNNL(dnnl_primitive_create(&r->prim, pd));
    TNT_DNNL(tnt__memory(&r->src, src, NULL, false) == TNT_OK ? dnnl_success : dnnl_runtime_error);
    TNT_DNNL(tnt__memory(&r->dst, dst, NULL, false) == TNT_OK ? dnnl_success : dnnl_runtime_error);
    dnnl_primitive_desc_destroy(pd);
    r->own = own_reorder_case(src, dst); /* the primitive stays made: r->prim marks "a reorder" */
    r->from = *src, r->to = *dst;
    return TNT_OK;
fail:
    if (pd) dnnl_primitive_desc_destroy(pd);
    tnt__reorder_destroy(r);
    return status;
}

tnt_status tnt__reorder_run(tnt__reorder *r, const void *src, void *dst) {
    tnt_status status = TNT_OK;
    if (!r->prim) return TNT_OK;
    if (r->own) {
        own_reorder_run(&r->from, &r->to, src, dst);
        return TNT_OK;
    }
    tnt__set_data(r->src, src);
    tnt__set_data(r->dst, dst);
    dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, r->src}, {DNNL_ARG_TO, r->dst}};
    TNT_DNNL(dnnl_primitive_execute(r->prim, tnt__stream(), 2, args));
    TNT_DNNL(dnnl_stream_wait(stream));
fail:
    return status;
}

void tnt__reorder_destroy(tnt__reorder *r) {
    if (r->prim) dnnl_primitive_destroy(r->prim);
    if (r->src) dnnl_memory_destroy(r->src);
    if (r->dst) dnnl_memory_destroy(r->dst);
    memset(r, 0, sizeof *r);
}

tnt_status tnt__prim_create(tnt__prim *p, const void *op_desc, dnnl_primitive_attr_t attr,
                            const_dnnl_primitive_desc_t hint) {
    tnt_status status = TNT_OK;
    dnnl_primitive_attr_t own_attr = NULL;
    memset(p, 0, sizeof *p);
    if (!tnt__engine()) return TNT_ERR_BACKEND;
    if (!attr) {
        TNT_DNNL(dnnl_primitive_attr_create(&own_attr));
        attr = own_attr;
    }
    TNT_DNNL(dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user));
    TNT_DNNL(dnnl_primitive_desc_create(&p->pd, op_desc, attr, engine, hint));
    TNT_DNNL(dnnl_primitive_create(&p->prim, p->pd));
    if (own_attr) dnnl_primitive_attr_destroy(own_attr);
    return TNT_OK;
fail:
    if (own_attr) dnnl_primitive_attr_destroy(own_attr);
    tnt__prim_destroy(p);
    return status;
}

const dnnl_memory_desc_t *tnt__prim_md(const tnt__prim *p, dnnl_query_t what, int index) {
    return dnnl_primitive_desc_query_md(p->pd, what, index);
}

size_t tnt__prim_scratchpad_size(const tnt__prim *p) {
    const dnnl_memory_desc_t *md = tnt__prim_md(p, dnnl_query_scratchpad_md, 0);
    return md ? dnnl_memory_desc_get_size(md) : 0;
}

void tnt__prim_destroy(tnt__prim *p) {
    if (p->prim) dnnl_primitive_destroy(p->prim);
    if (p->pd) dnnl_primitive_desc_destroy(p->pd);
    memset(p, 0, sizeof *p);
}

dnnl_memory_t tnt__scratchpad(size_t bytes) {
    if (bytes <= scratch_bytes && scratch_mem) return scratch_mem;
    if (scratch_mem) dnnl_memory_destroy(scratch_mem);
    tnt__free(scratch_buf);
    scratch_mem = NULL;
    scratch_bytes = 0;
    scratch_buf = tnt__alloc(bytes);
    if (!scratch_buf) return NULL;
    dnnl_memory_desc_t md;
    dnnl_dims_t dims = {(int64_t)bytes};
    if (dnnl_memory_desc_init_by_tag(&md, 1, dims, dnnl_u8, dnnl_a) != dnnl_success ||
        tnt__memory(&scratch_mem, &md, scratch_buf, false) != TNT_OK) {
        tnt__free(scratch_buf);
        scratch_buf = NULL;
        scratch_mem = NULL;
        return NULL;
    }
    scratch_bytes = bytes;
    return scratch_mem;
}

tnt_status tnt__prim_exec(const tnt__prim *p, int nargs, const dnnl_exec_arg_t *args) {
    tnt_status status = TNT_OK;
    dnnl_exec_arg_t all[16];
    if (nargs > 15) return tnt__error(TNT_ERR_ARG, "tnt__prim_exec: %d arguments (at most 15)", nargs);
    memcpy(all, args, (size_t)nargs * sizeof *args);
    size_t sp = tnt__prim_scratchpad_size(p);
    if (sp > 0) {
        dnnl_memory_t mem = tnt__scratchpad(sp);
        if (!mem) return TNT_ERR_NOMEM;
        all[nargs++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, mem};
    }
    TNT_DNNL(dnnl_primitive_execute(p->prim, tnt__stream(), nargs, all));
    TNT_DNNL(dnnl_stream_wait(stream));
fail:
    return status;
}

tnt_status tnt__dnnl_cap_isa(int tnt_isa) {
    static const struct {
        int tnt;
        dnnl_cpu_isa_t dnnl;
        const char *name;
    } isas[] = {{TNT__ISA_AVX2, dnnl_cpu_isa_avx2, "avx2"},
                {TNT__ISA_AVX512_CORE, dnnl_cpu_isa_avx512_core, "avx512_core"},
                {TNT__ISA_AVX512_CORE_BF16, dnnl_cpu_isa_avx512_core_bf16, "avx512_core_bf16"},
                {TNT__ISA_AVX512_CORE_AMX, dnnl_cpu_isa_avx512_core_amx, "avx512_core_amx"}};
    for (size_t i = 0; i < TNT_ARRAY_LEN(isas); i++) {
        if (isas[i].tnt != tnt_isa) continue;
        dnnl_status_t s = dnnl_set_max_cpu_isa(isas[i].dnnl);
        if (s != dnnl_success)
            return tnt__error(TNT_ERR_BACKEND, "TNT_MAX_CPU_ISA=%s: oneDNN refused the cap (status %d): it can "
                              "only be set before oneDNN's first kernel", isas[i].name, (int)s);
        return TNT_OK;
    }
    return TNT_OK;
}

/* dnnl_util.h: thin helpers over the oneDNN 2.6 C API: the shared CPU engine and stream, status
 * checks that record the failing call, memory objects over caller buffers, one reorder helper,
 * and primitive execution with an argument list. No model knowledge lives here. */
#ifndef TNT_DNNL_UTIL_H
#define TNT_DNNL_UTIL_H

#include "core/core.h"

#include <dnnl.h>

/* The process-wide engine and stream (created on first use; NULL + error on failure). */
dnnl_engine_t tnt__engine(void);
dnnl_stream_t tnt__stream(void);

/* Caps the instruction set of oneDNN's kernels, and so of the library's own, which follow
 * oneDNN's effective ISA (TNT_MAX_CPU_ISA: a tnt__cpu_isa; TNT__ISA_ALL leaves it as it is).
 * Called by tnt_init before any kernel runs; later oneDNN refuses, and the error says so. */
tnt_status tnt__dnnl_cap_isa(int tnt_isa);

/* Records a message naming the failing call; returns TNT_ERR_BACKEND. */
tnt_status tnt__dnnl_error(dnnl_status_t s, const char *call, const char *file, int line);
/* Evaluates a oneDNN call; on failure records it and jumps to the enclosing function's `fail`
 * label with `status` set. */
#define TNT_DNNL(call)                                                                           \
    do {                                                                                         \
        dnnl_status_t s_ = (call);                                                               \
        if (s_ != dnnl_success) {                                                                \
            status = tnt__dnnl_error(s_, #call, __FILE__, __LINE__);                            \
            goto fail;                                                                           \
        }                                                                                        \
    } while (0)

/* A plain memory descriptor over dims with a format tag (e.g. dnnl_nhwc, dnnl_nc, dnnl_a). */
tnt_status tnt__md(dnnl_memory_desc_t *md, int ndims, const int64_t *dims, dnnl_format_tag_t tag);
/* A memory object for md over the caller's buffer (data may be NULL and set later with
 * dnnl_memory_set_data_handle), or over its own allocation when own=true. */
tnt_status tnt__memory(dnnl_memory_t *mem, const dnnl_memory_desc_t *md, void *data, bool own);

/* A reorder between two layouts, created once and run many times. */
typedef struct tnt__reorder {
    dnnl_primitive_t prim;
    dnnl_memory_t src, dst;
    /* float32 weights in oneDNN's OI16i16o-style blocking back to a plain layout whose output
     * channels are contiguous (Keras's HWIO): our own loop copies 16 floats at a time (oneDNN's
     * jit:uni reorder took about a tenth of a ResNet-50 step on the weight gradients) */
    bool own;
    dnnl_memory_desc_t from, to;
} tnt__reorder;
/* Creates the reorder if the descriptors differ; when they are equal r->prim stays NULL and
 * tnt__reorder_run copies nothing (the caller uses the source directly). */
tnt_status tnt__reorder_create(tnt__reorder *r, const dnnl_memory_desc_t *src,
                               const dnnl_memory_desc_t *dst);
tnt_status tnt__reorder_run(tnt__reorder *r, const void *src, void *dst);
void tnt__reorder_destroy(tnt__reorder *r);

/* A primitive with its descriptor and scratchpad (user-managed, so that plans can share it). */
typedef struct tnt__prim {
    dnnl_primitive_desc_t pd;
    dnnl_primitive_t prim;
} tnt__prim;
/* Creates pd (from op_desc and optional attr/hint) and the primitive. scratchpad mode is set to
 * user; the scratchpad size is tnt__prim_scratchpad_size. */
tnt_status tnt__prim_create(tnt__prim *p, const void *op_desc, dnnl_primitive_attr_t attr,
                            const_dnnl_primitive_desc_t hint);
size_t tnt__prim_scratchpad_size(const tnt__prim *p);
const dnnl_memory_desc_t *tnt__prim_md(const tnt__prim *p, dnnl_query_t what, int index);
void tnt__prim_destroy(tnt__prim *p);

/* Runs a primitive: args is an array of (DNNL_ARG_*, memory) pairs; the scratchpad (may be
 * NULL) is given as DNNL_ARG_SCRATCHPAD. Waits for completion. */
tnt_status tnt__prim_exec(const tnt__prim *p, int nargs, const dnnl_exec_arg_t *args);

/* Sets a memory object's data handle (no status: handles of our own memories never fail). */
void tnt__set_data(dnnl_memory_t mem, const void *data);

/* A scratchpad buffer shared by every primitive of the process (grown on demand; single-threaded
 * use: primitives run one at a time on the compute thread). */
dnnl_memory_t tnt__scratchpad(size_t bytes);

/* Frees the engine, stream and scratchpad (tnt_finalize). */
void tnt__dnnl_shutdown(void);

#endif

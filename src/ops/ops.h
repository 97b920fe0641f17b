/* ops.h: the operation graph IR and the table of operations (one file per family, each with its
 * shape rule, forward and backward).
 *
 * Every tensor is stored as float32; a value's dtype says how to read it: int32 values hold whole
 * numbers (exact up to 2^24), bool values 0 or 1. Only float values carry gradients.
 *
 * Evaluation (exec.c): tnt__opplan_create resolves every value's shape for concrete input shapes
 * (so one graph serves every batch size), gives each node output a place in a forward arena (kept
 * until backward, which reads the forward values) and each gradient a place in a backward arena
 * reused as values die (reverse order: a gradient lives from its last consumer to its producer).
 * Backward functions accumulate (+=) into the input gradients they are given. */
#ifndef TNT_OPS_H
#define TNT_OPS_H

#include "core/core.h"

struct cJSON;

typedef enum tnt__dt { TNT__F32 = 0, TNT__I32, TNT__BOOL } tnt__dt;

#define TNT__MAX_OP_IN 64
#define TNT__MAX_SLICE 16
#define TNT__OP_NAME_MAX 64 /* = TNT_NAME_MAX of layers/layer.h */

/* One item of a strided slice x[...]: an index, a slice start:stop:step, None, or an ellipsis. */
typedef enum tnt__slice_kind { TNT__SL_INDEX, TNT__SL_RANGE, TNT__SL_NEWAXIS, TNT__SL_ELLIPSIS } tnt__slice_kind;
typedef struct tnt__slice_item {
    tnt__slice_kind kind;
    int64_t start, stop, step;
    bool has_start, has_stop;
} tnt__slice_item;

/* Parsed attributes (which fields an operation reads is its own business). */
typedef struct tnt__op_attr {
    bool has_axis;           /* an axis or axes were given (otherwise: all, or the op's default) */
    int n_axes;
    int axes[TNT_MAX_DIMS];  /* as given: may be negative */
    bool keepdims;
    int n_ints;
    int64_t ints[2 * TNT_MAX_DIMS]; /* reshape shape, tile repeats, pad widths, split indices */
    double f0, f1;           /* clip bounds, pad value, rates, alphas, random ranges */
    int64_t i0;              /* one_hot classes, repeat count, split sections */
    bool flag;               /* gelu approximate, cumsum reverse, keep in inference */
    tnt__dt dtype;           /* cast target, constant dtype */
    int n_slice;
    tnt__slice_item slice[TNT__MAX_SLICE];
    char eq[64];             /* einsum */
    float *data;             /* constant values (owned) */
    tnt_shape data_shape;
    uint64_t seed;
} tnt__op_attr;

typedef struct tnt__opnode {
    int index;               /* position in the graph, for messages */
    int kind;                /* index into the table of operations */
    int n_in;
    int in[TNT__MAX_OP_IN];  /* value ids */
    int n_out, out0;         /* outputs: value ids out0 .. out0 + n_out - 1 */
    struct cJSON *attrs;     /* the attributes as given, written back by to_json */
    tnt__op_attr a;
} tnt__opnode;

typedef struct tnt__opweight {
    char name[TNT__OP_NAME_MAX];
    tnt_shape shape;
    char initializer[48];
    bool trainable;
} tnt__opweight;

struct tnt_opgraph {
    int n_inputs;
    tnt_shape inputs[TNT__MAX_OP_IN];
    int n_weights;
    tnt__opweight weights[TNT__MAX_OP_IN];
    int n_nodes, cap_nodes;
    tnt__opnode *nodes;
    int n_values;
    int n_outputs;
    int outputs[TNT__MAX_OP_IN];
};

/* A tensor during evaluation. */
typedef struct tnt__ten {
    tnt_shape s;
    tnt__dt dt;
    float *d;
} tnt__ten;

/* Temporary memory of one node's forward or backward (freed after it). */
typedef struct tnt__scratch {
    char *base;
    size_t cap, used, peak;
    int n_extra;
    void *extra[16];
} tnt__scratch;
void *tnt__scratch_get(tnt__scratch *s, size_t bytes);

typedef struct tnt__opctx {
    const tnt__opnode *node;
    int n_in, n_out;
    const tnt__ten *in;
    tnt__ten *out;
    float *const *din;        /* gradient of each input, accumulated into; NULL: not needed */
    const float *const *dout; /* gradient of each output; NULL: zero */
    const bool *din_overwrite; /* per input: din holds garbage, write it (only matmul and einsum are
                                  asked, where beta 0 costs nothing); NULL: accumulate into all */
    tnt__scratch *scratch;
    bool training;
    uint64_t seed;            /* this step's seed for this node (random operations) */
    int64_t sample_offset;    /* global index of sample 0 (axis 0) */
} tnt__opctx;

typedef struct tnt__op_def {
    const char *name;
    int min_in, max_in;
    /* attributes from the node's JSON object (may be NULL: none); sets n->n_out when not 1 */
    tnt_status (*parse)(tnt__opnode *n, const struct cJSON *attrs);
    /* output shapes and dtypes from the inputs'; errors name the shapes */
    tnt_status (*infer)(const tnt__opnode *n, const tnt__ten *in, tnt__ten *out);
    tnt_status (*forward)(tnt__opctx *c);
    tnt_status (*backward)(tnt__opctx *c); /* NULL: no gradient */
} tnt__op_def;

/* The table of operations, one entry per name (ops/table.c). */
const tnt__op_def *tnt__op_find(const char *name, int *kind);
const tnt__op_def *tnt__op_get(int kind);

/* Families (each file exports its table part). */
extern const tnt__op_def tnt__ops_unary[], tnt__ops_binary[], tnt__ops_reduce[], tnt__ops_matmul[],
    tnt__ops_shape[], tnt__ops_index[], tnt__ops_scan[], tnt__ops_random[];

/* Attribute readers (graph.c): absent keys keep the default; errors name the key and value. */
tnt_status tnt__oa_axes(const struct cJSON *attrs, const char *key, tnt__op_attr *a);
tnt_status tnt__oa_int(const struct cJSON *attrs, const char *key, int64_t *out);
tnt_status tnt__oa_num(const struct cJSON *attrs, const char *key, double *out);
tnt_status tnt__oa_bool(const struct cJSON *attrs, const char *key, bool *out);
/* A list of ints (null entries read as -1) into a->ints */
tnt_status tnt__oa_ints(const struct cJSON *attrs, const char *key, tnt__op_attr *a);
tnt_status tnt__oa_dtype(const struct cJSON *attrs, const char *key, tnt__dt *out);
const char *tnt__dt_name(tnt__dt dt);

/* Error naming the node: "operation 3 (add): " + message. */
tnt_status tnt__op_error(const tnt__opnode *n, tnt_status s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Shape helpers (shape.c) */
/* Normalizes axis (negative counts from the end) for rank; error naming both otherwise. */
tnt_status tnt__axis(const tnt__opnode *n, int axis, int rank, int *out);
/* NumPy broadcasting of a and b into *out; error naming both shapes. */
tnt_status tnt__broadcast(const tnt__opnode *n, tnt_shape a, tnt_shape b, tnt_shape *out);
/* Strides (in elements) of s seen inside out (rank-aligned to the right; 0 on broadcast axes). */
void tnt__bstrides(tnt_shape s, tnt_shape out, int64_t *strides);
/* Row-major strides of s. */
void tnt__strides(tnt_shape s, int64_t *strides);
/* dst[i] += src over the elements of shape s, where src and dst walk with their own strides
 * (a strided copy-add with broadcasting on either side). */
void tnt__strided_add(tnt_shape s, float *dst, const int64_t *dst_strides, const float *src,
                      const int64_t *src_strides);

/* Along one contiguous row of n floats, vectorized in fixed lanes (the same result every run):
 * the sum and the sum of squared deviations from mean (in double), the maximum (-inf for none,
 * NaNs skipped), the dot product (float). */
double tnt__row_sum(const float *x, int64_t n);
double tnt__row_sqdev(const float *x, int64_t n, double mean);
float tnt__row_max(const float *x, int64_t n);
float tnt__row_dot(const float *a, const float *b, int64_t n);

/* Plans and evaluation (exec.c) */
typedef struct tnt__opplan tnt__opplan;
/* Shapes of every value for the given input shapes; NULL with an error naming the node. */
tnt__opplan *tnt__opplan_create(const tnt_opgraph *g, const tnt_shape *in_shapes, bool need_input_grads);
void tnt__opplan_destroy(tnt__opplan *p);
tnt_shape tnt__opplan_shape(const tnt__opplan *p, int value);
tnt__dt tnt__opplan_dtype(const tnt__opplan *p, int value);
/* Bytes of forward storage kept from forward to backward. */
size_t tnt__opplan_workspace(const tnt__opplan *p);
typedef struct tnt__opstep {
    const float *const *inputs;  /* per graph input */
    float *const *weights;       /* per weight */
    float *const *outputs;       /* per graph output: written by forward */
    void *workspace;             /* tnt__opplan_workspace bytes, the same in backward */
    bool training;
    uint64_t seed;
    int64_t sample_offset;
} tnt__opstep;
tnt_status tnt__opplan_forward(tnt__opplan *p, const tnt__opstep *st);
/* Gradients: douts per output (NULL: zero); dinputs per input (NULL: not wanted; overwritten);
 * dweights per weight (NULL: not wanted; overwritten). */
tnt_status tnt__opplan_backward(tnt__opplan *p, const tnt__opstep *st, const float *const *douts,
                                float *const *dinputs, float *const *dweights);

#endif

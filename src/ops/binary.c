/* binary.c: elementwise operations of two inputs with NumPy broadcasting (arithmetic, maximum and
 * minimum, comparisons and logical operations without gradient) and where(cond, x, y).
 *
 * Broadcast walk: the output is visited row by row (its last axis); each operand has its own
 * strides in output space (0 on broadcast axes), so a row costs one offset update per operand.
 * Backward accumulates each element's contribution at the operand's own index, which sums over
 * the broadcast axes in a fixed order. Ties of maximum/minimum send the gradient to x (as
 * TensorFlow). */
#include "ops/ops.h"

#include <math.h>

enum {
    B_ADD, B_SUBTRACT, B_MULTIPLY, B_DIVIDE, B_POWER, B_MAXIMUM, B_MINIMUM, B_SQUARED_DIFFERENCE, B_FLOOR_DIVIDE,
    B_MOD, B_EQUAL, B_NOT_EQUAL, B_LESS, B_LESS_EQUAL, B_GREATER, B_GREATER_EQUAL, B_LOGICAL_AND, B_LOGICAL_OR,
    B_WHERE
};

/* Output walk over up to 3 operands. */
typedef struct walk {
    tnt_shape o;          /* rank >= 1 */
    int k;
    int64_t st[3][TNT_MAX_DIMS];
} walk;

static void walk_init(walk *w, tnt_shape out, int k, const tnt__ten *in) {
    w->o = out.ndim ? out : (tnt_shape){1, {1}};
    w->k = k;
    for (int j = 0; j < k; j++) {
        tnt_shape s = in[j].s;
        if (out.ndim == 0) w->st[j][0] = 0;
        else tnt__bstrides(s, out, w->st[j]);
    }
}

/* Calls row(o_off, off[k], inner strides, inner, ctx) for every output row. */
#define WALK(w, ...)                                                                             \
    do {                                                                                          \
        const int last_ = (w).o.ndim - 1;                                                         \
        const int64_t inner = (w).o.dim[last_], total_ = tnt_shape_numel((w).o);                  \
        const int64_t rows_ = total_ ? total_ / inner : 0; /* an empty share: no rows */          \
        int64_t idx_[TNT_MAX_DIMS] = {0}, off[3] = {0, 0, 0};                                     \
        const int64_t s0 = (w).st[0][last_], s1 = (w).k > 1 ? (w).st[1][last_] : 0,               \
                      s2 = (w).k > 2 ? (w).st[2][last_] : 0;                                      \
        (void)s1, (void)s2;                                                                       \
        for (int64_t r_ = 0; r_ < rows_; r_++) {                                                  \
            const int64_t ob = r_ * inner;                                                        \
            __VA_ARGS__;                                                                          \
            for (int d_ = last_ - 1; d_ >= 0; d_--) {                                             \
                idx_[d_]++;                                                                       \
                for (int j_ = 0; j_ < (w).k; j_++) off[j_] += (w).st[j_][d_];                     \
                if (idx_[d_] < (w).o.dim[d_]) break;                                              \
                for (int j_ = 0; j_ < (w).k; j_++) off[j_] -= (w).st[j_][d_] * (w).o.dim[d_];     \
                idx_[d_] = 0;                                                                     \
            }                                                                                     \
        }                                                                                         \
    } while (0)

static bool is_compare(int b) { return b >= B_EQUAL && b <= B_LOGICAL_OR; }

static tnt_status infer_binary(const tnt__opnode *n, const tnt__ten *in, tnt__ten *out) {
    int b = n->kind % 256;
    if (b == B_WHERE) {
        tnt_shape t;
        tnt_status s = tnt__broadcast(n, in[0].s, in[1].s, &t);
        if (s == TNT_OK) s = tnt__broadcast(n, t, in[2].s, &out[0].s);
        out[0].dt = in[1].dt == TNT__F32 || in[2].dt == TNT__F32 ? TNT__F32 : in[1].dt;
        return s;
    }
    out[0].dt = is_compare(b) ? TNT__BOOL
                : b == B_DIVIDE || b == B_POWER || in[0].dt == TNT__F32 || in[1].dt == TNT__F32 ? TNT__F32
                : TNT__I32;
    return tnt__broadcast(n, in[0].s, in[1].s, &out[0].s);
}

#define ROW(expr)                                                                                 \
    for (int64_t i = 0; i < inner; i++) {                                                         \
        const float a = A[off[0] + i * s0], b = B[off[1] + i * s1];                               \
        (void)a, (void)b;                                                                         \
        Y[ob + i] = (expr);                                                                       \
    }                                                                                             \
    break

static inline __attribute__((always_inline)) void binary_row(int op, const float *A, const float *B, float *Y, const int64_t *off, int64_t ob,
                       int64_t inner, int64_t s0, int64_t s1) {
    switch (op) {
    case B_ADD: ROW(a + b);
    case B_SUBTRACT: ROW(a - b);
    case B_MULTIPLY: ROW(a * b);
    case B_DIVIDE: ROW(a / b);
    case B_POWER: ROW(powf(a, b));
    case B_MAXIMUM: ROW(a >= b ? a : b);
    case B_MINIMUM: ROW(a <= b ? a : b);
    case B_SQUARED_DIFFERENCE: ROW((a - b) * (a - b));
    case B_FLOOR_DIVIDE: ROW(floorf(a / b));
    case B_MOD: ROW(b == 0 ? 0.0f : a - floorf(a / b) * b); /* sign of b, as NumPy */
    case B_EQUAL: ROW(a == b);
    case B_NOT_EQUAL: ROW(a != b);
    case B_LESS: ROW(a < b);
    case B_LESS_EQUAL: ROW(a <= b);
    case B_GREATER: ROW(a > b);
    case B_GREATER_EQUAL: ROW(a >= b);
    case B_LOGICAL_AND: ROW(a != 0 && b != 0);
    case B_LOGICAL_OR: ROW(a != 0 || b != 0);
    }
}

static tnt_status forward_binary(tnt__opctx *c) {
    int op = c->node->kind % 256;
    walk w;
    walk_init(&w, c->out[0].s, c->n_in, c->in);
    float *Y = c->out[0].d;
    if (op == B_WHERE) {
        const float *C = c->in[0].d, *A = c->in[1].d, *B = c->in[2].d;
        WALK(w, for (int64_t i = 0; i < inner; i++) Y[ob + i] = C[off[0] + i * s0] != 0 ? A[off[1] + i * s1]
                                                                                        : B[off[2] + i * s2]);
        return TNT_OK;
    }
    const float *A = c->in[0].d, *B = c->in[1].d;
    if (tnt__shape_equal(c->in[0].s, c->in[1].s)) { /* one flat row */
        int64_t zero[3] = {0, 0, 0};
        binary_row(op, A, B, Y, zero, 0, tnt_shape_numel(c->out[0].s), 1, 1);
        return TNT_OK;
    }
    /* rows with unit or zero strides get their own copies of the loops (vectorized) */
    WALK(w, if (s0 == 1 && s1 == 1) binary_row(op, A, B, Y, off, ob, inner, 1, 1);
         else if (s0 == 1 && s1 == 0) binary_row(op, A, B, Y, off, ob, inner, 1, 0);
         else if (s0 == 0 && s1 == 1) binary_row(op, A, B, Y, off, ob, inner, 0, 1);
         else binary_row(op, A, B, Y, off, ob, inner, s0, s1));
    return TNT_OK;
}

/* One row of backward: the contributions to a, then to b (separate loops, so that each runs
 * without a branch per element; an operand broadcast along the row sums its row in a register). */
#define GROW_ONE(D, doff, ds, expr)                                                               \
    if (D) {                                                                                      \
        if (ds == 0) { /* in 8 lanes: a serial sum stays scalar (a chain of dependent adds) */  \
            float lanes_[8] = {0}, sum_ = 0;                                                      \
            int64_t i0_ = 0;                                                                      \
            for (; i0_ + 8 <= inner; i0_ += 8)                                                    \
                for (int j_ = 0; j_ < 8; j_++) {                                                  \
                    const int64_t i = i0_ + j_;                                                   \
                    const float a = A[off[0] + i * s0], b = B[off[1] + i * s1], y = Y[ob + i], g = G[ob + i]; \
                    (void)a, (void)b, (void)y;                                                    \
                    lanes_[j_] += (expr);                                                         \
                }                                                                                 \
            for (int j_ = 0; j_ < 8; j_++) sum_ += lanes_[j_];                                    \
            for (int64_t i = i0_; i < inner; i++) {                                               \
                const float a = A[off[0] + i * s0], b = B[off[1] + i * s1], y = Y[ob + i], g = G[ob + i]; \
                (void)a, (void)b, (void)y;                                                        \
                sum_ += (expr);                                                                   \
            }                                                                                     \
            D[doff] += sum_;                                                                      \
        } else {                                                                                  \
            for (int64_t i = 0; i < inner; i++) {                                                 \
                const float a = A[off[0] + i * s0], b = B[off[1] + i * s1], y = Y[ob + i], g = G[ob + i]; \
                (void)a, (void)b, (void)y;                                                        \
                D[doff + i * ds] += (expr);                                                       \
            }                                                                                     \
        }                                                                                         \
    }
#define GROW(ga, gb)                                                                              \
    GROW_ONE(DA, off[0], s0, ga)                                                                  \
    GROW_ONE(DB, off[1], s1, gb)                                                                  \
    break

/* One output row of backward (inlined per stride pattern, like binary_row). */
static inline __attribute__((always_inline)) void grad_row(int op, const float *A, const float *B, const float *Y,
                                                           const float *G, float *DA, float *DB, const int64_t *off,
                                                           int64_t ob, int64_t inner, int64_t s0, int64_t s1) {
    switch (op) {
    case B_ADD: GROW(g, g);
    case B_SUBTRACT: GROW(g, -g);
    case B_MULTIPLY: GROW(g * b, g * a);
    case B_DIVIDE: GROW(g / b, -g * y / b);
    case B_POWER: GROW(b == 0 ? 0.0f : g * b * powf(a, b - 1.0f), a > 0 ? g * y * logf(a) : 0.0f);
    case B_MAXIMUM: GROW(a >= b ? g : 0.0f, a >= b ? 0.0f : g);
    case B_MINIMUM: GROW(a <= b ? g : 0.0f, a <= b ? 0.0f : g);
    case B_SQUARED_DIFFERENCE: GROW(2.0f * g * (a - b), -2.0f * g * (a - b));
    case B_MOD: GROW(g, -g * floorf(a / b)); /* TensorFlow's floor_mod gradient */
    default: break; /* floor_divide: zero almost everywhere */
    }
}

static tnt_status backward_binary(tnt__opctx *c) {
    int op = c->node->kind % 256;
    walk w;
    walk_init(&w, c->out[0].s, c->n_in, c->in);
    const float *G = c->dout[0], *Y = c->out[0].d;
    if (op == B_WHERE) {
        const float *C = c->in[0].d;
        float *DA = c->din[1], *DB = c->din[2];
        WALK(w, for (int64_t i = 0; i < inner; i++) {
            bool take = C[off[0] + i * s0] != 0;
            if (take && DA) DA[off[1] + i * s1] += G[ob + i];
            if (!take && DB) DB[off[2] + i * s2] += G[ob + i];
        });
        return TNT_OK;
    }
    const float *A = c->in[0].d, *B = c->in[1].d;
    float *DA = c->din[0], *DB = c->din[1];
    WALK(w, if (s0 == 1 && s1 == 1) grad_row(op, A, B, Y, G, DA, DB, off, ob, inner, 1, 1);
         else if (s0 == 1 && s1 == 0) grad_row(op, A, B, Y, G, DA, DB, off, ob, inner, 1, 0);
         else if (s0 == 0 && s1 == 1) grad_row(op, A, B, Y, G, DA, DB, off, ob, inner, 0, 1);
         else grad_row(op, A, B, Y, G, DA, DB, off, ob, inner, s0, s1));
    return TNT_OK;
}

#define BINARY(name) {name, 2, 2, NULL, infer_binary, forward_binary, backward_binary}
#define COMPARE(name) {name, 2, 2, NULL, infer_binary, forward_binary, NULL}

const tnt__op_def tnt__ops_binary[] = {
    BINARY("add"), BINARY("subtract"), BINARY("multiply"), BINARY("divide"), BINARY("power"),
    BINARY("maximum"), BINARY("minimum"), BINARY("squared_difference"), BINARY("floor_divide"), BINARY("mod"),
    COMPARE("equal"), COMPARE("not_equal"), COMPARE("less"), COMPARE("less_equal"), COMPARE("greater"),
    COMPARE("greater_equal"), COMPARE("logical_and"), COMPARE("logical_or"),
    {"where", 3, 3, NULL, infer_binary, forward_binary, backward_binary}, {0}};

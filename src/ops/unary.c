/* unary.c: elementwise operations of one input (keras.ops names): y = f(x), and backward
 * dx += dy * f'(x) (written through x or y, whichever is cheaper and exact). floor, ceil and
 * round have a zero gradient as in TensorFlow; logical_not has none (a bool output). */
#include "ops/ops.h"

#include <math.h>

enum {
    U_NEGATIVE, U_ABS, U_SIGN, U_EXP, U_LOG, U_LOG1P, U_EXPM1, U_SQRT, U_RSQRT, U_SQUARE, U_RECIPROCAL,
    U_SIN, U_COS, U_TANH, U_SIGMOID, U_RELU, U_RELU6, U_GELU, U_SOFTPLUS, U_SOFTSIGN, U_SILU, U_ELU,
    U_LEAKY_RELU, U_ERF, U_FLOOR, U_CEIL, U_ROUND, U_IDENTITY, U_CLIP, U_LOGICAL_NOT, U_STOP_GRADIENT
};

static tnt_status parse_unary(tnt__opnode *n, const struct cJSON *attrs) {
    tnt__op_attr *a = &n->a;
    switch (n->kind % 256) {
    case U_GELU:
        a->flag = true; /* keras.ops.gelu's default approximate=True */
        return tnt__oa_bool(attrs, "approximate", &a->flag);
    case U_ELU:
        a->f0 = 1.0;
        return tnt__oa_num(attrs, "alpha", &a->f0);
    case U_LEAKY_RELU:
        a->f0 = 0.2; /* keras.ops.leaky_relu's negative_slope */
        return tnt__oa_num(attrs, "negative_slope", &a->f0);
    case U_CLIP: {
        a->f0 = -INFINITY, a->f1 = INFINITY;
        tnt_status s = tnt__oa_num(attrs, "x_min", &a->f0);
        if (s == TNT_OK) s = tnt__oa_num(attrs, "x_max", &a->f1);
        if (s == TNT_OK && a->f0 > a->f1)
            s = tnt__error(TNT_ERR_ARG, "x_min %g is above x_max %g", a->f0, a->f1);
        return s;
    }
    default:
        return TNT_OK;
    }
}

static bool keeps_dtype(int u) {
    return u == U_NEGATIVE || u == U_ABS || u == U_SIGN || u == U_SQUARE || u == U_RELU || u == U_FLOOR ||
           u == U_CEIL || u == U_ROUND || u == U_IDENTITY || u == U_CLIP || u == U_STOP_GRADIENT;
}

static tnt_status infer_unary(const tnt__opnode *n, const tnt__ten *in, tnt__ten *out) {
    int u = n->kind % 256;
    out[0].s = in[0].s;
    out[0].dt = u == U_LOGICAL_NOT ? TNT__BOOL : keeps_dtype(u) && in[0].dt != TNT__BOOL ? in[0].dt : TNT__F32;
    return TNT_OK;
}

#define SQRT_2_OVER_PI 0.7978845608028654
#define GELU_C 0.044715

#define MAP(expr)                                                                                 \
    for (int64_t i = 0; i < n; i++) {                                                             \
        const float x = X[i];                                                                     \
        (void)x;                                                                                  \
        Y[i] = (expr);                                                                            \
    }                                                                                             \
    break

static tnt_status forward_unary(tnt__opctx *c) {
    const tnt__op_attr *a = &c->node->a;
    const float *X = c->in[0].d;
    float *Y = c->out[0].d;
    const int64_t n = tnt_shape_numel(c->in[0].s);
    const float alpha = (float)a->f0, lo = (float)a->f0, hi = (float)a->f1;
    switch (c->node->kind % 256) {
    case U_NEGATIVE: MAP(-x);
    case U_ABS: MAP(fabsf(x));
    case U_SIGN: MAP((float)((x > 0) - (x < 0)));
    case U_EXP: MAP(expf(x));
    case U_LOG: MAP(logf(x));
    case U_LOG1P: MAP(log1pf(x));
    case U_EXPM1: MAP(expm1f(x));
    case U_SQRT: MAP(sqrtf(x));
    case U_RSQRT: MAP(1.0f / sqrtf(x));
    case U_SQUARE: MAP(x * x);
    case U_RECIPROCAL: MAP(1.0f / x);
    case U_SIN: MAP(sinf(x));
    case U_COS: MAP(cosf(x));
    case U_TANH: MAP(tanhf(x));
    case U_SIGMOID: MAP(x >= 0 ? 1.0f / (1.0f + expf(-x)) : expf(x) / (1.0f + expf(x)));
    case U_RELU: MAP(x > 0 ? x : 0.0f);
    case U_RELU6: MAP(x > 0 ? (x < 6 ? x : 6.0f) : 0.0f);
    case U_GELU:
        if (a->flag) {
            MAP((float)(0.5 * x * (1.0 + tanh(SQRT_2_OVER_PI * (x + GELU_C * (double)x * x * x)))));
        } else {
            MAP((float)(0.5 * x * (1.0 + erf(x / M_SQRT2))));
        }
    case U_SOFTPLUS: MAP(x > 0 ? x + log1pf(expf(-x)) : log1pf(expf(x)));
    case U_SOFTSIGN: MAP(x / (1.0f + fabsf(x)));
    case U_SILU: MAP(x / (1.0f + expf(-x)));
    case U_ELU: MAP(x > 0 ? x : alpha * expm1f(x));
    case U_LEAKY_RELU: MAP(x > 0 ? x : alpha * x);
    case U_ERF: MAP(erff(x));
    case U_FLOOR: MAP(floorf(x));
    case U_CEIL: MAP(ceilf(x));
    case U_ROUND: MAP(nearbyintf(x)); /* half to even, as NumPy */
    case U_IDENTITY:
    case U_STOP_GRADIENT: MAP(x);
    case U_CLIP: MAP(x < lo ? lo : x > hi ? hi : x);
    case U_LOGICAL_NOT: MAP(x == 0 ? 1.0f : 0.0f);
    }
    return TNT_OK;
}

#define GRAD(expr)                                                                                \
    for (int64_t i = 0; i < n; i++) {                                                             \
        const float x = X[i], y = Y[i], g = DY[i];                                                \
        (void)x, (void)y;                                                                         \
        DX[i] += (expr);                                                                          \
    }                                                                                             \
    break

static tnt_status backward_unary(tnt__opctx *c) {
    const tnt__op_attr *a = &c->node->a;
    const float *X = c->in[0].d, *Y = c->out[0].d, *DY = c->dout[0];
    float *DX = c->din[0];
    const int64_t n = tnt_shape_numel(c->in[0].s);
    const float alpha = (float)a->f0, lo = (float)a->f0, hi = (float)a->f1;
    switch (c->node->kind % 256) {
    case U_NEGATIVE: GRAD(-g);
    case U_ABS: GRAD(x > 0 ? g : x < 0 ? -g : 0.0f);
    case U_SIGN:
    case U_FLOOR:
    case U_CEIL:
    case U_ROUND: break; /* zero almost everywhere */
    case U_EXP: GRAD(g * y);
    case U_LOG: GRAD(g / x);
    case U_LOG1P: GRAD(g / (1.0f + x));
    case U_EXPM1: GRAD(g * (y + 1.0f));
    case U_SQRT: GRAD(g * 0.5f / y);
    case U_RSQRT: GRAD(g * -0.5f * y * y * y);
    case U_SQUARE: GRAD(g * 2.0f * x);
    case U_RECIPROCAL: GRAD(-g * y * y);
    case U_SIN: GRAD(g * cosf(x));
    case U_COS: GRAD(-g * sinf(x));
    case U_TANH: GRAD(g * (1.0f - y * y));
    case U_SIGMOID: GRAD(g * y * (1.0f - y));
    case U_RELU: GRAD(y > 0 ? g : 0.0f); /* through y: relu may run in place (ops/exec.c) */
    case U_RELU6: GRAD(x > 0 && x < 6 ? g : 0.0f);
    case U_GELU:
        if (a->flag) {
            GRAD((float)(g * (0.5 * (1.0 + tanh(SQRT_2_OVER_PI * (x + GELU_C * (double)x * x * x))) +
                              0.5 * x * (1.0 - pow(tanh(SQRT_2_OVER_PI * (x + GELU_C * (double)x * x * x)), 2)) *
                                  SQRT_2_OVER_PI * (1.0 + 3.0 * GELU_C * (double)x * x))));
        } else {
            GRAD((float)(g * (0.5 * (1.0 + erf(x / M_SQRT2)) + x * exp(-0.5 * (double)x * x) / sqrt(2.0 * M_PI))));
        }
    case U_SOFTPLUS: GRAD(g * (x >= 0 ? 1.0f / (1.0f + expf(-x)) : expf(x) / (1.0f + expf(x))));
    case U_SOFTSIGN: GRAD(g / ((1.0f + fabsf(x)) * (1.0f + fabsf(x))));
    case U_SILU: {
        GRAD(g * (1.0f / (1.0f + expf(-x))) * (1.0f + x * (1.0f - 1.0f / (1.0f + expf(-x)))));
    }
    case U_ELU: GRAD(x > 0 ? g : g * (y + alpha));
    case U_LEAKY_RELU: GRAD(x > 0 ? g : g * alpha);
    case U_ERF: GRAD((float)(g * 2.0 / sqrt(M_PI) * exp(-(double)x * x)));
    case U_IDENTITY: GRAD(g);
    case U_CLIP: GRAD(x >= lo && x <= hi ? g : 0.0f);
    }
    return TNT_OK;
}

#define UNARY(name) {name, 1, 1, parse_unary, infer_unary, forward_unary, backward_unary}
#define UNARY_NOGRAD(name) {name, 1, 1, parse_unary, infer_unary, forward_unary, NULL}

/* in the order of the enum */
const tnt__op_def tnt__ops_unary[] = {
    UNARY("negative"), UNARY("abs"), UNARY("sign"), UNARY("exp"), UNARY("log"), UNARY("log1p"),
    UNARY("expm1"), UNARY("sqrt"), UNARY("rsqrt"), UNARY("square"), UNARY("reciprocal"), UNARY("sin"),
    UNARY("cos"), UNARY("tanh"), UNARY("sigmoid"), UNARY("relu"), UNARY("relu6"), UNARY("gelu"),
    UNARY("softplus"), UNARY("softsign"), UNARY("silu"), UNARY("elu"), UNARY("leaky_relu"), UNARY("erf"),
    UNARY("floor"), UNARY("ceil"), UNARY("round"), UNARY("identity"), UNARY("clip"),
    UNARY_NOGRAD("logical_not"), UNARY_NOGRAD("stop_gradient"), {0}};

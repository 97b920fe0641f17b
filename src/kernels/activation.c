/* activation.c: Keras activations on oneDNN eltwise and softmax primitives; the others in plain C
 * (activation_c.c). */
#include "kernels/activation.h"

#include <math.h>

static const char *const act_names[TNT_ACT_COUNT] = {
    "linear", "relu", "sigmoid", "tanh", "softmax", "elu",
    "selu", "gelu", "swish", "softplus", "leaky_relu",
    "softsign", "hard_sigmoid", "hard_sigmoid_v3", "hard_silu", "exponential", "relu6",
    "mish", "log_softmax", "celu", "hard_tanh", "tanh_shrink", "soft_shrink",
    "hard_shrink", "squareplus", "log_sigmoid", "sparse_plus", "sparse_sigmoid", "sparsemax",
};

int tnt_activation_from_name(const char *name) {
    if (!name) return -1;
    if (!strcmp(name, "silu")) return TNT_ACT_SWISH;
    if (!strcmp(name, "hard_swish")) return TNT_ACT_HARD_SILU;
    if (!strcmp(name, "hard_sigmoid_keras2")) return TNT_ACT_HARD_SIGMOID; /* in the .keras files we write */
    for (int i = 0; i < TNT_ACT_COUNT; i++)
        if (!strcmp(name, act_names[i])) return i;
    return -1;
}

const char *tnt_activation_name(tnt_activation act) {
    return (unsigned)act < TNT_ACT_COUNT ? act_names[act] : "unknown";
}

float tnt__act_default_alpha(tnt_activation act) {
    if (act == TNT_ACT_LEAKY_RELU) return 0.2f;
    if (act == TNT_ACT_ELU) return 1.0f;
    return 0.0f;
}

bool tnt__act_post_op(tnt_activation act, float alpha, dnnl_alg_kind_t *alg, float *post_alpha) {
    if (alpha == 0.0f) alpha = tnt__act_default_alpha(act);
    *post_alpha = 0.0f;
    switch (act) {
    case TNT_ACT_RELU: *alg = dnnl_eltwise_relu; return true;
    case TNT_ACT_LEAKY_RELU: *alg = dnnl_eltwise_relu; *post_alpha = alpha; return true;
    case TNT_ACT_SIGMOID: *alg = dnnl_eltwise_logistic; return true;
    case TNT_ACT_TANH: *alg = dnnl_eltwise_tanh; return true;
    case TNT_ACT_ELU: *alg = dnnl_eltwise_elu; *post_alpha = alpha; return true;
    default: return false;
    }
}

bool tnt__act_backward_needs_src(tnt_activation act) {
    return act == TNT_ACT_GELU || act == TNT_ACT_SWISH || act == TNT_ACT_SOFTPLUS ||
           (tnt__act_is_c(act) && !tnt__act_c_rowwise(act));
}

/* oneDNN algorithm for forward and backward; backward uses dst where oneDNN allows it so that the
 * layer need not keep its input. */
static bool eltwise_alg(tnt_activation act, dnnl_alg_kind_t *fwd, dnnl_alg_kind_t *bwd) {
    switch (act) {
    case TNT_ACT_RELU:
    case TNT_ACT_LEAKY_RELU:
        *fwd = dnnl_eltwise_relu_use_dst_for_bwd; *bwd = *fwd; return true;
    case TNT_ACT_SIGMOID: *fwd = dnnl_eltwise_logistic_use_dst_for_bwd; *bwd = *fwd; return true;
    case TNT_ACT_TANH: *fwd = dnnl_eltwise_tanh_use_dst_for_bwd; *bwd = *fwd; return true;
    case TNT_ACT_ELU: *fwd = dnnl_eltwise_elu_use_dst_for_bwd; *bwd = *fwd; return true;
    case TNT_ACT_GELU: *fwd = dnnl_eltwise_gelu_erf; *bwd = *fwd; return true;
    case TNT_ACT_SWISH: *fwd = dnnl_eltwise_swish; *bwd = *fwd; return true;
    case TNT_ACT_SOFTPLUS: *fwd = dnnl_eltwise_soft_relu; *bwd = *fwd; return true;
    default: return false;
    }
}

tnt_status tnt__act_create(tnt__act *a, tnt_activation act, float alpha, int64_t rows, int64_t cols) {
    tnt_status status = TNT_OK;
    memset(a, 0, sizeof *a);
    a->act = act;
    a->alpha = alpha != 0.0f ? alpha : tnt__act_default_alpha(act);
    a->rows = rows;
    a->cols = cols;
    if ((unsigned)act >= TNT_ACT_COUNT)
        return tnt__error(TNT_ERR_ARG, "activation %d: expected 0..%d", (int)act, TNT_ACT_COUNT - 1);
    if (act == TNT_ACT_LINEAR || tnt__act_is_c(act)) return TNT_OK;

    dnnl_memory_desc_t md;
    int64_t dims[2] = {rows, cols};
    if ((status = tnt__md(&md, 2, dims, dnnl_nc)) != TNT_OK) return status;
    if (act == TNT_ACT_SOFTMAX) {
        dnnl_softmax_desc_t fd, bd;
        TNT_DNNL(dnnl_softmax_forward_desc_init(&fd, dnnl_forward_training, &md, 1));
        if ((status = tnt__prim_create(&a->fwd, &fd, NULL, NULL)) != TNT_OK) goto fail;
        TNT_DNNL(dnnl_softmax_backward_desc_init(&bd, &md, &md, 1));
        if ((status = tnt__prim_create(&a->bwd, &bd, NULL, a->fwd.pd)) != TNT_OK) goto fail;
    } else {
        dnnl_alg_kind_t fa = dnnl_alg_kind_undef, ba = dnnl_alg_kind_undef;
        eltwise_alg(act, &fa, &ba);
        float alpha_dnnl = (act == TNT_ACT_SWISH) ? 1.0f
                         : (act == TNT_ACT_RELU) ? 0.0f : a->alpha;
        dnnl_eltwise_desc_t fd, bd;
        TNT_DNNL(dnnl_eltwise_forward_desc_init(&fd, dnnl_forward_training, fa, &md, alpha_dnnl, 0.f));
        if ((status = tnt__prim_create(&a->fwd, &fd, NULL, NULL)) != TNT_OK) goto fail;
        TNT_DNNL(dnnl_eltwise_backward_desc_init(&bd, ba, &md, &md, alpha_dnnl, 0.f));
        if ((status = tnt__prim_create(&a->bwd, &bd, NULL, a->fwd.pd)) != TNT_OK) goto fail;
    }
    if ((status = tnt__memory(&a->src, &md, NULL, false)) != TNT_OK) goto fail;
    if ((status = tnt__memory(&a->dst, &md, NULL, false)) != TNT_OK) goto fail;
    if ((status = tnt__memory(&a->diff_dst, &md, NULL, false)) != TNT_OK) goto fail;
    if ((status = tnt__memory(&a->diff_src, &md, NULL, false)) != TNT_OK) goto fail;
    return TNT_OK;
fail:
    tnt__act_destroy(a);
    return status;
}

tnt_status tnt__act_forward(tnt__act *a, const float *x, float *y) {
    int64_t n = a->rows * a->cols;
    if (a->act == TNT_ACT_LINEAR) {
        if (x != y) memcpy(y, x, (size_t)n * sizeof(float));
        return TNT_OK;
    }
    if (tnt__act_is_c(a->act)) return tnt__act_c_forward(a->act, a->rows, a->cols, x, y);
    tnt__set_data(a->src, x);
    tnt__set_data(a->dst, y);
    dnnl_exec_arg_t args[2] = {{DNNL_ARG_SRC, a->src}, {DNNL_ARG_DST, a->dst}};
    return tnt__prim_exec(&a->fwd, 2, args);
}

tnt_status tnt__act_backward(tnt__act *a, const float *x, const float *y, const float *dy, float *dx) {
    int64_t n = a->rows * a->cols;
    if (a->act == TNT_ACT_LINEAR) {
        if (dx != dy) memcpy(dx, dy, (size_t)n * sizeof(float));
        return TNT_OK;
    }
    if (tnt__act_is_c(a->act)) return tnt__act_c_backward(a->act, a->rows, a->cols, x, y, dy, dx);
    bool use_src = tnt__act_backward_needs_src(a->act);
    tnt__set_data(use_src ? a->src : a->dst, use_src ? x : y);
    tnt__set_data(a->diff_dst, dy);
    tnt__set_data(a->diff_src, dx);
    dnnl_exec_arg_t args[3] = {{use_src ? DNNL_ARG_SRC : DNNL_ARG_DST, use_src ? a->src : a->dst},
                               {DNNL_ARG_DIFF_DST, a->diff_dst},
                               {DNNL_ARG_DIFF_SRC, a->diff_src}};
    return tnt__prim_exec(&a->bwd, 3, args);
}

void tnt__act_destroy(tnt__act *a) {
    tnt__prim_destroy(&a->fwd);
    tnt__prim_destroy(&a->bwd);
    if (a->src) dnnl_memory_destroy(a->src);
    if (a->dst) dnnl_memory_destroy(a->dst);
    if (a->diff_dst) dnnl_memory_destroy(a->diff_dst);
    if (a->diff_src) dnnl_memory_destroy(a->diff_src);
    memset(a, 0, sizeof *a);
}

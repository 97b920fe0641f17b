/* optim.cu: the optimizer steps of optimizers/optimizer.c over a flat slice, the same formulas in
 * the same operation order (built with -ffp-contract=off: bitwise the CPU's results). The per-step
 * scalars come from the host exactly as tnt__optimizer_apply computes them (in double, then
 * float): wdl = weight_decay * lr (0: none), t = iterations + 1, and
 *   Adam:   c1 = 1 - beta_1, c2 = 1 - beta_2, alpha = lr sqrt(1 - beta_2^t) / (1 - beta_1^t)
 *   Adamax: c1 = 1 - beta_1, b2 = beta_2, step = lr / (1 - beta_1^t)
 *   Nadam:  c1, c2 as Adam; cm, cg, cv as k_nadam's comment in optimizer.c
 * A clipvalue runs first as tnt_k_clip (elementwise.cu) into a scratch gradient.
 *
 * Contract (p, g and the slots: n floats each; slots in Keras's order as the optimizer's slot_names):
 *   tnt_k_sgd(float *p, const float *g, i64 n, float lr, float wdl)
 *   tnt_k_sgd_momentum(float *p, const float *g, float *m, i64 n, float lr, float momentum, int nesterov, float wdl)
 *   tnt_k_adam(float *p, const float *g, float *m, float *v, float *vhat, i64 n, float c1, float c2,
 *            float alpha, float eps, float wdl)                vhat NULL: no AMSGrad. AdamW: wdl != 0
 *   tnt_k_rmsprop(float *p, const float *g, float *v, float *mo, float *a, i64 n, float lr, float rho,
 *               float momentum, float eps, float wdl)          mo NULL: no momentum; a NULL: not centered
 *   tnt_k_adagrad(float *p, const float *g, float *acc, i64 n, float lr, float eps, float wdl)
 *   tnt_k_adadelta(float *p, const float *g, float *ag, float *adv, i64 n, float lr, float rho, float eps, float wdl)
 *   tnt_k_adamax(float *p, const float *g, float *m, float *u, i64 n, float c1, float b2, float step,
 *              float eps, float wdl)
 *   tnt_k_nadam(float *p, const float *g, float *m, float *v, i64 n, float c1, float c2, float cm, float cg,
 *             float cv, float lr, float eps, float wdl)
 */
#include "kmath.h"

KERNEL void tnt_k_sgd(float *p, const float *g, i64 n, float lr, float wdl) {
    GRID_STRIDE(i, n) {
        float pi = p[i];
        if (wdl != 0.0f) pi -= pi * wdl;
        p[i] = pi - g[i] * lr;
    }
}

KERNEL void tnt_k_sgd_momentum(float *p, const float *g, float *m, i64 n, float lr, float momentum, int nesterov,
                             float wdl) {
    GRID_STRIDE(i, n) {
        float pi = p[i];
        if (wdl != 0.0f) pi -= pi * wdl;
        const float step = -g[i] * lr;
        const float mi = step + m[i] * momentum;
        m[i] = mi;
        p[i] = pi + (nesterov ? step + mi * momentum : mi);
    }
}

KERNEL void tnt_k_adam(float *p, const float *g, float *m, float *v, float *vhat, i64 n, float c1, float c2,
                     float alpha, float eps, float wdl) {
    GRID_STRIDE(i, n) {
        float pi = p[i];
        const float gi = g[i];
        if (wdl != 0.0f) pi -= pi * wdl;
        const float mi = m[i] + (gi - m[i]) * c1;
        const float vi = v[i] + (gi * gi - v[i]) * c2;
        m[i] = mi;
        v[i] = vi;
        float d = vi;
        if (vhat) {
            d = vhat[i] > vi ? vhat[i] : vi;
            vhat[i] = d;
        }
        p[i] = pi - (mi * alpha) / (k_sqrtf(d) + eps);
    }
}

KERNEL void tnt_k_rmsprop(float *p, const float *g, float *v, float *mo, float *a, i64 n, float lr, float rho,
                        float momentum, float eps, float wdl) {
    const float one_rho = 1.0f - rho;
    GRID_STRIDE(i, n) {
        float pi = p[i];
        const float gi = g[i];
        if (wdl != 0.0f) pi -= pi * wdl;
        const float vi = rho * v[i] + one_rho * (gi * gi);
        v[i] = vi;
        float den = vi + eps;
        if (a) {
            const float ai = rho * a[i] + one_rho * gi;
            a[i] = ai;
            den = vi - ai * ai + eps;
        }
        float inc = lr * gi / k_sqrtf(den);
        if (mo) {
            inc = momentum * mo[i] + inc;
            mo[i] = inc;
        }
        p[i] = pi - inc;
    }
}

KERNEL void tnt_k_adagrad(float *p, const float *g, float *acc, i64 n, float lr, float eps, float wdl) {
    GRID_STRIDE(i, n) {
        float pi = p[i];
        const float gi = g[i];
        if (wdl != 0.0f) pi -= pi * wdl;
        const float ai = acc[i] + gi * gi;
        acc[i] = ai;
        p[i] = pi - lr * gi / k_sqrtf(ai + eps);
    }
}

KERNEL void tnt_k_adadelta(float *p, const float *g, float *ag, float *adv, i64 n, float lr, float rho, float eps,
                         float wdl) {
    const float one_rho = 1.0f - rho;
    GRID_STRIDE(i, n) {
        float pi = p[i];
        const float gi = g[i];
        if (wdl != 0.0f) pi -= pi * wdl;
        const float agi = rho * ag[i] + one_rho * gi * gi;
        const float dv = -k_sqrtf(adv[i] + eps) * gi / k_sqrtf(agi + eps);
        ag[i] = agi;
        adv[i] = rho * adv[i] + one_rho * dv * dv;
        p[i] = pi + lr * dv;
    }
}

KERNEL void tnt_k_adamax(float *p, const float *g, float *m, float *u, i64 n, float c1, float b2, float step, float eps,
                       float wdl) {
    GRID_STRIDE(i, n) {
        float pi = p[i];
        const float gi = g[i];
        if (wdl != 0.0f) pi -= pi * wdl;
        const float mi = m[i] + (gi - m[i]) * c1;
        const float bu = b2 * u[i], ag = k_fabsf(gi);
        const float ui = bu > ag ? bu : ag;
        m[i] = mi;
        u[i] = ui;
        p[i] = pi - step * mi / (ui + eps);
    }
}

KERNEL void tnt_k_nadam(float *p, const float *g, float *m, float *v, i64 n, float c1, float c2, float cm, float cg,
                      float cv, float lr, float eps, float wdl) {
    GRID_STRIDE(i, n) {
        float pi = p[i];
        const float gi = g[i];
        if (wdl != 0.0f) pi -= pi * wdl;
        const float mi = m[i] + (gi - m[i]) * c1;
        const float vi = v[i] + (gi * gi - v[i]) * c2;
        m[i] = mi;
        v[i] = vi;
        const float mhat = cm * mi + cg * gi;
        p[i] = pi - (mhat * lr) / (k_sqrtf(vi * cv) + eps);
    }
}

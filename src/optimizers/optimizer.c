/* optimizer.c: the Keras 2.11+ optimizers (tf.keras.optimizers.SGD, Adam, AdamW, RMSprop,
 * Adagrad, Adadelta, Adamax, Nadam) over the model's flat parameter and gradient buffers.
 * AdamW is Keras's adamw.py: Adam's update_step with the base optimizer's decoupled weight decay
 * (p -= p * weight_decay * lr, before the update), weight_decay defaulting to 0.004. A
 * learning-rate schedule (train/schedule.c) sets the rate once per step to schedule(iterations),
 * as Keras's apply_gradients does.
 *
 * Each step is one fused elementwise pass: read the parameter, its gradient and the slots, write
 * the parameter and the slots. Per-step scalars (bias corrections, Nadam's momentum cache) are
 * computed once per call in double and the loop body runs in float32, as Keras does. The loops
 * are `omp parallel for simd schedule(static)`: elementwise, so the result is bitwise the same
 * for any thread count and any slicing of [begin, end). SGD with momentum over the 36.8M
 * parameters of the MLP benchmark streams 5 arrays per step, so these loops must stay simple
 * enough to vectorize and run at memory bandwidth (measured: ~15 GB/s here, above a STREAM-like
 * triad on the same machine). GCC vectorizes the loops with a square root (Adam, RMSprop,
 * Adagrad, Adadelta, Nadam) only under -fno-math-errno, which the build should set; without it
 * they keep a scalar sqrtf call, which costs Nadam ~1.5x but leaves Adam near bandwidth.
 *
 * Options: a zero field of tnt_optimizer_opts means the Keras default, learning_rate included
 * (so tnt_sgd(0) is SGD at 0.01; freeze training with tnt_optimizer_set_lr(o, 0) instead). The
 * same holds for beta_1, rho, epsilon and initial_accumulator_value: an explicit 0 there cannot
 * be asked for (use a tiny value). Options that do not apply to the chosen optimizer are
 * rejected, as Keras rejects unknown arguments. */
#include "optimizers/optimizer.h"

#include "core/core.h"
#include "optimizers/schedule.h"

#include <ctype.h>
#include <math.h>

/* Below this many elements the OpenMP fork costs more than the loop. */
#define TNT__OPT_PARALLEL_MIN 32768

/* ---------------------------------------------------------------------------------------------
 * Names, defaults and validation
 * ------------------------------------------------------------------------------------------- */

/* Options that apply to each optimizer (Keras raises on unknown arguments; so do we, rather than
 * silently ignoring e.g. a momentum given to Adam). */
enum {
    OPT_MOMENTUM = 1 << 0,
    OPT_NESTEROV = 1 << 1,
    OPT_BETAS = 1 << 2,
    OPT_EPSILON = 1 << 3,
    OPT_RHO = 1 << 4,
    OPT_AMSGRAD = 1 << 5,
    OPT_CENTERED = 1 << 6,
    OPT_INIT_ACC = 1 << 7,
};

typedef struct opt_info {
    const char *key;  /* lower-case name accepted by tnt_optimizer_new */
    const char *name; /* Keras class name */
    tnt__opt_kind kind;
    unsigned allowed;
    float lr, beta_1, beta_2, epsilon, rho, init_acc, weight_decay; /* Keras defaults */
} opt_info;

static const opt_info OPTS[] = {
    {"sgd", "SGD", TNT__OPT_SGD, OPT_MOMENTUM | OPT_NESTEROV, 0.01f, 0, 0, 0, 0, 0, 0},
    {"adam", "Adam", TNT__OPT_ADAM, OPT_BETAS | OPT_EPSILON | OPT_AMSGRAD, 0.001f, 0.9f, 0.999f, 1e-7f, 0, 0, 0},
    {"adamw", "AdamW", TNT__OPT_ADAM, OPT_BETAS | OPT_EPSILON | OPT_AMSGRAD, 0.001f, 0.9f, 0.999f, 1e-7f, 0, 0,
     0.004f},
    {"rmsprop", "RMSprop", TNT__OPT_RMSPROP, OPT_MOMENTUM | OPT_EPSILON | OPT_RHO | OPT_CENTERED, 0.001f, 0, 0,
     1e-7f, 0.9f, 0, 0},
    {"adagrad", "Adagrad", TNT__OPT_ADAGRAD, OPT_EPSILON | OPT_INIT_ACC, 0.001f, 0, 0, 1e-7f, 0, 0.1f, 0},
    {"adadelta", "Adadelta", TNT__OPT_ADADELTA, OPT_EPSILON | OPT_RHO, 0.001f, 0, 0, 1e-7f, 0.95f, 0, 0},
    {"adamax", "Adamax", TNT__OPT_ADAMAX, OPT_BETAS | OPT_EPSILON, 0.001f, 0.9f, 0.999f, 1e-7f, 0, 0, 0},
    {"nadam", "Nadam", TNT__OPT_NADAM, OPT_BETAS | OPT_EPSILON, 0.001f, 0.9f, 0.999f, 1e-7f, 0, 0, 0},
};
#define VALID_NAMES "sgd, adam, adamw, rmsprop, adagrad, adadelta, adamax, nadam"

static bool name_eq(const char *a, const char *b) {
    for (; *a && *b; a++, b++)
        if (tolower((unsigned char)*a) != tolower((unsigned char)*b)) return false;
    return *a == *b;
}

static bool lr_ok(float lr) { return isfinite(lr) && lr >= 0; }

/* value in [lo, hi) (hi_open) or [lo, hi] */
static tnt_status check_range(const char *opt, const char *field, float v, float lo, float hi, bool hi_open) {
    bool ok = isfinite(v) && v >= lo && (hi_open ? v < hi : v <= hi);
    if (!ok)
        return tnt__error(TNT_ERR_ARG, "%s: %s %g is out of range: expected a value in [%g, %g%s", opt, field,
                          (double)v, (double)lo, (double)hi, hi_open ? ")" : "]");
    return TNT_OK;
}

static tnt_status check_applies(const opt_info *in, unsigned flag, bool set, const char *field) {
    if (set && !(in->allowed & flag))
        return tnt__error(TNT_ERR_ARG, "optimizer %s: option %s does not apply to %s", in->name, field, in->name);
    return TNT_OK;
}

tnt_optimizer *tnt_optimizer_new(const char *name, const tnt_optimizer_opts *opts) {
    if (!name) {
        tnt__error(TNT_ERR_ARG, "optimizer name is NULL: expected one of " VALID_NAMES);
        return NULL;
    }
    if (name_eq(name, "ftrl")) {
        tnt__error(TNT_ERR_UNSUPPORTED,
                   "optimizer \"%s\": Ftrl is not supported (as in Tarantella); use one of " VALID_NAMES, name);
        return NULL;
    }
    const opt_info *in = NULL;
    for (size_t i = 0; i < TNT_ARRAY_LEN(OPTS); i++)
        if (name_eq(name, OPTS[i].key)) in = &OPTS[i];
    if (!in) {
        tnt__error(TNT_ERR_ARG, "unknown optimizer \"%s\": expected one of " VALID_NAMES, name);
        return NULL;
    }
    tnt_optimizer_opts o = opts ? *opts : (tnt_optimizer_opts){0};
    tnt_status s;
    if ((s = check_applies(in, OPT_MOMENTUM, o.momentum != 0, "momentum")) ||
        (s = check_applies(in, OPT_NESTEROV, o.nesterov, "nesterov")) ||
        (s = check_applies(in, OPT_BETAS, o.beta_1 != 0, "beta_1")) ||
        (s = check_applies(in, OPT_BETAS, o.beta_2 != 0, "beta_2")) ||
        (s = check_applies(in, OPT_EPSILON, o.epsilon != 0, "epsilon")) ||
        (s = check_applies(in, OPT_RHO, o.rho != 0, "rho")) ||
        (s = check_applies(in, OPT_AMSGRAD, o.amsgrad, "amsgrad")) ||
        (s = check_applies(in, OPT_CENTERED, o.centered, "centered")) ||
        (s = check_applies(in, OPT_INIT_ACC, o.initial_accumulator_value != 0, "initial_accumulator_value")))
        return NULL;
    /* Zero means the Keras default for every float option (momentum's default is 0 anyway). */
    if (o.learning_rate == 0) o.learning_rate = in->lr;
    if (o.beta_1 == 0) o.beta_1 = in->beta_1;
    if (o.beta_2 == 0) o.beta_2 = in->beta_2;
    if (o.epsilon == 0) o.epsilon = in->epsilon;
    if (o.rho == 0) o.rho = in->rho;
    if (o.initial_accumulator_value == 0) o.initial_accumulator_value = in->init_acc;
    if (o.weight_decay == 0) o.weight_decay = in->weight_decay; /* AdamW: 0.004 */
    if (!lr_ok(o.learning_rate)) {
        tnt__error(TNT_ERR_ARG, "optimizer %s: learning_rate %g is invalid: expected a finite value >= 0", in->name,
                   (double)o.learning_rate);
        return NULL;
    }
    /* Keras checks SGD's momentum in [0, 1]; the other ranges keep the formulas meaningful
     * (a beta of 1 would divide by 1 - beta^t = 0). */
    if (((in->allowed & OPT_MOMENTUM) && (s = check_range(in->name, "momentum", o.momentum, 0, 1, false))) ||
        ((in->allowed & OPT_BETAS) && (s = check_range(in->name, "beta_1", o.beta_1, 0, 1, true))) ||
        ((in->allowed & OPT_BETAS) && (s = check_range(in->name, "beta_2", o.beta_2, 0, 1, true))) ||
        ((in->allowed & OPT_RHO) && (s = check_range(in->name, "rho", o.rho, 0, 1, false))) ||
        ((in->allowed & OPT_EPSILON) && (s = check_range(in->name, "epsilon", o.epsilon, 0, INFINITY, true))) ||
        ((in->allowed & OPT_INIT_ACC) &&
         (s = check_range(in->name, "initial_accumulator_value", o.initial_accumulator_value, 0, INFINITY, true))) ||
        (s = check_range(in->name, "weight_decay", o.weight_decay, 0, INFINITY, true)) ||
        (s = check_range(in->name, "clipvalue", o.clipvalue, 0, INFINITY, true)))
        return NULL;

    tnt_optimizer *opt = tnt__calloc(1, sizeof *opt);
    if (!opt) return NULL;
    opt->kind = in->kind;
    opt->name = in->name;
    opt->learning_rate = o.learning_rate;
    opt->momentum = o.momentum;
    opt->nesterov = o.nesterov;
    opt->beta_1 = o.beta_1;
    opt->beta_2 = o.beta_2;
    opt->epsilon = o.epsilon;
    opt->rho = o.rho;
    opt->amsgrad = o.amsgrad;
    opt->centered = o.centered;
    opt->initial_accumulator_value = o.initial_accumulator_value;
    opt->weight_decay = o.weight_decay;
    opt->clipvalue = o.clipvalue;
    opt->iterations = 0;
    opt->nadam_u_product = 1.0;
    opt->n_params = -1;
    opt->schedule_step = -1;
    /* Slot names and order as Keras's build() creates them. */
    const char **sn = opt->slot_names;
    int k = 0;
    switch (opt->kind) {
    case TNT__OPT_SGD:
        /* Keras 2.11 creates "m" even without momentum; with momentum 0 it only ever holds
         * -lr*g, so we skip it and save a full-size buffer and its memory traffic. */
        if (opt->momentum > 0) sn[k++] = "m";
        break;
    case TNT__OPT_ADAM:
        sn[k++] = "m", sn[k++] = "v";
        if (opt->amsgrad) sn[k++] = "vhat";
        break;
    case TNT__OPT_RMSPROP:
        sn[k++] = "velocity";
        if (opt->momentum > 0) sn[k++] = "momentum";
        if (opt->centered) sn[k++] = "average_gradient";
        break;
    case TNT__OPT_ADAGRAD: sn[k++] = "accumulator"; break;
    case TNT__OPT_ADADELTA: sn[k++] = "accumulated_grad", sn[k++] = "accumulated_delta_var"; break;
    case TNT__OPT_ADAMAX: sn[k++] = "m", sn[k++] = "u"; break;
    case TNT__OPT_NADAM: sn[k++] = "m", sn[k++] = "v"; break;
    }
    opt->n_slots = k;
    return opt;
}

tnt_optimizer *tnt_sgd(float learning_rate) {
    return tnt_optimizer_new("sgd", &(tnt_optimizer_opts){.learning_rate = learning_rate});
}

tnt_optimizer *tnt_adam(float learning_rate) {
    return tnt_optimizer_new("adam", &(tnt_optimizer_opts){.learning_rate = learning_rate});
}

tnt_optimizer *tnt_adamw(float learning_rate, float weight_decay) {
    return tnt_optimizer_new("adamw",
                             &(tnt_optimizer_opts){.learning_rate = learning_rate, .weight_decay = weight_decay});
}

void tnt_optimizer_free(tnt_optimizer *opt) {
    if (!opt) return;
    tnt_lr_schedule_free(opt->schedule);
    for (int k = 0; k < TNT__OPT_MAX_SLOTS; k++) tnt__free(opt->slots[k]);
    tnt__free(opt->clip_buf);
    tnt__optimizer_gpu_free(opt);
    free(opt);
}

float tnt_optimizer_get_lr(const tnt_optimizer *opt) {
    if (!opt) return NAN;
    if (opt->schedule) return (float)tnt__lr_schedule_eval(opt->schedule, opt->iterations);
    return opt->learning_rate;
}

tnt_status tnt_optimizer_set_schedule(tnt_optimizer *opt, tnt_lr_schedule *s) {
    if (!opt) {
        tnt_lr_schedule_free(s);
        return tnt__error(TNT_ERR_ARG, "optimizer_set_schedule: optimizer is NULL");
    }
    if (!s)
        return tnt__error(TNT_ERR_ARG,
                          "optimizer %s: schedule is NULL (did the schedule constructor fail? see its error)",
                          opt->name);
    tnt_lr_schedule_free(opt->schedule);
    opt->schedule = s;
    opt->schedule_step = -1;
    return TNT_OK;
}

tnt_status tnt_optimizer_set_lr(tnt_optimizer *opt, float learning_rate) {
    if (!opt) return tnt__error(TNT_ERR_ARG, "optimizer_set_lr: optimizer is NULL");
    if (opt->schedule) /* as Keras, which refuses to set a rate created as a schedule */
        return tnt__error(TNT_ERR_STATE, "optimizer %s: learning rate is set by a schedule and cannot be set",
                          opt->name);
    if (!lr_ok(learning_rate))
        return tnt__error(TNT_ERR_ARG, "optimizer %s: learning_rate %g is invalid: expected a finite value >= 0",
                          opt->name, (double)learning_rate);
    opt->learning_rate = learning_rate;
    return TNT_OK;
}

int64_t tnt_optimizer_iterations(const tnt_optimizer *opt) { return opt ? opt->iterations : -1; }

const char *tnt_optimizer_name(const tnt_optimizer *opt) { return opt ? opt->name : NULL; }

/* ---------------------------------------------------------------------------------------------
 * State
 * ------------------------------------------------------------------------------------------- */

tnt_status tnt__optimizer_prepare(tnt_optimizer *o, int64_t n_params) {
    if (!o) return tnt__error(TNT_ERR_ARG, "optimizer is NULL");
    if (n_params < 0)
        return tnt__error(TNT_ERR_ARG, "optimizer %s: %lld parameters: expected >= 0", o->name, (long long)n_params);
    if (o->n_params >= 0) {
        if (o->n_params == n_params) return TNT_OK;
        return tnt__error(TNT_ERR_STATE,
                          "optimizer %s was prepared for %lld parameters and cannot serve %lld (an optimizer "
                          "belongs to one model; create a new one)",
                          o->name, (long long)o->n_params, (long long)n_params);
    }
    for (int k = 0; k < o->n_slots; k++) {
        o->slots[k] = tnt__alloc((size_t)n_params * sizeof(float));
        if (!o->slots[k]) {
            for (int j = 0; j < k; j++) tnt__free(o->slots[j]), o->slots[j] = NULL;
            return tnt__error_prefix(TNT_ERR_NOMEM, "optimizer %s: slot \"%s\" for %lld parameters: ", o->name,
                                     o->slot_names[k], (long long)n_params);
        }
    }
    if (o->clipvalue > 0 && !(o->clip_buf = tnt__alloc((size_t)(n_params ? n_params : 1) * sizeof(float)))) {
        for (int k = 0; k < o->n_slots; k++) tnt__free(o->slots[k]), o->slots[k] = NULL;
        return tnt__error_prefix(TNT_ERR_NOMEM, "optimizer %s: clipvalue's gradient buffer for %lld parameters: ",
                                 o->name, (long long)n_params);
    }
    if (o->kind == TNT__OPT_ADAGRAD) {
        float *acc = o->slots[0];
        const float init = o->initial_accumulator_value;
#pragma omp parallel for simd schedule(static) if (n_params >= TNT__OPT_PARALLEL_MIN)
        for (int64_t i = 0; i < n_params; i++) acc[i] = init;
    }
    o->n_params = n_params;
    return TNT_OK;
}

int tnt__optimizer_num_slots(const tnt_optimizer *o) { return o ? o->n_slots : 0; }

const char *tnt__optimizer_slot_name(const tnt_optimizer *o, int k) {
    return o && k >= 0 && k < o->n_slots ? o->slot_names[k] : NULL;
}

float *tnt__optimizer_slot(tnt_optimizer *o, int k) {
    return o && k >= 0 && k < o->n_slots ? o->slots[k] : NULL;
}

/* Nadam's momentum cache u_t = beta_1 * (1 - 0.5 * 0.96^t) (Keras: decay = 0.96). */
static double nadam_u(const tnt_optimizer *o, int64_t t) {
    return (double)o->beta_1 * (1.0 - 0.5 * pow(0.96, (double)t));
}

void tnt__optimizer_nadam_coeffs(const tnt_optimizer *o, double *cm, double *cg, double *cv) {
    const double u_t = nadam_u(o, o->iterations + 1), u_t1 = nadam_u(o, o->iterations + 2);
    const double up_t = o->nadam_u_product * u_t, up_t1 = up_t * u_t1;
    *cm = u_t1 / (1.0 - up_t1), *cg = (1.0 - u_t) / (1.0 - up_t);
    *cv = 1.0 / (1.0 - pow(o->beta_2, (double)(o->iterations + 1)));
}

void tnt__optimizer_finish_step(tnt_optimizer *o) {
    if (!o) return;
    if (o->kind == TNT__OPT_NADAM) o->nadam_u_product *= nadam_u(o, o->iterations + 1);
    o->iterations++;
}

tnt_status tnt__optimizer_set_iterations(tnt_optimizer *o, int64_t iterations) {
    if (!o) return tnt__error(TNT_ERR_ARG, "optimizer is NULL");
    if (iterations < 0)
        return tnt__error(TNT_ERR_ARG, "optimizer %s: iterations %lld: expected >= 0", o->name,
                          (long long)iterations);
    o->iterations = iterations;
    o->nadam_u_product = 1.0;
    if (o->kind == TNT__OPT_NADAM)
        for (int64_t t = 1; t <= iterations; t++) o->nadam_u_product *= nadam_u(o, t);
    return TNT_OK;
}

/* ---------------------------------------------------------------------------------------------
 * Update kernels. Formulas are Keras 2.11+'s update_step (dense gradients), with g the gradient,
 * lr the current learning rate and t = iterations + 1. Weight decay, when set, comes first as in
 * Keras's apply_gradients: p = p - p * wd * lr.
 * ------------------------------------------------------------------------------------------- */

#define PAR_LOOP _Pragma("omp parallel for simd schedule(static) if (n >= TNT__OPT_PARALLEL_MIN)")

/* SGD: p = p - lr * g */
static void k_sgd(float *restrict p, const float *restrict g, int64_t n, float lr, float wdl) {
    const bool wd = wdl != 0;
    PAR_LOOP
    for (int64_t i = 0; i < n; i++) {
        float pi = p[i];
        if (wd) pi -= pi * wdl;
        p[i] = pi - g[i] * lr;
    }
}

/* SGD with momentum: m = m * momentum - lr * g;  p = p + m
 * nesterov:          m = m * momentum - lr * g;  p = p + m * momentum - lr * g */
static void k_sgd_momentum(float *restrict p, const float *restrict g, float *restrict m, int64_t n, float lr,
                           float mom, bool nesterov, float wdl) {
    const bool wd = wdl != 0;
    PAR_LOOP
    for (int64_t i = 0; i < n; i++) {
        float pi = p[i];
        if (wd) pi -= pi * wdl;
        float step = -g[i] * lr;
        float mi = step + m[i] * mom;
        m[i] = mi;
        p[i] = pi + (nesterov ? step + mi * mom : mi);
    }
}

/* Adam: m += (g - m) * (1 - beta_1);  v += (g^2 - v) * (1 - beta_2)
 *       amsgrad: vhat = max(vhat, v), and vhat replaces v below
 *       alpha = lr * sqrt(1 - beta_2^t) / (1 - beta_1^t);  p -= m * alpha / (sqrt(v) + eps) */
static void k_adam(float *restrict p, const float *restrict g, float *restrict m, float *restrict v,
                   float *restrict vhat, int64_t n, float c1, float c2, float alpha, float eps, float wdl) {
    const bool wd = wdl != 0;
    if (vhat) {
        PAR_LOOP
        for (int64_t i = 0; i < n; i++) {
            float pi = p[i], gi = g[i];
            if (wd) pi -= pi * wdl;
            float mi = m[i] + (gi - m[i]) * c1;
            float vi = v[i] + (gi * gi - v[i]) * c2;
            float hi = vhat[i] > vi ? vhat[i] : vi; /* max, written so that it vectorizes */
            m[i] = mi, v[i] = vi, vhat[i] = hi;
            p[i] = pi - (mi * alpha) / (sqrtf(hi) + eps);
        }
    } else {
        PAR_LOOP
        for (int64_t i = 0; i < n; i++) {
            float pi = p[i], gi = g[i];
            if (wd) pi -= pi * wdl;
            float mi = m[i] + (gi - m[i]) * c1;
            float vi = v[i] + (gi * gi - v[i]) * c2;
            m[i] = mi, v[i] = vi;
            p[i] = pi - (mi * alpha) / (sqrtf(vi) + eps);
        }
    }
}

/* RMSprop: v = rho * v + (1 - rho) * g^2
 *          centered: a = rho * a + (1 - rho) * g;  den = v - a^2 + eps   else den = v + eps
 *          inc = lr * g / sqrt(den)          (note: eps inside the square root)
 *          momentum > 0: mo = momentum * mo + inc;  p -= mo     else p -= inc */
static void k_rmsprop(float *restrict p, const float *restrict g, float *restrict v, float *restrict mo,
                      float *restrict a, int64_t n, float lr, float rho, float mom, float eps, float wdl) {
    const bool wd = wdl != 0, has_mo = mo != NULL, has_a = a != NULL;
    const float one_rho = 1.0f - rho;
    PAR_LOOP
    for (int64_t i = 0; i < n; i++) {
        float pi = p[i], gi = g[i];
        if (wd) pi -= pi * wdl;
        float vi = rho * v[i] + one_rho * (gi * gi);
        v[i] = vi;
        float den = vi + eps;
        if (has_a) {
            float ai = rho * a[i] + one_rho * gi;
            a[i] = ai;
            den = vi - ai * ai + eps;
        }
        float inc = lr * gi / sqrtf(den);
        if (has_mo) {
            inc = mom * mo[i] + inc;
            mo[i] = inc;
        }
        p[i] = pi - inc;
    }
}

/* Adagrad: acc += g^2;  p -= lr * g / sqrt(acc + eps) */
static void k_adagrad(float *restrict p, const float *restrict g, float *restrict acc, int64_t n, float lr,
                      float eps, float wdl) {
    const bool wd = wdl != 0;
    PAR_LOOP
    for (int64_t i = 0; i < n; i++) {
        float pi = p[i], gi = g[i];
        if (wd) pi -= pi * wdl;
        float ai = acc[i] + gi * gi;
        acc[i] = ai;
        p[i] = pi - lr * gi / sqrtf(ai + eps);
    }
}

/* Adadelta: ag = rho * ag + (1 - rho) * g^2
 *           dv = -sqrt(adv + eps) * g / sqrt(ag + eps)
 *           adv = rho * adv + (1 - rho) * dv^2;  p += lr * dv */
static void k_adadelta(float *restrict p, const float *restrict g, float *restrict ag, float *restrict adv,
                       int64_t n, float lr, float rho, float eps, float wdl) {
    const bool wd = wdl != 0;
    const float one_rho = 1.0f - rho;
    PAR_LOOP
    for (int64_t i = 0; i < n; i++) {
        float pi = p[i], gi = g[i];
        if (wd) pi -= pi * wdl;
        float agi = rho * ag[i] + one_rho * gi * gi;
        float dv = -sqrtf(adv[i] + eps) * gi / sqrtf(agi + eps);
        ag[i] = agi;
        adv[i] = rho * adv[i] + one_rho * dv * dv;
        p[i] = pi + lr * dv;
    }
}

/* Adamax: m += (g - m) * (1 - beta_1);  u = max(beta_2 * u, |g|)
 *         p -= lr * m / ((1 - beta_1^t) * (u + eps))   (step = lr / (1 - beta_1^t) precomputed) */
static void k_adamax(float *restrict p, const float *restrict g, float *restrict m, float *restrict u, int64_t n,
                     float c1, float b2, float step, float eps, float wdl) {
    const bool wd = wdl != 0;
    PAR_LOOP
    for (int64_t i = 0; i < n; i++) {
        float pi = p[i], gi = g[i];
        if (wd) pi -= pi * wdl;
        float mi = m[i] + (gi - m[i]) * c1;
        float bu = b2 * u[i], ag = fabsf(gi);
        float ui = bu > ag ? bu : ag; /* max(beta_2 * u, |g|) */
        m[i] = mi, u[i] = ui;
        p[i] = pi - step * mi / (ui + eps);
    }
}

/* Nadam: u_t = beta_1 (1 - 0.5 * 0.96^t), u_t1 = beta_1 (1 - 0.5 * 0.96^(t+1))
 *        up_t = u_1 * ... * u_t,  up_t1 = up_t * u_t1
 *        m += (g - m) * (1 - beta_1);  v += (g^2 - v) * (1 - beta_2)
 *        m_hat = u_t1 * m / (1 - up_t1) + (1 - u_t) * g / (1 - up_t);  v_hat = v / (1 - beta_2^t)
 *        p -= lr * m_hat / (sqrt(v_hat) + eps)
 * with cm = u_t1 / (1 - up_t1), cg = (1 - u_t) / (1 - up_t), cv = 1 / (1 - beta_2^t). */
static void k_nadam(float *restrict p, const float *restrict g, float *restrict m, float *restrict v, int64_t n,
                    float c1, float c2, float cm, float cg, float cv, float lr, float eps, float wdl) {
    const bool wd = wdl != 0;
    PAR_LOOP
    for (int64_t i = 0; i < n; i++) {
        float pi = p[i], gi = g[i];
        if (wd) pi -= pi * wdl;
        float mi = m[i] + (gi - m[i]) * c1;
        float vi = v[i] + (gi * gi - v[i]) * c2;
        m[i] = mi, v[i] = vi;
        float mhat = cm * mi + cg * gi;
        p[i] = pi - (mhat * lr) / (sqrtf(vi * cv) + eps);
    }
}

tnt_status tnt__optimizer_apply(tnt_optimizer *o, float *params, const float *grads, int64_t begin, int64_t end) {
    if (!o) return tnt__error(TNT_ERR_ARG, "optimizer is NULL");
    if (o->n_params < 0)
        return tnt__error(TNT_ERR_STATE, "optimizer %s: apply before prepare (the model must be compiled)", o->name);
    if (begin < 0 || end < begin || end > o->n_params)
        return tnt__error(TNT_ERR_ARG, "optimizer %s: slice [%lld, %lld) is not within [0, %lld)", o->name,
                          (long long)begin, (long long)end, (long long)o->n_params);
    /* once per step, for every slice (an empty one too: a sharded rank may own nothing) */
    if (o->schedule && o->schedule_step != o->iterations) {
        o->learning_rate = (float)tnt__lr_schedule_eval(o->schedule, o->iterations);
        o->schedule_step = o->iterations;
    }
    const int64_t n = end - begin;
    if (n == 0) return TNT_OK;
    if (!params || !grads) return tnt__error(TNT_ERR_ARG, "optimizer %s: parameter or gradient buffer is NULL", o->name);

    float *p = params + begin;
    const float *g = grads + begin;
    if (o->clipvalue > 0) { /* Keras's clipvalue: tf.clip_by_value of each gradient before the update */
        float *cg = o->clip_buf + begin;
        const float c = o->clipvalue;
#pragma omp parallel for simd schedule(static) if (n >= TNT__OPT_PARALLEL_MIN)
        for (int64_t i = 0; i < n; i++) cg[i] = g[i] > c ? c : (g[i] < -c ? -c : g[i]); /* NaN stays NaN */
        g = cg;
    }
    float *s[TNT__OPT_MAX_SLOTS] = {NULL, NULL, NULL};
    for (int k = 0; k < o->n_slots; k++) s[k] = o->slots[k] + begin;

    const double lr = o->learning_rate, t = (double)(o->iterations + 1);
    const float wdl = (float)((double)o->weight_decay * lr);
    const float eps = o->epsilon;
    switch (o->kind) {
    case TNT__OPT_SGD:
        if (o->momentum > 0)
            k_sgd_momentum(p, g, s[0], n, (float)lr, o->momentum, o->nesterov, wdl);
        else
            k_sgd(p, g, n, (float)lr, wdl);
        break;
    case TNT__OPT_ADAM: {
        double alpha = lr * sqrt(1.0 - pow(o->beta_2, t)) / (1.0 - pow(o->beta_1, t));
        k_adam(p, g, s[0], s[1], o->amsgrad ? s[2] : NULL, n, 1.0f - o->beta_1, 1.0f - o->beta_2, (float)alpha, eps,
               wdl);
        break;
    }
    case TNT__OPT_RMSPROP: {
        int k = 1;
        float *mo = o->momentum > 0 ? s[k++] : NULL;
        float *a = o->centered ? s[k++] : NULL;
        k_rmsprop(p, g, s[0], mo, a, n, (float)lr, o->rho, o->momentum, eps, wdl);
        break;
    }
    case TNT__OPT_ADAGRAD: k_adagrad(p, g, s[0], n, (float)lr, eps, wdl); break;
    case TNT__OPT_ADADELTA: k_adadelta(p, g, s[0], s[1], n, (float)lr, o->rho, eps, wdl); break;
    case TNT__OPT_ADAMAX: {
        double step = lr / (1.0 - pow(o->beta_1, t));
        k_adamax(p, g, s[0], s[1], n, 1.0f - o->beta_1, o->beta_2, (float)step, eps, wdl);
        break;
    }
    case TNT__OPT_NADAM: {
        double cm, cg, cv;
        tnt__optimizer_nadam_coeffs(o, &cm, &cg, &cv);
        k_nadam(p, g, s[0], s[1], n, 1.0f - o->beta_1, 1.0f - o->beta_2, (float)cm, (float)cg, (float)cv, (float)lr,
                eps, wdl);
        break;
    }
    }
    return TNT_OK;
}

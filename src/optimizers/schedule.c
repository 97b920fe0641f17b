/* schedule.c: learning-rate schedules, ports of Keras's
 * keras/optimizers/schedules/learning_rate_schedule.py (Keras 2.11 .. 2.15; CosineDecay's
 * warm-up from Keras 2.13+) and of the two warm-up schedules of the Tarantella tutorials
 * (docs 0.9, "Advanced topics: Scaling the learning rate / Learning rate warm-up").
 *
 * Every schedule maps a 0-based step (the optimizer's iteration count before the step) to a
 * learning rate. Values are computed in double and rounded to float once; Keras computes in the
 * float32 dtype of initial_learning_rate, so results agree to float32 rounding.
 *
 * Formulas (step s, all divisions in floating point):
 *   ExponentialDecay:     p = s / decay_steps (floor(p) if staircase);  lr = initial * rate^p
 *   PiecewiseConstant:    values[0] for s <= b[0], values[i] for b[i-1] < s <= b[i],
 *                         values[n] for s > b[n-1]
 *   PolynomialDecay:      cycle: D = decay_steps * max(1, ceil(s / decay_steps)), else
 *                         D = decay_steps and s = min(s, decay_steps);
 *                         lr = (initial - end) * (1 - s / D)^power + end
 *   CosineDecay:          without warm-up: s = min(s, decay_steps);
 *                         lr = initial * ((1 - alpha) * 0.5 * (1 + cos(pi * s / decay_steps)) + alpha)
 *                         with warm-up (Keras 2.13+ warmup_target, warmup_steps):
 *                         s = min(s, decay_steps + warmup_steps);
 *                         s < warmup_steps: lr = initial + (target - initial) * s / warmup_steps
 *                         else the decay above from target at s - warmup_steps
 *   InverseTimeDecay:     p = s / decay_steps (floor(p) if staircase);  lr = initial / (1 + rate * p)
 *   ExpDecayWithWarmupSchedule (tarantella_models src/models/image_classification/
 *   lr_scheduler.py, the ResNet-50 tutorial): initial = base_lr * num_ranks;
 *                         s <= warmup_steps: lr = initial * warmup_rate * s / warmup_steps
 *                         else ExponentialDecay(initial, decay_steps, decay_rate, staircase)(s)
 *   PiecewiseConstantDecayWithWarmup (TF official models resnet common.py, which the tutorial
 *   links; BASE_LEARNING_RATE is a parameter here, 0.1 there):
 *                         rescaled = base_lr * batch_size / 256;
 *                         steps_per_epoch = epoch_size / batch_size (integer division);
 *                         warmup_steps = warmup_epochs * steps_per_epoch;
 *                         s < warmup_steps: lr = rescaled * s / warmup_steps
 *                         else PiecewiseConstant(steps_per_epoch * boundaries, rescaled * multipliers)(s)
 *   The linear scaling rule is in both: by the number of ranks in the first (as the tutorial:
 *   initial_learning_rate = base_learning_rate * num_ranks), by the global batch size in the
 *   second (batch_size / 256). */
#include "optimizers/schedule.h"

#include "core/core.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef enum sched_kind {
    S_EXPONENTIAL,
    S_PIECEWISE,
    S_POLYNOMIAL,
    S_COSINE,
    S_INVERSE_TIME,
    S_EXP_WARMUP,
    S_PIECEWISE_WARMUP,
} sched_kind;

struct tnt_lr_schedule {
    sched_kind kind;
    double initial;      /* initial learning rate (after any scaling) */
    double decay_steps;  /* > 0 */
    double decay_rate;   /* exponential / inverse time */
    bool staircase;
    double end_lr, power; /* polynomial */
    bool cycle;
    double alpha;          /* cosine */
    bool has_warmup_target; /* cosine (Keras: warmup_target is not None) */
    double warmup_target;
    double warmup_steps;  /* cosine, warm-up wrappers */
    double warmup_rate;   /* exp decay with warm-up */
    int n_boundaries;     /* piecewise: boundaries[n], values[n + 1] */
    double *boundaries;
    double *values;
};

static tnt_lr_schedule *sched_new(sched_kind kind) {
    tnt_lr_schedule *s = tnt__calloc(1, sizeof *s);
    if (s) s->kind = kind;
    return s;
}

void tnt_lr_schedule_free(tnt_lr_schedule *s) {
    if (!s) return;
    free(s->boundaries);
    free(s->values);
    free(s);
}

static bool check_lr(const char *who, const char *field, float v) {
    if (!isfinite(v) || v < 0) {
        tnt__error(TNT_ERR_ARG, "%s: %s %g is invalid: expected a finite value >= 0", who, field, (double)v);
        return false;
    }
    return true;
}

static bool check_steps(const char *who, const char *field, int64_t v) {
    if (v <= 0) {
        tnt__error(TNT_ERR_ARG, "%s: %s %lld is invalid: expected > 0", who, field, (long long)v);
        return false;
    }
    return true;
}

static bool check_finite(const char *who, const char *field, float v) {
    if (!isfinite(v)) {
        tnt__error(TNT_ERR_ARG, "%s: %s %g is invalid: expected a finite value", who, field, (double)v);
        return false;
    }
    return true;
}

tnt_lr_schedule *tnt_exponential_decay(float initial, int64_t decay_steps, float decay_rate, bool staircase) {
    const char *who = "ExponentialDecay";
    if (!check_lr(who, "initial_learning_rate", initial) || !check_steps(who, "decay_steps", decay_steps) ||
        !check_lr(who, "decay_rate", decay_rate))
        return NULL;
    tnt_lr_schedule *s = sched_new(S_EXPONENTIAL);
    if (!s) return NULL;
    s->initial = initial, s->decay_steps = (double)decay_steps, s->decay_rate = decay_rate;
    s->staircase = staircase;
    return s;
}

tnt_lr_schedule *tnt_inverse_time_decay(float initial, int64_t decay_steps, float decay_rate, bool staircase) {
    const char *who = "InverseTimeDecay";
    if (!check_lr(who, "initial_learning_rate", initial) || !check_steps(who, "decay_steps", decay_steps) ||
        !check_lr(who, "decay_rate", decay_rate))
        return NULL;
    tnt_lr_schedule *s = sched_new(S_INVERSE_TIME);
    if (!s) return NULL;
    s->initial = initial, s->decay_steps = (double)decay_steps, s->decay_rate = decay_rate;
    s->staircase = staircase;
    return s;
}

tnt_lr_schedule *tnt_polynomial_decay(float initial, int64_t decay_steps, float end_lr, float power, bool cycle) {
    const char *who = "PolynomialDecay";
    if (!check_lr(who, "initial_learning_rate", initial) || !check_steps(who, "decay_steps", decay_steps) ||
        !check_lr(who, "end_learning_rate", end_lr) || !check_lr(who, "power", power))
        return NULL;
    tnt_lr_schedule *s = sched_new(S_POLYNOMIAL);
    if (!s) return NULL;
    s->initial = initial, s->decay_steps = (double)decay_steps, s->end_lr = end_lr, s->power = power;
    s->cycle = cycle;
    return s;
}

tnt_lr_schedule *tnt_cosine_decay(float initial, int64_t decay_steps, float alpha) {
    const char *who = "CosineDecay";
    if (!check_lr(who, "initial_learning_rate", initial) || !check_steps(who, "decay_steps", decay_steps) ||
        !check_finite(who, "alpha", alpha))
        return NULL;
    tnt_lr_schedule *s = sched_new(S_COSINE);
    if (!s) return NULL;
    s->initial = initial, s->decay_steps = (double)decay_steps, s->alpha = alpha;
    return s;
}

tnt_lr_schedule *tnt_cosine_decay_warmup(float initial, int64_t decay_steps, float alpha, float warmup_target,
                                         int64_t warmup_steps) {
    const char *who = "CosineDecay";
    if (!check_lr(who, "warmup_target", warmup_target)) return NULL;
    if (warmup_steps < 0) {
        tnt__error(TNT_ERR_ARG, "%s: warmup_steps %lld is invalid: expected >= 0", who, (long long)warmup_steps);
        return NULL;
    }
    tnt_lr_schedule *s = tnt_cosine_decay(initial, decay_steps, alpha);
    if (!s) return NULL;
    s->has_warmup_target = true, s->warmup_target = warmup_target, s->warmup_steps = (double)warmup_steps;
    return s;
}

/* Validates boundaries/values of a piecewise schedule and copies them as doubles, the boundaries
 * multiplied by scale_b and the values by scale_v. */
static bool set_pieces(tnt_lr_schedule *s, const char *who, const char *bname, const char *vname,
                       const int64_t *boundaries, const float *values, int n, double scale_b, double scale_v) {
    if (n < 0) {
        tnt__error(TNT_ERR_ARG, "%s: n_boundaries %d is invalid: expected >= 0 (%s has n_boundaries + 1 entries)",
                   who, n, vname);
        return false;
    }
    if ((n > 0 && !boundaries) || !values) {
        tnt__error(TNT_ERR_ARG, "%s: %s is NULL", who, !values ? vname : bname);
        return false;
    }
    for (int i = 0; i < n; i++)
        if (i > 0 && boundaries[i] <= boundaries[i - 1]) {
            tnt__error(TNT_ERR_ARG, "%s: %s must be strictly increasing: %s[%d] = %lld after %s[%d] = %lld", who,
                       bname, bname, i, (long long)boundaries[i], bname, i - 1, (long long)boundaries[i - 1]);
            return false;
        }
    for (int i = 0; i <= n; i++)
        if (!isfinite(values[i]) || values[i] < 0) {
            tnt__error(TNT_ERR_ARG, "%s: %s[%d] = %g is invalid: expected a finite value >= 0", who, vname, i,
                       (double)values[i]);
            return false;
        }
    s->boundaries = tnt__calloc((size_t)n + 1, sizeof *s->boundaries);
    s->values = tnt__calloc((size_t)n + 1, sizeof *s->values);
    if (!s->boundaries || !s->values) return false;
    for (int i = 0; i < n; i++) s->boundaries[i] = (double)boundaries[i] * scale_b;
    for (int i = 0; i <= n; i++) s->values[i] = (double)values[i] * scale_v;
    s->n_boundaries = n;
    return true;
}

tnt_lr_schedule *tnt_piecewise_constant_decay(const int64_t *boundaries, const float *values, int n_boundaries) {
    tnt_lr_schedule *s = sched_new(S_PIECEWISE);
    if (!s) return NULL;
    if (!set_pieces(s, "PiecewiseConstantDecay", "boundaries", "values", boundaries, values, n_boundaries, 1.0,
                    1.0)) {
        tnt_lr_schedule_free(s);
        return NULL;
    }
    s->initial = s->values[0];
    return s;
}

tnt_lr_schedule *tnt_exp_decay_with_warmup(float base_lr, int num_ranks, int64_t decay_steps, float decay_rate,
                                           bool staircase, int64_t warmup_steps, float warmup_rate) {
    const char *who = "ExpDecayWithWarmupSchedule";
    if (num_ranks < 0) {
        tnt__error(TNT_ERR_ARG, "%s: num_ranks %d is invalid: expected > 0, or 0 for tnt_get_size()", who,
                   num_ranks);
        return NULL;
    }
    if (num_ranks == 0) num_ranks = tnt_get_size();
    if (!check_lr(who, "base_learning_rate", base_lr) || !check_steps(who, "decay_steps", decay_steps) ||
        !check_lr(who, "decay_rate", decay_rate) || !check_steps(who, "warmup_steps", warmup_steps) ||
        !check_lr(who, "warmup_rate", warmup_rate))
        return NULL;
    tnt_lr_schedule *s = sched_new(S_EXP_WARMUP);
    if (!s) return NULL;
    s->initial = (double)base_lr * num_ranks; /* linear scaling rule */
    s->decay_steps = (double)decay_steps, s->decay_rate = decay_rate, s->staircase = staircase;
    s->warmup_steps = (double)warmup_steps, s->warmup_rate = warmup_rate;
    return s;
}

tnt_lr_schedule *tnt_piecewise_constant_decay_with_warmup(float base_lr, int64_t batch_size, int64_t epoch_size,
                                                          int64_t warmup_epochs, const int64_t *boundaries,
                                                          const float *multipliers, int n_boundaries) {
    const char *who = "PiecewiseConstantDecayWithWarmup";
    if (!check_lr(who, "base_learning_rate", base_lr) || !check_steps(who, "batch_size", batch_size)) return NULL;
    if (epoch_size < batch_size) {
        tnt__error(TNT_ERR_ARG, "%s: epoch_size %lld is invalid: expected >= batch_size %lld (one step per epoch)",
                   who, (long long)epoch_size, (long long)batch_size);
        return NULL;
    }
    if (warmup_epochs < 0) {
        tnt__error(TNT_ERR_ARG, "%s: warmup_epochs %lld is invalid: expected >= 0", who, (long long)warmup_epochs);
        return NULL;
    }
    const int64_t steps_per_epoch = epoch_size / batch_size;
    const double rescaled = (double)base_lr * (double)batch_size / 256.0;
    tnt_lr_schedule *s = sched_new(S_PIECEWISE_WARMUP);
    if (!s) return NULL;
    if (!set_pieces(s, who, "boundaries", "multipliers", boundaries, multipliers, n_boundaries,
                    (double)steps_per_epoch, rescaled)) {
        tnt_lr_schedule_free(s);
        return NULL;
    }
    s->initial = rescaled;
    s->warmup_steps = (double)(warmup_epochs * steps_per_epoch);
    return s;
}

static double piecewise(const tnt_lr_schedule *s, double x) {
    for (int i = 0; i < s->n_boundaries; i++)
        if (x <= s->boundaries[i]) return s->values[i];
    return s->values[s->n_boundaries];
}

static double exp_decay(const tnt_lr_schedule *s, double x) {
    double p = x / s->decay_steps;
    if (s->staircase) p = floor(p);
    return s->initial * pow(s->decay_rate, p);
}

static double cosine(double from, double x, double decay_steps, double alpha) {
    const double pi = 3.14159265358979323846;
    double cosine_decayed = 0.5 * (1.0 + cos(pi * (x / decay_steps)));
    return from * ((1.0 - alpha) * cosine_decayed + alpha);
}

double tnt__lr_schedule_eval(const tnt_lr_schedule *s, int64_t step) {
    const double x = (double)step;
    switch (s->kind) {
    case S_EXPONENTIAL: return exp_decay(s, x);
    case S_PIECEWISE: return piecewise(s, x);
    case S_POLYNOMIAL: {
        double xs = x, d = s->decay_steps;
        if (s->cycle) {
            double mult = x == 0 ? 1.0 : ceil(x / d); /* Keras: step 0 uses multiplier 1 */
            d *= mult;
        } else if (xs > d) {
            xs = d;
        }
        return (s->initial - s->end_lr) * pow(1.0 - xs / d, s->power) + s->end_lr;
    }
    case S_COSINE: {
        if (!s->has_warmup_target) return cosine(s->initial, fmin(x, s->decay_steps), s->decay_steps, s->alpha);
        double xs = fmin(x, s->decay_steps + s->warmup_steps);
        if (xs < s->warmup_steps)
            return (s->warmup_target - s->initial) * (xs / s->warmup_steps) + s->initial;
        return cosine(s->warmup_target, xs - s->warmup_steps, s->decay_steps, s->alpha);
    }
    case S_INVERSE_TIME: {
        double p = x / s->decay_steps;
        if (s->staircase) p = floor(p);
        return s->initial / (1.0 + s->decay_rate * p);
    }
    case S_EXP_WARMUP:
        if (x <= s->warmup_steps) return s->initial * (s->warmup_rate * (x / s->warmup_steps));
        return exp_decay(s, x);
    case S_PIECEWISE_WARMUP:
        if (x < s->warmup_steps) return s->initial * (x / s->warmup_steps);
        return piecewise(s, x);
    }
    return NAN;
}

float tnt_lr_schedule_value(const tnt_lr_schedule *s, int64_t step) {
    if (!s) {
        tnt__error(TNT_ERR_ARG, "lr_schedule_value: schedule is NULL");
        return NAN;
    }
    if (step < 0) {
        tnt__error(TNT_ERR_ARG, "lr_schedule_value: step %lld is invalid: expected >= 0", (long long)step);
        return NAN;
    }
    return (float)tnt__lr_schedule_eval(s, step);
}

/* optimizer_gpu.c: the optimizers' update on the device (GPU-DESIGN.md 4.7). The per-step
 * scalars (the schedule's rate, bias corrections, the decoupled weight decay) are computed on the
 * host exactly as tnt__optimizer_apply computes them; one kernel of gpu/kernels/ then makes the
 * elementwise pass over the device's flat parameter, gradient and slot buffers, in the operation
 * order of optimizer.c's loops (so the emulated device gives the CPU's bits). */
#include "optimizers/optimizer.h"

#include "core/core.h"
#include "gpu/gpu.h"
#include "optimizers/schedule.h"

#include <math.h>

#define BLOCK 256

bool tnt__optimizer_gpu_supported(const tnt_optimizer *o, const char **why) {
    const char *r = NULL;
    if (!o) r = "no optimizer"; /* every optimizer kind has a device update */
    if (why) *why = r;
    return r == NULL;
}

void tnt__optimizer_gpu_free(tnt_optimizer *o) {
    if (!o) return;
    for (int k = 0; k < TNT__OPT_MAX_SLOTS; k++) {
        tnt__gpu_free(o->d_slots[k]);
        o->d_slots[k] = NULL;
    }
    tnt__gpu_free(o->d_clip_buf);
    o->d_clip_buf = NULL;
}

static tnt_status copy_slots(tnt_optimizer *o, bool up) {
    size_t bytes = (size_t)(o->n_params > 0 ? o->n_params : 0) * sizeof(float);
    for (int k = 0; k < o->n_slots && bytes; k++) {
        if (!o->d_slots[k]) continue;
        tnt_status s = up ? tnt__gpu_copy_to_device(o->d_slots[k], o->slots[k], bytes, TNT__GPU_COMPUTE)
                          : tnt__gpu_copy_to_host(o->slots[k], o->d_slots[k], bytes, TNT__GPU_COMPUTE);
        if (s != TNT_OK) return tnt__error_prefix(s, "optimizer %s: slot \"%s\": ", o->name, o->slot_names[k]);
    }
    return up ? TNT_OK : tnt__gpu_sync(TNT__GPU_COMPUTE);
}

tnt_status tnt__optimizer_gpu_upload(tnt_optimizer *o) { return o ? copy_slots(o, true) : TNT_OK; }
tnt_status tnt__optimizer_gpu_download(tnt_optimizer *o) { return o ? copy_slots(o, false) : TNT_OK; }

tnt_status tnt__optimizer_gpu_prepare(tnt_optimizer *o) {
    if (!o || o->n_params < 0) return tnt__error(TNT_ERR_STATE, "optimizer: device slots before prepare");
    size_t bytes = (size_t)(o->n_params ? o->n_params : 1) * sizeof(float);
    for (int k = 0; k < o->n_slots; k++)
        if (!o->d_slots[k] && !(o->d_slots[k] = tnt__gpu_malloc(bytes))) {
            tnt__optimizer_gpu_free(o);
            return tnt__error_prefix(TNT_ERR_NOMEM, "optimizer %s: device slot \"%s\": ", o->name, o->slot_names[k]);
        }
    if (o->clipvalue > 0 && !o->d_clip_buf && !(o->d_clip_buf = tnt__gpu_malloc(bytes))) {
        tnt__optimizer_gpu_free(o);
        return tnt__error_prefix(TNT_ERR_NOMEM, "optimizer %s: device buffer of clipvalue: ", o->name);
    }
    return copy_slots(o, true);
}

tnt_status tnt__optimizer_apply_gpu(tnt_optimizer *o, float *d_params, const float *d_grads, int64_t begin,
                                    int64_t end) {
    const char *why;
    if (!tnt__optimizer_gpu_supported(o, &why)) return tnt__error(TNT_ERR_UNSUPPORTED, "optimizer %s: %s", o ? o->name : "", why);
    if (o->n_params < 0) return tnt__error(TNT_ERR_STATE, "optimizer %s: apply before prepare", o->name);
    if (begin < 0 || end < begin || end > o->n_params)
        return tnt__error(TNT_ERR_ARG, "optimizer %s: slice [%lld, %lld) is not within [0, %lld)", o->name,
                          (long long)begin, (long long)end, (long long)o->n_params);
    if (o->schedule && o->schedule_step != o->iterations) { /* as tnt__optimizer_apply */
        o->learning_rate = (float)tnt__lr_schedule_eval(o->schedule, o->iterations);
        o->schedule_step = o->iterations;
    }
    long long n = end - begin;
    if (n == 0) return TNT_OK;
    for (int k = 0; k < o->n_slots; k++)
        if (!o->d_slots[k]) return tnt__error(TNT_ERR_STATE, "optimizer %s: no device slots (prepare first)", o->name);
    float *p = d_params + begin;
    const float *g = d_grads + begin;
    unsigned grid = tnt__gpu_grid_for(n, BLOCK);
    if (o->clipvalue > 0) { /* Keras's clipvalue, as tnt__optimizer_apply: the gradient clipped aside */
        if (!o->d_clip_buf) return tnt__error(TNT_ERR_STATE, "optimizer %s: no device buffer for clipvalue", o->name);
        float *cg = o->d_clip_buf + begin, c = o->clipvalue;
        void *args[] = {&g, &cg, &n, &c};
        tnt_status s = tnt__gpu_launch("tnt_k_clip", grid, BLOCK, 0, args);
        if (s != TNT_OK) return s;
        g = cg;
    }
    float *s[TNT__OPT_MAX_SLOTS] = {NULL, NULL, NULL};
    for (int k = 0; k < o->n_slots; k++) s[k] = o->d_slots[k] + begin;
    const double lr = o->learning_rate, t = (double)(o->iterations + 1);
    float wdl = (float)((double)o->weight_decay * lr), eps = o->epsilon, flr = (float)lr;
    switch (o->kind) {
    case TNT__OPT_SGD:
        if (o->momentum > 0) {
            float mom = o->momentum;
            int nesterov = o->nesterov;
            void *args[] = {&p, &g, &s[0], &n, &flr, &mom, &nesterov, &wdl};
            return tnt__gpu_launch("tnt_k_sgd_momentum", grid, BLOCK, 0, args);
        } else {
            void *args[] = {&p, &g, &n, &flr, &wdl};
            return tnt__gpu_launch("tnt_k_sgd", grid, BLOCK, 0, args);
        }
    case TNT__OPT_ADAM: {
        float alpha = (float)(lr * sqrt(1.0 - pow(o->beta_2, t)) / (1.0 - pow(o->beta_1, t)));
        float c1 = 1.0f - o->beta_1, c2 = 1.0f - o->beta_2;
        float *vhat = o->amsgrad ? s[2] : NULL;
        void *args[] = {&p, &g, &s[0], &s[1], &vhat, &n, &c1, &c2, &alpha, &eps, &wdl};
        return tnt__gpu_launch("tnt_k_adam", grid, BLOCK, 0, args);
    }
    case TNT__OPT_RMSPROP: {
        int k = 1;
        float *mo = o->momentum > 0 ? s[k++] : NULL;
        float *a = o->centered ? s[k++] : NULL;
        float rho = o->rho, mom = o->momentum;
        void *args[] = {&p, &g, &s[0], &mo, &a, &n, &flr, &rho, &mom, &eps, &wdl};
        return tnt__gpu_launch("tnt_k_rmsprop", grid, BLOCK, 0, args);
    }
    case TNT__OPT_ADAGRAD: {
        void *args[] = {&p, &g, &s[0], &n, &flr, &eps, &wdl};
        return tnt__gpu_launch("tnt_k_adagrad", grid, BLOCK, 0, args);
    }
    case TNT__OPT_ADADELTA: {
        float rho = o->rho;
        void *args[] = {&p, &g, &s[0], &s[1], &n, &flr, &rho, &eps, &wdl};
        return tnt__gpu_launch("tnt_k_adadelta", grid, BLOCK, 0, args);
    }
    case TNT__OPT_ADAMAX: {
        float c1 = 1.0f - o->beta_1, b2 = o->beta_2, step = (float)(lr / (1.0 - pow(o->beta_1, t)));
        void *args[] = {&p, &g, &s[0], &s[1], &n, &c1, &b2, &step, &eps, &wdl};
        return tnt__gpu_launch("tnt_k_adamax", grid, BLOCK, 0, args);
    }
    case TNT__OPT_NADAM: {
        double cm, cg, cv;
        tnt__optimizer_nadam_coeffs(o, &cm, &cg, &cv);
        float c1 = 1.0f - o->beta_1, c2 = 1.0f - o->beta_2, fcm = (float)cm, fcg = (float)cg, fcv = (float)cv;
        void *args[] = {&p, &g, &s[0], &s[1], &n, &c1, &c2, &fcm, &fcg, &fcv, &flr, &eps, &wdl};
        return tnt__gpu_launch("tnt_k_nadam", grid, BLOCK, 0, args);
    }
    }
    return tnt__error(TNT_ERR_UNSUPPORTED, "optimizer %s has no device path", o->name);
}

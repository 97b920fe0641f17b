/* device_loss.c: the loss gradient on the device (device_loss.h). */
#include "training/device_loss.h"

#include "core/config.h"
#include "gpu/gpu.h"
#include "model/device.h"
#include "objectives/loss.h"

int64_t tnt__device_loss_launches = 0;

static bool kind_on_device(tnt_loss_kind kind) {
    return kind == TNT_SPARSE_CATEGORICAL_CROSSENTROPY || kind == TNT_CATEGORICAL_CROSSENTROPY ||
           kind == TNT_BINARY_CROSSENTROPY || kind == TNT_MEAN_SQUARED_ERROR || kind == TNT_MEAN_ABSOLUTE_ERROR;
}

bool tnt__device_loss_applies(const tnt_model *m, const tnt__plan *p, bool weighted) {
    if (!p->device || !m->dev || weighted || !tnt__config_get()->gpu_device_loss) return false;
    const tnt__loss_opts *o = m->loss_opts;
    if (o && (o->has_ignore_class || o->label_smoothing != 0)) return false;
    for (int k = 0; k < m->n_outputs; k++)
        if (m->traced_loss[k] || !kind_on_device(m->output_loss[k])) return false;
    return true;
}

/* Output k's rows and positions: Keras reduces over the last axis, then averages the positions */
static void output_rows(const tnt_model *m, int k, int64_t *positions, int64_t *c) {
    tnt_shape os = m->tensor_shape[m->outputs[k]];
    int64_t numel = tnt_shape_numel(os);
    *positions = os.ndim > 1 ? numel / os.dim[os.ndim - 1] : 1;
    *c = numel / *positions;
}

static float *arena_at(tnt_model *m, size_t off) { return (float *)((char *)m->dev->arena + off); }

tnt_status tnt__device_loss_grad(tnt_model *m, tnt__plan *p, const tnt_batch *b, double inv_batch) {
    long long per = 0; /* labels per sample: a class per position for sparse labels, else a value per output value */
    for (int k = 0; k < m->n_outputs; k++) {
        int64_t positions, c;
        output_rows(m, k, &positions, &c);
        per += m->output_loss[k] == TNT_SPARSE_CATEGORICAL_CROSSENTROPY ? positions : positions * c;
    }
    const size_t bytes = (size_t)(b->n * per) * sizeof(float);
    /* the page-locked copy is written again only once the last step's upload of it is done */
    tnt_status s = p->labels_pending ? tnt__gpu_event_sync(p->labels_sent) : TNT_OK;
    p->labels_pending = false;
    if (s != TNT_OK) return s;
    memcpy(p->host_labels, b->y.data, bytes);
    float *labels = arena_at(m, p->labels_offset);
    if ((s = tnt__gpu_copy_to_device(labels, p->host_labels, bytes, TNT__GPU_COMPUTE)) != TNT_OK ||
        (s = tnt__gpu_event_record(p->labels_sent, TNT__GPU_COMPUTE)) != TNT_OK)
        return s;
    p->labels_pending = true;
    tnt__device_loss_launches++;
    long long col = 0;
    for (int k = 0; k < m->n_outputs && s == TNT_OK; k++) {
        int64_t positions, c;
        output_rows(m, k, &positions, &c);
        const int t = m->outputs[k];
        int kind = (int)m->output_loss[k], logits = m->from_logits || m->fused_output_loss[k];
        const float *x = arena_at(m, m->fused_output_loss[k] ? p->preact_offset[k] : p->act_offset[t]);
        float *d = arena_at(m, p->grad_offset[t]);
        long long rows = b->n * positions, cols = c, pos = positions;
        /* as fit.c's host loss: the loss weight times the mean over the batch and the positions */
        double scale = (double)m->loss_weights[k] * (inv_batch / (double)positions);
        void *args[] = {&kind, &logits, &x, &labels, &d, &rows, &cols, &pos, &per, &col, &scale};
        if (kind == TNT_SPARSE_CATEGORICAL_CROSSENTROPY || kind == TNT_CATEGORICAL_CROSSENTROPY)
            s = tnt__gpu_launch("tnt_k_loss_grad_rows", tnt__gpu_grid_for(rows, 1), c > 64 ? 256 : 32, 0, args);
        else
            s = tnt__gpu_launch("tnt_k_loss_grad_elems", tnt__gpu_grid_for(rows * cols, 256), 256, 0, args);
        col += kind == TNT_SPARSE_CATEGORICAL_CROSSENTROPY ? positions : positions * c;
    }
    return s;
}

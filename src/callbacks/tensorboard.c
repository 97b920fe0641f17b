/* tensorboard.c: the TensorBoard callback, over the event-file writer in io/tfevents.c. */
#include "io/tfevents.h"
#include "callbacks/callbacks.h"
#include "core/config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct tensorboard {
    char dir[3072];
    int64_t update_freq, batches; /* batches: global count over the fit, the batch scalars' step */
    int64_t histogram_freq;       /* epochs between the weights' histograms; 0: none */
    tnt__tfevents *train, *validation;
} tensorboard;

static void close_writers(tensorboard *tb) {
    tnt__tfevents_close(tb->train);
    tnt__tfevents_close(tb->validation);
    tb->train = tb->validation = NULL;
}

static tnt_status tb_train_begin(tnt_model *m, const tnt_logs *logs, void *user) {
    (void)m, (void)logs;
    tensorboard *tb = user;
    char sub[3200];
    close_writers(tb);
    tb->batches = 0;
    snprintf(sub, sizeof sub, "%s/train", tb->dir);
    if (!(tb->train = tnt__tfevents_open(sub, NULL))) return TNT_ERR_IO;
    snprintf(sub, sizeof sub, "%s/validation", tb->dir);
    if (!(tb->validation = tnt__tfevents_open(sub, NULL))) return TNT_ERR_IO;
    return TNT_OK;
}

/* Writes every log as prefix + name; "val_" figures go to the validation writer. */
static tnt_status write_logs(tensorboard *tb, const char *prefix, const tnt_logs *logs, int64_t step, bool split) {
    for (int i = 0; i < logs->n; i++) {
        const char *name = logs->names[i];
        bool val = split && !strncmp(name, "val_", 4);
        char tag[TNT_LOG_NAME_MAX + 16];
        snprintf(tag, sizeof tag, "%s%s", prefix, val ? name + 4 : name);
        tnt_status s = tnt__tfevents_scalar(val ? tb->validation : tb->train, tag, (float)logs->values[i], step);
        if (s != TNT_OK) return s;
    }
    return TNT_OK;
}

/* Keras's _log_weights: a histogram of every weight, tagged "<layer>/<weight>_0/histogram". The
 * values come from a copy (tnt_get_weights), so a device's weights stay where they are. */
static tnt_status write_histograms(tensorboard *tb, tnt_model *m, int epoch) {
    int nw = tnt_model_num_weights(m);
    int64_t total = 0;
    tnt_shape shape;
    for (int i = 0; i < nw; i++) {
        tnt_status s = tnt_model_weight(m, i, NULL, &shape, NULL);
        if (s != TNT_OK) return s;
        total += tnt_shape_numel(shape);
    }
    float *all = tnt__calloc((size_t)(total > 0 ? total : 1), sizeof *all);
    if (!all) return TNT_ERR_NOMEM;
    tnt_status s = tnt_get_weights(m, all, total);
    int64_t at = 0;
    for (int i = 0; i < nw && s == TNT_OK; i++) {
        const char *name;
        if ((s = tnt_model_weight(m, i, &name, &shape, NULL)) != TNT_OK) break;
        char tag[256]; /* "layer/weight:0" is at most 2 names of 64 */
        snprintf(tag, sizeof tag, "%s/histogram", name);
        for (char *c = tag; *c; c++)
            if (*c == ':') *c = '_';
        int64_t n = tnt_shape_numel(shape);
        s = tnt__tfevents_histogram(tb->train, tag, all + at, n, epoch);
        at += n;
    }
    free(all);
    return s;
}

static tnt_status tb_epoch_end(tnt_model *m, int epoch, const tnt_logs *logs, void *user) {
    tensorboard *tb = user;
    tnt_status s = write_logs(tb, "epoch_", logs, epoch, true);
    if (s == TNT_OK && tnt_model_optimizer(m))
        s = tnt__tfevents_scalar(tb->train, "epoch_learning_rate", tnt_optimizer_get_lr(tnt_model_optimizer(m)), epoch);
    if (s == TNT_OK && tb->histogram_freq > 0 && epoch % tb->histogram_freq == 0) s = write_histograms(tb, m, epoch);
    return s;
}

static tnt_status tb_batch_end(tnt_model *m, int64_t batch, const tnt_logs *logs, void *user) {
    (void)m, (void)batch;
    tensorboard *tb = user;
    tb->batches++;
    return tb->batches % tb->update_freq ? TNT_OK : write_logs(tb, "batch_", logs, tb->batches, false);
}

static tnt_status tb_train_end(tnt_model *m, const tnt_logs *logs, void *user) {
    (void)m, (void)logs;
    close_writers(user);
    return TNT_OK;
}

static void tb_destroy(void *user) {
    close_writers(user);
    free(user);
}

tnt_callback tnt_tensorboard(const char *log_dir, const tnt_tensorboard_opts *opts) {
    tnt_tensorboard_opts o = opts ? *opts : (tnt_tensorboard_opts){0};
    if (!log_dir || !log_dir[0] || strlen(log_dir) > 2048) {
        tnt__error(TNT_ERR_ARG, "TensorBoard: log_dir %s", log_dir ? "is empty or too long" : "is NULL");
        return tnt__callback_failed(TNT_ERR_ARG);
    }
    if (o.histogram_freq < 0) {
        tnt__error(TNT_ERR_ARG, "TensorBoard: histogram_freq %lld (expected 0, or N > 0 epochs)",
                   (long long)o.histogram_freq);
        return tnt__callback_failed(TNT_ERR_ARG);
    }
    if (o.update_freq < 0) {
        tnt__error(TNT_ERR_ARG, "TensorBoard: update_freq %lld (expected 0 for epochs, or N > 0 batches)",
                   (long long)o.update_freq);
        return tnt__callback_failed(TNT_ERR_ARG);
    }
    tensorboard *tb = tnt__calloc(1, sizeof *tb);
    if (!tb) return tnt__callback_failed(TNT_ERR_NOMEM);
    bool every_rank = tnt__config_get()->tensorboard_on_all_devices;
    if (every_rank) snprintf(tb->dir, sizeof tb->dir, "%s/rank_%d", log_dir, tnt_get_rank());
    else snprintf(tb->dir, sizeof tb->dir, "%s", log_dir);
    tb->update_freq = o.update_freq;
    tb->histogram_freq = o.histogram_freq;
    return (tnt_callback){
        .user = tb,
        .on_train_begin = tb_train_begin,
        .on_epoch_end = tb_epoch_end,
        .on_train_batch_end = o.update_freq > 0 ? tb_batch_end : NULL,
        .on_train_end = tb_train_end,
        .destroy = tb_destroy,
        .master_only = !every_rank,
    };
}

/* tarantella_callbacks.h: Keras's built-in callbacks (included by tarantella.h, after
 * tnt_callback; not meant to be included on its own). */
#ifndef TARANTELLA_CALLBACKS_H
#define TARANTELLA_CALLBACKS_H

/* ---------------------------------------------------------------------------------------------
 * Keras's built-in callbacks (keras.callbacks, Keras 2.11 behaviour). Each constructor returns a
 * callback whose user holds its state; pass it in tnt_fit_opts.callbacks and free it with
 * tnt_callback_free after the last fit. A callback may serve several fits: on_train_begin resets
 * its state, as Keras's. Options may be NULL; zero fields mean the Keras default.
 * Bad arguments: the returned callback has user == NULL (tnt_last_error() says why) and makes
 * fit fail with the same status. LambdaCallback is tnt_callback itself: fill in the pointers.
 * Distributed models: the logs that fit passes are exact global figures, identical on every
 * rank, so EarlyStopping, ReduceLROnPlateau and TerminateOnNaN decide the same on every rank (and
 * fit agrees on stopping). CSVLogger runs on the master only (master_only). ModelCheckpoint runs
 * on every rank, because tnt_save_weights must be called by all ranks (the master writes, then
 * all meet at a barrier).
 * ------------------------------------------------------------------------------------------- */
/* Calls cb->destroy(cb->user) and clears *cb; NULL or an already freed callback is a no-op. */
TNT_API void tnt_callback_free(tnt_callback *cb);

/* auto: the direction follows the monitored name, as each Keras callback decides it
 * (EarlyStopping: a name ending in "acc", "accuracy" or "auc" is maximized; ReduceLROnPlateau and
 * ModelCheckpoint: a name containing "acc"). */
typedef enum tnt_monitor_mode { TNT_MODE_AUTO = 0, TNT_MODE_MIN, TNT_MODE_MAX } tnt_monitor_mode;

typedef struct tnt_early_stopping_opts {
    const char *monitor; /* NULL = "val_loss" */
    double min_delta;    /* an improvement must beat the best by more than |min_delta| */
    int patience;        /* epochs without improvement before stopping (default 0) */
    int verbose;         /* 1: "Epoch 00005: early stopping" (master only) */
    tnt_monitor_mode mode;
    bool has_baseline;   /* baseline: training stops unless the monitored value beats it */
    double baseline;
    bool restore_best_weights; /* on stopping, the weights of the best epoch are set back */
    int start_from_epoch;      /* epochs (0-based) before this one are not monitored */
} tnt_early_stopping_opts;
TNT_API tnt_callback tnt_early_stopping(const tnt_early_stopping_opts *opts);
/* Keras's stopped_epoch: the 0-based epoch at which an EarlyStopping callback stopped the last
 * fit (0 when it did not stop); -1 for another kind of callback. */
TNT_API int tnt_early_stopping_stopped_epoch(const tnt_callback *cb);
/* The best monitored value seen in the last fit (+-inf before any), NAN for another callback. */
TNT_API double tnt_early_stopping_best(const tnt_callback *cb);

typedef struct tnt_reduce_lr_opts {
    const char *monitor; /* NULL = "val_loss" */
    double factor;       /* new_lr = lr * factor; 0 = 0.1; must be < 1 */
    int patience;        /* 0 = 10; a negative value asks for 0 */
    int verbose;
    tnt_monitor_mode mode;
    double min_delta;    /* 0 = 1e-4; a negative value asks for 0 */
    int cooldown;        /* epochs to wait after a reduction before counting again */
    double min_lr;       /* lower bound of the rate */
} tnt_reduce_lr_opts;
/* ReduceLROnPlateau: multiplies the optimizer's learning rate by factor once the monitored value
 * has not improved for patience epochs. */
TNT_API tnt_callback tnt_reduce_lr_on_plateau(const tnt_reduce_lr_opts *opts);

/* LearningRateScheduler: at the beginning of each epoch (0-based) the rate becomes
 * schedule(epoch, current lr, user). A rate that is not finite and >= 0 fails fit, as does an
 * optimizer driven by a tnt_lr_schedule. verbose 1 prints the new rate (master only). */
typedef float (*tnt_lr_scheduler_fn)(int epoch, float lr, void *user);
TNT_API tnt_callback tnt_learning_rate_scheduler(tnt_lr_scheduler_fn schedule, void *user, int verbose);

/* TerminateOnNaN: stops training when the loss of a batch is NaN or infinite ("Batch 3: Invalid
 * loss, terminating training"); fit ends after that batch, as in Keras: the epoch's logs,
 * validation, epoch-end callbacks and History entry come from the batches run. */
TNT_API tnt_callback tnt_terminate_on_nan(void);

/* CSVLogger: one row per epoch, "epoch" then the logs' keys sorted alphabetically (the keys of the
 * first epoch), values as Python's str(float), lines ended by "\r\n" as Python's csv module
 * writes them; the file is flushed after each row. separator 0 = ','. append: rows go after an
 * existing file's contents, and the header is written only when the file is empty or absent.
 * Master only. */
TNT_API tnt_callback tnt_csv_logger(const char *filename, char separator, bool append);

typedef struct tnt_checkpoint_opts {
    const char *monitor;    /* NULL = "val_loss" */
    int verbose;
    bool save_best_only;    /* save only when the monitored value improves */
    bool save_weights_only; /* true: tnt_save_weights; false: the whole model (tnt_save_model:
                               architecture, weights, optimizer state; resumable) */
    tnt_monitor_mode mode;
    int64_t save_freq;      /* 0: at the end of every epoch ("epoch"); N > 0: every N batches */
    bool has_initial_value_threshold; /* save_best_only: the value to beat at first */
    double initial_value_threshold;
    bool save_all_devices;  /* passed to tnt_save_weights (tnt_save_opts) */
} tnt_checkpoint_opts;
/* ModelCheckpoint: saves the weights (tnt_save_weights, HDF5) or the whole model
 * (tnt_save_model, unless save_weights_only) to filepath, a Python format
 * template (see tnt_format_filepath). Runs on every rank; the master writes the file. */
TNT_API tnt_callback tnt_model_checkpoint(const char *filepath, const tnt_checkpoint_opts *opts);
/* ModelCheckpoint's file names, as Python's filepath.format(epoch=epoch, batch=batch, **logs):
 * fields {name} or {name:spec} with spec [0][width][.precision][d|f|e|g|%], and {{ }} for braces;
 * e.g. "ckpt-{epoch:02d}-{val_loss:.2f}.h5" -> "ckpt-03-0.52.h5". epoch (1-based, as in Keras's
 * names) and batch (1-based; < 0: absent) are integers, log values floats ({loss} alone gives
 * Python's str). An unknown name fails with TNT_ERR_ARG naming it; a name longer than size fails
 * with TNT_ERR_ARG. */
TNT_API tnt_status tnt_format_filepath(const char *tmpl, int epoch, int64_t batch, const tnt_logs *logs,
                                       char *buf, size_t size);

/* BackupAndRestore: the master writes backup_dir/backup.tnt (weights, optimizer state, epoch and
 * batch) atomically at each epoch end and, with save_freq N > 0, every N batches; a fit that
 * finds one resumes there on every rank, bitwise as the unbroken run on the same ranks (a backup
 * of another model is refused). delete_checkpoint: removed when fit ends without error. */
TNT_API tnt_callback tnt_backup_and_restore(const char *backup_dir, int64_t save_freq, bool delete_checkpoint);

/* Keras RemoteMonitor: at each epoch end, an HTTP POST of {"epoch": e, "loss": ..., ...} to
 * root + path (defaults "http://localhost:9000" and "/publish/epoch/end/"), as a form field
 * (field, default "data") or as a JSON body (send_as_json). Master only. A server that cannot
 * be reached gets a warning and training goes on, as in Keras. */
typedef struct tnt_remote_monitor_opts {
    const char *root, *path, *field;
    bool send_as_json;
    const char *const *headers; /* NULL-terminated "Name: value" lines, or NULL */
} tnt_remote_monitor_opts;
TNT_API tnt_callback tnt_remote_monitor(const tnt_remote_monitor_opts *opts);

/* Keras TensorBoard: event files under log_dir/train and log_dir/validation with the epoch
 * scalars ("epoch_loss", "epoch_accuracy", ...; validation figures without their "val_" prefix,
 * as Keras writes them) and "epoch_learning_rate"; with update_freq N > 0 also "batch_<name>"
 * every N batches (exact global figures, at the cost of a metrics allreduce per step). Written on
 * the master only, unless TNT_TENSORBOARD_ON_ALL_DEVICES=true: then every rank writes under
 * log_dir/rank_<r> (Tarantella's behaviour). No graph is written. */
typedef struct tnt_tensorboard_opts {
    int64_t update_freq;    /* 0: "epoch"; N > 0: batch scalars every N batches */
    int64_t histogram_freq; /* N > 0: every N epochs (from epoch 0) a histogram of every weight, under
                             * "<layer>/<weight>_0/histogram" in the train file (TensorFlow 2's
                             * histogram summaries, Keras's tags); 0: none */
} tnt_tensorboard_opts;
TNT_API tnt_callback tnt_tensorboard(const char *log_dir, const tnt_tensorboard_opts *opts);

#endif

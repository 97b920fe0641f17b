/* model.c: tarantella._tarantella.Model, a tnt_model handle: Keras JSON and files, weights as
 * NumPy arrays (model_weights.c), distribute, compile, fit, evaluate, predict. Long calls run without the GIL. */
#include "pytnt.h"

#include <stdio.h>
#include <stdlib.h>

/* ---- the handle ---------------------------------------------------------------------------- */

static void model_dealloc(pytnt_model *self) {
    tnt_model *m = self->m;
    self->m = NULL;
    if (m) {
        Py_BEGIN_ALLOW_THREADS
        tnt_model_free(m);
        Py_END_ALLOW_THREADS
    }
    Py_TYPE(self)->tp_free((PyObject *)self);
}

PyObject *pytnt_model_wrap(tnt_model *m) {
    if (!m) return pytnt_raise_last();
    pytnt_model *self = PyObject_New(pytnt_model, &pytnt_model_type);
    if (!self) {
        tnt_model_free(m);
        return NULL;
    }
    self->m = m;
    self->busy = 0;
    self->owner = 0;
    return (PyObject *)self;
}

/* A call on the model while fit, evaluate or predict runs: from the same thread (a callback)
 * anything but another fit (kind 1; evaluate and predict, kind 2, run between two steps as
 * Keras's callbacks may run them); from another thread nothing. */
int pytnt_model_enter(pytnt_model *self, int kind) {
    if (self->busy) {
        if (self->owner != PyThread_get_thread_ident())
            return PyErr_SetString(PyExc_RuntimeError, "the model is in use by fit, evaluate or predict on "
                                   "another thread"), 0;
        if (kind == 1)
            return PyErr_SetString(PyExc_RuntimeError, "fit and compile cannot run inside a callback or map "
                                   "function of a fit, evaluate or predict of the same model"), 0;
    }
    return 1;
}

PyObject *pytnt_model_from_json(PyObject *self, PyObject *args) {
    (void)self;
    const char *json;
    if (!PyArg_ParseTuple(args, "s", &json)) return NULL;
    tnt_model *m;
    Py_BEGIN_ALLOW_THREADS
    m = tnt_model_from_json(json);
    Py_END_ALLOW_THREADS
    return pytnt_model_wrap(m);
}

PyObject *pytnt_load_model(PyObject *self, PyObject *args, PyObject *kw) {
    (void)self;
    static char *kwlist[] = {"path", "compile", NULL};
    PyObject *path;
    int compile = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O&|p", kwlist, PyUnicode_FSConverter, &path, &compile)) return NULL;
    tnt_model *m;
    const char *p = PyBytes_AS_STRING(path);
    Py_BEGIN_ALLOW_THREADS
    m = tnt_load_model(p, compile);
    Py_END_ALLOW_THREADS
    Py_DECREF(path);
    return pytnt_model_wrap(m);
}

/* ---- structure ----------------------------------------------------------------------------- */

static PyObject *model_to_json(pytnt_model *self, PyObject *noargs) {
    (void)noargs;
    char *json = NULL;
    tnt_status s = tnt_model_to_json(self->m, &json);
    if (s != TNT_OK) return pytnt_raise(s);
    PyObject *r = PyUnicode_FromString(json);
    free(json);
    return r;
}

static PyObject *model_clone(pytnt_model *self, PyObject *noargs) {
    (void)noargs;
    return pytnt_model_wrap(tnt_clone_model(self->m));
}

static PyObject *model_summary(pytnt_model *self, PyObject *noargs) {
    (void)noargs;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) return PyErr_NoMemory();
    tnt_status s = tnt_model_summary(self->m, f);
    fclose(f);
    PyObject *r = s == TNT_OK ? PyUnicode_DecodeUTF8(buf, (Py_ssize_t)len, "replace") : pytnt_raise(s);
    free(buf);
    return r;
}

static PyObject *model_count_params(pytnt_model *self, PyObject *noargs) {
    (void)noargs;
    return PyLong_FromLongLong(tnt_model_count_params(self->m));
}

/* [(name, class_name), ...] in the model's layer order */
static PyObject *model_layers(pytnt_model *self, PyObject *noargs) {
    (void)noargs;
    int n = tnt_model_num_layers(self->m);
    PyObject *l = PyList_New(n);
    for (int i = 0; l && i < n; i++) {
        tnt_layer *layer = tnt_model_layer(self->m, i);
        PyObject *t = Py_BuildValue("ss", tnt_layer_name(layer), tnt_layer_class(layer));
        if (!t) Py_CLEAR(l);
        else PyList_SET_ITEM(l, i, t);
    }
    return l;
}

static PyObject *shapes(pytnt_model *self, int inputs) {
    int n = inputs ? tnt_model_num_inputs(self->m) : tnt_model_num_outputs(self->m);
    PyObject *l = PyList_New(n);
    for (int i = 0; l && i < n; i++) {
        tnt_shape s = inputs ? tnt_model_input_shape_at(self->m, i) : tnt_model_output_shape_at(self->m, i);
        PyObject *t = pytnt_shape_tuple(s);
        if (!t) Py_CLEAR(l);
        else PyList_SET_ITEM(l, i, t);
    }
    return l;
}
static PyObject *model_input_shapes(pytnt_model *self, PyObject *noargs) {
    (void)noargs;
    return shapes(self, 1);
}
static PyObject *model_output_shapes(pytnt_model *self, PyObject *noargs) {
    (void)noargs;
    return shapes(self, 0);
}
/* the output shapes for the input shapes last used (None dimensions filled) */
static PyObject *model_output_shapes_now(pytnt_model *self, PyObject *noargs) {
    (void)noargs;
    int n = tnt_model_num_outputs(self->m);
    PyObject *l = PyList_New(n);
    for (int i = 0; l && i < n; i++) {
        PyObject *t = pytnt_shape_tuple(tnt_model_output_shape_now(self->m, i));
        if (!t) Py_CLEAR(l);
        else PyList_SET_ITEM(l, i, t);
    }
    return l;
}

/* ---- distribute and compile ---------------------------------------------------------------- */

static PyObject *model_distribute(pytnt_model *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"fusion_threshold_kb", "comm_mode", "reducer", NULL};
    PyObject *threshold = Py_None;
    int mode = 0, reducer = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|Oii", kwlist, &threshold, &mode, &reducer)) return NULL;
    if (!pytnt_model_enter(self, 1)) return NULL;
    tnt_distribute_opts o = {.comm_mode = (tnt_comm_mode)mode, .reducer = (tnt_reducer_kind)reducer};
    if (mode < 0 || mode > TNT_COMM_MODE_NONBLOCKING)
        return PyErr_Format(PyExc_ValueError, "distribute: comm_mode %d (expected 0..2)", mode);
    if (reducer < 0 || reducer > TNT_REDUCER_SHARDED)
        return PyErr_Format(PyExc_ValueError, "distribute: reducer %d (expected 0..3)", reducer);
    if (threshold != Py_None) {
        long long v = PyLong_AsLongLong(threshold);
        if (v == -1 && PyErr_Occurred()) return NULL;
        o.has_fusion_threshold = true;
        o.fusion_threshold_kb = v;
    }
    tnt_status s = tnt_distribute_with(self->m, &o);
    if (s != TNT_OK) return pytnt_raise(s);
    Py_RETURN_NONE;
}

/* A float from dict d (absent or None: *out unchanged); 0 with an exception. */
static int dict_float(PyObject *d, const char *key, float *out) {
    PyObject *v = PyDict_GetItemString(d, key); /* borrowed */
    if (!v || v == Py_None) return 1;
    double x = PyFloat_AsDouble(v);
    if (x == -1.0 && PyErr_Occurred()) return 0;
    *out = (float)x;
    return 1;
}
static int dict_bool(PyObject *d, const char *key, bool *out) {
    PyObject *v = PyDict_GetItemString(d, key);
    if (!v || v == Py_None) return 1;
    int b = PyObject_IsTrue(v);
    if (b < 0) return 0;
    *out = b;
    return 1;
}

/* (name, {hyperparameters}, schedule spec or None) -> a new optimizer; NULL with an exception */
tnt_optimizer *pytnt_optimizer_new(PyObject *spec) {
    const char *name;
    PyObject *hp, *schedule;
    if (!PyTuple_Check(spec))
        return PyErr_Format(PyExc_TypeError, "optimizer spec: expected (name, dict, schedule), got %.80s",
                            Py_TYPE(spec)->tp_name), NULL;
    if (!PyArg_ParseTuple(spec, "sO!O;optimizer spec: (name, dict, schedule)", &name, &PyDict_Type, &hp, &schedule))
        return NULL;
    tnt_optimizer_opts o = {0};
    if (!dict_float(hp, "learning_rate", &o.learning_rate) || !dict_float(hp, "momentum", &o.momentum) ||
        !dict_bool(hp, "nesterov", &o.nesterov) || !dict_float(hp, "beta_1", &o.beta_1) ||
        !dict_float(hp, "beta_2", &o.beta_2) || !dict_float(hp, "epsilon", &o.epsilon) ||
        !dict_float(hp, "rho", &o.rho) || !dict_bool(hp, "amsgrad", &o.amsgrad) ||
        !dict_bool(hp, "centered", &o.centered) ||
        !dict_float(hp, "initial_accumulator_value", &o.initial_accumulator_value) ||
        !dict_float(hp, "weight_decay", &o.weight_decay) || !dict_float(hp, "clipvalue", &o.clipvalue))
        return NULL;
    tnt_lr_schedule *s = NULL;
    if (schedule != Py_None && !(s = pytnt_schedule_new(schedule))) return NULL;
    tnt_optimizer *opt = tnt_optimizer_new(name, &o);
    if (!opt) {
        tnt_lr_schedule_free(s);
        pytnt_raise_last();
        return NULL;
    }
    /* the C options read 0 as Keras's default; Keras's learning_rate=0.0 is a rate of 0 (a step
     * that leaves the weights, the slots still advancing) */
    PyObject *lr = PyDict_GetItemString(hp, "learning_rate");
    if (lr && PyNumber_Check(lr) && PyFloat_AsDouble(lr) == 0.0 && !PyErr_Occurred()) {
        tnt_status st = tnt_optimizer_set_lr(opt, 0.0f);
        if (st != TNT_OK) {
            tnt_optimizer_free(opt);
            tnt_lr_schedule_free(s);
            pytnt_raise(st);
            return NULL;
        }
    }
    if (s) {
        tnt_status st = tnt_optimizer_set_schedule(opt, s); /* consumes s */
        if (st != TNT_OK) {
            tnt_optimizer_free(opt);
            pytnt_raise(st);
            return NULL;
        }
    }
    return opt;
}

static PyObject *model_compile(pytnt_model *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"optimizer", "loss", "from_logits", "metrics", "seed", "label_smoothing", "ignore_class",
                             "huber_delta", "loss_weights", "output_losses", NULL};
    PyObject *spec, *ignore = Py_None, *weights = Py_None, *kinds_o = Py_None;
    int loss = 0, from_logits = 0;
    const char *metrics = NULL;
    unsigned long long seed = 0;
    double smoothing = 0, delta = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "Oi|pzKdOdOO", kwlist, &spec, &loss, &from_logits, &metrics, &seed,
                                     &smoothing, &ignore, &delta, &weights, &kinds_o))
        return NULL;
    if (!pytnt_model_enter(self, 1)) return NULL;
    tnt_compile_opts o = {.loss = (tnt_loss_kind)loss, .from_logits = from_logits, .metrics = metrics,
                          .seed = seed, .label_smoothing = (float)smoothing, .huber_delta = (float)delta};
    float lw[64];
    if (weights != Py_None) { /* Keras's loss_weights, one per output in output order */
        PyObject *seq = PySequence_Fast(weights, "compile: loss_weights must be a sequence of numbers");
        if (!seq) return NULL;
        Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
        if (n > 64) {
            Py_DECREF(seq);
            return PyErr_Format(PyExc_ValueError, "compile: %zd loss_weights (at most 64)", n);
        }
        for (Py_ssize_t i = 0; i < n; i++) {
            lw[i] = (float)PyFloat_AsDouble(PySequence_Fast_GET_ITEM(seq, i));
            if (PyErr_Occurred()) {
                Py_DECREF(seq);
                return NULL;
            }
        }
        Py_DECREF(seq);
        o.loss_weights = lw;
        o.n_loss_weights = (int)n;
    }
    tnt_loss_kind kinds[64];
    if (kinds_o != Py_None) { /* a loss kind per output */
        PyObject *seq = PySequence_Fast(kinds_o, "compile: output_losses must be a sequence of loss kinds");
        if (!seq) return NULL;
        Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
        for (Py_ssize_t i = 0; i < n && i < 64; i++) {
            long v = PyLong_AsLong(PySequence_Fast_GET_ITEM(seq, i));
            if (v == -1 && PyErr_Occurred()) {
                Py_DECREF(seq);
                return NULL;
            }
            kinds[i] = (tnt_loss_kind)v;
        }
        Py_DECREF(seq);
        o.output_losses = kinds;
        o.n_output_losses = (int)(n < 64 ? n : 64);
    }
    if (ignore != Py_None) {
        long v = PyLong_AsLong(ignore);
        if (v == -1 && PyErr_Occurred()) return NULL;
        o.has_ignore_class = true;
        o.ignore_class = (int)v;
    }
    if (spec != Py_None && !(o.optimizer = pytnt_optimizer_new(spec))) return NULL;
    tnt_status s;
    Py_BEGIN_ALLOW_THREADS
    s = tnt_compile(self->m, &o); /* consumes the optimizer */
    Py_END_ALLOW_THREADS
    if (s != TNT_OK) return pytnt_raise(s);
    Py_RETURN_NONE;
}

/* What the model was compiled with: {"loss", "from_logits", "metrics", "seed", "label_smoothing",
 * "ignore_class"}, or None when it is not compiled. */
static PyObject *model_compile_info(pytnt_model *self, PyObject *noargs) {
    (void)noargs;
    tnt_compile_opts o;
    char metrics[1024];
    if (tnt_model_compile_opts(self->m, &o, metrics, sizeof metrics) != TNT_OK) Py_RETURN_NONE;
    PyObject *ignore = o.has_ignore_class ? PyLong_FromLong(o.ignore_class) : Py_NewRef(Py_None);
    return Py_BuildValue("{s:s,s:O,s:s,s:K,s:d,s:N}", "loss", tnt_loss_name(o.loss), "from_logits",
                         o.from_logits ? Py_True : Py_False, "metrics", metrics, "seed",
                         (unsigned long long)o.seed, "label_smoothing", (double)o.label_smoothing, "ignore_class",
                         ignore);
}

/* The compiled model's optimizer: (name, learning rate of the next step, iterations), or None. */
static PyObject *model_optimizer_info(pytnt_model *self, PyObject *noargs) {
    (void)noargs;
    tnt_optimizer *o = tnt_model_optimizer(self->m);
    if (!o) Py_RETURN_NONE;
    return Py_BuildValue("sdL", tnt_optimizer_name(o), (double)tnt_optimizer_get_lr(o),
                         (long long)tnt_optimizer_iterations(o));
}

static PyObject *model_set_learning_rate(pytnt_model *self, PyObject *arg) {
    double v = PyFloat_AsDouble(arg);
    if (v == -1.0 && PyErr_Occurred()) return NULL;
    tnt_optimizer *o = tnt_model_optimizer(self->m);
    if (!o) return PyErr_Format(PyExc_RuntimeError, "the model has no optimizer (compile it first)");
    tnt_status s = tnt_optimizer_set_lr(o, (float)v);
    if (s != TNT_OK) return pytnt_raise(s);
    Py_RETURN_NONE;
}

/* set_input_shapes([shape, ...]): the None dimensions of the inputs for the next calls (several
 * inputs come packed in one dataset element, so their shapes come from Python's arrays) */
static PyObject *model_set_input_shapes(pytnt_model *self, PyObject *arg) {
    PyObject *seq = PySequence_Fast(arg, "set_input_shapes: expected a list of shapes");
    if (!seq) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    tnt_shape shapes[16];
    if (n != tnt_model_num_inputs(self->m)) {
        Py_DECREF(seq);
        return PyErr_Format(PyExc_ValueError, "set_input_shapes: %zd shapes for a model of %d inputs", n,
                            tnt_model_num_inputs(self->m));
    }
    for (Py_ssize_t i = 0; i < n; i++)
        if (!pytnt_shape_from(PySequence_Fast_GET_ITEM(seq, i), &shapes[i], "set_input_shapes")) {
            Py_DECREF(seq);
            return NULL;
        }
    Py_DECREF(seq);
    tnt_status s = tnt_model_set_input_shapes(self->m, (int)n, shapes);
    if (s != TNT_OK) return pytnt_raise(s);
    Py_RETURN_NONE;
}

/* reset_states(layer_name=None): Keras's model.reset_states(), or one layer's */
static PyObject *model_reset_states(pytnt_model *self, PyObject *args) {
    const char *name = NULL;
    if (!PyArg_ParseTuple(args, "|z", &name)) return NULL;
    if (!name) {
        tnt_model_reset_states(self->m);
        Py_RETURN_NONE;
    }
    tnt_layer *l = tnt_model_get_layer(self->m, name);
    if (!l) return PyErr_Format(PyExc_ValueError, "reset_states: model has no layer %s", name);
    tnt_layer_reset_states(l);
    Py_RETURN_NONE;
}

/* set_trainable(layer_name, trainable) -> whether the model has the layer (Keras's
 * layer.trainable, read when the model is compiled) */
static PyObject *model_set_trainable(pytnt_model *self, PyObject *args) {
    const char *name;
    int trainable;
    if (!PyArg_ParseTuple(args, "sp", &name, &trainable)) return NULL;
    tnt_layer *l = tnt_model_get_layer(self->m, name);
    if (!l) Py_RETURN_FALSE;
    tnt_status s = tnt_layer_set_trainable(l, trainable);
    if (s != TNT_OK) return pytnt_raise(s);
    Py_RETURN_TRUE;
}

static PyObject *model_stop_training(pytnt_model *self, PyObject *noargs) {
    (void)noargs;
    tnt_model_stop_training(self->m);
    Py_RETURN_NONE;
}

/* batch_outputs(): inside on_predict_batch_end, a copy of the batch's predictions (this rank's
 * rows, outputs packed per row as predict returns them before splitting) */
static PyObject *model_batch_outputs(pytnt_model *self, PyObject *noargs) {
    (void)noargs;
    const float *data;
    tnt_shape shape;
    tnt_status s = tnt_model_batch_outputs(self->m, &data, &shape);
    if (s != TNT_OK) return pytnt_raise(s);
    PyObject *a = pytnt_new_array(shape);
    if (a) memcpy(PyArray_DATA((PyArrayObject *)a), data, (size_t)tnt_shape_numel(shape) * sizeof(float));
    return a;
}

static PyObject *model_set_seed(pytnt_model *self, PyObject *args) {
    unsigned long long seed;
    if (!PyArg_ParseTuple(args, "K", &seed)) return NULL;
    tnt_status s = tnt_model_set_seed(self->m, (uint64_t)seed);
    if (s != TNT_OK) return pytnt_raise(s);
    Py_RETURN_NONE;
}

static PyObject *model_set_loss_graph(pytnt_model *self, PyObject *args) {
    int output;
    const char *json = NULL;
    if (!PyArg_ParseTuple(args, "iz", &output, &json)) return NULL;
    tnt_status s = tnt_model_set_loss_graph(self->m, output, json);
    if (s != TNT_OK) return pytnt_raise(s);
    Py_RETURN_NONE;
}

static PyObject *model_add_metric_graph(pytnt_model *self, PyObject *args) {
    int output;
    const char *name, *json, *result_json = NULL;
    if (!PyArg_ParseTuple(args, "sis|z", &name, &output, &json, &result_json)) return NULL;
    tnt_status s = result_json ? tnt_model_add_metric_state_graphs(self->m, name, output, json, result_json)
                               : tnt_model_add_metric_graph(self->m, name, output, json);
    if (s != TNT_OK) return pytnt_raise(s);
    Py_RETURN_NONE;
}

/* ---- fit, evaluate, predict ---------------------------------------------------------------- */

static PyObject *logs_dict(const tnt_logs *logs) {
    PyObject *d = PyDict_New();
    for (int i = 0; d && i < logs->n; i++) {
        PyObject *v = PyFloat_FromDouble(logs->values[i]);
        if (!v || PyDict_SetItemString(d, logs->names[i], v) < 0) Py_CLEAR(d);
        Py_XDECREF(v);
    }
    return d;
}
PyObject *pytnt_logs_dict(const tnt_logs *logs) { return logs_dict(logs); }

/* Ctrl-C during fit: Python only learns of a signal when it runs, so at the end of every epoch
 * the fit takes the GIL for a moment and asks (on the main thread; elsewhere PyErr_CheckSignals
 * does nothing). A KeyboardInterrupt then ends the fit and comes out of it. Not per batch: a
 * batch hook would make every step of a distributed fit agree on its logs and on stopping. */
static tnt_status check_signals(tnt_model *m, int epoch, const tnt_logs *logs, void *user) {
    (void)m, (void)epoch, (void)logs, (void)user;
    PyGILState_STATE g = PyGILState_Ensure();
    tnt_status s = TNT_OK;
    if (PyErr_CheckSignals() < 0) {
        pytnt_pending_keep();
        s = tnt_set_error(TNT_ERR_STATE, "fit: interrupted");
    }
    PyGILState_Release(g);
    return s;
}

/* The callbacks of a list of Callback handles, copied into *out (PyMem; NULL when none), with
 * the signal check after them when signals is set. */
static int callbacks_from(PyObject *list, tnt_callback **out, int *n, int signals) {
    *out = NULL;
    *n = 0;
    PyObject *seq = list == Py_None ? PyList_New(0) : PySequence_Fast(list, "callbacks: expected a list");
    if (!seq) return 0;
    Py_ssize_t k = PySequence_Fast_GET_SIZE(seq);
    if (k + signals > 0 && !(*out = PyMem_Calloc((size_t)(k + signals), sizeof **out))) {
        Py_DECREF(seq);
        PyErr_NoMemory();
        return 0;
    }
    for (Py_ssize_t i = 0; i < k; i++) {
        PyObject *c = PySequence_Fast_GET_ITEM(seq, i);
        if (!PyObject_TypeCheck(c, &pytnt_callback_type)) {
            PyErr_Format(PyExc_TypeError, "callbacks: item %zd is not a _tarantella.Callback", i);
            PyMem_Free(*out);
            *out = NULL;
            Py_DECREF(seq);
            return 0;
        }
        (*out)[i] = ((pytnt_callback *)c)->cb;
    }
    if (signals) (*out)[k] = (tnt_callback){.on_epoch_end = check_signals};
    *n = (int)k + signals;
    Py_DECREF(seq);
    return 1;
}

/* Runs what sits between begin and end without the GIL, with the model marked busy. */
#define RUN_UNLOCKED(self, call)                                                                  \
    do {                                                                                          \
        int was_busy_ = (self)->busy; /* evaluate or predict inside a callback */                 \
        (self)->busy = 1;                                                                         \
        (self)->owner = PyThread_get_thread_ident();                                              \
        pytnt_pending_clear();                                                                    \
        pytnt_flush_stdout();                                                                     \
        Py_BEGIN_ALLOW_THREADS                                                                    \
        call;                                                                                     \
        Py_END_ALLOW_THREADS                                                                      \
        fflush(stdout);                                                                           \
        (self)->busy = was_busy_;                                                                 \
    } while (0)

static PyObject *model_fit(pytnt_model *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"dataset", "epochs", "initial_epoch", "validation_data", "validation_freq", "verbose",
                             "steps_per_epoch", "callbacks", "no_distribute", "no_distribute_validation",
                             "micro_batch_size", "sample_weights", "validation_sample_weights", NULL};
    PyObject *train_o, *val_o = Py_None, *cbs_o = Py_None;
    int epochs = 1, initial_epoch = 0, validation_freq = 1, verbose = 1, no_dist = 0, no_dist_val = 0;
    int weighted = 0, val_weighted = 0;
    long long steps = 0, micro = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|iiOiiLOppLpp", kwlist, &train_o, &epochs, &initial_epoch, &val_o,
                                     &validation_freq, &verbose, &steps, &cbs_o, &no_dist, &no_dist_val, &micro,
                                     &weighted, &val_weighted))
        return NULL;
    if (!pytnt_model_enter(self, 1)) return NULL;
    tnt_dataset *train = pytnt_dataset_get(train_o, "fit: dataset"), *val = NULL;
    if (!train) return NULL;
    if (val_o != Py_None && !(val = pytnt_dataset_get(val_o, "fit: validation_data"))) return NULL;
    tnt_callback *cbs;
    int n_cbs;
    if (!callbacks_from(cbs_o, &cbs, &n_cbs, 1)) return NULL;
    tnt_fit_opts o = {.epochs = epochs, .initial_epoch = initial_epoch, .validation_data = val,
                      .validation_freq = validation_freq, .verbose = verbose, .steps_per_epoch = steps,
                      .callbacks = cbs, .n_callbacks = n_cbs, .no_distribute = no_dist,
                      .no_distribute_validation = no_dist_val, .micro_batch_size = micro,
                      .sample_weights = weighted, .validation_sample_weights = val_weighted};
    tnt_history *h = NULL;
    tnt_status s;
    /* keep the datasets' handles (and the arrays they borrow) alive whatever callbacks do */
    Py_INCREF(train_o);
    Py_INCREF(val_o);
    Py_INCREF(cbs_o);
    RUN_UNLOCKED(self, s = tnt_fit(self->m, train, &o, &h));
    Py_DECREF(train_o);
    Py_DECREF(val_o);
    Py_DECREF(cbs_o);
    PyMem_Free(cbs);
    if (s != TNT_OK) {
        tnt_history_free(h);
        return pytnt_raise_after(s);
    }
    pytnt_pending_clear();
    int n = h ? tnt_history_epochs(h) : 0;
    PyObject *l = PyList_New(n);
    for (int i = 0; l && i < n; i++) {
        PyObject *d = logs_dict(tnt_history_logs(h, i));
        if (!d) Py_CLEAR(l);
        else PyList_SET_ITEM(l, i, d);
    }
    tnt_history_free(h);
    return l;
}

static int eval_args(PyObject *args, PyObject *kw, PyObject **data_o, tnt_eval_opts *o, tnt_callback **cbs,
                     PyObject **cbs_o) {
    static char *kwlist[] = {"dataset", "verbose", "steps", "callbacks", "no_distribute", "all_ranks",
                             "micro_batch_size", "sample_weights", NULL};
    int verbose = 0, no_dist = 0, all = 0, weighted = 0;
    long long steps = 0, micro = 0;
    *cbs_o = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|iLOppLp", kwlist, data_o, &verbose, &steps, cbs_o, &no_dist, &all,
                                     &micro, &weighted))
        return 0;
    int n = 0;
    if (!callbacks_from(*cbs_o, cbs, &n, 0)) return 0;
    *o = (tnt_eval_opts){.verbose = verbose, .steps = steps, .callbacks = *cbs, .n_callbacks = n,
                         .no_distribute = no_dist, .all_ranks = all, .micro_batch_size = micro,
                         .sample_weights = weighted};
    return 1;
}

static PyObject *model_evaluate(pytnt_model *self, PyObject *args, PyObject *kw) {
    PyObject *data_o, *cbs_o;
    tnt_eval_opts o;
    tnt_callback *cbs = NULL;
    if (!pytnt_model_enter(self, 2) || !eval_args(args, kw, &data_o, &o, &cbs, &cbs_o)) return NULL;
    tnt_dataset *data = pytnt_dataset_get(data_o, "evaluate: dataset");
    if (!data) {
        PyMem_Free(cbs);
        return NULL;
    }
    tnt_logs logs = {0};
    tnt_status s;
    Py_INCREF(data_o);
    Py_INCREF(cbs_o);
    RUN_UNLOCKED(self, s = tnt_evaluate(self->m, data, &o, &logs));
    Py_DECREF(data_o);
    Py_DECREF(cbs_o);
    PyMem_Free(cbs);
    if (s != TNT_OK) return pytnt_raise_after(s);
    pytnt_pending_clear();
    return logs_dict(&logs);
}

static void tensor_capsule_free(PyObject *cap) { tnt_tensor_free(PyCapsule_GetPointer(cap, "tnt_tensor")); }

/* A NumPy array over a library tensor, without a copy; takes t. */
static PyObject *tensor_array(tnt_tensor *t) {
    npy_intp dims[TNT_MAX_DIMS];
    for (int k = 0; k < t->shape.ndim; k++) dims[k] = (npy_intp)t->shape.dim[k];
    PyObject *cap = PyCapsule_New(t, "tnt_tensor", tensor_capsule_free);
    if (!cap) {
        tnt_tensor_free(t);
        return NULL;
    }
    PyObject *a = PyArray_SimpleNewFromData(t->shape.ndim, dims, NPY_FLOAT32, t->data);
    if (!a || PyArray_SetBaseObject((PyArrayObject *)a, cap) < 0) { /* SetBaseObject steals cap */
        Py_XDECREF(a);
        if (!a) Py_DECREF(cap);
        return NULL;
    }
    return a;
}

static PyObject *model_predict(pytnt_model *self, PyObject *args, PyObject *kw) {
    PyObject *data_o, *cbs_o;
    tnt_eval_opts o;
    tnt_callback *cbs = NULL;
    if (!pytnt_model_enter(self, 2) || !eval_args(args, kw, &data_o, &o, &cbs, &cbs_o)) return NULL;
    tnt_dataset *data = pytnt_dataset_get(data_o, "predict: dataset");
    if (!data) {
        PyMem_Free(cbs);
        return NULL;
    }
    tnt_tensor *out = NULL;
    tnt_status s;
    Py_INCREF(data_o);
    Py_INCREF(cbs_o);
    RUN_UNLOCKED(self, s = tnt_predict(self->m, data, &o, &out));
    Py_DECREF(data_o);
    Py_DECREF(cbs_o);
    PyMem_Free(cbs);
    if (s != TNT_OK) {
        tnt_tensor_free(out);
        return pytnt_raise_after(s);
    }
    pytnt_pending_clear();
    return tensor_array(out);
}

static PyObject *model_predict_on_batch(pytnt_model *self, PyObject *arg) {
    if (!pytnt_model_enter(self, 2)) return NULL;
    PyArrayObject *a = (PyArrayObject *)PyArray_FROMANY(arg, NPY_FLOAT32, 1, TNT_MAX_DIMS,
                                                         NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_ALIGNED |
                                                         NPY_ARRAY_FORCECAST);
    if (!a) return NULL;
    tnt_tensor x = {.shape = {.ndim = PyArray_NDIM(a)}, .data = PyArray_DATA(a)};
    for (int k = 0; k < x.shape.ndim; k++) x.shape.dim[k] = PyArray_DIM(a, k);
    tnt_tensor *out = NULL;
    tnt_status s;
    RUN_UNLOCKED(self, s = tnt_predict_on_batch(self->m, &x, &out));
    Py_DECREF(a);
    if (s != TNT_OK) {
        tnt_tensor_free(out);
        return pytnt_raise(s);
    }
    return tensor_array(out);
}

/* ---- the type ------------------------------------------------------------------------------ */

static PyMethodDef model_methods[] = {
    {"to_json", (PyCFunction)model_to_json, METH_NOARGS, "Keras 2 JSON architecture."},
    {"clone", (PyCFunction)model_clone, METH_NOARGS, "Same architecture, fresh weights."},
    {"summary", (PyCFunction)model_summary, METH_NOARGS, "The summary table as a string."},
    {"count_params", (PyCFunction)model_count_params, METH_NOARGS, "Number of weights' values."},
    {"layers", (PyCFunction)model_layers, METH_NOARGS, "[(name, class_name)]."},
    {"input_shapes", (PyCFunction)model_input_shapes, METH_NOARGS, "Input shapes without batch."},
    {"output_shapes", (PyCFunction)model_output_shapes, METH_NOARGS, "Output shapes without batch."},
    {"output_shapes_now", (PyCFunction)model_output_shapes_now, METH_NOARGS, "Output shapes for the last inputs."},
    {"weights_info", (PyCFunction)pytnt_model_weights_info, METH_NOARGS, "[(name, shape)] in get_weights order."},
    {"get_weights", (PyCFunction)pytnt_model_get_weights, METH_NOARGS, "Weights as float32 arrays."},
    {"set_weights", (PyCFunction)pytnt_model_set_weights, METH_O, "set_weights(list of arrays)."},
    {"copy_weights_from", (PyCFunction)pytnt_model_copy_weights_from, METH_VARARGS,
     "copy_weights_from(src, src_indices, dst_indices): shared layers' weights from another model handle."},
    {"save", (PyCFunction)(void (*)(void))pytnt_model_save, METH_VARARGS | METH_KEYWORDS,
     "save(path, weights_only=False, save_all_devices=False)."},
    {"load_weights", (PyCFunction)(void (*)(void))pytnt_model_load_weights, METH_VARARGS | METH_KEYWORDS,
     "load_weights(path, by_name=False)."},
    {"distribute", (PyCFunction)(void (*)(void))model_distribute, METH_VARARGS | METH_KEYWORDS,
     "distribute(fusion_threshold_kb=None, comm_mode=0, reducer=0)."},
    {"compile", (PyCFunction)(void (*)(void))model_compile, METH_VARARGS | METH_KEYWORDS,
     "compile(optimizer_spec, loss_kind, from_logits, metrics, seed, label_smoothing, ignore_class, huber_delta, "
     "loss_weights)."},
    {"compile_info", (PyCFunction)model_compile_info, METH_NOARGS, "Compile options, or None."},
    {"optimizer_info", (PyCFunction)model_optimizer_info, METH_NOARGS, "(name, lr, iterations) or None."},
    {"set_learning_rate", (PyCFunction)model_set_learning_rate, METH_O, "Sets the optimizer's rate."},
    {"set_input_shapes", (PyCFunction)model_set_input_shapes, METH_O, "Shapes of the inputs' None dimensions."},
    {"reset_states", (PyCFunction)model_reset_states, METH_VARARGS, "reset_states(layer_name=None)."},
    {"set_trainable", (PyCFunction)model_set_trainable, METH_VARARGS, "set_trainable(layer_name, trainable) -> found."},
    {"stop_training", (PyCFunction)model_stop_training, METH_NOARGS, "Stops fit at the epoch's end."},
    {"batch_outputs", (PyCFunction)model_batch_outputs, METH_NOARGS,
     "Inside on_predict_batch_end: the batch's predictions (packed outputs)."},
    {"set_seed", (PyCFunction)model_set_seed, METH_VARARGS, "set_seed(seed): the seed of weights not drawn yet."},
    {"set_loss_graph", (PyCFunction)model_set_loss_graph, METH_VARARGS,
     "set_loss_graph(output, json or None): output's loss is the traced loss function (after compile)."},
    {"add_metric_graph", (PyCFunction)model_add_metric_graph, METH_VARARGS,
     "add_metric_graph(name, output, json[, result_json]): a traced metric function on output, or a Metric "
     "class's update and result graphs (after compile)."},
    {"fit", (PyCFunction)(void (*)(void))model_fit, METH_VARARGS | METH_KEYWORDS, "fit(...) -> [logs per epoch]."},
    {"evaluate", (PyCFunction)(void (*)(void))model_evaluate, METH_VARARGS | METH_KEYWORDS, "evaluate(...) -> logs."},
    {"predict", (PyCFunction)(void (*)(void))model_predict, METH_VARARGS | METH_KEYWORDS, "predict(...) -> array."},
    {"predict_on_batch", (PyCFunction)model_predict_on_batch, METH_O, "Forward pass on one batch."},
    {NULL, NULL, 0, NULL},
};

PyTypeObject pytnt_model_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "tarantella._tarantella.Model",
    .tp_basicsize = sizeof(pytnt_model),
    .tp_dealloc = (destructor)model_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A libtarantella model (tnt_model). Made by model_from_json or load_model.",
    .tp_methods = model_methods,
};

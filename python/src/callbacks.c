/* callbacks.c: tarantella._tarantella.Callback, a tnt_callback handle: Keras's built-in callbacks
 * of the library, and Python callback objects behind C trampolines that take the GIL. Also the
 * learning-rate schedules of tarantella.keras.optimizers.schedules. */
#include "pytnt.h"

#include <math.h>
#include <string.h>

static void callback_dealloc(pytnt_callback *self) {
    tnt_callback_free(&self->cb);
    Py_CLEAR(self->ref);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Wraps cb; a constructor's failure (user NULL) raises its error. ref: kept alive (may be NULL). */
static PyObject *wrap(tnt_callback cb, PyObject *ref, bool needs_user) {
    if (needs_user && !cb.user) return pytnt_raise_last();
    pytnt_callback *self = PyObject_New(pytnt_callback, &pytnt_callback_type);
    if (!self) {
        tnt_callback_free(&cb);
        return NULL;
    }
    self->cb = cb;
    self->ref = ref ? Py_NewRef(ref) : NULL;
    return (PyObject *)self;
}

/* ---- Python callback objects ---------------------------------------------------------------- */

/* Calls obj.<method>(*args) with the GIL; a Python exception fails the C call (it is kept and
 * raised again when fit returns). */
static tnt_status call_method(void *user, const char *method, int64_t index, const tnt_logs *logs) {
    PyObject *obj = user;
    PyGILState_STATE g = PyGILState_Ensure();
    pytnt_flush_stdout();
    PyObject *d = logs ? pytnt_logs_dict(logs) : PyDict_New(), *r = NULL;
    if (d) r = index >= 0 ? PyObject_CallMethod(obj, method, "LO", (long long)index, d)
                          : PyObject_CallMethod(obj, method, "O", d);
    Py_XDECREF(d);
    tnt_status s = TNT_OK;
    if (!r) {
        PyObject *type = PyErr_Occurred();
        tnt_set_error(TNT_ERR_ARG, "callback %.80s.%s raised %.80s", Py_TYPE(obj)->tp_name, method,
                      type ? ((PyTypeObject *)type)->tp_name : "an exception");
        pytnt_pending_keep();
        s = TNT_ERR_ARG;
    }
    Py_XDECREF(r);
    pytnt_flush_stdout();
    PyGILState_Release(g);
    return s;
}

#define LOGS_HOOK(name)                                                                           \
    static tnt_status py_##name(tnt_model *m, const tnt_logs *logs, void *user) {                 \
        (void)m;                                                                                  \
        return call_method(user, #name, -1, logs);                                                \
    }
#define INDEX_HOOK(name, type)                                                                    \
    static tnt_status py_##name(tnt_model *m, type i, const tnt_logs *logs, void *user) {         \
        (void)m;                                                                                  \
        return call_method(user, #name, (int64_t)i, logs);                                        \
    }
LOGS_HOOK(on_train_begin)
LOGS_HOOK(on_train_end)
LOGS_HOOK(on_test_begin)
LOGS_HOOK(on_test_end)
LOGS_HOOK(on_predict_begin)
LOGS_HOOK(on_predict_end)
INDEX_HOOK(on_epoch_begin, int)
INDEX_HOOK(on_epoch_end, int)
INDEX_HOOK(on_train_batch_begin, int64_t)
INDEX_HOOK(on_train_batch_end, int64_t)
INDEX_HOOK(on_test_batch_begin, int64_t)
INDEX_HOOK(on_test_batch_end, int64_t)
INDEX_HOOK(on_predict_batch_begin, int64_t)
INDEX_HOOK(on_predict_batch_end, int64_t)

/* python_callback(obj, methods, master_only, local_logs): the hooks named in methods call obj's
 * methods of those names. */
static PyObject *py_python_callback(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *obj, *methods;
    int master_only = 0, local_logs = 0;
    if (!PyArg_ParseTuple(args, "OO|pp", &obj, &methods, &master_only, &local_logs)) return NULL;
    PyObject *seq = PySequence_Fast(methods, "python_callback: methods must be a sequence of names");
    if (!seq) return NULL;
    tnt_callback cb = {.user = obj, .master_only = master_only, .local_logs = local_logs};
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); i++) {
        const char *n = PyUnicode_AsUTF8(PySequence_Fast_GET_ITEM(seq, i));
        if (!n) {
            Py_DECREF(seq);
            return NULL;
        }
#define SET(name)                                                                                 \
    if (!strcmp(n, #name)) {                                                                      \
        cb.name = py_##name;                                                                      \
        continue;                                                                                 \
    }
        SET(on_train_begin) SET(on_train_end) SET(on_test_begin) SET(on_test_end) SET(on_predict_begin)
        SET(on_predict_end) SET(on_epoch_begin) SET(on_epoch_end) SET(on_train_batch_begin) SET(on_train_batch_end)
        SET(on_test_batch_begin) SET(on_test_batch_end) SET(on_predict_batch_begin) SET(on_predict_batch_end)
#undef SET
        Py_DECREF(seq);
        return PyErr_Format(PyExc_ValueError, "python_callback: unknown hook \"%s\"", n);
    }
    Py_DECREF(seq);
    return wrap(cb, obj, false);
}

/* ---- built-in callbacks --------------------------------------------------------------------- */

static int mode_of(const char *s, tnt_monitor_mode *out) {
    if (!s || !strcmp(s, "auto")) *out = TNT_MODE_AUTO;
    else if (!strcmp(s, "min")) *out = TNT_MODE_MIN;
    else if (!strcmp(s, "max")) *out = TNT_MODE_MAX;
    else return PyErr_Format(PyExc_ValueError, "mode \"%s\" (expected \"auto\", \"min\" or \"max\")", s), 0;
    return 1;
}

static PyObject *py_early_stopping(PyObject *self, PyObject *args, PyObject *kw) {
    (void)self;
    static char *kwlist[] = {"monitor", "min_delta", "patience", "verbose", "mode", "baseline",
                             "restore_best_weights", "start_from_epoch", NULL};
    const char *monitor = "val_loss", *mode = "auto";
    double min_delta = 0;
    int patience = 0, verbose = 0, restore = 0, start = 0;
    PyObject *baseline = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|sdiisOpi", kwlist, &monitor, &min_delta, &patience, &verbose, &mode,
                                     &baseline, &restore, &start))
        return NULL;
    tnt_early_stopping_opts o = {.monitor = monitor, .min_delta = min_delta, .patience = patience,
                                 .verbose = verbose, .restore_best_weights = restore, .start_from_epoch = start};
    if (!mode_of(mode, &o.mode)) return NULL;
    if (baseline != Py_None) {
        o.has_baseline = true;
        if ((o.baseline = PyFloat_AsDouble(baseline)) == -1.0 && PyErr_Occurred()) return NULL;
    }
    return wrap(tnt_early_stopping(&o), NULL, true);
}

static PyObject *py_reduce_lr(PyObject *self, PyObject *args, PyObject *kw) {
    (void)self;
    static char *kwlist[] = {"monitor", "factor", "patience", "verbose", "mode", "min_delta", "cooldown", "min_lr",
                             NULL};
    const char *monitor = "val_loss", *mode = "auto";
    double factor = 0.1, min_delta = 1e-4, min_lr = 0;
    int patience = 10, verbose = 0, cooldown = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|sdiisdid", kwlist, &monitor, &factor, &patience, &verbose, &mode,
                                     &min_delta, &cooldown, &min_lr))
        return NULL;
    if (factor >= 1.0 || factor <= 0)
        return PyErr_Format(PyExc_ValueError, "ReduceLROnPlateau does not support a factor >= 1.0 (or <= 0): %g",
                            factor);
    /* the C options read 0 as Keras's default: a Keras 0 is asked for with a negative value */
    tnt_reduce_lr_opts o = {.monitor = monitor, .factor = factor, .patience = patience ? patience : -1,
                            .verbose = verbose, .min_delta = min_delta ? min_delta : -1, .cooldown = cooldown,
                            .min_lr = min_lr};
    if (!mode_of(mode, &o.mode)) return NULL;
    return wrap(tnt_reduce_lr_on_plateau(&o), NULL, true);
}

static float schedule_call(int epoch, float lr, void *user) {
    PyGILState_STATE g = PyGILState_Ensure();
    pytnt_flush_stdout();
    PyObject *r = PyObject_CallFunction((PyObject *)user, "id", epoch, (double)lr);
    double v = r ? PyFloat_AsDouble(r) : -1.0;
    if (!r || (v == -1.0 && PyErr_Occurred())) {
        pytnt_pending_keep();
        v = NAN;
    }
    Py_XDECREF(r);
    pytnt_flush_stdout();
    PyGILState_Release(g);
    return (float)v;
}

static PyObject *py_lr_scheduler(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *fn;
    int verbose = 0;
    if (!PyArg_ParseTuple(args, "O|i", &fn, &verbose)) return NULL;
    if (!PyCallable_Check(fn)) return PyErr_Format(PyExc_TypeError, "LearningRateScheduler: schedule is not callable");
    return wrap(tnt_learning_rate_scheduler(schedule_call, fn, verbose), fn, true);
}

static PyObject *py_terminate_on_nan(PyObject *self, PyObject *noargs) {
    (void)self, (void)noargs;
    return wrap(tnt_terminate_on_nan(), NULL, false); /* stateless: user is NULL */
}

static PyObject *py_csv_logger(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *path;
    const char *sep = ",";
    int append = 0;
    if (!PyArg_ParseTuple(args, "O&|sp", PyUnicode_FSConverter, &path, &sep, &append)) return NULL;
    if (strlen(sep) != 1) {
        Py_DECREF(path);
        return PyErr_Format(PyExc_ValueError, "CSVLogger: separator \"%s\" (expected one character)", sep);
    }
    tnt_callback cb = tnt_csv_logger(PyBytes_AS_STRING(path), sep[0], append);
    Py_DECREF(path);
    return wrap(cb, NULL, true);
}

static PyObject *py_model_checkpoint(PyObject *self, PyObject *args, PyObject *kw) {
    (void)self;
    static char *kwlist[] = {"filepath", "monitor", "verbose", "save_best_only", "save_weights_only", "mode",
                             "save_freq", "initial_value_threshold", "save_all_devices", NULL};
    PyObject *path, *threshold = Py_None;
    const char *monitor = "val_loss", *mode = "auto";
    int verbose = 0, best = 0, weights = 0, all = 0;
    long long freq = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O&|sippsLOp", kwlist, PyUnicode_FSConverter, &path, &monitor,
                                     &verbose, &best, &weights, &mode, &freq, &threshold, &all))
        return NULL;
    tnt_checkpoint_opts o = {.monitor = monitor, .verbose = verbose, .save_best_only = best,
                             .save_weights_only = weights, .save_freq = freq, .save_all_devices = all};
    if (!mode_of(mode, &o.mode)) {
        Py_DECREF(path);
        return NULL;
    }
    if (threshold != Py_None) {
        o.has_initial_value_threshold = true;
        if ((o.initial_value_threshold = PyFloat_AsDouble(threshold)) == -1.0 && PyErr_Occurred()) {
            Py_DECREF(path);
            return NULL;
        }
    }
    tnt_callback cb = tnt_model_checkpoint(PyBytes_AS_STRING(path), &o);
    Py_DECREF(path);
    return wrap(cb, NULL, true);
}

static PyObject *py_remote_monitor(PyObject *self, PyObject *args, PyObject *kw) {
    (void)self;
    static char *kwlist[] = {"root", "path", "field", "headers", "send_as_json", NULL};
    const char *root = NULL, *path = NULL, *field = NULL;
    PyObject *headers = Py_None;
    int as_json = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|zzzOp", kwlist, &root, &path, &field, &headers, &as_json))
        return NULL;
    tnt_remote_monitor_opts o = {.root = root, .path = path, .field = field, .send_as_json = as_json};
    PyObject *lines = NULL;
    const char **h = NULL;
    if (headers != Py_None) { /* {"Name": "value"} -> "Name: value" lines */
        if (!PyDict_Check(headers)) return PyErr_Format(PyExc_TypeError, "RemoteMonitor: headers must be a dict");
        Py_ssize_t n = PyDict_Size(headers), pos = 0, i = 0;
        PyObject *k, *v;
        lines = PyList_New(0);
        h = PyMem_Calloc((size_t)n + 1, sizeof *h);
        if (!lines || !h) goto fail;
        while (PyDict_Next(headers, &pos, &k, &v)) {
            PyObject *line = PyUnicode_FromFormat("%S: %S", k, v);
            if (!line || PyList_Append(lines, line) < 0) {
                Py_XDECREF(line);
                goto fail;
            }
            Py_DECREF(line);
            if (!(h[i] = PyUnicode_AsUTF8(PyList_GET_ITEM(lines, i)))) goto fail;
            i++;
        }
        o.headers = h;
    }
    tnt_callback cb = tnt_remote_monitor(&o); /* copies what it keeps */
    PyMem_Free(h);
    Py_XDECREF(lines);
    return wrap(cb, NULL, true);
fail:
    PyMem_Free(h);
    Py_XDECREF(lines);
    return PyErr_Occurred() ? NULL : PyErr_NoMemory();
}

static PyObject *py_tensorboard(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *dir;
    long long freq = 0, histogram_freq = 0;
    if (!PyArg_ParseTuple(args, "O&|LL", PyUnicode_FSConverter, &dir, &freq, &histogram_freq)) return NULL;
    tnt_callback cb = tnt_tensorboard(PyBytes_AS_STRING(dir),
                                      &(tnt_tensorboard_opts){.update_freq = freq, .histogram_freq = histogram_freq});
    Py_DECREF(dir);
    return wrap(cb, NULL, true);
}

/* ---- the handle's attributes ---------------------------------------------------------------- */

static PyObject *cb_stopped_epoch(pytnt_callback *self, PyObject *noargs) {
    (void)noargs;
    return PyLong_FromLong(tnt_early_stopping_stopped_epoch(&self->cb));
}
static PyObject *cb_best(pytnt_callback *self, PyObject *noargs) {
    (void)noargs;
    return PyFloat_FromDouble(tnt_early_stopping_best(&self->cb));
}

static PyObject *get_flag(pytnt_callback *self, void *which) {
    return PyBool_FromLong(which ? self->cb.local_logs : self->cb.master_only);
}
static int set_flag(pytnt_callback *self, PyObject *v, void *which) {
    int b = v ? PyObject_IsTrue(v) : -1;
    if (b < 0) return PyErr_Occurred() ? -1 : (PyErr_SetString(PyExc_TypeError, "cannot delete"), -1);
    if (which) self->cb.local_logs = b;
    else self->cb.master_only = b;
    return 0;
}

static PyMethodDef cb_methods[] = {
    {"stopped_epoch", (PyCFunction)cb_stopped_epoch, METH_NOARGS, "EarlyStopping's stopped_epoch (-1: another)."},
    {"best", (PyCFunction)cb_best, METH_NOARGS, "EarlyStopping's best value (nan: another)."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef cb_getset[] = {
    {"master_only", (getter)get_flag, (setter)set_flag, "run on the master only (run_on_all_ranks=False)", NULL},
    {"local_logs", (getter)get_flag, (setter)set_flag, "this rank's own figures (aggregate_logs=False)", (void *)1},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject pytnt_callback_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "tarantella._tarantella.Callback",
    .tp_basicsize = sizeof(pytnt_callback),
    .tp_dealloc = (destructor)callback_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A libtarantella callback (tnt_callback).",
    .tp_methods = cb_methods,
    .tp_getset = cb_getset,
};

/* ---- learning-rate schedules ---------------------------------------------------------------- */

static int num(PyObject *d, const char *key, double *out) {
    PyObject *v = PyDict_GetItemString(d, key);
    if (!v) return PyErr_Format(PyExc_ValueError, "schedule: missing \"%s\"", key), 0;
    *out = PyFloat_AsDouble(v);
    return !(*out == -1.0 && PyErr_Occurred());
}
static int flag(PyObject *d, const char *key, bool *out) {
    PyObject *v = PyDict_GetItemString(d, key);
    int b = v ? PyObject_IsTrue(v) : 0;
    if (b < 0) return 0;
    *out = b;
    return 1;
}

/* (class_name, {Keras config}) -> a schedule; NULL with an exception */
tnt_lr_schedule *pytnt_schedule_new(PyObject *spec) {
    const char *cls;
    PyObject *c;
    if (!PyTuple_Check(spec))
        return PyErr_Format(PyExc_TypeError, "schedule spec: expected (class_name, config), got %.80s",
                            Py_TYPE(spec)->tp_name), NULL;
    if (!PyArg_ParseTuple(spec, "sO!;schedule spec: (class_name, config)", &cls, &PyDict_Type, &c)) return NULL;
    double init = 0, steps = 0, rate = 0, end = 0, power = 0, alpha = 0, target = 0, wsteps = 0;
    bool stair = false, cycle = false;
    tnt_lr_schedule *s = NULL;
    if (!strcmp(cls, "ExponentialDecay") || !strcmp(cls, "InverseTimeDecay")) {
        if (!num(c, "initial_learning_rate", &init) || !num(c, "decay_steps", &steps) || !num(c, "decay_rate", &rate) ||
            !flag(c, "staircase", &stair))
            return NULL;
        s = cls[0] == 'E' ? tnt_exponential_decay((float)init, (int64_t)steps, (float)rate, stair)
                          : tnt_inverse_time_decay((float)init, (int64_t)steps, (float)rate, stair);
    } else if (!strcmp(cls, "PolynomialDecay")) {
        if (!num(c, "initial_learning_rate", &init) || !num(c, "decay_steps", &steps) ||
            !num(c, "end_learning_rate", &end) || !num(c, "power", &power) || !flag(c, "cycle", &cycle))
            return NULL;
        s = tnt_polynomial_decay((float)init, (int64_t)steps, (float)end, (float)power, cycle);
    } else if (!strcmp(cls, "CosineDecay")) {
        if (!num(c, "initial_learning_rate", &init) || !num(c, "decay_steps", &steps) || !num(c, "alpha", &alpha))
            return NULL;
        PyObject *t = PyDict_GetItemString(c, "warmup_target");
        if (t && t != Py_None) {
            if (!num(c, "warmup_target", &target) || !num(c, "warmup_steps", &wsteps)) return NULL;
            s = tnt_cosine_decay_warmup((float)init, (int64_t)steps, (float)alpha, (float)target, (int64_t)wsteps);
        } else {
            s = tnt_cosine_decay((float)init, (int64_t)steps, (float)alpha);
        }
    } else if (!strcmp(cls, "PiecewiseConstantDecay")) {
        PyObject *b = PyDict_GetItemString(c, "boundaries"), *v = PyDict_GetItemString(c, "values");
        PyObject *bs = b ? PySequence_Fast(b, "boundaries: expected a list") : NULL;
        PyObject *vs = bs && v ? PySequence_Fast(v, "values: expected a list") : NULL;
        if (!bs || !vs) {
            Py_XDECREF(bs);
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "PiecewiseConstantDecay: boundaries and values");
            return NULL;
        }
        Py_ssize_t nb = PySequence_Fast_GET_SIZE(bs), nv = PySequence_Fast_GET_SIZE(vs);
        int64_t *bd = PyMem_Calloc((size_t)nb + 1, sizeof *bd);
        float *vd = PyMem_Calloc((size_t)nv + 1, sizeof *vd);
        int ok = bd && vd;
        if (ok && nv != nb + 1) {
            PyErr_Format(PyExc_ValueError, "PiecewiseConstantDecay: %zd boundaries need %zd values, got %zd", nb,
                         nb + 1, nv);
            ok = 0;
        }
        for (Py_ssize_t i = 0; ok && i < nb; i++)
            ok = !((bd[i] = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(bs, i))) == -1 && PyErr_Occurred());
        for (Py_ssize_t i = 0; ok && i < nv; i++) {
            double x = PyFloat_AsDouble(PySequence_Fast_GET_ITEM(vs, i));
            ok = !(x == -1.0 && PyErr_Occurred());
            vd[i] = (float)x;
        }
        if (ok) s = tnt_piecewise_constant_decay(bd, vd, (int)nb);
        PyMem_Free(bd);
        PyMem_Free(vd);
        Py_DECREF(bs);
        Py_DECREF(vs);
        if (!ok) return PyErr_Occurred() ? NULL : (PyErr_NoMemory(), NULL);
    } else {
        PyErr_Format(PyExc_ValueError, "unsupported learning-rate schedule \"%s\"", cls);
        return NULL;
    }
    if (!s) pytnt_raise_last();
    return s;
}

PyMethodDef pytnt_callback_functions[] = {
    {"python_callback", py_python_callback, METH_VARARGS,
     "python_callback(obj, methods, master_only=False, local_logs=False) -> Callback."},
    {"early_stopping", (PyCFunction)(void (*)(void))py_early_stopping, METH_VARARGS | METH_KEYWORDS, "EarlyStopping."},
    {"reduce_lr_on_plateau", (PyCFunction)(void (*)(void))py_reduce_lr, METH_VARARGS | METH_KEYWORDS,
     "ReduceLROnPlateau."},
    {"learning_rate_scheduler", py_lr_scheduler, METH_VARARGS, "learning_rate_scheduler(fn(epoch, lr), verbose=0)."},
    {"terminate_on_nan", py_terminate_on_nan, METH_NOARGS, "TerminateOnNaN."},
    {"csv_logger", py_csv_logger, METH_VARARGS, "csv_logger(filename, separator=',', append=False)."},
    {"model_checkpoint", (PyCFunction)(void (*)(void))py_model_checkpoint, METH_VARARGS | METH_KEYWORDS,
     "ModelCheckpoint."},
    {"remote_monitor", (PyCFunction)(void (*)(void))py_remote_monitor, METH_VARARGS | METH_KEYWORDS,
     "RemoteMonitor."},
    {"tensorboard", py_tensorboard, METH_VARARGS, "tensorboard(log_dir, update_freq=0, histogram_freq=0)."},
    {NULL, NULL, 0, NULL},
};

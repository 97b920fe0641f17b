/* module.c: the module tarantella._tarantella: runtime and rank API, errors as exceptions, the
 * kept Python exception of callbacks and map functions, and the module table. */
#define PYTNT_MODULE_C
#include "pytnt.h"

#include <errno.h>

/* ---- errors ------------------------------------------------------------------------------- */

static PyObject *exception_of(tnt_status s, const char *msg) {
    switch (s) {
    case TNT_ERR_ARG:
    case TNT_ERR_SHAPE:
    case TNT_ERR_FORMAT: return PyExc_ValueError;
    case TNT_ERR_IO:
        /* the library names a missing file with strerror(ENOENT) */
        return strstr(msg, strerror(ENOENT)) ? PyExc_FileNotFoundError : PyExc_OSError;
    case TNT_ERR_NOMEM: return PyExc_MemoryError;
    case TNT_ERR_UNSUPPORTED: return PyExc_NotImplementedError;
    default: return PyExc_RuntimeError;
    }
}

PyObject *pytnt_raise(tnt_status s) {
    const char *msg = tnt_last_error();
    if (!msg || !*msg) msg = tnt_status_name(s);
    PyErr_SetString(exception_of(s, msg), msg);
    return NULL;
}

PyObject *pytnt_raise_last(void) {
    tnt_status s = tnt_last_status();
    return pytnt_raise(s == TNT_OK ? TNT_ERR_ARG : s);
}

static PyObject *pending_type, *pending_value, *pending_tb;

void pytnt_pending_keep(void) {
    if (!PyErr_Occurred()) return;
    if (pending_type) { /* the first exception is the cause; later ones follow from it */
        PyErr_Clear();
        return;
    }
    PyErr_Fetch(&pending_type, &pending_value, &pending_tb);
    PyErr_NormalizeException(&pending_type, &pending_value, &pending_tb);
}

void pytnt_pending_clear(void) {
    Py_CLEAR(pending_type);
    Py_CLEAR(pending_value);
    Py_CLEAR(pending_tb);
}

PyObject *pytnt_raise_after(tnt_status s) {
    if (!pending_type) return pytnt_raise(s);
    const char *msg = tnt_last_error();
    if (msg && *msg && pending_value) { /* the library's view of the failure, as a note */
        PyObject *r = PyObject_CallMethod(pending_value, "add_note", "s", msg);
        if (r) Py_DECREF(r);
        else PyErr_Clear();
    }
    PyErr_Restore(pending_type, pending_value, pending_tb);
    pending_type = pending_value = pending_tb = NULL;
    return NULL;
}

void pytnt_flush_stdout(void) {
    fflush(stdout);
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyObject *out = PySys_GetObject("stdout"); /* borrowed */
    if (out && out != Py_None) {
        PyObject *r = PyObject_CallMethod(out, "flush", NULL);
        if (r) Py_DECREF(r);
        else PyErr_Clear();
    }
    PyErr_Restore(type, value, tb);
}

/* ---- shapes ------------------------------------------------------------------------------- */

PyObject *pytnt_shape_tuple(tnt_shape s) {
    PyObject *t = PyTuple_New(s.ndim);
    for (int i = 0; t && i < s.ndim; i++) {
        PyObject *d = s.dim[i] == TNT_DIM_NONE ? Py_NewRef(Py_None) : PyLong_FromLongLong(s.dim[i]); /* Keras's None */
        if (!d) {
            Py_DECREF(t);
            return NULL;
        }
        PyTuple_SET_ITEM(t, i, d);
    }
    return t;
}

int pytnt_shape_from(PyObject *seq, tnt_shape *out, const char *what) {
    PyObject *f = PySequence_Fast(seq, "");
    if (!f) {
        PyErr_Format(PyExc_TypeError, "%s: expected a sequence of positive integers", what);
        return 0;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(f);
    if (n > TNT_MAX_DIMS) {
        Py_DECREF(f);
        PyErr_Format(PyExc_ValueError, "%s: %zd dimensions (at most %d)", what, n, TNT_MAX_DIMS);
        return 0;
    }
    out->ndim = (int)n;
    for (Py_ssize_t i = 0; i < n; i++) {
        long long d = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(f, i));
        if (d == -1 && PyErr_Occurred()) {
            Py_DECREF(f);
            PyErr_Format(PyExc_TypeError, "%s: dimension %zd is not an integer", what, i);
            return 0;
        }
        if (d <= 0) {
            Py_DECREF(f);
            PyErr_Format(PyExc_ValueError, "%s: dimension %zd is %lld (expected > 0)", what, i, d);
            return 0;
        }
        out->dim[i] = d;
    }
    Py_DECREF(f);
    return 1;
}

/* ---- runtime ------------------------------------------------------------------------------ */

static PyObject *py_init(PyObject *self, PyObject *noargs) {
    (void)self, (void)noargs;
    tnt_status s;
    Py_BEGIN_ALLOW_THREADS
    s = tnt_init(NULL, NULL);
    Py_END_ALLOW_THREADS
    if (s != TNT_OK) return pytnt_raise(s);
    Py_RETURN_NONE;
}

static PyObject *py_finalize(PyObject *self, PyObject *noargs) {
    (void)self, (void)noargs;
    Py_BEGIN_ALLOW_THREADS
    tnt_finalize();
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

static PyObject *py_get_rank(PyObject *self, PyObject *noargs) {
    (void)self, (void)noargs;
    return PyLong_FromLong(tnt_get_rank());
}
static PyObject *py_get_size(PyObject *self, PyObject *noargs) {
    (void)self, (void)noargs;
    return PyLong_FromLong(tnt_get_size());
}
static PyObject *py_get_master_rank(PyObject *self, PyObject *noargs) {
    (void)self, (void)noargs;
    return PyLong_FromLong(tnt_get_master_rank());
}
static PyObject *py_is_master_rank(PyObject *self, PyObject *noargs) {
    (void)self, (void)noargs;
    return PyBool_FromLong(tnt_is_master_rank());
}
static PyObject *py_gpu_status(PyObject *self, PyObject *noargs) {
    (void)self, (void)noargs;
    return PyUnicode_FromString(tnt_gpu_status());
}
static PyObject *py_gpu_set_tf32(PyObject *self, PyObject *arg) {
    (void)self;
    const int on = PyObject_IsTrue(arg);
    if (on < 0) return NULL;
    tnt_gpu_set_tf32(on != 0);
    Py_RETURN_NONE;
}
static PyObject *py_gpu_tf32_enabled(PyObject *self, PyObject *noargs) {
    (void)self, (void)noargs;
    return PyBool_FromLong(tnt_gpu_tf32_enabled());
}
static PyObject *py_gpu_device_count(PyObject *self, PyObject *noargs) {
    (void)self, (void)noargs;
    return PyLong_FromLong(tnt_gpu_device_count());
}
static PyObject *py_version(PyObject *self, PyObject *noargs) {
    (void)self, (void)noargs;
    return PyUnicode_FromString(tnt_version());
}

static PyObject *py_mixed_precision_native(PyObject *self, PyObject *noargs) {
    (void)self, (void)noargs;
    return PyBool_FromLong(tnt_mixed_precision_native());
}

static PyObject *py_log(PyObject *self, PyObject *args) {
    (void)self;
    int level;
    const char *msg;
    if (!PyArg_ParseTuple(args, "is", &level, &msg)) return NULL;
    if (level < TNT_LOG_DEBUG || level > TNT_LOG_ERROR)
        return PyErr_Format(PyExc_ValueError, "log: level %d (expected 0..3)", level);
    tnt_log((tnt_log_level)level, "%s", msg);
    Py_RETURN_NONE;
}

static PyObject *py_activation_names(PyObject *self, PyObject *noargs) {
    (void)self, (void)noargs;
    PyObject *l = PyList_New(0);
    for (int a = 0; l && a < TNT_ACT_COUNT; a++) {
        PyObject *n = PyUnicode_FromString(tnt_activation_name((tnt_activation)a));
        if (!n || PyList_Append(l, n) < 0) Py_CLEAR(l);
        Py_XDECREF(n);
    }
    return l;
}

/* loss name -> (kind, canonical name); ValueError for an unknown name */
static PyObject *py_loss_kind(PyObject *self, PyObject *args) {
    (void)self;
    const char *name;
    if (!PyArg_ParseTuple(args, "s", &name)) return NULL;
    int k = tnt_loss_from_name(name);
    if (k < 0) return PyErr_Format(PyExc_ValueError, "unknown loss \"%s\"", name);
    return Py_BuildValue("is", k, tnt_loss_name((tnt_loss_kind)k));
}

/* The value of a learning-rate schedule (tarantella.keras.optimizers.schedules) at step. */
static PyObject *py_schedule_value(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *spec;
    long long step;
    if (!PyArg_ParseTuple(args, "OL", &spec, &step)) return NULL;
    tnt_lr_schedule *s = pytnt_schedule_new(spec);
    if (!s) return NULL;
    float v = tnt_lr_schedule_value(s, step);
    tnt_lr_schedule_free(s);
    if (v != v) return pytnt_raise_last();
    return PyFloat_FromDouble(v);
}

static PyObject *py_save_npy(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *path, *arr;
    if (!PyArg_ParseTuple(args, "O&O", PyUnicode_FSConverter, &path, &arr)) return NULL;
    PyArrayObject *a = (PyArrayObject *)PyArray_FROMANY(arr, NPY_FLOAT32, 1, NPY_MAXDIMS,
                                                         NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_ALIGNED);
    if (!a) {
        Py_DECREF(path);
        return NULL;
    }
    tnt_tensor t = {.shape = {.ndim = PyArray_NDIM(a)}, .data = PyArray_DATA(a)};
    if (t.shape.ndim > TNT_MAX_DIMS) {
        Py_DECREF(path);
        Py_DECREF(a);
        return PyErr_Format(PyExc_ValueError, "save_npy: %d dimensions (at most %d)", t.shape.ndim, TNT_MAX_DIMS);
    }
    for (int i = 0; i < t.shape.ndim; i++) t.shape.dim[i] = PyArray_DIM(a, i);
    tnt_status s;
    const char *p = PyBytes_AS_STRING(path);
    Py_BEGIN_ALLOW_THREADS
    s = tnt_save_npy(p, &t);
    Py_END_ALLOW_THREADS
    Py_DECREF(path);
    Py_DECREF(a);
    if (s != TNT_OK) return pytnt_raise(s);
    Py_RETURN_NONE;
}

static PyMethodDef functions[] = {
    {"init", py_init, METH_NOARGS, "init(): tnt_init; starts MPI under the launcher (idempotent)."},
    {"finalize", py_finalize, METH_NOARGS, "finalize(): tnt_finalize."},
    {"get_rank", py_get_rank, METH_NOARGS, "This process's rank."},
    {"get_size", py_get_size, METH_NOARGS, "Number of ranks."},
    {"get_master_rank", py_get_master_rank, METH_NOARGS, "The master's rank (0)."},
    {"is_master_rank", py_is_master_rank, METH_NOARGS, "Whether this process is the master."},
    {"gpu_status", py_gpu_status, METH_NOARGS, "The device tnt_init chose, in one line (tnt_gpu_status)."},
    {"gpu_set_tf32", py_gpu_set_tf32, METH_O, "TF32 for float32 GEMMs and convolutions on the GPU (tnt_gpu_set_tf32)."},
    {"gpu_tf32_enabled", py_gpu_tf32_enabled, METH_NOARGS, "Whether TF32 is on (tnt_gpu_tf32_enabled)."},
    {"gpu_device_count", py_gpu_device_count, METH_NOARGS, "GPUs this process can use (tnt_gpu_device_count)."},
    {"version", py_version, METH_NOARGS, "Version of libtarantella."},
    {"mixed_precision_native", py_mixed_precision_native, METH_NOARGS,
     "Whether mixed_bfloat16 layers compute in bf16 on this CPU (else float32, bit for bit)."},
    {"log", py_log, METH_VARARGS, "log(level, msg): tnt_log (0 debug .. 3 error)."},
    {"activation_names", py_activation_names, METH_NOARGS, "Keras names of the activations."},
    {"loss_kind", py_loss_kind, METH_VARARGS, "loss_kind(name) -> (kind, canonical name)."},
    {"schedule_value", py_schedule_value, METH_VARARGS, "schedule_value(spec, step) -> learning rate."},
    {"save_npy", py_save_npy, METH_VARARGS, "save_npy(path, array): float32 NPY, atomically."},
    {"model_from_json", pytnt_model_from_json, METH_VARARGS, "model_from_json(json) -> Model."},
    {"load_model", (PyCFunction)(void (*)(void))pytnt_load_model, METH_VARARGS | METH_KEYWORDS,
     "load_model(path, compile=True) -> Model (.keras or .h5)."},
    {"dataset_from_arrays", pytnt_dataset_from_arrays, METH_VARARGS,
     "dataset_from_arrays(x, y=None): a dataset borrowing float32 C-contiguous arrays."},
    {"dataset_from_npy", pytnt_dataset_from_npy, METH_VARARGS, "dataset_from_npy(x_path, y_path=None)."},
    {"dataset_from_idx", pytnt_dataset_from_idx, METH_VARARGS, "dataset_from_idx(images, labels=None)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_tarantella",
    "The C core of the tarantella package: libtarantella's models, datasets and callbacks.", -1, functions,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__tarantella(void) {
    import_array();
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    PyTypeObject *types[] = {&pytnt_model_type, &pytnt_dataset_type, &pytnt_dataset_iter_type, &pytnt_callback_type};
    const char *names[] = {"Model", "Dataset", "DatasetIterator", "Callback"};
    for (size_t i = 0; i < sizeof types / sizeof *types; i++) {
        if (PyType_Ready(types[i]) < 0 || PyModule_AddObjectRef(m, names[i], (PyObject *)types[i]) < 0) {
            Py_DECREF(m);
            return NULL;
        }
    }
    if (PyModule_AddFunctions(m, pytnt_callback_functions) < 0 || PyModule_AddFunctions(m, pytnt_objective_functions) < 0 ||
        PyModule_AddFunctions(m, pytnt_tape_functions) < 0 ||
        PyModule_AddStringConstant(m, "__version__", tnt_version()) < 0 ||
        PyModule_AddIntConstant(m, "MAX_DIMS", TNT_MAX_DIMS) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}

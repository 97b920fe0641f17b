/* dataset.c: tarantella._tarantella.Dataset, a tnt_dataset handle, and its iterator.
 *
 * A handle's ops (shuffle, batch, map, ...) consume it, as the C ops consume their input: the
 * pure-Python tarantella.data.Dataset keeps the recipe and builds one chain of handles per
 * Dataset object. Sources borrow the NumPy arrays they are made from (no copy), which the handle
 * keeps alive in its keep list, passed along the chain, with the map functions' contexts.
 *
 * A Python map function runs per sample, when the sample is materialized (on this rank only for
 * its share of a global batch), possibly on the prefetch thread: it takes the GIL there. Samples
 * of a batched dataset are given to it as batches of one, (1, ...). */
#include "pytnt.h"

#include <string.h>

static void dataset_dealloc(pytnt_dataset *self) {
    tnt_dataset *ds = self->ds;
    self->ds = NULL;
    if (ds) { /* a prefetch thread may be waiting for the GIL in a map function */
        Py_BEGIN_ALLOW_THREADS
        tnt_dataset_free(ds);
        Py_END_ALLOW_THREADS
    }
    Py_CLEAR(self->keep); /* after the dataset: its map contexts and borrowed arrays */
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *wrap(tnt_dataset *ds, PyObject *keep) {
    if (!ds) return pytnt_raise_last();
    pytnt_dataset *self = PyObject_New(pytnt_dataset, &pytnt_dataset_type);
    if (!self) {
        tnt_dataset_free(ds);
        return NULL;
    }
    self->ds = ds;
    self->keep = Py_NewRef(keep);
    return (PyObject *)self;
}

tnt_dataset *pytnt_dataset_get(PyObject *o, const char *what) {
    if (!PyObject_TypeCheck(o, &pytnt_dataset_type)) {
        PyErr_Format(PyExc_TypeError, "%s: expected a _tarantella.Dataset, got %.80s", what, Py_TYPE(o)->tp_name);
        return NULL;
    }
    pytnt_dataset *d = (pytnt_dataset *)o;
    if (!d->ds) PyErr_Format(PyExc_RuntimeError, "%s: this dataset handle was consumed by an op", what);
    return d->ds;
}

/* ---- sources ------------------------------------------------------------------------------- */

/* arr as a float32, C-contiguous array of at least one dimension (the samples), or NULL */
static PyArrayObject *samples_array(PyObject *arr, const char *what) {
    PyArrayObject *a = (PyArrayObject *)PyArray_FROMANY(arr, NPY_FLOAT32, 1, TNT_MAX_DIMS + 1,
                                                         NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_ALIGNED |
                                                         NPY_ARRAY_FORCECAST);
    if (!a && PyErr_ExceptionMatches(PyExc_ValueError)) {
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, "%s: expected an array of 1 to %d dimensions (samples first) convertible "
                     "to float32", what, TNT_MAX_DIMS + 1);
    }
    return a;
}

PyObject *pytnt_dataset_from_arrays(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *xo, *yo = Py_None;
    if (!PyArg_ParseTuple(args, "O|O", &xo, &yo)) return NULL;
    PyArrayObject *x = samples_array(xo, "dataset x"), *y = NULL;
    if (!x) return NULL;
    if (yo != Py_None && !(y = samples_array(yo, "dataset y"))) {
        Py_DECREF(x);
        return NULL;
    }
    int64_t n = PyArray_DIM(x, 0);
    if (y && PyArray_DIM(y, 0) != n) {
        PyErr_Format(PyExc_ValueError, "dataset: x has %lld samples, y has %lld", (long long)n,
                     (long long)PyArray_DIM(y, 0));
        Py_DECREF(x);
        Py_DECREF(y);
        return NULL;
    }
    tnt_shape xs = {.ndim = PyArray_NDIM(x) - 1}, ys = {.ndim = y ? PyArray_NDIM(y) - 1 : 0};
    for (int k = 0; k < xs.ndim; k++) xs.dim[k] = PyArray_DIM(x, k + 1);
    for (int k = 0; k < ys.ndim; k++) ys.dim[k] = PyArray_DIM(y, k + 1);
    PyObject *keep = y ? Py_BuildValue("[NN]", x, y) : Py_BuildValue("[N]", x);
    if (!keep) return NULL;
    tnt_dataset *ds = tnt_dataset_from_arrays(PyArray_DATA(x), xs, y ? PyArray_DATA(y) : NULL, ys, n, false);
    PyObject *r = wrap(ds, keep);
    Py_DECREF(keep);
    return r;
}

PyObject *pytnt_dataset_from_npy(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *xp, *yp = NULL;
    if (!PyArg_ParseTuple(args, "O&|O&", PyUnicode_FSConverter, &xp, PyUnicode_FSConverter, &yp)) return NULL;
    tnt_dataset *ds;
    const char *x = PyBytes_AS_STRING(xp), *y = yp ? PyBytes_AS_STRING(yp) : NULL;
    Py_BEGIN_ALLOW_THREADS
    ds = tnt_dataset_from_npy(x, y);
    Py_END_ALLOW_THREADS
    Py_DECREF(xp);
    Py_XDECREF(yp);
    PyObject *keep = PyList_New(0), *r = keep ? wrap(ds, keep) : NULL;
    Py_XDECREF(keep);
    return r;
}

PyObject *pytnt_dataset_from_idx(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *xp, *yp = NULL;
    if (!PyArg_ParseTuple(args, "O&|O&", PyUnicode_FSConverter, &xp, PyUnicode_FSConverter, &yp)) return NULL;
    tnt_dataset *ds;
    const char *x = PyBytes_AS_STRING(xp), *y = yp ? PyBytes_AS_STRING(yp) : NULL;
    Py_BEGIN_ALLOW_THREADS
    ds = tnt_dataset_from_idx(x, y);
    Py_END_ALLOW_THREADS
    Py_DECREF(xp);
    Py_XDECREF(yp);
    PyObject *keep = PyList_New(0), *r = keep ? wrap(ds, keep) : NULL;
    Py_XDECREF(keep);
    return r;
}

/* ---- ops ----------------------------------------------------------------------------------- */

/* Takes self's dataset for an op: NULL with an exception when consumed already. */
static tnt_dataset *take(pytnt_dataset *self) {
    tnt_dataset *ds = pytnt_dataset_get((PyObject *)self, "dataset op");
    self->ds = NULL;
    return ds;
}

static PyObject *ds_shuffle(pytnt_dataset *self, PyObject *args) {
    long long buffer;
    unsigned long long seed = 0;
    if (!PyArg_ParseTuple(args, "L|K", &buffer, &seed)) return NULL;
    tnt_dataset *in = take(self);
    return in ? wrap(tnt_dataset_shuffle(in, buffer, seed), self->keep) : NULL;
}

static PyObject *ds_batch(pytnt_dataset *self, PyObject *args) {
    long long size;
    int drop = 0;
    if (!PyArg_ParseTuple(args, "L|p", &size, &drop)) return NULL;
    tnt_dataset *in = take(self);
    return in ? wrap(tnt_dataset_batch(in, size, drop), self->keep) : NULL;
}

/* A padded shape: a sequence of ints, -1 (None) for the batch's longest; None: -1 everywhere. */
static int padded_from(PyObject *o, tnt_shape *out, const char *what) {
    PyObject *f = PySequence_Fast(o, "");
    if (!f) {
        PyErr_Format(PyExc_TypeError, "padded_batch: %s: expected a sequence of integers", what);
        return 0;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(f);
    out->ndim = (int)(n > TNT_MAX_DIMS ? TNT_MAX_DIMS : n);
    for (Py_ssize_t i = 0; i < n && i < TNT_MAX_DIMS; i++) {
        out->dim[i] = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(f, i));
        if (out->dim[i] == -1 && PyErr_Occurred()) {
            Py_DECREF(f);
            return 0;
        }
    }
    Py_DECREF(f);
    if (n > TNT_MAX_DIMS) {
        PyErr_Format(PyExc_ValueError, "padded_batch: %s has %zd dimensions (at most %d)", what, n, TNT_MAX_DIMS);
        return 0;
    }
    return 1;
}

/* padded_batch(size, drop_remainder, x_padded, y_padded, x_fill, y_fill) */
static PyObject *ds_padded_batch(pytnt_dataset *self, PyObject *args) {
    long long size;
    int drop = 0;
    PyObject *px = Py_None, *py = Py_None;
    float fx = 0, fy = 0;
    if (!PyArg_ParseTuple(args, "Lp|OOff", &size, &drop, &px, &py, &fx, &fy)) return NULL;
    tnt_shape sx, sy;
    if ((px != Py_None && !padded_from(px, &sx, "padded x shape")) ||
        (py != Py_None && !padded_from(py, &sy, "padded y shape")))
        return NULL;
    tnt_dataset *in = take(self);
    return in ? wrap(tnt_dataset_padded_batch(in, size, drop, px != Py_None ? &sx : NULL, py != Py_None ? &sy : NULL,
                                              fx, fy), self->keep)
              : NULL;
}

/* set_extents(x_ext, y_ext=None): each sample's extents, int32 arrays (n, ndim) */
static PyObject *ds_set_extents(pytnt_dataset *self, PyObject *args) {
    PyObject *ox, *oy = Py_None;
    if (!PyArg_ParseTuple(args, "O|O", &ox, &oy)) return NULL;
    if (!pytnt_dataset_get((PyObject *)self, "dataset")) return NULL;
    PyArrayObject *ax = NULL, *ay = NULL;
    if (ox != Py_None && !(ax = (PyArrayObject *)PyArray_FROMANY(ox, NPY_INT32, 0, 2, NPY_ARRAY_C_CONTIGUOUS |
                                                                   NPY_ARRAY_ALIGNED | NPY_ARRAY_FORCECAST)))
        return NULL;
    if (oy != Py_None && !(ay = (PyArrayObject *)PyArray_FROMANY(oy, NPY_INT32, 0, 2, NPY_ARRAY_C_CONTIGUOUS |
                                                                   NPY_ARRAY_ALIGNED | NPY_ARRAY_FORCECAST))) {
        Py_XDECREF(ax);
        return NULL;
    }
    tnt_shape xs = tnt_dataset_x_shape(self->ds), ys = tnt_dataset_y_shape(self->ds);
    int64_t n = tnt_dataset_cardinality(self->ds);
    if ((ax && PyArray_SIZE(ax) != n * xs.ndim) || (ay && PyArray_SIZE(ay) != n * ys.ndim)) {
        Py_XDECREF(ax);
        Py_XDECREF(ay);
        return PyErr_Format(PyExc_ValueError, "set_extents: expected (%lld, %d) x and (%lld, %d) y extents",
                            (long long)n, xs.ndim, (long long)n, ys.ndim);
    }
    tnt_status s = tnt_dataset_set_extents(self->ds, ax ? PyArray_DATA(ax) : NULL, ay ? PyArray_DATA(ay) : NULL);
    Py_XDECREF(ax);
    Py_XDECREF(ay);
    if (s != TNT_OK) return pytnt_raise(s);
    Py_RETURN_NONE;
}

#define COUNT_OP(pyname, cname)                                                                   \
    static PyObject *pyname(pytnt_dataset *self, PyObject *args) {                                \
        long long n;                                                                              \
        if (!PyArg_ParseTuple(args, "L", &n)) return NULL;                                        \
        tnt_dataset *in = take(self);                                                             \
        return in ? wrap(cname(in, n), self->keep) : NULL;                                        \
    }
COUNT_OP(ds_repeat, tnt_dataset_repeat)
COUNT_OP(ds_take, tnt_dataset_take)
COUNT_OP(ds_skip, tnt_dataset_skip)
COUNT_OP(ds_prefetch, tnt_dataset_prefetch)

/* What a map function needs: the Python function, the element shapes in and out. */
typedef struct map_ctx {
    PyObject *fn;
    tnt_shape x_in, y_in, x_out, y_out;
    bool has_y, batch_view;
} map_ctx;

static void map_ctx_free(PyObject *cap) {
    map_ctx *c = PyCapsule_GetPointer(cap, "tnt_map_ctx");
    if (!c) return;
    Py_XDECREF(c->fn);
    PyMem_RawFree(c);
}

/* A copy of n floats of shape s as an array ((1, s...) for a batch view). */
static PyObject *element_array(const float *v, tnt_shape s, bool batch_view) {
    npy_intp dims[TNT_MAX_DIMS + 1];
    int nd = 0;
    if (batch_view) dims[nd++] = 1;
    for (int k = 0; k < s.ndim; k++) dims[nd++] = (npy_intp)s.dim[k];
    PyObject *a = PyArray_SimpleNew(nd, dims, NPY_FLOAT32);
    if (a) memcpy(PyArray_DATA((PyArrayObject *)a), v, (size_t)tnt_shape_numel(s) * sizeof(float));
    return a;
}

/* Writes the map function's value o (of shape s) to out; 0 with an exception. */
static int element_out(PyObject *o, tnt_shape s, float *out, const char *what) {
    PyArrayObject *a = (PyArrayObject *)PyArray_FROMANY(o, NPY_FLOAT32, 0, 0, NPY_ARRAY_C_CONTIGUOUS |
                                                         NPY_ARRAY_ALIGNED | NPY_ARRAY_FORCECAST);
    if (!a) return 0;
    int64_t want = tnt_shape_numel(s);
    if (PyArray_SIZE(a) != want) {
        char buf[128];
        PyErr_Format(PyExc_ValueError, "map: the function's %s has %lld values, its first call gave %s (%lld values)",
                     what, (long long)PyArray_SIZE(a), tnt_shape_str(s, buf, sizeof buf), (long long)want);
        Py_DECREF(a);
        return 0;
    }
    memcpy(out, PyArray_DATA(a), (size_t)want * sizeof(float));
    Py_DECREF(a);
    return 1;
}

static int map_call(const float *x_in, const float *y_in, float *x_out, float *y_out, void *user) {
    map_ctx *c = user;
    PyGILState_STATE g = PyGILState_Ensure();
    int ok = 0;
    PyObject *x = element_array(x_in, c->x_in, c->batch_view), *y = NULL, *r = NULL;
    if (!x) goto done;
    if (c->has_y && !(y = element_array(y_in, c->y_in, c->batch_view))) goto done;
    r = c->has_y ? PyObject_CallFunctionObjArgs(c->fn, x, y, NULL) : PyObject_CallFunctionObjArgs(c->fn, x, NULL);
    if (!r) goto done;
    if (c->has_y) {
        if (!PyTuple_Check(r) || PyTuple_GET_SIZE(r) != 2) {
            PyErr_SetString(PyExc_TypeError, "map: a function over (x, y) elements must return a pair (x, y)");
            goto done;
        }
        ok = element_out(PyTuple_GET_ITEM(r, 0), c->x_out, x_out, "x") &&
             element_out(PyTuple_GET_ITEM(r, 1), c->y_out, y_out, "y");
    } else {
        ok = element_out(r, c->x_out, x_out, "value");
    }
done:
    Py_XDECREF(x);
    Py_XDECREF(y);
    Py_XDECREF(r);
    if (!ok) pytnt_pending_keep();
    PyGILState_Release(g);
    return ok ? 0 : 1;
}

/* map(fn, x_out_shape, y_out_shape): shapes of the function's values (without a batch axis) */
static PyObject *ds_map(pytnt_dataset *self, PyObject *args) {
    PyObject *fn, *xs_o, *ys_o = Py_None;
    if (!PyArg_ParseTuple(args, "OO|O", &fn, &xs_o, &ys_o)) return NULL;
    if (!PyCallable_Check(fn)) return PyErr_Format(PyExc_TypeError, "map: the function is not callable");
    if (!pytnt_dataset_get((PyObject *)self, "map")) return NULL;
    map_ctx *c = PyMem_RawCalloc(1, sizeof *c);
    if (!c) return PyErr_NoMemory();
    PyObject *cap = PyCapsule_New(c, "tnt_map_ctx", map_ctx_free);
    if (!cap) {
        PyMem_RawFree(c);
        return NULL;
    }
    c->fn = Py_NewRef(fn);
    c->x_in = c->x_out = tnt_dataset_x_shape(self->ds);
    c->y_in = c->y_out = tnt_dataset_y_shape(self->ds);
    c->has_y = tnt_dataset_has_labels(self->ds);
    c->batch_view = tnt_dataset_is_batched(self->ds);
    if (!pytnt_shape_from(xs_o, &c->x_out, "map: x shape") ||
        (c->has_y && ys_o != Py_None && !pytnt_shape_from(ys_o, &c->y_out, "map: y shape")) ||
        PyList_Append(self->keep, cap) < 0) {
        Py_DECREF(cap);
        return NULL;
    }
    Py_DECREF(cap); /* the keep list holds it */
    tnt_dataset *in = take(self);
    return wrap(tnt_dataset_map(in, map_call, c, &c->x_out, c->has_y ? &c->y_out : NULL), self->keep);
}

static PyObject *ds_info(pytnt_dataset *self, PyObject *noargs) {
    (void)noargs;
    if (!pytnt_dataset_get((PyObject *)self, "dataset")) return NULL;
    return Py_BuildValue("{s:L,s:N,s:N,s:O,s:O}", "cardinality", (long long)tnt_dataset_cardinality(self->ds),
                         "x_shape", pytnt_shape_tuple(tnt_dataset_x_shape(self->ds)), "y_shape",
                         pytnt_shape_tuple(tnt_dataset_y_shape(self->ds)), "has_labels",
                         tnt_dataset_has_labels(self->ds) ? Py_True : Py_False, "batched",
                         tnt_dataset_is_batched(self->ds) ? Py_True : Py_False);
}

/* set_x_parts([shape, ...]): the sample shapes of the inputs x packs (a model with None
 * dimensions takes them) */
static PyObject *ds_set_x_parts(pytnt_dataset *self, PyObject *arg) {
    if (!pytnt_dataset_get((PyObject *)self, "dataset")) return NULL;
    PyObject *seq = PySequence_Fast(arg, "set_x_parts: expected a list of shapes");
    if (!seq) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    tnt_shape parts[8];
    if (n > 8) {
        Py_DECREF(seq);
        return PyErr_Format(PyExc_ValueError, "set_x_parts: %zd parts (at most 8)", n);
    }
    for (Py_ssize_t i = 0; i < n; i++)
        if (!pytnt_shape_from(PySequence_Fast_GET_ITEM(seq, i), &parts[i], "set_x_parts")) {
            Py_DECREF(seq);
            return NULL;
        }
    Py_DECREF(seq);
    tnt_status s = tnt_dataset_set_x_parts(self->ds, (int)n, parts);
    if (s != TNT_OK) return pytnt_raise(s);
    Py_RETURN_NONE;
}

/* ---- iteration ----------------------------------------------------------------------------- */

typedef struct pytnt_dataset_iter {
    PyObject_HEAD
    PyObject *owner; /* the Dataset handle */
    tnt_dataset_iter *it;
} pytnt_dataset_iter;

static PyObject *ds_iterate(pytnt_dataset *self, PyObject *args) {
    long long epoch = 0;
    if (!PyArg_ParseTuple(args, "|L", &epoch)) return NULL;
    if (!pytnt_dataset_get((PyObject *)self, "iterate")) return NULL;
    tnt_dataset_iter *it;
    /* cleared here, not per element: prefetch threads may run a map that fails before the
     * element that carries the failure is asked for */
    pytnt_pending_clear();
    Py_BEGIN_ALLOW_THREADS
    it = tnt_dataset_iter_new(self->ds, epoch);
    Py_END_ALLOW_THREADS
    if (!it) return pytnt_raise_last();
    pytnt_dataset_iter *r = PyObject_New(pytnt_dataset_iter, &pytnt_dataset_iter_type);
    if (!r) {
        tnt_dataset_iter_free(it);
        return NULL;
    }
    r->owner = Py_NewRef(self);
    r->it = it;
    return (PyObject *)r;
}

static void iter_dealloc(pytnt_dataset_iter *self) {
    tnt_dataset_iter *it = self->it;
    self->it = NULL;
    if (it) {
        Py_BEGIN_ALLOW_THREADS
        tnt_dataset_iter_free(it);
        Py_END_ALLOW_THREADS
        pytnt_pending_clear(); /* a failure of an element nobody asked for */
    }
    Py_CLEAR(self->owner);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *batch_array(const tnt_tensor *t) {
    npy_intp dims[TNT_MAX_DIMS];
    for (int k = 0; k < t->shape.ndim; k++) dims[k] = (npy_intp)t->shape.dim[k];
    PyObject *a = PyArray_SimpleNew(t->shape.ndim, dims, NPY_FLOAT32);
    if (a) memcpy(PyArray_DATA((PyArrayObject *)a), t->data, (size_t)tnt_shape_numel(t->shape) * sizeof(float));
    return a;
}

/* (x, y) of the next element (y None without labels), copies */
static PyObject *iter_next(pytnt_dataset_iter *self) {
    if (!self->it) return NULL;
    tnt_batch b;
    int r;
    Py_BEGIN_ALLOW_THREADS
    r = tnt_dataset_iter_next(self->it, &b);
    Py_END_ALLOW_THREADS
    if (r == 0) return NULL; /* StopIteration */
    if (r < 0) return pytnt_raise_after((tnt_status)r);
    PyObject *x = batch_array(&b.x), *y = b.y.data ? batch_array(&b.y) : Py_NewRef(Py_None);
    if (!x || !y) {
        Py_XDECREF(x);
        Py_XDECREF(y);
        return NULL;
    }
    return Py_BuildValue("(NN)", x, y);
}

static PyMethodDef ds_methods[] = {
    {"shuffle", (PyCFunction)ds_shuffle, METH_VARARGS, "shuffle(buffer_size, seed=0) -> Dataset (consumes)."},
    {"batch", (PyCFunction)ds_batch, METH_VARARGS, "batch(size, drop_remainder=False) -> Dataset (consumes)."},
    {"map", (PyCFunction)ds_map, METH_VARARGS, "map(fn, x_shape, y_shape=None) -> Dataset (consumes)."},
    {"repeat", (PyCFunction)ds_repeat, METH_VARARGS, "repeat(count) -> Dataset (consumes)."},
    {"take", (PyCFunction)ds_take, METH_VARARGS, "take(count) -> Dataset (consumes)."},
    {"skip", (PyCFunction)ds_skip, METH_VARARGS, "skip(count) -> Dataset (consumes)."},
    {"prefetch", (PyCFunction)ds_prefetch, METH_VARARGS, "prefetch(buffer_size) -> Dataset (consumes)."},
    {"padded_batch", (PyCFunction)ds_padded_batch, METH_VARARGS,
     "padded_batch(size, drop_remainder, x_padded=None, y_padded=None, x_fill=0, y_fill=0) -> Dataset (consumes)."},
    {"set_extents", (PyCFunction)ds_set_extents, METH_VARARGS, "set_extents(x_ext, y_ext=None): samples' extents."},
    {"set_x_parts", (PyCFunction)ds_set_x_parts, METH_O, "set_x_parts([shape, ...]): the inputs x packs."},
    {"info", (PyCFunction)ds_info, METH_NOARGS, "{cardinality, x_shape, y_shape, has_labels, batched}."},
    {"iterate", (PyCFunction)ds_iterate, METH_VARARGS, "iterate(epoch=0) -> iterator of (x, y)."},
    {NULL, NULL, 0, NULL},
};

PyTypeObject pytnt_dataset_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "tarantella._tarantella.Dataset",
    .tp_basicsize = sizeof(pytnt_dataset),
    .tp_dealloc = (destructor)dataset_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A libtarantella dataset (tnt_dataset); ops consume the handle.",
    .tp_methods = ds_methods,
};

PyTypeObject pytnt_dataset_iter_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "tarantella._tarantella.DatasetIterator",
    .tp_basicsize = sizeof(pytnt_dataset_iter),
    .tp_dealloc = (destructor)iter_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_iter = PyObject_SelfIter,
    .tp_iternext = (iternextfunc)iter_next,
};

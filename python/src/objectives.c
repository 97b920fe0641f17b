/* objectives.c: Keras's loss and metric objects outside fit (loss(y_true, y_pred), a metric's
 * update_state and result), through the library's tnt_loss_value and tnt_metric_* on arrays. */
#include "pytnt.h"

/* a C-contiguous float32 (or float64 for state) view of o; NULL with an exception */
static PyArrayObject *arr(PyObject *o, int type) {
    return (PyArrayObject *)PyArray_FROMANY(o, type, 0, NPY_MAXDIMS,
                                            NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_ALIGNED | NPY_ARRAY_FORCECAST);
}

/* the batch's output shape (without the batch) and sample count from y_pred */
static int out_shape(PyArrayObject *p, tnt_shape *out, int64_t *n) {
    int nd = PyArray_NDIM(p);
    if (nd < 1 || nd - 1 > TNT_MAX_DIMS)
        return PyErr_Format(PyExc_ValueError, "y_pred of %d dimensions: expected (batch, ...)", nd), 0;
    *n = PyArray_DIM(p, 0);
    *out = (tnt_shape){.ndim = nd - 1};
    for (int i = 1; i < nd; i++) out->dim[i - 1] = PyArray_DIM(p, i);
    if (nd == 1) out->ndim = 0; /* (batch,): one value per sample */
    return 1;
}

/* labels must hold what the loss reads: n * per values */
static int check_labels(PyArrayObject *y, int64_t want, const char *who) {
    if (PyArray_SIZE(y) != want)
        return PyErr_Format(PyExc_ValueError, "%s: y_true has %zd values, y_pred's layout needs %lld", who,
                            (Py_ssize_t)PyArray_SIZE(y), (long long)want), 0;
    return 1;
}

static int sparse_per_sample(tnt_shape out) {
    int64_t numel = tnt_shape_numel(out);
    return (int)(out.ndim ? numel / out.dim[out.ndim - 1] : 1);
}

static PyObject *py_loss_value(PyObject *self, PyObject *args) {
    (void)self;
    int kind, from_logits;
    double smoothing, delta;
    PyObject *yo, *po, *wo;
    if (!PyArg_ParseTuple(args, "ipddOOO", &kind, &from_logits, &smoothing, &delta, &yo, &po, &wo)) return NULL;
    PyArrayObject *y = arr(yo, NPY_FLOAT32), *p = y ? arr(po, NPY_FLOAT32) : NULL, *w = NULL;
    PyObject *r = NULL;
    tnt_shape out;
    int64_t n;
    if (!p || !out_shape(p, &out, &n)) goto done;
    int64_t per = kind == TNT_SPARSE_CATEGORICAL_CROSSENTROPY ? sparse_per_sample(out) : tnt_shape_numel(out);
    if (!check_labels(y, n * per, tnt_loss_name((tnt_loss_kind)kind))) goto done;
    if (wo != Py_None && (!(w = arr(wo, NPY_FLOAT32)) || !check_labels(w, n, "sample_weight"))) goto done;
    double v = 0;
    tnt_status s = tnt_loss_value((tnt_loss_kind)kind, from_logits, (float)smoothing, (float)delta, out, n,
                                  PyArray_DATA(p), PyArray_DATA(y), w ? PyArray_DATA(w) : NULL, &v);
    r = s == TNT_OK ? PyFloat_FromDouble(v) : pytnt_raise(s);
done:
    Py_XDECREF(y), Py_XDECREF(p), Py_XDECREF(w);
    return r;
}

static PyObject *py_metric_update(PyObject *self, PyObject *args) {
    (void)self;
    const char *spec;
    int loss;
    PyObject *yo, *po, *wo, *so;
    if (!PyArg_ParseTuple(args, "siOOOO", &spec, &loss, &yo, &po, &wo, &so)) return NULL;
    if (!PyArray_Check(so) || PyArray_TYPE((PyArrayObject *)so) != NPY_FLOAT64 ||
        !PyArray_IS_C_CONTIGUOUS((PyArrayObject *)so) || PyArray_SIZE((PyArrayObject *)so) != tnt_metric_state_size())
        return PyErr_Format(PyExc_ValueError, "metric state: expected a float64 array of %lld values",
                            (long long)tnt_metric_state_size());
    PyArrayObject *y = arr(yo, NPY_FLOAT32), *p = y ? arr(po, NPY_FLOAT32) : NULL, *w = NULL;
    PyObject *r = NULL;
    tnt_shape out;
    int64_t n;
    if (!p || !out_shape(p, &out, &n)) goto done;
    int64_t per = loss == TNT_SPARSE_CATEGORICAL_CROSSENTROPY ? sparse_per_sample(out) : tnt_shape_numel(out);
    if (!check_labels(y, n * per, spec)) goto done;
    if (wo != Py_None && (!(w = arr(wo, NPY_FLOAT32)) || !check_labels(w, n, "sample_weight"))) goto done;
    tnt_status s = tnt_metric_update_state(spec, (tnt_loss_kind)loss, out, n, PyArray_DATA(p), PyArray_DATA(y),
                                           w ? PyArray_DATA(w) : NULL, PyArray_DATA((PyArrayObject *)so));
    r = s == TNT_OK ? Py_NewRef(Py_None) : pytnt_raise(s);
done:
    Py_XDECREF(y), Py_XDECREF(p), Py_XDECREF(w);
    return r;
}

static PyObject *py_metric_result(PyObject *self, PyObject *args) {
    (void)self;
    const char *spec;
    int loss;
    PyObject *so;
    if (!PyArg_ParseTuple(args, "siO", &spec, &loss, &so)) return NULL;
    if (!PyArray_Check(so) || PyArray_TYPE((PyArrayObject *)so) != NPY_FLOAT64 ||
        PyArray_SIZE((PyArrayObject *)so) != tnt_metric_state_size())
        return PyErr_Format(PyExc_ValueError, "metric state: expected a float64 array");
    double v;
    tnt_status s = tnt_metric_result(spec, (tnt_loss_kind)loss, PyArray_DATA((PyArrayObject *)so), &v);
    return s == TNT_OK ? PyFloat_FromDouble(v) : pytnt_raise(s);
}

static PyObject *py_metric_state_size(PyObject *self, PyObject *noargs) {
    (void)self, (void)noargs;
    return PyLong_FromLongLong(tnt_metric_state_size());
}

PyMethodDef pytnt_objective_functions[] = {
    {"loss_value", py_loss_value, METH_VARARGS,
     "loss_value(kind, from_logits, label_smoothing, delta, y_true, y_pred, sample_weight) -> float."},
    {"metric_update", py_metric_update, METH_VARARGS,
     "metric_update(spec, loss_kind, y_true, y_pred, sample_weight, state): adds a batch to state."},
    {"metric_result", py_metric_result, METH_VARARGS, "metric_result(spec, loss_kind, state) -> float."},
    {"metric_state_size", py_metric_state_size, METH_NOARGS, "Doubles in a metric's state."},
    {NULL, NULL, 0, NULL},
};

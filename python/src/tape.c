/* tape.c: custom training loops from Python (tarantella/keras/_tape.py): a model's forward kept
 * for a backward from the loss gradient w.r.t. its outputs, the loss's operation graph run once
 * with its gradient, and the optimizer's update from given gradients. Functions of the module,
 * each taking the model handle first. */
#include "pytnt.h"

static tnt_model *model_of(PyObject *o) {
    if (!PyObject_TypeCheck(o, &pytnt_model_type))
        return PyErr_Format(PyExc_TypeError, "expected a library model, got %.80s", Py_TYPE(o)->tp_name), NULL;
    return ((pytnt_model *)o)->m;
}

static PyArrayObject *f32(PyObject *o) {
    return (PyArrayObject *)PyArray_FROMANY(o, NPY_FLOAT32, 0, TNT_MAX_DIMS,
                                            NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_ALIGNED | NPY_ARRAY_FORCECAST);
}

static tnt_tensor view(PyArrayObject *a) {
    tnt_tensor t = {.shape = {.ndim = PyArray_NDIM(a)}, .data = PyArray_DATA(a)};
    for (int k = 0; k < t.shape.ndim; k++) t.shape.dim[k] = PyArray_DIM(a, k);
    return t;
}

/* A new array with t's values; t freed. */
static PyObject *to_array(tnt_tensor *t) {
    npy_intp dims[TNT_MAX_DIMS];
    for (int k = 0; k < t->shape.ndim; k++) dims[k] = (npy_intp)t->shape.dim[k];
    PyObject *a = PyArray_SimpleNew(t->shape.ndim, dims, NPY_FLOAT32);
    if (a) memcpy(PyArray_DATA((PyArrayObject *)a), t->data, (size_t)tnt_shape_numel(t->shape) * sizeof(float));
    tnt_tensor_free(t);
    return a;
}

/* tape_forward(model, x, training) -> the packed outputs */
static PyObject *py_tape_forward(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *mo, *xo;
    int training, want_dx = 0;
    if (!PyArg_ParseTuple(args, "OOp|p", &mo, &xo, &training, &want_dx)) return NULL;
    tnt_model *m = model_of(mo);
    PyArrayObject *x = m ? f32(xo) : NULL;
    if (!x) return NULL;
    tnt_tensor xt = view(x), *out = NULL;
    tnt_status s = tnt_model_tape_forward(m, &xt, training, want_dx, &out);
    Py_DECREF(x);
    return s == TNT_OK ? to_array(out) : pytnt_raise(s);
}

/* tape_backward(model, dout, penalty_scale, wanted, dx=None) -> [gradient array or None per weight];
 * dx: a float32 array (packed inputs' shape) the inputs' gradients are written to */
static PyObject *py_tape_backward(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *mo, *dobj, *wanted, *dxo = Py_None;
    double scale;
    if (!PyArg_ParseTuple(args, "OOdO|O", &mo, &dobj, &scale, &wanted, &dxo)) return NULL;
    float *dx = NULL;
    if (dxo != Py_None) {
        if (!PyArray_Check(dxo) || PyArray_TYPE((PyArrayObject *)dxo) != NPY_FLOAT32 ||
            !PyArray_IS_C_CONTIGUOUS((PyArrayObject *)dxo) || !PyArray_ISWRITEABLE((PyArrayObject *)dxo))
            return PyErr_Format(PyExc_TypeError, "tape_backward: dx must be a writable C-contiguous float32 array");
        dx = PyArray_DATA((PyArrayObject *)dxo);
    }
    tnt_model *m = model_of(mo);
    PyArrayObject *d = m ? f32(dobj) : NULL;
    if (!d) return NULL;
    int n = tnt_model_num_weights(m);
    PyObject *l = PyList_New(n);
    float **grads = calloc((size_t)n + 1, sizeof *grads);
    tnt_status s = TNT_OK;
    for (int i = 0; l && grads && i < n; i++) {
        tnt_shape shape;
        PyObject *w = PySequence_Contains(wanted, PyLong_FromLong(i)) == 1 ? Py_True : Py_None;
        if ((s = tnt_model_weight(m, i, NULL, &shape, NULL)) != TNT_OK) break;
        if (w == Py_None || !tnt_model_weight_trainable(m, i)) {
            PyList_SET_ITEM(l, i, Py_NewRef(Py_None));
            continue;
        }
        npy_intp dims[TNT_MAX_DIMS];
        for (int k = 0; k < shape.ndim; k++) dims[k] = (npy_intp)shape.dim[k];
        PyObject *a = PyArray_SimpleNew(shape.ndim, dims, NPY_FLOAT32);
        if (!a) {
            Py_CLEAR(l);
            break;
        }
        grads[i] = PyArray_DATA((PyArrayObject *)a);
        PyList_SET_ITEM(l, i, a);
    }
    tnt_tensor dt = view(d);
    if (l && grads && s == TNT_OK) s = tnt_model_tape_backward(m, &dt, (float)scale, grads, dx);
    free(grads);
    Py_DECREF(d);
    if (!l) return NULL;
    if (s != TNT_OK) {
        Py_DECREF(l);
        return pytnt_raise(s);
    }
    return l;
}

static PyObject *py_tape_penalty(PyObject *self, PyObject *mo) {
    (void)self;
    tnt_model *m = model_of(mo);
    double v = 0;
    if (!m) return NULL;
    tnt_status s = tnt_model_tape_penalty(m, &v);
    return s == TNT_OK ? PyFloat_FromDouble(v) : pytnt_raise(s);
}

/* trainable_flags(model) -> [bool per weight] */
static PyObject *py_trainable_flags(PyObject *self, PyObject *mo) {
    (void)self;
    tnt_model *m = model_of(mo);
    if (!m) return NULL;
    int n = tnt_model_num_weights(m);
    PyObject *l = PyList_New(n);
    for (int i = 0; l && i < n; i++) PyList_SET_ITEM(l, i, PyBool_FromLong(tnt_model_weight_trainable(m, i)));
    return l;
}

static PyObject *py_set_optimizer(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *mo, *spec;
    if (!PyArg_ParseTuple(args, "OO", &mo, &spec)) return NULL;
    tnt_model *m = model_of(mo);
    tnt_optimizer *o = m ? pytnt_optimizer_new(spec) : NULL;
    if (!o) return NULL;
    tnt_status s = tnt_model_set_optimizer(m, o);
    return s == TNT_OK ? Py_NewRef(Py_None) : pytnt_raise(s);
}

/* apply_gradients(model, [index], [gradient]) */
static PyObject *py_apply_gradients(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *mo, *io, *go;
    if (!PyArg_ParseTuple(args, "OOO", &mo, &io, &go)) return NULL;
    tnt_model *m = model_of(mo);
    if (!m) return NULL;
    Py_ssize_t n = PySequence_Size(io);
    if (n < 0 || PySequence_Size(go) != n)
        return PyErr_Format(PyExc_ValueError, "apply_gradients: as many gradients as weights are needed");
    int *index = calloc((size_t)n + 1, sizeof *index);
    const float **grads = calloc((size_t)n + 1, sizeof *grads);
    PyArrayObject **keep = calloc((size_t)n + 1, sizeof *keep);
    PyObject *r = NULL;
    if (!index || !grads || !keep) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t j = 0; j < n; j++) {
        PyObject *i = PySequence_GetItem(io, j), *g = PySequence_GetItem(go, j);
        index[j] = i ? (int)PyLong_AsLong(i) : -1;
        keep[j] = g ? f32(g) : NULL;
        Py_XDECREF(i), Py_XDECREF(g);
        if (PyErr_Occurred() || !keep[j]) goto done;
        tnt_shape shape;
        tnt_status s = tnt_model_weight(m, index[j], NULL, &shape, NULL);
        if (s != TNT_OK) {
            pytnt_raise(s);
            goto done;
        }
        if (PyArray_SIZE(keep[j]) != tnt_shape_numel(shape)) {
            char a[96];
            PyErr_Format(PyExc_ValueError, "apply_gradients: the gradient of weight %d has %zd values, the weight's "
                         "shape is %s", index[j], (Py_ssize_t)PyArray_SIZE(keep[j]), tnt_shape_str(shape, a, sizeof a));
            goto done;
        }
        grads[j] = PyArray_DATA(keep[j]);
    }
    tnt_status s = tnt_model_apply_gradients(m, (int)n, index, grads);
    r = s == TNT_OK ? Py_NewRef(Py_None) : pytnt_raise(s);
done:
    for (Py_ssize_t j = 0; keep && j < n; j++) Py_XDECREF(keep[j]);
    free(index), free(grads), free(keep);
    return r;
}

/* opgraph_run(json, [inputs], douts or None) -> ([outputs], [input gradients] or None) */
static PyObject *py_opgraph_run(PyObject *self, PyObject *args) {
    (void)self;
    const char *json;
    PyObject *ins, *douts;
    if (!PyArg_ParseTuple(args, "sOO", &json, &ins, &douts)) return NULL;
    tnt_opgraph *g = tnt_opgraph_from_json(json);
    if (!g) return pytnt_raise_last();
    Py_ssize_t ni = PySequence_Size(ins), no = douts == Py_None ? 0 : PySequence_Size(douts);
    PyObject *r = NULL;
    PyArrayObject *keep[128] = {0}, *dkeep[128] = {0};
    tnt_tensor tin[128], tdo[128], *outs[128] = {0}, *dins[128] = {0};
    const tnt_tensor *pin[128], *pdo[128];
    if (ni < 0 || ni > 64 || no < 0 || no > 64) {
        PyErr_Format(PyExc_ValueError, "opgraph_run: at most 64 inputs and outputs");
        goto done;
    }
    for (Py_ssize_t i = 0; i < ni; i++) {
        PyObject *o = PySequence_GetItem(ins, i);
        keep[i] = o ? f32(o) : NULL;
        Py_XDECREF(o);
        if (!keep[i]) goto done;
        tin[i] = view(keep[i]), pin[i] = &tin[i];
    }
    for (Py_ssize_t k = 0; k < no; k++) {
        PyObject *o = PySequence_GetItem(douts, k);
        dkeep[k] = o ? f32(o) : NULL;
        Py_XDECREF(o);
        if (!dkeep[k]) goto done;
        tdo[k] = view(dkeep[k]), pdo[k] = &tdo[k];
    }
    tnt_status s = tnt_opgraph_run(g, pin, outs, douts == Py_None ? NULL : pdo, douts == Py_None ? NULL : dins);
    if (s != TNT_OK) {
        pytnt_raise(s);
        goto done;
    }
    int n_out = 0;
    while (n_out < 64 && outs[n_out]) n_out++;
    PyObject *lo = PyList_New(n_out), *ld = douts == Py_None ? Py_NewRef(Py_None) : PyList_New(ni);
    for (int k = 0; lo && k < n_out; k++) PyList_SET_ITEM(lo, k, to_array(outs[k])), outs[k] = NULL;
    for (Py_ssize_t i = 0; ld && ld != Py_None && i < ni; i++) PyList_SET_ITEM(ld, i, to_array(dins[i])), dins[i] = NULL;
    r = lo && ld ? Py_BuildValue("(NN)", lo, ld) : NULL;
done:
    for (int i = 0; i < 128; i++) {
        Py_XDECREF(keep[i]), Py_XDECREF(dkeep[i]);
        tnt_tensor_free(outs[i]), tnt_tensor_free(dins[i]);
    }
    tnt_opgraph_free(g);
    return r;
}

PyMethodDef pytnt_tape_functions[] = {
    {"tape_forward", py_tape_forward, METH_VARARGS, "tape_forward(model, x, training) -> packed outputs."},
    {"tape_backward", py_tape_backward, METH_VARARGS,
     "tape_backward(model, dout, penalty_scale, wanted indices) -> [gradient or None per weight]."},
    {"tape_penalty", py_tape_penalty, METH_O, "tape_penalty(model) -> the regularization penalty (model.losses)."},
    {"trainable_flags", py_trainable_flags, METH_O, "trainable_flags(model) -> [bool per weight]."},
    {"set_optimizer", py_set_optimizer, METH_VARARGS, "set_optimizer(model, optimizer_spec)."},
    {"apply_gradients", py_apply_gradients, METH_VARARGS, "apply_gradients(model, [index], [gradient])."},
    {"opgraph_run", py_opgraph_run, METH_VARARGS, "opgraph_run(json, inputs, douts) -> (outputs, input grads)."},
    {NULL, NULL, 0, NULL},
};

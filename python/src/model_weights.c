/* model_weights.c: the Model handle's weights as NumPy arrays and its files (save,
 * load_weights); registered in model.c's method table. */
#include "pytnt.h"

/* ---- weights ------------------------------------------------------------------------------- */

/* [(name, shape), ...] in Keras's get_weights order */
PyObject *pytnt_model_weights_info(pytnt_model *self, PyObject *noargs) {
    (void)noargs;
    if (!pytnt_model_enter(self, 0)) return NULL;
    int n = tnt_model_num_weights(self->m);
    PyObject *l = PyList_New(n);
    for (int i = 0; l && i < n; i++) {
        const char *name;
        tnt_shape shape;
        tnt_status s = tnt_model_weight(self->m, i, &name, &shape, NULL);
        if (s != TNT_OK) {
            Py_DECREF(l);
            return pytnt_raise(s);
        }
        PyObject *t = Py_BuildValue("(sN)", name, pytnt_shape_tuple(shape));
        if (!t) Py_CLEAR(l);
        else PyList_SET_ITEM(l, i, t);
    }
    return l;
}

PyObject *pytnt_new_array(tnt_shape shape) {
    npy_intp dims[TNT_MAX_DIMS];
    for (int k = 0; k < shape.ndim; k++) dims[k] = (npy_intp)shape.dim[k];
    return PyArray_SimpleNew(shape.ndim, dims, NPY_FLOAT32);
}

/* get_weights(): a list of float32 arrays (copies), read through tnt_get_weights (no writable
 * view: a model whose weights live in the node's shared window keeps them there) */
PyObject *pytnt_model_get_weights(pytnt_model *self, PyObject *noargs) {
    (void)noargs;
    if (!pytnt_model_enter(self, 0)) return NULL;
    int n = tnt_model_num_weights(self->m);
    int64_t total = tnt_model_count_params(self->m);
    float *all = PyMem_Malloc((size_t)(total > 0 ? total : 1) * sizeof(float));
    if (!all) return PyErr_NoMemory();
    tnt_status s = tnt_get_weights(self->m, all, total);
    PyObject *l = s == TNT_OK ? PyList_New(n) : pytnt_raise(s);
    const float *from = all;
    for (int i = 0; l && i < n; i++) {
        tnt_shape shape;
        PyObject *a = (s = tnt_model_weight(self->m, i, NULL, &shape, NULL)) == TNT_OK ? pytnt_new_array(shape)
                                                                                        : pytnt_raise(s);
        if (!a) {
            Py_CLEAR(l);
            break;
        }
        memcpy(PyArray_DATA((PyArrayObject *)a), from, (size_t)tnt_shape_numel(shape) * sizeof(float));
        from += tnt_shape_numel(shape);
        PyList_SET_ITEM(l, i, a);
    }
    PyMem_Free(all);
    return l;
}

/* set_weights(list): every weight, each array of exactly its shape, as Keras checks them */
PyObject *pytnt_model_set_weights(pytnt_model *self, PyObject *arg) {
    if (!pytnt_model_enter(self, 0)) return NULL;
    PyObject *seq = PySequence_Fast(arg, "set_weights: expected a list of arrays");
    if (!seq) return NULL;
    int n = tnt_model_num_weights(self->m);
    if (PySequence_Fast_GET_SIZE(seq) != n) {
        PyErr_Format(PyExc_ValueError, "set_weights: %zd arrays given, the model has %d weights",
                     PySequence_Fast_GET_SIZE(seq), n);
        Py_DECREF(seq);
        return NULL;
    }
    int64_t total = tnt_model_count_params(self->m), off = 0;
    float *buf = PyMem_Malloc((size_t)(total > 0 ? total : 1) * sizeof(float));
    if (!buf) {
        Py_DECREF(seq);
        return PyErr_NoMemory();
    }
    PyObject *result = NULL;
    for (int i = 0; i < n; i++) {
        const char *name;
        tnt_shape shape;
        tnt_status s = tnt_model_weight(self->m, i, &name, &shape, NULL);
        if (s != TNT_OK) {
            pytnt_raise(s);
            goto done;
        }
        PyArrayObject *a = (PyArrayObject *)PyArray_FROMANY(PySequence_Fast_GET_ITEM(seq, i), NPY_FLOAT32, 0, 0,
                                                             NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_ALIGNED |
                                                             NPY_ARRAY_FORCECAST);
        if (!a) goto done;
        int ok = PyArray_NDIM(a) == shape.ndim;
        for (int k = 0; ok && k < shape.ndim; k++) ok = PyArray_DIM(a, k) == shape.dim[k];
        if (!ok) {
            char want[128];
            tnt_shape have = {.ndim = PyArray_NDIM(a) > TNT_MAX_DIMS ? TNT_MAX_DIMS : PyArray_NDIM(a)};
            for (int k = 0; k < have.ndim; k++) have.dim[k] = PyArray_DIM(a, k);
            char got[128];
            PyErr_Format(PyExc_ValueError, "set_weights: weight %d (%s) has shape %s, the array given has shape %s",
                         i, name, tnt_shape_str(shape, want, sizeof want), tnt_shape_str(have, got, sizeof got));
            Py_DECREF(a);
            goto done;
        }
        int64_t k = tnt_shape_numel(shape);
        memcpy(buf + off, PyArray_DATA(a), (size_t)k * sizeof(float));
        off += k;
        Py_DECREF(a);
    }
    tnt_status s = tnt_set_weights(self->m, buf, total);
    if (s != TNT_OK) pytnt_raise(s);
    else result = Py_NewRef(Py_None);
done:
    PyMem_Free(buf);
    Py_DECREF(seq);
    return result;
}

/* copy_weights_from(src, [i...], [j...]): weight i of the model handle src into weight j of this
 * one, for shared layers (no arrays in between, no other weight copied) */
PyObject *pytnt_model_copy_weights_from(pytnt_model *self, PyObject *args) {
    pytnt_model *src;
    PyObject *from, *to;
    if (!PyArg_ParseTuple(args, "O!OO", &pytnt_model_type, &src, &from, &to)) return NULL;
    if (!pytnt_model_enter(self, 0) || !pytnt_model_enter(src, 0)) return NULL;
    PyObject *a = PySequence_Fast(from, "copy_weights_from: expected a list of indices"), *b = NULL;
    if (a) b = PySequence_Fast(to, "copy_weights_from: expected a list of indices");
    int *idx = NULL, n = 0;
    PyObject *result = NULL;
    if (!b) goto done;
    if (PySequence_Fast_GET_SIZE(a) != PySequence_Fast_GET_SIZE(b) || PySequence_Fast_GET_SIZE(a) > INT32_MAX / 2) {
        PyErr_Format(PyExc_ValueError, "copy_weights_from: %zd source indices, %zd destination ones",
                     PySequence_Fast_GET_SIZE(a), PySequence_Fast_GET_SIZE(b));
        goto done;
    }
    n = (int)PySequence_Fast_GET_SIZE(a);
    if (!(idx = PyMem_Malloc((size_t)(2 * n + 1) * sizeof(int)))) {
        PyErr_NoMemory();
        goto done;
    }
    for (int k = 0; k < 2 * n; k++) {
        long v = PyLong_AsLong(PySequence_Fast_GET_ITEM(k < n ? a : b, k % n));
        if (v == -1 && PyErr_Occurred()) goto done;
        idx[k] = v < INT32_MIN ? INT32_MIN : v > INT32_MAX ? INT32_MAX : (int)v; /* out of range: the library says */
    }
    tnt_status s = tnt_model_copy_weights(self->m, src->m, n, idx, idx + n);
    result = s == TNT_OK ? Py_NewRef(Py_None) : pytnt_raise(s);
done:
    PyMem_Free(idx);
    Py_XDECREF(a);
    Py_XDECREF(b);
    return result;
}

/* ---- files --------------------------------------------------------------------------------- */

PyObject *pytnt_model_save(pytnt_model *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"path", "weights_only", "save_all_devices", NULL};
    PyObject *path;
    int weights_only = 0, all = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O&|pp", kwlist, PyUnicode_FSConverter, &path, &weights_only, &all))
        return NULL;
    if (!pytnt_model_enter(self, 0)) {
        Py_DECREF(path);
        return NULL;
    }
    tnt_status s;
    const char *p = PyBytes_AS_STRING(path);
    tnt_save_opts o = {.save_all_devices = all};
    Py_BEGIN_ALLOW_THREADS
    s = weights_only ? tnt_save_weights(self->m, p, &o) : tnt_save_model(self->m, p, &o);
    Py_END_ALLOW_THREADS
    Py_DECREF(path);
    if (s != TNT_OK) return pytnt_raise(s);
    Py_RETURN_NONE;
}

PyObject *pytnt_model_load_weights(pytnt_model *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"path", "by_name", NULL};
    PyObject *path;
    int by_name = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O&|p", kwlist, PyUnicode_FSConverter, &path, &by_name)) return NULL;
    if (!pytnt_model_enter(self, 0)) {
        Py_DECREF(path);
        return NULL;
    }
    tnt_status s;
    const char *p = PyBytes_AS_STRING(path);
    Py_BEGIN_ALLOW_THREADS
    s = tnt_load_weights(self->m, p, by_name);
    Py_END_ALLOW_THREADS
    Py_DECREF(path);
    if (s != TNT_OK) return pytnt_raise(s);
    Py_RETURN_NONE;
}

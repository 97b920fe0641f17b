/* pytnt.h: shared declarations of the CPython extension tarantella._tarantella (module.c,
 * model.c, model_weights.c, dataset.c, callbacks.c). The extension is a client of the public API
 * only (include/tarantella.h); the Keras-shaped surface is the pure-Python package around it.
 *
 * Threads and the GIL: fit, evaluate, predict, dataset iteration and file I/O run with the GIL
 * released; Python callbacks, learning-rate schedules and dataset map functions take it back
 * (PyGILState_Ensure), also on the dataset's prefetch thread. A Python exception raised in such a
 * function is kept (pytnt_pending_*) and raised again when the C call that ran it returns. */
#ifndef PYTNT_H
#define PYTNT_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#define PY_ARRAY_UNIQUE_SYMBOL pytnt_ARRAY_API
#ifndef PYTNT_MODULE_C
#define NO_IMPORT_ARRAY
#endif
#include <numpy/arrayobject.h>

#include "tarantella.h"

/* ---- errors (module.c) ---- */
/* Raises the exception of status s with the library's last message; returns NULL. ValueError for
 * bad arguments, shapes and formats, OSError (FileNotFoundError where the file is missing) for
 * I/O, MemoryError, NotImplementedError for unsupported requests, RuntimeError otherwise. */
PyObject *pytnt_raise(tnt_status s);
/* As pytnt_raise with tnt_last_status(): for calls that return NULL. */
PyObject *pytnt_raise_last(void);
/* After a failed C call that may have run Python code: the kept Python exception if there is one
 * (the library's message is attached as a note), else pytnt_raise(s). Returns NULL. */
PyObject *pytnt_raise_after(tnt_status s);
/* With the GIL: keeps the current Python exception (the first one wins) and clears it. */
void pytnt_pending_keep(void);
/* With the GIL: drops a kept exception (before a C call that may run Python code). */
void pytnt_pending_clear(void);
/* Writes fflush(stdout) and sys.stdout.flush() (before and after Python runs in a C call, so
 * that the library's progress output and Python's prints keep their order). With the GIL. */
void pytnt_flush_stdout(void);

/* ---- shapes ---- */
/* A tuple of ints from a shape, and back (a sequence of positive ints; false with an exception). */
PyObject *pytnt_shape_tuple(tnt_shape s);
int pytnt_shape_from(PyObject *seq, tnt_shape *out, const char *what);

/* ---- models (model.c) ---- */
typedef struct pytnt_model {
    PyObject_HEAD
    tnt_model *m;
    int busy;            /* fit, evaluate or predict running */
    unsigned long owner; /* the thread that runs it */
} pytnt_model;
extern PyTypeObject pytnt_model_type;
PyObject *pytnt_model_wrap(tnt_model *m); /* takes m; NULL with an exception (m freed) */
PyObject *pytnt_model_from_json(PyObject *self, PyObject *args);
PyObject *pytnt_load_model(PyObject *self, PyObject *args, PyObject *kw);
/* Whether a call of kind (0 any, 1 fit or compile) may run on the model now; 0 with an exception
 * while fit, evaluate or predict runs on another thread (or kind 1 inside their callbacks). */
int pytnt_model_enter(pytnt_model *self, int kind);
/* The Model methods on weights and files (model_weights.c). */
PyObject *pytnt_model_weights_info(pytnt_model *self, PyObject *noargs);
PyObject *pytnt_model_get_weights(pytnt_model *self, PyObject *noargs);
PyObject *pytnt_model_set_weights(pytnt_model *self, PyObject *arg);
PyObject *pytnt_model_copy_weights_from(pytnt_model *self, PyObject *args);
PyObject *pytnt_model_save(pytnt_model *self, PyObject *args, PyObject *kw);
PyObject *pytnt_model_load_weights(pytnt_model *self, PyObject *args, PyObject *kw);
/* An uninitialised float32 array of shape; NULL with an exception. */
PyObject *pytnt_new_array(tnt_shape shape);
/* (name, {hyperparameters}, schedule spec or None) -> a new optimizer; NULL with an exception. */
tnt_optimizer *pytnt_optimizer_new(PyObject *spec);
/* Keras's logs dict {name: float} of a tnt_logs. */
PyObject *pytnt_logs_dict(const tnt_logs *logs);

/* ---- datasets (dataset.c) ---- */
typedef struct pytnt_dataset {
    PyObject_HEAD
    tnt_dataset *ds;  /* NULL once consumed by an op */
    PyObject *keep;   /* list: arrays borrowed by the source, map functions */
} pytnt_dataset;
extern PyTypeObject pytnt_dataset_type;
extern PyTypeObject pytnt_dataset_iter_type;
PyObject *pytnt_dataset_from_arrays(PyObject *self, PyObject *args);
PyObject *pytnt_dataset_from_npy(PyObject *self, PyObject *args);
PyObject *pytnt_dataset_from_idx(PyObject *self, PyObject *args);
/* The live dataset of a handle, or NULL with an exception (not a handle, or consumed). */
tnt_dataset *pytnt_dataset_get(PyObject *o, const char *what);

/* ---- callbacks (callbacks.c) ---- */
typedef struct pytnt_callback {
    PyObject_HEAD
    tnt_callback cb;
    PyObject *ref; /* a Python object the C callback calls (schedule function, callback object) */
} pytnt_callback;
extern PyTypeObject pytnt_callback_type;
extern PyMethodDef pytnt_callback_functions[];
extern PyMethodDef pytnt_objective_functions[];
extern PyMethodDef pytnt_tape_functions[]; /* tape.c: custom training loops */
/* (class_name, {Keras config}) of a Keras learning-rate schedule -> a new schedule, or NULL with
 * an exception. */
tnt_lr_schedule *pytnt_schedule_new(PyObject *spec);

#endif

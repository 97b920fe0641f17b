"""Bad arguments to the extension never crash the interpreter: each raises an ordinary exception
(never SystemError, the sign of a C function returning NULL without one), and the objects involved
stay usable."""
import numpy as np
import pytest


def raises(fn, *args, **kw):
    with pytest.raises(Exception) as e:
        fn(*args, **kw)
    assert not isinstance(e.value, SystemError), repr(e.value)
    return e.value


def model(C):
    return C.model_from_json('{"class_name": "Sequential", "config": {"name": "s", "layers": ['
                             '{"class_name": "InputLayer", "config": {"batch_input_shape": [null, 3], "name": "i"}},'
                             '{"class_name": "Dense", "config": {"units": 2, "name": "d"}}]}}')


def test_module_functions(tnt, tmp_path):
    C = tnt._C
    for bad in (None, 5, "[]", '{"class_name": 5}', '{"class_name": "Sequential", "config": {"layers": 3}}',
                "[" * 10000, '{"class_name": "Functional", "config": {"layers": [{"class_name": "Dense"}]}}'):
        raises(C.model_from_json, bad)
    for bad in ("", "/", str(tmp_path), b"\x01", 3):
        raises(C.load_model, bad)
    raises(C.load_model, str(tmp_path / "x.h5"), compile="yes please")
    raises(C.save_npy, "/nonexistent/dir/x.npy", np.zeros(3))
    raises(C.save_npy, str(tmp_path / "x.npy"), np.zeros((1,) * 12))
    raises(C.loss_kind, "nope")
    raises(C.schedule_value, ("ExponentialDecay", {"initial_learning_rate": 0.1, "decay_steps": 0,
                                                    "decay_rate": 0.5}), 1)
    raises(C.schedule_value, ("Nope", {}), 1)
    raises(C.schedule_value, ("PiecewiseConstantDecay", {"boundaries": [5, 1], "values": [1, 2, 3]}), 1)
    raises(C.schedule_value, ("PiecewiseConstantDecay", {"boundaries": [1], "values": [1]}), 1)
    raises(C.schedule_value, "not a tuple", 1)
    raises(C.log, 9, "x")


def test_dataset_handles(tnt):
    C = tnt._C
    for bad in ("abc", np.zeros(()), np.zeros((1,) * 10), np.array([object()]), [[1, 2], [3]]):
        raises(C.dataset_from_arrays, bad)
    raises(C.dataset_from_arrays, np.zeros((3, 2)), np.zeros((2,)))
    # a sample shape with a 0 dimension: an epoch of empty samples, refused naming the dimension
    for x, y in ((np.zeros((3, 0, 5)), np.zeros(3)), (np.zeros((3, 2)), np.zeros((3, 0)))):
        e = raises(C.dataset_from_arrays, x, y)
        assert "of size 0 (expected >= 1)" in str(e), e
    raises(C.dataset_from_npy, "/nonexistent.npy")
    raises(C.dataset_from_idx, "/nonexistent.gz")
    for op, args in (("batch", (0,)), ("batch", (-3,)), ("shuffle", (-1,)), ("take", ("x",)), ("map", (None, (2,))),
                     ("map", (lambda a, b: (a, b), "abc")), ("map", (lambda a, b: (a, b), (0,))),
                     ("prefetch", (-2,)), ("repeat", (None,))):
        h = C.dataset_from_arrays(np.zeros((4, 2)), np.zeros(4))
        e = raises(getattr(h, op), *args)
        assert isinstance(e, (TypeError, ValueError, RuntimeError)), (op, e)
    h = C.dataset_from_arrays(np.zeros((4, 2)), np.zeros(4))
    h.batch(2)
    raises(h.batch, 2)      # consumed by the first op
    raises(h.iterate, 0)
    raises(h.info)


def test_model_handles(tnt, tmp_path):
    C = tnt._C
    h = model(C)
    ds = C.dataset_from_arrays(np.zeros((4, 3)), np.zeros((4, 2))).batch(2)
    for bad in (None, [None, None], [np.zeros((3, 2))], "ab", [np.zeros((3, 2)), np.zeros(5)]):
        raises(h.set_weights, bad)
    raises(h.fit, None)
    raises(h.fit, ds)                 # not compiled
    raises(h.predict_on_batch, "x")
    raises(h.predict_on_batch, np.zeros((2, 4)))
    for spec in (("nope", {}, None), ("sgd", {"learning_rate": "x"}, None), ("sgd", {}, ("Nope", {})), "sgd",
                 ("sgd", [], None)):
        raises(h.compile, spec, 1)
    raises(h.compile, ("sgd", {}, None), 99)
    raises(h.distribute, comm_mode=7)
    raises(h.distribute, reducer=9)
    raises(h.save, "/nonexistent/dir/x.h5")
    raises(h.load_weights, "/nonexistent.h5")
    raises(h.fit, ds, callbacks=[1, 2])
    h.compile(("sgd", {}, None), 4)
    raises(h.fit, ds, epochs=1, validation_data="x")
    raises(h.fit, ds, epochs=1, callbacks=[C.csv_logger("/nonexistent/dir/log.csv")])
    raises(h.fit, ds, epochs=1, callbacks=[C.python_callback(object(), ["on_epoch_end"])])
    raises(C.python_callback, object(), ["on_bogus"])
    raises(C.learning_rate_scheduler, 5)
    raises(C.early_stopping, mode="sideways")
    raises(C.model_checkpoint, "")
    raises(C.reduce_lr_on_plateau, factor=2.0)
    assert h.fit(ds, epochs=2, verbose=0)[1]["loss"] >= 0  # still usable
    raises(h.predict_on_batch, np.zeros((0, 3)))

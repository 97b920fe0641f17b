"""sample_weight and class_weight in fit and evaluate, against Keras's documented reduction: the
loss is sum_i w_i loss_i / batch size (SUM_OVER_BATCH_SIZE), the metrics weighted means, the
gradient that of the weighted loss; class_weight weighs each sample by its class; on 2 ranks
the same as on one (test_objectives' job)."""
import numpy as np
import pytest

import objectives_ref as R
from conftest import small_mlp, toy_data
from objectives_cases import data, model


def test_evaluate_with_sample_weight_on_a_sequence_output(tnt):
    k = tnt.keras
    x, y = data("categorical_crossentropy", 3)
    m = model(k, "categorical_crossentropy", 3)
    m.compile("sgd", "categorical_crossentropy", metrics=["categorical_accuracy", "mae"])
    w = np.linspace(0.0, 2.0, len(x)).astype(np.float32)
    p = m.predict(x, verbose=0).astype(np.float64)
    logs = m.evaluate(x, y, sample_weight=w, batch_size=len(x), verbose=0, return_dict=True)
    per = R.categorical_crossentropy(y, p)
    assert logs["loss"] == pytest.approx(np.sum(w * per) / len(x), rel=1e-5)
    hits = (p.argmax(-1) == y.argmax(-1)).mean(axis=1)  # per sample, over its positions
    assert logs["categorical_accuracy"] == pytest.approx(np.sum(w * hits) / np.sum(w), rel=1e-6)
    mae = np.abs(p - y).reshape(len(x), -1).mean(axis=1)
    assert logs["mae"] == pytest.approx(np.sum(w * mae) / np.sum(w), rel=1e-5)
    # batches: the loss stays sum w l / n over the whole data set
    logs8 = m.evaluate(x, y, sample_weight=w, batch_size=8, verbose=0, return_dict=True)
    assert logs8 == pytest.approx(logs, rel=1e-6)


def test_fit_with_sample_weight_follows_the_weighted_gradient(tnt):
    """Weights 0 drop samples: one SGD step on (x, w) equals the step on the weighted samples alone
    scaled by their share of the batch; weights 2 on every sample double the step."""
    k = tnt.keras
    x, y = toy_data(16)
    w = np.r_[np.ones(8), np.zeros(8)].astype(np.float32)
    steps = []
    for xs, ys, ws in ((x, y, w), (x[:8], y[:8], None), (x, y, np.full(16, 2.0, np.float32)), (x, y, None)):
        m = small_mlp(tnt)
        m.compile(k.optimizers.SGD(0.1), "sparse_categorical_crossentropy")
        w0 = m.get_weights()
        m.fit(xs, ys, sample_weight=ws, batch_size=len(xs), epochs=1, shuffle=False, verbose=0)
        steps.append([a - b for a, b in zip(m.get_weights(), w0)])
    for a, b in zip(steps[0], steps[1]):  # half the batch weighted: half the step of those 8 alone
        np.testing.assert_allclose(a, 0.5 * b, rtol=1e-4, atol=1e-7)
    for a, b in zip(steps[2], steps[3]):
        np.testing.assert_allclose(a, 2.0 * b, rtol=1e-4, atol=1e-7)


def test_class_weight(tnt):
    k = tnt.keras
    x, y = toy_data(24)
    m = small_mlp(tnt)
    m.compile(k.optimizers.SGD(0.1), "sparse_categorical_crossentropy", metrics=["accuracy"])
    cw = {0: 1.0, 1: 3.0, 2: 0.5}
    w0 = m.get_weights()
    h = m.fit(x, y, class_weight=cw, batch_size=24, epochs=1, shuffle=False, verbose=0)
    by_class = m.get_weights()
    m.set_weights(w0)
    h2 = m.fit(x, y, sample_weight=np.array([cw[int(c)] for c in y], np.float32), batch_size=24, epochs=1,
               shuffle=False, verbose=0)
    assert h.history == pytest.approx(h2.history)
    for a, b in zip(by_class, m.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-6)
    onehot = np.eye(3, dtype=np.float32)[y.astype(int)]
    m.compile(k.optimizers.SGD(0.1), "categorical_crossentropy")
    m.fit(x, onehot, class_weight=cw, epochs=1, verbose=0)  # one-hot labels: the class is the argmax
    with pytest.raises(ValueError, match="class_weight has no weight for classes \\[2\\]"):
        m.fit(x, onehot, class_weight={0: 1.0, 1: 2.0}, verbose=0)
    with pytest.raises(ValueError, match="sample_weight of shape"):
        m.fit(x, onehot, sample_weight=np.ones(5), verbose=0)


def test_validation_weights(tnt):
    k = tnt.keras
    x, y = toy_data(30)
    w = np.linspace(0.5, 1.5, 30).astype(np.float32)
    m = small_mlp(tnt)
    m.compile(k.optimizers.SGD(0.0), "sparse_categorical_crossentropy")  # lr 0: the weights stay
    h = m.fit(x[:20], y[:20], validation_data=(x[20:], y[20:], w[20:]), epochs=1, verbose=0)
    assert h.history["val_loss"][0] == pytest.approx(m.evaluate(x[20:], y[20:], sample_weight=w[20:], verbose=0),
                                                     rel=1e-6)
    h = m.fit(x, y, sample_weight=w, validation_split=1 / 3, epochs=1, verbose=0)  # Keras splits the weights
    assert h.history["val_loss"][0] == pytest.approx(m.evaluate(x[20:], y[20:], sample_weight=w[20:], verbose=0),
                                                     rel=1e-6)

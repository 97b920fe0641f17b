"""Model.compute_loss overridden (Keras 3's knowledge distillation): the loss fit and evaluate
report is the override's formula (NumPy), one SGD step moves the student as PyTorch's autograd of
that loss says, the teacher called inside compute_loss stays frozen, the compiled metrics read the
labels, predict gives call's output; train_step overrides stay a clear error."""
import sys

import numpy as np
import pytest
import torch
import torch.nn.functional as F

ALPHA, T = 0.3, 4.0


def _models(tnt):
    k = tnt.keras
    ops = k.ops

    class Distiller(k.Model):
        def __init__(self, student, teacher):
            super().__init__()
            self.teacher, self.student = teacher, student

        def compile(self, optimizer, metrics, student_loss_fn, distillation_loss_fn, alpha, temperature):
            super().compile(optimizer=optimizer, metrics=metrics)
            self.student_loss_fn, self.distillation_loss_fn = student_loss_fn, distillation_loss_fn
            self.alpha, self.temperature = alpha, temperature

        def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, allow_empty=False):
            teacher_pred = self.teacher(x, training=False)
            student_loss = self.student_loss_fn(y, y_pred)
            distillation_loss = self.distillation_loss_fn(
                ops.softmax(teacher_pred / self.temperature, axis=1),
                ops.softmax(y_pred / self.temperature, axis=1)) * (self.temperature ** 2)
            return self.alpha * student_loss + (1 - self.alpha) * distillation_loss

        def call(self, x):
            return self.student(x)

    teacher = k.Sequential([k.Input(shape=(5,)), k.layers.Dense(8, activation="relu"), k.layers.Dense(4)],
                           name="teacher")
    student = k.Sequential([k.Input(shape=(5,)), k.layers.Dense(4)], name="student")
    d = Distiller(student, teacher)
    d.compile(optimizer=k.optimizers.SGD(0.5), metrics=[k.metrics.SparseCategoricalAccuracy()],
              student_loss_fn=k.losses.SparseCategoricalCrossentropy(from_logits=True),
              distillation_loss_fn=k.losses.KLDivergence(), alpha=ALPHA, temperature=T)
    return d, student, teacher


def _torch_loss(x, y, w, b, teacher_logits):
    logits = torch.tensor(x) @ w + b
    student = F.cross_entropy(logits, torch.tensor(y, dtype=torch.long))
    eps = 1e-7  # Keras's KLDivergence clips both to [eps, 1]
    t = torch.clamp(torch.softmax(torch.tensor(teacher_logits) / T, dim=1), eps, 1)
    q = torch.clamp(torch.softmax(logits / T, dim=1), eps, 1)
    kl = (t * torch.log(t / q)).sum(dim=1).mean()
    return ALPHA * student + (1 - ALPHA) * kl * T * T, logits


def test_distiller_loss_gradient_and_frozen_teacher(tnt):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(32, 5)).astype(np.float32)
    y = rng.integers(0, 4, 32)
    d, student, teacher = _models(tnt)
    teacher_logits = teacher.predict(x, verbose=0)
    w0, b0 = student.get_weights()
    t_before = teacher.get_weights()

    loss, acc = d.evaluate(x, y, batch_size=32, verbose=0)
    w = torch.tensor(w0, requires_grad=True)
    b = torch.tensor(b0, requires_grad=True)
    want, logits = _torch_loss(x, y, w, b, teacher_logits)
    assert loss == pytest.approx(want.item(), rel=1e-5)
    assert acc == pytest.approx(float(np.mean(np.argmax(logits.detach().numpy(), 1) == y)))

    want.backward()
    d.fit(x, y, batch_size=32, epochs=1, shuffle=False, verbose=0)
    by_name = dict(zip([n for n, _ in d._h.weights_info()], d._h.get_weights()))
    kernels = [n for n in by_name if n.endswith("kernel:0")]
    student_kernel = next(n for n in kernels if by_name[n].shape == (5, 4))
    np.testing.assert_allclose(by_name[student_kernel], w0 - 0.5 * w.grad.numpy(), rtol=1e-4, atol=1e-6)
    teacher_now = [by_name[n] for n in by_name if by_name[n].shape in ((5, 8), (8,), (8, 4))]
    for got, was in zip(teacher_now, [a for a in t_before if a.shape != (4,)]):
        np.testing.assert_array_equal(got, was)  # the teacher (only in compute_loss) is frozen

    # predict is call's output: the student with the trained weights
    p = d.predict(x[:5], verbose=0)
    np.testing.assert_allclose(p, x[:5] @ by_name[student_kernel] + by_name[student_kernel.replace("kernel", "bias")],
                               rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(d(x[:5])), p, rtol=1e-6)


def test_distiller_predict_before_fit_and_errors(tnt):
    k = tnt.keras
    rng = np.random.default_rng(1)
    x = rng.normal(size=(8, 5)).astype(np.float32)
    d, student, _ = _models(tnt)
    np.testing.assert_allclose(d.predict(x, verbose=0), student.predict(x, verbose=0), rtol=1e-6)
    with pytest.raises(ValueError, match="give y"):
        d.fit(x, epochs=1, verbose=0)
    with pytest.raises(NotImplementedError, match="sample_weight"):
        d.fit(x, np.zeros(8), sample_weight=np.ones(8), epochs=1, verbose=0)

    class Stepper(k.Model):
        def __init__(self):
            super().__init__()
            self.dense = k.layers.Dense(2)

        def call(self, x):
            return self.dense(x)

        def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None):
            raise AssertionError("compute_loss traced although train_step is the user's")

        def train_step(self, data):
            return {"steps": 1.0}

    # a train_step of the user's runs in Python (keras/_custom_fit.py); its compute_loss is not traced
    stepper = Stepper()
    stepper.compile(optimizer="sgd")
    assert stepper.fit(x, np.zeros(8), epochs=1, verbose=0).history["steps"] == [1.0]

    class NotATensor(k.Model):
        def __init__(self):
            super().__init__()
            self.dense = k.layers.Dense(2)

        def call(self, x):
            return self.dense(x)

        def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None):
            return 0.0

    m = NotATensor()
    m.compile(optimizer="sgd")
    with pytest.raises(TypeError, match="compute_loss returned float"):
        m.fit(x, np.zeros((8, 2)), epochs=1, verbose=0)


def test_traced_builtin_losses(tnt):
    """The loss objects compute_loss calls on tensors, against Keras's formulas in NumPy."""
    k = tnt.keras
    rng = np.random.default_rng(2)
    yt = rng.uniform(0.1, 1.0, (6, 3)).astype(np.float32)
    yp = rng.uniform(0.1, 1.0, (6, 3)).astype(np.float32)
    eps = 1e-7
    cases = {
        k.losses.KLDivergence(): np.mean(np.sum(yt * np.log(yt / yp), -1)),
        k.losses.Poisson(): np.mean(np.mean(yp - yt * np.log(yp + eps), -1)),
        k.losses.MeanAbsolutePercentageError(): np.mean(100 * np.mean(np.abs((yt - yp) / yt), -1)),
        k.losses.MeanSquaredLogarithmicError(): np.mean(np.mean((np.log(yp + 1) - np.log(yt + 1)) ** 2, -1)),
        k.losses.LogCosh(): np.mean(np.mean(np.log(np.cosh(yp - yt)), -1)),
    }
    a, b = k.Input(shape=(3,)), k.Input(shape=(3,))
    for loss, want in cases.items():
        per_batch = k.Model([a, b], k.ops.expand_dims(loss(a, b), 0) + k.ops.zeros_like(a[:, :1]))
        got = per_batch.predict([yt, yp], batch_size=6, verbose=0)
        np.testing.assert_allclose(got, np.full((6, 1), want), rtol=1e-5, err_msg=type(loss).__name__)


def test_distiller_on_1_2_3_ranks_equal(tmp_path):
    """The added loss of compute_loss (a batch mean) over ranks by their shares: 2 and 3 ranks (7, 7
    and 6 of each batch of 20) train as 1."""
    import json
    import os
    from conftest import HERE, launch

    def job(n):
        d = tmp_path / f"r{n}"
        d.mkdir()
        launch(n, [sys.executable, os.path.join(HERE, "compute_loss_job.py"), str(d)], timeout=240)
        return [json.load(open(d / f"rank_{i}.json")) for i in range(n)]

    (one,) = job(1)
    assert one["history"]["loss"][-1] < one["history"]["loss"][0]
    for r in job(2) + job(3):
        for key, v in one["history"].items():
            np.testing.assert_allclose(r["history"][key], v, rtol=1e-5, err_msg=key)
        np.testing.assert_allclose(r["evaluate"]["loss"], one["evaluate"]["loss"], rtol=1e-5)
        for a, b in zip(r["weights"], one["weights"]):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)

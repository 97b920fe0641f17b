"""Keras 2's losses and metrics (keras/losses.py, keras/metrics) written in NumPy from their
documented formulas: the independent reference of test_objectives.py. Each loss returns the
per-sample values (reduced over the last axis, then averaged over the other non-batch axes)."""
import numpy as np

EPS = np.float64(np.float32(1e-7))


def _last(v):
    """per-position values (n, ...) -> per-sample means (n,)"""
    return v.reshape(v.shape[0], -1).mean(axis=1)


def categorical_crossentropy(y, p):
    q = p / p.sum(-1, keepdims=True)
    q = np.clip(q, EPS, 1 - EPS)
    return _last(-(y * np.log(q)).sum(-1))


def sparse_categorical_crossentropy(y, p):
    r = np.clip(p, EPS, 1 - EPS)
    lab = y.astype(int)
    picked = np.take_along_axis(r, lab[..., None], -1)[..., 0]
    return _last(np.log(r.sum(-1)) - np.log(picked))


def binary_crossentropy(y, p):
    r = np.clip(p, EPS, 1 - EPS)
    return _last((-(y * np.log(r + 1e-7) + (1 - y) * np.log(1 - r + 1e-7))).mean(-1))


def mean_squared_error(y, p):
    return _last(((p - y) ** 2).mean(-1))


def mean_absolute_error(y, p):
    return _last(np.abs(p - y).mean(-1))


def kl_divergence(y, p):
    yc, pc = np.clip(y, EPS, 1), np.clip(p, EPS, 1)
    return _last((yc * np.log(yc / pc)).sum(-1))


def _pm1(y):
    return 2 * y - 1 if np.all((y == 0) | (y == 1)) else y


def hinge(y, p):
    return _last(np.maximum(1 - _pm1(y) * p, 0).mean(-1))


def squared_hinge(y, p):
    return _last((np.maximum(1 - _pm1(y) * p, 0) ** 2).mean(-1))


def categorical_hinge(y, p):
    pos = (y * p).sum(-1)
    neg = ((1 - y) * p).max(-1)
    return _last(np.maximum(0, neg - pos + 1))


def huber(y, p, delta=1.0):
    e = p - y
    a = np.abs(e)
    return _last(np.where(a <= delta, 0.5 * e * e, delta * a - 0.5 * delta * delta).mean(-1))


def log_cosh(y, p):
    x = p - y
    return _last((x + np.logaddexp(0, -2 * x) - np.log(2)).mean(-1))


def poisson(y, p):
    return _last((p - y * np.log(p + EPS)).mean(-1))


def mean_absolute_percentage_error(y, p):
    return _last(100 * (np.abs(y - p) / np.maximum(np.abs(y), EPS)).mean(-1))


def mean_squared_logarithmic_error(y, p):
    return _last(((np.log(np.maximum(p, EPS) + 1) - np.log(np.maximum(y, EPS) + 1)) ** 2).mean(-1))


def _l2n(x):
    return x / np.sqrt(np.maximum((x * x).sum(-1, keepdims=True), 1e-12))


def cosine_similarity(y, p):
    return _last(-(_l2n(y) * _l2n(p)).sum(-1))


LOSSES = {k: v for k, v in globals().items() if callable(v) and not k.startswith("_") and k != "np"}


# ---- metrics: the mean over every position (Keras's MeanMetricWrapper) ----

def categorical_accuracy(y, p):
    return np.mean(p.argmax(-1) == y.argmax(-1))


def sparse_categorical_accuracy(y, p):
    return np.mean(p.argmax(-1) == y)


def binary_accuracy(y, p, threshold=0.5):
    return np.mean((p > threshold) == y)


def top_k(y, p, k):
    lab = y.argmax(-1)
    score = np.take_along_axis(p, lab[..., None], -1)
    return np.mean((p > score).sum(-1) < k)


def confusion(y, p, threshold=0.5):
    pp, lp = p > threshold, y != 0
    return {"tp": np.sum(pp & lp), "fp": np.sum(pp & ~lp), "tn": np.sum(~pp & ~lp), "fn": np.sum(~pp & lp)}


def auc(y, p, num_thresholds=200, curve="ROC"):
    """Keras's AUC (multi_label=False, interpolation): counts at float32 thresholds -eps,
    1/(T-1), ..., 1 + eps over every value; trapezoids under ROC, Davis-Goadrich under PR."""
    t = num_thresholds
    th = np.array([np.float32(0.0) - np.float32(1e-7)] + [np.float32(i / (t - 1)) for i in range(1, t - 1)] +
                  [np.float32(1.0) + np.float32(1e-7)], np.float32)
    pv, lp = p.astype(np.float32).ravel(), y.ravel() != 0
    pp = pv[None, :] > th[:, None]
    tp = (pp & lp).sum(1).astype(np.float64)
    fp = (pp & ~lp).sum(1).astype(np.float64)
    tn = (~pp & ~lp).sum(1).astype(np.float64)
    fn = (~pp & lp).sum(1).astype(np.float64)

    def dnn(a, b):
        return np.where(b != 0, a / np.where(b != 0, b, 1), 0.0)
    if curve == "PR":
        dtp = tp[:-1] - tp[1:]
        pos = tp + fp
        dp = pos[:-1] - pos[1:]
        slope = dnn(dtp, np.maximum(dp, 0))
        intercept = tp[1:] - slope * pos[1:]
        ratio = np.where((pos[:-1] > 0) & (pos[1:] > 0), dnn(pos[:-1], np.maximum(pos[1:], 0)), 1.0)
        return float(np.sum(dnn(slope * (dtp + intercept * np.log(ratio)), np.maximum(tp[1:] + fn[1:], 0))))
    x, yy = dnn(fp, fp + tn), dnn(tp, tp + fn)
    return float(np.sum((x[:-1] - x[1:]) * (yy[:-1] + yy[1:]) / 2))


def at_target(y, p, kind, target, num_thresholds=200):
    """Keras's SensitivitySpecificityBase results: thresholds 0, 1/(T-1), ..., 1 (float32); the
    largest dependent rate where the constrained one reaches the target, else 0."""
    t = num_thresholds
    th = np.array([0.0] + [np.float32(i / (t - 1)) for i in range(1, t - 1)] + [1.0], np.float32)
    pv, lp = p.astype(np.float32).ravel(), y.ravel() != 0
    pp = pv[None, :] > th[:, None]
    tp, fp = (pp & lp).sum(1), (pp & ~lp).sum(1)
    tn, fn = (~pp & ~lp).sum(1), (~pp & lp).sum(1)

    def dnn(a, b):
        return np.where(b != 0, a / np.where(b != 0, b, 1), 0.0)
    recall, precision, specificity = dnn(tp, tp + fn), dnn(tp, tp + fp), dnn(tn, tn + fp)
    cons, dep = {"PrecisionAtRecall": (recall, precision), "RecallAtPrecision": (precision, recall),
                 "SensitivityAtSpecificity": (specificity, recall),
                 "SpecificityAtSensitivity": (recall, specificity)}[kind]
    ok = cons >= np.float32(target)
    return float(dep[ok].max()) if ok.any() else 0.0

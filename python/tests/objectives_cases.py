"""The loss and metric cases of test_objectives.py and objectives_job.py: for each loss, a model
whose output has rank 3 ((4, 5) per sample) or 4 ((3, 2, 5)), labels that fit the loss, and
metrics to log with it."""
import numpy as np

N = 22  # samples: batches of 8 leave a last batch of 6

# loss: (output activation, label kind, metrics)
CASES = {
    "categorical_crossentropy": ("softmax", "onehot",
                                 ["accuracy", "categorical_accuracy", ("TopKCategoricalAccuracy", {"k": 2}),
                                  "kld", "categorical_crossentropy", ("Precision", {"thresholds": 0.2}),
                                  ("Recall", {"thresholds": 0.2}), ("Recall", {"name": "recall_half"}),
                                  ("TruePositives", {"thresholds": [0.2]}), ("FalseNegatives", {"thresholds": 0.2}),
                                  ("FalsePositives", {"thresholds": 0.2}), ("TrueNegatives", {"thresholds": 0.2}),
                                  ("AUC", {"num_thresholds": 100})]),
    "sparse_categorical_crossentropy": ("softmax", "sparse",
                                        ["acc", "sparse_categorical_accuracy",
                                         ("SparseTopKCategoricalAccuracy", {"k": 2})]),
    "binary_crossentropy": ("sigmoid", "binary",
                            ["accuracy", "binary_accuracy", ("BinaryAccuracy", {"threshold": 0.3, "name": "ba3"}),
                             ("Precision", {"thresholds": 0.4}), ("Recall", {}), "binary_crossentropy",
                             ("AUC", {}), ("AUC", {"curve": "PR", "num_thresholds": 50, "name": "prc"}),
                             ("PrecisionAtRecall", {"recall": 0.5}), ("RecallAtPrecision", {"precision": 0.45}),
                             ("SensitivityAtSpecificity", {"specificity": 0.6}),
                             ("SpecificityAtSensitivity", {"sensitivity": 0.7})]),
    "mean_squared_error": (None, "real", ["mae", "mse", ("RootMeanSquaredError", {}), "logcosh",
                                          "cosine_similarity"]),
    "mean_absolute_error": (None, "real", ["mse"]),
    "kl_divergence": ("softmax", "distribution", ["categorical_accuracy"]),
    "hinge": (None, "binary", ["hinge", "squared_hinge"]),
    "squared_hinge": (None, "pm1", ["hinge"]),
    "categorical_hinge": (None, "onehot", ["categorical_hinge"]),
    "huber": (None, "real", ["mae"]),
    "log_cosh": (None, "real", ["logcosh"]),
    "poisson": ("softplus", "counts", ["poisson"]),
    "mean_absolute_percentage_error": (None, "positive", ["mape"]),
    "mean_squared_logarithmic_error": ("softplus", "positive", ["msle"]),
    "cosine_similarity": (None, "real", ["cosine_similarity"]),
}

SHAPES = {3: (4, 3), 4: (3, 2, 3)}  # input shape per output rank; the output's last axis is 5
CLASSES = 5


def data(loss, rank, seed=0):
    rng = np.random.default_rng(seed + rank)
    x = rng.standard_normal((N,) + SHAPES[rank]).astype(np.float32)
    pos = (N,) + SHAPES[rank][:-1]
    kind = CASES[loss][1]
    if kind == "sparse":
        y = rng.integers(0, CLASSES, pos).astype(np.float32)
    elif kind == "onehot":
        y = np.eye(CLASSES, dtype=np.float32)[rng.integers(0, CLASSES, pos)]
    elif kind == "distribution":
        e = np.exp(rng.standard_normal(pos + (CLASSES,)))
        y = (e / e.sum(-1, keepdims=True)).astype(np.float32)
    elif kind == "binary":
        y = (rng.random(pos + (CLASSES,)) < 0.4).astype(np.float32)
    elif kind == "pm1":
        y = np.where(rng.random(pos + (CLASSES,)) < 0.5, -1.0, 1.0).astype(np.float32)
    elif kind == "counts":
        y = rng.poisson(1.5, pos + (CLASSES,)).astype(np.float32)
    elif kind == "positive":
        y = rng.uniform(0.5, 2.0, pos + (CLASSES,)).astype(np.float32)
    else:
        y = rng.standard_normal(pos + (CLASSES,)).astype(np.float32)
    return x, y


def model(k, loss, rank, seed=1):
    act = CASES[loss][0]
    inp = k.Input(SHAPES[rank])
    h = k.layers.Dense(7, activation="tanh", kernel_initializer=k.initializers.GlorotUniform(seed=seed))(inp)
    out = k.layers.Dense(CLASSES, activation=act, kernel_initializer=k.initializers.GlorotUniform(seed=seed + 1))(h)
    return k.Model(inp, out)


def metrics(k, loss):
    out = []
    for m in CASES[loss][2]:
        if isinstance(m, tuple):
            out.append(getattr(k.metrics, m[0])(**m[1]))
        else:
            out.append(m)
    return out

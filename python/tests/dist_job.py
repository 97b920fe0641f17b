"""A training job run by test_distributed.py under the launcher: dist_job.py MODE OUT_DIR [REDUCER].
Each rank writes OUT_DIR/rank_<r>.json with what it saw."""
import json
import os
import sys

import numpy as np

import tarantella as tnt

tnt.init()
mode, out = sys.argv[1], sys.argv[2]
reducer = sys.argv[3] if len(sys.argv) > 3 else None
rank = tnt.get_rank()
k = tnt.keras
CB = k.callbacks


class Logs(CB.Callback):
    def __init__(self, **kw):
        super().__init__(**kw)
        self.epochs, self.batches = [], []

    def on_epoch_end(self, epoch, logs=None):
        self.epochs.append(dict(logs))

    def on_train_batch_end(self, batch, logs=None):
        self.batches.append(dict(logs))


class MasterOnly(CB.Callback):
    run_on_all_ranks = False
    calls = 0

    def on_epoch_end(self, epoch, logs=None):
        MasterOnly.calls += 1


class FailOnRank1(CB.Callback):
    def on_epoch_end(self, epoch, logs=None):
        if epoch == 1 and tnt.get_rank() == 1:
            raise RuntimeError("rank 1 gives up")


rng = np.random.default_rng(3)
x = rng.standard_normal((96, 6)).astype(np.float32)
y = ((x[:, 0] + x[:, 1]) > 0).astype(np.float32)
model = tnt.Model(k.Sequential([k.layers.Dense(8, activation="tanh", input_shape=(6,)),
                                k.layers.Dense(2, activation="softmax")]), reducer=reducer)
model.compile(k.optimizers.SGD(0.1, momentum=0.5), "sparse_categorical_crossentropy", metrics=["accuracy"])
scale = np.float32(0.5)
train = (tnt.data.Dataset.from_tensor_slices((x * 2, y)).map(lambda a, b: (a * scale, b))  # a Python map
         .shuffle(96, seed=5).batch(16).prefetch(2))
val = tnt.data.Dataset.from_tensor_slices((x[:32], y[:32])).batch(16)
result = {"rank": rank, "size": tnt.get_size()}
if mode == "train":
    glob, local = Logs(), Logs(aggregate_logs=False)
    h = model.fit(train, validation_data=val, epochs=3, verbose=0, callbacks=[glob, local, MasterOnly()])
    result.update(history=h.history, global_epochs=glob.epochs, global_batches=glob.batches,
                  local_epochs=local.epochs, local_batches=local.batches, master_only_calls=MasterOnly.calls,
                  predict=model.predict(x, verbose=0).tolist(),
                  predict_master_only=len(model.predict(x, verbose=0, tnt_all_ranks=False)),
                  evaluate=model.evaluate(val, verbose=0, return_dict=True))
    model.save(os.path.join(out, "model.keras"))
elif mode == "weights":
    h = model.fit(train, epochs=3, verbose=0)
    result.update(history=h.history, weights=[w.tolist() for w in model.get_weights()])
elif mode == "loop":  # a Keras user's loop: train_on_batch, reads, a fit, writes, a custom tape step
    import tarantella.tensorflow as tf
    losses = [float(model.train_on_batch(x[i * 24:(i + 1) * 24], y[i * 24:(i + 1) * 24])[0]) for i in range(4)]
    before = model.get_weights()
    model.evaluate(x, y, batch_size=24, verbose=0)
    model.fit(x, y, batch_size=24, epochs=1, shuffle=False, verbose=0)
    model.set_weights([w * np.float32(0.5) for w in model.get_weights()])
    losses += [float(model.train_on_batch(x[:24], y[:24])[0]) for _ in range(2)]
    half = 12 * rank  # this rank's share of a global batch of 24
    with tnt.DistributedGradientTape(tf.GradientTape()) as tape:
        loss = k.losses.SparseCategoricalCrossentropy()(y[half:half + 12], model(x[half:half + 12], training=True))
    model.optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_weights), model.trainable_weights))
    losses += [float(model.train_on_batch(x[24:48], y[24:48])[0]) for _ in range(2)]
    result.update(losses=losses, before=[w.tolist() for w in before], weights=[w.tolist() for w in model.get_weights()])
elif mode == "fail":
    try:
        model.fit(train, epochs=3, verbose=0, callbacks=[FailOnRank1()])
        result["error"] = None
    except Exception as e:  # rank 1: its own exception; rank 0: the library's report of rank 1
        result["error"] = f"{type(e).__name__}: {e}"
with open(os.path.join(out, f"rank_{rank}.json"), "w") as f:
    json.dump(result, f)

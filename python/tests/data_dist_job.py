"""A training job run by test_data_distributed.py under the launcher: data_dist_job.py OUT_DIR.
Trains on pipelines with Python-only ops (zip, filter, a shuffle done once, padded_batch,
unbatch), on a keras.utils.Sequence and on a generator; each rank writes OUT_DIR/rank_<r>.json."""
import json
import os
import sys

import numpy as np

import tarantella as tnt
import tarantella.tensorflow as tf
from tarantella import keras

tnt.init()
out = sys.argv[1]
D = tf.data.Dataset
rng = np.random.default_rng(7)
x = rng.standard_normal((90, 4)).astype(np.float32)
y = (x[:, 0] + x[:, 2] > 0).astype(np.float32)
seqs = [rng.standard_normal((n, 4)).astype(np.float32) for n in rng.integers(1, 6, 60)]
seq_labels = np.array([float(s[:, 0].sum() > 0) for s in seqs], np.float32)


def dense_model():
    tf.random.set_seed(3)
    m = tnt.Model(keras.Sequential([keras.layers.Dense(6, activation="tanh", input_shape=(4,)),
                                    keras.layers.Dense(2, activation="softmax")]))
    m.compile(keras.optimizers.SGD(0.1, momentum=0.5), "sparse_categorical_crossentropy", metrics=["accuracy"])
    return m


class Batches(keras.utils.Sequence):
    def __len__(self):
        return 6  # 5 batches of 16 and one of 10

    def __getitem__(self, i):
        return x[i * 16:(i + 1) * 16] * 0.5, y[i * 16:(i + 1) * 16]


result = {"rank": tnt.get_rank(), "size": tnt.get_size()}
zipped = (D.zip((D.from_tensor_slices(x), D.from_tensor_slices(y))).filter(lambda a, b: a[1] > -1.2)
          .shuffle(90, seed=4, reshuffle_each_iteration=False).batch(12).unbatch().batch(20))
result["zip_filter"] = dense_model().fit(zipped, epochs=3, verbose=0).history
result["sequence"] = dense_model().fit(Batches(), epochs=3, verbose=0).history


def endless():  # every rank runs its own generator; each takes every batch, in the same order
    while True:
        for i in range(5):
            yield x[i * 18:(i + 1) * 18], y[i * 18:(i + 1) * 18]


result["generator"] = dense_model().fit(endless(), steps_per_epoch=4, epochs=3, verbose=0).history

tf.random.set_seed(5)
# each global batch padded to its own longest, on every rank (its share too); pooling without a
# mask makes the figures depend on how far a batch is padded
rnn = tnt.Model(keras.Sequential([keras.layers.GRU(5, return_sequences=True, input_shape=(None, 4)),
                                  keras.layers.GlobalAveragePooling1D(),
                                  keras.layers.Dense(2, activation="softmax")]))
rnn.compile("adam", "sparse_categorical_crossentropy", metrics=["accuracy"])
padded = D.zip((D.from_generator(lambda: iter(seqs), tf.float32), D.from_tensor_slices(seq_labels))).padded_batch(16)
result["padded"] = rnn.fit(padded, epochs=2, verbose=0).history
with open(os.path.join(out, f"rank_{tnt.get_rank()}.json"), "w") as f:
    json.dump(result, f)

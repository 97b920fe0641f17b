#!/usr/bin/python3
"""Keras training loops outside one long fit, as Keras programs write them (run by bench/loops.py,
under build/bin/tarantella -n R for R ranks):
  keras_loops.py --model mlp_tob|mlp_fit1|gan|transfer --steps S
mlp_tob: model.train_on_batch on the MLP (784-4096x3-10, SGD momentum 0.9, batch 64, 36.8M
parameters); mlp_fit1: model.fit(epochs=1) of one batch per call on the same; gan: a GAN step as
keras.io's and the Keras examples write it (generator.predict of noise, discriminator.train_on_batch
on real and on fake images, the combined model's train_on_batch with the discriminator frozen in
it; Dense 64-1024-1024-784 and 784-1024-1024-1, Adam 2e-4, batch 64; the two models share the
layers of both). Prints ms_per_step=... over S steps after 3 warm-up steps (a GAN step is the four
calls); transfer: keras.io's transfer-learning recipe, a frozen ResNet-50 base (include_top=False,
pooling="avg", 96x96x3, called with training=False) under a new Dense(10) head, Adam, train_on_batch
of 16 images."""
import argparse
import time

import numpy as np

import tarantella as tnt
from tarantella import keras

L = keras.layers
p = argparse.ArgumentParser()
p.add_argument("--model", required=True, choices=["mlp_tob", "mlp_fit1", "gan", "transfer"])
p.add_argument("--steps", type=int, default=20)
a = p.parse_args()
rng = np.random.default_rng(0)

if a.model.startswith("mlp"):
    inp = keras.Input((784,))
    h = inp
    for _ in range(3):
        h = L.Dense(4096, activation="relu")(h)
    model = tnt.Model(keras.Model(inp, L.Dense(10, activation="softmax")(h)))
    model.compile(keras.optimizers.SGD(0.01, momentum=0.9), "sparse_categorical_crossentropy")
    x = rng.standard_normal((64, 784)).astype(np.float32)
    y = rng.integers(0, 10, 64)
    if a.model == "mlp_tob":
        step = lambda: model.train_on_batch(x, y)
    else:
        step = lambda: model.fit(x, y, batch_size=64, epochs=1, verbose=0)
elif a.model == "transfer":
    base = keras.applications.ResNet50(include_top=False, weights=None, input_shape=(96, 96, 3), pooling="avg")
    base.trainable = False
    inp = keras.Input((96, 96, 3))
    model = tnt.Model(keras.Model(inp, L.Dense(10, activation="softmax")(base(inp, training=False))))
    model.compile(keras.optimizers.Adam(1e-3), "sparse_categorical_crossentropy")
    x = rng.standard_normal((16, 96, 96, 3)).astype(np.float32)
    y = rng.integers(0, 10, 16)
    step = lambda: model.train_on_batch(x, y)
else:
    gi = keras.Input((64,))
    g = keras.Model(gi, L.Dense(784, activation="tanh")(L.Dense(1024, activation="relu")(
        L.Dense(1024, activation="relu")(gi))), name="generator")
    di = keras.Input((784,))
    d = tnt.Model(keras.Model(di, L.Dense(1, activation="sigmoid")(L.Dense(1024, activation="relu")(
        L.Dense(1024, activation="relu")(di))), name="discriminator"))
    d.compile(keras.optimizers.Adam(2e-4, beta_1=0.5), "binary_crossentropy")
    d.trainable = False
    z = keras.Input((64,))
    gan = tnt.Model(keras.Model(z, d(g(z)), name="gan"))
    gan.compile(keras.optimizers.Adam(2e-4, beta_1=0.5), "binary_crossentropy")
    real = np.tanh(rng.standard_normal((64, 784))).astype(np.float32)
    ones, zeros = np.ones((64, 1), np.float32), np.zeros((64, 1), np.float32)

    def step():
        noise = rng.standard_normal((64, 64)).astype(np.float32)
        fake = g.predict(noise, verbose=0)
        d.train_on_batch(real, ones)
        d.train_on_batch(fake, zeros)
        gan.train_on_batch(noise, ones)

for _ in range(3):
    step()
t = time.perf_counter()
for _ in range(a.steps):
    step()
dt = time.perf_counter() - t
if tnt.is_master_rank():
    print(f"model={a.model} ranks={tnt.get_size()} ms_per_step={1000 * dt / a.steps:.2f}", flush=True)

#!/usr/bin/python3
"""One Transformer encoder block (MultiHeadAttention, residual, LayerNormalization, feed-forward,
residual, LayerNormalization; post-norm as keras-io's and PyTorch's TransformerEncoderLayer) in a
small classifier: x (batch, seq, width) -> block -> mean over seq -> Dense(classes), trained with
SGD(momentum 0.9) on sparse categorical cross-entropy, 1 thread.

--variant ops: the block written with keras.ops in a keras.layers.Layer subclass (add_weight;
einsum projections, softmax, mean/var LayerNormalization), traced into one layer of operations
that the C engine runs and differentiates. --variant layers: the same block from the library's
layers (MultiHeadAttention, LayerNormalization, Dense). Both have the same weights in the same
order (the ops variant's are set from the layers variant's). Prints one line:
  encoder variant=<v> batch=<b> seq=<s> width=<d> samples_per_s=<x> cpu_samples_per_s=<y> loss=<l>
Run by bench/run_ops.py (make bench-ops) against the PyTorch peer bench/peers/torch_encoder.py."""
import argparse
import os
import time

import numpy as np


def encoder_layer_class(keras, ops):
    class OpsEncoderBlock(keras.layers.Layer):
        """The encoder block in keras.ops, weights in MultiHeadAttention's order and layout."""

        def __init__(self, num_heads, ff_dim, epsilon=1e-6, **kw):
            super().__init__(**kw)
            self.num_heads, self.ff_dim, self.epsilon = num_heads, ff_dim, epsilon

        def build(self, input_shape):
            d, h = input_shape[-1], self.num_heads
            k = d // h
            w = lambda n, s, init="glorot_uniform": self.add_weight(name=n, shape=s, initializer=init)
            self.wq, self.bq = w("query_kernel", (d, h, k)), w("query_bias", (h, k), "zeros")
            self.wk, self.bk = w("key_kernel", (d, h, k)), w("key_bias", (h, k), "zeros")
            self.wv, self.bv = w("value_kernel", (d, h, k)), w("value_bias", (h, k), "zeros")
            self.wo, self.bo = w("output_kernel", (h, k, d)), w("output_bias", (d,), "zeros")
            self.g1, self.b1 = w("ln1_gamma", (d,), "ones"), w("ln1_beta", (d,), "zeros")
            self.w1, self.c1 = w("ff1_kernel", (d, self.ff_dim)), w("ff1_bias", (self.ff_dim,), "zeros")
            self.w2, self.c2 = w("ff2_kernel", (self.ff_dim, d)), w("ff2_bias", (d,), "zeros")
            self.g2, self.b2 = w("ln2_gamma", (d,), "ones"), w("ln2_beta", (d,), "zeros")
            self.key_dim = k

        def _norm(self, x, gamma, beta):
            mean = ops.mean(x, axis=-1, keepdims=True)
            var = ops.var(x, axis=-1, keepdims=True)
            return (x - mean) * ops.rsqrt(var + self.epsilon) * gamma + beta

        def call(self, x):
            q = ops.einsum("bsd,dhk->bshk", x, self.wq) + self.bq
            k = ops.einsum("bsd,dhk->bshk", x, self.wk) + self.bk
            v = ops.einsum("bsd,dhk->bshk", x, self.wv) + self.bv
            scores = ops.einsum("bqhk,bshk->bhqs", q * (1.0 / float(np.sqrt(self.key_dim))), k)
            att = ops.einsum("bhqs,bshk->bqhk", ops.softmax(scores, axis=-1), v)
            att = ops.einsum("bqhk,hkd->bqd", att, self.wo) + self.bo
            h = self._norm(x + att, self.g1, self.b1)
            f = ops.matmul(ops.relu(ops.matmul(h, self.w1) + self.c1), self.w2) + self.c2
            return self._norm(h + f, self.g2, self.b2)

        def get_config(self):
            return {**super().get_config(), "num_heads": self.num_heads, "ff_dim": self.ff_dim,
                    "epsilon": self.epsilon}

    return OpsEncoderBlock


def build(keras, ops, variant, seq, width, heads, ff, classes):
    L = keras.layers
    inp = keras.Input(shape=(seq, width))
    if variant == "ops":
        h = encoder_layer_class(keras, ops)(heads, ff)(inp)
    else:
        a = L.MultiHeadAttention(num_heads=heads, key_dim=width // heads)(inp, inp)
        h = L.LayerNormalization(epsilon=1e-6)(L.Add()([inp, a]))
        f = L.Dense(width)(L.Dense(ff, activation="relu")(h))
        h = L.LayerNormalization(epsilon=1e-6)(L.Add()([h, f]))
    out = L.Dense(classes)(L.GlobalAveragePooling1D()(h))
    return keras.Model(inp, out)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--variant", choices=["ops", "layers"], required=True)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--seq", type=int, default=64)
    p.add_argument("--width", type=int, default=128)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--ff", type=int, default=512)
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--warmup", type=int, default=3)
    a = p.parse_args()
    from tarantella import keras
    from tarantella.keras import ops

    rng = np.random.default_rng(0)
    n = a.batch * a.steps
    x = rng.standard_normal((n, a.seq, a.width)).astype(np.float32)
    y = rng.integers(0, a.classes, size=(n,)).astype(np.int32)
    # the same starting weights for both variants: the layers model's, which the ops block shares
    keras.utils.set_random_seed(1)
    ref = build(keras, ops, "layers", a.seq, a.width, a.heads, a.ff, a.classes)
    model = ref if a.variant == "layers" else build(keras, ops, "ops", a.seq, a.width, a.heads, a.ff, a.classes)
    model.set_weights(ref.get_weights())  # also on ref itself: its weights as drawn before compile
    model.compile(optimizer=keras.optimizers.SGD(0.01, momentum=0.9),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit(x[:a.batch * a.warmup], y[:a.batch * a.warmup], batch_size=a.batch, epochs=1, shuffle=False, verbose=0)
    t, c = time.perf_counter(), time.process_time()
    h = model.fit(x, y, batch_size=a.batch, epochs=1, shuffle=False, verbose=0)
    dt, dc = time.perf_counter() - t, time.process_time() - c
    print(f"encoder variant={a.variant} batch={a.batch} seq={a.seq} width={a.width} heads={a.heads} ff={a.ff} "
          f"threads={os.environ.get('OMP_NUM_THREADS', '?')} samples_per_s={n / dt:.2f} "
          f"cpu_samples_per_s={n / dc:.2f} loss={h.history['loss'][-1]:.4f}", flush=True)


if __name__ == "__main__":
    main()

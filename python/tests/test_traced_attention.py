"""Attention written with keras.ops in a custom Layer (issue 22, item 3) against the library's
layers: a cross-attention block (add_weight, einsum projections, softmax) equals the built-in
MultiHeadAttention forward and after training; the Transformer encoder block of `make bench-ops`
(bench/encoder_block.py) equals the same block built from MultiHeadAttention, LayerNormalization
and Dense, so that the benchmark compares one model two ways."""
import os
import sys

import numpy as np
from conftest import REPO

from tarantella import keras
from tarantella.keras import ops

RNG = np.random.default_rng(22)


class OpsAttention(keras.layers.Layer):
    """MultiHeadAttention(num_heads, key_dim)(query, value) in keras.ops, Keras's weight layout."""

    def __init__(self, num_heads, key_dim, **kwargs):
        super().__init__(**kwargs)
        self.num_heads, self.key_dim = num_heads, key_dim

    def build(self, input_shape):
        q_shape, v_shape = input_shape
        h, k = self.num_heads, self.key_dim
        add = self.add_weight
        self.wq, self.bq = add(name="q", shape=(q_shape[-1], h, k)), add(name="qb", shape=(h, k), initializer="zeros")
        self.wk, self.bk = add(name="k", shape=(v_shape[-1], h, k)), add(name="kb", shape=(h, k), initializer="zeros")
        self.wv, self.bv = add(name="v", shape=(v_shape[-1], h, k)), add(name="vb", shape=(h, k), initializer="zeros")
        self.wo = add(name="o", shape=(h, k, q_shape[-1]))
        self.bo = add(name="ob", shape=(q_shape[-1],), initializer="zeros")

    def call(self, inputs):
        query, value = inputs
        q = ops.einsum("bqd,dhk->bqhk", query, self.wq) + self.bq
        k = ops.einsum("bsd,dhk->bshk", value, self.wk) + self.bk
        v = ops.einsum("bsd,dhk->bshk", value, self.wv) + self.bv
        scores = ops.einsum("bshk,bqhk->bhqs", k, q / np.sqrt(self.key_dim))
        att = ops.einsum("bhqs,bshk->bqhk", ops.softmax(scores, axis=-1), v)
        return ops.einsum("bqhk,hkd->bqd", att, self.wo) + self.bo


def _train(model, xs, y):
    model.compile(optimizer=keras.optimizers.SGD(0.1, momentum=0.5), loss="mse")
    h = model.fit(xs, y, batch_size=4, epochs=3, shuffle=False, verbose=0)
    return h.history["loss"], model.get_weights()


def test_ops_attention_equals_multi_head_attention():
    q = RNG.normal(size=(12, 5, 8)).astype(np.float32)
    v = RNG.normal(size=(12, 7, 6)).astype(np.float32)
    y = RNG.normal(size=(12, 5, 8)).astype(np.float32)
    qi, vi = keras.Input(shape=(5, 8)), keras.Input(shape=(7, 6))
    ref = keras.Model([qi, vi], keras.layers.MultiHeadAttention(num_heads=3, key_dim=4)(qi, vi))
    qi2, vi2 = keras.Input(shape=(5, 8)), keras.Input(shape=(7, 6))
    mine = keras.Model([qi2, vi2], OpsAttention(3, 4)([qi2, vi2]))
    w0 = ref.get_weights()
    assert [w.shape for w in mine.get_weights()] == [w.shape for w in w0]
    w0 = [w + RNG.normal(scale=0.1, size=w.shape).astype(np.float32) for w in w0]  # nonzero biases
    ref.set_weights(w0)
    mine.set_weights(w0)
    np.testing.assert_allclose(mine.predict([q, v], verbose=0), ref.predict([q, v], verbose=0), rtol=1e-5, atol=1e-5)
    loss_ref, w_ref = _train(ref, [q, v], y)
    loss_mine, w_mine = _train(mine, [q, v], y)
    assert loss_ref[-1] < loss_ref[0]
    np.testing.assert_allclose(loss_mine, loss_ref, rtol=1e-5)
    for a, b in zip(w_mine, w_ref):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


def test_bench_encoder_block_equals_the_layers_block():
    sys.path.insert(0, os.path.join(REPO, "bench"))
    try:
        import encoder_block
    finally:
        sys.path.pop(0)
    x = RNG.normal(size=(16, 6, 16)).astype(np.float32)
    y = RNG.integers(0, 5, size=(16,)).astype(np.int32)
    ref = encoder_block.build(keras, ops, "layers", seq=6, width=16, heads=4, ff=32, classes=5)
    mine = encoder_block.build(keras, ops, "ops", seq=6, width=16, heads=4, ff=32, classes=5)
    assert len(mine.layers) < len(ref.layers)  # the block is one traced layer
    w0 = [w + RNG.normal(scale=0.1, size=w.shape).astype(np.float32) for w in ref.get_weights()]
    ref.set_weights(w0)
    mine.set_weights(w0)
    np.testing.assert_allclose(mine.predict(x, verbose=0), ref.predict(x, verbose=0), rtol=1e-5, atol=1e-5)
    results = []
    for m in (ref, mine):
        m.compile(optimizer=keras.optimizers.SGD(0.05, momentum=0.9),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        results.append((m.fit(x, y, batch_size=8, epochs=3, shuffle=False, verbose=0).history["loss"],
                        m.get_weights()))
    (loss_ref, w_ref), (loss_mine, w_mine) = results
    assert loss_ref[-1] < loss_ref[0]
    np.testing.assert_allclose(loss_mine, loss_ref, rtol=1e-5)
    for a, b in zip(w_mine, w_ref):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)

"""Keras's broadcasting in the merge layers (Add, Subtract, Multiply, Average, Maximum, Minimum):
a lower-rank input gets axes of size 1 after the batch (tf.expand_dims(x, 1)), then dimensions of
size 1 broadcast; checked against PyTorch's broadcasting of the same tensors, forward and the
gradient that reaches each input (through Dense kernels that one SGD step updates)."""
import numpy as np
import pytest
import torch

OPS = {"Add": lambda a, b: a + b, "Subtract": lambda a, b: a - b, "Multiply": lambda a, b: a * b,
       "Average": lambda a, b: (a + b) / 2, "Maximum": torch.maximum, "Minimum": torch.minimum}
CASES = [((4,), (1, 4)), ((3, 1), (3, 4)), ((1, 4), (3, 1)), ((2, 3, 4), (4,))]


def _keras_align(t, rank):
    while t.dim() < rank + 1:  # batch included
        t = t.unsqueeze(1)
    return t


@pytest.mark.parametrize("op", list(OPS))
@pytest.mark.parametrize("sa,sb", CASES)
def test_merge_broadcast(tnt, op, sa, sb):
    k, L = tnt.keras, tnt.keras.layers
    rng = np.random.default_rng(len(sa) * 7 + len(sb))
    batch, f = 3, 2
    xa = rng.normal(size=(batch,) + sa[:-1] + (f,)).astype(np.float32)
    xb = rng.normal(size=(batch,) + sb[:-1] + (f,)).astype(np.float32)
    ia, ib = k.Input(shape=xa.shape[1:]), k.Input(shape=xb.shape[1:])
    y = getattr(L, op)()([L.Dense(sa[-1], use_bias=False)(ia), L.Dense(sb[-1], use_bias=False)(ib)])
    m = k.Model([ia, ib], y)
    wa = rng.normal(size=(f, sa[-1])).astype(np.float32)
    wb = rng.normal(size=(f, sb[-1])).astype(np.float32)
    m.set_weights([wa, wb])

    rank = max(len(sa), len(sb))
    ta, tb = torch.tensor(wa, requires_grad=True), torch.tensor(wb, requires_grad=True)
    ty = OPS[op](_keras_align(torch.tensor(xa) @ ta, rank), _keras_align(torch.tensor(xb) @ tb, rank))
    assert tuple(m.output_shape[1:]) == tuple(ty.shape[1:])
    np.testing.assert_allclose(m.predict([xa, xb], verbose=0), ty.detach().numpy(), rtol=1e-5, atol=1e-6)

    target = rng.normal(size=tuple(ty.shape)).astype(np.float32)
    ((ty - torch.tensor(target)) ** 2).mean().backward()
    lr = 0.1
    m.compile(k.optimizers.SGD(learning_rate=lr), "mse")
    m.fit([xa, xb], target, batch_size=batch, epochs=1, shuffle=False, verbose=0)
    ga, gb = [(w0 - w1) / lr for w0, w1 in zip([wa, wb], m.get_weights())]
    np.testing.assert_allclose(ga, ta.grad.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(gb, tb.grad.numpy(), rtol=1e-4, atol=1e-5)


def test_merge_shapes_that_do_not_broadcast(tnt):
    k, L = tnt.keras, tnt.keras.layers
    a, b = k.Input(shape=(3, 4)), k.Input(shape=(2, 4))
    with pytest.raises(Exception, match="do not broadcast"):
        k.Model([a, b], L.Add()([a, b])).predict([np.ones((1, 3, 4)), np.ones((1, 2, 4))], verbose=0)

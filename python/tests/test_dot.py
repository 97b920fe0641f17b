"""The Dot merge layer (keras.layers.Dot and keras.layers.dot) against PyTorch: forward values, and
the gradient it sends back (through two Dense layers whose kernels one SGD step updates), for the
axes the Keras examples use (memory networks' (2, 2) and (2, 1), vectors' 1, negative axes) with
and without normalize; the config round trip; bad axes refused with a message."""
import numpy as np
import pytest
import torch

CASES = [  # (shape a, shape b, axes, normalize), batch excluded
    ((5, 4), (3, 4), (2, 2), False),
    ((5, 4), (4, 3), (2, 1), False),
    ((5, 4), (5, 3), (1, 1), True),
    ((6,), (6,), 1, False),
    ((6,), (6,), -1, True),
    ((5, 4), (4,), (-1, 1), False),
    ((4,), (4, 3), (1, 1), True),
]


def _torch_dot(a, b, axes, normalize):
    """Keras's batch_dot with l2_normalize (the formulas of keras.layers.Dot), in PyTorch."""
    ra, rb = a.dim(), b.dim()
    ax = [axes, axes] if isinstance(axes, int) else list(axes)
    ax = [ax[0] % ra, ax[1] % rb]
    if normalize:
        a = a / torch.sqrt(torch.clamp((a * a).sum(ax[0], keepdim=True), min=1e-12))
        b = b / torch.sqrt(torch.clamp((b * b).sum(ax[1], keepdim=True), min=1e-12))
    a = a.movedim(ax[0], -1)  # (batch, [P], K)
    b = b.movedim(ax[1], 1)   # (batch, K, [Q])
    if a.dim() == 2:
        a = a.unsqueeze(1)
    if b.dim() == 2:
        b = b.unsqueeze(2)
    y = torch.bmm(a, b)  # (batch, P, Q)
    out = y.reshape(y.shape[0], -1)
    if ra == 3 and rb == 3:
        return y
    return out


@pytest.mark.parametrize("sa,sb,axes,normalize", CASES)
def test_dot_forward_and_gradient(tnt, sa, sb, axes, normalize):
    k, L = tnt.keras, tnt.keras.layers
    rng = np.random.default_rng(len(sa) * 10 + len(sb))
    batch, f = 3, 2
    xa = rng.normal(size=(batch,) + sa[:-1] + (f,)).astype(np.float32)
    xb = rng.normal(size=(batch,) + sb[:-1] + (f,)).astype(np.float32)
    ia, ib = k.Input(shape=xa.shape[1:]), k.Input(shape=xb.shape[1:])
    da, db = L.Dense(sa[-1], use_bias=False), L.Dense(sb[-1], use_bias=False)
    y = L.Dot(axes=axes, normalize=normalize)([da(ia), db(ib)])
    m = k.Model([ia, ib], y)
    wa = rng.normal(size=(f, sa[-1])).astype(np.float32)
    wb = rng.normal(size=(f, sb[-1])).astype(np.float32)
    m.set_weights([wa, wb])

    ta, tb = torch.tensor(wa, requires_grad=True), torch.tensor(wb, requires_grad=True)
    ty = _torch_dot(torch.tensor(xa) @ ta, torch.tensor(xb) @ tb, axes, normalize)
    assert tuple(m.output_shape[1:]) == tuple(ty.shape[1:])
    np.testing.assert_allclose(m.predict([xa, xb], verbose=0), ty.detach().numpy(), rtol=1e-5, atol=1e-5)

    target = rng.normal(size=tuple(ty.shape)).astype(np.float32)
    ((ty - torch.tensor(target)) ** 2).mean().backward()
    lr = 0.1
    m.compile(k.optimizers.SGD(learning_rate=lr), "mse")
    m.fit([xa, xb], target, batch_size=batch, epochs=1, shuffle=False, verbose=0)  # one SGD step
    ga, gb = [(w0 - w1) / lr for w0, w1 in zip([wa, wb], m.get_weights())]
    np.testing.assert_allclose(ga, ta.grad.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(gb, tb.grad.numpy(), rtol=1e-4, atol=1e-5)


def test_dot_function_and_config(tnt):
    k, L = tnt.keras, tnt.keras.layers
    a, b = k.Input(shape=(5, 4)), k.Input(shape=(3, 4))
    m = k.Model([a, b], L.dot([a, b], axes=(2, 2), normalize=True))
    assert m.output_shape == (None, 5, 3)
    cfg = [l for l in m.layers if l.__class__.__name__ == "Dot"][0].get_config()
    assert list(np.atleast_1d(cfg["axes"])) in ([2, 2], [2]) and cfg["normalize"] is True
    again = k.models.model_from_json(m.to_json())
    x = [np.ones((2, 5, 4), np.float32), np.arange(24, dtype=np.float32).reshape(2, 3, 4)]
    np.testing.assert_allclose(again.predict(x, verbose=0), m.predict(x, verbose=0), rtol=1e-6)


def test_dot_bad_axes(tnt):
    k, L = tnt.keras, tnt.keras.layers
    a, b = k.Input(shape=(5, 4)), k.Input(shape=(3, 4))
    with pytest.raises(Exception, match="Dot"):
        k.Model([a, b], L.Dot(axes=(1, 2))([a, b])).predict([np.ones((1, 5, 4)), np.ones((1, 3, 4))], verbose=0)
    with pytest.raises(Exception, match="batch axis|out of range"):
        k.Model([a, b], L.Dot(axes=(0, 0))([a, b])).predict([np.ones((1, 5, 4)), np.ones((1, 3, 4))], verbose=0)

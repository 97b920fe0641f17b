"""keras.ops.image (extract_patches, resize, rgb_to_grayscale) and ops.fft/fft2 on arrays, inside a
custom layer's call and on a model's tensors: forward against PyTorch/NumPy (F.unfold,
F.interpolate with half-pixel centers, torch.fft), and the gradient the C engine computes for
them against PyTorch autograd (read from one SGD step of a weight added to the input)."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F


def _torch_patches(x, size, strides, dilation, padding):
    """tf.image.extract_patches semantics from F.unfold: NHWC in, (B, rows, cols, kh*kw*C) out,
    each patch's pixels in row order, channels innermost; 'same' pads as TensorFlow (extra at
    the end)."""
    kh, kw = size
    sh, sw = strides
    dh, dw = dilation
    t = x.permute(0, 3, 1, 2)
    h, w = t.shape[2], t.shape[3]
    eh, ew = (kh - 1) * dh + 1, (kw - 1) * dw + 1
    if padding == "same":
        rows, cols = -(-h // sh), -(-w // sw)
        th, tw = max((rows - 1) * sh + eh - h, 0), max((cols - 1) * sw + ew - w, 0)
        t = F.pad(t, (tw // 2, tw - tw // 2, th // 2, th - th // 2))
        h, w = h + th, w + tw
    rows, cols = (h - eh) // sh + 1, (w - ew) // sw + 1
    u = F.unfold(t, (kh, kw), dilation=(dh, dw), stride=(sh, sw))  # (B, C*kh*kw, L), channel-major
    b, c = x.shape[0], x.shape[3]
    u = u.reshape(b, c, kh, kw, rows * cols).permute(0, 4, 2, 3, 1)
    return u.reshape(b, rows, cols, kh * kw * c)


def _layer_model(tnt, fn, shape):
    """A model: input + a weight "shift" (zeros, the gradient probe), then fn in a custom layer."""
    k = tnt.keras

    class Probe(k.layers.Layer):
        def build(self, input_shape):
            self.shift = self.add_weight(name="shift", shape=tuple(input_shape[1:]), initializer="zeros")

        def call(self, inputs):
            return fn(inputs + self.shift)

    inp = k.Input(shape=shape)
    return k.Model(inp, Probe()(inp))


def _check(tnt, fn, torch_fn, x, rtol=1e-5):
    """Forward of fn in a traced layer equals torch_fn; the gradient of mean(y**2) with respect to
    the input (one SGD step of lr 1 on the shift weight) equals PyTorch's autograd."""
    m = _layer_model(tnt, fn, x.shape[1:])
    xt = torch.tensor(x)
    probe = torch.zeros(x.shape[1:], requires_grad=True)
    want = torch_fn(xt + probe)
    got = m.predict(x, batch_size=len(x), verbose=0)
    np.testing.assert_allclose(got, want.detach().numpy(), rtol=rtol, atol=rtol * 10)
    (want ** 2).mean().backward()
    assert np.abs(probe.grad.numpy()).max() > 0
    m.compile(optimizer=tnt.keras.optimizers.SGD(1.0), loss="mse")
    m.fit(x, np.zeros(tuple(want.shape), np.float32), batch_size=len(x), epochs=1, shuffle=False, verbose=0)
    np.testing.assert_allclose(-m.get_weights()[0], probe.grad.numpy(), rtol=1e-4, atol=1e-6)
    return got


CASES = [((4, 4), None, (1, 1), "valid"),      # tiles (ViT, MLP-Mixer): reshape and transpose
         ((3, 3), (2, 2), (1, 1), "valid"),    # overlapping windows
         ((2, 3), (1, 2), (2, 1), "same"),     # dilation, uneven strides, TensorFlow's same padding
         ((3, 2), (3, 1), (1, 1), "same")]


@pytest.mark.parametrize("size,strides,dilation,padding", CASES)
def test_extract_patches(tnt, size, strides, dilation, padding):
    ops = tnt.keras.ops
    x = np.random.default_rng(0).normal(size=(2, 9, 8, 3)).astype(np.float32)
    st = strides or size
    fn = lambda t: ops.image.extract_patches(t, size, strides=strides, dilation_rate=dilation,  # noqa: E731
                                             padding=padding)
    ref = lambda t: _torch_patches(t, size, st, dilation, padding)  # noqa: E731
    got = _check(tnt, fn, ref, x)
    np.testing.assert_allclose(fn(x), got, rtol=1e-6)  # on arrays, the same


def test_extract_patches_on_model_tensors_and_channels_first(tnt):
    k = tnt.keras
    x = np.random.default_rng(1).normal(size=(3, 8, 8, 2)).astype(np.float32)
    inp = k.Input(shape=(8, 8, 2))
    out = k.ops.image.extract_patches(inp, 4)
    patches = k.ops.reshape(out, (-1, 4, 32))  # the keras-io Patches layer's reshape
    m = k.Model(inp, patches)
    want = _torch_patches(torch.tensor(x), (4, 4), (4, 4), (1, 1), "valid").reshape(3, 4, 32).numpy()
    np.testing.assert_allclose(m.predict(x, verbose=0), want, rtol=1e-6)
    first = k.ops.image.extract_patches(x.transpose(0, 3, 1, 2), 4, data_format="channels_first")
    np.testing.assert_allclose(first, want.reshape(3, 2, 2, 32).transpose(0, 3, 1, 2), rtol=1e-6)
    with pytest.raises(ValueError, match="does not fit"):
        k.ops.image.extract_patches(x, 9)


@pytest.mark.parametrize("size,interpolation", [((13, 11), "bilinear"), ((5, 3), "bilinear"),
                                                ((12, 7), "nearest")])
def test_resize(tnt, size, interpolation):
    ops = tnt.keras.ops
    x = np.random.default_rng(2).normal(size=(2, 6, 7, 3)).astype(np.float32)
    mode = "nearest-exact" if interpolation == "nearest" else "bilinear"  # both half-pixel centers

    def ref(t):
        kw = {} if mode == "nearest-exact" else {"align_corners": False}
        return F.interpolate(t.permute(0, 3, 1, 2), size=size, mode=mode, **kw).permute(0, 2, 3, 1)

    fn = lambda t: ops.image.resize(t, size, interpolation=interpolation)  # noqa: E731
    got = _check(tnt, fn, ref, x)
    np.testing.assert_allclose(fn(x), got, rtol=1e-5, atol=1e-6)


def test_resize_crop_to_aspect_ratio_and_errors(tnt):
    ops = tnt.keras.ops
    x = np.random.default_rng(3).normal(size=(1, 8, 12, 2)).astype(np.float32)
    got = ops.image.resize(x, (4, 4), crop_to_aspect_ratio=True)  # Keras: the centered 8x8 window
    want = F.interpolate(torch.tensor(x[:, :, 2:10]).permute(0, 3, 1, 2), size=(4, 4), mode="bilinear",
                         align_corners=False).permute(0, 2, 3, 1).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    one = ops.image.resize(x[0], (16, 24))  # one image, no batch axis
    assert one.shape == (16, 24, 2)
    with pytest.raises(NotImplementedError, match="bicubic"):
        ops.image.resize(x, (4, 4), interpolation="bicubic")
    with pytest.raises(NotImplementedError, match="antialias"):
        ops.image.resize(x, (4, 4), antialias=True)
    with pytest.raises(ValueError, match="rank"):
        ops.image.resize(x[0, 0], (4, 4))


def test_rgb_to_grayscale(tnt):
    ops = tnt.keras.ops
    x = np.random.default_rng(4).uniform(0, 255, size=(2, 5, 4, 3)).astype(np.float32)
    weights = torch.tensor([0.2989, 0.5870, 0.1140])
    _check(tnt, ops.image.rgb_to_grayscale, lambda t: (t * weights).sum(-1, keepdim=True), x, rtol=1e-4)


def test_fft2_and_fft(tnt):
    ops = tnt.keras.ops
    x = np.random.default_rng(5).normal(size=(2, 6, 5)).astype(np.float32)
    # FNet's mixing: the real part of the 2D transform of a real input
    _check(tnt, lambda t: ops.fft2((t, ops.zeros_like(t)))[0], lambda t: torch.fft.fft2(t).real, x, rtol=1e-4)
    _check(tnt, lambda t: ops.fft((t, t * 0.5))[1], lambda t: torch.fft.fft(torch.complex(t, t * 0.5)).imag, x,
           rtol=1e-4)
    re, im = ops.fft2((x, x[::-1].copy()))
    want = np.fft.fft2(x + 1j * x[::-1])
    np.testing.assert_allclose(re, want.real, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(im, want.imag, rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError, match="pair"):
        ops.fft2(x)


def test_tf_image_names(tnt):
    """tf.image.extract_patches (sizes/strides/rates as [1, r, c, 1]) and tf.image.resize, as Keras 2
    code calls them, are the same operations."""
    import tarantella.tensorflow as tf
    x = np.random.default_rng(6).normal(size=(2, 9, 8, 3)).astype(np.float32)
    got = tf.image.extract_patches(x, sizes=[1, 2, 3, 1], strides=[1, 1, 2, 1], rates=[1, 2, 1, 1], padding="SAME")
    want = _torch_patches(torch.tensor(x), (2, 3), (1, 2), (2, 1), "same").numpy()
    np.testing.assert_allclose(got, want, rtol=1e-6)
    np.testing.assert_allclose(tf.image.resize(x, (4, 5)), tnt.keras.ops.image.resize(x, (4, 5)), rtol=1e-6)
    with pytest.raises(ValueError, match="sizes"):
        tf.image.extract_patches(x, sizes=[2, 2], strides=[1, 1, 1, 1], rates=[1, 1, 1, 1], padding="VALID")

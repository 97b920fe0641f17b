#!/usr/bin/env python3
"""gpu_ptx_jit.py: the embedded PTX on the real driver, without the project's runtime: the driver
JIT-compiles it for this GPU (cuModuleLoadDataEx through ctypes), every kernel of
src/gpu/kernels/kernel_list.h is found by name, and a few kernels run against NumPy references
(bitwise where the kernel's order of operations is NumPy's): fill, the column sums of Dense's bias
gradient, a block reduction, the Adam step, the row softmax, tanh, max pooling (a struct argument)
and Dropout's counter RNG. Then the kernels of each family run on the GPU (256 threads per block)
and on their host build (compiled here with cc: one thread per block) with the same inputs, and
every buffer must agree: bitwise for elementwise, pooling, optimizer and copy kernels, within
1e-5 where a reduction adds in another order.

  gpu_ptx_jit.py build/gpu/kernels.ptx          on a machine with an NVIDIA GPU and driver
  gpu_ptx_jit.py --host                         the same checks on the kernels' host build (compiled
                                                here from src/gpu/host_kernels.c): tests this script

Exit 0: all passed; 1: a check failed; 77: no usable driver or GPU (a ctest-style skip)."""
import ctypes as C
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def kernel_names():
    with open(os.path.join(ROOT, "src/gpu/kernels/kernel_list.h")) as f:
        return re.findall(r"^TNT_K\((\w+),", f.read(), re.M)


class KPool(C.Structure):  # src/gpu/kernels/kargs.h tnt_k_pool
    _fields_ = [("n", C.c_longlong), ("c", C.c_longlong), ("inp", C.c_int * 3), ("out", C.c_int * 3),
                ("k", C.c_int * 3), ("s", C.c_int * 3), ("pad", C.c_int * 3), ("unused", C.c_int)]


class KAxesNorm(C.Structure):  # src/gpu/kernels/kargs.h tnt_k_axes_norm
    _fields_ = [("groups", C.c_longlong), ("per", C.c_longlong), ("dim", C.c_longlong * 8), ("reduced", C.c_int * 8),
                ("ndim", C.c_int), ("unused", C.c_int)]


class Cuda:
    """the driver API through ctypes: primary context, module, device memory, launches"""

    def __init__(self, ptx_path):
        try:
            self.cu = C.CDLL("libcuda.so.1")
        except OSError as e:
            raise SystemExit(print(f"SKIP: no libcuda.so.1 ({e})") or 77)
        rc = self.cu.cuInit(0)
        if rc != 0:
            raise SystemExit(print(f"SKIP: cuInit returned {rc} (no usable driver or GPU)") or 77)
        dev, ctx = C.c_int(), C.c_void_p()
        self.ok(self.cu.cuDeviceGet(C.byref(dev), 0), "cuDeviceGet")
        self.ok(self.cu.cuDevicePrimaryCtxRetain(C.byref(ctx), dev), "cuDevicePrimaryCtxRetain")
        self.ok(self.cu.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
        name = C.create_string_buffer(128)
        self.cu.cuDeviceGetName(name, 128, dev)
        with open(ptx_path, "rb") as f:
            ptx = f.read() + b"\0"
        log = C.create_string_buffer(8192)
        opts = (C.c_int * 2)(5, 6)  # CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES
        vals = (C.c_void_p * 2)(C.cast(log, C.c_void_p), C.c_void_p(8192))
        self.mod = C.c_void_p()
        rc = self.cu.cuModuleLoadDataEx(C.byref(self.mod), C.c_char_p(ptx), 2, opts, vals)
        if rc != 0:
            sys.exit(f"FAIL: cuModuleLoadDataEx of {ptx_path} ({len(ptx)} bytes): {rc}: {log.value.decode(errors='replace')}")
        print(f"cuModuleLoadDataEx: the driver JIT-compiled {ptx_path} ({len(ptx)} bytes) for {name.value.decode()}")
        self.cu.cuMemAlloc_v2.argtypes = [C.POINTER(C.c_uint64), C.c_size_t]
        self.cu.cuMemcpyHtoD_v2.argtypes = [C.c_uint64, C.c_void_p, C.c_size_t]
        self.cu.cuMemcpyDtoH_v2.argtypes = [C.c_void_p, C.c_uint64, C.c_size_t]
        self.funcs = {}

    @staticmethod
    def ok(rc, what):
        if rc != 0:
            sys.exit(f"FAIL: {what} returned {rc}")

    def find(self, name):
        f = C.c_void_p()
        rc = self.cu.cuModuleGetFunction(C.byref(f), self.mod, name.encode())
        if rc == 0:
            self.funcs[name] = f
        return rc == 0

    def buffer(self, arr):
        p = C.c_uint64()
        self.ok(self.cu.cuMemAlloc_v2(C.byref(p), max(arr.nbytes, 4)), "cuMemAlloc")
        self.ok(self.cu.cuMemcpyHtoD_v2(p.value, arr.ctypes.data, arr.nbytes), "cuMemcpyHtoD")
        return p.value

    def read(self, ptr, arr):
        self.ok(self.cu.cuMemcpyDtoH_v2(arr.ctypes.data, ptr, arr.nbytes), "cuMemcpyDtoH")
        return arr

    def launch(self, name, grid, block, args):
        if name not in self.funcs and not self.find(name):
            sys.exit(f"FAIL: no kernel {name}")
        params = (C.c_void_p * len(args))(*[C.cast(C.pointer(a), C.c_void_p) for a in args])
        self.ok(self.cu.cuLaunchKernel(self.funcs[name], grid, 1, 1, block, 1, 1, 0, None, params, None), name)
        self.ok(self.cu.cuCtxSynchronize(), f"{name} (cuCtxSynchronize)")


class Host:
    """the kernels' host build (one thread per block), compiled here: the same checks without a GPU"""

    def __init__(self):
        so = os.path.join(tempfile.mkdtemp(), "host_kernels.so")
        cmd = ["cc", "-std=c11", "-O2", "-shared", "-fPIC", "-D_GNU_SOURCE", f"-I{ROOT}/src", f"-I{ROOT}/include",
               f"{ROOT}/src/gpu/host_kernels.c", "-o", so]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        self.lib = C.CDLL(so)
        self.lib.tnt__gpu_host_kernel_find.restype = C.c_void_p
        self.proto = C.CFUNCTYPE(None, C.c_uint, C.c_uint, C.c_size_t, C.POINTER(C.c_void_p))
        self.keep = []

    def find(self, name):
        return bool(self.lib.tnt__gpu_host_kernel_find(name.encode()))

    def buffer(self, arr):
        copy = np.array(arr, copy=True)
        self.keep.append(copy)
        return copy.ctypes.data

    def read(self, ptr, arr):
        C.memmove(arr.ctypes.data, ptr, arr.nbytes)
        return arr

    def launch(self, name, grid, block, args):
        fn = self.proto(self.lib.tnt__gpu_host_kernel_find(name.encode()))
        params = (C.c_void_p * len(args))(*[C.cast(C.pointer(a), C.c_void_p) for a in args])
        fn(grid, block, 0, params)


def compare_families(dev, ref, rng, report):
    """each launch on dev (the GPU, 256 threads per block) and on ref (the host build) with the same
    inputs; then every buffer compared: bitwise (tol None) or within tol relative"""
    ll, f32, i32, f64 = C.c_longlong, C.c_float, C.c_int, C.c_double

    def run(name, grid, args, tol=None):
        """args: NumPy arrays (device buffers, read back), None (a NULL pointer) or ctypes scalars"""
        outs = []
        for backend, block in ((dev, 256), (ref, 1)):
            bufs, cargs = [], []
            for a in args:
                if isinstance(a, np.ndarray):
                    p = backend.buffer(a)
                    bufs.append((p, a))
                    cargs.append(C.c_uint64(p))
                elif a is None:
                    cargs.append(C.c_uint64(0))
                else:
                    cargs.append(a)
            backend.launch(name, grid, block, cargs)
            outs.append([backend.read(p, np.empty_like(a)) for p, a in bufs])
        worst = 0.0
        for g, h in zip(*outs):
            if tol is None:
                same = np.array_equal(g.view(np.uint8), h.view(np.uint8))
                worst = max(worst, 0.0 if same else np.inf)
            else:
                d = np.abs(g.astype(np.float64) - h.astype(np.float64)) / (1e-6 + np.abs(h.astype(np.float64)))
                worst = max(worst, float(np.nanmax(d)) if d.size else 0.0)
        good = worst == 0.0 if tol is None else worst <= tol
        report(f"{name}: GPU == host build{' (bitwise)' if tol is None else f' within {tol:g}'}", good,
               "" if good else f"worst {worst:.3g}")

    def r(*shape, lo=-2.0, hi=2.0):
        return rng.uniform(lo, hi, shape).astype(np.float32)

    nan = lambda *shape: np.full(shape, np.nan, np.float32)
    n, rows, cols = 10007, 67, 129
    x, y = r(n), r(n)
    run("tnt_k_axpby", 13, [x, y.copy(), ll(n), f32(1.5), f32(-0.5)])
    run("tnt_k_bias_act_fwd", 13, [r(rows, cols), r(cols), nan(rows, cols), i32(7), f32(0), ll(rows), ll(cols)])  # gelu
    for act in range(29):
        if act in (4, 18, 28):  # the row kernels
            continue
        run("tnt_k_act_bwd", 9, [i32(act), f32(0), r(n, lo=-6, hi=6), r(n, lo=-1, hi=1), r(n), nan(n), ll(n)])
    run("tnt_k_add_act", 13, [r(n), r(n), nan(n), i32(1), f32(0), ll(n)])  # Add's folded relu
    run("tnt_k_act_bwd_y2", 13, [i32(1), f32(0), r(n), r(n), nan(n), nan(n), ll(n)])
    run("tnt_k_col_sums_partial", 5, [r(rows, cols), nan(3, cols), ll(rows), ll(cols), ll(32)])
    run("tnt_k_col_sums", 2, [r(1568, 6), nan(6), ll(1568), ll(6)])  # a fixed order: the host's bits
    run("tnt_k_col_sums", 1, [r(rows, cols), nan(cols), ll(rows), ll(cols)])
    run("tnt_k_log_softmax_fwd", 16, [r(rows, cols, lo=-8, hi=8), nan(rows, cols), ll(rows), ll(cols)], tol=1e-5)
    run("tnt_k_sparsemax_fwd", 3, [r(rows, 30), nan(rows, 30), ll(rows), ll(30)], tol=1e-5)
    p_, g_ = r(n), r(n)
    # centered: v (>= 4) above a squared (<= 1.21) keeps v - a^2 + eps positive (a NaN's payload
    # differs between the GPU and the host, so a bitwise check needs real numbers)
    run("tnt_k_rmsprop", 9, [p_, g_, np.abs(r(n)) + 4, r(n), r(n, lo=-1, hi=1), ll(n), f32(0.01), f32(0.9), f32(0.5), f32(1e-7), f32(0)])
    run("tnt_k_nadam", 9, [p_, g_, r(n), np.abs(r(n)), ll(n), f32(0.1), f32(0.001), f32(2.1), f32(0.5), f32(1.01),
                          f32(0.01), f32(1e-7), f32(1e-5)])
    # the noise layers' draws (the CPU's counter RNG, Box-Muller in double) and the constraints
    u64 = C.c_ulonglong
    run("tnt_k_gaussian_noise", 9, [r(n), nan(n), ll(n), u64(0x1234ABCD5678EF01), u64(77), f32(0.5)])
    run("tnt_k_gaussian_dropout", 9, [r(n), nan(n), ll(n), u64(0x1234ABCD5678EF01), u64(77), f32(0.6)])
    run("tnt_k_alpha_dropout", 9, [r(n), nan(n), ll(n), u64(99), u64(5), f32(0.3), f32(1.2), f32(0.1), f32(-1.7), i32(0)])
    run("tnt_k_spatial_dropout", 9, [r(n), nan(n), ll(n), u64(99), ll(91), ll(7), ll(3), i32(1), f32(0.4), f32(1 / 0.6)])
    run("tnt_k_non_neg", 9, [r(n), ll(n)])
    axes = KAxesNorm(3 * 6, 5 * 4, (5, 3, 4, 6, 0, 0, 0, 0), (1, 0, 1, 0, 0, 0, 0, 0), 4, 0)
    run("tnt_k_norm_constraint", 4, [r(5 * 3 * 4 * 6), axes, i32(0), f32(0.7), f32(0), f32(1)], tol=1e-6)
    # pooling 3x3 stride 2 "same", with ties
    img = np.floor(r(2, 9, 8, 5) * 4) / 4
    gp = KPool(2, 5, (1, 9, 8), (1, 5, 4), (1, 3, 3), (1, 2, 2), (0, 1, 1), 0)
    ny = 2 * 5 * 4 * 5
    arg = np.zeros(ny, np.uint16)
    run("tnt_k_max_pool_fwd", 7, [gp, img, nan(ny), arg])
    run("tnt_k_avg_pool_bwd", 7, [gp, r(ny), nan(img.size)])
    # BatchNormalization (channels last; 45 channels: two tiles, one partial; 300 rows: a partial
    # chunk) and LayerNormalization. The BN kernels' sums run over virtual lanes in a fixed order,
    # so 256 threads per block give the host build's bits.
    m, c = 300, 45
    xb, mean = r(m, c, lo=1.0, hi=3.0), np.zeros(c, np.float64)
    chunks = (m + 39) // 40
    part = np.zeros((chunks, 2, c))
    run("tnt_k_bn_stat_sums", 3, [xb, part, ll(m), ll(c), ll(1), ll(40)])
    rng_part = np.stack([r(chunks, c).astype(np.float64), np.abs(r(chunks, c)).astype(np.float64) + 40], axis=1)
    run("tnt_k_bn_stats", 2, [xb, rng_part, ll(chunks), ll(c), ll(1), nan(c), nan(c), r(c), np.abs(r(c)), f64(300.0),
                               f64(0.99), f64(1e-3)])
    run("tnt_k_bn_apply", 6, [xb, nan(m, c), r(c), r(c), r(c), np.abs(r(c)), ll(m), ll(c), ll(1), i32(1)])
    dyb, yb = r(m, c), r(m, c)
    run("tnt_k_bn_grad_sums", 5, [xb, dyb, yb, r(c), np.abs(r(c)), part, ll(m), ll(c), ll(1), ll(40), i32(1)])
    run("tnt_k_bn_grad_finish", 2, [rng_part, ll(chunks), ll(c), nan(c), nan(c), nan(c), nan(c), f64(300.0), i32(1)])
    run("tnt_k_bn_dx", 6, [xb, dyb, yb, r(c), r(c), np.abs(r(c)), r(c), r(c), nan(m, c), ll(m), ll(c), ll(1), i32(1)])
    # channels first (inner 35: the other lane layout)
    run("tnt_k_bn_stat_sums", 4, [r(3, 6, 35), np.zeros((2, 2, 6)), ll(3), ll(6), ll(35), ll(64)])
    run("tnt_k_bn_dx", 3, [r(3, 6, 35), r(3, 6, 35), r(3, 6, 35), r(6), r(6), np.abs(r(6)), r(6), r(6), nan(3, 6, 35),
                           ll(3), ll(6), ll(35), i32(0)])
    run("tnt_k_ln_fwd", 8, [xb, nan(m, c), r(c), r(c), np.zeros(2 * m), ll(m), ll(c), f64(1e-3)], tol=1e-5)
    ln_stats = np.concatenate([r(m), np.abs(r(m)) + 0.5]).astype(np.float64)
    run("tnt_k_ln_param_sums", 5, [xb, ln_stats, dyb, np.zeros((19, 2, c)), ll(m), ll(c), ll(16)])
    # Embedding, permute, attention's softmax
    ids = np.floor(r(500, lo=0, hi=50)).astype(np.float32)
    run("tnt_k_embedding_fwd", 9, [ids, r(50, 16), nan(500, 16), ll(500), ll(16)])
    counts = np.bincount(ids.astype(np.int64), minlength=50).astype(np.int32)
    offsets = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int32)
    order = np.argsort(ids, kind="stable").astype(np.int32)
    run("tnt_k_embedding_count", 2, [ids, np.zeros(50, np.int32), ll(500), ll(50)])
    run("tnt_k_embedding_offsets", 1, [counts, np.zeros(50, np.int32), ll(50)])
    run("tnt_k_embedding_order", 2, [ids, offsets, np.zeros(500, np.int32), ll(500), ll(50)])
    run("tnt_k_embedding_grad", 5, [r(500, 16), counts, offsets, order, nan(50, 16), ll(16), ll(50)])
    # Conv2D's direct kernels (5x5 same, 3 channels, 7 filters, batch 2)
    cx, cw, cdy = r(2, 9, 10, 3), r(5, 5, 3, 7), r(2, 9, 10, 7)
    sizes = [ll(2), ll(9), ll(10), ll(3), ll(9), ll(10), ll(7), i32(5), i32(5), i32(1), i32(1), i32(1), i32(1), i32(2),
             i32(2)]
    run("tnt_k_conv_direct_fwd", 7, [cx, cw, r(7), nan(2, 9, 10, 7)] + sizes + [i32(1)])
    run("tnt_k_conv_direct_dx", 7, [cdy, cw, nan(2, 9, 10, 3)] + sizes)
    run("tnt_k_conv_direct_dw_partial", 9, [cx, cdy, nan(1, 5 * 5 * 3 * 7)] + sizes + [ll(180)])
    run("tnt_k_mha_softmax", 12, [r(2, 3, 5, 77, lo=-5, hi=5), None, None, (r(2, 77, lo=0, hi=1) > 0.3).astype(np.float32),
                                  ll(2), ll(3), ll(5), ll(77), i32(1)], tol=1e-5)


def main():
    host = len(sys.argv) > 1 and sys.argv[1] == "--host"
    if not host and len(sys.argv) != 2:
        sys.exit(__doc__)
    dev = Host() if host else Cuda(sys.argv[1])
    failed = []

    def report(what, good, detail=""):
        print(f"{'ok  ' if good else 'FAIL'} {what}{': ' + detail if detail else ''}")
        if not good:
            failed.append(what)

    names = kernel_names()
    missing = [n for n in names if not dev.find(n)]
    report(f"every kernel of kernel_list.h found by name ({len(names)})", not missing, ", ".join(missing))

    rng = np.random.default_rng(1)
    ll, f32, u64, i32 = C.c_longlong, C.c_float, C.c_ulonglong, C.c_int
    ptr = lambda p: C.c_uint64(p)  # a device address as a kernel argument

    # fill: every element written, grid-stride with a small grid
    n = 100003
    y = dev.buffer(np.full(n, np.nan, np.float32))
    dev.launch("tnt_k_fill", 7, 256, [ptr(y), ll(n), f32(0.75)])
    report("tnt_k_fill", bool(np.all(dev.read(y, np.empty(n, np.float32)) == np.float32(0.75))))

    # column sums (the bias gradients) in double: the exact sum rounded once, within 2 ulp
    rows, cols = 513, 37
    x = rng.standard_normal((rows, cols)).astype(np.float32)
    want = x.astype(np.float64).sum(axis=0).astype(np.float32)
    out = dev.buffer(np.full(cols, np.nan, np.float32))
    dev.launch("tnt_k_col_sums", 2, 32, [ptr(dev.buffer(x)), ptr(out), ll(rows), ll(cols)])
    got = dev.read(out, np.empty(cols, np.float32))
    report("tnt_k_col_sums (double sums)", bool(np.all(np.abs(got - want) <= 2.4e-7 * np.abs(want) + 1e-7)))

    # a block reduction (shared memory, barriers): sums of squares in double per block
    n, grid = 1000003, 40
    xs = rng.standard_normal(n).astype(np.float32)
    part = dev.buffer(np.full(grid, np.nan, np.float32))
    dev.launch("tnt_k_sum_squares_partial", grid, 256, [ptr(dev.buffer(xs)), ptr(part), ll(n)])
    got = float(dev.read(part, np.empty(grid, np.float32)).astype(np.float64).sum())
    ref = float(np.sum(xs.astype(np.float64) ** 2))
    report("tnt_k_sum_squares_partial", abs(got - ref) <= 1e-6 * ref, f"{got} vs {ref}")

    # Adam (optimizers/optimizer.c k_adam, with weight decay): NumPy float32 in the same order, bitwise
    n = 4099
    p, g = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    m, v = (0.1 * rng.standard_normal(n)).astype(np.float32), np.abs(rng.standard_normal(n)).astype(np.float32)
    c1, c2, alpha, eps, wdl = np.float32(0.1), np.float32(0.001), np.float32(0.0316), np.float32(1e-7), np.float32(4e-6)
    bufs = [dev.buffer(a) for a in (p, g, m, v)]
    dev.launch("tnt_k_adam", 5, 128, [ptr(bufs[0]), ptr(bufs[1]), ptr(bufs[2]), ptr(bufs[3]), ptr(0), ll(n),
                                      f32(c1), f32(c2), f32(alpha), f32(eps), f32(wdl)])
    pw = p - p * wdl
    mw = m + (g - m) * c1
    vw = v + (g * g - v) * c2
    pw = pw - (mw * alpha) / (np.sqrt(vw) + eps)
    got = [dev.read(b, np.empty(n, np.float32)) for b in bufs]
    report("tnt_k_adam (bitwise p, m, v)", all(np.array_equal(a.view(np.uint32), b.view(np.uint32))
                                                for a, b in ((got[0], pw), (got[2], mw), (got[3], vw))))

    # softmax over rows of 1000 with 256 threads per row, against float64
    rows, cols = 65, 1000
    x = (4 * rng.standard_normal((rows, cols))).astype(np.float32)
    y = dev.buffer(np.full(x.shape, np.nan, np.float32))
    dev.launch("tnt_k_softmax_fwd", 64, 256, [ptr(dev.buffer(x)), ptr(y), ll(rows), ll(cols)])
    e = np.exp(x.astype(np.float64) - x.max(1, keepdims=True))
    err = float(np.max(np.abs(dev.read(y, np.empty(x.shape, np.float32)) - e / e.sum(1, keepdims=True))))
    report("tnt_k_softmax_fwd", err < 1e-6, f"max abs err {err:.2g}")

    # tanh (own polynomial and exp, no libdevice) against float64
    n = 20001
    x = np.linspace(-10, 10, n).astype(np.float32)
    y = dev.buffer(np.full(n, np.nan, np.float32))
    dev.launch("tnt_k_act_fwd", 20, 256, [i32(3), f32(0), ptr(dev.buffer(x)), ptr(y), ll(n)])  # 3: TNT_ACT_TANH
    t = np.tanh(x.astype(np.float64))
    rel = float(np.max(np.abs(dev.read(y, np.empty(n, np.float32)) - t) / np.maximum(np.abs(t), 1e-30)))
    report("tnt_k_act_fwd tanh", rel < 3e-7, f"max rel err {rel:.2g}")

    # 2x2 max pooling, stride 2, NHWC: a struct argument by value
    nimg, h, w, c = 3, 28, 28, 20
    x = rng.standard_normal((nimg, h, w, c)).astype(np.float32)
    gpool = KPool(nimg, c, (1, h, w), (1, h // 2, w // 2), (1, 2, 2), (1, 2, 2), (0, 0, 0), 0)
    ny = nimg * (h // 2) * (w // 2) * c
    y, arg = dev.buffer(np.full(ny, np.nan, np.float32)), dev.buffer(np.zeros(ny, np.uint16))
    dev.launch("tnt_k_max_pool_fwd", 30, 256, [gpool, ptr(dev.buffer(x)), ptr(y), ptr(arg)])
    want = x.reshape(nimg, h // 2, 2, w // 2, 2, c).max(axis=(2, 4)).reshape(-1)
    report("tnt_k_max_pool_fwd (struct argument)", np.array_equal(dev.read(y, np.empty(ny, np.float32)), want))

    # Dropout: core/core.c's SplitMix64 counter RNG, bitwise the CPU's mask
    n, seed, base, rate = 10007, 0x1234ABCD5678EF01, 4242, np.float32(0.3)
    M = (1 << 64) - 1

    def hash64(z):
        z = (z + 0x9E3779B97F4A7C15) & M
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M
        return z ^ (z >> 31)

    u = np.array([np.float32(hash64(seed ^ hash64((base + i + 0x9E3779B97F4A7C15) & M)) >> 40) *
                  np.float32(1.0 / 16777216.0) for i in range(n)], np.float32)
    x = rng.standard_normal(n).astype(np.float32)
    scale = np.float32(1) / (np.float32(1) - rate)
    y = dev.buffer(np.full(n, np.nan, np.float32))
    dev.launch("tnt_k_dropout", 11, 256, [ptr(dev.buffer(x)), ptr(y), ll(n), u64(seed), u64(base), f32(rate), f32(scale)])
    want = np.where(u >= rate, x * scale, np.float32(0))
    report("tnt_k_dropout (the CPU's mask, bitwise)", np.array_equal(dev.read(y, np.empty(n, np.float32)), want))

    try:
        ref = dev if host else Host()
    except (OSError, subprocess.CalledProcessError) as e:
        ref = None
        print(f"SKIP the GPU == host build comparisons: the host build does not compile here ({e})")
    if ref is not None:
        compare_families(dev, ref, rng, report)

    print(f"{'host build' if host else 'GPU'}: {len(failed)} of the checks failed" if failed else "all checks passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

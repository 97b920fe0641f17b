#!/usr/bin/env python3
"""bench_bn_kernels.py: BatchNormalization's device kernels (src/gpu/kernels/normalization.cu) timed
on the GPU for the 53 BatchNormalization layers of ResNet-50 at batch 64 (NHWC, fp32), with the
launch sequence and tiles of src/layers/normalization/batch_norm.c, and the bytes each kernel must
move; optionally the kernels before the tiling (--old PTX, built from an older kernels.cu), whose
outputs must then agree with the new ones (1e-5 relative).

  bench_bn_kernels.py build/gpu/kernels.ptx [--old old_kernels.ptx] [--reps 10]

Prints per shape the microseconds per training step's forward and backward, the GB/s of each
kernel, and the totals over the 53 layers. Exit 77 without a GPU, 1 when old and new disagree."""
import argparse
import ctypes as C
import sys

import numpy as np

# (spatial side, channels, layers, relu folded in) of ResNet-50's BatchNormalization layers
RESNET50 = [(112, 64, 1, 1), (56, 64, 6, 1), (56, 256, 4, 0), (28, 128, 8, 1), (28, 512, 5, 0),
            (14, 256, 12, 1), (14, 1024, 7, 0), (7, 512, 6, 1), (7, 2048, 4, 0)]
BLOCK = 256


class Dev:
    def __init__(self, paths):
        try:
            self.cu = C.CDLL("libcuda.so.1")
        except OSError as e:
            raise SystemExit(print(f"SKIP: no libcuda.so.1 ({e})") or 77)
        if self.cu.cuInit(0) != 0:
            raise SystemExit(print("SKIP: cuInit failed") or 77)
        dev, ctx = C.c_int(), C.c_void_p()
        self.ok(self.cu.cuDeviceGet(C.byref(dev), 0))
        self.ok(self.cu.cuDevicePrimaryCtxRetain(C.byref(ctx), dev))
        self.ok(self.cu.cuCtxSetCurrent(ctx))
        sms = C.c_int()
        self.ok(self.cu.cuDeviceGetAttribute(C.byref(sms), 16, dev))  # MULTIPROCESSOR_COUNT
        self.sms = sms.value
        name = C.create_string_buffer(128)
        self.cu.cuDeviceGetName(name, 128, dev)
        self.name = name.value.decode()
        self.cu.cuMemAlloc_v2.argtypes = [C.POINTER(C.c_uint64), C.c_size_t]
        self.cu.cuMemcpyHtoD_v2.argtypes = [C.c_uint64, C.c_void_p, C.c_size_t]
        self.cu.cuMemcpyDtoH_v2.argtypes = [C.c_void_p, C.c_uint64, C.c_size_t]
        self.cu.cuMemsetD8_v2.argtypes = [C.c_uint64, C.c_ubyte, C.c_size_t]
        self.mods = []
        for p in paths:
            with open(p, "rb") as f:
                ptx = f.read() + b"\0"
            m = C.c_void_p()
            self.ok(self.cu.cuModuleLoadData(C.byref(m), C.c_char_p(ptx)))
            self.mods.append(m)
        self.funcs = {}
        self.busy, self.busy_launches = None, 0
        self.ev = [C.c_void_p(), C.c_void_p()]
        for e in self.ev:
            self.ok(self.cu.cuEventCreate(C.byref(e), 0))

    @staticmethod
    def ok(rc):
        if rc != 0:
            raise SystemExit(f"FAIL: CUDA error {rc}")

    def grid_for(self, n):  # src/gpu/module.c tnt__gpu_grid_for
        return int(min(max((n + BLOCK - 1) // BLOCK, 1), self.sms * 32))

    def alloc(self, nbytes):
        p = C.c_uint64()
        self.ok(self.cu.cuMemAlloc_v2(C.byref(p), max(int(nbytes), 4)))
        return p.value

    def put(self, arr):
        p = self.alloc(arr.nbytes)
        self.ok(self.cu.cuMemcpyHtoD_v2(p, arr.ctypes.data, arr.nbytes))
        return p

    def get(self, ptr, n, dtype=np.float32):
        a = np.empty(n, dtype)
        self.ok(self.cu.cuMemcpyDtoH_v2(a.ctypes.data, ptr, a.nbytes))
        return a

    def launch(self, mod, name, grid, args):
        key = (mod, name)
        if key not in self.funcs:
            f = C.c_void_p()
            self.ok(self.cu.cuModuleGetFunction(C.byref(f), self.mods[mod], name.encode()))
            self.funcs[key] = f
        params = (C.c_void_p * len(args))(*[C.cast(C.pointer(a), C.c_void_p) for a in args])
        self.ok(self.cu.cuLaunchKernel(self.funcs[key], int(grid), 1, 1, BLOCK, 1, 1, 0, None, params, None))

    def time(self, fn, reps):
        """microseconds of GPU time per fn(): a queue of copies keeps the GPU busy while Python
        enqueues the timed launches (a launch from Python takes longer than a small kernel)"""
        fn()
        self.ok(self.cu.cuCtxSynchronize())
        for _ in range(self.busy_launches):
            self.busy()
        self.ok(self.cu.cuEventRecord(self.ev[0], None))
        for _ in range(reps):
            fn()
        self.ok(self.cu.cuEventRecord(self.ev[1], None))
        self.ok(self.cu.cuEventSynchronize(self.ev[1]))
        ms = C.c_float()
        self.ok(self.cu.cuEventElapsedTime(C.byref(ms), self.ev[0], self.ev[1]))
        return ms.value * 1e3 / reps  # microseconds


def tile_width(c):  # normalization.cu bn_tile_width (channels last)
    w = 1
    while w < 32 and w < c:
        w *= 2
    return w


def new_chunk(m, c):  # batch_norm.c bn_gpu_chunk
    tw = tile_width(c)
    lanes, ctiles = BLOCK // tw, -(-c // tw)
    chunk = lanes * 128
    while chunk > lanes * 4 and -(-m // chunk) * ctiles < 1024:
        chunk //= 2
    return chunk


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("ptx")
    ap.add_argument("--old")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--batch", type=int, default=64)
    o = ap.parse_args()
    dev = Dev([o.ptx] + ([o.old] if o.old else []))
    print(f"{dev.name}, {dev.sms} SMs; ResNet-50 batch {o.batch} BatchNormalization shapes (NHWC fp32)")
    ll, i32, f64 = C.c_longlong, C.c_int, C.c_double
    rng = np.random.default_rng(1)
    big = max(o.batch * s * s * c for s, c, _, _ in RESNET50)
    x = dev.put((rng.standard_normal(big, dtype=np.float32) * 2 + 1).astype(np.float32))
    dy = dev.put(rng.standard_normal(big, dtype=np.float32))
    outs = {k: dev.alloc(4 * big) for k in ("y0", "y1", "dx0", "dx1", "busy")}
    small = {k: dev.alloc(8 * 4096) for k in ("mf", "is", "mg", "mgx", "dg", "db", "mean", "sq", "mf1", "is1", "mg1",
                                               "mgx1", "dg1", "db1")}
    gamma = dev.put(rng.uniform(0.5, 1.5, 2048).astype(np.float32))
    beta = dev.put(rng.uniform(-0.5, 0.5, 2048).astype(np.float32))
    mm = [dev.put(np.zeros(2048, np.float32)) for _ in range(2)]
    mv = [dev.put(np.ones(2048, np.float32)) for _ in range(2)]
    part = dev.alloc(8 * 2 * 2048 * 4096)
    P = lambda v: C.c_uint64(v)  # noqa: E731
    # about 2 ms of copies ahead of each timing (16 of the largest tensor at batch 64)
    dev.busy = lambda: dev.launch(0, "tnt_k_copy", dev.grid_for(big), [P(dy), P(outs["busy"]), C.c_longlong(big)])
    dev.busy_launches = 16
    total = {"new_f": 0.0, "new_b": 0.0, "old_f": 0.0, "old_b": 0.0, "bytes_f": 0, "bytes_b": 0}
    worst = 0.0
    print("side    C  n relu | new fwd us  bwd us | stat_sums  apply  grad_sums  dx  (GB/s) | old fwd us  bwd us")
    for side, c, count, relu in RESNET50:
        m = o.batch * side * side
        n = m * c
        chunk = new_chunk(m, c)
        chunks = -(-m // chunk)
        tw = tile_width(c)
        ctiles = -(-c // tw)
        sum_blocks = min(chunks * ctiles, dev.sms * 32)
        merge_blocks = min(-(-c // 32), dev.sms * 32)
        ew_chunk = BLOCK // tw * 16
        ew_blocks = min(-(-m // ew_chunk) * ctiles, dev.sms * 32)
        M = f64(m)
        args = dict(rows=ll(m), C=ll(c), inner=ll(1), chunk=ll(chunk), chunks=ll(chunks), relu=i32(relu))

        def k_stat_sums():
            dev.launch(0, "tnt_k_bn_stat_sums", sum_blocks, [P(x), P(part), args["rows"], args["C"], args["inner"],
                                                             args["chunk"]])

        def k_stats():
            dev.launch(0, "tnt_k_bn_stats", merge_blocks, [P(x), P(part), args["chunks"], args["C"], args["inner"],
                                                           P(small["mf1"]), P(small["is1"]), P(mm[1]), P(mv[1]), M,
                                                           f64(0.99), f64(1e-3)])

        def k_apply():
            dev.launch(0, "tnt_k_bn_apply", ew_blocks, [P(x), P(outs["y1"]), P(gamma), P(beta), P(small["mf1"]),
                                                        P(small["is1"]), args["rows"], args["C"], args["inner"],
                                                        args["relu"]])

        def k_grad_sums():
            dev.launch(0, "tnt_k_bn_grad_sums", sum_blocks, [P(x), P(dy), P(outs["y1"]), P(small["mf1"]),
                                                             P(small["is1"]), P(part), args["rows"], args["C"],
                                                             args["inner"], args["chunk"], args["relu"]])

        def k_grad_finish():
            dev.launch(0, "tnt_k_bn_grad_finish", merge_blocks, [P(part), args["chunks"], args["C"], P(small["dg1"]),
                                                                 P(small["db1"]), P(small["mg1"]), P(small["mgx1"]), M,
                                                                 i32(1)])

        def k_dx():
            dev.launch(0, "tnt_k_bn_dx", ew_blocks, [P(x), P(dy), P(outs["y1"]), P(gamma), P(small["mf1"]),
                                                     P(small["is1"]), P(small["mg1"]), P(small["mgx1"]),
                                                     P(outs["dx1"]), args["rows"], args["C"], args["inner"],
                                                     args["relu"]])

        t = {k.__name__: dev.time(k, o.reps) for k in (k_stat_sums, k_stats, k_apply, k_grad_sums, k_grad_finish, k_dx)}
        fwd = dev.time(lambda: (k_stat_sums(), k_stats(), k_apply()), o.reps)
        bwd = dev.time(lambda: (k_grad_sums(), k_grad_finish(), k_dx()), o.reps)
        ry = 4 * n * (3 if relu else 2)
        gb = lambda b, us: b / us / 1e3  # noqa: E731
        line = (f"{side:4d} {c:4d} {count:2d} {relu:4d} | {fwd:10.1f} {bwd:7.1f} | {gb(4 * n, t['k_stat_sums']):9.0f} "
                f"{gb(8 * n, t['k_apply']):6.0f} {gb(ry, t['k_grad_sums']):10.0f} {gb(ry + 4 * n, t['k_dx']):4.0f}")
        total["new_f"] += count * fwd
        total["new_b"] += count * bwd
        total["bytes_f"] += count * 12 * n
        total["bytes_b"] += count * (2 * ry + 4 * n)
        if o.old:
            ochunks = -(-m // 256)
            mean, sq = small["mean"], small["sq"]

            def old_fwd():
                g = dev.grid_for(ochunks * c)
                dev.launch(1, "tnt_k_bn_sums", g, [P(x), P(0), P(part), ll(m), ll(c), ll(1), ll(256)])
                dev.launch(1, "tnt_k_sum_chunks_d", dev.grid_for(c), [P(part), P(mean), ll(ochunks), ll(c), f64(1.0 / m)])
                dev.launch(1, "tnt_k_bn_sums", g, [P(x), P(mean), P(part), ll(m), ll(c), ll(1), ll(256)])
                dev.launch(1, "tnt_k_sum_chunks_d", dev.grid_for(c), [P(part), P(sq), ll(ochunks), ll(c), f64(1.0)])
                dev.launch(1, "tnt_k_bn_train_stats", dev.grid_for(c), [P(mean), P(sq), P(small["mf"]), P(small["is"]),
                                                                         P(mm[0]), P(mv[0]), ll(c), M, f64(0.99),
                                                                         f64(1e-3)])
                dev.launch(1, "tnt_k_bn_apply", dev.grid_for(n), [P(x), P(outs["y0"]), P(gamma), P(beta), P(small["mf"]),
                                                                  P(small["is"]), ll(m), ll(c), ll(1), i32(relu)])

            def old_bwd():
                dev.launch(1, "tnt_k_bn_grad_sums", dev.grid_for(ochunks * c),
                           [P(x), P(dy), P(outs["y0"]), P(small["mf"]), P(small["is"]), P(part), ll(m), ll(c), ll(1),
                            ll(256), i32(relu)])
                dev.launch(1, "tnt_k_bn_grad_finish", dev.grid_for(c),
                           [P(part), ll(ochunks), ll(c), P(small["dg"]), P(small["db"]), P(small["mg"]), P(small["mgx"]),
                            M, i32(1)])
                dev.launch(1, "tnt_k_bn_dx", dev.grid_for(n),
                           [P(x), P(dy), P(outs["y0"]), P(gamma), P(small["mf"]), P(small["is"]), P(small["mg"]),
                            P(small["mgx"]), P(outs["dx0"]), ll(m), ll(c), ll(1), i32(relu)])

            ofwd, obwd = dev.time(old_fwd, o.reps), dev.time(old_bwd, o.reps)
            total["old_f"] += count * ofwd
            total["old_b"] += count * obwd
            line += f" | {ofwd:10.1f} {obwd:7.1f}"
            # one step of each from the same moving statistics, then the outputs side by side
            zeros, ones = np.zeros(2048, np.float32), np.ones(2048, np.float32)  # alive through the copies
            for mv_i in (0, 1):
                dev.ok(dev.cu.cuMemcpyHtoD_v2(mm[mv_i], zeros.ctypes.data, 4 * 2048))
                dev.ok(dev.cu.cuMemcpyHtoD_v2(mv[mv_i], ones.ctypes.data, 4 * 2048))
            old_fwd(), old_bwd(), k_stat_sums(), k_stats(), k_apply(), k_grad_sums(), k_grad_finish(), k_dx()
            dev.ok(dev.cu.cuCtxSynchronize())
            for a, b, nn in ((outs["y0"], outs["y1"], n), (outs["dx0"], outs["dx1"], n), (small["dg"], small["dg1"], c),
                             (small["db"], small["db1"], c), (mv[0], mv[1], c), (mm[0], mm[1], c)):
                u, v = dev.get(a, nn).astype(np.float64), dev.get(b, nn).astype(np.float64)
                scale = max(np.abs(u).max(), 1e-30)
                worst = max(worst, float(np.abs(u - v).max() / scale))
        print(line, flush=True)
    print(f"53 layers, new: forward {total['new_f'] / 1e3:.2f} ms, backward {total['new_b'] / 1e3:.2f} ms per step; "
          f"bytes forward {total['bytes_f'] / 1e9:.2f} GB, backward {total['bytes_b'] / 1e9:.2f} GB "
          f"({(total['bytes_f'] + total['bytes_b']) / (total['new_f'] + total['new_b']) / 1e3:.0f} GB/s overall)")
    if o.old:
        print(f"53 layers, old: forward {total['old_f'] / 1e3:.2f} ms, backward {total['old_b'] / 1e3:.2f} ms per step; "
              f"old vs new outputs: worst difference {worst:.3g} of each output's largest value")
        if not worst <= 1e-5:
            print("FAIL: old and new kernels disagree")
            return 1
    # the copy kernel over the largest shape: the bandwidth this device gives a plain stream
    nbig = o.batch * 112 * 112 * 64
    tc = dev.time(lambda: dev.launch(0, "tnt_k_copy", dev.grid_for(nbig), [P(x), P(outs["y1"]), ll(nbig)]), o.reps)
    print(f"tnt_k_copy of {nbig * 4 / 1e6:.0f} MB: {tc:.1f} us, {8 * nbig / tc / 1e3:.0f} GB/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

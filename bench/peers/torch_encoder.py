#!/usr/bin/python3
"""PyTorch eager peer of bench/encoder_block.py: the same classifier (one post-norm Transformer
encoder block: MultiheadAttention, residual, LayerNorm, feed-forward with ReLU, residual,
LayerNorm; mean over the sequence; Linear to the classes), SGD with momentum 0.9 on cross-entropy.
  torch_encoder.py --threads 1 --batch 32 --seq 64 --width 128 --heads 4 --ff 512 --steps 30
Pins OMP, OpenBLAS and MKL threads to --threads before torch loads; prints one line with
samples/s and blas=openblas|reference (a benchmark refuses a ratio against the reference BLAS)."""
import argparse
import os
import sys
import time

from peer_threads import blas_backend  # noqa: E402,F401 (pins the threads before torch loads)
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402



class Classifier(nn.Module):
    def __init__(self, width, heads, ff, classes):
        super().__init__()
        self.block = nn.TransformerEncoderLayer(width, heads, ff, dropout=0.0, batch_first=True, layer_norm_eps=1e-6)
        self.out = nn.Linear(width, classes)

    def forward(self, x):
        return self.out(self.block(x).mean(1))


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--seq", type=int, default=64)
    p.add_argument("--width", type=int, default=128)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--ff", type=int, default=512)
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--warmup", type=int, default=3)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    m = Classifier(a.width, a.heads, a.ff, a.classes)
    g = torch.Generator().manual_seed(0)
    xs = torch.randn(a.steps, a.batch, a.seq, a.width, generator=g)
    ys = torch.randint(0, a.classes, (a.steps, a.batch), generator=g)
    opt = torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9)

    def step(i):
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(m(xs[i % a.steps]), ys[i % a.steps])
        loss.backward()
        opt.step()
        return loss.item()

    for i in range(a.warmup):
        step(i)
    t, c = time.perf_counter(), time.process_time()
    for i in range(a.steps):
        loss = step(i)
    dt, dc = time.perf_counter() - t, time.process_time() - c
    n = a.steps * a.batch
    print(f"torch {torch.__version__} blas={blas_backend()} encoder batch={a.batch} seq={a.seq} width={a.width} "
          f"heads={a.heads} ff={a.ff} threads={a.threads} samples_per_s={n / dt:.2f} "
          f"cpu_samples_per_s={n / dc:.2f} loss={loss:.4f}", flush=True)


if __name__ == "__main__":
    main()

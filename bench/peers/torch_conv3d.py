#!/usr/bin/env python3
"""Peer baseline for bench/bench_conv3d.c, the same two models in PyTorch (NC... layout, its own):
  conv3d:   Conv3d(4->16, 3, pad 1) ReLU MaxPool3d(2) Conv3d(16->32, 3, pad 1) ReLU mean Linear(32, 10)
  convlstm: ConvLSTM (4->16, 3x3, "same"; input convolution of all steps at once, then per step the
            recurrent convolution, gates i f c o, the last state) mean Linear(16, 10)
on (batch, 4, 16, 16, 16) / (batch, 8, 4, 16, 16), SGD(0.01), cross-entropy, one fixed batch.
    torch_conv3d.py --model conv3d|convlstm --threads 1 [--steps S] [--warmup W] [--batch B]
Prints one line: samples/s over the timed steps (after warm-up), the final loss and the BLAS."""
import argparse, os, sys, time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_models import blas_backend  # pins every thread pool to --threads before torch loads
import torch, torch.nn as nn, torch.nn.functional as F


class Conv3dNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1, self.c2 = nn.Conv3d(4, 16, 3, padding=1), nn.Conv3d(16, 32, 3, padding=1)
        self.out = nn.Linear(32, 10)

    def forward(self, x):
        x = F.max_pool3d(F.relu(self.c1(x)), 2)
        return self.out(F.relu(self.c2(x)).mean((2, 3, 4)))


class ConvLSTMNet(nn.Module):
    def __init__(self, cin=4, f=16):
        super().__init__()
        self.f = f
        self.wx, self.wh = nn.Conv2d(cin, 4 * f, 3, padding=1), nn.Conv2d(f, 4 * f, 3, padding=1, bias=False)
        self.out = nn.Linear(f, 10)

    def forward(self, x):  # (N, T, C, H, W)
        n, t = x.shape[:2]
        zx = self.wx(x.flatten(0, 1)).unflatten(0, (n, t))
        h = c = None
        for s in range(t):
            z = zx[:, s] if h is None else zx[:, s] + self.wh(h)
            i, f, g, o = z.chunk(4, 1)
            i, f, o, g = torch.sigmoid(i), torch.sigmoid(f), torch.sigmoid(o), torch.tanh(g)
            c = i * g if c is None else f * c + i * g
            h = o * torch.tanh(c)
        return self.out(h.mean((2, 3)))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="conv3d", choices=["conv3d", "convlstm"])
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--batch", type=int, default=16)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    net = Conv3dNet() if a.model == "conv3d" else ConvLSTMNet()
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    g = torch.Generator().manual_seed(1)
    shape = (a.batch, 4, 16, 16, 16) if a.model == "conv3d" else (a.batch, 8, 4, 16, 16)
    x = torch.rand(shape, generator=g) * 2 - 1
    y = torch.arange(a.batch) % 10
    loss = None
    for i in range(a.warmup + a.steps):
        if i == a.warmup:
            t0 = time.perf_counter()
        opt.zero_grad()
        loss = F.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
    dt = time.perf_counter() - t0
    print("torch %s threads=%d batch=%d samples_per_s=%.1f loss=%.4f blas=%s" %
          (a.model, a.threads, a.batch, a.steps * a.batch / dt, loss.item(), blas_backend()))


if __name__ == "__main__":
    main()

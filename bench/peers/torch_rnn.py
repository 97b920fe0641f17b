#!/usr/bin/env python3
"""Peer baseline for bench/bench_rnn.c: Embedding(20000, 128) + LSTM(128) or GRU(128) + Linear(2),
sequences of 200 ids, batch 64, Adam(1e-3), cross-entropy on one fixed batch of random ids.
    torch_rnn.py --cell lstm|gru --threads 1 [--steps S] [--warmup W]
Prints one line: samples/s over the timed steps (after warm-up), the final loss and which BLAS
torch reaches (blas=openblas with libopenblas0-pthread installed)."""
import argparse, os, sys, time
# torch_models (a copy of ../shared/bench's) pins every thread pool to --threads before torch loads:
# Debian's torch calls the system BLAS, whose own pool ignores torch.set_num_threads.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_models import blas_backend
import torch, torch.nn as nn


class TextClassifier(nn.Module):
    def __init__(self, cell):
        super().__init__()
        self.emb = nn.Embedding(20000, 128)
        self.rnn = (nn.LSTM if cell == "lstm" else nn.GRU)(128, 128, batch_first=True)
        self.out = nn.Linear(128, 2)

    def forward(self, x):
        h, _ = self.rnn(self.emb(x))
        return self.out(h[:, -1])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--cell", default="lstm", choices=["lstm", "gru"])
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--seq", type=int, default=200)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    net = TextClassifier(a.cell)
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(1)
    x = torch.randint(0, 20000, (a.batch, a.seq), generator=g)
    y = torch.arange(a.batch) % 2
    loss = None
    for i in range(a.warmup + a.steps):
        if i == a.warmup:
            t0 = time.perf_counter()
        opt.zero_grad()
        loss = nn.functional.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
    dt = time.perf_counter() - t0
    print("torch %s threads=%d batch=%d seq=%d samples_per_s=%.1f loss=%.4f blas=%s" %
          (a.cell, a.threads, a.batch, a.seq, a.steps * a.batch / dt, loss.item(), blas_backend()))


if __name__ == "__main__":
    main()

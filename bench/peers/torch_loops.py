#!/usr/bin/env python3
"""Peer of bench/keras_loops.py in PyTorch (Debian's python3-torch), one process:
  torch_loops.py --model mlp_tob|mlp_fit1|gan|transfer --steps S --threads N
The same models, optimizers, batches and calls per step, in eager PyTorch (mlp_tob and mlp_fit1
are both one optimizer step on one batch: PyTorch has no fit). Prints ms_per_step=... and blas=."""
import argparse, os, sys, time
_t = next((sys.argv[i + 1] for i, a in enumerate(sys.argv[:-1]) if a == "--threads"), "1")
for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_v] = _t
import torch, torch.nn as nn, torch.nn.functional as F
from torch_models import blas_backend

p = argparse.ArgumentParser()
p.add_argument("--model", required=True, choices=["mlp_tob", "mlp_fit1", "gan", "transfer"])
p.add_argument("--steps", type=int, default=20)
p.add_argument("--threads", type=int, default=1)
a = p.parse_args()
torch.set_num_threads(a.threads)
g = torch.Generator().manual_seed(0)

if a.model.startswith("mlp"):
    m = nn.Sequential(nn.Linear(784, 4096), nn.ReLU(), nn.Linear(4096, 4096), nn.ReLU(), nn.Linear(4096, 4096),
                      nn.ReLU(), nn.Linear(4096, 10))
    opt = torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9)
    x, y = torch.randn(64, 784, generator=g), torch.randint(0, 10, (64,), generator=g)

    def step():
        opt.zero_grad(set_to_none=False)
        F.cross_entropy(m(x), y).backward()
        opt.step()
elif a.model == "transfer":  # torchvision's ResNet-50 without its fc, frozen and in eval mode
    import torchvision
    base = torchvision.models.resnet50()
    base.fc = nn.Identity()
    base.eval()
    for q in base.parameters():
        q.requires_grad_(False)
    head = nn.Linear(2048, 10)
    opt = torch.optim.Adam(head.parameters(), lr=1e-3)
    x, y = torch.randn(16, 3, 96, 96, generator=g), torch.randint(0, 10, (16,), generator=g)

    def step():
        opt.zero_grad(set_to_none=False)
        F.cross_entropy(head(base(x)), y).backward()
        opt.step()
else:
    gen = nn.Sequential(nn.Linear(64, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 784),
                        nn.Tanh())
    dis = nn.Sequential(nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 1),
                        nn.Sigmoid())
    d_opt = torch.optim.Adam(dis.parameters(), lr=2e-4, betas=(0.5, 0.999))
    g_opt = torch.optim.Adam(gen.parameters(), lr=2e-4, betas=(0.5, 0.999))
    real = torch.tanh(torch.randn(64, 784, generator=g))
    ones, zeros = torch.ones(64, 1), torch.zeros(64, 1)

    def d_step(x, t):
        d_opt.zero_grad(set_to_none=False)
        F.binary_cross_entropy(dis(x), t).backward()
        d_opt.step()

    def step():
        noise = torch.randn(64, 64, generator=g)
        with torch.no_grad():
            fake = gen(noise)
        d_step(real, ones)
        d_step(fake, zeros)
        g_opt.zero_grad(set_to_none=False)
        for q in dis.parameters():
            q.requires_grad_(False)
        F.binary_cross_entropy(dis(gen(noise)), ones).backward()
        for q in dis.parameters():
            q.requires_grad_(True)
        g_opt.step()

for _ in range(3):
    step()
t = time.perf_counter()
for _ in range(a.steps):
    step()
dt = time.perf_counter() - t
print(f"model={a.model} threads={a.threads} ms_per_step={1000 * dt / a.steps:.2f} blas={blas_backend()}", flush=True)

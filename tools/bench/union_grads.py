#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""How much data-parallel workers' block selections overlap.

A block-sparse allreduce sends every block any worker picked, so its cost
follows the union of the workers' selections, not one worker's. This
trains an MLP (64-H-H-10, ReLU) on scikit-learn's bundled digits as W
data-parallel workers would (each step: W minibatches, the mean of their
gradients applied with SGD and momentum) and, every few steps, picks each
worker's top blocks (blocks of 256 elements of the flattened gradient,
scored by their largest magnitude, the given fraction of the blocks, as
the sparse codec's exact top-k does) and prints the union's size over one
worker's. tools/bench-allreduce's tally-sparse row models its workers'
tensors (tally-bench allreduce --noise) to give a union ratio at least
this large. Nothing is downloaded; run with Debian's /usr/bin/python3.
"""
import argparse
import statistics

import numpy as np
import torch
from sklearn.datasets import load_digits

BLOCK = 256


def top_blocks(g, frac):
    nb = (len(g) + BLOCK - 1) // BLOCK
    pad = np.zeros(nb * BLOCK, dtype=np.float32)
    pad[:len(g)] = np.abs(g)
    bmax = pad.reshape(nb, BLOCK).max(axis=1)
    k = max(1, int(round(frac * nb)))
    return set(np.argsort(-bmax, kind="stable")[:k].tolist()), k


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--density", type=float, default=0.01,
                    help="fraction of the blocks each worker picks")
    ap.add_argument("--hidden", type=int, default=2048)
    ap.add_argument("--batch", type=int, default=32,
                    help="minibatch of one worker")
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--every", type=int, default=10,
                    help="measure every this many steps")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()

    torch.manual_seed(a.seed)
    digits = load_digits()
    x = torch.tensor(digits.data / 16.0, dtype=torch.float32)
    y = torch.tensor(digits.target, dtype=torch.long)
    model = torch.nn.Sequential(
        torch.nn.Linear(64, a.hidden), torch.nn.ReLU(),
        torch.nn.Linear(a.hidden, a.hidden), torch.nn.ReLU(),
        torch.nn.Linear(a.hidden, 10))
    params = list(model.parameters())
    opt = torch.optim.SGD(params, lr=0.05, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    per_step = a.workers * a.batch
    ratios = []
    step = 0
    for epoch in range(a.epochs):
        perm = torch.randperm(len(x))
        for b in range(len(x) // per_step):
            grads = []
            for w in range(a.workers):
                idx = perm[b * per_step + w * a.batch:
                           b * per_step + (w + 1) * a.batch]
                model.zero_grad()
                loss_fn(model(x[idx]), y[idx]).backward()
                grads.append(torch.cat([p.grad.flatten()
                                        for p in params]).numpy().copy())
            if step % a.every == 0:
                sels = [top_blocks(g, a.density) for g in grads]
                union = set().union(*(s for s, _ in sels))
                k = sels[0][1]
                ratios.append(len(union) / k)
                print(f"union_grads: epoch {epoch + 1} step {step}: "
                      f"{k} blocks a worker, union {len(union)}, "
                      f"ratio {len(union) / k:.2f}")
            mean = np.mean(grads, axis=0)
            off = 0
            for p in params:
                n = p.numel()
                p.grad = torch.tensor(mean[off:off + n]).view_as(p)
                off += n
            opt.step()
            step += 1
    print(f"union_grads: {a.workers} workers, {a.density:g} of the blocks "
          f"each: union / one worker's: median "
          f"{statistics.median(ratios):.2f}, range "
          f"{min(ratios):.2f}-{max(ratios):.2f} over {len(ratios)} steps")


if __name__ == "__main__":
    main()

#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
#
# psgd_views.py: how much of a real gradient bucket a rank-4 PowerSGD
# step keeps, by how the bucket is viewed as matrices. The gradients are
# those of tools/bench-training's MLP (64 -> 2048 -> 2048 -> 10) on
# sklearn's digits, a batch of 4 ranks x 32, DDP's rebuilt bucket 0 in
# the order backward fills it (l3.bias, l3.weight, l2.bias, l2.weight).
# Each view gets one power iteration a step from a warm-started Q (no
# error feedback) and prints the relative error |G - P Q^T| / |G| step
# by step:
#
#   tally, rows = ceil(sqrt(n))  the codec's default view of the bucket
#   tally, rows = R              --rows R (2060: 2048 columns, the
#                                weight rows of l2 nearly aligned)
#   torch, layer-wise            torch's PowerSGD hook: each weight
#                                matrix its own P and Q, biases dense
#
#   /usr/bin/python3 tools/bench/psgd_views.py [--rows 2060] [--steps 8]
import argparse
import math

import torch
import torch.nn as nn
from sklearn.datasets import load_digits

RANK = 4


def data():
    d = load_digits()
    x = torch.tensor(d.data, dtype=torch.float32) / 16.0
    return (x - x.mean(0)) / (x.std(0) + 1e-6), torch.tensor(d.target)


def bucket_grads(model, x, y, step):
    """Bucket 0's gradients at step (a batch of 128 drawn from step)."""
    g = torch.Generator().manual_seed(step)
    idx = torch.randint(0, len(x), (128,), generator=g)
    model.zero_grad()
    nn.functional.cross_entropy(model(x[idx]), y[idx]).backward()
    l2, l3 = model[2], model[4]
    return [l3.bias.grad, l3.weight.grad, l2.bias.grad, l2.weight.grad]


def power_step(m, q):
    """One PowerSGD step on matrix m from q: (approximation, new q)."""
    p, _ = torch.linalg.qr(m @ q)
    q = m.t() @ p
    return p @ q.t(), q


def flat_errors(model, x, y, rows, steps):
    """The bucket as one rows x cols matrix (zero padded), as tally."""
    q, out = None, []
    for s in range(steps):
        f = torch.cat([t.flatten() for t in bucket_grads(model, x, y, s)])
        r = rows or math.ceil(math.sqrt(f.numel()))
        cols = math.ceil(f.numel() / r)
        m = torch.zeros(r * cols)
        m[:f.numel()] = f
        m = m.view(r, cols)
        if q is None:
            q = torch.randn(cols, RANK,
                            generator=torch.Generator().manual_seed(0))
        a, q = power_step(m, q)
        out.append(float((m - a).norm() / m.norm()))
    return (r, cols), out


def layer_errors(model, x, y, steps):
    """Each weight matrix on its own, biases dense, as torch's hook."""
    qs, out = {}, []
    for s in range(steps):
        num = den = 0.0
        for i, t in enumerate(bucket_grads(model, x, y, s)):
            den += float(t.norm() ** 2)
            if t.dim() == 1:
                continue
            if i not in qs:
                qs[i] = torch.randn(
                    t.shape[1], RANK,
                    generator=torch.Generator().manual_seed(0))
            a, qs[i] = power_step(t, qs[i])
            num += float((t - a).norm() ** 2)
        out.append(math.sqrt(num / den))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, default=2060)
    ap.add_argument("--steps", type=int, default=8)
    a = ap.parse_args()
    torch.manual_seed(1)
    torch.set_num_threads(1)
    x, y = data()
    model = nn.Sequential(nn.Linear(64, 2048), nn.ReLU(),
                          nn.Linear(2048, 2048), nn.ReLU(),
                          nn.Linear(2048, 10))
    fmt = " ".join
    for label, rows in (("tally, rows = ceil(sqrt(n))", None),
                        ("tally, rows = %d" % a.rows, a.rows)):
        shape, e = flat_errors(model, x, y, rows, a.steps)
        print("%-30s %4d x %-4d %s" % (label, shape[0], shape[1],
                                       fmt("%.3f" % v for v in e)))
    print("%-30s %-11s %s" % ("torch, layer-wise", "per layer",
                              fmt("%.3f" % v for v in layer_errors(
                                  model, x, y, a.steps))))


if __name__ == "__main__":
    main()

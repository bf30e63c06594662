#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Real gradients for tools/bench-codecs.

Trains a small MLP (64-512-512-10, ReLU) on scikit-learn's bundled digits
(8x8 images, 1797 of them: nothing is downloaded) with PyTorch for a few
epochs, and saves the flattened gradient of every parameter, as one
vector, at a few iterations spread over the training: raw little-endian
f32, one tensor after the other. Beside it, FILE.meta says dim=<elements
of one tensor> and tensors=<how many>, which `tally-bench codecs
--real FILE --real-dim DIM` reads.

Run it with Debian's interpreter, /usr/bin/python3 (python3-torch,
python3-sklearn, python3-numpy).
"""
import argparse
import sys

import numpy as np
import torch
from sklearn.datasets import load_digits


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="f32 file to write")
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--tensors", type=int, default=8,
                    help="iterations whose gradient is saved")
    ap.add_argument("--hidden", type=int, default=512)
    ap.add_argument("--batch", type=int, default=32)
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
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    steps_per_epoch = (len(x) + a.batch - 1) // a.batch
    total = a.epochs * steps_per_epoch
    # The iterations to save: spread evenly, the first one included.
    save = set(int(i * total / a.tensors) for i in range(a.tensors))
    dim = sum(p.numel() for p in model.parameters())
    out = []
    step = 0
    for epoch in range(a.epochs):
        perm = torch.randperm(len(x))
        for b in range(steps_per_epoch):
            idx = perm[b * a.batch:(b + 1) * a.batch]
            opt.zero_grad()
            loss = loss_fn(model(x[idx]), y[idx])
            loss.backward()
            if step in save:
                g = torch.cat([p.grad.detach().flatten()
                               for p in model.parameters()])
                out.append(g.numpy().astype("<f4"))
            opt.step()
            step += 1
        with torch.no_grad():
            acc = (model(x).argmax(1) == y).float().mean().item()
        print(f"capture_grads: epoch {epoch + 1}: loss {loss.item():.4f}, "
              f"train accuracy {acc:.3f}", file=sys.stderr)
    np.concatenate(out).tofile(a.out)
    with open(a.out + ".meta", "w") as f:
        f.write(f"dim={dim}\ntensors={len(out)}\n")
    zeros = float(np.mean(np.concatenate(out) == 0.0))
    print(f"capture_grads: {len(out)} gradients of {dim} elements to "
          f"{a.out} ({zeros:.1%} exact zeros)", file=sys.stderr)


if __name__ == "__main__":
    main()

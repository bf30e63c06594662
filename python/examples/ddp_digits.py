#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Data-parallel training with PyTorch DDP, gradients summed by tally.

Trains a small MLP on scikit-learn's bundled digits (8x8 images, 10
classes) for a few epochs. DDP runs on a gloo process group (it needs one
to broadcast the initial parameters); every gradient bucket goes through
tally's hook instead of gloo's allreduce. One process a rank, as torchrun
starts them:

    export TALLY_TOKEN_FILE=digits.token  # or TALLY_TOKEN=<the token>
    export TALLY_CA=ca.crt                # the CA of tallyd's certificate
    export RANK=0 WORLD_SIZE=4 MASTER_ADDR=10.77.0.11 MASTER_PORT=29500
    /usr/bin/python3 ddp_digits.py tally://10.77.0.254:7470/digits

With --backend tally the process group itself is tally's
(dist.init_process_group("tally"), tally.backend) and DDP needs no hook:
the one-word change of docs/training.md, "The tally backend".

It prints, on rank 0, a line an epoch ("epoch 1: loss 1.2345, test
accuracy 0.8123") and, on every rank, tally's counters at the end. An
error (of tally, of tallyd, of DDP) is printed and the process exits 1.
docs/training.md walks through it; tests/e2e/python_test.sh runs it on a
testbed.
"""
import argparse
import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from torch.nn.parallel import DistributedDataParallel as DDP

import tally
import tally.torch


def data(rank, world):
    """This rank's share of the training set, and the whole test set."""
    x, y = load_digits(return_X_y=True)
    xtr, xte, ytr, yte = train_test_split(x / 16.0, y, test_size=0.2,
                                          random_state=0, stratify=y)
    as_t = (lambda a: torch.tensor(a, dtype=torch.float32),
            lambda a: torch.tensor(a, dtype=torch.int64))
    return (as_t[0](xtr[rank::world]), as_t[1](ytr[rank::world]),
            as_t[0](xte), as_t[1](yte))


def train():
    """Parses the options, trains, prints; raises what goes wrong."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("url", help="tally://HOST[:PORT]/JOB")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--hidden", type=int, default=512)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--backend", choices=("gloo", "tally"), default="gloo",
                    help="the process group: gloo with tally's hook "
                    "(default), or tally's own (no hook)")
    a = ap.parse_args()

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    # Joins the tally job first: a refused join (a wrong token, no such
    # job) then fails on every rank alike, before gloo's rendezvous. The
    # token comes from $TALLY_TOKEN or the file $TALLY_TOKEN_FILE (never
    # the command line), tallyd's CA from $TALLY_CA or the URL's ?ca=.
    if a.backend == "tally":
        # One word: tally is the process group (its job: the URL here,
        # else $TALLY_URL); DDP's allreduces go through it, no hook.
        dist.init_process_group("tally", rank=rank, world_size=world,
                                pg_options={"url": a.url})
        pg = dist.group.WORLD
        ctx = pg.ctx
    else:
        ctx = tally.open(a.url, rank=rank, world=world)
        dist.init_process_group("gloo", rank=rank, world_size=world)
    if rank == 0:
        print("tally job %s: codec %s, world %d" % (a.url,
              ctx.info()["codec"], world), flush=True)

    torch.manual_seed(a.seed)
    model = nn.Sequential(nn.Linear(64, a.hidden), nn.ReLU(),
                          nn.Linear(a.hidden, a.hidden), nn.ReLU(),
                          nn.Linear(a.hidden, 10))
    ddp = DDP(model)
    hook = None
    if a.backend == "gloo":
        hook = tally.torch.HookState(ctx)
        ddp.register_comm_hook(hook, tally.torch.allreduce_hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=a.lr, momentum=0.9)

    xtr, ytr, xte, yte = data(rank, world)
    g = torch.Generator().manual_seed(a.seed + rank)
    steps = len(xtr) // a.batch  # the same on every rank
    steps = torch.tensor([steps])
    dist.all_reduce(steps, op=dist.ReduceOp.MIN)
    for epoch in range(1, a.epochs + 1):
        ddp.train()
        order = torch.randperm(len(xtr), generator=g)
        total = torch.zeros(2)
        for s in range(int(steps)):
            i = order[s * a.batch:(s + 1) * a.batch]
            opt.zero_grad()
            loss = nn.functional.cross_entropy(ddp(xtr[i]), ytr[i])
            loss.backward()  # buckets go through tally as they fill
            opt.step()
            total += torch.tensor([loss.item(), 1.0])
        dist.all_reduce(total)
        ddp.eval()
        with torch.no_grad():
            acc = (model(xte).argmax(1) == yte).float().mean().item()
        if rank == 0:
            print("epoch %d: loss %.4f, test accuracy %.4f"
                  % (epoch, total[0] / total[1], acc), flush=True)
    s = ctx.stats()
    if hook is not None:
        buckets, errors = hook.buckets, hook.errors
        hook.close()
        ctx.close()
    else:  # the group's allreduces through tally (DDP's buckets, ...)
        buckets, errors = pg.routes["tally allreduce"], pg.errors
        pg.close()
    print("rank %d: %d buckets, %d packets, %d retransmits, %d errors"
          % (rank, buckets, s["packets_sent"], s["retransmits"], errors),
          flush=True)


def main():
    """train(), then leave with os._exit: a gloo group can hang in its
    destructor at exit (torch 1.13), with or without an error."""
    rc = 0
    try:
        train()
    except Exception as e:  # tally.Error, DDP's RuntimeError, ...
        print("rank %s: error: %s: %s" % (os.environ.get("RANK", "?"),
              type(e).__name__, e), file=sys.stderr)
        rc = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(rc)


if __name__ == "__main__":
    main()

#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""One rank of tests/python/test_hook.py: DDP with gloo as its process
group, its gradients reduced through tally.torch's hook (a tally context
opened directly at a loopagg aggregator of the test), beside the same
model under DDP's default hook (gloo's allreduce) and a local copy whose
gradients every rank gathers, to know the exact sums.

  hook_rank.py MODE PORT RANK WORLD STORE_PORT CODEC

MODE compare: three iterations (through DDP's bucket rebuild) of both
models; for every bucket, the hook's average against the exact one (the
fixed-point bound of docs/protocol.md) and against gloo's; then the
context is closed and backward must raise, not hang.
MODE error: DDP (one bucket) of this one process on a tally job of WORLD + 1 ranks,
the last of which never comes: the allreduce times out, and backward
must raise libtally's sentence with its errno (not torch's "Unable to
cast ... to Tensor"); the next backward raises the context's EPIPE.
MODE memory: the States kept per bucket index across five iterations,
through the rebuild (torch 1.13's DDP reduces the first iteration in one
bucket, then regroups by the order gradients became ready; this model is
also used in the reverse of its registration order).
MODE psgd: a powersgd job through the hook's per-matrix split, eight
SGD steps of the Wide model on a fixed batch: the States by parameter
(their rows), the gradients' digest of every iteration, the losses.
MODE rebuild: as memory, with a model whose first buckets (DDP with
find_unused_parameters makes several, by registration) differ from the
rebuilt ones in number, sizes and order: every State must have its
bucket's length, be kept from the second iteration on, and the States
of indexes no longer used must go.
Prints one JSON object on stdout and leaves with os._exit (a gloo group
can hang in its destructor).
"""
import copy
import json
import math
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

import tally
import tally.torch

TOKEN = 0x5eed1234abcd
JOB = 7


def fixp_bound(amax, world, exact):
    """The documented bound (tests/python/loop.py has the same words)."""
    b = 30 - int(math.floor(math.log2(world)))
    e = world * 2.0 ** -b * amax
    return e + 2.0 ** -24 * (exact.abs() + e) + 2.0 ** -150


class Reversed(nn.Module):
    """Layers registered last-used-first: DDP's first buckets follow
    registration, its rebuilt ones the order gradients become ready."""

    def __init__(self):
        super().__init__()
        self.c = nn.Linear(96, 10)
        self.b = nn.Linear(160, 96)
        self.a = nn.Linear(64, 160)

    def forward(self, x):
        return self.c(torch.relu(self.b(torch.relu(self.a(x)))))


class Wide(nn.Module):
    """2.4 MB, registered last-used-first: with bucket_cap_mb=0.1 and
    find_unused_parameters DDP starts with three buckets (by
    registration) and rebuilds two of other sizes (by readiness)."""

    def __init__(self):
        super().__init__()
        self.c = nn.Linear(512, 10)
        self.b = nn.Linear(1024, 512)
        self.a = nn.Linear(64, 1024)

    def forward(self, x):
        return self.c(torch.relu(self.b(torch.relu(self.a(x)))))


def mlp():
    """1.7 MB of parameters: past DDP's first bucket (1 MiB), then
    buckets of bucket_cap_mb."""
    return nn.Sequential(nn.Linear(64, 512), nn.ReLU(), nn.Linear(512, 512),
                         nn.ReLU(), nn.Linear(512, 256), nn.ReLU(),
                         nn.Linear(256, 10))


def batch(it, rank):
    g = torch.Generator().manual_seed(1000 * it + rank)
    return torch.randn(32, 64, generator=g), \
        torch.randint(0, 10, (32,), generator=g)


def step(model, x, y):
    model.zero_grad(set_to_none=False)
    nn.functional.cross_entropy(model(x), y).backward()


class Recorder:
    """Wraps the hook: remembers each call's bucket index and the names of
    its parameters (by storage), then calls tally.torch.allreduce_hook."""

    def __init__(self, model):
        self.names = {p.data_ptr(): n for n, p in model.named_parameters()}
        self.calls = []

    def hook(self, state, bucket):
        self.calls.append((bucket.index(),
                           [self.names[p.data_ptr()]
                            for p in bucket.parameters()]))
        return tally.torch.allreduce_hook(state, bucket)


def compare(ctx, rank, world):
    torch.manual_seed(0)
    base = mlp()
    m_t, m_g, local = DDP(copy.deepcopy(base), bucket_cap_mb=0.25), \
        DDP(copy.deepcopy(base), bucket_cap_mb=0.25), copy.deepcopy(base)
    hs = tally.torch.HookState(ctx)
    rec = Recorder(m_t.module)
    m_t.register_comm_hook(hs, rec.hook)
    out = {"iters": [], "worst_exact": 0.0, "worst_gloo": 0.0}
    tp = dict(m_t.module.named_parameters())
    gp = dict(m_g.module.named_parameters())
    lp = dict(local.named_parameters())
    for it in range(3):
        x, y = batch(it, rank)
        rec.calls = []
        for m in (m_t, m_g, local):
            step(m, x, y)
        out["iters"].append([c[0] for c in rec.calls])
        for idx, names in rec.calls:
            # Every rank's local gradients of this bucket, as the hook
            # saw them: divided by world first.
            mine = torch.cat([lp[n].grad.flatten() for n in names]) / world
            parts = [torch.empty_like(mine) for _ in range(world)]
            dist.all_gather(parts, mine)
            stack = torch.stack(parts).double()
            exact = stack.sum(0)
            amax = float(stack.abs().max())
            got = torch.cat([tp[n].grad.flatten() for n in names]).double()
            glo = torch.cat([gp[n].grad.flatten() for n in names]).double()
            bound = fixp_bound(amax, world, exact)
            # gloo sums floats in some order: each addition rounds once.
            gloo_err = world * 2.0 ** -24 * stack.abs().sum(0)
            r1 = float(((got - exact).abs() / bound).max())
            r2 = float(((got - glo).abs() / (bound + gloo_err)).max())
            out["worst_exact"] = max(out["worst_exact"], r1)
            out["worst_gloo"] = max(out["worst_gloo"], r2)
            out.setdefault("max_abs_diff", 0.0)
            out["max_abs_diff"] = max(out["max_abs_diff"],
                                      float((got - glo).abs().max()))
    out["buckets"], out["errors"] = hs.buckets, hs.errors
    out["digest"] = float(sum(p.grad.double().sum() for p in tp.values()))
    # A closed context: the next backward raises (the future completed
    # with the exception), it does not hang.
    ctx.close()
    x, y = batch(9, rank)
    t0 = time.monotonic()
    try:
        step(m_t, x, y)
        out["closed_raised"] = ""
    except RuntimeError as e:
        out["closed_raised"] = str(e)[:300]
    out["closed_s"] = time.monotonic() - t0
    out["errors_after"] = hs.errors
    return out


def memory(ctx, rank, world, model=Reversed, **ddp):
    torch.manual_seed(0)
    base = model()
    ddp.setdefault("bucket_cap_mb", 0.05)
    m_t = DDP(copy.deepcopy(base), **ddp)
    m_g = DDP(copy.deepcopy(base), **ddp)
    hs = tally.torch.HookState(ctx)
    rec = Recorder(m_t.module)
    m_t.register_comm_hook(hs, rec.hook)
    out = {"layouts": [], "states": [], "rebuilt": [], "cos": [],
           "lengths": [], "sizes": [], "dropped": []}
    numel = {n: p.numel() for n, p in m_t.module.named_parameters()}
    for it in range(5):
        x, y = batch(it, rank)
        rec.calls = []
        step(m_t, x, y)
        step(m_g, x, y)
        out["layouts"].append(rec.calls)
        out["sizes"].append({str(i): sum(numel[n] for n in names)
                             for i, names in rec.calls})
        out["states"].append({str(k): id(v) for k, v in hs.states.items()})
        out["lengths"].append({str(k): len(v) for k, v in hs.states.items()})
        out["rebuilt"].append(hs.rebuilt)
        out["dropped"].append(hs.dropped)
        a = torch.cat([p.grad.flatten() for p in m_t.parameters()])
        b = torch.cat([p.grad.flatten() for p in m_g.parameters()])
        out["cos"].append(float(torch.dot(a, b) / (a.norm() * b.norm())))
    out["digest"] = float(sum(p.grad.double().sum()
                              for p in m_t.parameters()))
    out["errors"] = hs.errors
    return out


def error(ctx, rank, world):
    torch.manual_seed(0)
    m = DDP(Reversed())  # one bucket
    hs = tally.torch.HookState(ctx)
    m.register_comm_hook(hs, tally.torch.allreduce_hook)
    out = {"raised": [], "errnos": [], "secs": []}
    for it in range(2):
        x, y = batch(it, rank)
        t0 = time.monotonic()
        try:
            step(m, x, y)
            out["raised"].append("")
        except RuntimeError as e:
            out["raised"].append(str(e))
        out["secs"].append(time.monotonic() - t0)
        out["errnos"].append(getattr(hs.last_error, "errno", None))
    out["errors"] = hs.errors
    return out


def rebuild(ctx, rank, world):
    return memory(ctx, rank, world, Wide, bucket_cap_mb=0.1)


def psgd(ctx, rank, world):
    torch.manual_seed(0)
    m = DDP(Wide(), bucket_cap_mb=1)
    opt = torch.optim.SGD(m.parameters(), lr=0.05)
    hs = tally.torch.HookState(ctx)
    rec = Recorder(m.module)
    m.register_comm_hook(hs, rec.hook)
    names = {p.data_ptr(): n for n, p in m.module.named_parameters()}
    out = {"digests": [], "loss": [], "states": [], "iters": 8}
    g = torch.Generator().manual_seed(7)
    x = torch.randn(64, 64, generator=g)
    y = torch.randint(0, 10, (64,), generator=g)
    xs, ys = x[rank::world], y[rank::world]   # each rank its half
    for it in range(out["iters"]):
        rec.calls = []
        opt.zero_grad(set_to_none=False)
        loss = nn.functional.cross_entropy(m(xs), ys)
        loss.backward()
        opt.step()
        out["loss"].append(float(loss))
        if it == 1:
            out["buckets_first2"] = hs.buckets
        out["digests"].append(float(sum(p.grad.double().sum()
                                        for p in m.parameters())))
        out["states"].append({names[k[0]]: id(v)
                              for k, v in hs.matrices.items()})
    out["rows"] = {names[k[0]]: hs.matrices[k].rows for k in hs.matrices}
    out["want_rows"] = {n: p.shape[0] for n, p in
                        m.module.named_parameters() if p.dim() >= 2}
    out["errors"], out["dense_buckets"] = hs.errors, hs.dense_buckets
    out["compressed"] = hs.compressed
    return out


MODES = {"compare": compare, "memory": memory, "error": error,
         "rebuild": rebuild, "psgd": psgd}


def main():
    mode, port, rank, world, store, codec = sys.argv[1:7]
    rank, world = int(rank), int(world)
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:" + store,
                            rank=rank, world_size=world)
    # MODE error: one rank of the tally job never comes.
    tworld = world + 1 if mode == "error" else world
    ctx = tally.open_direct("127.0.0.1", JOB, TOKEN, rank, tworld,
                            dp_port=int(port), window=16, elems=256,
                            codec=codec,
                            timeout=0.5 if mode == "error" else 10)
    try:
        out = MODES[mode](ctx, rank, world)
        out["ok"] = True
    except Exception as e:  # reported to the test
        out = {"ok": False, "error": repr(e)}
    sys.stdout.write(json.dumps(out) + "\n")
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()

#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""One rank of tests/python/test_backend.py: torch.distributed on the
backend "tally" (dist.init_process_group("tally"), the context opened
directly at a loopagg aggregator of the test and handed over in
pg_options), beside a gloo group of the same ranks as the reference.

  backend_rank.py MODE PORT RANK WORLD STORE_PORT

MODE conform: every call the backend takes, sync and async, against
gloo's result on the same tensors (or, for what gloo lacks, what gloo
users do), sizes 0, 1, 257 and a prime.
MODE handoff: operations tally does not do (allreduce max, float64,
all_to_all) reach gloo, give gloo's results, and are logged once each.
MODE ddp: DDP without a hook on the tally group against DDP on gloo: the
gradients of every bucket within the fixed-point bound.
MODE train: two epochs of DDP on the tally group; the loss per epoch.
MODE zero: ZeroRedundancyOptimizer over DDP on the tally group; the loss
per epoch and the parameters' digest.
MODE sharded: no DDP; bfloat16 gradients reduce-scattered, SGD on each
rank's shard, the parameters all-gathered (tools/bench/ddp_train.py's
Sharded, what the bench's tally-sharded row runs); loss per epoch.
MODE kill: the last rank leaves once DDP is set up; the others' backward
and allreduce (tally) and broadcast (gloo) must raise, not hang.
Prints one JSON object on stdout and leaves with os._exit (a gloo group
can hang in its destructor).
"""
import copy
import datetime
import json
import logging
import math
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

import tally
import tally.torch  # registers the backend "tally"

TOKEN = 0x5eed1234abcd
JOB = 7
SIZES = [0, 1, 257, 1009]


def fixp_bound(amax, world, exact):
    """docs/protocol.md's bound (tests/python/loop.py has the same)."""
    b = 30 - int(math.floor(math.log2(world)))
    e = world * 2.0 ** -b * amax
    return e + 2.0 ** -24 * (exact.abs() + e) + 2.0 ** -150


class Check:
    """Collects named checks: worst error / bound, and failures."""

    def __init__(self):
        self.fail = []
        self.worst = 0.0
        self.n = 0

    def exact(self, name, got, want):
        self.n += 1
        if got.dtype != want.dtype or got.shape != want.shape or \
                not torch.equal(got, want):
            self.fail.append("%s: %s != %s" % (name, got.flatten()[:4],
                                               want.flatten()[:4]))

    def within(self, name, got, want, bound):
        self.n += 1
        if got.numel() == 0:
            return
        r = float(((got.double() - want.double()).abs() /
                   bound.clamp(min=1e-300)).max())
        self.worst = max(self.worst, r)
        if r > 1.0:
            self.fail.append("%s: error %.3g of the bound" % (name, r))


def gen(rank, n, dtype, seed=0):
    g = torch.Generator().manual_seed(1000 * seed + 17 * rank + n)
    if dtype in (torch.int32, torch.int64):
        return torch.randint(-1000, 1000, (n,), generator=g, dtype=dtype)
    return (torch.randn(n, generator=g, dtype=torch.float64)
            * 3).to(dtype)


def everyone(x, ref):
    """Every rank's x (through the gloo group), stacked."""
    if x.numel() == 0:  # gloo 1.13 divides by zero on empty tensors
        return torch.empty((ref.size(),) + tuple(x.shape), dtype=x.dtype)
    parts = [torch.empty_like(x) for _ in range(ref.size())]
    dist.all_gather(parts, x, group=ref)
    return torch.stack(parts)


def gloo_allreduce(x, ref, op=dist.ReduceOp.SUM):
    """gloo's allreduce of x (in place; empty: nothing to do, as gloo
    1.13 would divide by zero)."""
    if x.numel():
        dist.all_reduce(x, op=op, group=ref)
    return x


def run(call, async_op):
    """call(async_op) -> work or None; waits like a user would and checks
    the Work's surface on the async path."""
    w = call(async_op)
    if async_op:
        fut = w.get_future()
        w.wait()
        assert w.is_completed()
        assert isinstance(fut.wait(), list)


def conform(rank, world, ref):
    ck = Check()
    pg = dist.group.WORLD
    # What the backend says of its routes (INFO: a fallback to an
    # allreduce or to the inner gloo group is logged once).
    rec = Records()
    lg = logging.getLogger("tally.backend")
    lg.addHandler(rec)
    lg.setLevel(logging.INFO)
    stats0 = pg.ctx.stats()["packets_sent"]
    for async_op in (False, True):
        for n in SIZES:
            tag = "%s n=%d" % ("async" if async_op else "sync", n)
            # allreduce sum and avg, float32: the bound, and gloo.
            for op in (dist.ReduceOp.SUM, dist.ReduceOp.AVG):
                x = gen(rank, n, torch.float32)
                allx = everyone(x, ref).double()
                if op == dist.ReduceOp.AVG:
                    scaled = everyone(x * (1.0 / world), ref).double()
                else:
                    scaled = allx
                exact = scaled.sum(0)
                amax = float(scaled.abs().max()) if n else 0.0
                t = x.clone()
                run(lambda a: dist.all_reduce(t, op=op, async_op=a),
                    async_op)
                g = gloo_allreduce(x.clone(), ref)
                if op == dist.ReduceOp.AVG:
                    g = g / world
                bound = fixp_bound(amax, world, exact)
                gloo_err = world * 2.0 ** -24 * scaled.abs().sum(0)
                ck.within("allreduce %s f32 %s" % (op, tag), t, exact, bound)
                ck.within("allreduce %s f32 vs gloo %s" % (op, tag), t, g,
                          bound + gloo_err + 2.0 ** -24 * g.abs())
            # int32: exact, equal to gloo.
            x = gen(rank, n, torch.int32)
            t = x.clone()
            run(lambda a: dist.all_reduce(t, async_op=a), async_op)
            ck.exact("allreduce i32 " + tag, t, gloo_allreduce(x.clone(),
                                                               ref))
            # bfloat16 and float16: the fixed-point sum rounded once to
            # the type; within the bound plus half an ulp of the result.
            for dt in (torch.bfloat16, torch.float16):
                x = gen(rank, n, dt)
                exact = everyone(x.float(), ref).double().sum(0)
                amax = float(everyone(x.float(), ref).abs().max()) \
                    if n else 0.0
                t = x.clone()
                run(lambda a: dist.all_reduce(t, async_op=a), async_op)
                half_ulp = exact.abs() * (2.0 ** -8 if dt == torch.bfloat16
                                          else 2.0 ** -11) + 2.0 ** -24
                ck.within("allreduce %s %s" % (dt, tag), t, exact,
                          fixp_bound(amax, world, exact) * 1.01 + half_ulp)
                if dt == torch.float16:
                    g = gloo_allreduce(x.clone(), ref)
                    ck.within("allreduce f16 vs gloo " + tag, t, g,
                              2 * half_ulp + world * 2.0 ** -11 *
                              everyone(x.float(), ref).double().abs().sum(0))
            # broadcast from the last rank: f32, bf16, i64; equal.
            for dt in (torch.float32, torch.bfloat16, torch.int64):
                x = gen(rank, n, dt)
                t = x.clone()
                run(lambda a: dist.broadcast(t, world - 1, async_op=a),
                    async_op)
                # gloo: bfloat16 as float32 (it refuses bfloat16).
                g = x.float() if dt == torch.bfloat16 else x.clone()
                if n:
                    dist.broadcast(g, world - 1, group=ref)
                g = g.to(dt)
                ck.exact("broadcast %s %s" % (dt, tag), t, g)
            # all_gather, list and tensor forms; f32 and bf16; equal.
            for dt in (torch.float32, torch.bfloat16):
                x = gen(rank, n, dt)
                outs = [torch.full((n,), -1.0, dtype=dt)
                        for _ in range(world)]
                run(lambda a: dist.all_gather(outs, x, async_op=a),
                    async_op)
                # gloo: bfloat16 as float32 (it refuses bfloat16).
                want = [w.to(dt) for w in everyone(x.float(), ref)]
                for r in range(world):
                    ck.exact("all_gather %s %s [%d]" % (dt, tag, r),
                             outs[r], want[r])
                whole = torch.full((world * n,), -1.0, dtype=dt)
                run(lambda a: dist.all_gather_into_tensor(whole, x,
                                                          async_op=a),
                    async_op)
                ck.exact("all_gather_into_tensor %s %s" % (dt, tag), whole,
                         torch.cat(want))
            # reduce_scatter, list and tensor forms, sum and avg (f32),
            # against gloo's allreduce-and-slice (gloo has none).
            for op in (dist.ReduceOp.SUM, dist.ReduceOp.AVG):
                x = gen(rank, world * n, torch.float32, seed=3)
                scaled = everyone(x * (1.0 / world) if
                                  op == dist.ReduceOp.AVG else x,
                                  ref).double()
                exact = scaled.sum(0)[rank * n:(rank + 1) * n]
                amax = float(scaled.abs().max()) if n else 0.0
                bound = fixp_bound(amax, world, exact)
                out = torch.full((n,), 7.0)
                ins = list(x.clone().chunk(world)) if n else \
                    [torch.empty(0)] * world
                run(lambda a: dist.reduce_scatter(out, ins, op=op,
                                                  async_op=a), async_op)
                ck.within("reduce_scatter %s %s" % (op, tag), out, exact,
                          bound)
                out2 = torch.full((n,), 7.0)
                xin = x.clone()
                run(lambda a: dist.reduce_scatter_tensor(out2, xin, op=op,
                                                         async_op=a),
                    async_op)
                ck.exact("reduce_scatter_tensor %s %s input kept" % (op, tag),
                         xin, x)
                ck.exact("reduce_scatter forms agree %s %s" % (op, tag),
                         out2, out)
                g = gloo_allreduce(x.clone(), ref)
                if op == dist.ReduceOp.AVG:
                    g = g / world
                g = g[rank * n:(rank + 1) * n]
                ck.within("reduce_scatter %s vs gloo %s" % (op, tag), out,
                          g, bound + world * 2.0 ** -23 *
                          scaled.abs().sum(0)[rank * n:(rank + 1) * n])
        run(lambda a: dist.barrier(async_op=a), async_op)
    digest = []
    for n in SIZES:
        t = gen(rank, n, torch.float32, seed=5)
        dist.all_reduce(t)
        digest.append(t.double().sum().item())
    pgr = pg.routes
    lg.removeHandler(rec)
    return {"checks": ck.n, "fail": ck.fail[:20], "worst": ck.worst,
            "digest": digest, "routes": dict(pgr), "errors": pg.errors,
            "said": [m for lvl, m in rec.msgs],
            "packets": pg.ctx.stats()["packets_sent"] - stats0}


class Records(logging.Handler):
    def __init__(self):
        super().__init__()
        self.msgs = []

    def emit(self, record):
        self.msgs.append((record.levelname, record.getMessage()))


def handoff(rank, world, ref):
    """Operations tally does not do: gloo's results, logged once each."""
    rec = Records()
    logging.getLogger("tally.backend").addHandler(rec)
    ck = Check()
    pg = dist.group.WORLD
    for i in range(3):
        x = gen(rank, 300, torch.float32, seed=i)
        t, g = x.clone(), x.clone()
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        dist.all_reduce(g, op=dist.ReduceOp.MAX, group=ref)
        ck.exact("max", t, g)
        x = gen(rank, 300, torch.float64, seed=i)
        t, g = x.clone(), x.clone()
        w = dist.all_reduce(t, async_op=True)
        w.wait()
        dist.all_reduce(g, group=ref)
        ck.exact("f64", t, g)
        x = gen(rank, 4 * world, torch.int64, seed=i)
        o, og = torch.empty_like(x), torch.empty_like(x)
        dist.all_to_all_single(o, x)
        dist.all_to_all_single(og, x, group=ref)
        ck.exact("all_to_all", o, og)
    warn = [m for lvl, m in rec.msgs if lvl == "WARNING"]
    return {"fail": ck.fail, "warnings": warn, "routes": dict(pg.routes)}


def mlp():
    return nn.Sequential(nn.Linear(64, 512), nn.ReLU(), nn.Linear(512, 512),
                         nn.ReLU(), nn.Linear(512, 256), nn.ReLU(),
                         nn.Linear(256, 10))


def batch(it, rank, n=32):
    g = torch.Generator().manual_seed(1000 * it + rank)
    return torch.randn(n, 64, generator=g), \
        torch.randint(0, 10, (n,), generator=g)


def ddp(rank, world, ref):
    """DDP (default hook) on tally against DDP on gloo, three iterations
    through DDP's bucket rebuild: every gradient within the bound of the
    exact average, and of gloo's."""
    torch.manual_seed(0)
    base = mlp()
    m_t = DDP(copy.deepcopy(base), bucket_cap_mb=0.25)
    m_g = DDP(copy.deepcopy(base), bucket_cap_mb=0.25, process_group=ref)
    local = copy.deepcopy(base)
    out = {"worst_exact": 0.0, "worst_gloo": 0.0, "max_abs_diff": 0.0}
    for it in range(3):
        x, y = batch(it, rank)
        for m in (m_t, m_g, local):
            m.zero_grad(set_to_none=False)
            nn.functional.cross_entropy(m(x), y).backward()
        # What DDP's reducer puts in its buckets: each gradient times
        # 1/world (a float32 product); the fixed-point scale is a
        # bucket's, so the bound takes the largest |x| of the model
        # (every bucket's is at most that).
        stacks = [everyone(pl.grad.flatten() * (1.0 / world), ref).double()
                  for pl in local.parameters()]
        amax = max(float(s.abs().max()) for s in stacks)
        for pt, pg_, stack in zip(m_t.parameters(), m_g.parameters(),
                                  stacks):
            exact = stack.sum(0)
            bound = fixp_bound(amax, world, exact)
            got = pt.grad.flatten().double()
            glo = pg_.grad.flatten().double()
            gloo_err = world * 2.0 ** -24 * stack.abs().sum(0)
            out["worst_exact"] = max(out["worst_exact"], float(
                ((got - exact).abs() / bound).max()))
            out["worst_gloo"] = max(out["worst_gloo"], float(
                ((got - glo).abs() / (bound + gloo_err)).max()))
            out["max_abs_diff"] = max(out["max_abs_diff"],
                                      float((got - glo).abs().max()))
    out["digest"] = float(sum(p.grad.double().sum()
                              for p in m_t.parameters()))
    out["routes"] = dict(dist.group.WORLD.routes)
    return out


def data(rank, world, n=1536):
    """A fixed learnable problem (a random teacher), this rank's share."""
    g = torch.Generator().manual_seed(42)
    x = torch.randn(n, 64, generator=g)
    w = torch.randn(64, 10, generator=g)
    y = (x @ w).argmax(1)
    return x[rank::world], y[rank::world]


def epochs(model, opt, rank, world, n_epochs=2, bs=32):
    x, y = data(rank, world)
    losses = []
    for ep in range(n_epochs):
        tot, cnt = 0.0, 0
        for i in range(0, len(x), bs):
            opt.zero_grad()
            loss = nn.functional.cross_entropy(model(x[i:i + bs]),
                                               y[i:i + bs])
            loss.backward()
            opt.step()
            tot += float(loss)
            cnt += 1
        t = torch.tensor([tot / cnt])
        dist.all_reduce(t, op=dist.ReduceOp.AVG)
        losses.append(float(t))
    return losses


def train(rank, world, ref):
    torch.manual_seed(0)
    m = DDP(mlp())
    opt = torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9)
    losses = epochs(m, opt, rank, world)
    return {"losses": losses, "routes": dict(dist.group.WORLD.routes),
            "digest": float(sum(p.double().sum() for p in m.parameters()))}


def zero(rank, world, ref):
    from torch.distributed.optim import ZeroRedundancyOptimizer
    torch.manual_seed(0)
    m = DDP(mlp())
    opt = ZeroRedundancyOptimizer(m.parameters(),
                                  optimizer_class=torch.optim.SGD,
                                  lr=0.05, momentum=0.9)
    losses = epochs(m, opt, rank, world)
    return {"losses": losses, "routes": dict(dist.group.WORLD.routes),
            "digest": float(sum(p.double().sum() for p in m.parameters()))}


def sharded(rank, world, ref):
    sys.path.insert(0, os.path.join(os.environ["TALLY_SRC"], "tools",
                                    "bench"))
    import ddp_train
    torch.manual_seed(0)
    m = mlp()
    opt = ddp_train.Sharded(torch, dist, list(m.parameters()), 0.05)
    losses = epochs(m, opt, rank, world)
    return {"losses": losses, "routes": dict(dist.group.WORLD.routes),
            "digest": float(sum(p.double().sum() for p in m.parameters())),
            "shard": opt.k, "n": opt.n}


def kill(rank, world, ref):
    torch.manual_seed(0)
    m = DDP(mlp())  # every rank, before the last one leaves
    dist.barrier()
    if rank == world - 1:
        sys.stdout.write(json.dumps({"ok": True, "left": True}) + "\n")
        sys.stdout.flush()
        os._exit(0)
    x, y = batch(0, rank)
    out = {}
    for name, call in (("backward", lambda: nn.functional.cross_entropy(
                            m(x), y).backward()),
                       ("allreduce", lambda: dist.all_reduce(
                            torch.ones(1000))),
                       ("broadcast", lambda: dist.broadcast(
                            torch.ones(1000), 0)),
                       ("async", lambda: dist.all_reduce(
                            torch.ones(10), async_op=True).wait())):
        t0 = time.monotonic()
        try:
            call()
            out[name] = ""
        except Exception as e:  # what the test looks at
            out[name] = "%s: %s" % (type(e).__name__, str(e)[:300])
        out[name + "_s"] = time.monotonic() - t0
    return out


MODES = {"conform": conform, "handoff": handoff, "ddp": ddp,
         "train": train, "zero": zero, "sharded": sharded, "kill": kill}


def main():
    mode, port, rank, world, store = sys.argv[1:6]
    rank, world = int(rank), int(world)
    torch.set_num_threads(1)
    ctx = tally.open_direct("127.0.0.1", JOB, TOKEN, rank, world,
                            dp_port=int(port), window=16, elems=256,
                            timeout=2 if mode == "kill" else 20)
    dist.init_process_group("tally", init_method="tcp://127.0.0.1:" + store,
                            rank=rank, world_size=world,
                            timeout=datetime.timedelta(
                                seconds=5 if mode == "kill" else 30),
                            pg_options={"ctx": ctx})
    ref = dist.new_group(backend="gloo")
    try:
        out = MODES[mode](rank, world, ref)
        out["ok"] = True
    except Exception:  # reported to the test
        import traceback
        out = {"ok": False, "error": traceback.format_exc()[-2000:]}
    sys.stdout.write(json.dumps(out) + "\n")
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()

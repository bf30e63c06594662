# SPDX-License-Identifier: BSD-3-Clause
"""The torch.distributed backend "tally" (tally.backend) against loopagg
(the real engine on 127.0.0.1). In this process: registration, the
group's refusals, its Work objects on an error, and the switch to a
context's own reduce_scatter / allgather / broadcast when it has them.
In three processes (tests/python/backend_rank.py), each calling
dist.init_process_group("tally"): every call against gloo's result,
sync and async; operations handed to gloo and logged once; DDP without a
hook against DDP on gloo within the fixed-point bound; two epochs of DDP
and of ZeroRedundancyOptimizer whose loss falls; a sharded loop in
bfloat16 (reduce_scatter, all_gather) whose loss falls; a rank that leaves
makes the others' calls raise, not hang."""
import datetime
import errno
import json
import os
import socket
import subprocess
import sys
import time

import pytest

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")

import tally  # noqa: E402
import tally.torch  # noqa: E402
from tally import backend  # noqa: E402
from loop import Loop  # noqa: E402

WORLD = 3


def _group(ctx, **opts):
    """A tally group of world 1 on ctx, outside init_process_group."""
    return backend.ProcessGroupTally(dist.HashStore(), 0, 1,
                                     datetime.timedelta(seconds=10),
                                     dict(opts, ctx=ctx))


def test_registered_by_import():
    """import tally.torch registers "tally"; registering again is a
    no-op."""
    assert "TALLY" in dist.Backend._plugins
    backend.register()
    assert dist.Backend("tally") == "tally"


def test_refusals(monkeypatch):
    """No job named: a ValueError saying what to set; a job whose codec
    is lossy: refused with a pointer to the hook (no silent lossy sums);
    a context of another world than the group's: refused."""
    monkeypatch.delenv("TALLY_URL", raising=False)
    with pytest.raises(ValueError, match="TALLY_URL"):
        backend.ProcessGroupTally(dist.HashStore(), 0, 1, 5, None)
    with Loop(1, codec="q8,ef=1") as loop, loop.open(0) as ctx:
        with pytest.raises(ValueError, match="DDP hook"):
            _group(ctx)
        with pytest.raises(ValueError, match="DDP hook"):
            _group(ctx, lossy=True)  # a codec with memory
    with Loop(2) as loop, loop.open(0) as ctx:
        with pytest.raises(ValueError, match="rank 0 of 2"):
            _group(ctx)


def test_lossy_reduce_scatter():
    """A q8 job with lossy=True (opted in twice: the job's codec and the
    option): float32 reduce_scatter goes through the codec as allreduce
    does, the shard bit for bit the codec's allreduce's (a fresh group
    each, so that the draws line up), not the exact bits; all_gather and
    broadcast stay exact (docs/training.md)."""
    x = torch.linspace(-3.0, 5.0, 1001)
    outs = []
    for kind in ("rs", "ar"):
        with Loop(1, codec="q8,seed=3") as loop, loop.open(0) as ctx:
            pg = _group(ctx, lossy=True)
            y = x.clone()
            if kind == "rs":
                out = torch.zeros(1001)
                pg._reduce_scatter_base(out, y).wait()
                assert pg.routes["tally reduce_scatter"] == 1
                g = torch.zeros(1001)
                pg._allgather_base(g, x.clone()).wait()
                assert torch.equal(g, x)
                outs.append(out)
            else:
                pg.allreduce([y]).wait()
                outs.append(y)
            pg.close()
    assert outs[0].numpy().tobytes() == outs[1].numpy().tobytes()
    assert not torch.equal(outs[0], x)
    assert (outs[0] - x).abs().max() <= 5.0 / 127 + 1e-6


def test_error_completes_work():
    """After the context fails (here: closed), every operation's Work
    completes with the exception: wait() raises the tally.Error (errno),
    the future fails, is_success() is False; later ones too; no hang."""
    with Loop(1) as loop, loop.open(0) as ctx:
        pg = _group(ctx)
        t = torch.ones(5)
        w = pg.allreduce([t])
        w.wait()
        assert w.is_completed() and w.is_success()
        assert w.get_future().wait()[0] is t and t.tolist() == [1.0] * 5
        ctx.close()
        t0 = time.monotonic()
        for op in (lambda: pg.allreduce([torch.ones(5)]),
                   lambda: pg.barrier(),
                   lambda: pg._reduce_scatter_base(torch.ones(5),
                                                   torch.ones(5))):
            w = op()
            with pytest.raises(tally.Error) as e:
                w.wait()
            assert e.value.errno == errno.EBADF
            assert w.is_completed() and not w.is_success()
            with pytest.raises(RuntimeError, match="context is closed"):
                w.get_future().wait()
        assert pg.errors == 3
        assert time.monotonic() - t0 < 5
        pg.close()


class Native:
    """A context with the collectives libtally is gaining
    (Context.reduce_scatter, .allgather, .broadcast, and `dtypes`),
    done here for world 1 through the real context's allreduce, to show
    that the backend takes them when a context has them (the feature
    detection), with the arguments it documents."""

    dtypes = ("float32", "int32", "bfloat16", "float16")

    def __init__(self, ctx):
        self._ctx = ctx
        self.calls = []

    def __getattr__(self, name):
        return getattr(self._ctx, name)

    def allreduce(self, x, **kw):
        self.calls.append(("allreduce", x.dtype))
        if x.dtype in (torch.bfloat16, torch.float16):
            y = x.float()
            self._ctx.allreduce(y, **kw)
            x.copy_(y)
            return x
        return self._ctx.allreduce(x, **kw)

    def reduce_scatter(self, inp, out, mean=False):
        self.calls.append(("reduce_scatter", inp.numel(), out.numel(), mean))
        self._ctx.allreduce(inp, mean=mean)
        out.copy_(inp.view_as(out))

    def allgather(self, inp, out):
        self.calls.append(("allgather", inp.numel(), out.numel()))
        out.copy_(inp.reshape(out.shape))

    def broadcast(self, t, root):
        self.calls.append(("broadcast", t.numel(), root))


def test_native_collectives_when_the_context_has_them():
    """Feature detection: with Context.reduce_scatter / .allgather /
    .broadcast present the backend calls them (no gloo, no allreduce of
    the whole tensor); 16-bit dtypes listed in Context.dtypes go to
    ctx.allreduce as they are. Without them: the fallbacks (the
    conformance test below runs those against gloo)."""
    with Loop(1) as loop, loop.open(0) as ctx:
        nat = Native(ctx)
        pg = _group(nat)
        x = torch.arange(6, dtype=torch.float32)
        out = torch.zeros(6)
        pg._reduce_scatter_base(out, x.clone()).wait()
        assert out.tolist() == x.tolist()
        pg.reduce_scatter([out], [[x.clone()]]).wait()
        whole = torch.zeros(6)
        pg._allgather_base(whole, x).wait()
        outs = [torch.zeros(6)]
        pg.allgather([outs], [x]).wait()
        assert whole.tolist() == outs[0].tolist() == x.tolist()
        opts = dist.BroadcastOptions()
        opts.rootRank = 0
        pg.broadcast([x], opts).wait()
        b = torch.ones(4, dtype=torch.bfloat16)
        pg.allreduce([b]).wait()
        assert [c[0] for c in nat.calls] == [
            "reduce_scatter", "reduce_scatter", "allgather", "allgather",
            "broadcast", "allreduce"]
        assert nat.calls[-1] == ("allreduce", torch.bfloat16)
        assert nat.calls[0] == ("reduce_scatter", 6, 6, False)
        pg.close()
        # The same calls on tally.Context: its own reduce_scatter (the
        # extension's); 16-bit sums by the extension, which reports its
        # lanes in info() (tally_allreduce_typed), averages as float32.
        pg = _group(ctx)
        out = torch.zeros(6)
        pg._reduce_scatter_base(out, x.clone()).wait()
        assert out.tolist() == x.tolist()
        assert backend._sixteen(ctx) == {torch.bfloat16, torch.float16}
        for dt in (torch.bfloat16, torch.float16):
            b = torch.full((4,), 1.5, dtype=dt)
            pg.allreduce([b]).wait()
            assert b.tolist() == [1.5] * 4
        assert not any("of torch.bfloat16" in k or "of torch.float16" in k
                       for k in pg._said), pg._said
        opts = dist.AllreduceOptions()
        opts.reduceOp = dist.ReduceOp.AVG
        pg.allreduce([b], opts).wait()
        assert b.tolist() == [1.5] * 4
        assert "allreduce avg of torch.float16" in pg._said
        assert pg.routes["tally reduce_scatter"] == 1
        pg.close()


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ranks(mode, world=WORLD):
    """Runs backend_rank.py MODE in world processes against one loopagg
    job; returns their JSON outputs by rank."""
    script = os.path.join(os.path.dirname(__file__), "backend_rank.py")
    env = dict(os.environ, GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1")
    with Loop(world) as loop:
        store = _free_port()
        procs = [subprocess.Popen(
            [sys.executable, script, mode, str(loop.port), str(r),
             str(world), str(store)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
            text=True) for r in range(world)]
        outs = []
        for p in procs:
            try:
                o, e = p.communicate(timeout=240)
            except subprocess.TimeoutExpired:
                for q in procs:
                    q.kill()
                raise
            sys.stderr.write(e[-3000:])
            assert p.returncode == 0, e[-3000:]
            outs.append(json.loads(o.strip().splitlines()[-1]))
    for o in outs:
        assert o["ok"], o.get("error")
    return outs


def test_conformance_sync_and_async():
    """all_reduce (sum, avg; float32 within the fixed-point bound of the
    exact sum and of gloo's; int32 equal to gloo's; bfloat16 and float16
    within the bound plus half an ulp), broadcast, all_gather and
    all_gather_into_tensor (equal to gloo's, bfloat16 too),
    reduce_scatter and reduce_scatter_tensor (sum, avg: within the bound
    of gloo's allreduce-and-slice; the input left as it was), barrier;
    each sync and async (Work.wait, is_completed, get_future), sizes 0,
    1, 257 and 1009, world 3; results bit-identical on every rank."""
    outs = _ranks("conform")
    for o in outs:
        assert o["fail"] == [], o["fail"]
        assert o["checks"] > 200 and o["worst"] <= 1.0
        assert o["errors"] == 0
        assert o["routes"]["tally allreduce"] >= 30
        assert o["routes"]["tally reduce_scatter"] >= 30
        assert not any(k.startswith("gloo") for k in o["routes"]), o
        # reduce_scatter, all_gather and broadcast went through the
        # context's own calls (libtally's collectives), not an allreduce
        # of the whole tensor nor the inner gloo group: no fallback was
        # logged, and the context sent their packets.
        assert not any("has no" in m or "inner gloo" in m
                       for m in o["said"]), o["said"]
        assert o["packets"] > 0
    assert len({json.dumps(o["digest"]) for o in outs}) == 1


def test_unsupported_ops_go_to_gloo_logged_once():
    """allreduce max, float64 and all_to_all, three times each: gloo's
    results exactly, one WARNING each naming the kind."""
    for o in _ranks("handoff"):
        assert o["fail"] == []
        assert o["routes"] == {"gloo allreduce max": 3,
                               "gloo allreduce of torch.float64": 3,
                               "gloo alltoall": 3}
        assert len(o["warnings"]) == 3, o["warnings"]
        for kind in ("allreduce max", "torch.float64", "alltoall"):
            assert sum(kind in w for w in o["warnings"]) == 1


def test_ddp_without_hook_equals_gloo_within_bound():
    """DDP on init_process_group("tally"), no hook: every gradient of
    three iterations (through DDP's bucket rebuild) within the
    fixed-point bound of the exact average and of DDP on gloo; the
    allreduces went through tally, DDP's start (allgather, broadcast)
    through gloo; the same gradients on every rank."""
    outs = _ranks("ddp")
    for o in outs:
        assert o["worst_exact"] <= 1.0 and o["worst_gloo"] <= 1.0, o
        assert o["routes"]["tally allreduce"] >= 3
    assert len({o["digest"] for o in outs}) == 1
    print("max |tally - gloo|: %g" % max(o["max_abs_diff"] for o in outs))


def test_ddp_two_epochs_loss_falls():
    outs = _ranks("train")
    for o in outs:
        first, second = o["losses"]
        assert second < first, o["losses"]
    assert len({o["digest"] for o in outs}) == 1


def test_zero_redundancy_optimizer_loss_falls():
    """ZeroRedundancyOptimizer over DDP on the tally group: the loss
    falls over two epochs and every rank ends with the same
    parameters (each rank steps its shard, then broadcasts it)."""
    outs = _ranks("zero")
    for o in outs:
        first, second = o["losses"]
        assert second < first, o["losses"]
        assert o["routes"]["broadcast"] > 100
    assert len({o["digest"] for o in outs}) == 1


def test_sharded_bf16_loop_loss_falls():
    """Sharded by hand (tools/bench/ddp_train.py's Sharded, the bench's
    tally-sharded row): bfloat16 gradients through reduce_scatter_tensor
    (avg), SGD on each rank's shard, all_gather_into_tensor of the
    float32 parameters: the loss falls over two epochs, every rank ends
    with the same parameters, and nothing went to gloo but the
    all-gather."""
    outs = _ranks("sharded")
    for o in outs:
        first, second = o["losses"]
        assert second < first, o["losses"]
        assert o["routes"]["tally reduce_scatter"] == o["routes"]["allgather"]
        assert o["routes"]["tally reduce_scatter"] >= 2 * 1536 // 32 // 3
        assert not any(k.startswith("gloo") for k in o["routes"]), o
        assert o["shard"] * WORLD >= o["n"] > (o["shard"] - 1) * WORLD
    assert len({o["digest"] for o in outs}) == 1


def test_killed_rank_raises_not_hangs():
    """The last rank leaves once DDP is set up: the others' backward
    raises tally's ETIMEDOUT (DDP's reduction through the group) within
    the context's timeout (2 s); a later allreduce and an async one raise
    the context's EPIPE at once; a broadcast from rank 0 (gloo) raises
    gloo's error there (a rank that needs only rank 0 may get its
    data)."""
    outs = _ranks("kill")
    assert outs[-1]["left"]
    for o in outs[:-1]:
        assert "[Errno %d] no result from the dataplane" % errno.ETIMEDOUT \
            in o["backward"], o
        assert o["backward_s"] < 10
        for k in ("allreduce", "async"):
            assert "[Errno %d]" % errno.EPIPE in o[k], o
            assert o[k + "_s"] < 5
        assert o["broadcast_s"] < 10
    assert outs[0]["broadcast"], outs[0]

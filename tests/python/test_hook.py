# SPDX-License-Identifier: BSD-3-Clause
"""tally.torch's DDP communication hook against loopagg (the real engine
on 127.0.0.1). In this process: the hook's futures, order, averaging,
per-bucket memory across a change of layout, and errors, with buckets
handed over as DDP hands them (index, buffer, parameters). In four
processes (tests/python/hook_rank.py): real DDP on a gloo process group,
the hook's averaged gradients against gloo's allreduce of the same
gradients within the fixed-point bound of docs/protocol.md, through
DDP's bucket rebuild; a closed context makes backward raise instead of
hanging; codec memory kept per bucket index across the rebuild."""
import errno
import json
import os
import socket
import subprocess
import sys
import time

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import tally  # noqa: E402
import tally.torch  # noqa: E402
from loop import Loop, fixp_bound, run_ranks  # noqa: E402


class Bucket:
    """What the hook reads of DDP's GradBucket (which Python cannot make):
    its index, its flat buffer and its parameters."""

    def __init__(self, index, buf, params):
        self._i, self._b, self._p = index, buf, params

    def index(self):
        return self._i

    def buffer(self):
        return self._b

    def parameters(self):
        return self._p


def test_futures_average_in_order():
    """The hook returns at once; the futures complete in place with the
    average over ranks, bucket after bucket."""
    sizes = [1000, 3, 70001]
    with Loop(2) as loop:
        ctxs = loop.open_all()
        params = [torch.zeros(n) for n in sizes]

        def rank(r):
            hs = tally.torch.HookState(ctxs[r])
            g = torch.Generator().manual_seed(r)
            bufs = [torch.randn(n, generator=g) for n in sizes]
            ins = [b.clone() for b in bufs]
            futs = [tally.torch.allreduce_hook(hs, Bucket(i, b, [params[i]]))
                    for i, b in enumerate(bufs)]
            outs = [f.wait() for f in futs]
            hs.close()
            assert all(o is b for o, b in zip(outs, bufs))
            assert (hs.buckets, hs.errors, hs.memory) == (3, 0, False)
            return ins, bufs
        res = run_ranks(2, rank)
        for c in ctxs:
            c.close()
    for i in range(len(sizes)):
        a0, a1 = res[0][0][i].double() / 2, res[1][0][i].double() / 2
        exact = a0 + a1
        amax = float(max(a0.abs().max(), a1.abs().max()))
        got = res[0][1][i].double()
        assert torch.equal(res[0][1][i], res[1][1][i])
        assert bool(((got - exact).abs() <=
                     torch.as_tensor(fixp_bound(amax, 2, exact.numpy())))
                    .all())


def test_memory_per_bucket_survives_relayout():
    """With a codec with memory each bucket index has a State; the same
    layout keeps it, a changed one (DDP's rebuild: other parameters, other
    length) gets a fresh one instead of failing on a State of the wrong
    size; an index no longer used loses its State at the start (bucket
    0) of the iteration after the one that did not use it."""
    with Loop(2, codec="q8,ef=1") as loop:
        ctxs = loop.open_all()
        pa, pb, pc = torch.zeros(300), torch.zeros(200), torch.zeros(100)

        def rank(r):
            hs = tally.torch.HookState(ctxs[r])
            assert hs.memory
            seen = []
            layouts = [[pa, pb], [pc]], [[pa, pb], [pc]], [[pc, pb], [pa]], \
                [[pc, pb], [pa]], [[pa, pb, pc]], [[pa, pb, pc]]
            for it, buckets in enumerate(layouts):
                futs = []
                for i, ps in enumerate(buckets):
                    n = sum(p.numel() for p in ps)
                    buf = torch.full((n,), 0.001 * (it + 1) + r)
                    futs.append(tally.torch.allreduce_hook(
                        hs, Bucket(i, buf, ps)))
                for f in futs:
                    f.wait()
                seen.append((dict(hs.states), hs.rebuilt, hs.dropped))
            hs.close()
            assert hs.errors == 0
            return seen
        for seen in run_ranks(2, rank):
            s0, s1, s2, s3, s4, s5 = [s[0] for s in seen]
            assert [len(s0[0]), len(s0[1])] == [500, 100]
            assert s1[0] is s0[0] and s1[1] is s0[1]
            assert [len(s2[0]), len(s2[1])] == [300, 300]
            assert s2[0] is not s0[0] and s2[1] is not s0[1]
            assert s3[0] is s2[0] and s3[1] is s2[1]
            assert len(s4[0]) == 600 and s4[1] is s3[1]
            assert list(s5) == [0] and s5[0] is s4[0]
            assert [s[1] for s in seen] == [0, 0, 2, 2, 3, 3]
            assert [s[2] for s in seen] == [0, 0, 0, 0, 0, 1]
        for c in ctxs:
            c.close()


def _fails_with(fut, code, words):
    """fut (the hook's, as DDP gets it) fails with tally's error: a
    RuntimeError (what a failed torch future raises) whose text is the
    tally.Error's "[Errno N] sentence"."""
    with pytest.raises(RuntimeError) as e:
        fut.wait()
    msg = str(e.value)
    assert "[Errno %d] %s" % (code, words) in msg, msg
    assert "Unable to cast" not in msg, msg


def test_error_completes_future():
    """A failing allreduce (here a missing rank; then a closed context)
    fails the future with tally's errno and sentence (HookState.last_error
    is the tally.Error); later buckets still get their futures completed;
    nothing hangs."""
    with Loop(2) as loop:
        ctx = loop.open(0, timeout_ms=300)
        hs = tally.torch.HookState(ctx)
        p = torch.zeros(10)
        t0 = time.monotonic()
        f1 = tally.torch.allreduce_hook(hs, Bucket(0, torch.ones(10), [p]))
        _fails_with(f1, errno.ETIMEDOUT, "no result from the dataplane")
        assert isinstance(hs.last_error, tally.Error)
        assert hs.last_error.errno == errno.ETIMEDOUT
        f2 = tally.torch.allreduce_hook(hs, Bucket(1, torch.ones(10), [p]))
        _fails_with(f2, errno.EPIPE, "an earlier allreduce on this context "
                    "failed")
        ctx.close()
        f3 = tally.torch.allreduce_hook(hs, Bucket(0, torch.ones(10), [p]))
        _fails_with(f3, errno.EBADF, "the context is closed")
        f4 = tally.torch.allreduce_hook(
            hs, Bucket(0, torch.ones(10, dtype=torch.float64), [p]))
        with pytest.raises(RuntimeError, match="float32 or int32"):
            f4.wait()
        assert hs.errors == 4 and hs.buckets == 0
        # submit()'s own future raises the tally.Error itself.
        f = hs.submit(0, None, torch.ones(10))
        with pytest.raises(tally.Error) as e:
            f.wait()
        assert e.value.errno == errno.EBADF
        hs.close()
        f5 = tally.torch.allreduce_hook(hs, Bucket(0, torch.ones(10), [p]))
        _fails_with(f5, errno.EBADF, "the hook state is closed")
        assert time.monotonic() - t0 < 10


def test_cuda_bucket_without_cuda_path():
    """A CUDA bucket: libtally's GPU path, or an exception in the future
    (EOPNOTSUPP), never a silent copy to the host."""
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device here")
    with Loop(1) as loop, loop.open(0) as ctx:
        hs = tally.torch.HookState(ctx)
        buf = torch.ones(100, device="cuda")
        f = tally.torch.allreduce_hook(hs, Bucket(0, buf, [buf]))
        if tally.HAVE_CUDA:
            assert f.wait().cpu().tolist() == [1.0] * 100
        else:
            _fails_with(f, errno.EOPNOTSUPP, "this libtally has no CUDA "
                        "path")
            assert hs.last_error.errno == errno.EOPNOTSUPP
        hs.close()


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ddp(mode, world, codec, tworld=None):
    """Runs hook_rank.py MODE in world processes against one loopagg job
    of tworld ranks (default world); returns their JSON outputs by
    rank."""
    script = os.path.join(os.path.dirname(__file__), "hook_rank.py")
    env = dict(os.environ, GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1")
    with Loop(tworld or world, codec=codec) as loop:
        store = _free_port()
        procs = [subprocess.Popen(
            [sys.executable, script, mode, str(loop.port), str(r),
             str(world), str(store), codec or "fixp"],
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


@pytest.fixture(scope="module")
def compare():
    return _ddp("compare", 4, None)


def test_ddp_hook_equals_gloo_within_bound(compare):
    """Every bucket of three iterations (the first before DDP's bucket
    rebuild): the hook's average is within the documented fixed-point
    bound of the exact average, and within that bound (plus gloo's own
    float roundings) of gloo's allreduce of the same gradients."""
    for o in compare:
        assert o["worst_exact"] <= 1.0, o
        assert o["worst_gloo"] <= 1.0, o
        assert o["errors"] == 0
    print("max |tally - gloo|: %g; worst error / bound: %.3f (exact), "
          "%.3f (gloo)" % (max(o["max_abs_diff"] for o in compare),
                           max(o["worst_exact"] for o in compare),
                           max(o["worst_gloo"] for o in compare)))


def test_ddp_buckets_same_sequence_on_every_rank(compare):
    """One bucket, then (after the rebuild) several, reduced in the same
    order on every rank, with bit-identical results."""
    seqs = [o["iters"] for o in compare]
    assert all(s == seqs[0] for s in seqs)
    # torch 1.13's DDP reduces the first iteration in one bucket (it does
    # not know the order gradients come in yet), then rebuilds.
    assert [len(i) >= 2 for i in seqs[0]] == [False, True, True]
    assert compare[0]["buckets"] == sum(len(i) for i in seqs[0])
    assert len({o["digest"] for o in compare}) == 1


def test_ddp_closed_context_raises_from_backward(compare):
    """After ctx.close() the next backward raises tally's error (from the
    bucket's future) within seconds; it does not hang."""
    for o in compare:
        assert "[Errno %d] the context is closed" % errno.EBADF in \
            o["closed_raised"], o["closed_raised"]
        assert "Unable to cast" not in o["closed_raised"]
        assert o["closed_s"] < 20
        assert o["errors_after"] >= 1


def test_ddp_backward_raises_libtally_sentence():
    """An allreduce that fails inside the hook (a tally job whose second
    rank never comes: ETIMEDOUT) makes DDP's backward raise libtally's
    errno and sentence, not torch's "Unable to cast ... to Tensor"; the
    next backward raises the context's EPIPE; neither hangs."""
    o = _ddp("error", 1, None, tworld=2)[0]
    first, second = o["raised"]
    assert "[Errno %d] no result from the dataplane" % errno.ETIMEDOUT \
        in first, first
    assert "a member is missing" in first, first
    assert "[Errno %d] an earlier allreduce" % errno.EPIPE in second, second
    for msg in (first, second):
        assert "Unable to cast" not in msg, msg
    assert o["errnos"] == [errno.ETIMEDOUT, errno.EPIPE]
    assert o["errors"] == 2
    assert max(o["secs"]) < 20


@pytest.fixture(scope="module")
def memory():
    return _ddp("memory", 2, "q8,ef=1")


def test_ddp_memory_survives_rebuild(memory):
    """q8 with error feedback: DDP regroups the buckets after the first
    iteration; the bucket indexes whose layout changed get fresh States
    once, and from the second iteration on every State is kept."""
    for o in memory:
        lay = o["layouts"]
        assert lay[0] != lay[1]  # the rebuild changed the buckets
        assert all(lay[i] == lay[1] for i in range(2, 5))
        assert o["rebuilt"][0] == 0 and o["rebuilt"][1] >= 1
        assert len(set(o["rebuilt"][1:])) == 1
        assert all(o["states"][i] == o["states"][1] for i in range(2, 5))
        assert o["errors"] == 0
        assert min(o["cos"]) > 0.95, o["cos"]  # q8: close to gloo
    assert memory[0]["digest"] == memory[1]["digest"]


@pytest.fixture(scope="module")
def rebuilt():
    return _ddp("rebuild", 2, "q8,ef=1")


def test_ddp_memory_follows_rebuild_of_sizes(rebuilt):
    """q8 with error feedback on a model whose rebuild turns DDP's first
    bucket (every parameter) into two of other sizes and parameter order:
    every bucket index has a State of its bucket's length from then on,
    the same State every iteration, none left over, and the averages stay
    close to gloo's."""
    for o in rebuilt:
        lay, sizes, lengths = o["layouts"], o["sizes"], o["lengths"]
        assert len(lay[0]) == 1 and len(lay[1]) >= 2, lay
        assert sizes[1]["0"] < sizes[0]["0"]
        for it in range(5):
            assert lengths[it] == sizes[it], (it, lengths, sizes)
        assert all(lay[i] == lay[1] for i in range(2, 5))
        assert all(o["states"][i] == o["states"][1] for i in range(2, 5))
        assert o["rebuilt"] == [0, 1, 1, 1, 1]
        assert o["dropped"] == [0] * 5
        assert o["errors"] == 0
        assert min(o["cos"]) > 0.9, o["cos"]
    assert rebuilt[0]["digest"] == rebuilt[1]["digest"]

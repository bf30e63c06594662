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


def test_timeline_keeps_each_bucket():
    """timeline=True: (start, seconds, elements) of every bucket reduced,
    in order; a failed bucket is not kept; off by default."""
    sizes = [1000, 3, 70001]
    with Loop(2) as loop:
        ctxs = loop.open_all()
        params = [torch.zeros(n) for n in sizes]

        def rank(r):
            hs = tally.torch.HookState(ctxs[r], timeline=True)
            off = tally.torch.HookState(ctxs[r])
            t0 = time.time()
            futs = [tally.torch.allreduce_hook(hs, Bucket(i, torch.ones(n),
                                                          [params[i]]))
                    for i, n in enumerate(sizes)]
            for f in futs:
                f.wait()
            t1 = time.time()
            hs.close()
            off.close()
            assert off.timeline is None
            return hs.timeline, t0, t1
        res = run_ranks(2, rank)
        for c in ctxs:
            c.close()
    for tl, t0, t1 in res:
        assert [n for _, _, n in tl] == sizes
        assert all(t0 <= w <= t1 and 0 <= d <= t1 - t0 for w, d, _ in tl)
        assert all(a[0] <= b[0] for a, b in zip(tl, tl[1:]))
    # A failing bucket (its context closed) completes with the error and
    # leaves the timeline as it was.
    with Loop(1) as loop:
        ctx = loop.open_all()[0]
        hs = tally.torch.HookState(ctx, timeline=True)
        ctx.close()
        fut = hs.submit(0, None, torch.ones(4))
        try:
            fut.wait()
        except Exception:
            pass
        hs.close()
    assert hs.errors == 1 and hs.timeline == []


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


class MBucket(Bucket):
    """A bucket as DDP 1.13 hands it to a PowerSGD-style hook: also its
    per-parameter gradients (views of the buffer, in parameter order)
    and whether it is the iteration's last."""

    def __init__(self, index, buf, params, last=True):
        super().__init__(index, buf, params)
        self._last = last

    def gradients(self):
        out, off = [], 0
        for p in self._p:
            out.append(self._b[off:off + p.numel()].view(p.shape))
            off += p.numel()
        return out

    def is_last(self):
        return self._last


# A layer set with every case of the per-matrix split: a matrix worth
# compressing (64 x 32), a bias, a matrix too thin for rank 4 (3 x 50:
# dense, torch's rule), a 4-d kernel viewed as 16 x 36.
SHAPES = [(64, 32), (64,), (3, 50), (16, 4, 3, 3), (16,)]


def _grads(r, it):
    g = torch.Generator().manual_seed(100 * it + r)
    return [torch.randn(s, generator=g) * (1 + i) for i, s in
            enumerate(SHAPES)]


def test_per_matrix_states_rows_and_dense_rest():
    """A powersgd job: each matrix worth compressing gets its own State
    with its rows (shape[0]), reduced in place in the bucket and bit for
    bit what ctx.allreduce of that matrix alone with State(rows=...)
    gives; biases and thin matrices are averaged dense (within the
    fixed-point bound of the exact average); every rank gets the same
    bits."""
    params = [torch.zeros(s) for s in SHAPES]
    n = sum(p.numel() for p in params)
    with Loop(2, codec="powersgd") as loop, \
            Loop(2, codec="powersgd", job=8) as ref:
        ctxs, rctx = loop.open_all(), ref.open_all()

        def rank(r):
            hs = tally.torch.HookState(ctxs[r], start_iter=0)
            assert hs.per_matrix and hs.start_iter == 0 and hs.rank == 4
            sts = {0: tally.State(rctx[r], 64 * 32, rows=64),
                   3: tally.State(rctx[r], 16 * 36, rows=16)}
            outs, refs = [], []
            for it in range(3):
                gs = _grads(r, it)
                buf = torch.cat([g.flatten() for g in gs])
                assert buf.numel() == n
                tally.torch.allreduce_hook(
                    hs, MBucket(0, buf, params)).wait()
                outs.append(buf.clone())
                # The same matrices alone, each with its own rows.
                refs.append({i: rctx[r].allreduce(gs[i].flatten().clone(),
                                                  state=sts[i], mean=True)
                             for i in sts})
            rows = {k[1]: (len(s), s.rows) for k, s in hs.matrices.items()}
            hs.close()
            assert hs.errors == 0, hs.last_error
            assert (hs.compressed, hs.dense_calls) == (6, 3)
            assert rows == {(64, 32): (2048, 64), (16, 4, 3, 3): (576, 16)}
            assert hs.states == {}  # no per-bucket State
            return outs, refs
        res = run_ranks(2, rank)
        for c in ctxs + rctx:
            c.close()
    offs = np.cumsum([0] + [int(np.prod(s)) for s in SHAPES])
    for it in range(3):
        assert torch.equal(res[0][0][it], res[1][0][it])
        got = res[0][0][it]
        for i in (0, 3):
            assert torch.equal(got[offs[i]:offs[i + 1]], res[0][1][it][i])
        ins = [_grads(r, it) for r in range(2)]
        for i in (1, 2, 4):
            parts = [ins[r][i].flatten().double() * 0.5 for r in range(2)]
            exact = parts[0] + parts[1]
            amax = float(max(p.abs().max() for p in
                             [ins[r][j].flatten() * 0.5 for r in range(2)
                              for j in (1, 2, 4)]))
            err = (got[offs[i]:offs[i + 1]].double() - exact).abs()
            assert bool((err <= torch.as_tensor(
                fixp_bound(amax, 2, exact.numpy()))).all()), (it, i)


def test_first_start_iter_iterations_dense():
    """The first start_iter iterations (2 by default, counted by the
    bucket marked is_last) go dense, whole buckets: the fixed-point
    average, no State made; then the matrices are compressed."""
    params = [torch.zeros(s) for s in SHAPES]
    split = 3   # two buckets an iteration: layers 0-2, then 3-4
    with Loop(2, codec="powersgd,rank=2") as loop:
        ctxs = loop.open_all()

        def rank(r):
            hs = tally.torch.HookState(ctxs[r])
            assert (hs.start_iter, hs.rank) == (2, 2)
            seen = []
            for it in range(3):
                gs = _grads(r, it)
                bufs = [torch.cat([g.flatten() for g in gs[:split]]),
                        torch.cat([g.flatten() for g in gs[split:]])]
                ins = [b.clone() for b in bufs]
                futs = [tally.torch.allreduce_hook(hs, MBucket(
                    i, bufs[i], params[:split] if i == 0 else
                    params[split:], last=i == 1)) for i in range(2)]
                for f in futs:
                    f.wait()
                seen.append((ins, bufs, hs.iters, hs.dense_buckets,
                             len(hs.matrices), hs.compressed))
            hs.close()
            assert hs.errors == 0, hs.last_error
            return seen
        res = run_ranks(2, rank)
        for c in ctxs:
            c.close()
    for it in range(3):
        s0, s1 = res[0][it], res[1][it]
        assert s0[2:] == s1[2:]
        assert s0[2:] == [(1, 2, 0, 0), (2, 4, 0, 0), (3, 4, 2, 2)][it]
        for b in range(2):
            assert torch.equal(s0[1][b], s1[1][b])
            if it < 2:   # dense: the average within the bound
                a = [s[0][b].double() * 0.5 for s in (s0, s1)]
                exact = a[0] + a[1]
                amax = float(max(x.abs().max() for x in a))
                err = (s0[1][b].double() - exact).abs()
                assert bool((err <= torch.as_tensor(
                    fixp_bound(amax, 2, exact.numpy()))).all())


def test_bad_shapes_and_options_refused():
    """A State's rows beyond its elements, or rows on a codec without a
    matrix, raise tally.Error (EINVAL, libtally's sentence); rows out of
    range and the hook's options misused raise ValueError; a dense call
    takes no State."""
    with Loop(1, codec="powersgd") as loop, loop.open(0) as ctx:
        with pytest.raises(tally.Error) as e:
            tally.State(ctx, 16, rows=17)
        assert e.value.errno == errno.EINVAL
        assert "rows 17: more than the tensor's 16 elements" in str(e.value)
        st = tally.State(ctx, torch.zeros(4, 4), rows=4)
        assert (len(st), st.rows) == (16, 4) and "4 rows" in repr(st)
        with pytest.raises(ValueError, match="rows"):
            tally.State(ctx, 16, rows=-1)
        with pytest.raises(ValueError, match="no state"):
            ctx.allreduce(torch.zeros(16), state=st, dense=True)
        with pytest.raises(ValueError, match="start_iter"):
            tally.torch.HookState(ctx, start_iter=-1)
    with Loop(1, codec="q8,ef=1") as loop, loop.open(0) as ctx:
        with pytest.raises(tally.Error) as e:
            tally.State(ctx, 16, rows=4)
        assert e.value.errno == errno.EINVAL and "powersgd" in str(e.value)
        with pytest.raises(ValueError, match="per_matrix is for powersgd"):
            tally.torch.HookState(ctx, per_matrix=True)
        hs = tally.torch.HookState(ctx)
        assert (hs.per_matrix, hs.start_iter) == (False, 0)
        hs.close()


@pytest.fixture(scope="module")
def psgd():
    return _ddp("psgd", 2, "powersgd")


def test_ddp_per_matrix_powersgd(psgd):
    """Real DDP (two buckets after the rebuild) on a powersgd job: the
    first two iterations dense, then each weight matrix with a State of
    its own rows (kept through the iterations), the biases dense; every
    rank's gradients the same bits, and the training loss falls."""
    for o in psgd:
        assert o["errors"] == 0
        assert o["dense_buckets"] == o["buckets_first2"]
        assert o["rows"] == o["want_rows"], (o["rows"], o["want_rows"])
        assert o["states"][0] == o["states"][1] == {}
        assert len(o["states"][2]) == len(o["want_rows"])
        assert all(s == o["states"][2] for s in o["states"][2:])
        assert o["compressed"] == len(o["want_rows"]) * (o["iters"] - 2)
        assert o["loss"][-1] < o["loss"][0], o["loss"]
    assert psgd[0]["digests"] == psgd[1]["digests"]

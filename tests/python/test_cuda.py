# SPDX-License-Identifier: BSD-3-Clause
"""CUDA tensors through tally on a real GPU, against loopagg (the real
engine on 127.0.0.1): Context.allreduce on a CUDA tensor runs libtally's
GPU path (tally_allreduce_cuda: encoded on the GPU into pinned staging,
decoded on torch's current stream) and every rank's result equals, bit
for bit, what the host path gives for the same tensors, call after call,
codec memory included; the stream that was current is the one the sums
land on; the DDP hook reduces CUDA buckets the same way. Skipped, visibly,
where torch has no usable CUDA device or libtally no CUDA path."""
import pytest

torch = pytest.importorskip("torch")

import tally  # noqa: E402
import tally.torch  # noqa: E402
from loop import Loop, run_ranks  # noqa: E402

if not tally.HAVE_CUDA:
    pytest.skip("this libtally has no CUDA path (-Dcuda=disabled)",
                allow_module_level=True)
if not torch.cuda.is_available():
    pytest.skip("no CUDA device (torch.cuda.is_available() is False)",
                allow_module_level=True)

WORLD = 3


def _inputs(n, seed, dtype=torch.float32):
    """Each rank's tensor on the CPU: mixed magnitudes, or any int32."""
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.int32:
        return [torch.randint(-2**31, 2**31 - 1, (n,), generator=g,
                              dtype=torch.int64).to(torch.int32)
                for _ in range(WORLD)]
    return [torch.randn(n, generator=g) *
            torch.exp2(torch.randint(-8, 4, (n,), generator=g).float())
            for _ in range(WORLD)]


def _both(codec, n, calls, dtype=torch.float32, memory=False):
    """The same calls on the host path and on the GPU path, each through
    its own loopagg job: returns [call][rank] (host, device) results."""
    out = []
    with Loop(WORLD, codec=codec) as lh, Loop(WORLD, codec=codec,
                                              job=8) as ld:
        hc, dc = lh.open_all(), ld.open_all()
        hs = [tally.State(c, n) if memory else None for c in hc]
        ds = [tally.State(c, torch.empty(n, device="cuda"))
              if memory else None for c in dc]
        for k in range(calls):
            ins = _inputs(n, 100 * k + n, dtype)
            xh = [t.clone() for t in ins]
            xd = [t.cuda() for t in ins]
            run_ranks(WORLD, lambda r: hc[r].allreduce(xh[r], state=hs[r]))
            run_ranks(WORLD, lambda r: dc[r].allreduce(xd[r], state=ds[r]))
            torch.cuda.synchronize()
            out.append([(xh[r], xd[r].cpu()) for r in range(WORLD)])
        info, stats = dc[0].info(), dc[0].stats()
        for c in hc + dc:
            c.close()
    return out, info, stats


def _same_bits(a, b):
    return a.numpy().tobytes() == b.numpy().tobytes()


@pytest.mark.parametrize("n", [0, 1, 257, 10007, 3 * (1 << 20) + 7])
def test_fixp_equals_host_bit_for_bit(n):
    out, info, stats = _both(None, n, 2)
    for call in out:
        for h, d in call:
            assert _same_bits(h, d)
    assert info["cuda_path"] == "gpu-staged"
    assert stats["cuda_calls"] == (2 if n else 0)
    if n > 0:
        assert info["cuda_staging"] > 0 and stats["cuda_segments"] >= 2


def test_int32_exact():
    out, _, _ = _both(None, 10007, 1, dtype=torch.int32)
    for h, d in out[0]:
        assert _same_bits(h, d)


@pytest.mark.parametrize("codec,memory", [
    ("q8,seed=5", False), ("q4,seed=9", False), ("ternary,seed=3", False),
    ("q8,ef=1,seed=6", True), ("2bit,threshold=0.25", True),
    ("randk,density=0.05,ef=1", True), ("powersgd", True)])
def test_codecs_equal_host_bit_for_bit(codec, memory):
    """The draws change every call, and the memory carries over: three
    calls, each the host path's bits."""
    out, _, _ = _both(codec, 40009, 3, memory=memory)
    for k, call in enumerate(out):
        for r, (h, d) in enumerate(call):
            assert _same_bits(h, d), (codec, k, r)


def test_sums_land_on_the_current_stream():
    """The tensor is written on a side stream and reduced with that
    stream current: libtally reads it after that work and decodes on
    it, so work queued there next sees the sums."""
    n = 1 << 20
    ins = _inputs(n, 7)
    with Loop(WORLD) as lh, Loop(WORLD, job=8) as ld:
        hc, dc = lh.open_all(), ld.open_all()
        xh = [t.clone() for t in ins]
        run_ranks(WORLD, lambda r: hc[r].allreduce(xh[r]))

        def rank(r):
            s = torch.cuda.Stream()
            src = ins[r].pin_memory()
            with torch.cuda.stream(s):
                x = torch.empty(n, device="cuda")
                x.copy_(src, non_blocking=True)
                torch.cuda._sleep(1 << 24)   # the copy lags behind
                dc[r].allreduce(x)
                y = x * 1.0                  # queued after the decoding
            s.synchronize()
            return y.cpu()

        ys = run_ranks(WORLD, rank)
        for c in hc + dc:
            c.close()
    for r in range(WORLD):
        assert _same_bits(xh[r], ys[r])


def test_hook_reduces_cuda_buckets_on_the_gpu():
    """The DDP hook on CUDA buckets: the futures' averages are the host
    hook's bits; codec memory in GPU States per bucket."""
    from test_hook import Bucket
    sizes = [1000, 70001]
    params = [torch.zeros(n) for n in sizes]   # the buckets' layout keys
    results = {}
    for where in ("cpu", "cuda"):
        with Loop(WORLD, codec="q8,ef=1,seed=2") as loop:
            ctxs = loop.open_all()

            def rank(r):
                hs = tally.torch.HookState(ctxs[r])
                got = []
                for it in range(2):
                    bufs = [t.to(where) for t in _inputs(sum(sizes), it)[r]
                            .split(sizes)]
                    futs = [tally.torch.allreduce_hook(
                        hs, Bucket(i, b, [params[i]]))
                        for i, b in enumerate(bufs)]
                    got += [f.wait().cpu() for f in futs]
                hs.close()
                return got, {i: s.cuda for i, s in hs.states.items()}

            results[where] = run_ranks(WORLD, rank)
            for c in ctxs:
                c.close()
    for r in range(WORLD):
        (gh, _), (gd, states) = results["cpu"][r], results["cuda"][r]
        assert all(_same_bits(a, b) for a, b in zip(gh, gd))
        assert states and all(states.values())


def _groups(ctxs):
    """WORLD groups of the backend "tally" over ctxs (one per rank, built
    at once in threads: their inner gloo groups meet in one store)."""
    import datetime
    import torch.distributed as dist
    from tally import backend
    store = dist.HashStore()
    return run_ranks(WORLD, lambda r: backend.ProcessGroupTally(
        store, r, WORLD, datetime.timedelta(seconds=60), {"ctx": ctxs[r]}))


def _avg():
    import torch.distributed as dist
    o = dist.AllreduceOptions()
    o.reduceOp = dist.ReduceOp.AVG
    return o


@pytest.mark.parametrize("dtype,avg", [(torch.float32, False),
                                       (torch.float32, True),
                                       (torch.int32, False)])
def test_backend_allreduces_cuda_tensors_on_the_gpu_path(dtype, avg):
    """The backend "tally" on CUDA tensors: float32 and int32 allreduces
    go through libtally's GPU path (no gloo, no host copy) and give the
    host path's bits, sum and average."""
    with Loop(WORLD) as lh, Loop(WORLD, job=8) as ld:
        hc, dc = lh.open_all(), ld.open_all()
        pgs = _groups(dc)
        for n in (1, 257, 100003):
            ins = _inputs(n, 11 + n, dtype)
            xh = [t.clone() for t in ins]
            xd = [t.cuda() for t in ins]
            run_ranks(WORLD, lambda r: hc[r].allreduce(xh[r], mean=avg))
            run_ranks(WORLD, lambda r: pgs[r].allreduce(
                [xd[r]], _avg() if avg else None).wait())
            torch.cuda.synchronize()
            for r in range(WORLD):
                assert _same_bits(xh[r], xd[r].cpu()), (n, r)
        stats = dc[0].stats()
        routes, said = dict(pgs[0].routes), set(pgs[0]._said)
        for pg in pgs:
            pg.close()
        for c in hc + dc:
            c.close()
    assert stats["cuda_calls"] == 3
    assert routes == {"tally allreduce": 3}
    assert not any("cuda" in k.lower() for k in said), said


def test_backend_collectives_of_cuda_tensors_via_host():
    """reduce_scatter, all_gather, broadcast and a bfloat16 allreduce of
    CUDA tensors through the backend: copied to host memory around the
    host calls (said once each), the same results as on CPU tensors."""
    import torch.distributed as dist
    n = 4099
    res = {}
    for where in ("cpu", "cuda"):
        with Loop(WORLD) as loop:
            ctxs = loop.open_all()
            pgs = _groups(ctxs)

            def rank(r):
                g = pgs[r]
                x = _inputs(WORLD * n, 5)[r].to(where)
                rs = torch.empty(n, device=where)
                g._reduce_scatter_base(rs, x).wait()
                ag = torch.empty(WORLD * n, device=where)
                g._allgather_base(ag, rs).wait()
                outs = [torch.empty(n, device=where) for _ in range(WORLD)]
                g.allgather([outs], [rs]).wait()
                b = x[:n].clone() if r == 1 else torch.zeros(n,
                                                             device=where)
                o = dist.BroadcastOptions()
                o.rootRank = 1
                g.broadcast([b], o).wait()
                h = (x[:n] * 4).round().to(torch.bfloat16)
                g.allreduce([h]).wait()
                if where == "cuda":
                    torch.cuda.current_stream().synchronize()
                return [t.cpu() for t in [rs, ag, torch.cat(outs), b,
                                          h.float()]]

            res[where] = run_ranks(WORLD, rank)
            said = set(pgs[0]._said)
            for pg in pgs:
                pg.close()
            for c in ctxs:
                c.close()
        if where == "cuda":
            for k in ("reduce_scatter", "allgather", "broadcast",
                      "allreduce of torch.bfloat16"):
                assert k + " in CUDA memory" in said, said
    for r in range(WORLD):
        for a, b in zip(res["cpu"][r], res["cuda"][r]):
            assert _same_bits(a, b)


def test_hook_per_matrix_powersgd_on_cuda_buckets():
    """Per-matrix PowerSGD (the hook's default on a powersgd job) on CUDA
    buckets: each matrix's State in GPU memory with its own rows, the
    biases and thin matrices dense; the host hook's bits, iteration after
    iteration (the memories carry over)."""
    from test_hook import MBucket, SHAPES, _grads
    params = [torch.zeros(s) for s in SHAPES]
    res = {}
    for where in ("cpu", "cuda"):
        with Loop(2, codec="powersgd") as loop:
            ctxs = loop.open_all()

            def rank(r):
                hs = tally.torch.HookState(ctxs[r], start_iter=0)
                outs = []
                for it in range(3):
                    buf = torch.cat([g.flatten() for g in
                                     _grads(r, it)]).to(where)
                    tally.torch.allreduce_hook(
                        hs, MBucket(0, buf, params)).wait()
                    outs.append(buf.cpu())
                hs.close()
                assert hs.errors == 0, hs.last_error
                assert hs.compressed == 6
                return outs

            res[where] = run_ranks(2, rank)
            for c in ctxs:
                c.close()
    for r in range(2):
        for it, (a, b) in enumerate(zip(res["cpu"][r], res["cuda"][r])):
            assert _same_bits(a, b), (r, it)

# SPDX-License-Identifier: BSD-3-Clause
"""bfloat16 and float16 through the extension's Context.allreduce (libtally's
tally_allreduce_typed) against loopagg: torch tensors and numpy float16
arrays summed in place, bit-identical on every rank and equal to the
fixed-point reference rounded once to the type, computed here in numpy;
an infinity raises ERANGE on every rank; the lanes are reported and can
be chosen; what cannot be taken in place is refused. The ranks are
threads: a call that kept the GIL would hold the other ranks out of
their calls and time out."""
import errno

import numpy as np
import pytest

import tally
from loop import Loop, run_ranks

WORLD = 4
SIZES = [0, 1, 257, 100003]


def _lw(world):
    return world.bit_length() - 1


def _exponent(amax, world, lanes, narrow=False):
    b = 30 - _lw(world) if lanes == 32 else \
        (14 - _lw(world) if narrow else 14)
    return 0 if amax == 0 else b - np.frexp(amax)[1]


def _round_bf16(v):
    """float64 values (exact, in bf16's normal range or 0) rounded once to
    bf16 bits, ties to even: the two neighbours by truncation, then the
    nearer by exact differences."""
    u = np.abs(v).view(np.uint64)
    lo = (u >> np.uint64(45)) << np.uint64(45)
    hi = lo + (np.uint64(1) << np.uint64(45))
    dlo = np.abs(v) - lo.view(np.float64)
    dhi = hi.view(np.float64) - np.abs(v)
    lo_bits = (lo.view(np.float64).astype(np.float32).view(np.uint32) >>
               np.uint32(16)).astype(np.uint16)
    up = (dhi < dlo) | ((dhi == dlo) & (lo_bits & 1 == 1))
    bits = lo_bits + up.astype(np.uint16)
    return np.where(v < 0, bits | np.uint16(0x8000), bits).astype(np.uint16)


def _reference(xs, kind, lanes):
    """The sum every rank must get: xs are the ranks' values as float64."""
    world = len(xs)
    amax = max((np.nanmax(np.abs(x)) if x.size else 0.0) for x in xs)
    e = _exponent(amax, world, lanes)
    s = sum(np.rint(np.nan_to_num(x, nan=0.0) * 2.0 ** e).astype(np.int64)
            for x in xs)
    v = s.astype(np.float64) * 2.0 ** -e
    if kind == "float16":
        return v.astype(np.float16).view(np.uint16)
    return _round_bf16(v)


def _inputs(n, seed):
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal(n) * np.exp2(rng.integers(-6, 3, n)))
            for _ in range(WORLD)]


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("lanes", [0, 16, 32])
@pytest.mark.parametrize("kind", ["bfloat16", "float16"])
def test_torch_tensors(kind, lanes, n):
    """torch bfloat16 / float16 CPU tensors, summed in place (a slice of a
    larger tensor: the sums land there and nowhere else)."""
    torch = pytest.importorskip("torch")
    dt = getattr(torch, kind)
    ins = _inputs(n, seed=n + lanes)
    bigs = [torch.cat([torch.full((3,), 7.0), torch.from_numpy(a).float(),
                       torch.full((3,), 9.0)]).to(dt) for a in ins]
    xs = [b[3:3 + n] for b in bigs]
    vals = [x.double().numpy() for x in xs]
    with Loop(WORLD) as loop:
        ctxs = loop.open_all()
        for c in ctxs:
            c._c.set_lanes(lanes)
        run_ranks(WORLD, lambda r: ctxs[r]._c.allreduce(xs[r]))
        info = ctxs[0]._c.info()
        for c in ctxs:
            c.close()
    want = info["lanes_bf16" if kind == "bfloat16" else "lanes_f16"]
    assert want == (16 if lanes == 16 else 32)
    ref = _reference(vals, kind, want)
    for r in range(WORLD):
        got = xs[r].view(torch.int16).numpy().view(np.uint16)
        assert np.array_equal(got, ref), "rank %d" % r
        assert bigs[r][:3].float().tolist() == [7.0] * 3
        assert bigs[r][3 + n:].float().tolist() == [9.0] * 3


@pytest.mark.parametrize("how", ["numpy_float16", "dtype_bfloat16"])
def test_buffers(how):
    """numpy float16 arrays, and 2-byte buffers named by dtype=."""
    torch = pytest.importorskip("torch")
    n = 1001
    ins = _inputs(n, seed=5)
    if how == "numpy_float16":
        xs = [a.astype(np.float16) for a in ins]
        vals = [x.astype(np.float64) for x in xs]
        kind, kw, bufs = "float16", {}, xs
    else:
        ts = [torch.from_numpy(a).to(torch.bfloat16) for a in ins]
        vals = [t.double().numpy() for t in ts]
        kind, kw = "bfloat16", {"dtype": "bfloat16"}
        bufs = [t.view(torch.int16).numpy() for t in ts]
    with Loop(WORLD) as loop:
        ctxs = loop.open_all()
        run_ranks(WORLD, lambda r: ctxs[r]._c.allreduce(bufs[r], **kw))
        for c in ctxs:
            c.close()
    ref = _reference(vals, kind, 32)
    for r in range(WORLD):
        assert np.array_equal(bufs[r].view(np.uint16), ref)


def test_infinity_every_rank():
    """An infinity in one rank's tensor: ERANGE on every rank, nothing
    sent, and the contexts still work."""
    torch = pytest.importorskip("torch")
    xs = [torch.ones(300, dtype=torch.bfloat16) for _ in range(WORLD)]
    xs[2][100] = float("-inf")
    with Loop(WORLD) as loop:
        ctxs = loop.open_all()

        def one(r):
            with pytest.raises(tally.Error) as ei:
                ctxs[r]._c.allreduce(xs[r])
            assert ei.value.errno == errno.ERANGE
            y = torch.full((5,), 0.5, dtype=torch.float16)
            ctxs[r]._c.allreduce(y)
            return y.float().tolist()

        outs = run_ranks(WORLD, one)
        for c in ctxs:
            c.close()
    assert outs == [[2.0] * 5] * WORLD


def test_refusals():
    torch = pytest.importorskip("torch")
    with Loop(1) as loop, loop.open(0) as ctx:
        c = ctx._c
        for t, exc, match in [
                (torch.zeros(16, dtype=torch.bfloat16)[::2], ValueError,
                 "not contiguous"),
                (torch.zeros(4, dtype=torch.float64), TypeError,
                 "bfloat16 or float16 tensors"),
                (torch.zeros(4, dtype=torch.bfloat16, device="meta"),
                 TypeError, "CPU tensor"),
                (np.zeros(4, np.float32), TypeError, "dtype='bfloat16'"),
                ([1, 2], TypeError, "writable buffer")]:
            with pytest.raises(exc, match=match):
                if isinstance(t, np.ndarray):
                    c.allreduce(t, dtype="bfloat16")
                else:
                    c.allreduce(t)
        with pytest.raises(TypeError, match="float32"):
            c.allreduce(torch.zeros(4, dtype=torch.bfloat16), mean=True)
        with pytest.raises(tally.Error):
            c.set_lanes(8)
        x = torch.tensor([1.5, -2.0], dtype=torch.bfloat16)
        c.allreduce(x)                  # still usable
        assert x.tolist() == [1.5, -2.0]
        assert c.info()["lanes_bf16"] == 32

# SPDX-License-Identifier: BSD-3-Clause
"""Context.reduce_scatter, .allgather and .broadcast (libtally's
tally_reduce_scatter, tally_allgather, tally_broadcast) against loopagg:
numpy arrays and CPU torch tensors, worlds 1 to 3, sizes 0, 1, 257 and a
prime. Reduce-scatter's shard is bit for bit the same shard of an
allreduce of the same inputs (bfloat16 and float16 too) (float32: within the fixed-point bound of
the exact sum; int32: the exact wrapping sum); all-gather and broadcast
move the bytes as they are, 16-bit types included; every rank gets the
same bits; errors are exceptions. The ranks are threads: a call that
kept the GIL would hold the other ranks out and time out."""
import errno

import numpy as np
import pytest

import tally
from loop import Loop, fixp_bound, run_ranks

WORLDS = [1, 2, 3]
SIZES = [0, 1, 257, 10007]
KINDS = ["numpy", "torch"]
# Containers and element types the byte-moving calls take: numpy has no
# bfloat16, so that pair is not generated.
BYTE_KINDS = [(k, d) for k in KINDS
              for d in ("float32", "int32", "float16", "bfloat16")
              if not (k == "numpy" and d == "bfloat16")]


def _inputs(dtype, n, world, seed):
    """Each rank's n elements: int32 over the whole range (sums wrap),
    float32 of mixed magnitudes, 16-bit ones as float32 rounded."""
    rng = np.random.default_rng(seed)
    if dtype == "int32":
        return [rng.integers(-2**31, 2**31, n, dtype=np.int64)
                .astype(np.int32) for _ in range(world)]
    return [(rng.standard_normal(n) *
             np.exp2(rng.integers(-8, 4, n))).astype(np.float32)
            for _ in range(world)]


def _obj(kind, a, dtype=None):
    """a (numpy) as the object handed to the context: itself, or a torch
    tensor sharing its memory (for 16-bit dtypes a new tensor of that
    type)."""
    if kind == "numpy" and dtype != "bfloat16":
        return a if dtype is None else a.astype(dtype)
    torch = pytest.importorskip("torch")
    t = torch.from_numpy(a)
    return t if dtype is None else t.to(getattr(torch, dtype))


def _bytes(x):
    """The bytes of a numpy array or torch tensor (any dtype)."""
    if isinstance(x, np.ndarray):
        return x.tobytes()
    import torch
    if x.numel() == 0:
        return b""
    return x.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()


def _np(x):
    return x if isinstance(x, np.ndarray) else x.numpy()


def _allreduce(world, ins, mean=False):
    """The allreduce of copies of ins, rank 0's result."""
    xs = [a.copy() for a in ins]
    with Loop(world) as loop:
        ctxs = loop.open_all()
        run_ranks(world, lambda r: ctxs[r].allreduce(xs[r], mean=mean))
        for c in ctxs:
            c.close()
    return xs[0]


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("world", WORLDS)
@pytest.mark.parametrize("dtype", ["float32", "int32"])
@pytest.mark.parametrize("kind", KINDS)
def test_reduce_scatter(kind, dtype, world, n):
    """Rank r's output is shard r of the allreduce of the same inputs, bit
    for bit (float32: within the fixed-point bound of the exact sum;
    int32: the exact wrapping sum); the input is left as it was."""
    ins = _inputs(dtype, world * n, world, seed=world * 31 + n)
    keep = [a.copy() for a in ins]
    outs = [np.full(n, 7, ins[0].dtype) for _ in range(world)]
    xi = [_obj(kind, a) for a in ins]
    xo = [_obj(kind, o) for o in outs]
    with Loop(world) as loop:
        ctxs = loop.open_all()
        got = run_ranks(world, lambda r: ctxs[r].reduce_scatter(
            xi[r], xo[r]))
        for c in ctxs:
            c.close()
    full = _allreduce(world, keep)
    for r in range(world):
        assert got[r] is xo[r]
        assert np.array_equal(ins[r], keep[r])
        assert outs[r].tobytes() == full[r * n:(r + 1) * n].tobytes()
    if dtype == "int32":
        want = (np.sum(np.stack(keep).astype(np.int64), axis=0)
                & 0xffffffff).astype(np.uint32).view(np.int32)
        assert np.array_equal(np.concatenate(outs), want)
    elif n:
        exact = np.sum(np.stack(keep).astype(np.float64), axis=0)
        amax = max(float(np.abs(a).max()) for a in keep)
        err = np.abs(np.concatenate(outs).astype(np.float64) - exact)
        assert (err <= fixp_bound(amax, world, exact)).all()


@pytest.mark.parametrize("world", [2, 3, 4])
@pytest.mark.parametrize("kind", KINDS)
def test_reduce_scatter_mean(kind, world):
    """mean=True: the shard of allreduce(mean=True), bit for bit, on
    every rank."""
    n = 257
    ins = _inputs("float32", world * n, world, seed=world)
    keep = [a.copy() for a in ins]
    outs = [np.zeros(n, np.float32) for _ in range(world)]
    xi = [_obj(kind, a) for a in ins]
    xo = [_obj(kind, o) for o in outs]
    with Loop(world) as loop:
        ctxs = loop.open_all()
        run_ranks(world, lambda r: ctxs[r].reduce_scatter(xi[r], xo[r],
                                                          mean=True))
        for c in ctxs:
            c.close()
    full = _allreduce(world, keep, mean=True)
    for r in range(world):
        assert outs[r].tobytes() == full[r * n:(r + 1) * n].tobytes()


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("world", WORLDS)
@pytest.mark.parametrize("kind,dtype", BYTE_KINDS)
def test_allgather(kind, dtype, world, n):
    """output[r] = rank r's input, every byte (NaN payloads and -0 of
    float32 too), on every rank; output may be (world, n) shaped; rank
    0 gathers in place from its own row."""
    base = _inputs("float32" if dtype != "int32" else "int32", n, world,
                   seed=world * 7 + n)
    if dtype == "float32" and n > 2:
        base[0][0] = np.float32(-0.0)
        base[0][1] = np.uint32(0x7fc01234).view(np.float32)
    wide = dtype in ("float32", "int32")
    xi = [_obj(kind, a, None if wide else dtype) for a in base]
    outs = [np.full(world * n, 5, base[0].dtype) for _ in range(world)]
    if wide:
        xo = [_obj(kind, o) for o in outs]
    else:
        xo = [_obj(kind, o, dtype) for o in outs]
    if kind == "torch" and world > 1:
        xo[1] = xo[1].view(world, n)       # the (world, n) form
    if kind == "numpy" and world > 1:
        xo[1] = xo[1].reshape(world, n)
    want = b"".join(_bytes(x) for x in xi)
    with Loop(world) as loop:
        ctxs = loop.open_all()

        def rank(r):
            if r == 0 and n:
                # In place: the input is this rank's own row.
                flat = xo[0].reshape(-1)
                flat[:n] = xi[0].reshape(-1)
                return ctxs[r].allgather(flat[:n], xo[0])
            return ctxs[r].allgather(xi[r], xo[r])
        got = run_ranks(world, rank)
        for c in ctxs:
            c.close()
    for r in range(world):
        assert got[r] is xo[r]
        assert _bytes(xo[r]) == want


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("world", WORLDS)
@pytest.mark.parametrize("kind,dtype", BYTE_KINDS)
def test_broadcast(kind, dtype, world, n):
    """Every rank ends with the root's bytes (the last rank is root)."""
    base = _inputs("float32" if dtype != "int32" else "int32", n, world,
                   seed=world * 5 + n + 1)
    wide = dtype in ("float32", "int32")
    xs = [_obj(kind, a, None if wide else dtype) for a in base]
    root = world - 1
    want = _bytes(xs[root])
    with Loop(world) as loop:
        ctxs = loop.open_all()
        got = run_ranks(world, lambda r: ctxs[r].broadcast(xs[r], root))
        for c in ctxs:
            c.close()
    for r in range(world):
        assert got[r] is xs[r]
        assert _bytes(xs[r]) == want


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("world", WORLDS)
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_reduce_scatter_sixteen_bit(dtype, world, n):
    """bfloat16 and float16 tensors (libtally's 16-bit fixed point):
    rank r's output is shard r of the 16-bit allreduce of the same
    tensors, bit for bit, on every rank."""
    torch = pytest.importorskip("torch")
    dt = getattr(torch, dtype)
    ins = [torch.from_numpy(a).to(dt)
           for a in _inputs("float32", world * n, world, seed=world + n)]
    keep = [t.clone() for t in ins]
    outs = [torch.zeros(n, dtype=dt) for _ in range(world)]
    with Loop(world) as loop:
        ctxs = loop.open_all()
        run_ranks(world, lambda r: ctxs[r].reduce_scatter(ins[r], outs[r]))
        full = [t.clone() for t in keep]
        run_ranks(world, lambda r: ctxs[r].allreduce(full[r]))
        for c in ctxs:
            c.close()
    for r in range(world):
        assert _bytes(ins[r]) == _bytes(keep[r])
        assert _bytes(outs[r]) == _bytes(full[0][r * n:(r + 1) * n])
        assert _bytes(full[r]) == _bytes(full[0])


def test_bad_arguments():
    """Wrong sizes, types, overlap, read-only output, a root outside the
    job, a closed context: exceptions, the context still usable."""
    torch = pytest.importorskip("torch")
    f = np.float32
    with Loop(2) as loop:
        ctxs = loop.open_all()

        def rank(r):
            c = ctxs[r]
            with pytest.raises(ValueError, match="world"):
                c.reduce_scatter(np.zeros(5, f), np.zeros(2, f))
            with pytest.raises(ValueError, match="world"):
                c.allgather(np.zeros(2, f), np.zeros(5, f))
            with pytest.raises(TypeError, match="one type"):
                c.allgather(np.zeros(2, f), np.zeros(4, np.int32))
            with pytest.raises(TypeError, match="mean=True"):
                c.reduce_scatter(np.zeros(4, np.int32),
                                 np.zeros(2, np.int32), mean=True)
            big = np.zeros(4, f)
            with pytest.raises(ValueError, match="overlap"):
                c.reduce_scatter(big, big[:2])
            with pytest.raises(ValueError, match="overlap"):
                c.allgather(big[1:3], big)
            ro = np.zeros(4, f)
            ro.flags.writeable = False
            with pytest.raises(ValueError, match="read-only"):
                c.allgather(np.zeros(2, f), ro)
            with pytest.raises(ValueError, match="not contiguous"):
                c.broadcast(np.zeros(8, f)[::2], 0)
            with pytest.raises(TypeError, match="float64"):
                c.broadcast(torch.zeros(4, dtype=torch.float64), 0)
            with pytest.raises(TypeError, match="float32 or int32"):
                c.allgather(np.zeros(2, np.float64), np.zeros(4, f))
            with pytest.raises(tally.Error) as e:
                c.broadcast(np.zeros(4, f), 2)
            assert e.value.errno == errno.EINVAL
            with pytest.raises(tally.Error) as e:
                c.broadcast(np.zeros(4, f), -1)
            assert e.value.errno == errno.EINVAL
            x = np.full(3, r, np.int32)
            c.broadcast(x, 1)           # still usable
            return x.tolist()
        assert run_ranks(2, rank) == [[1, 1, 1], [1, 1, 1]]
        for c in ctxs:
            c.close()
        with pytest.raises(tally.Error) as e:
            ctxs[0].broadcast(np.zeros(1, f), 0)
        assert e.value.errno == errno.EBADF


def test_gil_released():
    """Two ranks as threads of one process: an allgather that kept the
    GIL while waiting for the other rank would never see it come."""
    with Loop(2) as loop:
        ctxs = loop.open_all(timeout_ms=5000)
        outs = [np.zeros(2 * 100003, np.int32) for _ in range(2)]
        run_ranks(2, lambda r: ctxs[r].allgather(
            np.full(100003, r + 1, np.int32), outs[r]))
        for c in ctxs:
            c.close()
    for o in outs:
        assert (o[:100003] == 1).all() and (o[100003:] == 2).all()


@pytest.mark.parametrize("mean", [False, True])
@pytest.mark.parametrize("world", [1, 2, 3])
@pytest.mark.parametrize("codec", ["q8,seed=3", "q4,seed=3"])
def test_reduce_scatter_codec(codec, world, mean):
    """A job whose codec is q8 or q4: float32 reduce_scatter goes through
    it (docs/collectives.md, "Codecs"), each rank's output bit for bit
    shard r of the codec's allreduce of the same inputs (fresh contexts
    both times, so that the draws line up), within the codec's bound of
    the exact sum, and not the exact fixed point's bits."""
    n = 257
    ins = _inputs("float32", world * n, world, seed=world + 5)
    keep = [a.copy() for a in ins]
    outs = [np.zeros(n, np.float32) for _ in range(world)]
    with Loop(world, codec=codec) as loop:
        ctxs = loop.open_all()
        run_ranks(world, lambda r: ctxs[r].reduce_scatter(ins[r], outs[r],
                                                          mean=mean))
        for c in ctxs:
            c.close()
    xs = [a.copy() for a in keep]
    with Loop(world, codec=codec) as loop:
        ctxs = loop.open_all()
        run_ranks(world, lambda r: ctxs[r].allreduce(xs[r], mean=mean))
        for c in ctxs:
            c.close()
    exact = np.sum(np.stack(keep).astype(np.float64), axis=0)
    if mean:
        exact /= world
    amax = max(float(np.abs(a).max()) for a in keep) / (world if mean
                                                         else 1)
    levels = 127 if codec.startswith("q8") else 7
    got = np.concatenate(outs)
    for r in range(world):
        assert outs[r].tobytes() == xs[0][r * n:(r + 1) * n].tobytes()
    assert (np.abs(got - exact) <= world * amax * (1.0 / levels + 2**-20)
            ).all()
    assert got.tobytes() != _allreduce(world, keep, mean=mean).tobytes()


@pytest.mark.parametrize("world", [1, 2, 3])
def test_allgather_q8(world):
    """set_allgather_codec(8): float32 allgather is the lossy q8 one, the
    same bits on every rank, each element within its chunk's max / 254;
    set_allgather_codec(0) is exact again; other bits are refused."""
    n, d = 1000, 252           # elements a rank; values a chunk (elems 256)
    ins = _inputs("float32", n, world, seed=world + 11)
    outs = [np.zeros(world * n, np.float32) for _ in range(world)]
    with Loop(world) as loop:
        ctxs = loop.open_all()
        for c in ctxs:
            with pytest.raises(tally.Error) as e:
                c.set_allgather_codec(4)
            assert e.value.errno == errno.EINVAL
            c.set_allgather_codec(8)
        run_ranks(world, lambda r: ctxs[r].allgather(ins[r], outs[r]))
        exact = [np.zeros(world * n, np.float32) for _ in range(world)]
        for c in ctxs:
            c.set_allgather_codec(0)
        run_ranks(world, lambda r: ctxs[r].allgather(ins[r], exact[r]))
        for c in ctxs:
            c.close()
    for r in range(world):
        assert outs[r].tobytes() == outs[0].tobytes()
        assert exact[r].tobytes() == np.concatenate(ins).tobytes()
    for p in range(world):
        for c0 in range(0, n, d):
            x = ins[p][c0:c0 + d].astype(np.float64)
            y = outs[0][p * n + c0:p * n + c0 + len(x)].astype(np.float64)
            a = np.abs(x).max()
            assert (np.abs(y - x) <= a / 254 + a * 2**-22).all()
    assert outs[0].tobytes() != exact[0].tobytes()

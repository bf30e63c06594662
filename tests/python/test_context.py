# SPDX-License-Identifier: BSD-3-Clause
"""The package tally against loopagg (the real engine on 127.0.0.1): numpy
arrays and torch tensors summed in place, float32 through the job's codec
within the fixed-point bound the docs state and int32 exactly; codec
memory in tally.State; every error an exception with errno and libtally's
sentence; the GIL released while libtally works."""
import errno
import threading
import time

import numpy as np
import pytest

import tally
from loop import Loop, fixp_bound, run_ranks

WORLD = 4
SIZES = [0, 1, 257, 1000003]


def _inputs(kind, dtype, n, world, seed):
    """Each rank's input: int32 over the whole range (sums wrap), or
    float32 of mixed magnitudes."""
    rng = np.random.default_rng(seed)
    if dtype == "int32":
        return [rng.integers(-2**31, 2**31, n, dtype=np.int64)
                .astype(np.int32) for _ in range(world)]
    return [(rng.standard_normal(n) *
             np.exp2(rng.integers(-8, 4, n))).astype(np.float32)
            for _ in range(world)]


def _wrap(kind, a):
    """a as the kind of object the test hands to allreduce."""
    if kind == "numpy":
        return a
    torch = pytest.importorskip("torch")
    return torch.from_numpy(a)


def _values(kind, x):
    return x if kind == "numpy" else x.numpy()


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("dtype", ["float32", "int32"])
@pytest.mark.parametrize("kind", ["numpy", "torch"])
def test_allreduce_sizes(kind, dtype, n):
    """Every rank gets the same sums, in the object it passed: int32 the
    exact wrapping sum, float32 (codec fixp) within the documented
    bound."""
    ins = _inputs(kind, dtype, n, WORLD, seed=n * 7 + len(dtype))
    # Each rank's tensor is a slice of a larger array: the sums land in
    # that memory and nowhere else (no copy on the way in or out).
    bigs = [np.concatenate([np.full(3, 99, a.dtype), a,
                            np.full(3, 77, a.dtype)]) for a in ins]
    xs = [_wrap(kind, b[3:3 + n]) for b in bigs]
    with Loop(WORLD) as loop:
        ctxs = loop.open_all()
        outs = run_ranks(WORLD, lambda r: ctxs[r].allreduce(xs[r]))
        for c in ctxs:
            c.close()
    for r in range(WORLD):
        assert outs[r] is xs[r]
        assert (bigs[r][:3] == 99).all() and (bigs[r][-3:] == 77).all()
        assert _values(kind, xs[r]).tobytes() == \
            _values(kind, xs[0]).tobytes()
    got = _values(kind, xs[0])
    if dtype == "int32":
        want = (np.sum(np.stack(ins).astype(np.int64), axis=0)
                & 0xffffffff).astype(np.uint32).view(np.int32) \
            if n else np.zeros(0, np.int32)
        assert np.array_equal(got, want)
    else:
        exact = np.sum(np.stack(ins).astype(np.float64), axis=0) \
            if n else np.zeros(0)
        amax = max((float(np.abs(a).max()) for a in ins if n), default=0)
        err = np.abs(got.astype(np.float64) - exact)
        assert (err <= fixp_bound(amax, WORLD, exact)).all()
        if n > 1:
            # Not merely copied through: the sums differ from the input.
            assert not np.array_equal(got, ins[0])


def test_allreduce_returns_x_and_counts():
    """allreduce returns its argument; stats() counts the packets."""
    with Loop(1) as loop, loop.open(0) as ctx:
        x = np.arange(1000, dtype=np.float32)
        assert ctx.allreduce(x) is x
        assert np.array_equal(x, np.arange(1000, dtype=np.float32))
        s = ctx.stats()
        assert s["results"] >= 4 and s["packets_sent"] >= 4
        assert s["bytes_sent"] > 4000 and s["nacks"] == 0
        assert s["ignored"] == 0    # no empty or foreign datagram came


RETX_KEYS = ("rack", "probes", "timeouts", "spurious", "tp_errors",
             "gap_nacks", "result_gaps", "gap_resends")


def test_stats_say_why_retransmissions_went():
    """stats() has struct tally_ctx_stats's counters of why
    retransmissions went and of gaps: zero on a clean run; with 5 % loss
    both ways the retransmissions are accounted for by their causes
    (RACK, tail probes, the timer, gap NACKs) and the sums still
    arrive."""
    # A first timeout long enough that a loaded machine's scheduling
    # delays send nothing again.
    with Loop(1) as loop, loop.open(0, rto_us=500000) as ctx:
        ctx.allreduce(np.ones(3000, dtype=np.float32))
        s = ctx.stats()
        assert all(s[k] == 0 for k in RETX_KEYS), s
    with Loop(2, loss=0.05, seed=3) as loop:
        ctxs = loop.open_all()

        def rank(r):
            for i in range(20):
                x = np.full(3000, r + 1, dtype=np.float32)
                ctxs[r].allreduce(x)
                assert x.tolist() == [3.0] * 3000
            return ctxs[r].stats()
        for s in run_ranks(2, rank):
            assert all(isinstance(s[k], int) for k in RETX_KEYS)
            assert s["retransmits"] > 0, s
            assert s["rack"] + s["probes"] + s["timeouts"] + \
                s["gap_resends"] >= 1, s
            assert s["gap_resends"] <= s["retransmits"]
            assert s["spurious"] <= s["retransmits"]
            assert s["tp_errors"] == 0
        for c in ctxs:
            c.close()


def test_info():
    """info() says what the context is for, and that CUDA tensors have
    no GPU path in this build."""
    with Loop(2, codec="q8,ef=1", job=12) as loop:
        ctxs = loop.open_all()
        i = ctxs[1].info()
        assert (i["job"], i["rank"], i["world"]) == (12, 1, 2)
        assert (i["window"], i["elems"]) == (16, 256)
        assert i["codec"] == "q8,ef=1" and i["codec_name"] == "q8"
        assert i["codec_memory"] is True and i["narrow"] is False
        assert i["cuda"] is tally.HAVE_CUDA
        assert i["transport"] == "udp"
        assert ctxs[0].info()["rank"] == 0
        for c in ctxs:
            c.close()


def _ef_error(codec, iters=12):
    """How far the running sum of q4 results strays from the running
    exact sum of a fixed input, with codec (and a State per tensor)."""
    n = 3001
    rng = np.random.default_rng(5)
    ins = [rng.standard_normal(n).astype(np.float32) for _ in range(2)]
    exact = (ins[0].astype(np.float64) + ins[1]) * iters
    with Loop(2, codec=codec) as loop:
        ctxs = loop.open_all()
        sts = [tally.State(c, n) for c in ctxs]
        assert len(sts[0]) == n

        def rank(r):
            total = np.zeros(n)
            for _ in range(iters):
                x = ins[r].copy()
                ctxs[r].allreduce(x, state=sts[r])
                total += x
            return total
        totals = run_ranks(2, rank)
        for c in ctxs:
            c.close()
    assert np.array_equal(totals[0], totals[1])
    return float(np.abs(totals[0] - exact).max())


def test_state_error_feedback():
    """A State carries error feedback's residual from call to call: the
    running sum stays within about one quantization step of the truth,
    far closer than without feedback."""
    with_ef = _ef_error("q4,ef=1")
    without = _ef_error("q4")
    assert with_ef < without / 2, (with_ef, without)


def test_state_checks():
    """A State belongs to one size and to float32."""
    with Loop(1, codec="q8,ef=1") as loop, loop.open(0) as ctx:
        st = tally.State(ctx, 10)
        with pytest.raises(ValueError, match="state is for 10"):
            ctx.allreduce(np.zeros(11, np.float32), state=st)
        with pytest.raises(ValueError, match="int32"):
            ctx.allreduce(np.zeros(10, np.int32), state=st)
        with pytest.raises(ValueError):
            tally.State(ctx, 0)
        assert len(tally.State(ctx, np.zeros(7, np.float32))) == 7
        ctx.allreduce(np.ones(10, np.float32), state=st)


@pytest.mark.parametrize("bad,exc,match", [
    (np.zeros(8, np.float64), TypeError, "float32 or int32"),
    (np.zeros(8, np.int64), TypeError, "float32 or int32"),
    (np.zeros(8, np.float64).view(np.int16), TypeError, "float32 or int32"),
    (np.zeros(16, np.float32)[::2], ValueError, "not contiguous"),
    (np.zeros((4, 4), np.float32).T, ValueError, "not contiguous"),
    ([1.0, 2.0], TypeError, "writable buffer"),
    (b"abcd", ValueError, "read-only"),
], ids=["float64", "int64", "int16", "strided", "transposed", "list",
        "bytes"])
def test_bad_buffers(bad, exc, match):
    """Buffers libtally cannot take in place are refused, not copied."""
    with Loop(1) as loop, loop.open(0) as ctx:
        with pytest.raises(exc, match=match):
            ctx.allreduce(bad)
        ro = np.zeros(4, np.float32)
        ro.setflags(write=False)
        with pytest.raises(ValueError, match="read-only"):
            ctx.allreduce(ro)
        ctx.allreduce(np.zeros(4, np.float32))  # still usable


def test_bad_tensors():
    torch = pytest.importorskip("torch")
    with Loop(1) as loop, loop.open(0) as ctx:
        for t, exc, match in [
                (torch.zeros(8, dtype=torch.float64), TypeError, "float64"),
                (torch.zeros(8, dtype=torch.int64), TypeError, "int64"),
                (torch.zeros(4, 4).t(), ValueError, "not contiguous"),
                (torch.zeros(16)[::2], ValueError, "not contiguous"),
                (torch.zeros(4).to_sparse(), TypeError, "dense"),
                (torch.zeros(4, device="meta"), TypeError, "meta")]:
            with pytest.raises(exc, match=match):
                ctx.allreduce(t)
        # 16-bit CPU tensors are taken (tally_allreduce_typed), in place.
        for dt in (torch.bfloat16, torch.float16):
            t = torch.tensor([1.5, -2.0, 0.25], dtype=dt)
            assert ctx.allreduce(t) is t
            assert t.dtype == dt and t.tolist() == [1.5, -2.0, 0.25]
        # A parameter (requires_grad) is summed in place all the same.
        p = torch.nn.Parameter(torch.ones(5))
        ctx.allreduce(p)
        assert p.detach().tolist() == [1.0] * 5


def test_cuda_tensor_refused_or_reduced():
    """A CUDA tensor goes through libtally's GPU path, or is refused with
    EOPNOTSUPP: never silently copied to the host."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device here")
    with Loop(1) as loop, loop.open(0) as ctx:
        x = torch.ones(100, device="cuda")
        if not tally.HAVE_CUDA:
            with pytest.raises(tally.Error) as e:
                ctx.allreduce(x)
            assert e.value.errno == errno.EOPNOTSUPP
        else:
            ctx.allreduce(x)
            assert x.cpu().tolist() == [1.0] * 100


def test_errors_carry_errno_and_sentence():
    """libtally's errors are tally.Error (an OSError) with errno and the
    sentence of tally_ctx_error()."""
    with pytest.raises(tally.Error) as e:
        tally.open_direct("127.0.0.1", 1, 1, 0, 0)
    assert e.value.errno == errno.EINVAL and "world 0" in e.value.strerror
    assert isinstance(e.value, OSError)
    with pytest.raises(tally.Error) as e:
        tally.open_direct("127.0.0.1", 1, 1, 0, 2, codec="q9")
    assert e.value.errno == errno.EINVAL and "codec" in e.value.strerror
    with pytest.raises(tally.Error) as e:
        tally.open_direct("not-an-address", 1, 1, 0, 1)
    assert e.value.errno == errno.EINVAL
    with pytest.raises(ValueError, match="bind_port"):
        tally.open_direct("127.0.0.1", 1, 1, 0, 1, bind_port=70000)
    with pytest.raises(ValueError, match="token"):
        tally.open_direct("127.0.0.1", 1, -1, 0, 1)
    with pytest.raises(TypeError):
        tally.open_direct("127.0.0.1", 1, 1, 0, 1, no_such_option=1)


def test_timeout_then_epipe():
    """A missing member: ETIMEDOUT with the sentence, then EPIPE (the
    context's slots are in an unknown state) until it is closed."""
    with Loop(2) as loop, loop.open(0, timeout_ms=300) as ctx:
        t0 = time.monotonic()
        with pytest.raises(tally.Error) as e:
            ctx.allreduce(np.ones(10, np.float32))
        assert e.value.errno == errno.ETIMEDOUT
        assert "no result" in e.value.strerror
        assert time.monotonic() - t0 < 5
        with pytest.raises(tally.Error) as e:
            ctx.allreduce(np.ones(10, np.int32))
        assert e.value.errno == errno.EPIPE


def test_wrong_token_times_out():
    """The dataplane drops a wrong wire token's packets: ETIMEDOUT."""
    with Loop(1) as loop:
        with tally.open_direct("127.0.0.1", loop.job, loop.token + 1, 0, 1,
                               dp_port=loop.port, window=16,
                               timeout=0.3) as ctx:
            with pytest.raises(tally.Error) as e:
                ctx.allreduce(np.ones(10, np.float32))
            assert e.value.errno == errno.ETIMEDOUT


def test_closed_context():
    """A closed context refuses every call with EBADF; closing again and
    the with block's close are fine."""
    with Loop(1, codec="q8,ef=1") as loop:
        with loop.open(0) as ctx:
            assert not ctx.closed
        assert ctx.closed
        ctx.close()
        for call in (lambda: ctx.allreduce(np.ones(3, np.float32)),
                     ctx.stats, lambda: tally.State(ctx, 3)):
            with pytest.raises(tally.Error) as e:
                call()
            assert e.value.errno == errno.EBADF
            assert "closed" in e.value.strerror
        assert ctx.info()["world"] == 1
        assert "closed" in repr(ctx)


def test_gil_released():
    """While one thread waits inside allreduce (rank 0, for rank 1), the
    main thread runs Python: it counts, then is rank 1. With the GIL held
    in libtally the main thread could not run until rank 0 timed out."""
    with Loop(2) as loop:
        c0, c1 = loop.open(0, timeout_ms=3000), loop.open(1)
        x0, x1 = np.ones(100000, np.float32), np.ones(100000, np.float32)
        state = {"in": False, "done": False, "err": None}

        def rank0():
            state["in"] = True
            try:
                c0.allreduce(x0)
            except tally.Error as e:
                state["err"] = e
            state["done"] = True

        t = threading.Thread(target=rank0)
        t.start()
        while not state["in"]:
            time.sleep(0.001)
        time.sleep(0.05)  # rank 0 is inside libtally by now
        count, t0 = 0, time.monotonic()
        while time.monotonic() - t0 < 0.3:
            count += 1
        assert not state["done"]  # rank 0 still waits: it needs rank 1
        c1.allreduce(x1)
        t.join()
        assert state["err"] is None and count > 10000
        assert (x0 == 2).all() and (x1 == 2).all()
        c0.close()
        c1.close()


def test_threads_share_a_context():
    """Two threads calling one context wait for each other (libtally's
    context is for one thread at a time); the sums come out right."""
    with Loop(2) as loop:
        ctxs = loop.open_all()

        def rank(r):
            outs = []
            # Both threads of a rank take turns on its context; the
            # tensors are alike, so whichever order each rank takes
            # them in, the sums are right.
            xs = [np.full(5000, r + 1, np.int32) for _ in range(2)]
            ts = [threading.Thread(target=ctxs[r].allreduce, args=(x,))
                  for x in xs]
            for t in ts:
                t.start()
            for t in ts:
                t.join()
            outs.extend(xs)
            return outs
        outs = run_ranks(2, rank)
        for o in outs:
            for x in o:
                assert (x == 3).all()
        for c in ctxs:
            c.close()


def test_token_from_environment(monkeypatch, tmp_path):
    """tally.open(): token None means $TALLY_TOKEN, else the file
    $TALLY_TOKEN_FILE names; rank and world None mean $RANK and
    $WORLD_SIZE. A refused URL is an EINVAL with libtally's sentence."""
    monkeypatch.delenv("TALLY_TOKEN", raising=False)
    monkeypatch.delenv("TALLY_TOKEN_FILE", raising=False)
    with pytest.raises(ValueError, match="no token"):
        tally.open("tally://127.0.0.1/job", None, 0, 1)
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "1")
    f = tmp_path / "token"
    f.write_text("zz\n")
    monkeypatch.setenv("TALLY_TOKEN_FILE", str(f))
    # The token is read (and found malformed) before any connection.
    with pytest.raises(tally.Error) as e:
        tally.open("tally://127.0.0.1:1/job")
    assert e.value.errno == errno.EINVAL and "hex" in e.value.strerror
    monkeypatch.setenv("TALLY_TOKEN", "0" * 64)
    with pytest.raises(tally.Error) as e:
        tally.open("nope://127.0.0.1/job")
    assert e.value.errno == errno.EINVAL
    with pytest.raises(tally.Error) as e:
        tally.open("tally://127.0.0.1:1/job", b"0" * 64, join_timeout=2)
    assert e.value.errno == errno.ECONNREFUSED


class _DeviceArray:
    """A float32 array in GPU memory as CuPy or Numba show one
    (__cuda_array_interface__, version 3), at a device address that is
    never valid on the host: a host copy of it would crash, so only
    libtally's GPU path can take it."""

    def __init__(self, n, typestr="<f4", stream=None, readonly=False):
        self.__cuda_array_interface__ = {
            "version": 3, "shape": (n,), "typestr": typestr,
            "data": (0x7f0000001000, readonly), "strides": None,
            "stream": stream}


def test_info_says_what_cuda_tensors_meet():
    """info()["cuda_path"] is libtally's answer for this build and
    machine, and cuda_tensors says it in words: never a host copy."""
    with Loop(1) as loop, loop.open(0) as ctx:
        i = ctx.info()
        if not tally.HAVE_CUDA:
            assert i["cuda_path"] == "none" and i["cuda_segment"] == 0
            assert "EOPNOTSUPP" in i["cuda_tensors"]
        else:
            assert i["cuda_path"] in ("gpu-staged", "no-device")
            assert i["cuda_segment"] == 1 << 20
        if i["cuda_path"] == "gpu-staged":
            assert "no host copy" in i["cuda_tensors"]
        else:
            assert "never copies a CUDA tensor to the host" in \
                i["cuda_tensors"]
        assert i["cuda_staging"] == 0
        s = ctx.stats()
        assert s["cuda_calls"] == 0 and s["cuda_wait_ns"] == 0


def test_codec_without_gpu_path_in_info():
    """A job whose codec has no GPU path (sparse) says so in info() where
    libtally has a device; a build without CUDA says none."""
    with Loop(1, codec="sparse,density=0.05") as loop, loop.open(0) as c:
        path = c.info()["cuda_path"]
        assert path in ({"none"} if not tally.HAVE_CUDA else
                        {"codec-not-on-gpu", "no-device"})


@pytest.mark.parametrize("dtype", ["<f4", "<i4"])
def test_cuda_array_goes_to_libtally_gpu_path(dtype):
    """An array in GPU memory reaches libtally's tally_allreduce_cuda()
    (with the interface's stream), which refuses it here for the reason
    info() gave (no CUDA: EOPNOTSUPP; no device: ENODEV, libtally's
    sentence); nothing is sent and nothing is copied to the host."""
    with Loop(1) as loop, loop.open(0) as ctx:
        path = ctx.info()["cuda_path"]
        if path == "gpu-staged":
            pytest.skip("a usable GPU here: test_cuda.py covers it")
        x = _DeviceArray(257, dtype, stream=1)
        with pytest.raises(tally.Error) as e:
            ctx.allreduce(x)
        if path == "none":
            assert e.value.errno == errno.EOPNOTSUPP
            assert "no CUDA path" in e.value.strerror
        else:
            assert e.value.errno == errno.ENODEV
            assert "device" in e.value.strerror
        s = ctx.stats()
        assert s["packets_sent"] == 0 and s["cuda_calls"] == 0
        # The context is still usable: nothing started.
        y = np.arange(5, dtype=np.float32)
        ctx.allreduce(y)
        assert y.tolist() == [0, 1, 2, 3, 4]


def test_cuda_array_checks():
    """What libtally cannot take is refused before it is reached."""
    with Loop(1) as loop, loop.open(0) as ctx:
        with pytest.raises(TypeError):
            ctx.allreduce(_DeviceArray(4, "<f8"))
        with pytest.raises(ValueError):
            ctx.allreduce(_DeviceArray(4, readonly=True))
        with pytest.raises(TypeError):
            ctx.allreduce(_DeviceArray(4), stream="s")


def test_cuda_state_needs_the_gpu_path():
    """A State in GPU memory: EOPNOTSUPP without CUDA, ENODEV without a
    device; a host State with a device array is refused."""
    with Loop(1, codec="q8,ef=1") as loop, loop.open(0) as ctx:
        path = ctx.info()["cuda_path"]
        if path == "gpu-staged":
            pytest.skip("a usable GPU here: test_cuda.py covers it")
        with pytest.raises(tally.Error) as e:
            tally.State(ctx, 10, cuda=True)
        assert e.value.errno == (errno.EOPNOTSUPP if path == "none" else
                                 errno.ENODEV)
        if tally.HAVE_CUDA:
            with pytest.raises(ValueError, match="cuda=True"):
                ctx.allreduce(_DeviceArray(10),
                              state=tally.State(ctx, 10))


def test_cuda_tensor_refused_without_cuda_path():
    """Without libtally's CUDA path a CUDA tensor is refused with
    EOPNOTSUPP, untouched, and nothing is sent: no silent host copy.
    (torch here has no CUDA: the tensor says it is on cuda:0.)"""
    torch = pytest.importorskip("torch")
    if tally.HAVE_CUDA:
        pytest.skip("libtally has its CUDA path; torch.cuda tests are in "
                    "test_cuda.py")

    class OnCuda(torch.Tensor):
        @property
        def device(self):
            return torch.device("cuda", 0)

    x = torch.arange(8, dtype=torch.float32).as_subclass(OnCuda)
    with Loop(1) as loop, loop.open(0) as ctx:
        assert ctx.info()["cuda_path"] == "none"
        with pytest.raises(tally.Error) as e:
            ctx.allreduce(x)
        assert e.value.errno == errno.EOPNOTSUPP
        assert "does not copy a CUDA tensor" in e.value.strerror
        assert ctx.stats()["packets_sent"] == 0
        with pytest.raises(tally.Error):
            tally.State(ctx, x)
    assert torch.Tensor(x).tolist() == list(range(8))


@pytest.mark.parametrize("world", [4, 3])
def test_mean_is_the_sum_of_products(world):
    """allreduce(x, mean=True) with fixp (tally_allreduce_mean) has the
    bits of summing x * (1/world) (what the hook did before, and what the
    GPU path does): folded into libtally's decoding for 4 ranks,
    multiplied first for 3; and is within the fixed-point bound of the
    true mean. int32 refuses mean."""
    n = 70001
    ins = _inputs("numpy", "float32", n, world, seed=world)
    inv = np.float32(1) / np.float32(world)
    with Loop(world) as loop:
        ctxs = loop.open_all()

        def rank(r):
            a = ins[r].copy()
            ctxs[r].allreduce(a, mean=True)
            b = ins[r] * inv
            ctxs[r].allreduce(b)
            return a, b
        outs = run_ranks(world, rank)
        with pytest.raises(TypeError, match="mean=True takes float32"):
            ctxs[0].allreduce(np.ones(4, np.int32), mean=True)
        for c in ctxs:
            c.close()
    a, b = outs[0]
    assert all(o[0].tobytes() == a.tobytes() for o in outs)
    assert a.tobytes() == b.tobytes()
    scaled = [x * inv for x in ins]
    exact = np.sum(np.stack(scaled).astype(np.float64), axis=0)
    amax = max(float(np.abs(x).max()) for x in scaled)
    assert (np.abs(a.astype(np.float64) - exact) <=
            fixp_bound(amax, world, exact)).all()
    assert not np.array_equal(a, ins[0])


def test_mean_with_state_multiplies_first():
    """A codec with memory (q8 + error feedback): mean=True is the same as
    multiplying x by 1/world and reducing it with the same State history
    (and the same stochastic rounding: a second job, the same calls), bit
    for bit."""
    n, world = 5003, 2
    with Loop(world, codec="q8,ef=1") as la, \
            Loop(world, codec="q8,ef=1") as lb:
        ca, cb = la.open_all(), lb.open_all()

        def rank(r):
            sa, sb = tally.State(ca[r], n), tally.State(cb[r], n)
            rng = np.random.default_rng(r)
            out = []
            for it in range(3):
                x = rng.standard_normal(n).astype(np.float32) * (it + 1)
                a = x.copy()
                ca[r].allreduce(a, state=sa, mean=True)
                b = x * (np.float32(1) / np.float32(world))
                cb[r].allreduce(b, state=sb)
                out.append((a, b))
            return out
        outs = run_ranks(world, rank)
        for c in ca + cb:
            c.close()
    for a, b in outs[0]:
        assert a.tobytes() == b.tobytes()
        assert not np.array_equal(a, np.zeros_like(a))

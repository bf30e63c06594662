# SPDX-License-Identifier: BSD-3-Clause
"""tally: in-network gradient aggregation from Python.

A context is one rank's membership of a tally job, as libtally's
``struct tally_ctx``::

    import tally
    with tally.open("tally://10.0.0.254/myjob", token, rank, world) as ctx:
        ctx.allreduce(x)            # numpy array or torch CPU tensor

``allreduce`` sums a float32 or int32 buffer over every rank, in place:
float32 through the job's codec (``tallyctl job create ... --codec``),
int32 exactly; bfloat16 and float16 (CPU tensors, or numpy float16) in
fixed point rounded once to their type. ``reduce_scatter``,
``allgather`` and ``broadcast`` are libtally's other collectives, on
the same objects (docs/collectives.md). The buffer is never copied: libtally reads and writes
the array's own memory, with the GIL released, so other Python threads
run meanwhile. A buffer that is not contiguous is refused (ValueError),
never copied behind your back. Every error of libtally or tallyd is a
``tally.Error`` (an OSError): ``errno`` and ``strerror``, the sentence
tallyd or libtally gave.

For codecs with memory (error feedback, DGC momentum, 2bit, PowerSGD)
give each tensor its own ``tally.State`` and pass it every time.

CUDA tensors (and any object with ``__cuda_array_interface__``) go
through libtally's GPU path, tally_allreduce_cuda(): the job's codec
encodes on the GPU into pinned staging, and the sums are decoded on
torch's current CUDA stream, without a copy of the tensor to the host.
A libtally without that path refuses them with tally.Error(EOPNOTSUPP);
``ctx.info()["cuda_path"]`` says beforehand what a CUDA tensor meets.

``tally.torch`` has the DDP communication hook. docs/training.md is the
guide.
"""
import builtins as _builtins
import errno as _errno
import os as _os
import sys as _sys

from tally import _tally
from tally._tally import Error

__all__ = ["open", "open_direct", "Context", "State", "Error", "HAVE_CUDA",
           "DTYPES"]

#: The dtypes a Context's calls take (allreduce and the collectives).
DTYPES = ("float32", "int32", "bfloat16", "float16")

#: Whether this build of libtally reduces CUDA tensors on the GPU
#: (tally_allreduce_cuda()). Without it a CUDA tensor is refused: tally
#: never copies one to the host silently.
HAVE_CUDA = bool(_tally.HAVE_CUDA)

#: What each of libtally's cuda_path values means for a CUDA tensor
#: (ctx.info()["cuda_tensors"]).
_CUDA_PATHS = {
    "gpu-staged": "reduced on the GPU: encoded there into pinned staging "
                  "registered once, decoded on the caller's stream; no "
                  "host copy",
    "none": "refused (EOPNOTSUPP): this libtally has no CUDA path; tally "
            "never copies a CUDA tensor to the host",
    "no-device": "refused (ENODEV): no usable CUDA device or driver; "
                 "tally never copies a CUDA tensor to the host",
    "codec-not-on-gpu": "refused (EOPNOTSUPP): the job's codec has no GPU "
                        "path; tally never copies a CUDA tensor to the "
                        "host",
}

__version__ = _tally.VERSION


def _token(token):
    """The job token as str: the argument, else $TALLY_TOKEN, else the
    first line of the file $TALLY_TOKEN_FILE names."""
    if token is None:
        token = _os.environ.get("TALLY_TOKEN")
    if token is None and _os.environ.get("TALLY_TOKEN_FILE"):
        with _builtins.open(_os.environ["TALLY_TOKEN_FILE"]) as f:
            token = f.readline()
    if token is None:
        raise ValueError("tally: no token: pass token=, or set "
                         "TALLY_TOKEN or TALLY_TOKEN_FILE")
    if isinstance(token, (bytes, bytearray)):
        token = bytes(token).decode("ascii", "replace")
    if not isinstance(token, str):
        raise TypeError("tally: the token is a str or bytes, not %s"
                        % type(token).__name__)
    return token.strip()


def _place(value, env, what):
    """rank or world: the argument, else the environment's (torchrun's
    RANK and WORLD_SIZE)."""
    if value is not None:
        return value
    if env in _os.environ:
        return int(_os.environ[env])
    raise ValueError("tally: no %s: pass it, or set %s" % (what, env))


def _ms(opts, name, seconds):
    """Moves a time in seconds (timeout=, join_timeout=) to NAME_ms."""
    if seconds is not None:
        if seconds < 0:
            raise ValueError("tally: %s must be >= 0" % name)
        opts[name + "_ms"] = max(1, int(round(seconds * 1000)))


def open(url, token=None, rank=None, world=None, *, timeout=None,
         join_timeout=None, **opts):
    """Joins a job through tallyd and returns its Context.

    url is ``tally://HOST[:PORT]/JOB[?ca=FILE][&tls=on|off]``; token the
    job's 64 hex digits (str or bytes; None: $TALLY_TOKEN or the file
    $TALLY_TOKEN_FILE); rank and world this process's place (None: $RANK
    and $WORLD_SIZE). Blocks, with the GIL released, until every rank has
    joined. Options (struct tally_ctx_opts): timeout (seconds an
    allreduce may wait for a result; or timeout_ms), join_timeout
    (seconds for the whole rendezvous; or join_timeout_ms), ca_file (the
    CA that signed tallyd's certificate; else the URL's ca=, $TALLY_CA,
    the system's store), bind_addr, bind_port, window, elems (each capped
    at the job's), rto_us. Raises tally.Error with tallyd's sentence:
    EACCES (no such job, or a wrong token), EINVAL, ETIMEDOUT,
    EKEYREJECTED (tallyd's certificate), ECONNREFUSED, ...
    """
    _ms(opts, "timeout", timeout)
    _ms(opts, "join_timeout", join_timeout)
    return Context(_tally.open(url, _token(token), _place(rank, "RANK",
                   "rank"), _place(world, "WORLD_SIZE", "world"), **opts))


def open_direct(dp_addr, job, token, rank, world, *, timeout=None, **opts):
    """A Context for a job set up by hand at the dataplane, without
    tallyd (tally_ctx_open()): dp_addr its IPv4 address, job its id, token
    the job's 64-bit wire token (an int). Options: dp_port (first UDP
    port, 47474 by default), dp_nports, bind_addr, bind_port, group_addr,
    window, elems, rto_us, timeout (seconds) or timeout_ms, narrow, codec
    (the job's codec spec, "fixp" by default). Tests and tools use it;
    users join through tallyd with open().
    """
    _ms(opts, "timeout", timeout)
    return Context(_tally.open_direct(dp_addr, job, token, rank, world,
                                      **opts))


def _check_tensor(x, what="allreduce"):
    """Refuses a tensor (CPU or CUDA) libtally cannot take in place:
    float32, int32, bfloat16 and float16 pass (16-bit ones on the host
    only: libtally's GPU path sums float32 and int32)."""
    torch = _sys.modules["torch"]
    if x.dtype not in (torch.float32, torch.int32, torch.bfloat16,
                       torch.float16):
        raise TypeError("tally: %s takes float32 or int32 tensors (and "
                        "bfloat16 or float16 ones on the host), not %s"
                        % (what, x.dtype))
    if x.layout != torch.strided:
        raise TypeError("tally: allreduce takes dense tensors, not %s"
                        % x.layout)
    if not x.is_contiguous():
        raise ValueError("tally: the tensor is not contiguous; tally "
                         "works in place and never copies: pass "
                         "x.contiguous() and copy the sums back")


def _torch_buffer(x, what="allreduce"):
    """What the extension takes for a CPU tensor, after checking what
    libtally can take: float32 and int32 as a numpy array that shares its
    memory (no copy); 16-bit ones as the tensor itself (numpy has no
    bfloat16; the extension reads its data_ptr())."""
    _check_tensor(x, what)
    if x.element_size() == 2:
        return x.detach()
    return x.detach().numpy()


def _host(x, what):
    """x (a numpy array, writable buffer or CPU tensor) as the extension
    takes it; CUDA and other devices refused (the collectives beyond
    allreduce run on the host)."""
    if not _is_tensor(x):
        return x
    if x.device.type != "cpu":
        raise TypeError("tally: %s takes CPU tensors, not %s ones"
                        % (what, x.device.type))
    return _torch_buffer(x, what)


def _is_tensor(x):
    """Whether x is a torch tensor (without importing torch)."""
    torch = _sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


def _no_cuda():
    """The refusal of a CUDA tensor by a libtally without CUDA."""
    return Error(_errno.EOPNOTSUPP, "this libtally has no CUDA path "
                 "(tally_allreduce_cuda; build with -Dcuda=enabled); "
                 "tally does not copy a CUDA tensor to the host behind "
                 "your back: pass x.cpu() and copy the sums back")


def _stream_handle(stream):
    """A CUDA stream as the integer handle libtally takes: a
    torch.cuda.Stream (its cuda_stream), an int, or None (0: the legacy
    default stream)."""
    if stream is None:
        return 0
    handle = getattr(stream, "cuda_stream", stream)
    if not isinstance(handle, int) or handle < 0:
        raise TypeError("tally: stream is a torch.cuda.Stream or a "
                        "cudaStream_t handle (int), not %r" % (stream,))
    return handle


def _cuda_array(x):
    """An object's __cuda_array_interface__ (CuPy, Numba) as (ptr, n,
    dtype, stream handle or None), after checking what libtally can
    take: float32 or int32, C-contiguous, writable."""
    cai = x.__cuda_array_interface__
    ptr, readonly = cai["data"]
    typestr = cai["typestr"]
    dtype = {"<f4": "float32", "<i4": "int32"}.get(typestr)
    if dtype is None:
        raise TypeError("tally: allreduce takes float32 or int32 "
                        "elements, not %s" % typestr)
    if readonly:
        raise ValueError("tally: the buffer is read-only; allreduce "
                         "writes the sums into it")
    n = 1
    for d in cai["shape"]:
        n *= d
    strides = cai.get("strides")
    if strides is not None and n > 1:
        want, step = [], 4
        for d in reversed(cai["shape"]):
            want.insert(0, step)
            step *= d
        if any(s != w for s, w, d in zip(strides, want, cai["shape"])
               if d > 1):
            raise ValueError("tally: the buffer is not contiguous; tally "
                             "works in place and never copies")
    return ptr, n, dtype, cai.get("stream")


class Context:
    """One rank's membership of a job; made by tally.open().

    A context is used by one call at a time: calls from several threads
    wait for each other. Every rank must make the same calls in the same
    order with the same sizes. After an allreduce fails with anything but
    EINVAL or ERANGE the context refuses further calls (EPIPE): close it
    and open the job again on every rank.
    """

    def __init__(self, c):
        self._c = c
        self._info = c.info()
        self._info["cuda"] = HAVE_CUDA
        self._info["cuda_tensors"] = _CUDA_PATHS.get(
            self._info["cuda_path"], self._info["cuda_path"])

    def allreduce(self, x, state=None, stream=None, mean=False,
                  dense=False):
        """Sums x over every rank, in place, and returns x; with mean=True
        the average (float32 only): the sum divided by the world size.

        x: a numpy array, a torch tensor, or any writable buffer, of
        float32 (summed through the job's codec) or int32 (summed
        exactly, wrapping), C-contiguous. state: the tally.State of this
        tensor, for a codec with memory (float32 only; for a CUDA tensor
        one made with cuda=True).

        A CUDA tensor (or an object with __cuda_array_interface__) goes
        through libtally's GPU path: encoded on the GPU into pinned
        staging, decoded on stream (default: torch's current stream of
        the tensor's device; for other objects, the interface's stream or
        the legacy default stream). The call returns once the sums are
        in and their decoding is enqueued on that stream: work enqueued
        there afterwards sees them. A libtally without CUDA refuses it
        with EOPNOTSUPP (info()["cuda_path"] says so beforehand), never
        a silent copy to the host.

        mean (tally_allreduce_mean) gives the bits of summing
        x * (1/world), a float32 product: with the job's fixp and a world
        of a power of two the division is folded into libtally's
        decoding, with no pass over x of its own; otherwise libtally
        multiplies first. A CUDA tensor is multiplied on its stream
        before the GPU path (the same bits as on the host).

        dense: float32 in the shared-scale fixed point
        (tally_allreduce_f32), whatever the job's codec, with no state:
        what a compressing job sends uncompressed (biases beside
        PowerSGD's matrices, its first steps).
        """
        buf = x
        if _is_tensor(x):
            if x.device.type == "cuda":
                return self._allreduce_cuda(x, state, stream, mean, dense)
            if x.device.type != "cpu":
                raise TypeError("tally: allreduce takes CPU or CUDA "
                                "tensors, not %s ones" % x.device.type)
            buf = _torch_buffer(x)
        elif hasattr(x, "__cuda_array_interface__"):
            if mean:
                raise TypeError("tally: mean=True takes host buffers and "
                                "torch tensors, not %s" % type(x).__name__)
            ptr, n, dtype, s = _cuda_array(x)
            handle = _stream_handle(s if stream is None else stream)
            if not HAVE_CUDA:
                raise _no_cuda()
            self._c.allreduce_cuda(ptr, n, dtype, handle,
                                   self._dev_state(state), bool(dense))
            return x
        self._c.allreduce(buf, None if state is None else state._s,
                          bool(mean), dense=bool(dense))
        return x

    def reduce_scatter(self, input, output, mean=False):
        """output = this rank's shard of the sum of input over every rank
        (tally_reduce_scatter), and returns output; mean=True: the
        average (float32 only).

        input holds world * k elements, output k of the same dtype
        (float32 summed in the shared-scale fixed point, bit-identical on
        every rank; int32 exactly, wrapping); rank r gets elements
        r*k .. (r+1)*k - 1. Both C-contiguous numpy arrays, buffers or
        CPU tensors, never copied. With mean=True input is overwritten:
        it is multiplied by 1/world (a float32 product) first, the bits
        allreduce(mean=True) gives. bfloat16 and float16 (CPU
        tensors; numpy float16) in the 16-bit fixed point rounded once
        to the type, as allreduce."""
        self._c.reduce_scatter(_host(input, "reduce_scatter"),
                               _host(output, "reduce_scatter"), bool(mean))
        return output

    def allgather(self, input, output):
        """output[r] = rank r's input, on every rank (tally_allgather),
        and returns output. input: k elements; output: world * k of the
        same dtype, contiguous (e.g. shape (world, *input.shape)).
        float32, int32, bfloat16, float16: the bytes as they are. input
        may be this rank's own row of output."""
        self._c.allgather(_host(input, "allgather"),
                          _host(output, "allgather"))
        return output

    def set_allgather_codec(self, bits):
        """The float32 allgather's codec on this context: 0, exact (the
        default), or 8, the lossy q8 all-gather of parameters
        (tally_ctx_set_allgather_codec): each chunk of a shard goes as
        8-bit integers with its own scale, a quarter of the bytes; every
        element comes back within max|x| / 254 of its chunk's max (plus
        binary32 roundings), every rank, the owner too, holding the same
        bits; a NaN or an infinity raises tally.Error(ERANGE) on every
        rank. Every rank must set the same. Other dtypes stay exact.
        docs/collectives.md, "A lossy q8 all-gather"."""
        self._c.set_allgather_codec(bits)

    def broadcast(self, tensor, root):
        """tensor = root's tensor, in place on every rank
        (tally_broadcast), and returns it; any of the four dtypes, bytes
        as they are."""
        self._c.broadcast(_host(tensor, "broadcast"), root)
        return tensor

    @staticmethod
    def _dev_state(state):
        return None if state is None else state._s

    def _allreduce_cuda(self, x, state, stream, mean=False, dense=False):
        """A CUDA tensor: libtally's GPU path (tally_allreduce_cuda:
        encode on the GPU into registered host staging, decode on the
        caller's stream), with the tensor's device current; mean:
        divided on that stream first."""
        torch = _sys.modules["torch"]
        _check_tensor(x)
        if x.element_size() == 2:
            raise TypeError("tally: CUDA tensors of %s are not summed "
                            "here (libtally's GPU path takes float32 and "
                            "int32): pass x.cpu() and copy the sums back"
                            % x.dtype)
        if not HAVE_CUDA:
            raise _no_cuda()
        if mean and x.dtype != torch.float32:
            raise TypeError("tally: mean=True takes float32 elements (an "
                            "int32 average is not an int32)")
        dtype = "float32" if x.dtype == torch.float32 else "int32"
        with torch.cuda.device(x.device):
            if stream is None:
                stream = torch.cuda.current_stream(x.device)
            if mean:
                # x * (1/world), as libtally averages on the host: the
                # same bits (torch's CUDA division is not exact).
                with torch.cuda.stream(stream):
                    x.mul_(1.0 / self._info["world"])
            self._c.allreduce_cuda(x.data_ptr(), x.numel(), dtype,
                                   _stream_handle(stream),
                                   self._dev_state(state), bool(dense))
        return x

    def info(self):
        """The job as this context knows it: job (id at the dataplane),
        rank, world, window, elems, narrow, codec (canonical spec),
        codec_name, codec_memory (whether it keeps a State per tensor),
        cuda (whether this libtally has its CUDA path), cuda_path (what
        a CUDA tensor's allreduce does, libtally's name: "gpu-staged",
        "none", "no-device", "codec-not-on-gpu"), cuda_tensors (the same
        in words), cuda_segment (elements a staged segment) and
        cuda_staging (bytes of pinned staging held; 0 before the first
        CUDA tensor), and transport ("udp", "xdp", "rdma", or "ring": the
        job has no live dataplane and runs on the ring fallback, a TCP
        ring among the workers, docs/scale-out.md)."""
        i = dict(self._info)
        try:
            i["cuda_staging"] = self._c.info()["cuda_staging"]
        except Error:  # closed: what it held last is gone
            i["cuda_staging"] = 0
        return i

    def stats(self):
        """The context's counters (tally_ctx_stats): packets_sent,
        retransmits, results, duplicates, nacks, bytes_sent,
        bytes_received, bundled, stale, forged; why retransmissions went:
        rack (a later chunk was answered first), probes (tail probes),
        timeouts (the timer), and spurious (needless ones); gaps
        (docs/protocol.md "Gaps"): gap_nacks (the dataplane saw this
        rank's frames lost), result_gaps (results lost on the way back),
        gap_resends (retransmissions those asked for); tp_errors (the
        transport's failures that ended the context); for CUDA tensors
        cuda_calls, cuda_segments, cuda_staged_bytes, cuda_wait_ns (the
        host waiting for the GPU's encoding of a segment: what the double
        buffering did not hide) and cuda_net_ns (segments in the
        window); on the ring fallback ring_calls, ring_refused (peers
        refused at the hello) and ring_bad_frames (frames out of
        step); ignored (datagrams dropped before a header was read:
        empty, or not from the job's dataplane)."""
        return self._c.stats()

    def close(self):
        """Closes the context (waits for a call in progress); calls
        after it raise tally.Error(EBADF). Closing twice is fine."""
        self._c.close()

    @property
    def closed(self):
        return self._c.closed

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __repr__(self):
        i = self._info
        return ("<tally.Context job %d rank %d/%d codec %s%s>"
                % (i["job"], i["rank"], i["world"], i["codec"],
                   " closed" if self.closed else ""))


class State:
    """The codec memory of one float32 tensor: State(ctx, n, cuda=None),
    n its elements (or the tensor itself). Zeroed at first; pass it to
    ctx.allreduce(x, state=...) with that tensor every time. A tensor
    whose size changes needs a new State. It may outlive its context and
    serve a context opened again for the same job.

    cuda: keep it in GPU memory, for a CUDA tensor (tally_state_new_cuda,
    on the current CUDA device; EOPNOTSUPP without libtally's CUDA path).
    None: when n is a CUDA tensor (made on its device).

    rows: for a powersgd job, the rows of the matrix this tensor is
    viewed as (tally_state_new_rows: rows x ceil(n / rows), row-major,
    as tensor.view(rows, -1)); None or 0: the job's rows key. A weight
    of shape (out, in, ...) is compressed as itself with rows=out. Every
    rank must give the same rows for the same tensor. rows above n, or
    rows with another codec, raise tally.Error (EINVAL)."""

    def __init__(self, ctx, n, cuda=None, rows=None):
        if cuda is None:
            cuda = _is_tensor(n) and n.device.type == "cuda"
        if cuda and not HAVE_CUDA:
            raise _no_cuda()
        if not isinstance(n, int):
            dev = n.device if _is_tensor(n) and cuda else None
            n = int(n.numel()) if _is_tensor(n) else int(n.size)
        else:
            dev = None
        if dev is not None:
            with _sys.modules["torch"].cuda.device(dev):
                self._s = _tally.State(ctx._c, n, cuda=True,
                                       rows=rows or 0)
        else:
            self._s = _tally.State(ctx._c, n, cuda=bool(cuda),
                                   rows=rows or 0)
        self.n = n
        self.cuda = bool(cuda)
        self.rows = rows or 0

    def __len__(self):
        return self.n

    def __repr__(self):
        return "<tally.State of %d elements%s%s>" % (
            self.n, " in %d rows" % self.rows if self.rows else "",
            " on the GPU" if self.cuda else "")

# SPDX-License-Identifier: BSD-3-Clause
"""tally: in-network gradient aggregation from Python.

A context is one rank's membership of a tally job, as libtally's
``struct tally_ctx``::

    import tally
    with tally.open("tally://10.0.0.254/myjob", token, rank, world) as ctx:
        ctx.allreduce(x)            # numpy array or torch CPU tensor

``allreduce`` sums a float32 or int32 buffer over every rank, in place:
float32 through the job's codec (``tallyctl job create ... --codec``),
int32 exactly. The buffer is never copied: libtally reads and writes
the array's own memory, with the GIL released, so other Python threads
run meanwhile. A buffer that is not contiguous is refused (ValueError),
never copied behind your back. Every error of libtally or tallyd is a
``tally.Error`` (an OSError): ``errno`` and ``strerror``, the sentence
tallyd or libtally gave.

For codecs with memory (error feedback, DGC momentum, 2bit, PowerSGD)
give each tensor its own ``tally.State`` and pass it every time.

``tally.torch`` has the DDP communication hook. docs/training.md is the
guide.
"""
import builtins as _builtins
import errno as _errno
import os as _os
import sys as _sys

from tally import _tally
from tally._tally import Error

__all__ = ["open", "open_direct", "Context", "State", "Error", "HAVE_CUDA"]

#: Whether this build of libtally reduces CUDA tensors on the GPU
#: (tally_allreduce_cuda()). Without it a CUDA tensor is refused: tally
#: never copies one to the host silently.
HAVE_CUDA = bool(_tally.HAVE_CUDA)

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


def _torch_buffer(x):
    """A CPU tensor's memory as a numpy array that shares it (no copy),
    after checking what libtally can take."""
    torch = _sys.modules["torch"]
    if x.dtype not in (torch.float32, torch.int32):
        raise TypeError("tally: allreduce takes float32 or int32 tensors, "
                        "not %s" % x.dtype)
    if x.layout != torch.strided:
        raise TypeError("tally: allreduce takes dense tensors, not %s"
                        % x.layout)
    if not x.is_contiguous():
        raise ValueError("tally: the tensor is not contiguous; tally "
                         "works in place and never copies: pass "
                         "x.contiguous() and copy the sums back")
    return x.detach().numpy()


def _is_tensor(x):
    """Whether x is a torch tensor (without importing torch)."""
    torch = _sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


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

    def allreduce(self, x, state=None):
        """Sums x over every rank, in place, and returns x.

        x: a numpy array, a torch tensor, or any writable buffer, of
        float32 (summed through the job's codec) or int32 (summed
        exactly, wrapping), C-contiguous. state: the tally.State of this
        tensor, for a codec with memory (float32 only). CUDA tensors need
        a libtally with its CUDA path (info()["cuda"]); otherwise they
        are refused with EOPNOTSUPP rather than copied.
        """
        buf = x
        if _is_tensor(x):
            if x.device.type == "cuda":
                return self._allreduce_cuda(x, state)
            if x.device.type != "cpu":
                raise TypeError("tally: allreduce takes CPU or CUDA "
                                "tensors, not %s ones" % x.device.type)
            buf = _torch_buffer(x)
        self._c.allreduce(buf, None if state is None else state._s)
        return x

    def _allreduce_cuda(self, x, state):
        """A CUDA tensor: libtally's GPU path (tally_allreduce_cuda:
        encode on the GPU into registered host staging, decode on the
        caller's stream) where this build has it."""
        raise Error(_errno.EOPNOTSUPP, "this libtally has no CUDA path "
                    "(tally_allreduce_cuda; build with -Dcuda=enabled); "
                    "tally does not copy a CUDA tensor to the host behind "
                    "your back: pass x.cpu() and copy the sums back")

    def info(self):
        """The job as this context knows it: job (id at the dataplane),
        rank, world, window, elems, narrow, codec (canonical spec),
        codec_name, codec_memory (whether it keeps a State per tensor),
        cuda (whether CUDA tensors are reduced on the GPU)."""
        return dict(self._info)

    def stats(self):
        """The context's counters (tally_ctx_stats): packets_sent,
        retransmits, results, duplicates, nacks, bytes_sent,
        bytes_received, bundled, stale, forged."""
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
    """The codec memory of one float32 tensor: State(ctx, n), n its
    elements (or the tensor itself). Zeroed at first; pass it to
    ctx.allreduce(x, state=...) with that tensor every time. A tensor
    whose size changes needs a new State. It may outlive its context and
    serve a context opened again for the same job."""

    def __init__(self, ctx, n):
        if not isinstance(n, int):
            n = int(n.numel()) if _is_tensor(n) else int(n.size)
        self._s = _tally.State(ctx._c, n)
        self.n = n

    def __len__(self):
        return self.n

    def __repr__(self):
        return "<tally.State of %d elements>" % self.n

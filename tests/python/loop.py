# SPDX-License-Identifier: BSD-3-Clause
"""Helpers of the Python tests: loopagg (the real aggregation engine behind
UDP sockets on 127.0.0.1, tests/lib/loopagg.h) through ctypes, ranks run
as threads of the test, and the fixed-point bound of docs/protocol.md."""
import ctypes
import math
import os
import threading

import tally

_lib = None


def _loopagg():
    """libloopagg_py.so, which meson names in $TALLY_LOOPAGG."""
    global _lib
    if _lib is None:
        lib = ctypes.CDLL(os.environ["TALLY_LOOPAGG"], use_errno=True)
        lib.tpy_loopagg_start.restype = ctypes.c_void_p
        lib.tpy_loopagg_start.argtypes = [
            ctypes.c_uint, ctypes.c_uint64, ctypes.c_uint, ctypes.c_uint,
            ctypes.c_uint, ctypes.c_double, ctypes.c_uint64]
        lib.tpy_loopagg_port.restype = ctypes.c_uint
        lib.tpy_loopagg_port.argtypes = [ctypes.c_void_p]
        lib.tpy_loopagg_stop.restype = None
        lib.tpy_loopagg_stop.argtypes = [ctypes.c_void_p,
                                         ctypes.POINTER(ctypes.c_uint64)]
        _lib = lib
    return _lib


class Loop:
    """One job at a loopagg aggregator: Loop(world, codec=...) starts it,
    open(rank) joins it, stop() (or the with block) ends it."""

    def __init__(self, world, codec=None, job=7, token=0x5eed1234abcd,
                 window=16, elems=256, loss=0.0, seed=1):
        self.world, self.codec, self.job, self.token = world, codec, job, \
            token
        self.window, self.elems = window, elems
        lib = _loopagg()
        self._a = lib.tpy_loopagg_start(job, token, world, window, elems,
                                        loss, seed)
        if not self._a:
            e = ctypes.get_errno()
            raise OSError(e, "loopagg_start: " + os.strerror(e))
        self.port = lib.tpy_loopagg_port(self._a)
        self.stats = None

    def open(self, rank, **opts):
        """rank's context for this job (tally.open_direct)."""
        opts.setdefault("window", self.window)
        opts.setdefault("elems", self.elems)
        opts.setdefault("codec", self.codec)
        opts.setdefault("timeout_ms", 10000)
        return tally.open_direct("127.0.0.1", self.job, self.token, rank,
                                 self.world, dp_port=self.port, **opts)

    def open_all(self, **opts):
        return [self.open(r, **opts) for r in range(self.world)]

    def stop(self):
        if self._a:
            out = (ctypes.c_uint64 * 3)()
            _loopagg().tpy_loopagg_stop(self._a, out)
            self._a = None
            self.stats = {"rx": out[0], "tx": out[1], "lost": out[2]}

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
        return False


def run_ranks(n, fn):
    """Runs fn(rank) in n threads at once; returns their results by rank,
    or raises the first rank's exception (after all are done)."""
    res = [None] * n
    err = [None] * n

    def body(r):
        try:
            res[r] = fn(r)
        except BaseException as e:  # reported to the caller
            err[r] = e

    ts = [threading.Thread(target=body, args=(r,)) for r in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    for e in err:
        if e is not None:
            raise e
    return res


def fixp_bound(amax, world, exact):
    """docs/protocol.md and <tally/fixp.h>: a decoded fixed-point sum r of
    world members, whose global max |x| is amax and exact sum S, has
    |r - S| <= E + 2^-24 (|S| + E) + 2^-150, E = world 2^-b amax,
    b = 30 - floor(log2 world). exact may be a numpy array."""
    b = 30 - int(math.floor(math.log2(world)))
    e = world * 2.0 ** -b * amax
    return e + 2.0 ** -24 * (abs(exact) + e) + 2.0 ** -150

# SPDX-License-Identifier: BSD-3-Clause
"""tally.backend: tally as a torch.distributed backend.

Importing tally.torch (or this module) registers the backend "tally"
with torch.distributed, so one word changes in a training script::

    import tally.torch
    dist.init_process_group("tally", rank=rank, world_size=world)

The group joins the tally job named by $TALLY_URL (token from
$TALLY_TOKEN or the file $TALLY_TOKEN_FILE, CA from $TALLY_CA), or by
init_process_group(..., pg_options={...}) (see Options), with the rank
and world that init_process_group gives. Beside it the group makes an
inner gloo group from the same store (its own key prefix) for what tally
does not do.

What goes where (docs/training.md, "The tally backend"):
- allreduce SUM and AVG of float32 (the job's codec: fixp, exact to the
  fixed-point bound), int32 (SUM, exact) and barrier go through tally;
  bfloat16 and float16 too: summed by the context (libtally's fixed
  point rounded once to the type) when it takes 16-bit tensors
  (Context.dtypes, or info()'s lanes_bf16 / lanes_f16); an average, or
  a context without them, summed as float32 through tally and rounded
  once back (logged once).
- reduce_scatter (list and tensor forms): a tally allreduce of the
  concatenation, keeping this rank's shard; all_gather (list and tensor
  forms) and broadcast: gloo (bfloat16 moved as bytes, which gloo
  takes). Each of the three has one function here that uses the
  context's own call (Context.reduce_scatter, .allgather, .broadcast)
  as soon as the context has it: _reduce_scatter, _allgather,
  _broadcast.
- CUDA tensors (a libtally built with CUDA and a device torch sees):
  float32 and int32 allreduces through libtally's GPU path
  (Context.allreduce on the tensor: encoded on the GPU into pinned
  staging, decoded on the stream that was current when the operation
  was issued) where info()["cuda_path"] is "gpu-staged"; every other
  operation above (16-bit sums, reduce_scatter, all_gather, broadcast,
  or an allreduce whose codec has no GPU kernels) copied to host memory
  and back around the same host call, logged once per kind at INFO.
  The Work completes once the results are enqueued on that stream, as
  NCCL's do: work queued there afterwards sees them.
- everything else (max, min, product, float64, int64, send/recv,
  all_to_all, gather, scatter, reduce, CUDA tensors where libtally or
  torch has no CUDA, ...): the inner gloo group, logged once per kind
  at WARNING; never silently wrong.

Every operation, gloo's included (but send and recv), runs on one
background thread per group in the order it was issued; async_op=True
returns a Work (wait(), is_completed(), get_future()) at once. An error
completes the Work with the exception: wait() raises the tally.Error
(errno, tallyd's or libtally's sentence), its future fails, DDP raises
it from backward(); nothing hangs longer than the group's timeout.
"""
import collections
import datetime
import logging
import os
import queue
import threading

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import PrefixStore, ProcessGroup, \
    ProcessGroupGloo, ReduceOp, Work

import tally

__all__ = ["Options", "ProcessGroupTally", "register"]

log = logging.getLogger("tally.backend")

#: The name init_process_group takes.
NAME = "tally"


class Options:
    """What init_process_group(..., pg_options=Options(...)) (or a dict
    of the same keys) tells the group; each None falls back to the
    environment.

    url: the job, tally://HOST[:PORT]/JOB (else $TALLY_URL); token (else
    $TALLY_TOKEN or $TALLY_TOKEN_FILE); ctx: an open tally.Context of
    this rank to use instead of joining (the group then does not close
    it); timeout: seconds an operation may wait for the other ranks
    (else init_process_group's timeout); lossy: accept a job whose codec
    is not fixp for float32 allreduces (codecs without memory only); any
    other key goes to tally.open() (ca_file, join_timeout, window,
    elems, rto_us, bind_addr, ...)."""

    def __init__(self, url=None, token=None, ctx=None, timeout=None,
                 lossy=False, **open_opts):
        self.url, self.token, self.ctx = url, token, ctx
        self.timeout, self.lossy = timeout, bool(lossy)
        self.open_opts = open_opts

    @classmethod
    def of(cls, o):
        """Options from pg_options: None, a dict, or Options."""
        if o is None:
            return cls()
        if isinstance(o, cls):
            return o
        if isinstance(o, dict):
            return cls(**o)
        raise TypeError("tally: pg_options is a tally.backend.Options or "
                        "a dict, not %s" % type(o).__name__)


def _seconds(t):
    if isinstance(t, datetime.timedelta):
        return t.total_seconds()
    return None if t is None else float(t)


def _join(opts, rank, world, timeout):
    """The group's tally.Context: opts.ctx (checked), or a new one
    joined through tallyd."""
    if opts.ctx is not None:
        i = opts.ctx.info()
        if (i["rank"], i["world"]) != (rank, world):
            raise ValueError("tally: the context is rank %d of %d, the "
                             "group's rank %d of %d" % (i["rank"],
                                                        i["world"], rank,
                                                        world))
        return opts.ctx, False
    url = opts.url or os.environ.get("TALLY_URL")
    if not url:
        raise ValueError("tally: no job: set TALLY_URL (and TALLY_TOKEN "
                         "or TALLY_TOKEN_FILE), or pass pg_options="
                         "{'url': ...} to init_process_group")
    t = _seconds(opts.timeout) or timeout
    return tally.open(url, opts.token, rank, world, timeout=t,
                      **opts.open_opts), True


def _sixteen(ctx):
    """The 16-bit dtypes the context sums itself (feature detection):
    the names in Context.dtypes (or tally.DTYPES) where given; else
    those whose lanes info() reports (lanes_bf16, lanes_f16: the
    extension's allreduce takes them, libtally's
    tally_allreduce_typed); none before."""
    names = getattr(ctx, "dtypes", None)
    if names is None:
        names = getattr(tally, "DTYPES", None)
    if names is None:
        i = ctx.info()
        names = [n for n, k in (("bfloat16", "lanes_bf16"),
                                ("float16", "lanes_f16")) if k in i]
    have = {"bfloat16": torch.bfloat16, "float16": torch.float16}
    return {have[n] for n in names if n in have}


def _summer16(ctx):
    """What sums a 16-bit tensor in place: tally.Context's extension
    object (whose allreduce takes bfloat16 and float16 tensors where the
    package's Python layer still takes float32 and int32 only), else the
    context's own allreduce."""
    if isinstance(ctx, tally.Context):
        return ctx._c.allreduce
    return ctx.allreduce


def _unwrap(fut):
    """Future.then callback: the value, or the exception raised (a
    future completed by set_exception holds the exception as its value
    in torch 1.13; chained like this it fails properly for C++)."""
    return fut.value()


class _Work(Work):
    """An operation's handle, as torch's backends give them: wait()
    (raises the operation's exception), is_completed(), is_success(),
    get_future() (a torch.futures.Future of the output tensors, failed
    on error), result().

    torch 1.13 calls a Python Work's methods from C++ (DDP) only while
    its Python object lives, so the group keeps each one until it is
    done and has been waited on or asked for its future
    (ProcessGroupTally._keep)."""

    def __init__(self, fut):
        super().__init__()
        self._raw = fut
        self._fut = fut.then(_unwrap)
        self.touched = False

    def wait(self, timeout=None):
        self.touched = True
        self._raw.wait()  # raises the exception itself
        return True

    def get_future(self):
        self.touched = True
        return self._fut

    def is_completed(self):
        return self._raw.done()

    def is_success(self):
        if not self._raw.done():
            return False
        try:
            self._raw.wait()
        except Exception:
            return False
        return True

    def result(self):
        return self.wait() and self._raw.value()

    def synchronize(self):
        self.wait()


class ProcessGroupTally(ProcessGroup):
    """torch.distributed's process group on a tally job (made by
    init_process_group("tally") through register()). Counters: routes
    ({kind: operations}, where each went: "tally allreduce", "gloo
    broadcast", "gloo allreduce max", ...), errors."""

    def __init__(self, store, rank, world, timeout, opts=None):
        super().__init__(rank, world)
        opts = Options.of(opts)
        if not isinstance(timeout, datetime.timedelta):
            timeout = datetime.timedelta(seconds=float(timeout))
        self._rank, self._world = rank, world
        self.ctx, self._owns_ctx = _join(opts, rank, world,
                                         timeout.total_seconds())
        info = self.ctx.info()
        self.codec = info["codec"]
        if info["codec_name"] != "fixp":
            if not opts.lossy or info["codec_memory"]:
                self._close_ctx()
                raise ValueError(
                    "tally: the job's codec is %s; the tally backend "
                    "sums float32 exactly and takes fixp jobs (pass "
                    "lossy=True for a codec without memory; for codecs "
                    "with memory use the DDP hook, tally.torch)"
                    % info["codec"])
            log.warning("tally: float32 allreduces go through the job's "
                        "lossy codec %s", info["codec"])
        self._cuda = info.get("cuda_path") == "gpu-staged"
        self._cuda_any = tally.HAVE_CUDA and torch.cuda.is_available()
        self._dtypes = {torch.float32, torch.int32} | _sixteen(self.ctx)
        self._sum16 = _summer16(self.ctx)
        self.gloo = ProcessGroupGloo(PrefixStore("tally-gloo/", store),
                                     rank, world, timeout)
        self.routes = collections.Counter()
        self.errors = 0
        self._said = set()
        self._live = collections.OrderedDict()
        self._queue = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._closed = False
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name="tally-pg-%d" % rank)
        self._thread.start()

    # -- the background thread and the work objects --

    def _run(self):
        """Operations in the order they were issued, until close()."""
        while True:
            item = self._queue.get()
            if item is None:
                return
            fn, fut, stream = item
            if stream is None:
                self._complete(fn, fut)
                continue
            # A CUDA operation runs, and its future completes, on the
            # stream that was current when it was issued.
            with torch.cuda.device(stream.device), \
                    torch.cuda.stream(stream):
                self._complete(fn, fut)

    def _complete(self, fn, fut):
        """Runs fn; completes fut with its outputs or its exception."""
        try:
            out = fn()
        except Exception as e:  # completes the work, never hangs
            self.errors += 1
            fut.set_exception(e)
            return
        fut.set_result(out)

    def _keep(self, w):
        """Keeps w's Python object alive for C++ callers; lets go of
        those done and waited for (the latest 64 are always kept)."""
        with self._lock:
            self._live[id(w)] = w
            while len(self._live) > 64:
                k, old = next(iter(self._live.items()))
                if not (old.touched and old._raw.done()) and \
                        len(self._live) < 65536:
                    break
                del self._live[k]

    def _submit(self, route, fn, tensors=()):
        """Queues fn (which returns the output tensors) for the thread;
        returns its Work. route says where it goes (counted; logged once
        when it is a hand-over to gloo). When one of tensors is a CUDA
        tensor, fn runs on the stream current now (the caller's) and the
        Work's future is made for that device."""
        self.routes[route] += 1
        dev = next((t.device for t in tensors
                    if t.device.type == "cuda"), None)
        stream = None
        if dev is not None and self._cuda_any:
            stream = torch.cuda.current_stream(dev)
            fut = torch.futures.Future(devices=[dev])
        else:
            fut = torch.futures.Future()
        w = _Work(fut)
        self._keep(w)
        with self._lock:
            if self._closed:
                self.errors += 1
                fut.set_exception(tally.Error(9, "the tally process "
                                              "group is closed"))
                return w
            self._queue.put((fn, fut, stream))
        return w

    def _say(self, kind, level, why):
        """Logs kind once per group."""
        if kind not in self._said:
            self._said.add(kind)
            log.log(level, "tally: %s: %s (said once)", kind, why)

    def _gloo(self, kind, call, *args):
        """An operation tally does not do, handed to the inner gloo
        group in issue order; logged once per kind."""
        self._say(kind, logging.WARNING, "not done by tally; handed to "
                  "the inner gloo group")

        def fn():
            w = call(*args)
            w.wait()
            return w.result()
        return self._submit("gloo " + kind, fn)

    def close(self):
        """Stops the thread after the operations queued; closes the
        context when the group joined it."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._queue.put(None)
        self._thread.join()
        self._close_ctx()

    def _close_ctx(self):
        if getattr(self, "_owns_ctx", False):
            self.ctx.close()

    def getBackendName(self):
        return NAME

    def name(self):
        return NAME

    # -- what goes through tally --

    def _tally_kind(self, t, op, what):
        """Why t with op cannot go through tally (None: it can)."""
        # By name: torch 2's opts.reduceOp is a ReduceOp, which a tuple
        # of RedOpType members does not contain (their __eq__ says no).
        if _op_name(op) not in ("sum", "avg"):
            return "%s %s" % (what, _op_name(op))
        if t.layout != torch.strided:
            return "%s of %s tensors" % (what, t.layout)
        if t.device.type != "cpu" and (t.device.type != "cuda" or
                                       not self._cuda_any):
            return "%s of %s tensors" % (what, t.device.type)
        if t.dtype not in (torch.float32, torch.int32, torch.bfloat16,
                           torch.float16):
            return "%s of %s" % (what, t.dtype)
        if t.dtype == torch.int32 and op == ReduceOp.AVG:
            return "%s avg of int32" % what
        return None

    def _sum(self, t, avg):
        """Sums (avg: averages) t over the ranks through tally, in
        place. A tensor that is not contiguous is summed in a copy.
        16-bit sums: the context's own (libtally's fixed point rounded
        once to the type) where it takes the type; an average, or a
        type it does not take, is summed as float32 and rounded once
        back (logged once)."""
        x = t if t.is_contiguous() else t.contiguous()
        if x.device.type == "cuda":
            if self._cuda and x.dtype in (torch.float32, torch.int32):
                self.ctx.allreduce(x, mean=avg,
                                   stream=torch.cuda.current_stream())
            else:
                self._via_host("allreduce of %s" % x.dtype,
                               lambda h: self._sum(h, avg), x)
        elif x.dtype in (torch.float32, torch.int32):
            self.ctx.allreduce(x, mean=avg)
        elif x.dtype in self._dtypes and not avg:
            self._sum16(x)
        else:
            self._say("allreduce %sof %s" % ("avg " if avg else "",
                                            x.dtype), logging.INFO,
                      "summed as float32 through tally and rounded once "
                      "back (this context sums %s)" % ", ".join(
                          sorted(str(d) for d in self._dtypes)))
            y = x.float()
            self.ctx.allreduce(y, mean=avg)
            x.copy_(y)
        if x is not t:
            t.copy_(x)
        return t

    def _via_host(self, kind, fn, *ts):
        """fn on host copies of the CUDA tensors ts (the caller's
        stream current), their results copied back onto it; logged once
        per kind: libtally's GPU path takes float32 and int32 allreduces
        (of a codec with GPU kernels) only."""
        self._say("%s in CUDA memory" % kind, logging.INFO,
                  "copied to host memory and back around tally's call "
                  "(libtally's GPU path takes float32 and int32 "
                  "allreduces%s)" % ("" if self._cuda else
                                     ", and not this job's codec"))
        hs = [t.cpu() for t in ts]
        fn(*hs)
        for t, h in zip(ts, hs):
            t.copy_(h)

    def _on_host(self, kind, fn, *ts):
        """fn(*ts), through host copies when the tensors are CUDA ones
        (_via_host)."""
        if any(t.device.type == "cuda" for t in ts):
            self._via_host(kind, fn, *ts)
        else:
            fn(*ts)

    # -- the operations --

    def _nothing(self, tensors):
        """A Work done at once, for operations on empty tensors only
        (gloo 1.13 divides by zero on them; there is nothing to move)."""
        return self._submit("empty", lambda: list(tensors))

    def allreduce(self, tensors, opts=None):
        return self._allreduce_list(tensors, opts, "",
                                    self.gloo.allreduce)

    def allreduce_coalesced(self, tensors, opts=None):
        return self._allreduce_list(tensors, opts, " (coalesced)",
                                    self.gloo.allreduce_coalesced)

    def _allreduce_list(self, tensors, opts, note, gloo_call):
        """Sums (or averages) each tensor through tally, in issue order;
        hands the whole call to gloo_call when one of them is not a kind
        tally sums (the reason logged once, note appended)."""
        if all(t.numel() == 0 for t in tensors):
            return self._nothing(tensors)
        op = _reduce_op(opts)
        why = [self._tally_kind(t, op, "allreduce") for t in tensors]
        if any(why):
            return self._gloo(next(w for w in why if w) + note,
                              gloo_call, tensors, opts)
        avg = op == ReduceOp.AVG

        def fn():
            for t in tensors:
                self._sum(t, avg)
            return list(tensors)
        return self._submit("tally allreduce", fn, tensors)

    def barrier(self, opts=None):
        def fn():
            self.ctx.allreduce(torch.zeros(1, dtype=torch.int32))
            return []
        return self._submit("tally barrier", fn)

    def broadcast(self, tensors, opts=None):
        root = getattr(opts, "rootRank", 0) if opts is not None else 0
        if len(tensors) != 1:
            return self._gloo("broadcast of several tensors",
                              self.gloo.broadcast, tensors, opts)

        def fn():
            self._on_host("broadcast", lambda t: self._broadcast(t, root),
                          tensors[0])
            return list(tensors)
        return self._submit("broadcast", fn, tensors)

    def allgather(self, output_tensors, input_tensors, opts=None):
        if len(input_tensors) != 1 or len(output_tensors) != 1:
            return self._gloo("allgather of several tensors",
                              self.gloo.allgather, output_tensors,
                              input_tensors, opts)
        outs, inp = output_tensors[0], input_tensors[0]
        if len(outs) != self._world:
            raise ValueError("tally: allgather wants %d output tensors, "
                             "got %d" % (self._world, len(outs)))

        def fn():
            self._on_host("allgather", lambda i, *o: self._allgather(
                i, list(o)), inp, *outs)
            return list(outs)
        return self._submit("allgather", fn, [inp] + list(outs))

    def _allgather_base(self, output, input, opts=None):
        if output.numel() != input.numel() * self._world:
            raise ValueError("tally: all_gather_into_tensor's output has "
                             "%d elements, not world (%d) times the "
                             "input's %d" % (output.numel(), self._world,
                                             input.numel()))

        def fn():
            self._on_host("allgather", lambda i, o: self._allgather(
                i, _chunks(o, self._world, i.numel()), o), input, output)
            return [output]
        return self._submit("allgather", fn, [input, output])

    def reduce_scatter(self, output_tensors, input_tensors, opts=None):
        if len(output_tensors) != 1 or len(input_tensors) != 1:
            raise ValueError("tally: reduce_scatter takes one output "
                             "tensor and one list of inputs")
        out, ins = output_tensors[0], input_tensors[0]
        if len(ins) != self._world or any(x.numel() != out.numel()
                                          for x in ins):
            raise ValueError("tally: reduce_scatter wants %d inputs of "
                             "the output's size" % self._world)
        op = _reduce_op(opts)

        def fn():
            flat = torch.cat([x.reshape(-1) for x in ins])
            self._on_host("reduce_scatter", lambda f, o:
                          self._reduce_scatter(f, o, op), flat, out)
            return [out]
        return self._submit(self._rs_route(out, op), fn, [out])

    def _reduce_scatter_base(self, output, input, opts=None):
        if input.numel() != output.numel() * self._world:
            raise ValueError("tally: reduce_scatter_tensor's input has %d "
                             "elements, not world (%d) times the output's "
                             "%d" % (input.numel(), self._world,
                                     output.numel()))
        op = _reduce_op(opts)

        def fn():
            self._on_host("reduce_scatter", lambda f, o:
                          self._reduce_scatter(f, o, op),
                          input.reshape(-1).clone(), output)
            return [output]
        return self._submit(self._rs_route(output, op), fn, [output])

    # -- the three that switch to the context's own calls --

    def _native(self, name, t):
        """The context's own collective `name` for t, when it has one
        (feature detection: Context.reduce_scatter, .allgather,
        .broadcast) and takes t's dtype; else None."""
        fn = getattr(self.ctx, name, None)
        if fn is None or t.dtype not in self._dtypes or \
                t.device.type != "cpu" or not t.is_contiguous():
            return None
        return fn

    def _movable(self, t, as_dtype=None):
        """t as the context's allgather and broadcast take it (they move
        bytes as they are): itself when its dtype is one of the
        context's; else a view of its bytes as int32 (or int16) elements,
        any dtype (int64, float64, bool, ...) whose bytes fill whole
        ones. as_dtype: that dtype's view only. None: t is not contiguous
        or its bytes do not fill whole elements."""
        if not t.is_contiguous() or t.device.type != "cpu":
            return None
        if as_dtype in (None, t.dtype) and t.dtype in self._dtypes:
            return t
        for dt in (torch.int32, torch.int16):
            if as_dtype not in (None, dt):
                continue
            try:
                return t.reshape(-1).view(dt)
            except RuntimeError:  # bytes that do not fill a dt
                continue
        return None

    def _rs_route(self, out, op):
        why = self._tally_kind(out, op, "reduce_scatter")
        if why:
            self._say(why, logging.WARNING, "not done by tally; an "
                      "allreduce of the inner gloo group, keeping this "
                      "rank's shard")
            return "gloo " + why
        return "tally reduce_scatter"

    def _reduce_scatter(self, flat, out, op):
        """out = this rank's shard of the sum (op SUM) or average (AVG)
        of flat (world * out.numel() elements, this rank's copy; it may
        be overwritten). Context.reduce_scatter(flat, out, mean=) when
        the context has it; until then a tally allreduce of flat, keeping
        the shard (what gloo users do: gloo has no reduce_scatter)."""
        n = out.numel()
        why = self._tally_kind(out, op, "reduce_scatter")
        if n == 0:
            return out
        if why:
            w = self.gloo.allreduce([flat], _allreduce_opts(op))
            w.wait()
        else:
            avg = op == ReduceOp.AVG
            fn = self._native("reduce_scatter", flat)
            # mean= is float32's (16-bit averages take the allreduce,
            # summed as float32 and rounded once back).
            if fn is not None and out.is_contiguous() and \
                    (flat.dtype in (torch.float32, torch.int32) or
                     not avg) and \
                    out.dtype == flat.dtype:
                fn(flat, out, mean=avg)
                return out
            self._say("reduce_scatter", logging.INFO, "through a tally "
                      "allreduce of the whole tensor (this context has "
                      "no reduce_scatter yet)")
            self._sum(flat, avg)
        r = self._rank
        out.copy_(flat[r * n:(r + 1) * n].view_as(out))
        return out

    def _allgather(self, inp, outs, whole=None):
        """outs[r] = rank r's inp, for every r. whole: the contiguous
        tensor outs are views of (all_gather_into_tensor), for
        Context.allgather(inp, whole) when the context has it; else
        gloo's allgather (bfloat16 and other dtypes gloo lacks moved as
        bytes)."""
        fn = getattr(self.ctx, "allgather", None)
        if inp.numel() == 0:
            return
        src = self._movable(inp) if fn is not None else None
        if src is not None:
            dst = self._movable(whole, src.dtype) \
                if whole is not None else None
            if dst is None:
                buf = torch.empty((self._world, src.numel()),
                                  dtype=src.dtype)
                fn(src, buf)
                for r, o in enumerate(outs):
                    o.copy_(buf[r].view(inp.dtype).view_as(o))
            else:
                fn(src, dst)
            return
        self._say("allgather", logging.INFO, "through the inner gloo "
                  "group (this context has no allgather yet)")
        src = inp.contiguous()
        dst = [o if o.is_contiguous() else o.contiguous() for o in outs]
        w = self.gloo.allgather([[_bytes(o) for o in dst]], [_bytes(src)])
        w.wait()
        for o, d in zip(outs, dst):
            if o is not d:
                o.copy_(d)

    def _broadcast(self, t, root):
        """t = root's t on every rank: Context.broadcast(t, root) when the
        context has it; else gloo's broadcast (bfloat16 and other dtypes
        gloo lacks moved as bytes)."""
        fn = getattr(self.ctx, "broadcast", None)
        if t.numel() == 0:
            return
        w = self._movable(t) if fn is not None else None
        if w is not None:
            fn(w, root)
            return
        self._say("broadcast", logging.INFO, "through the inner gloo "
                  "group (this context has no broadcast yet)")
        x = t if t.is_contiguous() else t.contiguous()
        opts = dist.BroadcastOptions()
        opts.rootRank = root
        w = self.gloo.broadcast([_bytes(x)], opts)
        w.wait()
        if x is not t:
            t.copy_(x)

    # -- handed to gloo --

    def reduce(self, tensors, opts):
        return self._gloo("reduce", self.gloo.reduce, tensors, opts)

    def gather(self, outputs, inputs, opts):
        return self._gloo("gather", self.gloo.gather, outputs, inputs, opts)

    def scatter(self, outputs, inputs, opts):
        return self._gloo("scatter", self.gloo.scatter, outputs, inputs,
                          opts)

    def alltoall(self, outputs, inputs, opts):
        return self._gloo("alltoall", self.gloo.alltoall, outputs, inputs,
                          opts)

    def alltoall_base(self, output, input, output_split_sizes,
                      input_split_sizes, opts):
        return self._gloo("alltoall", self.gloo.alltoall_base, output,
                          input, output_split_sizes, input_split_sizes,
                          opts)

    def allgather_coalesced(self, output_lists, inputs, opts=None):
        return self._gloo("allgather_coalesced",
                          self.gloo.allgather_coalesced, output_lists,
                          inputs, opts)

    def monitored_barrier(self, *args, **kw):
        self._say("monitored_barrier", logging.WARNING, "handed to the "
                  "inner gloo group")
        return self.gloo.monitored_barrier(*args, **kw)

    # Point to point: gloo's own work objects, not queued behind the
    # collectives (a send waiting for its receiver would block them).
    def send(self, tensors, dst, tag):
        self._say("send", logging.WARNING, "point to point goes to the "
                  "inner gloo group")
        self.routes["gloo send"] += 1
        return self.gloo.send(tensors, dst, tag)

    def recv(self, tensors, src, tag):
        self._say("recv", logging.WARNING, "point to point goes to the "
                  "inner gloo group")
        self.routes["gloo recv"] += 1
        return self.gloo.recv(tensors, src, tag)

    def recv_anysource(self, tensors, tag):
        self._say("recv", logging.WARNING, "point to point goes to the "
                  "inner gloo group")
        self.routes["gloo recv"] += 1
        return self.gloo.recv_anysource(tensors, tag)


_OPS = {}


def _op_name(op):
    """ReduceOp's name in words (max, min, product, ...)."""
    if not _OPS:
        for n in ("SUM", "AVG", "PRODUCT", "MIN", "MAX", "BAND", "BOR",
                  "BXOR", "PREMUL_SUM"):
            if hasattr(ReduceOp, n):
                _OPS[n.lower()] = getattr(ReduceOp, n)
    for n, o in _OPS.items():
        try:
            if op == o:
                return n
        except TypeError:
            pass
    return str(op)


def _reduce_op(opts):
    return ReduceOp.SUM if opts is None else opts.reduceOp


def _allreduce_opts(op):
    o = dist.AllreduceOptions()
    o.reduceOp = op
    return o


def _chunks(output, world, n):
    """all_gather_into_tensor's output as world views of n elements."""
    if n:
        return list(output.reshape(-1).chunk(world))
    return [output.reshape(-1)[:0]] * world


def _bytes(t):
    """t's memory as gloo moves it: bfloat16 (which gloo refuses) as
    its bytes; other dtypes as they are. t is contiguous."""
    if t.dtype in (torch.bfloat16, torch.int16, torch.bool):
        return t.reshape(-1).view(torch.uint8)
    return t


def _create(backend_opts, pg_options):
    """register_backend's factory (extended API): the group from
    init_process_group's store, rank, size and timeout, and its
    pg_options (Options or a dict)."""
    return ProcessGroupTally(backend_opts.store, backend_opts.group_rank,
                             backend_opts.group_size, backend_opts.timeout,
                             pg_options)


def register():
    """Registers the backend "tally" with torch.distributed (once; again
    is a no-op)."""
    if NAME.upper() in dist.Backend._plugins:
        return
    try:  # torch 2 asks which devices a backend takes
        dist.Backend.register_backend(NAME, _create, extended_api=True,
                                      devices=["cpu", "cuda"])
    except TypeError:  # torch 1.13: no devices argument
        dist.Backend.register_backend(NAME, _create, extended_api=True)


register()

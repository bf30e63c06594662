# SPDX-License-Identifier: BSD-3-Clause
"""tally.torch: a PyTorch DDP communication hook that reduces gradients
through tally::

    ctx = tally.open(url, token, rank, world)
    ddp.register_comm_hook(tally.torch.HookState(ctx),
                           tally.torch.allreduce_hook)

The hook hands each gradient bucket to one background thread and returns
a torch.futures.Future at once, so the allreduce of bucket i (in libtally,
with the GIL released) overlaps the backward pass that fills bucket i+1.
The thread takes buckets in the order DDP hands them over, which is the
same on every rank, so every rank issues the same sequence of allreduces.
Like DDP's default hook it averages: the bucket times 1/world (a product,
never a division: torch divides a CPU tensor by a scalar exactly but a
CUDA one by multiplying with the reciprocal, and only the product gives
the same bits on both). A host bucket is averaged inside libtally
(tally_allreduce_mean): with fixp and a world of a power of two the
division is folded into the decoding of the sums, with no pass over the
bucket of its own; otherwise libtally multiplies first.

For a codec with memory (error feedback, DGC momentum, 2bit, PowerSGD)
each bucket has its own tally.State, keyed by the bucket's index. DDP
rebuilds its buckets once, after the first iteration, in the order the
gradients became ready; a bucket index whose parameters or length
changed then gets a fresh State (counted in HookState.rebuilt), and the
states made from then on are kept for the rest of the run. DDP reduces
its buckets in index order, so bucket 0 starts an iteration: the States
of indexes the last iteration did not use (a rebuild that made fewer
buckets) are dropped then (HookState.dropped). torch's own
PowerSGD hook loses the same first-iteration memory (it starts at
start_powerSGD_iter >= 2 for that reason).

A powersgd job compresses each weight matrix as itself (per_matrix,
on by default for powersgd), as torch's PowerSGD hook does: the bucket
is split into its parameters' gradients (views of the bucket, never
copied), each gradient of two or more dimensions, viewed as (shape[0],
rest), has its own tally.State of that many rows (keyed by the
parameter, so it survives DDP's bucket rebuild), and the tensors not
worth compressing (biases, and matrices where (rows + cols) x rank x 2
>= rows x cols, torch's rule) are averaged dense in fixed point, in one
call: gathered into one buffer (a copy of those few elements) unless
there is only one. The first start_iter iterations (2 by default,
torch's start_powerSGD_iter in tools/bench-training) send every bucket
dense. Every rank makes the same calls in the same order (DDP's
buckets and their parameters are the same on every rank).

CUDA buckets go through libtally's GPU path (tally_allreduce_cuda: the
codec encodes on the GPU into pinned staging, no host copy), on the CUDA
stream that was current when DDP called the hook (the one backward
filled the bucket on): the thread divides and reduces on that stream,
with the bucket's device current, and the future (made for that device)
is completed there, so DDP's later work waits for the sums. Their codec
memory is a State in GPU memory. ctx.info()["cuda_tensors"] says what a
CUDA bucket meets; without libtally's CUDA path it is refused.

Any error (of libtally, of tallyd, a closed context, a CUDA tensor
without libtally's CUDA path) completes the bucket's future with the
exception; the hook never hangs. DDP (C++) cannot take a Python
exception as a future's result (torch 1.13's Future.set_exception
stores it as the value, and DDP would fail to cast it to a tensor), so
allreduce_hook hands DDP a future chained by Future.then, which fails
with the error itself: backward() raises a RuntimeError whose text is
the tally.Error's, "[Errno N] <libtally's or tallyd's sentence>", and
HookState.last_error is that tally.Error (errno, strerror).
Only the hook may use the context while backward runs.

Importing this module also registers the torch.distributed backend
"tally" (tally.backend): dist.init_process_group("tally") reduces
through tally without a hook.
"""
import errno
import queue
import re
import threading
import time

import torch

import tally
import tally.backend  # noqa: F401 (registers the backend "tally")

__all__ = ["HookState", "allreduce_hook"]


class HookState:
    """What allreduce_hook needs: the context, the background thread and
    the codec memory of each bucket.

    HookState(ctx, *, divide=True, memory=None, name="tally-hook",
              per_matrix=None, start_iter=None, min_compression_rate=2,
              timeline=False):
    ctx is an open tally.Context; divide: divide each bucket by the
    world size (the average, as DDP's default hook); memory: keep a
    tally.State per bucket (None: when the job's codec has memory, from
    ctx.info()); name: the thread's name. per_matrix (powersgd jobs
    only; None: on for them): a State per weight matrix with the
    matrix's own rows, the rest dense (the module's text says how);
    min_compression_rate: a matrix is compressed when rows x cols
    exceeds (rows + cols) x rank x that (torch's rule and default);
    start_iter: iterations (counted by the bucket marked is_last) sent
    dense before the codec starts (None: 2 with per_matrix, else 0);
    timeline: keep, for every bucket reduced, (start, seconds, elements)
    in the list timeline: start is time.time() when the thread took the
    bucket (comparable across ranks whose clocks agree, as on one
    host), seconds its reduction (with the wait for the other ranks),
    elements the bucket's length; a bucket whose reduction failed is
    not kept. The list grows by one tuple a bucket: for diagnosis runs.

    Counters: buckets (reduced), errors (futures completed with an
    exception; last_error is the latest exception), rebuilt (States made
    afresh because a bucket index changed its parameters or length),
    dropped (States of bucket indexes an iteration no longer used);
    with per_matrix: matrices (the per-matrix States, by parameter),
    compressed (matrix allreduces), dense_calls (allreduces of the dense
    rest), and for every mode iters (iterations seen) and dense_buckets
    (buckets sent dense in the first start_iter iterations);
    times: cpu_s (the thread's CPU seconds on buckets) and reduce_s
    (seconds in libtally's allreduce). close() stops the thread.
    """

    def __init__(self, ctx, *, divide=True, memory=None, name="tally-hook",
                 per_matrix=None, start_iter=None, min_compression_rate=2,
                 timeline=False):
        info = ctx.info()
        self.ctx = ctx
        self.world = info["world"]
        self.divide = bool(divide)
        self.memory = info["codec_memory"] if memory is None else bool(memory)
        psgd = info["codec_name"] == "powersgd"
        if per_matrix and not psgd:
            raise ValueError("tally: per_matrix is for powersgd jobs, not "
                             "codec %s" % info["codec"])
        self.per_matrix = psgd if per_matrix is None else bool(per_matrix)
        m = re.search(r"(?:^|,)rank=(\d+)", info["codec"])
        self.rank = int(m.group(1)) if m else 4
        self.min_compression_rate = float(min_compression_rate)
        if start_iter is None:
            start_iter = 2 if self.per_matrix else 0
        if int(start_iter) < 0:
            raise ValueError("tally: start_iter is 0 or more, not %r"
                             % (start_iter,))
        self.start_iter = int(start_iter)
        self.iters = 0
        self.dense_buckets = 0
        self.matrices = {}
        self.compressed = 0
        self.dense_calls = 0
        self._mseen = set()
        self.name = name
        self.states = {}
        self.buckets = 0
        self.errors = 0
        self.last_error = None
        self.rebuilt = 0
        self.dropped = 0
        self.cpu_s = 0.0
        self.reduce_s = 0.0
        self.timeline = [] if timeline else None
        self._keys = {}
        self._seen = set()
        self._queue = queue.SimpleQueue()
        self._thread = None
        self._lock = threading.Lock()
        self._closed = False

    def submit(self, index, key, tensor, plan=None):
        """Queues tensor, bucket number index (whose layout key
        identifies), for the background thread; returns the Future that
        thread completes with the tensor reduced in place, or with the
        exception (its wait() raises it; DDP needs allreduce_hook's
        chained future instead). plan: how the tensor goes
        (allreduce_hook's _plan(): dense, or per matrix); None: the
        bucket as one tensor through the job's codec. A CUDA
        tensor's future is made for its device, and the thread works on
        the stream current now (the caller's)."""
        stream = None
        if tensor.device.type == "cuda" and tally.HAVE_CUDA:
            stream = torch.cuda.current_stream(tensor.device)
            fut = torch.futures.Future(devices=[tensor.device])
        else:
            fut = torch.futures.Future()
        with self._lock:
            if self._closed:
                self.errors += 1
                self.last_error = tally.Error(errno.EBADF,
                                              "the hook state is closed")
                fut.set_exception(self.last_error)
                return fut
            if self._thread is None:
                self._thread = threading.Thread(target=self._run,
                                                name=self.name, daemon=True)
                self._thread.start()
            self._queue.put((index, key, tensor, stream, fut, plan))
        return fut

    def close(self):
        """Stops the background thread after the buckets already queued.
        Does not close the context."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            thread = self._thread
            self._queue.put(None)
        if thread is not None:
            thread.join()

    def _state(self, index, key, t):
        """The bucket's State (in GPU memory for a CUDA bucket): kept
        while its layout key stays, made afresh when DDP's rebuild
        changed it. Bucket 0 starts an iteration: States of indexes the
        last one did not use are dropped."""
        if index == 0 and self._seen:
            for i in [i for i in self.states if i not in self._seen]:
                del self.states[i], self._keys[i]
                self.dropped += 1
            self._seen.clear()
        self._seen.add(index)
        if self._keys.get(index) != key:
            if index in self.states:
                self.rebuilt += 1
            self.states[index] = tally.State(self.ctx, t)
            self._keys[index] = key
        return self.states[index]

    def _matrix(self, key, g, rows):
        """The State of the weight matrix whose gradient is g (rows rows):
        kept while its parameter (key) is there, made on first use;
        matrices no iteration used since the last bucket 0 are dropped
        at the next one."""
        st = self.matrices.get(key)
        if st is None:
            st = self.matrices[key] = tally.State(self.ctx, g, rows=rows)
        self._mseen.add(key)
        return st

    def _drop_matrices(self):
        """Bucket 0 starts an iteration: the States of matrices the last
        one did not reduce go."""
        if self._mseen:
            for k in [k for k in self.matrices if k not in self._mseen]:
                del self.matrices[k]
                self.dropped += 1
            self._mseen.clear()

    def _per_matrix(self, index, t, stream, plan):
        """Bucket t by its parameters: the dense rest in one fixed-point
        call, then each matrix with its own State, in place."""
        _, mats, rest = plan
        if index == 0:
            self._drop_matrices()
        if rest:
            flat = rest[0].view(-1) if len(rest) == 1 else \
                torch.cat([g.view(-1) for g in rest])
            self.ctx.allreduce(flat, stream=stream, mean=self.divide,
                               dense=True)
            if len(rest) > 1:
                off = 0
                for g in rest:
                    g.view(-1).copy_(flat[off:off + g.numel()])
                    off += g.numel()
            self.dense_calls += 1
        for key, g, rows in mats:
            st = self._matrix(key, g, rows)
            self.ctx.allreduce(g.view(-1), state=st, stream=stream,
                               mean=self.divide)
            self.compressed += 1
        return t

    def _reduce(self, index, key, t, stream, plan=None):
        """The average of bucket t over the ranks, in place; a CUDA
        bucket on stream; plan: allreduce_hook's _plan()."""
        if t.device.type == "cuda" and not tally.HAVE_CUDA:
            # ctx.allreduce says the same; said here before dividing.
            return self.ctx.allreduce(t)
        if plan is not None:
            t0 = time.perf_counter()
            try:
                if plan[0] == "dense":
                    self.dense_buckets += 1
                    return self.ctx.allreduce(t, stream=stream,
                                              mean=self.divide, dense=True)
                return self._per_matrix(index, t, stream, plan)
            finally:
                self.reduce_s += time.perf_counter() - t0
        st = self._state(index, key, t) if self.memory else None
        t0 = time.perf_counter()
        self.ctx.allreduce(t, state=st, stream=stream, mean=self.divide)
        self.reduce_s += time.perf_counter() - t0
        return t

    def _run(self):
        """The background thread: buckets in order until close()."""
        while True:
            item = self._queue.get()
            if item is None:
                return
            index, key, t, stream, fut, plan = item
            if stream is None:
                self._complete(index, key, t, None, fut, plan)
                continue
            # The caller's device and stream: the division, the codec's
            # kernels and the future's completion event all go there.
            with torch.cuda.device(t.device), torch.cuda.stream(stream):
                self._complete(index, key, t, stream, fut, plan)

    def _complete(self, index, key, t, stream, fut, plan=None):
        """Reduces bucket t and completes its future, with the result
        or the exception."""
        c0 = time.thread_time()
        w0, t0 = time.time(), time.perf_counter()
        try:
            self._reduce(index, key, t, stream, plan)
        except Exception as e:  # completes the future, never hangs
            self.errors += 1
            self.last_error = e
            fut.set_exception(e)
            return
        finally:
            self.cpu_s += time.thread_time() - c0
        if self.timeline is not None:
            self.timeline.append((w0, time.perf_counter() - t0, t.numel()))
        self.buckets += 1
        fut.set_result(t)


def _layout(bucket):
    """A bucket's layout: its length and its parameters (their storage and
    sizes), which DDP's bucket rebuild may change under the same index."""
    return (bucket.buffer().numel(),
            tuple((p.data_ptr(), p.numel()) for p in bucket.parameters()))


def _gradients(bucket):
    """The bucket's per-parameter gradients, views of its buffer (torch's
    GradBucket.gradients(); for an object without it, cut from the
    buffer by its parameters' sizes, DDP's layout)."""
    if hasattr(bucket, "gradients"):
        return bucket.gradients()
    buf, off, out = bucket.buffer(), 0, []
    for p in bucket.parameters():
        out.append(buf[off:off + p.numel()].view(p.shape))
        off += p.numel()
    return out


def _plan(state, bucket):
    """How the bucket goes: ("dense",) in the first start_iter
    iterations; with per_matrix ("matrices", [(key, view, rows)], [rest]):
    each gradient of two or more dimensions worth compressing (torch's
    rule: rows x cols > (rows + cols) x min(rows, cols, rank) x
    min_compression_rate) with its own rows, keyed by its parameter; the
    rest (biases) dense. None: the bucket through the job's codec.
    Counts iterations by the bucket marked is_last."""
    dense = state.iters < state.start_iter
    last = getattr(bucket, "is_last", None)
    if last is not None and last():
        state.iters += 1
    if dense:
        return ("dense",)
    if not state.per_matrix:
        return None
    mats, rest = [], []
    for p, g in zip(bucket.parameters(), _gradients(bucket)):
        rows = g.shape[0] if g.dim() >= 2 else 0
        cols = g.numel() // rows if rows else 0
        r = min(rows, cols, state.rank)
        if rows and rows * cols > (rows + cols) * r * \
                state.min_compression_rate:
            mats.append(((p.data_ptr(), tuple(p.shape)), g, rows))
        else:
            rest.append(g)
    return ("matrices", mats, rest)


def _unwrap(fut):
    """The bucket's reduced tensor, or the bucket's exception raised: as a
    Future.then callback it turns a future completed by set_exception
    (whose C++ value is the exception object) into one that failed."""
    return fut.value()


def allreduce_hook(state, bucket):
    """DDP communication hook: the average of the bucket over the ranks,
    through tally. Register with
    ddp.register_comm_hook(HookState(ctx), allreduce_hook).
    Returns at once a Future that the background thread completes; on an
    error it fails, and DDP raises a RuntimeError with the tally.Error's
    "[Errno N] sentence" from backward()."""
    plan = _plan(state, bucket)
    fut = state.submit(bucket.index(), _layout(bucket), bucket.buffer(),
                       plan)
    return fut.then(_unwrap)

#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
#
# ddp_train.py: one rank of tools/bench-training. Trains a wide MLP on
# sklearn's bundled digits with DistributedDataParallel over a gloo
# process group, its gradients reduced by one of:
#
#   gloo      DDP's own allreduce (fp32)
#   fp16      torch's fp16_compress_hook
#   powersgd  torch's PowerSGD hook (rank 4, error feedback, warm start,
#             start_powerSGD_iter 2, torch's defaults otherwise); one
#             DDP bucket (the hook deadlocks on gloo with two)
#   tally     tally.torch.allreduce_hook on a tally job (--url; the token
#             in TALLY_TOKEN): the job's codec decides what is sent
#   tally-backend  no hook: the process group itself is tally's
#             (init_process_group("tally"), the job from --url and
#             TALLY_TOKEN); DDP's default allreduce goes through tally,
#             its start (broadcast, allgather) through the group's gloo
#   tally-sharded  no DDP: the same tally process group, gradients
#             reduce-scattered in bfloat16 (reduce_scatter_tensor, avg),
#             each rank steps SGD on its shard of the float32
#             parameters, which all_gather_into_tensor puts together
#             again (ZeRO's pattern, what FSDP would do)
#
# Same seed, same data: the split is fixed, the seed draws the initial
# weights and every epoch's order of the training set, so rows of one
# seed differ only in how gradients were reduced. Every rank prints
# "progress:" lines (rank 0's reach the driver's terminal) and rank 0
# ends with one JSON object: per epoch the slowest rank's training
# seconds (evaluation excluded), the test accuracy, the mean training
# loss; CPU seconds of every rank. See docs/tools/bench-training.md.
#
#   GLOO_SOCKET_IFNAME=eth0 /usr/bin/python3 ddp_train.py \
#       --master 10.77.0.11:29500 --rank R --world W --comm gloo --seed 1
#
# Debian's python3-torch belongs to /usr/bin/python3, hence the #! line.
# A rank can hang in the gloo group's destructor at exit: it flushes and
# leaves with os._exit.
import argparse
import datetime
import json
import os
import resource
import sys
import time

COMMS = ("gloo", "fp16", "powersgd", "tally", "tally-backend",
         "tally-sharded")
TALLY = ("tally", "tally-backend", "tally-sharded")


def parse_args(argv):
    """The command line; errors exit 2 with the usage (argparse)."""
    ap = argparse.ArgumentParser(
        prog="ddp_train.py",
        description="one rank of the DDP training benchmark on digits")
    ap.add_argument("--master", required=True,
                    help="rank 0's IP:PORT (gloo's TCP rendezvous)")
    ap.add_argument("--rank", type=int, required=True)
    ap.add_argument("--world", type=int, required=True)
    ap.add_argument("--comm", choices=COMMS, required=True,
                    help="how gradients are reduced")
    ap.add_argument("--url", help="tally: the job's tally:// URL")
    ap.add_argument("--label", help="the row's name in progress lines "
                    "(default: --comm)")
    ap.add_argument("--seed", type=int, default=1,
                    help="initial weights and data order (default 1)")
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--batch", type=int, default=32,
                    help="samples a rank a step (default 32)")
    ap.add_argument("--lr", type=float, default=0.05,
                    help="SGD learning rate, cosine-annealed to 0 over "
                    "the epochs (default 0.05; momentum 0.9)")
    ap.add_argument("--hidden", type=int, default=2048,
                    help="width of the two hidden layers (default 2048: "
                    "4.35 M parameters)")
    ap.add_argument("--target", type=float, default=95.0,
                    help="test accuracy (%%) whose time is reported")
    ap.add_argument("--one-bucket", action="store_true",
                    help="all gradients in one DDP bucket (forced for "
                    "powersgd)")
    ap.add_argument("--grad-views", action="store_true",
                    help="DDP(gradient_as_bucket_view=True): gradients "
                    "are views of DDP's buckets, never copied in or out")
    ap.add_argument("--timeout", type=float, default=300,
                    help="seconds a gloo collective may take")
    a = ap.parse_args(argv)
    if not 1 <= a.world <= 64:
        ap.error(f"--world {a.world} is not 1..64")
    if not 0 <= a.rank < a.world:
        ap.error(f"--rank {a.rank} is not in 0..{a.world - 1}")
    if a.epochs < 1 or a.batch < 1 or a.hidden < 1:
        ap.error("--epochs, --batch and --hidden must be positive")
    if not a.lr > 0:
        ap.error("--lr must be positive")
    if (a.comm in TALLY) != (a.url is not None):
        ap.error("--url is needed with --comm tally, and only there")
    if a.comm in TALLY and not os.environ.get("TALLY_TOKEN"):
        ap.error("--comm tally: put the job's token in TALLY_TOKEN")
    if ":" not in a.master:
        ap.error(f"--master '{a.master}' is not IP:PORT")
    return a


def load_data(torch, rank, world):
    """Digits, 80/20 split (stratified, fixed), standardized with the
    training set's statistics. Returns (xtr, ytr, xte, yte) as tensors;
    the test set is this rank's share (every world-th sample)."""
    import numpy as np
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split
    d = load_digits()
    x = d.data.astype(np.float32) / 16.0
    xtr, xte, ytr, yte = train_test_split(
        x, d.target, test_size=0.2, random_state=0, stratify=d.target)
    mu, sd = xtr.mean(0), xtr.std(0) + 1e-6
    xtr = torch.from_numpy((xtr - mu) / sd)
    xte = torch.from_numpy((xte - mu) / sd)[rank::world].contiguous()
    return (xtr, torch.from_numpy(ytr), xte,
            torch.from_numpy(yte)[rank::world].contiguous())


def make_model(torch, hidden, seed):
    """64 -> hidden -> hidden -> 10, ReLU; weights drawn from seed."""
    nn = torch.nn
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(64, hidden), nn.ReLU(),
                         nn.Linear(hidden, hidden), nn.ReLU(),
                         nn.Linear(hidden, 10))


def wrap(torch, dist, a, model):
    """The DDP model with a's reduction registered. Returns (ddp, ctx):
    ctx is the tally context (None for the torch rows), kept alive by
    the caller for the run."""
    from torch.nn.parallel import DistributedDataParallel as DDP
    if a.comm == "tally-sharded":
        return Plain(model), dist.group.WORLD.ctx
    kw = {}
    if a.grad_views:
        kw["gradient_as_bucket_view"] = True
    if a.one_bucket or a.comm == "powersgd":
        # DDP puts its first bucket at _DEFAULT_FIRST_BUCKET_BYTES (1 MiB)
        # and later ones at bucket_cap_mb; both read at construction.
        dist._DEFAULT_FIRST_BUCKET_BYTES = 1 << 40
        kw["bucket_cap_mb"] = 1 << 20
    ddp = DDP(model, **kw)
    ctx = None
    if a.comm == "tally-backend":
        ctx = dist.group.WORLD.ctx  # the group's own, for its counters
    if a.comm == "fp16":
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
        ddp.register_comm_hook(None, default_hooks.fp16_compress_hook)
    elif a.comm == "powersgd":
        from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook
        st = powerSGD_hook.PowerSGDState(
            process_group=None, matrix_approximation_rank=4,
            start_powerSGD_iter=2, use_error_feedback=True, warm_start=True)
        ddp.register_comm_hook(st, powerSGD_hook.powerSGD_hook)
    elif a.comm == "tally":
        import tally
        import tally.torch
        ctx = tally.open(a.url, os.environ["TALLY_TOKEN"], a.rank, a.world)
        # timeline: each bucket's start and seconds, for the report's
        # "where a step goes" line.
        ddp.tally_hook = tally.torch.HookState(ctx, timeline=True)
        ddp.register_comm_hook(ddp.tally_hook, tally.torch.allreduce_hook)
    return ddp, ctx


class Plain:
    """A model without DDP, with what train() and evaluate() use of a
    DDP one (tally-sharded reduces in its optimizer instead)."""

    def __init__(self, model):
        self.module = model

    def __call__(self, x):
        return self.module(x)

    def parameters(self):
        return self.module.parameters()


class Sharded:
    """Sharded data parallelism by hand: SGD with momentum 0.9 on this
    rank's 1/world of the flat float32 parameters. A step
    reduce-scatters the flat gradient in bfloat16 (the average), steps
    the shard, and all-gathers the parameters (float32). inner: the
    shard's torch optimizer (for the LR schedule)."""

    def __init__(self, torch, dist, params, lr):
        self.torch, self.dist, self.params = torch, dist, params
        w, r = dist.get_world_size(), dist.get_rank()
        self.n = sum(p.numel() for p in params)
        self.k = -(-self.n // w)  # shard length; the last one padded
        flat = torch.zeros(self.k * w)
        flat[:self.n] = torch.cat([p.detach().flatten() for p in params])
        self.shard = torch.nn.Parameter(flat[r * self.k:(r + 1) * self.k]
                                        .clone())
        self.inner = torch.optim.SGD([self.shard], lr=lr, momentum=0.9)
        self.whole = torch.zeros(self.k * w)
        self.grads = torch.zeros(self.k * w, dtype=torch.bfloat16)

    def zero_grad(self, set_to_none=True):
        for p in self.params:
            p.grad = None

    def step(self):
        torch, dist = self.torch, self.dist
        g = torch.cat([p.grad.flatten() for p in self.params])
        self.grads[:self.n].copy_(g)
        out = torch.empty(self.k, dtype=torch.bfloat16)
        dist.reduce_scatter_tensor(out, self.grads, op=dist.ReduceOp.AVG)
        self.shard.grad = out.float()
        self.inner.step()
        dist.all_gather_into_tensor(self.whole, self.shard.detach())
        torch.nn.utils.vector_to_parameters(self.whole[:self.n],
                                            self.params)


def cpu_seconds():
    """User + system CPU seconds of this process, all its threads."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def evaluate(torch, dist, ddp, xte, yte):
    """Test accuracy (%) over every rank's share, summed through gloo."""
    with torch.no_grad():
        pred = ddp.module(xte).argmax(1)
    c = torch.tensor([float((pred == yte).sum()), float(len(yte))],
                     dtype=torch.float64)
    dist.all_reduce(c)
    return 100.0 * float(c[0]) / float(c[1])


def train(torch, dist, a, ddp, data):
    """Runs the epochs. Returns per-epoch lists: this rank's training
    seconds, the test accuracy, the mean training loss (over ranks)."""
    xtr, ytr, xte, yte = data
    if a.comm == "tally-sharded":
        opt = Sharded(torch, dist, list(ddp.parameters()), a.lr)
        sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt.inner,
                                                           a.epochs)
    else:
        opt = torch.optim.SGD(ddp.parameters(), lr=a.lr, momentum=0.9)
        sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, a.epochs)
    per_rank = len(xtr) // a.world // a.batch * a.batch
    secs, accs, losses = [], [], []
    for ep in range(a.epochs):
        g = torch.Generator()
        g.manual_seed(a.seed * 1000 + ep)
        mine = torch.randperm(len(xtr), generator=g)[a.rank::a.world]
        mine = mine[:per_rank]
        dist.barrier()
        t0 = time.perf_counter()
        tot = 0.0
        for i in range(0, per_rank, a.batch):
            idx = mine[i:i + a.batch]
            opt.zero_grad(set_to_none=True)
            loss = torch.nn.functional.cross_entropy(ddp(xtr[idx]), ytr[idx])
            loss.backward()
            opt.step()
            tot += float(loss)
        secs.append(time.perf_counter() - t0)
        sched.step()
        lt = torch.tensor([tot / (per_rank // a.batch)], dtype=torch.float64)
        dist.all_reduce(lt)
        losses.append(float(lt[0]) / a.world)
        accs.append(evaluate(torch, dist, ddp, xte, yte))
        print(f"progress: {a.label or a.comm} seed {a.seed} epoch {ep + 1}/{a.epochs}: "
              f"{secs[-1]:.2f} s, loss {losses[-1]:.4f}, "
              f"test {accs[-1]:.2f}%", file=sys.stderr, flush=True)
    return secs, accs, losses


def run(a):
    """Sets up the group, the model and the hook, trains, and has rank 0
    print the JSON result. Returns the exit status."""
    import torch
    import torch.distributed as dist
    torch.set_num_threads(1)
    backend = "gloo"
    if a.comm in ("tally-backend", "tally-sharded"):
        import tally.torch  # noqa: F401 (registers the backend "tally")
        os.environ["TALLY_URL"] = a.url
        backend = "tally"
    dist.init_process_group(
        backend, init_method=f"tcp://{a.master}", rank=a.rank,
        world_size=a.world, timeout=datetime.timedelta(seconds=a.timeout))
    data = load_data(torch, a.rank, a.world)
    model = make_model(torch, a.hidden, a.seed)
    nparams = sum(p.numel() for p in model.parameters())
    ddp, ctx = wrap(torch, dist, a, model)
    c0 = cpu_seconds()
    secs, accs, losses = train(torch, dist, a, ddp, data)
    cpu = cpu_seconds() - c0
    # The slowest rank's time of each epoch; every rank's CPU seconds.
    t = torch.tensor(secs, dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    cpus = [torch.zeros(1, dtype=torch.float64) for _ in range(a.world)]
    dist.all_gather(cpus, torch.tensor([cpu], dtype=torch.float64))
    # The hook's timeline of every rank (same on all: a tally hook row).
    hs = getattr(ddp, "tally_hook", None)
    lines = None
    if hs is not None and hs.timeline is not None:
        lines = [None] * a.world
        dist.all_gather_object(lines, [[round(w, 6), round(d, 6), n]
                                       for w, d, n in hs.timeline])
    # DDP's buckets as they ended up (it rebuilds them once, after the
    # first iteration, in the order the gradients became ready): bytes.
    buckets = None
    try:
        ld = ddp._get_ddp_logging_data()
        sizes = ld.get("rebuilt_bucket_sizes") or ld.get("bucket_sizes")
        buckets = [int(x) for x in str(sizes).split(",")]
    except (AttributeError, RuntimeError, ValueError):
        pass
    if a.rank == 0:
        out = {"comm": a.comm, "seed": a.seed, "world": a.world,
               "epochs": a.epochs, "batch": a.batch, "lr": a.lr,
               "params": nparams, "buckets": buckets,
               "torch": torch.__version__,
               "epoch_s": [round(x, 4) for x in t.tolist()],
               "acc": [round(x, 3) for x in accs],
               "loss": [round(x, 5) for x in losses],
               "cpu_s": [round(float(c), 2) for c in cpus]}
        if ctx is not None:
            try:
                out["tally_info"] = ctx.info()
                out["tally_stats"] = ctx.stats()
                if a.comm in ("tally-backend", "tally-sharded"):
                    out["tally_routes"] = dict(dist.group.WORLD.routes)
                # The hook thread's CPU seconds and those in libtally
                # (rank 0's; older packages lack them).
                out["tally_hook"] = {k: getattr(hs, k, None) for k in (
                    "buckets", "errors", "rebuilt", "cpu_s", "reduce_s")}
            except Exception as e:  # diagnostics only
                out["tally_info_error"] = str(e)
        if lines is not None:
            out["tally_timeline"] = lines
        print(json.dumps(out, default=str), flush=True)
    dist.barrier()
    return 0


def main():
    a = parse_args(sys.argv[1:])
    try:
        rc = run(a)
    except Exception as e:
        print(f"ddp_train.py: rank {a.rank}: {type(e).__name__}: {e}",
              file=sys.stderr, flush=True)
        rc = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(rc)


if __name__ == "__main__":
    main()

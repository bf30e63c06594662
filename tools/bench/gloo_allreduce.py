#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
#
# gloo_allreduce.py: the PyTorch gloo baseline of tools/bench-allreduce.
# One rank of torch.distributed.all_reduce (backend gloo, sum) of a
# float32 tensor: one untimed warm-up, then --iters timed calls, each
# after a barrier. An iteration's time is the longest of any rank's (the
# ranks' times are gathered), as tally's row takes the slowest worker's.
# Rank 0 checks a few elements of the result and prints one JSON object.
# CPU of each timed call: the ranks' own CPU seconds (every thread of the
# process, gloo's included), summed over the ranks, and the machine's
# busy and total /proc/stat ticks around rank 0's call.
#
#   GLOO_SOCKET_IFNAME=eth0 /usr/bin/python3 gloo_allreduce.py \
#       --master 10.77.0.12:29500 --rank R --world W --size BYTES --iters N
#
# --dtype bf16: the tensor is bfloat16 (--size its bytes), which torch
# 1.13's gloo cannot allreduce ("Invalid scalar type"): each timed call
# does what a gloo user must, upcast to float32, allreduce, and copy the
# sums back into the bfloat16 tensor. --dtype f16: a float16 tensor,
# which gloo sums as it is.
#
# --op picks another collective and gloo's nearest equivalent (gloo in
# torch 1.13 has no reduce-scatter): reduce_scatter is all_reduce of the
# whole tensor, then this rank's shard copied out (what users do on gloo
# today); allgather is all_gather of each rank's shard into a list of
# tensors (gloo has no all_gather_into_tensor here); broadcast from rank
# 0. --size is the tensor a rank sends (reduce_scatter) or gets
# (allgather), as tally-bench allreduce --op takes it. f32 only.
#
# Debian's python3-torch belongs to /usr/bin/python3, hence the #! line.
import argparse
import datetime
import json
import sys
import time

import torch
import torch.distributed as dist


def parse_size(s):
    """'64M', '1G', '4096' (powers of 1024) to bytes."""
    mul = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    s = s.strip().upper().removesuffix("IB").removesuffix("B")
    if s and s[-1] in mul:
        return int(s[:-1]) * mul[s[-1]]
    return int(s)


def fill(x, rank):
    """Rank's tensor: small integers, so every sum is exact in f32."""
    n = x.numel()
    i = torch.arange(n, dtype=torch.int64)
    x.copy_(((i * 7 + rank * 13) % 17 - 8).to(x.dtype))


def host_ticks():
    """The machine's (busy, total) ticks: /proc/stat's cpu line, busy
    being all but idle and iowait."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:9]]
    busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7]
    return busy, busy + v[3] + v[4]


def expected(idx, world):
    return float(sum((idx * 7 + r * 13) % 17 - 8 for r in range(world)))


def check(op, got, rank, world, n, cnt):
    """A few elements of the last call's result against what they must
    be: the sum (allreduce, and this rank's shard of it), each rank's own
    values (allgather, broadcast's rank 0)."""
    if op == "allreduce":
        return all(float(got[i]) == expected(i, world)
                   for i in [0, n // 3, n // 2, n - 1])
    if op == "reduce_scatter":
        return all(float(got[i]) == expected(rank * cnt + i, world)
                   for i in [0, cnt // 2, cnt - 1])
    if op == "allgather":
        return all(float(got[r][i]) == float((((r * cnt + i) * 7 + r * 13)
                                              % 17) - 8)
                   for r in range(world) for i in [0, cnt - 1])
    return all(float(got[i]) == float(((i * 7) % 17) - 8)
               for i in [0, n // 2, n - 1])


def main():
    ap = argparse.ArgumentParser(
        description="one rank of a gloo all_reduce benchmark")
    ap.add_argument("--master", required=True, help="rank 0's IP:PORT")
    ap.add_argument("--rank", type=int, required=True)
    ap.add_argument("--world", type=int, required=True)
    ap.add_argument("--size", default="64M", help="tensor bytes (K/M/G)")
    ap.add_argument("--iters", type=int, default=3)
    ap.add_argument("--dtype", default="f32", choices=["f32", "bf16", "f16"],
                    help="element type (bf16: upcast to f32 per call)")
    ap.add_argument("--op", default="allreduce",
                    choices=["allreduce", "reduce_scatter", "allgather",
                             "broadcast"])
    ap.add_argument("--timeout", type=float, default=300,
                    help="seconds a collective may take before failing")
    args = ap.parse_args()
    size = parse_size(args.size)
    if size < 4 or size % 4:
        ap.error("--size must be a positive multiple of 4")
    dt = {"f32": torch.float32, "bf16": torch.bfloat16,
          "f16": torch.float16}[args.dtype]
    n = size // (4 if args.dtype == "f32" else 2)
    if args.op != "allreduce" and args.dtype != "f32":
        ap.error("--op other than allreduce: f32 only")
    if args.op in ("reduce_scatter", "allgather") and n % args.world:
        ap.error("--size must be whole elements a rank")
    cnt = n // args.world

    # One compute thread: the ranks share a small machine, and the sum is
    # not what is measured.
    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo", init_method=f"tcp://{args.master}", rank=args.rank,
        world_size=args.world,
        timeout=datetime.timedelta(seconds=args.timeout))

    x = torch.empty(n, dtype=dt)
    fill(x, args.rank)

    def reduce():
        if args.dtype == "bf16":
            y = x.float()
            dist.all_reduce(y, op=dist.ReduceOp.SUM)
            x.copy_(y)
        else:
            dist.all_reduce(x, op=dist.ReduceOp.SUM)

    parts = [torch.empty(cnt, dtype=dt) for _ in range(args.world)]
    lo = args.rank * cnt

    def call():
        if args.op == "allreduce":
            reduce()
            return x
        if args.op == "reduce_scatter":
            dist.all_reduce(x, op=dist.ReduceOp.SUM)
            return x[lo:lo + cnt].clone()
        if args.op == "allgather":
            dist.all_gather(parts, x[lo:lo + cnt])
            return parts
        dist.broadcast(x, 0)
        return x

    dist.barrier()
    call()  # warm-up: connections, buffers

    secs, cpu, ticks = [], [], []
    for _ in range(args.iters):
        fill(x, args.rank)
        dist.barrier()
        h0 = host_ticks()
        c0 = time.process_time()
        t0 = time.perf_counter()
        got = call()
        secs.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
        h1 = host_ticks()
        ticks.append([h1[0] - h0[0], h1[1] - h0[1]])

    ok = check(args.op, got, args.rank, args.world, n, cnt)
    mine = torch.tensor(secs + [0.0 if ok else 1.0], dtype=torch.float64)
    dist.all_reduce(mine, op=dist.ReduceOp.MAX)
    tmax = mine[:-1].tolist()
    ok = float(mine[-1]) == 0.0
    csum = torch.tensor(cpu, dtype=torch.float64)
    dist.all_reduce(csum, op=dist.ReduceOp.SUM)
    if args.rank == 0:
        print(json.dumps({
            "system": "gloo", "op": args.op, "world": args.world,
            "size": size,
            "dtype": args.dtype,
            "torch": torch.__version__,
            "seconds": [round(t, 6) for t in tmax],
            "best_s": round(min(tmax), 6),
            "mean_s": round(sum(tmax) / len(tmax), 6),
            "cpu_s": [round(c, 6) for c in csum.tolist()],
            "host_ticks": ticks,
            "check": "ok" if ok else "FAIL"}), flush=True)
    dist.destroy_process_group()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
#
# training_report.py: the table of tools/bench-training, from the result
# files its runs left in --res (ROW.sSEED.json: rank 0's JSON of
# tools/bench/ddp_train.py, or {"error": ...}; ROW.sSEED.busy: how busy
# the CPUs were before the run). Prints one row per system over all
# seeds and a line per target of issue 12; --json writes every figure.
# Exit status 1 when a run failed.
import argparse
import json
import statistics
import sys

LABELS = {
    "gloo": "gloo allreduce (fp32)",
    "fp16": "gloo + fp16_compress_hook",
    "powersgd": "gloo + PowerSGD hook, rank 4",
    "tally": "tally fixp (dense)",
    "tally-mcast": "tally fixp, multicast results",
    "tally-backend": "tally backend, no hook",
    "tally-sharded": "tally sharded (bf16 grads)",
    "tally-q8": "tally q8 + EF (narrow)",
    "tally-q4": "tally q4 + EF (narrow)",
    "tally-sparse": "tally block-sparse 1% + EF",
    "tally-powersgd": "tally PowerSGD, rank 4",
}
TORCH = ("gloo", "fp16", "powersgd")
# The torch row of the same kind of compression; None: the fastest.
KIND = {"tally": "gloo", "tally-mcast": "gloo", "tally-backend": "gloo",
        "tally-sharded": "gloo",
        "tally-q8": "fp16", "tally-q4": "fp16",
        "tally-powersgd": "powersgd", "tally-sparse": None}


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--res", required=True)
    ap.add_argument("--systems", required=True)
    ap.add_argument("--seeds", required=True)
    ap.add_argument("--workers", type=int, required=True)
    ap.add_argument("--rate", required=True)
    ap.add_argument("--mtu", type=int, required=True)
    ap.add_argument("--target", type=float, required=True)
    ap.add_argument("--grad-views", action="store_true")
    ap.add_argument("--machine", default="")
    ap.add_argument("--command", default="")
    ap.add_argument("--json")
    return ap.parse_args()


def load(res, row, seed):
    """One run's result, or {"error": ...}."""
    try:
        with open(f"{res}/{row}.s{seed}.json") as f:
            r = json.load(f)
    except (OSError, ValueError):
        r = {"error": "no result"}
    try:
        with open(f"{res}/{row}.s{seed}.busy") as f:
            r["cpu_busy_before"] = int(f.read())
    except (OSError, ValueError):
        pass
    return r


def per_run(r, target):
    """Adds a run's figures: final accuracy, seconds an epoch (epochs
    after the first, which carries the start-up; the first alone when
    there is one), seconds to the target accuracy (training time,
    evaluation excluded; None when never reached), CPU seconds an
    epoch (all ranks, plus tally-dp for tally rows)."""
    ep, acc = r["epoch_s"], r["acc"]
    r["final_acc"] = acc[-1]
    later = ep[1:] if len(ep) > 1 else ep
    r["epoch_mean_s"] = sum(later) / len(later)
    r["first_epoch_s"] = ep[0]
    r["time_to_target_s"] = None
    t = 0.0
    for s, a in zip(ep, acc):
        t += s
        if a >= target:
            r["time_to_target_s"] = t
            break
    r["train_s"] = sum(ep)
    r["cpu_epoch_s"] = (sum(r["cpu_s"]) + r.get("dp_cpu_s", 0.0)) / len(ep)


def summarize(row, runs):
    """A row over its seeds: means, the accuracy's spread (max - min)
    and sample standard deviation, the runs that reached the target."""
    ok = [r for r in runs if "error" not in r]
    s = {"system": row, "label": LABELS[row], "runs": len(runs),
         "ok": len(ok), "errors": [r["error"] for r in runs if "error" in r]}
    if not ok:
        return s
    accs = [r["final_acc"] for r in ok]
    s["acc_mean"] = statistics.fmean(accs)
    s["acc_spread"] = max(accs) - min(accs)
    s["acc_sd"] = statistics.stdev(accs) if len(accs) > 1 else 0.0
    s["epoch_s"] = statistics.fmean(r["epoch_mean_s"] for r in ok)
    s["first_epoch_s"] = statistics.fmean(r["first_epoch_s"] for r in ok)
    tt = [r["time_to_target_s"] for r in ok if r["time_to_target_s"]]
    s["reached"] = len(tt)
    s["time_to_target_s"] = statistics.fmean(tt) if tt else None
    s["cpu_epoch_s"] = statistics.fmean(r["cpu_epoch_s"] for r in ok)
    dp = [r["dp_cpu_s"] / len(r["epoch_s"]) for r in ok if "dp_cpu_s" in r]
    if dp:
        s["dp_cpu_epoch_s"] = statistics.fmean(dp)
    s["buckets"] = ok[0].get("buckets")
    if not isinstance(s["buckets"], list):
        s["buckets"] = None
    s["params"] = ok[0].get("params")
    if "job" in ok[0]:
        s["job"] = ok[0]["job"]
    st = step_times(ok, s["buckets"])
    if st:
        s["step"] = st
    return s


def step_entries(tl):
    """A run's timelines (one list a rank of [start, seconds, elements])
    as (elements, starts, ends) of each bucket in order, up to the first
    where the ranks differ; raises TypeError, IndexError or ValueError on
    anything else."""
    if not isinstance(tl, list) or not tl or not all(tl):
        return []
    out = []
    for i in range(min(len(x) for x in tl)):
        n = int(tl[0][i][2])
        if any(int(x[i][2]) != n for x in tl):
            break  # ranks out of step: stop reading this run
        starts = [float(x[i][0]) for x in tl]
        out.append((n, starts, [w + float(x[i][1])
                                for w, x in zip(starts, tl)]))
    return out


def step_times(runs, buckets):
    """Where a tally hook row's step goes, from the ranks' timelines
    (ddp_train.py's "tally_timeline": per rank, [start, seconds,
    elements] of each bucket the hook reduced, in order): for each of
    DDP's final buckets (bytes, f32), the median seconds from the last
    rank's start of its reduction to the last rank's end ("after_last")
    and how far apart the ranks started it ("skew"); and the median
    seconds from a step's last sum to the next step's first bucket
    ("between": forward, backward up to the first bucket, optimizer).
    Over every step of every run; None without timelines."""
    if not buckets:
        return None
    elems = [b // 4 for b in buckets]
    after = {n: [] for n in elems}
    skew = {n: [] for n in elems}
    between = []
    for r in runs:
        try:
            steps = step_entries(r.get("tally_timeline"))
        except (TypeError, IndexError, ValueError):
            continue  # not a timeline this report can read: no line
        prev_end = None
        for n, starts, ends in steps:
            if n in after:
                after[n].append(max(ends) - max(starts))
                skew[n].append(max(starts) - min(starts))
            if n == elems[0] and prev_end is not None:
                between.append(min(starts) - prev_end)
            prev_end = max(ends) if n == elems[-1] else None
    if not any(after.values()):
        return None
    med = lambda v: statistics.median(v) if v else None
    return {"buckets": [{"bytes": b, "after_last_s": med(after[n]),
                         "skew_s": med(skew[n]), "steps": len(after[n])}
                        for b, n in zip(buckets, elems)],
            "between_s": med(between)}


def speedups(rows):
    """Per row: its time an epoch against the torch row of the same
    kind (vs_kind) and against the fastest torch row (vs_fastest)."""
    by = {r["system"]: r for r in rows if "epoch_s" in r}
    torch = [by[t] for t in TORCH if t in by]
    fastest = min(torch, key=lambda r: r["epoch_s"]) if torch else None
    for r in rows:
        if "epoch_s" not in r:
            continue
        if fastest:
            r["vs_fastest"] = fastest["epoch_s"] / r["epoch_s"]
            r["fastest_torch"] = fastest["system"]
        if r["system"] in KIND:
            ref = by.get(KIND[r["system"]]) if KIND[r["system"]] else fastest
            if ref:
                r["vs_kind"] = ref["epoch_s"] / r["epoch_s"]
                r["kind_ref"] = ref["system"]
    return by


def fmt_x(v):
    return f"{v:.2f}x" if v is not None else "-"


def print_table(a, rows, seeds, epochs):
    print()
    print(f"DDP training on digits, {a.workers} ranks, links {a.rate}, "
          f"MTU {a.mtu}; seeds {','.join(seeds)}; {epochs} epochs"
          f"{'; gradients as bucket views' if a.grad_views else ''}")
    print(f"machine: {a.machine}")
    if rows and rows[0].get("params"):
        print(f"model: MLP 64-2048-2048-10 ({rows[0]['params']} parameters"
              f", {rows[0]['params'] * 4 / 2**20:.1f} MiB of f32 gradients"
              f" a step)")

    print()
    tt = f"s to {a.target:g}%"
    hdr = (f"{'row':<15} {'reduction':<30} {'acc %':>6} {'spread':>6} "
           f"{'s/epoch':>8} {tt:>9} {'vs kind':>12} {'vs fastest':>10} "
           f"{'CPU s/ep':>8}")
    print(hdr)
    print("-" * len(hdr))
    for r in rows:
        if "acc_mean" not in r:
            print(f"{r['system']:<15} {r['label']:<30} FAILED: "
                  + "; ".join(r["errors"]))
            continue
        t = r["time_to_target_s"]
        ts = "never" if t is None else f"{t:.1f}"
        if t is not None and r["reached"] < r["ok"]:
            ts += f" ({r['reached']}/{r['ok']})"
        vk = "-"
        if "vs_kind" in r:
            vk = f"{fmt_x(r['vs_kind'])} {r['kind_ref']}"
        print(f"{r['system']:<15} {r['label']:<30} {r['acc_mean']:6.2f} "
              f"{r['acc_spread']:6.2f} {r['epoch_s']:8.3f} {ts:>9} "
              f"{vk:>12} {fmt_x(r.get('vs_fastest')):>10} "
              f"{r['cpu_epoch_s']:8.2f}")
        if r["errors"]:
            print(f"{'':<15} ({len(r['errors'])} of {r['runs']} runs "
                  "failed: " + "; ".join(r["errors"]) + ")")
    print()
    print("acc %: final test accuracy, mean over the seeds; spread: max -"
          " min; s/epoch: training seconds an epoch (slowest rank,\n"
          "evaluation excluded, epochs after the first); s to target:"
          " training seconds until the first epoch at the target (mean of"
          " the\nseeds that reached it); vs kind: that row's s/epoch / this"
          " row's (same kind of compression; sparse: the fastest torch"
          " row);\nvs fastest: the fastest torch row's s/epoch / this row's;"
          " CPU s/ep: CPU seconds an epoch, all ranks plus tally-dp")
    for r in rows:
        b = r.get("buckets")
        if b:
            mib = ", ".join(f"{x / 2**20:.2f}" for x in b)
            j = r.get("job")
            print(f"{r['system']}: DDP buckets of {mib} MiB" + (
                f"; tally job codec {j['codec']}, max_elems "
                f"{j['max_elems']}, window {j['window']}"
                f"{', narrow' if j['narrow'] else ''}" if j else ""))
        st = r.get("step")
        if st:
            parts = [f"{x['bytes'] / 2**20:.2f} MiB in {x['after_last_s']:.3f}"
                     f" s after the last rank's start (ranks "
                     f"{x['skew_s']:.3f} s apart)"
                     for x in st["buckets"] if x["after_last_s"] is not None]
            tail = ("" if st["between_s"] is None else
                    f"; {st['between_s']:.3f} s from a step's last sum to "
                    "the next step's first bucket")
            print(f"{r['system']}: a step, median: " + ", ".join(parts) +
                  tail)


def targets(by, ran):
    """Issue 12's targets, each {"name", "met", "text"}: by holds the rows
    with figures, ran every row asked for. A target whose rows were not
    asked for is left open (met None); one whose row failed on every seed
    is not met."""
    out = []

    def acc_within(r, ref, pts):
        return r["acc_mean"] >= ref["acc_mean"] - pts

    def add(name, need, test):
        failed = [x for x in need if x in ran and x not in by]
        if failed:
            out.append({"name": name, "met": False,
                        "text": f"{name}: {', '.join(failed)} failed on "
                                f"every seed: not met"})
            return
        if not all(x in by for x in need):
            out.append({"name": name, "met": None,
                        "text": f"{name}: not run"})
            return
        met, why = test(*[by[x] for x in need])
        out.append({"name": name, "met": met,
                    "text": f"{name}: {why}: {'met' if met else 'not met'}"})

    add("tally dense: within 0.5 points of gloo, >= 1.3x faster an epoch",
        ["tally", "gloo"],
        lambda t, g: (acc_within(t, g, 0.5) and t["vs_kind"] >= 1.3,
                      f"{t['acc_mean'] - g['acc_mean']:+.2f} points, "
                      f"{t['vs_kind']:.2f}x"))
    if "tally-mcast" in ran:
        add("tally dense, multicast results: within 0.5 points of gloo, "
            ">= 1.3x faster an epoch",
            ["tally-mcast", "gloo"],
            lambda t, g: (acc_within(t, g, 0.5) and t["vs_kind"] >= 1.3,
                          f"{t['acc_mean'] - g['acc_mean']:+.2f} points, "
                          f"{t['vs_kind']:.2f}x"))
    add("q8+EF: within 1 point of gloo, >= 1.5x faster than the fp16 hook",
        ["tally-q8", "gloo", "fp16"],
        lambda q, g, f: (acc_within(q, g, 1.0) and q["vs_kind"] >= 1.5,
                         f"{q['acc_mean'] - g['acc_mean']:+.2f} points, "
                         f"{q['vs_kind']:.2f}x"))
    add("tally PowerSGD: within 0.5 points of torch's, faster than it",
        ["tally-powersgd", "powersgd"],
        lambda t, p: (acc_within(t, p, 0.5) and t["vs_kind"] > 1.0,
                      f"{t['acc_mean'] - p['acc_mean']:+.2f} points, "
                      f"{t['vs_kind']:.2f}x"))
    add("block-sparse 1%+EF: within 2 points of gloo",
        ["tally-sparse", "gloo"],
        lambda s, g: (acc_within(s, g, 2.0),
                      f"{s['acc_mean'] - g['acc_mean']:+.2f} points"))
    return out


def main():
    a = parse_args()
    systems = a.systems.split(",")
    seeds = a.seeds.split(",")
    rows, runs_all, epochs = [], {}, None
    for row in systems:
        runs = []
        for seed in seeds:
            r = load(a.res, row, seed)
            if "error" not in r:
                try:
                    per_run(r, a.target)
                    epochs = len(r["epoch_s"])
                except (KeyError, ValueError, ZeroDivisionError,
                        IndexError, TypeError) as e:
                    r = {"error": f"bad result: {e}"}
            r["seed"] = int(seed)
            runs.append(r)
        runs_all[row] = runs
        rows.append(summarize(row, runs))
    by = speedups(rows)
    print_table(a, rows, seeds, epochs)
    tg = targets(by, {r["system"] for r in rows})
    for t in tg:
        if t["met"] is not None:
            print(t["text"])
    for row in systems:
        for r in runs_all[row]:
            b = r.get("cpu_busy_before")
            if b is not None and b > 15:
                print(f"warning: the CPUs were {b}% busy before {row} seed "
                      f"{r['seed']}: other work on the machine")
    if a.json:
        doc = {"bench": "training", "command": a.command,
               "machine": a.machine, "workers": a.workers, "rate": a.rate,
               "mtu": a.mtu, "grad_views": a.grad_views,
               "target": a.target, "seeds": seeds,
               "epochs": epochs, "rows": rows, "targets": tg,
               "runs": runs_all}
        with open(a.json, "w") as f:
            json.dump(doc, f, indent=1, default=str)
            f.write("\n")
    return 0 if all(r["ok"] == r["runs"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())

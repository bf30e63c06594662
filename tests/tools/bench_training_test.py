#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""tools/bench-training without a testbed (TAP).

The driver and its rank script refuse bad arguments with exit status 2
and their usage before anything is set up (no root, no torch needed),
tools/bench-allreduce still does after sharing tools/bench/lib.sh, and
the report (tools/bench/training_report.py) turns result files of known
content into the figures docs/tools/bench-training.md defines: final
accuracy mean and spread, seconds an epoch without the first, seconds to
the target, speed-ups against the torch row of the same kind and the
fastest one, CPU seconds an epoch, the targets' verdicts, and a failed
run shown as failed with exit status 1. The benchmark itself is not run
here (it takes the testbed for most of an hour).
"""
import json
import os
import subprocess
import sys
import tempfile

TOP = sys.argv[1]
n = 0
failed = 0


def ok(cond, name):
    global n, failed
    n += 1
    print(("ok" if cond else "not ok") + f" {n} - {name}", flush=True)
    if not cond:
        failed += 1


def run(argv, env=None):
    e = dict(os.environ)
    e.pop("TALLY_TOKEN", None)
    e.update(env or {})
    p = subprocess.run(argv, cwd=TOP, capture_output=True, text=True,
                       timeout=60, env=e)
    return p.returncode, p.stdout, p.stderr


def run_report(d, systems, seeds, *extra):
    """Runs training_report.py over result directory d for systems and
    seeds (comma-separated), 4 workers at 1 Gbit/s, MTU 1500, target 95 %;
    returns (exit status, stdout, stderr)."""
    return run([sys.executable,
                os.path.join(TOP, "tools/bench/training_report.py"),
                "--res", d, "--systems", systems, "--seeds", seeds,
                "--workers", "4", "--rate", "1gbit", "--mtu", "1500",
                "--target", "95", "--machine", "m", "--command", "c",
                *extra])


def usage_errors():
    drv = os.path.join(TOP, "tools/bench-training")
    for args in (["--bogus"], ["--systems", "gloo,nope"], ["--systems", ""],
                 ["--seeds", "1,x"], ["--epochs", "0"], ["--lr", "-1"],
                 ["--lr", "0"], ["--target", "101"], ["-n", "1"],
                 ["--pmd", "dpdk"], ["--rate", "fast"], ["--epochs"],
                 ["--elems", "3"], ["--codec", "gloo=q8"],
                 ["--codec", "tally-q8"], ["--codec", "tally-q8="],
                 ["--codec", "tally-x=q8"], ["--codec", "tally-q8=q8;rm x"],
                 ["--systems", "gloo", "--seeds", ""]):
        rc, _, err = run([drv] + args)
        ok(rc == 2 and "usage:" in err,
           f"bench-training {' '.join(args) or '(empty)'}: exit 2 with usage"
           f" (got {rc})")
    rc, out, _ = run([drv, "--help"])
    ok(rc == 0 and "--quick" in out and "--grad-views" in out,
       "bench-training --help: exit 0, usage")
    rc, _, err = run([drv, "--grad-views", "--bogus"])
    ok(rc == 2 and "unknown argument '--bogus'" in err,
       f"bench-training --grad-views takes no value (got {rc})")
    rc, _, err = run([os.path.join(TOP, "tools/bench-allreduce"), "--bogus"])
    ok(rc == 2 and "usage:" in err,
       f"bench-allreduce --bogus: exit 2 with usage (got {rc})")
    rank = [sys.executable, os.path.join(TOP, "tools/bench/ddp_train.py")]
    base = ["--master", "10.77.0.12:29500", "--world", "4"]
    for args, env in ((base + ["--rank", "4", "--comm", "gloo"], None),
                      (base + ["--rank", "0", "--comm", "nccl"], None),
                      (base + ["--rank", "0", "--comm", "tally"], None),
                      (base + ["--rank", "0", "--comm", "gloo", "--url",
                               "tally://h:1/j"], None),
                      (base + ["--rank", "0", "--comm", "tally", "--url",
                               "tally://h:1/j"], None),
                      (["--master", "nohost", "--rank", "0", "--world", "4",
                        "--comm", "gloo"], None),
                      (base + ["--rank", "0", "--comm", "gloo", "--epochs",
                               "0"], None)):
        rc, _, err = run(rank + args, env)
        ok(rc == 2 and "usage:" in err,
           f"ddp_train.py {' '.join(args)}: exit 2 with usage (got {rc})")


def result(acc, epoch_s, cpu=(1.0, 1.0, 1.0, 1.0), dp=None):
    r = {"comm": "x", "epoch_s": epoch_s, "acc": acc, "loss": [0.1] * len(acc),
         "cpu_s": list(cpu), "params": 4349962, "buckets": [16867368, 532480]}
    if dp is not None:
        r["dp_cpu_s"] = dp
    return r


def report():
    d = tempfile.mkdtemp(prefix="bt-report.")
    # Three epochs, seeds 1 and 2. gloo: 2.0 s an epoch after a 3 s
    # first; fp16 2.5; powersgd 1.6; tally 1.5 (1.33x gloo), q8 1.6
    # (1.56x fp16), powersgd-tally 1.7 (slower than torch's), sparse
    # failed on seed 2.
    rows = {
        "gloo": [([90, 95.5, 97.0], [3, 2, 2]), ([90, 94, 96.0], [3, 2, 2])],
        "fp16": [([90, 95.5, 97.0], [3, 2.5, 2.5]),
                 ([90, 94, 96.0], [3, 2.5, 2.5])],
        "powersgd": [([88, 95.0, 96.0], [3, 1.6, 1.6]),
                     ([88, 94.0, 96.0], [3, 1.6, 1.6])],
        "tally": [([90, 96, 96.2], [2, 1.5, 1.5]), ([90, 94, 96.2], [2, 1.5, 1.5])],
        "tally-q8": [([90, 96, 95.8], [2, 1.6, 1.6]),
                     ([90, 94, 95.6], [2, 1.6, 1.6])],
        "tally-powersgd": [([90, 96, 96.0], [2, 1.7, 1.7]),
                           ([90, 94, 95.0], [2, 1.7, 1.7])],
        "tally-sparse": [([90, 92, 94.0], [2, 1.0, 1.0]), None],
    }
    for row, runs in rows.items():
        for seed, r in zip((1, 2), runs):
            p = f"{d}/{row}.s{seed}.json"
            with open(p, "w") as f:
                if r is None:
                    json.dump({"system": f"{row}.s{seed}", "error": "exit 124"}, f)
                else:
                    res = result(*r, dp=(3.0 if row.startswith("tally")
                                         else None))
                    if row.startswith("tally"):
                        res["job"] = {"codec": "fixp", "max_elems": 352,
                                      "window": 64, "narrow": False}
                    json.dump(res, f)
            with open(f"{d}/{row}.s{seed}.busy", "w") as f:
                f.write("40" if (row, seed) == ("fp16", 2) else "2")
    js = f"{d}/out.json"
    rc, out, err = run_report(d, ",".join(rows), "1,2", "--json", js)
    ok(rc == 1, f"report: exit 1 when a run failed (got {rc}; {err.strip()})")
    table = out.split("-" * 40)[-1].split("\nacc %:")[0]
    lines = {ln.split()[0]: ln for ln in table.splitlines() if ln.strip()}
    g = lines.get("gloo", "").split()
    # gloo: acc mean 96.5, spread 1.0, 2.0 s an epoch, to 95%: 5.0 and
    # 7.0 s (seed 2 reaches it in the third epoch) -> 6.0.
    ok(g[-7:-3] == ["96.50", "1.00", "2.000", "6.0"],
       f"report: gloo's accuracy, spread, s/epoch, s to 95% ({g})")
    t = lines.get("tally", "")
    ok("1.33x gloo" in t and t.split()[-2] == "1.07x",
       f"report: tally vs gloo and vs the fastest torch row ({t})")
    ok("1.56x fp16" in lines.get("tally-q8", ""),
       "report: q8 against the fp16 hook")
    ok("0.94x powersgd" in lines.get("tally-powersgd", ""),
       "report: tally PowerSGD against torch's")
    sp = lines.get("tally-sparse", "")
    ok("1.60x powersgd" in sp and "(1 of 2 runs failed" in out,
       f"report: sparse against the fastest torch row, its failure shown ({sp})")
    # CPU s/epoch: 4 ranks x 1 s + 3 s of tally-dp, over 3 epochs.
    ok(t.split()[-1] == "2.33", f"report: CPU seconds an epoch ({t})")
    want = ["tally dense: within 0.5 points of gloo, >= 1.3x faster an epoch:"
            " -0.30 points, 1.33x: met",
            "q8+EF: within 1 point of gloo, >= 1.5x faster than the fp16 hook:"
            " -0.80 points, 1.56x: met",
            "tally PowerSGD: within 0.5 points of torch's, faster than it:"
            " -0.50 points, 0.94x: not met",
            "block-sparse 1%+EF: within 2 points of gloo: -2.50 points: not met"]
    for w in want:
        ok(w in out, f"report: verdict '{w}'")
    ok("tally: DDP buckets of 16.09, 0.51 MiB; tally job codec fixp" in out,
       "report: DDP's buckets and the tally job of a row")
    ok("CPUs were 40% busy before fp16 seed 2" in out,
       "report: warns of a busy machine before a run")
    with open(js) as f:
        doc = json.load(f)
    ok(doc["epochs"] == 3 and len(doc["rows"]) == 7 and
       doc["rows"][0]["first_epoch_s"] == 3 and
       [t["met"] for t in doc["targets"]] == [True, True, False, False],
       "report: --json holds the rows and verdicts")


def report_row_failed():
    """A row that failed on every seed: its target is not met (not left
    out as if it had not been asked for)."""
    d = tempfile.mkdtemp(prefix="bt-report.")
    with open(f"{d}/gloo.s1.json", "w") as f:
        json.dump(result([90, 96.0], [3, 2]), f)
    with open(f"{d}/tally-sparse.s1.json", "w") as f:
        json.dump({"system": "tally-sparse.s1", "error": "exit 1"}, f)
    rc, out, err = run_report(d, "gloo,tally-sparse", "1")
    ok(rc == 1 and "block-sparse 1%+EF: within 2 points of gloo: "
       "tally-sparse failed on every seed: not met" in out,
       f"report: a target whose row failed is not met (rc {rc}; "
       f"{err.strip()})")
    ok("tally dense" not in out and "PowerSGD: within" not in out,
       "report: targets of rows not asked for are left out")


def report_mcast():
    """The tally-mcast row (results to a multicast group): its label, vs
    gloo (2.0 / 1.5 s an epoch = 1.33x) and dense tally's target."""
    d = tempfile.mkdtemp(prefix="bt-report.")
    for row, r in (("gloo", ([90, 96.0, 96.0], [3, 2, 2])),
                   ("tally-mcast", ([90, 96.0, 96.0], [2, 1.5, 1.5]))):
        res = result(*r)
        if row != "gloo":
            res["dp_cpu_s"] = 2.0
            res["job"] = {"codec": "fixp", "max_elems": 352, "window": 64,
                          "narrow": False}
        with open(f"{d}/{row}.s1.json", "w") as f:
            json.dump(res, f)
    rc, out, err = run_report(d, "gloo,tally-mcast", "1")
    ok(rc == 0 and "tally fixp, multicast results" in out and
       "1.33x gloo" in out,
       f"report: the tally-mcast row against gloo (rc {rc}; {err.strip()})")
    ok("tally dense, multicast results: within 0.5 points of gloo, >= 1.3x "
       "faster an epoch: +0.00 points, 1.33x: met" in out,
       "report: tally-mcast's target is dense tally's")


def report_step_times():
    """A hook row's timelines (ddp_train.py's tally_timeline, one list a
    rank): the step line's medians. Two ranks, three steps a second
    apart after DDP's first, whole-model bucket; rank 1 starts the
    16.09 MiB bucket 0.05 s late and ends it 0.01 s after rank 0."""
    d = tempfile.mkdtemp(prefix="bt-report.")
    big, small = 16867368 // 4, 532480 // 4
    tl = [[[0.5, 0.3, 4349962]], [[0.5, 0.3, 4349962]]]
    for k in range(1, 4):
        t = float(k)
        tl[0] += [[t, 0.20, big], [t + 0.20, 0.02, small]]
        tl[1] += [[t + 0.05, 0.16, big], [t + 0.21, 0.015, small]]
    for row in ("gloo", "tally"):
        res = result([90, 96.0, 96.0], [3, 2, 2] if row == "gloo"
                     else [2, 1.5, 1.5])
        if row == "tally":
            res["tally_timeline"] = tl
            res["job"] = {"codec": "fixp", "max_elems": 352, "window": 64,
                          "narrow": False}
        with open(f"{d}/{row}.s1.json", "w") as f:
            json.dump(res, f)
    js = f"{d}/out.json"
    rc, out, err = run_report(d, "gloo,tally", "1", "--json", js)
    want = ("tally: a step, median: 16.09 MiB in 0.160 s after the last "
            "rank's start (ranks 0.050 s apart), 0.51 MiB in 0.015 s after "
            "the last rank's start (ranks 0.010 s apart); 0.775 s from a "
            "step's last sum to the next step's first bucket")
    ok("gradients as bucket views" not in out,
       "report: DDP's default (copies) is not called bucket views")
    rc2, out2, _ = run_report(d, "gloo,tally", "1", "--grad-views")
    ok(rc2 == 0 and "epochs; gradients as bucket views" in out2,
       "report: --grad-views named in the heading")
    ok(rc == 0 and want in out,
       f"report: a hook row's step from its timelines (rc {rc}; "
       f"{[ln for ln in out.splitlines() if 'a step' in ln]})")
    ok("a step" not in "".join(ln for ln in out.splitlines()
                                if ln.startswith("gloo:")),
       "report: no step line without timelines")
    with open(js) as f:
        doc = json.load(f)
    st = [r for r in doc["rows"] if r["system"] == "tally"][0].get("step", {})
    ok([b["steps"] for b in st.get("buckets", [])] == [3, 3],
       f"report: --json counts the steps of each bucket ({st})")
    # A timeline the report cannot read: no step line, no failure.
    for bad in ([[[1.0, 2.0]], [[1.0, 2.0]]], [["x", 1, 2]], [[None]], 7):
        with open(f"{d}/tally.s1.json", "w") as f:
            res = result([90, 96.0, 96.0], [2, 1.5, 1.5])
            res["tally_timeline"] = bad
            json.dump(res, f)
        rc, out, err = run_report(d, "gloo,tally", "1")
        ok(rc == 0 and "tally: a step" not in out and "Traceback" not in err,
           f"report: a malformed timeline {bad!r} is left out (rc {rc}; "
           f"{err.strip()[-200:]})")
    # Ranks whose sequences differ: read up to the first difference.
    tl[1][3][2] = 7
    with open(f"{d}/tally.s1.json", "w") as f:
        res = result([90, 96.0, 96.0], [2, 1.5, 1.5])
        res["tally_timeline"] = tl
        json.dump(res, f)
    rc, out, err = run_report(d, "gloo,tally", "1", "--json", js)
    with open(js) as f:
        doc = json.load(f)
    st = [r for r in doc["rows"] if r["system"] == "tally"][0].get("step", {})
    ok(rc == 0 and [b["steps"] for b in st.get("buckets", [])] == [1, 1],
       f"report: timelines out of step are read up to the difference ({st})")


def main():
    usage_errors()
    report()
    report_row_failed()
    report_mcast()
    report_step_times()
    print(f"1..{n}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

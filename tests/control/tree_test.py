#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
#
# Two-tier trees built by tallyd (issue 15; docs/scale-out.md, "Two
# tiers") on a real tallyd with three stand-in tally-dp
# (tests/control/fake_dp.py) and a fourth dataplane that is down, no DPDK:
# job_create refuses every bad tree with a clear error, each counted in
# ctl_errors; a tree of 4 ranks (leaves dp1, dp2; spine dp0) programs the
# spine at once with the leaves' addresses as members; four ranks joining
# the tree by its name with their total ranks are placed on their leaves
# (params' "tier": rank and world in the leaf, the total world for the
# scale) and released; each leaf's job_add carries the spine as its
# upstream; bad joins are refused and counted; job show shows the tree;
# a tallyd restart keeps it and the reconciliation leaves every part
# where it is (the parts share an id on different dataplanes); job delete
# removes every part, and so does the spine's idle timeout. TAP; needs
# TALLY_SRC and TALLY_BUILD.
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dpc_down_test as base  # noqa: E402  (helpers: Ctl, certs, framing)
import epoch_test as et  # noqa: E402  (rdv, all_ranks, show, jf)

ok = base.ok
wait_for = base.wait_for
PORTS = [47474, 47484, 47494]   # the stand-ins' udp_port, dp0..dp2


def start(work, socks, ctl, rdv_port, cert, key):
    conf = os.path.join(work, "tallyd.conf")
    with open(conf, "w") as f:
        f.write(f"control_socket = {ctl.path}\n"
                f"rendezvous = 127.0.0.1:{rdv_port}\n"
                f"rendezvous_tls_cert = {cert}\n"
                f"rendezvous_tls_key = {key}\n"
                "metrics = off\n"
                f"state_file = {work}/state.json\n"
                f"dp_admin = {socks[0]}\n"
                f"dataplane = dp1 {socks[1]}\n"
                f"dataplane = dp2 {socks[2]}\n"
                f"dataplane = dp3 {work}/nothing.sock\n"
                "dp_poll_ms = 100\n"
                "join_timeout_s = 4\n")
    return subprocess.Popen([base.TALLYD, "-c", conf],
                            stdout=open(os.path.join(work, "tallyd.log"),
                                        "a"), stderr=subprocess.STDOUT)


def errors(ctl):
    rep, _ = ctl.call({"cmd": "stats"})
    return rep["tallyd"]["ctl_errors"]


def refusals(ctl):
    """Every bad tree: its errno and sentence, each counted."""
    tree = {"cmd": "job_create", "name": "bad", "world": 4,
            "leaves": ["dp1", "dp2"], "spine": "dp0"}
    cases = [
        ("an unknown leaf", {"leaves": ["dp1", "nope"]}, 2, "no dataplane 'nope'"),
        ("an unknown spine", {"spine": "nope"}, 2, "no dataplane 'nope'"),
        ("the spine also a leaf", {"leaves": ["dp1", "dp0"]}, 22,
         "is the spine and a leaf"),
        ("a leaf named twice", {"leaves": ["dp1", "dp1"]}, 22, "twice"),
        ("65 leaves", {"leaves": [f"l{i}" for i in range(65)]}, 22,
         "1..64 dataplane names"),
        ("a total world of 4097", {"world": 4097}, 22, "1..4096"),
        ("a world that does not split evenly", {"world": 5}, 22,
         "does not split into 2 leaves"),
        ("more than 64 ranks a leaf", {"world": 130}, 22,
         "at most 64 ranks each"),
        ("an authenticated tree", {"auth": True}, 95, "authenticated"),
        ("a RoCEv2 tree", {"transport": "rdma"}, 95, "RoCEv2"),
        ("a sparse codec", {"codec": "sparse"}, 95, "block-sparse"),
        ("leaves with dataplanes", {"dataplanes": ["dp1"]}, 22,
         "do not go together"),
        ("leaves without a spine", {"spine": None}, 22, "both"),
        ("a leaf that is down", {"leaves": ["dp1", "dp3"]}, 112,
         "dataplane 'dp3' (the leaf) is down"),
        ("a flat job of 65", {"leaves": None, "spine": None, "world": 65},
         22, "1..64"),
    ]
    for name, change, err, text in cases:
        req = dict(tree)
        for k, v in change.items():
            if v is None:
                req.pop(k)
            else:
                req[k] = v
        n0 = errors(ctl)
        rep, _ = ctl.call(req)
        rep = rep or {}
        ok(rep.get("errno") == err and text in rep.get("error", "") and
           errors(ctl) == n0 + 1,
           f"{name}: refused ({err}, '{text}'), counted in ctl_errors", rep)
    rep, _ = ctl.call({"cmd": "job_list"})
    ok(rep["jobs"] == [], "no job was left behind by a refusal", rep)


def created(ctl, work):
    """The tree t: the spine at dp0 with the leaves as members."""
    rep, _ = ctl.call({"cmd": "job_create", "name": "t", "world": 4,
                       "leaves": ["dp1", "dp2"], "spine": "dp0",
                       "max_elems": 256})
    rep = rep or {}
    tree = rep.get("job", {}).get("tree", {})
    ok(rep.get("errno") == 0 and len(rep.get("token", "")) == 64 and
       tree.get("spine") == "dp0" and tree.get("world") == 4 and
       [(x["name"], x["dataplane"], x["world"]) for x in
        tree.get("leaves", [])] == [("t/0", "dp1", 2), ("t/1", "dp2", 2)],
       "job create t --world 4 --leaves dp1,dp2 --spine dp0: the tree", rep)
    jid = rep.get("job", {}).get("id")
    spine = []
    wait_for(lambda: spine.extend(base.fake_jobs(work + "/dp0.sock")) or
             spine, 3)
    ok(len(spine) == 1 and spine[0]["id"] == jid and spine[0]["world"] == 2
       and [(m["ip"], m["port"]) for m in spine[0]["members"]] ==
       [("127.0.0.1", PORTS[1]), ("127.0.0.1", PORTS[2])] and
       spine[0].get("encodings") == ["i32", "f32"] and
       not spine[0]["narrow"],
       "the spine job is at dp0 at once, its members the leaves' "
       "dataplanes (address, first port), wide", spine)
    return rep.get("token", ""), jid


def joins(ctl, port, token, work, jid):
    """Four ranks by total rank: placed on their leaves, released."""
    r = et.all_ranks(port, "t", token, [40001, 40002, 40003, 40004])
    ok(all((f or {}).get("op") == "ready" for _, f in r),
       "four ranks join the tree by its name and are released", r)
    ok([(p.get("dp_port"), p.get("tier")) for p, _ in r] ==
       [(PORTS[1], {"rank": 0, "world": 2, "scale_world": 4}),
        (PORTS[1], {"rank": 1, "world": 2, "scale_world": 4}),
        (PORTS[2], {"rank": 0, "world": 2, "scale_world": 4}),
        (PORTS[2], {"rank": 1, "world": 2, "scale_world": 4})],
       "each rank's params: its leaf's dataplane and its tier (rank and "
       "world in the leaf, the total world)", [p for p, _ in r])
    sp = base.fake_jobs(work + "/dp0.sock")[0]
    for lf, dp in ((0, "dp1"), (1, "dp2")):
        e = base.fake_jobs(f"{work}/{dp}.sock")
        up = e[0].get("upstream", {}) if e else {}
        ok(len(e) == 1 and e[0]["id"] == jid and e[0]["world"] == 2 and
           up.get("ip") == "127.0.0.1" and up.get("port") == PORTS[0] and
           up.get("rank") == lf and up.get("world") == 4 and
           len(up.get("token", "")) == 16,
           f"leaf {lf} at {dp}: its two members and the spine upstream "
           f"(rank {lf} of 4)", (e, sp))
    with open(work + "/tallyd.log") as f:
        log = f.read()
    ok(log.count("adding the spine again") >= 1,
       "a leaf's new membership added the spine again first")
    jf0 = et.jf(ctl, "world_mismatch")[0]
    p, _ = et.rdv(port, "t", token, 0, 3, 40009)
    ok(p.get("errno") == 22 and "a two-tier tree of 4" in p.get("error", "")
       and et.jf(ctl, "world_mismatch")[0] == jf0 + 1,
       "a join with another world: EINVAL, counted", p)
    p, _ = et.rdv(port, "t", token, 4, 4, 40009)
    ok(p.get("errno") == 34, "a rank past the total: ERANGE", p)
    p, _ = et.rdv(port, "t", token, 1, 4, 40002, epoch=5)
    ok(p.get("errno") == 116 and "open the job anew" in p.get("error", ""),
       "a rejoin of a tree: ESTALE (open anew)", p)
    j = et.show(ctl, "t")
    ok([(x["state"], x["joined"]) for x in j["tree"]["leaves"]] ==
       [("ready", 2), ("ready", 2)] and j["tier"] == "spine",
       "job show t: both leaves ready with their two members", j)


def restart(ctl, work, socks, port, cert, key, tallyd, jid):
    """A restart keeps the tree; the reconciliation leaves it alone."""
    before = [base.fake_jobs(s) for s in socks]
    tallyd.terminate()
    tallyd.wait(10)
    tallyd = start(work, socks, ctl, port, cert, key)
    wait_for(lambda: (ctl.call({"cmd": "ping"})[0] or {})
             .get("dp_up") is False, 5)     # dp3 stays down
    time.sleep(1.0)     # ten polls
    rep, _ = ctl.call({"cmd": "stats"})
    st = rep["tallyd"]
    after = [base.fake_jobs(s) for s in socks]
    ok(st["dp_stale_removed"] == 0 and st["dp_mismatches"] == 0 and
       st["dp_reprograms"] == 0 and before == after,
       "after a restart, the polls leave the spine and both leaves where "
       "they are (one id at three dataplanes)", (st, before, after))
    j = et.show(ctl, "t")
    ok(j.get("id") == jid and [x["state"] for x in j["tree"]["leaves"]] ==
       ["ready", "ready"], "job show t after the restart: the tree", j)
    with open(work + "/state.json") as f:
        jobs = {x["name"]: x for x in json.load(f)["jobs"]}
    ok(sorted(jobs) == ["t", "t/0", "t/1"] and jobs["t"]["tier"] == "spine"
       and jobs["t/1"]["tier"] == "leaf" and jobs["t/1"]["leaf"] == 1 and
       jobs["t"]["tree_world"] == 4,
       "the state file has the spine and both leaves", jobs)
    return tallyd


def main():
    work = tempfile.mkdtemp(prefix="tallyd-tree.")
    socks = [os.path.join(work, f"dp{i}.sock") for i in range(3)]
    ctl = base.Ctl(os.path.join(work, "tallyd.sock"))
    rdv_port = base.free_port()
    base.CA, cert, key = base.make_certs(work)
    fakes = [subprocess.Popen([sys.executable, base.FAKE, s],
                              env=dict(os.environ,
                                       FAKE_DP_PORT=str(PORTS[i])))
             for i, s in enumerate(socks)]
    tallyd = None
    try:
        wait_for(lambda: all(os.path.exists(s) for s in socks), 5)
        tallyd = start(work, socks, ctl, rdv_port, cert, key)
        up = wait_for(lambda: sum(d["up"] for d in (ctl.call(
            {"cmd": "stats"})[0] or {}).get("dataplanes", [])) == 3, 5)
        ok(up, "tallyd starts and reaches the three stand-ins (dp3 down)")
        refusals(ctl)
        token, jid = created(ctl, work)
        joins(ctl, rdv_port, token, work, jid)
        tallyd = restart(ctl, work, socks, rdv_port, cert, key, tallyd,
                         jid)
        rep, _ = ctl.call({"cmd": "job_delete", "name": "t"}, timeout=8)
        ok((rep or {}).get("errno") == 0 and
           all(base.fake_jobs(s) == [] for s in socks) and
           (ctl.call({"cmd": "job_list"})[0] or {}).get("jobs") == [],
           "job delete t: no part left at any dataplane or in tallyd", rep)
        rep, _ = ctl.call({"cmd": "job_create", "name": "idle", "world": 2,
                           "leaves": ["dp1", "dp2"], "spine": "dp0",
                           "idle_timeout_s": 1})
        gone = wait_for(lambda: (ctl.call({"cmd": "job_list"})[0] or {})
                        .get("jobs") == [] and
                        all(base.fake_jobs(s) == [] for s in socks), 6)
        ok((rep or {}).get("errno") == 0 and gone,
           "a tree idle for its idle_timeout_s goes whole: spine and leaves",
           rep)
    finally:
        if tallyd is not None:
            tallyd.terminate()
            ok(tallyd.wait(10) == 0, "tallyd stops cleanly on SIGTERM")
        for f in fakes:
            f.kill()
            f.wait()
        if base.nfail:
            with open(os.path.join(work, "tallyd.log")) as f:
                for line in f.readlines()[-40:]:
                    print(f"#   {line.rstrip()}")
        shutil.rmtree(work, ignore_errors=True)
    print(f"1..{base.ntap}")
    return 1 if base.nfail else 0


if __name__ == "__main__":
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    sys.exit(main())

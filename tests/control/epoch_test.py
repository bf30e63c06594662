#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
#
# Epochs (issue 15; docs/scale-out.md, "Epochs") on a real tallyd with
# three stand-in tally-dp (tests/control/fake_dp.py), no DPDK: a job of
# world 2 sharded over them forms epoch E1; one stand-in is SIGKILLed;
# within dp_dead_polls polls tallyd moves the job to the two others under
# a new wire token and epoch, and job show says which dataplane died,
# what it missed and when; both ranks rejoin naming E1 and get ready at
# once with the new epoch's token and two shards. Bad rejoins are refused
# with a clear error and counted (stale_epoch): an epoch the job has not
# had (EINVAL), another data address (ESTALE), an epoch whose membership
# a later barrier replaced (ESTALE). Every rank rejoining the current
# epoch gets a new one (cause "rejoin"). With every dataplane dead the
# rendezvous answers ENOSPC with "fallback": "ring" (no_capacity), a
# rank waiting at its rejoin included, and
# the state file keeps the epoch and its reason. TAP; needs TALLY_SRC and
# TALLY_BUILD.
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dpc_down_test as base  # noqa: E402  (helpers: Ctl, certs, framing)

ok = base.ok
wait_for = base.wait_for
ADDR = "127.0.0.2"      # the ranks' address (they join from it)


def rdv(port, job, token, rank, world, member_port, epoch=None, wait=8,
        sent=None):
    """
    One rank's (re)join: returns (params or error, final message or None).
    epoch names the epoch a rejoin was in (None: a plain join); sent (a
    threading.Event) is set once its member message is sent, when it
    waits for the final one.
    """
    raw = socket.create_connection(("127.0.0.1", port), timeout=wait,
                                   source_address=(ADDR, 0))
    s = ssl.create_default_context(cafile=base.CA).wrap_socket(
        raw, server_hostname="127.0.0.1")
    msg = {"op": "join", "v": 1, "job": job, "token": token, "rank": rank,
           "world": world}
    if epoch is not None:
        msg["epoch"] = epoch
    try:
        base.rdv_send(s, msg)
        params = base.rdv_recv(s)
        if params.get("op") != "params":
            return params, None
        base.rdv_send(s, {"op": "member", "ip": ADDR, "port": member_port})
        if sent is not None:
            sent.set()
        return params, base.rdv_recv(s)
    except (OSError, ValueError) as e:
        return {"exc": str(e)}, None
    finally:
        s.close()


def all_ranks(port, job, token, ports, epoch=None):
    """Every rank at once (threads); [(params, final)] by rank."""
    out = [None] * len(ports)

    def one(r):
        out[r] = rdv(port, job, token, r, len(ports), ports[r], epoch)
    ts = [threading.Thread(target=one, args=(r,)) for r in range(len(ports))]
    for t in ts:
        t.start()
    for t in ts:
        t.join(15)
    return out


def show(ctl, name):
    rep, _ = ctl.call({"cmd": "job_show", "name": name})
    return (rep or {}).get("job") or rep or {}


def jf(ctl, reason):
    rep, _ = ctl.call({"cmd": "stats"})
    return rep["tallyd"]["join_failures"][reason], rep["tallyd"]


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
                "dp_poll_ms = 100\n"
                "dp_dead_polls = 3\n"
                "join_timeout_s = 4\n")
    return subprocess.Popen([base.TALLYD, "-c", conf],
                            stdout=open(os.path.join(work, "tallyd.log"),
                                        "w"), stderr=subprocess.STDOUT)


def epoch_moves(ctl, port, token, fakes):
    """A job over three, one dataplane killed: a new epoch, rejoins."""
    r = all_ranks(port, "e", token, [40001, 40002])
    e1 = (r[0][1] or {}).get("epoch")
    t1 = (r[0][1] or {}).get("wire_token")
    ok(all((f or {}).get("op") == "ready" for _, f in r) and
       len(r[0][0].get("shards", [])) == 3,
       f"two ranks join the job over three dataplanes (epoch {e1})", r)
    t_kill = time.time()
    fakes[2].kill()
    moved = wait_for(lambda: show(ctl, "e").get("epoch", 0) > e1, 5)
    j = show(ctl, "e")
    why = j.get("epoch_reason") or {}
    ok(moved and why.get("cause") == "dataplane" and
       why.get("dataplane") == "dp2" and "3 admin polls" in
       why.get("missed", "") and why.get("from") == e1 and
       abs(why.get("at", 0) - t_kill) < 3,
       f"dp2 SIGKILLed: job show says epoch {j.get('epoch')}, and why "
       f"({why.get('missed')})", j)
    ok([s["dataplane"] for s in j.get("shards", [])] == ["dp0", "dp1"],
       "its slots moved to the two survivors", j.get("shards"))
    st = jf(ctl, "stale_epoch")[1]
    ok(st["epochs_ended"] == 1, "stats count the ended epoch", st)
    r = all_ranks(port, "e", token, [40001, 40002], epoch=e1)
    f0 = r[0][1] or {}
    ok(all((f or {}).get("op") == "ready" and f.get("epoch") == j["epoch"]
           for _, f in r) and f0.get("wire_token") != t1 and
       len(r[0][0].get("shards", [])) == 2,
       "both ranks rejoin naming the old epoch: ready at once, the new "
       "epoch's token and two shards", r)
    ok(jf(ctl, "stale_epoch")[1]["rejoins"] == 2, "rejoins counted")
    return j["epoch"]


def bad_rejoins(ctl, port, token, e2):
    """Rejoins that must be refused, each counted."""
    n0 = jf(ctl, "stale_epoch")[0]
    p, _ = rdv(port, "e", token, 0, 2, 40001, epoch=e2 + 5)
    ok(p.get("op") == "error" and p.get("errno") == 22 and
       "has not had epoch" in p.get("error", ""),
       "a rejoin naming an epoch the job has not had: EINVAL", p)
    p, f = rdv(port, "e", token, 0, 2, 40009, epoch=e2)
    ok(p.get("op") == "params" and (f or {}).get("errno") == 116 and
       "another data address" in (f or {}).get("error", ""),
       "a rejoin from another data address: ESTALE", (p, f))
    r = all_ranks(port, "e", token, [40003, 40004])
    e3 = (r[0][1] or {}).get("epoch", 0)
    p, _ = rdv(port, "e", token, 0, 2, 40003, epoch=e2)
    ok(e3 > e2 and p.get("op") == "error" and p.get("errno") == 116 and
       "is over" in p.get("error", ""),
       "a rejoin naming an epoch a later barrier replaced: ESTALE", p)
    ok(jf(ctl, "stale_epoch")[0] == n0 + 3,
       "each refusal counted under stale_epoch")
    r = all_ranks(port, "e", token, [40003, 40004], epoch=e3)
    j = show(ctl, "e")
    ok(all((f or {}).get("op") == "ready" and f.get("epoch") > e3
           for _, f in r) and (j.get("epoch_reason") or {}).get("cause") ==
       "rejoin", "every rank rejoining the current epoch gets a new one "
       "(cause rejoin)", (r, j.get("epoch_reason")))


def no_capacity(ctl, port, token, fakes, work):
    """Every dataplane dead: ENOSPC, fallback ring; the state keeps it."""
    n0 = jf(ctl, "no_capacity")[0]
    # Rank 0 rejoins the current epoch alone: it waits for the others.
    e = show(ctl, "e")["epoch"]
    waiting, sent = {}, threading.Event()
    t = threading.Thread(target=lambda: waiting.update(r=rdv(
        port, "e", token, 0, 2, 40003, epoch=e, sent=sent)))
    t.start()
    # It waits at its rejoin before the dataplanes die (a loaded machine
    # may take longer than any fixed sleep to get it there).
    ok(sent.wait(10), "rank 0 waits at its rejoin")
    fakes[0].kill()
    fakes[1].kill()
    wait_for(lambda: (show(ctl, "e").get("epoch_reason") or {})
             .get("cause") == "no_capacity", 5)
    j = show(ctl, "e")
    ok((j.get("epoch_reason") or {}).get("cause") == "no_capacity",
       "every dataplane dead: the epoch ends with no_capacity", j)
    p, _ = rdv(port, "e", token, 0, 2, 40003)
    ok(p.get("op") == "error" and p.get("errno") == 28 and
       p.get("fallback") == "ring" and "no capacity" in p.get("error", ""),
       "a join then hears ENOSPC with fallback ring", p)
    t.join(10)
    p, f = waiting.get("r", ({}, None))
    ok(p.get("op") == "params" and (f or {}).get("errno") == 28 and
       (f or {}).get("fallback") == "ring",
       "a rank waiting at its rejoin hears it too (ENOSPC, fallback ring)",
       waiting)
    ok(jf(ctl, "no_capacity")[0] == n0 + 2, "both counted under no_capacity")
    with open(os.path.join(work, "state.json")) as f:
        st = [x for x in json.load(f)["jobs"] if x["name"] == "e"][0]
    ok(st["epoch"] == j["epoch"] and st["epoch_reason"]["cause"] ==
       "no_capacity" and "formed_epoch" in st,
       "the state file keeps the epoch and its reason", st)


def main():
    work = tempfile.mkdtemp(prefix="tallyd-epoch.")
    socks = [os.path.join(work, f"dp{i}.sock") for i in range(3)]
    ctl = base.Ctl(os.path.join(work, "tallyd.sock"))
    rdv_port = base.free_port()
    base.CA, cert, key = base.make_certs(work)
    fakes = [subprocess.Popen([sys.executable, base.FAKE, s],
                              env=dict(os.environ,
                                       FAKE_DP_PORT=str(47474 + 10 * i)))
             for i, s in enumerate(socks)]
    tallyd = None
    try:
        wait_for(lambda: all(os.path.exists(s) for s in socks), 5)
        tallyd = start(work, socks, ctl, rdv_port, cert, key)
        up = wait_for(lambda: (ctl.call({"cmd": "ping"})[0] or {})
                      .get("dp_up") is True, 5)
        ok(up, "tallyd starts and reaches the three stand-ins")
        rep, _ = ctl.call({"cmd": "job_create", "name": "e", "world": 2,
                           "dataplanes": ["dp0", "dp1", "dp2"]})
        token = (rep or {}).get("token", "")
        ok(len(token) == 64, "job 'e' (world 2) over dp0, dp1, dp2", rep)
        e2 = epoch_moves(ctl, rdv_port, token, fakes)
        bad_rejoins(ctl, rdv_port, token, e2)
        no_capacity(ctl, rdv_port, token, fakes, work)
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

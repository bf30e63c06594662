#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
#
# tallyd's state in etcd (issue 15, docs/scale-out.md), on loopback: a
# three-member etcd cluster started here (its own ports and data dirs in
# a temporary directory, removed at the end), a stand-in tally-dp
# (fake_dp.py) and three tallyd with --state etcd://A,B,C. Checks: one
# leader; a follower refuses job_create with EROFS and names the leader;
# jobs created on the leader while rendezvous clients join through the
# followers, the leader SIGKILLed in the middle: every acknowledged job
# is in etcd and in the survivors' listings, a new leader within the
# lease time plus a turn, joins through the others keep working and their
# memberships reach tally-dp; one etcd member SIGKILLed: creates and
# joins go on, nothing lost; a leader whose key was replaced behind its
# back (a deposed leader) has its write refused and nothing written;
# every etcd member stopped (connections hang): tallyd keeps answering
# its control socket within about one deadline, refuses changes, counts
# the failures, nobody leads, and all recovers once etcd is back; the
# leader's liveness key for tally-dp expires while tally-dp is stopped;
# two tallyd with two dataplanes: a job sharded over both is stored in
# etcd with its shards, a follower shows them and programs both, and each
# dataplane has its own liveness key that expires alone; then the leader
# moves the job off the stopped one in a new epoch, its reason in etcd;
# a two-tier tree is a job value per part (spine and leaf, one id), read
# by a follower, joined through it, and deleted whole.
# Skips (TAP) when etcd is not installed. Needs TALLY_SRC, TALLY_BUILD.
import base64
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request

SRC = os.environ["TALLY_SRC"]
BUILD = os.environ["TALLY_BUILD"]
TALLYD = os.environ.get("TALLYD_BIN",
                        os.path.join(BUILD, "control/tallyd/tallyd"))
FAKE = os.path.join(SRC, "tests/control/fake_dp.py")
LEASE_S = 2

ntap = 0
nfail = 0
procs = []


def ok(cond, name, diag=None):
    """Prints one TAP line."""
    global ntap, nfail
    ntap += 1
    print(f"{'ok' if cond else 'not ok'} {ntap} - {name}", flush=True)
    if not cond:
        nfail += 1
        if diag:
            for line in str(diag).splitlines():
                print(f"#   {line}", flush=True)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_for(pred, timeout):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.05)
    return pred()


def ctl(path, req, timeout=3.0):
    """One control request; the reply object or None."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.settimeout(timeout)
    try:
        s.connect(path)
        s.send(json.dumps(req).encode())
        return json.loads(s.recv(1 << 20))
    except (OSError, ValueError):
        return None
    finally:
        s.close()


def b64(s):
    return base64.b64encode(s.encode()).decode()


def etcd(eps, path, body):
    """POSTs to the first etcd endpoint that answers; the reply or None."""
    for ep in eps:
        try:
            req = urllib.request.Request(f"http://{ep}{path}",
                                         json.dumps(body).encode())
            with urllib.request.urlopen(req, timeout=2) as r:
                return json.loads(r.read())
        except OSError:
            continue
    return None


def etcd_jobs(eps):
    """The job names under /tally/v1/jobs/, or None."""
    rep = etcd(eps, "/v3/kv/range", {"key": b64("/tally/v1/jobs/"),
                                     "range_end": b64("/tally/v1/jobs0"),
                                     "keys_only": True})
    if rep is None:
        return None
    return {base64.b64decode(kv["key"]).decode()[len("/tally/v1/jobs/"):]
            for kv in rep.get("kvs", [])}


def rdv_send(s, obj):
    body = json.dumps(obj).encode()
    s.sendall(struct.pack(">I", len(body)) + body)


def rdv_recv(s):
    buf = b""
    while len(buf) < 4:
        c = s.recv(4 - len(buf))
        if not c:
            raise OSError("closed")
        buf += c
    n = struct.unpack(">I", buf)[0]
    body = b""
    while len(body) < n:
        c = s.recv(n - len(body))
        if not c:
            raise OSError("closed")
        body += c
    return json.loads(body)


def join(port, job, token, member_port):
    """A world-1 rank's join (cleartext rendezvous); the final message."""
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=8)
    except OSError as e:
        return {"exc": str(e)}
    try:
        rdv_send(s, {"op": "join", "v": 1, "job": job, "token": token,
                     "rank": 0, "world": 1})
        p = rdv_recv(s)
        if p.get("op") != "params":
            return p
        rdv_send(s, {"op": "member", "ip": "127.0.0.1",
                     "port": member_port})
        return rdv_recv(s)
    except (OSError, ValueError) as e:
        return {"exc": str(e)}
    finally:
        s.close()


def fake_jobs(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.settimeout(2)
    try:
        s.connect(path)
        s.send(b'{"cmd":"job_list"}')
        return json.loads(s.recv(1 << 20))["jobs"]
    finally:
        s.close()


def start_etcd(work):
    """Three members on loopback; returns (client endpoints, procs)."""
    names = ["e0", "e1", "e2"]
    cports = [free_port() for _ in names]
    pports = [free_port() for _ in names]
    cluster = ",".join(f"{n}=http://127.0.0.1:{p}"
                       for n, p in zip(names, pports))
    ps = []
    for n, c, p in zip(names, cports, pports):
        log = open(os.path.join(work, n + ".log"), "w")
        ps.append(subprocess.Popen([
            "etcd", "--name", n, "--data-dir", os.path.join(work, n),
            "--listen-client-urls", f"http://127.0.0.1:{c}",
            "--advertise-client-urls", f"http://127.0.0.1:{c}",
            "--listen-peer-urls", f"http://127.0.0.1:{p}",
            "--initial-advertise-peer-urls", f"http://127.0.0.1:{p}",
            "--initial-cluster", cluster,
            "--initial-cluster-state", "new",
            "--initial-cluster-token", "tally-test"],
            stdout=log, stderr=subprocess.STDOUT))
    procs.extend(ps)
    return [f"127.0.0.1:{c}" for c in cports], ps


def start_tallyd(work, i, eps, dp, extra=()):
    sock = os.path.join(work, f"t{i}.sock")
    port = free_port()
    log = open(os.path.join(work, f"t{i}.log"), "w")
    p = subprocess.Popen([
        TALLYD, "-c", "/dev/null", "--set", f"control_socket={sock}",
        "--set", f"rendezvous=127.0.0.1:{port}",
        "--set", "rendezvous_tls=off", "--set", "metrics=off",
        "--set", f"dp_admin={dp}", "--set", "dp_poll_ms=200",
        "--state", "etcd://" + ",".join(eps),
        "--set", f"state_lease_s={LEASE_S}", *extra],
        stdout=log, stderr=subprocess.STDOUT)
    procs.append(p)
    return {"p": p, "sock": sock, "port": port, "i": i}


def stats(t):
    r = ctl(t["sock"], {"cmd": "stats"}, timeout=2)
    return r["tallyd"] if r and r.get("errno") == 0 else None


def leaders(ts):
    out = []
    for t in ts:
        s = stats(t)
        if s and s.get("state_leader"):
            out.append(t)
    return out


def create(ts, name):
    """job_create on whichever tallyd leads; (token or None, tries)."""
    for _ in range(100):
        for t in ts:
            r = ctl(t["sock"], {"cmd": "job_create", "name": name,
                                "world": 1}, timeout=3)
            if r and r.get("errno") == 0:
                return r["token"], t
        time.sleep(0.05)
    return None, None


def main():
    if shutil.which("etcd") is None:
        print("1..0 # SKIP etcd not installed (tools/deps installs "
              "etcd-server)")
        return 0
    work = tempfile.mkdtemp(prefix="tally-etcd-")
    try:
        return run(work)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.wait()
        if nfail:
            for f in sorted(os.listdir(work)):
                if f.endswith(".log") and f.startswith("t"):
                    print(f"# --- {f}")
                    with open(os.path.join(work, f)) as fh:
                        for line in fh.read().splitlines()[-25:]:
                            print(f"#   {line}")
        shutil.rmtree(work, ignore_errors=True)


def run(work):
    eps, eprocs = start_etcd(work)
    ok(wait_for(lambda: etcd(eps, "/v3/kv/range", {"key": b64("x")})
                is not None, 15), "a three-member etcd cluster answers")
    dp = os.path.join(work, "dp.sock")
    procs.append(subprocess.Popen(["/usr/bin/python3", FAKE, dp]))
    wait_for(lambda: os.path.exists(dp), 5)
    ts = [start_tallyd(work, i, eps, dp) for i in range(3)]
    ok(wait_for(lambda: len(leaders(ts)) == 1, 10),
       "three tallyd: exactly one leader")
    lead = leaders(ts)
    lead = lead[0] if lead else ts[0]
    fol = [t for t in ts if t is not lead]

    wait_for(lambda: (stats(fol[0]) or {}).get("state_leader_node"), 3)
    r = ctl(fol[0]["sock"], {"cmd": "job_create", "name": "x", "world": 1})
    ok(r is not None and r.get("errno") == 30 and
       (r.get("leader") or {}).get("rendezvous") ==
       f"127.0.0.1:{lead['port']}",
       "a follower refuses job_create (EROFS) and names the leader", r)

    # Jobs created on the leader; each joined through a follower.
    tokens = {}
    for k in range(6):
        tok, _ = create(ts, f"a{k}")
        if tok:
            tokens[f"a{k}"] = tok
    ok(len(tokens) == 6, "six jobs created on the leader", tokens.keys())
    ok(wait_for(lambda: all(any(j["name"] == n for j in
                                (ctl(fol[0]["sock"], {"cmd": "job_list"})
                                 or {}).get("jobs", []))
                            for n in tokens), 3),
       "a follower lists them (read from etcd)")
    res = [join(fol[k % 2]["port"], n, tokens[n], 40000 + k)
           for k, n in enumerate(sorted(tokens))]
    ok(all(m.get("op") == "ready" for m in res),
       "rank joins through the followers are ready", res)
    ok(wait_for(lambda: len(fake_jobs(dp)) >= 6, 3),
       "their memberships are in tally-dp", fake_jobs(dp))

    # The leader SIGKILLed while jobs are created and ranks join.
    t0 = time.monotonic()
    lead["p"].kill()
    lead["p"].wait()
    live = fol
    joins_gap = [join(live[k % 2]["port"], n, tokens[n], 41000 + k)
                 for k, n in enumerate(sorted(tokens)[:4])]
    ok(all(m.get("op") == "ready" for m in joins_gap),
       "joins through the survivors work with the leader dead", joins_gap)
    acked = dict(tokens)
    for k in range(6):
        tok, _ = create(live, f"b{k}")
        if tok:
            acked[f"b{k}"] = tok
    ok(wait_for(lambda: len(leaders(live)) == 1, 2 * LEASE_S + 2),
       "a new leader")
    took = time.monotonic() - t0
    # The lease, etcd's expiry check (every 500 ms), a follower's turn
    # (a quarter lease), and slack for a loaded machine.
    ok(took < LEASE_S + 2, f"the new leader within the lease time "
       f"({took:.1f} s, lease {LEASE_S} s)")
    names = etcd_jobs(eps)
    ok(names is not None and set(acked) <= names,
       f"every acknowledged job is in etcd ({len(acked)})",
       f"missing: {set(acked) - (names or set())}")
    for t in live:
        def listed():
            return {j["name"] for j in (ctl(t["sock"], {"cmd": "job_list"})
                                        or {}).get("jobs", [])}
        # A follower reads etcd at each turn (a quarter of the lease).
        ok(wait_for(lambda: set(acked) <= listed(), LEASE_S),
           f"tallyd {t['i']} lists every job",
           f"missing: {set(acked) - listed()}")
    new = leaders(live)
    new = new[0] if new else live[0]
    other = [t for t in live if t is not new][0]
    res = [join(other["port"], n, acked[n], 42000 + k)
           for k, n in enumerate(sorted(acked)) if n.startswith("b")]
    ok(len(res) == 6 and all(m.get("op") == "ready" for m in res),
       "new jobs joined through the follower", res)

    # One etcd member SIGKILLed: nothing lost, writes go on.
    eprocs[0].kill()
    eprocs[0].wait()
    for k in range(4):
        tok, _ = create(live, f"c{k}")
        if tok:
            acked[f"c{k}"] = tok
    ok(all(f"c{k}" in acked for k in range(4)),
       "jobs created with one etcd member dead")
    # A follower whose etcd endpoint was the killed member times out on
    # it once and may refuse a join for a job it has not read yet until
    # it has moved to a live member (docs/scale-out.md, "What an
    # unreachable etcd does"): a worker's retry then succeeds, within
    # the lease.
    res, tries = [], 0
    for k in range(4):
        if f"c{k}" not in acked:
            continue
        end = time.monotonic() + 2 * LEASE_S
        while True:
            tries += 1
            m = join(other["port"], f"c{k}", acked[f"c{k}"], 43000 + k)
            if m.get("op") == "ready" or time.monotonic() > end:
                break
            time.sleep(0.25)
        res.append(m)
    ok(all(m.get("op") == "ready" for m in res),
       f"and joined through the follower ({tries} joins for {len(res)})",
       res)
    names = etcd_jobs(eps[1:])
    ok(names is not None and set(acked) <= names,
       f"every acknowledged job is in etcd ({len(acked)})",
       f"missing: {set(acked) - (names or set())}")

    # A deposed leader: its key replaced behind its back (etcd's txn).
    new = leaders(live)
    new = new[0] if new else live[0]
    lk = b64("/tally/v1/leader")
    rep = etcd(eps[1:], "/v3/kv/deleterange", {"key": lk})
    rep = rep and etcd(eps[1:], "/v3/kv/put", {
        "key": lk, "value": b64('{"host":"usurper"}')})
    r = ctl(new["sock"], {"cmd": "job_create", "name": "fenced",
                          "world": 1})
    ok(rep is not None and r is not None and r.get("errno") in (1, 30),
       "the deposed leader's job_create is refused", r)
    names = etcd_jobs(eps[1:])
    ok(names is not None and "fenced" not in names,
       "and nothing was written")
    s = stats(new)
    ok(s is not None and not s.get("state_leader"),
       "it no longer leads", s)
    etcd(eps[1:], "/v3/kv/deleterange", {"key": lk})
    ok(wait_for(lambda: len(leaders(live)) == 1, 2 * LEASE_S + 2),
       "a leader again once the usurper's key is gone")

    # etcd unreachable (its members stopped: connections hang): tallyd
    # answers, refuses changes under the deadline, counts, recovers.
    for p in eprocs[1:]:
        p.send_signal(signal.SIGSTOP)
    worst = 0.0
    end = time.monotonic() + 3
    while time.monotonic() < end:
        for t in live:
            t0 = time.monotonic()
            r = ctl(t["sock"], {"cmd": "ping"}, timeout=5)
            worst = max(worst, time.monotonic() - t0)
        time.sleep(0.1)
    ok(worst < 2.0, f"ping answers with etcd stopped (worst {worst:.2f} s)")
    t0 = time.monotonic()
    refused = [ctl(t["sock"], {"cmd": "job_create", "name": "down",
                               "world": 1}, timeout=5) for t in live]
    took = time.monotonic() - t0
    ok(all(r is not None and r.get("errno") != 0 for r in refused) and
       took < 5, f"job_create refused while etcd is down ({took:.1f} s)",
       refused)
    s = [stats(t) for t in live]
    ok(all(x is not None and not x["etcd_up"] and x["etcd_failures"] > 0
           and x["etcd_timeouts"] > 0 and not x["state_leader"]
           for x in s), "etcd_up false, failures and timeouts counted, "
       "nobody leads", s)
    for p in eprocs[1:]:
        p.send_signal(signal.SIGCONT)
    ok(wait_for(lambda: len(leaders(live)) == 1, 4 * LEASE_S + 3),
       "etcd back: a leader again")
    tok, _ = create(live, "after")
    ok(tok is not None, "and job_create works again")
    names = etcd_jobs(eps[1:])
    ok(names is not None and set(acked) | {"after"} <= names and
       "down" not in names, "nothing lost, nothing refused written",
       names)

    # tally-dp's liveness key: the leader's lease on it, renewed while
    # tally-dp answers; gone once it stops, back when it answers again.
    fake = procs[len(eprocs)]
    dkey = "/tally/v1/dataplanes/127.0.0.1:47474"

    def dp_key():
        rep = etcd(eps[1:], "/v3/kv/range", {"key": b64(dkey)})
        kvs = (rep or {}).get("kvs", [])
        return kvs[0] if kvs else None
    ok(wait_for(lambda: dp_key() is not None, 2 * LEASE_S),
       "tally-dp's liveness key is there")
    k = dp_key() or {}
    ok(int(k.get("lease", 0)) != 0, "bound to a lease", k)
    fake.send_signal(signal.SIGSTOP)
    t0 = time.monotonic()
    gone = wait_for(lambda: dp_key() is None, 3 * LEASE_S + 4)
    took = time.monotonic() - t0
    ok(gone, f"tally-dp stopped: its key expired ({took:.1f} s)")
    fake.send_signal(signal.SIGCONT)
    ok(wait_for(lambda: dp_key() is not None, 3 * LEASE_S + 4),
       "tally-dp answers again: the key is back")
    shards(work, eps, ts, dp)
    print(f"1..{ntap}")
    return 1 if nfail else 0


def dp_live(eps, port):
    """Dataplane 127.0.0.1:port's liveness key (its kv), or None."""
    rep = etcd(eps, "/v3/kv/range",
               {"key": b64(f"/tally/v1/dataplanes/127.0.0.1:{port}")})
    kvs = (rep or {}).get("kvs", [])
    return kvs[0] if kvs else None


def etcd_job(eps, name):
    """Job name's value in etcd (an object), or None."""
    rep = etcd(eps, "/v3/kv/range", {"key": b64("/tally/v1/jobs/" + name)})
    kvs = (rep or {}).get("kvs", [])
    return json.loads(base64.b64decode(kvs[0]["value"])) if kvs else None


def shards(work, eps, old, dp):
    """Two tallyd, two dataplanes: a sharded job through etcd."""
    for t in old:
        if t["p"].poll() is None:
            t["p"].kill()
        t["p"].wait()
    dp2 = os.path.join(work, "dp2.sock")
    fake2 = subprocess.Popen(["/usr/bin/python3", FAKE, dp2],
                             env=dict(os.environ, FAKE_DP_PORT="47475"))
    procs.append(fake2)
    wait_for(lambda: os.path.exists(dp2), 5)
    ts = [start_tallyd(work, 10 + i, eps[1:], dp,
                       ("--set", f"dataplane=dp1 {dp2}"))
          for i in range(2)]
    ok(wait_for(lambda: len(leaders(ts)) == 1, 4 * LEASE_S + 3),
       "two tallyd with two dataplanes: one leader")
    lead = (leaders(ts) or ts)[0]
    fol = [t for t in ts if t is not lead][0]
    r = None
    for _ in range(60):
        r = ctl(lead["sock"], {"cmd": "job_create", "name": "sh",
                               "world": 1, "dataplanes": ["dp0", "dp1"]})
        if r and r.get("errno") == 0:
            break
        time.sleep(0.05)
    ok(r is not None and r.get("errno") == 0,
       "a job sharded over dp0 and dp1 is created", r)
    v = etcd_job(eps[1:], "sh") or {}
    ok([s.get("dataplane") for s in v.get("shards", [])] == ["dp0", "dp1"],
       "etcd's job value lists its shards", v)

    def fol_shards():
        rep = ctl(fol["sock"], {"cmd": "job_show", "name": "sh"}) or {}
        return [s.get("dataplane") for s in
                (rep.get("job") or {}).get("shards", [])]
    ok(wait_for(lambda: fol_shards() == ["dp0", "dp1"], 2 * LEASE_S),
       "a follower reads them from etcd", fol_shards())
    m = join(fol["port"], "sh", (r or {}).get("token", ""), 41000)
    ok(m.get("op") == "ready", "a rank joins it through the follower", m)
    jid = ((r or {}).get("job") or {}).get("id")
    ok(wait_for(lambda: any(j.get("id") == jid for j in fake_jobs(dp)) and
                any(j.get("id") == jid for j in fake_jobs(dp2)), 3),
       "its membership is in both dataplanes",
       (fake_jobs(dp), fake_jobs(dp2)))
    ok(wait_for(lambda: dp_live(eps[1:], 47474) is not None and
                dp_live(eps[1:], 47475) is not None, 3 * LEASE_S),
       "a liveness key for each dataplane")
    k0, k1 = dp_live(eps[1:], 47474) or {}, dp_live(eps[1:], 47475) or {}
    ok(k0.get("lease") and k1.get("lease") and
       k0.get("lease") != k1.get("lease"), "each with a lease of its own",
       (k0, k1))
    s = stats(lead) or {}
    ok(sorted(s.get("dp_live_keys", [])) ==
       ["/tally/v1/dataplanes/127.0.0.1:47474",
        "/tally/v1/dataplanes/127.0.0.1:47475"],
       "stats names both (dp_live_keys)", s.get("dp_live_keys"))
    fake2.send_signal(signal.SIGSTOP)
    gone = wait_for(lambda: dp_live(eps[1:], 47475) is None,
                    3 * LEASE_S + 4)
    ok(gone and dp_live(eps[1:], 47474) is not None,
       "dp1 stopped: its key alone expired")

    def moved():
        v = etcd_job(eps[1:], "sh") or {}
        w = v.get("epoch_reason") or {}
        return (w.get("cause") == "dataplane" and
                w.get("dataplane") == "dp1" and
                "liveness lease" in w.get("missed", "") and
                "shards" not in v and v.get("epoch", 0) > w.get("from", 0))
    ok(wait_for(moved, 5), "the leader moved the job to dp0 in a new epoch; "
       "etcd's value says why (issue 15, epochs)", etcd_job(eps[1:], "sh"))
    fake2.send_signal(signal.SIGCONT)
    ok(wait_for(lambda: dp_live(eps[1:], 47475) is not None,
                3 * LEASE_S + 4), "dp1 answers again: its key is back")
    tree(eps[1:], lead, fol, dp, dp2)


def tree(eps, lead, fol, dp, dp2):
    """A two-tier tree through etcd: a job value per part, one id."""
    r = None
    for _ in range(100):
        r = ctl(lead["sock"], {"cmd": "job_create", "name": "tr",
                               "world": 1, "leaves": ["dp1"],
                               "spine": "dp0"})
        if r and r.get("errno") == 0:
            break
        time.sleep(0.05)
    ok(r is not None and r.get("errno") == 0,
       "a tree (leaf dp1, spine dp0) is created on the leader", r)
    jid = ((r or {}).get("job") or {}).get("id")
    v, lf = etcd_job(eps, "tr") or {}, etcd_job(eps, "tr/0") or {}
    ok(v.get("tier") == "spine" and lf.get("tier") == "leaf" and
       lf.get("leaf") == 0 and v.get("tree_world") == 1 and
       v.get("id") == jid and lf.get("id") == jid,
       "etcd has the spine (tr) and the leaf (tr/0), one id", (v, lf))

    def fol_leaves():
        rep = ctl(fol["sock"], {"cmd": "job_show", "name": "tr"}) or {}
        return [x.get("name") for x in
                ((rep.get("job") or {}).get("tree") or {}).get("leaves",
                                                              [])]
    ok(wait_for(lambda: fol_leaves() == ["tr/0"], 2 * LEASE_S),
       "a follower reads the tree from etcd", fol_leaves())
    m = join(fol["port"], "tr", (r or {}).get("token", ""), 41001)
    ok(m.get("op") == "ready", "a rank joins the tree through the follower",
       m)

    def placed():
        lj = [j for j in fake_jobs(dp2) if j.get("id") == jid]
        sj = [j for j in fake_jobs(dp) if j.get("id") == jid]
        return (lj and sj and (lj[0].get("upstream") or {}).get("port") ==
                47474 and sj[0]["members"][0]["port"] == 47475)
    ok(wait_for(placed, 3), "the leaf at dp1 with its upstream, the spine "
       "at dp0 with the leaf as its member", (fake_jobs(dp), fake_jobs(dp2)))
    r = ctl(lead["sock"], {"cmd": "job_delete", "name": "tr"}, timeout=8)
    ok((r or {}).get("errno") == 0 and wait_for(
        lambda: not ({"tr", "tr/0"} & (etcd_jobs(eps) or {"tr"})), 3),
       "job delete tr: neither part is left in etcd", (r, etcd_jobs(eps)))


if __name__ == "__main__":
    sys.exit(main())

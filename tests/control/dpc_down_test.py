#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
#
# tallyd stays responsive while tally-dp does not answer (issue 11, item
# 2), without DPDK: tally-dp is tests/control/fake_dp.py, stopped with
# SIGSTOP, so that tallyd's requests go unanswered and, once the fake's
# listen backlog is full, its connects are refused. For 10 s, ping,
# job_create, job_list, job_delete and stats on the control socket must
# answer within 200 ms at the median and every one well inside tallyd's
# 1 s deadline for a tally-dp request (a tallyd that waited on tally-dp
# would pay that deadline; a loaded machine's scheduling does not come
# near it), every time; stats and ping must say dp_up
# false; a rendezvous join must get its params at once and then wait at
# the barrier until the join deadline (EHOSTDOWN), as documented. After
# SIGCONT tallyd must see tally-dp again and a join must complete, its
# membership programmed into the fake. The rendezvous runs in TLS with a
# certificate of a CA made here (openssl). TAP; needs TALLY_SRC and
# TALLY_BUILD.
import json
import os
import shutil
import signal
import socket
import ssl
import struct
import subprocess
import sys
import tempfile
import threading
import time

SRC = os.environ["TALLY_SRC"]
BUILD = os.environ["TALLY_BUILD"]
TALLYD = os.path.join(BUILD, "control/tallyd/tallyd")
FAKE = os.path.join(SRC, "tests/control/fake_dp.py")
LIMIT_S = 0.2        # median answer
WORST_S = 0.9        # every answer: below dpc.c's REQ_TIMEOUT_MS (1 s)
JOIN_TIMEOUT_S = 3

ntap = 0
nfail = 0


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
    """A TCP port of 127.0.0.1 nothing listens on right now."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Ctl:
    """tallyd's control socket, one connection per request."""

    def __init__(self, path):
        self.path = path

    def call(self, req, timeout=3.0):
        """Returns (reply object or None, seconds taken)."""
        t0 = time.monotonic()
        s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        s.settimeout(timeout)
        try:
            s.connect(self.path)
            s.send(json.dumps(req).encode())
            rep = json.loads(s.recv(1 << 20))
        except (OSError, ValueError):
            rep = None
        finally:
            s.close()
        return rep, time.monotonic() - t0


def make_certs(work):
    """
    A throwaway CA and tallyd's certificate for 127.0.0.1 (openssl), made
    now in work: the rendezvous runs in TLS, as it does by default.
    Returns (ca, cert, key) paths.
    """
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
          "-nodes"]
    ca, cert, key = (os.path.join(work, n) for n in
                     ("ca.crt", "tallyd.crt", "tallyd.key"))
    ext = os.path.join(work, "san.ext")
    with open(ext, "w") as f:
        f.write("subjectAltName=IP:127.0.0.1\n")
    run = dict(check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    subprocess.run(["openssl", "req", "-x509"] + ec + [
        "-keyout", os.path.join(work, "ca.key"), "-out", ca, "-days", "60",
        "-subj", "/CN=tally test CA",
        "-addext", "basicConstraints=critical,CA:TRUE"], **run)
    subprocess.run(["openssl", "req"] + ec + [
        "-keyout", key, "-out", os.path.join(work, "tallyd.csr"),
        "-subj", "/CN=tallyd"], **run)
    subprocess.run(["openssl", "x509", "-req", "-in",
                    os.path.join(work, "tallyd.csr"), "-CA", ca, "-CAkey",
                    os.path.join(work, "ca.key"), "-CAcreateserial",
                    "-days", "60", "-extfile", ext, "-out", cert], **run)
    os.chmod(key, 0o600)
    return ca, cert, key


CA = None   # the CA file of the rendezvous' certificate (make_certs)


def rdv_send(s, obj):
    body = json.dumps(obj).encode()
    s.sendall(struct.pack(">I", len(body)) + body)


def rdv_recv(s):
    head = b""
    while len(head) < 4:
        chunk = s.recv(4 - len(head))
        if not chunk:
            raise OSError("closed")
        head += chunk
    n = struct.unpack(">I", head)[0]
    body = b""
    while len(body) < n:
        chunk = s.recv(n - len(body))
        if not chunk:
            raise OSError("closed")
        body += chunk
    return json.loads(body)


def join(port, job, token, member_port, wait_s):
    """
    One rank of a world-1 job through the rendezvous. Returns a dict:
    params_s (seconds to the params reply), params (the reply), final
    (ready or error message, or None), final_s.
    """
    out = {"params_s": None, "params": None, "final": None, "final_s": None}
    t0 = time.monotonic()
    # From 127.0.0.2: the member address must be the one it joins from.
    raw = socket.create_connection(("127.0.0.1", port), timeout=wait_s,
                                   source_address=("127.0.0.2", 0))
    s = ssl.create_default_context(cafile=CA).wrap_socket(
        raw, server_hostname="127.0.0.1")
    try:
        rdv_send(s, {"op": "join", "v": 1, "job": job, "token": token,
                     "rank": 0, "world": 1})
        out["params"] = rdv_recv(s)
        out["params_s"] = time.monotonic() - t0
        if out["params"].get("op") != "params":
            return out
        rdv_send(s, {"op": "member", "ip": "127.0.0.2",
                     "port": member_port})
        out["final"] = rdv_recv(s)
        out["final_s"] = time.monotonic() - t0
    except (OSError, ValueError) as e:
        out["exc"] = str(e)
    finally:
        s.close()
    return out


def wait_for(pred, timeout):
    """Polls pred() every 50 ms; True once it is, False after timeout."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.05)
    return pred()


def fake_jobs(path):
    """The fake tally-dp's job list, asked directly."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.settimeout(2)
    try:
        s.connect(path)
        s.send(b'{"cmd":"job_list"}')
        return json.loads(s.recv(1 << 20))["jobs"]
    finally:
        s.close()


def hammer(ctl, seconds, lat, failures):
    """Control requests of every kind for seconds; latencies per cmd."""
    end = time.monotonic() + seconds
    i = 0
    while time.monotonic() < end:
        reqs = [("ping", {"cmd": "ping"}),
                ("job_create", {"cmd": "job_create", "name": f"b{i}",
                                "world": 2}),
                ("job_list", {"cmd": "job_list"}),
                ("stats", {"cmd": "stats"}),
                ("job_delete", {"cmd": "job_delete", "name": f"b{i}"})]
        for name, req in reqs:
            rep, dt = ctl.call(req)
            lat.setdefault(name, []).append(dt)
            if rep is None or rep.get("errno") != 0:
                failures.append((name, rep))
        i += 1
        time.sleep(0.05)


def main():
    work = tempfile.mkdtemp(prefix="tallyd-dpdown.")
    dp_sock = os.path.join(work, "dp.sock")
    ctl = Ctl(os.path.join(work, "tallyd.sock"))
    rdv_port = free_port()
    global CA
    CA, cert, key = make_certs(work)
    fake = subprocess.Popen([sys.executable, FAKE, dp_sock])
    log = open(os.path.join(work, "tallyd.log"), "w")
    tallyd = None
    try:
        wait_for(lambda: os.path.exists(dp_sock), 5)
        tallyd = subprocess.Popen([
            TALLYD, "-c", "/dev/null",
            "--set", f"control_socket={ctl.path}",
            "--set", f"rendezvous=127.0.0.1:{rdv_port}",
            "--set", f"rendezvous_tls_cert={cert}",
            "--set", f"rendezvous_tls_key={key}",
            "--set", "metrics=off",
            "--set", f"state_file={work}/state.json",
            "--set", f"dp_admin={dp_sock}",
            "--set", "dp_poll_ms=100",
            "--set", f"join_timeout_s={JOIN_TIMEOUT_S}"],
            stdout=log, stderr=subprocess.STDOUT)
        up = wait_for(lambda: (ctl.call({"cmd": "ping"})[0] or {})
                      .get("dp_up") is True, 5)
        ok(up, "tallyd starts and reaches the fake tally-dp (dp_up)")
        rep, _ = ctl.call({"cmd": "job_create", "name": "a", "world": 1})
        token = (rep or {}).get("token", "")
        ok(len(token) == 64, "job 'a' (world 1) created")
        r = join(rdv_port, "a", token, 40001, 5)
        ok((r["final"] or {}).get("op") == "ready",
           "with tally-dp answering, a join completes", r)

        # --- tally-dp stops answering ------------------------------------
        os.kill(fake.pid, signal.SIGSTOP)
        t_stop = time.monotonic()
        joined = {}
        jt = threading.Thread(target=lambda: joined.update(
            join(rdv_port, "a", token, 40002, JOIN_TIMEOUT_S + 5)))
        time.sleep(0.3)
        jt.start()
        lat, failures = {}, []
        hammer(ctl, 10.0, lat, failures)
        jt.join(JOIN_TIMEOUT_S + 6)
        worst = {k: max(v) for k, v in lat.items()}
        med = {k: sorted(v)[len(v) // 2] for k, v in lat.items()}
        desc = ", ".join(f"{k} {med[k] * 1000:.0f}/{worst[k] * 1000:.0f} ms"
                         for k in sorted(lat))
        print(f"# answers with tally-dp stopped (median/worst): {desc}")
        for name in ("ping", "job_create", "job_list", "stats",
                     "job_delete"):
            ok(name in lat and med[name] < LIMIT_S and
               worst[name] < WORST_S,
               f"{name}: answers within {LIMIT_S * 1000:.0f} ms (median) "
               f"and {WORST_S * 1000:.0f} ms (every one) for 10 s with "
               f"tally-dp stopped ({med.get(name, 0) * 1000:.0f}/"
               f"{worst.get(name, 0) * 1000:.0f} ms)")
        ok(not failures, "and every one succeeded", failures[:5])
        rep, _ = ctl.call({"cmd": "stats"})
        ping, _ = ctl.call({"cmd": "ping"})
        ok(rep is not None and rep["tallyd"]["dp_up"] is False and
           rep["dp"] is None and ping["dp_up"] is False,
           "stats and ping say dp_up false, no tally-dp counters", rep)
        ok(rep is not None and rep["tallyd"]["dp_timeouts"] > 0,
           "the unanswered requests are counted (dp_timeouts)", rep)
        ok(joined.get("params_s") is not None and
           joined["params_s"] < WORST_S,
           "a join gets its params at once "
           f"({(joined.get('params_s') or 0) * 1000:.0f} ms)", joined)
        fin = joined.get("final") or {}
        ok(fin.get("op") == "error" and fin.get("errno") == 112 and
           JOIN_TIMEOUT_S - 0.5 < joined["final_s"] < JOIN_TIMEOUT_S + 1.5,
           "then waits at the barrier until the join deadline: EHOSTDOWN "
           f"after {joined.get('final_s') or 0:.1f} s", joined)
        print(f"# tally-dp stopped for {time.monotonic() - t_stop:.1f} s")

        # --- tally-dp answers again --------------------------------------
        os.kill(fake.pid, signal.SIGCONT)
        up = wait_for(lambda: (ctl.call({"cmd": "ping"})[0] or {})
                      .get("dp_up") is True, 5)
        ok(up, "after SIGCONT tallyd sees tally-dp again (dp_up)")
        r = join(rdv_port, "a", token, 40003, 5)
        ok((r["final"] or {}).get("op") == "ready" and r["final_s"] < 2,
           "and a join completes", r)
        mine = [j for j in fake_jobs(dp_sock) if j["id"] ==
                (r.get("params") or {}).get("job_id")]
        ok(len(mine) == 1 and mine[0]["members"] ==
           [{"ip": "127.0.0.2", "port": 40003}],
           "its membership is programmed into tally-dp", mine)
        rep, _ = ctl.call({"cmd": "stats"})
        ok(rep is not None and rep["dp"] is not None,
           "tally-dp's counters are back in stats")
    finally:
        if tallyd is not None:
            tallyd.terminate()
            rc = tallyd.wait(10)
            ok(rc == 0, "tallyd stops cleanly on SIGTERM")
        os.kill(fake.pid, signal.SIGCONT)
        fake.kill()
        fake.wait()
        log.close()
        if nfail:
            with open(os.path.join(work, "tallyd.log")) as f:
                for line in f.readlines()[-40:]:
                    print(f"#   {line.rstrip()}")
        shutil.rmtree(work, ignore_errors=True)
    print(f"1..{ntap}")
    return 1 if nfail else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
#
# tallyd out of file descriptors on its control socket: a tallyd whose
# open-file limit is low (prlimit) is given more control-socket clients
# than it has descriptors. accept() then fails with EMFILE while the
# listener stays readable; tallyd must rest the listener (counted in
# ctl_fd_backoffs) instead of spinning a core, and answer again once
# clients leave. TAP; needs TALLY_BUILD. No tally-dp, no network.
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

BUILD = os.environ["TALLY_BUILD"]
TALLYD = os.path.join(BUILD, "control/tallyd/tallyd")
NOFILE = 40
CLIENTS = 60

ntap = 0
nfail = 0


def ok(cond, name, diag=None):
    """Prints one TAP line."""
    global ntap, nfail
    ntap += 1
    print(f"{'ok' if cond else 'not ok'} {ntap} - {name}", flush=True)
    if not cond:
        nfail += 1
        for line in str(diag or "").splitlines():
            print(f"#   {line}", flush=True)


def free_port():
    """A TCP port of 127.0.0.1 nothing listens on right now."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def request(path, req, timeout=2.0):
    """One control-socket request; the reply object, or None."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.settimeout(timeout)
    try:
        s.connect(path)
        s.send(json.dumps(req).encode())
        return json.loads(s.recv(1 << 16))
    except (OSError, ValueError):
        return None
    finally:
        s.close()


def cpu_s(pid):
    """User plus system CPU seconds of pid."""
    with open(f"/proc/{pid}/stat") as f:
        v = f.read().rsplit(")", 1)[1].split()
    return (int(v[11]) + int(v[12])) / os.sysconf("SC_CLK_TCK")


def main():
    if shutil.which("prlimit") is None:
        print("1..0 # SKIP no prlimit")
        return 0
    work = tempfile.mkdtemp(prefix="tally-ctlfd.")
    sock = os.path.join(work, "tallyd.sock")
    log = open(os.path.join(work, "tallyd.log"), "w")
    p = subprocess.Popen(["prlimit", f"--nofile={NOFILE}:{NOFILE}",
        TALLYD, "-c", "/dev/null",
        "--set", f"control_socket={sock}",
        "--set", f"rendezvous=127.0.0.1:{free_port()}",
        "--set", "rendezvous_tls=off", "--set", "metrics=off",
        "--set", f"state_file={work}/state.json",
        "--set", f"dp_admin={work}/dp.sock"],
        stdout=log, stderr=subprocess.STDOUT)
    clients = []
    try:
        for _ in range(100):
            if request(sock, {"cmd": "ping"}, 0.2) is not None:
                break
            time.sleep(0.05)
        ok(request(sock, {"cmd": "ping"}) is not None, "tallyd answers")
        # A connect finds the backlog full now and then (EAGAIN): try
        # again for a while, until tallyd can take no more.
        end = time.monotonic() + 3
        while len(clients) < CLIENTS and time.monotonic() < end:
            c = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            c.settimeout(0.2)
            try:
                c.connect(sock)
            except OSError:
                c.close()
                time.sleep(0.01)
                continue
            clients.append(c)
        print(f"# {len(clients)} clients connected")
        time.sleep(0.5)
        c0 = cpu_s(p.pid)
        time.sleep(3)
        used = (cpu_s(p.pid) - c0) / 3
        ok(used < 0.25, f"{CLIENTS} clients at a limit of {NOFILE} "
            f"files: tallyd uses {used * 100:.0f}% of a core (< 25%)")
        for c in clients:
            c.close()
        clients = []
        r = None
        for _ in range(40):
            r = request(sock, {"cmd": "stats"}, 0.5)
            if r is not None:
                break
            time.sleep(0.1)
        ok(r is not None and r["errno"] == 0, "it answers once they left")
        n = r["tallyd"].get("ctl_fd_backoffs", 0) if r else 0
        ok(n > 0, f"stats count the rests (ctl_fd_backoffs {n})")
    finally:
        for c in clients:
            c.close()
        p.terminate()
        p.wait(10)
        log.close()
        if nfail:
            with open(os.path.join(work, "tallyd.log")) as f:
                for line in f.read().splitlines()[-10:]:
                    print(f"#   {line}")
        shutil.rmtree(work, ignore_errors=True)
    print(f"1..{ntap}")
    return 1 if nfail else 0


if __name__ == "__main__":
    sys.exit(main())

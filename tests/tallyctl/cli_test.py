#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""tallyctl's command line against a fake control socket (TAP).

A fake tallyd listens on a temporary SOCK_SEQPACKET Unix socket and
answers canned replies, errno != 0 ones included. The test runs the built
tallyctl (argv[1]) against it and checks stdout, stderr and exit codes
(docs/tools/tallyctl.md): text and --json output, tallyd's refusals (1),
usage errors (2, with usage), an unreachable or misbehaving socket (3),
and that every request tallyctl sends is exactly the documented one. It
tests tallyctl, not tallyd: the session against the real daemon is
tests/e2e/control_test.sh.
"""
import errno
import json
import os
import pty
import re
import select
import signal
import socket
import subprocess
import sys
import tempfile
import termios
import threading
import time

TALLYCTL = sys.argv[1]
TOKEN = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"

MEMBERS = [{"rank": r, "ip": "10.77.0.%d" % (12 + r), "port": 40001}
           for r in range(4)]
COUNTERS = {"contributions": 98310, "elements": 25165830,
            "bytes_in": 103809240, "rounds": 49155, "results": 101516,
            "bytes_out": 107193756, "resent": 3206, "nacks": 0, "drops": 0}
JOB = {"name": "resnet", "id": 1, "world": 4, "window": 64,
       "max_elems": 256, "narrow": False, "group": "239.1.2.3:40001",
       "idle_timeout_s": 0, "state": "ready", "joined": 4, "epoch": 2,
       "created": 1795000000, "last_active": 1795000123,
       "members": MEMBERS, "counters": COUNTERS}
NEW_JOB = dict(JOB, state="waiting", joined=0, epoch=0, members=[],
               counters={k: 0 for k in COUNTERS})
LISTED = [dict({k: v for k, v in JOB.items() if k != "members"}),
          dict({k: v for k, v in NEW_JOB.items() if k != "members"},
               name="tiny", id=2, world=1)]
STATS = {
    "errno": 0,
    "tallyd": {"uptime_s": 12, "jobs": 2, "joins": 8, "memberships": 2,
               "join_failures": {"bad_token": 1, "unknown_job": 0,
                                 "duplicate_rank": 0, "world_mismatch": 0,
                                 "bad_rank": 0, "timeout": 0,
                                 "malformed": 0, "draining": 0},
               "ctl_requests": 5, "ctl_errors": 1, "dp_up": True,
               "dp_reprograms": 1, "dp_errors": 0},
    "dp": {"total": {"rx": 2000, "tx": 1990, "tx_dropped": 0,
                     "completed": 500, "drop_bad_token": 3},
           "lcores": [{"rx": 1200, "tx": 1190, "tx_dropped": 0,
                       "completed": 250, "drop_bad_token": 3, "lcore": 1},
                      {"rx": 800, "tx": 800, "tx_dropped": 0,
                       "completed": 250, "drop_bad_token": 0,
                       "lcore": 2}]},
}
REPLIES = {
    "ping": {"errno": 0, "version": "0.1.0", "uptime_s": 12,
             "dp_up": True},
    "job_create": {"errno": 0, "job": NEW_JOB, "token": TOKEN},
    "job_list": {"errno": 0, "jobs": LISTED},
    "job_show": {"errno": 0, "job": JOB},
    "job_delete": {"errno": 0},
    "stats": STATS,
}


LIST_REQ = {"cmd": "job_list", "limit": 1000}


def canned(req):
    return REPLIES[req["cmd"]]


def paged(per_page, jobs):
    """A job_list handler that hands out jobs per_page at a time."""
    def handler(req):
        if req["cmd"] != "job_list":
            return canned(req)
        rest = [j for j in jobs if j["id"] > req.get("after", 0)]
        page = rest[:min(per_page, req.get("limit", len(jobs)))]
        r = {"errno": 0, "jobs": page, "more": len(page) < len(rest)}
        if r["more"]:
            r["next"] = page[-1]["id"]
        return r
    return handler


class FakeTallyd:
    """Answers each connection's one request with handler(request): a
    dict (sent as JSON), bytes (sent as they are), None (never answers)
    or "close" (closes without a reply). Keeps every request."""

    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.sock.bind(path)
        self.sock.listen(16)
        self.sock.settimeout(0.05)
        self.handler = canned
        self.requests = []
        self.held = []
        self.done = False
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self):
        while not self.done:
            try:
                conn, _ = self.sock.accept()
            except socket.timeout:
                continue
            conn.settimeout(5)
            try:
                data = conn.recv(1 << 20)
            except OSError:
                conn.close()
                continue
            try:
                req = json.loads(data)
            except ValueError:
                req = data
            self.requests.append(req)
            reply = self.handler(req)
            if reply is None:
                self.held.append(conn)
                continue
            if reply != "close":
                if isinstance(reply, dict):
                    reply = json.dumps(reply).encode()
                try:
                    conn.send(reply)
                except OSError:
                    pass
            conn.close()

    def reset(self, handler=canned):
        for c in self.held:
            c.close()
        self.held = []
        self.requests = []
        self.handler = handler

    def stop(self):
        self.done = True
        self.thread.join()
        self.sock.close()


ntests = 0
nfailed = 0


def ok(cond, name, *diag):
    global ntests, nfailed
    ntests += 1
    print("%s %d - %s" % ("ok" if cond else "not ok", ntests, name))
    if not cond:
        nfailed += 1
        for d in diag:
            for line in str(d).splitlines() or [""]:
                print("#   " + line)
    sys.stdout.flush()
    return cond


def run(*args, env=None, timeout=30):
    """tallyctl ARGS: (exit code, stdout, stderr)."""
    e = {k: v for k, v in os.environ.items() if k != "TALLYCTL_SOCKET"}
    e.update(env or {})
    p = subprocess.run([TALLYCTL, *args], capture_output=True, text=True,
                       timeout=timeout, env=e, stdin=subprocess.DEVNULL)
    return p.returncode, p.stdout, p.stderr


def show(rc, out, err):
    return ["exit %d" % rc, "stdout:", out, "stderr:", err]


def main():
    tmp = tempfile.mkdtemp(prefix="tallyctl-test.")
    sock = os.path.join(tmp, "tallyd.sock")
    srv = FakeTallyd(sock)
    S = ["--socket", sock]
    try:
        replies(srv, S, sock)
        refusals(srv, S)
        usage_errors(srv, S)
        helps()
        unreachable(srv, S, tmp)
        top(srv, S, sock)
    finally:
        srv.stop()
        for f in os.listdir(tmp):
            os.unlink(os.path.join(tmp, f))
        os.rmdir(tmp)
    print("1..%d" % ntests)
    return 1 if nfailed else 0


def replies(srv, S, sock):
    """Each command's request, text and --json output."""
    srv.reset()
    r = run(*S, "ping")
    ok(r == (0, "version:  0.1.0\nuptime:   12s\ndp_up:    true\n", "") and
       srv.requests == [{"cmd": "ping"}], "ping: text, request {cmd: ping}",
       *show(*r), srv.requests)

    srv.reset()
    rc, out, err = run(*S, "--json", "ping")
    ok(rc == 0 and out.count("\n") == 1 and json.loads(out) ==
       {"version": "0.1.0", "uptime_s": 12, "dp_up": True} and err == "",
       "ping --json: the reply without errno, on one line", out, err)

    rc, out, err = run(*S, "ping", "--pretty")
    ok(rc == 0 and out.count("\n") == 5 and json.loads(out) ==
       {"version": "0.1.0", "uptime_s": 12, "dp_up": True},
       "ping --pretty (after the command): indented JSON", out, err)

    srv.reset()
    r = run("ping", env={"TALLYCTL_SOCKET": sock})
    ok(r[0] == 0 and len(srv.requests) == 1, "$TALLYCTL_SOCKET names the "
       "socket", *show(*r))
    r = run(*S, "ping", env={"TALLYCTL_SOCKET": sock + ".nope"})
    ok(r[0] == 0, "--socket overrides $TALLYCTL_SOCKET", *show(*r))

    srv.reset()
    rc, out, err = run(*S, "job", "create", "resnet", "--world", "4")
    ok(rc == 0 and srv.requests == [{"cmd": "job_create", "name": "resnet",
                                     "world": 4}],
       "job create: request has only name and world", srv.requests, err)
    ok(re.search(r"^token: %s$" % TOKEN, out, re.M) and
       "not shown again" in out and out.count(TOKEN) == 1 and
       re.search(r"^state: +waiting$", out, re.M),
       "job create: the job, the token once, and the warning", out)

    srv.reset()
    rc, out, err = run(*S, "job", "create", "--world=8", "big", "--window",
                       "128", "--max-elems=512", "--narrow", "--group",
                       "239.1.2.3:40001", "--idle-timeout", "300",
                       "--codec", "randk,density=0.1")
    ok(rc == 0 and srv.requests == [{
        "cmd": "job_create", "name": "big", "world": 8, "window": 128,
        "max_elems": 512, "narrow": True, "group": "239.1.2.3:40001",
        "idle_timeout_s": 300, "codec": "randk,density=0.1"}],
       "job create with every option: exactly the documented keys",
       srv.requests, err)

    srv.reset()
    rc, out, err = run(*S, "job", "create", "t", "--world", "128",
                       "--leaves", "r1,r2", "--spine", "core")
    ok(rc == 0 and srv.requests == [{
        "cmd": "job_create", "name": "t", "world": 128,
        "leaves": ["r1", "r2"], "spine": "core"}],
       "job create of a tree: the total world, leaves and spine",
       srv.requests, err)

    rc, out, err = run(*S, "--json", "job", "create", "resnet", "--world",
                       "4")
    ok(rc == 0 and json.loads(out) == {"job": NEW_JOB, "token": TOKEN},
       "job create --json: job and token", out, err)

    srv.reset()
    r = run(*S, "job", "list")
    want = ("NAME    ID  WORLD  JOINED  STATE    ROUNDS  BYTES_IN\n"
            "resnet   1      4       4  ready     49155  99.0 MiB\n"
            "tiny     2      1       0  waiting       0       0 B\n")
    ok(r == (0, want, "") and srv.requests == [LIST_REQ],
       "job list: the table, request {cmd: job_list, limit: 1000}",
       *show(*r))
    for where in (["job", "list", "--json"], ["job", "--json", "list"]):
        rc, out, err = run(*S, *where)
        ok(rc == 0 and json.loads(out) == {"jobs": LISTED},
           "tallyctl %s" % " ".join(where), out, err)

    srv.reset(lambda req: {"errno": 0, "jobs": []})
    r = run(*S, "job", "list")
    ok(r == (0, "no jobs\n", ""), "job list with no jobs: 'no jobs'",
       *show(*r))

    many = [dict(LISTED[1], name="j%d" % i, id=i) for i in range(1, 8)]
    srv.reset(paged(3, many))
    rc, out, err = run(*S, "--json", "job", "list")
    ok(rc == 0 and json.loads(out) == {"jobs": many} and
       srv.requests == [LIST_REQ, dict(LIST_REQ, after=3),
                        dict(LIST_REQ, after=6)],
       "job list follows the pages (more, next -> after): one array",
       out, err, srv.requests)
    srv.reset(paged(3, many))
    rc, out, err = run(*S, "job", "list")
    ok(rc == 0 and re.findall(r"^(j\d) ", out, re.M) ==
       ["j%d" % i for i in range(1, 8)], "job list (text): every page's rows",
       out, err)
    srv.reset(lambda req: {"errno": 0, "jobs": many[:2], "more": True,
                           "next": req.get("after", 0)})
    r = run(*S, "job", "list")
    ok(r[0] == 3 and r[1] == "" and "does not move on" in r[2] and
       len(srv.requests) == 2,
       "a page whose next does not move on: exit 3, no loop", *show(*r))
    srv.reset(lambda req: {"errno": 0, "jobs": many[:2], "more": True})
    r = run(*S, "job", "list")
    ok(r[0] == 3 and "does not move on" in r[2],
       "more without next: exit 3", *show(*r))

    srv.reset()
    rc, out, err = run(*S, "job", "show", "resnet")
    ok(rc == 0 and srv.requests == [{"cmd": "job_show", "name": "resnet"}]
       and re.search(r"^state: +ready$", out, re.M) and
       "  RANK  IP           PORT\n     0  10.77.0.12  40001\n" in out and
       re.search(r"^  bytes_in +103809240  99.0 MiB$", out, re.M),
       "job show: fields, members, counters", srv.requests, out, err)
    rc, out, err = run(*S, "--json", "job", "show", "resnet")
    ok(rc == 0 and json.loads(out) == {"job": JOB}, "job show --json",
       out, err)

    srv.reset()
    r = run(*S, "job", "delete", "resnet")
    ok(r == (0, "deleted job resnet\n", "") and
       srv.requests == [{"cmd": "job_delete", "name": "resnet"}],
       "job delete", *show(*r), srv.requests)
    rc, out, err = run(*S, "--json", "job", "delete", "resnet")
    ok(rc == 0 and json.loads(out) == {}, "job delete --json: {}", out)

    srv.reset()
    rc, out, err = run(*S, "stats")
    ok(rc == 0 and srv.requests == [{"cmd": "stats"}] and
       re.search(r"^  uptime +12s$", out, re.M) and
       re.search(r"^  bad_token +1$", out, re.M) and
       "tally-dp: up\n" in out and
       re.search(r"^  COUNTER +TOTAL +LCORE1 +LCORE2$", out, re.M) and
       re.search(r"^  drop_bad_token +3 +3 +0$", out, re.M) and
       "tx_dropped" not in out,
       "stats: tallyd, join failures, dp's non-zero counters per lcore",
       out, err)
    rc, out, err = run(*S, "stats", "--all")
    ok(rc == 0 and re.search(r"^  tx_dropped +0 +0 +0$", out, re.M),
       "stats --all: the zero counters too", out, err)
    rc, out, err = run(*S, "stats", "--json")
    ok(rc == 0 and json.loads(out) == {k: v for k, v in STATS.items()
                                       if k != "errno"},
       "stats --json", out, err)


def refusals(srv, S):
    """tallyd's errno != 0: exit 1 and its sentence."""
    nope = {"errno": errno.ENOENT, "error": "no job 'nope'"}
    srv.reset(lambda req: nope)
    r = run(*S, "job", "show", "nope")
    ok(r == (1, "", "tallyctl: no job 'nope'\n"),
       "a refusal: exit 1, tallyd's sentence on stderr", *show(*r))
    rc, out, err = run(*S, "--json", "job", "show", "nope")
    ok(rc == 1 and json.loads(out) == nope and
       err == "tallyctl: no job 'nope'\n",
       "a refusal with --json: the reply on stdout too", out, err)
    srv.reset(lambda req: {"errno": errno.EEXIST,
                           "error": "job 'train' exists"})
    r = run(*S, "job", "create", "train", "--world", "4")
    ok(r == (1, "", "tallyctl: job 'train' exists\n"),
       "create of an existing name: exit 1", *show(*r))
    srv.reset(lambda req: {"errno": errno.EHOSTDOWN})
    r = run(*S, "stats")
    ok(r[0] == 1 and r[2] == "tallyctl: tallyd refused the request: %s\n"
       % os.strerror(errno.EHOSTDOWN), "a refusal without a sentence: "
       "strerror", *show(*r))


def usage_errors(srv, S):
    """Exit 2 with the reason and the usage; nothing is sent."""
    create = ["job", "create", "x", "--world"]
    cases = [
        (["job", "list", "--bogus"], "unknown option '--bogus'"),
        (["--bogus", "ping"], "unknown option '--bogus'"),
        (["frobnicate"], "unknown command 'frobnicate'"),
        (["job", "frob"], "unknown command 'frob'"),
        ([], "missing a command"),
        (["job"], "missing a command after 'job'"),
        (create + ["0"], "--world: '0' is not a whole number in 1..64"),
        (create + ["65"], "--world: '65'"),
        (create + ["65", "--dataplanes", "a"],
         "--world: '65' is not a whole number in 1..64 (up to 4096 in a "
         "two-tier tree"),
        (create + ["4097", "--leaves", "a", "--spine", "s"],
         "--world: '4097'"),
        (create + ["4", "--leaves", "a,b"],
         "a two-tier tree needs both --leaves and --spine"),
        (create + ["4", "--spine", "s"],
         "a two-tier tree needs both --leaves and --spine"),
        (create + ["4x"], "--world: '4x'"),
        (create + ["-1"], "--world: '-1'"),
        (create + [" 4"], "--world: ' 4'"),
        (create + [""], "--world: ''"),
        (create + ["1e1"], "--world: '1e1'"),
        (create + ["99999999999999999999999"], "--world"),
        (create, "option --world needs a value"),
        (create + ["4", "--window", "32769"], "--window: '32769'"),
        (create + ["4", "--window", "0"], "--window: '0'"),
        (create + ["4", "--max-elems", "8193"], "--max-elems: '8193'"),
        (create + ["4", "--idle-timeout", "abc"], "--idle-timeout: 'abc'"),
        (create + ["4", "--narrow=yes"], "option --narrow takes no value"),
        (create + ["4", "--group", "239.1.2.3"], "--group: '239.1.2.3'"),
        (create + ["4", "--group", "239.1.2:5"], "--group: '239.1.2:5'"),
        (create + ["4", "--group", "239.1.2.3:0"], "--group"),
        (create + ["4", "--group", "239.1.2.3:65536"], "--group"),
        (["job", "create", "--world", "4"], "missing NAME"),
        (["job", "create", "x"], "missing --world"),
        (["job", "create", "x", "y", "--world", "4"],
         "unexpected argument 'y'"),
        (["job", "show"], "missing NAME"),
        (["job", "delete"], "missing NAME"),
        (["job", "show", "a", "b"], "unexpected argument 'b'"),
        (["job", "list", "x"], "unexpected argument 'x'"),
        (["stats", "x"], "unexpected argument 'x'"),
        (["ping", "-x"], "unknown option '-x'"),
        (["--timeout-ms", "0", "ping"], "--timeout-ms: '0'"),
        (["--timeout-ms", "5s", "ping"], "--timeout-ms: '5s'"),
        (["--socket", "", "ping"], "--socket: an empty path"),
        (["top", "--interval", "0"], "--interval: '0'"),
        (["top", "--interval", "1e1"], "--interval: '1e1'"),
        (["top", "--count", "-1"], "--count: '-1'"),
        (["help", "frob"], "unknown command 'frob'"),
        (["job", "show", "\udcff"], "NAME is not valid UTF-8"),
        (["job", "create", "\udcff", "--world", "1"],
         "NAME is not valid UTF-8"),
    ]
    for args, why in cases:
        srv.reset()
        rc, out, err = run(*S, *args)
        ok(rc == 2 and out == "" and err.startswith("tallyctl: " + why) and
           "\nUsage: tallyctl" in err and srv.requests == [],
           "usage error, exit 2: tallyctl %s" % " ".join(args).encode(
               "ascii", "backslashreplace").decode(),
           *show(rc, out, err), srv.requests)
    rc, out, err = run(*S, "job")
    ok("Usage: tallyctl job COMMAND" in err and "  job delete NAME" in err,
       "tallyctl job: job's usage", err)
    rc, out, err = run(*S, "job", "create", "x", "--world", "4x")
    ok("Usage: tallyctl job create NAME --world N" in err and
       "job list" not in err, "a command's mistake: that command's usage",
       err)


def helps():
    """help, --help, -h: usage of all commands on stdout, exit 0."""
    lines = ["job create NAME --world N", "job list", "job show NAME",
             "job delete NAME", "stats [--all]",
             "top [--interval S] [--count N]", "ping", "help",
             "--socket PATH", "--json", "--pretty", "--timeout-ms N",
             "Exit status"]
    for args in (["help"], ["--help"], ["-h"], ["--json", "-h"]):
        rc, out, err = run(*args)
        missing = [x for x in lines if x not in out]
        ok(rc == 0 and err == "" and not missing,
           "tallyctl %s: every command" % " ".join(args), missing, out)
    for args, want in (
            (["job", "create", "--help"],
             "Usage: tallyctl job create NAME --world N [--window N]"),
            (["job", "show", "-h"], "Usage: tallyctl job show NAME\n"),
            (["help", "job"], "Usage: tallyctl job COMMAND"),
            (["job", "--help"], "Usage: tallyctl job COMMAND"),
            (["help", "job", "delete"], "Usage: tallyctl job delete NAME\n"),
            (["top", "--help"],
             "Usage: tallyctl top [--interval S] [--count N]\n"),
            (["--version"], "tallyctl 0.1.0\n"),
            # a global option, so after the command as well
            (["ping", "--version"], "tallyctl 0.1.0\n"),
            (["job", "create", "x", "--version"], "tallyctl 0.1.0\n")):
        rc, out, err = run(*args)
        ok(rc == 0 and out.startswith(want) and err == "",
           "tallyctl %s" % " ".join(args), *show(rc, out, err))


def unreachable(srv, S, tmp):
    """Exit 3 and a message naming the socket."""
    missing = os.path.join(tmp, "missing.sock")
    r = run("--socket", missing, "ping")
    ok(r == (3, "", "tallyctl: cannot reach tallyd at %s: %s\n" %
             (missing, os.strerror(errno.ENOENT))),
       "no socket: exit 3, names the path", *show(*r))
    r = run("job", "list", env={"TALLYCTL_SOCKET": missing})
    ok(r[0] == 3 and missing in r[2], "no socket ($TALLYCTL_SOCKET)",
       *show(*r))

    deaf_path = os.path.join(tmp, "deaf.sock")
    deaf = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    deaf.bind(deaf_path)
    r = run("--socket", deaf_path, "ping")
    deaf.close()
    ok(r[0] == 3 and r[2] == "tallyctl: cannot reach tallyd at %s: %s\n" %
       (deaf_path, os.strerror(errno.ECONNREFUSED)),
       "nobody listening: exit 3, connection refused", *show(*r))

    srv.reset(lambda req: None)
    t = time.monotonic()
    r = run(*S, "--timeout-ms", "300", "ping")
    took = time.monotonic() - t
    sock = S[1]
    ok(r[0] == 3 and r[2] == "tallyctl: tallyd at %s did not answer "
       "within 300 ms\n" % sock and took < 10,
       "no reply: exit 3 after --timeout-ms", *show(*r))

    for name, reply, why in (
            ("no reply, the connection closed", "close",
             "closed the connection without a reply"),
            ("a reply that is not JSON", b"not json", "malformed reply"),
            ("a reply without errno", {"version": "0.1.0"},
             "malformed reply"),
            ("an array for a reply", b"[0]", "malformed reply"),
            ("a reply over 64 KiB", {"errno": 0, "version": "x" * 70000},
             "reply over 64 KiB"),
            ("a string errno", {"errno": "0"}, "malformed reply")):
        srv.reset(lambda req, reply=reply: reply)
        r = run(*S, "ping")
        ok(r[0] == 3 and r[1] == "" and why in r[2] and sock in r[2],
           "%s: exit 3" % name, *show(*r))

    srv.reset(lambda req: {"errno": 0})
    r = run(*S, "job", "list")
    ok(r[0] == 3 and "unexpected reply from tallyd" in r[2],
       "a reply without 'jobs': exit 3", *show(*r))


def counting(step):
    """A handler whose counters grow by step per job_list/stats call."""
    n = {"list": 0, "stats": 0}

    def handler(req):
        if req["cmd"] == "job_list":
            k = n["list"] = n["list"] + 1
            c = dict(COUNTERS, rounds=1000 * k * step,
                     bytes_in=1000000 * k * step,
                     bytes_out=2000000 * k * step, drops=10 * k * step)
            return {"errno": 0, "jobs": [dict(LISTED[0], counters=c)]}
        k = n["stats"] = n["stats"] + 1
        s = json.loads(json.dumps(STATS))
        s["dp"]["total"].update(rx=500 * k * step, completed=100 * k * step,
                                drop_bad_token=5 * k * step)
        return s
    return handler


def top(srv, S, sock):
    """Frames from consecutive samples; stops at N, SIGINT, q."""
    srv.reset(counting(1))
    rc, out, err = run(*S, "top", "--count", "2", "--interval", "0.2")
    rows = re.findall(r"^resnet +1 +4 +4 +ready +([0-9.]+) +([0-9.]+) +"
                      r"([0-9.]+) +([0-9.]+)$", out, re.M)
    ok(rc == 0 and err == "" and "\033" not in out and
       out.count("tallyd up 12s, 1 job, tally-dp up; rates over") == 2 and
       "\n\ntallyd up" in out and not out.startswith("\n") and
       len(rows) == 2,
       "top --count 2 (no tty): two frames, a blank line between, no ANSI",
       *show(rc, out, err))
    ok(srv.requests == [LIST_REQ, {"cmd": "stats"}] * 3,
       "top: a job_list and a stats request per sample", srv.requests)
    # 1000 rounds per sample, 0.2 s apart or a little more.
    ok(len(rows) == 2 and all(2000 < float(r[0]) <= 5100 and
                              abs(float(r[3]) - float(r[0]) / 100) < 0.06
                              for r in rows),
       "top: rounds/s from the counters' change", rows)

    srv.reset(counting(2))
    rc, out, err = run(*S, "--json", "top", "--count", "2", "--interval",
                       "0.2")
    frames = [json.loads(x) for x in out.splitlines()] if rc == 0 else []
    good = len(frames) == 2
    for f in frames:
        j = f["jobs"][0]
        dt = f["interval_s"]
        good = good and set(f) == {"time", "interval_s", "uptime_s", "dp_up",
                                   "jobs", "dp"} and \
            j["name"] == "resnet" and 0.19 < dt < 1 and \
            abs(j["rounds_per_s"] * dt - 2000) < 20 and \
            abs(j["mb_in_per_s"] * dt - 2) < 0.02 and \
            abs(j["mb_out_per_s"] * dt - 4) < 0.04 and \
            abs(j["drops_per_s"] * dt - 20) < 0.2 and \
            abs(f["dp"]["rx_per_s"] * dt - 1000) < 10 and \
            abs(f["dp"]["rounds_per_s"] * dt - 200) < 2 and \
            abs(f["dp"]["drops_per_s"] * dt - 10) < 0.1
    ok(rc == 0 and good, "top --json: one object per frame per line, "
       "rates = change / interval", *show(rc, out, err))

    srv.reset(counting(1))
    p = subprocess.Popen([TALLYCTL, *S, "top", "--interval", "0.2"],
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    first = p.stdout.readline()
    p.send_signal(signal.SIGINT)
    try:
        rc = p.wait(timeout=10)
    except subprocess.TimeoutExpired:
        p.kill()
        rc = p.wait()
    err = p.stderr.read().decode()
    p.stdout.close()
    p.stderr.close()
    ok(first.startswith(b"tallyd up") and rc == 0 and err == "",
       "top --count 0 until SIGINT: exit 0", first, rc, err)

    srv.reset(counting(1))
    master, slave = pty.openpty()
    p = subprocess.Popen([TALLYCTL, *S, "top", "--interval", "0.2"],
                         stdin=slave, stdout=slave, stderr=subprocess.PIPE)
    seen = b""
    deadline = time.monotonic() + 10
    while b"ROUNDS/S" not in seen and time.monotonic() < deadline:
        if select.select([master], [], [], 0.2)[0]:
            seen += os.read(master, 4096)
    os.write(master, b"q")
    try:
        rc = p.wait(timeout=10)
    except subprocess.TimeoutExpired:
        p.kill()
        rc = p.wait()
    echo = termios.tcgetattr(slave)[3] & termios.ECHO
    err = p.stderr.read().decode()
    p.stderr.close()
    os.close(master)
    os.close(slave)
    ok(b"\033[H\033[2J" in seen and rc == 0 and echo and err == "",
       "top on a terminal: clears the screen, q quits, echo restored",
       seen[-300:], rc, err)

    def stats_refused(req):
        if req["cmd"] == "stats":
            return {"errno": errno.EHOSTDOWN, "error": "tally-dp is down"}
        return canned(req)
    srv.reset(stats_refused)
    r = run(*S, "top", "--count", "1", "--interval", "0.1")
    ok(r == (1, "", "tallyctl: tally-dp is down\n"),
       "top: a refusal ends it with exit 1", *show(*r))
    r = run("--socket", sock + ".nope", "top", "--count", "1")
    ok(r[0] == 3, "top: no socket, exit 3", *show(*r))


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
#
# An RDMA job through tallyd's rendezvous, without DPDK or an RDMA
# device: tally-dp is tests/control/fake_dp.py advertising RoCEv2 QPNs
# 256 and 257 in its ping, the workers are tests/lib/verbs_join (two
# ranks of libtally's tally_open_opts() over the fake verbs device).
# Checks: the job is created with transport rdma (job_show says so);
# both ranks open an RDMA context given the dataplane's QPNs and one
# Q_Key; tallyd's job_add carries that Q_Key and each rank's QPN as its
# member's; a worker that asks for rdma (?transport=rdma) in a UDP job,
# or for udp in an RDMA job, is refused with EPROTONOSUPPORT. TAP; needs
# TALLY_SRC and TALLY_BUILD.
import errno
import json
import os
import shutil
import subprocess
import sys
import tempfile

SRC = os.environ["TALLY_SRC"]
BUILD = os.environ["TALLY_BUILD"]
sys.path.insert(0, os.path.join(SRC, "tests/control"))
import dpc_down_test as dd   # noqa: E402  (its tallyd harness pieces)

JOIN = os.path.join(BUILD, "tests/lib/verbs_join")
ntap = 0
nfail = 0


def ok(cond, name, diag=None):
    """Prints one TAP line."""
    global ntap, nfail
    ntap += 1
    print(f"{'ok' if cond else 'not ok'} {ntap} - {name}", flush=True)
    if not cond:
        nfail += 1
        for line in str(diag).splitlines():
            print(f"#   {line}", flush=True)


def join(port, job, token, world, query, ca):
    """verbs_join's lines, one dict per rank."""
    url = f"tally://127.0.0.1:{port}/{job}{query}"
    p = subprocess.run([JOIN, url, token, str(world)], capture_output=True,
                       text=True, timeout=30,
                       env=dict(os.environ, TALLY_CA=ca))
    return [json.loads(line) for line in p.stdout.splitlines()]


def start(work, ctl, port, cert, key, dp_sock):
    """tallyd, against the fake tally-dp at dp_sock."""
    return subprocess.Popen([
        dd.TALLYD, "-c", "/dev/null",
        "--set", f"control_socket={ctl.path}",
        "--set", f"rendezvous=127.0.0.1:{port}",
        "--set", f"rendezvous_tls_cert={cert}",
        "--set", f"rendezvous_tls_key={key}",
        "--set", "metrics=off",
        "--set", f"state_file={work}/state.json",
        "--set", f"dp_admin={dp_sock}",
        "--set", "dp_poll_ms=100",
        "--set", "join_timeout_s=10"],
        stdout=open(os.path.join(work, "tallyd.log"), "w"),
        stderr=subprocess.STDOUT)


def check_rdma_job(ctl, port, ca, dp_sock):
    """Two ranks of an RDMA job: QPNs, Q_Key, job_add."""
    rep, _ = ctl.call({"cmd": "job_create", "name": "r", "world": 2,
                       "transport": "rdma"})
    token = (rep or {}).get("token", "")
    ok(len(token) == 64, "job 'r' created with transport rdma", rep)
    show, _ = ctl.call({"cmd": "job_show", "name": "r"})
    ok((show or {}).get("job", show or {}).get("transport") == "rdma",
       "job_show says transport rdma", show)
    ranks = join(port, "r", token, 2, "", ca)
    ok(len(ranks) == 2 and all(r["rc"] == 0 for r in ranks),
       "both ranks open RDMA contexts through the rendezvous", ranks)
    if len(ranks) != 2 or any(r["rc"] != 0 for r in ranks):
        return
    ok(all(r["dp_qpns"] == [256, 257] for r in ranks),
       "each was given the dataplane's QPNs [256, 257]", ranks)
    qkey = ranks[0]["qkey"]
    ok(0 < qkey < 2 ** 31 and ranks[1]["qkey"] == qkey,
       "both got one Q_Key, high bit clear", ranks)
    jobs = dd.fake_jobs(dp_sock)
    ok(len(jobs) == 1 and jobs[0].get("qkey") == qkey,
       "tallyd's job_add carries the job's Q_Key", jobs)
    got = [m.get("qpn") for m in (jobs[0].get("members", []) if jobs
                                  else [])]
    ok(got == [r["qpn"] for r in ranks] and len(set(got)) == 2,
       "job_add's members carry each rank's QPN", (got, ranks))


def check_refusals(ctl, port, ca):
    """A transport asked for that the job does not run: refused."""
    rep, _ = ctl.call({"cmd": "job_create", "name": "u", "world": 1})
    ranks = join(port, "u", rep.get("token", ""), 1, "?transport=rdma",
                 ca)
    ok(len(ranks) == 1 and ranks[0]["rc"] == -errno.EPROTONOSUPPORT and
       "runs over udp, not rdma" in ranks[0]["error"],
       "?transport=rdma in a UDP job: EPROTONOSUPPORT", ranks)
    rep, _ = ctl.call({"cmd": "job_create", "name": "r1", "world": 1,
                       "transport": "rdma"})
    ranks = join(port, "r1", rep.get("token", ""), 1, "?transport=udp",
                 ca)
    ok(len(ranks) == 1 and ranks[0]["rc"] == -errno.EPROTONOSUPPORT,
       "?transport=udp in an RDMA job: EPROTONOSUPPORT", ranks)


def main():
    work = tempfile.mkdtemp(prefix="tallyd-rdma.")
    dp_sock = os.path.join(work, "dp.sock")
    ctl = dd.Ctl(os.path.join(work, "tallyd.sock"))
    port = dd.free_port()
    ca, cert, key = dd.make_certs(work)
    fake = subprocess.Popen([sys.executable, dd.FAKE, dp_sock],
                            env=dict(os.environ, FAKE_DP_QPNS="256,257"))
    tallyd = None
    try:
        dd.wait_for(lambda: os.path.exists(dp_sock), 5)
        tallyd = start(work, ctl, port, cert, key, dp_sock)
        up = dd.wait_for(lambda: (ctl.call({"cmd": "ping"})[0] or {})
                         .get("dp_up") is True, 5)
        ok(up, "tallyd reaches the fake tally-dp")
        check_rdma_job(ctl, port, ca, dp_sock)
        check_refusals(ctl, port, ca)
    finally:
        for p in (tallyd, fake):
            if p is not None:
                p.kill()
                p.wait()
        if nfail:
            print(open(os.path.join(work, "tallyd.log")).read()[-3000:],
                  file=sys.stderr)
        shutil.rmtree(work, ignore_errors=True)
    print(f"1..{ntap}")
    return 1 if nfail else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
#
# fake_dp.py SOCKET: a stand-in for tally-dp's admin socket, for tests of
# tallyd's side of it without DPDK (tests/control/dpc_down_test.py). It
# listens on SOCKET (SOCK_SEQPACKET, backlog 2) and answers ping,
# job_add, job_del, job_list and stats the way docs/tools/tally-dp.md
# says, from a job table in memory, with every counter at 0; with
# FAKE_DP_QPNS=256,257 in its environment its ping advertises those
# RoCEv2 QPNs ("roce"), and job_list echoes a job's "qkey"; with
# FAKE_DP_PORT=N its ping gives udp_port N (several stand-ins, each its
# own address, as a sharded job's dataplanes); job_list echoes a job's
# "upstream" and "encodings" (a two-tier tree's leaf). It only
# answers: stop it (SIGSTOP) to see what tallyd does when tally-dp
# stops answering. Not a dataplane: no packets, no limits beyond the
# keys it checks.
import json
import os
import select
import socket
import sys


def answer(jobs, req):
    """The reply (an object) to one request object."""
    cmd = req.get("cmd")
    if cmd == "ping":
        rep = {"errno": 0, "version": "fake", "steering": "software",
               "workers": 1, "ip": "127.0.0.1",
               "udp_port": int(os.environ.get("FAKE_DP_PORT", "47474"))}
        if os.environ.get("FAKE_DP_QPNS"):     # a RoCEv2 tally-dp
            rep["roce"] = {"qpns": [int(q, 0) for q in
                                    os.environ["FAKE_DP_QPNS"].split(",")],
                           "pkey": 65535}
        return rep
    if cmd == "job_add":
        jid = req.get("id")
        if jid in jobs:
            return {"errno": 17, "error": f"job {jid} exists"}
        entry = {k: req[k] for k in ("id", "world", "window", "max_elems",
                                     "narrow", "members", "qkey",
                                     "upstream", "encodings")
                 if k in req}
        if "group" in req:
            entry["group"] = req["group"]
        entry["counters"] = {}
        jobs[jid] = entry
        return {"errno": 0}
    if cmd == "job_del":
        if jobs.pop(req.get("id"), None) is None:
            return {"errno": 2, "error": f"no job {req.get('id')}"}
        return {"errno": 0}
    if cmd == "job_list":
        return {"errno": 0, "jobs": [jobs[k] for k in sorted(jobs)]}
    if cmd == "stats":
        return {"errno": 0, "total": {"rx": 0}, "lcores": []}
    return {"errno": 22, "error": "unknown command"}


def serve(path):
    """Serves SOCKET until killed."""
    if os.path.exists(path):
        os.unlink(path)
    lsock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    lsock.bind(path)
    lsock.listen(2)
    clients = []
    jobs = {}
    while True:
        ready, _, _ = select.select([lsock] + clients, [], [])
        for s in ready:
            if s is lsock:
                clients.append(lsock.accept()[0])
                continue
            try:
                msg = s.recv(1 << 16)
            except OSError:
                msg = b""
            if not msg:
                clients.remove(s)
                s.close()
                continue
            try:
                rep = answer(jobs, json.loads(msg))
            except ValueError:
                rep = {"errno": 22, "error": "not JSON"}
            try:
                s.send(json.dumps(rep).encode())
            except OSError:     # the client is gone (it gave up)
                clients.remove(s)
                s.close()


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print("usage: fake_dp.py SOCKET", file=sys.stderr)
        sys.exit(2)
    serve(sys.argv[1])

#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""A rendezvous client written from docs/control.md, free to say what
libtally never would: join one or more ranks of a job in one process and
claim any member address for them. The tests use it as an attacker.

  rdvclient.py HOST PORT JOB --rank R[,R...] --world W
               [--member IP:PORT[,IP:PORT...]] [--ca FILE | --cleartext]
               [--hold SECS]

The token comes from TALLY_TOKEN. For each rank in turn: connect (TLS,
verifying tallyd's certificate against --ca and HOST), send join, read
the reply; after params, send member (the address given for that rank,
by default this host's address toward HOST and port 40000 + rank) and
keep the connection. Then wait up to --hold seconds for what tallyd sends
on each. Prints one JSON line per rank: {"rank", "replies": [...]} where
each reply is the JSON object tallyd sent, or {"closed": true}, and
"raw" holds the bytes of the first reply in hex (to compare replies
byte for byte).
"""
import argparse
import json
import os
import select
import socket
import ssl
import struct
import sys
import time


def frame(obj):
    body = json.dumps(obj).encode()
    return struct.pack(">I", len(body)) + body


def read_exact(s, n, deadline):
    buf = b""
    while len(buf) < n:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        if not (isinstance(s, ssl.SSLSocket) and s.pending()):
            r, _, _ = select.select([s], [], [], left)
            if not r:
                raise TimeoutError
        try:
            chunk = s.recv(n - len(buf))
        except ssl.SSLWantReadError:
            continue
        if not chunk:
            raise EOFError
        buf += chunk
    return buf


def recv_msg(s, deadline):
    """One message: (object, raw bytes with the prefix), or None at EOF."""
    try:
        pre = read_exact(s, 4, deadline)
        body = read_exact(s, struct.unpack(">I", pre)[0], deadline)
    except (EOFError, ConnectionResetError):
        return None, b""
    return json.loads(body), pre + body


def connect(a):
    raw = socket.create_connection((a.host, a.port), timeout=10)
    if a.cleartext:
        return raw
    ctx = ssl.create_default_context(cafile=a.ca)
    return ctx.wrap_socket(raw, server_hostname=a.host)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("host")
    ap.add_argument("port", type=int)
    ap.add_argument("job")
    ap.add_argument("--rank", required=True)
    ap.add_argument("--world", type=int, required=True)
    ap.add_argument("--member", default="")
    ap.add_argument("--ca")
    ap.add_argument("--cleartext", action="store_true")
    ap.add_argument("--hold", type=float, default=0)
    a = ap.parse_args()
    token = os.environ["TALLY_TOKEN"]
    ranks = [int(r) for r in a.rank.split(",")]
    members = a.member.split(",") if a.member else []
    out = []
    for k, r in enumerate(ranks):
        res = {"rank": r, "replies": []}
        out.append(res)
        try:
            s = connect(a)
        except (ssl.SSLError, OSError) as e:
            res["error"] = str(e)
            continue
        res["sock"] = s
        s.sendall(frame({"op": "join", "v": 1, "job": a.job,
                         "token": token, "rank": r, "world": a.world}))
        m, raw = recv_msg(s, time.monotonic() + 10)
        res["raw"] = raw.hex()
        res["replies"].append(m if m is not None else {"closed": True})
        if m is None or m.get("op") != "params":
            continue
        if k < len(members):
            ip, port = members[k].rsplit(":", 1)
        else:
            ip, port = s.getsockname()[0], 40000 + r
        s.sendall(frame({"op": "member", "ip": ip, "port": int(port)}))
    deadline = time.monotonic() + a.hold
    for res in out:
        s = res.pop("sock", None)
        if s is None:
            continue
        if res["replies"][-1].get("op") != "params":
            s.close()
            continue
        try:
            m, _ = recv_msg(s, deadline)
            res["replies"].append(m if m is not None else {"closed": True})
        except TimeoutError:
            res["replies"].append({"waiting": True})
        s.close()
    for res in out:
        print(json.dumps(res))
    sys.stdout.flush()


if __name__ == "__main__":
    main()

#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
#
# rdvjoin.py HOST PORT JOB TOKEN RANK WORLD [WAIT_S]: one rank's join
# through tallyd's rendezvous (docs/control.md, "Rendezvous protocol"),
# timed. Prints one JSON object: "params_ms" (join to params or error),
# "params" (that reply), and, when params came, "final" (ready or error
# after the member message; null if none came within WAIT_S, default 0:
# leave right after params) with "final_ms". Exits 0 when a reply came
# to the join, 1 otherwise. Tests use it to see how soon tallyd answers.
# In TLS, tallyd's certificate checked against $TALLY_CA and HOST, as
# libtally does (TALLY_TLS=off: without).
import json
import os
import socket
import ssl
import struct
import sys
import time


def send(s, obj):
    body = json.dumps(obj).encode()
    s.sendall(struct.pack(">I", len(body)) + body)


def recv_exact(s, n):
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise OSError("connection closed")
        buf += chunk
    return buf


def recv(s):
    n = struct.unpack(">I", recv_exact(s, 4))[0]
    return json.loads(recv_exact(s, n))


def main():
    if len(sys.argv) not in (7, 8):
        print("usage: rdvjoin.py HOST PORT JOB TOKEN RANK WORLD [WAIT_S]",
              file=sys.stderr)
        return 2
    host, port, job, token, rank, world = sys.argv[1:7]
    wait_s = float(sys.argv[7]) if len(sys.argv) == 8 else 0.0
    out = {"params_ms": None, "params": None, "final": None,
           "final_ms": None}
    t0 = time.monotonic()
    try:
        s = socket.create_connection((host, int(port)), timeout=10)
        if os.environ.get("TALLY_TLS") != "off":
            ctx = ssl.create_default_context(
                cafile=os.environ.get("TALLY_CA") or None)
            s = ctx.wrap_socket(s, server_hostname=host)
        send(s, {"op": "join", "v": 1, "job": job, "token": token,
                 "rank": int(rank), "world": int(world)})
        out["params"] = recv(s)
        out["params_ms"] = round((time.monotonic() - t0) * 1000, 1)
        if out["params"].get("op") == "params" and wait_s > 0:
            s.settimeout(wait_s)
            send(s, {"op": "member", "ip": s.getsockname()[0],
                     "port": 40000 + int(rank)})
            out["final"] = recv(s)
            out["final_ms"] = round((time.monotonic() - t0) * 1000, 1)
        s.close()
    except (OSError, ValueError) as e:
        out["exception"] = str(e)
    print(json.dumps(out, sort_keys=True))
    return 0 if out["params"] is not None else 1


if __name__ == "__main__":
    sys.exit(main())

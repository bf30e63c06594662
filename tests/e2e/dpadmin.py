#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
#
# dpadmin.py SOCKET JSON: sends one request to tally-dp's admin socket
# (SOCK_SEQPACKET, one JSON object per message) and prints the reply.
# Exits 0 when the reply's errno is 0, 1 otherwise, 2 when the socket
# cannot be reached. Tests use it until tallyctl arrives.
import json
import socket
import sys


def call(path, req, timeout=5.0):
    """Sends req (a str or an object) and returns the decoded reply."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.settimeout(timeout)
    try:
        s.connect(path)
        s.send(req.encode() if isinstance(req, str) else
               json.dumps(req).encode())
        return json.loads(s.recv(1 << 20))
    finally:
        s.close()


def main():
    if len(sys.argv) != 3:
        print("usage: dpadmin.py SOCKET JSON", file=sys.stderr)
        return 2
    try:
        rep = call(sys.argv[1], sys.argv[2])
    except OSError as e:
        print(f"dpadmin: {sys.argv[1]}: {e}", file=sys.stderr)
        return 2
    print(json.dumps(rep, sort_keys=True))
    return 0 if rep.get("errno") == 0 else 1


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""What a sniffer on the control network sees: every frame on an
interface (AF_PACKET, as tcpdump would take them), for a while.

  sniff.py IFACE OUT --secs S [--port P]

Writes every frame, whole, to OUT (concatenated) and prints one JSON
object: frames (all of them) and port_frames (TCP frames to or from port
P, 7470 by default: the rendezvous), so a test can tell that it saw the
traffic it then searches.
"""
import argparse
import json
import socket
import struct
import sys
import time

ETH_P_ALL = 0x0003


def tcp_port_of(f, port):
    if len(f) < 34 or f[12:14] != b"\x08\x00" or f[23] != 6:
        return False
    ihl = (f[14] & 0x0F) * 4
    if len(f) < 14 + ihl + 4:
        return False
    sport, dport = struct.unpack(">HH", f[14 + ihl:18 + ihl])
    return port in (sport, dport)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("iface")
    ap.add_argument("out")
    ap.add_argument("--secs", type=float, required=True)
    ap.add_argument("--port", type=int, default=7470)
    a = ap.parse_args()
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW,
                      socket.htons(ETH_P_ALL))
    s.bind((a.iface, 0))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    end = time.monotonic() + a.secs
    frames = port_frames = 0
    with open(a.out, "wb") as out:
        # Ready: the caller may start what it wants captured.
        print("ready", file=sys.stderr, flush=True)
        while True:
            left = end - time.monotonic()
            if left <= 0:
                break
            s.settimeout(left)
            try:
                f = s.recv(65536)
            except socket.timeout:
                break
            frames += 1
            port_frames += tcp_port_of(f, a.port)
            out.write(f)
    print(json.dumps({"frames": frames, "port_frames": port_frames}))


if __name__ == "__main__":
    main()

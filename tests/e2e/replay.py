#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Records a worker's tally packets, and sends them (or forgeries) later.

  replay.py capture IFACE DP_IP FILE [--count N] [--timeout S]
  replay.py send IFACE FILE [--forge payload|nack] [--every S] [--for S]
  replay.py nack IFACE DP_IP NETNS [--for S]

capture runs inside a worker's namespace (ip netns exec NS ...): an
AF_PACKET socket on IFACE sees the frames the worker sends to the
dataplane at DP_IP, and the first --count tally contributions (whole
Ethernet frames: the worker's own MAC, IPv4 address and UDP port) go to
FILE. send puts FILE's frames on IFACE again, all of them every --every
seconds for --for seconds: from the worker's own namespace, a replay
from its own address, as an attacker on the segment (or a network that
holds packets back) would do. With --forge they are changed first:
payload flips the low bit of every payload byte (the header kept);
nack turns each into a NACK (status early) from the dataplane back to
the worker (send it from another namespace on the segment). A tag (flag
AUTH) is kept as it was, so it no longer fits a forgery.

nack runs inside a worker's namespace and watches its contributions for
--for seconds; for each it sends at once, from the network namespace
NETNS (a name of `ip netns`: another host on the segment, with its own
MAC), a NACK (early) to the worker that echoes the contribution's
header and carries its tag: a forged refusal of the very chunk in
flight.

The UDP checksum of every frame is set to 0 (none): captured frames may
hold a partial one left for an offload. Each command prints one line of
counts and stops by itself.
"""
import argparse
import socket
import struct
import sys
import time

ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4
MAGIC = b"\x7a\x11"
HDR_LEN = 40


def is_tally(frame, dp_ip):
    """The UDP payload of a tally frame to dp_ip, else None."""
    if len(frame) < 14 + 20 + 8 + HDR_LEN or frame[12:14] != b"\x08\x00":
        return None
    ihl = (frame[14] & 0x0F) * 4
    if frame[14 + 9] != 17 or frame[14 + 16:14 + 20] != dp_ip:
        return None
    total = struct.unpack(">H", frame[16:18])[0]
    if total + 14 != len(frame) or total > 9000:
        return None
    udp = 14 + ihl
    pl = frame[udp + 8:]
    return pl if pl[:2] == MAGIC else None


def ip_cksum(hdr):
    s = 0
    for i in range(0, len(hdr), 2):
        s += hdr[i] << 8 | hdr[i + 1]
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def forge_payload(frame):
    """Flips the low bit of every payload byte after the tally header."""
    f = bytearray(frame)
    udp = 14 + (f[14] & 0x0F) * 4
    start = udp + 8 + HDR_LEN
    end = len(f) - (16 if f[udp + 8 + 4] & 0x10 else 0)
    for i in range(start, end):
        f[i] ^= 1
    return bytes(f)


def forge_nack(frame):
    """The frame as a NACK (early) from the dataplane back to its sender."""
    f = bytearray(frame)
    ihl = (f[14] & 0x0F) * 4
    udp = 14 + ihl
    t = udp + 8
    auth = f[t + 4] & 0x10
    f[0:6], f[6:12] = frame[6:12], frame[0:6]
    f[14 + 12:14 + 16], f[14 + 16:14 + 20] = \
        frame[14 + 16:14 + 20], frame[14 + 12:14 + 16]
    f[udp:udp + 2], f[udp + 2:udp + 4] = frame[udp + 2:udp + 4], \
        frame[udp:udp + 2]
    f[t + 3] = 5            # NACK
    f[t + 4] &= 0x07 | 0x10  # RETX, LAST, SET, AUTH
    f[t + 17] = 13          # early
    tag = bytes(frame[len(frame) - 16:]) if auth else b""
    f = f[:t + HDR_LEN] + tag
    total = len(f) - 14
    f[16:18] = struct.pack(">H", total)
    f[24:26] = b"\0\0"
    f[24:26] = struct.pack(">H", ip_cksum(bytes(f[14:14 + ihl])))
    f[udp + 4:udp + 6] = struct.pack(">H", total - ihl)
    f[udp + 6:udp + 8] = b"\0\0"
    return bytes(f)


def capture(a):
    dp_ip = socket.inet_aton(a.dp_ip)
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW,
                      socket.htons(ETH_P_ALL))
    s.bind((a.iface, 0))
    s.settimeout(0.5)
    kept = []
    deadline = time.monotonic() + a.timeout
    while len(kept) < a.count and time.monotonic() < deadline:
        try:
            frame, addr = s.recvfrom(65536)
        except socket.timeout:
            continue
        if addr[2] != PACKET_OUTGOING:
            continue
        pl = is_tally(frame, dp_ip)
        if pl is None or pl[3] not in (1, 3):   # SUM or MAX
            continue
        f = bytearray(frame)
        udp = 14 + (f[14] & 0x0F) * 4
        f[udp + 6:udp + 8] = b"\0\0"
        kept.append(bytes(f))
    with open(a.file, "wb") as out:
        for f in kept:
            out.write(struct.pack(">H", len(f)) + f)
    print("replay: captured %d frames" % len(kept))
    return 0 if kept else 1


def send(a):
    kept = []
    with open(a.file, "rb") as f:
        d = f.read()
    i = 0
    while i + 2 <= len(d):
        n = struct.unpack(">H", d[i:i + 2])[0]
        kept.append(d[i + 2:i + 2 + n])
        i += 2 + n
    if a.forge == "payload":
        kept = [forge_payload(f) for f in kept]
    elif a.forge == "nack":
        kept = [forge_nack(f) for f in kept]
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW,
                      socket.htons(ETH_P_ALL))
    s.bind((a.iface, 0))
    sent = 0
    end = time.monotonic() + a.dur
    while kept and time.monotonic() < end:
        for f in kept:
            s.send(f)
            sent += 1
        time.sleep(a.every)
    print("replay: sent %d frames (%d distinct)" % (sent, len(kept)))
    return 0 if kept else 1


def nack(a):
    import ctypes
    import os
    dp_ip = socket.inet_aton(a.dp_ip)
    sniff = socket.socket(socket.AF_PACKET, socket.SOCK_RAW,
                          socket.htons(ETH_P_ALL))
    sniff.bind((a.iface, 0))
    sniff.settimeout(0.2)
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open("/var/run/netns/" + a.netns, os.O_RDONLY)
    if libc.setns(fd, 0x40000000) != 0:     # CLONE_NEWNET
        sys.exit("replay.py: setns %s: %s" %
                 (a.netns, os.strerror(ctypes.get_errno())))
    os.close(fd)
    out = socket.socket(socket.AF_PACKET, socket.SOCK_RAW,
                        socket.htons(ETH_P_ALL))
    out.bind((a.iface, 0))
    mac = out.getsockname()[4]     # this namespace's MAC (not sysfs')
    sent = 0
    end = time.monotonic() + a.dur
    while time.monotonic() < end:
        try:
            frame, addr = sniff.recvfrom(65536)
        except socket.timeout:
            continue
        pl = is_tally(frame, dp_ip) if addr[2] == PACKET_OUTGOING else None
        if pl is None or pl[3] not in (1, 3) or pl[24:26] == b"\0\0":
            continue
        f = bytearray(forge_nack(frame))
        f[6:12] = mac           # our own MAC: the bridge stays right
        out.send(bytes(f))
        sent += 1
    print("replay: sent %d forged NACKs" % sent)
    return 0 if sent else 1


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("capture")
    c.add_argument("iface")
    c.add_argument("dp_ip")
    c.add_argument("file")
    c.add_argument("--count", type=int, default=64)
    c.add_argument("--timeout", type=float, default=20.0)
    t = sub.add_parser("send")
    t.add_argument("iface")
    t.add_argument("file")
    t.add_argument("--every", type=float, default=0.05)
    t.add_argument("--for", dest="dur", type=float, default=3.0)
    t.add_argument("--forge", choices=["payload", "nack"])
    k = sub.add_parser("nack")
    k.add_argument("iface")
    k.add_argument("dp_ip")
    k.add_argument("netns")
    k.add_argument("--for", dest="dur", type=float, default=3.0)
    a = ap.parse_args()
    rc = {"capture": capture, "send": send, "nack": nack}[a.cmd](a)
    sys.stdout.flush()
    return rc


if __name__ == "__main__":
    sys.exit(main())

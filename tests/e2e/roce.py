#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""RoCEv2 workers and forgeries for tests/e2e/roce_test.sh.

  roce.py worker IFACE [options]   sums two tensors through tally-dp
  roce.py forge IFACE --kind K ... sends --count refusable packets

Every frame is built by scapy's RoCE layers (python3-scapy,
scapy.contrib.roce: BTH, and the ICRC scapy computes), with the DETH and
ImmDt as raw bytes, and sent from an AF_PACKET socket in the worker's
namespace: an encoder that shares nothing with tally-dp's. Written from
docs/protocol.md ("RoCEv2 framing", "Header", "Rounds").

worker: a UD queue pair of number --qpn at --ip. Chunk c of a tensor
goes to slot c mod --window, to tally-dp's QPN qpns[slot mod len(qpns)],
with the job's --qkey; every slot's rounds in order, retransmission
(flag RETX) on timeout. Two tensors: i32 (--i32-chunks chunks of
--elems) and i8 (--i8-chunks chunks of --elems - 1 elements: odd
lengths, so PadCnt is 3 on the way up and, the job's results narrow, on
the way down). Every other contribution carries an immediate (opcode
UD SEND with immediate). Each rank's data comes from --seed and its
rank, so every worker computes the exact sums itself and compares.
Every result frame is checked: to our IP and QPN, from the slot's QPN,
the job's Q_Key, P_Key 0xffff, PadCnt as long as the pad, and its ICRC
as scapy recomputes it. Prints one line of counts; exits 0 when every
sum is exact and every frame held.

forge: --count contributions of a member (slot 0, round 0), each broken
one way (--kind): icrc (last byte flipped), pkey (0x1234), qkey
(another), qpn (a destination QPN tally-dp does not have), member (a
source QPN that is not the rank's), ip (nothing changed: run it from a
host that is not the rank's). tally-dp must drop every one.
"""
import argparse
import errno
import os
import select
import socket
import struct
import sys
import time

import numpy as np
from scapy.compat import raw
from scapy.contrib.roce import BTH
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import ARP, Ether
from scapy.packet import Raw
from scapy.sendrecv import srp1

ETH_P_IP = 0x0800
ROCE_PORT = 4791
OP_UD_SEND, OP_UD_SEND_IMM = 0x64, 0x65
HDR = struct.Struct(">HBBBBHQBBHIHhIQ")	# 40 bytes
MAGIC, VERSION = 0x7A11, 2
T_SUM, T_SUM_RESULT, T_NACK = 1, 2, 5
F_RETX, F_LAST, F_SET = 0x01, 0x02, 0x04
ENC_I32, ENC_I8 = 2, 4
NO_BLOCK = 0xFFFFFFFF
RESULT_RANK = 255


def dp_mac(iface, dp_ip):
    """tally-dp's MAC: it answers ARP."""
    for _ in range(10):
        r = srp1(Ether(dst="ff:ff:ff:ff:ff:ff") / ARP(pdst=dp_ip),
                 iface=iface, timeout=1, verbose=0)
        if r is not None and ARP in r:
            return r[ARP].hwsrc
    raise SystemExit("no ARP answer from %s" % dp_ip)


def icrc_ok(frame):
    """Whether the frame's ICRC is what scapy computes for it."""
    p = Ether(frame)
    want = p[BTH].icrc
    del p[BTH].icrc
    return Ether(raw(p))[BTH].icrc == want


class Peer:
    """One UD QP's view of the link: the frames it sends and receives."""

    def __init__(self, a):
        self.a = a
        self.mac = open("/sys/class/net/%s/address" % a.iface).read().strip()
        self.dmac = dp_mac(a.iface, a.dp)
        self.tx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
        self.tx.bind((a.iface, 0))
        # ETH_P_IP, not ETH_P_ALL: delivered after the netdev ingress
        # hook, so the testbed's downstream loss reaches us too.
        self.rx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW,
                                socket.htons(ETH_P_IP))
        self.rx.bind((a.iface, ETH_P_IP))
        self.rx.setblocking(False)
        # The kernel would answer results with port unreachable.
        self.sink = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sink.bind((a.ip, ROCE_PORT))
        self.sent = 0
        self.lost = 0

    def frame(self, msg, dqpn, imm=None, pkey=0xFFFF, qkey=None,
              sqpn=None, psn=0):
        """msg as a UD SEND (with immediate when imm is not None)."""
        a = self.a
        pad = -len(msg) % 4
        deth = struct.pack(">II", a.qkey if qkey is None else qkey,
                           a.qpn if sqpn is None else sqpn)
        body = deth + (b"" if imm is None else struct.pack(">I", imm))
        p = (Ether(src=self.mac, dst=self.dmac) /
             IP(src=a.ip, dst=a.dp, flags="DF", ttl=64) /
             UDP(sport=0xC000 | (a.qpn & 0x3FFF), dport=ROCE_PORT,
                 chksum=0) /
             BTH(opcode=OP_UD_SEND if imm is None else OP_UD_SEND_IMM,
                 padcount=pad, pkey=pkey, dqpn=dqpn, psn=psn & 0xFFFFFF) /
             Raw(body + msg + b"\0" * pad))
        return raw(p)

    def send(self, f):
        """Sends frame f. ENOBUFS is the testbed's upstream loss: a drop
        at the netdev egress hook fails an AF_PACKET send that way."""
        self.sent += 1
        try:
            self.tx.send(f)
        except OSError as e:
            if e.errno != errno.ENOBUFS:
                raise
            self.lost += 1

    def frames(self, wait):
        """Result frames to us within wait seconds (at least one poll)."""
        r, _, _ = select.select([self.rx], [], [], max(wait, 0))
        out = []
        while r:
            try:
                f = self.rx.recv(65536)
            except BlockingIOError:
                break
            if len(f) < 14 + 20 + 8 + 12 + 8 + 4 or f[12:14] != b"\x08\0":
                continue
            if f[23] != 17 or socket.inet_ntoa(f[30:34]) != self.a.ip:
                continue
            if struct.unpack(">H", f[36:38])[0] != ROCE_PORT:
                continue
            out.append(f)
        return out


def data(seed, rank, n, enc):
    rng = np.random.default_rng(seed * 1000 + rank)
    if enc == ENC_I32:
        return rng.integers(-(1 << 20), 1 << 20, n).astype("<i4")
    return rng.integers(-30, 31, n).astype("i1")


class Worker:
    def __init__(self, a):
        self.a = a
        self.peer = Peer(a)
        self.rounds = [0] * a.window
        self.n = {"results": 0, "retransmits": 0, "icrc_ok": 0,
                  "bad": 0, "imm": 0}

    def check(self, f, slot_qpn):
        """A result frame's RoCE headers; returns the tally message or
        None (counted as bad)."""
        a = self.a
        p = Ether(f)
        b = p[BTH]
        body = raw(b.payload)
        why = None
        if b.opcode != OP_UD_SEND or b.pkey != 0xFFFF or b.version != 0:
            why = "bth %r" % b.summary()
        elif b.dqpn != a.qpn:
            why = "dest QPN %#x" % b.dqpn
        elif not icrc_ok(f):
            why = "ICRC"
        elif len(body) < 8 + HDR.size + b.padcount:
            why = "short"
        qkey, sqpn = struct.unpack(">II", body[:8]) if len(body) >= 8 \
            else (None, None)
        if why is None and qkey != a.qkey:
            why = "Q_Key %#x" % qkey
        if why is None and sqpn != slot_qpn(HDR.unpack_from(body, 8)[9]):
            why = "source QPN %#x" % sqpn
        if why is None and any(body[len(body) - b.padcount:]):
            why = "pad not zero"
        if why is not None:
            self.n["bad"] += 1
            print("bad result frame: %s" % why, file=sys.stderr)
            return None
        self.n["icrc_ok"] += 1
        return body[8:len(body) - b.padcount]

    def reduce(self, enc, x, elems):
        """Sums x over the job; returns the result array."""
        a, peer = self.a, self.peer
        n = len(x)
        nchunks = (n + elems - 1) // elems
        esz = x.itemsize
        out = np.zeros(n, dtype=x.dtype)
        inflight = {}
        done = 0
        qpns = a.qpns

        def slot_qpn(slot):
            return qpns[slot % len(qpns)]

        def send_chunk(c, retx=False):
            slot = c % a.window
            off = c * elems
            cnt = min(elems, n - off)
            rnd = self.rounds[slot]
            flags = (F_LAST if c == nchunks - 1 else 0) | \
                (F_SET if rnd & 1 else 0) | (F_RETX if retx else 0)
            msg = HDR.pack(MAGIC, VERSION, T_SUM, flags, enc, a.job,
                           a.token, a.rank, 0, slot, off, cnt, 0,
                           NO_BLOCK, rnd) + x[off:off + cnt].tobytes()
            imm = c if c & 1 else None
            self.n["imm"] += imm is not None
            peer.send(peer.frame(msg, slot_qpn(slot), imm=imm, psn=c))
            return slot

        for c in range(min(a.window, nchunks)):
            inflight[send_chunk(c)] = [c, time.monotonic() + a.rto, a.rto]
        progress = time.monotonic()
        while done < nchunks:
            now = time.monotonic()
            if now - progress > a.timeout:
                raise SystemExit("rank %d: no progress for %.0f s (%d of "
                                 "%d chunks)" % (a.rank, a.timeout, done,
                                                 nchunks))
            wait = min(e[1] for e in inflight.values()) - now
            for f in peer.frames(wait):
                m = self.check(f, slot_qpn)
                if m is None:
                    continue
                (magic, _, typ, _, renc, job, _, rank, status, slot, off,
                 cnt, _, _, rnd) = HDR.unpack_from(m)
                e = inflight.get(slot)
                if magic != MAGIC or job != a.job or e is None or \
                        rnd != self.rounds[slot] or off != e[0] * elems:
                    continue
                if typ == T_NACK:
                    raise SystemExit("NACK status %d" % status)
                if typ != T_SUM_RESULT or rank != RESULT_RANK or \
                        renc != enc or len(m) != HDR.size + cnt * esz:
                    self.n["bad"] += 1
                    continue
                out[off:off + cnt] = np.frombuffer(m[HDR.size:],
                                                   dtype=x.dtype)
                self.n["results"] += 1
                self.rounds[slot] += 1
                done += 1
                progress = time.monotonic()
                del inflight[slot]
                if e[0] + a.window < nchunks:
                    c = e[0] + a.window
                    inflight[send_chunk(c)] = [c, time.monotonic() + a.rto,
                                               a.rto]
            now = time.monotonic()
            for slot, e in inflight.items():
                if e[1] <= now:
                    e[2] = min(e[2] * 2, 0.5)
                    e[1] = now + e[2]
                    self.n["retransmits"] += 1
                    send_chunk(e[0], retx=True)
        return out

    def run(self):
        a = self.a
        ok = True
        for enc, elems, chunks in ((ENC_I32, a.elems, a.i32_chunks),
                                   (ENC_I8, a.elems - 1, a.i8_chunks)):
            n = elems * chunks - 3
            want = sum(data(a.seed, r, n, enc).astype(np.int64)
                       for r in range(a.world))
            if enc == ENC_I8:	# narrow results: saturated
                want = np.clip(want, -128, 127)
            got = self.reduce(enc, data(a.seed, a.rank, n, enc), elems)
            exact = np.array_equal(got.astype(np.int64), want)
            ok = ok and exact
            print("%s: %d elements, %s" % ("i32" if enc == ENC_I32 else
                                            "i8", n, "exact" if exact else
                                            "WRONG"))
        print("rank %d: sent %d frames (%d lost at once), %s" % (a.rank,
              self.peer.sent, self.peer.lost,
              ", ".join("%s %d" % kv for kv in self.n.items())))
        return 0 if ok and self.n["bad"] == 0 else 1


def forge(a):
    """--count contributions, each refusable for --kind."""
    peer = Peer(a)
    msg = HDR.pack(MAGIC, VERSION, T_SUM, F_LAST, ENC_I32, a.job, a.token,
                   a.rank, 0, 0, 0, 4, 0, NO_BLOCK, 0) + bytes(16)
    kw = {}
    if a.kind == "pkey":
        kw["pkey"] = 0x1234
    elif a.kind == "qkey":
        kw["qkey"] = a.qkey ^ 0x5A5A
    elif a.kind == "member":
        kw["sqpn"] = a.qpn + 0x1000
    dqpn = a.qpns[0] + (0x10000 if a.kind == "qpn" else 0)
    for i in range(a.count):
        f = bytearray(peer.frame(msg, dqpn, psn=i, **kw))
        if a.kind == "icrc":
            f[-1] ^= 0xFF
        peer.send(bytes(f))
        time.sleep(0.005)
    print("%s: sent %d (%d lost at once)" % (a.kind, a.count, peer.lost))
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cmd", choices=("worker", "forge"))
    ap.add_argument("iface")
    ap.add_argument("--ip", required=True)
    ap.add_argument("--dp", required=True)
    ap.add_argument("--qpns", required=True,
                    help="tally-dp's QPNs, comma-separated (ping's roce)")
    ap.add_argument("--qpn", type=lambda s: int(s, 0), required=True)
    ap.add_argument("--qkey", type=lambda s: int(s, 0), required=True)
    ap.add_argument("--job", type=int, required=True)
    ap.add_argument("--rank", type=int, required=True)
    ap.add_argument("--world", type=int, default=4)
    ap.add_argument("--window", type=int, default=8)
    ap.add_argument("--elems", type=int, default=246)
    ap.add_argument("--i32-chunks", type=int, default=100)
    ap.add_argument("--i8-chunks", type=int, default=40)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--rto", type=float, default=0.1)
    ap.add_argument("--timeout", type=float, default=20.0)
    ap.add_argument("--kind", choices=("icrc", "pkey", "qkey", "qpn",
                                       "member", "ip"))
    ap.add_argument("--count", type=int, default=20)
    a = ap.parse_args()
    a.qpns = [int(q, 0) for q in a.qpns.split(",")]
    a.token = int(os.environ["TALLY_TOKEN"], 16)
    if a.cmd == "forge":
        return forge(a)
    return Worker(a).run()


if __name__ == "__main__":
    sys.exit(main())

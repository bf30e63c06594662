#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""A connection flood against tallyd's rendezvous, as an attacker without
a token would send it: N TCP connections that never say anything, spread
over the source addresses given (which must be this host's), held open,
and each one that tallyd closes opened again after --reconnect-ms.

  flood.py HOST PORT --src IP[,IP...] -n N --secs S [--reconnect-ms M]

Runs for S seconds, then prints one JSON object: attempts (connects
started), established, refused (connects that failed), closed (closed by
tallyd after being established), open_peak, open_end, and the lifetimes
in ms of the connections tallyd closed (min, median, max).
"""
import argparse
import errno
import json
import resource
import selectors
import socket
import sys
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("host")
    ap.add_argument("port", type=int)
    ap.add_argument("--src", required=True)
    ap.add_argument("-n", type=int, required=True)
    ap.add_argument("--secs", type=float, required=True)
    ap.add_argument("--reconnect-ms", type=float, default=1000)
    a = ap.parse_args()

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = a.n + 64
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(want, hard), hard))

    srcs = a.src.split(",")
    sel = selectors.DefaultSelector()
    st = {"attempts": 0, "established": 0, "refused": 0, "closed": 0,
          "open_peak": 0}
    lifetimes = []
    slots = {}          # socket -> (slot index, phase, started)
    pending = []        # (when, slot index): to (re)connect
    now = time.monotonic()
    for i in range(a.n):
        pending.append((now, i))
    end = now + a.secs
    nopen = 0

    def start(i):
        nonlocal nopen
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        s.bind((srcs[i % len(srcs)], 0))
        st["attempts"] += 1
        rc = s.connect_ex((a.host, a.port))
        if rc not in (0, errno.EINPROGRESS):
            st["refused"] += 1
            s.close()
            pending.append((time.monotonic() + a.reconnect_ms / 1e3, i))
            return
        slots[s] = (i, "connecting", time.monotonic())
        sel.register(s, selectors.EVENT_WRITE)

    while True:
        now = time.monotonic()
        if now >= end:
            break
        due = [p for p in pending if p[0] <= now]
        pending[:] = [p for p in pending if p[0] > now]
        for _, i in due:
            try:
                start(i)
            except OSError:
                st["refused"] += 1
                pending.append((now + a.reconnect_ms / 1e3, i))
        timeout = min([p[0] for p in pending] + [end]) - time.monotonic()
        for key, ev in sel.select(max(0.0, min(timeout, 0.2))):
            s = key.fileobj
            i, phase, t0 = slots[s]
            if phase == "connecting":
                err = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                sel.unregister(s)
                if err != 0:
                    st["refused"] += 1
                    del slots[s]
                    s.close()
                    pending.append((time.monotonic() +
                                    a.reconnect_ms / 1e3, i))
                    continue
                st["established"] += 1
                nopen += 1
                st["open_peak"] = max(st["open_peak"], nopen)
                slots[s] = (i, "open", time.monotonic())
                sel.register(s, selectors.EVENT_READ)
                continue
            try:
                data = s.recv(4096)
            except OSError:
                data = b""
            if data:
                continue            # what tallyd says is ignored
            st["closed"] += 1
            lifetimes.append((time.monotonic() - t0) * 1e3)
            nopen -= 1
            sel.unregister(s)
            del slots[s]
            s.close()
            pending.append((time.monotonic() + a.reconnect_ms / 1e3, i))
    st["open_end"] = nopen
    lifetimes.sort()
    if lifetimes:
        st["life_ms"] = [round(lifetimes[0]),
                         round(lifetimes[len(lifetimes) // 2]),
                         round(lifetimes[-1])]
    print(json.dumps(st))
    sys.stdout.flush()
    for s in list(slots):
        s.close()


if __name__ == "__main__":
    main()

#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""tools/bench/cpu_buckets.py from perf script text of known content (TAP).

Samples of two processes, with call chains as `perf script -F
comm,ip,sym,dso` prints them, land in the buckets docs/architecture.md
("Where the CPU goes") names: a softirq run in a worker's context for
tally-dp's af_xdp receive, a sendmmsg, a recvmmsg, user code, and
tally-bench's untimed work, which the second column leaves out. A
command line without the processes gets the usage and exit status 2.
"""
import os
import re
import subprocess
import sys

TOP = sys.argv[1]
TOOL = os.path.join(TOP, "tools", "bench", "cpu_buckets.py")
n = 0
failed = 0


def ok(cond, name):
    global n, failed
    n += 1
    print("%s %d - %s" % ("ok" if cond else "not ok", n, name))
    if not cond:
        failed += 1


def sample(comm, *frames):
    lines = ["%s  1234 [000] 1.0: cpu-clock:" % comm]
    for sym, dso in frames:
        lines.append("\tffffffff81000000 %s+0x10 (%s)" % (sym, dso))
    return "\n".join(lines) + "\n\n"


K = "[kernel.kallsyms]"
U = "/x/tally-bench"
text = (
    sample("tally-bench", ("__xsk_rcv", K), ("veth_xdp_rcv", K),
           ("veth_poll", K), ("net_rx_action", K),
           ("__x64_sys_sendmmsg", K)) * 3 +
    sample("tally-bench", ("_copy_from_iter", K), ("udp_sendmsg", K),
           ("__x64_sys_sendmmsg", K)) * 2 +
    sample("tally-bench", ("csum_partial_copy_generic", K),
           ("__x64_sys_recvmmsg", K)) +
    sample("tally-bench", ("encode_loop1.avx512f", U)) * 2 +
    sample("tally-bench", ("gen", U)) * 2 +
    sample("rte-worker-1", ("sock_def_readable", K),
           ("__udp_enqueue_schedule_skb", K), ("net_rx_action", K)) +
    sample("other", ("x", K)))

p = subprocess.run(["/usr/bin/python3", TOOL, "tally-bench,rte-worker-1"],
                   input=text, capture_output=True, text=True)
out = p.stdout
ok(p.returncode == 0, "exit status 0")
ok("== tally-bench: 10 samples, 8 outside untimed work" in out,
   "tally-bench's samples counted, untimed ones apart")
rows = {}
for l in out.splitlines():
    m = re.match(r"^ *([0-9.]+%) +([0-9.]+%|-)  (.*)$", l)
    if m:
        rows[m.group(3)] = [m.group(1), m.group(2)]


def row(name):
    return rows.get(name, [])


ok(row("kernel softirq: tally-dp's af_xdp receive (veth XDP, copies)")[:2]
   == ["30.0%", "37.5%"], "a softirq inside sendmmsg is the softirq's")
ok(row("kernel: sendmmsg (UDP/IP send, tbf, veth)")[:2] == ["20.0%", "25.0%"],
   "sendmmsg's own")
ok(row("kernel: recvmmsg (dequeue, checksum and copy)")[:2]
   == ["10.0%", "12.5%"], "recvmmsg")
ok(row("user: encode_loop1.avx512f")[:2] == ["20.0%", "25.0%"], "user code")
ok(row("user, untimed: gen")[:2] == ["20.0%", "-"],
   "untimed work outside the second column")
ok("== rte-worker-1: 1 samples" in out and
   "kernel softirq: IP/UDP receive into a worker socket" in out,
   "tally-dp's lcore: a worker's UDP receive run in its softirq")
ok("other" not in out.split("==")[0], "processes not asked for left out")

p = subprocess.run(["/usr/bin/python3", TOOL], input="",
                   capture_output=True, text=True)
ok(p.returncode == 2 and "usage" in p.stderr, "no processes: usage, 2")
print("1..%d" % n)
sys.exit(1 if failed else 0)

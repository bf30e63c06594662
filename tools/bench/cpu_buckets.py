#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Where a process's CPU went, from `perf script` call chains.

usage: perf script -i FILE -F comm,ip,sym,dso | cpu_buckets.py COMM[,COMM...]

Reads the samples of a `perf record -a -g` (docs/architecture.md, "Where
the CPU goes") and prints, for each COMM asked (tally-bench for the
workers, rte-worker-1 for tally-dp's lcore), the share of its samples in
each bucket: kernel paths named by the functions on the call chain (a
softirq the process ran for someone else's packets counts as its own
CPU, as the kernel accounts it), user code by the function the sample
fell in. A second column leaves out tally-bench's untimed work (making
and checking the data between calls), so that it shows the share of what
the benchmark's CPU s/GiB counts.
"""
import collections
import sys

# tally-bench's work outside the timed calls.
UNTIMED = {"gen", "reference", "bench_allreduce", "digest"}

# Softirq paths, the first match wins: (bucket, functions naming it).
SOFTIRQ = (
    ("kernel softirq: tally-dp's af_xdp receive (veth XDP, copies)",
     {"veth_poll", "veth_xdp_rcv"}),
    ("kernel softirq: bridge forwarding, GSO segmentation",
     {"br_handle_frame"}),
    ("kernel softirq: IP/UDP receive into a worker socket",
     {"ip_rcv", "ip_list_rcv", "ip_local_deliver_finish", "__udp4_lib_rcv",
      "udp_queue_rcv_one_skb", "__udp_enqueue_schedule_skb",
      "sock_def_readable"}),
)

# Syscall paths: (bucket, functions naming it).
SYSCALL = (
    ("kernel: sendmmsg (UDP/IP send, tbf, veth)", {"__x64_sys_sendmmsg"}),
    ("kernel: recvmmsg (dequeue, checksum and copy)", {"__x64_sys_recvmmsg"}),
    ("kernel: ppoll (sleep, wake-up)", {"__x64_sys_ppoll", "__x64_sys_poll"}),
    ("kernel: af_xdp send (copy into skbs, veth)",
     {"xsk_generic_xmit", "__xsk_generic_xmit"}),
    ("kernel: af_xdp receive kick (recvfrom)",
     {"xsk_recvmsg", "__x64_sys_recvfrom"}),
    ("kernel: page faults", {"asm_exc_page_fault"}),
)


def bucket(stack):
    """The bucket of one sample; stack: [(symbol, dso)], leaf first."""
    syms = {s for s, _ in stack}
    leaf, dso = stack[0] if stack else ("?", "?")
    if syms & {"net_rx_action", "net_tx_action"}:
        for name, fns in SOFTIRQ:
            if syms & fns:
                return name
        return "kernel softirq: other (qdisc, timers)"
    for name, fns in SYSCALL:
        if syms & fns:
            return name
    if "kernel" in dso:
        return "kernel: other (%s)" % leaf
    if leaf in UNTIMED:
        return "user, untimed: " + leaf
    return "user: " + leaf


def read(lines, comms):
    """Counts per comm and bucket from perf script lines."""
    counts = collections.defaultdict(collections.Counter)
    comm, stack = None, []
    for line in list(lines) + [""]:
        line = line.rstrip("\n")
        if not line.strip():
            if comm in comms:
                counts[comm][bucket(stack)] += 1
            comm, stack = None, []
        elif not line[0].isspace():
            comm, stack = line.split()[0], []
        else:
            parts = line.split()
            if len(parts) >= 2:
                stack.append((parts[1].split("+")[0], parts[-1]))
    return counts


def report(counts, comms, top=20):
    """The table, as text."""
    out = []
    for c in comms:
        b = counts.get(c)
        if not b:
            out.append("== %s: no samples" % c)
            continue
        tot = sum(b.values())
        timed = sum(v for k, v in b.items() if not k.startswith("user, untimed"))
        out.append("== %s: %d samples, %d outside untimed work" % (c, tot, timed))
        out.append("   all  timed  bucket")
        for k, v in b.most_common(top):
            t = "     -" if k.startswith("user, untimed") else \
                "%5.1f%%" % (100.0 * v / max(timed, 1))
            out.append("%5.1f%% %s  %s" % (100.0 * v / tot, t, k))
    return "\n".join(out)


def main(argv):
    if len(argv) != 2 or argv[1].startswith("-"):
        sys.stderr.write(__doc__.split("\n\n")[1] + "\n")
        return 2
    comms = argv[1].split(",")
    print(report(read(sys.stdin, comms), comms))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

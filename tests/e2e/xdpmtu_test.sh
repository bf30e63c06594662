#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# tally-dp on net_af_xdp above Ethernet's 1500 (DPDK 22.11's af_xdp takes
# frames up to its mbuf's data room less 128 bytes of mbuf headroom and
# the kernel's 256 of XDP headroom: MTU 3506 with tally-dp's 4 KiB
# mbufs), on links of MTU 3506:
# - tally-dp refuses --mtu 3507 at start-up, naming the limit (before, it
#   started, and the kernel dropped every frame over 3,520 bytes unseen);
# - at --mtu 3000, four workers sending 728 f32 a packet (2,980-byte IP
#   packets) get exact, bit-identical results, and the port's interface
#   counts frames of that size (no IP fragments);
# - at --mtu 3506, the largest, two workers sending 859 f32 a packet
#   (3,504-byte IP packets) get exact results.
TESTBED_OPTS="-n 4 --mtu 3506"
. "$(dirname "$0")/preamble.sh"
TOKEN=3a3a3a3a3a3a3a3a

started=0
TALLY_PMD=net_af_xdp dp_start --mtu 3507 >/dev/null && started=1
dp_stop >/dev/null 2>&1
[ $started -eq 0 ] && grep "carries at most MTU" "$WORK/dp.log" | sed 's/^/# /' &&
	grep -q "Cause: --mtu 3507: port 0 (net_af_xdp) carries at most MTU 3506 " \
		"$WORK/dp.log"
ok $? "tally-dp on net_af_xdp refuses --mtu 3507, naming the limit 3506"

# avg_rx_frame: the mean size of the frames the port's interface took.
avg_rx_frame() {
	local s=/sys/class/net/$TESTBED_DP_IF/statistics
	echo $(( $(cat "$s/rx_bytes") / $(cat "$s/rx_packets") ))
}

TALLY_PMD=net_af_xdp dp_start --mtu 3000
ok $? "tally-dp starts on net_af_xdp with --mtu 3000"
export ELEMS=728
rep=$(job_add 1 "$TOKEN" 0 1 2 3)
[ "$rep" = '{"errno": 0}' ]
ok $? "a job of 728 elements a packet (2,980-byte packets) is taken ($rep)"
rx0=$(cat "/sys/class/net/$TESTBED_DP_IF/statistics/rx_packets")
allreduce_all 1 "$TOKEN" 4 mtu3000 --type f32 --size 4M --iters 3
avg=$(avg_rx_frame)
echo "# $TESTBED_DP_IF: mean frame $avg bytes, tally-dp rx $(dp_counter rx)"
[ "$avg" -gt 2900 ]
ok $? "the frames were 3 KB, unfragmented (mean $avg bytes)"
dp_stop >/dev/null

TALLY_PMD=net_af_xdp dp_start --mtu 3506
ok $? "tally-dp starts on net_af_xdp with --mtu 3506"
export ELEMS=859
rep=$(job_add 2 "$TOKEN" 0 1)
[ "$rep" = '{"errno": 0}' ]
ok $? "a job of 859 elements a packet (3,504-byte packets) is taken ($rep)"
allreduce_all 2 "$TOKEN" 2 mtu3506 --type i32 --size 1M --iters 2
dp_stop >/dev/null
finish

#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# Lossless links at a given rate (the first argument, 1gbit by default;
# meson runs it at 250mbit and 1gbit): four workers allreduce f32
# tensors through tally-dp on net_af_xdp (as tools/bench-allreduce
# runs it: 352 elements a packet, window 64), the results exact and
# identical, and the workers sent fewer than 0.5 % of their packets
# twice. Nothing is lost on these links, so every retransmission is
# needless; the timers must ride out the round trips of a loaded
# 2-core machine. The bound applies to the sum over all calls of all
# workers, where one descheduled spell weighs little; the figures go
# out as TAP comments.
RATE=${1:-1gbit}
TESTBED_OPTS="-n 4 --rate $RATE"
. "$(dirname "$0")/preamble.sh"
TOKEN=4a7e4a7e4a7e4a7e

# A seventh of a second of the link a call, whatever the rate: 4 MiB at
# 250 Mbit/s, 16 MiB at 1 Gbit/s; 6 calls after a warm-up.
case $RATE in
250mbit) SIZE=4M ;;
*) SIZE=16M ;;
esac
TALLY_PMD="net_af_xdp net_af_packet" dp_start
ok $? "tally-dp starts"
export WINDOW=64 ELEMS=352
job_add 1 "$TOKEN" 0 1 2 3 >/dev/null
ok $? "job added"
allreduce_all 1 "$TOKEN" 4 rate --type f32 --size "$SIZE" --iters 6 \
	--seed 5 --timeout-ms 10000

# retransmit_sums: "SENT RETRANSMITS SPURIOUS" summed over the workers'
# stats lines ("stats: packets_sent N, retransmits N, ..., spurious N").
retransmit_sums() {
	awk '$1 == "stats:" {
		for (i = 2; i < NF; i++) {
			v = $(i + 1); sub(/,$/, "", v)
			if ($i == "packets_sent") s += v
			else if ($i == "retransmits") r += v
			else if ($i == "spurious") p += v
		}
	} END { print s + 0, r + 0, p + 0 }' "$WORK"/rate.?
}
read -r sent retx spur <<<"$(retransmit_sums)"
for f in "$WORK"/rate.?; do
	grep -h '^stats:' "$f" | sed "s|^|# ${f##*/} |"
done
pct=$(awk -v s="$sent" -v r="$retx" 'BEGIN { printf "%.3f", s ? 100 * r / s : 100 }')
echo "# $RATE, $SIZE x 7 calls: sent $sent, retransmitted $retx ($pct %), of them spurious $spur"
echo "# tally-dp: duplicates $(dp_counter duplicates), retransmissions served $(dp_counter retransmissions_served)"
[ "$sent" -gt 0 ] && awk -v s="$sent" -v r="$retx" 'BEGIN { exit !(r * 200 < s) }'
ok $? "$RATE: under 0.5 % of the packets retransmitted ($pct %)"
finish

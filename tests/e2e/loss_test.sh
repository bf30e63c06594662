#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# The 64 MiB f32 allreduce of four workers with 1% of tally packets lost
# upstream and 1% downstream (nftables in every worker namespace): results
# stay exact and identical; the losses show as retransmissions served.
TESTBED_OPTS="-n 4 --loss-up 1 --loss-down 1"
. "$(dirname "$0")/preamble.sh"
TOKEN=1055aaaa1055aaaa

dp_start
ok $? "tally-dp starts"
job_add 1 "$TOKEN" 0 1 2 3 >/dev/null
ok $? "job added"
allreduce_all 1 "$TOKEN" 4 loss1pct --type f32 --size 64M --iters 1 \
	--seed 11 --timeout-ms 10000
served=$(dp_counter retransmissions_served)
dups=$(dp_counter duplicates)
echo "# retransmissions served $served, duplicates $dups"
[ "$served" -gt 0 ]
ok $? "lost results were served again from the stored sums"
finish

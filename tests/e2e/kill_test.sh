#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# A worker killed mid-allreduce: the other three return an error within
# their timeout (2 s here) instead of hanging.
TESTBED_OPTS="-n 4"
. "$(dirname "$0")/preamble.sh"
TOKEN=dead00000000beef
TIMEOUT_MS=2000

dp_start
ok $? "tally-dp starts"
job_add 1 "$TOKEN" 0 1 2 3 >/dev/null
ok $? "job added"
pids=""
for r in 0 1 2 3; do
	worker "$r" 1 "$TOKEN" "$r" 4 "$WORK/w.$r" --type f32 --size 256M \
		--iters 20 --seed 3 --timeout-ms $TIMEOUT_MS
	pids="$pids $WPID"
	[ "$r" -eq 3 ] && victim=$WPID
done
# Wait until the workers are exchanging packets, then kill rank 3.
for _ in $(seq 300); do
	[ "$(dp_counter contributions)" -gt 1000 ] && break
	sleep 0.1
done
kill -KILL "$victim"
killed=$(date +%s%N)
rc=0
for p in $pids; do
	[ "$p" = "$victim" ] && continue
	wait "$p"
	[ $? -eq 3 ] || rc=1
done
elapsed=$((($(date +%s%N) - killed) / 1000000))
echo "# survivors returned ${elapsed} ms after the kill"
ok $rc "the surviving workers return an allreduce error"
[ $rc -eq 0 ] || sed 's/^/#   /' "$WORK"/w.*
[ "$elapsed" -lt $((TIMEOUT_MS + 3000)) ]
ok $? "within the timeout (${TIMEOUT_MS} ms) plus margin"
wait "$victim" 2>/dev/null
finish

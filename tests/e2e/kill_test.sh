#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# A worker killed mid-allreduce: the other three, still waiting on it,
# return an error after their timeout (2 s here) instead of hanging.
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
	worker "$r" 1 "$TOKEN" "$r" 4 "$WORK/w.$r" --type f32 --size 8M \
		--iters 400 --seed 3 --timeout-ms $TIMEOUT_MS
	pids="$pids $WPID"
	[ "$r" -eq 3 ] && victim=$WPID
done
# Wait until the workers are well into their allreduces, then kill rank 3.
for _ in $(seq 600); do
	[ "$(dp_counter completed)" -gt 200000 ] && break
	sleep 0.1
done
alive=0
for p in $pids; do
	kill -0 "$p" 2>/dev/null || alive=1
done
ok $alive "all four workers are mid-allreduce when rank 3 is killed"
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
[ "$elapsed" -ge $((TIMEOUT_MS / 2)) ] &&
	[ "$elapsed" -lt $((TIMEOUT_MS + 3000)) ]
ok $? "after about the timeout (${TIMEOUT_MS} ms), not a hang"
wait "$victim" 2>/dev/null
finish

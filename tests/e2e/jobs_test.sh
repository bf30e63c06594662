#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# Two jobs at once on one tally-dp (workers 0,1 in job 1; 2,3 in job 2)
# stay exact and isolated; a worker using job 1's token on job 2, and a
# member of job 1 posing as a member of job 2, are dropped and counted.
TESTBED_OPTS="-n 4"
. "$(dirname "$0")/preamble.sh"
T1=1111111111111111
T2=2222222222222222

dp_start
ok $? "tally-dp starts"
job_add 1 "$T1" 0 1 >/dev/null && job_add 2 "$T2" 2 3 >/dev/null
ok $? "two jobs added"
worker 0 1 "$T1" 0 2 "$WORK/a0" --type f32 --size 16M --seed 1
p0=$WPID
worker 1 1 "$T1" 1 2 "$WORK/a1" --type f32 --size 16M --seed 1
p1=$WPID
worker 2 2 "$T2" 0 2 "$WORK/b0" --type f32 --size 16M --seed 2
p2=$WPID
worker 3 2 "$T2" 1 2 "$WORK/b1" --type f32 --size 16M --seed 2
p3=$WPID
rc=0
for p in $p0 $p1 $p2 $p3; do
	wait "$p" || rc=1
done
ok $rc "both jobs' results equal their references"
[ $rc -eq 0 ] || sed 's/^/#   /' "$WORK"/a? "$WORK"/b?
[ -n "$(digest "$WORK/a0")" ] && [ "$(digest "$WORK/a0")" = "$(digest "$WORK/a1")" ] &&
	[ "$(digest "$WORK/b0")" = "$(digest "$WORK/b1")" ] &&
	[ "$(digest "$WORK/a0")" != "$(digest "$WORK/b0")" ]
ok $? "each job's members agree, and the jobs differ"

# Job 1's token on job 2: refused silently, the worker times out.
before=$(dp_counter drop_bad_token)
worker 2 2 "$T1" 0 2 "$WORK/bad" --type i32 --size 64K --iters 1 \
	--timeout-ms 500
wait "$WPID"
rc=$?
after=$(dp_counter drop_bad_token)
echo "# wrong-token worker exit $rc, drop_bad_token $before -> $after"
[ "$rc" -ne 0 ] && [ "$after" -gt "$before" ]
ok $? "a wrong token is dropped and counted; the worker gets an error"

# Worker 0 (job 1's member) claims rank 0 of job 2 with the right token.
before=$(dp_counter drop_bad_source)
worker 0 2 "$T2" 0 2 "$WORK/spoof" --type i32 --size 64K --iters 1 \
	--timeout-ms 500
wait "$WPID"
rc=$?
after=$(dp_counter drop_bad_source)
echo "# impostor exit $rc, drop_bad_source $before -> $after"
[ "$rc" -ne 0 ] && [ "$after" -gt "$before" ]
ok $? "a packet from a non-member address is dropped and counted"
finish

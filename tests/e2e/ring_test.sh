#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# The ring fallback (docs/scale-out.md, "Ring fallback"): four workers of
# one job through tally:// sum 64 MiB of f32 through tally-dp; then the
# same with ?transport=ring (the workers ask for the ring): every rank's
# result is bit-identical to the dataplane's; then tally-dp is killed
# (SIGKILL) and the workers join again: tallyd says "fallback": "ring",
# they reduce around a TCP ring among themselves, exact and bit-identical
# to the dataplane's result, i32 too, and tallyd and the workers say so
# (transport "ring", a WARNING each, ring_memberships).
TESTBED_OPTS="-n 4 --host"
. "$(dirname "$0")/preamble.sh"

# allreduce_all NAME JOB TOKEN [tally-bench options]: four workers of JOB
# through tally://; 0 when every one ended exact.
allreduce_all() {
	local name=$1 job=$2 token=$3 pids="" r p rc=0
	shift 3
	for r in 0 1 2 3; do
		worker_url "$r" "$job" "$token" "$r" 4 "$WORK/$name.$r" "$@"
		pids="$pids $WPID"
	done
	for p in $pids; do
		wait "$p" || rc=1
	done
	[ $rc -eq 0 ] || sed 's/^/#   /' "$WORK/$name".*
	return $rc
}

# same_digest NAME: prints the digest when all four workers have it.
same_digest() {
	local d0 r
	d0=$(digest "$WORK/$1.0")
	for r in 1 2 3; do
		[ "$(digest "$WORK/$1.$r")" = "$d0" ] || return 1
	done
	[ -n "$d0" ] && echo "$d0"
}

# all_say NAME PATTERN: every worker's output of NAME has the line.
all_say() {
	local r
	for r in 0 1 2 3; do
		grep -q "$2" "$WORK/$1.$r" || return 1
	done
}

dp_start
ok $? "tally-dp starts"
tallyd_start --set join_timeout_s=20
ok $? "tallyd starts"
tctl --json job create rj --world 4 >"$WORK/rj.json"
ok $? "job create rj --world 4"
TOK=$(jq_py 'j["token"]' <"$WORK/rj.json")

allreduce_all dp rj "$TOK" --type f32 --size 64M --iters 1 --seed 5
ok $? "64 MiB f32 through tally-dp: exact on all four workers"
D=$(same_digest dp)
ok $? "through tally-dp: bit-identical on all workers ($D)"
all_say dp '^transport: udp'
ok $? "through tally-dp: transport udp"

allreduce_all forced rj "$TOK" --type f32 --size 64M --iters 1 --seed 5 \
	--transport ring
ok $? "the same with transport=ring: exact on all four workers"
all_say forced '^transport: ring' && all_say forced 'WARNING.*ring fallback'
ok $? "transport=ring: transport ring, and a WARNING on each worker"
[ -n "$D" ] && [ "$(same_digest forced)" = "$D" ]
ok $? "transport=ring: bit-identical to the dataplane's result"

kill -KILL "$DP_PID"
for _ in $(seq 50); do
	[ "$(tctl --json ping 2>/dev/null | jq_py 'j["dp_up"]')" = False ] &&
		break
	sleep 0.1
done
[ "$(tctl --json ping | jq_py 'j["dp_up"]')" = False ]
ok $? "tally-dp killed; tallyd sees it down"

t0=$(date +%s%N)
allreduce_all down rj "$TOK" --type f32 --size 64M --iters 1 --seed 5
ok $? "dataplane down: 64 MiB f32 on the ring fallback, exact on all four"
echo "# took $((($(date +%s%N) - t0) / 1000000)) ms"
all_say down '^transport: ring' && all_say down 'WARNING.*no live dataplane'
ok $? "dataplane down: the workers run on the ring and warn"
[ -n "$D" ] && [ "$(same_digest down)" = "$D" ]
ok $? "dataplane down: bit-identical across ranks and to the dataplane's"
allreduce_all downi rj "$TOK" --type i32 --size 16M --iters 2 --seed 6
ok $? "dataplane down: 16 MiB i32 twice on the ring, exact"
same_digest downi >/dev/null
ok $? "dataplane down: i32 bit-identical on all workers"

grep -q "WARNING: job 'rj'.*ring fallback.*no live dataplane" "$WORK/tallyd.log"
ok $? "tallyd logs a WARNING when the membership goes on the ring"
[ "$(tctl --json stats | jq_py 'j["tallyd"]["ring_memberships"]')" = 3 ]
ok $? "stats: ring_memberships 3"
curl -sf "http://$TALLYD_METRICS/metrics" |
	grep -q '^tallyd_ring_memberships_total 3$'
ok $? "metrics: tallyd_ring_memberships_total 3"

finish

#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# A whole session driven through tallyctl and tally:// URLs: a job is
# created, four workers join through tallyd and allreduce, show/stats/
# metrics reflect it; each kind of bad join gets its own error; packets
# with a wrong token or from a non-member are dropped and counted; tallyd
# restarts mid-job and the job carries on; tally-dp is killed under the
# workers and restarted, tallyd programs it again, the interrupted
# allreduce fails (no hang) and the next one succeeds; an idle job goes
# away by itself; the job is deleted.
TESTBED_OPTS="-n 5 --host"
. "$(dirname "$0")/preamble.sh"
PROMCHECK=$TALLY_SRC/tests/control/metrics/promcheck.py

dp_start
ok $? "tally-dp starts"
tallyd_start --set join_timeout_s=4
ok $? "tallyd starts and answers ping"

# --- create ---------------------------------------------------------------
tctl --json job create train --world 4 >"$WORK/create.json"
ok $? "tallyctl job create"
TOKEN=$(jq_py 'j["token"]' <"$WORK/create.json")
[ "${#TOKEN}" -eq 64 ] &&
	[ "$(jq_py 'j["job"]["name"], j["job"]["world"], j["job"]["state"], j["job"]["id"]' \
		<"$WORK/create.json")" = "train 4 waiting 1" ]
ok $? "create --json: a 64-hex token and the job (train, world 4, waiting, id 1)"
tctl job create other --world 2 --window 32 >"$WORK/create.txt"
rc=$?
grep -q "^token: [0-9a-f]\{64\}$" "$WORK/create.txt" &&
	grep -qi "not shown again" "$WORK/create.txt"
ok $(( rc | $? )) "create (text) shows the token once, with a warning"
tctl job create train --world 4 >/dev/null 2>"$WORK/dup.err"
[ $? -eq 1 ] && grep -q "job 'train' exists" "$WORK/dup.err"
ok $? "a second job 'train' is refused (exit 1, 'exists')"

# --- join and allreduce ---------------------------------------------------
pids=""
for r in 0 1 2 3; do
	worker_url "$r" train "$TOKEN" "$r" 4 "$WORK/s1.$r" --type f32 \
		--size 16M --iters 2 --seed 7
	pids="$pids $WPID"
done
rc=0
for p in $pids; do
	wait "$p" || rc=1
done
ok $rc "4 workers join through tally:// and their results equal the reference"
[ $rc -eq 0 ] || sed 's/^/#   /' "$WORK"/s1.* "$WORK/tallyd.log"
d0=$(digest "$WORK/s1.0")
same=0
for r in 1 2 3; do
	[ -n "$d0" ] && [ "$(digest "$WORK/s1.$r")" = "$d0" ] || same=1
done
ok $same "results bit-identical on all workers ($d0)"

sleep 0.5	# one tally-dp poll at least
tctl --json job show train >"$WORK/show.json"
ok $? "job show"
contrib=$(jq_py 'j["job"]["counters"]["contributions"]' <"$WORK/show.json")
rounds=$(jq_py 'j["job"]["counters"]["rounds"]' <"$WORK/show.json")
echo "# show: rounds $rounds contributions $contrib"
[ "$(jq_py 'j["job"]["state"], j["job"]["joined"], len(j["job"]["members"]), j["job"]["epoch"]' \
	<"$WORK/show.json")" = "ready 4 4 1" ] &&
	[ "$rounds" -gt 0 ] && [ "$contrib" -ge $((rounds * 4)) ]
ok $? "show: ready, 4 members, epoch 1, rounds counted (4 contributions each)"
members=$(jq_py '" ".join(m["ip"] for m in j["job"]["members"])' <"$WORK/show.json")
[ "$members" = "$TESTBED_IP_1 $TESTBED_IP_2 $TESTBED_IP_3 $TESTBED_IP_4" ]
ok $? "show: the members are the workers' addresses, by rank ($members)"
tctl job show train >"$WORK/show.txt"
grep -q "^state: *ready" "$WORK/show.txt" && grep -q "$TESTBED_IP_4" "$WORK/show.txt"
ok $? "show (text) names the state and the members"
tctl job list >"$WORK/list.txt"
head -1 "$WORK/list.txt" | grep -q "^NAME *ID *WORLD *JOINED *STATE" &&
	grep -q "^train *1 *4 *4 *ready" "$WORK/list.txt" &&
	grep -q "^other *2 *2 *0 *waiting" "$WORK/list.txt"
ok $? "job list (text): header and one row per job"
[ $? -eq 0 ] || sed 's/^/#   /' "$WORK/list.txt"
tctl --json stats >"$WORK/stats.json"
[ "$(jq_py 'j["tallyd"]["joins"], j["tallyd"]["memberships"], j["tallyd"]["dp_up"], j["dp"]["total"]["contributions"] > 0' \
	<"$WORK/stats.json")" = "4 1 True True" ]
ok $? "stats: 4 joins, 1 membership, tally-dp up with its counters"

# --- metrics --------------------------------------------------------------
curl -sf "http://$TALLYD_METRICS/metrics" >"$WORK/metrics.txt"
ok $? "curl GET /metrics"
/usr/bin/python3 "$PROMCHECK" <"$WORK/metrics.txt" >"$WORK/promcheck.out" 2>&1
ok $? "metrics are valid Prometheus text (strict checker)"
[ $? -eq 0 ] || sed 's/^/#   /' "$WORK/promcheck.out"
if command -v promtool >/dev/null 2>&1; then
	promtool check metrics <"$WORK/metrics.txt" >/dev/null 2>&1
	ok $? "promtool check metrics"
fi
grep -q "^tally_job_rounds_total{tally_job=\"train\"} $rounds$" "$WORK/metrics.txt" ||
	grep -q "^tally_job_rounds_total{tally_job=\"train\"} [1-9]" "$WORK/metrics.txt"
ok $? "metrics carry the job's rounds"

# --- bad joins, each with its own error ----------------------------------
# bad_join NAME WANT-ERRNO-TEXT WANT-WORDS URL-JOB TOKEN RANK WORLD
bad_join() {
	local name=$1 want=$2 words=$3
	shift 3
	worker_url 4 "$@" "$WORK/bad.$name" --type i32 --size 4K --iters 1
	wait "$WPID"
	local rc=$?
	grep -q "$words" "$WORK/bad.$name" && grep -q "($want)" "$WORK/bad.$name" &&
		[ $rc -eq 3 ]
	ok $? "$name: exit 3, '$words' ($want)"
	[ $? -eq 0 ] || sed 's/^/#   /' "$WORK/bad.$name"
}
WRONG=$(printf '%064d' 0)
# Without a job's token, a caller learns nothing about which jobs exist:
# a wrong token and an unknown job get the same errno and sentence.
bad_join bad_token "Permission denied" "tallyd: no job with that name and token" train "$WRONG" 0 4
bad_join unknown_job "Permission denied" "tallyd: no job with that name and token" nope "$TOKEN" 0 4
bad_join world_mismatch "Invalid argument" "world size 3 does not match" train "$TOKEN" 0 3
# A rank waits at the barrier while a second one claims the same rank.
worker_url 3 train "$TOKEN" 1 4 "$WORK/waiting" --type i32 --size 4K --iters 1
waiter=$WPID
sleep 0.5
bad_join duplicate_rank "File exists" "rank 1 already joined job 'train'" train "$TOKEN" 1 4
wait "$waiter"
grep -q "2 of 4\|1 of 4" "$WORK/waiting" && grep -q "(Connection timed out)" "$WORK/waiting"
ok $? "a rank alone at the barrier gets a timeout naming the missing ranks"
[ $? -eq 0 ] || sed 's/^/#   /' "$WORK/waiting"
tctl --json stats >"$WORK/stats2.json"
[ "$(jq_py 'j["tallyd"]["join_failures"]["bad_token"], j["tallyd"]["join_failures"]["unknown_job"], j["tallyd"]["join_failures"]["world_mismatch"], j["tallyd"]["join_failures"]["duplicate_rank"], j["tallyd"]["join_failures"]["timeout"]' \
	<"$WORK/stats2.json")" = "1 1 1 1 1" ]
ok $? "stats count each join failure under its reason"

# --- packets that are not the membership's -------------------------------
# The current wire token and id are in tallyd's state file.
WIRE=$(jq_py '[x["wire_token"] for x in j["jobs"] if x["name"] == "train"][0]' <"$WORK/state.json")
before_tok=$(dp_counter drop_bad_token)
before_src=$(dp_counter drop_bad_source)
# A member's address with a wrong token...
worker 0 1 "0000000000000001" 0 4 "$WORK/wrongtok" --type i32 --size 64K \
	--iters 1 --timeout-ms 500 --no-barrier
wait "$WPID"
rc1=$?
# ...and the right token from a host that is not a member (worker 5).
worker 4 1 "$WIRE" 0 4 "$WORK/nonmember" --type i32 --size 64K \
	--iters 1 --timeout-ms 500 --no-barrier
wait "$WPID"
rc2=$?
sleep 0.5
after_tok=$(dp_counter drop_bad_token)
after_src=$(dp_counter drop_bad_source)
echo "# drop_bad_token $before_tok -> $after_tok, drop_bad_source $before_src -> $after_src"
[ $rc1 -ne 0 ] && [ "$after_tok" -gt "$before_tok" ]
ok $? "a wrong token is dropped and counted (drop_bad_token)"
[ $rc2 -ne 0 ] && [ "$after_src" -gt "$before_src" ]
ok $? "a non-member's packets are dropped and counted (drop_bad_source)"
curl -sf "http://$TALLYD_METRICS/metrics" | grep -q '^tally_dp_drops_total{.*reason="bad_source".*} [1-9]'
ok $? "the drops show in the metrics by reason"

# --- tallyd restarts mid-job ---------------------------------------------
pids=""
for r in 0 1 2 3; do
	worker_url "$r" train "$TOKEN" "$r" 4 "$WORK/s2.$r" --type i32 \
		--size 8M --iters 8 --pause-ms 300 --seed 9
	pids="$pids $WPID"
done
sleep 1.5
tallyd_stop KILL
tallyd_start --set join_timeout_s=4
ok $? "tallyd killed mid-job and started again"
tctl --json job show train >"$WORK/show2.json"
[ "$(jq_py 'j["job"]["state"], j["job"]["id"], len(j["job"]["members"])' <"$WORK/show2.json")" = "ready 1 4" ]
ok $? "the job is still there, ready, with its membership"
rc=0
for p in $pids; do
	wait "$p" || rc=1
done
ok $rc "the workers' allreduces carried on through tallyd's restart"
[ $rc -eq 0 ] || sed 's/^/#   /' "$WORK"/s2.*
allreduce_url_all() {
	local name=$1 pids="" r p rc=0
	shift
	for r in 0 1 2 3; do
		worker_url "$r" train "$TOKEN" "$r" 4 "$WORK/$name.$r" "$@"
		pids="$pids $WPID"
	done
	for p in $pids; do
		wait "$p" || rc=1
	done
	return $rc
}
allreduce_url_all s3 --type f32 --size 4M --iters 1 --seed 11
ok $? "after the restart, workers join again and allreduce exactly"

# --- tally-dp killed under the workers -----------------------------------
# Mid-allreduce: the interrupted call fails after its timeout, the worker
# joins again (--reopen), tallyd programs the restarted tally-dp, and the
# next allreduce is exact.
pids=""
start=$(dp_counter completed)
for r in 0 1 2 3; do
	worker_url "$r" train "$TOKEN" "$r" 4 "$WORK/s4.$r" --type f32 \
		--size 16M --iters 30 --seed 13 --timeout-ms 1500 --reopen 2
	pids="$pids $WPID"
done
for _ in $(seq 100); do
	[ "$(dp_counter completed)" -gt $((start + 20000)) ] && break
	sleep 0.1
done
kill -KILL "$DP_PID"
wait "$DP_PID" 2>/dev/null
DP_PID=
sleep 2		# past the workers' 1.5 s timeout: the allreduce must fail
rm -rf "/var/run/dpdk/tally-e2e-$$"
dp_start
ok $? "tally-dp killed mid-allreduce and started again"
rc=0
for p in $pids; do
	wait "$p" || rc=1
done
ok $rc "every worker finished exact after one failed allreduce and a rejoin"
[ $rc -eq 0 ] || sed 's/^/#   /' "$WORK"/s4.* "$WORK/tallyd.log"
n_reopen=$(cat "$WORK"/s4.* | grep -c "^reopen: iteration")
n_timeout=$(cat "$WORK"/s4.* | grep -c "^reopen: iteration.*(Connection timed out)$")
echo "# $(grep -h "^reopen: iteration" "$WORK"/s4.* | head -1)"
[ "$n_reopen" -eq 4 ] && [ "$n_timeout" -eq 4 ]
ok $? "each worker's interrupted allreduce failed once with a timeout, not a hang"

# Between allreduces: tallyd puts the membership back by itself.
before=$(tctl --json stats | jq_py 'j["tallyd"]["dp_reprograms"]')
dp_stop
dp_start
for _ in $(seq 50); do
	dp_admin '{"cmd":"job_list"}' | grep -q '"id": 1' && break
	sleep 0.1
done
dp_admin '{"cmd":"job_list"}' | grep -q '"id": 1'
ok $? "tallyd programs a restarted tally-dp with the job again"
after=$(tctl --json stats | jq_py 'j["tallyd"]["dp_reprograms"]')
[ "$after" -gt "$before" ]
ok $? "and counts it (dp_reprograms $before -> $after)"
allreduce_url_all s5 --type i32 --size 4M --iters 1 --seed 15
ok $? "the next allreduce succeeds"

# --- a job's codec reaches its workers ----------------------------------
tctl job create squeezed --world 4 --codec q8,seed=3 --narrow >/dev/null &&
	tctl --json job create squeezed2 --world 4 --codec q9 >/dev/null 2>"$WORK/q9.err"
[ $? -eq 1 ] && grep -q "unknown codec 'q9'" "$WORK/q9.err"
ok $? "a job with codec q8 is created; an unknown codec is refused"
tctl job create wide4 --world 8 --codec q4 --narrow >/dev/null 2>"$WORK/q4.err"
[ $? -eq 1 ] && grep -q "at most 7 ranks" "$WORK/q4.err"
ok $? "q4 with narrow sums for 8 ranks is refused (i4 sums hold 7)"
tctl job create wide2b --world 8 --codec 2bit --narrow >/dev/null 2>"$WORK/2b.err"
[ $? -eq 1 ] && grep -q "at most 7 ranks" "$WORK/2b.err"
ok $? "2bit with narrow sums for 8 ranks is refused (i4 sums hold 7)"
SQ=$(tctl --json job create squeezed3 --world 4 --codec q8,seed=3 --narrow | jq_py 'j["token"]')
pids=""
for r in 0 1 2 3; do
	worker_url "$r" squeezed3 "$SQ" "$r" 4 "$WORK/q.$r" --type f32 \
		--size 2M --iters 2 --seed 21
	pids="$pids $WPID"
done
rc=0
for p in $pids; do
	wait "$p" || rc=1
done
grep -q "^codec: q8,seed=3, narrow results" "$WORK/q.0"
ok $(( rc | $? )) "workers joined through tallyd apply the job's codec (q8, narrow): results equal the CPU reference"
[ $rc -eq 0 ] || sed 's/^/#   /' "$WORK"/q.*
tctl job delete squeezed >/dev/null && tctl job delete squeezed3 >/dev/null
ok $? "the codec jobs are deleted"

# --- idle removal, delete -------------------------------------------------
tctl job create brief --world 1 --idle-timeout 1 >/dev/null
sleep 2.5
tctl job show brief >/dev/null 2>&1
[ $? -eq 1 ]
ok $? "a job idle past its idle timeout is removed"
tctl job delete train >"$WORK/del.txt"
rc=$?
grep -q "deleted job train" "$WORK/del.txt"
ok $(( rc | $? )) "job delete"
tctl job delete other >/dev/null
dp_admin '{"cmd":"job_list"}' | jq_py 'len(j["jobs"])' | grep -qx 0 &&
	[ "$(tctl --json job list | jq_py 'len(j["jobs"])')" = 0 ]
ok $? "deleted jobs are gone from tallyd and tally-dp"
tctl job show train >/dev/null 2>"$WORK/gone.err"
[ $? -eq 1 ] && grep -q "no job 'train'" "$WORK/gone.err"
ok $? "show of a deleted job: exit 1, 'no job'"
tallyd_stop
ok $? "tallyd stops cleanly on SIGTERM"
[ ! -e "$TALLYD_SOCK" ]
ok $? "and removes its control socket"
finish

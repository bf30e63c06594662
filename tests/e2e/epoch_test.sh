#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# Epochs (docs/scale-out.md, "Epochs"): one job sharded over three
# tally-dp hosts (tools/testbed --dps 3), four workers (tests/e2e/
# epochworker) calling a 32 MiB f32 allreduce in place again and again;
# the third tally-dp is SIGKILLed while the calls run. Every worker's
# call in flight returns -ETIMEDOUT within its timeout (3 s) of the kill,
# its buffer holding its input again; its next call rejoins by itself and
# is exact (bit for bit against a reference made from every rank's data,
# the same digest on all four) in the new epoch; tallyd moved the job to
# the two survivors, and `tallyctl job show` says epoch 2 and why (dpc
# missed its admin polls). Then the survivors are killed too: the
# epoch ends with no capacity, and four workers that join then run on
# the ring fallback and get, bit for bit, what tally-dp gave.
TESTBED_OPTS="-n 4 --dps 3 --host"
. "$(dirname "$0")/preamble.sh"
EW=$TALLY_BUILD/tests/e2e/epochworker
TIMEOUT_MS=3000

trap 'dp_stop_at' EXIT

# dps_up N: waits (5 s at most) until tallyd sees N dataplanes up.
dps_up() {
	for _ in $(seq 50); do
		[ "$(tctl --json stats 2>/dev/null | jq_py \
			'sum(1 for d in j["dataplanes"] if d["up"])')" = "$1" ] &&
			return 0
		sleep 0.1
	done
	return 1
}

# marks K: how many workers have started call K.
marks() {
	ls "$WORK/marks" 2>/dev/null | grep -c "^start\.[0-3]\.$1\$"
}

dp_start && dp_start_at 2 && dp_start_at 3
ok $? "three tally-dp start"
tallyd_start --set "dataplane = dpb $WORK/dp2.sock" \
	--set "dataplane = dpc $WORK/dp3.sock" --set join_timeout_s=30 \
	--set dp_dead_polls=3
ok $? "tallyd starts with three dataplanes (dp_poll_ms 200, dp_dead_polls 3)"
dps_up 3
ok $? "tallyd sees all three up"
tctl --json job create ep --world 4 --dataplanes dp0,dpb,dpc >"$WORK/ep.json"
ok $? "job create ep --world 4 --dataplanes dp0,dpb,dpc"
TF=$(token_file "$(jq_py 'j["token"]' <"$WORK/ep.json")")

mkdir -p "$WORK/marks"
pids=""
for r in 0 1 2 3; do
	eval "ns=\$TESTBED_NS_$((r + 1))"
	ip netns exec "$ns" timeout 240 "$EW" \
		--url "tally://$TESTBED_HOST_IP:$TALLYD_RDV_PORT/ep" \
		--token-file "$TF" --rank "$r" --world 4 --mib 32 \
		--timeout-ms "$TIMEOUT_MS" --mark "$WORK/marks" --calls 8 \
		>"$WORK/w.$r" 2>&1 &
	pids="$pids $!"
done
# Once every worker is in its second call (the first one went through
# all three hosts), the third host dies.
for _ in $(seq 1200); do
	[ "$(marks 1)" -eq 4 ] && break
	sleep 0.1
done
[ "$(marks 1)" -eq 4 ]
ok $? "four workers joined and finished their first call"
sleep 0.2
kill_ms=$(date +%s%3N)
kill -KILL "${DP_PIDS[3]}"
echo "# tally-dp 3 SIGKILLed"
rc=0
for p in $pids; do
	wait "$p" || rc=1
done
[ $rc -eq 0 ] || sed 's/^/#   /' "$WORK"/w.*
ok $rc "every worker: one call -ETIMEDOUT with its input kept, the next exact in a new epoch"

# The failed call returned within its timeout of the kill: its end is
# "call K: rc -110 ms M" after its start mark.
late=0
for r in 0 1 2 3; do
	k=$(sed -n 's/^call \([0-9]*\): rc -110 .*/\1/p' "$WORK/w.$r" | head -1)
	ms=$(sed -n "s/^call $k: rc -110 ms \([0-9]*\) .*/\1/p" "$WORK/w.$r")
	start=$(stat -c %.3Y "$WORK/marks/start.$r.$k" | tr -d .)
	end=$((start + ms))
	# The slots on the survivors may still finish their chunks (at most
	# a whole call's time) before the silence that times out starts.
	one=$(sed -n 's/^call 0: rc 0 ms \([0-9]*\) .*/\1/p' "$WORK/w.$r")
	echo "# rank $r: call $k failed $((end - kill_ms)) ms after the kill" \
		"(a whole call: ${one:-?} ms)"
	[ -n "$k" ] && [ -n "$one" ] &&
		[ $((end - kill_ms)) -le $((TIMEOUT_MS + one + 1000)) ] || late=1
done
[ $late -eq 0 ]
ok $? "each failed call returned within its timeout ($TIMEOUT_MS ms) once its results stopped"
grep -q "^input kept" "$WORK/w.0" && grep -q "^input kept" "$WORK/w.3"
ok $? "the failed calls' buffers held their input again"
d0=$(digest "$WORK/w.0")
same=0
for r in 1 2 3; do
	[ "$(digest "$WORK/w.$r")" = "$d0" ] || same=1
done
[ -n "$d0" ] && [ $same -eq 0 ]
ok $? "the same reference digest on every worker ($d0)"
grep -h "^rejoined" "$WORK"/w.* | sort | uniq -c | sed 's/^/# /'

tctl --json job show ep >"$WORK/show.json"
jq_py 'j["job"]["epoch"] == 2 and j["job"]["epoch_reason"]["cause"] == "dataplane" and j["job"]["epoch_reason"]["dataplane"] == "dpc" and j["job"]["epoch_reason"]["from"] == 1' \
	<"$WORK/show.json" | grep -qx True
ok $? "job show --json: epoch 2, ended by dataplane dpc (was 1)"
jq_py '[s["dataplane"] for s in j["job"]["shards"]] == ["dp0", "dpb"]' \
	<"$WORK/show.json" | grep -qx True
ok $? "its shards are the survivors dp0, dpb"
tctl job show ep >"$WORK/show.txt"
grep -E '^epoch: +2$' "$WORK/show.txt" >/dev/null &&
	grep -E '^epoch_reason: +dataplane: tally-dp dpc missed 3 admin polls' \
	"$WORK/show.txt" >/dev/null
ok $? "job show (text): epoch 2 and why"
grep -E '^epoch|^shards' -A3 "$WORK/show.txt" | sed 's/^/# /'
tctl --json stats >"$WORK/stats.json"
jq_py 'j["tallyd"]["epochs_ended"] == 1 and j["tallyd"]["rejoins"] == 4' \
	<"$WORK/stats.json" | grep -qx True
ok $? "stats: epochs_ended 1, rejoins 4"

# --- no dataplane left: no capacity -------------------------------------------
kill -KILL "${DP_PIDS[2]}"
dp_stop
for _ in $(seq 50); do
	tctl --json job show ep | jq_py 'j["job"]["epoch_reason"]["cause"]' |
		grep -qx no_capacity && break
	sleep 0.1
done
tctl --json job show ep | jq_py 'j["job"]["epoch_reason"]["cause"]' |
	grep -qx no_capacity
ok $? "every dataplane dead: the epoch ends with no_capacity"
# No capacity: the workers' joins go to the ring fallback (libtally
# offers its ring listener in every join; a join that did not would
# hear ENOSPC with "fallback": "ring", tests/control/epoch_test.py), and
# the four get the bits tally-dp gave.
pids=""
for r in 0 1 2 3; do
	eval "ns=\$TESTBED_NS_$((r + 1))"
	ip netns exec "$ns" timeout 60 "$EW" \
		--url "tally://$TESTBED_HOST_IP:$TALLYD_RDV_PORT/ep" \
		--token-file "$TF" --rank "$r" --world 4 --mib 32 \
		--timeout-ms "$TIMEOUT_MS" --mark "$WORK/marks" --once 1 \
		>"$WORK/ring.$r" 2>&1 &
	pids="$pids $!"
done
rc=0
for p in $pids; do
	wait "$p" || rc=1
done
[ $rc -eq 0 ] || sed 's/^/#   /' "$WORK"/ring.*
ok $rc "no capacity: four workers join the ring fallback, each call exact"
n=$(grep -l "^transport: ring" "$WORK"/ring.* | wc -l)
[ "$n" -eq 4 ]
ok $? "their contexts say transport ring"
same=1
for r in 0 1 2 3; do
	[ "$(digest "$WORK/ring.$r")" = "$d0" ] || same=0
done
[ $same -eq 1 ]
ok $? "the ring's result has the digest tally-dp's had ($d0)"
grep -h "WARNING" "$WORK/ring.0" | head -2 | sed 's/^/# /'

finish

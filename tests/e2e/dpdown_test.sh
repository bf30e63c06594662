#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# tallyd never waits on tally-dp (issue 11, item 2), with a real tally-dp:
# SIGSTOPped for 10 s under a ready job, tallyctl ping, job create, job
# list, stats and job delete each answer within 200 ms every time, stats
# say tally-dp is down, a join gets its params at once and four ranks
# that join wait at the barrier; after SIGCONT the membership is
# programmed, the ranks' allreduce succeeds and the job's counters move.
# Then an admin client that sends tally-dp requests and never reads the
# replies: tallyd stays as quick, and all is well once that client goes.
TESTBED_OPTS="-n 4 --host"
. "$(dirname "$0")/preamble.sh"
RDVJOIN=$TALLY_SRC/tests/e2e/rdvjoin.py
LIMIT_MS=200

dp_start
ok $? "tally-dp starts"
tallyd_start --set join_timeout_s=30
ok $? "tallyd starts"
TOKEN=$(tctl --json job create train --world 4 | jq_py 'j["token"]')
[ "${#TOKEN}" -eq 64 ]
ok $? "job 'train' (world 4) created"

# allreduce_url_all NAME [tally-bench options]: ranks 0-3 of train in the
# background; sets PIDS.
allreduce_bg() {
	local name=$1 r
	shift
	PIDS=""
	for r in 0 1 2 3; do
		worker_url "$r" train "$TOKEN" "$r" 4 "$WORK/$name.$r" "$@"
		PIDS="$PIDS $WPID"
	done
}
wait_all() {
	local p rc=0
	for p in $PIDS; do
		wait "$p" || rc=1
	done
	return $rc
}
rounds() {
	tctl --json job show train | jq_py 'j["job"]["counters"]["rounds"]'
}

allreduce_bg s1 --type i32 --size 1M --iters 2 --seed 3
wait_all
ok $? "four workers join through tallyd and allreduce"

# hammer SECONDS NAME: tallyctl requests of every kind, timed; one TAP
# line per kind (each answer within LIMIT_MS) and one for their success.
hammer() {
	local end=$(($(date +%s) + $1)) name=$2 i=0 t0 dt rc fails=0 c
	local -A worst=()
	while [ "$(date +%s)" -lt "$end" ]; do
		for c in ping "job create $name$i --world 2" "job list" stats \
				"job delete $name$i"; do
			t0=$(date +%s%N)
			# shellcheck disable=SC2086
			timeout 5 "$TALLYCTL_BIN" --socket "$TALLYD_SOCK" $c \
				>/dev/null 2>&1
			rc=$?
			dt=$((($(date +%s%N) - t0) / 1000000))
			c=${c%% "$name"*}
			c=${c%% --*}
			[ "${worst[$c]:-0}" -ge "$dt" ] || worst[$c]=$dt
			[ $rc -eq 0 ] || fails=$((fails + 1))
		done
		i=$((i + 1))
		sleep 0.05
	done
	for c in ping "job create" "job list" stats "job delete"; do
		[ "${worst[$c]:-99999}" -lt $LIMIT_MS ]
		ok $? "$3: tallyctl $c answers within $LIMIT_MS ms every time for $1 s (${worst[$c]:-?} ms at worst)"
	done
	[ $fails -eq 0 ]
	ok $? "$3: all $((i * 5)) requests succeed ($fails failed)"
}

# --- tally-dp stopped -----------------------------------------------------
sleep 0.5	# a poll has read the counters
before=$(rounds)
kill -STOP "$DP_PID"
stopped=1
sleep 0.5
/usr/bin/python3 "$RDVJOIN" "$TESTBED_HOST_IP" "$TALLYD_RDV_PORT" train \
	"$TOKEN" 0 4 >"$WORK/join.json"
ms=$(jq_py 'j["params_ms"]' <"$WORK/join.json")
[ "$(jq_py 'j["params"]["op"]' <"$WORK/join.json")" = params ] &&
	jq_py 'j["params_ms"] < '$LIMIT_MS <"$WORK/join.json" | grep -q True
ok $? "tally-dp stopped: a join gets its params at once ($ms ms)"
[ $? -eq 0 ] || sed 's/^/#   /' "$WORK/join.json"
allreduce_bg s2 --type i32 --size 1M --iters 2 --seed 5
hammer 10 t "tally-dp stopped"
tctl --json stats >"$WORK/stats.json"
[ "$(jq_py 'j["tallyd"]["dp_up"], j["dp"] is None, j["tallyd"]["dp_timeouts"] > 0' \
	<"$WORK/stats.json")" = "False True True" ]
ok $? "stats: dp_up false, no tally-dp counters, time-outs counted"
curl -sf "http://$TALLYD_METRICS/metrics" | grep -q '^tallyd_dp_up 0$'
ok $? "metrics: tallyd_dp_up 0"
alive=0
for p in $PIDS; do
	kill -0 "$p" 2>/dev/null || alive=1
done
tctl --json job show train | jq_py 'j["job"]["state"], j["job"]["joined"]' >"$WORK/forming"
[ $alive -eq 0 ] && [ "$(cat "$WORK/forming")" = "forming 4" ]
ok $? "the four ranks that joined wait at the barrier ($(tr '\n' ' ' <"$WORK/forming"))"

# --- tally-dp continues ---------------------------------------------------
kill -CONT "$DP_PID"
stopped=0
wait_all
ok $? "after SIGCONT the membership is programmed and the allreduce succeeds"
[ $? -eq 0 ] || sed 's/^/#   /' "$WORK"/s2.* "$WORK/tallyd.log"
for _ in $(seq 30); do
	[ "$(rounds)" -gt "$before" ] && break
	sleep 0.2
done
after=$(rounds)
up=$(tctl --json ping | jq_py 'j["dp_up"]')
[ "$up" = True ] && [ "$after" -gt "$before" ]
ok $? "dp_up true again, and the job's counters moved (rounds $before -> $after)"

# --- an admin client that never reads its replies ------------------------
/usr/bin/python3 - "$DP_SOCK" >"$WORK/wedge.out" 2>&1 <<'EOF' &
import socket, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.connect(sys.argv[1])
s.setblocking(False)
n = 0
try:
    while n < 100000:
        s.send(b'{"cmd":"job_list"}')
        n += 1
except BlockingIOError:
    pass
print(f"sent {n} requests, reading none", flush=True)
time.sleep(14)
EOF
wedge=$!
sleep 2		# past a request's deadline, were tally-dp stuck
echo "# wedging client: $(cat "$WORK/wedge.out"); tallyd's dp_up: $(tctl --json ping | jq_py 'j["dp_up"]')"
hammer 10 w "admin client not reading"
kill "$wedge" 2>/dev/null
wait "$wedge" 2>/dev/null
for _ in $(seq 50); do
	[ "$(tctl --json ping | jq_py 'j["dp_up"]')" = True ] && break
	sleep 0.1
done
[ "$(tctl --json ping | jq_py 'j["dp_up"]')" = True ]
ok $? "once that client is gone, tally-dp is up for tallyd"
allreduce_bg s3 --type i32 --size 1M --iters 1 --seed 7
wait_all
ok $? "and an allreduce through tallyd succeeds"
[ "$stopped" -eq 0 ] || kill -CONT "$DP_PID"
finish

#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# Job counters are exact across re-formed memberships and restarts
# (issue 11, item 5). Four workers run allreduces through tally:// six
# times in a row, each time a new membership (tally-dp removes the job
# and adds it again); after each, and so before the next removal, the
# test reads tally-dp's counters of the job from its admin socket. tallyd
# is SIGKILLed and started again in the middle of one membership's
# traffic, stopped with SIGTERM and started again between two others,
# and tally-dp is stopped gracefully (SIGTERM, once tallyd has polled its
# final counters) and started again between two more. tallyd polls only
# every 3 s, so its poll cannot be what makes the sums right. At the end
# every counter of the job in tallyd equals the sum of those readings,
# exactly.
TESTBED_OPTS="-n 4 --host"
. "$(dirname "$0")/preamble.sh"
POLL_MS=3000
TALLYD_POLL_MS=$POLL_MS

dp_start
ok $? "tally-dp starts"
tallyd_start
ok $? "tallyd starts (dp_poll_ms=$POLL_MS)"
TOKEN=$(tctl --json job create bb --world 4 | jq_py 'j["token"]')
ID=$(tctl --json job show bb | jq_py 'j["job"]["id"]')
[ "${#TOKEN}" -eq 64 ]
ok $? "job 'bb' (world 4, id $ID) created"
echo '{}' >"$WORK/sum.json"

# membership K [between]: four ranks allreduce through tally:// ("between"
# runs while they do); then, with their traffic over, tally-dp's counters
# of the job are added to sum.json.
membership() {
	local k=$1 pids="" r p rc=0
	for r in 0 1 2 3; do
		worker_url "$r" bb "$TOKEN" "$r" 4 "$WORK/m$k.$r" --type i32 \
			--size 2M --iters 3 --pause-ms 200 --seed "$k"
		pids="$pids $WPID"
	done
	[ -n "${2:-}" ] && "$2"
	for p in $pids; do
		wait "$p" || rc=1
	done
	ok $rc "membership $k: the four workers' allreduces are exact"
	[ $rc -eq 0 ] || sed 's/^/#   /' "$WORK"/m"$k".* "$WORK/tallyd.log"
	sleep 0.3	# late duplicates land before the reading
	dp_admin '{"cmd":"job_list"}' >"$WORK/dp.$k.json"
	/usr/bin/python3 - "$WORK/sum.json" "$WORK/dp.$k.json" "$ID" <<'EOF'
import json, sys
total = json.load(open(sys.argv[1]))
jobs = json.load(open(sys.argv[2]))["jobs"]
mine = [j for j in jobs if j["id"] == int(sys.argv[3])]
assert len(mine) == 1, "job not at tally-dp"
for k, v in mine[0]["counters"].items():
    total[k] = total.get(k, 0) + v
json.dump(total, open(sys.argv[1], "w"))
EOF
	ok $? "membership $k: tally-dp's counters read ($(jq_py 'j["jobs"][0]["counters"]["rounds"]' <"$WORK/dp.$k.json") rounds)"
}

kill_tallyd_mid() {
	sleep 0.4
	tallyd_stop KILL
	tallyd_start
	ok $? "tallyd SIGKILLed during the traffic and started again"
}

membership 1
membership 2
membership 3 kill_tallyd_mid
tallyd_stop
ok $? "tallyd stops cleanly (SIGTERM) between memberships"
tallyd_start
ok $? "and starts again"
membership 4
sleep $((POLL_MS / 1000 + 1))	# tallyd has polled tally-dp's final counters
dp_stop
ok $? "tally-dp stopped gracefully (SIGTERM) between memberships"
dp_start
ok $? "and started again"
membership 5
membership 6
sleep $((POLL_MS / 1000 + 1))
tctl --json job show bb >"$WORK/show.json"
/usr/bin/python3 - "$WORK/sum.json" "$WORK/show.json" <<'EOF' >"$WORK/cmp.txt"
import json, sys
want = json.load(open(sys.argv[1]))
have = json.load(open(sys.argv[2]))["job"]["counters"]
bad = [f"{k}: tallyd {have.get(k)} != tally-dp {v}" for k, v in
       sorted(want.items()) if have.get(k) != v]
print(f"rounds {have.get('rounds')} contributions {have.get('contributions')}"
      f" bytes_in {have.get('bytes_in')}")
for b in bad:
    print(b)
sys.exit(1 if bad or not want.get("rounds") else 0)
EOF
ok $? "tallyd's job counters equal the sums of tally-dp's, every one ($(head -1 "$WORK/cmp.txt"))"
sed 1d "$WORK/cmp.txt" | sed 's/^/#   /'
finish

#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# Issue 11, item 10, through the control plane: `tallyctl job create
# --auth` makes an authenticated job; workers joining through tallyd get
# their keys with "ready", tally-dp gets every member's with job_add, and
# tagged allreduces sum exactly. The job stays authenticated across a
# tallyd restart (its secret is in the state file) and a new membership
# formed afterwards works with its own keys.
TESTBED_OPTS="-n 2 --host"
. "$(dirname "$0")/preamble.sh"
ARGS=(--type i32 --size 64K --iters 5 --vary --seed 9 --timeout-ms 10000)

dp_start
ok $? "tally-dp starts"
tallyd_start --set join_timeout_s=10
ok $? "tallyd starts"
tctl --json job create aj --world 2 --auth >"$WORK/create.json"
ok $? "tallyctl job create --auth"
TOKEN=$(jq_py 'j["token"]' <"$WORK/create.json")
[ "$(jq_py 'j["job"]["auth"]' <"$WORK/create.json")" = True ]
ok $? "the job says auth: true"

# join_all NAME: both ranks join and allreduce; TAP lines for the result.
join_all() {
	local pids="" rc=0 r
	for r in 0 1; do
		worker_url "$r" aj "$TOKEN" "$r" 2 "$WORK/$1.$r" "${ARGS[@]}"
		pids="$pids $WPID"
	done
	for r in $pids; do
		wait "$r" || rc=1
	done
	ok $rc "$1: both ranks' sums exact"
	[ $rc -eq 0 ] || sed 's/^/#   /' "$WORK/$1".*
	[ -n "$(digest "$WORK/$1.0")" ] &&
		[ "$(digest "$WORK/$1.0")" = "$(digest "$WORK/$1.1")" ]
	ok $? "$1: bit-identical"
}

join_all first
dp_admin '{"cmd":"job_list"}' >"$WORK/list.json"
grep -q '"auth": *true' "$WORK/list.json" &&
	! grep -qi '"result"\|"up"' "$WORK/list.json"
ok $? "tally-dp has the job authenticated, and shows no key"
[ "$(dp_counter drop_bad_auth)" -eq 0 ] && [ "$(dp_counter rx)" -gt 0 ]
ok $? "every tagged packet passed (drop_bad_auth 0)"
tctl job show aj | grep -q "^auth: *true"
ok $? "tallyctl job show says auth true"
grep -q '"auth_secret"' "$WORK/state.json" &&
	[ "$(stat -c %a "$WORK/state.json")" = 600 ]
ok $? "the job's secret is in tallyd's state file (mode 0600)"
tallyd_stop
tallyd_start --set join_timeout_s=10
ok $? "tallyd restarts"
join_all second
[ "$(dp_counter drop_bad_auth)" -eq 0 ]
ok $? "the new membership's keys fit (drop_bad_auth 0)"
finish

#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# A job sharded over three tally-dp hosts (docs/scale-out.md, "Shards"):
# tallyd drives three dataplanes ("dataplane" lines), `job create
# --dataplanes` refuses an unknown name and a dataplane that is down,
# four workers join through tally:// and their 64 MiB f32 allreduce is
# exact and bit-identical to the same allreduce through one host, i32 is
# exact too, every shard carried its share of the slots, `job show`
# lists the shards with their counters, and a delete empties all three.
TESTBED_OPTS="-n 4 --dps 3 --host"
. "$(dirname "$0")/preamble.sh"

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

dp_start && dp_start_at 2
ok $? "tally-dp on dataplane 1 and 2 start"
tallyd_start --set "dataplane = dpb $WORK/dp2.sock" \
	--set "dataplane = dpc $WORK/dp3.sock" --set join_timeout_s=20
ok $? "tallyd starts with three dataplanes"
dps_up 2
ok $? "tallyd sees dp0 and dpb up, dpc down"

# --- create: names and liveness --------------------------------------------
tctl job create bad --world 4 --dataplanes dp0,nope >/dev/null \
	2>"$WORK/nope.err"
[ $? -eq 1 ] && grep -q "no dataplane 'nope'" "$WORK/nope.err"
ok $? "--dataplanes with an unknown name is refused (exit 1, 'no dataplane')"
tctl job create sh --world 4 --dataplanes dp0,dpb,dpc >/dev/null \
	2>"$WORK/down.err"
[ $? -eq 1 ] && grep -q "dataplane 'dpc' is down" "$WORK/down.err"
ok $? "a sharded job with a dataplane down is refused ('dpc' is down)"
tctl job create bad --world 4 --dataplanes dp0,dp0 >/dev/null 2>&1
[ $? -eq 1 ]
ok $? "--dataplanes naming one twice is refused"

dp_start_at 3 && dps_up 3
ok $? "tally-dp on dataplane 3 starts and tallyd sees it up"
tctl --json job create sh --world 4 --dataplanes dp0,dpb,dpc \
	>"$WORK/sh.json"
ok $? "job create sh --dataplanes dp0,dpb,dpc"
SH=$(jq_py 'j["token"]' <"$WORK/sh.json")
[ "$(jq_py '[s["dataplane"] for s in j["job"]["shards"]]' <"$WORK/sh.json")" = \
	"['dp0', 'dpb', 'dpc']" ]
ok $? "its shards are dp0, dpb, dpc in that order"
tctl --json job create one --world 4 >"$WORK/one.json"
ok $? "job create one (no --dataplanes: dp0 alone)"
ONE=$(jq_py 'j["token"]' <"$WORK/one.json")
[ "$(jq_py '[s["dataplane"] for s in j["job"]["shards"]]' <"$WORK/one.json")" = \
	"['dp0']" ]
ok $? "job one has the one shard dp0"

# --- the same allreduce through one host and through three -------------
t0=$(date +%s)
allreduce_all one1 one "$ONE" --type f32 --size 64M --iters 1 --seed 5
ok $? "64 MiB f32 through one tally-dp: exact on all four workers"
D1=$(same_digest one1)
ok $? "one host: bit-identical on all workers ($D1)"
allreduce_all sh1 sh "$SH" --type f32 --size 64M --iters 1 --seed 5
ok $? "64 MiB f32 sharded over three tally-dp: exact on all four workers"
D3=$(same_digest sh1)
ok $? "sharded: bit-identical on all workers ($D3)"
[ -n "$D1" ] && [ "$D3" = "$D1" ]
ok $? "the sharded result is bit-identical to the one-host result"
allreduce_all sh2 sh "$SH" --type i32 --size 16M --iters 2 --seed 6
ok $? "16 MiB i32 sharded over three tally-dp: exact, twice, on a new membership"
echo "# allreduces took $(($(date +%s) - t0)) s"

# --- every shard carried its slots, job show says so ---------------------
sleep 0.6	# a tallyd poll at least
tctl --json job show sh >"$WORK/show.json"
ok $? "job show sh"
jq_py 'all(s["up"] and s["in_dp"] and s["counters"]["rounds"] > 0 for s in j["job"]["shards"])' \
	<"$WORK/show.json" | grep -qx True
ok $? "all three shards up, holding the job, with rounds of their own"
# A shard's counters are its tally-dp's for this membership; the job's
# add the memberships before (the f32 run's rounds).
jq_py 'sum(s["counters"]["rounds"] for s in j["job"]["shards"]) <= j["job"]["counters"]["rounds"]' \
	<"$WORK/show.json" | grep -qx True
ok $? "the job's rounds take in its shards'"
for h in 2 3; do
	"$DPADMIN" "$WORK/dp$h.sock" '{"cmd":"job_list"}' |
		jq_py 'j["jobs"][0]["counters"]["contributions"] > 0 and len(j["jobs"]) == 1' |
		grep -qx True
	ok $? "tally-dp $h holds only the sharded job, with contributions"
done
tctl job show sh >"$WORK/show.txt"
grep -q '^shards:' "$WORK/show.txt" && grep -q ' dpc ' "$WORK/show.txt"
ok $? "job show (text) lists the shards"

# --- delete: gone from all three -------------------------------------------
tctl job delete sh >/dev/null
ok $? "job delete sh"
n=0
for s in "$DP_SOCK" "$WORK/dp2.sock" "$WORK/dp3.sock"; do
	n=$((n + $("$DPADMIN" "$s" '{"cmd":"job_list"}' |
		jq_py 'sum(1 for x in j["jobs"] if x["id"] == '"$(jq_py 'j["job"]["id"]' <"$WORK/sh.json")"')')))
done
[ "$n" -eq 0 ]
ok $? "the sharded job is gone from every tally-dp"

finish

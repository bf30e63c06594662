#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# Two tiers built by tallyd (docs/scale-out.md, "Two tiers"): three
# tally-dp hosts, tallyd driving them ("dataplane" lines), `tallyctl job
# create --leaves dpb,dpc --spine dp0` makes the tree; six workers open
# tally://.../NAME with their total rank and world 6, as for any job, and
# tallyd places them on the leaves (three each). 4 MiB f32 and i32 are
# exact and bit-identical to the same allreduce of a flat six-worker job
# through tallyd; each leaf forwarded its rounds to the spine; `job show`
# prints the tree; `job delete` leaves no job at any tally-dp. Then 66
# ranks (two leaves of 33, 33 ranks a namespace) through tallyd: past 64
# ranks, exact and bit-identical on every rank.
TESTBED_OPTS="-n 6 --dps 3 --host"
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

# run_all NAME JOB TOKEN [tally-bench options]: six workers of JOB through
# tally:// (total ranks 0..5, world 6); 0 when every one ended exact.
run_all() {
	local name=$1 job=$2 token=$3 pids="" r p rc=0
	shift 3
	for r in 0 1 2 3 4 5; do
		worker_url "$r" "$job" "$token" "$r" 6 "$WORK/$name.$r" "$@"
		pids="$pids $WPID"
	done
	for p in $pids; do
		wait "$p" || rc=1
	done
	[ $rc -eq 0 ] || grep -L '^digest' "$WORK/$name".* | head -3 |
		xargs -r sed 's/^/#   /'
	return $rc
}

# same_digest NAME: prints the one digest every NAME.* output has.
same_digest() {
	local d0="" f d
	for f in "$WORK/$1".*; do
		d=$(digest "$f")
		[ -n "$d" ] || return 1
		[ -z "$d0" ] || [ "$d" = "$d0" ] || return 1
		d0=$d
	done
	echo "$d0"
}

# dp_counter H NAME: tally-dp H's total counter NAME.
dp_counter() {
	local s=$DP_SOCK
	[ "$1" -eq 1 ] || s=$WORK/dp$1.sock
	"$DPADMIN" "$s" '{"cmd":"stats"}' | jq_py "j['total']['$2']"
}

# jobs_at ID: how many tally-dp hold job ID.
jobs_at() {
	local n=0 s
	for s in "$DP_SOCK" "$WORK/dp2.sock" "$WORK/dp3.sock"; do
		n=$((n + $("$DPADMIN" "$s" '{"cmd":"job_list"}' |
			jq_py "sum(1 for x in j['jobs'] if x['id'] == $1)")))
	done
	echo "$n"
}

dp_start && dp_start_at 2 && dp_start_at 3
ok $? "three tally-dp start (the spine's and two leaves')"
tallyd_start --set "dataplane = dpb $WORK/dp2.sock" \
	--set "dataplane = dpc $WORK/dp3.sock" --set join_timeout_s=30 \
	--set rendezvous_handshake_ms=10000
ok $? "tallyd starts with three dataplanes"
dps_up 3
ok $? "tallyd sees dp0, dpb and dpc up"

# --- bad trees ---------------------------------------------------------------
tctl job create bad --world 6 --leaves dpb,nope --spine dp0 >/dev/null \
	2>"$WORK/nope.err"
[ $? -eq 1 ] && grep -q "no dataplane 'nope'" "$WORK/nope.err"
ok $? "a tree with an unknown leaf is refused (no dataplane 'nope')"
tctl job create bad --world 6 --leaves dpb,dp0 --spine dp0 >/dev/null \
	2>"$WORK/same.err"
[ $? -eq 1 ] && grep -q "the spine and a leaf" "$WORK/same.err"
ok $? "a tree whose spine is also a leaf is refused"
tctl job create bad --world 7 --leaves dpb,dpc --spine dp0 >/dev/null \
	2>"$WORK/odd.err"
[ $? -eq 1 ] && grep -q "does not split into 2 leaves" "$WORK/odd.err"
ok $? "a world that does not split evenly over the leaves is refused"

# --- the flat reference: six workers through tallyd and one tally-dp -------
tctl --json job create flat --world 6 >"$WORK/flat.json"
ok $? "job create flat --world 6"
FLAT=$(jq_py 'j["token"]' <"$WORK/flat.json")
run_all flatf flat "$FLAT" --type f32 --size 4M --iters 2 --seed 11
ok $? "flat, f32 4 MiB: exact on all six"
DF=$(same_digest flatf)
ok $? "flat f32: bit-identical on all six ($DF)"
run_all flati flat "$FLAT" --type i32 --size 4M --iters 2 --seed 12
ok $? "flat, i32 4 MiB: exact on all six"
DI=$(same_digest flati)
ok $? "flat i32: bit-identical on all six ($DI)"
tctl job delete flat >/dev/null
ok $? "job delete flat"

# --- the tree: two leaves of three and a spine ----------------------------
tctl --json job create tr --world 6 --leaves dpb,dpc --spine dp0 \
	>"$WORK/tr.json"
ok $? "job create tr --world 6 --leaves dpb,dpc --spine dp0"
TR=$(jq_py 'j["token"]' <"$WORK/tr.json")
ID=$(jq_py 'j["job"]["id"]' <"$WORK/tr.json")
[ "$(jq_py '[(l["name"], l["dataplane"], l["world"]) for l in j["job"]["tree"]["leaves"]]' <"$WORK/tr.json")" = \
	"[('tr/0', 'dpb', 3), ('tr/1', 'dpc', 3)]" ]
ok $? "its leaves: tr/0 at dpb and tr/1 at dpc, three ranks each"
for _ in $(seq 20); do
	[ "$(jobs_at "$ID")" = 1 ] && break
	sleep 0.1
done
"$DPADMIN" "$DP_SOCK" '{"cmd":"job_list"}' |
	jq_py "[x['world'] for x in j['jobs'] if x['id'] == $ID] == [2]" |
	grep -qx True
ok $? "the spine (job $ID, world 2: the leaves) is at dp0 before any worker"
fw0=$(dp_counter 2 tier_forwarded) fw1=$(dp_counter 3 tier_forwarded)
run_all treef tr "$TR" --type f32 --size 4M --iters 2 --seed 11
ok $? "the tree, f32 4 MiB: exact on all six"
D=$(same_digest treef)
ok $? "the tree f32: bit-identical on all six ($D)"
[ -n "$D" ] && [ "$D" = "$DF" ]
ok $? "the tree f32: bit-identical to the flat result"
run_all treei tr "$TR" --type i32 --size 4M --iters 2 --seed 12
ok $? "the tree, i32 4 MiB: exact on all six (a new membership)"
D=$(same_digest treei)
[ -n "$D" ] && [ "$D" = "$DI" ]
ok $? "the tree i32: bit-identical to the flat result ($D)"
[ "$(jobs_at "$ID")" = 3 ]
ok $? "job $ID is at all three tally-dp (spine and two leaves)"
for h in 2 3; do
	f=$(dp_counter $h tier_forwarded) r=$(dp_counter $h tier_results)
	eval "b=\$fw$((h - 2))"
	echo "# leaf at dataplane $h: forwarded $f, results $r," \
		"re-forwarded $(dp_counter $h tier_reforwarded)"
	[ "$f" -gt "$b" ] && [ "$r" -gt 0 ] 2>/dev/null
	ok $? "the leaf at dataplane $h forwarded its rounds to the spine"
done

sleep 0.6	# a tallyd poll at least
tctl --json job show tr >"$WORK/show.json"
jq_py '[(l["state"], l["joined"]) for l in j["job"]["tree"]["leaves"]] == [("ready", 3), ("ready", 3)] and j["job"]["tree"]["spine"] == "dp0"' \
	<"$WORK/show.json" | grep -qx True
ok $? "job show tr --json: both leaves ready with three members, spine dp0"
tctl job show tr >"$WORK/show.txt"
grep -q '^tree: 6 ranks, 2 leaves of 3, spine at dp0' "$WORK/show.txt" &&
	grep -q 'tr/1 *dpc' "$WORK/show.txt"
ok $? "job show tr prints the tree"
sed 's/^/#   /' "$WORK/show.txt" | tail -4

tctl job delete tr >/dev/null
ok $? "job delete tr"
[ "$(jobs_at "$ID")" = 0 ] && [ "$(tctl --json job list | jq_py 'len(j["jobs"])')" = 0 ]
ok $? "no part of the tree is left at any tally-dp or in tallyd"

# --- past 64 ranks through tallyd: two leaves of 33 -----------------------
tctl --json job create big --world 66 --leaves dpb,dpc --spine dp0 \
	--window 16 >"$WORK/bigjob.json"
ok $? "job create big --world 66 --leaves dpb,dpc --spine dp0"
BIG=$(jq_py 'j["token"]' <"$WORK/bigjob.json")
pids=""
for g in $(seq 0 65); do
	worker_url $((g / 33)) big "$BIG" "$g" 66 "$WORK/big.$g" --type f32 \
		--size 256K --iters 2 --seed 13 --timeout-ms 20000
	pids="$pids $WPID"
done
rc=0
for p in $pids; do
	wait "$p" || rc=1
done
[ $rc -eq 0 ] || grep -L '^digest' "$WORK"/big.* | head -3 |
	xargs -r sed 's/^/#   /'
ok $rc "66 ranks (2 x 33) through tallyd, f32 256 KiB: exact on every rank"
D=$(same_digest big)
ok $? "66 ranks: bit-identical on every rank ($D)"
tctl job delete big >/dev/null
ok $? "job delete big"

finish

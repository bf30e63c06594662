#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# tallyd reconciles tally-dp's job table with its own by full
# configuration (issue 11, item 4): 200 jobs put into tally-dp behind
# tallyd's back are removed and counted; a job re-added at tally-dp with
# another window, another member, or (where tally-dp shows token
# fingerprints) another wire token is programmed back with tallyd's
# configuration and counted, and the workers' next allreduce succeeds;
# after tallyd's state is reset, the job it no longer knows is removed
# from tally-dp. Where tally-dp pages its job list, 200 stale jobs of
# world 64 (far over one 64 KiB reply) go too.
TESTBED_OPTS="-n 4 --host"
. "$(dirname "$0")/preamble.sh"

dp_start
ok $? "tally-dp starts"
tallyd_start
ok $? "tallyd starts"

# stale_jobs FIRST COUNT WORLD: adds jobs FIRST.. to tally-dp directly.
stale_jobs() {
	/usr/bin/python3 - "$DP_SOCK" "$@" <<'EOF'
import json, socket, sys
path, first, count, world = sys.argv[1], *map(int, sys.argv[2:5])
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.connect(path)
for i in range(first, first + count):
    m = [{"ip": f"10.200.{r // 250}.{r % 250 + 1}", "port": 40000}
         for r in range(world)]
    s.send(json.dumps({"cmd": "job_add", "id": i, "token": "%016x" % i,
                       "world": world, "window": 8, "max_elems": 64,
                       "narrow": False, "members": m}).encode())
    rep = json.loads(s.recv(1 << 16))
    assert rep["errno"] == 0, rep
EOF
}
# dp_ids: the ids tally-dp holds, space-separated (every page).
dp_ids() {
	/usr/bin/python3 - "$DP_SOCK" <<'EOF'
import json, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.connect(sys.argv[1])
ids, after = [], 0
while True:
    s.send(json.dumps({"cmd": "job_list", "after": after,
                       "limit": 64}).encode())
    rep = json.loads(s.recv(1 << 20))
    ids += [j["id"] for j in rep["jobs"]]
    if not rep.get("more") or not rep["jobs"]:
        break
    after = rep["jobs"][-1]["id"]
print(" ".join(str(i) for i in sorted(set(ids))))
EOF
}
# wait_ids WANT: waits (5 s at most) until tally-dp holds exactly WANT.
wait_ids() {
	for _ in $(seq 50); do
		[ "$(dp_ids)" = "$1" ] && return 0
		sleep 0.1
	done
	return 1
}
stat() {
	tctl --json stats | jq_py "j['tallyd']['$1']"
}

# --- stale jobs -----------------------------------------------------------
stale_jobs 1000 200 1
ok $? "200 jobs (ids 1000-1199) added to tally-dp behind tallyd's back"
wait_ids ""
ok $? "tallyd removes every one of them from tally-dp"
[ "$(stat dp_stale_removed)" = 200 ]
ok $? "and counts them (dp_stale_removed $(stat dp_stale_removed))"
curl -sf "http://$TALLYD_METRICS/metrics" | grep -q '^tallyd_dp_stale_removed_total 200$'
ok $? "metrics: tallyd_dp_stale_removed_total 200"
grep -q "tally-dp holds job 1000, which tallyd has no job for: removing it" "$WORK/tallyd.log"
ok $? "each removal is logged"

# --- a job of tallyd's, changed at tally-dp --------------------------------
TOKEN=$(tctl --json job create rc --world 4 | jq_py 'j["token"]')
allreduce() {
	local name=$1 pids="" r p rc=0
	for r in 0 1 2 3; do
		worker_url "$r" rc "$TOKEN" "$r" 4 "$WORK/$name.$r" --type i32 \
			--size 1M --iters 1 --seed 5
		pids="$pids $WPID"
	done
	for p in $pids; do
		wait "$p" || rc=1
	done
	[ $rc -eq 0 ] || sed 's/^/#   /' "$WORK/$name".*
	return $rc
}
allreduce a0
ok $? "job 'rc' (id 1): four workers join and allreduce"
WIRE=$(jq_py '[x["wire_token"] for x in j["jobs"] if x["name"] == "rc"][0]' <"$WORK/state.json")
dp_admin '{"cmd":"job_list"}' >"$WORK/orig.json"
# readd JQ-EXPR: job 1 deleted and added again at tally-dp as it is, with
# EXPR (Python, over the entry e) applied first.
readd() {
	/usr/bin/python3 - "$DP_SOCK" "$WORK/orig.json" "$WIRE" "$1" <<'EOF'
import json, socket, sys
path, orig, wire, expr = sys.argv[1:5]
x = [x for x in json.load(open(orig))["jobs"] if x["id"] == 1][0]
e = {k: x[k] for k in ("id", "world", "window", "max_elems", "narrow",
                       "members", "group") if k in x}
e.update(cmd="job_add", token=wire)
exec(expr)
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.connect(path)
for attempt in range(5):
    # tallyd may put its own back between the two: then again.
    s.send(json.dumps({"cmd": "job_del", "id": 1}).encode())
    rep = json.loads(s.recv(1 << 16))
    s.send(json.dumps(e).encode())
    rep = json.loads(s.recv(1 << 16))
    if rep["errno"] == 0:
        break
assert rep["errno"] == 0, rep
EOF
}
# back_to: waits until tally-dp's job 1 has tallyd's KEY value again.
back_to() {
	local want
	want=$(jq_py "[x for x in j['jobs'] if x['id'] == 1][0]$1" <"$WORK/orig.json")
	for _ in $(seq 50); do
		[ "$(dp_admin '{"cmd":"job_list"}' | jq_py "[x for x in j['jobs'] if x['id'] == 1][0]$1" 2>/dev/null)" = "$want" ] &&
			return 0
		sleep 0.1
	done
	return 1
}

m0=$(stat dp_mismatches)
readd 'e["window"] = 32'
back_to '["window"]'
ok $? "job 1 re-added at tally-dp with window 32: tallyd programs window 64 back"
[ "$(stat dp_mismatches)" = $((m0 + 1)) ]
ok $? "and counts it (dp_mismatches $m0 -> $(stat dp_mismatches))"
grep -q "job 'rc' (id 1) differs at tally-dp (window 32, not 64)" "$WORK/tallyd.log"
ok $? "and logs what differed"
allreduce a1
ok $? "the next allreduce through tallyd succeeds"

dp_admin '{"cmd":"job_list"}' >"$WORK/orig.json"
readd 'e["members"][2]["port"] += 1'
back_to '["members"]'
ok $? "a member's port changed at tally-dp: tallyd programs the members back"
readd 'e["narrow"] = True; e["max_elems"] = 128'
back_to '["max_elems"]'
ok $? "max_elems and narrow changed at tally-dp: programmed back"
[ "$(stat dp_mismatches)" = $((m0 + 3)) ]
ok $? "three mismatches counted"

if jq_py '"token_fp" in j["jobs"][0]' <"$WORK/orig.json" | grep -q True; then
	readd 'e["token"] = "%016x" % (int(wire, 16) ^ 1)'
	back_to '["token_fp"]'
	ok $? "another wire token at tally-dp (token_fp): tallyd programs its own back"
	allreduce a2
	ok $? "and the workers' allreduce succeeds"
else
	ok 0 "# SKIP tally-dp's job_list has no token_fp (an older tally-dp)"
	ok 0 "# SKIP (the allreduce after a token change)"
fi

# --- tallyd's state reset -------------------------------------------------
tallyd_stop
rm -f "$WORK/state.json"
tallyd_start
ok $? "tallyd started again with no state file (a reset)"
wait_ids ""
ok $? "the job it no longer knows is removed from tally-dp"

# --- many large stale jobs, where tally-dp pages its list -----------------
if dp_admin '{"cmd":"job_list","limit":1}' | jq_py '"more" in j' | grep -q True; then
	stale_jobs 2000 200 64
	ok $? "200 jobs of world 64 added to tally-dp behind tallyd's back"
	for _ in $(seq 100); do
		[ -z "$(dp_ids)" ] && break
		sleep 0.1
	done
	[ -z "$(dp_ids)" ]
	ok $? "tallyd reads every page and removes them all"
else
	ok 0 "# SKIP tally-dp does not page job_list (an older tally-dp)"
	ok 0 "# SKIP (the removal of 200 jobs of world 64)"
fi
finish

#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# Listings at max_jobs: a tallyd (no tally-dp needed) with max_jobs 4096
# holds 4096 jobs of world 64, most of them ready with 64 members, long
# names and large counters (the widest job objects there are), restored
# from a state file written here in tallyd's own format (docs/control.md),
# and the last ones created through tallyctl until max_jobs refuses one.
# Then `tallyctl job list`, `--json job list` and `top` (one frame, text
# and --json) show every job exactly once; the control socket's job_list
# pages (docs/control.md: "after", "limit", "more", "next") each fit the
# 64 KiB reply limit and together hold every job in id order, while a
# request that does not page gets EMSGSIZE, not a part of the list;
# job_show of a world-64 membership fits; and no reply was lost
# (ctl_send_failures).
# TAP; needs TALLY_BUILD, or TALLYD_BIN and TALLYCTL_BIN.
set -u
TALLYD=${TALLYD_BIN:-${TALLY_BUILD:?}/control/tallyd/tallyd}
TALLYCTL=${TALLYCTL_BIN:-${TALLY_BUILD:?}/tools/tallyctl/tallyctl}
PY=/usr/bin/python3
MAX=4096
CREATE=3	# created through tallyctl; the rest come from the file

n=0
nfail=0
ok() {	# ok STATUS DESCRIPTION
	n=$((n + 1))
	if [ "$1" -eq 0 ]; then
		echo "ok $n - $2"
	else
		echo "not ok $n - $2"
		nfail=$((nfail + 1))
	fi
}
diag() {
	sed 's/^/#   /'
}

WORK=$(mktemp -d /tmp/tallyd-listing.XXXXXX)
SOCK=$WORK/ctl.sock
PID=
cleanup() {
	[ -n "$PID" ] && kill -KILL "$PID" 2>/dev/null
	rm -rf "$WORK"
}
trap cleanup EXIT

tctl() {
	"$TALLYCTL" --socket "$SOCK" --timeout-ms 30000 "$@"
}

# The state file: MAX - CREATE jobs, ids 1.., 63-character names, world
# 64, every second one ready with 64 members, counters near 2^62.
"$PY" - "$WORK/state.json" $((MAX - CREATE)) <<'EOF'
import json, sys
path, count = sys.argv[1], int(sys.argv[2])
big = 4611686018427387903
ctr = {k: big - i for i, k in enumerate(
    ["contributions", "elements", "bytes_in", "rounds", "results",
     "bytes_out", "resent", "nacks", "drops", "duplicates"])}
jobs = []
for i in range(1, count + 1):
    j = {"name": ("job-%05d-" % i).ljust(63, "x"), "id": i, "world": 64,
         "window": 32768, "max_elems": 8192, "narrow": False,
         "group_ip": 0xefffffff, "group_port": 65535,
         "idle_timeout_s": 31536000, "token_hash": "ab" * 32,
         "created": 1795000000, "last_active": 1795000000 + i,
         "epoch": 4294967295, "codec": "sparse,density=0.01,est=sidco-gpd",
         "counters_base": ctr, "counters_last": ctr}
    if i % 2 == 0:
        j["members"] = [{"ip": 0x0a4d0000 + r + 1, "port": 40000 + r}
                        for r in range(64)]
        j["wire_token"] = "0123456789abcdef"
    jobs.append(j)
json.dump({"version": 1, "next_epoch": 4294967295, "jobs": jobs},
          open(path, "w"))
EOF
ok $? "a state file with $((MAX - CREATE)) jobs of world 64"

"$TALLYD" -c /dev/null --set "control_socket=$SOCK" \
	--set rendezvous=127.0.0.1:0 --set rendezvous_tls=off --set metrics=off \
	--set "state_file=$WORK/state.json" --set "dp_admin=$WORK/no-dp.sock" \
	--set "max_jobs=$MAX" --set dp_poll_ms=60000 >"$WORK/tallyd.log" 2>&1 &
PID=$!
up=1
for _ in $(seq 200); do
	tctl ping >/dev/null 2>&1 && { up=0; break; }
	sleep 0.05
done
ok $up "tallyd starts with them (max_jobs $MAX)"
[ $up -eq 0 ] || diag <"$WORK/tallyd.log"

rc=0
for i in $(seq $CREATE); do
	tctl job create "new-$i" --world 64 >/dev/null || rc=1
done
ok $rc "$CREATE more jobs of world 64 created through tallyctl ($MAX in all)"
tctl job create one-too-many --world 64 >/dev/null 2>"$WORK/err"
rc=$?
[ $rc -eq 1 ] && grep -q "$MAX jobs is the maximum (max_jobs)" "$WORK/err"
ok $? "job $((MAX + 1)) is refused: max_jobs (exit $rc)"

# every_job KIND: checks names (one per line on stdin) against tallyd's
# jobs: each of them exactly once.
want() {
	for i in $(seq $((MAX - CREATE))); do
		printf 'job-%05d-%s\n' "$i" "$(printf 'x%.0s' $(seq 53))"
	done
	for i in $(seq $CREATE); do
		echo "new-$i"
	done
}
want | sort >"$WORK/want"

tctl job list >"$WORK/list.txt"
rc=$?
tail -n +2 "$WORK/list.txt" | awk '{print $1}' | sort >"$WORK/got"
[ $rc -eq 0 ] && head -1 "$WORK/list.txt" | grep -q "^NAME *ID *WORLD" &&
	cmp -s "$WORK/want" "$WORK/got"
ok $? "tallyctl job list: $(wc -l <"$WORK/got") rows, every job once (exit $rc)"
[ $rc -eq 0 ] || tail -n 3 "$WORK/list.txt" "$WORK/err" | diag

tctl --json job list >"$WORK/list.json" 2>"$WORK/err"
rc=$?
"$PY" - "$WORK/list.json" "$WORK/want" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
want = open(sys.argv[2]).read().split()
names = sorted(x["name"] for x in j["jobs"])
ids = [x["id"] for x in j["jobs"]]
assert set(j) == {"jobs"}, sorted(j)
assert names == want, (len(names), len(want))
assert ids == sorted(ids) and len(set(ids)) == len(ids), "ids"
assert all(x["world"] == 64 for x in j["jobs"])
EOF
ok $(( rc | $? )) "tallyctl --json job list: one array of every job, in id order, no paging keys"

tctl top --count 1 --interval 0.1 </dev/null >"$WORK/top.txt" 2>"$WORK/err"
rc=$?
sed -n '/^NAME /,$p' "$WORK/top.txt" | tail -n +2 | awk 'NF {print $1}' |
	sort >"$WORK/got"
[ $rc -eq 0 ] && cmp -s "$WORK/want" "$WORK/got" &&
	head -1 "$WORK/top.txt" | grep -q "$MAX jobs"
ok $? "tallyctl top (one frame): $(wc -l <"$WORK/got") rows, every job once (exit $rc)"
[ $rc -eq 0 ] || diag <"$WORK/err"

tctl --json top --count 1 --interval 0.1 </dev/null >"$WORK/top.json" 2>"$WORK/err"
rc=$?
"$PY" -c 'import json, sys
j = json.load(open(sys.argv[1]))
assert sorted(x["name"] for x in j["jobs"]) == open(sys.argv[2]).read().split()
' "$WORK/top.json" "$WORK/want" 2>/dev/null
ok $(( rc | $? )) "tallyctl --json top (one frame): every job once"

# The socket itself: pages, their size, the cursor, a limit.
"$PY" - "$SOCK" $MAX >"$WORK/pages" 2>&1 <<'EOF'
import json, socket, sys
path, total = sys.argv[1], int(sys.argv[2])
LIMIT = 64 * 1024

def call(req):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.settimeout(30)
    s.connect(path)
    s.send(json.dumps(req).encode())
    data = s.recv(1 << 20)
    s.close()
    assert 0 < len(data) <= LIMIT, "a reply of %d bytes" % len(data)
    return json.loads(data), len(data)

after, ids, sizes = None, [], []
while True:
    req = {"cmd": "job_list", "limit": 65535}
    if after is not None:
        req["after"] = after
    r, size = call(req)
    assert r["errno"] == 0, r
    sizes.append(size)
    ids += [j["id"] for j in r["jobs"]]
    if not r["more"]:
        assert "next" not in r
        break
    assert r["next"] == r["jobs"][-1]["id"] and r["next"] > (after or 0)
    after = r["next"]
assert ids == sorted(ids) and len(set(ids)) == total, len(ids)
assert len(sizes) > 1
print("pages %d, largest %d bytes" % (len(sizes), max(sizes)))
r, _ = call({"cmd": "job_list", "limit": 10, "after": 100})
assert [j["id"] for j in r["jobs"]] == list(range(101, 111)) and r["more"]
assert r["next"] == 110
r, _ = call({"cmd": "job_list", "after": 65535})
assert r["jobs"] == [] and r["more"] is False
r, _ = call({"cmd": "job_list", "limit": 0})
assert r["errno"] == 22, r
r, _ = call({"cmd": "job_list"})
assert r["errno"] == 90 and "do not fit" in r["error"], r
print("without paging: %s" % r["error"])
r, size = call({"cmd": "job_show", "name": "job-00002-" + "x" * 53})
assert r["errno"] == 0 and len(r["job"]["members"]) == 64
print("job_show of a world-64 membership: %d bytes" % size)
EOF
rc=$?
ok $rc "job_list pages: each under 64 KiB, every job once in id order; after/limit; EMSGSIZE unpaged; job_show at world 64"
diag <"$WORK/pages"

fails=$(tctl --json stats | "$PY" -c 'import json, sys
print(json.load(sys.stdin)["tallyd"]["ctl_send_failures"])' 2>/dev/null)
[ "$fails" = 0 ]
ok $? "no control reply was lost (ctl_send_failures $fails)"

kill -TERM "$PID"
wait "$PID"
ok $? "tallyd stops (exit 0)"
PID=

echo "1..$n"
[ "$nfail" -eq 0 ]

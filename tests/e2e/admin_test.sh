#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# tally-dp's admin socket under load and abuse, on a real tally-dp:
# - a second tally-dp refuses the socket path of a live one (exit 1, a
#   sentence) and the first keeps answering; after a SIGKILL the stale
#   socket is taken over;
# - ping reports the limits; job_add refuses what tally-dp cannot serve
#   (job id 0, a broadcast member, 2 GiB a job, q8 results widened past
#   the MTU) at once, with errno and sentence;
# - at max_jobs (300 jobs of world 64) job_list pages in replies that fit
#   one message, every job once; telemetry /tally/jobs pages through all
#   of them without its memory growing (it leaked a job's reply part
#   past 256), /tally/job,ID shows one;
# - a client that never reads its replies is cut off while another's
#   pings are answered at once, and it is counted.
TESTBED_OPTS="-n 1"
. "$(dirname "$0")/preamble.sh"

# errno_of JSON: the errno of tally-dp's reply to one admin request.
errno_of() {
	dp_admin "$1" | jq_py 'j["errno"]'
}

MAXJ=300
dp_start --max-jobs $MAXJ
ok $? "tally-dp starts"

# --- a second tally-dp -------------------------------------------------
# (with memory enough to come up: it must be the socket that stops it)
out=$(timeout 20 "$DP_BIN" -l 0,1 --no-huge --no-shconf --no-pci -m 512 \
	--file-prefix "x$$" --vdev net_null0 -- --addr 10.77.0.1 \
	--admin "$DP_SOCK" 2>&1)
rc=$?
[ $rc -eq 1 ] && echo "$out" | grep -q "another tally-dp is running"
ok $? "a second tally-dp on the same admin socket exits 1, says why ($rc)"
[ $rc -eq 1 ] || echo "$out" | sed 's/^/#   /'
[ "$(errno_of '{"cmd":"ping"}')" = 0 ] && [ -S "$DP_SOCK" ]
ok $? "the first tally-dp still owns the socket and answers"

# --- limits and refusals -----------------------------------------------
lim=$(dp_admin '{"cmd":"ping"}' | jq_py \
	'j["mtu"], j["max_jobs"], j["mem_budget"] > 0, j["max_job_mem"], j["mem_used"]')
[ "$lim" = "1500 $MAXJ True 268435456 0" ]
ok $? "ping: mtu, max_jobs, mem_budget, max_job_mem, mem_used ($lim)"
ADD='{"cmd":"job_add","token":"0123456789abcdef","world":1,"members":[{"ip":"10.77.0.11","port":9}]'
[ "$(errno_of "$ADD,\"id\":0}")" = 22 ]
ok $? "job id 0 refused (EINVAL)"
[ "$(errno_of '{"cmd":"job_add","id":1,"token":"0123456789abcdef","world":1,"members":[{"ip":"255.255.255.255","port":9}]}')" = 22 ]
ok $? "member 255.255.255.255 refused (EINVAL)"
t0=$(date +%s%N)
rep=$(dp_admin "$ADD,\"id\":1,\"window\":32768,\"max_elems\":8192}")
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
echo "$rep" | jq_py 'j["errno"], j["error"]' | grep -q "^7 job 1 needs 2050.1 MiB"
ok $? "window 32768 x max_elems 8192 refused at once (E2BIG, $ms ms)"
echo "# $rep"
rep=$(dp_admin "$ADD,\"id\":1,\"max_elems\":1024,\"encodings\":[\"i8\"]}")
echo "$rep" | jq_py 'j["errno"], j["error"]' | grep -q "^90 .*4164-byte IPv4 packets"
ok $? "q8 with max_elems 1024, results widened: refused at MTU 1500 (EMSGSIZE)"
echo "# $rep"
[ "$(errno_of "$ADD,\"id\":1,\"max_elems\":1024,\"narrow\":true,\"encodings\":[\"i8\"]}")" = 0 ] &&
	[ "$(errno_of '{"cmd":"job_del","id":1}')" = 0 ]
ok $? "the same job with narrow results is taken"

# --- max_jobs: paged listings --------------------------------------------
/usr/bin/python3 - "$DP_SOCK" "tally-e2e-$$" "$MAXJ" >"$WORK/pages" 2>&1 <<'PY'
import json, os, socket, sys
sys.path.insert(0, os.environ["TALLY_SRC"] + "/tests/e2e")
from dpadmin import call
path, prefix, maxj = sys.argv[1], sys.argv[2], int(sys.argv[3])
ids = [(i * 7919) % 65521 + 1 for i in range(maxj)]
for i in ids:
    m = [{"ip": "10.%d.%d.%d" % (i >> 8, i & 255, r + 1), "port": 40000 + r}
         for r in range(64)]
    r = call(path, {"cmd": "job_add", "id": i, "token": "%016x" % (i * 77),
                    "world": 64, "members": m})
    assert r["errno"] == 0, r
r = call(path, {"cmd": "job_add", "id": 65535, "token": "00" * 8,
                "world": 1, "members": [{"ip": "10.9.9.9", "port": 1}]})
print("over", r["errno"])
# job_list, page by page.
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.connect(path)
after, seen, pages, biggest = 0, [], 0, 0
while True:
    s.send(json.dumps({"cmd": "job_list", "after": after}).encode())
    raw = s.recv(1 << 20)
    biggest = max(biggest, len(raw))
    rep = json.loads(raw)
    got = [j["id"] for j in rep["jobs"]]
    assert got == sorted(got) and all(x > after for x in got), got
    assert all(len(j["token_fp"]) == 16 and len(j["members"]) == 64
               for j in rep["jobs"])
    seen += got
    pages += 1
    if not rep["more"]:
        break
    after = got[-1]
print("list", len(seen), len(set(seen)) == maxj and sorted(seen) == sorted(ids),
      pages, biggest <= 65536)
# Telemetry: page after page, 30 times over, then one job.
t = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
t.connect("/var/run/dpdk/%s/dpdk_telemetry.v2" % prefix)
hello = json.loads(t.recv(4096))
def tel(cmd):
    t.send(cmd.encode())
    return json.loads(t.recv(hello["max_output_len"]))
def walk():
    after, n = 0, []
    while True:
        rep = tel("/tally/jobs,%d" % after)["/tally/jobs"]
        n += [int(k) for k in rep if k not in ("more", "next")]
        if not rep["more"]:
            return n
        after = rep["next"]
first = walk()
print("tel", len(first), sorted(first) == sorted(ids))
PY
cat "$WORK/pages" | sed 's/^/# /'
grep -q "^over 28$" "$WORK/pages"
ok $? "at max_jobs ($MAXJ) one more job is refused (ENOSPC)"
grep -q "^list $MAXJ True [0-9]* True$" "$WORK/pages"
ok $? "job_list pages through $MAXJ jobs of world 64, each reply one message"
grep -q "^tel $MAXJ True$" "$WORK/pages"
ok $? "telemetry /tally/jobs pages through all $MAXJ jobs"

# Telemetry's memory stays put over 30 first pages and 3 walks through
# all (a listing of all at once leaked a job's part past 256).
rss0=$(awk '/VmRSS/ {print $2}' "/proc/$DP_PID/status")
/usr/bin/python3 - "tally-e2e-$$" >"$WORK/tel" 2>&1 <<'PY'
import json, socket, sys
t = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
t.connect("/var/run/dpdk/%s/dpdk_telemetry.v2" % sys.argv[1])
hello = json.loads(t.recv(4096))
def tel(cmd):
    t.send(cmd.encode())
    return json.loads(t.recv(hello["max_output_len"]))
for _ in range(30):
    tel("/tally/jobs")
for _ in range(3):
    after = 0
    while True:
        rep = tel("/tally/jobs,%d" % after)["/tally/jobs"]
        if not rep["more"]:
            break
        after = rep["next"]
one = tel("/tally/job,%d" % 1)["/tally/job"]
print("job", one["world"], one["window"], one["max_elems"], one["mem_bytes"])
PY
rss1=$(awk '/VmRSS/ {print $2}' "/proc/$DP_PID/status")
echo "# telemetry: RSS $rss0 -> $rss1 kB; $(cat "$WORK/tel")"
[ $((rss1 - rss0)) -lt 4096 ]
ok $? "30 telemetry listings of $MAXJ jobs: RSS grows < 4 MiB ($((rss1 - rss0)) kB)"
grep -q "^job 64 64 256 [0-9]*$" "$WORK/tel"
ok $? "/tally/job,ID shows one job"

# --- a client that never reads --------------------------------------------
/usr/bin/python3 - "$DP_SOCK" >"$WORK/slow" 2>&1 <<'PY'
import json, socket, sys, time
path = sys.argv[1]
slow = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
slow.connect(path)
slow.setblocking(False)
fast = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
fast.connect(path)
fast.settimeout(1.0)
worst, sent, cut = 0.0, 0, False
t_end = time.time() + 60
while not cut and time.time() < t_end:
    try:
        slow.send(b'{"cmd":"job_list","limit":20}')
        sent += 1
        if sent % 20:
            continue
    except BlockingIOError:
        time.sleep(0.01)
    except OSError:
        cut = True  # tally-dp hung up on it
    # Whatever the slow one does, this one is served at once.
    t0 = time.time()
    fast.send(b'{"cmd":"ping"}')
    assert json.loads(fast.recv(1 << 16))["errno"] == 0
    worst = max(worst, time.time() - t0)
fast.send(b'{"cmd":"stats"}')
admin = json.loads(fast.recv(1 << 16))["admin"]
print("slow", sent, cut, admin["slow"], "%.3f" % worst)
PY
cat "$WORK/slow" | sed 's/^/# /'
grep -q "^slow [0-9]* True 1 0\.[0-4]" "$WORK/slow"
ok $? "a client that never reads is cut off (admin.slow 1); pings answered < 0.5 s"

# --- a killed tally-dp's socket is stale: taken over ------------------------
kill -KILL "$DP_PID"
wait "$DP_PID" 2>/dev/null
DP_PID=
rm -rf "/var/run/dpdk/tally-e2e-$$"
[ -S "$DP_SOCK" ]
ok $? "SIGKILL leaves the socket file behind"
dp_start
ok $? "a new tally-dp takes over the stale socket"
finish

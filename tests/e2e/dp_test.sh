#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# tally-dp itself: answers ARP and ping on the testbed; refuses bad EAL
# and bad own arguments with a message and a non-zero exit; its admin
# socket answers bad JSON, unknown commands and bad jobs with errors and
# keeps serving; telemetry shows its counters; SIGTERM stops it cleanly.
TESTBED_OPTS="-n 1"
. "$(dirname "$0")/preamble.sh"

out=$("$DP_BIN" --no-such-eal-flag 2>&1)
rc=$?
[ $rc -ne 0 ] && [ -n "$out" ]
ok $? "bad EAL arguments: exit $rc with a message"
out=$("$DP_BIN" -l 0,1 --no-huge --no-shconf --no-pci --file-prefix "x$$" \
	--vdev "net_null0" -- --udp-port 99999 2>&1)
rc=$?
[ $rc -eq 2 ] && echo "$out" | grep -q usage
ok $? "bad tally-dp arguments: exit 2 with usage"
out=$("$DP_BIN" -l 0,1 --no-huge --no-shconf --no-pci --file-prefix "y$$" \
	-- --addr 10.77.0.1 2>&1)
rc=$?
[ $rc -ne 0 ] && echo "$out" | grep -q "no DPDK port"
ok $? "no port: exit $rc, says so"
out=$("$DP_BIN" -l 0 --no-huge --no-shconf --no-pci --file-prefix "z$$" \
	--vdev net_null0 -- --addr 10.77.0.1 2>&1)
rc=$?
[ $rc -ne 0 ] && echo "$out" | grep -q "worker lcore"
ok $? "no worker lcore: exit $rc, says so"

dp_start
ok $? "tally-dp starts"
ip netns exec "$TESTBED_NS_1" ping -c 3 -i 0.2 -W 2 "$TESTBED_DP_IP" \
	>"$WORK/ping" 2>&1
ok $? "a worker pings tally-dp (ARP and ICMP echo answered)"
[ "$(dp_counter icmp_replies)" -ge 3 ] && [ "$(dp_counter arp_replies)" -ge 1 ]
ok $? "ARP and ICMP replies counted"

# expect_errno JSON ERRNO NAME: the admin reply carries that errno.
expect_errno() {
	local got
	got=$(dp_admin "$1" | /usr/bin/python3 -c \
		'import json,sys; print(json.load(sys.stdin)["errno"])')
	[ "$got" = "$2" ]
	ok $? "admin: $3 -> errno $2 (got $got)"
}
expect_errno '{"cmd":' 22 "truncated JSON"
expect_errno '[1,2]' 22 "not an object"
expect_errno '{"cmd":"frobnicate"}' 95 "unknown command"
expect_errno '{"cmd":"job_add","id":1,"token":"xyz","world":1,"members":[{"ip":"10.77.0.11","port":1}]}' 22 "bad token"
expect_errno '{"cmd":"job_add","id":1,"token":"0123456789abcdef","world":2,"members":[{"ip":"10.77.0.11","port":1}]}' 22 "members != world"
expect_errno '{"cmd":"job_add","id":1,"token":"0123456789abcdef","world":1,"members":[{"ip":"10.77.0.11","port":1}],"wrold":3}' 22 "unknown key"
expect_errno '{"cmd":"job_add","id":70000,"token":"0123456789abcdef","world":1,"members":[{"ip":"10.77.0.11","port":1}]}' 22 "id out of range"
expect_errno '{"cmd":"job_add","id":1,"token":"0123456789abcdef","world":1,"members":[{"ip":"10.77.0.11","port":1}]}' 0 "good job"
expect_errno '{"cmd":"job_add","id":1,"token":"0123456789abcdef","world":1,"members":[{"ip":"10.77.0.11","port":1}]}' 17 "same job again"
expect_errno '{"cmd":"job_del","id":9}' 2 "delete unknown job"
n=$(dp_admin '{"cmd":"job_list"}' | /usr/bin/python3 -c \
	'import json,sys; j=json.load(sys.stdin)["jobs"]; print(len(j), "token" in j[0])')
[ "$n" = "1 False" ]
ok $? "job_list shows the job, never its token ($n)"
expect_errno '{"cmd":"job_del","id":1}' 0 "delete the job"
expect_errno '{"cmd":"ping"}' 0 "still serving after bad requests"

tel=$(/usr/bin/python3 - "tally-e2e-$$" <<'PY'
import json, socket, sys
# The telemetry socket in this tally-dp's runtime directory.
for path in ["/var/run/dpdk/%s/dpdk_telemetry.v2" % sys.argv[1]]:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        s.connect(path)
        json.loads(s.recv(4096))
        s.send(b"/tally/stats")
        rep = json.loads(s.recv(1 << 16))
        print(rep["/tally/stats"]["icmp_replies"])
        break
    except (OSError, KeyError, TypeError, ValueError):
        pass
PY
)
[ -n "$tel" ] && [ "$tel" -ge 3 ]
ok $? "telemetry /tally/stats shows the counters (icmp_replies=$tel)"
dp_stop
ok $? "SIGTERM: tally-dp exits 0"
[ ! -e "$DP_SOCK" ]
ok $? "admin socket removed on exit"
finish

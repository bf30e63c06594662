#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# Two jobs at once on one tally-dp (workers 0,1 in job 1; 2,3 in job 2)
# stay exact and isolated; a worker using job 1's token on job 2, and a
# member of job 1 posing as a member of job 2, are dropped and counted.
# Each job's own counters (admin job_list, telemetry /tally/jobs) agree
# with what its workers sent and received.
TESTBED_OPTS="-n 4"
. "$(dirname "$0")/preamble.sh"
T1=1111111111111111
T2=2222222222222222

# job_ctr ID NAME: counter NAME of job ID from the admin job_list.
job_ctr() {
	dp_admin '{"cmd":"job_list"}' | /usr/bin/python3 -c "
import json, sys
for j in json.load(sys.stdin)['jobs']:
    if j['id'] == $1:
        print(j['counters']['$2'])"
}

# wstat FILE NAME: a worker's own stats counter (its \"stats:\" line).
wstat() {
	sed -n "s/^stats: .*\b$2 \([0-9]*\).*$/\1/p" "$1" | tail -1
}

dp_start
ok $? "tally-dp starts"
ip=$(dp_admin '{"cmd":"ping"}' | /usr/bin/python3 -c \
	'import json,sys; print(json.load(sys.stdin)["ip"])')
[ "$ip" = "$TESTBED_DP_IP" ]
ok $? "ping names tally-dp's address ($ip)"
job_add 1 "$T1" 0 1 >/dev/null && job_add 2 "$T2" 2 3 >/dev/null
ok $? "two jobs added"
worker 0 1 "$T1" 0 2 "$WORK/a0" --type f32 --size 16M --seed 1
p0=$WPID
worker 1 1 "$T1" 1 2 "$WORK/a1" --type f32 --size 16M --seed 1
p1=$WPID
worker 2 2 "$T2" 0 2 "$WORK/b0" --type f32 --size 16M --seed 2
p2=$WPID
worker 3 2 "$T2" 1 2 "$WORK/b1" --type f32 --size 16M --seed 2
p3=$WPID
rc=0
for p in $p0 $p1 $p2 $p3; do
	wait "$p" || rc=1
done
ok $rc "both jobs' results equal their references"
[ $rc -eq 0 ] || sed 's/^/#   /' "$WORK"/a? "$WORK"/b?
[ -n "$(digest "$WORK/a0")" ] && [ "$(digest "$WORK/a0")" = "$(digest "$WORK/a1")" ] &&
	[ "$(digest "$WORK/b0")" = "$(digest "$WORK/b1")" ] &&
	[ "$(digest "$WORK/a0")" != "$(digest "$WORK/b0")" ]
ok $? "each job's members agree, and the jobs differ"

# Per-job counters after both allreduces. Every round takes exactly one
# contribution a member however many were lost, so contributions =
# rounds x world; each round's result went once to each member, and
# each retransmission answered from a stored result once more.
for id in 1 2; do
	if [ $id -eq 1 ]; then w0=$WORK/a0 w1=$WORK/a1; else w0=$WORK/b0 w1=$WORK/b1; fi
	eval "$(dp_admin '{"cmd":"job_list"}' | /usr/bin/python3 -c "
import json, sys
for j in json.load(sys.stdin)['jobs']:
    if j['id'] == $id:
        for k, v in j['counters'].items():
            print('c_%s=%d' % (k, v))")"
	echo "# job $id: contributions $c_contributions elements $c_elements" \
		"bytes_in $c_bytes_in rounds $c_rounds results $c_results" \
		"bytes_out $c_bytes_out resent $c_resent nacks $c_nacks drops $c_drops"
	sent=$(( $(wstat "$w0" packets_sent) + $(wstat "$w1" packets_sent) -
		$(wstat "$w0" retransmits) - $(wstat "$w1" retransmits) ))
	got=$(( $(wstat "$w0" results) + $(wstat "$w1" results) ))
	echo "# job $id workers: first sends $sent, results received $got"
	[ "$c_rounds" -gt 0 ] && [ "$c_elements" -gt 0 ] &&
		[ "$c_contributions" -eq $((c_rounds * 2)) ] &&
		[ "$c_results" -eq $((c_rounds * 2 + c_resent)) ] &&
		[ "$c_bytes_in" -gt $((c_contributions * 32)) ] &&
		[ "$c_bytes_out" -gt $((c_results * 32)) ] &&
		[ "$c_drops" -eq 0 ]
	ok $? "job $id counters: contributions = rounds x world, results = contributions + resent"
	[ "$c_contributions" -eq "$sent" ] && [ "$c_results" -ge "$got" ]
	ok $? "job $id counters agree with its workers' own"
done

tel=$(/usr/bin/python3 - "tally-e2e-$$" <<'PY'
import json, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
try:
    s.connect("/var/run/dpdk/%s/dpdk_telemetry.v2" % sys.argv[1])
    json.loads(s.recv(4096))
    s.send(b"/tally/jobs")
    rep = json.loads(s.recv(1 << 16))["/tally/jobs"]
    print(rep["1"]["contributions"], rep["2"]["rounds"])
except (OSError, KeyError, TypeError, ValueError) as e:
    print("error", e)
PY
)
echo "# telemetry /tally/jobs: job 1 contributions, job 2 rounds: $tel"
[ "$tel" = "$(job_ctr 1 contributions) $(job_ctr 2 rounds)" ]
ok $? "telemetry /tally/jobs shows the same counters"

# Job 1's token on job 2: refused silently, the worker times out.
before=$(dp_counter drop_bad_token)
jbefore=$(job_ctr 2 drops)
worker 2 2 "$T1" 0 2 "$WORK/bad" --type i32 --size 64K --iters 1 \
	--timeout-ms 500 --no-barrier
wait "$WPID"
rc=$?
after=$(dp_counter drop_bad_token)
jafter=$(job_ctr 2 drops)
echo "# wrong-token worker exit $rc, drop_bad_token $before -> $after," \
	"job 2 drops $jbefore -> $jafter"
[ "$rc" -ne 0 ] && [ "$after" -gt "$before" ]
ok $? "a wrong token is dropped and counted; the worker gets an error"
[ $((jafter - jbefore)) -eq $((after - before)) ]
ok $? "job 2 counts the wrong-token packets in its drops"

# Worker 0 (job 1's member) claims rank 0 of job 2 with the right token.
before=$(dp_counter drop_bad_source)
jbefore=$(job_ctr 2 drops)
c1=$(job_ctr 1 contributions)
worker 0 2 "$T2" 0 2 "$WORK/spoof" --type i32 --size 64K --iters 1 \
	--timeout-ms 500 --no-barrier
wait "$WPID"
rc=$?
after=$(dp_counter drop_bad_source)
jafter=$(job_ctr 2 drops)
echo "# impostor exit $rc, drop_bad_source $before -> $after," \
	"job 2 drops $jbefore -> $jafter"
[ "$rc" -ne 0 ] && [ "$after" -gt "$before" ]
ok $? "a packet from a non-member address is dropped and counted"
[ $((jafter - jbefore)) -eq $((after - before)) ] &&
	[ "$(job_ctr 1 contributions)" -eq "$c1" ]
ok $? "job 2 counts the impostor's packets; job 1's counters stay still"
finish

#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# The rendezvous against a hostile network (docs/operations.md, "Threat
# model"):
# - floods of 1,100 idle connections, from one source and from twenty,
#   with tallyd at its usual open-file limit, started under a low one, and
#   with its limit lowered under it (accept() then fails with EMFILE):
#   each time tallyd's CPU stays low, tallyctl answers at once, a job
#   created during the flood shows its token, and real workers join it and
#   allreduce; idle connections go at rendezvous_handshake_ms; refusals
#   and evictions are counted;
# - TLS: a sniffer on the bridge sees no token while four workers join; a
#   worker that does not trust tallyd's certificate, or reached it under a
#   name the certificate does not carry, is refused, and so is one that
#   speaks without TLS;
# - a process with the job's token claims other hosts' data addresses
#   (made-up members for all four ranks, or a real worker's address): each
#   claim is refused and counted, and the real workers join after it; the
#   operator's data address map allows exactly what it lists;
# - an unknown job and a wrong token get byte-identical replies;
# - while workers run, no process's command line holds the job token.
TESTBED_OPTS="-n 5 --host"
. "$(dirname "$0")/preamble.sh"
FLOOD=$TALLY_SRC/tests/e2e/flood.py
RDVC=$TALLY_SRC/tests/e2e/rdvclient.py
SNIFF=$TALLY_SRC/tests/e2e/sniff.py
NS5=$TESTBED_NS_5
IP5=$TESTBED_IP_5
HS_MS=1500		# rendezvous_handshake_ms here
TALLYD_OPTS="--set join_timeout_s=20 --set rendezvous_max_conns=1024
	--set rendezvous_handshake_ms=$HS_MS"

# cpu_pct PID SECS: CPU time PID used over SECS seconds, in % of one core
# (utime + stime of /proc/PID/stat).
cpu_pct() {
	local t0 t1 hz
	hz=$(getconf CLK_TCK)
	t0=$(awk '{print $14 + $15}' "/proc/$1/stat")
	sleep "$2"
	t1=$(awk '{print $14 + $15}' "/proc/$1/stat")
	echo $(( (t1 - t0) * 100 / (hz * $2) ))
}

# timed CMD...: runs CMD; its wall time in ms lands in T_MS.
timed() {
	local t0 rc
	t0=$(date +%s%N)
	"$@"
	rc=$?
	T_MS=$(( ($(date +%s%N) - t0) / 1000000 ))
	return $rc
}

# tstat KEY: one of tallyd's counters (stats "tallyd").
tstat() {
	tctl --json stats | jq_py "j['tallyd']['$1']"
}

# jf KEY: one of tallyd's join failure counters.
jf() {
	tctl --json stats | jq_py "j['tallyd']['join_failures']['$1']"
}

# join_all JOB TOKEN NAME [tally-bench options]: workers 0-3 join JOB and
# allreduce; returns 0 when every one's result equals the reference.
join_all() {
	local job=$1 token=$2 name=$3 pids="" r p rc=0
	shift 3
	for r in 0 1 2 3; do
		worker_url "$r" "$job" "$token" "$r" 4 "$WORK/$name.$r" \
			--type i32 --size 1M --iters 1 "$@"
		pids="$pids $WPID"
	done
	for p in $pids; do
		wait "$p" || rc=1
	done
	[ $rc -eq 0 ] || sed 's/^/#   /' "$WORK/$name".*
	return $rc
}

# rdvc JOB TOKEN ARGS...: the rendezvous client from worker 5's host.
rdvc() {
	local job=$1 token=$2
	shift 2
	TALLY_TOKEN=$token ip netns exec "$NS5" "$RDVC" "$TESTBED_HOST_IP" \
		"$TALLYD_RDV_PORT" "$job" --ca "$TALLY_CA" "$@"
}

# flood NAME SRCS N: under a flood of N idle connections from worker 5's
# host (source addresses SRCS), tallyd's CPU stays low, tallyctl answers
# at once, a job created now shows its token, and workers 0-3 join that
# job and allreduce. Five TAP lines; the flood's summary in
# $WORK/NAME.flood.
flood() {
	local name=$1 srcs=$2 n=$3 fpid cpu tok rc
	ip netns exec "$NS5" "$FLOOD" "$TESTBED_HOST_IP" "$TALLYD_RDV_PORT" \
		--src "$srcs" -n "$n" --secs 16 --reconnect-ms 1000 \
		>"$WORK/$name.flood" 2>&1 &
	fpid=$!
	sleep 3
	echo "# $name: tallyd holds $(tstat rdv_connections) of $(tstat rdv_max_connections) connections"
	cpu=$(cpu_pct "$TALLYD_PID" 3)
	[ "$cpu" -lt 25 ]
	ok $? "$name: tallyd uses $cpu% of a core under the flood (< 25%)"
	timed tctl ping >/dev/null
	rc=$?
	[ $rc -eq 0 ] && [ "$T_MS" -lt 1000 ]
	ok $? "$name: tallyctl ping answers in $T_MS ms (< 1000)"
	timed tctl --json job create "$name" --world 4 >"$WORK/$name.create"
	rc=$?
	tok=$(jq_py 'j["token"]' <"$WORK/$name.create" 2>/dev/null)
	[ $rc -eq 0 ] && [ "${#tok}" -eq 64 ] && [ "$T_MS" -lt 2000 ]
	ok $? "$name: a job created under the flood shows its token ($T_MS ms)"
	timed join_all "$name" "$tok" "$name.w"
	ok $? "$name: four workers join that job and allreduce under the flood ($T_MS ms)"
	wait "$fpid"
	echo "# $name: flood $(cat "$WORK/$name.flood")"
	[ "$(jq_py 'j["attempts"] >= '"$n"' and j["open_peak"] > 0' <"$WORK/$name.flood")" = True ]
	ok $? "$name: the flood ran ($n connections and more attempted)"
	tctl job delete "$name" >/dev/null
}

dp_start
ok $? "tally-dp starts"
# shellcheck disable=SC2086
tallyd_start $TALLYD_OPTS
ok $? "tallyd starts, its rendezvous in TLS"
TOKEN=$(tctl --json job create train --world 4 | jq_py 'j["token"]')
[ "${#TOKEN}" -eq 64 ]
ok $? "job train created"

# --- item 12: the token never in a command line --------------------------
pids=""
for r in 0 1 2 3; do
	worker_url "$r" train "$TOKEN" "$r" 4 "$WORK/argv.$r" --type f32 \
		--size 16M --iters 3
	pids="$pids $WPID"
done
seen=0
leaks=0
for _ in $(seq 20); do
	for f in /proc/[0-9]*/cmdline; do
		c=$(tr '\0' ' ' <"$f" 2>/dev/null) || continue
		case $c in
		*"$TOKEN"*) leaks=$((leaks + 1)); echo "# leak: $f: $c" ;;
		*tally-bench*--token-file*) seen=$((seen + 1)) ;;
		esac
	done
	sleep 0.1
done
rc=0
for p in $pids; do
	wait "$p" || rc=1
done
ok $rc "workers joined with the token in a file, and allreduced"
[ "$seen" -gt 0 ] && [ "$leaks" -eq 0 ]
ok $? "while they ran, no /proc/PID/cmdline held the token ($seen worker command lines seen)"

# --- TLS: what a sniffer sees ---------------------------------------------
"$SNIFF" "$TESTBED_BRIDGE" "$WORK/sniff.raw" --secs 10 --port "$TALLYD_RDV_PORT" \
	>"$WORK/sniff.json" 2>"$WORK/sniff.err" &
spid=$!
for _ in $(seq 50); do
	grep -q ready "$WORK/sniff.err" && break
	sleep 0.1
done
join_all train "$TOKEN" sniffed
ok $? "four workers join over TLS while a sniffer listens on the bridge"
wait "$spid"
frames=$(jq_py 'j["port_frames"]' <"$WORK/sniff.json")
/usr/bin/python3 - "$WORK/sniff.raw" "$TOKEN" >"$WORK/sniff.find" <<'EOF'
import sys
cap = open(sys.argv[1], "rb").read()
tok = sys.argv[2]
needles = [tok.encode(), tok.upper().encode(), bytes.fromhex(tok)]
print(sum(cap.count(n) for n in needles), cap.count(b"\x16\x03"))
EOF
read -r found tls <"$WORK/sniff.find"
echo "# sniffer: $frames rendezvous frames, $(stat -c %s "$WORK/sniff.raw") bytes, token found $found times, TLS records $tls"
[ "$frames" -ge 40 ] && [ "$found" -eq 0 ] && [ "$tls" -gt 0 ]
ok $? "the capture holds the joins' TLS traffic and not the token"

# --- TLS: workers that must not talk to this tallyd -----------------------
tls_ca "$WORK/other" && tls_cert "$WORK/other" tallyd "IP:$TESTBED_HOST_IP"
before=$(tstat rdv_tls_failures)
TALLY_CA=$WORK/other/ca.crt worker_url 4 train "$TOKEN" 0 4 \
	"$WORK/untrusted" --type i32 --size 4K --iters 1
wait "$WPID"
rc=$?
[ $rc -eq 3 ] && grep -q "certificate is not trusted" "$WORK/untrusted" &&
	grep -q "(Key was rejected by service)" "$WORK/untrusted" &&
	[ "$(tstat rdv_tls_failures)" -gt "$before" ]
ok $? "a worker that does not trust tallyd's CA is refused before it sends its token (exit $rc, counted)"
sed -n 's/^tally-bench allreduce: /# /p' "$WORK/untrusted"

TALLY_TLS=off worker_url 4 train "$TOKEN" 0 4 "$WORK/cleartext" \
	--type i32 --size 4K --iters 1
wait "$WPID"
rc=$?
[ $rc -eq 3 ] && grep -q "takes TLS only" "$WORK/cleartext" &&
	grep -q "(Protocol error)" "$WORK/cleartext"
ok $? "a worker without TLS is told the rendezvous takes TLS only (exit $rc)"

tls_cert "$TALLYD_TLS" wrongname "IP:10.77.0.253"
tallyd_stop
TALLYD_CERT=$TALLYD_TLS/wrongname
# shellcheck disable=SC2086
tallyd_start $TALLYD_OPTS
worker_url 4 train "$TOKEN" 0 4 "$WORK/wrongname" --type i32 --size 4K --iters 1
wait "$WPID"
rc=$?
[ $rc -eq 3 ] && grep -q "does not match" "$WORK/wrongname"
ok $? "a certificate for another address is refused (exit $rc)"
sed -n 's/^tally-bench allreduce: /# /p' "$WORK/wrongname"
tallyd_stop
unset TALLYD_CERT
# shellcheck disable=SC2086
tallyd_start $TALLYD_OPTS
ok $? "tallyd back with its own certificate"

# --- no job names for callers without a token -----------------------------
WRONG=$(printf '%064d' 7)
rdvc nope "$TOKEN" --rank 0 --world 4 >"$WORK/enum.unknown"
rdvc train "$WRONG" --rank 0 --world 4 >"$WORK/enum.badtok"
a=$(jq_py 'j["raw"]' <"$WORK/enum.unknown")
b=$(jq_py 'j["raw"]' <"$WORK/enum.badtok")
echo "# unknown job: $(jq_py 'j["replies"][0]' <"$WORK/enum.unknown")"
[ -n "$a" ] && [ "$a" = "$b" ] &&
	[ "$(jq_py 'j["replies"][0]["errno"]' <"$WORK/enum.unknown")" = 13 ]
ok $? "an unknown job and a wrong token get byte-identical replies (EACCES)"

# --- claimed data addresses ----------------------------------------------
before=$(jf address_mismatch)
rdvc train "$TOKEN" --rank 0,1,2,3 --world 4 --hold 2 \
	--member 10.77.0.201:40001,10.77.0.202:40001,10.77.0.203:40001,10.77.0.204:40001 \
	>"$WORK/madeup"
n=$(grep -c '"errno": 99' "$WORK/madeup")
sed -n '1s/^/# /p' "$WORK/madeup"
[ "$n" -eq 4 ] && [ "$(jf address_mismatch)" -eq $((before + 4)) ]
ok $? "one process claiming made-up members for all four ranks: each refused (EADDRNOTAVAIL), counted"
rdvc train "$TOKEN" --rank 0 --world 4 --hold 1 \
	--member "$TESTBED_IP_1:40001" >"$WORK/stolen"
grep -q '"errno": 99' "$WORK/stolen" && grep -q "claims the data address $TESTBED_IP_1" "$WORK/stolen"
ok $? "a member claiming a real worker's address from another host is refused"
join_all train "$TOKEN" after_claims
ok $? "the real workers join and allreduce after the claims"
rdvc train "$TOKEN" --rank 0 --world 4 --hold 1 --member "$IP5:40001" \
	>"$WORK/own"
[ "$(jq_py 'j["replies"][-1]' <"$WORK/own")" = "{'waiting': True}" ]
ok $? "a member claiming its own address waits at the barrier"

echo "$IP5 10.77.0.210 # worker 5's data address" >"$WORK/data.map"
tallyd_stop
# shellcheck disable=SC2086
tallyd_start $TALLYD_OPTS --set "rendezvous_data_map=$WORK/data.map"
ok $? "tallyd with a control-to-data address map"
rdvc train "$TOKEN" --rank 0 --world 4 --hold 1 --member 10.77.0.210:40001 \
	>"$WORK/mapped"
rdvc train "$TOKEN" --rank 0 --world 4 --hold 1 --member 10.77.0.211:40001 \
	>"$WORK/unmapped"
[ "$(jq_py 'j["replies"][-1]' <"$WORK/mapped")" = "{'waiting': True}" ] &&
	grep -q "does not map" "$WORK/unmapped"
ok $? "the map allows the data address it lists for a host, and no other"
tallyd_stop
# shellcheck disable=SC2086
tallyd_start $TALLYD_OPTS

# --- floods ---------------------------------------------------------------
# An idle connection goes at the handshake deadline.
ip netns exec "$NS5" /usr/bin/python3 - "$TESTBED_HOST_IP" "$TALLYD_RDV_PORT" \
	>"$WORK/idle" <<'EOF'
import socket, sys, time
s = socket.create_connection((sys.argv[1], int(sys.argv[2])))
t0 = time.monotonic()
s.settimeout(30)
while s.recv(100):
    pass
print(round((time.monotonic() - t0) * 1000))
EOF
life=$(cat "$WORK/idle")
[ "$life" -ge $((HS_MS - 100)) ] && [ "$life" -le $((HS_MS + 1200)) ]
ok $? "an idle connection is closed after $life ms (rendezvous_handshake_ms $HS_MS)"

ev0=$(tstat rdv_evicted_per_source)
flood one_source "$IP5" 1100
ev1=$(tstat rdv_evicted_per_source)
[ "$ev1" -gt "$ev0" ]
ok $? "one source: its oldest connections were evicted at its cap ($ev0 -> $ev1)"

srcs=""
for i in $(seq 100 119); do
	ip -n "$NS5" addr add "10.77.0.$i/24" dev eth0
	srcs="$srcs${srcs:+,}10.77.0.$i"
done
ef0=$(tstat rdv_evicted_full)
flood twenty_sources "$srcs" 1100
ef1=$(tstat rdv_evicted_full)
[ "$ef1" -gt "$ef0" ] && [ "$(tstat rdv_handshake_timeouts)" -gt 0 ]
ok $? "twenty sources: the oldest connections were evicted when all 1024 were in use ($ef0 -> $ef1)"

tallyd_stop
TALLYD_WRAP="prlimit --nofile=256:256"
# shellcheck disable=SC2086
tallyd_start $TALLYD_OPTS
unset TALLYD_WRAP
cap=$(tstat rdv_max_connections)
[ "$cap" -le 160 ] && grep -q "open-file limit is 256" "$WORK/tallyd.log"
ok $? "under prlimit --nofile=256 tallyd holds at most $cap connections and says why"
flood low_limit "$srcs" 1100

prlimit --pid "$TALLYD_PID" --nofile=100:100
fd0=$(( $(tstat rdv_evicted_fds) + $(tstat rdv_fd_backoffs) ))
flood emfile "$srcs" 1100
fd1=$(( $(tstat rdv_evicted_fds) + $(tstat rdv_fd_backoffs) ))
grep -q "Too many open files" "$WORK/tallyd.log" && [ "$fd1" -gt "$fd0" ]
ok $? "with its limit lowered to 100 under it, tallyd met EMFILE and freed descriptors instead of spinning ($fd0 -> $fd1)"
tctl --json stats | jq_py 'dict((k, v) for k, v in j["tallyd"].items() if k.startswith("rdv_"))' |
	sed 's/^/# /'
curl -sf "http://$TALLYD_METRICS/metrics" | grep -q '^tallyd_rdv_evicted_total{reason="fds"} [1-9]'
ok $? "the evictions show in the metrics by reason"

tallyd_stop
ok $? "tallyd stops cleanly"
finish

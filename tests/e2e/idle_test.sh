#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# tally-dp's idle back-off (dataplane/dp/idle.c): with one worker lcore
# on net_af_xdp or net_af_packet it waits on the port's socket, so an
# idle tally-dp wakes about ten times a second (each wait is at most
# 100 ms) and costs next to no CPU; before, it woke every --idle-us
# (about 10,000 times a second at 50 us) and took a share of a core.
# Traffic after a long idle spell is served as before, exactly, and
# --idle-wait sleep keeps the sleeping back-off.
TESTBED_OPTS="-n 2"
. "$(dirname "$0")/preamble.sh"
TOKEN=1d1e1d1e1d1e1d1e
IDLE_S=3

# idle_check PMD LABEL: tally-dp's wake-ups and CPU over IDLE_S idle
# seconds, printed; sets WAKES and CPU_PCT (of one core).
idle_check() {
	local s0 s1 c0 c1 hz
	hz=$(getconf CLK_TCK)
	sleep 1
	s0=$(dp_counter idle_sleeps)
	c0=$(awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$DP_PID/stat")
	sleep "$IDLE_S"
	s1=$(dp_counter idle_sleeps)
	c1=$(awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$DP_PID/stat")
	WAKES=$((s1 - s0))
	CPU_PCT=$(( (c1 - c0) * 100 / hz / IDLE_S ))
	echo "# $1, $2: $WAKES idle waits in $IDLE_S s, ${CPU_PCT}% of a core"
}

for pmd in net_af_xdp net_af_packet; do
	TALLY_PMD=$pmd dp_start
	ok $? "$pmd: tally-dp starts"
	grep -q "idle: wait on the port's socket" "$WORK/dp.log"
	ok $? "$pmd: tally-dp waits on the port's socket when idle"
	idle_check "$pmd" "socket"
	[ "$WAKES" -le $((IDLE_S * 10 + 10)) ]
	ok $? "$pmd: idle, it wakes at most about 10 times a second ($WAKES in $IDLE_S s)"
	[ "$CPU_PCT" -le 3 ]
	ok $? "$pmd: idle, it takes at most 3% of a core (${CPU_PCT}%)"
	job_add 1 "$TOKEN" 0 1 >/dev/null
	allreduce_all 1 "$TOKEN" 2 "idle-$pmd" --type f32 --size 1M --iters 3 \
		--seed 5
	# After another idle second, a new job (a job's slots go on from
	# the rounds its last workers left them at).
	sleep 1
	job_add 2 "$TOKEN" 0 1 >/dev/null
	allreduce_all 2 "$TOKEN" 2 "again-$pmd" --type f32 --size 64K --iters 2 \
		--seed 6
	dp_stop
	ok $? "$pmd: tally-dp stops cleanly"
done

TALLY_PMD=net_af_xdp dp_start --idle-wait sleep
ok $? "--idle-wait sleep: tally-dp starts"
grep -q "idle: sleep 50 us after empty polls (--idle-wait sleep)" "$WORK/dp.log"
ok $? "--idle-wait sleep: it says it sleeps"
idle_check net_af_xdp "sleep"
[ "$WAKES" -gt $((IDLE_S * 1000)) ]
ok $? "--idle-wait sleep: it wakes every sleep ($WAKES in $IDLE_S s)"
job_add 1 "$TOKEN" 0 1 >/dev/null
allreduce_all 1 "$TOKEN" 2 sleep --type f32 --size 1M --iters 2 --seed 7
dp_stop
ok $? "--idle-wait sleep: tally-dp stops cleanly"
"$DP_BIN" --no-huge --no-shconf -m 64 --no-pci --file-prefix "tally-e2e-$$-x" \
	--log-level 'pmd.*:error' -- --addr 10.0.0.1 --idle-wait nap \
	>"$WORK/bad.log" 2>&1
rc=$?
rm -rf "/var/run/dpdk/tally-e2e-$$-x"
[ "$rc" -eq 2 ] && grep -q "'nap' is not socket or sleep" "$WORK/bad.log"
ok $? "--idle-wait nap: refused with a clear message (exit $rc)"
finish

#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# Workers on libtally's AF_XDP transport (tally-bench allreduce
# --transport xdp): each one's XDP program on eth0 inside its namespace
# hands it the dataplane's datagrams to its port; it writes its own
# Ethernet/IPv4/UDP frames. As for kernel UDP (allreduce_test.sh,
# loss_test.sh, kill_test.sh): exact and bit-identical results, 1% loss
# each way (at the bridge ports: AF_XDP frames skip eth0's nftables
# hooks), a killed worker; plus the kernel's UDP counters of a worker's
# namespace untouched (its packets really went around the kernel), the
# program gone with a killed worker, and clear errors for a missing
# interface, a second context on an interface, packets over the MTU and
# an unprivileged caller.
TESTBED_OPTS="-n 4 --loss-up 1 --loss-down 1 --at-bridge"
. "$(dirname "$0")/preamble.sh"
TOKEN=0a0f0d0b0a0f0d0b

# udp_out NS: the kernel's UDP datagrams sent in namespace NS so far.
udp_out() {
	ip netns exec "$1" awk '$1 == "Udp:" && $2 ~ /^[0-9]/ { print $5 }' \
		/proc/net/snmp
}

# xdp_on NS: whether eth0 in NS has an XDP program attached.
xdp_on() {
	ip -n "$1" -d link show dev eth0 | grep -q 'prog/xdp'
}

dp_start
ok $? "tally-dp starts"
job_add 1 "$TOKEN" 0 1 2 3 >/dev/null
ok $? "job added"
before=$(udp_out "$TESTBED_NS_1")
allreduce_all 1 "$TOKEN" 4 xdp-f32 --type f32 --size 64M --iters 2 \
	--seed 11 --timeout-ms 10000 --transport xdp
grep -h -E '^(transport|best|stats):' "$WORK/xdp-f32.0" | sed 's/^/# /'
grep -q '^transport: xdp' "$WORK/xdp-f32.0"
ok $? "the workers ran on the xdp transport"
sent=$(($(udp_out "$TESTBED_NS_1") - before))
echo "# kernel UDP datagrams sent in worker 1's namespace: $sent"
[ "$sent" -lt 100 ]
ok $? "the tally packets went around the kernel's UDP"
served=$(dp_counter retransmissions_served)
echo "# retransmissions served $served (1% lost each way at the bridge)"
[ "$served" -gt 0 ]
ok $? "lost results were served again from the stored sums"
for ns in $TESTBED_NS_1 $TESTBED_NS_2; do
	! xdp_on "$ns" || echo "# $ns still has an XDP program"
done
! xdp_on "$TESTBED_NS_1"
ok $? "the XDP program went with the context"

dp_admin '{"cmd":"job_del","id":1}' >/dev/null
job_add 1 "$TOKEN" 0 1 2 3 >/dev/null
allreduce_all 1 "$TOKEN" 4 xdp-i32 --type i32 --size 4M --iters 2 \
	--seed 7 --timeout-ms 10000 --transport xdp

# A killed worker: the others return an error after their timeout.
dp_admin '{"cmd":"job_del","id":1}' >/dev/null
job_add 1 "$TOKEN" 0 1 2 3 >/dev/null
pids=""
for r in 0 1 2 3; do
	worker "$r" 1 "$TOKEN" "$r" 4 "$WORK/k.$r" --type f32 --size 8M \
		--iters 400 --seed 3 --timeout-ms 2000 --transport xdp
	pids="$pids $WPID"
	[ "$r" -eq 3 ] && victim=$WPID
done
start=$(dp_counter completed)
for _ in $(seq 600); do
	[ "$(dp_counter completed)" -gt $((start + 100000)) ] && break
	sleep 0.1
done
alive=0
for p in $pids; do
	kill -0 "$p" 2>/dev/null || alive=1
done
ok $alive "all four xdp workers are mid-allreduce when rank 3 is killed"
xdp_on "$TESTBED_NS_4"
ok $? "rank 3's eth0 runs its XDP program"
kill -KILL "$victim"
killed=$(date +%s%N)
rc=0
for p in $pids; do
	[ "$p" = "$victim" ] && continue
	wait "$p"
	[ $? -eq 3 ] || rc=1
done
elapsed=$((($(date +%s%N) - killed) / 1000000))
echo "# survivors returned ${elapsed} ms after the kill"
ok $rc "the surviving xdp workers return an allreduce error"
[ "$elapsed" -lt 5000 ]
ok $? "after about the timeout (2000 ms), not a hang"
wait "$victim" 2>/dev/null
sleep 0.2
! xdp_on "$TESTBED_NS_4"
ok $? "the killed worker left no XDP program behind"

# Bad input: a clear sentence each, no crash (exit 3: the open failed).
# expect_err NAME PATTERN [worker options]: worker 0 fails with PATTERN.
expect_err() {
	local name=$1 pat=$2 rc
	shift 2
	worker 0 1 "$TOKEN" 0 4 "$WORK/e.$name" --type i32 --size 4K \
		--iters 1 --timeout-ms 500 "$@"
	wait "$WPID"
	rc=$?
	grep -m1 'tally-bench' "$WORK/e.$name" | sed 's/^/# /'
	grep -q -E "$pat" "$WORK/e.$name"
	ok $? "$name: refused, saying so (exit $rc)"
	[ "$rc" -eq 0 ] || [ "$rc" -ge 128 ] &&
		sed 's/^/#   /' "$WORK/e.$name"
}
expect_err no-such-interface "interface 'nosuch0' does not exist" \
	--transport xdp --ifname nosuch0
expect_err wrong-interface "goes out of eth0, not of lo" \
	--transport xdp --ifname lo
expect_err ifname-without-xdp "ifname and queue are options of the xdp" \
	--ifname eth0
expect_err bad-transport "transport 'dpdk': udp, xdp, rdma or ring" \
	--transport dpdk
expect_err over-mtu "over the MTU 1500 of eth0" --transport xdp \
	--elems 900
expect_err no-such-queue "queue 7" --transport xdp --queue 7
if command -v setpriv >/dev/null; then
	TALLY_TOKEN=$TOKEN ip netns exec "$TESTBED_NS_1" setpriv \
		--reuid=65534 --regid=65534 --clear-groups --inh-caps=-all \
		"$BENCH" allreduce --dp "$TESTBED_DP_IP" --job 1 --rank 0 \
		--world 4 --size 4K --transport xdp >"$WORK/e.unpriv" 2>&1
	rc=$?
	grep -m1 'tally-bench' "$WORK/e.unpriv" | sed 's/^/# /'
	grep -q -E "CAP_|root" "$WORK/e.unpriv"
	ok $? "unprivileged: refused, naming the privileges (exit $rc)"
	[ "$rc" -ne 0 ] && [ "$rc" -lt 128 ] || sed 's/^/#   /' "$WORK/e.unpriv"
fi
# A second context on an interface that already has one.
worker 1 1 "$TOKEN" 1 4 "$WORK/busy.1" --type f32 --size 8M --iters 100 \
	--timeout-ms 3000 --transport xdp
holder=$WPID
for _ in $(seq 50); do
	xdp_on "$TESTBED_NS_2" && break
	sleep 0.1
done
TALLY_TOKEN=$TOKEN ip netns exec "$TESTBED_NS_2" "$BENCH" allreduce \
	--dp "$TESTBED_DP_IP" --job 1 --rank 1 --world 4 --size 4K \
	--transport xdp >"$WORK/e.busy" 2>&1
rc=$?
grep -m1 'tally-bench' "$WORK/e.busy" | sed 's/^/# /'
grep -q "already there" "$WORK/e.busy"
ok $? "a second context on eth0: refused, saying why (exit $rc)"
kill "$holder" 2>/dev/null
wait "$holder" 2>/dev/null
dp_stop
ok $? "tally-dp stops cleanly"
finish

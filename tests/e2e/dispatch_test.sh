#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# Two worker lcores (lcore 2 shares CPU 1): each owns one UDP port and the
# slots of its parity. af_packet has no rte_flow, so frames reach their
# owner by software dispatch over rte_ring. Workers that spread slots over
# both ports get exact results; one that sends every slot to the first
# port is refused (misrouted) and told nothing.
TESTBED_OPTS="-n 2"
. "$(dirname "$0")/preamble.sh"
TOKEN=0d15ba7c40d15ba7

DP_LCORES="--lcores 0@0,1@1,2@1" DP_VDEV_ARGS=",qpairs=2" dp_start
ok $? "tally-dp starts with two worker lcores"
steer=$(dp_admin '{"cmd":"ping"}')
echo "# $steer"
echo "$steer" | grep -q '"steering": "software"' &&
	echo "$steer" | grep -q '"workers": 2'
ok $? "two workers, software dispatch"
job_add 1 "$TOKEN" 0 1 >/dev/null
ok $? "job added"
worker 0 1 "$TOKEN" 0 2 "$WORK/w.0" --dp "$TESTBED_DP_IP:47474/2" \
	--type f32 --size 16M --iters 2 --seed 5
p0=$WPID
worker 1 1 "$TOKEN" 1 2 "$WORK/w.1" --dp "$TESTBED_DP_IP:47474/2" \
	--type f32 --size 16M --iters 2 --seed 5
p1=$WPID
rc=0
wait "$p0" || rc=1
wait "$p1" || rc=1
ok $rc "both workers' results equal the reference"
[ $rc -eq 0 ] || sed 's/^/#   /' "$WORK"/w.*
[ -n "$(digest "$WORK/w.0")" ] && [ "$(digest "$WORK/w.0")" = "$(digest "$WORK/w.1")" ]
ok $? "results bit-identical"
d=$(dp_counter dispatched)
echo "# dispatched $d, ring_full $(dp_counter ring_full)"
[ "$d" -gt 0 ] && [ "$(dp_counter misrouted)" -eq 0 ]
ok $? "frames reached their owner lcore through the rings"

# All slots to the first port: odd slots belong to the other lcore.
# It runs alone (no barrier to wait at): its packets are what is tested.
worker 0 1 "$TOKEN" 0 2 "$WORK/bad" --dp "$TESTBED_DP_IP:47474/1" \
	--type i32 --size 64K --iters 1 --timeout-ms 500 --no-barrier
wait "$WPID"
rc=$?
m=$(dp_counter misrouted)
echo "# misrouted worker exit $rc, misrouted $m"
[ "$rc" -ne 0 ] && [ "$m" -gt 0 ]
ok $? "a slot sent to another lcore's port is refused and counted"
finish

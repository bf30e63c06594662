#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# Issue 11, item 13: a replayed old packet must not corrupt a later sum.
# Two workers sum i32 tensors that change every call (--vary); rank 0's
# packets of its first calls are recorded in its namespace and sent
# again, from its own MAC, address and port, over and over while the
# calls go on. Every sum stays exact and identical, and tally-dp counts
# the copies as stale (version 1 had no round number: such a copy was
# taken for a contribution to a later call, and the real one thrown away).
TESTBED_OPTS="-n 2"
. "$(dirname "$0")/preamble.sh"
TOKEN=4e91a7c0ffee0013
REPLAY=$TALLY_SRC/tests/e2e/replay.py
ARGS=(--type i32 --size 64K --iters 80 --pause-ms 40 --vary --seed 7
	--timeout-ms 10000)

dp_start
ok $? "tally-dp starts"
job_add 1 "$TOKEN" 0 1 >/dev/null
ok $? "job added"
# One datagram a packet (no UDP_SEGMENT), so frames are recorded one by one.
export TALLY_UDP_OFFLOAD=0
ip netns exec "$TESTBED_NS_1" "$REPLAY" capture eth0 "$TESTBED_DP_IP" \
	"$WORK/old" --count 48 --timeout 20 >"$WORK/capture" 2>&1 &
cap=$!
sleep 0.5
worker 0 1 "$TOKEN" 0 2 "$WORK/r.0" "${ARGS[@]}"
w0=$WPID
worker 1 1 "$TOKEN" 1 2 "$WORK/r.1" "${ARGS[@]}"
w1=$WPID
wait "$cap"
ok $? "rank 0's first packets recorded ($(cat "$WORK/capture"))"
sleep 0.3
ip netns exec "$TESTBED_NS_1" "$REPLAY" send eth0 "$WORK/old" --every 0.02 \
	--for 1.5 >"$WORK/send" 2>&1
ok $? "sent again from rank 0's address ($(cat "$WORK/send"))"
kill -0 "$w0" 2>/dev/null && kill -0 "$w1" 2>/dev/null
ok $? "the calls went on during the replay"
rc=0
wait "$w0" || rc=1
wait "$w1" || rc=1
ok $rc "every call's sum exact on both ranks"
[ $rc -eq 0 ] || sed 's/^/#   /' "$WORK"/r.*
d0=$(digest "$WORK/r.0")
[ -n "$d0" ] && [ "$d0" = "$(digest "$WORK/r.1")" ]
ok $? "results bit-identical ($d0)"
stale=$(dp_counter drop_stale)
echo "# drop_stale $stale"
[ "${stale:-0}" -gt 0 ]
ok $? "the copies were dropped as stale"
finish

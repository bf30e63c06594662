#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# Reduce-scatter, all-gather and broadcast through the real tally-dp and
# tallyd (docs/protocol.md, "Collectives"): workers (tests/e2e/
# collworker) join jobs through tally:// and run every op, f32, i32,
# bf16 and f16, sizes 0, 1, 257 and the prime 10007 a rank, in worlds
# of 1, 2, 4 and 7; each checks its result bit for bit against a
# reference made from every rank's data, and the ranks' digests agree.
# Reduce-scatter through a q8 and a q4 job's codec (against a model from
# <tally/quant.h>) and the lossy q8 all-gather (within its bound, the
# same bits everywhere). Then 64 MiB a rank (reduce-scatter's send,
# all-gather's receive, the broadcast; every type) in a world of 4, and a
# member killed mid-call: every other one returns an error, no hang.
# With the argument "loss" (meson test coll_loss): the same ops in a
# world of 4 with 1 % of the packets lost each way (nftables), the
# 16-bit types and 64 MiB included, the losses served again from the
# stored results.
MODE=${1:-plain}
if [ "$MODE" = loss ]; then
	TESTBED_OPTS="-n 4 --host --loss-up 1 --loss-down 1"
else
	TESTBED_OPTS="-n 7 --host"
fi
. "$(dirname "$0")/preamble.sh"
COLL=$TALLY_BUILD/tests/e2e/collworker

# coll_all JOB TOKEN N NAME [collworker options]: ranks 0..N-1 of JOB run
# the calls; two TAP lines: every rank's results are right, and every
# rank printed the same digest.
coll_all() {
	local job=$1 token=$2 n=$3 name=$4 pids="" r p rc=0 same=0 d0 tf
	shift 4
	tf=$(token_file "$token")
	for r in $(seq 0 $((n - 1))); do
		eval "local ns=\$TESTBED_NS_$((r + 1))"
		ip netns exec "$ns" "$COLL" \
			--url "tally://$TESTBED_HOST_IP:$TALLYD_RDV_PORT/$job" \
			--token-file "$tf" --rank "$r" --world "$n" "$@" \
			>"$WORK/$name.$r" 2>&1 &
		pids="$pids $!"
	done
	for p in $pids; do
		wait "$p" || rc=1
	done
	ok $rc "$name: every rank's results equal the reference"
	[ $rc -eq 0 ] || sed 's/^/#   /' "$WORK/$name".*
	d0=$(digest "$WORK/$name.0")
	for r in $(seq 1 $((n - 1))); do
		[ -n "$d0" ] && [ "$(digest "$WORK/$name.$r")" = "$d0" ] ||
			same=1
	done
	ok $same "$name: the same bits on every rank ($d0)"
}

# job NAME WORLD [OPTIONS]: creates a job through tallyd; prints its
# token.
job() {
	local name=$1 world=$2
	shift 2
	tctl --json job create "$name" --world "$world" "$@" |
		jq_py 'j["token"]'
}

# timed NAME CMD...: runs CMD, says how long it took.
timed() {
	local t0=$(date +%s%N) name=$1
	shift
	"$@"
	echo "# $name: $((($(date +%s%N) - t0) / 1000000)) ms"
}

dp_start
ok $? "tally-dp starts"
tallyd_start
ok $? "tallyd starts"

if [ "$MODE" = loss ]; then
	T=$(job l4 4)
	timed small coll_all l4 "$T" 4 loss-small --iters 2
	timed "small 16-bit" coll_all l4 "$T" 4 loss-small16 \
		--types bf16,f16
	timed 64MiB coll_all l4 "$T" 4 loss-64MiB --ops rs,ag \
		--types f32 --sizes 4194304 --timeout-ms 20000
	T=$(job lq8 4 --codec q8,seed=3 --narrow)
	timed q8 coll_all lq8 "$T" 4 loss-q8 --ops rs,ag --types q \
		--sizes 10007 --iters 2
	served=$(dp_counter retransmissions_served)
	echo "# retransmissions served $served"
	[ "$served" -gt 0 ]
	ok $? "lost answers were served again from the stored results"
	finish
	exit
fi

for w in 1 2 4 7; do
	T=$(job "w$w" "$w")
	timed "world $w" coll_all "w$w" "$T" "$w" "world$w"
	timed "world $w 16-bit" coll_all "w$w" "$T" "$w" "world$w-16" \
		--types bf16,f16
done
T=$(job big 4)
timed 64MiB coll_all big "$T" 4 big --ops rs,ag --types f32,i32 \
	--sizes 4194304 --timeout-ms 20000
timed "64MiB 16-bit" coll_all big "$T" 4 big16 --ops rs,ag \
	--types bf16,f16 --sizes 8388608 --timeout-ms 20000
timed "64MiB 16-bit broadcast" coll_all big "$T" 4 big16-bc --ops bc \
	--types bf16,f16 --sizes 33554432 --timeout-ms 20000
timed "64MiB broadcast" coll_all big "$T" 4 big-bc --ops bc --types f32,i32 \
	--sizes 16777216 --timeout-ms 20000
# The codecs (docs/collectives.md, "Codecs"): reduce-scatter through a
# narrow q8 job's and a wide q4 job's codec, the lossy q8 all-gather.
T=$(job q8 4 --codec q8,seed=3 --narrow)
timed "q8 world 4" coll_all q8 "$T" 4 q8 --ops rs,ag --types q
T=$(job q4 7 --codec q4,seed=4)
timed "q4 world 7" coll_all q4 "$T" 7 q4 --ops rs,ag --types q
for s in bad_owner not_owner wrong_op mismatch early; do
	[ "$(dp_counter "drop_$s")" -eq 0 ] || echo "# drop_$s nonzero"
done
[ "$(($(dp_counter drop_bad_owner) + $(dp_counter drop_not_owner) + \
	$(dp_counter drop_wrong_op)))" -eq 0 ]
ok $? "no collective packet refused"

# A member killed mid-call: the others return an error after their
# timeout (2 s), never hang.
T=$(job kill 4)
tf=$(token_file "$T")
pids=""
for r in 0 1 2 3; do
	eval "ns=\$TESTBED_NS_$((r + 1))"
	ip netns exec "$ns" "$COLL" \
		--url "tally://$TESTBED_HOST_IP:$TALLYD_RDV_PORT/kill" \
		--token-file "$tf" --rank "$r" --world 4 --ops rs,ag \
		--types i32 --sizes 262144 --iters 1000 --timeout-ms 2000 \
		>"$WORK/kill.$r" 2>&1 &
	pids="$pids $!"
	[ "$r" -eq 3 ] && victim=$!
done
before=$(dp_counter completed)
for _ in $(seq 300); do
	[ "$(dp_counter completed)" -gt $((before + 20000)) ] && break
	sleep 0.1
done
alive=0
for p in $pids; do
	kill -0 "$p" 2>/dev/null || alive=1
done
ok $alive "all four ranks are mid-call when rank 3 is killed"
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
ok $rc "every surviving rank returns an error"
[ $rc -eq 0 ] || sed 's/^/#   /' "$WORK"/kill.*
[ "$elapsed" -lt 5000 ]
ok $? "within about the timeout (2000 ms), not a hang"
wait "$victim" 2>/dev/null
finish

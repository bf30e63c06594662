#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# Jobs against the MTU and memory tally-dp has, on links of MTU 1400:
# - tallyd refuses at `job create`, with a sentence, what tally-dp cannot
#   serve: max_elems 336 (1,412-byte packets), 2 GiB of slots, q8 with
#   1,024 elements widened; tally-dp's own job_add refuses 336 too;
# - max_elems 333 (exactly 1,400 bytes) is taken and two workers get
#   exact results through it;
# - when tally-dp's MTU is larger than the workers' path (tally-dp at
#   1500 on these 1400 links) tallyd takes max_elems 358, and the
#   workers' tally_open() says the packets exceed their path MTU instead
#   of timing out later;
# - tally-bench names the status of a NACK that hits its barrier.
TESTBED_OPTS="-n 2 --mtu 1400 --host"
. "$(dirname "$0")/preamble.sh"

dp_start
ok $? "tally-dp starts with --mtu 1400"
tallyd_start --set join_timeout_s=10
ok $? "tallyd starts"
sleep 0.5	# a poll: tallyd has tally-dp's limits

# refused NAME ERRNO-TEXT TEXT ARGS...: job create NAME ARGS fails (exit 1)
# with a message that contains TEXT.
refused() {
	local name=$1 want=$2
	shift 2
	tctl job create "$name" --world 2 "$@" >/dev/null 2>"$WORK/$name.err"
	local rc=$?
	echo "# $(cat "$WORK/$name.err")"
	[ $rc -eq 1 ] && grep -q "$want" "$WORK/$name.err"
}
refused big "over tally-dp's MTU of 1400; at most max_elems 333" --max-elems 336
ok $? "create --max-elems 336 at MTU 1400: refused, names the limit (333)"
refused huge "needs 2050.1 MiB at tally-dp" --window 32768 --max-elems 8192
ok $? "create --window 32768 --max-elems 8192: refused (2 GiB a job)"
refused q8 "codec q8 makes 4164-byte packets (i8, widened results)" \
	--codec q8 --max-elems 1024
ok $? "create --codec q8 --max-elems 1024: refused (widened results)"
[ "$(tctl --json job list | jq_py 'len(j["jobs"])')" = 0 ]
ok $? "nothing was created"
rep=$(dp_admin '{"cmd":"job_add","id":50,"token":"0123456789abcdef","world":1,"max_elems":336,"members":[{"ip":"10.77.0.12","port":9}]}')
echo "# $rep"
echo "$rep" | jq_py 'j["errno"]' | grep -qx 90
ok $? "tally-dp's job_add refuses max_elems 336 at MTU 1400 (EMSGSIZE)"

# --- the exact fit works ----------------------------------------------------
TOKEN=$(tctl --json job create fit --world 2 --max-elems 333 | jq_py 'j["token"]')
[ ${#TOKEN} -eq 64 ]
ok $? "create --max-elems 333 (1,400-byte packets) is taken"
pids=""
for r in 0 1; do
	worker_url "$r" fit "$TOKEN" "$r" 2 "$WORK/fit.$r" --type f32 \
		--size 4M --seed 3
	pids="$pids $WPID"
done
rc=0
for p in $pids; do
	wait "$p" || rc=1
done
ok $rc "two workers allreduce through 1,400-byte packets, results exact"
[ $rc -eq 0 ] || sed 's/^/#   /' "$WORK"/fit.*
[ -n "$(digest "$WORK/fit.0")" ] && [ "$(digest "$WORK/fit.0")" = "$(digest "$WORK/fit.1")" ]
ok $? "and bit-identical"
tctl job delete fit >/dev/null

# --- tally-dp's MTU above the workers' path ------------------------------------
dp_stop >/dev/null
dp_start --mtu 1500
ok $? "tally-dp restarts with --mtu 1500 on the 1400 links"
for _ in $(seq 50); do
	[ "$(tctl --json ping | jq_py 'j["dp_up"]')" = True ] && break
	sleep 0.2
done
sleep 0.5
TOKEN=$(tctl --json job create wide --world 2 --max-elems 358 | jq_py 'j["token"]')
[ ${#TOKEN} -eq 64 ]
ok $? "tallyd takes max_elems 358 for tally-dp's MTU 1500"
pids=""
for r in 0 1; do
	worker_url "$r" wide "$TOKEN" "$r" 2 "$WORK/wide.$r" --type f32 \
		--size 1M --timeout-ms 3000
	pids="$pids $WPID"
done
rc=0
for p in $pids; do
	wait "$p" && rc=1
done
grep -h "path MTU" "$WORK"/wide.* | head -1 | sed 's/^/# /'
[ $rc -eq 0 ] && grep -q "over the path MTU of 1400 toward the dataplane: use at most 333 elements" "$WORK/wide.0" &&
	grep -q "Message too long" "$WORK/wide.0"
ok $? "workers with a 1400 path fail in tally_open() with EMSGSIZE, naming 333"
[ $rc -eq 0 ] || sed 's/^/#   /' "$WORK"/wide.*
tctl job delete wide >/dev/null

# --- a NACK at tally-bench's barrier ----------------------------------------------
# Rank 0 starts its data on slot 0 without a barrier; rank 1's barrier (1
# element at offset 0) then finds slot 0 busy with another chunk. A job
# added by hand: tallyd, which would remove it as not its own, is gone.
tallyd_stop
job_add 7 7777777777777777 0 1 >/dev/null
worker 0 7 7777777777777777 0 2 "$WORK/nack.0" --type i32 --size 64K \
	--no-barrier --timeout-ms 3000
p0=$WPID
sleep 1
worker 1 7 7777777777777777 1 2 "$WORK/nack.1" --type i32 --size 64K \
	--timeout-ms 3000
p1=$WPID
wait "$p0"
wait "$p1"
grep "^error:" "$WORK/nack.1" | sed 's/^/# /'
grep -q "^error: barrier: dataplane refused the chunk .*: mismatch" "$WORK/nack.1"
ok $? "tally-bench: a NACK at the barrier is printed with its status"
finish

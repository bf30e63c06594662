#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# Four kernel-UDP workers allreduce a 64 MiB f32 tensor (twice: the second
# round reuses every slot's other shadow set) and an i32 tensor through
# tally-dp: every worker's result equals the reference fixed-point sum
# computed on the CPU, and all four are bit-identical.
TESTBED_OPTS="-n 4"
. "$(dirname "$0")/preamble.sh"
TOKEN=00c0ffee00c0ffee

dp_start
ok $? "tally-dp starts on the testbed port"
job_add 1 "$TOKEN" 0 1 2 3 >/dev/null
ok $? "job 1 added: 4 members"

# round TYPE SIZE NAME: four workers, checked and compared.
round() {
	local type=$1 size=$2 name=$3 pids="" r rc=0 d0 same=0
	for r in 0 1 2 3; do
		worker "$r" 1 "$TOKEN" "$r" 4 "$WORK/$name.$r" \
			--type "$type" --size "$size" --iters 2 --seed 7
		pids="$pids $WPID"
	done
	for p in $pids; do
		wait "$p" || rc=1
	done
	ok $rc "$name: every worker's result equals the reference"
	[ $rc -eq 0 ] || sed 's/^/#   /' "$WORK/$name".*
	d0=$(digest "$WORK/$name.0")
	for r in 1 2 3; do
		[ -n "$d0" ] && [ "$(digest "$WORK/$name.$r")" = "$d0" ] ||
			same=1
	done
	ok $same "$name: results bit-identical on all workers ($d0)"
	grep -h -i -E 'goodput|best' "$WORK/$name.0" | sed 's/^/# /'
}

round f32 64M f32-64MiB
round i32 4M i32-4MiB
[ "$(dp_counter drop_bad_token)" -eq 0 ]
ok $? "no packet was refused"
dp_stop
ok $? "tally-dp stops cleanly on SIGTERM"
finish

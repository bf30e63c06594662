#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# Four kernel-UDP workers allreduce a 64 MiB f32 tensor (twice: the second
# round reuses every slot's other shadow set) and an i32 tensor through
# tally-dp: every worker's result equals the reference fixed-point sum
# computed on the CPU, and all four are bit-identical. Tensors of magnitude
# 2^-140 (subnormals among them) and 2^120 are also held to fixed point's
# documented precision against the exact sums (tally-bench --scale-exp).
# bf16 and f16 tensors (tally_allreduce_typed) in a narrow job, in 16-bit
# lanes (bf16 at 4 workers, by the rule) and 32-bit lanes (f16 at 4), and
# in a wide job with 16-bit lanes forced: each equal to the fixed-point
# reference rounded once to the type, on every worker.
TESTBED_OPTS="-n 4"
. "$(dirname "$0")/preamble.sh"
TOKEN=00c0ffee00c0ffee

dp_start
ok $? "tally-dp starts on the testbed port"
job_add 1 "$TOKEN" 0 1 2 3 >/dev/null
ok $? "job 1 added: 4 members"

# round TYPE SIZE NAME [FLAGS]: four workers, twice, checked and compared.
round() {
	local type=$1 size=$2 name=$3

	shift 3
	allreduce_all 1 "$TOKEN" 4 "$name" --type "$type" --size "$size" \
		--iters 2 --seed 7 "$@"
	grep -h -i -E 'goodput|best|precision' "$WORK/$name.0" |
		sed 's/^/# /'
}

# afresh NAME [NARROW]: job 1 deleted and added again (NARROW true:
# narrow results). New contexts number their
# rounds from 0: as tallyd does for every membership, the job starts
# afresh at the dataplane (fresh slots) for every set of workers.
afresh() {
	dp_admin '{"cmd":"job_del","id":1}' >/dev/null &&
		NARROW=${2:-false} job_add 1 "$TOKEN" 0 1 2 3 >/dev/null
	ok $? "job 1 added again for $1"
}

round f32 64M f32-64MiB
afresh i32-4MiB
round i32 4M i32-4MiB
afresh f32-tiny-1MiB
round f32 1M f32-tiny-1MiB --scale-exp -140
afresh f32-huge-1MiB
round f32 1M f32-huge-1MiB --scale-exp 120
afresh bf16-64MiB-narrow true
round bf16 64M bf16-64MiB-narrow --narrow
grep -q "^lanes: 16, narrow" "$WORK/bf16-64MiB-narrow.0"
ok $? "bf16 at 4 workers in a narrow job takes 16-bit lanes"
afresh f16-4MiB-narrow true
round f16 4M f16-4MiB-narrow --narrow
grep -q "^lanes: 32, narrow" "$WORK/f16-4MiB-narrow.0"
ok $? "f16 at 4 workers takes 32-bit lanes"
afresh bf16-1MiB-wide-16
round bf16 1M bf16-1MiB-wide-16 --lanes 16
[ "$(dp_counter drop_bad_token)" -eq 0 ]
ok $? "no packet was refused"
dp_stop
ok $? "tally-dp stops cleanly on SIGTERM"
finish

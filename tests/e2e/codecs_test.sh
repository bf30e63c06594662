#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# Every codec tally_allreduce() applies, end to end through tally-dp:
# four workers allreduce f32 tensors through the codec, and each one's
# decoded result equals the CPU reference of the same computation (every
# rank's encoding with its seeds, the dataplane's integer sums, the
# decoding) bit for bit, on every iteration (the draws change per call),
# with wide and narrow results. Codecs with memory (error feedback,
# 2-bit, DGC momentum, PowerSGD) run three calls, the reference carrying
# every rank's memory from one to the next. CODECS_LOSS=1 runs it on
# lossy links (codecs_loss_test.sh).
TESTBED_OPTS="-n 4 ${CODECS_TESTBED:-}"
. "$(dirname "$0")/preamble.sh"
TOKEN=c0dec0dec0dec0de
id=0

dp_start
ok $? "tally-dp starts"
# run_codec SPEC NARROW [ITERS]: a fresh job (narrow or wide results), 4
# workers, ITERS calls each (2 by default).
run_codec() {
	local spec=$1 narrow=$2 iters=${3:-2} flag=
	id=$((id + 1))
	[ "$narrow" = true ] && flag=--narrow
	NARROW=$narrow job_add "$id" "$TOKEN" 0 1 2 3 >/dev/null
	allreduce_all "$id" "$TOKEN" 4 "c$id" --type f32 --size 2M \
		--iters "$iters" --seed "$id" --codec "$spec" --timeout-ms 10000 $flag
	grep -h "^codec:" "$WORK/c$id.0" | sed "s/^/# $spec: /"
	dp_admin "{\"cmd\":\"job_del\",\"id\":$id}" >/dev/null
}
for spec in q16 q8,seed=5 q4,seed=99 ternary,seed=3 sign; do
	run_codec "$spec" false
	run_codec "$spec" true
done
run_codec randk,density=0.05,seed=11 false
run_codec sparse,density=0.02,est=topk false
run_codec sparse,density=0.05 false
# With memory.
run_codec 2bit,threshold=0.25 false 3
run_codec 2bit,threshold=0.25 true 3
run_codec q8,ef=1,seed=6 false 3
run_codec ternary,ef=1,seed=3 true 3
run_codec sign,ef=1 false 3
run_codec randk,density=0.05,ef=1 false 3
run_codec sparse,density=0.02,est=topk,ef=1 false 3
run_codec sparse,density=0.05,est=sidco-exp,momentum=0.9 false 3
run_codec powersgd false 3
run_codec powersgd,rank=2,ef=0,seed=4 false 3
finish

#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# Tensors in GPU memory end to end through tally-dp (acceptance 3 of
# issue 12): four workers (tally-bench allreduce --cuda) copy their
# tensors to the GPU, tally_allreduce_cuda() encodes them there with the
# job's codec into the pinned staging, tally-dp sums the staged bytes,
# the GPU decodes the sums, and each worker's result must equal the CPU
# reference (every rank's encoding, the integer sums, the decoding) bit
# for bit, on every call, codec memory included; i32 exactly. A codec
# without a device path is refused with a sentence. Each worker prints
# its device, the staging and the wait/net share (what the double
# buffering did not hide). Skipped, visibly, where no GPU is usable.
if ! nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
	echo "1..0 # SKIP no CUDA device (nvidia-smi -L lists none)"
	exit 0
fi
TESTBED_OPTS="-n 4 ${CUDA_TESTBED:-}"
. "$(dirname "$0")/preamble.sh"
TOKEN=c0dac0dac0dac0da
id=0

dp_start
ok $? "tally-dp starts"
# run_cuda SPEC NARROW ITERS SIZE [options]: a fresh job, 4 workers with
# their tensors on the GPU, ITERS calls each.
run_cuda() {
	local spec=$1 narrow=$2 iters=$3 size=$4 flag=
	shift 4
	id=$((id + 1))
	[ "$narrow" = true ] && flag=--narrow
	NARROW=$narrow job_add "$id" "$TOKEN" 0 1 2 3 >/dev/null
	allreduce_all "$id" "$TOKEN" 4 "g$id" --cuda --size "$size" \
		--iters "$iters" --seed "$id" --codec "$spec" \
		--timeout-ms 10000 $flag "$@"
	grep -h "^cuda" "$WORK/g$id.0" | sed "s/^/# $spec: /"
	dp_admin "{\"cmd\":\"job_del\",\"id\":$id}" >/dev/null
}
# fixp at a prime size and across several staged segments (the default
# segment is 1 Mi elements: 5M floats are 2 segments and a part).
run_cuda fixp false 2 $((4 * 10007))
run_cuda fixp false 2 20M
run_cuda fixp true 2 4M
# i32 sums, staged as they are.
id=$((id + 1))
job_add "$id" "$TOKEN" 0 1 2 3 >/dev/null
allreduce_all "$id" "$TOKEN" 4 "g$id" --cuda --type i32 --size 4M \
	--iters 2 --seed "$id" --timeout-ms 10000
dp_admin "{\"cmd\":\"job_del\",\"id\":$id}" >/dev/null
# Every codec with a device path, memory carried over three calls, with
# segments smaller than the tensor (TALLY_CUDA_SEGMENT) so that the
# double buffering turns over.
export TALLY_CUDA_SEGMENT=65536
for spec in q16 q8,seed=5 q4,seed=99 ternary,seed=3 sign; do
	run_cuda "$spec" false 2 2M
done
run_cuda randk,density=0.05,seed=11 false 2 2M
run_cuda 2bit,threshold=0.25 false 3 2M
run_cuda q8,ef=1,seed=6 false 3 2M
run_cuda ternary,ef=1,seed=3 true 3 2M
run_cuda randk,density=0.05,ef=1 false 3 2M
run_cuda powersgd false 3 2M
run_cuda powersgd,rank=2,ef=0,seed=4 false 3 2M
unset TALLY_CUDA_SEGMENT
# No device path: refused with the reason, never a silent host copy.
id=$((id + 1))
job_add "$id" "$TOKEN" 0 >/dev/null
worker 0 "$id" "$TOKEN" 0 1 "$WORK/refuse" --cuda --size 1M \
	--codec sparse,density=0.02 --timeout-ms 3000
wait "$WPID"
rc=$?
said=1
grep -q "has no GPU path" "$WORK/refuse" && said=0
ok $(( rc == 3 && said == 0 ? 0 : 1 )) \
	"sparse: refused with exit 3 and a sentence (rc $rc)"
[ $rc -eq 3 ] && [ $said -eq 0 ] || sed 's/^/#   /' "$WORK/refuse"
dp_admin "{\"cmd\":\"job_del\",\"id\":$id}" >/dev/null
finish

#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# Issue 13: libnccl-net-tally.so driven as NCCL 2.28 drives it, by four
# nccl-harness ranks in the testbed's worker namespaces against tally-dp
# and tallyd (TLS rendezvous, tokens in files): the net's ring over TCP,
# the collnet group joined through tallyd from handles the ranks
# exchanged themselves, f32, i32, bf16 and f16 allreduces of 0, 1, 257,
# 1000003 and 16 Mi elements (64 MiB of f32) with many requests in
# flight, every sum exact (f32 in eighths: the float sum; uniform f32:
# libtally's fixed point, request by request; bf16 and f16 in quarters,
# in place and out of place: the exact sum, which the type holds); a bf16
# infinity failing test() on every rank; the plugin timed against
# libtally's own call on the same tensor and job; then rank 3 is killed
# and the others get an error from test() within the context's timeout,
# never a hang.
# And a rank whose tallyd is unreachable gets a clean error from connect
# with NCCL's WARN line. docs/nccl.md.
if [ -z "${TESTBED_N:-}" ]; then
	if [ "$(id -u)" -ne 0 ] || ! ip netns list >/dev/null 2>&1; then
		echo "1..0 # SKIP needs root and ip netns"
		exit 0
	fi
	exec "$TALLY_SRC/tools/testbed" run --prefix "tn$$" -n 4 --host \
		-- "$0" "$@"
fi
. "$TALLY_SRC/tests/e2e/lib.sh"
HARNESS=$TALLY_BUILD/tests/nccl/nccl-harness
PLUGIN=$TALLY_BUILD/gpu/nccl/libnccl-net-tally.so
RANK_TIMEOUT=${NCCL_TEST_TIMEOUT:-400}
COORD_PORT=29610

RANK_PIDS=""
# shellcheck disable=SC2329
stop_all() {
	local p
	for p in $RANK_PIDS; do
		kill -TERM "$p" 2>/dev/null
	done
	tallyd_stop >/dev/null 2>&1
	dp_stop >/dev/null 2>&1
	rm -rf "$WORK"
	exit 1
}
trap stop_all INT TERM

# rank NS-INDEX URL TOKENFILE OUT [harness options]: one harness rank in
# worker namespace NS-INDEX, under `timeout`, in the background; its
# collnet job from the environment as under NCCL. Sets RPID.
rank() {
	local i=$1 url=$2 tf=$3 out=$4 ns ip
	shift 4
	eval "ns=\$TESTBED_NS_$((i + 1)) ip=\$TESTBED_IP_$((i + 1))"
	ip netns exec "$ns" env TALLY_URL="$url" TALLY_TOKEN_FILE="$tf" \
		TALLY_CA="$TALLY_CA" TALLY_NCCL_ADDR="$ip" TALLY_NCCL_16BIT=1 \
		timeout -k 5 "$RANK_TIMEOUT" "$HARNESS" --plugin "$PLUGIN" \
		--rank "$i" "$@" >"$out" 2>&1 &
	RPID=$!
}

dp_start
ok $? "tally-dp starts"
tallyd_start
ok $? "tallyd starts (TLS rendezvous)"
# narrow: bf16 then sums in 16-bit lanes (world 4 <= 7), f16 in 32-bit
# (world 4 > 2), libtally's rule; i32 and f32 come back in 32 bits alike
tctl --json job create nccl --world 4 --narrow >"$WORK/nccl.json"
ok $? "job nccl, world 4, narrow"
TF=$(token_file "$(jq_py 'j["token"]' <"$WORK/nccl.json")")
URL=tally://$TESTBED_HOST_IP:$TALLYD_RDV_PORT/nccl

# --- four ranks: everything, then rank 3 killed -------------------------
before=$(dp_counter contributions)
for r in 0 1 2 3; do
	rank "$r" "$URL" "$TF" "$WORK/h.$r" --world 4 \
		--coord "$TESTBED_IP_1:$COORD_PORT" --kill-rank 3 \
		--bench --bench-iters "${NCCL_BENCH_ITERS:-5}" --verbose
	RANK_PIDS="$RANK_PIDS $RPID"
	eval "pid_$r=$RPID"
done
rcs=""
for r in 0 1 2 3; do
	eval "wait \$pid_$r"
	rcs="$rcs $?"
done
RANK_PIDS=""
echo "# exit statuses:$rcs"
[ "$rcs" = " 0 0 0 137" ]
ok $? "ranks 0-2 pass every check and exit 0; rank 3 died of SIGKILL"
[ $? -eq 0 ] || sed 's/^/#   /' "$WORK"/h.*
for r in 0 1 2 3; do
	nok=$(grep -c "^rank $r: ok - " "$WORK/h.$r")
	grep -q "^rank $r: not ok" "$WORK/h.$r"
	[ $? -ne 0 ] && [ "$nok" -ge 47 ]
	ok $? "rank $r: $nok checks ok, none failed"
done
for kind in "i32" "f32 (eighths)" "f32 (uniform, against fixp)" \
	"bf16 (quarters, in place)" "bf16 (quarters, out of place)" \
	"f16 (quarters, in place)" "f16 (quarters, out of place)"; do
	for n in 0 1 257 1000003 16777216; do
		c=$(grep -hF "ok - $kind n=$n: " "$WORK"/h.* | grep -c exact)
		[ "$c" -eq 4 ]
		ok $? "$kind, $n elements: exact on all 4 ranks"
	done
done
grep -hF "n=16777216" "$WORK/h.0" | sed 's/^/# /'
c=$(grep -l "NET/tally: .*: bf16 sums in 16-bit lanes, f16 in 32-bit (world 4, narrow results)" \
	"$WORK"/h.* | wc -l)
[ "$c" -eq 4 ]
ok $? "connect names the lanes of libtally's rule: bf16 16-bit, f16 32-bit (narrow, world 4)"
c=$(grep -h "ok - bf16 with +inf on rank 1: test() returned NCCL error" \
	"$WORK"/h.* | grep -c "no fixed-point scale")
grep -h "bf16 with +inf" "$WORK/h.0" | sed 's/^/# /'
[ "$c" -eq 4 ]
ok $? "a bf16 infinity on rank 1: every rank gets an error from test() and a WARN line"
c=$(grep -hF "ok - bf16 after the infinity n=257: " "$WORK"/h.* |
	grep -c exact)
[ "$c" -eq 4 ]
ok $? "the next bf16 tensor sums exactly on all 4 ranks"
c=$(grep -h "ok - a second communicator on the same job: refused" \
	"$WORK"/h.* | wc -l)
[ "$c" -eq 4 ]
ok $? "a second communicator of a process on the same job: refused at once"
grep -h "NULL: back-pressure" "$WORK"/h.* | grep -qv "(0 NULL"
ok $? "a full request queue gave NULL requests that were posted again"
c=$(grep -h "ok - rank 3 killed: test() returned NCCL error" "$WORK"/h.* |
	wc -l)
grep -h "rank 3 killed" "$WORK"/h.* | sed 's/^/# /'
[ "$c" -eq 3 ]
ok $? "rank 3 killed: ranks 0-2 get an error from test(), no hang"
grep -h "closeColl in" "$WORK/h.0" | sed 's/^/# /'
grep -q "ok - closeColl in" "$WORK/h.0"
ok $? "closeColl after the failure returns"
bench=$(grep -h "^bench:" "$WORK/h.0")
echo "$bench" | sed 's/^/# /'
[ -n "$bench" ] && grep -q "ok - bench: the plugin's sums are bit-identical" \
	"$WORK/h.0"
ok $? "bench: plugin and libtally timed on the same tensor, same bits"
after=$(dp_counter contributions)
echo "# tally-dp contributions $before -> $after"
[ "$after" -gt $((before + 4 * 65536)) ]
ok $? "the allreduces went through tally-dp"

# --- tallyd unreachable: connect fails cleanly with NCCL's WARN ---------
rank 0 "tally://$TESTBED_HOST_IP:1/nccl" "$TF" "$WORK/down" --world 1 \
	--coord "$TESTBED_IP_1:$COORD_PORT"
t0=$(date +%s)
wait "$RPID"
rc=$?
t1=$(date +%s)
grep -q "NCCL WARN .*NET/tally: cannot join tally://$TESTBED_HOST_IP:1/nccl.*without CollNet" \
	"$WORK/down" && grep -q "not ok - collnet connect" "$WORK/down" &&
	[ "$rc" -eq 1 ] && [ $((t1 - t0)) -lt 30 ]
ok $? "tallyd unreachable: connect returns an error at once, one WARN line"
[ $? -eq 0 ] || sed 's/^/#   /' "$WORK/down"
grep -h "NCCL WARN" "$WORK/down" | sed 's/^/# /'
finish

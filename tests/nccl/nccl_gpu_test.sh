#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# Issue 13, acceptance 2: NCCL itself, on a GPU, loading
# libnccl-net-tally.so. First one rank alone (ncclCommInitRank with
# NCCL_COLLNET_ENABLE=1: NCCL's INFO lines must name the plugin's net and
# collnet). Then two ranks on the same GPU made to look like two nodes
# (NCCL_HOSTID differs, each in its own testbed namespace), so NCCL
# builds a two-node communicator whose inter-node net is the plugin's and
# whose CollNet is tally: f32 and i32 (and from host memory bf16 and
# f16) allreduces of 1, 257, 1000003 and 16 Mi elements must be exact,
# and tally-dp's counters say whether the sums went through it. The same again with the sums in device memory
# (TALLY_NCCL_CUDA=1). NCCL's INFO logs are kept in NCCL_GPU_LOGS when
# that is set. Skipped without a CUDA device or the nccl-gpu program.
# docs/nccl.md ("Checking on a GPU").
if [ -z "${TESTBED_N:-}" ]; then
	if [ ! -x "$TALLY_BUILD/tests/nccl/nccl-gpu" ]; then
		echo "1..0 # SKIP nccl-gpu not built (no CUDA toolkit with NCCL)"
		exit 0
	fi
	if ! nvidia-smi -L >/dev/null 2>&1; then
		echo "1..0 # SKIP no CUDA device"
		exit 0
	fi
	if [ "$(id -u)" -ne 0 ] || ! ip netns list >/dev/null 2>&1; then
		echo "1..0 # SKIP needs root and ip netns"
		exit 0
	fi
	exec "$TALLY_SRC/tools/testbed" run --prefix "tg$$" -n 2 --host \
		-- "$0" "$@"
fi
. "$TALLY_SRC/tests/e2e/lib.sh"
GPU=$TALLY_BUILD/tests/nccl/nccl-gpu
PLUGIN=$TALLY_BUILD/gpu/nccl/libnccl-net-tally.so
LOGS=${NCCL_GPU_LOGS:-$WORK}
SIZES="--size 1 --size 257 --size 1000003 --size 16777216"
mkdir -p "$LOGS"

# NCCL's library: the CUDA toolkit's, or the one a pip NCCL installed.
if ! ldd "$GPU" | grep -q "libnccl.so.2 => /"; then
	for d in /usr/local/cuda/lib64 $(/usr/bin/env python3 -c \
	    'import nvidia.nccl as m; print(list(m.__path__)[0] + "/lib")' \
	    2>/dev/null); do
		[ -e "$d/libnccl.so.2" ] && export LD_LIBRARY_PATH="$d:${LD_LIBRARY_PATH:-}"
	done
fi
ldd "$GPU" | grep -E "libnccl|libcudart" | sed 's/^/# /'

nccl_env() {
	echo NCCL_NET_PLUGIN="$PLUGIN" NCCL_COLLNET_ENABLE=1 \
		NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET,COLL,TUNING \
		TALLY_CA="$TALLY_CA"
}

# rank NS-INDEX RANK WORLD URL TOKENFILE OUT [env...]: one nccl-gpu rank
# in worker namespace NS-INDEX as node "tally-gpu-node-RANK". Sets RPID.
rank() {
	local i=$1 r=$2 w=$3 url=$4 tf=$5 out=$6 ns ip
	shift 6
	eval "ns=\$TESTBED_NS_$((i + 1)) ip=\$TESTBED_IP_$((i + 1))"
	# shellcheck disable=SC2046
	ip netns exec "$ns" env $(nccl_env) NCCL_HOSTID="tally-gpu-node-$r" \
		TALLY_URL="$url" TALLY_TOKEN_FILE="$tf" TALLY_NCCL_ADDR="$ip" \
		"$@" timeout -k 5 120 "$GPU" --rank "$r" --world "$w" \
		--id "$WORK/id.${url##*/}" $SIZES --iters 3 --limit 40 ${GPU_ARGS:-} \
		>"$LOGS/$out" 2>&1 &
	RPID=$!
}

dp_start
ok $? "tally-dp starts"
tallyd_start
ok $? "tallyd starts (TLS rendezvous)"

# --- one rank: the plugin loaded into a real ncclCommInitRank ----------
tctl --json job create gpu1 --world 1 >"$WORK/gpu1.json"
TF1=$(token_file "$(jq_py 'j["token"]' <"$WORK/gpu1.json")")
rank 0 0 1 "tally://$TESTBED_HOST_IP:$TALLYD_RDV_PORT/gpu1" "$TF1" one.log
wait "$RPID"
ok $? "one rank: ncclCommInitRank, allreduces exact, ncclCommDestroy"
grep -hE "ok - |^bench:" "$LOGS/one.log" | sed 's/^/# /'
grep -E "NCCL INFO (NET|Using network|.*[Pp]lugin|.*CollNet|.*tally)" \
	"$LOGS/one.log" | head -20 | sed 's/^/# /'
grep -qiE "NCCL INFO .*(Loaded|Using).*net.*tally|NCCL INFO NET/tally" \
	"$LOGS/one.log"
ok $? "one rank: NCCL's INFO lines name the tally net plugin"
grep -qiE "NCCL INFO .*collnet.*tally" "$LOGS/one.log"
ok $? "one rank: NCCL's INFO lines name the tally collnet plugin"

# --- two "nodes" on one GPU: CollNet through tally-dp ------------------
# two NAME LABEL [env...]: a world-2 job NAME, both ranks, the checks.
two() {
	local name=$1 label=$2 before after tf rc0 rc1 p0
	shift 2
	tctl --json job create "$name" --world 2 >"$WORK/$name.json"
	tf=$(token_file "$(jq_py 'j["token"]' <"$WORK/$name.json")")
	before=$(dp_counter contributions)
	rank 0 0 2 "tally://$TESTBED_HOST_IP:$TALLYD_RDV_PORT/$name" "$tf" \
		"$name.0.log" "$@"
	p0=$RPID
	rank 1 1 2 "tally://$TESTBED_HOST_IP:$TALLYD_RDV_PORT/$name" "$tf" \
		"$name.1.log" "$@"
	wait "$RPID"
	rc1=$?
	wait "$p0"
	rc0=$?
	after=$(dp_counter contributions)
	[ "$rc0" -eq 0 ] && [ "$rc1" -eq 0 ]
	ok $? "$label: two nodes, every allreduce exact (exit $rc0 $rc1)${TODO:+ # TODO $TODO}"
	grep -hE "ok - |^bench:" "$LOGS/$name".*.log | sed 's/^/# /'
	grep -h -A3 "first difference" "$LOGS/$name".*.log | sed 's/^/# /'
	grep -hiE "NCCL INFO .*(CollNet|collnet|COLLNET)" "$LOGS/$name.0.log" |
		head -12 | sed 's/^/# /'
	grep -h "NCCL WARN" "$LOGS/$name".*.log | head -5 | sed 's/^/# /'
	echo "# $label: tally-dp contributions $before -> $after"
	[ "$after" -gt "$before" ]
	ok $? "$label: NCCL's sums went through tally-dp (CollNet)"
}

# CollNet asked for by name: NCCL's own choice between it and its ring
# depends on its tuning model, and the question here is the plugin's.
ALGO=NCCL_ALGO=CollNetChain,CollNetDirect
GPU_ARGS=--no16 two gpu2 "host memory" "$ALGO"
# bf16 and f16 on device memory are NCCL's own (reduceSupport says no
# there), which a CollNet-only NCCL_ALGO would leave without an
# algorithm: f32 and i32 only.
GPU_ARGS=--no16 two gpu3 "device memory (TALLY_NCCL_CUDA=1)" "$ALGO" \
	TALLY_NCCL_CUDA=1
# bf16 and f16 through CollNet, opted in with TALLY_NCCL_16BIT=1: on
# 2026-11-26 (NCCL 2.28.9, one H200) a 257-element bf16 sum came back as
# zeros on both ranks, where 1 element was exact and the harness's
# requests of 257 sum exactly. Kept here, as a TODO, until that is
# understood; the plugin offers the 16-bit types only when asked.
TODO="bf16 of 257 elements: zeros under NCCL (docs/nccl.md)" \
	two gpu4 "bf16 and f16 (TALLY_NCCL_16BIT=1)" "$ALGO" TALLY_NCCL_16BIT=1

# --- what an NCCL user has without tally, on the same two nodes --------
# plain NAME LABEL [env...]: both ranks, exact sums, no tally-dp check.
plain() {
	local name=$1 label=$2 p0 rc0 rc1
	shift 2
	rank 0 0 2 "tally://$TESTBED_HOST_IP:$TALLYD_RDV_PORT/$name" "" \
		"$name.0.log" "$@"
	p0=$RPID
	rank 1 1 2 "tally://$TESTBED_HOST_IP:$TALLYD_RDV_PORT/$name" "" \
		"$name.1.log" "$@"
	wait "$RPID"
	rc1=$?
	wait "$p0"
	rc0=$?
	[ "$rc0" -eq 0 ] && [ "$rc1" -eq 0 ]
	ok $? "$label: two nodes, every allreduce exact (exit $rc0 $rc1)"
}
plain ring1 "NCCL's ring over the plugin's TCP net" NCCL_ALGO=Ring \
	NCCL_COLLNET_ENABLE=0
plain ring2 "NCCL's ring over its own socket net" NCCL_ALGO=Ring \
	NCCL_COLLNET_ENABLE=0 NCCL_NET_PLUGIN=none
grep -q "Using network Socket" "$LOGS/ring2.0.log"
ok $? "without the plugin NCCL uses its own socket net"
for n in gpu2 gpu3 ring1 ring2; do
	echo "# 64 MiB f32 allreduce, 2 nodes, $n:" \
		"$(grep -h "^bench:" "$LOGS/$n".*.log | sed 's/.*: median //' |
			tr '\n' ' ')"
done
finish

#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# Two tiers (docs/scale-out.md, "Two tiers"), at the dataplane: three
# tally-dp hosts, the first the spine, the others leaves, each job added
# through the admin socket as tallyd would program it. Two leaves of three
# workers give the exact result, bit-identical to the same allreduce of
# six workers through one tally-dp (f32 through the fixed-point scale of
# the total world, and i32); each leaf sent its rounds upstream and took
# the spine's results. Then 2 x 33 = 66 ranks (33 a namespace, on
# distinct ports): past 64 ranks, exact. A result from upstream with a
# wrong token is dropped and counted; at 1 % loss each way on a leaf's
# link (nftables) the result is still exact and the flat one's.
TESTBED_OPTS="-n 6 --dps 3"
. "$(dirname "$0")/preamble.sh"

trap 'nft delete table netdev "tally_tier_$$" 2>/dev/null; dp_stop_at' EXIT

SPINE_TOKEN=5eed0000feed0001
LEAF_TOKEN=5eed0000feed0002
FLAT_TOKEN=5eed0000feed0003

# dp_at H JSON: an admin request to dataplane H (1: dp_start's).
dp_at() {
	if [ "$1" -eq 1 ]; then
		"$DPADMIN" "$DP_SOCK" "$2"
	else
		"$DPADMIN" "$WORK/dp$1.sock" "$2"
	fi
}

# members NS-INDEXES...: JSON members, one a worker namespace, port
# 40000 + ID ($ID).
members() {
	local m="" i ip
	for i in "$@"; do
		eval "ip=\$TESTBED_IP_$i"
		m="$m${m:+,}{\"ip\":\"$ip\",\"port\":$((40000 + ID))}"
	done
	echo "[$m]"
}

# tree ID PER: the spine job ID at dataplane 1 (its members the leaves,
# dataplanes 2 and 3) and a leaf of PER members at each of them (M0, M1:
# their members' JSON), with their upstream.
tree() {
	local id=$1 per=$2 l rc=0
	# Fresh slots for a new set of contexts: added again.
	for l in 1 2 3; do
		dp_at $l "{\"cmd\":\"job_del\",\"id\":$id}" >/dev/null
	done
	dp_at 1 "{\"cmd\":\"job_add\",\"id\":$id,\"token\":\"$SPINE_TOKEN\",\"world\":2,\"window\":64,\"max_elems\":256,\"members\":[{\"ip\":\"$TESTBED_DP_IP_2\",\"port\":47474},{\"ip\":\"$TESTBED_DP_IP_3\",\"port\":47474}]}" \
		>"$WORK/spine.$id.json" || rc=1
	for l in 0 1; do
		dp_at $((l + 2)) "{\"cmd\":\"job_add\",\"id\":$id,\"token\":\"$LEAF_TOKEN\",\"world\":$per,\"window\":64,\"max_elems\":256,\"members\":$([ $l -eq 0 ] && echo "$M0" || echo "$M1"),\"upstream\":{\"ip\":\"$TESTBED_DP_IP_1\",\"port\":47474,\"nports\":1,\"token\":\"$SPINE_TOKEN\",\"rank\":$l,\"world\":$((2 * per))}}" \
			>"$WORK/leaf.$id.$l.json" || rc=1
		grep -q '"error"' "$WORK/leaf.$id.$l.json" && rc=1
	done
	grep -q '"error"' "$WORK/spine.$id.json" && rc=1
	[ $rc -eq 0 ] || cat "$WORK"/spine.$id.json "$WORK"/leaf.$id.*.json |
		sed 's/^/#   /'
	return $rc
}

# rank NS-INDEX PORT DP TOKEN GLOBAL-RANK OUT [tally-bench options]: one
# rank in the background; sets WPID.
rank() {
	local i=$1 port=$2 dp=$3 token=$4 g=$5 out=$6 ns ip
	shift 6
	eval "ns=\$TESTBED_NS_$i ip=\$TESTBED_IP_$i"
	TALLY_TOKEN=$token ip netns exec "$ns" "$BENCH" allreduce --dp "$dp" \
		--bind "$ip:$port" --job "$ID" --rank "$g" "$@" >"$out" 2>&1 &
	WPID=$!
}

# wait_all NAME PIDS...: 0 when every rank ended exact.
wait_all() {
	local name=$1 p rc=0
	shift
	for p in "$@"; do
		wait "$p" || rc=1
	done
	[ $rc -eq 0 ] || grep -L '^digest' "$WORK/$name".* | head -3 |
		xargs -r sed 's/^/#   /'
	return $rc
}

# same_digest NAME: prints the one digest every NAME.* output has.
same_digest() {
	local d0="" f d
	for f in "$WORK/$1".*; do
		d=$(digest "$f")
		[ -n "$d" ] || return 1
		[ -z "$d0" ] || [ "$d" = "$d0" ] || return 1
		d0=$d
	done
	echo "$d0"
}

# leaf_counter H NAME: the total counter NAME of dataplane H.
leaf_counter() {
	dp_at "$1" '{"cmd":"stats"}' | jq_py "j['total']['$2']"
}

dp_start && dp_start_at 2 && dp_start_at 3
ok $? "three tally-dp start (spine; leaves at dataplanes 2 and 3)"

# --- the flat reference: six workers through one tally-dp ----------------
ID=5
# flat NAME [tally-bench options]: six workers of job 5, added again.
flat() {
	local name=$1 pids="" i
	shift
	dp_at 1 '{"cmd":"job_del","id":5}' >/dev/null
	dp_at 1 "{\"cmd\":\"job_add\",\"id\":5,\"token\":\"$FLAT_TOKEN\",\"world\":6,\"window\":64,\"max_elems\":256,\"members\":$(members 1 2 3 4 5 6)}" |
		grep -q '"error"' && return 1
	for i in 1 2 3 4 5 6; do
		rank "$i" $((40000 + ID)) "$TESTBED_DP_IP" "$FLAT_TOKEN" \
			$((i - 1)) "$WORK/$name.$((i - 1))" --world 6 "$@"
		pids="$pids $WPID"
	done
	# shellcheck disable=SC2086
	wait_all "$name" $pids
}
flat flatf --type f32 --size 4M --iters 2 --seed 11
ok $? "flat, f32 4 MiB: exact on all six"
DF=$(same_digest flatf)
ok $? "flat f32: bit-identical on all six ($DF)"
flat flati --type i32 --size 4M --iters 2 --seed 12
ok $? "flat, i32 4 MiB: exact on all six"
DI=$(same_digest flati)
ok $? "flat i32: bit-identical on all six ($DI)"

# --- two leaves of three and a spine --------------------------------------
ID=7
M0=$(members 1 2 3) M1=$(members 4 5 6)
tree 7 3
ok $? "the tree: spine job 7 at dataplane 1, a leaf of three at 2 and at 3"
jq_py 'j["jobs"][0]["world"]' < <(dp_at 2 '{"cmd":"job_list"}') | grep -qx 3
ok $? "leaf 0 holds job 7 with its three members"
two_tier() {
	local name=$1 pids="" i dp
	shift
	for i in 1 2 3 4 5 6; do
		dp=$TESTBED_DP_IP_2
		[ "$i" -gt 3 ] && dp=$TESTBED_DP_IP_3
		rank "$i" $((40000 + ID)) "$dp" "$LEAF_TOKEN" $((i - 1)) \
			"$WORK/$name.$((i - 1))" --world 6 --tier 3 "$@"
		pids="$pids $WPID"
	done
	# shellcheck disable=SC2086
	wait_all "$name" $pids
}
two_tier tierf --type f32 --size 4M --iters 2 --seed 11
ok $? "two tiers, f32 4 MiB: exact on all six"
D=$(same_digest tierf)
ok $? "two tiers f32: bit-identical on all six ($D)"
[ -n "$D" ] && [ "$D" = "$DF" ]
ok $? "two tiers f32: bit-identical to the flat result"
tree 7 3 && two_tier tieri --type i32 --size 4M --iters 2 --seed 12
ok $? "two tiers, i32 4 MiB: exact on all six"
D=$(same_digest tieri)
[ -n "$D" ] && [ "$D" = "$DI" ]
ok $? "two tiers i32: bit-identical to the flat result ($D)"
for h in 2 3; do
	f=$(leaf_counter $h tier_forwarded) r=$(leaf_counter $h tier_results)
	echo "# leaf at dataplane $h: forwarded $f, results $r," \
		"re-forwarded $(leaf_counter $h tier_reforwarded)," \
		"broadcast $(leaf_counter $h upstream_bcast)"
	[ "$f" -gt 0 ] && [ "$r" -eq "$f" ] 2>/dev/null
	ok $? "leaf $h forwarded its rounds and took a result for each"
done
dp_at 1 '{"cmd":"job_list"}' |
	jq_py '[x["counters"]["rounds"] for x in j["jobs"] if x["id"] == 7][0] > 0' |
	grep -qx True
ok $? "the spine completed rounds of job 7"

# --- bad input from upstream ----------------------------------------------
before=$(leaf_counter 2 tier_refused)
ip netns exec "$TESTBED_NS_1" /usr/bin/python3 - "$TESTBED_DP_IP_2" <<'EOF'
import socket, struct, sys
# A SUM_RESULT of job 7 with a token that is not the spine's.
h = struct.pack(">HBBBBHQBBHIHhIQ", 0x7a11, 2, 2, 0, 2, 7,
	0x1234, 0xff, 0, 0, 0, 1, 0, 0xffffffff, 0) + b"\0" * 4
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for _ in range(3):
	s.sendto(h, (sys.argv[1], 47474))
EOF
sleep 0.3
after=$(leaf_counter 2 tier_refused)
[ $((after - before)) -eq 3 ] 2>/dev/null
ok $? "three results with a wrong token at a leaf: refused and counted ($before -> $after)"

# --- 1 % loss on a leaf's link, both ways ----------------------------------
# The members' retransmissions alone recover every hop: a forwarded
# round is sent upstream again, the spine answers from its stored result.
tree 7 3
re0=$(leaf_counter 2 tier_reforwarded)
# nftables on the bridge side of leaf 2's veth: its ingress is what leaf
# 2 sends, its egress what leaf 2 receives (as tools/testbed --at-bridge).
lossy="${TESTBED_DP_IF_2}b"
nft -f - 2>"$WORK/nft.err" <<EOF
table netdev tally_tier_$$ {
	chain out {
		type filter hook ingress device "$lossy" priority 0; policy accept;
		ip protocol udp numgen random mod 100 < 1 counter drop
	}
	chain in {
		type filter hook egress device "$lossy" priority 0; policy accept;
		ip protocol udp numgen random mod 100 < 1 counter drop
	}
}
EOF
rc=$?
[ $rc -eq 0 ] || sed 's/^/#   /' "$WORK/nft.err"
ok $rc "nftables: 1 % loss each way on leaf 2's link"
two_tier tierl --type f32 --size 4M --iters 2 --seed 11 --timeout-ms 20000
ok $? "two tiers at 1 % loss, f32 4 MiB: exact on all six"
D=$(same_digest tierl)
[ -n "$D" ] && [ "$D" = "$DF" ]
ok $? "two tiers at 1 % loss: bit-identical to the flat result ($D)"
echo "# dropped: $(nft list table netdev "tally_tier_$$" 2>/dev/null |
	grep -o 'packets [0-9]*' | tr '\n' ' ')"
nft delete table netdev "tally_tier_$$"
re1=$(leaf_counter 2 tier_reforwarded)
echo "# leaf 2 re-forwarded $((re1 - re0)) rounds at 1 % loss"
[ "$re1" -gt "$re0" ] 2>/dev/null
ok $? "leaf 2 sent rounds upstream again for its members' retransmissions"

# --- past 64 ranks: two leaves of 33 ---------------------------------------
ID=9
m0="" m1=""
for r in $(seq 0 32); do
	m0="$m0${m0:+,}{\"ip\":\"$TESTBED_IP_1\",\"port\":$((41000 + r))}"
	m1="$m1${m1:+,}{\"ip\":\"$TESTBED_IP_2\",\"port\":$((41000 + r))}"
done
M0="[$m0]" M1="[$m1]"
tree 9 33
ok $? "the tree of job 9: two leaves of 33 ranks"
pids=""
for g in $(seq 0 65); do
	if [ "$g" -lt 33 ]; then
		rank 1 $((41000 + g)) "$TESTBED_DP_IP_2" "$LEAF_TOKEN" "$g" \
			"$WORK/big.$g" --world 66 --tier 33 --type f32 \
			--size 256K --iters 2 --seed 13 --window 16 \
			--timeout-ms 20000
	else
		rank 2 $((41000 + g - 33)) "$TESTBED_DP_IP_3" "$LEAF_TOKEN" \
			"$g" "$WORK/big.$g" --world 66 --tier 33 --type f32 \
			--size 256K --iters 2 --seed 13 --window 16 \
			--timeout-ms 20000
	fi
	pids="$pids $WPID"
done
# shellcheck disable=SC2086
wait_all big $pids
ok $? "66 ranks (2 x 33), f32 256 KiB: exact on every rank"
D=$(same_digest big)
ok $? "66 ranks: bit-identical on every rank ($D)"

dp_at 2 '{"cmd":"job_del","id":7}' >/dev/null &&
	dp_at 3 '{"cmd":"job_del","id":7}' >/dev/null &&
	dp_at 1 '{"cmd":"job_del","id":7}' >/dev/null
ok $? "the tree's jobs are deleted from all three"
finish

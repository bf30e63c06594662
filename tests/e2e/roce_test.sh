#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# Issue 14, acceptance 1: tally-dp as a RoCEv2 peer. Four workers are UD
# queue pairs made of frames that scapy's RoCE layers build (BTH and its
# ICRC; DETH and ImmDt as raw bytes: tests/e2e/roce.py), sent over the
# testbed with 1% of frames lost each way (the workers retransmit). tally-dp
# runs two worker lcores, so two QPNs, and dispatches by destination QPN.
# Sums exact (i32 wide, and i8 narrow with odd lengths: PadCnt both
# ways), every result frame's ICRC as scapy computes it; then forgeries
# of a member's packet with a wrong ICRC, P_Key, Q_Key, destination QPN,
# source QPN, or from a host that is not a member: each dropped and
# counted under its own counter, and nothing else counted.
TESTBED_OPTS="-n 5 --loss-up 1 --loss-down 1"
. "$(dirname "$0")/preamble.sh"
TOKEN=0123456789abcdef
ROCE=$TALLY_SRC/tests/e2e/roce.py
ID=14
QPN0=$((0x500))

DP_LCORES="--lcores 0@0,1@1,2@1" DP_VDEV_ARGS=",qpairs=2" dp_start
ok $? "tally-dp starts with two worker lcores"
ping=$(dp_admin '{"cmd":"ping"}')
echo "# $ping"
qpns=$(echo "$ping" | /usr/bin/python3 -c '
import json, sys
r = json.load(sys.stdin)["roce"]
assert r["pkey"] == 65535 and r["pmtu"] == 1024, r
print(",".join(str(q) for q in r["qpns"]))')
[ "$qpns" = "256,257" ]
ok $? "ping: QPNs 0x100 and 0x101, P_Key 0xffff, path MTU 1024 ($qpns)"
grep -q "ICRC by \(vpclmul16\|clmul4\|rte_net_crc\)" "$WORK/dp.log"
ok $? "the start-up log names the CRC path: $(grep -o 'ICRC by.*' "$WORK/dp.log")"

members=""
for r in 0 1 2 3; do
	eval "ip=\$TESTBED_IP_$((r + 1))"
	members="$members${members:+,}{\"ip\":\"$ip\",\"qpn\":$((QPN0 + r))}"
done
dp_admin "{\"cmd\":\"job_add\",\"id\":$ID,\"token\":\"$TOKEN\",\"world\":4,\"window\":8,\"narrow\":true,\"members\":[$members]}" >/dev/null
ok $? "a job of four RoCEv2 members added"
job=$(dp_admin '{"cmd":"job_list"}' | /usr/bin/python3 -c '
import json, sys
j = json.load(sys.stdin)["jobs"][0]
print(j["transport"], hex(j["qkey"]), j["max_elems"], j["members"][1]["qpn"])')
[ "$job" = "roce 0x7a11000e 246 1281" ]
ok $? "listed: transport roce, default Q_Key, max_elems from the path MTU ($job)"
QKEY=$((0x7a110000 + ID))

# roce_run NS-INDEX RANK OUT ARGS...: roce.py in worker NS-INDEX.
roce_run() {
	local i=$1 rank=$2 out=$3
	shift 3
	eval "local ns=\$TESTBED_NS_$((i + 1)) ip=\$TESTBED_IP_$((i + 1))"
	TALLY_TOKEN=$TOKEN ip netns exec "$ns" "$ROCE" "$@" eth0 --ip "$ip" \
		--dp "$TESTBED_DP_IP" --qpns "$qpns" --job $ID --rank "$rank" \
		--qkey $QKEY >"$out" 2>&1
}

pids=""
for r in 0 1 2 3; do
	roce_run "$r" "$r" "$WORK/w.$r" worker --qpn $((QPN0 + r)) --seed 3 ${ROCE_ARGS:-} &
	pids="$pids $!"
done
rc=0
for p in $pids; do
	wait "$p" || rc=1
done
sed 's/^/#   /' "$WORK"/w.*
[ $rc -eq 0 ] || dp_admin '{"cmd":"stats"}' | sed 's/^/#   /'
ok $rc "four RoCEv2 workers: i32 and i8 sums exact, every result frame's ICRC verified by scapy"
retx=$(cat "$WORK"/w.* | sed -n 's/.*retransmits \([0-9]*\).*/\1/p' |
	awk '{s += $1} END {print s + 0}')
served=$(dp_counter retransmissions_served)
echo "# worker retransmissions $retx, served from stored results $served"
# What the testbed's nftables dropped on the way up and down.
lost=$(for i in 1 2 3 4; do
	eval "ns=\$TESTBED_NS_$i"
	ip netns exec "$ns" nft list table netdev "$TESTBED_PREFIX"
done | awk '/chain up/ { c = "up" } /chain down/ { c = "down" }
	/counter packets/ { for (i = 1; i < NF; i++) if ($i == "packets")
		n[c] += $(i + 1) }
	END { print n["up"] + 0, n["down"] + 0 }')
echo "# frames dropped by the testbed (up, down): $lost"
[ "$retx" -gt 0 ] && [ "${lost% *}" -gt 0 ] && [ "${lost#* }" -gt 0 ]
ok $? "frames lost both ways ($lost), recovered by retransmission"
imm=$(cat "$WORK"/w.* | sed -n 's/.*imm \([0-9]*\).*/\1/p' | head -1)
[ "${imm:-0}" -gt 0 ]
ok $? "contributions with an immediate were taken ($imm a worker)"

# roce_drops: tally-dp's drop_roce_* counters as "name=value ...".
roce_drops() {
	dp_admin '{"cmd":"stats"}' | /usr/bin/python3 -c '
import json, sys
t = json.load(sys.stdin)["total"]
print(" ".join("%s=%d" % (k, v) for k, v in sorted(t.items())
	if k.startswith("drop_roce_")))'
}

# forged KIND NS-INDEX [roce.py options]: 20 forgeries; the drop_roce_
# counter named by COUNTER (KIND by default) must grow by 15..20 (1%
# loss up) and no other drop_roce_ counter at all.
forged() {
	local kind=$1 i=$2 before after
	shift 2
	before=$(roce_drops)
	roce_run "$i" 0 "$WORK/forge.$kind" forge --kind "$kind" --count 20 "$@"
	sleep 0.5
	after=$(roce_drops)
	/usr/bin/python3 - "$before" "$after" "${COUNTER:-$kind}" <<'PY'
import sys
b = dict(kv.split("=") for kv in sys.argv[1].split())
a = dict(kv.split("=") for kv in sys.argv[2].split())
want = "drop_roce_" + sys.argv[3]
d = {k: int(a[k]) - int(b[k]) for k in a}
print("# %s" % " ".join("%s+%d" % (k, v) for k, v in d.items() if v))
sys.exit(0 if 15 <= d[want] <= 20 and
	all(v == 0 for k, v in d.items() if k != want) else 1)
PY
}

forged icrc 0 --qpn $QPN0
ok $? "a wrong ICRC: dropped, counted as drop_roce_icrc"
forged pkey 0 --qpn $QPN0
ok $? "a P_Key of another partition: dropped, counted as drop_roce_pkey"
forged qkey 0 --qpn $QPN0
ok $? "another Q_Key: dropped, counted as drop_roce_qkey"
forged qpn 0 --qpn $QPN0
ok $? "a destination QPN tally-dp does not have: dropped, drop_roce_qpn"
forged member 0 --qpn $QPN0
ok $? "rank 0's IP with another source QPN: dropped, drop_roce_member"
COUNTER=member forged ip 4 --qpn $QPN0
ok $? "rank 0's QPN from a host that is not a member: dropped, drop_roce_member"
drops=$(dp_admin '{"cmd":"job_list"}' | /usr/bin/python3 -c '
import json, sys
print(json.load(sys.stdin)["jobs"][0]["counters"]["drops"])')
[ "$drops" -ge 45 ]
ok $? "the job's row counts the Q_Key and member refusals ($drops)"
finish

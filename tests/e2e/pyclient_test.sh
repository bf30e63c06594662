#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# Issue 11, item 16: a client written from docs/protocol.md and
# docs/control.md alone (tests/client/pyclient.py, Python) joins jobs
# through tallyd's TLS rendezvous beside libtally's workers (tally-bench
# allreduce --url) and every rank gets the same bits: i32 sums equal the
# exact wrapping sums, f32 (codec fixp) sums equal the fixed-point
# reference, over several calls (--vary: new tensors each call, with
# barriers between), sizes 0 (nothing sent), 1, odd, and 1,000,003
# elements (many windows). World 4 with two Python ranks on a tally-dp of
# one port; world 3 with one Python rank, an odd max_elems and a small
# window on a tally-dp of two ports (slot s to port 47474 + s % 2); an
# authenticated job (AES-GMAC tags both ways). PYCLIENT_LOSS=P runs it
# all with P % loss each way, so the client's retransmission works.
LOSS=${PYCLIENT_LOSS:-0}
TESTBED_OPTS="-n 4 --host --loss-up $LOSS --loss-down $LOSS"
. "$(dirname "$0")/preamble.sh"
PYBENCH=$TALLY_SRC/tests/client/pybench.py
echo "# loss $LOSS % each way"

# py_rank NS-INDEX JOB TOKEN RANK WORLD OUT [pybench options]: one rank of
# the Python client, in worker NS-INDEX's namespace, the token in a file,
# tallyd's certificate checked against the test CA. Sets WPID.
py_rank() {
	local i=$1 job=$2 token=$3 rank=$4 world=$5 out=$6 tf
	shift 6
	eval "local ns=\$TESTBED_NS_$((i + 1))"
	tf=$(token_file "$token")
	ip netns exec "$ns" /usr/bin/python3 "$PYBENCH" \
		--url "tally://$TESTBED_HOST_IP:$TALLYD_RDV_PORT/$job" \
		--ca "$TALLY_CA" --token-file "$tf" \
		--rank "$rank" --world "$world" "$@" >"$out" 2>&1 &
	WPID=$!
}

# mixed NAME JOB TOKEN WORLD PYRANKS [options for both]: one membership
# of JOB, the ranks in PYRANKS (e.g. "1 3") the Python client, the others
# tally-bench; rank r in worker namespace r. Two TAP lines: every rank's
# check passed (its result equals the reference), and every rank printed
# the same digest.
mixed() {
	local name=$1 job=$2 token=$3 world=$4 py=" $5 " pids="" r p rc=0
	local same=0 d0 d
	shift 5
	for r in $(seq 0 $((world - 1))); do
		if [ "${py#* $r }" != "$py" ]; then
			py_rank "$r" "$job" "$token" "$r" "$world" \
				"$WORK/$name.$r" "$@"
		else
			worker_url "$r" "$job" "$token" "$r" "$world" \
				"$WORK/$name.$r" --ca "$TALLY_CA" "$@"
		fi
		pids="$pids $WPID"
	done
	for p in $pids; do
		wait "$p" || rc=1
	done
	ok $rc "$name: every rank's result equals the reference (python:$py)"
	[ $rc -eq 0 ] || sed 's/^/#   /' "$WORK/$name".* "$WORK/tallyd.log"
	d0=$(digest "$WORK/$name.0")
	for r in $(seq 1 $((world - 1))); do
		d=$(digest "$WORK/$name.$r")
		[ -n "$d0" ] && [ "$d" = "$d0" ] || same=1
	done
	ok $same "$name: bit-identical on every rank ($d0)"
	for r in $(seq 0 $((world - 1))); do
		echo "# $name.$r: $(grep -h '^stats:\|^check:' "$WORK/$name.$r" |
			tr '\n' ' ')"
	done
}

# retx NAME RANK: the Python rank's retransmissions in run NAME.
retx() {
	sed -n 's/^stats: .*retransmits \([0-9]*\),.*/\1/p' "$WORK/$1.$2"
}

TALLY_CA=$WORK/tls/ca.crt
ARGS=(--iters 3 --vary --timeout-ms 10000)

# --- world 4, one port, two Python ranks ---------------------------------
dp_start
ok $? "tally-dp starts (one worker lcore, one port)"
tallyd_start --set join_timeout_s=30
ok $? "tallyd starts"
tctl --json job create w4 --world 4 >"$WORK/w4.json"
ok $? "job w4: world 4, window 64, max_elems 256"
T4=$(jq_py 'j["token"]' <"$WORK/w4.json")

mixed w4_i32_empty w4 "$T4" 4 "1 3" --type i32 --size 0 --seed 11 "${ARGS[@]}"
mixed w4_i32_one w4 "$T4" 4 "1 3" --type i32 --size 4 --seed 12 "${ARGS[@]}"
mixed w4_i32_odd w4 "$T4" 4 "1 3" --type i32 --size $((4 * 1001)) --seed 13 "${ARGS[@]}"
mixed w4_i32_big w4 "$T4" 4 "1 3" --type i32 --size $((4 * 1000003)) --seed 14 "${ARGS[@]}"
mixed w4_f32_empty w4 "$T4" 4 "1 3" --type f32 --size 0 --seed 15 "${ARGS[@]}"
mixed w4_f32_one w4 "$T4" 4 "0 2" --type f32 --size 4 --seed 16 "${ARGS[@]}"
mixed w4_f32_odd w4 "$T4" 4 "1 3" --type f32 --size $((4 * 12345)) --seed 17 "${ARGS[@]}"
mixed w4_f32_big w4 "$T4" 4 "1 3" --type f32 --size $((4 * 1000003)) --seed 18 "${ARGS[@]}"
[ "$LOSS" -eq 0 ] || { r=$(retx w4_f32_big 1); echo "# python rank 1 retransmitted $r"; [ "${r:-0}" -gt 0 ]; ok $? "under loss the Python client retransmitted ($r)"; }

# --- world 3, two ports, one Python rank, max_elems 100, window 8 -------
tallyd_stop
dp_stop
DP_LCORES="--lcores 0@0,1@1,2@1" DP_VDEV_ARGS=",qpairs=2" dp_start
ok $? "tally-dp restarts with two worker lcores (ports 47474, 47475)"
tallyd_start --set join_timeout_s=30
ok $? "tallyd restarts"
tctl --json job create w3 --world 3 --window 8 --max-elems 100 >"$WORK/w3.json"
ok $? "job w3: world 3, window 8, max_elems 100"
T3=$(jq_py 'j["token"]' <"$WORK/w3.json")
mixed w3_f32_odd w3 "$T3" 3 "0" --type f32 --size $((4 * 777)) --seed 21 "${ARGS[@]}"
mixed w3_i32_big w3 "$T3" 3 "2" --type i32 --size $((4 * 1000003)) --seed 22 "${ARGS[@]}"
mixed w3_f32_big w3 "$T3" 3 "1" --type f32 --size $((4 * 1000003)) --seed 23 "${ARGS[@]}"
grep -q "ports 47474/2" "$WORK/w3_f32_big.1"
ok $? "the Python client was given two ports"
[ "$(dp_counter misrouted)" -eq 0 ] && [ "$(dp_counter drop_net_port)" -eq 0 ]
ok $? "no packet went to another lcore's port (misrouted, drop_net_port 0)"

# --- an authenticated job -------------------------------------------------
tctl --json job create wa --world 2 --auth >"$WORK/wa.json"
ok $? "job wa: world 2, authenticated"
TA=$(jq_py 'j["token"]' <"$WORK/wa.json")
before=$(dp_counter drop_bad_auth)
mixed wa_i32 wa "$TA" 2 "0" --type i32 --size $((4 * 4099)) --seed 31 "${ARGS[@]}"
mixed wa_f32 wa "$TA" 2 "1" --type f32 --size $((4 * 100003)) --seed 32 "${ARGS[@]}"
grep -q "auth on" "$WORK/wa_f32.1"
ok $? "the Python client holds the job's keys (auth on)"
[ "$(dp_counter drop_bad_auth)" -eq "$before" ]
ok $? "every tag passed at tally-dp (drop_bad_auth unchanged)"

# A refusal reaches the client as a NACK (its rank, its round, in the
# authenticated job with the NACK key's tag) and fails the call at once
# with the status, instead of a timeout: packets of more elements than
# the job's max_elems are bad_length.
tctl --json job create wn --world 1 --auth >"$WORK/wn.json"
TN=$(jq_py 'j["token"]' <"$WORK/wn.json")
nacks=$(dp_counter nacks)
py_rank 0 wn "$TN" 0 1 "$WORK/wn.0" --type i32 --size 4000 --elems 300 \
	--iters 1 --timeout-ms 30000
wait "$WPID"
rc=$?
[ $rc -eq 3 ] && grep -q "refused slot [0-9]* round [01]: bad_length" "$WORK/wn.0" &&
	grep -q "nacks 1, bad_tags 0" "$WORK/wn.0"
rc=$?
ok $rc "a NACK fails the Python client's call with its status (bad_length, exit 3)"
[ $rc -eq 0 ] || sed 's/^/#   /' "$WORK/wn.0"
[ "$(dp_counter nacks)" -gt "$nacks" ]
ok $? "tally-dp counted the NACK"

# --- results to a multicast group -----------------------------------------
tctl --json job create wg --world 3 --group 239.77.0.9:41000 >"$WORK/wg.json"
ok $? "job wg: world 3, results to 239.77.0.9:41000"
TG=$(jq_py 'j["token"]' <"$WORK/wg.json")
mixed wg_f32 wg "$TG" 3 "0 2" --type f32 --size $((4 * 300007)) --seed 41 "${ARGS[@]}"
grep -q "group 239.77.0.9:41000" "$WORK/wg_f32.0"
ok $? "the Python client joined the group"
finish

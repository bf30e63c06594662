#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# Issue 12, acceptance 1: PyTorch DDP trains through tally. tally-dp and
# tallyd (TLS rendezvous) on a testbed, jobs made with tallyctl, and four
# ranks, one a worker namespace, running python/examples/ddp_digits.py
# (the script docs/training.md walks through) for two epochs: a gloo
# group for DDP's start, every gradient bucket through tally.torch's hook.
# Per run: every rank exits 0, the loss falls from epoch 1 to epoch 2,
# the test accuracy is printed, every rank's hook reduced its buckets
# with no error, and the traffic went through tally-dp (its counters and
# the job's grow by at least what the ranks sent). Runs: the exact
# codec (fixp) with two seeds, q8 with error feedback (a tally.State a
# bucket), fixp with the process group itself tally's (the backend
# "tally", no hook). A rank with a broken token exits 1 with tallyd's EACCES, no
# hang. Afterwards no job is left at tally-dp and no process in the
# namespaces (tools/testbed removes the namespaces themselves).
TESTBED_OPTS="-n 4 --host"
. "$(dirname "$0")/preamble.sh"
EXAMPLE=$TALLY_SRC/python/examples/ddp_digits.py
PYPATH=$TALLY_BUILD/python
EPOCHS=2
RANK_TIMEOUT=${PYTHON_TEST_TIMEOUT:-240}

if ! /usr/bin/python3 -c 'import torch, sklearn, numpy' 2>/dev/null ||
	[ ! -d "$PYPATH/tally" ]; then
	echo "1..0 # SKIP needs python3-torch, python3-sklearn and the tally package (-Dpython)"
	exit 0
fi

# Killed (meson's timeout, ^C): the ranks, tallyd and tally-dp go too.
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

# ranks NAME JOB TOKENFILE SEED [example options]: the example's four
# ranks of JOB in worker namespaces 0..3, rank r in namespace r, the gloo
# group's rendezvous at rank 0's address and its pairs on eth0 (not the
# namespace's loopback, where the host name resolves); each under
# `timeout`, so a hang fails the run instead of the test. Output
# $WORK/NAME.r; returns 0 when every rank exited 0.
ranks() {
	local name=$1 job=$2 tf=$3 seed=$4 pids="" r p rc=0 ns
	shift 4
	for r in 0 1 2 3; do
		eval "ns=\$TESTBED_NS_$((r + 1))"
		ip netns exec "$ns" env PYTHONPATH="$PYPATH" \
			PYTHONDONTWRITEBYTECODE=1 TALLY_TOKEN_FILE="$tf" \
			TALLY_CA="$TALLY_CA" RANK=$r WORLD_SIZE=4 \
			MASTER_ADDR="$TESTBED_IP_1" MASTER_PORT=29500 \
			GLOO_SOCKET_IFNAME=eth0 OMP_NUM_THREADS=1 timeout -k 5 "$RANK_TIMEOUT" \
			/usr/bin/python3 "$EXAMPLE" \
			"tally://$TESTBED_HOST_IP:$TALLYD_RDV_PORT/$job" \
			--epochs "$EPOCHS" --seed "$seed" "$@" \
			>"$WORK/$name.$r" 2>&1 &
		pids="$pids $!"
	done
	RANK_PIDS=$pids
	for p in $pids; do
		wait "$p" || rc=1
	done
	RANK_PIDS=""
	return $rc
}

# loss NAME EPOCH / accuracy NAME EPOCH: what rank 0 printed.
loss() {
	sed -n "s/^epoch $2: loss \([0-9.]*\), test accuracy .*/\1/p" "$WORK/$1.0"
}
accuracy() {
	sed -n "s/^epoch $2: loss .*, test accuracy \([0-9.]*\)$/\1/p" "$WORK/$1.0"
}

# rank_field NAME R FIELD: a number from rank R's closing line "rank R:
# B buckets, P packets, X retransmits, E errors".
rank_field() {
	sed -n "s/^rank $2: \([0-9]*\) buckets, \([0-9]*\) packets, \([0-9]*\) retransmits, \([0-9]*\) errors$/\\$3/p" \
		"$WORK/$1.$2"
}

# train NAME JOB CODEC SEED [example options]: creates JOB with CODEC,
# runs the ranks, and checks what the header says; deletes the job
# afterwards.
train() {
	local name=$1 job=$2 codec=$3 seed=$4 tok tf rc l1 l2 a2 r
	local rx0 rx1 sent=0 bad=0 t0 t1 rounds
	shift 4
	tctl --json job create "$job" --world 4 --codec "$codec" \
		>"$WORK/$job.json"
	ok $? "$name: tallyctl job create $job --codec $codec"
	tok=$(jq_py 'j["token"]' <"$WORK/$job.json")
	tf=$(token_file "$tok")
	rx0=$(dp_counter agg_rx)
	t0=$(date +%s.%N)
	ranks "$name" "$job" "$tf" "$seed" "$@"
	rc=$?
	t1=$(date +%s.%N)
	local via="the hook"
	[ $# -eq 0 ] || via="$* (no hook)"
	ok $rc "$name: 4 ranks train $EPOCHS epochs through $via (seed $seed) and exit 0"
	[ $rc -eq 0 ] || sed 's/^/#   /' "$WORK/$name".* "$WORK/tallyd.log"
	l1=$(loss "$name" 1)
	l2=$(loss "$name" "$EPOCHS")
	a2=$(accuracy "$name" "$EPOCHS")
	echo "# $name: loss $l1 -> $l2, test accuracy $a2, $(awk \
		"BEGIN { printf \"%.1f\", $t1 - $t0 }") s for $EPOCHS epochs (python start included)"
	grep "^epoch " "$WORK/$name.0" | sed "s/^/# $name: /"
	[ -n "$l1" ] && [ -n "$l2" ] && awk "BEGIN { exit !($l2 < $l1) }"
	ok $? "$name: the loss decreases ($l1 -> $l2)"
	[ -n "$a2" ] && awk "BEGIN { exit !($a2 > 0.5) }"
	ok $? "$name: the final test accuracy is printed and above chance ($a2)"
	grep -q "^tally job .*: codec $codec" "$WORK/$name.0"
	ok $? "$name: the ranks joined with the job's codec ($codec)"
	for r in 0 1 2 3; do
		local b p e
		b=$(rank_field "$name" $r 1)
		p=$(rank_field "$name" $r 2)
		e=$(rank_field "$name" $r 4)
		echo "# $name.$r: $b buckets, $p packets, $e errors"
		[ -n "$b" ] && [ "$b" -gt 0 ] && [ "$p" -gt 0 ] &&
			[ "$e" -eq 0 ] || bad=1
		sent=$((sent + ${p:-0}))
	done
	ok $bad "$name: every rank reduced its buckets through tally, no error"
	rx1=$(dp_counter agg_rx)
	echo "# $name: tally-dp agg_rx $rx0 -> $rx1, the ranks sent $sent packets"
	[ "$sent" -gt 0 ] && [ $((rx1 - rx0)) -ge "$sent" ]
	ok $? "$name: tally-dp received every packet the ranks sent"
	rounds=$(tctl --json job show "$job" | jq_py 'j["job"]["counters"]["rounds"]')
	[ -n "$rounds" ] && [ "$rounds" -gt 0 ]
	ok $? "$name: tallyctl job show counts the job's rounds ($rounds)"
	tctl job delete "$job" >/dev/null
	ok $? "$name: tallyctl job delete $job"
}

dp_start
ok $? "tally-dp starts"
tallyd_start --set join_timeout_s=30
ok $? "tallyd starts (TLS rendezvous)"

train fixp1 digits fixp 1
train fixp2 digits2 fixp 2
train q8ef digits3 q8,ef=1 3
# The one-word change: init_process_group("tally"), no hook (the job
# from the URL; the token from TALLY_TOKEN_FILE as above).
train backend digits4 fixp 4 --backend tally

# A broken token: tallyd refuses the join (EACCES) and every rank exits 1
# with its sentence, at once rather than at a timeout.
tctl --json job create broken --world 4 >"$WORK/broken.json"
good=$(jq_py 'j["token"]' <"$WORK/broken.json")
bad_tf=$(token_file "$(printf '%s' "$good" | tr '0-9a-f' '1-9a-f0')")
t0=$(date +%s)
ranks broken broken "$bad_tf" 1
rc=$?
t1=$(date +%s)
n=$(grep -l "error: Error: \[Errno 13\]" "$WORK"/broken.* | wc -l)
[ $rc -ne 0 ] && [ "$n" -eq 4 ] && [ $((t1 - t0)) -lt 60 ]
rc=$?
ok $rc "a broken token: every rank exits 1 with EACCES ($n of 4, $((t1 - t0)) s)"
[ $rc -eq 0 ] || sed 's/^/#   /' "$WORK"/broken.*
grep -h "error:" "$WORK/broken.0" | head -1 | sed 's/^/# /'
tctl job delete broken >/dev/null

# Nothing left behind: no job at tally-dp, no process in the namespaces.
sleep 0.5
[ "$(dp_admin '{"cmd":"job_list"}' | jq_py 'len(j["jobs"])')" = 0 ]
ok $? "no job left at tally-dp"
left=0
for i in 1 2 3 4; do
	eval "ns=\$TESTBED_NS_$i"
	[ -z "$(ip netns pids "$ns")" ] || left=1
done
ok $left "no process left in the worker namespaces"
finish

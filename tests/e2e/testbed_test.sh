#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# tests/e2e/testbed_test.sh: checks tools/testbed for real (root only):
# topology, addresses, MTU, tbf and nftables rules, two testbeds side by
# side, down, and that `run` tears down after a failing command and after
# SIGINT/SIGTERM. Prints TAP. Skipped (exit 77, or $TESTBED_TEST_SKIP_RC:
# meson's TAP reader wants 0 with "1..0 # SKIP") without root or netns.
set -euo pipefail

TALLY_SRC=${TALLY_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
TB=$TALLY_SRC/tools/testbed
P1=tbt$$
P2=tbu$$
P3=tbv$$
P4=tbx$$
P5=tby$$
P6=tbz$$
ALL="$P1 $P2 $P3 $P4 $P5 $P6"
WORK=$(mktemp -d /tmp/tally-testbed-test.XXXXXX)
BG=
ntap=0
nfail=0
PLAN=31

# skip WHY: reports the whole test as skipped.
skip() {
	echo "1..0 # SKIP $*"
	rm -rf "$WORK"
	exit "${TESTBED_TEST_SKIP_RC:-77}"
}

# cleanup: ends a background `run` still going and takes every testbed of
# this test down, whatever happened.
cleanup() {
	local p
	if [ -n "$BG" ]; then
		kill -TERM "$BG" 2>/dev/null || true
		wait "$BG" 2>/dev/null || true
	fi
	for p in $ALL; do
		"$TB" down --prefix "$p" >/dev/null 2>&1 || true
	done
	rm -rf "$WORK"
}

# check NAME CMD...: one TAP line, ok when CMD succeeds; CMD's output
# goes to the TAP stream as comments when it fails.
check() {
	local name=$1 rc=0
	shift
	"$@" >"$WORK/out" 2>&1 || rc=$?
	ntap=$((ntap + 1))
	if [ "$rc" -eq 0 ]; then
		echo "ok $ntap - $name"
	else
		echo "not ok $ntap - $name"
		sed 's/^/# /' "$WORK/out"
		nfail=$((nfail + 1))
	fi
}

# leftovers P: prints every namespace, link, nftables table and env file
# with prefix P; fails when there is any.
leftovers() {
	local found=0
	ip netns list | grep -E "^$1-" && found=1
	ip -o link show | grep -E "^[0-9]+: $1-" && found=1
	nft list tables 2>/dev/null | grep -E " $1\$" && found=1
	ls "/run/tally-testbed-$1.env" 2>/dev/null && found=1
	[ "$found" -eq 0 ]
}

# pings NS ADDR: one ping from a namespace, 2 s at most.
pings() {
	ip netns exec "$1" ping -n -q -c 1 -W 2 "$2"
}

# tbf_everywhere P N: tbf at the root of each worker's eth0 (upstream) and
# of its bridge port (downstream).
tbf_everywhere() {
	local i
	for i in $(seq "$2"); do
		tc -n "$1-w$i" qdisc show dev eth0 root | grep -w tbf || return 1
		tc qdisc show dev "$1-w$i" root | grep -w tbf || return 1
	done
}

# loss_rules P: the numgen rules of --loss-up 7 --loss-down 3 in worker 1.
loss_rules() {
	local r
	r=$(ip netns exec "$1-w1" nft list ruleset)
	echo "$r"
	grep -q "ip daddr 10.77.0.1 .*numgen random mod 100 < 7 .*drop" <<<"$r" &&
		grep -q "ip saddr 10.77.0.1 .*numgen random mod 100 < 3 .*drop" <<<"$r"
}

# dp_port P: the dataplane port exists in the root namespace, is up and
# has no IPv4 address; its peer is on the bridge.
dp_port() {
	ip -o link show dev "$1-dp" | grep -q 'state UP' || return 1
	[ -z "$(ip -4 -o addr show dev "$1-dp")" ] || return 1
	ip -o link show dev "$1-dpb" | grep -q "master $1-br"
}

# mtus P N M: every veth of the testbed has MTU M.
mtus() {
	local i
	for i in "$1-dp" "$1-dpb" $(seq -f "$1-w%g" "$2"); do
		ip -o link show dev "$i" | grep -q " mtu $3 " || { echo "$i"; return 1; }
	done
	for i in $(seq "$2"); do
		ip -n "$1-w$i" -o link show dev eth0 | grep -q " mtu $3 " ||
			{ echo "$1-w$i eth0"; return 1; }
	done
}

# env_ok P N: the env file holds what the topology is.
env_ok() {
	(
		# shellcheck disable=SC1090
		. "/run/tally-testbed-$1.env"
		cat "/run/tally-testbed-$1.env"
		[ "$TESTBED_PREFIX" = "$1" ] && [ "$TESTBED_N" = "$2" ] &&
			[ "$TESTBED_DP_IF" = "$1-dp" ] && [ "$TESTBED_DP_IP" = 10.77.0.1 ] &&
			[ "$TESTBED_NS_1" = "$1-w1" ] && [ "$TESTBED_IP_1" = 10.77.0.12 ] &&
			[ "$TESTBED_NS_3" = "$1-w3" ] && [ "$TESTBED_IP_3" = 10.77.0.14 ] &&
			[ "$TESTBED_MTU" = 9000 ] && [ "$TESTBED_RATE" = 200mbit ]
	)
}

# brnf_zero: br_netfilter (where the kernel has it) does not pass bridged
# frames to iptables while a testbed is up.
brnf_zero() {
	local k
	[ -d /proc/sys/net/bridge ] || return 0
	for k in iptables ip6tables arptables; do
		grep -qx 0 "/proc/sys/net/bridge/bridge-nf-call-$k" || return 1
	done
}

# exits_with WANT CMD...: CMD exits with status WANT.
exits_with() {
	local want=$1 rc=0
	shift
	"$@" || rc=$?
	echo "exit status $rc, want $want"
	[ "$rc" -eq "$want" ]
}

# signal_run SIG WANT P: `run -- sleep 30` in the background, SIG once its
# env file exists; it must exit WANT within 10 s and leave nothing.
signal_run() {
	local sig=$1 want=$2 p=$3 rc=0 t0 i
	# A background job of a script starts with SIGINT ignored, and bash
	# cannot trap a signal ignored on entry: give it back its default.
	env --default-signal=INT "$TB" run -n 2 --prefix "$p" -- sleep 30 &
	BG=$!
	for i in $(seq 100); do
		[ ! -e "/run/tally-testbed-$p.env" ] || break
		sleep 0.1
	done
	[ -e "/run/tally-testbed-$p.env" ] || { echo "env file never came"; return 1; }
	t0=$(date +%s)
	kill -s "$sig" "$BG"
	wait "$BG" || rc=$?
	BG=
	echo "exit status $rc, want $want, $(($(date +%s) - t0)) s"
	[ "$rc" -eq "$want" ] && [ $(($(date +%s) - t0)) -lt 10 ] && leftovers "$p"
}

# down_twice P: down, and down again when nothing is there, both exit 0.
down_twice() {
	"$TB" down --prefix "$1" && "$TB" down --prefix "$1" && leftovers "$1"
}

# host_holder: prints the links holding 10.77.0.254 (--host's address).
host_holder() {
	ip -o -4 addr show to 10.77.0.254/32 | awk '{ print $2 }'
}

# stale_host P Q: a --host testbed P whose owner has exited (what a killed
# test or session leaves) is removed, with a note, by the next --host up
# (Q), which then holds the address alone.
stale_host() {
	local p=$1 q=$2 err=$WORK/stale.err
	# up's owner is its caller: this short-lived shell.
	bash -c "'$TB' up -n 1 --host --prefix '$p' >/dev/null"
	[ "$(host_holder)" = "$p-br" ] || { echo "no leftover to test with"; return 1; }
	"$TB" up -n 1 --host --prefix "$q" >/dev/null 2>"$err" || { cat "$err"; return 1; }
	cat "$err"
	grep -q "removing leftover testbed '$p'" "$err" && leftovers "$p" &&
		[ "$(host_holder)" = "$q-br" ]
}

# legacy_host P Q: the same for a leftover whose env file names no owner
# (made before owners were recorded).
legacy_host() {
	local p=$1 q=$2 err=$WORK/legacy.err
	"$TB" down --prefix "$q" && "$TB" up -n 1 --host --prefix "$p" >/dev/null &&
		sed -i '/^TESTBED_OWNER/d' "/run/tally-testbed-$p.env" || return 1
	if ! "$TB" up -n 1 --host --prefix "$q" >/dev/null 2>"$err"; then
		cat "$err"
		return 1
	fi
	cat "$err"
	grep -q "removing leftover testbed '$p'" "$err" && leftovers "$p" &&
		[ "$(host_holder)" = "$q-br" ]
}

# live_host P Q: while P's owner (this test) runs, a second --host up (Q)
# fails with a sentence naming P, leaves P as it was and nothing of Q.
live_host() {
	local p=$1 q=$2 err=$WORK/live.err rc=0
	"$TB" up -n 1 --host --prefix "$q" >/dev/null 2>"$err" || rc=$?
	cat "$err"
	[ "$rc" -eq 1 ] && grep -q "held by testbed '$p'" "$err" &&
		leftovers "$q" && [ "$(host_holder)" = "$p-br" ] && pings "$p-w1" 10.77.0.254
}

# none_left P Q: P down, and nothing left of P and Q.
none_left() {
	"$TB" down --prefix "$1" && leftovers "$1" && leftovers "$2"
}

# not_testbed_host P: an address on a link that is not a testbed's bridge
# is never removed: up --host refuses, naming the link.
not_testbed_host() {
	local p=$1 err=$WORK/other.err rc=0 dummy=tbdummy$$
	# A veth (this kernel may have no dummy links).
	ip link add "$dummy" type veth peer name "${dummy}p" &&
		ip addr add 10.77.0.254/24 dev "$dummy" || return 1
	"$TB" up -n 1 --host --prefix "$p" >/dev/null 2>"$err" || rc=$?
	ip link del "$dummy"
	cat "$err"
	[ "$rc" -eq 1 ] && grep -q "already on $dummy, which is not a testbed" "$err" &&
		leftovers "$p"
}

# run_false P: `run -- false` exits 1 and leaves nothing.
run_false() {
	exits_with 1 "$TB" run -n 1 --prefix "$1" -- false && leftovers "$1"
}

# run_env P: `run` exports TESTBED_* to CMD and exits with CMD's status.
run_env() {
	# shellcheck disable=SC2016
	exits_with 7 "$TB" run -n 2 --prefix "$1" -- sh -c '
		[ "$TESTBED_N" = 2 ] && [ -n "$TESTBED_ENV" ] &&
		ip netns exec "$TESTBED_NS_2" ping -n -q -c 1 -W 2 "$TESTBED_IP_1" &&
		exit 7'
}

# up_fails_clean P: an up that fails half-way (at worker 1's address, made
# to fail) or at its very end (the env file cannot be written) removes what
# it made.
up_fails_clean() {
	local rc=0
	mkdir -p "$WORK/bin"
	# An `ip` that fails once the bridge, the dataplane pair and the
	# first namespace exist: at the first worker's address.
	printf '#!/bin/sh\ncase "$*" in *"addr add"*) exit 1;; esac\nexec %s "$@"\n' \
		"$(command -v ip)" >"$WORK/bin/ip"
	chmod +x "$WORK/bin/ip"
	PATH="$WORK/bin:$PATH" "$TB" up -n 2 --prefix "$1" && { echo "up did not fail"; rc=1; }
	leftovers "$1" || rc=1
	mkdir "/run/tally-testbed-$1.env.tmp"
	"$TB" up -n 2 --prefix "$1" && { echo "up did not fail"; rc=1; }
	rmdir "/run/tally-testbed-$1.env.tmp"
	leftovers "$1" || rc=1
	return "$rc"
}

# bad_flags: a bad flag prints the usage on stderr and exits 2.
bad_flags() {
	local rc=0
	"$TB" up --bogus 2>"$WORK/err" || rc=$?
	cat "$WORK/err"
	[ "$rc" -eq 2 ] && grep -q '^usage:' "$WORK/err" || return 1
	rc=0
	"$TB" up --loss-up 101 2>/dev/null || rc=$?
	[ "$rc" -eq 2 ]
}

[ "$(id -u)" -eq 0 ] || skip "needs root"
ip netns list >/dev/null 2>&1 || skip "ip netns is not usable"
if ! ip netns add "$P1-probe" 2>/dev/null; then
	skip "ip netns add fails here"
fi
ip netns del "$P1-probe"
for t in tc nft ethtool ping; do
	command -v "$t" >/dev/null 2>&1 || skip "$t is not installed (tools/deps)"
done
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

echo "1..$PLAN"
check "up: 3 workers, 200mbit, mtu 9000, loss 7%/3%" \
	"$TB" up -n 3 --rate 200mbit --mtu 9000 --loss-up 7 --loss-down 3 --prefix "$P1"
check "env file" env_ok "$P1" 3
check "w1 pings w2" pings "$P1-w1" 10.77.0.13
check "w2 pings w3" pings "$P1-w2" 10.77.0.14
check "w3 pings w1" pings "$P1-w3" 10.77.0.12
check "tbf upstream and downstream on every worker link" tbf_everywhere "$P1" 3
check "numgen loss rules in a worker namespace" loss_rules "$P1"
check "dataplane port up in the root namespace, no IPv4 address" dp_port "$P1"
check "mtu 9000 on every veth" mtus "$P1" 3 9000
check "br_netfilter off while up" brnf_zero
check "exec runs in the worker namespace" \
	sh -c "'$TB' --prefix '$P1' exec 2 ip -4 -o addr show dev eth0 | grep -q 10.77.0.13/24"
check "second testbed beside the first" \
	"$TB" up -n 2 --prefix "$P2"
check "second testbed: w1 pings w2" pings "$P2-w1" 10.77.0.13
check "first testbed still works" pings "$P1-w1" 10.77.0.14
check "second testbed: no tbf, no nftables" \
	sh -c "! tc -n '$P2-w1' qdisc show dev eth0 | grep -w tbf && [ -z \"\$(ip netns exec '$P2-w1' nft list ruleset)\" ]"
check "down removes the first testbed" sh -c "'$TB' down --prefix '$P1' && ! '$TB' status --prefix '$P1' >/dev/null"
check "nothing left of the first testbed" leftovers "$P1"
check "second testbed survives the first's down" pings "$P2-w2" 10.77.0.12
check "down twice is fine; nothing left" down_twice "$P2"
check "run -- false: exit 1, nothing left" run_false "$P3"
check "run passes TESTBED_* and CMD's status (7)" run_env "$P3"
check "nothing left after run" leftovers "$P3"
check "run: SIGINT -> 130, torn down" signal_run INT 130 "$P3"
check "run: SIGTERM -> 143, torn down" signal_run TERM 143 "$P3"
check "up failing half-way removes what it made" up_fails_clean "$P4"
check "bad flags: usage on stderr, exit 2" bad_flags
check "a leftover --host testbed (owner gone) is removed by the next --host up" stale_host "$P5" "$P6"
check "so is one whose env file names no owner" legacy_host "$P5" "$P6"
check "a live --host testbed: a second --host up fails, naming it" live_host "$P6" "$P5"
check "nothing left of these" none_left "$P6" "$P5"
check "an address on a link of someone else's: up --host refuses" not_testbed_host "$P5"

[ "$ntap" -eq "$PLAN" ] || { echo "# ran $ntap checks, planned $PLAN"; exit 1; }
[ "$nfail" -eq 0 ]

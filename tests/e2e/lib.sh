# SPDX-License-Identifier: BSD-3-Clause
#
# Shared pieces of the end-to-end tests: a TAP reporter, tally-dp started
# on the testbed's dataplane port, jobs added through its admin socket,
# and workers (tally-bench allreduce) run inside the worker namespaces.
# Sourced by tests/e2e/*_test.sh; they run inside `tools/testbed run`,
# which exports TESTBED_* and tears the testbed down afterwards. Workers
# are named by index 0.. here; the testbed numbers them from 1.

: "${TALLY_SRC:?}" "${TALLY_BUILD:?}"
DP_BIN=$TALLY_BUILD/dataplane/dp/tally-dp
BENCH=$TALLY_BUILD/tests/bench/tally-bench
DPADMIN=$TALLY_SRC/tests/e2e/dpadmin.py
AUTHKEYS=$TALLY_SRC/tests/e2e/authkeys.py
WORK=$(mktemp -d /tmp/tally-e2e.XXXXXX)
DP_SOCK=$WORK/dp.sock
DP_PID=
TALLYD_BIN=$TALLY_BUILD/control/tallyd/tallyd
TALLYCTL_BIN=$TALLY_BUILD/tools/tallyctl/tallyctl
TALLYD_SOCK=$WORK/tallyd.sock
TALLYD_PID=
TALLYD_RDV_PORT=7470
TALLYD_METRICS=127.0.0.1:$((20000 + $$ % 20000))

ntap=0
nfail=0

# ok COND-STATUS NAME: prints one TAP line for a check's exit status.
ok() {
	ntap=$((ntap + 1))
	if [ "$1" -eq 0 ]; then
		echo "ok $ntap - $2"
	else
		echo "not ok $ntap - $2"
		nfail=$((nfail + 1))
	fi
}

# skip_unless_root: exits 77 (skipped) where namespaces cannot be made.
skip_unless_root() {
	if [ "$(id -u)" -ne 0 ] || ! ip netns list >/dev/null 2>&1; then
		echo "1..0 # SKIP needs root and ip netns"
		exit 0
	fi
}

# dp_start [EXTRA tally-dp options]: starts tally-dp on the testbed port
# (with each PMD of TALLY_PMD in turn until one comes up; af_packet by
# default) and waits for its admin socket. DP_LCORES overrides -l 0,1;
# DP_VDEV_ARGS is appended to the vdev (e.g. ,qpairs=2). net_af_packet
# gets a ring of 4096 frames (framecnt; 512 by default): its ring drops
# what does not fit, uncounted, and a few members with windows of
# hundreds of slots fill 512 at once. net_af_xdp gets busy_budget=0: by
# default it sets SO_PREFER_BUSY_POLL and makes a recvfrom() syscall on
# every empty poll, which on the testbed's veth costs tally-dp about a
# sixth of its CPU per byte (docs/operations.md, "net_af_xdp").
dp_start() {
	local pmd args
	for pmd in ${TALLY_PMD:-net_af_packet}; do
		args=${DP_VDEV_ARGS:-}
		case $pmd,$args in
		net_af_packet,*framecnt=*) ;;
		net_af_packet,*) args="$args,framecnt=4096" ;;
		net_af_xdp,*busy_budget=*) ;;
		net_af_xdp,*) args="$args,busy_budget=0" ;;
		esac
		"$DP_BIN" ${DP_LCORES:--l 0,1} --no-huge --no-shconf -m 1024 --no-pci \
			--file-prefix "tally-e2e-$$" --log-level 'pmd.*:error' \
			--vdev "${pmd}0,iface=$TESTBED_DP_IF$args" -- \
			--addr "$TESTBED_DP_IP" --admin "$DP_SOCK" \
			--idle-us 50 --mtu "${TESTBED_MTU:-1500}" "$@" \
			>"$WORK/dp.log" 2>&1 &
		DP_PID=$!
		for _ in $(seq 100); do
			if "$DPADMIN" "$DP_SOCK" '{"cmd":"ping"}' \
					>/dev/null 2>&1; then
				echo "# tally-dp up with $pmd"
				return 0
			fi
			kill -0 "$DP_PID" 2>/dev/null || break
			sleep 0.1
		done
		dp_stop
	done
	echo "# tally-dp did not start:"
	sed 's/^/#   /' "$WORK/dp.log"
	return 1
}

# dp_stop: SIGTERM, then wait, then removes its runtime directory;
# returns tally-dp's exit status.
dp_stop() {
	local rc=0
	[ -n "$DP_PID" ] || return 0
	kill -TERM "$DP_PID" 2>/dev/null || true
	wait "$DP_PID" || rc=$?
	DP_PID=
	# EAL leaves its runtime directory (telemetry socket) behind.
	rm -rf "/var/run/dpdk/tally-e2e-$$"
	return $rc
}

# dp_start_at H [EXTRA tally-dp options]: tally-dp number H (2..) of a
# testbed with --dps, on dataplane H's port and address, admin socket
# $WORK/dpH.sock (DP_SOCK=$WORK/dpH.sock dp_admin ... talks to it), with
# the first PMD of TALLY_PMD, DP_LCORES and DP_VDEV_ARGS as dp_start;
# its pid in DP_PIDS[H]. dp_stop_at stops them all.
DP_PIDS=()
dp_start_at() {
	local h=$1 ifc ip sock=$WORK/dp$1.sock pmd args
	shift
	eval "ifc=\$TESTBED_DP_IF_$h ip=\$TESTBED_DP_IP_$h"
	pmd=${TALLY_PMD:-net_af_packet}
	pmd=${pmd%% *}
	args=${DP_VDEV_ARGS:-}
	case $pmd,$args in
	net_af_packet,*framecnt=*) ;;
	net_af_packet,*) args="$args,framecnt=4096" ;;
	net_af_xdp,*busy_budget=*) ;;
	net_af_xdp,*) args="$args,busy_budget=0" ;;
	esac
	# Up to three tries: the af_packet PMD names its fanout group after
	# its pid, and a group of the same number on another port (another
	# process's) makes PACKET_FANOUT fail with EINVAL; a new pid clears it.
	for try in 1 2 3; do
		"$DP_BIN" ${DP_LCORES:--l 0,1} --no-huge --no-shconf -m 512 \
			--no-pci --file-prefix "tally-e2e-$$-$h" \
			--log-level 'pmd.*:error' \
			--vdev "${pmd}$h,iface=$ifc$args" -- \
			--addr "$ip" --admin "$sock" --idle-us "${DP_IDLE_US:-50}" \
			--mtu "${TESTBED_MTU:-1500}" "$@" >"$WORK/dp$h.log" 2>&1 &
		DP_PIDS[h]=$!
		for _ in $(seq 100); do
			"$DPADMIN" "$sock" '{"cmd":"ping"}' >/dev/null 2>&1 &&
				return 0
			kill -0 "${DP_PIDS[h]}" 2>/dev/null || break
			sleep 0.1
		done
		grep -q "PACKET_FANOUT" "$WORK/dp$h.log" || break
		wait "${DP_PIDS[h]}" 2>/dev/null
		rm -rf "/var/run/dpdk/tally-e2e-$$-$h"
		echo "# tally-dp $h: PACKET_FANOUT refused (try $try), again"
	done
	echo "# tally-dp $h did not start:"
	sed 's/^/#   /' "$WORK/dp$h.log"
	return 1
}

# dp_stop_at: stops every tally-dp of dp_start_at.
dp_stop_at() {
	local h
	for h in "${!DP_PIDS[@]}"; do
		kill -TERM "${DP_PIDS[h]}" 2>/dev/null || true
		wait "${DP_PIDS[h]}" 2>/dev/null || true
		rm -rf "/var/run/dpdk/tally-e2e-$$-$h"
	done
	DP_PIDS=()
}

# dp_admin JSON: one admin request; prints the reply.
dp_admin() {
	"$DPADMIN" "$DP_SOCK" "$1"
}

# dp_counter NAME: a total counter of tally-dp.
dp_counter() {
	dp_admin '{"cmd":"stats"}' | /usr/bin/python3 -c \
		"import json,sys; print(json.load(sys.stdin)['total']['$1'])"
}

# job_add ID TOKEN RANKS...: a job whose members are the given workers,
# each at its address, UDP port 40000 + ID; with GROUP set, results go to
# that multicast group on the same port; NARROW=true: narrow results;
# ENCODINGS='["i8"]': the encodings the workers send at full length (all
# by default: tally-dp checks every one against its MTU).
# AUTH_SECRET=HEX64: an authenticated job, its keys derived from that
# membership secret (tests/e2e/authkeys.py; worker passes them on).
job_add() {
	local id=$1 token=$2 members="" r world=0
	shift 2
	for r in "$@"; do
		eval "ip=\$TESTBED_IP_$((r + 1))"
		members="$members${members:+,}{\"ip\":\"$ip\",\"port\":$((40000 + id))}"
		world=$((world + 1))
	done
	local group=""
	[ -n "${GROUP:-}" ] &&
		group=",\"group\":{\"ip\":\"$GROUP\",\"port\":$((40000 + id))}"
	local auth=""
	[ -n "${AUTH_SECRET:-}" ] &&
		auth=",\"auth\":$("$AUTHKEYS" "$AUTH_SECRET" "$world")"
	dp_admin "{\"cmd\":\"job_add\",\"id\":$id,\"token\":\"$token\",\"world\":$world,\"window\":${WINDOW:-64},\"max_elems\":${ELEMS:-256},\"narrow\":${NARROW:-false},\"members\":[$members]$group$auth${ENCODINGS:+,\"encodings\":$ENCODINGS}}"
}

# worker NS-INDEX ID TOKEN RANK WORLD OUT [tally-bench options]: runs one
# worker in the background inside worker NS-INDEX's namespace; its output
# goes to OUT. The wire token goes in TALLY_TOKEN, never in argv. Sets
# WPID.
worker() {
	local i=$1 id=$2 token=$3 rank=$4 world=$5 out=$6
	shift 6
	eval "local ns=\$TESTBED_NS_$((i + 1)) ip=\$TESTBED_IP_$((i + 1))"
	local keys=""
	# An authenticated job: this rank's keys, from the environment.
	[ -n "${AUTH_SECRET:-}" ] &&
		keys=$("$AUTHKEYS" "$AUTH_SECRET" "$world" "$rank")
	TALLY_TOKEN=$token TALLY_AUTH_KEYS=$keys ip netns exec "$ns" \
		"$BENCH" allreduce --dp "$TESTBED_DP_IP" \
		--bind "$ip:$((40000 + id))" --job "$id" \
		--rank "$rank" --world "$world" --elems "${ELEMS:-256}" \
		--window "${WINDOW:-64}" ${GROUP:+--group "$GROUP"} \
		"$@" >"$out" 2>&1 &
	WPID=$!
}

# allreduce_all ID TOKEN N NAME [tally-bench options]: workers 0..N-1
# (ranks alike) of job ID allreduce together; two TAP lines: every result
# equals the reference, and all are bit-identical. Outputs: $WORK/NAME.r.
allreduce_all() {
	local id=$1 token=$2 n=$3 name=$4 pids="" r p rc=0 same=0 d0
	shift 4
	for r in $(seq 0 $((n - 1))); do
		worker "$r" "$id" "$token" "$r" "$n" "$WORK/$name.$r" "$@"
		pids="$pids $WPID"
	done
	for p in $pids; do
		wait "$p" || rc=1
	done
	ok $rc "$name: every worker's result equals the reference"
	[ $rc -eq 0 ] || sed 's/^/#   /' "$WORK/$name".*
	d0=$(digest "$WORK/$name.0")
	for r in $(seq 1 $((n - 1))); do
		[ -n "$d0" ] && [ "$(digest "$WORK/$name.$r")" = "$d0" ] ||
			same=1
	done
	ok $same "$name: results bit-identical on all workers ($d0)"
}

# digest FILE: the result digest a worker printed.
digest() {
	sed -n 's/^digest: fnv1a64 \([0-9a-f]\{16\}\)$/\1/p' "$1" | tail -1
}

# tls_ca DIR: a test CA in DIR (ca.key, ca.crt), made now: no private key
# of tally's tests is ever committed. ECDSA P-256, valid for 60 days
# (tallyd warns about certificates that expire within 30).
tls_ca() {
	mkdir -p "$1" && chmod 700 "$1" &&
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 \
		-nodes -keyout "$1/ca.key" -out "$1/ca.crt" -days 60 \
		-subj "/CN=tally test CA $$" \
		-addext "basicConstraints=critical,CA:TRUE" \
		-addext "keyUsage=critical,keyCertSign,cRLSign" \
		>"$1/openssl.log" 2>&1
}

# tls_cert DIR NAME SAN: a server certificate NAME.crt (key NAME.key,
# mode 0600) signed by DIR's CA, for SAN (e.g. IP:10.77.0.254).
tls_cert() {
	local d=$1 name=$2 san=$3
	openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
		-keyout "$d/$name.key" -out "$d/$name.csr" -subj "/CN=tallyd" \
		>>"$d/openssl.log" 2>&1 &&
	chmod 600 "$d/$name.key" &&
	printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n' \
		"$san" >"$d/$name.ext" &&
	openssl x509 -req -in "$d/$name.csr" -CA "$d/ca.crt" \
		-CAkey "$d/ca.key" -CAcreateserial -days 60 \
		-extfile "$d/$name.ext" -out "$d/$name.crt" >>"$d/openssl.log" 2>&1
}

# tallyd_tls: tallyd's certificate for the testbed's host address, under
# a test CA that workers trust through TALLY_CA (made once a test).
TALLYD_TLS=$WORK/tls
tallyd_tls() {
	[ -f "$TALLYD_TLS/tallyd.crt" ] && return 0
	tls_ca "$TALLYD_TLS" &&
		tls_cert "$TALLYD_TLS" tallyd "IP:$TESTBED_HOST_IP" || {
		echo "# cannot make the test certificates:"
		sed 's/^/#   /' "$TALLYD_TLS/openssl.log"
		return 1
	}
	export TALLY_CA=$TALLYD_TLS/ca.crt
}

# tallyd_start [--set KEY=VALUE...]: starts tallyd on the testbed's host
# address (tools/testbed --host) with its files in $WORK, talking to the
# tally-dp of dp_start (polled every TALLYD_POLL_MS, 200 by default), its
# rendezvous in TLS with a certificate of a test CA (TALLY_CA;
# TALLYD_CERT=DIR/NAME picks another NAME.crt and NAME.key), and waits
# for its control socket. TALLYD_WRAP (e.g. "prlimit --nofile=256") runs
# tallyd under a command.
tallyd_start() {
	: "${TESTBED_HOST_IP:?the testbed needs --host}"
	tallyd_tls || return 1
	${TALLYD_WRAP:-} "$TALLYD_BIN" -c /dev/null \
		--set "control_socket=$TALLYD_SOCK" \
		--set "rendezvous=$TESTBED_HOST_IP:$TALLYD_RDV_PORT" \
		--set "rendezvous_tls_cert=${TALLYD_CERT:-$TALLYD_TLS/tallyd}.crt" \
		--set "rendezvous_tls_key=${TALLYD_CERT:-$TALLYD_TLS/tallyd}.key" \
		--set "metrics=$TALLYD_METRICS" \
		--set "state_file=$WORK/state.json" \
		--set "dp_admin=$DP_SOCK" \
		--set "dp_poll_ms=${TALLYD_POLL_MS:-200}" "$@" \
		>>"$WORK/tallyd.log" 2>&1 &
	TALLYD_PID=$!
	for _ in $(seq 100); do
		tctl ping >/dev/null 2>&1 && return 0
		kill -0 "$TALLYD_PID" 2>/dev/null || break
		sleep 0.1
	done
	echo "# tallyd did not start:"
	sed 's/^/#   /' "$WORK/tallyd.log"
	return 1
}

# tallyd_stop [SIGNAL]: stops tallyd (SIGTERM by default) and waits.
tallyd_stop() {
	local rc=0
	[ -n "$TALLYD_PID" ] || return 0
	kill "-${1:-TERM}" "$TALLYD_PID" 2>/dev/null || true
	wait "$TALLYD_PID" || rc=$?
	TALLYD_PID=
	return $rc
}

# tctl ARGS...: tallyctl against this test's tallyd.
tctl() {
	"$TALLYCTL_BIN" --socket "$TALLYD_SOCK" "$@"
}

# jq_py EXPR: evaluates a Python expression over the JSON on stdin (j).
jq_py() {
	/usr/bin/python3 -c "import json,sys; j=json.load(sys.stdin); print($1)"
}

# token_file TOKEN: prints the path of a file (mode 0600, in $WORK)
# holding TOKEN, for --token-file: a token never goes in argv, where ps
# shows it to every user.
token_file() {
	local f
	f=$WORK/token.$(printf '%s' "$1" | cksum | cut -d' ' -f1)
	# Written once, whole (workers may be reading it already).
	[ -f "$f" ] || (umask 077 && printf '%s\n' "$1" >"$f.tmp" &&
		mv "$f.tmp" "$f")
	echo "$f"
}

# worker_url NS-INDEX JOB TOKEN RANK WORLD OUT [tally-bench options]: one
# worker joining JOB through tallyd (tally:// URL, TLS with TALLY_CA), in
# the background, in worker NS-INDEX's namespace, the token in a file;
# output to OUT. Sets WPID.
worker_url() {
	local i=$1 job=$2 token=$3 rank=$4 world=$5 out=$6 tf
	shift 6
	eval "local ns=\$TESTBED_NS_$((i + 1))"
	tf=$(token_file "$token")
	ip netns exec "$ns" "$BENCH" allreduce \
		--url "tally://$TESTBED_HOST_IP:$TALLYD_RDV_PORT/$job" \
		--token-file "$tf" --rank "$rank" --world "$world" "$@" \
		>"$out" 2>&1 &
	WPID=$!
}

# finish: stops tallyd and tally-dp, prints the plan, and exits with the
# verdict.
finish() {
	tallyd_stop >/dev/null 2>&1 || true
	dp_stop >/dev/null 2>&1 || true
	dp_stop_at
	echo "1..$ntap"
	rm -rf "$WORK" /var/run/dpdk/tally-e2e-$$ /var/run/dpdk/[xyz]$$
	[ "$nfail" -eq 0 ]
}

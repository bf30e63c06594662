# shellcheck shell=bash
# SPDX-License-Identifier: BSD-3-Clause
#
# tools/bench/lib.sh: what the testbed benchmarks share (tools/bench-
# allreduce, tools/bench-training): messages, rates, packages, a release
# build of tally, an idle machine before each row, waiting for ranks
# under a time limit, and a testbed brought up and always torn down.
# Sourced by those scripts from the repository's top folder; they set
# prog (the name in messages) first. State the scripts share with it:
#   bg_pids   every background process a script started (cleanup ends them)
#   res       the scratch folder of results (cleanup removes it)
#   prefix    the testbed's prefix; tb_up 1 once it exists
#   n         the worker namespaces; top the repository's top folder
# shellcheck disable=SC2154 # prog, n, top, prefix: the script's

bg_pids=()
tb_up=0
res=

die() {
	echo "$prog: $*" >&2
	exit 1
}

note() {
	echo "$prog: $*" >&2
}

# bad_usage MSG: the message and the usage text (the script's usage
# function) on stderr, exit 2.
bad_usage() {
	echo "$prog: $*" >&2
	usage >&2
	exit 2
}

# rate_bits RATE: prints a tc rate (decimal units, as tc reads them) in
# bit/s.
rate_bits() {
	awk -v s="$1" 'BEGIN {
		u = tolower(s)
		if (u !~ /^[0-9]+(\.[0-9]+)?(bit|kbit|mbit|gbit|tbit)$/) exit 1
		m = 1
		if (u ~ /tbit$/) m = 1e12; else if (u ~ /gbit$/) m = 1e9
		else if (u ~ /mbit$/) m = 1e6; else if (u ~ /kbit$/) m = 1e3
		sub(/[a-z]+$/, "", u)
		printf "%d\n", u * m }'
}

# need_pkgs PKG...: installs the Debian packages of PKG... that are
# missing, with apt-get (the benchmarks' own: not in tools/deps, so that
# tools/check needs no torch or MPI).
need_pkgs() {
	local p missing=()
	for p in "$@"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null |
			grep -q 'install ok installed' || missing+=("$p")
	done
	[ ${#missing[@]} -gt 0 ] || return 0
	note "installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get install -y -q --no-install-recommends "${missing[@]}" ||
		{ apt-get update -q && apt-get install -y -q --no-install-recommends "${missing[@]}"; } ||
		die "could not install ${missing[*]}"
}

# build_tally DIR: a release build of tally in DIR (set up when missing),
# with tally-dp and tally-bench; logs in DIR.setup.log, DIR.ninja.log.
build_tally() {
	local b=$1
	if [ ! -f "$b/build.ninja" ]; then
		meson setup "$b" -Dbuildtype=release >"$b.setup.log" 2>&1 ||
			{ cat "$b.setup.log"; die "meson setup failed"; }
	fi
	ninja -C "$b" >"$b.ninja.log" 2>&1 ||
		{ cat "$b.ninja.log"; die "build failed"; }
	[ -x "$b/dataplane/dp/tally-dp" ] || die "$b has no tally-dp (is libdpdk-dev installed? see $b.setup.log)"
	[ -x "$b/tests/bench/tally-bench" ] || die "$b has no tally-bench"
}

# machine_line: the CPU model, the cores and the kernel, for reports.
machine_line() {
	echo "$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo), $(nproc) cores, $(uname -r)"
}

# cpu_busy: prints how busy the CPUs were over the last second (%).
cpu_busy() {
	local a b
	a=$(awk '/^cpu / { print $2+$3+$4+$7+$8, $2+$3+$4+$5+$6+$7+$8 }' /proc/stat)
	sleep 1
	b=$(awk '/^cpu / { print $2+$3+$4+$7+$8, $2+$3+$4+$5+$6+$7+$8 }' /proc/stat)
	awk -v a="$a" -v b="$b" 'BEGIN { split(a, x); split(b, y)
		d = y[2] - x[2]; printf "%d\n", (d > 0 ? 100 * (y[1] - x[1]) / d : 0) }'
}

# wait_quiet: waits (up to 15 s) for a second in which the CPUs were
# under 10 % busy, so that each row starts on an idle machine; prints the
# last figure (the report warns when it stayed high: other work).
wait_quiet() {
	local b
	for _ in $(seq 15); do
		b=$(cpu_busy)
		[ "$b" -ge 10 ] || break
	done
	echo "$b"
}

# wait_pids LIMIT PID...: waits for every PID, killing those still
# running after LIMIT seconds (TERM, then KILL). Returns 0 when all
# exited 0, 124 when any was killed, otherwise the first failure's
# status.
wait_pids() {
	local limit=$1 p rc=0 r end left
	shift
	end=$((SECONDS + limit))
	for p in "$@"; do
		while kill -0 "$p" 2>/dev/null && [ "$SECONDS" -lt "$end" ]; do
			sleep 0.2
		done
	done
	left=()
	for p in "$@"; do
		kill -0 "$p" 2>/dev/null && left+=("$p")
	done
	if [ ${#left[@]} -gt 0 ]; then
		note "still running after ${limit} s: killing ${left[*]}"
		kill -TERM "${left[@]}" 2>/dev/null || true
		sleep 3
		kill -KILL "${left[@]}" 2>/dev/null || true
		rc=124
	fi
	for p in "$@"; do
		r=0
		wait "$p" 2>/dev/null || r=$?
		[ "$rc" -ne 0 ] || rc=$r
	done
	return "$rc"
}

# fail_result NAME TEXT: $res/NAME.json for a row that did not run.
fail_result() {
	/usr/bin/python3 -c 'import json,sys; print(json.dumps({"system": sys.argv[1], "error": sys.argv[2]}))' \
		"$1" "$2" >"$res/$1.json"
}

# json_line FILE: the last line of FILE that is a JSON object.
json_line() {
	grep '^{' "$1" | tail -1
}

# ns_kill_all: ends what is left of a run in the worker namespaces (all
# of it was started by the script: ranks of a failed row, a stuck mpirun).
ns_kill_all() {
	local i ns pids
	for i in $(seq "$n"); do
		eval "ns=\${TESTBED_NS_$i:-}"
		[ -n "$ns" ] || continue
		pids=$(ip netns pids "$ns" 2>/dev/null) || continue
		# shellcheck disable=SC2086
		[ -z "$pids" ] || kill -KILL $pids 2>/dev/null || true
	done
}

# bench_cleanup: the EXIT trap: ends what the script started, stops
# tallyd and tally-dp, removes the testbed (always) and the scratch
# folders.
# shellcheck disable=SC2317 # called by the trap
bench_cleanup() {
	local p
	trap '' INT TERM HUP
	for p in "${bg_pids[@]}"; do
		kill -TERM "$p" 2>/dev/null || true
	done
	if [ -n "${TALLYD_PID:-}" ]; then
		tallyd_stop TERM >/dev/null 2>&1 || true
	fi
	if [ -n "${DP_PID:-}" ]; then
		dp_stop >/dev/null 2>&1 || true
	fi
	[ "$tb_up" -eq 0 ] || ns_kill_all
	if [ "$tb_up" -eq 1 ]; then
		"$top/tools/testbed" down --prefix "$prefix" || true
	fi
	for p in "${bg_pids[@]}"; do
		kill -KILL "$p" 2>/dev/null || true
	done
	[ -z "${WORK:-}" ] || rm -rf "$WORK"
	[ -z "${res:-}" ] || rm -rf "$res"
}

# bench_start NAME: the scratch folder $res (/tmp/tally-NAME.XXXXXX)
# and the traps that clean up on exit, Ctrl-C, SIGTERM and SIGHUP.
bench_start() {
	res=$(mktemp -d "/tmp/tally-$1.XXXXXX")
	trap bench_cleanup EXIT
	trap 'note "got SIGINT; cleaning up"; exit 130' INT
	trap 'note "got SIGTERM; cleaning up"; exit 143' TERM
	trap 'note "got SIGHUP; cleaning up"; exit 129' HUP
}

# testbed_up BUILD UP-OPTIONS...: `tools/testbed up --prefix $prefix
# UP-OPTIONS...`, its TESTBED_* exported, TESTBED_SUBNET set, and
# tests/e2e/lib.sh sourced for tally-dp, tallyd and workers of BUILD
# (absolute, or relative to $top).
testbed_up() {
	local b=$1
	shift
	echo "== testbed $prefix"
	tb_up=1
	tools/testbed up --prefix "$prefix" "$@"
	set -a
	# shellcheck disable=SC1090
	. "/run/tally-testbed-$prefix.env"
	set +a
	# shellcheck disable=SC2034 # used by the script and tests/e2e/lib.sh
	TESTBED_SUBNET=${TESTBED_DP_IP%.*}.0/24
	# shellcheck disable=SC2034 # used by tests/e2e/lib.sh
	TALLY_SRC=$top
	# shellcheck disable=SC2034 # used by tests/e2e/lib.sh
	case $b in
	/*) TALLY_BUILD=$b ;;
	*) TALLY_BUILD=$top/$b ;;
	esac
	# shellcheck source=tests/e2e/lib.sh
	. tests/e2e/lib.sh
}

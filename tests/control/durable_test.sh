#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# "A reply means it is on disk" (docs/operations.md, "Durability"), tried
# on a real tallyd (no tally-dp needed) through tallyctl:
#  a. tally-dp stopped (a socket that takes connections and never
#     answers): tallyd is SIGKILLed right after each acknowledged create
#     and each acknowledged delete; after a restart every acknowledged
#     create is there and every acknowledged delete gone;
#  b. the state directory on a 32 KiB tmpfs: creates until it is full;
#     every acknowledged job survives a restart, the refused ones got
#     ENOSPC and are nowhere;
#  c. a read-only state directory: create and delete refused (EROFS),
#     nothing changes, in memory or after a restart; the failures are
#     counted (stats, metrics); SIGTERM exits 1 with the reason;
#  d. EMFILE: a create tallyd cannot save is refused, an acknowledged one
#     is in the file;
#  e. at start: a missing state directory, a dangling symlink for it or
#     for the file is an error (exit 1, a sentence); a missing file in an
#     existing directory is a first start; a symlinked file is written
#     through to its target.
# b and c mount tmpfs in a private mount namespace (root and unshare -m);
# without one they are skipped, visibly. TAP; needs TALLY_BUILD, or
# TALLYD_BIN and TALLYCTL_BIN to try other binaries.
set -u
if [ -z "${DURABLE_NS:-}" ] && [ "$(id -u)" -eq 0 ] &&
		unshare -m --propagation private true 2>/dev/null; then
	DURABLE_NS=1 exec unshare -m --propagation private "$0" "$@"
fi
TALLYD=${TALLYD_BIN:-${TALLY_BUILD:?}/control/tallyd/tallyd}
TALLYCTL=${TALLYCTL_BIN:-${TALLY_BUILD:?}/tools/tallyctl/tallyctl}
PY=/usr/bin/python3

n=0
nfail=0
ok() {	# ok STATUS DESCRIPTION
	n=$((n + 1))
	if [ "$1" -eq 0 ]; then
		echo "ok $n - $2"
	else
		echo "not ok $n - $2"
		nfail=$((nfail + 1))
	fi
}
skip() {
	n=$((n + 1))
	echo "ok $n - # SKIP $1"
}
diag() {
	sed 's/^/#   /'
}

WORK=$(mktemp -d /tmp/tallyd-durable.XXXXXX)
SOCK=$WORK/ctl.sock
NODP=$WORK/no-dp.sock
LOG=$WORK/tallyd.log
PID=
FAKE=
MOUNTS=""
cleanup() {
	[ -n "$PID" ] && kill -KILL "$PID" 2>/dev/null
	[ -n "$FAKE" ] && kill -KILL "$FAKE" 2>/dev/null
	for m in $MOUNTS; do
		umount "$m" 2>/dev/null
	done
	rm -rf "$WORK"
}
trap cleanup EXIT

# start STATE_FILE DP_SOCKET [--set KEY=VALUE...]: tallyd in the
# background (PID), once its control socket takes connections (the file
# exists a moment before tallyd listens on it).
start() {
	local state=$1 dp=$2
	shift 2
	rm -f "$SOCK"
	"$TALLYD" -c /dev/null --set "control_socket=$SOCK" \
		--set rendezvous=127.0.0.1:0 --set rendezvous_tls=off \
		--set "metrics=${METRICS:-off}" \
		--set "state_file=$state" --set "dp_admin=$dp" "$@" \
		>>"$LOG" 2>&1 &
	PID=$!
	for _ in $(seq 200); do
		[ -S "$SOCK" ] && "$TALLYCTL" --socket "$SOCK" --timeout-ms 30000 \
			ping >/dev/null 2>&1 && return 0
		kill -0 "$PID" 2>/dev/null || break
		sleep 0.05
	done
	echo "# tallyd did not start:"
	tail -5 "$LOG" | diag
	kill -KILL "$PID" 2>/dev/null
	wait "$PID" 2>/dev/null
	PID=
	return 1
}

# crash: SIGKILL, at once.
crash() {
	[ -n "$PID" ] || return 0
	kill -KILL "$PID" 2>/dev/null
	wait "$PID" 2>/dev/null
	PID=
}

# stop: SIGTERM; returns tallyd's exit status.
stop() {
	local rc=0
	kill -TERM "$PID" 2>/dev/null
	wait "$PID" || rc=$?
	PID=
	return $rc
}

tctl() {
	"$TALLYCTL" --socket "$SOCK" --timeout-ms 30000 "$@"
}

# names: the jobs tallyd lists, sorted, on one line.
names() {
	tctl --json job list |
		"$PY" -c 'import json, sys
print(" ".join(sorted(j["name"] for j in json.load(sys.stdin)["jobs"])))'
}

# sorted WORD...: the words sorted, on one line.
sorted() {
	printf '%s\n' "$@" | grep . | sort | tr '\n' ' ' | sed 's/ $//'
}

# stat_of KEY: a key of stats' "tallyd" object.
stat_of() {
	tctl --json stats | "$PY" -c 'import json, sys
print(json.load(sys.stdin)["tallyd"].get(sys.argv[1]))' "$1"
}

[ -x "$TALLYD" ] && [ -x "$TALLYCTL" ]
ok $? "tallyd and tallyctl are built"

# --- a. tally-dp stopped, SIGKILL after each reply -------------------------
# A tally-dp that takes connections and never answers (then SIGSTOPped):
# tallyd's requests to it time out, as with a stopped tally-dp.
FAKE_DP=$WORK/dp-stopped.sock
"$PY" -c 'import signal, socket, sys
signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.bind(sys.argv[1])
s.listen(4096)
signal.pause()' "$FAKE_DP" 2>/dev/null &
FAKE=$!
for _ in $(seq 100); do
	[ -S "$FAKE_DP" ] && break
	sleep 0.05
done
kill -STOP "$FAKE"
mkdir "$WORK/a"
ST=$WORK/a/state.json
created=""
deleted=""
for i in 1 2 3 4; do
	start "$ST" "$FAKE_DP" --set dp_poll_ms=10 || break
	tctl job create "c$i" --world 64 >/dev/null 2>"$WORK/err" &&
		created="$created c$i"
	crash
done
for i in 1 2 3; do
	start "$ST" "$FAKE_DP" --set dp_poll_ms=10 || break
	tctl job delete "c$i" >/dev/null 2>"$WORK/err" &&
		deleted="$deleted c$i"
	crash
done
[ "$(sorted $created)" = "c1 c2 c3 c4" ] &&
	[ "$(sorted $deleted)" = "c1 c2 c3" ]
ok $? "tally-dp stopped: 4 creates and 3 deletes acknowledged, tallyd SIGKILLed after each reply"
start "$ST" "$FAKE_DP" --set dp_poll_ms=10
have=$(names)
crash
[ "$have" = "c4" ]
ok $? "after a restart every acknowledged create is there and every acknowledged delete gone (jobs: '$have', want 'c4')"
kill -CONT "$FAKE"
kill -TERM "$FAKE"	# it exits 0: no "Terminated" from the shell
wait "$FAKE"
FAKE=

# --- e. the state directory and file at start -----------------------------
# refused_at_start STATE_FILE WORDS DESCRIPTION: tallyd exits 1 saying WORDS.
refused_at_start() {
	local rc=0
	timeout 10 "$TALLYD" -c /dev/null --set "control_socket=$SOCK" \
		--set rendezvous=127.0.0.1:0 --set rendezvous_tls=off \
		--set metrics=off \
		--set "state_file=$1" --set "dp_admin=$NODP" \
		>"$WORK/start.out" 2>&1 || rc=$?
	[ $rc -eq 1 ] && grep -q "$2" "$WORK/start.out"
	ok $? "$3: exit 1 (got $rc), '$2'"
	[ $rc -eq 1 ] || diag <"$WORK/start.out"
}
mkdir "$WORK/e"
refused_at_start "$WORK/e/missing/state.json" \
	"state directory $WORK/e/missing: No such file or directory" \
	"a missing state directory"
ln -s "$WORK/e/gone" "$WORK/e/linkdir"
refused_at_start "$WORK/e/linkdir/state.json" \
	"state directory $WORK/e/linkdir is a symlink to $WORK/e/gone, which does not exist" \
	"a state directory that is a dangling symlink"
ln -s "$WORK/e/gone.json" "$WORK/e/state.json"
refused_at_start "$WORK/e/state.json" \
	"state file $WORK/e/state.json is a symlink to $WORK/e/gone.json, which does not exist" \
	"a state file that is a dangling symlink"
mkdir "$WORK/e/first"
start "$WORK/e/first/state.json" "$NODP" && tctl ping >/dev/null &&
	[ "$(names)" = "" ]
ok $? "no state file in an existing directory: a first start, no jobs"
stop
ok $? "SIGTERM: exit 0 after a good last save"
[ -f "$WORK/e/first/state.json" ]
ok $? "the state file is written at the stop"
mkdir "$WORK/e/real" "$WORK/e/via"
cp "$WORK/e/first/state.json" "$WORK/e/real/state.json"
ln -s "$WORK/e/real/state.json" "$WORK/e/via/state.json"
start "$WORK/e/via/state.json" "$NODP" &&
	tctl job create linked --world 2 >/dev/null
ok $? "a symlinked state file: tallyd starts and a create is acknowledged"
[ -L "$WORK/e/via/state.json" ] &&
	grep -q '"linked"' "$WORK/e/real/state.json" &&
	[ ! -e "$WORK/e/via/state.json.tmp" ]
ok $? "the symlink stays a symlink; the job is in its target"
crash

# --- d. EMFILE -------------------------------------------------------------
# free_fd K: the K-th lowest descriptor number tallyd does not use (the
# soft RLIMIT_NOFILE bounds the numbers, and some may be inherited).
free_fd() {
	local i=0 c=0
	while [ $c -lt "$1" ]; do
		[ -e "/proc/$PID/fd/$i" ] || c=$((c + 1))
		i=$((i + 1))
	done
	echo $((i - 1))
}
if command -v prlimit >/dev/null 2>&1; then
	mkdir "$WORK/d"
	ST=$WORK/d/state.json
	start "$ST" "$NODP" --set dp_poll_ms=60000
	tctl ping >/dev/null
	sleep 0.2	# tallyd closes ping's connection
	res=""
	bad=0
	# One fd spare: the client's connection, nothing to save with.
	# Three: the connection, the directory and the temporary file.
	for spare in 1 3; do
		prlimit --pid "$PID" --nofile=$(($(free_fd $spare) + 1)):
		name=m$spare
		if tctl job create "$name" --world 4 >/dev/null 2>"$WORK/err"; then
			res="$res $name:acknowledged"
			grep -q "\"$name\"" "$ST" || bad=1
		else
			res="$res $name:refused"
			grep -q "Too many open files" "$WORK/err" || bad=1
			prlimit --pid "$PID" --nofile=$(($(free_fd 3) + 1)):
			names | grep -qw "$name" && bad=1
		fi
	done
	echo "# lowest free fd $(free_fd 1); creates:$res"
	[ $bad -eq 0 ]
	ok $? "EMFILE: each acknowledged create is in the file at once, each refused one says EMFILE and is not listed"
	[ "$res" = " m1:refused m3:acknowledged" ]
	ok $? "with 1 spare fd the create is refused, with 3 acknowledged"
	crash
	start "$ST" "$NODP"
	have=$(names)
	crash
	[ "$have" = "m3" ]
	ok $? "after a crash: the acknowledged job only (jobs: '$have')"
else
	skip "EMFILE: no prlimit"
	skip "EMFILE: no prlimit"
	skip "EMFILE: no prlimit"
fi

# --- b. a full state directory ---------------------------------------------
if [ -n "${DURABLE_NS:-}" ] && mkdir "$WORK/b" &&
		mount -t tmpfs -o size=32k,mode=0700 tallyd-full "$WORK/b"; then
	MOUNTS="$MOUNTS $WORK/b"
	ST=$WORK/b/state.json
	start "$ST" "$NODP"
	acked=""
	refused=""
	nref=0
	other=0
	i=0
	while [ $i -lt 300 ] && [ $nref -lt 3 ]; do
		i=$((i + 1))
		if tctl job create "f$i" --world 64 >/dev/null 2>"$WORK/err"; then
			acked="$acked f$i"
		else
			refused="$refused f$i"
			nref=$((nref + 1))
			grep -q "job 'f$i' not created: cannot save state file $ST: No space left on device" \
				"$WORK/err" || other=1
		fi
	done
	echo "# $(echo $acked | wc -w) acknowledged, refused:$refused"
	[ $nref -eq 3 ] && [ $other -eq 0 ]
	ok $? "32 KiB tmpfs: creates until full; the refused ones got ENOSPC with the sentence"
	[ "$(names)" = "$(sorted $acked)" ]
	ok $? "the refused jobs are not in tallyd's memory either"
	fails=$(stat_of state_save_failures)
	[ "$fails" -ge 3 ] 2>/dev/null
	ok $? "stats: state_save_failures counts them ($fails)"
	crash
	start "$ST" "$NODP"
	have=$(names)
	crash
	[ -n "$acked" ] && [ "$have" = "$(sorted $acked)" ]
	ok $? "after a crash every acknowledged job is there, no refused one ($(echo $have | wc -w) jobs)"
else
	for _ in 1 2 3 4; do
		skip "full state directory: needs root and unshare -m"
	done
fi

# --- c. a read-only state directory ---------------------------------------
if [ -n "${DURABLE_NS:-}" ] && mkdir "$WORK/c" &&
		mount -t tmpfs -o size=1m,mode=0700 tallyd-ro "$WORK/c"; then
	MOUNTS="$MOUNTS $WORK/c"
	ST=$WORK/c/state.json
	: >"$LOG"
	METRICS=127.0.0.1:0 start "$ST" "$NODP" &&
		tctl job create k1 --world 2 >/dev/null &&
		tctl job create k2 --world 2 >/dev/null
	ok $? "read-write: two jobs created"
	mount -o remount,ro "$WORK/c"
	tctl job create n1 --world 2 >/dev/null 2>"$WORK/err"
	rc=$?
	[ $rc -eq 1 ] && grep -q "Read-only file system" "$WORK/err"
	ok $? "read-only: a create is refused (exit $rc, EROFS)"
	diag <"$WORK/err"
	tctl job delete k1 >/dev/null 2>"$WORK/err"
	rc=$?
	[ $rc -eq 1 ] && grep -q "job 'k1' not deleted: cannot save state file $ST: Read-only file system" "$WORK/err"
	ok $? "read-only: a delete is refused (exit $rc, EROFS, the sentence)"
	diag <"$WORK/err"
	have=$(names)
	[ "$have" = "k1 k2" ]
	ok $? "nothing changed in memory (jobs: '$have')"
	err=$(stat_of state_last_error)
	[ "$(stat_of state_save_failures)" -ge 2 ] &&
		echo "$err" | grep -q "Read-only file system"
	ok $? "stats: the failures counted, the last error kept ($err)"
	port=$(sed -n 's/.*metrics 127\.0\.0\.1:\([0-9]*\),.*/\1/p' "$LOG" | tail -1)
	if [ -n "$port" ] && command -v curl >/dev/null 2>&1; then
		curl -sf "http://127.0.0.1:$port/metrics" >"$WORK/metrics"
		v=$(sed -n 's/^tallyd_state_save_failures_total \([0-9]*\)$/\1/p' "$WORK/metrics")
		[ "${v:-0}" -ge 2 ] && grep -q "^tallyd_state_unsaved [01]$" "$WORK/metrics"
		ok $? "metrics: tallyd_state_save_failures_total $v, tallyd_state_unsaved"
	else
		skip "metrics: no curl or no port in the log"
	fi
	stop
	rc=$?
	[ $rc -eq 1 ] && grep -q "stopping: cannot save state file $ST: Read-only file system" "$LOG"
	ok $? "SIGTERM with a failing last save: exit 1 (got $rc) and why"
	start "$ST" "$NODP"
	have=$(names)
	crash
	[ "$have" = "k1 k2" ]
	ok $? "restart on the read-only directory: the jobs as before (jobs: '$have')"
	mount -o remount,rw "$WORK/c"
	start "$ST" "$NODP" && tctl job delete k1 >/dev/null &&
		tctl job create n2 --world 2 >/dev/null
	crash
	start "$ST" "$NODP"
	have=$(names)
	crash
	[ "$have" = "k2 n2" ]
	ok $? "writable again: delete and create work and last (jobs: '$have')"
else
	for _ in 1 2 3 4 5 6 7 8 9; do
		skip "read-only state directory: needs root and unshare -m"
	done
fi

echo "1..$n"
[ "$nfail" -eq 0 ]

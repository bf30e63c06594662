#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# The operator's files agree with the code: the example configuration
# (control/tallyd.conf) is accepted by tallyd and shows exactly its
# defaults; every key tallyd knows is in the example, docs/control.md,
# docs/tools/tallyd.md and tallyd(8), and those name no key tallyd lacks;
# the man pages render without warnings; the systemd units
# (tools/systemd/) start the binaries meson installs, with the files and
# directories the configuration names; tallyd refuses -c DIRECTORY and a
# control_group that does not exist, and logs the ports it picked for
# port 0. TAP; needs TALLY_SRC and
# TALLY_BUILD (a build with tallyd).
set -u
: "${TALLY_SRC:?}" "${TALLY_BUILD:?}"
cd "$TALLY_SRC" || exit 1

TALLYD=$TALLY_BUILD/control/tallyd/tallyd
CONF=control/tallyd.conf
UNITS=tools/systemd
# Keys the example sets to something other than tallyd's default, on
# purpose (none: the example shows the defaults).
CHANGED_KEYS=""

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
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

# --- the example configuration -------------------------------------------
[ -x "$TALLYD" ]
ok $? "tallyd is built ($TALLYD)"
if [ ! -x "$TALLYD" ]; then
	echo "Bail out! no tallyd in $TALLY_BUILD"
	exit 1
fi

"$TALLYD" -c /dev/null --check-config >"$WORK/defaults" 2>&1
ok $? "tallyd -c /dev/null --check-config prints the defaults"
"$TALLYD" -c "$CONF" --check-config >"$WORK/example" 2>&1
rc=$?
ok $rc "tallyd accepts $CONF"
[ $rc -eq 0 ] || diag <"$WORK/example"

keys=$(sed -n 's/^\([a-z_][a-z0-9_]*\) = .*/\1/p' "$WORK/defaults")
[ -n "$keys" ] && [ "$(echo "$keys" | wc -l)" -eq "$(wc -l <"$WORK/defaults")" ]
ok $? "the defaults are one 'key = value' line per key ($(echo "$keys" | wc -w) keys)"

# Lines whose key is not deliberately changed must be equal.
# Both sides of the diff below run at once: each gets its own scratch file.
strip() {
	local k f="$1.strip"
	cp "$1" "$f"
	for k in $CHANGED_KEYS; do
		grep -v "^$k = " "$f" >"$f.1"
		mv "$f.1" "$f"
	done
	cat "$f"
}
diff <(strip "$WORK/defaults") <(strip "$WORK/example") >"$WORK/diff"
rc=$?
ok $rc "$CONF sets every key to tallyd's default${CHANGED_KEYS:+ (but $CHANGED_KEYS)}"
[ $rc -eq 0 ] || diag <"$WORK/diff"

# Each key an active line of its own, with a comment just above it.
missing=""
uncommented=""
for k in $keys; do
	line=$(grep -n "^$k *=" "$CONF" | head -1 | cut -d: -f1)
	if [ -z "$line" ]; then
		missing="$missing $k"
	elif [ "$line" -lt 2 ] ||
			! sed -n "$((line - 1))p" "$CONF" | grep -q '^#'; then
		uncommented="$uncommented $k"
	fi
done
[ -z "$missing" ]
ok $? "every key is set in $CONF${missing:+ (missing:$missing)}"
[ -z "$uncommented" ]
ok $? "every key in $CONF has a comment above it${uncommented:+ (none for:$uncommented)}"

# Keys that may come several times have no default line: each is shown
# in $CONF commented out, and --check-config prints what it is given.
REPEATED_KEYS="dataplane"
for k in $REPEATED_KEYS; do
	grep -q "^# $k = " "$CONF"
	ok $? "$CONF shows the repeatable key $k, commented out"
done
"$TALLYD" -c /dev/null -s 'dataplane = b /run/tally/dp-b.sock 10.0.0.3' \
	-s 'dataplane = c /run/tally/dp-c.sock' --check-config \
	>"$WORK/repeated" 2>&1 &&
	grep -qx 'dataplane = b /run/tally/dp-b.sock 10.0.0.3' "$WORK/repeated" &&
	grep -qx 'dataplane = c /run/tally/dp-c.sock' "$WORK/repeated"
ok $? "dataplane may be given twice, and --check-config prints both"
"$TALLYD" -c /dev/null -s 'dataplane = dp0 /run/tally/dp-b.sock' \
	--check-config >"$WORK/repeated" 2>&1
[ $? -eq 2 ] && grep -q "dp_name's" "$WORK/repeated"
ok $? "a dataplane named as dp_name's is refused"
keys="$keys
$REPEATED_KEYS"

# --- the documents name every key, and no other --------------------------
# doc_keys FILE: the keys a document lists, in its own format.
doc_keys() {
	case $1 in
	docs/control.md)
		# the table of "## Configuration file"
		sed -n '/^## Configuration file/,/^## /p' "$1" |
			sed -n 's/^| `\([a-z_][a-z0-9_]*\)` |.*/\1/p' ;;
	docs/tools/tallyd.md)
		sed -n '/^## Configuration/,/^## /p' "$1" |
			sed -n 's/^| `\([a-z_][a-z0-9_]*\)` |.*/\1/p' ;;
	docs/man/tallyd.8)
		# .BI "key = " value, in .SH CONFIGURATION
		sed -n '/^\.SH CONFIGURATION/,/^\.SH /p' "$1" |
			sed -n 's/^\.BI\{0,1\} "\{0,1\}\([a-z_][a-z0-9_]*\) = .*/\1/p' ;;
	esac
}
for doc in docs/control.md docs/tools/tallyd.md docs/man/tallyd.8; do
	doc_keys "$doc" | sort -u >"$WORK/doc"
	echo "$keys" | sort -u >"$WORK/real"
	absent=$(comm -23 "$WORK/real" "$WORK/doc" | tr '\n' ' ')
	stale=$(comm -13 "$WORK/real" "$WORK/doc" | tr '\n' ' ')
	[ -f "$doc" ] && [ -z "$absent" ]
	ok $? "$doc documents every key${absent:+ (missing: $absent)}"
	[ -z "$stale" ]
	ok $? "$doc documents no key tallyd lacks${stale:+ (unknown: $stale)}"
done

# --- man pages -------------------------------------------------------------
if command -v man >/dev/null 2>&1; then
	for page in docs/man/*.8; do
		MANWIDTH=80 LC_ALL=C.UTF-8 man --warnings -l "$page" \
			>/dev/null 2>"$WORK/man.err"
		rc=$?
		[ $rc -eq 0 ] && [ ! -s "$WORK/man.err" ]
		ok $? "$page renders without warnings"
		[ -s "$WORK/man.err" ] && diag <"$WORK/man.err"
	done
else
	skip "man not installed"
fi

# --- systemd units ---------------------------------------------------------
# unit_val UNIT KEY: the value of KEY= in UNIT (the last one).
unit_val() {
	sed -n "s/^$2=//p" "$1" | tail -1
}
# installed_paths: where meson installs each file of this build.
installed_paths() {
	if command -v meson >/dev/null 2>&1 &&
			meson introspect "$TALLY_BUILD" --installed \
			>"$WORK/installed.json" 2>/dev/null; then
		/usr/bin/python3 -c 'import json, sys
for v in json.load(open(sys.argv[1])).values(): print(v)' \
			"$WORK/installed.json"
		return
	fi
	# No meson on PATH: what the meson.build files say, default prefix.
	echo /usr/local/bin/tally-dp
	echo /usr/local/sbin/tallyd
}
installed_paths >"$WORK/installed"
grep -q . "$WORK/installed"
ok $? "meson's install layout is known ($(wc -l <"$WORK/installed") files)"

for u in tally-dp tallyd; do
	unit=$UNITS/$u.service
	exe=$(unit_val "$unit" ExecStart | awk '{print $1}')
	# bin/NAME or sbin/NAME: the prefix may differ, the rest may not.
	tail2=$(echo "$exe" | awk -F/ '{print $(NF-1) "/" $NF}')
	grep -q "/$tail2\$" "$WORK/installed"
	rc=$?
	ok $rc "$unit starts $exe, a path meson installs (.../$tail2)"
	[ $rc -eq 0 ] || diag <"$WORK/installed"
done

# tallyd's -c is tallyd's default file, and that is the example's name.
default_conf=$("$TALLYD" --help | sed -n 's/.*(default \(\/[^;)]*\).*/\1/p' | head -1)
unit_conf=$(unit_val "$UNITS/tallyd.service" ExecStart |
	sed -n 's/.* -c \([^ ]*\).*/\1/p')
[ -n "$default_conf" ] && [ "$unit_conf" = "$default_conf" ] &&
	[ "$(basename "$unit_conf")" = "$(basename "$CONF")" ]
ok $? "tallyd.service reads $unit_conf: tallyd's default, installed from $CONF"

# tally-dp.service: its environment file and the variables it uses.
envfile=$(unit_val "$UNITS/tally-dp.service" EnvironmentFile)
envsrc=$UNITS/$(basename "$envfile")
[ "$envfile" = /etc/tally/tally-dp.env ] && [ -f "$envsrc" ]
ok $? "tally-dp.service reads $envfile, installed from $envsrc"
execline=$(unit_val "$UNITS/tally-dp.service" ExecStart)
rc=0
for v in TALLY_DP_EAL_ARGS TALLY_DP_ARGS; do
	echo "$execline" | grep -q "\$$v\b" &&
		grep -q "^$v=" "$envsrc" || rc=1
done
echo "$execline" | grep -q '\$TALLY_DP_EAL_ARGS -- \$TALLY_DP_ARGS'
ok $(( rc | $? )) "ExecStart runs tally-dp \$TALLY_DP_EAL_ARGS -- \$TALLY_DP_ARGS, both set in $envsrc"

# env_val VAR: a variable of the environment file, quotes removed.
env_val() {
	sed -n "s/^$1=//p" "$envsrc" | tail -1 | sed 's/^"\(.*\)"$/\1/'
}
dp_args=$(env_val TALLY_DP_ARGS)
bad=""
for o in $(echo "$dp_args" | grep -o -- '--[a-z-]*'); do
	grep -q "{ \"${o#--}\", " dataplane/dp/main.c || bad="$bad $o"
done
[ -z "$bad" ] && echo "$dp_args" | grep -q -- '--addr '
ok $? "TALLY_DP_ARGS has --addr and only options tally-dp knows${bad:+ (unknown:$bad)}"

# conf_val KEY: tallyd's default (the example's value, when it passed).
conf_val() {
	sed -n "s/^$1 = //p" "$WORK/defaults"
}
admin=$(echo "$dp_args" | sed -n 's/.*--admin \([^ ]*\).*/\1/p')
[ "$admin" = "$(conf_val dp_admin)" ]
ok $? "tally-dp's --admin ($admin) is tallyd's dp_admin ($(conf_val dp_admin))"

# Directories: /run/<RuntimeDirectory> holds both sockets (in both
# units, preserved), /var/lib/<StateDirectory> the state file.
rc=0
for u in tally-dp tallyd; do
	rt=$(unit_val "$UNITS/$u.service" RuntimeDirectory | awk '{print $1}')
	[ "/run/$rt" = "$(dirname "$(conf_val dp_admin)")" ] &&
		[ "/run/$rt" = "$(dirname "$(conf_val control_socket)")" ] &&
		[ "$(unit_val "$UNITS/$u.service" RuntimeDirectoryPreserve)" = yes ] ||
		{ echo "$u: RuntimeDirectory=$rt" | diag; rc=1; }
done
ok $rc "both units make /run/$rt (preserved), where dp_admin and control_socket live"
st=$(unit_val "$UNITS/tallyd.service" StateDirectory)
[ "/var/lib/$st" = "$(dirname "$(conf_val state_file)")" ]
ok $? "tallyd.service's StateDirectory=$st holds state_file ($(conf_val state_file))"

# systemd's own check, against a scratch root that has the ExecStart
# paths (any executable will do) and the system's units.
if command -v systemd-analyze >/dev/null 2>&1 &&
		{ [ -d /usr/lib/systemd/system ] || [ -d /lib/systemd/system ]; }; then
	root=$WORK/root
	mkdir -p "$root/etc/systemd/system" "$root/usr/lib/systemd"
	cp -r "$( [ -d /usr/lib/systemd/system ] && echo /usr/lib/systemd/system ||
		echo /lib/systemd/system)" "$root/usr/lib/systemd/"
	for u in tally-dp tallyd; do
		exe=$(unit_val "$UNITS/$u.service" ExecStart | awk '{print $1}')
		mkdir -p "$root$(dirname "$exe")"
		cp /bin/true "$root$exe"
		cp "$UNITS/$u.service" "$root/etc/systemd/system/"
	done
	systemd-analyze verify --man=no --root="$root" \
		/etc/systemd/system/tally-dp.service \
		/etc/systemd/system/tallyd.service >"$WORK/verify" 2>&1
	! grep -i tally "$WORK/verify" >/dev/null
	ok $? "systemd-analyze verify finds nothing in the units"
	grep -i tally "$WORK/verify" | diag
else
	skip "systemd-analyze not installed"
fi

# --- what tallyd checks before it runs -----------------------------------
"$TALLYD" -c "$WORK" --check-config >"$WORK/out" 2>&1
rc=$?
[ $rc -eq 2 ] && grep -q "tallyd: $WORK: Is a directory" "$WORK/out"
ok $? "tallyd -c DIRECTORY: exit 2 (got $rc), 'Is a directory'"
[ $rc -eq 2 ] || diag <"$WORK/out"
"$TALLYD" -c /dev/null --set control_group=nosuchgroup-tally \
	--check-config >"$WORK/out" 2>&1
rc=$?
[ $rc -eq 2 ] &&
	grep -q "control_group 'nosuchgroup-tally': no such group" "$WORK/out"
ok $? "control_group=nosuchgroup fails --check-config: exit 2 (got $rc)"
[ $rc -eq 2 ] || diag <"$WORK/out"

# Port 0 (rendezvous, metrics): the start line names the port picked.
"$TALLYD" -c /dev/null --set "control_socket=$WORK/ctl.sock" \
	--set rendezvous=127.0.0.1:0 --set rendezvous_tls=off \
	--set metrics=127.0.0.1:0 \
	--set "state_file=$WORK/state.json" --set "dp_admin=$WORK/no-dp.sock" \
	>"$WORK/tallyd.log" 2>&1 &
pid=$!
for _ in $(seq 100); do
	grep -q "rendezvous" "$WORK/tallyd.log" && break
	sleep 0.05
done
rport=$(sed -n 's/.*rendezvous 127\.0\.0\.1:\([0-9]*\)[ ,].*/\1/p' "$WORK/tallyd.log")
mport=$(sed -n 's/.*metrics 127\.0\.0\.1:\([0-9]*\),.*/\1/p' "$WORK/tallyd.log")
[ "${rport:-0}" -gt 0 ] && [ "${mport:-0}" -gt 0 ] &&
	(exec 3<>"/dev/tcp/127.0.0.1/$rport") 2>/dev/null &&
	{ ! command -v curl >/dev/null 2>&1 ||
		curl -sf "http://127.0.0.1:$mport/metrics" | grep -q '^tallyd_up 1$'; }
ok $? "port 0: the start line logs the ports picked, and they answer (rendezvous $rport, metrics $mport)"
[ -n "$rport" ] || diag <"$WORK/tallyd.log"
kill -TERM $pid
wait $pid
ok $? "that tallyd stops with exit 0"

echo "1..$n"
[ "$nfail" -eq 0 ]

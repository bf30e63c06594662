# SPDX-License-Identifier: BSD-3-Clause
#
# Sourced first by every tests/e2e/*_test.sh: outside a testbed, skip
# unless root, then re-run the script inside `tools/testbed run` with the
# options in TESTBED_OPTS (the testbed always comes down afterwards).
if [ -z "${TESTBED_N:-}" ]; then
	if [ "$(id -u)" -ne 0 ] || ! ip netns list >/dev/null 2>&1; then
		echo "1..0 # SKIP needs root and ip netns"
		exit 0
	fi
	# shellcheck disable=SC2086
	exec "$TALLY_SRC/tools/testbed" run --prefix "te$$" $TESTBED_OPTS \
		-- "$0" "$@"
fi
. "$(dirname "$0")/lib.sh"

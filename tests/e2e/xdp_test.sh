#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# tally-dp on net_af_xdp keeps receiving however long it runs: block-sparse
# allreduces (density 1 %, error feedback, window 256, 352 elements a
# packet, as tools/bench-training's tally-sparse row) of four workers on
# 1 Gbit/s links, through a pool of 8191 mbufs, long enough for the pool
# to cycle many times over. When the driver's UMEM did not cover the
# whole pool (dataplane/dp/xdp_pool.c), the kernel dropped the mbufs
# outside it from the fill ring, reception stopped for good, and every
# worker timed out (here within the first 10 calls, and the next job got nothing either). Checks: every call
# of every worker equals the reference, the interface dropped nothing
# (ethtool's rx_queue_0_drops: the XDP socket had a buffer for every
# frame), and tally-dp still serves a new job afterwards.
TESTBED_OPTS="-n 4 --rate 1gbit"
. "$(dirname "$0")/preamble.sh"
TOKEN=5a5a5a5a5a5a5a5a

TALLY_PMD=net_af_xdp dp_start --mbufs 8191
ok $? "tally-dp starts on net_af_xdp with 8191 mbufs"
export WINDOW=256 ELEMS=352
job_add 1 "$TOKEN" 0 1 2 3 >/dev/null
allreduce_all 1 "$TOKEN" 4 sp --type f32 --size 16M --iters 40 --noise 1 \
	--codec sparse,density=0.01,ef=1 --no-barrier
grep -h "^stats:" "$WORK/sp.0" | sed "s/^/# rank 0 /"
drops=$(ethtool -S "$TESTBED_DP_IF" | awk '$1 == "rx_queue_0_drops:" { print $2 }')
echo "# $TESTBED_DP_IF rx_queue_0_drops: ${drops:-?}"
[ "${drops:-1}" -eq 0 ]
ok $? "the af_xdp socket had a buffer for every frame (no rx drops)"
dp_admin '{"cmd":"job_del","id":1}' >/dev/null
export WINDOW=64 ELEMS=256
job_add 2 "$TOKEN" 0 1 2 3 >/dev/null
allreduce_all 2 "$TOKEN" 4 dense --type f32 --size 1M --iters 2
finish

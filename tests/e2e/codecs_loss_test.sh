#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# codecs_test.sh on links that lose 1% of the UDP frames each way.
export CODECS_TESTBED="--loss-up 1 --loss-down 1"
exec "$(dirname "$0")/codecs_test.sh" "$@"

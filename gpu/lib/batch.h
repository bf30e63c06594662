/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * How long a worker with a full window waits before it reads its
 * results (batch.c): a quarter of the smoothed round trip, so that one
 * wake-up takes a batch of results (one recvmmsg(), one sendmmsg() of
 * the chunks they free) instead of waking for the first to arrive. No
 * I/O and no clock: window.c asks, then sleeps; tests/lib/batch_test.c
 * checks the rule.
 */
#ifndef TALLY_LIB_BATCH_H
#define TALLY_LIB_BATCH_H

#include <stdint.h>

#define TALLY_BATCH_DIV		4	/* the wait: srtt / 4 */
#define TALLY_BATCH_MIN_NS	20000u	/* shorter waits are not taken */
#define TALLY_BATCH_MAX_NS	500000u	/* longer ones are cut to this */

/*
 * The nanoseconds to wait before reading, or 0 to read (and wait on the
 * socket) at once: 0 unless every one of the window's slots is in
 * flight (in_flight >= window) and the call has chunks left to start
 * (more != 0; its last results end the call and are read at once), and
 * a round trip is known (srtt_us != 0). The wait is srtt_us / 4, 0 when
 * that is below TALLY_BATCH_MIN_NS (a fast path gains nothing from it),
 * at most TALLY_BATCH_MAX_NS, and 0 when it would reach limit_ns (the
 * next retransmission deadline or the call's time-out) from now_ns.
 */
uint64_t tally_batch_wait_ns(uint32_t srtt_us, uint32_t in_flight,
	uint32_t window, int more, uint64_t now_ns, uint64_t limit_ns);

#endif

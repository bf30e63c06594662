/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The batch wait of a full window (batch.h). On the testbed a worker
 * woke for about every 20th result and then read about 7 at a time; a
 * wait of a quarter of srtt before reading cut the workers' CPU a GiB
 * by about a tenth at the same speed (docs/benchmarks.md, 2026-11-26
 * "workers' CPU per byte"). Why it costs no speed: the chunks the batch
 * frees go out up to srtt / 4 later, while the rest of the window, three
 * quarters of it and more, keeps the path busy; a call's last results
 * are read at once.
 */
#include "batch.h"

uint64_t
tally_batch_wait_ns(uint32_t srtt_us, uint32_t in_flight, uint32_t window,
	int more, uint64_t now_ns, uint64_t limit_ns)
{
	uint64_t d;

	if (!more || window == 0 || in_flight < window || srtt_us == 0)
		return 0;
	d = (uint64_t)srtt_us * 1000u / TALLY_BATCH_DIV;
	if (d < TALLY_BATCH_MIN_NS)
		return 0;
	if (d > TALLY_BATCH_MAX_NS)
		d = TALLY_BATCH_MAX_NS;
	if (now_ns + d >= limit_ns)
		return 0;
	return d;
}

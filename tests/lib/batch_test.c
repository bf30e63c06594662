/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The batch wait of a full window (tally_batch_wait_ns(), gpu/lib/
 * batch.c): a quarter of srtt before a worker reads its results, only
 * with every slot in flight and chunks left to start, never below 20 us
 * or above 500 us, never up to the next deadline.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "lib/batch.h"

#define NOW	UINT64_C(1000000000000)
#define FAR	(NOW + UINT64_C(1000000000))

/* A full window 64 with chunks left, srtt 800 us: 200 us. */
static void
full_window_waits(void **state)
{
	(void)state;
	assert_int_equal(tally_batch_wait_ns(800, 64, 64, 1, NOW, FAR),
		200000);
	assert_int_equal(tally_batch_wait_ns(3000, 8, 8, 1, NOW, FAR),
		500000);	/* 750 us cut to 500 */
	assert_int_equal(tally_batch_wait_ns(80, 64, 64, 1, NOW, FAR),
		20000);		/* the shortest taken */
}

/* A free slot, the call's last chunks, no round trip yet: read now. */
static void
reads_at_once(void **state)
{
	(void)state;
	assert_int_equal(tally_batch_wait_ns(800, 63, 64, 1, NOW, FAR), 0);
	assert_int_equal(tally_batch_wait_ns(800, 0, 64, 1, NOW, FAR), 0);
	assert_int_equal(tally_batch_wait_ns(800, 64, 64, 0, NOW, FAR), 0);
	assert_int_equal(tally_batch_wait_ns(0, 64, 64, 1, NOW, FAR), 0);
	assert_int_equal(tally_batch_wait_ns(800, 0, 0, 1, NOW, FAR), 0);
	/* A fast path: srtt / 4 under 20 us gains nothing. */
	assert_int_equal(tally_batch_wait_ns(79, 64, 64, 1, NOW, FAR), 0);
}

/* A wait that would reach the next deadline is not taken. */
static void
deadline_first(void **state)
{
	(void)state;
	assert_int_equal(tally_batch_wait_ns(800, 64, 64, 1, NOW,
		NOW + 200000), 0);
	assert_int_equal(tally_batch_wait_ns(800, 64, 64, 1, NOW,
		NOW + 200001), 200000);
	assert_int_equal(tally_batch_wait_ns(800, 64, 64, 1, NOW, NOW), 0);
	assert_int_equal(tally_batch_wait_ns(800, 64, 64, 1, NOW, 0), 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(full_window_waits),
		cmocka_unit_test(reads_at_once),
		cmocka_unit_test(deadline_first),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The retransmission deadline's random spread (tally_retx_deadline()
 * in gpu/lib/retx.c): a packet that went again with timeout T is due
 * once more between T and 1.5 T from now, spread over that range, so
 * that packets lost together (an overflowing queue) do not all go again
 * at the same moment; two contexts (two ranks) draw differently.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "lib/retx.h"

#define DRAWS	4096
#define NOW	UINT64_C(1000000000000)

static int
cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Every draw in [T, 1.5 T), nearly all distinct, both ends reached. */
static void
test_range_and_spread(void **state)
{
	static uint64_t d[DRAWS];
	struct tally_retx rx;
	const uint32_t rto_us = 2000;
	unsigned int i, distinct = 1, low = 0, high = 0;

	(void)state;
	tally_retx_init(&rx, 2000, NOW ^ ((uint64_t)3 << 56));
	for (i = 0; i < DRAWS; i++) {
		d[i] = tally_retx_deadline(&rx, NOW, rto_us);
		assert_true(d[i] >= NOW + (uint64_t)rto_us * 1000);
		assert_true(d[i] < NOW + (uint64_t)rto_us * 1500);
		low += d[i] < NOW + (uint64_t)rto_us * 1100;
		high += d[i] >= NOW + (uint64_t)rto_us * 1400;
	}
	qsort(d, DRAWS, sizeof(d[0]), cmp_u64);
	for (i = 1; i < DRAWS; i++)
		distinct += d[i] != d[i - 1];
	assert_true(distinct >= DRAWS * 9 / 10);
	/* Each fifth of the range holds about a fifth of the draws. */
	assert_true(low > DRAWS / 10 && low < DRAWS * 3 / 10);
	assert_true(high > DRAWS / 10 && high < DRAWS * 3 / 10);
}

/* A timeout of 0 has nothing to spread. */
static void
test_zero_timeout(void **state)
{
	struct tally_retx rx;

	(void)state;
	tally_retx_init(&rx, 2000, NOW);
	assert_true(tally_retx_deadline(&rx, NOW, 0) == NOW);
	assert_true(tally_retx_deadline(&rx, NOW, 1) >= NOW + 1000u);
	assert_true(tally_retx_deadline(&rx, NOW, 1) < NOW + 1500u);
}

/* Two ranks' contexts, started at the same moment, draw differently
 * (ctx.c seeds with the time, the rank and the context's address). */
static void
test_ranks_differ(void **state)
{
	struct tally_retx a, b;
	unsigned int i, same = 0;

	(void)state;
	tally_retx_init(&a, 2000, NOW ^ ((uint64_t)0 << 56) ^ 0x1000);
	tally_retx_init(&b, 2000, NOW ^ ((uint64_t)1 << 56) ^ 0x2000);
	for (i = 0; i < 64; i++)
		same += tally_retx_deadline(&a, NOW, 200000) ==
			tally_retx_deadline(&b, NOW, 200000);
	assert_true(same < 4);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_range_and_spread),
		cmocka_unit_test(test_zero_timeout),
		cmocka_unit_test(test_ranks_differ),
	};

	return cmocka_run_group_tests_name("retx", tests, NULL, NULL);
}

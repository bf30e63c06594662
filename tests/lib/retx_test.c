/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The retransmission deadline's random spread (tally_lib_retx_deadline()
 * in gpu/lib/window.c): a packet that went again with timeout T is due
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

#include "lib/ctx.h"

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
	struct tally_ctx ctx;
	const uint32_t rto_us = 2000;
	unsigned int i, distinct = 1, low = 0, high = 0;

	(void)state;
	memset(&ctx, 0, sizeof(ctx));
	ctx.rank = 3;
	for (i = 0; i < DRAWS; i++) {
		d[i] = tally_lib_retx_deadline(&ctx, NOW, rto_us);
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
	struct tally_ctx ctx;

	(void)state;
	memset(&ctx, 0, sizeof(ctx));
	assert_true(tally_lib_retx_deadline(&ctx, NOW, 0) == NOW);
	assert_true(tally_lib_retx_deadline(&ctx, NOW, 1) >= NOW + 1000);
	assert_true(tally_lib_retx_deadline(&ctx, NOW, 1) < NOW + 1500);
}

/* Two ranks' contexts, started at the same moment, draw differently. */
static void
test_ranks_differ(void **state)
{
	struct tally_ctx a, b;
	unsigned int i, same = 0;

	(void)state;
	memset(&a, 0, sizeof(a));
	memset(&b, 0, sizeof(b));
	a.rank = 0;
	b.rank = 1;
	for (i = 0; i < 64; i++)
		same += tally_lib_retx_deadline(&a, NOW, 200000) ==
			tally_lib_retx_deadline(&b, NOW, 200000);
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

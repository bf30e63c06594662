/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The rendezvous' per-source counts (control/tallyd/srcs.c): counts go up
 * and down per address, a source leaves at 0, the table holds exactly as
 * many sources as promised, and a long churn of sources that collide in
 * the table (removals in the middle of probe runs) never loses or
 * invents a count: checked against a plain array after every step.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>

#include "srcs.h"

static void
counts_up_and_down(void **state)
{
	struct tallyd_srcs *t = tallyd_srcs_create(4);

	(void)state;
	assert_non_null(t);
	assert_int_equal(tallyd_srcs_get(t, 0x0a000001), 0);
	for (int i = 0; i < 3; i++)
		assert_int_equal(tallyd_srcs_add(t, 0x0a000001), 0);
	assert_int_equal(tallyd_srcs_add(t, 0x0a000002), 0);
	assert_int_equal(tallyd_srcs_get(t, 0x0a000001), 3);
	assert_int_equal(tallyd_srcs_get(t, 0x0a000002), 1);
	assert_int_equal(tallyd_srcs_used(t), 2);
	tallyd_srcs_sub(t, 0x0a000002);
	assert_int_equal(tallyd_srcs_get(t, 0x0a000002), 0);
	assert_int_equal(tallyd_srcs_used(t), 1);
	tallyd_srcs_sub(t, 0x0a000002);	/* absent: nothing happens */
	assert_int_equal(tallyd_srcs_used(t), 1);
	tallyd_srcs_destroy(t);
	tallyd_srcs_destroy(NULL);
	assert_null(tallyd_srcs_create(0));
	assert_int_equal(errno, EINVAL);
}

static void
holds_what_it_promises(void **state)
{
	struct tallyd_srcs *t = tallyd_srcs_create(5);

	(void)state;
	for (uint32_t ip = 1; ip <= 5; ip++)
		assert_int_equal(tallyd_srcs_add(t, ip), 0);
	assert_int_equal(tallyd_srcs_add(t, 6), -ENOSPC);
	assert_int_equal(tallyd_srcs_add(t, 5), 0);	/* known: fine */
	tallyd_srcs_sub(t, 1);
	assert_int_equal(tallyd_srcs_add(t, 6), 0);
	tallyd_srcs_destroy(t);
}

/* Random adds and subs over few addresses, in a small table. */
static void
churn_matches_a_plain_count(void **state)
{
	enum { NIP = 48 };
	struct tallyd_srcs *t = tallyd_srcs_create(NIP);
	unsigned int want[NIP] = { 0 };
	uint64_t x = 88172645463325252ull;

	(void)state;
	assert_non_null(t);
	for (int step = 0; step < 200000; step++) {
		unsigned int i, used = 0;
		uint32_t ip;

		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		i = (unsigned int)(x % NIP);
		/* Addresses that differ only above the hashed bits collide. */
		ip = (uint32_t)i << 25 | 7;
		if ((x >> 32) % 3 != 0) {
			assert_int_equal(tallyd_srcs_add(t, ip), 0);
			want[i]++;
		} else {
			tallyd_srcs_sub(t, ip);
			if (want[i] > 0)
				want[i]--;
		}
		if (step % 97 != 0)
			continue;
		for (unsigned int k = 0; k < NIP; k++) {
			assert_int_equal(tallyd_srcs_get(t,
				(uint32_t)k << 25 | 7), want[k]);
			used += want[k] > 0;
		}
		assert_int_equal(tallyd_srcs_used(t), used);
	}
	tallyd_srcs_destroy(t);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(counts_up_and_down),
		cmocka_unit_test(holds_what_it_promises),
		cmocka_unit_test(churn_matches_a_plain_count),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

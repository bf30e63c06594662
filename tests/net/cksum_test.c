/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tally_net_raw_cksum() equals DPDK's rte_raw_cksum() for every length
 * up to a jumbo frame, at every alignment, on random and extreme data.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>

#include <rte_ip.h>

#include "net/net.h"

#define MAXLEN 9100

static uint8_t buf[MAXLEN + 8];

static uint64_t rng = 0x243f6a8885a308d3ull;

static uint8_t
rnd8(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint8_t)rng;
}

static void
check_all(void)
{
	for (size_t align = 0; align < 8; align++) {
		for (size_t len = 0; len <= MAXLEN;
				len += len < 300 ? 1 : 97) {
			uint16_t want = rte_raw_cksum(buf + align, len);
			uint16_t got = tally_net_raw_cksum(buf + align, len);

			if (want != got)
				fail_msg("len %zu align %zu: %04x, want %04x",
					len, align, got, want);
		}
	}
}

static void
random_data(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = rnd8();
	check_all();
}

/* All ones: every carry is taken, the sum folds many times. */
static void
all_ones_and_zeroes(void **state)
{
	(void)state;
	memset(buf, 0xff, sizeof(buf));
	check_all();
	memset(buf, 0, sizeof(buf));
	check_all();
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(random_data),
		cmocka_unit_test(all_ones_and_zeroes),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

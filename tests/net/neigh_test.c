/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The neighbour cache: sizes, learn and lookup, refresh, replacement
 * when full, and that a lookup never answers with another host's MAC.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <string.h>

#include "frame.h"

/* 10.(i >> 16).(i >> 8).i, and a MAC made from i. */
static rte_be32_t
ip_of(uint32_t i)
{
	return rte_cpu_to_be_32(RTE_IPV4(10, (i >> 16) & 0xff, (i >> 8) & 0xff,
		i & 0xff));
}

static struct rte_ether_addr
mac_of(uint32_t i, uint8_t gen)
{
	return (struct rte_ether_addr){{ 0x02, gen, (uint8_t)(i >> 24),
		(uint8_t)(i >> 16), (uint8_t)(i >> 8), (uint8_t)i }};
}

static void
bad_sizes(void **state)
{
	static const unsigned int sizes[] = { 0, 3, 1000, 1u << 25, ~0u };

	(void)state;
	for (size_t i = 0; i < RTE_DIM(sizes); i++) {
		errno = 0;
		assert_null(tally_net_neigh_create(sizes[i], SOCKET_ID_ANY));
		assert_int_equal(errno, EINVAL);
	}
	tally_net_neigh_destroy(NULL);
}

static void
learn_and_lookup(void **state)
{
	struct tally_net_neigh *nb = tally_net_neigh_create(1024,
		SOCKET_ID_ANY);

	(void)state;
	assert_non_null(nb);
	assert_null(tally_net_neigh_lookup(nb, ip_of(1)));
	/* Two /24s of hosts: the table half full, none forgotten. */
	for (uint32_t i = 1; i < 511; i++) {
		struct rte_ether_addr mac = mac_of(i, 0);

		tally_net_neigh_learn(nb, ip_of(i), &mac);
	}
	for (uint32_t i = 1; i < 511; i++) {
		const struct rte_ether_addr *got =
			tally_net_neigh_lookup(nb, ip_of(i));
		struct rte_ether_addr mac = mac_of(i, 0);

		assert_non_null(got);
		assert_memory_equal(got, &mac, 6);
	}
	assert_null(tally_net_neigh_lookup(nb, ip_of(511)));
	assert_null(tally_net_neigh_lookup(nb, ip_of(0x010001)));
	/* 0.0.0.0 is never learned (it marks empty entries). */
	{
		struct rte_ether_addr mac = mac_of(0, 0);

		tally_net_neigh_learn(nb, 0, &mac);
		assert_null(tally_net_neigh_lookup(nb, 0));
	}
	tally_net_neigh_destroy(nb);
}

static void
refresh(void **state)
{
	struct tally_net_neigh *nb = tally_net_neigh_create(4, SOCKET_ID_ANY);
	struct rte_ether_addr a = mac_of(7, 1), b = mac_of(7, 2);

	(void)state;
	assert_non_null(nb);
	for (int round = 0; round < 10; round++) {
		tally_net_neigh_learn(nb, ip_of(7), round & 1 ? &b : &a);
		assert_memory_equal(tally_net_neigh_lookup(nb, ip_of(7)),
			round & 1 ? &b : &a, 6);
	}
	/* Refreshing took no extra entries: three others still fit. */
	for (uint32_t i = 1; i <= 3; i++) {
		struct rte_ether_addr m = mac_of(100 + i, 0);

		tally_net_neigh_learn(nb, ip_of(100 + i), &m);
	}
	assert_memory_equal(tally_net_neigh_lookup(nb, ip_of(7)), &b, 6);
	for (uint32_t i = 1; i <= 3; i++) {
		struct rte_ether_addr m = mac_of(100 + i, 0);

		assert_memory_equal(tally_net_neigh_lookup(nb,
			ip_of(100 + i)), &m, 6);
	}
	tally_net_neigh_destroy(nb);
}

/*
 * Many more hosts than entries: the one just learned is always found,
 * no more are found than fit, and none is ever found with a wrong MAC.
 */
static void
replace_when_full(void **state)
{
	static const unsigned int sizes[] = { 1, 2, 8, 64 };

	(void)state;
	for (size_t s = 0; s < RTE_DIM(sizes); s++) {
		struct tally_net_neigh *nb = tally_net_neigh_create(sizes[s],
			SOCKET_ID_ANY);
		unsigned int found = 0;

		assert_non_null(nb);
		for (uint32_t i = 1; i <= 2000; i++) {
			struct rte_ether_addr mac = mac_of(i * 7919, 3);

			tally_net_neigh_learn(nb, ip_of(i * 7919), &mac);
			assert_memory_equal(tally_net_neigh_lookup(nb,
				ip_of(i * 7919)), &mac, 6);
		}
		for (uint32_t i = 1; i <= 2000; i++) {
			const struct rte_ether_addr *got =
				tally_net_neigh_lookup(nb, ip_of(i * 7919));
			struct rte_ether_addr mac = mac_of(i * 7919, 3);

			if (got == NULL)
				continue;
			found++;
			assert_memory_equal(got, &mac, 6);
		}
		assert_true(found >= 1 && found <= sizes[s]);
		tally_net_neigh_destroy(nb);
	}
}

int
main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(bad_sizes),
		cmocka_unit_test(learn_and_lookup),
		cmocka_unit_test(refresh),
		cmocka_unit_test(replace_when_full),
	};
	int rc;

	(void)argc;
	if (test_eal_init(argv[0]) != 0)
		return 1;
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	test_eal_fini();
	return rc;
}

/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The mbuf pool tally-dp gives a net_af_xdp port (dataplane/dp/
 * xdp_pool.c), on a real EAL with 4 KiB pages (--no-huge), as the tests,
 * the benchmarks and the quickstart run tally-dp.
 *
 * What it pins down: every object of the pool lies in the UMEM that DPDK
 * 22.11's af_xdp driver registers for it (the first chunk's page,
 * populated size x object size bytes), for pools of every size tally-dp
 * makes, so the kernel never drops a fill-ring entry or a transmit
 * descriptor as out of range (which lost frames and their mbufs, then
 * stopped reception for good: the block-sparse stall of
 * tools/bench-training). A plain pktmbuf pool, what tally-dp made before,
 * does not: with 4 KiB pages its objects lie one a page and the upper
 * part of the pool is out of the UMEM. The mbufs keep the data room
 * asked for, and a room that does not fit a frame is refused. The MTU
 * such a pool carries is what the kernel writes into one of its chunks.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>

#include <rte_errno.h>
#include <rte_mbuf.h>

#include "dp.h"
#include "frame.h"

/* The data room tally-dp asks for at MTU 1500 (RTE_MBUF_DEFAULT_BUF_SIZE). */
#define ROOM	2176

/* Every object of a pool of n inside the UMEM; mbufs that work. */
static void
check_pool(unsigned int n)
{
	struct rte_mempool *mp;
	struct rte_mbuf *m;
	unsigned int outside = 1;

	mp = tally_dp_xdp_pool_create("xdp_test", n, 256, ROOM,
		SOCKET_ID_ANY);
	assert_non_null(mp);
	assert_int_equal(mp->populated_size, n);
	assert_int_equal(rte_mempool_calc_obj_size(mp->elt_size, mp->flags,
		NULL), TALLY_DP_XDP_FRAME);
	assert_int_equal(tally_dp_xdp_pool_check(mp, &outside), 0);
	assert_int_equal(outside, 0);
	assert_true(rte_pktmbuf_data_room_size(mp) >= ROOM);
	m = rte_pktmbuf_alloc(mp);
	assert_non_null(m);
	assert_non_null(rte_pktmbuf_append(m, 1514));
	rte_pktmbuf_free(m);
	rte_mempool_free(mp);
}

static void
pools_fit_umem(void **state)
{
	(void)state;
	check_pool(1023);
	check_pool(4095);
	check_pool(16383);
}

/* The plain pool tally-dp made before: out of the UMEM on 4 KiB pages. */
static void
plain_pool_does_not(void **state)
{
	struct rte_mempool *mp;
	unsigned int outside = 0;

	(void)state;
	mp = rte_pktmbuf_pool_create("plain_test", 4095, 256, 0, ROOM,
		SOCKET_ID_ANY);
	assert_non_null(mp);
	assert_int_equal(tally_dp_xdp_pool_check(mp, &outside), -ERANGE);
	assert_true(outside > 4095 / 4);
	rte_mempool_free(mp);
}

static void
room_too_big(void **state)
{
	(void)state;
	assert_null(tally_dp_xdp_pool_create("xdp_big", 1023, 256, 4000,
		SOCKET_ID_ANY));
	assert_int_equal(rte_errno, EINVAL);
	assert_int_equal(errno, EINVAL);
}

/*
 * The MTU tally-dp allows on af_xdp is what the kernel takes into a
 * UMEM chunk: the chunk (one object) less the headroom DPDK 22.11's
 * driver registers (object header, mbuf, private area, mbuf headroom)
 * less XDP_PACKET_HEADROOM, less the Ethernet header: 3506 here.
 */
static void
max_mtu_is_the_chunk(void **state)
{
	struct rte_mempool *mp;
	unsigned int umem_headroom;

	(void)state;
	mp = tally_dp_xdp_pool_create("xdp_mtu", 1023, 256, ROOM,
		SOCKET_ID_ANY);
	assert_non_null(mp);
	umem_headroom = mp->header_size + (unsigned int)sizeof(struct rte_mbuf) +
		rte_pktmbuf_priv_size(mp) + RTE_PKTMBUF_HEADROOM;
	assert_int_equal(tally_dp_xdp_max_mtu(mp), TALLY_DP_XDP_FRAME -
		umem_headroom - 256 - RTE_ETHER_HDR_LEN);
	assert_int_equal(tally_dp_xdp_max_mtu(mp), 3506);
	rte_mempool_free(mp);
}

int
main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(pools_fit_umem),
		cmocka_unit_test(plain_pool_does_not),
		cmocka_unit_test(room_too_big),
		cmocka_unit_test(max_mtu_is_the_chunk),
	};
	int rc;

	(void)argc;
	if (test_eal_init(argv[0]) != 0)
		return 1;
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	test_eal_fini();
	return rc;
}

/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The mbuf pool of a net_af_xdp port, laid out so that the port can use
 * all of it.
 *
 * DPDK 22.11's af_xdp driver registers the pool's memory with the kernel
 * as one UMEM: from the page of the pool's first memory chunk, populated
 * size times object size bytes, as if the objects lay back to back. A
 * plain pktmbuf pool does not: on 4 KiB pages (--no-huge, as the tests
 * and the quickstart run) no object may cross a page, so objects of 2368
 * bytes lie one a page and the upper 42 % of the pool is outside the
 * UMEM; on huge pages the tail of each page is left over, so the last
 * objects are. The kernel drops a fill-ring entry or a transmit
 * descriptor outside the UMEM without a word (the frame is lost, its
 * mbuf never comes back), and once the pool has cycled into that part,
 * the fill ring runs dry and the port receives nothing ever again.
 *
 * So for af_xdp every object is exactly one frame of
 * TALLY_DP_XDP_FRAME bytes (a divisor of every page size, no spreading
 * padding), all in one memzone that starts on a frame boundary: objects
 * then fill pages with no gap and cross none, and the pool spans exactly
 * what the driver registers. tally_dp_xdp_pool_check() verifies that.
 */
#include <errno.h>
#include <stdio.h>
#include <unistd.h>

#include <rte_errno.h>
#include <rte_ether.h>
#include <rte_mbuf.h>
#include <rte_mbuf_pool_ops.h>
#include <rte_memzone.h>
#include <rte_mempool.h>

#include "dp.h"

/* What the objects' headers must lie in, by the driver's computation. */
struct span {
	uintptr_t base;		/* the first chunk's page */
	uint64_t len;		/* bytes the UMEM covers from base */
	uint32_t objsz;		/* header + element + trailer */
	unsigned int outside;	/* objects that do not fit */
};

/* rte_mempool_obj_iter() callback: counts obj when it leaves the span. */
static void
count_outside(struct rte_mempool *mp, void *arg, void *obj, unsigned int i)
{
	struct span *s = arg;
	uintptr_t hdr = (uintptr_t)obj - mp->header_size;

	(void)i;
	if (hdr < s->base || hdr - s->base + s->objsz > s->len)
		s->outside++;
}

/*
 * Whether every object of mp lies in the memory net_af_xdp registers
 * for it (DPDK 22.11: the first chunk's page, populated_size x object
 * size bytes plus the chunk's offset in that page). Borrows mp. Returns
 * 0, or -ERANGE with *outside (when not NULL) set to how many do not.
 */
int
tally_dp_xdp_pool_check(struct rte_mempool *mp, unsigned int *outside)
{
	struct rte_mempool_memhdr *first = STAILQ_FIRST(&mp->mem_list);
	struct span s = { 0 };
	uintptr_t addr;

	if (first == NULL)
		return -ERANGE;
	addr = (uintptr_t)first->addr;
	s.base = addr & ~((uintptr_t)getpagesize() - 1);
	s.objsz = rte_mempool_calc_obj_size(mp->elt_size, mp->flags, NULL);
	s.len = (uint64_t)mp->populated_size * s.objsz + (addr - s.base);
	rte_mempool_obj_iter(mp, count_outside, &s);
	if (outside != NULL)
		*outside = s.outside;
	return s.outside == 0 ? 0 : -ERANGE;
}

/* rte_mempool_populate_iova()'s free callback: the chunk's memzone. */
static void
free_memzone(struct rte_mempool_memhdr *memhdr, void *opaque)
{
	(void)memhdr;
	rte_memzone_free(opaque);
}

/*
 * Gives mp its n objects in one memzone that starts on a frame boundary
 * (a page of 4 KiB, and TALLY_DP_XDP_FRAME divides huge pages): objects
 * of one frame then lie back to back and none crosses a page. The
 * memzone goes with the pool. Returns 0 or a positive errno.
 */
static int
populate(struct rte_mempool *mp, unsigned int n, int socket)
{
	char mzname[RTE_MEMZONE_NAMESIZE];
	const struct rte_memzone *mz;
	int ret;

	ret = snprintf(mzname, sizeof(mzname), "XDP_%s", mp->name);
	if (ret < 0 || (size_t)ret >= sizeof(mzname))
		return ENAMETOOLONG;
	mz = rte_memzone_reserve_aligned(mzname, (size_t)n *
		TALLY_DP_XDP_FRAME, socket, 0, TALLY_DP_XDP_FRAME);
	if (mz == NULL)
		return rte_errno;
	ret = rte_mempool_populate_iova(mp, mz->addr, mz->iova, mz->len,
		free_memzone, (void *)(uintptr_t)mz);
	if (ret < 0) {
		rte_memzone_free(mz);
		return -ret;
	}
	return mp->populated_size == n ? 0 : ENOMEM;
}

/*
 * A pktmbuf pool of n mbufs (per-lcore cache of cache), each an object
 * of exactly TALLY_DP_XDP_FRAME bytes with a data room of at least room,
 * for a net_af_xdp port, on socket. Returns NULL with rte_errno and errno
 * set: EINVAL when room does not fit a frame, ERANGE when an object
 * lies outside the UMEM all the same (tally_dp_xdp_pool_check()), what
 * DPDK said otherwise. The caller owns the pool (rte_mempool_free()).
 */
struct rte_mempool *
tally_dp_xdp_pool_create(const char *name, unsigned int n, unsigned int cache,
	uint16_t room, int socket)
{
	/* No padding between objects; af_xdp never uses IOVAs. */
	const unsigned int flags = RTE_MEMPOOL_F_NO_SPREAD |
		RTE_MEMPOOL_F_NO_IOVA_CONTIG;
	struct rte_pktmbuf_pool_private priv = { 0 };
	struct rte_mempool_objsz sz;
	struct rte_mempool *mp;
	uint32_t elt;
	int err = EINVAL;

	/* The header before an element: the rest of a frame is the mbuf. */
	(void)rte_mempool_calc_obj_size(RTE_CACHE_LINE_SIZE, flags, &sz);
	elt = TALLY_DP_XDP_FRAME - sz.header_size;
	if (rte_mempool_calc_obj_size(elt, flags, NULL) != TALLY_DP_XDP_FRAME ||
			elt < sizeof(struct rte_mbuf) + (uint32_t)room)
		goto fail;
	priv.mbuf_data_room_size = (uint16_t)(elt - sizeof(struct rte_mbuf));
	mp = rte_mempool_create_empty(name, n, elt, cache, sizeof(priv),
		socket, flags);
	if (mp == NULL) {
		err = rte_errno;
		goto fail;
	}
	err = -rte_mempool_set_ops_byname(mp, rte_mbuf_best_mempool_ops(),
		NULL);
	if (err == 0) {
		rte_pktmbuf_pool_init(mp, &priv);
		err = populate(mp, n, socket);
	}
	if (err == 0) {
		rte_mempool_obj_iter(mp, rte_pktmbuf_init, NULL);
		err = -tally_dp_xdp_pool_check(mp, NULL);
	}
	if (err == 0)
		return mp;
	rte_mempool_free(mp);
fail:
	rte_errno = err;
	errno = err;
	return NULL;
}

/*
 * The largest L3 MTU a net_af_xdp port whose rx pool is mp receives
 * whole: DPDK 22.11's driver has the kernel write a frame 256 bytes
 * (XDP_PACKET_HEADROOM) past the mbuf's own headroom, so a frame gets
 * the data room less both; the kernel drops a longer one without a word
 * (and a veth refuses XDP when its peer's MTU is over the same bound).
 * With 4 KiB objects that is 3,520-byte frames, MTU 3506. The driver's
 * own max_mtu assumes a smaller object header and is 36 bytes too high.
 * Borrows mp; 0 when the room holds no Ethernet header.
 */
uint16_t
tally_dp_xdp_max_mtu(struct rte_mempool *mp)
{
	unsigned int room = rte_pktmbuf_data_room_size(mp);
	unsigned int lost = RTE_PKTMBUF_HEADROOM + TALLY_DP_XDP_HEADROOM +
		RTE_ETHER_HDR_LEN;

	return room > lost ? (uint16_t)(room - lost) : 0;
}

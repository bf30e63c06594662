/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The port: mempools, queues (one tx queue per worker lcore, as many rx
 * queues as the port has up to one per worker), offloads the port offers,
 * and how tally frames reach the lcore that owns their slot: rte_flow
 * rules steering each UDP port of the range to its lcore's queue where
 * the port supports them, otherwise the lcores hand frames to each other
 * over rte_rings (software dispatch).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <rte_ethdev.h>
#include <rte_flow.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>

#include "dp.h"

#define RX_DESC 1024
#define TX_DESC 1024
#define POOL_CACHE 256
/* A result's headers, rounded to a cache line, after the headroom. */
#define HDR_ROOM (RTE_PKTMBUF_HEADROOM + \
	RTE_ALIGN_CEIL(TALLY_NET_HDRS_LEN, RTE_CACHE_LINE_SIZE))

/* One rule: UDP to our address and port base+q goes to queue q. */
static int
flow_rule(struct tally_dp *dp, uint16_t q, struct rte_flow_error *err)
{
	struct rte_flow_attr attr = { .ingress = 1 };
	struct rte_flow_item_ipv4 ip = { .hdr.dst_addr = dp->self.ip };
	struct rte_flow_item_ipv4 ip_mask = { .hdr.dst_addr = RTE_BE32(~0u) };
	struct rte_flow_item_udp udp = {
		.hdr.dst_port = rte_cpu_to_be_16((uint16_t)
			(rte_be_to_cpu_16(dp->self.port) + q)),
	};
	struct rte_flow_item_udp udp_mask = { .hdr.dst_port = RTE_BE16(0xffff) };
	struct rte_flow_item pattern[] = {
		{ .type = RTE_FLOW_ITEM_TYPE_ETH },
		{ .type = RTE_FLOW_ITEM_TYPE_IPV4, .spec = &ip, .mask = &ip_mask },
		{ .type = RTE_FLOW_ITEM_TYPE_UDP, .spec = &udp, .mask = &udp_mask },
		{ .type = RTE_FLOW_ITEM_TYPE_END },
	};
	struct rte_flow_action_queue queue = { .index = q };
	struct rte_flow_action actions[] = {
		{ .type = RTE_FLOW_ACTION_TYPE_QUEUE, .conf = &queue },
		{ .type = RTE_FLOW_ACTION_TYPE_END },
	};

	if (rte_flow_validate(dp->port_id, &attr, pattern, actions, err) != 0)
		return -ENOTSUP;
	return rte_flow_create(dp->port_id, &attr, pattern, actions, err) ?
		0 : -ENOTSUP;
}

/*
 * Steers with rte_flow when every worker has its own rx queue and the
 * port takes the rules; falls back to software dispatch otherwise.
 */
static void
choose_steering(struct tally_dp *dp)
{
	struct rte_flow_error err;
	uint16_t q;

	dp->steer_flow = 0;
	if (dp->nworkers == 1 || dp->nb_rxq < dp->nworkers)
		return;
	for (q = 0; q < dp->nworkers; q++)
		if (flow_rule(dp, q, &err) != 0)
			break;
	if (q == dp->nworkers) {
		dp->steer_flow = 1;
		return;
	}
	rte_flow_flush(dp->port_id, &err);
}

/*
 * The pool of received frames and result bodies, and the one of the
 * results' header mbufs and indirect mbufs (two a frame sent; small, and
 * one pool, so that a sent frame goes back in one put). A port that
 * takes no chains gets its results linearized into the header mbuf,
 * which then needs the full data room: it uses dp->pool for them.
 */
static int
make_pools(struct tally_dp *dp, unsigned int nb_mbufs, uint16_t mtu, int xdp)
{
	unsigned int room = RTE_PKTMBUF_HEADROOM + RTE_ETHER_HDR_LEN +
		RTE_ETHER_CRC_LEN + mtu;
	int socket = rte_eth_dev_socket_id(dp->port_id);

	if (room < RTE_MBUF_DEFAULT_BUF_SIZE)
		room = RTE_MBUF_DEFAULT_BUF_SIZE;
	if (socket < 0)
		socket = (int)rte_socket_id();
	/* net_af_xdp hands the kernel every mbuf: xdp_pool.c says why. Its
	 * mbufs have the room of a 4 KiB frame, whatever the MTU; what
	 * that room carries bounds the MTU (-EMSGSIZE above). */
	if (xdp)
		dp->pool = tally_dp_xdp_pool_create("tally_mbufs", nb_mbufs,
			POOL_CACHE, RTE_MBUF_DEFAULT_BUF_SIZE, socket);
	else
		dp->pool = rte_pktmbuf_pool_create("tally_mbufs", nb_mbufs,
			POOL_CACHE, 0, (uint16_t)room, socket);
	if (dp->pool == NULL)
		return -rte_errno;
	if (xdp) {
		dp->max_mtu = tally_dp_xdp_max_mtu(dp->pool);
		if (mtu > dp->max_mtu)
			return -EMSGSIZE;
	}
	if (!dp->tx_chains) {
		dp->hdr_pool = dp->pool;
		return 0;
	}
	dp->hdr_pool = rte_pktmbuf_pool_create("tally_hdrs", 2 * nb_mbufs + 1,
		POOL_CACHE, 0, HDR_ROOM, socket);
	if (dp->hdr_pool == NULL)
		return -rte_errno;
	return 0;
}

int
tally_dp_port_init(struct tally_dp *dp, unsigned int nb_mbufs, uint16_t mtu)
{
	struct rte_eth_conf conf = { .rxmode.mtu = mtu };
	struct rte_eth_dev_info info;
	uint16_t nrxd = RX_DESC, ntxd = TX_DESC, q;
	int socket, ret;

	if (!rte_eth_dev_is_valid_port(dp->port_id))
		return -ENODEV;
	ret = rte_eth_dev_info_get(dp->port_id, &info);
	if (ret != 0)
		return ret;
	dp->max_mtu = info.max_mtu;
	if (info.max_tx_queues < dp->nworkers)
		return -EINVAL;
	/* Results are chains (headers, then a clone of the shared body);
	 * a port that cannot send chains gets them linearized. */
	dp->tx_chains = (info.tx_offload_capa &
		RTE_ETH_TX_OFFLOAD_MULTI_SEGS) != 0;
	if (dp->tx_chains)
		conf.txmode.offloads |= RTE_ETH_TX_OFFLOAD_MULTI_SEGS;
	dp->nb_rxq = RTE_MIN(dp->nworkers, info.max_rx_queues);
	if (info.rx_offload_capa & RTE_ETH_RX_OFFLOAD_IPV4_CKSUM)
		conf.rxmode.offloads |= RTE_ETH_RX_OFFLOAD_IPV4_CKSUM;
	if (info.rx_offload_capa & RTE_ETH_RX_OFFLOAD_UDP_CKSUM)
		conf.rxmode.offloads |= RTE_ETH_RX_OFFLOAD_UDP_CKSUM;
	ret = make_pools(dp, nb_mbufs, mtu, info.driver_name != NULL &&
		strstr(info.driver_name, "af_xdp") != NULL);
	if (ret != 0)
		return ret;
	ret = rte_eth_dev_configure(dp->port_id, dp->nb_rxq, dp->nworkers, &conf);
	if (ret != 0)
		return ret;
	ret = rte_eth_dev_adjust_nb_rx_tx_desc(dp->port_id, &nrxd, &ntxd);
	if (ret != 0)
		return ret;
	socket = rte_eth_dev_socket_id(dp->port_id);
	for (q = 0; q < dp->nb_rxq; q++) {
		ret = rte_eth_rx_queue_setup(dp->port_id, q, nrxd, socket, NULL,
			dp->pool);
		if (ret != 0)
			return ret;
	}
	for (q = 0; q < dp->nworkers; q++) {
		ret = rte_eth_tx_queue_setup(dp->port_id, q, ntxd, socket, NULL);
		if (ret != 0)
			return ret;
	}
	ret = rte_eth_dev_start(dp->port_id);
	if (ret != 0)
		return ret;
	ret = rte_eth_macaddr_get(dp->port_id, &dp->self.mac);
	if (ret != 0)
		return ret;
	/* What the port was given, as it took it: jobs are held to it. */
	if (rte_eth_dev_get_mtu(dp->port_id, &dp->mtu) != 0 || dp->mtu == 0)
		dp->mtu = mtu;
	choose_steering(dp);
	return 0;
}

void
tally_dp_port_close(struct tally_dp *dp)
{
	struct rte_flow_error err;

	if (!rte_eth_dev_is_valid_port(dp->port_id))
		return;
	if (dp->steer_flow)
		rte_flow_flush(dp->port_id, &err);
	rte_eth_dev_stop(dp->port_id);
	rte_eth_dev_close(dp->port_id);
}

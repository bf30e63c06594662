/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A fake RDMA device for the verbs transport's tests (no RDMA device
 * here, and no soft-RoCE in this kernel). Its struct ibv_context serves
 * the data path (post_send, post_recv and poll_cq are inline calls
 * through context->ops), fakeverbs_ops the control calls, in place of
 * libibverbs (gpu/transport/verbs.h).
 *
 * It behaves as a RoCEv2 port toward a dataplane whose lcore i has QPN
 * qpn_base + i and listens on UDP port agg_port + i of 127.0.0.1 (a
 * loopagg, or a test's sockets): a UD SEND to that QPN goes there as one
 * datagram (the SEND's payload), from a socket of the QP's own, and a
 * datagram that comes back to that socket becomes a receive completion
 * with the 40-byte GRH area (20 unused bytes, then an IPv4 header with
 * the sender's address) and the QPN of the port it came from. It checks
 * what a NIC checks (QP states and the attributes each transition needs,
 * lkeys and bounds of every scatter-gather entry, the address handle's
 * GID), drops sends to a wrong Q_Key or QPN as the dataplane does, and
 * can fail any control call, drop sends at random, and complete chosen
 * sends or receives with an error status.
 */
#ifndef TALLY_TESTS_FAKEVERBS_H
#define TALLY_TESTS_FAKEVERBS_H

#include <stdint.h>

#include "transport/verbs.h"

struct fakeverbs_conf {
	uint32_t local_ip;	/* the port's RoCEv2 GID (network order) */
	uint32_t dp_ip;		/* what address handles must point at */
	uint16_t agg_port;	/* the dataplane's first UDP port (host
				 * order); 0: sends go nowhere */
	uint16_t agg_nports;	/* its ports (QPNs) */
	uint32_t qpn_base;	/* its first QPN */
	uint32_t qkey;		/* its Q_Key: sends with another are dropped */
	enum ibv_mtu mtu;	/* the port's active MTU, 0 = 4096 */
	int port_down;		/* the port is not active */
	unsigned int fail_at;	/* the control call (1st, 2nd, ... of
				 * those that can fail) that fails; 0 none */
	int fail_errno;		/* with this errno */
	unsigned int fail_post_recv; /* the post_recv call that fails, 0 */
	double drop;		/* chance a send is lost on the way */
	uint64_t seed;		/* of the drop draws */
	unsigned int send_err_at; /* the signalled send (1st, ...) that
				 * completes with send_err; 0 none */
	enum ibv_wc_status send_err;
	unsigned int recv_err_at; /* the receive (1st, ...) that completes
				 * with recv_err; 0 none */
	enum ibv_wc_status recv_err;
	int grh_ib;		/* receives carry a GRH (IB, RoCEv1: IPv6
				 * header, IPv4-mapped source GID) instead
				 * of RoCEv2's IPv4 header */
};

/* What it saw, over all its devices since fakeverbs_reset(). */
struct fakeverbs_stats {
	uint64_t calls;		/* control calls that could fail */
	char failed[32];	/* the name of the one that failed */
	uint64_t live;		/* objects created and not destroyed */
	uint64_t sends;		/* SENDs posted */
	uint64_t signalled;	/* of them, signalled */
	uint64_t delivered;	/* sent on to the dataplane */
	uint64_t dropped;	/* lost to the drop draw */
	uint64_t bad_qkey;	/* dropped: a Q_Key not the dataplane's */
	uint64_t bad_qpn;	/* dropped: no QPN of the dataplane */
	uint64_t received;	/* receive completions made */
	uint64_t max_outstanding; /* most sends not yet known complete
				 * (the transport's view: up to the last
				 * signalled completion it can see) */
};

extern const struct tally_verbs_ops fakeverbs_ops;

/*
 * Sets the configuration and zeroes the counters, but live (objects of
 * earlier transports still count until destroyed).
 */
void fakeverbs_reset(const struct fakeverbs_conf *conf);

/* The counters so far. */
void fakeverbs_stats(struct fakeverbs_stats *st);

#endif /* TALLY_TESTS_FAKEVERBS_H */

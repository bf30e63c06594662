/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The verbs transport's state, shared by its set-up (verbs.c) and its
 * data path (verbs_io.c). One registered region holds the send slots
 * (each packet is gathered into one: the header and payload arrive in
 * two pieces, from memory the NIC does not know) and then the receive
 * slots (each with the 40-byte GRH area a UD receive starts with).
 */
#ifndef TALLY_TRANSPORT_VERBS_INT_H
#define TALLY_TRANSPORT_VERBS_INT_H

#include "transport.h"
#include "verbs.h"

#define VERBS_GRH	40	/* a UD receive's first bytes: the GRH, or
				 * for RoCEv2 over IPv4 20 bytes of nothing
				 * then the IPv4 header */
#define VERBS_TX_DEPTH	512	/* send queue entries and send slots */
#define VERBS_RX_DEPTH	512	/* receive queue entries and slots */
#define VERBS_SIG_EVERY	32	/* one send in this many is signalled */

struct verbs_transport {
	struct tally_transport tp;	/* first: what callers hold */
	const struct tally_verbs_ops *ops;
	struct ibv_device **list;	/* set-up only */
	struct ibv_context *dev;
	struct ibv_pd *pd;
	uint8_t *mem;			/* tx slots, then rx slots */
	size_t mem_len;
	struct ibv_mr *mr;		/* over mem */
	struct ibv_cq *scq;		/* send completions */
	struct ibv_cq *rcq;		/* receive completions */
	struct ibv_qp *qp;
	struct ibv_ah *ah;		/* toward the dataplane's GID */
	uint8_t port;
	uint32_t gid_index;		/* our RoCEv2 GID */
	uint32_t local_ip;		/* its IPv4, network order */
	uint32_t room;			/* a tx slot; rx slots: GRH + room */
	uint32_t rx_stride;
	uint32_t dp_ip;			/* network order */
	uint32_t qkey;
	uint16_t nqpns;
	uint32_t qpns[TALLY_VERBS_MAX_QPNS];
	uint64_t tx_head;		/* sends posted, ever */
	uint64_t tx_done;		/* of them, known complete */
	int broken;			/* an error completion: -EIO now */
	uint64_t foreign;		/* receives not from the dataplane */
};

/* The ops table of transports created without one (verbs_ops.c). */
const struct tally_verbs_ops *tally_verbs_default_ops(void);

/* Posts receives of rx slots [first, first + n) (verbs_io.c): 0, -errno. */
int tally_verbs_post_rx(struct verbs_transport *v, unsigned int first,
	unsigned int n);

/* Undoes the set-up (verbs.c): the ops' destroy. */
void tally_verbs_destroy(struct tally_transport *tp);

/* The data path's ops (verbs_io.c). */
extern const struct tally_transport_ops tally_verbs_tp_ops;

#endif /* TALLY_TRANSPORT_VERBS_INT_H */

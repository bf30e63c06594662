/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The verbs transport's data path: UD SENDs gathered into registered
 * send slots, one in VERBS_SIG_EVERY signalled (its completion frees the
 * slots of every send before it); receives polled from their CQ, the
 * GRH area read for the sender's address, the packet copied out to the
 * caller and its slot posted again. A completion with an error status
 * breaks the transport: that send or receive, and every later call,
 * fails with -EIO, the status in why, counted in errors.
 */
#include <errno.h>
#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "verbs_int.h"

#define SPIN_POLLS	256	/* empty polls before sleeping between them */
#define NAP_NS		20000	/* the sleep between polls after that */
#define TX_WAIT_NS	1000000	/* longest wait for send slots */

static struct verbs_transport *
verbs_of(struct tally_transport *tp)
{
	return (struct verbs_transport *)tp;
}

static uint64_t
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void
nap(uint64_t ns)
{
	struct timespec ts = { .tv_nsec = (long)(ns < NAP_NS ? ns : NAP_NS) };

	nanosleep(&ts, NULL);
}

/*
 * Records a completion with an error status: counted every time; the
 * first one's words kept (the flushes that follow an error say less).
 * Returns -EIO.
 */
static int
wc_error(struct verbs_transport *v, const struct ibv_wc *wc, const char *dir)
{
	v->tp.errors++;
	if (!v->broken || (v->tp.why[0] == '\0'))
		snprintf(v->tp.why, sizeof(v->tp.why), "%s completion: %s "
			"(status %d, vendor error 0x%x)", dir,
			ibv_wc_status_str(wc->status), (int)wc->status,
			wc->vendor_err);
	v->broken = 1;
	return -EIO;
}

/* Marks v broken by a failed verbs call (what, errno err): -err. */
static int
call_error(struct verbs_transport *v, const char *what, int err)
{
	if (err <= 0)
		err = EIO;
	v->tp.errors++;
	if (!v->broken)
		snprintf(v->tp.why, sizeof(v->tp.why), "%s: %s", what,
			strerror(err));
	v->broken = 1;
	return -err;
}

/* Takes the send completions there are: 0 or -EIO. */
static int
reap_tx(struct verbs_transport *v)
{
	struct ibv_wc wc[16];
	int n, i;

	do {
		n = ibv_poll_cq(v->scq, 16, wc);
		if (n < 0)
			return call_error(v, "polling the send CQ", EIO);
		for (i = 0; i < n; i++) {
			if (wc[i].status != IBV_WC_SUCCESS)
				return wc_error(v, &wc[i], "send");
			if (wc[i].wr_id + 1 > v->tx_done)
				v->tx_done = wc[i].wr_id + 1;
		}
	} while (n == 16);
	return 0;
}

/* Free send slots, waiting up to TX_WAIT_NS for want: how many, -EIO. */
static int
tx_room(struct verbs_transport *v, unsigned int want)
{
	uint64_t until = 0;
	unsigned int spins = 0;

	for (;;) {
		int rc = reap_tx(v);
		uint64_t used = v->tx_head - v->tx_done;

		if (rc != 0)
			return rc;
		if (VERBS_TX_DEPTH - used >= want)
			return (int)want;
		if (until == 0)
			until = now_ns() + TX_WAIT_NS;
		else if (now_ns() >= until)
			return (int)(VERBS_TX_DEPTH - used);
		if (++spins > SPIN_POLLS)
			nap(NAP_NS);
	}
}

/* Gathers p into slot (room bytes): its length. */
static uint32_t
gather(struct verbs_transport *v, const struct tally_tx_pkt *p, uint8_t *slot)
{
	uint32_t len = 0;

	for (int j = 0; j < 3; j++) {
		size_t l = p->iov[j].iov_len;

		if (l > v->room - len)
			l = v->room - len;	/* cut, as the wire would */
		if (l > 0)
			memcpy(slot + len, p->iov[j].iov_base, l);
		len += (uint32_t)l;
	}
	return len;
}

/* Send slot seq's memory (slots cycle through the region's first part). */
static uint8_t *
tx_slot(const struct verbs_transport *v, uint64_t seq)
{
	return v->mem + (size_t)(seq % VERBS_TX_DEPTH) *
		((v->room + 63u) & ~63u);
}

/*
 * Posts pkts[0..n) as one chain of UD SENDs, each to the QPN that owns
 * its slot; send seq (its wr_id) is signalled when it ends a group of
 * VERBS_SIG_EVERY. Every packet the network is offered counts as taken.
 */
static int
verbs_send(struct tally_transport *tp, const struct tally_tx_pkt *pkts,
	unsigned int n)
{
	struct verbs_transport *v = verbs_of(tp);
	struct ibv_send_wr wr[TALLY_TP_BURST], *bad = NULL;
	struct ibv_sge sge[TALLY_TP_BURST];
	int room, rc;

	if (n > TALLY_TP_BURST)
		return -EINVAL;
	if (v->broken)
		return -EIO;
	room = tx_room(v, n);
	if (room <= 0)
		return room;
	if ((unsigned int)room < n)
		n = (unsigned int)room;	/* the rest is lost, as on a wire */
	for (unsigned int i = 0; i < n; i++) {
		uint64_t seq = v->tx_head + i;
		uint8_t *slot = tx_slot(v, seq);

		sge[i] = (struct ibv_sge){ .addr = (uintptr_t)slot,
			.length = gather(v, &pkts[i], slot),
			.lkey = v->mr->lkey };
		wr[i] = (struct ibv_send_wr){
			.wr_id = seq,
			.next = i + 1 < n ? &wr[i + 1] : NULL,
			.sg_list = &sge[i],
			.num_sge = 1,
			.opcode = IBV_WR_SEND,
			.send_flags = seq % VERBS_SIG_EVERY ==
				VERBS_SIG_EVERY - 1 ? IBV_SEND_SIGNALED : 0,
			.wr.ud = {
				.ah = v->ah,
				.remote_qpn = v->qpns[pkts[i].slot % v->nqpns],
				.remote_qkey = v->qkey,
			},
		};
	}
	if (n == 0)
		return 0;
	rc = ibv_post_send(v->qp, wr, &bad);
	if (rc != 0)
		return call_error(v, "posting sends", rc);
	v->tx_head += n;
	return (int)n;
}

/* Posts the receives of rx slots ids[0..k), k <= 64: 0 or -errno. */
static int
post_ids(struct verbs_transport *v, const uint32_t *ids, unsigned int k)
{
	struct ibv_recv_wr wr[64], *bad = NULL;
	struct ibv_sge sge[64];
	uint8_t *base = v->mem + (v->mem_len -
		(size_t)VERBS_RX_DEPTH * v->rx_stride);

	if (k == 0)
		return 0;
	for (unsigned int i = 0; i < k; i++) {
		sge[i] = (struct ibv_sge){
			.addr = (uintptr_t)(base + (size_t)ids[i] * v->rx_stride),
			.length = VERBS_GRH + v->room,
			.lkey = v->mr->lkey };
		wr[i] = (struct ibv_recv_wr){ .wr_id = ids[i],
			.next = i + 1 < k ? &wr[i + 1] : NULL,
			.sg_list = &sge[i], .num_sge = 1 };
	}
	return -ibv_post_recv(v->qp, wr, &bad);
}

int
tally_verbs_post_rx(struct verbs_transport *v, unsigned int first,
	unsigned int n)
{
	uint32_t ids[64];

	while (n > 0) {
		unsigned int k = n < 64 ? n : 64;
		int rc;

		for (unsigned int i = 0; i < k; i++)
			ids[i] = (first + i) % VERBS_RX_DEPTH;
		rc = post_ids(v, ids, k);
		if (rc != 0)
			return rc;
		first += k;
		n -= k;
	}
	return 0;
}

/* Rx slot id's memory: its GRH area, then the packet. */
static const uint8_t *
rx_slot(const struct verbs_transport *v, uint64_t id)
{
	return v->mem + (v->mem_len - (size_t)VERBS_RX_DEPTH * v->rx_stride) +
		(size_t)(id % VERBS_RX_DEPTH) * v->rx_stride;
}

/*
 * The sender's IPv4 (network order) from a receive's GRH area: a GRH
 * (IB, RoCEv1) with an IPv4-mapped source GID, or, RoCEv2 over IPv4,
 * 20 unused bytes and the packet's IPv4 header. 0 when neither.
 */
static uint32_t
grh_src(const uint8_t *g)
{
	static const uint8_t mapped[12] = { [10] = 0xff, [11] = 0xff };
	uint32_t ip = 0;

	if ((g[0] >> 4) == 6 && memcmp(g + 8, mapped, sizeof(mapped)) == 0)
		memcpy(&ip, g + 20, 4);
	else if (g[20] == 0x45)
		memcpy(&ip, g + 20 + 12, 4);
	return ip;
}

/* Whether a receive came from the dataplane: its address and a QPN of it. */
static int
from_dp(const struct verbs_transport *v, const struct ibv_wc *wc,
	const uint8_t *g)
{
	if (!(wc->wc_flags & IBV_WC_GRH) || wc->byte_len < VERBS_GRH ||
			grh_src(g) != v->dp_ip)
		return 0;
	for (unsigned int i = 0; i < v->nqpns; i++)
		if (v->qpns[i] == wc->src_qp)
			return 1;
	return 0;
}

/*
 * Hands the receives of wc[0..n) up into pkts (copied, cut to each
 * buffer's room; length 0 for a packet not from the dataplane) and posts
 * their slots again. Returns n, or -EIO on an error completion.
 */
static int
take_rx(struct verbs_transport *v, const struct ibv_wc *wc, int n,
	struct tally_rx_pkt *pkts)
{
	uint32_t ids[TALLY_TP_BURST];
	int rc;

	for (int i = 0; i < n; i++) {
		const uint8_t *g = rx_slot(v, wc[i].wr_id);
		uint32_t len;

		if (wc[i].status != IBV_WC_SUCCESS)
			return wc_error(v, &wc[i], "receive");
		ids[i] = (uint32_t)(wc[i].wr_id % VERBS_RX_DEPTH);
		pkts[i].len = 0;
		if (!from_dp(v, &wc[i], g)) {
			v->foreign++;
			continue;
		}
		len = wc[i].byte_len - VERBS_GRH;
		if (len > pkts[i].room)
			len = pkts[i].room;
		memcpy(pkts[i].buf, g + VERBS_GRH, len);
		pkts[i].len = len;
	}
	rc = post_ids(v, ids, (unsigned int)n);
	if (rc != 0)
		return call_error(v, "posting receives", -rc);
	return n;
}

/*
 * Polls the receive CQ for up to n packets, and the send CQ on the way;
 * with nothing there, polls again until timeout_us passed: spinning a
 * while, then napping between polls.
 */
static int
verbs_recv(struct tally_transport *tp, struct tally_rx_pkt *pkts,
	unsigned int n, unsigned int timeout_us)
{
	struct verbs_transport *v = verbs_of(tp);
	struct ibv_wc wc[TALLY_TP_BURST];
	uint64_t until = 0, now;
	unsigned int spins = 0;

	if (n > TALLY_TP_BURST)
		return -EINVAL;
	if (v->broken)
		return -EIO;
	for (;;) {
		int got;

		if (reap_tx(v) != 0)
			return -EIO;
		got = ibv_poll_cq(v->rcq, (int)n, wc);
		if (got < 0)
			return call_error(v, "polling the receive CQ", EIO);
		if (got > 0)
			return take_rx(v, wc, got, pkts);
		if (timeout_us == 0)
			return 0;
		now = now_ns();
		if (until == 0)
			until = now + (uint64_t)timeout_us * 1000u;
		else if (now >= until)
			return 0;
		if (++spins > SPIN_POLLS)
			nap(until - now);
	}
}

/* The member's address: the GID's IPv4 and RoCEv2's port; tp->qpn. */
static int
verbs_local(struct tally_transport *tp, uint32_t *ip, uint16_t *port)
{
	*ip = verbs_of(tp)->local_ip;
	*port = htons(4791);
	return 0;
}

const struct tally_transport_ops tally_verbs_tp_ops = {
	.send = verbs_send,
	.recv = verbs_recv,
	.local = verbs_local,
	.destroy = tally_verbs_destroy,
};

/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A transport read late (latetp.h).
 */
#include <errno.h>
#include <time.h>

#include "latetp.h"

static int
late_send(struct tally_transport *tp, const struct tally_tx_pkt *pkts,
	unsigned int n)
{
	return tally_transport_send(((struct latetp *)tp)->inner, pkts, n);
}

static int
late_recv(struct tally_transport *tp, struct tally_rx_pkt *pkts,
	unsigned int n, unsigned int timeout_us)
{
	struct latetp *l = (struct latetp *)tp;
	struct timespec ts = {
		.tv_sec = l->late_ms / 1000,
		.tv_nsec = (long)(l->late_ms % 1000) * 1000000L,
	};

	if (timeout_us == 0)
		return tally_transport_recv(l->inner, pkts, n, 0);
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
	l->slept++;
	return 0;
}

static int
late_local(struct tally_transport *tp, uint32_t *ip, uint16_t *port)
{
	return tally_transport_local(((struct latetp *)tp)->inner, ip, port);
}

static void
late_destroy(struct tally_transport *tp)
{
	(void)tp;	/* the caller's; unwrapped before the close */
}

static const struct tally_transport_ops late_ops = {
	.send = late_send, .recv = late_recv, .local = late_local,
	.destroy = late_destroy,
};

void
latetp_wrap(struct latetp *l, struct tally_ctx *ctx)
{
	l->tp = (struct tally_transport){ .ops = &late_ops, .name = "late" };
	l->inner = ctx->tp;
	l->slept = 0;
	ctx->tp = &l->tp;
}

void
latetp_unwrap(struct latetp *l, struct tally_ctx *ctx)
{
	ctx->tp = l->inner;
}

/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A transport in front of a context's own (wraptp.h).
 */
#include <stdlib.h>

#include "wraptp.h"

static int
wrap_send(struct tally_transport *tp, const struct tally_tx_pkt *pkts,
	unsigned int n)
{
	return tally_transport_send(((struct wraptp *)tp)->inner, pkts, n);
}

static int
wrap_recv(struct tally_transport *tp, struct tally_rx_pkt *pkts,
	unsigned int n, unsigned int timeout_us)
{
	struct wraptp *w = (struct wraptp *)tp;

	return w->recv(w, pkts, n, timeout_us);
}

static int
wrap_local(struct tally_transport *tp, uint32_t *ip, uint16_t *port)
{
	return tally_transport_local(((struct wraptp *)tp)->inner, ip, port);
}

static void
wrap_destroy(struct tally_transport *tp)
{
	struct wraptp *w = (struct wraptp *)tp;

	if (w->own == WRAPTP_LENT)
		return;		/* the test's; unwrapped before the close */
	tally_transport_destroy(w->inner);
	free(w);
}

static const struct tally_transport_ops wrap_ops = {
	.send = wrap_send, .recv = wrap_recv, .local = wrap_local,
	.destroy = wrap_destroy,
};

void
wraptp_wrap(struct wraptp *w, struct tally_ctx *ctx, const char *name,
	wraptp_recv_fn *recv, enum wraptp_own own)
{
	w->tp = (struct tally_transport){ .ops = &wrap_ops, .name = name };
	w->inner = ctx->tp;
	w->recv = recv;
	w->own = own;
	ctx->tp = &w->tp;
}

void
wraptp_unwrap(struct wraptp *w, struct tally_ctx *ctx)
{
	ctx->tp = w->inner;
}

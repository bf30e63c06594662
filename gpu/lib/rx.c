/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A worker's receive of one burst from its context's transport, for
 * every loop that waits on results (window.c's run_chunks(), sparse.c's
 * run_streams()): the wait bounded by the caller's deadline, a transport
 * error turned into the call's failure, the retransmission timer told
 * how late a sleep woke, and each datagram handed to the caller's taker
 * (an empty one, or one the transport found not to come from the job's
 * dataplane, counted as ignored); and the drain of what is already
 * there, without waiting.
 */
#include "ctx.h"

int
tally_lib_receive(struct tally_ctx *ctx, uint64_t now, uint64_t until,
	tally_lib_take_fn *take, void *arg, int *err)
{
	struct tally_rx_pkt rx[TALLY_TP_BURST];
	uint64_t wait_ns = until > now ? until - now : 0;
	int rc, i;

	if (wait_ns > 1000000000u)
		wait_ns = 1000000000u;	/* the loop comes back anyway */
	for (i = 0; i < TALLY_TP_BURST; i++) {
		rx[i].buf = ctx->rxbuf + (size_t)i * ctx->rx_room;
		rx[i].room = ctx->rx_room;
		rx[i].len = 0;
	}
	rc = tally_transport_recv(ctx->tp, rx, TALLY_TP_BURST,
		(unsigned int)((wait_ns + 999) / 1000));
	if (rc < 0) {
		*err = tally_ctx_fail(ctx, rc, "%s transport: receive: %s",
			ctx->tp->name, tally_transport_strerror(ctx->tp, rc));
		return 0;
	}
	now = tally_lib_now_ns();
	if (wait_ns > 0)	/* slept: how late did it wake? */
		tally_retx_woke(&ctx->retx, until, now);
	for (i = 0; i < rc && *err == 0; i++) {
		if (rx[i].len > 0)
			take(arg, rx[i].buf, rx[i].len, now);
		else
			ctx->st.ignored++;	/* empty, or not ours */
	}
	return rc;
}

void
tally_lib_drain(struct tally_ctx *ctx, tally_lib_take_fn *take, void *arg,
	int *err)
{
	for (int i = 0; i < TALLY_LIB_DRAIN_BURSTS && *err == 0; i++)
		if (tally_lib_receive(ctx, 0, 0, take, arg, err) <= 0)
			break;
}

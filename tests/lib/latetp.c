/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A transport read late (latetp.h).
 */
#include <errno.h>
#include <time.h>

#include "latetp.h"

static int
late_recv(struct wraptp *w, struct tally_rx_pkt *pkts, unsigned int n,
	unsigned int timeout_us)
{
	struct latetp *l = (struct latetp *)w;
	struct timespec ts = {
		.tv_sec = l->late_ms / 1000,
		.tv_nsec = (long)(l->late_ms % 1000) * 1000000L,
	};

	if (timeout_us == 0)
		return tally_transport_recv(w->inner, pkts, n, 0);
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
	l->slept++;
	return 0;
}

void
latetp_wrap(struct latetp *l, struct tally_ctx *ctx)
{
	l->slept = 0;
	wraptp_wrap(&l->w, ctx, "late", late_recv, WRAPTP_LENT);
}

/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A transport read late, put in front of a context's own (wraptp.h):
 * every receive that may wait stands for a worker descheduled past its
 * call's deadline (it sleeps late_ms and takes nothing); a receive that
 * does not wait reads the real transport. Results that arrive meanwhile
 * wait in the socket, in time: a call must take them, not fail with
 * -ETIMEDOUT.
 *
 * Test infrastructure only.
 */
#ifndef TALLY_TESTS_LATETP_H
#define TALLY_TESTS_LATETP_H

#include "wraptp.h"

struct latetp {
	struct wraptp w;		/* first */
	unsigned int late_ms;
	unsigned int slept;		/* late receives so far */
};

/*
 * Puts l (late_ms set by the caller) in front of ctx's transport, which
 * stays the caller's: wraptp_unwrap(&l->w, ctx) before tally_ctx_close().
 */
void latetp_wrap(struct latetp *l, struct tally_ctx *ctx);

#endif

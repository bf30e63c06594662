/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A transport put in front of a context's own, for tests that change
 * what a worker receives: send and local go to the context's transport
 * unchanged, receives go to the test's hook, which may read the
 * context's transport (w->inner) and change what it brings. A test
 * embeds struct wraptp first in a struct of its own and finds its state
 * from the hook's w.
 *
 * Whose the context's transport is at the close is the test's choice:
 * - WRAPTP_LENT: the test's. It gives the context its transport back
 *   (wraptp_unwrap()) before tally_ctx_close(); the wrapper may live on
 *   the stack.
 * - WRAPTP_OWNED: the wrapper's. tally_ctx_close() destroys the
 *   context's transport through the wrapper, then frees the wrapper,
 *   which must be the start of a malloc'd block (as every transport is).
 *
 * Test infrastructure only.
 */
#ifndef TALLY_TESTS_WRAPTP_H
#define TALLY_TESTS_WRAPTP_H

#include "lib/ctx.h"

enum wraptp_own {
	WRAPTP_LENT,
	WRAPTP_OWNED,
};

struct wraptp;

/* A receive, as struct tally_transport_ops' recv, of the wrapper w. */
typedef int wraptp_recv_fn(struct wraptp *w, struct tally_rx_pkt *pkts,
	unsigned int n, unsigned int timeout_us);

struct wraptp {
	struct tally_transport tp;	/* first: what the context holds */
	struct tally_transport *inner;	/* the context's own */
	wraptp_recv_fn *recv;
	enum wraptp_own own;
};

/* Puts w, named name, in front of ctx's transport, receiving with recv. */
void wraptp_wrap(struct wraptp *w, struct tally_ctx *ctx, const char *name,
	wraptp_recv_fn *recv, enum wraptp_own own);

/* Gives ctx its own transport back (WRAPTP_LENT), before the close. */
void wraptp_unwrap(struct wraptp *w, struct tally_ctx *ctx);

#endif

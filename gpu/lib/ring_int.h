/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The ring fallback's insides, shared by ring_hello.c (connections and
 * hellos) and ring.c (reductions). ring.h is the interface.
 */
#ifndef TALLY_LIB_RING_INT_H
#define TALLY_LIB_RING_INT_H

#include <stdint.h>

#include "ring.h"

#define TALLY_RING_MAGIC	"TRNG"	/* the hello messages' first bytes */
#define TALLY_RING_VERSION	1
#define TALLY_RING_DATA_MAGIC	0x5452	/* "TR": a data frame's */
#define TALLY_RING_DATA		4	/* a data frame's type */
#define TALLY_RING_HDR_LEN	24	/* a data frame's header */
#define TALLY_RING_CHUNK	65536	/* lanes a data frame, at most */

struct tally_ring {
	int lfd;			/* listener */
	int left;			/* from rank - 1: data comes in */
	int right;			/* to rank + 1: data goes out */
	uint32_t ip;			/* the listener's, network order */
	uint16_t port;
	uint8_t rank, world, left_rank, right_rank;
	uint8_t key[TALLY_RING_KEY_LEN];
	int broken;			/* a reduction failed: closed */
	uint32_t call;			/* the next reduction's number */
	uint32_t *scratch;		/* TALLY_RING_CHUNK lanes in */
	struct tally_ring_stats st;
	char refused_why[96];		/* the last refusal, for errors */
};

/*
 * Exactly n bytes to (out) or from fd, non-blocking, before deadline
 * (CLOCK_MONOTONIC ms). 0, -ETIMEDOUT, -ECONNRESET (closed) or -errno.
 */
int tally_ring_io(int fd, void *buf, size_t n, int out, int64_t deadline);

/* Closes the two data connections (not the listener). */
void tally_ring_close_data(struct tally_ring *g);

#endif /* TALLY_LIB_RING_INT_H */

/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A test aggregator on 127.0.0.1: the real engine (tally_agg_process())
 * behind kernel UDP sockets, one per port of a small consecutive range,
 * served by one thread. It answers as tally-dp does: a completed round's
 * result to every member, at the address each rank's packets come from; a
 * stored result or a NACK to the sender (a member's DONEs of a burst
 * bundled, as tally-dp sends them); silence for what fails before
 * the sender is proven a member. It can lose packets in either direction
 * and duplicate its own, and send results of earlier rounds again (as a
 * network that holds packets back, or an attacker replaying them, would),
 * at random from a seed.
 *
 * Test infrastructure only; the product's dataplane is tally-dp.
 */
#ifndef TALLY_TESTS_LOOPAGG_H
#define TALLY_TESTS_LOOPAGG_H

#include <stdint.h>

#include <tally/tally.h>

#include "agg/agg.h"

struct loopagg_conf {
	uint16_t job;
	uint64_t token;
	uint8_t world;
	uint16_t window;	/* the job's slots */
	uint16_t max_elems;	/* the job's largest packet */
	uint8_t narrow;		/* results in the contributions' width */
	unsigned int nports;	/* sockets on consecutive ports, 0 = 1 */
	double loss_up;		/* chance a received packet is dropped */
	double loss_down;	/* chance a packet to send is dropped */
	double dup;		/* chance a packet to send goes twice */
	double replay;		/* chance a packet to send is followed by an
				 * old one: one of the last LOOPAGG_OLD
				 * results sent, to the same address */
	double forge;		/* chance a result to a member is followed
				 * by a forgery, the result with a bit of
				 * its payload flipped and its tag; and
				 * chance a contribution taken (the round
				 * still open) is answered by a forged NACK
				 * (early) echoing it, with its tag */
	const struct tally_auth_keys *auth; /* an authenticated job: the
				 * members' keys by rank (world entries,
				 * borrowed until loopagg_start() returns);
				 * NULL: a plain job */
	uint64_t seed;		/* of the loss and duplication draws */
};

/* What happened, summed when the aggregator stops. */
struct loopagg_stats {
	struct tally_agg_stats agg;	/* the engine's counters */
	uint64_t rx;			/* datagrams received */
	uint64_t bundles;		/* of them, bundles of contributions */
	uint64_t tx;			/* datagrams sent */
	uint64_t done_bundled;		/* DONEs that joined another's
					 * datagram (a bundle of DONEs) */
	uint64_t lost_up;		/* received, dropped by loss_up */
	uint64_t lost_down;		/* to send, dropped by loss_down */
	uint64_t duplicated;		/* sent twice */
	uint64_t replayed;		/* old results sent again */
	uint64_t forged;		/* forgeries sent */
};

#define LOOPAGG_OLD	256	/* results kept for replay */

struct loopagg;

/*
 * Creates the job of conf (borrowed), binds the ports and starts the
 * thread. Returns NULL with errno set on failure.
 */
struct loopagg *loopagg_start(const struct loopagg_conf *conf);

/* The first port of the range (host order). */
uint16_t loopagg_port(const struct loopagg *a);

/* Stops the thread, writes the counters to st (may be NULL), frees a. */
void loopagg_stop(struct loopagg *a, struct loopagg_stats *st);

#endif /* TALLY_TESTS_LOOPAGG_H */

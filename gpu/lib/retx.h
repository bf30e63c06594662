/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * When a worker sends a packet again (retx.c): the timer and loss state
 * machine of the dense windows and the sparse streams, fed with events
 * (sent, answered, woke late) and times, and asked which packets go
 * again now. It does no I/O and reads no clock, so unit tests drive it
 * over a simulated path (tests/lib/retx_test.c).
 *
 * A unit is one lane (a slot of the window, a sparse stream): at most one
 * packet outstanding on it. Loss is decided, in this order:
 * - RACK (RFC 8985's idea): a packet is lost when a packet sent after it
 *   has been answered and its own answer is later than the answered
 *   one's round trip plus a reordering allowance;
 * - a tail probe: when the caller has no fresh packet left to send and
 *   nothing has come back for a probe timeout, the last packet sent goes
 *   again, so that RACK sees the answers a loss at the tail needs;
 * - the timer, last: RFC 6298's srtt + 4 rttvar (Karn: samples only of
 *   packets sent once), at least a floor of the configured rto_us and of
 *   twice the host's scheduling lateness (see tally_retx_woke()), backed
 *   off on each expiry. Like TCP's, it runs from the latest answer, so
 *   it expires only when nothing at all comes back; then only the oldest
 *   packet goes again (a stalled member is far more likely than a window
 *   lost whole, and the probe's answer lets RACK find the rest).
 * And, outside this order, as soon as the aggregator says so: a NACK gap
 * names packets it knows lost (tally_retx_gap()).
 * A retransmission found spurious (its answer came sooner than the
 * retransmission could have produced it, or the aggregator answered it
 * from a result this worker already had) is counted and undoes the
 * timer's back-off; a spurious RACK loss widens the reordering
 * allowance.
 */
#ifndef TALLY_LIB_RETX_H
#define TALLY_LIB_RETX_H

#include <stdint.h>

#define TALLY_RTO_MAX_US	200000u	/* retransmission timeout cap */

/* What sent a unit's latest retransmission. */
enum tally_retx_why {
	TALLY_RETX_NONE,	/* sent once so far */
	TALLY_RETX_RACK,	/* loss inferred from later answers */
	TALLY_RETX_PROBE,	/* tail probe */
	TALLY_RETX_RTO,		/* the timer */
	TALLY_RETX_GAP,		/* the aggregator saw it lost (NACK gap) */
};

/* One lane's outstanding packet. */
struct tally_retx_unit {
	uint64_t seq;		/* order of its latest transmission */
	uint64_t first_ns;	/* its first transmission */
	uint64_t xmit_ns;	/* its latest transmission */
	uint64_t due_ns;	/* the timer's deadline */
	uint32_t rto_us;	/* its current timeout (backed off) */
	uint16_t ntx;		/* transmissions: 1 = sent once */
	uint8_t busy;		/* outstanding */
	uint8_t why;		/* enum tally_retx_why of the latest */
	uint8_t dsack;		/* answered by the original's result after
				 * a retransmission: an answer to that
				 * retransmission proves it spurious */
};

/* Counters (struct tally_ctx_stats has them too, documented there). */
struct tally_retx_stats {
	uint64_t rack;		/* retransmissions on an inferred loss */
	uint64_t probes;	/* tail probes */
	uint64_t timeouts;	/* retransmissions on the timer */
	uint64_t gap;		/* retransmissions on a NACK gap */
	uint64_t spurious;	/* retransmissions found needless */
	uint64_t undone;	/* of those, back-offs undone */
};

struct tally_retx {
	struct tally_retx_unit *u;	/* [n], the running call's lanes */
	uint32_t n;
	uint32_t rto_min_us;	/* the configured floor (and first rto) */
	uint32_t rto_us;	/* a fresh packet's timeout */
	uint32_t srtt_us;	/* smoothed round trip; 0: no sample yet */
	uint32_t rttvar_us;
	uint32_t min_rtt_us;	/* least round trip seen; 0: none */
	uint32_t sched_us;	/* the host's scheduling lateness: the
				 * most over about a second */
	uint64_t sched_ns;	/* when that was seen */
	uint32_t undo_rto_us;	/* rto_us before the back-offs since the
				 * last sample; 0: none to undo */
	uint32_t reo_mult;	/* reordering allowance, in min_rtt / 4 */
	uint32_t clean;		/* answers since the last spurious RACK */
	uint64_t seq;		/* transmissions so far */
	uint64_t rack_seq;	/* the latest-sent answered transmission */
	uint32_t rack_rtt_us;	/* its round trip */
	uint64_t progress_ns;	/* the latest answer (or the call's start) */
	uint64_t last_tx_ns;	/* the latest transmission */
	uint8_t tail;		/* the caller has no fresh packet left */
	uint8_t probe_armed;	/* a tail probe may go (once per silence) */
	uint64_t jitter;	/* xorshift state of the back-off's spread */
	struct tally_retx_stats st;
};

/* Sets rx up: no samples, rto_us the first timeout and floor (capped). */
void tally_retx_init(struct tally_retx *rx, uint32_t rto_us, uint64_t seed);

/*
 * Starts a call over the n units at u (borrowed for the call, zeroed
 * here) at time now: the timer's estimates carry over from call to call.
 */
void tally_retx_begin(struct tally_retx *rx, struct tally_retx_unit *u,
	uint32_t n, uint64_t now);

/* Unit i's fresh packet went out at now. */
void tally_retx_sent(struct tally_retx *rx, uint32_t i, uint64_t now);

/*
 * Unit i's packet was answered at now; resent: the answer was the
 * aggregator's stored result sent again (flag RETX). Takes a round-trip
 * sample when the packet went once, moves RACK on, frees the unit.
 * Returns 1 when this showed the unit's retransmission spurious, else 0.
 */
int tally_retx_answered(struct tally_retx *rx, uint32_t i, uint64_t now,
	int resent);

/*
 * An answer came for unit i's previous packet, already answered, and the
 * aggregator sent it again (flag RETX) for a retransmission: when the
 * unit was answered by the original's result, that retransmission was
 * spurious. Returns 1 then, else 0.
 */
int tally_retx_late_dup(struct tally_retx *rx, uint32_t i);

/*
 * The caller asked to sleep until asked_ns at most and woke at woke_ns
 * (packets or not): waking later than asked is the host's scheduling,
 * which the timeout's floor and the reordering allowance follow.
 */
void tally_retx_woke(struct tally_retx *rx, uint64_t asked_ns,
	uint64_t woke_ns);

/*
 * Which units' packets go again at now: writes up to max unit indices to
 * out (marking them retransmitted, the timer backed off where it
 * expired) and returns how many. Call only after taking every answer
 * that has arrived (a late reader would find answers it has not read
 * expired).
 */
unsigned int tally_retx_poll(struct tally_retx *rx, uint64_t now,
	uint32_t *out, unsigned int max);

/*
 * The aggregator says unit i's packet never reached it (a NACK gap: one
 * sent after it did). Returns 1 when it goes again now (marked so; the
 * caller sends it), 0 when it is not outstanding or already went again:
 * a gap NACK sends a packet once at most, and never one that RACK, a
 * probe or the timer already sent again.
 */
int tally_retx_gap(struct tally_retx *rx, uint32_t i, uint64_t now);

/* The earliest time tally_retx_poll() may have something to send. */
uint64_t tally_retx_next(const struct tally_retx *rx);

/*
 * When a packet that just went again with timeout rto_us is due once
 * more: now + rto_us, plus a random part of up to half of it, so that
 * packets lost together (an overflowing queue) do not go again together.
 */
uint64_t tally_retx_deadline(struct tally_retx *rx, uint64_t now_ns,
	uint32_t rto_us);

#endif /* TALLY_LIB_RETX_H */

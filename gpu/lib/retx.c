/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The retransmission state machine of retx.h: RACK-style loss from later
 * answers, a tail probe, an RFC 6298 timer as the last resort, and the
 * detection of spurious retransmissions. Pure: times come in as
 * arguments, and nothing here sends or reads.
 */
#include <string.h>

#include "retx.h"

#define US(x)		((uint64_t)(x) * 1000u)
#define REO_MULT_MAX	16u	/* reordering allowance: at most 4 min_rtt */
#define SCHED_HOLD_NS	UINT64_C(1000000000)	/* how long the host's
						 * lateness is remembered */
#define REO_DECAY	256u	/* answers without a spurious RACK loss
				 * before the allowance shrinks a step */

static uint32_t
umax(uint32_t a, uint32_t b)
{
	return a > b ? a : b;
}

static uint32_t
cap(uint64_t us)
{
	return us > TALLY_RTO_MAX_US ? TALLY_RTO_MAX_US : (uint32_t)us;
}

void
tally_retx_init(struct tally_retx *rx, uint32_t rto_us, uint64_t seed)
{
	memset(rx, 0, sizeof(*rx));
	rx->rto_min_us = cap(rto_us);
	rx->rto_us = rx->rto_min_us;
	rx->reo_mult = 1;
	rx->jitter = seed | 1;
}

void
tally_retx_begin(struct tally_retx *rx, struct tally_retx_unit *u,
	uint32_t n, uint64_t now)
{
	memset(u, 0, sizeof(*u) * n);
	rx->u = u;
	rx->n = n;
	rx->progress_ns = now;
	rx->last_tx_ns = now;
	rx->tail = 0;
	rx->probe_armed = 1;
	/* Answers of earlier calls say nothing of this one's packets. */
	rx->rack_seq = rx->seq;
}

/*
 * A fresh packet's timeout: the estimator's (backed off, Karn), at least
 * twice the host's scheduling lateness: a member or the dataplane
 * descheduled for that long delays every answer by as much.
 */
static uint32_t
fresh_rto(const struct tally_retx *rx)
{
	return cap(umax(rx->rto_us, 2 * rx->sched_us));
}

void
tally_retx_sent(struct tally_retx *rx, uint32_t i, uint64_t now)
{
	struct tally_retx_unit *u = &rx->u[i];

	u->seq = ++rx->seq;
	u->first_ns = now;
	u->xmit_ns = now;
	u->rto_us = fresh_rto(rx);
	u->due_ns = now + US(u->rto_us);
	u->ntx = 1;
	u->busy = 1;
	u->why = TALLY_RETX_NONE;
	rx->last_tx_ns = now;
}

/* RFC 6298's estimator, fed a round trip of a packet sent once. */
static void
sample(struct tally_retx *rx, uint64_t rtt_ns)
{
	uint32_t r = cap(rtt_ns / 1000), dev;

	if (r == 0)
		r = 1;
	if (rx->srtt_us == 0) {
		rx->srtt_us = r;
		rx->rttvar_us = r / 2;
	} else {
		dev = r > rx->srtt_us ? r - rx->srtt_us : rx->srtt_us - r;
		rx->rttvar_us = (3 * rx->rttvar_us + dev) / 4;
		rx->srtt_us = (7 * rx->srtt_us + r) / 8;
	}
	if (rx->min_rtt_us == 0 || r < rx->min_rtt_us)
		rx->min_rtt_us = r;
	rx->rto_us = cap(umax(rx->srtt_us + 4 * rx->rttvar_us,
		rx->rto_min_us));
	rx->undo_rto_us = 0;
}

/* Counts a needless retransmission of u and undoes what it caused. */
static void
spurious(struct tally_retx *rx, uint8_t why)
{
	rx->st.spurious++;
	if (why == TALLY_RETX_RTO && rx->undo_rto_us != 0) {
		rx->rto_us = rx->undo_rto_us;
		rx->undo_rto_us = 0;
		rx->st.undone++;
	} else if (why == TALLY_RETX_RACK) {
		if (rx->reo_mult < REO_MULT_MAX)
			rx->reo_mult++;
		rx->clean = 0;
	}
}

/* RACK: the latest-sent answered transmission and its round trip. */
static void
rack_update(struct tally_retx *rx, const struct tally_retx_unit *u,
	uint64_t now)
{
	if (u->seq > rx->rack_seq) {
		rx->rack_seq = u->seq;
		rx->rack_rtt_us = cap((now - u->xmit_ns) / 1000);
	}
}

int
tally_retx_answered(struct tally_retx *rx, uint32_t i, uint64_t now,
	int resent)
{
	struct tally_retx_unit *u = &rx->u[i];
	int spur = 0;

	u->dsack = TALLY_RETX_NONE;
	if (u->ntx == 1) {
		sample(rx, now - u->first_ns);
		rack_update(rx, u, now);
	} else if (!resent && rx->min_rtt_us != 0 &&
			now - u->xmit_ns < US(rx->min_rtt_us)) {
		/* Sooner than the retransmission could have come back:
		 * the original's answer. */
		spurious(rx, u->why);
		spur = 1;
	} else if (resent) {
		/* The stored result, for a copy: RACK may trust it. */
		rack_update(rx, u, now);
	} else {
		/* The round's own result, for the original or the copy:
		 * too ambiguous for RACK (a copy's short round trip would
		 * take every packet sent before it for lost); an answer
		 * from the stored result may yet show the copy needless. */
		u->dsack = u->why;
	}
	u->busy = 0;
	rx->progress_ns = now;
	rx->probe_armed = 1;
	if (++rx->clean >= REO_DECAY) {
		rx->clean = 0;
		if (rx->reo_mult > 1)
			rx->reo_mult--;
	}
	return spur;
}

int
tally_retx_late_dup(struct tally_retx *rx, uint32_t i)
{
	struct tally_retx_unit *u = &rx->u[i];
	uint8_t why = u->dsack;

	if (why == TALLY_RETX_NONE)
		return 0;
	u->dsack = TALLY_RETX_NONE;
	spurious(rx, why);
	return 1;
}

void
tally_retx_woke(struct tally_retx *rx, uint64_t asked_ns, uint64_t woke_ns)
{
	uint32_t late = woke_ns > asked_ns ? cap((woke_ns - asked_ns) / 1000) :
		0;

	/* A maximum over about a second, then halved at each look. */
	if (late >= rx->sched_us) {
		rx->sched_us = late;
		rx->sched_ns = woke_ns;
	} else if (woke_ns - rx->sched_ns >= SCHED_HOLD_NS) {
		rx->sched_us = umax(late, rx->sched_us / 2);
		rx->sched_ns = woke_ns;
	}
}

uint64_t
tally_retx_deadline(struct tally_retx *rx, uint64_t now_ns, uint32_t rto_us)
{
	uint64_t x = rx->jitter, span = (uint64_t)rto_us * 500;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	rx->jitter = x;
	return now_ns + US(rto_us) + (span > 0 ? x % span : 0);
}

/* RACK's reordering allowance, in microseconds. */
static uint32_t
reo_wnd(const struct tally_retx *rx)
{
	return umax(rx->min_rtt_us / 4 * rx->reo_mult, rx->sched_us);
}

/* When unit u counts as lost by RACK; UINT64_MAX: not on RACK's word. */
static uint64_t
rack_due(const struct tally_retx *rx, const struct tally_retx_unit *u)
{
	if (u->seq >= rx->rack_seq)
		return UINT64_MAX;
	return u->xmit_ns + US(rx->rack_rtt_us + reo_wnd(rx));
}

/* The tail probe's timeout: 2 srtt, at most a fresh packet's timeout. */
static uint64_t
probe_due(const struct tally_retx *rx)
{
	uint64_t since = rx->progress_ns > rx->last_tx_ns ? rx->progress_ns :
		rx->last_tx_ns;
	uint32_t rto = fresh_rto(rx), pto;

	if (!rx->tail || !rx->probe_armed)
		return UINT64_MAX;
	pto = rx->srtt_us == 0 ? rto : umax(2 * rx->srtt_us, 2 * rx->sched_us);
	return since + US(pto < rto ? pto : rto);
}

/* Marks u retransmitted at now for reason why. */
static void
resend(struct tally_retx *rx, struct tally_retx_unit *u, uint64_t now,
	uint8_t why)
{
	u->seq = ++rx->seq;
	u->xmit_ns = now;
	u->ntx++;
	u->why = why;
	rx->last_tx_ns = now;
}

/* The timer of u expired: its timeout doubles, fresh packets' too (Karn). */
static void
back_off(struct tally_retx *rx, struct tally_retx_unit *u, uint64_t now)
{
	if (rx->undo_rto_us == 0)
		rx->undo_rto_us = rx->rto_us;
	u->rto_us = cap((uint64_t)u->rto_us * 2);
	if (u->rto_us > rx->rto_us)
		rx->rto_us = u->rto_us;
	u->due_ns = tally_retx_deadline(rx, now, u->rto_us);
}

/*
 * When u's timer expires: its own deadline (backed off), but never
 * sooner than a fresh timeout after the latest answer of any unit. As
 * TCP restarts its timer on every ACK: while answers come, loss is
 * RACK's to find, and the timer only covers a silence.
 */
static uint64_t
timer_due(const struct tally_retx *rx, const struct tally_retx_unit *u)
{
	uint64_t quiet = rx->progress_ns + US(fresh_rto(rx));

	return u->due_ns > quiet ? u->due_ns : quiet;
}

/*
 * The timer: every expired unit backs off, and only the oldest goes
 * again, as a probe (a silence is a stalled member far more often than
 * a window lost whole; its answer lets RACK find the rest). Returns how
 * many went (0 or 1) into out.
 */
static unsigned int
timeouts(struct tally_retx *rx, uint64_t now, uint32_t *out)
{
	uint32_t oldest = UINT32_MAX;

	for (uint32_t i = 0; i < rx->n; i++) {
		struct tally_retx_unit *u = &rx->u[i];

		if (!u->busy || now < timer_due(rx, u))
			continue;
		if (oldest == UINT32_MAX || u->seq < rx->u[oldest].seq)
			oldest = i;
	}
	if (oldest == UINT32_MAX)
		return 0;
	for (uint32_t i = 0; i < rx->n; i++) {
		struct tally_retx_unit *u = &rx->u[i];

		if (u->busy && i != oldest && now >= timer_due(rx, u))
			back_off(rx, u, now);
	}
	back_off(rx, &rx->u[oldest], now);
	resend(rx, &rx->u[oldest], now, TALLY_RETX_RTO);
	rx->st.timeouts++;
	*out = oldest;
	return 1;
}

/* The tail probe, when due: the latest-sent outstanding packet. */
static unsigned int
tail_probe(struct tally_retx *rx, uint64_t now, uint32_t *out)
{
	uint32_t best = UINT32_MAX;

	if (now < probe_due(rx))
		return 0;
	for (uint32_t i = 0; i < rx->n; i++)
		if (rx->u[i].busy && (best == UINT32_MAX ||
				rx->u[i].seq > rx->u[best].seq))
			best = i;
	if (best == UINT32_MAX)
		return 0;
	rx->probe_armed = 0;
	resend(rx, &rx->u[best], now, TALLY_RETX_PROBE);
	rx->st.probes++;
	*out = best;
	return 1;
}

int
tally_retx_gap(struct tally_retx *rx, uint32_t i, uint64_t now)
{
	struct tally_retx_unit *u;

	if (i >= rx->n || !(u = &rx->u[i])->busy || u->ntx != 1)
		return 0;
	resend(rx, u, now, TALLY_RETX_GAP);
	u->due_ns = tally_retx_deadline(rx, now, u->rto_us);
	rx->st.gap++;
	return 1;
}

unsigned int
tally_retx_poll(struct tally_retx *rx, uint64_t now, uint32_t *out,
	unsigned int max)
{
	unsigned int k = 0;

	for (uint32_t i = 0; i < rx->n && k < max; i++) {
		struct tally_retx_unit *u = &rx->u[i];

		if (u->busy && now >= rack_due(rx, u)) {
			resend(rx, u, now, TALLY_RETX_RACK);
			u->due_ns = tally_retx_deadline(rx, now, u->rto_us);
			rx->st.rack++;
			out[k++] = i;
		}
	}
	if (k == 0 && max > 0)
		k = timeouts(rx, now, out);
	if (k == 0 && max > 0)
		k = tail_probe(rx, now, out);
	return k;
}

uint64_t
tally_retx_next(const struct tally_retx *rx)
{
	uint64_t next = UINT64_MAX;
	int busy = 0;

	for (uint32_t i = 0; i < rx->n; i++) {
		const struct tally_retx_unit *u = &rx->u[i];
		uint64_t r;

		if (!u->busy)
			continue;
		busy = 1;
		if ((r = timer_due(rx, u)) < next)
			next = r;
		if ((r = rack_due(rx, u)) < next)
			next = r;
	}
	if (busy && probe_due(rx) < next)
		next = probe_due(rx);
	return next;
}

/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The retransmission state machine (gpu/lib/retx.c) against a simulated
 * path, in simulated microseconds: one worker runs a call of CHUNKS
 * chunks through W lanes as window.c does (read what has arrived before
 * asking what is overdue; one burst a wake-up otherwise), and an
 * aggregator answers the first copy of a chunk it sees with the round's
 * result and every later copy with the stored result (flag RETX). The
 * path can jitter (delays that wander, FIFO), stall the whole host,
 * deschedule the worker alone, reorder answers and lose packets either
 * way. Ground truth (was an earlier copy's answer on its way?) says
 * which retransmissions were needless.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "lib/retx.h"

#define W	64
#define CHUNKS	20000
#define BURST	32
#define MAXEV	(CHUNKS * 8)
#define INF	UINT64_MAX
#define MS	UINT64_C(1000000)
#define US	UINT64_C(1000)

struct ev {			/* an answer on its way to the worker */
	uint64_t at;
	uint64_t order;		/* ties: in the order sent */
	uint32_t chunk;
	uint8_t resent;		/* the stored result (flag RETX) */
};

struct gap {			/* [from, to): ns */
	uint64_t from, to;
};

struct sim {
	/* the path */
	uint64_t up_ns, down_ns;	/* base one-way delays */
	uint64_t wander_ns;		/* delay jitter: a random walk in
					 * [0, wander_ns) added each way */
	double loss_up, loss_down;
	double reorder;			/* share of answers held back */
	uint64_t reorder_ns;		/*   by this much, out of order */
	const struct gap *stalls;	/* the whole host stops (path too) */
	unsigned int nstalls;
	const struct gap *desched;	/* the worker alone stops */
	unsigned int ndesched;
	unsigned int tail_lost;		/* the last chunks' first answers
					 * are lost */
	uint32_t rto_us;
	/* state */
	uint64_t now, walk, last_up, last_down, rng, pushed;
	struct ev heap[MAXEV];
	unsigned int nheap;
	uint8_t ok_copy[CHUNKS];	/* an earlier copy reached the
					 * aggregator */
	uint8_t answered[CHUNKS];	/* an earlier copy's answer is on
					 * its way (not lost) */
	uint8_t done[CHUNKS];
	uint32_t chunk_of[W];
	uint32_t started, ndone;
	/* results */
	uint64_t retx, needless, end_ns;
	struct tally_retx rx;
	struct tally_retx_unit units[W];
};

static double
rnd(struct sim *s)
{
	s->rng ^= s->rng << 13;
	s->rng ^= s->rng >> 7;
	s->rng ^= s->rng << 17;
	return (double)(s->rng >> 11) / 9007199254740992.0;
}

static int
before(const struct ev *a, const struct ev *b)
{
	return a->at < b->at || (a->at == b->at && a->order < b->order);
}

static void
push(struct sim *s, uint64_t at, uint32_t chunk, uint8_t resent)
{
	struct ev e = { .at = at, .order = s->pushed++, .chunk = chunk,
		.resent = resent };
	unsigned int i = s->nheap++;

	assert_true(s->nheap <= MAXEV);
	while (i > 0 && before(&e, &s->heap[(i - 1) / 2])) {
		s->heap[i] = s->heap[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	s->heap[i] = e;
}

static struct ev
pop(struct sim *s)
{
	struct ev top = s->heap[0], last = s->heap[--s->nheap];
	unsigned int i = 0, c;

	while ((c = 2 * i + 1) < s->nheap) {
		if (c + 1 < s->nheap && before(&s->heap[c + 1], &s->heap[c]))
			c++;
		if (!before(&s->heap[c], &last))
			break;
		s->heap[i] = s->heap[c];
		i = c;
	}
	s->heap[i] = last;
	return top;
}

/* t moved past any stall of the whole host that holds it. */
static uint64_t
unstall(const struct sim *s, uint64_t t)
{
	for (unsigned int i = 0; i < s->nstalls; i++)
		if (t >= s->stalls[i].from && t < s->stalls[i].to)
			t = s->stalls[i].to;
	return t;
}

/* When the worker, wanting to run at t, runs. */
static uint64_t
runs_at(const struct sim *s, uint64_t t)
{
	t = unstall(s, t);
	for (unsigned int i = 0; i < s->ndesched; i++)
		if (t >= s->desched[i].from && t < s->desched[i].to)
			t = s->desched[i].to;
	return t;
}

/* One copy of chunk c leaves the worker now: its fate on the path. */
static void
transmit(struct sim *s, uint32_t c)
{
	uint64_t up, down;
	int lost_up = rnd(s) < s->loss_up, lost_down = rnd(s) < s->loss_down;

	if (s->wander_ns > 0) {
		s->walk += (uint64_t)(rnd(s) * s->wander_ns / 32);
		s->walk -= (uint64_t)(rnd(s) * s->wander_ns / 32);
		if (s->walk > s->wander_ns)
			s->walk = s->walk > (INF >> 1) ? 0 : s->wander_ns;
	}
	up = unstall(s, s->now + s->up_ns + s->walk);
	up = up > s->last_up ? up : s->last_up;		/* FIFO */
	s->last_up = up;
	if (s->tail_lost > 0 && c >= CHUNKS - s->tail_lost && !s->ok_copy[c])
		lost_down = 1;
	if (lost_up)
		return;
	down = unstall(s, up + s->down_ns + s->walk);
	if (rnd(s) < s->reorder)
		down += s->reorder_ns;
	else {
		down = down > s->last_down ? down : s->last_down;
		s->last_down = down;
	}
	if (!lost_down)
		push(s, down, c, s->ok_copy[c]);
	s->answered[c] |= !lost_down;
	s->ok_copy[c] = 1;
}

static void
start(struct sim *s, uint32_t lane, uint32_t c)
{
	s->chunk_of[lane] = c;
	tally_retx_sent(&s->rx, lane, s->now);
	if (++s->started == CHUNKS)
		s->rx.tail = 1;
	transmit(s, c);
}

/* Takes one answer: the lane's chunk is done, the next one goes. */
static void
take(struct sim *s, const struct ev *e)
{
	uint32_t lane = e->chunk % W;

	if (s->done[e->chunk]) {
		uint32_t holds = e->chunk + W < CHUNKS ? e->chunk + W :
			e->chunk;

		if (e->resent && s->chunk_of[lane] == holds)
			(void)tally_retx_late_dup(&s->rx, lane);
		return;
	}
	assert_int_equal(s->chunk_of[lane], e->chunk);
	(void)tally_retx_answered(&s->rx, lane, s->now, e->resent);
	s->done[e->chunk] = 1;
	s->ndone++;
	if (e->chunk + W < CHUNKS)
		start(s, lane, e->chunk + W);
}

/* Takes up to max answers that have arrived by now; how many. */
static unsigned int
read_burst(struct sim *s, unsigned int max)
{
	unsigned int k = 0;

	while (k < max && s->nheap > 0 && s->heap[0].at <= s->now) {
		struct ev e = pop(s);

		take(s, &e);
		k++;
	}
	return k;
}

static void
poll_and_send(struct sim *s)
{
	uint32_t due[W];
	unsigned int k = tally_retx_poll(&s->rx, s->now, due, W);

	for (unsigned int i = 0; i < k; i++) {
		uint32_t c = s->chunk_of[due[i]];

		s->retx++;
		s->needless += s->answered[c];
		transmit(s, c);
	}
}

/* One call, as window.c runs it. */
static void
run(struct sim *s, uint64_t seed)
{
	s->rng = seed | 1;
	tally_retx_init(&s->rx, s->rto_us, seed * 7 + 1);
	s->now = 1 * MS;
	tally_retx_begin(&s->rx, s->units, W, s->now);
	for (uint32_t c = 0; c < W; c++)
		start(s, c, c);
	while (s->ndone < CHUNKS) {
		uint64_t next = tally_retx_next(&s->rx);
		uint64_t head = s->nheap > 0 ? s->heap[0].at : INF;
		uint64_t want, got;

		assert_true(next != INF || head != INF);	/* no hang */
		assert_true(s->now < 60000 * MS);
		if (s->now >= next) {
			while (read_burst(s, BURST) > 0)
				;
			poll_and_send(s);
			continue;
		}
		want = next < head ? next : head;
		if (want < s->now)
			want = s->now;
		got = runs_at(s, want);
		s->now = got;
		tally_retx_woke(&s->rx, want, got);
		(void)read_burst(s, BURST);
	}
	s->end_ns = s->now;
	print_message("# %llu retx (%llu needless): rack %llu probes %llu "
		"timeouts %llu spurious %llu; srtt %u rttvar %u rto %u "
		"sched %u reo %u; %.1f ms\n", (unsigned long long)s->retx,
		(unsigned long long)s->needless,
		(unsigned long long)s->rx.st.rack,
		(unsigned long long)s->rx.st.probes,
		(unsigned long long)s->rx.st.timeouts,
		(unsigned long long)s->rx.st.spurious, s->rx.srtt_us,
		s->rx.rttvar_us, s->rx.rto_us, s->rx.sched_us,
		s->rx.reo_mult, (double)(s->end_ns - MS) / MS);
}

static struct sim *
sim_new(void)
{
	struct sim *s = calloc(1, sizeof(*s));

	assert_non_null(s);
	s->up_ns = 150 * US;
	s->down_ns = 150 * US;
	s->rto_us = 2000;
	return s;
}

/* Delays that wander (0.3 to 2.3 ms round trips), FIFO: nothing goes
 * twice. */
static void
test_jitter(void **state)
{
	struct sim *s = sim_new();

	(void)state;
	s->wander_ns = 1 * MS;
	run(s, 11);
	assert_int_equal(s->retx, 0);
	assert_int_equal(s->rx.st.spurious, 0);
	free(s);
}

/* The whole host stops now and then (2-core machine, other processes):
 * answers and the worker alike. The worker learns the lateness of its
 * own wake-ups, and its timeout keeps above it: nothing goes twice. */
static void
test_host_stalls(void **state)
{
	static struct gap g[200];
	struct sim *s = sim_new();

	(void)state;
	for (unsigned int i = 0; i < 200; i++)
		g[i] = (struct gap){ 5 * MS + i * 10 * MS,
			5 * MS + i * 10 * MS + (1 + i % 6) * MS };
	s->stalls = g;
	s->nstalls = 200;
	s->wander_ns = 200 * US;
	run(s, 12);
	assert_int_equal(s->retx, 0);
	free(s);
}

/* The worker alone is descheduled for 20 ms now and then: its answers
 * wait for it in the socket, and none is taken for lost. */
static void
test_descheduled_sender(void **state)
{
	static struct gap g[40];
	struct sim *s = sim_new();

	(void)state;
	for (unsigned int i = 0; i < 40; i++)
		g[i] = (struct gap){ 3 * MS + i * 30 * MS,
			3 * MS + i * 30 * MS + 20 * MS };
	s->desched = g;
	s->ndesched = 40;
	run(s, 13);
	assert_int_equal(s->retx, 0);
	free(s);
}

/* 2% of answers are overtaken by 0.4 ms: RACK takes some for lost at
 * first, finds them needless (the original's answer came sooner than
 * the copy's could) and widens its allowance; few go twice. */
static void
test_reordering(void **state)
{
	struct sim *s = sim_new();

	(void)state;
	s->reorder = 0.02;
	s->reorder_ns = 400 * US;
	run(s, 14);
	assert_true(s->retx < CHUNKS / 200);	/* below 0.5% */
	assert_true(s->rx.st.spurious > 0);
	assert_true(s->rx.st.spurious >= s->needless / 2);
	assert_true(s->rx.reo_mult > 1);
	free(s);
}

/* 1% loss each way: every lost chunk goes again, nearly all on RACK's
 * word long before a timer, and the call takes little longer than a
 * lossless one. */
static void
test_random_loss(void **state)
{
	struct sim *s = sim_new(), *clean = sim_new();
	uint64_t lost_first = 0;

	(void)state;
	s->loss_up = s->loss_down = 0.01;
	run(s, 15);
	run(clean, 15);
	for (uint32_t c = 0; c < CHUNKS; c++)
		assert_true(s->done[c]);
	lost_first = s->retx - s->needless;
	assert_true(lost_first > CHUNKS / 100);	/* about 2% of chunks */
	assert_true(s->rx.st.rack >= s->retx * 8 / 10);
	assert_true(s->needless <= s->retx / 10);
	assert_true(s->end_ns - 1 * MS <= (clean->end_ns - 1 * MS) * 12 / 10);
	free(s);
	free(clean);
}

/* The last chunks' answers are lost: no later answer can reveal it, the
 * tail probe does, well before the (10 ms) timer would. */
static void
test_tail_loss(void **state)
{
	struct sim *s = sim_new(), *clean = sim_new();

	(void)state;
	s->rto_us = clean->rto_us = 10000;
	s->tail_lost = 3;
	run(s, 16);
	run(clean, 16);
	assert_true(s->rx.st.probes >= 1);
	assert_int_equal(s->rx.st.timeouts, 0);
	assert_true(s->retx >= 3);
	assert_true(s->end_ns < clean->end_ns + 3 * MS);
	free(s);
	free(clean);
}

/* A stall of the path alone (a member descheduled) past the timeout:
 * one probe goes, the original's answer follows at once, the probe is
 * found needless and the back-off undone. */
static void
test_spurious_undo(void **state)
{
	struct tally_retx rx;
	struct tally_retx_unit u[2];
	uint32_t due[2];
	uint64_t t = 10 * MS;
	uint32_t rto;

	(void)state;
	tally_retx_init(&rx, 2000, 5);
	tally_retx_begin(&rx, u, 2, t);
	for (int i = 0; i < 50; i++) {		/* 500 us round trips */
		tally_retx_sent(&rx, 0, t);
		t += 500 * US;
		assert_int_equal(tally_retx_answered(&rx, 0, t, 0), 0);
	}
	rto = rx.rto_us;
	tally_retx_sent(&rx, 0, t);
	tally_retx_sent(&rx, 1, t);
	assert_int_equal(tally_retx_poll(&rx, t + (uint64_t)rto * US - 1,
		due, 2), 0);
	t += (uint64_t)rto * US;
	assert_int_equal(tally_retx_poll(&rx, t, due, 2), 1);	/* a probe */
	assert_int_equal(rx.st.timeouts, 1);
	assert_true(rx.rto_us > rto);
	assert_int_equal(tally_retx_answered(&rx, due[0], t + 50 * US, 0), 1);
	assert_int_equal(rx.st.spurious, 1);
	assert_int_equal(rx.st.undone, 1);
	assert_int_equal(rx.rto_us, rto);
}

/* The aggregator answers a retransmission from the stored result after
 * the round's own result came: that retransmission was needless. */
static void
test_late_dup(void **state)
{
	struct tally_retx rx;
	struct tally_retx_unit u[1];
	uint32_t due[1];
	uint64_t t = 10 * MS;

	(void)state;
	tally_retx_init(&rx, 2000, 5);
	tally_retx_begin(&rx, u, 1, t);
	tally_retx_sent(&rx, 0, t);
	t += 400 * US;
	(void)tally_retx_answered(&rx, 0, t, 0);	/* min_rtt 400 us */
	tally_retx_sent(&rx, 0, t);
	t += 2000 * US;
	assert_int_equal(tally_retx_poll(&rx, t, due, 1), 1);
	/* Its answer 500 us later: the copy could have done it. */
	assert_int_equal(tally_retx_answered(&rx, 0, t + 500 * US, 0), 0);
	assert_int_equal(rx.st.spurious, 0);
	assert_int_equal(tally_retx_late_dup(&rx, 0), 1);
	assert_int_equal(rx.st.spurious, 1);
	assert_int_equal(tally_retx_late_dup(&rx, 0), 0);	/* once */
	/* Answered from the stored result: no later proof possible. */
	tally_retx_sent(&rx, 0, t);
	assert_int_equal(tally_retx_poll(&rx, t + 100 * MS, due, 1), 1);
	(void)tally_retx_answered(&rx, 0, t + 101 * MS, 1);
	assert_int_equal(tally_retx_late_dup(&rx, 0), 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_jitter),
		cmocka_unit_test(test_host_stalls),
		cmocka_unit_test(test_descheduled_sender),
		cmocka_unit_test(test_reordering),
		cmocka_unit_test(test_random_loss),
		cmocka_unit_test(test_tail_loss),
		cmocka_unit_test(test_spurious_undo),
		cmocka_unit_test(test_late_dup),
	};

	return cmocka_run_group_tests_name("retx-sim", tests, NULL, NULL);
}

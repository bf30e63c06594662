/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Block-sparse streams in the engine (docs/protocol.md, "Block-sparse
 * streams"): rounds of one block each, header-only contributions from
 * members without the block, the look-ahead (next_block) that names the
 * next round, the checks that keep sparse and dense rounds apart, and a
 * randomized network (loss, duplication, reordering of contributions and
 * results) against a reference sum, as agg_random_test.c does for dense
 * rounds.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agg/agg.h"

#define TOKEN	0x5eed5eed12345678ull
#define JOB	7

static struct {
	struct tally_job *job;
	struct tally_jobtab *tab;
	struct tally_agg_stats st;
	struct tally_verdict v;
	uint8_t pkt[TALLY_HDR_LEN + 4 * TALLY_MAX_ELEMS];
} c;

static void
setup_job(uint8_t world, uint16_t window, uint16_t max_elems)
{
	struct tally_job_conf conf = {
		.id = JOB, .token = TOKEN, .world = world, .window = window,
		.max_elems = max_elems,
	};

	memset(&c.st, 0, sizeof(c.st));
	c.job = tally_job_create(&conf);
	assert_non_null(c.job);
	c.tab = tally_jobtab_create(&c.job, 1);
	assert_non_null(c.tab);
}

static int
teardown(void **state)
{
	(void)state;
	tally_jobtab_destroy(c.tab);
	tally_job_destroy(c.job);
	c.tab = NULL;
	c.job = NULL;
	return 0;
}

/*
 * A SPARSE SUM (i32) of count elements at offset, naming next, to round
 * (its low bit: the set) of slot.
 */
static struct tally_hdr
shdr(uint8_t rank, uint16_t slot, uint64_t round, uint32_t offset,
	uint16_t count, uint32_t next)
{
	struct tally_hdr h = {
		.version = TALLY_PROTO_VERSION, .type = TALLY_PT_SUM,
		.flags = (uint8_t)(TALLY_F_SPARSE |
			(round & 1 ? TALLY_F_SET : 0)),
		.enc = TALLY_ENC_I32, .job = JOB, .token = TOKEN, .rank = rank,
		.slot = slot, .offset = offset, .count = count,
		.next_block = next, .round = round,
	};

	return h;
}

/* Sends h with plen bytes of payload (NULL: zeros). */
static enum tally_verdict_kind
send_len(const struct tally_hdr *h, const void *payload, size_t plen)
{
	tally_hdr_encode(h, c.pkt);
	if (payload != NULL)
		memcpy(c.pkt + TALLY_HDR_LEN, payload, plen);
	else
		memset(c.pkt + TALLY_HDR_LEN, 0, plen);
	return tally_agg_process(c.tab, &c.st, c.pkt,
		(unsigned int)(TALLY_HDR_LEN + plen), NULL, &c.v);
}

/* Sends h with the payload its count says. */
static enum tally_verdict_kind
send(const struct tally_hdr *h, const void *payload)
{
	return send_len(h, payload, tally_enc_payload_len(h->enc, h->count));
}

static uint64_t
total_drops(void)
{
	uint64_t n = 0;

	for (int i = 0; i < TALLY_ST_MAX_; i++)
		n += c.st.drops[i];
	return n;
}

/*
 * Checks the verdict's result header against a round's. Results carry
 * rank 255, resent ones too.
 */
static void
check_result(unsigned int kind, uint8_t rank, uint16_t slot, uint64_t round,
	uint32_t offset, uint16_t count, uint32_t next)
{
	const struct tally_hdr *r = &c.v.hdr;

	(void)rank;
	assert_int_equal(c.v.kind, kind);
	assert_int_equal(r->type, TALLY_PT_SUM_RESULT);
	assert_int_equal(r->flags, TALLY_F_SPARSE |
		(round & 1 ? TALLY_F_SET : 0) |
		(kind == TALLY_V_RESEND ? TALLY_F_RETX : 0));
	assert_int_equal(r->enc, TALLY_ENC_I32);
	assert_int_equal(r->rank, TALLY_RANK_ALL);
	assert_int_equal(r->round, round);
	assert_int_equal(r->slot, slot);
	assert_int_equal(r->offset, offset);
	assert_int_equal(r->count, count);
	assert_int_equal(r->next_block, next);
	assert_int_equal(r->status, TALLY_ST_OK);
	assert_int_equal(c.v.payload_len, 4u * count);
}

/* ---- one stream, four workers, in lockstep ---- */

#define SW_WORLD	4
#define SW_WINDOW	3
#define SW_B		16
#define SW_NBLOCKS	40

/* Worker w selected block b (worker 3 selected none). */
static int
sw_selected(unsigned int w, unsigned int b)
{
	switch (w) {
	case 0:
		return b % 4 == 1;
	case 1:
		return b == 7 || b == 22 || b == 23 || b == 39;
	case 2:
		return b >= 30;
	default:
		return 0;
	}
}

static int32_t
sw_value(unsigned int w, unsigned int i)
{
	return (int32_t)((w + 1) * 1000 + i) * (i % 3 ? 1 : -1);
}

/* w's first selected block of stream s after block after (-1: any). */
static uint32_t
sw_next(unsigned int w, unsigned int s, long after)
{
	for (unsigned int b = s; b < SW_NBLOCKS; b += SW_WINDOW)
		if ((long)b > after && sw_selected(w, b))
			return b;
	return TALLY_NO_BLOCK;
}

static void
stream_four_workers(void **state)
{
	int32_t vals[SW_B], want[SW_B];
	unsigned int visits[SW_NBLOCKS] = { 0 };
	uint64_t elems = 0, rounds = 0;
	struct tally_hdr h;

	(void)state;
	setup_job(SW_WORLD, SW_WINDOW, SW_B);
	for (uint16_t s = 0; s < SW_WINDOW; s++) {
		uint64_t set = s & 1;	/* the round: any agreed start */
		uint32_t blk, want_next = TALLY_NO_BLOCK;

		/* Bootstrap: headers only, each naming its first block. */
		for (uint8_t w = 0; w < SW_WORLD; w++) {
			uint32_t nx = sw_next(w, s, -1);

			if (nx < want_next)
				want_next = nx;
			h = shdr(w, s, set, s * SW_B, 0, nx);
			assert_int_equal(send(&h, NULL), w + 1 < SW_WORLD ?
				TALLY_V_TAKEN : TALLY_V_COMPLETE);
		}
		check_result(TALLY_V_COMPLETE, TALLY_RANK_ALL, s, set,
			s * SW_B, 0, want_next);
		rounds++;
		for (blk = c.v.hdr.next_block; blk != TALLY_NO_BLOCK;
				blk = c.v.hdr.next_block) {
			assert_int_equal(blk % SW_WINDOW, s);
			assert_true(blk < SW_NBLOCKS);
			set++;
			visits[blk]++;
			memset(want, 0, sizeof(want));
			want_next = TALLY_NO_BLOCK;
			/* A different first sender every round. */
			for (unsigned int k = 0; k < SW_WORLD; k++) {
				uint8_t w = (uint8_t)((k + blk) % SW_WORLD);
				uint32_t nx = sw_next(w, s, blk);
				int has = sw_selected(w, blk);

				if (nx < want_next)
					want_next = nx;
				for (unsigned int i = 0; i < SW_B; i++) {
					vals[i] = sw_value(w, blk * SW_B + i);
					if (has)
						want[i] += vals[i];
				}
				h = shdr(w, s, set, blk * SW_B,
					has ? SW_B : 0, nx);
				elems += has ? SW_B : 0;
				assert_int_equal(send(&h, vals),
					k + 1 < SW_WORLD ? TALLY_V_TAKEN :
					TALLY_V_COMPLETE);
			}
			check_result(TALLY_V_COMPLETE, TALLY_RANK_ALL, s, set,
				blk * SW_B, SW_B, want_next);
			assert_memory_equal(c.v.payload, want, sizeof(want));
			rounds++;
		}
	}
	/* Every block some worker selected came back, once; no other. */
	for (unsigned int b = 0; b < SW_NBLOCKS; b++) {
		int any = 0;

		for (unsigned int w = 0; w < SW_WORLD; w++)
			any |= sw_selected(w, b);
		assert_int_equal(visits[b], any ? 1 : 0);
	}
	assert_int_equal(c.st.completed, rounds);
	assert_int_equal(c.st.accepted, rounds * SW_WORLD);
	assert_int_equal(c.st.elements, elems);
	assert_int_equal(total_drops(), 0);
	assert_int_equal(c.st.nacks, 0);
}

/* No member selected anything: the bootstrap round ends the stream. */
static void
empty_stream(void **state)
{
	struct tally_hdr h;

	(void)state;
	setup_job(2, 1, 16);
	h = shdr(0, 0, 1, 0, 0, TALLY_NO_BLOCK);
	assert_int_equal(send(&h, NULL), TALLY_V_TAKEN);
	h.rank = 1;
	assert_int_equal(send(&h, NULL), TALLY_V_COMPLETE);
	check_result(TALLY_V_COMPLETE, TALLY_RANK_ALL, 0, 1, 0, 0,
		TALLY_NO_BLOCK);
	assert_int_equal(c.st.elements, 0);
}

/* Retransmissions and duplicates, of blocks and of headers alone. */
static void
retransmissions(void **state)
{
	int32_t a[8] = { 1, 2, 3, 4, 5, 6, 7, 8 }, want[8];
	struct tally_hdr hd = shdr(0, 2, 1, 5 * 8, 8, 9);	/* data */
	struct tally_hdr hh = shdr(1, 2, 1, 5 * 8, 0, 13);	/* header */
	struct tally_hdr hd2 = shdr(2, 2, 1, 5 * 8, 8, TALLY_NO_BLOCK);

	(void)state;
	for (int i = 0; i < 8; i++)
		want[i] = 2 * a[i];
	setup_job(3, 4, 8);
	/* The round opens with a header: lanes wait for the first block. */
	assert_int_equal(send(&hh, NULL), TALLY_V_TAKEN);
	assert_int_equal(send(&hd, a), TALLY_V_TAKEN);
	/* Duplicates to the open round are dropped, never counted. */
	hh.flags |= TALLY_F_RETX;
	hd.flags |= TALLY_F_RETX;
	assert_int_equal(send(&hh, NULL), TALLY_V_DROP);
	assert_int_equal(c.v.status, TALLY_ST_OK);
	assert_int_equal(send(&hd, a), TALLY_V_DROP);
	assert_int_equal(c.st.duplicates, 2);
	assert_int_equal(send(&hd2, a), TALLY_V_COMPLETE);
	check_result(TALLY_V_COMPLETE, TALLY_RANK_ALL, 2, 1, 40, 8, 9);
	assert_memory_equal(c.v.payload, want, sizeof(want));
	/* After completion: the stored result, to the sender alone. */
	for (int k = 0; k < 2; k++) {
		assert_int_equal(send(&hd, a), TALLY_V_RESEND);
		check_result(TALLY_V_RESEND, 0, 2, 1, 40, 8, 9);
		assert_memory_equal(c.v.payload, want, sizeof(want));
		assert_int_equal(send(&hh, NULL), TALLY_V_RESEND);
		check_result(TALLY_V_RESEND, 1, 2, 1, 40, 8, 9);
		assert_memory_equal(c.v.payload, want, sizeof(want));
	}
	assert_int_equal(c.st.resent, 4);
	assert_int_equal(c.st.accepted, 3);
	assert_int_equal(c.st.completed, 1);
	assert_int_equal(c.st.elements, 16);
	assert_int_equal(total_drops(), 0);
	/* The next round on the other set frees this one, as for dense. */
	hd = shdr(0, 2, 2, 9 * 8, 8, TALLY_NO_BLOCK);
	assert_int_equal(send(&hd, a), TALLY_V_TAKEN);
	assert_int_equal(send(&hh, NULL), TALLY_V_RESEND); /* still kept */
	check_result(TALLY_V_RESEND, 1, 2, 1, 40, 8, 9);
}

/* A retransmitted bootstrap gets the stored count-0 result back. */
static void
bootstrap_retransmission(void **state)
{
	struct tally_hdr h = shdr(0, 0, 0, 0, 0, 4);

	(void)state;
	setup_job(2, 2, 8);
	assert_int_equal(send(&h, NULL), TALLY_V_TAKEN);
	h.rank = 1;
	h.next_block = 2;
	assert_int_equal(send(&h, NULL), TALLY_V_COMPLETE);
	check_result(TALLY_V_COMPLETE, TALLY_RANK_ALL, 0, 0, 0, 0, 2);
	h.flags |= TALLY_F_RETX;
	assert_int_equal(send(&h, NULL), TALLY_V_RESEND);
	check_result(TALLY_V_RESEND, 1, 0, 0, 0, 0, 2);
}

/* Expects h (payload of plen bytes) refused with status s as kind. */
static void
refused(const struct tally_hdr *h, const void *payload, size_t plen,
	enum tally_status s, enum tally_verdict_kind kind)
{
	uint64_t before = c.st.drops[s], nacks = c.st.nacks;
	uint64_t accepted = c.st.accepted;

	assert_int_equal(send_len(h, payload, plen), kind);
	assert_int_equal(c.v.status, s);
	assert_int_equal(c.st.drops[s], before + 1);
	assert_int_equal(c.st.nacks, nacks + (kind == TALLY_V_NACK));
	assert_int_equal(c.st.accepted, accepted);
	if (kind == TALLY_V_NACK) {
		assert_int_equal(c.v.hdr.type, TALLY_PT_NACK);
		assert_int_equal(c.v.hdr.status, s);
		assert_int_equal(c.v.hdr.offset, h->offset);
		assert_int_equal(c.v.hdr.rank, h->rank);
	}
}

static void
checks(void **state)
{
	int32_t a[32] = { 0 };
	struct tally_hdr h;

	(void)state;
	setup_job(4, 8, 16);
	/* Length: count 0 only with SPARSE, and then no payload. */
	h = shdr(0, 0, 0, 0, 0, 1);
	h.flags &= (uint8_t)~TALLY_F_SPARSE;
	refused(&h, NULL, 0, TALLY_ST_BAD_LENGTH, TALLY_V_NACK);
	h = shdr(0, 0, 0, 0, 0, 1);
	refused(&h, a, 4, TALLY_ST_BAD_LENGTH, TALLY_V_NACK);
	h = shdr(0, 0, 0, 0, 17, 1);
	refused(&h, a, 68, TALLY_ST_BAD_LENGTH, TALLY_V_NACK); /* > max */
	h = shdr(0, 0, 0, 0, 8, 1);
	refused(&h, a, 4 * 8 - 1, TALLY_ST_BAD_LENGTH, TALLY_V_NACK);
	/* Maxima are never sparse: dropped as bad_type. */
	h = shdr(0, 0, 0, 0, 4, 1);
	h.type = TALLY_PT_MAX;
	refused(&h, a, 16, TALLY_ST_BAD_TYPE, TALLY_V_DROP);
	h.count = 0;
	refused(&h, NULL, 0, TALLY_ST_BAD_TYPE, TALLY_V_DROP);
	assert_int_equal(c.st.accepted, 0);

	/* Slot 1: a sparse round at offset 32, data count 16 once set. */
	h = shdr(0, 1, 0, 32, 0, 5);
	assert_int_equal(send(&h, NULL), TALLY_V_TAKEN);
	h = shdr(1, 1, 0, 32, 16, 5);
	assert_int_equal(send(&h, a), TALLY_V_TAKEN);
	h = shdr(2, 1, 0, 32, 8, 5);		/* another data count */
	refused(&h, a, 32, TALLY_ST_MISMATCH, TALLY_V_NACK);
	h = shdr(2, 1, 0, 48, 0, 5);		/* another offset */
	refused(&h, NULL, 0, TALLY_ST_MISMATCH, TALLY_V_NACK);
	h = shdr(2, 1, 0, 48, 16, 5);
	refused(&h, a, 64, TALLY_ST_MISMATCH, TALLY_V_NACK);
	h = shdr(2, 1, 0, 32, 16, 5);		/* dense into sparse */
	h.flags &= (uint8_t)~TALLY_F_SPARSE;
	refused(&h, a, 64, TALLY_ST_MISMATCH, TALLY_V_NACK);
	h = shdr(2, 1, 0, 32, 0, 5);		/* another encoding */
	h.enc = TALLY_ENC_I16;
	refused(&h, NULL, 0, TALLY_ST_MISMATCH, TALLY_V_NACK);
	h = shdr(2, 1, 0, 32, 0, 5);		/* another scale */
	h.scale_exp = 3;
	refused(&h, NULL, 0, TALLY_ST_MISMATCH, TALLY_V_NACK);
	/* A counted member whose copy differs is refused, not counted. */
	h = shdr(1, 1, 0, 32, 8, 5);
	h.flags |= TALLY_F_RETX;
	refused(&h, a, 32, TALLY_ST_MISMATCH, TALLY_V_NACK);
	/* Moving on before the round completed. */
	h = shdr(1, 1, 1, 80, 0, 9);
	refused(&h, NULL, 0, TALLY_ST_EARLY, TALLY_V_NACK);
	assert_int_equal(c.st.accepted, 2);

	/* Slot 2: a dense round refuses sparse contributions. */
	h = shdr(0, 2, 0, 64, 16, TALLY_NO_BLOCK);
	h.flags &= (uint8_t)~TALLY_F_SPARSE;
	assert_int_equal(send(&h, a), TALLY_V_TAKEN);
	h = shdr(1, 2, 0, 64, 16, 5);
	refused(&h, a, 64, TALLY_ST_MISMATCH, TALLY_V_NACK);
	h = shdr(1, 2, 0, 64, 0, 5);
	refused(&h, NULL, 0, TALLY_ST_MISMATCH, TALLY_V_NACK);

	/* Slot 3: a round that completed without a block stays so. */
	for (uint8_t w = 0; w < 4; w++) {
		h = shdr(w, 3, 0, 48, 0, TALLY_NO_BLOCK);
		assert_int_equal(send(&h, NULL), w < 3 ? TALLY_V_TAKEN :
			TALLY_V_COMPLETE);
	}
	h = shdr(2, 3, 0, 48, 16, TALLY_NO_BLOCK);
	h.flags |= TALLY_F_RETX;
	refused(&h, a, 64, TALLY_ST_MISMATCH, TALLY_V_NACK);
	h = shdr(2, 3, 0, 48, 0, TALLY_NO_BLOCK);
	assert_int_equal(send(&h, NULL), TALLY_V_RESEND);
}

/* ---- randomized streams under a lossy, reordering network ---- */

#define NSEEDS	5

struct rcase {
	const char *name;
	unsigned int world;
	unsigned int window;
	unsigned int b;		/* elements a block */
	unsigned int nblocks;
	unsigned int drop_pct;	/* packets lost, both ways */
	unsigned int dup_pct;	/* packets delivered and kept */
};

/* splitmix64 */
static uint64_t
rnd(uint64_t *r)
{
	uint64_t z = (*r += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static uint32_t
rnd_below(uint64_t *r, uint32_t n)
{
	return (uint32_t)(((rnd(r) >> 32) * n) >> 32);
}

#define CHECK(sm, cond, ...) do { \
	if (!(cond)) { \
		print_error("%s: seed %#" PRIx64 " step %" PRIu64 ": ", \
			(sm)->rc->name, (sm)->seed, (sm)->step); \
		print_error(__VA_ARGS__); \
		print_error("\n  (%s)\n", #cond); \
		fail(); \
	} \
} while (0)

/* A packet in flight: rank's contribution or a result to rank. */
struct rpkt {
	uint8_t *res;		/* NULL: a contribution; else header+payload */
	unsigned int len;
	uint16_t slot;
	uint8_t rank;
	uint8_t retx;
	uint32_t round;		/* the round of the slot's stream */
};

/* A worker's stream on one slot. */
struct wstream {
	uint32_t round;		/* round in flight (or last, when done) */
	uint32_t pos;		/* first of its blocks not yet sent */
	uint32_t blk;		/* the round's block; NO_BLOCK: bootstrap */
	uint8_t set;		/* the round's set */
	uint8_t set0;		/* the bootstrap round's set */
	uint8_t done;
	uint64_t deadline;
};

struct rsim {
	const struct rcase *rc;
	uint64_t seed, step, rng;
	unsigned int nelems;
	uint32_t *vals;		/* [w * nelems + i]: 0 outside selections */
	uint8_t *sel;		/* [w * nblocks + b] */
	uint32_t *ref;		/* the sum */
	uint32_t **rounds;	/* [s]: the stream's blocks, the union */
	uint32_t *nrounds;	/* [s]: 1 + the union's blocks */
	uint32_t maxr;
	uint32_t *out;		/* [w * nelems + i]: what w reconstructs */
	uint32_t *got;		/* [w * nblocks + b]: results taken */
	struct wstream *ws;	/* [w * window + s] */
	uint8_t *counted;	/* [(w * window + s) * maxr + k] */
	uint32_t *ncounted;	/* [s * maxr + k] */
	int32_t *hi;		/* [w * window + s]: highest counted round */
	unsigned int active;	/* streams not done, over all workers */
	struct tally_job_conf jc;
	struct tally_job *job;
	struct tally_jobtab *tab;
	struct tally_agg_stats st;
	struct rpkt *net;
	unsigned int nnet, capnet;
	uint64_t dups, resends, elems, stale;
	uint8_t buf[TALLY_HDR_LEN + 4 * TALLY_MAX_ELEMS];
};

static uint32_t
blk_count(const struct rsim *sm, uint32_t blk)
{
	uint32_t off = blk * sm->rc->b;

	return sm->nelems - off < sm->rc->b ? sm->nelems - off : sm->rc->b;
}

static void
net_push(struct rsim *sm, struct rpkt p)
{
	if (sm->nnet == sm->capnet) {
		sm->capnet = sm->capnet ? 2 * sm->capnet : 256;
		sm->net = realloc(sm->net, sm->capnet * sizeof(*sm->net));
		assert_non_null(sm->net);
	}
	sm->net[sm->nnet++] = p;
}

/* w's first selected block of stream s at or after block from. */
static uint32_t
first_sel(const struct rsim *sm, unsigned int w, unsigned int s, uint32_t from)
{
	uint32_t b = from + (s + sm->rc->window - from % sm->rc->window) %
		sm->rc->window;

	for (; b < sm->rc->nblocks; b += sm->rc->window)
		if (sm->sel[(size_t)w * sm->rc->nblocks + b])
			return b;
	return TALLY_NO_BLOCK;
}

static uint64_t
timeout(struct rsim *sm)
{
	uint32_t base = 2 * sm->nnet + 4 * sm->rc->world;

	return sm->step + base + rnd_below(&sm->rng, base);
}

/* Puts w's contribution to its stream's round in flight. */
static void
worker_send(struct rsim *sm, unsigned int w, unsigned int s, int retx)
{
	struct wstream *ws = &sm->ws[w * sm->rc->window + s];

	net_push(sm, (struct rpkt){ .slot = (uint16_t)s, .rank = (uint8_t)w,
		.retx = (uint8_t)retx, .round = ws->round });
	ws->deadline = timeout(sm);
}

/* Builds w's contribution to round k of stream s, as the worker would. */
static unsigned int
build(struct rsim *sm, unsigned int w, unsigned int s, uint32_t k, int retx)
{
	const struct rcase *rc = sm->rc;
	uint32_t blk = k == 0 ? TALLY_NO_BLOCK : sm->rounds[s][k - 1];
	uint32_t off = k == 0 ? s * rc->b : blk * rc->b;
	int has = k > 0 && sm->sel[(size_t)w * rc->nblocks + blk];
	uint16_t n = (uint16_t)(has ? blk_count(sm, blk) : 0);
	struct tally_hdr h = {
		.version = TALLY_PROTO_VERSION, .type = TALLY_PT_SUM,
		.flags = (uint8_t)(TALLY_F_SPARSE | (retx ? TALLY_F_RETX : 0) |
			((sm->ws[w * rc->window + s].set0 + k) & 1 ?
			TALLY_F_SET : 0)),
		.enc = TALLY_ENC_I32, .job = sm->jc.id, .token = sm->jc.token,
		.rank = (uint8_t)w, .slot = (uint16_t)s, .offset = off,
		.count = n, .scale_exp = -12,
		.next_block = first_sel(sm, w, s, k == 0 ? s : blk + 1),
		.round = sm->ws[w * rc->window + s].set0 + (uint64_t)k,
	};

	tally_hdr_encode(&h, sm->buf);
	for (unsigned int i = 0; i < n; i++) {
		uint32_t x = sm->vals[(size_t)w * sm->nelems + off + i];

		for (unsigned int j = 0; j < 4; j++)
			sm->buf[TALLY_HDR_LEN + 4 * i + j] =
				(uint8_t)(x >> (8 * j));
	}
	return TALLY_HDR_LEN + 4u * n;
}

/* The network hands w's contribution to round k of stream s over. */
static void
agg_receive(struct rsim *sm, const struct rpkt *p)
{
	const struct rcase *rc = sm->rc;
	unsigned int ws = p->rank * rc->window + p->slot;
	uint8_t *seen = &sm->counted[(size_t)ws * sm->maxr + p->round];
	uint32_t *k = &sm->ncounted[(size_t)p->slot * sm->maxr + p->round];
	struct tally_verdict v;
	unsigned int len;
	uint8_t *r;

	len = build(sm, p->rank, p->slot, p->round, p->retx);
	tally_agg_process(sm->tab, &sm->st, sm->buf, len, NULL, &v);
	CHECK(sm, v.kind != TALLY_V_NACK, "rank %u slot %u round %u: NACK %s",
		p->rank, p->slot, p->round, tally_status_name(v.status));
	switch (v.kind) {
	case TALLY_V_DROP:
		/* A copy that outlived its round is stale (version 2). */
		if (v.status == TALLY_ST_STALE) {
			CHECK(sm, sm->hi[ws] >= (int32_t)p->round + 1,
				"rank %u slot %u round %u: stale", p->rank,
				p->slot, p->round);
			sm->stale++;
			return;
		}
		CHECK(sm, *seen && *k < rc->world && v.status == TALLY_ST_OK,
			"rank %u slot %u round %u: dropped", p->rank, p->slot,
			p->round);
		sm->dups++;
		return;
	case TALLY_V_RESEND:
		CHECK(sm, *seen && *k == rc->world &&
			v.hdr.rank == TALLY_RANK_ALL,
			"rank %u slot %u round %u: resent", p->rank, p->slot,
			p->round);
		sm->resends++;
		break;
	case TALLY_V_TAKEN:
	case TALLY_V_COMPLETE:
		CHECK(sm, !*seen && (*k + 1 == rc->world) ==
			(v.kind == TALLY_V_COMPLETE), "rank %u slot %u round "
			"%u: counted twice or completed wrongly", p->rank,
			p->slot, p->round);
		*seen = 1;
		++*k;
		sm->hi[ws] = (int32_t)p->round;
		sm->elems += (len - TALLY_HDR_LEN) / 4;
		if (v.kind == TALLY_V_TAKEN)
			return;
		break;
	default:
		CHECK(sm, 0, "verdict %d", (int)v.kind);
	}
	len = TALLY_HDR_LEN + v.payload_len;
	for (unsigned int w = 0; w < rc->world; w++) {
		if (v.kind == TALLY_V_RESEND && w != p->rank)
			continue;
		r = malloc(len);
		assert_non_null(r);
		tally_hdr_encode(&v.hdr, r);
		memcpy(r + TALLY_HDR_LEN, v.payload, v.payload_len);
		net_push(sm, (struct rpkt){ .res = r, .len = len,
			.slot = p->slot, .rank = (uint8_t)w,
			.round = p->round });
	}
}

/* Checks a result of round k of stream s against the reference. */
static void
check_res(struct rsim *sm, const struct rpkt *p, const struct tally_hdr *h)
{
	const struct rcase *rc = sm->rc;
	uint32_t k = p->round, s = p->slot;
	uint32_t blk = k == 0 ? TALLY_NO_BLOCK : sm->rounds[s][k - 1];
	uint32_t off = k == 0 ? s * rc->b : blk * rc->b;
	uint32_t n = k == 0 ? 0 : blk_count(sm, blk);
	uint32_t next = k + 1 < sm->nrounds[s] ? sm->rounds[s][k] :
		TALLY_NO_BLOCK;
	const uint8_t *pl = p->res + TALLY_HDR_LEN;

	CHECK(sm, h->type == TALLY_PT_SUM_RESULT && h->slot == s &&
		(h->flags & TALLY_F_SPARSE) && h->offset == off &&
		h->count == n && h->next_block == next &&
		h->enc == TALLY_ENC_I32 && h->scale_exp == -12 &&
		p->len == TALLY_HDR_LEN + 4 * n,
		"slot %u round %u: offset %u count %u next %#x, want %u %u %#x",
		s, k, h->offset, h->count, h->next_block, off, n, next);
	for (uint32_t i = 0; i < n; i++) {
		uint32_t x = (uint32_t)pl[4 * i] | (uint32_t)pl[4 * i + 1] << 8 |
			(uint32_t)pl[4 * i + 2] << 16 |
			(uint32_t)pl[4 * i + 3] << 24;

		CHECK(sm, x == sm->ref[off + i], "slot %u round %u element "
			"%u: %#x, want %#x", s, k, i, x, sm->ref[off + i]);
	}
}

/* rank receives a result; it takes it if it is its round's. */
static void
worker_receive(struct rsim *sm, const struct rpkt *p)
{
	const struct rcase *rc = sm->rc;
	struct wstream *ws = &sm->ws[p->rank * rc->window + p->slot];
	struct tally_hdr h = { 0 };
	uint32_t off, n;

	CHECK(sm, tally_hdr_decode(p->res, p->len, &h) == TALLY_ST_OK,
		"result does not decode");
	check_res(sm, p, &h);
	off = ws->blk == TALLY_NO_BLOCK ? p->slot * rc->b : ws->blk * rc->b;
	/* What the worker can tell: the round and the offset of its own. */
	if (ws->done || h.round != ws->set0 + (uint64_t)ws->round ||
			h.offset != off) {
		CHECK(sm, ws->done || p->round != ws->round,
			"rank %u slot %u: refused its own round %u", p->rank,
			p->slot, p->round);
		return;
	}
	CHECK(sm, p->round == ws->round, "rank %u slot %u: took round %u "
		"for %u", p->rank, p->slot, p->round, ws->round);
	n = h.count;
	if (n > 0) {
		memcpy(sm->out + (size_t)p->rank * sm->nelems + off,
			p->res + TALLY_HDR_LEN, 4 * n);
		sm->got[(size_t)p->rank * rc->nblocks + ws->blk]++;
	}
	ws->set ^= 1;
	if (h.next_block == TALLY_NO_BLOCK) {
		ws->done = 1;
		sm->active--;
		return;
	}
	CHECK(sm, h.next_block % rc->window == p->slot &&
		h.next_block < rc->nblocks && (ws->blk == TALLY_NO_BLOCK ||
		h.next_block > ws->blk), "next_block %u", h.next_block);
	ws->blk = h.next_block;
	ws->round++;
	worker_send(sm, p->rank, p->slot, 0);
}

static void
rsim_init(struct rsim *sm, const struct rcase *rc, uint64_t seed)
{
	static const unsigned int dens[] = { 0, 2, 10, 30, 70, 100 };
	unsigned int W = rc->world, S = rc->window, NB = rc->nblocks;

	memset(sm, 0, sizeof(*sm));
	sm->rc = rc;
	sm->seed = sm->rng = seed;
	sm->nelems = NB * rc->b - rnd_below(&sm->rng, rc->b);
	sm->vals = calloc((size_t)W * sm->nelems, 4);
	sm->out = calloc((size_t)W * sm->nelems, 4);
	sm->sel = calloc((size_t)W * NB, 1);
	sm->got = calloc((size_t)W * NB, 4);
	sm->ref = calloc(sm->nelems, 4);
	sm->rounds = calloc(S, sizeof(*sm->rounds));
	sm->nrounds = calloc(S, 4);
	sm->ws = calloc((size_t)W * S, sizeof(*sm->ws));
	sm->hi = calloc((size_t)W * S, 4);
	assert_true(sm->vals && sm->out && sm->sel && sm->got && sm->ref &&
		sm->rounds && sm->nrounds && sm->ws && sm->hi);
	for (unsigned int w = 0; w < W; w++) {
		unsigned int d = dens[rnd_below(&sm->rng, 6)];

		for (unsigned int b = 0; b < NB; b++) {
			uint32_t n;

			if (rnd_below(&sm->rng, 100) >= d)
				continue;
			sm->sel[(size_t)w * NB + b] = 1;
			n = blk_count(sm, b);
			for (uint32_t i = 0; i < n; i++) {
				uint32_t x = (uint32_t)rnd(&sm->rng);

				sm->vals[(size_t)w * sm->nelems + b * rc->b +
					i] = x;
				sm->ref[b * rc->b + i] += x;	/* wraps */
			}
		}
	}
	sm->maxr = NB / S + 2;
	for (unsigned int s = 0; s < S; s++) {
		sm->rounds[s] = calloc(sm->maxr, 4);
		assert_non_null(sm->rounds[s]);
		sm->nrounds[s] = 1;
		for (unsigned int b = s; b < NB; b += S) {
			int any = 0;

			for (unsigned int w = 0; w < W; w++)
				any |= sm->sel[(size_t)w * NB + b];
			if (any)
				sm->rounds[s][sm->nrounds[s]++ - 1] = b;
		}
	}
	sm->counted = calloc((size_t)W * S * sm->maxr, 1);
	sm->ncounted = calloc((size_t)S * sm->maxr, 4);
	assert_true(sm->counted && sm->ncounted);
	sm->jc = (struct tally_job_conf){ .id = (uint16_t)rnd(&sm->rng),
		.token = rnd(&sm->rng), .world = (uint8_t)W,
		.window = (uint16_t)S, .max_elems = (uint16_t)rc->b };
	sm->job = tally_job_create(&sm->jc);
	assert_non_null(sm->job);
	sm->tab = tally_jobtab_create(&sm->job, 1);
	assert_non_null(sm->tab);
	for (unsigned int s = 0; s < S; s++) {
		uint8_t set = (uint8_t)rnd_below(&sm->rng, 2); /* agreed */

		for (unsigned int w = 0; w < W; w++) {
			sm->hi[w * S + s] = -1;
			sm->ws[w * S + s] = (struct wstream){
				.blk = TALLY_NO_BLOCK, .set = set,
				.set0 = set };
			sm->active++;
			worker_send(sm, w, s, 0);
		}
	}
}

static void
rsim_fini(struct rsim *sm)
{
	for (unsigned int i = 0; i < sm->nnet; i++)
		free(sm->net[i].res);
	free(sm->net);
	for (unsigned int s = 0; s < sm->rc->window; s++)
		free(sm->rounds[s]);
	free(sm->rounds);
	free(sm->nrounds);
	free(sm->vals);
	free(sm->out);
	free(sm->sel);
	free(sm->got);
	free(sm->ref);
	free(sm->ws);
	free(sm->hi);
	free(sm->counted);
	free(sm->ncounted);
	tally_jobtab_destroy(sm->tab);
	tally_job_destroy(sm->job);
}

/* Retransmits what is late (or everything in flight: force). */
static void
timers(struct rsim *sm, unsigned int w, int force)
{
	for (unsigned int s = 0; s < sm->rc->window; s++) {
		struct wstream *ws = &sm->ws[w * sm->rc->window + s];

		if (!ws->done && (force || ws->deadline <= sm->step))
			worker_send(sm, w, s, 1);
	}
}

static void
rsim_run(struct rsim *sm)
{
	const struct rcase *rc = sm->rc;
	uint64_t limit = 200ull * rc->world * rc->nblocks + 100000;

	for (sm->step = 0;; sm->step++) {
		unsigned int i, roll;
		struct rpkt p;

		CHECK(sm, sm->step < limit, "no progress: %u streams open",
			sm->active);
		if (sm->nnet == 0) {
			if (sm->active == 0)
				break;
			for (unsigned int w = 0; w < rc->world; w++)
				timers(sm, w, 1);
			continue;
		}
		timers(sm, (unsigned int)(sm->step % rc->world), 0);
		i = rnd_below(&sm->rng, sm->nnet);
		roll = rnd_below(&sm->rng, 100);
		p = sm->net[i];
		if (roll < rc->drop_pct) {
			sm->net[i] = sm->net[--sm->nnet];
			free(p.res);
			continue;
		}
		if (roll < rc->drop_pct + rc->dup_pct) {
			if (p.res != NULL) {	/* the copy stays in flight */
				p.res = malloc(p.len);
				assert_non_null(p.res);
				memcpy(p.res, sm->net[i].res, p.len);
			}
		} else {
			sm->net[i] = sm->net[--sm->nnet];
		}
		if (p.res != NULL)
			worker_receive(sm, &p);
		else
			agg_receive(sm, &p);
		free(p.res);
	}
}

static void
rsim_verify(struct rsim *sm)
{
	const struct rcase *rc = sm->rc;
	uint64_t rounds = 0;

	for (unsigned int s = 0; s < rc->window; s++)
		rounds += sm->nrounds[s];
	for (unsigned int w = 0; w < rc->world; w++) {
		CHECK(sm, memcmp(sm->out + (size_t)w * sm->nelems, sm->ref,
			(size_t)sm->nelems * 4) == 0,
			"rank %u's tensor is not the sum", w);
		for (unsigned int b = 0; b < rc->nblocks; b++) {
			int any = 0;

			for (unsigned int x = 0; x < rc->world; x++)
				any |= sm->sel[(size_t)x * rc->nblocks + b];
			CHECK(sm, sm->got[(size_t)w * rc->nblocks + b] ==
				(unsigned int)any, "rank %u block %u taken %u "
				"times", w, b,
				sm->got[(size_t)w * rc->nblocks + b]);
		}
	}
	CHECK(sm, sm->st.completed == rounds &&
		sm->st.accepted == rounds * rc->world &&
		sm->st.elements == sm->elems, "completed %" PRIu64
		" accepted %" PRIu64 ", want %" PRIu64, sm->st.completed,
		sm->st.accepted, rounds);
	CHECK(sm, sm->st.duplicates == sm->dups &&
		sm->st.resent == sm->resends && sm->st.nacks == 0 &&
		sm->st.drops[TALLY_ST_STALE] == sm->stale &&
		sm->st.rx == sm->st.accepted + sm->dups + sm->resends +
		sm->stale, "duplicates %" PRIu64 " resent %" PRIu64,
		sm->st.duplicates, sm->st.resent);
}

static void
random_streams(void **state)
{
	const struct rcase *rc = *state;
	uint64_t h = 0xcbf29ce484222325ull;
	const char *seed = getenv("SPARSE_SEED");
	unsigned int n = NSEEDS;
	struct rsim *sm = malloc(sizeof(*sm));
	uint64_t rx = 0, rounds = 0, dups = 0, resends = 0, stale = 0;

	assert_non_null(sm);
	for (const char *p = rc->name; *p != '\0'; p++)
		h = (h ^ (uint8_t)*p) * 0x100000001b3ull;
	if (seed != NULL && *seed != '\0') {
		h = strtoull(seed, NULL, 0);
		n = 1;
	}
	for (unsigned int k = 0; k < n; k++) {
		rsim_init(sm, rc, h + k);
		rsim_run(sm);
		rsim_verify(sm);
		rx += sm->st.rx;
		rounds += sm->st.completed;
		dups += sm->dups;
		resends += sm->resends;
		stale += sm->stale;
		rsim_fini(sm);
	}
	print_message("# %s: %u seeds; a seed: %" PRIu64 " rounds, %" PRIu64
		" to the engine, %" PRIu64 " duplicates, %" PRIu64 " resent, %"
		PRIu64 " stale\n", rc->name, n, rounds / n, rx / n, dups / n,
		resends / n, stale / n);
	free(sm);
}

static const struct rcase rcases[] = {
	{ "random_w4", 4, 4, 16, 2000, 5, 10 },
	{ "random_w8_b256", 8, 16, 256, 400, 5, 10 },
	{ "random_w1", 1, 4, 8, 2000, 5, 10 },
	{ "random_w3_window1", 3, 1, 8, 500, 10, 10 },
	{ "random_w2_lossy", 2, 4, 8, 1000, 25, 25 },
	{ "random_w64", 64, 8, 4, 200, 5, 10 },
	{ "random_w5_lossless", 5, 64, 7, 2000, 0, 0 },
};

#define NRCASES (sizeof(rcases) / sizeof(rcases[0]))

int
main(void)
{
	struct CMUnitTest tests[5 + NRCASES] = {
		cmocka_unit_test_teardown(stream_four_workers, teardown),
		cmocka_unit_test_teardown(empty_stream, teardown),
		cmocka_unit_test_teardown(retransmissions, teardown),
		cmocka_unit_test_teardown(bootstrap_retransmission, teardown),
		cmocka_unit_test_teardown(checks, teardown),
	};
	unsigned int n = 5;

	for (size_t i = 0; i < NRCASES; i++)
		tests[n++] = (struct CMUnitTest){ .name = rcases[i].name,
			.test_func = random_streams,
			.initial_state = (void *)&rcases[i] };
	return cmocka_run_group_tests(tests, NULL, NULL);
}

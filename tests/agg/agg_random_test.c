/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The engine against a reference sum, under a randomized network.
 *
 * Simulated workers follow the worker rules of docs/protocol.md ("Slots
 * and the shadow sets", "Rounds") against tally_agg_process(): chunk c
 * goes to slot c % window, round c / window (set: its low bit), offset
 * c * elems; a worker sends c
 * only once it holds the result of c - window, so at most window chunks
 * are outstanding, and it retransmits (RETX) a chunk whose result is late.
 * Between workers and engine lies a network: a multiset of packets in
 * flight, from which every step delivers a random one (so packets are
 * reordered across workers, slots and directions), dropping or
 * duplicating some, contributions and results alike.
 *
 * Every result a worker receives, duplicates and late copies included, is
 * checked field by field and bit for bit against a reference this file
 * computes on its own from the workers' data (it never calls the lane
 * code), and every verdict against what the test knows the engine has
 * counted: a contribution is counted exactly once, a round completes with
 * its last member, a duplicate is dropped while the round is open and
 * answered from the stored result once it is complete, and no NACK ever
 * comes back.
 *
 * The network delays packets without bound: a sender's contribution to
 * chunk c that arrives once the engine has counted the same sender's
 * chunk c + window is stale (its round is behind the sender's), and must
 * be dropped as such. (Version 1 of the protocol had no round number and
 * had to assume that no copy is overtaken by two rounds.)
 *
 * Seeds are fixed per case and printed with every failure;
 * AGG_RANDOM_SEED=<seed> runs every case with that one seed, and
 * AGG_RANDOM_SEEDS=<n> runs n seeds a case instead of NSEEDS.
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

#include <tally/proto.h>

#include "agg/agg.h"
#include "agg/job.h"
#include "agg/jobtab.h"

#define NSEEDS		5	/* seeds a case */
#define MIN_CONTRIB	10000	/* distinct contributions a seed, at least */

/* The packet being handed to the engine (one at a time). */
static uint8_t pktbuf[TALLY_HDR_LEN + 4 * TALLY_MAX_ELEMS];

/* ---- reproducible randomness and failure reports ---- */

/* splitmix64: every seed, even 0, gives a good stream. */
static uint64_t
rnd(uint64_t *r)
{
	uint64_t z = (*r += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Uniform in 0 .. n-1; n > 0. */
static uint32_t
rnd_below(uint64_t *r, uint32_t n)
{
	return (uint32_t)(((rnd(r) >> 32) * n) >> 32);
}

/* Uniform in lo .. hi, both included. */
static int32_t
rnd_range(uint64_t *r, int32_t lo, int32_t hi)
{
	uint64_t span = (uint64_t)((int64_t)hi - lo) + 1;

	return (int32_t)((int64_t)lo + (int64_t)(rnd(r) % span));
}

/* What a failure names so that it can be run again. */
struct ctx {
	const char *name;
	uint64_t seed;
	uint64_t step;
};

static void __attribute__((format(printf, 3, 4)))
report(const struct ctx *x, const char *cond, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	print_error("%s: AGG_RANDOM_SEED=%#" PRIx64 " step %" PRIu64
		": %s\n  (%s)\n", x->name, x->seed, x->step, msg, cond);
}

#define CHECK(x, cond, ...) do { \
	if (!(cond)) { \
		report((x), #cond, __VA_ARGS__); \
		fail(); \
	} \
} while (0)

/* ---- payload elements, written and read independently of lanes.c ---- */

static uint32_t
ld_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
		(uint32_t)p[3] << 24;
}

/*
 * Writes element i of a payload in enc: the low bits of an integer, the
 * bits of an f32, or a vote in bit 0. The bytes of i4 and sign payloads
 * must start zeroed (odd counts leave the spare high nibble 0).
 */
static void
put_elem(uint8_t *p, unsigned int enc, unsigned int i, uint32_t v)
{
	switch (enc) {
	case TALLY_ENC_F32:
	case TALLY_ENC_I32:
		for (unsigned int k = 0; k < 4; k++)
			p[4 * i + k] = (uint8_t)(v >> (8 * k));
		break;
	case TALLY_ENC_I16:
		p[2 * i] = (uint8_t)v;
		p[2 * i + 1] = (uint8_t)(v >> 8);
		break;
	case TALLY_ENC_I8:
		p[i] = (uint8_t)v;
		break;
	case TALLY_ENC_I4:
		p[i / 2] |= (uint8_t)((v & 0xf) << (i % 2 * 4));
		break;
	case TALLY_ENC_SIGN:
		p[i / 8] |= (uint8_t)((v & 1) << (i % 8));
		break;
	}
}

/* Reads element i: sign-extended integers, f32 bits, votes as 0/1. */
static int64_t
get_elem(const uint8_t *p, unsigned int enc, unsigned int i)
{
	unsigned int v;

	switch (enc) {
	case TALLY_ENC_F32:
		return ld_le32(p + 4 * i);
	case TALLY_ENC_I32:
		return (int32_t)ld_le32(p + 4 * i);
	case TALLY_ENC_I16:
		return (int16_t)(uint16_t)(p[2 * i] | p[2 * i + 1] << 8);
	case TALLY_ENC_I8:
		return (int8_t)p[i];
	case TALLY_ENC_I4:
		v = (p[i / 2] >> (i % 2 * 4)) & 0xf;
		return v >= 8 ? (int64_t)v - 16 : v;
	case TALLY_ENC_SIGN:
		return (p[i / 8] >> (i % 8)) & 1;
	}
	return 0;
}

static float
f32_of(uint32_t b)
{
	float f;

	memcpy(&f, &b, sizeof(f));
	return f;
}

static uint32_t
bits_of(float f)
{
	uint32_t b;

	memcpy(&b, &f, sizeof(b));
	return b;
}

/* 2^e for a normal exponent e, built from its bits (no libm). */
static float
pow2f(int e)
{
	return f32_of((uint32_t)(e + 127) << 23);
}

/* ---- the workers' data and the reference results ---- */

struct mode {
	uint8_t type;		/* TALLY_PT_SUM or TALLY_PT_MAX */
	uint8_t enc;
};

#define M_SUM(e)	{ TALLY_PT_SUM, TALLY_ENC_##e }
#define M_MAX(e)	{ TALLY_PT_MAX, TALLY_ENC_##e }

/* How a chunk's values are drawn. */
enum shape {
	SHAPE_FULL,	/* the encoding's whole range: sums wrap, saturate */
	SHAPE_SMALL,	/* world of them fit the encoding; votes: 1 in 8 */
	SHAPE_EDGE,	/* extremes and ties; f32 sums: signed zeros */
};

struct chunk {
	uint32_t offset;
	uint16_t count;
	uint8_t type;
	uint8_t enc;
	uint8_t res_enc;
	uint8_t flags;		/* TALLY_F_LAST on the last chunk */
	uint8_t shape;
	int8_t fexp;		/* f32 sums: the chunk's binary exponent */
	int16_t scale_exp;	/* echoed, never interpreted */
	uint16_t res_len;
	uint8_t *ref;		/* the expected result payload */
};

/* Every worker's tensor: nchunks chunks of elems (the last shorter). */
struct tensor {
	unsigned int world;
	unsigned int window;
	unsigned int elems;
	unsigned int nchunks;
	unsigned int nelems;
	int narrow;
	struct chunk *chunks;
	uint32_t *vals;		/* [rank * nelems + i]: see put_elem() */
	uint8_t *refs;		/* chunk c's reference at c * elems * 4 */
};

static unsigned int
chunk_set(const struct tensor *t, unsigned int c)
{
	return c / t->window % 2;
}

/* The result encoding of a chunk, from docs/protocol.md's table. */
static unsigned int
result_enc(unsigned int type, unsigned int enc, int narrow)
{
	if (type == TALLY_PT_MAX)
		return enc;
	switch (enc) {
	case TALLY_ENC_I16:
	case TALLY_ENC_I8:
	case TALLY_ENC_I4:
		return narrow ? enc : TALLY_ENC_I32;
	case TALLY_ENC_SIGN:
		return narrow ? TALLY_ENC_SIGN : TALLY_ENC_I8;
	default:
		return enc;
	}
}

/* Range of an integer encoding's elements (sign: a vote). */
static void
enc_range(unsigned int enc, int32_t *lo, int32_t *hi)
{
	switch (enc) {
	case TALLY_ENC_I16:
		*lo = INT16_MIN, *hi = INT16_MAX;
		break;
	case TALLY_ENC_I8:
		*lo = INT8_MIN, *hi = INT8_MAX;
		break;
	case TALLY_ENC_I4:
		*lo = -8, *hi = 7;
		break;
	case TALLY_ENC_SIGN:
		*lo = 0, *hi = 1;
		break;
	default:
		*lo = INT32_MIN, *hi = INT32_MAX;
		break;
	}
}

static uint32_t
draw_int(uint64_t *r, const struct chunk *ch, unsigned int world)
{
	int32_t lo, hi, lim;

	enc_range(ch->enc, &lo, &hi);
	switch (ch->shape) {
	case SHAPE_FULL:
		return (uint32_t)rnd_range(r, lo, hi);
	case SHAPE_SMALL:
		lim = hi / (int32_t)world;
		if (lim < 1)
			lim = 1;
		return (uint32_t)rnd_range(r, -lim, lim);
	default:
		switch (rnd_below(r, 5)) {
		case 0:
			return (uint32_t)lo;
		case 1:
			return (uint32_t)hi;
		default:
			return (uint32_t)rnd_range(r, -1, 1);
		}
	}
}

/* A vote: + with odds 1/2, 1/8 or 7/8 by shape (ties for even worlds). */
static uint32_t
draw_vote(uint64_t *r, const struct chunk *ch)
{
	static const unsigned int eighths[] = { 4, 1, 7 };

	return rnd_below(r, 8) < eighths[ch->shape];
}

/*
 * An f32 summand k * 2^e with |k| <= 4096 and e at most 4 below the
 * chunk's fexp: any 64 of them add up exactly, in any order, so f32 sums
 * are compared bit for bit. EDGE chunks are signed zeros, mostly -0 (a
 * sum is -0 only when every summand is).
 */
static uint32_t
draw_f32_sum(uint64_t *r, const struct chunk *ch)
{
	int e;

	if (ch->shape == SHAPE_EDGE)
		return rnd_below(r, 8) != 0 ? 0x80000000u : 0;
	e = ch->fexp - (int)rnd_below(r, 5);
	return bits_of((float)rnd_range(r, -4096, 4096) * pow2f(e));
}

/*
 * A MAX f32 contribution: any finite value or an infinity, never a NaN or
 * -0 (the maximum of +0 and -0 depends on arrival order).
 */
static uint32_t
draw_f32_max(uint64_t *r, const struct chunk *ch)
{
	static const uint32_t edge[] = {
		0x7f800000, 0xff800000,	/* +-inf */
		0x7f7fffff, 0xff7fffff,	/* +-FLT_MAX */
		0x00000001, 0x80000001,	/* +-smallest subnormal */
		0x00000000,		/* +0 */
	};
	uint32_t b;

	switch (ch->shape) {
	case SHAPE_FULL:
		do
			b = (uint32_t)rnd(r);
		while ((b & 0x7f800000) == 0x7f800000 || b == 0x80000000);
		return b;
	case SHAPE_SMALL:
		return bits_of((float)rnd_range(r, -3, 3)); /* ties; 0 is +0 */
	default:
		return edge[rnd_below(r, 7)];
	}
}

static uint32_t
draw_value(uint64_t *r, const struct chunk *ch, unsigned int world)
{
	if (ch->type == TALLY_PT_MAX)
		return ch->enc == TALLY_ENC_F32 ? draw_f32_max(r, ch) :
			draw_int(r, ch, world);
	if (ch->enc == TALLY_ENC_F32)
		return draw_f32_sum(r, ch);
	if (ch->enc == TALLY_ENC_SIGN)
		return draw_vote(r, ch);
	return draw_int(r, ch, world);
}

/* The maximum of one element over all ranks: v[0], v[stride], ... */
static uint32_t
ref_max(const struct tensor *t, const struct chunk *ch, const uint32_t *v)
{
	uint32_t m = v[0];

	for (unsigned int w = 1; w < t->world; w++) {
		uint32_t x = v[(size_t)w * t->nelems];

		if (ch->enc == TALLY_ENC_F32 ? f32_of(x) > f32_of(m) :
				(int32_t)x > (int32_t)m)
			m = x;
	}
	return m;
}

/* The sum of one element over all ranks, as the result encodes it. */
static uint32_t
ref_sum(const struct tensor *t, const struct chunk *ch, const uint32_t *v)
{
	double f = f32_of(v[0]);
	uint32_t u = 0;
	int64_t n = 0;
	int32_t lo, hi;

	for (unsigned int w = 0; w < t->world; w++) {
		uint32_t x = v[(size_t)w * t->nelems];

		if (w > 0)
			f += f32_of(x);
		u += x;
		n += ch->enc == TALLY_ENC_SIGN ? (int64_t)x : (int32_t)x;
	}
	switch (ch->enc) {
	case TALLY_ENC_F32:
		return bits_of((float)f);	/* exact, see draw_f32_sum() */
	case TALLY_ENC_I32:
		return u;			/* wraps */
	case TALLY_ENC_SIGN:
		if (t->narrow)
			return 2 * n > (int64_t)t->world;
		return (uint32_t)n;
	default:
		enc_range(ch->enc, &lo, &hi);
		if (t->narrow)
			n = n < lo ? lo : n > hi ? hi : n;
		return (uint32_t)(int32_t)n;
	}
}

/* Chunk c: its shape, every rank's values, and the reference result. */
static void
chunk_init(struct tensor *t, unsigned int c, const struct mode *m,
	uint64_t *r)
{
	struct chunk *ch = &t->chunks[c];
	unsigned int shape = rnd_below(r, 8);

	ch->offset = c * t->elems;
	ch->count = (uint16_t)(t->nelems - ch->offset < t->elems ?
		t->nelems - ch->offset : t->elems);
	ch->type = m->type;
	ch->enc = m->enc;
	ch->res_enc = (uint8_t)result_enc(m->type, m->enc, t->narrow);
	if (m->type == TALLY_PT_SUM)
		assert_int_equal(ch->res_enc,
			tally_enc_result(m->enc, t->narrow));
	ch->flags = c + 1 == t->nchunks ? TALLY_F_LAST : 0;
	ch->shape = shape < 4 ? SHAPE_FULL : shape < 7 ? SHAPE_SMALL :
		SHAPE_EDGE;
	ch->fexp = (int8_t)rnd_range(r, -40, 40);
	ch->scale_exp = (int16_t)rnd(r);
	ch->res_len = (uint16_t)tally_enc_payload_len(ch->res_enc, ch->count);
	ch->ref = t->refs + (size_t)c * t->elems * 4;
	for (unsigned int w = 0; w < t->world; w++)
		for (unsigned int i = 0; i < ch->count; i++)
			t->vals[(size_t)w * t->nelems + ch->offset + i] =
				draw_value(r, ch, t->world);
	for (unsigned int i = 0; i < ch->count; i++) {
		const uint32_t *v = t->vals + ch->offset + i;

		put_elem(ch->ref, ch->res_enc, i, ch->type == TALLY_PT_MAX ?
			ref_max(t, ch, v) : ref_sum(t, ch, v));
	}
}

/*
 * Draws world tensors of nchunks chunks of elems elements (the last chunk
 * 1..elems long), each chunk in a mode drawn from modes[0..nmodes).
 */
static struct tensor *
tensor_create(unsigned int world, unsigned int window, unsigned int elems,
	unsigned int nchunks, int narrow, const struct mode *modes,
	unsigned int nmodes, uint64_t *r)
{
	struct tensor *t = calloc(1, sizeof(*t));

	assert_non_null(t);
	t->world = world;
	t->window = window;
	t->elems = elems;
	t->nchunks = nchunks;
	t->nelems = nchunks * elems - rnd_below(r, elems);
	t->narrow = narrow;
	t->chunks = calloc(nchunks, sizeof(*t->chunks));
	t->vals = calloc((size_t)world * t->nelems, sizeof(*t->vals));
	t->refs = calloc((size_t)nchunks * elems, 4);
	assert_non_null(t->chunks);
	assert_non_null(t->vals);
	assert_non_null(t->refs);
	for (unsigned int c = 0; c < nchunks; c++)
		chunk_init(t, c, &modes[rnd_below(r, nmodes)], r);
	return t;
}

static void
tensor_destroy(struct tensor *t)
{
	if (t == NULL)
		return;
	free(t->chunks);
	free(t->vals);
	free(t->refs);
	free(t);
}

/* Writes rank's contribution to chunk c into buf; returns its length. */
static unsigned int
build_contrib(const struct tensor *t, const struct tally_job_conf *jc,
	unsigned int rank, unsigned int c, int retx, uint8_t *buf)
{
	const struct chunk *ch = &t->chunks[c];
	const uint32_t *v = t->vals + (size_t)rank * t->nelems + ch->offset;
	struct tally_hdr h = {
		.version = TALLY_PROTO_VERSION,
		.type = ch->type,
		.flags = (uint8_t)(ch->flags |
			(chunk_set(t, c) ? TALLY_F_SET : 0) |
			(retx ? TALLY_F_RETX : 0)),
		.enc = ch->enc,
		.job = jc->id,
		.token = jc->token,
		.rank = (uint8_t)rank,
		.slot = (uint16_t)(c % t->window),
		.offset = ch->offset,
		.count = ch->count,
		.scale_exp = ch->scale_exp,
		.next_block = TALLY_NO_BLOCK,
		.round = c / t->window,
	};
	size_t plen = tally_enc_payload_len(ch->enc, ch->count);

	tally_hdr_encode(&h, buf);
	memset(buf + TALLY_HDR_LEN, 0, plen);
	for (unsigned int i = 0; i < ch->count; i++)
		put_elem(buf + TALLY_HDR_LEN, ch->enc, i, v[i]);
	return (unsigned int)(TALLY_HDR_LEN + plen);
}

/* Compares a result payload with chunk c's reference, naming the element. */
static void
check_payload(const struct ctx *x, const struct tensor *t, unsigned int c,
	const uint8_t *got)
{
	const struct chunk *ch = &t->chunks[c];
	int64_t g, want;

	if (memcmp(got, ch->ref, ch->res_len) == 0)
		return;
	for (unsigned int i = 0; i < ch->count; i++) {
		g = get_elem(got, ch->res_enc, i);
		want = get_elem(ch->ref, ch->res_enc, i);
		CHECK(x, g == want, "chunk %u (%s %s -> %s) element %u: got %"
			PRId64 ", want %" PRId64, c,
			ch->type == TALLY_PT_MAX ? "max" : "sum",
			tally_enc_name(ch->enc), tally_enc_name(ch->res_enc), i,
			g, want);
	}
	CHECK(x, 0, "chunk %u: the spare bits of the last byte differ", c);
}

/* ---- the simulation ---- */

struct sim_case {
	const char *name;
	unsigned int world;
	unsigned int window;
	unsigned int elems;
	int narrow;
	unsigned int drop_pct;	/* packets the network loses, both ways */
	unsigned int dup_pct;	/* packets it delivers and keeps */
	const struct mode *modes; /* each chunk draws one */
	unsigned int nmodes;
};

/* A result's bytes, copied out of the verdict, shared by its copies. */
struct rbuf {
	unsigned int refs;
	unsigned int len;
	uint8_t bytes[];
};

/* A packet in flight: a result to rank, or rank's contribution. */
struct pkt {
	struct rbuf *res;	/* NULL: a contribution to chunk */
	uint32_t chunk;
	uint8_t rank;
	uint8_t retx;
};

struct worker {
	unsigned int next;	/* the next chunk to send */
	unsigned int ndone;	/* chunks whose result it holds */
	uint8_t *have;		/* [chunk] */
	uint64_t *deadline;	/* [chunk]: step to retransmit at */
};

/* What the test saw, to hold the engine's counters against. */
struct sim_counts {
	uint64_t sent;		/* first transmissions */
	uint64_t retx;		/* retransmissions */
	uint64_t lost;		/* packets the network dropped */
	uint64_t copied;	/* packets it duplicated */
	uint64_t expired;	/* contributions overtaken: dropped stale */
	uint64_t to_agg;	/* contributions handed to the engine */
	uint64_t complete;	/* verdicts by kind */
	uint64_t dup;
	uint64_t resend;
	uint64_t results;	/* results handed to workers */
};

struct sim {
	struct ctx x;
	const struct sim_case *sc;
	uint64_t rng;
	struct tensor *t;
	struct tally_job_conf jc;
	struct tally_job *job;
	struct tally_jobtab *tab;
	struct tally_agg_stats st;
	struct worker *w;	/* [rank] */
	uint8_t *counted;	/* [rank * nchunks + c]: engine counted it */
	uint8_t *ncounted;	/* [c]: ranks counted */
	unsigned int ndone;	/* workers holding every result */
	struct pkt *net;	/* in flight, in no order */
	unsigned int nnet;
	unsigned int capnet;
	struct sim_counts n;
};

static void
rbuf_put(struct rbuf *r)
{
	if (r != NULL && --r->refs == 0)
		free(r);
}

static void
net_push(struct sim *s, struct pkt p)
{
	if (s->nnet == s->capnet) {
		s->capnet = s->capnet ? 2 * s->capnet : 1024;
		s->net = realloc(s->net, s->capnet * sizeof(*s->net));
		assert_non_null(s->net);
	}
	s->net[s->nnet++] = p;
}

static struct pkt
net_take(struct sim *s, unsigned int i)
{
	struct pkt p = s->net[i];

	s->net[i] = s->net[--s->nnet];
	return p;
}

/*
 * Retransmission timeout, in steps: a packet waits about as many steps as
 * there are packets in flight, so around twice that, jittered.
 */
static uint64_t
timeout(struct sim *s)
{
	uint32_t base = 2 * s->nnet + 4 * s->t->world;

	return base + rnd_below(&s->rng, base);
}

static void
worker_send(struct sim *s, unsigned int rank, unsigned int c, int retx)
{
	net_push(s, (struct pkt){ .chunk = c, .rank = (uint8_t)rank,
		.retx = (uint8_t)retx });
	s->w[rank].deadline[c] = s->x.step + timeout(s);
	if (retx)
		s->n.retx++;
	else
		s->n.sent++;
}

/* Sends every chunk the window allows: c once c - window's result is in. */
static void
worker_fill(struct sim *s, unsigned int rank)
{
	struct worker *wk = &s->w[rank];
	const struct tensor *t = s->t;
	unsigned int win = t->window;

	while (wk->next < t->nchunks &&
			(wk->next < win || wk->have[wk->next - win]))
		worker_send(s, rank, wk->next++, 0);
}

/* Retransmits rank's outstanding chunks: late ones, or all (force). */
static void
worker_timers(struct sim *s, unsigned int rank, int force)
{
	struct worker *wk = &s->w[rank];
	unsigned int win = s->t->window;

	for (unsigned int c = wk->next > win ? wk->next - win : 0;
			c < wk->next; c++)
		if (!wk->have[c] && (force || wk->deadline[c] <= s->x.step))
			worker_send(s, rank, c, 1);
}

/* Copies the verdict's result (borrowed from the slot) into a buffer. */
static struct rbuf *
result_copy(const struct ctx *x, const struct tally_verdict *v,
	unsigned int refs)
{
	struct rbuf *r;

	CHECK(x, v->payload != NULL && v->payload_len > 0,
		"result without payload");
	r = malloc(sizeof(*r) + TALLY_HDR_LEN + v->payload_len);
	assert_non_null(r);
	r->refs = refs;
	r->len = TALLY_HDR_LEN + v->payload_len;
	tally_hdr_encode(&v->hdr, r->bytes);
	memcpy(r->bytes + TALLY_HDR_LEN, v->payload, v->payload_len);
	return r;
}

/*
 * Checks a verdict against what the test knows the engine counted for
 * chunk c: seen says whether rank was counted before this packet.
 */
static void
check_verdict(struct sim *s, const struct tally_verdict *v,
	unsigned int rank, unsigned int c, int seen, int stale)
{
	unsigned int world = s->t->world, k = s->ncounted[c];

	CHECK(&s->x, !stale || v->kind == TALLY_V_DROP, "rank %u chunk %u: "
		"stale copy not dropped", rank, c);
	CHECK(&s->x, v->kind != TALLY_V_NACK,
		"rank %u chunk %u: NACK %s", rank, c,
		tally_status_name(v->status));
	CHECK(&s->x, v->job == s->job && (v->kind == TALLY_V_DROP ||
		v->rank == rank), "rank %u chunk %u: job or rank", rank, c);
	switch (v->kind) {
	case TALLY_V_DROP:
		if (stale) {
			CHECK(&s->x, v->status == TALLY_ST_STALE,
				"rank %u chunk %u: stale, dropped as %s",
				rank, c, tally_status_name(v->status));
			break;
		}
		CHECK(&s->x, v->status == TALLY_ST_OK,
			"rank %u chunk %u: dropped, %s", rank, c,
			tally_status_name(v->status));
		CHECK(&s->x, seen && k < world, "rank %u chunk %u: dropped "
			"as a duplicate, counted %d, round %u/%u", rank, c,
			seen, k, world);
		break;
	case TALLY_V_TAKEN:
		CHECK(&s->x, !seen && k + 1 < world, "rank %u chunk %u: taken, "
			"counted %d, round %u/%u", rank, c, seen, k, world);
		break;
	case TALLY_V_COMPLETE:
		CHECK(&s->x, !seen && k + 1 == world, "rank %u chunk %u: "
			"complete, counted %d, round %u/%u", rank, c, seen, k,
			world);
		CHECK(&s->x, v->hdr.rank == TALLY_RANK_ALL, "chunk %u", c);
		break;
	case TALLY_V_RESEND:
		CHECK(&s->x, seen && k == world, "rank %u chunk %u: resent, "
			"counted %d, round %u/%u", rank, c, seen, k, world);
		CHECK(&s->x, v->hdr.rank == TALLY_RANK_ALL, "chunk %u", c);
		break;
	default:
		CHECK(&s->x, 0, "verdict %d", (int)v->kind);
	}
}

/* The network delivers rank's contribution to chunk c to the engine. */
static void
agg_receive(struct sim *s, unsigned int rank, unsigned int c, int retx)
{
	const struct tensor *t = s->t;
	uint8_t *seen = &s->counted[(size_t)rank * t->nchunks + c];
	struct tally_verdict v;
	struct rbuf *r;
	unsigned int len;
	int stale = c + t->window < t->nchunks && seen[t->window];

	len = build_contrib(t, &s->jc, rank, c, retx, pktbuf);
	s->n.to_agg++;
	tally_agg_process(s->tab, &s->st, pktbuf, len, &s->jc.members[rank],
		&v);
	check_verdict(s, &v, rank, c, *seen, stale);
	switch (v.kind) {
	case TALLY_V_DROP:
		if (stale)
			s->n.expired++;
		else
			s->n.dup++;
		return;
	case TALLY_V_RESEND:
		s->n.resend++;
		r = result_copy(&s->x, &v, 1);
		net_push(s, (struct pkt){ .res = r, .rank = (uint8_t)rank });
		return;
	default:
		break;
	}
	*seen = 1;
	s->ncounted[c]++;
	if (v.kind != TALLY_V_COMPLETE)
		return;
	s->n.complete++;
	r = result_copy(&s->x, &v, t->world);
	for (unsigned int w = 0; w < t->world; w++)
		net_push(s, (struct pkt){ .res = r, .rank = (uint8_t)w });
}

/* Checks a result as rank receives it, header and payload; returns c. */
static unsigned int
check_result(struct sim *s, unsigned int rank, const struct rbuf *r)
{
	const struct tensor *t = s->t;
	const struct chunk *ch;
	struct tally_hdr h = { 0 };
	enum tally_status st;
	unsigned int c, resend;

	st = tally_hdr_decode(r->bytes, r->len, &h);
	CHECK(&s->x, st == TALLY_ST_OK, "result: %s", tally_status_name(st));
	c = h.offset / t->elems;
	CHECK(&s->x, c < t->nchunks && h.offset % t->elems == 0,
		"result offset %u", h.offset);
	ch = &t->chunks[c];
	resend = (h.flags & TALLY_F_RETX) != 0;
	CHECK(&s->x, h.type == (ch->type == TALLY_PT_MAX ?
		TALLY_PT_MAX_RESULT : TALLY_PT_SUM_RESULT) &&
		h.enc == ch->res_enc && h.count == ch->count,
		"chunk %u result: type %u enc %s count %u", c, h.type,
		tally_enc_name(h.enc), h.count);
	CHECK(&s->x, h.job == s->jc.id && h.token == s->jc.token &&
		h.status == TALLY_ST_OK && h.slot == c % t->window &&
		h.scale_exp == ch->scale_exp && h.next_block == TALLY_NO_BLOCK,
		"chunk %u result: job %u token %#" PRIx64 " status %u slot %u "
		"scale_exp %d next_block %#x", c, h.job, h.token, h.status,
		h.slot, h.scale_exp, h.next_block);
	CHECK(&s->x, h.flags == (ch->flags | (resend ? TALLY_F_RETX : 0) |
		(chunk_set(t, c) ? TALLY_F_SET : 0)),
		"chunk %u result: flags %#x", c, h.flags);
	CHECK(&s->x, h.rank == TALLY_RANK_ALL && h.round == c / t->window,
		"chunk %u result to rank %u: rank %u round %" PRIu64, c, rank,
		h.rank, h.round);
	CHECK(&s->x, c < s->w[rank].next, "rank %u: result of chunk %u, "
		"not sent yet", rank, c);
	check_payload(&s->x, t, c, r->bytes + TALLY_HDR_LEN);
	return c;
}

static void
worker_receive(struct sim *s, unsigned int rank, const struct rbuf *r)
{
	struct worker *wk = &s->w[rank];
	unsigned int c = check_result(s, rank, r);

	s->n.results++;
	if (wk->have[c])
		return;
	wk->have[c] = 1;
	if (++wk->ndone == s->t->nchunks)
		s->ndone++;
	worker_fill(s, rank);
}

/* One step: the network loses, copies or just delivers a random packet. */
static void
sim_step(struct sim *s)
{
	unsigned int i = rnd_below(&s->rng, s->nnet);
	unsigned int roll = rnd_below(&s->rng, 100);
	struct pkt p;

	if (roll < s->sc->drop_pct) {
		p = net_take(s, i);
		rbuf_put(p.res);
		s->n.lost++;
		return;
	}
	if (roll < s->sc->drop_pct + s->sc->dup_pct) {
		p = s->net[i];
		if (p.res != NULL)
			p.res->refs++;
		s->n.copied++;
	} else {
		p = net_take(s, i);
	}
	if (p.res != NULL)
		worker_receive(s, p.rank, p.res);
	else
		agg_receive(s, p.rank, p.chunk, p.retx);
	rbuf_put(p.res);
}

/*
 * Runs until every worker holds every result and the network is empty.
 * When nothing is in flight, time jumps to the next timeout: every
 * worker retransmits what it still waits for.
 */
static void
sim_run(struct sim *s)
{
	uint64_t limit = 100 * (uint64_t)s->t->world * s->t->nchunks + 100000;
	unsigned int world = s->t->world;

	for (s->x.step = 0;; s->x.step++) {
		CHECK(&s->x, s->x.step < limit, "no progress: %u of %u workers "
			"done, %u packets in flight", s->ndone, world, s->nnet);
		if (s->nnet == 0) {
			if (s->ndone == world)
				break;
			for (unsigned int w = 0; w < world; w++)
				worker_timers(s, w, 1);
			continue;
		}
		worker_timers(s, (unsigned int)(s->x.step % world), 0);
		sim_step(s);
	}
}

static void
sim_init(struct sim *s, const struct sim_case *sc, uint64_t seed)
{
	unsigned int world = sc->world;
	unsigned int nchunks = (MIN_CONTRIB + world - 1) / world;

	memset(s, 0, sizeof(*s));
	s->x.name = sc->name;
	s->x.seed = seed;
	s->sc = sc;
	s->rng = seed;
	s->t = tensor_create(world, sc->window, sc->elems, nchunks, sc->narrow,
		sc->modes, sc->nmodes, &s->rng);
	s->jc.id = (uint16_t)rnd(&s->rng);
	s->jc.token = rnd(&s->rng);
	s->jc.world = (uint8_t)world;
	s->jc.window = (uint16_t)sc->window;
	s->jc.max_elems = (uint16_t)sc->elems;
	s->jc.narrow = (uint8_t)sc->narrow;
	for (unsigned int w = 0; w < world; w++)
		s->jc.members[w] = (struct tally_addr){
			.ip = 0x0a000101 + w, .port = (uint16_t)(40000 + w) };
	s->job = tally_job_create(&s->jc);
	assert_non_null(s->job);
	s->tab = tally_jobtab_create(&s->job, 1);
	assert_non_null(s->tab);
	s->w = calloc(world, sizeof(*s->w));
	s->counted = calloc((size_t)world * nchunks, 1);
	s->ncounted = calloc(nchunks, 1);
	assert_non_null(s->w);
	assert_non_null(s->counted);
	assert_non_null(s->ncounted);
	for (unsigned int w = 0; w < world; w++) {
		s->w[w].have = calloc(nchunks, 1);
		s->w[w].deadline = calloc(nchunks, sizeof(uint64_t));
		assert_non_null(s->w[w].have);
		assert_non_null(s->w[w].deadline);
		worker_fill(s, w);
	}
}

static void
sim_fini(struct sim *s)
{
	for (unsigned int i = 0; i < s->nnet; i++)
		rbuf_put(s->net[i].res);
	free(s->net);
	for (unsigned int w = 0; s->w != NULL && w < s->t->world; w++) {
		free(s->w[w].have);
		free(s->w[w].deadline);
	}
	free(s->w);
	free(s->counted);
	free(s->ncounted);
	tally_jobtab_destroy(s->tab);
	tally_job_destroy(s->job);
	tensor_destroy(s->t);
}

/* The engine's counters against what the test saw. */
static void
sim_verify(struct sim *s)
{
	const struct tally_agg_stats *st = &s->st;
	const struct tensor *t = s->t;
	uint64_t contrib = (uint64_t)t->world * t->nchunks;

	for (unsigned int w = 0; w < t->world; w++)
		CHECK(&s->x, s->w[w].ndone == t->nchunks, "rank %u", w);
	CHECK(&s->x, contrib >= MIN_CONTRIB && st->rx >= MIN_CONTRIB,
		"%" PRIu64 " contributions", contrib);
	CHECK(&s->x, st->rx == s->n.to_agg && st->accepted == contrib &&
		st->elements == (uint64_t)t->world * t->nelems,
		"rx %" PRIu64 " accepted %" PRIu64, st->rx, st->accepted);
	CHECK(&s->x, st->completed == t->nchunks &&
		s->n.complete == t->nchunks, "completed %" PRIu64,
		st->completed);
	CHECK(&s->x, st->duplicates == s->n.dup && st->resent == s->n.resend,
		"duplicates %" PRIu64 " resent %" PRIu64, st->duplicates,
		st->resent);
	CHECK(&s->x, st->rx == st->accepted + st->duplicates + st->resent +
		st->drops[TALLY_ST_STALE] && st->nacks == 0 &&
		st->drops[TALLY_ST_STALE] == s->n.expired, "rx %" PRIu64
		" nacks %" PRIu64, st->rx, st->nacks);
	for (unsigned int i = 1; i < TALLY_ST_MAX_; i++)
		CHECK(&s->x, st->drops[i] == 0 || i == TALLY_ST_STALE,
			"%" PRIu64 " drops: %s", st->drops[i],
			tally_status_name(i));
}

/* Seeds of a case: fixed, from its name, unless the environment says. */
static unsigned int
case_seeds(const char *name, uint64_t *seeds, unsigned int max)
{
	const char *one = getenv("AGG_RANDOM_SEED");
	const char *many = getenv("AGG_RANDOM_SEEDS");
	uint64_t h = 0xcbf29ce484222325ull;	/* FNV-1a */
	unsigned int n = NSEEDS;

	if (one != NULL && *one != '\0') {
		seeds[0] = strtoull(one, NULL, 0);
		return 1;
	}
	if (many != NULL && *many != '\0')
		n = (unsigned int)strtoul(many, NULL, 0);
	if (n < 1)
		n = 1;
	if (n > max)
		n = max;
	for (; *name != '\0'; name++)
		h = (h ^ (uint8_t)*name) * 0x100000001b3ull;
	for (unsigned int k = 0; k < n; k++)
		seeds[k] = h + k;
	return n;
}

static void
run_case(void **state)
{
	const struct sim_case *sc = *state;
	struct sim_counts sum = { 0 };
	uint64_t seeds[1000], rx = 0;
	unsigned int n = case_seeds(sc->name, seeds, 1000);
	struct sim s;

	for (unsigned int k = 0; k < n; k++) {
		sim_init(&s, sc, seeds[k]);
		sim_run(&s);
		sim_verify(&s);
		rx += s.st.rx;
		sum.retx += s.n.retx;
		sum.lost += s.n.lost;
		sum.copied += s.n.copied;
		sum.expired += s.n.expired;
		sum.dup += s.n.dup;
		sum.resend += s.n.resend;
		sum.results += s.n.results;
		sim_fini(&s);
	}
	print_message("# %s: %u seeds x %u contributions; a seed: %" PRIu64
		" to the engine, %" PRIu64 " retransmitted, %" PRIu64
		" lost, %" PRIu64 " copied, %" PRIu64 " stale, %" PRIu64
		" duplicates, %" PRIu64 " resent, %" PRIu64 " results\n",
		sc->name, n, (MIN_CONTRIB + sc->world - 1) / sc->world *
		sc->world, rx / n, sum.retx / n, sum.lost / n, sum.copied / n,
		sum.expired / n, sum.dup / n, sum.resend / n, sum.results / n);
}

/* ---- order independence: one packet list, two orders ---- */

struct replay_case {
	const char *name;
	unsigned int world;
	unsigned int window;
	unsigned int elems;
	int narrow;
	struct mode mode;
};

/* Every contribution to a window of chunks, plus duplicates, encoded. */
struct replay {
	struct ctx x;
	struct tensor *t;
	struct tally_job_conf jc;
	uint8_t *wire;		/* packet i at i * maxlen */
	unsigned int *len;
	unsigned int npkt;
	unsigned int maxlen;
	unsigned int *order;
};

/*
 * Feeds every packet once, in an order drawn from seed, to a fresh job,
 * and copies chunk c's result to out + c * elems * 4.
 */
static void
replay_run(struct replay *rp, uint64_t seed, uint8_t *out)
{
	const struct tensor *t = rp->t;
	struct tally_agg_stats st;
	struct tally_job *job = tally_job_create(&rp->jc);
	struct tally_jobtab *tab = tally_jobtab_create(&job, 1);
	uint8_t done[TALLY_MAX_WINDOW / 8] = { 0 };
	struct tally_verdict v;
	const struct chunk *ch;
	unsigned int i, j, tmp;

	assert_non_null(job);
	assert_non_null(tab);
	memset(&st, 0, sizeof(st));
	for (i = 0; i < rp->npkt; i++)
		rp->order[i] = i;
	for (i = rp->npkt - 1; i > 0; i--) {
		j = rnd_below(&seed, i + 1);
		tmp = rp->order[i], rp->order[i] = rp->order[j];
		rp->order[j] = tmp;
	}
	for (i = 0; i < rp->npkt; i++) {
		rp->x.step = i;
		j = rp->order[i];
		tally_agg_process(tab, &st, rp->wire + (size_t)j * rp->maxlen,
			rp->len[j], NULL, &v);
		CHECK(&rp->x, v.kind != TALLY_V_NACK && v.status == TALLY_ST_OK,
			"packet %u: %s", j, tally_status_name(v.status));
		if (v.kind != TALLY_V_COMPLETE)
			continue;
		ch = &t->chunks[v.hdr.slot];
		CHECK(&rp->x, !(done[v.hdr.slot / 8] & 1 << v.hdr.slot % 8) &&
			v.hdr.offset == ch->offset &&
			v.payload_len == ch->res_len,
			"slot %u completed twice or wrongly", v.hdr.slot);
		done[v.hdr.slot / 8] |= (uint8_t)(1 << v.hdr.slot % 8);
		memcpy(out + ch->offset * 4, v.payload, v.payload_len);
	}
	CHECK(&rp->x, st.completed == t->nchunks &&
		st.accepted == (uint64_t)t->world * t->nchunks &&
		st.rx == rp->npkt && st.nacks == 0 &&
		st.rx == st.accepted + st.duplicates + st.resent,
		"completed %" PRIu64 " accepted %" PRIu64, st.completed,
		st.accepted);
	tally_jobtab_destroy(tab);
	tally_job_destroy(job);
}

/* Encodes every contribution once, and a quarter as many duplicates. */
static void
replay_build(struct replay *rp, uint64_t *r)
{
	const struct tensor *t = rp->t;
	unsigned int base = t->world * t->nchunks, rank, c;

	rp->npkt = base + base / 4;
	rp->maxlen = TALLY_HDR_LEN + 4 * t->elems;
	rp->wire = malloc((size_t)rp->npkt * rp->maxlen);
	rp->len = malloc(rp->npkt * sizeof(*rp->len));
	rp->order = malloc(rp->npkt * sizeof(*rp->order));
	assert_non_null(rp->wire);
	assert_non_null(rp->len);
	assert_non_null(rp->order);
	for (unsigned int i = 0; i < rp->npkt; i++) {
		rank = i < base ? i % t->world : rnd_below(r, t->world);
		c = i < base ? i / t->world : rnd_below(r, t->nchunks);
		rp->len[i] = build_contrib(t, &rp->jc, rank, c, i >= base,
			rp->wire + (size_t)i * rp->maxlen);
	}
}

static void
replay_one(const struct replay_case *rc, uint64_t seed)
{
	struct replay rp = { .x = { .name = rc->name, .seed = seed } };
	uint64_t r = seed;
	uint8_t *out[2];
	size_t outlen;

	rp.t = tensor_create(rc->world, rc->window, rc->elems, rc->window,
		rc->narrow, &rc->mode, 1, &r);
	rp.jc = (struct tally_job_conf){ .id = (uint16_t)rnd(&r),
		.token = rnd(&r), .world = (uint8_t)rc->world,
		.window = (uint16_t)rc->window,
		.max_elems = (uint16_t)rc->elems,
		.narrow = (uint8_t)rc->narrow };
	replay_build(&rp, &r);
	outlen = (size_t)rc->window * rc->elems * 4;
	for (int k = 0; k < 2; k++) {
		out[k] = calloc(1, outlen);
		assert_non_null(out[k]);
		replay_run(&rp, rnd(&r), out[k]);
	}
	rp.x.step = 0;
	CHECK(&rp.x, memcmp(out[0], out[1], outlen) == 0,
		"two orders, two results");
	for (unsigned int c = 0; c < rp.t->nchunks; c++)
		check_payload(&rp.x, rp.t, c,
			out[0] + (size_t)c * rc->elems * 4);
	free(out[0]);
	free(out[1]);
	free(rp.wire);
	free(rp.len);
	free(rp.order);
	tensor_destroy(rp.t);
}

static void
replay_orders(void **state)
{
	static const struct replay_case rcs[] = {
		{ "replay_i32_w64", 64, 32, 61, 0, M_SUM(I32) },
		{ "replay_i32_w3", 3, 128, 16, 0, M_SUM(I32) },
		{ "replay_i4_w5_narrow", 5, 64, 7, 1, M_SUM(I4) },
		{ "replay_sign_w8", 8, 64, 13, 0, M_SUM(SIGN) },
		{ "replay_max_i32_w8", 8, 64, 9, 0, M_MAX(I32) },
	};
	uint64_t seeds[1000];
	unsigned int n;

	(void)state;
	for (size_t i = 0; i < sizeof(rcs) / sizeof(rcs[0]); i++) {
		n = case_seeds(rcs[i].name, seeds, 1000);
		for (unsigned int k = 0; k < n; k++)
			replay_one(&rcs[i], seeds[k]);
	}
}

/* ---- the cases ---- */

static const struct mode m_f32[] = { M_SUM(F32) };
static const struct mode m_i32[] = { M_SUM(I32) };
static const struct mode m_i16[] = { M_SUM(I16) };
static const struct mode m_i8[] = { M_SUM(I8) };
static const struct mode m_i4[] = { M_SUM(I4) };
static const struct mode m_sign[] = { M_SUM(SIGN) };
static const struct mode m_max_i32[] = { M_MAX(I32) };
static const struct mode m_max_f32[] = { M_MAX(F32) };
/* A scale round now and then, and lanes reused across encodings. */
static const struct mode m_all[] = {
	M_SUM(F32), M_SUM(I32), M_SUM(I16), M_SUM(I8), M_SUM(I4),
	M_SUM(SIGN), M_MAX(F32), M_MAX(I32),
};

#define CASE(n, w, s, e, nar, drop, dup, m) { .name = (n), .world = (w), \
	.window = (s), .elems = (e), .narrow = (nar), .drop_pct = (drop), \
	.dup_pct = (dup), .modes = (m), .nmodes = sizeof(m) / sizeof((m)[0]) }

static struct sim_case cases[] = {
	CASE("i32_w8", 8, 16, 64, 0, 5, 10, m_i32),
	CASE("i32_w64_lossless", 64, 32, 32, 0, 0, 0, m_i32),
	CASE("f32_w3", 3, 8, 33, 0, 5, 10, m_f32),
	CASE("f32_w64", 64, 16, 8, 0, 5, 10, m_f32),
	CASE("i16_w64_narrow", 64, 4, 16, 1, 5, 10, m_i16),
	CASE("i16_w2_wide", 2, 32, 24, 0, 5, 10, m_i16),
	CASE("i8_w3_narrow", 3, 12, 40, 1, 5, 10, m_i8),
	CASE("i8_w8_wide", 8, 8, 9, 0, 5, 10, m_i8),
	CASE("i4_w3_narrow", 3, 8, 7, 1, 5, 10, m_i4),
	CASE("i4_w8_wide", 8, 5, 15, 0, 5, 10, m_i4),
	CASE("sign_w8_narrow", 8, 16, 7, 1, 5, 10, m_sign),
	CASE("sign_w3_wide", 3, 6, 13, 0, 5, 10, m_sign),
	CASE("max_i32_w8", 8, 8, 32, 0, 5, 10, m_max_i32),
	CASE("max_f32_w64", 64, 16, 8, 0, 5, 10, m_max_f32),
	CASE("mixed_w8_wide", 8, 16, 21, 0, 5, 10, m_all),
	CASE("mixed_w64_narrow", 64, 32, 11, 1, 5, 10, m_all),
	CASE("mixed_w1", 1, 4, 5, 0, 5, 10, m_all),
	CASE("mixed_w2_lossy", 2, 4, 17, 1, 25, 25, m_all),
	CASE("mixed_w3_window1", 3, 1, 31, 0, 10, 10, m_all),
};

#define NCASES (sizeof(cases) / sizeof(cases[0]))

int
main(void)
{
	struct CMUnitTest tests[NCASES + 1];

	for (size_t i = 0; i < NCASES; i++)
		tests[i] = (struct CMUnitTest){ .name = cases[i].name,
			.test_func = run_case, .initial_state = &cases[i] };
	tests[NCASES] = (struct CMUnitTest)
		cmocka_unit_test(replay_orders);
	return cmocka_run_group_tests(tests, NULL, NULL);
}

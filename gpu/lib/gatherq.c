/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The lossy q8 all-gather of f32 (tally_ctx_set_allgather_codec(ctx,
 * 8); off by default): each rank's shard goes as GATHER rounds of i8
 * "elements" that are bytes of its own format, a chunk at a time: a
 * little-endian binary32 scale s, then the chunk's values rounded to the
 * nearest integer of x * s, s = 127 / (the chunk's max |x|). tally-dp
 * moves the bytes as they are; every rank, the owner included, decodes
 * x = q / s, so all hold the same bits. A quarter of the bytes of the
 * exact all-gather (plus 4 a chunk), for an error within max|x| / 254
 * of the chunk (docs/collectives.md, "A lossy q8 all-gather").
 *
 * The layout on the wire: shard p is S = 4 k + count bytes at wire
 * element p S, k = ceil(count / D) chunks of E = elems bytes (the last
 * shorter), each 4 bytes of scale and up to D = E - 4 values; the
 * window cuts a shard of S bytes into exactly those k chunks.
 */
#include <errno.h>
#include <float.h>
#include <math.h>
#include <string.h>

#include <tally/quant.h>

#include "ctx.h"

#define AGQ_HDR		4	/* the scale's bytes at a chunk's head */
#define AGQ_LEVELS	127
#define AGQ_NONE	UINT32_MAX

/* What the chunk hooks need (the round's arg). */
struct agq_call {
	const float *send;	/* this rank's count floats */
	float *recv;		/* world x count floats */
	size_t count;
	size_t shard;		/* S: a shard's bytes on the wire */
	size_t elems;		/* E: a chunk's bytes */
	unsigned int rank;
	uint32_t bad;		/* the lowest rank whose shard held a
				 * non-finite value, or AGQ_NONE */
};

int
tally_ctx_set_allgather_codec(struct tally_ctx *ctx, unsigned int bits)
{
	if (ctx == NULL)
		return -EINVAL;
	if (bits != 0 && bits != 8)
		return tally_ctx_fail(ctx, -EINVAL, "the all-gather codec is "
			"0 (exact) or 8 (q8), not %u", bits);
	if (bits == 8 && ctx->elems <= 2 * AGQ_HDR)
		return tally_ctx_fail(ctx, -EINVAL, "the q8 all-gather needs "
			"elems above %u, not %u", 2 * AGQ_HDR, ctx->elems);
	ctx->ag_bits = (uint8_t)bits;
	return 0;
}

unsigned int
tally_ctx_allgather_codec(const struct tally_ctx *ctx)
{
	return ctx != NULL ? ctx->ag_bits : 0;
}

/*
 * Encodes m floats of x into q (after the scale at q[-4..-1]): the
 * scale from their max |x|, each value rounded to nearest, ties to even
 * (adding and taking away 1.5 x 2^23 rounds a binary32 of magnitude at
 * most 2^22 so, and vectorizes). A NaN or infinity makes the scale a
 * NaN and the values 0: every reader then knows. Returns 0 or -ERANGE.
 */
static int
agq_encode(const float *x, uint8_t *hdr, int8_t *q, size_t m)
{
	const float magic = 12582912.0f;
	float a = 0.0f, s;
	int finite = 1;

	for (size_t i = 0; i < m; i++) {
		float v = fabsf(x[i]);

		finite &= v <= FLT_MAX;
		a = v > a ? v : a;
	}
	if (!finite) {
		s = NAN;
		memcpy(hdr, &s, sizeof(s));
		memset(q, 0, m);
		return -ERANGE;
	}
	(void)tally_quant_scale(a, AGQ_LEVELS, &s);
	memcpy(hdr, &s, sizeof(s));
	for (size_t i = 0; i < m; i++) {
		float y = x[i] * s;

		y = y > 127.0f ? 127.0f : y < -127.0f ? -127.0f : y;
		q[i] = (int8_t)(int)((y + magic) - magic);
	}
	return 0;
}

/* Decodes a chunk's m values (its scale at hdr) into x. 0 or -ERANGE. */
static int
agq_decode(const uint8_t *hdr, const int8_t *q, float *x, size_t m)
{
	float s;

	memcpy(&s, hdr, sizeof(s));
	if (!(s > 0.0f)) {
		for (size_t i = 0; i < m; i++)
			x[i] = NAN;
		return -ERANGE;
	}
	for (size_t i = 0; i < m; i++)
		x[i] = (float)q[i] / s;
	return 0;
}

/* The shard, its first value's index and the values of a wire chunk. */
static void
agq_locate(const struct agq_call *c, size_t off, size_t n, unsigned int *p,
	size_t *first, size_t *m)
{
	*p = (unsigned int)(off / c->shard);
	*first = (off % c->shard) / c->elems * (c->elems - AGQ_HDR);
	*m = n - AGQ_HDR;
}

/* Notes that shard p held a non-finite value. */
static void
agq_bad(struct agq_call *c, unsigned int p)
{
	if (c->bad == AGQ_NONE || p < c->bad)
		c->bad = p;
}

/*
 * Encodes this rank's chunk at wire element off (n bytes) into r->src,
 * and decodes it into its own shard of recv at once, so that the owner
 * holds what the others get (send may be that shard: it is read first).
 */
static void
agq_encode_chunk(const struct tally_round *r, size_t off, size_t n)
{
	struct agq_call *c = r->arg;
	uint8_t *q = (uint8_t *)r->src + (off - r->src_base);
	size_t first, m;
	unsigned int p;

	agq_locate(c, off, n, &p, &first, &m);
	if (p != c->rank)
		return;		/* a request: no data */
	if (agq_encode(c->send + first, q, (int8_t *)(q + AGQ_HDR), m) != 0)
		agq_bad(c, p);
	(void)agq_decode(q, (const int8_t *)(q + AGQ_HDR),
		c->recv + (size_t)p * c->count + first, m);
}

/* Decodes another rank's chunk at wire element off into recv. */
static void
agq_decode_chunk(const struct tally_round *r, size_t off, size_t n,
	const void *res)
{
	struct agq_call *c = r->arg;
	const uint8_t *b = res;
	size_t first, m;
	unsigned int p;

	agq_locate(c, off, n, &p, &first, &m);
	if (agq_decode(b, (const int8_t *)(b + AGQ_HDR),
			c->recv + (size_t)p * c->count + first, m) != 0)
		agq_bad(c, p);
}

/*
 * The q8 all-gather of send (count floats, count > 0, checked) into
 * recv (world x count). Borrows both; send may be recv's own shard.
 * -ERANGE on every rank when a rank's shard held a NaN or an infinity
 * (its chunks NaN in every recv; the context stays usable).
 */
int
tally_lib_ag_q8(struct tally_ctx *ctx, const float *send, float *recv,
	size_t count)
{
	size_t d = (size_t)ctx->elems - AGQ_HDR;
	struct agq_call c = { .send = send, .recv = recv, .count = count,
		.elems = ctx->elems, .rank = ctx->rank, .bad = AGQ_NONE };
	struct tally_round r;
	int rc;

	c.shard = AGQ_HDR * ((count + d - 1) / d) + count;
	if (c.shard > UINT32_MAX / ctx->world)
		return tally_ctx_fail(ctx, -EINVAL, "%u x %zu bytes: at most "
			"2^32 - 1 in one call", ctx->world, c.shard);
	rc = tally_lib_grow_stage(ctx, c.shard);
	if (rc == 0)	/* results land here when not decoded in place */
		rc = tally_lib_grow_fixp(ctx, (c.shard * ctx->world + 3) / 4);
	if (rc != 0)
		return rc;
	r = (struct tally_round){
		.type = TALLY_PT_GATHER, .enc = TALLY_ENC_I8,
		.src = ctx->stage, .dst = ctx->fixp, .n = c.shard * ctx->world,
		.shard = c.shard, .src_base = c.shard * ctx->rank,
		.encode = agq_encode_chunk, .decode = agq_decode_chunk,
		.arg = &c,
	};
	rc = tally_lib_run(ctx, &r);
	if (rc == 0 && c.bad != AGQ_NONE)
		return tally_ctx_fail(ctx, -ERANGE, "rank %u's shard holds a "
			"NaN or an infinity: the q8 all-gather cannot encode "
			"it (its chunks are NaN)", c.bad);
	return rc;
}

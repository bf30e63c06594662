/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tally_allreduce_typed(): one entry point for every element type. f32
 * and i32 are tally_allreduce_f32() and tally_allreduce_i32(); bf16 and
 * f16 go through the shared-scale fixed point of <tally/fixp16.h>: a MAX
 * round for the scale, then integer sums in 32-bit or 16-bit lanes (the
 * rule of tally_fixp16_lanes(), or the context's tally_ctx_set_lanes()),
 * each chunk encoded from the caller's 16-bit elements just before it
 * goes and rounded once back into them as soon as its sum is in.
 */
#include <errno.h>

#include <tally/fixp16.h>

#include "ctx.h"

/* What the 16-bit round's chunk hooks need (the round's arg). */
struct typed_call {
	const uint16_t *src;	/* the caller's n elements in */
	uint16_t *dst;		/* the caller's results: elements base on */
	size_t base;		/* the first element whose result comes back */
	enum tally_dtype dt;
	unsigned int lanes;	/* of the contributions: 16 or 32 */
	unsigned int sum_bits;	/* of the results: 16 (narrow) or 32 */
	int exp;
};

/* Sets the context's bf16/f16 lanes: 0 (the rule), 16 or 32. */
int
tally_ctx_set_lanes(struct tally_ctx *ctx, unsigned int lanes)
{
	if (ctx == NULL)
		return -EINVAL;
	if (lanes != 0 && lanes != 16 && lanes != 32)
		return tally_ctx_fail(ctx, -EINVAL, "lanes are 0 (the rule), "
			"16 or 32, not %u", lanes);
	ctx->lanes = (uint8_t)lanes;
	return 0;
}

/* The lanes a bf16/f16 call takes on ctx: the setting, else the rule. */
unsigned int
tally_ctx_lanes(const struct tally_ctx *ctx, enum tally_dtype dt)
{
	if (ctx == NULL || (dt != TALLY_DT_BF16 && dt != TALLY_DT_F16))
		return 32;
	if (ctx->lanes != 0)
		return ctx->lanes;
	return tally_fixp16_lanes(dt, ctx->world, ctx->narrow);
}

/* Encodes elements [off, off + count) into the contributions (r->src). */
static void
typed_encode_chunk(const struct tally_round *r, size_t off, size_t count)
{
	const struct typed_call *c = r->arg;
	uint8_t *q = (uint8_t *)r->src + off * (c->lanes / 8);

	(void)tally_fixp16_encode(c->dt, c->src + off, q, c->lanes, count,
		c->exp);
}

/*
 * Rounds the sums of elements [off, off + count) into the caller's
 * (dst holds the results from element base on).
 */
static void
typed_decode_chunk(const struct tally_round *r, size_t off, size_t count,
	const void *res)
{
	const struct typed_call *c = r->arg;

	(void)tally_fixp16_decode(c->dt, res, c->sum_bits,
		c->dst + (off - c->base), count, c->exp);
}

/*
 * The contributions' and results' buffers for c (grown before any round,
 * so that a failure leaves the slots in step): i32 in ctx->fixp; i16 in
 * ctx->stage, with wide (i32) results in ctx->fixp.
 */
static int
typed_buffers(struct tally_ctx *ctx, const struct typed_call *c, size_t n,
	void **src, void **dst)
{
	int rc;

	if (c->lanes == 32 || c->sum_bits == 32) {
		rc = tally_lib_grow_fixp(ctx, n);
		if (rc != 0)
			return rc;
	}
	if (c->lanes == 16) {
		rc = tally_lib_grow_stage(ctx, n * sizeof(int16_t));
		if (rc != 0)
			return rc;
	}
	*src = c->lanes == 32 ? (void *)ctx->fixp : (void *)ctx->stage;
	*dst = c->sum_bits == 32 ? (void *)ctx->fixp : (void *)ctx->stage;
	return 0;
}

/*
 * bf16 or f16 rounds of type (SUM, or SCATTER with shard elements a
 * rank): the scale round over src's n elements, then the integer sums,
 * each chunk encoded from src just before it goes and its results from
 * element base on rounded once into dst. Borrows src and dst (which may
 * be src for a SUM).
 */
int
tally_lib_fixp16_run(struct tally_ctx *ctx, uint8_t type,
	const uint16_t *src, uint16_t *dst, size_t base, size_t n,
	size_t shard, enum tally_dtype dt)
{
	struct typed_call c = { .src = src, .dst = dst, .base = base,
		.dt = dt, .lanes = tally_ctx_lanes(ctx, dt) };
	struct tally_round r;
	float global;
	void *qsrc, *qdst;
	int rc;

	c.sum_bits = c.lanes == 16 && ctx->narrow ? 16 : 32;
	rc = typed_buffers(ctx, &c, n, &qsrc, &qdst);
	if (rc != 0)
		return rc;
	rc = tally_lib_max_round(ctx, tally_fixp16_absmax(dt, src, n), &global);
	if (rc != 0)
		return rc;
	/* Every rank has the same maximum, so all agree on what follows. */
	if (tally_fixp16_exponent(global, ctx->world, c.lanes, ctx->narrow,
			&c.exp) != 0)
		return tally_ctx_fail(ctx, -ERANGE, "the largest |x| over "
			"all ranks is %g: no fixed-point scale for it", global);
	r = (struct tally_round){
		.type = type,
		.enc = c.lanes == 32 ? TALLY_ENC_I32 : TALLY_ENC_I16,
		.scale_exp = (int16_t)c.exp,
		.src = qsrc, .dst = qdst, .n = n, .shard = shard,
		.encode = typed_encode_chunk, .decode = typed_decode_chunk,
		.arg = &c,
	};
	return tally_lib_run(ctx, &r);
}

/* Dispatches on dt; see <tally/tally.h>. Borrows buf. */
int
tally_allreduce_typed(struct tally_ctx *ctx, void *buf, size_t n,
	enum tally_dtype dt)
{
	int rc;

	switch (dt) {
	case TALLY_DT_F32:
		return tally_allreduce_f32(ctx, buf, n);
	case TALLY_DT_I32:
		return tally_allreduce_i32(ctx, buf, n);
	case TALLY_DT_BF16:
	case TALLY_DT_F16:
		rc = tally_lib_check_call(ctx, buf, n);
		return rc <= 0 ? rc : tally_lib_fixp16_run(ctx, TALLY_PT_SUM,
			buf, buf, 0, n, 0, dt);
	default:
		if (ctx == NULL)
			return -EINVAL;
		return tally_ctx_fail(ctx, -EINVAL, "element type %d is not "
			"f32, i32, bf16 or f16", (int)dt);
	}
}

/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The bf16 and f16 reduce-scatter (coll.c's tally_reduce_scatter()):
 * the whole send tensor into the shared-scale fixed point of
 * <tally/fixp16.h> with one MAX round over all of it, as the f32
 * reduce-scatter takes its scale, in the lanes tally_allreduce_typed()
 * would take (tally_ctx_lanes()), then SCATTER rounds; only this rank's
 * shard comes back, and it is rounded once to the type. So rank r gets
 * the very bits of shard r of a tally_allreduce_typed() of the same
 * tensors.
 */
#include <errno.h>

#include <tally/fixp16.h>

#include "ctx.h"

/* What the round's chunk hooks need (the round's arg). */
struct rs16 {
	const uint16_t *src;	/* the caller's world x count elements */
	uint16_t *dst;		/* the caller's shard, count elements */
	size_t base;		/* the shard's first element in the tensor */
	enum tally_dtype dt;
	unsigned int lanes;	/* of the contributions: 16 or 32 */
	unsigned int sum_bits;	/* of the results: 16 (narrow) or 32 */
	int exp;
};

/* Encodes elements [off, off + count) of send into the contributions. */
static void
rs16_encode(const struct tally_round *r, size_t off, size_t count)
{
	const struct rs16 *c = r->arg;
	uint8_t *q = (uint8_t *)r->src + off * (c->lanes / 8);

	(void)tally_fixp16_encode(c->dt, c->src + off, q, c->lanes, count,
		c->exp);
}

/* Rounds the sums of this rank's elements [off, off + count) into recv. */
static void
rs16_decode(const struct tally_round *r, size_t off, size_t count,
	const void *res)
{
	const struct rs16 *c = r->arg;

	(void)tally_fixp16_decode(c->dt, res, c->sum_bits,
		c->dst + (off - c->base), count, c->exp);
}

/*
 * The contributions' and results' buffers, n elements each, grown before
 * any round (a failure leaves the slots in step): i32 in ctx->fixp; i16
 * in ctx->stage, with wide (i32) results in ctx->fixp.
 */
static int
rs16_buffers(struct tally_ctx *ctx, const struct rs16 *c, size_t n,
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
 * Reduce-scatter of dt (bf16 or f16): send's world x count elements,
 * this rank's shard of the sums into recv. Called after coll.c's
 * checks (count > 0). Borrows send and recv.
 */
int
tally_lib_rs16(struct tally_ctx *ctx, const uint16_t *send, uint16_t *recv,
	size_t count, enum tally_dtype dt)
{
	size_t n = count * ctx->world;
	struct rs16 c = { .src = send, .dst = recv,
		.base = count * ctx->rank, .dt = dt,
		.lanes = tally_ctx_lanes(ctx, dt) };
	struct tally_round r;
	float global;
	void *src, *dst;
	int rc;

	c.sum_bits = c.lanes == 16 && ctx->narrow ? 16 : 32;
	rc = rs16_buffers(ctx, &c, n, &src, &dst);
	if (rc != 0)
		return rc;
	rc = tally_lib_max_round(ctx, tally_fixp16_absmax(dt, send, n),
		&global);
	if (rc != 0)
		return rc;
	/* Every rank has the same maximum, so all agree on what follows. */
	if (tally_fixp16_exponent(global, ctx->world, c.lanes, ctx->narrow,
			&c.exp) != 0)
		return tally_ctx_fail(ctx, -ERANGE, "the largest |x| over "
			"all ranks is %g: no fixed-point scale for it", global);
	r = (struct tally_round){
		.type = TALLY_PT_SCATTER,
		.enc = c.lanes == 32 ? TALLY_ENC_I32 : TALLY_ENC_I16,
		.scale_exp = (int16_t)c.exp,
		.src = src, .dst = dst, .n = n, .shard = count,
		.encode = rs16_encode, .decode = rs16_decode, .arg = &c,
	};
	return tally_lib_run(ctx, &r);
}

/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Reduce-scatter, all-gather and broadcast: rounds with an owner through
 * the sliding window (window.c; docs/protocol.md, "Collectives"). The
 * tensor of a reduce-scatter or all-gather is world shards of count
 * elements, shard r owned by rank r; a broadcast is one shard, the
 * root's. Reduce-scatter sums as the allreduces do (i32 exactly, f32
 * through the shared-scale fixed point with its MAX round first, bf16
 * and f16 through its 16-bit form in coll16.c); the gathers move bytes
 * as they are, so any 2- or 4-byte type is exact.
 */
#include <errno.h>
#include <string.h>

#include <tally/fixp.h>

#include "ctx.h"

/* Bytes of an element of dt, 0 for an unknown one. */
static size_t
dt_size(enum tally_dtype dt)
{
	switch (dt) {
	case TALLY_DT_F32:
	case TALLY_DT_I32:
		return 4;
	case TALLY_DT_BF16:
	case TALLY_DT_F16:
		return 2;
	default:
		return 0;
	}
}

/*
 * The checks every collective makes: the context and buffers, and that
 * the world x count elements of a sharded tensor are offsets the wire
 * can name. Returns 1 to go on, 0 when there is nothing to do (count
 * 0), or -errno with the context's error set.
 */
static int
check(struct tally_ctx *ctx, const void *send, const void *recv,
	size_t count, size_t shards, enum tally_dtype dt)
{
	int rc;

	if (ctx == NULL)
		return -EINVAL;
	if (dt_size(dt) == 0)
		return tally_ctx_fail(ctx, -EINVAL, "unknown data type %d",
			(int)dt);
	if (count > UINT32_MAX / shards)
		return tally_ctx_fail(ctx, -EINVAL, "%zu x %zu elements: at "
			"most 2^32 - 1 in one call", shards, count);
	rc = tally_lib_check_call(ctx, send, count * shards);
	if (rc <= 0)
		return rc;
	if (recv == NULL)
		return tally_ctx_fail(ctx, -EINVAL, "recv is NULL");
	return 1;
}

/*
 * The f32 reduce-scatter's codec, a chunk at a time: the caller's floats
 * (src, world x count) into the fixed-point staging buffer before the
 * chunk goes, and the owner's sums decoded into its recv (its shard
 * starts at element base of the tensor) as they come.
 */
struct rs_fixp {
	const float *src;
	float *dst;
	size_t base;
	int e;
};

static void
rs_encode(const struct tally_round *r, size_t off, size_t count)
{
	const struct rs_fixp *f = r->arg;

	tally_fixp_encode(f->src + off, (int32_t *)r->src + off, count, f->e);
}

static void
rs_decode(const struct tally_round *r, size_t off, size_t count,
	const void *res)
{
	const struct rs_fixp *f = r->arg;

	tally_fixp_decode(res, f->dst + (off - f->base), count, f->e);
}

/*
 * The f32 reduce-scatter: every member's max |x| over all it sends in
 * one MAX round, the exponent from it, then SCATTER rounds of i32.
 */
static int
rs_f32(struct tally_ctx *ctx, const float *send, float *recv, size_t count)
{
	size_t n = count * ctx->world;
	struct rs_fixp f = { .src = send, .dst = recv,
		.base = count * ctx->rank };
	struct tally_round r;
	float global;
	int rc;

	rc = tally_lib_grow_fixp(ctx, n);
	if (rc != 0)
		return rc;
	rc = tally_lib_max_round(ctx, tally_fixp_absmax(send, n), &global);
	if (rc != 0)
		return rc;
	if (tally_fixp_exponent(global, ctx->world, &f.e) != 0)
		return tally_ctx_fail(ctx, -ERANGE, "the largest |x| over "
			"all ranks is %g: no fixed-point scale for it", global);
	r = (struct tally_round){
		.type = TALLY_PT_SCATTER, .enc = TALLY_ENC_I32,
		.scale_exp = (int16_t)f.e,
		.src = ctx->fixp, .dst = ctx->fixp, .n = n, .shard = count,
		.encode = rs_encode, .decode = rs_decode, .arg = &f,
	};
	return tally_lib_run(ctx, &r);
}

int
tally_reduce_scatter(struct tally_ctx *ctx, const void *send, void *recv,
	size_t count, enum tally_dtype dt)
{
	struct tally_round r = {
		.type = TALLY_PT_SCATTER, .enc = TALLY_ENC_I32,
		.src = send, .dst = recv, .shard = count,
	};
	int rc;

	rc = check(ctx, send, recv, count, ctx != NULL ? ctx->world : 1, dt);
	if (rc <= 0)
		return rc;
	if (dt == TALLY_DT_F32 && tally_lib_quant_bits(&ctx->codec) != 0)
		return tally_lib_rs_quant(ctx, NULL, send, recv, count);
	if (dt == TALLY_DT_F32)
		return rs_f32(ctx, send, recv, count);
	if (dt == TALLY_DT_BF16 || dt == TALLY_DT_F16)
		return tally_lib_rs16(ctx, send, recv, count, dt);
	r.n = count * ctx->world;
	r.dst_base = count * ctx->rank;
	return tally_lib_run(ctx, &r);
}

/* The wire encoding that moves elements of dt as they are. */
static uint8_t
dt_enc(enum tally_dtype dt)
{
	return dt_size(dt) == 2 ? TALLY_ENC_I16 : TALLY_ENC_I32;
}

int
tally_allgather(struct tally_ctx *ctx, const void *send, void *recv,
	size_t count, enum tally_dtype dt)
{
	struct tally_round r = {
		.type = TALLY_PT_GATHER, .enc = dt_enc(dt),
		.src = send, .dst = recv, .shard = count,
	};
	int rc = check(ctx, send, recv, count,
		ctx != NULL ? ctx->world : 1, dt);
	size_t esz = dt_size(dt);
	uint8_t *mine;

	if (rc <= 0)
		return rc;
	if (dt == TALLY_DT_F32 && ctx->ag_bits == 8)
		return tally_lib_ag_q8(ctx, send, recv, count);
	r.n = count * ctx->world;
	r.src_base = count * ctx->rank;
	rc = tally_lib_run(ctx, &r);
	if (rc != 0)
		return rc;
	/* Nobody sends a member its own shard: it is here already. */
	mine = (uint8_t *)recv + r.src_base * esz;
	if ((const uint8_t *)send != mine)
		memmove(mine, send, count * esz);
	return 0;
}

int
tally_broadcast(struct tally_ctx *ctx, void *buf, size_t n,
	enum tally_dtype dt, unsigned int root)
{
	struct tally_round r = {
		.type = TALLY_PT_GATHER, .enc = dt_enc(dt),
		.src = buf, .dst = buf, .n = n, .shard = n,
	};
	int rc;

	if (ctx != NULL && root >= ctx->world)
		return tally_ctx_fail(ctx, -EINVAL, "root %u: the job has "
			"ranks 0 .. %u", root, ctx->world - 1u);
	rc = check(ctx, buf, buf, n, 1, dt);
	if (rc <= 0)
		return rc;
	r.root = (uint8_t)root;
	return tally_lib_run(ctx, &r);
}

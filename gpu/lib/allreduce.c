/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The plain allreduce entry points and the helpers the codecs build on:
 * argument checks, then rounds through the sliding window (window.c).
 * i32 sums go straight from and back into the caller's buffer; f32 sums
 * take the shared-scale fixed-point detour (a MAX round for the scale,
 * then an i32 sum); maxima are MAX rounds. tally_allreduce() and the
 * codecs are in codecs.c.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <tally/fixp.h>

#include "ctx.h"

int
tally_lib_check_call(struct tally_ctx *ctx, const void *buf, size_t n)
{
	if (ctx == NULL)
		return -EINVAL;
	ctx->keep_buf = NULL;
	/* Out of step after a failure: a new epoch (rejoin.c). */
	if (ctx->broken && ctx->rj != NULL) {
		int rc = tally_rejoin(ctx);

		if (rc != 0)
			return rc;
	}
	if (ctx->broken)
		return tally_ctx_fail(ctx, -EPIPE, "an earlier allreduce on "
			"this context failed; its slots are out of step: "
			"close it");
	if (buf == NULL && n > 0)
		return tally_ctx_fail(ctx, -EINVAL, "buffer is NULL");
	if (n > UINT32_MAX)
		return tally_ctx_fail(ctx, -EINVAL, "%zu elements: at most "
			"2^32 - 1 in one allreduce", n);
	ctx->err[0] = '\0';
	return n > 0;
}

int
tally_lib_run(struct tally_ctx *ctx, const struct tally_round *r)
{
	int rc = ctx->ring != NULL ? tally_lib_ring_run(ctx, r) :
		tally_window_run(ctx, r);

	/* A round the ring does not carry was not started: still in step. */
	if (rc != 0 && !(ctx->ring != NULL && rc == -EOPNOTSUPP))
		ctx->broken = 1;
	if (rc != 0)	/* an in-place call's input, back (rejoin.c) */
		tally_lib_keep_restore(ctx);
	return rc;
}

int
tally_allreduce_i32(struct tally_ctx *ctx, int32_t *buf, size_t n)
{
	struct tally_round r = {
		.type = TALLY_PT_SUM, .enc = TALLY_ENC_I32,
		.src = buf, .dst = buf, .n = n,
	};
	int rc = tally_lib_check_call(ctx, buf, n);

	if (rc <= 0)
		return rc;
	rc = tally_lib_keep(ctx, buf, n * sizeof(*buf));
	return rc != 0 ? rc : tally_lib_run(ctx, &r);
}

int
tally_allreduce_enc(struct tally_ctx *ctx, unsigned int enc, const void *src,
	void *dst, size_t n)
{
	struct tally_round r = {
		.type = TALLY_PT_SUM, .enc = (uint8_t)enc,
		.src = src, .dst = dst, .n = n,
	};
	int rc = tally_lib_check_call(ctx, src, n);

	if (rc <= 0)
		return rc;
	if (enc != TALLY_ENC_I32 && enc != TALLY_ENC_I16 &&
			enc != TALLY_ENC_I8 && enc != TALLY_ENC_I4 &&
			enc != TALLY_ENC_SIGN)
		return tally_ctx_fail(ctx, -EINVAL, "encoding %u is not an "
			"integer sum encoding (i32, i16, i8, i4, sign)", enc);
	if (dst == NULL)
		return tally_ctx_fail(ctx, -EINVAL, "dst is NULL");
	/* A chunk must start on a byte of src and of dst. */
	if ((enc == TALLY_ENC_I4 || enc == TALLY_ENC_SIGN) &&
			ctx->elems % 8 != 0)
		return tally_ctx_fail(ctx, -EINVAL, "%s needs the context's "
			"elems to be a multiple of 8, not %u",
			tally_enc_name(enc), ctx->elems);
	return tally_lib_run(ctx, &r);
}

int
tally_allreduce_max_f32(struct tally_ctx *ctx, float *buf, size_t n)
{
	struct tally_round r = {
		.type = TALLY_PT_MAX, .enc = TALLY_ENC_F32,
		.src = buf, .dst = buf, .n = n,
	};
	int rc = tally_lib_check_call(ctx, buf, n);

	if (rc <= 0)
		return rc;
	rc = tally_lib_keep(ctx, buf, n * sizeof(*buf));
	return rc != 0 ? rc : tally_lib_run(ctx, &r);
}

int
tally_lib_grow_fixp(struct tally_ctx *ctx, size_t n)
{
	int32_t *q;

	if (ctx->fixp_cap >= n)
		return 0;
	q = malloc(n * sizeof(*q));
	if (q == NULL)
		return tally_ctx_fail(ctx, -ENOMEM, "out of memory for %zu "
			"fixed-point elements", n);
	free(ctx->fixp);
	ctx->fixp = q;
	ctx->fixp_cap = n;
	return 0;
}

/*
 * Where the f32 round's sums go and how they are decoded: the caller's
 * floats and the decoding exponent (the wire's, plus k for a divisor
 * 2^k).
 */
struct fixp_out {
	float *buf;
	int exp;
};

/*
 * The f32 round's codec, a chunk at a time while the window runs: the
 * caller's floats (r->arg's buf) to the fixed-point staging buffer
 * (r->src) before a chunk goes out, and its exact sum back into the
 * floats as soon as it is in, decoded with o->exp: a mean's division by
 * 2^k costs no pass of its own. The wire's exponent travels in
 * r->scale_exp.
 */
static void
fixp_encode_chunk(const struct tally_round *r, size_t off, size_t count)
{
	const struct fixp_out *o = r->arg;

	tally_fixp_encode(o->buf + off, (int32_t *)r->src + off, count,
		r->scale_exp);
}

static void
fixp_decode_chunk(const struct tally_round *r, size_t off, size_t count,
	const void *res)
{
	const struct fixp_out *o = r->arg;

	tally_fixp_decode(res, o->buf + off, count, o->exp);
}

/*
 * The decoding exponent of a sum divided by div = 2^k: e + k, exact, as
 * dividing the floats first would be (unless x / div falls below
 * FLT_MIN, where that division rounds).
 */
static void
fixp_out_div(struct fixp_out *o, int e, unsigned int div)
{
	o->exp = e;
	for (; div > 1; div >>= 1)
		o->exp++;
}

int
tally_lib_fixp_sum(struct tally_ctx *ctx, float *buf, size_t n, int *e)
{
	return tally_lib_fixp_sum_div(ctx, buf, n, 1, e);
}

int
tally_lib_fixp_sum_div(struct tally_ctx *ctx, float *buf, size_t n,
	unsigned int div, int *e)
{
	struct tally_round r = { .type = TALLY_PT_MAX, .enc = TALLY_ENC_F32 };
	struct fixp_out out = { .buf = buf };
	float mine, global;
	int rc;

	if (div == 0 || (div & (div - 1)) != 0)
		return tally_ctx_fail(ctx, -EINVAL, "a fixp sum is divided "
			"by a power of two, not %u", div);
	/* Before any round, so that a failure leaves the slots in step. */
	rc = tally_lib_grow_fixp(ctx, n);
	if (rc != 0)
		return rc;
	mine = tally_fixp_absmax(buf, n);
	r.src = &mine;
	r.dst = &global;
	r.n = 1;
	rc = tally_lib_run(ctx, &r);
	if (rc != 0)
		return rc;
	/* Every rank has the same maximum, so all agree on what follows. */
	if (tally_fixp_exponent_total(global, ctx->scale_world, e) != 0)
		return tally_ctx_fail(ctx, -ERANGE, "the largest |x| over "
			"all ranks is %g: no fixed-point scale for it", global);
	fixp_out_div(&out, *e, div);
	r = (struct tally_round){
		.type = TALLY_PT_SUM, .enc = TALLY_ENC_I32,
		.scale_exp = (int16_t)*e,
		.src = ctx->fixp, .dst = ctx->fixp, .n = n,
		.encode = fixp_encode_chunk, .decode = fixp_decode_chunk,
		.arg = &out,
	};
	return tally_lib_run(ctx, &r);
}

int
tally_allreduce_f32(struct tally_ctx *ctx, float *buf, size_t n)
{
	int rc = tally_lib_check_call(ctx, buf, n), e;

	if (rc <= 0)
		return rc;
	rc = tally_lib_keep(ctx, buf, n * sizeof(*buf));
	return rc != 0 ? rc : tally_lib_fixp_sum(ctx, buf, n, &e);
}

int
tally_lib_grow_stage(struct tally_ctx *ctx, size_t len)
{
	uint8_t *p;

	if (ctx->stage_cap >= len)
		return 0;
	p = malloc(len);
	if (p == NULL)
		return tally_ctx_fail(ctx, -ENOMEM, "out of memory for %zu "
			"bytes of encoded gradients", len);
	free(ctx->stage);
	ctx->stage = p;
	ctx->stage_cap = len;
	return 0;
}

int
tally_lib_max_round(struct tally_ctx *ctx, float mine, float *out)
{
	struct tally_round r = {
		.type = TALLY_PT_MAX, .enc = TALLY_ENC_F32,
		.src = &mine, .dst = out, .n = 1,
	};

	return tally_lib_run(ctx, &r);
}

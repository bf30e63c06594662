/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The allreduce entry points: argument checks, then rounds through the
 * sliding window (window.c). i32 sums go straight from and back into the
 * caller's buffer; f32 sums take the shared-scale fixed-point detour (a
 * MAX round for the scale, then an i32 sum); maxima are MAX rounds;
 * tally_allreduce() applies the job's codec: the quantizers take the
 * same MAX round, then a sum of narrow integers.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <tally/feedback.h>
#include <tally/fixp.h>
#include <tally/quant.h>
#include <tally/sparse.h>

#include "ctx.h"

/*
 * The checks every entry point starts with. Returns 1 to go on, 0 when
 * there is nothing to do (n == 0), or a negative errno.
 */
static int
check_call(struct tally_ctx *ctx, const void *buf, size_t n)
{
	if (ctx == NULL)
		return -EINVAL;
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

/* Runs r; an error leaves the slots in an unknown state. */
static int
run(struct tally_ctx *ctx, const struct tally_round *r)
{
	int rc = tally_window_run(ctx, r);

	if (rc != 0)
		ctx->broken = 1;
	return rc;
}

int
tally_allreduce_i32(struct tally_ctx *ctx, int32_t *buf, size_t n)
{
	struct tally_round r = {
		.type = TALLY_PT_SUM, .enc = TALLY_ENC_I32,
		.src = buf, .dst = buf, .n = n,
	};
	int rc = check_call(ctx, buf, n);

	return rc <= 0 ? rc : run(ctx, &r);
}

int
tally_allreduce_enc(struct tally_ctx *ctx, unsigned int enc, const void *src,
	void *dst, size_t n)
{
	struct tally_round r = {
		.type = TALLY_PT_SUM, .enc = (uint8_t)enc,
		.src = src, .dst = dst, .n = n,
	};
	int rc = check_call(ctx, src, n);

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
	return run(ctx, &r);
}

int
tally_allreduce_max_f32(struct tally_ctx *ctx, float *buf, size_t n)
{
	struct tally_round r = {
		.type = TALLY_PT_MAX, .enc = TALLY_ENC_F32,
		.src = buf, .dst = buf, .n = n,
	};
	int rc = check_call(ctx, buf, n);

	return rc <= 0 ? rc : run(ctx, &r);
}

/* Makes ctx->fixp hold at least n elements; kept for later calls. */
static int
grow_fixp(struct tally_ctx *ctx, size_t n)
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
 * The f32 round's codec, a chunk at a time while the window runs: the
 * caller's floats (r->arg) to the fixed-point staging buffer (r->src)
 * before a chunk goes out, and its exact sum back into the floats as soon
 * as it is in. The exponent travels in r->scale_exp.
 */
static void
fixp_encode_chunk(const struct tally_round *r, size_t off, size_t count)
{
	tally_fixp_encode((const float *)r->arg + off,
		(int32_t *)r->src + off, count, r->scale_exp);
}

static void
fixp_decode_chunk(const struct tally_round *r, size_t off, size_t count)
{
	tally_fixp_decode((const int32_t *)r->dst + off,
		(float *)r->arg + off, count, r->scale_exp);
}

int
tally_allreduce_f32(struct tally_ctx *ctx, float *buf, size_t n)
{
	struct tally_round r = { .type = TALLY_PT_MAX, .enc = TALLY_ENC_F32 };
	float mine, global;
	int rc, e;

	rc = check_call(ctx, buf, n);
	if (rc <= 0)
		return rc;
	/* Before any round, so that a failure leaves the slots in step. */
	rc = grow_fixp(ctx, n);
	if (rc != 0)
		return rc;
	mine = tally_fixp_absmax(buf, n);
	r.src = &mine;
	r.dst = &global;
	r.n = 1;
	rc = run(ctx, &r);
	if (rc != 0)
		return rc;
	/* Every rank has the same maximum, so all agree on what follows. */
	if (tally_fixp_exponent(global, ctx->world, &e) != 0)
		return tally_ctx_fail(ctx, -ERANGE, "the largest |x| over "
			"all ranks is %g: no fixed-point scale for it", global);
	r = (struct tally_round){
		.type = TALLY_PT_SUM, .enc = TALLY_ENC_I32,
		.scale_exp = (int16_t)e,
		.src = ctx->fixp, .dst = ctx->fixp, .n = n,
		.encode = fixp_encode_chunk, .decode = fixp_decode_chunk,
		.arg = buf,
	};
	return run(ctx, &r);
}

/* Makes ctx->stage hold at least len bytes; kept for later calls. */
static int
grow_stage(struct tally_ctx *ctx, size_t len)
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

/* The max over all ranks of mine: one MAX round of one element. */
static int
max_round(struct tally_ctx *ctx, float mine, float *out)
{
	struct tally_round r = {
		.type = TALLY_PT_MAX, .enc = TALLY_ENC_F32,
		.src = &mine, .dst = out, .n = 1,
	};

	return run(ctx, &r);
}

/* The global max |x| over all ranks. */
static int
global_absmax(struct tally_ctx *ctx, const float *buf, size_t n, float *out)
{
	return max_round(ctx, tally_fixp_absmax(buf, n), out);
}

/* What the quantizers' chunk hooks need (a round's arg). */
struct quant_call {
	float *buf;		/* the caller's floats, in and out */
	unsigned int bits;
	unsigned int levels;
	float scale;
	uint64_t seed;
	uint8_t res_enc;
};

/* Encodes elements [off, off + count) of the floats into r->src. */
static void
quant_encode_chunk(const struct tally_round *r, size_t off, size_t count)
{
	const struct quant_call *q = r->arg;
	uint8_t *dst = (uint8_t *)r->src + tally_enc_payload_len(r->enc, off);

	switch (q->bits) {
	case 16:
		tally_quant_encode_i16(q->buf + off, (int16_t *)(void *)dst,
			count, q->scale, q->levels, q->seed, off);
		break;
	case 8:
		tally_quant_encode_i8(q->buf + off, (int8_t *)dst, count,
			q->scale, q->levels, q->seed, off);
		break;
	default:
		tally_quant_encode_i4(q->buf + off, dst, count, q->scale,
			q->levels, q->seed, off);
		break;
	}
}

/* Decodes the sums of elements [off, off + count) into the floats. */
static void
quant_decode_chunk(const struct tally_round *r, size_t off, size_t count)
{
	const struct quant_call *q = r->arg;
	const uint8_t *src = (const uint8_t *)r->dst +
		tally_enc_payload_len(q->res_enc, off);

	switch (q->res_enc) {
	case TALLY_ENC_I32:
		tally_quant_decode_i32((const int32_t *)(const void *)src,
			q->buf + off, count, q->scale);
		break;
	case TALLY_ENC_I16:
		tally_quant_decode_i16((const int16_t *)(const void *)src,
			q->buf + off, count, q->scale);
		break;
	case TALLY_ENC_I8:
		tally_quant_decode_i8((const int8_t *)src, q->buf + off, count,
			q->scale);
		break;
	default:
		tally_quant_decode_i4(src, q->buf + off, count, q->scale);
		break;
	}
}

/*
 * q16, q8, q4: a MAX round for the shared scale, then the stochastic
 * integers summed by the dataplane (wide or narrow, as the job is), each
 * chunk encoded just before it goes and decoded as soon as it is back.
 */
static int
allreduce_quant(struct tally_ctx *ctx, float *buf, size_t n,
	unsigned int bits)
{
	uint8_t enc = bits == 16 ? TALLY_ENC_I16 : bits == 8 ? TALLY_ENC_I8 :
		TALLY_ENC_I4;
	struct quant_call q = { .buf = buf, .bits = bits,
		.res_enc = (uint8_t)tally_enc_result(enc, ctx->narrow) };
	struct tally_round r;
	float global;
	int rc;

	rc = tally_quant_levels(bits, ctx->world, ctx->narrow, &q.levels);
	if (rc != 0)
		return tally_ctx_fail(ctx, rc, "q%u %s results for %u ranks: "
			"no quantization level fits", bits, ctx->narrow ?
			"narrow" : "wide", ctx->world);
	if (enc == TALLY_ENC_I4 && ctx->elems % 8 != 0)
		return tally_ctx_fail(ctx, -EINVAL, "q4 needs the context's "
			"elems to be a multiple of 8, not %u", ctx->elems);
	/* Buffers first, so that a failure leaves the slots in step. */
	rc = grow_stage(ctx, tally_enc_payload_len(enc, n));
	if (rc == 0)
		rc = grow_fixp(ctx, n);	/* the sums: at most 4 bytes each */
	if (rc != 0)
		return rc;
	q.seed = tally_quant_seed(ctx->codec.seed, ctx->rank,
		ctx->codec_calls++);
	rc = global_absmax(ctx, buf, n, &global);
	if (rc != 0)
		return rc;
	if (tally_quant_scale(global, q.levels, &q.scale) != 0)
		return tally_ctx_fail(ctx, -ERANGE, "the largest |x| over "
			"all ranks is %g: no quantization scale for it",
			global);
	r = (struct tally_round){
		.type = TALLY_PT_SUM, .enc = enc,
		.src = ctx->stage, .dst = ctx->fixp, .n = n,
		.encode = quant_encode_chunk, .decode = quant_decode_chunk,
		.arg = &q,
	};
	return run(ctx, &r);
}

/* The ternary and sign codecs' chunk hooks: what they need. */
struct vote_call {
	float *buf;		/* the caller's floats, in and out */
	float scale;
	uint64_t seed;
	uint8_t res_enc;
	unsigned int world;
};

static void
tern_encode_chunk(const struct tally_round *r, size_t off, size_t count)
{
	const struct vote_call *v = r->arg;

	/* The scale was checked positive and finite before the round. */
	(void)tally_tern_encode_i4(v->buf + off, (uint8_t *)r->src + off / 2,
		count, v->scale, v->seed, off);
}

static void
tern_decode_chunk(const struct tally_round *r, size_t off, size_t count)
{
	const struct vote_call *v = r->arg;
	const uint8_t *src = (const uint8_t *)r->dst +
		tally_enc_payload_len(v->res_enc, off);

	if (v->res_enc == TALLY_ENC_I32)
		tally_tern_decode_i32((const int32_t *)(const void *)src,
			v->buf + off, count, v->scale);
	else
		tally_tern_decode_i4(src, v->buf + off, count, v->scale);
}

static void
sign_encode_chunk(const struct tally_round *r, size_t off, size_t count)
{
	const struct vote_call *v = r->arg;

	tally_sign_encode(v->buf + off, (uint8_t *)r->src + off / 8, count);
}

static void
sign_decode_chunk(const struct tally_round *r, size_t off, size_t count)
{
	const struct vote_call *v = r->arg;
	const uint8_t *src = (const uint8_t *)r->dst +
		tally_enc_payload_len(v->res_enc, off);

	if (v->res_enc == TALLY_ENC_I8)
		tally_sign_decode_votes((const int8_t *)src, v->buf + off,
			count, v->world, v->scale);
	else
		tally_sign_decode_bits(src, v->buf + off, count, v->scale);
}

/*
 * ternary (TernGrad): a MAX round for the shared scale s, then every
 * element's stochastic -1/0/+1 as i4, summed by the dataplane, decoded as
 * sum * s. sign (signSGD): every element's sign bit, counted by the
 * dataplane, decoded to +1, -1 (or 0 on a wide tie).
 */
static int
allreduce_vote(struct tally_ctx *ctx, float *buf, size_t n, int tern)
{
	uint8_t enc = tern ? TALLY_ENC_I4 : TALLY_ENC_SIGN;
	struct vote_call v = { .buf = buf, .scale = 1.0f,
		.res_enc = (uint8_t)tally_enc_result(enc, ctx->narrow),
		.world = ctx->world };
	struct tally_round r;
	float global;
	int rc;

	if (ctx->elems % 8 != 0)
		return tally_ctx_fail(ctx, -EINVAL, "%s needs the context's "
			"elems to be a multiple of 8, not %u", tern ?
			"ternary" : "sign", ctx->elems);
	if (tern && ctx->narrow && ctx->world > 7)
		return tally_ctx_fail(ctx, -ERANGE, "ternary with narrow (i4) "
			"sums holds at most 7 ranks, not %u", ctx->world);
	rc = grow_stage(ctx, tally_enc_payload_len(enc, n));
	if (rc == 0)
		rc = grow_fixp(ctx, n);
	if (rc != 0)
		return rc;
	v.seed = tally_quant_seed(ctx->codec.seed, ctx->rank,
		ctx->codec_calls++);
	if (tern) {
		rc = global_absmax(ctx, buf, n, &global);
		if (rc != 0)
			return rc;
		if (!(global < INFINITY))
			return tally_ctx_fail(ctx, -ERANGE, "the largest |x| "
				"over all ranks is %g: no ternary scale for it",
				global);
		if (global == 0.0f) {
			/* Every rank sees it: nothing to send. */
			memset(buf, 0, n * sizeof(*buf));
			return 0;
		}
		v.scale = global;
	}
	r = (struct tally_round){
		.type = TALLY_PT_SUM, .enc = enc,
		.src = ctx->stage, .dst = ctx->fixp, .n = n,
		.encode = tern ? tern_encode_chunk : sign_encode_chunk,
		.decode = tern ? tern_decode_chunk : sign_decode_chunk,
		.arg = &v,
	};
	return run(ctx, &r);
}

/*
 * randk: every rank gathers the same k = density n elements (indices
 * from the job's seed and the call, the same on every rank), sums them
 * as f32 through shared-scale fixed point, and scatters the sums back;
 * the other elements come back 0.
 */
static int
allreduce_randk(struct tally_ctx *ctx, float *buf, size_t n)
{
	uint64_t k = tally_randk_k(n, ctx->codec.density);
	uint64_t seed = tally_quant_seed(ctx->codec.seed, 0,
		ctx->codec_calls++);
	float *y;
	int rc;

	rc = grow_stage(ctx, (size_t)k * sizeof(float));
	if (rc != 0)
		return rc;
	y = (float *)(void *)ctx->stage;
	(void)tally_randk_gather(buf, y, 0, (size_t)k, n, seed);
	rc = tally_allreduce_f32(ctx, y, (size_t)k);
	if (rc != 0)
		return rc;
	memset(buf, 0, n * sizeof(*buf));
	(void)tally_randk_scatter(y, buf, 0, (size_t)k, n, seed, 1.0f);
	return 0;
}

int
tally_allreduce(struct tally_ctx *ctx, float *buf, size_t n)
{
	int rc;

	if (ctx == NULL)
		return -EINVAL;
	switch (ctx->codec.kind) {
	case TALLY_CODEC_FIXP:
		return tally_allreduce_f32(ctx, buf, n);
	case TALLY_CODEC_Q16:
	case TALLY_CODEC_Q8:
	case TALLY_CODEC_Q4:
		rc = check_call(ctx, buf, n);
		if (rc <= 0)
			return rc;
		return allreduce_quant(ctx, buf, n,
			ctx->codec.kind == TALLY_CODEC_Q16 ? 16 :
			ctx->codec.kind == TALLY_CODEC_Q8 ? 8 : 4);
	case TALLY_CODEC_TERNARY:
	case TALLY_CODEC_SIGN:
		rc = check_call(ctx, buf, n);
		if (rc <= 0)
			return rc;
		return allreduce_vote(ctx, buf, n,
			ctx->codec.kind == TALLY_CODEC_TERNARY);
	case TALLY_CODEC_RANDK:
		rc = check_call(ctx, buf, n);
		if (rc <= 0)
			return rc;
		return allreduce_randk(ctx, buf, n);
	case TALLY_CODEC_SPARSE: {
		size_t nb = TALLY_SPARSE_NBLOCKS(n);
		float global, mine = 0.0f, *bmax;

		rc = check_call(ctx, buf, n);
		if (rc <= 0)
			return rc;
		if (ctx->elems < TALLY_SPARSE_BLOCK)
			return tally_ctx_fail(ctx, -EINVAL, "sparse sends "
				"blocks of %u elements: elems must be at least "
				"that, not %u", TALLY_SPARSE_BLOCK, ctx->elems);
		if (n > TALLY_SPARSE_N_MAX)
			return tally_ctx_fail(ctx, -EINVAL, "%zu elements: "
				"too many for 32-bit block indices", n);
		rc = grow_fixp(ctx, n);
		if (rc != 0)
			return rc;
		bmax = malloc(nb * sizeof(*bmax));
		if (bmax == NULL)
			return tally_ctx_fail(ctx, -ENOMEM, "out of memory for "
				"%zu block maxima", nb);
		/* One pass: the blocks' maxima, and so the tensor's. */
		tally_sparse_block_max(buf, n, bmax);
		for (size_t b = 0; b < nb; b++)
			mine = bmax[b] > mine ? bmax[b] : mine;
		rc = max_round(ctx, mine, &global);
		if (rc == 0)
			rc = tally_lib_allreduce_sparse(ctx, buf, n, global,
				bmax);
		if (rc != 0)
			ctx->broken = 1;
		free(bmax);
		return rc;
	}
	default:
		return tally_ctx_fail(ctx, -EOPNOTSUPP, "codec %s is not "
			"applied by this libtally yet",
			tally_codec_name(ctx->codec.kind));
	}
}

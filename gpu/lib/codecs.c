/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tally_allreduce() and tally_allreduce_state(): the job's codec applied
 * around the dataplane's integer sums. The quantizers and TernGrad take
 * a MAX round for the shared scale, then a sum of narrow integers, each
 * chunk encoded just before it goes and decoded as soon as it is back;
 * sign votes need no scale; 2-bit sums ternary values against a shared
 * threshold; random-k and block-sparse go through fixed point.
 *
 * With memory (struct tally_state): error feedback offers the codec
 * v = g + r and keeps r' = v - sent, where sent is what this rank's own
 * encoding decodes to (for the element-wise codecs, computed in the
 * encode hook from the bytes just encoded); 2-bit keeps its residual
 * itself; DGC's momentum correction accumulates u and v and takes the
 * selected blocks out of them; PowerSGD is in powersgd.c.
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

/* Elements of a residual update at a time (even, and a multiple of 8). */
#define SUB	256

/* The global max |x| over all ranks. */
static int
global_absmax(struct tally_ctx *ctx, const float *buf, size_t n, float *out)
{
	return tally_lib_max_round(ctx, tally_fixp_absmax(buf, n), out);
}

/*
 * Error feedback's start: buf = g + r, the v the codec is offered. r is
 * left as it was: the encode hooks, or ef_keep(), make it v - sent.
 */
static void
ef_begin(const struct tally_state *st, float *buf, size_t n)
{
	if (st != NULL && st->resid != NULL)
		tally_ef_apply(buf, buf, st->resid, n);
}

/*
 * Nothing was sent (the scale round refused): r = v, so that this call's
 * gradient is not lost. Returns rc.
 */
static int
ef_keep(const struct tally_state *st, const float *buf, size_t n, int rc)
{
	if (st != NULL && st->resid != NULL)
		memcpy(st->resid, buf, n * sizeof(*buf));
	return rc;
}

/* What the quantizers' chunk hooks need (a round's arg). */
struct quant_call {
	float *buf;		/* the caller's floats, in and out */
	float *resid;		/* error feedback's r, or NULL */
	unsigned int bits;
	unsigned int levels;
	float scale;
	uint64_t seed;
	uint8_t res_enc;
};

/* The quantizers' decoders over bytes, as ef_resid() takes them. */
static void
dec_q16(const uint8_t *src, float *x, size_t n, float scale)
{
	tally_quant_decode_i16((const int16_t *)(const void *)src, x, n,
		scale);
}

static void
dec_q8(const uint8_t *src, float *x, size_t n, float scale)
{
	tally_quant_decode_i8((const int8_t *)src, x, n, scale);
}

/*
 * Error feedback's end for a chunk of count elements: r[i] = v[i] -
 * own[i], own being what this rank's encoding of the chunk (at src, in
 * enc, packed as the wire packs it) decodes to with dec at scale. A
 * little of own at a time, on the stack.
 */
static void
ef_resid(float *r, const float *v, const uint8_t *src, uint8_t enc,
	size_t count, float scale,
	void (*dec)(const uint8_t *src, float *x, size_t n, float scale))
{
	float own[SUB];

	for (size_t i = 0; i < count; i += SUB) {
		size_t m = count - i < SUB ? count - i : SUB;

		dec(src + tally_enc_payload_len(enc, i), own, m, scale);
		(void)tally_ef_update(r + i, v + i, own, m);
	}
}

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
	if (q->resid != NULL)
		ef_resid(q->resid + off, q->buf + off, dst, r->enc, count,
			q->scale, q->bits == 16 ? dec_q16 : q->bits == 8 ?
			dec_q8 : tally_quant_decode_i4);
}

/* Decodes the sums of elements [off, off + count) into the floats. */
static void
quant_decode_chunk(const struct tally_round *r, size_t off, size_t count,
	const void *res)
{
	const struct quant_call *q = r->arg;
	const uint8_t *src = res;

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
allreduce_quant(struct tally_ctx *ctx, struct tally_state *st, float *buf,
	size_t n, unsigned int bits)
{
	uint8_t enc = bits == 16 ? TALLY_ENC_I16 : bits == 8 ? TALLY_ENC_I8 :
		TALLY_ENC_I4;
	struct quant_call q = { .buf = buf, .bits = bits,
		.resid = st != NULL ? st->resid : NULL,
		.res_enc = (uint8_t)tally_enc_result(enc, ctx->narrow) };
	struct tally_round r;
	float global;
	int rc;

	rc = tally_lib_quant_levels(ctx, bits, enc, &q.levels);
	if (rc != 0)
		return rc;
	/* Buffers first, so that a failure leaves the slots in step. */
	rc = tally_lib_grow_stage(ctx, tally_enc_payload_len(enc, n));
	if (rc == 0)
		rc = tally_lib_grow_fixp(ctx, n); /* sums: at most 4 B each */
	if (rc != 0)
		return rc;
	q.seed = tally_quant_seed(ctx->codec.seed, ctx->rank,
		ctx->codec_calls++);
	ef_begin(st, buf, n);
	rc = global_absmax(ctx, buf, n, &global);
	if (rc != 0)
		return rc;
	if (tally_quant_scale(global, q.levels, &q.scale) != 0)
		return ef_keep(st, buf, n, tally_ctx_fail(ctx, -ERANGE, "the "
			"largest |x| over all ranks is %g: no quantization "
			"scale for it", global));
	r = (struct tally_round){
		.type = TALLY_PT_SUM, .enc = enc,
		.src = ctx->stage, .dst = ctx->fixp, .n = n,
		.encode = quant_encode_chunk, .decode = quant_decode_chunk,
		.arg = &q,
	};
	return tally_lib_run(ctx, &r);
}

/* The ternary, 2-bit and sign codecs' chunk hooks: what they need. */
struct vote_call {
	float *buf;		/* the caller's floats, in and out */
	float *resid;		/* error feedback's r (2-bit: its own), or NULL */
	float scale;		/* of the sums */
	float own_scale;	/* sign with error feedback: of this rank's
				 * bits, mean |v| */
	int exp;		/* 2-bit: the threshold's exponent */
	uint64_t seed;
	uint8_t res_enc;
	unsigned int world;
};

static void
tern_encode_chunk(const struct tally_round *r, size_t off, size_t count)
{
	const struct vote_call *v = r->arg;
	uint8_t *dst = (uint8_t *)r->src + off / 2;

	/* The scale was checked positive and finite before the round. */
	(void)tally_tern_encode_i4(v->buf + off, dst, count, v->scale, v->seed,
		off);
	if (v->resid != NULL)
		ef_resid(v->resid + off, v->buf + off, dst, TALLY_ENC_I4, count,
			v->scale, tally_tern_decode_i4);
}

/* 2-bit: v = g + r, q against the threshold, r = v - q t, all at once. */
static void
twobit_encode_chunk(const struct tally_round *r, size_t off, size_t count)
{
	const struct vote_call *v = r->arg;

	tally_2bit_encode_i4(v->resid + off, v->buf + off,
		(uint8_t *)r->src + off / 2, count, v->exp);
}

static void
tern_decode_chunk(const struct tally_round *r, size_t off, size_t count,
	const void *res)
{
	const struct vote_call *v = r->arg;
	const uint8_t *src = res;

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
	uint8_t *dst = (uint8_t *)r->src + off / 8;

	tally_sign_encode(v->buf + off, dst, count);
	if (v->resid != NULL)
		ef_resid(v->resid + off, v->buf + off, dst, TALLY_ENC_SIGN,
			count, v->own_scale, tally_sign_decode_bits);
}

static void
sign_decode_chunk(const struct tally_round *r, size_t off, size_t count,
	const void *res)
{
	const struct vote_call *v = r->arg;
	const uint8_t *src = res;

	if (v->res_enc == TALLY_ENC_I8)
		tally_sign_decode_votes((const int8_t *)src, v->buf + off,
			count, v->world, v->scale);
	else
		tally_sign_decode_bits(src, v->buf + off, count, v->scale);
}

/*
 * Mean |x| over x[0..n), NaN as 0 and the sum in double, element order:
 * the scale of this rank's sign bits under error feedback (EF-signSGD's
 * compressor sends sign(v) * mean |v|). Capped to FLT_MAX.
 */
static float
mean_abs(const float *x, size_t n)
{
	double s = 0;

	for (size_t i = 0; i < n; i++)
		s += x[i] == x[i] ? fabs((double)x[i]) : 0.0;
	s /= (double)n;
	return s < 3.4028234663852886e38 ? (float)s : 3.4028234663852886e38f;
}

enum vote_kind {
	VOTE_TERNARY,
	VOTE_2BIT,
	VOTE_SIGN,
};

/* The scale of a vote codec, before its sum round. */
static int
vote_scale(struct tally_ctx *ctx, struct tally_state *st, float *buf,
	size_t n, enum vote_kind kind, struct vote_call *v)
{
	float global;
	int rc;

	switch (kind) {
	case VOTE_2BIT:
		/* The parser checked it: a positive normal float. */
		(void)tally_2bit_exponent(ctx->codec.threshold, &v->exp);
		v->scale = tally_2bit_threshold(v->exp);
		return 0;
	case VOTE_SIGN:
		if (v->resid != NULL)
			v->own_scale = mean_abs(buf, n);
		return 0;
	case VOTE_TERNARY:
		rc = global_absmax(ctx, buf, n, &global);
		if (rc != 0)
			return rc;
		if (!(global < INFINITY))
			return ef_keep(st, buf, n, tally_ctx_fail(ctx, -ERANGE,
				"the largest |x| over all ranks is %g: no "
				"ternary scale for it", global));
		v->scale = global;
		return 0;
	}
	return -EINVAL;
}

/*
 * ternary (TernGrad): a MAX round for the shared scale s, then every
 * element's stochastic -1/0/+1 as i4, summed by the dataplane, decoded as
 * sum * s. 2bit (MXNet): -1/0/+1 against the shared threshold t = 2^e,
 * with the residual, summed and decoded as sum * t. sign (signSGD):
 * every element's sign bit, counted by the dataplane, decoded to +1, -1
 * (or 0 on a wide tie).
 */
static int
allreduce_vote(struct tally_ctx *ctx, struct tally_state *st, float *buf,
	size_t n, enum vote_kind kind)
{
	uint8_t enc = kind == VOTE_SIGN ? TALLY_ENC_SIGN : TALLY_ENC_I4;
	struct vote_call v = { .buf = buf, .scale = 1.0f,
		.resid = st != NULL ? st->resid : NULL,
		.res_enc = (uint8_t)tally_enc_result(enc, ctx->narrow),
		.world = ctx->world };
	static const char *const names[] = { "ternary", "2bit", "sign" };
	struct tally_round r;
	int rc;

	if (ctx->elems % 8 != 0)
		return tally_ctx_fail(ctx, -EINVAL, "%s needs the context's "
			"elems to be a multiple of 8, not %u", names[kind],
			ctx->elems);
	if (kind != VOTE_SIGN && ctx->narrow && ctx->world > 7)
		return tally_ctx_fail(ctx, -ERANGE, "%s with narrow (i4) sums "
			"holds at most 7 ranks, not %u", names[kind],
			ctx->world);
	rc = tally_lib_grow_stage(ctx, tally_enc_payload_len(enc, n));
	if (rc == 0)
		rc = tally_lib_grow_fixp(ctx, n);
	if (rc != 0)
		return rc;
	v.seed = tally_quant_seed(ctx->codec.seed, ctx->rank,
		ctx->codec_calls++);
	/* 2-bit adds its residual itself, in the encode hook. */
	if (kind != VOTE_2BIT)
		ef_begin(st, buf, n);
	rc = vote_scale(ctx, st, buf, n, kind, &v);
	if (rc != 0)
		return rc;
	if (kind == VOTE_TERNARY && v.scale == 0.0f) {
		/* Every rank sees it: nothing to send, nothing left over. */
		if (v.resid != NULL)
			memset(v.resid, 0, n * sizeof(*buf));
		memset(buf, 0, n * sizeof(*buf));
		return 0;
	}
	r = (struct tally_round){
		.type = TALLY_PT_SUM, .enc = enc,
		.src = ctx->stage, .dst = ctx->fixp, .n = n,
		.encode = kind == VOTE_TERNARY ? tern_encode_chunk :
			kind == VOTE_2BIT ? twobit_encode_chunk :
			sign_encode_chunk,
		.decode = kind == VOTE_SIGN ? sign_decode_chunk :
			tern_decode_chunk,
		.arg = &v,
	};
	return tally_lib_run(ctx, &r);
}

/*
 * r[index j] = v[index j] - (v[index j] through fixed point at e), for
 * the k gathered indices: what random-k with error feedback leaves of
 * the values it sent (r holds v everywhere on entry).
 */
static void
randk_resid(float *r, size_t n, uint64_t k, uint64_t seed, int e)
{
	float v[SUB], own[SUB];
	int32_t q[SUB];

	for (uint64_t j = 0; j < k; j += SUB) {
		size_t m = k - j < SUB ? (size_t)(k - j) : SUB;

		(void)tally_randk_gather(r, v, j, m, n, seed);
		tally_fixp_encode(v, q, m, e);
		tally_fixp_decode(q, own, m, e);
		(void)tally_ef_update(v, v, own, m);
		(void)tally_randk_scatter(v, r, j, m, n, seed, 1.0f);
	}
}

/*
 * randk: every rank gathers the same k = density n elements (indices
 * from the job's seed and the call, the same on every rank), sums them
 * as f32 through shared-scale fixed point, and scatters the sums back;
 * the other elements come back 0.
 */
static int
allreduce_randk(struct tally_ctx *ctx, struct tally_state *st, float *buf,
	size_t n)
{
	uint64_t k = tally_randk_k(n, ctx->codec.density);
	uint64_t seed = tally_quant_seed(ctx->codec.seed, 0,
		ctx->codec_calls++);
	float *y;
	int rc, e;

	rc = tally_lib_grow_stage(ctx, (size_t)k * sizeof(float));
	if (rc != 0)
		return rc;
	y = (float *)(void *)ctx->stage;
	ef_begin(st, buf, n);
	(void)tally_randk_gather(buf, y, 0, (size_t)k, n, seed);
	rc = tally_lib_fixp_sum(ctx, y, (size_t)k, &e);
	if (rc == -ERANGE)
		return ef_keep(st, buf, n, rc);
	if (rc != 0)
		return rc;
	if (st != NULL && st->resid != NULL) {
		memcpy(st->resid, buf, n * sizeof(*buf));
		randk_resid(st->resid, n, k, seed, e);
	}
	memset(buf, 0, n * sizeof(*buf));
	(void)tally_randk_scatter(y, buf, 0, (size_t)k, n, seed, 1.0f);
	return 0;
}

/*
 * sparse: the blocks' maxima, then the block streams (sparse.c), which
 * start with the scale round. Error feedback offers v = g + r and keeps
 * v but for what went; DGC's momentum correction offers its accumulation
 * v (u = m u + g, v = v + u) and takes the sent blocks out of u and v.
 */
static int
allreduce_sparse(struct tally_ctx *ctx, struct tally_state *st, float *buf,
	size_t n)
{
	size_t nb = TALLY_SPARSE_NBLOCKS(n);
	float *bmax, *resid = NULL, *mom = NULL;
	int rc;

	if (ctx->elems < TALLY_SPARSE_BLOCK)
		return tally_ctx_fail(ctx, -EINVAL, "sparse sends blocks of "
			"%u elements: elems must be at least that, not %u",
			TALLY_SPARSE_BLOCK, ctx->elems);
	if (n > TALLY_SPARSE_N_MAX)
		return tally_ctx_fail(ctx, -EINVAL, "%zu elements: too many "
			"for 32-bit block indices", n);
	rc = tally_lib_grow_fixp(ctx, n);
	if (rc != 0)
		return rc;
	bmax = malloc(nb * sizeof(*bmax));
	if (bmax == NULL)
		return tally_ctx_fail(ctx, -ENOMEM, "out of memory for %zu "
			"block maxima", nb);
	if (st != NULL && st->mom != NULL) {
		tally_dgc_accumulate(st->mom, st->resid, buf, n,
			(float)ctx->codec.momentum);
		memcpy(buf, st->resid, n * sizeof(*buf));
		resid = st->resid;
		mom = st->mom;
	} else if (st != NULL && st->resid != NULL) {
		ef_begin(st, buf, n);
		(void)ef_keep(st, buf, n, 0);
		resid = st->resid;
	}
	tally_sparse_block_max(buf, n, bmax);
	rc = tally_lib_allreduce_sparse(ctx, buf, n, bmax, resid, mom);
	if (rc != 0 && rc != -ERANGE)
		ctx->broken = 1;
	free(bmax);
	return rc;
}

/* The codec of ctx on buf, with st's memory (NULL: none). */
static int
apply(struct tally_ctx *ctx, struct tally_state *st, float *buf, size_t n)
{
	switch (ctx->codec.kind) {
	case TALLY_CODEC_FIXP:
		return tally_allreduce_f32(ctx, buf, n);
	case TALLY_CODEC_Q16:
		return allreduce_quant(ctx, st, buf, n, 16);
	case TALLY_CODEC_Q8:
		return allreduce_quant(ctx, st, buf, n, 8);
	case TALLY_CODEC_Q4:
		return allreduce_quant(ctx, st, buf, n, 4);
	case TALLY_CODEC_TERNARY:
		return allreduce_vote(ctx, st, buf, n, VOTE_TERNARY);
	case TALLY_CODEC_2BIT:
		return allreduce_vote(ctx, st, buf, n, VOTE_2BIT);
	case TALLY_CODEC_SIGN:
		return allreduce_vote(ctx, st, buf, n, VOTE_SIGN);
	case TALLY_CODEC_RANDK:
		return allreduce_randk(ctx, st, buf, n);
	case TALLY_CODEC_SPARSE:
		return allreduce_sparse(ctx, st, buf, n);
	case TALLY_CODEC_POWERSGD:
		return tally_lib_allreduce_powersgd(ctx, st, buf, n);
	default:
		return tally_ctx_fail(ctx, -EOPNOTSUPP, "codec %s is not "
			"applied by this libtally yet",
			tally_codec_name(ctx->codec.kind));
	}
}

int
tally_allreduce(struct tally_ctx *ctx, float *buf, size_t n)
{
	int rc;

	if (ctx == NULL)
		return -EINVAL;
	if (ctx->codec.kind == TALLY_CODEC_FIXP)
		return tally_allreduce_f32(ctx, buf, n);
	rc = tally_lib_check_call(ctx, buf, n);
	if (rc <= 0)
		return rc;
	if (!tally_codec_has_memory(&ctx->codec))
		return apply(ctx, NULL, buf, n);
	/* The context's own memory, for the one tensor it is called with. */
	if (ctx->state != NULL && ctx->state->n != n) {
		tally_state_free(ctx->state);
		ctx->state = NULL;
	}
	if (ctx->state == NULL) {
		rc = tally_state_new(ctx, n, &ctx->state);
		if (rc != 0)
			return rc;
	}
	return apply(ctx, ctx->state, buf, n);
}

int
tally_allreduce_state(struct tally_ctx *ctx, struct tally_state *st,
	float *buf, size_t n)
{
	int rc;

	if (ctx == NULL)
		return -EINVAL;
	rc = tally_lib_check_state(ctx, st, n);
	if (rc != 0)
		return rc;
	if (st->dev != NULL && tally_codec_has_memory(&st->codec))
		return tally_ctx_fail(ctx, -EINVAL, "the state is in device "
			"memory (tally_state_new_cuda()): reduce the tensor "
			"with tally_allreduce_state_cuda()");
	if (ctx->codec.kind == TALLY_CODEC_FIXP)
		return tally_allreduce_f32(ctx, buf, n);
	rc = tally_lib_check_call(ctx, buf, n);
	if (rc <= 0)
		return rc;
	return apply(ctx, tally_codec_has_memory(&st->codec) ? st : NULL, buf,
		n);
}

int
tally_allreduce_mean(struct tally_ctx *ctx, struct tally_state *st,
	float *buf, size_t n)
{
	float inv;
	int rc, e;

	if (ctx == NULL)
		return -EINVAL;
	if (st != NULL) {
		rc = tally_lib_check_state(ctx, st, n);
		if (rc != 0)
			return rc;
	}
	if (ctx->codec.kind == TALLY_CODEC_FIXP &&
			(ctx->world & (ctx->world - 1)) == 0) {
		rc = tally_lib_check_call(ctx, buf, n);
		return rc <= 0 ? rc :
			tally_lib_fixp_sum_div(ctx, buf, n, ctx->world, &e);
	}
	/* A product, not a division: the bits the GPU path gets too. */
	inv = 1.0f / (float)ctx->world;
	if (buf != NULL)
		for (size_t i = 0; i < n; i++)
			buf[i] *= inv;
	return st != NULL ? tally_allreduce_state(ctx, st, buf, n) :
		tally_allreduce(ctx, buf, n);
}

int
tally_lib_quant_levels(struct tally_ctx *ctx, unsigned int bits, uint8_t enc,
	unsigned int *levels)
{
	int rc = tally_quant_levels(bits, ctx->world, ctx->narrow, levels);

	if (rc != 0)
		return tally_ctx_fail(ctx, rc, "q%u %s results for %u ranks: "
			"no quantization level fits", bits, ctx->narrow ?
			"narrow" : "wide", ctx->world);
	if (enc == TALLY_ENC_I4 && ctx->elems % 8 != 0)
		return tally_ctx_fail(ctx, -EINVAL, "q4 needs the context's "
			"elems to be a multiple of 8, not %u", ctx->elems);
	return 0;
}

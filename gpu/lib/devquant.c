/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The element-wise codecs on a device: q16, q8, q4 (stochastic integers
 * with a shared scale) and the votes (ternary, 2-bit, sign), as their
 * host versions in codecs.c do them, kernel for function: the same
 * checks, the same seed (the context's call count), error feedback's
 * v = g + r before the scale round, the same scale, and each segment
 * encoded with the draws of its elements' own offsets, so every rank
 * gets the host path's bits. Error feedback's residual r = v - own,
 * where own is this rank's encoding decoded, is computed a segment at a
 * time right after the segment's encoding, from the staged bytes, into
 * device scratch (TALLY_DEV_SCR_OWN).
 */
#include <errno.h>
#include <math.h>

#include <tally/feedback.h>
#include <tally/quant.h>

#include "dev.h"

/* What the segment hooks need (a job's arg); pointers are device ones. */
struct dq_call {
	float *buf;		/* the tensor, in and out */
	float *resid;		/* error feedback's r (2-bit: its own), or NULL */
	float *own;		/* scratch: own encoding decoded (with resid) */
	unsigned int bits;	/* quantizers: 16, 8, 4; votes: 0 */
	unsigned int levels;
	enum tally_codec_kind kind;
	float scale;
	int exp;		/* 2-bit: the threshold's exponent */
	uint64_t seed;
	uint8_t res_enc;
	unsigned int world;
};

/* Error feedback's end for a segment: r = v - own, own decoded from tx. */
static int
own_resid(const struct tally_stage_job *j, const struct dq_call *q,
	size_t off, size_t count, const void *tx)
{
	const struct tally_dev_ops *o = j->ops;
	int rc;

	switch (q->bits) {
	case 16:
		rc = o->q_decode_i16(tx, q->own, count, q->scale, j->stream);
		break;
	case 8:
		rc = o->q_decode_i8(tx, q->own, count, q->scale, j->stream);
		break;
	case 4:
		rc = o->q_decode_i4(tx, q->own, count, q->scale, j->stream);
		break;
	default:	/* ternary */
		rc = o->tern_decode_i4(tx, q->own, count, q->scale, j->stream);
		break;
	}
	return rc != 0 ? rc : o->ef_update(q->resid + off, q->buf + off,
		q->own, count, NULL, j->stream);
}

static int
quant_encode(const struct tally_stage_job *j, size_t off, size_t count,
	void *tx)
{
	const struct dq_call *q = j->arg;
	const struct tally_dev_ops *o = j->ops;
	int rc;

	switch (q->bits) {
	case 16:
		rc = o->q16_encode(q->buf + off, tx, count, q->scale,
			q->levels, q->seed, off, j->stream);
		break;
	case 8:
		rc = o->q8_encode(q->buf + off, tx, count, q->scale,
			q->levels, q->seed, off, j->stream);
		break;
	default:
		rc = o->q4_encode(q->buf + off, tx, count, q->scale,
			q->levels, q->seed, off, j->stream);
		break;
	}
	if (rc == 0 && q->resid != NULL)
		rc = own_resid(j, q, off, count, tx);
	return rc;
}

static int
quant_decode(const struct tally_stage_job *j, size_t off, size_t count,
	const void *rx)
{
	const struct dq_call *q = j->arg;
	const struct tally_dev_ops *o = j->ops;

	switch (q->res_enc) {
	case TALLY_ENC_I32:
		return o->q_decode_i32(rx, q->buf + off, count, q->scale,
			j->stream);
	case TALLY_ENC_I16:
		return o->q_decode_i16(rx, q->buf + off, count, q->scale,
			j->stream);
	case TALLY_ENC_I8:
		return o->q_decode_i8(rx, q->buf + off, count, q->scale,
			j->stream);
	default:
		return o->q_decode_i4(rx, q->buf + off, count, q->scale,
			j->stream);
	}
}

/* Error feedback's start on the device: buf = g + r. */
static int
ef_begin(struct tally_ctx *ctx, const struct tally_state *st, float *d_buf,
	size_t n, void *stream)
{
	int rc;

	if (st == NULL || st->resid == NULL)
		return 0;
	rc = ctx->dev->ops->ef_apply(d_buf, d_buf, st->resid, n, stream);
	return rc != 0 ? tally_lib_dev_fail(ctx, rc, "error feedback") : 0;
}

/* The scratch error feedback decodes a segment's own encoding into. */
static int
own_scratch(struct tally_ctx *ctx, struct dq_call *q)
{
	int rc;

	if (q->resid == NULL)
		return 0;
	rc = tally_lib_dev_scratch(ctx, TALLY_DEV_SCR_OWN,
		ctx->dev->seg * sizeof(float));
	q->own = ctx->dev->scratch[TALLY_DEV_SCR_OWN];
	return rc;
}

int
tally_lib_dev_quant(struct tally_ctx *ctx, struct tally_state *st,
	float *d_buf, size_t n, void *stream, unsigned int bits)
{
	uint8_t enc = bits == 16 ? TALLY_ENC_I16 : bits == 8 ? TALLY_ENC_I8 :
		TALLY_ENC_I4;
	struct dq_call q = { .buf = d_buf, .bits = bits,
		.resid = st != NULL ? st->resid : NULL,
		.res_enc = (uint8_t)tally_enc_result(enc, ctx->narrow) };
	struct tally_stage_job j = { .enc = enc, .n = n, .stream = stream,
		.encode = quant_encode, .decode = quant_decode,
		.ops = ctx->dev->ops, .arg = &q };
	float global;
	int rc;

	rc = tally_lib_quant_levels(ctx, bits, enc, &q.levels);
	if (rc != 0)
		return rc;
	rc = own_scratch(ctx, &q);
	if (rc != 0)
		return rc;
	q.seed = tally_quant_seed(ctx->codec.seed, ctx->rank,
		ctx->codec_calls++);
	rc = ef_begin(ctx, st, d_buf, n, stream);
	if (rc == 0)
		rc = tally_lib_dev_absmax(ctx, d_buf, n, stream, &global);
	if (rc != 0)
		return rc;
	if (tally_quant_scale(global, q.levels, &q.scale) != 0)
		return tally_lib_dev_keep(ctx, st != NULL ? st->resid : NULL,
			d_buf, n, stream, tally_ctx_fail(ctx,
			-ERANGE, "the largest |x| over all ranks is %g: no "
			"quantization scale for it", global));
	return tally_lib_stage_run(ctx, &j);
}

static int
vote_encode(const struct tally_stage_job *j, size_t off, size_t count,
	void *tx)
{
	const struct dq_call *v = j->arg;
	const struct tally_dev_ops *o = j->ops;
	int rc;

	switch (v->kind) {
	case TALLY_CODEC_TERNARY:
		rc = o->tern_encode_i4(v->buf + off, tx, count, v->scale,
			v->seed, off, j->stream);
		if (rc == 0 && v->resid != NULL)
			rc = own_resid(j, v, off, count, tx);
		return rc;
	case TALLY_CODEC_2BIT:
		return o->twobit_encode_i4(v->resid + off, v->buf + off, tx,
			count, v->exp, j->stream);
	default:
		return o->sign_encode(v->buf + off, tx, count, j->stream);
	}
}

static int
vote_decode(const struct tally_stage_job *j, size_t off, size_t count,
	const void *rx)
{
	const struct dq_call *v = j->arg;
	const struct tally_dev_ops *o = j->ops;

	if (v->kind == TALLY_CODEC_SIGN)
		return v->res_enc == TALLY_ENC_I8 ?
			o->sign_decode_votes(rx, v->buf + off, count, v->world,
				v->scale, j->stream) :
			o->sign_decode_bits(rx, v->buf + off, count, v->scale,
				j->stream);
	return v->res_enc == TALLY_ENC_I32 ?
		o->tern_decode_i32(rx, v->buf + off, count, v->scale,
			j->stream) :
		o->tern_decode_i4(rx, v->buf + off, count, v->scale,
			j->stream);
}

/* The vote codec's scale before its sum round (sign: 1, no EF here). */
static int
vote_scale(struct tally_ctx *ctx, struct tally_state *st, float *d_buf,
	size_t n, void *stream, struct dq_call *v)
{
	float global;
	int rc;

	if (v->kind == TALLY_CODEC_2BIT) {
		/* The parser checked it: a positive normal float. */
		(void)tally_2bit_exponent(ctx->codec.threshold, &v->exp);
		v->scale = tally_2bit_threshold(v->exp);
		return 0;
	}
	if (v->kind == TALLY_CODEC_SIGN)
		return 0;
	rc = tally_lib_dev_absmax(ctx, d_buf, n, stream, &global);
	if (rc != 0)
		return rc;
	if (!(global < INFINITY))
		return tally_lib_dev_keep(ctx, st != NULL ? st->resid : NULL,
			d_buf, n, stream, tally_ctx_fail(ctx,
			-ERANGE, "the largest |x| over all ranks is %g: no "
			"ternary scale for it", global));
	v->scale = global;
	return 0;
}

/* Ternary with a zero scale: nothing to send, nothing left over. */
static int
vote_zero(struct tally_ctx *ctx, const struct dq_call *v, size_t n,
	void *stream)
{
	const struct tally_dev_ops *o = ctx->dev->ops;
	int rc = 0;

	if (v->resid != NULL)
		rc = o->zero(v->resid, n * sizeof(float), stream);
	if (rc == 0)
		rc = o->zero(v->buf, n * sizeof(float), stream);
	return rc != 0 ? tally_lib_dev_fail(ctx, rc, "zeroing") : 0;
}

int
tally_lib_dev_vote(struct tally_ctx *ctx, struct tally_state *st,
	float *d_buf, size_t n, void *stream, enum tally_codec_kind kind)
{
	uint8_t enc = kind == TALLY_CODEC_SIGN ? TALLY_ENC_SIGN : TALLY_ENC_I4;
	struct dq_call v = { .buf = d_buf, .kind = kind, .scale = 1.0f,
		.resid = st != NULL ? st->resid : NULL,
		.res_enc = (uint8_t)tally_enc_result(enc, ctx->narrow),
		.world = ctx->world };
	struct tally_stage_job j = { .enc = enc, .n = n, .stream = stream,
		.encode = vote_encode, .decode = vote_decode,
		.ops = ctx->dev->ops, .arg = &v };
	int rc;

	if (ctx->elems % 8 != 0)
		return tally_ctx_fail(ctx, -EINVAL, "%s needs the context's "
			"elems to be a multiple of 8, not %u",
			tally_codec_name(kind), ctx->elems);
	if (kind != TALLY_CODEC_SIGN && ctx->narrow && ctx->world > 7)
		return tally_ctx_fail(ctx, -ERANGE, "%s with narrow (i4) sums "
			"holds at most 7 ranks, not %u",
			tally_codec_name(kind), ctx->world);
	if (kind == TALLY_CODEC_TERNARY && (rc = own_scratch(ctx, &v)) != 0)
		return rc;
	v.seed = tally_quant_seed(ctx->codec.seed, ctx->rank,
		ctx->codec_calls++);
	/* 2-bit adds its residual itself, in the encoding kernel. */
	rc = kind != TALLY_CODEC_2BIT ? ef_begin(ctx, st, d_buf, n, stream) : 0;
	if (rc == 0)
		rc = vote_scale(ctx, st, d_buf, n, stream, &v);
	if (rc != 0)
		return rc;
	if (kind == TALLY_CODEC_TERNARY && v.scale == 0.0f)
		return vote_zero(ctx, &v, n, stream);
	return tally_lib_stage_run(ctx, &j);
}

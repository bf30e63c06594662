/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The f32 reduce-scatter of a q16, q8 or q4 job (coll.c's
 * tally_reduce_scatter() sends it here): the job's codec as
 * tally_allreduce() applies it (codecs.c), the same scale round, levels,
 * seeds and error feedback, but SCATTER rounds, so that tally-dp sums
 * the narrow integers undecoded and only a shard's owner gets its sums
 * (wide or narrow, as the job is), decoded once. Every element's draw
 * depends on its global index alone, so rank r's shard is the very bits
 * of shard r of a tally_allreduce() of the same tensors.
 *
 * q4 packs two elements a byte and a chunk goes straight from the
 * staging buffer, so a q4 shard of odd length is carried on the wire as
 * count + 1 elements, the last a 0 nibble nobody decodes: every chunk
 * then starts on a byte (docs/collectives.md, "Codecs").
 */
#include <errno.h>

#include <tally/feedback.h>
#include <tally/fixp.h>
#include <tally/quant.h>

#include "ctx.h"

/* Elements of a residual update at a time (a multiple of 8). */
#define SUB	256

/* What the chunk hooks need (the round's arg). */
struct rsq_call {
	const float *v;		/* the world x count floats offered */
	float *resid;		/* error feedback's r, or NULL */
	float *dst;		/* the caller's recv (count elements) */
	size_t count;		/* a shard's elements */
	size_t vcount;		/* a shard's elements on the wire */
	size_t base;		/* this rank's shard's first wire element */
	unsigned int bits;
	unsigned int levels;
	float scale;
	uint64_t seed;
	uint8_t enc;
	uint8_t res_enc;
};

unsigned int
tally_lib_quant_bits(const struct tally_codec *codec)
{
	switch (codec->kind) {
	case TALLY_CODEC_Q16:
		return 16;
	case TALLY_CODEC_Q8:
		return 8;
	case TALLY_CODEC_Q4:
		return 4;
	default:
		return 0;
	}
}

/* Encodes m floats at x (global index g on) into q, packed in c->enc. */
static void
rsq_encode_elems(const struct rsq_call *c, const float *x, uint8_t *q,
	size_t m, size_t g)
{
	switch (c->bits) {
	case 16:
		tally_quant_encode_i16(x, (int16_t *)(void *)q, m, c->scale,
			c->levels, c->seed, g);
		break;
	case 8:
		tally_quant_encode_i8(x, (int8_t *)q, m, c->scale, c->levels,
			c->seed, g);
		break;
	default:
		tally_quant_encode_i4(x, q, m, c->scale, c->levels, c->seed,
			g);
		break;
	}
}

/* Decodes m sums in enc (packed as the wire packs them) at q into x. */
static void
rsq_decode_elems(uint8_t enc, const uint8_t *q, float *x, size_t m,
	float scale)
{
	switch (enc) {
	case TALLY_ENC_I32:
		tally_quant_decode_i32((const int32_t *)(const void *)q, x, m,
			scale);
		break;
	case TALLY_ENC_I16:
		tally_quant_decode_i16((const int16_t *)(const void *)q, x, m,
			scale);
		break;
	case TALLY_ENC_I8:
		tally_quant_decode_i8((const int8_t *)q, x, m, scale);
		break;
	default:
		tally_quant_decode_i4(q, x, m, scale);
		break;
	}
}

/*
 * Error feedback's end for m elements: r = v - own, own being what this
 * rank's encoding at q decodes to (a little at a time, on the stack).
 * r may be v.
 */
static void
rsq_resid(const struct rsq_call *c, float *r, const float *v,
	const uint8_t *q, size_t m)
{
	float own[SUB];

	for (size_t i = 0; i < m; i += SUB) {
		size_t k = m - i < SUB ? m - i : SUB;

		rsq_decode_elems(c->enc, q + tally_enc_payload_len(c->enc, i),
			own, k, c->scale);
		(void)tally_ef_update(r + i, v + i, own, k);
	}
}

/* Of a chunk at wire element in within its shard, n long: real ones. */
static size_t
rsq_real(const struct rsq_call *c, size_t in, size_t n)
{
	if (in >= c->count)
		return 0;
	return c->count - in < n ? c->count - in : n;
}

/*
 * Encodes the chunk at wire element off, n long, into r->src: the
 * shard's real elements from global index g (a q4 pad stays a 0 nibble:
 * the encoder leaves an odd count's last high nibble 0).
 */
static void
rsq_encode_chunk(const struct tally_round *r, size_t off, size_t n)
{
	const struct rsq_call *c = r->arg;
	size_t in = off % c->vcount, m = rsq_real(c, in, n);
	size_t g = off / c->vcount * c->count + in;
	uint8_t *q = (uint8_t *)r->src + tally_enc_payload_len(c->enc, off);

	rsq_encode_elems(c, c->v + g, q, m, g);
	if (c->resid != NULL)
		rsq_resid(c, c->resid + g, c->v + g, q, m);
}

/* Decodes this rank's sums of the chunk at wire element off into dst. */
static void
rsq_decode_chunk(const struct tally_round *r, size_t off, size_t n,
	const void *res)
{
	const struct rsq_call *c = r->arg;
	size_t in = off - c->base;

	rsq_decode_elems(c->res_enc, res, c->dst + in, rsq_real(c, in, n),
		c->scale);
}

/*
 * The state a call with n elements uses when the caller gave none: the
 * context's own, for its one tensor, as tally_allreduce() keeps it
 * (shared with it: the same tensor's allreduces and reduce-scatters
 * carry one residual). NULL in *st for a codec without memory.
 */
static int
rsq_own_state(struct tally_ctx *ctx, size_t n, struct tally_state **st)
{
	int rc;

	*st = NULL;
	if (!tally_codec_has_memory(&ctx->codec))
		return 0;
	if (ctx->state != NULL && ctx->state->n != n) {
		tally_state_free(ctx->state);
		ctx->state = NULL;
	}
	if (ctx->state == NULL) {
		rc = tally_state_new(ctx, n, &ctx->state);
		if (rc != 0)
			return rc;
	}
	*st = ctx->state;
	return 0;
}

/*
 * The levels, the wire's shard length and the buffers of c (before any
 * round, so that a failure leaves the slots in step).
 */
static int
rsq_prepare(struct tally_ctx *ctx, struct rsq_call *c, size_t count)
{
	int rc;

	c->enc = c->bits == 16 ? TALLY_ENC_I16 : c->bits == 8 ?
		TALLY_ENC_I8 : TALLY_ENC_I4;
	c->res_enc = (uint8_t)tally_enc_result(c->enc, ctx->narrow);
	rc = tally_lib_quant_levels(ctx, c->bits, c->enc, &c->levels);
	if (rc != 0)
		return rc;
	c->count = count;
	c->vcount = count + (c->enc == TALLY_ENC_I4 && count % 2 != 0);
	if (c->vcount > UINT32_MAX / ctx->world)
		return tally_ctx_fail(ctx, -EINVAL, "%u x %zu elements: at "
			"most 2^32 - 1 in one call", ctx->world, c->vcount);
	c->base = c->vcount * ctx->rank;
	rc = tally_lib_grow_stage(ctx, tally_enc_payload_len(c->enc,
		c->vcount * ctx->world));
	if (rc == 0)	/* a shard's sums, at most 4 B each */
		rc = tally_lib_grow_fixp(ctx, c->vcount);
	return rc;
}

/*
 * The reduce-scatter of send (world x count floats, count > 0, checked)
 * through the job's q16/q8/q4 codec, this rank's shard into recv; st is
 * the tensor's codec memory (NULL: the context's own, when the codec
 * has any). Borrows send, recv and st.
 */
int
tally_lib_rs_quant(struct tally_ctx *ctx, struct tally_state *st,
	const float *send, float *recv, size_t count)
{
	struct rsq_call c = { .v = send, .dst = recv,
		.bits = tally_lib_quant_bits(&ctx->codec) };
	size_t n = count * ctx->world;
	struct tally_round r;
	float global;
	int rc;

	rc = rsq_prepare(ctx, &c, count);
	if (rc == 0 && st == NULL)
		rc = rsq_own_state(ctx, n, &st);
	if (rc != 0)
		return rc;
	c.seed = tally_quant_seed(ctx->codec.seed, ctx->rank,
		ctx->codec_calls++);
	if (st != NULL && st->resid != NULL) {
		/* v = g + r, kept in r; the encode hook makes r = v - sent. */
		tally_ef_apply(st->resid, send, st->resid, n);
		c.v = c.resid = st->resid;
	}
	rc = tally_lib_max_round(ctx, tally_fixp_absmax(c.v, n), &global);
	if (rc != 0)
		return rc;
	/* Nothing sent: r holds v, so this call's gradient is not lost. */
	if (tally_quant_scale(global, c.levels, &c.scale) != 0)
		return tally_ctx_fail(ctx, -ERANGE, "the largest |x| over all "
			"ranks is %g: no quantization scale for it", global);
	r = (struct tally_round){
		.type = TALLY_PT_SCATTER, .enc = c.enc,
		.src = ctx->stage, .dst = ctx->fixp, .n = c.vcount * ctx->world,
		.shard = c.vcount, .dst_base = c.base,
		.encode = rsq_encode_chunk, .decode = rsq_decode_chunk,
		.arg = &c,
	};
	return tally_lib_run(ctx, &r);
}

int
tally_reduce_scatter_state(struct tally_ctx *ctx, struct tally_state *st,
	const float *send, float *recv, size_t count)
{
	int rc;

	if (ctx == NULL)
		return -EINVAL;
	if (count > UINT32_MAX / ctx->world)
		return tally_ctx_fail(ctx, -EINVAL, "%u x %zu elements: at "
			"most 2^32 - 1 in one call", ctx->world, count);
	rc = tally_lib_check_state(ctx, st, count * ctx->world);
	if (rc != 0)
		return rc;
	if (st->dev != NULL && tally_codec_has_memory(&st->codec))
		return tally_ctx_fail(ctx, -EINVAL, "the state is in device "
			"memory (tally_state_new_cuda()): a reduce-scatter "
			"takes host memory");
	if (tally_lib_quant_bits(&ctx->codec) == 0)
		return tally_reduce_scatter(ctx, send, recv, count,
			TALLY_DT_F32);
	rc = tally_lib_check_call(ctx, send, count * ctx->world);
	if (rc <= 0)
		return rc;
	if (recv == NULL)
		return tally_ctx_fail(ctx, -EINVAL, "recv is NULL");
	return tally_lib_rs_quant(ctx, tally_codec_has_memory(&st->codec) ?
		st : NULL, send, recv, count);
}

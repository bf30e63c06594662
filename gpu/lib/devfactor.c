/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The codecs that reduce a smaller dense array on a device, through the
 * staged fixed-point sum (tally_lib_dev_fixp_sum()): random-k (the k
 * gathered values) and PowerSGD (the factors P and Q), as their host
 * versions in codecs.c and powersgd.c do them, kernel for function, so
 * every rank gets the host path's bits.
 */
#include <errno.h>

#include <tally/feedback.h>
#include <tally/quant.h>

#include "dev.h"

/* The scratch of random-k: the k gathered values, and with error
 * feedback the residual's k values, their fixed point and its decoding. */
static int
randk_scratch(struct tally_ctx *ctx, uint64_t k, int ef)
{
	size_t len = (size_t)k * sizeof(float);
	int rc;

	rc = tally_lib_dev_scratch(ctx, TALLY_DEV_SCR_Y, len);
	if (rc == 0 && ef)
		rc = tally_lib_dev_scratch(ctx, TALLY_DEV_SCR_V, len);
	if (rc == 0 && ef)
		rc = tally_lib_dev_scratch(ctx, TALLY_DEV_SCR_Q, len);
	if (rc == 0 && ef)
		rc = tally_lib_dev_scratch(ctx, TALLY_DEV_SCR_OWN, len);
	return rc;
}

/*
 * Random-k's residual: r = v everywhere, then at the k indices v minus
 * v through fixed point at e (what the sum carried of this rank's).
 */
static int
randk_resid(struct tally_ctx *ctx, float *r, const float *d_buf, size_t n,
	uint64_t k, uint64_t seed, int e, void *stream)
{
	const struct tally_dev_ops *o = ctx->dev->ops;
	float *v = ctx->dev->scratch[TALLY_DEV_SCR_V];
	float *own = ctx->dev->scratch[TALLY_DEV_SCR_OWN];
	int32_t *q = ctx->dev->scratch[TALLY_DEV_SCR_Q];
	int rc;

	rc = o->copy(r, d_buf, n * sizeof(float), stream);
	if (rc == 0)
		rc = o->randk_gather(r, v, 0, (size_t)k, n, seed, stream);
	if (rc == 0)
		rc = o->fixp_encode(v, q, (size_t)k, e, stream);
	if (rc == 0)
		rc = o->fixp_decode(q, own, (size_t)k, e, stream);
	if (rc == 0)
		rc = o->ef_update(v, v, own, (size_t)k, NULL, stream);
	if (rc == 0)
		rc = o->randk_scatter(v, r, 0, (size_t)k, n, seed, 1.0f,
			stream);
	return rc;
}

int
tally_lib_dev_randk(struct tally_ctx *ctx, struct tally_state *st,
	float *d_buf, size_t n, void *stream)
{
	const struct tally_dev_ops *o = ctx->dev->ops;
	uint64_t k = tally_randk_k(n, ctx->codec.density);
	uint64_t seed = tally_quant_seed(ctx->codec.seed, 0,
		ctx->codec_calls++);
	float *resid = st != NULL ? st->resid : NULL, *y;
	int rc, e;

	rc = randk_scratch(ctx, k, resid != NULL);
	if (rc != 0)
		return rc;
	y = ctx->dev->scratch[TALLY_DEV_SCR_Y];
	rc = resid != NULL ? o->ef_apply(d_buf, d_buf, resid, n, stream) : 0;
	if (rc == 0)
		rc = o->randk_gather(d_buf, y, 0, (size_t)k, n, seed, stream);
	if (rc != 0)
		return tally_lib_dev_fail(ctx, rc, "randk's gathering");
	rc = tally_lib_dev_fixp_sum(ctx, y, (size_t)k, stream, &e);
	if (rc == -ERANGE)
		return tally_lib_dev_keep(ctx, resid, d_buf, n, stream, rc);
	if (rc != 0)
		return rc;
	if (resid != NULL)
		rc = randk_resid(ctx, resid, d_buf, n, k, seed, e, stream);
	if (rc == 0)
		rc = o->zero(d_buf, n * sizeof(float), stream);
	if (rc == 0)
		rc = o->randk_scatter(y, d_buf, 0, (size_t)k, n, seed, 1.0f,
			stream);
	return rc != 0 ? tally_lib_dev_fail(ctx, rc, "randk's scattering") : 0;
}

/*
 * A PowerSGD sum refused or failed: with -ERANGE nothing of this call
 * reached the sum, so r = M (and the next call starts Q afresh).
 */
static int
psgd_keep(struct tally_ctx *ctx, struct tally_state *st, const float *d_m,
	size_t n, void *stream, int rc)
{
	return rc != -ERANGE ? rc :
		tally_lib_dev_keep(ctx, st->resid, d_m, n, stream, rc);
}

/* P = M Q (with error feedback's M = g + r; Q drawn on the first call). */
static int
psgd_p(struct tally_ctx *ctx, struct tally_state *st, float *d_buf,
	size_t n, void *stream)
{
	const struct tally_dev_ops *o = ctx->dev->ops;
	unsigned int rank = st->codec.rank;
	int rc = 0;

	if (st->resid != NULL)
		rc = o->ef_apply(d_buf, d_buf, st->resid, n, stream);
	if (rc == 0 && !st->q_ready)
		rc = o->psgd_init_q(st->q, st->cols, rank, st->codec.seed,
			stream);
	if (rc == 0)
		rc = o->psgd_p(d_buf, n, st->rows, st->cols, st->q, rank,
			st->p, stream);
	return rc != 0 ? tally_lib_dev_fail(ctx, rc, "powersgd's P") : 0;
}

/* P orthonormalized, this rank's Q = M^T P, and what it leaves over. */
static int
psgd_q(struct tally_ctx *ctx, struct tally_state *st, float *d_buf,
	size_t n, void *stream)
{
	const struct tally_dev_ops *o = ctx->dev->ops;
	unsigned int rank = st->codec.rank;
	int rc;

	rc = o->psgd_orthonormalize(st->p, st->rows, rank, stream);
	if (rc == 0)
		rc = o->psgd_q(d_buf, n, st->rows, st->cols, st->p, rank,
			st->q, stream);
	if (rc == 0 && st->resid != NULL)
		rc = o->psgd_decompress(st->p, st->q, st->rows, st->cols,
			rank, 1.0f, st->resid, n, stream);
	if (rc == 0 && st->resid != NULL)
		rc = o->ef_update(st->resid, d_buf, st->resid, n, NULL,
			stream);
	return rc != 0 ? tally_lib_dev_fail(ctx, rc, "powersgd's Q") : 0;
}

int
tally_lib_dev_powersgd(struct tally_ctx *ctx, struct tally_state *st,
	float *d_buf, size_t n, void *stream)
{
	uint32_t rank = st->codec.rank;
	size_t np = (size_t)st->rows * rank, nq = (size_t)st->cols * rank;
	int rc, e;

	ctx->codec_calls++;
	rc = psgd_p(ctx, st, d_buf, n, stream);
	if (rc != 0)
		return rc;
	rc = tally_lib_dev_fixp_sum(ctx, st->p, np, stream, &e);
	if (rc != 0)
		return psgd_keep(ctx, st, d_buf, n, stream, rc);
	rc = psgd_q(ctx, st, d_buf, n, stream);
	if (rc != 0)
		return rc;
	rc = tally_lib_dev_fixp_sum(ctx, st->q, nq, stream, &e);
	if (rc != 0) {
		st->q_ready = 0;
		return psgd_keep(ctx, st, d_buf, n, stream, rc);
	}
	st->q_ready = 1;
	rc = ctx->dev->ops->psgd_decompress(st->p, st->q, st->rows, st->cols,
		rank, 1.0f, d_buf, n, stream);
	return rc != 0 ? tally_lib_dev_fail(ctx, rc, "powersgd's result") : 0;
}

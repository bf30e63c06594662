/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A tensor's codec memory (struct tally_state): made for a context's
 * codec, with the buffers that codec keeps between allreduces, zeroed.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <tally/powersgd.h>

#include "ctx.h"

/* A zeroed array of n floats, or NULL. */
static float *
zeros(size_t n)
{
	return calloc(n, sizeof(float));
}

/* PowerSGD's shape and factors. Returns 0 or a negative errno. */
static int
powersgd_buffers(struct tally_ctx *ctx, struct tally_state *st)
{
	uint32_t rank = st->codec.rank;

	if (st->codec.rows > st->n)
		return tally_ctx_fail(ctx, -EINVAL, "powersgd rows %u: more "
			"than the tensor's %zu elements", st->codec.rows,
			st->n);
	if (tally_psgd_shape(st->n, st->codec.rows, &st->rows, &st->cols) != 0)
		return tally_ctx_fail(ctx, -EINVAL, "powersgd: no matrix view "
			"of %zu elements with %u rows", st->n, st->codec.rows);
	st->p = zeros((size_t)st->rows * rank);
	st->q = zeros((size_t)st->cols * rank);
	return st->p == NULL || st->q == NULL ? -ENOMEM : 0;
}

int
tally_state_new(struct tally_ctx *ctx, size_t n, struct tally_state **out)
{
	struct tally_state *st;
	int rc = 0;

	if (ctx == NULL)
		return -EINVAL;
	if (out == NULL)
		return tally_ctx_fail(ctx, -EINVAL, "out is NULL");
	*out = NULL;
	if (n == 0 || n > UINT32_MAX)
		return tally_ctx_fail(ctx, -EINVAL, "a state of %zu elements: "
			"1 .. 2^32 - 1", n);
	st = calloc(1, sizeof(*st));
	if (st == NULL)
		return tally_ctx_fail(ctx, -ENOMEM, "out of memory");
	memcpy(&st->codec, &ctx->codec, sizeof(st->codec));
	st->n = n;
	if (st->codec.kind == TALLY_CODEC_2BIT || st->codec.ef ||
			st->codec.momentum > 0) {
		st->resid = zeros(n);
		if (st->resid == NULL)
			rc = -ENOMEM;
	}
	if (rc == 0 && st->codec.momentum > 0 &&
			(st->mom = zeros(n)) == NULL)
		rc = -ENOMEM;
	if (rc == 0 && st->codec.kind == TALLY_CODEC_POWERSGD)
		rc = powersgd_buffers(ctx, st);
	if (rc != 0) {
		tally_state_free(st);
		return rc == -ENOMEM ? tally_ctx_fail(ctx, rc, "out of memory "
			"for the codec memory of %zu elements", n) : rc;
	}
	*out = st;
	return 0;
}

void
tally_state_free(struct tally_state *st)
{
	if (st == NULL)
		return;
	free(st->resid);
	free(st->mom);
	free(st->p);
	free(st->q);
	free(st);
}

/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A tensor's codec memory (struct tally_state): made for a context's
 * codec, with the buffers that codec keeps between allreduces, zeroed;
 * in host memory, or in a device's (tally_state_new_cuda()).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <tally/powersgd.h>

#include "dev.h"

/*
 * *out = a zeroed array of n floats: host memory (dev NULL) or dev's
 * device memory. Returns 0 or a negative errno.
 */
static int
zeros(const struct tally_dev_ops *dev, size_t n, float **out)
{
	void *p = NULL;
	int rc;

	if (dev == NULL) {
		*out = calloc(n, sizeof(float));
		return *out != NULL ? 0 : -ENOMEM;
	}
	rc = dev->dev_alloc(n * sizeof(float), &p);
	*out = rc == 0 ? p : NULL;
	return rc;
}

/*
 * PowerSGD's shape and factors: the matrix has rows rows (0: the job's
 * rows key, 0 there too: near-square). Returns 0 or a negative errno.
 */
static int
powersgd_buffers(struct tally_ctx *ctx, struct tally_state *st,
	uint32_t rows)
{
	uint32_t rank = st->codec.rank;
	int rc;

	if (rows == 0)
		rows = st->codec.rows;
	if (rows > st->n)
		return tally_ctx_fail(ctx, -EINVAL, "powersgd rows %u: more "
			"than the tensor's %zu elements", rows, st->n);
	if (tally_psgd_shape(st->n, rows, &st->rows, &st->cols) != 0)
		return tally_ctx_fail(ctx, -EINVAL, "powersgd: no matrix view "
			"of %zu elements with %u rows", st->n, rows);
	rc = zeros(st->dev, (size_t)st->rows * rank, &st->p);
	return rc != 0 ? rc : zeros(st->dev, (size_t)st->cols * rank, &st->q);
}

/*
 * The buffers st's codec keeps (st->codec, n and dev set); rows:
 * PowerSGD's matrix rows (0: the job's).
 */
static int
buffers(struct tally_ctx *ctx, struct tally_state *st, uint32_t rows)
{
	int rc = 0;

	if (st->codec.kind == TALLY_CODEC_2BIT || st->codec.ef ||
			st->codec.momentum > 0)
		rc = zeros(st->dev, st->n, &st->resid);
	if (rc == 0 && st->codec.momentum > 0)
		rc = zeros(st->dev, st->n, &st->mom);
	if (rc == 0 && st->codec.kind == TALLY_CODEC_POWERSGD)
		rc = powersgd_buffers(ctx, st, rows);
	return rc;
}

int
tally_lib_state_make(struct tally_ctx *ctx, const struct tally_dev_ops *dev,
	size_t n, uint32_t rows, struct tally_state **out)
{
	struct tally_state *st;
	int rc;

	if (ctx == NULL)
		return -EINVAL;
	if (out == NULL)
		return tally_ctx_fail(ctx, -EINVAL, "out is NULL");
	*out = NULL;
	if (n == 0 || n > UINT32_MAX)
		return tally_ctx_fail(ctx, -EINVAL, "a state of %zu elements: "
			"1 .. 2^32 - 1", n);
	if (rows != 0 && ctx->codec.kind != TALLY_CODEC_POWERSGD)
		return tally_ctx_fail(ctx, -EINVAL, "a state's rows (%u) shape "
			"a powersgd matrix; the job's codec has none", rows);
	st = calloc(1, sizeof(*st));
	if (st == NULL)
		return tally_ctx_fail(ctx, -ENOMEM, "out of memory");
	memcpy(&st->codec, &ctx->codec, sizeof(st->codec));
	st->n = n;
	st->dev = dev;
	rc = buffers(ctx, st, rows);
	if (rc != 0) {
		tally_state_free(st);
		if (rc == -EINVAL)
			return rc;
		return tally_ctx_fail(ctx, rc, "%s for the codec memory of "
			"%zu elements%s", rc == -ENOMEM ? "out of memory" :
			strerror(-rc), n, dev != NULL ? " on the device" : "");
	}
	*out = st;
	return 0;
}

int
tally_state_new(struct tally_ctx *ctx, size_t n, struct tally_state **out)
{
	return tally_lib_state_make(ctx, NULL, n, 0, out);
}

int
tally_state_new_rows(struct tally_ctx *ctx, size_t n, uint32_t rows,
	struct tally_state **out)
{
	return tally_lib_state_make(ctx, NULL, n, rows, out);
}

/* Frees p, a buffer of st (host or device memory). */
static void
release(const struct tally_state *st, float *p)
{
	if (st->dev == NULL)
		free(p);
	else if (p != NULL)
		st->dev->dev_free(p);
}

void
tally_state_free(struct tally_state *st)
{
	if (st == NULL)
		return;
	release(st, st->resid);
	release(st, st->mom);
	release(st, st->p);
	release(st, st->q);
	free(st);
}

int
tally_lib_check_state(struct tally_ctx *ctx, const struct tally_state *st,
	size_t n)
{
	if (st == NULL)
		return tally_ctx_fail(ctx, -EINVAL, "state is NULL");
	if (st->n != n)
		return tally_ctx_fail(ctx, -EINVAL, "the state is of a tensor "
			"of %zu elements, not %zu", st->n, n);
	if (memcmp(&st->codec, &ctx->codec, sizeof(st->codec)) != 0)
		return tally_ctx_fail(ctx, -EINVAL, "the state was made for "
			"another codec than the context's");
	return 0;
}

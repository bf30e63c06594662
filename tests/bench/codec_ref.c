/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What tally_allreduce() must return for a codec, computed here from
 * every rank's tensor with the codecs' public functions: the reference
 * the allreduce benchmark and the end-to-end tests check results against,
 * bit for bit. Each rank's tensor comes from a generator, a block at a
 * time, so no rank's whole tensor is ever held.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <tally/feedback.h>
#include <tally/fixp.h>
#include <tally/powersgd.h>
#include <tally/proto.h>
#include <tally/quant.h>
#include <tally/sparse.h>

#include "codec_ref.h"

#define BLOCK	65536	/* elements at a time; a multiple of 8 */

/*
 * Every rank's codec memory (gpu/lib/ctx.h, struct tally_state): resid
 * is the residual (ef=1, 2bit, powersgd with ef) or DGC's accumulation v
 * (sparse with momentum), mom DGC's momentum u; PowerSGD's Q is the same
 * on every rank, so there is one.
 */
struct bench_ref_mem {
	uint64_t next_call;
	float **resid;		/* [world][n], or NULL */
	float **mom;		/* [world][n], or NULL */
	float *p;		/* powersgd: rows x rank, the summed P */
	float *q;		/* powersgd: cols x rank */
	uint32_t rows, cols;
	int q_ready;
};

static float **
rank_arrays(unsigned int world, size_t n)
{
	float **a = calloc(world, sizeof(*a));

	for (unsigned int r = 0; a != NULL && r < world; r++)
		if ((a[r] = calloc(n + 1, sizeof(float))) == NULL) {
			while (r-- > 0)
				free(a[r]);
			free(a);
			a = NULL;
		}
	return a;
}

static void
free_rank_arrays(float **a, unsigned int world)
{
	for (unsigned int r = 0; a != NULL && r < world; r++)
		free(a[r]);
	free(a);
}

void
bench_codec_ref_reset(struct bench_codec_ref *cr)
{
	struct bench_ref_mem *m = cr->mem;

	if (m == NULL)
		return;
	free_rank_arrays(m->resid, cr->world);
	free_rank_arrays(m->mom, cr->world);
	free(m->p);
	free(m->q);
	free(m);
	cr->mem = NULL;
}

/* Makes cr->mem, zeroed, for a first call. Returns 0 or -ENOMEM. */
static int
mem_new(struct bench_codec_ref *cr)
{
	const struct tally_codec *c = &cr->codec;
	struct bench_ref_mem *m = calloc(1, sizeof(*m));

	if (m == NULL)
		return -ENOMEM;
	cr->mem = m;
	m->next_call = cr->call;
	if ((c->kind == TALLY_CODEC_2BIT || c->ef || c->momentum > 0) &&
			(m->resid = rank_arrays(cr->world, cr->n)) == NULL)
		goto nomem;
	if (c->momentum > 0 && (m->mom = rank_arrays(cr->world, cr->n)) ==
			NULL)
		goto nomem;
	if (c->kind == TALLY_CODEC_POWERSGD) {
		if (tally_psgd_shape(cr->n, c->rows, &m->rows, &m->cols) != 0)
			goto inval;
		m->p = calloc((size_t)m->rows * c->rank + 1, sizeof(float));
		m->q = calloc((size_t)m->cols * c->rank + 1, sizeof(float));
		if (m->p == NULL || m->q == NULL)
			goto nomem;
	}
	return 0;
inval:
	bench_codec_ref_reset(cr);
	return -EINVAL;
nomem:
	bench_codec_ref_reset(cr);
	return -ENOMEM;
}

/* The residual of rank r, or NULL (no error feedback). */
static float *
resid_of(const struct bench_codec_ref *cr, unsigned int r)
{
	return cr->mem != NULL && cr->mem->resid != NULL ? cr->mem->resid[r] :
		NULL;
}

/*
 * Elements [i0, i0 + len) of what rank r offers its codec: its tensor,
 * plus its residual under error feedback (v = g + r).
 */
static void
input(const struct bench_codec_ref *cr, unsigned int r, size_t i0, size_t len,
	float *x)
{
	float *res = resid_of(cr, r);

	cr->gen(cr->arg, r, i0, len, x);
	if (res != NULL)
		tally_ef_apply(x, x, res + i0, len);
}

/*
 * Nothing was sent (the scale round refused): every rank keeps v as its
 * residual, as libtally does. Returns rc.
 */
static int
keep_all(const struct bench_codec_ref *cr, float *x, int rc)
{
	size_t i0, len;

	for (unsigned int r = 0; r < cr->world && resid_of(cr, r) != NULL; r++)
		for (i0 = 0; i0 < cr->n; i0 += len) {
			len = cr->n - i0 < BLOCK ? cr->n - i0 : BLOCK;
			input(cr, r, i0, len, x);
			memcpy(resid_of(cr, r) + i0, x, len * sizeof(*x));
		}
	return rc;
}

static int32_t
sat(int64_t v, unsigned int bits)
{
	int64_t hi = (INT64_C(1) << (bits - 1)) - 1, lo = -hi - 1;

	return (int32_t)(v < lo ? lo : v > hi ? hi : v);
}

/* The quantizers: q16, q8, q4 (gpu/lib/allreduce.c, allreduce_quant()). */
static int
quant_reference(const struct bench_codec_ref *cr, unsigned int bits,
	float *ref)
{
	size_t n = cr->n, i0, i, len;
	float *x = malloc(BLOCK * sizeof(float));
	uint8_t *q = malloc(BLOCK * 2 + BLOCK * sizeof(float));
	int64_t *acc = calloc(n, sizeof(*acc));
	float amax = 0.0f, scale;
	unsigned int levels, r;
	int rc = -ENOMEM;

	if (x == NULL || q == NULL || acc == NULL)
		goto out;
	rc = tally_quant_levels(bits, cr->world, cr->narrow, &levels);
	if (rc != 0)
		goto out;
	for (r = 0; r < cr->world; r++)
		for (i0 = 0; i0 < n; i0 += len) {
			float a;

			len = n - i0 < BLOCK ? n - i0 : BLOCK;
			input(cr, r, i0, len, x);
			a = tally_fixp_absmax(x, len);
			amax = a > amax ? a : amax;
		}
	/* libtally reports a refused scale as -ERANGE. */
	rc = tally_quant_scale(amax, levels, &scale);
	if (rc != 0) {
		rc = keep_all(cr, x, -ERANGE);
		goto out;
	}
	for (r = 0; r < cr->world; r++) {
		uint64_t seed = tally_quant_seed(cr->seed, r, cr->call);
		float *res = resid_of(cr, r);

		for (i0 = 0; i0 < n; i0 += len) {
			len = n - i0 < BLOCK ? n - i0 : BLOCK;
			input(cr, r, i0, len, x);
			/* A block at a time: i0 is even, so i4 packs alike. */
			if (bits == 16)
				tally_quant_encode_i16(x, (int16_t *)(void *)q,
					len, scale, levels, seed, i0);
			else if (bits == 8)
				tally_quant_encode_i8(x, (int8_t *)q, len,
					scale, levels, seed, i0);
			else
				tally_quant_encode_i4(x, q, len, scale, levels,
					seed, i0);
			/* Error feedback: r = v - what this rank's bits say. */
			if (res != NULL) {
				float *own = (float *)(void *)(q + BLOCK * 2);

				if (bits == 16)
					tally_quant_decode_i16((int16_t *)(void *)q,
						own, len, scale);
				else if (bits == 8)
					tally_quant_decode_i8((int8_t *)q, own,
						len, scale);
				else
					tally_quant_decode_i4(q, own, len,
						scale);
				(void)tally_ef_update(res + i0, x, own, len);
			}
			for (i = 0; i < len; i++) {
				int32_t v;

				if (bits == 16) {
					v = ((int16_t *)(void *)q)[i];
				} else if (bits == 8) {
					v = ((int8_t *)q)[i];
				} else {
					v = (q[i / 2] >> (i % 2 ? 4 : 0)) & 0xf;
					v -= v >= 8 ? 16 : 0;
				}
				acc[i0 + i] += v;
			}
		}
	}
	/* Back as the dataplane sends it: wide i32, or narrow saturated. */
	for (i0 = 0; i0 < n; i0 += len) {
		len = n - i0 < BLOCK ? n - i0 : BLOCK;
		if (!cr->narrow) {
			int32_t *s = (int32_t *)(void *)q;

			for (size_t k0 = 0; k0 < len; k0 += BLOCK / 2) {
				size_t m = len - k0 < BLOCK / 2 ? len - k0 :
					BLOCK / 2;

				for (i = 0; i < m; i++)
					s[i] = (int32_t)(uint32_t)(uint64_t)
						acc[i0 + k0 + i];
				tally_quant_decode_i32(s, ref + i0 + k0, m,
					scale);
			}
		} else if (bits == 16) {
			int16_t *s = (int16_t *)(void *)q;

			for (i = 0; i < len; i++)
				s[i] = (int16_t)sat(acc[i0 + i], 16);
			tally_quant_decode_i16(s, ref + i0, len, scale);
		} else if (bits == 8) {
			int8_t *s = (int8_t *)q;

			for (i = 0; i < len; i++)
				s[i] = (int8_t)sat(acc[i0 + i], 8);
			tally_quant_decode_i8(s, ref + i0, len, scale);
		} else {
			memset(q, 0, (len + 1) / 2);
			for (i = 0; i < len; i++)
				q[i / 2] |= (uint8_t)((sat(acc[i0 + i], 4) &
					0xf) << (i % 2 ? 4 : 0));
			tally_quant_decode_i4(q, ref + i0, len, scale);
		}
	}
	rc = 0;
out:
	free(x);
	free(q);
	free(acc);
	return rc;
}

/* The global max |x| over every rank's input (with its residual). */
static int
global_absmax(const struct bench_codec_ref *cr, float *x, float *out)
{
	float amax = 0.0f;
	size_t i0, len;

	for (unsigned int r = 0; r < cr->world; r++)
		for (i0 = 0; i0 < cr->n; i0 += len) {
			float a;

			len = cr->n - i0 < BLOCK ? cr->n - i0 : BLOCK;
			input(cr, r, i0, len, x);
			a = tally_fixp_absmax(x, len);
			amax = a > amax ? a : amax;
		}
	*out = amax;
	return 0;
}

/*
 * Mean |x| of rank r's input, NaN as 0, summed in double in element
 * order: the scale of its sign bits under error feedback (gpu/lib/
 * codecs.c, mean_abs()), capped to FLT_MAX.
 */
static float
mean_abs(const struct bench_codec_ref *cr, unsigned int r, float *x)
{
	double s = 0;
	size_t i0, len;

	for (i0 = 0; i0 < cr->n; i0 += len) {
		len = cr->n - i0 < BLOCK ? cr->n - i0 : BLOCK;
		input(cr, r, i0, len, x);
		for (size_t i = 0; i < len; i++)
			s += x[i] == x[i] ? fabs((double)x[i]) : 0.0;
	}
	s /= (double)cr->n;
	return s < 3.4028234663852886e38 ? (float)s : 3.4028234663852886e38f;
}

enum vote_kind {
	VOTE_TERNARY,
	VOTE_2BIT,
	VOTE_SIGN,
};

/*
 * Rank r's votes for the block [i0, i0 + len) added into acc: ternary
 * values (TernGrad at scale, or 2-bit at the threshold 2^exp with the
 * residual) or + bits; error feedback keeps v - own.
 */
static int
vote_block(const struct bench_codec_ref *cr, enum vote_kind kind,
	unsigned int r, size_t i0, size_t len, float scale, int exp,
	float own_scale, float *x, uint8_t *q, int32_t *acc)
{
	uint64_t seed = tally_quant_seed(cr->seed, r, cr->call);
	float *res = resid_of(cr, r), *own = (float *)(void *)(q + BLOCK);
	size_t i;
	int rc;

	if (kind == VOTE_2BIT) {
		cr->gen(cr->arg, r, i0, len, x);
		tally_2bit_encode_i8(res + i0, x, (int8_t *)q, len, exp);
		for (i = 0; i < len; i++)
			acc[i0 + i] += ((int8_t *)q)[i];
		return 0;
	}
	input(cr, r, i0, len, x);
	if (kind == VOTE_TERNARY) {
		rc = tally_tern_encode_i8(x, (int8_t *)q, len, scale, seed, i0);
		if (rc != 0)
			return rc;
		for (i = 0; i < len; i++)
			acc[i0 + i] += ((int8_t *)q)[i];
		if (res != NULL)
			tally_tern_decode_i8((int8_t *)q, own, len, scale);
	} else {
		tally_sign_encode(x, q, len);
		for (i = 0; i < len; i++)
			acc[i0 + i] += (q[i / 8] >> (i % 8)) & 1;
		if (res != NULL)
			tally_sign_decode_bits(q, own, len, own_scale);
	}
	if (res != NULL)
		(void)tally_ef_update(res + i0, x, own, len);
	return 0;
}

/* ternary, 2bit and sign (gpu/lib/codecs.c, allreduce_vote()). */
static int
vote_reference(const struct bench_codec_ref *cr, enum vote_kind kind,
	float *ref)
{
	size_t n = cr->n, i0, i, len;
	float *x = malloc(BLOCK * sizeof(float));
	uint8_t *q = malloc(BLOCK + BLOCK * sizeof(float));
	int32_t *acc = calloc(n, sizeof(*acc));
	float scale = 1.0f;
	int rc = -ENOMEM, exp = 0;

	if (x == NULL || q == NULL || acc == NULL)
		goto out;
	if (kind == VOTE_2BIT) {
		rc = tally_2bit_exponent(cr->codec.threshold, &exp);
		if (rc != 0)
			goto out;
		scale = tally_2bit_threshold(exp);
	} else if (kind == VOTE_TERNARY) {
		global_absmax(cr, x, &scale);
		if (!(scale < INFINITY)) {
			rc = keep_all(cr, x, -ERANGE);
			goto out;
		}
		if (scale == 0.0f) {
			/* Nothing sent, nothing left over. */
			for (unsigned int r = 0; resid_of(cr, 0) != NULL &&
					r < cr->world; r++)
				memset(resid_of(cr, r), 0, n * sizeof(float));
			memset(ref, 0, n * sizeof(*ref));
			rc = 0;
			goto out;
		}
	}
	for (unsigned int r = 0; r < cr->world; r++) {
		float own_scale = kind == VOTE_SIGN && resid_of(cr, r) != NULL ?
			mean_abs(cr, r, x) : 1.0f;

		for (i0 = 0; i0 < n; i0 += len) {
			len = n - i0 < BLOCK ? n - i0 : BLOCK;
			rc = vote_block(cr, kind, r, i0, len, scale, exp,
				own_scale, x, q, acc);
			if (rc != 0)
				goto out;
		}
	}
	for (i0 = 0; i0 < n; i0 += len) {
		len = n - i0 < BLOCK ? n - i0 : BLOCK;
		if (kind != VOTE_SIGN && !cr->narrow) {
			tally_tern_decode_i32(acc + i0, ref + i0, len, scale);
		} else if (kind != VOTE_SIGN) {
			memset(q, 0, (len + 1) / 2);
			for (i = 0; i < len; i++)
				q[i / 2] |= (uint8_t)((sat(acc[i0 + i], 4) &
					0xf) << (i % 2 ? 4 : 0));
			tally_tern_decode_i4(q, ref + i0, len, scale);
		} else if (!cr->narrow) {
			for (i = 0; i < len; i++)
				((int8_t *)q)[i] = (int8_t)acc[i0 + i];
			tally_sign_decode_votes((int8_t *)q, ref + i0, len,
				cr->world, 1.0f);
		} else {
			memset(q, 0, (len + 7) / 8);
			for (i = 0; i < len; i++)
				if (2 * acc[i0 + i] > (int32_t)cr->world)
					q[i / 8] |= (uint8_t)(1u << (i % 8));
			tally_sign_decode_bits(q, ref + i0, len, 1.0f);
		}
	}
	rc = 0;
out:
	free(x);
	free(q);
	free(acc);
	return rc;
}

/* randk (gpu/lib/codecs.c, allreduce_randk()). */
static int
randk_reference(const struct bench_codec_ref *cr, float *ref)
{
	size_t n = cr->n;
	uint64_t k = tally_randk_k(n, cr->codec.density);
	uint64_t seed = tally_quant_seed(cr->seed, 0, cr->call);
	float *x = malloc(n * sizeof(float) + 4);
	float *y = malloc((size_t)k * sizeof(float) + 4);
	float *own = malloc((size_t)k * sizeof(float) + 4);
	int32_t *q = malloc((size_t)k * sizeof(int32_t) + 4);
	uint32_t *acc = calloc((size_t)k + 1, sizeof(*acc));
	float amax = 0.0f;
	size_t i0, len;
	int rc = -ENOMEM, e = 0;

	if (x == NULL || y == NULL || own == NULL || q == NULL || acc == NULL)
		goto out;
	/* The gathered values of every rank: their max, then their sum. */
	for (int pass = 0; pass < 2; pass++) {
		for (unsigned int r = 0; r < cr->world; r++) {
			float *res = resid_of(cr, r);

			for (i0 = 0; i0 < n; i0 += len) {
				len = n - i0 < BLOCK ? n - i0 : BLOCK;
				input(cr, r, i0, len, x + i0);
			}
			(void)tally_randk_gather(x, y, 0, (size_t)k, n, seed);
			if (pass == 0) {
				float a = tally_fixp_absmax(y, (size_t)k);

				amax = a > amax ? a : amax;
				continue;
			}
			tally_fixp_encode(y, q, (size_t)k, e);
			for (uint64_t j = 0; j < k; j++)
				acc[j] += (uint32_t)q[j];
			if (res == NULL)
				continue;
			/* r = v, but v - sent at the k indices. */
			tally_fixp_decode(q, own, (size_t)k, e);
			(void)tally_ef_update(y, y, own, (size_t)k);
			memcpy(res, x, n * sizeof(*x));
			(void)tally_randk_scatter(y, res, 0, (size_t)k, n, seed,
				1.0f);
		}
		if (pass == 0 && tally_fixp_exponent(amax, cr->world, &e) !=
				0) {
			rc = keep_all(cr, x, -ERANGE);
			goto out;
		}
	}
	tally_fixp_decode((const int32_t *)acc, y, (size_t)k, e);
	memset(ref, 0, n * sizeof(*ref));
	(void)tally_randk_scatter(y, ref, 0, (size_t)k, n, seed, 1.0f);
	rc = 0;
out:
	free(x);
	free(y);
	free(own);
	free(q);
	free(acc);
	return rc;
}

/*
 * What rank r offers the sparse codec, all n elements into x: its
 * tensor, plus its residual (error feedback), or DGC's accumulation v
 * after u = m u + g, v = v + u (momentum), which updates the memory; so
 * call it once per rank and call.
 */
static void
sparse_input(const struct bench_codec_ref *cr, unsigned int r, float *x)
{
	size_t i0, len;

	if (cr->codec.momentum > 0) {
		for (i0 = 0; i0 < cr->n; i0 += len) {
			len = cr->n - i0 < BLOCK ? cr->n - i0 : BLOCK;
			cr->gen(cr->arg, r, i0, len, x + i0);
		}
		tally_dgc_accumulate(cr->mem->mom[r], cr->mem->resid[r], x,
			cr->n, (float)cr->codec.momentum);
		memcpy(x, cr->mem->resid[r], cr->n * sizeof(*x));
		return;
	}
	for (i0 = 0; i0 < cr->n; i0 += len) {
		len = cr->n - i0 < BLOCK ? cr->n - i0 : BLOCK;
		input(cr, r, i0, len, x + i0);
	}
	if (resid_of(cr, r) != NULL)
		memcpy(resid_of(cr, r), x, cr->n * sizeof(*x));
}

/*
 * sparse (gpu/lib/sparse.c): every rank picks its blocks with its own
 * threshold; the blocks any rank picked come back as the fixed-point sum
 * of the ranks that picked them (the others sent nothing), zeros
 * elsewhere. With memory, a rank's residual (or DGC's v) keeps all but
 * what it sent, and DGC's u is zeroed on the sent blocks.
 */
static int
sparse_reference(const struct bench_codec_ref *cr, float *ref)
{
	struct tally_sparse_params p = { .seed = cr->codec.seed };
	size_t n = cr->n, nb = TALLY_SPARSE_NBLOCKS(n);
	float *xs = malloc(cr->world * n * sizeof(float) + 4);
	int32_t *q = malloc(n * sizeof(int32_t) + 4);
	uint32_t *acc = calloc(n + 1, sizeof(*acc));
	uint32_t *blocks = malloc(nb * sizeof(*blocks) + 4);
	uint8_t *any = calloc(nb + 1, 1);
	float *bmax = malloc(nb * sizeof(float) + 4);
	float amax = 0.0f, thr, own[TALLY_SPARSE_BLOCK];
	struct tally_sparse_sel sel;
	int rc = -ENOMEM, e;

	if (xs == NULL || q == NULL || acc == NULL || blocks == NULL ||
			any == NULL || bmax == NULL)
		goto out;
	for (unsigned int r = 0; r < cr->world; r++) {
		float a;

		sparse_input(cr, r, xs + r * n);
		a = tally_fixp_absmax(xs + r * n, n);
		amax = a > amax ? a : amax;
	}
	/* Nothing sent: the memories keep what sparse_input() left. */
	if (tally_fixp_exponent(amax, cr->world, &e) != 0) {
		rc = -ERANGE;
		goto out;
	}
	for (unsigned int r = 0; r < cr->world; r++) {
		const float *x = xs + r * n;
		float *res = resid_of(cr, r);

		/* density: of blocks, by their largest magnitudes. */
		tally_sparse_block_max(x, n, bmax);
		rc = tally_sparse_threshold(bmax, nb, cr->codec.density,
			(enum tally_sparse_est)cr->codec.est, &p, &thr);
		if (rc == 0)
			rc = tally_sparse_select(x, n, thr, NULL, blocks, &sel);
		if (rc != 0)
			goto out;
		tally_fixp_encode(x, q, n, e);
		for (size_t k = 0; k < sel.blocks; k++) {
			size_t b0 = (size_t)blocks[k] * TALLY_SPARSE_BLOCK;
			size_t b1 = b0 + TALLY_SPARSE_BLOCK < n ?
				b0 + TALLY_SPARSE_BLOCK : n;

			any[blocks[k]] = 1;
			for (size_t i = b0; i < b1; i++)
				acc[i] += (uint32_t)q[i];
			if (res == NULL)
				continue;
			tally_fixp_decode(q + b0, own, b1 - b0, e);
			(void)tally_ef_update(res + b0, res + b0, own, b1 - b0);
			if (cr->mem->mom != NULL)
				memset(cr->mem->mom[r] + b0, 0,
					(b1 - b0) * sizeof(float));
		}
	}
	tally_fixp_decode((const int32_t *)acc, ref, n, e);
	for (size_t b = 0; b < nb; b++)
		if (!any[b]) {
			size_t b0 = b * TALLY_SPARSE_BLOCK;
			size_t b1 = b0 + TALLY_SPARSE_BLOCK < n ?
				b0 + TALLY_SPARSE_BLOCK : n;

			memset(ref + b0, 0, (b1 - b0) * sizeof(*ref));
		}
	rc = 0;
out:
	free(xs);
	free(q);
	free(acc);
	free(blocks);
	free(any);
	free(bmax);
	return rc;
}

/*
 * The sum over ranks of m_r's fixed-point encoding (len floats each, at
 * ms + r * len), decoded into out: what libtally's f32 sum gives every
 * rank. Returns 0 or -ERANGE (an infinity: no exponent).
 */
static int
fixp_sum(const struct bench_codec_ref *cr, const float *ms, size_t len,
	float *out)
{
	uint32_t *acc = calloc(len + 1, sizeof(*acc));
	int32_t *q = malloc(len * sizeof(*q) + 4);
	float amax = 0.0f;
	int rc = -ENOMEM, e;

	if (acc == NULL || q == NULL)
		goto out;
	for (unsigned int r = 0; r < cr->world; r++) {
		float a = tally_fixp_absmax(ms + r * len, len);

		amax = a > amax ? a : amax;
	}
	if (tally_fixp_exponent(amax, cr->world, &e) != 0) {
		rc = -ERANGE;
		goto out;
	}
	for (unsigned int r = 0; r < cr->world; r++) {
		tally_fixp_encode(ms + r * len, q, len, e);
		for (size_t i = 0; i < len; i++)
			acc[i] += (uint32_t)q[i];
	}
	tally_fixp_decode((const int32_t *)acc, out, len, e);
	rc = 0;
out:
	free(acc);
	free(q);
	return rc;
}

/*
 * powersgd (gpu/lib/powersgd.c): M_r = g_r (+ r_r); P = sum of M_r Q,
 * orthonormalized; Q = sum of M_r^T P, kept; the result P Q^T; with error
 * feedback r_r = M_r - P (M_r^T P)^T.
 */
static int
powersgd_reference(const struct bench_codec_ref *cr, float *ref)
{
	struct bench_ref_mem *m = cr->mem;
	uint32_t rank = cr->codec.rank;
	size_t n = cr->n, np = (size_t)m->rows * rank;
	size_t nq = (size_t)m->cols * rank;
	float *x = malloc(n * sizeof(float) + 4);
	float *ps = malloc(cr->world * np * sizeof(float) + 4);
	float *qs = malloc(cr->world * nq * sizeof(float) + 4);
	size_t i0, len;
	int rc = -ENOMEM;

	if (x == NULL || ps == NULL || qs == NULL)
		goto out;
	if (!m->q_ready)
		tally_psgd_init_q(m->q, m->cols, rank, cr->codec.seed);
	for (unsigned int r = 0; r < cr->world; r++) {
		for (i0 = 0; i0 < n; i0 += len) {
			len = n - i0 < BLOCK ? n - i0 : BLOCK;
			input(cr, r, i0, len, x + i0);
		}
		tally_psgd_p(x, n, m->rows, m->cols, m->q, rank, ps + r * np);
	}
	rc = fixp_sum(cr, ps, np, m->p);
	if (rc != 0) {
		rc = rc == -ERANGE ? keep_all(cr, x, rc) : rc;
		goto out;
	}
	tally_psgd_orthonormalize(m->p, m->rows, rank);
	for (unsigned int r = 0; r < cr->world; r++) {
		for (i0 = 0; i0 < n; i0 += len) {
			len = n - i0 < BLOCK ? n - i0 : BLOCK;
			input(cr, r, i0, len, x + i0);
		}
		tally_psgd_q(x, n, m->rows, m->cols, m->p, rank, qs + r * nq);
	}
	rc = fixp_sum(cr, qs, nq, m->q);
	if (rc != 0) {
		/* Nothing of the call was summed: r = M, Q afresh next. */
		m->q_ready = 0;
		rc = rc == -ERANGE ? keep_all(cr, x, rc) : rc;
		goto out;
	}
	m->q_ready = 1;
	/* The residuals, last: input() reads them. */
	for (unsigned int r = 0; resid_of(cr, 0) != NULL && r < cr->world;
			r++) {
		float *res = resid_of(cr, r);

		for (i0 = 0; i0 < n; i0 += len) {
			len = n - i0 < BLOCK ? n - i0 : BLOCK;
			input(cr, r, i0, len, x + i0);
		}
		tally_psgd_decompress(m->p, qs + r * nq, m->rows, m->cols,
			rank, 1.0f, res, n);
		(void)tally_ef_update(res, x, res, n);
	}
	tally_psgd_decompress(m->p, m->q, m->rows, m->cols, rank, 1.0f, ref,
		n);
out:
	free(x);
	free(ps);
	free(qs);
	return rc;
}

static int
reference(struct bench_codec_ref *cr, float *ref)
{
	switch (cr->codec.kind) {
	case TALLY_CODEC_Q16:
		return quant_reference(cr, 16, ref);
	case TALLY_CODEC_Q8:
		return quant_reference(cr, 8, ref);
	case TALLY_CODEC_Q4:
		return quant_reference(cr, 4, ref);
	case TALLY_CODEC_TERNARY:
		return vote_reference(cr, VOTE_TERNARY, ref);
	case TALLY_CODEC_2BIT:
		return vote_reference(cr, VOTE_2BIT, ref);
	case TALLY_CODEC_SIGN:
		return vote_reference(cr, VOTE_SIGN, ref);
	case TALLY_CODEC_RANDK:
		return randk_reference(cr, ref);
	case TALLY_CODEC_SPARSE:
		return sparse_reference(cr, ref);
	case TALLY_CODEC_POWERSGD:
		return powersgd_reference(cr, ref);
	default:
		return -EOPNOTSUPP;
	}
}

int
bench_codec_reference(struct bench_codec_ref *cr, float *ref)
{
	int rc;

	if (!tally_codec_has_memory(&cr->codec))
		return reference(cr, ref);
	if (cr->mem == NULL && (rc = mem_new(cr)) != 0)
		return rc;
	if (cr->mem->next_call != cr->call)
		return -EINVAL;
	cr->mem->next_call++;
	return reference(cr, ref);
}

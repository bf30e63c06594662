/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What tally_allreduce() must return for a codec, computed here from
 * every rank's tensor with the codecs' public functions: the reference
 * the allreduce benchmark and the end-to-end tests check results against,
 * bit for bit. Each rank's tensor comes from a generator, a block at a
 * time, so no rank's whole tensor is ever held.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <tally/feedback.h>
#include <tally/fixp.h>
#include <tally/proto.h>
#include <tally/quant.h>
#include <tally/sparse.h>

#include "codec_ref.h"

#define BLOCK	65536	/* elements at a time; a multiple of 8 */

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
	uint8_t *q = malloc(BLOCK * 2);
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
			cr->gen(cr->arg, r, i0, len, x);
			a = tally_fixp_absmax(x, len);
			amax = a > amax ? a : amax;
		}
	rc = tally_quant_scale(amax, levels, &scale);
	if (rc != 0)
		goto out;
	for (r = 0; r < cr->world; r++) {
		uint64_t seed = tally_quant_seed(cr->seed, r, cr->call);

		for (i0 = 0; i0 < n; i0 += len) {
			len = n - i0 < BLOCK ? n - i0 : BLOCK;
			cr->gen(cr->arg, r, i0, len, x);
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

/* The global max |x| over every rank's tensor. */
static int
global_absmax(const struct bench_codec_ref *cr, float *x, float *out)
{
	float amax = 0.0f;
	size_t i0, len;

	for (unsigned int r = 0; r < cr->world; r++)
		for (i0 = 0; i0 < cr->n; i0 += len) {
			float a;

			len = cr->n - i0 < BLOCK ? cr->n - i0 : BLOCK;
			cr->gen(cr->arg, r, i0, len, x);
			a = tally_fixp_absmax(x, len);
			amax = a > amax ? a : amax;
		}
	*out = amax;
	return 0;
}

/* ternary and sign (gpu/lib/allreduce.c, allreduce_vote()). */
static int
vote_reference(const struct bench_codec_ref *cr, int tern, float *ref)
{
	size_t n = cr->n, i0, i, len;
	float *x = malloc(BLOCK * sizeof(float));
	uint8_t *q = malloc(BLOCK * 4);
	int32_t *acc = calloc(n, sizeof(*acc));
	float scale = 1.0f;
	int rc = -ENOMEM;

	if (x == NULL || q == NULL || acc == NULL)
		goto out;
	if (tern) {
		global_absmax(cr, x, &scale);
		if (scale == 0.0f) {
			memset(ref, 0, n * sizeof(*ref));
			rc = 0;
			goto out;
		}
	}
	for (unsigned int r = 0; r < cr->world; r++) {
		uint64_t seed = tally_quant_seed(cr->seed, r, cr->call);

		for (i0 = 0; i0 < n; i0 += len) {
			len = n - i0 < BLOCK ? n - i0 : BLOCK;
			cr->gen(cr->arg, r, i0, len, x);
			if (tern) {
				rc = tally_tern_encode_i8(x, (int8_t *)q, len,
					scale, seed, i0);
				if (rc != 0)
					goto out;
				for (i = 0; i < len; i++)
					acc[i0 + i] += ((int8_t *)q)[i];
			} else {
				tally_sign_encode(x, q, len);
				for (i = 0; i < len; i++)
					acc[i0 + i] += (q[i / 8] >> (i % 8)) & 1;
			}
		}
	}
	for (i0 = 0; i0 < n; i0 += len) {
		len = n - i0 < BLOCK ? n - i0 : BLOCK;
		if (tern && !cr->narrow) {
			tally_tern_decode_i32(acc + i0, ref + i0, len, scale);
		} else if (tern) {
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

/* randk (gpu/lib/allreduce.c, allreduce_randk()). */
static int
randk_reference(const struct bench_codec_ref *cr, float *ref)
{
	size_t n = cr->n;
	uint64_t k = tally_randk_k(n, cr->codec.density);
	uint64_t seed = tally_quant_seed(cr->seed, 0, cr->call);
	float *x = malloc(n * sizeof(float) + 4);
	float *y = malloc((size_t)k * sizeof(float) + 4);
	int32_t *q = malloc((size_t)k * sizeof(int32_t) + 4);
	uint32_t *acc = calloc((size_t)k + 1, sizeof(*acc));
	float amax = 0.0f;
	size_t i0, len;
	int rc = -ENOMEM, e = 0;

	if (x == NULL || y == NULL || q == NULL || acc == NULL)
		goto out;
	/* The gathered values of every rank: their max, then their sum. */
	for (int pass = 0; pass < 2; pass++) {
		for (unsigned int r = 0; r < cr->world; r++) {
			for (i0 = 0; i0 < n; i0 += len) {
				len = n - i0 < BLOCK ? n - i0 : BLOCK;
				cr->gen(cr->arg, r, i0, len, x + i0);
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
		}
		if (pass == 0 && (rc = tally_fixp_exponent(amax, cr->world,
				&e)) != 0)
			goto out;
	}
	tally_fixp_decode((const int32_t *)acc, y, (size_t)k, e);
	memset(ref, 0, n * sizeof(*ref));
	(void)tally_randk_scatter(y, ref, 0, (size_t)k, n, seed, 1.0f);
	rc = 0;
out:
	free(x);
	free(y);
	free(q);
	free(acc);
	return rc;
}

/*
 * sparse (gpu/lib/sparse.c): every rank picks its blocks with its own
 * threshold; the blocks any rank picked come back as the fixed-point sum
 * of the ranks that picked them (the others sent nothing), zeros elsewhere.
 */
static int
sparse_reference(const struct bench_codec_ref *cr, float *ref)
{
	struct tally_sparse_params p = { .seed = cr->codec.seed };
	size_t n = cr->n, nb = TALLY_SPARSE_NBLOCKS(n), i0, len;
	float *x = malloc(n * sizeof(float) + 4);
	int32_t *q = malloc(n * sizeof(int32_t) + 4);
	uint32_t *acc = calloc(n + 1, sizeof(*acc));
	uint32_t *blocks = malloc(nb * sizeof(*blocks) + 4);
	uint8_t *any = calloc(nb + 1, 1);
	float *bmax = malloc(nb * sizeof(float) + 4);
	float amax = 0.0f, thr;
	struct tally_sparse_sel sel;
	int rc = -ENOMEM, e;

	if (x == NULL || q == NULL || acc == NULL || blocks == NULL ||
			any == NULL || bmax == NULL)
		goto out;
	for (unsigned int r = 0; r < cr->world; r++) {
		float a;

		for (i0 = 0; i0 < n; i0 += len) {
			len = n - i0 < BLOCK ? n - i0 : BLOCK;
			cr->gen(cr->arg, r, i0, len, x + i0);
		}
		a = tally_fixp_absmax(x, n);
		amax = a > amax ? a : amax;
	}
	rc = tally_fixp_exponent(amax, cr->world, &e);
	if (rc != 0)
		goto out;
	for (unsigned int r = 0; r < cr->world; r++) {
		for (i0 = 0; i0 < n; i0 += len) {
			len = n - i0 < BLOCK ? n - i0 : BLOCK;
			cr->gen(cr->arg, r, i0, len, x + i0);
		}
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
	free(x);
	free(q);
	free(acc);
	free(blocks);
	free(any);
	free(bmax);
	return rc;
}

int
bench_codec_reference(const struct bench_codec_ref *cr, float *ref)
{
	switch (cr->codec.kind) {
	case TALLY_CODEC_Q16:
		return quant_reference(cr, 16, ref);
	case TALLY_CODEC_Q8:
		return quant_reference(cr, 8, ref);
	case TALLY_CODEC_Q4:
		return quant_reference(cr, 4, ref);
	case TALLY_CODEC_TERNARY:
		return vote_reference(cr, 1, ref);
	case TALLY_CODEC_SIGN:
		return vote_reference(cr, 0, ref);
	case TALLY_CODEC_RANDK:
		return randk_reference(cr, ref);
	case TALLY_CODEC_SPARSE:
		return sparse_reference(cr, ref);
	default:
		return -EOPNOTSUPP;
	}
}

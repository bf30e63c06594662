/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Element math of the shared-scale stochastic quantizers (<tally/quant.h>).
 *
 * The CPU reference (quant.c) and the CUDA kernels (quant.cu) both call
 * these functions, so the CPU tests check the code the GPU runs. Every
 * floating point step is one IEEE operation, correctly rounded to nearest
 * even on both sides (host: plain C operators; device: the _rn
 * intrinsics, which nvcc never contracts into FMAs), or exact:
 * - y = x * s: one rounded product.
 * - floor(y) for |y| <= 32767, as an int: host, the truncation (exact)
 *   minus 1 when it lies above y; device, __float2int_rd (the same
 *   integer). int -> float of it is exact.
 * - frac = y - floor(y): exact when |y| >= 1 or y >= 0 (Sterbenz / same
 *   binade); for y in (-1, 0) it is 1 + y rounded to nearest even.
 * - u = u24 * 2^-24: exact.
 * - decode: (float)sum rounded to nearest even (exact below 2^24, which
 *   every sum of at most 64 values of [-32767, 32767] is), then one
 *   rounded division.
 * Requirements, as for fixp_math.h: the host runs in the default floating
 * point environment (round to nearest even, no flush-to-zero), the C code
 * that includes this is built without -ffast-math and with
 * -ffp-contract=off, and nvcc runs without --use_fast_math / -ftz=true.
 *
 * The random draw of element g (its global index in the tensor) is the
 * top 24 bits of one 32-bit half of a 64-bit hash of (key, g / 2): a
 * SplitMix64 output, its state key + (g / 2 + 1) * golden gamma, the key
 * a mix of the seed. Counter-based: any element's draw is computed alone,
 * and one hash serves the two elements of an aligned pair.
 */
#ifndef TALLY_GPU_CODEC_QUANT_QUANT_MATH_H
#define TALLY_GPU_CODEC_QUANT_QUANT_MATH_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <tally/quant.h>

#include "codec/fixp_math.h"
#include "codec/hd.h"

/* SplitMix64's increment (2^64 / golden ratio) and the seed's salt. */
#define TALLY_QUANT_GAMMA	0x9e3779b97f4a7c15ull
#define TALLY_QUANT_SALT	0xbb67ae8584caa73bull

/* SplitMix64's output function: a bijective 64-bit mixer. */
static inline TALLY_HD uint64_t
tally_quant_mix64(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* The hash key of a seed: seeds 0, 1, 2, ... give unrelated streams. */
static inline TALLY_HD uint64_t
tally_quant_key(uint64_t seed)
{
	return tally_quant_mix64(seed ^ TALLY_QUANT_SALT);
}

/* 64 random bits for the element pair p (elements 2p and 2p + 1). */
static inline TALLY_HD uint64_t
tally_quant_hash(uint64_t key, uint64_t p)
{
	return tally_quant_mix64(key + (p + 1) * TALLY_QUANT_GAMMA);
}

/*
 * The 24-bit draw of an element from its pair's hash h: the top 24 bits
 * of the low half for the even element (odd 0), of the high half for the
 * odd one.
 */
static inline TALLY_HD uint32_t
tally_quant_u24(uint64_t h, unsigned int odd)
{
	return (uint32_t)(h >> (odd ? 32 : 0)) >> 8;
}

/* The 24-bit draw of element g (global index) under key. */
static inline TALLY_HD uint32_t
tally_quant_draw(uint64_t key, uint64_t g)
{
	return tally_quant_u24(tally_quant_hash(key, g >> 1),
		(unsigned int)(g & 1));
}

/* levels clamped to max (a width's largest), as a float (exact). */
static inline TALLY_HD float
tally_quant_limit(unsigned int levels, unsigned int max)
{
	return (float)(levels < max ? levels : max);
}

/*
 * Encodes one element: y = x * scale, NaN -> 0, clamped to [-lim, lim]
 * (lim = tally_quant_limit(), at most 32767), then rounded down or up:
 * up when y - floor(y) > u24 * 2^-24. So P(up) = ceil(frac * 2^24) / 2^24
 * and E[q] = y exactly when frac is a multiple of 2^-24 (|y| >= 1), and
 * within 2^-24 of it otherwise.
 */
static inline TALLY_HD int32_t
tally_quant_enc1(float x, float scale, float lim, uint32_t u24)
{
	float y, u;
	int32_t fl;
#ifndef __CUDA_ARCH__
	int32_t t;
#endif

#ifdef __CUDA_ARCH__
	y = __fmul_rn(x, scale);
#else
	y = x * scale;
#endif
	y = y != y ? 0.0f : y;
	y = y < -lim ? -lim : y;
	y = y > lim ? lim : y;
#ifdef __CUDA_ARCH__
	fl = __float2int_rd(y);
	u = __fmul_rn(__uint2float_rn(u24), 0x1p-24f);
	return fl + (int32_t)(__fsub_rn(y, __int2float_rn(fl)) > u);
#else
	/* floor: the truncation, minus 1 where it lies above y. */
	t = (int32_t)y;
	fl = t - (int32_t)((float)t > y);
	u = (float)u24 * 0x1p-24f;
	return fl + (int32_t)(y - (float)fl > u);
#endif
}

/*
 * Encodes the aligned pair p (elements 2p, 2p + 1 with values x0, x1)
 * with one hash: the same as tally_quant_enc1() of each with its
 * tally_quant_draw().
 */
static inline TALLY_HD void
tally_quant_enc_pair(float x0, float x1, float scale, float lim,
	uint64_t key, uint64_t p, int32_t *q0, int32_t *q1)
{
	uint64_t h = tally_quant_hash(key, p);

	*q0 = tally_quant_enc1(x0, scale, lim, tally_quant_u24(h, 0));
	*q1 = tally_quant_enc1(x1, scale, lim, tally_quant_u24(h, 1));
}

/* Decodes one sum: (float)sum / scale, both rounded to nearest even. */
static inline TALLY_HD float
tally_quant_dec1(int32_t sum, float scale)
{
#ifdef __CUDA_ARCH__
	return __fdiv_rn(__int2float_rn(sum), scale);
#else
	return (float)sum / scale;
#endif
}

/* One i4 byte: q0 (in [-8, 7]) in the low nibble, q1 in the high one. */
static inline TALLY_HD uint8_t
tally_quant_pack4(int32_t q0, int32_t q1)
{
	return (uint8_t)(((uint32_t)q0 & 0xfu) | (((uint32_t)q1 & 0xfu) << 4));
}

/* The two's complement nibble of byte b (high one when hi), as an int. */
static inline TALLY_HD int32_t
tally_quant_nib(uint32_t b, unsigned int hi)
{
	return (int32_t)(((b >> (hi ? 4 : 0)) & 0xfu) ^ 0x8u) - 8;
}

/*
 * The CUDA kernels' work, by groups of TALLY_QUANT_GROUP elements: a
 * kernel is a grid-stride loop over a chunk's groups (group k: chunk
 * elements 4k .. 4k + 3), plus one thread for the last n % 4 elements.
 * Each group is one 16-byte load of floats and one store of its packed
 * integers (8, 4 or 2 bytes), or the reverse for decoding, when vec says
 * the buffers are aligned for that (the device then uses vector types;
 * the host, which runs these functions in the CPU tests, the same words
 * through memcpy), and element-wise accesses otherwise. bits is a
 * constant in each kernel, so every branch on it folds away.
 */
#define TALLY_QUANT_GROUP	4

/* Stores the 32-bit word w at p (4-byte aligned on the device). */
static inline TALLY_HD void
tally_quant_st32(void *p, uint32_t w)
{
#ifdef __CUDA_ARCH__
	*(uint32_t *)p = w;
#else
	memcpy(p, &w, sizeof(w));
#endif
}

/* Stores lo then hi at p (8-byte aligned on the device). */
static inline TALLY_HD void
tally_quant_st64(void *p, uint32_t lo, uint32_t hi)
{
#ifdef __CUDA_ARCH__
	*(uint2 *)p = make_uint2(lo, hi);
#else
	uint32_t w[2] = { lo, hi };

	memcpy(p, w, sizeof(w));
#endif
}

/* Loads the four 32-bit words at p (16-byte aligned on the device). */
static inline TALLY_HD void
tally_quant_ld128(const void *p, uint32_t w[4])
{
#ifdef __CUDA_ARCH__
	uint4 v = *(const uint4 *)p;

	w[0] = v.x;
	w[1] = v.y;
	w[2] = v.z;
	w[3] = v.w;
#else
	memcpy(w, p, 4 * sizeof(uint32_t));
#endif
}

/* Stores the four 32-bit words w at p (16-byte aligned on the device). */
static inline TALLY_HD void
tally_quant_st128(void *p, const uint32_t w[4])
{
#ifdef __CUDA_ARCH__
	*(uint4 *)p = make_uint4(w[0], w[1], w[2], w[3]);
#else
	memcpy(p, w, 4 * sizeof(uint32_t));
#endif
}

/* Loads the 64-bit word at p as lo, hi (8-byte aligned on the device). */
static inline TALLY_HD void
tally_quant_ld64(const void *p, uint32_t *lo, uint32_t *hi)
{
#ifdef __CUDA_ARCH__
	uint2 v = *(const uint2 *)p;

	*lo = v.x;
	*hi = v.y;
#else
	uint32_t w[2];

	memcpy(w, p, sizeof(w));
	*lo = w[0];
	*hi = w[1];
#endif
}

/* Loads the 32-bit word at p (4-byte aligned on the device). */
static inline TALLY_HD uint32_t
tally_quant_ld32(const void *p)
{
#ifdef __CUDA_ARCH__
	return *(const uint32_t *)p;
#else
	uint32_t w;

	memcpy(&w, p, sizeof(w));
	return w;
#endif
}

/* Stores (device: 2-byte aligned) and loads the 16-bit word at p. */
static inline TALLY_HD void
tally_quant_st16(void *p, uint32_t w)
{
#ifdef __CUDA_ARCH__
	*(uint16_t *)p = (uint16_t)w;
#else
	uint16_t h = (uint16_t)w;

	memcpy(p, &h, sizeof(h));
#endif
}

static inline TALLY_HD uint32_t
tally_quant_ld16(const void *p)
{
#ifdef __CUDA_ARCH__
	return *(const uint16_t *)p;
#else
	uint16_t h;

	memcpy(&h, p, sizeof(h));
	return h;
#endif
}

/* Bytes of a group of the width: 8, 4, 2 (and 16 for i32). */
#define TALLY_QUANT_GROUP_BYTES(bits)	((bits) * TALLY_QUANT_GROUP / 8)

/*
 * Encodes group k of the chunk x (its first element at global index
 * off; odd must be off & 1, a constant in each kernel) into r: one hash
 * per aligned pair, so two for an even off, three for an odd one.
 * Borrows x (16-byte aligned when vec).
 */
static inline TALLY_HD void
tally_quant_enc_group(const float *x, size_t k, int vec, int odd, float s,
	float lim, uint64_t key, uint64_t off, int32_t r[TALLY_QUANT_GROUP])
{
	const float *p = x + TALLY_QUANT_GROUP * k;
	uint64_t pr = (off + TALLY_QUANT_GROUP * k) >> 1;
	float v[TALLY_QUANT_GROUP];

	if (vec) {
		uint32_t w[TALLY_QUANT_GROUP];

		tally_quant_ld128(p, w);
		for (int j = 0; j < TALLY_QUANT_GROUP; j++)
			v[j] = tally_hd_u2f(w[j]);
	} else {
		for (int j = 0; j < TALLY_QUANT_GROUP; j++)
			v[j] = p[j];
	}
	if (!odd) {
		tally_quant_enc_pair(v[0], v[1], s, lim, key, pr, &r[0], &r[1]);
		tally_quant_enc_pair(v[2], v[3], s, lim, key, pr + 1, &r[2],
			&r[3]);
	} else {
		/* Elements 2pr + 1 .. 2pr + 4: pairs pr, pr + 1, pr + 2. */
		uint64_t h0 = tally_quant_hash(key, pr);
		uint64_t h1 = tally_quant_hash(key, pr + 1);
		uint64_t h2 = tally_quant_hash(key, pr + 2);

		r[0] = tally_quant_enc1(v[0], s, lim, tally_quant_u24(h0, 1));
		r[1] = tally_quant_enc1(v[1], s, lim, tally_quant_u24(h1, 0));
		r[2] = tally_quant_enc1(v[2], s, lim, tally_quant_u24(h1, 1));
		r[3] = tally_quant_enc1(v[3], s, lim, tally_quant_u24(h2, 0));
	}
}

/*
 * Stores group k's integers r (in the width's range) to the chunk's
 * packed output q of bits 16, 8 or 4 (aligned to
 * TALLY_QUANT_GROUP_BYTES(bits) when vec).
 */
static inline TALLY_HD void
tally_quant_store_group(void *q, size_t k, unsigned int bits, int vec,
	const int32_t r[TALLY_QUANT_GROUP])
{
	uint8_t *o = (uint8_t *)q + TALLY_QUANT_GROUP_BYTES(bits) * k;

	if (bits == 16) {
		uint32_t lo = ((uint32_t)r[0] & 0xffffu) | ((uint32_t)r[1] << 16);
		uint32_t hi = ((uint32_t)r[2] & 0xffffu) | ((uint32_t)r[3] << 16);

		if (vec) {
			tally_quant_st64(o, lo, hi);
		} else {
			tally_quant_st16(o, lo);
			tally_quant_st16(o + 2, lo >> 16);
			tally_quant_st16(o + 4, hi);
			tally_quant_st16(o + 6, hi >> 16);
		}
	} else if (bits == 8) {
		uint32_t w = ((uint32_t)r[0] & 0xffu) |
			(((uint32_t)r[1] & 0xffu) << 8) |
			(((uint32_t)r[2] & 0xffu) << 16) | ((uint32_t)r[3] << 24);

		if (vec) {
			tally_quant_st32(o, w);
		} else {
			for (int j = 0; j < TALLY_QUANT_GROUP; j++)
				o[j] = (uint8_t)(w >> (8 * j));
		}
	} else {
		uint32_t w = tally_quant_pack4(r[0], r[1]) |
			((uint32_t)tally_quant_pack4(r[2], r[3]) << 8);

		if (vec) {
			tally_quant_st16(o, w);
		} else {
			o[0] = (uint8_t)w;
			o[1] = (uint8_t)(w >> 8);
		}
	}
}

/* Stores element i's integer v to a packed i16 or i8 output q. */
static inline TALLY_HD void
tally_quant_store1(void *q, size_t i, unsigned int bits, int32_t v)
{
	if (bits == 16)
		tally_quant_st16((uint8_t *)q + 2 * i, (uint32_t)v);
	else
		((uint8_t *)q)[i] = (uint8_t)v;
}

/*
 * Encodes the chunk's last n % 4 elements (after its groups), each with
 * its own draw; an i4 pair shares its byte. Borrows x, writes q.
 */
static inline TALLY_HD void
tally_quant_enc_tail(const float *x, void *q, size_t n, unsigned int bits,
	float s, float lim, uint64_t key, uint64_t off)
{
	for (size_t i = n / TALLY_QUANT_GROUP * TALLY_QUANT_GROUP; i < n;
	     i += 2) {
		int32_t q0 = tally_quant_enc1(x[i], s, lim,
			tally_quant_draw(key, off + i));
		int32_t q1 = 0;

		if (i + 1 < n)
			q1 = tally_quant_enc1(x[i + 1], s, lim,
				tally_quant_draw(key, off + i + 1));
		if (bits == 4) {
			((uint8_t *)q)[i / 2] = tally_quant_pack4(q0, q1);
		} else {
			tally_quant_store1(q, i, bits, q0);
			if (i + 1 < n)
				tally_quant_store1(q, i + 1, bits, q1);
		}
	}
}

/*
 * The integers of group k of packed sums of bits 32 (wide), 16, 8 or 4
 * (aligned to TALLY_QUANT_GROUP_BYTES(bits) when vec) into r.
 */
static inline TALLY_HD void
tally_quant_load_group(const void *sum, size_t k, unsigned int bits, int vec,
	int32_t r[TALLY_QUANT_GROUP])
{
	const uint8_t *p = (const uint8_t *)sum +
		TALLY_QUANT_GROUP_BYTES(bits) * k;
	uint32_t w[TALLY_QUANT_GROUP];

	if (bits == 32) {
		if (vec) {
			tally_quant_ld128(p, w);
		} else {
			for (int j = 0; j < TALLY_QUANT_GROUP; j++)
				w[j] = tally_quant_ld32(p + 4 * j);
		}
		for (int j = 0; j < TALLY_QUANT_GROUP; j++)
			r[j] = (int32_t)w[j];
	} else if (bits == 16) {
		if (vec) {
			tally_quant_ld64(p, &w[0], &w[2]);
		} else {
			w[0] = tally_quant_ld16(p) |
				(tally_quant_ld16(p + 2) << 16);
			w[2] = tally_quant_ld16(p + 4) |
				(tally_quant_ld16(p + 6) << 16);
		}
		for (int j = 0; j < TALLY_QUANT_GROUP; j++)
			r[j] = (int16_t)(uint16_t)(w[j & 2] >> (16 * (j & 1)));
	} else if (bits == 8) {
		w[0] = vec ? tally_quant_ld32(p) : (uint32_t)p[0] |
			((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
			((uint32_t)p[3] << 24);
		for (int j = 0; j < TALLY_QUANT_GROUP; j++)
			r[j] = (int8_t)(uint8_t)(w[0] >> (8 * j));
	} else {
		w[0] = vec ? tally_quant_ld16(p) :
			(uint32_t)p[0] | ((uint32_t)p[1] << 8);
		for (int j = 0; j < TALLY_QUANT_GROUP; j++)
			r[j] = tally_quant_nib(w[0] >> (8 * (j >> 1)),
				(unsigned int)(j & 1));
	}
}

/* Element i of packed sums of bits 32, 16, 8 or 4. */
static inline TALLY_HD int32_t
tally_quant_load1(const void *sum, size_t i, unsigned int bits)
{
	const uint8_t *p = (const uint8_t *)sum;

	if (bits == 32)
		return (int32_t)tally_quant_ld32(p + 4 * i);
	if (bits == 16)
		return (int16_t)(uint16_t)tally_quant_ld16(p + 2 * i);
	if (bits == 8)
		return (int8_t)p[i];
	return tally_quant_nib(p[i / 2], (unsigned int)(i & 1));
}

/*
 * Decodes group k of the packed sums into x (16-byte aligned when vec).
 * Borrows sum, writes x.
 */
static inline TALLY_HD void
tally_quant_dec_group(const void *sum, float *x, size_t k, unsigned int bits,
	int vec, float s)
{
	int32_t r[TALLY_QUANT_GROUP];
	uint32_t w[TALLY_QUANT_GROUP];
	float *o = x + TALLY_QUANT_GROUP * k;

	tally_quant_load_group(sum, k, bits, vec, r);
	for (int j = 0; j < TALLY_QUANT_GROUP; j++)
		w[j] = tally_hd_f2u(tally_quant_dec1(r[j], s));
	if (vec) {
		tally_quant_st128(o, w);
	} else {
		for (int j = 0; j < TALLY_QUANT_GROUP; j++)
			o[j] = tally_hd_u2f(w[j]);
	}
}

/* Decodes the last n % 4 sums (after the groups). */
static inline TALLY_HD void
tally_quant_dec_tail(const void *sum, float *x, size_t n, unsigned int bits,
	float s)
{
	for (size_t i = n / TALLY_QUANT_GROUP * TALLY_QUANT_GROUP; i < n; i++)
		x[i] = tally_quant_dec1(tally_quant_load1(sum, i, bits), s);
}

#endif /* TALLY_GPU_CODEC_QUANT_QUANT_MATH_H */

/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Index math of shared-seed random-k (<tally/feedback.h>), shared by
 * randk.c and randk.cu.
 *
 * The k indices are the images of 0 .. k-1 under a pseudo-random
 * permutation of [0, n) keyed by (seed, n): a balanced Feistel network of
 * TALLY_RANDK_ROUNDS rounds over 2h-bit integers (2^2h >= n, h as small
 * as that allows, so 2^2h < 4n), restricted to [0, n) by cycle walking
 * (apply it again while the image is >= n; the walk stays on the cycle of
 * the start, which lies in [0, n), so it ends, after fewer than 4 steps on
 * average). A permutation gives distinct indices by construction, each
 * index is computed on its own (any chunk, either side), and the indices
 * of a smaller k are a prefix of those of a larger one.
 *
 * 12 rounds: with halves of a few bits (small n) a 6-round network
 * favours some ordered pairs of indices visibly (n = 16: chi-square of the
 * pairs 33 standard deviations over its mean; n = 5: 8); 10 rounds pass,
 * 12 leave a margin. The round function is SplitMix64's mixer of the
 * half and the round's key, cut to h bits.
 */
#ifndef TALLY_GPU_CODEC_FEEDBACK_RANDK_MATH_H
#define TALLY_GPU_CODEC_FEEDBACK_RANDK_MATH_H

#include <stdint.h>

#include "fb_math.h"

#define TALLY_RANDK_ROUNDS	12

/* The permutation's parameters, derived once per call on the host. */
struct tally_randk_key {
	uint64_t n;			/* domain of the indices */
	uint64_t mask;			/* 2^h - 1 */
	uint64_t k[TALLY_RANDK_ROUNDS];	/* round keys */
	unsigned int h;			/* bits of a half */
};

/* The key of (seed, n). */
static inline TALLY_HD struct tally_randk_key
tally_randk_key(uint64_t seed, uint64_t n)
{
	struct tally_randk_key key;
	uint64_t base = tally_fb_key(seed ^ tally_fb_mix64(n));
	unsigned int b = 0;

	/* b = bits of n - 1, h = ceil(b / 2). */
	for (uint64_t m = n > 0 ? n - 1 : 0; m != 0; m >>= 1)
		b++;
	key.n = n;
	key.h = (b + 1) / 2;
	key.mask = (1ull << key.h) - 1;
	for (unsigned int i = 0; i < TALLY_RANDK_ROUNDS; i++)
		key.k[i] = tally_fb_hash(base, i);
	return key;
}

/* The Feistel permutation of [0, 2^2h). */
static inline TALLY_HD uint64_t
tally_randk_perm(const struct tally_randk_key *key, uint64_t x)
{
	uint64_t l = x >> key->h, r = x & key->mask;

	for (unsigned int i = 0; i < TALLY_RANDK_ROUNDS; i++) {
		uint64_t t = l ^ (tally_fb_mix64(r ^ key->k[i]) & key->mask);

		l = r;
		r = t;
	}
	return (l << key->h) | r;
}

/* Index number j (j < n): the permutation of [0, n), by cycle walking. */
static inline TALLY_HD uint64_t
tally_randk_index(const struct tally_randk_key *key, uint64_t j)
{
	uint64_t x = j;

	do
		x = tally_randk_perm(key, x);
	while (x >= key->n);
	return x;
}

#endif /* TALLY_GPU_CODEC_FEEDBACK_RANDK_MATH_H */

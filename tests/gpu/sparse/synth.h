/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Synthetic gradients with known distributions, from a fixed-seed
 * generator (splitmix64), for the sparse codec's tests and for
 * `tally-bench codecs`. Every value gets a random sign; the magnitudes
 * follow the named law, times scale.
 */
#ifndef TALLY_TESTS_SPARSE_SYNTH_H
#define TALLY_TESTS_SPARSE_SYNTH_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

enum synth_dist {
	SYNTH_EXP,		/* |g| exponential: g Laplace */
	SYNTH_NORMAL,		/* g normal */
	SYNTH_MIX,		/* 90 % normal(1), 10 % Laplace(mean 8) */
	SYNTH_STUDENT3,		/* Student's t, 3 degrees of freedom */
	SYNTH_GPD,		/* |g| generalized Pareto, shape param */
	SYNTH_GAMMA,		/* |g| gamma, shape param */
	SYNTH_DIST_MAX_,
};

static inline const char *
synth_name(enum synth_dist d)
{
	static const char *const names[] = {
		"exponential", "normal", "normal+laplace", "student-t3",
		"gpd", "gamma",
	};

	return (unsigned int)d < SYNTH_DIST_MAX_ ? names[d] : "?";
}

static inline uint64_t
synth_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Uniform in (0, 1), never 0 or 1. */
static inline double
synth_unif(uint64_t *s)
{
	return ((double)(synth_next(s) >> 11) + 0.5) * 0x1p-53;
}

/* Standard normal (Box-Muller, one of the pair). */
static inline double
synth_normal(uint64_t *s)
{
	double u = synth_unif(s), v = synth_unif(s);

	return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

/* Gamma(shape a, scale 1): Marsaglia and Tsang, boosted below 1. */
static inline double
synth_gamma(uint64_t *s, double a)
{
	double boost = 1.0, d, c, x, v, u;

	if (a < 1.0) {
		boost = pow(synth_unif(s), 1.0 / a);
		a += 1.0;
	}
	d = a - 1.0 / 3.0;
	c = 1.0 / sqrt(9.0 * d);
	for (;;) {
		do {
			x = synth_normal(s);
			v = 1.0 + c * x;
		} while (v <= 0.0);
		v = v * v * v;
		u = synth_unif(s);
		if (log(u) < 0.5 * x * x + d - d * v + d * log(v))
			return boost * d * v;
	}
}

/* One magnitude of law d with parameter param. */
static inline double
synth_mag(uint64_t *s, enum synth_dist d, double param)
{
	double z, c;

	switch (d) {
	case SYNTH_EXP:
		return -log(synth_unif(s));
	case SYNTH_NORMAL:
		return fabs(synth_normal(s));
	case SYNTH_MIX:
		if (synth_unif(s) < 0.9)
			return fabs(synth_normal(s));
		return -8.0 * log(synth_unif(s));
	case SYNTH_STUDENT3:
		z = synth_normal(s);
		c = 0.0;
		for (int i = 0; i < 3; i++) {
			double y = synth_normal(s);

			c += y * y;
		}
		return fabs(z) / sqrt(c / 3.0);
	case SYNTH_GPD:
		return (pow(synth_unif(s), -param) - 1.0) / param;
	case SYNTH_GAMMA:
		return synth_gamma(s, param);
	default:
		return 0.0;
	}
}

/* x[0..n) = random sign * scale * magnitude of law d, from seed. */
static inline void
synth_fill(float *x, size_t n, enum synth_dist d, double param, double scale,
	uint64_t seed)
{
	uint64_t s = seed;

	for (size_t i = 0; i < n; i++) {
		double m = scale * synth_mag(&s, d, param);

		x[i] = (float)((synth_next(&s) & 1) ? m : -m);
	}
}

#endif /* TALLY_TESTS_SPARSE_SYNTH_H */

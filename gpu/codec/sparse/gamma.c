/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The regularized upper incomplete gamma Q(a, x) = Gamma(a, x) / Gamma(a)
 * and its inverse in x, for SIDCo-G's quantile: the series of P = 1 - Q
 * below x = a + 1, the continued fraction of Q above (each where it
 * converges fast and keeps its accuracy), and Halley's method for the
 * inverse. Host only, in double.
 */
#include <float.h>
#include <math.h>

#include "sparse_int.h"

#define GAMMA_EPS	1e-15
#define GAMMA_ITERS	500
#define GAMMA_TINY	1e-300

/* ln(x^a e^-x / Gamma(a)), the factor both expansions share. */
static double
gamma_lfactor(double a, double x)
{
	int sign;

	return a * log(x) - x - lgamma_r(a, &sign);
}

/* P(a, x) by its series, for x < a + 1. */
static double
gamma_p_series(double a, double x)
{
	double term = 1.0 / a, sum = term;

	for (int i = 1; i < GAMMA_ITERS; i++) {
		term *= x / (a + i);
		sum += term;
		if (fabs(term) < fabs(sum) * GAMMA_EPS)
			break;
	}
	return sum * exp(gamma_lfactor(a, x));
}

/* Q(a, x) by its continued fraction (modified Lentz), for x >= a + 1. */
static double
gamma_q_cf(double a, double x)
{
	double b = x + 1.0 - a, c = 1.0 / GAMMA_TINY, d = 1.0 / b, h = d;

	for (int i = 1; i < GAMMA_ITERS; i++) {
		double an = -i * (i - a), del;

		b += 2.0;
		d = an * d + b;
		d = fabs(d) < GAMMA_TINY ? GAMMA_TINY : d;
		c = b + an / c;
		c = fabs(c) < GAMMA_TINY ? GAMMA_TINY : c;
		d = 1.0 / d;
		del = d * c;
		h *= del;
		if (fabs(del - 1.0) < GAMMA_EPS)
			break;
	}
	return h * exp(gamma_lfactor(a, x));
}

double
sparse_gamma_q(double a, double x)
{
	if (x <= 0.0)
		return 1.0;
	if (x < a + 1.0)
		return 1.0 - gamma_p_series(a, x);
	return gamma_q_cf(a, x);
}

/* Upper q-quantile of the standard normal (|error| < 5e-3: a start). */
static double
normal_q_inv(double q)
{
	double pp = q < 0.5 ? q : 1.0 - q;
	double t = sqrt(-2.0 * log(pp));
	double z = t - (2.30753 + t * 0.27061) /
		(1.0 + t * (0.99229 + t * 0.04481));

	return q < 0.5 ? z : -z;
}

/* A start for x with Q(a, x) = q. */
static double
gamma_q_inv_start(double a, double q)
{
	double p = 1.0 - q, t, z, x;

	if (a > 1.0) {
		/* Wilson-Hilferty: (x / a)^(1/3) is nearly normal. */
		z = normal_q_inv(q);
		t = 1.0 - 1.0 / (9.0 * a) + z / (3.0 * sqrt(a));
		x = a * t * t * t;
		return x > 1e-3 * a ? x : 1e-3 * a;
	}
	/* Small shape: P ~ x^a / (a Gamma(a)) near 0, Q ~ e^-x far out. */
	t = 1.0 - a * (0.253 + a * 0.12);
	if (p < t)
		return pow(p / t, 1.0 / a);
	return 1.0 - log(q / (1.0 - t));
}

double
sparse_gamma_q_inv(double a, double q)
{
	double x = gamma_q_inv_start(a, q);

	for (int i = 0; i < 100; i++) {
		/* f = Q - q, f' = -dens, f'' / f' = (a - 1) / x - 1. */
		double dens = exp(gamma_lfactor(a, x)) / x;
		double u, step, nx;

		if (!(dens > 0.0))
			break;
		u = -(sparse_gamma_q(a, x) - q) / dens;	/* f / f' */
		step = u / (1.0 - 0.5 * u * ((a - 1.0) / x - 1.0));
		nx = x - step;
		if (!(nx > 0.0))
			nx = 0.5 * x;
		if (fabs(nx - x) <= 1e-13 * nx) {
			x = nx;
			break;
		}
		x = nx;
	}
	return x;
}

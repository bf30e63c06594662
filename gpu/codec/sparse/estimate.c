/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Threshold estimators of block-sparse selection (<tally/sparse.h>): the
 * argument checks, SIDCo's fits and stages (host math in double, shared
 * with the CUDA driver through sparse_int.h), and the CPU entry point.
 * docs/codecs/sparse.md derives the formulas.
 */
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <tally/codec.h>
#include <tally/sparse.h>

#include "sparse_int.h"
#include "sparse_math.h"

_Static_assert((int)TALLY_SPARSE_SIDCO_EXP == (int)TALLY_EST_SIDCO_EXP &&
	(int)TALLY_SPARSE_SIDCO_GPD == (int)TALLY_EST_SIDCO_GPD &&
	(int)TALLY_SPARSE_SIDCO_GAMMA == (int)TALLY_EST_SIDCO_GAMMA &&
	(int)TALLY_SPARSE_DGC == (int)TALLY_EST_DGC &&
	(int)TALLY_SPARSE_TOPK == (int)TALLY_EST_TOPK,
	"estimators must keep the values of the codec spec's");

#define DEF_FIRST_DENSITY	0.25
#define DEF_STAGE_DENSITY	0.25
#define DEF_SAMPLE		0.01

const char *
tally_sparse_est_name(enum tally_sparse_est est)
{
	static const char *const names[] = {
		[TALLY_SPARSE_SIDCO_EXP] = "sidco-exp",
		[TALLY_SPARSE_SIDCO_GPD] = "sidco-gpd",
		[TALLY_SPARSE_SIDCO_GAMMA] = "sidco-gamma",
		[TALLY_SPARSE_DGC] = "dgc",
		[TALLY_SPARSE_TOPK] = "topk",
	};

	if ((unsigned int)est >= TALLY_SPARSE_EST_MAX_)
		return "?";
	return names[est];
}

/* A density knob: 0 takes def, otherwise in (0, 1). */
static int
density_knob(double v, double def, double *out)
{
	if (v == 0.0) {
		*out = def;
		return 0;
	}
	if (!(v > 0.0 && v < 1.0))
		return -EINVAL;
	*out = v;
	return 0;
}

int
sparse_knobs_of(const struct tally_sparse_params *p, struct sparse_knobs *k)
{
	static const struct tally_sparse_params none;

	if (p == NULL)
		p = &none;
	if (p->stages > TALLY_SPARSE_STAGES_MAX)
		return -EINVAL;
	k->stages = p->stages;
	if (density_knob(p->first_density, DEF_FIRST_DENSITY,
			&k->first_density) < 0 ||
	    density_knob(p->stage_density, DEF_STAGE_DENSITY,
			&k->stage_density) < 0)
		return -EINVAL;
	if (p->sample == 0.0)
		k->sample = DEF_SAMPLE;
	else if (p->sample >= 1e-6 && p->sample <= 1.0)
		k->sample = p->sample;
	else
		return -EINVAL;
	k->sidco_sample = p->sample;
	k->seed = p->seed;
	return 0;
}

/* See sparse_int.h: SIDCo's sample, the stride and the runs it takes. */
void
sparse_sidco_sample(size_t n, double sample, uint64_t seed,
	struct sparse_sample *ss)
{
	size_t nr = TALLY_SPARSE_SIDCO_RUNS(n), s;
	size_t min = TALLY_SPARSE_SIDCO_MIN_SAMPLE / TALLY_SPARSE_SIDCO_RUN;

	if (sample == 0.0) {
		s = nr / (TALLY_SPARSE_SIDCO_SAMPLE / TALLY_SPARSE_SIDCO_RUN);
	} else {
		s = (size_t)floor(1.0 / sample + 0.5);
		if (nr / s < min)
			s = nr / min;
	}
	if (s < 1)
		s = 1;
	ss->n = n;
	ss->stride = s;
	ss->seed = seed;
	ss->m = (nr + s - 1) / s;
	ss->elems = ss->m * TALLY_SPARSE_SIDCO_RUN;
	/* The last run may be short, and it is in the last stratum. */
	if (n % TALLY_SPARSE_SIDCO_RUN != 0 &&
	    tally_sparse_sample_pos(seed, ss->m - 1, s, nr) == nr - 1)
		ss->elems -= TALLY_SPARSE_SIDCO_RUN -
			n % TALLY_SPARSE_SIDCO_RUN;
}

/* How many runs ahead sparse_sample_gather() fetches. */
#define GATHER_AHEAD	16

/*
 * See sparse_int.h. The runs lie far apart in x: each is fetched (both
 * cache lines it may cross) GATHER_AHEAD runs before it is copied.
 */
void
sparse_sample_gather(const float *x, const struct sparse_sample *ss,
	float *out)
{
	size_t nr = TALLY_SPARSE_SIDCO_RUNS(ss->n);
	size_t run = TALLY_SPARSE_SIDCO_RUN;

	for (size_t r = 0; r < ss->m; r++) {
		size_t p, len;

		if (r + GATHER_AHEAD < ss->m) {
			p = tally_sparse_sample_pos(ss->seed, r + GATHER_AHEAD,
				ss->stride, nr) * run;
			__builtin_prefetch(x + p);
			__builtin_prefetch(x + p + run - 1);
		}
		p = tally_sparse_sample_pos(ss->seed, r, ss->stride, nr) * run;
		len = ss->n - p < run ? ss->n - p : run;
		memcpy(out, x + p, len * sizeof(*x));
		out += len;
	}
}

int
sparse_check_args(const void *g, size_t n, double density,
	enum tally_sparse_est est, const float *threshold)
{
	if (threshold == NULL || (g == NULL && n > 0))
		return -EINVAL;
	if (!(density > 0.0 && density <= 1.0))
		return -EINVAL;
	if ((unsigned int)est >= TALLY_SPARSE_EST_MAX_ ||
	    n > TALLY_SPARSE_N_MAX)
		return -EINVAL;
	return 0;
}

/*
 * Densities of SIDCo's stages for a target dp (< 1) among the non-zero
 * elements; returns how many (their product is dp).
 */
static unsigned int
stage_plan(double dp, const struct sparse_knobs *k,
	double d[TALLY_SPARSE_STAGES_MAX])
{
	double r, i;
	unsigned int m, s;
	int later;

	if (k->stages == 1 || dp >= k->first_density) {
		d[0] = dp;
		return 1;
	}
	d[0] = k->first_density;
	r = dp / k->first_density;
	if (k->stages >= 2) {
		m = k->stages;
		for (s = 1; s < m; s++)
			d[s] = pow(r, 1.0 / (m - 1));
		return m;
	}
	/* Automatic: later stages at i each, the last what is left. */
	i = k->stage_density;
	later = (int)ceil(log(r) / log(i) - 1e-9);
	later = later < 1 ? 1 : later;
	later = later > TALLY_SPARSE_STAGES_MAX - 1 ?
		TALLY_SPARSE_STAGES_MAX - 1 : later;
	for (s = 1; s < (unsigned int)later; s++)
		d[s] = i;
	d[later] = r / pow(i, later - 1);
	return (unsigned int)later + 1;
}

/*
 * Upper delta-quantile of the exceedances whose moments are m (count
 * >= 1), for est at stage s: exponential (SIDCo-E), generalized Pareto
 * by moments (SIDCo-GP; SIDCo-G after its first stage), gamma by the
 * approximate MLE of its shape (SIDCo-G's first stage).
 */
static double
fit_quantile(enum tally_sparse_est est, unsigned int s,
	const struct tally_sparse_moments *m, double delta)
{
	double c = (double)m->count, mean = m->sum / c, L = -log(delta);
	double var, r, xi, sigma, sl, a;

	if (est == TALLY_SPARSE_SIDCO_EXP)
		return mean * L;
	if (est == TALLY_SPARSE_SIDCO_GAMMA && s == 0) {
		/*
		 * s = ln(mean) - mean(ln y) >= 0, about half the squared
		 * coefficient of variation when that is small; the float
		 * logarithms make it good to some 1e-6, so below 1e-5 every
		 * y counts as the same.
		 */
		sl = log(mean) - m->sumlog / c;
		if (!(sl > 1e-5))
			return mean;
		a = (3.0 - sl + sqrt((sl - 3.0) * (sl - 3.0) + 24.0 * sl)) /
			(12.0 * sl);
		return mean / a * sparse_gamma_q_inv(a, delta);
	}
	var = m->sum2 / c - mean * mean;
	if (!(var > 0.0))
		return mean;
	r = mean * mean / var;
	xi = 0.5 * (1.0 - r);
	sigma = 0.5 * mean * (1.0 + r);
	if (fabs(xi) < 1e-9)
		return sigma * L;
	return sigma * expm1(xi * L) / xi;
}

/* Moments a stage of est wants: the gamma fit needs ln y, GP needs y^2. */
static unsigned int
stage_want(enum tally_sparse_est est, unsigned int s)
{
	if (est == TALLY_SPARSE_SIDCO_EXP)
		return 0;
	if (est == TALLY_SPARSE_SIDCO_GAMMA && s == 0)
		return TALLY_SPARSE_M_LOG;
	return TALLY_SPARSE_M_SQ;
}

/*
 * SIDCo: fit the non-zero finite magnitudes, threshold eta_1 at the
 * first stage's density; then each later stage fits the exceedances over
 * the last threshold (peaks over threshold) and moves it up by their
 * quantile at its density. A stage with fewer than 2 exceedances ends it.
 * n and the moments are those of what the fits see (the whole tensor, or
 * its sample): the fraction of it that is non-zero gives the target
 * among the non-zeros.
 */
int
sparse_sidco(sparse_moments_fn fn, void *arg, size_t n, double density,
	enum tally_sparse_est est, const struct sparse_knobs *k,
	float *threshold)
{
	struct tally_sparse_moments m;
	double d[TALLY_SPARSE_STAGES_MAX], dp, eta;
	unsigned int ns, s;
	float t;
	int ret;

	ret = fn(arg, 0.0f, stage_want(est, 0), &m);
	if (ret < 0)
		return ret;
	dp = m.count == 0 ? 1.0 : density * (double)n / (double)m.count;
	if (dp >= 1.0) {
		*threshold = FLT_TRUE_MIN;
		return 0;
	}
	ns = stage_plan(dp, k, d);
	eta = fit_quantile(est, 0, &m, d[0]);
	for (s = 1; s < ns; s++) {
		t = (float)eta;
		if (!(t < FLT_MAX))
			break;
		ret = fn(arg, t, stage_want(est, s), &m);
		if (ret < 0)
			return ret;
		if (m.count < 2)
			break;
		eta = (double)t + fit_quantile(est, s, &m, d[s]);
	}
	if (!(eta >= FLT_TRUE_MIN))	/* NaN too: keep what is not zero */
		eta = FLT_TRUE_MIN;
	*threshold = eta >= FLT_MAX ? FLT_MAX : (float)eta;
	if (*threshold < FLT_TRUE_MIN)
		*threshold = FLT_TRUE_MIN;
	return 0;
}

/* fn of sparse_sidco() for the CPU: the moments of the tensor in arg. */
struct cpu_tensor {
	const float *g;
	size_t n;
};

static int
cpu_moments(void *arg, float t, unsigned int want,
	struct tally_sparse_moments *m)
{
	const struct cpu_tensor *ct = arg;

	return tally_sparse_moments(ct->g, ct->n, t, want, m);
}

/*
 * SIDCo on the CPU: the stages over g itself, or over its sample
 * gathered into a tensor of its own (the stages read it several times;
 * it is a few MB where g may be hundreds).
 */
static int
cpu_sidco(const float *g, size_t n, double density,
	enum tally_sparse_est est, const struct sparse_knobs *k,
	float *threshold)
{
	struct sparse_sample ss;
	struct cpu_tensor ct = { .g = g, .n = n };
	float *buf = NULL;
	int ret;

	sparse_sidco_sample(n, k->sidco_sample, k->seed, &ss);
	if (ss.stride > 1) {
		buf = malloc(ss.elems * sizeof(*buf));
		if (buf == NULL)
			return -ENOMEM;
		sparse_sample_gather(g, &ss, buf);
		ct = (struct cpu_tensor){ .g = buf, .n = ss.elems };
	}
	ret = sparse_sidco(cpu_moments, &ct, ct.n, density, est, k,
		threshold);
	free(buf);
	return ret;
}

/* The CPU's estimators; see <tally/sparse.h>. */
int
tally_sparse_threshold(const float *g, size_t n, double density,
	enum tally_sparse_est est, const struct tally_sparse_params *p,
	float *threshold)
{
	struct sparse_knobs k;
	uint32_t key;
	float *sample;
	size_t stride, m;
	int ret;

	ret = sparse_check_args(g, n, density, est, threshold);
	if (ret < 0 || (ret = sparse_knobs_of(p, &k)) < 0)
		return ret;
	if (n == 0 || density == 1.0) {
		*threshold = FLT_TRUE_MIN;
		return 0;
	}
	switch (est) {
	case TALLY_SPARSE_TOPK:
		ret = sparse_kth_key(g, n, sparse_topk_k(n, density), &key);
		break;
	case TALLY_SPARSE_DGC:
		sparse_dgc_plan(n, k.sample, &stride, &m);
		sample = malloc(m * sizeof(*sample));
		if (sample == NULL)
			return -ENOMEM;
		for (size_t j = 0; j < m; j++)
			sample[j] = g[tally_sparse_sample_pos(k.seed, j,
				stride, n)];
		ret = sparse_kth_key(sample, m, sparse_topk_k(m, density),
			&key);
		free(sample);
		break;
	default:
		return cpu_sidco(g, n, density, est, &k, threshold);
	}
	if (ret < 0)
		return ret;
	*threshold = sparse_key_threshold(key);
	return 0;
}

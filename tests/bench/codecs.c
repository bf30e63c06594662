/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tally-bench codecs: the codecs on one CPU core, side by side in one run.
 *
 * 1. Throughput of every codec pass, in GB/s of f32 input: fixed point,
 *    block selection, the feedback family (<tally/feedback.h>); the
 *    quantizers' rows are there too.
 * 2. The threshold estimators of <tally/sparse.h> (SIDCo-E, SIDCo-GP,
 *    SIDCo-G, each as the library picks its sample, on every element
 *    and on a sample of a given fraction; DGC) against exact top-k
 *    (tally's radix select, and a quickselect on a copy of the
 *    magnitudes, the nth_element baseline): time a call and achieved /
 *    target density, on heavy-tailed synthetic gradients (Student's t,
 *    3 degrees of freedom) and on real gradients read from a file
 *    (tools/bench/capture_grads.py writes one).
 * 3. The verdict on the target: SIDCo within +-20 % of the target
 *    density at 1 %, and at least 5x faster than exact top-k on 25M
 *    elements, against each exact baseline.
 * tools/bench-codecs builds, captures the real gradients and runs this;
 * docs/tools/bench-codecs.md has measured numbers.
 */
#include <errno.h>
#include <float.h>
#include <getopt.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tally/feedback.h>
#include <tally/fixp.h>
#include <tally/powersgd.h>
#include <tally/quant.h>
#include <tally/sparse.h>

#include "bench.h"
#include "synth.h"

#define MAX_DENS	8
/* The quickselect baseline, in place of an estimator. */
#define EST_QSEL	TALLY_SPARSE_EST_MAX_
/* How a row's SIDCo samples: the library's default, all, --sample. */
enum row_sample {
	SMP_DEFAULT,
	SMP_ALL,
	SMP_OPT,
};

/* Rows of the estimator tables. */
static const struct est_kind {
	int est;		/* enum tally_sparse_est, or EST_QSEL */
	enum row_sample smp;
} kinds[] = {
	{ TALLY_SPARSE_SIDCO_EXP, SMP_DEFAULT },
	{ TALLY_SPARSE_SIDCO_EXP, SMP_ALL },
	{ TALLY_SPARSE_SIDCO_EXP, SMP_OPT },
	{ TALLY_SPARSE_SIDCO_GPD, SMP_DEFAULT },
	{ TALLY_SPARSE_SIDCO_GPD, SMP_ALL },
	{ TALLY_SPARSE_SIDCO_GPD, SMP_OPT },
	{ TALLY_SPARSE_SIDCO_GAMMA, SMP_DEFAULT },
	{ TALLY_SPARSE_SIDCO_GAMMA, SMP_ALL },
	{ TALLY_SPARSE_SIDCO_GAMMA, SMP_OPT },
	{ TALLY_SPARSE_DGC, SMP_DEFAULT },
	{ TALLY_SPARSE_TOPK, SMP_DEFAULT },
	{ EST_QSEL, SMP_DEFAULT },
};
#define NROWS		(sizeof(kinds) / sizeof(kinds[0]))
/* The rows of the exact baselines. */
#define ROW_TOPK	(NROWS - 2)
#define ROW_QSEL	(NROWS - 1)
#define DEF_SAMPLE	0.0625
/* The target of the issue. */
#define TARGET_DENSITY	0.01
#define TARGET_TOL	0.20
#define TARGET_SPEEDUP	5.0
#define TARGET_ELEMS	25000000u

struct codecs_opts {
	size_t elems;
	double dens[MAX_DENS];
	unsigned int ndens;
	unsigned int reps;
	const char *real;
	size_t real_dim;
	uint64_t seed;
	double sample;		/* of the SMP_OPT rows */
};

/* One estimator row's figures over a data set (means over tensors). */
struct est_row {
	double ms;		/* median time of a call */
	double ratio;		/* achieved / target density (mean) */
	double rmin, rmax;
	double blocks;		/* block density */
	unsigned int tensors;
};

static const struct option long_opts[] = {
	{ "elems", required_argument, NULL, 'e' },
	{ "densities", required_argument, NULL, 'd' },
	{ "reps", required_argument, NULL, 'r' },
	{ "real", required_argument, NULL, 'R' },
	{ "real-dim", required_argument, NULL, 'D' },
	{ "seed", required_argument, NULL, 's' },
	{ "sample", required_argument, NULL, 'S' },
	{ "quick", no_argument, NULL, 'q' },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

static void
usage(FILE *f)
{
	fprintf(f,
		"usage: tally-bench codecs [options]\n\n"
		"Codec throughput (GB/s of f32 input) and the sparse threshold\n"
		"estimators against exact top-k, on one core.\n\n"
		"  --elems N        synthetic gradient elements (default %u)\n"
		"  --densities L    comma-separated target densities in (0, 1)\n"
		"                   (default 0.01,0.001,0.1)\n"
		"  --reps N         timed calls of each, the median counts\n"
		"                   (default 5)\n"
		"  --real FILE      real gradients: raw little-endian f32, tensors\n"
		"                   of --real-dim elements one after the other\n"
		"  --real-dim N     elements of one real gradient tensor\n"
		"  --seed N         synthetic data and the samples (default 1)\n"
		"  --sample F       SIDCo's sample in the 'sidco-* s=F' rows, a\n"
		"                   fraction in [1e-6, 1] (default %g); the\n"
		"                   'sidco-*' rows sample as the library does by\n"
		"                   default, the 'sidco-* s=1' rows see all\n"
		"  --quick          a tiny run, for smoke tests\n"
		"  -h, --help       this text\n", TARGET_ELEMS, DEF_SAMPLE);
}

static int
parse_densities(const char *arg, struct codecs_opts *o)
{
	char buf[256], *save = NULL, *tok;

	snprintf(buf, sizeof(buf), "%s", arg);
	o->ndens = 0;
	for (tok = strtok_r(buf, ",", &save); tok != NULL;
	     tok = strtok_r(NULL, ",", &save)) {
		char *end;
		double d = strtod(tok, &end);

		if (*end != '\0' || !(d > 0.0 && d < 1.0) ||
		    o->ndens == MAX_DENS) {
			fprintf(stderr, "--densities: '%s' is not a list of up "
				"to %d numbers in (0, 1)\n", arg, MAX_DENS);
			return -1;
		}
		o->dens[o->ndens++] = d;
	}
	return o->ndens > 0 ? 0 : -1;
}

static int
parse_opts(int argc, char **argv, struct codecs_opts *o)
{
	unsigned long v;
	int c;

	*o = (struct codecs_opts){ .elems = TARGET_ELEMS,
		.dens = { 0.01, 0.001, 0.1 }, .ndens = 3, .reps = 5,
		.seed = 1, .sample = DEF_SAMPLE };
	while ((c = getopt_long(argc, argv, "h", long_opts, NULL)) != -1) {
		switch (c) {
		case 'e':
			if (bench_parse_uint("elems", optarg, 1024,
					1ul << 31, &v) < 0)
				return -1;
			o->elems = v;
			break;
		case 'd':
			if (parse_densities(optarg, o) < 0)
				return -1;
			break;
		case 'r':
			if (bench_parse_uint("reps", optarg, 1, 1000, &v) < 0)
				return -1;
			o->reps = (unsigned int)v;
			break;
		case 'R':
			o->real = optarg;
			break;
		case 'D':
			if (bench_parse_uint("real-dim", optarg, 1,
					1ul << 31, &v) < 0)
				return -1;
			o->real_dim = v;
			break;
		case 's':
			if (bench_parse_uint("seed", optarg, 0, ~0ul, &v) < 0)
				return -1;
			o->seed = v;
			break;
		case 'S': {
			char *end;

			o->sample = strtod(optarg, &end);
			if (*end != '\0' || !(o->sample >= 1e-6 &&
			    o->sample <= 1.0)) {
				fprintf(stderr, "--sample: '%s' is not in "
					"[1e-6, 1]\n", optarg);
				return -1;
			}
			break;
		}
		case 'q':
			o->elems = 1u << 20;
			o->reps = 1;
			break;
		case 'h':
			usage(stdout);
			exit(BENCH_EXIT_OK);
		default:
			return -1;
		}
	}
	if (optind != argc) {
		fprintf(stderr, "unexpected argument '%s'\n", argv[optind]);
		return -1;
	}
	if ((o->real != NULL) != (o->real_dim != 0)) {
		fprintf(stderr, "--real and --real-dim go together\n");
		return -1;
	}
	return 0;
}

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double
median(double *v, unsigned int n)
{
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/*
 * ---- Throughput rows ------------------------------------------------
 * One row a codec pass: run(ctx) makes one pass over ctx->n floats of
 * ctx->x. To add a codec (the quantizers of <tally/quant.h>, the feedback
 * codecs of <tally/feedback.h>, ...), write its run function over struct
 * tput_ctx (add the scratch it needs there, allocated in tput_table())
 * and add its row to tput_rows[]; the table prints it with the others.
 */
struct tput_ctx {
	const float *x;
	size_t n;
	int32_t *q;		/* n, for encodings */
	float *y;		/* n, for decodings */
	uint32_t *bitmap, *blocks;
	float *bmax;
	int fixp_exp;
	float thr;		/* exact 1 % threshold of x */
	float absmax;
	/* Feedback codecs: a residual, a second float state, a mask. */
	float *r, *u;
	int8_t *q8;
	uint8_t *mask;
	int tern_exp;		/* 2-bit threshold's exponent */
	float qscale;		/* q8's scale (wide, 127 levels) */
	float qscale4;		/* q4's (7 levels) */
	/* PowerSGD at rank PSGD_RANK: the near-square view, P and Q. */
	uint32_t rows, cols;
	float *p, *pq;
};

#define PSGD_RANK	4

static volatile float tput_sink;

static void
run_fixp_absmax(struct tput_ctx *c)
{
	tput_sink = tally_fixp_absmax(c->x, c->n);
}

static void
run_fixp_encode(struct tput_ctx *c)
{
	tally_fixp_encode(c->x, c->q, c->n, c->fixp_exp);
}

static void
run_fixp_decode(struct tput_ctx *c)
{
	tally_fixp_decode(c->q, c->y, c->n, c->fixp_exp);
}

static void
run_sparse_select(struct tput_ctx *c)
{
	struct tally_sparse_sel sel;

	(void)tally_sparse_select(c->x, c->n, c->thr, c->bitmap, c->blocks,
		&sel);
	tput_sink = (float)sel.blocks;
}

static void
run_sparse_block_max(struct tput_ctx *c)
{
	tally_sparse_block_max(c->x, c->n, c->bmax);
}

static void
run_sparse_moments(struct tput_ctx *c)
{
	struct tally_sparse_moments m;

	(void)tally_sparse_moments(c->x, c->n, 0.0f, 0, &m);
	tput_sink = (float)m.sum;
}

static void
run_ef_apply(struct tput_ctx *c)
{
	tally_ef_apply(c->y, c->x, c->r, c->n);
}

static void
run_ef_update(struct tput_ctx *c)
{
	tput_sink = (float)tally_ef_update(c->r, c->x, c->y, c->n);
}

static void
run_dgc_accumulate(struct tput_ctx *c)
{
	tally_dgc_accumulate(c->u, c->y, c->x, c->n, 0.9f);
}

static void
run_dgc_select(struct tput_ctx *c)
{
	tput_sink = (float)tally_dgc_select(c->x, c->mask, c->n, c->thr);
}

static void
run_2bit_encode(struct tput_ctx *c)
{
	tally_2bit_encode_i8(c->r, c->x, c->q8, c->n, c->tern_exp);
}

static void
run_tern_encode(struct tput_ctx *c)
{
	(void)tally_tern_encode_i8(c->x, c->q8, c->n, c->absmax, 7, 0);
}

static void
run_sign_encode(struct tput_ctx *c)
{
	tally_sign_encode(c->x, c->mask, c->n);
}

static void
run_randk_gather(struct tput_ctx *c)
{
	uint64_t k = tally_randk_k(c->n, 0.01);

	(void)tally_randk_gather(c->x, c->y, 0, (size_t)k, c->n, 7);
}

static void
run_quant_encode_i8(struct tput_ctx *c)
{
	tally_quant_encode_i8(c->x, c->q8, c->n, c->qscale, 127, 7, 0);
}

static void
run_quant_encode_i4(struct tput_ctx *c)
{
	tally_quant_encode_i4(c->x, (uint8_t *)c->q8, c->n, c->qscale4, 7, 7,
		0);
}

static void
run_quant_decode_i8(struct tput_ctx *c)
{
	tally_quant_decode_i8(c->q8, c->y, c->n, c->qscale);
}

static void
run_psgd_p(struct tput_ctx *c)
{
	tally_psgd_p(c->x, c->n, c->rows, c->cols, c->pq, PSGD_RANK, c->p);
}

static void
run_psgd_q(struct tput_ctx *c)
{
	tally_psgd_q(c->x, c->n, c->rows, c->cols, c->p, PSGD_RANK, c->pq);
}

static void
run_psgd_decompress(struct tput_ctx *c)
{
	tally_psgd_decompress(c->p, c->pq, c->rows, c->cols, PSGD_RANK, 1.0f,
		c->y, c->n);
}

static const struct tput_row {
	const char *name;
	const char *what;
	void (*run)(struct tput_ctx *c);
} tput_rows[] = {
	{ "fixp-absmax", "max |x| (the scale round)", run_fixp_absmax },
	{ "fixp-encode", "f32 -> i32, shared exponent", run_fixp_encode },
	{ "fixp-decode", "i32 -> f32 (input: the i32s)", run_fixp_decode },
	{ "sparse-select", "blocks over the 1 % threshold", run_sparse_select },
	{ "sparse-blockmax", "largest magnitude per block",
		run_sparse_block_max },
	{ "sparse-moments", "one SIDCo-E stage (sum, count)",
		run_sparse_moments },
	{ "ef-apply", "v = g + r (error feedback)", run_ef_apply },
	{ "ef-update", "r = v - sent", run_ef_update },
	{ "dgc-accumulate", "DGC momentum correction", run_dgc_accumulate },
	{ "dgc-select", "DGC mask at the 1 % threshold", run_dgc_select },
	{ "2bit-encode-i8", "MXNet 2-bit with residual, i8", run_2bit_encode },
	{ "tern-encode-i8", "TernGrad, i8", run_tern_encode },
	{ "sign-encode", "signSGD bits", run_sign_encode },
	{ "randk-gather", "shared-seed random-k, 1 %", run_randk_gather },
	{ "quant-encode-i8", "q8: stochastic i8, shared scale",
		run_quant_encode_i8 },
	{ "quant-encode-i4", "q4: stochastic i4 nibbles", run_quant_encode_i4 },
	{ "quant-decode-i8", "q8: narrow i8 sums -> f32", run_quant_decode_i8 },
	{ "psgd-p", "PowerSGD rank 4: P = M Q", run_psgd_p },
	{ "psgd-q", "PowerSGD rank 4: Q = M^T P", run_psgd_q },
	{ "psgd-decompress", "PowerSGD rank 4: P Q^T -> f32",
		run_psgd_decompress },
};

static void
tput_table(const float *x, size_t n, unsigned int reps)
{
	struct tput_ctx c = { .x = x, .n = n };
	size_t nb = TALLY_SPARSE_NBLOCKS(n);
	double *t = calloc(reps, sizeof(*t));

	c.q = malloc(n * sizeof(*c.q));
	c.y = malloc(n * sizeof(*c.y));
	c.bitmap = malloc(TALLY_SPARSE_BITMAP_WORDS(n) * sizeof(uint32_t));
	c.blocks = malloc(nb * sizeof(uint32_t));
	c.bmax = malloc(nb * sizeof(float));
	c.r = calloc(n, sizeof(*c.r));
	c.u = calloc(n, sizeof(*c.u));
	c.q8 = malloc(n);
	c.mask = malloc(n);
	if (tally_psgd_shape(n, 0, &c.rows, &c.cols) != 0) {
		fprintf(stderr, "codecs: no PowerSGD view of %zu elements\n",
			n);
		exit(BENCH_EXIT_FAIL);
	}
	c.p = malloc((size_t)c.rows * PSGD_RANK * sizeof(*c.p));
	c.pq = malloc((size_t)c.cols * PSGD_RANK * sizeof(*c.pq));
	if (t == NULL || c.q == NULL || c.y == NULL || c.bitmap == NULL ||
	    c.blocks == NULL || c.bmax == NULL || c.r == NULL || c.u == NULL ||
	    c.q8 == NULL || c.mask == NULL || c.p == NULL || c.pq == NULL) {
		fprintf(stderr, "codecs: out of memory\n");
		exit(BENCH_EXIT_FAIL);
	}
	(void)tally_fixp_exponent(tally_fixp_absmax(x, n), 8, &c.fixp_exp);
	(void)tally_sparse_threshold(x, n, 0.01, TALLY_SPARSE_TOPK, NULL,
		&c.thr);
	run_fixp_encode(&c);	/* decode reads these */
	c.absmax = tally_fixp_absmax(x, n);
	if (tally_2bit_exponent(c.thr, &c.tern_exp) < 0)
		c.tern_exp = 0;
	memset(c.y, 0, n * sizeof(*c.y));
	if (tally_quant_scale(c.absmax, 127, &c.qscale) != 0)
		c.qscale = 1.0f;
	if (tally_quant_scale(c.absmax, 7, &c.qscale4) != 0)
		c.qscale4 = 1.0f;
	tally_psgd_init_q(c.pq, c.cols, PSGD_RANK, 7);
	run_psgd_p(&c);		/* q and decompress read P */
	tally_psgd_orthonormalize(c.p, c.rows, PSGD_RANK);
	printf("\n== CPU throughput, %zu f32 elements (%.0f MB), median of "
		"%u\n", n, n * 4 / 1e6, reps);
	printf("%-16s %8s %9s  %s\n", "codec pass", "GB/s", "ms/call", "what");
	for (size_t r = 0; r < sizeof(tput_rows) / sizeof(tput_rows[0]); r++) {
		double ms;

		tput_rows[r].run(&c);	/* warm-up: page faults, clones */
		for (unsigned int i = 0; i < reps; i++) {
			uint64_t t0 = bench_now_ns();

			tput_rows[r].run(&c);
			t[i] = (bench_now_ns() - t0) / 1e6;
		}
		ms = median(t, reps);
		printf("%-16s %8.2f %9.3f  %s\n", tput_rows[r].name,
			n * 4.0 / (ms * 1e6), ms, tput_rows[r].what);
	}
	free(t);
	free(c.q);
	free(c.p);
	free(c.pq);
	free(c.y);
	free(c.bitmap);
	free(c.blocks);
	free(c.bmax);
	free(c.r);
	free(c.u);
	free(c.q8);
	free(c.mask);
}

/*
 * ---- Exact top-k by quickselect: the nth_element baseline -----------
 * The magnitudes' keys copied out, then Hoare's selection with a median of
 * three pivot, O(n) expected; what std::nth_element, numpy.partition and
 * a CPU torch.topk do in spirit. Returns the k-th largest key.
 */
static uint32_t
qselect_kth(uint32_t *a, size_t n, size_t k)
{
	ptrdiff_t lo = 0, hi = (ptrdiff_t)n - 1, want = (ptrdiff_t)(n - k);

	while (hi > lo) {
		ptrdiff_t mid = lo + (hi - lo) / 2, i = lo, j = hi;
		uint32_t p, tmp;

#define SWAP(u, v) do { tmp = a[u]; a[u] = a[v]; a[v] = tmp; } while (0)
		if (a[mid] < a[lo])
			SWAP(mid, lo);
		if (a[hi] < a[lo])
			SWAP(hi, lo);
		if (a[hi] < a[mid])
			SWAP(hi, mid);
		p = a[mid];
		while (i <= j) {
			while (a[i] < p)
				i++;
			while (a[j] > p)
				j--;
			if (i <= j) {
				SWAP(i, j);
				i++;
				j--;
			}
		}
#undef SWAP
		if (want <= j)
			hi = j;
		else if (want >= i)
			lo = i;
		else
			break;
	}
	return a[want];
}

static float
qselect_threshold(const float *x, size_t n, double density, uint32_t *scratch)
{
	size_t k = (size_t)floor(density * n + 0.5);
	uint32_t key;
	float t;

	k = k < 1 ? 1 : k > n ? n : k;
	for (size_t i = 0; i < n; i++) {
		uint32_t u;

		memcpy(&u, &x[i], sizeof(u));
		u &= 0x7fffffffu;
		scratch[i] = u > 0x7f800000u ? 0 : u;
	}
	key = qselect_kth(scratch, n, k);
	key = key == 0 ? 1 : key;
	memcpy(&t, &key, sizeof(t));
	return t;
}

/* The parameters of row r. */
static struct tally_sparse_params
row_params(size_t r, const struct codecs_opts *o)
{
	struct tally_sparse_params p = { .seed = o->seed };

	if (kinds[r].smp == SMP_ALL)
		p.sample = 1.0;
	else if (kinds[r].smp == SMP_OPT)
		p.sample = o->sample;
	return p;
}

/*
 * Every estimator row on tensor x (n elements) at density d: adds the
 * median time and the achieved density into rows. Returns -1 when exact
 * top-k did not keep its k (a bug, not a slow result).
 */
static int
est_rows(const float *x, size_t n, double d, const struct codecs_opts *o,
	uint32_t *scratch, struct est_row *rows)
{
	double *t = calloc(o->reps, sizeof(*t));
	int bad = 0;

	if (t == NULL)
		return -1;
	for (size_t r = 0; r < NROWS; r++) {
		struct tally_sparse_params p = row_params(r, o);
		struct tally_sparse_sel sel;
		float thr = 0;
		double ratio;

		for (unsigned int i = 0; i < o->reps; i++) {
			uint64_t t0 = bench_now_ns();

			if (kinds[r].est == EST_QSEL)
				thr = qselect_threshold(x, n, d, scratch);
			else if (tally_sparse_threshold(x, n, d,
					(enum tally_sparse_est)kinds[r].est, &p,
					&thr) < 0)
				bad = 1;
			t[i] = (bench_now_ns() - t0) / 1e6;
		}
		(void)tally_sparse_select(x, n, thr, NULL, NULL, &sel);
		ratio = sel.elem_density / d;
		rows[r].ms += median(t, o->reps);
		rows[r].ratio += ratio;
		rows[r].rmin = rows[r].tensors == 0 || ratio < rows[r].rmin ?
			ratio : rows[r].rmin;
		rows[r].rmax = rows[r].tensors == 0 || ratio > rows[r].rmax ?
			ratio : rows[r].rmax;
		rows[r].blocks += sel.block_density;
		rows[r].tensors++;
		if (r == ROW_TOPK || r == ROW_QSEL) {
			size_t k = (size_t)floor(d * n + 0.5);

			/* Exactly k unless ties at the k-th value. */
			if (sel.elems < (k < 1 ? 1 : k))
				bad = 1;
		}
	}
	free(t);
	return bad ? -1 : 0;
}

/* The name of row r, in buf. */
static const char *
row_name(size_t r, const struct codecs_opts *o, char *buf, size_t len)
{
	if (kinds[r].est == EST_QSEL)
		return "topk-qselect";
	if (kinds[r].smp == SMP_ALL)
		snprintf(buf, len, "%s s=1", tally_sparse_est_name(
			(enum tally_sparse_est)kinds[r].est));
	else if (kinds[r].smp == SMP_OPT)
		snprintf(buf, len, "%s s=%g", tally_sparse_est_name(
			(enum tally_sparse_est)kinds[r].est), o->sample);
	else
		snprintf(buf, len, "%s", tally_sparse_est_name(
			(enum tally_sparse_est)kinds[r].est));
	return buf;
}

/* Prints the rows of one density (averaged over their tensors). */
static void
print_rows(double d, struct est_row *rows, const struct codecs_opts *o)
{
	double radix = rows[ROW_TOPK].ms / rows[0].tensors;
	double qsel = rows[ROW_QSEL].ms / rows[0].tensors;
	char name[48];

	for (size_t r = 0; r < NROWS; r++) {
		struct est_row *w = &rows[r];
		double ms = w->ms / w->tensors;

		printf("%-8g %-21s %9.3f %10.3f [%5.3f %5.3f] %7.3f %7.2fx "
			"%7.2fx\n", d, row_name(r, o, name, sizeof(name)), ms,
			w->ratio / w->tensors, w->rmin, w->rmax,
			w->blocks / w->tensors, radix / ms, qsel / ms);
	}
}

static void
print_head(void)
{
	printf("%-8s %-21s %9s %10s %13s %7s %8s %8s\n", "density",
		"estimator", "ms/call", "ach/target", "[min   max]", "blocks",
		"vs topk", "vs qsel");
}

/* Mean, and every tensor, within TARGET_TOL of the target density. */
static int
dens_ok(const struct est_row *w)
{
	return fabs(w->ratio - 1.0) <= TARGET_TOL &&
		fabs(w->rmin - 1.0) <= TARGET_TOL &&
		fabs(w->rmax - 1.0) <= TARGET_TOL;
}

/*
 * The verdict of one SIDCo row against the target: its density on the
 * synthetic and (when there are some) the real gradients, and its speed
 * against each exact top-k at TARGET_ELEMS elements.
 */
static void
verdict(size_t r, const struct est_row *syn, const struct est_row *real,
	size_t n, const struct codecs_opts *o)
{
	const struct est_row *w = &syn[r];
	double radix = syn[ROW_TOPK].ms / w->ms;
	double qsel = syn[ROW_QSEL].ms / w->ms;
	char name[48];

	printf("%-21s density synthetic %.3f: %s", row_name(r, o, name,
		sizeof(name)), w->ratio, dens_ok(w) ? "PASS" : "FAIL");
	if (real != NULL)
		printf(", real %.3f [%.3f %.3f]: %s", real[r].ratio,
			real[r].rmin, real[r].rmax,
			dens_ok(&real[r]) ? "PASS" : "FAIL");
	printf("\n");
	if (n >= TARGET_ELEMS)
		printf("%-21s speed vs exact top-k by radix select %.2fx: %s; "
			"vs exact top-k by quickselect %.2fx: %s\n", "",
			radix, radix >= TARGET_SPEEDUP ? "PASS" : "FAIL", qsel,
			qsel >= TARGET_SPEEDUP ? "PASS" : "FAIL");
}

/* The real gradients: the whole file into memory. */
static float *
read_real(const char *path, size_t dim, size_t *tensors)
{
	FILE *f = fopen(path, "rb");
	float *x = NULL;
	long len;

	if (f == NULL || fseek(f, 0, SEEK_END) != 0 || (len = ftell(f)) < 0 ||
	    fseek(f, 0, SEEK_SET) != 0) {
		fprintf(stderr, "codecs: %s: %s\n", path, strerror(errno));
		goto out;
	}
	if (len == 0 || (size_t)len % (dim * sizeof(float)) != 0) {
		fprintf(stderr, "codecs: %s: %ld bytes is not a multiple of "
			"%zu tensors' f32\n", path, len, dim);
		goto out;
	}
	*tensors = (size_t)len / (dim * sizeof(float));
	x = malloc((size_t)len);
	if (x == NULL || fread(x, 1, (size_t)len, f) != (size_t)len) {
		fprintf(stderr, "codecs: %s: short read\n", path);
		free(x);
		x = NULL;
	}
out:
	if (f != NULL)
		fclose(f);
	return x;
}

/* Estimator tables of one data set; verdicts at the target density. */
static int
est_table(const float *x, size_t dim, size_t tensors,
	const struct codecs_opts *o, uint32_t *scratch,
	struct est_row (*at_target)[NROWS])
{
	int ret = 0;

	print_head();
	for (unsigned int di = 0; di < o->ndens; di++) {
		struct est_row rows[NROWS];

		memset(rows, 0, sizeof(rows));
		for (size_t t = 0; t < tensors; t++)
			if (est_rows(x + t * dim, dim, o->dens[di], o, scratch,
					rows) < 0)
				ret = -1;
		print_rows(o->dens[di], rows, o);
		if (o->dens[di] == TARGET_DENSITY) {
			for (size_t r = 0; r < NROWS; r++) {
				rows[r].ms /= rows[r].tensors;
				rows[r].ratio /= rows[r].tensors;
				rows[r].blocks /= rows[r].tensors;
				rows[r].tensors = 1;
			}
			memcpy(*at_target, rows, sizeof(rows));
		}
	}
	return ret;
}

int
bench_codecs(int argc, char **argv)
{
	struct codecs_opts o;
	struct est_row syn[NROWS], real[NROWS];
	size_t tensors = 0, scratch_n;
	float *x, *rx = NULL;
	uint32_t *scratch;
	char cpu[128];
	int fail = 0, have_target = 0;
	uint64_t t0;

	if (parse_opts(argc, argv, &o) < 0) {
		usage(stderr);
		return BENCH_EXIT_USAGE;
	}
	for (unsigned int i = 0; i < o.ndens; i++)
		have_target |= o.dens[i] == TARGET_DENSITY;
	if (o.real != NULL) {
		rx = read_real(o.real, o.real_dim, &tensors);
		if (rx == NULL)
			return BENCH_EXIT_USAGE;
	}
	scratch_n = o.elems > o.real_dim ? o.elems : o.real_dim;
	x = malloc(o.elems * sizeof(*x));
	scratch = malloc(scratch_n * sizeof(*scratch));
	if (x == NULL || scratch == NULL) {
		fprintf(stderr, "codecs: out of memory\n");
		return BENCH_EXIT_FAIL;
	}
	bench_cpu_model(cpu, sizeof(cpu));
	printf("tally-bench codecs: %s, one thread; median of %u calls\n", cpu,
		o.reps);
	t0 = bench_now_ns();
	synth_fill(x, o.elems, SYNTH_STUDENT3, 0, 1e-3, o.seed);
	printf("synthetic: %zu elements, Student's t (3 dof) x 1e-3, seed "
		"%llu (%.1f s to make)\n", o.elems, (unsigned long long)o.seed,
		(bench_now_ns() - t0) / 1e9);

	tput_table(x, o.elems, o.reps);

	printf("\n== threshold estimators: synthetic heavy-tailed, %zu "
		"elements\n", o.elems);
	printf("(ach/target: kept / (density * n); blocks: block density; "
		"vs topk / vs qsel: speed over exact top-k by radix select / by "
		"quickselect; sidco-*: SIDCo on the library's default sample, "
		"s=1: on every element, s=%g: on that fraction of its runs of "
		"16)\n", o.sample);
	memset(syn, 0, sizeof(syn));
	if (est_table(x, o.elems, 1, &o, scratch, &syn) < 0)
		fail = 1;
	if (rx != NULL) {
		printf("\n== threshold estimators: real gradients %s, %zu "
			"tensors of %zu elements (times and ratios: mean over "
			"tensors; [min max] of the ratio)\n", o.real, tensors,
			o.real_dim);
		memset(real, 0, sizeof(real));
		if (est_table(rx, o.real_dim, tensors, &o, scratch,
				&real) < 0)
			fail = 1;
	}
	if (have_target) {
		printf("\n== target: SIDCo within +-%.0f %% of the target "
			"density at %g (the mean and every real tensor), and "
			">= %.0fx faster than exact top-k on %u elements; speed "
			"judged against each exact baseline, tally's radix "
			"select and a quickselect\n", TARGET_TOL * 100,
			TARGET_DENSITY, TARGET_SPEEDUP, TARGET_ELEMS);
		for (size_t r = 0; r < NROWS; r++)
			if (kinds[r].est <= TALLY_SPARSE_SIDCO_GAMMA)
				verdict(r, syn, rx != NULL ? real : NULL,
					o.elems, &o);
		if (o.elems < TARGET_ELEMS)
			printf("(speed not judged: %zu elements, not %u)\n",
				o.elems, TARGET_ELEMS);
	}
	if (fail)
		fprintf(stderr, "codecs: an estimator failed or exact top-k "
			"kept fewer than k\n");
	free(x);
	free(rx);
	free(scratch);
	return fail ? BENCH_EXIT_FAIL : BENCH_EXIT_OK;
}

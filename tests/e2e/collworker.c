/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * One rank of tests/e2e/coll_test.sh: joins a job through tallyd
 * (tally:// URL, the token from a file) and runs reduce-scatter,
 * all-gather and broadcast calls on one context, every op for every type
 * and size given, over data made from (rank, call, seed) that every rank
 * can make for every other. It checks its own result of each call bit
 * for bit against a reference computed here from all ranks' data
 * (reduce-scatter: its shard of the wrapping i32 sums or of the
 * shared-scale fixed-point f32 sums, or of the bf16 or f16 fixed-point
 * sums rounded once, in the lanes the context takes; all-gather: the
 * ranks' bytes in rank order; broadcast: the root's; for every type,
 * 16-bit ones included), and prints a digest of the
 * results that every rank shares (all-gather's and broadcast's, and the
 * reference sums of reduce-scatter), so that the script can compare
 * ranks.
 *
 * collworker --url URL --token-file F --rank R --world W [--ops rs,ag,bc]
 *   [--types f32,i32,bf16,f16,q (q: rs through the job's q16/q8/q4
 *   codec, ag with the lossy q8 codec)] [--sizes N,...] [--iters K]
 *   [--seed S] [--timeout-ms T]
 * Exit: 0 every result right, 2 a result wrong, 3 a call failed (the
 * error on stderr), 1 bad usage or no join.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tally/fixp.h>
#include <tally/fixp16.h>
#include <tally/quant.h>
#include <tally/tally.h>

#include <math.h>

struct opts {
	const char *url, *token_file, *ops, *types, *sizes;
	unsigned int rank, world, iters, timeout_ms;
	uint64_t seed;
	uint64_t qcalls;	/* codec calls made (type q: the draws' step) */
};

static uint64_t digest = UINT64_C(0xcbf29ce484222325);

static void
fnv(const void *p, size_t n)
{
	const uint8_t *b = p;

	for (size_t i = 0; i < n; i++)
		digest = (digest ^ b[i]) * UINT64_C(0x100000001b3);
}

static uint64_t
mix(uint64_t z)
{
	z += UINT64_C(0x9e3779b97f4a7c15);
	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

/*
 * Rank r's n elements for call k: f32 sums get values in [-1, 1] times a
 * power of two that varies by call; everything else any bits.
 */
static void
gen(int f32sum, uint64_t seed, unsigned int r, unsigned int k, size_t n,
	uint32_t *x)
{
	uint64_t s = mix(seed ^ (uint64_t)r << 48 ^ (uint64_t)k << 32);

	for (size_t i = 0; i < n; i++) {
		uint64_t h = mix(s ^ i);

		if (f32sum) {
			float f = ((float)(h & 0xffffff) / 8388608.0f - 1.0f) *
				(float)(1u << (k % 9));

			memcpy(&x[i], &f, 4);
		} else {
			x[i] = (uint32_t)h;
		}
	}
}

/*
 * The reference of reduce-scatter call k: the sums of every rank's
 * world x count elements (f32: through the shared fixed point, the
 * exponent from the largest |x| of all), into ref (world x count).
 */
static void
rs_ref(const struct opts *o, int f32, unsigned int k, size_t count,
	uint32_t *ref)
{
	size_t n = count * o->world;
	uint32_t *x = malloc(n * 4 + 4);
	int32_t *q = malloc(n * 4 + 4);
	float m = 0.0f;
	int e = 0;

	memset(ref, 0, n * 4);
	for (unsigned int r = 0; f32 && r < o->world; r++) {
		gen(1, o->seed, r, k, n, x);
		if (tally_fixp_absmax((float *)x, n) > m)
			m = tally_fixp_absmax((float *)x, n);
	}
	if (f32 && tally_fixp_exponent(m, o->world, &e) != 0)
		abort();
	for (unsigned int r = 0; r < o->world; r++) {
		gen(f32, o->seed, r, k, n, x);
		if (f32)
			tally_fixp_encode((float *)x, q, n, e);
		else
			memcpy(q, x, n * 4);
		for (size_t i = 0; i < n; i++)
			ref[i] += (uint32_t)q[i];
	}
	if (f32)
		tally_fixp_decode((int32_t *)ref, (float *)ref, n, e);
	free(x);
	free(q);
}

/*
 * Rank r's n bf16 (f16 when f16) elements for call k: ten binades up to
 * 1, zeros and NaNs (which count as 0).
 */
static void
gen16(int f16, uint64_t seed, unsigned int r, unsigned int k, size_t n,
	uint16_t *x)
{
	uint64_t s = mix(seed ^ (uint64_t)r << 48 ^ (uint64_t)k << 32 ^ 16);

	for (size_t i = 0; i < n; i++) {
		uint64_t h = mix(s ^ i);

		if (h % 61 == 0)
			x[i] = f16 ? 0x7e01 : 0x7fc1;
		else if (h % 53 == 0)
			x[i] = 0;
		else if (f16)
			x[i] = (uint16_t)((h >> 63) << 15 |
				(6 + (h >> 8) % 10) << 10 | (h >> 20 & 0x3ff));
		else
			x[i] = (uint16_t)((h >> 63) << 15 |
				(118 + (h >> 8) % 10) << 7 | (h >> 20 & 0x7f));
	}
}

/* The name of dt, for messages. */
static const char *
dt_name(enum tally_dtype dt)
{
	return dt == TALLY_DT_F32 ? "f32" : dt == TALLY_DT_I32 ? "i32" :
		dt == TALLY_DT_BF16 ? "bf16" : "f16";
}

/*
 * A bf16 or f16 (dt) reduce-scatter, call k, count elements a rank: its
 * shard against the fixed-point sums of every rank's data (the exponent
 * from the largest |x| of all, in the context's lanes) rounded once; the
 * digest takes the whole reference. Returns 0, 2 or 3.
 */
static int
one16(struct tally_ctx *ctx, const struct opts *o, enum tally_dtype dt,
	unsigned int k, size_t count)
{
	size_t n = count * o->world;
	uint16_t *x = malloc(n * 2 + 2), *recv = calloc(count + 1, 2);
	uint16_t *ref = malloc(n * 2 + 2);
	int32_t *q = malloc(n * 4 + 4), *sum = calloc(n + 1, 4);
	struct tally_ctx_info info;
	int f16 = dt == TALLY_DT_F16, e, rc;
	unsigned int lanes;
	float m = 0.0f;

	tally_ctx_info(ctx, &info);
	lanes = f16 ? info.lanes_f16 : info.lanes_bf16;
	gen16(f16, o->seed, o->rank, k, n, x);
	rc = tally_reduce_scatter(ctx, x, recv, count, dt);
	for (unsigned int r = 0; r < o->world; r++) {
		float a;

		gen16(f16, o->seed, r, k, n, x);
		a = tally_fixp16_absmax(dt, x, n);
		if (a > m)
			m = a;
	}
	if (tally_fixp16_exponent(m, o->world, lanes, info.narrow, &e) != 0)
		abort();
	for (unsigned int r = 0; r < o->world; r++) {
		gen16(f16, o->seed, r, k, n, x);
		tally_fixp16_encode(dt, x, q, 32, n, e);
		for (size_t i = 0; i < n; i++)
			sum[i] += q[i];
	}
	tally_fixp16_decode(dt, sum, 32, ref, n, e);
	fnv(ref, n * 2);
	if (rc != 0) {
		fprintf(stderr, "rank %u call %u (rs %s, %zu): %d: %s\n",
			o->rank, k, dt_name(dt), count, rc,
			tally_ctx_error(ctx));
		rc = 3;
	} else if (memcmp(recv, ref + count * o->rank, count * 2) != 0) {
		fprintf(stderr, "rank %u call %u (rs %s, %zu, lanes %u): "
			"result differs from the reference\n", o->rank, k,
			dt_name(dt), count, lanes);
		rc = 2;
	}
	free(x);
	free(recv);
	free(ref);
	free(q);
	free(sum);
	return rc;
}

/*
 * The job's q16/q8/q4 sum of every rank's world x count floats of call
 * k, from <tally/quant.h> alone (the scale from all of them, each rank's
 * draws of codec call o->qcalls), into ref.
 */
static void
rsq_ref(const struct opts *o, const struct tally_ctx_info *info,
	unsigned int k, size_t count, float *ref)
{
	unsigned int bits = info->codec.kind == TALLY_CODEC_Q16 ? 16 :
		info->codec.kind == TALLY_CODEC_Q8 ? 8 : 4, levels;
	size_t n = count * o->world;
	float *x = malloc(n * 4 + 4), m = 0.0f, s;
	uint8_t *q = malloc(n * 2 + 2);
	int32_t *sum = calloc(n + 1, 4);

	if (tally_quant_levels(bits, o->world, info->narrow, &levels) != 0)
		abort();
	for (unsigned int r = 0; r < o->world; r++) {
		gen(1, o->seed, r, k, n, (uint32_t *)x);
		m = fmaxf(m, tally_fixp_absmax(x, n));
	}
	if (tally_quant_scale(m, levels, &s) != 0)
		abort();
	for (unsigned int r = 0; r < o->world; r++) {
		uint64_t seed = tally_quant_seed(info->codec.seed, r, o->qcalls);

		gen(1, o->seed, r, k, n, (uint32_t *)x);
		for (size_t i = 0; i < n; i++) {
			if (bits == 16)
				tally_quant_encode_i16(x + i, (int16_t *)
					(void *)q, 1, s, levels, seed, i);
			else if (bits == 8)
				tally_quant_encode_i8(x + i, (int8_t *)q, 1, s,
					levels, seed, i);
			else
				tally_quant_encode_i4(x + i, q, 1, s, levels,
					seed, i);
			sum[i] += bits == 16 ? *(int16_t *)(void *)q :
				bits == 8 ? *(int8_t *)q :
				(int8_t)(uint8_t)(q[0] << 4) >> 4;
		}
	}
	tally_quant_decode_i32(sum, ref, n, s);
	free(x);
	free(q);
	free(sum);
}

/*
 * Call k of type q: a reduce-scatter of f32 through the job's q16, q8
 * or q4 codec, its shard against rsq_ref() bit for bit (the digest
 * takes the whole reference); or an all-gather with the lossy q8 codec,
 * every element within max|x| / 254 (+ 2^-22 max|x| + 2^-128) of its
 * chunk's (elems - 4 values), the digest over what came (every rank
 * must hold the same bits). Returns 0, 2 or 3.
 */
static int
one_q(struct tally_ctx *ctx, struct opts *o, const char *op, unsigned int k,
	size_t count)
{
	size_t w = o->world, n = count * w, d;
	float *send = malloc(n * 4 + 4), *recv = calloc(n + 1, 4);
	float *ref = malloc(n * 4 + 4);
	struct tally_ctx_info info;
	int rc, bad = 0;

	tally_ctx_info(ctx, &info);
	d = info.elems - 4u;
	if (op[0] == 'r') {
		gen(1, o->seed, o->rank, k, n, (uint32_t *)send);
		rc = tally_reduce_scatter(ctx, send, recv, count, TALLY_DT_F32);
		if (count > 0)
			rsq_ref(o, &info, k, count, ref);
		o->qcalls += count > 0;
		fnv(ref, n * 4);
		bad = memcmp(recv, ref + count * o->rank, count * 4) != 0;
	} else {
		gen(1, o->seed, o->rank, k, count, (uint32_t *)send);
		rc = tally_ctx_set_allgather_codec(ctx, 8);
		if (rc == 0)
			rc = tally_allgather(ctx, send, recv, count,
				TALLY_DT_F32);
		(void)tally_ctx_set_allgather_codec(ctx, 0);
		for (unsigned int p = 0; p < w; p++) {
			gen(1, o->seed, p, k, count, (uint32_t *)ref);
			for (size_t c0 = 0; c0 < count; c0 += d) {
				size_t m = count - c0 < d ? count - c0 : d;
				double a = 0.0;

				for (size_t i = c0; i < c0 + m; i++)
					a = fmax(a, fabs((double)ref[i]));
				for (size_t i = c0; i < c0 + m; i++)
					bad |= fabs((double)recv[p * count + i]
						- ref[i]) > a / 254 +
						ldexp(a, -22) + ldexp(1, -128);
			}
		}
		fnv(recv, n * 4);
	}
	if (rc != 0) {
		fprintf(stderr, "rank %u call %u (%s q, %zu): %d: %s\n",
			o->rank, k, op, count, rc, tally_ctx_error(ctx));
		rc = 3;
	} else if (bad) {
		fprintf(stderr, "rank %u call %u (%s q, %zu): result differs "
			"from the reference\n", o->rank, k, op, count);
		rc = 2;
	}
	free(send);
	free(recv);
	free(ref);
	return rc;
}

/*
 * Runs call k: op (rs, ag, bc) of type dt with count elements a rank;
 * reduce-scatter of f32 or i32 only (one16() sums the 16-bit types),
 * all-gather and broadcast of any type (their bytes move as they are:
 * any bits, NaN payloads included). Returns 0, 2 (wrong result) or 3
 * (the call failed).
 */
static int
one(struct tally_ctx *ctx, const struct opts *o, const char *op,
	enum tally_dtype dt, unsigned int k, size_t count)
{
	int f32 = dt == TALLY_DT_F32;
	size_t es = dt == TALLY_DT_BF16 || dt == TALLY_DT_F16 ? 2 : 4;
	size_t w = o->world, sn = op[0] == 'r' ? count * w : count;
	size_t rn = op[0] == 'a' ? count * w : count;
	uint32_t *send = malloc(sn * 4 + 4), *recv = calloc(rn + 1, 4);
	uint32_t *ref = malloc((count * w + 1) * 4);
	uint32_t *tmp = malloc(count * 4 + 4);
	unsigned int root = k % o->world;
	int rc;

	gen(op[0] == 'r' && f32, o->seed, o->rank, k, sn, send);
	if (op[0] == 'r') {
		rc = tally_reduce_scatter(ctx, send, recv, count, dt);
		rs_ref(o, f32, k, count, ref);
		fnv(ref, count * w * 4);
		memmove(ref, ref + count * o->rank, count * 4);
	} else if (op[0] == 'a') {
		rc = tally_allgather(ctx, send, recv, count, dt);
		for (unsigned int r = 0; r < o->world; r++) {
			gen(0, o->seed, r, k, count, tmp);
			memcpy((uint8_t *)ref + count * es * r, tmp,
				count * es);
		}
		fnv(recv, rn * es);
	} else {
		memcpy(recv, send, count * es);
		rc = tally_broadcast(ctx, recv, count, dt, root);
		gen(0, o->seed, root, k, count, ref);
		fnv(recv, rn * es);
	}
	if (rc != 0) {
		fprintf(stderr, "rank %u call %u (%s %s, %zu): %d: %s\n",
			o->rank, k, op, dt_name(dt), count, rc,
			tally_ctx_error(ctx));
		rc = 3;
	} else if (memcmp(recv, ref, rn * es) != 0) {
		fprintf(stderr, "rank %u call %u (%s %s, %zu): result differs "
			"from the reference\n", o->rank, k, op, dt_name(dt),
			count);
		rc = 2;
	}
	free(send);
	free(recv);
	free(ref);
	free(tmp);
	return rc;
}

/* The type named t (f32, i32, bf16, f16), or -1. */
static int
dt_of(const char *t)
{
	return strcmp(t, "f32") == 0 ? TALLY_DT_F32 :
		strcmp(t, "i32") == 0 ? TALLY_DT_I32 :
		strcmp(t, "bf16") == 0 ? TALLY_DT_BF16 :
		strcmp(t, "f16") == 0 ? TALLY_DT_F16 : -1;
}

/* Call k: op of type t (as --types names it), count elements a rank. */
static int
one_of(struct tally_ctx *ctx, struct opts *o, const char *op, const char *t,
	unsigned int k, size_t count)
{
	int dt = dt_of(t);

	if (strcmp(t, "q") == 0)
		return one_q(ctx, o, op, k, count);
	if (dt < 0)
		return 1;
	if (op[0] == 'r' && (dt == TALLY_DT_BF16 || dt == TALLY_DT_F16))
		return one16(ctx, o, (enum tally_dtype)dt, k, count);
	return one(ctx, o, op, (enum tally_dtype)dt, k, count);
}

static int
parse(int argc, char **argv, struct opts *o)
{
	*o = (struct opts){ .ops = "rs,ag,bc", .types = "f32,i32",
		.sizes = "0,1,257,10007", .iters = 1, .timeout_ms = 5000,
		.seed = 1 };
	for (int i = 1; i + 1 < argc; i += 2) {
		const char *k = argv[i], *v = argv[i + 1];

		if (strcmp(k, "--url") == 0)
			o->url = v;
		else if (strcmp(k, "--token-file") == 0)
			o->token_file = v;
		else if (strcmp(k, "--rank") == 0)
			o->rank = (unsigned int)strtoul(v, NULL, 0);
		else if (strcmp(k, "--world") == 0)
			o->world = (unsigned int)strtoul(v, NULL, 0);
		else if (strcmp(k, "--ops") == 0)
			o->ops = v;
		else if (strcmp(k, "--types") == 0)
			o->types = v;
		else if (strcmp(k, "--sizes") == 0)
			o->sizes = v;
		else if (strcmp(k, "--iters") == 0)
			o->iters = (unsigned int)strtoul(v, NULL, 0);
		else if (strcmp(k, "--seed") == 0)
			o->seed = strtoull(v, NULL, 0);
		else if (strcmp(k, "--timeout-ms") == 0)
			o->timeout_ms = (unsigned int)strtoul(v, NULL, 0);
		else
			return -1;
	}
	return o->url && o->token_file && o->world > 0 ? 0 : -1;
}

/* Every op x type x size, iters times over, on one context. */
static int
run(struct tally_ctx *ctx, struct opts *o)
{
	unsigned int k = 0;
	char ops[64], types[64], sizes[256];

	for (unsigned int it = 0; it < o->iters; it++) {
		snprintf(ops, sizeof(ops), "%s", o->ops);
		for (char *so, *op = strtok_r(ops, ",", &so); op != NULL;
				op = strtok_r(NULL, ",", &so)) {
			snprintf(types, sizeof(types), "%s", o->types);
			for (char *st, *t = strtok_r(types, ",", &st); t != NULL;
					t = strtok_r(NULL, ",", &st)) {
				snprintf(sizes, sizeof(sizes), "%s", o->sizes);
				for (char *sz, *n = strtok_r(sizes, ",", &sz);
						n != NULL;
						n = strtok_r(NULL, ",", &sz)) {
					size_t c = strtoull(n, NULL, 0);
					int rc = one_of(ctx, o, op, t, k++, c);

					if (rc != 0)
						return rc;
				}
			}
		}
	}
	printf("calls: %u\n", k);
	return 0;
}

int
main(int argc, char **argv)
{
	struct tally_ctx_opts base = { 0 };
	struct tally_ctx *ctx;
	struct opts o;
	char token[128] = "";
	FILE *f;
	int rc;

	if (parse(argc, argv, &o) != 0) {
		fprintf(stderr, "usage: collworker --url URL --token-file F "
			"--rank R --world W [--ops rs,ag,bc] "
			"[--types f32,i32,bf16,f16,q (q: rs, ag)] "
			"[--sizes N,...] [--iters K] [--seed S] "
			"[--timeout-ms T]\n");
		return 1;
	}
	f = fopen(o.token_file, "r");
	if (f == NULL || fgets(token, sizeof(token), f) == NULL) {
		fprintf(stderr, "%s: cannot read the token\n", o.token_file);
		return 1;
	}
	fclose(f);
	token[strcspn(token, "\r\n")] = '\0';
	base.timeout_ms = o.timeout_ms;
	rc = tally_open_opts(o.url, token, o.rank, o.world, &base, &ctx);
	if (rc != 0) {
		fprintf(stderr, "join: %d: %s\n", rc, tally_ctx_error(NULL));
		return 1;
	}
	rc = run(ctx, &o);
	if (rc == 0)
		printf("digest: fnv1a64 %016llx\n", (unsigned long long)digest);
	tally_ctx_close(ctx);
	return rc;
}

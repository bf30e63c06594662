/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * One rank of tests/e2e/epoch_test.sh: joins a job through tallyd
 * (tally:// URL, the token from a file) and calls tally_allreduce_f32()
 * in place on the same input again and again, up to --calls times,
 * touching the file DIR/start.RANK.K just before call K, until one fails
 * and the next one succeeds. The script SIGKILLs a tally-dp of the job
 * once the calls run, so one call is in flight when it dies. Each result
 * is checked bit for bit against a reference computed here from every
 * rank's data (the shared-scale fixed-point sums), the failed call's
 * buffer against the input (libtally keeps an in-place call's input),
 * and the failed call must return -ETIMEDOUT within its timeout (plus
 * the time of the chunks that were still coming back). It prints, per
 * call, "call K: rc MS epoch E", then "digest: fnv1a64 X" of the
 * reference.
 *
 * epochworker --url URL --token-file F --rank R --world W --mib M
 *   --timeout-ms T --mark DIR [--calls K] [--seed S]
 * Exit: 0 one call failed with -ETIMEDOUT and the next one was exact, in
 * a new epoch; 2 a result or the kept input wrong; 3 another failure
 * (stderr says which); 1 bad usage or no join.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <tally/fixp.h>
#include <tally/tally.h>

#define CHUNK	(1u << 20)

struct opts {
	const char *url, *token_file, *mark;
	unsigned int rank, world, mib, timeout_ms, calls;
	uint64_t seed;
	int once;	/* --once: one call, exact (the ring fallback) */
};

static uint64_t
mix(uint64_t z)
{
	z += UINT64_C(0x9e3779b97f4a7c15);
	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

/* Rank r's elements off .. off + n - 1, values in [-4, 4]. */
static void
gen(uint64_t seed, unsigned int r, size_t off, size_t n, float *x)
{
	uint64_t s = mix(seed ^ (uint64_t)r << 48);

	for (size_t i = 0; i < n; i++)
		x[i] = ((float)(mix(s ^ (off + i)) & 0xffffff) / 8388608.0f -
			1.0f) * 4.0f;
}

/* The sums of every rank's n elements through the shared fixed point. */
static int
reference(const struct opts *o, size_t n, float *ref)
{
	float *x = malloc(CHUNK * sizeof(*x)), m = 0.0f;
	int32_t *q = malloc(CHUNK * sizeof(*q)), *acc = malloc(CHUNK * 4);
	int e;

	if (x == NULL || q == NULL || acc == NULL)
		return -ENOMEM;
	for (unsigned int r = 0; r < o->world; r++)
		for (size_t off = 0; off < n; off += CHUNK) {
			size_t c = n - off < CHUNK ? n - off : CHUNK;

			gen(o->seed, r, off, c, x);
			if (tally_fixp_absmax(x, c) > m)
				m = tally_fixp_absmax(x, c);
		}
	if (tally_fixp_exponent(m, o->world, &e) != 0)
		return -ERANGE;
	for (size_t off = 0; off < n; off += CHUNK) {
		size_t c = n - off < CHUNK ? n - off : CHUNK;

		memset(acc, 0, c * 4);
		for (unsigned int r = 0; r < o->world; r++) {
			gen(o->seed, r, off, c, x);
			tally_fixp_encode(x, q, c, e);
			for (size_t i = 0; i < c; i++)
				acc[i] = (int32_t)((uint32_t)acc[i] +
					(uint32_t)q[i]);
		}
		tally_fixp_decode(acc, ref + off, c, e);
	}
	free(x);
	free(q);
	free(acc);
	return 0;
}

static uint64_t
fnv(const void *p, size_t n)
{
	const uint8_t *b = p;
	uint64_t h = UINT64_C(0xcbf29ce484222325);

	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * UINT64_C(0x100000001b3);
	return h;
}

static int64_t
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Touches DIR/start.RANK.K: call K is about to start. */
static void
mark(const struct opts *o, unsigned int k)
{
	char path[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/start.%u.%u", o->mark, o->rank, k);
	f = fopen(path, "w");
	if (f != NULL)
		fclose(f);
}

static int
parse(int argc, char **argv, struct opts *o)
{
	*o = (struct opts){ .mib = 32, .timeout_ms = 3000, .calls = 8,
		.seed = 1 };
	for (int i = 1; i + 1 < argc; i += 2) {
		const char *k = argv[i], *v = argv[i + 1];

		if (strcmp(k, "--url") == 0)
			o->url = v;
		else if (strcmp(k, "--token-file") == 0)
			o->token_file = v;
		else if (strcmp(k, "--mark") == 0)
			o->mark = v;
		else if (strcmp(k, "--rank") == 0)
			o->rank = (unsigned int)strtoul(v, NULL, 0);
		else if (strcmp(k, "--world") == 0)
			o->world = (unsigned int)strtoul(v, NULL, 0);
		else if (strcmp(k, "--mib") == 0)
			o->mib = (unsigned int)strtoul(v, NULL, 0);
		else if (strcmp(k, "--timeout-ms") == 0)
			o->timeout_ms = (unsigned int)strtoul(v, NULL, 0);
		else if (strcmp(k, "--calls") == 0)
			o->calls = (unsigned int)strtoul(v, NULL, 0);
		else if (strcmp(k, "--seed") == 0)
			o->seed = strtoull(v, NULL, 0);
		else if (strcmp(k, "--once") == 0)
			o->once = strcmp(v, "1") == 0;
		else
			return -1;
	}
	return o->url && o->token_file && o->mark && o->world > 0 &&
		o->mib > 0 ? 0 : -1;
}

/* --once: one call on the job as it is now (the ring fallback when no
 * dataplane is left), which must be exact; 0, or 2 when it was not. */
static int
run_once(struct tally_ctx *ctx, float *buf, const float *in,
	const float *ref, size_t n)
{
	struct tally_ctx_info i;
	int rc;

	tally_ctx_info(ctx, &i);
	printf("transport: %s\n", i.transport);
	memcpy(buf, in, n * sizeof(*buf));
	rc = tally_allreduce_f32(ctx, buf, n);
	printf("call 0: rc %d epoch %u\n", rc, tally_ctx_epoch(ctx));
	if (rc != 0) {
		fprintf(stderr, "call 0: %d: %s\n", rc, tally_ctx_error(ctx));
		return 2;
	}
	if (memcmp(buf, ref, n * sizeof(*buf)) != 0) {
		fprintf(stderr, "call 0: result differs\n");
		return 2;
	}
	printf("exact\n");
	return 0;
}

/*
 * The calls: the first exact, then on until one fails; that one must be
 * -ETIMEDOUT with the input back in buf, the next exact in a new epoch.
 */
static int
run(struct tally_ctx *ctx, const struct opts *o, float *buf,
	const float *in, const float *ref, size_t n)
{
	int failed = -1;

	for (unsigned int k = 0; k < o->calls; k++) {
		uint32_t e0 = tally_ctx_epoch(ctx);
		int64_t t0 = now_ms();
		int rc;

		memcpy(buf, in, n * sizeof(*buf));
		mark(o, k);
		rc = tally_allreduce_f32(ctx, buf, n);
		printf("call %u: rc %d ms %lld epoch %u\n", k, rc,
			(long long)(now_ms() - t0), tally_ctx_epoch(ctx));
		fflush(stdout);
		if (rc == 0 && memcmp(buf, ref, n * sizeof(*buf)) != 0) {
			fprintf(stderr, "call %u: result differs\n", k);
			return 2;
		}
		if (rc == 0 && failed >= 0) {
			printf("rejoined: epoch %u -> %u\n", (unsigned)failed,
				tally_ctx_epoch(ctx));
			return tally_ctx_epoch(ctx) > (uint32_t)failed ? 0 : 2;
		}
		if (rc == 0)
			continue;
		if (rc != -ETIMEDOUT || failed >= 0) {
			fprintf(stderr, "call %u: %d: %s\n", k, rc,
				tally_ctx_error(ctx));
			return 3;
		}
		printf("failed: %s\n", tally_ctx_error(ctx));
		if (memcmp(buf, in, n * sizeof(*buf)) != 0) {
			fprintf(stderr, "call %u: the input was not kept\n", k);
			return 2;
		}
		printf("input kept\n");
		failed = (int)e0;
	}
	fprintf(stderr, "no call failed and recovered in %u\n", o->calls);
	return 3;
}

int
main(int argc, char **argv)
{
	struct tally_ctx_opts base = { .join_timeout_ms = 60000 };
	struct tally_ctx *ctx;
	struct opts o;
	char token[128] = "";
	float *in, *buf, *ref;
	size_t n;
	FILE *f;
	int rc;

	if (parse(argc, argv, &o) != 0) {
		fprintf(stderr, "usage: epochworker --url URL --token-file F "
			"--rank R --world W --mark DIR [--mib M] "
			"[--timeout-ms T] [--calls K] [--seed S] [--once 1]\n");
		return 1;
	}
	f = fopen(o.token_file, "r");
	if (f == NULL || fgets(token, sizeof(token), f) == NULL) {
		fprintf(stderr, "%s: cannot read the token\n", o.token_file);
		return 1;
	}
	fclose(f);
	token[strcspn(token, "\r\n")] = '\0';
	n = (size_t)o.mib * (1u << 20) / sizeof(float);
	in = malloc(n * sizeof(float));
	buf = malloc(n * sizeof(float));
	ref = malloc(n * sizeof(float));
	if (in == NULL || buf == NULL || ref == NULL ||
			reference(&o, n, ref) != 0)
		return 1;
	gen(o.seed, o.rank, 0, n, in);
	printf("digest: fnv1a64 %016llx\n", (unsigned long long)fnv(ref,
		n * sizeof(float)));
	base.timeout_ms = o.timeout_ms;
	rc = tally_open_opts(o.url, token, o.rank, o.world, &base, &ctx);
	if (rc != 0) {
		fprintf(stderr, "join: %d: %s\n", rc, tally_ctx_error(NULL));
		return 1;
	}
	printf("joined: epoch %u\n", tally_ctx_epoch(ctx));
	fflush(stdout);
	rc = o.once ? run_once(ctx, buf, in, ref, n) :
		run(ctx, &o, buf, in, ref, n);
	tally_ctx_close(ctx);
	free(in);
	free(buf);
	free(ref);
	return rc;
}

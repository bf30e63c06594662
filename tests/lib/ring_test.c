/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The ring fallback (transport "ring", gpu/lib/ring*.c) over loopback
 * TCP, one thread and one context per rank: worlds 1, 2, 3, 4 and 7,
 * sizes 0, 1, 257, a prime and 64 MiB, i32 and f32. Every rank's result
 * must be, bit for bit, the reference computed here without the
 * library's code: i32 sums wrapping; f32 the shared-scale fixed point
 * of <tally/fixp.h> (the global max |x|, the exponent from it, each
 * rank's elements scaled and rounded to integers in double, the
 * integers summed, the sum scaled back and rounded once to binary32),
 * which is what tally-dp returns. ring_fail_test.c has the failures.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include <tally/tally.h>

#include "lib/ctx.h"
#include "lib/ring.h"

#define WMAX	7
#define BIG	(16u << 20)	/* 64 MiB of 32-bit elements */

static const uint8_t KEY[32] = "0123456789abcdef0123456789abcdef";

struct rank {
	pthread_t thread;
	struct tally_ctx_opts o;
	struct tally_ring *g;	/* its listener, opened by the test */
	size_t n;
	int32_t *ibuf;
	float *fbuf;
	int open_rc, rc_i, rc_f;
	char err[256];
	struct tally_ctx_stats st;
};

static struct rank ranks[WMAX];
static char addrs[WMAX][32];
static const char *addrv[WMAX];

/* Listeners on 127.0.0.1 for world ranks, their addresses in addrv. */
static void
listeners(unsigned int world)
{
	for (unsigned int r = 0; r < world; r++) {
		char why[256];
		uint32_t ip;
		uint16_t port;

		ranks[r].g = tally_ring_listen(htonl(INADDR_LOOPBACK), 0, why,
			sizeof(why));
		assert_non_null(ranks[r].g);
		tally_ring_local(ranks[r].g, &ip, &port);
		snprintf(addrs[r], sizeof(addrs[r]), "127.0.0.1:%u",
			ntohs(port));
		addrv[r] = addrs[r];
	}
}

static void
opts(struct tally_ctx_opts *o, unsigned int rank, unsigned int world)
{
	*o = (struct tally_ctx_opts){ .transport = "ring", .rank = (uint8_t)rank,
		.world = (uint8_t)world, .ring = addrv, .ring_key = KEY,
		.timeout_ms = 2000, .join_timeout_ms = 10000 };
}

static void *
run_rank(void *arg)
{
	struct rank *k = arg;
	struct tally_ctx *ctx = NULL;

	k->open_rc = tally_lib_ctx_open(&k->o, k->g, &ctx);
	k->g = NULL;
	if (k->open_rc != 0) {
		snprintf(k->err, sizeof(k->err), "%s", tally_ctx_error(NULL));
		return NULL;
	}
	k->rc_i = tally_allreduce_i32(ctx, k->ibuf, k->n);
	k->rc_f = tally_allreduce_f32(ctx, k->fbuf, k->n);
	snprintf(k->err, sizeof(k->err), "%s", tally_ctx_error(ctx));
	tally_ctx_stats(ctx, &k->st);
	tally_ctx_close(ctx);
	return NULL;
}

/* Deterministic data of rank r: wide-ranging floats, wrapping ints. */
static void
fill(unsigned int r, size_t n, int32_t *ib, float *fb)
{
	uint64_t s = 0x9e3779b97f4a7c15ull * (r + 1);

	for (size_t i = 0; i < n; i++) {
		s ^= s << 13;
		s ^= s >> 7;
		s ^= s << 17;
		ib[i] = (int32_t)(uint32_t)s;
		fb[i] = (float)ldexp((double)(int32_t)(s >> 32) / 2147483648.0,
			(int)((s >> 8) % 24) - 12);
	}
}

/* The fixed-point reference of the f32 sum, in place over ref[0]. */
static void
fixp_ref(float **in, unsigned int world, size_t n, float *out)
{
	double amax = 0;
	int b = 30, k, e;

	for (unsigned int w = world; w > 1; w >>= 1)
		b--;
	for (unsigned int r = 0; r < world; r++)
		for (size_t i = 0; i < n; i++)
			if (fabs((double)in[r][i]) > amax)
				amax = fabs((double)in[r][i]);
	(void)frexp(amax, &k);
	e = amax == 0 ? 0 : b - k;
	for (size_t i = 0; i < n; i++) {
		int64_t sum = 0;

		for (unsigned int r = 0; r < world; r++)
			sum += (int64_t)nearbyint(ldexp((double)in[r][i], e));
		out[i] = (float)ldexp((double)sum, -e);
	}
}

/* One world and size: every rank's bits equal the reference's. */
static void
check_world(unsigned int world, size_t n)
{
	int32_t *iref = calloc(n + 1, sizeof(*iref));
	float *fref = calloc(n + 1, sizeof(*fref)), *fin[WMAX];

	assert_non_null(iref);
	listeners(world);
	for (unsigned int r = 0; r < world; r++) {
		struct rank *k = &ranks[r];

		k->n = n;
		k->ibuf = malloc((n + 1) * sizeof(*k->ibuf));
		k->fbuf = malloc((n + 1) * sizeof(*k->fbuf));
		fin[r] = malloc((n + 1) * sizeof(*k->fbuf));
		fill(r, n, k->ibuf, k->fbuf);
		memcpy(fin[r], k->fbuf, n * sizeof(float));
		for (size_t i = 0; i < n; i++)
			iref[i] = (int32_t)((uint32_t)iref[i] +
				(uint32_t)k->ibuf[i]);
		opts(&k->o, r, world);
	}
	fixp_ref(fin, world, n, fref);
	for (unsigned int r = 0; r < world; r++)
		assert_int_equal(pthread_create(&ranks[r].thread, NULL,
			run_rank, &ranks[r]), 0);
	for (unsigned int r = 0; r < world; r++)
		pthread_join(ranks[r].thread, NULL);
	for (unsigned int r = 0; r < world; r++) {
		struct rank *k = &ranks[r];

		if (k->open_rc || k->rc_i || k->rc_f)
			fail_msg("world %u n %zu rank %u: open %d i32 %d f32 "
				"%d: %s", world, n, r, k->open_rc, k->rc_i,
				k->rc_f, k->err);
		assert_memory_equal(k->ibuf, iref, n * sizeof(int32_t));
		assert_memory_equal(k->fbuf, fref, n * sizeof(float));
		assert_int_equal(k->st.ring_calls, n > 0 ? 3 : 0);
		assert_int_equal(k->st.ring_refused, 0);
		free(k->ibuf);
		free(k->fbuf);
		free(fin[r]);
	}
	free(iref);
	free(fref);
}

static void
worlds_and_sizes(void **state)
{
	static const unsigned int worlds[] = { 1, 2, 3, 4, 7 };
	static const size_t sizes[] = { 0, 1, 257, 100003 };

	(void)state;
	for (unsigned int w = 0; w < 5; w++)
		for (unsigned int s = 0; s < 4; s++)
			check_world(worlds[w], sizes[s]);
}

static void
big(void **state)
{
	(void)state;
	check_world(3, BIG);
	check_world(4, BIG + 5);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(worlds_and_sizes),
		cmocka_unit_test(big),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The block-sparse allreduce (codec "sparse") against the real engine
 * behind loopagg: ranks with different block selections (one selecting
 * none), with and without loss both ways, every rank's result equal bit
 * for bit to the CPU reference (tests/bench/codec_ref.c), and only the
 * union of the selected blocks non-zero; and with every result lent at an
 * odd address, as the UDP transport's GRO staging may lend one.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tally/codec.h>
#include <tally/sparse.h>
#include <tally/tally.h>

#include "../bench/codec_ref.h"
#include "lib/ctx.h"
#include "latetp.h"
#include "loopagg.h"
#include "wraptp.h"

#define JOB	6
#define TOKEN	UINT64_C(0x6666000066660000)
#define WORLD	3
#define N	(TALLY_SPARSE_BLOCK * 61 + 17)	/* a short last block */

struct rank {
	pthread_t thread;
	struct tally_ctx_opts o;
	int odd;		/* results lent at odd addresses (odd_tp) */
	float *buf;
	int rc;
	char err[256];
	struct tally_ctx_stats st;
};

static uint64_t
mix(uint64_t z)
{
	z += UINT64_C(0x9e3779b97f4a7c15);
	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

/*
 * Rank r's tensor: small noise everywhere and large values in one block
 * of 11 (which ones depends on the rank), so that at a density of 5% a
 * rank picks its large blocks and the ranks' picks differ; rank 2 is all
 * zeros and picks none (zeros never travel).
 */
static void
gen(const void *arg, unsigned int r, size_t i0, size_t len, float *out)
{
	(void)arg;
	for (size_t i = 0; i < len; i++) {
		size_t k = i0 + i, b = k / TALLY_SPARSE_BLOCK;
		uint64_t h = mix((uint64_t)r << 40 ^ k);
		float x = ((float)(h & 0xffff) / 65536.0f - 0.5f) * 1e-3f;

		if ((b * 7 + r * 3) % 11 == 0)
			x *= 4000.0f;
		out[i] = r == 2 ? 0.0f : x;
	}
}

/*
 * A transport in front of a context's own that lends every packet it
 * receives at an odd address: the UDP transport's GRO staging lends a
 * segment where it lies in the coalesced datagram, which after
 * odd-sized segments (anyone's who spoofs the dataplane) is odd.
 */
#define ODD_ROOM	2048

struct odd_tp {
	struct wraptp w;	/* first */
	uint8_t buf[TALLY_TP_BURST * ODD_ROOM + 1];
};

static int
odd_recv(struct wraptp *w, struct tally_rx_pkt *pkts, unsigned int n,
	unsigned int timeout_us)
{
	struct odd_tp *o = (struct odd_tp *)w;
	int rc = tally_transport_recv(w->inner, pkts, n, timeout_us);

	for (int i = 0; i < rc; i++) {
		uint8_t *p = o->buf + 1 + (size_t)i * ODD_ROOM;

		assert_true(pkts[i].len <= ODD_ROOM);
		memmove(p, pkts[i].buf, pkts[i].len);
		pkts[i].buf = p;
	}
	return rc;
}

/* Puts an odd_tp in front of ctx's transport; the close destroys both. */
static void
lend_odd(struct tally_ctx *ctx)
{
	struct odd_tp *o = calloc(1, sizeof(*o));

	assert_non_null(o);
	wraptp_wrap(&o->w, ctx, "odd", odd_recv, WRAPTP_OWNED);
}

static void *
rank_main(void *arg)
{
	struct rank *k = arg;
	struct tally_ctx *ctx;

	k->rc = tally_ctx_open(&k->o, &ctx);
	if (k->rc != 0) {
		snprintf(k->err, sizeof(k->err), "%s", tally_ctx_error(NULL));
		return NULL;
	}
	if (k->odd)
		lend_odd(ctx);
	k->rc = tally_allreduce(ctx, k->buf, N);
	snprintf(k->err, sizeof(k->err), "%s", tally_ctx_error(ctx));
	tally_ctx_stats(ctx, &k->st);
	tally_ctx_close(ctx);
	return NULL;
}

static void
one(const char *spec, double loss, int odd)
{
	struct loopagg_conf ac = {
		.job = JOB, .token = TOKEN, .world = WORLD, .window = 8,
		.max_elems = 256, .loss_up = loss, .loss_down = loss,
		.dup = loss, .seed = 3,
	};
	struct bench_codec_ref cr = { .world = WORLD, .n = N, .gen = gen };
	struct loopagg *a = loopagg_start(&ac);
	float *ref = malloc(N * sizeof(float));
	struct loopagg_stats as;
	struct rank k[WORLD];
	size_t nonzero = 0, ublocks = 0;

	assert_non_null(a);
	assert_non_null(ref);
	assert_int_equal(tally_codec_parse(spec, &cr.codec, NULL, 0), 0);
	cr.seed = cr.codec.seed;
	assert_int_equal(bench_codec_reference(&cr, ref), 0);
	for (size_t i = 0; i < N; i++)
		nonzero += ref[i] != 0.0f;
	/* The union of the selections: the blocks that come back summed. */
	for (size_t b = 0; b < TALLY_SPARSE_NBLOCKS(N); b++) {
		size_t b1 = (b + 1) * TALLY_SPARSE_BLOCK;
		int any = 0;

		for (size_t i = b * TALLY_SPARSE_BLOCK; i < b1 && i < N; i++)
			any |= ref[i] != 0.0f;
		ublocks += any;
	}
	/* Some blocks travel, far from all. */
	assert_true(nonzero > 0 && nonzero < N / 2);
	for (unsigned int r = 0; r < WORLD; r++) {
		k[r] = (struct rank){
			.o = { .dp_addr = "127.0.0.1",
				.dp_port = loopagg_port(a), .job = JOB,
				.token = TOKEN, .rank = (uint8_t)r,
				.world = WORLD, .window = 8, .elems = 256,
				.rto_us = 500, .timeout_ms = 5000,
				.codec = spec },
			.buf = malloc(N * sizeof(float)),
			.odd = odd,
		};
		assert_non_null(k[r].buf);
		gen(NULL, r, 0, N, k[r].buf);
		assert_int_equal(pthread_create(&k[r].thread, NULL, rank_main,
			&k[r]), 0);
	}
	for (unsigned int r = 0; r < WORLD; r++)
		pthread_join(k[r].thread, NULL);
	loopagg_stop(a, &as);
	for (unsigned int r = 0; r < WORLD; r++) {
		if (k[r].rc != 0)
			fail_msg("%s: rank %u: %d (%s)", spec, r, k[r].rc,
				k[r].err);
		if (memcmp(k[r].buf, ref, N * sizeof(float)) != 0)
			fail_msg("%s: rank %u differs from the reference", spec,
				r);
		/* Headers alone went in bundles (docs/protocol.md). */
		assert_true(k[r].st.bundled > 0);
		free(k[r].buf);
	}
	assert_true(as.bundles > 0);
	/*
	 * One round a block of the union, and the scale round (which also
	 * agreed on the streams' first blocks): no round for a stream
	 * nobody had a block in, and none to find the first blocks.
	 */
	assert_int_equal(as.agg.completed, ublocks + 1);
	free(ref);
}

static void
exact_topk(void **state)
{
	(void)state;
	one("sparse,density=0.05,est=topk", 0, 0);
}

static void
sidco_with_loss(void **state)
{
	(void)state;
	one("sparse,density=0.05,est=sidco-gpd", 0.05, 0);
}

/*
 * Results lent at odd addresses: decoded as they are (found by
 * fuzz-result: UBSan's misaligned int32 loads in tally_fixp_decode(),
 * and a vectorized loop may assume the alignment).
 */
static void
odd_addresses(void **state)
{
	(void)state;
	one("sparse,density=0.05,est=topk", 0, 1);
}

/*
 * A rank descheduled past its call's deadline, its results waiting in
 * the socket (latetp.h): the scale round and every stream's rounds take
 * them and succeed, with the same sums as a world of one without the
 * lateness (bench_codec_reference()).
 */
static void
late_reader(void **state)
{
	const char *spec = "sparse,density=0.05,est=topk";
	struct loopagg_conf ac = {
		.job = JOB, .token = TOKEN, .world = 1, .window = 8,
		.max_elems = 256, .seed = 3,
	};
	struct bench_codec_ref cr = { .world = 1, .n = N, .gen = gen };
	struct loopagg *a = loopagg_start(&ac);
	struct latetp late = { .late_ms = 60 };
	float *buf = malloc(N * sizeof(float)), *ref = malloc(N * sizeof(float));
	struct tally_ctx_opts o = {
		.dp_addr = "127.0.0.1", .job = JOB, .token = TOKEN,
		.world = 1, .window = 8, .elems = 256, .rto_us = 500,
		.timeout_ms = 20, .codec = spec,	/* a third of late_ms */
	};
	struct tally_ctx *ctx;

	(void)state;
	assert_non_null(a);
	assert_non_null(buf);
	assert_non_null(ref);
	assert_int_equal(tally_codec_parse(spec, &cr.codec, NULL, 0), 0);
	cr.seed = cr.codec.seed;
	assert_int_equal(bench_codec_reference(&cr, ref), 0);
	gen(NULL, 0, 0, N, buf);
	o.dp_port = loopagg_port(a);
	assert_int_equal(tally_ctx_open(&o, &ctx), 0);
	latetp_wrap(&late, ctx);
	if (tally_allreduce(ctx, buf, N) != 0)
		fail_msg("late rank: %s", tally_ctx_error(ctx));
	assert_memory_equal(buf, ref, N * sizeof(float));
	assert_true(late.slept > 0);
	wraptp_unwrap(&late.w, ctx);
	tally_ctx_close(ctx);
	loopagg_stop(a, NULL);
	free(buf);
	free(ref);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(exact_topk),
		cmocka_unit_test(sidco_with_loss),
		cmocka_unit_test(odd_addresses),
		cmocka_unit_test(late_reader),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What a member's reduce-scatter, all-gather and broadcast put on the
 * wire (docs/protocol.md, "Collectives" and "Bundles"), read from a
 * plain UDP socket standing in for the dataplane: the shards' chunks
 * interleaved in runs of 8, so that every member owns its share of the
 * chunks in flight from the start; a GATHER's requests (headers alone)
 * in bundles, the data alone. And through the real engine (loopagg): an
 * all-gather whose requests came bundled, a reduce-scatter whose DONEs
 * did: exact, nothing refused.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <tally/proto.h>
#include <tally/tally.h>

#include "loopagg.h"

#define JOB	12
#define TOKEN	UINT64_C(0x00c0ffee00c0ffee)
#define ELEMS	256
#define WINDOW	16
#define PER	(32 * ELEMS)	/* elements a shard: 32 chunks */
#define MAXH	256		/* headers kept */

/* The datagrams a member sent to the stand-in, and their headers. */
struct seen {
	unsigned int ndgrams;
	unsigned int dgram_len[MAXH];
	unsigned int nh;
	struct tally_hdr h[MAXH];
	unsigned int len[MAXH];	/* each header's packet's length */
};

static uint32_t data[2 * PER], out[2 * PER];

/* A UDP socket on 127.0.0.1 (an ephemeral port into *port), or fails. */
static int
stand_in(uint16_t *port)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
		.sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t al = sizeof(a);
	int fd = socket(AF_INET, SOCK_DGRAM, 0);

	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &al), 0);
	*port = ntohs(a.sin_port);
	return fd;
}

/* Reads every datagram queued on fd, bundles split into headers. */
static void
collect(int fd, struct seen *s)
{
	uint8_t buf[65536];
	ssize_t n;

	memset(s, 0, sizeof(*s));
	while ((n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT)) > 0) {
		unsigned int k = tally_bundle_count(buf, (size_t)n);
		size_t stride = k > 1 ? tally_bundle_stride(buf) : (size_t)n;

		if (s->ndgrams < MAXH)
			s->dgram_len[s->ndgrams] = (unsigned int)n;
		s->ndgrams++;
		for (unsigned int i = 0; i < k && s->nh < MAXH; i++) {
			assert_int_equal(tally_hdr_decode(buf + i * stride,
				stride, &s->h[s->nh]), TALLY_ST_OK);
			s->len[s->nh++] = (unsigned int)stride;
		}
	}
}

/*
 * Rank rank of a world of 2 runs op against the stand-in, which never
 * answers: the call times out having sent its first window alone (the
 * retransmission timeout is far longer), which s gets. The context's
 * counters into st.
 */
static void
first_window(uint8_t rank, char op, struct seen *s, struct tally_ctx_stats *st)
{
	uint16_t port;
	int fd = stand_in(&port);
	struct tally_ctx_opts o = { .dp_addr = "127.0.0.1", .dp_port = port,
		.job = JOB, .token = TOKEN, .rank = rank, .world = 2,
		.elems = ELEMS, .window = WINDOW, .timeout_ms = 150,
		.rto_us = 1000000 };
	struct tally_ctx *ctx;
	int rc;

	assert_int_equal(tally_ctx_open(&o, &ctx), 0);
	if (op == 'r')
		rc = tally_reduce_scatter(ctx, data, out, PER, TALLY_DT_I32);
	else if (op == 'g')
		rc = tally_allgather(ctx, data + rank * PER, out, PER,
			TALLY_DT_I32);
	else
		rc = tally_broadcast(ctx, data, PER, TALLY_DT_I32, 0);
	assert_int_equal(rc, -ETIMEDOUT);
	tally_ctx_stats(ctx, st);
	tally_ctx_close(ctx);
	collect(fd, s);
	close(fd);
}

/*
 * The first window of a reduce-scatter: 8 chunks of shard 0, then 8 of
 * shard 1, each shard's from its own start; every one with data.
 */
static void
chunks_interleave(void **state)
{
	struct tally_ctx_stats st;
	struct seen s;

	(void)state;
	first_window(0, 'r', &s, &st);
	assert_int_equal(s.nh, WINDOW);
	assert_int_equal(s.ndgrams, WINDOW);
	for (unsigned int c = 0; c < WINDOW; c++) {
		unsigned int p = c / 8, i = c % 8;

		assert_int_equal(s.h[c].type, TALLY_PT_SCATTER);
		assert_int_equal(s.h[c].slot, c);
		assert_int_equal(s.h[c].status, p);
		assert_int_equal(s.h[c].offset, p * PER + i * ELEMS);
		assert_int_equal(s.h[c].count, ELEMS);
	}
}

/*
 * An all-gather's first window from rank 1: the requests for shard 0's
 * 8 chunks in one bundle (the first datagram), then its own 8 chunks'
 * data, a datagram each.
 */
static void
requests_bundled(void **state)
{
	struct tally_ctx_stats st;
	struct seen s;

	(void)state;
	first_window(1, 'g', &s, &st);
	assert_int_equal(s.nh, WINDOW);
	assert_int_equal(s.ndgrams, 1 + 8);
	assert_int_equal(s.dgram_len[0], 8 * TALLY_HDR_LEN);
	assert_int_equal(st.bundled, 8);
	assert_int_equal(st.packets_sent, WINDOW);
	for (unsigned int c = 0; c < WINDOW; c++) {
		assert_int_equal(s.h[c].type, TALLY_PT_GATHER);
		assert_int_equal(s.h[c].status, c / 8);
		assert_int_equal(s.len[c], c < 8 ? TALLY_HDR_LEN :
			TALLY_HDR_LEN + 4 * ELEMS);
		assert_int_equal(s.h[c].offset, c / 8 * PER + c % 8 * ELEMS);
	}
	/* A broadcast's other members send requests alone: one datagram. */
	first_window(1, 'b', &s, &st);
	assert_int_equal(s.nh, WINDOW);
	assert_int_equal(s.ndgrams, 1);
	assert_int_equal(st.bundled, WINDOW);
	for (unsigned int c = 0; c < WINDOW; c++)
		assert_int_equal(s.h[c].offset, c * ELEMS);
}

struct rank {
	pthread_t thread;
	struct tally_ctx_opts o;
	char op;		/* 'g' all-gather, 'r' reduce-scatter */
	int rc;
	uint32_t *recv;
	struct tally_ctx_stats st;
};

static void *
rank_main(void *arg)
{
	struct rank *r = arg;
	struct tally_ctx *ctx;

	r->rc = tally_ctx_open(&r->o, &ctx);
	if (r->rc != 0)
		return NULL;
	if (r->op == 'g')
		r->rc = tally_allgather(ctx, data + r->o.rank * PER, r->recv,
			PER, TALLY_DT_I32);
	else
		r->rc = tally_reduce_scatter(ctx, data, r->recv, PER,
			TALLY_DT_I32);
	tally_ctx_stats(ctx, &r->st);
	tally_ctx_close(ctx);
	return NULL;
}

/*
 * Two ranks run op through loopagg (window WINDOW, authenticated with
 * keys when not NULL), each receiving into recv[rank]; as gets the
 * aggregator's counters, r the ranks'.
 */
static void
two_ranks(char op, const struct tally_auth_keys *keys,
	uint32_t (*recv)[2 * PER], struct rank *r, struct loopagg_stats *as)
{
	struct loopagg_conf ac = { .job = JOB, .token = TOKEN, .world = 2,
		.window = WINDOW, .max_elems = ELEMS, .auth = keys,
		.seed = 1 };
	struct loopagg *a = loopagg_start(&ac);

	assert_non_null(a);
	for (unsigned int i = 0; i < 2; i++) {
		r[i] = (struct rank){ .recv = recv[i], .op = op, .o = {
			.dp_addr = "127.0.0.1", .dp_port = loopagg_port(a),
			.job = JOB, .token = TOKEN, .rank = (uint8_t)i,
			.world = 2, .elems = ELEMS, .window = WINDOW,
			.timeout_ms = 5000, .rto_us = 200000,
			.auth = keys != NULL ? &keys[i] : NULL } };
		assert_int_equal(pthread_create(&r[i].thread, NULL,
			rank_main, &r[i]), 0);
	}
	for (unsigned int i = 0; i < 2; i++) {
		pthread_join(r[i].thread, NULL);
		assert_int_equal(r[i].rc, 0);
	}
	loopagg_stop(a, as);
	/* Nothing refused (a copy of a round already moved past, stale, may
	 * come of a retransmission on a busy host). */
	for (unsigned int i = 1; i < TALLY_ST_MAX_; i++)
		if (i != TALLY_ST_STALE)
			assert_int_equal(as->agg.drops[i], 0);
	assert_int_equal(as->agg.nacks, 0);
}

/*
 * Two members all-gather through the engine: the bundled requests are
 * taken as if each had come alone, and every member gets the other's
 * bytes; nothing refused.
 */
static void
bundles_through_engine(void **state)
{
	static uint32_t recv[2][2 * PER];
	struct loopagg_stats as;
	struct rank r[2];

	(void)state;
	two_ranks('g', NULL, recv, r, &as);
	for (unsigned int i = 0; i < 2; i++)
		assert_memory_equal(recv[i], data, sizeof(data));
	assert_true(as.bundles > 0);
}

/*
 * A reduce-scatter whose DONEs come in bundles (loopagg sends a member's
 * DONEs of a burst in one datagram, as tally-dp does): each taken as if
 * it had come alone, one result a chunk, every shard's sums exact, the
 * bundles read (the retransmission timeout is long: a DONE not read
 * would have to be asked for again); in an authenticated job too (a tag
 * an entry).
 */
static void
done_bundles_taken(void **state)
{
	static uint32_t recv[2][2 * PER];
	struct tally_auth_keys keys[2];
	struct loopagg_stats as;
	struct rank r[2];

	(void)state;
	for (unsigned int i = 0; i < 2; i++)
		for (unsigned int k = 0; k < sizeof(keys[i]); k++)
			((uint8_t *)&keys[i])[k] = (uint8_t)(7 * k + 1);
	for (unsigned int pass = 0; pass < 2; pass++) {
		two_ranks('r', pass ? keys : NULL, recv, r, &as);
		assert_true(as.done_bundled > 0);
		for (unsigned int i = 0; i < 2; i++) {
			assert_int_equal(r[i].st.results, 2 * PER / ELEMS);
			assert_int_equal(r[i].st.forged, 0);
			/* The bundled DONEs were read, not asked for again
			 * (unread, each would have cost a retransmission;
			 * a busy host may cause a few). */
			assert_true(r[i].st.retransmits * 4 <
				as.done_bundled);
			for (size_t e = 0; e < PER; e++)
				assert_int_equal(recv[i][e],
					2 * data[i * PER + e]);
		}
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(chunks_interleave),
		cmocka_unit_test(requests_bundled),
		cmocka_unit_test(bundles_through_engine),
		cmocka_unit_test(done_bundles_taken),
	};

	for (size_t i = 0; i < 2 * PER; i++)
		data[i] = (uint32_t)(i * 2654435761u);
	return cmocka_run_group_tests(tests, NULL, NULL);
}

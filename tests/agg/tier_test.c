/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Two tiers in the engine (dataplane/agg/tier.c): a leaf job's completed
 * round goes upstream as its wide partial sum, a member's retransmission
 * of a forwarded round re-forwards it, the spine's result becomes the
 * round's result (stored, resent), bad packets from upstream are dropped
 * and counted; and a whole tree (two leaves of three and a spine, three
 * engines in one process) under loss on every hop, recovered by the
 * members' retransmissions alone, ends equal to one flat job of six.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "agg/agg.h"

#define JOB	7
#define LTOKEN	0x1111222233334444ull	/* the leaf job's */
#define STOKEN	0x5555666677778888ull	/* the spine job's */
#define SPINE_IP	0x0a4d0009u	/* 10.77.0.9, host order */
#define SPINE_PORT	47474

struct leaf {
	struct tally_job *job;
	struct tally_jobtab *tab;
	struct tally_agg_stats st;
	struct tally_verdict v;
	uint8_t pkt[TALLY_HDR_LEN + 4 * 1024];
	struct tally_addr spine;
};

static struct leaf L;

/* A leaf of world members, rank rank of a spine of total ranks. */
static void
leaf_setup(uint8_t world, uint8_t rank, uint16_t total, int narrow)
{
	struct tally_job_conf conf = {
		.id = JOB, .token = LTOKEN, .world = world, .window = 4,
		.max_elems = 64, .narrow = (uint8_t)narrow,
		.up = { .ip = htonl(SPINE_IP), .port = htons(SPINE_PORT),
			.nports = 1, .token = STOKEN, .rank = rank,
			.world = total },
	};

	memset(&L.st, 0, sizeof(L.st));
	L.job = tally_job_create(&conf);
	assert_non_null(L.job);
	L.tab = tally_jobtab_create(&L.job, 1);
	assert_non_null(L.tab);
	L.spine = (struct tally_addr){ htonl(SPINE_IP), htons(SPINE_PORT + 3) };
}

static int
teardown(void **state)
{
	(void)state;
	tally_jobtab_destroy(L.tab);
	tally_job_destroy(L.job);
	L.tab = NULL;
	L.job = NULL;
	return 0;
}

static struct tally_hdr
mk(uint8_t type, uint8_t rank, uint16_t slot, uint64_t round, uint16_t count,
	uint8_t enc)
{
	return (struct tally_hdr){
		.version = TALLY_PROTO_VERSION, .type = type,
		.flags = (uint8_t)((round & 1 ? TALLY_F_SET : 0) |
			TALLY_F_LAST), .enc = enc, .job = JOB,
		.token = LTOKEN, .rank = rank, .slot = slot, .offset = 64,
		.count = count, .next_block = TALLY_NO_BLOCK, .round = round,
	};
}

/* Packet h with payload (as long as h says) from src into the leaf. */
static enum tally_verdict_kind
to_leaf(const struct tally_hdr *h, const void *payload,
	const struct tally_addr *src)
{
	size_t plen = tally_enc_payload_len(h->enc, h->count);

	if (h->type == TALLY_PT_NACK || (h->flags & TALLY_F_SPARSE &&
			h->count == 0))
		plen = 0;
	tally_hdr_encode(h, L.pkt);
	memcpy(L.pkt + TALLY_HDR_LEN, payload, plen);
	return tally_agg_process(L.tab, &L.st, L.pkt,
		(unsigned int)(TALLY_HDR_LEN + plen), src, &L.v);
}

/* The spine's result res (count i32) for the leaf's round. */
static enum tally_verdict_kind
spine_result(uint16_t slot, uint64_t round, const int32_t *res, uint16_t n)
{
	struct tally_hdr h = mk(TALLY_PT_SUM_RESULT, TALLY_RANK_ALL, slot,
		round, n, TALLY_ENC_I32);

	h.token = STOKEN;
	return to_leaf(&h, res, &L.spine);
}

/* Three members of a narrow leaf send i8; the third completes the leaf
 * round: it goes upstream in i32, the leaf's rank and the spine's token. */
static void
forward_wide(void **state)
{
	int8_t a[4] = { 100, -100, 1, 2 }, b[4] = { 100, -100, 3, 4 },
		c[4] = { 100, -100, 5, 6 };
	int32_t want[4] = { 300, -300, 9, 12 };
	struct tally_hdr h = mk(TALLY_PT_SUM, 0, 2, 0, 4, TALLY_ENC_I8);

	(void)state;
	leaf_setup(3, 1, 6, 1);
	assert_int_equal(to_leaf(&h, a, NULL), TALLY_V_TAKEN);
	h.rank = 1;
	assert_int_equal(to_leaf(&h, b, NULL), TALLY_V_TAKEN);
	h.rank = 2;
	assert_int_equal(to_leaf(&h, c, NULL), TALLY_V_UPSTREAM);
	assert_int_equal(L.v.hdr.type, TALLY_PT_SUM);
	assert_int_equal(L.v.hdr.enc, TALLY_ENC_I32);
	assert_int_equal(L.v.hdr.token, STOKEN);
	assert_int_equal(L.v.hdr.job, JOB);
	assert_int_equal(L.v.hdr.rank, 1);
	assert_int_equal(L.v.hdr.slot, 2);
	assert_int_equal(L.v.hdr.round, 0);
	assert_int_equal(L.v.hdr.offset, 64);
	assert_int_equal(L.v.hdr.count, 4);
	assert_int_equal(L.v.hdr.flags & TALLY_F_RETX, 0);
	assert_int_equal(L.v.hdr.flags & TALLY_F_LAST, TALLY_F_LAST);
	assert_int_equal(L.v.payload_len, 16);
	assert_memory_equal(L.v.payload, want, sizeof(want));
	assert_int_equal(L.st.tier_forwarded, 1);
	assert_int_equal(L.st.completed, 0);
	assert_int_equal(L.st.accepted, 3);
}

/*
 * While forwarded: a member's retransmission goes upstream again (RETX),
 * the next round is early; the spine's result completes the round,
 * narrowed for the narrow job (saturated i8), a retransmission then gets
 * it as a RESEND, and the spine's result again is stale.
 */
static void
reforward_then_result(void **state)
{
	int8_t a[4] = { 100, -100, 1, 2 };
	int32_t up[4] = { 300, -300, 3, 6 }, spine[4] = { 600, -600, 7, -9 };
	int8_t want[4] = { 127, -128, 7, -9 };
	struct tally_hdr h = mk(TALLY_PT_SUM, 0, 1, 0, 4, TALLY_ENC_I8);

	(void)state;
	leaf_setup(3, 0, 6, 1);
	for (uint8_t r = 0; r < 3; r++) {
		h.rank = r;
		to_leaf(&h, a, NULL);
	}
	assert_int_equal(L.v.kind, TALLY_V_UPSTREAM);
	h.rank = 1;
	h.flags |= TALLY_F_RETX;
	assert_int_equal(to_leaf(&h, a, NULL), TALLY_V_UPSTREAM);
	assert_int_equal(L.v.hdr.flags & TALLY_F_RETX, TALLY_F_RETX);
	assert_memory_equal(L.v.payload, up, sizeof(up));
	assert_int_equal(L.st.tier_reforwarded, 1);
	assert_int_equal(L.st.duplicates, 0);
	h = mk(TALLY_PT_SUM, 2, 1, 1, 4, TALLY_ENC_I8);
	assert_int_equal(to_leaf(&h, a, NULL), TALLY_V_NACK);
	assert_int_equal(L.v.status, TALLY_ST_EARLY);
	assert_int_equal(spine_result(1, 0, spine, 4), TALLY_V_COMPLETE);
	assert_int_equal(L.v.tier, 1);
	assert_int_equal(L.v.hdr.type, TALLY_PT_SUM_RESULT);
	assert_int_equal(L.v.hdr.enc, TALLY_ENC_I8);
	assert_int_equal(L.v.hdr.token, LTOKEN);
	assert_int_equal(L.v.hdr.rank, TALLY_RANK_ALL);
	assert_int_equal(L.v.payload_len, 4);
	assert_memory_equal(L.v.payload, want, sizeof(want));
	assert_int_equal(L.st.tier_results, 1);
	assert_int_equal(L.st.completed, 1);
	h = mk(TALLY_PT_SUM, 0, 1, 0, 4, TALLY_ENC_I8);
	h.flags |= TALLY_F_RETX;
	assert_int_equal(to_leaf(&h, a, NULL), TALLY_V_RESEND);
	assert_memory_equal(L.v.payload, want, sizeof(want));
	/* The spine's result again (a re-forward answered): a duplicate. */
	assert_int_equal(spine_result(1, 0, spine, 4), TALLY_V_DROP);
	assert_int_equal(L.v.status, TALLY_ST_OK);
	assert_int_equal(L.st.tier_duplicates, 1);
	assert_int_equal(L.st.tier_refused, 0);
	/* The next round starts now that the last one is complete. */
	h = mk(TALLY_PT_SUM, 2, 1, 1, 4, TALLY_ENC_I8);
	assert_int_equal(to_leaf(&h, a, NULL), TALLY_V_TAKEN);
	/* Round 0's result again, now the round before: still a duplicate;
	 * round 1's while it is open: stale, refused. */
	assert_int_equal(spine_result(1, 0, spine, 4), TALLY_V_DROP);
	assert_int_equal(L.v.status, TALLY_ST_OK);
	assert_int_equal(L.st.tier_duplicates, 2);
	assert_int_equal(spine_result(1, 1, spine, 4), TALLY_V_DROP);
	assert_int_equal(L.v.status, TALLY_ST_STALE);
	assert_int_equal(L.st.tier_refused, 1);
}

/* Bad packets from upstream: dropped, counted, the round untouched. */
static void
bad_upstream(void **state)
{
	int32_t res[4] = { 10, 20, 30, 40 };
	struct tally_addr other = { htonl(SPINE_IP + 1), htons(SPINE_PORT) };
	struct tally_hdr h;
	uint64_t n = 0;

	(void)state;
	leaf_setup(2, 0, 4, 0);
	/* An open round (one member in) is not forwarded: stale. */
	h = mk(TALLY_PT_SUM, 0, 0, 0, 4, TALLY_ENC_I32);
	to_leaf(&h, res, NULL);
	assert_int_equal(spine_result(0, 0, res, 4), TALLY_V_DROP);
	assert_int_equal(L.v.status, TALLY_ST_STALE);
	h.rank = 1;
	assert_int_equal(to_leaf(&h, res, NULL), TALLY_V_UPSTREAM);
	h = mk(TALLY_PT_SUM_RESULT, TALLY_RANK_ALL, 0, 0, 4, TALLY_ENC_I32);
	h.token = STOKEN + 1;
	assert_int_equal(to_leaf(&h, res, &L.spine), TALLY_V_DROP);
	assert_int_equal(L.v.status, TALLY_ST_BAD_TOKEN);
	h.token = LTOKEN;	/* the leaf's own token is not the spine's */
	assert_int_equal(to_leaf(&h, res, &L.spine), TALLY_V_DROP);
	assert_int_equal(L.v.status, TALLY_ST_BAD_TOKEN);
	h.token = STOKEN;
	assert_int_equal(to_leaf(&h, res, &other), TALLY_V_DROP);
	assert_int_equal(L.v.status, TALLY_ST_BAD_SOURCE);
	assert_int_equal(to_leaf(&h, res, NULL), TALLY_V_DROP);
	assert_int_equal(L.v.status, TALLY_ST_BAD_SOURCE);
	h.slot = 4;		/* the window is 4 */
	assert_int_equal(to_leaf(&h, res, &L.spine), TALLY_V_DROP);
	assert_int_equal(L.v.status, TALLY_ST_BAD_SLOT);
	h.slot = 1;		/* a slot with nothing forwarded */
	assert_int_equal(to_leaf(&h, res, &L.spine), TALLY_V_DROP);
	assert_int_equal(L.v.status, TALLY_ST_STALE);
	h.slot = 0;
	h.round = 2;		/* another round */
	assert_int_equal(to_leaf(&h, res, &L.spine), TALLY_V_DROP);
	assert_int_equal(L.v.status, TALLY_ST_STALE);
	h.round = 0;
	h.offset = 0;		/* another chunk */
	assert_int_equal(to_leaf(&h, res, &L.spine), TALLY_V_DROP);
	assert_int_equal(L.v.status, TALLY_ST_STALE);
	h.offset = 64;
	h.count = 3;		/* another length */
	assert_int_equal(to_leaf(&h, res, &L.spine), TALLY_V_DROP);
	assert_int_equal(L.v.status, TALLY_ST_STALE);
	h.count = 4;
	h.enc = TALLY_ENC_F32;	/* not the round's wide encoding */
	assert_int_equal(to_leaf(&h, res, &L.spine), TALLY_V_DROP);
	assert_int_equal(L.v.status, TALLY_ST_STALE);
	h.enc = TALLY_ENC_I32;
	h.type = TALLY_PT_MAX_RESULT;	/* another kind of round */
	assert_int_equal(to_leaf(&h, res, &L.spine), TALLY_V_DROP);
	assert_int_equal(L.v.status, TALLY_ST_STALE);
	h.type = TALLY_PT_SUM_RESULT;
	h.flags |= TALLY_F_AUTH;	/* tiers are plain */
	assert_int_equal(to_leaf(&h, res, &L.spine), TALLY_V_DROP);
	assert_int_equal(L.v.status, TALLY_ST_BAD_AUTH);
	h.flags &= (uint8_t)~TALLY_F_AUTH;
	h.job = JOB + 1;
	assert_int_equal(to_leaf(&h, res, &L.spine), TALLY_V_DROP);
	assert_int_equal(L.v.status, TALLY_ST_UNKNOWN_JOB);
	h.job = JOB;
	/* Truncated: the header says 4 elements, 3 came. */
	tally_hdr_encode(&h, L.pkt);
	assert_int_equal(tally_agg_process(L.tab, &L.st, L.pkt,
		TALLY_HDR_LEN + 12, &L.spine, &L.v), TALLY_V_DROP);
	assert_int_equal(L.v.status, TALLY_ST_BAD_LENGTH);
	for (int i = 0; i < TALLY_ST_MAX_; i++)
		n += L.st.drops[i];
	assert_int_equal(L.st.tier_refused, 15);
	assert_int_equal(n, 15);
	assert_int_equal(L.st.tier_results, 0);
	/* Through all that the round waited: the right result completes it. */
	assert_int_equal(spine_result(0, 0, res, 4), TALLY_V_COMPLETE);
	assert_memory_equal(L.v.payload, res, sizeof(res));
}

/* A job with no upstream takes no results: bad type, counted. */
static void
result_to_plain_job(void **state)
{
	struct tally_job_conf conf = {
		.id = JOB, .token = LTOKEN, .world = 2, .window = 4,
		.max_elems = 64,
	};
	int32_t res[4] = { 0 };

	(void)state;
	memset(&L.st, 0, sizeof(L.st));
	L.job = tally_job_create(&conf);
	assert_non_null(L.job);
	L.tab = tally_jobtab_create(&L.job, 1);
	L.spine = (struct tally_addr){ htonl(SPINE_IP), 0 };
	assert_int_equal(spine_result(0, 0, res, 4), TALLY_V_DROP);
	assert_int_equal(L.v.status, TALLY_ST_BAD_TYPE);
	/* Not the job's: no per-job counter moves (fuzz-wire's rule). */
	assert_null(L.v.job);
	assert_int_equal(L.st.drops[TALLY_ST_BAD_TYPE], 1);
	assert_int_equal(L.st.tier_refused, 1);
}

/* Maxima go up in their own encoding and come back as MAX_RESULT. */
static void
max_round(void **state)
{
	float a[2] = { 1.5f, -3.0f }, b[2] = { 2.5f, -4.0f };
	float spine[2] = { 9.0f, -1.0f };
	struct tally_hdr h = mk(TALLY_PT_MAX, 0, 3, 0, 2, TALLY_ENC_F32);

	(void)state;
	leaf_setup(2, 0, 4, 0);
	to_leaf(&h, a, NULL);
	h.rank = 1;
	assert_int_equal(to_leaf(&h, b, NULL), TALLY_V_UPSTREAM);
	assert_int_equal(L.v.hdr.type, TALLY_PT_MAX);
	assert_int_equal(L.v.hdr.enc, TALLY_ENC_F32);
	assert_true(((const float *)L.v.payload)[0] == 2.5f);
	assert_true(((const float *)L.v.payload)[1] == -3.0f);
	h = mk(TALLY_PT_MAX_RESULT, TALLY_RANK_ALL, 3, 0, 2, TALLY_ENC_F32);
	h.token = STOKEN;
	assert_int_equal(to_leaf(&h, spine, &L.spine), TALLY_V_COMPLETE);
	assert_int_equal(L.v.hdr.type, TALLY_PT_MAX_RESULT);
	assert_memory_equal(L.v.payload, spine, sizeof(spine));
}

/* Sign votes: counts go up in i32, the majority is of the total world. */
static void
sign_majority_of_total(void **state)
{
	uint8_t all = 0x0f;	/* + on elements 0..3, - on 4..7 */
	int32_t up[8] = { 2, 2, 2, 2, 0, 0, 0, 0 };
	int32_t spine[8] = { 3, 4, 2, 6, 0, 6, 4, 3 };	/* of 6 */
	struct tally_hdr h = mk(TALLY_PT_SUM, 0, 0, 0, 8, TALLY_ENC_SIGN);

	(void)state;
	leaf_setup(2, 1, 6, 1);
	to_leaf(&h, &all, NULL);
	h.rank = 1;
	assert_int_equal(to_leaf(&h, &all, NULL), TALLY_V_UPSTREAM);
	assert_int_equal(L.v.hdr.enc, TALLY_ENC_I32);
	assert_memory_equal(L.v.payload, up, sizeof(up));
	assert_int_equal(spine_result(0, 0, spine, 8), TALLY_V_COMPLETE);
	assert_int_equal(L.v.hdr.enc, TALLY_ENC_SIGN);
	/* more than 3 of 6: elements 1, 3, 5, 6 */
	assert_int_equal(*(const uint8_t *)L.v.payload, 0x6a);
}

/* A leaf takes dense rounds only: SCATTER and block-sparse: wrong_op. */
static void
leaf_refuses_other_rounds(void **state)
{
	int32_t a[4] = { 1, 2, 3, 4 };
	struct tally_hdr h = mk(TALLY_PT_SCATTER, 0, 0, 0, 4, TALLY_ENC_I32);

	(void)state;
	leaf_setup(2, 0, 4, 0);
	assert_int_equal(to_leaf(&h, a, NULL), TALLY_V_NACK);
	assert_int_equal(L.v.status, TALLY_ST_WRONG_OP);
	h = mk(TALLY_PT_SUM, 0, 1, 0, 4, TALLY_ENC_I32);
	h.flags |= TALLY_F_SPARSE;
	h.next_block = 9;
	assert_int_equal(to_leaf(&h, a, NULL), TALLY_V_NACK);
	assert_int_equal(L.v.status, TALLY_ST_WRONG_OP);
}

/* tally_job_create() refuses an upstream it cannot serve. */
static void
bad_up_conf(void **state)
{
	struct tally_job_conf conf = {
		.id = JOB, .token = LTOKEN, .world = 3, .window = 4,
		.max_elems = 64,
		.up = { .ip = htonl(SPINE_IP), .port = htons(SPINE_PORT),
			.token = STOKEN, .world = 2 },
	};
	struct tally_job *j;

	(void)state;
	errno = 0;
	assert_null(tally_job_create(&conf));	/* total below its own */
	assert_int_equal(errno, EINVAL);
	conf.up.world = TALLY_MAX_TIER_WORLD + 1;
	assert_null(tally_job_create(&conf));	/* past 64 x 64 */
	conf.up.world = TALLY_MAX_TIER_WORLD;
	conf.up.port = 0;
	assert_null(tally_job_create(&conf));
	conf.up.port = htons(SPINE_PORT);
	conf.roce = 1;
	assert_null(tally_job_create(&conf));
	conf.roce = 0;
	j = tally_job_create(&conf);
	assert_non_null(j);
	tally_job_destroy(j);
}

/* ---- a whole tree: two leaves of three, a spine, lossy hops ---------- */

#define NL	2		/* leaves */
#define NW	3		/* members a leaf */
#define WIN	4
#define NCH	24		/* chunks a member sends */
#define CNT	16		/* elements a chunk */
#define LEAF_IP(l)	htonl(0x0a4d0100u + (l))

struct node {			/* one engine: a leaf or the spine */
	struct tally_job *job;
	struct tally_jobtab *tab;
	struct tally_agg_stats st;
};

struct msg {
	int to;			/* -1 the spine, 0..NL-1 a leaf, NL + w a
				 * worker (w = l * NW + r) */
	struct tally_addr src;
	unsigned int len;
	uint8_t b[TALLY_HDR_LEN + 4 * CNT];
};

struct tree {
	struct node spine, leaf[NL], flat;
	struct msg *q;
	size_t nq, cap;
	unsigned int loss_pm;	/* per mille, each hop */
	int32_t data[NL * NW][NCH][CNT];
	int32_t got[NL * NW][NCH][CNT];
	uint8_t have[NL * NW][NCH];
	uint8_t sent[NL * NW][NCH];
	uint64_t lost;
};

static void
node_init(struct node *n, const struct tally_job_conf *c)
{
	memset(&n->st, 0, sizeof(n->st));
	n->job = tally_job_create(c);
	assert_non_null(n->job);
	n->tab = tally_jobtab_create(&n->job, 1);
	assert_non_null(n->tab);
}

static void
node_fini(struct node *n)
{
	tally_jobtab_destroy(n->tab);
	tally_job_destroy(n->job);
}

/* Queues a packet (header h, payload p) for to, unless the hop loses it. */
static void
post(struct tree *t, int to, struct tally_addr src, const struct tally_hdr *h,
	const void *p, unsigned int plen)
{
	struct msg *m;

	if ((unsigned int)(random() % 1000) < t->loss_pm) {
		t->lost++;
		return;
	}
	if (t->nq == t->cap) {
		t->cap = t->cap ? 2 * t->cap : 256;
		t->q = realloc(t->q, t->cap * sizeof(*t->q));
		assert_non_null(t->q);
	}
	m = &t->q[t->nq++];
	m->to = to;
	m->src = src;
	tally_hdr_encode(h, m->b);
	memcpy(m->b + TALLY_HDR_LEN, p, plen);
	m->len = TALLY_HDR_LEN + plen;
}

/* Worker w sends chunk k (again with retx). */
static void
send_chunk(struct tree *t, unsigned int w, unsigned int k, int retx)
{
	struct tally_hdr h = mk(TALLY_PT_SUM, (uint8_t)(w % NW), k % WIN,
		k / WIN, CNT, TALLY_ENC_I32);

	h.offset = k * CNT;
	h.flags = (uint8_t)((h.flags & ~TALLY_F_LAST) |
		(retx ? TALLY_F_RETX : 0));
	post(t, (int)(w / NW), (struct tally_addr){ 0, 0 }, &h, t->data[w][k],
		CNT * 4);
}

/* Worker w takes a result; moves on to the next chunk of that slot. */
static void
worker_rx(struct tree *t, unsigned int w, const struct msg *m)
{
	struct tally_hdr h = { 0 };
	unsigned int k;

	assert_int_equal(tally_hdr_decode(m->b, m->len, &h), TALLY_ST_OK);
	assert_int_equal(h.type, TALLY_PT_SUM_RESULT);
	k = h.offset / CNT;
	if (t->have[w][k])
		return;
	t->have[w][k] = 1;
	memcpy(t->got[w][k], m->b + TALLY_HDR_LEN, CNT * 4);
	if (k + WIN < NCH) {
		t->sent[w][k + WIN] = 1;
		send_chunk(t, w, k + WIN, 0);
	}
}

/* What an engine's verdict v sends, posted (spine: from is -1). */
static void
emit(struct tree *t, int from, const struct tally_verdict *v,
	const struct msg *m)
{
	struct tally_addr leaf_src = { from >= 0 ? LEAF_IP(from) : 0,
		htons(47474) };
	struct tally_addr spine_src = { htonl(SPINE_IP), htons(SPINE_PORT) };

	switch (v->kind) {
	case TALLY_V_UPSTREAM:
		post(t, -1, leaf_src, &v->hdr, v->payload, v->payload_len);
		break;
	case TALLY_V_COMPLETE:
		for (int i = 0; i < (from < 0 ? NL : NW); i++)
			post(t, from < 0 ? i : NL + from * NW + i,
				from < 0 ? spine_src : leaf_src, &v->hdr,
				v->payload, v->payload_len);
		break;
	case TALLY_V_RESEND:
		post(t, from < 0 ? (int)v->rank : NL + from * NW + v->rank,
			from < 0 ? spine_src : leaf_src, &v->hdr, v->payload,
			v->payload_len);
		break;
	case TALLY_V_NACK:
		fail_msg("NACK status %d from %d", v->status, from);
		break;
	default:
		(void)m;
		break;
	}
}

/* Delivers every queued packet; returns how many there were. */
static size_t
deliver(struct tree *t)
{
	size_t n = t->nq;
	struct msg *q = t->q;
	struct tally_verdict v;

	t->q = NULL;
	t->nq = t->cap = 0;
	for (size_t i = 0; i < n; i++) {
		struct msg *m = &q[i];
		struct node *e;

		if (m->to >= NL) {
			worker_rx(t, (unsigned int)(m->to - NL), m);
			continue;
		}
		e = m->to < 0 ? &t->spine : &t->leaf[m->to];
		tally_agg_process(e->tab, &e->st, m->b, m->len, &m->src, &v);
		emit(t, m->to, &v, m);
	}
	free(q);
	return n;
}

/* Runs the tree until every member has every result (or gives up). */
static void
run_tree(struct tree *t)
{
	unsigned int ticks = 0, done;

	for (unsigned int w = 0; w < NL * NW; w++)
		for (unsigned int k = 0; k < WIN; k++) {
			t->sent[w][k] = 1;
			send_chunk(t, w, k, 0);
		}
	for (;;) {
		while (deliver(t) > 0)
			;
		done = 0;
		for (unsigned int w = 0; w < NL * NW; w++)
			for (unsigned int k = 0; k < NCH; k++)
				if (t->have[w][k])
					done++;
				else if (t->sent[w][k])
					send_chunk(t, w, k, 1);	/* a timeout */
		if (done == NL * NW * NCH)
			break;
		assert_true(++ticks < 10000);
	}
}

static void
tree_with_loss(unsigned int loss_pm)
{
	struct tree *t = calloc(1, sizeof(*t));
	struct tally_job_conf sc = {
		.id = JOB, .token = STOKEN, .world = NL, .window = WIN,
		.max_elems = CNT,
	};
	int32_t want[NCH][CNT] = { { 0 } };

	assert_non_null(t);
	t->loss_pm = loss_pm;
	srandom(loss_pm + 1);
	for (int l = 0; l < NL; l++)
		sc.members[l] = (struct tally_addr){ LEAF_IP(l), htons(47474) };
	node_init(&t->spine, &sc);
	for (int l = 0; l < NL; l++) {
		struct tally_job_conf lc = {
			.id = JOB, .token = LTOKEN, .world = NW, .window = WIN,
			.max_elems = CNT,
			.up = { .ip = htonl(SPINE_IP),
				.port = htons(SPINE_PORT), .nports = 1,
				.token = STOKEN, .rank = (uint8_t)l,
				.world = NL * NW },
		};

		node_init(&t->leaf[l], &lc);
	}
	for (unsigned int w = 0; w < NL * NW; w++)
		for (int k = 0; k < NCH; k++)
			for (int i = 0; i < CNT; i++) {
				t->data[w][k][i] = (int32_t)(random() %
					200001) - 100000;
				want[k][i] += t->data[w][k][i];
			}
	run_tree(t);
	for (unsigned int w = 0; w < NL * NW; w++)
		assert_memory_equal(t->got[w], want, sizeof(want));
	if (loss_pm > 0) {
		uint64_t re = 0;

		for (int l = 0; l < NL; l++)
			re += t->leaf[l].st.tier_reforwarded;
		assert_true(t->lost > 0);
		assert_true(re > 0);
		assert_true(t->spine.st.resent > 0);
	}
	for (int l = 0; l < NL; l++) {
		assert_int_equal(t->leaf[l].st.tier_results, NCH);
		assert_int_equal(t->leaf[l].st.completed, NCH);
		node_fini(&t->leaf[l]);
	}
	assert_int_equal(t->spine.st.completed, NCH);
	node_fini(&t->spine);
	free(t->q);
	free(t);
}

static void
tree_lossless(void **state)
{
	(void)state;
	tree_with_loss(0);
}

static void
tree_lossy(void **state)
{
	(void)state;
	tree_with_loss(50);	/* 5% on every hop, both ways */
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(forward_wide, teardown),
		cmocka_unit_test_teardown(reforward_then_result, teardown),
		cmocka_unit_test_teardown(bad_upstream, teardown),
		cmocka_unit_test_teardown(result_to_plain_job, teardown),
		cmocka_unit_test_teardown(max_round, teardown),
		cmocka_unit_test_teardown(sign_majority_of_total, teardown),
		cmocka_unit_test_teardown(leaf_refuses_other_rounds, teardown),
		cmocka_unit_test(bad_up_conf),
		cmocka_unit_test(tree_lossless),
		cmocka_unit_test(tree_lossy),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

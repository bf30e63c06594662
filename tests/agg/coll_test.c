/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Rounds with an owner (docs/protocol.md, "Collectives"): SCATTER sums
 * whose result goes to the owner alone, GATHER rounds whose owner's data
 * goes to everyone else; the DONE the others get; retransmissions of a
 * completed round answered from the stored result, data or DONE as the
 * sender's part is; and the malformed or misordered ones refused, each
 * under its own counter, without touching the sums.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>

#include "agg/agg.h"

#define TOKEN	0x5eed5eed12345678ull
#define JOB	7

struct ctx {
	struct tally_job *job;
	struct tally_jobtab *tab;
	struct tally_agg_stats st;
	struct tally_verdict v;
	uint8_t pkt[TALLY_HDR_LEN + 4 * 4096];
};

static struct ctx c;

static void
setup_job(uint8_t world, uint16_t window, uint16_t max_elems)
{
	struct tally_job_conf conf = {
		.id = JOB, .token = TOKEN, .world = world, .window = window,
		.max_elems = max_elems,
	};

	memset(&c.st, 0, sizeof(c.st));
	c.job = tally_job_create(&conf);
	assert_non_null(c.job);
	c.tab = tally_jobtab_create(&c.job, 1);
	assert_non_null(c.tab);
}

static int
teardown(void **state)
{
	(void)state;
	tally_jobtab_destroy(c.tab);
	tally_job_destroy(c.job);
	c.tab = NULL;
	c.job = NULL;
	return 0;
}

static struct tally_hdr
hdr(uint8_t type, uint8_t rank, uint8_t owner, uint16_t slot, uint64_t round,
	uint32_t offset, uint16_t count, uint8_t enc)
{
	struct tally_hdr h = {
		.version = TALLY_PROTO_VERSION, .type = type,
		.flags = round & 1 ? TALLY_F_SET : 0, .enc = enc, .job = JOB,
		.token = TOKEN, .rank = rank, .status = owner, .slot = slot,
		.offset = offset, .count = count,
		.next_block = TALLY_NO_BLOCK, .round = round,
	};

	return h;
}

/* Sends h with plen bytes of payload (borrowed). */
static enum tally_verdict_kind
send_raw(const struct tally_hdr *h, const void *payload, size_t plen)
{
	tally_hdr_encode(h, c.pkt);
	if (plen > 0)
		memcpy(c.pkt + TALLY_HDR_LEN, payload, plen);
	return tally_agg_process(c.tab, &c.st, c.pkt,
		(unsigned int)(TALLY_HDR_LEN + plen), NULL, &c.v);
}

/* Sends h with as much payload as its count says. */
static enum tally_verdict_kind
send_full(const struct tally_hdr *h, const void *payload)
{
	return send_raw(h, payload, tally_enc_payload_len(h->enc, h->count));
}

static uint64_t
total_drops(void)
{
	uint64_t n = 0;

	for (int i = 0; i < TALLY_ST_MAX_; i++)
		n += c.st.drops[i];
	return n;
}

/*
 * A SCATTER round of 4 members, owner 2: an exact sum, to the owner
 * alone (data_mask), a DONE of the same chunk without payload to the
 * others.
 */
static void
scatter_routes(void **state)
{
	int32_t vals[4][37], want[37] = { 0 };
	struct tally_hdr h;

	(void)state;
	setup_job(4, 8, 64);
	for (int r = 0; r < 4; r++)
		for (int i = 0; i < 37; i++) {
			vals[r][i] = (r + 1) * 100003 * (i - 18) + INT32_MAX / 3;
			want[i] = (int32_t)((uint32_t)want[i] +
				(uint32_t)vals[r][i]);
		}
	for (uint8_t r = 0; r < 4; r++) {
		h = hdr(TALLY_PT_SCATTER, r, 2, 3, 0, 74, 37, TALLY_ENC_I32);
		assert_int_equal(send_full(&h, vals[r]),
			r < 3 ? TALLY_V_TAKEN : TALLY_V_COMPLETE);
	}
	assert_int_equal(c.v.part, 1);
	assert_int_equal(c.v.data_mask, 1u << 2);
	assert_int_equal(c.v.hdr.type, TALLY_PT_PART_RESULT);
	assert_int_equal(c.v.hdr.status, 2);
	assert_int_equal(c.v.hdr.rank, TALLY_RANK_ALL);
	assert_int_equal(c.v.hdr.offset, 74);
	assert_int_equal(c.v.hdr.count, 37);
	assert_int_equal(c.v.hdr.enc, TALLY_ENC_I32);
	assert_int_equal(c.v.payload_len, sizeof(want));
	assert_memory_equal(c.v.payload, want, sizeof(want));
	assert_int_equal(c.v.done.type, TALLY_PT_DONE);
	assert_int_equal(c.v.done.status, 2);
	assert_int_equal(c.v.done.offset, 74);
	assert_int_equal(c.v.done.count, 37);
	assert_int_equal(c.v.done.round, 0);
	assert_int_equal(c.st.completed, 1);
	assert_int_equal(total_drops(), 0);
	/* The next round of the slot, another owner: no part left over. */
	for (uint8_t r = 0; r < 4; r++) {
		h = hdr(TALLY_PT_SCATTER, r, 0, 3, 1, 111, 37, TALLY_ENC_I32);
		(void)send_full(&h, vals[r]);
	}
	assert_int_equal(c.v.kind, TALLY_V_COMPLETE);
	assert_int_equal(c.v.data_mask, 1u);
	/* An allreduce round after it on the slot: no part at all. */
	for (uint8_t r = 0; r < 4; r++) {
		h = hdr(TALLY_PT_SUM, r, 0, 3, 2, 0, 37, TALLY_ENC_I32);
		(void)send_full(&h, vals[r]);
	}
	assert_int_equal(c.v.kind, TALLY_V_COMPLETE);
	assert_int_equal(c.v.part, 0);
	assert_int_equal(c.v.hdr.type, TALLY_PT_SUM_RESULT);
	assert_int_equal(total_drops(), 0);
}

/* Narrow contributions of a SCATTER come back widened to the owner. */
static void
scatter_widens(void **state)
{
	int8_t q[3][16];
	int32_t want[16] = { 0 };
	struct tally_hdr h;

	(void)state;
	setup_job(3, 4, 64);
	for (int r = 0; r < 3; r++)
		for (int i = 0; i < 16; i++) {
			q[r][i] = (int8_t)(127 - 17 * i + r);
			want[i] += q[r][i];
		}
	for (uint8_t r = 0; r < 3; r++) {
		h = hdr(TALLY_PT_SCATTER, r, 0, 0, 0, 0, 16, TALLY_ENC_I8);
		(void)send_full(&h, q[r]);
	}
	assert_int_equal(c.v.kind, TALLY_V_COMPLETE);
	assert_int_equal(c.v.hdr.enc, TALLY_ENC_I32);
	assert_memory_equal(c.v.payload, want, sizeof(want));
	assert_int_equal(c.v.done.enc, TALLY_ENC_I32);
}

/*
 * A GATHER round of 4 members, owner 1: the others' requests first
 * (header alone), then the owner's bytes, which go back verbatim (f32
 * NaN payloads and -0 included) to everyone but the owner.
 */
static void
gather_routes(void **state)
{
	uint32_t bits[9] = { 0x7fc00001, 0x80000000, 0xff800000, 0x00000001,
		0x3f800000, 0xffffffff, 0x7f7fffff, 0, 0x12345678 };
	uint16_t half[5] = { 0xffff, 0x8000, 0x7fc1, 1, 0 };
	struct tally_hdr h;

	(void)state;
	setup_job(4, 8, 64);
	for (uint8_t r = 0; r < 4; r++) {
		if (r == 1)
			continue;
		h = hdr(TALLY_PT_GATHER, r, 1, 6, 0, 9, 9, TALLY_ENC_F32);
		assert_int_equal(send_raw(&h, NULL, 0), TALLY_V_TAKEN);
	}
	h = hdr(TALLY_PT_GATHER, 1, 1, 6, 0, 9, 9, TALLY_ENC_F32);
	assert_int_equal(send_full(&h, bits), TALLY_V_COMPLETE);
	assert_int_equal(c.v.part, 1);
	assert_int_equal(c.v.data_mask, 0xfu & ~2u);
	assert_int_equal(c.v.hdr.type, TALLY_PT_PART_RESULT);
	assert_int_equal(c.v.hdr.enc, TALLY_ENC_F32);
	assert_int_equal(c.v.hdr.status, 1);
	assert_int_equal(c.v.payload_len, sizeof(bits));
	assert_memory_equal(c.v.payload, bits, sizeof(bits));
	assert_int_equal(c.v.done.type, TALLY_PT_DONE);
	/* Only the owner's data counts as elements. */
	assert_int_equal(c.st.elements, 9);
	/* Owner first this time, 2-byte elements. */
	h = hdr(TALLY_PT_GATHER, 3, 3, 6, 1, 0, 5, TALLY_ENC_I16);
	assert_int_equal(send_full(&h, half), TALLY_V_TAKEN);
	for (uint8_t r = 0; r < 3; r++) {
		h = hdr(TALLY_PT_GATHER, r, 3, 6, 1, 0, 5, TALLY_ENC_I16);
		(void)send_raw(&h, NULL, 0);
	}
	assert_int_equal(c.v.kind, TALLY_V_COMPLETE);
	assert_int_equal(c.v.hdr.enc, TALLY_ENC_I16);
	assert_int_equal(c.v.payload_len, sizeof(half));
	assert_memory_equal(c.v.payload, half, sizeof(half));
	assert_int_equal(c.v.data_mask, 7u);
	assert_int_equal(total_drops(), 0);
}

/* One member: a GATHER has nobody to send data to; a SCATTER its owner. */
static void
world_one(void **state)
{
	int32_t x[3] = { 1, -2, 3 };
	struct tally_hdr h;

	(void)state;
	setup_job(1, 2, 16);
	h = hdr(TALLY_PT_GATHER, 0, 0, 0, 0, 0, 3, TALLY_ENC_I32);
	assert_int_equal(send_full(&h, x), TALLY_V_COMPLETE);
	assert_int_equal(c.v.data_mask, 0);
	assert_int_equal(c.v.done.type, TALLY_PT_DONE);
	h = hdr(TALLY_PT_SCATTER, 0, 0, 1, 0, 0, 3, TALLY_ENC_I32);
	assert_int_equal(send_full(&h, x), TALLY_V_COMPLETE);
	assert_int_equal(c.v.data_mask, 1);
	assert_memory_equal(c.v.payload, x, sizeof(x));
}

/* 64 members, owner 63: every bit of the masks. */
static void
world_64(void **state)
{
	int32_t one[2] = { 1, 2 }, want[2] = { 64, 128 };
	struct tally_hdr h;

	(void)state;
	setup_job(64, 2, 16);
	for (uint8_t r = 0; r < 64; r++) {
		h = hdr(TALLY_PT_SCATTER, r, 63, 1, 0, 0, 2, TALLY_ENC_I32);
		(void)send_full(&h, one);
	}
	assert_int_equal(c.v.kind, TALLY_V_COMPLETE);
	assert_true(c.v.data_mask == UINT64_C(1) << 63);
	assert_memory_equal(c.v.payload, want, sizeof(want));
	for (uint8_t r = 0; r < 64; r++) {
		h = hdr(TALLY_PT_GATHER, r, 63, 0, 0, 0, 2, TALLY_ENC_I32);
		if (r == 63)
			(void)send_full(&h, one);
		else
			(void)send_raw(&h, NULL, 0);
	}
	assert_int_equal(c.v.kind, TALLY_V_COMPLETE);
	assert_true(c.v.data_mask == ~(UINT64_C(1) << 63));
	assert_int_equal(total_drops(), 0);
}

/*
 * A member retransmitting for a completed round gets the stored answer
 * that is its own: the data to the members it is for, a DONE to the
 * others; while the round is open, a duplicate; after the member moved
 * on, stale. Never counted twice.
 */
static void
retransmit_completed(void **state)
{
	int32_t vals[3][4] = { { 1, 2, 3, 4 }, { 10, 20, 30, 40 },
		{ 100, 200, 300, 400 } }, sum[4] = { 111, 222, 333, 444 };
	struct tally_hdr h;

	(void)state;
	setup_job(3, 4, 16);
	h = hdr(TALLY_PT_SCATTER, 0, 1, 2, 0, 0, 4, TALLY_ENC_I32);
	assert_int_equal(send_full(&h, vals[0]), TALLY_V_TAKEN);
	h.flags |= TALLY_F_RETX;
	assert_int_equal(send_full(&h, vals[0]), TALLY_V_DROP);
	assert_int_equal(c.st.duplicates, 1);
	for (uint8_t r = 1; r < 3; r++) {
		h = hdr(TALLY_PT_SCATTER, r, 1, 2, 0, 0, 4, TALLY_ENC_I32);
		(void)send_full(&h, vals[r]);
	}
	assert_int_equal(c.v.kind, TALLY_V_COMPLETE);
	/* The owner lost its result: the sum again, to it alone. */
	h = hdr(TALLY_PT_SCATTER, 1, 1, 2, 0, 0, 4, TALLY_ENC_I32);
	h.flags |= TALLY_F_RETX;
	assert_int_equal(send_full(&h, vals[1]), TALLY_V_RESEND);
	assert_int_equal(c.v.part, 0);
	assert_int_equal(c.v.hdr.type, TALLY_PT_PART_RESULT);
	assert_true(c.v.hdr.flags & TALLY_F_RETX);
	assert_memory_equal(c.v.payload, sum, sizeof(sum));
	/* Another lost its DONE: a DONE again, no payload. */
	h = hdr(TALLY_PT_SCATTER, 2, 1, 2, 0, 0, 4, TALLY_ENC_I32);
	h.flags |= TALLY_F_RETX;
	assert_int_equal(send_full(&h, vals[2]), TALLY_V_RESEND);
	assert_int_equal(c.v.hdr.type, TALLY_PT_DONE);
	assert_int_equal(c.v.hdr.status, 1);
	assert_int_equal(c.v.payload_len, 0);
	assert_null(c.v.payload);
	assert_true(c.v.hdr.flags & TALLY_F_RETX);
	assert_int_equal(c.st.resent, 2);
	assert_int_equal(c.st.accepted, 3);
	/* Rank 0 moves on to a GATHER round of owner 2; ranks 1, 2 have
	 * not: the SCATTER round still answers them, stale for rank 0. */
	h = hdr(TALLY_PT_GATHER, 0, 2, 2, 1, 4, 4, TALLY_ENC_I32);
	assert_int_equal(send_raw(&h, NULL, 0), TALLY_V_TAKEN);
	h = hdr(TALLY_PT_SCATTER, 2, 1, 2, 0, 0, 4, TALLY_ENC_I32);
	assert_int_equal(send_full(&h, vals[2]), TALLY_V_RESEND);
	assert_int_equal(c.v.hdr.type, TALLY_PT_DONE);
	h = hdr(TALLY_PT_SCATTER, 0, 1, 2, 0, 0, 4, TALLY_ENC_I32);
	assert_int_equal(send_full(&h, vals[0]), TALLY_V_DROP);
	assert_int_equal(c.v.status, TALLY_ST_STALE);
	/* The GATHER completes; its owner's retransmission gets a DONE, a
	 * requester's the data. */
	h = hdr(TALLY_PT_GATHER, 1, 2, 2, 1, 4, 4, TALLY_ENC_I32);
	(void)send_raw(&h, NULL, 0);
	h = hdr(TALLY_PT_GATHER, 2, 2, 2, 1, 4, 4, TALLY_ENC_I32);
	assert_int_equal(send_full(&h, vals[2]), TALLY_V_COMPLETE);
	h.flags |= TALLY_F_RETX;
	assert_int_equal(send_full(&h, vals[2]), TALLY_V_RESEND);
	assert_int_equal(c.v.hdr.type, TALLY_PT_DONE);
	h = hdr(TALLY_PT_GATHER, 0, 2, 2, 1, 4, 4, TALLY_ENC_I32);
	h.flags |= TALLY_F_RETX;
	assert_int_equal(send_raw(&h, NULL, 0), TALLY_V_RESEND);
	assert_int_equal(c.v.hdr.type, TALLY_PT_PART_RESULT);
	assert_int_equal(c.v.payload_len, 16);
	assert_memory_equal(c.v.payload, vals[2], 16);
	assert_int_equal(c.st.drops[TALLY_ST_STALE], 1);
	assert_int_equal(total_drops(), 1);
}

/* Expects h (payload plen bytes) NACKed with s, counted there. */
static void
refused(const struct tally_hdr *h, const void *p, size_t plen,
	enum tally_status s)
{
	uint64_t before = c.st.drops[s];

	assert_int_equal(send_raw(h, p, plen), TALLY_V_NACK);
	assert_int_equal(c.v.status, s);
	assert_int_equal(c.v.hdr.type, TALLY_PT_NACK);
	assert_int_equal(c.v.hdr.status, s);
	assert_int_equal(c.v.hdr.rank, h->rank);
	assert_int_equal(c.st.drops[s], before + 1);
}

/*
 * Malformed and misordered collective packets: an owner outside the
 * job, data from a GATHER's non-owner or none from its owner, another
 * op or owner than the slot's round: NACKed under their own counters;
 * a SPARSE one, or a result type sent to the aggregator: dropped. The
 * rounds they met complete with the right sums.
 */
static void
bad_packets(void **state)
{
	int32_t x[4] = { 5, 6, 7, 8 }, want[4] = { 10, 12, 14, 16 };
	struct tally_hdr h, d;

	(void)state;
	setup_job(2, 4, 16);
	h = hdr(TALLY_PT_SCATTER, 0, 2, 0, 0, 0, 4, TALLY_ENC_I32);
	refused(&h, x, 16, TALLY_ST_BAD_OWNER);
	h = hdr(TALLY_PT_GATHER, 1, 200, 0, 0, 0, 4, TALLY_ENC_I32);
	refused(&h, NULL, 0, TALLY_ST_BAD_OWNER);
	h = hdr(TALLY_PT_GATHER, 1, 0, 0, 0, 0, 4, TALLY_ENC_I32);
	refused(&h, x, 16, TALLY_ST_NOT_OWNER);
	h = hdr(TALLY_PT_GATHER, 0, 0, 0, 0, 0, 4, TALLY_ENC_I32);
	refused(&h, NULL, 0, TALLY_ST_NOT_OWNER);
	/* A SCATTER round of owner 1 on slot 0 ... */
	h = hdr(TALLY_PT_SCATTER, 0, 1, 0, 0, 0, 4, TALLY_ENC_I32);
	assert_int_equal(send_full(&h, x), TALLY_V_TAKEN);
	/* ... met by another owner, a SUM, a GATHER, a MAX: wrong_op. */
	h = hdr(TALLY_PT_SCATTER, 1, 0, 0, 0, 0, 4, TALLY_ENC_I32);
	refused(&h, x, 16, TALLY_ST_WRONG_OP);
	h = hdr(TALLY_PT_SUM, 1, 0, 0, 0, 0, 4, TALLY_ENC_I32);
	refused(&h, x, 16, TALLY_ST_WRONG_OP);
	h = hdr(TALLY_PT_GATHER, 1, 1, 0, 0, 0, 4, TALLY_ENC_I32);
	refused(&h, x, 16, TALLY_ST_WRONG_OP);
	h = hdr(TALLY_PT_MAX, 1, 0, 0, 0, 0, 4, TALLY_ENC_I32);
	refused(&h, x, 16, TALLY_ST_WRONG_OP);
	/* The same op and owner with another chunk: a mismatch. */
	h = hdr(TALLY_PT_SCATTER, 1, 1, 0, 0, 4, 4, TALLY_ENC_I32);
	refused(&h, x, 16, TALLY_ST_MISMATCH);
	/* The sender itself, again with another owner: wrong_op. */
	h = hdr(TALLY_PT_SCATTER, 0, 0, 0, 0, 0, 4, TALLY_ENC_I32);
	refused(&h, x, 16, TALLY_ST_WRONG_OP);
	/* A SUM round on slot 1 met by a SCATTER: wrong_op too. */
	h = hdr(TALLY_PT_SUM, 0, 0, 1, 0, 0, 4, TALLY_ENC_I32);
	assert_int_equal(send_full(&h, x), TALLY_V_TAKEN);
	h = hdr(TALLY_PT_SCATTER, 1, 0, 1, 0, 0, 4, TALLY_ENC_I32);
	refused(&h, x, 16, TALLY_ST_WRONG_OP);
	/* Dropped, not answered: SPARSE ones, results sent up. */
	h = hdr(TALLY_PT_SCATTER, 1, 1, 0, 0, 0, 4, TALLY_ENC_I32);
	h.flags |= TALLY_F_SPARSE;
	assert_int_equal(send_full(&h, x), TALLY_V_DROP);
	assert_int_equal(c.v.status, TALLY_ST_BAD_TYPE);
	h = hdr(TALLY_PT_DONE, 1, 1, 0, 0, 0, 4, TALLY_ENC_I32);
	assert_int_equal(send_raw(&h, NULL, 0), TALLY_V_DROP);
	assert_int_equal(c.v.status, TALLY_ST_BAD_TYPE);
	h = hdr(TALLY_PT_PART_RESULT, 1, 1, 0, 0, 0, 4, TALLY_ENC_I32);
	assert_int_equal(send_full(&h, x), TALLY_V_DROP);
	assert_int_equal(c.v.status, TALLY_ST_BAD_TYPE);
	/* A DONE with a payload is malformed at any receiver. */
	h = hdr(TALLY_PT_DONE, 1, 1, 0, 0, 0, 4, TALLY_ENC_I32);
	tally_hdr_encode(&h, c.pkt);
	assert_int_equal(tally_hdr_decode(c.pkt, TALLY_HDR_LEN + 16, &d),
		TALLY_ST_BAD_LENGTH);
	/* Nothing refused touched the rounds. */
	h = hdr(TALLY_PT_SCATTER, 1, 1, 0, 0, 0, 4, TALLY_ENC_I32);
	assert_int_equal(send_full(&h, x), TALLY_V_COMPLETE);
	assert_memory_equal(c.v.payload, want, sizeof(want));
	assert_int_equal(c.v.data_mask, 2);
	h = hdr(TALLY_PT_SUM, 1, 0, 1, 0, 0, 4, TALLY_ENC_I32);
	assert_int_equal(send_full(&h, x), TALLY_V_COMPLETE);
	assert_memory_equal(c.v.payload, want, sizeof(want));
	assert_int_equal(c.st.accepted, 4);
	assert_int_equal(c.st.drops[TALLY_ST_BAD_OWNER], 2);
	assert_int_equal(c.st.drops[TALLY_ST_NOT_OWNER], 2);
	assert_int_equal(c.st.drops[TALLY_ST_WRONG_OP], 6);
	assert_int_equal(c.st.drops[TALLY_ST_MISMATCH], 1);
}

/*
 * In an authenticated job the DONE has a tag of its own, under the
 * result key, over its header without payload.
 */
static void
auth_done(void **state)
{
	struct tally_job_conf conf = {
		.id = JOB, .token = TOKEN, .world = 2, .window = 2,
		.max_elems = 16, .auth = 1,
	};
	struct tally_mac_key k;
	int32_t x[2] = { 1, 2 };
	uint8_t wire[TALLY_HDR_LEN + TALLY_TAG_LEN];
	uint8_t tag[TALLY_TAG_LEN];
	struct tally_hdr h;

	(void)state;
	memset(conf.key_result, 0x5a, sizeof(conf.key_result));
	for (int r = 0; r < 2; r++)
		memset(conf.keys[r].up, 0x10 + r, TALLY_KEY_LEN);
	if (tally_mac_key_init(&k, conf.key_result) != 0)
		skip();
	memset(&c.st, 0, sizeof(c.st));
	c.job = tally_job_create(&conf);
	assert_non_null(c.job);
	c.tab = tally_jobtab_create(&c.job, 1);
	assert_non_null(c.tab);
	for (uint8_t r = 0; r < 2; r++) {
		struct tally_mac_key up;
		uint8_t key[TALLY_KEY_LEN];
		size_t plen = 8;

		memset(key, 0x10 + r, sizeof(key));
		assert_int_equal(tally_mac_key_init(&up, key), 0);
		h = hdr(TALLY_PT_SCATTER, r, 0, 0, 0, 0, 2, TALLY_ENC_I32);
		h.flags |= TALLY_F_AUTH;
		tally_hdr_encode(&h, c.pkt);
		memcpy(c.pkt + TALLY_HDR_LEN, x, plen);
		tally_mac_tag(&up, TALLY_MAC_UP, c.pkt, x, plen,
			c.pkt + TALLY_HDR_LEN + plen);
		(void)tally_agg_process(c.tab, &c.st, c.pkt, (unsigned int)
			(TALLY_HDR_LEN + plen + TALLY_TAG_LEN), NULL, &c.v);
		tally_mac_key_wipe(&up);
	}
	assert_int_equal(c.v.kind, TALLY_V_COMPLETE);
	assert_true(c.v.done.flags & TALLY_F_AUTH);
	tally_hdr_encode(&c.v.done, wire);
	memcpy(wire + TALLY_HDR_LEN, c.v.done_tag, TALLY_TAG_LEN);
	assert_true(tally_mac_verify(&k, TALLY_MAC_RESULT, wire,
		sizeof(wire)));
	tally_mac_tag(&k, TALLY_MAC_RESULT, wire, NULL, 0, tag);
	assert_memory_equal(tag, c.v.done_tag, TALLY_TAG_LEN);
	tally_mac_key_wipe(&k);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(scatter_routes, teardown),
		cmocka_unit_test_teardown(scatter_widens, teardown),
		cmocka_unit_test_teardown(gather_routes, teardown),
		cmocka_unit_test_teardown(world_one, teardown),
		cmocka_unit_test_teardown(world_64, teardown),
		cmocka_unit_test_teardown(retransmit_completed, teardown),
		cmocka_unit_test_teardown(bad_packets, teardown),
		cmocka_unit_test_teardown(auth_done, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The aggregation engine, case by case: completion for 1 to 64 workers,
 * duplicates and retransmissions, shadow-set rotation, every rejection
 * reason with its counter, every encoding, and job isolation.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <math.h>
#include <string.h>

#include "agg/agg.h"

#define TOKEN	0x5eed5eed12345678ull
#define JOB	42

struct ctx {
	struct tally_job *job;
	struct tally_jobtab *tab;
	struct tally_agg_stats st;
	struct tally_verdict v;
	uint8_t pkt[TALLY_HDR_LEN + 4 * 4096];
};

static struct ctx c;

static void
setup_job(uint8_t world, uint16_t window, uint16_t max_elems, int narrow)
{
	struct tally_job_conf conf = {
		.id = JOB, .token = TOKEN, .world = world, .window = window,
		.max_elems = max_elems, .narrow = (uint8_t)narrow,
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

/* A contribution to round (its low bit: the shadow set) of slot. */
static struct tally_hdr
hdr(uint8_t rank, uint16_t slot, uint64_t round, uint32_t offset,
	uint16_t count, uint8_t enc)
{
	struct tally_hdr h = {
		.version = TALLY_PROTO_VERSION, .type = TALLY_PT_SUM,
		.flags = round & 1 ? TALLY_F_SET : 0, .enc = enc, .job = JOB,
		.token = TOKEN, .rank = rank, .slot = slot, .offset = offset,
		.count = count, .next_block = TALLY_NO_BLOCK, .round = round,
	};

	return h;
}

/* Sends h with its payload (as many bytes as h says). */
static enum tally_verdict_kind
send(const struct tally_hdr *h, const void *payload)
{
	size_t plen = tally_enc_payload_len(h->enc, h->count);

	tally_hdr_encode(h, c.pkt);
	memcpy(c.pkt + TALLY_HDR_LEN, payload, plen);
	return tally_agg_process(c.tab, &c.st, c.pkt,
		(unsigned int)(TALLY_HDR_LEN + plen), NULL, &c.v);
}

static enum tally_verdict_kind
send_i32(uint8_t rank, uint16_t slot, uint64_t round, uint32_t offset,
	const int32_t *vals, uint16_t n)
{
	struct tally_hdr h = hdr(rank, slot, round, offset, n, TALLY_ENC_I32);

	return send(&h, vals);
}

static uint64_t
total_drops(void)
{
	uint64_t n = 0;

	for (int i = 0; i < TALLY_ST_MAX_; i++)
		n += c.st.drops[i];
	return n;
}

/* n workers each send their rank+1 times (i+1); the sum is checked. */
static void
complete_with(uint8_t world)
{
	int32_t vals[64], want[64];

	setup_job(world, 8, 64, 0);
	memset(want, 0, sizeof(want));
	for (uint8_t r = 0; r < world; r++) {
		for (int i = 0; i < 64; i++) {
			vals[i] = (r + 1) * (i + 1) * (i % 2 ? -1 : 1);
			want[i] += vals[i];
		}
		assert_int_equal(send_i32(r, 5, 0, 320, vals, 64),
			r + 1 < world ? TALLY_V_TAKEN : TALLY_V_COMPLETE);
	}
	assert_int_equal(c.v.payload_len, 64 * 4);
	assert_memory_equal(c.v.payload, want, sizeof(want));
	assert_int_equal(c.v.hdr.type, TALLY_PT_SUM_RESULT);
	assert_int_equal(c.v.hdr.enc, TALLY_ENC_I32);
	assert_int_equal(c.v.hdr.rank, TALLY_RANK_ALL);
	assert_int_equal(c.v.hdr.slot, 5);
	assert_int_equal(c.v.hdr.offset, 320);
	assert_int_equal(c.v.hdr.count, 64);
	assert_int_equal(c.v.hdr.token, TOKEN);
	assert_int_equal(c.v.hdr.job, JOB);
	assert_int_equal(c.v.hdr.flags & TALLY_F_RETX, 0);
	assert_ptr_equal(c.v.job, c.job);
	assert_int_equal(c.st.accepted, world);
	assert_int_equal(c.st.completed, 1);
	assert_int_equal(c.st.elements, 64u * world);
	assert_int_equal(total_drops(), 0);
}

static void
complete_1(void **state)
{
	(void)state;
	complete_with(1);
}

static void
complete_2(void **state)
{
	(void)state;
	complete_with(2);
}

static void
complete_4(void **state)
{
	(void)state;
	complete_with(4);
}

static void
complete_64(void **state)
{
	(void)state;
	complete_with(64);
}

static void
duplicate_is_not_counted_twice(void **state)
{
	int32_t a[4] = { 1, 2, 3, 4 }, b[4] = { 10, 20, 30, 40 };
	int32_t want[4] = { 11, 22, 33, 44 };
	struct tally_hdr h = hdr(0, 0, 0, 0, 4, TALLY_ENC_I32);

	(void)state;
	setup_job(2, 4, 16, 0);
	assert_int_equal(send(&h, a), TALLY_V_TAKEN);
	h.flags |= TALLY_F_RETX;
	assert_int_equal(send(&h, a), TALLY_V_DROP);
	assert_int_equal(c.v.status, TALLY_ST_OK);
	assert_int_equal(send(&h, a), TALLY_V_DROP);
	assert_int_equal(c.st.duplicates, 2);
	assert_int_equal(send_i32(1, 0, 0, 0, b, 4), TALLY_V_COMPLETE);
	assert_memory_equal(c.v.payload, want, sizeof(want));
	assert_int_equal(c.st.accepted, 2);
	assert_int_equal(total_drops(), 0);
}

static void
retransmission_gets_stored_result(void **state)
{
	int32_t a[4] = { 1, 2, 3, 4 }, b[4] = { 10, 20, 30, 40 };
	int32_t want[4] = { 11, 22, 33, 44 };
	struct tally_hdr h = hdr(0, 3, 1, 12, 4, TALLY_ENC_I32);

	(void)state;
	setup_job(2, 4, 16, 0);
	assert_int_equal(send(&h, a), TALLY_V_TAKEN);
	h.rank = 1;
	assert_int_equal(send(&h, b), TALLY_V_COMPLETE);
	for (int k = 0; k < 3; k++) {
		h.rank = (uint8_t)(k & 1);
		h.flags |= TALLY_F_RETX;
		/* Even with other values: the stored sum comes back. */
		assert_int_equal(send(&h, b), TALLY_V_RESEND);
		assert_memory_equal(c.v.payload, want, sizeof(want));
		assert_int_equal(c.v.payload_len, sizeof(want));
		assert_int_equal(c.v.hdr.rank, TALLY_RANK_ALL);
		assert_int_equal(c.v.hdr.round, 1);
		assert_true(c.v.hdr.flags & TALLY_F_RETX);
		assert_true(c.v.hdr.flags & TALLY_F_SET);
		assert_int_equal(c.v.hdr.offset, 12);
	}
	assert_int_equal(c.st.resent, 3);
	assert_int_equal(c.st.accepted, 2);
	assert_int_equal(c.st.completed, 1);
}

/*
 * Rounds alternate between the two sets of a slot. A set's result stays
 * for retransmissions until every member has moved on, and its next
 * round starts from zero, not from the old sum.
 */
static void
shadow_set_rotation(void **state)
{
	int32_t one[2] = { 1, 1 }, two[2] = { 2, 2 }, x[2] = { 5, 7 };

	(void)state;
	setup_job(2, 1, 2, 0);
	for (uint32_t round = 0; round < 10; round++) {
		unsigned int set = round & 1;
		int32_t want[2] = { 1 + 2, 1 + 2 };

		assert_int_equal(send_i32(0, 0, round, round * 2, one, 2),
			TALLY_V_TAKEN);
		/* Rank 0 moved on: the old round on the other set still
		 * answers rank 1, which has not. */
		if (round > 0) {
			assert_int_equal(send_i32(1, 0, round - 1,
				(round - 1) * 2, x, 2), TALLY_V_RESEND);
			assert_int_equal(c.v.hdr.offset, (round - 1) * 2);
			assert_int_equal(c.v.hdr.round, round - 1);
		}
		assert_int_equal(send_i32(1, 0, round, round * 2, two, 2),
			TALLY_V_COMPLETE);
		assert_memory_equal(c.v.payload, want, sizeof(want));
		assert_int_equal(!!(c.v.hdr.flags & TALLY_F_SET), set);
		assert_int_equal(c.v.hdr.round, round);
	}
	/* Both moved on from set 0 (round 8): it is empty again. */
	assert_int_equal(tally_job_set(c.job, 0, 0)->bitmap, 0);
	assert_int_equal(tally_job_set(c.job, 0, 1)->bitmap, 3);
	assert_int_equal(c.st.completed, 10);
	assert_int_equal(total_drops(), 0);
}

static void
early_and_mismatch(void **state)
{
	int32_t v[2] = { 1, 2 };
	struct tally_set *s1;

	(void)state;
	setup_job(2, 2, 8, 0);
	assert_int_equal(send_i32(0, 1, 0, 0, v, 2), TALLY_V_TAKEN);
	/* Same slot and set, another chunk: refused, nothing counted. */
	assert_int_equal(send_i32(1, 1, 0, 8, v, 2), TALLY_V_NACK);
	assert_int_equal(c.v.status, TALLY_ST_MISMATCH);
	assert_int_equal(c.v.hdr.type, TALLY_PT_NACK);
	assert_int_equal(c.v.hdr.status, TALLY_ST_MISMATCH);
	assert_int_equal(c.v.hdr.offset, 8);
	assert_int_equal(c.v.hdr.slot, 1);
	assert_int_equal(c.v.rank, 1);
	/* Another count, encoding or scale is a mismatch too. */
	assert_int_equal(send_i32(1, 1, 0, 0, v, 1), TALLY_V_NACK);
	{
		struct tally_hdr h = hdr(1, 1, 0, 0, 2, TALLY_ENC_I32);

		h.scale_exp = 4;
		assert_int_equal(send(&h, v), TALLY_V_NACK);
		h = hdr(1, 1, 0, 0, 2, TALLY_ENC_F32);
		assert_int_equal(send(&h, v), TALLY_V_NACK);
		h = hdr(1, 1, 0, 0, 2, TALLY_ENC_I32);
		h.type = TALLY_PT_MAX;
		assert_int_equal(send(&h, v), TALLY_V_NACK);
	}
	assert_int_equal(c.st.drops[TALLY_ST_MISMATCH], 5);
	/* Rank 0 jumps to set 1 before set 0 completed. */
	assert_int_equal(send_i32(0, 1, 1, 16, v, 2), TALLY_V_NACK);
	assert_int_equal(c.v.status, TALLY_ST_EARLY);
	assert_int_equal(c.st.drops[TALLY_ST_EARLY], 1);
	/* Nothing refused was counted: the round still completes right. */
	assert_int_equal(send_i32(1, 1, 0, 0, v, 2), TALLY_V_COMPLETE);
	assert_int_equal(((const int32_t *)c.v.payload)[1], 4);
	/* A retransmission naming another chunk than the stored one. */
	assert_int_equal(send_i32(1, 1, 0, 24, v, 2), TALLY_V_NACK);
	assert_int_equal(c.v.status, TALLY_ST_MISMATCH);
	/* A completed set that members still hold refuses a new round. */
	s1 = tally_job_set(c.job, 1, 1);
	s1->bitmap = 1;		/* only rank 0 left to move on */
	assert_int_equal(send_i32(1, 1, 1, 32, v, 2), TALLY_V_NACK);
	assert_int_equal(c.v.status, TALLY_ST_EARLY);
	assert_int_equal(c.st.nacks, 8);
}

/*
 * Issue 11, item 13: two ranks, i32 tensors that change every call, one
 * slot. After call 2, rank 0's packet of call 1 comes again (a replay
 * from its own address, or a copy held up in the network). Version 1
 * took it for a contribution to call 3 and then threw rank 0's real
 * call-3 packet away as a duplicate: both ranks got a wrong sum. Now it
 * is stale: dropped, counted, and call 3 sums what it should.
 */
static void
replayed_old_round_is_stale(void **state)
{
	uint8_t old[TALLY_HDR_LEN + 8];
	int32_t a[2], b[2];

	(void)state;
	setup_job(2, 1, 2, 0);
	for (uint64_t call = 0; call < 3; call++) {
		a[0] = (int32_t)(10 * call + 1);
		a[1] = (int32_t)(10 * call + 2);
		b[0] = (int32_t)(100 * call + 3);
		b[1] = (int32_t)(100 * call + 4);
		if (call == 2) {
			/* Rank 0's call-1 packet, again. */
			memcpy(c.pkt, old, sizeof(old));
			assert_int_equal(tally_agg_process(c.tab, &c.st, c.pkt,
				sizeof(old), NULL, &c.v), TALLY_V_DROP);
			assert_int_equal(c.v.status, TALLY_ST_STALE);
			assert_int_equal(c.st.drops[TALLY_ST_STALE], 2);
		}
		assert_int_equal(send_i32(0, 0, call, 0, a, 2), TALLY_V_TAKEN);
		if (call == 0)
			memcpy(old, c.pkt, sizeof(old));
		if (call == 1) {
			/* Between the two members of round 1, too. */
			memcpy(c.pkt, old, sizeof(old));
			assert_int_equal(tally_agg_process(c.tab, &c.st, c.pkt,
				sizeof(old), NULL, &c.v), TALLY_V_DROP);
			assert_int_equal(c.v.status, TALLY_ST_STALE);
		}
		assert_int_equal(send_i32(1, 0, call, 0, b, 2),
			TALLY_V_COMPLETE);
		assert_int_equal(((const int32_t *)c.v.payload)[0],
			a[0] + b[0]);
		assert_int_equal(((const int32_t *)c.v.payload)[1],
			a[1] + b[1]);
		assert_int_equal(c.v.hdr.round, call);
	}
	assert_int_equal(c.st.drops[TALLY_ST_STALE], 2);
	assert_int_equal(c.st.accepted, 6);
	assert_int_equal(c.st.duplicates, 0);
	assert_int_equal(c.st.nacks, 0);
}

/*
 * A slot's rounds: older than the one before the latest is stale even
 * for a member still counted there; more than one ahead is early; the
 * round before the latest answers members that have not moved on.
 */
static void
rounds_behind_and_ahead(void **state)
{
	int32_t v[2] = { 1, 2 };

	(void)state;
	setup_job(2, 1, 2, 0);
	for (uint64_t r = 0; r < 4; r++) {
		assert_int_equal(send_i32(0, 0, r, 0, v, 2), TALLY_V_TAKEN);
		assert_int_equal(send_i32(1, 0, r, 0, v, 2), TALLY_V_COMPLETE);
	}
	/* Round 3 complete, nobody moved on: 3 answers, 2 is stale. */
	assert_int_equal(send_i32(1, 0, 3, 0, v, 2), TALLY_V_RESEND);
	assert_int_equal(c.v.hdr.round, 3);
	assert_int_equal(send_i32(1, 0, 2, 0, v, 2), TALLY_V_DROP);
	assert_int_equal(c.v.status, TALLY_ST_STALE);
	assert_int_equal(send_i32(0, 0, 0, 0, v, 2), TALLY_V_DROP);
	assert_int_equal(c.v.status, TALLY_ST_STALE);
	/* Round 5 skips 4: refused, not counted. */
	assert_int_equal(send_i32(0, 0, 5, 0, v, 2), TALLY_V_NACK);
	assert_int_equal(c.v.status, TALLY_ST_EARLY);
	assert_int_equal(c.v.hdr.round, 5);
	/* Rank 0 moves to 4; rank 1 may still fetch 3, rank 0 not. */
	assert_int_equal(send_i32(0, 0, 4, 0, v, 2), TALLY_V_TAKEN);
	assert_int_equal(send_i32(1, 0, 3, 0, v, 2), TALLY_V_RESEND);
	assert_int_equal(send_i32(0, 0, 3, 0, v, 2), TALLY_V_DROP);
	assert_int_equal(c.v.status, TALLY_ST_STALE);
	/* Round 5 before 4 completed: early. */
	assert_int_equal(send_i32(0, 0, 5, 0, v, 2), TALLY_V_NACK);
	assert_int_equal(c.v.status, TALLY_ST_EARLY);
	assert_int_equal(send_i32(1, 0, 4, 0, v, 2), TALLY_V_COMPLETE);
	assert_int_equal(((const int32_t *)c.v.payload)[1], 4);
	assert_int_equal(c.st.drops[TALLY_ST_STALE], 3);
	assert_int_equal(c.st.drops[TALLY_ST_EARLY], 2);
}

/*
 * A fresh slot (a job programmed again after a tally-dp restart, its
 * members between calls) takes its round from the first contribution.
 */
static void
fresh_slot_takes_first_round(void **state)
{
	int32_t v[2] = { 3, 4 };

	(void)state;
	setup_job(2, 2, 2, 0);
	assert_int_equal(send_i32(1, 1, 1000001, 0, v, 2), TALLY_V_TAKEN);
	assert_int_equal(send_i32(0, 1, 1000000, 0, v, 2), TALLY_V_DROP);
	assert_int_equal(c.v.status, TALLY_ST_STALE);
	assert_int_equal(send_i32(0, 1, 1000001, 0, v, 2), TALLY_V_COMPLETE);
	assert_int_equal(c.v.hdr.round, 1000001);
	assert_int_equal(send_i32(0, 1, 1000002, 0, v, 2), TALLY_V_TAKEN);
	/* The other slot is still fresh: any round starts it. */
	assert_int_equal(send_i32(0, 0, 0, 0, v, 2), TALLY_V_TAKEN);
	assert_int_equal(c.st.drops[TALLY_ST_STALE], 1);
}

/* Checks that the packet is refused for reason s, by drop or NACK. */
static void
refused(const struct tally_hdr *h, const void *payload, size_t len,
	enum tally_status s, enum tally_verdict_kind kind)
{
	uint64_t before = c.st.drops[s], drops = total_drops();

	tally_hdr_encode(h, c.pkt);
	if (len > TALLY_HDR_LEN)
		memcpy(c.pkt + TALLY_HDR_LEN, payload, len - TALLY_HDR_LEN);
	assert_int_equal(tally_agg_process(c.tab, &c.st, c.pkt,
		(unsigned int)len, NULL, &c.v), kind);
	if (c.v.status != s)
		fail_msg("want %s, got %s", tally_status_name(s),
			tally_status_name(c.v.status));
	assert_int_equal(c.st.drops[s], before + 1);
	assert_int_equal(total_drops(), drops + 1);
	if (kind == TALLY_V_NACK)
		assert_int_equal(c.v.hdr.status, s);
}

static void
each_rejection_reason(void **state)
{
	int32_t v[9] = { 0 };	/* one spare for the too-long case */
	struct tally_hdr h;
	size_t ok = TALLY_HDR_LEN + 8 * 4;
	uint64_t nacks;

	(void)state;
	setup_job(2, 4, 8, 0);
	h = hdr(0, 0, 0, 0, 8, TALLY_ENC_I32);
	refused(&h, v, TALLY_HDR_LEN - 1, TALLY_ST_TRUNCATED, TALLY_V_DROP);
	tally_hdr_encode(&h, c.pkt);
	c.pkt[0] = 0;
	assert_int_equal(tally_agg_process(c.tab, &c.st, c.pkt,
		(unsigned int)ok, NULL, &c.v), TALLY_V_DROP);
	assert_int_equal(c.st.drops[TALLY_ST_BAD_MAGIC], 1);
	h.version = 1;		/* version 1 had no round */
	refused(&h, v, ok, TALLY_ST_BAD_VERSION, TALLY_V_DROP);
	h = hdr(0, 0, 0, 0, 8, TALLY_ENC_I32);
	h.type = TALLY_PT_SUM_RESULT;	/* results do not go upstream */
	refused(&h, v, ok, TALLY_ST_BAD_TYPE, TALLY_V_DROP);
	h.type = TALLY_PT_NACK;
	refused(&h, v, TALLY_HDR_LEN, TALLY_ST_BAD_TYPE, TALLY_V_DROP);
	h.type = 9;
	refused(&h, v, ok, TALLY_ST_BAD_TYPE, TALLY_V_DROP);
	h = hdr(0, 0, 0, 0, 8, TALLY_ENC_I32);
	h.job = JOB + 1;
	refused(&h, v, ok, TALLY_ST_UNKNOWN_JOB, TALLY_V_DROP);
	assert_null(c.v.job);
	h = hdr(0, 0, 0, 0, 8, TALLY_ENC_I32);
	h.token ^= 1;
	refused(&h, v, ok, TALLY_ST_BAD_TOKEN, TALLY_V_DROP);
	/* Unauthenticated and malformed: counted as the first failure,
	 * and never answered. */
	refused(&h, v, ok - 4, TALLY_ST_BAD_TOKEN, TALLY_V_DROP);
	h = hdr(2, 0, 0, 0, 8, TALLY_ENC_I32);
	refused(&h, v, ok, TALLY_ST_BAD_RANK, TALLY_V_DROP);
	h.rank = 255;
	refused(&h, v, ok, TALLY_ST_BAD_RANK, TALLY_V_DROP);
	nacks = c.st.nacks;
	assert_int_equal(nacks, 0);
	/* From here the sender is a member: it is told why. */
	h = hdr(1, 0, 0, 0, 8, TALLY_ENC_I32);
	h.enc = 0;
	refused(&h, v, ok, TALLY_ST_BAD_ENCODING, TALLY_V_NACK);
	h.enc = TALLY_ENC_I16;
	h.type = TALLY_PT_MAX;
	refused(&h, v, TALLY_HDR_LEN + 16, TALLY_ST_BAD_ENCODING, TALLY_V_NACK);
	h = hdr(1, 0, 0, 0, 8, TALLY_ENC_I32);
	refused(&h, v, ok - 1, TALLY_ST_BAD_LENGTH, TALLY_V_NACK);
	refused(&h, v, ok + 4, TALLY_ST_BAD_LENGTH, TALLY_V_NACK);
	h.count = 0;
	refused(&h, v, TALLY_HDR_LEN, TALLY_ST_BAD_LENGTH, TALLY_V_NACK);
	h = hdr(1, 0, 0, 0, 2, TALLY_ENC_I32);	/* the job allows 8 */
	{
		int32_t big[16] = { 0 };

		h.count = 16;
		refused(&h, big, TALLY_HDR_LEN + 64, TALLY_ST_BAD_LENGTH,
			TALLY_V_NACK);
	}
	h = hdr(1, 4, 0, 0, 8, TALLY_ENC_I32);
	refused(&h, v, ok, TALLY_ST_BAD_SLOT, TALLY_V_NACK);
	h.slot = 0xffff;
	refused(&h, v, ok, TALLY_ST_BAD_SLOT, TALLY_V_NACK);
	assert_int_equal(c.st.nacks, 8);
	/* Nothing was counted into any slot. */
	assert_int_equal(c.st.accepted, 0);
	for (unsigned int s = 0; s < 4; s++)
		assert_int_equal(tally_job_set(c.job, s, 0)->bitmap, 0);
}

static void
source_must_match_member(void **state)
{
	struct tally_job_conf conf = {
		.id = JOB, .token = TOKEN, .world = 2, .window = 1,
		.max_elems = 4,
		.members = { { .ip = 0x0a000001, .port = 5000 },
			{ .ip = 0x0a000002, .port = 0 } },
	};
	struct tally_addr good0 = { 0x0a000001, 5000 };
	struct tally_addr badport = { 0x0a000001, 5001 };
	struct tally_addr good1 = { 0x0a000002, 6123 };
	struct tally_hdr h = hdr(0, 0, 0, 0, 1, TALLY_ENC_I32);
	int32_t one = 1;

	(void)state;
	memset(&c.st, 0, sizeof(c.st));
	c.job = tally_job_create(&conf);
	c.tab = tally_jobtab_create(&c.job, 1);
	tally_hdr_encode(&h, c.pkt);
	memcpy(c.pkt + TALLY_HDR_LEN, &one, 4);
	assert_int_equal(tally_agg_process(c.tab, &c.st, c.pkt,
		TALLY_HDR_LEN + 4, &badport,
		&c.v), TALLY_V_DROP);
	assert_int_equal(c.v.status, TALLY_ST_BAD_SOURCE);
	/* Rank 0's address, claiming to be rank 1. */
	c.pkt[16] = 1;
	assert_int_equal(tally_agg_process(c.tab, &c.st, c.pkt,
		TALLY_HDR_LEN + 4, &good0,
		&c.v), TALLY_V_DROP);
	assert_int_equal(c.st.drops[TALLY_ST_BAD_SOURCE], 2);
	/* No source at all only matches wildcard members. */
	assert_int_equal(tally_agg_process(c.tab, &c.st, c.pkt,
		TALLY_HDR_LEN + 4, NULL,
		&c.v), TALLY_V_DROP);
	assert_int_equal(tally_agg_process(c.tab, &c.st, c.pkt,
		TALLY_HDR_LEN + 4, &good1,
		&c.v), TALLY_V_TAKEN);
	c.pkt[16] = 0;
	assert_int_equal(tally_agg_process(c.tab, &c.st, c.pkt,
		TALLY_HDR_LEN + 4, &good0,
		&c.v), TALLY_V_COMPLETE);
	assert_int_equal(c.st.drops[TALLY_ST_BAD_SOURCE], 3);
}

static void
sums_wrap_like_twos_complement(void **state)
{
	int32_t a[2] = { INT32_MAX, INT32_MIN }, b[2] = { 1, -1 };
	int32_t want[2] = { INT32_MIN, INT32_MAX };

	(void)state;
	setup_job(2, 1, 2, 0);
	send_i32(0, 0, 0, 0, a, 2);
	assert_int_equal(send_i32(1, 0, 0, 0, b, 2), TALLY_V_COMPLETE);
	assert_memory_equal(c.v.payload, want, sizeof(want));
}

/* Two workers, one encoding; returns the completed result's bytes. */
static void
pair(uint8_t enc, uint8_t type, uint16_t n, const void *a, const void *b,
	uint8_t want_enc, const void *want, size_t want_len)
{
	struct tally_hdr h = hdr(0, 0, 0, 0, n, enc);

	h.type = type;
	assert_int_equal(send(&h, a), TALLY_V_TAKEN);
	h.rank = 1;
	assert_int_equal(send(&h, b), TALLY_V_COMPLETE);
	assert_int_equal(c.v.hdr.enc, want_enc);
	assert_int_equal(c.v.hdr.type, type == TALLY_PT_MAX ?
		TALLY_PT_MAX_RESULT : TALLY_PT_SUM_RESULT);
	assert_int_equal(c.v.payload_len, want_len);
	assert_memory_equal(c.v.payload, want, want_len);
	/* Start the slot afresh for the next call. */
	tally_job_reset(c.job);
}

static void
encodings_wide(void **state)
{
	float fa[3] = { 1.5f, -2.0f, 0.25f }, fb[3] = { 0.5f, 2.0f, 0.25f };
	float fs[3] = { 2.0f, 0.0f, 0.5f };
	int16_t sa[3] = { 32767, -32768, 5 }, sb[3] = { 1, -1, -6 };
	int32_t ss[3] = { 32768, -32769, -1 };
	int8_t ba[3] = { 127, -128, 3 }, bb[3] = { 127, -128, -4 };
	int32_t bs[3] = { 254, -256, -1 };
	/* i4: a = {7, -8, 1}, b = {7, -8, -2} -> {14, -16, -1} */
	uint8_t na[2] = { 0x87, 0x01 }, nb[2] = { 0x87, 0x0e };
	int32_t ns[3] = { 14, -16, -1 };
	/* sign: 9 votes; a = 1 0 1 1 0 0 0 0 | 1, b = 1 1 0 1 ... | 0 */
	uint8_t ga[2] = { 0x0d, 0x01 }, gb[2] = { 0x0b, 0x00 };
	int8_t gs[9] = { 2, 1, 1, 2, 0, 0, 0, 0, 1 };

	(void)state;
	setup_job(2, 1, 16, 0);
	pair(TALLY_ENC_F32, TALLY_PT_SUM, 3, fa, fb, TALLY_ENC_F32, fs, 12);
	pair(TALLY_ENC_I16, TALLY_PT_SUM, 3, sa, sb, TALLY_ENC_I32, ss, 12);
	pair(TALLY_ENC_I8, TALLY_PT_SUM, 3, ba, bb, TALLY_ENC_I32, bs, 12);
	pair(TALLY_ENC_I4, TALLY_PT_SUM, 3, na, nb, TALLY_ENC_I32, ns, 12);
	pair(TALLY_ENC_SIGN, TALLY_PT_SUM, 9, ga, gb, TALLY_ENC_I8, gs, 9);
}

static void
encodings_narrow(void **state)
{
	int16_t sa[3] = { 32767, -32768, 5 }, sb[3] = { 1, -1, -6 };
	int16_t ss[3] = { 32767, -32768, -1 };
	int8_t ba[3] = { 127, -128, 3 }, bb[3] = { 127, -128, -4 };
	int8_t bs[3] = { 127, -128, -1 };
	uint8_t na[2] = { 0x87, 0x01 }, nb[2] = { 0x87, 0x0e };
	uint8_t ns[2] = { 0x87, 0x0f };	/* {7, -8, -1} saturated */
	uint8_t ga[2] = { 0x0d, 0x01 }, gb[2] = { 0x0b, 0x00 };
	/* Majority of 2 needs both: 2 * count > 2. */
	uint8_t gs[2] = { 0x09, 0x00 };

	(void)state;
	setup_job(2, 1, 16, 1);
	pair(TALLY_ENC_I16, TALLY_PT_SUM, 3, sa, sb, TALLY_ENC_I16, ss, 6);
	pair(TALLY_ENC_I8, TALLY_PT_SUM, 3, ba, bb, TALLY_ENC_I8, bs, 3);
	pair(TALLY_ENC_I4, TALLY_PT_SUM, 3, na, nb, TALLY_ENC_I4, ns, 2);
	pair(TALLY_ENC_SIGN, TALLY_PT_SUM, 9, ga, gb, TALLY_ENC_SIGN, gs, 2);
}

static void
max_round(void **state)
{
	float fa[4] = { 1.0f, -3.0f, 1e30f, 0.0f };
	float fb[4] = { 2.0f, -4.0f, 1e-30f, -0.0f };
	float fm[4] = { 2.0f, -3.0f, 1e30f, 0.0f };
	int32_t ia[3] = { -5, INT32_MAX, 0 }, ib[3] = { -6, 0, INT32_MIN };
	int32_t im[3] = { -5, INT32_MAX, 0 };

	(void)state;
	setup_job(2, 1, 8, 1);	/* narrow does not touch maxima */
	pair(TALLY_ENC_F32, TALLY_PT_MAX, 4, fa, fb, TALLY_ENC_F32, fm, 16);
	pair(TALLY_ENC_I32, TALLY_PT_MAX, 3, ia, ib, TALLY_ENC_I32, im, 12);
}

static void
jobs_are_isolated(void **state)
{
	struct tally_job_conf ca = {
		.id = 1, .token = 111, .world = 2, .window = 2, .max_elems = 2,
	};
	struct tally_job_conf cb = {
		.id = 2, .token = 222, .world = 2, .window = 2, .max_elems = 2,
	};
	struct tally_job *jobs[2];
	struct tally_jobtab *tab;
	struct tally_hdr h;
	int32_t va[2] = { 1, 1 }, vb[2] = { 100, 100 };
	uint8_t pkt[64];

	(void)state;
	memset(&c.st, 0, sizeof(c.st));
	jobs[0] = tally_job_create(&ca);
	jobs[1] = tally_job_create(&cb);
	tab = tally_jobtab_create(jobs, 2);
	assert_non_null(tab);
	for (int k = 0; k < 4; k++) {
		int j = k & 1;

		h = hdr((uint8_t)(k >> 1), 0, 0, 0, 2, TALLY_ENC_I32);
		h.job = j ? 2 : 1;
		h.token = j ? 222 : 111;
		tally_hdr_encode(&h, pkt);
		memcpy(pkt + TALLY_HDR_LEN, j ? vb : va, 8);
		tally_agg_process(tab, &c.st, pkt, TALLY_HDR_LEN + 8, NULL, &c.v);
		assert_int_equal(c.v.kind, k < 2 ? TALLY_V_TAKEN :
			TALLY_V_COMPLETE);
		if (k >= 2)
			assert_int_equal(((const int32_t *)c.v.payload)[0],
				j ? 200 : 2);
	}
	/* Job 1's token on job 2 is dropped and counted. */
	h = hdr(0, 1, 0, 0, 2, TALLY_ENC_I32);
	h.job = 2;
	h.token = 111;
	tally_hdr_encode(&h, pkt);
	assert_int_equal(tally_agg_process(tab, &c.st, pkt, TALLY_HDR_LEN + 8, NULL, &c.v),
		TALLY_V_DROP);
	assert_int_equal(c.st.drops[TALLY_ST_BAD_TOKEN], 1);
	tally_jobtab_destroy(tab);
	tally_job_destroy(jobs[0]);
	tally_job_destroy(jobs[1]);
}

static void
job_conf_checked(void **state)
{
	struct tally_job_conf ok = {
		.id = 1, .world = 64, .window = 1, .max_elems = TALLY_MAX_ELEMS,
	};
	struct tally_job_conf bad;
	struct tally_job *job;

	(void)state;
	job = tally_job_create(&ok);
	assert_non_null(job);
	tally_job_destroy(job);
	tally_job_destroy(NULL);
	bad = ok;
	bad.world = 0;
	errno = 0;
	assert_null(tally_job_create(&bad));
	assert_int_equal(errno, EINVAL);
	bad.world = 65;
	assert_null(tally_job_create(&bad));
	bad = ok;
	bad.window = 0;
	assert_null(tally_job_create(&bad));
	bad = ok;
	bad.max_elems = TALLY_MAX_ELEMS + 1;
	assert_null(tally_job_create(&bad));
	bad.max_elems = 0;
	assert_null(tally_job_create(&bad));
	assert_null(tally_job_create(NULL));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(complete_1, teardown),
		cmocka_unit_test_teardown(complete_2, teardown),
		cmocka_unit_test_teardown(complete_4, teardown),
		cmocka_unit_test_teardown(complete_64, teardown),
		cmocka_unit_test_teardown(duplicate_is_not_counted_twice,
			teardown),
		cmocka_unit_test_teardown(retransmission_gets_stored_result,
			teardown),
		cmocka_unit_test_teardown(shadow_set_rotation, teardown),
		cmocka_unit_test_teardown(early_and_mismatch, teardown),
		cmocka_unit_test_teardown(replayed_old_round_is_stale,
			teardown),
		cmocka_unit_test_teardown(rounds_behind_and_ahead, teardown),
		cmocka_unit_test_teardown(fresh_slot_takes_first_round,
			teardown),
		cmocka_unit_test_teardown(each_rejection_reason, teardown),
		cmocka_unit_test_teardown(source_must_match_member, teardown),
		cmocka_unit_test_teardown(sums_wrap_like_twos_complement,
			teardown),
		cmocka_unit_test_teardown(encodings_wide, teardown),
		cmocka_unit_test_teardown(encodings_narrow, teardown),
		cmocka_unit_test_teardown(max_round, teardown),
		cmocka_unit_test(jobs_are_isolated),
		cmocka_unit_test(job_conf_checked),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The engine in an authenticated job (issue 11, item 10): contributions
 * with the member's tag are summed and answered with tagged results and
 * NACKs; forged ones (the right token and a valid-looking header, with
 * no tag, a wrong one, another member's, or a payload changed after
 * tagging) and replayed old ones are dropped and counted, never
 * answered, and the sums stay exact. A plain job refuses tagged packets.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>

#include <tally/mac.h>

#include "agg/agg.h"

#define TOKEN	UINT64_C(0x5eed5eed12345678)
#define JOB	42
#define WORLD	2

static struct {
	struct tally_job *job;
	struct tally_jobtab *tab;
	struct tally_agg_stats st;
	struct tally_verdict v;
	struct tally_mac_key up[WORLD], down[WORLD], result;
	uint8_t pkt[TALLY_HDR_LEN + 4 * 64 + TALLY_TAG_LEN];
} c;

static uint32_t build_seq;	/* build()'s sequence number (flag SEQ);
				 * 0: none */

static void
key_of(uint8_t *k, unsigned int seed)
{
	for (unsigned int i = 0; i < TALLY_KEY_LEN; i++)
		k[i] = (uint8_t)(seed * 31 + i * 7);
}

static int
setup(void **state)
{
	struct tally_job_conf conf = {
		.id = JOB, .token = TOKEN, .world = WORLD, .window = 4,
		.max_elems = 64, .auth = 1,
	};

	(void)state;
	memset(&c.st, 0, sizeof(c.st));
	key_of(conf.key_result, 1);
	assert_int_equal(tally_mac_key_init(&c.result, conf.key_result), 0);
	for (unsigned int r = 0; r < WORLD; r++) {
		key_of(conf.keys[r].up, 10 + r);
		key_of(conf.keys[r].down, 20 + r);
		assert_int_equal(tally_mac_key_init(&c.up[r],
			conf.keys[r].up), 0);
		assert_int_equal(tally_mac_key_init(&c.down[r],
			conf.keys[r].down), 0);
	}
	c.job = tally_job_create(&conf);
	assert_non_null(c.job);
	c.tab = tally_jobtab_create(&c.job, 1);
	assert_non_null(c.tab);
	return 0;
}

static int
teardown(void **state)
{
	(void)state;
	tally_jobtab_destroy(c.tab);
	tally_job_destroy(c.job);
	return 0;
}

/*
 * Builds rank's i32 contribution of n elements vals to round of slot,
 * flag AUTH, tagged with key k (NULL: no tag, no flag). Returns length.
 */
static unsigned int
build(uint8_t rank, uint16_t slot, uint64_t round, const int32_t *vals,
	uint16_t n, const struct tally_mac_key *k)
{
	struct tally_hdr h = {
		.version = TALLY_PROTO_VERSION, .type = TALLY_PT_SUM,
		.flags = (uint8_t)((round & 1 ? TALLY_F_SET : 0) |
			(k != NULL ? TALLY_F_AUTH : 0)),
		.enc = TALLY_ENC_I32, .job = JOB, .token = TOKEN,
		.rank = rank, .slot = slot, .offset = slot * 64u, .count = n,
		.next_block = TALLY_NO_BLOCK, .round = round,
	};
	unsigned int len = TALLY_HDR_LEN + 4u * n;

	if (build_seq != 0) {
		h.flags |= TALLY_F_SEQ;
		h.next_block = build_seq;
	}
	tally_hdr_encode(&h, c.pkt);
	memcpy(c.pkt + TALLY_HDR_LEN, vals, 4u * n);
	if (k != NULL) {
		tally_mac_tag(k, TALLY_MAC_UP, c.pkt, c.pkt + TALLY_HDR_LEN,
			4u * n, c.pkt + len);
		len += TALLY_TAG_LEN;
	}
	return len;
}

static enum tally_verdict_kind
process(unsigned int len)
{
	return tally_agg_process(c.tab, &c.st, c.pkt, len, NULL, &c.v);
}

/* The verdict's answer on the wire verifies under k as kind. */
static void
answer_verifies(const struct tally_mac_key *k, enum tally_mac_kind kind)
{
	uint8_t out[TALLY_HDR_LEN + 4 * 64 + TALLY_TAG_LEN];
	size_t len = TALLY_HDR_LEN + c.v.payload_len;

	assert_true(c.v.tagged);
	assert_true(c.v.hdr.flags & TALLY_F_AUTH);
	tally_hdr_encode(&c.v.hdr, out);
	if (c.v.payload_len > 0)
		memcpy(out + TALLY_HDR_LEN, c.v.payload, c.v.payload_len);
	memcpy(out + len, c.v.tag, TALLY_TAG_LEN);
	assert_true(tally_mac_verify(k, kind, out, len + TALLY_TAG_LEN));
	/* ... and only under that key and kind. */
	assert_false(tally_mac_verify(&c.up[0], kind, out,
		len + TALLY_TAG_LEN));
	assert_int_equal(tally_hdr_decode(out, len + TALLY_TAG_LEN,
		&(struct tally_hdr){ 0 }), TALLY_ST_OK);
}

static void
tagged_round_completes(void **state)
{
	int32_t a[4] = { 1, -2, 3, 4 }, b[4] = { 10, 20, -30, 40 };

	(void)state;
	assert_int_equal(process(build(0, 1, 0, a, 4, &c.up[0])),
		TALLY_V_TAKEN);
	assert_int_equal(process(build(1, 1, 0, b, 4, &c.up[1])),
		TALLY_V_COMPLETE);
	assert_int_equal(((const int32_t *)c.v.payload)[2], -27);
	answer_verifies(&c.result, TALLY_MAC_RESULT);
	/* A retransmission (RETX) keeps its tag; the stored result back. */
	build(1, 1, 0, b, 4, &c.up[1]);
	c.pkt[4] |= TALLY_F_RETX;
	assert_int_equal(process(TALLY_HDR_LEN + 16 + TALLY_TAG_LEN),
		TALLY_V_RESEND);
	answer_verifies(&c.result, TALLY_MAC_RESULT);
	assert_int_equal(c.st.drops[TALLY_ST_BAD_AUTH], 0);
}

/* Forged contributions: the right token, a valid header, a bad tag. */
static void
forgeries_dropped(void **state)
{
	int32_t a[4] = { 1, 2, 3, 4 }, evil[4] = { 1000, 1000, 1000, 1000 };
	unsigned int len;

	(void)state;
	/* No tag at all (and no flag): what version 1 would accept. */
	assert_int_equal(process(build(0, 2, 0, evil, 4, NULL)),
		TALLY_V_DROP);
	assert_int_equal(c.v.status, TALLY_ST_BAD_AUTH);
	/* The flag and a tag of zeros. */
	len = build(0, 2, 0, evil, 4, NULL);
	c.pkt[4] |= TALLY_F_AUTH;
	memset(c.pkt + len, 0, TALLY_TAG_LEN);
	assert_int_equal(process(len + TALLY_TAG_LEN), TALLY_V_DROP);
	/* Another member's key, claiming rank 0. */
	assert_int_equal(process(build(0, 2, 0, evil, 4, &c.up[1])),
		TALLY_V_DROP);
	/* The down key (what tags NACKs to rank 0). */
	assert_int_equal(process(build(0, 2, 0, evil, 4, &c.down[0])),
		TALLY_V_DROP);
	/* A real packet whose payload was changed afterwards. */
	len = build(0, 2, 0, a, 4, &c.up[0]);
	c.pkt[TALLY_HDR_LEN] ^= 0x40;
	assert_int_equal(process(len), TALLY_V_DROP);
	/* ... or whose header (its offset) was. */
	len = build(0, 2, 0, a, 4, &c.up[0]);
	c.pkt[23] ^= 1;
	assert_int_equal(process(len), TALLY_V_DROP);
	/* A member's bad slot, forged: dropped, never NACKed. */
	len = build(0, 9, 0, a, 4, &c.up[1]);
	assert_int_equal(process(len), TALLY_V_DROP);
	assert_int_equal(c.st.drops[TALLY_ST_BAD_AUTH], 7);
	assert_int_equal(c.st.nacks, 0);
	assert_int_equal(c.st.accepted, 0);
	/* Nothing was counted: the real round sums what it should. */
	assert_int_equal(process(build(0, 2, 0, a, 4, &c.up[0])),
		TALLY_V_TAKEN);
	assert_int_equal(process(build(1, 2, 0, a, 4, &c.up[1])),
		TALLY_V_COMPLETE);
	assert_int_equal(((const int32_t *)c.v.payload)[3], 8);
}

/* An authentic packet of a past round, sent again: stale. */
static void
replay_is_stale(void **state)
{
	uint8_t old[TALLY_HDR_LEN + 8 + TALLY_TAG_LEN];
	int32_t a[2] = { 5, 6 };
	unsigned int len;

	(void)state;
	len = build(0, 3, 0, a, 2, &c.up[0]);
	memcpy(old, c.pkt, len);
	assert_int_equal(process(len), TALLY_V_TAKEN);
	assert_int_equal(process(build(1, 3, 0, a, 2, &c.up[1])),
		TALLY_V_COMPLETE);
	for (uint64_t r = 1; r < 3; r++) {
		assert_int_equal(process(build(0, 3, r, a, 2, &c.up[0])),
			TALLY_V_TAKEN);
		memcpy(c.pkt, old, len);
		assert_int_equal(process(len), TALLY_V_DROP);
		assert_int_equal(c.v.status, TALLY_ST_STALE);
		assert_int_equal(process(build(1, 3, r, a, 2, &c.up[1])),
			TALLY_V_COMPLETE);
		assert_int_equal(((const int32_t *)c.v.payload)[1], 12);
	}
	assert_int_equal(c.st.drops[TALLY_ST_STALE], 2);
}

/* A member's refused packet: the NACK carries its down key's tag. */
static void
nack_is_tagged(void **state)
{
	int32_t a[2] = { 5, 6 };

	(void)state;
	assert_int_equal(process(build(1, 7, 0, a, 2, &c.up[1])),
		TALLY_V_NACK);
	assert_int_equal(c.v.status, TALLY_ST_BAD_SLOT);
	answer_verifies(&c.down[1], TALLY_MAC_NACK);
	assert_false(c.v.payload_len);
}

/* A plain job refuses a packet with the flag AUTH. */
static void
plain_job_refuses_tags(void **state)
{
	struct tally_job_conf conf = {
		.id = JOB, .token = TOKEN, .world = WORLD, .window = 4,
		.max_elems = 64,
	};
	int32_t a[2] = { 5, 6 };

	(void)state;
	tally_jobtab_destroy(c.tab);
	tally_job_destroy(c.job);
	c.job = tally_job_create(&conf);
	c.tab = tally_jobtab_create(&c.job, 1);
	assert_non_null(c.tab);
	assert_int_equal(process(build(0, 0, 0, a, 2, &c.up[0])),
		TALLY_V_DROP);
	assert_int_equal(c.v.status, TALLY_ST_BAD_AUTH);
	assert_int_equal(process(build(0, 0, 0, a, 2, NULL)), TALLY_V_TAKEN);
	assert_false(c.v.tagged);
}

/*
 * An authenticated job: a NACK gap is tagged with the member's NACK key
 * as any NACK; results are not numbered (a round summed again after a
 * restart would get another number under the same IV).
 */
static void
gap_in_auth_job(void **state)
{
	int32_t a[4] = { 1, 2, 3, 4 };
	struct tally_verdict g;
	unsigned int len;

	(void)state;
	build_seq = 1;
	assert_int_equal(process(build(0, 0, 0, a, 4, &c.up[0])),
		TALLY_V_TAKEN);
	build_seq = 3;
	len = build(0, 2, 0, a, 4, &c.up[0]);
	assert_int_equal(process(len), TALLY_V_TAKEN);
	assert_int_equal(tally_agg_gap(&c.v, c.pkt, len, &g), TALLY_V_NACK);
	c.v = g;
	assert_int_equal(c.v.hdr.status, TALLY_ST_GAP);
	assert_int_equal(c.v.hdr.next_block, 2);
	answer_verifies(&c.down[0], TALLY_MAC_NACK);
	build_seq = 1;
	assert_int_equal(process(build(1, 0, 0, a, 4, &c.up[1])),
		TALLY_V_COMPLETE);
	build_seq = 0;
	assert_false(c.v.hdr.flags & TALLY_F_SEQ);
	assert_int_equal(c.v.hdr.next_block, TALLY_NO_BLOCK);
	answer_verifies(&c.result, TALLY_MAC_RESULT);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(tagged_round_completes, setup,
			teardown),
		cmocka_unit_test_setup_teardown(forgeries_dropped, setup,
			teardown),
		cmocka_unit_test_setup_teardown(replay_is_stale, setup,
			teardown),
		cmocka_unit_test_setup_teardown(gap_in_auth_job, setup,
			teardown),
		cmocka_unit_test_setup_teardown(nack_is_tagged, setup,
			teardown),
		cmocka_unit_test_setup_teardown(plain_job_refuses_tags, setup,
			teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The engine's NACK gap (docs/protocol.md, "Gaps"): a member's frame
 * with the flag SEQ that skips sequence numbers on its port shows the
 * frames in between lost, and tally_agg_gap() names them to the member;
 * in order, retransmissions, copies, reordering, other ports, a restart,
 * wrapping and senders without SEQ. Sums stay exact throughout.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>

#include "agg/agg.h"

#define TOKEN	0x5eed5eed12345678ull
#define JOB	42
#define N	4		/* elements a chunk */

static struct tally_job *job;
static struct tally_jobtab *tab;
static struct tally_agg_stats st;
static struct tally_verdict v, g;
static uint8_t pkt[TALLY_HDR_LEN + 4 * N];

static void
setup_job(uint8_t world, uint16_t window, uint16_t nports)
{
	struct tally_job_conf conf = {
		.id = JOB, .token = TOKEN, .world = world, .window = window,
		.max_elems = N, .nports = nports,
	};

	memset(&st, 0, sizeof(st));
	job = tally_job_create(&conf);
	assert_non_null(job);
	tab = tally_jobtab_create(&job, 1);
	assert_non_null(tab);
}

static int
teardown(void **state)
{
	(void)state;
	tally_jobtab_destroy(tab);
	tally_job_destroy(job);
	return 0;
}

/*
 * Rank's contribution to round of slot, with the flag SEQ and sequence
 * number seq when seqd, the values rank + 1 + slot; retx: flag RETX.
 */
static enum tally_verdict_kind
send_any(uint8_t rank, uint16_t slot, uint64_t round, uint32_t seq, int retx,
	int seqd)
{
	struct tally_hdr h = {
		.version = TALLY_PROTO_VERSION, .type = TALLY_PT_SUM,
		.flags = (uint8_t)((round & 1 ? TALLY_F_SET : 0) |
			(retx ? TALLY_F_RETX : 0) | (seqd ? TALLY_F_SEQ : 0)),
		.enc = TALLY_ENC_I32, .job = JOB, .token = TOKEN,
		.rank = rank, .slot = slot, .offset = slot * N, .count = N,
		.next_block = seqd ? seq : TALLY_NO_BLOCK, .round = round,
	};
	int32_t vals[N];

	for (int i = 0; i < N; i++)
		vals[i] = rank + 1 + slot;
	tally_hdr_encode(&h, pkt);
	memcpy(pkt + TALLY_HDR_LEN, vals, sizeof(vals));
	return tally_agg_process(tab, &st, pkt, sizeof(pkt), NULL, &v);
}

static enum tally_verdict_kind
send_seq(uint8_t rank, uint16_t slot, uint64_t round, uint32_t seq, int retx)
{
	return send_any(rank, slot, round, seq, retx, 1);
}

/* The NACK gap of the packet just sent: none. */
static void
no_gap(void)
{
	assert_int_equal(v.gap_n, 0);
	assert_int_equal(tally_agg_gap(&v, pkt, sizeof(pkt), &g),
		TALLY_V_DROP);
}

/* The NACK gap of the packet just sent names first .. first + n - 1. */
static void
gap_of(uint32_t first, uint32_t n)
{
	struct tally_hdr sent;

	assert_int_equal(tally_hdr_decode(pkt, sizeof(pkt), &sent),
		TALLY_ST_OK);
	assert_int_equal(v.gap_n, n);
	assert_int_equal(tally_agg_gap(&v, pkt, sizeof(pkt), &g),
		TALLY_V_NACK);
	assert_int_equal(g.hdr.type, TALLY_PT_NACK);
	assert_int_equal(g.hdr.status, TALLY_ST_GAP);
	assert_int_equal(g.status, TALLY_ST_GAP);
	assert_int_equal(g.hdr.rank, sent.rank);
	assert_int_equal(g.hdr.slot, sent.slot);
	assert_int_equal(g.hdr.round, sent.round);
	assert_int_equal(g.hdr.offset, sent.offset);
	assert_int_equal(g.hdr.next_block, first);
	assert_int_equal(g.hdr.count, n);
	assert_true(g.hdr.flags & TALLY_F_SEQ);
	assert_int_equal(g.payload_len, 0);
	assert_int_equal(g.tagged, 0);
	assert_ptr_equal(g.job, job);
}

/* The result of slot's round just completed: world members' values. */
static void
sum_is(uint8_t world, uint16_t slot)
{
	int32_t want = 0, got[N];

	for (uint8_t r = 0; r < world; r++)
		want += r + 1 + slot;
	assert_int_equal(v.kind, TALLY_V_COMPLETE);
	memcpy(got, v.payload, sizeof(got));
	for (int i = 0; i < N; i++)
		assert_int_equal(got[i], want);
}

/* Frames in order, on one port: nothing to say, ever. */
static void
in_order(void **state)
{
	(void)state;
	setup_job(2, 8, 1);
	for (uint16_t s = 0; s < 8; s++) {
		assert_int_equal(send_seq(0, s, 0, s + 1u, 0), TALLY_V_TAKEN);
		no_gap();
		assert_int_equal(send_seq(1, s, 0, s + 1u, 0),
			TALLY_V_COMPLETE);
		no_gap();
		sum_is(2, s);
	}
	assert_int_equal(st.gap_nacks, 0);
}

/*
 * Rank 0's frame of slot 1 (number 2) is lost: its frame of slot 2
 * (number 3) shows it. The packet itself is taken; the resend (RETX,
 * number 2 again) says nothing more and completes the round exactly.
 */
static void
lost_frame(void **state)
{
	(void)state;
	setup_job(2, 8, 1);
	assert_int_equal(send_seq(0, 0, 0, 1, 0), TALLY_V_TAKEN);
	no_gap();
	assert_int_equal(send_seq(0, 2, 0, 3, 0), TALLY_V_TAKEN);
	gap_of(2, 1);
	assert_int_equal(st.gap_nacks, 1);
	assert_int_equal(st.gap_lost, 1);
	assert_int_equal(send_seq(1, 1, 0, 1, 0), TALLY_V_TAKEN);
	no_gap();
	assert_int_equal(send_seq(0, 1, 0, 2, 1), TALLY_V_COMPLETE);
	no_gap();
	sum_is(2, 1);
	/* Rank 0's count was 3 all along: 4 is in order. */
	assert_int_equal(send_seq(0, 3, 0, 4, 0), TALLY_V_TAKEN);
	no_gap();
	assert_int_equal(st.gap_nacks, 1);
}

/* Three frames lost in a row, then one arrives: one NACK, three named. */
static void
burst(void **state)
{
	(void)state;
	setup_job(2, 8, 1);
	assert_int_equal(send_seq(0, 0, 0, 1, 0), TALLY_V_TAKEN);
	assert_int_equal(send_seq(0, 4, 0, 5, 0), TALLY_V_TAKEN);
	gap_of(2, 3);
	assert_int_equal(st.gap_nacks, 1);
	assert_int_equal(st.gap_lost, 3);
}

/*
 * Copies and retransmissions (the same number again, or older ones,
 * fresh or RETX) never show a gap, and do not move the count: the next
 * fresh frame is in order. A duplicate is still dropped, a round's
 * stored result still served.
 */
static void
copies(void **state)
{
	(void)state;
	setup_job(2, 8, 1);
	assert_int_equal(send_seq(0, 0, 0, 1, 0), TALLY_V_TAKEN);
	assert_int_equal(send_seq(0, 1, 0, 2, 0), TALLY_V_TAKEN);
	assert_int_equal(send_seq(0, 1, 0, 2, 1), TALLY_V_DROP);
	no_gap();
	assert_int_equal(st.duplicates, 1);
	assert_int_equal(send_seq(0, 0, 0, 1, 1), TALLY_V_DROP);
	no_gap();
	assert_int_equal(send_seq(1, 0, 0, 1, 0), TALLY_V_COMPLETE);
	assert_int_equal(send_seq(1, 1, 0, 2, 0), TALLY_V_COMPLETE);
	assert_int_equal(send_seq(1, 0, 0, 1, 1), TALLY_V_RESEND);
	no_gap();
	assert_int_equal(send_seq(1, 0, 0, 1, 0), TALLY_V_RESEND);
	no_gap();
	assert_int_equal(send_seq(0, 2, 0, 3, 0), TALLY_V_TAKEN);
	no_gap();
	assert_int_equal(st.gap_nacks, 0);
}

/*
 * Reordered after all (number 3 before 2): a NACK gap for 2, the one
 * needless copy such a path costs; then 2 itself and the worker's copy
 * of it: counted once, no further NACK, the sum exact.
 */
static void
reordered(void **state)
{
	(void)state;
	setup_job(2, 8, 1);
	assert_int_equal(send_seq(0, 0, 0, 1, 0), TALLY_V_TAKEN);
	assert_int_equal(send_seq(0, 2, 0, 3, 0), TALLY_V_TAKEN);
	gap_of(2, 1);
	assert_int_equal(send_seq(0, 1, 0, 2, 0), TALLY_V_TAKEN);
	no_gap();
	assert_int_equal(send_seq(0, 1, 0, 2, 1), TALLY_V_DROP);
	no_gap();
	assert_int_equal(send_seq(1, 1, 0, 1, 0), TALLY_V_COMPLETE);
	sum_is(2, 1);
	assert_int_equal(st.gap_nacks, 1);
	assert_int_equal(st.accepted, 4);
}

/*
 * Two ports (slot s on port s % 2): each port's numbers are their own,
 * so interleaving them shows nothing; a gap on one is that port's.
 */
static void
ports(void **state)
{
	(void)state;
	setup_job(1, 8, 2);
	assert_int_equal(send_seq(0, 0, 0, 1, 0), TALLY_V_COMPLETE);
	assert_int_equal(send_seq(0, 2, 0, 2, 0), TALLY_V_COMPLETE);
	assert_int_equal(send_seq(0, 1, 0, 1, 0), TALLY_V_COMPLETE);
	no_gap();
	assert_int_equal(send_seq(0, 3, 0, 2, 0), TALLY_V_COMPLETE);
	no_gap();
	assert_int_equal(send_seq(0, 7, 0, 4, 0), TALLY_V_COMPLETE);
	gap_of(3, 1);
	assert_int_equal(send_seq(0, 4, 0, 3, 0), TALLY_V_COMPLETE);
	no_gap();
	assert_int_equal(st.gap_nacks, 1);
}

/*
 * A jump past what a window can lose (a sender restarted under the
 * job) is taken as the new count without a NACK; wrapping past 2^32 is
 * in order; a first frame numbered above 1 shows the ones before it
 * lost (a membership's numbers start at 1).
 */
static void
jumps(void **state)
{
	(void)state;
	setup_job(1, 8, 1);
	assert_int_equal(send_seq(0, 0, 0, 3, 0), TALLY_V_COMPLETE);
	gap_of(1, 2);
	assert_int_equal(send_seq(0, 1, 0, 1000, 0), TALLY_V_COMPLETE);
	no_gap();
	assert_int_equal(send_seq(0, 2, 0, 1001, 0), TALLY_V_COMPLETE);
	no_gap();
	/* window + 1 ahead: still a loss a window allows. */
	assert_int_equal(send_seq(0, 3, 0, 1010, 0), TALLY_V_COMPLETE);
	gap_of(1002, 8);
	/* Half the number space ahead or more is behind: not looked at. */
	assert_int_equal(send_seq(0, 4, 0, 1010 + UINT32_C(0x80000000), 0),
		TALLY_V_COMPLETE);
	no_gap();
	/* Up to the wrap in long jumps, then through it in order. */
	assert_int_equal(send_seq(0, 5, 0, 0x7ffffff0u, 0), TALLY_V_COMPLETE);
	no_gap();
	assert_int_equal(send_seq(0, 6, 0, 0xffffffe0u, 0), TALLY_V_COMPLETE);
	no_gap();
	assert_int_equal(send_seq(0, 7, 0, 0xffffffffu, 0), TALLY_V_COMPLETE);
	no_gap();
	assert_int_equal(send_seq(0, 0, 1, 0, 0), TALLY_V_COMPLETE);
	no_gap();
	assert_int_equal(send_seq(0, 1, 1, 2, 0), TALLY_V_COMPLETE);
	gap_of(1, 1);
	assert_int_equal(st.gap_nacks, 3);
}

/*
 * Senders without SEQ, sparse frames (their next_block is a block) and
 * refused packets (a slot out of range) leave the count alone; a job
 * reset starts it over.
 */
static void
not_counted(void **state)
{
	(void)state;
	setup_job(1, 8, 1);
	assert_int_equal(send_seq(0, 0, 0, 1, 0), TALLY_V_COMPLETE);
	assert_int_equal(send_any(0, 1, 0, 9, 0, 0), TALLY_V_COMPLETE);
	no_gap();
	assert_int_equal(send_seq(0, 9, 0, 7, 0), TALLY_V_NACK);
	assert_int_equal(v.status, TALLY_ST_BAD_SLOT);
	assert_int_equal(v.gap_n, 0);
	assert_int_equal(send_seq(0, 2, 0, 2, 0), TALLY_V_COMPLETE);
	no_gap();
	tally_job_reset(job);
	assert_int_equal(send_seq(0, 0, 0, 1, 0), TALLY_V_COMPLETE);
	no_gap();
	assert_int_equal(st.gap_nacks, 0);
}

/* The result just sent is numbered num on its port, after prev's. */
static void
numbered(uint32_t prev, uint32_t num)
{
	assert_true(v.hdr.flags & TALLY_F_SEQ);
	assert_int_equal(v.hdr.next_block, prev << 16 | num);
}

/*
 * Results of numbered rounds are numbered one up a port, in completion
 * order, each naming the slot of the port's result before it; a result
 * sent again carries its number; a round whose contributions are not
 * numbered gets a result without one.
 */
static void
numbered_results(void **state)
{
	(void)state;
	setup_job(2, 8, 2);
	assert_int_equal(send_seq(0, 0, 0, 1, 0), TALLY_V_TAKEN);
	assert_int_equal(send_seq(0, 2, 0, 2, 0), TALLY_V_TAKEN);
	assert_int_equal(send_seq(1, 2, 0, 1, 0), TALLY_V_COMPLETE);
	numbered(0, 1);
	sum_is(2, 2);
	assert_int_equal(send_seq(1, 0, 0, 2, 0), TALLY_V_COMPLETE);
	numbered(2, 2);
	assert_int_equal(send_seq(0, 1, 0, 1, 0), TALLY_V_TAKEN);
	assert_int_equal(send_seq(1, 1, 0, 3, 0), TALLY_V_COMPLETE);
	gap_of(1, 2);	/* rank 1's port-1 count starts at 1 */
	numbered(0, 1);	/* port 1's own count */
	assert_int_equal(send_seq(0, 2, 0, 2, 1), TALLY_V_RESEND);
	numbered(0, 1);
	assert_true(v.hdr.flags & TALLY_F_RETX);
	assert_int_equal(send_seq(0, 4, 0, 3, 0), TALLY_V_TAKEN);
	assert_int_equal(send_seq(1, 4, 0, 3, 0), TALLY_V_COMPLETE);
	numbered(0, 3);
	assert_int_equal(send_any(0, 6, 0, 0, 0, 0), TALLY_V_TAKEN);
	assert_int_equal(send_any(1, 6, 0, 0, 0, 0), TALLY_V_COMPLETE);
	assert_false(v.hdr.flags & TALLY_F_SEQ);
	assert_int_equal(v.hdr.next_block, TALLY_NO_BLOCK);
	assert_int_equal(send_seq(0, 0, 1, 4, 0), TALLY_V_TAKEN);
	assert_int_equal(send_seq(1, 0, 1, 4, 0), TALLY_V_COMPLETE);
	numbered(4, 4);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(in_order, teardown),
		cmocka_unit_test_teardown(lost_frame, teardown),
		cmocka_unit_test_teardown(burst, teardown),
		cmocka_unit_test_teardown(copies, teardown),
		cmocka_unit_test_teardown(reordered, teardown),
		cmocka_unit_test_teardown(ports, teardown),
		cmocka_unit_test_teardown(jumps, teardown),
		cmocka_unit_test_teardown(not_counted, teardown),
		cmocka_unit_test_teardown(numbered_results, teardown),
	};

	return cmocka_run_group_tests_name("agg-gap", tests, NULL, NULL);
}

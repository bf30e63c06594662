/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libFuzzer target fuzz-wire: the wire header decoder and the engine.
 *
 * An input is a run of packets, each framed as
 *   src (1 byte) | len (2 bytes, little-endian) | len bytes of packet
 * (a last frame shorter than its len takes what is left). src picks the
 * sender's address from a small table: members of the jobs below, a
 * stranger, a leaf's spine, or none. Every packet (each of a bundle's,
 * docs/protocol.md "Bundles") goes through tally_hdr_decode() and
 * then tally_agg_process() on a table of five jobs whose slots start
 * empty for every input, so an input is a replayable sequence of rounds.
 *
 * Besides ASan and UBSan, it checks what must hold whatever arrives: a
 * decoded header encodes back to the same bytes; a verdict names a job of
 * the table or none; a result lies inside its slot's lanes, has the
 * length its header says, and decodes cleanly as a packet a worker would
 * take; a NACK echoes an allowed status; a leaf's round goes upstream
 * with its spine's token and a result sent here is a leaf's spine's or
 * refused; every packet is counted exactly
 * once in the engine's counters; and every slot stays consistent.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <tally/proto.h>

#include "agg/agg.h"
#include "agg/job.h"
#include "agg/jobtab.h"

#define FUZZ_NAME "fuzz-wire"
#include "fuzz_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define NJOBS 5
#define SPINE_IP IP(10, 0, 0, 9)
#define SPINE_TOKEN UINT64_C(0x5555555555555555)
#define IP(a, b, c, d) ((uint32_t)(a) | (uint32_t)(b) << 8 | \
	(uint32_t)(c) << 16 | (uint32_t)(d) << 24)	/* network order */
#define PORT(p) ((uint16_t)((p) >> 8 | ((p) & 0xff) << 8))

/*
 * Job 1: three members with fixed addresses, a small window, i32/f32
 * sized slots, wide results. Job 2: any address for rank 0, an address
 * with any port for rank 1, the largest packets, narrow results. Job
 * 0x101: sixty-four members (rank 63 is the bitmap's top bit), one slot,
 * sharing job 1's bucket in the table. Job 3: an authenticated job (any
 * address), whose tags the fuzzer must forge: bad_auth, the verification
 * on whatever arrives. Job 4: a leaf of two tiers (docs/scale-out.md),
 * two members at any address, its rounds forwarded to a spine at
 * SPINE_IP whose results complete them.
 */
static const struct tally_job_conf confs[NJOBS] = {
	{ .id = 1, .token = UINT64_C(0x0123456789abcdef), .world = 3,
	  .window = 4, .max_elems = 64,
	  .members = {
		{ IP(10, 0, 0, 1), PORT(1001) },
		{ IP(10, 0, 0, 2), PORT(1002) },
		{ IP(10, 0, 0, 3), PORT(1003) },
	  } },
	{ .id = 2, .token = UINT64_C(0xfedcba9876543210), .world = 2,
	  .window = 2, .max_elems = TALLY_MAX_ELEMS, .narrow = 1,
	  .members = { { 0, 0 }, { IP(10, 0, 0, 4), 0 } } },
	{ .id = 0x101, .token = 7, .world = TALLY_MAX_WORKERS, .window = 1,
	  .max_elems = 16 },
	{ .id = 3, .token = 3, .world = 2, .window = 2, .max_elems = 8,
	  .auth = 1, .key_result = { 1 }, .keys = { { { 2 }, { 3 } },
	  { { 4 }, { 5 } } } },
	{ .id = 4, .token = 4, .world = 2, .window = 2, .max_elems = 16,
	  .up = { .ip = SPINE_IP, .port = PORT(2000), .token = SPINE_TOKEN,
	  .rank = 1, .world = 5 } },
};

/* Senders by the frame's src byte (modulo); the last means "no source". */
static const struct tally_addr srcs[] = {
	{ IP(10, 0, 0, 1), PORT(1001) },
	{ IP(10, 0, 0, 2), PORT(1002) },
	{ IP(10, 0, 0, 3), PORT(1003) },
	{ IP(10, 0, 0, 4), PORT(1004) },
	{ IP(10, 0, 0, 1), PORT(9999) },	/* member 0's host, wrong port */
	{ IP(192, 168, 1, 1), PORT(1001) },	/* a stranger */
	{ SPINE_IP, PORT(2000) },		/* job 4's spine */
	{ 0, 0 },
};

#define NSRCS (sizeof(srcs) / sizeof(srcs[0]))

static struct tally_job *jobs[NJOBS];
static struct tally_jobtab *tab;

static void
setup(void)
{
	for (unsigned int i = 0; i < NJOBS; i++) {
		jobs[i] = tally_job_create(&confs[i]);
		CHECK(jobs[i] != NULL);
	}
	tab = tally_jobtab_create(jobs, NJOBS);
	CHECK(tab != NULL);
}

/* The decoder on its own: what it accepts encodes back unchanged. */
static void
check_decode(const uint8_t *pkt, size_t len)
{
	struct tally_hdr h;
	uint8_t again[TALLY_HDR_LEN];
	enum tally_status s = tally_hdr_decode(pkt, len, &h);

	CHECK(s < TALLY_ST_MAX_);
	if (s != TALLY_ST_OK)
		return;
	CHECK(len >= TALLY_HDR_LEN);
	tally_hdr_encode(&h, again);
	CHECK(memcmp(again, pkt, TALLY_HDR_LEN) == 0);
	if (h.type == TALLY_PT_NACK || h.type == TALLY_PT_DONE ||
			(h.type == TALLY_PT_GATHER && len == tally_pkt_len(
				h.enc, 0, (h.flags & TALLY_F_AUTH) != 0))) {
		/* No payload: a NACK, a DONE, a GATHER request. */
		CHECK(len == tally_pkt_len(h.enc, 0,
			(h.flags & TALLY_F_AUTH) != 0));
		CHECK(h.type == TALLY_PT_NACK || h.count >= 1);
	} else {
		/* Only a block-sparse SUM or result may carry no block. */
		CHECK(h.count <= TALLY_MAX_ELEMS);
		CHECK(h.count >= 1 || ((h.flags & TALLY_F_SPARSE) &&
			(h.type == TALLY_PT_SUM ||
			 h.type == TALLY_PT_SUM_RESULT)));
		CHECK(len == tally_pkt_len(h.enc, h.count,
			(h.flags & TALLY_F_AUTH) != 0));
	}
}

/* A result or NACK as it would go out: header and payload, decoded. */
static void
check_reply(const struct tally_verdict *v)
{
	static uint8_t buf[TALLY_HDR_LEN + TALLY_MAX_ELEMS * 4 + TALLY_TAG_LEN];
	size_t len = TALLY_HDR_LEN + v->payload_len;
	struct tally_hdr h;

	CHECK(v->payload_len <= TALLY_MAX_ELEMS * 4);
	CHECK(!v->tagged == !(v->hdr.flags & TALLY_F_AUTH));
	tally_hdr_encode(&v->hdr, buf);
	if (v->payload_len > 0)
		memcpy(buf + TALLY_HDR_LEN, v->payload, v->payload_len);
	if (v->tagged) {
		memcpy(buf + len, v->tag, TALLY_TAG_LEN);
		len += TALLY_TAG_LEN;
	}
	CHECK(tally_hdr_decode(buf, len, &h) == TALLY_ST_OK);
}

static int
job_index(const struct tally_job *job)
{
	for (int i = 0; i < NJOBS; i++)
		if (jobs[i] == job)
			return i;
	return -1;
}

/*
 * A reply that carries a slot's lanes (a result, or a leaf's round going
 * upstream): from the set of its round's parity, as long as its
 * encoding and count say, inside the slot, and decoding cleanly.
 */
static void
check_lanes_reply(const struct tally_job *job, const struct tally_verdict *v)
{
	CHECK(((v->hdr.flags & TALLY_F_SET) != 0) == (v->hdr.round & 1));
	CHECK(v->payload_len ==
		tally_enc_payload_len(v->hdr.enc, v->hdr.count));
	CHECK(v->payload_len <= job->stride * sizeof(uint32_t));
	CHECK(v->payload == tally_job_lanes(job, v->hdr.slot,
		(v->hdr.flags & TALLY_F_SET) != 0));
	check_reply(v);
}

/*
 * A leaf's round to its spine (UPSTREAM): the job's spine token and
 * rank, a request of the round's own type, the slot's lanes.
 */
static void
check_upstream(const struct tally_verdict *v)
{
	const struct tally_job *job = v->job;

	CHECK(job->conf.up.ip != 0);
	CHECK(v->status == TALLY_ST_OK);
	CHECK(v->hdr.type == TALLY_PT_SUM || v->hdr.type == TALLY_PT_MAX);
	CHECK(v->hdr.job == job->conf.id);
	CHECK(v->hdr.token == job->conf.up.token);
	CHECK(v->hdr.rank == job->conf.up.rank);
	CHECK(v->hdr.slot < job->conf.window);
	CHECK(v->hdr.count >= 1 && v->hdr.count <= job->conf.max_elems);
	check_lanes_reply(job, v);
}

/*
 * A result sent to the aggregator (pkt's type a SUM_RESULT or
 * MAX_RESULT): only a leaf takes one, only from its spine. Refused
 * before the spine is proven: no job named, or the job's bad token or
 * source; after: anything, but the packet carried the spine's token.
 * Taken: the members' result of the round (checked as any COMPLETE).
 */
static void
check_tier_result(const uint8_t *pkt, enum tally_verdict_kind k,
	const struct tally_verdict *v)
{
	const struct tally_job *job = v->job;

	CHECK(k == TALLY_V_DROP || k == TALLY_V_COMPLETE);
	CHECK(job->conf.up.ip != 0);
	if (k == TALLY_V_DROP && (v->status == TALLY_ST_BAD_TOKEN ||
			v->status == TALLY_ST_BAD_SOURCE))
		return;
	CHECK(tally_ld_be64(pkt + 8) == job->conf.up.token);
	if (k == TALLY_V_DROP)
		return;
	CHECK(v->status == TALLY_ST_OK && v->tier);
	CHECK(v->hdr.type == TALLY_PT_SUM_RESULT ||
		v->hdr.type == TALLY_PT_MAX_RESULT);
	CHECK(v->hdr.job == job->conf.id);
	CHECK(v->hdr.token == job->conf.token);
	CHECK(v->hdr.slot < job->conf.window);
	CHECK(v->hdr.rank == TALLY_RANK_ALL);
	CHECK(v->hdr.round == tally_ld_be64(pkt + 32));
	CHECK(v->hdr.count <= job->conf.max_elems);
	check_lanes_reply(job, v);
}

/* What must hold of the verdict v on the packet pkt of len bytes. */
static void
check_verdict(const uint8_t *pkt, size_t len, enum tally_verdict_kind k,
	const struct tally_verdict *v)
{
	const struct tally_job *job = v->job;
	struct tally_hdr h;

	CHECK(k == v->kind);
	CHECK(k <= TALLY_V_UPSTREAM);
	CHECK(v->status < TALLY_ST_MAX_);
	if (job == NULL) {
		CHECK(k == TALLY_V_DROP && v->status != TALLY_ST_OK);
		CHECK(v->status <= TALLY_ST_UNKNOWN_JOB);
		return;
	}
	CHECK(job_index(job) >= 0);
	CHECK(len >= TALLY_HDR_LEN);
	CHECK(tally_ld_be16(pkt + 6) == job->conf.id);
	if (pkt[offsetof(struct tally_wire_hdr, type)] == TALLY_PT_SUM_RESULT ||
			pkt[offsetof(struct tally_wire_hdr, type)] ==
			TALLY_PT_MAX_RESULT) {
		check_tier_result(pkt, k, v);
		return;
	}
	if (k == TALLY_V_UPSTREAM) {
		check_upstream(v);
		return;
	}
	if (k == TALLY_V_DROP) {
		/* Refused before authentication, a duplicate, or stale. */
		CHECK(v->status == TALLY_ST_OK ||
			v->status == TALLY_ST_STALE ||
			v->status == TALLY_ST_BAD_AUTH ||
			(v->status >= TALLY_ST_BAD_TOKEN &&
			 v->status <= TALLY_ST_BAD_SOURCE));
		return;
	}
	/* From here on the sender is a proven member. */
	CHECK(v->rank < job->conf.world);
	CHECK(tally_ld_be64(pkt + 8) == job->conf.token);
	if (k == TALLY_V_TAKEN) {
		CHECK(v->status == TALLY_ST_OK);
		CHECK(tally_hdr_decode(pkt, len, &h) == TALLY_ST_OK);
		return;
	}
	if (k == TALLY_V_NACK) {
		CHECK(v->status == TALLY_ST_BAD_ENCODING ||
			v->status == TALLY_ST_BAD_LENGTH ||
			v->status == TALLY_ST_BAD_SLOT ||
			v->status == TALLY_ST_MISMATCH ||
			v->status == TALLY_ST_EARLY ||
			v->status == TALLY_ST_BAD_OWNER ||
			v->status == TALLY_ST_NOT_OWNER ||
			v->status == TALLY_ST_WRONG_OP);
		CHECK(v->hdr.type == TALLY_PT_NACK);
		CHECK(v->hdr.status == v->status);
		CHECK(v->payload_len == 0);
		check_reply(v);
		return;
	}
	/* COMPLETE or RESEND: a result out of the slot's own lanes. */
	CHECK(v->status == TALLY_ST_OK);
	CHECK(v->hdr.type == TALLY_PT_SUM_RESULT ||
		v->hdr.type == TALLY_PT_MAX_RESULT ||
		v->hdr.type == TALLY_PT_PART_RESULT ||
		v->hdr.type == TALLY_PT_DONE);
	/* A SCATTER or GATHER round's: its owner, a member; the data to
	 * some members, a DONE (no payload) to the others. */
	CHECK(!tally_type_is_part(v->hdr.type) ||
		v->hdr.status < job->conf.world);
	CHECK(!v->part || (k == TALLY_V_COMPLETE &&
		v->done.type == TALLY_PT_DONE));
	if (v->hdr.type == TALLY_PT_DONE) {
		CHECK(k == TALLY_V_RESEND && v->payload_len == 0);
		check_reply(v);
		return;
	}
	CHECK(v->hdr.job == job->conf.id);
	CHECK(v->hdr.token == job->conf.token);
	CHECK(v->hdr.slot < job->conf.window);
	/* A block-sparse round may end without a block (count 0). */
	CHECK(v->hdr.count <= job->conf.max_elems);
	CHECK(v->hdr.count >= 1 || (v->hdr.flags & TALLY_F_SPARSE));
	CHECK(v->hdr.rank == TALLY_RANK_ALL);
	/* A result answers the packet's round, from that round's set. */
	CHECK(v->hdr.round == tally_ld_be64(pkt + 32));
	check_lanes_reply(job, v);
}

/*
 * Every slot of every job is consistent with itself: a rank in at most
 * one set, counts that match the bitmaps, and a slot with a round in
 * flight holds it in the set of its parity.
 */
static void
check_slots(void)
{
	for (int j = 0; j < NJOBS; j++) {
		const struct tally_job *job = jobs[j];
		uint64_t all = job->conf.world == 64 ? UINT64_MAX :
			(UINT64_C(1) << job->conf.world) - 1;

		for (unsigned int s = 0; s < job->conf.window; s++) {
			const struct tally_set *a = tally_job_set(job, s, 0);
			const struct tally_set *b = tally_job_set(job, s, 1);

			/* A rank is in at most one set of a slot. */
			CHECK((a->bitmap & b->bitmap) == 0);
			for (int i = 0; i < 2; i++) {
				const struct tally_set *t = i ? b : a;

				CHECK((t->bitmap & ~all) == 0);
				CHECK(t->ncontrib <= job->conf.world);
				CHECK(!t->complete ||
					t->ncontrib == job->conf.world);
				CHECK(t->complete || (uint64_t)t->ncontrib ==
					(uint64_t)__builtin_popcountll(
						t->bitmap));
				CHECK(t->bitmap == 0 ||
					t->count <= job->conf.max_elems);
			}
			if (!tally_slot_fresh(a)) {
				const struct tally_set *l =
					tally_job_set(job, s,
						tally_slot_round(a) & 1);

				CHECK(l->bitmap != 0 || l->complete);
			}
		}
	}
}

/* Every packet counted once: accepted, duplicate, resent or refused. */
static void
check_stats(const struct tally_agg_stats *st, uint64_t npkts)
{
	uint64_t refused = 0;

	for (unsigned int s = 1; s < TALLY_ST_MAX_; s++)
		refused += st->drops[s];
	CHECK(st->drops[TALLY_ST_OK] == 0);
	CHECK(st->rx == npkts);
	/* A leaf: members' packets forwarded again, spine's results. */
	CHECK(st->accepted + st->duplicates + st->resent + refused +
		st->tier_reforwarded + st->tier_results +
		st->tier_duplicates == npkts);
	CHECK(st->tier_refused <= refused);
	CHECK(st->nacks <= refused);
	CHECK(st->completed <= st->accepted);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct tally_agg_stats st;
	uint64_t npkts = 0;

	if (tab == NULL)
		setup();
	for (unsigned int i = 0; i < NJOBS; i++)
		tally_job_reset(jobs[i]);
	memset(&st, 0, sizeof(st));
	while (size >= 3) {
		const struct tally_addr *src = &srcs[data[0] % NSRCS];
		size_t len = (size_t)data[1] | (size_t)data[2] << 8;
		struct tally_verdict v;
		enum tally_verdict_kind k;
		unsigned int n;
		size_t stride;
		uint8_t *pkt;

		data += 3;
		size -= 3;
		if (len > size)
			len = size;
		/* A copy of exactly len bytes: ASan sees any read past it. */
		pkt = malloc(len ? len : 1);
		CHECK(pkt != NULL);
		memcpy(pkt, data, len);
		/* A bundle's packets one by one, as tally-dp takes them. */
		n = tally_bundle_count(pkt, len);
		stride = n > 1 ? tally_bundle_stride(pkt) : len;
		CHECK(n == 1 || (n >= 2 && n <= TALLY_BUNDLE_MAX &&
			len == n * stride));
		for (unsigned int i = 0; i < n; i++) {
			const uint8_t *one = pkt + i * stride;
			size_t olen = stride;

			check_decode(one, olen);
			k = tally_agg_process(tab, &st, one,
				(unsigned int)olen, src->ip == 0 ? NULL : src,
				&v);
			npkts++;
			check_verdict(one, olen, k, &v);
		}
		free(pkt);
		data += len;
		size -= len;
	}
	check_slots();
	check_stats(&st, npkts);
	return 0;
}

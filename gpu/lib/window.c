/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The sliding window: one round of chunks through the job's slots, with
 * loss recovery, shared by every allreduce (sums and maxima alike).
 *
 * Chunk c (ctx->elems elements at element offset c * elems, the last one
 * shorter) goes to slot c % window. Each slot is a lane of its own: it
 * carries chunks s, s + window, s + 2 window, ... one at a time, and sends
 * the next as soon as it holds the result of the one before, so a lost
 * packet holds up only its own slot. The round of a slot is the ctx's,
 * one up each time a result is taken, so consecutive calls continue the
 * slot's sequence (docs/protocol.md, "Rounds"); a result or NACK of
 * another round than the one in flight is not this chunk's.
 *
 * Loss recovery is retx.c's: a chunk goes again (flag RETX) when a
 * chunk sent after it has been answered and its own answer is overdue
 * (RACK), as a tail probe when the call has nothing fresh left to send
 * and nothing comes back, or when its timer (RFC 6298, backed off)
 * expires. Whatever has arrived is read before anything is judged
 * overdue: a worker that was descheduled finds the results waiting in
 * its socket, not expired chunks. Retransmissions are queued and flushed
 * at once, with no receive in between: a retransmission's payload is
 * the caller's buffer, which an arriving result of the same chunk would
 * overwrite when results go in place.
 *
 * The round fails when no result at all arrived for ctx->timeout_ms, or
 * when the dataplane NACKs an outstanding chunk.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "batch.h"
#include "ctx.h"

#define TALLY_COLL_RUN	8	/* a shard's chunks in a row, in a round
				 * with owners (chunk_place()) */

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "payloads are sent from and received into the caller's buffers \
as they are: little-endian hosts only"
#endif

/* One running round. */
struct run {
	struct tally_ctx *ctx;
	const struct tally_round *r;
	uint32_t nchunks;
	uint32_t per_shard;		/* a round with owners: chunks of a
					 * shard; 0 for others */
	uint32_t nshards;		/* and its shards */
	uint32_t done;			/* chunks whose result arrived */
	uint8_t res_type;		/* the result we wait for */
	uint8_t res_enc;
	uint32_t started;		/* chunks sent at least once */
	uint64_t progress_ns;		/* when the last result arrived */
	int err;			/* first error, with ctx->err set */
	unsigned int ntx;
	struct tally_tx_pkt tx[TALLY_TP_BURST];
	/*
	 * A GATHER round's requests (headers alone) go in bundles
	 * (docs/protocol.md, "Bundles"): tx[i] of a request points at
	 * bundle[i], which others join, up to bundle_max entries of stride
	 * bytes (a header and its tag). NULL: no bundles.
	 */
	uint8_t (*bundle)[TALLY_BUNDLE_MAX * (TALLY_HDR_LEN + TALLY_TAG_LEN)];
	unsigned int bundle_max;
	size_t stride;
};

uint64_t (*tally_lib_clock)(void);

uint64_t
tally_lib_now_ns(void)
{
	struct timespec ts;

	if (__builtin_expect(tally_lib_clock != NULL, 0))
		return tally_lib_clock();
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/*
 * Where chunk c of a round with owners lies: shard *p, chunk *i of that
 * shard. The shards' chunks are interleaved in runs of TALLY_COLL_RUN
 * (docs/protocol.md, "Collectives"): run j of shard 0, run j of shard
 * 1, ..., then run j + 1 of each (the last runs shorter when a shard's
 * chunks do not divide by the run), so that at any time every member
 * owns about as many of the chunks in flight as any other: each one's
 * link carries its share the whole call through, not all of it for a
 * quarter of the call and nothing the rest.
 */
static void
chunk_place(const struct run *run, uint32_t c, uint32_t *p, uint32_t *i)
{
	uint32_t per = run->per_shard;
	uint32_t j = c / (run->nshards * TALLY_COLL_RUN);
	uint32_t rest = c - j * run->nshards * TALLY_COLL_RUN;
	uint32_t len = per - j * TALLY_COLL_RUN < TALLY_COLL_RUN ?
		per - j * TALLY_COLL_RUN : TALLY_COLL_RUN;

	*p = rest / len;
	*i = j * TALLY_COLL_RUN + rest % len;
}

/*
 * Chunk c's element offset: c elems-element chunks in, or, in a round
 * with owners, its place in its shard (shards are cut on their own).
 */
static uint32_t
chunk_offset(const struct run *run, uint32_t c)
{
	uint32_t e = (uint32_t)run->ctx->elems, p, i;

	if (__builtin_expect(run->per_shard == 0, 1))
		return c * e;
	chunk_place(run, c, &p, &i);
	return (uint32_t)(p * run->r->shard) + i * e;
}

static uint16_t
chunk_count(const struct run *run, uint32_t c)
{
	uint32_t p, i;
	size_t end = run->r->n, left;

	if (run->per_shard != 0) {
		chunk_place(run, c, &p, &i);
		end = (size_t)(p + 1) * run->r->shard;
	}
	left = end - (size_t)chunk_offset(run, c);
	return (uint16_t)(left < run->ctx->elems ? left : run->ctx->elems);
}

/* The owner of chunk c in a round with owners. */
static uint8_t
chunk_owner(const struct run *run, uint32_t c)
{
	uint32_t p, i;

	chunk_place(run, c, &p, &i);
	return (uint8_t)((run->r->root + p) % run->ctx->world);
}

/*
 * Whether this member's packet for chunk c carries data: always, but a
 * GATHER's request for a chunk it does not own.
 */
static int
sends_data(const struct run *run, uint32_t c)
{
	return run->r->type != TALLY_PT_GATHER ||
		chunk_owner(run, c) == run->ctx->rank;
}

/*
 * The type of the answer chunk c waits for: the round's result, or in a
 * round with owners PART_RESULT where this member gets the data (the
 * owner of a SCATTER chunk, the others of a GATHER chunk), else DONE.
 */
static uint8_t
answer_type(const struct run *run, uint32_t c)
{
	if (run->per_shard == 0)
		return run->res_type;
	return (run->r->type == TALLY_PT_SCATTER) ==
		(chunk_owner(run, c) == run->ctx->rank) ?
		TALLY_PT_PART_RESULT : TALLY_PT_DONE;
}

/* Hands the queued packets to the transport (drops them after an error). */
static void
flush(struct run *run)
{
	struct tally_ctx *ctx = run->ctx;
	unsigned int n = run->ntx;
	int rc;

	run->ntx = 0;
	if (n == 0 || run->err != 0)
		return;
	rc = tally_transport_send(ctx->tp, run->tx, n);
	if (rc < 0)
		run->err = tally_ctx_fail(ctx, rc, "%s transport: send: %s",
			ctx->tp->name, tally_transport_strerror(ctx->tp, rc));
}

/*
 * Adds the request outstanding on slot s (its header and tag) to the
 * bundle that is the latest packet of this burst to the slot's stream,
 * when there is one with room. Only the latest: a stream's packets must
 * reach the dataplane in the order of their sequence numbers (flag SEQ,
 * "Gaps"), and a bundle's entries are taken in their order. Returns 1
 * when it did.
 */
static int
join_bundle(struct run *run, uint16_t s)
{
	struct tally_ctx *ctx = run->ctx;
	unsigned int st = tally_lib_stream(ctx, s);

	for (unsigned int i = run->ntx; i-- > 0;) {
		struct tally_tx_pkt *p = &run->tx[i];
		size_t len = p->iov[0].iov_len;

		if (tally_lib_stream(ctx, p->slot) != st)
			continue;
		if (p->iov[1].iov_len != 0 ||
				len >= run->bundle_max * run->stride)
			return 0;
		memcpy(run->bundle[i] + len, ctx->slots[s].hdr,
			TALLY_HDR_LEN);
		memcpy(run->bundle[i] + len + TALLY_HDR_LEN, ctx->slots[s].tag,
			run->stride - TALLY_HDR_LEN);
		p->iov[0].iov_len = len + run->stride;
		/* The first of the bundle counts when it gets company. */
		ctx->st.bundled += len == run->stride ? 2 : 1;
		return 1;
	}
	return 0;
}

/*
 * Starts a bundle at tx[i] with the request outstanding on slot s: its
 * header and tag copied into bundle[i], which others may join.
 */
static void
open_bundle(struct run *run, unsigned int i, uint16_t s)
{
	struct tally_tx_pkt *p = &run->tx[i];

	memcpy(run->bundle[i], run->ctx->slots[s].hdr, TALLY_HDR_LEN);
	memcpy(run->bundle[i] + TALLY_HDR_LEN, run->ctx->slots[s].tag,
		run->stride - TALLY_HDR_LEN);
	p->iov[0].iov_base = run->bundle[i];
	p->iov[0].iov_len = run->stride;
	p->iov[2].iov_len = 0;
}

/* Queues the chunk outstanding on slot s (its header as it stands). */
static void
queue(struct run *run, uint16_t s)
{
	struct tally_ctx *ctx = run->ctx;
	struct tally_slot *slot = &ctx->slots[s];
	struct tally_tx_pkt *p;
	size_t len = sends_data(run, slot->chunk) ?
		tally_enc_payload_len(run->r->enc,
			chunk_count(run, slot->chunk)) : 0;

	if (len == 0 && run->bundle != NULL && join_bundle(run, s)) {
		ctx->st.packets_sent++;
		ctx->st.bytes_sent += run->stride;
		return;
	}
	p = &run->tx[run->ntx++];

	p->slot = s;
	p->iov[0].iov_base = slot->hdr;
	p->iov[0].iov_len = TALLY_HDR_LEN;
	/*
	 * The transport only reads the payload: zero-copy from r->src. A
	 * chunk starts on a byte: elems is a multiple of 8 for the encodings
	 * narrower than a byte (tally_allreduce_enc() checks).
	 */
	p->iov[1].iov_base = len == 0 ? (void *)(uintptr_t)run->r->src :
		(void *)((uintptr_t)run->r->src + tally_enc_payload_len(
			run->r->enc, chunk_offset(run, slot->chunk) -
			run->r->src_base));
	p->iov[1].iov_len = len;
	p->iov[2].iov_base = slot->tag;
	p->iov[2].iov_len = ctx->mac != NULL ? TALLY_TAG_LEN : 0;
	if (len == 0 && run->bundle != NULL)
		open_bundle(run, run->ntx - 1, s);
	ctx->st.packets_sent++;
	ctx->st.bytes_sent += TALLY_HDR_LEN + len + p->iov[2].iov_len;
	if (run->ntx == TALLY_TP_BURST)
		flush(run);
}

/* Puts chunk c on slot s (free) and queues it. */
static void
start_chunk(struct run *run, uint16_t s, uint32_t c, uint64_t now)
{
	struct tally_ctx *ctx = run->ctx;
	struct tally_slot *slot = &ctx->slots[s];
	struct tally_hdr h = {
		.version = TALLY_PROTO_VERSION,
		.type = run->r->type,
		.flags = (uint8_t)((slot->round & 1 ? TALLY_F_SET : 0) |
			(c == run->nchunks - 1 ? TALLY_F_LAST : 0) |
			(ctx->mac != NULL ? TALLY_F_AUTH : 0)),
		.enc = run->r->enc,
		.job = ctx->job,
		.token = ctx->token,
		.rank = ctx->rank,
		.slot = s,
		.offset = chunk_offset(run, c),
		.count = chunk_count(run, c),
		.scale_exp = run->r->scale_exp,
		.next_block = TALLY_NO_BLOCK,
		.round = slot->round,
	};

	if (run->per_shard != 0)	/* "Collectives": the owner */
		h.status = chunk_owner(run, c);
	if (ctx->tx_seq != NULL) {	/* docs/protocol.md, "Gaps" */
		h.flags |= TALLY_F_SEQ;
		h.next_block = ++ctx->tx_seq[tally_lib_stream(ctx, s)];
	}

	if (run->r->encode != NULL)
		run->r->encode(run->r, h.offset, h.count);
	tally_hdr_encode(&h, slot->hdr);
	/* One tag a chunk: its retransmissions (RETX) keep it. */
	if (ctx->mac != NULL && sends_data(run, c))
		tally_lib_sign(ctx, slot->hdr, (const uint8_t *)run->r->src +
			tally_enc_payload_len(run->r->enc,
				h.offset - run->r->src_base),
			tally_enc_payload_len(run->r->enc, h.count), slot->tag);
	else if (ctx->mac != NULL)
		tally_lib_sign(ctx, slot->hdr, NULL, 0, slot->tag);
	slot->chunk = c;
	slot->busy = 1;
	slot->retx = 0;
	tally_retx_sent(&ctx->retx, s, now);
	if (++run->started == run->nchunks)
		ctx->retx.tail = 1;	/* nothing fresh left: probes */
	queue(run, s);
}

uint64_t
tally_lib_retx_begin(struct tally_ctx *ctx, uint32_t n)
{
	uint64_t now = tally_lib_now_ns();

	tally_retx_begin(&ctx->retx, ctx->units, n, now);
	return now;
}

/*
 * Sends again what retx.c finds lost or overdue at now (call it only
 * with every arrived result taken), flushing at once: see the head of
 * this file for why nothing may be received in between.
 */
static void
retransmit(struct run *run, uint64_t now)
{
	struct tally_ctx *ctx = run->ctx;
	unsigned int k = tally_retx_poll(&ctx->retx, now, ctx->due,
		ctx->window);

	for (unsigned int i = 0; i < k; i++) {
		struct tally_slot *slot = &ctx->slots[ctx->due[i]];

		slot->hdr[4] |= TALLY_F_RETX;
		slot->retx = 1;
		ctx->st.retransmits++;
		queue(run, (uint16_t)ctx->due[i]);
	}
	flush(run);
}

/* Whether h (a result or NACK) names the chunk outstanding on its slot. */
static int
is_outstanding(const struct run *run, const struct tally_hdr *h)
{
	const struct tally_slot *slot;

	if (h->slot >= run->ctx->window)
		return 0;
	slot = &run->ctx->slots[h->slot];
	return slot->busy && h->round == slot->round &&
		h->offset == chunk_offset(run, slot->chunk) &&
		h->count == chunk_count(run, slot->chunk);
}

void
tally_lib_sign(const struct tally_ctx *ctx, const uint8_t *hdr,
	const void *payload, size_t plen, uint8_t *tag)
{
	tally_mac_tag(&ctx->mac[TALLY_CTX_KEY_UP], TALLY_MAC_UP, hdr, payload,
		plen, tag);
}

int
tally_lib_authentic(struct tally_ctx *ctx, const struct tally_hdr *h,
	const uint8_t *buf, uint32_t len)
{
	int nack = h->type == TALLY_PT_NACK;

	if (ctx->mac == NULL ? !(h->flags & TALLY_F_AUTH) :
			(h->flags & TALLY_F_AUTH) && tally_mac_verify(
				&ctx->mac[nack ? TALLY_CTX_KEY_DOWN :
					TALLY_CTX_KEY_RESULT],
				nack ? TALLY_MAC_NACK : TALLY_MAC_RESULT,
				buf, len))
		return 1;
	ctx->st.forged++;
	return 0;
}

void
tally_lib_late_result(struct tally_ctx *ctx, const struct tally_hdr *h)
{
	/* The dataplane's answer (RETX) to a retransmission of the chunk
	 * just done on the slot: needless when the round's result came. */
	if ((h->flags & TALLY_F_RETX) && h->slot < ctx->window &&
			h->slot < ctx->retx.n && h->round + 1 ==
			ctx->slots[h->slot].round)
		(void)tally_retx_late_dup(&ctx->retx, h->slot);
	tally_lib_unmatched(ctx, h);
}

void
tally_lib_unmatched(struct tally_ctx *ctx, const struct tally_hdr *h)
{
	if (h->slot < ctx->window && h->round + 1 < ctx->slots[h->slot].round)
		ctx->st.stale++;
	else
		ctx->st.duplicates++;
}

static const char *
nack_hint(unsigned int status)
{
	switch (status) {
	case TALLY_ST_BAD_LENGTH:
		return " (elems above the job's max_elems?)";
	case TALLY_ST_BAD_SLOT:
		return " (window above the job's?)";
	case TALLY_ST_MISMATCH:
	case TALLY_ST_EARLY:
		return " (members out of step: different calls or sizes?)";
	default:
		return "";
	}
}

/*
 * A NACK gap: the dataplane got a later frame of this worker on the
 * slot's port, but not frames next_block .. + count - 1 (sequence
 * numbers on that port). Those of its chunks still outstanding go again
 * at once, flushed before anything more is read (see the head of this
 * file), each at most once and only if nothing sent it again yet.
 */
static void
take_gap(struct run *run, const struct tally_hdr *h)
{
	struct tally_ctx *ctx = run->ctx;
	uint64_t now = tally_lib_now_ns();
	unsigned int n = 0, st;

	ctx->st.gap_nacks++;
	if (ctx->tx_seq == NULL || h->slot >= ctx->window)
		return;
	/* The slots of the NACK's stream: the same dataplane and port. */
	st = tally_lib_stream(ctx, h->slot);
	for (uint32_t s = 0; s < ctx->window; s++) {
		struct tally_slot *slot = &ctx->slots[s];

		if (tally_lib_stream(ctx, s) != st || !slot->busy || !(slot->hdr[4] & TALLY_F_SEQ) ||
				tally_ld_be32(slot->hdr + 28) - h->next_block >=
				h->count ||
				!tally_retx_gap(&ctx->retx, s, now))
			continue;
		slot->hdr[4] |= TALLY_F_RETX;
		slot->retx = 1;
		ctx->st.retransmits++;
		queue(run, (uint16_t)s);
		n++;
	}
	if (n > 0)
		flush(run);
}

/*
 * A numbered result (flag SEQ) from the slot's port: results of a port
 * come in the order the dataplane completed their rounds, every member
 * getting every one, numbered in next_block's low 16 bits, with the
 * slot of the port's result before in the high 16. A number skipped is
 * a result lost on the way here; when one alone is missing, that slot
 * names its chunk, which goes again at once (the dataplane answers it
 * from its stored result), unless it went again already. One compare
 * when nothing was lost.
 */
static void
result_seq(struct run *run, const struct tally_hdr *h, uint64_t now)
{
	struct tally_ctx *ctx = run->ctx;
	uint32_t *last = &ctx->rx_seq[tally_lib_stream(ctx, h->slot)];
	uint32_t num = h->next_block & 0xffff, prev = h->next_block >> 16;
	uint32_t d = (num - *last) & 0xffff;
	struct tally_slot *slot;

	if (__builtin_expect(d == 1, 1)) {
		*last = num;
		return;
	}
	if (d == 0 || d >= 0x8000)
		return;		/* an older result again */
	*last = num;
	if (d - 1 > ctx->window)
		return;		/* no loss a window allows: restarted */
	ctx->st.result_gaps++;
	if (d != 2 || prev >= ctx->window || prev == h->slot)
		return;
	slot = &ctx->slots[prev];
	if (!slot->busy || !(slot->hdr[4] & TALLY_F_SEQ) ||
			!tally_retx_gap(&ctx->retx, prev, now))
		return;
	slot->hdr[4] |= TALLY_F_RETX;
	slot->retx = 1;
	ctx->st.retransmits++;
	queue(run, (uint16_t)prev);
	flush(run);
}

static void
take_nack(struct run *run, const struct tally_hdr *h)
{
	struct tally_ctx *ctx = run->ctx;

	if (h->rank != ctx->rank) {
		ctx->st.duplicates++;
		return;
	}
	ctx->st.nacks++;
	if (h->status == TALLY_ST_GAP) {
		take_gap(run, h);
		return;
	}
	if (!is_outstanding(run, h))
		return;		/* about a packet no longer in question */
	run->err = tally_ctx_fail(ctx, -EPROTO, "dataplane refused the chunk "
		"at offset %u (slot %u, %u elements): %s%s", h->offset,
		h->slot, h->count, tally_status_name(h->status),
		nack_hint(h->status));
}

/*
 * Puts the result of h's chunk, at res in the packet (borrowed), where
 * the round wants it: straight through the codec's decode step when
 * there is one (no copy), else copied into dst. A payload that is not
 * aligned for its elements (a transport that lent an odd offset) goes
 * through dst first, so that decoders always read aligned elements.
 */
static void
put_result(struct run *run, const struct tally_hdr *h, const uint8_t *res)
{
	const struct tally_round *r = run->r;
	uint8_t *dst = (uint8_t *)r->dst +
		tally_enc_payload_len(h->enc, h->offset - r->dst_base);
	size_t len = tally_enc_payload_len(h->enc, h->count);

	if (r->decode != NULL && ((uintptr_t)res & 3) == 0) {
		r->decode(r, h->offset, h->count, res);
		return;
	}
	memcpy(dst, res, len);
	if (r->decode != NULL)
		r->decode(r, h->offset, h->count, dst);
}

/* Handles one received packet of len bytes at buf (borrowed). */
static void
take(struct run *run, const uint8_t *buf, uint32_t len, uint64_t now)
{
	struct tally_ctx *ctx = run->ctx;
	struct tally_slot *slot;
	struct tally_hdr h;
	uint32_t next;

	ctx->st.bytes_received += len;
	if (tally_hdr_decode(buf, len, &h) != TALLY_ST_OK ||
			h.job != ctx->job || h.token != ctx->token) {
		ctx->st.duplicates++;
		return;
	}
	if (!tally_lib_authentic(ctx, &h, buf, len))
		return;
	if (h.type == TALLY_PT_NACK) {
		take_nack(run, &h);
		return;
	}
	if ((h.flags & TALLY_F_SEQ) && ctx->rx_seq != NULL &&
			h.slot < ctx->window)
		result_seq(run, &h, now);
	if (!is_outstanding(run, &h) ||
			h.type != answer_type(run, ctx->slots[h.slot].chunk) ||
			h.enc != run->res_enc ||
			h.scale_exp != run->r->scale_exp ||
			(run->per_shard != 0 && h.status !=
				chunk_owner(run, ctx->slots[h.slot].chunk))) {
		tally_lib_late_result(ctx, &h);
		return;
	}
	if (len != tally_pkt_len(h.enc, h.type == TALLY_PT_DONE ? 0 :
			h.count, ctx->mac != NULL)) {
		ctx->st.duplicates++;
		return;
	}
	/* A result (or DONE), first or RETX alike: the chunk is done. */
	if (h.type != TALLY_PT_DONE)
		put_result(run, &h, buf + TALLY_HDR_LEN);
	slot = &ctx->slots[h.slot];
	(void)tally_retx_answered(&ctx->retx, h.slot, now,
		(h.flags & TALLY_F_RETX) != 0);
	slot->busy = 0;
	slot->round++;
	ctx->st.results++;
	run->done++;
	run->progress_ns = now;
	next = slot->chunk + ctx->window;
	if (next < run->nchunks && next > slot->chunk)
		start_chunk(run, h.slot, next, now);
}

/*
 * Handles one received datagram: a packet, or a bundle of DONEs
 * (docs/protocol.md, "Bundles"), each of them taken as if it had come
 * alone.
 */
static void
take_dgram(struct run *run, const uint8_t *buf, uint32_t len, uint64_t now)
{
	unsigned int k = tally_done_bundle_count(buf, len);
	uint32_t stride;

	if (__builtin_expect(k == 1, 1)) {
		take(run, buf, len, now);
		return;
	}
	stride = (uint32_t)tally_bundle_stride(buf);
	for (unsigned int i = 0; i < k && run->err == 0; i++)
		take(run, buf + (size_t)i * stride, stride, now);
}

/* take_dgram() as tally_lib_receive() calls it. */
static void
take_any(void *arg, const uint8_t *buf, uint32_t len, uint64_t now)
{
	take_dgram(arg, buf, len, now);
}

/*
 * Waits until until at most (not at all when it is now or past) for one
 * burst of packets and takes them. Returns how many came.
 */
static int
receive(struct run *run, uint64_t now, uint64_t until)
{
	return tally_lib_receive(run->ctx, now, until, take_any, run,
		&run->err);
}

/* Takes every packet already there, without waiting, and sends what
 * they freed. */
static void
drain(struct run *run)
{
	tally_lib_drain(run->ctx, take_any, run, &run->err);
	flush(run);
}

/*
 * A GATHER round's bundles of requests (docs/protocol.md, "Bundles"),
 * when its members send any (a world above 1): as many headers as the
 * round's largest packet holds, so that a bundle crosses any path its
 * data does, at most TALLY_BUNDLE_MAX. Returns 0, or -ENOMEM with the
 * context's error set; run->bundle (owned) stays NULL without bundles.
 */
static int
bundles(struct run *run)
{
	struct tally_ctx *ctx = run->ctx;
	size_t big = tally_pkt_len(run->r->enc, ctx->elems, ctx->mac != NULL);

	if (run->r->type != TALLY_PT_GATHER || ctx->world < 2)
		return 0;
	run->stride = TALLY_HDR_LEN + (ctx->mac != NULL ? TALLY_TAG_LEN : 0);
	run->bundle_max = (unsigned int)(big / run->stride);
	if (run->bundle_max > TALLY_BUNDLE_MAX)
		run->bundle_max = TALLY_BUNDLE_MAX;
	if (run->bundle_max < 2)
		return 0;
	run->bundle = malloc(TALLY_TP_BURST * sizeof(*run->bundle));
	if (run->bundle == NULL)
		return tally_ctx_fail(ctx, -ENOMEM, "out of memory");
	return 0;
}

/*
 * With every slot in flight, sleeps a while before reading
 * (tally_batch_wait_ns(), batch.h), so that a wake-up takes a batch of
 * results. Returns whether it slept.
 */
static int
batch_wait(struct run *run, uint64_t now, uint64_t limit)
{
	struct tally_ctx *ctx = run->ctx;
	uint64_t d = tally_batch_wait_ns(ctx->retx.srtt_us,
		run->started - run->done, ctx->window,
		run->started < run->nchunks, now, limit);
	struct timespec ts = {
		.tv_sec = (time_t)(d / 1000000000u),
		.tv_nsec = (long)(d % 1000000000u),
	};

	if (d == 0)
		return 0;
	(void)nanosleep(&ts, NULL);	/* EINTR: read the sooner */
	return 1;
}

/*
 * At the call's deadline: takes what has arrived, so that a worker
 * descheduled past it (a loaded host) does not fail with its results
 * waiting in the socket. Returns whether that was progress.
 */
static int
late_progress(struct run *run)
{
	uint32_t done = run->done;

	drain(run);
	return run->done != done || run->err != 0;
}

/* Sends r's chunks through the slots until every one is answered. */
static int
run_chunks(struct run *run)
{
	struct tally_ctx *ctx = run->ctx;
	uint64_t timeout_ns = (uint64_t)ctx->timeout_ms * 1000000u;
	uint64_t now = tally_lib_retx_begin(ctx, ctx->window);
	uint32_t c;

	run->progress_ns = now;
	for (c = 0; c < run->nchunks && c < ctx->window && run->err == 0; c++)
		start_chunk(run, (uint16_t)c, c, now);
	flush(run);
	while (run->done < run->nchunks && run->err == 0) {
		uint64_t until = run->progress_ns + timeout_ns;
		uint64_t next = tally_retx_next(&ctx->retx);

		now = tally_lib_now_ns();
		if (now >= until && !late_progress(run))
			return tally_ctx_fail(ctx, -ETIMEDOUT, "no result from "
				"the dataplane for %u ms (%u of %u chunks "
				"done): a member is missing, or its packets "
				"are dropped (token, source address?)",
				ctx->timeout_ms, run->done, run->nchunks);
		if (now >= until)
			continue;
		if (now >= next) {
			/* Read first: what arrived is not overdue. */
			drain(run);
			if (run->done < run->nchunks && run->err == 0)
				retransmit(run, tally_lib_now_ns());
			continue;
		}
		if (batch_wait(run, now, next < until ? next : until))
			now = tally_lib_now_ns();
		receive(run, now, next < until ? next : until);
		flush(run);
	}
	return run->err;
}

int
tally_window_run(struct tally_ctx *ctx, const struct tally_round *r)
{
	struct run run = {
		.ctx = ctx,
		.r = r,
		.nchunks = (uint32_t)((r->n + ctx->elems - 1) / ctx->elems),
		.res_type = r->type == TALLY_PT_MAX ? TALLY_PT_MAX_RESULT :
			TALLY_PT_SUM_RESULT,
		.res_enc = (uint8_t)(r->type == TALLY_PT_MAX ||
			r->type == TALLY_PT_GATHER ? r->enc :
			tally_enc_result(r->enc, ctx->narrow)),
	};
	int rc;

	if (r->shard != 0) {	/* a round with owners: shard by shard */
		run.per_shard = (uint32_t)((r->shard + ctx->elems - 1) /
			ctx->elems);
		run.nshards = (uint32_t)(r->n / r->shard);
		run.nchunks = run.nshards * run.per_shard;
	}
	rc = bundles(&run);
	if (rc == 0)
		rc = run_chunks(&run);
	free(run.bundle);
	return rc;
}

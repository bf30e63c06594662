/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Block-sparse allreduce (codec "sparse"): only the blocks a worker
 * selected travel, and every block any worker selected comes back summed
 * to everyone (docs/protocol.md, "Block-sparse streams").
 *
 * The tensor is cut into blocks of TALLY_SPARSE_BLOCK elements; slot s
 * carries the blocks b with b mod w == s (w = the window, at most the
 * number of blocks) as a stream of rounds, one block a round, in
 * increasing order. Every rank takes part in every round of every
 * stream: with its block when it selected it, with a header alone when
 * not; each contribution names the sender's next selected block of the
 * stream (next_block), and each result names the smallest of those, the
 * next round's block, so the stream visits exactly the union of the
 * ranks' blocks. Values travel as shared-scale fixed point, so the sums
 * are exact and the same on every rank. One MAX round before the streams
 * agrees on the scale and on every stream's first block: it carries this
 * rank's max |x| and, negated, its first selected block of each stream
 * (so the maximum is the least), and a stream that no rank has a block in
 * takes no round at all.
 *
 * Headers alone (most of the packets) go out in bundles, up to
 * TALLY_BUNDLE_MAX in a datagram (docs/protocol.md, "Bundles"): those a
 * burst of results calls for, per dataplane port, share datagrams.
 *
 * One packet is outstanding per stream; a lost contribution or result is
 * recovered by retransmission (flag RETX), the aggregator answering a
 * counted member with the stored result, as for dense rounds. The
 * streams are retx.c's lanes as the dense slots are, with the same
 * timer: loss inferred from later answers (RACK), the RFC 6298 timer as
 * the last resort; what arrived is read before anything is judged
 * overdue. The tail probe stays off: a stream learns that it is at its
 * end only from its last result.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <tally/feedback.h>
#include <tally/fixp.h>
#include <tally/sparse.h>

#include "ctx.h"

#define B	TALLY_SPARSE_BLOCK
/* A stream's first block in the scale round when a rank has none:
 * above every block index (those are below 2^24). */
#define NO_FIRST	16777216.0f

/* One slot's stream, as this rank runs it. */
struct stream {
	const uint32_t *mine;	/* this rank's blocks of the stream, ascending */
	uint32_t nmine;
	uint32_t pos;		/* the first of mine not yet sent */
	uint32_t offset;	/* element offset of the round in flight */
	uint8_t busy;		/* a round is in flight */
	uint8_t done;
	const void *payload;	/* of the packet in flight; NULL: none */
	uint32_t plen;
	uint8_t hdr[TALLY_HDR_LEN];
	uint8_t tag[TALLY_TAG_LEN]; /* its tag (an authenticated job) */
};

struct srun {
	struct tally_ctx *ctx;
	float *buf;		/* the caller's: in, then the sums */
	const int32_t *q;	/* the encoded tensor */
	size_t n;
	int e;			/* the fixed-point exponent */
	uint32_t w;		/* streams */
	uint32_t left;		/* streams not done */
	struct stream *st;
	uint64_t progress_ns;
	int err;
	unsigned int ntx;
	struct tally_tx_pkt tx[TALLY_TP_BURST];
	/* tx[i]'s bundle of headers alone (each with its tag in an
	 * authenticated job), when iov[1] is empty */
	uint8_t (*bundle)[TALLY_BUNDLE_MAX * (TALLY_HDR_LEN + TALLY_TAG_LEN)];
	size_t stride;		/* bytes a bundled header takes */
};

static void
flush(struct srun *run)
{
	unsigned int n = run->ntx;
	int rc;

	run->ntx = 0;
	if (n == 0 || run->err != 0)
		return;
	rc = tally_transport_send(run->ctx->tp, run->tx, n);
	if (rc < 0)
		run->err = tally_ctx_fail(run->ctx, rc, "%s transport: send: %s",
			run->ctx->tp->name,
			tally_transport_strerror(run->ctx->tp, rc));
}

/*
 * Adds stream s's header alone to a bundle of this burst for the same
 * dataplane port, when one has room. Returns 1 when it did.
 */
static int
join_bundle(struct srun *run, uint16_t s)
{
	unsigned int st = tally_lib_stream(run->ctx, s);

	for (unsigned int i = 0; i < run->ntx; i++) {
		struct tally_tx_pkt *p = &run->tx[i];
		size_t len = p->iov[0].iov_len;

		if (p->iov[1].iov_len != 0 ||
				tally_lib_stream(run->ctx, p->slot) != st ||
				len == TALLY_BUNDLE_MAX * run->stride)
			continue;
		memcpy(run->bundle[i] + len, run->st[s].hdr, TALLY_HDR_LEN);
		memcpy(run->bundle[i] + len + TALLY_HDR_LEN, run->st[s].tag,
			run->stride - TALLY_HDR_LEN);
		p->iov[0].iov_len = len + run->stride;
		/* The first of the bundle counts when it gets company. */
		run->ctx->st.bundled += len == run->stride ? 2 : 1;
		return 1;
	}
	return 0;
}

/*
 * Queues stream s's packet: its block, or its header alone, which goes
 * in a bundle (its header copied) with others of the burst.
 */
static void
queue(struct srun *run, uint16_t s)
{
	struct stream *st = &run->st[s];
	struct tally_tx_pkt *p;

	run->ctx->st.packets_sent++;
	run->ctx->st.bytes_sent += run->stride + st->plen;
	if (st->plen == 0 && join_bundle(run, s))
		return;
	p = &run->tx[run->ntx];
	p->slot = s;
	p->iov[0].iov_base = st->hdr;
	p->iov[0].iov_len = TALLY_HDR_LEN;
	p->iov[1].iov_base = (void *)(uintptr_t)st->payload;
	p->iov[1].iov_len = st->plen;
	p->iov[2].iov_base = st->tag;
	p->iov[2].iov_len = run->stride - TALLY_HDR_LEN;
	if (st->plen == 0) {
		/* The header and its tag, to which others may be added. */
		memcpy(run->bundle[run->ntx], st->hdr, TALLY_HDR_LEN);
		memcpy(run->bundle[run->ntx] + TALLY_HDR_LEN, st->tag,
			run->stride - TALLY_HDR_LEN);
		p->iov[0].iov_base = run->bundle[run->ntx];
		p->iov[0].iov_len = run->stride;
		p->iov[2].iov_len = 0;
	}
	if (++run->ntx == TALLY_TP_BURST)
		flush(run);
}

/*
 * Starts stream s's round on block blk: this rank's block when it
 * selected blk, else the header alone.
 */
static void
contribute(struct srun *run, uint16_t s, uint32_t blk, uint64_t now)
{
	struct tally_ctx *ctx = run->ctx;
	struct stream *st = &run->st[s];
	uint32_t count = 0, off = blk * B;
	struct tally_hdr h;

	if (st->pos < st->nmine && st->mine[st->pos] == blk) {
		count = run->n - off < B ? (uint32_t)(run->n - off) : B;
		st->pos++;
	}
	h = (struct tally_hdr){
		.version = TALLY_PROTO_VERSION,
		.type = TALLY_PT_SUM,
		.flags = (uint8_t)(TALLY_F_SPARSE |
			(ctx->slots[s].round & 1 ? TALLY_F_SET : 0) |
			(ctx->mac != NULL ? TALLY_F_AUTH : 0)),
		.enc = TALLY_ENC_I32,
		.job = ctx->job,
		.token = ctx->token,
		.rank = ctx->rank,
		.slot = s,
		.offset = off,
		.count = (uint16_t)count,
		.scale_exp = (int16_t)run->e,
		.next_block = st->pos < st->nmine ? st->mine[st->pos] :
			TALLY_NO_BLOCK,
		.round = ctx->slots[s].round,
	};
	tally_hdr_encode(&h, st->hdr);
	if (ctx->mac != NULL)
		tally_lib_sign(ctx, st->hdr, run->q + off, count * 4u, st->tag);
	st->offset = off;
	st->payload = count > 0 ? run->q + off : NULL;
	st->plen = count * 4;
	st->busy = 1;
	tally_retx_sent(&ctx->retx, s, now);
	queue(run, s);
}

/*
 * Resends what retx.c finds lost or overdue at now (call it only with
 * every arrived result taken), flushing at once.
 */
static void
retransmit(struct srun *run, uint64_t now)
{
	struct tally_ctx *ctx = run->ctx;
	unsigned int k = tally_retx_poll(&ctx->retx, now, ctx->due, run->w);

	for (unsigned int i = 0; i < k; i++) {
		run->st[ctx->due[i]].hdr[4] |= TALLY_F_RETX;
		ctx->st.retransmits++;
		queue(run, (uint16_t)ctx->due[i]);
	}
	flush(run);
}

/*
 * Decodes a result's count sums at res into x. A transport may lend a
 * packet at any address (the UDP transport's GRO staging: a segment
 * after odd-sized ones), and the decoder reads aligned int32s: a payload
 * that is not aligned goes through the stack, a block at a time.
 */
static void
decode_sums(const uint8_t *res, float *x, uint32_t count, int e)
{
	int32_t q[B];

	if (((uintptr_t)res & 3) == 0) {
		tally_fixp_decode((const int32_t *)(const void *)res, x, count,
			e);
		return;
	}
	for (uint32_t i = 0; i < count; i += B) {
		uint32_t k = count - i < B ? count - i : B;

		memcpy(q, res + (size_t)i * 4, (size_t)k * 4);
		tally_fixp_decode(q, x + i, k, e);
	}
}

/* Handles one received packet (borrowed). */
static void
take(struct srun *run, const uint8_t *buf, uint32_t len, uint64_t now)
{
	struct tally_ctx *ctx = run->ctx;
	struct stream *st;
	struct tally_hdr h;

	ctx->st.bytes_received += len;
	if (tally_hdr_decode(buf, len, &h) != TALLY_ST_OK ||
			h.job != ctx->job || h.token != ctx->token ||
			h.slot >= run->w) {
		ctx->st.duplicates++;
		return;
	}
	if (!tally_lib_authentic(ctx, &h, buf, len))
		return;
	st = &run->st[h.slot];
	if (h.type == TALLY_PT_NACK) {
		ctx->st.nacks++;
		if (h.rank == ctx->rank && st->busy && h.offset == st->offset &&
				h.round == ctx->slots[h.slot].round)
			run->err = tally_ctx_fail(ctx, -EPROTO, "dataplane "
				"refused the sparse block at offset %u (slot "
				"%u): %s", h.offset, h.slot,
				tally_status_name(h.status));
		return;
	}
	if (h.type != TALLY_PT_SUM_RESULT || h.enc != TALLY_ENC_I32 ||
			!(h.flags & TALLY_F_SPARSE) || !st->busy ||
			h.round != ctx->slots[h.slot].round ||
			h.offset != st->offset || h.scale_exp != run->e ||
			len != tally_pkt_len(TALLY_ENC_I32, h.count,
				ctx->mac != NULL) ||
			(h.count > 0 && ((size_t)h.offset + h.count > run->n))) {
		tally_lib_late_result(ctx, &h);
		return;
	}
	/* The round is done: its sums (if any rank had the block), then on. */
	if (h.count > 0)
		decode_sums(buf + TALLY_HDR_LEN, run->buf + h.offset, h.count,
			run->e);
	st->busy = 0;
	(void)tally_retx_answered(&ctx->retx, h.slot, now,
		(h.flags & TALLY_F_RETX) != 0);
	ctx->slots[h.slot].round++;
	ctx->st.results++;
	run->progress_ns = now;
	if (h.next_block == TALLY_NO_BLOCK) {
		st->done = 1;
		run->left--;
		return;
	}
	if (h.next_block % run->w != h.slot ||
			(size_t)h.next_block * B >= run->n) {
		run->err = tally_ctx_fail(ctx, -EPROTO, "the dataplane named "
			"block %u for slot %u: not one of its stream",
			h.next_block, h.slot);
		return;
	}
	contribute(run, h.slot, h.next_block, now);
}

/* take() as tally_lib_receive() calls it. */
static void
take_any(void *arg, const uint8_t *buf, uint32_t len, uint64_t now)
{
	take(arg, buf, len, now);
}

/* Waits until until at most for one burst and takes it; says how many
 * came. */
static int
receive(struct srun *run, uint64_t now, uint64_t until)
{
	return tally_lib_receive(run->ctx, now, until, take_any, run,
		&run->err);
}

/* Takes every packet already there, without waiting, and sends what
 * they freed. */
static void
drain(struct srun *run)
{
	tally_lib_drain(run->ctx, take_any, run, &run->err);
	flush(run);
}

/*
 * At the call's deadline: takes what has arrived, so that a worker
 * descheduled past it does not fail with its results waiting in the
 * socket. Returns whether that was progress.
 */
static int
late_progress(struct srun *run)
{
	uint64_t progress = run->progress_ns;

	drain(run);
	return run->progress_ns != progress || run->err != 0;
}

/*
 * The streams' rounds, from each one's first block (first[s], the least
 * any rank selected; NO_FIRST: none, the stream is done) to the last.
 */
static int
run_streams(struct srun *run, const float *first)
{
	struct tally_ctx *ctx = run->ctx;
	uint64_t timeout_ns = (uint64_t)ctx->timeout_ms * 1000000u;
	uint64_t now = tally_lib_retx_begin(ctx, run->w);

	run->progress_ns = now;
	for (uint32_t s = 0; s < run->w && run->err == 0; s++) {
		if (-first[s] == NO_FIRST) {
			run->st[s].done = 1;
			run->left--;
		} else {
			contribute(run, (uint16_t)s, (uint32_t)-first[s], now);
		}
	}
	flush(run);
	while (run->left > 0 && run->err == 0) {
		uint64_t next = tally_retx_next(&ctx->retx);
		uint64_t until = run->progress_ns + timeout_ns;

		now = tally_lib_now_ns();
		if (now >= until && !late_progress(run))
			return tally_ctx_fail(ctx, -ETIMEDOUT, "no sparse result "
				"from the dataplane for %u ms (%u of %u streams "
				"done): a member is missing, or its packets are "
				"dropped", ctx->timeout_ms, run->w - run->left,
				run->w);
		if (now >= until)
			continue;
		if (now >= next) {
			/* Read first: what arrived is not overdue. */
			drain(run);
			if (run->left > 0 && run->err == 0)
				retransmit(run, tally_lib_now_ns());
			continue;
		}
		receive(run, now, next < until ? next : until);
		flush(run);
	}
	return run->err;
}

/*
 * What sending the selected blocks leaves of them: resid - sent, sent
 * being each block's fixed-point value at q (encoded from resid's
 * values, which buf holds too); mom zeroed there when not NULL.
 */
static void
take_sent(float *resid, float *mom, const int32_t *q, const uint32_t *blocks,
	size_t nsel, size_t n, int e)
{
	float own[B];

	for (size_t i = 0; i < nsel; i++) {
		size_t off = (size_t)blocks[i] * B;
		size_t cnt = n - off < B ? n - off : B;

		tally_fixp_decode(q + off, own, cnt, e);
		(void)tally_ef_update(resid + off, resid + off, own, cnt);
		if (mom != NULL)
			memset(mom + off, 0, cnt * sizeof(*mom));
	}
}

/*
 * The scale round: vals[0] is this rank's largest magnitude, vals[1 + s]
 * minus its first selected block of stream s (-NO_FIRST: none). Their
 * maxima over the ranks come back in place: the global max |x|, and
 * minus each stream's least first block. Block indices are below 2^24
 * (n < 2^32), so floats hold them exactly.
 */
static int
scale_round(struct srun *run, float *vals)
{
	struct tally_round r = {
		.type = TALLY_PT_MAX, .enc = TALLY_ENC_F32,
		.src = vals, .dst = vals, .n = (size_t)run->w + 1,
	};

	for (uint32_t s = 0; s < run->w; s++)
		vals[1 + s] = -(run->st[s].nmine > 0 ?
			(float)run->st[s].mine[0] : NO_FIRST);
	return tally_lib_run(run->ctx, &r);
}

int
tally_lib_allreduce_sparse(struct tally_ctx *ctx, float *buf, size_t n,
	const float *bmax, float *resid, float *mom)
{
	struct tally_sparse_params p = { .seed = ctx->codec.seed };
	size_t nblocks = TALLY_SPARSE_NBLOCKS(n);
	uint32_t *blocks = NULL, *bystream = NULL, *count = NULL;
	struct srun run = { .ctx = ctx, .buf = buf, .n = n,
		.stride = TALLY_HDR_LEN + (ctx->mac != NULL ? TALLY_TAG_LEN : 0) };
	float thr, *vals = NULL;
	size_t nsel = 0;
	int rc;

	run.w = ctx->window < nblocks ? ctx->window : (uint32_t)nblocks;
	run.left = run.w;
	blocks = malloc(nblocks * sizeof(*blocks));
	bystream = malloc(nblocks * sizeof(*bystream));
	count = calloc((size_t)run.w + 1, sizeof(*count));
	run.st = calloc(run.w, sizeof(*run.st));
	run.bundle = malloc(TALLY_TP_BURST * sizeof(*run.bundle));
	vals = malloc(((size_t)run.w + 1) * sizeof(*vals));
	if (blocks == NULL || bystream == NULL || count == NULL ||
			run.st == NULL || run.bundle == NULL || vals == NULL) {
		rc = tally_ctx_fail(ctx, -ENOMEM, "out of memory for %zu "
			"blocks", nblocks);
		goto out;
	}
	/*
	 * This rank's blocks: the codec's density is the fraction of blocks
	 * kept, so the estimator works on the blocks' largest magnitudes; a
	 * block goes when its largest reaches the threshold.
	 */
	rc = tally_sparse_threshold(bmax, nblocks, ctx->codec.density,
		(enum tally_sparse_est)ctx->codec.est, &p, &thr);
	if (rc != 0) {
		rc = tally_ctx_fail(ctx, rc, "block selection: %s",
			strerror(-rc));
		goto out;
	}
	/* A block holds an element >= thr iff its largest does. */
	vals[0] = 0.0f;
	for (size_t b = 0; b < nblocks; b++) {
		if (bmax[b] >= thr)
			blocks[nsel++] = (uint32_t)b;
		vals[0] = bmax[b] > vals[0] ? bmax[b] : vals[0];
	}
	/* Grouped by stream, each group ascending (a counting sort). */
	for (size_t i = 0; i < nsel; i++)
		count[blocks[i] % run.w + 1]++;
	for (uint32_t s = 0; s < run.w; s++)
		count[s + 1] += count[s];
	for (uint32_t s = 0; s < run.w; s++) {
		run.st[s].mine = bystream + count[s];
		run.st[s].nmine = count[s + 1] - count[s];
	}
	for (size_t i = 0; i < nsel; i++)
		bystream[count[blocks[i] % run.w]++] = blocks[i];
	rc = scale_round(&run, vals);
	if (rc != 0)
		goto out;
	/* An infinity: nothing was sent, the context stays usable. */
	if (tally_fixp_exponent(vals[0], ctx->world, &run.e) != 0) {
		rc = tally_ctx_fail(ctx, -ERANGE, "the largest |x| over all "
			"ranks is %g: no fixed-point scale for it", vals[0]);
		goto out;
	}
	/* The selected blocks as fixed point; the sums come back over zeros. */
	for (size_t i = 0; i < nsel; i++) {
		size_t off = (size_t)blocks[i] * B;

		tally_fixp_encode(buf + off, ctx->fixp + off, n - off < B ?
			n - off : B, run.e);
	}
	run.q = ctx->fixp;
	if (resid != NULL)
		take_sent(resid, mom, ctx->fixp, blocks, nsel, n, run.e);
	memset(buf, 0, n * sizeof(*buf));
	rc = run_streams(&run, vals + 1);
out:
	free(blocks);
	free(bystream);
	free(count);
	free(run.st);
	free(run.bundle);
	free(vals);
	return rc;
}

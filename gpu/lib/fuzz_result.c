/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libFuzzer target fuzz-result: what a worker does with any datagram that
 * reaches its socket.
 *
 * A context of world 2 (rank 0) runs a few calls (an i32 allreduce, an
 * f32 fixed-point allreduce, a block-sparse allreduce, an i32
 * reduce-scatter, an i32 allreduce again, an i32 all-gather, a bf16
 * broadcast from rank 1, and through the q8 codec an f32 allreduce, an
 * f32 reduce-scatter and the lossy f32 all-gather) over a transport of
 * this file's own, toward a dataplane of two ports: what the context
 * sends goes to the real engine (tally_agg_process()) in-process, with
 * rank 1's contribution made from rank 0's packet (the same values, its
 * own rank and tag: every sum is twice the input, the q8 calls' twice
 * rank 0's encoding), and the engine's answers to rank 0 are queued for
 * the context to receive, DONEs bundled as tally-dp bundles them. In a
 * GATHER round rank 1 sends a request where rank 0 sends data, and data
 * where rank 0 asks for it: in the all-gathers its shard holds the
 * values of rank 0's, so it sends the bytes rank 0 sent at the same
 * place of its own shard (kept as they pass: rank 0 sends a chunk of its
 * shard before it asks for that of rank 1's), in the broadcast the
 * harness's own tensor. The q8 allreduce and reduce-scatter run with the
 * context's codec swapped for q8 (a context has one codec, and the
 * block-sparse call needs its own). No sockets, no threads: the
 * context's receive never waits, answers are there as soon as the
 * packets that call for them are sent. Nor real time: the context's
 * clock (tally_lib_clock) is the harness's, which moves 1 us a reading
 * and, when a receive finds nothing where the context would have
 * waited, by that wait, so that a plain job's call the input put out
 * of step ends at its deadline at once, and every run of an input
 * sees the same times.
 *
 * The input's first byte picks the job (bit 0: an authenticated one);
 * the rest is a run of datagrams to inject into the receive queue, each
 * framed as
 *   sel (1 byte) | len (2 bytes, little-endian) | len bytes
 * (a last frame shorter than its len takes what is left). sel's bits:
 *   0-2  how many of the engine's answers go before it (counted from
 *        the datagram injected before; when the context waits with
 *        nothing else queued it goes at once);
 *   3    lent at an odd address, as the UDP transport's GRO staging
 *        lends a segment after odd-sized ones;
 *   4-5  what it is: the bytes (0, 3); an answer with the rest XORed
 *        over it and appended past its end (1), the first byte picking
 *        it: below 128 one of the last received, counting back from the
 *        latest, else one of those still queued, counting forward (an
 *        on-path attacker sees them first); or that answer cut to the
 *        length of the next two bytes, modulo its own (2);
 *   6    the receive ends its burst after it;
 *   7    it is copied into the context's buffer, as kernel UDP does;
 *        else lent where it ends its allocation, as the UDP transport's
 *        GRO staging lends (ASan sees any read past it).
 *
 * What must hold, besides ASan and UBSan: in the authenticated job every
 * call returns 0 with the very bits of a run without injections (whose
 * sums are checked against twice the input, the q8 calls' within the
 * codec's error of it, and whose gathers against the shards sent),
 * since nothing the fuzzer makes carries a right tag, and a genuine
 * answer copied, early or late, carries the same bits; in the plain job
 * a call returns 0, -EPROTO, -ETIMEDOUT or -ERANGE with a sentence in
 * tally_ctx_error(), and once a call failed otherwise than -ERANGE every
 * later one says -EPIPE (the context is out of step: close it). In
 * both, when every call returned 0, the context's counters account for
 * every datagram it received: bytes_received is their bytes, and
 * results, duplicates, stale, forged and nacks count each packet once (a
 * datagram that looks like a bundle of DONEs counting as one packet or
 * as its entries), and ignored each empty datagram.
 */
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <tally/codec.h>
#include <tally/mac.h>
#include <tally/proto.h>
#include <tally/quant.h>
#include <tally/tally.h>

#include "agg/agg.h"
#include "agg/job.h"
#include "agg/jobtab.h"
#include "lib/ctx.h"

#define FUZZ_NAME "fuzz-result"
#include "fuzz_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define WINDOW		2
#define ELEMS		256	/* sparse blocks need this many a packet */
#define N_I32		600	/* three chunks: slot 0 twice */
#define N_F32		300
#define N_SPARSE	1024	/* four blocks, two streams */
#define N_RS		(N_I32 / 2)	/* a rank's shard: two chunks */
#define N_AG		300	/* all-gather's shard: two chunks */
#define N_BC		301	/* broadcast: two chunks, the last odd */
#define N_Q8		600	/* q8 allreduce: three chunks */
#define N_Q8RS		(N_Q8 / 2)	/* q8 reduce-scatter's shard */
#define N_Q8AG		300	/* q8 all-gather's shard, in floats */
/*
 * The q8 all-gather's shard on the wire, in bytes (gatherq.c): a chunk
 * of ELEMS bytes is a 4-byte scale and ELEMS - 4 values.
 */
#define Q8AG_SHARD	(4 * ((N_Q8AG + ELEMS - 5) / (ELEMS - 4)) + N_Q8AG)
#define NPORTS		2	/* the dataplane's ports: two streams */
#define MAX_INJ		512	/* datagrams injected, at most */
#define HISTORY		16	/* answers kept for copies */
#define PKT_MAX		(TALLY_HDR_LEN + 4 * ELEMS + TALLY_TAG_LEN)
#define RANK_OFF	16	/* the wire header's rank byte */
#define FLAGS_OFF	4
#define TYPE_OFF	3

enum { JOB_PLAIN, JOB_AUTH, NJOBS };

/* The calls of an input, in order. */
enum {
	C_I32,		/* tally_allreduce_i32() */
	C_F32,		/* tally_allreduce_f32() */
	C_SPARSE,	/* tally_allreduce(), the job's block-sparse codec */
	C_RS,		/* i32 tally_reduce_scatter() */
	C_I32_AGAIN,	/* tally_allreduce_i32() again */
	C_AG,		/* i32 tally_allgather() */
	C_BCAST,	/* bf16 tally_broadcast() from rank 1 */
	C_Q8,		/* tally_allreduce() through q8 */
	C_Q8RS,		/* f32 tally_reduce_scatter() through q8 */
	C_Q8AG,		/* f32 tally_allgather(), the q8 all-gather */
	NCALLS
};

/* The engine's jobs: world 2, members at any address. */
static struct tally_job_conf confs[NJOBS] = {
	{ .id = 21, .token = UINT64_C(0x1122334455667788), .world = 2,
	  .window = WINDOW, .max_elems = ELEMS, .nports = NPORTS },
	{ .id = 22, .token = UINT64_C(0x8877665544332211), .world = 2,
	  .window = WINDOW, .max_elems = ELEMS, .auth = 1,
	  .nports = NPORTS },
};

static const struct tally_addr worker_addr = { 0x0100007f, 0x3930 };
static const struct tally_addr peer_addr = { 0x0200007f, 0x3930 };

/* A datagram: queued, kept, or lent to the context. */
struct dgram {
	uint8_t *buf;
	uint32_t len;
	uint8_t *base;		/* its allocation: buf, or buf - 1 */
};

/* One injection of the input. */
struct inj {
	uint8_t sel;
	const uint8_t *data;
	uint32_t len;
};

/* The harness: the transport the context holds, and the engine's side. */
struct harness {
	struct tally_transport tp;
	int job;			/* JOB_PLAIN or JOB_AUTH */
	struct dgram *queue;		/* the engine's answers, in order */
	unsigned int qhead, qtail, qcap;
	struct dgram hist[HISTORY];	/* answers received, latest last */
	unsigned int nhist;
	struct dgram lent[TALLY_TP_BURST]; /* on the last receive */
	unsigned int nlent;
	struct inj inj[MAX_INJ];
	unsigned int ninj, next_inj;
	unsigned int since;		/* answers received since the last
					 * injection */
	/* The call's GATHER data of rank 1, in its round's encoding: */
	const uint8_t *peer_data;	/* its bytes (NULL: none) */
	size_t peer_base, peer_n;	/* its wire elements */
	uint8_t mirror[4 * N_AG];	/* rank 0's own shard as it went */
	size_t mirrored;		/* its bytes so far */
	/* Of what the context received (len > 0): */
	uint64_t bytes, pkts_min, pkts_max;
	uint64_t empty;			/* datagrams of no byte */
};

static struct tally_job *jobs[NJOBS];
static struct tally_jobtab *tab;
static struct tally_mac_key peer_up[NJOBS];	/* rank 1's up key */
static struct tally_auth_keys worker_keys;

/* The calls' inputs. */
static int32_t in_i32[N_I32];
static float in_f32[N_F32];
static float in_sparse[N_SPARSE];
static uint16_t in_bc[N_BC];		/* rank 1's broadcast */
static float in_q8[N_Q8];

static struct tally_codec codec_q8;	/* the q8 calls' */

/*
 * A datagram of len bytes, zeroed, ending its allocation (ASan sees a
 * read past it), at an odd address when odd is set.
 */
static struct dgram
new_dgram(size_t len, int odd)
{
	struct dgram d;

	d.base = calloc(1, len + (odd ? 1 : 0) + (len == 0));
	CHECK(d.base != NULL);
	d.buf = d.base + (odd ? 1 : 0);
	d.len = (uint32_t)len;
	return d;
}

/* A copy of len bytes at p. */
static struct dgram
dup_bytes(const void *p, size_t len)
{
	struct dgram d = new_dgram(len, 0);

	if (len > 0)
		memcpy(d.buf, p, len);
	return d;
}

/*
 * Adds the DONE at buf (len bytes: a header and its tag) to the answer
 * queued last when that is a DONE or a bundle of them not yet received
 * with room, as tally-dp bundles a member's DONEs (docs/protocol.md,
 * "Bundles"). Returns whether it did.
 */
static int
join_done(struct harness *h, const uint8_t *buf, size_t len)
{
	struct dgram *last, d;

	if (h->qtail == h->qhead)
		return 0;
	last = &h->queue[h->qtail - 1];
	if (last->buf[TYPE_OFF] != TALLY_PT_DONE ||
			tally_bundle_stride(last->buf) != len ||
			last->len % len != 0 ||
			last->len + len > TALLY_BUNDLE_MAX * len)
		return 0;
	d = new_dgram(last->len + len, 0);
	memcpy(d.buf, last->buf, last->len);
	memcpy(d.buf + last->len, buf, len);
	free(last->base);
	*last = d;
	return 1;
}

/* Queues an answer to rank 0: hdr, payload, tag (NULL: none). */
static void
answer(struct harness *h, const struct tally_hdr *hdr, const void *payload,
	size_t plen, const uint8_t *tag)
{
	uint8_t buf[PKT_MAX];
	size_t len = TALLY_HDR_LEN + plen;

	CHECK(len + TALLY_TAG_LEN <= sizeof(buf));
	tally_hdr_encode(hdr, buf);
	if (plen > 0)
		memcpy(buf + TALLY_HDR_LEN, payload, plen);
	if (tag != NULL) {
		memcpy(buf + len, tag, TALLY_TAG_LEN);
		len += TALLY_TAG_LEN;
	}
	if (hdr->type == TALLY_PT_DONE && join_done(h, buf, len))
		return;
	if (h->qtail == h->qcap) {
		h->qcap = h->qcap ? 2 * h->qcap : 64;
		h->queue = realloc(h->queue, h->qcap * sizeof(*h->queue));
		CHECK(h->queue != NULL);
	}
	h->queue[h->qtail++] = dup_bytes(buf, len);
}

/* One packet from rank (0: the context, 1: the harness) to the engine. */
static void
engine(struct harness *h, const uint8_t *pkt, unsigned int len,
	unsigned int rank)
{
	static struct tally_agg_stats st;
	struct tally_verdict v, g;
	enum tally_verdict_kind k;

	k = tally_agg_process(tab, &st, pkt, len,
		rank == 0 ? &worker_addr : &peer_addr, &v);
	if (rank == 0 && v.gap_n != 0 &&
			tally_agg_gap(&v, pkt, len, &g) == TALLY_V_NACK)
		answer(h, &g.hdr, NULL, 0, g.tagged ? g.tag : NULL);
	switch (k) {
	case TALLY_V_COMPLETE:
		if (v.part && !(v.data_mask & 1))
			answer(h, &v.done, NULL, 0,
				v.tagged ? v.done_tag : NULL);
		else
			answer(h, &v.hdr, v.payload, v.payload_len,
				v.tagged ? v.tag : NULL);
		break;
	case TALLY_V_RESEND:
	case TALLY_V_NACK:
		if (rank == 0)
			answer(h, &v.hdr, v.payload, v.payload_len,
				v.tagged ? v.tag : NULL);
		break;
	default:
		break;
	}
}

/*
 * Rank 1's GATHER packet for rank 0's (pkt) in copy (its header there,
 * rank 1's): a request (no payload) where rank 0 sent its data, which
 * goes to the mirror at the same place; where rank 0 asked for rank 1's
 * chunk, its data from the call's peer_data. Returns its length with
 * room for the tag, or 0 when pkt is not a GATHER the call sends.
 */
static unsigned int
gather_peer(struct harness *h, const uint8_t *pkt, unsigned int len,
	uint8_t *copy)
{
	struct tally_hdr hd;
	size_t at, plen;

	if (tally_hdr_decode(pkt, len, &hd) != TALLY_ST_OK)
		return 0;
	/* What the context sends is well formed: a shard of this call. */
	CHECK(hd.status <= 1 && hd.count >= 1);
	plen = tally_enc_payload_len(hd.enc, hd.count);
	if (hd.status == 0) {
		at = tally_enc_payload_len(hd.enc, hd.offset);
		CHECK(at + plen <= sizeof(h->mirror) &&
			TALLY_HDR_LEN + plen <= len);
		memcpy(h->mirror + at, pkt + TALLY_HDR_LEN, plen);
		if (at + plen > h->mirrored)
			h->mirrored = at + plen;
		plen = 0;
	} else {
		CHECK(h->peer_data != NULL && hd.offset >= h->peer_base &&
			hd.offset - h->peer_base + hd.count <= h->peer_n);
		at = tally_enc_payload_len(hd.enc, hd.offset - h->peer_base);
		/* Rank 0 sent this chunk of its own shard first. */
		CHECK(h->peer_data != h->mirror || at + plen <= h->mirrored);
		memcpy(copy + TALLY_HDR_LEN, h->peer_data + at, plen);
	}
	return (unsigned int)(TALLY_HDR_LEN + plen +
		(h->job == JOB_AUTH ? TALLY_TAG_LEN : 0));
}

/*
 * Rank 1's copy of rank 0's fresh packet: its rank, and in an
 * authenticated job its own tag.
 */
static void
peer(struct harness *h, const uint8_t *pkt, unsigned int len)
{
	uint8_t copy[PKT_MAX];
	int auth = h->job == JOB_AUTH;
	size_t plen;

	if (len < TALLY_HDR_LEN + (auth ? TALLY_TAG_LEN : 0) ||
			len > sizeof(copy))
		return;
	memcpy(copy, pkt, len);
	copy[RANK_OFF] = 1;
	if (pkt[TYPE_OFF] == TALLY_PT_GATHER) {
		len = gather_peer(h, pkt, len, copy);
		if (len == 0)
			return;
	}
	if (auth) {
		plen = len - TALLY_HDR_LEN - TALLY_TAG_LEN;
		tally_mac_tag(&peer_up[h->job], TALLY_MAC_UP, copy,
			copy + TALLY_HDR_LEN, plen, copy + len - TALLY_TAG_LEN);
	}
	engine(h, copy, len, 1);
}

/* The context's clock, in ns (tally_lib_clock). */
static uint64_t fz_now = 1000000000u;

static uint64_t
fz_clock(void)
{
	return fz_now += 1000;
}

static struct harness *
harness_of(struct tally_transport *tp)
{
	return (struct harness *)tp;
}

/* Every packet the context sends, a bundle's one by one, as tally-dp. */
static int
fz_send(struct tally_transport *tp, const struct tally_tx_pkt *pkts,
	unsigned int n)
{
	struct harness *h = harness_of(tp);

	CHECK(n >= 1 && n <= TALLY_TP_BURST);
	for (unsigned int i = 0; i < n; i++) {
		uint8_t buf[TALLY_BUNDLE_MAX * (TALLY_HDR_LEN +
			TALLY_TAG_LEN) + PKT_MAX];
		size_t len = 0, stride;
		unsigned int k;

		for (int j = 0; j < 3; j++) {
			size_t l = pkts[i].iov[j].iov_len;

			CHECK(len + l <= sizeof(buf));
			if (l > 0)
				memcpy(buf + len, pkts[i].iov[j].iov_base, l);
			len += l;
		}
		CHECK(pkts[i].slot < WINDOW);
		k = tally_bundle_count(buf, len);
		stride = k > 1 ? tally_bundle_stride(buf) : len;
		for (unsigned int b = 0; b < k; b++) {
			const uint8_t *one = buf + b * stride;

			/* What the context sends is well formed. */
			CHECK(stride >= TALLY_HDR_LEN && one[RANK_OFF] == 0);
			engine(h, one, (unsigned int)stride, 0);
			if (!(one[FLAGS_OFF] & TALLY_F_RETX))
				peer(h, one, (unsigned int)stride);
		}
	}
	return (int)n;
}

/*
 * The answer an injection copies: data[0] below 128 counts back from the
 * latest received, else forward through those queued (an on-path
 * attacker sees them first). NULL: none there.
 */
static const struct dgram *
pick(const struct harness *h, uint8_t b)
{
	unsigned int n = h->nhist < HISTORY ? h->nhist : HISTORY;
	unsigned int q = h->qtail - h->qhead;

	if (b >= 128 && q > 0)
		return &h->queue[h->qhead + (b - 128u) % q];
	if (n == 0)
		return q > 0 ? &h->queue[h->qhead] : NULL;
	return &h->hist[(h->nhist - 1 - b % n) % HISTORY];
}

/* The datagram injection in stands for (a fresh allocation). */
static struct dgram
make_inj(const struct harness *h, const struct inj *in)
{
	const struct dgram *src;
	unsigned int kind = in->sel >> 4 & 3;
	struct dgram d;

	if (kind == 0 || kind == 3 || in->len == 0 ||
			(src = pick(h, in->data[0])) == NULL)
		return dup_bytes(in->data, in->len);
	if (kind == 2) {
		uint32_t cut = in->len >= 3 ? (uint32_t)(in->data[1] |
			in->data[2] << 8) : in->data[0];

		return dup_bytes(src->buf, cut % (src->len + 1));
	}
	d = new_dgram(src->len > in->len - 1 ? src->len : in->len - 1, 0);
	memcpy(d.buf, src->buf, src->len);
	for (uint32_t i = 0; i + 1 < in->len; i++)
		d.buf[i] ^= in->data[i + 1];
	return d;
}

/* Hands d (taken over) to the context in p: copied, or lent (at an odd
 * address when odd is set). */
static void
deliver(struct harness *h, struct tally_rx_pkt *p, struct dgram d, int copy,
	int odd)
{
	uint32_t len = d.len < p->room ? d.len : p->room;

	if (copy) {
		memcpy(p->buf, d.buf, len);
		free(d.base);
	} else {
		if (odd) {
			struct dgram o = new_dgram(d.len, 1);

			memcpy(o.buf, d.buf, d.len);
			free(d.base);
			d = o;
		}
		p->buf = d.buf;
		h->lent[h->nlent++] = d;
	}
	p->len = len;
	if (len > 0) {
		unsigned int k = tally_done_bundle_count(p->buf, len);

		h->bytes += len;
		h->pkts_min++;
		h->pkts_max += k;
	} else {
		h->empty++;
	}
}

/* Keeps a copy of the answer d among the last HISTORY. */
static void
remember(struct harness *h, const struct dgram *d)
{
	struct dgram *slot = &h->hist[h->nhist % HISTORY];

	if (h->nhist >= HISTORY)
		free(slot->base);
	*slot = dup_bytes(d->buf, d->len);
	h->nhist++;
}

/*
 * The queue as the input interleaves it: the next injection once as
 * many answers as it asks for went before it (or at once when the
 * context would wait for nothing), else the next answer. Never waits.
 */
static int
fz_recv(struct tally_transport *tp, struct tally_rx_pkt *pkts,
	unsigned int n, unsigned int timeout_us)
{
	struct harness *h = harness_of(tp);
	unsigned int k = 0;

	CHECK(n >= 1 && n <= TALLY_TP_BURST);
	for (unsigned int i = 0; i < h->nlent; i++)
		free(h->lent[i].base);
	h->nlent = 0;
	while (k < n) {
		const struct inj *in = h->next_inj < h->ninj ?
			&h->inj[h->next_inj] : NULL;
		int queued = h->qhead < h->qtail;

		if (in != NULL && (h->since >= (in->sel & 7u) ||
				(!queued && k == 0 && timeout_us > 0))) {
			deliver(h, &pkts[k++], make_inj(h, in),
				in->sel & 0x80, in->sel & 0x08);
			h->next_inj++;
			h->since = 0;
			if (in->sel & 0x40)
				break;
		} else if (queued) {
			struct dgram d = h->queue[h->qhead++];

			remember(h, &d);
			deliver(h, &pkts[k++], d, 0, 0);
			h->since++;
		} else {
			break;
		}
	}
	if (k == 0)	/* as if it had waited the whole wait */
		fz_now += (uint64_t)timeout_us * 1000;
	return (int)k;
}

static int
fz_local(struct tally_transport *tp, uint32_t *ip, uint16_t *port)
{
	(void)tp;
	*ip = worker_addr.ip;
	*port = worker_addr.port;
	return 0;
}

static void
fz_destroy(struct tally_transport *tp)
{
	(void)tp;	/* the harness frees its own */
}

static const struct tally_transport_ops fz_ops = {
	.send = fz_send, .recv = fz_recv, .local = fz_local,
	.destroy = fz_destroy,
};

static void
harness_free(struct harness *h)
{
	for (unsigned int i = h->qhead; i < h->qtail; i++)
		free(h->queue[i].base);
	free(h->queue);
	for (unsigned int i = 0; i < h->nhist && i < HISTORY; i++)
		free(h->hist[i].base);
	for (unsigned int i = 0; i < h->nlent; i++)
		free(h->lent[i].base);
}

/*
 * Opens the context of job j over h's transport: a UDP context (its
 * socket kept aside, closed with it) whose transport is swapped.
 */
static struct tally_ctx *
open_ctx(struct harness *h, int j, struct tally_transport **udp)
{
	struct tally_ctx_opts o = {
		.dp_addr = "127.0.0.1", .bind_addr = "127.0.0.1",
		.job = confs[j].id, .token = confs[j].token,
		.rank = 0, .world = 2, .window = WINDOW, .elems = ELEMS,
		.dp_nports = NPORTS,
		.codec = "sparse,density=0.5,est=topk",
		/*
		 * Nothing is lost here: retransmissions go only when the
		 * input holds a chunk back. A plain job that the input
		 * put out of step may wait for nothing: briefly.
		 */
		.rto_us = 1000,
		.timeout_ms = j == JOB_AUTH ? 2000 : 10,
		.auth = j == JOB_AUTH ? &worker_keys : NULL,
	};
	struct tally_ctx *ctx;

	CHECK(tally_ctx_open(&o, &ctx) == 0);
	CHECK(tally_ctx_set_allgather_codec(ctx, 8) == 0);
	h->tp = (struct tally_transport){ .ops = &fz_ops, .name = "fuzz" };
	h->job = j;
	*udp = ctx->tp;
	ctx->tp = &h->tp;
	return ctx;
}

static void
close_ctx(struct tally_ctx *ctx, struct tally_transport *udp)
{
	ctx->tp = udp;
	tally_ctx_close(ctx);
}

/* The calls' outputs. */
struct out {
	int32_t i32[N_I32];
	float f32[N_F32];
	float sp[N_SPARSE];
	int32_t rs[N_RS];
	int32_t ag[2 * N_AG];
	uint16_t bc[N_BC];
	float q8[N_Q8];
	float q8rs[N_Q8RS];
	float q8ag[2 * N_Q8AG];
};

#define OUT(f)	{ offsetof(struct out, f), sizeof(((struct out *)0)->f) }

/* What call i writes: its bytes of struct out. */
static const struct {
	size_t off, len;
} outs[NCALLS] = {
	[C_I32] = OUT(i32), [C_F32] = OUT(f32), [C_SPARSE] = OUT(sp),
	[C_RS] = OUT(rs), [C_I32_AGAIN] = OUT(i32), [C_AG] = OUT(ag),
	[C_BCAST] = OUT(bc), [C_Q8] = OUT(q8), [C_Q8RS] = OUT(q8rs),
	[C_Q8AG] = OUT(q8ag),
};

/* Where rank 1's GATHER data comes from in the next call. */
static void
peer_shard(struct harness *h, const void *data, size_t base, size_t n)
{
	h->peer_data = data;
	h->peer_base = base;
	h->peer_n = n;
	h->mirrored = 0;
}

/* A q8 call: f32 through q8, rank 0's shard in recv (NULL: in place). */
static int
call_q8(struct tally_ctx *ctx, float *buf, float *recv)
{
	struct tally_codec job = ctx->codec;
	int rc;

	ctx->codec = codec_q8;
	rc = recv == NULL ? tally_allreduce(ctx, buf, N_Q8) :
		tally_reduce_scatter(ctx, buf, recv, N_Q8RS, TALLY_DT_F32);
	ctx->codec = job;
	return rc;
}

/*
 * Call i of the sequence on ctx (h its harness), into o (its output
 * zeroed first, an in-place call's input copied there).
 */
static int
call(struct tally_ctx *ctx, struct harness *h, int i, struct out *o)
{
	memset((uint8_t *)o + outs[i].off, 0, outs[i].len);
	switch (i) {
	case C_I32:
	case C_I32_AGAIN:
		memcpy(o->i32, in_i32, sizeof(in_i32));
		return tally_allreduce_i32(ctx, o->i32, N_I32);
	case C_F32:
		memcpy(o->f32, in_f32, sizeof(in_f32));
		return tally_allreduce_f32(ctx, o->f32, N_F32);
	case C_SPARSE:
		memcpy(o->sp, in_sparse, sizeof(in_sparse));
		return tally_allreduce(ctx, o->sp, N_SPARSE);
	case C_RS:
		/* Rank 0's shard: the first N_RS of the sums. */
		return tally_reduce_scatter(ctx, in_i32, o->rs, N_RS,
			TALLY_DT_I32);
	case C_AG:
		/* Both ranks' shards: in_i32's first N_AG each. */
		peer_shard(h, h->mirror, N_AG, N_AG);
		return tally_allgather(ctx, in_i32, o->ag, N_AG,
			TALLY_DT_I32);
	case C_BCAST:
		/* Rank 0's tensor, every bit set, becomes rank 1's in_bc. */
		peer_shard(h, in_bc, 0, N_BC);
		memset(o->bc, 0xff, sizeof(o->bc));
		return tally_broadcast(ctx, o->bc, N_BC, TALLY_DT_BF16, 1);
	case C_Q8:
		memcpy(o->q8, in_q8, sizeof(in_q8));
		return call_q8(ctx, o->q8, NULL);
	case C_Q8RS:
		return call_q8(ctx, in_q8, o->q8rs);
	default:
		/* Both ranks' shards: in_q8's first N_Q8AG each, as q8. */
		peer_shard(h, h->mirror, Q8AG_SHARD, Q8AG_SHARD);
		return tally_allgather(ctx, in_q8, o->q8ag, N_Q8AG,
			TALLY_DT_F32);
	}
}

/* The sum of counters that take one received packet each. */
static uint64_t
taken(const struct tally_ctx_stats *st)
{
	return st->results + st->duplicates + st->stale + st->forged +
		st->nacks;
}

/* The bits of a run without injections: twice the input, exactly. */
static struct out ref;

/* The i32 sum of x and rank 1's copy of it, wrapping. */
static int32_t
twice(int32_t x)
{
	return (int32_t)((uint32_t)x * 2u);
}

/* The largest |x| of n floats. */
static float
absmax(const float *x, size_t n)
{
	float a = 0.0f;

	for (size_t i = 0; i < n; i++)
		a = fabsf(x[i]) > a ? fabsf(x[i]) : a;
	return a;
}

/*
 * The q8 calls' reference: the sums within two steps of the codec (each
 * rank's element rounded up or down) of twice the input; the all-gather
 * the same bits in both shards (rank 1's are rank 0's bytes), within
 * max|x| / 254 of the input.
 */
static void
reference_q8(void)
{
	float a = absmax(in_q8, N_Q8), scale;
	unsigned int levels;

	CHECK(tally_quant_levels(8, 2, 0, &levels) == 0);
	CHECK(tally_quant_scale(a, levels, &scale) == 0);
	for (int j = 0; j < N_Q8; j++)
		CHECK(fabsf(ref.q8[j] - 2 * in_q8[j]) <= 2.01f / scale);
	for (int j = 0; j < N_Q8RS; j++)
		CHECK(fabsf(ref.q8rs[j] - 2 * in_q8[j]) <= 2.01f / scale);
	CHECK(memcmp(ref.q8ag, ref.q8ag + N_Q8AG, sizeof(float) * N_Q8AG)
		== 0);
	a = absmax(in_q8, N_Q8AG);
	for (int j = 0; j < N_Q8AG; j++)
		CHECK(fabsf(ref.q8ag[j] - in_q8[j]) <= a / 254 * 1.01f);
}

static void
reference(void)
{
	struct harness h;
	struct tally_transport *udp;
	struct tally_ctx *ctx;
	int nz = 0;

	memset(&h, 0, sizeof(h));
	ctx = open_ctx(&h, JOB_AUTH, &udp);
	for (int i = 0; i < NCALLS; i++) {
		CHECK(call(ctx, &h, i, &ref) == 0);
		for (int j = 0; j < N_I32; j++)
			CHECK(ref.i32[j] == twice(in_i32[j]));
	}
	close_ctx(ctx, udp);
	harness_free(&h);
	for (int j = 0; j < N_RS; j++)
		CHECK(ref.rs[j] == twice(in_i32[j]));
	for (int j = 0; j < 2 * N_AG; j++)
		CHECK(ref.ag[j] == in_i32[j % N_AG]);
	CHECK(memcmp(ref.bc, in_bc, sizeof(in_bc)) == 0);
	for (int j = 0; j < N_F32; j++)
		CHECK(ref.f32[j] == 2 * in_f32[j]);
	/* The blocks both selected summed, the others zero. */
	for (int j = 0; j < N_SPARSE; j++) {
		CHECK(ref.sp[j] == 2 * in_sparse[j] || ref.sp[j] == 0);
		nz += ref.sp[j] != 0;
	}
	CHECK(nz > 0 && nz < N_SPARSE);
	reference_q8();
	for (int j = 0; j < NJOBS; j++)
		tally_job_reset(jobs[j]);
}

static void
setup(void)
{
	/* The context's own socket goes unused: no GRO staging (4 MiB a
	 * context, which ASan would fill and poison every input). */
	CHECK(setenv("TALLY_UDP_OFFLOAD", "0", 1) == 0);
	tally_lib_clock = fz_clock;
	for (int i = 0; i < N_I32; i++)
		in_i32[i] = (int32_t)((uint32_t)i * 2654435761u);
	/* Quarters: exact in fixed point, so sums are exactly 2x. */
	for (int i = 0; i < N_F32; i++)
		in_f32[i] = (float)(i % 37 - 18) * 0.25f;
	/* Blocks of different magnitudes, so the selection picks some. */
	for (int i = 0; i < N_SPARSE; i++)
		in_sparse[i] = (float)((i % 13) - 6) * (float)(1 + i / 256) *
			0.5f;
	/* Any bits: a broadcast moves them as they are. */
	for (int i = 0; i < N_BC; i++)
		in_bc[i] = (uint16_t)(i * 40503u + 7u);
	/* Not on the codec's grid, and chunks of different magnitudes. */
	for (int i = 0; i < N_Q8; i++)
		in_q8[i] = (float)(i % 29 - 14) * 0.37f * (float)(1 + i / 150);
	CHECK(tally_codec_parse("q8", &codec_q8, NULL, 0) == 0);
	for (int i = 0; i < 16; i++) {
		confs[JOB_AUTH].key_result[i] = (uint8_t)(0xa0 + i);
		confs[JOB_AUTH].keys[0].up[i] = (uint8_t)(0x10 + i);
		confs[JOB_AUTH].keys[0].down[i] = (uint8_t)(0x30 + i);
		confs[JOB_AUTH].keys[1].up[i] = (uint8_t)(0x50 + i);
		confs[JOB_AUTH].keys[1].down[i] = (uint8_t)(0x70 + i);
	}
	memcpy(worker_keys.up, confs[JOB_AUTH].keys[0].up, 16);
	memcpy(worker_keys.down, confs[JOB_AUTH].keys[0].down, 16);
	memcpy(worker_keys.result, confs[JOB_AUTH].key_result, 16);
	for (int j = 0; j < NJOBS; j++) {
		jobs[j] = tally_job_create(&confs[j]);
		CHECK(jobs[j] != NULL);
		CHECK(tally_mac_key_init(&peer_up[j],
			confs[j].keys[1].up) == 0);
	}
	tab = tally_jobtab_create(jobs, NJOBS);
	CHECK(tab != NULL);
	reference();
}

/* Splits the input into injections. */
static void
parse(struct harness *h, const uint8_t *data, size_t size)
{
	while (size >= 3 && h->ninj < MAX_INJ) {
		size_t len = (size_t)data[1] | (size_t)data[2] << 8;
		struct inj *in = &h->inj[h->ninj++];

		in->sel = data[0];
		data += 3;
		size -= 3;
		if (len > size)
			len = size;
		in->data = data;
		in->len = (uint32_t)len;
		data += len;
		size -= len;
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct out o;
	struct tally_ctx_stats before, after;
	struct tally_transport *udp;
	struct tally_ctx *ctx;
	struct harness h;
	int failed = 0, all_ok = 1;

	if (tab == NULL)
		setup();
	if (size == 0)
		return 0;
	memset(&h, 0, sizeof(h));
	for (int j = 0; j < NJOBS; j++)
		tally_job_reset(jobs[j]);
	parse(&h, data + 1, size - 1);
	ctx = open_ctx(&h, data[0] & 1 ? JOB_AUTH : JOB_PLAIN, &udp);
	tally_ctx_stats(ctx, &before);
	for (int i = 0; i < NCALLS; i++) {
		int rc = call(ctx, &h, i, &o);

		if (h.job == JOB_AUTH) {
			/* Nothing without the keys gets through. */
			CHECK(rc == 0);
			CHECK(memcmp((uint8_t *)&o + outs[i].off,
				(uint8_t *)&ref + outs[i].off,
				outs[i].len) == 0);
			continue;
		}
		if (rc != 0) {
			all_ok = 0;
			CHECK(tally_ctx_error(ctx)[0] != '\0');
		}
		if (failed) {
			CHECK(rc == -EPIPE);
			continue;
		}
		CHECK(rc == 0 || rc == -EPROTO || rc == -ETIMEDOUT ||
			rc == -ERANGE);
		failed = rc != 0 && rc != -ERANGE;
	}
	tally_ctx_stats(ctx, &after);
	if (all_ok) {
		uint64_t t = taken(&after) - taken(&before);

		CHECK(after.bytes_received - before.bytes_received == h.bytes);
		CHECK(t >= h.pkts_min && t <= h.pkts_max);
		CHECK(after.ignored - before.ignored == h.empty);
	}
	close_ctx(ctx, udp);
	harness_free(&h);
	return 0;
}

/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libtally's context, as its own files see it: the transport, the job's
 * identity, the slots (with the round number each keeps for the
 * context's life), buffers, counters and the last error. ctx.c creates
 * and frees it, window.c runs rounds over its slots, allreduce.c holds
 * the public entry points.
 */
#ifndef TALLY_LIB_CTX_H
#define TALLY_LIB_CTX_H

#include <stddef.h>
#include <stdint.h>

#include <tally/codec.h>
#include <tally/mac.h>
#include <tally/proto.h>
#include <tally/tally.h>

#include "retx.h"
#include "transport/transport.h"

struct tally_round;
struct tally_dev;
struct tally_dev_ops;
struct tally_ring;

#define TALLY_CTX_ERR_LEN	256

/* Where each of an authenticated context's keys is, in ctx->mac. */
enum { TALLY_CTX_KEY_UP, TALLY_CTX_KEY_DOWN, TALLY_CTX_KEY_RESULT };

/*
 * One aggregation slot as this worker uses it. round is the slot's next
 * (or current) round: 0 at the start, one up each time a result is taken
 * from the slot, for the context's whole life; its low bit is the shadow
 * set (docs/protocol.md, "Rounds"). The rest describes the chunk
 * outstanding on the slot, when busy.
 */
struct tally_slot {
	uint64_t round;		/* the round in flight, or the next one */
	uint32_t chunk;		/* chunk index within the running round */
	uint8_t busy;		/* a chunk is outstanding */
	uint8_t retx;		/* it went again (flag RETX set) */
	uint8_t hdr[TALLY_HDR_LEN]; /* the chunk's header, wire order */
	uint8_t tag[TALLY_TAG_LEN]; /* its tag (an authenticated job) */
};

struct tally_ctx {
	struct tally_transport *tp;
	uint16_t dp_nports;		/* the dataplane's ports (lcores); a
					 * sharded job's: all its dataplanes'
					 * (map.total) */
	struct tally_shard_map map;	/* slot to port ("stream"): its
					 * dataplane, then its port there */
	uint32_t *tx_seq;		/* [dp_nports]: the latest sequence
					 * number sent to each stream (flag
					 * SEQ, docs/protocol.md "Gaps");
					 * NULL: none sent (rdma, or
					 * TALLY_GAP=0) */
	uint32_t *rx_seq;		/* [dp_nports]: the latest result
					 * number from each stream (flag SEQ);
					 * with tx_seq, in its allocation */
	uint16_t job;
	uint64_t token;
	uint8_t rank;
	uint8_t world;
	uint16_t scale_world;		/* opts' scale_world, else world */
	uint16_t window;
	uint16_t elems;
	uint8_t narrow;			/* the job's results keep their width */
	uint8_t lanes;			/* bf16/f16 lanes: 0 = the rule of
					 * tally_fixp16_lanes(), 16 or 32
					 * (tally_ctx_set_lanes()) */
	uint8_t ag_bits;		/* f32 all-gather: 0 exact, 8 the
					 * lossy q8 (gatherq.c) */
	struct tally_codec codec;	/* the job's, for tally_allreduce() */
	unsigned int rto_us;		/* opts' rto_us: first and floor */
	struct tally_retx retx;		/* the timer and loss detection */
	struct tally_retx_unit *units;	/* [window]: retx's lanes */
	uint32_t *due;			/* [window]: lanes going again */
	unsigned int timeout_ms;
	struct tally_slot *slots;	/* [window] */
	uint8_t *rxbuf;			/* TALLY_TP_BURST x rx_room bytes */
	uint32_t rx_room;
	int32_t *fixp;			/* f32 allreduce's fixed-point copy */
	size_t fixp_cap;		/* its elements */
	uint8_t *stage;			/* a codec's encoded contributions */
	size_t stage_cap;		/* its bytes */
	uint64_t codec_calls;		/* tally_allreduce() calls: the step
					 * of the codecs' random draws */
	struct tally_state *state;	/* tally_allreduce()'s own codec
					 * memory, for its one tensor */
	struct tally_dev *dev;		/* device tensors' staging (dev.h),
					 * from the first device call */
	struct tally_mac_key *mac;	/* an authenticated job's keys,
					 * expanded: [TALLY_CTX_KEY_UP..];
					 * NULL: a plain job */
	int broken;			/* an allreduce failed: slots unknown */
	struct tally_ring *ring;	/* the ring fallback (ringctx.c), owned
					 * by tp; NULL: through a dataplane */
	struct tally_ctx_stats st;
	uint32_t epoch;			/* the job's epoch (ready's); 0: not
					 * opened through tallyd */
	struct tally_rejoin *rj;	/* how to rejoin (rejoin.c); NULL:
					 * opened without the rendezvous */
	void *keep;			/* an in-place call's input, kept */
	size_t keep_cap;		/* its bytes allocated */
	void *keep_buf;			/* the caller's buffer it came from;
					 * NULL: nothing kept for this call */
	size_t keep_len;		/* its bytes */
	char err[TALLY_CTX_ERR_LEN];
};

/* The stream (a dataplane's port) slot s goes to: tx_seq's index. */
static inline unsigned int
tally_lib_stream(const struct tally_ctx *ctx, unsigned int s)
{
	return tally_shard_stream(&ctx->map, s);
}

/*
 * rejoin.c. tally_lib_rdv_open() is tally_open_opts()'s rendezvous,
 * naming epoch (0: a join; else a rejoin of that epoch's membership).
 * tally_lib_rejoin_init() keeps in ctx what tally_rejoin() needs
 * (copies of url, token and base's strings): 0 or -ENOMEM.
 */
struct tally_rejoin;
int tally_lib_rdv_open(const char *url, const char *token, unsigned int rank,
	unsigned int world, const struct tally_ctx_opts *base, uint32_t epoch,
	struct tally_ctx **out);
int tally_lib_rejoin_init(struct tally_ctx *ctx, const char *url,
	const char *token, unsigned int rank, unsigned int world,
	const struct tally_ctx_opts *base);
void tally_lib_rejoin_free(struct tally_ctx *ctx);
/*
 * An in-place call's input: tally_lib_keep() copies bytes of buf aside
 * (when ctx can rejoin); a call that fails puts them back
 * (tally_lib_keep_restore(), from tally_lib_run()), so that the caller
 * may call again with the same buffer. 0 or -ENOMEM.
 */
int tally_lib_keep(struct tally_ctx *ctx, const void *buf, size_t bytes);
void tally_lib_keep_restore(struct tally_ctx *ctx);

/*
 * Records an error: formats the message into ctx->err and returns rc (a
 * negative errno), so that callers can "return tally_ctx_fail(...)".
 */
int tally_ctx_fail(struct tally_ctx *ctx, int rc, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/*
 * As tally_ctx_fail(), for the opening of a context (tally_ctx_open(),
 * tally_open()): the message goes to the calling thread's open error,
 * which tally_ctx_error(NULL) returns.
 */
int tally_ctx_open_fail(int rc, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/*
 * A tensor's codec memory (struct tally_state of <tally/tally.h>; made
 * by state.c). Which buffers exist depends on the codec:
 * - resid: the error-feedback residual (ef=1; 2bit: MXNet's residual;
 *   powersgd with ef), or DGC's accumulation v (sparse with momentum);
 * - mom: DGC's momentum u (sparse with momentum);
 * - p, q: PowerSGD's factors, rows x rank and cols x rank; q keeps the
 *   last step's summed Q, the next step's warm start (q_ready).
 * A device state (dev set) has them in device memory.
 */
struct tally_state {
	struct tally_codec codec;	/* the codec it serves */
	size_t n;
	float *resid;
	float *mom;
	float *p;
	float *q;
	uint32_t rows;
	uint32_t cols;
	int q_ready;
	const struct tally_dev_ops *dev; /* buffers in this device's memory
					 * (tally_state_new_cuda()); NULL:
					 * host memory */
};

/*
 * The block-sparse allreduce of buf's n elements (sparse.c); bmax holds
 * the blocks' largest magnitudes (tally_sparse_block_max(), borrowed):
 * this rank's selection, a MAX round for the scale and the streams'
 * first blocks, then streams of blocks through the slots, the sums
 * written over buf (zeros where no rank had a block). ctx->fixp must
 * hold n elements. With resid (not NULL, n
 * elements, holding what buf holds), the blocks this rank sends take
 * their fixed-point rounding error as residual (resid - sent); with mom
 * as well, mom is zeroed on them (DGC's momentum factor masking).
 * Returns 0 or a negative errno, with ctx->err set; after an error the
 * slots are out of step (but -ERANGE: nothing was sent).
 */
int tally_lib_allreduce_sparse(struct tally_ctx *ctx, float *buf, size_t n,
	const float *bmax, float *resid, float *mom);

/*
 * Helpers of the entry points (allreduce.c), for the codecs (codecs.c,
 * powersgd.c). Each returns 0 or a negative errno with ctx->err set.
 */

/*
 * The checks every entry point starts with. Returns 1 to go on, 0 when
 * there is nothing to do (n == 0), or a negative errno.
 */
int tally_lib_check_call(struct tally_ctx *ctx, const void *buf, size_t n);

/*
 * The checks of a codec state st given with a tensor of n elements, on
 * the host and the device paths alike: not NULL, made for n elements and
 * for the context's codec. Where its memory lives each path checks itself.
 */
int tally_lib_check_state(struct tally_ctx *ctx, const struct tally_state *st,
	size_t n);

/*
 * The levels of qBITS (enc: its encoding) for this context's world and
 * result width into *levels, with q4's condition on the context's elems.
 */
int tally_lib_quant_levels(struct tally_ctx *ctx, unsigned int bits,
	uint8_t enc, unsigned int *levels);

/* Runs r (tally_window_run()); an error marks the context broken. */
int tally_lib_run(struct tally_ctx *ctx, const struct tally_round *r);

/* Makes ctx->fixp hold n elements, ctx->stage len bytes; kept. */
int tally_lib_grow_fixp(struct tally_ctx *ctx, size_t n);
int tally_lib_grow_stage(struct tally_ctx *ctx, size_t len);

/* The max over all ranks of mine: one MAX round of one element. */
int tally_lib_max_round(struct tally_ctx *ctx, float mine, float *out);

/*
 * bf16/f16 rounds of type (TALLY_PT_SUM, or TALLY_PT_SCATTER with shard
 * elements a rank) over src's n elements in the shared-scale fixed point
 * (typed.c): the MAX round, the integer sums, the results from element
 * base on rounded once into dst (may be src for a SUM). Borrows both.
 */
int tally_lib_fixp16_run(struct tally_ctx *ctx, uint8_t type,
	const uint16_t *src, uint16_t *dst, size_t base, size_t n,
	size_t shard, enum tally_dtype dt);

/*
 * The bf16/f16 reduce-scatter (coll16.c): send's world x count elements
 * of dt, this rank's shard of the sums rounded once into recv. Called
 * after the checks, count > 0.
 */
int tally_lib_rs16(struct tally_ctx *ctx, const uint16_t *send, uint16_t *recv,
	size_t count, enum tally_dtype dt);

/*
 * The q16/q8/q4 bits of codec, 0 for any other (collq.c).
 */
unsigned int tally_lib_quant_bits(const struct tally_codec *codec);

/*
 * The f32 reduce-scatter of a q16/q8/q4 job (collq.c): send's world x
 * count floats through the codec, this rank's shard decoded into recv,
 * with st's memory (NULL: the context's own, if the codec has any).
 * Called after the checks, count > 0.
 */
int tally_lib_rs_quant(struct tally_ctx *ctx, struct tally_state *st,
	const float *send, float *recv, size_t count);

/*
 * The lossy q8 all-gather of f32 (gatherq.c): send's count floats into
 * shard rank of recv (world x count) on every rank, each chunk with its
 * own scale. Called after the checks, count > 0.
 */
int tally_lib_ag_q8(struct tally_ctx *ctx, const float *send, float *recv,
	size_t count);

/*
 * tally_allreduce_f32() of buf's n elements without the call checks, and
 * the exponent it used in *e (every rank's): a MAX round, then exact
 * fixed-point sums. -ERANGE when the max is infinite (nothing sent).
 */
int tally_lib_fixp_sum(struct tally_ctx *ctx, float *buf, size_t n, int *e);

/*
 * tally_lib_fixp_sum() with the sums divided by div, a power of two
 * (else -EINVAL), as they are decoded (tally_allreduce_mean()): no pass
 * of its own, the same bits as dividing buf first. *e is the wire's
 * exponent.
 */
int tally_lib_fixp_sum_div(struct tally_ctx *ctx, float *buf, size_t n,
	unsigned int div, int *e);

/*
 * PowerSGD (powersgd.c): buf's n elements through the factors, with st's
 * memory (made for powersgd). Called after the checks.
 */
int tally_lib_allreduce_powersgd(struct tally_ctx *ctx, struct tally_state *st,
	float *buf, size_t n);

/*
 * One pass of chunks through the slots: what tally_window_run() does.
 * Contributions are in enc; results come back in tally_enc_result(enc,
 * ctx->narrow) for sums, in enc for maxima (docs/protocol.md, "Result
 * encodings"), each packed as the wire packs it.
 */
struct tally_round {
	uint8_t type;		/* TALLY_PT_SUM or TALLY_PT_MAX; SCATTER or
				 * GATHER (coll.c), with shard set */
	uint8_t enc;		/* any TALLY_ENC_ for sums; f32 or i32 for MAX */
	int16_t scale_exp;	/* put in every header */
	const void *src;	/* n elements to contribute, in enc */
	void *dst;		/* n results in the result encoding; may be
				 * src when both are as wide */
	size_t n;		/* elements, 1 .. 2^32 - 1 */
	/*
	 * Optional codec steps a chunk at a time, so that they overlap the
	 * network: encode fills src[off, off + count) just before the chunk
	 * is first sent; decode reads the chunk's result, count elements in
	 * the result encoding at res (borrowed: in the received packet, or
	 * in dst), as soon as it is in. A round with a decode step leaves
	 * dst unwritten wherever a result could be decoded from the packet
	 * itself (one copy less a packet). arg is theirs.
	 */
	void (*encode)(const struct tally_round *r, size_t off, size_t count);
	void (*decode)(const struct tally_round *r, size_t off, size_t count,
		const void *res);
	void *arg;
	/*
	 * Rounds with an owner (SCATTER, GATHER: docs/protocol.md,
	 * "Collectives"): n is shards of shard elements, shard p owned by
	 * rank (root + p) % world, each cut into chunks on its own. A
	 * GATHER's member sends data only for the shards it owns, read at
	 * src + (offset - src_base); every result of offset o goes to
	 * dst + (o - dst_base) (in elements of the result encoding).
	 */
	size_t shard;		/* 0: a round without owners */
	uint8_t root;
	size_t src_base;
	size_t dst_base;
};

/*
 * Starts the call's retransmission state over n lanes (retx.h) and
 * returns the clock's now, in ns; tally_lib_now_ns() reads it.
 */
uint64_t tally_lib_retx_begin(struct tally_ctx *ctx, uint32_t n);
uint64_t tally_lib_now_ns(void);

/*
 * The clock tally_lib_now_ns() reads: NULL (CLOCK_MONOTONIC) but in a
 * harness that moves time on itself (fuzz-result: a receive that would
 * have waited moves it by the wait, so a call out of step ends at its
 * deadline without the real wait). Not for use with contexts open.
 */
extern uint64_t (*tally_lib_clock)(void);

/* Most bursts a drain reads before it lets its loop go on (a flood of
 * packets is progress anyway). */
#define TALLY_LIB_DRAIN_BURSTS	64

/* Takes one received datagram of len bytes at buf, read at now (ns). */
typedef void tally_lib_take_fn(void *arg, const uint8_t *buf, uint32_t len,
	uint64_t now);

/*
 * Waits until until at most (not at all when it is now or past) for one
 * burst from ctx's transport and hands each datagram to take(arg, ...),
 * while *err is 0 (take may set it). Returns how many came, or 0 with
 * *err set to the failure (ctx->err says it) when the transport failed
 * (rx.c).
 */
int tally_lib_receive(struct tally_ctx *ctx, uint64_t now, uint64_t until,
	tally_lib_take_fn *take, void *arg, int *err);

/*
 * Takes every packet already there, as tally_lib_receive() without
 * waiting, at most TALLY_LIB_DRAIN_BURSTS bursts (a flood of them is
 * progress anyway), while *err is 0 (rx.c).
 */
void tally_lib_drain(struct tally_ctx *ctx, tally_lib_take_fn *take,
	void *arg, int *err);

/*
 * Makes ctx (plain so far, no allreduce run yet) an authenticated job's
 * member with keys (borrowed): expands them into ctx->mac. Returns 0,
 * or -ENOMEM or -ENOTSUP (no AES instructions) with the thread's open
 * error set (tally_ctx_open_fail()).
 */
int tally_lib_ctx_keys(struct tally_ctx *ctx,
	const struct tally_auth_keys *keys);

/*
 * In an authenticated job (ctx->mac), the tag of this member's packet
 * whose header is hdr (wire order, flag AUTH set) and payload plen
 * bytes at payload, into tag. Borrows all.
 */
void tally_lib_sign(const struct tally_ctx *ctx, const uint8_t *hdr,
	const void *payload, size_t plen, uint8_t *tag);

/*
 * Whether the received packet buf of len bytes (h its decoded header, a
 * result or NACK of this job) may be believed: in an authenticated job
 * it carries the flag AUTH and the right tag (a NACK the member's down
 * key's, a result the job's result key's); in a plain job it carries
 * none. Counts what fails in ctx->st.forged. 1 or 0.
 */
int tally_lib_authentic(struct tally_ctx *ctx, const struct tally_hdr *h,
	const uint8_t *buf, uint32_t len);

/*
 * Counts a received result that matches no packet in flight: stale when
 * its round is older than the last one its slot took (a copy delayed or
 * replayed), a duplicate otherwise.
 */
void tally_lib_unmatched(struct tally_ctx *ctx, const struct tally_hdr *h);

/*
 * As tally_lib_unmatched(), and first: when h is the dataplane's answer
 * (flag RETX) to a retransmission of the slot's previous round, the one
 * it took last, tells retx.c, which
 * counts that retransmission spurious when the round's own result had
 * come (tally_retx_late_dup()).
 */
void tally_lib_late_result(struct tally_ctx *ctx, const struct tally_hdr *h);

/*
 * Runs r: sends chunk c of ctx->elems elements (the last one shorter) to
 * slot c % window with the slot's round, keeps at most one chunk a slot
 * outstanding, retransmits on timeouts, and writes each chunk's result to
 * r->dst. Borrows r and the buffers it names. Returns 0, -ETIMEDOUT,
 * -EPROTO (a NACK) or a transport error, with the message in ctx->err;
 * on an error the slots are left as they were (the caller marks the ctx
 * broken).
 */
int tally_window_run(struct tally_ctx *ctx, const struct tally_round *r);

/*
 * tally_ctx_open() with a ring listener already open (tally_open()
 * opens it at the join; NULL: opened here at o->ring[o->rank]), which
 * it takes over, also on failure.
 */
int tally_lib_ctx_open(const struct tally_ctx_opts *o, struct tally_ring *g,
	struct tally_ctx **out);

/*
 * The ring fallback (ringctx.c). _open joins ctx (checked, no transport
 * yet) to the ring of o->ring with o->ring_key, on listener g (taken
 * over; NULL: opened here); 0 or -errno with the open error set. _run
 * runs round r around the ring (-EOPNOTSUPP for a round it does not
 * carry); _stats puts the ring's counters into st.
 */
int tally_lib_ring_open(struct tally_ctx *ctx, const struct tally_ctx_opts *o,
	struct tally_ring *g);
int tally_lib_ring_run(struct tally_ctx *ctx, const struct tally_round *r);

/*
 * tally_open()'s ring: a context on the ring that tallyd's READY lists
 * (every rank's listener), with base's options (borrowed), the key
 * derived from the job's name, its token (64 hex digits) and READY's
 * epoch, on listener g (taken over, also on failure), joined before
 * deadline (CLOCK_MONOTONIC ms). Warns on stderr that the job runs on
 * the fallback. 0 or -errno with the open error set.
 */
struct tally_rdv_msg;
int tally_lib_ring_ctx(const struct tally_ctx_opts *base,
	const struct tally_rdv_msg *ready, const char *job, const char *token,
	struct tally_ring *g, int64_t deadline, struct tally_ctx **out);
void tally_lib_ring_stats(const struct tally_ctx *ctx,
	struct tally_ctx_stats *st);

#endif /* TALLY_LIB_CTX_H */

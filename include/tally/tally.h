/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libtally: the worker's side of a tally allreduce.
 *
 * A context (struct tally_ctx) is one worker's membership in one job at
 * the dataplane: its address, the job's id and token, the worker's rank,
 * and the state of the job's aggregation slots as this worker has used
 * them (one round number per slot, kept for the context's whole life;
 * docs/protocol.md, "Rounds"). It sends over kernel UDP
 * from one socket, so the worker's source address and port stay the same
 * for the context's life, as the dataplane's member check wants.
 *
 * Every member of the job must call the same allreduce functions in the
 * same order with the same element counts: that is what keeps their slot
 * use, and so their rounds, in step.
 *
 * A context is not thread-safe: one thread at a time. Different contexts
 * are independent.
 *
 * Errors: int functions return 0 or a negative errno, and leave a line of
 * text in tally_ctx_error(). After an allreduce fails with anything but
 * -EINVAL or -ERANGE, the slots are in an unknown state (some chunks may
 * have been counted at the dataplane, others not): a context from
 * tally_open() rejoins the job at its next call (tally_rejoin(): a new
 * epoch, fresh slots); any other refuses every further allreduce with
 * -EPIPE, and the caller must close it (and the job be restarted at the
 * dataplane, which empties its slots).
 */
#ifndef TALLY_TALLY_H
#define TALLY_TALLY_H

#include <stddef.h>
#include <stdint.h>

#include <tally/codec.h>

#ifdef __cplusplus
extern "C" {
#endif

struct tally_ctx;

/*
 * An authenticated job's keys for one member (docs/protocol.md,
 * "Authenticated jobs"); tally_open() gets them from tallyd.
 */
struct tally_auth_keys {
	uint8_t up[16];		/* tags this member's packets */
	uint8_t down[16];	/* tags the NACKs to this member */
	uint8_t result[16];	/* tags the job's results */
};

/* One dataplane of a sharded job (struct tally_ctx_opts' shards). */
struct tally_shard {
	const char *addr;	/* IPv4, dotted quad */
	uint16_t port;		/* first UDP port of its range */
	uint16_t nports;	/* ports in its range, 0 = 1 */
};

/*
 * What tally_ctx_open() needs. Zero-initialise it and set what you need;
 * a 0 means the default where one is named.
 */
struct tally_ctx_opts {
	const char *dp_addr;	/* dataplane IPv4 address, dotted quad */
	uint16_t dp_port;	/* first UDP port of the dataplane's range;
				 * 0 = TALLY_UDP_PORT (47474) */
	uint16_t dp_nports;	/* ports in the range, 0 = 1. Slot s goes to
				 * dp_port + s % dp_nports: each port is the
				 * dataplane lcore that owns those slots */
	const char *bind_addr;	/* local IPv4 to bind, NULL = any */
	uint16_t bind_port;	/* local UDP port, 0 = ephemeral */
	const char *group_addr;	/* IPv4 multicast group the job's results
				 * go to, NULL = results come unicast. The
				 * socket then joins it on bind_addr's
				 * interface and binds the wildcard address
				 * on bind_port, which must be the group's
				 * port (the same on every member) */
	uint16_t job;		/* job id at the dataplane */
	uint64_t token;		/* the job's token */
	uint8_t rank;		/* this worker, 0 .. world - 1 */
	uint8_t world;		/* members of the job, 1..64 */
	uint16_t window;	/* slots to use, 0 = 64; at most the job's
				 * window at the dataplane (else: NACK) */
	uint16_t elems;		/* elements a packet, 0 = 256 (1 KiB of i32);
				 * at most the job's max_elems (else: NACK) */
	unsigned int rto_us;	/* first and smallest retransmission timeout,
				 * 0 = 2000; then follows the measured round
				 * trip; doubles per retry of a chunk, up to
				 * 200 ms, plus up to half of it again at
				 * random (chunks lost together do not go
				 * again together) */
	unsigned int timeout_ms; /* an allreduce fails with -ETIMEDOUT when
				 * no result arrived for this long (what
				 * waits in the socket when the deadline
				 * passes counts as arrived), 0 = 5000 */
	uint8_t narrow;		/* the job returns narrow sums in their own
				 * width (tally-dp's job "narrow"); tally_open()
				 * learns it from tallyd */
	const char *codec;	/* the job's codec spec (<tally/codec.h>) for
				 * tally_allreduce(); NULL = "fixp";
				 * tally_open() learns it from tallyd */
	unsigned int join_timeout_ms; /* tally_open_opts() only: the longest
				 * the whole rendezvous may take (tallyd's
				 * join barrier included), 0 = 120000 */
	const char *ca_file;	/* tally_open_opts() only: PEM file of the
				 * CA(s) that vouch for tallyd's TLS
				 * certificate; NULL = the URL's ca=, else
				 * $TALLY_CA, else the system's trust
				 * store */
	const struct tally_auth_keys *auth; /* an authenticated job: every
				 * packet carries a tag, and results and
				 * NACKs without the right one are dropped
				 * (counted as forged); NULL: a plain job.
				 * Copied; tally_open() learns it */
	const char *transport;	/* "udp" (NULL: the default, kernel UDP),
				 * "xdp" (AF_XDP: the worker writes its
				 * frames itself, around the kernel's UDP
				 * path, to the same ports; needs
				 * CAP_NET_RAW, CAP_BPF and CAP_NET_ADMIN,
				 * and a libtally built with libxdp) or
				 * "rdma": RoCEv2 UD SENDs through
				 * libibverbs (docs/rdma.md), to the
				 * dataplane's QPNs below instead of its
				 * ports; bind_addr picks the RoCEv2 GID
				 * (NULL: the port's first IPv4 one).
				 * tally_open() learns it from tallyd,
				 * or takes the URL's ?transport= */
	const uint32_t *dp_qpns; /* rdma: the dataplane's QPNs; slot s goes
				 * to dp_qpns[s % dp_nqpns] (borrowed) */
	uint16_t dp_nqpns;	/* rdma: 1..64 */
	uint32_t qkey;		/* rdma: the job's Q_Key (high bit clear) */
	const char *rdma_device; /* rdma: verbs device name (ibv_devices);
				 * NULL = the first with bind_addr's GID.
				 * tally_open_opts() uses it too */
	uint8_t rdma_port;	/* rdma: the device's port, 0 = 1 */
	const char *ifname;	/* xdp: the interface, which must be the
				 * route's toward the dataplane; NULL = that
				 * one */
	uint16_t queue;		/* xdp: its receive queue (default 0) */
	const struct tally_shard *shards; /* a sharded job's dataplanes,
				 * 2..8 (docs/scale-out.md): slot s goes to
				 * shards[s % nshards], to its port
				 * port + s % nports; dp_addr, dp_port and
				 * dp_nports are then unused. UDP only.
				 * Borrowed; tally_open() learns them */
	uint16_t nshards;	/* 0: dp_addr alone */
	const char *const *ring; /* transport "ring", the ring fallback
				 * (docs/scale-out.md, "Ring fallback"):
				 * world "IP:PORT", the members' ring
				 * listeners (TCP) in rank order; this
				 * rank listens at ring[rank] (port 0:
				 * any). dp_addr and the other dataplane
				 * options are then unused. Borrowed;
				 * tally_open() learns them from tallyd */
	const uint8_t *ring_key; /* transport "ring": 32 bytes every member
				 * holds, which the ring's hellos prove
				 * (an HMAC over fresh nonces; never
				 * sent). Borrowed; tally_open() derives
				 * it from the job's token and the
				 * membership's epoch */
	uint16_t scale_world;	/* the world the fixed-point scale of
				 * tally_allreduce_f32() and the fixp codec
				 * is picked for: every rank under every
				 * leaf of a two-tier job, world ..
				 * 4096 (docs/scale-out.md, "Two tiers");
				 * 0 = world. tally_open() leaves it 0:
				 * tallyd does not build trees yet */
};

/*
 * Opens a context: checks o, binds a UDP socket (or opens the AF_XDP
 * socket of transport "xdp"). Borrows o (nothing of it
 * is kept). The context numbers every slot's rounds from 0 (the rounds
 * of docs/protocol.md), so the job at the dataplane must be fresh for
 * it: added (or added again) for this set of contexts, as tallyd does
 * for every membership that tally_open() forms; a slot the dataplane
 * already took later rounds on refuses these as stale. On success writes the context to *out and returns 0. On
 * failure writes NULL to *out (when out is not NULL) and returns -EINVAL
 * (o or out NULL; world 0 or above 64; rank >= world; an address that is
 * not a dotted quad, or a dp_addr that is not unicast; elems above 8192;
 * window above 32768; a port range past 65535; a transport that is not
 * udp, xdp, rdma or ring, ifname or queue without xdp; ring without
 * ring or ring_key), -ENOMEM, or the socket's
 * error (-EADDRINUSE, ...; for xdp also -EOPNOTSUPP: built without
 * libxdp; -ENODEV: no such interface; -EPERM: not privileged; -EBUSY:
 * an XDP program is already on the interface; -EMSGSIZE: packets larger
 * than the interface's MTU or an AF_XDP frame); tally_ctx_error(NULL) then
 * tells why, in this thread.
 *
 * Transport "ring" (the ring fallback, docs/scale-out.md) opens no
 * socket toward a dataplane: it listens at ring[rank], connects to
 * rank + 1's listener (retrying while refused) and takes rank - 1's
 * connection, each end proving it holds ring_key, within
 * join_timeout_ms (0 = 120000): -ETIMEDOUT, -EACCES (rank + 1 holds
 * another key) or a socket's error otherwise. Its allreduces
 * (tally_allreduce_i32(), tally_allreduce_f32(), tally_allreduce()
 * with "fixp", tally_allreduce_mean(), tally_allreduce_max_f32()) give
 * the bits the dataplane would; every other call fails with
 * -EOPNOTSUPP and leaves the context usable. A ring call fails with
 * -ETIMEDOUT when a neighbour sent or took nothing for timeout_ms,
 * -ECONNRESET when one closed (failed or died: every rank learns it
 * within the timeout), -EPROTO when one is out of step (another call
 * or size; counted in ring_bad_frames).
 */
int tally_ctx_open(const struct tally_ctx_opts *o, struct tally_ctx **out);

/*
 * Joins a job through tallyd and opens a context for it: url is
 * "tally://HOST[:PORT]/JOB[?ca=FILE][&tls=on|off]
 * [&transport=udp|xdp|rdma|ring][&rdma_device=NAME][&ifname=IF][&queue=N]"
 * (port 7470 by default; the job's transport, from tallyd, unless
 * transport= asks for one: a job of the other fails with
 * -EPROTONOSUPPORT; xdp is the worker's choice for a udp job, on
 * interface IF and its receive queue N), token the job's 64 hex digits from `tallyctl job create`,
 * rank and world this worker's place. The rendezvous runs in TLS: tallyd's
 * certificate must be signed by a CA of the first of opts.ca_file
 * (tally_open_opts()), the URL's ca=, the environment's TALLY_CA, the
 * system's trust store, and must name HOST; the token is sent only after
 * that. tls=off in the URL or TALLY_TLS=off turns TLS off, for a tallyd
 * configured without it (unsafe: the token crosses in clear). Blocks at
 * tallyd's join barrier until every rank of the world has joined. Writes
 * the context to *out and returns 0, or writes NULL and returns, with
 * tallyd's sentence in tally_ctx_error(NULL):
 *   -EINVAL     a bad url, token, rank or world (checked here), or a
 *               world that differs from the job's (tallyd)
 *   -EACCES     no job of that name, or a wrong token (tallyd tells
 *               no one without the token which it was)
 *   -ERANGE     rank out of range    -EEXIST  that rank already joined
 *   -EADDRNOTAVAIL  the address this worker sends from is not the one it
 *               reaches tallyd from, and tallyd's rendezvous_data_map does
 *               not map one to the other
 *   -ETIMEDOUT  the other ranks did not all join in tallyd's
 *               join_timeout_s (or join_timeout_ms passed here)
 *   -ECANCELED  the job is being deleted
 *   -EHOSTDOWN  tallyd cannot reach the dataplane
 *   -ENOSPC     no live dataplane is left for the job (no capacity);
 *               the sentence ends with "(fallback: ring)"
 *   -EKEYREJECTED  tallyd's certificate is not trusted or not for HOST
 *   -EPROTONOSUPPORT  the job's transport is not the one asked for
 *   -EPROTO     a malformed exchange, or no TLS agreed (e.g. TLS on one
 *               side only); -ECONNREFUSED etc.: no tallyd
 * Calling it again after an allreduce failed (e.g. after a dataplane
 * restart) forms a new membership with fresh slots: every rank must.
 *
 * The ring fallback (docs/scale-out.md): tally_open() also opens a TCP
 * listener (on the address it reaches tallyd from, or bind_addr) and
 * names it in its join. When the job has no live dataplane, or the URL's
 * transport=ring (or opts' transport "ring") asks for it, tallyd forms
 * the membership without a dataplane and gives every rank the others'
 * listeners: the context then runs on a TCP ring among the workers
 * (tally_ctx_info()'s transport "ring"; a WARNING on stderr), with the
 * results the dataplane would give (tally_ctx_open(), transport "ring").
 */
int tally_open(const char *url, const char *token, unsigned int rank,
	unsigned int world, struct tally_ctx **out);

/*
 * tally_open() with options: of base (borrowed; NULL = defaults), it
 * uses bind_addr, bind_port, window and elems (each capped at the job's),
 * rto_us, timeout_ms, join_timeout_ms, ca_file, transport (as the URL's
 * transport=), rdma_device, rdma_port, ifname and queue; tallyd
 * supplies the rest.
 */
int tally_open_opts(const char *url, const char *token, unsigned int rank,
	unsigned int world, const struct tally_ctx_opts *base,
	struct tally_ctx **out);

/*
 * Joins the job again in its next epoch (docs/scale-out.md, "Epochs").
 * After a call failed (-ETIMEDOUT: a dataplane of the job died, or the
 * network lost every packet for timeout_ms) the context is out of step;
 * the next call on a context from tally_open() rejoins by itself first,
 * and so does this, explicitly. It names the epoch the context was in:
 * tallyd answers once it has moved the job to the surviving dataplanes
 * under a new wire token (or, when every rank rejoins naming the current
 * epoch, once it has started a new one for them); the context binds the
 * same UDP address and port and goes on with the new dataplanes, token
 * and keys, its codec memory and counters kept. An epoch whose membership
 * is over is joined anew (a barrier of every rank). Blocks up to
 * join_timeout_ms. The input contract: tally_allreduce_i32(),
 * tally_allreduce_f32(), tally_allreduce_max_f32() and tally_allreduce()
 * with the fixp codec keep a copy of their in-place input on a context
 * from tally_open(); when they fail, buf holds the caller's input again,
 * so the same call can simply be made again. Returns 0, or -EOPNOTSUPP
 * (not opened through tallyd, or transport rdma/xdp), or tally_open()'s
 * errors (-ENOSPC: no dataplane left, see the fallback).
 */
int tally_rejoin(struct tally_ctx *ctx);

/* The job's epoch this context is in (ready's); 0 when not from tallyd. */
uint32_t tally_ctx_epoch(const struct tally_ctx *ctx);

/*
 * Closes the socket and frees the context, with its staging for device
 * tensors (after the work of its last device call is done). NULL is
 * fine.
 */
void tally_ctx_close(struct tally_ctx *ctx);

/*
 * Element types of the typed collectives (tally_allreduce_typed(),
 * tally_reduce_scatter(), tally_allgather(), tally_broadcast()). f32,
 * bf16 and f16 are summed in shared-scale fixed point and rounded once
 * to the input type; i32 exactly (wrapping). The values are part of the
 * API (the Python binding passes them).
 */
enum tally_dtype {
	TALLY_DT_F32 = 0,
	TALLY_DT_I32 = 1,
	TALLY_DT_BF16 = 2,
	TALLY_DT_F16 = 3,
};

/*
 * Sums buf[0..n) over all ranks, in place, exactly: 32-bit two's
 * complement, wrapping. Borrows buf for the call (its elements are sent
 * straight from it, and the sums written over it). Returns 0, or:
 * -EINVAL (ctx NULL, buf NULL with n > 0, n above 2^32 - 1), -ETIMEDOUT
 * (no result for timeout_ms: a member is missing, or the dataplane drops
 * the packets, e.g. for a wrong token), -EPROTO (the dataplane refused a
 * chunk with a NACK; the reason is in tally_ctx_error()), -EPIPE (an
 * earlier call failed), or a socket error. n == 0 returns 0 at once.
 */
int tally_allreduce_i32(struct tally_ctx *ctx, int32_t *buf, size_t n);

/*
 * Sums buf[0..n) over all ranks, in place, in shared-scale fixed point
 * (<tally/fixp.h>): a MAX round finds the global max |x|, from which every
 * rank derives the same exponent, encodes to i32, sums exactly, decodes.
 * Every rank gets the same bits, equal to decode(sum over ranks of
 * encode(x_r)). Borrows buf; encodes into a buffer of the context, grown
 * as needed and kept for later calls. Errors as tally_allreduce_i32(),
 * and -ERANGE when some rank's tensor holds an infinity (every rank gets
 * it; the context stays usable). NaNs count as 0.
 */
int tally_allreduce_f32(struct tally_ctx *ctx, float *buf, size_t n);

/*
 * Reduce-scatter: send holds world x count elements of dt, shard r
 * (elements r x count .. (r + 1) x count - 1) owned by rank r; every
 * rank's send is summed as tally_allreduce_i32() (i32, wrapping),
 * tally_allreduce_f32() (f32, shared-scale fixed point, the scale taken
 * over all of send: bit-identical on every rank) and
 * tally_allreduce_typed() (bf16, f16: the fixed point of
 * <tally/fixp16.h> in tally_ctx_lanes() lanes, the scale over all of
 * send, the shard rounded once to the type) sum, and rank r gets shard
 * r of the sums in recv (count elements: the very bits of shard r of
 * the allreduce of the same tensors; it receives nothing of the other
 * shards but a header a chunk). Borrows send and recv, which must not
 * overlap. count 0 returns 0 at once. Errors as the allreduces (-ERANGE
 * on every rank for an infinity in some rank's f32, bf16 or f16; NaNs
 * count as 0), -EINVAL for world x count above 2^32 - 1 or an unknown
 * dt (the context stays usable). In a q16, q8 or q4 job f32 goes
 * through the job's codec as tally_allreduce() applies it (lossy; the
 * shard is the bits of tally_allreduce()'s; the context's codec memory
 * kept for world x count elements). docs/collectives.md, "Codecs".
 */
int tally_reduce_scatter(struct tally_ctx *ctx, const void *send, void *recv,
	size_t count, enum tally_dtype dt);

/*
 * All-gather: rank r's count elements of dt in send become shard r of
 * recv (world x count elements) on every rank. The bytes move as they
 * are (any dt, f32 NaN payloads and -0 included), each rank's shard sent
 * once and never back to it. send may be recv's own shard (in place).
 * Errors as tally_reduce_scatter(), without -ERANGE.
 */
int tally_allgather(struct tally_ctx *ctx, const void *send, void *recv,
	size_t count, enum tally_dtype dt);

/*
 * Broadcast: root's n elements of dt in buf, to buf on every other rank,
 * as they are. -EINVAL for a root outside the job; otherwise errors as
 * tally_allgather().
 */
int tally_broadcast(struct tally_ctx *ctx, void *buf, size_t n,
	enum tally_dtype dt, unsigned int root);

/*
 * The f32 all-gather's codec on ctx: 0, exact (the default), or 8, the
 * lossy q8 all-gather of parameters (each chunk of a shard sent as i8
 * with its own scale, a quarter of the bytes; every element within
 * max|x| / 254 of its chunk, and every rank, its owner included, holding
 * the same bits; a NaN or an infinity gives -ERANGE on every rank).
 * Every rank must set the same (else -EPROTO). Other types stay exact.
 * -EINVAL for other bits, or q8 with elems of 8 or fewer.
 * docs/collectives.md, "A lossy q8 all-gather".
 */
int tally_ctx_set_allgather_codec(struct tally_ctx *ctx, unsigned int bits);
unsigned int tally_ctx_allgather_codec(const struct tally_ctx *ctx);

/*
 * Sums buf[0..n) over all ranks, in place, through the job's codec (the
 * context's: opts.codec, or what tallyd said; <tally/codec.h>). With
 * "fixp" it is tally_allreduce_f32(). Every rank gets the same bits.
 * Errors as tally_allreduce_f32(), and -EOPNOTSUPP for a codec this
 * build of libtally does not apply yet (the context stays usable).
 *
 * A codec with memory (tally_codec_has_memory(): 2bit, ef=1,
 * momentum > 0, powersgd) keeps it in the context for the one tensor
 * this is called with: a call with another n starts afresh. To reduce
 * several tensors through such a codec, give each its own struct
 * tally_state and call tally_allreduce_state().
 */
int tally_allreduce(struct tally_ctx *ctx, float *buf, size_t n);

/*
 * A tensor's codec memory: what the job's codec carries from one
 * allreduce of the tensor to the next. The error-feedback residual
 * (ef=1: what the codec did not send; 2bit: MXNet's residual), DGC's
 * momentum and accumulation (sparse with momentum), PowerSGD's Q (warm
 * start) and residual. docs/codecs/README.md says what each codec keeps.
 */
struct tally_state;

/*
 * Makes the memory of a tensor of n elements for ctx's codec, zeroed (a
 * fresh start). Borrows ctx (nothing of it is kept: a state may outlive
 * its context and serve a context opened again for the same job).
 * Returns 0 and writes *out, or -EINVAL (ctx or out NULL, n 0 or above
 * 2^32 - 1; a powersgd rows key above n) or -ENOMEM, with
 * tally_ctx_error(ctx) saying why. For a codec without memory the state
 * holds nothing and tally_allreduce_state() is tally_allreduce().
 */
int tally_state_new(struct tally_ctx *ctx, size_t n, struct tally_state **out);

/*
 * tally_state_new() with the matrix a powersgd state views its tensor
 * as: rows rows of ceil(n / rows) columns, row-major (element i is
 * M[i / cols][i % cols], as torch's tensor.view(rows, -1)), instead of
 * the job's rows key; 0: the job's. A per-tensor shape: a weight matrix
 * of shape (out, in...) is compressed as itself with rows = out. Every
 * rank must make the same states with the same shapes for the same
 * tensors, in the same order of calls (the caller's contract, as for
 * tensor sizes: the P and Q rounds' lengths follow the shape, and the
 * wire carries no shape). Errors as tally_state_new(), and -EINVAL for
 * rows above n, or rows != 0 with a codec other than powersgd (it has
 * no matrix), with tally_ctx_error(ctx) saying so.
 */
int tally_state_new_rows(struct tally_ctx *ctx, size_t n, uint32_t rows,
	struct tally_state **out);

/*
 * Frees a state, host or device (tally_state_new_cuda(): the work of
 * calls still running on it must be done first, as for any device
 * memory). NULL is fine.
 */
void tally_state_free(struct tally_state *st);

/*
 * tally_allreduce() of buf[0..n) with the tensor's memory st, which it
 * reads and updates. n must be the state's, ctx's codec the one st was
 * made for, and st a host state (not from tally_state_new_cuda() of
 * <tally/tally_cuda.h>) when the codec has memory (else -EINVAL).
 * Errors as tally_allreduce(). After
 * -ERANGE (the scale round met an infinity, before anything was sent)
 * st holds its residual plus this call's gradient: nothing is lost, and
 * the context stays usable. After any other error st is valid but its
 * contents are unspecified (the context must be closed anyway). buf is
 * unspecified after any error.
 */
int tally_allreduce_state(struct tally_ctx *ctx, struct tally_state *st,
	float *buf, size_t n);

/*
 * The f32 reduce-scatter with a tensor's codec memory: as
 * tally_reduce_scatter() with TALLY_DT_F32, but a q16, q8 or q4 job's
 * error feedback (ef=1) keeps st's residual (made by tally_state_new()
 * for world x count elements: a rank quantizes every shard it sends)
 * instead of the context's own. Any other codec reduce-scatters in the
 * exact fixed point, st unused (but checked). docs/collectives.md,
 * "Codecs".
 */
int tally_reduce_scatter_state(struct tally_ctx *ctx, struct tally_state *st,
	const float *send, float *recv, size_t count);

/*
 * The average of buf[0..n) over all ranks, in place, as a DDP hook
 * wants it: the bits of tally_allreduce_state() (st may be NULL:
 * tally_allreduce()) of buf[i] * (1.0f / world), a float product (the
 * GPU path multiplies the same way). With "fixp" and a world of a power
 * of two the division is folded into the decoding of each chunk, with
 * no pass over buf of its own (the same bits while buf[i] / world stays
 * above FLT_MIN, where the product would round); otherwise buf is multiplied first (a
 * codec's memory then holds the products, as when the caller
 * multiplies). Errors as tally_allreduce_state().
 */
int tally_allreduce_mean(struct tally_ctx *ctx, struct tally_state *st,
	float *buf, size_t n);

/*
 * Element-wise maximum of buf[0..n) over all ranks, in place, in IEEE
 * 754's total order (-NaN < -inf < ... < -0 < +0 < ... < +inf < +NaN).
 * Borrows buf. Errors as tally_allreduce_i32().
 */
int tally_allreduce_max_f32(struct tally_ctx *ctx, float *buf, size_t n);

/*
 * Sums buf[0..n) of element type dt over all ranks, in place: f32 as
 * tally_allreduce_f32(), i32 as tally_allreduce_i32(); bf16 and f16 (the
 * bits of each element, as uint16_t) through the shared-scale fixed point
 * of <tally/fixp16.h>: a MAX round, every element encoded straight from
 * its 16 bits (no float copy of the tensor), the integers summed exactly,
 * and each sum rounded ONCE to the type, to nearest even. Every rank
 * gets the same bits, whatever the order of arrival:
 * round(sum over ranks of encode(x_r)), within the bound <tally/fixp16.h>
 * states of the exact sum. The integers travel in tally_ctx_lanes(ctx,
 * dt) bits: 16 in a narrow job where the bound holds (bf16 up to 7
 * ranks, f16 up to 2), 32 otherwise, unless tally_ctx_set_lanes() chose.
 * Every rank must make the same choice. An infinity in any rank's input
 * gives -ERANGE on every rank (nothing sent; the context stays usable);
 * a NaN counts as 0; a zero sum is +0. Errors as tally_allreduce_f32(),
 * and -EINVAL for another dt.
 */
int tally_allreduce_typed(struct tally_ctx *ctx, void *buf, size_t n,
	enum tally_dtype dt);

/*
 * The lanes bf16 and f16 sums take on ctx: 0 = the rule of
 * tally_fixp16_lanes() (the default), 16 (half the bytes; the error
 * bound of <tally/fixp16.h> for 16-bit lanes then applies at any world)
 * or 32. Every rank must set the same. Returns 0 or -EINVAL.
 */
int tally_ctx_set_lanes(struct tally_ctx *ctx, unsigned int lanes);

/*
 * The lanes (16 or 32) tally_allreduce_typed() uses for dt on ctx: 32
 * for f32, i32 and a NULL ctx.
 */
unsigned int tally_ctx_lanes(const struct tally_ctx *ctx,
	enum tally_dtype dt);

/*
 * Sums n elements of encoding enc (a TALLY_ENC_ of <tally/proto.h>: i32,
 * i16, i8, i4 or sign, packed as docs/protocol.md says) over all ranks,
 * exactly, as the dataplane sums them: in 32-bit lanes, returned in
 * tally_enc_result(enc, narrow) where narrow is the job's (the context's
 * opts.narrow): wide i32 sums (sign: i8 counts of + votes), or the
 * contributions' own width saturated (sign: the majority bit). Borrows
 * src (read for the call; sent straight from it) and writes dst, which
 * must hold n elements of the result encoding (tally_enc_payload_len()
 * bytes) and may be src when the two encodings are the same. The codecs
 * build on it. i4 and sign need the context's elems to be a multiple of
 * 8. Errors as tally_allreduce_i32(), and -EINVAL for another enc.
 */
int tally_allreduce_enc(struct tally_ctx *ctx, unsigned int enc,
	const void *src, void *dst, size_t n);

/*
 * Text of the context's last error, "" if none; owned by the context,
 * valid until its next call. With ctx NULL: the last tally_ctx_open()
 * failure of the calling thread.
 */
const char *tally_ctx_error(const struct tally_ctx *ctx);

/*
 * What tally_allreduce_cuda() (<tally/tally_cuda.h>) does with a tensor in
 * GPU memory on a context: tally_ctx_info()'s cuda_path.
 */
enum tally_cuda_path {
	TALLY_CUDA_PATH_NONE = 0,	/* libtally was built without CUDA:
					 * -EOPNOTSUPP */
	TALLY_CUDA_PATH_NODEV,		/* built with CUDA, but no usable
					 * device (or driver): -ENODEV */
	TALLY_CUDA_PATH_CODEC,		/* the job's codec has no GPU path
					 * in this libtally: -EOPNOTSUPP */
	TALLY_CUDA_PATH_STAGED,		/* encoded on the GPU into pinned,
					 * device-mapped staging, decoded on
					 * the GPU: no host copy */
	TALLY_CUDA_PATH_MAX_,
};

/*
 * The name of a path: "none", "no-device", "codec-not-on-gpu",
 * "gpu-staged"; "?" when out of range.
 */
const char *tally_cuda_path_name(unsigned int path);

/* What a context is for: the job as the dataplane knows it. */
struct tally_ctx_info {
	uint16_t job;		/* id at the dataplane */
	uint8_t rank;
	uint8_t world;
	uint16_t window;	/* slots in use */
	uint16_t elems;		/* elements a packet */
	uint8_t narrow;		/* sums come back in their own width */
	struct tally_codec codec; /* what tally_allreduce() applies */
	uint8_t cuda_path;	/* enum tally_cuda_path: what a device
				 * tensor's allreduce does here (asks the
				 * CUDA runtime whether a device is there) */
	uint32_t cuda_segment;	/* elements a staged segment: the
				 * context's, or what its first CUDA call
				 * will take; 0 without CUDA */
	uint64_t cuda_staging;	/* bytes of pinned staging the context
				 * holds (registered once, page-aligned);
				 * 0 before its first CUDA call */
	const char *transport;	/* "udp", "xdp", "xdp (zero-copy)", "rdma"
				 * or "ring" (the ring fallback: no
				 * dataplane, a TCP ring among the
				 * members): the context's; valid while
				 * it is open */
	uint8_t lanes_bf16;	/* tally_ctx_lanes() of bf16 and f16: the */
	uint8_t lanes_f16;	/* wire lanes (16 or 32) their sums take */
};

/* Fills *info from ctx. Borrows ctx. */
void tally_ctx_info(const struct tally_ctx *ctx, struct tally_ctx_info *info);

/* Counters over the context's life. */
struct tally_ctx_stats {
	uint64_t packets_sent;	/* contributions handed to the transport,
				 * retransmissions too */
	uint64_t retransmits;	/* of those, retransmissions (flag RETX) */
	uint64_t results;	/* results taken: one per chunk */
	uint64_t duplicates;	/* results ignored: for a chunk already done,
				 * or matching no outstanding chunk (but
				 * stale ones) */
	uint64_t nacks;		/* NACKs received for this worker */
	uint64_t bytes_sent;	/* UDP payload bytes sent */
	uint64_t bytes_received; /* UDP payload bytes received */
	uint64_t bundled;	/* of packets_sent, those that shared a
				 * datagram with others (block-sparse
				 * headers alone, all-gather requests:
				 * docs/protocol.md "Bundles") */
	uint64_t stale;		/* results ignored for being of a round
				 * older than the last their slot took
				 * (delayed or replayed copies) */
	uint64_t forged;	/* results and NACKs dropped for a missing
				 * or wrong tag (an authenticated job), or
				 * for carrying one (a plain job) */
	/* Why retransmits went, and how many were needless: */
	uint64_t rack;		/* a later-sent chunk was answered first
				 * (loss inferred, RACK) */
	uint64_t probes;	/* tail probes: nothing came back at the
				 * end of a call */
	uint64_t timeouts;	/* the timer expired (the last resort) */
	uint64_t spurious;	/* retransmissions found needless: the
				 * original's result came back, sooner than
				 * the retransmission could have, or the
				 * dataplane answered it from a result this
				 * worker already had */
	uint64_t cuda_calls;	/* allreduces of device tensors
				 * (<tally/tally_cuda.h>) that started */
	uint64_t cuda_segments;	/* their staged segments summed: each
				 * encoded by the GPU into a staging
				 * buffer, sent, decoded by the GPU */
	uint64_t cuda_staged_bytes; /* encoded bytes those segments sent */
	uint64_t cuda_wait_ns;	/* time the host waited for the GPU to
				 * finish encoding a segment: what the
				 * double buffering did not hide */
	uint64_t cuda_net_ns;	/* time the segments spent in the window
				 * (on the network) */
	uint64_t tp_errors;	/* the transport's failures that end the
				 * context (rdma: completions with an
				 * error status; the first one's status
				 * is in tally_ctx_error()) */
	uint64_t gap_nacks;	/* NACKs gap: the dataplane saw this
				 * worker's frames lost on the way in
				 * (docs/protocol.md, "Gaps") */
	uint64_t rejoins;	/* times this context joined its job again
				 * in a new epoch (tally_rejoin()) */
	uint64_t result_gaps;	/* results found lost on the way back: a
				 * later-numbered one came first (flag SEQ,
				 * docs/protocol.md "Gaps") */
	uint64_t gap_resends;	/* retransmissions those NACKs and gaps
				 * asked for (of retransmits; each chunk at
				 * most once, and none that already went
				 * again) */
	/* The ring fallback (transport "ring"; results, bytes_sent and
	 * bytes_received then count its frames and TCP bytes): */
	uint64_t ring_calls;	/* reductions run around the ring */
	uint64_t ring_refused;	/* connections refused at the hello: not
				 * of this ring (world, rank) or failing
				 * its key (another job, token or
				 * membership) */
	uint64_t ring_bad_frames; /* frames refused: another call, step or
				 * size (the ranks out of step) */
	uint64_t ignored;	/* datagrams dropped before a header was
				 * read: empty ones, and those the
				 * transport found not to come from the
				 * job's dataplane (AF_XDP, RDMA, a
				 * sharded job's socket) */
};

/* Copies the context's counters to *st. Borrows ctx. */
void tally_ctx_stats(const struct tally_ctx *ctx, struct tally_ctx_stats *st);

#ifdef __cplusplus
}
#endif

#endif /* TALLY_TALLY_H */

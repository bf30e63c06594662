/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The ring fallback (ring.c): a host ring allreduce over TCP among a
 * job's members, for when the job has no live dataplane
 * (docs/scale-out.md, "Ring fallback"; the wire format is in
 * docs/protocol.md, "Ring fallback"). Each member listens on a TCP port,
 * connects to the next rank's and is connected to by the previous
 * rank; the two ends prove to each other, with an HMAC-SHA256 over
 * fresh nonces, that they hold the ring's key (never sent). A reduction
 * is a reduce-scatter then an all-gather around the ring, in chunks,
 * over 32-bit lanes: i32 sums (wrapping) and maxima of i32 or of f32 in
 * IEEE 754's total order, exactly as tally-dp folds them, so every rank
 * ends with the same bits, and the same bits tally-dp would give.
 */
#ifndef TALLY_LIB_RING_H
#define TALLY_LIB_RING_H

#include <stddef.h>
#include <stdint.h>

#define TALLY_RING_KEY_LEN	32
#define TALLY_RING_WHY_LEN	256

struct tally_ring;

/* What a reduction folds (lanes of 32 bits). */
enum tally_ring_op {
	TALLY_RING_SUM_I32 = 1,
	TALLY_RING_MAX_I32 = 2,
	TALLY_RING_MAX_F32 = 3,
};

/* A ring's counters, over its life. */
struct tally_ring_stats {
	uint64_t calls;		/* reductions run */
	uint64_t chunks;	/* chunks received and taken */
	uint64_t bytes_sent;	/* TCP payload, headers included */
	uint64_t bytes_received;
	uint64_t refused;	/* connections refused at the hello: bad
				 * magic or version, wrong world or rank,
				 * a MAC that does not verify (wrong job,
				 * token or epoch), or too slow */
	uint64_t bad_frames;	/* data frames refused: wrong call, step,
				 * size or offset (the ranks are out of
				 * step); each ends the ring */
};

/*
 * Opens the listener on ip:port (network order; port 0: an ephemeral
 * one). Returns the ring, or NULL with errno set and the reason in why
 * (wlen bytes).
 */
struct tally_ring *tally_ring_listen(uint32_t ip, uint16_t port, char *why,
	size_t wlen);

/* The listener's address (network order). */
void tally_ring_local(const struct tally_ring *g, uint32_t *ip,
	uint16_t *port);

/*
 * Joins the ring of world members as rank, peers[] their listeners'
 * addresses (network order, rank order; peers[rank] unused): connects
 * to rank + 1 (retrying while it refuses), accepts rank - 1, each hello
 * checked with key (TALLY_RING_KEY_LEN bytes, borrowed). Connections
 * that fail the hello are refused and counted; the wait for the right
 * one goes on until deadline_ms (CLOCK_MONOTONIC ms). A world of 1
 * needs no connection. Returns 0 or -errno (-ETIMEDOUT, -ECONNREFUSED,
 * ...) with the reason in why.
 */
int tally_ring_connect(struct tally_ring *g, const uint32_t *peer_ip,
	const uint16_t *peer_port, unsigned int rank, unsigned int world,
	const uint8_t *key, int64_t deadline_ms, char *why, size_t wlen);

/*
 * Reduces n lanes of src over the ring into dst (may be src; both
 * borrowed, 4 n bytes): every rank must call it with the same op and n,
 * in the same order. A call fails with -ETIMEDOUT when a neighbour sent
 * or took nothing for timeout_ms, -ECONNRESET when one closed (it
 * failed or died), -EPROTO for a frame out of step; the ring is then
 * closed (its neighbours learn at once) and refuses every further call
 * with -EPIPE. Returns 0 or -errno with the reason in why.
 */
int tally_ring_reduce(struct tally_ring *g, enum tally_ring_op op,
	const void *src, void *dst, size_t n, unsigned int timeout_ms,
	char *why, size_t wlen);

/* Copies the counters. */
void tally_ring_stats(const struct tally_ring *g, struct tally_ring_stats *st);

/* Closes the sockets and frees; NULL is fine. */
void tally_ring_destroy(struct tally_ring *g);

/*
 * The key of the ring of membership epoch of job (its name), from the
 * job's token (32 bytes): HMAC-SHA256(token, "tally-ring-v1" job NUL
 * epoch as 4 bytes big-endian). Every member derives the same; a member
 * of another epoch or job, or without the token, cannot join.
 */
void tally_ring_key(const uint8_t token[32], const char *job, uint32_t epoch,
	uint8_t key[TALLY_RING_KEY_LEN]);

#endif /* TALLY_LIB_RING_H */

/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The ring fallback's reductions (ring.h): n lanes cut into world
 * segments; world - 1 steps of reduce-scatter (each rank sends one
 * segment to rank + 1 and folds the one from rank - 1 into its own),
 * then world - 1 steps of all-gather (the reduced segments travel on
 * around, copied). Each step sends and receives at once, in frames of
 * at most TALLY_RING_CHUNK lanes, over non-blocking sockets, so a large
 * segment cannot deadlock the ring. Every frame names the call, the
 * step, the size and the offset: a neighbour out of step is refused
 * with -EPROTO (counted), never folded in. docs/protocol.md, "Ring
 * fallback".
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "ring_int.h"

/* One direction of a step: a segment going out or coming in. */
struct xfer {
	int fd;
	size_t lo, len;		/* the segment, in lanes */
	size_t pos;		/* lanes of it done (whole frames) */
	uint8_t hdr[TALLY_RING_HDR_LEN];
	size_t hdone, pdone;	/* bytes of the frame's header, payload */
	uint32_t count;		/* lanes of the frame */
};

/* What a step is: the call's identity and where its lanes are. */
struct step {
	struct tally_ring *g;
	enum tally_ring_op op;
	uint32_t *dst;
	size_t n;
	unsigned int no;	/* 0 .. 2 world - 3 */
	int fold;		/* reduce-scatter: fold; all-gather: copy */
	char *why;
	size_t wlen;
};

static void
put32(uint8_t *b, uint32_t v)
{
	b[0] = (uint8_t)(v >> 24);
	b[1] = (uint8_t)(v >> 16);
	b[2] = (uint8_t)(v >> 8);
	b[3] = (uint8_t)v;
}

static uint32_t
get32(const uint8_t *b)
{
	return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 |
		(uint32_t)b[2] << 8 | b[3];
}

/* A frame's header: what the receiver checks before taking a byte. */
static void
frame_hdr(const struct step *s, const struct xfer *x, uint8_t *h)
{
	h[0] = TALLY_RING_DATA_MAGIC >> 8;
	h[1] = TALLY_RING_DATA_MAGIC & 0xff;
	h[2] = TALLY_RING_DATA;
	h[3] = (uint8_t)s->op;
	put32(h + 4, s->g->call);
	h[8] = (uint8_t)(s->no >> 8);
	h[9] = (uint8_t)s->no;
	h[10] = h[11] = 0;
	put32(h + 12, (uint32_t)s->n);
	put32(h + 16, (uint32_t)(x->lo + x->pos));
	put32(h + 20, x->count);
}

/* Lanes of the frame at x->pos. */
static uint32_t
frame_count(const struct xfer *x)
{
	size_t left = x->len - x->pos;

	return (uint32_t)(left < TALLY_RING_CHUNK ? left : TALLY_RING_CHUNK);
}

/* An f32's bits as an i32 in IEEE 754's total order (as tally-dp). */
static inline int32_t
order_key(uint32_t bits)
{
	int32_t b = (int32_t)bits;

	return b ^ (int32_t)((uint32_t)(b >> 31) >> 1);
}

static void
fold(enum tally_ring_op op, uint32_t *restrict d, const uint32_t *restrict s,
	size_t n)
{
	size_t i;

	if (op == TALLY_RING_SUM_I32) {
		for (i = 0; i < n; i++)
			d[i] += s[i];
	} else if (op == TALLY_RING_MAX_I32) {
		for (i = 0; i < n; i++)
			d[i] = (int32_t)s[i] > (int32_t)d[i] ? s[i] : d[i];
	} else {
		for (i = 0; i < n; i++)
			d[i] = order_key(s[i]) > order_key(d[i]) ? s[i] : d[i];
	}
}

/* Sends what the socket takes of x's frames. 0 or -errno. */
static int
tx_some(const struct step *s, struct xfer *x)
{
	while (x->pos < x->len) {
		struct iovec iov[2];
		struct msghdr mh = { .msg_iov = iov, .msg_iovlen = 2 };
		ssize_t k;

		if (x->hdone == 0 && x->pdone == 0) {
			x->count = frame_count(x);
			frame_hdr(s, x, x->hdr);
		}
		iov[0] = (struct iovec){ x->hdr + x->hdone,
			TALLY_RING_HDR_LEN - x->hdone };
		iov[1] = (struct iovec){ (uint8_t *)(s->dst + x->lo + x->pos) +
			x->pdone, 4 * (size_t)x->count - x->pdone };
		k = sendmsg(x->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (k < 0)
			return errno == EAGAIN || errno == EINTR ? 0 : -errno;
		s->g->st.bytes_sent += (uint64_t)k;
		if ((size_t)k < iov[0].iov_len) {
			x->hdone += (size_t)k;
			continue;
		}
		x->pdone += (size_t)k - iov[0].iov_len;
		x->hdone = TALLY_RING_HDR_LEN;
		if (x->pdone == 4 * (size_t)x->count) {
			x->pos += x->count;
			x->hdone = x->pdone = 0;
		}
	}
	return 0;
}

/*
 * Checks a received frame header against the frame x expects next.
 * 0, or -EPROTO (counted) with the reason.
 */
static int
check_hdr(const struct step *s, struct xfer *x)
{
	const uint8_t *h = x->hdr;
	struct tally_ring *g = s->g;
	unsigned int step = (unsigned int)h[8] << 8 | h[9];

	x->count = frame_count(x);
	if ((h[0] << 8 | h[1]) == TALLY_RING_DATA_MAGIC &&
			h[2] == TALLY_RING_DATA && h[3] == s->op &&
			get32(h + 4) == g->call && step == s->no &&
			get32(h + 12) == s->n &&
			get32(h + 16) == x->lo + x->pos &&
			get32(h + 20) == x->count)
		return 0;
	g->st.bad_frames++;
	if ((h[0] << 8 | h[1]) != TALLY_RING_DATA_MAGIC ||
			h[2] != TALLY_RING_DATA)
		snprintf(s->why, s->wlen, "ring: rank %u sent something that "
			"is not a ring frame", g->left_rank);
	else if (get32(h + 4) != g->call || step != s->no)
		snprintf(s->why, s->wlen, "ring: rank %u is at call %u step "
			"%u, this rank at call %u step %u: the ranks' calls are "
			"out of step", g->left_rank, get32(h + 4), step,
			g->call, s->no);
	else if (get32(h + 12) != s->n || h[3] != s->op)
		snprintf(s->why, s->wlen, "ring: rank %u reduces %u lanes "
			"(op %u), this rank %zu (op %u): every rank must make "
			"the same call", g->left_rank, get32(h + 12), h[3],
			s->n, s->op);
	else
		snprintf(s->why, s->wlen, "ring: rank %u sent lanes %u+%u, "
			"expected %zu+%u", g->left_rank, get32(h + 16),
			get32(h + 20), x->lo + x->pos, x->count);
	return -EPROTO;
}

/* recv() of up to n bytes: >0, or 0 for "again", or -errno. */
static ssize_t
rx_bytes(struct tally_ring *g, int fd, void *buf, size_t n)
{
	ssize_t k = recv(fd, buf, n, MSG_DONTWAIT);

	if (k == 0)
		return -ECONNRESET;
	if (k < 0)
		return errno == EAGAIN || errno == EINTR ? 0 : -errno;
	g->st.bytes_received += (uint64_t)k;
	return k;
}

/* Takes what the socket holds of x's frames. 0 or -errno. */
static int
rx_some(const struct step *s, struct xfer *x)
{
	while (x->pos < x->len) {
		uint8_t *to;
		ssize_t k;

		if (x->hdone < TALLY_RING_HDR_LEN) {
			k = rx_bytes(s->g, x->fd, x->hdr + x->hdone,
				TALLY_RING_HDR_LEN - x->hdone);
			if (k <= 0)
				return (int)k;
			x->hdone += (size_t)k;
			if (x->hdone == TALLY_RING_HDR_LEN &&
					check_hdr(s, x) != 0)
				return -EPROTO;
			continue;
		}
		to = s->fold ? (uint8_t *)s->g->scratch :
			(uint8_t *)(s->dst + x->lo + x->pos);
		k = rx_bytes(s->g, x->fd, to + x->pdone,
			4 * (size_t)x->count - x->pdone);
		if (k <= 0)
			return (int)k;
		x->pdone += (size_t)k;
		if (x->pdone < 4 * (size_t)x->count)
			continue;
		if (s->fold)
			fold(s->op, s->dst + x->lo + x->pos, s->g->scratch,
				x->count);
		s->g->st.chunks++;
		x->pos += x->count;
		x->hdone = x->pdone = 0;
	}
	return 0;
}

/* Segment i of n lanes among world: [lo, lo + len). */
static void
segment(size_t n, unsigned int world, unsigned int i, struct xfer *x)
{
	size_t lo = (size_t)((unsigned __int128)n * i / world);
	size_t hi = (size_t)((unsigned __int128)n * (i + 1) / world);

	*x = (struct xfer){ .lo = lo, .len = hi - lo };
}

/* The sentence of a failed step; returns rc. */
static int
step_fail(const struct step *s, int rc, int out)
{
	const struct tally_ring *g = s->g;

	if (rc == -EPROTO)
		return rc;	/* check_hdr() said why */
	if (rc == -ETIMEDOUT)
		snprintf(s->why, s->wlen, "ring: no progress for the timeout "
			"(rank %u sent nothing or rank %u took nothing): a "
			"member is stuck or gone", g->left_rank, g->right_rank);
	else
		snprintf(s->why, s->wlen, "ring: the connection %s rank %u "
			"failed: %s (it failed or died)", out ? "to" : "from",
			out ? g->right_rank : g->left_rank, strerror(-rc));
	return rc;
}

/* Runs step s: its segment out to the right, one in from the left. */
static int
run_step(const struct step *s, unsigned int timeout_ms)
{
	struct tally_ring *g = s->g;
	unsigned int w = g->world, r = g->rank, k = s->no, ti, ri;
	struct xfer tx, rx;
	int rc;

	if (s->fold) {
		ti = (r + w - k % w) % w;
		ri = (r + 2 * w - k - 1) % w;
	} else {
		k -= w - 1;
		ti = (r + 1 + w - k) % w;
		ri = (r + w - k) % w;
	}
	segment(s->n, w, ti, &tx);
	segment(s->n, w, ri, &rx);
	tx.fd = g->right;
	rx.fd = g->left;
	while (tx.pos < tx.len || rx.pos < rx.len) {
		struct pollfd p[2] = {
			{ tx.pos < tx.len ? g->right : -1, POLLOUT, 0 },
			{ rx.pos < rx.len ? g->left : -1, POLLIN, 0 } };

		rc = poll(p, 2, (int)timeout_ms);
		if (rc == 0)
			return step_fail(s, -ETIMEDOUT, 0);
		if (rc < 0 && errno != EINTR)
			return step_fail(s, -errno, 0);
		if (rc < 0)
			continue;
		if (p[0].revents != 0 && (rc = tx_some(s, &tx)) != 0)
			return step_fail(s, rc, 1);
		if (p[1].revents != 0 && (rc = rx_some(s, &rx)) != 0)
			return step_fail(s, rc, 0);
	}
	return 0;
}

int
tally_ring_reduce(struct tally_ring *g, enum tally_ring_op op,
	const void *src, void *dst, size_t n, unsigned int timeout_ms,
	char *why, size_t wlen)
{
	struct step s = { .g = g, .op = op, .dst = dst, .n = n, .why = why,
		.wlen = wlen };
	int rc = 0;

	if (g->broken)
		return snprintf(why, wlen, "ring: closed after an earlier "
			"failure"), -EPIPE;
	if (n > UINT32_MAX || op < TALLY_RING_SUM_I32 ||
			op > TALLY_RING_MAX_F32)
		return snprintf(why, wlen, "ring: %zu lanes of op %d", n, op),
			-EINVAL;
	if (dst != src && n > 0)
		memmove(dst, src, 4 * n);
	if (g->scratch == NULL && g->world > 1 && (g->scratch = malloc(4 *
			(size_t)TALLY_RING_CHUNK)) == NULL)
		return snprintf(why, wlen, "ring: out of memory"), -ENOMEM;
	g->st.calls++;
	for (s.no = 0; n > 0 && s.no + 2 < 2u * g->world && rc == 0; s.no++) {
		s.fold = s.no + 1 < g->world;
		rc = run_step(&s, timeout_ms != 0 ? timeout_ms : 5000);
	}
	g->call++;
	if (rc != 0) {
		/* Closed at once: the neighbours fail now, not at timeout. */
		g->broken = 1;
		tally_ring_close_data(g);
	}
	return rc;
}

void
tally_ring_stats(const struct tally_ring *g, struct tally_ring_stats *st)
{
	*st = g->st;
}

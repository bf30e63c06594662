/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A context on the ring fallback (docs/scale-out.md, "Ring fallback"):
 * its rounds run around a TCP ring among the members (ring.c) instead
 * of through a dataplane. The round is the same (window.c's): a SUM of
 * i32 lanes or a MAX of f32 or i32, with the round's encode and decode
 * steps around it, so tally_allreduce_i32(), tally_allreduce_f32() (its
 * MAX round for the scale, then the exact i32 sum), the mean and
 * tally_allreduce_max_f32() give the very bits the dataplane would.
 * Rounds the ring does not carry (narrow encodings, collectives with
 * owners, block-sparse streams) fail with -EOPNOTSUPP and leave the
 * context usable. The context's transport is a stub named "ring" whose
 * packet calls fail the same way, and which owns the ring.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>

#include "chan.h"
#include "ctx.h"
#include "rdv/msg.h"
#include "ring.h"

#define NOT_ON_RING	"the ring fallback carries sums of i32 and f32 " \
	"(fixp) and maxima only"

/* The stub transport: its name, and the ring it owns. */
struct ring_tp {
	struct tally_transport tp;
	struct tally_ring *ring;
};

static int
stub_send(struct tally_transport *tp, const struct tally_tx_pkt *pkts,
	unsigned int n)
{
	(void)pkts;
	(void)n;
	snprintf(tp->why, sizeof(tp->why), "%s", NOT_ON_RING);
	return -EOPNOTSUPP;
}

static int
stub_recv(struct tally_transport *tp, struct tally_rx_pkt *pkts,
	unsigned int n, unsigned int timeout_us)
{
	(void)pkts;
	(void)n;
	(void)timeout_us;
	snprintf(tp->why, sizeof(tp->why), "%s", NOT_ON_RING);
	return -EOPNOTSUPP;
}

static int
stub_local(struct tally_transport *tp, uint32_t *ip, uint16_t *port)
{
	tally_ring_local(((struct ring_tp *)tp)->ring, ip, port);
	return 0;
}

static void
stub_destroy(struct tally_transport *tp)
{
	tally_ring_destroy(((struct ring_tp *)tp)->ring);
	free(tp);
}

static const struct tally_transport_ops stub_ops = {
	.send = stub_send, .recv = stub_recv, .local = stub_local,
	.destroy = stub_destroy,
};

/* "IP:PORT" into ip and port (network order). 0 or -EINVAL. */
static int
parse_addr(const char *s, uint32_t *ip, uint16_t *port)
{
	char buf[32], *colon, *end;
	unsigned long p;
	struct in_addr a;

	if (s == NULL || strlen(s) >= sizeof(buf))
		return -EINVAL;
	strcpy(buf, s);
	if ((colon = strchr(buf, ':')) == NULL)
		return -EINVAL;
	*colon = '\0';
	p = strtoul(colon + 1, &end, 10);
	if (inet_pton(AF_INET, buf, &a) != 1 || end == colon + 1 ||
			*end != '\0' || p > 65535 || colon[1] == '-' ||
			colon[1] == '+')
		return -EINVAL;
	*ip = a.s_addr;
	*port = htons((uint16_t)p);
	return 0;
}

/* Parses o's ring addresses into ip[] and port[]. 0 or -EINVAL. */
static int
ring_addrs(const struct tally_ctx_opts *o, uint32_t *ip, uint16_t *port)
{
	if (o->ring == NULL || o->ring_key == NULL)
		return tally_ctx_open_fail(-EINVAL, "transport ring needs "
			"ring (the members' addresses) and ring_key");
	for (unsigned int r = 0; r < o->world; r++) {
		if (parse_addr(o->ring[r], &ip[r], &port[r]) != 0)
			return tally_ctx_open_fail(-EINVAL, "ring[%u] '%s' is "
				"not IP:PORT", r, o->ring[r] != NULL ?
				o->ring[r] : "(null)");
		if (r != o->rank && port[r] == 0)
			return tally_ctx_open_fail(-EINVAL, "ring[%u] has no "
				"port", r);
	}
	return 0;
}

int
tally_lib_ring_open(struct tally_ctx *ctx, const struct tally_ctx_opts *o,
	struct tally_ring *g)
{
	uint32_t ip[TALLY_MAX_WORKERS];
	uint16_t port[TALLY_MAX_WORKERS];
	char why[TALLY_RING_WHY_LEN] = "";
	struct ring_tp *t = calloc(1, sizeof(*t));
	int rc = ring_addrs(o, ip, port);

	if (rc != 0 || t == NULL) {
		tally_ring_destroy(g);
		free(t);
		return rc != 0 ? rc : tally_ctx_open_fail(-ENOMEM, "out of "
			"memory");
	}
	if (g == NULL && (g = tally_ring_listen(ip[o->rank], port[o->rank],
			why, sizeof(why))) == NULL) {
		free(t);
		return tally_ctx_open_fail(-errno, "%s", why);
	}
	t->tp = (struct tally_transport){ .ops = &stub_ops, .name = "ring" };
	t->ring = g;
	ctx->tp = &t->tp;
	ctx->ring = g;
	rc = tally_ring_connect(g, ip, port, o->rank, o->world, o->ring_key,
		tally_chan_now_ms() + (o->join_timeout_ms != 0 ?
			o->join_timeout_ms : 120000), why, sizeof(why));
	return rc != 0 ? tally_ctx_open_fail(rc, "%s", why) : 0;
}

/* The ring's op for round r, or 0 when the ring does not carry it. */
static enum tally_ring_op
ring_op(const struct tally_round *r)
{
	if (r->shard != 0)
		return 0;
	if (r->type == TALLY_PT_SUM && r->enc == TALLY_ENC_I32)
		return TALLY_RING_SUM_I32;
	if (r->type == TALLY_PT_MAX && r->enc == TALLY_ENC_I32)
		return TALLY_RING_MAX_I32;
	if (r->type == TALLY_PT_MAX && r->enc == TALLY_ENC_F32)
		return TALLY_RING_MAX_F32;
	return 0;
}

int
tally_lib_ring_run(struct tally_ctx *ctx, const struct tally_round *r)
{
	enum tally_ring_op op = ring_op(r);
	char why[TALLY_RING_WHY_LEN] = "";
	int rc;

	if (op == 0)
		return tally_ctx_fail(ctx, -EOPNOTSUPP, "%s: this call (round "
			"type %u, encoding %s%s) needs a dataplane",
			NOT_ON_RING, r->type, tally_enc_name(r->enc),
			r->shard != 0 ? ", with owners" : "");
	if (r->encode != NULL)
		r->encode(r, 0, r->n);
	rc = tally_ring_reduce(ctx->ring, op, r->src, r->dst, r->n,
		ctx->timeout_ms, why, sizeof(why));
	if (rc != 0)
		return tally_ctx_fail(ctx, rc, "%s", why);
	if (r->decode != NULL)
		r->decode(r, 0, r->n, r->dst);
	return 0;
}

void
tally_lib_ring_stats(const struct tally_ctx *ctx, struct tally_ctx_stats *st)
{
	struct tally_ring_stats rs;

	tally_ring_stats(ctx->ring, &rs);
	st->results = rs.chunks;
	st->bytes_sent = rs.bytes_sent;
	st->bytes_received = rs.bytes_received;
	st->ring_calls = rs.calls;
	st->ring_refused = rs.refused;
	st->ring_bad_frames = rs.bad_frames;
}

/* 64 hex digits into 32 bytes. */
static void
unhex(const char *hex, uint8_t out[32])
{
	for (unsigned int i = 0; i < 32; i++) {
		char b[3] = { hex[2 * i], hex[2 * i + 1], 0 };

		out[i] = (uint8_t)strtoul(b, NULL, 16);
	}
}

int
tally_lib_ring_ctx(const struct tally_ctx_opts *base,
	const struct tally_rdv_msg *ready, const char *job, const char *token,
	struct tally_ring *g, int64_t deadline, struct tally_ctx **out)
{
	struct tally_ctx_opts o = *base;
	char addrs[TALLY_RDV_MAX_RING][24];
	const char *addrv[TALLY_RDV_MAX_RING];
	uint8_t tok[32], key[TALLY_RING_KEY_LEN];
	int64_t left = deadline - tally_chan_now_ms();
	int rc;

	if (ready->nring != o.world) {
		tally_ring_destroy(g);
		return tally_ctx_open_fail(-EPROTO, "tallyd's ring lists %u "
			"members, the world is %u", ready->nring, o.world);
	}
	for (unsigned int r = 0; r < ready->nring; r++) {
		struct in_addr a = { .s_addr = htonl(ready->ring[r].ip) };

		snprintf(addrs[r], sizeof(addrs[r]), "%s:%u", inet_ntoa(a),
			ready->ring[r].port);
		addrv[r] = addrs[r];
	}
	unhex(token, tok);
	tally_ring_key(tok, job, ready->epoch, key);
	explicit_bzero(tok, sizeof(tok));
	o.transport = "ring";
	o.ring = addrv;
	o.ring_key = key;
	o.shards = NULL;
	o.nshards = 0;
	o.group_addr = NULL;
	o.ifname = NULL;
	o.queue = 0;
	o.join_timeout_ms = left > 1000 ? (unsigned int)left : 1000;
	fprintf(stderr, "libtally: WARNING: job '%s' membership %u has no "
		"live dataplane: rank %u of %u runs on the ring fallback (TCP "
		"among the workers, no in-network aggregation)\n", job,
		ready->epoch, o.rank, o.world);
	rc = tally_lib_ctx_open(&o, g, out);
	explicit_bzero(key, sizeof(key));
	return rc;
}

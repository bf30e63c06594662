/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libtally contexts: opening one (checking the options, opening the
 * transport, kernel UDP or RDMA, allocating slots and buffers), closing it, its last error and
 * its counters.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdint.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tally/fixp.h>
#include <tally/limits.h>

#include "dev.h"
#include "ring.h"

#define DEFAULT_WINDOW		64
#define DEFAULT_RTO_US		2000u
#define DEFAULT_TIMEOUT_MS	5000u
#define WINDOW_MAX		32768	/* the dataplane's largest window */

/* Why the calling thread's last tally_ctx_open() failed. */
static __thread char open_err[TALLY_CTX_ERR_LEN];

int
tally_ctx_fail(struct tally_ctx *ctx, int rc, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(ctx->err, sizeof(ctx->err), fmt, ap);
	va_end(ap);
	return rc;
}

int
tally_ctx_open_fail(int rc, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(open_err, sizeof(open_err), fmt, ap);
	va_end(ap);
	return rc;
}

/* Parses a dotted quad into *ip (network order); name is for the text. */
static int
parse_ip(const char *name, const char *s, uint32_t *ip)
{
	struct in_addr a;

	if (s == NULL || inet_pton(AF_INET, s, &a) != 1)
		return tally_ctx_open_fail(-EINVAL, "%s '%s' is not an IPv4 address",
			name, s == NULL ? "(null)" : s);
	*ip = a.s_addr;
	return 0;
}

/* Whether ip (network order) can be the dataplane's: one host's. */
static int
unicast(uint32_t ip)
{
	uint32_t h = ntohl(ip);

	return h != INADDR_ANY && h != INADDR_BROADCAST && !IN_MULTICAST(h);
}

/*
 * o's dataplanes (a sharded job's shards, else uc's one) into uc and
 * the slot-to-stream map (transport.h). 0 or -EINVAL with open_err set.
 */
static int
check_shards(const struct tally_ctx_opts *o, struct tally_udp_conf *uc,
	struct tally_shard_map *m)
{
	unsigned int total = 0;

	if (o->nshards == 0 || o->shards == NULL) {
		*m = (struct tally_shard_map){ .n = 1, .total = uc->dp_nports,
			.np = { uc->dp_nports } };
		return 0;
	}
	if (o->nshards < 2 || o->nshards > TALLY_MAX_SHARDS)
		return tally_ctx_open_fail(-EINVAL, "nshards %u is not in "
			"2..%u", o->nshards, TALLY_MAX_SHARDS);
	m->n = o->nshards;
	uc->nshards = o->nshards;
	for (unsigned int h = 0; h < o->nshards; h++) {
		const struct tally_shard *s = &o->shards[h];
		struct tally_udp_shard *u = &uc->shards[h];
		int rc = parse_ip("shards[].addr", s->addr, &u->ip);

		if (rc == 0 && !unicast(u->ip))
			rc = tally_ctx_open_fail(-EINVAL, "shard %u's address "
				"'%s' is not unicast", h, s->addr);
		if (rc != 0)
			return rc;
		u->port = s->port != 0 ? s->port : TALLY_UDP_PORT;
		u->nports = s->nports != 0 ? s->nports : 1;
		if (u->port + u->nports - 1 > 65535)
			return tally_ctx_open_fail(-EINVAL, "shard %u's ports "
				"run past 65535", h);
		m->off[h] = (uint16_t)total;
		m->np[h] = u->nports;
		total += u->nports;
	}
	if (total > UINT16_MAX)
		return tally_ctx_open_fail(-EINVAL, "the shards have more "
			"than %u ports", UINT16_MAX);
	m->total = (uint16_t)total;
	/* The first shard is the dataplane of everything else (routes). */
	uc->dp_ip = uc->shards[0].ip;
	uc->dp_port = uc->shards[0].port;
	uc->dp_nports = uc->shards[0].nports;
	return 0;
}

/*
 * Checks o and fills the transport's conf and ctx's identity and limits
 * (defaults applied). Returns 0 or -EINVAL with open_err set.
 */
static int
check_opts(const struct tally_ctx_opts *o, struct tally_udp_conf *uc,
	struct tally_ctx *ctx)
{
	int rc = 0;

	if (o->world == 0 || o->world > TALLY_MAX_WORKERS)
		return tally_ctx_open_fail(-EINVAL, "world %u is not in 1..%u",
			o->world, TALLY_MAX_WORKERS);
	if (o->rank >= o->world)
		return tally_ctx_open_fail(-EINVAL, "rank %u is not below world %u",
			o->rank, o->world);
	if (o->scale_world != 0 && (o->scale_world < o->world ||
			o->scale_world > TALLY_FIXP_TIER_WORLD_MAX))
		return tally_ctx_open_fail(-EINVAL, "scale_world %u is not in "
			"%u..%u", o->scale_world, o->world,
			TALLY_FIXP_TIER_WORLD_MAX);
	if (o->elems > TALLY_MAX_ELEMS)
		return tally_ctx_open_fail(-EINVAL, "elems %u is above %u", o->elems,
			TALLY_MAX_ELEMS);
	if (o->window > WINDOW_MAX)
		return tally_ctx_open_fail(-EINVAL, "window %u is above %u", o->window,
			WINDOW_MAX);
	/* A sharded job's dataplanes are its shards (check_shards()). */
	if ((o->nshards != 0 && o->shards != NULL && o->dp_addr == NULL) ||
			(o->transport != NULL && strcmp(o->transport,
				"ring") == 0))
		uc->dp_ip = htonl(INADDR_LOOPBACK);	/* unused */
	else
		rc = parse_ip("dp_addr", o->dp_addr, &uc->dp_ip);
	if (rc == 0 && !unicast(uc->dp_ip))
		rc = tally_ctx_open_fail(-EINVAL, "dp_addr '%s' is not a unicast "
			"address", o->dp_addr);
	if (rc == 0 && o->bind_addr != NULL)
		rc = parse_ip("bind_addr", o->bind_addr, &uc->bind_ip);
	if (rc == 0 && o->group_addr != NULL) {
		rc = parse_ip("group_addr", o->group_addr, &uc->group_ip);
		if (rc == 0 && !IN_MULTICAST(ntohl(uc->group_ip)))
			rc = tally_ctx_open_fail(-EINVAL, "group_addr '%s' is not an "
				"IPv4 multicast address", o->group_addr);
		if (rc == 0 && o->bind_port == 0)
			rc = tally_ctx_open_fail(-EINVAL, "group_addr needs bind_port "
				"(the group's port)");
	}
	if (rc != 0)
		return rc;
	uc->dp_port = o->dp_port != 0 ? o->dp_port : TALLY_UDP_PORT;
	uc->dp_nports = o->dp_nports != 0 ? o->dp_nports : 1;
	if (uc->dp_port + uc->dp_nports - 1 > 65535)
		return tally_ctx_open_fail(-EINVAL, "ports %u..%u run past 65535",
			uc->dp_port, uc->dp_port + uc->dp_nports - 1);
	uc->bind_port = o->bind_port;
	if ((rc = check_shards(o, uc, &ctx->map)) != 0)
		return rc;
	ctx->dp_nports = ctx->map.total;
	ctx->job = o->job;
	ctx->token = o->token;
	ctx->rank = o->rank;
	ctx->world = o->world;
	ctx->scale_world = o->scale_world != 0 ? o->scale_world : o->world;
	ctx->narrow = o->narrow != 0;
	if (o->codec != NULL) {
		char why[160];

		if (tally_codec_parse(o->codec, &ctx->codec, why,
				sizeof(why)) != 0)
			return tally_ctx_open_fail(-EINVAL, "codec: %s", why);
	} else {
		(void)tally_codec_parse("fixp", &ctx->codec, NULL, 0);
	}
	ctx->window = o->window != 0 ? o->window : DEFAULT_WINDOW;
	ctx->elems = o->elems != 0 ? o->elems : TALLY_DEFAULT_ELEMS;
	ctx->rto_us = o->rto_us != 0 ? o->rto_us : DEFAULT_RTO_US;
	if (ctx->rto_us > TALLY_RTO_MAX_US)
		ctx->rto_us = TALLY_RTO_MAX_US;
	ctx->timeout_ms = o->timeout_ms != 0 ? o->timeout_ms :
		DEFAULT_TIMEOUT_MS;
	return 0;
}

/*
 * Opens ctx's AF_XDP transport toward uc's dataplane, on o's interface
 * and queue (packets as large as ctx's). 0 or -errno with open_err set.
 */
static int
open_xdp(struct tally_ctx *ctx, const struct tally_ctx_opts *o,
	const struct tally_udp_conf *uc)
{
	char why[TALLY_CTX_ERR_LEN] = "";
	struct tally_xdp_conf xc = { .udp = *uc, .ifname = o->ifname,
		.queue = o->queue, .max_frame = ctx->rx_room, .why = why,
		.why_len = sizeof(why) };
	const char *env = getenv("TALLY_XDP_BUSY_POLL");

	if (env != NULL)
		xc.busy_poll_us = (unsigned int)strtoul(env, NULL, 10);
	ctx->tp = tally_xdp_transport_create(&xc);
	if (ctx->tp == NULL)
		return tally_ctx_open_fail(-errno, "%s", why[0] != '\0' ? why :
			strerror(errno));
	return 0;
}

/* Expands an authenticated job's keys (keys borrowed) into ctx->mac. */
int
tally_lib_ctx_keys(struct tally_ctx *ctx, const struct tally_auth_keys *keys)
{
	const uint8_t *raw[3] = { keys->up, keys->down, keys->result };

	if (posix_memalign((void **)&ctx->mac, 64, 3 * sizeof(*ctx->mac)))
		return tally_ctx_open_fail(-ENOMEM, "out of memory");
	for (int i = 0; i < 3; i++)
		if (tally_mac_key_init(&ctx->mac[i], raw[i]) != 0)
			return tally_ctx_open_fail(-ENOTSUP, "an authenticated "
				"job needs AES instructions (AES-NI), which "
				"this CPU lacks");
	return 0;
}

static void
free_keys(struct tally_ctx *ctx)
{
	if (ctx->mac == NULL)
		return;
	for (int i = 0; i < 3; i++)
		tally_mac_key_wipe(&ctx->mac[i]);
	free(ctx->mac);
	ctx->mac = NULL;
}

/*
 * Which transport o asks for: 0 for UDP, 1 for RDMA (its options
 * checked), 2 for AF_XDP, 3 for the ring fallback, or -EINVAL with
 * open_err set.
 */
static int
check_transport(const struct tally_ctx_opts *o)
{
	if (o->transport != NULL && strcmp(o->transport, "ring") == 0)
		return o->nshards == 0 && o->ifname == NULL && o->queue == 0 &&
			o->group_addr == NULL ? 3 : tally_ctx_open_fail(
			-EINVAL, "the ring fallback takes no shards, ifname, "
			"queue or group_addr");
	if (o->transport != NULL && strcmp(o->transport, "xdp") == 0)
		return o->nshards == 0 ? 2 : tally_ctx_open_fail(-EINVAL,
			"a sharded job runs over udp only, not xdp");
	if (o->ifname != NULL || o->queue != 0)
		return tally_ctx_open_fail(-EINVAL, "ifname and queue are "
			"options of the xdp transport");
	if (o->transport == NULL || strcmp(o->transport, "udp") == 0)
		return 0;
	if (strcmp(o->transport, "rdma") != 0)
		return tally_ctx_open_fail(-EINVAL, "transport '%s': udp, xdp, "
			"rdma or ring", o->transport);
	if (o->nshards != 0)
		return tally_ctx_open_fail(-EINVAL, "a sharded job runs over "
			"udp only, not %s", o->transport);
	if (o->dp_nqpns == 0 || o->dp_nqpns > TALLY_VERBS_MAX_QPNS ||
			o->dp_qpns == NULL)
		return tally_ctx_open_fail(-EINVAL, "transport rdma needs the "
			"dataplane's QPNs (1..%u; dp_qpns, dp_nqpns)",
			TALLY_VERBS_MAX_QPNS);
	if (o->group_addr != NULL)
		return tally_ctx_open_fail(-EINVAL, "transport rdma takes "
			"results unicast only (no group_addr)");
	return 1;
}

/*
 * Sequence numbers on every fresh contribution, one count a dataplane
 * port (docs/protocol.md, "Gaps"), unless TALLY_GAP=0 (to compare): the
 * dataplane then NACKs a frame lost on the way in as soon as a later
 * one arrives, and numbers its results, so that a result lost on the
 * way back shows when the next one comes. UDP only: each port's frames
 * arrive in order there.
 */
static int
gap_seq(struct tally_ctx *ctx)
{
	const char *env = getenv("TALLY_GAP");

	if (env != NULL && strcmp(env, "0") == 0)
		return 0;
	ctx->tx_seq = calloc(2 * (size_t)ctx->dp_nports, sizeof(*ctx->tx_seq));
	if (ctx->tx_seq == NULL)
		return tally_ctx_open_fail(-ENOMEM, "out of memory");
	ctx->rx_seq = ctx->tx_seq + ctx->dp_nports;
	return 0;
}

/*
 * Opens ctx's transport: uc's UDP socket, an AF_XDP socket toward the
 * same ports, or o's RDMA queue pair (its packets as large as ctx's).
 * 0 or -errno with open_err set.
 */
static int
open_transport(struct tally_ctx *ctx, const struct tally_ctx_opts *o,
	const struct tally_udp_conf *uc, struct tally_ring **g)
{
	struct tally_verbs_conf vc = {
		.device = o->rdma_device, .port = o->rdma_port,
		.local_ip = uc->bind_ip, .dp_ip = uc->dp_ip,
		.dp_qpns = o->dp_qpns, .dp_nqpns = o->dp_nqpns,
		.qkey = o->qkey, .room = ctx->rx_room,
		.wire_max = (uint32_t)tally_job_udp_len(
			tally_codec_encs(ctx->codec.kind) |
			(ctx->mac != NULL ? TALLY_ENC_AUTH : 0), ctx->narrow,
			ctx->elems, NULL),
	};
	char why[TALLY_TP_WHY_LEN];
	int kind = check_transport(o);

	if (kind == 3) {
		struct tally_ring *ring = *g;

		*g = NULL;
		return tally_lib_ring_open(ctx, o, ring);
	}
	if (kind == 2)
		return open_xdp(ctx, o, uc);
	if (kind == 0) {
		ctx->tp = tally_udp_transport_create(uc);
		if (ctx->tp == NULL)
			return tally_ctx_open_fail(-errno, "udp socket on "
				"%s:%u: %s", o->bind_addr != NULL ?
				o->bind_addr : "0.0.0.0", o->bind_port,
				strerror(errno));
		return gap_seq(ctx);
	}
	ctx->tp = tally_verbs_transport_create(&vc, why, sizeof(why));
	if (ctx->tp == NULL)
		return tally_ctx_open_fail(-errno, "rdma: %s", why);
	ctx->dp_nports = o->dp_nqpns;	/* slots go to QPNs */
	ctx->map = (struct tally_shard_map){ .n = 1, .total = o->dp_nqpns,
		.np = { o->dp_nqpns } };
	return 0;
}

int
tally_ctx_open(const struct tally_ctx_opts *o, struct tally_ctx **out)
{
	return tally_lib_ctx_open(o, NULL, out);
}

int
tally_lib_ctx_open(const struct tally_ctx_opts *o, struct tally_ring *g,
	struct tally_ctx **out)
{
	struct tally_udp_conf uc = { 0 };
	struct tally_ctx *ctx;
	int rc;

	open_err[0] = '\0';
	if (out != NULL)
		*out = NULL;
	if (o == NULL || out == NULL) {
		tally_ring_destroy(g);
		return tally_ctx_open_fail(-EINVAL, "tally_ctx_open: %s is NULL",
			o == NULL ? "opts" : "out");
	}
	ctx = calloc(1, sizeof(*ctx));
	if (ctx == NULL) {
		tally_ring_destroy(g);
		return tally_ctx_open_fail(-ENOMEM, "out of memory");
	}
	rc = check_opts(o, &uc, ctx);
	if (rc == 0 && (rc = check_transport(o)) > 0)
		rc = 0;
	if (rc != 0)
		goto err_free;
	/* The back-off's spread: a seed of its own per rank and context. */
	tally_retx_init(&ctx->retx, ctx->rto_us, tally_lib_now_ns() ^
		((uint64_t)ctx->rank << 56) ^ (uint64_t)(uintptr_t)ctx);
	if (o->auth != NULL && (rc = tally_lib_ctx_keys(ctx, o->auth)) != 0)
		goto err_free;
	ctx->slots = calloc(ctx->window, sizeof(*ctx->slots));
	ctx->units = calloc(ctx->window, sizeof(*ctx->units));
	ctx->due = calloc(ctx->window, sizeof(*ctx->due));
	ctx->rx_room = TALLY_HDR_LEN + 4u * ctx->elems + TALLY_TAG_LEN;
	ctx->rxbuf = malloc((size_t)TALLY_TP_BURST * ctx->rx_room);
	if (ctx->slots == NULL || ctx->rxbuf == NULL || ctx->units == NULL ||
			ctx->due == NULL) {
		rc = tally_ctx_open_fail(-ENOMEM, "out of memory");
		goto err_free;
	}
	rc = open_transport(ctx, o, &uc, &g);
	if (rc != 0)
		goto err_free;
	tally_ring_destroy(g);	/* NULL when the ring took it */
	*out = ctx;
	return 0;
err_free:
	tally_ring_destroy(g);
	if (ctx->tp != NULL)
		tally_transport_destroy(ctx->tp);
	free(ctx->tx_seq);
	free_keys(ctx);
	free(ctx->rxbuf);
	free(ctx->due);
	free(ctx->units);
	free(ctx->slots);
	free(ctx);
	return rc;
}

void
tally_ctx_close(struct tally_ctx *ctx)
{
	if (ctx == NULL)
		return;
	tally_lib_dev_free(ctx->dev);
	tally_transport_destroy(ctx->tp);
	tally_lib_rejoin_free(ctx);
	free(ctx->keep);
	tally_state_free(ctx->state);
	free(ctx->fixp);
	free(ctx->stage);
	free(ctx->tx_seq);
	free_keys(ctx);
	free(ctx->rxbuf);
	free(ctx->due);
	free(ctx->units);
	free(ctx->slots);
	free(ctx);
}

const char *
tally_ctx_error(const struct tally_ctx *ctx)
{
	return ctx == NULL ? open_err : ctx->err;
}

void
tally_ctx_stats(const struct tally_ctx *ctx, struct tally_ctx_stats *st)
{
	if (st == NULL)
		return;
	if (ctx == NULL)
		memset(st, 0, sizeof(*st));
	else
		*st = ctx->st;
	/* No transport: a rejoin failed (rejoin.c); the next call retries. */
	if (ctx != NULL && ctx->tp != NULL) {
		st->spurious = ctx->retx.st.spurious;
		st->rack = ctx->retx.st.rack;
		st->probes = ctx->retx.st.probes;
		st->timeouts = ctx->retx.st.timeouts;
		st->gap_resends = ctx->retx.st.gap;
		st->tp_errors = ctx->tp->errors;
		if (ctx->ring != NULL)
			tally_lib_ring_stats(ctx, st);
	}
}

void
tally_ctx_info(const struct tally_ctx *ctx, struct tally_ctx_info *info)
{
	if (ctx == NULL || info == NULL)
		return;
	*info = (struct tally_ctx_info){
		.job = ctx->job, .rank = ctx->rank, .world = ctx->world,
		.window = ctx->window, .elems = ctx->elems,
		.narrow = ctx->narrow, .codec = ctx->codec,
		.cuda_path = (uint8_t)tally_lib_cuda_path(ctx),
		.transport = ctx->tp != NULL ? ctx->tp->name : "none",
		.lanes_bf16 = (uint8_t)tally_ctx_lanes(ctx, TALLY_DT_BF16),
		.lanes_f16 = (uint8_t)tally_ctx_lanes(ctx, TALLY_DT_F16),
	};
	if (info->cuda_path != TALLY_CUDA_PATH_NONE)
		info->cuda_segment = (uint32_t)tally_lib_dev_seg(ctx, 0);
	if (ctx->dev != NULL)
		info->cuda_staging = ctx->dev->block_len;
}

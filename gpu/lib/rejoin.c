/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Rejoining a job in a new epoch (docs/scale-out.md, "Epochs"). When a
 * dataplane of the job dies, a call in flight fails with -ETIMEDOUT and
 * leaves the context broken (its slots are out of step). The next call
 * (or tally_rejoin()) joins the job again through tallyd, naming the
 * epoch it was in: tallyd answers with the new epoch's dataplanes,
 * wire token and keys once it has moved the job, and the context goes on
 * with them, from the same UDP address and port (the membership's, so no
 * barrier of all ranks is needed). An in-place call's input is kept
 * aside while it runs and put back when it fails, so the caller can call
 * again with the same buffer and get the exact result.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>

#include "ctx.h"
#include "rdv/msg.h"

/* What tally_open_opts() was given, kept to join again. */
struct tally_rejoin {
	char *url;
	char token[TALLY_RDV_TOKEN_HEX + 1];
	unsigned int rank, world;
	struct tally_ctx_opts opts;	/* its strings are the copies below */
	char *ca_file, *transport, *rdma_device, *ifname;
	char bind_addr[INET_ADDRSTRLEN];	/* the member's address */
	uint16_t bind_port;
};

/* A copy of s (NULL stays NULL) into *out: 0 or -ENOMEM. */
static int
dup_opt(const char *s, char **out)
{
	*out = s != NULL ? strdup(s) : NULL;
	return s != NULL && *out == NULL ? -ENOMEM : 0;
}

void
tally_lib_rejoin_free(struct tally_ctx *ctx)
{
	struct tally_rejoin *rj = ctx->rj;

	if (rj == NULL)
		return;
	explicit_bzero(rj->token, sizeof(rj->token));
	free(rj->url);
	free(rj->ca_file);
	free(rj->transport);
	free(rj->rdma_device);
	free(rj->ifname);
	free(rj);
	ctx->rj = NULL;
}

int
tally_lib_rejoin_init(struct tally_ctx *ctx, const char *url,
	const char *token, unsigned int rank, unsigned int world,
	const struct tally_ctx_opts *base)
{
	struct tally_rejoin *rj = calloc(1, sizeof(*rj));
	struct in_addr a;
	uint32_t lip;
	uint16_t lport;

	if (rj == NULL)
		return -ENOMEM;
	ctx->rj = rj;
	if (base != NULL)
		rj->opts = *base;
	/* Nothing borrowed survives: what params set is set again. */
	rj->opts.auth = NULL;
	rj->opts.shards = NULL;
	rj->opts.nshards = 0;
	rj->opts.dp_qpns = NULL;
	rj->opts.codec = NULL;
	rj->opts.group_addr = NULL;
	rj->opts.dp_addr = NULL;
	if (dup_opt(url, &rj->url) != 0 ||
			dup_opt(rj->opts.ca_file, &rj->ca_file) != 0 ||
			dup_opt(rj->opts.transport, &rj->transport) != 0 ||
			dup_opt(rj->opts.rdma_device, &rj->rdma_device) != 0 ||
			dup_opt(rj->opts.ifname, &rj->ifname) != 0 ||
			tally_transport_local(ctx->tp, &lip, &lport) != 0) {
		tally_lib_rejoin_free(ctx);
		return -ENOMEM;
	}
	rj->opts.ca_file = rj->ca_file;
	rj->opts.transport = rj->transport;
	rj->opts.rdma_device = rj->rdma_device;
	rj->opts.ifname = rj->ifname;
	a.s_addr = lip;
	if (lip != 0)
		inet_ntop(AF_INET, &a, rj->bind_addr, sizeof(rj->bind_addr));
	rj->bind_port = ntohs(lport);
	strcpy(rj->token, token);
	rj->rank = rank;
	rj->world = world;
	return 0;
}

/*
 * Moves what outlives an epoch from ctx into n (the context of the new
 * one): codec memory, device staging, counters, settings, the rejoin
 * data and the kept input.
 */
static void
carry(struct tally_ctx *ctx, struct tally_ctx *n)
{
	n->state = ctx->state;
	n->dev = ctx->dev;
	n->codec_calls = ctx->codec_calls;
	n->lanes = ctx->lanes;
	n->st = ctx->st;
	n->rj = ctx->rj;
	n->keep = ctx->keep;
	n->keep_cap = ctx->keep_cap;
	ctx->state = NULL;
	ctx->dev = NULL;
	ctx->rj = NULL;
	ctx->keep = NULL;
	ctx->keep_cap = 0;
}

/* Joins again naming epoch (0: a plain join) into *n. */
static int
join(struct tally_rejoin *rj, uint32_t epoch, struct tally_ctx **n)
{
	struct tally_ctx_opts o = rj->opts;

	/* Bound to any (a multicast job): the route's address again. */
	o.bind_addr = rj->bind_addr[0] != '\0' ? rj->bind_addr : NULL;
	o.bind_port = rj->bind_port;
	return tally_lib_rdv_open(rj->url, rj->token, rj->rank, rj->world, &o,
		epoch, n);
}

int
tally_rejoin(struct tally_ctx *ctx)
{
	struct tally_ctx *n = NULL, tmp;
	struct tally_rejoin *rj;
	uint32_t was;
	int rc;

	if (ctx == NULL)
		return -EINVAL;
	rj = ctx->rj;
	if (rj == NULL)
		return tally_ctx_fail(ctx, -EOPNOTSUPP, "this context was not "
			"opened through tallyd (tally_open): nothing to "
			"rejoin");
	if (ctx->tp != NULL && strcmp(ctx->tp->name, "udp") != 0)
		return tally_ctx_fail(ctx, -EOPNOTSUPP, "a rejoin keeps the "
			"member's UDP port: transport %s cannot", ctx->tp->name);
	/* The new context binds the same address and port. */
	tally_transport_destroy(ctx->tp);
	ctx->tp = NULL;
	ctx->broken = 1;
	was = ctx->epoch;
	rc = join(rj, was, &n);
	if (rc == -ESTALE)	/* its membership is over: a plain join */
		rc = join(rj, 0, &n);
	if (rc != 0)
		return tally_ctx_fail(ctx, rc, "rejoin of epoch %u: %s", was,
			tally_ctx_error(NULL));
	carry(ctx, n);
	n->st.rejoins++;
	tmp = *ctx;
	*ctx = *n;
	*n = tmp;
	tally_ctx_close(n);
	return 0;
}

uint32_t
tally_ctx_epoch(const struct tally_ctx *ctx)
{
	return ctx != NULL ? ctx->epoch : 0;
}

int
tally_lib_keep(struct tally_ctx *ctx, const void *buf, size_t bytes)
{
	ctx->keep_buf = NULL;
	if (ctx->rj == NULL || bytes == 0)
		return 0;
	if (bytes > ctx->keep_cap) {
		void *p = realloc(ctx->keep, bytes);

		if (p == NULL)
			return tally_ctx_fail(ctx, -ENOMEM, "out of memory "
				"for a copy of the input (%zu bytes)", bytes);
		ctx->keep = p;
		ctx->keep_cap = bytes;
	}
	memcpy(ctx->keep, buf, bytes);
	ctx->keep_buf = (void *)(uintptr_t)buf;
	ctx->keep_len = bytes;
	return 0;
}

void
tally_lib_keep_restore(struct tally_ctx *ctx)
{
	if (ctx->keep_buf != NULL)
		memcpy(ctx->keep_buf, ctx->keep, ctx->keep_len);
	ctx->keep_buf = NULL;
}

/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * verbs_join URL TOKEN WORLD: WORLD ranks (threads) join a job through
 * tallyd with tally_open_opts(), over the fake RDMA device
 * (fakeverbs.c, sends going nowhere), and print one JSON line a rank:
 * {"rank", "rc", "error", "qpn" (its QP's), "dp_qpns" and "qkey" (what
 * its transport was given)}. For tests/lib/verbs_join_test.py, which
 * checks them against what tallyd programmed into a fake tally-dp.
 * The CA comes from TALLY_CA.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tally/tally.h>

#include "fakeverbs.h"
#include "lib/ctx.h"
#include "transport/verbs_int.h"

struct rank {
	pthread_t t;
	const char *url, *token;
	unsigned int r, world;
	int rc;
	char err[256];
	char out[1024];
};

/* The rank's line: its result, and its transport's view when open. */
static void
describe(struct rank *k, struct tally_ctx *ctx)
{
	const struct verbs_transport *v;
	int n;

	n = snprintf(k->out, sizeof(k->out), "{\"rank\": %u, \"rc\": %d, "
		"\"error\": \"%s\"", k->r, k->rc, k->err);
	if (ctx != NULL && strcmp(ctx->tp->name, "rdma") == 0) {
		v = (const struct verbs_transport *)ctx->tp;
		n += snprintf(k->out + n, sizeof(k->out) - (size_t)n,
			", \"qpn\": %u, \"qkey\": %u, \"dp_qpns\": [",
			ctx->tp->qpn, v->qkey);
		for (unsigned int i = 0; i < v->nqpns; i++)
			n += snprintf(k->out + n, sizeof(k->out) - (size_t)n,
				"%s%u", i ? ", " : "", v->qpns[i]);
		n += snprintf(k->out + n, sizeof(k->out) - (size_t)n, "]");
	}
	snprintf(k->out + n, sizeof(k->out) - (size_t)n, "}");
}

static void *
rank_main(void *arg)
{
	struct rank *k = arg;
	struct tally_ctx_opts o = { .join_timeout_ms = 10000 };
	struct tally_ctx *ctx = NULL;

	k->rc = tally_open_opts(k->url, k->token, k->r, k->world, &o, &ctx);
	snprintf(k->err, sizeof(k->err), "%s", k->rc != 0 ?
		tally_ctx_error(NULL) : "");
	for (char *p = k->err; *p != '\0'; p++)
		if (*p == '"' || *p == '\\')
			*p = '\'';
	describe(k, ctx);
	tally_ctx_close(ctx);
	return NULL;
}

int
main(int argc, char **argv)
{
	struct fakeverbs_conf fc = { .local_ip = htonl(INADDR_LOOPBACK),
		.dp_ip = htonl(INADDR_LOOPBACK) };
	struct rank ks[8];
	unsigned int world;

	if (argc != 4 || (world = (unsigned int)atoi(argv[3])) < 1 ||
			world > 8) {
		fprintf(stderr, "usage: verbs_join URL TOKEN WORLD(1-8)\n");
		return 2;
	}
	fakeverbs_reset(&fc);
	tally_verbs_set_default_ops(&fakeverbs_ops);
	for (unsigned int r = 0; r < world; r++) {
		ks[r] = (struct rank){ .url = argv[1], .token = argv[2],
			.r = r, .world = world };
		pthread_create(&ks[r].t, NULL, rank_main, &ks[r]);
	}
	for (unsigned int r = 0; r < world; r++) {
		pthread_join(ks[r].t, NULL);
		printf("%s\n", ks[r].out);
	}
	return 0;
}

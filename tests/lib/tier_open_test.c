/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tally_open()'s side of a two-tier tree (docs/scale-out.md, "Two
 * tiers"), against a scripted rendezvous server (plain TCP, tls=off)
 * that speaks docs/control.md's messages through the same formatter and
 * parser:
 * - a worker joins with its total rank and world (34 of 66: past 64),
 *   params' "tier" places it (rank 1 of a leaf of 3, scale_world 66):
 *   the context is the leaf member's (tally_ctx_info());
 * - transport=xdp on a tree is refused (EPROTONOSUPPORT, a sentence);
 * - a tree's params with the ring fallback are refused (EPROTO).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <tally/tally.h>

#include "rdv/msg.h"

#define TOKEN "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"

static int lfd;
static int ring_params;			/* the script: fallback params */
static int flat_params;			/* the script: params without a tier */
static struct tally_rdv_msg join;	/* what the server got */

static void
send_m(int fd, const struct tally_rdv_msg *m)
{
	uint8_t buf[4 + TALLY_RDV_MAX_MSG];
	int n = tally_rdv_format(m, buf, sizeof(buf));

	assert_true(n > 0);
	assert_int_equal(write(fd, buf, (size_t)n), n);
}

/* One message into *m: 0, or -1 when the client closed. */
static int
recv_m(int fd, struct tally_rdv_msg *m)
{
	uint8_t pre[4], body[TALLY_RDV_MAX_MSG];
	size_t len;

	if (recv(fd, pre, 4, MSG_WAITALL) != 4)
		return -1;
	len = tally_rdv_frame_len(pre);
	if (len == 0 || recv(fd, body, len, MSG_WAITALL) != (ssize_t)len)
		return -1;
	assert_int_equal(tally_rdv_parse(body, len, m, NULL, 0), 0);
	return 0;
}

/* The join, params with a tier, the member, ready. */
static void *
serve(void *arg)
{
	struct tally_rdv_msg p = { .op = TALLY_RDV_PARAMS, .window = 8,
		.max_elems = 256, .job_id = 3, .tier_rank = 1,
		.tier_world = 3, .scale_world = 66 }, m;
	int fd = accept(lfd, NULL, NULL);

	(void)arg;
	if (fd < 0)
		return NULL;
	if (recv_m(fd, &join) == 0) {
		if (ring_params) {
			p.ring_fallback = 1;
		} else {
			p.dp_ip = INADDR_LOOPBACK;
			p.dp_port = 47474;
			p.dp_nports = 1;
		}
		if (flat_params)
			p.tier_rank = p.tier_world = p.scale_world = 0;
		send_m(fd, &p);
		if (recv_m(fd, &m) == 0 && m.op == TALLY_RDV_MEMBER)
			send_m(fd, &(struct tally_rdv_msg){ .op =
				TALLY_RDV_READY, .wire_token = 1, .epoch = 2 });
	}
	close(fd);
	return NULL;
}

/* tally_open() of rank 34 of 66 against the script; its rc and ctx. */
static int
run(const char *query, struct tally_ctx **ctx)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
		.sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(sa);
	char url[128];
	pthread_t t;
	int rc;

	memset(&join, 0, sizeof(join));
	lfd = socket(AF_INET, SOCK_STREAM, 0);
	assert_int_equal(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(lfd, 4), 0);
	getsockname(lfd, (struct sockaddr *)&sa, &len);
	assert_int_equal(pthread_create(&t, NULL, serve, NULL), 0);
	snprintf(url, sizeof(url), "tally://127.0.0.1:%u/t?tls=off%s",
		ntohs(sa.sin_port), query);
	rc = tally_open(url, TOKEN, 34, 66, ctx);
	shutdown(lfd, SHUT_RDWR);
	pthread_join(t, NULL);
	close(lfd);
	return rc;
}

static void
placed(void **state)
{
	struct tally_ctx_info info;
	struct tally_ctx *ctx = NULL;
	int rc;

	(void)state;
	ring_params = 0;
	rc = run("", &ctx);
	if (rc != 0)
		fail_msg("tally_open: %d %s", rc, tally_ctx_error(NULL));
	assert_int_equal(join.rank, 34);
	assert_int_equal(join.world, 66);
	tally_ctx_info(ctx, &info);
	assert_int_equal(info.rank, 1);
	assert_int_equal(info.world, 3);
	assert_string_equal(info.transport, "udp");
	tally_ctx_close(ctx);
}

static void
xdp_refused(void **state)
{
	struct tally_ctx *ctx = NULL;

	(void)state;
	ring_params = 0;
	assert_int_equal(run("&transport=xdp", &ctx), -EPROTONOSUPPORT);
	assert_null(ctx);
	assert_non_null(strstr(tally_ctx_error(NULL), "two-tier tree"));
}

static void
ring_refused(void **state)
{
	struct tally_ctx *ctx = NULL;

	(void)state;
	ring_params = 1;
	assert_int_equal(run("", &ctx), -EPROTO);
	assert_null(ctx);
}

/* A world past 64 answered as a flat job (no tier): refused, not cut
 * to 8 bits. */
static void
flat_refused(void **state)
{
	struct tally_ctx *ctx = NULL;

	(void)state;
	ring_params = 0;
	flat_params = 1;
	assert_int_equal(run("", &ctx), -EPROTO);
	flat_params = 0;
	assert_null(ctx);
	assert_non_null(strstr(tally_ctx_error(NULL), "flat job"));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(placed),
		cmocka_unit_test(xdp_refused),
		cmocka_unit_test(ring_refused),
		cmocka_unit_test(flat_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tally_open()'s side of the ring fallback, against a scripted
 * rendezvous server (plain TCP, the URL's tls=off) that speaks the
 * messages of docs/control.md through the same formatter and parser:
 * - every join names the worker's ring listener;
 * - params with "fallback": "ring": no dataplane socket, the member
 *   message names the ring listener, ready's ring is joined;
 * - plain params, then a ready with "ring" (the dataplane went down at
 *   the barrier): the dataplane context is dropped for the ring's;
 * - an ENOSPC error (no capacity left, epochs): the worker joins again
 *   asking for the ring ("transport": "ring") and lands on it;
 * - ?transport=ring asks for it at the first join.
 * Each ends with a ring context (transport "ring") whose f32 and i32
 * allreduces work (a world of one).
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

enum script { FALLBACK, SWITCH, NOSPACE, ASKED };

static int lfd;
static uint16_t lport;
static enum script script;
static struct tally_rdv_msg joins[2];	/* what the server got */
static unsigned int njoins;

static void
send_m(int fd, const struct tally_rdv_msg *m)
{
	uint8_t buf[4 + TALLY_RDV_MAX_MSG];
	int n = tally_rdv_format(m, buf, sizeof(buf));

	assert_true(n > 0);
	assert_int_equal(write(fd, buf, (size_t)n), n);
}

static void
recv_m(int fd, struct tally_rdv_msg *m)
{
	uint8_t pre[4], body[TALLY_RDV_MAX_MSG];
	size_t len;

	assert_int_equal(recv(fd, pre, 4, MSG_WAITALL), 4);
	len = tally_rdv_frame_len(pre);
	assert_int_equal(recv(fd, body, len, MSG_WAITALL), (ssize_t)len);
	assert_int_equal(tally_rdv_parse(body, len, m, NULL, 0), 0);
}

/* params: the dataplane at 127.0.0.1:47474, or none (fallback). */
static void
send_params(int fd, int fallback)
{
	struct tally_rdv_msg p = { .op = TALLY_RDV_PARAMS, .window = 8,
		.max_elems = 256, .job_id = 3, .ring_fallback =
		(uint8_t)fallback };

	if (!fallback) {
		p.dp_ip = INADDR_LOOPBACK;
		p.dp_port = 47474;
		p.dp_nports = 1;
	}
	send_m(fd, &p);
}

/* One connection of the script; returns 1 when the script goes on. */
static int
serve_one(void)
{
	struct tally_rdv_msg m, r = { .op = TALLY_RDV_READY, .wire_token = 1,
		.epoch = 7, .nring = 1 };
	int fd = accept(lfd, NULL, NULL), more = 0;

	if (fd < 0)	/* run() gave up on the client */
		return 0;
	recv_m(fd, &joins[njoins]);
	m = joins[njoins++];
	if (script == NOSPACE && njoins == 1) {
		send_m(fd, &(struct tally_rdv_msg){ .op = TALLY_RDV_ERROR,
			.err = ENOSPC, .error = "no capacity left" });
		more = 1;
	} else {
		send_params(fd, script != SWITCH);
		r.ring[0] = m.ring_addr;
		recv_m(fd, &m);
		assert_int_equal(m.op, TALLY_RDV_MEMBER);
		if (script != SWITCH)	/* it names its ring listener */
			assert_int_equal(m.port, r.ring[0].port);
		send_m(fd, &r);
	}
	close(fd);
	return more;
}

static void *
serve(void *arg)
{
	(void)arg;
	while (serve_one())
		;
	return NULL;
}

static void
run(enum script s, const char *query)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
		.sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(sa);
	struct tally_ctx_info info;
	struct tally_ctx_stats st;
	struct tally_ctx *ctx = NULL;
	char url[128];
	float f[3] = { 1.5f, -2.0f, 0.25f };
	int32_t i[2] = { 7, -9 };
	pthread_t t;
	int rc;

	script = s;
	njoins = 0;
	lfd = socket(AF_INET, SOCK_STREAM, 0);
	assert_int_equal(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(lfd, 4), 0);
	getsockname(lfd, (struct sockaddr *)&sa, &len);
	lport = ntohs(sa.sin_port);
	assert_int_equal(pthread_create(&t, NULL, serve, NULL), 0);
	snprintf(url, sizeof(url), "tally://127.0.0.1:%u/j?tls=off%s", lport,
		query);
	rc = tally_open(url, TOKEN, 0, 1, &ctx);
	if (rc != 0)	/* the server may wait for a join that will not come */
		shutdown(lfd, SHUT_RDWR);
	pthread_join(t, NULL);
	close(lfd);
	if (rc != 0)
		fail_msg("tally_open: %d %s", rc, tally_ctx_error(NULL));
	tally_ctx_info(ctx, &info);
	assert_string_equal(info.transport, "ring");
	assert_int_equal(info.job, 3);
	assert_int_equal(tally_allreduce_f32(ctx, f, 3), 0);
	assert_true(f[0] == 1.5f && f[1] == -2.0f && f[2] == 0.25f);
	assert_int_equal(tally_allreduce_i32(ctx, i, 2), 0);
	assert_true(i[0] == 7 && i[1] == -9);
	tally_ctx_stats(ctx, &st);
	assert_int_equal(st.ring_calls, 3);
	tally_ctx_close(ctx);
	/* Every join named the ring listener, on the address it used. */
	for (unsigned int k = 0; k < njoins; k++) {
		assert_int_equal(joins[k].ring_addr.ip, INADDR_LOOPBACK);
		assert_int_not_equal(joins[k].ring_addr.port, 0);
	}
}

static void
fallback(void **state)
{
	(void)state;
	run(FALLBACK, "");
	assert_int_equal(njoins, 1);
	assert_int_equal(joins[0].ring_want, 0);
}

static void
switch_at_ready(void **state)
{
	(void)state;
	run(SWITCH, "");
	assert_int_equal(njoins, 1);
}

static void
no_capacity(void **state)
{
	(void)state;
	run(NOSPACE, "");
	assert_int_equal(njoins, 2);
	assert_int_equal(joins[0].ring_want, 0);
	assert_int_equal(joins[1].ring_want, 1);
}

static void
asked(void **state)
{
	(void)state;
	run(ASKED, "&transport=ring");
	assert_int_equal(njoins, 1);
	assert_int_equal(joins[0].ring_want, 1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(fallback),
		cmocka_unit_test(switch_at_ready),
		cmocka_unit_test(no_capacity),
		cmocka_unit_test(asked),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

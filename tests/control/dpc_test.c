/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tallyd's tally-dp client (control/tallyd/dpc*.c) against a socket the
 * test holds itself, playing tally-dp one request at a time: requests
 * never block and fail by their deadline; the poll reads job_list page by
 * page and reconciles (stale ids removed, differing or missing
 * memberships programmed again, token fingerprints compared); programming
 * a new membership folds the old one's final counters (job_del's reply,
 * or a reading just before it) into the job's, exactly.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <sodium.h>

#include "tally/token_fp.h"
#include "tallyd.h"
#include "dpc.h"

struct fixture {
	char dir[64];
	char sock[128];
	int lfd;		/* the fake tally-dp's listener */
	int sfd;		/* its accepted connection, or -1 */
	struct tallyd d;
};

/* What the callbacks of tallyd_dpc_request() saw. */
struct seen {
	int calls;
	int err;
	long long reply_errno;
};

static int
setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	struct sockaddr_un sa = { .sun_family = AF_UNIX };

	if (f == NULL || sodium_init() < 0)
		return -1;
	strcpy(f->dir, "/tmp/tallyd-dpc-test.XXXXXX");
	if (mkdtemp(f->dir) == NULL)
		return -1;
	snprintf(f->sock, sizeof(f->sock), "%s/dp.sock", f->dir);
	strcpy(sa.sun_path, f->sock);
	f->lfd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
	if (f->lfd < 0 || bind(f->lfd, (struct sockaddr *)&sa,
			sizeof(sa)) != 0 || listen(f->lfd, 0) != 0)
		return -1;
	f->sfd = -1;
	tallyd_conf_defaults(&f->d.conf);
	snprintf(f->d.conf.state_file, sizeof(f->d.conf.state_file),
		"%s/state.json", f->dir);
	f->d.ctl_fd = f->d.rdv_fd = -1;
	strcpy(f->d.dps[0].name, "dp0");
	f->d.dps[0].dpc = tallyd_dpc_create(0, f->sock);
	if (f->d.dps[0].dpc == NULL)
		return -1;
	f->d.ndps = 1;
	*state = f;
	return 0;
}

static int
teardown(void **state)
{
	struct fixture *f = *state;
	char path[300];

	while (f->d.jobs != NULL)
		tallyd_job_free(&f->d, f->d.jobs);
	tallyd_dps_close(&f->d);
	if (f->sfd >= 0)
		close(f->sfd);
	close(f->lfd);
	unlink(f->sock);
	snprintf(path, sizeof(path), "%s/state.json", f->dir);
	unlink(path);
	rmdir(f->dir);
	free(f);
	return 0;
}

/*
 * One turn of tallyd's loop for the dpc alone, and of the fake tally-dp:
 * waits at most 10 ms. Returns a request the fake received (parsed), or
 * NULL. Fails the test if tallyd's part took longer than 50 ms.
 */
static json_t *
turn(struct fixture *f)
{
	struct pollfd p[2];
	int64_t t0 = tallyd_now_ms(), w;
	json_t *req = NULL;
	char buf[65536];
	ssize_t n;

	w = tallyd_dpc_timers(&f->d, t0);
	tallyd_dpc_pollfd(&f->d, 0, &p[0]);
	p[1] = (struct pollfd){ .fd = f->sfd >= 0 ? f->sfd : f->lfd,
		.events = POLLIN };
	assert_true(poll(p, 2, w < 10 ? (int)w : 10) >= 0);
	if (p[0].revents)
		tallyd_dpc_event(&f->d, 0, p[0].revents);
	assert_true(tallyd_now_ms() - t0 < 50);
	if (!(p[1].revents & (POLLIN | POLLHUP)))
		return NULL;
	if (f->sfd < 0) {
		f->sfd = accept(f->lfd, NULL, NULL);
		return NULL;
	}
	n = recv(f->sfd, buf, sizeof(buf), 0);
	if (n <= 0) {
		close(f->sfd);
		f->sfd = -1;
		return NULL;
	}
	req = json_loadb(buf, (size_t)n, 0, NULL);
	assert_non_null(req);
	return req;
}

/* Runs turns for ms, expecting no request. */
static void
idle(struct fixture *f, int ms)
{
	int64_t end = tallyd_now_ms() + ms;

	while (tallyd_now_ms() < end)
		assert_null(turn(f));
}

/* The next request, which must be cmd; the caller frees it. */
static json_t *
expect(struct fixture *f, const char *cmd)
{
	int64_t end = tallyd_now_ms() + 2000;
	json_t *req;

	while (tallyd_now_ms() < end)
		if ((req = turn(f)) != NULL) {
			const char *c = json_string_value(json_object_get(req,
				"cmd"));

			if (strcmp(c, cmd) != 0)
				fail_msg("expected %s, got %s", cmd, c);
			return req;
		}
	fail_msg("no %s request in 2 s", cmd);
	return NULL;
}

/* The fake tally-dp answers the last request with text. */
static void
answer(struct fixture *f, const char *text)
{
	assert_int_equal(send(f->sfd, text, strlen(text), 0),
		(ssize_t)strlen(text));
}

/* expect() then answer(), for requests whose content does not matter. */
static void
serve(struct fixture *f, const char *cmd, const char *text)
{
	json_decref(expect(f, cmd));
	answer(f, text);
}

static void
record(struct tallyd *d, unsigned int dp, struct tallyd_job *j, json_t *reply,
	int err, uintptr_t arg)
{
	struct seen *s = (struct seen *)arg;

	(void)d;
	(void)dp;
	(void)j;
	s->calls++;
	s->err = err;
	s->reply_errno = reply != NULL ?
		json_integer_value(json_object_get(reply, "errno")) : -1;
}

static const char ping_reply[] = "{\"errno\":0,\"version\":\"t\","
	"\"steering\":\"software\",\"workers\":2,\"ip\":\"10.9.0.1\","
	"\"udp_port\":47474}";

/* A job with a programmed membership: id 1, world 2, window 64. */
static struct tallyd_job *
ready_job(struct tallyd *d, const char *name, uint64_t token)
{
	struct tallyd_job t = { .world = 2, .window = 64, .max_elems = 256 };
	char hex[TALLY_RDV_TOKEN_HEX + 1];
	struct tallyd_job *j;

	strcpy(t.name, name);
	j = tallyd_job_create(d, &t, hex);
	assert_non_null(j);
	j->members[0] = (struct tallyd_member){ 0x0a090002, 40001, 0 };
	j->members[1] = (struct tallyd_member){ 0x0a090003, 40001, 0 };
	j->wire_token = token;
	j->has_members = true;
	return j;
}

/* A job_list entry for j's id with j's configuration and rounds. */
static void
entry_text(char *buf, size_t len, const struct tallyd_job *j,
	unsigned int window, uint64_t fp_token, unsigned int rounds)
{
	int n = snprintf(buf, len, "{\"id\":%u,\"world\":2,\"window\":%u,"
		"\"max_elems\":256,\"narrow\":false,\"members\":["
		"{\"ip\":\"10.9.0.2\",\"port\":40001},"
		"{\"ip\":\"10.9.0.3\",\"port\":40001}],"
		"\"counters\":{\"rounds\":%u,\"contributions\":%u}",
		j->id, window, rounds, 2 * rounds);

	if (fp_token != 0)
		n += snprintf(buf + n, len - (size_t)n,
			",\"token_fp\":\"%016llx\"",
			(unsigned long long)tally_token_fp(fp_token));
	snprintf(buf + n, len - (size_t)n, "}");
}

/* Starts a poll and answers its ping (every poll begins with one). */
static void
poll_with_ping(struct fixture *f)
{
	tallyd_dpc_poll(&f->d);
	serve(f, "ping", ping_reply);
}

/* Every test starts with an empty tally-dp polled once. */
static void
first_poll(struct fixture *f)
{
	poll_with_ping(f);
	serve(f, "job_list", "{\"errno\":0,\"jobs\":[]}");
	serve(f, "stats", "{\"errno\":0,\"total\":{}}");
	idle(f, 30);
	assert_true(tallyd_dpc_up(f->d.dps[0].dpc));
}

/*
 * A tally-dp that takes the connection but never answers: the request
 * fails by its deadline (about 1 s) while each turn of the loop stays
 * short; tally-dp is down; the next request fails at once; a probe
 * whose connect is refused (the backlog is full) fails at once too.
 */
static void
test_deadline(void **state)
{
	struct fixture *f = *state;
	struct seen a = { 0 }, b = { 0 }, c = { 0 };
	int64_t t0 = tallyd_now_ms();
	int fill[4];

	first_poll(f);
	assert_int_equal(tallyd_dpc_request(&f->d, 0, json_pack("{s:s}", "cmd",
		"stats"), NULL, 0, record, (uintptr_t)&a), 0);
	json_decref(expect(f, "stats"));	/* and never answered */
	while (a.calls == 0 && tallyd_now_ms() - t0 < 3000)
		assert_null(turn(f));
	assert_int_equal(a.calls, 1);
	assert_int_equal(a.err, -ETIMEDOUT);
	assert_false(tallyd_dpc_up(f->d.dps[0].dpc));
	assert_int_equal(f->d.st.dp_timeouts, 1);

	t0 = tallyd_now_ms();
	tallyd_dpc_request(&f->d, 0, json_pack("{s:s}", "cmd", "stats"), NULL, 0,
		record, (uintptr_t)&b);
	while (b.calls == 0)
		turn(f);
	assert_int_equal(b.err, -EHOSTDOWN);
	assert_true(tallyd_now_ms() - t0 < 100);

	/* The fake stops accepting: its backlog fills. */
	close(f->sfd);
	f->sfd = -1;
	for (int i = 0; i < 4; i++) {
		struct sockaddr_un sa = { .sun_family = AF_UNIX };

		fill[i] = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK, 0);
		strcpy(sa.sun_path, f->sock);
		connect(fill[i], (struct sockaddr *)&sa, sizeof(sa));
	}
	t0 = tallyd_now_ms();
	tallyd_dpc_request(&f->d, 0, json_pack("{s:s}", "cmd", "ping"), NULL,
		TALLYD_DPC_PROBE, record, (uintptr_t)&c);
	while (c.calls == 0) {
		int64_t w = tallyd_dpc_timers(&f->d, tallyd_now_ms());
		struct pollfd p;

		tallyd_dpc_pollfd(&f->d, 0, &p);
		poll(&p, 1, w < 10 ? (int)w : 10);
		if (p.revents)
			tallyd_dpc_event(&f->d, 0, p.revents);
	}
	assert_int_equal(c.err, -EAGAIN);
	assert_true(tallyd_now_ms() - t0 < 100);
	for (int i = 0; i < 4; i++)
		close(fill[i]);
}

/* Down, then the poll's probe reaches tally-dp again: up, pinged anew. */
static void
test_recovers(void **state)
{
	struct fixture *f = *state;
	struct seen a = { 0 };

	first_poll(f);
	tallyd_dpc_request(&f->d, 0, json_pack("{s:s}", "cmd", "stats"), NULL, 0,
		record, (uintptr_t)&a);
	json_decref(expect(f, "stats"));
	while (a.calls == 0)
		assert_null(turn(f));
	assert_false(tallyd_dpc_up(f->d.dps[0].dpc));
	assert_null(f->d.dps[0].stats);
	poll_with_ping(f);
	serve(f, "job_list", "{\"errno\":0,\"jobs\":[]}");
	serve(f, "stats", "{\"errno\":0,\"total\":{\"rx\":3}}");
	idle(f, 30);
	assert_true(tallyd_dpc_up(f->d.dps[0].dpc));
	assert_non_null(f->d.dps[0].stats);
}

/*
 * Pages: "after" is the last id of the previous page, until "more" is
 * false. Ids tallyd has no job for are removed (between the pages, in
 * order) and counted; the job's counters are its own instance's.
 */
static void
test_pages_and_stale(void **state)
{
	struct fixture *f = *state;
	struct tallyd_job *x;
	char e[512], page1[1024];
	json_t *req;

	first_poll(f);
	x = ready_job(&f->d, "x", 0x1122334455667788ULL);
	entry_text(e, sizeof(e), x, 64, x->wire_token, 5);
	snprintf(page1, sizeof(page1), "{\"errno\":0,\"jobs\":[%s,{\"id\":7,"
		"\"world\":1,\"window\":64,\"max_elems\":256,\"narrow\":false,"
		"\"members\":[],\"counters\":{}}],\"more\":true}", e);
	poll_with_ping(f);
	req = expect(f, "job_list");
	assert_int_equal(json_integer_value(json_object_get(req, "after")), 0);
	assert_true(json_integer_value(json_object_get(req, "limit")) > 0);
	json_decref(req);
	answer(f, page1);
	req = expect(f, "job_del");
	assert_int_equal(json_integer_value(json_object_get(req, "id")), 7);
	json_decref(req);
	answer(f, "{\"errno\":0}");
	req = expect(f, "job_list");
	assert_int_equal(json_integer_value(json_object_get(req, "after")), 7);
	json_decref(req);
	answer(f, "{\"errno\":0,\"jobs\":[{\"id\":9,\"counters\":{}}],"
		"\"more\":false}");
	req = expect(f, "job_del");
	assert_int_equal(json_integer_value(json_object_get(req, "id")), 9);
	json_decref(req);
	answer(f, "{\"errno\":0}");
	serve(f, "stats", "{\"errno\":0,\"total\":{}}");
	idle(f, 30);
	assert_int_equal(f->d.st.dp_stale_removed, 2);
	assert_true(x->sh[0].in_dp);
	assert_int_equal(x->sh[0].last.rounds, 5);
	assert_int_equal(x->sh[0].last.contributions, 10);
	assert_int_equal(f->d.st.dp_mismatches, 0);
}

/* A page with "more" whose ids do not advance ends the poll. */
static void
test_pages_must_advance(void **state)
{
	struct fixture *f = *state;

	first_poll(f);
	poll_with_ping(f);
	serve(f, "job_list", "{\"errno\":0,\"jobs\":[],\"more\":true}");
	idle(f, 50);
	/* The next poll may begin. */
	poll_with_ping(f);
	serve(f, "job_list", "{\"errno\":0,\"jobs\":[]}");
	serve(f, "stats", "{\"errno\":0,\"total\":{}}");
	idle(f, 30);
}

/*
 * Another configuration under the job's id (window 32, no token_fp: an
 * older tally-dp): programmed again with tallyd's, counted; the foreign
 * instance's counters are not the job's, the job's last reading (its own
 * instance, gone) is folded once.
 */
static void
test_mismatch(void **state)
{
	struct fixture *f = *state;
	struct tallyd_job *x;
	char e[512], page[1024];
	json_t *req;

	first_poll(f);
	x = ready_job(&f->d, "x", 0x1122334455667788ULL);
	x->sh[0].last.rounds = 3;
	entry_text(e, sizeof(e), x, 32, 0, 1000);
	snprintf(page, sizeof(page), "{\"errno\":0,\"jobs\":[%s]}", e);
	poll_with_ping(f);
	serve(f, "job_list", page);
	req = expect(f, "job_add");
	assert_int_equal(json_integer_value(json_object_get(req, "window")),
		64);
	assert_string_equal(json_string_value(json_object_get(req, "token")),
		"1122334455667788");
	json_decref(req);
	answer(f, "{\"errno\":17,\"error\":\"job 1 exists\"}");
	/* The poll's stats were queued before the chain's next step. */
	serve(f, "stats", "{\"errno\":0,\"total\":{}}");
	serve(f, "job_del", "{\"errno\":0,\"counters\":{\"rounds\":1000}}");
	serve(f, "job_add", "{\"errno\":0}");
	idle(f, 30);
	assert_int_equal(f->d.st.dp_mismatches, 1);
	assert_int_equal(f->d.st.dp_reprograms, 0);
	assert_int_equal(x->base.rounds, 3);
	assert_int_equal(x->sh[0].last.rounds, 0);
	assert_true(x->sh[0].in_dp);
	assert_false(tallyd_dpc_busy(x));
}

/*
 * A job sharded over two dataplanes, the second down (docs/scale-out.md):
 * the barrier's program gives the first the membership and wire token,
 * fails at the second at once, and the membership is not the job's; the
 * first's copy goes at its next poll (a membership tallyd never formed).
 */
static void
test_sharded_one_down(void **state)
{
	struct fixture *f = *state;
	struct tallyd_job t = { .world = 2, .window = 64, .max_elems = 256,
		.nshards = 2, .sh = { { .dp = 0 }, { .dp = 1 } } }, *x;
	const struct tallyd_member m[2] = { { 0x0a090002, 40001, 0 },
		{ 0x0a090003, 40001, 0 } };
	char hex[TALLY_RDV_TOKEN_HEX + 1], e[512], page[1024];
	json_t *req;

	strcpy(f->d.dps[1].name, "dead");
	f->d.dps[1].dpc = tallyd_dpc_create(1, "/nonexistent/tally-dp.sock");
	assert_non_null(f->d.dps[1].dpc);
	f->d.ndps = 2;
	first_poll(f);
	assert_false(tallyd_dpc_up(f->d.dps[1].dpc));
	assert_false(tallyd_dps_up(&f->d));
	strcpy(t.name, "s");
	x = tallyd_job_create(&f->d, &t, hex);
	assert_non_null(x);
	assert_int_equal(x->nshards, 2);
	assert_int_equal(tallyd_dpc_program(&f->d, x, m, 0x55), 0);
	assert_true(tallyd_dpc_busy(x));
	req = expect(f, "job_add");
	assert_string_equal(json_string_value(json_object_get(req, "token")),
		"0000000000000055");
	assert_int_equal(json_array_size(json_object_get(req, "members")), 2);
	json_decref(req);
	answer(f, "{\"errno\":0}");
	idle(f, 30);
	assert_false(tallyd_dpc_busy(x));
	assert_int_equal(x->prog_err, -EHOSTDOWN);
	assert_false(x->has_members);
	assert_true(x->sh[0].in_dp);
	assert_false(x->sh[1].in_dp);

	entry_text(e, sizeof(e), x, 64, 0x55, 0);
	snprintf(page, sizeof(page), "{\"errno\":0,\"jobs\":[%s]}", e);
	poll_with_ping(f);
	serve(f, "job_list", page);
	req = expect(f, "job_del");
	assert_int_equal(json_integer_value(json_object_get(req, "id")), x->id);
	json_decref(req);
	answer(f, "{\"errno\":0}");
	serve(f, "stats", "{\"errno\":0,\"total\":{}}");
	idle(f, 30);
	assert_int_equal(f->d.st.dp_stale_removed, 1);
}

/*
 * token_fp: the same configuration with another token is a mismatch; the
 * job's own token's fingerprint makes the counters the job's.
 */
static void
test_token_fp(void **state)
{
	struct fixture *f = *state;
	struct tallyd_job *x;
	char e[512], page[1024];

	first_poll(f);
	x = ready_job(&f->d, "x", 0xabcdef0123456789ULL);
	entry_text(e, sizeof(e), x, 64, 0xabcdef0123456789ULL, 7);
	snprintf(page, sizeof(page), "{\"errno\":0,\"jobs\":[%s]}", e);
	poll_with_ping(f);
	serve(f, "job_list", page);
	serve(f, "stats", "{\"errno\":0,\"total\":{}}");
	idle(f, 30);
	assert_int_equal(x->sh[0].last.rounds, 7);
	assert_int_equal(f->d.st.dp_mismatches, 0);

	entry_text(e, sizeof(e), x, 64, 0xabcdef0123456788ULL, 900);
	snprintf(page, sizeof(page), "{\"errno\":0,\"jobs\":[%s]}", e);
	poll_with_ping(f);
	serve(f, "job_list", page);
	serve(f, "job_add", "{\"errno\":17,\"error\":\"exists\"}");
	serve(f, "stats", "{\"errno\":0,\"total\":{}}");
	serve(f, "job_del", "{\"errno\":0,\"counters\":{\"rounds\":900}}");
	serve(f, "job_add", "{\"errno\":0}");
	idle(f, 30);
	assert_int_equal(f->d.st.dp_mismatches, 1);
	assert_int_equal(x->base.rounds, 7);
}

/*
 * RDMA: tally-dp's QPNs come from its ping's "roce" (none without it);
 * an RDMA job's job_add carries its Q_Key and each member's QPN.
 */
static void
test_rdma(void **state)
{
	struct fixture *f = *state;
	struct tallyd_job *x;
	uint32_t qpns[TALLY_RDV_MAX_QPNS];
	uint16_t n = 0;
	json_t *req, *m;

	first_poll(f);
	assert_int_equal(tallyd_dpc_qpns(&f->d, 0, qpns, &n), -EPROTONOSUPPORT);
	tallyd_dpc_poll(&f->d);
	serve(f, "ping", "{\"errno\":0,\"version\":\"t\",\"steering\":"
		"\"software\",\"workers\":2,\"ip\":\"10.9.0.1\","
		"\"udp_port\":47474,\"roce\":{\"qpns\":[256,257],"
		"\"pkey\":65535}}");
	serve(f, "job_list", "{\"errno\":0,\"jobs\":[]}");
	serve(f, "stats", "{\"errno\":0,\"total\":{}}");
	idle(f, 30);
	assert_int_equal(tallyd_dpc_qpns(&f->d, 0, qpns, &n), 0);
	assert_int_equal(n, 2);
	assert_int_equal(qpns[0], 256);
	assert_int_equal(qpns[1], 257);

	x = ready_job(&f->d, "x", 42);
	x->rdma = true;
	x->qkey = 0x1234567;
	x->members[0].qpn = 0x2001;
	x->members[1].qpn = 0xffffff;
	x->sh[0].in_dp = true;
	tallyd_dpc_poll(&f->d);
	serve(f, "ping", ping_reply);	/* no "roce" now: none */
	serve(f, "job_list", "{\"errno\":0,\"jobs\":[]}");
	req = expect(f, "job_add");
	assert_int_equal(json_integer_value(json_object_get(req, "qkey")),
		0x1234567);
	m = json_object_get(req, "members");
	assert_int_equal(json_integer_value(json_object_get(
		json_array_get(m, 0), "qpn")), 0x2001);
	assert_int_equal(json_integer_value(json_object_get(
		json_array_get(m, 1), "qpn")), 0xffffff);
	json_decref(req);
	answer(f, "{\"errno\":0}");
	serve(f, "stats", "{\"errno\":0,\"total\":{}}");
	idle(f, 30);
	assert_int_equal(tallyd_dpc_qpns(&f->d, 0, qpns, &n), -EPROTONOSUPPORT);
}

/* A membership tally-dp lost (it restarted) goes back, counted once. */
static void
test_restore(void **state)
{
	struct fixture *f = *state;
	struct tallyd_job *x;

	first_poll(f);
	x = ready_job(&f->d, "x", 42);
	x->sh[0].in_dp = true;
	x->sh[0].last.rounds = 11;
	poll_with_ping(f);
	serve(f, "job_list", "{\"errno\":0,\"jobs\":[]}");
	serve(f, "job_add", "{\"errno\":0}");
	serve(f, "stats", "{\"errno\":0,\"total\":{}}");
	idle(f, 30);
	assert_int_equal(f->d.st.dp_reprograms, 1);
	assert_int_equal(x->base.rounds, 11);
	assert_int_equal(x->sh[0].last.rounds, 0);
	assert_true(x->sh[0].in_dp);
}

/*
 * A new membership replaces the old one: the old one's final counters
 * (job_del's reply) are folded, exactly, and saved. A tally-dp that has
 * not shown final counters yet gets a reading of the job first; once it
 * has, job_del comes at once.
 */
static void
test_program_folds(void **state)
{
	struct fixture *f = *state;
	struct tallyd_member m[2] = { { 0x0a090004, 40002, 0 },
		{ 0x0a090005, 40002, 0 } };
	struct tallyd_job *x;
	char e[512], page[1024], *text;
	json_t *req;

	first_poll(f);
	x = ready_job(&f->d, "x", 5);
	x->sh[0].in_dp = true;
	x->base.rounds = 100;
	x->sh[0].last.rounds = 10;
	assert_int_equal(tallyd_dpc_program(&f->d, x, m, 6), 0);
	assert_int_equal(tallyd_dpc_program(&f->d, x, m, 6), -EBUSY);
	req = expect(f, "job_list");
	assert_int_equal(json_integer_value(json_object_get(req, "after")), 0);
	assert_int_equal(json_integer_value(json_object_get(req, "limit")), 1);
	json_decref(req);
	entry_text(e, sizeof(e), x, 64, 0, 12);
	snprintf(page, sizeof(page), "{\"errno\":0,\"jobs\":[%s]}", e);
	answer(f, page);
	serve(f, "job_del", "{\"errno\":0,\"counters\":{\"rounds\":15,"
		"\"contributions\":30}}");
	req = expect(f, "job_add");
	assert_string_equal(json_string_value(json_object_get(req, "token")),
		"0000000000000006");
	json_decref(req);
	answer(f, "{\"errno\":0}");
	idle(f, 30);
	assert_int_equal(x->base.rounds, 115);
	assert_int_equal(x->base.contributions, 30);
	assert_int_equal(x->sh[0].last.rounds, 0);
	assert_int_equal(x->wire_token, 6);
	assert_int_equal(x->members[1].ip, 0x0a090005);
	assert_false(tallyd_dpc_busy(x));

	/* The fold was on disk before job_add went out. */
	text = NULL;
	{
		json_t *st = json_load_file(f->d.conf.state_file, 0, NULL);

		assert_non_null(st);
		text = json_dumps(json_object_get(json_array_get(
			json_object_get(st, "jobs"), 0), "counters_base"), 0);
		json_decref(st);
	}
	assert_non_null(strstr(text, "\"rounds\": 115"));
	free(text);

	/* Now job_del is known to report: no reading first. */
	tallyd_dpc_program(&f->d, x, m, 7);
	serve(f, "job_del", "{\"errno\":0,\"counters\":{\"rounds\":4}}");
	serve(f, "job_add", "{\"errno\":0}");
	idle(f, 30);
	assert_int_equal(x->base.rounds, 119);
}

/*
 * A poll that began before a membership was replaced does not act on
 * the job: its page may show the job as it was (here: gone).
 */
static void
test_poll_leaves_busy_job(void **state)
{
	struct fixture *f = *state;
	struct tallyd_member m[2] = { { 0x0a090004, 40002, 0 },
		{ 0x0a090005, 40002, 0 } };
	struct tallyd_job *x;

	first_poll(f);
	x = ready_job(&f->d, "x", 5);
	poll_with_ping(f);
	json_decref(expect(f, "job_list"));
	tallyd_dpc_program(&f->d, x, m, 6);
	answer(f, "{\"errno\":0,\"jobs\":[]}");
	serve(f, "job_add", "{\"errno\":0}");
	serve(f, "stats", "{\"errno\":0,\"total\":{}}");
	idle(f, 30);
	assert_int_equal(f->d.st.dp_reprograms, 0);
	assert_int_equal(x->wire_token, 6);
}

/* Draining jobs are removed through the queue; the reply finishes them. */
static void
test_delete(void **state)
{
	struct fixture *f = *state;
	struct tallyd_job *x;
	json_t *req;

	first_poll(f);
	x = ready_job(&f->d, "x", 5);
	x->sh[0].in_dp = true;
	f->d.conf.drain_timeout_ms = 0;
	tallyd_job_delete_start(&f->d, x, NULL);
	assert_int_equal(f->d.njobs, 1);
	req = expect(f, "job_del");
	assert_int_equal(json_integer_value(json_object_get(req, "id")), 1);
	json_decref(req);
	answer(f, "{\"errno\":0}");
	idle(f, 30);
	assert_int_equal(f->d.njobs, 0);
}

/* The fingerprint: FNV-1a 64 over the token's big-endian bytes. */
static void
test_token_fp_vectors(void **state)
{
	(void)state;
	assert_true(tally_token_fp(0) == 0xa8c7f832281a39c5ULL);
	assert_true(tally_token_fp(1) == 0xa8c7f732281a3812ULL);
	assert_true(tally_token_fp(0x0123456789abcdefULL) ==
		0x9ed00e1af2c13f65ULL);
	assert_true(tally_token_fp(UINT64_MAX) == 0x8cf51a8bfca3883dULL);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_deadline, setup, teardown),
		cmocka_unit_test_setup_teardown(test_recovers, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pages_and_stale, setup,
			teardown),
		cmocka_unit_test_setup_teardown(test_pages_must_advance, setup,
			teardown),
		cmocka_unit_test_setup_teardown(test_sharded_one_down, setup,
			teardown),
		cmocka_unit_test_setup_teardown(test_mismatch, setup, teardown),
		cmocka_unit_test_setup_teardown(test_token_fp, setup, teardown),
		cmocka_unit_test_setup_teardown(test_restore, setup, teardown),
		cmocka_unit_test_setup_teardown(test_rdma, setup, teardown),
		cmocka_unit_test_setup_teardown(test_program_folds, setup,
			teardown),
		cmocka_unit_test_setup_teardown(test_poll_leaves_busy_job,
			setup, teardown),
		cmocka_unit_test_setup_teardown(test_delete, setup, teardown),
		cmocka_unit_test(test_token_fp_vectors),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

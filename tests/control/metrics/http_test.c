/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The metrics endpoint on 127.0.0.1, port 0: the test runs tallyd's kind
 * of poll loop (the endpoint's fd, its timeout, then tallyd_http_run())
 * while a thread plays the HTTP client over a plain socket.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "check.h"
#include "http.h"
#include "metrics.h"

/* What the endpoint serves: a fixture through tallyd_metrics_render(). */
struct fixture {
	struct tallyd_http *h;
	json_t *tallyd;		/* owned */
	json_t *jobs;		/* owned */
	json_t *dp;		/* owned */
	bool fail;		/* render returns NULL */
	unsigned int renders;
};

struct response {
	char *raw;		/* owned: all the bytes the client read */
	int status;
	char ctype[128];
	char allow[64];
	const char *body;	/* into raw */
	size_t body_len;
};

/* A client thread's exchange. */
struct client {
	uint16_t port;
	const char *request;	/* borrowed */
	char *buf;		/* malloc'd, NUL-terminated: the response */
	size_t len;
	int err;		/* errno of the first failure, or 0 */
	int done_fd;		/* written once the exchange is over */
};

static char *
render(void *arg)
{
	struct fixture *f = arg;

	f->renders++;
	if (f->fail)
		return NULL;
	return tallyd_metrics_render(f->tallyd, f->jobs, f->dp);
}

static int
setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	if (f == NULL)
		return -1;
	f->tallyd = json_pack("{s:i, s:i, s:i, s:i, s:{s:i, s:i}, s:i, s:i,"
		" s:b, s:i, s:i}", "uptime_s", 30, "jobs", 1, "joins", 4,
		"memberships", 1, "join_failures", "bad_token", 2,
		"timeout", 0, "ctl_requests", 9, "ctl_errors", 0,
		"dp_up", 1, "dp_reprograms", 0, "dp_errors", 0);
	f->jobs = json_pack("[{s:s, s:i, s:i, s:s, s:i, s:i, s:{s:i, s:i}}]",
		"name", "resnet", "id", 1, "world", 4, "state", "ready",
		"joined", 4, "epoch", 1, "counters", "rounds", 12,
		"bytes_in", 4096);
	f->dp = json_pack("{s:{s:i}, s:[{s:i, s:i, s:i, s:i}]}",
		"total", "rx", 7, "lcores", "lcore", 1, "rx", 7,
		"drop_bad_token", 1, "drop_net_runt", 2);
	if (f->tallyd == NULL || f->jobs == NULL || f->dp == NULL)
		return -1;
	f->h = tallyd_http_start("127.0.0.1:0", render, f);
	if (f->h == NULL)
		return -1;
	*state = f;
	return 0;
}

static int
teardown(void **state)
{
	struct fixture *f = *state;

	tallyd_http_stop(f->h);
	json_decref(f->tallyd);
	json_decref(f->jobs);
	json_decref(f->dp);
	free(f);
	return 0;
}

static void *
client_main(void *arg)
{
	struct client *c = arg;
	struct sockaddr_in sa = {
		.sin_family = AF_INET,
		.sin_port = htons(c->port),
		.sin_addr.s_addr = htonl(INADDR_LOOPBACK),
	};
	struct timeval tv = { .tv_sec = 10 };
	size_t off = 0, cap = 4096;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	c->buf = malloc(cap);
	if (fd < 0 || c->buf == NULL) {
		c->err = errno != 0 ? errno : ENOMEM;
		goto out;
	}
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		c->err = errno;
		goto out;
	}
	while (off < strlen(c->request)) {
		ssize_t n = send(fd, c->request + off,
			strlen(c->request) - off, MSG_NOSIGNAL);

		if (n <= 0) {
			c->err = errno;
			goto out;
		}
		off += (size_t)n;
	}
	for (;;) {
		ssize_t n;

		if (cap - c->len < 2048) {
			char *p = realloc(c->buf, cap * 2);

			if (p == NULL) {
				c->err = ENOMEM;
				goto out;
			}
			c->buf = p;
			cap *= 2;
		}
		n = recv(fd, c->buf + c->len, cap - c->len - 1, 0);
		if (n == 0)
			break;
		if (n < 0) {
			c->err = errno;	/* EAGAIN: the 10 s ran out */
			break;
		}
		c->len += (size_t)n;
	}
out:
	if (c->buf != NULL)
		c->buf[c->len] = '\0';
	if (fd >= 0)
		close(fd);
	if (write(c->done_fd, "x", 1) != 1)
		c->err = errno;
	return NULL;
}

static int64_t
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Copies header name's value (case-insensitive name) into out, or "". */
static void
header(const char *head, const char *name, char *out, size_t size)
{
	size_t nlen = strlen(name);
	const char *p = strstr(head, "\r\n");

	out[0] = '\0';
	for (; p != NULL; p = strstr(p + 2, "\r\n")) {
		const char *l = p + 2, *e;

		if (strncasecmp(l, name, nlen) != 0 || l[nlen] != ':')
			continue;
		l += nlen + 1;
		while (*l == ' ')
			l++;
		e = strstr(l, "\r\n");
		snprintf(out, size, "%.*s", (int)(e != NULL ? e - l :
			(ptrdiff_t)strlen(l)), l);
		return;
	}
}

/*
 * Sends request from a client thread while this thread serves h the way
 * tallyd's loop does; r gets the parsed response (free r->raw).
 */
static void
fetch(struct tallyd_http *h, const char *request, struct response *r)
{
	struct client c = { .port = tallyd_http_port(h), .request = request };
	int64_t deadline = now_ms() + 15000;
	pthread_t tid;
	int pfd[2];
	char *end;

	assert_int_equal(pipe2(pfd, O_CLOEXEC), 0);
	c.done_fd = pfd[1];
	assert_int_equal(pthread_create(&tid, NULL, client_main, &c), 0);
	for (;;) {
		struct pollfd p[2] = {
			{ .fd = tallyd_http_fd(h), .events = POLLIN },
			{ .fd = pfd[0], .events = POLLIN },
		};
		int t = tallyd_http_timeout_ms(h);

		if (t < 0 || t > 100)
			t = 100;
		assert_true(poll(p, 2, t) >= 0);
		tallyd_http_run(h);
		if (p[1].revents & POLLIN)
			break;
		assert_true(now_ms() < deadline);
	}
	pthread_join(tid, NULL);
	close(pfd[0]);
	close(pfd[1]);
	if (c.err != 0)
		fail_msg("client: %s", strerror(c.err));
	memset(r, 0, sizeof(*r));
	r->raw = c.buf;
	assert_int_equal(sscanf(c.buf, "HTTP/1.%*d %d", &r->status), 1);
	end = strstr(c.buf, "\r\n\r\n");
	assert_non_null(end);
	*end = '\0';	/* headers end here */
	header(c.buf, "Content-Type", r->ctype, sizeof(r->ctype));
	header(c.buf, "Allow", r->allow, sizeof(r->allow));
	r->body = end + 4;
	r->body_len = c.len - (size_t)(r->body - c.buf);
}

static void
get_metrics(void **state)
{
	struct fixture *f = *state;
	char *want = tallyd_metrics_render(f->tallyd, f->jobs, f->dp);
	struct response r;
	int rc;

	assert_non_null(want);
	fetch(f->h, "GET /metrics HTTP/1.0\r\n\r\n", &r);
	assert_int_equal(r.status, 200);
	assert_string_equal(r.ctype,
		"text/plain; version=0.0.4; charset=utf-8");
	assert_int_equal(r.body_len, strlen(want));
	assert_string_equal(r.body, want);
	assert_int_equal(f->renders, 1);
	assert_non_null(strstr(r.body, "\ntallyd_dp_up 1\n"));
	assert_non_null(strstr(r.body,
		"\ntally_dp_drops_total{lcore=\"1\",reason=\"net_runt\"} 2\n"));
	assert_int_equal(promcheck_text(r.body), 0);
	/* promtool too, where it is installed. */
	rc = promtool_text(r.body);
	if (rc == -2)
		printf("# /usr/bin/promtool not installed: "
			"promtool check metrics skipped\n");
	else
		assert_int_equal(rc, 0);
	free(r.raw);
	free(want);
}

/* HTTP/1.1 with a query string and a kept-alive connection it closes. */
static void
get_metrics_http11(void **state)
{
	struct fixture *f = *state;
	struct response r;

	fetch(f->h, "GET /metrics?x=1 HTTP/1.1\r\nHost: localhost\r\n"
		"Connection: close\r\n\r\n", &r);
	assert_int_equal(r.status, 200);
	assert_string_equal(r.ctype,
		"text/plain; version=0.0.4; charset=utf-8");
	assert_int_equal(promcheck_text(r.body), 0);
	free(r.raw);
}

static void
head_metrics(void **state)
{
	struct fixture *f = *state;
	struct response r;

	fetch(f->h, "HEAD /metrics HTTP/1.0\r\n\r\n", &r);
	assert_int_equal(r.status, 200);
	assert_string_equal(r.ctype,
		"text/plain; version=0.0.4; charset=utf-8");
	assert_int_equal(r.body_len, 0);
	free(r.raw);
}

static void
not_found(void **state)
{
	static const char *const paths[] = {
		"/", "/metrics/", "/metricsx", "/Metrics", "/stats",
	};
	struct fixture *f = *state;
	char req[128];
	struct response r;

	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
		snprintf(req, sizeof(req), "GET %s HTTP/1.0\r\n\r\n", paths[i]);
		fetch(f->h, req, &r);
		assert_int_equal(r.status, 404);
		assert_true(r.body_len > 0);
		free(r.raw);
	}
	assert_int_equal(f->renders, 0);
}

static void
other_methods(void **state)
{
	static const char *const reqs[] = {
		"POST /metrics HTTP/1.0\r\nContent-Length: 0\r\n\r\n",
		"POST /metrics HTTP/1.0\r\nContent-Length: 3\r\n\r\nabc",
		"PUT /metrics HTTP/1.0\r\nContent-Length: 0\r\n\r\n",
		"DELETE /metrics HTTP/1.0\r\n\r\n",
	};
	struct fixture *f = *state;
	struct response r;

	for (size_t i = 0; i < sizeof(reqs) / sizeof(reqs[0]); i++) {
		fetch(f->h, reqs[i], &r);
		assert_int_equal(r.status, 405);
		assert_string_equal(r.allow, "GET, HEAD");
		free(r.raw);
	}
	assert_int_equal(f->renders, 0);
}

static void
render_fails(void **state)
{
	struct fixture *f = *state;
	struct response r;

	f->fail = true;
	fetch(f->h, "GET /metrics HTTP/1.0\r\n\r\n", &r);
	assert_int_equal(r.status, 500);
	assert_int_equal(f->renders, 1);
	free(r.raw);
	/* And it recovers. */
	f->fail = false;
	fetch(f->h, "GET /metrics HTTP/1.0\r\n\r\n", &r);
	assert_int_equal(r.status, 200);
	free(r.raw);
}

/* An idle endpoint has no deadline; a silent client brings one. */
static void
timeouts(void **state)
{
	struct fixture *f = *state;
	struct sockaddr_in sa = {
		.sin_family = AF_INET,
		.sin_port = htons(tallyd_http_port(f->h)),
		.sin_addr.s_addr = htonl(INADDR_LOOPBACK),
	};
	int fd, t;

	assert_true(tallyd_http_fd(f->h) >= 0);
	assert_int_not_equal(tallyd_http_port(f->h), 0);
	tallyd_http_run(f->h);
	assert_int_equal(tallyd_http_timeout_ms(f->h), -1);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(fd >= 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	for (int i = 0; i < 50; i++) {
		struct pollfd p = { .fd = tallyd_http_fd(f->h),
			.events = POLLIN };

		poll(&p, 1, 10);
		tallyd_http_run(f->h);
	}
	t = tallyd_http_timeout_ms(f->h);
	assert_true(t >= 0 && t <= 10000);
	close(fd);
}

static unsigned int
open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	unsigned int n = 0;

	assert_non_null(d);
	while (readdir(d) != NULL)
		n++;
	closedir(d);
	return n;
}

static char *
render_nothing(void *arg)
{
	(void)arg;
	return NULL;
}

static void
bad_addresses(void **state)
{
	static const char *const bad[] = {
		"", "nonsense", "127.0.0.1", "127.0.0.1:", ":9470",
		"127.0.0.1:70000", "127.0.0.1:65536", "127.0.0.1:9x",
		"127.0.0.1:-1", "127.0.0.1: 9", "localhost:9470", "::1:9470",
		"[::1]:9470", "127.0.0.256:9470", "1.2.3:9470",
		"127.0.0.1:9470:1",
	};

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		errno = 0;
		if (tallyd_http_start(bad[i], render_nothing, NULL) != NULL)
			fail_msg("\"%s\" accepted", bad[i]);
		if (errno != EINVAL)
			fail_msg("\"%s\": errno %d, want EINVAL", bad[i],
				errno);
	}
	errno = 0;
	assert_null(tallyd_http_start(NULL, render_nothing, NULL));
	assert_int_equal(errno, EINVAL);
	errno = 0;
	assert_null(tallyd_http_start("127.0.0.1:0", NULL, NULL));
	assert_int_equal(errno, EINVAL);
	/* Not an address of this host. */
	errno = 0;
	assert_null(tallyd_http_start("192.0.2.1:0", render_nothing, NULL));
	assert_int_equal(errno, EADDRNOTAVAIL);
}

static void
address_in_use(void **state)
{
	struct fixture *f = *state;
	char addr[32];

	snprintf(addr, sizeof(addr), "127.0.0.1:%u",
		(unsigned int)tallyd_http_port(f->h));
	errno = 0;
	assert_null(tallyd_http_start(addr, render_nothing, NULL));
	assert_int_equal(errno, EADDRINUSE);
}

/* Start and stop leave no fd behind; stop takes NULL. */
static void
no_fd_leak(void **state)
{
	unsigned int before = open_fds();
	struct tallyd_http *h;

	(void)state;
	h = tallyd_http_start("127.0.0.1:0", render_nothing, NULL);
	assert_non_null(h);
	assert_true(open_fds() > before);
	tallyd_http_stop(h);
	assert_int_equal(open_fds(), before);
	tallyd_http_stop(NULL);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(get_metrics, setup, teardown),
		cmocka_unit_test_setup_teardown(get_metrics_http11, setup,
			teardown),
		cmocka_unit_test_setup_teardown(head_metrics, setup, teardown),
		cmocka_unit_test_setup_teardown(not_found, setup, teardown),
		cmocka_unit_test_setup_teardown(other_methods, setup, teardown),
		cmocka_unit_test_setup_teardown(render_fails, setup, teardown),
		cmocka_unit_test_setup_teardown(timeouts, setup, teardown),
		cmocka_unit_test(bad_addresses),
		cmocka_unit_test_setup_teardown(address_in_use, setup,
			teardown),
		cmocka_unit_test(no_fd_leak),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

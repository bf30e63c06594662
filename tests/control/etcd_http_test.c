/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tallyd's etcd client (control/tallyd/etcd.c) against a canned HTTP
 * server on loopback (a child process per case): a reply in pieces, a
 * streamed (chunked) reply that never ends, a server that never answers
 * (the deadline, then the short probe deadline), an HTTP error, garbage,
 * and failover from a closed port to one that answers.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>

#include "etcd.h"
#include "tallyd.h"

/* A listening socket on 127.0.0.1; its port into *port. */
static int
listener(uint16_t *port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t sl = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(fd, 4), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &sl), 0);
	*port = ntohs(sa.sin_port);
	return fd;
}

/*
 * Reads a whole request, head and Content-Length body: closing with
 * unread bytes would reset the connection under the reply.
 */
static int
read_request(int c, char *buf, size_t cap)
{
	size_t len = 0;
	char *end;

	for (;;) {
		ssize_t n = recv(c, buf + len, cap - len - 1, 0);

		if (n <= 0)
			return -1;
		len += (size_t)n;
		buf[len] = '\0';
		end = strstr(buf, "\r\n\r\n");
		if (end != NULL && strstr(buf, "Content-Length: ") != NULL &&
				len >= (size_t)(end + 4 - buf) + strtoul(
				strstr(buf, "Content-Length: ") + 16, NULL, 10))
			return 0;
		if (len + 1 == cap)
			return -1;
	}
}

/*
 * A child that accepts one connection, reads the request, then
 * writes each piece (NULL ends) 30 ms apart and, unless hold, closes.
 */
static pid_t
serve(int lfd, bool hold, const char *const *pieces)
{
	pid_t pid = fork();
	char buf[4096];
	int c;

	assert_true(pid >= 0);
	if (pid > 0) {
		close(lfd);
		return pid;
	}
	/* A failed assertion in the parent must not leave us behind. */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() == 1)
		_exit(1);
	c = accept(lfd, NULL, NULL);
	if (c < 0 || read_request(c, buf, sizeof(buf)) != 0)
		_exit(1);
	for (; *pieces != NULL; pieces++) {
		usleep(30000);
		if (write(c, *pieces, strlen(*pieces)) < 0)
			_exit(1);
	}
	if (hold)
		pause();
	close(c);
	_exit(0);
}

static void
reap(pid_t pid)
{
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

static struct tallyd_etcd *
client(uint16_t p1, uint16_t p2, unsigned int timeout_ms)
{
	char spec[80], why[200];
	struct tallyd_etcd *e;

	if (p2 != 0)
		snprintf(spec, sizeof(spec), "etcd://127.0.0.1:%u,127.0.0.1:%u",
			p1, p2);
	else
		snprintf(spec, sizeof(spec), "etcd://127.0.0.1:%u", p1);
	e = tallyd_etcd_create(spec, timeout_ms, why, sizeof(why));
	assert_non_null(e);
	return e;
}

/* One POST of {"k":1}; its errno, *rep the reply (NULL on errors). */
static int
post(struct tallyd_etcd *e, json_t **rep)
{
	return tallyd_etcd_post(e, "/v3/kv/range", json_pack("{s:i}", "k", 1),
		rep);
}

static void
reply_in_pieces(void **state)
{
	static const char *const p[] = { "HTTP/1.1 200 OK\r\nContent-Le",
		"ngth: 27\r\n\r\n{\"header\":", "{\"revision\":\"7\"}}", NULL };
	uint16_t port;
	pid_t pid = serve(listener(&port), true, p);
	struct tallyd_etcd *e = client(port, 0, 2000);
	json_t *rep = NULL;

	(void)state;
	assert_int_equal(post(e, &rep), 0);
	assert_int_equal(tallyd_etcd_int(json_object_get(json_object_get(rep,
		"header"), "revision")), 7);
	json_decref(rep);
	reap(pid);
	free(e);
}

/* lease keepalive's shape: a chunked stream left open after a result. */
static void
stream_first_result(void **state)
{
	static const char *const p[] = { "HTTP/1.1 200 OK\r\nTransfer-Encoding:"
		" chunked\r\n\r\n", "1d\r\n{\"result\":{\"TTL\":\"5\",\"ID\":1}}"
		"\r\n", NULL };
	uint16_t port;
	pid_t pid = serve(listener(&port), true, p);
	struct tallyd_etcd *e = client(port, 0, 2000);
	int64_t t0 = tallyd_now_ms();
	json_t *rep = NULL;

	(void)state;
	assert_int_equal(post(e, &rep), 0);
	assert_true(tallyd_now_ms() - t0 < 1000);
	assert_int_equal(tallyd_etcd_int(json_object_get(rep, "TTL")), 5);
	json_decref(rep);
	reap(pid);
	free(e);
}

/* A server that takes the connection and says nothing: the deadline. */
static void
silence_is_a_timeout_then_a_probe(void **state)
{
	static const char *const none[] = { NULL };
	uint16_t port;
	int lfd = listener(&port);
	pid_t pid = serve(dup(lfd), true, none);
	struct tallyd_etcd *e = client(port, 0, 500);
	json_t *rep = NULL;
	int64_t t0 = tallyd_now_ms(), took;

	(void)state;
	assert_int_equal(post(e, &rep), -ETIMEDOUT);
	took = tallyd_now_ms() - t0;
	assert_true(took >= 450 && took < 1000);
	assert_null(rep);
	assert_int_equal(e->st.timeouts, 1);
	assert_int_equal(e->st.failures, 1);
	assert_non_null(strstr(e->error, "timed out"));
	/* The next exchange is a probe (the backlog takes the connect). */
	t0 = tallyd_now_ms();
	assert_int_equal(post(e, &rep), -ETIMEDOUT);
	took = tallyd_now_ms() - t0;
	assert_true(took < TALLYD_ETCD_PROBE_MS + 150);
	reap(pid);
	close(lfd);
	free(e);
}

static void
http_error_is_eio(void **state)
{
	static const char *const p[] = { "HTTP/1.1 400 Bad Request\r\n"
		"Content-Length: 54\r\n\r\n{\"error\":\"x\",\"code\":3,"
		"\"message\":\"etcdserver: bad key\"}", NULL };
	uint16_t port;
	pid_t pid = serve(listener(&port), false, p);
	struct tallyd_etcd *e = client(port, 0, 2000);
	json_t *rep = NULL;

	(void)state;
	assert_int_equal(post(e, &rep), -EIO);
	assert_null(rep);
	assert_non_null(strstr(e->error, "HTTP 400: etcdserver: bad key"));
	assert_int_equal(e->failing, 0);	/* etcd did answer */
	reap(pid);
	free(e);
}

static void
garbage_is_eproto(void **state)
{
	static const char *const p[] = { "hello, this is not HTTP\r\n\r\n",
		NULL };
	static const char *const q[] = { "HTTP/1.1 200 OK\r\n\r\n{not json",
		NULL };
	uint16_t port;
	pid_t pid = serve(listener(&port), false, p);
	struct tallyd_etcd *e = client(port, 0, 2000);
	json_t *rep = NULL;

	(void)state;
	assert_int_equal(post(e, &rep), -EPROTO);
	reap(pid);
	free(e);
	pid = serve(listener(&port), false, q);
	e = client(port, 0, 2000);
	assert_int_equal(post(e, &rep), -EPROTO);
	assert_null(rep);
	reap(pid);
	free(e);
}

/* A closed port first: the next endpoint answers, and is kept. */
static void
failover_to_the_next_endpoint(void **state)
{
	static const char *const p[] = { "HTTP/1.1 200 OK\r\n"
		"Content-Length: 2\r\n\r\n{}", NULL };
	uint16_t dead, port;
	int dfd = listener(&dead);
	pid_t pid;
	struct tallyd_etcd *e;
	json_t *rep = NULL;

	(void)state;
	close(dfd);		/* nothing listens there now */
	pid = serve(listener(&port), false, p);
	e = client(dead, port, 2000);
	assert_int_equal(post(e, &rep), 0);
	assert_int_equal(e->cur, 1);
	json_decref(rep);
	reap(pid);
	free(e);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(reply_in_pieces),
		cmocka_unit_test(stream_first_result),
		cmocka_unit_test(silence_is_a_timeout_then_a_probe),
		cmocka_unit_test(http_error_is_eio),
		cmocka_unit_test(garbage_is_eproto),
		cmocka_unit_test(failover_to_the_next_endpoint),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

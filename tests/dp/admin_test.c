/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tally-dp's admin socket, served for real: the commands through
 * tally_dp_admin_handle() on a dataplane state as main.c builds it (a
 * real EAL, no port), and the socket through tally_dp_admin_serve() on a
 * thread with real Unix sockets.
 *
 * What it pins down: job_list pages through max_jobs jobs of world 64 in
 * replies that each fit one 64 KiB message, ascending by id, each entry
 * with its token fingerprint and memory; job_del returns the final
 * counters; ping reports the limits; job_add refuses what tally-dp cannot
 * serve (id 0, 2 GiB a job, a q8 job whose widened results exceed the
 * MTU) with errno and sentence; a client that never reads its replies is
 * disconnected while another one's ping is answered at once; requests of
 * a client that hung up are not run; a second tally-dp never takes the
 * socket path from a live one, but takes over a stale one.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include <tally/limits.h>
#include <tally/token_fp.h>

#include "admin_parse.h"
#include "dp.h"
#include "frame.h"

#define MAX_JOBS	256
#define WORLD		64

static struct tally_dp dp;
static char sock_path[108];

/* Runs one request through the admin code; returns the reply object. */
static json_t *
call(const char *fmt, ...)
{
	char req[8192];
	json_error_t jerr;
	va_list ap;
	char *text;
	json_t *r;

	va_start(ap, fmt);
	vsnprintf(req, sizeof(req), fmt, ap);
	va_end(ap);
	text = tally_dp_admin_handle(&dp, req, strlen(req));
	assert_non_null(text);
	assert_true(strlen(text) <= TALLY_ADMIN_MSG_MAX);
	r = json_loads(text, 0, &jerr);
	free(text);
	assert_non_null(r);
	return r;
}

static json_int_t
errno_of(json_t *r)
{
	return json_integer_value(json_object_get(r, "errno"));
}

/* The members of a world-64 job, on hosts 10.<id / 256>.<id % 256>.r+1. */
static void
members(char *buf, size_t len, unsigned int id)
{
	size_t n = 0;

	for (unsigned int r = 0; r < WORLD; r++)
		n += (size_t)snprintf(buf + n, len - n, "%s{\"ip\":\"10.%u.%u.%u\","
			"\"port\":%u}", r ? "," : "", id / 256, id % 256,
			r + 1, 40000 + r);
}

/* The token of job id. */
static uint64_t
token_of(unsigned int id)
{
	return UINT64_C(0x9e3779b97f4a7c15) * (id + 1);
}

static json_t *
add_job(unsigned int id)
{
	char m[WORLD * 48];

	members(m, sizeof(m), id);
	return call("{\"cmd\":\"job_add\",\"id\":%u,\"token\":\"%016llx\","
		"\"world\":%u,\"members\":[%s]}", id,
		(unsigned long long)token_of(id), WORLD, m);
}

/*
 * max_jobs jobs of world 64, added in scattered order, are listed page by
 * page: every page one message, ids ascending and above "after", every
 * job once, with its token's fingerprint and its memory.
 */
static void
list_at_max_jobs(void **state)
{
	static uint8_t seen[65536];
	unsigned int pages = 0, total = 0, after = 0;
	json_t *r;

	(void)state;
	memset(seen, 0, sizeof(seen));
	for (unsigned int i = 0; i < MAX_JOBS; i++) {
		r = add_job((i * 7919u) % 65521u + 1);
		assert_int_equal(errno_of(r), 0);
		json_decref(r);
	}
	r = add_job(65535);
	assert_int_equal(errno_of(r), ENOSPC);
	assert_string_equal(json_string_value(json_object_get(r, "error")),
		"256 jobs is the maximum (--max-jobs)");
	json_decref(r);
	for (;;) {
		json_t *jobs, *o;
		size_t i;
		int more;

		r = call("{\"cmd\":\"job_list\",\"after\":%u}", after);
		assert_int_equal(errno_of(r), 0);
		jobs = json_object_get(r, "jobs");
		more = json_is_true(json_object_get(r, "more"));
		assert_true(json_array_size(jobs) > 0);
		json_array_foreach(jobs, i, o) {
			unsigned int id = (unsigned int)json_integer_value(
				json_object_get(o, "id"));
			char fp[17];

			assert_true(id > after);
			assert_false(seen[id]);
			seen[id] = 1;
			after = id;
			snprintf(fp, sizeof(fp), "%016llx", (unsigned long long)
				tally_token_fp(token_of(id)));
			assert_string_equal(json_string_value(json_object_get(o,
				"token_fp")), fp);
			assert_null(json_object_get(o, "token"));
			assert_int_equal(json_integer_value(json_object_get(o,
				"mem_bytes")), tally_job_mem_bytes(64, 256));
			assert_int_equal(json_array_size(json_object_get(o,
				"members")), WORLD);
			total++;
		}
		pages++;
		json_decref(r);
		if (!more)
			break;
	}
	assert_int_equal(total, MAX_JOBS);
	assert_true(pages > 1);
	/* A page of at most limit, and nothing after the last. */
	r = call("{\"cmd\":\"job_list\",\"limit\":5}");
	assert_int_equal(json_array_size(json_object_get(r, "jobs")), 5);
	assert_true(json_is_true(json_object_get(r, "more")));
	json_decref(r);
	r = call("{\"cmd\":\"job_list\",\"after\":%u}", after);
	assert_int_equal(json_array_size(json_object_get(r, "jobs")), 0);
	assert_false(json_is_true(json_object_get(r, "more")));
	json_decref(r);
	for (unsigned int id = 1; id < 65536; id++) {
		if (!seen[id])
			continue;
		r = call("{\"cmd\":\"job_del\",\"id\":%u}", id);
		assert_int_equal(errno_of(r), 0);
		json_decref(r);
	}
	assert_int_equal(dp.njobs, 0);
	assert_int_equal(dp.mem_used, 0);
}

/* The fingerprint is FNV-1a 64 over the token's wire bytes. */
static void
token_fp_vector(void **state)
{
	(void)state;
	/* FNV-1a 64 of eight zero bytes, and of 01 23 45 67 89 ab cd ef. */
	assert_true(tally_token_fp(0) == UINT64_C(0xa8c7f832281a39c5));
	assert_true(tally_token_fp(UINT64_C(0x0123456789abcdef)) ==
		UINT64_C(0x9ed00e1af2c13f65));
}

/* job_del answers with the job's final counters. */
static void
job_del_counters(void **state)
{
	static const char *const names[] = {
		"contributions", "elements", "bytes_in", "rounds", "results",
		"bytes_out", "resent", "nacks", "drops", "duplicates",
	};
	json_t *r, *c;

	(void)state;
	r = add_job(77);
	assert_int_equal(errno_of(r), 0);
	json_decref(r);
	r = call("{\"cmd\":\"job_del\",\"id\":77}");
	assert_int_equal(errno_of(r), 0);
	c = json_object_get(r, "counters");
	assert_int_equal(json_object_size(c), 10);
	for (size_t i = 0; i < 10; i++)
		assert_int_equal(json_integer_value(json_object_get(c,
			names[i])), 0);
	json_decref(r);
	r = call("{\"cmd\":\"job_del\",\"id\":77}");
	assert_int_equal(errno_of(r), ENOENT);
	json_decref(r);
}

/* ping reports what a job must fit. */
static void
ping_limits(void **state)
{
	json_t *r;

	(void)state;
	r = add_job(5);
	json_decref(r);
	r = call("{\"cmd\":\"ping\"}");
	assert_int_equal(errno_of(r), 0);
	assert_int_equal(json_integer_value(json_object_get(r, "mtu")), 1500);
	assert_int_equal(json_integer_value(json_object_get(r, "max_jobs")),
		MAX_JOBS);
	assert_int_equal(json_integer_value(json_object_get(r, "jobs")), 1);
	assert_int_equal(json_integer_value(json_object_get(r, "mem_budget")),
		dp.mem_budget);
	assert_int_equal(json_integer_value(json_object_get(r, "mem_used")),
		tally_job_mem_bytes(64, 256));
	assert_int_equal(json_integer_value(json_object_get(r,
		"max_job_mem")), dp.max_job_mem);
	json_decref(r);
	r = call("{\"cmd\":\"job_del\",\"id\":5}");
	json_decref(r);
}

/* Checks that the reply to req has errno err and error text want. */
static void
refused(const char *req, int err, const char *want)
{
	json_t *r = call("%s", req);

	assert_int_equal(errno_of(r), err);
	assert_string_equal(json_string_value(json_object_get(r, "error")),
		want);
	json_decref(r);
}

#define ADD1 "{\"cmd\":\"job_add\",\"token\":\"0123456789abcdef\"," \
	"\"world\":1,\"members\":[{\"ip\":\"10.1.1.1\",\"port\":9}],"

/*
 * What tally-dp cannot serve: job id 0, a broadcast member, 2 GiB of
 * slots, q8 results widened past the MTU; the same q8 job with narrow
 * results fits.
 */
static void
job_add_refusals(void **state)
{
	json_t *r;

	(void)state;
	refused(ADD1 "\"id\":0}", EINVAL,
		"'id' must be an integer in 1..65535");
	refused("{\"cmd\":\"job_add\",\"id\":1,\"token\":\"0123456789abcdef\","
		"\"world\":1,\"members\":[{\"ip\":\"255.255.255.255\","
		"\"port\":9}]}", EINVAL, "member 0: 'ip' 255.255.255.255 is not "
		"a unicast host address");
	refused(ADD1 "\"id\":1,\"window\":32768,\"max_elems\":8192}", E2BIG,
		"job 1 needs 2050.1 MiB (window 32768 x max_elems 8192); "
		"tally-dp takes at most 256.0 MiB a job (--max-job-mem)");
	refused(ADD1 "\"id\":1,\"max_elems\":1024,\"encodings\":[\"i8\"]}",
		EMSGSIZE, "job 1: 1024 elements of i8 make 4164-byte IPv4 "
		"packets (widened results), over the port's MTU of 1500 bytes; "
		"at most max_elems 358 for these encodings");
	r = call(ADD1 "\"id\":1,\"max_elems\":1024,\"narrow\":true,"
		"\"encodings\":[\"i8\"]}");
	assert_int_equal(errno_of(r), 0);
	json_decref(r);
	r = call("{\"cmd\":\"job_del\",\"id\":1}");
	json_decref(r);
	assert_int_equal(dp.njobs, 0);
}

static void *
serve_thread(void *arg)
{
	return (void *)(intptr_t)tally_dp_admin_serve(&dp, (int)(intptr_t)arg);
}

/* Starts serving sock_path on a thread. */
static pthread_t
serve_start(int *lfd)
{
	pthread_t t;

	*lfd = tally_dp_admin_open(sock_path);
	assert_true(*lfd >= 0);
	dp.stop = 0;
	assert_int_equal(pthread_create(&t, NULL, serve_thread,
		(void *)(intptr_t)*lfd), 0);
	return t;
}

static void
serve_stop(pthread_t t, int lfd)
{
	void *ret;

	dp.stop = 1;
	assert_int_equal(pthread_join(t, &ret), 0);
	assert_int_equal((intptr_t)ret, 0);
	close(lfd);
	unlink(sock_path);
}

static int
client(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	strcpy(sa.sun_path, sock_path);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	return fd;
}

static int64_t
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A ping on fd answered within ms milliseconds: 1, else 0. */
static int
ping_within(int fd, int ms)
{
	static const char ping[] = "{\"cmd\":\"ping\"}";
	struct pollfd p = { .fd = fd, .events = POLLIN };
	char buf[4096];
	ssize_t n;

	if (send(fd, ping, sizeof(ping) - 1, MSG_NOSIGNAL) < 0)
		return 0;
	if (poll(&p, 1, ms) != 1)
		return 0;
	n = recv(fd, buf, sizeof(buf) - 1, 0);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	return strstr(buf, "\"errno\":0") != NULL;
}

#define ROCE1 "{\"cmd\":\"job_add\",\"token\":\"0123456789abcdef\"," \
	"\"world\":1,\"members\":[{\"ip\":\"10.1.1.1\",\"qpn\":4660}],"

/*
 * RoCEv2 through the admin socket: ping lists the QPNs (qpn_base + lcore
 * index), P_Key and path MTU; a RoCEv2 job without max_elems gets the
 * path MTU's 246 i32 at MTU 1500, and is listed with its transport,
 * Q_Key and members' QPNs; one past the path MTU is refused; with
 * RoCEv2 off ping has no "roce" and RoCEv2 jobs are refused.
 */
static void
roce_jobs(void **state)
{
	json_t *r, *j, *roce;

	(void)state;
	dp.self.qpn_base = 0x100;
	r = call("{\"cmd\":\"ping\"}");
	roce = json_object_get(r, "roce");
	assert_non_null(roce);
	assert_int_equal(json_array_size(json_object_get(roce, "qpns")), 1);
	assert_int_equal(json_integer_value(json_array_get(json_object_get(
		roce, "qpns"), 0)), 0x100);
	assert_int_equal(json_integer_value(json_object_get(roce, "pkey")),
		0xffff);
	assert_int_equal(json_integer_value(json_object_get(roce, "pmtu")),
		1024);
	assert_int_equal(json_integer_value(json_object_get(roce,
		"max_elems")), 246);
	json_decref(r);
	r = call(ROCE1 "\"id\":21}");
	assert_int_equal(errno_of(r), 0);
	json_decref(r);
	r = call("{\"cmd\":\"job_list\",\"after\":20,\"limit\":1}");
	j = json_array_get(json_object_get(r, "jobs"), 0);
	assert_int_equal(json_integer_value(json_object_get(j, "max_elems")),
		246);
	assert_string_equal(json_string_value(json_object_get(j,
		"transport")), "roce");
	assert_int_equal(json_integer_value(json_object_get(j, "qkey")),
		0x7a110000 + 21);
	assert_int_equal(json_integer_value(json_object_get(json_array_get(
		json_object_get(j, "members"), 0), "qpn")), 4660);
	/* tallyd compares the listing's ports with what it sent: 4791. */
	assert_int_equal(json_integer_value(json_object_get(json_array_get(
		json_object_get(j, "members"), 0), "port")), 4791);
	json_decref(r);
	r = call("{\"cmd\":\"job_del\",\"id\":21}");
	json_decref(r);
	refused(ROCE1 "\"id\":22,\"max_elems\":247,\"encodings\":[\"i32\"]}",
		EMSGSIZE, "job 22: 247 elements of i32 make 1028-byte RoCEv2 "
		"messages (widened results), over the path MTU of 1024 bytes "
		"(a UD message is one packet; port MTU 1500); at most max_elems "
		"246 for these encodings");
	dp.self.qpn_base = 0;
	r = call("{\"cmd\":\"ping\"}");
	assert_null(json_object_get(r, "roce"));
	json_decref(r);
	refused(ROCE1 "\"id\":23}", EPROTONOSUPPORT, "job 23 has RoCEv2 "
		"members, and tally-dp runs without RoCEv2 (--roce-qpn-base 0) "
		"or its MTU of 1500 bytes takes no element");
	refused(ROCE1 "\"id\":23,\"max_elems\":8}", EPROTONOSUPPORT, "job 23 "
		"has RoCEv2 members, and tally-dp runs without RoCEv2 "
		"(--roce-qpn-base 0)");
}

/*
 * A client sends requests and never reads the replies. It is cut off
 * once its replies pile up; meanwhile and afterwards another client's
 * pings are answered at once.
 */
static void
slow_client(void **state)
{
	static const char stats[] = "{\"cmd\":\"stats\"}";
	int lfd, slow, fast, cut = 0;
	pthread_t t = serve_start(&lfd);
	uint64_t slow0 = dp.admin.slow;
	int64_t t0;

	(void)state;
	slow = client();
	fast = client();
	fcntl(slow, F_SETFL, O_NONBLOCK);
	t0 = now_ms();
	/* Far more replies than the socket and the client's queue hold. */
	for (unsigned int i = 0; i < 20000 && !cut; i++) {
		if (send(slow, stats, sizeof(stats) - 1, MSG_NOSIGNAL) < 0) {
			if (errno != EAGAIN) {
				cut = 1;	/* tally-dp hung up */
				continue;
			}
			/* Its queue is full: tally-dp must still serve. */
			assert_true(ping_within(fast, 1000));
			usleep(1000);
			i--;
		}
		if (i % 500 == 0)
			assert_true(ping_within(fast, 1000));
		assert_true(now_ms() - t0 < 60000);
	}
	/* Whatever was sent, tally-dp's side is closed by now. */
	while (dp.admin.slow == slow0 && now_ms() - t0 < 60000)
		usleep(10000);
	assert_int_equal(dp.admin.slow - slow0, 1);
	assert_true(ping_within(fast, 1000));
	close(slow);
	close(fast);
	serve_stop(t, lfd);
}

/* Requests of a client gone before they were read are not run. */
static void
stale_requests(void **state)
{
	static const char add[] = ADD1 "\"id\":9}";
	uint64_t stale0 = dp.admin.stale;
	int lfd, fd;
	pthread_t t;

	(void)state;
	lfd = tally_dp_admin_open(sock_path);
	assert_true(lfd >= 0);
	/* Queued before tally-dp serves: connect, send, hang up. */
	fd = client();
	assert_int_equal(send(fd, add, sizeof(add) - 1, 0),
		(ssize_t)sizeof(add) - 1);
	close(fd);
	dp.stop = 0;
	assert_int_equal(pthread_create(&t, NULL, serve_thread,
		(void *)(intptr_t)lfd), 0);
	fd = client();
	assert_true(ping_within(fd, 2000));
	close(fd);
	serve_stop(t, lfd);
	assert_int_equal(dp.admin.stale - stale0, 1);
	assert_int_equal(dp.njobs, 0);
}

/*
 * The socket path: a live tally-dp's is never taken (-EADDRINUSE) and
 * keeps answering; a stale socket is taken over; a file or a socket of
 * another type is left alone (-EEXIST).
 */
static void
open_refuses_live(void **state)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int lfd, fd, s;
	pthread_t t = serve_start(&lfd);

	(void)state;
	assert_int_equal(tally_dp_admin_open(sock_path), -EADDRINUSE);
	fd = client();
	assert_true(ping_within(fd, 1000));
	close(fd);
	serve_stop(t, lfd);

	/* Stale: bound by a process that is gone (never listened here). */
	strcpy(sa.sun_path, sock_path);
	s = socket(AF_UNIX, SOCK_SEQPACKET, 0);
	assert_int_equal(bind(s, (struct sockaddr *)&sa, sizeof(sa)), 0);
	close(s);
	lfd = tally_dp_admin_open(sock_path);
	assert_true(lfd >= 0);
	close(lfd);
	unlink(sock_path);

	/* A stream socket someone listens on. */
	s = socket(AF_UNIX, SOCK_STREAM, 0);
	assert_int_equal(bind(s, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(s, 1), 0);
	assert_int_equal(tally_dp_admin_open(sock_path), -EEXIST);
	close(s);
	unlink(sock_path);

	/* A plain file. */
	fd = open(sock_path, O_CREAT | O_WRONLY, 0600);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(tally_dp_admin_open(sock_path), -EEXIST);
	unlink(sock_path);
}

static int
setup(void **state)
{
	(void)state;
	snprintf(sock_path, sizeof(sock_path), "/tmp/tally-admin-test-%d.sock",
		(int)getpid());
	unlink(sock_path);
	dp.nworkers = 1;
	dp.max_jobs = MAX_JOBS;
	dp.mtu = 1500;
	dp.mem_budget = 1ull << 30;
	dp.max_job_mem = 256ull << 20;
	dp.self.ip = self_ip;
	dp.self.port = RTE_BE16(SELF_PORT);
	dp.self.nports = 1;
	return tally_dp_jobs_init(&dp) == 0 ? 0 : -1;
}

static int
teardown(void **state)
{
	(void)state;
	tally_dp_jobs_fini(&dp);
	unlink(sock_path);
	return 0;
}

int
main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(token_fp_vector),
		cmocka_unit_test(list_at_max_jobs),
		cmocka_unit_test(job_del_counters),
		cmocka_unit_test(ping_limits),
		cmocka_unit_test(job_add_refusals),
		cmocka_unit_test(roce_jobs),
		cmocka_unit_test(slow_client),
		cmocka_unit_test(stale_requests),
		cmocka_unit_test(open_refuses_live),
	};
	int rc;

	(void)argc;
	if (test_eal_init(argv[0]) != 0)
		return 1;
	rc = cmocka_run_group_tests(tests, setup, teardown);
	test_eal_fini();
	return rc;
}

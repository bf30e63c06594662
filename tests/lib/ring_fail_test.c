/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The ring fallback's failures, over loopback TCP: a killed peer (the
 * other ranks are processes of their own) and a stopped one give an
 * error on every other rank within the timeout, never a hang; hellos
 * that are silent, junk, of another world or rank, or that cannot
 * prove the key are refused and counted while the right peer still
 * gets in;
 * members with another key (job, token or epoch) cannot form a ring;
 * ranks out of step (another size) are refused with -EPROTO and
 * counted; a call the ring does not carry gives -EOPNOTSUPP and leaves
 * the context usable. Also maxima in IEEE 754's total order.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include <tally/tally.h>

#include "lib/ctx.h"
#include "lib/ring.h"

#define WMAX		4
#define TIMEOUT_MS	1500

static const uint8_t KEY[32] = "0123456789abcdef0123456789abcdef";
static const uint8_t KEY2[32] = "0123456789abcdef0123456789abcdeF";

static struct tally_ring *gs[WMAX];
static char addrs[WMAX][32];
static const char *addrv[WMAX];

static int64_t
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void
listeners(unsigned int world)
{
	for (unsigned int r = 0; r < world; r++) {
		char why[256];
		uint32_t ip;
		uint16_t port;

		gs[r] = tally_ring_listen(htonl(INADDR_LOOPBACK), 0, why,
			sizeof(why));
		assert_non_null(gs[r]);
		tally_ring_local(gs[r], &ip, &port);
		snprintf(addrs[r], sizeof(addrs[r]), "127.0.0.1:%u",
			ntohs(port));
		addrv[r] = addrs[r];
	}
}

/* What a rank thread does: open, then one call of kind with n lanes. */
struct rank {
	pthread_t t;
	unsigned int rank, world;
	const uint8_t *key;
	size_t n;
	int kind;		/* 0: i32 sum, 1: f32 max, 2: allgather */
	uint32_t *buf;
	int open_rc, rc, rc2;
	char err[256];
	struct tally_ctx_stats st;
};

static struct tally_ctx *
open_rank(unsigned int rank, unsigned int world, const uint8_t *key,
	int *rc)
{
	struct tally_ctx_opts o = { .transport = "ring",
		.rank = (uint8_t)rank, .world = (uint8_t)world, .ring = addrv,
		.ring_key = key, .timeout_ms = TIMEOUT_MS,
		.join_timeout_ms = 3000 };
	struct tally_ctx *ctx = NULL;

	*rc = tally_lib_ctx_open(&o, gs[rank], &ctx);
	gs[rank] = NULL;
	return ctx;
}

static void *
run_rank(void *arg)
{
	struct rank *k = arg;
	struct tally_ctx *ctx = open_rank(k->rank, k->world, k->key,
		&k->open_rc);
	uint32_t out[8];

	if (ctx == NULL) {
		snprintf(k->err, sizeof(k->err), "%s", tally_ctx_error(NULL));
		return NULL;
	}
	if (k->kind == 0)
		k->rc = tally_allreduce_i32(ctx, (int32_t *)k->buf, k->n);
	else if (k->kind == 1)
		k->rc = tally_allreduce_max_f32(ctx, (float *)k->buf, k->n);
	else
		k->rc = tally_allgather(ctx, k->buf, out, 1, TALLY_DT_I32);
	snprintf(k->err, sizeof(k->err), "%s", tally_ctx_error(ctx));
	if (k->kind == 2)	/* still usable: an i32 sum goes through */
		k->rc2 = tally_allreduce_i32(ctx, (int32_t *)k->buf, k->n);
	tally_ctx_stats(ctx, &k->st);
	tally_ctx_close(ctx);
	return NULL;
}

static void
run_ranks(struct rank *k, unsigned int world)
{
	for (unsigned int r = 0; r < world; r++)
		assert_int_equal(pthread_create(&k[r].t, NULL, run_rank, &k[r]),
			0);
	for (unsigned int r = 0; r < world; r++)
		pthread_join(k[r].t, NULL);
}

/* The key of IEEE 754's total order of f32 bits. */
static int32_t
order_key(uint32_t b)
{
	return (int32_t)(b ^ ((b >> 31) ? 0x7fffffffu : 0));
}

static void
maxima(void **state)
{
	static const uint32_t special[] = { 0x80000000u, 0, 0x7fc00000u,
		0xffc00000u, 0x7f800000u, 0xff800000u, 1, 0x80000001u };
	struct rank k[3] = { 0 };
	uint32_t ref[64];

	(void)state;
	listeners(3);
	for (unsigned int r = 0; r < 3; r++) {
		k[r] = (struct rank){ .rank = r, .world = 3, .key = KEY,
			.n = 64, .kind = 1 };
		k[r].buf = malloc(64 * sizeof(uint32_t));
		for (unsigned int i = 0; i < 64; i++) {
			uint32_t v = special[(i * 7 + r * 3) % 8] ^
				(i >= 32 ? i * 0x01010101u * (r + 1) : 0);

			k[r].buf[i] = v;
			if (r == 0 || order_key(v) > order_key(ref[i]))
				ref[i] = v;
		}
	}
	run_ranks(k, 3);
	for (unsigned int r = 0; r < 3; r++) {
		if (k[r].open_rc || k[r].rc)
			fail_msg("rank %u: %d %d %s", r, k[r].open_rc, k[r].rc,
				k[r].err);
		assert_memory_equal(k[r].buf, ref, sizeof(ref));
		free(k[r].buf);
	}
}

static void
not_carried(void **state)
{
	struct rank k[2] = { 0 };
	uint32_t v[2][4] = { { 1, 2, 3, 4 }, { 10, 20, 30, 40 } };

	(void)state;
	listeners(2);
	for (unsigned int r = 0; r < 2; r++)
		k[r] = (struct rank){ .rank = r, .world = 2, .key = KEY,
			.n = 4, .kind = 2, .buf = v[r] };
	run_ranks(k, 2);
	for (unsigned int r = 0; r < 2; r++) {
		assert_int_equal(k[r].open_rc, 0);
		assert_int_equal(k[r].rc, -EOPNOTSUPP);
		assert_non_null(strstr(k[r].err, "ring fallback"));
		assert_int_equal(k[r].rc2, 0);
		assert_int_equal(v[r][3], 44);
	}
}

/*
 * A world of 4 in processes; victim does what how says before its
 * second call (SIGKILL or SIGSTOP itself). Every other rank's second
 * call must fail within the timeout (plus a second for the cascade
 * around the ring and a loaded machine).
 */
static void
peer_gone(int how)
{
	int fds[2], victim = 2;
	pid_t pid[WMAX];

	listeners(WMAX);
	assert_int_equal(pipe(fds), 0);
	for (unsigned int r = 0; r < WMAX; r++) {
		if ((pid[r] = fork()) != 0)
			continue;
		int32_t buf[4096] = { 1 };
		int rc, open_rc, res[3];
		struct tally_ctx *ctx = open_rank(r, WMAX, KEY, &open_rc);
		int64_t t0;

		if (ctx == NULL || tally_allreduce_i32(ctx, buf, 4096) != 0)
			_exit(3);
		if ((int)r == victim)
			raise(how);
		t0 = now_ms();
		rc = tally_allreduce_i32(ctx, buf, 4096);
		res[0] = (int)r;
		res[1] = rc;
		res[2] = (int)(now_ms() - t0);
		if (write(fds[1], res, sizeof(res)) != sizeof(res))
			_exit(4);
		_exit(0);
	}
	for (unsigned int r = 0; r < WMAX; r++)
		tally_ring_destroy(gs[r]);
	close(fds[1]);
	for (unsigned int i = 0; i < WMAX - 1; i++) {
		int res[3];

		assert_int_equal(read(fds[0], res, sizeof(res)), sizeof(res));
		print_message("# rank %d: %d after %d ms\n", res[0], res[1],
			res[2]);
		assert_int_not_equal(res[0], victim);
		assert_true(res[1] == -ECONNRESET || res[1] == -ETIMEDOUT ||
			res[1] == -EPIPE);
		assert_true(res[2] <= TIMEOUT_MS + 1000);
	}
	close(fds[0]);
	kill(pid[victim], SIGKILL);
	for (unsigned int r = 0; r < WMAX; r++) {
		int st;

		waitpid(pid[r], &st, 0);
		if ((int)r != victim)
			assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	}
}

static void
killed_peer(void **state)
{
	(void)state;
	peer_gone(SIGKILL);
}

static void
stopped_peer(void **state)
{
	(void)state;
	peer_gone(SIGSTOP);
}

/* Connects to rank 1's listener and sends len bytes of msg. */
static int
send_raw(const void *msg, size_t len)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
		.sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	unsigned int port = (unsigned int)atoi(strchr(addrs[1], ':') + 1);

	sa.sin_port = htons((uint16_t)port);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(write(fd, msg, len), (ssize_t)len);
	return fd;
}

static void
bad_hellos(void **state)
{
	uint8_t junk[28] = "GET / HTTP/1.0\r\n\r\n";
	uint8_t world3[28] = { 'T', 'R', 'N', 'G', 1, 1, 0, 0, 3, 0, 1 };
	uint8_t forged[28 + 40] = { 'T', 'R', 'N', 'G', 1, 1, 0, 0, 2, 0, 1 };
	struct rank k[2] = { 0 };
	int32_t v[2][3] = { { 1, 2, 3 }, { 4, 5, 6 } };
	int fd[4];

	(void)state;
	listeners(2);
	/* Queued at rank 1 before rank 0 connects: refused in turn. */
	fd[3] = send_raw(junk, 0);	/* silent: refused after 2 s */
	fd[0] = send_raw(junk, sizeof(junk));
	fd[1] = send_raw(world3, sizeof(world3));
	memcpy(forged + 28, "TRNG\x01\x03\0\0", 8);	/* a proof, junk MAC */
	fd[2] = send_raw(forged, sizeof(forged));
	for (unsigned int r = 0; r < 2; r++)
		k[r] = (struct rank){ .rank = r, .world = 2, .key = KEY,
			.n = 3, .buf = (uint32_t *)v[r] };
	run_ranks(k, 2);
	for (unsigned int r = 0; r < 2; r++) {
		if (k[r].open_rc || k[r].rc)
			fail_msg("rank %u: %d %d %s", r, k[r].open_rc, k[r].rc,
				k[r].err);
		assert_int_equal(v[r][2], 9);
	}
	assert_int_equal(k[1].st.ring_refused, 4);
	assert_int_equal(k[0].st.ring_refused, 0);
	for (int i = 0; i < 4; i++)
		close(fd[i]);
}

static void
wrong_key(void **state)
{
	struct rank k[2] = { 0 };
	int32_t v[2][1] = { { 1 }, { 2 } };

	(void)state;
	listeners(2);
	for (unsigned int r = 0; r < 2; r++)
		k[r] = (struct rank){ .rank = r, .world = 2, .n = 1,
			.key = r == 0 ? KEY : KEY2, .buf = (uint32_t *)v[r] };
	run_ranks(k, 2);
	for (unsigned int r = 0; r < 2; r++) {
		print_message("# rank %u: %d: %s\n", r, k[r].open_rc, k[r].err);
		assert_int_not_equal(k[r].open_rc, 0);
	}
	assert_true(k[0].open_rc == -EACCES || k[1].open_rc == -EACCES);
}

static void
out_of_step(void **state)
{
	struct rank k[2] = { 0 };
	static uint32_t v[2][300];

	(void)state;
	listeners(2);
	for (unsigned int r = 0; r < 2; r++)
		k[r] = (struct rank){ .rank = r, .world = 2, .key = KEY,
			.n = r == 0 ? 200 : 300, .buf = v[r] };
	run_ranks(k, 2);
	for (unsigned int r = 0; r < 2; r++) {
		print_message("# rank %u: %d: %s\n", r, k[r].rc, k[r].err);
		assert_int_equal(k[r].open_rc, 0);
		assert_int_not_equal(k[r].rc, 0);
	}
	assert_true((k[0].rc == -EPROTO && k[0].st.ring_bad_frames == 1) ||
		(k[1].rc == -EPROTO && k[1].st.ring_bad_frames == 1));
	assert_true(strstr(k[0].err, "same call") != NULL ||
		strstr(k[1].err, "same call") != NULL);
}

static void
keys(void **state)
{
	uint8_t tok[32] = { 7 }, a[32], b[32], c[32], d[32];

	(void)state;
	tally_ring_key(tok, "job", 1, a);
	tally_ring_key(tok, "job", 2, b);
	tally_ring_key(tok, "jog", 1, c);
	tok[31] = 1;
	tally_ring_key(tok, "job", 1, d);
	assert_memory_not_equal(a, b, 32);
	assert_memory_not_equal(a, c, 32);
	assert_memory_not_equal(a, d, 32);
	tok[31] = 0;
	tally_ring_key(tok, "job", 1, b);
	assert_memory_equal(a, b, 32);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(maxima),
		cmocka_unit_test(not_carried),
		cmocka_unit_test(killed_peer),
		cmocka_unit_test(stopped_peer),
		cmocka_unit_test(bad_hellos),
		cmocka_unit_test(wrong_key),
		cmocka_unit_test(out_of_step),
		cmocka_unit_test(keys),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The RDMA (verbs) transport against a fake device (fakeverbs.c): its
 * data path through the fake's struct ibv_context, its control calls
 * through the fake's ops table.
 *
 * Set-up: every control call of the ladder, failed in turn, gives a
 * clear error naming the step and leaves nothing behind (the fake counts
 * live objects; ASan sees leaks); a bad configuration, a port down, an
 * MTU below the packets, a device not there are refused. Data path:
 * packets reach the dataplane QPN that owns their slot byte for byte,
 * one send in 32 signalled and the send queue never overrun; receives
 * come up with their GRH area skipped, those from strangers with length
 * 0. Completions with an error status end the transport with the status
 * in words and a counter. Whole contexts over the fake against the real
 * engine (loopagg): exact sums, and exact sums with sends dropped (the
 * window's retransmissions).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <tally/tally.h>

#include "fakeverbs.h"
#include "loopagg.h"
#include "transport/transport.h"

#define LOOP		htonl(INADDR_LOOPBACK)
#define QPN_BASE	0x100
#define QKEY		0x1234567u
#define ROOM		(TALLY_HDR_LEN + 1024 + TALLY_TAG_LEN)

static const uint32_t qpns[4] = { QPN_BASE, QPN_BASE + 1, QPN_BASE + 2,
	QPN_BASE + 3 };

static struct fakeverbs_conf
fake_conf(uint16_t agg_port, uint16_t nports)
{
	return (struct fakeverbs_conf){ .local_ip = LOOP, .dp_ip = LOOP,
		.agg_port = agg_port, .agg_nports = nports,
		.qpn_base = QPN_BASE, .qkey = QKEY };
}

static struct tally_verbs_conf
tp_conf(uint16_t nqpns)
{
	return (struct tally_verbs_conf){ .local_ip = LOOP, .dp_ip = LOOP,
		.dp_qpns = qpns, .dp_nqpns = nqpns, .qkey = QKEY,
		.room = ROOM, .ops = &fakeverbs_ops };
}

static uint64_t
live(void)
{
	struct fakeverbs_stats st;

	fakeverbs_stats(&st);
	return st.live;
}

/* What a failed call of the ladder must give: errno, and words in why. */
static void
check_failed_step(const char *failed, int err, const char *why)
{
	static const struct { const char *call, *words; } steps[] = {
		{ "open_device", "cannot open fake0" },
		{ "query_port", "fake0 port 1" },
		{ "alloc_pd", "protection domain" },
		{ "reg_mr", "registering" },
		{ "create_cq", "CQ" },
		{ "create_qp", "UD QP" },
		{ "modify_qp", "QP to " },
		{ "create_ah", "address handle toward 127.0.0.1" },
	};

	if (strcmp(failed, "get_device_list") == 0) {
		assert_int_equal(err, ENODEV);
		assert_non_null(strstr(why, "no RDMA device"));
		return;
	}
	for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		if (strcmp(failed, steps[i].call) != 0)
			continue;
		assert_int_equal(err, EREMOTEIO);
		if (strstr(why, steps[i].words) == NULL)
			fail_msg("%s failed: why '%s' lacks '%s'", failed, why,
				steps[i].words);
		return;
	}
	fail_msg("unexpected failing call %s (%s)", failed, why);
}

/*
 * Fails the ladder's k-th control call, for every k of a whole set-up:
 * each ladder step gives its errno and words; a GID query that fails
 * costs nothing unless it is the RoCEv2 entry's (then: no GID); nothing
 * is left live either way.
 */
static void
test_ladder_unwind(void **state)
{
	struct fakeverbs_conf fc = fake_conf(0, 1);
	struct tally_verbs_conf c = tp_conf(1);
	struct fakeverbs_stats st;
	struct tally_transport *tp;
	char why[TALLY_TP_WHY_LEN];
	uint64_t ncalls, k, failed = 0;

	(void)state;
	fakeverbs_reset(&fc);
	tp = tally_verbs_transport_create(&c, why, sizeof(why));
	assert_non_null(tp);
	assert_true(tp->qpn >= 0x2000);
	assert_string_equal(tp->name, "rdma");
	tally_transport_destroy(tp);
	fakeverbs_stats(&st);
	assert_int_equal(st.live, 0);
	ncalls = st.calls;
	assert_true(ncalls >= 14);
	for (k = 1; k <= ncalls; k++) {
		fc.fail_at = (unsigned int)k;
		fc.fail_errno = EREMOTEIO;
		fakeverbs_reset(&fc);
		errno = 0;
		tp = tally_verbs_transport_create(&c, why, sizeof(why));
		fakeverbs_stats(&st);
		if (tp != NULL) {
			/* Only a GID entry the transport does not need. */
			assert_string_equal(st.failed, "query_gid_ex");
			tally_transport_destroy(tp);
		} else if (strcmp(st.failed, "query_gid_ex") == 0) {
			assert_int_equal(errno, ENODEV);
			assert_non_null(strstr(why, "no RoCEv2 GID for "
				"127.0.0.1"));
			failed++;
		} else {
			check_failed_step(st.failed, errno, why);
			failed++;
		}
		assert_int_equal(live(), 0);
	}
	assert_true(failed >= ncalls - 3);
	/* A receive that cannot be posted also unwinds. */
	fc = fake_conf(0, 1);
	fc.fail_post_recv = 2;
	fakeverbs_reset(&fc);
	assert_null(tally_verbs_transport_create(&c, why, sizeof(why)));
	assert_int_equal(errno, ENOMEM);
	assert_non_null(strstr(why, "posting receives"));
	assert_int_equal(live(), 0);
}

/* Configurations and ports the transport refuses, with their errnos. */
static void
test_refused(void **state)
{
	struct fakeverbs_conf fc = fake_conf(0, 1);
	struct tally_verbs_conf c;
	struct tally_transport *tp;
	char why[TALLY_TP_WHY_LEN];
	uint32_t bad_qpn[1] = { 0x1000000 };

	(void)state;
	fakeverbs_reset(&fc);
	c = tp_conf(0);
	assert_null(tally_verbs_transport_create(&c, why, sizeof(why)));
	assert_int_equal(errno, EINVAL);
	c = tp_conf(1);
	c.qkey = 0x80000001u;	/* a controlled Q_Key: not ours to use */
	assert_null(tally_verbs_transport_create(&c, why, sizeof(why)));
	assert_int_equal(errno, EINVAL);
	c = tp_conf(1);
	c.dp_qpns = bad_qpn;
	assert_null(tally_verbs_transport_create(&c, why, sizeof(why)));
	assert_int_equal(errno, EINVAL);
	assert_non_null(strstr(why, "QPN"));
	c = tp_conf(1);
	c.device = "mlx5_9";
	assert_null(tally_verbs_transport_create(&c, why, sizeof(why)));
	assert_int_equal(errno, ENODEV);
	assert_non_null(strstr(why, "no RDMA device named mlx5_9"));
	c = tp_conf(1);
	c.local_ip = htonl(0x0a000001);
	assert_null(tally_verbs_transport_create(&c, why, sizeof(why)));
	assert_int_equal(errno, ENODEV);
	assert_non_null(strstr(why, "no RoCEv2 GID for 10.0.0.1"));
	fc.port_down = 1;
	fakeverbs_reset(&fc);
	c = tp_conf(1);
	assert_null(tally_verbs_transport_create(&c, why, sizeof(why)));
	assert_int_equal(errno, ENETDOWN);
	fc.port_down = 0;
	fc.mtu = IBV_MTU_1024;	/* Ethernet 1500 */
	fakeverbs_reset(&fc);
	assert_null(tally_verbs_transport_create(&c, why, sizeof(why)));
	assert_int_equal(errno, EMSGSIZE);
	assert_non_null(strstr(why, "path MTU of 1024"));
	/*
	 * What must fit is the job's largest message (wire_max: 246 f32
	 * elements and the header, no tag), not the buffers' room, which
	 * counts a tag whether the job has one or not.
	 */
	c.wire_max = TALLY_HDR_LEN + 4 * 246;
	fakeverbs_reset(&fc);
	tp = tally_verbs_transport_create(&c, why, sizeof(why));
	assert_non_null(tp);
	tally_transport_destroy(tp);
	c.wire_max++;
	fakeverbs_reset(&fc);
	assert_null(tally_verbs_transport_create(&c, why, sizeof(why)));
	assert_int_equal(errno, EMSGSIZE);
	assert_non_null(strstr(why, "packets of 1025 bytes"));
	assert_int_equal(live(), 0);
}

/* Binds n sockets on consecutive ports of 127.0.0.1: the first port. */
static uint16_t
dp_socks(int *fds, unsigned int n)
{
	for (unsigned int tries = 0; tries < 200; tries++) {
		uint16_t base = (uint16_t)(30000 + (getpid() * 31 +
			tries * 97) % 30000);
		unsigned int i;

		for (i = 0; i < n; i++) {
			struct sockaddr_in sa = { .sin_family = AF_INET,
				.sin_addr.s_addr = LOOP,
				.sin_port = htons((uint16_t)(base + i)) };

			fds[i] = socket(AF_INET, SOCK_DGRAM, 0);
			assert_true(fds[i] >= 0);
			if (bind(fds[i], (struct sockaddr *)&sa,
					sizeof(sa)) != 0)
				break;
		}
		if (i == n)
			return base;
		for (unsigned int j = 0; j <= i && j < n; j++)
			close(fds[j]);
	}
	fail_msg("no free ports");
	return 0;
}

/* Receives one datagram on fd (waiting up to a second): its length. */
static ssize_t
dp_recv(int fd, void *buf, size_t room, struct sockaddr_in *from)
{
	struct timeval tv = { .tv_sec = 1 };
	socklen_t fl = sizeof(*from);

	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	return recvfrom(fd, buf, room, 0, (struct sockaddr *)from, &fl);
}

/* Packet i of the data-path test: header, payload and tag pieces. */
static void
make_pkt(unsigned int i, uint8_t *hdr, uint8_t *pay, uint8_t *tag,
	struct tally_tx_pkt *p)
{
	for (unsigned int j = 0; j < TALLY_HDR_LEN; j++)
		hdr[j] = (uint8_t)(i * 7 + j);
	for (unsigned int j = 0; j < 100 + i; j++)
		pay[j] = (uint8_t)(i ^ j);
	memset(tag, (int)i, TALLY_TAG_LEN);
	*p = (struct tally_tx_pkt){ .slot = (uint16_t)i,
		.iov = { { hdr, TALLY_HDR_LEN }, { pay, 100 + i },
			{ tag, i % 2 ? TALLY_TAG_LEN : 0 } } };
}

/*
 * Packets go to the QPN of their slot (two QPNs: two ports) byte for
 * byte, gathered from three pieces; one in 32 is signalled; an answer
 * comes up without its GRH area, a stranger's with length 0, and a
 * receive with nothing there waits its timeout.
 */
static void
test_data_path(void **state)
{
	int fds[3];
	uint16_t base = dp_socks(fds, 3);
	struct fakeverbs_conf fc = fake_conf(base, 2);
	struct tally_verbs_conf c = tp_conf(2);
	static uint8_t hdr[64][TALLY_HDR_LEN], pay[64][256], tag[64][16];
	struct tally_tx_pkt p[32];
	struct tally_rx_pkt rx[4];
	uint8_t buf[2048], rbuf[4][2048];
	struct sockaddr_in from, me;
	struct fakeverbs_stats st;
	struct tally_transport *tp;
	char why[TALLY_TP_WHY_LEN];
	uint64_t t0, t1;
	struct timespec ts;

	(void)state;
	fakeverbs_reset(&fc);
	tp = tally_verbs_transport_create(&c, why, sizeof(why));
	assert_non_null(tp);
	for (unsigned int i = 0; i < 32; i++)
		make_pkt(i, hdr[i], pay[i], tag[i], &p[i]);
	assert_int_equal(tally_transport_send(tp, p, 32), 32);
	for (unsigned int i = 0; i < 32; i++) {
		ssize_t n = dp_recv(fds[i % 2], buf, sizeof(buf), &from);
		size_t want = TALLY_HDR_LEN + 100 + i +
			(i % 2 ? TALLY_TAG_LEN : 0);

		assert_int_equal(n, (ssize_t)want);
		assert_memory_equal(buf, hdr[i], TALLY_HDR_LEN);
		assert_memory_equal(buf + TALLY_HDR_LEN, pay[i], 100 + i);
		if (i % 2)
			assert_memory_equal(buf + TALLY_HDR_LEN + 100 + i,
				tag[i], TALLY_TAG_LEN);
		if (i == 0)
			me = from;
	}
	fakeverbs_stats(&st);
	assert_int_equal(st.sends, 32);
	assert_int_equal(st.signalled, 1);
	assert_int_equal(st.bad_qkey + st.bad_qpn + st.dropped, 0);
	/* Answers: from dataplane port 1, then a stranger (port 3). */
	memset(buf, 0xa5, 300);
	assert_int_equal(sendto(fds[1], buf, 300, 0, (struct sockaddr *)&me,
		sizeof(me)), 300);
	assert_int_equal(sendto(fds[2], buf, 77, 0, (struct sockaddr *)&me,
		sizeof(me)), 77);
	for (int i = 0; i < 4; i++)
		rx[i] = (struct tally_rx_pkt){ .buf = rbuf[i], .room = 2048 };
	ts = (struct timespec){ .tv_nsec = 20000000 };
	nanosleep(&ts, NULL);
	assert_int_equal(tally_transport_recv(tp, rx, 4, 100000), 2);
	assert_int_equal(rx[0].len, 300);
	assert_memory_equal(rbuf[0], buf, 300);
	assert_int_equal(rx[1].len, 0);
	/* The same with a GRH (IPv4-mapped source GID) in the area. */
	fc.grh_ib = 1;
	fakeverbs_reset(&fc);
	assert_int_equal(sendto(fds[0], buf, 200, 0, (struct sockaddr *)&me,
		sizeof(me)), 200);
	nanosleep(&(struct timespec){ .tv_nsec = 20000000 }, NULL);
	assert_int_equal(tally_transport_recv(tp, rx, 4, 100000), 1);
	assert_int_equal(rx[0].len, 200);
	assert_memory_equal(rbuf[0], buf, 200);
	/* Nothing there: the timeout passes, 0 packets. */
	clock_gettime(CLOCK_MONOTONIC, &ts);
	t0 = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
	assert_int_equal(tally_transport_recv(tp, rx, 4, 30000), 0);
	clock_gettime(CLOCK_MONOTONIC, &ts);
	t1 = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
	assert_true(t1 - t0 >= 30000000u);
	assert_int_equal(tp->errors, 0);
	tally_transport_destroy(tp);
	assert_int_equal(live(), 0);
	for (int i = 0; i < 3; i++)
		close(fds[i]);
}

/*
 * Thousands of sends with no one answering: the send queue (512) never
 * overruns (the fake refuses a post past it), because signalled
 * completions free the slots, one every 32 sends.
 */
static void
test_send_queue(void **state)
{
	struct fakeverbs_conf fc = fake_conf(0, 1);
	struct tally_verbs_conf c = tp_conf(1);
	static uint8_t hdr[TALLY_HDR_LEN], pay[256];
	struct tally_tx_pkt p[32];
	struct fakeverbs_stats st;
	struct tally_transport *tp;
	char why[TALLY_TP_WHY_LEN];

	(void)state;
	fakeverbs_reset(&fc);
	tp = tally_verbs_transport_create(&c, why, sizeof(why));
	assert_non_null(tp);
	for (unsigned int i = 0; i < 32; i++)
		p[i] = (struct tally_tx_pkt){ .slot = (uint16_t)i,
			.iov = { { hdr, sizeof(hdr) }, { pay, sizeof(pay) } } };
	for (unsigned int b = 0; b < 200; b++)
		assert_int_equal(tally_transport_send(tp, p, 32), 32);
	fakeverbs_stats(&st);
	assert_int_equal(st.sends, 6400);
	assert_int_equal(st.signalled, 200);
	assert_true(st.max_outstanding <= 512);
	assert_int_equal(tp->errors, 0);
	tally_transport_destroy(tp);
	assert_int_equal(live(), 0);
}

/*
 * A signalled send that completes with an error status: the transport
 * is broken from then on (-EIO), the status in words, counted once.
 */
static void
test_send_error(void **state)
{
	struct fakeverbs_conf fc = fake_conf(0, 1);
	struct tally_verbs_conf c = tp_conf(1);
	static uint8_t hdr[TALLY_HDR_LEN];
	struct tally_tx_pkt p[32];
	struct tally_rx_pkt rx[1];
	uint8_t rbuf[64];
	struct tally_transport *tp;
	char why[TALLY_TP_WHY_LEN];

	(void)state;
	fc.send_err_at = 2;
	fc.send_err = IBV_WC_LOC_LEN_ERR;
	fakeverbs_reset(&fc);
	tp = tally_verbs_transport_create(&c, why, sizeof(why));
	assert_non_null(tp);
	for (unsigned int i = 0; i < 32; i++)
		p[i] = (struct tally_tx_pkt){ .slot = (uint16_t)i,
			.iov = { { hdr, sizeof(hdr) } } };
	rx[0] = (struct tally_rx_pkt){ .buf = rbuf, .room = sizeof(rbuf) };
	assert_int_equal(tally_transport_send(tp, p, 32), 32);
	assert_int_equal(tally_transport_recv(tp, rx, 1, 0), 0);
	assert_int_equal(tally_transport_send(tp, p, 32), 32);
	assert_int_equal(tally_transport_recv(tp, rx, 1, 0), -EIO);
	assert_int_equal(tp->errors, 1);
	assert_non_null(strstr(tp->why, "send completion: local length "
		"error (status 1, vendor error 0x42)"));
	assert_string_equal(tally_transport_strerror(tp, -EIO), tp->why);
	assert_int_equal(tally_transport_send(tp, p, 1), -EIO);
	assert_int_equal(tally_transport_recv(tp, rx, 1, 0), -EIO);
	assert_int_equal(tp->errors, 1);
	tally_transport_destroy(tp);
	assert_int_equal(live(), 0);
}

#define JOB		21
#define TOKEN		UINT64_C(0xfeedfacecafebeef)
#define WORLD		4
#define N		20000

struct rank {
	pthread_t thread;
	unsigned int r, world;
	int open_rc, rc_i32, rc_f32;
	char err[256];
	int32_t *xi;
	float *xf;
	struct tally_ctx_stats st;
};

static int32_t
val(unsigned int r, size_t i)
{
	uint64_t z = (r + 1) * UINT64_C(0x9e3779b97f4a7c15) ^ (i * 2654435761u);

	z ^= z >> 29;
	return (int32_t)(z % 2000001) - 1000000;
}

/* Rank r's context over the fake device: i32 then f32 allreduces. */
static void *
rank_main(void *arg)
{
	struct rank *k = arg;
	struct tally_ctx_opts o = {
		.dp_addr = "127.0.0.1", .bind_addr = "127.0.0.1",
		.job = JOB, .token = TOKEN, .rank = (uint8_t)k->r,
		.world = (uint8_t)k->world, .window = 16, .elems = 256,
		.timeout_ms = 20000, .transport = "rdma",
		.dp_qpns = qpns, .dp_nqpns = 2, .qkey = QKEY,
	};
	struct tally_ctx *ctx = NULL;

	k->open_rc = tally_ctx_open(&o, &ctx);
	if (k->open_rc != 0) {
		snprintf(k->err, sizeof(k->err), "%s", tally_ctx_error(NULL));
		return NULL;
	}
	for (size_t i = 0; i < N; i++) {
		k->xi[i] = val(k->r, i);
		k->xf[i] = (float)val(k->r, i) / 4096.0f;
	}
	k->rc_i32 = tally_allreduce_i32(ctx, k->xi, N);
	k->rc_f32 = k->rc_i32 != 0 ? -ECANCELED :
		tally_allreduce_f32(ctx, k->xf, N);
	snprintf(k->err, sizeof(k->err), "%s", tally_ctx_error(ctx));
	tally_ctx_stats(ctx, &k->st);
	tally_ctx_close(ctx);
	return NULL;
}

/* Runs world ranks against a loopagg of 2 ports behind the fake. */
static void
run_ranks(struct rank *ks, unsigned int world, double drop,
	unsigned int recv_err_at, struct loopagg_stats *ast)
{
	struct loopagg_conf ac = { .job = JOB, .token = TOKEN,
		.world = (uint8_t)world, .window = 16, .max_elems = 256,
		.nports = 2, .seed = 7 };
	struct loopagg *a = loopagg_start(&ac);
	struct fakeverbs_conf fc;

	assert_non_null(a);
	fc = fake_conf(loopagg_port(a), 2);
	fc.drop = drop;
	fc.seed = 99;
	fc.recv_err_at = recv_err_at;
	fc.recv_err = IBV_WC_LOC_PROT_ERR;
	fakeverbs_reset(&fc);
	tally_verbs_set_default_ops(&fakeverbs_ops);
	for (unsigned int r = 0; r < world; r++) {
		ks[r] = (struct rank){ .r = r, .world = world,
			.xi = malloc(N * sizeof(int32_t)),
			.xf = malloc(N * sizeof(float)) };
		assert_non_null(ks[r].xi);
		assert_non_null(ks[r].xf);
		assert_int_equal(pthread_create(&ks[r].thread, NULL,
			rank_main, &ks[r]), 0);
	}
	for (unsigned int r = 0; r < world; r++)
		pthread_join(ks[r].thread, NULL);
	tally_verbs_set_default_ops(NULL);
	loopagg_stop(a, ast);
	assert_int_equal(live(), 0);
}

/* Every rank has the exact i32 sums and the same f32 bits. */
static void
check_sums(struct rank *ks, unsigned int world)
{
	for (unsigned int r = 0; r < world; r++) {
		if (ks[r].open_rc != 0 || ks[r].rc_i32 != 0 ||
				ks[r].rc_f32 != 0)
			fail_msg("rank %u: open %d i32 %d f32 %d: %s", r,
				ks[r].open_rc, ks[r].rc_i32, ks[r].rc_f32,
				ks[r].err);
		for (size_t i = 0; i < N; i++) {
			int64_t sum = 0;

			for (unsigned int q = 0; q < world; q++)
				sum += val(q, i);
			if (ks[r].xi[i] != (int32_t)sum)
				fail_msg("rank %u element %zu: %d, not %lld",
					r, i, ks[r].xi[i], (long long)sum);
		}
		assert_memory_equal(ks[r].xf, ks[0].xf, N * sizeof(float));
	}
	for (unsigned int r = 0; r < world; r++) {
		free(ks[r].xi);
		free(ks[r].xf);
	}
}

/* Four ranks over RDMA to the real engine: exact sums, nothing lost. */
static void
test_allreduce_exact(void **state)
{
	struct rank ks[WORLD];
	struct loopagg_stats ast;
	struct fakeverbs_stats st;

	(void)state;
	run_ranks(ks, WORLD, 0, 0, &ast);
	fakeverbs_stats(&st);
	for (unsigned int r = 0; r < WORLD; r++)
		assert_int_equal(ks[r].st.tp_errors, 0);
	check_sums(ks, WORLD);
	assert_true(st.delivered > 0);
	assert_int_equal(st.bad_qkey + st.bad_qpn + st.dropped, 0);
	assert_true(ast.rx == st.delivered);
}

/* Sends dropped at random: retransmissions make the sums exact. */
static void
test_allreduce_loss(void **state)
{
	struct rank ks[WORLD];
	struct loopagg_stats ast;
	struct fakeverbs_stats st;
	uint64_t retx = 0;

	(void)state;
	run_ranks(ks, WORLD, 0.03, 0, &ast);
	fakeverbs_stats(&st);
	for (unsigned int r = 0; r < WORLD; r++)
		retx += ks[r].st.retransmits;
	check_sums(ks, WORLD);
	assert_true(st.dropped > 0);
	assert_true(retx >= st.dropped / 2);
	print_message("# %llu sends dropped, %llu retransmitted\n",
		(unsigned long long)st.dropped, (unsigned long long)retx);
}

/*
 * A receive that completes with an error status ends the allreduce
 * with -EIO, the status in the context's error, counted in tp_errors.
 */
static void
test_allreduce_recv_error(void **state)
{
	struct rank ks[1];
	struct loopagg_stats ast;

	(void)state;
	run_ranks(ks, 1, 0, 5, &ast);
	assert_int_equal(ks[0].open_rc, 0);
	assert_int_equal(ks[0].rc_i32, -EIO);
	if (strstr(ks[0].err, "rdma transport: receive: receive completion: "
			"local protection error") == NULL)
		fail_msg("error: %s", ks[0].err);
	assert_int_equal(ks[0].st.tp_errors, 1);
	free(ks[0].xi);
	free(ks[0].xf);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ladder_unwind),
		cmocka_unit_test(test_refused),
		cmocka_unit_test(test_data_path),
		cmocka_unit_test(test_send_queue),
		cmocka_unit_test(test_send_error),
		cmocka_unit_test(test_allreduce_exact),
		cmocka_unit_test(test_allreduce_loss),
		cmocka_unit_test(test_allreduce_recv_error),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

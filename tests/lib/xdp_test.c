/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The AF_XDP transport (gpu/transport/xdp*.c).
 *
 * Frames: the headers it writes are the textbook IPv4 header (the
 * checksum of the classic example, 0xb861), and its check refuses a bad
 * checksum, another source, another port, a fragment, a short frame and
 * a UDP length beyond the datagram, and takes an IPv4 header with options.
 *
 * On a veth pair in a network namespace of its own (root only; skipped
 * otherwise): the transport on one end, the test on the other through a
 * packet socket, standing in for the dataplane. Sent packets arrive as
 * frames to the next hop's MAC, from the route's source address and the
 * port local() reports, to the port of their slot, checksummed, payload
 * intact; frames from the dataplane to that port are handed up intact;
 * one from another address or to another port is not (the kernel gets
 * it), and neither is ARP, which the kernel answers. A second context on
 * the interface is refused with EBUSY and a sentence, and one can open
 * again once the first is closed (its XDP program went with it), also
 * many times in a row. A queue some other AF_XDP socket holds (standing
 * in for one the kernel has not yet let go of after its socket closed,
 * which it does in deferred work) is waited for: the open succeeds once
 * that socket closes, and fails with EBUSY and a sentence when it never
 * does.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <xdp/xsk.h>

#include "transport/transport.h"
#include "transport/xdp.h"

#define DP_PORT		47000
#define NPORTS		4

/* The one's-complement sum of len bytes, folded, complemented. */
static uint16_t
csum(const uint8_t *p, size_t len)
{
	uint32_t s = 0;

	for (size_t i = 0; i + 1 < len; i += 2)
		s += (uint32_t)p[i] << 8 | p[i + 1];
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return (uint16_t)~s;
}

static void
test_frame_textbook(void **state)
{
	/* The classic example header: 4500 0073 0000 4000 4011 b861
	 * c0a8 0001 c0a8 00c7 (115 bytes: 87 of UDP payload). */
	static const uint8_t want[20] = { 0x45, 0x00, 0x00, 0x73, 0x00, 0x00,
		0x40, 0x00, 0x40, 0x11, 0xb8, 0x61, 0xc0, 0xa8, 0x00, 0x01,
		0xc0, 0xa8, 0x00, 0xc7 };
	struct tally_xdp_hdr h = { .dst_mac = { 1, 2, 3, 4, 5, 6 },
		.src_mac = { 7, 8, 9, 10, 11, 12 },
		.src_ip = inet_addr("192.168.0.1"),
		.dst_ip = inet_addr("192.168.0.199"), .sport = htons(5000) };
	uint8_t f[200] = { 0 };
	uint32_t off, plen;

	(void)state;
	tally_xdp_frame_hdrs(f, &h, htons(47474), 0, 87);
	assert_memory_equal(f, h.dst_mac, 6);
	assert_memory_equal(f + 6, h.src_mac, 6);
	assert_int_equal(f[12], 0x08);
	assert_int_equal(f[13], 0x00);
	assert_memory_equal(f + 14, want, 20);
	assert_int_equal(f[34] << 8 | f[35], 5000);
	assert_int_equal(f[36] << 8 | f[37], 47474);
	assert_int_equal(f[38] << 8 | f[39], 95);
	/* And the check takes it: from 192.168.0.1 to port 47474. */
	assert_true(tally_xdp_frame_check(f, 14 + 115, h.src_ip,
		htons(47474), &off, &plen));
	assert_int_equal(off, 42);
	assert_int_equal(plen, 87);
}

static void
test_frame_refusals(void **state)
{
	struct tally_xdp_hdr h = { .src_ip = inet_addr("10.0.0.1"),
		.dst_ip = inet_addr("10.0.0.2"), .sport = htons(1) };
	uint32_t src = h.src_ip, off, plen;
	uint16_t port = htons(2);
	uint8_t f[256], g[256];

	(void)state;
	memset(f, 0xa5, sizeof(f));
	tally_xdp_frame_hdrs(f, &h, port, 7, 100);
	assert_true(tally_xdp_frame_check(f, 142, src, port, &off, &plen));
	assert_false(tally_xdp_frame_check(f, 141, src, port, &off, &plen));
	assert_false(tally_xdp_frame_check(f, 142, inet_addr("10.0.0.3"),
		port, &off, &plen));
	assert_false(tally_xdp_frame_check(f, 142, src, htons(3), &off,
		&plen));
	memcpy(g, f, sizeof(g));
	g[24] ^= 1;					/* checksum */
	assert_false(tally_xdp_frame_check(g, 142, src, port, &off, &plen));
	memcpy(g, f, sizeof(g));
	g[20] |= 0x20;					/* more fragments */
	g[24] = g[25] = 0;
	g[24] = (uint8_t)(csum(g + 14, 20) >> 8);
	g[25] = (uint8_t)csum(g + 14, 20);
	assert_false(tally_xdp_frame_check(g, 142, src, port, &off, &plen));
	memcpy(g, f, sizeof(g));
	g[38] = 0;					/* UDP length */
	g[39] = 120;
	assert_false(tally_xdp_frame_check(g, 142, src, port, &off, &plen));
	/* Four bytes of options (IHL 6): the payload starts 4 later. */
	memcpy(g, f, 34);
	memset(g + 34, 0, 4);
	memcpy(g + 38, f + 34, 108);
	g[14] = 0x46;
	g[17] += 4;
	g[24] = g[25] = 0;
	g[24] = (uint8_t)(csum(g + 14, 24) >> 8);
	g[25] = (uint8_t)csum(g + 14, 24);
	assert_true(tally_xdp_frame_check(g, 146, src, port, &off, &plen));
	assert_int_equal(off, 46);
	assert_int_equal(plen, 100);
}

/* The test's end of the veth: a packet socket on "xb", and its MAC. */
struct peer {
	int fd;
	int ifindex;
	uint8_t mac[6];
};

static int
sh(const char *cmd)
{
	return system(cmd) == 0 ? 0 : -1;
}

/* xa 10.9.0.1/24 (the worker's), xb (the dataplane's, 10.9.0.2 by a
 * static neighbour entry on xa); both up. 0 or -1. */
static int
veth_up(struct peer *p)
{
	struct sockaddr_ll ll = { .sll_family = AF_PACKET,
		.sll_protocol = htons(ETH_P_ALL) };
	struct ifreq ifr = { 0 };
	char cmd[160];

	if (sh("ip link add xa type veth peer name xb && "
			"ip addr add 10.9.0.1/24 dev xa && "
			"ip link set xa up && ip link set xb up && "
			"ip link set lo up") != 0)
		return -1;
	p->fd = socket(AF_PACKET, SOCK_RAW, htons(ETH_P_ALL));
	strcpy(ifr.ifr_name, "xb");
	if (p->fd < 0 || ioctl(p->fd, SIOCGIFHWADDR, &ifr) != 0)
		return -1;
	memcpy(p->mac, ifr.ifr_hwaddr.sa_data, 6);
	p->ifindex = (int)if_nametoindex("xb");
	ll.sll_ifindex = p->ifindex;
	if (bind(p->fd, (struct sockaddr *)&ll, sizeof(ll)) != 0)
		return -1;
	snprintf(cmd, sizeof(cmd), "ip neigh add 10.9.0.2 lladdr "
		"%02x:%02x:%02x:%02x:%02x:%02x dev xa", p->mac[0], p->mac[1],
		p->mac[2], p->mac[3], p->mac[4], p->mac[5]);
	return sh(cmd);
}

/* The next frame on xb that is IPv4 (ARP too when arp), or -1 in 1 s. */
static int
peer_recv(struct peer *p, uint8_t *f, size_t room, int arp)
{
	struct pollfd pfd = { .fd = p->fd, .events = POLLIN };

	while (poll(&pfd, 1, 1000) == 1) {
		struct sockaddr_ll from;
		socklen_t fl = sizeof(from);
		ssize_t n = recvfrom(p->fd, f, room, 0,
			(struct sockaddr *)&from, &fl);

		if (n < 14 || from.sll_pkttype == PACKET_OUTGOING)
			continue;
		if ((f[12] == 0x08 && f[13] == 0x00) ||
				(arp && f[12] == 0x08 && f[13] == 0x06))
			return (int)n;
	}
	return -1;
}

static int
peer_send(struct peer *p, const uint8_t *f, size_t len)
{
	struct sockaddr_ll to = { .sll_family = AF_PACKET,
		.sll_ifindex = p->ifindex, .sll_halen = 6 };

	return sendto(p->fd, f, len, 0, (struct sockaddr *)&to,
		sizeof(to)) == (ssize_t)len ? 0 : -1;
}

static uint8_t
pat(unsigned int k, unsigned int j)
{
	return (uint8_t)(k * 31 + j * 7);
}

/* 8 packets of 900 bytes on slots 0..7: the frames xb sees. 0 or code. */
static int
check_sends(struct tally_transport *tp, struct peer *p,
	const uint8_t xa_mac[6])
{
	static uint8_t bufs[8][900], f[2048];
	struct tally_tx_pkt pkts[8];
	uint32_t lip;
	uint16_t lport;

	for (unsigned int k = 0; k < 8; k++) {
		for (unsigned int j = 0; j < 900; j++)
			bufs[k][j] = pat(k, j);
		pkts[k] = (struct tally_tx_pkt){ .slot = (uint16_t)k,
			.iov = { { bufs[k], 40 }, { bufs[k] + 40, 860 } } };
	}
	if (tally_transport_send(tp, pkts, 8) != 8 ||
			tally_transport_local(tp, &lip, &lport) != 0 ||
			lip != inet_addr("10.9.0.1") || lport == 0)
		return 10;
	for (unsigned int k = 0; k < 8; k++) {
		int n = peer_recv(p, f, sizeof(f), 0);

		if (n != 42 + 900)
			return 11;
		if (memcmp(f, p->mac, 6) != 0 || memcmp(f + 6, xa_mac, 6) != 0)
			return 12;
		if (csum(f + 14, 20) != 0 ||
				memcmp(f + 26, &lip, 4) != 0 ||
				memcmp(f + 34, &lport, 2) != 0)
			return 13;
		if ((unsigned int)(f[36] << 8 | f[37]) != DP_PORT + k % NPORTS)
			return 14;
		for (unsigned int j = 0; j < 900; j++)
			if (f[42 + j] != pat(k, j))
				return 15;
	}
	return 0;
}

/* A frame from src to the transport's port (or port), payload pat(k). */
static void
dp_frame(uint8_t *f, const struct peer *p, const uint8_t xa_mac[6],
	const char *src, uint16_t port, unsigned int k)
{
	struct tally_xdp_hdr h = { .src_ip = inet_addr(src),
		.dst_ip = inet_addr("10.9.0.1"), .sport = htons(DP_PORT) };

	memcpy(h.src_mac, p->mac, 6);
	memcpy(h.dst_mac, xa_mac, 6);
	tally_xdp_frame_hdrs(f, &h, port, 1, 500);
	for (unsigned int j = 0; j < 500; j++)
		f[42 + j] = pat(k, j);
}

/* Frames to the worker: the dataplane's handed up, the others not. */
static int
check_recvs(struct tally_transport *tp, struct peer *p,
	const uint8_t xa_mac[6])
{
	static uint8_t f[600], bufs[4][1024];
	struct tally_rx_pkt rx[4];
	uint32_t lip;
	uint16_t lport;
	int n;

	(void)tally_transport_local(tp, &lip, &lport);
	dp_frame(f, p, xa_mac, "10.9.0.7", lport, 9);	/* not the dp */
	if (peer_send(p, f, 542) != 0)
		return 20;
	dp_frame(f, p, xa_mac, "10.9.0.2", htons(9), 9);	/* other port */
	if (peer_send(p, f, 542) != 0)
		return 21;
	for (unsigned int k = 0; k < 2; k++) {
		dp_frame(f, p, xa_mac, "10.9.0.2", lport, k);
		if (peer_send(p, f, 542) != 0)
			return 22;
	}
	for (unsigned int i = 0; i < 4; i++)
		rx[i] = (struct tally_rx_pkt){ .buf = bufs[i], .room = 1024 };
	n = tally_transport_recv(tp, rx, 4, 500000);
	if (n == 1)
		n += tally_transport_recv(tp, rx + 1, 3, 500000);
	if (n != 2)
		return 23;
	for (unsigned int k = 0; k < 2; k++) {
		if (rx[k].len != 500)
			return 24;
		for (unsigned int j = 0; j < 500; j++)
			if (bufs[k][j] != pat(k, j))
				return 25;
	}
	return tally_transport_recv(tp, rx, 4, 100000) == 0 ? 0 : 26;
}

/* ARP for 10.9.0.1 from xb: the kernel answers (XDP passed it). */
static int
check_arp(struct peer *p)
{
	uint8_t f[64] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff }, r[2048];
	static const uint8_t hdr[8] = { 0, 1, 8, 0, 6, 4, 0, 1 };

	memcpy(f + 6, p->mac, 6);
	f[12] = 0x08;
	f[13] = 0x06;
	memcpy(f + 14, hdr, 8);
	memcpy(f + 22, p->mac, 6);
	memcpy(f + 28, &(uint32_t){ inet_addr("10.9.0.2") }, 4);
	memcpy(f + 38, &(uint32_t){ inet_addr("10.9.0.1") }, 4);
	if (peer_send(p, f, 60) != 0)
		return 30;
	for (int i = 0; i < 8; i++) {
		int n = peer_recv(p, r, sizeof(r), 1);

		if (n >= 42 && r[13] == 0x06 && r[21] == 2)	/* reply */
			return 0;
		if (n < 0)
			break;
	}
	return 31;
}

/* Reopens in a row: the kernel's deferred release shows within these. */
#define REOPENS		20

/* A bare AF_XDP socket on xa's queue 0 (copy mode, no program). */
struct holder {
	void *area;
	struct xsk_umem *umem;
	struct xsk_socket *xsk;
	struct xsk_ring_prod fill, tx;
	struct xsk_ring_cons comp, rx;
	unsigned int close_after_ms;	/* release_later()'s wait */
};

#define HOLD_FRAMES	64u

static int
hold_queue(struct holder *h)
{
	const struct xsk_socket_config sc = { .rx_size = 64, .tx_size = 64,
		.libxdp_flags = XSK_LIBXDP_FLAGS__INHIBIT_PROG_LOAD,
		.bind_flags = XDP_COPY };
	int rc;

	h->area = mmap(NULL, HOLD_FRAMES * 4096u, PROT_READ | PROT_WRITE,
		MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (h->area == MAP_FAILED)
		return -1;
	if (xsk_umem__create(&h->umem, h->area, HOLD_FRAMES * 4096u,
			&h->fill, &h->comp, NULL) != 0) {
		fprintf(stderr, "# holder UMEM: %s\n", strerror(errno));
		return -1;
	}
	/* The last context's queue may not be let go yet (see below). */
	for (int i = 0; i < 200; i++) {
		struct timespec ts = { .tv_sec = 0, .tv_nsec = 10000000L };

		rc = xsk_socket__create(&h->xsk, "xa", 0, h->umem, &h->rx,
			&h->tx, &sc);
		if (rc != -EBUSY)
			break;
		nanosleep(&ts, NULL);
	}
	if (rc != 0)
		fprintf(stderr, "# holder socket: %s\n", strerror(-rc));
	return rc;
}

static void
release_queue(struct holder *h)
{
	xsk_socket__delete(h->xsk);
	(void)xsk_umem__delete(h->umem);
	munmap(h->area, HOLD_FRAMES * 4096u);
}

static void *
release_later(void *arg)
{
	struct holder *h = arg;
	struct timespec ts = { .tv_sec = 0,
		.tv_nsec = (long)h->close_after_ms * 1000000L };

	nanosleep(&ts, NULL);
	release_queue(h);
	return NULL;
}

/*
 * A queue held by another socket: waited for while it is let go (here
 * 100 ms later, from a thread), refused with EBUSY and a sentence when
 * it stays held. 0 or the failed step's code.
 */
static int
check_held_queue(struct tally_xdp_conf *c)
{
	struct holder h = { .close_after_ms = 100 };
	struct tally_transport *tp;
	pthread_t t;
	int rc = 0;

	if (hold_queue(&h) != 0)
		return 50;
	if (pthread_create(&t, NULL, release_later, &h) != 0)
		return 51;
	tp = tally_xdp_transport_create(c);
	if (tp == NULL) {
		fprintf(stderr, "# held queue, let go: %s\n", c->why);
		rc = 52;
	}
	pthread_join(t, NULL);
	tally_transport_destroy(tp);
	if (rc != 0 || hold_queue(&h) != 0)
		return rc != 0 ? rc : 53;
	c->why[0] = '\0';
	tp = tally_xdp_transport_create(c);
	fprintf(stderr, "# held queue, kept: %s\n", c->why);
	if (tp != NULL || errno != EBUSY || strstr(c->why, "queue 0: ") ==
			NULL || strstr(c->why, "another AF_XDP socket") == NULL)
		rc = 54;
	tally_transport_destroy(tp);
	release_queue(&h);
	return rc;
}

static int
xdp_child(void)
{
	char why[256] = "", why2[256] = "";
	struct tally_xdp_conf c = { .udp = { .dp_ip = inet_addr("10.9.0.2"),
		.dp_port = DP_PORT, .dp_nports = NPORTS }, .max_frame = 1500 - 28,
		.why = why, .why_len = sizeof(why) };
	struct tally_transport *tp, *tp2;
	struct ifreq ifr = { 0 };
	struct peer p;
	int rc;

	if (unshare(CLONE_NEWNET) != 0)
		return 77;
	if (veth_up(&p) != 0)
		return 2;
	strcpy(ifr.ifr_name, "xa");
	if (ioctl(p.fd, SIOCGIFHWADDR, &ifr) != 0)
		return 3;
	tp = tally_xdp_transport_create(&c);
	if (tp == NULL) {
		fprintf(stderr, "# %s\n", why);
		return errno == EPERM ? 77 : 4;
	}
	rc = check_sends(tp, &p, (uint8_t *)ifr.ifr_hwaddr.sa_data);
	if (rc == 0)
		rc = check_recvs(tp, &p, (uint8_t *)ifr.ifr_hwaddr.sa_data);
	if (rc == 0)
		rc = check_arp(&p);
	/* A second context on xa: EBUSY, with the sentence. */
	c.why = why2;
	tp2 = tally_xdp_transport_create(&c);
	if (rc == 0 && (tp2 != NULL || errno != EBUSY ||
			strstr(why2, "already there") == NULL))
		rc = 40;
	fprintf(stderr, "# second context: %s\n", why2);
	tally_transport_destroy(tp2);
	tally_transport_destroy(tp);
	for (int k = 0; k < REOPENS && rc == 0; k++) {
		tp = tally_xdp_transport_create(&c);
		if (tp == NULL) {
			fprintf(stderr, "# reopen %d: %s\n", k, why2);
			rc = 41;
		}
		tally_transport_destroy(tp);
	}
	if (rc == 0)
		rc = check_held_queue(&c);
	return rc;
}

static void
test_veth(void **state)
{
	pid_t pid;
	int status;

	(void)state;
	if (geteuid() != 0)
		skip();
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(xdp_child());
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	if (WEXITSTATUS(status) == 77)
		skip();
	assert_int_equal(WEXITSTATUS(status), 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_frame_textbook),
		cmocka_unit_test(test_frame_refusals),
		cmocka_unit_test(test_veth),
	};

	return cmocka_run_group_tests_name("xdp", tests, NULL, NULL);
}

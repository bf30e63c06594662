/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The kernel UDP transport (gpu/transport/udp.c) on 127.0.0.1, against
 * plain sockets standing in for the dataplane's ports.
 *
 * Segmentation: a burst of equal packets to one port leaves as one
 * UDP_SEGMENT send (a dataplane socket that takes coalesced datagrams
 * sees it whole, with its segment size), a shorter last packet rides
 * along, a change of port or a longer packet starts a new send, and every
 * packet arrives byte for byte as it was handed over. With
 * TALLY_UDP_OFFLOAD=0 nothing is segmented. On a path that refuses
 * segmentation (a route whose MTU is below the packet, in a network
 * namespace of its own: EMSGSIZE) the burst still arrives, one datagram a
 * packet.
 *
 * Coalescing: a segmented datagram from the dataplane is handed up as its
 * packets, across calls when the caller asks for fewer, cut to the
 * caller's room, lent from the transport's staging area (no copy); a
 * datagram from anyone else is handed up with length 0
 * (several dataplane ports) or not at all (one port: the socket is
 * connected to it), and a closed dataplane port reads as no packet.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "transport/transport.h"

#define LOOP		htonl(INADDR_LOOPBACK)
#define ROOM		65536

/* Room for a whole test's datagrams (32 x 8000 bytes and more). */
static void
big_rcvbuf(int fd)
{
	int bytes = 4 << 20;

	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &bytes,
			sizeof(bytes)) != 0)
		(void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes,
			sizeof(bytes));
}

/* A socket on 127.0.0.1 (any port when port is 0), GRO on if asked. */
static int
sock_on(uint32_t ip, uint16_t port, int gro)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
		.sin_addr.s_addr = ip, .sin_port = htons(port) };
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), one = 1;

	assert_true(fd >= 0);
	big_rcvbuf(fd);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	if (gro)
		assert_int_equal(setsockopt(fd, SOL_UDP, UDP_GRO, &one,
			sizeof(one)), 0);
	return fd;
}

static uint16_t
port_of(int fd)
{
	struct sockaddr_in sa;
	socklen_t len = sizeof(sa);

	assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
	return ntohs(sa.sin_port);
}

/* Two ports in a row on 127.0.0.1, both bound: fds[0], fds[1]. */
static uint16_t
two_ports(int fds[2], int gro)
{
	int tries;

	for (tries = 0; tries < 100; tries++) {
		uint16_t p;
		struct sockaddr_in sa = { .sin_family = AF_INET,
			.sin_addr.s_addr = LOOP };

		fds[0] = sock_on(LOOP, 0, gro);
		p = port_of(fds[0]);
		fds[1] = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
		big_rcvbuf(fds[1]);
		sa.sin_port = htons((uint16_t)(p + 1));
		if (p < 65535 && bind(fds[1], (struct sockaddr *)&sa,
				sizeof(sa)) == 0) {
			int one = 1;

			if (gro)
				assert_int_equal(setsockopt(fds[1], SOL_UDP,
					UDP_GRO, &one, sizeof(one)), 0);
			return p;
		}
		close(fds[0]);
		close(fds[1]);
	}
	fail_msg("no two free ports in a row");
	return 0;
}

static struct tally_transport *
transport_to(uint16_t port, uint16_t nports)
{
	struct tally_udp_conf c = { .dp_ip = LOOP, .dp_port = port,
		.dp_nports = nports, .bind_ip = LOOP };
	struct tally_transport *tp = tally_udp_transport_create(&c);

	assert_non_null(tp);
	return tp;
}

/* Byte j of packet i: what the tests send. */
static uint8_t
pat(unsigned int i, unsigned int j)
{
	return (uint8_t)(i * 131u + j * 7u + 1u);
}

/*
 * Packet i of a burst: a 16-byte "header" and len - 16 bytes of payload,
 * from bufs (each at least len bytes), for slot slot.
 */
static void
make_pkt(struct tally_tx_pkt *p, uint8_t *buf, unsigned int i,
	unsigned int len, uint16_t slot)
{
	unsigned int j;

	for (j = 0; j < len; j++)
		buf[j] = pat(i, j);
	p->iov[0].iov_base = buf;
	p->iov[0].iov_len = len < 16 ? len : 16;
	p->iov[1].iov_base = buf + p->iov[0].iov_len;
	p->iov[1].iov_len = len - p->iov[0].iov_len;
	p->iov[2].iov_len = 0;
	p->slot = slot;
}

/* One datagram on fd (waiting up to a second): its length, GRO size. */
static int
recv_one(int fd, uint8_t *buf, size_t room, int *seg)
{
	union { char b[CMSG_SPACE(sizeof(int))]; struct cmsghdr a; } ctl;
	struct iovec iov = { .iov_base = buf, .iov_len = room };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1,
		.msg_control = ctl.b, .msg_controllen = sizeof(ctl.b) };
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	struct cmsghdr *c;
	ssize_t rc;

	*seg = 0;
	if (poll(&pfd, 1, 1000) != 1)
		return -1;
	rc = recvmsg(fd, &m, MSG_DONTWAIT);
	if (rc < 0)
		return -1;
	for (c = CMSG_FIRSTHDR(&m); c != NULL; c = CMSG_NXTHDR(&m, c))
		if (c->cmsg_level == SOL_UDP && c->cmsg_type == UDP_GRO)
			memcpy(seg, CMSG_DATA(c), sizeof(*seg));
	return (int)rc;
}

/*
 * Reads datagrams from fd until want packets of the given lengths came
 * (checking each byte against pat() of the packet numbers in ids);
 * returns how many datagrams carried them and the most segments one did.
 */
static unsigned int
expect(int fd, const unsigned int *ids, const unsigned int *lens,
	unsigned int want, unsigned int *most)
{
	static uint8_t buf[ROOM];
	unsigned int got = 0, dgrams = 0;

	*most = 0;
	while (got < want) {
		int seg, len = recv_one(fd, buf, sizeof(buf), &seg);
		unsigned int off = 0, n = 0;

		assert_true(len > 0);
		dgrams++;
		if (seg <= 0)
			seg = len;
		while (off < (unsigned int)len) {
			unsigned int l = (unsigned int)len - off <
				(unsigned int)seg ? (unsigned int)len - off :
				(unsigned int)seg, j;

			assert_true(got < want);
			assert_int_equal(l, lens[got]);
			for (j = 0; j < l; j++)
				if (buf[off + j] != pat(ids[got], j))
					fail_msg("packet %u byte %u differs",
						ids[got], j);
			off += l;
			got++;
			n++;
		}
		if (n > *most)
			*most = n;
	}
	return dgrams;
}

static void
assert_quiet(int fd)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };

	assert_int_equal(poll(&pfd, 1, 50), 0);
}

/*
 * 32 equal packets to one port: one segmented send, all intact; a
 * whole burst of them: as few sends as UDP_SEGMENT's 64 KB allow.
 */
static void
test_gso_burst(void **state)
{
	static uint8_t bufs[TALLY_TP_BURST][1500];
	struct tally_tx_pkt pkts[TALLY_TP_BURST];
	unsigned int ids[TALLY_TP_BURST], lens[TALLY_TP_BURST], i, most;
	int fd = sock_on(LOOP, 0, 1);
	struct tally_transport *tp = transport_to(port_of(fd), 1);

	(void)state;
	for (i = 0; i < TALLY_TP_BURST; i++) {
		make_pkt(&pkts[i], bufs[i], i, 1468, (uint16_t)i);
		ids[i] = i;
		lens[i] = 1468;
	}
	assert_int_equal(tally_transport_send(tp, pkts, 32), 32);
	assert_int_equal(expect(fd, ids, lens, 32, &most), 1);
	assert_int_equal(most, 32);
	assert_quiet(fd);
	assert_int_equal(tally_transport_send(tp, pkts, TALLY_TP_BURST),
		TALLY_TP_BURST);
	assert_int_equal(expect(fd, ids, lens, TALLY_TP_BURST, &most),
		(TALLY_TP_BURST + 43) / 44);	/* 44 x 1468 <= 65000 */
	assert_int_equal(most, TALLY_TP_BURST < 44 ? TALLY_TP_BURST : 44);
	assert_quiet(fd);
	tally_transport_destroy(tp);
	close(fd);
}

/*
 * Runs end where the port changes, where a packet is longer than the
 * run's first, after a shorter one, and at the byte limit.
 */
static void
test_gso_runs(void **state)
{
	static uint8_t bufs[TALLY_TP_BURST][1500];
	struct tally_tx_pkt pkts[TALLY_TP_BURST];
	/* port 0: 0-3 equal, 4 shorter (ends the run), 5-6 equal again,
	 * 7 longer (new run), 8-9; port 1: 10-13 equal, 14 header only */
	static const unsigned int len[15] = { 1000, 1000, 1000, 1000, 300,
		800, 800, 900, 900, 900, 600, 600, 600, 600, 16 };
	unsigned int ids0[10], lens0[10], ids1[5], lens1[5], i, most;
	int fds[2];
	uint16_t port = two_ports(fds, 1);
	struct tally_transport *tp = transport_to(port, 2);

	(void)state;
	for (i = 0; i < 15; i++) {
		/* Even slots go to port, odd ones to port + 1. */
		make_pkt(&pkts[i], bufs[i], i, len[i],
			(uint16_t)(i < 10 ? 2 * i : 2 * i + 1));
		if (i < 10) {
			ids0[i] = i;
			lens0[i] = len[i];
		} else {
			ids1[i - 10] = i;
			lens1[i - 10] = len[i];
		}
	}
	assert_int_equal(tally_transport_send(tp, pkts, 15), 15);
	/* {0-4} {5,6} {7,8,9} on the first port; {10-14} on the second
	 * (the header-only one is shorter: it ends that run). */
	assert_int_equal(expect(fds[0], ids0, lens0, 10, &most), 3);
	assert_int_equal(most, 5);
	assert_int_equal(expect(fds[1], ids1, lens1, 5, &most), 1);
	assert_int_equal(most, 5);
	assert_quiet(fds[0]);
	assert_quiet(fds[1]);

	/* A run stops short of UDP_GSO's byte limit: 32 x 8000 bytes. */
	{
		static uint8_t big[TALLY_TP_BURST][8000];
		unsigned int ids[TALLY_TP_BURST], lens[TALLY_TP_BURST], d;

		for (i = 0; i < TALLY_TP_BURST; i++) {
			make_pkt(&pkts[i], big[i], i, 8000, 0);
			ids[i] = i;
			lens[i] = 8000;
		}
		assert_int_equal(tally_transport_send(tp, pkts,
			TALLY_TP_BURST), TALLY_TP_BURST);
		d = expect(fds[0], ids, lens, TALLY_TP_BURST, &most);
		assert_true(most <= 8);	/* 8 x 8000 = 64000 bytes */
		assert_true(d >= 4);
	}
	tally_transport_destroy(tp);
	close(fds[0]);
	close(fds[1]);
}

/* TALLY_UDP_OFFLOAD=0: a datagram a packet, coalescing off too. */
static void
test_offload_off(void **state)
{
	static uint8_t bufs[TALLY_TP_BURST][1500];
	struct tally_tx_pkt pkts[TALLY_TP_BURST];
	unsigned int ids[TALLY_TP_BURST], lens[TALLY_TP_BURST], i, most;
	int fd = sock_on(LOOP, 0, 1);
	struct tally_transport *tp;

	(void)state;
	assert_int_equal(setenv("TALLY_UDP_OFFLOAD", "0", 1), 0);
	tp = transport_to(port_of(fd), 1);
	unsetenv("TALLY_UDP_OFFLOAD");
	for (i = 0; i < 8; i++) {
		make_pkt(&pkts[i], bufs[i], i, 1200, 0);
		ids[i] = i;
		lens[i] = 1200;
	}
	assert_int_equal(tally_transport_send(tp, pkts, 8), 8);
	assert_int_equal(expect(fd, ids, lens, 8, &most), 8);
	assert_int_equal(most, 1);
	tally_transport_destroy(tp);
	close(fd);
}

/* The transport's local port, to send to it. */
static struct sockaddr_in
addr_of(struct tally_transport *tp)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	uint32_t ip;
	uint16_t port;

	assert_int_equal(tally_transport_local(tp, &ip, &port), 0);
	sa.sin_addr.s_addr = ip;
	sa.sin_port = port;
	return sa;
}

/* Sends nseg segments of seg bytes (the last last bytes) as one send. */
static void
send_segmented(int fd, const struct sockaddr_in *to, unsigned int first,
	unsigned int nseg, unsigned int seg, unsigned int last)
{
	static uint8_t buf[ROOM];
	union { char b[CMSG_SPACE(sizeof(uint16_t))]; struct cmsghdr a; } ctl;
	struct iovec iov = { .iov_base = buf };
	struct msghdr m = { .msg_name = (void *)(uintptr_t)to,
		.msg_namelen = sizeof(*to), .msg_iov = &iov, .msg_iovlen = 1,
		.msg_control = ctl.b, .msg_controllen = sizeof(ctl.b) };
	struct cmsghdr *c;
	uint16_t s = (uint16_t)seg;
	unsigned int i, j, off = 0;

	for (i = 0; i < nseg; i++) {
		unsigned int l = i + 1 == nseg ? last : seg;

		for (j = 0; j < l; j++)
			buf[off + j] = pat(first + i, j);
		off += l;
	}
	iov.iov_len = off;
	memset(&ctl, 0, sizeof(ctl));
	c = CMSG_FIRSTHDR(&m);
	c->cmsg_level = SOL_UDP;
	c->cmsg_type = UDP_SEGMENT;
	c->cmsg_len = CMSG_LEN(sizeof(s));
	memcpy(CMSG_DATA(c), &s, sizeof(s));
	assert_int_equal(sendmsg(fd, &m, 0), (ssize_t)off);
}

/* Receives until want packets came; checks them against pat(first + k). */
static void
take_packets(struct tally_transport *tp, unsigned int per_call,
	unsigned int room, unsigned int first, const unsigned int *lens,
	unsigned int want)
{
	static uint8_t bufs[TALLY_TP_BURST][ROOM];
	struct tally_rx_pkt rx[TALLY_TP_BURST];
	unsigned int got = 0, i, j;

	while (got < want) {
		int rc;

		for (i = 0; i < per_call; i++) {
			rx[i].buf = bufs[i];
			rx[i].room = room;
			rx[i].len = 0;
		}
		rc = tally_transport_recv(tp, rx, per_call, 1000000);
		assert_true(rc > 0);
		assert_true((unsigned int)rc <= per_call);
		for (i = 0; i < (unsigned int)rc; i++, got++) {
			unsigned int l = lens[got] < room ? lens[got] : room;

			assert_true(got < want);
			assert_int_equal(rx[i].len, l);
			for (j = 0; j < l; j++)
				if (((const uint8_t *)rx[i].buf)[j] !=
						pat(first + got, j))
					fail_msg("packet %u byte %u differs",
						first + got, j);
		}
	}
}

/*
 * A coalesced datagram from the dataplane comes up as its packets, a
 * few at a time, cut to the room; one from elsewhere comes up empty.
 */
static void
test_gro_split(void **state)
{
	unsigned int lens[32], i;
	int fds[2], dp, other = sock_on(htonl(0x7f000002), 0, 0);
	/* Two ports: the socket is not connected, and hears anyone. */
	struct tally_transport *tp = transport_to(two_ports(fds, 0), 2);
	struct sockaddr_in to = addr_of(tp);
	struct tally_rx_pkt rx[4];
	uint8_t b[4][2000];
	int rc;

	(void)state;
	dp = fds[0];
	/* 11 segments of 100 bytes and a last one of 50, taken 4 by 4. */
	for (i = 0; i < 12; i++)
		lens[i] = i == 11 ? 50 : 100;
	send_segmented(dp, &to, 0, 12, 100, 50);
	take_packets(tp, 4, 2000, 0, lens, 12);

	/* 20 of 1400, cut to a room of 1000, taken 32 at a time. */
	for (i = 0; i < 20; i++)
		lens[i] = 1400;
	send_segmented(dp, &to, 100, 20, 1400, 1400);
	take_packets(tp, TALLY_TP_BURST, 1000, 100, lens, 20);

	/* A segmented datagram from another address: every piece empty. */
	send_segmented(other, &to, 0, 3, 200, 200);
	for (i = 0; i < 4; i++) {
		rx[i].buf = b[i];
		rx[i].room = sizeof(b[i]);
		rx[i].len = 7;
	}
	rc = tally_transport_recv(tp, rx, 4, 1000000);
	assert_true(rc >= 1);
	for (i = 0; i < (unsigned int)rc; i++)
		assert_int_equal(rx[i].len, 0);

	/* Nothing left: a call that may not wait returns 0. */
	while ((rc = tally_transport_recv(tp, rx, 4, 0)) > 0)
		for (i = 0; i < (unsigned int)rc; i++)
			assert_int_equal(rx[i].len, 0);
	assert_int_equal(rc, 0);
	tally_transport_destroy(tp);
	close(fds[0]);
	close(fds[1]);
	close(other);
}

/*
 * A coalesced datagram and a plain one queued together: every packet
 * comes up once, over as many calls as it takes, none lost, none twice.
 */
static void
test_gro_mixed(void **state)
{
	static uint8_t buf[300];
	int dp = sock_on(LOOP, 0, 0);
	struct tally_transport *tp = transport_to(port_of(dp), 1);
	struct sockaddr_in to = addr_of(tp);
	struct tally_rx_pkt rx[4];
	uint8_t b[4][2000];
	unsigned int seen[8] = { 0 }, got = 0, i, j;
	int rc;

	(void)state;
	send_segmented(dp, &to, 0, 5, 300, 300);	/* packets 0-4 */
	for (j = 0; j < 200; j++)
		buf[j] = pat(5, j);			/* packet 5 */
	assert_int_equal(sendto(dp, buf, 200, 0, (struct sockaddr *)&to,
		sizeof(to)), 200);
	usleep(20000);		/* both queued before the first receive */
	while (got < 6) {
		for (i = 0; i < 4; i++) {
			rx[i].buf = b[i];
			rx[i].room = sizeof(b[i]);
		}
		rc = tally_transport_recv(tp, rx, 4, 1000000);
		assert_true(rc > 0);
		for (i = 0; i < (unsigned int)rc; i++, got++) {
			const uint8_t *p = rx[i].buf;
			unsigned int id = p[0] == pat(5, 0) &&
				rx[i].len == 200 ? 5 : 8;

			for (j = 0; id == 8 && j < 5; j++)
				if (p[0] == pat(j, 0) && p[1] == pat(j, 1))
					id = j;
			assert_true(id < 6);
			assert_int_equal(rx[i].len, id == 5 ? 200 : 300);
			for (j = 0; j < rx[i].len; j++)
				assert_int_equal(p[j], pat(id, j));
			seen[id]++;
		}
	}
	for (i = 0; i < 6; i++)
		assert_int_equal(seen[i], 1);
	assert_int_equal(tally_transport_recv(tp, rx, 4, 0), 0);
	tally_transport_destroy(tp);
	close(dp);
}

/*
 * Coalesced packets are lent, not copied: each comes up with buf in the
 * transport's staging area (none of the caller's buffers is written),
 * intact until the next receive. Without offload (TALLY_UDP_OFFLOAD=0)
 * packets land in the caller's buffers, as before.
 */
static void
test_gro_lent(void **state)
{
	unsigned int i, j, got = 0;
	int dp = sock_on(LOOP, 0, 0), rc;
	struct tally_transport *tp = transport_to(port_of(dp), 1);
	struct sockaddr_in to = addr_of(tp);
	struct tally_rx_pkt rx[4];
	static uint8_t b[4][2000], buf[300];

	(void)state;
	memset(b, 0xee, sizeof(b));
	send_segmented(dp, &to, 0, 6, 300, 300);
	while (got < 6) {
		for (i = 0; i < 4; i++) {
			rx[i].buf = b[i];
			rx[i].room = sizeof(b[i]);
		}
		rc = tally_transport_recv(tp, rx, 4, 1000000);
		assert_true(rc > 0);
		for (i = 0; i < (unsigned int)rc; i++, got++) {
			const uint8_t *p = rx[i].buf;

			assert_int_equal(rx[i].len, 300);
			assert_true(p < b[0] || p >= b[4]);
			for (j = 0; j < 300; j++)
				assert_int_equal(p[j], pat(got, j));
		}
	}
	for (i = 0; i < 4; i++)
		for (j = 0; j < sizeof(b[i]); j++)
			assert_int_equal(b[i][j], 0xee);
	tally_transport_destroy(tp);

	assert_int_equal(setenv("TALLY_UDP_OFFLOAD", "0", 1), 0);
	tp = transport_to(port_of(dp), 1);
	unsetenv("TALLY_UDP_OFFLOAD");
	to = addr_of(tp);
	for (j = 0; j < 200; j++)
		buf[j] = pat(9, j);
	assert_int_equal(sendto(dp, buf, 200, 0, (struct sockaddr *)&to,
		sizeof(to)), 200);
	rx[0].buf = b[0];
	rx[0].room = sizeof(b[0]);
	assert_int_equal(tally_transport_recv(tp, rx, 1, 1000000), 1);
	assert_ptr_equal(rx[0].buf, b[0]);
	assert_int_equal(rx[0].len, 200);
	assert_memory_equal(b[0], buf, 200);
	tally_transport_destroy(tp);
	close(dp);
}

/*
 * One dataplane port: the socket is connected to it. Coalesced results
 * from it still come up split; a datagram from another address or port
 * never comes up at all; a closed dataplane port (ICMP port unreachable,
 * ECONNREFUSED on a connected socket) reads as nothing, not an error.
 */
static void
test_connected(void **state)
{
	unsigned int lens[8], i;
	int dp = sock_on(LOOP, 0, 0), other = sock_on(LOOP, 0, 0), rc;
	struct tally_transport *tp = transport_to(port_of(dp), 1);
	struct sockaddr_in to = addr_of(tp);
	static uint8_t buf[1500];
	struct tally_tx_pkt pkt;
	struct tally_rx_pkt rx[4];
	uint8_t b[4][2000];

	(void)state;
	send_segmented(other, &to, 0, 3, 200, 200);
	for (i = 0; i < 8; i++)
		lens[i] = 300;
	send_segmented(dp, &to, 40, 8, 300, 300);
	take_packets(tp, 4, 2000, 40, lens, 8);
	for (i = 0; i < 4; i++) {
		rx[i].buf = b[i];
		rx[i].room = sizeof(b[i]);
	}
	assert_int_equal(tally_transport_recv(tp, rx, 4, 50000), 0);

	/* The dataplane's port closes: sends still "go", receives time out. */
	close(dp);
	make_pkt(&pkt, buf, 0, 100, 0);
	assert_int_equal(tally_transport_send(tp, &pkt, 1), 1);
	rc = tally_transport_recv(tp, rx, 4, 50000);
	assert_int_equal(rc, 0);
	rc = tally_transport_send(tp, &pkt, 1);
	assert_true(rc == 0 || rc == 1);
	assert_int_equal(tally_transport_recv(tp, rx, 4, 50000), 0);
	tally_transport_destroy(tp);
	close(other);
}

/*
 * A path that refuses segmentation: in a network namespace of its own
 * whose loopback has an MTU of 1000, a run of 1200-byte packets cannot be
 * segmented (EMSGSIZE); the burst still arrives, one datagram a packet
 * (fragmented and reassembled), and so does the next one. Runs in a
 * child, which exits 0 (passed), 77 (no namespaces here) or 1.
 */
static int
refused_child(void)
{
	static uint8_t bufs[8][1500], got[ROOM];
	struct tally_tx_pkt pkts[8];
	struct sockaddr_in sa = { .sin_family = AF_INET,
		.sin_addr.s_addr = LOOP };
	socklen_t salen = sizeof(sa);
	struct tally_udp_conf c = { .dp_ip = LOOP, .dp_nports = 1,
		.bind_ip = LOOP };
	struct ifreq ifr = { 0 };
	struct tally_transport *tp;
	unsigned int i, j, round;
	int ctl, fd, one = 1;

	if (unshare(CLONE_NEWNET) != 0)
		return 77;
	ctl = socket(AF_INET, SOCK_DGRAM, 0);
	strcpy(ifr.ifr_name, "lo");
	ifr.ifr_mtu = 1000;
	if (ctl < 0 || ioctl(ctl, SIOCSIFMTU, &ifr) != 0 ||
			ioctl(ctl, SIOCGIFFLAGS, &ifr) != 0)
		return 1;
	ifr.ifr_flags |= IFF_UP;
	if (ioctl(ctl, SIOCSIFFLAGS, &ifr) != 0)
		return 1;
	close(ctl);
	fd = socket(AF_INET, SOCK_DGRAM, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
			getsockname(fd, (struct sockaddr *)&sa, &salen) != 0 ||
			setsockopt(fd, SOL_UDP, UDP_GRO, &one,
				sizeof(one)) != 0)
		return 1;
	c.dp_port = ntohs(sa.sin_port);
	tp = tally_udp_transport_create(&c);
	if (tp == NULL)
		return 1;
	for (round = 0; round < 2; round++) {
		for (i = 0; i < 8; i++)
			make_pkt(&pkts[i], bufs[i], 10 * round + i, 1200, 0);
		if (tally_transport_send(tp, pkts, 8) != 8)
			return 2;
		/* 8 datagrams of 1200 bytes, none coalesced, intact. */
		for (i = 0; i < 8; i++) {
			int seg, len = recv_one(fd, got, sizeof(got), &seg);

			if (len != 1200 || (seg != 0 && seg != len))
				return 3;
			for (j = 0; j < 1200; j++)
				if (got[j] != pat(10 * round + i, j))
					return 4;
		}
	}
	tally_transport_destroy(tp);
	close(fd);
	return 0;
}

static void
test_gso_refused(void **state)
{
	pid_t pid;
	int status;

	(void)state;
	if (geteuid() != 0)
		skip();
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(refused_child());
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
		cmocka_unit_test(test_gso_burst),
		cmocka_unit_test(test_gso_runs),
		cmocka_unit_test(test_offload_off),
		cmocka_unit_test(test_gro_split),
		cmocka_unit_test(test_gro_mixed),
		cmocka_unit_test(test_gro_lent),
		cmocka_unit_test(test_connected),
		cmocka_unit_test(test_gso_refused),
	};

	return cmocka_run_group_tests_name("udp", tests, NULL, NULL);
}

/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * AF_XDP transport: a worker's packets go around the kernel's UDP, IP and
 * queueing layers. One UMEM per context, split in two: receive frames
 * (all of them in the fill ring or the kernel's hands) and send frames (a
 * free stack, refilled from the completion ring). The frames are the same
 * Ethernet/IPv4/UDP datagrams kernel UDP would send (xdp_frame.c), from
 * the route's source address and a port that a bound UDP socket keeps
 * reserved, so the dataplane's member identity (source IP, port) is the
 * same as over udp.c. Its XDP program (xdp_prog.c) hands this socket
 * only the dataplane's datagrams to that port; ARP, ICMP and TCP stay
 * the kernel's.
 *
 * Zero-copy where the driver has it, else copy mode (veth: copy). The
 * rings use need_wakeup: a send kicks the kernel only when it asks, and
 * a receive with nothing there waits in poll(). SO_BUSY_POLL (with
 * SO_PREFER_BUSY_POLL) when asked for: it spins in the kernel, which pays
 * only with a core to spare per worker.
 */
#include <errno.h>
#include <linux/if_xdp.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <xdp/xsk.h>

#include "transport.h"
#include "xdp.h"

#ifndef SO_PREFER_BUSY_POLL
#define SO_PREFER_BUSY_POLL	69
#endif
#ifndef SO_BUSY_POLL_BUDGET
#define SO_BUSY_POLL_BUDGET	70
#endif

#define XDP_FRAME	4096u	/* a UMEM frame: one packet */
#define XDP_NFRAMES	4096u	/* half to receive, half to send */
#define XDP_NRX		(XDP_NFRAMES / 2)
#define XDP_NTX		(XDP_NFRAMES - XDP_NRX)
#define XDP_RING	2048u	/* every ring's entries */
#define XDP_ROOM	(XDP_FRAME - XDP_PACKET_HEADROOM)	/* a frame's
				 * bytes after the kernel's headroom */
#define XDP_KICKS	8	/* sendto()s a send may take to drain */

struct xdp_transport {
	struct tally_transport tp;	/* first: what callers hold */
	uint8_t *area;			/* the UMEM, XDP_NFRAMES frames */
	struct xsk_umem *umem;
	struct xsk_socket *xsk;
	struct xsk_ring_prod fill, tx;
	struct xsk_ring_cons comp, rx;
	int fd;				/* the XDP socket */
	int resv_fd;			/* UDP socket holding the port */
	struct tally_xdp_prog prog;
	struct tally_xdp_hdr hdr;	/* every frame's fixed fields */
	uint32_t dp_ip;			/* network order */
	uint16_t dp_port, nports;	/* host order */
	uint16_t lport;			/* network order */
	uint16_t ip_id;
	uint32_t max_payload;		/* UDP payload a frame takes */
	uint64_t free_tx[XDP_NTX];	/* send frames not in the kernel */
	unsigned int nfree;
};

static struct xdp_transport *
xdp_of(struct tally_transport *tp)
{
	return (struct xdp_transport *)tp;
}

/* Takes back the send frames the kernel is done with. */
static void
reclaim(struct xdp_transport *x)
{
	uint32_t idx = 0, n = xsk_ring_cons__peek(&x->comp, XDP_RING, &idx);

	for (uint32_t i = 0; i < n; i++)
		x->free_tx[x->nfree++] =
			*xsk_ring_cons__comp_addr(&x->comp, idx + i);
	xsk_ring_cons__release(&x->comp, n);
}

/*
 * Makes the kernel send what the tx ring holds, when it asks to be
 * woken. Copy mode sends a batch a call and says EAGAIN for the rest.
 * Returns 0, or -errno for an error that will not go away.
 */
static int
kick(struct xdp_transport *x)
{
	for (int i = 0; i < XDP_KICKS; i++) {
		if (!xsk_ring_prod__needs_wakeup(&x->tx))
			return 0;
		if (sendto(x->fd, NULL, 0, MSG_DONTWAIT, NULL, 0) >= 0)
			return 0;
		switch (errno) {
		case EAGAIN:
		case EINTR:
			continue;
		case EBUSY:
		case ENOBUFS:
		case ENETDOWN:
		case ENXIO:
			return 0;	/* lost, as on a wire */
		default:
			return -errno;
		}
	}
	return 0;
}

static uint32_t
pkt_len(const struct tally_tx_pkt *p)
{
	return (uint32_t)(p->iov[0].iov_len + p->iov[1].iov_len +
		p->iov[2].iov_len);
}

/* Writes pkts' frame into the send frame at addr: its length. */
static uint32_t
write_frame(struct xdp_transport *x, const struct tally_tx_pkt *p,
	uint64_t addr)
{
	uint8_t *f = xsk_umem__get_data(x->area, addr);
	uint32_t plen = pkt_len(p), off = TALLY_XDP_HDRS;
	uint16_t dport = htons((uint16_t)(x->dp_port + p->slot % x->nports));

	tally_xdp_frame_hdrs(f, &x->hdr, dport, x->ip_id++, plen);
	for (int k = 0; k < 3; k++) {
		if (p->iov[k].iov_len == 0)
			continue;
		memcpy(f + off, p->iov[k].iov_base, p->iov[k].iov_len);
		off += (uint32_t)p->iov[k].iov_len;
	}
	return off;
}

static int
xdp_send(struct tally_transport *tp, const struct tally_tx_pkt *pkts,
	unsigned int n)
{
	struct xdp_transport *x = xdp_of(tp);
	uint32_t idx = 0, got;
	int rc;

	if (n > TALLY_TP_BURST)
		return -EINVAL;
	for (unsigned int i = 0; i < n; i++)
		if (pkt_len(&pkts[i]) > x->max_payload)
			return -EMSGSIZE;
	reclaim(x);
	if (x->nfree < n) {
		if ((rc = kick(x)) != 0)
			return rc;
		reclaim(x);
	}
	got = xsk_ring_prod__reserve(&x->tx, n < x->nfree ? n : x->nfree,
		&idx);
	for (uint32_t i = 0; i < got; i++) {
		struct xdp_desc *d = xsk_ring_prod__tx_desc(&x->tx, idx + i);

		d->addr = x->free_tx[--x->nfree];
		d->len = write_frame(x, &pkts[i], d->addr);
	}
	xsk_ring_prod__submit(&x->tx, got);
	rc = kick(x);
	return rc != 0 ? rc : (int)got;
}

/* Hands received frame d up into p (len 0: not the dataplane's). */
static void
take_frame(struct xdp_transport *x, const struct xdp_desc *d,
	struct tally_rx_pkt *p)
{
	const uint8_t *f = xsk_umem__get_data(x->area, d->addr);
	uint32_t off, plen;

	p->len = 0;
	if (!tally_xdp_frame_check(f, d->len, x->dp_ip, x->lport, &off,
			&plen))
		return;
	p->len = plen < p->room ? plen : p->room;
	memcpy(p->buf, f + off, p->len);
}

/*
 * Takes up to n received frames into pkts and gives their frames back to
 * the fill ring (which has room: it and the receive frames are the same
 * size). Returns how many.
 */
static int
take(struct xdp_transport *x, struct tally_rx_pkt *pkts, unsigned int n)
{
	uint32_t idx = 0, fidx = 0, k = xsk_ring_cons__peek(&x->rx, n, &idx);

	if (k == 0) {
		if (xsk_ring_prod__needs_wakeup(&x->fill))
			(void)recvfrom(x->fd, NULL, 0, MSG_DONTWAIT, NULL,
				NULL);
		return 0;
	}
	while (xsk_ring_prod__reserve(&x->fill, k, &fidx) != k)
		;	/* cannot happen: see above */
	for (uint32_t i = 0; i < k; i++) {
		const struct xdp_desc *d = xsk_ring_cons__rx_desc(&x->rx,
			idx + i);

		take_frame(x, d, &pkts[i]);
		*xsk_ring_prod__fill_addr(&x->fill, fidx + i) =
			d->addr - d->addr % XDP_FRAME;
	}
	xsk_ring_prod__submit(&x->fill, k);
	xsk_ring_cons__release(&x->rx, k);
	return (int)k;
}

static int
xdp_recv(struct tally_transport *tp, struct tally_rx_pkt *pkts,
	unsigned int n, unsigned int timeout_us)
{
	struct xdp_transport *x = xdp_of(tp);
	struct pollfd pfd = { .fd = x->fd, .events = POLLIN };
	struct timespec ts = {
		.tv_sec = timeout_us / 1000000u,
		.tv_nsec = (long)(timeout_us % 1000000u) * 1000,
	};
	int rc;

	if (n > TALLY_TP_BURST)
		return -EINVAL;
	rc = take(x, pkts, n);
	if (rc > 0 || timeout_us == 0)
		return rc;
	rc = ppoll(&pfd, 1, &ts, NULL);
	if (rc < 0)
		return errno == EINTR ? 0 : -errno;
	return rc > 0 ? take(x, pkts, n) : 0;
}

static int
xdp_local(struct tally_transport *tp, uint32_t *ip, uint16_t *port)
{
	struct xdp_transport *x = xdp_of(tp);

	*ip = x->hdr.src_ip;
	*port = x->lport;
	return 0;
}

static void
xdp_destroy(struct tally_transport *tp)
{
	struct xdp_transport *x = xdp_of(tp);

	if (x->xsk != NULL)
		xsk_socket__delete(x->xsk);
	if (x->umem != NULL)
		(void)xsk_umem__delete(x->umem);
	tally_xdp_prog_detach(&x->prog);
	if (x->resv_fd >= 0)
		close(x->resv_fd);
	if (x->area != NULL)
		munmap(x->area, (size_t)XDP_NFRAMES * XDP_FRAME);
	free(x);
}

static const struct tally_transport_ops xdp_ops = {
	.send = xdp_send,
	.recv = xdp_recv,
	.local = xdp_local,
	.destroy = xdp_destroy,
};

/*
 * The UDP socket that keeps the worker's port: bound to the source
 * address (the wildcard for a multicast job, which it joins so that the
 * interface takes the group's frames), receiving nothing (the XDP program
 * takes the port's frames before the kernel could queue them).
 */
static int
reserve_port(struct xdp_transport *x, const struct tally_udp_conf *u)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
		.sin_port = htons(u->bind_port),
		.sin_addr.s_addr = u->group_ip != 0 ? INADDR_ANY :
			x->hdr.src_ip };
	socklen_t len = sizeof(sa);
	int small = 1;

	x->resv_fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (x->resv_fd < 0)
		return -errno;
	(void)setsockopt(x->resv_fd, SOL_SOCKET, SO_RCVBUF, &small,
		sizeof(small));
	if (bind(x->resv_fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
			getsockname(x->resv_fd, (struct sockaddr *)&sa,
				&len) != 0)
		return -errno;
	x->lport = sa.sin_port;
	if (u->group_ip != 0) {
		struct ip_mreq mr = { .imr_multiaddr.s_addr = u->group_ip,
			.imr_interface.s_addr = x->hdr.src_ip };

		if (setsockopt(x->resv_fd, IPPROTO_IP, IP_ADD_MEMBERSHIP, &mr,
				sizeof(mr)) != 0)
			return -errno;
	}
	return 0;
}

/*
 * The UMEM and the socket on (ifname, queue), one try: zero-copy first,
 * copy mode when the driver has no zero-copy. Our own program serves
 * the socket, so libxdp loads none. Returns 0 or -errno.
 */
static int
open_socket_once(struct xdp_transport *x, const char *ifname,
	unsigned int queue, int *zc)
{
	static const uint16_t binds[] = { XDP_ZEROCOPY, XDP_COPY };
	const struct xsk_umem_config uc = {
		.fill_size = XDP_RING, .comp_size = XDP_RING,
		.frame_size = XDP_FRAME,
		.frame_headroom = 0,
	};
	int rc = -EOPNOTSUPP;

	for (size_t i = 0; i < sizeof(binds) / sizeof(binds[0]); i++) {
		const struct xsk_socket_config sc = {
			.rx_size = XDP_RING, .tx_size = XDP_RING,
			.libxdp_flags = XSK_LIBXDP_FLAGS__INHIBIT_PROG_LOAD,
			.bind_flags = (uint16_t)(binds[i] |
				XDP_USE_NEED_WAKEUP),
		};

		rc = xsk_umem__create(&x->umem, x->area,
			(uint64_t)XDP_NFRAMES * XDP_FRAME, &x->fill, &x->comp,
			&uc);
		if (rc != 0) {
			x->umem = NULL;
			return rc;
		}
		rc = xsk_socket__create(&x->xsk, ifname, queue, x->umem,
			&x->rx, &x->tx, &sc);
		if (rc == 0) {
			*zc = binds[i] == XDP_ZEROCOPY;
			x->fd = xsk_socket__fd(x->xsk);
			return 0;
		}
		x->xsk = NULL;
		(void)xsk_umem__delete(x->umem);
		x->umem = NULL;
		if (rc == -EBUSY || rc == -EPERM || rc == -EINVAL)
			break;	/* no use trying copy mode */
	}
	return rc;
}

/*
 * How long a queue may stay busy after its last socket closed: the
 * kernel lets a closed socket's queue go in a deferred work item, so a
 * context opened right after one closed on the same queue (a job's
 * group made again, a rejoin) can find the queue still taken, for
 * milliseconds, longer on a loaded host (seen: 1 in about 350 reopens
 * in a row on an idle veth). Our program is attached by then, so no
 * other tally context holds the interface: the socket is tried again
 * for up to this many milliseconds, the waits doubling from 1 ms.
 */
#define XDP_BUSY_WAIT_MS	2000u

/* open_socket_once(), waiting out a queue the kernel still releases. */
static int
open_socket(struct xdp_transport *x, const char *ifname, unsigned int queue,
	int *zc)
{
	unsigned int waited = 0, ms = 1;
	int rc;

	while ((rc = open_socket_once(x, ifname, queue, zc)) == -EBUSY &&
			waited < XDP_BUSY_WAIT_MS) {
		struct timespec ts = { .tv_sec = 0,
			.tv_nsec = (long)ms * 1000000L };

		(void)nanosleep(&ts, NULL);
		waited += ms;
		ms = ms < 64 ? 2 * ms : ms;
	}
	return rc;
}

/* All receive frames into the fill ring; all send frames free. */
static void
frames_init(struct xdp_transport *x)
{
	uint32_t idx = 0;

	(void)xsk_ring_prod__reserve(&x->fill, XDP_NRX, &idx);
	for (uint32_t i = 0; i < XDP_NRX; i++)
		*xsk_ring_prod__fill_addr(&x->fill, idx + i) =
			(uint64_t)i * XDP_FRAME;
	xsk_ring_prod__submit(&x->fill, XDP_NRX);
	for (uint32_t i = 0; i < XDP_NTX; i++)
		x->free_tx[x->nfree++] = (uint64_t)(XDP_NRX + i) * XDP_FRAME;
}

/* SO_BUSY_POLL and its companions, when asked for; failures cost none. */
static void
busy_poll(struct xdp_transport *x, unsigned int us)
{
	int one = 1, v = (int)us, budget = TALLY_TP_BURST;

	if (us == 0)
		return;
	(void)setsockopt(x->fd, SOL_SOCKET, SO_PREFER_BUSY_POLL, &one,
		sizeof(one));
	(void)setsockopt(x->fd, SOL_SOCKET, SO_BUSY_POLL, &v, sizeof(v));
	(void)setsockopt(x->fd, SOL_SOCKET, SO_BUSY_POLL_BUDGET, &budget,
		sizeof(budget));
}

/* Writes the sentence of a failure into c->why; returns rc. */
static int
fail(const struct tally_xdp_conf *c, int rc, const char *fmt, ...)
{
	va_list ap;

	if (c->why == NULL || c->why_len == 0)
		return rc;
	va_start(ap, fmt);
	vsnprintf(c->why, c->why_len, fmt, ap);
	va_end(ap);
	return rc;
}

/* Checks conf's limits against the frames and the link; 0 or -errno. */
static int
check_sizes(const struct tally_xdp_conf *c, const struct tally_xdp_path *p)
{
	if (TALLY_XDP_HDRS + c->max_frame > XDP_ROOM)
		return fail(c, -EMSGSIZE, "xdp: packets of %u bytes "
			"do not fit an AF_XDP frame (at most %u bytes of UDP "
			"payload): use fewer elements a packet",
			c->max_frame, XDP_ROOM - TALLY_XDP_HDRS);
	if (28 + c->max_frame > p->mtu)
		return fail(c, -EMSGSIZE, "xdp: packets of %u bytes "
			"are over the MTU %u of %s: use fewer elements a "
			"packet", c->max_frame, p->mtu, p->ifname);
	return 0;
}

/* Everything after the path: the port, the program, the socket. */
static int
xdp_open(struct xdp_transport *x, const struct tally_xdp_conf *c,
	const struct tally_xdp_path *p)
{
	int rc, zc = 0;

	if ((rc = reserve_port(x, &c->udp)) != 0)
		return fail(c, rc, "xdp: UDP port %u: %s",
			c->udp.bind_port, strerror(-rc));
	x->area = mmap(NULL, (size_t)XDP_NFRAMES * XDP_FRAME,
		PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (x->area == MAP_FAILED) {
		x->area = NULL;
		return fail(c, -ENOMEM, "xdp: no memory for the "
			"UMEM");
	}
	rc = tally_xdp_prog_attach(&x->prog, p->ifindex, p->ifname, x->dp_ip,
		x->lport, c->why, c->why_len);
	if (rc != 0)
		return rc;
	rc = open_socket(x, p->ifname, c->queue, &zc);
	if (rc != 0)
		return fail(c, rc, "xdp: AF_XDP socket on %s "
			"queue %u: %s%s", p->ifname, c->queue, strerror(-rc),
			rc == -EPERM ? " (needs CAP_NET_RAW, or root)" :
			rc == -EINVAL ? " (is there such a queue?)" :
			rc == -EBUSY ? " (another AF_XDP socket holds the "
			"queue)" : "");
	rc = tally_xdp_prog_add(&x->prog, c->queue, x->fd);
	if (rc != 0)
		return fail(c, rc, "xdp: queue %u: %s",
			c->queue, strerror(-rc));
	frames_init(x);
	busy_poll(x, c->busy_poll_us);
	x->tp.name = zc ? "xdp (zero-copy)" : "xdp";
	return 0;
}

struct tally_transport *
tally_xdp_transport_create(const struct tally_xdp_conf *c)
{
	struct tally_xdp_path p;
	struct xdp_transport *x;
	int rc;

	if (c == NULL || c->udp.dp_nports == 0 ||
			c->udp.dp_port + c->udp.dp_nports - 1 > 65535) {
		errno = EINVAL;
		return NULL;
	}
	rc = tally_xdp_path_find(c->udp.dp_ip, c->udp.group_ip != 0 ? 0 :
		c->udp.bind_ip, c->ifname, &p, c->why, c->why_len);
	if (rc == 0)
		rc = check_sizes(c, &p);
	if (rc != 0) {
		errno = -rc;
		return NULL;
	}
	x = calloc(1, sizeof(*x));
	if (x == NULL)
		return NULL;
	*x = (struct xdp_transport){ .tp.ops = &xdp_ops, .tp.name = "xdp",
		.fd = -1, .resv_fd = -1, .dp_ip = c->udp.dp_ip,
		.dp_port = c->udp.dp_port, .nports = c->udp.dp_nports,
		.max_payload = c->max_frame,
		.prog = { .map_fd = -1, .prog_fd = -1, .link_fd = -1 } };
	memcpy(x->hdr.src_mac, p.src_mac, 6);
	memcpy(x->hdr.dst_mac, p.dst_mac, 6);
	x->hdr.src_ip = p.src_ip;
	x->hdr.dst_ip = c->udp.dp_ip;
	rc = xdp_open(x, c, &p);
	if (rc != 0) {
		xdp_destroy(&x->tp);
		errno = -rc;
		return NULL;
	}
	x->hdr.sport = x->lport;
	return &x->tp;
}

/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Kernel UDP transport: one socket, bound once, so that every packet of a
 * worker leaves from the same address and port (the dataplane checks it).
 * Bursts go out with sendmmsg(), each datagram to the dataplane port that
 * owns its slot, gathered from the header and the payload in place; they
 * come in with recvmmsg(), and poll() waits when nothing is there.
 */
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "transport.h"

#define UDP_SOCKBUF	(4 << 20)

struct udp_transport {
	struct tally_transport tp;	/* first: what callers hold */
	int fd;
	uint32_t dp_ip;			/* network order */
	uint16_t nports;
	struct sockaddr_in *dst;	/* [nports]: one per dataplane port */
};

static struct udp_transport *
udp_of(struct tally_transport *tp)
{
	return (struct udp_transport *)tp;
}

/*
 * Whether a failed send only lost that datagram: a full queue, a route
 * or neighbour not there yet, a firewall that dropped it (EPERM), an ICMP
 * error reported late. The retransmission timer deals with those.
 */
static int
soft_send_error(int err)
{
	switch (err) {
	case EAGAIN:
#if EWOULDBLOCK != EAGAIN
	case EWOULDBLOCK:
#endif
	case EINTR:
	case ENOBUFS:
	case ENOMEM:
	case EPERM:
	case ECONNREFUSED:
	case EHOSTUNREACH:
	case ENETUNREACH:
	case ENETDOWN:
	case EHOSTDOWN:
		return 1;
	default:
		return 0;
	}
}

static int
udp_send(struct tally_transport *tp, const struct tally_tx_pkt *pkts,
	unsigned int n)
{
	struct udp_transport *u = udp_of(tp);
	struct mmsghdr msgs[TALLY_TP_BURST];
	unsigned int i, done = 0, took = 0;

	if (n > TALLY_TP_BURST)
		return -EINVAL;
	memset(msgs, 0, sizeof(msgs[0]) * n);
	for (i = 0; i < n; i++) {
		struct msghdr *m = &msgs[i].msg_hdr;

		m->msg_name = &u->dst[pkts[i].slot % u->nports];
		m->msg_namelen = sizeof(struct sockaddr_in);
		/* sendmmsg() does not write the iovecs it is given. */
		m->msg_iov = (struct iovec *)(uintptr_t)pkts[i].iov;
		m->msg_iovlen = pkts[i].iov[1].iov_len > 0 ? 2 : 1;
	}
	while (done < n) {
		int rc = sendmmsg(u->fd, msgs + done, n - done, 0);

		if (rc > 0) {
			done += (unsigned int)rc;
			took += (unsigned int)rc;
			continue;
		}
		if (rc == 0 || !soft_send_error(errno))
			return rc == 0 ? -EIO : -errno;
		/* msgs[done] was lost; go on with the next one. */
		if (errno != EINTR)
			done++;
	}
	return (int)took;
}

/* Waits up to timeout_us for the socket to be readable: 1, 0, -errno. */
static int
udp_wait(int fd, unsigned int timeout_us)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	struct timespec ts = {
		.tv_sec = timeout_us / 1000000u,
		.tv_nsec = (long)(timeout_us % 1000000u) * 1000,
	};
	int rc = ppoll(&pfd, 1, &ts, NULL);

	if (rc < 0)
		return errno == EINTR ? 0 : -errno;
	return rc > 0;
}

static int
udp_recv(struct tally_transport *tp, struct tally_rx_pkt *pkts,
	unsigned int n, unsigned int timeout_us)
{
	struct udp_transport *u = udp_of(tp);
	struct mmsghdr msgs[TALLY_TP_BURST];
	struct sockaddr_in from[TALLY_TP_BURST];
	struct iovec iov[TALLY_TP_BURST];
	int rc, i;

	if (n > TALLY_TP_BURST)
		return -EINVAL;
	memset(msgs, 0, sizeof(msgs[0]) * n);
	for (i = 0; i < (int)n; i++) {
		iov[i].iov_base = pkts[i].buf;
		iov[i].iov_len = pkts[i].room;
		msgs[i].msg_hdr.msg_iov = &iov[i];
		msgs[i].msg_hdr.msg_iovlen = 1;
		msgs[i].msg_hdr.msg_name = &from[i];
		msgs[i].msg_hdr.msg_namelen = sizeof(from[i]);
	}
	rc = recvmmsg(u->fd, msgs, n, MSG_DONTWAIT, NULL);
	if (rc < 0 && (errno == EAGAIN || errno == EWOULDBLOCK ||
			errno == EINTR)) {
		if (timeout_us == 0)
			return 0;
		rc = udp_wait(u->fd, timeout_us);
		if (rc <= 0)
			return rc;
		rc = recvmmsg(u->fd, msgs, n, MSG_DONTWAIT, NULL);
		if (rc < 0 && (errno == EAGAIN || errno == EWOULDBLOCK ||
				errno == EINTR))
			return 0;
	}
	if (rc < 0)
		return -errno;
	for (i = 0; i < rc; i++) {
		int ours = msgs[i].msg_hdr.msg_namelen >= sizeof(from[i]) &&
			from[i].sin_family == AF_INET &&
			from[i].sin_addr.s_addr == u->dp_ip;

		pkts[i].len = ours ? msgs[i].msg_len : 0;
	}
	return rc;
}

static void
udp_destroy(struct tally_transport *tp)
{
	struct udp_transport *u = udp_of(tp);

	close(u->fd);
	free(u->dst);
	free(u);
}

static int
udp_local(struct tally_transport *tp, uint32_t *ip, uint16_t *port)
{
	struct sockaddr_in sa;
	socklen_t len = sizeof(sa);

	if (getsockname(udp_of(tp)->fd, (struct sockaddr *)&sa, &len) != 0)
		return -errno;
	*ip = sa.sin_addr.s_addr;
	*port = sa.sin_port;
	return 0;
}

static const struct tally_transport_ops udp_ops = {
	.send = udp_send,
	.recv = udp_recv,
	.local = udp_local,
	.destroy = udp_destroy,
};

/*
 * Asks for big socket buffers, so that bursts of a whole window survive:
 * the forcing option (root) first, then the plain one, which the kernel
 * caps at net.core.[rw]mem_max. Failing both only costs retransmissions.
 */
static void
udp_bufs(int fd, int bytes)
{
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &bytes,
			sizeof(bytes)) != 0)
		(void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes,
			sizeof(bytes));
	if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &bytes,
			sizeof(bytes)) != 0)
		(void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes,
			sizeof(bytes));
}

struct tally_transport *
tally_udp_transport_create(const struct tally_udp_conf *conf)
{
	struct sockaddr_in local = { .sin_family = AF_INET };
	struct udp_transport *u;
	unsigned int i;
	int err;

	if (conf == NULL || conf->dp_nports == 0 ||
			conf->dp_port + conf->dp_nports - 1 > 65535) {
		errno = EINVAL;
		return NULL;
	}
	u = calloc(1, sizeof(*u));
	if (u == NULL)
		return NULL;
	u->dst = calloc(conf->dp_nports, sizeof(*u->dst));
	if (u->dst == NULL)
		goto err_free;
	u->tp.ops = &udp_ops;
	u->tp.name = "udp";
	u->dp_ip = conf->dp_ip;
	u->nports = conf->dp_nports;
	for (i = 0; i < conf->dp_nports; i++) {
		u->dst[i].sin_family = AF_INET;
		u->dst[i].sin_addr.s_addr = conf->dp_ip;
		u->dst[i].sin_port = htons((uint16_t)(conf->dp_port + i));
	}
	u->fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (u->fd < 0)
		goto err_free;
	udp_bufs(u->fd, conf->sockbuf > 0 ? conf->sockbuf : UDP_SOCKBUF);
	/* A socket bound to a unicast address hears no group traffic. */
	local.sin_addr.s_addr = conf->group_ip != 0 ? INADDR_ANY :
		conf->bind_ip;
	local.sin_port = htons(conf->bind_port);
	if (bind(u->fd, (struct sockaddr *)&local, sizeof(local)) != 0)
		goto err_close;
	if (conf->group_ip != 0) {
		struct ip_mreq mr = {
			.imr_multiaddr.s_addr = conf->group_ip,
			.imr_interface.s_addr = conf->bind_ip,
		};

		if (setsockopt(u->fd, IPPROTO_IP, IP_ADD_MEMBERSHIP, &mr,
				sizeof(mr)) != 0)
			goto err_close;
	}
	return &u->tp;
err_close:
	err = errno;
	close(u->fd);
	errno = err;
err_free:
	err = errno;
	free(u->dst);
	free(u);
	errno = err;
	return NULL;
}

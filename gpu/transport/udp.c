/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Kernel UDP transport: one socket, bound once, so that every packet of a
 * worker leaves from the same address and port (the dataplane checks it).
 * Bursts go out with sendmmsg(), each datagram to the dataplane port that
 * owns its slot, gathered from the header and the payload in place; they
 * come in with recvmmsg(), and poll() waits when nothing is there.
 *
 * Segmentation offload (on unless TALLY_UDP_OFFLOAD=0 in the environment):
 * consecutive packets of a burst to the same port and of the same length
 * (the last of them may be shorter) go as one UDP_SEGMENT send, which the
 * stack (or the NIC) cuts into the same datagrams on the wire: one pass
 * through the socket, IP and queueing layers for up to a burst of packets.
 * A kernel or route that refuses it (no checksum offload on the way out:
 * EIO) turns it off for the socket; the refused packets go again one by
 * one (EMSGSIZE, segments above the route's MTU, does the same). The
 * socket also asks for UDP_GRO: datagrams that the receive path
 * coalesced arrive as one buffer with their segment size, and are cut back
 * into packets here, in a staging area the transport owns and lends to
 * the caller (no copy).
 *
 * With one dataplane port and unicast results the socket is connected to
 * that port: no route lookup per send or per received datagram, and the
 * kernel drops what comes from anywhere else.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "transport.h"

#define UDP_SOCKBUF	(4 << 20)

#ifndef UDP_SEGMENT
#define UDP_SEGMENT	103
#endif
#ifndef UDP_GRO
#define UDP_GRO		104
#endif

/* Most bytes of one segmented send: an IPv4 datagram's payload, less. */
#define UDP_GSO_MAX_BYTES	65000u
/* Staging room for one received datagram, coalesced ones included. */
#define UDP_STAGE_ROOM		65536u

/* Received datagrams not yet handed up (GRO on). */
struct udp_stage {
	uint8_t *buf;			/* TALLY_TP_BURST x UDP_STAGE_ROOM */
	struct {
		uint32_t len;		/* bytes received */
		uint32_t seg;		/* segment size; len when not coalesced */
		uint8_t ours;		/* from the dataplane */
	} m[TALLY_TP_BURST];
	unsigned int n;			/* datagrams staged */
	unsigned int cur;		/* the one being handed up */
	uint32_t pos;			/* its next segment's offset */
};

struct udp_transport {
	struct tally_transport tp;	/* first: what callers hold */
	int fd;
	uint32_t dp_ip;			/* network order */
	struct tally_shard_map map;	/* slot to stream: dst's index */
	uint32_t shard_ip[TALLY_MAX_SHARDS]; /* a sharded job's, else 0 */
	uint8_t gso;			/* segmented sends: still worth trying */
	uint8_t gro;			/* the socket takes coalesced datagrams */
	uint8_t connected;		/* connect()ed to the one dataplane port */
	struct sockaddr_in *dst;	/* [map.total]: a dataplane port each */
	struct udp_stage st;		/* GRO only */
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

static uint32_t
pkt_len(const struct tally_tx_pkt *p)
{
	return (uint32_t)(p->iov[0].iov_len + p->iov[1].iov_len +
		p->iov[2].iov_len);
}

/*
 * How many packets from pkts[i] on can go as one segmented send: the same
 * port, the same length as pkts[i] (the last may be shorter, not empty),
 * at most UDP_GSO_MAX_BYTES together. 1 when segmentation is off.
 */
static unsigned int
gso_run(const struct udp_transport *u, const struct tally_tx_pkt *pkts,
	unsigned int i, unsigned int n)
{
	uint32_t seg = pkt_len(&pkts[i]), bytes = seg;
	unsigned int port = tally_shard_stream(&u->map, pkts[i].slot), j;

	if (!u->gso || seg == 0)
		return 1;
	for (j = i + 1; j < n; j++) {
		uint32_t len = pkt_len(&pkts[j]);

		if (tally_shard_stream(&u->map, pkts[j].slot) != port ||
				len == 0 ||
				len > seg || bytes + len > UDP_GSO_MAX_BYTES)
			break;
		bytes += len;
		if (len < seg) {
			j++;
			break;
		}
	}
	return j - i;
}

/*
 * A failure of a segmented send that says this path cannot segment: no
 * checksum offload on the way out (EIO), segments above the route's MTU
 * (EMSGSIZE: plain datagrams that size are fragmented instead), a kernel
 * without UDP_SEGMENT.
 */
static int
gso_refused(int err)
{
	return err == EIO || err == EMSGSIZE || err == EINVAL ||
		err == ENOPROTOOPT || err == EOPNOTSUPP;
}

union udp_cmsg {
	char buf[CMSG_SPACE(sizeof(uint16_t))];
	struct cmsghdr align;
};

static int
udp_send(struct tally_transport *tp, const struct tally_tx_pkt *pkts,
	unsigned int n)
{
	struct udp_transport *u = udp_of(tp);
	struct mmsghdr msgs[TALLY_TP_BURST];
	struct iovec iov[3 * TALLY_TP_BURST];
	union udp_cmsg ctl[TALLY_TP_BURST];
	uint8_t segs[TALLY_TP_BURST];	/* packets in each message */
	unsigned int i, k, nmsg = 0, niov = 0, done = 0, took = 0;

	if (n > TALLY_TP_BURST)
		return -EINVAL;
	memset(msgs, 0, sizeof(msgs[0]) * n);
	for (i = 0; i < n; i += segs[nmsg++]) {
		struct msghdr *m = &msgs[nmsg].msg_hdr;
		unsigned int run = gso_run(u, pkts, i, n);

		segs[nmsg] = (uint8_t)run;
		if (!u->connected) {
			m->msg_name = &u->dst[tally_shard_stream(&u->map,
				pkts[i].slot)];
			m->msg_namelen = sizeof(struct sockaddr_in);
		}
		m->msg_iov = &iov[niov];
		for (k = i; k < i + run; k++) {
			iov[niov++] = pkts[k].iov[0];
			if (pkts[k].iov[1].iov_len > 0)
				iov[niov++] = pkts[k].iov[1];
			if (pkts[k].iov[2].iov_len > 0)
				iov[niov++] = pkts[k].iov[2];
		}
		m->msg_iovlen = (size_t)(&iov[niov] - m->msg_iov);
		if (run > 1) {
			struct cmsghdr *c;
			uint16_t seg = (uint16_t)pkt_len(&pkts[i]);

			memset(&ctl[nmsg], 0, sizeof(ctl[nmsg]));
			m->msg_control = ctl[nmsg].buf;
			m->msg_controllen = sizeof(ctl[nmsg].buf);
			c = CMSG_FIRSTHDR(m);
			c->cmsg_level = SOL_UDP;
			c->cmsg_type = UDP_SEGMENT;
			c->cmsg_len = CMSG_LEN(sizeof(seg));
			memcpy(CMSG_DATA(c), &seg, sizeof(seg));
		}
	}
	while (done < nmsg) {
		int rc = sendmmsg(u->fd, msgs + done, nmsg - done, 0), err;

		if (rc > 0) {
			for (k = done; k < done + (unsigned int)rc; k++)
				took += segs[k];
			done += (unsigned int)rc;
			continue;
		}
		if (rc == 0)
			return -EIO;
		err = errno;
		if (segs[done] > 1 && gso_refused(err)) {
			/* No segmentation on this path: those packets go
			 * again one by one, and so does every later send. */
			unsigned int first = 0;

			u->gso = 0;
			for (k = 0; k < done; k++)
				first += segs[k];
			rc = udp_send(tp, pkts + first, n - first);
			return rc < 0 ? rc : (int)took + rc;
		}
		if (!soft_send_error(err))
			return -err;
		/* msgs[done] was lost; go on with the next one. */
		if (err != EINTR)
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

/* Whether a received message came from the dataplane (or a shard's). */
static int
from_dp(const struct udp_transport *u, const struct msghdr *m,
	const struct sockaddr_in *from)
{
	if (m->msg_namelen < sizeof(*from) || from->sin_family != AF_INET)
		return 0;
	if (from->sin_addr.s_addr == u->dp_ip)
		return 1;
	for (unsigned int h = 1; h < u->map.n; h++)
		if (from->sin_addr.s_addr == u->shard_ip[h])
			return 1;
	return 0;
}

/*
 * Whether a failed receive only means "nothing now": a connected socket
 * also reports an ICMP port unreachable (the dataplane's port not open
 * yet) as ECONNREFUSED, once; the timers deal with that as with a loss.
 */
static int
soft_recv_error(int err)
{
	return err == EAGAIN || err == EWOULDBLOCK || err == EINTR ||
		err == ECONNREFUSED;
}

/*
 * recvmmsg() of up to n messages, waiting up to timeout_us for the first
 * when none is there. Returns how many, 0 when the time passed, or -errno.
 */
static int
recv_msgs(struct udp_transport *u, struct mmsghdr *msgs, unsigned int n,
	unsigned int timeout_us)
{
	int rc = recvmmsg(u->fd, msgs, n, MSG_DONTWAIT, NULL);

	if (rc < 0 && soft_recv_error(errno)) {
		if (timeout_us == 0)
			return 0;
		rc = udp_wait(u->fd, timeout_us);
		if (rc <= 0)
			return rc;
		rc = recvmmsg(u->fd, msgs, n, MSG_DONTWAIT, NULL);
		if (rc < 0 && soft_recv_error(errno))
			return 0;
	}
	return rc < 0 ? -errno : rc;
}

/* Without GRO: straight into the caller's buffers. */
static int
recv_plain(struct udp_transport *u, struct tally_rx_pkt *pkts,
	unsigned int n, unsigned int timeout_us)
{
	struct mmsghdr msgs[TALLY_TP_BURST];
	struct sockaddr_in from[TALLY_TP_BURST];
	struct iovec iov[TALLY_TP_BURST];
	int rc, i;

	memset(msgs, 0, sizeof(msgs[0]) * n);
	for (i = 0; i < (int)n; i++) {
		iov[i].iov_base = pkts[i].buf;
		iov[i].iov_len = pkts[i].room;
		msgs[i].msg_hdr.msg_iov = &iov[i];
		msgs[i].msg_hdr.msg_iovlen = 1;
		msgs[i].msg_hdr.msg_name = &from[i];
		msgs[i].msg_hdr.msg_namelen = sizeof(from[i]);
	}
	rc = recv_msgs(u, msgs, n, timeout_us);
	for (i = 0; i < rc; i++)
		pkts[i].len = from_dp(u, &msgs[i].msg_hdr, &from[i]) ?
			msgs[i].msg_len : 0;
	return rc;
}

/* The segment size of a coalesced datagram, or 0. */
static uint32_t
gro_seg(struct msghdr *m)
{
	struct cmsghdr *c;

	for (c = CMSG_FIRSTHDR(m); c != NULL; c = CMSG_NXTHDR(m, c)) {
		if (c->cmsg_level == SOL_UDP && c->cmsg_type == UDP_GRO &&
				c->cmsg_len >= CMSG_LEN(sizeof(int))) {
			int seg;

			memcpy(&seg, CMSG_DATA(c), sizeof(seg));
			return seg > 0 ? (uint32_t)seg : 0;
		}
	}
	return 0;
}

/* Receives up to n datagrams into the staging area: as recv_msgs(). */
static int
stage_fill(struct udp_transport *u, unsigned int n, unsigned int timeout_us)
{
	struct udp_stage *st = &u->st;
	struct mmsghdr msgs[TALLY_TP_BURST];
	struct sockaddr_in from[TALLY_TP_BURST];
	struct iovec iov[TALLY_TP_BURST];
	union { char buf[CMSG_SPACE(sizeof(int))]; struct cmsghdr a; }
		ctl[TALLY_TP_BURST];
	int rc, i;

	memset(msgs, 0, sizeof(msgs[0]) * n);
	for (i = 0; i < (int)n; i++) {
		iov[i].iov_base = st->buf + (size_t)i * UDP_STAGE_ROOM;
		iov[i].iov_len = UDP_STAGE_ROOM;
		msgs[i].msg_hdr.msg_iov = &iov[i];
		msgs[i].msg_hdr.msg_iovlen = 1;
		msgs[i].msg_hdr.msg_name = &from[i];
		msgs[i].msg_hdr.msg_namelen = sizeof(from[i]);
		msgs[i].msg_hdr.msg_control = ctl[i].buf;
		msgs[i].msg_hdr.msg_controllen = sizeof(ctl[i].buf);
	}
	rc = recv_msgs(u, msgs, n, timeout_us);
	for (i = 0; i < rc; i++) {
		uint32_t len = msgs[i].msg_len, seg = gro_seg(&msgs[i].msg_hdr);

		st->m[i].len = len;
		st->m[i].seg = seg > 0 && seg < len ? seg : len;
		st->m[i].ours = (uint8_t)from_dp(u, &msgs[i].msg_hdr,
			&from[i]);
	}
	st->n = rc > 0 ? (unsigned int)rc : 0;
	st->cur = 0;
	st->pos = 0;
	return rc;
}

/*
 * Hands staged packets up, a segment each, in pkts[0..n): lent, each
 * pkts[k].buf pointed at its segment in the staging area (valid until
 * the next receive), cut to pkts[k].room.
 */
static unsigned int
stage_drain(struct udp_transport *u, struct tally_rx_pkt *pkts,
	unsigned int n)
{
	struct udp_stage *st = &u->st;
	unsigned int k = 0;

	while (k < n && st->cur < st->n) {
		uint32_t len = st->m[st->cur].len, seg = st->m[st->cur].seg;
		uint32_t take = len - st->pos < seg ? len - st->pos : seg;

		if (st->m[st->cur].ours) {
			pkts[k].buf = st->buf +
				(size_t)st->cur * UDP_STAGE_ROOM + st->pos;
			pkts[k].len = take < pkts[k].room ? take : pkts[k].room;
		} else {
			pkts[k].len = 0;
		}
		k++;
		st->pos += take;
		if (st->pos >= len || take == 0) {
			st->cur++;
			st->pos = 0;
		}
	}
	return k;
}

static int
udp_recv(struct tally_transport *tp, struct tally_rx_pkt *pkts,
	unsigned int n, unsigned int timeout_us)
{
	struct udp_transport *u = udp_of(tp);
	int rc;

	if (n > TALLY_TP_BURST)
		return -EINVAL;
	if (!u->gro)
		return recv_plain(u, pkts, n, timeout_us);
	if (u->st.cur >= u->st.n) {
		rc = stage_fill(u, n, timeout_us);
		if (rc <= 0)
			return rc;
	}
	return (int)stage_drain(u, pkts, n);
}

static void
udp_destroy(struct tally_transport *tp)
{
	struct udp_transport *u = udp_of(tp);

	close(u->fd);
	free(u->st.buf);
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

/*
 * Segmentation and coalescing, unless TALLY_UDP_OFFLOAD=0. Coalescing
 * needs the staging area; without memory for it the socket takes plain
 * datagrams only.
 */
static void
udp_offload(struct udp_transport *u)
{
	const char *env = getenv("TALLY_UDP_OFFLOAD");
	int one = 1;

	if (env != NULL && strcmp(env, "0") == 0)
		return;
	u->gso = 1;
	u->st.buf = malloc((size_t)TALLY_TP_BURST * UDP_STAGE_ROOM);
	if (u->st.buf == NULL)
		return;
	if (setsockopt(u->fd, SOL_UDP, UDP_GRO, &one, sizeof(one)) == 0) {
		u->gro = 1;
	} else {
		free(u->st.buf);
		u->st.buf = NULL;
	}
}

/*
 * conf's dataplanes as shards (one, dp_ip's, unless it is sharded), into
 * sh[]; returns how many, or 0 for a conf with a range past 65535.
 */
static unsigned int
conf_shards(const struct tally_udp_conf *conf, struct tally_udp_shard *sh)
{
	unsigned int n = conf->nshards;

	if (n == 0) {
		sh[0] = (struct tally_udp_shard){ conf->dp_ip, conf->dp_port,
			conf->dp_nports };
		n = 1;
	} else if (n < 2 || n > TALLY_MAX_SHARDS) {
		return 0;
	} else {
		memcpy(sh, conf->shards, n * sizeof(*sh));
	}
	for (unsigned int h = 0; h < n; h++)
		if (sh[h].nports == 0 ||
				sh[h].port + sh[h].nports - 1 > 65535)
			return 0;
	return n;
}

/* u's destinations: every port of every dataplane, in stream order. */
static int
make_dst(struct udp_transport *u, const struct tally_udp_shard *sh,
	unsigned int n)
{
	struct tally_shard_map *m = &u->map;
	unsigned int total = 0;

	m->n = (uint16_t)n;
	for (unsigned int h = 0; h < n; h++) {
		m->off[h] = (uint16_t)total;
		m->np[h] = sh[h].nports;
		u->shard_ip[h] = sh[h].ip;
		total += sh[h].nports;
	}
	if (total > UINT16_MAX) {
		errno = EINVAL;
		return -1;
	}
	m->total = (uint16_t)total;
	u->dp_ip = sh[0].ip;
	u->dst = calloc(total, sizeof(*u->dst));
	if (u->dst == NULL)
		return -1;
	for (unsigned int h = 0; h < n; h++)
		for (unsigned int i = 0; i < sh[h].nports; i++) {
			struct sockaddr_in *d = &u->dst[m->off[h] + i];

			d->sin_family = AF_INET;
			d->sin_addr.s_addr = sh[h].ip;
			d->sin_port = htons((uint16_t)(sh[h].port + i));
		}
	return 0;
}

struct tally_transport *
tally_udp_transport_create(const struct tally_udp_conf *conf)
{
	struct sockaddr_in local = { .sin_family = AF_INET };
	struct tally_udp_shard sh[TALLY_MAX_SHARDS];
	struct udp_transport *u;
	unsigned int n;
	int err;

	if (conf == NULL || (n = conf_shards(conf, sh)) == 0) {
		errno = EINVAL;
		return NULL;
	}
	u = calloc(1, sizeof(*u));
	if (u == NULL)
		return NULL;
	if (make_dst(u, sh, n) != 0)
		goto err_free;
	u->tp.ops = &udp_ops;
	u->tp.name = "udp";
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
	udp_offload(u);
	/*
	 * One dataplane port and unicast results: connect to it, so that
	 * sends skip the route lookup and arriving results are matched to
	 * the socket (and its cached route) without one either. A connect
	 * that fails (no route yet) leaves the socket as it was.
	 */
	if (u->map.total == 1 && conf->group_ip == 0) {
		u->connected = connect(u->fd, (struct sockaddr *)&u->dst[0],
			sizeof(u->dst[0])) == 0;
	}
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
	free(u->st.buf);
	free(u->dst);
	free(u);
	errno = err;
	return NULL;
}

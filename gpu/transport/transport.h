/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * How libtally moves tally packets: a transport sends bursts of packets,
 * each given as two pieces (the header and the payload, so that payloads
 * go out straight from the caller's buffer), and receives bursts into
 * buffers the caller owns. Kernel UDP (udp.c), AF_XDP (xdp.c: the same
 * datagrams, written by the worker itself) and an RDMA UD queue pair
 * (verbs.c, RoCEv2 UD SENDs: docs/rdma.md) implement them; a DPDK port
 * fits behind the same ops (the pieces become mbuf segments).
 *
 * A transport talks to one dataplane (UDP: or to the several of a
 * sharded job): it picks the destination of each packet from its slot
 * (the dataplane steers slots to lcores by UDP port, or by QPN for
 * RDMA), and hands up only packets from the dataplane(s).
 */
#ifndef TALLY_TRANSPORT_TRANSPORT_H
#define TALLY_TRANSPORT_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

/*
 * Most packets one send or recv handles: a window's worth (64 slots by
 * default), so that a worker woken by a window of results takes them in
 * one recvmmsg and answers with one sendmmsg, whose runs of equal packets
 * fill UDP_SEGMENT's 64 KB.
 */
#define TALLY_TP_BURST	64

/* One packet to send. */
struct tally_tx_pkt {
	struct iovec iov[3];	/* header (TALLY_HDR_LEN bytes), payload
				 * and tag (iov_len 0 for none) */
	uint16_t slot;		/* its slot: picks the dataplane's port */
};

/*
 * One buffer to receive a packet into. recv may instead point buf at
 * the packet where the transport already holds it (its own memory, lent
 * until the next recv or destroy), which saves a copy: callers read the
 * packet at buf after recv, and set buf again before each recv.
 */
struct tally_rx_pkt {
	void *buf;		/* the caller's, or the transport's after recv */
	uint32_t room;		/* its size; longer packets are cut */
	uint32_t len;		/* set by recv: bytes received; 0 for a packet
				 * the transport discarded (not from the
				 * dataplane): skip it */
};

struct tally_transport;

struct tally_transport_ops {
	/*
	 * Sends pkts[0..n), n <= TALLY_TP_BURST, in order. Borrows pkts and
	 * what they point to until it returns. Returns how many the network
	 * took (a packet refused on the way, as by a full queue or a
	 * firewall, is simply lost, as on the wire), or -errno on a failure
	 * that will not go away (a closed socket).
	 */
	int (*send)(struct tally_transport *tp, const struct tally_tx_pkt *pkts,
		unsigned int n);
	/*
	 * Receives up to n packets (n <= TALLY_TP_BURST) into pkts[i].buf,
	 * waiting up to timeout_us for the first (0: do not wait). Returns
	 * how many entries it filled (0 when the time passed), or -errno.
	 */
	int (*recv)(struct tally_transport *tp, struct tally_rx_pkt *pkts,
		unsigned int n, unsigned int timeout_us);
	/*
	 * The local address packets leave from (network order): what the
	 * dataplane must know as this member's. -errno when unknown.
	 */
	int (*local)(struct tally_transport *tp, uint32_t *ip,
		uint16_t *port);
	/* Closes and frees tp. */
	void (*destroy)(struct tally_transport *tp);
};

#define TALLY_TP_WHY_LEN	160

/* The head of every transport; implementations embed it first. */
struct tally_transport {
	const struct tally_transport_ops *ops;
	const char *name;	/* "udp", "rdma" */
	uint32_t qpn;		/* RDMA: the local queue pair's number, the
				 * member's identity at the dataplane with
				 * its IP; 0 for UDP */
	uint64_t errors;	/* failures that will not go away (RDMA: a
				 * completion with an error status) */
	char why[TALLY_TP_WHY_LEN]; /* the last of them in words; "" = none,
				 * strerror() of the errno says it */
};

/*
 * What a failed send or recv of tp (rc, a negative errno) means, in
 * words: the transport's own sentence when it left one, else strerror.
 */
const char *tally_transport_strerror(const struct tally_transport *tp,
	int rc);

/*
 * Writes the sentence fmt into why (len bytes) and returns rc: for a
 * transport's set-up steps, which fail with an errno and a sentence.
 */
int tally_tp_fail(char *why, size_t len, int rc, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static inline int
tally_transport_send(struct tally_transport *tp,
	const struct tally_tx_pkt *pkts, unsigned int n)
{
	return tp->ops->send(tp, pkts, n);
}

static inline int
tally_transport_recv(struct tally_transport *tp, struct tally_rx_pkt *pkts,
	unsigned int n, unsigned int timeout_us)
{
	return tp->ops->recv(tp, pkts, n, timeout_us);
}

static inline int
tally_transport_local(struct tally_transport *tp, uint32_t *ip,
	uint16_t *port)
{
	return tp->ops->local(tp, ip, port);
}

/* Closes tp; NULL is fine. */
static inline void
tally_transport_destroy(struct tally_transport *tp)
{
	if (tp != NULL)
		tp->ops->destroy(tp);
}

/*
 * Where each slot's packets go when a job spans several dataplanes (a
 * sharded job, docs/scale-out.md): slot s belongs to dataplane
 * s % n, and within it to port s % np[that one]. The streams (a
 * dataplane's port each) are numbered dataplane by dataplane: off[h] is
 * the first of dataplane h's. One dataplane (n 1) is the plain case:
 * slot s to port s % np[0].
 */
#define TALLY_MAX_SHARDS	8

struct tally_shard_map {
	uint16_t n;				/* dataplanes, 1..8 */
	uint16_t total;				/* streams: the sum of np */
	uint16_t off[TALLY_MAX_SHARDS];
	uint16_t np[TALLY_MAX_SHARDS];
};

/* The stream (0 .. total - 1) that slot goes to. */
static inline unsigned int
tally_shard_stream(const struct tally_shard_map *m, unsigned int slot)
{
	unsigned int h = slot % m->n;

	return m->off[h] + slot % m->np[h];
}

/* One dataplane of a sharded job, for the UDP transport. */
struct tally_udp_shard {
	uint32_t ip;		/* network order */
	uint16_t port;		/* first port of its range, host order */
	uint16_t nports;	/* ports in the range, >= 1 */
};

/* Kernel UDP: what tally_udp_transport_create() needs. */
struct tally_udp_conf {
	uint32_t dp_ip;		/* dataplane IPv4, network order */
	uint16_t dp_port;	/* first port of its range, host order */
	uint16_t dp_nports;	/* ports in the range, >= 1: slot s goes to
				 * dp_port + s % dp_nports */
	uint16_t nshards;	/* a sharded job: 2..TALLY_MAX_SHARDS
				 * dataplanes in shards[], slot s to the
				 * stream tally_shard_stream() names (dp_ip,
				 * dp_port and dp_nports unused); 0: one */
	struct tally_udp_shard shards[TALLY_MAX_SHARDS];
	uint32_t bind_ip;	/* local IPv4, network order; 0 = any */
	uint16_t bind_port;	/* local port, host order; 0 = ephemeral */
	uint32_t group_ip;	/* multicast group to join, network order;
				 * 0 = none. Binds the wildcard address */
	int sockbuf;		/* SO_SNDBUF and SO_RCVBUF bytes, 0 = 4 MiB */
};

/*
 * Opens a UDP socket bound to the local address of conf (borrowed) that
 * sends with sendmmsg() and receives with recvmmsg(), keeping only
 * datagrams from the dataplane's address. Returns the transport, or NULL
 * with errno set (EINVAL for a bad conf, or the socket's error).
 */
struct tally_transport *tally_udp_transport_create(
	const struct tally_udp_conf *conf);

/* An RDMA UD queue pair: what tally_verbs_transport_create() needs. */
struct tally_verbs_ops;
struct tally_verbs_conf {
	const char *device;	/* verbs device name (ibv_devices); NULL = the
				 * first whose GID table holds local_ip */
	uint8_t port;		/* its port, 0 = 1 */
	uint32_t local_ip;	/* IPv4 (network order) whose RoCEv2 GID
				 * packets leave from; 0 = the port's first
				 * IPv4 RoCEv2 GID */
	uint32_t dp_ip;		/* dataplane IPv4, network order */
	const uint32_t *dp_qpns; /* its QPNs: slot s goes to
				 * dp_qpns[s % dp_nqpns]; borrowed */
	uint16_t dp_nqpns;	/* 1 .. TALLY_VERBS_MAX_QPNS */
	uint32_t qkey;		/* the job's Q_Key (high bit clear) */
	uint32_t room;		/* the largest packet, both ways, in bytes
				 * (header, payload, tag) */
	uint32_t wire_max;	/* the job's largest message as tally-dp
				 * computes it (<tally/limits.h>), which
				 * the path MTU must hold; 0 = room */
	const struct tally_verbs_ops *ops; /* verbs.h; NULL = the default
				 * (libibverbs) */
};

#define TALLY_VERBS_MAX_QPNS	64

/*
 * Opens a UD queue pair on conf's device and port (conf borrowed), with
 * its receive buffers posted and one address handle toward the
 * dataplane, all registered memory in one region. Returns the transport,
 * or NULL with errno set and the reason in why (why_len bytes; may be
 * NULL): EINVAL for a bad conf, ENODEV for no device or no GID for the
 * address, ENETDOWN for a port not active, EMSGSIZE for packets above
 * the port's MTU, EPROTONOSUPPORT in a build without libibverbs, or
 * the failing verbs call's errno.
 */
struct tally_transport *tally_verbs_transport_create(
	const struct tally_verbs_conf *conf, char *why, size_t why_len);

/* AF_XDP: what tally_xdp_transport_create() needs. */
struct tally_xdp_conf {
	struct tally_udp_conf udp;	/* the dataplane and the local address,
					 * as for kernel UDP (sockbuf unused) */
	const char *ifname;	/* interface; NULL = the route's toward the
				 * dataplane (it must be that one) */
	unsigned int queue;	/* its receive queue to bind */
	unsigned int max_frame;	/* the longest UDP payload the context
				 * sends or takes: checked against the
				 * UMEM frames and the interface's MTU */
	unsigned int busy_poll_us; /* SO_BUSY_POLL for the socket, 0 = off */
	char *why;		/* out: the sentence of a failure */
	size_t why_len;
};

/*
 * Opens an AF_XDP socket on the interface toward the dataplane (see
 * xdp.c): one UMEM, its XDP program, frames written with the same
 * Ethernet/IPv4/UDP framing as kernel UDP, from a port that a bound UDP
 * socket keeps for it. Returns the transport, or NULL with errno set and
 * conf->why filled (EOPNOTSUPP when libtally was built without libxdp).
 */
struct tally_transport *tally_xdp_transport_create(
	const struct tally_xdp_conf *conf);

#endif /* TALLY_TRANSPORT_TRANSPORT_H */

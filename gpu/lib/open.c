/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tally_open(): a worker joins a job through tallyd (docs/control.md,
 * "Rendezvous protocol") and gets a context, instead of being told the
 * dataplane, job id and wire token by hand as tally_ctx_open() wants.
 *
 * It connects to tallyd over TCP, in TLS (chan.c) unless told otherwise,
 * sends "join", learns the dataplane's address and the job's limits from
 * "params", opens the context's UDP socket toward the dataplane (or, for
 * an RDMA job, its queue pair toward the dataplane's QPNs), reports its
 * source address (and QPN) in "member", and waits at the join
 * barrier for "ready" with the wire token. Every step has a deadline;
 * tallyd's refusals come back as distinct errnos with tallyd's sentence
 * in tally_ctx_error(NULL).
 */
#include <errno.h>
#include <net/if.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>

#include <tally/codec.h>
#include <tally/limits.h>

#include "chan.h"
#include "ctx.h"
#include "rdv/msg.h"
#include "ring.h"

#define DEFAULT_JOIN_MS	120000
#define URL_PREFIX	"tally://"
#define URL_MAX		1024

#define now_ms tally_chan_now_ms

/* Where and how to reach tallyd: the URL's parts. */
struct url {
	char host[256];
	char port[8];
	char job[TALLY_RDV_NAME_MAX + 1];
	char ca[URL_MAX];	/* ?ca=FILE; "" = none given */
	int tls;		/* ?tls=off: 0; else 1 */
	char transport[8];	/* ?transport=udp|xdp|rdma|ring; "" = the
				 * job's */
	char rdma_dev[64];	/* ?rdma_device=NAME; "" = by address */
	char ifname[IF_NAMESIZE]; /* ?ifname=IF (xdp); "" = not given */
	int queue;		/* ?queue=N (xdp); -1 = not given */
};

/* "tally://HOST[:PORT]/JOB" (in buf) into its parts. */
static int
parse_hostjob(const char *url, char host[256], char port[8],
	char job[TALLY_RDV_NAME_MAX + 1])
{
	const char *h, *slash, *colon;
	size_t hl;

	if (strncmp(url, URL_PREFIX, strlen(URL_PREFIX)) != 0)
		return -EINVAL;
	h = url + strlen(URL_PREFIX);
	slash = strchr(h, '/');
	if (slash == NULL || !tally_rdv_name_ok(slash + 1))
		return -EINVAL;
	colon = memchr(h, ':', (size_t)(slash - h));
	hl = (size_t)((colon != NULL ? colon : slash) - h);
	if (hl == 0 || hl >= 256)
		return -EINVAL;
	memcpy(host, h, hl);
	host[hl] = '\0';
	if (colon != NULL) {
		size_t pl = (size_t)(slash - colon - 1);

		if (pl == 0 || pl > 5 || strspn(colon + 1, "0123456789") < pl)
			return -EINVAL;
		memcpy(port, colon + 1, pl);
		port[pl] = '\0';
		if (atoi(port) < 1 || atoi(port) > 65535)
			return -EINVAL;
	} else {
		strcpy(port, "7470");
	}
	strcpy(job, slash + 1);
	return 0;
}

/* ?queue=N: 0..65535 into *q. */
static int
parse_queue(const char *v, int *q)
{
	if (strlen(v) > 5 || strspn(v, "0123456789") != strlen(v) ||
			atoi(v) > 65535)
		return -EINVAL;
	*q = atoi(v);
	return 0;
}

/*
 * The query "KEY=VALUE[&KEY=VALUE]..." (keys ca, tls, transport,
 * rdma_device, ifname and queue) into u.
 */
static int
parse_query(char *q, struct url *u)
{
	char *save = NULL, *kv;
	int rc = 0;

	for (kv = strtok_r(q, "&", &save); kv != NULL && rc == 0;
			kv = strtok_r(NULL, "&", &save)) {
		char *eq = strchr(kv, '=');

		if (eq == NULL || eq[1] == '\0')
			return -EINVAL;
		*eq = '\0';
		if (strcmp(kv, "ca") == 0)
			strcpy(u->ca, eq + 1);
		else if (strcmp(kv, "tls") == 0 && strcmp(eq + 1, "on") == 0)
			u->tls = 1;
		else if (strcmp(kv, "tls") == 0 && strcmp(eq + 1, "off") == 0)
			u->tls = 0;
		else if (strcmp(kv, "transport") == 0 &&
				(strcmp(eq + 1, "udp") == 0 ||
				 strcmp(eq + 1, "xdp") == 0 ||
				 strcmp(eq + 1, "rdma") == 0 ||
				 strcmp(eq + 1, "ring") == 0))
			strcpy(u->transport, eq + 1);
		else if (strcmp(kv, "rdma_device") == 0 &&
				strlen(eq + 1) < sizeof(u->rdma_dev) &&
				tally_rdv_name_ok(eq + 1))
			strcpy(u->rdma_dev, eq + 1);
		else if (strcmp(kv, "ifname") == 0 &&
				strlen(eq + 1) < sizeof(u->ifname))
			strcpy(u->ifname, eq + 1);
		else if (strcmp(kv, "queue") == 0)
			rc = parse_queue(eq + 1, &u->queue);
		else
			return -EINVAL;
	}
	return rc;
}

/*
 * "tally://HOST[:PORT]/JOB[?ca=FILE][&tls=on|off][&transport=udp|xdp]
 * [&ifname=IF][&queue=N]" into its parts.
 */
static int
parse_url(const char *url, struct url *u)
{
	char buf[URL_MAX], *q;

	if (url == NULL || strlen(url) >= sizeof(buf))
		return -EINVAL;
	strcpy(buf, url);
	u->ca[0] = '\0';
	u->tls = 1;
	u->transport[0] = '\0';
	u->rdma_dev[0] = '\0';
	u->ifname[0] = '\0';
	u->queue = -1;
	if ((q = strchr(buf, '?')) != NULL) {
		*q++ = '\0';
		if (parse_query(q, u) != 0)
			return -EINVAL;
	}
	return parse_hostjob(buf, u->host, u->port, u->job);
}

/* Connects to host:port before deadline; returns the fd or -errno. */
static int
tcp_connect(const char *host, const char *port, int64_t deadline)
{
	struct addrinfo hints = { .ai_family = AF_INET,
		.ai_socktype = SOCK_STREAM }, *ai, *a;
	int fd = -1, err = ECONNREFUSED, one = 1;

	err = getaddrinfo(host, port, &hints, &ai);
	if (err != 0)
		return tally_ctx_open_fail(-EHOSTUNREACH, "tallyd %s:%s: %s",
			host, port, gai_strerror(err));
	err = ECONNREFUSED;
	for (a = ai; a != NULL; a = a->ai_next) {
		struct pollfd p;
		socklen_t len = sizeof(err);
		int64_t left = deadline - now_ms();

		fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK |
			SOCK_CLOEXEC, 0);
		if (fd < 0) {
			err = errno;
			continue;
		}
		if (connect(fd, a->ai_addr, a->ai_addrlen) != 0 &&
				errno != EINPROGRESS) {
			err = errno;
			close(fd);
			fd = -1;
			continue;
		}
		p = (struct pollfd){ .fd = fd, .events = POLLOUT };
		if (poll(&p, 1, left > 0 ? (int)left : 0) != 1 ||
				getsockopt(fd, SOL_SOCKET, SO_ERROR, &err,
					&len) != 0 || err != 0) {
			err = err != 0 ? err : ETIMEDOUT;
			close(fd);
			fd = -1;
			continue;
		}
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		break;
	}
	freeaddrinfo(ai);
	if (fd < 0)
		return tally_ctx_open_fail(-err, "cannot reach tallyd at "
			"%s:%s: %s", host, port, strerror(err));
	return fd;
}

static int
send_msg(struct tally_chan *ch, const struct tally_rdv_msg *m,
	int64_t deadline)
{
	uint8_t buf[4 + TALLY_RDV_MAX_MSG];
	int n = tally_rdv_format(m, buf, sizeof(buf));

	if (n < 0)
		return n;
	return tally_chan_send(ch, buf, (size_t)n, deadline);
}

/* Receives one message; tallyd's "error" becomes -its errno. */
static int
recv_msg(struct tally_chan *ch, struct tally_rdv_msg *m, int64_t deadline,
	const char *what)
{
	uint8_t pre[4], body[TALLY_RDV_MAX_MSG];
	char why[160];
	size_t len = 0;
	int rc;

	rc = tally_chan_recv(ch, pre, 4, deadline);
	if (rc == 0) {
		len = tally_rdv_frame_len(pre);
		rc = len == 0 ? -EPROTO : tally_chan_recv(ch, body, len,
			deadline);
	}
	if (rc == -ETIMEDOUT)
		return tally_ctx_open_fail(rc, "tallyd sent no %s in time",
			what);
	if (rc != 0)
		return tally_ctx_open_fail(rc, "rendezvous with tallyd: %s "
			"while waiting for %s", strerror(-rc), what);
	if (tally_rdv_parse(body, len, m, why, sizeof(why)) != 0)
		return tally_ctx_open_fail(-EPROTO, "tallyd sent a bad "
			"message: %s", why);
	if (m->op == TALLY_RDV_ERROR && m->fallback[0] != '\0')
		return tally_ctx_open_fail(-m->err, "tallyd: %s (fallback: %s)",
			m->error, m->fallback);
	if (m->op == TALLY_RDV_ERROR)
		return tally_ctx_open_fail(-m->err, "tallyd: %s", m->error);
	return 0;
}

/* The local address the kernel would send from toward ip:port. */
static int
route_source(uint32_t ip, uint16_t port, char out[INET_ADDRSTRLEN])
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
		.sin_addr.s_addr = htonl(ip), .sin_port = htons(port) };
	socklen_t len = sizeof(sa);
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), rc = 0;

	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
			getsockname(fd, (struct sockaddr *)&sa, &len) != 0)
		rc = -errno;
	close(fd);
	if (rc == 0)
		inet_ntop(AF_INET, &sa.sin_addr, out, INET_ADDRSTRLEN);
	return rc;
}

/*
 * Whether the job's largest packets (elems elements in the encodings of
 * codec spec, results narrow or widened, the tag of an authenticated
 * job) fit the path MTU toward the dataplane at ip:port (host order), as
 * the kernel knows it: tallyd
 * checked them against tally-dp's MTU only. Returns 0 (also when the MTU
 * cannot be read), or -EMSGSIZE with the sentence set.
 */
static int
check_path_mtu(uint32_t ip, uint16_t port, const char *spec, int narrow,
	int auth, unsigned int elems)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
		.sin_addr.s_addr = htonl(ip), .sin_port = htons(port) };
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), mtu = 0;
	socklen_t len = sizeof(mtu);
	unsigned int encs = TALLY_ENC_ALL;
	struct tally_codec c;
	size_t need;

	if (fd < 0)
		return 0;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
			getsockopt(fd, IPPROTO_IP, IP_MTU, &mtu, &len) != 0)
		mtu = 0;
	close(fd);
	if (spec == NULL)
		spec = "fixp";
	if (tally_codec_parse(spec, &c, NULL, 0) == 0)
		encs = tally_codec_encs(c.kind);
	if (auth)	/* every packet carries a tag */
		encs |= TALLY_ENC_AUTH;
	need = tally_job_ip_len(encs, narrow, elems);
	if (mtu <= 0 || need <= (size_t)mtu)
		return 0;
	return tally_ctx_open_fail(-EMSGSIZE, "the job's packets (%u elements, "
		"codec %s, %s results) are %zu bytes, over the path MTU of %d "
		"toward the dataplane: use at most %u elements a packet (the "
		"job's max_elems) or a larger MTU on this host", elems, spec,
		narrow ? "narrow" : "widened", need, mtu,
		tally_job_max_elems((unsigned int)mtu, encs, narrow));
}

/*
 * Connects to tallyd and sets up the channel: TLS unless the URL's
 * tls=off or TALLY_TLS=off asks for cleartext; tallyd's certificate
 * checked against opts' ca_file, else the URL's ca=, else TALLY_CA, else
 * the system's trust store.
 */
static int
open_chan(const struct url *u, const struct tally_ctx_opts *o,
	int64_t deadline, struct tally_chan **ch, uint32_t *lip)
{
	struct sockaddr_in sa;
	socklen_t slen = sizeof(sa);
	const char *env_tls = getenv("TALLY_TLS");
	const char *ca = o->ca_file;
	int fd, tls = u->tls;

	if (env_tls != NULL && env_tls[0] != '\0') {
		if (strcmp(env_tls, "off") != 0 && strcmp(env_tls, "on") != 0)
			return tally_ctx_open_fail(-EINVAL, "TALLY_TLS='%s': "
				"on or off", env_tls);
		if (strcmp(env_tls, "off") == 0)
			tls = 0;
	}
	if (ca == NULL && u->ca[0] != '\0')
		ca = u->ca;
	if (ca == NULL && getenv("TALLY_CA") != NULL &&
			getenv("TALLY_CA")[0] != '\0')
		ca = getenv("TALLY_CA");
	fd = tcp_connect(u->host, u->port, deadline);
	if (fd < 0)
		return fd;
	/* The ring listener's address: the one tallyd sees us at. */
	*lip = getsockname(fd, (struct sockaddr *)&sa, &slen) == 0 ?
		sa.sin_addr.s_addr : 0;
	return tally_chan_open(fd, u->host, tls, ca, deadline, ch);
}

/*
 * The transport of the job that params describes (RDMA when it carries
 * the dataplane's QPNs) into o, checked against what the worker asked
 * for (want: opts' or the URL's; NULL = whatever the job runs).
 */
static int
transport_from_params(const struct tally_rdv_msg *p, const char *want,
	struct tally_ctx_opts *o)
{
	const char *job = p->rdma ? "rdma" : "udp";

	/* AF_XDP carries a UDP job's datagrams: the worker's choice. */
	if (want != NULL && strcmp(want, "xdp") == 0 && !p->rdma)
		job = "xdp";
	if (want != NULL && strcmp(want, job) != 0)
		return tally_ctx_open_fail(-EPROTONOSUPPORT, "the job runs "
			"over %s, not %s (its transport is set by `tallyctl "
			"job create --transport`)", job, want);
	o->transport = job;
	o->dp_qpns = p->rdma ? p->qpns : NULL;
	o->dp_nqpns = p->rdma ? p->nqpns : 0;
	o->qkey = p->qkey;
	return 0;
}

/*
 * A sharded job's dataplanes (params' "shards") into o, their addresses
 * written to addrs and the list to sh (both the caller's, alive while o
 * is used).
 */
static void
shards_from_params(const struct tally_rdv_msg *p, struct tally_ctx_opts *o,
	char addrs[][INET_ADDRSTRLEN], struct tally_shard *sh)
{
	o->shards = NULL;
	o->nshards = 0;
	if (p->nshards == 0)
		return;
	for (unsigned int h = 0; h < p->nshards; h++) {
		struct in_addr a = { .s_addr = htonl(p->shards[h].ip) };

		inet_ntop(AF_INET, &a, addrs[h], INET_ADDRSTRLEN);
		sh[h] = (struct tally_shard){ addrs[h], p->shards[h].port,
			p->shards[h].nports };
	}
	o->shards = sh;
	o->nshards = p->nshards;
}

/*
 * A leaf of a two-tier job (params' "tier", docs/scale-out.md): the
 * context is the member's in its leaf (its rank and world there), and
 * the fixed-point scale is the total world's. The leaves carry UDP
 * datagrams of the kernel's sockets only.
 */
static int
tier_from_params(const struct tally_rdv_msg *p, struct tally_ctx_opts *o)
{
	if (strcmp(o->transport, "udp") != 0)
		return tally_ctx_open_fail(-EPROTONOSUPPORT, "the job is a "
			"two-tier tree, whose leaves take transport udp, not "
			"%s", o->transport);
	o->rank = (uint8_t)p->tier_rank;
	o->world = (uint8_t)p->tier_world;
	o->scale_world = p->scale_world;
	return 0;
}

/* Options of the context toward the dataplane that params names. */
static int
ctx_from_params(const struct tally_rdv_msg *p, struct tally_ctx_opts *o,
	unsigned int rank, unsigned int world, char dp_ip[INET_ADDRSTRLEN],
	char src[INET_ADDRSTRLEN], char group[INET_ADDRSTRLEN])
{
	struct in_addr a = { .s_addr = htonl(p->dp_ip) };
	int rc;

	inet_ntop(AF_INET, &a, dp_ip, INET_ADDRSTRLEN);
	rc = route_source(p->dp_ip, p->dp_port, src);
	if (rc != 0)
		return tally_ctx_open_fail(rc, "no route to the dataplane "
			"%s: %s", dp_ip, strerror(-rc));
	o->dp_addr = dp_ip;
	o->dp_port = p->dp_port;
	o->dp_nports = p->dp_nports;
	o->bind_addr = o->bind_addr != NULL ? o->bind_addr : src;
	o->group_addr = NULL;
	if (p->group_ip != 0) {
		a.s_addr = htonl(p->group_ip);
		inet_ntop(AF_INET, &a, group, INET_ADDRSTRLEN);
		o->group_addr = group;
		o->bind_port = p->group_port;
	}
	if ((rc = transport_from_params(p, o->transport, o)) != 0)
		return rc;
	o->job = p->job_id;
	o->narrow = p->narrow;
	o->codec = p->codec[0] != '\0' ? p->codec : NULL;
	o->token = 0;		/* the wire token comes with "ready" */
	o->auth = NULL;		/* so do an authenticated job's keys */
	if (p->tier_world == 0 && world > TALLY_MAX_WORKERS)
		return tally_ctx_open_fail(-EPROTO, "tallyd answered a join "
			"of world %u as a flat job (at most %u ranks), not a "
			"two-tier tree", world, TALLY_MAX_WORKERS);
	o->rank = (uint8_t)rank;
	o->world = (uint8_t)world;
	if (p->tier_world != 0 && (rc = tier_from_params(p, o)) != 0)
		return rc;
	if (o->window == 0 || o->window > p->window)
		o->window = p->window;
	if (o->elems == 0 || o->elems > p->max_elems)
		o->elems = p->max_elems;
	return 0;
}

/*
 * READY with "ring" (the membership runs on the ring fallback): ctx (a
 * dataplane's, or NULL) is closed and the ring's context opened on the
 * listener *g (taken) instead, into *out.
 */
static int
ring_switch(struct tally_ctx *ctx, const struct tally_rdv_msg *ready,
	const struct tally_ctx_opts *o, const struct tally_rdv_msg *join,
	struct tally_ring **g, int64_t deadline, struct tally_ctx **out)
{
	struct tally_ring *ring = *g;

	tally_ctx_close(ctx);
	*g = NULL;
	return tally_lib_ring_ctx(o, ready, join->job, join->token, ring,
		deadline, out);
}

/*
 * After params with "fallback": "ring" (no live dataplane): no socket
 * toward a dataplane; the member message names the ring listener g,
 * and READY the ring.
 */
static int
join_ring(struct tally_chan *ch, const struct tally_rdv_msg *p,
	struct tally_ctx_opts *o, const struct tally_rdv_msg *join,
	struct tally_ring **g, int64_t deadline, struct tally_ctx **out)
{
	struct tally_rdv_msg m = { .op = TALLY_RDV_MEMBER };
	uint32_t ip;
	uint16_t port;
	int rc;

	tally_ring_local(*g, &ip, &port);
	m.ip = ntohl(ip);
	m.port = ntohs(port);
	if ((rc = send_msg(ch, &m, deadline)) != 0)
		return tally_ctx_open_fail(rc, "rendezvous with tallyd: %s",
			strerror(-rc));
	if ((rc = recv_msg(ch, &m, deadline, "ready (the join barrier)")) != 0)
		return rc;
	if (m.op != TALLY_RDV_READY || m.nring == 0)
		return tally_ctx_open_fail(-EPROTO, "tallyd answered the "
			"member message out of order, or without the ring");
	o->job = p->job_id;
	o->narrow = p->narrow;
	o->codec = p->codec[0] != '\0' ? p->codec : NULL;
	o->rank = (uint8_t)join->rank;
	o->world = (uint8_t)join->world;
	o->window = p->window;
	o->elems = p->max_elems;
	return ring_switch(NULL, &m, o, join, g, deadline, out);
}

/* After params: the context, the member message, the barrier. */
static int
join_rest(struct tally_chan *ch, const struct tally_rdv_msg *p,
	struct tally_ctx_opts *o, const struct tally_rdv_msg *join,
	struct tally_ring **g, int64_t deadline, struct tally_ctx **out)
{
	unsigned int rank = join->rank, world = join->world;
	char dp_ip[INET_ADDRSTRLEN], src[INET_ADDRSTRLEN];
	char group[INET_ADDRSTRLEN];
	char addrs[TALLY_RDV_MAX_SHARDS][INET_ADDRSTRLEN];
	struct tally_shard sh[TALLY_RDV_MAX_SHARDS];
	struct tally_ctx *ctx = NULL;
	struct tally_rdv_msg m;
	uint32_t lip;
	uint16_t lport;
	int rc;

	shards_from_params(p, o, addrs, sh);
	if ((rc = ctx_from_params(p, o, rank, world, dp_ip, src, group)) != 0 ||
			(rc = check_path_mtu(p->dp_ip, p->dp_port, o->codec,
				o->narrow, p->auth, o->elems)) != 0 ||
			(rc = tally_ctx_open(o, &ctx)) != 0)
		goto out;
	rc = tally_transport_local(ctx->tp, &lip, &lport);
	if (rc != 0) {
		tally_ctx_open_fail(rc, "local address: %s", strerror(-rc));
		goto out;
	}
	m = (struct tally_rdv_msg){ .op = TALLY_RDV_MEMBER,
		.ip = lip != 0 ? ntohl(lip) : ntohl(inet_addr(o->bind_addr)),
		.port = ntohs(lport), .qpn = ctx->tp->qpn };
	if ((rc = send_msg(ch, &m, deadline)) != 0) {
		tally_ctx_open_fail(rc, "rendezvous with tallyd: %s",
			strerror(-rc));
		goto out;
	}
	/* The join barrier: every rank of the world must get here. */
	if ((rc = recv_msg(ch, &m, deadline, "ready (the join barrier)")) != 0)
		goto out;
	if (m.op != TALLY_RDV_READY) {
		rc = tally_ctx_open_fail(-EPROTO, "tallyd answered the member "
			"message out of order");
		goto out;
	}
	if (m.nring != 0) {	/* the dataplane went down meanwhile */
		rc = ring_switch(ctx, &m, o, join, g, deadline, out);
		ctx = NULL;
		goto out;
	}
	ctx->token = m.wire_token;
	ctx->epoch = m.epoch;
	/* An authenticated job: this member's keys came with "ready". */
	if (m.auth) {
		rc = tally_lib_ctx_keys(ctx, &m.keys);
		explicit_bzero(&m.keys, sizeof(m.keys));
		if (rc != 0)
			goto out;
	}
	*out = ctx;
	ctx = NULL;
out:
	o->shards = NULL;	/* sh[] and addrs[] end here */
	o->nshards = 0;
	tally_ctx_close(ctx);
	return rc;
}

/*
 * Opens the ring listener (the ring fallback, docs/scale-out.md) on
 * opts' bind_addr, else on lip (the address tallyd sees this worker
 * at), an ephemeral port, and names it in join ("ring"; "transport":
 * "ring" when the worker asks for the ring). 0 or -errno.
 */
static int
ring_listen(const struct tally_ctx_opts *o, uint32_t lip,
	struct tally_rdv_msg *join, struct tally_ring **g)
{
	char why[TALLY_RING_WHY_LEN];
	uint32_t ip = o->bind_addr != NULL ? inet_addr(o->bind_addr) : lip;
	uint16_t port;

	if (ip == 0 || ip == INADDR_NONE)
		return tally_ctx_open_fail(-EADDRNOTAVAIL, "no address for "
			"the ring listener");
	if ((*g = tally_ring_listen(ip, 0, why, sizeof(why))) == NULL)
		return tally_ctx_open_fail(-errno, "%s", why);
	tally_ring_local(*g, &ip, &port);
	join->ring_addr.ip = ntohl(ip);
	join->ring_addr.port = ntohs(port);
	join->ring_want = o->transport != NULL &&
		strcmp(o->transport, "ring") == 0;
	return 0;
}

/* The URL's transport, RDMA device, interface and queue where opts name
 * none. */
static void
url_transport(const struct url *u, struct tally_ctx_opts *o)
{
	if (o->transport == NULL && u->transport[0] != '\0')
		o->transport = u->transport;
	if (o->rdma_device == NULL && u->rdma_dev[0] != '\0')
		o->rdma_device = u->rdma_dev;
	if (o->ifname == NULL && u->ifname[0] != '\0')
		o->ifname = u->ifname;
	if (o->queue == 0 && u->queue > 0)
		o->queue = (uint16_t)u->queue;
}

/*
 * One rendezvous: the channel to tallyd, the ring listener, join,
 * params, then the dataplane's context or the ring's into *out.
 */
static int
join_once(const struct url *u, struct tally_ctx_opts *o,
	struct tally_rdv_msg *join, int64_t deadline, struct tally_ctx **out)
{
	struct tally_chan *ch = NULL;
	struct tally_ring *g = NULL;
	struct tally_rdv_msg p;
	uint32_t lip = 0;
	int rc;

	if ((rc = open_chan(u, o, deadline, &ch, &lip)) != 0)
		return rc;
	if ((rc = ring_listen(o, lip, join, &g)) != 0) {
		/* no ring, nothing sent yet */
	} else if ((rc = send_msg(ch, join, deadline)) != 0) {
		tally_ctx_open_fail(rc, "rendezvous with tallyd: %s",
			strerror(-rc));
	} else if ((rc = recv_msg(ch, &p, deadline, "params")) == 0) {
		if (p.op != TALLY_RDV_PARAMS)
			rc = tally_ctx_open_fail(-EPROTO, "tallyd answered "
				"the join out of order");
		else if (p.ring_fallback && (p.tier_world != 0 ||
				join->world > TALLY_MAX_WORKERS))
			rc = tally_ctx_open_fail(-EPROTO, "tallyd offered the "
				"ring fallback to a two-tier job");
		else if (p.ring_fallback)
			rc = join_ring(ch, &p, o, join, &g, deadline, out);
		else
			rc = join_rest(ch, &p, o, join, &g, deadline, out);
	}
	tally_ring_destroy(g);
	tally_chan_close(ch);
	return rc;
}

int
tally_lib_rdv_open(const char *url, const char *token, unsigned int rank,
	unsigned int world, const struct tally_ctx_opts *base, uint32_t epoch,
	struct tally_ctx **out)
{
	struct tally_rdv_msg join = { .op = TALLY_RDV_JOIN };
	struct tally_ctx_opts o = { 0 }, o0;
	struct url u;
	int64_t deadline;
	int rc;

	tally_ctx_open_fail(0, "%s", "");
	if (out == NULL)
		return tally_ctx_open_fail(-EINVAL, "tally_open: out is NULL");
	*out = NULL;
	if (base != NULL)
		o = *base;
	if (parse_url(url, &u) != 0)
		return tally_ctx_open_fail(-EINVAL, "'%s' is not "
			"tally://HOST[:PORT]/JOB[?ca=FILE][&tls=on|off]"
			"[&transport=udp|xdp|rdma|ring][&rdma_device=NAME]"
			"[&ifname=IF][&queue=N]",
			url != NULL ? url : "(null)");
	url_transport(&u, &o);
	if (token == NULL || !tally_rdv_token_ok(token))
		return tally_ctx_open_fail(-EINVAL, "a job token is %d hex "
			"digits", TALLY_RDV_TOKEN_HEX);
	/* Above 64: a two-tier job's total (tallyd places it on a leaf). */
	if (world < 1 || world > TALLY_RDV_MAX_WORLD || rank >= world)
		return tally_ctx_open_fail(-EINVAL, "rank %u / world %u: "
			"need rank < world <= %u (%u in a two-tier job)", rank,
			world, TALLY_MAX_WORKERS, TALLY_RDV_MAX_WORLD);
	strcpy(join.job, u.job);
	strcpy(join.token, token);
	join.rank = rank;
	join.world = world;
	join.epoch = epoch;
	deadline = now_ms() + (o.join_timeout_ms != 0 ? o.join_timeout_ms :
		DEFAULT_JOIN_MS);

	o0 = o;
	rc = join_once(&u, &o, &join, deadline, out);
	/*
	 * tallyd's "no capacity left" (ENOSPC: every dataplane of the job
	 * is gone, epochs): once more, asking for the ring fallback.
	 */
	if (rc == -ENOSPC && (o0.transport == NULL ||
			strcmp(o0.transport, "ring") != 0)) {
		o = o0;
		o.transport = "ring";
		rc = join_once(&u, &o, &join, deadline, out);
	}
	explicit_bzero(join.token, sizeof(join.token));
	return rc;
}

int
tally_open_opts(const char *url, const char *token, unsigned int rank,
	unsigned int world, const struct tally_ctx_opts *base,
	struct tally_ctx **out)
{
	int rc = tally_lib_rdv_open(url, token, rank, world, base, 0, out);

	/* What a rejoin needs (rejoin.c): without it, no rejoins. */
	if (rc == 0 && tally_lib_rejoin_init(*out, url, token, rank, world,
			base) != 0)
		(*out)->rj = NULL;
	return rc;
}

int
tally_open(const char *url, const char *token, unsigned int rank,
	unsigned int world, struct tally_ctx **out)
{
	return tally_open_opts(url, token, rank, world, NULL, out);
}

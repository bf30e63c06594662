/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The plugin's point-to-point net: one TCP connection a send/receive
 * pair, non-blocking throughout, as NCCL's proxy thread wants (connect and
 * accept return a NULL comm until the connection is there). A message is
 * an 8-byte header (length, tag; little-endian) and its bytes; requests
 * of a comm complete in posting order, progressed by test(). NCCL runs
 * every ring, tree and point-to-point transfer of a communicator through
 * this net once it loaded the library (docs/nccl.md says why).
 *
 * The listening address: TALLY_NCCL_ADDR (an IPv4 dotted quad) when set,
 * else the first IPv4 address of an interface that is up and not
 * loopback, else 127.0.0.1.
 */
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>

#include "plugin.h"

#include "sock.h"

static pthread_once_t addr_once = PTHREAD_ONCE_INIT;
static struct in_addr local_addr;

/* Picks the address listeners publish (see the head comment). */
static void
addr_pick(void)
{
	const char *env = getenv("TALLY_NCCL_ADDR");
	struct ifaddrs *ifs, *i;

	local_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (env != NULL && inet_pton(AF_INET, env, &local_addr) == 1)
		return;
	if (env != NULL)
		TN_WARN("TALLY_NCCL_ADDR=%s is not an IPv4 address", env);
	if (getifaddrs(&ifs) != 0)
		return;
	for (i = ifs; i != NULL; i = i->ifa_next) {
		if (i->ifa_addr == NULL || i->ifa_addr->sa_family != AF_INET ||
		    !(i->ifa_flags & IFF_UP) || (i->ifa_flags & IFF_LOOPBACK))
			continue;
		local_addr = ((struct sockaddr_in *)i->ifa_addr)->sin_addr;
		break;
	}
	freeifaddrs(ifs);
}

/* init: keeps the logger, picks the address; the context is unused. */
int
tally_nccl_sock_init(void **ctx, uint64_t comm_id,
	struct tally_nccl_comm_config *config, tally_nccl_logger log,
	void *profiler)
{
	char a[INET_ADDRSTRLEN];

	(void)comm_id;
	(void)config;
	(void)profiler;
	tally_nccl_set_logger(log);
	pthread_once(&addr_once, addr_pick);
	if (ctx != NULL)
		*ctx = NULL;
	inet_ntop(AF_INET, &local_addr, a, sizeof(a));
	TN_INFO("net over TCP, listening on %s", a);
	return TALLY_NCCL_SUCCESS;
}

/* finalize: nothing is held per context. */
int
tally_nccl_sock_finalize(void *ctx)
{
	(void)ctx;
	return TALLY_NCCL_SUCCESS;
}

/* listen: a TCP socket on an ephemeral port of the local address; its
 * address and port go into handle. */
int
tally_nccl_sock_listen(void *ctx, int dev, void *handle, void **lcomm)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	struct sock_handle h = { .magic = HANDLE_MAGIC, .fd = -1 };
	socklen_t sl = sizeof(sa);
	struct sock_listen *l;
	int fd;

	(void)ctx;
	if (dev != 0 || handle == NULL || lcomm == NULL)
		return TALLY_NCCL_INVALID_ARGUMENT;
	pthread_once(&addr_once, addr_pick);
	sa.sin_addr = local_addr;
	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
	    listen(fd, 128) != 0 ||
	    getsockname(fd, (struct sockaddr *)&sa, &sl) != 0 ||
	    (l = calloc(1, sizeof(*l))) == NULL) {
		TN_WARN("listen: %s", strerror(errno));
		if (fd >= 0)
			close(fd);
		return TALLY_NCCL_SYSTEM_ERROR;
	}
	l->fd = fd;
	h.addr = sa.sin_addr.s_addr;
	h.port = sa.sin_port;
	memset(handle, 0, TALLY_NCCL_HANDLE_MAX);
	memcpy(handle, &h, sizeof(h));
	*lcomm = l;
	return TALLY_NCCL_SUCCESS;
}

/* A comm over the connected fd (owned from now on); NULL on ENOMEM. */
static struct sock_comm *
comm_new(int fd, int is_send)
{
	struct sock_comm *c = calloc(1, sizeof(*c));
	int one = 1;

	if (c == NULL) {
		close(fd);
		return NULL;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	c->fd = fd;
	c->is_send = is_send;
	return c;
}

/* Starts a non-blocking connect to h's address. 0 or -errno. */
static int
connect_start(struct sock_handle *h)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	int fd;

	sa.sin_addr.s_addr = h->addr;
	sa.sin_port = h->port;
	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 &&
	    errno != EINPROGRESS) {
		int err = errno;

		close(fd);
		return -err;
	}
	h->fd = fd;
	h->stage = 1;
	return 0;
}

/* connect: non-blocking; *scomm stays NULL until the connection is up
 * (NCCL calls again with the same handle). */
int
tally_nccl_sock_connect(void *ctx, int dev, void *handle, void **scomm,
	struct tally_nccl_dev_handle **sdev)
{
	struct sock_handle *h = handle;
	struct pollfd p;
	int err = 0, rc;
	socklen_t el = sizeof(err);

	(void)ctx;
	(void)sdev;
	if (dev != 0 || h == NULL || scomm == NULL ||
	    memcmp(h->magic, HANDLE_MAGIC, sizeof(h->magic)) != 0)
		return TALLY_NCCL_INVALID_ARGUMENT;
	*scomm = NULL;
	if (h->stage == 0 && (rc = connect_start(h)) < 0) {
		TN_WARN("connect: %s", strerror(-rc));
		return TALLY_NCCL_SYSTEM_ERROR;
	}
	p = (struct pollfd){ .fd = h->fd, .events = POLLOUT };
	if (poll(&p, 1, 0) <= 0)
		return TALLY_NCCL_SUCCESS;	/* not yet (or EINTR) */
	getsockopt(h->fd, SOL_SOCKET, SO_ERROR, &err, &el);
	h->stage = 0;
	if (err != 0) {
		TN_WARN("connect: %s", strerror(err));
		close(h->fd);
		return TALLY_NCCL_SYSTEM_ERROR;
	}
	if ((*scomm = comm_new(h->fd, 1)) == NULL)
		return TALLY_NCCL_SYSTEM_ERROR;
	return TALLY_NCCL_SUCCESS;
}

/* accept: non-blocking; *rcomm stays NULL until a peer connected. */
int
tally_nccl_sock_accept(void *lcomm, void **rcomm,
	struct tally_nccl_dev_handle **rdev)
{
	struct sock_listen *l = lcomm;
	int fd;

	(void)rdev;
	if (l == NULL || rcomm == NULL)
		return TALLY_NCCL_INVALID_ARGUMENT;
	*rcomm = NULL;
	fd = accept4(l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	if (fd < 0) {
		if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
			return TALLY_NCCL_SUCCESS;
		TN_WARN("accept: %s", strerror(errno));
		return TALLY_NCCL_SYSTEM_ERROR;
	}
	if ((*rcomm = comm_new(fd, 0)) == NULL)
		return TALLY_NCCL_SYSTEM_ERROR;
	return TALLY_NCCL_SUCCESS;
}

/* closeSend / closeRecv: closes the socket, frees the comm. */
int
tally_nccl_sock_close(void *comm)
{
	struct sock_comm *c = comm;

	if (c != NULL) {
		close(c->fd);
		free(c);
	}
	return TALLY_NCCL_SUCCESS;
}

/* closeListen. */
int
tally_nccl_sock_close_listen(void *lcomm)
{
	struct sock_listen *l = lcomm;

	if (l != NULL) {
		close(l->fd);
		free(l);
	}
	return TALLY_NCCL_SUCCESS;
}

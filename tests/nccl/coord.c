/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * coord.h over plain blocking TCP: rank 0 accepts world - 1 connections,
 * each introduced by its rank; an all-gather is every rank's blob to
 * rank 0, then the whole array back to each.
 */
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>

#include "coord.h"

struct coord {
	unsigned int rank, world;
	int fd;			/* rank > 0: to rank 0 */
	int peers[64];		/* rank 0: fd of rank r, r >= 1 */
};

/* Writes or reads all n bytes; 0 or -errno (-ECONNRESET at EOF). */
static int
full(int fd, void *buf, size_t n, int out)
{
	char *p = buf;

	while (n > 0) {
		ssize_t k = out ? send(fd, p, n, MSG_NOSIGNAL) :
			recv(fd, p, n, 0);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return k == 0 ? -ECONNRESET : -errno;
		p += k;
		n -= (size_t)k;
	}
	return 0;
}

/* Rank 0: listens and takes one connection per other rank. */
static int
coord_accept(struct coord *c, struct sockaddr_in *sa, unsigned int ms)
{
	int one = 1, lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (lfd < 0)
		return -errno;
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(lfd, (struct sockaddr *)sa, sizeof(*sa)) != 0 ||
	    listen(lfd, 64) != 0)
		goto fail;
	for (unsigned int i = 1; i < c->world; i++) {
		struct pollfd p = { .fd = lfd, .events = POLLIN };
		uint32_t r;
		int fd;

		if (poll(&p, 1, (int)ms) != 1) {
			errno = ETIMEDOUT;
			goto fail;
		}
		if ((fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC)) < 0)
			goto fail;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		if (full(fd, &r, sizeof(r), 0) != 0 || r == 0 ||
		    r >= c->world || c->peers[r] >= 0) {
			close(fd);
			errno = EPROTO;
			goto fail;
		}
		c->peers[r] = fd;
	}
	close(lfd);
	return 0;
fail:
	one = -errno;
	close(lfd);
	return one;
}

/* Rank > 0: connects to rank 0, retrying until ms passed. */
static int
coord_connect(struct coord *c, struct sockaddr_in *sa, unsigned int ms)
{
	struct timespec d = { 0, 50 * 1000 * 1000 };
	uint32_t r = c->rank;
	int one = 1;

	for (unsigned int waited = 0;; waited += 50) {
		c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (c->fd < 0)
			return -errno;
		if (connect(c->fd, (struct sockaddr *)sa, sizeof(*sa)) == 0)
			break;
		close(c->fd);
		c->fd = -1;
		if (waited >= ms)
			return -ETIMEDOUT;
		nanosleep(&d, NULL);
	}
	setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return full(c->fd, &r, sizeof(r), 1);
}

struct coord *
coord_open(const char *ip, unsigned int port, unsigned int rank,
	unsigned int world, unsigned int timeout_ms)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
		.sin_port = htons((uint16_t)port) };
	struct coord *c;
	int rc;

	if (world == 0 || world > 64 || rank >= world ||
	    inet_pton(AF_INET, ip, &sa.sin_addr) != 1) {
		errno = EINVAL;
		return NULL;
	}
	if ((c = calloc(1, sizeof(*c))) == NULL)
		return NULL;
	c->rank = rank;
	c->world = world;
	c->fd = -1;
	for (int i = 0; i < 64; i++)
		c->peers[i] = -1;
	rc = rank == 0 ? coord_accept(c, &sa, timeout_ms) :
		coord_connect(c, &sa, timeout_ms);
	if (rc < 0) {
		coord_close(c);
		errno = -rc;
		return NULL;
	}
	return c;
}

int
coord_allgather(struct coord *c, const void *mine, size_t len, void *all)
{
	char *a = all;
	int rc = 0;

	if (c->rank != 0) {
		if ((rc = full(c->fd, (void *)mine, len, 1)) < 0)
			return rc;
		return full(c->fd, all, len * c->world, 0);
	}
	memcpy(a, mine, len);
	for (unsigned int r = 1; r < c->world && rc == 0; r++)
		rc = full(c->peers[r], a + r * len, len, 0);
	for (unsigned int r = 1; r < c->world && rc == 0; r++)
		rc = full(c->peers[r], a, len * c->world, 1);
	return rc;
}

int
coord_barrier(struct coord *c)
{
	char one = 1, all[64];

	return coord_allgather(c, &one, 1, all);
}

void
coord_close(struct coord *c)
{
	if (c == NULL)
		return;
	if (c->fd >= 0)
		close(c->fd);
	for (int i = 0; i < 64; i++)
		if (c->peers[i] >= 0)
			close(c->peers[i]);
	free(c);
}

/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The admin socket itself: taking the path (never from a live tally-dp),
 * accepting clients, reading their requests and sending the replies that
 * admin.c writes. Runs on the main lcore, never an lcore.
 *
 * Serving never blocks: client sockets are non-blocking, and a reply the
 * socket does not take at once waits in the client's own queue, sent as
 * the client reads. A client that lets more than OUT_MAX bytes of replies
 * pile up is disconnected (counted in admin.slow), so that a client that
 * never reads costs tally-dp a bounded amount of memory and nothing else:
 * every other client goes on being served. A client that hung up before
 * its requests were read gets none of them run (admin.stale): nobody
 * would learn their outcome, and a late job_add would bring back a job
 * its sender had given up on.
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "admin_parse.h"
#include "dp.h"

#define MAX_CLIENTS 16
#define MAX_MSG TALLY_ADMIN_MSG_MAX
/* Bytes of replies a client may leave unread before it is dropped. */
#define OUT_MAX (256 * 1024)
#define POLL_MS 200

/* A reply waiting for its client to read: len bytes at text. */
struct msg {
	struct msg *next;
	size_t len;
	char text[];
};

struct client {
	int fd;
	struct msg *head, **tail;	/* replies not sent yet, in order */
	size_t queued;			/* their bytes */
};

/*
 * Whether a live process listens on the socket at path: a connection it
 * would take (or whose backlog is full) says yes, a refused one no.
 * Returns 1 (live), 0 (stale or gone), or -errno: -EEXIST for a socket
 * of another type.
 */
static int
probe(const struct sockaddr_un *sa)
{
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC,
		0), ret;

	if (fd < 0)
		return -errno;
	ret = connect(fd, (const struct sockaddr *)sa, sizeof(*sa));
	if (ret == 0 || errno == EAGAIN || errno == EINPROGRESS)
		ret = 1;
	else if (errno == ECONNREFUSED || errno == ENOENT)
		ret = 0;
	else if (errno == EPROTOTYPE)
		ret = -EEXIST;
	else
		ret = -errno;
	close(fd);
	return ret;
}

int
tally_dp_admin_open(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct stat st;
	int fd, ret;

	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	strcpy(sa.sun_path, path);
	/* Only a socket nobody answers on is a previous run's leftover. */
	if (lstat(path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode))
			return -EEXIST;
		ret = probe(&sa);
		if (ret != 0)
			return ret > 0 ? -EADDRINUSE : ret;
		if (unlink(path) != 0 && errno != ENOENT)
			return -errno;
	}
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	/* bind() fails with EADDRINUSE if another took the path meanwhile. */
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
			chmod(path, 0600) != 0 || listen(fd, 64) != 0) {
		int err = errno;

		close(fd);
		return -err;
	}
	return fd;
}

/* Frees c's queue and closes it. */
static void
client_close(struct client *c)
{
	struct msg *m, *next;

	for (m = c->head; m != NULL; m = next) {
		next = m->next;
		free(m);
	}
	close(c->fd);
	*c = (struct client){ .fd = -1 };
}

/*
 * Sends what c's queue holds, as far as the socket takes it. Returns 0,
 * or -1 when c is gone.
 */
static int
flush_queue(struct client *c)
{
	struct msg *m;

	while ((m = c->head) != NULL) {
		if (send(c->fd, m->text, m->len, MSG_NOSIGNAL |
				MSG_DONTWAIT) < 0)
			return errno == EAGAIN || errno == EINTR ? 0 : -1;
		c->head = m->next;
		if (c->head == NULL)
			c->tail = &c->head;
		c->queued -= m->len;
		free(m);
	}
	return 0;
}

/*
 * Sends len bytes of text (borrowed) to c, or queues them behind what
 * waits already. Returns 0, or -1 when c must be closed: gone, or over
 * its OUT_MAX (counted in dp->admin.slow).
 */
static int
reply(struct tally_dp *dp, struct client *c, const char *text, size_t len)
{
	struct msg *m;

	if (c->head == NULL) {
		if (send(c->fd, text, len, MSG_NOSIGNAL | MSG_DONTWAIT) >= 0)
			return 0;
		if (errno != EAGAIN && errno != EINTR)
			return -1;
	}
	if (c->queued + len > OUT_MAX) {
		dp->admin.slow++;
		return -1;
	}
	m = malloc(sizeof(*m) + len);
	if (m == NULL)
		return -1;
	m->next = NULL;
	m->len = len;
	memcpy(m->text, text, len);
	*c->tail = m;
	c->tail = &m->next;
	c->queued += len;
	return 0;
}

/*
 * Reads and answers one request of c (buf: MAX_MSG bytes). Returns 0,
 * 1 when there was nothing to read, or -1 when c must be closed.
 */
static int
serve_one(struct tally_dp *dp, struct client *c, char *buf)
{
	static const char big[] = "{\"errno\":90,\"error\":"
		"\"request larger than 64 KiB\"}";
	ssize_t n = recv(c->fd, buf, MAX_MSG, MSG_TRUNC | MSG_DONTWAIT);
	char *text;
	int ret;

	if (n < 0)
		return errno == EAGAIN || errno == EINTR ? 1 : -1;
	if (n == 0)
		return -1;
	dp->admin.requests++;
	if (n > MAX_MSG)
		return reply(dp, c, big, sizeof(big) - 1);
	text = tally_dp_admin_handle(dp, buf, (size_t)n);
	if (text == NULL)
		return -1;
	ret = reply(dp, c, text, strlen(text));
	free(text);
	return ret;
}

/* Counts and discards the requests of a client that hung up. */
static void
drop_stale(struct tally_dp *dp, struct client *c, char *buf)
{
	while (recv(c->fd, buf, MAX_MSG, MSG_TRUNC | MSG_DONTWAIT) > 0)
		dp->admin.stale++;
}

/* What a client's revents ask for; returns -1 when it must be closed. */
static int
client_event(struct tally_dp *dp, struct client *c, short revents, char *buf)
{
	if (revents & POLLHUP) {
		drop_stale(dp, c, buf);
		return -1;
	}
	if (revents & (POLLERR | POLLNVAL))
		return -1;
	if ((revents & POLLOUT) && flush_queue(c) != 0)
		return -1;
	if (revents & POLLIN)
		return serve_one(dp, c, buf) < 0 ? -1 : 0;
	return 0;
}

/* Takes a new connection into cl, or closes it when cl is full. */
static void
accept_one(struct tally_dp *dp, int lfd, struct client *cl)
{
	int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

	if (fd < 0)
		return;
	for (unsigned int i = 0; i < MAX_CLIENTS; i++) {
		if (cl[i].fd < 0) {
			cl[i] = (struct client){ .fd = fd };
			cl[i].tail = &cl[i].head;
			dp->admin.clients++;
			return;
		}
	}
	dp->admin.refused++;
	close(fd);
}

int
tally_dp_admin_serve(struct tally_dp *dp, int lfd)
{
	struct client cl[MAX_CLIENTS];
	struct pollfd pfd[MAX_CLIENTS + 1];
	int who[MAX_CLIENTS + 1];
	char *buf = malloc(MAX_MSG);

	if (buf == NULL)
		return -ENOMEM;
	for (unsigned int i = 0; i < MAX_CLIENTS; i++)
		cl[i] = (struct client){ .fd = -1 };
	while (!dp->stop) {
		unsigned int n = 1;

		pfd[0] = (struct pollfd){ .fd = lfd, .events = POLLIN };
		for (unsigned int i = 0; i < MAX_CLIENTS; i++) {
			if (cl[i].fd < 0)
				continue;
			pfd[n] = (struct pollfd){ .fd = cl[i].fd,
				.events = (short)(POLLIN |
					(cl[i].head != NULL ? POLLOUT : 0)) };
			who[n++] = (int)i;
		}
		if (poll(pfd, n, POLL_MS) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		for (unsigned int k = 1; k < n; k++)
			if (pfd[k].revents != 0 && client_event(dp,
					&cl[who[k]], pfd[k].revents, buf) != 0)
				client_close(&cl[who[k]]);
		if (pfd[0].revents & POLLIN)
			accept_one(dp, lfd, cl);
	}
	for (unsigned int i = 0; i < MAX_CLIENTS; i++)
		if (cl[i].fd >= 0)
			client_close(&cl[i]);
	free(buf);
	return 0;
}

/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The control socket's client side. A connect waits at most the timeout
 * (SO_SNDTIMEO bounds a connect to a full backlog), then the reply is
 * awaited with poll() until the same deadline.
 */
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "client.h"

static int64_t
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int
connect_to(const char *path, unsigned int timeout_ms)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct timeval tv = {
		.tv_sec = timeout_ms / 1000,
		.tv_usec = (timeout_ms % 1000) * 1000,
	};
	int fd, err;

	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	strcpy(sa.sun_path, path);
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) != 0)
		goto fail;
	while (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0)
		if (errno != EINTR)
			goto fail;
	return fd;
fail:
	err = errno == EAGAIN || errno == EINPROGRESS ? ETIMEDOUT : errno;
	close(fd);
	return -err;
}

/* Waits for fd to be readable until deadline (monotonic ms). */
static int
wait_readable(int fd, int64_t deadline)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	int64_t left;
	int n;

	for (;;) {
		left = deadline - now_ms();
		if (left <= 0)
			return -ETIMEDOUT;
		n = poll(&p, 1, left > 60000 ? 60000 : (int)left);
		if (n > 0)
			return 0;
		if (n < 0 && errno != EINTR)
			return -errno;
	}
}

/* Receives one message and parses it as a reply. */
static int
receive(int fd, int64_t deadline, json_t **reply)
{
	char *buf = malloc(TALLYCTL_REPLY_MAX);
	json_t *r = NULL;
	ssize_t n;
	int ret;

	if (buf == NULL)
		return -ENOMEM;
	ret = wait_readable(fd, deadline);
	if (ret != 0)
		goto out;
	do
		n = recv(fd, buf, TALLYCTL_REPLY_MAX, MSG_TRUNC | MSG_DONTWAIT);
	while (n < 0 && errno == EINTR);
	if (n < 0) {
		ret = errno == EAGAIN ? -ETIMEDOUT : -errno;
		goto out;
	}
	ret = n == 0 ? -ECONNRESET : n > TALLYCTL_REPLY_MAX ? -EMSGSIZE : 0;
	if (ret != 0)
		goto out;
	r = json_loadb(buf, (size_t)n, JSON_REJECT_DUPLICATES, NULL);
	if (!json_is_object(r) || !json_is_integer(json_object_get(r,
			"errno"))) {
		json_decref(r);
		ret = -EPROTO;
		goto out;
	}
	*reply = r;
out:
	free(buf);
	return ret;
}

int
tallyctl_client_call(const char *path, unsigned int timeout_ms,
	const json_t *req, json_t **reply)
{
	int64_t deadline = now_ms() + timeout_ms;
	char *text;
	ssize_t n;
	int fd, ret;

	*reply = NULL;
	text = json_dumps(req, JSON_COMPACT);
	if (text == NULL)
		return -ENOMEM;
	fd = connect_to(path, timeout_ms);
	if (fd < 0) {
		free(text);
		return fd;
	}
	do
		n = send(fd, text, strlen(text), MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		ret = errno == EAGAIN ? -ETIMEDOUT : errno == EPIPE ?
			-ECONNRESET : -errno;
	else
		ret = receive(fd, deadline, reply);
	close(fd);
	free(text);
	return ret;
}

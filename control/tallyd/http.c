/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The metrics endpoint on libmicrohttpd in "external polling" mode with
 * epoll: MHD keeps its sockets in an epoll fd of its own, tallyd polls that
 * one fd and calls MHD_run() after; MHD starts no thread. MHD's epoll is
 * edge-triggered inside, so work can be pending with the fd quiet:
 * MHD_get_timeout() says 0 then, which is why tallyd must honour
 * tallyd_http_timeout_ms().
 *
 * tallyd binds the listening socket itself (rather than handing MHD a
 * sockaddr) so that a failure comes back as the bind's own errno:
 * EADDRINUSE, EADDRNOTAVAIL.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <microhttpd.h>

#include "http.h"

#define CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

struct tallyd_http {
	struct MHD_Daemon *mhd;		/* owned; owns the listening socket */
	int epoll_fd;			/* MHD's */
	uint16_t port;
	char *(*render)(void *arg);	/* returns malloc'd text or NULL */
	void *arg;			/* borrowed; render's */
};

/* Parses "A.B.C.D:PORT" (PORT 0-65535, decimal). Returns 0 or -EINVAL. */
static int
parse_addr(const char *s, struct sockaddr_in *sa)
{
	const char *colon = strrchr(s, ':');
	char host[INET_ADDRSTRLEN];
	unsigned long port = 0;
	const char *p;

	if (colon == NULL || colon == s ||
			(size_t)(colon - s) >= sizeof(host) || colon[1] == '\0')
		return -EINVAL;
	for (p = colon + 1; *p != '\0'; p++) {
		if (*p < '0' || *p > '9')
			return -EINVAL;
		port = port * 10 + (unsigned long)(*p - '0');
		if (port > 65535)
			return -EINVAL;
	}
	memcpy(host, s, (size_t)(colon - s));
	host[colon - s] = '\0';
	*sa = (struct sockaddr_in){
		.sin_family = AF_INET,
		.sin_port = htons((uint16_t)port),
	};
	if (inet_pton(AF_INET, host, &sa->sin_addr) != 1)
		return -EINVAL;
	return 0;
}

/* A non-blocking listening TCP socket on sa. Returns the fd or -errno. */
static int
listen_on(const struct sockaddr_in *sa, uint16_t *port)
{
	struct sockaddr_in bound;
	socklen_t len = sizeof(bound);
	int fd, one = 1, err;

	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
			bind(fd, (const struct sockaddr *)sa,
				sizeof(*sa)) != 0 ||
			listen(fd, 64) != 0 ||
			getsockname(fd, (struct sockaddr *)&bound, &len) != 0) {
		err = -errno;
		close(fd);
		return err;
	}
	*port = ntohs(bound.sin_port);
	return fd;
}

/*
 * Queues a response of status with body, then drops this side's reference.
 * A static body is borrowed; otherwise it is malloc'd and consumed (MHD
 * frees it once sent, or here when MHD cannot take it).
 */
static enum MHD_Result
reply(struct MHD_Connection *c, unsigned int status, char *body,
	bool is_static)
{
	struct MHD_Response *resp;
	enum MHD_Result ret;

	if (is_static)
		resp = MHD_create_response_from_buffer(strlen(body), body,
			MHD_RESPMEM_PERSISTENT);
	else
		resp = MHD_create_response_from_buffer_with_free_callback(
			strlen(body), body, free);
	if (resp == NULL) {
		if (!is_static)
			free(body);
		return MHD_NO;	/* MHD closes the connection */
	}
	if (MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
			status == MHD_HTTP_OK ? CONTENT_TYPE :
			"text/plain; charset=utf-8") != MHD_YES ||
			(status == MHD_HTTP_METHOD_NOT_ALLOWED &&
			MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW,
			"GET, HEAD") != MHD_YES)) {
		MHD_destroy_response(resp);
		return MHD_NO;
	}
	ret = MHD_queue_response(c, status, resp);
	MHD_destroy_response(resp);
	return ret;
}

/*
 * MHD's request callback: answers on its first call for a request, before
 * any body (nothing here takes one; MHD discards it and closes).
 */
static enum MHD_Result
answer(void *cls, struct MHD_Connection *c, const char *url,
	const char *method, const char *version, const char *upload_data,
	size_t *upload_data_size, void **req_cls)
{
	struct tallyd_http *h = cls;
	char *text;

	(void)version;
	(void)upload_data;
	(void)upload_data_size;
	(void)req_cls;
	if (strcmp(url, "/metrics") != 0)
		return reply(c, MHD_HTTP_NOT_FOUND,
			(char *)"Not found: metrics are at /metrics\n", true);
	if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 &&
			strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
		return reply(c, MHD_HTTP_METHOD_NOT_ALLOWED,
			(char *)"Method not allowed: use GET\n", true);
	text = h->render(h->arg);
	if (text == NULL)
		return reply(c, MHD_HTTP_INTERNAL_SERVER_ERROR,
			(char *)"Rendering the metrics failed\n", true);
	return reply(c, MHD_HTTP_OK, text, false);
}

struct tallyd_http *
tallyd_http_start(const char *addr_port, char *(*render)(void *arg),
	void *arg)
{
	const union MHD_DaemonInfo *info;
	struct tallyd_http *h;
	struct sockaddr_in sa;
	int fd, err;

	if (addr_port == NULL || render == NULL) {
		errno = EINVAL;
		return NULL;
	}
	err = parse_addr(addr_port, &sa);
	if (err != 0)
		goto fail;
	h = calloc(1, sizeof(*h));
	if (h == NULL) {
		err = -ENOMEM;
		goto fail;
	}
	h->render = render;
	h->arg = arg;
	fd = listen_on(&sa, &h->port);
	if (fd < 0) {
		err = fd;
		goto free_h;
	}
	h->mhd = MHD_start_daemon(MHD_USE_EPOLL, 0, NULL, NULL, answer, h,
		MHD_OPTION_LISTEN_SOCKET, fd,
		MHD_OPTION_CONNECTION_LIMIT, (unsigned int)32,
		MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)10,
		MHD_OPTION_END);
	if (h->mhd == NULL) {
		/*
		 * MHD closes a listening socket it was given when it fails
		 * after taking it, not before: close it only if still open
		 * (nothing else in tallyd's one thread opened an fd since).
		 */
		if (fcntl(fd, F_GETFD) != -1)
			close(fd);
		err = -ENOMEM;
		goto free_h;
	}
	info = MHD_get_daemon_info(h->mhd, MHD_DAEMON_INFO_EPOLL_FD);
	if (info == NULL) {
		err = -ENOTSUP;
		goto stop;
	}
	h->epoll_fd = info->epoll_fd;
	return h;

stop:
	MHD_stop_daemon(h->mhd);
free_h:
	free(h);
fail:
	errno = -err;
	return NULL;
}

int
tallyd_http_fd(const struct tallyd_http *h)
{
	return h->epoll_fd;
}

int
tallyd_http_timeout_ms(const struct tallyd_http *h)
{
	MHD_UNSIGNED_LONG_LONG ms;

	if (MHD_get_timeout(h->mhd, &ms) != MHD_YES)
		return -1;
	return ms > INT_MAX ? INT_MAX : (int)ms;
}

void
tallyd_http_run(struct tallyd_http *h)
{
	(void)MHD_run(h->mhd);
}

uint16_t
tallyd_http_port(const struct tallyd_http *h)
{
	return h->port;
}

void
tallyd_http_stop(struct tallyd_http *h)
{
	if (h == NULL)
		return;
	MHD_stop_daemon(h->mhd);
	free(h);
}

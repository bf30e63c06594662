/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * etcd's v3 JSON gateway over plain HTTP/1.1 (etcd.h). Each exchange is
 * a fresh non-blocking TCP connection with "Connection: close", polled
 * against one deadline for the whole exchange: connecting, sending the
 * request and reading the reply up to its end (Content-Length, the last
 * chunk, the close, or, for a streamed reply such as lease keepalive,
 * the first complete JSON object).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>

#include <sodium.h>

#include "etcd.h"
#include "tallyd.h"

#define REPLY_MAX	(4u << 20)

int
tallyd_etcd_spec(const char *spec)
{
	return strncmp(spec, "etcd://", 7) == 0;
}

/* One "IP:PORT" of a spec into endpoint i; 0 or -EINVAL. */
static int
parse_ep(struct tallyd_etcd *e, const char *s, size_t len)
{
	char buf[sizeof(e->host[0])], *colon, *end;
	struct in_addr a;
	unsigned long p;

	if (len == 0 || len >= sizeof(buf) || e->neps == TALLYD_ETCD_MAX_EPS)
		return -EINVAL;
	memcpy(buf, s, len);
	buf[len] = '\0';
	colon = strrchr(buf, ':');
	if (colon == NULL)
		return -EINVAL;
	*colon = '\0';
	errno = 0;
	p = strtoul(colon + 1, &end, 10);
	if (colon[1] == '\0' || *end != '\0' || errno != 0 || p < 1 ||
			p > 65535 || inet_pton(AF_INET, buf, &a) != 1)
		return -EINVAL;
	snprintf(e->host[e->neps], sizeof(e->host[0]), "%s", buf);
	e->port[e->neps++] = (uint16_t)p;
	return 0;
}

struct tallyd_etcd *
tallyd_etcd_create(const char *spec, unsigned int timeout_ms, char *why,
	size_t wlen)
{
	struct tallyd_etcd *e;
	const char *s;

	if (!tallyd_etcd_spec(spec)) {
		snprintf(why, wlen, "'%s' is not etcd://IP:PORT[,IP:PORT...]",
			spec);
		errno = EINVAL;
		return NULL;
	}
	e = calloc(1, sizeof(*e));
	if (e == NULL) {
		snprintf(why, wlen, "%s", strerror(errno));
		return NULL;
	}
	e->timeout_ms = timeout_ms;
	for (s = spec + 7; ; ) {
		size_t n = strcspn(s, ",");

		if (parse_ep(e, s, n) != 0) {
			snprintf(why, wlen, "etcd endpoint '%.*s' is not "
				"IPv4:PORT (at most %d endpoints)", (int)n, s,
				TALLYD_ETCD_MAX_EPS);
			free(e);
			errno = EINVAL;
			return NULL;
		}
		if (s[n] == '\0')
			break;
		s += n + 1;
	}
	return e;
}

/* Milliseconds left to deadline (monotonic), at least 0. */
static int
left_ms(int64_t deadline)
{
	int64_t l = deadline - tallyd_now_ms();

	return l > 0 ? (int)l : 0;
}

/* Waits for events on fd until deadline: 0, or -ETIMEDOUT. */
static int
wait_fd(int fd, short events, int64_t deadline)
{
	struct pollfd p = { .fd = fd, .events = events };
	int n;

	do
		n = poll(&p, 1, left_ms(deadline));
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	return n == 0 ? -ETIMEDOUT : 0;
}

/* A connected non-blocking socket to endpoint i, or -errno. */
static int
ep_connect(const struct tallyd_etcd *e, unsigned int i, int64_t deadline)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
		.sin_port = htons(e->port[i]) };
	int fd, err = 0, one = 1;
	socklen_t el = sizeof(err);

	inet_pton(AF_INET, e->host[i], &sa.sin_addr);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		if (errno != EINPROGRESS)
			err = errno;
		else if ((err = -wait_fd(fd, POLLOUT, deadline)) == 0 &&
				getsockopt(fd, SOL_SOCKET, SO_ERROR, &err,
					&el) != 0)
			err = errno;
	}
	if (err != 0) {
		close(fd);
		return -err;
	}
	return fd;
}

/* Sends all of buf before deadline: 0 or -errno. */
static int
send_all(int fd, const char *buf, size_t len, int64_t deadline)
{
	while (len > 0) {
		ssize_t n = send(fd, buf, len, MSG_NOSIGNAL);

		if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
			int ret = wait_fd(fd, POLLOUT, deadline);

			if (ret != 0)
				return ret;
			continue;
		}
		if (n < 0)
			return -errno;
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

/*
 * Decodes a chunked body in place (body..end); returns its length, and
 * sets *done once the last (empty) chunk is in. Incomplete chunks stop
 * the decoding; what came before them is kept.
 */
static size_t
dechunk(const char *body, size_t len, char *out, int *done)
{
	size_t i = 0, o = 0;

	*done = 0;
	while (i < len) {
		char *end;
		unsigned long n = strtoul(body + i, &end, 16);
		const char *crlf = memchr(body + i, '\n', len - i);

		if (crlf == NULL || end == body + i)
			break;
		i = (size_t)(crlf - body) + 1;
		if (n == 0) {
			*done = 1;
			break;
		}
		if (n > len - i)
			n = len - i;
		memcpy(out + o, body + i, n);
		o += n;
		i += n;
		if (i + 2 > len)
			break;
		i += 2;
	}
	out[o] = '\0';
	return o;
}

/* What a reply buffer holds so far. */
struct reply {
	char *buf;
	size_t len, cap;
	int status;		/* HTTP status, 0 until the head is in */
	size_t head;		/* the body's offset */
	long clen;		/* Content-Length, -1: none */
	int chunked;
};

/* Parses the head once it is complete; -EPROTO if it is not HTTP. */
static int
parse_head(struct reply *r)
{
	char *end = strstr(r->buf, "\r\n\r\n"), *h;

	if (end == NULL)
		return 0;
	if (sscanf(r->buf, "HTTP/1.%*d %d", &r->status) != 1)
		return -EPROTO;
	r->head = (size_t)(end - r->buf) + 4;
	r->clen = -1;
	for (h = strstr(r->buf, "\r\n"); h != NULL && h < end;
			h = strstr(h + 2, "\r\n")) {
		if (strncasecmp(h + 2, "Content-Length:", 15) == 0)
			r->clen = strtol(h + 17, NULL, 10);
		if (strncasecmp(h + 2, "Transfer-Encoding:", 18) == 0 &&
				strstr(h + 19, "chunked") != NULL &&
				strstr(h + 19, "chunked") < end)
			r->chunked = 1;
	}
	return 0;
}

/*
 * Whether the reply is complete enough to use: its body's JSON (the
 * first object of a stream) into *o when it is. eof: the peer closed.
 */
static int
reply_done(struct reply *r, int eof, json_t **o)
{
	char *body, *text;
	size_t blen;
	int last = eof;

	if (r->status == 0)
		return 0;
	body = r->buf + r->head;
	blen = r->len - r->head;
	if (r->clen >= 0 && blen < (size_t)r->clen && !eof)
		return 0;
	text = malloc(blen + 1);
	if (text == NULL)
		return -ENOMEM;
	if (r->chunked) {
		int done;

		blen = dechunk(body, blen, text, &done);
		last |= done;
	} else {
		memcpy(text, body, blen);
		text[blen] = '\0';
		last |= r->clen >= 0;
	}
	*o = json_loadb(text, blen, JSON_DISABLE_EOF_CHECK, NULL);
	free(text);
	if (*o != NULL || last)
		return 1;
	return 0;
}

/* Reads the reply to a sent request until it is usable or deadline. */
static int
read_reply(int fd, int64_t deadline, json_t **o, int *status)
{
	struct reply r = { .cap = 4096 };
	int ret = 0;

	r.buf = malloc(r.cap);
	if (r.buf == NULL)
		return -ENOMEM;
	*o = NULL;
	for (;;) {
		ssize_t n;

		if (r.len + 1 == r.cap) {
			char *nb = r.cap < REPLY_MAX ? realloc(r.buf,
				r.cap * 2) : NULL;

			if (nb == NULL) {
				ret = -EMSGSIZE;
				break;
			}
			r.buf = nb;
			r.cap *= 2;
		}
		n = recv(fd, r.buf + r.len, r.cap - r.len - 1, 0);
		if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
			if ((ret = wait_fd(fd, POLLIN, deadline)) != 0)
				break;
			continue;
		}
		if (n < 0) {
			ret = -errno;
			break;
		}
		r.len += (size_t)n;
		r.buf[r.len] = '\0';
		if (r.status == 0 && (ret = parse_head(&r)) != 0)
			break;
		ret = reply_done(&r, n == 0, o);
		if (ret != 0 || n == 0)
			break;
	}
	free(r.buf);
	*status = r.status;
	if (ret == 1 && *o == NULL)
		return -EPROTO;
	if (ret == 0 && *o == NULL)
		return -EPROTO;		/* closed before a reply */
	return ret < 0 ? ret : 0;
}

/* One exchange with endpoint i; see tallyd_etcd_post(). */
static int
exchange(struct tallyd_etcd *e, unsigned int i, const char *path,
	const char *body, int64_t deadline, json_t **rep, int *status)
{
	char head[256];
	int fd, ret;

	fd = ep_connect(e, i, deadline);
	if (fd < 0)
		return fd;
	snprintf(head, sizeof(head), "POST %s HTTP/1.1\r\nHost: %s:%u\r\n"
		"Content-Type: application/json\r\nContent-Length: %zu\r\n"
		"Connection: close\r\n\r\n", path, e->host[i], e->port[i],
		strlen(body));
	ret = send_all(fd, head, strlen(head), deadline);
	if (ret == 0)
		ret = send_all(fd, body, strlen(body), deadline);
	if (ret == 0)
		ret = read_reply(fd, deadline, rep, status);
	close(fd);
	return ret;
}

/* The reply's own error (HTTP status not 200): -EIO with its message. */
static int
http_error(struct tallyd_etcd *e, unsigned int i, json_t *o, int status)
{
	const char *msg = json_string_value(json_object_get(o, "message"));

	if (msg == NULL)
		msg = json_string_value(json_object_get(o, "error"));
	snprintf(e->error, sizeof(e->error), "etcd %s:%u: HTTP %d: %.160s",
		e->host[i], e->port[i], status, msg != NULL ? msg : "?");
	json_decref(o);
	return -EIO;
}

int
tallyd_etcd_post(struct tallyd_etcd *e, const char *path, json_t *req,
	json_t **rep)
{
	/* While etcd does not answer, a short deadline: a probe. */
	int64_t deadline = tallyd_now_ms() + (e->failing ?
		TALLYD_ETCD_PROBE_MS : e->timeout_ms);
	char *body = req != NULL ? json_dumps(req, JSON_COMPACT) : NULL;
	int ret = -EHOSTUNREACH, status = 0;

	json_decref(req);
	*rep = NULL;
	e->st.requests++;
	if (body == NULL) {
		e->st.failures++;
		snprintf(e->error, sizeof(e->error), "etcd: out of memory");
		return -ENOMEM;
	}
	for (unsigned int k = 0; k < e->neps && left_ms(deadline) > 0; k++) {
		unsigned int i = (e->cur + k) % e->neps;
		json_t *o = NULL, *res;

		ret = exchange(e, i, path, body, deadline, &o, &status);
		if (ret == 0 && status != 200)
			ret = http_error(e, i, o, status);
		if (ret == 0) {
			e->cur = i;
			e->failing = 0;
			res = json_object_get(o, "result");
			*rep = json_is_object(res) ? json_incref(res) : o;
			if (*rep != o)
				json_decref(o);
			free(body);
			return 0;
		}
		if (ret != -EIO)
			snprintf(e->error, sizeof(e->error), "etcd %s:%u: %s",
				e->host[i], e->port[i], strerror(-ret));
	}
	if (left_ms(deadline) == 0 && ret != -EIO) {
		ret = -ETIMEDOUT;
		e->st.timeouts++;
	}
	e->failing = ret != -EIO;
	e->st.failures++;
	free(body);
	return ret;
}

json_t *
tallyd_etcd_b64(const void *s, size_t len)
{
	size_t n = sodium_base64_encoded_len(len,
		sodium_base64_VARIANT_ORIGINAL);
	char *out = malloc(n);
	json_t *v;

	if (out == NULL)
		return NULL;
	sodium_bin2base64(out, n, s, len, sodium_base64_VARIANT_ORIGINAL);
	v = json_string(out);
	free(out);
	return v;
}

char *
tallyd_etcd_unb64(json_t *v, size_t *len)
{
	const char *s = json_string_value(v);
	size_t n = s != NULL ? strlen(s) : 0;
	char *out = s != NULL ? malloc(n + 1) : NULL;

	if (out == NULL)
		return NULL;
	if (sodium_base642bin((unsigned char *)out, n, s, n, NULL, len, NULL,
			sodium_base64_VARIANT_ORIGINAL) != 0) {
		free(out);
		return NULL;
	}
	out[*len] = '\0';
	return out;
}

int64_t
tallyd_etcd_int(json_t *v)
{
	if (json_is_integer(v))
		return json_integer_value(v);
	if (json_is_string(v))
		return strtoll(json_string_value(v), NULL, 10);
	return 0;
}

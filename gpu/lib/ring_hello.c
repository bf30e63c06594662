/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The ring fallback's connections (ring.h): the listener, the two TCP
 * connections of a member (to rank + 1, from rank - 1) and the hello
 * that proves each end holds the ring's key. docs/protocol.md, "Ring
 * fallback", draws the messages.
 *
 * The hello runs in four steps, each of which waits only on a
 * neighbour's earlier step, so no cycle around the ring can stall it:
 * 1. connect to rank + 1 and send HELLO (world, from, to, a nonce);
 * 2. accept rank - 1's HELLO, check it, answer CHALLENGE (a nonce of
 *    our own and an HMAC over both: we hold the key);
 * 3. read rank + 1's CHALLENGE, check its HMAC, answer PROOF (an HMAC
 *    the other way: we hold it too);
 * 4. read rank - 1's PROOF and check it.
 * A connection that fails step 2 or 4 is refused (counted, closed) and
 * the next one accepted, until the deadline.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/random.h>
#include <sys/socket.h>

#include <gnutls/gnutls.h>
#include <gnutls/crypto.h>

#include "chan.h"
#include "ring_int.h"

#define HELLO_LEN	28
#define CHAL_LEN	56
#define PROOF_LEN	40
#define MAC_LEN		32
#define NONCE_LEN	16
#define RETRY_MS	20
#define HELLO_MS	2000	/* a connection's HELLO, at most: the right
				 * peer sends it as it connects */

enum { T_HELLO = 1, T_CHAL = 2, T_PROOF = 3 };

struct tally_ring *
tally_ring_listen(uint32_t ip, uint16_t port, char *why, size_t wlen)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = ip,
		.sin_port = port };
	struct tally_ring *g = calloc(1, sizeof(*g));
	socklen_t len = sizeof(sa);
	int one = 1, err;

	if (g == NULL)
		return NULL;
	g->lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
		0);
	g->left = g->right = -1;
	if (g->lfd < 0 || setsockopt(g->lfd, SOL_SOCKET, SO_REUSEADDR, &one,
			sizeof(one)) != 0 ||
			bind(g->lfd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
			listen(g->lfd, 16) != 0 ||
			getsockname(g->lfd, (struct sockaddr *)&sa, &len) != 0) {
		err = errno;
		snprintf(why, wlen, "ring listener on %s:%u: %s",
			inet_ntoa(sa.sin_addr), ntohs(port), strerror(err));
		tally_ring_destroy(g);
		errno = err;
		return NULL;
	}
	g->ip = sa.sin_addr.s_addr;
	g->port = sa.sin_port;
	return g;
}

void
tally_ring_local(const struct tally_ring *g, uint32_t *ip, uint16_t *port)
{
	*ip = g->ip;
	*port = g->port;
}

void
tally_ring_destroy(struct tally_ring *g)
{
	if (g == NULL)
		return;
	tally_ring_close_data(g);
	if (g->lfd >= 0)
		close(g->lfd);
	free(g->scratch);
	explicit_bzero(g->key, sizeof(g->key));
	free(g);
}

void
tally_ring_close_data(struct tally_ring *g)
{
	if (g->left >= 0)
		close(g->left);
	if (g->right >= 0 && g->right != g->left)
		close(g->right);
	g->left = g->right = -1;
}

void
tally_ring_key(const uint8_t token[32], const char *job, uint32_t epoch,
	uint8_t key[TALLY_RING_KEY_LEN])
{
	uint8_t msg[16 + 64 + 4];
	size_t jl = strnlen(job, 63), len = 0;

	memcpy(msg, "tally-ring-v1", 13);
	len = 13;
	memcpy(msg + len, job, jl);
	len += jl;
	msg[len++] = 0;
	msg[len++] = (uint8_t)(epoch >> 24);
	msg[len++] = (uint8_t)(epoch >> 16);
	msg[len++] = (uint8_t)(epoch >> 8);
	msg[len++] = (uint8_t)epoch;
	(void)gnutls_hmac_fast(GNUTLS_MAC_SHA256, token, 32, msg, len, key);
}

/* mac = HMAC(key, dir hello nonce_s): who proves what to whom. */
static void
hello_mac(const struct tally_ring *g, char dir, const uint8_t *hello,
	const uint8_t *nonce_s, uint8_t mac[MAC_LEN])
{
	uint8_t msg[1 + HELLO_LEN + NONCE_LEN];

	msg[0] = (uint8_t)dir;
	memcpy(msg + 1, hello, HELLO_LEN);
	memcpy(msg + 1 + HELLO_LEN, nonce_s, NONCE_LEN);
	(void)gnutls_hmac_fast(GNUTLS_MAC_SHA256, g->key, sizeof(g->key), msg,
		sizeof(msg), mac);
}

/* Constant-time comparison of two MACs: 1 when equal. */
static int
mac_eq(const uint8_t *a, const uint8_t *b)
{
	uint8_t d = 0;

	for (unsigned int i = 0; i < MAC_LEN; i++)
		d |= a[i] ^ b[i];
	return d == 0;
}

/* The head of every hello message: magic, version, type. */
static void
put_head(uint8_t *b, unsigned int type)
{
	memcpy(b, TALLY_RING_MAGIC, 4);
	b[4] = TALLY_RING_VERSION;
	b[5] = (uint8_t)type;
	b[6] = b[7] = 0;
}

static int
head_ok(const uint8_t *b, unsigned int type)
{
	return memcmp(b, TALLY_RING_MAGIC, 4) == 0 &&
		b[4] == TALLY_RING_VERSION && b[5] == type;
}

/*
 * Exactly n bytes to or from fd (non-blocking) before deadline. Returns
 * 0, -ETIMEDOUT, -ECONNRESET (closed) or -errno.
 */
int
tally_ring_io(int fd, void *buf, size_t n, int out, int64_t deadline)
{
	size_t done = 0;

	while (done < n) {
		struct pollfd p = { .fd = fd, .events = out ? POLLOUT : POLLIN };
		int64_t left = deadline - tally_chan_now_ms();
		ssize_t k;

		if (left <= 0)
			return -ETIMEDOUT;
		if (poll(&p, 1, (int)left) < 0 && errno != EINTR)
			return -errno;
		k = out ? send(fd, (uint8_t *)buf + done, n - done,
				MSG_NOSIGNAL | MSG_DONTWAIT) :
			recv(fd, (uint8_t *)buf + done, n - done, MSG_DONTWAIT);
		if (k == 0 && !out)
			return -ECONNRESET;
		if (k < 0 && errno != EAGAIN && errno != EINTR)
			return -errno;
		if (k > 0)
			done += (size_t)k;
	}
	return 0;
}

/*
 * Step 1: a connection to ip:port, retried while refused (the peer may
 * not listen yet), then HELLO. Returns the fd or -errno.
 */
static int
connect_right(struct tally_ring *g, uint32_t ip, uint16_t port,
	int64_t deadline, uint8_t *hello, char *why, size_t wlen)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = ip,
		.sin_port = port };
	int fd, rc, one = 1;

	for (;;) {
		fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
			0);
		if (fd < 0)
			return -errno;
		rc = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 ? 0 :
			-errno;
		if (rc == -EINPROGRESS) {
			struct pollfd p = { .fd = fd, .events = POLLOUT };
			socklen_t len = sizeof(rc);
			int64_t left = deadline - tally_chan_now_ms();

			rc = poll(&p, 1, left > 0 ? (int)left : 0) != 1 ?
				-ETIMEDOUT : 0;
			if (rc == 0 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &rc,
					&len) == 0)
				rc = -rc;
		}
		if (rc == 0)
			break;
		close(fd);
		if (tally_chan_now_ms() + RETRY_MS >= deadline ||
				(rc != -ECONNREFUSED && rc != -ETIMEDOUT))
			goto fail;
		poll(NULL, 0, RETRY_MS);
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if ((rc = tally_ring_io(fd, hello, HELLO_LEN, 1, deadline)) == 0)
		return fd;
	close(fd);
fail:
	snprintf(why, wlen, "ring: cannot reach rank %u at %s:%u: %s",
		g->right_rank, inet_ntoa(sa.sin_addr), ntohs(port),
		strerror(-rc));
	return rc;
}

/* Counts and notes a refused connection (the ring goes on waiting). */
static void
refuse(struct tally_ring *g, int fd, const char *what)
{
	g->st.refused++;
	snprintf(g->refused_why, sizeof(g->refused_why), "%s", what);
	close(fd);
}

/*
 * Step 2: accepts connections until one sends a HELLO from rank - 1 to
 * us in our world, and answers it with CHALLENGE; the HELLO and our
 * nonce go to hello and nonce (for step 4). Returns the fd or -errno.
 */
static int
accept_left(struct tally_ring *g, int64_t deadline, uint8_t *hello,
	uint8_t *nonce)
{
	for (;;) {
		uint8_t chal[CHAL_LEN];
		struct pollfd p = { .fd = g->lfd, .events = POLLIN };
		int64_t left = deadline - tally_chan_now_ms();
		int fd, rc;

		if (left <= 0 || poll(&p, 1, (int)left) == 0)
			return -ETIMEDOUT;
		fd = accept4(g->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0)
			continue;
		left = tally_chan_now_ms() + HELLO_MS;
		rc = tally_ring_io(fd, hello, HELLO_LEN, 0, left < deadline ?
			left : deadline);
		if (rc != 0 || !head_ok(hello, T_HELLO) ||
				hello[8] != g->world || hello[9] != g->left_rank ||
				hello[10] != g->rank) {
			refuse(g, fd, rc != 0 ? "no hello in time" : "a hello "
				"of another ring, world or rank");
			continue;
		}
		put_head(chal, T_CHAL);
		if (getrandom(chal + 8, NONCE_LEN, 0) != NONCE_LEN) {
			close(fd);
			return -EIO;
		}
		memcpy(nonce, chal + 8, NONCE_LEN);
		hello_mac(g, 'S', hello, nonce, chal + 8 + NONCE_LEN);
		if (tally_ring_io(fd, chal, CHAL_LEN, 1, deadline) != 0) {
			refuse(g, fd, "the challenge could not be sent");
			continue;
		}
		return fd;
	}
}

/* Step 4: rank - 1's PROOF on fd for hello and nonce. 1 when right. */
static int
proof_ok(struct tally_ring *g, int fd, const uint8_t *hello,
	const uint8_t *nonce, int64_t deadline)
{
	uint8_t proof[PROOF_LEN], mac[MAC_LEN];

	if (tally_ring_io(fd, proof, PROOF_LEN, 0, deadline) != 0) {
		refuse(g, fd, "no proof in time");
		return 0;
	}
	hello_mac(g, 'C', hello, nonce, mac);
	if (!head_ok(proof, T_PROOF) || !mac_eq(proof + 8, mac)) {
		refuse(g, fd, "a proof that does not verify (another job, "
			"token or membership)");
		return 0;
	}
	return 1;
}

/* Step 3: rank + 1's CHALLENGE checked, our PROOF sent. 0 or -errno. */
static int
prove_right(struct tally_ring *g, const uint8_t *hello, int64_t deadline,
	char *why, size_t wlen)
{
	uint8_t chal[CHAL_LEN], proof[PROOF_LEN], mac[MAC_LEN];
	int rc = tally_ring_io(g->right, chal, CHAL_LEN, 0, deadline);

	if (rc != 0) {
		snprintf(why, wlen, "ring: rank %u did not answer the hello: "
			"%s (it refused us: another job, token or membership?)",
			g->right_rank, strerror(-rc));
		return rc;
	}
	hello_mac(g, 'S', hello, chal + 8, mac);
	if (!head_ok(chal, T_CHAL) || !mac_eq(chal + 8 + NONCE_LEN, mac)) {
		g->st.refused++;
		snprintf(why, wlen, "ring: rank %u's challenge does not verify "
			"(another job, token or membership)", g->right_rank);
		return -EACCES;
	}
	put_head(proof, T_PROOF);
	hello_mac(g, 'C', hello, chal + 8, proof + 8);
	return tally_ring_io(g->right, proof, PROOF_LEN, 1, deadline);
}

int
tally_ring_connect(struct tally_ring *g, const uint32_t *peer_ip,
	const uint16_t *peer_port, unsigned int rank, unsigned int world,
	const uint8_t *key, int64_t deadline, char *why, size_t wlen)
{
	uint8_t hello[HELLO_LEN] = { 0 };
	int rc, fd;

	g->rank = rank;
	g->world = world;
	g->right_rank = (rank + 1) % world;
	g->left_rank = (rank + world - 1) % world;
	memcpy(g->key, key, sizeof(g->key));
	if (world == 1)
		return 0;
	put_head(hello, T_HELLO);
	hello[8] = (uint8_t)world;
	hello[9] = (uint8_t)rank;
	hello[10] = (uint8_t)g->right_rank;
	if (getrandom(hello + 12, NONCE_LEN, 0) != NONCE_LEN)
		return -EIO;
	fd = connect_right(g, peer_ip[g->right_rank], peer_port[g->right_rank],
		deadline, hello, why, wlen);
	if (fd < 0)
		return fd;
	g->right = fd;
	for (int proved = 0;;) {
		uint8_t lhello[HELLO_LEN], nonce[NONCE_LEN];

		if ((fd = accept_left(g, deadline, lhello, nonce)) < 0) {
			snprintf(why, wlen, "ring: rank %u did not join in "
				"time%s%s", g->left_rank, g->st.refused ?
				"; refused: " : "", g->refused_why);
			tally_ring_close_data(g);
			return fd;
		}
		if (!proved && (rc = prove_right(g, hello, deadline, why,
				wlen)) != 0) {
			close(fd);
			tally_ring_close_data(g);
			return rc;
		}
		proved = 1;
		if (proof_ok(g, fd, lhello, nonce, deadline))
			break;
	}
	g->left = fd;
	return 0;
}

/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The test aggregator of loopagg.h: one thread polls the sockets of the
 * port range, hands every datagram to tally_agg_process(), and sends what
 * the verdict says from the socket the datagram came in on. Results are
 * copied into an outgoing batch (the engine's payload is borrowed from
 * the slot) and sent with sendmmsg().
 */
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "loopagg.h"

#define MAX_PORTS	16
#define BURST		32
#define OUT_MAX		64
#define PKT_ROOM	(TALLY_HDR_LEN + 4 * TALLY_MAX_ELEMS + TALLY_TAG_LEN)
#define POLL_MS		10

struct out_pkt {
	struct sockaddr_in to;
	uint32_t len;
	uint8_t buf[PKT_ROOM];
};

struct loopagg {
	struct loopagg_conf conf;
	struct tally_job *job;
	struct tally_jobtab *tab;
	int fds[MAX_PORTS];
	uint16_t port;
	pthread_t thread;
	atomic_int stop;
	uint64_t rng;
	/* Where each rank's packets come from; learned. */
	struct sockaddr_in peer[TALLY_MAX_WORKERS];
	uint8_t known[TALLY_MAX_WORKERS];
	struct loopagg_stats st;
	uint8_t (*rxbuf)[PKT_ROOM];	/* [BURST] */
	struct out_pkt *out;		/* [OUT_MAX] */
	unsigned int nout;
	struct out_pkt *old;		/* [LOOPAGG_OLD]: results sent */
	unsigned int nold;		/* results ever kept there */
};

/* xorshift64*: a fixed sequence of draws for a seed. */
static double
draw(struct loopagg *a)
{
	a->rng ^= a->rng >> 12;
	a->rng ^= a->rng << 25;
	a->rng ^= a->rng >> 27;
	return (double)((a->rng * UINT64_C(2685821657736338717)) >> 11) *
		(1.0 / 9007199254740992.0);
}

static void
flush(struct loopagg *a, int fd)
{
	struct mmsghdr msgs[OUT_MAX];
	struct iovec iov[OUT_MAX];
	unsigned int i, done = 0;

	memset(msgs, 0, sizeof(msgs[0]) * a->nout);
	for (i = 0; i < a->nout; i++) {
		iov[i].iov_base = a->out[i].buf;
		iov[i].iov_len = a->out[i].len;
		msgs[i].msg_hdr.msg_iov = &iov[i];
		msgs[i].msg_hdr.msg_iovlen = 1;
		msgs[i].msg_hdr.msg_name = &a->out[i].to;
		msgs[i].msg_hdr.msg_namelen = sizeof(a->out[i].to);
	}
	while (done < a->nout) {
		int rc = sendmmsg(fd, msgs + done, a->nout - done, 0);

		if (rc <= 0) {
			done++;		/* lost, like on a wire */
			continue;
		}
		done += (unsigned int)rc;
		a->st.tx += (unsigned int)rc;
	}
	a->nout = 0;
}

/*
 * Keeps the result just queued at o (NULL: none) for later replays;
 * then, with the replay draw, queues one of the old results kept, to to.
 */
static void
replay_old(struct loopagg *a, int fd, const struct sockaddr_in *to,
	const struct out_pkt *o)
{
	struct out_pkt *r;

	if (a->conf.replay <= 0)
		return;
	if (o != NULL)
		a->old[a->nold++ % LOOPAGG_OLD] = *o;
	if (a->nold > 0 && draw(a) < a->conf.replay) {
		unsigned int n = a->nold < LOOPAGG_OLD ? a->nold : LOOPAGG_OLD;

		r = &a->out[a->nout++];
		*r = a->old[(unsigned int)(draw(a) * n) % n];
		r->to = *to;
		a->st.replayed++;
		if (a->nout == OUT_MAX)
			flush(a, fd);
	}
}

/*
 * Adds the DONE hdr (+ tag, unless NULL) to the datagram last queued to
 * to, when that is a DONE or a bundle of them with room, as tally-dp
 * bundles a member's DONEs (docs/protocol.md, "Bundles"). Returns that
 * datagram, or NULL.
 */
static struct out_pkt *
join_done(struct loopagg *a, const struct sockaddr_in *to,
	const struct tally_hdr *hdr, const uint8_t *tag)
{
	uint32_t stride = TALLY_HDR_LEN + (tag != NULL ? TALLY_TAG_LEN : 0);

	for (unsigned int i = a->nout; i-- > 0;) {
		struct out_pkt *o = &a->out[i];

		if (o->to.sin_addr.s_addr != to->sin_addr.s_addr ||
				o->to.sin_port != to->sin_port)
			continue;
		if (o->buf[3] != TALLY_PT_DONE ||
				tally_bundle_stride(o->buf) != stride ||
				o->len % stride != 0 ||
				o->len + stride > TALLY_BUNDLE_MAX * stride)
			return NULL;
		tally_hdr_encode(hdr, o->buf + o->len);
		if (tag != NULL)
			memcpy(o->buf + o->len + TALLY_HDR_LEN, tag,
				TALLY_TAG_LEN);
		o->len += stride;
		a->st.done_bundled++;
		return o;
	}
	return NULL;
}

/*
 * Queues hdr + payload (+ tag, unless NULL) to to, with the loss,
 * duplication and replay draws; a DONE joins a bundle when it can.
 */
static void
emit(struct loopagg *a, int fd, const struct sockaddr_in *to,
	const struct tally_hdr *hdr, const void *payload, uint16_t plen,
	const uint8_t *tag)
{
	const struct out_pkt *last = NULL;
	int copies = 1, i;

	if (a->conf.loss_down > 0 && draw(a) < a->conf.loss_down) {
		a->st.lost_down++;
		replay_old(a, fd, to, NULL);
		return;
	}
	if (a->conf.dup > 0 && draw(a) < a->conf.dup) {
		a->st.duplicated++;
		copies = 2;
	}
	for (i = 0; i < copies; i++) {
		struct out_pkt *o;

		if (hdr->type == TALLY_PT_DONE &&
				(o = join_done(a, to, hdr, tag)) != NULL) {
			last = o;
			continue;
		}
		o = &a->out[a->nout++];
		o->to = *to;
		tally_hdr_encode(hdr, o->buf);
		if (plen > 0)
			memcpy(o->buf + TALLY_HDR_LEN, payload, plen);
		o->len = TALLY_HDR_LEN + plen;
		if (tag != NULL) {
			memcpy(o->buf + o->len, tag, TALLY_TAG_LEN);
			o->len += TALLY_TAG_LEN;
		}
		last = o;	/* its bytes stay until the next emit */
		if (a->nout == OUT_MAX)
			flush(a, fd);
	}
	replay_old(a, fd, to, hdr->type == TALLY_PT_NACK ? NULL : last);
}

/*
 * With the forge draw: after the result v to rank r, a copy of it with a
 * payload bit flipped, carrying the result's tag (or none): what someone
 * who saw the result could make of it without the keys.
 */
static void
forge(struct loopagg *a, int fd, unsigned int r, const struct tally_verdict *v)
{
	struct out_pkt *o;

	if (a->conf.forge <= 0 || draw(a) >= a->conf.forge)
		return;
	if (a->nout + 1 > OUT_MAX)
		flush(a, fd);
	o = &a->out[a->nout++];
	o->to = a->peer[r];
	tally_hdr_encode(&v->hdr, o->buf);
	memcpy(o->buf + TALLY_HDR_LEN, v->payload, v->payload_len);
	o->len = TALLY_HDR_LEN + v->payload_len;
	if (v->payload_len > 0)
		o->buf[TALLY_HDR_LEN] ^= 1;
	else
		o->buf[31] ^= 1;	/* next_block */
	if (v->tagged) {
		memcpy(o->buf + o->len, v->tag, TALLY_TAG_LEN);
		o->len += TALLY_TAG_LEN;
	}
	a->st.forged++;
	if (a->nout == OUT_MAX)
		flush(a, fd);
}

/*
 * With the forge draw: a NACK (early) of the contribution pkt (len
 * bytes) just taken from to, echoing its header and carrying its tag
 * (or none): what someone who saw the packet could send its sender.
 */
static void
forge_nack(struct loopagg *a, int fd, const struct sockaddr_in *to,
	const uint8_t *pkt, unsigned int len)
{
	struct out_pkt *o;
	struct tally_hdr h;

	if (a->conf.forge <= 0 || draw(a) >= a->conf.forge ||
			tally_hdr_decode(pkt, len, &h) != TALLY_ST_OK)
		return;
	if (a->nout == OUT_MAX)
		flush(a, fd);
	h.type = TALLY_PT_NACK;
	h.status = TALLY_ST_EARLY;
	h.flags &= TALLY_F_SET | TALLY_F_LAST | TALLY_F_AUTH;
	o = &a->out[a->nout++];
	o->to = *to;
	tally_hdr_encode(&h, o->buf);
	o->len = TALLY_HDR_LEN;
	if (h.flags & TALLY_F_AUTH) {
		memcpy(o->buf + o->len, pkt + len - TALLY_TAG_LEN,
			TALLY_TAG_LEN);
		o->len += TALLY_TAG_LEN;
	}
	a->st.forged++;
	if (a->nout == OUT_MAX)
		flush(a, fd);
}

/* One packet (alone, or one of a bundle's) from 'from' on socket fd. */
static void
contribution(struct loopagg *a, int fd, const uint8_t *pkt, unsigned int len,
	const struct sockaddr_in *from)
{
	struct tally_addr src = {
		.ip = from->sin_addr.s_addr, .port = from->sin_port,
	};
	struct tally_verdict v, g;
	enum tally_verdict_kind k;
	unsigned int r;

	k = tally_agg_process(a->tab, &a->st.agg, pkt, len, &src, &v);
	/* The sender's frames before this one were lost: a NACK gap. */
	if (v.gap_n != 0 && tally_agg_gap(&v, pkt, len, &g) == TALLY_V_NACK)
		emit(a, fd, from, &g.hdr, NULL, 0, g.tagged ? g.tag : NULL);
	switch (k) {
	case TALLY_V_DROP:
		return;
	case TALLY_V_TAKEN:
		forge_nack(a, fd, from, pkt, len);
		break;
	case TALLY_V_COMPLETE:
		a->peer[v.rank] = *from;
		a->known[v.rank] = 1;
		for (r = 0; r < a->conf.world; r++) {
			if (!a->known[r])
				continue;
			/* A round with an owner: the data, or a DONE. */
			if (v.part && !(v.data_mask >> r & 1)) {
				emit(a, fd, &a->peer[r], &v.done, NULL, 0,
					v.tagged ? v.done_tag : NULL);
				continue;
			}
			emit(a, fd, &a->peer[r], &v.hdr, v.payload,
				v.payload_len, v.tagged ? v.tag : NULL);
			forge(a, fd, r, &v);
		}
		return;
	case TALLY_V_RESEND:
		emit(a, fd, from, &v.hdr, v.payload, v.payload_len,
			v.tagged ? v.tag : NULL);
		break;
	case TALLY_V_NACK:
		emit(a, fd, from, &v.hdr, NULL, 0, v.tagged ? v.tag : NULL);
		break;
	case TALLY_V_UPSTREAM:	/* loopagg's jobs have no spine */
		return;
	}
	a->peer[v.rank] = *from;
	a->known[v.rank] = 1;
}

/*
 * One datagram from 'from' on socket fd: a packet, or a bundle of them
 * (docs/protocol.md, "Bundles"), lost or taken whole.
 */
static void
handle(struct loopagg *a, int fd, const uint8_t *pkt, unsigned int len,
	const struct sockaddr_in *from)
{
	unsigned int k = tally_bundle_count(pkt, len);
	size_t stride = k > 1 ? tally_bundle_stride(pkt) : 0;

	a->st.rx++;
	if (a->conf.loss_up > 0 && draw(a) < a->conf.loss_up) {
		a->st.lost_up++;
		return;
	}
	if (k > 1)
		a->st.bundles++;
	for (unsigned int i = 0; i < k; i++)
		contribution(a, fd, pkt + i * stride,
			k > 1 ? (unsigned int)stride : len, from);
}

/* Takes what socket fd has, a burst at a time, until it has nothing. */
static void
drain(struct loopagg *a, int fd)
{
	struct mmsghdr msgs[BURST];
	struct sockaddr_in from[BURST];
	struct iovec iov[BURST];
	int rc, i;

	for (;;) {
		memset(msgs, 0, sizeof(msgs));
		for (i = 0; i < BURST; i++) {
			iov[i].iov_base = a->rxbuf[i];
			iov[i].iov_len = PKT_ROOM;
			msgs[i].msg_hdr.msg_iov = &iov[i];
			msgs[i].msg_hdr.msg_iovlen = 1;
			msgs[i].msg_hdr.msg_name = &from[i];
			msgs[i].msg_hdr.msg_namelen = sizeof(from[i]);
		}
		rc = recvmmsg(fd, msgs, BURST, MSG_DONTWAIT, NULL);
		if (rc <= 0)
			break;
		for (i = 0; i < rc; i++)
			handle(a, fd, a->rxbuf[i], msgs[i].msg_len, &from[i]);
		flush(a, fd);
		if (rc < BURST)
			break;
	}
}

static void *
serve(void *arg)
{
	struct loopagg *a = arg;
	struct pollfd pfd[MAX_PORTS];
	unsigned int i;

	for (i = 0; i < a->conf.nports; i++)
		pfd[i] = (struct pollfd){ .fd = a->fds[i], .events = POLLIN };
	while (!atomic_load(&a->stop)) {
		if (poll(pfd, a->conf.nports, POLL_MS) <= 0)
			continue;
		for (i = 0; i < a->conf.nports; i++)
			if (pfd[i].revents & POLLIN)
				drain(a, a->fds[i]);
	}
	return NULL;
}

static void
close_ports(struct loopagg *a)
{
	unsigned int i;

	for (i = 0; i < MAX_PORTS; i++) {
		if (a->fds[i] >= 0)
			close(a->fds[i]);
		a->fds[i] = -1;
	}
}

/* Binds nports sockets on base, base + 1, ... of 127.0.0.1. */
static int
bind_ports(struct loopagg *a, uint16_t base)
{
	int big = 4 << 20;
	unsigned int i;

	for (i = 0; i < a->conf.nports; i++) {
		struct sockaddr_in sin = {
			.sin_family = AF_INET,
			.sin_addr.s_addr = htonl(INADDR_LOOPBACK),
			.sin_port = htons((uint16_t)(base + i)),
		};

		a->fds[i] = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
		if (a->fds[i] < 0)
			return -1;
		if (setsockopt(a->fds[i], SOL_SOCKET, SO_RCVBUFFORCE, &big,
				sizeof(big)) != 0)
			(void)setsockopt(a->fds[i], SOL_SOCKET, SO_RCVBUF,
				&big, sizeof(big));
		if (bind(a->fds[i], (struct sockaddr *)&sin, sizeof(sin)) != 0)
			return -1;
	}
	a->port = base;
	return 0;
}

/* Finds a free range of consecutive ports, from a start that varies. */
static int
find_ports(struct loopagg *a)
{
	uint64_t x = (uint64_t)getpid() * 7919u + (uint64_t)time(NULL) +
		a->conf.seed;
	int tries;

	for (tries = 0; tries < 100; tries++) {
		uint16_t base = (uint16_t)(20000 + (x + tries * 613u) % 40000);

		if (bind_ports(a, base) == 0)
			return 0;
		close_ports(a);
	}
	errno = EADDRINUSE;
	return -1;
}

/* Creates the job: members on 127.0.0.1, any port (learned as they come). */
static int
make_job(struct loopagg *a)
{
	struct tally_job_conf jc = {
		.id = a->conf.job,
		.token = a->conf.token,
		.world = a->conf.world,
		.window = a->conf.window,
		.max_elems = a->conf.max_elems,
		.narrow = a->conf.narrow,
		.nports = (uint16_t)a->conf.nports,
	};
	unsigned int r;

	for (r = 0; r < a->conf.world; r++)
		jc.members[r].ip = htonl(INADDR_LOOPBACK);
	if (a->conf.auth != NULL) {
		jc.auth = 1;
		memcpy(jc.key_result, a->conf.auth[0].result, TALLY_KEY_LEN);
		for (r = 0; r < a->conf.world; r++) {
			memcpy(jc.keys[r].up, a->conf.auth[r].up,
				TALLY_KEY_LEN);
			memcpy(jc.keys[r].down, a->conf.auth[r].down,
				TALLY_KEY_LEN);
		}
	}
	a->job = tally_job_create(&jc);
	if (a->job == NULL)
		return -1;
	a->tab = tally_jobtab_create(&a->job, 1);
	return a->tab == NULL ? -1 : 0;
}

static void
free_agg(struct loopagg *a)
{
	close_ports(a);
	tally_jobtab_destroy(a->tab);
	tally_job_destroy(a->job);
	free(a->rxbuf);
	free(a->out);
	free(a->old);
	free(a);
}

struct loopagg *
loopagg_start(const struct loopagg_conf *conf)
{
	struct loopagg *a = calloc(1, sizeof(*a));
	int err;

	if (a == NULL)
		return NULL;
	memset(a->fds, -1, sizeof(a->fds));
	a->conf = *conf;
	if (a->conf.nports == 0)
		a->conf.nports = 1;
	a->rng = conf->seed * 2 + 1;
	a->rxbuf = malloc(sizeof(*a->rxbuf) * BURST);
	a->out = malloc(sizeof(*a->out) * OUT_MAX);
	a->old = conf->replay > 0 ? malloc(sizeof(*a->old) * LOOPAGG_OLD) :
		NULL;
	if (a->conf.nports > MAX_PORTS || a->rxbuf == NULL ||
			a->out == NULL || (conf->replay > 0 && a->old == NULL)) {
		errno = a->conf.nports > MAX_PORTS ? EINVAL : ENOMEM;
		goto err;
	}
	if (make_job(a) != 0 || find_ports(a) != 0)
		goto err;
	err = pthread_create(&a->thread, NULL, serve, a);
	if (err != 0) {
		errno = err;
		goto err;
	}
	return a;
err:
	err = errno;
	free_agg(a);
	errno = err;
	return NULL;
}

uint16_t
loopagg_port(const struct loopagg *a)
{
	return a->port;
}

void
loopagg_stop(struct loopagg *a, struct loopagg_stats *st)
{
	if (a == NULL)
		return;
	atomic_store(&a->stop, 1);
	pthread_join(a->thread, NULL);
	if (st != NULL)
		*st = a->st;
	free_agg(a);
}

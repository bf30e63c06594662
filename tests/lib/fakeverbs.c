/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The fake RDMA device of fakeverbs.h. Objects are heap blocks that
 * embed the verbs structure the transport sees (container_of back);
 * every one counts as live until destroyed, so a test sees a leak as a
 * count and ASan sees it as a leak. The configuration and counters are
 * process-wide, under one lock (ranks run as threads).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fakeverbs.h"

#define CQ_ROOM		8192
#define RQ_ROOM		8192
#define MAX_MR		4
#define GRH		40

#define container_of(p, type, m) \
	((type *)(void *)((char *)(p) - offsetof(type, m)))

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct fakeverbs_conf conf;
static struct fakeverbs_stats stats;
static unsigned int post_recv_calls;
static uint64_t devices_opened;

static struct ibv_device fake_device;	/* only its address matters */

struct fake_dev {
	struct ibv_context ctx;
	uint64_t rng;
	struct ibv_mr *mrs[MAX_MR];
};

struct fake_cq {
	struct ibv_cq cq;
	struct ibv_wc wc[CQ_ROOM];
	uint32_t covers[CQ_ROOM];	/* send WRs a completion frees */
	unsigned int head, tail;	/* pop at head, push at tail */
	struct fake_qp *rq_of;		/* the QP it takes receives of */
	struct fake_qp *sq_of;		/* the QP it takes sends of */
};

struct fake_rwr {
	uint64_t wr_id;
	struct ibv_sge sge;
};

struct fake_qp {
	struct ibv_qp qp;
	struct ibv_qp_cap cap;
	uint32_t qkey;
	int fd;				/* its UDP socket */
	struct fake_rwr rq[RQ_ROOM];
	unsigned int rq_head, rq_n;
	unsigned int sq_used;		/* WRs not yet freed */
	unsigned int unsig_run;		/* unsignalled since the last */
};

static struct fake_dev *
dev_of(struct ibv_context *c)
{
	return container_of(c, struct fake_dev, ctx);
}

/* Counts a control call; 1 when this one is the one to fail. */
static int
fail_now(const char *name)
{
	int fail;

	pthread_mutex_lock(&lock);
	fail = ++stats.calls == conf.fail_at;
	if (fail)
		strncpy(stats.failed, name, sizeof(stats.failed) - 1);
	pthread_mutex_unlock(&lock);
	if (fail)
		errno = conf.fail_errno;
	return fail;
}

static void
live(int d)
{
	pthread_mutex_lock(&lock);
	stats.live += (uint64_t)(int64_t)d;
	pthread_mutex_unlock(&lock);
}

static void *
obj_new(size_t size)
{
	void *p = calloc(1, size);

	if (p != NULL)
		live(1);
	return p;
}

static void
obj_free(void *p)
{
	if (p == NULL)
		return;
	free(p);
	live(-1);
}

void
fakeverbs_reset(const struct fakeverbs_conf *c)
{
	pthread_mutex_lock(&lock);
	conf = *c;
	if (conf.mtu == 0)
		conf.mtu = IBV_MTU_4096;
	stats = (struct fakeverbs_stats){ .live = stats.live };
	post_recv_calls = 0;
	pthread_mutex_unlock(&lock);
}

void
fakeverbs_stats(struct fakeverbs_stats *st)
{
	pthread_mutex_lock(&lock);
	*st = stats;
	pthread_mutex_unlock(&lock);
}

static struct ibv_device **
f_get_device_list(int *n)
{
	struct ibv_device **l;

	if (fail_now("get_device_list"))
		return NULL;
	l = obj_new(2 * sizeof(*l));
	if (l == NULL)
		return NULL;
	l[0] = &fake_device;
	*n = 1;
	return l;
}

static void
f_free_device_list(struct ibv_device **l)
{
	obj_free(l);
}

static const char *
f_get_device_name(struct ibv_device *d)
{
	return d == &fake_device ? "fake0" : "?";
}

/* xorshift64*, per device: the drop draws. */
static double
draw(struct fake_dev *d)
{
	d->rng ^= d->rng >> 12;
	d->rng ^= d->rng << 25;
	d->rng ^= d->rng >> 27;
	return (double)((d->rng * UINT64_C(2685821657736338717)) >> 11) *
		(1.0 / 9007199254740992.0);
}

/* Whether sge lies in a region of d registered with its lkey. */
static int
sge_ok(const struct fake_dev *d, const struct ibv_sge *sge)
{
	for (int i = 0; i < MAX_MR; i++) {
		const struct ibv_mr *mr = d->mrs[i];

		if (mr != NULL && mr->lkey == sge->lkey &&
				sge->addr >= (uintptr_t)mr->addr &&
				sge->addr + sge->length <=
				(uintptr_t)mr->addr + mr->length)
			return 1;
	}
	return 0;
}

/* Pushes wc (freeing covers send WRs when taken) onto cq; 0 or -1. */
static int
cq_push(struct fake_cq *cq, const struct ibv_wc *wc, uint32_t covers)
{
	if (cq->tail - cq->head >= CQ_ROOM)
		return -1;	/* overrun: a real CQ goes to error */
	cq->wc[cq->tail % CQ_ROOM] = *wc;
	cq->covers[cq->tail % CQ_ROOM] = covers;
	cq->tail++;
	return 0;
}

/* Delivers one SEND to the dataplane's socket for its QPN, or drops it. */
static void
deliver(struct fake_qp *q, const struct ibv_send_wr *wr)
{
	struct fake_dev *d = dev_of(q->qp.context);
	uint32_t idx = wr->wr.ud.remote_qpn - conf.qpn_base;
	struct sockaddr_in to = { .sin_family = AF_INET,
		.sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int drop = conf.drop > 0 && draw(d) < conf.drop;

	pthread_mutex_lock(&lock);
	stats.sends++;
	if (wr->wr.ud.remote_qkey != conf.qkey)
		stats.bad_qkey++;
	else if (wr->wr.ud.remote_qpn < conf.qpn_base ||
			idx >= conf.agg_nports)
		stats.bad_qpn++;
	else if (drop)
		stats.dropped++;
	pthread_mutex_unlock(&lock);
	if (wr->wr.ud.remote_qkey != conf.qkey || idx >= conf.agg_nports ||
			wr->wr.ud.remote_qpn < conf.qpn_base || drop ||
			conf.agg_port == 0)
		return;
	to.sin_port = htons((uint16_t)(conf.agg_port + idx));
	if (sendto(q->fd, (void *)(uintptr_t)wr->sg_list[0].addr,
			wr->sg_list[0].length, 0, (struct sockaddr *)&to,
			sizeof(to)) >= 0) {
		pthread_mutex_lock(&lock);
		stats.delivered++;
		pthread_mutex_unlock(&lock);
	}
}

/* The completion of a signalled send: its status by send_err_at. */
static void
send_done(struct fake_qp *q, const struct ibv_send_wr *wr)
{
	struct fake_cq *cq = container_of(q->qp.send_cq, struct fake_cq, cq);
	struct ibv_wc wc = { .wr_id = wr->wr_id, .status = IBV_WC_SUCCESS,
		.opcode = IBV_WC_SEND, .qp_num = q->qp.qp_num };

	pthread_mutex_lock(&lock);
	if (++stats.signalled == conf.send_err_at) {
		wc.status = conf.send_err;
		wc.vendor_err = 0x42;
	}
	pthread_mutex_unlock(&lock);
	(void)cq_push(cq, &wc, q->unsig_run + 1);
	q->unsig_run = 0;
}

/* One SEND work request; 0, or an errno with which post_send refuses it. */
static int
send_one(struct fake_qp *q, const struct ibv_send_wr *wr)
{
	struct fake_dev *d = dev_of(q->qp.context);

	if (q->qp.state != IBV_QPS_RTS)
		return EINVAL;
	if (wr->opcode != IBV_WR_SEND || wr->num_sge != 1 ||
			wr->wr.ud.ah == NULL || wr->wr.ud.ah->pd != q->qp.pd)
		return EINVAL;
	if (q->sq_used >= q->cap.max_send_wr)
		return ENOMEM;		/* the send queue is full */
	q->sq_used++;
	pthread_mutex_lock(&lock);
	if (q->sq_used > stats.max_outstanding)
		stats.max_outstanding = q->sq_used;
	pthread_mutex_unlock(&lock);
	if (sge_ok(d, &wr->sg_list[0]) &&
			wr->sg_list[0].length <= (128u << conf.mtu))
		deliver(q, wr);
	if (wr->send_flags & IBV_SEND_SIGNALED)
		send_done(q, wr);
	else
		q->unsig_run++;
	return 0;
}

static int
f_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr,
	struct ibv_send_wr **bad)
{
	struct fake_qp *q = container_of(qp, struct fake_qp, qp);

	for (; wr != NULL; wr = wr->next) {
		int rc = send_one(q, wr);

		if (rc != 0) {
			*bad = wr;
			return rc;
		}
	}
	return 0;
}

static int
f_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr,
	struct ibv_recv_wr **bad)
{
	struct fake_qp *q = container_of(qp, struct fake_qp, qp);
	int fail;

	pthread_mutex_lock(&lock);
	fail = ++post_recv_calls == conf.fail_post_recv;
	pthread_mutex_unlock(&lock);
	for (; wr != NULL; wr = wr->next) {
		if (fail || qp->state == IBV_QPS_RESET ||
				qp->state == IBV_QPS_ERR || wr->num_sge != 1 ||
				q->rq_n >= q->cap.max_recv_wr) {
			*bad = wr;
			return fail ? ENOMEM : EINVAL;
		}
		q->rq[(q->rq_head + q->rq_n++) % RQ_ROOM] = (struct fake_rwr){
			.wr_id = wr->wr_id, .sge = wr->sg_list[0] };
	}
	return 0;
}

/* The GRH area of a receive from 'from': RoCEv2 over IPv4's. */
static void
grh_fill(uint8_t *g, const struct sockaddr_in *from, size_t len)
{
	uint16_t tot = htons((uint16_t)(20 + 8 + 12 + 8 + len + 4));

	memset(g, 0, GRH);
	if (conf.grh_ib) {
		g[0] = 0x60;	/* IPv6 version */
		g[6] = 0x1b;	/* next header: BTH */
		g[7] = 64;
		g[18] = g[19] = g[34] = g[35] = 0xff;
		memcpy(g + 20, &from->sin_addr.s_addr, 4);
		memcpy(g + 36, &conf.local_ip, 4);
		return;
	}
	g[20] = 0x45;
	memcpy(g + 22, &tot, 2);
	g[28] = 64;		/* TTL */
	g[29] = 17;		/* UDP */
	memcpy(g + 32, &from->sin_addr.s_addr, 4);
	memcpy(g + 36, &conf.local_ip, 4);
}

/* The QPN of the dataplane port a datagram came from, or a stranger's. */
static uint32_t
src_qpn(const struct sockaddr_in *from)
{
	unsigned int p = ntohs(from->sin_port);

	if (p >= conf.agg_port && p < conf.agg_port + conf.agg_nports)
		return conf.qpn_base + (p - conf.agg_port);
	return 0x00abcd00u + (p & 0xff);
}

/* Turns datagrams waiting on q's socket into receive completions. */
static void
fill_rx(struct fake_qp *q, struct fake_cq *cq)
{
	struct fake_dev *d = dev_of(q->qp.context);

	while (q->rq_n > 0 && cq->tail - cq->head < CQ_ROOM) {
		struct fake_rwr *r = &q->rq[q->rq_head % RQ_ROOM];
		uint8_t *buf = (uint8_t *)(uintptr_t)r->sge.addr;
		struct ibv_wc wc = { .wr_id = r->wr_id, .opcode = IBV_WC_RECV,
			.qp_num = q->qp.qp_num, .wc_flags = IBV_WC_GRH };
		struct sockaddr_in from;
		socklen_t fl = sizeof(from);
		ssize_t n;

		if (!sge_ok(d, &r->sge) || r->sge.length < GRH)
			break;	/* a receive the NIC cannot use: none come */
		n = recvfrom(q->fd, buf + GRH, r->sge.length - GRH,
			MSG_DONTWAIT | MSG_TRUNC, (struct sockaddr *)&from, &fl);
		if (n < 0)
			break;
		q->rq_head++;
		q->rq_n--;
		grh_fill(buf, &from, (size_t)n);
		wc.byte_len = (uint32_t)(GRH + n);
		wc.src_qp = src_qpn(&from);
		if ((size_t)n > r->sge.length - GRH)
			wc.status = IBV_WC_LOC_LEN_ERR;
		pthread_mutex_lock(&lock);
		if (++stats.received == conf.recv_err_at)
			wc.status = conf.recv_err;
		pthread_mutex_unlock(&lock);
		(void)cq_push(cq, &wc, 0);
	}
}

static int
f_poll_cq(struct ibv_cq *c, int n, struct ibv_wc *wc)
{
	struct fake_cq *cq = container_of(c, struct fake_cq, cq);
	int k = 0;

	if (cq->rq_of != NULL)
		fill_rx(cq->rq_of, cq);
	while (k < n && cq->head != cq->tail) {
		unsigned int i = cq->head++ % CQ_ROOM;

		wc[k++] = cq->wc[i];
		if (cq->covers[i] > 0 && cq->sq_of != NULL)
			cq->sq_of->sq_used -= cq->covers[i];
	}
	return k;
}

static struct ibv_context *
f_open_device(struct ibv_device *dev)
{
	struct fake_dev *d;

	if (fail_now("open_device"))
		return NULL;
	d = obj_new(sizeof(*d));
	if (d == NULL)
		return NULL;
	d->ctx.device = dev;
	d->ctx.ops.post_send = f_post_send;
	d->ctx.ops.post_recv = f_post_recv;
	d->ctx.ops.poll_cq = f_poll_cq;
	pthread_mutex_lock(&lock);
	d->rng = (conf.seed + ++devices_opened) * 2654435761u | 1;
	pthread_mutex_unlock(&lock);
	return &d->ctx;
}

static int
f_close_device(struct ibv_context *c)
{
	obj_free(dev_of(c));
	return 0;
}

static int
f_query_port(struct ibv_context *c, uint8_t port, struct ibv_port_attr *a)
{
	(void)c;
	if (fail_now("query_port"))
		return errno;
	if (port != 1)
		return EINVAL;
	memset(a, 0, sizeof(*a));
	a->state = conf.port_down ? IBV_PORT_DOWN : IBV_PORT_ACTIVE;
	a->max_mtu = IBV_MTU_4096;
	a->active_mtu = conf.mtu;
	a->gid_tbl_len = 4;
	a->link_layer = IBV_LINK_LAYER_ETHERNET;
	return 0;
}

/*
 * The GID table: 0 the address as RoCEv1, 1 empty, 2 the address as
 * RoCEv2, 3 an IPv6 RoCEv2 GID. The transport must pick 2.
 */
static int
f_query_gid_ex(struct ibv_context *c, uint32_t port, uint32_t index,
	struct ibv_gid_entry *e)
{
	(void)c;
	if (fail_now("query_gid_ex"))
		return errno;
	memset(e, 0, sizeof(*e));
	e->gid_index = index;
	e->port_num = port;
	switch (index) {
	case 0:
	case 2:
		e->gid.raw[10] = 0xff;
		e->gid.raw[11] = 0xff;
		memcpy(e->gid.raw + 12, &conf.local_ip, 4);
		e->gid_type = index == 0 ? IBV_GID_TYPE_ROCE_V1 :
			IBV_GID_TYPE_ROCE_V2;
		return 0;
	case 3:
		e->gid.raw[0] = 0xfe;
		e->gid.raw[1] = 0x80;
		e->gid.raw[15] = 1;
		e->gid_type = IBV_GID_TYPE_ROCE_V2;
		return 0;
	default:
		return ENODATA;
	}
}

static struct ibv_pd *
f_alloc_pd(struct ibv_context *c)
{
	struct ibv_pd *pd;

	if (fail_now("alloc_pd"))
		return NULL;
	pd = obj_new(sizeof(*pd));
	if (pd != NULL)
		pd->context = c;
	return pd;
}

static int
f_dealloc_pd(struct ibv_pd *pd)
{
	obj_free(pd);
	return 0;
}

static struct ibv_mr *
f_reg_mr(struct ibv_pd *pd, void *addr, size_t len, int access)
{
	struct fake_dev *d = dev_of(pd->context);
	struct ibv_mr *mr;

	if (fail_now("reg_mr"))
		return NULL;
	if (!(access & IBV_ACCESS_LOCAL_WRITE)) {
		errno = EINVAL;	/* receives write into it */
		return NULL;
	}
	for (int i = 0; i < MAX_MR; i++) {
		if (d->mrs[i] != NULL)
			continue;
		mr = obj_new(sizeof(*mr));
		if (mr == NULL)
			return NULL;
		*mr = (struct ibv_mr){ .context = pd->context, .pd = pd,
			.addr = addr, .length = len,
			.lkey = 0x5000u + (uint32_t)i * 17u };
		d->mrs[i] = mr;
		return mr;
	}
	errno = ENOMEM;
	return NULL;
}

static int
f_dereg_mr(struct ibv_mr *mr)
{
	struct fake_dev *d = dev_of(mr->context);

	for (int i = 0; i < MAX_MR; i++)
		if (d->mrs[i] == mr)
			d->mrs[i] = NULL;
	obj_free(mr);
	return 0;
}

static struct ibv_cq *
f_create_cq(struct ibv_context *c, int cqe)
{
	struct fake_cq *cq;

	if (fail_now("create_cq"))
		return NULL;
	if (cqe <= 0 || cqe > CQ_ROOM) {
		errno = EINVAL;
		return NULL;
	}
	cq = obj_new(sizeof(*cq));
	if (cq == NULL)
		return NULL;
	cq->cq.context = c;
	cq->cq.cqe = cqe;
	return &cq->cq;
}

static int
f_destroy_cq(struct ibv_cq *c)
{
	obj_free(container_of(c, struct fake_cq, cq));
	return 0;
}

/* A UD QP with its own UDP socket on 127.0.0.1. */
static struct ibv_qp *
f_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *ia)
{
	static uint32_t next_qpn = 0x2000;
	struct fake_qp *q;
	struct sockaddr_in sa = { .sin_family = AF_INET,
		.sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int big = 4 << 20;

	if (fail_now("create_qp"))
		return NULL;
	if (ia->qp_type != IBV_QPT_UD || ia->send_cq == NULL ||
			ia->recv_cq == NULL || ia->cap.max_send_wr == 0 ||
			ia->cap.max_recv_wr > RQ_ROOM ||
			ia->cap.max_send_sge < 1 || ia->cap.max_recv_sge < 1) {
		errno = EINVAL;
		return NULL;
	}
	q = obj_new(sizeof(*q));
	if (q == NULL)
		return NULL;
	q->fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (q->fd < 0 || bind(q->fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		if (q->fd >= 0)
			close(q->fd);
		obj_free(q);
		return NULL;
	}
	(void)setsockopt(q->fd, SOL_SOCKET, SO_RCVBUF, &big, sizeof(big));
	q->cap = ia->cap;
	q->qp = (struct ibv_qp){ .context = pd->context, .pd = pd,
		.send_cq = ia->send_cq, .recv_cq = ia->recv_cq,
		.qp_type = IBV_QPT_UD, .state = IBV_QPS_RESET };
	pthread_mutex_lock(&lock);
	q->qp.qp_num = next_qpn++;
	pthread_mutex_unlock(&lock);
	container_of(ia->recv_cq, struct fake_cq, cq)->rq_of = q;
	container_of(ia->send_cq, struct fake_cq, cq)->sq_of = q;
	return &q->qp;
}

static int
f_destroy_qp(struct ibv_qp *qp)
{
	struct fake_qp *q = container_of(qp, struct fake_qp, qp);

	container_of(qp->recv_cq, struct fake_cq, cq)->rq_of = NULL;
	container_of(qp->send_cq, struct fake_cq, cq)->sq_of = NULL;
	close(q->fd);
	obj_free(q);
	return 0;
}

/* The UD ladder: RESET -> INIT (P_Key index, port, Q_Key) -> RTR -> RTS. */
static int
f_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *a, int mask)
{
	struct fake_qp *q = container_of(qp, struct fake_qp, qp);
	int init = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
		IBV_QP_QKEY;

	if (fail_now("modify_qp"))
		return errno;
	if (!(mask & IBV_QP_STATE))
		return EINVAL;
	switch (a->qp_state) {
	case IBV_QPS_INIT:
		if (qp->state != IBV_QPS_RESET || mask != init ||
				a->port_num != 1 || a->pkey_index != 0)
			return EINVAL;
		q->qkey = a->qkey;
		break;
	case IBV_QPS_RTR:
		if (qp->state != IBV_QPS_INIT || mask != IBV_QP_STATE)
			return EINVAL;
		break;
	case IBV_QPS_RTS:
		if (qp->state != IBV_QPS_RTR ||
				mask != (IBV_QP_STATE | IBV_QP_SQ_PSN))
			return EINVAL;
		break;
	default:
		return EINVAL;
	}
	qp->state = a->qp_state;
	return 0;
}

/* An address handle: global (RoCE), toward the dataplane's GID. */
static struct ibv_ah *
f_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *a)
{
	static const uint8_t mapped[12] = { [10] = 0xff, [11] = 0xff };
	struct ibv_ah *ah;

	if (fail_now("create_ah"))
		return NULL;
	if (!a->is_global || a->port_num != 1 || a->grh.sgid_index != 2 ||
			memcmp(a->grh.dgid.raw, mapped, 12) != 0 ||
			memcmp(a->grh.dgid.raw + 12, &conf.dp_ip, 4) != 0) {
		errno = EINVAL;
		return NULL;
	}
	ah = obj_new(sizeof(*ah));
	if (ah != NULL) {
		ah->context = pd->context;
		ah->pd = pd;
	}
	return ah;
}

static int
f_destroy_ah(struct ibv_ah *ah)
{
	obj_free(ah);
	return 0;
}

const struct tally_verbs_ops fakeverbs_ops = {
	.get_device_list = f_get_device_list,
	.free_device_list = f_free_device_list,
	.get_device_name = f_get_device_name,
	.open_device = f_open_device,
	.close_device = f_close_device,
	.query_port = f_query_port,
	.query_gid_ex = f_query_gid_ex,
	.alloc_pd = f_alloc_pd,
	.dealloc_pd = f_dealloc_pd,
	.reg_mr = f_reg_mr,
	.dereg_mr = f_dereg_mr,
	.create_cq = f_create_cq,
	.destroy_cq = f_destroy_cq,
	.create_qp = f_create_qp,
	.modify_qp = f_modify_qp,
	.destroy_qp = f_destroy_qp,
	.create_ah = f_create_ah,
	.destroy_ah = f_destroy_ah,
};

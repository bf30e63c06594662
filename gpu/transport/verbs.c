/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The verbs transport's set-up and tear-down: a UD queue pair on a
 * RoCEv2 port, as rdma-core's pingpong examples build one. The ladder
 * acquires, in order: the device (by name, or the first whose port has a
 * RoCEv2 GID for the local address), the protection domain, one region
 * of staging memory registered once, a send and a receive CQ, the QP
 * (INIT with the job's Q_Key, receives posted, RTR, RTS) and the address
 * handle toward the dataplane. A failure unwinds, with labels named for
 * what they undo, everything acquired so far.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>

#include "verbs_int.h"

/* Records why (printf-style) and errno = err; returns NULL. */
static void *
vfail(char *why, size_t len, int err, const char *fmt, ...)
{
	va_list ap;

	if (why != NULL && len > 0) {
		va_start(ap, fmt);
		vsnprintf(why, len, fmt, ap);
		va_end(ap);
	}
	errno = err;
	return NULL;
}

/*
 * errno after a verbs call that failed, never 0 (calls that return an
 * int return the errno itself: callers take that when positive).
 */
static int
verr(void)
{
	return errno != 0 ? errno : EIO;
}

/* Whether gid is the IPv4-mapped ::ffff:ip (ip network order; 0 = any). */
static int
gid_is_ip(const union ibv_gid *gid, uint32_t ip)
{
	static const uint8_t pre[12] = { [10] = 0xff, [11] = 0xff };

	return memcmp(gid->raw, pre, sizeof(pre)) == 0 &&
		(ip == 0 || memcmp(gid->raw + 12, &ip, 4) == 0);
}

/*
 * Finds on v's open device and port the RoCEv2 GID of ip (0: the first
 * IPv4 one): 0 with v->gid_index and v->local_ip set, or -ENODEV.
 */
static int
find_gid(struct verbs_transport *v, int tbl_len, uint32_t ip)
{
	for (int i = 0; i < tbl_len; i++) {
		struct ibv_gid_entry e;

		if (v->ops->query_gid_ex(v->dev, v->port, (uint32_t)i,
				&e) != 0)
			continue;	/* an empty entry */
		if (e.gid_type != IBV_GID_TYPE_ROCE_V2 ||
				!gid_is_ip(&e.gid, ip))
			continue;
		v->gid_index = (uint32_t)i;
		memcpy(&v->local_ip, e.gid.raw + 12, 4);
		return 0;
	}
	return -ENODEV;
}

/* The bytes of an ibv_mtu (IBV_MTU_1024 ...). */
static uint32_t
mtu_bytes(enum ibv_mtu m)
{
	return m >= IBV_MTU_256 && m <= IBV_MTU_4096 ? 128u << m : 0;
}

/*
 * Checks the opened device's port for conf (active, Ethernet, an MTU
 * that holds conf's packets, a GID for the address): 0 or -errno with
 * why set.
 */
static int
check_port(struct verbs_transport *v, const struct tally_verbs_conf *conf,
	const char *name, char *why, size_t len)
{
	struct ibv_port_attr pa;
	uint32_t need = conf->wire_max != 0 ? conf->wire_max : conf->room;
	int rc;

	memset(&pa, 0, sizeof(pa));
	if ((rc = v->ops->query_port(v->dev, v->port, &pa)) != 0) {
		rc = rc > 0 ? rc : verr();
		vfail(why, len, rc, "%s port %u: %s", name, v->port,
			strerror(rc));
		return -rc;
	}
	if (pa.link_layer != IBV_LINK_LAYER_ETHERNET) {
		vfail(why, len, 0, "%s port %u is not Ethernet (RoCE)", name,
			v->port);
		return -ENOTSUP;
	}
	if (pa.state != IBV_PORT_ACTIVE) {
		vfail(why, len, 0, "%s port %u is not active", name, v->port);
		return -ENETDOWN;
	}
	if (mtu_bytes(pa.active_mtu) < need) {
		vfail(why, len, 0, "packets of %u bytes are above %s port "
			"%u's path MTU of %u: use fewer elements a packet",
			need, name, v->port, mtu_bytes(pa.active_mtu));
		return -EMSGSIZE;
	}
	if (find_gid(v, pa.gid_tbl_len, conf->local_ip) != 0) {
		char ip[INET_ADDRSTRLEN] = "any IPv4";

		if (conf->local_ip != 0)
			inet_ntop(AF_INET, &conf->local_ip, ip, sizeof(ip));
		vfail(why, len, 0, "%s port %u has no RoCEv2 GID for %s", name,
			v->port, ip);
		return -ENODEV;
	}
	return 0;
}

/*
 * Opens the device conf names, or the first whose port passes
 * check_port(): 0 with v->dev set, or -errno with why set (the last
 * device's reason when none passes).
 */
static int
open_dev(struct verbs_transport *v, const struct tally_verbs_conf *conf,
	char *why, size_t len)
{
	int n = 0, rc = -ENODEV, found = 0;

	v->list = v->ops->get_device_list(&n);
	if (v->list == NULL || n == 0) {
		vfail(why, len, 0, "no RDMA device (ibv_get_device_list: %s)",
			v->list == NULL ? strerror(verr()) : "none");
		return -ENODEV;
	}
	for (int i = 0; i < n; i++) {
		const char *name = v->ops->get_device_name(v->list[i]);

		if (conf->device != NULL && strcmp(name, conf->device) != 0)
			continue;
		found = 1;
		v->dev = v->ops->open_device(v->list[i]);
		if (v->dev == NULL) {
			rc = -verr();
			vfail(why, len, 0, "cannot open %s: %s", name,
				strerror(-rc));
			continue;
		}
		rc = check_port(v, conf, name, why, len);
		if (rc == 0)
			return 0;
		v->ops->close_device(v->dev);
		v->dev = NULL;
	}
	if (!found)
		vfail(why, len, 0, "no RDMA device named %s (ibv_devices "
			"lists them)", conf->device);
	return rc;
}

/* The QP through INIT (port, P_Key index 0, Q_Key), its receives, RTR, RTS. */
static int
qp_up(struct verbs_transport *v, char *why, size_t len)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT,
		.pkey_index = 0,	/* the default P_Key, 0xFFFF on RoCE */
		.port_num = v->port,
		.qkey = v->qkey,
	};
	int rc;

	rc = v->ops->modify_qp(v->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
		IBV_QP_PORT | IBV_QP_QKEY);
	if (rc != 0) {
		rc = rc > 0 ? rc : verr();
		vfail(why, len, rc, "QP to INIT: %s", strerror(rc));
		return -rc;
	}
	rc = tally_verbs_post_rx(v, 0, VERBS_RX_DEPTH);
	if (rc != 0) {
		vfail(why, len, -rc, "posting receives: %s", strerror(-rc));
		return rc;
	}
	a = (struct ibv_qp_attr){ .qp_state = IBV_QPS_RTR };
	if ((rc = v->ops->modify_qp(v->qp, &a, IBV_QP_STATE)) != 0) {
		rc = rc > 0 ? rc : verr();
		vfail(why, len, rc, "QP to RTR: %s", strerror(rc));
		return -rc;
	}
	a = (struct ibv_qp_attr){ .qp_state = IBV_QPS_RTS, .sq_psn = 0 };
	rc = v->ops->modify_qp(v->qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN);
	if (rc != 0) {
		rc = rc > 0 ? rc : verr();
		vfail(why, len, rc, "QP to RTS: %s", strerror(rc));
		return -rc;
	}
	return 0;
}

/* The UD QP over v's CQs: 0 or -errno with why set. */
static int
qp_create(struct verbs_transport *v, char *why, size_t len)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = v->scq,
		.recv_cq = v->rcq,
		.cap = {
			.max_send_wr = VERBS_TX_DEPTH,
			.max_recv_wr = VERBS_RX_DEPTH,
			.max_send_sge = 1,
			.max_recv_sge = 1,
		},
		.qp_type = IBV_QPT_UD,
		.sq_sig_all = 0,	/* selective signalling */
	};
	int rc;

	v->qp = v->ops->create_qp(v->pd, &ia);
	if (v->qp == NULL) {
		rc = verr();
		vfail(why, len, rc, "creating a UD QP: %s", strerror(rc));
		return -rc;
	}
	v->tp.qpn = v->qp->qp_num;
	return 0;
}

/* The address handle toward the dataplane's RoCEv2 GID ::ffff:dp_ip. */
static int
ah_create(struct verbs_transport *v, char *why, size_t len)
{
	struct ibv_ah_attr aa = {
		.is_global = 1,
		.port_num = v->port,
		.grh = {
			.sgid_index = (uint8_t)v->gid_index,
			.hop_limit = 64,
		},
	};
	char ip[INET_ADDRSTRLEN];
	int rc;

	aa.grh.dgid.raw[10] = 0xff;
	aa.grh.dgid.raw[11] = 0xff;
	memcpy(aa.grh.dgid.raw + 12, &v->dp_ip, 4);
	v->ah = v->ops->create_ah(v->pd, &aa);
	if (v->ah == NULL) {
		rc = verr();
		inet_ntop(AF_INET, &v->dp_ip, ip, sizeof(ip));
		vfail(why, len, rc, "address handle toward %s: %s", ip,
			strerror(rc));
		return -rc;
	}
	return 0;
}

/* Checks conf; copies what the transport keeps into v. */
static int
take_conf(struct verbs_transport *v, const struct tally_verbs_conf *conf,
	char *why, size_t len)
{
	if (conf->dp_nqpns == 0 || conf->dp_nqpns > TALLY_VERBS_MAX_QPNS ||
			conf->dp_qpns == NULL || conf->room == 0 ||
			conf->room > 65536 || conf->dp_ip == 0 ||
			(conf->qkey & 0x80000000u) != 0) {
		vfail(why, len, 0, "bad RDMA configuration (QPNs: %u, Q_Key "
			"0x%08x, %u-byte packets)", conf->dp_nqpns,
			conf->qkey, conf->room);
		return -EINVAL;
	}
	for (unsigned int i = 0; i < conf->dp_nqpns; i++) {
		if (conf->dp_qpns[i] == 0 || conf->dp_qpns[i] > 0xffffffu) {
			vfail(why, len, 0, "dataplane QPN %u is not in "
				"1..0xffffff", conf->dp_qpns[i]);
			return -EINVAL;
		}
		v->qpns[i] = conf->dp_qpns[i];
	}
	v->ops = conf->ops != NULL ? conf->ops : tally_verbs_default_ops();
	v->nqpns = conf->dp_nqpns;
	v->qkey = conf->qkey;
	v->dp_ip = conf->dp_ip;
	v->port = conf->port != 0 ? conf->port : 1;
	v->room = conf->room;
	v->rx_stride = (VERBS_GRH + conf->room + 63u) & ~63u;
	v->tp.ops = &tally_verbs_tp_ops;
	v->tp.name = "rdma";
	return 0;
}

/*
 * The staging region: VERBS_TX_DEPTH send slots of room bytes, then
 * VERBS_RX_DEPTH receive slots, page-aligned and registered once.
 */
static int
mem_create(struct verbs_transport *v, char *why, size_t len)
{
	size_t tx = (size_t)VERBS_TX_DEPTH * ((v->room + 63u) & ~63u);
	int rc;

	v->mem_len = tx + (size_t)VERBS_RX_DEPTH * v->rx_stride;
	if (posix_memalign((void **)&v->mem, 4096, v->mem_len) != 0) {
		v->mem = NULL;
		vfail(why, len, 0, "out of memory for %zu bytes of staging",
			v->mem_len);
		return -ENOMEM;
	}
	memset(v->mem, 0, v->mem_len);
	v->mr = v->ops->reg_mr(v->pd, v->mem, v->mem_len,
		IBV_ACCESS_LOCAL_WRITE);
	if (v->mr == NULL) {
		rc = verr();
		vfail(why, len, rc, "registering %zu bytes: %s", v->mem_len,
			strerror(rc));
		free(v->mem);
		v->mem = NULL;
		return -rc;
	}
	return 0;
}

/* The rest of the ladder, after the device: each step undone on failure. */
static int
ladder(struct verbs_transport *v, char *why, size_t len)
{
	int rc;

	v->pd = v->ops->alloc_pd(v->dev);
	if (v->pd == NULL) {
		rc = verr();
		vfail(why, len, rc, "protection domain: %s", strerror(rc));
		return -rc;
	}
	if ((rc = mem_create(v, why, len)) != 0)
		goto err_pd;
	v->scq = v->ops->create_cq(v->dev, VERBS_TX_DEPTH);
	if (v->scq == NULL) {
		rc = -verr();
		vfail(why, len, 0, "send CQ: %s", strerror(-rc));
		goto err_mr;
	}
	v->rcq = v->ops->create_cq(v->dev, VERBS_RX_DEPTH);
	if (v->rcq == NULL) {
		rc = -verr();
		vfail(why, len, 0, "receive CQ: %s", strerror(-rc));
		goto err_scq;
	}
	if ((rc = qp_create(v, why, len)) != 0)
		goto err_rcq;
	if ((rc = qp_up(v, why, len)) != 0 || (rc = ah_create(v, why, len)) != 0)
		goto err_qp;
	return 0;
err_qp:
	v->ops->destroy_qp(v->qp);
	v->qp = NULL;
err_rcq:
	v->ops->destroy_cq(v->rcq);
	v->rcq = NULL;
err_scq:
	v->ops->destroy_cq(v->scq);
	v->scq = NULL;
err_mr:
	v->ops->dereg_mr(v->mr);
	v->mr = NULL;
	free(v->mem);
	v->mem = NULL;
err_pd:
	v->ops->dealloc_pd(v->pd);
	v->pd = NULL;
	return rc;
}

struct tally_transport *
tally_verbs_transport_create(const struct tally_verbs_conf *conf, char *why,
	size_t why_len)
{
	struct verbs_transport *v;
	int rc;

	if (why != NULL && why_len > 0)
		why[0] = '\0';
	if (conf == NULL)
		return vfail(why, why_len, EINVAL, "no RDMA configuration");
	v = calloc(1, sizeof(*v));
	if (v == NULL)
		return vfail(why, why_len, ENOMEM, "out of memory");
	if ((rc = take_conf(v, conf, why, why_len)) != 0)
		goto err_free;
	if ((rc = open_dev(v, conf, why, why_len)) != 0)
		goto err_list;
	if ((rc = ladder(v, why, why_len)) != 0)
		goto err_dev;
	v->ops->free_device_list(v->list);
	v->list = NULL;
	return &v->tp;
err_dev:
	v->ops->close_device(v->dev);
err_list:
	if (v->list != NULL)
		v->ops->free_device_list(v->list);
err_free:
	free(v);
	errno = -rc;
	return NULL;
}

/* Undoes the whole ladder, last step first (tally_transport_destroy()). */
void
tally_verbs_destroy(struct tally_transport *tp)
{
	struct verbs_transport *v = (struct verbs_transport *)tp;

	v->ops->destroy_ah(v->ah);
	v->ops->destroy_qp(v->qp);
	v->ops->destroy_cq(v->rcq);
	v->ops->destroy_cq(v->scq);
	v->ops->dereg_mr(v->mr);
	free(v->mem);
	v->ops->dealloc_pd(v->pd);
	v->ops->close_device(v->dev);
	free(v);
}

/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The verbs transport's control calls through libibverbs (verbs.h): thin
 * wrappers where libibverbs has a macro or an inline (ibv_query_port,
 * ibv_reg_mr, ibv_query_gid_ex), the functions themselves elsewhere; and
 * the default table, which tests may replace by a fake device's.
 */
#include <stdatomic.h>

#include "verbs_int.h"

static int
real_query_port(struct ibv_context *ctx, uint8_t port,
	struct ibv_port_attr *attr)
{
	return ibv_query_port(ctx, port, attr);
}

static int
real_query_gid_ex(struct ibv_context *ctx, uint32_t port, uint32_t index,
	struct ibv_gid_entry *entry)
{
	return ibv_query_gid_ex(ctx, port, index, entry, 0);
}

static struct ibv_mr *
real_reg_mr(struct ibv_pd *pd, void *addr, size_t len, int access)
{
	return ibv_reg_mr(pd, addr, len, access);
}

/* A CQ without a completion channel: the transport polls it. */
static struct ibv_cq *
real_create_cq(struct ibv_context *ctx, int cqe)
{
	return ibv_create_cq(ctx, cqe, NULL, NULL, 0);
}

const struct tally_verbs_ops tally_verbs_libibverbs = {
	.get_device_list = ibv_get_device_list,
	.free_device_list = ibv_free_device_list,
	.get_device_name = ibv_get_device_name,
	.open_device = ibv_open_device,
	.close_device = ibv_close_device,
	.query_port = real_query_port,
	.query_gid_ex = real_query_gid_ex,
	.alloc_pd = ibv_alloc_pd,
	.dealloc_pd = ibv_dealloc_pd,
	.reg_mr = real_reg_mr,
	.dereg_mr = ibv_dereg_mr,
	.create_cq = real_create_cq,
	.destroy_cq = ibv_destroy_cq,
	.create_qp = ibv_create_qp,
	.modify_qp = ibv_modify_qp,
	.destroy_qp = ibv_destroy_qp,
	.create_ah = ibv_create_ah,
	.destroy_ah = ibv_destroy_ah,
};

static _Atomic(const struct tally_verbs_ops *) default_ops;

void
tally_verbs_set_default_ops(const struct tally_verbs_ops *ops)
{
	atomic_store(&default_ops, ops);
}

/* The table a transport without one of its own uses (verbs_int.h). */
const struct tally_verbs_ops *
tally_verbs_default_ops(void)
{
	const struct tally_verbs_ops *ops = atomic_load(&default_ops);

	return ops != NULL ? ops : &tally_verbs_libibverbs;
}

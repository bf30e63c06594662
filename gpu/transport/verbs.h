/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The verbs transport's boundary with libibverbs. The data path calls
 * ibv_post_send(), ibv_post_recv() and ibv_poll_cq(), which are inline
 * calls through the device context's own ops (struct ibv_context_ops);
 * every other verbs call, the set-up and tear-down ladder, goes through
 * struct tally_verbs_ops, so that a test can stand a fake device in for
 * a NIC: its ibv_context serves the data path, its ops table the rest
 * (tests/lib/fakeverbs.c). tally_verbs_libibverbs is the real table.
 */
#ifndef TALLY_TRANSPORT_VERBS_H
#define TALLY_TRANSPORT_VERBS_H

#include <stddef.h>
#include <stdint.h>

#include <infiniband/verbs.h>

struct tally_verbs_ops {
	struct ibv_device **(*get_device_list)(int *n);
	void (*free_device_list)(struct ibv_device **list);
	const char *(*get_device_name)(struct ibv_device *dev);
	struct ibv_context *(*open_device)(struct ibv_device *dev);
	int (*close_device)(struct ibv_context *ctx);
	int (*query_port)(struct ibv_context *ctx, uint8_t port,
		struct ibv_port_attr *attr);
	int (*query_gid_ex)(struct ibv_context *ctx, uint32_t port,
		uint32_t index, struct ibv_gid_entry *entry);
	struct ibv_pd *(*alloc_pd)(struct ibv_context *ctx);
	int (*dealloc_pd)(struct ibv_pd *pd);
	struct ibv_mr *(*reg_mr)(struct ibv_pd *pd, void *addr, size_t len,
		int access);
	int (*dereg_mr)(struct ibv_mr *mr);
	struct ibv_cq *(*create_cq)(struct ibv_context *ctx, int cqe);
	int (*destroy_cq)(struct ibv_cq *cq);
	struct ibv_qp *(*create_qp)(struct ibv_pd *pd,
		struct ibv_qp_init_attr *attr);
	int (*modify_qp)(struct ibv_qp *qp, struct ibv_qp_attr *attr,
		int mask);
	int (*destroy_qp)(struct ibv_qp *qp);
	struct ibv_ah *(*create_ah)(struct ibv_pd *pd,
		struct ibv_ah_attr *attr);
	int (*destroy_ah)(struct ibv_ah *ah);
};

/* libibverbs itself. */
extern const struct tally_verbs_ops tally_verbs_libibverbs;

/*
 * The table that verbs transports created without one of their own
 * (tally_verbs_conf.ops NULL, as contexts do) use: ops, or libibverbs
 * for NULL. For tests, which put a fake device behind whole contexts;
 * set it before any context opens.
 */
void tally_verbs_set_default_ops(const struct tally_verbs_ops *ops);

#endif /* TALLY_TRANSPORT_VERBS_H */

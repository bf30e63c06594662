/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libnccl-net-tally.so's exported tables: ncclNetPlugin_v11 (a TCP
 * point-to-point net, which NCCL 2.28 insists on finding beside any
 * collnet of an outside library) and ncclCollNetPlugin_v11 (allreduce
 * through tally), both with one device named "tally". Everything else in
 * the library is hidden (-fvisibility=hidden, --exclude-libs): a process
 * that also links libtally itself keeps its own copy. docs/nccl.md.
 */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "plugin.h"

#define EXPORT __attribute__((visibility("default")))

static _Atomic(tally_nccl_logger) logger;

/* Keeps log, NCCL's ncclDebugLog: the same for every init of a process. */
void
tally_nccl_set_logger(tally_nccl_logger log)
{
	if (log != NULL)
		atomic_store(&logger, log);
}

/* Formats one line and hands it to NCCL's logger (stderr for a WARN
 * before any init gave one). */
void
tally_nccl_log(int level, unsigned long flags, const char *file, int line,
	const char *fmt, ...)
{
	tally_nccl_logger log = atomic_load(&logger);
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (log != NULL)
		log(level, flags, file, line, "NET/tally: %s", msg);
	else if (level == TALLY_NCCL_LOG_WARN)
		fprintf(stderr, "NCCL WARN NET/tally: %s\n", msg);
}

/* What NCCL reads of the device; the two tables differ only in the kinds
 * of memory they take. Sizes within NCCL's (0, 1 TiB] or it refuses. */
void
tally_nccl_props_fill(struct tally_nccl_props *p, int coll)
{
	memset(p, 0, sizeof(*p));
	p->name = (char *)TALLY_NCCL_DEV_NAME;
	p->pci_path = NULL;
	p->guid = 0x74616c6c79ULL;	/* "tally" */
	p->ptr_support = coll ? tally_nccl_coll_ptr_support() :
		TALLY_NCCL_PTR_HOST;
	p->speed = 10000;
	p->port = 1;
	p->latency = 0;
	p->max_comms = 65536;
	p->max_recvs = 1;
	p->net_device_type = 0;
	p->net_device_version = 0;
	p->vprops.ndevs = 1;
	p->vprops.devs[0] = 0;
	p->max_p2p_bytes = 1UL << 30;
	p->max_coll_bytes = 1UL << 30;
	p->max_multi_request_size = 1;
}

/* One device, in both tables. */
int
tally_nccl_devices(int *ndev)
{
	if (ndev == NULL)
		return TALLY_NCCL_INVALID_ARGUMENT;
	*ndev = 1;
	return TALLY_NCCL_SUCCESS;
}

/* The net's properties of device 0. */
int
tally_nccl_get_properties(int dev, struct tally_nccl_props *props)
{
	if (dev != 0 || props == NULL)
		return TALLY_NCCL_INVALID_ARGUMENT;
	tally_nccl_props_fill(props, 0);
	return TALLY_NCCL_SUCCESS;
}

/* The collnet's properties of device 0. */
int
tally_nccl_coll_get_properties(int dev, struct tally_nccl_props *props)
{
	if (dev != 0 || props == NULL)
		return TALLY_NCCL_INVALID_ARGUMENT;
	tally_nccl_props_fill(props, 1);
	return TALLY_NCCL_SUCCESS;
}

EXPORT const struct tally_nccl_net ncclNetPlugin_v11 = {
	.name = TALLY_NCCL_DEV_NAME,
	.init = tally_nccl_sock_init,
	.devices = tally_nccl_devices,
	.get_properties = tally_nccl_get_properties,
	.listen = tally_nccl_sock_listen,
	.connect = tally_nccl_sock_connect,
	.accept = tally_nccl_sock_accept,
	.reg_mr = tally_nccl_sock_reg_mr,
	.reg_mr_dmabuf = tally_nccl_sock_reg_mr_dmabuf,
	.dereg_mr = tally_nccl_sock_dereg_mr,
	.isend = tally_nccl_sock_isend,
	.irecv = tally_nccl_sock_irecv,
	.iflush = tally_nccl_sock_iflush,
	.test = tally_nccl_sock_test,
	.close_send = tally_nccl_sock_close,
	.close_recv = tally_nccl_sock_close,
	.close_listen = tally_nccl_sock_close_listen,
	.get_device_mr = NULL,		/* no device offload */
	.irecv_consumed = NULL,
	.make_vdevice = NULL,		/* NCCL then uses the device as is */
	.finalize = tally_nccl_sock_finalize,
	.set_net_attr = NULL,
};

/* iallgather and ireducescatter stay NULL: NCCL then never picks CollNet
 * for all-gather or reduce-scatter (their bandwidth counts as 0). */
EXPORT const struct tally_nccl_collnet ncclCollNetPlugin_v11 = {
	.name = TALLY_NCCL_DEV_NAME,
	.init = tally_nccl_coll_init,
	.devices = tally_nccl_devices,
	.get_properties = tally_nccl_coll_get_properties,
	.listen = tally_nccl_coll_listen,
	.connect = tally_nccl_coll_connect,
	.reduce_support = tally_nccl_coll_reduce_support,
	.reg_mr = tally_nccl_coll_reg_mr,
	.reg_mr_dmabuf = tally_nccl_coll_reg_mr_dmabuf,
	.dereg_mr = tally_nccl_coll_dereg_mr,
	.iallreduce = tally_nccl_coll_iallreduce,
	.iallgather = NULL,
	.ireducescatter = NULL,
	.iflush = tally_nccl_coll_iflush,
	.test = tally_nccl_coll_test,
	.close_coll = tally_nccl_coll_close,
	.close_listen = tally_nccl_coll_close_listen,
	.make_vdevice = NULL,
	.finalize = tally_nccl_coll_finalize,
};

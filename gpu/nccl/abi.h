/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The binary interface of an NCCL network plugin, version 11: what stock
 * NCCL 2.28 looks up in libnccl-net-<name>.so (symbols ncclNetPlugin_v11
 * and ncclCollNetPlugin_v11) and calls. Declared here from NCCL's
 * documented plugin API (ext-net/README.md and the v11 structures it
 * describes); NCCL's own headers are not shipped with the toolkit, and
 * none of their text is copied. Only the layout matters: the order and
 * types of the members, which tests/nccl/abi_test.c checks against the
 * offsets NCCL 2.28.9 uses.
 *
 * NCCL's enums (ncclResult_t, ncclDataType_t, ncclRedOp_t, its device
 * type) are int-sized: they travel here as int. Pointers to structures
 * the plugin never reads (offload device handles, network attributes)
 * are pointers to incomplete types.
 */
#ifndef TALLY_NCCL_ABI_H
#define TALLY_NCCL_ABI_H

#include <stddef.h>
#include <stdint.h>

/* ncclResult_t */
#define TALLY_NCCL_SUCCESS		0
#define TALLY_NCCL_SYSTEM_ERROR		2
#define TALLY_NCCL_INTERNAL_ERROR	3
#define TALLY_NCCL_INVALID_ARGUMENT	4
#define TALLY_NCCL_INVALID_USAGE	5
#define TALLY_NCCL_REMOTE_ERROR		6

/* ncclDataType_t */
enum {
	TALLY_NCCL_INT8 = 0, TALLY_NCCL_UINT8, TALLY_NCCL_INT32,
	TALLY_NCCL_UINT32, TALLY_NCCL_INT64, TALLY_NCCL_UINT64,
	TALLY_NCCL_FLOAT16, TALLY_NCCL_FLOAT32, TALLY_NCCL_FLOAT64,
	TALLY_NCCL_BFLOAT16, TALLY_NCCL_FLOAT8E4M3, TALLY_NCCL_FLOAT8E5M2,
	TALLY_NCCL_NTYPES
};

/* ncclRedOp_t (the built-in ones; avg reaches a collnet as sum) */
enum {
	TALLY_NCCL_SUM = 0, TALLY_NCCL_PROD, TALLY_NCCL_MAX, TALLY_NCCL_MIN,
	TALLY_NCCL_AVG, TALLY_NCCL_NOPS
};

/* ncclDebugLogLevel and the subsystems of the logger's flags */
#define TALLY_NCCL_LOG_WARN	2
#define TALLY_NCCL_LOG_INFO	3
#define TALLY_NCCL_LOG_TRACE	5
#define TALLY_NCCL_INIT		0x1
#define TALLY_NCCL_COLL		0x2
#define TALLY_NCCL_NET		0x10

/* NCCL_PTR_*: what memory a device can send from and receive into */
#define TALLY_NCCL_PTR_HOST	0x1
#define TALLY_NCCL_PTR_CUDA	0x2
#define TALLY_NCCL_PTR_DMABUF	0x4

#define TALLY_NCCL_HANDLE_MAX	128		/* bytes of a listen handle */
#define TALLY_NCCL_MAX_REQUESTS	32		/* in flight a comm (net) */
#define TALLY_NCCL_MAX_NET_BYTES (1ULL << 40)	/* maxP2p/CollBytes cap */
#define TALLY_NCCL_DEVS_PER_NIC	4

/* ncclDebugLogger_t: NCCL's logger, printf-like */
typedef void (*tally_nccl_logger)(int level, unsigned long flags,
	const char *file, int line, const char *fmt, ...);

/* ncclNetVDeviceProps_v11_t */
struct tally_nccl_vprops {
	int ndevs;
	int devs[TALLY_NCCL_DEVS_PER_NIC];
};

/* ncclNetCommConfig_v11_t */
struct tally_nccl_comm_config {
	int traffic_class;	/* -1: undefined */
};

/* ncclNetProperties_v11_t */
struct tally_nccl_props {
	char *name;
	char *pci_path;		/* NULL: not a PCI device */
	uint64_t guid;
	int ptr_support;	/* TALLY_NCCL_PTR_* */
	int reg_is_global;
	int force_flush;
	int speed;		/* Mbit/s */
	int port;
	float latency;		/* microseconds */
	int max_comms;
	int max_recvs;		/* receives grouped in one irecv */
	int net_device_type;	/* 0: host (no device offload) */
	int net_device_version;
	struct tally_nccl_vprops vprops;
	size_t max_p2p_bytes;	/* in (0, TALLY_NCCL_MAX_NET_BYTES] */
	size_t max_coll_bytes;	/* the same */
	int max_multi_request_size;
};

/* ncclNetSGE_v11_t */
struct tally_nccl_sge {
	void *mhandle;
	void *address;
	size_t size;
};

struct tally_nccl_dev_handle;	/* ncclNetDeviceHandle_v11_t, unused */
struct tally_nccl_net_attr;	/* ncclNetAttr_v11_t, unused */

/* ncclNet_v11_t: point-to-point */
struct tally_nccl_net {
	const char *name;
	int (*init)(void **ctx, uint64_t comm_id,
		struct tally_nccl_comm_config *config, tally_nccl_logger log,
		void *profiler);
	int (*devices)(int *ndev);
	int (*get_properties)(int dev, struct tally_nccl_props *props);
	int (*listen)(void *ctx, int dev, void *handle, void **listen_comm);
	int (*connect)(void *ctx, int dev, void *handle, void **send_comm,
		struct tally_nccl_dev_handle **send_dev);
	int (*accept)(void *listen_comm, void **recv_comm,
		struct tally_nccl_dev_handle **recv_dev);
	int (*reg_mr)(void *comm, void *data, size_t size, int type,
		void **mhandle);
	int (*reg_mr_dmabuf)(void *comm, void *data, size_t size, int type,
		uint64_t offset, int fd, void **mhandle);
	int (*dereg_mr)(void *comm, void *mhandle);
	int (*isend)(void *send_comm, void *data, size_t size, int tag,
		void *mhandle, void *phandle, void **request);
	int (*irecv)(void *recv_comm, int n, void **data, size_t *sizes,
		int *tags, void **mhandles, void **phandles, void **request);
	int (*iflush)(void *recv_comm, int n, void **data, int *sizes,
		void **mhandles, void **request);
	int (*test)(void *request, int *done, int *sizes);
	int (*close_send)(void *send_comm);
	int (*close_recv)(void *recv_comm);
	int (*close_listen)(void *listen_comm);
	int (*get_device_mr)(void *comm, void *mhandle, void **dptr_mhandle);
	int (*irecv_consumed)(void *recv_comm, int n, void *request);
	int (*make_vdevice)(int *d, struct tally_nccl_vprops *props);
	int (*finalize)(void *ctx);
	int (*set_net_attr)(void *ctx, struct tally_nccl_net_attr *attr);
};

/* ncclCollNet_v11_t: collectives through the network */
struct tally_nccl_collnet {
	const char *name;
	int (*init)(void **ctx, uint64_t comm_id, tally_nccl_logger log);
	int (*devices)(int *ndev);
	int (*get_properties)(int dev, struct tally_nccl_props *props);
	int (*listen)(void *ctx, int dev, void *handle, void **listen_comm);
	int (*connect)(void *handles[], int nranks, int rank,
		void *listen_comm, void **coll_comm);
	int (*reduce_support)(int type, int op, int *supported);
	int (*reg_mr)(void *coll_comm, void *data, size_t size, int type,
		void **mhandle);
	int (*reg_mr_dmabuf)(void *coll_comm, void *data, size_t size,
		int type, uint64_t offset, int fd, void **mhandle);
	int (*dereg_mr)(void *coll_comm, void *mhandle);
	int (*iallreduce)(void *coll_comm, void *send, void *recv,
		size_t count, int type, int op, void *send_mh, void *recv_mh,
		void **request);
	int (*iallgather)(void *coll_comm, void *send, int nrecv_parts,
		struct tally_nccl_sge *recv_parts, size_t bytes_per_rank,
		size_t window_offset, size_t window_bytes, void *send_mh,
		void **request);
	int (*ireducescatter)(void *coll_comm, int nsend_parts,
		struct tally_nccl_sge *send_parts, void *recv,
		size_t bytes_per_rank, size_t window_offset,
		size_t window_bytes, int type, int op, void *recv_mh,
		void **request);
	int (*iflush)(void *coll_comm, void *data, int size, void *mhandle,
		void **request);
	int (*test)(void *request, int *done, int *size);
	int (*close_coll)(void *coll_comm);
	int (*close_listen)(void *listen_comm);
	int (*make_vdevice)(int *d, struct tally_nccl_vprops *props);
	int (*finalize)(void *ctx);
};

#endif /* TALLY_NCCL_ABI_H */

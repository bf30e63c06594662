/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Inside libnccl-net-tally.so: what its files share. plugin.c exports
 * the two function tables and keeps NCCL's logger; sock.c is the
 * point-to-point net (TCP); coll.c the collnet entry points; queue.c a
 * collnet communicator's requests and the thread that runs them through
 * libtally; token.c the job's token from the environment.
 */
#ifndef TALLY_NCCL_PLUGIN_H
#define TALLY_NCCL_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#include <tally/tally.h>

#include "abi.h"

#define TALLY_NCCL_DEV_NAME	"tally"	/* net and collnet: NCCL merges
					 * the two devices by name */
#define TALLY_NCCL_TOKEN_MAX	128

/* Keeps NCCL's logger (NULL: WARN lines go to stderr, the rest nowhere). */
void tally_nccl_set_logger(tally_nccl_logger log);

/* One line through NCCL's logger, "NET/tally: " in front. */
void tally_nccl_log(int level, unsigned long flags, const char *file,
	int line, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));

#define TN_WARN(...) tally_nccl_log(TALLY_NCCL_LOG_WARN, TALLY_NCCL_NET, \
	__FILE__, __LINE__, __VA_ARGS__)
#define TN_INFO(...) tally_nccl_log(TALLY_NCCL_LOG_INFO, TALLY_NCCL_NET | \
	TALLY_NCCL_INIT, __FILE__, __LINE__, __VA_ARGS__)

/* The device's properties: coll 0 for the net, 1 for the collnet. */
void tally_nccl_props_fill(struct tally_nccl_props *p, int coll);

/* TALLY_NCCL_PTR_HOST, and _CUDA where the collnet takes device memory. */
int tally_nccl_coll_ptr_support(void);

/* The point-to-point net (sock.c), in the v11 table's order. */
int tally_nccl_sock_init(void **ctx, uint64_t comm_id,
	struct tally_nccl_comm_config *config, tally_nccl_logger log,
	void *profiler);
int tally_nccl_sock_listen(void *ctx, int dev, void *handle, void **lcomm);
int tally_nccl_sock_connect(void *ctx, int dev, void *handle, void **scomm,
	struct tally_nccl_dev_handle **sdev);
int tally_nccl_sock_accept(void *lcomm, void **rcomm,
	struct tally_nccl_dev_handle **rdev);
int tally_nccl_sock_reg_mr(void *comm, void *data, size_t size, int type,
	void **mhandle);
int tally_nccl_sock_reg_mr_dmabuf(void *comm, void *data, size_t size,
	int type, uint64_t offset, int fd, void **mhandle);
int tally_nccl_sock_dereg_mr(void *comm, void *mhandle);
int tally_nccl_sock_isend(void *scomm, void *data, size_t size, int tag,
	void *mhandle, void *phandle, void **request);
int tally_nccl_sock_irecv(void *rcomm, int n, void **data, size_t *sizes,
	int *tags, void **mhandles, void **phandles, void **request);
int tally_nccl_sock_iflush(void *rcomm, int n, void **data, int *sizes,
	void **mhandles, void **request);
int tally_nccl_sock_test(void *request, int *done, int *sizes);
int tally_nccl_sock_close(void *comm);
int tally_nccl_sock_close_listen(void *lcomm);
int tally_nccl_sock_finalize(void *ctx);

/* The collnet (coll.c). */
int tally_nccl_coll_init(void **ctx, uint64_t comm_id, tally_nccl_logger log);
int tally_nccl_coll_listen(void *ctx, int dev, void *handle, void **lcomm);
int tally_nccl_coll_connect(void *handles[], int nranks, int rank,
	void *lcomm, void **ccomm);
int tally_nccl_coll_reduce_support(int type, int op, int *supported);
int tally_nccl_coll_reg_mr(void *ccomm, void *data, size_t size, int type,
	void **mhandle);
int tally_nccl_coll_reg_mr_dmabuf(void *ccomm, void *data, size_t size,
	int type, uint64_t offset, int fd, void **mhandle);
int tally_nccl_coll_dereg_mr(void *ccomm, void *mhandle);
int tally_nccl_coll_iallreduce(void *ccomm, void *send, void *recv,
	size_t count, int type, int op, void *send_mh, void *recv_mh,
	void **request);
int tally_nccl_coll_iflush(void *ccomm, void *data, int size, void *mhandle,
	void **request);
int tally_nccl_coll_test(void *request, int *done, int *size);
int tally_nccl_coll_close(void *ccomm);
int tally_nccl_coll_close_listen(void *lcomm);
int tally_nccl_coll_finalize(void *ctx);

/* Both tables' devices(): one device. */
int tally_nccl_devices(int *ndev);
int tally_nccl_get_properties(int dev, struct tally_nccl_props *props);
int tally_nccl_coll_get_properties(int dev, struct tally_nccl_props *props);

/*
 * A collnet communicator's request queue (queue.c): requests run through
 * libtally in posting order on the queue's own thread.
 */
struct tally_nccl_queue;
struct tally_nccl_req;

/* Starts the thread over ctx (owned from now on: closed by _destroy). */
struct tally_nccl_queue *tally_nccl_queue_new(struct tally_ctx *ctx);

/* Runs what is queued, stops the thread, closes the context. NULL ok. */
void tally_nccl_queue_destroy(struct tally_nccl_queue *q);

/*
 * Queues send -> recv (count elements of libtally's type dt, on the
 * device when cuda). Returns the request, or NULL when the queue is full
 * (NCCL retries).
 */
struct tally_nccl_req *tally_nccl_queue_post(struct tally_nccl_queue *q,
	void *send, void *recv, size_t count, enum tally_dtype dt, int cuda);

/* Bytes of one element of dt: 4 for f32 and i32, 2 for bf16 and f16. */
size_t tally_nccl_dt_bytes(enum tally_dtype dt);

/*
 * 0 and *done 0 while queued or running; 0, *done 1 and *bytes once
 * done (the request is then released); a negative errno (released too)
 * when it failed, with the reason in why.
 */
int tally_nccl_req_test(struct tally_nccl_req *r, int *done, size_t *bytes,
	char *why, size_t len);

/* The job's token (TALLY_TOKEN, else TALLY_TOKEN_FILE) into out; 0 or
 * -errno with a sentence in why. */
int tally_nccl_token(char *out, size_t cap, char *why, size_t len);

/*
 * Device memory (cuda.c): whether the collnet takes it
 * (TALLY_NCCL_CUDA=1 and a libtally built with CUDA), and one request's
 * allreduce of it (f32 or i32 only: libtally has no device path for
 * bf16 and f16, which get -EOPNOTSUPP), copied from send first when the
 * two differ.
 */
int tally_nccl_cuda_enabled(void);
int tally_nccl_cuda_allreduce(struct tally_ctx *ctx, void *send, void *recv,
	size_t count, enum tally_dtype dt);

/* The two tables, exported (plugin.c). */
extern __attribute__((visibility("default")))
	const struct tally_nccl_net ncclNetPlugin_v11;
extern __attribute__((visibility("default")))
	const struct tally_nccl_collnet ncclCollNetPlugin_v11;

#endif /* TALLY_NCCL_PLUGIN_H */

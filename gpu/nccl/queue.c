/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A collnet communicator's requests: libtally's allreduce blocks, NCCL's
 * iallreduce must not. Requests go into a ring in posting order (the
 * same order on every rank, as NCCL guarantees) and one thread per
 * communicator runs them through the context one after the other; test()
 * reads a request's state without locking the thread out. A slot is
 * reused once test() reported its request done; a full ring makes
 * iallreduce return a NULL request, which NCCL posts again.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tally/tally.h>

#include "plugin.h"

#define QCAP	64

enum { REQ_FREE = 0, REQ_QUEUED, REQ_DONE, REQ_FAILED };

struct tally_nccl_req {
	struct tally_nccl_queue *q;
	_Atomic int state;
	int err;		/* REQ_FAILED: -errno */
	void *send, *recv;
	size_t count;		/* elements of dt */
	enum tally_dtype dt;
	int cuda;
	char why[200];		/* REQ_FAILED: libtally's sentence */
};

struct tally_nccl_queue {
	struct tally_ctx *ctx;
	pthread_t thr;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	uint64_t posted;	/* requests posted */
	uint64_t ran;		/* requests the thread finished */
	int stop;
	struct tally_nccl_req reqs[QCAP];
};

/* Bytes of one element of dt (the types coll.c lets through). */
size_t
tally_nccl_dt_bytes(enum tally_dtype dt)
{
	return dt == TALLY_DT_BF16 || dt == TALLY_DT_F16 ? 2 : 4;
}

/*
 * Runs one request through libtally; 0 or -errno. Host memory: send is
 * copied into recv, which libtally sums in place (f32 and i32 as
 * tally_allreduce_f32() and _i32(); bf16 and f16 in fixed point, rounded
 * once to the type, in the lanes of libtally's rule for the job).
 */
static int
run(struct tally_nccl_queue *q, struct tally_nccl_req *r)
{
	if (r->count == 0)
		return 0;
	if (r->cuda)
		return tally_nccl_cuda_allreduce(q->ctx, r->send, r->recv,
			r->count, r->dt);
	if (r->send != r->recv)
		memmove(r->recv, r->send,
			r->count * tally_nccl_dt_bytes(r->dt));
	return tally_allreduce_typed(q->ctx, r->recv, r->count, r->dt);
}

/* The thread: requests in order until told to stop with none queued. */
static void *
worker(void *arg)
{
	struct tally_nccl_queue *q = arg;

	pthread_mutex_lock(&q->mu);
	for (;;) {
		struct tally_nccl_req *r;
		int rc;

		while (!q->stop && q->ran == q->posted)
			pthread_cond_wait(&q->cv, &q->mu);
		if (q->ran == q->posted)
			break;
		r = &q->reqs[q->ran % QCAP];
		pthread_mutex_unlock(&q->mu);
		rc = run(q, r);
		pthread_mutex_lock(&q->mu);
		if (rc < 0)
			snprintf(r->why, sizeof(r->why), "%s",
				tally_ctx_error(q->ctx)[0] != '\0' ?
				tally_ctx_error(q->ctx) : strerror(-rc));
		r->err = rc;
		atomic_store_explicit(&r->state, rc < 0 ? REQ_FAILED :
			REQ_DONE, memory_order_release);
		q->ran++;
	}
	pthread_mutex_unlock(&q->mu);
	return NULL;
}

/* Starts the thread; owns ctx from now on. NULL with errno. */
struct tally_nccl_queue *
tally_nccl_queue_new(struct tally_ctx *ctx)
{
	struct tally_nccl_queue *q = calloc(1, sizeof(*q));
	int rc;

	if (q == NULL)
		return NULL;
	q->ctx = ctx;
	pthread_mutex_init(&q->mu, NULL);
	pthread_cond_init(&q->cv, NULL);
	if ((rc = pthread_create(&q->thr, NULL, worker, q)) != 0) {
		pthread_mutex_destroy(&q->mu);
		pthread_cond_destroy(&q->cv);
		free(q);
		errno = rc;
		return NULL;
	}
	return q;
}

/* Drains the ring, stops the thread, closes the context. */
void
tally_nccl_queue_destroy(struct tally_nccl_queue *q)
{
	if (q == NULL)
		return;
	pthread_mutex_lock(&q->mu);
	q->stop = 1;
	pthread_cond_signal(&q->cv);
	pthread_mutex_unlock(&q->mu);
	pthread_join(q->thr, NULL);
	tally_ctx_close(q->ctx);
	pthread_mutex_destroy(&q->mu);
	pthread_cond_destroy(&q->cv);
	free(q);
}

/* Queues a request (borrowing its buffers until done); NULL: full. */
struct tally_nccl_req *
tally_nccl_queue_post(struct tally_nccl_queue *q, void *send, void *recv,
	size_t count, enum tally_dtype dt, int cuda)
{
	struct tally_nccl_req *r;

	pthread_mutex_lock(&q->mu);
	r = &q->reqs[q->posted % QCAP];
	if (atomic_load_explicit(&r->state, memory_order_acquire) !=
	    REQ_FREE) {
		pthread_mutex_unlock(&q->mu);
		return NULL;
	}
	*r = (struct tally_nccl_req){ .q = q, .send = send, .recv = recv,
		.count = count, .dt = dt, .cuda = cuda };
	atomic_store_explicit(&r->state, REQ_QUEUED, memory_order_relaxed);
	q->posted++;
	pthread_cond_signal(&q->cv);
	pthread_mutex_unlock(&q->mu);
	return r;
}

/* Reads a request's state; a finished one is released. */
int
tally_nccl_req_test(struct tally_nccl_req *r, int *done, size_t *bytes,
	char *why, size_t len)
{
	int s = atomic_load_explicit(&r->state, memory_order_acquire);

	*done = s == REQ_DONE;
	if (s == REQ_QUEUED)
		return 0;
	if (s == REQ_FREE) {
		snprintf(why, len, "a request tested after it completed");
		return -EINVAL;
	}
	*bytes = r->count * tally_nccl_dt_bytes(r->dt);
	if (s == REQ_FAILED)
		snprintf(why, len, "%s", r->why);
	atomic_store_explicit(&r->state, REQ_FREE, memory_order_release);
	return s == REQ_FAILED ? r->err : 0;
}

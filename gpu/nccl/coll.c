/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The collnet: a group of NCCL ranks (one a node) becomes one tally job
 * membership. The job comes from TALLY_URL (tally://HOST[:PORT]/JOB),
 * read by every rank at init and carried in the listen handle, so that
 * connect() can check that every rank names the same job; the rank and
 * world are connect()'s; the token comes from TALLY_TOKEN or
 * TALLY_TOKEN_FILE (token.c), never from a handle. connect() joins
 * through tallyd (blocking at its barrier, as NCCL expects of it); when
 * tally is unreachable it says so in one WARN line and fails, and NCCL
 * goes on without CollNet.
 *
 * What it reduces: sums of f32 (shared-scale fixed point, the same bits
 * on every rank, whatever codec the job names: a lossy codec is never
 * applied under NCCL), i32 and u32 (exact, wrapping), and on host memory
 * bf16 and f16 (fixed point, the exact integer sum rounded once to the
 * type: the same bits on every rank). libtally has no device path for
 * the 16-bit types, so once device memory is offered (TALLY_NCCL_CUDA=1)
 * reduceSupport refuses them rather than copy them to the host unseen.
 * reduceSupport says no to every other pair, and NCCL uses its rings and
 * trees for those.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <tally/tally.h>

#include "plugin.h"

#define HANDLE_MAGIC	"tallyCN1"
#define URL_CAP		(TALLY_NCCL_HANDLE_MAX - 8)

/* The listen handle: the job's URL as this rank was told it. */
struct coll_handle {
	char magic[8];
	char url[URL_CAP];
};

/* A collnet context (one an NCCL communicator): the URL of its job. */
struct coll_ctx {
	char url[URL_CAP];
};

struct coll_listen {
	struct coll_handle h;
};

/* A registration: where and what kind of memory. */
struct coll_mr {
	void *base;
	size_t size;
	int cuda;
};

struct coll_comm {
	struct tally_nccl_queue *q;
	int rank;
	char url[URL_CAP];
	struct coll_comm *next;	/* the process's live comms */
};

/*
 * The live comms of this process. A job holds one membership at a time:
 * a second communicator joining the same job would replace the first's
 * membership at tallyd and break it, so connect() refuses it here (NCCL
 * then runs that communicator without CollNet).
 */
static pthread_mutex_t live_mu = PTHREAD_MUTEX_INITIALIZER;
static struct coll_comm *live;

/* Adds c to the live list unless its URL is there; 0 or -EBUSY. */
static int
live_add(struct coll_comm *c)
{
	int rc = 0;

	pthread_mutex_lock(&live_mu);
	for (struct coll_comm *i = live; i != NULL && rc == 0; i = i->next)
		rc = strcmp(i->url, c->url) == 0 ? -EBUSY : 0;
	if (rc == 0) {
		c->next = live;
		live = c;
	}
	pthread_mutex_unlock(&live_mu);
	return rc;
}

/* Takes c off the live list. */
static void
live_remove(struct coll_comm *c)
{
	pthread_mutex_lock(&live_mu);
	for (struct coll_comm **i = &live; *i != NULL; i = &(*i)->next)
		if (*i == c) {
			*i = c->next;
			break;
		}
	pthread_mutex_unlock(&live_mu);
}

/* A request that is done at once: what iflush() returns. */
static char flushed;

/* init: reads TALLY_URL; without it the collnet stays off (not an error
 * worth a warning: the net works alone). */
int
tally_nccl_coll_init(void **ctx, uint64_t comm_id, tally_nccl_logger log)
{
	const char *url = getenv("TALLY_URL");
	struct coll_ctx *c;

	(void)comm_id;
	tally_nccl_set_logger(log);
	if (ctx == NULL)
		return TALLY_NCCL_INVALID_ARGUMENT;
	*ctx = NULL;
	if (url == NULL || url[0] == '\0') {
		TN_INFO("TALLY_URL is not set: no CollNet through tally");
		return TALLY_NCCL_INTERNAL_ERROR;
	}
	if (strlen(url) >= URL_CAP || strncmp(url, "tally://", 8) != 0) {
		TN_WARN("TALLY_URL must be tally://HOST[:PORT]/JOB, at most "
			"%d characters: no CollNet through tally", URL_CAP - 1);
		return TALLY_NCCL_INTERNAL_ERROR;
	}
	if ((c = calloc(1, sizeof(*c))) == NULL)
		return TALLY_NCCL_SYSTEM_ERROR;
	strcpy(c->url, url);
	*ctx = c;
	TN_INFO("CollNet through %s", c->url);
	return TALLY_NCCL_SUCCESS;
}

/* finalize: frees the context. */
int
tally_nccl_coll_finalize(void *ctx)
{
	free(ctx);
	return TALLY_NCCL_SUCCESS;
}

/* listen: the handle carries the job's URL (no token). */
int
tally_nccl_coll_listen(void *ctx, int dev, void *handle, void **lcomm)
{
	struct coll_ctx *c = ctx;
	struct coll_listen *l;

	if (c == NULL || dev != 0 || handle == NULL || lcomm == NULL)
		return TALLY_NCCL_INVALID_ARGUMENT;
	if ((l = calloc(1, sizeof(*l))) == NULL)
		return TALLY_NCCL_SYSTEM_ERROR;
	memcpy(l->h.magic, HANDLE_MAGIC, sizeof(l->h.magic));
	strcpy(l->h.url, c->url);
	memset(handle, 0, TALLY_NCCL_HANDLE_MAX);
	memcpy(handle, &l->h, sizeof(l->h));
	*lcomm = l;
	return TALLY_NCCL_SUCCESS;
}

/* closeListen. */
int
tally_nccl_coll_close_listen(void *lcomm)
{
	free(lcomm);
	return TALLY_NCCL_SUCCESS;
}

/* Every rank's handle is ours and names the same job as rank 0's. */
static int
handles_agree(void *handles[], int nranks, const char **url)
{
	const struct coll_handle *h0 = handles[0];

	for (int i = 0; i < nranks; i++) {
		const struct coll_handle *h = handles[i];

		if (h == NULL || memcmp(h->magic, HANDLE_MAGIC, 8) != 0 ||
		    memchr(h->url, '\0', URL_CAP) == NULL) {
			TN_WARN("rank %d's handle is not tally's", i);
			return -EPROTO;
		}
		if (strcmp(h->url, h0->url) != 0) {
			TN_WARN("ranks name different jobs: %s (rank 0) and "
				"%s (rank %d); set one TALLY_URL", h0->url,
				h->url, i);
			return -EINVAL;
		}
	}
	*url = h0->url;
	return 0;
}

/* Numbers from the environment for the context (0: libtally's default). */
static unsigned int
env_ms(const char *name)
{
	const char *v = getenv(name);

	return v != NULL ? (unsigned int)strtoul(v, NULL, 10) : 0;
}

/* Joins the job through tallyd as rank of nranks; NULL after a WARN. */
static struct tally_ctx *
join(const char *url, int rank, int nranks)
{
	struct tally_ctx_opts base = {
		.timeout_ms = env_ms("TALLY_TIMEOUT_MS"),
		.join_timeout_ms = env_ms("TALLY_JOIN_TIMEOUT_MS"),
	};
	char token[TALLY_NCCL_TOKEN_MAX], why[256];
	struct tally_ctx *ctx = NULL;
	int rc = tally_nccl_token(token, sizeof(token), why, sizeof(why));

	if (rc < 0) {
		TN_WARN("cannot join %s: %s; NCCL goes on without CollNet",
			url, why);
		return NULL;
	}
	rc = tally_open_opts(url, token, (unsigned int)rank,
		(unsigned int)nranks, &base, &ctx);
	explicit_bzero(token, sizeof(token));
	if (rc < 0) {
		TN_WARN("cannot join %s as rank %d of %d: %s (%s); NCCL goes "
			"on without CollNet", url, rank, nranks,
			tally_ctx_error(NULL), strerror(-rc));
		return NULL;
	}
	return ctx;
}

/*
 * Says what the job's codec means under NCCL, and the lanes libtally's
 * rule gives bf16 and f16 sums for the job's world and width (the plugin
 * never sets them: every rule's choice is one libtally takes).
 */
static void
codec_note(struct tally_ctx *ctx, const char *url)
{
	struct tally_ctx_info info;

	tally_ctx_info(ctx, &info);
	if (info.codec.kind != TALLY_CODEC_FIXP)
		TN_INFO("%s: the job's codec %s is lossy and not applied: "
			"f32 sums go through fixp", url,
			tally_codec_name(info.codec.kind));
	if (tally_nccl_cuda_enabled())
		TN_INFO("%s: device memory offered: bf16 and f16 stay on "
			"NCCL's rings", url);
	else
		TN_INFO("%s: bf16 sums in %u-bit lanes, f16 in %u-bit (world "
			"%u, %s results)", url, info.lanes_bf16,
			info.lanes_f16, info.world, info.narrow ? "narrow" :
			"wide");
}

/* connect: one blocking join of the group's job; a failure leaves NCCL
 * without CollNet for this communicator, nothing worse. */
int
tally_nccl_coll_connect(void *handles[], int nranks, int rank, void *lcomm,
	void **ccomm)
{
	struct coll_comm *c;
	struct tally_ctx *ctx;
	const char *url;

	(void)lcomm;
	if (handles == NULL || ccomm == NULL || nranks < 1 || rank < 0 ||
	    rank >= nranks)
		return TALLY_NCCL_INVALID_ARGUMENT;
	*ccomm = NULL;
	if (nranks > 64) {
		TN_WARN("%d nodes: a tally job has at most 64 members; NCCL "
			"goes on without CollNet", nranks);
		return TALLY_NCCL_INVALID_USAGE;
	}
	if (handles_agree(handles, nranks, &url) < 0)
		return TALLY_NCCL_INVALID_USAGE;
	if ((c = calloc(1, sizeof(*c))) == NULL)
		return TALLY_NCCL_SYSTEM_ERROR;
	strcpy(c->url, url);
	c->rank = rank;
	if (live_add(c) < 0) {
		TN_WARN("%s already carries another communicator of this "
			"process (a job holds one membership); NCCL goes on "
			"without CollNet for this one", url);
		free(c);
		return TALLY_NCCL_INVALID_USAGE;
	}
	if ((ctx = join(url, rank, nranks)) == NULL)
		goto fail;
	codec_note(ctx, url);
	if ((c->q = tally_nccl_queue_new(ctx)) == NULL) {
		TN_WARN("cannot start the request thread: %s",
			strerror(errno));
		tally_ctx_close(ctx);
		goto fail;
	}
	TN_INFO("joined %s as rank %d of %d", url, rank, nranks);
	*ccomm = c;
	return TALLY_NCCL_SUCCESS;
fail:
	live_remove(c);
	free(c);
	return TALLY_NCCL_SYSTEM_ERROR;
}

/* closeColl: runs what is queued, leaves the job, frees the comm. */
int
tally_nccl_coll_close(void *ccomm)
{
	struct coll_comm *c = ccomm;

	if (c != NULL) {
		tally_nccl_queue_destroy(c->q);
		live_remove(c);
		free(c);
	}
	return TALLY_NCCL_SUCCESS;
}

/*
 * TALLY_NCCL_16BIT=1: offer bf16 and f16 sums. Off by default: under
 * NCCL 2.28.9 itself on a GPU (tests/nccl/nccl_gpu_test.sh), a bf16
 * allreduce of 257 elements through CollNet came back as zeros, while
 * the harness's requests of the same size sum exactly; until that is
 * understood NCCL keeps the 16-bit types on its own rings.
 */
static int
sixteen_enabled(void)
{
	const char *v = getenv("TALLY_NCCL_16BIT");

	return v != NULL && strcmp(v, "1") == 0;
}

/*
 * Exactly what tally sums of NCCL's (type, op), as libtally's element
 * type: f32 (fixed point), i32 and u32 (wrapping, the same bits), and
 * with TALLY_NCCL_16BIT=1 where cuda is 0 (host memory) bf16 and f16
 * (fixed point, rounded once to the type). -1 for every other pair.
 */
static int
coll_dtype(int type, int op, int cuda)
{
	if (op != TALLY_NCCL_SUM)
		return -1;
	switch (type) {
	case TALLY_NCCL_FLOAT32:
		return TALLY_DT_F32;
	case TALLY_NCCL_INT32:
	case TALLY_NCCL_UINT32:
		return TALLY_DT_I32;
	case TALLY_NCCL_BFLOAT16:
		return cuda || !sixteen_enabled() ? -1 : TALLY_DT_BF16;
	case TALLY_NCCL_FLOAT16:
		return cuda || !sixteen_enabled() ? -1 : TALLY_DT_F16;
	default:
		return -1;
	}
}

/*
 * reduceSupport: 1 for the pairs above, 0 for every other (never an
 * error: that would turn CollNet off altogether). NCCL asks without
 * saying where the buffers are, so the 16-bit types count as on device
 * memory whenever ptrSupport offers it.
 */
int
tally_nccl_coll_reduce_support(int type, int op, int *supported)
{
	int cuda = (tally_nccl_coll_ptr_support() & TALLY_NCCL_PTR_CUDA) != 0;

	if (supported == NULL)
		return TALLY_NCCL_INVALID_ARGUMENT;
	*supported = coll_dtype(type, op, cuda) >= 0;
	return TALLY_NCCL_SUCCESS;
}

/* regMr: host memory always; device memory where cuda.c takes it. */
int
tally_nccl_coll_reg_mr(void *ccomm, void *data, size_t size, int type,
	void **mhandle)
{
	struct coll_mr *m;

	if (ccomm == NULL || mhandle == NULL || (data == NULL && size > 0))
		return TALLY_NCCL_INVALID_ARGUMENT;
	if (type != TALLY_NCCL_PTR_HOST &&
	    !(type == TALLY_NCCL_PTR_CUDA && tally_nccl_cuda_enabled())) {
		TN_WARN("regMr: memory of type %d is not taken here (see "
			"ptrSupport)", type);
		return TALLY_NCCL_INVALID_USAGE;
	}
	if ((m = calloc(1, sizeof(*m))) == NULL)
		return TALLY_NCCL_SYSTEM_ERROR;
	m->base = data;
	m->size = size;
	m->cuda = type == TALLY_NCCL_PTR_CUDA;
	*mhandle = m;
	return TALLY_NCCL_SUCCESS;
}

/* regMrDmaBuf: as regMr; libtally stages device memory itself, so the
 * dma-buf fd is not needed. */
int
tally_nccl_coll_reg_mr_dmabuf(void *ccomm, void *data, size_t size, int type,
	uint64_t offset, int fd, void **mhandle)
{
	(void)offset;
	(void)fd;
	return tally_nccl_coll_reg_mr(ccomm, data, size, type, mhandle);
}

/* deregMr. */
int
tally_nccl_coll_dereg_mr(void *ccomm, void *mhandle)
{
	(void)ccomm;
	free(mhandle);
	return TALLY_NCCL_SUCCESS;
}

/* iallreduce: queues send -> recv; a NULL request when the queue is full
 * (NCCL posts it again later). */
int
tally_nccl_coll_iallreduce(void *ccomm, void *send, void *recv,
	size_t count, int type, int op, void *send_mh, void *recv_mh,
	void **request)
{
	struct coll_comm *c = ccomm;
	const struct coll_mr *rm = recv_mh, *sm = send_mh;
	int cuda = rm != NULL && rm->cuda;
	int dt = coll_dtype(type, op, cuda);

	if (c == NULL || request == NULL ||
	    (count > 0 && (send == NULL || recv == NULL)) ||
	    count > UINT32_MAX)
		return TALLY_NCCL_INVALID_ARGUMENT;
	if (dt < 0) {
		TN_WARN("iallreduce of type %d op %d on %s memory, which "
			"reduceSupport refused", type, op, cuda ? "device" :
			"host");
		return TALLY_NCCL_INVALID_USAGE;
	}
	if (sm != NULL && sm->cuda != cuda) {
		TN_WARN("iallreduce between host and device memory");
		return TALLY_NCCL_INVALID_USAGE;
	}
	*request = tally_nccl_queue_post(c->q, send, recv, count,
		(enum tally_dtype)dt, cuda);
	return TALLY_NCCL_SUCCESS;
}

/* iflush: the result is in place when test() said done. */
int
tally_nccl_coll_iflush(void *ccomm, void *data, int size, void *mhandle,
	void **request)
{
	(void)ccomm;
	(void)data;
	(void)size;
	(void)mhandle;
	if (request != NULL)
		*request = &flushed;
	return TALLY_NCCL_SUCCESS;
}

/* test: done once libtally returned; its failure is an NCCL error with
 * libtally's sentence in a WARN line (a missing rank: -ETIMEDOUT after
 * the context's timeout, never a hang). */
int
tally_nccl_coll_test(void *request, int *done, int *size)
{
	char why[256];
	size_t bytes = 0;
	int rc;

	if (request == NULL || done == NULL)
		return TALLY_NCCL_INVALID_ARGUMENT;
	if (request == &flushed) {
		*done = 1;
		if (size != NULL)
			*size = 0;
		return TALLY_NCCL_SUCCESS;
	}
	rc = tally_nccl_req_test(request, done, &bytes, why, sizeof(why));
	if (rc < 0) {
		TN_WARN("allreduce failed: %s (%s)", why, strerror(-rc));
		return TALLY_NCCL_REMOTE_ERROR;
	}
	if (*done && size != NULL)
		*size = (int)(bytes > INT32_MAX ? INT32_MAX : bytes);
	return TALLY_NCCL_SUCCESS;
}

/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The point-to-point net's transfers (sock.c made the connections): a
 * comm's requests in a ring of TALLY_NCCL_MAX_REQUESTS, moved in posting
 * order by test() with non-blocking socket calls; a request's slot is
 * reused once test() reported it done. Host memory only (the net's
 * ptrSupport), so registration records nothing and flush has nothing to
 * do.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "plugin.h"
#include "sock.h"

/* A request that is done at once: what iflush() returns. */
static struct sock_req flushed = { .done = 1 };

/* regMr: host memory only; the handle is a placeholder NCCL passes back. */
int
tally_nccl_sock_reg_mr(void *comm, void *data, size_t size, int type,
	void **mhandle)
{
	static int mr;

	(void)data;
	(void)size;
	if (comm == NULL || mhandle == NULL)
		return TALLY_NCCL_INVALID_ARGUMENT;
	if (type != TALLY_NCCL_PTR_HOST) {
		TN_WARN("regMr: the net takes host memory only (type %d)",
			type);
		return TALLY_NCCL_INVALID_USAGE;
	}
	*mhandle = &mr;
	return TALLY_NCCL_SUCCESS;
}

/* regMrDmaBuf: as regMr (the fd is not needed for host memory). */
int
tally_nccl_sock_reg_mr_dmabuf(void *comm, void *data, size_t size, int type,
	uint64_t offset, int fd, void **mhandle)
{
	(void)offset;
	(void)fd;
	return tally_nccl_sock_reg_mr(comm, data, size, type, mhandle);
}

/* deregMr: nothing was held. */
int
tally_nccl_sock_dereg_mr(void *comm, void *mhandle)
{
	(void)comm;
	(void)mhandle;
	return TALLY_NCCL_SUCCESS;
}

/* A free slot at the ring's tail, or NULL when all are in use. */
static struct sock_req *
req_take(struct sock_comm *c)
{
	struct sock_req *r;

	if (c->tail - c->head >= TALLY_NCCL_MAX_REQUESTS)
		return NULL;
	r = &c->reqs[c->tail++ % TALLY_NCCL_MAX_REQUESTS];
	memset(r, 0, sizeof(*r));
	r->c = c;
	r->busy = 1;
	return r;
}

/* isend: queues size bytes of data with tag; NULL request when full. */
int
tally_nccl_sock_isend(void *scomm, void *data, size_t size, int tag,
	void *mhandle, void *phandle, void **request)
{
	struct sock_comm *c = scomm;
	struct sock_req *r;

	(void)mhandle;
	(void)phandle;
	if (c == NULL || !c->is_send || request == NULL ||
	    (data == NULL && size > 0) || size > UINT32_MAX)
		return TALLY_NCCL_INVALID_ARGUMENT;
	*request = NULL;
	if ((r = req_take(c)) == NULL)
		return TALLY_NCCL_SUCCESS;
	r->data = data;
	r->size = size;
	r->tag = tag;
	for (int i = 0; i < 4; i++) {
		r->hdr[i] = (uint8_t)(size >> (8 * i));
		r->hdr[4 + i] = (uint8_t)((uint32_t)tag >> (8 * i));
	}
	*request = r;
	return TALLY_NCCL_SUCCESS;
}

/* irecv: one buffer a request (the device's maxRecvs is 1). */
int
tally_nccl_sock_irecv(void *rcomm, int n, void **data, size_t *sizes,
	int *tags, void **mhandles, void **phandles, void **request)
{
	struct sock_comm *c = rcomm;
	struct sock_req *r;

	(void)mhandles;
	(void)phandles;
	if (c == NULL || c->is_send || n != 1 || data == NULL ||
	    sizes == NULL || request == NULL)
		return TALLY_NCCL_INVALID_ARGUMENT;
	*request = NULL;
	if ((r = req_take(c)) == NULL)
		return TALLY_NCCL_SUCCESS;
	r->data = data[0];
	r->size = sizes[0];
	r->tag = tags != NULL ? tags[0] : 0;
	*request = r;
	return TALLY_NCCL_SUCCESS;
}

/* iflush: host memory is visible as soon as it arrived. */
int
tally_nccl_sock_iflush(void *rcomm, int n, void **data, int *sizes,
	void **mhandles, void **request)
{
	(void)rcomm;
	(void)n;
	(void)data;
	(void)sizes;
	(void)mhandles;
	if (request != NULL)
		*request = &flushed;
	return TALLY_NCCL_SUCCESS;
}

/* Moves r's header and bytes out; 1 done, 0 would block, -errno. */
static int
send_some(struct sock_comm *c, struct sock_req *r)
{
	while (r->off < HDR_LEN + r->size) {
		struct iovec iov[2];
		struct msghdr m = { .msg_iov = iov };
		ssize_t k;

		if (r->off < HDR_LEN) {
			iov[0] = (struct iovec){ r->hdr + r->off,
				HDR_LEN - r->off };
			iov[1] = (struct iovec){ r->data, r->size };
			m.msg_iovlen = r->size > 0 ? 2 : 1;
		} else {
			iov[0] = (struct iovec){ (char *)r->data + r->off -
				HDR_LEN, r->size - (r->off - HDR_LEN) };
			m.msg_iovlen = 1;
		}
		k = sendmsg(c->fd, &m, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (k < 0)
			return errno == EAGAIN || errno == EINTR ? 0 : -errno;
		r->off += (size_t)k;
	}
	return 1;
}

/* Reads r's header, then its bytes; 1 done, 0 would block, -errno. */
static int
recv_some(struct sock_comm *c, struct sock_req *r)
{
	while (r->off < HDR_LEN || r->off < HDR_LEN + r->len) {
		char *to = r->off < HDR_LEN ? (char *)r->hdr + r->off :
			(char *)r->data + r->off - HDR_LEN;
		size_t want = r->off < HDR_LEN ? HDR_LEN - r->off :
			HDR_LEN + r->len - r->off;
		ssize_t k = recv(c->fd, to, want, MSG_DONTWAIT);

		if (k == 0)
			return -ECONNRESET;
		if (k < 0)
			return errno == EAGAIN || errno == EINTR ? 0 : -errno;
		r->off += (size_t)k;
		if (r->off == HDR_LEN) {
			r->len = (size_t)r->hdr[0] | (size_t)r->hdr[1] << 8 |
				(size_t)r->hdr[2] << 16 |
				(size_t)r->hdr[3] << 24;
			if (r->len > r->size)
				return -EMSGSIZE;
		}
	}
	return 1;
}

/* Moves the comm's requests in order as far as the socket lets. */
static void
progress(struct sock_comm *c)
{
	while (c->err == 0 && c->next != c->tail) {
		struct sock_req *r = &c->reqs[c->next % TALLY_NCCL_MAX_REQUESTS];
		int rc = c->is_send ? send_some(c, r) : recv_some(c, r);

		if (rc < 0)
			c->err = rc;
		if (rc <= 0)
			return;
		r->done = 1;
		c->next++;
	}
}

/* test: progresses the request's comm; done requests are released. */
int
tally_nccl_sock_test(void *request, int *done, int *sizes)
{
	struct sock_req *r = request;
	struct sock_comm *c;

	if (r == NULL || done == NULL)
		return TALLY_NCCL_INVALID_ARGUMENT;
	if (r == &flushed) {
		*done = 1;
		return TALLY_NCCL_SUCCESS;
	}
	c = r->c;
	progress(c);
	*done = r->done;
	if (!r->done && c->err != 0) {
		TN_WARN("%s: %s", c->is_send ? "send" : "receive",
			c->err == -EMSGSIZE ? "a message larger than the "
			"posted receive" : strerror(-c->err));
		return TALLY_NCCL_SYSTEM_ERROR;
	}
	if (!r->done)
		return TALLY_NCCL_SUCCESS;
	if (sizes != NULL)
		sizes[0] = (int)(c->is_send ? r->size : r->len);
	r->busy = 0;
	while (c->head != c->next &&
	       !c->reqs[c->head % TALLY_NCCL_MAX_REQUESTS].busy)
		c->head++;
	return TALLY_NCCL_SUCCESS;
}

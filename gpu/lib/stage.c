/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The staging of device tensors: a context's pinned block, set up once,
 * and the pipeline that moves a tensor through it a segment at a time.
 *
 * The block is one page-aligned allocation of pinned host memory that
 * the device maps (so that kernels write encoded segments straight into
 * it, and read sums straight out of it, with no copy in between, and so
 * that an RDMA NIC can later register it once and read it): buffer 0's
 * contributions area, its sums area, buffer 1's two areas, each a whole
 * number of pages holding a segment of the widest encoding (4 bytes an
 * element), then one page for the scalars the host reads (the MAX
 * round's maximum).
 *
 * The pipeline (tally_lib_stage_run()): segment i uses buffer i % 2.
 * Segments 0 and 1 are encoded first; then, for each segment, the host
 * waits for its encoding (an event), sends it through the window, and
 * enqueues its decoding and, after that on the same stream, the encoding
 * of segment i + 2 into the same buffer. So while the host is on the
 * network with segment i, the device decodes segment i - 1 and encodes
 * segment i + 1 (in the other buffer), and nothing writes a buffer that
 * is still being read: stream order puts a buffer's next encoding after
 * its decoding, and the host receives into a buffer only after waiting
 * for that encoding.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dev.h"

static uint64_t
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/*
 * TALLY_CUDA_SEGMENT from the environment, in elements: 0 when unset,
 * SIZE_MAX when it is not a number in 1 .. TALLY_DEV_SEG_MAX.
 */
static size_t
seg_env(void)
{
	const char *s = getenv("TALLY_CUDA_SEGMENT");
	unsigned long long v;
	char *end;

	if (s == NULL || *s == '\0')
		return 0;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno != 0 || *end != '\0' || *s == '-' || v == 0 ||
			v > TALLY_DEV_SEG_MAX)
		return SIZE_MAX;
	return (size_t)v;
}

size_t
tally_lib_dev_seg(const struct tally_ctx *ctx, size_t seg)
{
	size_t e = ctx->elems;

	if (ctx->dev != NULL)
		return ctx->dev->seg;
	if (seg == 0)
		seg = seg_env();
	if (seg == 0 || seg == SIZE_MAX)
		seg = TALLY_DEV_SEG_DEFAULT;
	return (seg + e - 1) / e * e;
}

/* Carves d's block into its areas and scalar page. */
static void
lay_out(struct tally_dev *d)
{
	uint8_t *h = d->block, *v = d->block_dev;

	for (unsigned int b = 0; b < 2; b++) {
		d->tx[b] = h + (2 * b) * d->area;
		d->rx[b] = h + (2 * b + 1) * d->area;
		d->tx_dev[b] = v + (2 * b) * d->area;
		d->rx_dev[b] = v + (2 * b + 1) * d->area;
	}
	d->scalar = (float *)(void *)(h + 4 * d->area);
	d->scalar_dev = v + 4 * d->area;
}

/* The block, the events and the scalar's scratch of d (d->seg set). */
static int
set_up(struct tally_ctx *ctx, struct tally_dev *d)
{
	const struct tally_dev_ops *o = d->ops;
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	int rc;

	d->area = (d->seg * 4 + page - 1) / page * page;
	d->block_len = 4 * d->area + page;
	rc = o->stage_alloc(d->block_len, &d->block, &d->block_dev);
	if (rc != 0) {
		d->block = NULL;
		return tally_lib_dev_fail(ctx, rc, "pinning the staging");
	}
	if ((uintptr_t)d->block % page != 0) {
		rc = tally_ctx_fail(ctx, -EFAULT, "%s staging at %p is not "
			"page-aligned", o->name, d->block);
		o->stage_free(d->block);
		d->block = NULL;
		return rc;
	}
	lay_out(d);
	rc = o->event_new(&d->ev[0]);
	if (rc == 0)
		rc = o->event_new(&d->ev[1]);
	if (rc == 0)
		rc = o->event_new(&d->ev_scalar);
	if (rc == 0)
		rc = o->event_new(&d->ev_last);
	if (rc == 0)
		rc = o->dev_alloc(sizeof(float), &d->scratch[TALLY_DEV_SCR_SCALAR]);
	if (rc != 0)
		return tally_lib_dev_fail(ctx, rc, "creating the staging's "
			"events");
	d->scratch_len[TALLY_DEV_SCR_SCALAR] = sizeof(float);
	return 0;
}

int
tally_lib_dev_bind(struct tally_ctx *ctx, const struct tally_dev_ops *ops,
	size_t seg)
{
	struct tally_dev *d;
	int rc;

	if (ctx->dev != NULL)
		return ctx->dev->ops == ops ? 0 : tally_ctx_fail(ctx, -EINVAL,
			"this context's device tensors go through %s, not %s",
			ctx->dev->ops->name, ops->name);
	if (seg == 0 && seg_env() == SIZE_MAX)
		return tally_ctx_fail(ctx, -EINVAL, "TALLY_CUDA_SEGMENT=%s: "
			"not a number of elements in 1 .. %u",
			getenv("TALLY_CUDA_SEGMENT"), TALLY_DEV_SEG_MAX);
	d = calloc(1, sizeof(*d));
	if (d == NULL)
		return tally_ctx_fail(ctx, -ENOMEM, "out of memory");
	d->ops = ops;
	d->seg = tally_lib_dev_seg(ctx, seg);
	ctx->dev = d;	/* so that failures can name the ops */
	rc = ops->device(&d->device);
	if (rc != 0)
		rc = tally_lib_dev_fail(ctx, rc, "finding the current device");
	else
		rc = set_up(ctx, d);
	if (rc != 0) {
		ctx->dev = NULL;
		tally_lib_dev_free(d);
	}
	return rc;
}

void
tally_lib_dev_free(struct tally_dev *d)
{
	const struct tally_dev_ops *o;

	if (d == NULL)
		return;
	o = d->ops;
	if (d->last_pending)
		(void)o->sync(d->ev_last);
	tally_state_free(d->state);
	for (unsigned int k = 0; k < TALLY_DEV_SCR_MAX_; k++)
		if (d->scratch[k] != NULL)
			o->dev_free(d->scratch[k]);
	if (d->ev[0] != NULL)
		o->event_free(d->ev[0]);
	if (d->ev[1] != NULL)
		o->event_free(d->ev[1]);
	if (d->ev_scalar != NULL)
		o->event_free(d->ev_scalar);
	if (d->ev_last != NULL)
		o->event_free(d->ev_last);
	if (d->block != NULL)
		o->stage_free(d->block);
	free(d);
}

int
tally_lib_dev_scratch(struct tally_ctx *ctx, enum tally_dev_scratch k,
	size_t len)
{
	struct tally_dev *d = ctx->dev;
	void *p;
	int rc;

	if (d->scratch_len[k] >= len)
		return 0;
	/* The last call's work may still read it (randk's scatter). */
	if (d->last_pending && (rc = d->ops->sync(d->ev_last)) != 0)
		return tally_lib_dev_fail(ctx, rc, "waiting for the last "
			"call's work");
	rc = d->ops->dev_alloc(len, &p);
	if (rc != 0)
		return tally_lib_dev_fail(ctx, rc, "allocating scratch");
	if (d->scratch[k] != NULL)
		d->ops->dev_free(d->scratch[k]);
	d->scratch[k] = p;
	d->scratch_len[k] = len;
	return 0;
}

/* Segment i of j: where it starts and how long it is. */
static size_t
seg_count(const struct tally_ctx *ctx, const struct tally_stage_job *j,
	size_t i)
{
	size_t off = i * ctx->dev->seg, left = j->n - off;

	return left < ctx->dev->seg ? left : ctx->dev->seg;
}

/* Enqueues segment i's encoding into buffer i % 2, then its event. */
static int
enqueue(struct tally_ctx *ctx, const struct tally_stage_job *j, size_t i)
{
	struct tally_dev *d = ctx->dev;
	unsigned int b = i % 2;
	int rc;

	rc = j->encode(j, i * d->seg, seg_count(ctx, j, i), d->tx_dev[b]);
	if (rc == 0)
		rc = d->ops->record(d->ev[b], j->stream);
	return rc != 0 ? tally_lib_dev_fail(ctx, rc, "encoding a segment") :
		0;
}

/*
 * Sends segment i: waits for its encoding, then runs it through the
 * window from buffer i % 2's contributions area into its sums area.
 */
static int
send_segment(struct tally_ctx *ctx, const struct tally_stage_job *j, size_t i)
{
	struct tally_dev *d = ctx->dev;
	unsigned int b = i % 2;
	struct tally_round r = {
		.type = TALLY_PT_SUM, .enc = j->enc,
		.scale_exp = j->scale_exp,
		.src = d->tx[b], .dst = d->rx[b], .n = seg_count(ctx, j, i),
	};
	uint64_t t0 = now_ns(), t1;
	int rc;

	rc = d->ops->sync(d->ev[b]);
	t1 = now_ns();
	ctx->st.cuda_wait_ns += t1 - t0;
	if (rc != 0)
		return tally_lib_dev_fail(ctx, rc, "waiting for a segment's "
			"encoding");
	rc = tally_lib_run(ctx, &r);
	ctx->st.cuda_net_ns += now_ns() - t1;
	if (rc != 0)
		return rc;
	ctx->st.cuda_segments++;
	ctx->st.cuda_staged_bytes += tally_enc_payload_len(j->enc, r.n);
	return 0;
}

int
tally_lib_stage_run(struct tally_ctx *ctx, const struct tally_stage_job *j)
{
	struct tally_dev *d = ctx->dev;
	size_t nseg = (j->n + d->seg - 1) / d->seg, i;
	int rc = 0;

	for (i = 0; i < nseg && i < 2 && rc == 0; i++)
		rc = enqueue(ctx, j, i);
	for (i = 0; i < nseg && rc == 0; i++) {
		rc = send_segment(ctx, j, i);
		if (rc != 0)
			break;
		rc = j->decode(j, i * d->seg, seg_count(ctx, j, i),
			d->rx_dev[i % 2]);
		if (rc != 0)
			rc = tally_lib_dev_fail(ctx, rc, "decoding a segment");
		else if (i + 2 < nseg)
			rc = enqueue(ctx, j, i + 2);
	}
	return rc;
}

/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Device tensors through the job's codec: the checks every device call
 * starts with, the dispatch to the codecs' device steps, and the two
 * that need no codec of their own: plain i32 sums (staged as they are)
 * and shared-scale fixed point (the absmax kernel, the MAX round, then
 * the fixp kernels around a staged i32 sum). The quantizers and votes
 * are in devquant.c, random-k and PowerSGD in devfactor.c; each mirrors
 * its host version (codecs.c, powersgd.c) step for step, with the same
 * checks, draws and rounds, so every rank gets the host path's bits.
 */
#include <errno.h>
#include <string.h>

#include <tally/fixp.h>

#include "dev.h"

int
tally_lib_dev_fail(struct tally_ctx *ctx, int rc, const char *what)
{
	const struct tally_dev_ops *o = ctx->dev != NULL ? ctx->dev->ops :
		NULL;
	const char *why = o != NULL ? o->why() : "";

	return tally_ctx_fail(ctx, rc, "%s: %s: %s%s%s%s", o != NULL ?
		o->name : "device", what, strerror(-rc), *why ? " (" : "", why,
		*why ? ")" : "");
}

int
tally_lib_dev_codec_ok(struct tally_ctx *ctx, const struct tally_codec *c)
{
	const char *why;

	switch (c->kind) {
	case TALLY_CODEC_SPARSE:
		why = "its blocks are chosen and streamed from host memory";
		break;
	case TALLY_CODEC_SIGN:
		if (!c->ef)
			return 0;
		why = "with error feedback its scale is a mean |v| summed in "
			"the host's order";
		break;
	default:
		return 0;
	}
	if (ctx == NULL)
		return -EOPNOTSUPP;
	return tally_ctx_fail(ctx, -EOPNOTSUPP, "codec %s%s has no GPU path "
		"in this libtally (%s): reduce a host copy of the tensor "
		"with tally_allreduce_state()", tally_codec_name(c->kind),
		c->ef ? ",ef=1" : "", why);
}

unsigned int
tally_lib_cuda_path(const struct tally_ctx *ctx)
{
	const struct tally_dev_ops *o = tally_lib_cuda_ops();
	int id;

	if (ctx->dev == NULL) {
		if (o == NULL)
			return TALLY_CUDA_PATH_NONE;
		if (o->device(&id) != 0)
			return TALLY_CUDA_PATH_NODEV;
	}
	if (tally_lib_dev_codec_ok(NULL, &ctx->codec) != 0)
		return TALLY_CUDA_PATH_CODEC;
	return TALLY_CUDA_PATH_STAGED;
}

int
tally_lib_dev_absmax(struct tally_ctx *ctx, const float *d_x, size_t n,
	void *stream, float *out)
{
	struct tally_dev *d = ctx->dev;
	const struct tally_dev_ops *o = d->ops;
	float *d_s = d->scratch[TALLY_DEV_SCR_SCALAR];
	int rc;

	rc = o->absmax(d_x, n, d_s, stream);
	if (rc == 0)
		rc = o->copy(d->scalar_dev, d_s, sizeof(*d_s), stream);
	if (rc == 0)
		rc = o->record(d->ev_scalar, stream);
	if (rc == 0)
		rc = o->sync(d->ev_scalar);
	if (rc != 0)
		return tally_lib_dev_fail(ctx, rc, "the largest |x|");
	return tally_lib_max_round(ctx, *d->scalar, out);
}

int
tally_lib_dev_keep(struct tally_ctx *ctx, float *resid, const float *d_buf,
	size_t n, void *stream, int rc)
{
	int rc2;

	if (resid == NULL)
		return rc;
	rc2 = ctx->dev->ops->copy(resid, d_buf, n * sizeof(float), stream);
	return rc2 != 0 ? tally_lib_dev_fail(ctx, rc2, "keeping the "
		"residual") : rc;
}

/* fixp's segment hooks: j->arg is the tensor. */
static int
fixp_encode(const struct tally_stage_job *j, size_t off, size_t count,
	void *tx)
{
	return j->ops->fixp_encode((const float *)j->arg + off, tx, count,
		j->scale_exp, j->stream);
}

static int
fixp_decode(const struct tally_stage_job *j, size_t off, size_t count,
	const void *rx)
{
	return j->ops->fixp_decode(rx, (float *)j->arg + off, count,
		j->scale_exp, j->stream);
}

int
tally_lib_dev_fixp_sum(struct tally_ctx *ctx, float *d_buf, size_t n,
	void *stream, int *e)
{
	struct tally_stage_job j = {
		.enc = TALLY_ENC_I32, .n = n, .stream = stream,
		.encode = fixp_encode, .decode = fixp_decode,
		.ops = ctx->dev->ops, .arg = d_buf,
	};
	float global;
	int rc;

	rc = tally_lib_dev_absmax(ctx, d_buf, n, stream, &global);
	if (rc != 0)
		return rc;
	if (tally_fixp_exponent_total(global, ctx->scale_world, e) != 0)
		return tally_ctx_fail(ctx, -ERANGE, "the largest |x| over "
			"all ranks is %g: no fixed-point scale for it", global);
	j.scale_exp = (int16_t)*e;
	return tally_lib_stage_run(ctx, &j);
}

/* i32's segment hooks: copies to and from the staging. */
static int
i32_encode(const struct tally_stage_job *j, size_t off, size_t count,
	void *tx)
{
	return j->ops->copy(tx, (const int32_t *)j->arg + off,
		count * sizeof(int32_t), j->stream);
}

static int
i32_decode(const struct tally_stage_job *j, size_t off, size_t count,
	const void *rx)
{
	return j->ops->copy((int32_t *)j->arg + off, rx,
		count * sizeof(int32_t), j->stream);
}

static int
dev_i32(struct tally_ctx *ctx, int32_t *d_buf, size_t n, void *stream)
{
	struct tally_stage_job j = {
		.enc = TALLY_ENC_I32, .n = n, .stream = stream,
		.encode = i32_encode, .decode = i32_decode,
		.ops = ctx->dev->ops, .arg = d_buf,
	};

	return tally_lib_stage_run(ctx, &j);
}

/* The job's codec on d_buf with st's memory (NULL: none). */
static int
apply(struct tally_ctx *ctx, struct tally_state *st, float *d_buf, size_t n,
	void *stream)
{
	int e;

	switch (ctx->codec.kind) {
	case TALLY_CODEC_FIXP:
		return tally_lib_dev_fixp_sum(ctx, d_buf, n, stream, &e);
	case TALLY_CODEC_Q16:
		return tally_lib_dev_quant(ctx, st, d_buf, n, stream, 16);
	case TALLY_CODEC_Q8:
		return tally_lib_dev_quant(ctx, st, d_buf, n, stream, 8);
	case TALLY_CODEC_Q4:
		return tally_lib_dev_quant(ctx, st, d_buf, n, stream, 4);
	case TALLY_CODEC_TERNARY:
	case TALLY_CODEC_2BIT:
	case TALLY_CODEC_SIGN:
		return tally_lib_dev_vote(ctx, st, d_buf, n, stream,
			ctx->codec.kind);
	case TALLY_CODEC_RANDK:
		return tally_lib_dev_randk(ctx, st, d_buf, n, stream);
	case TALLY_CODEC_POWERSGD:
		return tally_lib_dev_powersgd(ctx, st, d_buf, n, stream);
	default:
		return tally_lib_dev_codec_ok(ctx, &ctx->codec);
	}
}

/*
 * tally_allreduce_cuda()'s memory: the context's device state for the
 * one tensor it is called with, made afresh for another length.
 */
static int
own_state(struct tally_ctx *ctx, size_t n, struct tally_state **out)
{
	struct tally_dev *d = ctx->dev;
	int rc;

	*out = NULL;
	if (!tally_codec_has_memory(&ctx->codec))
		return 0;
	if (d->state != NULL && d->state->n != n) {
		tally_state_free(d->state);
		d->state = NULL;
	}
	if (d->state == NULL) {
		rc = tally_lib_dev_state_new(ctx, d->ops, n, &d->state);
		if (rc != 0)
			return rc;
	}
	*out = d->state;
	return 0;
}

/* The checks of a state given to a device call. */
static int
check_state(struct tally_ctx *ctx, const struct tally_dev_ops *ops,
	const struct tally_state *st, size_t n)
{
	int rc = tally_lib_check_state(ctx, st, n);

	if (rc != 0)
		return rc;
	if (st->dev != ops && tally_codec_has_memory(&st->codec))
		return tally_ctx_fail(ctx, -EINVAL, "the state is in host "
			"memory (tally_state_new()): a device tensor needs one "
			"of tally_state_new_cuda()");
	return 0;
}

/*
 * The call's device side: set up on the first call, the same device
 * since, and ordered after the last call's work (which may be on another
 * stream).
 */
static int
enter(struct tally_ctx *ctx, const struct tally_dev_ops *ops, void *stream)
{
	struct tally_dev *d;
	int rc, id;

	rc = tally_lib_dev_bind(ctx, ops, 0);
	if (rc != 0)
		return rc;
	d = ctx->dev;
	rc = ops->device(&id);
	if (rc != 0)
		return tally_lib_dev_fail(ctx, rc, "finding the current device");
	if (id != d->device)
		return tally_ctx_fail(ctx, -EINVAL, "this context's staging "
			"belongs to device %d, but device %d is current",
			d->device, id);
	if (d->last_pending && (rc = ops->stream_wait(stream, d->ev_last)))
		return tally_lib_dev_fail(ctx, rc, "ordering after the last "
			"call");
	return 0;
}

/* Reduces buf as what says, then marks the end of the call's work. */
static int
run(struct tally_ctx *ctx, enum tally_dev_what what, struct tally_state *st,
	void *buf, size_t n, void *stream)
{
	struct tally_dev *d = ctx->dev;
	int rc, rc2, e;

	switch (what) {
	case TALLY_DEV_I32:
		rc = dev_i32(ctx, buf, n, stream);
		break;
	case TALLY_DEV_F32:
		rc = tally_lib_dev_fixp_sum(ctx, buf, n, stream, &e);
		break;
	case TALLY_DEV_CODEC:
		rc = own_state(ctx, n, &st);
		if (rc == 0)
			rc = apply(ctx, st, buf, n, stream);
		break;
	default:
		rc = apply(ctx, tally_codec_has_memory(&st->codec) ? st : NULL,
			buf, n, stream);
		break;
	}
	/* Later calls, and the staging's release, wait for this. */
	rc2 = d->ops->record(d->ev_last, stream);
	d->last_pending = rc2 == 0;
	if (rc == 0 && rc2 != 0)
		rc = tally_lib_dev_fail(ctx, rc2, "recording the call's end");
	return rc;
}

int
tally_lib_dev_call(struct tally_ctx *ctx, const struct tally_dev_ops *ops,
	enum tally_dev_what what, struct tally_state *st, void *buf, size_t n,
	void *stream)
{
	uint64_t results;
	int rc;

	if (ctx == NULL)
		return -EINVAL;
	if (ops == NULL)
		return tally_ctx_fail(ctx, -EOPNOTSUPP, "this libtally was "
			"built without CUDA: it cannot reduce tensors in GPU "
			"memory (reduce a host copy with tally_allreduce())");
	if (what == TALLY_DEV_STATE && (rc = check_state(ctx, ops, st, n)))
		return rc;
	rc = tally_lib_check_call(ctx, buf, n);
	if (rc <= 0)
		return rc;
	if (what >= TALLY_DEV_CODEC &&
			(rc = tally_lib_dev_codec_ok(ctx, &ctx->codec)) != 0)
		return rc;
	rc = enter(ctx, ops, stream);
	if (rc != 0)
		return rc;
	ctx->st.cuda_calls++;
	results = ctx->st.results;
	rc = run(ctx, what, st, buf, n, stream);
	/* Failed after a round of its own: the others are mid-call. */
	if (rc != 0 && rc != -ERANGE && ctx->st.results != results)
		ctx->broken = 1;
	return rc;
}

int
tally_lib_dev_state_new(struct tally_ctx *ctx, const struct tally_dev_ops *ops,
	size_t n, struct tally_state **out)
{
	return tally_lib_dev_state_rows(ctx, ops, n, 0, out);
}

int
tally_lib_dev_state_rows(struct tally_ctx *ctx, const struct tally_dev_ops *ops,
	size_t n, uint32_t rows, struct tally_state **out)
{
	int rc;

	if (ctx == NULL)
		return -EINVAL;
	if (out != NULL)
		*out = NULL;
	if (ops == NULL)
		return tally_ctx_fail(ctx, -EOPNOTSUPP, "this libtally was "
			"built without CUDA: no codec memory on a device");
	rc = tally_lib_dev_codec_ok(ctx, &ctx->codec);
	if (rc == 0)
		rc = tally_lib_dev_bind(ctx, ops, 0);
	return rc != 0 ? rc : tally_lib_state_make(ctx, ops, n, rows,
		out);
}

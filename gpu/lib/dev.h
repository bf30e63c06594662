/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Device tensors, as libtally's files see them: the device boundary (an
 * ops table: memory, copies, events, kernels), a context's staging and
 * scratch, and the steps that run the job's codec on a device.
 *
 * Everything here is plain C: the CUDA ops table (cuda_ops.c) is one
 * implementation of struct tally_dev_ops, and tests drive the same code
 * with a fake device of host memory and queued, deferred operations
 * (tests/lib/fakedev.c), so the staging pipeline (stage.c) and the
 * codecs' device steps (devcodec.c, devquant.c, devfactor.c) are checked
 * against tally_allreduce() on a machine without a GPU.
 *
 * Addresses: "host" is where the CPU reads and writes (the window sends
 * from and receives into it); "dev" is what the device's operations take.
 * Staging has both (pinned host memory the device maps); device memory
 * (dev_alloc) and the caller's tensors have only dev addresses.
 */
#ifndef TALLY_LIB_DEV_H
#define TALLY_LIB_DEV_H

#include <stddef.h>
#include <stdint.h>

#include "ctx.h"

/*
 * The device: every operation returns 0 or a negative errno (-ENOMEM,
 * -ENODEV, -EIO, -EINVAL). "Enqueued" ones run on stream after what was
 * enqueued there before, and may not have run yet when they return;
 * record() and sync() are how the host learns they have. The kernels
 * have the signatures of the <tally/..._cuda.h> headers and give the
 * bits of the CPU functions of the same name.
 */
struct tally_dev_ops {
	const char *name;		/* "cuda", "fake" */
	/*
	 * len bytes of pinned host memory the device reads and writes:
	 * *host page-aligned and zeroed, *dev the device's address of it.
	 */
	int (*stage_alloc)(size_t len, void **host, void **dev);
	void (*stage_free)(void *host);
	/* len bytes of device memory, zeroed and ready when it returns. */
	int (*dev_alloc)(size_t len, void **d);
	void (*dev_free)(void *d);
	/* Enqueued: len bytes from src to dst (any of the addresses). */
	int (*copy)(void *dst, const void *src, size_t len, void *stream);
	/* Enqueued: len zero bytes at d. */
	int (*zero)(void *d, size_t len, void *stream);
	int (*event_new)(void **ev);
	void (*event_free)(void *ev);
	/* Marks in ev the point stream has reached in what is enqueued. */
	int (*record)(void *ev, void *stream);
	/* The host waits until the work before ev's mark has run. */
	int (*sync)(void *ev);
	/* Work enqueued on stream from now on waits for ev's mark. */
	int (*stream_wait)(void *stream, void *ev);
	/* The current device's number (staging and events belong to it). */
	int (*device)(int *id);
	/* Text of the last failure of a call above in this thread, "" if
	 * none since the last why() (kernels may leave none). */
	const char *(*why)(void);

	int (*absmax)(const float *d_x, size_t n, float *d_out, void *stream);
	int (*fixp_encode)(const float *d_x, int32_t *d_q, size_t n, int exp,
		void *stream);
	int (*fixp_decode)(const int32_t *d_q, float *d_x, size_t n, int exp,
		void *stream);
	int (*q16_encode)(const float *d_x, int16_t *d_q, size_t n,
		float scale, unsigned int levels, uint64_t seed,
		uint64_t offset, void *stream);
	int (*q8_encode)(const float *d_x, int8_t *d_q, size_t n,
		float scale, unsigned int levels, uint64_t seed,
		uint64_t offset, void *stream);
	int (*q4_encode)(const float *d_x, uint8_t *d_q, size_t n,
		float scale, unsigned int levels, uint64_t seed,
		uint64_t offset, void *stream);
	int (*q_decode_i32)(const int32_t *d_s, float *d_x, size_t n,
		float scale, void *stream);
	int (*q_decode_i16)(const int16_t *d_s, float *d_x, size_t n,
		float scale, void *stream);
	int (*q_decode_i8)(const int8_t *d_s, float *d_x, size_t n,
		float scale, void *stream);
	int (*q_decode_i4)(const uint8_t *d_s, float *d_x, size_t n,
		float scale, void *stream);
	int (*ef_apply)(float *d_v, const float *d_g, const float *d_r,
		size_t n, void *stream);
	int (*ef_update)(float *d_r, const float *d_v, const float *d_sent,
		size_t n, unsigned long long *d_inexact, void *stream);
	int (*twobit_encode_i4)(float *d_r, const float *d_g, uint8_t *d_q4,
		size_t n, int exp, void *stream);
	int (*tern_encode_i4)(const float *d_g, uint8_t *d_q4, size_t n,
		float scale, uint64_t seed, uint64_t offset, void *stream);
	int (*tern_decode_i32)(const int32_t *d_s, float *d_x, size_t n,
		float scale, void *stream);
	int (*tern_decode_i4)(const uint8_t *d_s, float *d_x, size_t n,
		float scale, void *stream);
	int (*sign_encode)(const float *d_x, uint8_t *d_bits, size_t n,
		void *stream);
	int (*sign_decode_votes)(const int8_t *d_votes, float *d_x, size_t n,
		unsigned int world, float scale, void *stream);
	int (*sign_decode_bits)(const uint8_t *d_bits, float *d_x, size_t n,
		float scale, void *stream);
	int (*randk_gather)(const float *d_x, float *d_y, uint64_t first,
		size_t cnt, uint64_t n, uint64_t seed, void *stream);
	int (*randk_scatter)(const float *d_y, float *d_x, uint64_t first,
		size_t cnt, uint64_t n, uint64_t seed, float scale,
		void *stream);
	int (*psgd_init_q)(float *d_q, uint32_t cols, unsigned int rank,
		uint64_t seed, void *stream);
	int (*psgd_p)(const float *d_m, size_t n, uint32_t rows,
		uint32_t cols, const float *d_q, unsigned int rank,
		float *d_p, void *stream);
	int (*psgd_orthonormalize)(float *d_p, uint32_t rows,
		unsigned int rank, void *stream);
	int (*psgd_q)(const float *d_m, size_t n, uint32_t rows,
		uint32_t cols, const float *d_p, unsigned int rank,
		float *d_q, void *stream);
	int (*psgd_decompress)(const float *d_p, const float *d_q,
		uint32_t rows, uint32_t cols, unsigned int rank, float scale,
		float *d_m, size_t n, void *stream);
};

/* The CUDA ops (cuda_ops.c), or NULL in a libtally built without CUDA. */
const struct tally_dev_ops *tally_lib_cuda_ops(void);

/* Segment of a context whose environment says nothing (elements). */
#define TALLY_DEV_SEG_DEFAULT	(1u << 20)
#define TALLY_DEV_SEG_MAX	(1u << 26)

/* Device scratch a context keeps, grown as calls need (dev.scratch[]). */
enum tally_dev_scratch {
	TALLY_DEV_SCR_SCALAR,	/* the MAX round's own maximum */
	TALLY_DEV_SCR_OWN,	/* error feedback: own encoding, decoded */
	TALLY_DEV_SCR_Y,	/* randk: the gathered values */
	TALLY_DEV_SCR_V,	/* randk: the residual's gathered values */
	TALLY_DEV_SCR_Q,	/* randk: their fixed point */
	TALLY_DEV_SCR_MAX_,
};

/*
 * A context's device side (ctx->dev): the ops it was first called with,
 * its staging (one pinned block: the areas of two buffers, then a page
 * for the host's scalars) and events, device scratch, and the memory of
 * tally_allreduce_cuda()'s one tensor.
 */
struct tally_dev {
	const struct tally_dev_ops *ops;
	int device;			/* the device it all belongs to */
	size_t seg;			/* elements a segment */
	size_t area;			/* bytes an area, a multiple of pages */
	void *block;			/* the staging block: host address */
	void *block_dev;		/* its device address */
	size_t block_len;
	uint8_t *tx[2], *rx[2];		/* a buffer's areas: encoded
					 * contributions, and sums (host) */
	void *tx_dev[2], *rx_dev[2];	/* the same, device addresses */
	float *scalar;			/* a pinned float (host) */
	void *scalar_dev;
	void *ev[2];			/* buffer b's encoding is done */
	void *ev_scalar;		/* the scalar is copied */
	void *ev_last;			/* the last call's work is done */
	int last_pending;		/* ev_last is recorded */
	void *scratch[TALLY_DEV_SCR_MAX_];
	size_t scratch_len[TALLY_DEV_SCR_MAX_];
	struct tally_state *state;	/* tally_allreduce_cuda()'s memory */
};

/* What a device call reduces (tally_lib_dev_call()). */
enum tally_dev_what {
	TALLY_DEV_I32,		/* tally_allreduce_i32_cuda() */
	TALLY_DEV_F32,		/* tally_allreduce_f32_cuda() */
	TALLY_DEV_CODEC,	/* tally_allreduce_cuda() */
	TALLY_DEV_STATE,	/* tally_allreduce_state_cuda() */
};

/*
 * The public device entry points' body, with the ops to use (NULL: a
 * libtally without CUDA): checks, sets up the context's device side on
 * the first call, then reduces buf (i32 or f32 as what says) on stream.
 * Returns 0 or a negative errno with ctx->err set.
 */
int tally_lib_dev_call(struct tally_ctx *ctx, const struct tally_dev_ops *ops,
	enum tally_dev_what what, struct tally_state *st, void *buf, size_t n,
	void *stream);

/*
 * tally_state_new_cuda()'s body with the ops to use: a state of n
 * elements for ctx's codec, its buffers in device memory, zeroed.
 */
int tally_lib_dev_state_new(struct tally_ctx *ctx,
	const struct tally_dev_ops *ops, size_t n, struct tally_state **out);

/*
 * tally_lib_dev_state_new() with PowerSGD's matrix rows (0: the job's;
 * tally_state_new_rows_cuda()).
 */
int tally_lib_dev_state_rows(struct tally_ctx *ctx,
	const struct tally_dev_ops *ops, size_t n, uint32_t rows,
	struct tally_state **out);

/*
 * tally_state_new_rows() of n elements with the buffers in dev's memory
 * (dev NULL: host memory; state.c).
 */
int tally_lib_state_make(struct tally_ctx *ctx, const struct tally_dev_ops *dev,
	size_t n, uint32_t rows, struct tally_state **out);

/*
 * Sets up ctx's device side with ops and a segment of seg elements (0:
 * TALLY_CUDA_SEGMENT from the environment, else TALLY_DEV_SEG_DEFAULT;
 * rounded up to a multiple of ctx->elems): the staging block and the
 * events. Done once; a context already set up keeps its own (and
 * refuses other ops with -EINVAL). Tests call it to pick small
 * segments. Returns 0 or a negative errno with ctx->err set.
 */
int tally_lib_dev_bind(struct tally_ctx *ctx, const struct tally_dev_ops *ops,
	size_t seg);

/* Frees a context's device side (waiting for its last work). NULL: ok. */
void tally_lib_dev_free(struct tally_dev *d);

/* The segment a context would take: seg rounded up, or the default. */
size_t tally_lib_dev_seg(const struct tally_ctx *ctx, size_t seg);

/* enum tally_cuda_path of ctx for its codec (tally_ctx_info()). */
unsigned int tally_lib_cuda_path(const struct tally_ctx *ctx);

/*
 * Whether the codec c has a device path: 0, or -EOPNOTSUPP with a
 * sentence in ctx->err (ctx may be NULL: then only the answer).
 */
int tally_lib_dev_codec_ok(struct tally_ctx *ctx, const struct tally_codec *c);

/*
 * Makes scratch k hold len bytes of device memory (kept, grown). Call
 * before anything of the call is enqueued: growing waits for the last
 * call's work. Returns 0 or -ENOMEM etc. with ctx->err set.
 */
int tally_lib_dev_scratch(struct tally_ctx *ctx, enum tally_dev_scratch k,
	size_t len);

/*
 * A device failure: records "<ops> what: strerror (why)" in ctx->err and
 * returns rc. (tally_lib_dev_call() marks the context broken when the
 * call failed after a round of its own had completed.)
 */
int tally_lib_dev_fail(struct tally_ctx *ctx, int rc, const char *what);

/*
 * The global max |x| of the n device floats at d_x (NaN as 0; 0 for
 * n == 0) over all ranks: the absmax kernel, its copy to the pinned
 * scalar, the host waits, then the MAX round.
 */
int tally_lib_dev_absmax(struct tally_ctx *ctx, const float *d_x, size_t n,
	void *stream, float *out);

/*
 * Nothing was sent (the scale round refused): resid = the tensor d_buf
 * (when resid is not NULL), so that this call's gradient is not lost.
 * Returns rc, or the copy's failure.
 */
int tally_lib_dev_keep(struct tally_ctx *ctx, float *resid, const float *d_buf,
	size_t n, void *stream, int rc);

/*
 * One staged sum (stage.c): n elements of a tensor in device memory, as
 * segments of ctx->dev->seg through the two staging buffers. encode
 * enqueues the encoding of elements [off, off + count) into tx (the
 * device address of a staging area, which the window then sends as
 * enc); decode enqueues the decoding of their sums, at rx in the result
 * encoding (tally_enc_result(enc, narrow)), back into the tensor. Both
 * on stream, both return 0 or a negative errno (the pipeline records
 * the error).
 */
struct tally_stage_job {
	uint8_t enc;		/* the contributions' encoding */
	int16_t scale_exp;	/* in every header */
	size_t n;		/* elements, 1 .. 2^32 - 1 */
	void *stream;		/* the caller's */
	int (*encode)(const struct tally_stage_job *j, size_t off,
		size_t count, void *tx);
	int (*decode)(const struct tally_stage_job *j, size_t off,
		size_t count, const void *rx);
	const struct tally_dev_ops *ops;
	void *arg;		/* the codec's */
};

/*
 * Runs j: encodes segments 0 and 1 into buffers 0 and 1; then for each
 * segment i, in buffer b = i % 2: waits for its encoding, sends it
 * through the window (tally_lib_run()), enqueues its decoding, and then
 * the encoding of segment i + 2 into b, so that the GPU encodes and
 * decodes while the host is on the network. (tally_lib_dev_call()
 * records ev_last after the whole call.) Returns 0 or a negative errno
 * with ctx->err set.
 */
int tally_lib_stage_run(struct tally_ctx *ctx, const struct tally_stage_job *j);

/*
 * The codecs over the device (devcodec.c, devquant.c, devfactor.c), as
 * their host versions in codecs.c and powersgd.c: buf is device memory,
 * st a device state or NULL. Called after the checks, with ctx->dev set
 * up.
 */
int tally_lib_dev_fixp_sum(struct tally_ctx *ctx, float *d_buf, size_t n,
	void *stream, int *e);
int tally_lib_dev_quant(struct tally_ctx *ctx, struct tally_state *st,
	float *d_buf, size_t n, void *stream, unsigned int bits);
int tally_lib_dev_vote(struct tally_ctx *ctx, struct tally_state *st,
	float *d_buf, size_t n, void *stream, enum tally_codec_kind kind);
int tally_lib_dev_randk(struct tally_ctx *ctx, struct tally_state *st,
	float *d_buf, size_t n, void *stream);
int tally_lib_dev_powersgd(struct tally_ctx *ctx, struct tally_state *st,
	float *d_buf, size_t n, void *stream);

#endif /* TALLY_LIB_DEV_H */

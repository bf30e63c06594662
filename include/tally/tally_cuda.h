/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libtally for tensors in GPU memory: the job's codec encodes on the GPU
 * (the kernels of the <tally/..._cuda.h> headers) straight into pinned
 * host staging that the GPU maps, the staged bytes go to the dataplane as
 * tally_allreduce() sends a host buffer's, and the sums are decoded on
 * the GPU, on the caller's stream. Every rank gets the bits
 * tally_allreduce() gives for the same data on the host.
 *
 * Staging: the first call on a context allocates one pinned, page-aligned
 * block (cudaHostAlloc, mapped and portable) and keeps it for the
 * context's life: two buffers, each with an area for the encoded
 * contributions and one for the sums, of a segment each (1 Mi elements
 * by default, TALLY_CUDA_SEGMENT=ELEMS in the environment to change it,
 * rounded up to a multiple of the context's elems; 16 MiB of pinned
 * memory at the default). A tensor goes as consecutive segments: while
 * segment i is on the network from one buffer, the GPU encodes segment
 * i + 1 into the other, and decodes segment i - 1's sums. One block
 * registered once is also what an RDMA NIC will read.
 *
 * Plain C over device pointers (d_ names); no CUDA header is needed to
 * include this. stream is a cudaStream_t (NULL: the legacy default
 * stream), and the current CUDA device must be the one d_buf lives on
 * (the same for every call on a context: its staging's events belong to
 * it). A call reads d_buf after the work enqueued on stream before it
 * (it waits for the scale round's maximum, so it blocks until that work
 * is done), and returns once every segment has been summed and its
 * decoding enqueued on stream: d_buf holds the result when the stream
 * gets there. Keep d_buf alive and untouched until then.
 *
 * What works where: codecs fixp, q16, q8, q4, ternary, 2bit, sign,
 * randk and powersgd, with their memory (ef=1, 2bit, powersgd) in a
 * state made by tally_state_new_cuda(); not yet "sparse" (block-sparse
 * streams) nor "sign,ef=1" (its scale is a mean in the host's summation
 * order): those return -EOPNOTSUPP with a sentence in tally_ctx_error(),
 * and tally_ctx_info()'s cuda_path says so beforehand. Nothing ever
 * falls back to a host copy of the tensor: a caller that does one must
 * say so itself.
 *
 * Built into libtally always; without CUDA (TALLY_HAVE_CUDA 0 in
 * tally_config.h, cuda_path TALLY_CUDA_PATH_NONE) every call returns
 * -EOPNOTSUPP. Errors are tally_allreduce()'s, and: -EOPNOTSUPP as said,
 * -ENODEV (no usable CUDA device), -EIO (a CUDA call or kernel launch
 * failed; the context then refuses further allreduces with -EPIPE, as
 * after a network error), -ENOMEM (pinned or device memory), -EINVAL
 * also for another current device than the context's first call's.
 */
#ifndef TALLY_TALLY_CUDA_H
#define TALLY_TALLY_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include <tally/tally.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * tally_allreduce() of the n floats at d_buf (device memory), in place,
 * through the job's codec, on stream. A codec with memory keeps it in
 * the context for the one tensor it is called with (in device memory),
 * as tally_allreduce() does; give each tensor its own state
 * (tally_state_new_cuda()) and call tally_allreduce_state_cuda() to
 * reduce several.
 */
int tally_allreduce_cuda(struct tally_ctx *ctx, float *d_buf, size_t n,
	void *stream);

/* tally_allreduce_f32() (shared-scale fixed point, whatever the job's
 * codec) of the n floats at d_buf, in place, on stream. */
int tally_allreduce_f32_cuda(struct tally_ctx *ctx, float *d_buf, size_t n,
	void *stream);

/* tally_allreduce_i32() of the n integers at d_buf, in place, on stream:
 * staged as they are, no encoding. */
int tally_allreduce_i32_cuda(struct tally_ctx *ctx, int32_t *d_buf,
	size_t n, void *stream);

/*
 * tally_state_new() with the memory in device memory (zeroed; the call
 * synchronizes the device), for tally_allreduce_state_cuda(). Freed by
 * tally_state_free(). Errors as tally_state_new(), and -EOPNOTSUPP for
 * a codec without a GPU path (or a libtally without CUDA), -ENODEV.
 */
int tally_state_new_cuda(struct tally_ctx *ctx, size_t n,
	struct tally_state **out);

/*
 * tally_state_new_cuda() with PowerSGD's matrix rows, as
 * tally_state_new_rows() (0: the job's rows key).
 */
int tally_state_new_rows_cuda(struct tally_ctx *ctx, size_t n, uint32_t rows,
	struct tally_state **out);

/*
 * tally_allreduce_state() of the n floats at d_buf with the device state
 * st (from tally_state_new_cuda(); a host state is refused with -EINVAL,
 * as a device state is by tally_allreduce_state()), on stream.
 */
int tally_allreduce_state_cuda(struct tally_ctx *ctx, struct tally_state *st,
	float *d_buf, size_t n, void *stream);

#ifdef __cplusplus
}
#endif

#endif /* TALLY_TALLY_CUDA_H */

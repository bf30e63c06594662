/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The collnet on device memory: only with TALLY_NCCL_CUDA=1 and a
 * libtally built with CUDA; it has run under NCCL 2.28.9 on one GPU
 * only (docs/nccl.md, "Checking on a GPU"), so it stays opt-in. A request's send buffer is copied into its receive
 * buffer on the device, then libtally's GPU path (<tally/tally_cuda.h>:
 * encoded on the GPU into pinned staging, decoded on the GPU) sums it in
 * place on the thread's own stream, which the call waits for.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <tally/tally.h>
#include <tally/tally_cuda.h>

#include "tally_config.h"
#include "plugin.h"

#if TALLY_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

/* TALLY_NCCL_CUDA=1 in a build with CUDA. */
int
tally_nccl_cuda_enabled(void)
{
	const char *v = getenv("TALLY_NCCL_CUDA");

	return TALLY_HAVE_CUDA && v != NULL && strcmp(v, "1") == 0;
}

/* One device request, synchronously; 0 or -errno. */
int
tally_nccl_cuda_allreduce(struct tally_ctx *ctx, void *send, void *recv,
	size_t count, int type)
{
#if TALLY_HAVE_CUDA
	cudaStream_t s;
	int rc;

	if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) !=
	    cudaSuccess)
		return -EIO;
	if (send != recv && cudaMemcpyAsync(recv, send, count * 4,
	    cudaMemcpyDeviceToDevice, s) != cudaSuccess)
		rc = -EIO;
	else if (type == TALLY_NCCL_FLOAT32)
		rc = tally_allreduce_f32_cuda(ctx, recv, count, s);
	else
		rc = tally_allreduce_i32_cuda(ctx, recv, count, s);
	if (cudaStreamSynchronize(s) != cudaSuccess && rc == 0)
		rc = -EIO;
	cudaStreamDestroy(s);
	return rc;
#else
	(void)ctx;
	(void)send;
	(void)recv;
	(void)count;
	(void)type;
	return -EOPNOTSUPP;
#endif
}

/* The collnet's ptrSupport: host memory, and device memory when on. */
int
tally_nccl_coll_ptr_support(void)
{
	return TALLY_NCCL_PTR_HOST |
		(tally_nccl_cuda_enabled() ? TALLY_NCCL_PTR_CUDA : 0);
}

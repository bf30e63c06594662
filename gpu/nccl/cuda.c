/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The collnet on device memory: only with TALLY_NCCL_CUDA=1 and a
 * libtally built with CUDA; it has run under NCCL 2.28.9 on one GPU
 * only (docs/nccl.md, "Checking on a GPU"), so it stays opt-in. f32 and
 * i32 sums only (bf16 and f16 stay on NCCL's rings then, coll.c). A
 * request's send buffer is copied into its receive buffer on the
 * device, then libtally's GPU path (<tally/tally_cuda.h>: encoded on the
 * GPU into pinned staging, decoded on the GPU) sums it in place on the
 * thread's own stream, which the call waits for.
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

/*
 * One device request, synchronously; 0 or -errno. f32 and i32 only:
 * libtally has no device path for bf16 and f16, and copying them to the
 * host here would hide that, so coll.c refuses them on device memory
 * (reduceSupport says no to them once device memory is offered) and
 * this answers -EOPNOTSUPP should one arrive anyway.
 */
int
tally_nccl_cuda_allreduce(struct tally_ctx *ctx, void *send, void *recv,
	size_t count, enum tally_dtype dt)
{
#if TALLY_HAVE_CUDA
	cudaStream_t s;
	int rc;

	if (dt != TALLY_DT_F32 && dt != TALLY_DT_I32)
		return -EOPNOTSUPP;
	if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) !=
	    cudaSuccess)
		return -EIO;
	if (send != recv && cudaMemcpyAsync(recv, send,
	    count * tally_nccl_dt_bytes(dt), cudaMemcpyDeviceToDevice, s) !=
	    cudaSuccess)
		rc = -EIO;
	else if (dt == TALLY_DT_F32)
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
	(void)dt;
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

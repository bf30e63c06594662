/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The public entry points for tensors in GPU memory (<tally/tally_cuda.h>):
 * each is tally_lib_dev_call() with the CUDA ops, which a libtally built
 * without CUDA does not have (then they say so, with -EOPNOTSUPP).
 */
#include <errno.h>

#include <tally/tally_cuda.h>

#include "tally_config.h"
#include "dev.h"

#if !TALLY_HAVE_CUDA
const struct tally_dev_ops *
tally_lib_cuda_ops(void)
{
	return NULL;
}
#endif

const char *
tally_cuda_path_name(unsigned int path)
{
	static const char *const names[TALLY_CUDA_PATH_MAX_] = {
		[TALLY_CUDA_PATH_NONE] = "none",
		[TALLY_CUDA_PATH_NODEV] = "no-device",
		[TALLY_CUDA_PATH_CODEC] = "codec-not-on-gpu",
		[TALLY_CUDA_PATH_STAGED] = "gpu-staged",
	};

	return path < TALLY_CUDA_PATH_MAX_ ? names[path] : "?";
}

int
tally_allreduce_cuda(struct tally_ctx *ctx, float *d_buf, size_t n,
	void *stream)
{
	return tally_lib_dev_call(ctx, tally_lib_cuda_ops(), TALLY_DEV_CODEC,
		NULL, d_buf, n, stream);
}

int
tally_allreduce_f32_cuda(struct tally_ctx *ctx, float *d_buf, size_t n,
	void *stream)
{
	return tally_lib_dev_call(ctx, tally_lib_cuda_ops(), TALLY_DEV_F32,
		NULL, d_buf, n, stream);
}

int
tally_allreduce_i32_cuda(struct tally_ctx *ctx, int32_t *d_buf, size_t n,
	void *stream)
{
	return tally_lib_dev_call(ctx, tally_lib_cuda_ops(), TALLY_DEV_I32,
		NULL, d_buf, n, stream);
}

int
tally_state_new_cuda(struct tally_ctx *ctx, size_t n, struct tally_state **out)
{
	return tally_lib_dev_state_new(ctx, tally_lib_cuda_ops(), n, out);
}

int
tally_state_new_rows_cuda(struct tally_ctx *ctx, size_t n, uint32_t rows,
	struct tally_state **out)
{
	return tally_lib_dev_state_rows(ctx, tally_lib_cuda_ops(), n, rows,
		out);
}

int
tally_allreduce_state_cuda(struct tally_ctx *ctx, struct tally_state *st,
	float *d_buf, size_t n, void *stream)
{
	return tally_lib_dev_call(ctx, tally_lib_cuda_ops(), TALLY_DEV_STATE,
		st, d_buf, n, stream);
}

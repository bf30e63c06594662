/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The device buffer of tally-bench allreduce --cuda (cudabuf.h), over the
 * CUDA runtime; without CUDA, a constructor that refuses.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "tally_config.h"
#include "cudabuf.h"

#if TALLY_HAVE_CUDA
#include <cuda_runtime_api.h>

/* 0, or -EIO (-ENODEV for no device) with CUDA's reason for what. */
static int
check(cudaError_t e, const char *what)
{
	if (e == cudaSuccess)
		return 0;
	fprintf(stderr, "tally-bench allreduce: %s: %s\n", what,
		cudaGetErrorString(e));
	return e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver ?
		-ENODEV : -EIO;
}

/* b's stream and memory on device 0, and the device's name. */
static int
set_up(struct bench_cuda *b, size_t bytes)
{
	struct cudaDeviceProp prop;
	cudaStream_t s;
	int count = 0, rc;

	rc = check(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
	if (rc == 0 && count == 0) {
		fprintf(stderr, "tally-bench allreduce: no CUDA device\n");
		rc = -ENODEV;
	}
	if (rc == 0)
		rc = check(cudaSetDevice(0), "cudaSetDevice");
	if (rc == 0)
		rc = check(cudaGetDeviceProperties(&prop, 0),
			"cudaGetDeviceProperties");
	if (rc == 0)
		snprintf(b->device, sizeof(b->device), "%s", prop.name);
	if (rc == 0)
		rc = check(cudaStreamCreateWithFlags(&s,
			cudaStreamNonBlocking), "cudaStreamCreate");
	if (rc != 0)
		return rc;
	b->stream = s;
	b->bytes = bytes < 4 ? 4 : bytes;
	rc = check(cudaMalloc(&b->d_buf, b->bytes), "cudaMalloc");
	if (rc != 0)
		b->d_buf = NULL;
	return rc;
}

int
bench_cuda_new(size_t bytes, struct bench_cuda **out)
{
	struct bench_cuda *b = calloc(1, sizeof(*b));
	int rc;

	*out = NULL;
	if (b == NULL)
		return -ENOMEM;
	rc = set_up(b, bytes);
	if (rc != 0) {
		bench_cuda_free(b);
		return rc;
	}
	*out = b;
	return 0;
}

int
bench_cuda_put(struct bench_cuda *b, const void *src, size_t bytes)
{
	int rc = check(cudaMemcpyAsync(b->d_buf, src, bytes,
		cudaMemcpyHostToDevice, (cudaStream_t)b->stream),
		"copying the input to the device");

	return rc != 0 ? rc : bench_cuda_sync(b);
}

int
bench_cuda_get(struct bench_cuda *b, void *dst, size_t bytes)
{
	int rc = check(cudaMemcpyAsync(dst, b->d_buf, bytes,
		cudaMemcpyDeviceToHost, (cudaStream_t)b->stream),
		"copying the result from the device");

	return rc != 0 ? rc : bench_cuda_sync(b);
}

int
bench_cuda_sync(struct bench_cuda *b)
{
	return check(cudaStreamSynchronize((cudaStream_t)b->stream),
		"cudaStreamSynchronize");
}

void
bench_cuda_free(struct bench_cuda *b)
{
	if (b == NULL)
		return;
	if (b->d_buf != NULL)
		(void)cudaFree(b->d_buf);
	if (b->stream != NULL)
		(void)cudaStreamDestroy((cudaStream_t)b->stream);
	free(b);
}

#else /* !TALLY_HAVE_CUDA */

int
bench_cuda_new(size_t bytes, struct bench_cuda **out)
{
	(void)bytes;
	*out = NULL;
	fprintf(stderr, "tally-bench allreduce: --cuda: this build has no "
		"CUDA (meson -Dcuda=enabled)\n");
	return -EOPNOTSUPP;
}

int
bench_cuda_put(struct bench_cuda *b, const void *src, size_t bytes)
{
	(void)b, (void)src, (void)bytes;
	return -EOPNOTSUPP;
}

int
bench_cuda_get(struct bench_cuda *b, void *dst, size_t bytes)
{
	(void)b, (void)dst, (void)bytes;
	return -EOPNOTSUPP;
}

int
bench_cuda_sync(struct bench_cuda *b)
{
	(void)b;
	return -EOPNOTSUPP;
}

void
bench_cuda_free(struct bench_cuda *b)
{
	(void)b;
}

#endif /* TALLY_HAVE_CUDA */

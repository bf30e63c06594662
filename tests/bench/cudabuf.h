/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tally-bench allreduce --cuda: the tensor in GPU memory. A buffer on the
 * current CUDA device with its own stream; the input is copied in before
 * each allreduce and the result out after it, outside the clock, so the
 * worker's checks run on the device path's result. Built without CUDA,
 * bench_cuda_new() says so and fails with -EOPNOTSUPP.
 */
#ifndef TALLY_BENCH_CUDABUF_H
#define TALLY_BENCH_CUDABUF_H

#include <stddef.h>

struct bench_cuda {
	void *d_buf;		/* device memory, bytes (at least 4) */
	size_t bytes;
	void *stream;		/* a cudaStream_t */
	char device[256];	/* the device's name */
};

/*
 * *out = a device buffer of bytes and a stream on device 0. Returns 0,
 * or -ENODEV (no device), -EOPNOTSUPP (no CUDA in this build), -ENOMEM,
 * -EIO, with the reason on stderr. The caller frees it with
 * bench_cuda_free().
 */
int bench_cuda_new(size_t bytes, struct bench_cuda **out);

/* Copies bytes from host src into the buffer, and waits. 0 or -EIO. */
int bench_cuda_put(struct bench_cuda *b, const void *src, size_t bytes);

/* Waits for b's stream, then copies bytes of the buffer to host dst. */
int bench_cuda_get(struct bench_cuda *b, void *dst, size_t bytes);

/* Waits for b's stream (the allreduce's decoding). 0 or -EIO. */
int bench_cuda_sync(struct bench_cuda *b);

/* Frees b and its stream. NULL is fine. */
void bench_cuda_free(struct bench_cuda *b);

#endif /* TALLY_BENCH_CUDABUF_H */

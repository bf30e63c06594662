/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The CUDA device (struct tally_dev_ops of dev.h): staging in pinned,
 * mapped, portable host memory (cudaHostAlloc: page-aligned, and the
 * device writes and reads it in place), device memory, asynchronous
 * copies and events on the caller's stream, and the codecs' kernels
 * through their entry points (the <tally/..._cuda.h> headers). Built
 * only into a libtally with CUDA.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include <tally/feedback_cuda.h>
#include <tally/fixp_cuda.h>
#include <tally/powersgd_cuda.h>
#include <tally/quant_cuda.h>

#include "dev.h"

/*
 * The last failure of this thread's calls below, for why(), which hands
 * it over once (a kernel's entry point leaves none: its failure then
 * shows no stale text).
 */
static __thread char last_why[128];
static __thread char shown_why[128];

/* Maps err to 0 or -errno and keeps its text for why(). */
static int
check(cudaError_t err, const char *call)
{
	if (err == cudaSuccess)
		return 0;
	snprintf(last_why, sizeof(last_why), "%s: %s", call,
		cudaGetErrorString(err));
	(void)cudaGetLastError();
	switch (err) {
	case cudaErrorMemoryAllocation:
		return -ENOMEM;
	case cudaErrorNoDevice:
	case cudaErrorInsufficientDriver:
	case cudaErrorStubLibrary:
	case cudaErrorDevicesUnavailable:
	case cudaErrorSystemDriverMismatch:
	case cudaErrorCompatNotSupportedOnDevice:
		return -ENODEV;
	case cudaErrorInvalidValue:
		return -EINVAL;
	default:
		return -EIO;
	}
}

static const char *
why(void)
{
	memcpy(shown_why, last_why, sizeof(shown_why));
	last_why[0] = '\0';
	return shown_why;
}

/* Pinned, mapped, portable: kernels write it in place, any device. */
static int
stage_alloc(size_t len, void **host, void **dev)
{
	int rc;

	rc = check(cudaHostAlloc(host, len, cudaHostAllocMapped |
		cudaHostAllocPortable), "cudaHostAlloc");
	if (rc != 0)
		return rc;
	memset(*host, 0, len);
	rc = check(cudaHostGetDevicePointer(dev, *host, 0),
		"cudaHostGetDevicePointer (can the device map host memory?)");
	if (rc != 0)
		(void)cudaFreeHost(*host);
	return rc;
}

static void
stage_free(void *host)
{
	(void)cudaFreeHost(host);
}

/* Zeroed and ready: state buffers are made once, outside the hot path. */
static int
dev_alloc(size_t len, void **d)
{
	int rc = check(cudaMalloc(d, len), "cudaMalloc");

	if (rc == 0)
		rc = check(cudaMemset(*d, 0, len), "cudaMemset");
	if (rc == 0)
		rc = check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
	if (rc != 0)
		(void)cudaFree(*d);
	return rc;
}

static void
dev_free(void *d)
{
	(void)cudaFree(d);
}

static int
copy(void *dst, const void *src, size_t len, void *stream)
{
	return check(cudaMemcpyAsync(dst, src, len, cudaMemcpyDefault,
		(cudaStream_t)stream), "cudaMemcpyAsync");
}

static int
zero(void *d, size_t len, void *stream)
{
	return check(cudaMemsetAsync(d, 0, len, (cudaStream_t)stream),
		"cudaMemsetAsync");
}

static int
event_new(void **ev)
{
	return check(cudaEventCreateWithFlags((cudaEvent_t *)ev,
		cudaEventDisableTiming), "cudaEventCreate");
}

static void
event_free(void *ev)
{
	(void)cudaEventDestroy((cudaEvent_t)ev);
}

static int
record(void *ev, void *stream)
{
	return check(cudaEventRecord((cudaEvent_t)ev, (cudaStream_t)stream),
		"cudaEventRecord");
}

static int
sync_event(void *ev)
{
	return check(cudaEventSynchronize((cudaEvent_t)ev),
		"cudaEventSynchronize");
}

static int
stream_wait(void *stream, void *ev)
{
	return check(cudaStreamWaitEvent((cudaStream_t)stream,
		(cudaEvent_t)ev, 0), "cudaStreamWaitEvent");
}

static int
device(int *id)
{
	int n = tally_cuda_device_count();

	if (n < 0) {
		snprintf(last_why, sizeof(last_why), "no CUDA device");
		return n;
	}
	return check(cudaGetDevice(id), "cudaGetDevice");
}

static const struct tally_dev_ops cuda_ops = {
	.name = "cuda",
	.stage_alloc = stage_alloc,
	.stage_free = stage_free,
	.dev_alloc = dev_alloc,
	.dev_free = dev_free,
	.copy = copy,
	.zero = zero,
	.event_new = event_new,
	.event_free = event_free,
	.record = record,
	.sync = sync_event,
	.stream_wait = stream_wait,
	.device = device,
	.why = why,
	.absmax = tally_fixp_absmax_cuda,
	.fixp_encode = tally_fixp_encode_cuda,
	.fixp_decode = tally_fixp_decode_cuda,
	.q16_encode = tally_quant_encode_i16_cuda,
	.q8_encode = tally_quant_encode_i8_cuda,
	.q4_encode = tally_quant_encode_i4_cuda,
	.q_decode_i32 = tally_quant_decode_i32_cuda,
	.q_decode_i16 = tally_quant_decode_i16_cuda,
	.q_decode_i8 = tally_quant_decode_i8_cuda,
	.q_decode_i4 = tally_quant_decode_i4_cuda,
	.ef_apply = tally_ef_apply_cuda,
	.ef_update = tally_ef_update_cuda,
	.twobit_encode_i4 = tally_2bit_encode_i4_cuda,
	.tern_encode_i4 = tally_tern_encode_i4_cuda,
	.tern_decode_i32 = tally_tern_decode_i32_cuda,
	.tern_decode_i4 = tally_tern_decode_i4_cuda,
	.sign_encode = tally_sign_encode_cuda,
	.sign_decode_votes = tally_sign_decode_votes_cuda,
	.sign_decode_bits = tally_sign_decode_bits_cuda,
	.randk_gather = tally_randk_gather_cuda,
	.randk_scatter = tally_randk_scatter_cuda,
	.psgd_init_q = tally_psgd_init_q_cuda,
	.psgd_p = tally_psgd_p_cuda,
	.psgd_orthonormalize = tally_psgd_orthonormalize_cuda,
	.psgd_q = tally_psgd_q_cuda,
	.psgd_decompress = tally_psgd_decompress_cuda,
};

const struct tally_dev_ops *
tally_lib_cuda_ops(void)
{
	return &cuda_ops;
}

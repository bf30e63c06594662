/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * TALLY_HD marks a function compiled for both the host and the device:
 * every codec keeps its per-element and per-block math in a *_math.h of
 * such functions, which its CPU reference (.c) and its CUDA kernels (.cu)
 * both call, so the CPU tests check the code the GPU runs.
 */
#ifndef TALLY_GPU_CODEC_HD_H
#define TALLY_GPU_CODEC_HD_H

#ifndef TALLY_HD
#ifdef __CUDACC__
#define TALLY_HD __host__ __device__
#else
#define TALLY_HD
#endif
#endif

#include <stdint.h>
#include <string.h>

/* The bits of f, on either side. */
static inline TALLY_HD uint32_t
tally_hd_f2u(float f)
{
#ifdef __CUDA_ARCH__
	return __float_as_uint(f);
#else
	uint32_t u;

	memcpy(&u, &f, sizeof(u));
	return u;
#endif
}

/* The float whose bits are u, on either side. */
static inline TALLY_HD float
tally_hd_u2f(uint32_t u)
{
#ifdef __CUDA_ARCH__
	return __uint_as_float(u);
#else
	float f;

	memcpy(&f, &u, sizeof(f));
	return f;
#endif
}

#endif /* TALLY_GPU_CODEC_HD_H */

/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The AVX2 + F16C loops of the 16-bit fixed-point codec (fixp16_x86.c),
 * called by fixp16.c only where the CPU has both. Each gives the bits of
 * the scalar loop over fixp16_math.h; f16 says which type (else bf16).
 * Arguments as the public functions of <tally/fixp16.h>, already checked.
 */
#ifndef TALLY_GPU_CODEC_FIXP16_SIMD_H
#define TALLY_GPU_CODEC_FIXP16_SIMD_H

#include <stddef.h>
#include <stdint.h>

/* Whether this build has the loops (x86-64 with GCC's target attribute). */
#if defined(__x86_64__) && defined(__GNUC__)
#define TALLY_FIXP16_HAVE_SIMD 1

void tally_fixp16_enc32_avx2(int f16, const uint16_t *x, int32_t *q,
	size_t n, float s1, float s2);
void tally_fixp16_enc16_avx2(int f16, const uint16_t *x, int16_t *q,
	size_t n, float s1, float s2);
void tally_fixp16_dec32_avx2(int f16, const int32_t *q, uint16_t *x,
	size_t n, int e);
uint16_t tally_fixp16_absmax_avx2(const uint16_t *x, size_t n,
	uint16_t inf);
void tally_fixp16_dec16_avx2(int f16, const int16_t *q, uint16_t *x,
	size_t n, int e);
#else
#define TALLY_FIXP16_HAVE_SIMD 0
#endif

#endif /* TALLY_GPU_CODEC_FIXP16_SIMD_H */

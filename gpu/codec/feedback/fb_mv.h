/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * TALLY_FB_MV clones a CPU loop of the feedback family for AVX-512, AVX2
 * and the baseline, picked at load time (as fixp.c does). TALLY_FB_MV64
 * does the same for loops of 64-bit integer multiplications (the
 * counter-based hash of TernGrad): their AVX-512 clone targets
 * x86-64-v4, whose AVX512DQ multiplies 64-bit lanes (vpmullq); without
 * it they are emulated and the loop runs at a quarter of the speed. GCC
 * only: elsewhere TALLY_FB_MV64 is TALLY_FB_MV.
 */
#ifndef TALLY_GPU_CODEC_FEEDBACK_FB_MV_H
#define TALLY_GPU_CODEC_FEEDBACK_FB_MV_H

#if defined(__x86_64__) && !defined(TALLY_NO_MULTIVERSION)
#define TALLY_FB_MV \
	__attribute__((target_clones("avx512f", "avx2", "default")))
#if defined(__GNUC__) && !defined(__clang__)
#define TALLY_FB_MV64 \
	__attribute__((target_clones("arch=x86-64-v4", "avx2", "default")))
#else
#define TALLY_FB_MV64	TALLY_FB_MV
#endif
#else
#define TALLY_FB_MV
#define TALLY_FB_MV64
#endif

#endif /* TALLY_GPU_CODEC_FEEDBACK_FB_MV_H */

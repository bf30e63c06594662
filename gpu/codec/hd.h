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

#endif /* TALLY_GPU_CODEC_HD_H */

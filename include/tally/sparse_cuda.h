/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * CUDA kernels of block-sparse selection (<tally/sparse.h>). They run the
 * element math of gpu/codec/sparse/sparse_math.h, so they give the bits
 * of the CPU functions: the moments in the same fixed order (block trees,
 * then segments, then the total), block maxima, bitmaps, counts and index
 * lists exactly; thresholds then come from the same host math
 * (gpu/codec/sparse/estimate.c), so tally_sparse_threshold_cuda() picks
 * the threshold tally_sparse_threshold() picks from the same data.
 *
 * Plain C over device pointers; no CUDA header needed to include this.
 * stream is a cudaStream_t (NULL: the legacy default stream). Calls marked
 * "async" only enqueue work on stream; their results are there once the
 * stream has been synchronized. Calls that return a result on the host
 * (moments, thresholds) synchronize stream themselves.
 *
 * Present in libtally_sparse when it was built with CUDA (TALLY_HAVE_CUDA
 * in tally_config.h). tally_cuda_device_count() is in <tally/fixp_cuda.h>.
 */
#ifndef TALLY_SPARSE_CUDA_H
#define TALLY_SPARSE_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include <tally/sparse.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Bytes of device workspace that tally_sparse_threshold_cuda() needs for
 * n elements with est and p (NULL: defaults); also enough for
 * tally_sparse_moments_cuda() on n elements. 0 when p is out of range.
 */
size_t tally_sparse_cuda_ws_size(size_t n, enum tally_sparse_est est,
	const struct tally_sparse_params *p);

/*
 * *m = the moments of d_g (n elements, device) over t, as
 * tally_sparse_moments(), bit for bit. d_ws: device workspace of ws_size
 * bytes, at least tally_sparse_cuda_ws_size(n, TALLY_SPARSE_SIDCO_EXP,
 * NULL), 8-byte aligned (cudaMalloc's are). Synchronizes stream. Returns
 * 0, -EINVAL (as tally_sparse_moments(), or d_ws NULL or too small),
 * -ENODEV (no usable device) or -EIO (a CUDA call failed).
 */
int tally_sparse_moments_cuda(const float *d_g, size_t n, float t,
	unsigned int want, void *d_ws, size_t ws_size,
	struct tally_sparse_moments *m, void *stream);

/*
 * The threshold of tally_sparse_threshold() for d_g (n elements, device),
 * written to *threshold (host). d_ws as above, of at least
 * tally_sparse_cuda_ws_size(n, est, p) bytes. SIDCo's sample (p->sample)
 * is read in place: the kernels fetch its runs where they lie, in the
 * order the CPU gathers them. Synchronizes stream (the stages and radix
 * digits need their results on the host). Returns as
 * tally_sparse_threshold(), or -ENODEV / -EIO.
 */
int tally_sparse_threshold_cuda(const float *d_g, size_t n, double density,
	enum tally_sparse_est est, const struct tally_sparse_params *p,
	void *d_ws, size_t ws_size, float *threshold, void *stream);

/*
 * Async: d_bmax[b] = the largest magnitude of block b of d_g, as
 * tally_sparse_block_max(). Returns 0, -EINVAL (a NULL pointer with
 * n > 0, n above TALLY_SPARSE_N_MAX), -ENODEV or -EIO.
 */
int tally_sparse_block_max_cuda(const float *d_g, size_t n, float *d_bmax,
	void *stream);

/*
 * Async: the selection of tally_sparse_select() on device memory: writes
 * all TALLY_SPARSE_BITMAP_WORDS(n) words of d_bitmap and, when d_counts
 * is not NULL, d_counts[0] = kept elements and d_counts[1] = selected
 * blocks (overwritten). Returns 0, -EINVAL (d_bitmap NULL, d_g NULL with
 * n > 0, threshold NaN or not above 0, n above TALLY_SPARSE_N_MAX),
 * -ENODEV or -EIO.
 */
int tally_sparse_select_cuda(const float *d_g, size_t n, float threshold,
	uint32_t *d_bitmap, unsigned long long *d_counts, void *stream);

/*
 * Async: d_blocks = the indices of the set bits of d_bitmap (nblocks
 * blocks), ascending, as tally_sparse_select()'s list; room for nblocks.
 * Returns 0, -EINVAL (NULL pointer with nblocks > 0, nblocks above
 * TALLY_SPARSE_NBLOCKS(TALLY_SPARSE_N_MAX)), -ENODEV or -EIO.
 */
int tally_sparse_bitmap_list_cuda(const uint32_t *d_bitmap, size_t nblocks,
	uint32_t *d_blocks, void *stream);

#ifdef __cplusplus
}
#endif

#endif /* TALLY_SPARSE_CUDA_H */

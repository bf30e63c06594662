/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * CUDA kernels of block-sparse selection (<tally/sparse_cuda.h>): thin
 * loops over the element math of sparse_math.h, reductions in the fixed
 * order the CPU reference follows (or integer ones, exact in any order),
 * and the C entry points that launch them. The estimators' host math is
 * the CPU's own (estimate.c, topk.c), driven here by kernel results.
 */
#include <errno.h>
#include <float.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>

#include <tally/sparse.h>
#include <tally/sparse_cuda.h>

#include "sparse_int.h"
#include "sparse_math.h"

#define THREADS		256	/* = TALLY_SPARSE_BLOCK: a thread an element */
#define GRID_MAX	8192
#define LIST_THREADS	1024

static_assert(THREADS == TALLY_SPARSE_BLOCK, "a CUDA block a tensor block");

/* The moments' totals on the device. */
struct dev_moments {
	unsigned long long count;
	double s, s2, sl;
};

/* Where things lie in the workspace for n elements. */
struct ws_layout {
	size_t nb, nseg;
	size_t ps, ps2, psl, pc;	/* per-block sums and counts */
	size_t ss, ss2, ssl, sc;	/* per-segment */
	size_t out, hist, sample;
	size_t size;
};

static size_t
align8(size_t v)
{
	return (v + 7) & ~(size_t)7;
}

static void
ws_layout_of(size_t n, size_t sample_m, struct ws_layout *l)
{
	size_t o = 0;

	l->nb = TALLY_SPARSE_NBLOCKS(n);
	l->nseg = (l->nb + TALLY_SPARSE_SEGMENT - 1) / TALLY_SPARSE_SEGMENT;
	l->ps = o;
	o = align8(o + l->nb * sizeof(float));
	l->ps2 = o;
	o = align8(o + l->nb * sizeof(float));
	l->psl = o;
	o = align8(o + l->nb * sizeof(float));
	l->pc = o;
	o = align8(o + l->nb * sizeof(uint32_t));
	l->ss = o;
	o += l->nseg * sizeof(double);
	l->ss2 = o;
	o += l->nseg * sizeof(double);
	l->ssl = o;
	o += l->nseg * sizeof(double);
	l->sc = o;
	o += l->nseg * sizeof(unsigned long long);
	l->out = o;
	o += sizeof(struct dev_moments);
	l->hist = o;
	o += SPARSE_RADIX_BINS * sizeof(unsigned long long);
	l->sample = o;
	o = align8(o + sample_m * sizeof(float));
	l->size = o;
}

/* Maps a CUDA error to 0 or -errno: no usable device/driver, or -EIO. */
static int
cuda_errno(cudaError_t err)
{
	switch (err) {
	case cudaSuccess:
		return 0;
	case cudaErrorNoDevice:
	case cudaErrorInsufficientDriver:
	case cudaErrorStubLibrary:
	case cudaErrorDevicesUnavailable:
	case cudaErrorSystemDriverMismatch:
	case cudaErrorCompatNotSupportedOnDevice:
		return -ENODEV;
	default:
		return -EIO;
	}
}

static unsigned int
grid_for(size_t work, unsigned int max_grid)
{
	return work < max_grid ? (unsigned int)(work > 0 ? work : 1) : max_grid;
}

/*
 * Sum of v over the block's 256 threads in the fixed tree of
 * sparse_math.h: pairs (i, i + s) for s = 128, 64, 32 through sh, then
 * s = 16 .. 1 by shuffles in warp 0. The result is valid in thread 0.
 */
static __device__ float
tree_sum(float v, float *sh)
{
	unsigned int tid = threadIdx.x;

	sh[tid] = v;
	__syncthreads();
	for (unsigned int s = 128; s >= 32; s >>= 1) {
		if (tid < s)
			sh[tid] = __fadd_rn(sh[tid], sh[tid + s]);
		__syncthreads();
	}
	if (tid < 32) {
		v = sh[tid];
		for (int s = 16; s > 0; s >>= 1)
			v = __fadd_rn(v, __shfl_down_sync(0xffffffffu, v, s));
	}
	__syncthreads();	/* sh is reused by the next sum */
	return v;
}

/*
 * Per block b of the sample ss (sparse_int.h; stride 1: the tensor
 * itself): the sums of y, y^2, ln y and the count.
 */
template <unsigned int WANT>
static __global__ void
moments_kernel(const float *__restrict__ x, struct sparse_sample ss, float t,
	size_t nb, float *ps, float *ps2, float *psl, uint32_t *pc)
{
	__shared__ float sh[THREADS];
	size_t n = ss.n;

	for (size_t b = blockIdx.x; b < nb; b += gridDim.x) {
		size_t v = b * THREADS + threadIdx.x;
		size_t i = ss.stride == 1 ? v : tally_sparse_sample_elem(
			ss.seed, v, ss.stride, ss.m, n);
		float y = i < n ? tally_sparse_exceed(x[i], t) : 0.0f;
		int c = __syncthreads_count(y > 0.0f);
		float s, s2 = 0.0f, sl = 0.0f;

		if (WANT & TALLY_SPARSE_M_SQ)
			s2 = tree_sum(__fmul_rn(y, y), sh);
		if (WANT & TALLY_SPARSE_M_LOG)
			sl = tree_sum(tally_sparse_log0(y), sh);
		s = tree_sum(y, sh);
		if (threadIdx.x == 0) {
			ps[b] = s;
			ps2[b] = s2;
			psl[b] = sl;
			pc[b] = (uint32_t)c;
		}
	}
}

/*
 * The block sums in double, a segment of TALLY_SPARSE_SEGMENT blocks a
 * thread, then thread 0 adds the segments in order: the CPU's order.
 * One CUDA block.
 */
static __global__ void
fold_kernel(const float *ps, const float *ps2, const float *psl,
	const uint32_t *pc, size_t nb, size_t nseg, double *ss, double *ss2,
	double *ssl, unsigned long long *sc, struct dev_moments *out)
{
	for (size_t g = threadIdx.x; g < nseg; g += blockDim.x) {
		size_t b0 = g * TALLY_SPARSE_SEGMENT;
		size_t b1 = b0 + TALLY_SPARSE_SEGMENT < nb ?
			b0 + TALLY_SPARSE_SEGMENT : nb;
		double s = 0, s2 = 0, sl = 0;
		unsigned long long c = 0;

		for (size_t b = b0; b < b1; b++) {
			s = __dadd_rn(s, (double)ps[b]);
			s2 = __dadd_rn(s2, (double)ps2[b]);
			sl = __dadd_rn(sl, (double)psl[b]);
			c += pc[b];
		}
		ss[g] = s;
		ss2[g] = s2;
		ssl[g] = sl;
		sc[g] = c;
	}
	__syncthreads();
	if (threadIdx.x == 0) {
		double s = 0, s2 = 0, sl = 0;
		unsigned long long c = 0;

		for (size_t g = 0; g < nseg; g++) {
			s = __dadd_rn(s, ss[g]);
			s2 = __dadd_rn(s2, ss2[g]);
			sl = __dadd_rn(sl, ssl[g]);
			c += sc[g];
		}
		out->count = c;
		out->s = s;
		out->s2 = s2;
		out->sl = sl;
	}
}

/* Max over the 32 lanes of a warp; every lane must take part. */
static __device__ uint32_t
warp_max(uint32_t m)
{
	for (int off = 16; off > 0; off >>= 1) {
		uint32_t o = __shfl_xor_sync(0xffffffffu, m, off);

		m = o > m ? o : m;
	}
	return m;
}

/* Where select_kernel counts when its caller wants no counts. */
static __device__ unsigned long long select_sink[2];

/* A warp a tensor block: its largest key, as a float. */
static __global__ void
block_max_kernel(const float *__restrict__ x, size_t n, size_t nb,
	float *bmax)
{
	size_t warps = (size_t)gridDim.x * (blockDim.x / 32);
	unsigned int lane = threadIdx.x & 31;

	for (size_t b = (size_t)blockIdx.x * (blockDim.x / 32) +
	     threadIdx.x / 32; b < nb; b += warps) {
		uint32_t m = 0;

		for (unsigned int j = 0; j < TALLY_SPARSE_BLOCK; j += 32) {
			size_t i = b * TALLY_SPARSE_BLOCK + j + lane;
			uint32_t k = i < n ? tally_sparse_key(x[i]) : 0;

			m = k > m ? k : m;
		}
		m = warp_max(m);
		if (lane == 0)
			bmax[b] = tally_hd_u2f(m);
	}
}

/*
 * A warp a bitmap word (32 tensor blocks): a block's bit is set iff one
 * of its keys >= tk. counts[0] += kept elements, counts[1] += blocks.
 */
static __global__ void
select_kernel(const float *__restrict__ x, size_t n, size_t nb, uint32_t tk,
	uint32_t *bitmap, unsigned long long *counts)
{
	size_t nwords = (nb + 31) / 32;
	size_t warps = (size_t)gridDim.x * (blockDim.x / 32);
	unsigned int lane = threadIdx.x & 31;
	unsigned long long elems = 0, blocks = 0;

	for (size_t w = (size_t)blockIdx.x * (blockDim.x / 32) +
	     threadIdx.x / 32; w < nwords; w += warps) {
		uint32_t word = 0;

		for (unsigned int bb = 0; bb < 32; bb++) {
			size_t b = w * 32 + bb;
			unsigned int kept = 0;

			if (b >= nb)
				break;
			for (unsigned int j = 0; j < TALLY_SPARSE_BLOCK;
			     j += 32) {
				size_t i = b * TALLY_SPARSE_BLOCK + j + lane;
				uint32_t k = i < n ? tally_sparse_key(x[i]) : 0;

				kept += __popc(__ballot_sync(0xffffffffu,
					k >= tk));
			}
			word |= (uint32_t)(kept > 0) << bb;
			elems += kept;
		}
		if (lane == 0)
			bitmap[w] = word;
		blocks += __popc(word);
	}
	if (lane == 0 && (elems > 0 || blocks > 0)) {
		atomicAdd(&counts[0], elems);
		atomicAdd(&counts[1], blocks);
	}
}

/*
 * One CUDA block of LIST_THREADS: the set bits of bitmap (nb blocks) as
 * ascending indices, a thread a word, LIST_THREADS words at a time with a
 * scan of their popcounts giving each its place.
 */
static __global__ void
list_kernel(const uint32_t *bitmap, size_t nb, uint32_t *blocks)
{
	__shared__ unsigned int scan[LIST_THREADS];
	size_t nwords = (nb + 31) / 32, base = 0;
	unsigned int tid = threadIdx.x;

	for (size_t w0 = 0; w0 < nwords; w0 += LIST_THREADS) {
		size_t w = w0 + tid;
		uint32_t word = w < nwords ? bitmap[w] : 0;
		unsigned int c, total;
		size_t off;

		if (w < nwords && w == nwords - 1 && nb % 32 != 0)
			word &= (1u << (nb % 32)) - 1;
		c = __popc(word);
		scan[tid] = c;
		__syncthreads();
		for (unsigned int s = 1; s < LIST_THREADS; s <<= 1) {
			unsigned int v = tid >= s ? scan[tid - s] : 0;

			__syncthreads();
			scan[tid] += v;
			__syncthreads();
		}
		off = base + scan[tid] - c;
		total = scan[LIST_THREADS - 1];
		while (word != 0) {
			unsigned int bit = __ffs(word) - 1;

			blocks[off++] = (uint32_t)(w * 32 + bit);
			word &= word - 1;
		}
		base += total;
		__syncthreads();
	}
}

/* One radix digit's histogram, see sparse_hist_fn in sparse_int.h. */
static __global__ void
hist_kernel(const float *__restrict__ x, size_t n, uint32_t prefix,
	unsigned int pshift, unsigned int shift, unsigned int nbins,
	unsigned long long *h)
{
	__shared__ unsigned int sh[SPARSE_RADIX_BINS];
	size_t stride = (size_t)gridDim.x * blockDim.x;

	for (unsigned int b = threadIdx.x; b < nbins; b += blockDim.x)
		sh[b] = 0;
	__syncthreads();
	for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
	     i += stride) {
		uint32_t k = tally_sparse_key(x[i]);

		if (pshift >= 32 || (k >> pshift) == prefix)
			atomicAdd(&sh[(k >> shift) & (nbins - 1)], 1u);
	}
	__syncthreads();
	for (unsigned int b = threadIdx.x; b < nbins; b += blockDim.x)
		if (sh[b] != 0)
			atomicAdd(&h[b], (unsigned long long)sh[b]);
}

/* DGC's sample: out[j] = x[pos(j)], the positions of sparse_math.h. */
static __global__ void
gather_kernel(const float *__restrict__ x, size_t n, uint64_t seed,
	size_t stride, size_t m, float *out)
{
	size_t step = (size_t)gridDim.x * blockDim.x;

	for (size_t j = (size_t)blockIdx.x * blockDim.x + threadIdx.x; j < m;
	     j += step)
		out[j] = x[tally_sparse_sample_pos(seed, j, stride, n)];
}

/* What the host math's callbacks need. */
struct gpu_tensor {
	const float *d_g;
	size_t n;
	char *ws;
	const struct ws_layout *l;
	cudaStream_t s;
	struct sparse_sample ss;	/* what the moments see */
};

/* Moments of gt->ss (the tensor or its sample) over t into *m; syncs. */
static int
gpu_moments(void *arg, float t, unsigned int want,
	struct tally_sparse_moments *m)
{
	const struct gpu_tensor *gt = (const struct gpu_tensor *)arg;
	const struct ws_layout *l = gt->l;
	float *ps = (float *)(gt->ws + l->ps), *ps2 = (float *)(gt->ws + l->ps2);
	float *psl = (float *)(gt->ws + l->psl);
	uint32_t *pc = (uint32_t *)(gt->ws + l->pc);
	struct dev_moments *out = (struct dev_moments *)(gt->ws + l->out);
	struct dev_moments h;
	size_t rpb = THREADS / TALLY_SPARSE_SIDCO_RUN;	/* runs a block */
	size_t nb = gt->ss.stride == 1 ? l->nb : (gt->ss.m + rpb - 1) / rpb;
	size_t nseg = (nb + TALLY_SPARSE_SEGMENT - 1) / TALLY_SPARSE_SEGMENT;
	unsigned int grid = grid_for(nb, GRID_MAX);
	int ret;

	if (gt->n == 0) {
		memset(m, 0, sizeof(*m));
		return 0;
	}
	switch (want) {
	case 0:
		moments_kernel<0><<<grid, THREADS, 0, gt->s>>>(gt->d_g, gt->ss,
			t, nb, ps, ps2, psl, pc);
		break;
	case TALLY_SPARSE_M_SQ:
		moments_kernel<TALLY_SPARSE_M_SQ><<<grid, THREADS, 0, gt->s>>>(
			gt->d_g, gt->ss, t, nb, ps, ps2, psl, pc);
		break;
	case TALLY_SPARSE_M_LOG:
		moments_kernel<TALLY_SPARSE_M_LOG><<<grid, THREADS, 0,
			gt->s>>>(gt->d_g, gt->ss, t, nb, ps, ps2, psl, pc);
		break;
	default:
		moments_kernel<TALLY_SPARSE_M_SQ | TALLY_SPARSE_M_LOG><<<grid,
			THREADS, 0, gt->s>>>(gt->d_g, gt->ss, t, nb, ps, ps2,
			psl, pc);
		break;
	}
	fold_kernel<<<1, THREADS, 0, gt->s>>>(ps, ps2, psl, pc, nb, nseg,
		(double *)(gt->ws + l->ss), (double *)(gt->ws + l->ss2),
		(double *)(gt->ws + l->ssl),
		(unsigned long long *)(gt->ws + l->sc), out);
	ret = cuda_errno(cudaGetLastError());
	if (ret == 0)
		ret = cuda_errno(cudaMemcpyAsync(&h, out, sizeof(h),
			cudaMemcpyDeviceToHost, gt->s));
	if (ret == 0)
		ret = cuda_errno(cudaStreamSynchronize(gt->s));
	if (ret < 0)
		return ret;
	m->count = h.count;
	m->sum = h.s;
	m->sum2 = (want & TALLY_SPARSE_M_SQ) ? h.s2 : 0.0;
	m->sumlog = (want & TALLY_SPARSE_M_LOG) ? h.sl : 0.0;
	return 0;
}

/* One radix digit's histogram into h (host); synchronizes. */
static int
gpu_hist(void *arg, uint32_t prefix, unsigned int pshift, unsigned int shift,
	unsigned int nbins, uint64_t *h)
{
	const struct gpu_tensor *gt = (const struct gpu_tensor *)arg;
	unsigned long long *dh =
		(unsigned long long *)(gt->ws + gt->l->hist);
	int ret;

	ret = cuda_errno(cudaMemsetAsync(dh, 0, nbins * sizeof(*dh), gt->s));
	if (ret < 0)
		return ret;
	hist_kernel<<<grid_for((gt->n + THREADS - 1) / THREADS, 1024), THREADS,
		0, gt->s>>>(gt->d_g, gt->n, prefix, pshift, shift, nbins, dh);
	ret = cuda_errno(cudaGetLastError());
	if (ret == 0)
		ret = cuda_errno(cudaMemcpyAsync(h, dh, nbins * sizeof(*h),
			cudaMemcpyDeviceToHost, gt->s));
	if (ret == 0)
		ret = cuda_errno(cudaStreamSynchronize(gt->s));
	return ret;
}

/* DGC on the device's sample, finished on the host; synchronizes. */
static int
gpu_dgc(const struct gpu_tensor *gt, double density,
	const struct sparse_knobs *k, size_t stride, size_t m, uint32_t *key)
{
	float *d_sample = (float *)(gt->ws + gt->l->sample);
	float *sample = (float *)malloc(m * sizeof(float));
	int ret;

	if (sample == NULL)
		return -ENOMEM;
	gather_kernel<<<grid_for((m + THREADS - 1) / THREADS, GRID_MAX),
		THREADS, 0, gt->s>>>(gt->d_g, gt->n, k->seed, stride, m,
		d_sample);
	ret = cuda_errno(cudaGetLastError());
	if (ret == 0)
		ret = cuda_errno(cudaMemcpyAsync(sample, d_sample,
			m * sizeof(float), cudaMemcpyDeviceToHost, gt->s));
	if (ret == 0)
		ret = cuda_errno(cudaStreamSynchronize(gt->s));
	if (ret == 0)
		ret = sparse_kth_key(sample, m, sparse_topk_k(m, density), key);
	free(sample);
	return ret;
}

size_t
tally_sparse_cuda_ws_size(size_t n, enum tally_sparse_est est,
	const struct tally_sparse_params *p)
{
	struct sparse_knobs k;
	struct ws_layout l;
	size_t stride, m = 0;

	if (sparse_knobs_of(p, &k) < 0)
		return 0;
	if (est == TALLY_SPARSE_DGC && n > 0)
		sparse_dgc_plan(n, k.sample, &stride, &m);
	ws_layout_of(n, m, &l);
	return l.size;
}

int
tally_sparse_moments_cuda(const float *d_g, size_t n, float t,
	unsigned int want, void *d_ws, size_t ws_size,
	struct tally_sparse_moments *m, void *stream)
{
	struct ws_layout l;
	struct gpu_tensor gt;

	if (m == NULL || (d_g == NULL && n > 0) || n > TALLY_SPARSE_N_MAX)
		return -EINVAL;
	if (!(t >= 0.0f && t <= FLT_MAX) ||
	    (want & ~(TALLY_SPARSE_M_SQ | TALLY_SPARSE_M_LOG)))
		return -EINVAL;
	ws_layout_of(n, 0, &l);
	if (d_ws == NULL || ws_size < l.size)
		return -EINVAL;
	gt = (struct gpu_tensor){ d_g, n, (char *)d_ws, &l,
		(cudaStream_t)stream, { n, 1, TALLY_SPARSE_SIDCO_RUNS(n), n,
		0 } };
	return gpu_moments(&gt, t, want, m);
}

int
tally_sparse_threshold_cuda(const float *d_g, size_t n, double density,
	enum tally_sparse_est est, const struct tally_sparse_params *p,
	void *d_ws, size_t ws_size, float *threshold, void *stream)
{
	struct sparse_knobs k;
	struct ws_layout l;
	struct gpu_tensor gt;
	size_t stride = 1, m = 0;
	uint32_t key;
	int ret;

	ret = sparse_check_args(d_g, n, density, est, threshold);
	if (ret < 0 || (ret = sparse_knobs_of(p, &k)) < 0)
		return ret;
	if (est == TALLY_SPARSE_DGC && n > 0)
		sparse_dgc_plan(n, k.sample, &stride, &m);
	ws_layout_of(n, m, &l);
	if (d_ws == NULL || ws_size < l.size)
		return -EINVAL;
	if (n == 0 || density == 1.0) {
		*threshold = FLT_TRUE_MIN;
		return 0;
	}
	gt = (struct gpu_tensor){ d_g, n, (char *)d_ws, &l,
		(cudaStream_t)stream, { n, 1, TALLY_SPARSE_SIDCO_RUNS(n), n,
		0 } };
	switch (est) {
	case TALLY_SPARSE_TOPK:
		ret = sparse_kth_key_hist(gpu_hist, &gt,
			sparse_topk_k(n, density), &key);
		break;
	case TALLY_SPARSE_DGC:
		ret = gpu_dgc(&gt, density, &k, stride, m, &key);
		break;
	default:
		sparse_sidco_sample(n, k.sidco_sample, k.seed, &gt.ss);
		return sparse_sidco(gpu_moments, &gt, gt.ss.elems, density,
			est, &k, threshold);
	}
	if (ret < 0)
		return ret;
	*threshold = sparse_key_threshold(key);
	return 0;
}

int
tally_sparse_block_max_cuda(const float *d_g, size_t n, float *d_bmax,
	void *stream)
{
	size_t nb = TALLY_SPARSE_NBLOCKS(n);

	if (n > TALLY_SPARSE_N_MAX || (n > 0 && (d_g == NULL ||
	    d_bmax == NULL)))
		return -EINVAL;
	if (n == 0)
		return 0;
	block_max_kernel<<<grid_for((nb + 7) / 8, GRID_MAX), THREADS, 0,
		(cudaStream_t)stream>>>(d_g, n, nb, d_bmax);
	return cuda_errno(cudaGetLastError());
}

int
tally_sparse_select_cuda(const float *d_g, size_t n, float threshold,
	uint32_t *d_bitmap, unsigned long long *d_counts, void *stream)
{
	cudaStream_t s = (cudaStream_t)stream;
	size_t nb = TALLY_SPARSE_NBLOCKS(n), nwords = (nb + 31) / 32;
	unsigned long long *counts = d_counts;
	int ret;

	if (d_bitmap == NULL || (d_g == NULL && n > 0) ||
	    !(threshold > 0.0f) || n > TALLY_SPARSE_N_MAX)
		return -EINVAL;
	if (counts != NULL) {
		ret = cuda_errno(cudaMemsetAsync(counts, 0, 2 * sizeof(*counts),
			s));
		if (ret < 0)
			return ret;
	}
	if (n == 0)
		return 0;
	if (counts == NULL) {
		/* The kernel always counts: into a scratch pair then. */
		ret = cuda_errno(cudaGetSymbolAddress((void **)&counts,
			select_sink));
		if (ret < 0)
			return ret;
	}
	select_kernel<<<grid_for((nwords + 7) / 8, GRID_MAX), THREADS, 0, s>>>(
		d_g, n, nb, tally_sparse_thr_key(threshold), d_bitmap, counts);
	return cuda_errno(cudaGetLastError());
}

int
tally_sparse_bitmap_list_cuda(const uint32_t *d_bitmap, size_t nblocks,
	uint32_t *d_blocks, void *stream)
{
	if (nblocks > TALLY_SPARSE_NBLOCKS(TALLY_SPARSE_N_MAX) ||
	    (nblocks > 0 && (d_bitmap == NULL || d_blocks == NULL)))
		return -EINVAL;
	if (nblocks == 0)
		return 0;
	list_kernel<<<1, LIST_THREADS, 0, (cudaStream_t)stream>>>(d_bitmap,
		nblocks, d_blocks);
	return cuda_errno(cudaGetLastError());
}

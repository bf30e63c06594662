/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The CUDA kernels of the shared-scale stochastic quantizers against the
 * CPU reference, bit for bit, on random data (NaN, infinities, values
 * past absmax and subnormals included) of sizes around and well past the
 * block and grid sizes, odd ones and ones not a multiple of the group,
 * at even and odd tensor offsets, with aligned and misaligned buffers;
 * then the kernels' bandwidth against the card's theoretical one
 * (printed as TAP comments). Without a CUDA device the whole program is
 * skipped, visibly (TAP "1..0 # SKIP").
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <setjmp.h>
#include <cmocka.h>

#include <cuda_runtime_api.h>

#include <tally/fixp.h>
#include <tally/fixp_cuda.h>
#include <tally/quant.h>
#include <tally/quant_cuda.h>

#define ARRAY_SIZE(a)	(sizeof(a) / sizeof((a)[0]))

/* Around a group (4), a block (256 x 4), past a grid (4096 x 256 x 4). */
static const size_t sizes[] = {
	1, 2, 3, 4, 5, 7, 31, 255, 1023, 1024, 1025, 1027, 4097, 65537,
	262147, (1u << 20) + 3, (1u << 22) + 6, 5u * (1u << 20) + 129,
};
#define N_MAX	(5u * (1u << 20) + 129)
/* Elements of the bandwidth runs: 256 MiB of floats. */
#define N_BW	(64u << 20)

static const unsigned int widths[] = { 16, 8, 4 };

/* Host and device buffers shared by the cases (set up once). */
struct bufs {
	float *x, *y, *y_gpu;
	uint8_t *p, *p_gpu;
	float *d_x, *d_y;
	uint8_t *d_p;
	cudaStream_t stream;
};

static uint64_t
rnd_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Uniform in [-1, 1), multiples of 2^-23. */
static float
rnd_unit(uint64_t *s)
{
	return (float)((int64_t)(rnd_next(s) >> 40) - (1 << 23)) / 0x1p23f;
}

/* n floats: uniform in [-a, a), with specials when specials is set. */
static void
fill(float *x, size_t n, float a, int specials, uint64_t *s)
{
	for (size_t i = 0; i < n; i++) {
		uint64_t r = rnd_next(s);

		switch (specials ? r % 16 : 15) {
		case 0:
			x[i] = NAN;
			break;
		case 1:
			x[i] = (r & 0x100) ? INFINITY : -INFINITY;
			break;
		case 2:
			x[i] = (r & 0x100) ? 0.0f : -0.0f;
			break;
		case 3:
			x[i] = 3.0f * a * rnd_unit(s);
			break;
		case 4:
			x[i] = 0x1p-140f * rnd_unit(s);
			break;
		default:
			x[i] = a * rnd_unit(s);
			break;
		}
	}
}

static unsigned int
width_max(unsigned int bits)
{
	return bits == 16 ? TALLY_QUANT_I16_LEVELS :
		bits == 8 ? TALLY_QUANT_I8_LEVELS : TALLY_QUANT_I4_LEVELS;
}

static size_t
width_bytes(unsigned int bits, size_t n)
{
	return bits == 4 ? (n + 1) / 2 : n * bits / 8;
}

static void
encode_cpu(unsigned int bits, const float *x, void *p, size_t n, float sc,
	unsigned int l, uint64_t seed, uint64_t off)
{
	if (bits == 16)
		tally_quant_encode_i16(x, p, n, sc, l, seed, off);
	else if (bits == 8)
		tally_quant_encode_i8(x, p, n, sc, l, seed, off);
	else
		tally_quant_encode_i4(x, p, n, sc, l, seed, off);
}

static int
encode_gpu(unsigned int bits, const float *d_x, void *d_p, size_t n,
	float sc, unsigned int l, uint64_t seed, uint64_t off, void *st)
{
	if (bits == 16)
		return tally_quant_encode_i16_cuda(d_x, d_p, n, sc, l, seed,
			off, st);
	if (bits == 8)
		return tally_quant_encode_i8_cuda(d_x, d_p, n, sc, l, seed,
			off, st);
	return tally_quant_encode_i4_cuda(d_x, d_p, n, sc, l, seed, off, st);
}

/* bits 32: wide i32 sums; 16, 8, 4: narrow. */
static void
decode_cpu(unsigned int bits, const void *p, float *x, size_t n, float sc)
{
	if (bits == 32)
		tally_quant_decode_i32(p, x, n, sc);
	else if (bits == 16)
		tally_quant_decode_i16(p, x, n, sc);
	else if (bits == 8)
		tally_quant_decode_i8(p, x, n, sc);
	else
		tally_quant_decode_i4(p, x, n, sc);
}

static int
decode_gpu(unsigned int bits, const void *d_p, float *d_x, size_t n,
	float sc, void *st)
{
	if (bits == 32)
		return tally_quant_decode_i32_cuda(d_p, d_x, n, sc, st);
	if (bits == 16)
		return tally_quant_decode_i16_cuda(d_p, d_x, n, sc, st);
	if (bits == 8)
		return tally_quant_decode_i8_cuda(d_p, d_x, n, sc, st);
	return tally_quant_decode_i4_cuda(d_p, d_x, n, sc, st);
}

static int
setup(void **state)
{
	struct bufs *b = calloc(1, sizeof(*b));
	size_t pb = 4 * (size_t)N_MAX + 64;

	if (b == NULL)
		return -1;
	b->x = malloc((N_MAX + 16) * sizeof(float));
	b->y = malloc((N_MAX + 16) * sizeof(float));
	b->y_gpu = malloc((N_MAX + 16) * sizeof(float));
	b->p = malloc(pb);
	b->p_gpu = malloc(pb);
	if (b->x == NULL || b->y == NULL || b->y_gpu == NULL ||
	    b->p == NULL || b->p_gpu == NULL)
		return -1;
	if (cudaMalloc((void **)&b->d_x, (N_MAX + 16) * sizeof(float)) !=
	    cudaSuccess ||
	    cudaMalloc((void **)&b->d_y, (N_MAX + 16) * sizeof(float)) !=
	    cudaSuccess ||
	    cudaMalloc((void **)&b->d_p, pb) != cudaSuccess ||
	    cudaStreamCreate(&b->stream) != cudaSuccess)
		return -1;
	*state = b;
	return 0;
}

static int
teardown(void **state)
{
	struct bufs *b = *state;

	if (b == NULL)
		return 0;
	cudaStreamDestroy(b->stream);
	cudaFree(b->d_x);
	cudaFree(b->d_y);
	cudaFree(b->d_p);
	free(b->x);
	free(b->y);
	free(b->y_gpu);
	free(b->p);
	free(b->p_gpu);
	free(b);
	return 0;
}

/*
 * Encodes b->x[xs .. xs + n) (on the device at the same place) on both
 * sides, the GPU's output at byte ps of d_p, and compares the bytes.
 */
static void
check_encode(struct bufs *b, unsigned int bits, size_t xs, size_t ps,
	size_t n, float sc, unsigned int l, uint64_t seed, uint64_t off,
	cudaStream_t st)
{
	size_t len = width_bytes(bits, n);

	encode_cpu(bits, b->x + xs, b->p, n, sc, l, seed, off);
	assert_int_equal(encode_gpu(bits, b->d_x + xs, b->d_p + ps, n, sc, l,
		seed, off, st), 0);
	assert_int_equal(cudaMemcpyAsync(b->p_gpu, b->d_p + ps, len,
		cudaMemcpyDeviceToHost, st), cudaSuccess);
	assert_int_equal(cudaStreamSynchronize(st), cudaSuccess);
	assert_memory_equal(b->p_gpu, b->p, len);
}

/*
 * Decodes the n sums in b->p (bits wide, uploaded to byte ps of d_p) on
 * both sides, the GPU's floats at d_y + ys, and compares the bits.
 */
static void
check_decode(struct bufs *b, unsigned int bits, size_t ps, size_t ys,
	size_t n, float sc, cudaStream_t st)
{
	size_t len = bits == 32 ? 4 * n : width_bytes(bits, n);

	assert_int_equal(cudaMemcpyAsync(b->d_p + ps, b->p, len,
		cudaMemcpyHostToDevice, st), cudaSuccess);
	decode_cpu(bits, b->p, b->y, n, sc);
	assert_int_equal(decode_gpu(bits, b->d_p + ps, b->d_y + ys, n, sc,
		st), 0);
	assert_int_equal(cudaMemcpyAsync(b->y_gpu, b->d_y + ys,
		n * sizeof(float), cudaMemcpyDeviceToHost, st), cudaSuccess);
	assert_int_equal(cudaStreamSynchronize(st), cudaSuccess);
	assert_memory_equal(b->y_gpu, b->y, n * sizeof(float));
}

/* Uploads b->x[0..n + 16). */
static void
upload(struct bufs *b, size_t n)
{
	assert_int_equal(cudaMemcpy(b->d_x, b->x, (n + 16) * sizeof(float),
		cudaMemcpyHostToDevice), cudaSuccess);
}

/*
 * Every width, wide and narrow levels, even and odd offsets (small and
 * past 2^32), aligned buffers and misaligned ones (the element-wise
 * path), on every size.
 */
static void
encode_all(void **state)
{
	struct bufs *b = *state;
	static const float mags[] = { 1e-30f, 1e-3f, 1.0f, 3e4f, 1e30f };
	uint64_t s = 11;

	for (size_t i = 0; i < ARRAY_SIZE(sizes); i++) {
		size_t n = sizes[i];
		float a = mags[i % ARRAY_SIZE(mags)];
		cudaStream_t st = (i & 1) ? b->stream : NULL;

		fill(b->x, n + 16, a, (int)(i % 3 == 0), &s);
		upload(b, n);
		for (size_t w = 0; w < ARRAY_SIZE(widths); w++) {
			unsigned int bits = widths[w], l;
			float sc;

			assert_int_equal(tally_quant_levels(bits, 1 + i % 7,
				(int)(i & 2), &l), 0);
			assert_int_equal(tally_quant_scale(a, l, &sc), 0);
			check_encode(b, bits, 0, 0, n, sc, l, rnd_next(&s),
				0, st);
			check_encode(b, bits, 0, 0, n, sc, l, rnd_next(&s),
				2 * (rnd_next(&s) >> 30), st);
			check_encode(b, bits, 0, 0, n, sc, l, rnd_next(&s),
				2 * (rnd_next(&s) >> 30) + 1, st);
			/*
			 * Input, output, both off the vector's alignment
			 * (the output on its element's: 2 bytes for i16).
			 */
			check_encode(b, bits, 1, 0, n, sc, l, rnd_next(&s),
				7, st);
			check_encode(b, bits, 0, bits == 16 ? 2 : 1, n, sc, l,
				rnd_next(&s), 8, st);
			check_encode(b, bits, 3, bits == 16 ? 6 : 3, n, sc, l,
				rnd_next(&s), (uint64_t)i, st);
			/* Levels beyond a narrow job's: the width's maximum. */
			check_encode(b, bits, 0, 0, n, sc / 3, width_max(bits),
				rnd_next(&s), 5, st);
		}
	}
}

/* Random sums of every width (any bit pattern), aligned or not. */
static void
decode_all(void **state)
{
	struct bufs *b = *state;
	static const unsigned int bitss[] = { 32, 16, 8, 4 };
	static const float scales[] = {
		1.0f, 127.0f / 3.0f, 7.0f / 1e-3f, 32767.0f / 1e30f, 3e38f,
	};
	uint64_t s = 12;

	for (size_t i = 0; i < ARRAY_SIZE(sizes); i++) {
		size_t n = sizes[i];
		cudaStream_t st = (i & 1) ? b->stream : NULL;

		for (size_t k = 0; k < 4 * n; k += 8) {
			uint64_t r = rnd_next(&s);

			memcpy(b->p + k, &r, 8);
		}
		for (size_t w = 0; w < ARRAY_SIZE(bitss); w++) {
			float sc = scales[(i + w) % ARRAY_SIZE(scales)];

			check_decode(b, bitss[w], 0, 0, n, sc, st);
			/* Off the vector's alignment, on the element's. */
			check_decode(b, bitss[w], bitss[w] > 8 ?
				bitss[w] / 8 : 1, 0, n, sc, st);
			check_decode(b, bitss[w], 0, 3, n, sc, st);
		}
	}
}

/* The GPU's round trip of one worker's chunk is the CPU's, bit for bit. */
static void
round_trip(void **state)
{
	struct bufs *b = *state;
	uint64_t s = 13;
	size_t n = (1u << 20) + 5;

	fill(b->x, n + 16, 2.0f, 0, &s);
	upload(b, n);
	for (size_t w = 0; w < ARRAY_SIZE(widths); w++) {
		unsigned int bits = widths[w], l = width_max(bits);
		float sc;

		assert_int_equal(tally_quant_scale(tally_fixp_absmax(b->x, n),
			l, &sc), 0);
		check_encode(b, bits, 0, 0, n, sc, l, 99, 0, b->stream);
		/* b->p holds the CPU's encoding: decode it on both. */
		check_decode(b, bits, 0, 0, n, sc, b->stream);
	}
}

/* Bad arguments are refused before any launch; n == 0 does nothing. */
static void
arguments(void **state)
{
	struct bufs *b = *state;

	for (size_t w = 0; w < ARRAY_SIZE(widths); w++) {
		unsigned int bits = widths[w];

		assert_int_equal(encode_gpu(bits, NULL, b->d_p, 1, 1.0f, 1, 0,
			0, NULL), -EINVAL);
		assert_int_equal(encode_gpu(bits, b->d_x, NULL, 1, 1.0f, 1, 0,
			0, NULL), -EINVAL);
		assert_int_equal(encode_gpu(bits, b->d_x, b->d_p, 1, 1.0f, 0, 0,
			0, NULL), -EINVAL);
		assert_int_equal(encode_gpu(bits, b->d_x, b->d_p, 1, 1.0f,
			width_max(bits) + 1, 0, 0, NULL), -EINVAL);
		assert_int_equal(encode_gpu(bits, b->d_x, b->d_p, 1, NAN, 1, 0,
			0, NULL), -EINVAL);
		assert_int_equal(encode_gpu(bits, b->d_x, b->d_p, 1, 0.0f, 1,
			0, 0, NULL), -EINVAL);
		assert_int_equal(encode_gpu(bits, b->d_x, b->d_p, 1, INFINITY,
			1, 0, 0, NULL), -EINVAL);
		assert_int_equal(encode_gpu(bits, NULL, NULL, 0, 1.0f, 1, 0, 0,
			NULL), 0);
	}
	for (unsigned int bits = 4; bits <= 32; bits *= 2) {
		assert_int_equal(decode_gpu(bits, NULL, b->d_y, 1, 1.0f, NULL),
			-EINVAL);
		assert_int_equal(decode_gpu(bits, b->d_p, NULL, 1, 1.0f, NULL),
			-EINVAL);
		assert_int_equal(decode_gpu(bits, b->d_p, b->d_y, 1, -1.0f,
			NULL), -EINVAL);
		assert_int_equal(decode_gpu(bits, NULL, NULL, 0, 1.0f, NULL),
			0);
	}
}

/* The card's theoretical memory bandwidth in GB/s, 0 if unknown. */
static double
peak_gbs(int *dev)
{
	int clk = 0, bus = 0;

	if (cudaGetDevice(dev) != cudaSuccess ||
	    cudaDeviceGetAttribute(&clk, cudaDevAttrMemoryClockRate, *dev) !=
	    cudaSuccess ||
	    cudaDeviceGetAttribute(&bus, cudaDevAttrGlobalMemoryBusWidth,
	    *dev) != cudaSuccess)
		return 0.0;
	/* kHz, two transfers a clock, bus bits / 8 bytes. */
	return (double)clk * 1e3 * 2.0 * (bus / 8) / 1e9;
}

/*
 * Bandwidth of every kernel on N_BW elements: GB/s of f32 (read by the
 * encoders, written by the decoders), GB/s of all memory traffic (f32
 * plus packed integers), and that traffic against the card's
 * theoretical bandwidth. Printed, not checked: the device may be shared.
 */
static void
bandwidth(void **state)
{
	struct bufs *b = *state;
	static const unsigned int bitss[] = { 16, 8, 4, 32 };
	struct cudaDeviceProp prop;
	float *d_x = NULL, *d_y = NULL;
	uint8_t *d_p = NULL;
	cudaEvent_t e0, e1;
	int dev = 0;
	double peak = peak_gbs(&dev);
	uint64_t s = 14;
	float *h = malloc((size_t)N_BW * sizeof(float));

	assert_non_null(h);
	assert_int_equal(cudaGetDeviceProperties(&prop, dev), cudaSuccess);
	printf("# device %s: theoretical memory bandwidth %.0f GB/s\n",
		prop.name, peak);
	fill(h, N_BW, 1.0f, 0, &s);
	assert_int_equal(cudaMalloc((void **)&d_x, (size_t)N_BW * 4),
		cudaSuccess);
	assert_int_equal(cudaMalloc((void **)&d_y, (size_t)N_BW * 4),
		cudaSuccess);
	assert_int_equal(cudaMalloc((void **)&d_p, (size_t)N_BW * 4),
		cudaSuccess);
	assert_int_equal(cudaMemcpy(d_x, h, (size_t)N_BW * 4,
		cudaMemcpyHostToDevice), cudaSuccess);
	assert_int_equal(cudaEventCreate(&e0), cudaSuccess);
	assert_int_equal(cudaEventCreate(&e1), cudaSuccess);
	for (int dec = 0; dec < 2; dec++) {
		for (size_t w = 0; w < ARRAY_SIZE(bitss); w++) {
			unsigned int bits = bitss[w];
			size_t pk = bits == 32 ? (size_t)N_BW * 4 :
				width_bytes(bits, N_BW);
			const int reps = 20;
			float ms = 0.0f;
			double gbs, traffic;

			if (!dec && bits == 32)
				continue;
			for (int r = -2; r < reps; r++) {
				if (r == 0)
					assert_int_equal(cudaEventRecord(e0,
						b->stream), cudaSuccess);
				if (dec)
					assert_int_equal(decode_gpu(bits, d_p,
						d_y, N_BW, 3.0f, b->stream), 0);
				else
					assert_int_equal(encode_gpu(bits, d_x,
						d_p, N_BW, 7.0f, width_max(bits) <
						7 ? width_max(bits) : 7,
						(uint64_t)r, 0, b->stream), 0);
			}
			assert_int_equal(cudaEventRecord(e1, b->stream),
				cudaSuccess);
			assert_int_equal(cudaEventSynchronize(e1), cudaSuccess);
			assert_int_equal(cudaEventElapsedTime(&ms, e0, e1),
				cudaSuccess);
			gbs = (double)N_BW * 4 * reps / (ms * 1e-3) / 1e9;
			traffic = (double)((size_t)N_BW * 4 + pk) * reps /
				(ms * 1e-3) / 1e9;
			printf("# gpu %s_i%u: %.0f GB/s of f32, %.0f GB/s of "
				"traffic, %.0f%% of %.0f GB/s\n",
				dec ? "decode" : "encode", bits, gbs, traffic,
				peak > 0 ? 100.0 * traffic / peak : 0.0, peak);
		}
	}
	cudaEventDestroy(e0);
	cudaEventDestroy(e1);
	cudaFree(d_x);
	cudaFree(d_y);
	cudaFree(d_p);
	free(h);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(encode_all),
		cmocka_unit_test(decode_all),
		cmocka_unit_test(round_trip),
		cmocka_unit_test(arguments),
		cmocka_unit_test(bandwidth),
	};
	int ndev = tally_cuda_device_count();

	if (ndev < 1) {
		printf("1..0 # SKIP no CUDA device (%s)\n", strerror(-ndev));
		return 0;
	}
	return cmocka_run_group_tests(tests, setup, teardown);
}

/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * CPU side of the 16-bit fixed-point codec (<tally/fixp16.h>): argument
 * checks, the lane rule, the exponent, and the element loops, scalar over
 * fixp16_math.h (the code the CUDA kernels run) or vectorized
 * (fixp16_x86.c) where the CPU has AVX2 and F16C.
 */
#include <errno.h>
#include <stdint.h>

#include <tally/fixp.h>
#include <tally/fixp16.h>

#include "fixp16_math.h"
#include "fixp16_simd.h"

#if TALLY_FIXP16_HAVE_SIMD
#include <cpuid.h>
#endif

/* -1: not decided yet; 0: scalar; 1: vectorized. */
static int simd_mode = -1;

/* Whether this CPU runs the vectorized loops. */
static int
cpu_has_simd(void)
{
#if TALLY_FIXP16_HAVE_SIMD
	unsigned int a, b, c, d;

	/* F16C from CPUID itself: clang 14's __builtin_cpu_supports()
	 * does not know it (AVX2's check covers the OS's AVX state). */
	__builtin_cpu_init();
	return __builtin_cpu_supports("avx2") &&
		__get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C) != 0;
#else
	return 0;
#endif
}

/* Picks (on >= 0) or reports the vectorized path; see <tally/fixp16.h>. */
int
tally_fixp16_simd(int on)
{
	if (on >= 0 || simd_mode < 0)
		simd_mode = on != 0 && cpu_has_simd();
	return simd_mode;
}

/* p, the significant bits of dt (0: not a 16-bit float type). */
static int
type_bits(enum tally_dtype dt)
{
	return dt == TALLY_DT_BF16 ? 8 : dt == TALLY_DT_F16 ? 11 : 0;
}

/* floor(log2 world) for world >= 1. */
static int
log2_floor(unsigned int world)
{
	int l = 0;

	while (world > 1) {
		world >>= 1;
		l++;
	}
	return l;
}

/* b of <tally/fixp16.h>: the bits each encoded |q| may take, 2^b. */
static int
headroom(unsigned int world, unsigned int lanes, int narrow)
{
	if (lanes == 32)
		return 30 - log2_floor(world);
	return narrow ? 14 - log2_floor(world) : 14;
}

/* The lane rule of <tally/fixp16.h>: 16 where E <= 2^-(p+1) A, narrow. */
unsigned int
tally_fixp16_lanes(enum tally_dtype dt, unsigned int world, int narrow)
{
	int p = type_bits(dt);

	if (p == 0 || !narrow || world == 0 || world > TALLY_FIXP_WORLD_MAX)
		return 32;
	/* E = world 2^-b A <= 2^-(p+1) A. */
	if ((uint64_t)world << (p + 1) <= UINT64_C(1) << headroom(world, 16, 1))
		return 16;
	return 32;
}

/*
 * fixp's exponent for world (b = 30 - floor(log2 world)), moved to the
 * headroom of lanes and narrow. Writes *exp only on success.
 */
int
tally_fixp16_exponent(float absmax, unsigned int world, unsigned int lanes,
	int narrow, int *exp)
{
	int e, rc;

	if ((lanes != 16 && lanes != 32) || exp == NULL)
		return -EINVAL;
	/* fixp's exponent has b = 30 - floor(log2 world); shift to ours. */
	rc = tally_fixp_exponent(absmax, world, &e);
	if (rc != 0)
		return rc;
	if (absmax != 0.0f)
		e -= 30 - log2_floor(world) - headroom(world, lanes, narrow);
	*exp = e;
	return 0;
}

/* The largest magnitude bits of n elements, NaN as 0; borrows x. */
static uint16_t
absmax_scalar(const uint16_t *x, size_t n, uint16_t inf)
{
	uint16_t m = 0;

	for (size_t i = 0; i < n; i++) {
		uint16_t a = tally_fixp16_abs_bits(x[i], inf);

		m = a > m ? a : m;
	}
	return m;
}

/* Max |x[i]| of dt's elements, NaN as 0, as an exact float. Borrows x. */
float
tally_fixp16_absmax(enum tally_dtype dt, const uint16_t *x, size_t n)
{
	uint16_t inf = dt == TALLY_DT_F16 ? 0x7c00u : 0x7f80u, m;

	if (type_bits(dt) == 0 || x == NULL)
		return 0.0f;
	/* GCC 12 leaves absmax_scalar()'s loop scalar (a compare and two
	 * cmovs an element: a fifth of a worker's CPU in a 64 MiB bf16
	 * allreduce), hence the AVX2 loop. */
#if TALLY_FIXP16_HAVE_SIMD
	if (tally_fixp16_simd(-1))
		m = tally_fixp16_absmax_avx2(x, n, inf);
	else
#endif
		m = absmax_scalar(x, n, inf);
	return dt == TALLY_DT_F16 ? tally_fixp16_f16_f32(m) :
		tally_fixp16_bf16_f32(m);
}

/* The widened value of element h of type f16 (else bf16). */
static inline float
widen(int f16, uint16_t h)
{
	return f16 ? tally_fixp16_f16_f32(h) : tally_fixp16_bf16_f32(h);
}

/* Scalar encoding loops; borrow x, write q. */
static void
enc32_scalar(int f16, const uint16_t *x, int32_t *q, size_t n, float s1,
	float s2)
{
	for (size_t i = 0; i < n; i++)
		q[i] = tally_fixp_enc1(widen(f16, x[i]), s1, s2);
}

static void
enc16_scalar(int f16, const uint16_t *x, int16_t *q, size_t n, float s1,
	float s2)
{
	for (size_t i = 0; i < n; i++)
		q[i] = tally_fixp16_enc16(widen(f16, x[i]), s1, s2);
}

/*
 * Encodes n elements of dt into q's lanes, vectorized where it can.
 * Borrows x, writes the caller's q.
 */
int
tally_fixp16_encode(enum tally_dtype dt, const uint16_t *x, void *q,
	unsigned int lanes, size_t n, int exp)
{
	int f16 = dt == TALLY_DT_F16;
	float s1 = tally_fixp_scale1(exp), s2 = tally_fixp_scale2(exp);

	if (type_bits(dt) == 0 || (lanes != 16 && lanes != 32))
		return -EINVAL;
	if (n == 0)
		return 0;
	if (x == NULL || q == NULL)
		return -EINVAL;
#if TALLY_FIXP16_HAVE_SIMD
	if (tally_fixp16_simd(-1)) {
		if (lanes == 32)
			tally_fixp16_enc32_avx2(f16, x, q, n, s1, s2);
		else
			tally_fixp16_enc16_avx2(f16, x, q, n, s1, s2);
		return 0;
	}
#endif
	if (lanes == 32)
		enc32_scalar(f16, x, q, n, s1, s2);
	else
		enc16_scalar(f16, x, q, n, s1, s2);
	return 0;
}

/* Scalar decoding loop over int32 or int16 sums; borrows q, writes x. */
static void
dec_scalar(int f16, const void *q, unsigned int sum_bits, uint16_t *x,
	size_t n, int e)
{
	const struct tally_fixp16_fmt bf = TALLY_FIXP16_FMT_BF16;
	const struct tally_fixp16_fmt hf = TALLY_FIXP16_FMT_F16;
	struct tally_fixp16_fmt f = f16 ? hf : bf;

	if (sum_bits == 32) {
		const int32_t *s = q;

		for (size_t i = 0; i < n; i++)
			x[i] = tally_fixp16_dec1(s[i], e, f);
	} else {
		/* Forward: x may be q itself (2 bytes each). */
		const int16_t *s = q;

		for (size_t i = 0; i < n; i++)
			x[i] = tally_fixp16_dec1(s[i], e, f);
	}
}

/*
 * Rounds n sums once into dt, vectorized where it can. Borrows q, writes
 * the caller's x.
 */
int
tally_fixp16_decode(enum tally_dtype dt, const void *q,
	unsigned int sum_bits, uint16_t *x, size_t n, int exp)
{
	int f16 = dt == TALLY_DT_F16, e = tally_fixp_clamp(exp);

	if (type_bits(dt) == 0 || (sum_bits != 16 && sum_bits != 32))
		return -EINVAL;
	if (n == 0)
		return 0;
	if (x == NULL || q == NULL)
		return -EINVAL;
#if TALLY_FIXP16_HAVE_SIMD
	if (tally_fixp16_simd(-1)) {
		if (sum_bits == 32)
			tally_fixp16_dec32_avx2(f16, q, x, n, e);
		else
			tally_fixp16_dec16_avx2(f16, q, x, n, e);
		return 0;
	}
#endif
	dec_scalar(f16, q, sum_bits, x, n, e);
	return 0;
}

/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Lane kernels. Each is a plain loop the compiler vectorizes. On x86-64
 * tally_lanes_fold(), with every kernel inlined into it, is cloned for
 * AVX-512 and AVX2 and picked at load time: one binary runs everywhere,
 * uses the widest vectors the host has, and costs one call a packet.
 */
#include <string.h>

#include <tally/proto.h>

#include "lanes.h"

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "tally payloads are little-endian; this host is not"
#endif

#if defined(__x86_64__) && !defined(TALLY_NO_MULTIVERSION)
#define TALLY_MV __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define TALLY_MV
#endif

/* Payload elements sit at any byte offset in a received frame. */
typedef int32_t i32u __attribute__((aligned(1), may_alias));
typedef uint32_t u32u __attribute__((aligned(1), may_alias));
typedef int16_t i16u __attribute__((aligned(1), may_alias));
typedef float f32u __attribute__((aligned(1), may_alias));
/* Lanes hold f32 in one round and i32 in the next. */
typedef float f32l __attribute__((may_alias));
typedef int32_t i32l __attribute__((may_alias));

static inline int32_t
nib_lo(uint8_t b)
{
	return (int32_t)(int8_t)(uint8_t)(b << 4) >> 4;
}

static inline int32_t
nib_hi(uint8_t b)
{
	return (int32_t)(int8_t)b >> 4;
}

static inline void
fold_sum_f32(f32l *restrict l, const f32u *restrict p, unsigned int n)
{
	for (unsigned int i = 0; i < n; i++)
		l[i] += p[i];
}

/* Integer sums wrap (two's complement); unsigned arithmetic says so. */
static inline void
fold_sum_i32(uint32_t *restrict l, const u32u *restrict p, unsigned int n)
{
	for (unsigned int i = 0; i < n; i++)
		l[i] += p[i];
}

static inline void
fold_sum_i16(uint32_t *restrict l, const i16u *restrict p, unsigned int n)
{
	for (unsigned int i = 0; i < n; i++)
		l[i] += (uint32_t)(int32_t)p[i];
}

static inline void
fold_sum_i8(uint32_t *restrict l, const int8_t *restrict p, unsigned int n)
{
	for (unsigned int i = 0; i < n; i++)
		l[i] += (uint32_t)(int32_t)p[i];
}

static inline void
fold_sum_i4(uint32_t *restrict l, const uint8_t *restrict p, unsigned int n)
{
	unsigned int i;

	for (i = 0; i + 1 < n; i += 2) {
		l[i] += (uint32_t)nib_lo(p[i / 2]);
		l[i + 1] += (uint32_t)nib_hi(p[i / 2]);
	}
	if (i < n)
		l[i] += (uint32_t)nib_lo(p[i / 2]);
}

static inline void
fold_sum_sign(uint32_t *restrict l, const uint8_t *restrict p, unsigned int n)
{
	for (unsigned int i = 0; i < n; i++)
		l[i] += (p[i / 8] >> (i % 8)) & 1u;
}

/*
 * An f32's bits as an i32 whose signed order is the floats' total order:
 * -NaN < -inf < ... < -0 < +0 < ... < +inf < +NaN. Taking maxima by it
 * gives the same bits whatever order contributions arrive in (a plain >
 * would keep whichever of -0 and +0 came first).
 */
static inline int32_t
f32_order_key(int32_t bits)
{
	return bits ^ (int32_t)((uint32_t)(bits >> 31) >> 1);
}

static inline void
fold_max_f32(i32l *restrict l, const i32u *restrict p, unsigned int n)
{
	for (unsigned int i = 0; i < n; i++)
		l[i] = f32_order_key(p[i]) > f32_order_key(l[i]) ? p[i] : l[i];
}

static inline void
fold_max_i32(i32l *restrict l, const i32u *restrict p, unsigned int n)
{
	for (unsigned int i = 0; i < n; i++)
		l[i] = p[i] > l[i] ? p[i] : l[i];
}

TALLY_MV void
tally_lanes_fold(uint32_t *lanes, const void *payload, enum tally_lane_op op,
	unsigned int enc, unsigned int n)
{
	if (op == TALLY_OP_MAX) {
		if (enc == TALLY_ENC_F32)
			fold_max_f32((i32l *)lanes, payload, n);
		else
			fold_max_i32((i32l *)lanes, payload, n);
		return;
	}
	switch (enc) {
	case TALLY_ENC_F32:
		fold_sum_f32((f32l *)lanes, payload, n);
		break;
	case TALLY_ENC_I32:
		fold_sum_i32(lanes, payload, n);
		break;
	case TALLY_ENC_I16:
		fold_sum_i16(lanes, payload, n);
		break;
	case TALLY_ENC_I8:
		fold_sum_i8(lanes, payload, n);
		break;
	case TALLY_ENC_I4:
		fold_sum_i4(lanes, payload, n);
		break;
	case TALLY_ENC_SIGN:
		fold_sum_sign(lanes, payload, n);
		break;
	}
}

/* After tally_lanes_fold(): clang wants a multiversioned function
 * defined before its first call. */
void
tally_lanes_init(uint32_t *lanes, const void *payload, enum tally_lane_op op,
	unsigned int enc, unsigned int n)
{
	if (enc == TALLY_ENC_F32 || enc == TALLY_ENC_I32 || op == TALLY_OP_MAX) {
		memcpy(lanes, payload, (size_t)n * 4);
		return;
	}
	memset(lanes, 0, (size_t)n * 4);
	tally_lanes_fold(lanes, payload, op, enc, n);
}

static inline int32_t
sat(int32_t v, int32_t lo, int32_t hi)
{
	return v < lo ? lo : v > hi ? hi : v;
}

/*
 * The narrowing loops below write byte k of the result while lane k (at
 * byte 4k) or later is still to be read, so walking forward in place is
 * safe; they run once a completed slot, not once a packet.
 */
unsigned int
tally_lanes_finish(uint32_t *lanes, unsigned int res_enc, unsigned int n,
	unsigned int world)
{
	const i32l *l = (const i32l *)lanes;
	uint8_t *out = (uint8_t *)lanes;
	unsigned int i;

	if (res_enc == TALLY_ENC_F32 || res_enc == TALLY_ENC_I32)
		return n * 4;
	switch (res_enc) {
	case TALLY_ENC_I16:
		for (i = 0; i < n; i++) {
			int16_t v = (int16_t)sat(l[i], INT16_MIN, INT16_MAX);

			memcpy(out + 2 * i, &v, 2);
		}
		break;
	case TALLY_ENC_I8:
		/* i8 sums saturate; sign vote counts (<= 64) always fit. */
		for (i = 0; i < n; i++)
			out[i] = (uint8_t)(int8_t)sat(l[i], INT8_MIN, INT8_MAX);
		break;
	case TALLY_ENC_I4:
		for (i = 0; i < n; i += 2) {
			uint8_t lo = (uint8_t)sat(l[i], -8, 7) & 0xf;
			uint8_t hi = i + 1 < n ?
				(uint8_t)sat(l[i + 1], -8, 7) & 0xf : 0;

			out[i / 2] = (uint8_t)(lo | hi << 4);
		}
		break;
	case TALLY_ENC_SIGN:
		/* Majority: the bit is set when more than half voted +. */
		for (i = 0; i < n; i += 8) {
			uint8_t b = 0;

			for (unsigned int j = 0; j < 8 && i + j < n; j++)
				b |= (uint8_t)((2u * (uint32_t)l[i + j] > world) << j);
			out[i / 8] = b;
		}
		break;
	}
	return (unsigned int)tally_enc_payload_len(res_enc, n);
}

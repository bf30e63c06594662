/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What a job costs at the dataplane and how large its packets get: the
 * formulas tally-dp (job_add), tallyd (job create, join) and libtally
 * (join) share, so that all three accept and refuse the same numbers.
 *
 * - Memory: a job holds window x 2 shadow sets, each with its 32-byte
 *   state, its owner byte and max_elems 32-bit lanes rounded up to 16,
 *   plus a fixed part (counters, result headers): tally_job_mem_bytes().
 * - Packets: a chunk of max_elems elements in encoding enc, and its
 *   result (widened to i32 or i8 unless the job is narrow:
 *   tally_enc_result()), each a UDP datagram of TALLY_HDR_LEN + payload
 *   bytes inside an IPv4 packet that must fit the link's MTU:
 *   tally_job_ip_len(). A job declares the encodings it sends at full
 *   length as a bit mask (TALLY_ENC_BIT); a codec's mask is
 *   tally_codec_encs().
 *
 * Self-contained (the C library and the two headers below); every helper
 * is static inline.
 */
#ifndef TALLY_LIMITS_H
#define TALLY_LIMITS_H

#include <stddef.h>
#include <stdint.h>

#include <tally/codec.h>
#include <tally/proto.h>

#ifdef __cplusplus
extern "C" {
#endif

/* IPv4 without options, then UDP: what a tally datagram travels in. */
#define TALLY_IPV4_UDP_LEN	28
/* One shadow set's state at the dataplane (agg/job.h, struct tally_set),
 * and its round's owner (a reduce-scatter's or all-gather's, job->owner). */
#define TALLY_JOB_SET_BYTES	32
#define TALLY_JOB_OWNER_BYTES	1
/* A job's fixed part at tally-dp: the job (with room for an
 * authenticated job's raw keys), its counter rows and result headers
 * (checked against the real structs in dataplane/dp/jobs.c). An
 * authenticated job also holds 1 KiB of expanded keys per member and one
 * more (TALLY_JOB_AUTH_BYTES): tally_job_mem() counts both. */
#define TALLY_JOB_FIXED_BYTES	12288
#define TALLY_JOB_AUTH_BYTES(world)	((2u * (world) + 1u) * 1024u)

#define TALLY_ENC_BIT(enc)	(1u << (enc))
/*
 * Not an encoding: or'ed into a mask of encodings, it says the job is
 * authenticated, and every packet carries a TALLY_TAG_LEN-byte tag
 * (docs/protocol.md, "Authenticated jobs"), which the sizes below count.
 */
#define TALLY_ENC_AUTH		(1u << 31)
/* Every encoding: what a job that declares none may send. */
#define TALLY_ENC_ALL		(((1u << TALLY_ENC_MAX_) - 1) & \
				 ~(TALLY_ENC_BIT(0)))

/* Bytes tally-dp holds for a job of window slots and max_elems lanes. */
static inline uint64_t
tally_job_mem_bytes(unsigned int window, unsigned int max_elems)
{
	uint64_t stride = ((uint64_t)max_elems + 15) & ~(uint64_t)15;

	return (uint64_t)window * 2 * (TALLY_JOB_SET_BYTES +
		TALLY_JOB_OWNER_BYTES + stride * 4) +
		TALLY_JOB_FIXED_BYTES;
}

/* The same, with an authenticated job's expanded keys when auth. */
static inline uint64_t
tally_job_mem(unsigned int window, unsigned int max_elems, unsigned int world,
	int auth)
{
	return tally_job_mem_bytes(window, max_elems) +
		(auth ? TALLY_JOB_AUTH_BYTES(world) : 0);
}

/*
 * The encodings a codec's workers send with max_elems elements a packet
 * (its scale rounds of one element fit any packet): fixed point, random-k,
 * block-sparse and PowerSGD sum i32 and take f32 maxima of up to a
 * packet; the quantizers send their own width.
 */
static inline unsigned int
tally_codec_encs(unsigned int kind)
{
	switch (kind) {
	case TALLY_CODEC_Q16:
		return TALLY_ENC_BIT(TALLY_ENC_I16);
	case TALLY_CODEC_Q8:
		return TALLY_ENC_BIT(TALLY_ENC_I8);
	case TALLY_CODEC_Q4:
	case TALLY_CODEC_TERNARY:
	case TALLY_CODEC_2BIT:
		return TALLY_ENC_BIT(TALLY_ENC_I4);
	case TALLY_CODEC_SIGN:
		return TALLY_ENC_BIT(TALLY_ENC_SIGN);
	case TALLY_CODEC_FIXP:
	case TALLY_CODEC_RANDK:
	case TALLY_CODEC_SPARSE:
	case TALLY_CODEC_POWERSGD:
		return TALLY_ENC_BIT(TALLY_ENC_I32) | TALLY_ENC_BIT(TALLY_ENC_F32);
	default:
		return TALLY_ENC_ALL;
	}
}

/*
 * The largest UDP payload (tally header included) of a job's packets:
 * contributions of max_elems elements in any encoding of encs, and their
 * results as the job sends them back (narrow or widened). Writes the
 * encoding of that largest packet to *worst when worst is not NULL.
 */
static inline size_t
tally_job_udp_len(unsigned int encs, int narrow, unsigned int max_elems,
	unsigned int *worst)
{
	size_t max = 0;
	int found = 0;

	for (unsigned int e = TALLY_ENC_F32; e < TALLY_ENC_MAX_; e++) {
		size_t c, r;

		if (!(encs & TALLY_ENC_BIT(e)))
			continue;
		c = tally_enc_payload_len(e, max_elems);
		r = tally_enc_payload_len(tally_enc_result(e, narrow),
			max_elems);
		if (r > c)
			c = r;
		if (c > max || !found) {
			max = c;
			found = 1;
			if (worst != NULL)
				*worst = e;
		}
	}
	return TALLY_HDR_LEN + max + ((encs & TALLY_ENC_AUTH) ?
		TALLY_TAG_LEN : 0);
}

/* The IPv4 length of the job's largest packet (see above). */
static inline size_t
tally_job_ip_len(unsigned int encs, int narrow, unsigned int max_elems)
{
	return TALLY_IPV4_UDP_LEN + tally_job_udp_len(encs, narrow, max_elems,
		NULL);
}

/*
 * The largest max_elems (1..TALLY_MAX_ELEMS) whose packets fit an MTU of
 * mtu bytes, for a job of encodings encs; 0 when not even one element
 * does.
 */
static inline unsigned int
tally_job_max_elems(unsigned int mtu, unsigned int encs, int narrow)
{
	unsigned int lo = 0, hi = TALLY_MAX_ELEMS;

	while (lo < hi) {
		unsigned int mid = lo + (hi - lo + 1) / 2;

		if (tally_job_ip_len(encs, narrow, mid) <= mtu)
			lo = mid;
		else
			hi = mid - 1;
	}
	return lo;
}

#ifdef __cplusplus
}
#endif

#endif /* TALLY_LIMITS_H */

/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The fingerprint of a job's 64-bit wire token, as tally-dp's admin
 * job_list shows it ("token_fp": 16 lowercase hex digits) in place of the
 * token itself: tallyd compares it with the token it programmed to tell
 * its own membership from another one under the same job id.
 *
 * It is the 64-bit FNV-1a hash (offset basis 0xcbf29ce484222325, prime
 * 0x100000001b3) of the token's 8 bytes in wire (big-endian) order, most
 * significant byte first: the order of the 16 hex digits that spell the
 * token in job_add's "token". Not a secret: anyone who may read job_list
 * may see it; it only says whether two tokens differ.
 */
#ifndef TALLY_TOKEN_FP_H
#define TALLY_TOKEN_FP_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The fingerprint of token (its numeric value, as job_add's hex spells it). */
static inline uint64_t
tally_token_fp(uint64_t token)
{
	uint64_t h = 0xcbf29ce484222325ULL;

	for (int shift = 56; shift >= 0; shift -= 8) {
		h ^= (token >> shift) & 0xff;
		h *= 0x100000001b3ULL;
	}
	return h;
}

#ifdef __cplusplus
}
#endif

#endif /* TALLY_TOKEN_FP_H */

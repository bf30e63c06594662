/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The one's-complement sum of the Internet checksum, fast. Every tally
 * datagram's UDP checksum is verified in software where the port does not
 * (af_packet, af_xdp), and every result body is summed once: a kilobyte
 * a frame. 32-bit words summed into 64-bit lanes is the same sum (a
 * 32-bit word is two 16-bit words, folded later), and that loop is one
 * the compiler vectorizes; cloned for AVX-512 and AVX2 like lanes.c.
 */
#include <stdint.h>
#include <string.h>

#include "net.h"

#if defined(__x86_64__) && !defined(TALLY_NO_MULTIVERSION)
#define TALLY_MV __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define TALLY_MV
#endif

typedef uint32_t u32u __attribute__((aligned(1), may_alias));

TALLY_MV static uint64_t
sum_words(const u32u *w, size_t n)
{
	uint64_t s = 0;

	for (size_t i = 0; i < n; i++)
		s += w[i];
	return s;
}

uint16_t
tally_net_raw_cksum(const void *buf, size_t len)
{
	const uint8_t *p = buf;
	uint64_t s = sum_words((const u32u *)p, len / 4);
	size_t i = len & ~(size_t)3;
	uint16_t w;

	if (len - i >= 2) {
		memcpy(&w, p + i, 2);
		s += w;
		i += 2;
	}
	if (i < len) {
		/* A last odd byte is the first byte of a zero-padded word. */
		w = 0;
		memcpy(&w, p + i, 1);
		s += w;
	}
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return (uint16_t)s;
}

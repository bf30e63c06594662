/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * CRC-32 and the RoCEv2 ICRC (net/icrc.c): rte_net_crc on both of its
 * paths against a bit-at-a-time CRC of our own; CRCs joined by
 * tally_crc32_combine() against the CRC of the joined bytes, at every
 * split of a buffer; and ICRC vectors: the RoCEv2 CNP packet that
 * scapy's own tests (test/contrib/roce.uts) captured from a ConnectX-4
 * Lx, scapy's UC SEND example, and two UD SEND packets that scapy's RoCE
 * layer (python3-scapy) built and checksummed, one with an immediate.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "frame.h"
#include "net/icrc.h"

/* CRC-32, reflected, bit by bit: shares nothing with the code. */
static uint32_t
ref_crc32(const uint8_t *p, size_t len)
{
	uint32_t c = 0xffffffffu;

	for (size_t i = 0; i < len; i++) {
		c ^= p[i];
		for (int k = 0; k < 8; k++)
			c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1)));
	}
	return ~c;
}

static size_t
unhex(const char *hex, uint8_t *out)
{
	size_t n = 0;

	for (; hex[0] != '\0' && hex[1] != '\0'; hex += 2) {
		char b[3] = { hex[0], hex[1], '\0' };

		out[n++] = (uint8_t)strtoul(b, NULL, 16);
	}
	return n;
}

static uint32_t
le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
		(uint32_t)p[3] << 24;
}

static void
fill(uint8_t *p, size_t len, uint32_t seed)
{
	for (size_t i = 0; i < len; i++) {
		seed = seed * 1103515245u + 12345u;
		p[i] = (uint8_t)(seed >> 16);
	}
}

/* "123456789" has the CRC-32 check value 0xcbf43926, on every path. */
static void
crc_paths(void **state)
{
	static const enum rte_net_crc_alg algs[] = {
		RTE_NET_CRC_SCALAR, RTE_NET_CRC_SSE42,
	};
	static uint8_t buf[9000];

	(void)state;
	fill(buf, sizeof(buf), 1);
	for (size_t a = 0; a < RTE_DIM(algs); a++) {
		rte_net_crc_set_alg(algs[a]);
		assert_int_equal(tally_crc32("123456789", 9), 0xcbf43926u);
		for (size_t len = 0; len < 300; len++)
			assert_int_equal(tally_crc32(buf + 3, (uint32_t)len),
				ref_crc32(buf + 3, len));
		assert_int_equal(tally_crc32(buf, sizeof(buf)),
			ref_crc32(buf, sizeof(buf)));
	}
	tally_icrc_init();
}

/* The path named is one of four; it computes the same CRCs. */
static void
init_names_path(void **state)
{
	const char *name = tally_icrc_init();

	(void)state;
	assert_true(strcmp(name, "vpclmul16") == 0 ||
		strcmp(name, "clmul4") == 0 ||
		strcmp(name, "sse42") == 0 || strcmp(name, "scalar") == 0 ||
		strcmp(name, "neon") == 0);
	assert_int_equal(tally_crc32("123456789", 9), 0xcbf43926u);
}

/* combine(crc(A), crc(B), |B|) == crc(AB) at every split. */
static void
combine_every_split(void **state)
{
	static uint8_t buf[1100];

	(void)state;
	fill(buf, sizeof(buf), 7);
	for (size_t len = 0; len <= 70; len++)
		for (size_t s = 0; s <= len; s++)
			assert_int_equal(tally_crc32_combine(
				ref_crc32(buf, s), ref_crc32(buf + s, len - s),
				(uint32_t)(len - s)), ref_crc32(buf, len));
	for (size_t s = 0; s <= sizeof(buf); s += 37)
		assert_int_equal(tally_crc32_combine(ref_crc32(buf, s),
			ref_crc32(buf + s, sizeof(buf) - s),
			(uint32_t)(sizeof(buf) - s)),
			ref_crc32(buf, sizeof(buf)));
}

/* Long second parts: the powers of x for every bit of a 16-bit length. */
static void
combine_long(void **state)
{
	static uint8_t buf[70000];

	(void)state;
	fill(buf, sizeof(buf), 3);
	for (uint32_t lb = 1; lb < 65536; lb = lb * 3 + 1) {
		uint32_t la = 56;

		assert_int_equal(tally_crc32_combine(ref_crc32(buf, la),
			ref_crc32(buf + la, lb), lb), ref_crc32(buf, la + lb));
	}
	/* x^0 is the unit: nothing to move past. */
	assert_int_equal(tally_crc32_xpow(0), 0x80000000u);
	assert_int_equal(tally_crc32_mul(0x80000000u, 0x12345678u),
		0x12345678u);
}

/*
 * Path name (forced by tally_icrc_set_path()) against the bitwise CRC:
 * every length to 700 at every alignment mod 16, lengths around each
 * 256-byte step of the sixteen-lane fold, and long buffers. Returns
 * whether the path ran here (a path the CPU lacks is skipped, said).
 */
static int
path_every_length(const char *name)
{
	static uint8_t buf[9300];
	int rc = tally_icrc_set_path(name);

	if (rc == -ENOTSUP) {
		printf("# path %s: not on this CPU, skipped\n", name);
		return 0;
	}
	assert_int_equal(rc, 0);
	printf("# path %s\n", name);
	fill(buf, sizeof(buf), 5);
	for (size_t off = 0; off < 16; off++)
		for (size_t len = 0; len <= 700; len++)
			assert_int_equal(tally_crc32(buf + off, (uint32_t)len),
				ref_crc32(buf + off, len));
	for (size_t step = 256; step <= 2048; step += 256)
		for (size_t len = step - 17; len <= step + 65; len++)
			assert_int_equal(tally_crc32(buf + 3, (uint32_t)len),
				ref_crc32(buf + 3, len));
	for (size_t len = 1000; len < 9290; len += 997)
		for (size_t off = 0; off < 16; off += 5)
			assert_int_equal(tally_crc32(buf + off, (uint32_t)len),
				ref_crc32(buf + off, len));
	assert_int_equal(tally_crc32(buf, sizeof(buf)),
		ref_crc32(buf, sizeof(buf)));
	assert_int_equal(tally_crc32("123456789", 9), 0xcbf43926u);
	return 1;
}

/* Every path this CPU runs, and the one tally_icrc_init() chose. */
static void
fold_every_length(void **state)
{
	static const char *const paths[] = {
		"vpclmul16", "clmul4", "sse42", "neon", "scalar",
	};
	const char *chosen;

	(void)state;
	for (size_t i = 0; i < RTE_DIM(paths); i++)
		path_every_length(paths[i]);
	chosen = tally_icrc_init();
	assert_int_equal(path_every_length(chosen), 1);
	tally_icrc_init();
}

/*
 * Where CPUID says AVX-512 F and VL and VPCLMULQDQ (GCC's test, asked
 * here independently), the sixteen-lane fold is the one chosen; an
 * unknown name is refused and leaves the path alone.
 */
static void
init_prefers_vpclmul16(void **state)
{
	int has = 0;

	(void)state;
#if defined(__x86_64__)
	__builtin_cpu_init();
	has = __builtin_cpu_supports("avx512f") &&
		__builtin_cpu_supports("avx512vl") &&
		__builtin_cpu_supports("vpclmulqdq");
#endif
	printf("# CPU has AVX-512 VPCLMULQDQ: %s\n", has ? "yes" : "no");
	if (has)
		assert_string_equal(tally_icrc_init(), "vpclmul16");
	else
		assert_int_equal(tally_icrc_set_path("vpclmul16"), -ENOTSUP);
	assert_int_equal(tally_icrc_set_path("avx1024"), -EINVAL);
	assert_int_equal(tally_crc32("123456789", 9), 0xcbf43926u);
	tally_icrc_init();
}

/* a b modulo the polynomial, a bit at a time, reflected (the test's). */
static uint32_t
ref_mul(uint32_t a, uint32_t b)
{
	uint32_t p = 0;

	for (int i = 31; i >= 0; i--) {
		if (a >> i & 1)
			p ^= b;
		b = b & 1 ? (b >> 1) ^ 0xedb88320u : b >> 1;
	}
	return p;
}

/*
 * The product (carry-less multiply and a table where the CPU has one)
 * against the bit loop, on random and edge operands, both orders.
 */
static void
mul_matches_bits(void **state)
{
	static const uint32_t edge[] = { 0, 1, 0x80000000u, 0xffffffffu,
		0xedb88320u, 0x7fffffffu, 0x00000100u };
	uint64_t z = 88172645463325252ull;

	(void)state;
	for (unsigned int i = 0; i < RTE_DIM(edge); i++)
		for (unsigned int j = 0; j < RTE_DIM(edge); j++)
			assert_int_equal(tally_crc32_mul(edge[i], edge[j]),
				ref_mul(edge[i], edge[j]));
	for (int n = 0; n < 200000; n++) {
		uint32_t a, b;

		z ^= z << 13;
		z ^= z >> 7;
		z ^= z << 17;
		a = (uint32_t)z;
		b = (uint32_t)(z >> 32);
		assert_int_equal(tally_crc32_mul(a, b), ref_mul(a, b));
		assert_int_equal(tally_crc32_mul(b, a), ref_mul(a, b));
	}
}

/*
 * Checks the ICRC of a frame given as hex: what tally_icrc_ipv4() gives
 * equals the frame's last 4 bytes (little-endian), and every byte it
 * masked is back afterwards.
 */
static void
check_vector(const char *hex, uint32_t want)
{
	uint8_t f[256], copy[256];
	size_t n = unhex(hex, f);
	uint32_t tlen = get16(f + F_IP + 2);

	memcpy(copy, f, n);
	assert_int_equal(le32(f + F_IP + tlen - 4), want);
	assert_int_equal(tally_icrc_ipv4(f + F_IP, tlen), want);
	assert_memory_equal(f, copy, n);
	/* A flipped bit anywhere that counts changes it. */
	f[n - 5] ^= 0x10;
	assert_int_not_equal(tally_icrc_ipv4(f + F_IP, tlen), want);
}

/* scapy's test/contrib/roce.uts: a CNP captured on a ConnectX-4 Lx. */
static void
vector_cx4_cnp(void **state)
{
	(void)state;
	check_vector("e41d2dab2bc27cfe90643b32080045c2003c718c40004011"
		"91610a0011010a001201000012b7002800008100ffff40000118"
		"0000000000000000000000000000000000000000" "82fd002a",
		0x2a00fd82u);
}

/*
 * scapy's UC SEND example from the same file (its assertion reads the
 * ICRC bytes 78 f3 53 f3 big-endian: 0x78f353f3).
 */
static void
vector_scapy_uc(void **state)
{
	(void)state;
	check_vector("248a07a8fa22248a07a8fa22080045010040047840004011b4d5"
		"c0a80007c0a80007c00012b7002caca22460ffff000000d300cf1710"
		"4630818be28935d90e9a95505401be885e500000" "78f353f3",
		0xf353f378u);
}

/* UD SEND with DETH and PadCnt 3, built by scapy's BTH (icrc computed). */
static void
vector_scapy_ud(void **state)
{
	(void)state;
	check_vector("02000000000102000000000208004502005c00074000401126860a"
		"0000020a000001c35012b7004800006430ffff0000010100123456112233"
		"4400abcdef000102030405060708090a0b0c0d0e0f101112131415161718"
		"191a1b1c1d1e1f20212223240000" "0001b645c1", 0xc145b601u);
	check_vector("02000000000102000000000208004502006000074000401126820a"
		"0000020a000001c35012b7004c00006500ffff0000010200123456112233"
		"4400000042deadbeef000102030405060708090a0b0c0d0e0f1011121314"
		"15161718191a1b1c1d1e1f2021222324252627" "7abc4376",
		0x7643bc7au);
}

/*
 * The test's own ICRC of the datagram at ip (tlen bytes, header length
 * from its first byte): a copy with the masked fields set to ones, 8
 * bytes of ones before it, by the bitwise CRC.
 */
static uint32_t
ref_icrc_ipv4(const uint8_t *ip, uint32_t tlen)
{
	static uint8_t c[10000];
	uint32_t hlen = (uint32_t)(ip[0] & 15) * 4;

	memset(c, 0xff, 8);
	memcpy(c + 8, ip, tlen - 4);
	c[8 + 1] = c[8 + 8] = c[8 + 10] = c[8 + 11] = 0xff;
	c[8 + hlen + 6] = c[8 + hlen + 7] = 0xff;
	c[8 + hlen + 8 + 4] = 0xff;
	return ref_crc32(c, 8 + tlen - 4);
}

/*
 * Random datagrams (IPv4 without options, and with 4 and 40 bytes of
 * options) of every length from the shortest the fold takes to past
 * 1100 bytes and some to 9000, on every path this CPU runs, against the
 * test's ICRC; masked fields random, so a path that did not mask them
 * fails. Without options (and 60 bytes or more: 64 from the LRH's
 * place), tally's folding paths take the ICRC from a frame on a
 * read-only page: they must not write it (the in-place masking did, and
 * died here of SIGSEGV). On every path every byte is as it was.
 */
static void
ipv4_masked_in_registers(void **state)
{
	static const char *const paths[] = {
		"vpclmul16", "clmul4", "sse42", "scalar",
	};
	static const uint8_t ihls[] = { 5, 6, 15 };
	static uint8_t copy[10000];
	size_t pg = (size_t)sysconf(_SC_PAGESIZE), room = 4 * pg;
	uint8_t *mem = mmap(NULL, room, PROT_READ | PROT_WRITE,
		MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	(void)state;
	assert_true(mem != MAP_FAILED);
	for (size_t a = 0; a < RTE_DIM(paths); a++) {
		int folded = strcmp(paths[a], "vpclmul16") == 0 ||
			strcmp(paths[a], "clmul4") == 0;

		if (tally_icrc_set_path(paths[a]) != 0)
			continue;
		printf("# path %s\n", paths[a]);
		for (size_t h = 0; h < RTE_DIM(ihls); h++) {
			uint32_t hlen = ihls[h] * 4u;

			for (uint32_t tlen = hlen + 8 + 12 + 4; tlen <= 9000;
					tlen += tlen < 1200 ? 1 : 331) {
				/* Frame at an odd offset, ip 14 bytes in. */
				uint8_t *f = mem + 1 + (tlen % 7);
				uint8_t *ip = f + F_IP;
				int ro = folded && ihls[h] == 5 && tlen >= 60;
				uint32_t want, got;

				fill(f, F_IP + tlen, tlen * 131u + ihls[h]);
				ip[0] = (uint8_t)(0x40 | ihls[h]);
				want = ref_icrc_ipv4(ip, tlen);
				memcpy(copy, f, F_IP + tlen);
				if (ro)
					assert_int_equal(mprotect(mem, room,
						PROT_READ), 0);
				got = tally_icrc_ipv4(ip, tlen);
				if (ro)
					assert_int_equal(mprotect(mem, room,
						PROT_READ | PROT_WRITE), 0);
				assert_int_equal(got, want);
				assert_memory_equal(f, copy, F_IP + tlen);
			}
		}
	}
	munmap(mem, room);
	tally_icrc_init();
}

int
main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(crc_paths),
		cmocka_unit_test(init_names_path),
		cmocka_unit_test(combine_every_split),
		cmocka_unit_test(combine_long),
		cmocka_unit_test(mul_matches_bits),
		cmocka_unit_test(fold_every_length),
		cmocka_unit_test(init_prefers_vpclmul16),
		cmocka_unit_test(ipv4_masked_in_registers),
		cmocka_unit_test(vector_cx4_cnp),
		cmocka_unit_test(vector_scapy_uc),
		cmocka_unit_test(vector_scapy_ud),
	};
	int rc;

	(void)argc;
	if (test_eal_init(argv[0]) != 0)
		return 1;
	tally_icrc_init();
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	test_eal_fini();
	return rc;
}

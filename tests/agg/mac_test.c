/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The tags of authenticated packets (<tally/mac.h>): a vector computed
 * independently (Python's cryptography, AES-GCM with an empty plaintext
 * over the same input, as docs/protocol.md defines it), retransmissions
 * keep their tag, and any other change of header, payload, tag, kind or
 * key is caught.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>

#include <tally/mac.h>

static const uint8_t key[TALLY_KEY_LEN] = {
	0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15,
};

/* SUM, RETX|SET|AUTH, i32, job 7, rank 3, slot 0x102, 5 elements. */
static const uint8_t hdr[TALLY_HDR_LEN] = {
	0x7a, 0x11, 0x02, 0x01, 0x15, 0x02, 0x00, 0x07,
	0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88,
	0x03, 0x00, 0x01, 0x02, 0x00, 0x00, 0x01, 0x00,
	0x00, 0x05, 0x00, 0x00, 0xff, 0xff, 0xff, 0xff,
	0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f, 0x10, 0x11,
};

/* AESGCM(key).encrypt(iv, b"", hdr with RETX cleared + 8 zeros + pl) */
static const uint8_t want[TALLY_TAG_LEN] = {
	0x40, 0x7b, 0xbe, 0xc4, 0x2e, 0xbc, 0x50, 0x15,
	0xb3, 0x6f, 0x62, 0x70, 0xac, 0xb9, 0x2c, 0x74,
};

static void
payload(uint8_t *pl)
{
	for (int i = 0; i < 20; i++)
		pl[i] = (uint8_t)(i * 7 + 1);
}

static void
known_vector(void **state)
{
	struct tally_mac_key k;
	uint8_t pl[20], tag[TALLY_TAG_LEN];

	(void)state;
	payload(pl);
	assert_int_equal(tally_mac_key_init(&k, key), 0);
	tally_mac_tag(&k, TALLY_MAC_UP, hdr, pl, sizeof(pl), tag);
	assert_memory_equal(tag, want, sizeof(want));
	tally_mac_key_wipe(&k);
}

static void
any_change_is_caught(void **state)
{
	uint8_t pkt[TALLY_HDR_LEN + 20 + TALLY_TAG_LEN];
	const size_t len = sizeof(pkt);
	struct tally_mac_key k, other;
	uint8_t key2[TALLY_KEY_LEN];

	(void)state;
	assert_int_equal(tally_mac_key_init(&k, key), 0);
	memcpy(key2, key, sizeof(key2));
	key2[0] ^= 0x80;
	assert_int_equal(tally_mac_key_init(&other, key2), 0);
	memcpy(pkt, hdr, TALLY_HDR_LEN);
	payload(pkt + TALLY_HDR_LEN);
	memcpy(pkt + len - TALLY_TAG_LEN, want, TALLY_TAG_LEN);
	assert_true(tally_mac_verify(&k, TALLY_MAC_UP, pkt, len));
	/* The same packet without RETX: the same tag. */
	pkt[4] &= (uint8_t)~TALLY_F_RETX;
	assert_true(tally_mac_verify(&k, TALLY_MAC_UP, pkt, len));
	/* Another kind (iv), another key. */
	assert_false(tally_mac_verify(&k, TALLY_MAC_RESULT, pkt, len));
	assert_false(tally_mac_verify(&other, TALLY_MAC_UP, pkt, len));
	/* Every other bit, header, payload and tag alike. */
	for (size_t i = 0; i < len; i++) {
		for (int b = 0; b < 8; b++) {
			if (i == 4 && (1 << b) == TALLY_F_RETX)
				continue;
			pkt[i] ^= (uint8_t)(1 << b);
			assert_false(tally_mac_verify(&k, TALLY_MAC_UP, pkt,
				len));
			pkt[i] ^= (uint8_t)(1 << b);
		}
	}
	assert_false(tally_mac_verify(&k, TALLY_MAC_UP, pkt, len - 1));
	assert_false(tally_mac_verify(&k, TALLY_MAC_UP, pkt,
		TALLY_HDR_LEN + TALLY_TAG_LEN - 1));
	/* Payload lengths that are no multiple of 16, down to none. */
	for (size_t n = 0; n <= 20; n++) {
		uint8_t t[TALLY_TAG_LEN], q[TALLY_HDR_LEN + 20 +
			TALLY_TAG_LEN];

		tally_mac_tag(&k, TALLY_MAC_NACK, hdr, pkt + TALLY_HDR_LEN, n,
			t);
		memcpy(q, hdr, TALLY_HDR_LEN);
		memcpy(q + TALLY_HDR_LEN, pkt + TALLY_HDR_LEN, n);
		memcpy(q + TALLY_HDR_LEN + n, t, TALLY_TAG_LEN);
		assert_true(tally_mac_verify(&k, TALLY_MAC_NACK, q,
			TALLY_HDR_LEN + n + TALLY_TAG_LEN));
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(known_vector),
		cmocka_unit_test(any_change_is_caught),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Wire header: encode/decode round trips and every malformed case that
 * tally_hdr_decode() must refuse, each with its own status.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>

#include <tally/proto.h>

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t
rnd(void)
{
	uint64_t z = (rng += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/*
 * A valid packet: header h plus its payload of zeroes (and a tag of
 * zeroes when h has the flag AUTH). Returns length.
 */
static size_t
build(uint8_t *buf, const struct tally_hdr *h)
{
	size_t plen = h->type == TALLY_PT_NACK ? 0 :
		tally_enc_payload_len(h->enc, h->count);

	if (h->flags & TALLY_F_AUTH)
		plen += TALLY_TAG_LEN;
	tally_hdr_encode(h, buf);
	memset(buf + TALLY_HDR_LEN, 0, plen);
	return TALLY_HDR_LEN + plen;
}

static struct tally_hdr
sample(void)
{
	struct tally_hdr h = {
		.version = TALLY_PROTO_VERSION, .type = TALLY_PT_SUM,
		.flags = TALLY_F_SET, .enc = TALLY_ENC_I32, .job = 7,
		.token = 0xfeedfacecafebeefull, .rank = 3, .slot = 9,
		.offset = 2304, .count = TALLY_DEFAULT_ELEMS, .scale_exp = 20,
		.next_block = TALLY_NO_BLOCK, .round = 0x0102030405060708ull,
	};

	return h;
}

static uint8_t buf[TALLY_HDR_LEN + TALLY_MAX_ELEMS * 4 + TALLY_TAG_LEN + 8];

static void
round_trip_random(void **state)
{
	(void)state;
	for (int i = 0; i < 20000; i++) {
		struct tally_hdr h = sample(), d;
		uint64_t r = rnd();
		size_t len;

		h.type = (uint8_t)(1 + r % 5);
		h.enc = (uint8_t)(1 + (r >> 8) % (TALLY_ENC_MAX_ - 1));
		if (h.type == TALLY_PT_MAX || h.type == TALLY_PT_MAX_RESULT)
			h.enc = (r >> 16) & 1 ? TALLY_ENC_F32 : TALLY_ENC_I32;
		h.flags = (uint8_t)(r >> 20);
		/* Maxima are never block-sparse (bad_type). */
		if (h.type == TALLY_PT_MAX || h.type == TALLY_PT_MAX_RESULT)
			h.flags &= (uint8_t)~TALLY_F_SPARSE;
		h.job = (uint16_t)(r >> 28);
		h.token = rnd();
		h.rank = (uint8_t)(r >> 44);
		h.status = (uint8_t)(r >> 52);
		r = rnd();
		h.slot = (uint16_t)r;
		h.offset = (uint32_t)(r >> 16);
		h.count = (uint16_t)(1 + (r >> 48) % TALLY_MAX_ELEMS);
		h.scale_exp = (int16_t)rnd();
		h.next_block = (uint32_t)rnd();
		h.round = rnd();
		len = build(buf, &h);
		memset(&d, 0, sizeof(d));
		assert_int_equal(tally_hdr_decode(buf, len, &d), TALLY_ST_OK);
		assert_memory_equal(&d, &h, sizeof(h));
	}
}

static void
wire_layout(void **state)
{
	struct tally_hdr h = sample();

	(void)state;
	h.scale_exp = -2;
	tally_hdr_encode(&h, buf);
	assert_int_equal(buf[0], 0x7a);
	assert_int_equal(buf[1], 0x11);
	assert_int_equal(buf[2], 2);
	assert_int_equal(buf[3], TALLY_PT_SUM);
	assert_int_equal(buf[7], 7);		/* job, low byte last */
	assert_int_equal(buf[8], 0xfe);	/* token, most significant first */
	assert_int_equal(buf[15], 0xef);
	assert_int_equal(buf[26], 0xff);	/* -2 as big-endian int16 */
	assert_int_equal(buf[27], 0xfe);
	for (int i = 0; i < 8; i++)		/* round, big-endian */
		assert_int_equal(buf[32 + i], i + 1);
	assert_int_equal(sizeof(struct tally_wire_hdr), 40);
	assert_int_equal(offsetof(struct tally_wire_hdr, round), 32);
}

/* The flag AUTH: a tag of TALLY_TAG_LEN bytes ends every packet. */
static void
auth_tag_length(void **state)
{
	struct tally_hdr h = sample(), d;
	size_t len;

	(void)state;
	h.flags |= TALLY_F_AUTH;
	len = build(buf, &h);
	assert_int_equal(len, tally_pkt_len(h.enc, h.count, 1));
	assert_int_equal(len, TALLY_HDR_LEN + 4 * h.count + TALLY_TAG_LEN);
	assert_int_equal(tally_hdr_decode(buf, len, &d), TALLY_ST_OK);
	assert_int_equal(tally_hdr_decode(buf, len - TALLY_TAG_LEN, &d),
		TALLY_ST_BAD_LENGTH);
	h.flags &= (uint8_t)~TALLY_F_AUTH;
	tally_hdr_encode(&h, buf);
	assert_int_equal(tally_hdr_decode(buf, len, &d), TALLY_ST_BAD_LENGTH);
	/* A NACK carries the tag alone. */
	h.type = TALLY_PT_NACK;
	h.flags |= TALLY_F_AUTH;
	tally_hdr_encode(&h, buf);
	assert_int_equal(tally_hdr_decode(buf, TALLY_HDR_LEN + TALLY_TAG_LEN,
		&d), TALLY_ST_OK);
	assert_int_equal(tally_hdr_decode(buf, TALLY_HDR_LEN, &d),
		TALLY_ST_BAD_LENGTH);
}

static void
truncated(void **state)
{
	struct tally_hdr h = sample(), d;

	(void)state;
	build(buf, &h);
	for (size_t len = 0; len < TALLY_HDR_LEN; len++)
		assert_int_equal(tally_hdr_decode(buf, len, &d),
			TALLY_ST_TRUNCATED);
}

static void
bad_magic_version_type(void **state)
{
	struct tally_hdr h = sample(), d;
	size_t len = build(buf, &h);
	static const uint8_t types[] = { 0, 10, 11, 0x80, 0xff };

	(void)state;
	buf[1] ^= 1;
	assert_int_equal(tally_hdr_decode(buf, len, &d), TALLY_ST_BAD_MAGIC);
	buf[1] ^= 1;
	for (unsigned int v = 0; v < 256; v++) {
		buf[2] = (uint8_t)v;
		assert_int_equal(tally_hdr_decode(buf, len, &d),
			v == TALLY_PROTO_VERSION ? TALLY_ST_OK :
			TALLY_ST_BAD_VERSION);
	}
	buf[2] = TALLY_PROTO_VERSION;
	for (size_t i = 0; i < sizeof(types); i++) {
		buf[3] = types[i];
		assert_int_equal(tally_hdr_decode(buf, len, &d),
			TALLY_ST_BAD_TYPE);
	}
}

static void
bad_encoding(void **state)
{
	struct tally_hdr h = sample(), d;
	size_t len = build(buf, &h);
	static const uint8_t encs[] = { 0, TALLY_ENC_MAX_, 0x7f, 0xff };

	(void)state;
	for (size_t i = 0; i < sizeof(encs); i++) {
		buf[5] = encs[i];
		assert_int_equal(tally_hdr_decode(buf, len, &d),
			TALLY_ST_BAD_ENCODING);
	}
	/* The scale round carries f32 or i32 only. */
	for (unsigned int e = 1; e < TALLY_ENC_MAX_; e++) {
		for (unsigned int t = TALLY_PT_MAX; t <= TALLY_PT_MAX_RESULT; t++) {
			h = sample();
			h.type = (uint8_t)t;
			h.enc = (uint8_t)e;
			len = build(buf, &h);
			assert_int_equal(tally_hdr_decode(buf, len, &d),
				e == TALLY_ENC_F32 || e == TALLY_ENC_I32 ?
				TALLY_ST_OK : TALLY_ST_BAD_ENCODING);
		}
	}
}

static void
bad_length(void **state)
{
	struct tally_hdr h = sample(), d;
	size_t len;

	(void)state;
	for (unsigned int e = 1; e < TALLY_ENC_MAX_; e++) {
		for (unsigned int n = 1; n < 40; n++) {
			h = sample();
			h.enc = (uint8_t)e;
			h.count = (uint16_t)n;
			len = build(buf, &h);
			assert_int_equal(tally_hdr_decode(buf, len, &d),
				TALLY_ST_OK);
			assert_int_equal(tally_hdr_decode(buf, len - 1, &d),
				len - 1 < TALLY_HDR_LEN ? TALLY_ST_TRUNCATED :
				TALLY_ST_BAD_LENGTH);
			assert_int_equal(tally_hdr_decode(buf, len + 1, &d),
				TALLY_ST_BAD_LENGTH);
		}
	}
	h = sample();
	h.count = 0;
	len = build(buf, &h);
	assert_int_equal(tally_hdr_decode(buf, len, &d), TALLY_ST_BAD_LENGTH);
	/* A block-sparse SUM or result may carry no block; a MAX never. */
	h.type = TALLY_PT_SUM;
	h.flags |= TALLY_F_SPARSE;
	len = build(buf, &h);
	assert_int_equal(len, TALLY_HDR_LEN);
	assert_int_equal(tally_hdr_decode(buf, len, &d), TALLY_ST_OK);
	h.type = TALLY_PT_SUM_RESULT;
	len = build(buf, &h);
	assert_int_equal(tally_hdr_decode(buf, len, &d), TALLY_ST_OK);
	assert_int_equal(tally_hdr_decode(buf, len + 4, &d),
		TALLY_ST_BAD_LENGTH);
	h.type = TALLY_PT_MAX;
	h.enc = TALLY_ENC_F32;
	h.count = 1;
	len = build(buf, &h);
	assert_int_equal(tally_hdr_decode(buf, len, &d), TALLY_ST_BAD_TYPE);
	h = sample();
	h.count = TALLY_MAX_ELEMS + 1;
	tally_hdr_encode(&h, buf);
	assert_int_equal(tally_hdr_decode(buf, TALLY_HDR_LEN +
		(TALLY_MAX_ELEMS + 1) * 4, &d), TALLY_ST_BAD_LENGTH);
	h.count = TALLY_MAX_ELEMS;
	len = build(buf, &h);
	assert_int_equal(tally_hdr_decode(buf, len, &d), TALLY_ST_OK);
}

static void
nack_has_no_payload(void **state)
{
	struct tally_hdr h = sample(), d;

	(void)state;
	h.type = TALLY_PT_NACK;
	h.status = TALLY_ST_BAD_SLOT;
	h.enc = 0;	/* a NACK's enc echoes what was refused, even junk */
	tally_hdr_encode(&h, buf);
	assert_int_equal(tally_hdr_decode(buf, TALLY_HDR_LEN, &d),
		TALLY_ST_OK);
	assert_int_equal(d.status, TALLY_ST_BAD_SLOT);
	assert_int_equal(tally_hdr_decode(buf, TALLY_HDR_LEN + 4, &d),
		TALLY_ST_BAD_LENGTH);
}

static void
payload_lengths(void **state)
{
	(void)state;
	assert_int_equal(tally_enc_payload_len(TALLY_ENC_F32, 256), 1024);
	assert_int_equal(tally_enc_payload_len(TALLY_ENC_I32, 256), 1024);
	assert_int_equal(tally_enc_payload_len(TALLY_ENC_I16, 256), 512);
	assert_int_equal(tally_enc_payload_len(TALLY_ENC_I8, 256), 256);
	assert_int_equal(tally_enc_payload_len(TALLY_ENC_I4, 7), 4);
	assert_int_equal(tally_enc_payload_len(TALLY_ENC_SIGN, 9), 2);
	assert_int_equal(tally_enc_payload_len(0, 256), 0);
	assert_int_equal(tally_enc_payload_len(TALLY_ENC_MAX_, 256), 0);
}

static void
result_encodings(void **state)
{
	(void)state;
	assert_int_equal(tally_enc_result(TALLY_ENC_F32, 0), TALLY_ENC_F32);
	assert_int_equal(tally_enc_result(TALLY_ENC_I32, 1), TALLY_ENC_I32);
	assert_int_equal(tally_enc_result(TALLY_ENC_I16, 0), TALLY_ENC_I32);
	assert_int_equal(tally_enc_result(TALLY_ENC_I16, 1), TALLY_ENC_I16);
	assert_int_equal(tally_enc_result(TALLY_ENC_I8, 0), TALLY_ENC_I32);
	assert_int_equal(tally_enc_result(TALLY_ENC_I4, 1), TALLY_ENC_I4);
	assert_int_equal(tally_enc_result(TALLY_ENC_SIGN, 0), TALLY_ENC_I8);
	assert_int_equal(tally_enc_result(TALLY_ENC_SIGN, 1), TALLY_ENC_SIGN);
	assert_int_equal(tally_enc_result(0, 0), 0);
	assert_int_equal(tally_enc_result(99, 1), 0);
}

static void
names(void **state)
{
	(void)state;
	for (unsigned int s = 0; s < TALLY_ST_MAX_; s++)
		assert_string_not_equal(tally_status_name(s), "unknown");
	assert_string_equal(tally_status_name(TALLY_ST_MAX_), "unknown");
	assert_string_equal(tally_status_name(1000), "unknown");
	assert_string_equal(tally_enc_name(TALLY_ENC_I4), "i4");
	assert_string_equal(tally_enc_name(0), "unknown");
	assert_string_equal(tally_enc_name(200), "unknown");
}

/*
 * Random bytes: decode never reads past len, never crashes, returns a
 * known status, and whatever it accepts re-encodes to the same header.
 */
static void
random_bytes(void **state)
{
	uint8_t pkt[96], again[TALLY_HDR_LEN];

	(void)state;
	for (int i = 0; i < 200000; i++) {
		struct tally_hdr d;
		size_t len = rnd() % sizeof(pkt);
		enum tally_status s;

		for (size_t k = 0; k < len; k++)
			pkt[k] = (uint8_t)rnd();
		if (len >= 4 && (i & 1)) {	/* half look like tally */
			pkt[0] = 0x7a;
			pkt[1] = 0x11;
			pkt[2] = 1;
			pkt[3] = (uint8_t)(1 + rnd() % 5);
		}
		s = tally_hdr_decode(pkt, len, &d);
		assert_true(s < TALLY_ST_MAX_);
		if (s == TALLY_ST_OK) {
			tally_hdr_encode(&d, again);
			assert_memory_equal(again, pkt, TALLY_HDR_LEN);
		}
	}
}

/*
 * Bundles (docs/protocol.md): k headers alone back to back, the first a
 * SPARSE SUM with count 0, 2 <= k <= TALLY_BUNDLE_MAX; anything else is
 * one packet.
 */
static void
bundles(void **state)
{
	static uint8_t b[(TALLY_BUNDLE_MAX + 1) * TALLY_HDR_LEN];
	struct tally_hdr h = sample();
	struct tally_hdr d;

	(void)state;
	h.flags |= TALLY_F_SPARSE;
	h.count = 0;
	for (unsigned int k = 0; k <= TALLY_BUNDLE_MAX; k++) {
		h.slot = (uint16_t)k;
		tally_hdr_encode(&h, b + k * TALLY_HDR_LEN);
	}
	/* Each header of a bundle is a packet of its own. */
	assert_int_equal(tally_hdr_decode(b + TALLY_HDR_LEN, TALLY_HDR_LEN,
		&d), TALLY_ST_OK);
	assert_int_equal(d.slot, 1);
	assert_int_equal(tally_bundle_count(b, TALLY_HDR_LEN), 1);
	for (unsigned int k = 2; k <= TALLY_BUNDLE_MAX; k++)
		assert_int_equal(tally_bundle_count(b, k * TALLY_HDR_LEN), k);
	/* Too many, not a multiple of 32, or too short. */
	assert_int_equal(tally_bundle_count(b, (TALLY_BUNDLE_MAX + 1) *
		TALLY_HDR_LEN), 1);
	assert_int_equal(tally_bundle_count(b, 2 * TALLY_HDR_LEN + 4), 1);
	assert_int_equal(tally_bundle_count(b, 2 * TALLY_HDR_LEN - 1), 1);
	assert_int_equal(tally_bundle_count(b, 0), 1);
	/* The first header decides: a payload, no SPARSE, not a SUM. */
	h.slot = 0;
	h.count = 8;
	tally_hdr_encode(&h, b);
	assert_int_equal(tally_bundle_count(b, 2 * TALLY_HDR_LEN), 1);
	h.count = 0;
	h.flags &= (uint8_t)~TALLY_F_SPARSE;
	tally_hdr_encode(&h, b);
	assert_int_equal(tally_bundle_count(b, 2 * TALLY_HDR_LEN), 1);
	h.flags |= TALLY_F_SPARSE;
	h.type = TALLY_PT_SUM_RESULT;
	tally_hdr_encode(&h, b);
	assert_int_equal(tally_bundle_count(b, 2 * TALLY_HDR_LEN), 1);
	/* A later header with a payload is still counted: refused alone. */
	h.type = TALLY_PT_SUM;
	tally_hdr_encode(&h, b);
	h.count = 8;
	tally_hdr_encode(&h, b + TALLY_HDR_LEN);
	assert_int_equal(tally_bundle_count(b, 2 * TALLY_HDR_LEN), 2);
	assert_int_equal(tally_hdr_decode(b + TALLY_HDR_LEN, TALLY_HDR_LEN,
		&d), TALLY_ST_BAD_LENGTH);
	/* With the flag AUTH, each entry is a header and its tag. */
	h.count = 0;
	h.flags |= TALLY_F_AUTH;
	tally_hdr_encode(&h, b);
	assert_int_equal(tally_bundle_stride(b), TALLY_HDR_LEN + TALLY_TAG_LEN);
	assert_int_equal(tally_bundle_count(b, 2 * TALLY_HDR_LEN), 1);
	assert_int_equal(tally_bundle_count(b, 3 * (TALLY_HDR_LEN +
		TALLY_TAG_LEN)), 3);
	assert_int_equal(tally_bundle_count(b, TALLY_HDR_LEN +
		TALLY_TAG_LEN), 1);
}

/*
 * A bundle of GATHER requests (docs/protocol.md, "Bundles"): the first
 * header a GATHER from a member that does not own its round; the same
 * bytes from the owner are its data, one packet.
 */
static void
bundles_of_requests(void **state)
{
	static uint8_t b[4 * (TALLY_HDR_LEN + TALLY_TAG_LEN)];
	struct tally_hdr h = sample();
	struct tally_hdr d;

	(void)state;
	h.type = TALLY_PT_GATHER;
	h.flags = 0;
	h.rank = 1;
	h.status = 0;
	h.count = 20;
	for (unsigned int k = 0; k < 3; k++) {
		h.slot = (uint16_t)k;
		tally_hdr_encode(&h, b + k * TALLY_HDR_LEN);
	}
	assert_int_equal(tally_bundle_count(b, 3 * TALLY_HDR_LEN), 3);
	assert_int_equal(tally_bundle_count(b, TALLY_HDR_LEN), 1);
	assert_int_equal(tally_hdr_decode(b + TALLY_HDR_LEN, TALLY_HDR_LEN,
		&d), TALLY_ST_OK);
	assert_int_equal(d.slot, 1);
	/* From its owner: 2 x 40 bytes are a header and 10 i32 of data. */
	h.rank = 0;
	h.count = 10;
	tally_hdr_encode(&h, b);
	assert_int_equal(tally_bundle_count(b, 2 * TALLY_HDR_LEN), 1);
	assert_int_equal(tally_hdr_decode(b, 2 * TALLY_HDR_LEN, &d),
		TALLY_ST_OK);
	/* Another request type than GATHER: one packet. */
	h.rank = 1;
	h.type = TALLY_PT_SCATTER;
	tally_hdr_encode(&h, b);
	assert_int_equal(tally_bundle_count(b, 2 * TALLY_HDR_LEN), 1);
	/* Authenticated: a header and its tag an entry. */
	h.type = TALLY_PT_GATHER;
	h.flags = TALLY_F_AUTH;
	tally_hdr_encode(&h, b);
	assert_int_equal(tally_bundle_count(b, 4 * (TALLY_HDR_LEN +
		TALLY_TAG_LEN)), 4);
}

/*
 * A bundle of DONEs from the aggregator: k DONE headers back to back
 * (each with its tag when the first has the flag AUTH); anything else,
 * a DONE alone or a result with data, is one packet.
 */
static void
bundles_of_dones(void **state)
{
	static uint8_t b[3 * (TALLY_HDR_LEN + TALLY_TAG_LEN)];
	struct tally_hdr h = sample();

	(void)state;
	h.type = TALLY_PT_DONE;
	h.flags = 0;
	h.rank = TALLY_RANK_ALL;
	for (unsigned int k = 0; k < 3; k++)
		tally_hdr_encode(&h, b + k * TALLY_HDR_LEN);
	assert_int_equal(tally_done_bundle_count(b, 3 * TALLY_HDR_LEN), 3);
	assert_int_equal(tally_done_bundle_count(b, TALLY_HDR_LEN), 1);
	assert_int_equal(tally_done_bundle_count(b, 3 * TALLY_HDR_LEN - 4), 1);
	assert_int_equal(tally_done_bundle_count(b, (TALLY_BUNDLE_MAX + 1) *
		TALLY_HDR_LEN), 1);
	h.type = TALLY_PT_PART_RESULT;
	tally_hdr_encode(&h, b);
	assert_int_equal(tally_done_bundle_count(b, 3 * TALLY_HDR_LEN), 1);
	h.type = TALLY_PT_DONE;
	h.flags = TALLY_F_AUTH;
	tally_hdr_encode(&h, b);
	assert_int_equal(tally_done_bundle_count(b, 3 * (TALLY_HDR_LEN +
		TALLY_TAG_LEN)), 3);
	assert_int_equal(tally_done_bundle_count(b, TALLY_HDR_LEN +
		TALLY_TAG_LEN), 1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(round_trip_random),
		cmocka_unit_test(wire_layout),
		cmocka_unit_test(auth_tag_length),
		cmocka_unit_test(truncated),
		cmocka_unit_test(bad_magic_version_type),
		cmocka_unit_test(bad_encoding),
		cmocka_unit_test(bad_length),
		cmocka_unit_test(nack_has_no_payload),
		cmocka_unit_test(payload_lengths),
		cmocka_unit_test(result_encodings),
		cmocka_unit_test(names),
		cmocka_unit_test(random_bytes),
		cmocka_unit_test(bundles_of_requests),
		cmocka_unit_test(bundles_of_dones),
		cmocka_unit_test(bundles),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

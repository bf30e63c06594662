/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tally wire protocol, version 2.
 *
 * docs/protocol.md is the contract; this header is its C form. Every tally
 * packet is a UDP datagram whose payload starts with the 40-byte header
 * below, header fields in network byte order, followed by the elements of
 * one chunk in little-endian order and, in an authenticated job (flag
 * AUTH), a 16-byte tag.
 *
 * The header is self-contained: it needs only the C library, and every
 * helper is an inline function so that the dataplane, the worker library,
 * tests and fuzzers share one definition.
 */
#ifndef TALLY_PROTO_H
#define TALLY_PROTO_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define TALLY_PROTO_MAGIC	0x7A11	/* "tally" on the wire: 7a 11 */
#define TALLY_PROTO_VERSION	2
#define TALLY_HDR_LEN		40
#define TALLY_TAG_LEN		16	/* AES-GMAC tag after the payload (AUTH) */
#define TALLY_UDP_PORT		47474	/* default dataplane port */

#define TALLY_MAX_WORKERS	64	/* one bit each in a slot's bitmap */
#define TALLY_MAX_ELEMS		8192	/* per packet, any encoding: 32 KiB of i32 */
#define TALLY_DEFAULT_ELEMS	256	/* 256 x i32 = 1 KiB payload */
#define TALLY_RANK_ALL		0xff	/* rank field of a result: every member */
#define TALLY_NO_BLOCK		0xffffffffu /* next_block: stream has no more */
#define TALLY_BUNDLE_MAX	32	/* contributions in one bundle */

/* Packet types (the type field). */
enum tally_pkt_type {
	TALLY_PT_SUM = 1,	 /* worker -> aggregator: contribution to a sum */
	TALLY_PT_SUM_RESULT = 2, /* aggregator -> worker: the sum */
	TALLY_PT_MAX = 3,	 /* worker -> aggregator: scale round (maximum) */
	TALLY_PT_MAX_RESULT = 4, /* aggregator -> worker: the maximum */
	TALLY_PT_NACK = 5,	 /* aggregator -> worker: refused, see status */
	TALLY_PT_SCATTER = 6,	 /* worker -> aggregator: contribution to a sum
				  * whose result goes to one member, the owner
				  * (the status byte) */
	TALLY_PT_GATHER = 7,	 /* worker -> aggregator: the owner's data for
				  * the others, or another member's request
				  * for it (no payload) */
	TALLY_PT_PART_RESULT = 8, /* aggregator -> worker: a SCATTER round's sum
				  * to its owner, a GATHER round's data to
				  * the others */
	TALLY_PT_DONE = 9,	 /* aggregator -> worker: the round completed,
				  * its data went to others; no payload */
};

/* Flag bits (the flags field). Receivers ignore bits they do not know. */
#define TALLY_F_RETX	0x01	/* sender retransmits this chunk */
#define TALLY_F_LAST	0x02	/* last chunk of the tensor */
#define TALLY_F_SET	0x04	/* shadow set 1 of the slot (clear: set 0) */
#define TALLY_F_SPARSE	0x08	/* block-sparse stream: next_block is valid */
#define TALLY_F_AUTH	0x10	/* a TALLY_TAG_LEN-byte tag ends the packet */
#define TALLY_F_SEQ	0x20	/* dense contribution: next_block is the
				 * sender's sequence number on this port */

/* Element encodings (the enc field). */
enum tally_enc {
	TALLY_ENC_F32 = 1,	/* IEEE-754 binary32 */
	TALLY_ENC_I32 = 2,	/* two's complement, also shared-scale fixed point */
	TALLY_ENC_I16 = 3,
	TALLY_ENC_I8 = 4,
	TALLY_ENC_I4 = 5,	/* two nibbles a byte, element 2k in the low one */
	TALLY_ENC_SIGN = 6,	/* one bit an element, bit k%8 of byte k/8; 1 = + */
	TALLY_ENC_MAX_ = 7	/* first value not in use */
};

/*
 * Status codes: the status field of a NACK, and the reasons the aggregator
 * refuses a packet (one counter each). TALLY_ST_OK is 0 in every other
 * packet.
 */
enum tally_status {
	TALLY_ST_OK = 0,
	TALLY_ST_TRUNCATED = 1,	 /* shorter than the header */
	TALLY_ST_BAD_MAGIC = 2,
	TALLY_ST_BAD_VERSION = 3,
	TALLY_ST_BAD_TYPE = 4,	 /* unknown type, or not one for this receiver */
	TALLY_ST_BAD_ENCODING = 5, /* unknown, or not allowed for the type */
	TALLY_ST_BAD_LENGTH = 6, /* count 0 or too large, or payload != count */
	TALLY_ST_UNKNOWN_JOB = 7,
	TALLY_ST_BAD_TOKEN = 8,
	TALLY_ST_BAD_RANK = 9,	 /* rank >= the job's world size */
	TALLY_ST_BAD_SOURCE = 10, /* address is not the member's */
	TALLY_ST_BAD_SLOT = 11,	 /* slot outside the job's window */
	TALLY_ST_MISMATCH = 12,	 /* slot busy with another chunk/encoding */
	TALLY_ST_EARLY = 13,	 /* sender skipped the result of the slot, or
				  * its round is ahead of the slot's next */
	TALLY_ST_STALE = 14,	 /* a round the sender has moved past */
	TALLY_ST_BAD_AUTH = 15,	 /* authenticated job: no tag, or a wrong one;
				  * plain job: a tag */
	TALLY_ST_GAP = 16,	 /* not a refusal: the sender's packets named
				  * in the NACK never arrived (flag SEQ) */
	TALLY_ST_BAD_OWNER = 17, /* SCATTER, GATHER: owner >= the world */
	TALLY_ST_NOT_OWNER = 18, /* GATHER: data from a member not its owner,
				  * or the owner's without data */
	TALLY_ST_WRONG_OP = 19,	 /* the slot's round is of another collective
				  * (SCATTER, GATHER against anything else)
				  * or another owner */
	TALLY_ST_MAX_ = 20
};

/* The header as it lies on the wire: 40 bytes, fields big-endian. */
struct tally_wire_hdr {
	uint16_t magic;
	uint8_t version;
	uint8_t type;
	uint8_t flags;
	uint8_t enc;
	uint16_t job;
	uint64_t token;
	uint8_t rank;
	uint8_t status;
	uint16_t slot;
	uint32_t offset;
	uint16_t count;
	int16_t scale_exp;
	uint32_t next_block;
	uint64_t round;
} __attribute__((packed));

_Static_assert(sizeof(struct tally_wire_hdr) == TALLY_HDR_LEN,
	"wire header must be 40 bytes");

/* The same header in host byte order, as the code works with it. */
struct tally_hdr {
	uint8_t version;
	uint8_t type;
	uint8_t flags;
	uint8_t enc;
	uint16_t job;
	uint64_t token;
	uint8_t rank;
	uint8_t status;
	uint16_t slot;
	uint32_t offset;	/* element offset of the chunk in the tensor */
	uint16_t count;		/* elements in this packet */
	int16_t scale_exp;	/* value = element * 2^-scale_exp */
	uint32_t next_block;	/* look-ahead of block-sparse streams */
	uint64_t round;		/* the slot's round: 0, 1, 2, ... per member
				 * and slot; set = round & 1 */
};

static inline uint16_t
tally_ld_be16(const uint8_t *p)
{
	return (uint16_t)((unsigned)p[0] << 8 | p[1]);
}

static inline uint32_t
tally_ld_be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
		(uint32_t)p[2] << 8 | p[3];
}

static inline uint64_t
tally_ld_be64(const uint8_t *p)
{
	return (uint64_t)tally_ld_be32(p) << 32 | tally_ld_be32(p + 4);
}

static inline void
tally_st_be16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static inline void
tally_st_be32(uint8_t *p, uint32_t v)
{
	tally_st_be16(p, (uint16_t)(v >> 16));
	tally_st_be16(p + 2, (uint16_t)v);
}

static inline void
tally_st_be64(uint8_t *p, uint64_t v)
{
	tally_st_be32(p, (uint32_t)(v >> 32));
	tally_st_be32(p + 4, (uint32_t)v);
}

/* Bytes of payload that carry count elements of enc; 0 if enc is unknown. */
static inline size_t
tally_enc_payload_len(unsigned int enc, size_t count)
{
	switch (enc) {
	case TALLY_ENC_F32:
	case TALLY_ENC_I32:
		return count * 4;
	case TALLY_ENC_I16:
		return count * 2;
	case TALLY_ENC_I8:
		return count;
	case TALLY_ENC_I4:
		return (count + 1) / 2;
	case TALLY_ENC_SIGN:
		return (count + 7) / 8;
	default:
		return 0;
	}
}

static inline int
tally_enc_valid(unsigned int enc)
{
	return enc >= TALLY_ENC_F32 && enc < TALLY_ENC_MAX_;
}

/*
 * Encoding of the result of a SUM over contributions in enc. Integer
 * encodings narrower than 32 bits are summed in 32-bit lanes; a job sends
 * them back widened (narrow == 0: i32 sums, sign vote counts as i8) or in
 * the contributions' own width, saturated (narrow != 0: sign votes as the
 * majority bit). Returns 0 for an unknown enc.
 */
static inline unsigned int
tally_enc_result(unsigned int enc, int narrow)
{
	switch (enc) {
	case TALLY_ENC_F32:
	case TALLY_ENC_I32:
		return enc;
	case TALLY_ENC_I16:
	case TALLY_ENC_I8:
	case TALLY_ENC_I4:
		return narrow ? enc : TALLY_ENC_I32;
	case TALLY_ENC_SIGN:
		return narrow ? TALLY_ENC_SIGN : TALLY_ENC_I8;
	default:
		return 0;
	}
}

/* Whether packets of this type travel from a worker to the aggregator. */
static inline int
tally_type_is_request(unsigned int type)
{
	return type == TALLY_PT_SUM || type == TALLY_PT_MAX ||
		type == TALLY_PT_SCATTER || type == TALLY_PT_GATHER;
}

/*
 * Whether packets of this type belong to a round with an owner
 * (reduce-scatter, all-gather, broadcast: docs/protocol.md,
 * "Collectives"): the status byte is then the owner's rank.
 */
static inline int
tally_type_is_part(unsigned int type)
{
	return type >= TALLY_PT_SCATTER && type <= TALLY_PT_DONE;
}

static inline int
tally_type_valid(unsigned int type)
{
	return type >= TALLY_PT_SUM && type <= TALLY_PT_DONE;
}

/* Writes h to buf (TALLY_HDR_LEN bytes) in wire order, magic included. */
static inline void
tally_hdr_encode(const struct tally_hdr *h, void *buf)
{
	uint8_t *p = (uint8_t *)buf;

	tally_st_be16(p + 0, TALLY_PROTO_MAGIC);
	p[2] = h->version;
	p[3] = h->type;
	p[4] = h->flags;
	p[5] = h->enc;
	tally_st_be16(p + 6, h->job);
	tally_st_be64(p + 8, h->token);
	p[16] = h->rank;
	p[17] = h->status;
	tally_st_be16(p + 18, h->slot);
	tally_st_be32(p + 20, h->offset);
	tally_st_be16(p + 24, h->count);
	tally_st_be16(p + 26, (uint16_t)h->scale_exp);
	tally_st_be32(p + 28, h->next_block);
	tally_st_be64(p + 32, h->round);
}

/*
 * Bytes of a packet carrying count elements of enc: the header, the
 * payload and, with auth, the tag (flag AUTH).
 */
static inline size_t
tally_pkt_len(unsigned int enc, size_t count, int auth)
{
	return TALLY_HDR_LEN + tally_enc_payload_len(enc, count) +
		(auth ? TALLY_TAG_LEN : 0);
}

/*
 * Reads the header of the len-byte packet at buf into h and checks what
 * can be checked without a job: length, magic, version, type, encoding and
 * that the payload holds exactly count elements (NACKs and DONEs carry
 * none, a GATHER none or count), plus
 * the tag when the flag AUTH is set. Returns TALLY_ST_OK or the status
 * that refuses the packet; h is filled as far as the packet was read.
 */
static inline enum tally_status
tally_hdr_decode(const void *buf, size_t len, struct tally_hdr *h)
{
	const uint8_t *p = (const uint8_t *)buf;
	size_t want;

	if (len < TALLY_HDR_LEN)
		return TALLY_ST_TRUNCATED;
	if (tally_ld_be16(p) != TALLY_PROTO_MAGIC)
		return TALLY_ST_BAD_MAGIC;
	h->version = p[2];
	h->type = p[3];
	h->flags = p[4];
	h->enc = p[5];
	h->job = tally_ld_be16(p + 6);
	h->token = tally_ld_be64(p + 8);
	h->rank = p[16];
	h->status = p[17];
	h->slot = tally_ld_be16(p + 18);
	h->offset = tally_ld_be32(p + 20);
	h->count = tally_ld_be16(p + 24);
	h->scale_exp = (int16_t)tally_ld_be16(p + 26);
	h->next_block = tally_ld_be32(p + 28);
	h->round = tally_ld_be64(p + 32);
	if (h->version != TALLY_PROTO_VERSION)
		return TALLY_ST_BAD_VERSION;
	if (!tally_type_valid(h->type))
		return TALLY_ST_BAD_TYPE;
	want = TALLY_HDR_LEN + ((h->flags & TALLY_F_AUTH) ? TALLY_TAG_LEN : 0);
	if (h->type == TALLY_PT_NACK)
		return len == want ? TALLY_ST_OK : TALLY_ST_BAD_LENGTH;
	if (!tally_enc_valid(h->enc))
		return TALLY_ST_BAD_ENCODING;
	if ((h->type == TALLY_PT_MAX || h->type == TALLY_PT_MAX_RESULT) &&
			h->enc != TALLY_ENC_F32 && h->enc != TALLY_ENC_I32)
		return TALLY_ST_BAD_ENCODING;
	/*
	 * A block-sparse SUM (or its result) may carry no block: count 0,
	 * no payload (docs/protocol.md, "Block-sparse streams"). Maxima are
	 * never sparse. Dense packets pay one flag test for this.
	 */
	if (__builtin_expect((h->flags & TALLY_F_SPARSE) != 0, 0)) {
		if (h->type == TALLY_PT_MAX || h->type == TALLY_PT_MAX_RESULT ||
				tally_type_is_part(h->type))
			return TALLY_ST_BAD_TYPE;
		if (h->count > TALLY_MAX_ELEMS)
			return TALLY_ST_BAD_LENGTH;
	} else if (h->count == 0 || h->count > TALLY_MAX_ELEMS) {
		return TALLY_ST_BAD_LENGTH;
	}
	/* A DONE carries no payload; a GATHER request from a member that
	 * does not own the round neither (docs/protocol.md, "Collectives"). */
	if (__builtin_expect(h->type >= TALLY_PT_GATHER, 0) &&
			(h->type == TALLY_PT_DONE ||
			 (h->type == TALLY_PT_GATHER && len == want)))
		return len == want ? TALLY_ST_OK : TALLY_ST_BAD_LENGTH;
	want += tally_enc_payload_len(h->enc, h->count);
	if (len != want)
		return TALLY_ST_BAD_LENGTH;
	return TALLY_ST_OK;
}

/*
 * The bytes of one contribution of a bundle whose first header is at p:
 * a header, and the tag when that header has the flag AUTH.
 */
static inline size_t
tally_bundle_stride(const void *p)
{
	return TALLY_HDR_LEN + ((((const uint8_t *)p)[4] & TALLY_F_AUTH) ?
		TALLY_TAG_LEN : 0);
}

/*
 * How many contributions the datagram of len bytes at buf carries
 * (docs/protocol.md, "Bundles"): k when it is a bundle, k >= 2 entries
 * of tally_bundle_stride() bytes back to back (a header, and its tag
 * when the first header has the flag AUTH; len = k x stride, k <=
 * TALLY_BUNDLE_MAX) the first of which is a SPARSE SUM with count 0
 * or a GATHER request (its rank not its owner); otherwise 1. Reads only
 * the first header's type, flags, count, rank and owner:
 * each of the k is then a packet of its own, checked as any other.
 */
static inline unsigned int
tally_bundle_count(const void *buf, size_t len)
{
	const uint8_t *p = (const uint8_t *)buf;
	size_t stride;

	if (len <= TALLY_HDR_LEN)
		return 1;
	stride = tally_bundle_stride(p);
	if (len <= stride || len % stride != 0 ||
			len > (size_t)TALLY_BUNDLE_MAX * stride)
		return 1;
	/* A sparse SUM with count 0, or a GATHER from a member that does
	 * not own it (a request: such a packet never carries data). */
	if (!(p[3] == TALLY_PT_SUM && (p[4] & TALLY_F_SPARSE) &&
			tally_ld_be16(p + 24) == 0) &&
			!(p[3] == TALLY_PT_GATHER && p[16] != p[17]))
		return 1;
	return (unsigned int)(len / stride);
}

/*
 * How many DONEs the datagram of len bytes at buf (from an aggregator)
 * carries (docs/protocol.md, "Bundles"): k when it is a bundle of them,
 * k >= 2 entries of tally_bundle_stride() bytes back to back, the first
 * a DONE; otherwise 1. Reads only the first header's type and flags:
 * each of the k is then a packet of its own, checked as any other.
 */
static inline unsigned int
tally_done_bundle_count(const void *buf, size_t len)
{
	const uint8_t *p = (const uint8_t *)buf;
	size_t stride;

	if (len <= TALLY_HDR_LEN || p[3] != TALLY_PT_DONE)
		return 1;
	stride = tally_bundle_stride(p);
	if (len <= stride || len % stride != 0 ||
			len > (size_t)TALLY_BUNDLE_MAX * stride)
		return 1;
	return (unsigned int)(len / stride);
}

/* A short constant name for a status, for logs, JSON and metrics. */
static inline const char *
tally_status_name(unsigned int st)
{
	static const char *const names[TALLY_ST_MAX_] = {
		[TALLY_ST_OK] = "ok",
		[TALLY_ST_TRUNCATED] = "truncated",
		[TALLY_ST_BAD_MAGIC] = "bad_magic",
		[TALLY_ST_BAD_VERSION] = "bad_version",
		[TALLY_ST_BAD_TYPE] = "bad_type",
		[TALLY_ST_BAD_ENCODING] = "bad_encoding",
		[TALLY_ST_BAD_LENGTH] = "bad_length",
		[TALLY_ST_UNKNOWN_JOB] = "unknown_job",
		[TALLY_ST_BAD_TOKEN] = "bad_token",
		[TALLY_ST_BAD_RANK] = "bad_rank",
		[TALLY_ST_BAD_SOURCE] = "bad_source",
		[TALLY_ST_BAD_SLOT] = "bad_slot",
		[TALLY_ST_MISMATCH] = "mismatch",
		[TALLY_ST_EARLY] = "early",
		[TALLY_ST_STALE] = "stale",
		[TALLY_ST_BAD_AUTH] = "bad_auth",
		[TALLY_ST_GAP] = "gap",
		[TALLY_ST_BAD_OWNER] = "bad_owner",
		[TALLY_ST_NOT_OWNER] = "not_owner",
		[TALLY_ST_WRONG_OP] = "wrong_op",
	};

	return st < TALLY_ST_MAX_ ? names[st] : "unknown";
}

static inline const char *
tally_enc_name(unsigned int enc)
{
	static const char *const names[TALLY_ENC_MAX_] = {
		[TALLY_ENC_F32] = "f32", [TALLY_ENC_I32] = "i32",
		[TALLY_ENC_I16] = "i16", [TALLY_ENC_I8] = "i8",
		[TALLY_ENC_I4] = "i4", [TALLY_ENC_SIGN] = "sign",
	};

	return tally_enc_valid(enc) ? names[enc] : "unknown";
}

#endif /* TALLY_PROTO_H */

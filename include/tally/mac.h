/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The tag of an authenticated job's packets (docs/protocol.md,
 * "Authenticated jobs"): AES-128-GMAC, a 16-byte tag after the payload.
 *
 * A packet's tag is GMAC(key, iv, A) where
 *   A  = the 40-byte header with the flag RETX cleared, 8 zero bytes,
 *        then the payload (so a retransmission has its original's tag);
 *   iv = 12 bytes: kind (1 contribution, 2 NACK, 3 result), the type
 *        (NACK: the status), the slot (2 bytes, big-endian), the round
 *        (8 bytes, big-endian);
 *   key = the sender's: a member's own key for its contributions
 *        (TALLY_KEY_UP), its NACK key for NACKs to it (TALLY_KEY_DOWN),
 *        the job's result key for results (TALLY_KEY_RESULT).
 * Every (key, iv) names one message: a member sends one contribution a
 * round of a slot (its retransmissions the same bytes), the aggregator
 * one result a round of a slot.
 *
 * Keys are expanded once (struct tally_mac_key) and then only read, by
 * any number of threads. Built on Intel's ipsec-mb (AES-NI, VPCLMULQDQ
 * where the CPU has them).
 */
#ifndef TALLY_MAC_H
#define TALLY_MAC_H

#include <stddef.h>
#include <stdint.h>

#include <tally/proto.h>

#define TALLY_KEY_LEN	16	/* AES-128 */

enum tally_mac_kind {
	TALLY_MAC_UP = 1,	/* a member's contribution */
	TALLY_MAC_NACK = 2,	/* a NACK to a member */
	TALLY_MAC_RESULT = 3,	/* a result, to every member */
};

/* An expanded key: the AES round keys and GHASH's powers of H. */
struct tally_mac_key {
	uint8_t opaque[1024] __attribute__((aligned(64)));
};

/*
 * Expands key (TALLY_KEY_LEN bytes, borrowed) into *out. Returns 0, or
 * -ENOTSUP when this CPU has no AES instructions (or the library cannot
 * be set up), -ENOMEM.
 */
int tally_mac_key_init(struct tally_mac_key *out, const uint8_t *key);

/* Wipes an expanded key. */
void tally_mac_key_wipe(struct tally_mac_key *k);

/*
 * The tag of the packet whose header (TALLY_HDR_LEN bytes, wire order)
 * is at hdr and whose payload is plen bytes at payload, as kind: writes
 * TALLY_TAG_LEN bytes to tag. Reads the header's type, status, slot and
 * round for the iv. Borrows everything.
 */
void tally_mac_tag(const struct tally_mac_key *k, enum tally_mac_kind kind,
	const void *hdr, const void *payload, size_t plen, uint8_t *tag);

/*
 * Whether the len-byte packet at pkt (a header, a payload, then a tag;
 * len >= TALLY_HDR_LEN + TALLY_TAG_LEN) carries the right tag for kind.
 * Compares in constant time. 1 if it does, else 0.
 */
int tally_mac_verify(const struct tally_mac_key *k, enum tally_mac_kind kind,
	const void *pkt, size_t len);

#endif /* TALLY_MAC_H */

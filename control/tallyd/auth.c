/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The keys of an authenticated job's membership (docs/protocol.md,
 * "Authenticated jobs"; docs/control.md): libsodium's KDF, from the
 * job's 32-byte secret, through the membership's own secret (the wire
 * token as the subkey id), to each member's keys. A new membership has
 * a new wire token, so new keys; the same membership programmed again
 * (a tally-dp restart, a tallyd restart) has the same ones.
 */
#include <string.h>

#include <sodium.h>

#include "tallyd.h"

void
tallyd_auth_keys(const struct tallyd_job *j, uint64_t wire_token,
	unsigned int rank, struct tally_auth_keys *out)
{
	uint8_t m[crypto_kdf_KEYBYTES];

	crypto_kdf_derive_from_key(m, sizeof(m), wire_token, "tallymbr",
		j->auth_secret);
	crypto_kdf_derive_from_key(out->up, sizeof(out->up), rank,
		"tally-up", m);
	crypto_kdf_derive_from_key(out->down, sizeof(out->down), rank,
		"tally-dn", m);
	crypto_kdf_derive_from_key(out->result, sizeof(out->result), 0,
		"tallyres", m);
	sodium_memzero(m, sizeof(m));
}

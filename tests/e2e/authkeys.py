#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""The keys of an authenticated job's membership, for tests without tallyd.

  authkeys.py SECRET WORLD        the job_add "auth" object (JSON)
  authkeys.py SECRET WORLD RANK   rank's keys for tally-bench (in
                                  TALLY_AUTH_KEYS, never argv):
                                  up, down and result, 96 hex digits

SECRET is the membership's 32-byte secret (64 hex digits). Each key is
libsodium's crypto_kdf_derive_from_key() of it (BLAKE2b keyed by the
secret, the subkey id as salt, the context as personalization), as
docs/control.md describes: up = (rank, "tally-up"), down = (rank,
"tally-dn"), result = (0, "tallyres"), 16 bytes each.
"""
import hashlib
import json
import struct
import sys


def kdf(secret, subkey_id, ctx, n=16):
    return hashlib.blake2b(b"", digest_size=n, key=secret,
                           salt=struct.pack("<Q", subkey_id) + b"\0" * 8,
                           person=ctx + b"\0" * 8).digest()


def main():
    secret = bytes.fromhex(sys.argv[1])
    world = int(sys.argv[2])
    if len(secret) != 32 or not 1 <= world <= 64:
        sys.exit("authkeys.py: SECRET is 64 hex digits, WORLD 1..64")
    res = kdf(secret, 0, b"tallyres")
    if len(sys.argv) > 3:
        r = int(sys.argv[3])
        print((kdf(secret, r, b"tally-up") + kdf(secret, r, b"tally-dn") +
               res).hex())
        return
    print(json.dumps({
        "result": res.hex(),
        "up": [kdf(secret, r, b"tally-up").hex() for r in range(world)],
        "down": [kdf(secret, r, b"tally-dn").hex() for r in range(world)],
    }, separators=(",", ":")))


if __name__ == "__main__":
    main()

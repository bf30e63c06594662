/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * AES-128-GMAC tags of authenticated packets (<tally/mac.h>), through
 * ipsec-mb's direct GMAC API. One manager for the process, made once:
 * the GMAC functions it points to keep no state of their own, so any
 * thread may call them with its own context.
 */
#include <errno.h>
#include <pthread.h>
#include <string.h>

#include <intel-ipsec-mb.h>

#include <tally/mac.h>

_Static_assert(sizeof(struct gcm_key_data) <= sizeof(struct tally_mac_key),
	"an expanded key must fit struct tally_mac_key");

#define HDR_PAD	48	/* the header and 8 zero bytes: whole AES blocks */

static IMB_MGR *mgr;
static pthread_once_t mgr_once = PTHREAD_ONCE_INIT;

/* Picks the widest code the CPU runs (AVX-512 with VAES here). */
static void
mgr_init(void)
{
	IMB_MGR *m = alloc_mb_mgr(0);
	IMB_ARCH arch;

	if (m == NULL)
		return;
	init_mb_mgr_auto(m, &arch);
	if (imb_get_errno(m) != 0 || arch == IMB_ARCH_NOAESNI) {
		free_mb_mgr(m);
		return;
	}
	mgr = m;
}

int
tally_mac_key_init(struct tally_mac_key *out, const uint8_t *key)
{
	pthread_once(&mgr_once, mgr_init);
	if (mgr == NULL)
		return -ENOTSUP;
	memset(out, 0, sizeof(*out));
	IMB_AES128_GCM_PRE(mgr, key, (struct gcm_key_data *)out->opaque);
	return 0;
}

void
tally_mac_key_wipe(struct tally_mac_key *k)
{
	explicit_bzero(k, sizeof(*k));
}

/* The iv of a packet: kind, type or status, slot, round. */
static void
make_iv(uint8_t *iv, enum tally_mac_kind kind, const uint8_t *h)
{
	iv[0] = (uint8_t)kind;
	iv[1] = kind == TALLY_MAC_NACK ? h[17] : h[3];
	memcpy(iv + 2, h + 18, 2);	/* slot */
	memcpy(iv + 4, h + 32, 8);	/* round */
}

void
tally_mac_tag(const struct tally_mac_key *k, enum tally_mac_kind kind,
	const void *hdr, const void *payload, size_t plen, uint8_t *tag)
{
	const struct gcm_key_data *key = (const void *)k->opaque;
	struct gcm_context_data ctx;
	uint8_t a[HDR_PAD] = { 0 }, iv[12];

	memcpy(a, hdr, TALLY_HDR_LEN);
	a[4] &= (uint8_t)~TALLY_F_RETX;
	make_iv(iv, kind, a);
	IMB_AES128_GMAC_INIT(mgr, key, &ctx, iv, sizeof(iv));
	IMB_AES128_GMAC_UPDATE(mgr, key, &ctx, a, sizeof(a));
	if (plen > 0)
		IMB_AES128_GMAC_UPDATE(mgr, key, &ctx, payload, plen);
	IMB_AES128_GMAC_FINALIZE(mgr, key, &ctx, tag, TALLY_TAG_LEN);
}

int
tally_mac_verify(const struct tally_mac_key *k, enum tally_mac_kind kind,
	const void *pkt, size_t len)
{
	const uint8_t *p = pkt;
	uint8_t tag[TALLY_TAG_LEN], diff = 0;

	if (len < TALLY_HDR_LEN + TALLY_TAG_LEN)
		return 0;
	tally_mac_tag(k, kind, p, p + TALLY_HDR_LEN,
		len - TALLY_HDR_LEN - TALLY_TAG_LEN, tag);
	for (unsigned int i = 0; i < TALLY_TAG_LEN; i++)
		diff |= tag[i] ^ p[len - TALLY_TAG_LEN + i];
	return diff == 0;
}

/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The IPv4 -> MAC cache: buckets of four entries, one cache line each,
 * and two candidate buckets an address (two-choice hashing), so that a
 * table a quarter full practically never has to forget a host. A new
 * address goes to the emptier of its buckets; when both are full, it
 * replaces the entries of its first bucket in turn. Entries are never
 * removed. The table is sized once; learning and lookups only touch it.
 * Not shared: one lcore (or one thread) learns and looks up.
 * Address 0.0.0.0 marks an empty entry and is never learned.
 */
#include <errno.h>
#include <stddef.h>

#include <rte_common.h>
#include <rte_ether.h>
#include <rte_malloc.h>

#include "net.h"

#define NEIGH_WAYS	4		/* entries a bucket */
#define NEIGH_MAX	(1u << 24)	/* entries a table may have */

struct tally_net_neigh_bucket {
	rte_be32_t ip[NEIGH_WAYS];
	struct rte_ether_addr mac[NEIGH_WAYS];
	uint8_t victim;			/* next to replace when full */
} __rte_cache_aligned;

struct tally_net_neigh {
	uint32_t mask;			/* buckets - 1 */
	uint32_t ways;			/* NEIGH_WAYS, fewer in a tiny table */
	struct tally_net_neigh_bucket b[];
};

/*
 * Mixes all 32 bits of the address: hosts of one subnet differ in their
 * last byte, the top byte of ip as loaded on a little-endian CPU.
 */
static inline uint32_t
neigh_hash(rte_be32_t ip)
{
	uint32_t h = ip;

	h ^= h >> 16;
	h *= 0x85ebca6bu;
	h ^= h >> 13;
	h *= 0xc2b2ae35u;
	h ^= h >> 16;
	return h;
}

/* The two buckets of ip (the same one twice in a one-bucket table). */
static inline void
neigh_buckets(const struct tally_net_neigh *nb, rte_be32_t ip,
	uint32_t *b1, uint32_t *b2)
{
	uint32_t h = neigh_hash(ip);

	*b1 = h & nb->mask;
	*b2 = (h >> 16 | h << 16) & nb->mask;
}

/* The entry of bucket b that holds ip, or -1. */
static inline int
neigh_find(const struct tally_net_neigh *nb,
	const struct tally_net_neigh_bucket *b, rte_be32_t ip)
{
	for (uint32_t i = 0; i < nb->ways; i++)
		if (b->ip[i] == ip)
			return (int)i;
	return -1;
}

static unsigned int
neigh_free(const struct tally_net_neigh *nb,
	const struct tally_net_neigh_bucket *b)
{
	unsigned int n = 0;

	for (uint32_t i = 0; i < nb->ways; i++)
		n += b->ip[i] == 0;
	return n;
}

struct tally_net_neigh *
tally_net_neigh_create(unsigned int entries, int socket)
{
	struct tally_net_neigh *nb;
	unsigned int nbuckets;

	if (entries == 0 || entries > NEIGH_MAX ||
			!rte_is_power_of_2(entries)) {
		errno = EINVAL;
		return NULL;
	}
	nbuckets = RTE_MAX(entries / NEIGH_WAYS, 1u);
	nb = rte_zmalloc_socket("tally_net_neigh", sizeof(*nb) +
		(size_t)nbuckets * sizeof(nb->b[0]), RTE_CACHE_LINE_SIZE,
		socket);
	if (nb == NULL) {
		errno = ENOMEM;
		return NULL;
	}
	nb->mask = nbuckets - 1;
	nb->ways = RTE_MIN(entries, (unsigned int)NEIGH_WAYS);
	return nb;
}

void
tally_net_neigh_destroy(struct tally_net_neigh *nb)
{
	rte_free(nb);
}

/* Borrows mac (copied). */
void
tally_net_neigh_learn(struct tally_net_neigh *nb, rte_be32_t ip,
	const struct rte_ether_addr *mac)
{
	struct tally_net_neigh_bucket *b, *b2;
	uint32_t i1, i2;
	int i;

	if (ip == 0)
		return;
	neigh_buckets(nb, ip, &i1, &i2);
	b = &nb->b[i1];
	b2 = &nb->b[i2];
	i = neigh_find(nb, b, ip);
	if (i < 0 && b2 != b) {
		i = neigh_find(nb, b2, ip);
		if (i >= 0)
			b = b2;
	}
	if (i < 0) {
		if (neigh_free(nb, b2) > neigh_free(nb, b))
			b = b2;
		i = neigh_find(nb, b, 0);
		if (i < 0)
			i = b->victim++ % nb->ways;
	}
	b->ip[i] = ip;
	rte_ether_addr_copy(mac, &b->mac[i]);
}

/* The MAC points into the table: valid until the next learn. */
const struct rte_ether_addr *
tally_net_neigh_lookup(const struct tally_net_neigh *nb, rte_be32_t ip)
{
	const struct tally_net_neigh_bucket *b;
	uint32_t i1, i2;
	int i;

	if (ip == 0)
		return NULL;
	neigh_buckets(nb, ip, &i1, &i2);
	b = &nb->b[i1];
	i = neigh_find(nb, b, ip);
	if (i < 0) {
		b = &nb->b[i2];
		i = neigh_find(nb, b, ip);
		if (i < 0)
			return NULL;
	}
	return &b->mac[i];
}

/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Counts per source address: how many not yet authenticated rendezvous
 * connections each IPv4 peer holds, so that rdv.c can cap them per
 * source (rendezvous_max_per_source) in constant time, whatever a flood
 * of connections does. An open-addressing table with linear probing and
 * backward-shift deletion: no tombstones, so a long flood of short
 * connections never slows it down. Its size is fixed at creation, twice
 * the most sources it must hold, so it never fills.
 */
#include <errno.h>
#include <stdlib.h>

#include "srcs.h"

struct slot {
	uint32_t ip;
	uint32_t n;		/* 0: empty */
};

struct tallyd_srcs {
	unsigned int mask;	/* size - 1, size a power of two */
	unsigned int used;
	unsigned int max;	/* sources it promises to hold */
	struct slot s[];
};

struct tallyd_srcs *
tallyd_srcs_create(unsigned int max)
{
	struct tallyd_srcs *t;
	size_t size = 16;

	if (max == 0 || max > (1u << 24)) {
		errno = EINVAL;
		return NULL;
	}
	while (size < 2 * (size_t)max)
		size *= 2;
	t = calloc(1, sizeof(*t) + size * sizeof(t->s[0]));
	if (t == NULL)
		return NULL;
	t->mask = (unsigned int)size - 1;
	t->max = max;
	return t;
}

void
tallyd_srcs_destroy(struct tallyd_srcs *t)
{
	free(t);
}

static unsigned int
home(const struct tallyd_srcs *t, uint32_t ip)
{
	return (unsigned int)((ip * UINT32_C(0x9e3779b1)) >> 7) & t->mask;
}

/* The slot holding ip, or the empty slot where it would go. */
static unsigned int
find(const struct tallyd_srcs *t, uint32_t ip)
{
	unsigned int i = home(t, ip);

	while (t->s[i].n != 0 && t->s[i].ip != ip)
		i = (i + 1) & t->mask;
	return i;
}

unsigned int
tallyd_srcs_get(const struct tallyd_srcs *t, uint32_t ip)
{
	return t->s[find(t, ip)].n;
}

int
tallyd_srcs_add(struct tallyd_srcs *t, uint32_t ip)
{
	unsigned int i = find(t, ip);

	if (t->s[i].n == 0) {
		if (t->used >= t->max)
			return -ENOSPC;
		t->s[i].ip = ip;
		t->used++;
	}
	t->s[i].n++;
	return 0;
}

/* Empties slot i and moves later entries of its run back into the hole. */
static void
remove_at(struct tallyd_srcs *t, unsigned int i)
{
	unsigned int j = i;

	t->used--;
	for (;;) {
		unsigned int h;

		j = (j + 1) & t->mask;
		if (t->s[j].n == 0)
			return;
		h = home(t, t->s[j].ip);
		/* j stays if its home lies cyclically in (i, j]. */
		if (i <= j ? (i < h && h <= j) : (i < h || h <= j))
			continue;
		t->s[i] = t->s[j];
		t->s[j].n = 0;
		i = j;
	}
}

void
tallyd_srcs_sub(struct tallyd_srcs *t, uint32_t ip)
{
	unsigned int i = find(t, ip);

	if (t->s[i].n == 0)
		return;
	if (--t->s[i].n == 0)
		remove_at(t, i);
}

unsigned int
tallyd_srcs_used(const struct tallyd_srcs *t)
{
	return t->used;
}

/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The job table lcores look jobs up in: an immutable snapshot, built whole
 * by the control thread and swapped in by pointer, so lookups take no lock.
 * A table borrows its jobs; destroying it leaves them alone.
 */
#ifndef TALLY_AGG_JOBTAB_H
#define TALLY_AGG_JOBTAB_H

#include <stdint.h>

#include "job.h"

struct tally_jobtab {
	uint32_t mask;		/* buckets - 1, buckets a power of two */
	uint32_t njobs;
	struct tally_job *bucket[]; /* open addressing, linear probing */
};

/*
 * Builds a table of the n jobs. Returns NULL with errno EEXIST when two
 * jobs share an id, ENOMEM when memory runs out. n may be 0.
 */
struct tally_jobtab *tally_jobtab_create(struct tally_job *const *jobs,
	unsigned int n);

void tally_jobtab_destroy(struct tally_jobtab *tab);

static inline struct tally_job *
tally_jobtab_lookup(const struct tally_jobtab *tab, uint16_t id)
{
	uint32_t i = id & tab->mask;
	struct tally_job *job;

	while ((job = tab->bucket[i]) != NULL) {
		if (job->conf.id == id)
			return job;
		i = (i + 1) & tab->mask;
	}
	return NULL;
}

#endif /* TALLY_AGG_JOBTAB_H */

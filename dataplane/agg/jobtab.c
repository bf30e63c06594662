/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <stdlib.h>

#include "jobtab.h"

struct tally_jobtab *
tally_jobtab_create(struct tally_job *const *jobs, unsigned int n)
{
	struct tally_jobtab *tab;
	uint32_t nb = 4;

	/* At most half full, so a miss ends at an empty bucket quickly. */
	while (nb < 2 * n)
		nb *= 2;
	tab = calloc(1, sizeof(*tab) + nb * sizeof(tab->bucket[0]));
	if (tab == NULL) {
		errno = ENOMEM;
		return NULL;
	}
	tab->mask = nb - 1;
	tab->njobs = n;
	for (unsigned int k = 0; k < n; k++) {
		uint32_t i = jobs[k]->conf.id & tab->mask;

		while (tab->bucket[i] != NULL) {
			if (tab->bucket[i]->conf.id == jobs[k]->conf.id) {
				free(tab);
				errno = EEXIST;
				return NULL;
			}
			i = (i + 1) & tab->mask;
		}
		tab->bucket[i] = jobs[k];
	}
	return tab;
}

void
tally_jobtab_destroy(struct tally_jobtab *tab)
{
	free(tab);
}

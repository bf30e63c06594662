/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "job.h"

_Static_assert(sizeof(struct tally_set) == 32, "two sets a cache line");
_Static_assert(TALLY_MAX_ELEMS * 4 <= UINT16_MAX,
	"a result in 32-bit lanes must fit res_len and payload_len");

static int
conf_valid(const struct tally_job_conf *c)
{
	return c->world >= 1 && c->world <= TALLY_MAX_WORKERS &&
		c->window >= 1 && c->window <= TALLY_MAX_WINDOW &&
		c->max_elems >= 1 && c->max_elems <= TALLY_MAX_ELEMS;
}

struct tally_job *
tally_job_create(const struct tally_job_conf *conf)
{
	struct tally_job *job;
	size_t nsets, lanes_bytes;

	if (conf == NULL || !conf_valid(conf)) {
		errno = EINVAL;
		return NULL;
	}
	job = calloc(1, sizeof(*job));
	if (job == NULL)
		goto err;
	job->conf = *conf;
	job->stride = (conf->max_elems + 15u) & ~15u;
	nsets = (size_t)conf->window * 2;
	lanes_bytes = nsets * job->stride * sizeof(uint32_t);
	if (posix_memalign((void **)&job->sets, 64,
			nsets * sizeof(struct tally_set)) != 0)
		goto err_job;
	if (posix_memalign((void **)&job->lanes, 64, lanes_bytes) != 0)
		goto err_sets;
	memset(job->lanes, 0, lanes_bytes);
	tally_job_reset(job);
	return job;

err_sets:
	free(job->sets);
err_job:
	free(job);
err:
	errno = ENOMEM;
	return NULL;
}

void
tally_job_reset(struct tally_job *job)
{
	memset(job->sets, 0, (size_t)job->conf.window * 2 * sizeof(*job->sets));
}

void
tally_job_destroy(struct tally_job *job)
{
	if (job == NULL)
		return;
	free(job->lanes);
	free(job->sets);
	free(job);
}

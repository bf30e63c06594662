/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "job.h"

_Static_assert(sizeof(struct tally_set) == 32, "two sets a cache line");
_Static_assert(TALLY_MAX_ELEMS * 4 <= UINT16_MAX,
	"a result in 32-bit lanes must fit res_len and payload_len");

/*
 * A leaf's upstream: plain (no tags) and UDP, its rank a member of a spine
 * job, and the total world at least its own.
 */
static int
up_valid(const struct tally_job_conf *c)
{
	const struct tally_job_up *u = &c->up;

	return u->ip == 0 || (u->port != 0 && !c->auth && !c->roce &&
		u->rank < TALLY_MAX_WORKERS && u->world >= c->world &&
		u->world <= TALLY_MAX_TIER_WORLD);
}

static int
conf_valid(const struct tally_job_conf *c)
{
	return c->world >= 1 && c->world <= TALLY_MAX_WORKERS &&
		c->window >= 1 && c->window <= TALLY_MAX_WINDOW &&
		c->max_elems >= 1 && c->max_elems <= TALLY_MAX_ELEMS &&
		up_valid(c);
}

/* Expands an authenticated job's keys: the results', then each member's. */
static int
make_keys(struct tally_job *job)
{
	const struct tally_job_conf *c = &job->conf;
	size_t n = 1 + 2 * (size_t)c->world;

	if (posix_memalign((void **)&job->mac, 64, n * sizeof(*job->mac)) != 0)
		return -ENOMEM;
	if (tally_mac_key_init(&job->mac[0], c->key_result) != 0)
		return -ENOTSUP;
	for (unsigned int r = 0; r < c->world; r++)
		if (tally_mac_key_init(&job->mac[1 + 2 * r], c->keys[r].up) ||
				tally_mac_key_init(&job->mac[2 + 2 * r],
					c->keys[r].down))
			return -ENOTSUP;
	return 0;
}

static void
free_keys(struct tally_job *job)
{
	if (job->mac == NULL)
		return;
	for (size_t i = 0; i < 1 + 2 * (size_t)job->conf.world; i++)
		tally_mac_key_wipe(&job->mac[i]);
	free(job->mac);
	job->mac = NULL;
}

struct tally_job *
tally_job_create(const struct tally_job_conf *conf)
{
	struct tally_job *job;
	size_t nsets, lanes_bytes;
	int rc;

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
	/* A port's slots are s % nports: no more ports than slots. */
	job->seen_ports = conf->nports > 1 ? conf->nports : 1;
	if (job->seen_ports > conf->window)
		job->seen_ports = conf->window;
	job->seen_stride = (conf->world + 2u + 15u) & ~15u;
	if (posix_memalign((void **)&job->seen, 64, (size_t)job->seen_ports *
			job->seen_stride * sizeof(*job->seen)) != 0)
		goto err_lanes;
	job->owner = calloc(nsets, 1);
	if (job->owner == NULL)
		goto err_seen;
	rc = conf->auth ? make_keys(job) : 0;
	/* The raw keys stay only in their expanded form. */
	explicit_bzero(job->conf.key_result, sizeof(job->conf.key_result));
	explicit_bzero(job->conf.keys, sizeof(job->conf.keys));
	if (rc != 0) {
		tally_job_destroy(job);
		errno = -rc;
		return NULL;
	}
	tally_job_reset(job);
	return job;

err_seen:
	free(job->seen);
err_lanes:
	free(job->lanes);
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
	memset(job->seen, 0, (size_t)job->seen_ports * job->seen_stride *
		sizeof(*job->seen));
}

void
tally_job_destroy(struct tally_job *job)
{
	if (job == NULL)
		return;
	free_keys(job);
	free(job->owner);
	free(job->seen);
	free(job->lanes);
	free(job->sets);
	free(job);
}

/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * `job create NAME --world TOTAL --leaves A,B,... --spine S`: the checks
 * of a two-tier tree and the making of its jobs (tree.c has the rest).
 * Every refusal names what is wrong; ctl.c counts it in ctl_errors.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "ctl_parse.h"
#include "dpc.h"

static int
fail(int err, char *why, size_t wlen, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* Writes the sentence into why and returns -err. */
static int
fail(int err, char *why, size_t wlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, wlen, fmt, ap);
	va_end(ap);
	return -err;
}

/* What a tree cannot carry (docs/scale-out.md, "Two tiers"). */
static int
check_options(const struct tallyd_ctl_req *r, char *why, size_t wlen)
{
	unsigned int per;

	if (strlen(r->name) > TALLY_RDV_NAME_MAX - 3)
		return fail(EINVAL, why, wlen, "a tree's name is at most %d "
			"characters (its leaves are NAME/L)",
			TALLY_RDV_NAME_MAX - 3);
	if (r->auth || r->rdma || r->group_ip != 0)
		return fail(EOPNOTSUPP, why, wlen, "job '%s': a two-tier tree "
			"cannot be %s: a leaf forwards plain UDP to its spine",
			r->name, r->auth ? "authenticated (--auth)" : r->rdma ?
			"RoCEv2 (--transport rdma)" : "multicast (--group)");
	if (strncmp(r->codec, "sparse", 6) == 0)
		return fail(EOPNOTSUPP, why, wlen, "job '%s': codec %s sends "
			"block-sparse streams, which a leaf does not forward "
			"(SUM and MAX rounds only)", r->name, r->codec);
	per = r->world / r->nleaves;
	if (r->world % r->nleaves != 0 || per > TALLY_MAX_WORKERS)
		return fail(EINVAL, why, wlen, "job '%s': world %u does not "
			"split into %u leaves of equal size, at most %d ranks "
			"each (rank r goes to leaf r / (world / leaves))",
			r->name, r->world, r->nleaves, TALLY_MAX_WORKERS);
	return 0;
}

/*
 * A named dataplane: its index, up and with a known address. The
 * spine's members are the leaves' addresses, so every one must answer
 * now.
 */
static int
check_dp(struct tallyd *d, const struct tallyd_ctl_req *r, const char *name,
	const char *what, int *dp, char *why, size_t wlen)
{
	uint32_t ip;
	uint16_t port, nports;

	if ((*dp = tallyd_dp_find(d, name)) < 0)
		return fail(ENOENT, why, wlen, "no dataplane '%s' for the %s "
			"(tallyd's are listed by tallyctl stats)", name, what);
	if (!tallyd_dpc_up(d->dps[*dp].dpc) ||
			tallyd_dpc_endpoint(d, (unsigned int)*dp, &ip, &port,
				&nports) != 0)
		return fail(EHOSTDOWN, why, wlen, "job '%s' not created: "
			"dataplane '%s' (the %s) is down (its tally-dp does "
			"not answer), and a tree needs every one of its "
			"dataplanes", r->name, name, what);
	return 0;
}

/* A leaf job like the spine s, leaf l at dataplane dp, linked into d. */
static struct tallyd_job *
leaf_new(struct tallyd *d, const struct tallyd_job *s,
	const struct tallyd_job *t, unsigned int l, unsigned int dp)
{
	struct tallyd_job *j = calloc(1, sizeof(*j));

	if (j == NULL)
		return NULL;
	tallyd_tree_leaf_name(s->name, l, j->name);
	j->id = s->id;
	j->world = (uint8_t)tallyd_tree_leaf_world(s);
	j->window = s->window;
	j->max_elems = s->max_elems;
	j->narrow = t->narrow;
	j->idle_timeout_s = 0;	/* the spine's idle timeout deletes all */
	memcpy(j->codec, s->codec, sizeof(j->codec));
	memcpy(j->token_hash, s->token_hash, sizeof(j->token_hash));
	j->created = j->last_active = s->created;
	j->nshards = 1;
	j->sh[0].dp = dp;
	j->tier = TALLYD_TIER_LEAF;
	j->leaf = (uint8_t)l;
	j->tree_world = s->tree_world;
	tallyd_job_link(d, j);
	return j;
}

/* Unlinks and frees the spine s and the leaves made so far. */
static void
undo(struct tallyd *d, struct tallyd_job *s)
{
	char name[TALLY_RDV_NAME_MAX + 1];
	struct tallyd_job *l;

	for (unsigned int i = 0; i < TALLYD_TREE_MAX_LEAVES; i++) {
		tallyd_tree_leaf_name(s->name, i, name);
		if ((l = tallyd_job_find(d, name)) != NULL)
			tallyd_job_free(d, l);
	}
	tallyd_job_free(d, s);
}

/* The spine's members: each leaf's address and first UDP port. */
static void
spine_members(struct tallyd *d, struct tallyd_job *s, const int *leaves)
{
	uint16_t nports;

	for (unsigned int l = 0; l < s->world; l++) {
		tallyd_dpc_endpoint(d, (unsigned int)leaves[l],
			&s->members[l].ip, &s->members[l].port, &nports);
		s->members[l].qpn = 0;
	}
	randombytes_buf(&s->wire_token, sizeof(s->wire_token));
	s->has_members = true;
	s->epoch = ++d->next_epoch;
	tallyd_epoch_formed(s);
}

/* Each part against its tally-dp's limits (memory, MTU, jobs). */
static int
check_limits(struct tallyd *d, const struct tallyd_ctl_req *r,
	const struct tallyd_job *t, int spine, const int *leaves, char *why,
	size_t wlen)
{
	struct tallyd_job p = *t;
	int ret;

	p.nshards = 1;
	p.sh[0].dp = (unsigned int)spine;
	p.world = (uint8_t)r->nleaves;
	p.narrow = false;
	if ((ret = tallyd_limits_check(d, &p, true, why, wlen)) != 0)
		return ret;
	p.world = (uint8_t)(r->world / r->nleaves);
	p.narrow = t->narrow;
	for (unsigned int l = 0; l < r->nleaves; l++) {
		p.sh[0].dp = (unsigned int)leaves[l];
		if ((ret = tallyd_limits_check(d, &p, true, why, wlen)) != 0)
			return ret;
	}
	return 0;
}

int
tallyd_tree_create(struct tallyd *d, const struct tallyd_ctl_req *r,
	const struct tallyd_job *t, struct tallyd_job **out,
	char token_hex[TALLY_RDV_TOKEN_HEX + 1], char *why, size_t wlen)
{
	int spine, leaves[TALLYD_TREE_MAX_LEAVES], ret;
	struct tallyd_job st = *t, *s;

	if ((ret = check_options(r, why, wlen)) != 0 ||
			(ret = check_dp(d, r, r->spine, "spine", &spine, why,
				wlen)) != 0)
		return ret;
	for (unsigned int l = 0; l < r->nleaves; l++)
		if ((ret = check_dp(d, r, r->leaves[l], "leaf", &leaves[l],
				why, wlen)) != 0)
			return ret;
	if ((ret = check_limits(d, r, t, spine, leaves, why, wlen)) != 0)
		return ret;
	if (tallyd_job_find(d, r->name) != NULL)
		return fail(EEXIST, why, wlen, "job '%s' exists", r->name);
	if (d->njobs + r->nleaves + 1 > d->conf.max_jobs)
		return fail(ENOSPC, why, wlen, "a tree of %u leaves is %u jobs, "
			"over max_jobs (%u, %u in use)", r->nleaves,
			r->nleaves + 1, d->conf.max_jobs, d->njobs);
	st.world = (uint8_t)r->nleaves;
	st.narrow = false;	/* the spine's members send wide lanes */
	st.nshards = 1;
	st.sh[0].dp = (unsigned int)spine;
	if ((s = tallyd_job_create(d, &st, token_hex)) == NULL)
		return fail(errno, why, wlen, "cannot create job '%s': %s",
			r->name, strerror(errno));
	s->tier = TALLYD_TIER_SPINE;
	s->tree_world = (uint16_t)r->world;
	for (unsigned int l = 0; l < r->nleaves; l++)
		if (leaf_new(d, s, t, l, (unsigned int)leaves[l]) == NULL) {
			undo(d, s);
			return fail(ENOMEM, why, wlen, "out of memory");
		}
	spine_members(d, s, leaves);
	/* On disk before the reply; not at all if it cannot be. */
	if ((ret = tallyd_state_save(d)) != 0) {
		undo(d, s);
		return fail(-ret, why, wlen, "job '%s' not created: %s",
			r->name, d->sf.error);
	}
	if (tallyd_dpc_restore(d, s, &s->sh[0], TALLYD_PROG_SPINE) != 0)
		tallyd_log("job '%s': the spine goes to tally-dp at the next "
			"poll", s->name);
	*out = s;
	return 0;
}

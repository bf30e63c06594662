/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The poll of tally-dp, every dp_poll_ms: ping (its address and port
 * range), job_list page by page ({"after", "limit"},
 * until "more" is false or absent: a tally-dp without pages sends all at
 * once), then stats. Each page's entries give the jobs' counters and are
 * reconciled with tallyd's jobs by their full configuration:
 * - an id tallyd has no job for, or a job without a membership: removed
 *   from tally-dp (dp_stale_removed);
 * - a job whose token (token_fp), members, world, window, max_elems,
 *   narrow or group differ: programmed again (dp_mismatches);
 * - a membership tally-dp does not have (it restarted): programmed again
 *   (dp_reprograms), once the last page is in.
 * A job with a chain of requests outstanding (dpc_ops.c), or one queued
 * since the poll began, is left alone this time: its page may predate
 * the chain's work. Requests go out in order, so the removals a poll
 * queued are done when its stats reply arrives; only then can the next
 * poll begin (chains it started may still go on: see above).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "dpc.h"
#include "cluster.h"

#define PAGE_LIMIT	128

struct tallyd_dpc_poll {
	bool running;
	bool bad_ping;			/* logged: ping had no usable endpoint */
	uint64_t start_seq;		/* tallyd_dpc_seq() when it began */
	json_int_t after;		/* the last id of the last page */
	uint8_t seen[65536 / 8];
};

struct tallyd_dpc_poll *
tallyd_dpc_poll_new(void)
{
	return calloc(1, sizeof(struct tallyd_dpc_poll));
}

void
tallyd_dpc_poll_free(struct tallyd_dpc_poll *p)
{
	free(p);
}

static void page(struct tallyd *d, unsigned int dp);

/* Dataplane dp's poll state. */
static struct tallyd_dpc_poll *
pstate(struct tallyd *d, unsigned int dp)
{
	return tallyd_dpc_poll_state(d->dps[dp].dpc);
}

/* The poll ends (a failure was logged by dpc.c, or here). */
static void
done(struct tallyd *d, unsigned int dp)
{
	pstate(d, dp)->running = false;
}

static void
on_stale_del(struct tallyd *d, unsigned int dp, struct tallyd_job *j,
	json_t *r, int err, uintptr_t id)
{
	(void)j;
	if (err == 0 && json_integer_value(json_object_get(r, "errno")) == 0) {
		d->st.dp_stale_removed++;
		tallyd_log("job %u removed from tally-dp%s", (unsigned int)id,
			tallyd_dp_label(d, dp));
	}
}

/* Removes id from tally-dp: tallyd does not own what it holds there. */
static void
remove_stale(struct tallyd *d, unsigned int dp, json_int_t id,
	const char *why)
{
	tallyd_log("tally-dp%s holds job %u, %s: removing it",
		tallyd_dp_label(d, dp), (unsigned int)id, why);
	tallyd_dpc_request(d, dp, json_pack("{s:s, s:I}", "cmd", "job_del",
		"id", id), NULL, 0, on_stale_del, (uintptr_t)id);
}

/* A shard whose entry differs from its membership: programs it again. */
static void
mismatch(struct tallyd *d, struct tallyd_job *j, struct tallyd_shard *sh,
	json_t *e, const char *what)
{
	bool ours = json_object_get(e, "token_fp") != NULL &&
		tallyd_dpc_entry_ours(j, e);

	tallyd_log("job '%s' (id %u) differs at tally-dp%s (%s): "
		"programming it again", j->name, j->id,
		tallyd_dp_label(d, sh->dp), what);
	d->st.dp_mismatches++;
	/* Only a matching token proves the counters there are the job's. */
	if (ours)
		tallyd_dpc_take(j, sh, e);
	sh->in_dp = ours;
	tallyd_dpc_restore(d, j, sh, TALLYD_PROG_MISMATCH);
}

/*
 * One job_list entry of dataplane dp: counters, and the reconciliation
 * of its id. While any shard of the job has a chain outstanding (a
 * barrier programs them all), none is reconciled.
 */
static void
entry(struct tallyd *d, unsigned int dp, json_t *e)
{
	struct tallyd_dpc_poll *p = pstate(d, dp);
	json_int_t id = json_integer_value(json_object_get(e, "id"));
	struct tallyd_shard *sh;
	struct tallyd_job *j;
	char what[96];

	if (id < 1 || id > UINT16_MAX)
		return;
	p->seen[id / 8] |= (uint8_t)(1u << (id % 8));
	/* A tree's parts share the id: the one at this dataplane. */
	j = tallyd_job_find_at(d, (uint16_t)id, dp);
	/* etcd: the leader reconciles; a follower's counters are its. */
	if (!tallyd_state_leads(d))
		return;
	if (j == NULL)
		return remove_stale(d, dp, id, "which tallyd has no job for");
	if ((sh = tallyd_job_shard(j, dp)) == NULL)
		return remove_stale(d, dp, id, "a job with no shard there");
	if (tallyd_dpc_busy(j) || sh->opseq > p->start_seq ||
			j->draining) {
		/* Requests run in order: the reading is still the job's. */
		if (tallyd_dpc_entry_ours(j, e)) {
			tallyd_dpc_take(j, sh, e);
			sh->in_dp = true;
		}
		return;
	}
	/* Another tallyd may have just formed it (etcd): read j again. */
	if (!j->has_members || tallyd_dpc_entry_differs(j, e, what,
			sizeof(what)))
		tallyd_cluster_refresh(d, j);
	if (!j->has_members)
		return remove_stale(d, dp, id,
			"a membership tallyd never formed");
	if (tallyd_dpc_entry_differs(j, e, what, sizeof(what)))
		return mismatch(d, j, sh, e, what);
	tallyd_dpc_take(j, sh, e);
	sh->in_dp = true;
}

/* After the last page: memberships tally-dp does not hold go back. */
static void
restore_missing(struct tallyd *d, unsigned int dp)
{
	struct tallyd_dpc_poll *p = pstate(d, dp);
	struct tallyd_shard *sh;
	struct tallyd_job *j;

	if (!tallyd_state_leads(d))
		return;
	for (j = d->jobs; j != NULL; j = j->next) {
		if ((sh = tallyd_job_shard(j, dp)) == NULL ||
				p->seen[j->id / 8] & (1u << (j->id % 8)) ||
				tallyd_dpc_busy(j) ||
				sh->opseq > p->start_seq)
			continue;
		sh->in_dp = false;
		if (j->has_members && !j->draining)
			tallyd_dpc_restore(d, j, sh, TALLYD_PROG_RESTORE);
	}
}

static void
on_stats(struct tallyd *d, unsigned int dp, struct tallyd_job *j, json_t *r,
	int err, uintptr_t arg)
{
	json_t **stats = &d->dps[dp].stats;

	(void)j;
	(void)arg;
	json_decref(*stats);
	*stats = NULL;
	if (err == 0 && json_integer_value(json_object_get(r, "errno")) == 0) {
		*stats = json_deep_copy(r);
		json_object_del(*stats, "errno");
	}
	done(d, dp);
}

static void
on_page(struct tallyd *d, unsigned int dp, struct tallyd_job *j, json_t *r,
	int err, uintptr_t arg)
{
	struct tallyd_dpc_poll *p = pstate(d, dp);
	json_t *jobs = json_object_get(r, "jobs"), *e;
	bool more = json_is_true(json_object_get(r, "more"));
	json_int_t last = p->after;
	size_t i;

	(void)j;
	(void)arg;
	if (err != 0)
		return done(d, dp);
	if (json_integer_value(json_object_get(r, "errno")) != 0 ||
			!json_is_array(jobs)) {
		tallyd_log("tally-dp%s's job_list failed: %s",
			tallyd_dp_label(d, dp),
			json_string_value(json_object_get(r, "error")));
		return done(d, dp);
	}
	json_array_foreach(jobs, i, e) {
		json_int_t id = json_integer_value(json_object_get(e, "id"));

		if (id > last)
			last = id;
		entry(d, dp, e);
	}
	if (more && last <= p->after) {
		tallyd_log("tally-dp%s's job_list pages do not advance (after "
			"%lld)", tallyd_dp_label(d, dp), (long long)p->after);
		return done(d, dp);
	}
	p->after = last;
	if (more)
		return page(d, dp);
	restore_missing(d, dp);
	tallyd_rdv_retry(d);
	if (tallyd_dpc_request(d, dp, json_pack("{s:s}", "cmd", "stats"), NULL,
			0, on_stats, 0) != 0)
		done(d, dp);
}

/* Asks for the next page of tally-dp's jobs. */
static void
page(struct tallyd *d, unsigned int dp)
{
	struct tallyd_dpc_poll *p = pstate(d, dp);

	if (tallyd_dpc_request(d, dp, json_pack("{s:s, s:I, s:i}", "cmd",
			"job_list", "after", p->after, "limit", PAGE_LIMIT),
			NULL, TALLYD_DPC_PROBE, on_page, 0) != 0)
		done(d, dp);
}

static void
on_ping(struct tallyd *d, unsigned int dp, struct tallyd_job *j, json_t *r,
	int err, uintptr_t arg)
{
	struct tallyd_dpc_poll *p = pstate(d, dp);
	bool bad;

	(void)j;
	(void)arg;
	if (err != 0)
		return done(d, dp);
	tallyd_limits_from_ping(&d->dps[dp].limits, r);
	bad = tallyd_dpc_set_endpoint(d, dp, r) != 0;
	if (bad && !p->bad_ping)
		tallyd_log("tally-dp%s's ping reply has no usable address "
			"and port (set dp_address?)", tallyd_dp_label(d, dp));
	p->bad_ping = bad;
	page(d, dp);
}

/* Starts a poll of dataplane dp, unless one is under way. */
static void
poll_one(struct tallyd *d, unsigned int dp)
{
	struct tallyd_dpc_poll *p = pstate(d, dp);

	if (p->running)
		return;
	p->running = true;
	p->start_seq = tallyd_dpc_seq(d->dps[dp].dpc);
	p->after = 0;
	memset(p->seen, 0, sizeof(p->seen));
	/* Every time: a restarted tally-dp may have another port range. */
	if (tallyd_dpc_request(d, dp, json_pack("{s:s}", "cmd", "ping"), NULL,
			TALLYD_DPC_PROBE, on_ping, 0) != 0)
		done(d, dp);
}

void
tallyd_dpc_poll(struct tallyd *d)
{
	for (unsigned int dp = 0; dp < d->ndps; dp++)
		poll_one(d, dp);
}

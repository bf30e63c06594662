/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Epochs (docs/scale-out.md, "Epochs"): a dataplane that stops answering
 * ends the epoch of every job that spans it. With each poll tallyd counts
 * the polls each dataplane missed in a row; after dp_dead_polls (with
 * state in etcd: and once its liveness lease has run out, dplive.c) it is
 * dead. Each job on it then moves: its slots go to the surviving
 * dataplanes, or a spare (a live one it did not span) takes the dead
 * one's place; its membership is programmed there under a new wire token
 * (the survivors drop the old epoch's packets as bad token), and when
 * every shard took it the job's epoch goes up with the reason recorded.
 * With no live dataplane left the epoch ends with "no capacity", and the
 * rendezvous says so (rejoin.c). Only the leader moves jobs (one tallyd
 * with a state file is always the leader). A tallyd with one dataplane
 * has nowhere to move a job: its jobs wait for it to come back, as
 * before (docs/control.md, "The poll and the reconciliation").
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <sodium.h>

#include "cluster.h"
#include "dpc.h"
#include "epoch.h"
#include "rdv.h"

unsigned int
tallyd_epoch_plan(const unsigned int *cur, unsigned int n, uint32_t live,
	unsigned int ndps, unsigned int *out)
{
	uint32_t used = 0;
	unsigned int k, m = 0;

	for (k = 0; k < n; k++)
		used |= 1u << cur[k];
	for (k = 0; k < n; k++) {
		unsigned int s;

		if (live & 1u << cur[k]) {
			out[m++] = cur[k];
			continue;
		}
		/* A spare: live, and neither spanned nor taken yet. */
		for (s = 0; s < ndps; s++)
			if ((live & 1u << s) && !(used & 1u << s))
				break;
		if (s < ndps) {
			used |= 1u << s;
			out[m++] = s;
		}
	}
	return m;
}

/* Whether dataplane dp has missed enough to be dead. */
static bool
dead_now(const struct tallyd *d, const struct tallyd_dp *dp)
{
	if (dp->missed < d->conf.dp_dead_polls)
		return false;
	/* etcd: its liveness key's lease has run out by then too. */
	return d->cl == NULL ||
		tallyd_wall_s() - dp->down_since >= (int64_t)d->conf.state_lease_s;
}

/* What dataplane dp missed, for the log and the epoch's reason. */
static void
missed_text(const struct tallyd *d, const struct tallyd_dp *dp, char *buf,
	size_t len)
{
	if (d->cl == NULL)
		snprintf(buf, len, "%u admin polls in a row (every %u ms)",
			dp->missed, d->conf.dp_poll_ms);
	else
		snprintf(buf, len, "%u admin polls in a row (every %u ms); its "
			"liveness lease (%u s) ran out", dp->missed,
			d->conf.dp_poll_ms, d->conf.state_lease_s);
}

/* One poll's verdict on dataplane i: missed, dead, or back. */
static void
liveness(struct tallyd *d, unsigned int i)
{
	struct tallyd_dp *dp = &d->dps[i];
	char what[96];

	if (tallyd_dpc_up(dp->dpc)) {
		if (dp->dead)
			tallyd_log("tally-dp%s answers again; jobs that moved "
				"away stay where they are", tallyd_dp_label(d,
				i));
		dp->missed = 0;
		dp->dead = false;
		dp->ever_up = true;
		return;
	}
	if (!dp->ever_up)
		return;		/* not started yet: nothing to end */
	if (dp->missed++ == 0)
		dp->down_since = tallyd_wall_s();
	/* One dataplane alone: nowhere to go; its jobs wait for it. */
	if (dp->dead || d->ndps < 2 || !dead_now(d, dp))
		return;
	dp->dead = true;
	missed_text(d, dp, what, sizeof(what));
	tallyd_log("tally-dp%s is dead: it missed %s; the epochs of its jobs "
		"end", tallyd_dp_label(d, i), what);
}

/* Starts (or retries) the program of j's remapped epoch. */
void
tallyd_epoch_program(struct tallyd *d, struct tallyd_job *j)
{
	uint64_t token;

	if (tallyd_dpc_busy(j))
		return;		/* after the chain under way */
	if (!j->has_members) {
		j->remap_pending = false;
		return;
	}
	randombytes_buf(&token, sizeof(token));
	tallyd_dpc_program_epoch(d, j, token);
}

/* j's first shard on a dead dataplane, or NULL. */
static struct tallyd_shard *
dead_shard(struct tallyd *d, struct tallyd_job *j)
{
	for (unsigned int k = 0; k < j->nshards; k++)
		if (d->dps[j->sh[k].dp].dead)
			return &j->sh[k];
	return NULL;
}

/* Records why j's epoch ends: dataplane sh's death. */
static void
note_why(struct tallyd *d, struct tallyd_job *j,
	const struct tallyd_shard *sh, const char *cause)
{
	const struct tallyd_dp *dp = &d->dps[sh->dp];

	snprintf(j->ew.cause, sizeof(j->ew.cause), "%s", cause);
	snprintf(j->ew.dataplane, sizeof(j->ew.dataplane), "%s", dp->name);
	missed_text(d, dp, j->ew.missed, sizeof(j->ew.missed));
	j->ew.at = dp->down_since;
	j->ew.from = j->epoch;
}

/*
 * No dataplane is left for j: its epoch ends with nothing to program.
 * The membership is over (a dataplane that comes back must not take the
 * old token again); whoever waits hears ENOSPC with the ring fallback.
 */
static void
no_capacity(struct tallyd *d, struct tallyd_job *j,
	const struct tallyd_shard *sh)
{
	note_why(d, j, sh, "no_capacity");
	j->epoch = ++d->next_epoch;
	j->has_members = false;
	j->remap_pending = false;
	d->st.epochs_ended++;
	tallyd_log("job '%s' (id %u): epoch %u ends: tally-dp %s missed %s, "
		"and no dataplane is left (no capacity); epoch %u has none",
		j->name, j->id, j->ew.from, j->ew.dataplane, j->ew.missed,
		j->epoch);
	for (unsigned int r = 0; r < TALLY_MAX_WORKERS; r++) {
		if (j->joiners[r] != NULL)
			tallyd_rdv_no_capacity(d, j->joiners[r], j);
		if (j->rejoiners[r] != NULL)
			tallyd_rdv_no_capacity(d, j->rejoiners[r], j);
	}
	j->program_pending = false;
	tallyd_state_save(d);
}

/* Moves j off its dead dataplanes onto the plan's shards. */
static void
remap(struct tallyd *d, struct tallyd_job *j, unsigned int *to,
	unsigned int n)
{
	struct tallyd_shard sh[TALLYD_MAX_SHARDS];
	struct tallyd_shard *old;

	for (unsigned int k = 0; k < j->nshards; k++)
		if (d->dps[j->sh[k].dp].dead)
			tallyd_dpc_fold(j, &j->sh[k]); /* its counting is over */
	for (unsigned int k = 0; k < n; k++) {
		old = tallyd_job_shard(j, to[k]);
		if (old != NULL)
			sh[k] = *old;
		else
			sh[k] = (struct tallyd_shard){ .dp = to[k] };
	}
	memcpy(j->sh, sh, n * sizeof(sh[0]));
	j->nshards = n;
	d->state_dirty = true;
}

/* Ends j's epoch: a dataplane it spans is dead. */
static void
epoch_end(struct tallyd *d, struct tallyd_job *j)
{
	struct tallyd_shard *dead = dead_shard(d, j);
	unsigned int cur[TALLYD_MAX_SHARDS], to[TALLYD_MAX_SHARDS], n;
	uint32_t live = 0;

	if (dead == NULL || j->draining || tallyd_dpc_busy(j))
		return;		/* busy: the next poll tries again */
	/* A tree's parts stay: its leaves' upstream names the spine. */
	if (j->tier != 0)
		return;
	for (unsigned int i = 0; i < d->ndps; i++)
		if (!d->dps[i].dead && tallyd_dpc_up(d->dps[i].dpc))
			live |= 1u << i;
	for (unsigned int k = 0; k < j->nshards; k++)
		cur[k] = j->sh[k].dp;
	n = tallyd_epoch_plan(cur, j->nshards, live, d->ndps, to);
	if (n == 0) {
		if (strcmp(j->ew.cause, "no_capacity") != 0 || j->has_members)
			no_capacity(d, j, dead);
		return;
	}
	note_why(d, j, dead, "dataplane");
	remap(d, j, to, n);
	/* A barrier under way told its ranks the old shards. */
	for (unsigned int r = 0; r < TALLY_MAX_WORKERS; r++)
		if (j->joiners[r] != NULL)
			tallyd_rdv_fail(d, j->joiners[r], EAGAIN,
				TALLYD_JF_DP_DOWN, "job '%s': tally-dp %s died "
				"while ranks were joining; join again",
				j->name, j->ew.dataplane);
	j->program_pending = false;
	if (!j->has_members) {
		tallyd_log("job '%s' (id %u) moved off tally-dp %s (no "
			"membership yet)", j->name, j->id, j->ew.dataplane);
		return;
	}
	d->st.epochs_ended++;
	j->remap_pending = true;
	tallyd_log("job '%s' (id %u): epoch %u ends: tally-dp %s missed %s; "
		"its slots go to %u dataplane(s) under a new wire token",
		j->name, j->id, j->epoch, j->ew.dataplane, j->ew.missed, n);
	tallyd_epoch_program(d, j);
}

void
tallyd_epoch_programmed(struct tallyd *d, struct tallyd_job *j, int err)
{
	char names[TALLYD_MAX_SHARDS * (TALLYD_DP_NAME_MAX + 1) + 1] = "";

	if (err != 0) {
		tallyd_log("job '%s': its new epoch was not programmed (%s); "
			"trying again at the next poll", j->name,
			strerror(-err));
		return;		/* remap_pending: tallyd_epoch_tick() */
	}
	j->remap_pending = false;
	j->epoch = ++d->next_epoch;
	j->last_active = tallyd_wall_s();
	for (unsigned int k = 0; k < j->nshards; k++)
		snprintf(names + strlen(names), sizeof(names) - strlen(names),
			"%s%s", k > 0 ? "," : "", d->dps[j->sh[k].dp].name);
	if (tallyd_state_save(d) != 0)
		tallyd_log("job '%s': epoch %u not saved yet: %s", j->name,
			j->epoch, d->sf.error);
	tallyd_log("job '%s' (id %u): epoch %u on %s (was %u: %s)", j->name,
		j->id, j->epoch, names, j->ew.from, j->ew.cause);
	tallyd_epoch_release(d, j);
}

/* Rejoiners of j past their deadline fail with ETIMEDOUT. */
static void
rejoin_timeouts(struct tallyd *d, struct tallyd_job *j, int64_t now)
{
	for (unsigned int r = 0; r < TALLY_MAX_WORKERS; r++) {
		struct tallyd_rdv_conn *c = j->rejoiners[r];

		if (c != NULL && now >= c->deadline_ms)
			tallyd_rdv_fail(d, c, ETIMEDOUT, TALLYD_JF_TIMEOUT,
				"rank %u of job '%s' waited %u s for a new "
				"epoch", r, j->name, d->conf.join_timeout_s);
	}
}

void
tallyd_epoch_tick(struct tallyd *d, int64_t now)
{
	struct tallyd_job *j, *next;

	for (unsigned int i = 0; i < d->ndps; i++)
		liveness(d, i);
	for (j = d->jobs; j != NULL; j = next) {
		next = j->next;
		if (tallyd_state_leads(d))
			epoch_end(d, j);
		if (j->remap_pending && !j->draining)
			tallyd_epoch_program(d, j);
		rejoin_timeouts(d, j, now);
		tallyd_epoch_release(d, j);
	}
}

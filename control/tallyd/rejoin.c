/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Rejoins (docs/scale-out.md, "Epochs"): a worker whose call failed
 * joins again naming the epoch it was in ("epoch" in its join message).
 * Its rank keeps its membership's address, so no barrier is needed: the
 * rank waits until the job's epoch is past the one it named and settled
 * (programmed at every shard, each answering), then gets ready with the
 * new wire token. When every rank rejoins naming the current epoch
 * (their calls failed and no dataplane died), tallyd starts a new epoch
 * for them with the same members. A rejoin naming an epoch whose
 * membership is over, or one the job has not had, is refused. Also the
 * epoch's reason in JSON (job show, the state) and the "no capacity"
 * answer.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <sodium.h>

#include "epoch.h"

int
tallyd_epoch_rejoin_check(const struct tallyd_job *j, uint32_t e, char *why,
	size_t wlen)
{
	if (e > j->epoch) {
		snprintf(why, wlen, "job '%s' has not had epoch %u (it is at "
			"epoch %u)", j->name, e, j->epoch);
		return -EINVAL;
	}
	if (!j->has_members || e < j->formed_epoch) {
		snprintf(why, wlen, "epoch %u of job '%s' is over and its "
			"membership with it (now epoch %u): open the job anew",
			e, j->name, j->epoch);
		return -ESTALE;
	}
	return 0;
}

bool
tallyd_epoch_no_capacity(const struct tallyd *d, const struct tallyd_job *j)
{
	for (unsigned int k = 0; k < j->nshards; k++) {
		const struct tallyd_dp *dp = &d->dps[j->sh[k].dp];

		if (!dp->dead || tallyd_dpc_up(dp->dpc))
			return false;
	}
	return j->nshards > 0;
}

void
tallyd_epoch_formed(struct tallyd_job *j)
{
	j->formed_epoch = j->epoch;
	memset(&j->ew, 0, sizeof(j->ew));
	strcpy(j->ew.cause, "membership");
	j->ew.at = tallyd_wall_s();
}

void
tallyd_rdv_no_capacity(struct tallyd *d, struct tallyd_rdv_conn *c,
	const struct tallyd_job *j)
{
	struct tally_rdv_msg m = { .op = TALLY_RDV_ERROR, .err = ENOSPC };

	snprintf(m.error, sizeof(m.error), "job '%s' has no live dataplane "
		"(no capacity): every one it could use is dead", j->name);
	strcpy(m.fallback, "ring");
	d->st.join_failures[TALLYD_JF_NO_CAPACITY]++;
	tallyd_log("rendezvous %s: %s", c->peer, m.error);
	tallyd_rdv_finish(c, &m);
}

bool
tallyd_rejoin_ok(struct tallyd *d, struct tallyd_rdv_conn *c,
	struct tallyd_job *j, const struct tally_rdv_msg *m)
{
	char why[200];
	int err = tallyd_epoch_rejoin_check(j, m->epoch, why, sizeof(why));

	if (err != 0) {
		tallyd_rdv_fail(d, c, -err, TALLYD_JF_STALE_EPOCH,
			"rank %u's rejoin refused: %s", m->rank, why);
		return false;
	}
	if (j->rejoiners[m->rank] != NULL) {
		tallyd_rdv_fail(d, c, EEXIST, TALLYD_JF_DUPLICATE_RANK,
			"rank %u already rejoins job '%s'", m->rank, j->name);
		return false;
	}
	return true;
}

void
tallyd_rejoin_add(struct tallyd *d, struct tallyd_rdv_conn *c,
	struct tallyd_job *j, const struct tally_rdv_msg *m)
{
	j->rejoiners[m->rank] = c;
	c->job = j;
	c->rank = m->rank;
	c->rejoin = m->epoch;
	c->st = RC_MEMBER;
	tallyd_rdv_authed(d, c);
	c->deadline_ms = tallyd_now_ms() + (int64_t)d->conf.join_timeout_s *
		1000;
}

void
tallyd_rejoin_member(struct tallyd *d, struct tallyd_rdv_conn *c,
	const struct tally_rdv_msg *m)
{
	struct tallyd_job *j = c->job;
	const struct tallyd_member *was = &j->members[c->rank];

	if (!j->has_members || m->ip != was->ip || m->port != was->port ||
			m->qpn != was->qpn)
		return tallyd_rdv_fail(d, c, ESTALE, TALLYD_JF_STALE_EPOCH,
			"rank %u of job '%s' rejoins from another data address "
			"than its membership's: open the job anew", c->rank,
			j->name);
	c->member = *was;
	c->st = RC_WAIT;
	tallyd_epoch_release(d, j);
}

void
tallyd_rejoin_fail_all(struct tallyd *d, struct tallyd_job *j, int err,
	enum tallyd_join_fail why, const char *msg)
{
	for (unsigned int r = 0; r < TALLY_MAX_WORKERS; r++)
		if (j->rejoiners[r] != NULL)
			tallyd_rdv_fail(d, j->rejoiners[r], err, why, "%s", msg);
}

/* Whether j's epoch is programmed at every shard and each answers. */
static bool
settled(const struct tallyd *d, const struct tallyd_job *j)
{
	if (!j->has_members || j->remap_pending || tallyd_dpc_busy(j) ||
			j->draining)
		return false;
	for (unsigned int k = 0; k < j->nshards; k++)
		if (!tallyd_dpc_up(d->dps[j->sh[k].dp].dpc) ||
				!j->sh[k].in_dp)
			return false;
	return true;
}

/* Rejoiner c (rank r) joins j's epoch: ready with its token and keys. */
static void
ready(struct tallyd *d, struct tallyd_job *j, unsigned int r)
{
	struct tally_rdv_msg m = { .op = TALLY_RDV_READY,
		.wire_token = j->wire_token, .epoch = j->epoch };
	struct tallyd_rdv_conn *c = j->rejoiners[r];

	if (j->auth) {
		m.auth = 1;
		tallyd_auth_keys(j, j->wire_token, r, &m.keys);
	}
	d->st.rejoins++;
	tallyd_log("rendezvous %s: rank %u of job '%s' rejoined: epoch %u "
		"(it named %u)", c->peer, r, j->name, j->epoch, c->rejoin);
	tallyd_rdv_finish(c, &m);
	sodium_memzero(&m.keys, sizeof(m.keys));
}

/*
 * Every rank rejoins naming j's current epoch: their calls failed with
 * no dataplane dead (loss, a pause). A new epoch with the same members
 * puts their slots back in step.
 */
static void
renew(struct tallyd *d, struct tallyd_job *j)
{
	memset(&j->ew, 0, sizeof(j->ew));
	strcpy(j->ew.cause, "rejoin");
	snprintf(j->ew.missed, sizeof(j->ew.missed), "every rank rejoined "
		"after a failed call");
	j->ew.at = tallyd_wall_s();
	j->ew.from = j->epoch;
	j->remap_pending = true;
	tallyd_log("job '%s' (id %u): every rank rejoined epoch %u; a new "
		"epoch with the same members", j->name, j->id, j->epoch);
	tallyd_epoch_program(d, j);
}

void
tallyd_epoch_release(struct tallyd *d, struct tallyd_job *j)
{
	unsigned int r, current = 0;

	if (!settled(d, j))
		return;
	for (r = 0; r < TALLY_MAX_WORKERS; r++) {
		struct tallyd_rdv_conn *c = j->rejoiners[r];

		if (c == NULL || c->st != RC_WAIT)
			continue;
		if (c->rejoin < j->epoch)
			ready(d, j, r);
		else
			current++;
	}
	if (current == j->world)
		renew(d, j);
}

json_t *
tallyd_epoch_json(const struct tallyd_job *j)
{
	const struct tallyd_epoch_why *w = &j->ew;
	json_t *o;

	if (w->cause[0] == '\0')
		return json_null();
	o = json_pack("{s:s, s:I, s:I}", "cause", w->cause, "at",
		(json_int_t)w->at, "from", (json_int_t)w->from);
	if (o != NULL && w->dataplane[0] != '\0')
		json_object_set_new(o, "dataplane", json_string(w->dataplane));
	if (o != NULL && w->missed[0] != '\0')
		json_object_set_new(o, "missed", json_string(w->missed));
	return o != NULL ? o : json_null();
}

int
tallyd_epoch_load(struct tallyd_job *j, json_t *o, char *why, size_t wlen)
{
	json_t *w = json_object_get(o, "epoch_reason");
	json_t *f = json_object_get(o, "formed_epoch");
	const char *cause = NULL, *dp = NULL, *missed = NULL;
	json_int_t at = 0, from = 0;

	j->formed_epoch = j->epoch;	/* a state from before epochs */
	memset(&j->ew, 0, sizeof(j->ew));
	if (f != NULL && (!json_is_integer(f) || json_integer_value(f) < 0 ||
			json_integer_value(f) > j->epoch)) {
		snprintf(why, wlen, "job '%s': bad formed_epoch", j->name);
		return -EINVAL;
	}
	if (f != NULL)
		j->formed_epoch = (uint32_t)json_integer_value(f);
	if (w == NULL || json_is_null(w))
		return 0;
	if (json_unpack(w, "{s:s, s:I, s:I, s?s, s?s}", "cause", &cause,
			"at", &at, "from", &from, "dataplane", &dp, "missed",
			&missed) != 0 || strlen(cause) >= sizeof(j->ew.cause) ||
			from < 0 || from > UINT32_MAX ||
			(dp != NULL && strlen(dp) >= sizeof(j->ew.dataplane)) ||
			(missed != NULL &&
			 strlen(missed) >= sizeof(j->ew.missed))) {
		snprintf(why, wlen, "job '%s': bad epoch_reason", j->name);
		return -EINVAL;
	}
	strcpy(j->ew.cause, cause);
	snprintf(j->ew.dataplane, sizeof(j->ew.dataplane), "%s",
		dp != NULL ? dp : "");
	snprintf(j->ew.missed, sizeof(j->ew.missed), "%s",
		missed != NULL ? missed : "");
	j->ew.at = at;
	j->ew.from = (uint32_t)from;
	return 0;
}

/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The rendezvous (docs/control.md, "Rendezvous protocol"): workers join a
 * job with its token, learn the dataplane's parameters, tell their UDP
 * source address, and wait at the join barrier until every rank of the
 * world has done the same. Then tallyd programs the membership into
 * tally-dp with a fresh wire token and releases them all at once.
 *
 * This file is the protocol: the messages, the checks on them, the
 * barrier and its deadline. rdv_conn.c owns the connections (TLS,
 * framing, caps, handshake deadlines) and calls tallyd_rdv_message()
 * with each message.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "addrmap.h"
#include "rdv.h"
#include "cluster.h"
#include "epoch.h"

/* What any caller without a job's token learns, whatever was wrong. */
#define NOT_AUTHORIZED	"no job with that name and token"

void
tallyd_rdv_left(struct tallyd_rdv_conn *c)
{
	if (c->job != NULL && c->job->joiners[c->rank] == c) {
		c->job->joiners[c->rank] = NULL;
		c->job->njoined--;
	}
	if (c->job != NULL && c->job->rejoiners[c->rank] == c)
		c->job->rejoiners[c->rank] = NULL;
	c->job = NULL;
}

void
tallyd_rdv_fail(struct tallyd *d, struct tallyd_rdv_conn *c, int err,
	enum tallyd_join_fail why, const char *fmt, ...)
{
	struct tally_rdv_msg m = { .op = TALLY_RDV_ERROR, .err = err };
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(m.error, sizeof(m.error), fmt, ap);
	va_end(ap);
	d->st.join_failures[why]++;
	if (c->token_ok)
		tallyd_log("rendezvous %s: %s", c->peer, m.error);
	else
		tallyd_rdv_note(d, "rendezvous %s: %s", c->peer, m.error);
	tallyd_rdv_finish(c, &m);
}

void
tallyd_rdv_fail_job(struct tallyd *d, struct tallyd_job *j, int err,
	enum tallyd_join_fail why, const char *fmt, ...)
{
	struct tally_rdv_msg m = { .op = TALLY_RDV_ERROR, .err = err };
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(m.error, sizeof(m.error), fmt, ap);
	va_end(ap);
	for (unsigned int r = 0; r < TALLY_MAX_WORKERS; r++) {
		if (j->joiners[r] == NULL)
			continue;
		d->st.join_failures[why]++;
		tallyd_rdv_finish(j->joiners[r], &m);
	}
	if (m.error[0] != '\0')
		tallyd_log("%s", m.error);
}

/* The last message of a connection (rdv_conn.c does the work). */
static void
conn_finish(struct tallyd_rdv_conn *c, const struct tally_rdv_msg *m)
{
	tallyd_rdv_finish(c, m);
}

static void barrier_try(struct tallyd *d, struct tallyd_job *j);

/*
 * Every rank of j is at the barrier: program the membership into tally-dp
 * with a fresh wire token (dpc_ops.c, asynchronous). The ranks are
 * released by tallyd_rdv_programmed() when tally-dp has taken it. While
 * it cannot (tally-dp is down, or a request about j is outstanding), the
 * ranks keep waiting: tallyd_rdv_retry() tries again after each poll and
 * after j's outstanding request, until the job's join deadline.
 */
static void
barrier_done(struct tallyd *d, struct tallyd_job *j)
{
	struct tallyd_member m[TALLY_MAX_WORKERS];
	uint64_t token;
	unsigned int r;

	if (tallyd_rdv_ring_barrier(d, j))
		return tallyd_rdv_ring_release(d, j);
	if (tallyd_dpc_busy(j)) {
		j->program_pending = true;
		return;
	}
	/* A tree's leaf: the spine is added again first (tree.c). */
	if (j->tier == TALLYD_TIER_LEAF && !tallyd_tree_barrier_ready(d, j))
		return;
	for (r = 0; r < j->world; r++)
		m[r] = j->joiners[r]->member;
	randombytes_buf(&token, sizeof(token));
	if (tallyd_dpc_program(d, j, m, token) != 0)
		j->program_pending = true;
}

/* Whether every rank of j waits at the barrier with j's members. */
static bool
barrier_holds(const struct tallyd_job *j)
{
	for (unsigned int r = 0; r < j->world; r++) {
		const struct tallyd_rdv_conn *c = j->joiners[r];

		if (c == NULL || c->st != RC_WAIT ||
				c->member.ip != j->members[r].ip ||
				c->member.port != j->members[r].port ||
				c->member.qpn != j->members[r].qpn)
			return false;
	}
	return true;
}

void
tallyd_rdv_programmed(struct tallyd *d, struct tallyd_job *j, int err)
{
	struct tally_rdv_msg m = { .op = TALLY_RDV_READY };
	unsigned int r;

	if (err != 0) {
		if (!j->program_pending && j->njoined > 0)
			tallyd_log("job '%s': all %u ranks joined; waiting for "
				"tally-dp to take the membership (%s)", j->name,
				j->world, strerror(-err));
		j->program_pending = j->njoined > 0;
		return;
	}
	j->program_pending = false;
	if (j->draining)
		return;
	if (!barrier_holds(j)) {
		/* A rank left or came back from elsewhere meanwhile. */
		barrier_try(d, j);
		return;
	}
	j->epoch = ++d->next_epoch;
	tallyd_epoch_formed(j);
	j->last_active = tallyd_wall_s();
	d->st.joins += j->world;
	d->st.memberships++;
	/* On disk before any rank may count under it. */
	if (tallyd_state_save(d) != 0 && d->cl != NULL)
		/* etcd refused it (another tallyd wrote j): join again. */
		return tallyd_rdv_fail_job(d, j, EAGAIN, TALLYD_JF_DP_DOWN,
			"job '%s': membership not saved: %s", j->name,
			d->sf.error);
	m.wire_token = j->wire_token;
	m.epoch = j->epoch;
	for (r = 0; r < j->world; r++) {
		/* An authenticated job: each rank gets its own keys. */
		if (j->auth) {
			m.auth = 1;
			tallyd_auth_keys(j, j->wire_token, r, &m.keys);
		}
		conn_finish(j->joiners[r], &m);
	}
	sodium_memzero(&m.keys, sizeof(m.keys));
	j->njoined = 0;
	tallyd_log("job '%s' (id %u): membership %u of %u ranks formed",
		j->name, j->id, j->epoch, j->world);
}

/* Completes j's barrier if every rank is there. */
static void
barrier_try(struct tallyd *d, struct tallyd_job *j)
{
	unsigned int r;

	for (r = 0; r < j->world; r++)
		if (j->joiners[r] == NULL || j->joiners[r]->st != RC_WAIT)
			return;
	barrier_done(d, j);
}

void
tallyd_rdv_retry(struct tallyd *d)
{
	struct tallyd_job *j;

	for (j = d->jobs; j != NULL; j = j->next)
		if (j->program_pending && !j->draining)
			barrier_try(d, j);
}

/*
 * The token check. Whether the job does not exist or the token is not its
 * token, the caller gets the same errno and sentence (and about the same
 * time: an unknown job's token is hashed too), so that no one without a
 * token can list job names; the log and the counters tell them apart.
 * Returns j, or NULL once c has failed.
 */
static struct tallyd_job *
authorize(struct tallyd *d, struct tallyd_rdv_conn *c,
	const struct tally_rdv_msg *m)
{
	static const struct tallyd_job decoy;
	struct tallyd_job *j = tallyd_job_find(d, m->job);
	int ok;

	if (j == NULL && d->cl != NULL)	/* etcd: maybe just created */
		j = tallyd_cluster_fetch(d, m->job);
	ok = tallyd_job_token_ok(j != NULL ? j : &decoy, m->token);

	if (j != NULL && ok) {
		c->token_ok = true;
		return j;
	}
	d->st.join_failures[j == NULL ? TALLYD_JF_UNKNOWN_JOB :
		TALLYD_JF_BAD_TOKEN]++;
	tallyd_rdv_note(d, "rendezvous %s: join of '%s' refused: %s", c->peer,
		m->job, j == NULL ? "no such job" : "wrong token");
	tallyd_rdv_finish(c, &(struct tally_rdv_msg){ .op = TALLY_RDV_ERROR,
		.err = EACCES, .error = NOT_AUTHORIZED });
	return NULL;
}

/*
 * PARAMS' dataplane: the first shard's address and ports, and for a
 * sharded job every shard's ("shards", in slot order). Returns -1, or
 * the index of a dataplane whose address is not known yet.
 */
static int
params_shards(struct tallyd *d, const struct tallyd_job *j,
	struct tally_rdv_msg *p)
{
	for (unsigned int k = 0; k < j->nshards; k++) {
		struct tally_rdv_shard *s = &p->shards[k];

		if (tallyd_dpc_endpoint(d, j->sh[k].dp, &s->ip, &s->port,
				&s->nports) != 0)
			return (int)j->sh[k].dp;
	}
	p->dp_ip = p->shards[0].ip;
	p->dp_port = p->shards[0].port;
	p->dp_nports = p->shards[0].nports;
	p->nshards = j->nshards > 1 ? (uint16_t)j->nshards : 0;
	return -1;
}

/*
 * A join of a two-tier tree (its spine s, by the tree's name): the
 * member's leaf (contiguous blocks of the total ranks) and, in *lm, the
 * join as that leaf sees it (the rank and world in the leaf). Returns
 * the leaf, or NULL once c has failed.
 */
static struct tallyd_job *
tree_place(struct tallyd *d, struct tallyd_rdv_conn *c, struct tallyd_job *s,
	const struct tally_rdv_msg *m, struct tally_rdv_msg *lm)
{
	struct tallyd_job *l;
	unsigned int lr = 0;

	if (m->world != s->tree_world) {
		tallyd_rdv_fail(d, c, EINVAL, TALLYD_JF_WORLD_MISMATCH, "world "
			"size %u does not match job '%s' (a two-tier tree of "
			"%u ranks)", m->world, m->job, s->tree_world);
		return NULL;
	}
	if (m->rank >= s->tree_world) {
		tallyd_rdv_fail(d, c, ERANGE, TALLYD_JF_BAD_RANK, "rank %u is "
			"outside 0..%u of job '%s'", m->rank,
			s->tree_world - 1, m->job);
		return NULL;
	}
	if (m->ring_want || m->epoch != 0) {
		/* libtally answers ESTALE by joining anew. */
		tallyd_rdv_fail(d, c, m->epoch != 0 ? ESTALE : EOPNOTSUPP,
			m->epoch != 0 ? TALLYD_JF_STALE_EPOCH :
			TALLYD_JF_MALFORMED, "job '%s' is a two-tier tree: %s",
			m->job, m->epoch != 0 ? "no rejoins, open the job anew" :
			"it has no ring fallback");
		return NULL;
	}
	if ((l = tallyd_tree_leaf_of(d, s, m->rank, &lr)) == NULL) {
		tallyd_rdv_fail(d, c, ENOENT, TALLYD_JF_UNKNOWN_JOB, "job '%s' "
			"has no leaf for rank %u", m->job, m->rank);
		return NULL;
	}
	*lm = *m;
	lm->rank = lr;
	lm->world = l->world;
	lm->ring_addr = (struct tally_rdv_addr){ 0 };
	return l;
}

static void
on_join(struct tallyd *d, struct tallyd_rdv_conn *c,
	const struct tally_rdv_msg *m)
{
	struct tally_rdv_msg p = { .op = TALLY_RDV_PARAMS }, lm;
	struct tallyd_job *j = authorize(d, c, m);
	char why[256];
	int err;

	if (j == NULL)
		return;
	if (j->tier == TALLYD_TIER_SPINE) {
		p.scale_world = j->tree_world;
		if ((j = tree_place(d, c, j, m, &lm)) == NULL)
			return;
		m = &lm;
		p.tier_rank = (uint16_t)m->rank;
		p.tier_world = j->world;
	}
	if (j->draining)
		return tallyd_rdv_fail(d, c, ECANCELED, TALLYD_JF_DRAINING,
			"job '%s' is being deleted", m->job);
	if ((err = tallyd_limits_check(d, j, false, why, sizeof(why))) != 0)
		return tallyd_rdv_fail(d, c, -err, TALLYD_JF_LIMITS, "%s", why);
	if (m->world != j->world)
		return tallyd_rdv_fail(d, c, EINVAL, TALLYD_JF_WORLD_MISMATCH,
			"world size %u does not match job '%s' (world %u)",
			m->world, m->job, j->world);
	if (m->rank >= j->world)
		return tallyd_rdv_fail(d, c, ERANGE, TALLYD_JF_BAD_RANK,
			"rank %u is outside 0..%u of job '%s'", m->rank,
			j->world - 1, m->job);
	/* The ring fallback first: it serves a job with no dataplane. */
	c->ring = m->ring_addr;
	c->ring_want = m->ring_want;
	if (!tallyd_rdv_ring_addr_ok(d, c, j, m->rank))
		return;
	c->ring_fb = tallyd_rdv_ring_join(d, j, c);
	/* Without capacity only a worker that offered a ring is served. */
	if (tallyd_epoch_no_capacity(d, j) && !c->ring_fb && j->tier == 0)
		return tallyd_rdv_no_capacity(d, c, j);
	if (m->epoch != 0 && !c->ring_fb && !tallyd_rejoin_ok(d, c, j, m))
		return;
	if (j->joiners[m->rank] != NULL)
		return tallyd_rdv_fail(d, c, EEXIST, TALLYD_JF_DUPLICATE_RANK,
			"rank %u already joined job '%s'", m->rank, m->job);
	p.ring_fallback = c->ring_fb;
	if ((err = params_shards(d, j, &p)) >= 0 && p.ring_fallback)
		p.dp_ip = p.dp_port = p.dp_nports = p.nshards = 0;
	else if (err >= 0)
		return tallyd_rdv_fail(d, c, EHOSTDOWN, TALLYD_JF_DP_DOWN,
			"the dataplane (tally-dp%s) is not reachable, and its "
			"address is not known yet", tallyd_dp_label(d, err));
	p.job_id = j->id;
	p.window = j->window;
	p.max_elems = j->max_elems;
	p.narrow = j->narrow;
	p.auth = j->auth;	/* its keys come with "ready" */
	p.group_ip = j->group_ip;
	p.group_port = j->group_port;
	strcpy(p.codec, j->codec);
	if (j->rdma && !p.ring_fallback &&
			tallyd_dpc_qpns(d, j->sh[0].dp, p.qpns, &p.nqpns) != 0)
		return tallyd_rdv_fail(d, c, EPROTONOSUPPORT,
			TALLYD_JF_DP_DOWN, "job '%s' runs over RDMA, and the "
			"dataplane (tally-dp) offers no RoCEv2 QPNs", j->name);
	p.rdma = j->rdma && !p.ring_fallback;
	p.qkey = j->qkey;
	if (tallyd_rdv_send(c, &p) != 0) {
		tallyd_rdv_finish(c, NULL);
		return;
	}
	if (m->epoch != 0)	/* a rejoin: no barrier (rejoin.c) */
		return tallyd_rejoin_add(d, c, j, m);
	if (j->njoined == 0)
		j->form_deadline_ms = tallyd_now_ms() +
			(int64_t)d->conf.join_timeout_s * 1000;
	j->joiners[m->rank] = c;
	j->njoined++;
	c->job = j;
	c->rank = m->rank;
	c->st = RC_MEMBER;
	tallyd_rdv_authed(d, c);
	c->deadline_ms = j->form_deadline_ms;
}

/*
 * The data address a member claims must be the address its rendezvous
 * connection comes from, or one the operator's map lists for that
 * address: otherwise anyone with the token could have tally-dp accept
 * another host's packets, or send results to it. Fails c and returns
 * false when it is neither.
 */
static bool
address_ok(struct tallyd *d, struct tallyd_rdv_conn *c, uint32_t ip)
{
	struct in_addr a = { .s_addr = htonl(ip) }, p = {
		.s_addr = htonl(c->src) };
	char claimed[INET_ADDRSTRLEN], peer[INET_ADDRSTRLEN];

	if (ip == c->src || tallyd_addrmap_allows(d->rdv->map, c->src, ip))
		return true;
	inet_ntop(AF_INET, &a, claimed, sizeof(claimed));
	inet_ntop(AF_INET, &p, peer, sizeof(peer));
	tallyd_rdv_fail(d, c, EADDRNOTAVAIL, TALLYD_JF_ADDRESS, "rank %u of "
		"job '%s' claims the data address %s but joins from %s%s",
		c->rank, c->job->name, claimed, peer, d->rdv->map != NULL ?
		", and rendezvous_data_map does not map one to the other" :
		" (no rendezvous_data_map)");
	return false;
}

static void
on_member(struct tallyd *d, struct tallyd_rdv_conn *c,
	const struct tally_rdv_msg *m)
{
	struct tallyd_job *j = c->job;
	unsigned int r;

	if (!address_ok(d, c, m->ip))
		return;
	if ((m->qpn != 0) != (j->rdma && !c->ring_fb))
		return tallyd_rdv_fail(d, c, EPROTO, TALLYD_JF_MALFORMED,
			"rank %u of job '%s' (transport %s) sent a member %s "
			"a QPN", c->rank, j->name, j->rdma ? "rdma" : "udp",
			m->qpn != 0 ? "with" : "without");
	for (r = 0; r < j->world; r++) {
		struct tallyd_rdv_conn *o = j->joiners[r];

		if (o != NULL && o != c && o->st == RC_WAIT &&
				o->member.ip == m->ip &&
				o->member.port == m->port &&
				o->member.qpn == m->qpn)
			return tallyd_rdv_fail(d, c, EADDRINUSE,
				TALLYD_JF_DUPLICATE_RANK, "rank %u of job "
				"'%s' sends from the same address as rank %u",
				c->rank, j->name, r);
	}
	c->member.ip = m->ip;
	c->member.port = m->port;
	c->member.qpn = m->qpn;
	c->st = RC_WAIT;
	barrier_try(d, j);
}

void
tallyd_rdv_message(struct tallyd *d, struct tallyd_rdv_conn *c,
	const uint8_t *body, size_t len)
{
	struct tally_rdv_msg m;
	char why[160];

	if (tally_rdv_parse(body, len, &m, why, sizeof(why)) != 0)
		return tallyd_rdv_fail(d, c, EPROTO, TALLYD_JF_MALFORMED,
			"malformed message: %s", why);
	if (c->st == RC_JOIN && m.op == TALLY_RDV_JOIN)
		return on_join(d, c, &m);
	/* A rejoin's member (rejoin.c): its own address, no barrier. */
	if (c->st == RC_MEMBER && c->rejoin != 0 &&
			m.op == TALLY_RDV_MEMBER) {
		if (address_ok(d, c, m.ip))
			tallyd_rejoin_member(d, c, &m);
		return;
	}
	if (c->st == RC_MEMBER && m.op == TALLY_RDV_MEMBER)
		return on_member(d, c, &m);
	tallyd_rdv_fail(d, c, EPROTO, TALLYD_JF_MALFORMED,
		"unexpected message at this point of the rendezvous");
}

int64_t
tallyd_rdv_timers(struct tallyd *d, int64_t now)
{
	struct tallyd_job *j;
	int64_t wait = 1000;

	for (j = d->jobs; j != NULL; j = j->next) {
		char missing[TALLY_MAX_WORKERS * 3 + 1] = "";
		unsigned int r, nmissing;

		if (j->njoined == 0)
			continue;
		if (now < j->form_deadline_ms) {
			if (j->form_deadline_ms - now < wait)
				wait = j->form_deadline_ms - now;
			continue;
		}
		nmissing = 0;
		for (r = 0; r < j->world; r++)
			if (j->joiners[r] == NULL ||
					j->joiners[r]->st != RC_WAIT) {
				snprintf(missing + strlen(missing),
					sizeof(missing) - strlen(missing),
					" %u", r);
				nmissing++;
			}
		if (nmissing == 0)
			tallyd_rdv_fail_job(d, j, EHOSTDOWN, TALLYD_JF_DP_DOWN,
				"all %u ranks joined job '%s' but tally-dp "
				"did not take the membership in %u s",
				j->world, j->name, d->conf.join_timeout_s);
		else
			tallyd_rdv_fail_job(d, j, ETIMEDOUT, TALLYD_JF_TIMEOUT,
				"%u of %u ranks joined job '%s' in %u s "
				"(missing:%s)", j->world - nmissing, j->world,
				j->name, d->conf.join_timeout_s, missing);
		j->program_pending = false;
	}
	return tallyd_rdv_conn_timers(d, now, wait);
}

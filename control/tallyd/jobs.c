/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Jobs: creation (id and token), lookup, deletion (drained first), and
 * their JSON for tallyctl and the metrics. The token is 32 random bytes;
 * tallyd keeps only their BLAKE2b hash.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <arpa/inet.h>

#include <sodium.h>

#include "tallyd.h"
#include "epoch.h"

const char *const tallyd_ctr_names[] = {
	"contributions", "elements", "bytes_in", "rounds", "results",
	"bytes_out", "resent", "nacks", "drops", "duplicates",
};

_Static_assert(sizeof(tallyd_ctr_names) / sizeof(tallyd_ctr_names[0]) ==
	TALLYD_NCTR, "a name per counter");

const char *const tallyd_jf_names[TALLYD_JF_MAX_] = {
	[TALLYD_JF_BAD_TOKEN] = "bad_token",
	[TALLYD_JF_UNKNOWN_JOB] = "unknown_job",
	[TALLYD_JF_DUPLICATE_RANK] = "duplicate_rank",
	[TALLYD_JF_WORLD_MISMATCH] = "world_mismatch",
	[TALLYD_JF_BAD_RANK] = "bad_rank",
	[TALLYD_JF_TIMEOUT] = "timeout",
	[TALLYD_JF_MALFORMED] = "malformed",
	[TALLYD_JF_DRAINING] = "draining",
	[TALLYD_JF_DP_DOWN] = "dp_down",
	[TALLYD_JF_LIMITS] = "limits",
	[TALLYD_JF_ADDRESS] = "address_mismatch",
	[TALLYD_JF_STALE_EPOCH] = "stale_epoch",
	[TALLYD_JF_NO_CAPACITY] = "no_capacity",
};

int64_t
tallyd_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t
tallyd_wall_s(void)
{
	return (int64_t)time(NULL);
}

struct tallyd_job *
tallyd_job_find(struct tallyd *d, const char *name)
{
	struct tallyd_job *j;

	for (j = d->jobs; j != NULL; j = j->next)
		if (strcmp(j->name, name) == 0)
			return j;
	return NULL;
}

struct tallyd_job *
tallyd_job_find_id(struct tallyd *d, uint16_t id)
{
	struct tallyd_job *j;

	for (j = d->jobs; j != NULL; j = j->next)
		if (j->id == id)
			return j;
	return NULL;
}

struct tallyd_job *
tallyd_job_create(struct tallyd *d, const struct tallyd_job *tmpl,
	char token_hex[TALLY_RDV_TOKEN_HEX + 1])
{
	uint8_t token[32];
	struct tallyd_job *j;
	uint32_t id;

	if (tallyd_job_find(d, tmpl->name) != NULL) {
		errno = EEXIST;
		return NULL;
	}
	if (d->njobs >= d->conf.max_jobs) {
		errno = ENOSPC;
		return NULL;
	}
	for (id = 1; id <= UINT16_MAX; id++)
		if (tallyd_job_find_id(d, (uint16_t)id) == NULL)
			break;
	if (id > UINT16_MAX) {
		errno = ENOSPC;
		return NULL;
	}
	j = calloc(1, sizeof(*j));
	if (j == NULL)
		return NULL;
	memcpy(j->name, tmpl->name, sizeof(j->name));
	j->id = (uint16_t)id;
	j->world = tmpl->world;
	j->window = tmpl->window;
	j->max_elems = tmpl->max_elems;
	j->narrow = tmpl->narrow;
	j->rdma = tmpl->rdma;
	if (j->rdma)	/* a Q_Key of its own; high bit clear (not controlled) */
		j->qkey = randombytes_uniform(0x7fffffffu) + 1;
	j->auth = tmpl->auth;
	if (j->auth)
		crypto_kdf_keygen(j->auth_secret);
	j->group_ip = tmpl->group_ip;
	j->group_port = tmpl->group_port;
	j->idle_timeout_s = tmpl->idle_timeout_s;
	/* Its dataplanes (none named: the first). */
	j->nshards = tmpl->nshards > 0 ? tmpl->nshards : 1;
	for (unsigned int k = 0; k < j->nshards; k++)
		j->sh[k].dp = tmpl->nshards > 0 ? tmpl->sh[k].dp : 0;
	snprintf(j->codec, sizeof(j->codec), "%s", tmpl->codec[0] != '\0' ?
		tmpl->codec : "fixp");
	j->created = j->last_active = tallyd_wall_s();
	randombytes_buf(token, sizeof(token));
	crypto_generichash(j->token_hash, sizeof(j->token_hash), token,
		sizeof(token), NULL, 0);
	sodium_bin2hex(token_hex, TALLY_RDV_TOKEN_HEX + 1, token,
		sizeof(token));
	sodium_memzero(token, sizeof(token));
	tallyd_job_link(d, j);
	return j;
}

void
tallyd_job_link(struct tallyd *d, struct tallyd_job *j)
{
	struct tallyd_job **pp;

	/* In id order: listings page through it by id. */
	for (pp = &d->jobs; *pp != NULL && (*pp)->id < j->id;
			pp = &(*pp)->next)
		;
	j->next = *pp;
	*pp = j;
	d->njobs++;
}

void
tallyd_job_free(struct tallyd *d, struct tallyd_job *j)
{
	struct tallyd_job **pp;

	for (pp = &d->jobs; *pp != NULL; pp = &(*pp)->next)
		if (*pp == j) {
			*pp = j->next;
			d->njobs--;
			break;
		}
	tallyd_dpc_forget(d, j);
	sodium_memzero(j->token_hash, sizeof(j->token_hash));
	free(j);
}

int
tallyd_job_token_ok(const struct tallyd_job *j, const char *hex)
{
	uint8_t token[32], hash[32];
	size_t n = 0;
	int ok;

	if (strlen(hex) != TALLY_RDV_TOKEN_HEX ||
			sodium_hex2bin(token, sizeof(token), hex,
				TALLY_RDV_TOKEN_HEX, NULL, &n, NULL) != 0 ||
			n != sizeof(token))
		return 0;
	crypto_generichash(hash, sizeof(hash), token, sizeof(token), NULL, 0);
	ok = sodium_memcmp(hash, j->token_hash, sizeof(hash)) == 0;
	sodium_memzero(token, sizeof(token));
	return ok;
}

enum tallyd_job_state
tallyd_job_state(const struct tallyd_job *j)
{
	if (j->draining)
		return TALLYD_DRAINING;
	if (j->njoined > 0)
		return TALLYD_FORMING;
	return j->has_members ? TALLYD_READY : TALLYD_WAITING;
}

const char *
tallyd_job_state_name(enum tallyd_job_state s)
{
	static const char *const names[] = {
		[TALLYD_WAITING] = "waiting",
		[TALLYD_FORMING] = "forming",
		[TALLYD_READY] = "ready",
		[TALLYD_DRAINING] = "draining",
	};

	return names[s];
}

void
tallyd_job_counters(const struct tallyd_job *j, struct tallyd_ctr *c)
{
	const uint64_t *b = (const uint64_t *)(const void *)&j->base;
	uint64_t *o = (uint64_t *)(void *)c;

	for (size_t i = 0; i < TALLYD_NCTR; i++)
		o[i] = b[i];
	for (unsigned int k = 0; k < j->nshards; k++) {
		const uint64_t *l = (const uint64_t *)(const void *)
			&j->sh[k].last;

		for (size_t i = 0; i < TALLYD_NCTR; i++)
			o[i] += l[i];
	}
}

static json_t *
ip_json(uint32_t ip)
{
	struct in_addr a = { .s_addr = htonl(ip) };
	char s[INET_ADDRSTRLEN];

	inet_ntop(AF_INET, &a, s, sizeof(s));
	return json_string(s);
}

json_t *
tallyd_job_json(const struct tallyd_job *j, bool with_members)
{
	enum tallyd_job_state s = tallyd_job_state(j);
	struct tallyd_ctr c;
	const uint64_t *cv = (const uint64_t *)(const void *)&c;
	json_t *o, *ctr = json_object();

	tallyd_job_counters(j, &c);
	for (size_t i = 0; i < TALLYD_NCTR; i++)
		json_object_set_new(ctr, tallyd_ctr_names[i],
			json_integer((json_int_t)cv[i]));
	o = json_pack("{s:s, s:i, s:i, s:i, s:i, s:b, s:I, s:s, s:i, s:I, "
		"s:I, s:I, s:o}",
		"name", j->name, "id", j->id, "world", j->world,
		"window", j->window, "max_elems", j->max_elems,
		"narrow", j->narrow, "idle_timeout_s",
		(json_int_t)j->idle_timeout_s, "state",
		tallyd_job_state_name(s), "joined", s == TALLYD_FORMING ?
		(int)j->njoined : j->has_members ? j->world : 0,
		"epoch", (json_int_t)j->epoch, "created",
		(json_int_t)j->created, "last_active",
		(json_int_t)j->last_active, "counters", ctr);
	if (o == NULL)
		return NULL;
	json_object_set_new(o, "codec", json_string(j->codec));
	json_object_set_new(o, "epoch_reason", tallyd_epoch_json(j));
	json_object_set_new(o, "auth", json_boolean(j->auth));
	json_object_set_new(o, "transport", json_string(j->rdma ? "rdma" :
		"udp"));
	if (j->tier != 0)
		json_object_set_new(o, "tier", json_string(j->tier ==
			TALLYD_TIER_SPINE ? "spine" : "leaf"));
	if (j->group_ip != 0) {
		struct in_addr a = { .s_addr = htonl(j->group_ip) };
		char ip[INET_ADDRSTRLEN], g[32];

		inet_ntop(AF_INET, &a, ip, sizeof(ip));
		snprintf(g, sizeof(g), "%s:%u", ip, j->group_port);
		json_object_set_new(o, "group", json_string(g));
	}
	if (with_members) {
		json_t *m = json_array();

		for (unsigned int r = 0; j->has_members && r < j->world; r++) {
			json_t *e = json_pack("{s:i, s:o, s:i}", "rank", r,
				"ip", ip_json(j->members[r].ip), "port",
				j->members[r].port);

			if (e != NULL && j->members[r].qpn != 0)
				json_object_set_new(e, "qpn",
					json_integer(j->members[r].qpn));
			json_array_append_new(m, e);
		}
		json_object_set_new(o, "members", m);
	}
	return o;
}

/* The rendezvous' connection counters, flat keys "rdv_*" of stats. */
static void
rdv_stats(const struct tallyd *d, json_t *o)
{
	const struct tallyd_stats *s = &d->st;

	json_object_set_new(o, "rdv_connections",
		json_integer(tallyd_rdv_count(d)));
	json_object_set_new(o, "rdv_max_connections",
		json_integer(tallyd_rdv_cap(d)));
	json_object_set_new(o, "rdv_refused",
		json_integer((json_int_t)s->rdv_refused));
	json_object_set_new(o, "rdv_evicted_per_source",
		json_integer((json_int_t)s->rdv_evicted_per_source));
	json_object_set_new(o, "rdv_evicted_full",
		json_integer((json_int_t)s->rdv_evicted_full));
	json_object_set_new(o, "rdv_evicted_fds",
		json_integer((json_int_t)s->rdv_evicted_fds));
	json_object_set_new(o, "rdv_fd_backoffs",
		json_integer((json_int_t)s->rdv_fd_backoffs));
	json_object_set_new(o, "rdv_handshake_timeouts",
		json_integer((json_int_t)s->rdv_handshake_timeouts));
	json_object_set_new(o, "rdv_tls_failures",
		json_integer((json_int_t)s->rdv_tls_failures));
}

json_t *
tallyd_stats_json(const struct tallyd *d)
{
	json_t *jf = json_object(), *o;

	for (int i = 0; i < TALLYD_JF_MAX_; i++)
		json_object_set_new(jf, tallyd_jf_names[i], json_integer(
			(json_int_t)d->st.join_failures[i]));
	o = json_pack("{s:I, s:i, s:I, s:I, s:o, s:I, s:I, s:b, s:I, s:I}",
		"uptime_s", (json_int_t)(tallyd_wall_s() - d->started),
		"jobs", d->njobs, "joins", (json_int_t)d->st.joins,
		"memberships", (json_int_t)d->st.memberships,
		"join_failures", jf,
		"ctl_requests", (json_int_t)d->st.ctl_requests,
		"ctl_errors", (json_int_t)d->st.ctl_errors,
		"dp_up", tallyd_dps_up(d),
		"dp_reprograms", (json_int_t)d->st.dp_reprograms,
		"dp_errors", (json_int_t)d->st.dp_errors);
	if (o == NULL)
		return NULL;
	json_object_set_new(o, "dp_timeouts",
		json_integer((json_int_t)d->st.dp_timeouts));
	json_object_set_new(o, "ring_memberships",
		json_integer((json_int_t)d->st.ring_memberships));
	json_object_set_new(o, "dp_mismatches",
		json_integer((json_int_t)d->st.dp_mismatches));
	json_object_set_new(o, "dp_stale_removed",
		json_integer((json_int_t)d->st.dp_stale_removed));
	json_object_set_new(o, "epochs_ended",
		json_integer((json_int_t)d->st.epochs_ended));
	json_object_set_new(o, "rejoins",
		json_integer((json_int_t)d->st.rejoins));
	rdv_stats(d, o);
	json_object_set_new(o, "ctl_send_failures",
		json_integer((json_int_t)d->st.ctl_send_failures));
	json_object_set_new(o, "ctl_fd_backoffs",
		json_integer((json_int_t)d->st.ctl_fd_backoffs));
	tallyd_state_stats(d, o);
	return o;
}

/*
 * Deletion: refuse new joins and fail the waiting ones, then wait until a
 * poll sees no traffic (in-flight rounds finished) or the drain timeout
 * passes, then remove from tally-dp and finish (the state file first:
 * tallyd_job_delete_finish()). The removal is a request
 * like any other (dpc_ops.c): its reply runs the step again. While
 * tally-dp is down nothing waits for it: the poll that reaches it again
 * removes the job there (tallyd no longer owns it).
 */
void
tallyd_job_delete_start(struct tallyd *d, struct tallyd_job *j,
	struct tallyd_ctl_client *waiter)
{
	j->draining = true;
	j->drain_waiter = waiter;
	j->drain_deadline_ms = tallyd_now_ms() + d->conf.drain_timeout_ms;
	/* The next poll must see the counters still before it counts. */
	for (unsigned int k = 0; k < j->nshards; k++)
		j->sh[k].moved = true;
	tallyd_rdv_fail_job(d, j, ECANCELED, TALLYD_JF_DRAINING,
		"job '%s' is being deleted", j->name);
	tallyd_rejoin_fail_all(d, j, ECANCELED, TALLYD_JF_DRAINING,
		"the job is being deleted");
	tallyd_job_delete_step(d, tallyd_now_ms());
}

/*
 * Whether draining j may be forgotten now (else: later, or on a reply):
 * once every shard is out of its tally-dp, or its tally-dp is down.
 */
static bool
delete_ready(struct tallyd *d, struct tallyd_job *j, int64_t now)
{
	bool late = now >= j->drain_deadline_ms, ready = true;
	unsigned int k;

	if (tallyd_dpc_busy(j))
		return false;		/* its reply steps again */
	if (j->tier == TALLYD_TIER_SPINE && tallyd_tree_leaves_left(d, j))
		return false;		/* a tree's spine goes last */
	for (k = 0; k < j->nshards; k++) {
		struct tallyd_shard *sh = &j->sh[k];

		if (!sh->in_dp || !tallyd_dpc_up(d->dps[sh->dp].dpc))
			continue;
		if (sh->moved && !late)
			return false;
		ready = false;
	}
	if (ready)
		return true;
	/* Queued: their replies step again, with the shards not in_dp. */
	for (k = 0; k < j->nshards; k++) {
		struct tallyd_shard *sh = &j->sh[k];

		if (sh->in_dp && tallyd_dpc_up(d->dps[sh->dp].dpc) &&
				tallyd_dpc_remove(d, j, sh) != 0)
			return true;
	}
	return false;
}

void
tallyd_job_delete_step(struct tallyd *d, int64_t now)
{
	struct tallyd_job *j, *next;

	for (j = d->jobs; j != NULL; j = next) {
		next = j->next;
		if (j->draining && delete_ready(d, j, now))
			tallyd_job_delete_finish(d, j);
	}
}

void
tallyd_job_delete_finish(struct tallyd *d, struct tallyd_job *j)
{
	struct tallyd_ctl_client *w = j->drain_waiter;
	struct tallyd_job *s;
	char why[600];
	int ret;

	ret = tallyd_state_save_except(d, j);
	if (ret == 0) {
		tallyd_log("job '%s' (id %u) deleted", j->name, j->id);
		if (w != NULL)
			tallyd_ctl_reply(d, w, json_pack("{s:i}", "errno", 0));
		tallyd_job_free(d, j);
		return;
	}
	/* A tree's leaf goes on draining: its spine waits for it. */
	if (j->tier == TALLYD_TIER_LEAF && (s = tallyd_tree_spine(d, j)) !=
			NULL && s->draining) {
		tallyd_log("job '%s' not deleted yet: %s; trying again",
			j->name, d->sf.error);
		return;
	}
	/* As before the delete; tallyd_dpc_poll() puts a membership back. */
	j->draining = false;
	j->drain_waiter = NULL;
	snprintf(why, sizeof(why), "job '%s' not deleted: %s", j->name,
		d->sf.error);
	tallyd_log("%s; it stays%s", why, j->has_members && !j->sh[0].in_dp ?
		", and its membership goes back into tally-dp" : "");
	if (w != NULL)
		tallyd_ctl_reply(d, w, json_pack("{s:i, s:s}", "errno", -ret,
			"error", why));
}

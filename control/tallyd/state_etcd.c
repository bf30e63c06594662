/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The jobs in etcd (cluster.h): a key per job under /tally/v1/jobs/,
 * read whole by every tallyd at each turn of its main loop and merged
 * into its jobs, and written by a txn per save that carries only what
 * changed, fenced by compares: each job key's mod_revision as this tallyd
 * last saw it, and on the leader the leader key's create_revision, so
 * that a deposed leader's write changes nothing.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "cluster.h"
#include "epoch.h"
#include "tallyd.h"

/* The key of job name into buf. */
static void
job_key(const char *name, char *buf, size_t len)
{
	snprintf(buf, len, "%s%s", TALLYD_KEY_JOBS, name);
}

static struct tallyd_kv *
kv_find(struct tallyd_cluster *cl, const char *name)
{
	struct tallyd_kv *kv;

	for (kv = cl->kvs; kv != NULL; kv = kv->next)
		if (strcmp(kv->name, name) == 0)
			return kv;
	return NULL;
}

/* Records name's key at mod_rev with value text (copied); -ENOMEM. */
static int
kv_set(struct tallyd_cluster *cl, const char *name, int64_t mod_rev,
	const char *text)
{
	struct tallyd_kv *kv = kv_find(cl, name);
	char *t = strdup(text);

	if (t == NULL)
		return -ENOMEM;
	if (kv == NULL) {
		kv = calloc(1, sizeof(*kv));
		if (kv == NULL || (kv->name = strdup(name)) == NULL) {
			free(kv);
			free(t);
			return -ENOMEM;
		}
		kv->next = cl->kvs;
		cl->kvs = kv;
	}
	free(kv->text);
	kv->text = t;
	kv->mod_rev = mod_rev;
	kv->seen = true;
	return 0;
}

static void
kv_drop(struct tallyd_cluster *cl, const char *name)
{
	struct tallyd_kv **pp, *kv;

	for (pp = &cl->kvs; (kv = *pp) != NULL; pp = &kv->next)
		if (strcmp(kv->name, name) == 0) {
			*pp = kv->next;
			free(kv->name);
			free(kv->text);
			free(kv);
			return;
		}
}

/* A range request for key (prefix: everything under it). */
static json_t *
range_req(const char *key, bool prefix)
{
	size_t n = strlen(key);
	json_t *r = json_pack("{s:o}", "key", tallyd_etcd_b64(key, n));
	char end[256];

	if (r != NULL && prefix && n < sizeof(end)) {
		memcpy(end, key, n);
		end[n - 1]++;	/* "/tally/v1/" -> "/tally/v10" */
		json_object_set_new(r, "range_end", tallyd_etcd_b64(end, n));
	}
	return r;
}

/* The text of a job: its state object, compact and sorted. */
static char *
job_text(const struct tallyd *d, const struct tallyd_job *j)
{
	json_t *o = tallyd_state_job_json(d, j);
	char *t = o != NULL ? json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS) :
		NULL;

	json_decref(o);
	return t;
}

/*
 * Takes a parsed job's values into j, keeping what only this tallyd
 * knows: the ranks at its barrier, its requests at each tally-dp (by
 * dataplane: a shard the new value still has), a deletion.
 */
static void
take_job(struct tallyd_job *j, const struct tallyd_job *n)
{
	struct tallyd_job keep = *j;

	*j = *n;
	memcpy(j->joiners, keep.joiners, sizeof(j->joiners));
	memcpy(j->rejoiners, keep.rejoiners, sizeof(j->rejoiners));
	j->remap_pending = keep.remap_pending;
	j->njoined = keep.njoined;
	j->form_deadline_ms = keep.form_deadline_ms;
	j->program_pending = keep.program_pending;
	j->spine_fresh = keep.spine_fresh;
	for (unsigned int k = 0; k < j->nshards; k++) {
		struct tallyd_shard *was = tallyd_job_shard(&keep,
			j->sh[k].dp);

		if (was == NULL)
			continue;
		j->sh[k].in_dp = was->in_dp;
		j->sh[k].moved = was->moved;
		j->sh[k].op = was->op;
		j->sh[k].opseq = was->opseq;
	}
	j->draining = keep.draining;
	j->drain_deadline_ms = keep.drain_deadline_ms;
	j->drain_waiter = keep.drain_waiter;
	j->next = keep.next;
}

/* A job gone from etcd: its waiting ranks fail; j is freed. */
static void
drop_job(struct tallyd *d, struct tallyd_job *j)
{
	tallyd_log("job '%s' (id %u) is gone from etcd: dropped", j->name,
		j->id);
	tallyd_rdv_fail_job(d, j, ENOENT, TALLYD_JF_UNKNOWN_JOB,
		"job '%s' was deleted", j->name);
	tallyd_rejoin_fail_all(d, j, ENOENT, TALLYD_JF_UNKNOWN_JOB,
		"the job was deleted");
	if (j->drain_waiter != NULL)
		tallyd_ctl_reply(d, j->drain_waiter, json_pack("{s:i}",
			"errno", 0));
	kv_drop(d->cl, j->name);
	tallyd_job_free(d, j);
}

/*
 * One job key of a range reply into d. may_free: a job whose id changed
 * is dropped and made again (else the key waits for the next sync).
 */
static void
merge_kv(struct tallyd *d, json_t *kv, bool may_free)
{
	struct tallyd_cluster *cl = d->cl;
	int64_t rev = tallyd_etcd_int(json_object_get(kv, "mod_revision"));
	size_t klen = 0, vlen = 0;
	char *key = tallyd_etcd_unb64(json_object_get(kv, "key"), &klen);
	char *val = tallyd_etcd_unb64(json_object_get(kv, "value"), &vlen);
	const char *name = key != NULL ? key + strlen(TALLYD_KEY_JOBS) : "";
	struct tallyd_kv *known;
	struct tallyd_job n = { 0 }, *j;
	char why[200];
	json_t *o;

	if (key == NULL || val == NULL || klen <= strlen(TALLYD_KEY_JOBS) ||
			strncmp(key, TALLYD_KEY_JOBS,
				strlen(TALLYD_KEY_JOBS)) != 0)
		goto out;
	known = kv_find(cl, name);
	if (known != NULL && known->mod_rev == rev) {
		known->seen = true;
		goto out;
	}
	o = json_loads(val, JSON_REJECT_DUPLICATES, NULL);
	if (o == NULL || tallyd_state_parse_job(d, o, &n, why,
			sizeof(why)) != 0 || strcmp(n.name, name) != 0) {
		tallyd_log("etcd key %s: not a job: %s", key, o == NULL ?
			"not JSON" : why);
		json_decref(o);
		goto out;
	}
	json_decref(o);
	j = tallyd_job_find(d, name);
	if (!may_free && (j == NULL || j->id != n.id))
		goto out;
	if (j != NULL && j->id != n.id)
		drop_job(d, j), j = NULL;
	/* A tree's parts share an id (tree.c); others do not. */
	if (j == NULL && tallyd_tree_id_clash(d, &n) != NULL)
		drop_job(d, tallyd_tree_id_clash(d, &n));
	if (j != NULL) {
		take_job(j, &n);
	} else if ((j = malloc(sizeof(*j))) != NULL) {
		*j = n;
		tallyd_job_link(d, j);
	}
	if (n.epoch > d->next_epoch)
		d->next_epoch = n.epoch;
	if (j != NULL) {
		char *t = job_text(d, j);

		kv_set(cl, name, rev, t != NULL ? t : val);
		free(t);
	}
out:
	sodium_memzero(&n, sizeof(n));
	free(key);
	free(val);
}

/* Takes the leader key and next_epoch from a range reply's kvs. */
static void
merge_meta(struct tallyd *d, json_t *kv, int64_t *leader_rev)
{
	size_t klen = 0, vlen = 0;
	char *key = tallyd_etcd_unb64(json_object_get(kv, "key"), &klen);
	char *val = tallyd_etcd_unb64(json_object_get(kv, "value"), &vlen);

	if (key != NULL && val != NULL && strcmp(key, TALLYD_KEY_LEADER) == 0) {
		*leader_rev = tallyd_etcd_int(json_object_get(kv,
			"create_revision"));
		snprintf(d->cl->leader_val, sizeof(d->cl->leader_val), "%s",
			val);
	} else if (key != NULL && val != NULL &&
			strcmp(key, TALLYD_KEY_EPOCH) == 0) {
		unsigned long long e = strtoull(val, NULL, 10);

		if (e > d->next_epoch && e <= UINT32_MAX)
			d->next_epoch = (uint32_t)e;
		d->cl->saved_epoch = (uint32_t)e;
	} else if (key != NULL && strncmp(key, TALLYD_KEY_JOBS,
			strlen(TALLYD_KEY_JOBS)) == 0) {
		merge_kv(d, kv, true);
	}
	free(key);
	free(val);
}

int
tallyd_cluster_sync(struct tallyd *d, int64_t *leader_rev)
{
	struct tallyd_cluster *cl = d->cl;
	struct tallyd_job *j, *next;
	struct tallyd_kv *kv;
	json_t *rep = NULL, *kvs, *x;
	size_t i;
	int ret;

	ret = tallyd_etcd_post(cl->e, "/v3/kv/range",
		range_req(TALLYD_KEY_PREFIX, true), &rep);
	if (ret != 0) {
		cl->sync_failures++;
		return ret;
	}
	*leader_rev = 0;
	cl->leader_val[0] = '\0';
	for (kv = cl->kvs; kv != NULL; kv = kv->next)
		kv->seen = false;
	kvs = json_object_get(rep, "kvs");
	json_array_foreach(kvs, i, x)
		merge_meta(d, x, leader_rev);
	json_decref(rep);
	for (j = d->jobs; j != NULL; j = next) {
		next = j->next;
		kv = kv_find(cl, j->name);
		if (kv == NULL || !kv->seen)
			drop_job(d, j);
	}
	cl->synced = true;
	return 0;
}

/* A put of name's text, or a delete (text NULL), as a txn request op. */
static json_t *
op_json(const char *name, const char *text, bool meta)
{
	char key[256];

	if (meta)
		snprintf(key, sizeof(key), "%s", name);
	else
		job_key(name, key, sizeof(key));
	if (text == NULL)
		return json_pack("{s:{s:o}}", "request_delete_range", "key",
			tallyd_etcd_b64(key, strlen(key)));
	return json_pack("{s:{s:o, s:o}}", "request_put", "key",
		tallyd_etcd_b64(key, strlen(key)), "value",
		tallyd_etcd_b64(text, strlen(text)));
}

/* A compare of name's key: its mod_revision (0: the key is absent). */
static json_t *
cmp_json(const char *name, int64_t mod_rev)
{
	char key[256], rev[24];

	job_key(name, key, sizeof(key));
	snprintf(rev, sizeof(rev), "%lld", (long long)mod_rev);
	if (mod_rev == 0)
		return json_pack("{s:o, s:s, s:s, s:s}", "key",
			tallyd_etcd_b64(key, strlen(key)), "target", "CREATE",
			"result", "EQUAL", "create_revision", "0");
	return json_pack("{s:o, s:s, s:s, s:s}", "key",
		tallyd_etcd_b64(key, strlen(key)), "target", "MOD", "result",
		"EQUAL", "mod_revision", rev);
}

/* The leader fence: the leader key's create_revision is ours. */
static json_t *
fence_json(const struct tallyd_cluster *cl)
{
	char rev[24];

	snprintf(rev, sizeof(rev), "%lld", (long long)cl->leader_rev);
	return json_pack("{s:o, s:s, s:s, s:s}", "key",
		tallyd_etcd_b64(TALLYD_KEY_LEADER, strlen(TALLYD_KEY_LEADER)),
		"target", "CREATE", "result", "EQUAL", "create_revision", rev);
}

/* What one save writes: the txn's parts and the texts to remember. */
struct batch {
	json_t *cmp, *ops;
	struct { const char *name; char *text; } w[4096 + 64];
	unsigned int nw;
	bool creates;		/* creates or deletes a job */
};

/* Adds j's put to b if its text changed. */
static int
batch_job(struct tallyd *d, struct batch *b, const struct tallyd_job *j)
{
	struct tallyd_cluster *cl = d->cl;
	struct tallyd_kv *kv = kv_find(cl, j->name);
	char *t = job_text(d, j);

	if (t == NULL)
		return -ENOMEM;
	if ((kv != NULL && strcmp(kv->text, t) == 0) ||
			b->nw == sizeof(b->w) / sizeof(b->w[0])) {
		free(t);
		return 0;
	}
	b->creates |= kv == NULL;
	json_array_append_new(b->cmp, cmp_json(j->name, kv != NULL ?
		kv->mod_rev : 0));
	json_array_append_new(b->ops, op_json(j->name, t, false));
	b->w[b->nw].name = j->name;
	b->w[b->nw++].text = t;
	return 0;
}

/* Fills b: changed jobs, deleted jobs (and skip), next_epoch. */
static int
batch_fill(struct tallyd *d, struct batch *b, const struct tallyd_job *skip)
{
	struct tallyd_cluster *cl = d->cl;
	const struct tallyd_job *j;
	struct tallyd_kv *kv;
	char ep[24];
	int ret;

	for (j = d->jobs; j != NULL; j = j->next)
		if (j != skip && (ret = batch_job(d, b, j)) != 0)
			return ret;
	for (kv = cl->kvs; kv != NULL; kv = kv->next) {
		j = tallyd_job_find(d, kv->name);
		if (j != NULL && j != skip)
			continue;
		b->creates = true;
		json_array_append_new(b->cmp, cmp_json(kv->name, kv->mod_rev));
		json_array_append_new(b->ops, op_json(kv->name, NULL, false));
		if (b->nw < sizeof(b->w) / sizeof(b->w[0])) {
			b->w[b->nw].name = kv->name;
			b->w[b->nw++].text = NULL;
		}
	}
	if (json_array_size(b->ops) > 0 && d->next_epoch != cl->saved_epoch) {
		snprintf(ep, sizeof(ep), "%u", d->next_epoch);
		json_array_append_new(b->ops, op_json(TALLYD_KEY_EPOCH, ep,
			true));
	}
	return 0;
}

/* After a txn that succeeded at revision rev: remember what it wrote. */
static void
batch_done(struct tallyd *d, struct batch *b, int64_t rev)
{
	char name[TALLY_RDV_NAME_MAX + 1];

	for (unsigned int i = 0; i < b->nw; i++) {
		snprintf(name, sizeof(name), "%s", b->w[i].name);
		if (b->w[i].text != NULL)
			kv_set(d->cl, name, rev, b->w[i].text);
		else
			kv_drop(d->cl, name);
	}
	d->cl->saved_epoch = d->next_epoch;
}

/* The leader key's create_revision now (0: none) into *rev. */
static int
leader_rev_now(struct tallyd_cluster *cl, int64_t *rev)
{
	json_t *rep = NULL, *kvs;
	int ret = tallyd_etcd_post(cl->e, "/v3/kv/range",
		range_req(TALLYD_KEY_LEADER, false), &rep);

	kvs = json_object_get(rep, "kvs");
	*rev = json_array_size(kvs) == 1 ? tallyd_etcd_int(json_object_get(
		json_array_get(kvs, 0), "create_revision")) : 0;
	json_decref(rep);
	return ret;
}

/*
 * A txn that did not succeed: which compare failed, and what follows.
 * Nothing here reads the jobs: the caller may hold one not in etcd yet.
 */
static int
txn_failed(struct tallyd *d, bool fenced, char *why, size_t wlen)
{
	struct tallyd_cluster *cl = d->cl;
	int64_t was = cl->leader_rev, now_rev = 0;

	if (fenced && leader_rev_now(cl, &now_rev) == 0 && now_rev != was) {
		cl->fenced++;
		snprintf(why, wlen, "not the leader any more (the leader key "
			"was created at revision %lld, not %lld): nothing "
			"written", (long long)now_rev, (long long)was);
		tallyd_cluster_step_down(d, why);
		return -EPERM;
	}
	cl->conflicts++;
	cl->next_tick_ms = 0;	/* the main loop reads the jobs again */
	snprintf(why, wlen, "a job key changed in etcd meanwhile (written by "
		"another tallyd): read again; nothing written");
	return -EAGAIN;
}

int
tallyd_cluster_save(struct tallyd *d, const struct tallyd_job *skip,
	char *why, size_t wlen)
{
	struct tallyd_cluster *cl = d->cl;
	struct batch *b = calloc(1, sizeof(*b));
	bool leads = tallyd_state_leads(d);
	json_t *rep = NULL;
	int ret;

	if (b == NULL)
		return -ENOMEM;
	b->cmp = json_array();
	b->ops = json_array();
	ret = batch_fill(d, b, skip);
	if (ret == 0 && b->creates && !leads) {
		snprintf(why, wlen, "only the leader creates and deletes jobs");
		ret = -EROFS;
	}
	if (ret == 0 && json_array_size(b->ops) > 0) {
		if (leads)
			json_array_append_new(b->cmp, fence_json(cl));
		ret = tallyd_etcd_post(cl->e, "/v3/kv/txn", json_pack(
			"{s:O, s:O}", "compare", b->cmp, "success", b->ops),
			&rep);
		cl->up = ret == 0;
		if (ret != 0)
			snprintf(why, wlen, "%s", cl->e->error);
		else if (!json_is_true(json_object_get(rep, "succeeded")))
			ret = txn_failed(d, leads, why, wlen);
		else
			batch_done(d, b, tallyd_etcd_int(json_object_get(
				json_object_get(rep, "header"), "revision")));
	}
	json_decref(rep);
	json_decref(b->cmp);
	json_decref(b->ops);
	for (unsigned int i = 0; i < b->nw; i++)
		free(b->w[i].text);
	free(b);
	return ret;
}

void
tallyd_cluster_refresh(struct tallyd *d, struct tallyd_job *j)
{
	char key[256];
	json_t *rep = NULL, *kvs;

	if (d->cl == NULL)
		return;
	job_key(j->name, key, sizeof(key));
	if (tallyd_etcd_post(d->cl->e, "/v3/kv/range", range_req(key, false),
			&rep) != 0)
		return;
	kvs = json_object_get(rep, "kvs");
	/* A key gone stays for the next sync, which may free j. */
	if (json_array_size(kvs) == 1 && tallyd_etcd_int(json_object_get(
			json_array_get(kvs, 0), "mod_revision")) !=
			(kv_find(d->cl, j->name) != NULL ?
			kv_find(d->cl, j->name)->mod_rev : 0))
		merge_kv(d, json_array_get(kvs, 0), false);
	json_decref(rep);
}

struct tallyd_job *
tallyd_cluster_fetch(struct tallyd *d, const char *name)
{
	struct tallyd_cluster *cl = d->cl;
	int64_t now = tallyd_now_ms();
	char key[256];
	json_t *rep = NULL, *kvs;

	if (now - cl->fetched_ms >= 1000) {
		cl->fetched_ms = now;
		cl->fetches = 0;
	}
	if (!cl->up || cl->fetches >= 50)
		return NULL;
	cl->fetches++;
	job_key(name, key, sizeof(key));
	if (tallyd_etcd_post(cl->e, "/v3/kv/range", range_req(key, false),
			&rep) != 0)
		return NULL;
	kvs = json_object_get(rep, "kvs");
	if (json_array_size(kvs) == 1)
		merge_kv(d, json_array_get(kvs, 0), true);
	json_decref(rep);
	return tallyd_job_find(d, name);
}

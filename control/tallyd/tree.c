/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Two-tier trees (docs/scale-out.md, "Two tiers"): what tallyd builds
 * from `job create NAME --world TOTAL --leaves A,B --spine S`.
 *
 * A tree is several tallyd jobs of one id. The spine job carries the
 * user's name and token; its members are the leaves' dataplanes (each
 * one's address and first UDP port), programmed by tallyd at creation
 * under a wire token of its own, with no rendezvous. Each leaf is a job
 * "NAME/L" (L its rank in the spine; '/' is in no name a join can ask
 * for) at its dataplane, an ordinary job to the rendezvous and the
 * barrier but for its job_add's "upstream". Workers join NAME with their
 * total rank; rdv.c places them on leaf rank / (TOTAL / leaves).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>

#include <sodium.h>

#include "ctl_parse.h"
#include "dpc.h"

bool
tallyd_tree_name_ok(const char *name)
{
	const char *slash = strchr(name, '/');
	char spine[TALLY_RDV_NAME_MAX + 1];
	char *end;
	unsigned long l;

	if (slash == NULL)
		return tally_rdv_name_ok(name);
	if (strlen(name) > TALLY_RDV_NAME_MAX ||
			(size_t)(slash - name) >= sizeof(spine))
		return false;
	memcpy(spine, name, (size_t)(slash - name));
	spine[slash - name] = '\0';
	l = strtoul(slash + 1, &end, 10);
	return tally_rdv_name_ok(spine) && slash[1] >= '0' &&
		slash[1] <= '9' && *end == '\0' &&
		l < TALLYD_TREE_MAX_LEAVES;
}

unsigned int
tallyd_tree_leaf_world(const struct tallyd_job *spine)
{
	return spine->world > 0 ? spine->tree_world / spine->world : 0;
}

void
tallyd_tree_leaf_name(const char *spine, unsigned int l, char *out)
{
	char b[TALLY_RDV_NAME_MAX + 16];
	size_t n;

	snprintf(b, sizeof(b), "%s/%u", spine, l);
	n = strnlen(b, TALLY_RDV_NAME_MAX);	/* tree_create.c checks */
	memcpy(out, b, n);
	out[n] = '\0';
}

struct tallyd_job *
tallyd_tree_spine(struct tallyd *d, const struct tallyd_job *leaf)
{
	char name[TALLY_RDV_NAME_MAX + 1];
	const char *slash = strrchr(leaf->name, '/');
	struct tallyd_job *s;

	if (leaf->tier != TALLYD_TIER_LEAF || slash == NULL)
		return NULL;
	snprintf(name, sizeof(name), "%.*s", (int)(slash - leaf->name),
		leaf->name);
	s = tallyd_job_find(d, name);
	return s != NULL && s->tier == TALLYD_TIER_SPINE && s->id == leaf->id ?
		s : NULL;
}

struct tallyd_job *
tallyd_tree_leaf_of(struct tallyd *d, const struct tallyd_job *spine,
	unsigned int rank, unsigned int *leaf_rank)
{
	unsigned int per = tallyd_tree_leaf_world(spine);
	char name[TALLY_RDV_NAME_MAX + 1];
	struct tallyd_job *l;

	if (per == 0 || rank >= spine->tree_world)
		return NULL;
	tallyd_tree_leaf_name(spine->name, rank / per, name);
	l = tallyd_job_find(d, name);
	if (l == NULL || l->tier != TALLYD_TIER_LEAF || l->id != spine->id)
		return NULL;
	*leaf_rank = rank % per;
	return l;
}

struct tallyd_job *
tallyd_job_find_at(struct tallyd *d, uint16_t id, unsigned int dp)
{
	struct tallyd_job *j, *any = NULL;

	for (j = d->jobs; j != NULL; j = j->next) {
		if (j->id != id)
			continue;
		if (tallyd_job_shard(j, dp) != NULL)
			return j;
		if (any == NULL)
			any = j;
	}
	return any;
}

/* The spine's name of j: j's own, or a leaf's up to its '/'. */
static void
tree_of(const struct tallyd_job *j, char *out)
{
	const char *slash = strrchr(j->name, '/');
	size_t n = j->tier == TALLYD_TIER_LEAF && slash != NULL ?
		(size_t)(slash - j->name) : strlen(j->name);

	memcpy(out, j->name, n);
	out[n] = '\0';
}

struct tallyd_job *
tallyd_tree_id_clash(struct tallyd *d, const struct tallyd_job *j)
{
	char mine[TALLY_RDV_NAME_MAX + 1], theirs[TALLY_RDV_NAME_MAX + 1];
	struct tallyd_job *o;

	tree_of(j, mine);
	for (o = d->jobs; o != NULL; o = o->next) {
		if (o == j || o->id != j->id)
			continue;
		tree_of(o, theirs);
		/* Parts of one tree share the id, and only they. */
		if (j->tier == 0 || o->tier == 0 || strcmp(mine, theirs) != 0)
			return o;
	}
	return NULL;
}

json_t *
tallyd_tree_upstream(struct tallyd *d, const struct tallyd_job *leaf)
{
	struct tallyd_job *s = tallyd_tree_spine(d, leaf);
	uint32_t ip;
	uint16_t port, nports;
	struct in_addr a;
	char tok[17], ips[INET_ADDRSTRLEN];

	if (s == NULL || !s->has_members ||
			tallyd_dpc_endpoint(d, s->sh[0].dp, &ip, &port,
				&nports) != 0)
		return NULL;
	a.s_addr = htonl(ip);
	inet_ntop(AF_INET, &a, ips, sizeof(ips));
	snprintf(tok, sizeof(tok), "%016llx",
		(unsigned long long)s->wire_token);
	return json_pack("{s:s, s:i, s:i, s:s, s:i, s:i}", "ip", ips, "port",
		port, "nports", nports, "token", tok, "rank", leaf->leaf,
		"world", s->tree_world);
}

/* Starts adding the spine again (its slots fresh); 0 or -EBUSY. */
static int
spine_readd(struct tallyd *d, struct tallyd_job *s)
{
	if (tallyd_dpc_busy(s) || !s->has_members || s->draining)
		return -EBUSY;
	return tallyd_dpc_restore(d, s, &s->sh[0], TALLYD_PROG_SPINE);
}

bool
tallyd_tree_barrier_ready(struct tallyd *d, struct tallyd_job *leaf)
{
	struct tallyd_job *s = tallyd_tree_spine(d, leaf);

	if (s == NULL)
		return false;	/* the tree is being taken apart */
	if (leaf->spine_fresh && !tallyd_dpc_busy(s)) {
		leaf->spine_fresh = false;
		return true;
	}
	/* The spine's program, when done, retries the barrier. */
	if (!tallyd_dpc_busy(s) && spine_readd(d, s) == 0)
		tallyd_log("job '%s': membership of leaf %u formed; adding the "
			"spine again (fresh slots)", s->name, leaf->leaf);
	leaf->program_pending = true;
	return false;
}

void
tallyd_tree_spine_done(struct tallyd *d, struct tallyd_job *s, int err)
{
	char name[TALLY_RDV_NAME_MAX + 1];
	struct tallyd_job *l;

	if (err != 0) {
		tallyd_log("job '%s': the spine was not programmed at tally-dp"
			"%s (%s); the next poll tries again", s->name,
			tallyd_dp_label(d, s->sh[0].dp), strerror(-err));
		return;
	}
	tallyd_log("job '%s' (id %u): spine programmed at tally-dp%s (%u "
		"leaves)", s->name, s->id, tallyd_dp_label(d, s->sh[0].dp),
		s->world);
	for (unsigned int i = 0; i < s->world; i++) {
		tallyd_tree_leaf_name(s->name, i, name);
		if ((l = tallyd_job_find(d, name)) != NULL &&
				l->program_pending)
			l->spine_fresh = true;
	}
	tallyd_rdv_retry(d);
}

/*
 * The two-tier counters of dataplane dp's last stats (tally-dp counts
 * them per host, for every job there): an object, or null.
 */
static json_t *
dp_tier_json(const struct tallyd *d, unsigned int dp)
{
	static const char *const keys[] = { "tier_forwarded",
		"tier_reforwarded", "tier_results", "tier_refused",
		"tier_duplicates", "upstream", "upstream_bcast" };
	json_t *tot = json_object_get(d->dps[dp].stats, "total"), *o;

	if (!json_is_object(tot) || (o = json_object()) == NULL)
		return json_null();
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		json_t *v = json_object_get(tot, keys[i]);

		if (json_is_integer(v))
			json_object_set(o, keys[i], v);
	}
	return o;
}

json_t *
tallyd_tree_json(struct tallyd *d, const struct tallyd_job *s)
{
	char name[TALLY_RDV_NAME_MAX + 1];
	json_t *a = json_array();
	struct tallyd_job *l;

	for (unsigned int i = 0; a != NULL && i < s->world; i++) {
		json_t *o;

		tallyd_tree_leaf_name(s->name, i, name);
		if ((l = tallyd_job_find(d, name)) == NULL)
			continue;
		o = tallyd_job_json(l, false);
		if (o != NULL) {
			json_object_set_new(o, "dataplane", json_string(
				d->dps[l->sh[0].dp].name));
			json_object_set_new(o, "shards", tallyd_shards_json(d,
				l, true));
			json_object_set_new(o, "dp_tier", dp_tier_json(d,
				l->sh[0].dp));
		}
		json_array_append_new(a, o);
	}
	return json_pack("{s:i, s:i, s:s, s:o, s:o}", "world", s->tree_world,
		"leaf_world", tallyd_tree_leaf_world(s), "spine",
		d->dps[s->sh[0].dp].name, "spine_dp_tier", dp_tier_json(d,
		s->sh[0].dp), "leaves", a);
}

void
tallyd_tree_state_json(const struct tallyd_job *j, json_t *o)
{
	if (j->tier == 0)
		return;
	json_object_set_new(o, "tier", json_string(j->tier ==
		TALLYD_TIER_SPINE ? "spine" : "leaf"));
	json_object_set_new(o, "tree_world", json_integer(j->tree_world));
	if (j->tier == TALLYD_TIER_LEAF)
		json_object_set_new(o, "leaf", json_integer(j->leaf));
}

int
tallyd_tree_state_load(struct tallyd_job *j, json_t *o, char *why,
	size_t wlen)
{
	const char *t = json_string_value(json_object_get(o, "tier"));
	json_int_t w = json_integer_value(json_object_get(o, "tree_world"));
	json_int_t l = json_integer_value(json_object_get(o, "leaf"));
	bool leafname = strchr(j->name, '/') != NULL;

	j->tier = 0;
	if (t == NULL && json_object_get(o, "tier") == NULL && !leafname)
		return 0;
	if (t != NULL && strcmp(t, "spine") == 0 && !leafname)
		j->tier = TALLYD_TIER_SPINE;
	else if (t != NULL && strcmp(t, "leaf") == 0 && leafname)
		j->tier = TALLYD_TIER_LEAF;
	if (j->tier == 0 || w < 1 || w > TALLYD_CTL_TREE_WORLD_MAX ||
			(j->tier == TALLYD_TIER_LEAF && (l < 0 ||
			l >= TALLYD_TREE_MAX_LEAVES)) ||
			(j->tier == TALLYD_TIER_SPINE && w % j->world != 0)) {
		snprintf(why, wlen, "job '%s': a bad two-tier tree part",
			j->name);
		return -EINVAL;
	}
	j->tree_world = (uint16_t)w;
	j->leaf = j->tier == TALLYD_TIER_LEAF ? (uint8_t)l : 0;
	return 0;
}

int64_t
tallyd_tree_last_active(struct tallyd *d, const struct tallyd_job *j)
{
	char name[TALLY_RDV_NAME_MAX + 1];
	int64_t last = j->last_active;
	struct tallyd_job *l;

	for (unsigned int i = 0; j->tier == TALLYD_TIER_SPINE &&
			i < j->world; i++) {
		tallyd_tree_leaf_name(j->name, i, name);
		if ((l = tallyd_job_find(d, name)) == NULL)
			continue;
		if (l->njoined > 0)
			return tallyd_wall_s();
		if (l->last_active > last)
			last = l->last_active;
	}
	return last;
}

bool
tallyd_tree_leaves_left(struct tallyd *d, const struct tallyd_job *s)
{
	char name[TALLY_RDV_NAME_MAX + 1];

	for (unsigned int i = 0; i < s->world; i++) {
		tallyd_tree_leaf_name(s->name, i, name);
		if (tallyd_job_find(d, name) != NULL)
			return true;
	}
	return false;
}

void
tallyd_tree_delete(struct tallyd *d, struct tallyd_job *s,
	struct tallyd_ctl_client *waiter)
{
	char name[TALLY_RDV_NAME_MAX + 1], spine[TALLY_RDV_NAME_MAX + 1];
	unsigned int n = s->world;
	struct tallyd_job *l;

	/*
	 * The spine goes last: its delete waits while a leaf is left. A
	 * leaf's delete may finish at once, and then the spine's: s is
	 * not touched after its leaves' deletes start.
	 */
	memcpy(spine, s->name, sizeof(spine));
	tallyd_job_delete_start(d, s, waiter);
	for (unsigned int i = 0; i < n; i++) {
		tallyd_tree_leaf_name(spine, i, name);
		if ((l = tallyd_job_find(d, name)) != NULL && !l->draining)
			tallyd_job_delete_start(d, l, NULL);
	}
}

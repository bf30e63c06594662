/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Dataplane liveness in etcd (cluster.h): while a tally-dp answers the
 * leader's admin polls, the leader keeps /tally/v1/dataplanes/IP:PORT
 * (that tally-dp's address for workers) bound to a lease of its own, one
 * per dataplane, renewed at each of its turns. When a tally-dp stops
 * answering, its renewals stop and etcd deletes its key when the lease
 * runs out: whoever watches the prefix (an operator, the failure handling
 * of docs/scale-out.md) sees a dead dataplane by its key going away, even
 * when the leader itself is what died. Each put is fenced on the leader
 * key like any write.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>

#include "cluster.h"
#include "dpc.h"

_Static_assert(TALLYD_CLUSTER_DPS == TALLYD_MAX_DPS,
	"a liveness key for each dataplane");

/* Dataplane dp's key into buf: 0, or -EHOSTDOWN while its address is
 * unknown. */
static int
dp_key(struct tallyd *d, unsigned int dp, char *buf, size_t len)
{
	struct in_addr a;
	char ip[INET_ADDRSTRLEN];
	uint32_t hip;
	uint16_t port, n;

	if (tallyd_dpc_endpoint(d, dp, &hip, &port, &n) != 0)
		return -EHOSTDOWN;
	a.s_addr = htonl(hip);
	inet_ntop(AF_INET, &a, ip, sizeof(ip));
	snprintf(buf, len, "%s%s:%u", TALLYD_KEY_DPS, ip, port);
	return 0;
}

/* Dataplane dp's admin socket, as the configuration names it. */
static const char *
dp_admin(const struct tallyd *d, unsigned int dp)
{
	return dp == 0 ? d->conf.dp_admin : d->conf.dataplanes[dp - 1].admin;
}

/* Key's value for dataplane dp: compact JSON (caller frees), or NULL. */
static char *
dp_value(struct tallyd *d, unsigned int dp)
{
	json_t *val = json_pack("{s:s, s:s, s:s, s:I}", "name",
		d->dps[dp].name, "admin", dp_admin(d, dp), "leader",
		d->cl->node, "since", (json_int_t)tallyd_wall_s());
	char *text = val != NULL ? json_dumps(val, JSON_COMPACT) : NULL;

	json_decref(val);
	return text;
}

/* Grants dataplane dp's lease and puts its key, fenced: 0 or -errno. */
static int
dp_put(struct tallyd *d, unsigned int dp, const char *key)
{
	struct tallyd_cluster *cl = d->cl;
	struct tallyd_dplive *l = &cl->dpl[dp];
	json_t *rep = NULL, *cmp, *put;
	char id[24], rev[24], *text;
	int ret;

	ret = tallyd_etcd_post(cl->e, "/v3/lease/grant", json_pack("{s:i}",
		"TTL", (int)cl->lease_s), &rep);
	l->lease = ret == 0 ? tallyd_etcd_int(json_object_get(rep, "ID")) : 0;
	json_decref(rep);
	if (l->lease == 0)
		return ret != 0 ? ret : -EPROTO;
	snprintf(id, sizeof(id), "%lld", (long long)l->lease);
	snprintf(rev, sizeof(rev), "%lld", (long long)cl->leader_rev);
	text = dp_value(d, dp);
	if (text == NULL) {
		l->lease = 0;
		return -ENOMEM;
	}
	cmp = json_pack("{s:o, s:s, s:s, s:s}", "key", tallyd_etcd_b64(
		TALLYD_KEY_LEADER, strlen(TALLYD_KEY_LEADER)), "target",
		"CREATE", "result", "EQUAL", "create_revision", rev);
	put = json_pack("{s:{s:o, s:o, s:s}}", "request_put", "key",
		tallyd_etcd_b64(key, strlen(key)), "value",
		tallyd_etcd_b64(text, strlen(text)), "lease", id);
	free(text);
	rep = NULL;
	ret = tallyd_etcd_post(cl->e, "/v3/kv/txn", json_pack(
		"{s:[o], s:[o]}", "compare", cmp, "success", put), &rep);
	if (ret == 0 && !json_is_true(json_object_get(rep, "succeeded")))
		ret = -EPERM;	/* not the leader: the next turn sees it */
	json_decref(rep);
	if (ret == 0)
		snprintf(l->key, sizeof(l->key), "%s", key);
	else
		l->lease = 0;	/* expires by itself */
	return ret;
}

/* Renews a dataplane's lease: 0, or -ENOENT once etcd dropped it. */
static int
dp_renew(struct tallyd_cluster *cl, const struct tallyd_dplive *l)
{
	json_t *rep = NULL;
	char id[24];
	int ret;

	snprintf(id, sizeof(id), "%lld", (long long)l->lease);
	ret = tallyd_etcd_post(cl->e, "/v3/lease/keepalive", json_pack(
		"{s:s}", "ID", id), &rep);
	if (ret == 0 && tallyd_etcd_int(json_object_get(rep, "TTL")) <= 0)
		ret = -ENOENT;
	json_decref(rep);
	return ret;
}

/* The leader's turn for dataplane dp's key. */
static void
dp_turn(struct tallyd *d, unsigned int dp)
{
	struct tallyd_cluster *cl = d->cl;
	struct tallyd_dplive *l = &cl->dpl[dp];
	char key[sizeof(l->key)];

	if (!tallyd_dpc_up(d->dps[dp].dpc) ||
			dp_key(d, dp, key, sizeof(key)) != 0)
		return;		/* no renewal: the key expires */
	if (l->lease != 0 && strcmp(key, l->key) != 0)
		l->lease = 0;	/* another address: a new key */
	if (l->lease != 0 && dp_renew(cl, l) == -ENOENT)
		l->lease = 0;
	if (l->lease == 0 && dp_put(d, dp, key) == 0)
		tallyd_log("tally-dp%s's liveness key %s is up (lease of %u "
			"s)", tallyd_dp_label(d, dp), key, cl->lease_s);
}

void
tallyd_cluster_dp_turn(struct tallyd *d)
{
	struct tallyd_cluster *cl = d->cl;

	for (unsigned int i = 0; i < d->ndps; i++) {
		if (!tallyd_state_leads(d))
			cl->dpl[i].lease = 0;	/* the new leader puts its own */
		else
			dp_turn(d, i);
	}
}

void
tallyd_cluster_dp_stats(const struct tallyd *d, json_t *o)
{
	const struct tallyd_cluster *cl = d->cl;
	json_t *a = json_array();

	for (unsigned int i = 0; i < d->ndps; i++)
		if (cl->dpl[i].lease != 0)
			json_array_append_new(a, json_string(cl->dpl[i].key));
	/* dp_live_key: the first dataplane's (one-host set-ups read it). */
	json_object_set_new(o, "dp_live_key", cl->dpl[0].lease != 0 ?
		json_string(cl->dpl[0].key) : json_null());
	json_object_set_new(o, "dp_live_keys", a);
}

/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Dataplane liveness in etcd (cluster.h): while tally-dp answers the
 * leader's admin polls, the leader keeps /tally/v1/dataplanes/IP:PORT
 * (tally-dp's address for workers) bound to a lease of its own, renewed
 * at each of its turns. When tally-dp stops answering, the renewals stop
 * and etcd deletes the key when the lease runs out: whoever watches the
 * prefix (an operator, the failure handling of docs/scale-out.md) sees a
 * dead dataplane by its key going away, even when the leader itself is
 * what died. The key's put is fenced on the leader key like any write.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>

#include "cluster.h"
#include "tallyd.h"

/* tally-dp's key into buf: 0, or -EHOSTDOWN while its address is unknown. */
static int
dp_key(struct tallyd *d, char *buf, size_t len)
{
	struct in_addr a;
	char ip[INET_ADDRSTRLEN];
	uint32_t hip;
	uint16_t port, n;

	if (tallyd_dpc_endpoint(d, &hip, &port, &n) != 0)
		return -EHOSTDOWN;
	a.s_addr = htonl(hip);
	inet_ntop(AF_INET, &a, ip, sizeof(ip));
	snprintf(buf, len, "%s%s:%u", TALLYD_KEY_DPS, ip, port);
	return 0;
}

/* Grants the dataplane's lease and puts its key, fenced: 0 or -errno. */
static int
dp_put(struct tallyd *d, const char *key)
{
	struct tallyd_cluster *cl = d->cl;
	json_t *rep = NULL, *cmp, *put, *val;
	char id[24], rev[24], *text;
	int ret;

	ret = tallyd_etcd_post(cl->e, "/v3/lease/grant", json_pack("{s:i}",
		"TTL", (int)cl->lease_s), &rep);
	cl->dp_lease = ret == 0 ? tallyd_etcd_int(json_object_get(rep,
		"ID")) : 0;
	json_decref(rep);
	if (cl->dp_lease == 0)
		return ret != 0 ? ret : -EPROTO;
	snprintf(id, sizeof(id), "%lld", (long long)cl->dp_lease);
	snprintf(rev, sizeof(rev), "%lld", (long long)cl->leader_rev);
	val = json_pack("{s:s, s:s, s:I}", "admin", d->conf.dp_admin,
		"leader", cl->node, "since", (json_int_t)tallyd_wall_s());
	text = val != NULL ? json_dumps(val, JSON_COMPACT) : NULL;
	json_decref(val);
	if (text == NULL)
		return -ENOMEM;
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
		snprintf(cl->dp_key, sizeof(cl->dp_key), "%s", key);
	else
		cl->dp_lease = 0;	/* expires by itself */
	return ret;
}

/* Renews the dataplane's lease: 0, or -ENOENT once etcd dropped it. */
static int
dp_renew(struct tallyd_cluster *cl)
{
	json_t *rep = NULL;
	char id[24];
	int ret;

	snprintf(id, sizeof(id), "%lld", (long long)cl->dp_lease);
	ret = tallyd_etcd_post(cl->e, "/v3/lease/keepalive", json_pack(
		"{s:s}", "ID", id), &rep);
	if (ret == 0 && tallyd_etcd_int(json_object_get(rep, "TTL")) <= 0)
		ret = -ENOENT;
	json_decref(rep);
	return ret;
}

void
tallyd_cluster_dp_turn(struct tallyd *d)
{
	struct tallyd_cluster *cl = d->cl;
	char key[sizeof(cl->dp_key)];

	if (!tallyd_state_leads(d)) {
		cl->dp_lease = 0;	/* the new leader puts its own */
		return;
	}
	if (!tallyd_dpc_up(d->dpc) || dp_key(d, key, sizeof(key)) != 0)
		return;		/* no renewal: the key expires */
	if (cl->dp_lease != 0 && strcmp(key, cl->dp_key) != 0)
		cl->dp_lease = 0;	/* another address: a new key */
	if (cl->dp_lease != 0 && dp_renew(cl) == -ENOENT)
		cl->dp_lease = 0;
	if (cl->dp_lease == 0 && dp_put(d, key) == 0)
		tallyd_log("tally-dp's liveness key %s is up (lease of %u s)",
			key, cl->lease_s);
}

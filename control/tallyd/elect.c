/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The election among tallyd instances sharing etcd (cluster.h), etcd's
 * recipe with one key: a candidate grants itself a lease and creates
 * /tally/v1/leader bound to it, in a txn that succeeds only while the
 * key does not exist (create_revision 0); the key's create_revision is
 * then the leader's fence for every write (state_etcd.c). The leader
 * keeps the lease alive at a third of its TTL and leads only while its
 * last good keepalive is younger than the TTL; it steps down when the
 * lease is gone, when the key is another's, or when a fenced write fails.
 * A follower reads the jobs at each turn and campaigns once the key is
 * gone (the leader's lease expired or was revoked).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "cluster.h"
#include "tallyd.h"

#define ETCD_TIMEOUT_MS	1000

int
tallyd_cluster_open(struct tallyd *d, char *why, size_t wlen)
{
	struct tallyd_cluster *cl;
	if (!tallyd_etcd_spec(d->conf.state))
		return 0;
	cl = calloc(1, sizeof(*cl));
	if (cl == NULL)
		return -ENOMEM;
	cl->e = tallyd_etcd_create(d->conf.state, ETCD_TIMEOUT_MS, why, wlen);
	if (cl->e == NULL) {
		free(cl);
		return -EINVAL;
	}
	cl->lease_s = d->conf.state_lease_s;
	cl->up = true;
	d->cl = cl;
	return 0;
}

/*
 * This tallyd as the leader key's value: host, pid, the rendezvous
 * address it listens on (a port 0 configured: the kernel's) and its
 * control socket.
 */
static void
node_text(struct tallyd *d, char *out, size_t len)
{
	struct sockaddr_in sa;
	socklen_t sl = sizeof(sa);
	char host[64] = "?", ip[INET_ADDRSTRLEN] = "?", rdv[32];
	json_t *node;
	char *text;

	gethostname(host, sizeof(host) - 1);
	if (getsockname(d->rdv_fd, (struct sockaddr *)&sa, &sl) == 0 &&
			sa.sin_family == AF_INET)
		inet_ntop(AF_INET, &sa.sin_addr, ip, sizeof(ip));
	else
		sa.sin_port = 0;
	snprintf(rdv, sizeof(rdv), "%s:%u", ip, ntohs(sa.sin_port));
	node = json_pack("{s:s, s:i, s:s, s:s}", "host", host, "pid",
		(int)getpid(), "rendezvous", rdv, "control",
		d->conf.control_socket);
	text = node != NULL ? json_dumps(node, JSON_COMPACT) : NULL;
	json_decref(node);
	snprintf(out, len, "%s", text != NULL ? text : "{}");
	free(text);
}

bool
tallyd_state_leads(const struct tallyd *d)
{
	const struct tallyd_cluster *cl = d->cl;

	if (cl == NULL)
		return true;
	return cl->leader && tallyd_now_ms() - cl->lease_ok_ms <
		(int64_t)cl->lease_s * 1000;
}

/* Ends our lease, if we hold one (best effort, under its deadline). */
static void
lease_revoke(struct tallyd_cluster *cl)
{
	json_t *rep = NULL;
	char id[24];

	if (cl->lease == 0)
		return;
	snprintf(id, sizeof(id), "%lld", (long long)cl->lease);
	tallyd_etcd_post(cl->e, "/v3/lease/revoke", json_pack("{s:s}", "ID",
		id), &rep);
	json_decref(rep);
	cl->lease = 0;
}

void
tallyd_cluster_step_down(struct tallyd *d, const char *why)
{
	struct tallyd_cluster *cl = d->cl;

	if (cl == NULL || !cl->leader)
		return;
	cl->leader = false;
	cl->leader_rev = 0;
	cl->leader_changes++;
	tallyd_log("no longer the leader: %s", why);
	if (!cl->e->failing)
		lease_revoke(cl);
	cl->lease = 0;
}

void
tallyd_cluster_close(struct tallyd *d)
{
	struct tallyd_cluster *cl = d->cl;
	struct tallyd_kv *kv, *next;

	if (cl == NULL)
		return;
	if (cl->leader)
		tallyd_cluster_step_down(d, "stopping");
	for (kv = cl->kvs; kv != NULL; kv = next) {
		next = kv->next;
		free(kv->name);
		free(kv->text);
		free(kv);
	}
	free(cl->e);
	free(cl);
	d->cl = NULL;
}

/* A lease of lease_s into cl->lease: 0 or -errno. */
static int
grant(struct tallyd_cluster *cl)
{
	json_t *rep = NULL;
	int ret = tallyd_etcd_post(cl->e, "/v3/lease/grant", json_pack(
		"{s:i}", "TTL", (int)cl->lease_s), &rep);

	if (ret == 0) {
		cl->lease = tallyd_etcd_int(json_object_get(rep, "ID"));
		if (cl->lease == 0)
			ret = -EPROTO;
	}
	json_decref(rep);
	return ret;
}

/* Tries to become the leader: the key, if nobody holds it. */
static void
campaign(struct tallyd *d, int64_t now)
{
	struct tallyd_cluster *cl = d->cl;
	json_t *rep = NULL, *cmp, *put;
	char id[24];

	if (cl->lease == 0 && grant(cl) != 0)
		return;
	if (cl->node[0] == '\0')
		node_text(d, cl->node, sizeof(cl->node));
	snprintf(id, sizeof(id), "%lld", (long long)cl->lease);
	cmp = json_pack("{s:o, s:s, s:s, s:s}", "key", tallyd_etcd_b64(
		TALLYD_KEY_LEADER, strlen(TALLYD_KEY_LEADER)), "target",
		"CREATE", "result", "EQUAL", "create_revision", "0");
	put = json_pack("{s:{s:o, s:o, s:s}}", "request_put", "key",
		tallyd_etcd_b64(TALLYD_KEY_LEADER, strlen(TALLYD_KEY_LEADER)),
		"value", tallyd_etcd_b64(cl->node, strlen(cl->node)), "lease",
		id);
	if (tallyd_etcd_post(cl->e, "/v3/kv/txn", json_pack("{s:[o], s:[o]}",
			"compare", cmp, "success", put), &rep) != 0)
		return;
	if (json_is_true(json_object_get(rep, "succeeded"))) {
		cl->leader = true;
		cl->leader_rev = tallyd_etcd_int(json_object_get(
			json_object_get(rep, "header"), "revision"));
		cl->lease_ok_ms = now;
		cl->next_keepalive_ms = now + cl->lease_s * 1000 / 3;
		cl->leader_changes++;
		snprintf(cl->leader_val, sizeof(cl->leader_val), "%s",
			cl->node);
		tallyd_log("leader now (lease %s of %u s, leader key revision "
			"%lld); %u jobs", id, cl->lease_s,
			(long long)cl->leader_rev, d->njobs);
	} else {
		lease_revoke(cl);	/* another was quicker */
	}
	json_decref(rep);
}

/* The leader's keepalive; steps down when the lease is gone. */
static void
keepalive(struct tallyd *d, int64_t now)
{
	struct tallyd_cluster *cl = d->cl;
	json_t *rep = NULL;
	char id[24];
	int ret;

	if (now < cl->next_keepalive_ms)
		return;
	snprintf(id, sizeof(id), "%lld", (long long)cl->lease);
	ret = tallyd_etcd_post(cl->e, "/v3/lease/keepalive", json_pack(
		"{s:s}", "ID", id), &rep);
	if (ret == 0 && tallyd_etcd_int(json_object_get(rep, "TTL")) <= 0) {
		json_decref(rep);
		cl->lease = 0;
		return tallyd_cluster_step_down(d, "its lease expired");
	}
	json_decref(rep);
	if (ret == 0) {
		cl->lease_ok_ms = now;
		cl->next_keepalive_ms = now + cl->lease_s * 1000 / 3;
	} else if (now - cl->lease_ok_ms >= (int64_t)cl->lease_s * 1000) {
		tallyd_cluster_step_down(d, "its lease could not be renewed "
			"in time (etcd unreachable)");
	}
}

/* Logs etcd going away (once a minute at most) and coming back. */
static void
note_etcd(struct tallyd_cluster *cl, int ret, int64_t now)
{
	if (ret == 0) {
		if (!cl->up)
			tallyd_log("etcd answers again");
		cl->up = true;
		return;
	}
	if (cl->up || now - (int64_t)cl->down_logged_ms >= 60000) {
		tallyd_log("etcd unreachable: %s (retrying)", cl->e->error);
		cl->down_logged_ms = (uint64_t)now;
	}
	cl->up = false;
}

int64_t
tallyd_cluster_tick(struct tallyd *d, int64_t now)
{
	struct tallyd_cluster *cl = d->cl;
	int64_t rev = 0;
	int ret;

	if (cl == NULL)
		return INT64_MAX;
	if (now < cl->next_tick_ms)
		return cl->next_tick_ms - now;
	ret = tallyd_cluster_sync(d, &rev);
	note_etcd(cl, ret, now);
	/*
	 * A turn each quarter lease; while etcd does not answer, less
	 * often (each failed exchange may have taken its whole deadline).
	 */
	cl->down_turns = ret == 0 ? 0 : cl->down_turns + 1;
	cl->next_tick_ms = tallyd_now_ms() + (int64_t)cl->lease_s * 1000 / 4 *
		(cl->down_turns < 2 ? 1u << cl->down_turns : 4u);
	if (cl->leader && ret == 0 && rev != cl->leader_rev)
		tallyd_cluster_step_down(d, "the leader key is another's");
	if (cl->leader && ret == 0)
		keepalive(d, now);
	else if (cl->leader && now - cl->lease_ok_ms >=
			(int64_t)cl->lease_s * 1000)
		tallyd_cluster_step_down(d, "its lease could not be renewed "
			"in time (etcd unreachable)");
	else if (ret == 0 && rev == 0)
		campaign(d, now);
	if (ret == 0)
		tallyd_cluster_dp_turn(d);
	return cl->next_tick_ms - tallyd_now_ms();
}

json_t *
tallyd_cluster_refusal(const struct tallyd *d, const char *cmd)
{
	const struct tallyd_cluster *cl = d->cl;
	json_t *l = cl->leader_val[0] != '\0' ?
		json_loads(cl->leader_val, 0, NULL) : NULL;
	const char *rdv = json_string_value(json_object_get(l, "rendezvous"));
	const char *host = json_string_value(json_object_get(l, "host"));
	char why[400];

	if (l != NULL)
		snprintf(why, sizeof(why), "this tallyd is a follower: %s goes "
			"to the leader, tallyd on %s (rendezvous %s)", cmd,
			host != NULL ? host : "?", rdv != NULL ? rdv : "?");
	else
		snprintf(why, sizeof(why), "this tallyd is a follower and no "
			"leader is elected now (etcd %s): try %s again soon",
			cl->up ? "answers" : "unreachable", cmd);
	return json_pack("{s:i, s:s, s:o}", "errno", EROFS, "error", why,
		"leader", l != NULL ? l : json_null());
}

void
tallyd_cluster_stats(const struct tallyd *d, json_t *o)
{
	const struct tallyd_cluster *cl = d->cl;
	json_t *l;

	json_object_set_new(o, "state_backend", json_string(cl != NULL ?
		"etcd" : "file"));
	if (cl == NULL)
		return;
	l = cl->leader_val[0] != '\0' ? json_loads(cl->leader_val, 0, NULL) :
		NULL;
	json_object_set_new(o, "state_leader", json_boolean(
		tallyd_state_leads(d)));
	json_object_set_new(o, "state_leader_node", l != NULL ? l :
		json_null());
	json_object_set_new(o, "etcd_up", json_boolean(cl->up));
	tallyd_cluster_dp_stats(d, o);
	json_object_set_new(o, "etcd_requests",
		json_integer((json_int_t)cl->e->st.requests));
	json_object_set_new(o, "etcd_failures",
		json_integer((json_int_t)cl->e->st.failures));
	json_object_set_new(o, "etcd_timeouts",
		json_integer((json_int_t)cl->e->st.timeouts));
	json_object_set_new(o, "state_fenced",
		json_integer((json_int_t)cl->fenced));
	json_object_set_new(o, "state_conflicts",
		json_integer((json_int_t)cl->conflicts));
	json_object_set_new(o, "leader_changes",
		json_integer((json_int_t)cl->leader_changes));
}

/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Memberships at tally-dp: programming one (job_add, replacing what
 * tally-dp holds under the job's id with job_del first) and removing a
 * job. Each is a chain of requests on dpc.c's queue, one step queued by
 * the previous one's reply, kept in the shard's op; at most one chain
 * per shard at a time. A sharded job's barrier programs every shard at
 * once (each on its own tally-dp's queue) and is over when all are.
 *
 * Counters stay exact across the replacement: job_del's reply carries
 * the removed job's final counters (taken after tally-dp's lcores let go
 * of it), which become the job's last reading and are folded into its
 * base before the new membership starts counting from zero. A tally-dp
 * whose job_del does not report them gets a job_list of that one job
 * just before the job_del instead (exact when the old members have
 * stopped sending, as they have once all of them joined anew).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <arpa/inet.h>

#include <sodium.h>

#include "dpc.h"

enum stage { ST_READ, ST_DEL, ST_ADD, ST_DEL_EXISTING, ST_ADD_AGAIN };

static void step(struct tallyd *d, struct tallyd_job *j,
	struct tallyd_shard *sh, enum stage st);

bool
tallyd_dpc_shard_busy(const struct tallyd_shard *sh)
{
	return sh->op.kind != TALLYD_OP_NONE;
}

bool
tallyd_dpc_busy(const struct tallyd_job *j)
{
	for (unsigned int k = 0; k < j->nshards; k++)
		if (tallyd_dpc_shard_busy(&j->sh[k]))
			return true;
	return false;
}

/* An authenticated job's keys for tally-dp's job_add, hex, by rank. */
static json_t *
auth_json(const struct tallyd_job *j, uint64_t wire_token)
{
	json_t *up = json_array(), *down = json_array();
	struct tally_auth_keys k;
	char hex[2 * sizeof(k.up) + 1];

	for (unsigned int r = 0; r < j->world; r++) {
		tallyd_auth_keys(j, wire_token, r, &k);
		sodium_bin2hex(hex, sizeof(hex), k.up, sizeof(k.up));
		json_array_append_new(up, json_string(hex));
		sodium_bin2hex(hex, sizeof(hex), k.down, sizeof(k.down));
		json_array_append_new(down, json_string(hex));
	}
	sodium_bin2hex(hex, sizeof(hex), k.result, sizeof(k.result));
	sodium_memzero(&k, sizeof(k));
	return json_pack("{s:s, s:o, s:o}", "result", hex, "up", up, "down",
		down);
}

/*
 * One member of job_add: {"ip", "port"}, and "qpn" for an RDMA job's
 * (tally-dp's RoCEv2 member is the source IP and QPN).
 */
static json_t *
member_json(const char *ip, const struct tallyd_member *m)
{
	json_t *o = json_pack("{s:s, s:i}", "ip", ip, "port", m->port);

	if (o != NULL && m->qpn != 0)
		json_object_set_new(o, "qpn", json_integer(m->qpn));
	return o;
}

/* job_add of shard sh's chain: every shard gets the same one. */
static json_t *
job_add_req(struct tallyd *d, const struct tallyd_job *j,
	const struct tallyd_shard *sh)
{
	const struct tallyd_dp_op *op = &sh->op;
	json_t *members = json_array(), *o;
	char tok[17], ip[INET_ADDRSTRLEN];

	for (unsigned int r = 0; r < j->world; r++) {
		struct in_addr a = { .s_addr = htonl(op->members[r].ip) };

		inet_ntop(AF_INET, &a, ip, sizeof(ip));
		json_array_append_new(members, member_json(ip,
			&op->members[r]));
	}
	snprintf(tok, sizeof(tok), "%016llx", (unsigned long long)op->token);
	o = json_pack("{s:s, s:i, s:s, s:i, s:i, s:i, s:b, s:o}", "cmd",
		"job_add", "id", j->id, "token", tok, "world", j->world,
		"window", j->window, "max_elems", j->max_elems, "narrow",
		j->narrow, "members", members);
	if (o != NULL)
		tallyd_limits_job_add(j, o);
	if (o != NULL && j->group_ip != 0) {
		struct in_addr a = { .s_addr = htonl(j->group_ip) };

		inet_ntop(AF_INET, &a, ip, sizeof(ip));
		json_object_set_new(o, "group", json_pack("{s:s, s:i}", "ip",
			ip, "port", j->group_port));
	}
	if (o != NULL && j->auth)
		json_object_set_new(o, "auth", auth_json(j, op->token));
	if (o != NULL && j->rdma)	/* tally-dp checks every SEND's */
		json_object_set_new(o, "qkey", json_integer(j->qkey));
	/* A tree's spine takes the leaves' wide lanes: i32 and f32. */
	if (o != NULL && j->tier == TALLYD_TIER_SPINE)
		json_object_set_new(o, "encodings", json_pack("[s, s]", "i32",
			"f32"));
	if (o != NULL && j->tier == TALLYD_TIER_LEAF) {
		json_t *up = tallyd_tree_upstream(d, j);

		if (up == NULL) {	/* the spine is not known yet */
			json_decref(o);
			return NULL;
		}
		json_object_set_new(o, "upstream", up);
	}
	return o;
}

/*
 * A barrier's program is over at one shard (err 0 or -errno); when it
 * is over at all of them, the membership is j's if every shard took it,
 * and the rendezvous hears the first failure. A shard that took it while
 * another failed holds a token j does not know: the next poll programs
 * j's own membership there again (a mismatch), or removes it.
 */
static void
barrier_shard_done(struct tallyd *d, struct tallyd_job *j,
	const struct tallyd_shard *sh, int err, enum tallyd_prog_why why)
{
	bool any = false;

	if (err != 0 && j->prog_err == 0)
		j->prog_err = err;
	if (--j->prog_left > 0)
		return;
	err = j->prog_err;
	if (err == 0) {
		memcpy(j->members, sh->op.members, sizeof(j->members));
		j->wire_token = sh->op.token;
		j->has_members = true;
		d->state_dirty = true;
	}
	for (unsigned int k = 0; k < j->nshards; k++)
		any |= j->sh[k].in_dp;
	/* Nothing of the old membership is left at any tally-dp. */
	if (err != 0 && !any)
		j->has_members = false;
	if (why == TALLYD_PROG_EPOCH)
		tallyd_epoch_programmed(d, j, err);
	else
		tallyd_rdv_programmed(d, j, err);
}

/*
 * The chain at sh is over (err 0 or -errno): tell whoever waits. j may
 * be freed by the continuation; nothing touches it after.
 */
static void
finish(struct tallyd *d, struct tallyd_job *j, struct tallyd_shard *sh,
	int err)
{
	enum tallyd_dp_op_kind kind = sh->op.kind;
	enum tallyd_prog_why why = sh->op.why;
	const char *dp = tallyd_dp_label(d, sh->dp);

	sh->op.kind = TALLYD_OP_NONE;
	if (kind == TALLYD_OP_REMOVE) {
		/* Whatever happened, a poll removes what is left there. */
		sh->in_dp = false;
		tallyd_job_delete_step(d, tallyd_now_ms());
		return;
	}
	if (why == TALLYD_PROG_BARRIER || why == TALLYD_PROG_EPOCH) {
		barrier_shard_done(d, j, sh, err, why);
	} else if (why == TALLYD_PROG_SPINE) {
		tallyd_tree_spine_done(d, j, err);
	} else if (err == 0 && why == TALLYD_PROG_RESTORE) {
		d->st.dp_reprograms++;
		tallyd_log("job '%s' (id %u, epoch %u) programmed into "
			"tally-dp %s again", j->name, j->id, j->epoch, dp);
	} else if (err == 0) {
		tallyd_log("job '%s' (id %u, epoch %u): tally-dp%s has "
			"tallyd's configuration again", j->name, j->id,
			j->epoch, dp);
	}
	/* What waited for this chain to end. */
	if (tallyd_dpc_busy(j))
		return;
	if (j->draining)
		tallyd_job_delete_step(d, tallyd_now_ms());
	else if (why != TALLYD_PROG_BARRIER && j->program_pending)
		tallyd_rdv_retry(d);
}

/* A reply's errno, logged when it is a refusal other than ENOENT. */
static int
reply_errno(struct tallyd *d, const struct tallyd_job *j,
	const struct tallyd_shard *sh, json_t *r, const char *what)
{
	int err = (int)json_integer_value(json_object_get(r, "errno"));

	if (err != 0 && err != ENOENT && err != EEXIST)
		tallyd_log("tally-dp%s refused %s of job '%s' (id %u): %s",
			tallyd_dp_label(d, sh->dp), what, j->name, j->id,
			json_string_value(json_object_get(r, "error")));
	return err;
}

/* The counters just before job_del, for a tally-dp that does not send them. */
static void
on_read(struct tallyd *d, unsigned int dp, struct tallyd_job *j, json_t *r,
	int err, uintptr_t arg)
{
	struct tallyd_shard *sh = j != NULL ? tallyd_job_shard(j, dp) : NULL;
	json_t *o;
	size_t i;

	(void)arg;
	if (sh == NULL)
		return;
	if (err != 0)
		return finish(d, j, sh, err);
	sh->op.ours = false;
	json_array_foreach(json_object_get(r, "jobs"), i, o) {
		if (json_integer_value(json_object_get(o, "id")) != j->id)
			continue;
		if (tallyd_dpc_entry_ours(j, o)) {
			tallyd_dpc_take(j, sh, o);
			sh->op.ours = true;
		}
	}
	step(d, j, sh, ST_DEL);
}

/*
 * job_del's reply. Removing j's own membership ends its counting: the
 * final counters (or the last reading) go into the base, saved before
 * the next step so that a tallyd restart cannot count them twice or lose
 * them.
 */
static void
on_del(struct tallyd *d, unsigned int dp, struct tallyd_job *j, json_t *r,
	int err, uintptr_t arg)
{
	struct tallyd_shard *sh = j != NULL ? tallyd_job_shard(j, dp) : NULL;
	enum stage st = (enum stage)arg;
	json_t *ctr;

	if (sh == NULL)
		return;
	if (err != 0)
		return finish(d, j, sh, err);
	err = reply_errno(d, j, sh, r, "job_del");
	if (err != 0 && err != ENOENT)
		return finish(d, j, sh, -err);
	ctr = json_object_get(r, "counters");
	if (err == 0 && json_is_object(ctr))
		tallyd_dpc_set_del_counters(d->dps[dp].dpc);
	if (sh->op.ours) {
		if (err == 0 && json_is_object(ctr))
			tallyd_dpc_read_ctr(ctr, &sh->last);
		tallyd_dpc_fold(j, sh);
		sh->in_dp = false;
		if (sh->op.kind == TALLYD_OP_PROGRAM)
			tallyd_state_save(d);
	} else if (st == ST_DEL) {
		sh->in_dp = false;
	}
	if (sh->op.kind == TALLYD_OP_REMOVE)
		return finish(d, j, sh, 0);
	step(d, j, sh, st == ST_DEL ? ST_ADD : ST_ADD_AGAIN);
}

/* job_add's reply: the membership is tally-dp's; the shard's counters restart. */
static void
on_add(struct tallyd *d, unsigned int dp, struct tallyd_job *j, json_t *r,
	int err, uintptr_t arg)
{
	struct tallyd_shard *sh = j != NULL ? tallyd_job_shard(j, dp) : NULL;
	enum stage st = (enum stage)arg;

	if (sh == NULL)
		return;
	if (err != 0)
		return finish(d, j, sh, err);
	err = reply_errno(d, j, sh, r, "job_add");
	if (err == EEXIST && st == ST_ADD) {
		/* Left over from before tallyd knew: replace it. */
		return step(d, j, sh, ST_DEL_EXISTING);
	}
	if (err != 0)
		return finish(d, j, sh, -err);
	/* Whatever counted under the id before is over (folded once). */
	tallyd_dpc_fold(j, sh);
	sh->in_dp = true;
	d->state_dirty = true;
	finish(d, j, sh, 0);
}

/* Queues the request of stage st of sh's chain. */
static void
step(struct tallyd *d, struct tallyd_job *j, struct tallyd_shard *sh,
	enum stage st)
{
	json_t *req;
	tallyd_dpc_cb *cb;

	sh->op.stage = st;
	switch (st) {
	case ST_READ:
		req = json_pack("{s:s, s:i, s:i}", "cmd", "job_list", "after",
			j->id - 1, "limit", 1);
		cb = on_read;
		break;
	case ST_DEL:
	case ST_DEL_EXISTING:
		if (st == ST_DEL_EXISTING)
			sh->op.ours = false;
		req = json_pack("{s:s, s:i}", "cmd", "job_del", "id", j->id);
		cb = on_del;
		break;
	default:
		req = job_add_req(d, j, sh);
		cb = on_add;
		if (req == NULL && j->tier == TALLYD_TIER_LEAF)
			return finish(d, j, sh, -EHOSTDOWN);
		break;
	}
	if (tallyd_dpc_request(d, sh->dp, req, j, 0, cb, (uintptr_t)st) != 0)
		finish(d, j, sh, -ENOMEM);
}

/* Starts a chain of kind on sh. */
static int
start(struct tallyd *d, struct tallyd_job *j, struct tallyd_shard *sh,
	enum tallyd_dp_op_kind kind, enum tallyd_prog_why why)
{
	if (tallyd_dpc_shard_busy(sh))
		return -EBUSY;
	sh->op.kind = kind;
	sh->op.why = why;
	sh->op.ours = sh->in_dp && j->has_members;
	if (!sh->in_dp)
		step(d, j, sh, kind == TALLYD_OP_REMOVE ? ST_DEL : ST_ADD);
	else if (sh->op.ours && kind == TALLYD_OP_PROGRAM &&
			!tallyd_dpc_del_counters(d->dps[sh->dp].dpc))
		step(d, j, sh, ST_READ);
	else
		step(d, j, sh, ST_DEL);
	return 0;
}

/* Starts a program of members and wire_token at every shard of j. */
static int
program_all(struct tallyd *d, struct tallyd_job *j,
	const struct tallyd_member *members, uint64_t wire_token,
	enum tallyd_prog_why why)
{
	unsigned int k;

	if (tallyd_dpc_busy(j))
		return -EBUSY;
	j->prog_left = (int)j->nshards;
	j->prog_err = 0;
	for (k = 0; k < j->nshards; k++) {
		struct tallyd_shard *sh = &j->sh[k];

		memcpy(sh->op.members, members,
			j->world * sizeof(struct tallyd_member));
		sh->op.token = wire_token;
		start(d, j, sh, TALLYD_OP_PROGRAM, why);
	}
	return 0;
}

int
tallyd_dpc_program(struct tallyd *d, struct tallyd_job *j,
	const struct tallyd_member *members, uint64_t wire_token)
{
	return program_all(d, j, members, wire_token, TALLYD_PROG_BARRIER);
}

int
tallyd_dpc_program_epoch(struct tallyd *d, struct tallyd_job *j,
	uint64_t wire_token)
{
	struct tallyd_member m[TALLY_MAX_WORKERS];

	memcpy(m, j->members, sizeof(m));
	return program_all(d, j, m, wire_token, TALLYD_PROG_EPOCH);
}

int
tallyd_dpc_restore(struct tallyd *d, struct tallyd_job *j,
	struct tallyd_shard *sh, enum tallyd_prog_why why)
{
	if (tallyd_dpc_shard_busy(sh) || !j->has_members)
		return -EBUSY;
	memcpy(sh->op.members, j->members, sizeof(j->members));
	sh->op.token = j->wire_token;
	return start(d, j, sh, TALLYD_OP_PROGRAM, why);
}

int
tallyd_dpc_remove(struct tallyd *d, struct tallyd_job *j,
	struct tallyd_shard *sh)
{
	return start(d, j, sh, TALLYD_OP_REMOVE, TALLYD_PROG_BARRIER);
}

/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Inside tallyd's tally-dp client (dpc*.c): the asynchronous request
 * queue they share, and the poll cycle's state. The rest of tallyd uses
 * the functions tallyd.h declares.
 *
 * Requests go out one at a time, in the order they were queued, on one
 * SOCK_SEQPACKET connection; tally-dp answers them in that order. So a
 * reply reflects every request queued before it and none queued after:
 * the poll relies on that to tell a stale reading from a fresh one.
 */
#ifndef TALLYD_DPC_H
#define TALLYD_DPC_H

#include <stdint.h>

#include <jansson.h>

#include "tallyd.h"

/* A request may open a connection while tally-dp is down (the poll's). */
#define TALLYD_DPC_PROBE	1u

/*
 * Called once per request: reply is tally-dp's answer (borrowed; its
 * "errno" may say it refused) with err 0, or NULL with err a negative
 * errno of the exchange (-ETIMEDOUT, -EHOSTDOWN while tally-dp is down,
 * -ECONNRESET, -EPROTO, -EMSGSIZE). j is the job the request was queued
 * for, NULL if there was none or it has been freed since. arg is the
 * caller's; dp the dataplane (index in d->dps) it went to.
 */
typedef void tallyd_dpc_cb(struct tallyd *d, unsigned int dp,
	struct tallyd_job *j, json_t *reply, int err, uintptr_t arg);

/*
 * Queues req (consumed) for j (may be NULL) at dataplane dp; cb runs
 * later from
 * tallyd_dpc_event() or tallyd_dpc_timers(), never from here. Returns 0,
 * or -ENOMEM (nothing queued, cb will not run).
 */
int tallyd_dpc_request(struct tallyd *d, unsigned int dp, json_t *req,
	struct tallyd_job *j, unsigned int flags, tallyd_dpc_cb *cb,
	uintptr_t arg);

/* How many requests have been queued so far (a sequence, never reset). */
uint64_t tallyd_dpc_seq(const struct tallyd_dpc *c);

/* Whether tally-dp's job_del replies carry the job's final counters. */
bool tallyd_dpc_del_counters(const struct tallyd_dpc *c);
void tallyd_dpc_set_del_counters(struct tallyd_dpc *c);

/* Sets dataplane dp's endpoint from a ping reply; 0 or -EPROTO. */
int tallyd_dpc_set_endpoint(struct tallyd *d, unsigned int dp, json_t *ping);

/* The poll cycle's state, owned by the client (dpc_poll.c uses it). */
struct tallyd_dpc_poll *tallyd_dpc_poll_state(struct tallyd_dpc *c);
struct tallyd_dpc_poll *tallyd_dpc_poll_new(void);
void tallyd_dpc_poll_free(struct tallyd_dpc_poll *p);

/* dpc_ops.c, for dpc_poll.c: programs j's own membership again at sh. */
int tallyd_dpc_restore(struct tallyd *d, struct tallyd_job *j,
	struct tallyd_shard *sh, enum tallyd_prog_why why);
/* Whether a chain of requests about j at sh is outstanding. */
bool tallyd_dpc_shard_busy(const struct tallyd_shard *sh);

/* Counters: an object of tally-dp's into c (missing ones are 0). */
void tallyd_dpc_read_ctr(json_t *o, struct tallyd_ctr *c);
/*
 * Adds shard sh's last reading to j's base: that instance's counting is
 * over.
 */
void tallyd_dpc_fold(struct tallyd_job *j, struct tallyd_shard *sh);
/*
 * Whether a job_list entry is j's programmed membership: j has one and
 * the entry's token_fp (if tally-dp shows it) is its wire token's.
 */
bool tallyd_dpc_entry_ours(const struct tallyd_job *j, json_t *entry);
/*
 * Takes an entry of j's own instance as shard sh's latest reading:
 * counters that went back fold the old reading first (the instance was
 * re-made).
 */
void tallyd_dpc_take(struct tallyd_job *j, struct tallyd_shard *sh,
	json_t *entry);

#endif /* TALLYD_DPC_H */

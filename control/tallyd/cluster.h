/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tallyd's state in etcd (state = etcd://..., docs/scale-out.md): the
 * jobs under /tally/v1/jobs/NAME, one key each, their values the state
 * file's job objects; the leader under /tally/v1/leader, a key bound to
 * its lease; next_epoch under /tally/v1/next_epoch. state_etcd.c reads,
 * writes and follows the keys; elect.c runs the election and the lease.
 * Every exchange with etcd has a deadline (etcd.c); an unreachable etcd
 * fails writes (and so the requests that need them) and is retried.
 */
#ifndef TALLYD_CLUSTER_H
#define TALLYD_CLUSTER_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "etcd.h"

struct tallyd;
struct tallyd_job;

#define TALLYD_KEY_PREFIX	"/tally/v1/"
#define TALLYD_KEY_JOBS		TALLYD_KEY_PREFIX "jobs/"
#define TALLYD_KEY_LEADER	TALLYD_KEY_PREFIX "leader"
#define TALLYD_KEY_EPOCH	TALLYD_KEY_PREFIX "next_epoch"
#define TALLYD_KEY_DPS		TALLYD_KEY_PREFIX "dataplanes/"

/* How many dataplanes have a liveness key: TALLYD_MAX_DPS (tallyd.h). */
#define TALLYD_CLUSTER_DPS	16

/* One dataplane's liveness key as the leader last put it (dplive.c). */
struct tallyd_dplive {
	int64_t lease;			/* its lease's ID; 0: none */
	char key[96];			/* TALLYD_KEY_DPS "IP:PORT" */
};

/* A job key as this tallyd last wrote or read it. */
struct tallyd_kv {
	char *name;
	int64_t mod_rev;
	char *text;		/* the value (compact JSON) */
	bool seen;		/* in the latest sync's range */
	struct tallyd_kv *next;
};

struct tallyd_cluster {
	struct tallyd_etcd *e;
	char node[160];			/* this tallyd: host, pid, addresses */
	unsigned int lease_s;		/* the leader key's lease TTL */
	bool synced;			/* the jobs were read once */
	bool up;			/* the last exchange worked */
	struct tallyd_kv *kvs;
	uint32_t saved_epoch;		/* next_epoch as last written */

	/* The election (elect.c). */
	bool leader;
	int64_t lease;			/* our lease's ID; 0: none */
	int64_t lease_ok_ms;		/* before the last good keepalive */
	int64_t leader_rev;		/* our leader key's create_revision */
	char leader_val[200];		/* the leader key's value; "" none */
	int64_t next_keepalive_ms;

	/* Each dataplane's liveness key, by index in d->dps (dplive.c). */
	struct tallyd_dplive dpl[TALLYD_CLUSTER_DPS];
	int64_t next_tick_ms;
	unsigned int down_turns;	/* turns in a row etcd did not answer */

	/* Counters (stats "tallyd"). */
	uint64_t leader_changes;	/* this tallyd became or stopped being
					 * the leader */
	uint64_t fenced;		/* writes refused: not the leader */
	uint64_t conflicts;		/* writes refused: a job key moved */
	uint64_t sync_failures;		/* reads of the jobs that failed */
	uint64_t down_logged_ms;
	int64_t fetched_ms;		/* tallyd_cluster_fetch(): this second's */
	unsigned int fetches;		/* start, and how many in it */
};

/*
 * Sets up d->cl when d->conf.state names etcd (else leaves it NULL: the
 * state file). Returns 0, or -EINVAL with why.
 */
int tallyd_cluster_open(struct tallyd *d, char *why, size_t wlen);

/* Gives up the leadership (the lease revoked, if etcd answers); frees. */
void tallyd_cluster_close(struct tallyd *d);

/* Whether this tallyd places and programs: always with a state file. */
bool tallyd_state_leads(const struct tallyd *d);

/*
 * The main loop's turn (elect.c): reads the jobs, keeps the lease alive
 * or campaigns. Returns the ms until it wants to run again.
 */
int64_t tallyd_cluster_tick(struct tallyd *d, int64_t now);

/*
 * dplive.c: the leader's turn for each dataplane's liveness key: put
 * under a lease of its own while that tally-dp answers, renewed at each
 * turn; left to expire when it stops answering.
 */
void tallyd_cluster_dp_turn(struct tallyd *d);

/* The dataplanes' live keys into a stats object (dplive.c). */
void tallyd_cluster_dp_stats(const struct tallyd *d, json_t *o);

/* Steps down (elect.c): why says what showed it; logged. */
void tallyd_cluster_step_down(struct tallyd *d, const char *why);

/*
 * state_etcd.c: reads every job key into d's jobs, merging with what d
 * has (new ones added, deleted ones dropped, changed ones updated; a
 * job's joiners and requests at tally-dp are kept). Returns 0 or -errno
 * (etcd's sentence in d->cl->e->error); the leader key's value into
 * d->cl->leader_val and its create_revision into *leader_rev (0: none).
 */
int tallyd_cluster_sync(struct tallyd *d, int64_t *leader_rev);

/*
 * Writes what changed since the last write or read: a put per job whose
 * value changed, a delete per job gone (and skip), in one txn whose
 * compares fence it: each job key's mod_revision as last seen, and, on
 * the leader, the leader key's create_revision. Returns 0, -EPERM (the
 * fence: no longer the leader; stepped down), -EAGAIN (a job key moved:
 * read again; retry), -EROFS (a follower creating or deleting a job) or
 * etcd's -errno; the sentence in why.
 */
int tallyd_cluster_save(struct tallyd *d, const struct tallyd_job *skip,
	char *why, size_t wlen);

/* Reads j's key again and takes its value if it moved (no-op on files). */
void tallyd_cluster_refresh(struct tallyd *d, struct tallyd_job *j);

/*
 * Reads job name's key (a join for a job this tallyd does not know yet)
 * and adds it: the job, or NULL (no such key, etcd down, or 50 such
 * reads in this second already: unknown names cannot keep etcd busy).
 */
struct tallyd_job *tallyd_cluster_fetch(struct tallyd *d, const char *name);

/* A control write's refusal on a follower: errno EROFS, the leader named. */
json_t *tallyd_cluster_refusal(const struct tallyd *d, const char *cmd);

/* Adds the backend, role and etcd counters to a stats object. */
void tallyd_cluster_stats(const struct tallyd *d, json_t *o);

/* state.c's job objects, shared with state_etcd.c. */
json_t *tallyd_state_job_json(const struct tallyd *d,
	const struct tallyd_job *j);
/*
 * Parses a job object into j (zeroed by the caller; not linked); its
 * shards name dataplanes of d's configuration (dps.c).
 */
int tallyd_state_parse_job(struct tallyd *d, json_t *o, struct tallyd_job *j,
	char *why, size_t wlen);

#endif /* TALLYD_CLUSTER_H */

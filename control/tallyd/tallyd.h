/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tallyd: the daemon's shared state. One struct tallyd owns the
 * configuration, the jobs, the listening sockets and their clients, and
 * the connection to tally-dp. Everything runs on one thread, in main.c's
 * poll loop; no locks.
 *
 * Who touches what: conf.c fills struct tallyd_conf; jobs.c creates,
 * finds and frees jobs and renders them as JSON; state.c writes and reads
 * the state file; dpc*.c talk to tally-dp without ever waiting on it
 * (dpc.c the request queue, dpc_ops.c memberships, dpc_poll.c the poll
 * and reconciliation, dpc_match.c job entries and counters); rdv.c runs
 * the rendezvous protocol and rdv_conn.c its connections (TLS in tls.c,
 * caps per source in srcs.c, the data address map in addrmap.c); ctl.c
 * serves tallyctl; main.c wires them together.
 */
#ifndef TALLYD_TALLYD_H
#define TALLYD_TALLYD_H

#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "tally/codec.h"
#include "tally/proto.h"
#include "tally/tally.h"
#include "rdv/msg.h"
#include "dplimits.h"

/* Dataplanes (tally-dp hosts) one tallyd drives, and one job spans. */
#define TALLYD_MAX_DPS		16
#define TALLYD_MAX_SHARDS	8
#define TALLYD_DP_NAME_MAX	31	/* characters of a dataplane's name */

/* A "dataplane = NAME ADMIN [ADDRESS]" line (conf.c). */
struct tallyd_conf_dp {
	char name[TALLYD_DP_NAME_MAX + 1];
	char admin[108];
	char address[16];		/* "" = ask tally-dp */
};

/* The configuration file's keys (docs/control.md). */
struct tallyd_conf {
	char control_socket[108];
	char control_group[64];		/* "" = leave the group alone */
	char rendezvous[64];		/* "IP:PORT" */
	char rendezvous_tls[4];		/* "on" or "off" (unsafe) */
	char rendezvous_tls_cert[256];	/* PEM chain, tallyd's first */
	char rendezvous_tls_key[256];	/* PEM private key */
	char rendezvous_data_map[256];	/* "" = none: member = peer */
	unsigned int rendezvous_max_conns;
	unsigned int rendezvous_max_per_source;	/* unauthenticated */
	unsigned int rendezvous_handshake_ms;	/* TLS + join deadline */
	char metrics[64];		/* "IP:PORT" or "off" */
	char state_file[256];
	char state[512];		/* "file[:PATH]" or "etcd://IP:PORT,..." */
	unsigned int state_lease_s;	/* etcd: the leader's lease TTL */
	char dp_admin[108];
	char dp_address[16];		/* "" = ask tally-dp */
	char dp_name[TALLYD_DP_NAME_MAX + 1]; /* dp_admin's dataplane */
	unsigned int ndataplanes;	/* more dataplanes ("dataplane") */
	struct tallyd_conf_dp dataplanes[TALLYD_MAX_DPS - 1];
	unsigned int dp_poll_ms;
	unsigned int dp_dead_polls;	/* missed polls that end epochs */
	unsigned int join_timeout_s;
	unsigned int idle_timeout_s;
	unsigned int drain_timeout_ms;
	unsigned int max_jobs;
};

/* Defaults, then FILE (may be NULL: none), then key=value overrides. */
void tallyd_conf_defaults(struct tallyd_conf *c);

/*
 * Applies one "key = value" line (comments and blank lines are fine).
 * seen tracks keys given already (bit per key; a key twice is an error).
 * Returns 0 or -EINVAL with the reason in why.
 */
int tallyd_conf_line(struct tallyd_conf *c, const char *line,
	uint64_t *seen, char *why, size_t wlen);

/* Reads a whole file through tallyd_conf_line(). why gets "FILE:LINE: ...". */
int tallyd_conf_load(struct tallyd_conf *c, const char *path, uint64_t *seen,
	char *why, size_t wlen);

/*
 * What a config check needs the system for: control_group must name a
 * group. Returns 0 or -EINVAL with the reason in why.
 */
int tallyd_conf_check(const struct tallyd_conf *c, char *why, size_t wlen);

/* Prints every key with its value, as a config file would have it. */
void tallyd_conf_dump(const struct tallyd_conf *c, FILE *f);

/* Per-job counters, as tally-dp's job_list reports them. */
struct tallyd_ctr {
	uint64_t contributions, elements, bytes_in, rounds, results,
		bytes_out, resent, nacks, drops, duplicates;
};

#define TALLYD_NCTR (sizeof(struct tallyd_ctr) / sizeof(uint64_t))
extern const char *const tallyd_ctr_names[];

enum tallyd_job_state {
	TALLYD_WAITING,		/* no membership yet */
	TALLYD_FORMING,		/* ranks are joining a new membership */
	TALLYD_READY,		/* a membership is programmed in tally-dp */
	TALLYD_DRAINING,	/* being deleted */
};

struct tallyd_member {
	uint32_t ip;		/* host order */
	uint16_t port;
	uint32_t qpn;		/* an RDMA job's member: its QP number
				 * (tally-dp's member is ip and qpn); 0 UDP */
};

struct tallyd_rdv;
struct tallyd_rdv_conn;
struct tallyd_ctl_client;

/* Why a membership is being programmed into tally-dp. */
enum tallyd_prog_why {
	TALLYD_PROG_BARRIER,	/* a new membership formed (rdv.c) */
	TALLYD_PROG_RESTORE,	/* tally-dp lost it (restarted) */
	TALLYD_PROG_MISMATCH,	/* tally-dp holds another configuration */
	TALLYD_PROG_EPOCH,	/* a new epoch after a dataplane died (epoch.c) */
	TALLYD_PROG_SPINE,	/* a tree's spine, added (again) (tree.c) */
};

/* A job's part in a two-tier tree (tree.c). */
#define TALLYD_TIER_SPINE	1
#define TALLYD_TIER_LEAF	2
#define TALLYD_TREE_MAX_LEAVES	64

enum tallyd_dp_op_kind { TALLYD_OP_NONE, TALLYD_OP_PROGRAM, TALLYD_OP_REMOVE };

/*
 * A job's outstanding work at tally-dp: at most one chain of requests at
 * a time (read the counters, job_del, job_add), each step queued by the
 * previous one's reply (dpc_ops.c).
 */
struct tallyd_dp_op {
	enum tallyd_dp_op_kind kind;
	enum tallyd_prog_why why;
	int stage;
	bool ours;		/* what job_del removes is j's membership */
	struct tallyd_member members[TALLY_MAX_WORKERS];
	uint64_t token;
};

/*
 * A job at one dataplane (a shard): its chain of requests there, and the
 * counters tally-dp reports for it there.
 */
struct tallyd_shard {
	unsigned int dp;		/* index in d->dps */
	struct tallyd_ctr last;		/* tally-dp's latest reading */
	bool in_dp;			/* tally-dp had it at the last poll */
	bool moved;			/* counters changed at the last poll */
	struct tallyd_dp_op op;		/* the chain (dpc_ops.c) */
	uint64_t opseq;			/* tallyd_dpc_seq() at its last request */
};

struct tallyd_job {
	char name[TALLY_RDV_NAME_MAX + 1];
	uint16_t id;			/* at the dataplane */
	uint8_t world;
	uint16_t window;
	uint16_t max_elems;
	bool narrow;
	bool rdma;			/* transport rdma: RoCEv2 UD to
					 * tally-dp's QPNs (docs/rdma.md) */
	uint32_t qkey;			/* its Q_Key, random, high bit clear */
	bool auth;			/* an authenticated job: tags */
	uint8_t auth_secret[32];	/* its secret (tallyd_auth_keys()) */
	uint32_t group_ip;		/* host order, 0: unicast */
	uint16_t group_port;
	unsigned int idle_timeout_s;	/* 0: never */
	char codec[TALLY_CODEC_SPEC_MAX]; /* canonical spec, <tally/codec.h> */
	uint8_t token_hash[32];		/* BLAKE2b of the 32-byte token */
	int64_t created;		/* Unix seconds */
	int64_t last_active;

	/* The programmed membership (valid when has_members). */
	bool has_members;
	struct tallyd_member members[TALLY_MAX_WORKERS];
	uint64_t wire_token;
	uint32_t epoch;

	/* The forming membership: a connection per rank that joined. */
	struct tallyd_rdv_conn *joiners[TALLY_MAX_WORKERS];
	unsigned int njoined;
	int64_t form_deadline_ms;	/* monotonic */
	bool program_pending;		/* complete, tally-dp did not take it */

	/* Counters: base folds in what earlier tally-dp lives counted. */
	struct tallyd_ctr base;

	/*
	 * Its shards: the dataplanes it spans (slot s at sh[s % nshards]),
	 * each programmed with the same membership and wire token.
	 */
	unsigned int nshards;
	struct tallyd_shard sh[TALLYD_MAX_SHARDS];
	int prog_left;			/* shards a barrier's program awaits */
	int prog_err;			/* its first failure */

	/*
	 * Epochs (epoch.c): formed_epoch is the epoch whose barrier formed
	 * members (rejoins naming formed_epoch..epoch are taken); ew says
	 * why the current epoch began; a remap whose program is under way
	 * or to be retried is remap_pending; ranks rejoining after a failed
	 * call wait in rejoiners until the epoch is programmed.
	 */
	uint32_t formed_epoch;
	struct tallyd_epoch_why {
		char cause[16];		/* "membership", "dataplane",
					 * "no_capacity"; "": unknown */
		char dataplane[TALLYD_DP_NAME_MAX + 1]; /* the dead one */
		char missed[96];	/* what it missed */
		int64_t at;		/* Unix seconds, when it was seen */
		uint32_t from;		/* the epoch it ended */
	} ew;
	bool remap_pending;
	struct tallyd_rdv_conn *rejoiners[TALLY_MAX_WORKERS];

	/*
	 * Two tiers (tree.c, docs/scale-out.md): a tree is its spine job,
	 * under the name the user gave, whose members are its leaves'
	 * dataplanes (programmed by tallyd at creation), and a leaf job per
	 * leaf dataplane, "NAME/L" (a name no join can ask for), all of one
	 * id. A leaf's world is tree_world / the spine's world.
	 */
	uint8_t tier;			/* TALLYD_TIER_*: 0 a flat job */
	uint8_t leaf;			/* a leaf: its rank in the spine */
	uint16_t tree_world;		/* a tree's total world */
	bool spine_fresh;		/* a leaf: the spine was added again
					 * for its forming membership */

	/* Deletion. */
	bool draining;
	int64_t drain_deadline_ms;
	struct tallyd_ctl_client *drain_waiter; /* gets the reply; may be NULL */

	struct tallyd_job *next;
};

/* tallyd's own counters (stats "tallyd"). */
enum tallyd_join_fail {
	TALLYD_JF_BAD_TOKEN,
	TALLYD_JF_UNKNOWN_JOB,
	TALLYD_JF_DUPLICATE_RANK,
	TALLYD_JF_WORLD_MISMATCH,
	TALLYD_JF_BAD_RANK,
	TALLYD_JF_TIMEOUT,
	TALLYD_JF_MALFORMED,
	TALLYD_JF_DRAINING,
	TALLYD_JF_DP_DOWN,
	TALLYD_JF_LIMITS,	/* the job no longer fits tally-dp's limits */
	TALLYD_JF_ADDRESS,	/* member address is not the peer's */
	TALLYD_JF_STALE_EPOCH,	/* a rejoin naming an epoch that is over */
	TALLYD_JF_NO_CAPACITY,	/* no live dataplane left for the job */
	TALLYD_JF_MAX_,
};

extern const char *const tallyd_jf_names[TALLYD_JF_MAX_];

struct tallyd_stats {
	uint64_t joins;		/* ranks that reached ready */
	uint64_t memberships;	/* memberships formed */
	uint64_t ring_memberships; /* of those, on the ring fallback */
	uint64_t join_failures[TALLYD_JF_MAX_];
	uint64_t ctl_requests;
	uint64_t ctl_errors;
	uint64_t dp_reprograms;	/* memberships put back after tally-dp lost them */
	uint64_t dp_errors;	/* admin requests that failed */
	uint64_t dp_timeouts;	/* of those, the ones past their deadline */
	uint64_t dp_mismatches;	/* jobs programmed again: tally-dp's differed */
	uint64_t dp_stale_removed; /* jobs removed from tally-dp: not tallyd's */

	/* Rendezvous connections closed before they joined a job. */
	uint64_t rdv_refused;	/* at once: the table was full of joined ones */
	uint64_t rdv_evicted_per_source; /* oldest of a source at its cap */
	uint64_t rdv_evicted_full;	/* oldest of all, the table full */
	uint64_t rdv_evicted_fds;	/* to free descriptors (EMFILE) */
	uint64_t rdv_fd_backoffs;	/* listener rested: no descriptors */
	uint64_t rdv_handshake_timeouts;	/* no join in handshake_ms */
	uint64_t rdv_tls_failures;	/* failed handshakes, cleartext joins */
	uint64_t state_saves;		/* state file written */
	uint64_t state_save_failures;	/* writes that failed */
	uint64_t ctl_send_failures;	/* control replies that could not be sent */
	uint64_t ctl_fd_backoffs;	/* control listener rested: no descriptors */
	uint64_t epochs_ended;	/* epochs ended by a dead dataplane */
	uint64_t rejoins;	/* ranks that rejoined a new epoch */
};

/* The state file's health (state.c). */
struct tallyd_statefile {
	char path[4096];	/* state_file, a symlink resolved; "": as is */
	bool failing;		/* the last save failed */
	int64_t retry_ms;	/* when the main loop tries again (monotonic) */
	unsigned int streak;	/* failed saves since the last good one */
	int64_t logged_ms;	/* when a failure was last logged */
	char error[512];	/* the last failure's sentence; "" if none */
	int64_t error_at;	/* and when (Unix seconds) */
};

struct tallyd_dpc;
struct tallyd_http;
struct tallyd_cluster;

/* One tally-dp that tallyd drives (dps.c). */
struct tallyd_dp {
	char name[TALLYD_DP_NAME_MAX + 1];
	char label[TALLYD_DP_NAME_MAX + 2]; /* " NAME" */
	char address[16];		/* "" = ask tally-dp */
	struct tallyd_dpc *dpc;		/* its admin socket */
	json_t *stats;			/* its last "stats", or NULL */
	struct tallyd_dp_limits limits;	/* its last ping's (limits.c) */
	/* Liveness (epoch.c): polls missed in a row, and since when. */
	unsigned int missed;
	bool ever_up;			/* answered since tallyd started */
	bool dead;			/* missed enough: its jobs move */
	int64_t down_since;		/* Unix seconds of the first miss */
};

struct tallyd {
	struct tallyd_conf conf;
	int64_t started;		/* Unix seconds */
	struct tallyd_job *jobs;
	unsigned int njobs;
	uint32_t next_epoch;
	struct tallyd_stats st;

	struct tallyd_dp dps[TALLYD_MAX_DPS]; /* dps[0]: dp_admin's */
	unsigned int ndps;

	int ctl_fd;			/* control socket listener */
	int64_t ctl_rest_until_ms;	/* not polled before: out of descriptors */
	struct tallyd_ctl_client *ctl_clients;
	int rdv_fd;			/* rendezvous listener */
	struct tallyd_rdv *rdv;		/* its connections (rdv.h) */
	struct tallyd_http *http;	/* NULL: metrics off */

	bool state_dirty;		/* memory has changes the file lacks */
	struct tallyd_statefile sf;
	struct tallyd_cluster *cl;	/* state in etcd (cluster.h); NULL:
					 * the state file */
	volatile int stop;
};

/* Monotonic milliseconds, and wall-clock seconds. */
int64_t tallyd_now_ms(void);
int64_t tallyd_wall_s(void);

/* jobs.c */
struct tallyd_job *tallyd_job_find(struct tallyd *d, const char *name);
struct tallyd_job *tallyd_job_find_id(struct tallyd *d, uint16_t id);

/*
 * Creates a job from a job_create request's fields (j: name, world,
 * window, max_elems, narrow, group, idle_timeout_s set by the caller),
 * gives it an id and a fresh token; writes the token's 64 hex digits and
 * a NUL to token_hex. Returns the job (owned by d), or NULL with errno
 * EEXIST (name taken), ENOSPC (max_jobs, or no free id).
 */
struct tallyd_job *tallyd_job_create(struct tallyd *d,
	const struct tallyd_job *j, char token_hex[TALLY_RDV_TOKEN_HEX + 1]);

/* Puts j (not in the list yet) into d's list, which is in id order. */
void tallyd_job_link(struct tallyd *d, struct tallyd_job *j);

/* Unlinks and frees j; its joiners must be gone. */
void tallyd_job_free(struct tallyd *d, struct tallyd_job *j);

/*
 * auth.c: member rank's keys in j's membership of wire token wire_token
 * (j authenticated), into *out.
 */
void tallyd_auth_keys(const struct tallyd_job *j, uint64_t wire_token,
	unsigned int rank, struct tally_auth_keys *out);

/* 1 if hex (64 digits) is j's token; constant time in its content. */
int tallyd_job_token_ok(const struct tallyd_job *j, const char *hex);

enum tallyd_job_state tallyd_job_state(const struct tallyd_job *j);
const char *tallyd_job_state_name(enum tallyd_job_state s);

/* Sum of base and every shard's last. */
void tallyd_job_counters(const struct tallyd_job *j, struct tallyd_ctr *c);

/* The job object of docs/control.md; members only when with_members. */
json_t *tallyd_job_json(const struct tallyd_job *j, bool with_members);

/* tallyd's "stats"/"tallyd" object. */
json_t *tallyd_stats_json(const struct tallyd *d);

/*
 * state.c. tallyd_state_save_except() writes every job but skip (NULL:
 * all of them) to the state file, durably: a temporary file beside it,
 * written and fsynced, renamed over it, and the directory fsynced. It
 * returns 0 (d->state_dirty cleared), or -errno of the first step that
 * failed, with "cannot save state file PATH: REASON" in d->sf.error, the
 * failure counted and logged, and d->state_dirty set so that
 * tallyd_state_flush() tries again. Whoever replies to a change calls it
 * before the reply; changes nobody is told about set d->state_dirty.
 */
int tallyd_state_save_except(struct tallyd *d, const struct tallyd_job *skip);
int tallyd_state_save(struct tallyd *d);

/*
 * The main loop's save: writes when d->state_dirty, a failed save again
 * a second later. Returns the milliseconds until it wants to run again
 * (-1: nothing pending).
 */
int64_t tallyd_state_flush(struct tallyd *d, int64_t now);

/*
 * Reads the state file. A missing file in an existing directory is a
 * first start (0, no jobs); a missing directory, a dangling symlink (the
 * directory or the file) or a file that does not parse is an error
 * (-errno, why says which). A symlinked file is written through to its
 * target from then on.
 */
int tallyd_state_load(struct tallyd *d, char *why, size_t wlen);

/* Adds the state file's counters and last error to a stats object. */
void tallyd_state_stats(const struct tallyd *d, json_t *o);

/*
 * dps.c: the dataplanes of the configuration, dps[0] from dp_admin and
 * dp_address (named dp_name), then each "dataplane" line in order.
 * tallyd_dps_open() makes their clients: 0, or -errno with why.
 */
int tallyd_dps_open(struct tallyd *d, char *why, size_t wlen);
void tallyd_dps_close(struct tallyd *d);
/*
 * How logs name dataplane dp after "tally-dp": "" while tallyd drives
 * one (the messages of a single tally-dp stay as they were), else " NAME".
 */
const char *tallyd_dp_label(const struct tallyd *d, unsigned int dp);
/* The index of the dataplane called name, or -1. */
int tallyd_dp_find(const struct tallyd *d, const char *name);
/* Whether every dataplane is up (the "dp_up" of ping and stats). */
bool tallyd_dps_up(const struct tallyd *d);
/* The "dataplanes" array of stats: name, admin socket, up, address. */
json_t *tallyd_dps_json(struct tallyd *d);
/* j's shard at dataplane dp, or NULL when j does not span it. */
struct tallyd_shard *tallyd_job_shard(struct tallyd_job *j, unsigned int dp);
/*
 * j's "shards" for job show ([{dataplane, up, in_dp, counters}]), and
 * for the state file (show false: [{dataplane, counters_last}]).
 */
json_t *tallyd_shards_json(const struct tallyd *d,
	const struct tallyd_job *j, bool show);
/*
 * The state file's "shards" of j (NULL: one shard, dps[0]) into j.
 * Returns 0, or -EINVAL with why for a dataplane the config lacks.
 */
int tallyd_shards_load(struct tallyd *d, struct tallyd_job *j, json_t *a,
	char *why, size_t wlen);

/*
 * dpc.c: a tally-dp's admin socket, never waited on: requests are queued
 * and answered through the poll loop (docs/control.md, "tallyd and
 * tally-dp"). A tally-dp is "down" from a failed exchange (no
 * connection, a deadline passed) until the next one succeeds. Each
 * dataplane d->dps[dp] has its own client.
 */
struct tallyd_dpc *tallyd_dpc_create(unsigned int dp, const char *path);
void tallyd_dpc_destroy(struct tallyd_dpc *c);
bool tallyd_dpc_up(const struct tallyd_dpc *c);
/*
 * Whether tally-dp is dead, not merely stalled: down because nothing
 * listens on its admin socket (refused, no socket) or it closed the
 * connection, not because its answers are late (a stopped process).
 * The ring fallback takes the former only.
 */
bool tallyd_dpc_dead(const struct tallyd_dpc *c);

/*
 * Dataplane dp's address and port range for workers (from the config or
 * tally-dp's ping). Returns 0, or -EHOSTDOWN while tally-dp is unknown.
 */
int tallyd_dpc_endpoint(struct tallyd *d, unsigned int dp, uint32_t *ip,
	uint16_t *port, uint16_t *nports);

/*
 * Dataplane dp's RoCEv2 QPNs (one per worker lcore, from its info reply)
 * into qpns (TALLY_RDV_MAX_QPNS room) and *n: 0, or -EPROTONOSUPPORT
 * when it advertised none.
 */
int tallyd_dpc_qpns(struct tallyd *d, unsigned int dp, uint32_t *qpns,
	uint16_t *n);

/* Dataplane dp's admin connection's pollfd (fd -1 while there is none). */
void tallyd_dpc_pollfd(struct tallyd *d, unsigned int dp, struct pollfd *p);
/* Handles the connection's revents. */
void tallyd_dpc_event(struct tallyd *d, unsigned int dp, short revents);
/*
 * Deadlines and failed requests of every dataplane; returns ms to the
 * next deadline.
 */
int64_t tallyd_dpc_timers(struct tallyd *d, int64_t now);
/* j is being freed: requests about it go on without it. */
void tallyd_dpc_forget(struct tallyd *d, struct tallyd_job *j);

/* dpc_ops.c: whether a chain of requests about j is outstanding. */
bool tallyd_dpc_busy(const struct tallyd_job *j);

/*
 * Programs the membership (members of j->world ranks, wire token) into
 * every shard of j, replacing what each tally-dp holds under j's id;
 * the final counters of the membership it replaces are folded into j's.
 * When every shard took it, j's members and wire_token become these,
 * has_members true. When all are done, tallyd_rdv_programmed(d, j, 0 or
 * the first -errno). Returns 0 (under way) or -EBUSY (a chain about j
 * is outstanding).
 */
int tallyd_dpc_program(struct tallyd *d, struct tallyd_job *j,
	const struct tallyd_member *members, uint64_t wire_token);

/*
 * As tallyd_dpc_program() with j's own members and a new wire token,
 * for a new epoch on j's (remapped) shards: tallyd_epoch_programmed()
 * hears the end instead of the rendezvous.
 */
int tallyd_dpc_program_epoch(struct tallyd *d, struct tallyd_job *j,
	uint64_t wire_token);

/*
 * Removes j from the tally-dp of shard sh, folding its final counters
 * into j's; when done, tallyd_job_delete_step() runs. Returns 0 (under
 * way), -EBUSY or -ENOMEM.
 */
int tallyd_dpc_remove(struct tallyd *d, struct tallyd_job *j,
	struct tallyd_shard *sh);

/*
 * dpc_poll.c: starts a poll of every dataplane (unless one is under way
 * there): reads its jobs and counters page by page, reconciles its job
 * table with tallyd's shards there (removes what tallyd does not own,
 * programs again what is missing or differs), refreshes its stats, then
 * retries pending barriers.
 */
void tallyd_dpc_poll(struct tallyd *d);

/*
 * Whether tally-dp's job_list entry differs from j's programmed
 * membership (world, window, max_elems, narrow, members, group, and the
 * token when the entry has token_fp). Returns 1 with the first
 * difference named in what ("window 32, not 64"), or 0.
 */
int tallyd_dpc_entry_differs(const struct tallyd_job *j, json_t *entry,
	char *what, size_t wlen);

/* rdv_conn.c: the rendezvous' connections. */

/*
 * Opens the rendezvous: loads the TLS certificate and key (unless
 * rendezvous_tls is off) and the data address map, fits the connection
 * cap to the open-file limit (raising the soft limit when it can), and
 * listens. Returns 0, or -errno with the reason in why.
 */
int tallyd_rdv_listen(struct tallyd *d, char *why, size_t wlen);
void tallyd_rdv_close_all(struct tallyd *d);
/* The listener to poll now; -1 while it rests (out of descriptors). */
int tallyd_rdv_listen_fd(const struct tallyd *d, int64_t now);
/* Connections open now, and the most that may be. */
unsigned int tallyd_rdv_count(const struct tallyd *d);
unsigned int tallyd_rdv_cap(const struct tallyd *d);
/* Fills pollfds for the connections; returns how many. */
unsigned int tallyd_rdv_pollfds(struct tallyd *d, struct pollfd *p,
	unsigned int max);
void tallyd_rdv_accept(struct tallyd *d);
void tallyd_rdv_event(struct tallyd *d, int fd, short revents);

/* rdv.c: the rendezvous protocol and the join barrier. */
/* Completes barriers that waited for tally-dp to come back. */
void tallyd_rdv_retry(struct tallyd *d);
/* dpc_ops.c's answer to a barrier's tallyd_dpc_program(). */
void tallyd_rdv_programmed(struct tallyd *d, struct tallyd_job *j, int err);
/* Join timeouts and idle connections; returns ms to the next deadline. */
int64_t tallyd_rdv_timers(struct tallyd *d, int64_t now);
/* Fails every rank waiting on j with err (a positive errno). */
void tallyd_rdv_fail_job(struct tallyd *d, struct tallyd_job *j, int err,
	enum tallyd_join_fail why, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));

/*
 * epoch.c (docs/scale-out.md, "Epochs"). tallyd_epoch_tick() runs with
 * each poll: it counts the polls each dataplane missed, declares one dead
 * after dp_dead_polls (etcd: once its liveness lease ran out), and moves
 * every job that spans it to the live or spare dataplanes under a new
 * wire token and epoch; it also retries such programs and times out
 * rejoiners.
 */
void tallyd_epoch_tick(struct tallyd *d, int64_t now);
/*
 * The shards a job on dataplanes cur[0..n-1] gets when only those in
 * the bit mask live are alive (ndps dataplanes): survivors in order, a
 * dead one replaced in place by the first live dataplane the job does
 * not span (a spare), else dropped. Writes out (n room); returns how
 * many (0: no capacity).
 */
unsigned int tallyd_epoch_plan(const unsigned int *cur, unsigned int n,
	uint32_t live, unsigned int ndps, unsigned int *out);
/*
 * Whether rank's rejoin naming epoch e may join j's current epoch:
 * 0, or -EINVAL (an epoch j has not had yet) or -ESTALE (its membership
 * is over), with the sentence in why.
 */
int tallyd_epoch_rejoin_check(const struct tallyd_job *j, uint32_t e,
	char *why, size_t wlen);
/* Whether every dataplane j spans is dead (the rendezvous' ENOSPC). */
bool tallyd_epoch_no_capacity(const struct tallyd *d,
	const struct tallyd_job *j);
/* A barrier formed j's membership: its epoch and why, in j. */
void tallyd_epoch_formed(struct tallyd_job *j);
/* dpc_ops.c's answer to an epoch's program (err 0 or -errno). */
void tallyd_epoch_programmed(struct tallyd *d, struct tallyd_job *j, int err);
/* Sends ready to j's waiting rejoiners if its epoch is settled. */
void tallyd_epoch_release(struct tallyd *d, struct tallyd_job *j);
/* j's "epoch_reason" for job show and the state, or null. */
json_t *tallyd_epoch_json(const struct tallyd_job *j);
/* The state's "epoch_reason" and "formed_epoch" of o into j: 0/-EINVAL. */
int tallyd_epoch_load(struct tallyd_job *j, json_t *o, char *why,
	size_t wlen);

/*
 * tree.c: two-tier jobs (docs/scale-out.md, "Two tiers").
 * tallyd_tree_create() makes the tree r asks for (t: the job's settings,
 * as for a flat job): the spine job at r->spine, programmed at once, and
 * a leaf job per r->leaves; the spine's token is written to token_hex
 * (workers join the tree by its name with it). Returns 0 with the spine
 * in *out, or -errno with the sentence in why.
 */
struct tallyd_ctl_req;
int tallyd_tree_create(struct tallyd *d, const struct tallyd_ctl_req *r,
	const struct tallyd_job *t, struct tallyd_job **out,
	char token_hex[TALLY_RDV_TOKEN_HEX + 1], char *why, size_t wlen);
/*
 * The leaf of spine that total rank belongs to (contiguous blocks),
 * with the rank in it in *leaf_rank; NULL when rank is out of range or
 * the leaf is missing.
 */
struct tallyd_job *tallyd_tree_leaf_of(struct tallyd *d,
	const struct tallyd_job *spine, unsigned int rank,
	unsigned int *leaf_rank);
/* Leaf l's name, "SPINE/L", into out (TALLY_RDV_NAME_MAX + 1 bytes). */
void tallyd_tree_leaf_name(const char *spine, unsigned int l, char *out);
/* A leaf's spine job, or NULL. */
struct tallyd_job *tallyd_tree_spine(struct tallyd *d,
	const struct tallyd_job *leaf);
/* A leaf's world: its share of the tree's. */
unsigned int tallyd_tree_leaf_world(const struct tallyd_job *spine);
/*
 * A leaf's job_add "upstream" object (the spine's address, ports and
 * wire token, the leaf's rank, the total world), or NULL while the
 * spine or its address is unknown.
 */
json_t *tallyd_tree_upstream(struct tallyd *d, const struct tallyd_job *leaf);
/*
 * A leaf's barrier completed: whether its membership may be programmed
 * now. The first time, the spine is added again (fresh slots for the
 * leaf's new rounds) and false is returned; tallyd_tree_spine_done()
 * retries the barrier once that is done.
 */
bool tallyd_tree_barrier_ready(struct tallyd *d, struct tallyd_job *leaf);
/* dpc_ops.c: the spine's program is over (err 0 or -errno). */
void tallyd_tree_spine_done(struct tallyd *d, struct tallyd_job *spine,
	int err);
/* job show's "tree" of a spine: the total world, spine, leaves. */
json_t *tallyd_tree_json(struct tallyd *d, const struct tallyd_job *spine);
/* A job's state keys ("tier", "leaf", "tree_world") into o, and back. */
void tallyd_tree_state_json(const struct tallyd_job *j, json_t *o);
int tallyd_tree_state_load(struct tallyd_job *j, json_t *o, char *why,
	size_t wlen);
/* Whether name is a job's: a rendezvous name, or a leaf's "NAME/L". */
bool tallyd_tree_name_ok(const char *name);
/* A job with j's id that is not part of j's tree (a clash), or NULL. */
struct tallyd_job *tallyd_tree_id_clash(struct tallyd *d,
	const struct tallyd_job *j);
/* The job with id that has a shard at dataplane dp (else any with id). */
struct tallyd_job *tallyd_job_find_at(struct tallyd *d, uint16_t id,
	unsigned int dp);
/* Deletes spine's leaves, then the spine (its waiter gets the reply). */
void tallyd_tree_delete(struct tallyd *d, struct tallyd_job *spine,
	struct tallyd_ctl_client *waiter);
/*
 * When j was last active: its own last_active, and for a tree's spine
 * the latest of its leaves' too (now while one is forming).
 */
int64_t tallyd_tree_last_active(struct tallyd *d, const struct tallyd_job *j);
/* Whether a draining spine still has leaves (its delete waits). */
bool tallyd_tree_leaves_left(struct tallyd *d, const struct tallyd_job *spine);

/* ctl.c */
int tallyd_ctl_listen(struct tallyd *d);
void tallyd_ctl_close_all(struct tallyd *d);
unsigned int tallyd_ctl_pollfds(struct tallyd *d, struct pollfd *p,
	unsigned int max);
void tallyd_ctl_accept(struct tallyd *d);
/* The listener to poll now; -1 while it rests (out of descriptors). */
int tallyd_ctl_listen_fd(const struct tallyd *d, int64_t now);
void tallyd_ctl_event(struct tallyd *d, int fd, short revents);
/*
 * The largest control-socket reply (docs/control.md): listings are paged
 * to fit it, and any other reply over it becomes an EMSGSIZE error.
 */
#define TALLYD_CTL_REPLY_MAX	(64 * 1024)

/*
 * Sends a reply to a client, if it is still connected (c NULL: none).
 * Consumes r (NULL: out of memory). A reply that cannot be sent is
 * counted in ctl_send_failures and logged.
 */
void tallyd_ctl_reply(struct tallyd *d, struct tallyd_ctl_client *c,
	json_t *r);

/* main.c / jobs.c: deletion, finished by the poll once drained. */
void tallyd_job_delete_start(struct tallyd *d, struct tallyd_job *j,
	struct tallyd_ctl_client *waiter);
void tallyd_job_delete_step(struct tallyd *d, int64_t now);

/*
 * The end of a deletion, once j is out of tally-dp (or its drain timed
 * out): the state file is written without j before anyone is told. Then
 * j is freed and its waiter gets {"errno": 0}. If the write fails, j is
 * kept as it was before the delete (not draining; a membership it had
 * is programmed into tally-dp again at the next poll) and the waiter gets
 * the save's errno and sentence.
 */
void tallyd_job_delete_finish(struct tallyd *d, struct tallyd_job *j);

/* Logging to stderr (journald adds the time). */
void tallyd_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif /* TALLYD_TALLYD_H */

/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tally-dp: the application's shared state. One struct tally_dp owns the
 * port, the mempools, the per-lcore state and the jobs; main.c creates
 * it, the lcores read it, the control thread (main lcore) changes jobs.
 */
#ifndef TALLY_DP_DP_H
#define TALLY_DP_DP_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <rte_mempool.h>
#include <rte_rcu_qsbr.h>
#include <rte_ring.h>

#include "agg/agg.h"
#include "net/net.h"
#include "net/roce.h"

#define TALLY_DP_MAX_WORKERS	16	/* worker lcores, one UDP port each */
#define TALLY_DP_BURST		32
/* RoCEv2 results leave from UDP port TALLY_DP_ROCE_SPORT + lcore index. */
#define TALLY_DP_ROCE_SPORT	49152

/* Counters of one worker lcore, beyond the engine's. Only it writes. */
struct tally_dp_stats {
	uint64_t rx;		/* frames received from the port */
	uint64_t tx;		/* frames handed to the port */
	uint64_t tx_dropped;	/* frames the port did not take */
	uint64_t results;	/* result packets built (one per member) */
	uint64_t arp_replies;
	uint64_t icmp_replies;
	uint64_t dispatched;	/* tally frames passed to their owner lcore */
	uint64_t ring_full;	/* ... that found its ring full */
	uint64_t no_neigh;	/* result for a member whose MAC is unknown */
	uint64_t no_mbuf;	/* pool empty when building a result */
	uint64_t too_big;	/* result frames not sent: larger than the
				 * port's MTU */
	uint64_t arp_refused;	/* ARP that claimed a known address for
				 * another MAC: not learned */
	uint64_t misrouted;	/* slot sent to another lcore's UDP port */
	uint64_t idle_sleeps;	/* waits of the idle back-off (idle.c) */
	uint64_t upstream;	/* a leaf's rounds sent to its spine */
	uint64_t upstream_bcast; /* ... to the Ethernet broadcast address:
				 * the spine's MAC not learned yet */
	uint64_t net_drops[TALLY_NET_DROP_MAX_];
	uint64_t roce_drops[TALLY_ROCE_DROP_MAX_];	/* RoCEv2 refusals */
};

struct tally_dp;

struct tally_dp_lcore {
	struct tally_dp *dp;
	unsigned int lcore_id;
	uint16_t index;		/* 0.. nworkers-1: owns UDP port base+index
				 * and RoCEv2 QPN qpn_base+index */
	uint16_t rxq;		/* rx queue it polls; UINT16_MAX: none */
	uint16_t txq;
	struct rte_ring *ring;	/* frames other lcores received for it */
	struct tally_net_neigh *neigh;
	struct out *out;	/* frames waiting for the port */
	int idle_fd;		/* the port's socket it waits on when idle;
				 * -1: it sleeps (idle.c) */
	struct tally_agg_stats agg;
	struct tally_dp_stats st;
} __rte_cache_aligned;

/*
 * Counters of one job on one lcore (a row): each lcore counts verdicts
 * into its own row, and readers sum the rows. Cache-aligned so no two
 * lcores share a line.
 */
struct tally_job_ctr {
	uint64_t contributions;	/* contributions counted into a slot */
	uint64_t elements;	/* their elements */
	uint64_t bytes_in;	/* their UDP payload bytes */
	uint64_t rounds;	/* rounds completed */
	uint64_t results;	/* result frames sent (resent ones too) */
	uint64_t bytes_out;	/* their UDP payload bytes */
	uint64_t resent;	/* retransmissions answered from a stored result */
	uint64_t nacks;		/* refusals answered with a NACK */
	uint64_t drops;		/* refusals once the job was known: token,
				 * rank, source */
	uint64_t duplicates;	/* retransmissions to a round still open,
				 * dropped: the member was already counted,
				 * so the retransmission was needless */
} __attribute__((aligned(64)));

/*
 * tally-dp's part of a job, beside the engine's struct tally_job (which
 * holds it in job->ext): the job's counter rows, one a worker lcore, and
 * the headers of its result frames, one template a member (and one for
 * its multicast group), built once when the job is added (jobs.c).
 * Immutable but for the counters; freed with the job, after the grace
 * period.
 */
struct tally_dp_jobx {
	struct tally_job_ctr ctr[TALLY_DP_MAX_WORKERS];
	union {		/* by rank; conf.roce says which */
		struct tally_net_tmpl member[TALLY_MAX_WORKERS];
		struct tally_roce_tmpl rmember[TALLY_MAX_WORKERS];
	};
	union {		/* when conf.group.ip != 0 */
		struct tally_net_tmpl group;
		struct tally_roce_tmpl rgroup;
	};
	struct rte_ether_addr group_mac;
	unsigned int encs;		/* encodings declared (TALLY_ENC_BIT) */
	uint64_t mem;			/* bytes charged to the budget */
};

/* The tally-dp part of a job that tally_dp_job_add() made. */
static inline struct tally_dp_jobx *
tally_dp_jobx(const struct tally_job *job)
{
	return job->ext;
}

struct tally_dp {
	/* Set up once by main.c; read-only afterwards. */
	uint16_t port_id;
	uint16_t nb_rxq;
	struct tally_net_self self;
	struct rte_mempool *pool;	/* rx frames, result bodies */
	struct rte_mempool *hdr_pool;	/* results' header mbufs and their
					   indirect mbufs (dp->pool itself
					   when the port takes no chains) */
	unsigned int idle_us;		/* 0: busy poll */
	int steer_flow;			/* 1: rte_flow steers; 0: software */
	int tx_chains;			/* port sends chained mbufs */
	uint16_t nworkers;
	struct tally_dp_lcore lcores[TALLY_DP_MAX_WORKERS];
	struct rte_rcu_qsbr *qsbr;
	unsigned int max_jobs;
	uint16_t mtu;			/* the port's L3 MTU (port.c) */
	uint16_t max_mtu;		/* the most the port's pool carries */
	uint64_t mem_budget;		/* bytes all jobs may hold; 0: any */
	uint64_t max_job_mem;		/* bytes one job may hold; 0: any */
	volatile int stop;

	/* The job table the lcores read; swapped by the control thread. */
	_Atomic(struct tally_jobtab *) tab;

	/* Control side only, under lock: the jobs the table was built of. */
	pthread_mutex_t lock;
	struct tally_job **jobs;	/* njobs of them, by ascending id */
	unsigned int njobs;
	uint64_t mem_used;		/* bytes the jobs hold (jobx->mem) */

	/* The admin socket's own counters: admin.c writes them. */
	struct {
		uint64_t requests;	/* requests answered */
		uint64_t clients;	/* connections accepted */
		uint64_t refused;	/* ... closed at once: too many */
		uint64_t slow;		/* ... closed: replies piled up */
		uint64_t stale;		/* requests not run: their client
					 * had hung up before they were read */
	} admin;
};

/* lcore.c: the worker loop, launched on every worker lcore. */
struct out;
int tally_dp_lcore_init(struct tally_dp_lcore *lc);
void tally_dp_lcore_fini(struct tally_dp_lcore *lc);
int tally_dp_lcore_main(void *arg);
/* One pass of the loop; returns the frames taken. */
uint16_t tally_dp_lcore_poll(struct tally_dp_lcore *lc);

/* idle.c: the idle back-off of a worker lcore (--idle-us, --idle-wait). */
int tally_dp_idle_init(struct tally_dp *dp, int want_socket);
void tally_dp_idle(struct tally_dp *dp, struct tally_dp_lcore *lc,
	unsigned int *idle);

/* port.c: configures and starts the port; fills dp->self.mac, dp->mtu
 * and dp->max_mtu; -EMSGSIZE when mtu is over dp->max_mtu (af_xdp). */
int tally_dp_port_init(struct tally_dp *dp, unsigned int nb_mbufs,
	uint16_t mtu);
void tally_dp_port_close(struct tally_dp *dp);

/*
 * xdp_pool.c: the mbuf pool of a net_af_xdp port, every object one frame
 * of TALLY_DP_XDP_FRAME bytes, so that the UMEM the driver registers
 * covers all of it; and the check that it does.
 */
#define TALLY_DP_XDP_FRAME	4096u
struct rte_mempool *tally_dp_xdp_pool_create(const char *name,
	unsigned int n, unsigned int cache, uint16_t room, int socket);
int tally_dp_xdp_pool_check(struct rte_mempool *mp, unsigned int *outside);
/* The kernel's XDP_PACKET_HEADROOM: af_xdp receives this far into a room. */
#define TALLY_DP_XDP_HEADROOM	256u
uint16_t tally_dp_xdp_max_mtu(struct rte_mempool *mp);

/* jobs.c: the control side of the job table. */
int tally_dp_jobs_init(struct tally_dp *dp);
/*
 * Whether tally-dp can serve a job of conf whose members send the
 * encodings encs (TALLY_ENC_BIT mask) at full length: its memory against
 * max_job_mem, its largest packet against the port's MTU and the mbufs.
 * Returns 0, -E2BIG (memory) or -EMSGSIZE (packets) with a sentence in
 * why (wlen bytes). The total budget is add's to check.
 */
int tally_dp_job_check(const struct tally_dp *dp,
	const struct tally_job_conf *conf, unsigned int encs, char *why,
	size_t wlen);
/*
 * Adds a job (after tally_dp_job_check(), which it runs too). Returns 0,
 * -EEXIST, -ENOSPC (max_jobs), -ENOMEM (the budget or memory), or what
 * the check returns; a sentence in why.
 */
int tally_dp_job_add(struct tally_dp *dp, const struct tally_job_conf *conf,
	unsigned int encs, char *why, size_t wlen);
/*
 * Removes job id. When final is not NULL it receives the job's counters
 * summed over its rows, read once no lcore can reach the job any more.
 * Returns 0 or -ENOENT.
 */
int tally_dp_job_del(struct tally_dp *dp, uint16_t id,
	struct tally_job_ctr *final);
/*
 * The largest max_elems whose packets (in encodings encs, results narrow
 * or not) fit tally-dp's RoCEv2 path MTU and its mbufs: a RoCEv2 job's
 * default. 0 when RoCEv2 is off or not even one element fits.
 */
unsigned int tally_dp_roce_max_elems(const struct tally_dp *dp,
	unsigned int encs, int narrow);
/* The index in dp->jobs of the first job whose id is above after. */
unsigned int tally_dp_job_after(const struct tally_dp *dp, uint32_t after);
void tally_dp_jobs_fini(struct tally_dp *dp);

/* stats.c: counters summed over lcores, with names. */
struct tally_dp_counter {
	const char *name;
	uint64_t value;
};
/*
 * Fills up to max counters of lcore index (or of all lcores summed when
 * index < 0) and returns how many there are.
 */
unsigned int tally_dp_counters(const struct tally_dp *dp, int index,
	struct tally_dp_counter *out, unsigned int max);
/*
 * Fills up to max counters of job (its rows summed over worker lcores)
 * and returns how many there are. The caller holds dp->lock.
 */
unsigned int tally_dp_job_counters(const struct tally_dp *dp,
	const struct tally_job *job, struct tally_dp_counter *out,
	unsigned int max);
/* job's rows summed over worker lcores, into *sum. */
void tally_dp_job_sum(const struct tally_dp *dp, const struct tally_job *job,
	struct tally_job_ctr *sum);
/* Names and values of a summed row, as tally_dp_job_counters() gives. */
unsigned int tally_dp_ctr_list(const struct tally_job_ctr *sum,
	struct tally_dp_counter *out, unsigned int max);

/* admin.c: the admin socket, served from the main lcore. */
/*
 * Listens on path. A socket file there is taken over only when nobody
 * answers on it (a stale one); returns the listening fd, -EADDRINUSE
 * when a live process owns the path, -EEXIST when it is not a socket of
 * ours (a file, or a socket of another type), or another -errno.
 */
int tally_dp_admin_open(const char *path);
/* Serves requests until dp->stop; returns 0, or -errno on a fatal error. */
int tally_dp_admin_serve(struct tally_dp *dp, int fd);
/* Handles one request text; returns a reply the caller frees. */
char *tally_dp_admin_handle(struct tally_dp *dp, const char *req,
	size_t len);

/* telemetry.c: /tally/stats and /tally/jobs. */
int tally_dp_telemetry_init(struct tally_dp *dp);

#endif /* TALLY_DP_DP_H */

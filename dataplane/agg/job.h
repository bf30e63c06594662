/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A job: its configuration (members, token, slot window) and the state of
 * its slots. The control thread creates and destroys jobs; lcores reach
 * them through a job table (jobtab.h) and touch only the slots they own.
 */
#ifndef TALLY_AGG_JOB_H
#define TALLY_AGG_JOB_H

#include <stdint.h>

#include <tally/mac.h>
#include <tally/proto.h>

/* A member's UDP source, both fields in network order; 0 matches any. */
struct tally_addr {
	uint32_t ip;
	uint16_t port;
};

/*
 * Two tiers (docs/scale-out.md, "Two tiers"): a leaf job is one rank of
 * a spine job of the same id at another tally-dp. A completed round goes
 * there as this rank's contribution (in 32-bit lanes), and the spine's
 * result becomes the round's result (dataplane/agg/tier.c).
 */
struct tally_job_up {
	uint32_t ip;		/* the spine's address, network order; 0: no
				 * upstream (a plain job) */
	uint16_t port;		/* its first UDP port, network order */
	uint16_t nports;	/* its ports: slot s goes to port + s %
				 * nports; 0 counts as 1 */
	uint64_t token;		/* the spine job's wire token */
	uint8_t rank;		/* this leaf's rank in the spine job */
	uint16_t world;		/* ranks under every leaf: the total world
				 * (a sign vote's majority counts them) */
};

struct tally_job_conf {
	uint16_t id;
	uint64_t token;
	uint8_t world;		/* members, 1..TALLY_MAX_WORKERS */
	uint16_t window;	/* slots, 1..TALLY_MAX_WINDOW */
	uint16_t max_elems;	/* elements a packet, 1..TALLY_MAX_ELEMS */
	uint8_t narrow;		/* results in the contributions' width */
	uint16_t nports;	/* ports the slots are spread over (tally-dp:
				 * its worker lcores): slot s arrives on
				 * port s % nports, each port's frames from
				 * a member in the order it sent them; 0
				 * counts as 1 */
	struct tally_addr members[TALLY_MAX_WORKERS]; /* by rank */
	struct tally_addr group; /* results to this IPv4 multicast group
				  * and port, one frame a round; ip 0:
				  * to every member (the engine ignores it) */
	uint8_t roce;		/* members are RoCEv2 UD QPs, (ip, qpn[r]);
				 * members[r].port is then 4791, what
				 * tally-dp's RoCE path gives the engine as
				 * the source port (the engine ignores the
				 * rest: tally-dp checks Q_Key and QPN) */
	uint32_t qkey;		/* RoCEv2: the job's Q_Key */
	uint32_t qpn[TALLY_MAX_WORKERS]; /* RoCEv2: members' QPNs, by rank */
	uint8_t auth;		/* every packet carries a tag (flag AUTH,
				 * docs/protocol.md "Authenticated jobs") */
	uint8_t key_result[TALLY_KEY_LEN]; /* auth: the results' key */
	struct {
		uint8_t up[TALLY_KEY_LEN];	/* the member's packets */
		uint8_t down[TALLY_KEY_LEN];	/* NACKs to the member */
	} keys[TALLY_MAX_WORKERS];	/* auth: by rank */
	struct tally_job_up up;	/* a leaf's spine; up.ip 0: none */
};

/* Ranks a two-tier job may have: 64 leaves of 64 members. */
#define TALLY_MAX_TIER_WORLD	(TALLY_MAX_WORKERS * TALLY_MAX_WORKERS)

#define TALLY_MAX_WINDOW 32768

/*
 * One shadow set of a slot: the round it holds (which chunk, how encoded)
 * and who has contributed. Both sets of a slot share a cache line, and
 * with it the slot's latest round (docs/protocol.md, "Rounds"): the set
 * round & 1 holds that round, the other the one before.
 */
struct tally_set {
	uint64_t bitmap;	/* ranks counted in this round */
	uint32_t offset;	/* the round's chunk */
	uint16_t count;
	int16_t scale_exp;
	uint8_t type;		/* TALLY_PT_SUM or TALLY_PT_MAX */
	uint8_t enc;		/* contributions' encoding */
	uint8_t res_enc;	/* result encoding, once complete */
	uint8_t ncontrib;
	uint8_t complete;	/* lanes hold the result */
	uint8_t flags;		/* TALLY_F_LAST of the round, echoed in
				 * results; TALLY_F_SPARSE: a block-sparse
				 * round (docs/protocol.md) */
	uint16_t res_len;	/* result payload bytes, once complete */
	uint32_t round_half;	/* the slot's latest round: its low half in
				 * set 0, its high half in set 1
				 * (tally_slot_round()) */
	uint32_t next_min;	/* SPARSE: the least next_block of the
				 * round's contributions */
};

_Static_assert(sizeof(struct tally_set) == 32,
	"both sets of a slot share a cache line");

/* The latest round of the slot whose two sets start at sets. */
static inline uint64_t
tally_slot_round(const struct tally_set *sets)
{
	return (uint64_t)sets[1].round_half << 32 | sets[0].round_half;
}

static inline void
tally_slot_set_round(struct tally_set *sets, uint64_t round)
{
	sets[0].round_half = (uint32_t)round;
	sets[1].round_half = (uint32_t)(round >> 32);
}

/*
 * Whether the slot has taken no packet since its job was made or reset:
 * its first contribution then sets its round (a job programmed again
 * after a tally-dp restart picks up its members' rounds).
 */
static inline int
tally_slot_fresh(const struct tally_set *sets)
{
	return (sets[0].bitmap | sets[1].bitmap) == 0 &&
		!sets[0].complete && !sets[1].complete;
}

struct tally_job {
	struct tally_job_conf conf;
	struct tally_set *sets;	/* [slot * 2 + set] */
	uint32_t *lanes;	/* [(slot * 2 + set) * stride] */
	uint32_t stride;	/* lanes a set, max_elems rounded up to 16 */
	uint32_t *seen;		/* [port * seen_stride + rank]: the latest
				 * sequence number (flag SEQ) of the member
				 * on the port; 0 before its first
				 * (tally_agg_process()); [.. + world]:
				 * the port's results numbered so far,
				 * [.. + world + 1] the slot of its latest */
	uint32_t seen_stride;	/* entries a port: world + 2, rounded up
				 * to a cache line, so no two lcores share
				 * one */
	uint16_t seen_ports;	/* rows: nports, at most the window */
	uint8_t *owner;		/* [slot * 2 + set]: the owner of a SCATTER
				 * or GATHER round the set holds
				 * (docs/protocol.md, "Collectives") */
	struct tally_mac_key *mac; /* auth: expanded keys, [0] the results',
				 * [1 + 2 r] rank r's up, [2 + 2 r] its
				 * down (tally_job_mac()); NULL: plain */
	void *ext;		/* the dataplane's part of the job (tally-dp:
				 * counters, result headers), owned by
				 * whoever hung it here; NULL from
				 * tally_job_create(). The engine never
				 * touches it */
};

/*
 * Allocates a job with every slot empty (and, for an authenticated job,
 * its keys expanded; the raw keys are not kept). Returns NULL with errno
 * EINVAL for a configuration out of range, ENOMEM when memory runs out,
 * ENOTSUP for an authenticated job on a CPU without AES instructions.
 */
struct tally_job *tally_job_create(const struct tally_job_conf *conf);

/* Frees the job; NULL is fine. No lcore may still see it. */
void tally_job_destroy(struct tally_job *job);

/* Empties every slot (a restarted job begins with fresh rounds). */
void tally_job_reset(struct tally_job *job);

/* An authenticated job's expanded key: 0 results, else 1 + 2 r + down. */
static inline const struct tally_mac_key *
tally_job_mac(const struct tally_job *job, unsigned int i)
{
	return &job->mac[i];
}

/* The seen entry of member rank for the port of slot (rank world: the
 * port's result count, then its latest result's slot). */
static inline uint32_t *
tally_job_seen(const struct tally_job *job, unsigned int slot,
	unsigned int rank)
{
	unsigned int port = job->seen_ports > 1 ? slot % job->seen_ports : 0;

	return &job->seen[(size_t)port * job->seen_stride + rank];
}

static inline struct tally_set *
tally_job_set(const struct tally_job *job, unsigned int slot, unsigned int set)
{
	return &job->sets[slot * 2 + set];
}

static inline uint8_t *
tally_job_owner(const struct tally_job *job, unsigned int slot,
	unsigned int set)
{
	return &job->owner[slot * 2 + set];
}

static inline uint32_t *
tally_job_lanes(const struct tally_job *job, unsigned int slot,
	unsigned int set)
{
	return job->lanes + (size_t)(slot * 2 + set) * job->stride;
}

#endif /* TALLY_AGG_JOB_H */

/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Rendezvous messages (docs/control.md, "Rendezvous protocol"): what a
 * worker and tallyd say to each other over TCP while the worker joins a
 * job. Each message travels as a 4-byte big-endian length and that many
 * bytes of one JSON object. These functions turn the JSON into a struct
 * and back; they do no I/O, so tallyd, libtally and the fuzzer share them.
 */
#ifndef TALLY_RDV_MSG_H
#define TALLY_RDV_MSG_H

#include <stddef.h>
#include <stdint.h>

#include <tally/codec.h>
#include <tally/tally.h>

#define TALLY_RDV_VERSION	1
#define TALLY_RDV_MAX_MSG	4096	/* bytes of JSON a message */
#define TALLY_RDV_NAME_MAX	63	/* characters of a job name */
#define TALLY_RDV_TOKEN_HEX	64	/* a job token: 32 bytes as hex */
#define TALLY_RDV_ERROR_MAX	255
#define TALLY_RDV_MAX_QPNS	64	/* dataplane QPNs in PARAMS' "rdma" */
#define TALLY_RDV_MAX_SHARDS	8	/* dataplanes in PARAMS' "shards" */
#define TALLY_RDV_MAX_RING	64	/* members in READY's "ring" (the world) */
#define TALLY_RDV_MAX_WORLD	4096	/* JOIN's world: a two-tier job's total */

enum tally_rdv_op {
	TALLY_RDV_JOIN = 1,	/* worker: job, token, rank, world */
	TALLY_RDV_PARAMS,	/* tallyd: the dataplane and the job's limits */
	TALLY_RDV_MEMBER,	/* worker: its UDP source address */
	TALLY_RDV_READY,	/* tallyd: the membership is complete */
	TALLY_RDV_ERROR,	/* tallyd: errno and a sentence; then closes */
};

/* A member's ring listener (the ring fallback: JOIN's and READY's "ring"). */
struct tally_rdv_addr {
	uint32_t ip;
	uint16_t port;
};

/* One dataplane of a sharded job (PARAMS' "shards"). */
struct tally_rdv_shard {
	uint32_t ip;
	uint16_t port;		/* its first UDP port */
	uint16_t nports;	/* ports in its range */
};

/*
 * One message; which fields mean something depends on op. Addresses and
 * ports are in host order here and dotted quads / numbers in the JSON.
 */
struct tally_rdv_msg {
	enum tally_rdv_op op;

	/* JOIN (and READY's epoch: a JOIN's optional "epoch" makes it a
	 * rejoin of the membership of that epoch; 0: a join). rank and
	 * world: up to TALLY_RDV_MAX_WORLD, a two-tier job's total */
	char job[TALLY_RDV_NAME_MAX + 1];
	char token[TALLY_RDV_TOKEN_HEX + 1];
	unsigned int rank;
	unsigned int world;

	/* PARAMS */
	uint32_t dp_ip;
	uint16_t dp_port;
	uint16_t dp_nports;
	uint16_t job_id;
	uint16_t window;
	uint16_t max_elems;
	uint8_t narrow;
	uint32_t group_ip;	/* 0: results come unicast */
	uint16_t group_port;
	char codec[TALLY_CODEC_SPEC_MAX]; /* the job's codec spec; "" and an
				 * absent key mean "fixp" */
	uint8_t rdma;		/* the job runs over RDMA (optional "rdma":
				 * {"qpns": [...], "qkey": N}); 0: UDP */
	uint16_t nqpns;		/* the dataplane's QPNs, 1..64 */
	uint32_t qpns[TALLY_RDV_MAX_QPNS]; /* slot s to qpns[s % nqpns] */
	uint32_t qkey;		/* the job's Q_Key, high bit clear */
	uint16_t nshards;	/* a sharded job (optional "shards": 2..8
				 * dataplanes, the first dp_ip's): slot s
				 * goes to shards[s % nshards]; 0: none,
				 * dp_ip alone */
	struct tally_rdv_shard shards[TALLY_RDV_MAX_SHARDS];
	uint16_t tier_world;	/* a leaf of a two-tier job (optional "tier":
				 * {"rank", "world", "scale_world"}): the
				 * member's rank and world in its leaf,
				 * whose dataplane dp_ip is, and the total
				 * world the fixed-point scale is for
				 * (docs/scale-out.md); 0: a flat job */
	uint16_t tier_rank;
	uint16_t scale_world;

	/* MEMBER */
	uint32_t ip;
	uint16_t port;
	uint32_t qpn;		/* an RDMA member's QP number (optional
				 * "qpn", 1..0xffffff); 0: a UDP member */

	/* READY */
	uint64_t wire_token;
	uint32_t epoch;
	uint8_t auth;		/* PARAMS: an authenticated job (optional
				 * "auth": true); READY: keys follow */
	struct tally_auth_keys keys; /* this member's */

	/* ERROR's optional "fallback": "ring" with ENOSPC (no live
	 * dataplane: docs/scale-out.md, "Epochs"); "": none */
	char fallback[8];

	/* ERROR */
	int err;		/* a positive errno */
	char error[TALLY_RDV_ERROR_MAX + 1];

	/* The ring fallback (docs/scale-out.md, "Ring fallback") */
	struct tally_rdv_addr ring_addr; /* JOIN: optional "ring": "IP:PORT",
				 * the worker's ring listener; 0: none */
	uint8_t ring_want;	/* JOIN: optional "transport": "ring", the
				 * worker asks for the ring (needs "ring") */
	uint8_t ring_fallback;	/* PARAMS: optional "fallback": "ring", no
				 * live dataplane: the membership runs on
				 * the ring; dp_ip, dp_port and dp_nports
				 * may then be absent (0) */
	uint16_t nring;		/* READY: optional "ring": the members'
				 * ring listeners in rank order (the
				 * world); 0: through the dataplane */
	struct tally_rdv_addr ring[TALLY_RDV_MAX_RING];
};

/*
 * Parses len bytes of JSON (one message body, without its length prefix)
 * into *m. Borrows buf. Every key of the op must be there with the right
 * type and range, and no other key. Returns 0, or -EPROTO with a sentence
 * in why (wlen bytes, NUL-terminated; why may be NULL).
 */
int tally_rdv_parse(const void *buf, size_t len, struct tally_rdv_msg *m,
	char *why, size_t wlen);

/*
 * Writes m as one framed message (length prefix and JSON) to buf, cap
 * bytes. Returns the bytes written, or -EINVAL (a field out of range: the
 * parser would refuse it), -EMSGSIZE (more than cap or TALLY_RDV_MAX_MSG),
 * -ENOMEM.
 */
int tally_rdv_format(const struct tally_rdv_msg *m, void *buf, size_t cap);

/* The body length a 4-byte prefix announces; 0 when out of 1..MAX_MSG. */
size_t tally_rdv_frame_len(const uint8_t prefix[4]);

/*
 * "IP:PORT" of an IPv4 multicast group (224.0.0.0/4) and a port 1..65535
 * into *ip and *port (host order). Returns 0 or -EINVAL.
 */
int tally_rdv_group_parse(const char *s, uint32_t *ip, uint16_t *port);

/* 1 if s is a valid job name (1..63 of [A-Za-z0-9_.-]), else 0. */
int tally_rdv_name_ok(const char *s);

/* 1 if s is exactly TALLY_RDV_TOKEN_HEX hex digits, else 0. */
int tally_rdv_token_ok(const char *s);

#endif /* TALLY_RDV_MSG_H */

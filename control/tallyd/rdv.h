/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Inside the rendezvous: what rdv.c (the protocol: join, member, the
 * barrier) and rdv_conn.c (the connections: accepting them under the
 * caps, TLS, reading and writing messages, deadlines) share. Nothing
 * else includes this.
 */
#ifndef TALLYD_RDV_H
#define TALLYD_RDV_H

#include <stdbool.h>
#include <stdint.h>
#include <arpa/inet.h>

#include "tallyd.h"

#define TALLYD_RDV_CLOSING_MS	2000

/*
 * A connection's state: TLS (handshaking) -> JOIN (awaiting "join") ->
 * MEMBER (sent "params", awaiting "member") -> WAIT (at the barrier) ->
 * CLOSING (sent the last message; reading until the peer closes, so that
 * our last message is not lost to a reset). Without TLS it starts at JOIN.
 */
enum tallyd_rc_state { RC_TLS, RC_JOIN, RC_MEMBER, RC_WAIT, RC_CLOSING };

struct tallyd_tls_conn;

struct tallyd_rdv_conn {
	int fd;
	enum tallyd_rc_state st;
	bool token_ok;			/* presented a job's token */
	bool authed;			/* and joined: a rank of a forming
					 * membership, never evicted */
	bool peeked;			/* looked for a cleartext join */
	bool heard;			/* sent us something */
	uint32_t src;			/* peer's IPv4, host order */
	char peer[INET_ADDRSTRLEN + 8];	/* "IP:PORT" for the log */
	int64_t deadline_ms;
	struct tallyd_tls_conn *tls;	/* NULL: cleartext */
	struct tallyd_job *job;		/* once joined */
	unsigned int rank;
	uint32_t rejoin;		/* the epoch a rejoin names (epoch.h);
					 * 0: a join */
	struct tallyd_member member;	/* once WAIT */
	struct tally_rdv_addr ring;	/* its ring listener (JOIN's "ring");
					 * port 0: none (an older libtally) */
	bool ring_want;			/* it asked for the ring */
	bool ring_fb;			/* its PARAMS said "fallback": "ring" */
	uint8_t in[4 + TALLY_RDV_MAX_MSG];
	size_t inlen;
	struct tallyd_rdv_conn *prev, *next;	/* every connection */
	struct tallyd_rdv_conn *uprev, *unext;	/* unauthenticated, oldest
						 * first */
};

struct tallyd_srcs;
struct tallyd_addrmap;
struct tallyd_tls;

/* The rendezvous server's state (struct tallyd's rdv). */
struct tallyd_rdv {
	struct tallyd_rdv_conn *conns;	/* every connection, newest first */
	struct tallyd_rdv_conn *uhead;	/* unauthenticated, oldest first */
	struct tallyd_rdv_conn *utail;
	unsigned int n;			/* connections */
	unsigned int nunauth;		/* of those, unauthenticated */
	unsigned int cap;		/* most connections held at once */
	struct tallyd_rdv_conn **byfd;	/* connection of each descriptor */
	size_t nbyfd;
	struct tallyd_srcs *srcs;	/* unauthenticated ones per source */
	struct tallyd_tls *tls;		/* NULL: cleartext (unsafe) */
	struct tallyd_addrmap *map;	/* NULL: member address = peer's */
	int64_t pause_until_ms;		/* listener rests until then */
	int64_t note_window_ms;		/* tallyd_rdv_note()'s rate limit */
	unsigned int noted;
	unsigned int unnoted;
};

/* rdv_conn.c */

/* Sends one framed message; 0 or -EIO (the socket could not take it). */
int tallyd_rdv_send(struct tallyd_rdv_conn *c, const struct tally_rdv_msg *m);

/*
 * The connection's last message: leaves the job's forming membership,
 * sends m (NULL: nothing), closes our side and waits for the peer's.
 */
void tallyd_rdv_finish(struct tallyd_rdv_conn *c, const struct tally_rdv_msg *m);

/*
 * Deadlines of connections not yet in a job (handshake, join, closing):
 * closes the late ones; returns the ms to the next deadline, at most wait.
 */
int64_t tallyd_rdv_conn_timers(struct tallyd *d, int64_t now, int64_t wait);

/*
 * c presented a valid token and joined a forming membership: no longer
 * capped per source or evictable (a join that fails after the token
 * check stays both, so a token's holder cannot fill the table with them).
 */
void tallyd_rdv_authed(struct tallyd *d, struct tallyd_rdv_conn *c);

/*
 * Logs like tallyd_log(), but at most a burst of lines every few seconds
 * (what an unauthenticated flood causes must not flood the journal); the
 * rest is counted and summed up in one line.
 */
void tallyd_rdv_note(struct tallyd *d, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* rdv.c */

/* Handles one complete message body from c. c stays allocated. */
void tallyd_rdv_message(struct tallyd *d, struct tallyd_rdv_conn *c,
	const uint8_t *body, size_t len);

/* Logs, counts under why, and sends an error as c's last message. */
void tallyd_rdv_fail(struct tallyd *d, struct tallyd_rdv_conn *c, int err,
	enum tallyd_join_fail why, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));

/* c left (closed, or evicted) while in j's forming membership. */
void tallyd_rdv_left(struct tallyd_rdv_conn *c);

/* rdv_ring.c: the ring fallback (docs/scale-out.md, "Ring fallback") */

/*
 * The ring address c sent joining j as rank must be the address its
 * rendezvous connection comes from, or one rendezvous_data_map allows
 * (as a member's data address): else fails c and returns false.
 */
bool tallyd_rdv_ring_addr_ok(struct tallyd *d, struct tallyd_rdv_conn *c,
	const struct tallyd_job *j, unsigned int rank);

/*
 * Whether every dataplane of j is dead (tallyd_dpc_dead(): no process
 * answers its admin socket), not merely stalled.
 */
bool tallyd_rdv_dps_down(struct tallyd *d, const struct tallyd_job *j);

/*
 * Whether c, joining j, goes on the ring: it asked for it, or j has no
 * live dataplane; either way only with a ring address.
 */
bool tallyd_rdv_ring_join(struct tallyd *d, const struct tallyd_job *j,
	const struct tallyd_rdv_conn *c);

/*
 * Whether j's complete barrier forms a ring membership: a rank went
 * on the ring at its join, or every dataplane is down now, and every
 * rank has a ring address.
 */
bool tallyd_rdv_ring_barrier(struct tallyd *d, const struct tallyd_job *j);

/*
 * Forms j's membership on the ring: a new epoch, saved, and READY with
 * the ranks' ring addresses to every rank; tally-dp is not programmed.
 */
void tallyd_rdv_ring_release(struct tallyd *d, struct tallyd_job *j);

#endif /* TALLYD_RDV_H */

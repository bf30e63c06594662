/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * etcd's v3 JSON gateway (etcd 3.4: POST /v3/kv/range and friends), from
 * tallyd: one HTTP/1.1 request per exchange over a fresh TCP connection,
 * to the endpoints of an "etcd://host:port[,host:port...]" spec in turn,
 * each exchange under a deadline, so that tallyd never waits on etcd for
 * longer than that. Keys and values travel base64-encoded.
 */
#ifndef TALLYD_ETCD_H
#define TALLYD_ETCD_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#define TALLYD_ETCD_MAX_EPS	8
#define TALLYD_ETCD_PROBE_MS	200

/* Counters of the exchanges (stats "tallyd": etcd_*). */
struct tallyd_etcd_stats {
	uint64_t requests;	/* exchanges tried */
	uint64_t failures;	/* exchanges with no usable reply */
	uint64_t timeouts;	/* of those, the ones past their deadline */
};

struct tallyd_etcd {
	char host[TALLYD_ETCD_MAX_EPS][64];	/* dotted quad or name */
	uint16_t port[TALLYD_ETCD_MAX_EPS];
	unsigned int neps;
	unsigned int cur;		/* the endpoint that answered last */
	unsigned int timeout_ms;	/* one exchange, all endpoints */
	int failing;			/* the last exchange got no reply:
					 * the next has TALLYD_ETCD_PROBE_MS */
	struct tallyd_etcd_stats st;
	char error[256];		/* the last failure's sentence */
};

/*
 * Parses spec into a client (owned by the caller; free() it). Returns
 * NULL with errno EINVAL and the reason in why.
 */
struct tallyd_etcd *tallyd_etcd_create(const char *spec, unsigned int
	timeout_ms, char *why, size_t wlen);

/* Whether spec names etcd ("etcd://..."). */
int tallyd_etcd_spec(const char *spec);

/*
 * POSTs req (consumed; NULL: -ENOMEM) to path ("/v3/kv/range") at the
 * first endpoint that answers, the last good one first, all within
 * timeout_ms (TALLYD_ETCD_PROBE_MS after an exchange that got no reply,
 * until one does: an unreachable etcd costs the caller little). On 0, *rep is
 * the reply object (a streamed reply's first "result"), the caller's to
 * decref. Otherwise -ETIMEDOUT (the deadline passed), -EHOSTUNREACH (no
 * endpoint took the connection), -EPROTO (a reply that is not JSON) or
 * -EIO (etcd answered with an error), the sentence in e->error.
 */
int tallyd_etcd_post(struct tallyd_etcd *e, const char *path, json_t *req,
	json_t **rep);

/* base64 of len bytes of s, as a new JSON string (NULL: no memory). */
json_t *tallyd_etcd_b64(const void *s, size_t len);

/*
 * Decodes the base64 string v into a new NUL-terminated buffer (the
 * caller frees it), its length in *len. NULL if v is not base64.
 */
char *tallyd_etcd_unb64(json_t *v, size_t *len);

/* A JSON integer or a decimal string (how the gateway sends int64s). */
int64_t tallyd_etcd_int(json_t *v);

#endif /* TALLYD_ETCD_H */

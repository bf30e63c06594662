/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Rendezvous messages to and from JSON. Strict both ways: the parser
 * refuses any key the op does not have and any value out of range, and
 * the formatter refuses to write what the parser would refuse.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>

#include <jansson.h>

#include "tally/proto.h"
#include "rdv/msg.h"

#define MAX_WORLD	TALLY_RDV_MAX_WORLD
#define MAX_WINDOW	32768

struct op_keys {
	const char *name;
	const char *const keys[8];	/* besides "op" */
};

static const struct op_keys ops[] = {
	[TALLY_RDV_JOIN] = { "join",
		{ "v", "job", "token", "rank", "world", NULL } },
	[TALLY_RDV_PARAMS] = { "params",
		{ "errno", "dp_ip", "dp_port", "dp_nports", "job_id",
		  "window", "max_elems", "narrow" } },
	[TALLY_RDV_MEMBER] = { "member", { "ip", "port", NULL } },
	[TALLY_RDV_READY] = { "ready",
		{ "errno", "wire_token", "epoch", NULL } },
	[TALLY_RDV_ERROR] = { "error", { "errno", "error", NULL } },
};

#define NOPS (sizeof(ops) / sizeof(ops[0]))

static int
fail(char *why, size_t wlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int
fail(char *why, size_t wlen, const char *fmt, ...)
{
	va_list ap;

	if (why != NULL && wlen > 0) {
		va_start(ap, fmt);
		vsnprintf(why, wlen, fmt, ap);
		va_end(ap);
	}
	return -EPROTO;
}

int
tally_rdv_name_ok(const char *s)
{
	size_t n = strlen(s);

	return n >= 1 && n <= TALLY_RDV_NAME_MAX && strspn(s,
		"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
		"0123456789_.-") == n;
}

static int
hex_ok(const char *s, size_t n)
{
	return strlen(s) == n && strspn(s, "0123456789abcdefABCDEF") == n;
}

int
tally_rdv_token_ok(const char *s)
{
	return hex_ok(s, TALLY_RDV_TOKEN_HEX);
}

size_t
tally_rdv_frame_len(const uint8_t p[4])
{
	uint32_t n = (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
		(uint32_t)p[2] << 8 | p[3];

	return n >= 1 && n <= TALLY_RDV_MAX_MSG ? n : 0;
}

/* Integer key k of o in lo..hi into *v. */
static int
get_uint(json_t *o, const char *k, unsigned long lo, unsigned long hi,
	unsigned long *v, char *why, size_t wlen)
{
	json_t *x = json_object_get(o, k);

	if (!json_is_integer(x) || json_integer_value(x) < 0 ||
			(unsigned long long)json_integer_value(x) < lo ||
			(unsigned long long)json_integer_value(x) > hi)
		return fail(why, wlen, "'%s' must be an integer in %lu..%lu",
			k, lo, hi);
	*v = (unsigned long)json_integer_value(x);
	return 0;
}

/* The epochs' optional keys: a rejoin's "epoch", ERROR's "fallback". */
static int
epoch_key(enum tally_rdv_op op, const char *k)
{
	return (op == TALLY_RDV_JOIN && strcmp(k, "epoch") == 0) ||
		(op == TALLY_RDV_ERROR && strcmp(k, "fallback") == 0);
}

/* Dotted-quad key k of o into *ip (host order); unicast unless mcast. */
static int
get_ip(json_t *o, const char *k, int mcast, uint32_t *ip, char *why,
	size_t wlen)
{
	const char *s = json_string_value(json_object_get(o, k));
	struct in_addr a;
	uint32_t h;

	if (s == NULL || inet_pton(AF_INET, s, &a) != 1)
		return fail(why, wlen, "'%s' must be an IPv4 address", k);
	h = ntohl(a.s_addr);
	if (mcast ? !IN_MULTICAST(h) : (h == 0 || IN_MULTICAST(h) ||
			h == INADDR_BROADCAST))
		return fail(why, wlen, "'%s' must be a %s address", k,
			mcast ? "multicast" : "unicast");
	*ip = h;
	return 0;
}

int
tally_rdv_group_parse(const char *s, uint32_t *ip, uint16_t *port)
{
	char buf[32], *colon, *end;
	struct in_addr a;
	unsigned long p = 0;

	if (strlen(s) >= sizeof(buf))
		return -EINVAL;
	strcpy(buf, s);
	colon = strchr(buf, ':');
	if (colon == NULL)
		return -EINVAL;
	*colon = '\0';
	if (inet_pton(AF_INET, buf, &a) != 1 ||
			!IN_MULTICAST(ntohl(a.s_addr)))
		return -EINVAL;
	errno = 0;
	p = strtoul(colon + 1, &end, 10);
	if (errno != 0 || end == colon + 1 || *end != '\0' || p < 1 ||
			p > 65535 || colon[1] == '+' || colon[1] == '-')
		return -EINVAL;
	*ip = ntohl(a.s_addr);
	*port = (uint16_t)p;
	return 0;
}

/* The ring fallback's optional keys: JOIN's, PARAMS' and READY's. */
static int
ring_key(enum tally_rdv_op op, const char *k)
{
	return (op == TALLY_RDV_JOIN && (strcmp(k, "ring") == 0 ||
			strcmp(k, "transport") == 0)) ||
		(op == TALLY_RDV_PARAMS && strcmp(k, "fallback") == 0) ||
		(op == TALLY_RDV_READY && strcmp(k, "ring") == 0);
}

/* "IP:PORT" (unicast, port 1..65535) from x into *a. 0 or -1. */
static int
get_addr(json_t *x, struct tally_rdv_addr *a)
{
	const char *s = json_string_value(x);
	char buf[32], *colon, *end;
	struct in_addr in;
	unsigned long p;
	uint32_t h;

	if (s == NULL || strlen(s) >= sizeof(buf))
		return -1;
	strcpy(buf, s);
	if ((colon = strchr(buf, ':')) == NULL)
		return -1;
	*colon = '\0';
	p = strtoul(colon + 1, &end, 10);
	if (inet_pton(AF_INET, buf, &in) != 1 || end == colon + 1 ||
			*end != '\0' || p < 1 || p > 65535 ||
			colon[1] == '-' || colon[1] == '+')
		return -1;
	h = ntohl(in.s_addr);
	if (h == 0 || IN_MULTICAST(h) || h == INADDR_BROADCAST)
		return -1;
	a->ip = h;
	a->port = (uint16_t)p;
	return 0;
}

/* JOIN's optional "ring" and "transport" into m. */
static int
parse_join_ring(json_t *o, struct tally_rdv_msg *m, char *why, size_t wlen)
{
	json_t *ring = json_object_get(o, "ring");
	json_t *tp = json_object_get(o, "transport");

	if (ring != NULL && get_addr(ring, &m->ring_addr) != 0)
		return fail(why, wlen, "'ring' must be \"IP:PORT\" of a "
			"unicast address");
	if (tp != NULL && (!json_is_string(tp) || strcmp(json_string_value(
			tp), "ring") != 0 || ring == NULL))
		return fail(why, wlen, "'transport' can only be \"ring\", "
			"with 'ring'");
	m->ring_want = tp != NULL;
	return 0;
}

/* READY's optional "ring": 1..64 "IP:PORT", rank order. */
static int
parse_ready_ring(json_t *a, struct tally_rdv_msg *m, char *why, size_t wlen)
{
	json_t *x;
	size_t i;

	if (a == NULL)
		return 0;
	if (!json_is_array(a) || json_array_size(a) < 1 ||
			json_array_size(a) > TALLY_RDV_MAX_RING)
		return fail(why, wlen, "'ring' must list 1..%d members",
			TALLY_RDV_MAX_RING);
	json_array_foreach(a, i, x)
		if (get_addr(x, &m->ring[i]) != 0)
			return fail(why, wlen, "'ring' entries are \"IP:PORT\"");
	m->nring = (uint16_t)i;
	return 0;
}

static int
check_keys(json_t *o, enum tally_rdv_op op, char *why, size_t wlen)
{
	const char *k;
	json_t *v;

	json_object_foreach(o, k, v) {
		unsigned int i;

		if (strcmp(k, "op") == 0 || (op == TALLY_RDV_PARAMS &&
				(strcmp(k, "group") == 0 ||
				 strcmp(k, "codec") == 0 ||
				 strcmp(k, "rdma") == 0 ||
				 strcmp(k, "shards") == 0 ||
				 strcmp(k, "tier") == 0 ||
				 strcmp(k, "auth") == 0)) ||
				(op == TALLY_RDV_MEMBER && strcmp(k, "qpn") == 0) ||
				(op == TALLY_RDV_READY && strcmp(k, "auth") == 0) ||
				ring_key(op, k))
			continue;
		if (epoch_key(op, k))
			continue;
		for (i = 0; i < 8 && ops[op].keys[i] != NULL; i++)
			if (strcmp(k, ops[op].keys[i]) == 0)
				break;
		if (i == 8 || ops[op].keys[i] == NULL)
			return fail(why, wlen, "unknown key '%s' in a '%s' "
				"message", k, ops[op].name);
	}
	return 0;
}

static int
parse_join(json_t *o, struct tally_rdv_msg *m, char *why, size_t wlen)
{
	const char *job = json_string_value(json_object_get(o, "job"));
	const char *tok = json_string_value(json_object_get(o, "token"));
	unsigned long v = 0, rank = 0, world = 0;

	if (get_uint(o, "v", 0, 255, &v, why, wlen))
		return -EPROTO;
	if (v != TALLY_RDV_VERSION)
		return fail(why, wlen, "rendezvous version %lu; this tallyd "
			"speaks %d", v, TALLY_RDV_VERSION);
	if (job == NULL || !tally_rdv_name_ok(job))
		return fail(why, wlen, "'job' must be 1-%d of "
			"[A-Za-z0-9_.-]", TALLY_RDV_NAME_MAX);
	if (tok == NULL || !tally_rdv_token_ok(tok))
		return fail(why, wlen, "'token' must be %d hex digits",
			TALLY_RDV_TOKEN_HEX);
	if (get_uint(o, "rank", 0, MAX_WORLD - 1, &rank, why, wlen) ||
			get_uint(o, "world", 1, MAX_WORLD, &world, why, wlen))
		return -EPROTO;
	/* A rejoin names the epoch it was in (docs/control.md). */
	if (json_object_get(o, "epoch") != NULL && get_uint(o, "epoch", 1,
			UINT32_MAX, &v, why, wlen))
		return -EPROTO;
	m->epoch = json_object_get(o, "epoch") != NULL ? (uint32_t)v : 0;
	strcpy(m->job, job);
	strcpy(m->token, tok);
	m->rank = (unsigned int)rank;
	m->world = (unsigned int)world;
	return parse_join_ring(o, m, why, wlen);
}

/* A 24-bit QP number (1..0xffffff) from x into *qpn: 0 or -1. */
static int
get_qpn(json_t *x, uint32_t *qpn)
{
	if (!json_is_integer(x) || json_integer_value(x) < 1 ||
			json_integer_value(x) > 0xffffff)
		return -1;
	*qpn = (uint32_t)json_integer_value(x);
	return 0;
}

/*
 * PARAMS' optional "rdma": {"qpns": [1..64 QPNs], "qkey": N}, the
 * dataplane's QPNs and the job's Q_Key (docs/rdma.md). Absent: UDP.
 */
static int
parse_rdma(json_t *r, struct tally_rdv_msg *m, char *why, size_t wlen)
{
	json_t *qpns = json_object_get(r, "qpns");
	json_t *qkey = json_object_get(r, "qkey");
	size_t i;

	if (r == NULL)
		return 0;
	if (!json_is_object(r) || json_object_size(r) != 2 ||
			!json_is_array(qpns) || json_array_size(qpns) < 1 ||
			json_array_size(qpns) > TALLY_RDV_MAX_QPNS ||
			!json_is_integer(qkey) || json_integer_value(qkey) < 0 ||
			json_integer_value(qkey) > 0x7fffffff)
		return fail(why, wlen, "'rdma' must be {\"qpns\": [1..%d "
			"QPNs], \"qkey\": 0..2^31-1}", TALLY_RDV_MAX_QPNS);
	for (i = 0; i < json_array_size(qpns); i++)
		if (get_qpn(json_array_get(qpns, i), &m->qpns[i]) != 0)
			return fail(why, wlen, "'rdma' QPNs are 1..0xffffff");
	m->rdma = 1;
	m->nqpns = (uint16_t)i;
	m->qkey = (uint32_t)json_integer_value(qkey);
	return 0;
}

/*
 * PARAMS' optional "shards": [{"ip", "port", "nports"}, ...], 2..8
 * dataplanes of a sharded job, slot s at shards[s % n]; the first is
 * the one dp_ip, dp_port and dp_nports name. Absent: one dataplane.
 */
static int
parse_shards(json_t *a, struct tally_rdv_msg *m, char *why, size_t wlen)
{
	json_t *x;
	size_t i;

	if (a == NULL)
		return 0;
	if (!json_is_array(a) || json_array_size(a) < 2 ||
			json_array_size(a) > TALLY_RDV_MAX_SHARDS)
		return fail(why, wlen, "'shards' must list 2..%d dataplanes",
			TALLY_RDV_MAX_SHARDS);
	json_array_foreach(a, i, x) {
		struct tally_rdv_shard *sh = &m->shards[i];
		unsigned long port = 0, nports = 0;

		if (!json_is_object(x) || json_object_size(x) != 3 ||
				get_ip(x, "ip", 0, &sh->ip, why, wlen) ||
				get_uint(x, "port", 1, 65535, &port, why,
					wlen) ||
				get_uint(x, "nports", 1, 65535, &nports, why,
					wlen) || port + nports - 1 > 65535)
			return fail(why, wlen, "'shards' entries are {\"ip\", "
				"\"port\", \"nports\"} within 1..65535");
		sh->port = (uint16_t)port;
		sh->nports = (uint16_t)nports;
	}
	if (m->shards[0].ip != m->dp_ip || m->shards[0].port != m->dp_port ||
			m->shards[0].nports != m->dp_nports)
		return fail(why, wlen, "'shards' must start with dp_ip's "
			"dataplane");
	m->nshards = (uint16_t)i;
	return 0;
}

/*
 * PARAMS' optional "tier": {"rank", "world", "scale_world"}, a leaf of a
 * two-tier job: the member's rank and world in its leaf (world 1..64)
 * and the total world (world..4096). Absent: a flat job.
 */
static int
parse_tier(json_t *t, struct tally_rdv_msg *m, char *why, size_t wlen)
{
	unsigned long r = 0, w = 0, sw = 0;

	if (t == NULL)
		return 0;
	if (!json_is_object(t) || json_object_size(t) != 3 ||
			get_uint(t, "world", 1, TALLY_MAX_WORKERS, &w, NULL, 0) ||
			get_uint(t, "rank", 0, w - 1, &r, NULL, 0) ||
			get_uint(t, "scale_world", w, MAX_WORLD, &sw, NULL, 0))
		return fail(why, wlen, "'tier' must be {\"rank\": 0..world-1, "
			"\"world\": 1..%d, \"scale_world\": world..%d}",
			TALLY_MAX_WORKERS, MAX_WORLD);
	m->tier_rank = (uint16_t)r;
	m->tier_world = (uint16_t)w;
	m->scale_world = (uint16_t)sw;
	return 0;
}

static int
parse_params(json_t *o, struct tally_rdv_msg *m, char *why, size_t wlen)
{
	/* Zeroed: -O3 cannot see that get_uint() sets them on success. */
	unsigned long e = 0, port = 0, nports = 0, id = 0, window = 0;
	unsigned long elems = 0;
	json_t *narrow = json_object_get(o, "narrow");
	json_t *group = json_object_get(o, "group");
	json_t *codec = json_object_get(o, "codec");
	struct tally_codec c;
	char cwhy[120];

	json_t *fb = json_object_get(o, "fallback");

	if (fb != NULL && (!json_is_string(fb) ||
			strcmp(json_string_value(fb), "ring") != 0))
		return fail(why, wlen, "'fallback' can only be \"ring\"");
	m->ring_fallback = fb != NULL;
	/* On the ring fallback the dataplane may be unknown. */
	if ((!m->ring_fallback || json_object_get(o, "dp_ip") != NULL) &&
			(get_ip(o, "dp_ip", 0, &m->dp_ip, why, wlen) ||
			get_uint(o, "dp_port", 1, 65535, &port, why, wlen) ||
			get_uint(o, "dp_nports", 1, 65535, &nports, why,
				wlen)))
		return -EPROTO;
	if (get_uint(o, "errno", 0, 0, &e, why, wlen) ||
			get_uint(o, "job_id", 0, 65535, &id, why, wlen) ||
			get_uint(o, "window", 1, MAX_WINDOW, &window, why,
				wlen) ||
			get_uint(o, "max_elems", 1, TALLY_MAX_ELEMS, &elems,
				why, wlen))
		return -EPROTO;
	if (port != 0 && port + nports - 1 > 65535)
		return fail(why, wlen, "'dp_port' + 'dp_nports' passes 65535");
	if (!json_is_boolean(narrow))
		return fail(why, wlen, "'narrow' must be true or false");
	if (group != NULL && (!json_is_string(group) || tally_rdv_group_parse(
			json_string_value(group), &m->group_ip,
			&m->group_port) != 0))
		return fail(why, wlen, "'group' must be \"IP:PORT\" of an "
			"IPv4 multicast group");
	if (codec != NULL && (!json_is_string(codec) || tally_codec_parse(
			json_string_value(codec), &c, cwhy, sizeof(cwhy)) != 0 ||
			tally_codec_format(&c, m->codec, sizeof(m->codec)) < 0))
		return fail(why, wlen, "'codec' must be a codec spec");
	m->dp_port = (uint16_t)port;
	m->dp_nports = (uint16_t)nports;
	m->job_id = (uint16_t)id;
	m->window = (uint16_t)window;
	m->max_elems = (uint16_t)elems;
	m->narrow = json_is_true(narrow);
	m->auth = json_is_true(json_object_get(o, "auth"));
	if (parse_shards(json_object_get(o, "shards"), m, why, wlen) != 0)
		return -EPROTO;
	if (m->nshards > 0 && json_object_get(o, "rdma") != NULL)
		return fail(why, wlen, "'shards' and 'rdma' do not go together");
	if (parse_tier(json_object_get(o, "tier"), m, why, wlen) != 0)
		return -EPROTO;
	if (m->tier_world != 0 && (m->nshards > 0 ||
			json_object_get(o, "rdma") != NULL))
		return fail(why, wlen, "'tier' goes with neither 'shards' nor "
			"'rdma'");
	return parse_rdma(json_object_get(o, "rdma"), m, why, wlen);
}

static int
parse_member(json_t *o, struct tally_rdv_msg *m, char *why, size_t wlen)
{
	unsigned long port = 0;

	if (get_ip(o, "ip", 0, &m->ip, why, wlen) ||
			get_uint(o, "port", 1, 65535, &port, why, wlen))
		return -EPROTO;
	if (json_object_get(o, "qpn") != NULL &&
			get_qpn(json_object_get(o, "qpn"), &m->qpn) != 0)
		return fail(why, wlen, "'qpn' must be an integer in "
			"1..16777215");
	m->port = (uint16_t)port;
	return 0;
}

/* Into key (16 bytes): a string of 32 hex digits. 0 or -1. */
static int
get_key(json_t *x, uint8_t *key)
{
	const char *s = json_string_value(x);

	if (s == NULL || !hex_ok(s, 32))
		return -1;
	for (unsigned int i = 0; i < 16; i++) {
		char b[3] = { s[2 * i], s[2 * i + 1], 0 };

		key[i] = (uint8_t)strtoul(b, NULL, 16);
	}
	return 0;
}

/*
 * READY's optional "auth": {"up", "down", "result"}, the member's keys
 * in an authenticated job (docs/control.md). Absent: a plain job.
 */
static int
parse_auth(json_t *a, struct tally_rdv_msg *m, char *why, size_t wlen)
{
	if (a == NULL)
		return 0;
	if (!json_is_object(a) || json_object_size(a) != 3 ||
			get_key(json_object_get(a, "up"), m->keys.up) ||
			get_key(json_object_get(a, "down"), m->keys.down) ||
			get_key(json_object_get(a, "result"), m->keys.result))
		return fail(why, wlen, "'auth' must be {\"up\", \"down\", "
			"\"result\"}, keys of 32 hex digits");
	m->auth = 1;
	return 0;
}

static int
parse_ready(json_t *o, struct tally_rdv_msg *m, char *why, size_t wlen)
{
	const char *tok = json_string_value(json_object_get(o, "wire_token"));
	unsigned long e = 0, epoch = 0;

	if (get_uint(o, "errno", 0, 0, &e, why, wlen) ||
			get_uint(o, "epoch", 0, UINT32_MAX, &epoch, why, wlen))
		return -EPROTO;
	if (tok == NULL || !hex_ok(tok, 16))
		return fail(why, wlen, "'wire_token' must be 16 hex digits");
	m->wire_token = strtoull(tok, NULL, 16);
	m->epoch = (uint32_t)epoch;
	if (parse_ready_ring(json_object_get(o, "ring"), m, why, wlen) != 0)
		return -EPROTO;
	return parse_auth(json_object_get(o, "auth"), m, why, wlen);
}

static int
parse_error(json_t *o, struct tally_rdv_msg *m, char *why, size_t wlen)
{
	const char *s = json_string_value(json_object_get(o, "error"));
	unsigned long e = 0;

	if (get_uint(o, "errno", 1, 4095, &e, why, wlen))
		return -EPROTO;
	if (s == NULL || strlen(s) > TALLY_RDV_ERROR_MAX)
		return fail(why, wlen, "'error' must be a string of at most "
			"%d bytes", TALLY_RDV_ERROR_MAX);
	m->err = (int)e;
	strcpy(m->error, s);
	/* What the worker may do instead: "ring" (no dataplane left). */
	s = json_string_value(json_object_get(o, "fallback"));
	if (json_object_get(o, "fallback") != NULL && (s == NULL ||
			strcmp(s, "ring") != 0))
		return fail(why, wlen, "'fallback' must be \"ring\"");
	if (s != NULL)
		strcpy(m->fallback, s);
	return 0;
}

int
tally_rdv_parse(const void *buf, size_t len, struct tally_rdv_msg *m,
	char *why, size_t wlen)
{
	json_error_t jerr;
	const char *op;
	json_t *o;
	int ret;
	size_t i;

	memset(m, 0, sizeof(*m));
	if (len == 0 || len > TALLY_RDV_MAX_MSG)
		return fail(why, wlen, "a message is 1-%d bytes",
			TALLY_RDV_MAX_MSG);
	o = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &jerr);
	if (o == NULL)
		return fail(why, wlen, "invalid JSON: %s", jerr.text);
	if (!json_is_object(o) || (op = json_string_value(json_object_get(o,
			"op"))) == NULL) {
		json_decref(o);
		return fail(why, wlen, "a message is an object with a string "
			"'op'");
	}
	for (i = 1; i < NOPS; i++)
		if (strcmp(op, ops[i].name) == 0)
			break;
	if (i == NOPS) {
		/* op is o's: say why before letting o go. */
		ret = fail(why, wlen, "unknown op '%.32s'", op);
		json_decref(o);
		return ret;
	}
	m->op = (enum tally_rdv_op)i;
	ret = check_keys(o, m->op, why, wlen);
	if (ret == 0) {
		switch (m->op) {
		case TALLY_RDV_JOIN:
			ret = parse_join(o, m, why, wlen);
			break;
		case TALLY_RDV_PARAMS:
			ret = parse_params(o, m, why, wlen);
			break;
		case TALLY_RDV_MEMBER:
			ret = parse_member(o, m, why, wlen);
			break;
		case TALLY_RDV_READY:
			ret = parse_ready(o, m, why, wlen);
			break;
		case TALLY_RDV_ERROR:
			ret = parse_error(o, m, why, wlen);
			break;
		}
	}
	json_decref(o);
	return ret;
}

/* A member's keys as READY's "auth", hex. */
static json_t *
keys_json(const struct tally_auth_keys *k)
{
	const uint8_t *raw[3] = { k->up, k->down, k->result };
	char hex[3][33];

	for (int i = 0; i < 3; i++)
		for (int b = 0; b < 16; b++)
			snprintf(hex[i] + 2 * b, 3, "%02x", raw[i][b]);
	return json_pack("{s:s, s:s, s:s}", "up", hex[0], "down", hex[1],
		"result", hex[2]);
}

static json_t *
ip_json(uint32_t ip)
{
	struct in_addr a = { .s_addr = htonl(ip) };
	char s[INET_ADDRSTRLEN];

	inet_ntop(AF_INET, &a, s, sizeof(s));
	return json_string(s);
}

/* PARAMS' "rdma" into o, from m: 0, or -1 for what parse_rdma refuses. */
static int
params_rdma(const struct tally_rdv_msg *m, json_t *o)
{
	json_t *qpns;

	if (m->nqpns < 1 || m->nqpns > TALLY_RDV_MAX_QPNS ||
			m->qkey > 0x7fffffff)
		return -1;
	qpns = json_array();
	for (unsigned int i = 0; qpns != NULL && i < m->nqpns; i++) {
		if (m->qpns[i] < 1 || m->qpns[i] > 0xffffff) {
			json_decref(qpns);
			return -1;
		}
		json_array_append_new(qpns, json_integer(m->qpns[i]));
	}
	return json_object_set_new(o, "rdma", json_pack("{s:o, s:I}",
		"qpns", qpns, "qkey", (json_int_t)m->qkey));
}

/* PARAMS' "shards" into o, from m: 0, or -1 for what parse_shards refuses. */
static int
params_shards(const struct tally_rdv_msg *m, json_t *o)
{
	const struct tally_rdv_shard *sh = m->shards;
	json_t *a;

	if (m->nshards < 2 || m->nshards > TALLY_RDV_MAX_SHARDS || m->rdma ||
			sh[0].ip != m->dp_ip || sh[0].port != m->dp_port ||
			sh[0].nports != m->dp_nports)
		return -1;
	a = json_array();
	for (unsigned int i = 0; a != NULL && i < m->nshards; i++) {
		if (sh[i].ip == 0 || sh[i].port == 0 || sh[i].nports == 0 ||
				sh[i].port + sh[i].nports - 1 > 65535) {
			json_decref(a);
			return -1;
		}
		json_array_append_new(a, json_pack("{s:o, s:i, s:i}", "ip",
			ip_json(sh[i].ip), "port", sh[i].port, "nports",
			sh[i].nports));
	}
	return json_object_set_new(o, "shards", a);
}

/* PARAMS' "tier" into o, from m: 0, or -1 for what parse_tier refuses. */
static int
params_tier(const struct tally_rdv_msg *m, json_t *o)
{
	if (m->tier_world > TALLY_MAX_WORKERS ||
			m->tier_rank >= m->tier_world ||
			m->scale_world < m->tier_world ||
			m->scale_world > MAX_WORLD || m->nshards != 0 || m->rdma)
		return -1;
	return json_object_set_new(o, "tier", json_pack("{s:i, s:i, s:i}",
		"rank", m->tier_rank, "world", m->tier_world, "scale_world",
		m->scale_world));
}

static json_t *
addr_json(const struct tally_rdv_addr *a)
{
	struct in_addr in = { .s_addr = htonl(a->ip) };
	char ip[INET_ADDRSTRLEN], s[32];

	inet_ntop(AF_INET, &in, ip, sizeof(ip));
	snprintf(s, sizeof(s), "%s:%u", ip, a->port);
	return json_string(s);
}

/*
 * The ring fallback's keys of m into o (JOIN's "ring" and "transport",
 * PARAMS' "fallback", READY's "ring"): 0, or -1 for what the parser
 * refuses.
 */
static int
ring_json(const struct tally_rdv_msg *m, json_t *o)
{
	json_t *a;

	if (m->op == TALLY_RDV_JOIN && m->ring_addr.port != 0) {
		if (m->ring_addr.ip == 0)
			return -1;
		json_object_set_new(o, "ring", addr_json(&m->ring_addr));
		if (m->ring_want)
			json_object_set_new(o, "transport", json_string("ring"));
	} else if (m->op == TALLY_RDV_JOIN && m->ring_want) {
		return -1;
	}
	if (m->op == TALLY_RDV_PARAMS && m->ring_fallback)
		json_object_set_new(o, "fallback", json_string("ring"));
	if (m->op != TALLY_RDV_READY || m->nring == 0)
		return 0;
	if (m->nring > TALLY_RDV_MAX_RING || (a = json_array()) == NULL)
		return -1;
	for (unsigned int i = 0; i < m->nring; i++) {
		if (m->ring[i].ip == 0 || m->ring[i].port == 0) {
			json_decref(a);
			return -1;
		}
		json_array_append_new(a, addr_json(&m->ring[i]));
	}
	return json_object_set_new(o, "ring", a);
}

/* m as JSON, but for the ring fallback's keys (ring_json()). */
static json_t *
build_op(const struct tally_rdv_msg *m)
{
	char s[64];
	json_t *o;

	switch (m->op) {
	case TALLY_RDV_JOIN:
		if (!tally_rdv_name_ok(m->job) || !tally_rdv_token_ok(m->token)
				|| m->world < 1 || m->world > MAX_WORLD ||
				m->rank >= MAX_WORLD)
			return NULL;
		o = json_pack("{s:s, s:i, s:s, s:s, s:i, s:i}", "op",
			"join", "v", TALLY_RDV_VERSION, "job", m->job, "token",
			m->token, "rank", m->rank, "world", m->world);
		if (o != NULL && m->epoch != 0)
			json_object_set_new(o, "epoch",
				json_integer((json_int_t)m->epoch));
		return o;
	case TALLY_RDV_PARAMS:
		if ((m->dp_port == 0 && !m->ring_fallback) ||
				(m->dp_port != 0 && m->dp_nports == 0) ||
				m->dp_port + m->dp_nports - 1 > 65535 ||
				m->window == 0 || m->window > MAX_WINDOW ||
				m->max_elems == 0 ||
				m->max_elems > TALLY_MAX_ELEMS)
			return NULL;
		o = json_pack("{s:s, s:i, s:i, s:i, s:i, s:b}",
			"op", "params", "errno", 0,
			"job_id", m->job_id, "window", m->window, "max_elems",
			m->max_elems, "narrow", m->narrow);
		if (o != NULL && m->dp_port != 0) {
			json_object_set_new(o, "dp_ip", ip_json(m->dp_ip));
			json_object_set_new(o, "dp_port",
				json_integer(m->dp_port));
			json_object_set_new(o, "dp_nports",
				json_integer(m->dp_nports));
		}
		if (o != NULL && m->auth)
			json_object_set_new(o, "auth", json_true());
		if (o != NULL && m->codec[0] != '\0') {
			struct tally_codec c;

			if (tally_codec_parse(m->codec, &c, NULL, 0) != 0) {
				json_decref(o);
				return NULL;
			}
			json_object_set_new(o, "codec", json_string(m->codec));
		}
		if (o != NULL && m->rdma && params_rdma(m, o) != 0) {
			json_decref(o);
			return NULL;
		}
		if (o != NULL && m->nshards != 0 && params_shards(m, o) != 0) {
			json_decref(o);
			return NULL;
		}
		if (o != NULL && m->tier_world != 0 && params_tier(m, o) != 0) {
			json_decref(o);
			return NULL;
		}
		if (o != NULL && m->group_ip != 0) {
			struct in_addr a = { .s_addr = htonl(m->group_ip) };
			char ip[INET_ADDRSTRLEN];

			inet_ntop(AF_INET, &a, ip, sizeof(ip));
			snprintf(s, sizeof(s), "%s:%u", ip, m->group_port);
			json_object_set_new(o, "group", json_string(s));
		}
		return o;
	case TALLY_RDV_MEMBER:
		if (m->port == 0 || m->qpn > 0xffffff)
			return NULL;
		o = json_pack("{s:s, s:o, s:i}", "op", "member", "ip",
			ip_json(m->ip), "port", m->port);
		if (o != NULL && m->qpn != 0)
			json_object_set_new(o, "qpn", json_integer(m->qpn));
		return o;
	case TALLY_RDV_READY:
		snprintf(s, sizeof(s), "%016llx",
			(unsigned long long)m->wire_token);
		o = json_pack("{s:s, s:i, s:s, s:I}", "op", "ready", "errno",
			0, "wire_token", s, "epoch", (json_int_t)m->epoch);
		if (o != NULL && m->auth)
			json_object_set_new(o, "auth", keys_json(&m->keys));
		return o;
	case TALLY_RDV_ERROR:
		if (m->err < 1 || m->err > 4095 ||
				strlen(m->error) > TALLY_RDV_ERROR_MAX)
			return NULL;
		if (m->fallback[0] != '\0' && strcmp(m->fallback, "ring") != 0)
			return NULL;
		o = json_pack("{s:s, s:i, s:s}", "op", "error", "errno",
			m->err, "error", m->error);
		if (o != NULL && m->fallback[0] != '\0')
			json_object_set_new(o, "fallback",
				json_string(m->fallback));
		return o;
	}
	return NULL;
}

static json_t *
build(const struct tally_rdv_msg *m)
{
	json_t *o = build_op(m);

	if (o != NULL && ring_json(m, o) != 0) {
		json_decref(o);
		return NULL;
	}
	return o;
}

int
tally_rdv_format(const struct tally_rdv_msg *m, void *buf, size_t cap)
{
	json_t *o = build(m);
	uint8_t *out = buf;
	size_t n;

	if (o == NULL)
		return -EINVAL;
	n = json_dumpb(o, NULL, 0, JSON_COMPACT);
	if (n == 0) {
		json_decref(o);
		return -ENOMEM;
	}
	if (n > TALLY_RDV_MAX_MSG || n + 4 > cap) {
		json_decref(o);
		return -EMSGSIZE;
	}
	json_dumpb(o, (char *)out + 4, n, JSON_COMPACT);
	json_decref(o);
	out[0] = (uint8_t)(n >> 24);
	out[1] = (uint8_t)(n >> 16);
	out[2] = (uint8_t)(n >> 8);
	out[3] = (uint8_t)n;
	return (int)(n + 4);
}

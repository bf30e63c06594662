/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>

#include "admin_parse.h"

struct command {
	const char *name;
	const char *usage;
};

static const struct command commands[TALLY_ADMIN_CMD_MAX_] = {
	[TALLY_ADMIN_PING] = { "ping", "{}" },
	[TALLY_ADMIN_JOB_ADD] = { "job_add", "{\"id\", \"token\", "
		"\"world\", \"window\"?, \"max_elems\"?, \"narrow\"?, "
		"\"members\": [{\"ip\", \"port\" | \"qpn\"}, ...], "
		"\"qkey\"?, \"upstream\"?: {\"ip\", \"port\", "
		"\"nports\"?, \"token\", \"rank\", \"world\"}, \"group\"?: "
		"{\"ip\", \"port\"}, \"encodings\"?: [NAME, ...], \"auth\"?: "
		"{\"result\", \"up\": [...], \"down\": [...]}}" },
	[TALLY_ADMIN_JOB_DEL] = { "job_del", "{\"id\"}" },
	[TALLY_ADMIN_JOB_LIST] = { "job_list", "{\"after\"?, \"limit\"?}" },
	[TALLY_ADMIN_STATS] = { "stats", "{}" },
	[TALLY_ADMIN_LIST_COMMANDS] = { "list_commands", "{}" },
};

const char *
tally_admin_cmd_name(enum tally_admin_cmd cmd)
{
	return (unsigned int)cmd < TALLY_ADMIN_CMD_MAX_ ?
		commands[cmd].name : NULL;
}

const char *
tally_admin_cmd_usage(enum tally_admin_cmd cmd)
{
	return (unsigned int)cmd < TALLY_ADMIN_CMD_MAX_ ?
		commands[cmd].usage : NULL;
}

static int
fail(int err, char *why, size_t wlen, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* Writes the sentence into why and returns -err. */
static int
fail(int err, char *why, size_t wlen, const char *fmt, ...)
{
	va_list ap;

	if (wlen > 0) {
		va_start(ap, fmt);
		vsnprintf(why, wlen, fmt, ap);
		va_end(ap);
	}
	return -err;
}

int
tally_admin_parse(const char *text, size_t len, json_t **req,
	enum tally_admin_cmd *cmd, char *why, size_t wlen)
{
	json_error_t jerr;
	const char *name;
	json_t *in;

	*req = NULL;
	in = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
	if (in == NULL)
		return fail(EINVAL, why, wlen, "invalid JSON: %s (at byte %d)",
			jerr.text, jerr.position);
	name = json_string_value(json_object_get(in, "cmd"));
	if (!json_is_object(in) || name == NULL) {
		json_decref(in);
		return fail(EINVAL, why, wlen, "a request is an object with a "
			"string \"cmd\"");
	}
	for (unsigned int i = 0; i < TALLY_ADMIN_CMD_MAX_; i++) {
		if (strcmp(name, commands[i].name) == 0) {
			*cmd = (enum tally_admin_cmd)i;
			*req = in;
			return 0;
		}
	}
	fail(EOPNOTSUPP, why, wlen, "unknown command '%s' (try "
		"list_commands)", name);
	json_decref(in);
	return -EOPNOTSUPP;
}

/* Reads integer key k of o into *v, checking lo..hi; def when absent. */
static int
get_int(json_t *o, const char *k, json_int_t lo, json_int_t hi,
	json_int_t def, json_int_t *v, char *why, size_t wlen)
{
	json_t *x = json_object_get(o, k);

	if (x == NULL) {
		if (def < lo)
			return fail(EINVAL, why, wlen, "'%s' is required", k);
		*v = def;
		return 0;
	}
	if (!json_is_integer(x) || json_integer_value(x) < lo ||
			json_integer_value(x) > hi)
		return fail(EINVAL, why, wlen, "'%s' must be an integer in "
			"%lld..%lld", k, (long long)lo, (long long)hi);
	*v = json_integer_value(x);
	return 0;
}

static int
parse_token(json_t *o, uint64_t *token, char *why, size_t wlen)
{
	const char *s = json_string_value(json_object_get(o, "token"));

	if (s == NULL || strlen(s) != 16 ||
			strspn(s, "0123456789abcdefABCDEF") != 16)
		return fail(EINVAL, why, wlen, "'token' must be 16 hex digits");
	*token = strtoull(s, NULL, 16);
	return 0;
}

/* A UDP port of 1..65535 in o's "port", into *port in network order. */
static int
get_port(json_t *o, uint16_t *port)
{
	json_t *p = json_object_get(o, "port");

	if (!json_is_integer(p) || json_integer_value(p) < 1 ||
			json_integer_value(p) > 65535)
		return -EINVAL;
	*port = htons((uint16_t)json_integer_value(p));
	return 0;
}

/*
 * Whether a (network order) can be a member's unicast address: not
 * 0.0.0.0/8 (this network), 127.0.0.0/8 (loopback), 224.0.0.0/4
 * (multicast) or 240.0.0.0/4 (reserved, 255.255.255.255 included).
 */
static int
unicast(uint32_t a)
{
	uint32_t h = ntohl(a);

	return (h >> 24) != 0 && (h >> 24) != 127 && (h >> 28) < 0xe;
}

/* The first rank below i with member i's address and port, or -1. */
static int
same_as(const struct tally_job_conf *c, size_t i)
{
	for (size_t r = 0; r < i; r++)
		if (c->members[r].ip == c->members[i].ip &&
				c->members[r].port == c->members[i].port &&
				c->qpn[r] == c->qpn[i])
			return (int)r;
	return -1;
}

/*
 * Member i's port, or for a RoCEv2 job its QPN (and port 4791, what the
 * RoCE path shows the engine; tallyd sends it too). The first member
 * decides which the job is; every other must be the same.
 */
static int
member_src(json_t *m, struct tally_job_conf *c, size_t i, char *why,
	size_t wlen)
{
	json_t *q = json_object_get(m, "qpn");

	if (i == 0)
		c->roce = q != NULL;
	if ((q != NULL) != c->roce)
		return fail(EINVAL, why, wlen, "member %zu: a job's members "
			"are all UDP ({\"ip\", \"port\"}) or all RoCEv2 "
			"({\"ip\", \"qpn\"})", i);
	if (!c->roce) {
		if (get_port(m, &c->members[i].port) != 0)
			return fail(EINVAL, why, wlen, "member %zu: 'port' "
				"must be 1..65535", i);
		return 0;
	}
	/* 0 and 1 are InfiniBand's special QPs, 0xffffff multicast. */
	if (!json_is_integer(q) || json_integer_value(q) < 2 ||
			json_integer_value(q) > 0xfffffe)
		return fail(EINVAL, why, wlen, "member %zu: 'qpn' must be "
			"2..16777214", i);
	c->qpn[i] = (uint32_t)json_integer_value(q);
	/* tallyd states RoCEv2's port beside the QPN; nothing else fits. */
	if (json_object_get(m, "port") != NULL &&
			(get_port(m, &c->members[i].port) != 0 ||
			 c->members[i].port != htons(TALLY_ROCE_UDP_PORT)))
		return fail(EINVAL, why, wlen, "member %zu: a RoCEv2 member's "
			"'port', when given, is %d", i, TALLY_ROCE_UDP_PORT);
	c->members[i].port = htons(TALLY_ROCE_UDP_PORT);
	return 0;
}

static int
parse_members(json_t *o, struct tally_job_conf *c, char *why, size_t wlen)
{
	json_t *arr = json_object_get(o, "members"), *m;
	size_t i;
	int r;

	if (!json_is_array(arr) || json_array_size(arr) != c->world)
		return fail(EINVAL, why, wlen, "'members' must be an array of "
			"'world' (%u) {\"ip\", \"port\"} objects, by rank",
			c->world);
	json_array_foreach(arr, i, m) {
		const char *ip = json_string_value(json_object_get(m, "ip"));
		struct in_addr a;

		if (ip == NULL || inet_pton(AF_INET, ip, &a) != 1)
			return fail(EINVAL, why, wlen, "member %zu: 'ip' must "
				"be an IPv4 address", i);
		if (!unicast(a.s_addr))
			return fail(EINVAL, why, wlen, "member %zu: 'ip' %s is "
				"not a unicast host address", i, ip);
		if (member_src(m, c, i, why, wlen) != 0)
			return -EINVAL;
		c->members[i].ip = a.s_addr;
		if ((r = same_as(c, i)) >= 0)
			return fail(EINVAL, why, wlen, "member %zu has the "
				"address and %s of member %d", i,
				c->roce ? "QPN" : "port", r);
	}
	return 0;
}

/* The encoding called name, or 0. */
static unsigned int
enc_by_name(const char *name)
{
	for (unsigned int e = TALLY_ENC_F32; e < TALLY_ENC_MAX_; e++)
		if (strcmp(name, tally_enc_name(e)) == 0)
			return e;
	return 0;
}

/*
 * "encodings": the names of the encodings the members send at full
 * length (f32, i32, i16, i8, i4, sign); absent: all of them.
 */
static int
parse_encodings(json_t *o, unsigned int *encs, char *why, size_t wlen)
{
	json_t *arr = json_object_get(o, "encodings"), *e;
	size_t i;

	*encs = TALLY_ENC_ALL;
	if (arr == NULL)
		return 0;
	if (!json_is_array(arr) || json_array_size(arr) == 0)
		return fail(EINVAL, why, wlen, "'encodings' must be a non-empty "
			"array of encoding names (f32, i32, i16, i8, i4, sign)");
	*encs = 0;
	json_array_foreach(arr, i, e) {
		const char *name = json_string_value(e);
		unsigned int enc = name != NULL ? enc_by_name(name) : 0;

		if (enc == 0)
			return fail(EINVAL, why, wlen, "'encodings': item %zu is "
				"not an encoding name (f32, i32, i16, i8, i4, "
				"sign)", i);
		*encs |= TALLY_ENC_BIT(enc);
	}
	return 0;
}

/* "group": {"ip": a multicast address, "port"}; absent: unicast. */
static int
parse_group(json_t *o, struct tally_job_conf *c, char *why, size_t wlen)
{
	json_t *g = json_object_get(o, "group");
	const char *ip;
	struct in_addr a;

	if (g == NULL)
		return 0;
	ip = json_string_value(json_object_get(g, "ip"));
	if (ip == NULL || inet_pton(AF_INET, ip, &a) != 1 ||
			!IN_MULTICAST(ntohl(a.s_addr)))
		return fail(EINVAL, why, wlen, "'group': 'ip' must be an IPv4 "
			"multicast address (224.0.0.0/4)");
	if (get_port(g, &c->group.port) != 0)
		return fail(EINVAL, why, wlen, "'group': 'port' must be "
			"1..65535");
	c->group.ip = a.s_addr;
	return 0;
}

static const char *const up_keys[] = {
	"ip", "port", "nports", "token", "rank", "world", NULL,
};

static const char *unknown_key(json_t *o, const char *const *keys);

/*
 * "upstream": {"ip", "port", "nports" (1), "token", "rank", "world"}: the
 * job is a leaf of two tiers, rank "rank" of the spine job of the same id
 * at ip (its ports port .. + nports - 1) with wire token "token"; "world"
 * is the total of ranks under every leaf (docs/scale-out.md, "Two
 * tiers"). Absent: a plain job. UDP and plain jobs only.
 */
static int
parse_upstream(json_t *o, struct tally_job_conf *c, char *why, size_t wlen)
{
	json_t *u = json_object_get(o, "upstream");
	json_int_t nports = 0, rank = 0, world = 0;
	const char *ip, *k;
	struct in_addr a;

	if (u == NULL)
		return 0;
	if (!json_is_object(u))
		return fail(EINVAL, why, wlen, "'upstream' must be an object");
	if ((k = unknown_key(u, up_keys)) != NULL)
		return fail(EINVAL, why, wlen, "'upstream': unknown key '%s'",
			k);
	ip = json_string_value(json_object_get(u, "ip"));
	if (ip == NULL || inet_pton(AF_INET, ip, &a) != 1 ||
			!unicast(a.s_addr))
		return fail(EINVAL, why, wlen, "'upstream': 'ip' must be a "
			"unicast IPv4 address");
	if (get_port(u, &c->up.port) != 0)
		return fail(EINVAL, why, wlen, "'upstream': 'port' must be "
			"1..65535");
	if (get_int(u, "nports", 1, 16, 1, &nports, why, wlen) ||
			get_int(u, "rank", 0, TALLY_MAX_WORKERS - 1, -1, &rank,
				why, wlen) ||
			get_int(u, "world", c->world, TALLY_MAX_TIER_WORLD,
				-1, &world, why, wlen) ||
			parse_token(u, &c->up.token, why, wlen))
		return -EINVAL;
	if (ntohs(c->up.port) + nports - 1 > 65535)
		return fail(EINVAL, why, wlen, "'upstream': ports past 65535");
	if (c->roce || c->auth)
		return fail(EINVAL, why, wlen, "'upstream': a leaf of two "
			"tiers is a plain UDP job (no 'auth', no RoCEv2 "
			"members)");
	c->up.ip = a.s_addr;
	c->up.nports = (uint16_t)nports;
	c->up.rank = (uint8_t)rank;
	c->up.world = (uint16_t)world;
	return 0;
}

/* A key of TALLY_KEY_LEN bytes from 2 x TALLY_KEY_LEN hex digits. */
static int
get_key(json_t *x, uint8_t *key)
{
	const char *s = json_string_value(x);

	if (s == NULL || strlen(s) != 2 * TALLY_KEY_LEN ||
			strspn(s, "0123456789abcdefABCDEF") != 2 * TALLY_KEY_LEN)
		return -EINVAL;
	for (unsigned int i = 0; i < TALLY_KEY_LEN; i++) {
		char b[3] = { s[2 * i], s[2 * i + 1], 0 };

		key[i] = (uint8_t)strtoul(b, NULL, 16);
	}
	return 0;
}

/*
 * "auth": {"result": KEY, "up": [KEY by rank], "down": [KEY by rank]},
 * keys as 32 hex digits; absent: a plain job (docs/protocol.md,
 * "Authenticated jobs").
 */
static int
parse_auth(json_t *o, struct tally_job_conf *c, char *why, size_t wlen)
{
	json_t *a = json_object_get(o, "auth");
	json_t *up = json_object_get(a, "up"), *down = json_object_get(a,
		"down");

	if (a == NULL)
		return 0;
	if (get_key(json_object_get(a, "result"), c->key_result) != 0)
		return fail(EINVAL, why, wlen, "'auth': 'result' must be %d "
			"hex digits", 2 * TALLY_KEY_LEN);
	if (!json_is_array(up) || json_array_size(up) != c->world ||
			!json_is_array(down) || json_array_size(down) != c->world)
		return fail(EINVAL, why, wlen, "'auth': 'up' and 'down' must "
			"be arrays of 'world' (%u) keys, by rank", c->world);
	for (unsigned int r = 0; r < c->world; r++)
		if (get_key(json_array_get(up, r), c->keys[r].up) != 0 ||
				get_key(json_array_get(down, r),
					c->keys[r].down) != 0)
			return fail(EINVAL, why, wlen, "'auth': member %u: "
				"keys must be %d hex digits", r,
				2 * TALLY_KEY_LEN);
	c->auth = 1;
	return 0;
}

static const char *const job_keys[] = {
	"cmd", "id", "token", "world", "window", "max_elems", "narrow",
	"members", "group", "encodings", "auth", "qkey", "upstream", NULL,
};

static const char *const list_keys[] = { "cmd", "after", "limit", NULL };

/* The first key of o that is not in keys, or NULL. */
static const char *
unknown_key(json_t *o, const char *const *keys)
{
	const char *k;
	json_t *val;

	json_object_foreach(o, k, val) {
		unsigned int i;

		for (i = 0; keys[i] != NULL; i++)
			if (strcmp(k, keys[i]) == 0)
				break;
		if (keys[i] == NULL)
			return k;
	}
	return NULL;
}

int
tally_admin_parse_job_add(json_t *req, struct tally_job_conf *c,
	unsigned int *encs, char *why, size_t wlen)
{
	json_int_t id = 0, world = 0, window = 0, elems = 0, qkey = 0;
	json_t *narrow = json_object_get(req, "narrow");
	const char *k;

	memset(c, 0, sizeof(*c));
	*encs = TALLY_ENC_ALL;
	if ((k = unknown_key(req, job_keys)) != NULL)
		return fail(EINVAL, why, wlen, "unknown key '%s'", k);
	if (get_int(req, "id", 1, UINT16_MAX, -1, &id, why, wlen) ||
			get_int(req, "world", 1, TALLY_MAX_WORKERS, -1, &world,
				why, wlen) ||
			get_int(req, "window", 1, TALLY_MAX_WINDOW, 64, &window,
				why, wlen) ||
			get_int(req, "max_elems", 1, TALLY_MAX_ELEMS,
				TALLY_DEFAULT_ELEMS, &elems, why, wlen) ||
			parse_token(req, &c->token, why, wlen))
		return -EINVAL;
	if (narrow != NULL && !json_is_boolean(narrow))
		return fail(EINVAL, why, wlen, "'narrow' must be true or false");
	c->id = (uint16_t)id;
	c->world = (uint8_t)world;
	c->window = (uint16_t)window;
	c->max_elems = (uint16_t)elems;
	c->narrow = json_is_true(narrow);
	if (parse_members(req, c, why, wlen) != 0 ||
			parse_group(req, c, why, wlen) != 0 ||
			parse_encodings(req, encs, why, wlen) != 0 ||
			parse_auth(req, c, why, wlen) != 0 ||
			get_int(req, "qkey", 0, 0x7fffffff,
				TALLY_ROCE_QKEY(id), &qkey, why, wlen) != 0 ||
			parse_upstream(req, c, why, wlen) != 0)
		return -EINVAL;
	c->qkey = (uint32_t)qkey;
	/* tally-dp sizes a RoCEv2 job's packets to its path MTU. */
	if (c->roce && json_object_get(req, "max_elems") == NULL)
		c->max_elems = 0;
	return 0;
}

int
tally_admin_parse_job_del(json_t *req, uint16_t *id, char *why, size_t wlen)
{
	json_int_t v = 0;

	if (get_int(req, "id", 1, UINT16_MAX, -1, &v, why, wlen) != 0)
		return -EINVAL;
	*id = (uint16_t)v;
	return 0;
}

int
tally_admin_parse_job_list(json_t *req, uint16_t *after, unsigned int *limit,
	char *why, size_t wlen)
{
	json_int_t a = 0, l = 0;
	const char *k;

	if ((k = unknown_key(req, list_keys)) != NULL)
		return fail(EINVAL, why, wlen, "unknown key '%s'", k);
	if (get_int(req, "after", 0, UINT16_MAX, 0, &a, why, wlen) != 0 ||
			get_int(req, "limit", 1, UINT16_MAX + 1, UINT16_MAX + 1,
				&l, why, wlen) != 0)
		return -EINVAL;
	*after = (uint16_t)a;
	*limit = (unsigned int)l;
	return 0;
}

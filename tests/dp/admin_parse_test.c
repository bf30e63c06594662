/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The admin socket's request parser (dataplane/dp/admin_parse.c): good
 * requests, every bad field of job_add with its sentence (job id 0,
 * members that are no unicast host or share an address, encodings),
 * unknown and duplicate keys, JSON that is not an object, truncated JSON,
 * unknown commands, job_del, job_list's page.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <arpa/inet.h>

#include "admin_parse.h"

#define MEMBER0 "{\"ip\":\"10.77.0.11\",\"port\":40001}"
#define MEMBER1 "{\"ip\":\"10.77.0.12\",\"port\":40002}"

/* Parses text; returns the result, with the request in *req. */
static int
parse(const char *text, json_t **req, enum tally_admin_cmd *cmd, char *why,
	size_t wlen)
{
	return tally_admin_parse(text, strlen(text), req, cmd, why, wlen);
}

/*
 * job_add of text: returns the parse_job_add result, *c filled, the
 * sentence in why. The request itself must parse as a job_add.
 */
static unsigned int last_encs;

static int
job_add(const char *text, struct tally_job_conf *c, char *why, size_t wlen)
{
	enum tally_admin_cmd cmd = TALLY_ADMIN_CMD_MAX_;
	json_t *req;
	int ret;

	assert_int_equal(parse(text, &req, &cmd, why, wlen), 0);
	assert_non_null(req);
	assert_int_equal(cmd, TALLY_ADMIN_JOB_ADD);
	last_encs = 0xdead;
	ret = tally_admin_parse_job_add(req, c, &last_encs, why, wlen);
	json_decref(req);
	return ret;
}

/* Checks that job_add of text fails with EINVAL and exactly want. */
static void
job_add_fails(const char *text, const char *want)
{
	struct tally_job_conf c;
	char why[256] = "";

	assert_int_equal(job_add(text, &c, why, sizeof(why)), -EINVAL);
	assert_string_equal(why, want);
}

static void
commands_by_name(void **state)
{
	char text[64], why[256];
	enum tally_admin_cmd cmd;
	json_t *req;

	(void)state;
	for (unsigned int i = 0; i < TALLY_ADMIN_CMD_MAX_; i++) {
		assert_non_null(tally_admin_cmd_name(i));
		assert_non_null(tally_admin_cmd_usage(i));
		snprintf(text, sizeof(text), "{\"cmd\":\"%s\"}",
			tally_admin_cmd_name(i));
		assert_int_equal(parse(text, &req, &cmd, why, sizeof(why)), 0);
		assert_int_equal(cmd, i);
		json_decref(req);
	}
	assert_null(tally_admin_cmd_name(TALLY_ADMIN_CMD_MAX_));
	assert_null(tally_admin_cmd_usage(TALLY_ADMIN_CMD_MAX_));
	assert_string_equal(tally_admin_cmd_name(TALLY_ADMIN_JOB_ADD),
		"job_add");
}

static void
job_add_minimal(void **state)
{
	struct tally_job_conf c;
	char why[256] = "";

	(void)state;
	memset(&c, 0xa5, sizeof(c));
	assert_int_equal(job_add("{\"cmd\":\"job_add\",\"id\":7,\"token\":"
		"\"0123456789abcdef\",\"world\":1,\"members\":[" MEMBER0 "]}",
		&c, why, sizeof(why)), 0);
	assert_int_equal(c.id, 7);
	assert_true(c.token == UINT64_C(0x0123456789abcdef));
	assert_int_equal(c.world, 1);
	assert_int_equal(c.window, 64);
	assert_int_equal(c.max_elems, TALLY_DEFAULT_ELEMS);
	assert_int_equal(c.narrow, 0);
	assert_int_equal(c.members[0].ip, inet_addr("10.77.0.11"));
	assert_int_equal(c.members[0].port, htons(40001));
	/* Everything the request leaves out is zero. */
	assert_int_equal(c.members[1].ip, 0);
	assert_int_equal(c.group.ip, 0);
	assert_int_equal(c.group.port, 0);
}

static void
job_add_full(void **state)
{
	struct tally_job_conf c;
	char why[256] = "";

	(void)state;
	assert_int_equal(job_add("{\"cmd\":\"job_add\",\"id\":65535,\"token\":"
		"\"FFFFFFFFFFFFFFFF\",\"world\":2,\"window\":32768,"
		"\"max_elems\":8192,\"narrow\":true,\"members\":[" MEMBER0 ","
		MEMBER1 "],\"group\":{\"ip\":\"239.1.2.3\",\"port\":65535}}",
		&c, why, sizeof(why)), 0);
	assert_int_equal(c.id, 65535);
	assert_true(c.token == UINT64_MAX);
	assert_int_equal(c.world, 2);
	assert_int_equal(c.window, TALLY_MAX_WINDOW);
	assert_int_equal(c.max_elems, TALLY_MAX_ELEMS);
	assert_int_equal(c.narrow, 1);
	assert_int_equal(c.members[1].ip, inet_addr("10.77.0.12"));
	assert_int_equal(c.members[1].port, htons(40002));
	assert_int_equal(c.group.ip, inet_addr("239.1.2.3"));
	assert_int_equal(c.group.port, htons(65535));
	assert_int_equal(last_encs, TALLY_ENC_ALL);
	/* The other end of each range, and an explicit false. */
	assert_int_equal(job_add("{\"cmd\":\"job_add\",\"id\":1,\"token\":"
		"\"0000000000000000\",\"world\":1,\"window\":1,\"max_elems\":1,"
		"\"narrow\":false,\"members\":[{\"ip\":\"1.2.3.4\",\"port\":1}]"
		"}", &c, why, sizeof(why)), 0);
	assert_int_equal(c.id, 1);
	assert_int_equal(c.window, 1);
	assert_int_equal(c.max_elems, 1);
	assert_int_equal(c.narrow, 0);
}

#define ADD "{\"cmd\":\"job_add\","
#define TOK "\"token\":\"0123456789abcdef\""
#define ONE "\"world\":1,\"members\":[" MEMBER0 "]"

static void
job_add_bad_numbers(void **state)
{
	(void)state;
	job_add_fails(ADD TOK "," ONE "}", "'id' is required");
	job_add_fails(ADD "\"id\":-1," TOK "," ONE "}",
		"'id' must be an integer in 1..65535");
	job_add_fails(ADD "\"id\":65536," TOK "," ONE "}",
		"'id' must be an integer in 1..65535");
	job_add_fails(ADD "\"id\":\"1\"," TOK "," ONE "}",
		"'id' must be an integer in 1..65535");
	job_add_fails(ADD "\"id\":1.5," TOK "," ONE "}",
		"'id' must be an integer in 1..65535");
	job_add_fails(ADD "\"id\":1," TOK ",\"members\":[]}",
		"'world' is required");
	job_add_fails(ADD "\"id\":1," TOK ",\"world\":0,\"members\":[]}",
		"'world' must be an integer in 1..64");
	job_add_fails(ADD "\"id\":1," TOK ",\"world\":65,\"members\":[]}",
		"'world' must be an integer in 1..64");
	job_add_fails(ADD "\"id\":1," TOK "," ONE ",\"window\":0}",
		"'window' must be an integer in 1..32768");
	job_add_fails(ADD "\"id\":1," TOK "," ONE ",\"window\":32769}",
		"'window' must be an integer in 1..32768");
	job_add_fails(ADD "\"id\":1," TOK "," ONE ",\"window\":null}",
		"'window' must be an integer in 1..32768");
	job_add_fails(ADD "\"id\":1," TOK "," ONE ",\"max_elems\":0}",
		"'max_elems' must be an integer in 1..8192");
	job_add_fails(ADD "\"id\":1," TOK "," ONE ",\"max_elems\":8193}",
		"'max_elems' must be an integer in 1..8192");
	job_add_fails(ADD "\"id\":1," TOK "," ONE ",\"narrow\":1}",
		"'narrow' must be true or false");
	job_add_fails(ADD "\"id\":1," TOK "," ONE ",\"narrow\":\"yes\"}",
		"'narrow' must be true or false");
}

static void
job_add_bad_token(void **state)
{
	static const char *const bad[] = {
		"", "\"token\":\"0123456789abcde\",",
		"\"token\":\"0123456789abcdef0\",",
		"\"token\":\"0123456789abcdeg\",",
		"\"token\":\" 123456789abcdef\",",
		"\"token\":\"0x23456789abcdef\",",
		"\"token\":81985529216486895,", "\"token\":null,",
	};
	char text[256];

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(text, sizeof(text), ADD "%s\"id\":1," ONE "}", bad[i]);
		job_add_fails(text, "'token' must be 16 hex digits");
	}
}

static void
job_add_bad_members(void **state)
{
	(void)state;
	job_add_fails(ADD "\"id\":1," TOK ",\"world\":1}",
		"'members' must be an array of 'world' (1) {\"ip\", \"port\"} "
		"objects, by rank");
	job_add_fails(ADD "\"id\":1," TOK ",\"world\":2,\"members\":["
		MEMBER0 "]}", "'members' must be an array of 'world' (2) "
		"{\"ip\", \"port\"} objects, by rank");
	job_add_fails(ADD "\"id\":1," TOK ",\"world\":1,\"members\":"
		MEMBER0 "}", "'members' must be an array of 'world' (1) "
		"{\"ip\", \"port\"} objects, by rank");
	job_add_fails(ADD "\"id\":1," TOK ",\"world\":2,\"members\":["
		MEMBER0 ",{\"ip\":\"10.77.0.300\",\"port\":1}]}",
		"member 1: 'ip' must be an IPv4 address");
	job_add_fails(ADD "\"id\":1," TOK ",\"world\":1,\"members\":["
		"{\"ip\":\"0.0.0.0\",\"port\":1}]}",
		"member 0: 'ip' 0.0.0.0 is not a unicast host address");
	job_add_fails(ADD "\"id\":1," TOK ",\"world\":1,\"members\":["
		"{\"ip\":\"::1\",\"port\":1}]}",
		"member 0: 'ip' must be an IPv4 address");
	job_add_fails(ADD "\"id\":1," TOK ",\"world\":1,\"members\":["
		"{\"port\":1}]}", "member 0: 'ip' must be an IPv4 address");
	job_add_fails(ADD "\"id\":1," TOK ",\"world\":1,\"members\":[7]}",
		"member 0: 'ip' must be an IPv4 address");
	job_add_fails(ADD "\"id\":1," TOK ",\"world\":1,\"members\":["
		"{\"ip\":\"1.2.3.4\",\"port\":0}]}",
		"member 0: 'port' must be 1..65535");
	job_add_fails(ADD "\"id\":1," TOK ",\"world\":1,\"members\":["
		"{\"ip\":\"1.2.3.4\",\"port\":65536}]}",
		"member 0: 'port' must be 1..65535");
	job_add_fails(ADD "\"id\":1," TOK ",\"world\":1,\"members\":["
		"{\"ip\":\"1.2.3.4\"}]}", "member 0: 'port' must be 1..65535");
}

/*
 * Members tally-dp cannot send results to, or could not tell apart: no
 * unicast host, or the address and port of a lower rank.
 */
static void
job_add_not_unicast(void **state)
{
	static const char *const bad[] = {
		"0.0.0.0", "0.1.2.3", "127.0.0.1", "224.0.0.1",
		"239.255.255.255", "240.0.0.1", "255.255.255.255",
	};
	struct tally_job_conf c;
	char text[512], want[128], why[256] = "";

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(text, sizeof(text), ADD "\"id\":1," TOK ",\"world\""
			":2,\"members\":[" MEMBER0 ",{\"ip\":\"%s\",\"port\":"
			"1}]}", bad[i]);
		snprintf(want, sizeof(want), "member 1: 'ip' %s is not a "
			"unicast host address", bad[i]);
		job_add_fails(text, want);
	}
	job_add_fails(ADD "\"id\":1," TOK ",\"world\":3,\"members\":["
		MEMBER0 "," MEMBER1 "," MEMBER0 "]}",
		"member 2 has the address and port of member 0");
	/* One host, two ports: two members; the last unicast /8. */
	assert_int_equal(job_add(ADD "\"id\":1," TOK ",\"world\":2,"
		"\"members\":[" MEMBER0 ",{\"ip\":\"10.77.0.11\",\"port\":"
		"40002}]}", &c, why, sizeof(why)), 0);
	assert_int_equal(job_add(ADD "\"id\":1," TOK ",\"world\":1,"
		"\"members\":[{\"ip\":\"223.255.255.254\",\"port\":9}]}",
		&c, why, sizeof(why)), 0);
}

/* "encodings": names into a mask; anything else refused. */
static void
job_add_encodings(void **state)
{
	struct tally_job_conf c;
	char why[256] = "";

	(void)state;
	assert_int_equal(job_add(ADD "\"id\":1," TOK "," ONE ",\"encodings\":"
		"[\"i8\"]}", &c, why, sizeof(why)), 0);
	assert_int_equal(last_encs, TALLY_ENC_BIT(TALLY_ENC_I8));
	assert_int_equal(job_add(ADD "\"id\":1," TOK "," ONE ",\"encodings\":"
		"[\"f32\",\"i32\",\"i16\",\"i8\",\"i4\",\"sign\",\"i8\"]}",
		&c, why, sizeof(why)), 0);
	assert_int_equal(last_encs, TALLY_ENC_ALL);
	job_add_fails(ADD "\"id\":1," TOK "," ONE ",\"encodings\":[]}",
		"'encodings' must be a non-empty array of encoding names "
		"(f32, i32, i16, i8, i4, sign)");
	job_add_fails(ADD "\"id\":1," TOK "," ONE ",\"encodings\":\"i8\"}",
		"'encodings' must be a non-empty array of encoding names "
		"(f32, i32, i16, i8, i4, sign)");
	job_add_fails(ADD "\"id\":1," TOK "," ONE ",\"encodings\":[\"i8\","
		"\"q8\"]}", "'encodings': item 1 is not an encoding name "
		"(f32, i32, i16, i8, i4, sign)");
	job_add_fails(ADD "\"id\":1," TOK "," ONE ",\"encodings\":[4]}",
		"'encodings': item 0 is not an encoding name "
		"(f32, i32, i16, i8, i4, sign)");
}

/*
 * RoCEv2 members: (ip, qpn) with port 4791 for the engine, the default
 * Q_Key from the id, max_elems left to tally-dp; a given qkey; port 4791
 * beside the qpn, as tallyd sends it; and the refusals: mixed
 * transports, another port beside a qpn, QPNs out of range,
 * two members alike, a qkey out of range.
 */
static void
job_add_roce(void **state)
{
	struct tally_job_conf c;
	char why[256] = "";

	(void)state;
	assert_int_equal(job_add(ADD "\"id\":9," TOK ",\"world\":2,\"members\":["
		"{\"ip\":\"10.77.0.11\",\"qpn\":1280},"
		"{\"ip\":\"10.77.0.11\",\"qpn\":1281}]}", &c, why, sizeof(why)),
		0);
	assert_int_equal(c.roce, 1);
	assert_int_equal(c.qpn[0], 1280);
	assert_int_equal(c.qpn[1], 1281);
	assert_int_equal(c.members[1].port, htons(4791));
	assert_int_equal(c.qkey, 0x7a110009);
	assert_int_equal(c.max_elems, 0);	/* tally-dp's to choose */
	assert_int_equal(job_add(ADD "\"id\":9," TOK ",\"world\":1,\"max_elems\":"
		"100,\"qkey\":2147483647,\"members\":[{\"ip\":\"10.77.0.11\","
		"\"qpn\":2}]}", &c, why, sizeof(why)), 0);
	assert_int_equal(c.max_elems, 100);
	assert_int_equal(c.qkey, 0x7fffffff);
	/* A UDP job has no QPNs and keeps its default max_elems. */
	assert_int_equal(job_add(ADD "\"id\":9," TOK ",\"world\":1,\"members\":["
		MEMBER0 "]}", &c, why, sizeof(why)), 0);
	assert_int_equal(c.roce, 0);
	assert_int_equal(c.qpn[0], 0);
	assert_int_equal(c.max_elems, TALLY_DEFAULT_ELEMS);
	job_add_fails(ADD "\"id\":1," TOK ",\"world\":2,\"members\":[" MEMBER0
		",{\"ip\":\"10.77.0.12\",\"qpn\":7}]}", "member 1: a job's "
		"members are all UDP ({\"ip\", \"port\"}) or all RoCEv2 "
		"({\"ip\", \"qpn\"})");
	job_add_fails(ADD "\"id\":1," TOK ",\"world\":1,\"members\":["
		"{\"ip\":\"10.77.0.12\",\"qpn\":7,\"port\":9}]}", "member 0: a "
		"RoCEv2 member's 'port', when given, is 4791");
	/* As tallyd sends them: port 4791 beside the QPN. */
	assert_int_equal(job_add(ADD "\"id\":9," TOK ",\"world\":1,\"members\":["
		"{\"ip\":\"10.77.0.11\",\"port\":4791,\"qpn\":99}]}", &c, why,
		sizeof(why)), 0);
	assert_int_equal(c.qpn[0], 99);
	assert_int_equal(c.members[0].port, htons(4791));
	job_add_fails(ADD "\"id\":1," TOK ",\"world\":1,\"members\":["
		"{\"ip\":\"10.77.0.12\",\"qpn\":1}]}",
		"member 0: 'qpn' must be 2..16777214");
	job_add_fails(ADD "\"id\":1," TOK ",\"world\":1,\"members\":["
		"{\"ip\":\"10.77.0.12\",\"qpn\":16777215}]}",
		"member 0: 'qpn' must be 2..16777214");
	job_add_fails(ADD "\"id\":1," TOK ",\"world\":1,\"members\":["
		"{\"ip\":\"10.77.0.12\",\"qpn\":\"7\"}]}",
		"member 0: 'qpn' must be 2..16777214");
	job_add_fails(ADD "\"id\":1," TOK ",\"world\":2,\"members\":["
		"{\"ip\":\"10.77.0.12\",\"qpn\":7},{\"ip\":\"10.77.0.12\","
		"\"qpn\":7}]}", "member 1 has the address and QPN of member 0");
	job_add_fails(ADD "\"id\":1," TOK ",\"world\":1,\"qkey\":2147483648,"
		"\"members\":[{\"ip\":\"10.77.0.12\",\"qpn\":7}]}",
		"'qkey' must be an integer in 0..2147483647");
}

static void
job_add_bad_group(void **state)
{
	(void)state;
	job_add_fails(ADD "\"id\":1," TOK "," ONE ",\"group\":{\"ip\":"
		"\"10.1.2.3\",\"port\":1}}", "'group': 'ip' must be an IPv4 "
		"multicast address (224.0.0.0/4)");
	job_add_fails(ADD "\"id\":1," TOK "," ONE ",\"group\":{\"port\":1}}",
		"'group': 'ip' must be an IPv4 multicast address "
		"(224.0.0.0/4)");
	job_add_fails(ADD "\"id\":1," TOK "," ONE ",\"group\":\"239.1.1.1\"}",
		"'group': 'ip' must be an IPv4 multicast address "
		"(224.0.0.0/4)");
	job_add_fails(ADD "\"id\":1," TOK "," ONE ",\"group\":{\"ip\":"
		"\"239.1.2.3\",\"port\":0}}", "'group': 'port' must be "
		"1..65535");
	job_add_fails(ADD "\"id\":1," TOK "," ONE ",\"group\":{\"ip\":"
		"\"239.1.2.3\"}}", "'group': 'port' must be 1..65535");
}

/* "upstream": a leaf of two tiers (docs/scale-out.md, "Two tiers"). */
static void
job_add_upstream(void **state)
{
	struct tally_job_conf c;
	char why[256] = "";

	(void)state;
	assert_int_equal(job_add(ADD "\"id\":1," TOK "," ONE ",\"upstream\":"
		"{\"ip\":\"10.77.0.9\",\"port\":47474,\"nports\":2,"
		"\"token\":\"00000000000000ff\",\"rank\":1,\"world\":66}}",
		&c, why, sizeof(why)), 0);
	assert_int_equal(c.up.ip, htonl(0x0a4d0009));
	assert_int_equal(c.up.port, htons(47474));
	assert_int_equal(c.up.nports, 2);
	assert_int_equal(c.up.token, 0xff);
	assert_int_equal(c.up.rank, 1);
	assert_int_equal(c.up.world, 66);
	assert_int_equal(job_add(ADD "\"id\":1," TOK "," ONE "}", &c, why,
		sizeof(why)), 0);
	assert_int_equal(c.up.ip, 0);
	job_add_fails(ADD "\"id\":1," TOK "," ONE ",\"upstream\":1}",
		"'upstream' must be an object");
	job_add_fails(ADD "\"id\":1," TOK "," ONE ",\"upstream\":{\"ip\":"
		"\"10.77.0.9\",\"port\":1,\"token\":\"00000000000000ff\","
		"\"rank\":0,\"world\":4,\"job\":3}}",
		"'upstream': unknown key 'job'");
	job_add_fails(ADD "\"id\":1," TOK "," ONE ",\"upstream\":{\"ip\":"
		"\"239.1.1.1\",\"port\":1,\"token\":\"00000000000000ff\","
		"\"rank\":0,\"world\":4}}",
		"'upstream': 'ip' must be a unicast IPv4 address");
	job_add_fails(ADD "\"id\":1," TOK "," ONE ",\"upstream\":{\"ip\":"
		"\"10.77.0.9\",\"token\":\"00000000000000ff\","
		"\"rank\":0,\"world\":4}}",
		"'upstream': 'port' must be 1..65535");
	job_add_fails(ADD "\"id\":1," TOK "," ONE ",\"upstream\":{\"ip\":"
		"\"10.77.0.9\",\"port\":1,\"token\":\"00000000000000ff\","
		"\"rank\":64,\"world\":4}}",
		"'rank' must be an integer in 0..63");
	job_add_fails(ADD "\"id\":1," TOK "," ONE ",\"upstream\":{\"ip\":"
		"\"10.77.0.9\",\"port\":1,\"token\":\"00000000000000ff\","
		"\"rank\":0,\"world\":4097}}",
		"'world' must be an integer in 1..4096");
	job_add_fails(ADD "\"id\":1," TOK "," ONE ",\"upstream\":{\"ip\":"
		"\"10.77.0.9\",\"port\":1,\"rank\":0,\"world\":4}}",
		"'token' must be 16 hex digits");
	job_add_fails(ADD "\"id\":1," TOK "," ONE ",\"upstream\":{\"ip\":"
		"\"10.77.0.9\",\"port\":65535,\"nports\":2,"
		"\"token\":\"00000000000000ff\",\"rank\":0,\"world\":4}}",
		"'upstream': ports past 65535");
}

static void
job_add_unknown_key(void **state)
{
	char text[1024], want[256];
	size_t n;

	(void)state;
	job_add_fails(ADD "\"id\":1," TOK "," ONE ",\"wrold\":3}",
		"unknown key 'wrold'");
	/* Checked before anything else. */
	job_add_fails(ADD "\"Id\":1}", "unknown key 'Id'");
	/* A long key is cut to the sentence's buffer, never overrun. */
	n = (size_t)snprintf(text, sizeof(text), ADD "\"");
	memset(text + n, 'k', 600);
	snprintf(text + n + 600, sizeof(text) - n - 600, "\":1}");
	n = (size_t)snprintf(want, sizeof(want), "unknown key '");
	memset(want + n, 'k', sizeof(want) - 1 - n);
	want[sizeof(want) - 1] = '\0';
	job_add_fails(text, want);
}

static void
duplicate_keys(void **state)
{
	enum tally_admin_cmd cmd;
	char why[256];
	json_t *req = (json_t *)1;

	(void)state;
	assert_int_equal(parse(ADD "\"id\":1,\"id\":2," TOK "," ONE "}", &req,
		&cmd, why, sizeof(why)), -EINVAL);
	assert_null(req);
	assert_non_null(strstr(why, "invalid JSON: duplicate object key"));
	assert_int_equal(parse("{\"cmd\":\"ping\",\"cmd\":\"ping\"}", &req,
		&cmd, why, sizeof(why)), -EINVAL);
	assert_null(req);
}

static void
not_an_object(void **state)
{
	static const char *const bad[] = {
		"[1,2]", "[]", "{}", "{\"cmd\":3}",
		"{\"cmd\":null}", "{\"cmd\":[\"ping\"]}", "{\"Cmd\":\"ping\"}",
	};
	enum tally_admin_cmd cmd;
	char why[256];
	json_t *req;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(parse(bad[i], &req, &cmd, why, sizeof(why)),
			-EINVAL);
		assert_null(req);
		assert_string_equal(why,
			"a request is an object with a string \"cmd\"");
	}
}

static void
invalid_json(void **state)
{
	/* jansson decodes only an object or array at the top. */
	static const char *const bad[] = {
		"3", "\"ping\"", "null", "",
		"{", "{\"cmd\":", "{\"cmd\":\"ping\"", "{\"cmd\":\"ping",
		"{\"cmd\":\"ping\"} x", "{'cmd':'ping'}", "\xff",
	};
	enum tally_admin_cmd cmd;
	char why[256];
	json_t *req;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(parse(bad[i], &req, &cmd, why, sizeof(why)),
			-EINVAL);
		assert_null(req);
		assert_memory_equal(why, "invalid JSON: ", 14);
		assert_non_null(strstr(why, " (at byte "));
	}
	/* Length counts, not the terminator: a prefix is truncated. */
	assert_int_equal(tally_admin_parse("{\"cmd\":\"ping\"}", 5, &req, &cmd,
		why, sizeof(why)), -EINVAL);
	assert_null(req);
	/* Nor is a terminator needed. */
	assert_int_equal(tally_admin_parse("{\"cmd\":\"ping\"}XYZ", 14, &req,
		&cmd, why, sizeof(why)), 0);
	assert_int_equal(cmd, TALLY_ADMIN_PING);
	json_decref(req);
}

static void
unknown_command(void **state)
{
	enum tally_admin_cmd cmd;
	char why[256], small[8];
	json_t *req;

	(void)state;
	assert_int_equal(parse("{\"cmd\":\"frobnicate\"}", &req, &cmd, why,
		sizeof(why)), -EOPNOTSUPP);
	assert_null(req);
	assert_string_equal(why,
		"unknown command 'frobnicate' (try list_commands)");
	assert_int_equal(parse("{\"cmd\":\"\"}", &req, &cmd, why,
		sizeof(why)), -EOPNOTSUPP);
	assert_int_equal(parse("{\"cmd\":\"job_add \"}", &req, &cmd, why,
		sizeof(why)), -EOPNOTSUPP);
	/* A short buffer gets a cut, terminated sentence. */
	assert_int_equal(parse("{\"cmd\":\"frobnicate\"}", &req, &cmd, small,
		sizeof(small)), -EOPNOTSUPP);
	assert_string_equal(small, "unknown");
	assert_int_equal(parse("{\"cmd\":\"x\"}", &req, &cmd, NULL, 0),
		-EOPNOTSUPP);
}

static void
job_del(void **state)
{
	static const struct {
		const char *text;
		int ret;
		uint16_t id;
		const char *why;
	} cases[] = {
		{ "{\"cmd\":\"job_del\",\"id\":9}", 0, 9, "" },
		{ "{\"cmd\":\"job_del\",\"id\":65535}", 0, 65535, "" },
		{ "{\"cmd\":\"job_del\",\"id\":1,\"extra\":1}", 0, 1, "" },
		{ "{\"cmd\":\"job_del\"}", -EINVAL, 0, "'id' is required" },
		{ "{\"cmd\":\"job_del\",\"id\":0}", -EINVAL, 0,
			"'id' must be an integer in 1..65535" },
		{ "{\"cmd\":\"job_del\",\"id\":65536}", -EINVAL, 0,
			"'id' must be an integer in 1..65535" },
		{ "{\"cmd\":\"job_del\",\"id\":\"9\"}", -EINVAL, 0,
			"'id' must be an integer in 1..65535" },
	};
	enum tally_admin_cmd cmd;
	char why[256];
	json_t *req;
	uint16_t id;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		why[0] = '\0';
		id = 0;
		assert_int_equal(parse(cases[i].text, &req, &cmd, why,
			sizeof(why)), 0);
		assert_int_equal(cmd, TALLY_ADMIN_JOB_DEL);
		assert_int_equal(tally_admin_parse_job_del(req, &id, why,
			sizeof(why)), cases[i].ret);
		assert_int_equal(id, cases[i].id);
		assert_string_equal(why, cases[i].why);
		json_decref(req);
	}
}

/* job_list's page: after (0) and limit (all); nothing else. */
static void
job_list(void **state)
{
	static const struct {
		const char *text;
		int ret;
		uint16_t after;
		unsigned int limit;
		const char *why;
	} cases[] = {
		{ "{\"cmd\":\"job_list\"}", 0, 0, 65536, "" },
		{ "{\"cmd\":\"job_list\",\"after\":65535,\"limit\":1}", 0,
			65535, 1, "" },
		{ "{\"cmd\":\"job_list\",\"after\":7}", 0, 7, 65536, "" },
		{ "{\"cmd\":\"job_list\",\"after\":-1}", -EINVAL, 0, 0,
			"'after' must be an integer in 0..65535" },
		{ "{\"cmd\":\"job_list\",\"limit\":0}", -EINVAL, 0, 0,
			"'limit' must be an integer in 1..65536" },
		{ "{\"cmd\":\"job_list\",\"limit\":\"5\"}", -EINVAL, 0, 0,
			"'limit' must be an integer in 1..65536" },
		{ "{\"cmd\":\"job_list\",\"afte\":3}", -EINVAL, 0, 0,
			"unknown key 'afte'" },
	};
	enum tally_admin_cmd cmd;
	unsigned int limit;
	char why[256];
	uint16_t after;
	json_t *req;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		why[0] = '\0';
		after = 0;
		limit = 0;
		assert_int_equal(parse(cases[i].text, &req, &cmd, why,
			sizeof(why)), 0);
		assert_int_equal(cmd, TALLY_ADMIN_JOB_LIST);
		assert_int_equal(tally_admin_parse_job_list(req, &after, &limit,
			why, sizeof(why)), cases[i].ret);
		assert_string_equal(why, cases[i].why);
		if (cases[i].ret == 0) {
			assert_int_equal(after, cases[i].after);
			assert_int_equal(limit, cases[i].limit);
		}
		json_decref(req);
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(commands_by_name),
		cmocka_unit_test(job_add_minimal),
		cmocka_unit_test(job_add_full),
		cmocka_unit_test(job_add_bad_numbers),
		cmocka_unit_test(job_add_bad_token),
		cmocka_unit_test(job_add_bad_members),
		cmocka_unit_test(job_add_not_unicast),
		cmocka_unit_test(job_add_encodings),
		cmocka_unit_test(job_add_roce),
		cmocka_unit_test(job_add_bad_group),
		cmocka_unit_test(job_add_upstream),
		cmocka_unit_test(job_add_unknown_key),
		cmocka_unit_test(duplicate_keys),
		cmocka_unit_test(not_an_object),
		cmocka_unit_test(invalid_json),
		cmocka_unit_test(unknown_command),
		cmocka_unit_test(job_del),
		cmocka_unit_test(job_list),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Rendezvous messages: every op round-trips through format and parse;
 * every missing key, wrong type, out-of-range value, unknown key and
 * malformed frame is refused with -EPROTO; the formatter refuses what the
 * parser would.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "rdv/msg.h"

#define TOKEN "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"

static void
roundtrip(const struct tally_rdv_msg *in, struct tally_rdv_msg *out)
{
	uint8_t buf[4 + TALLY_RDV_MAX_MSG];
	char why[160] = "";
	int n = tally_rdv_format(in, buf, sizeof(buf));

	assert_true(n > 4);
	assert_int_equal(tally_rdv_frame_len(buf), (size_t)n - 4);
	if (tally_rdv_parse(buf + 4, (size_t)n - 4, out, why, sizeof(why)))
		fail_msg("%.*s: %s", n - 4, buf + 4, why);
	assert_int_equal(out->op, in->op);
}

static void
every_op_roundtrips(void **state)
{
	struct tally_rdv_msg m = { .op = TALLY_RDV_JOIN, .rank = 3,
		.world = 4 }, o;

	(void)state;
	strcpy(m.job, "resnet-50.a_b");
	strcpy(m.token, TOKEN);
	roundtrip(&m, &o);
	assert_string_equal(o.job, m.job);
	assert_string_equal(o.token, TOKEN);
	assert_int_equal(o.rank, 3);
	assert_int_equal(o.world, 4);

	m = (struct tally_rdv_msg){ .op = TALLY_RDV_PARAMS,
		.dp_ip = 0x0a4d0001, .dp_port = 47474, .dp_nports = 2,
		.job_id = 7, .window = 64, .max_elems = 256, .narrow = 1,
		.group_ip = 0xef010203, .group_port = 40001 };
	roundtrip(&m, &o);
	assert_int_equal(o.dp_ip, 0x0a4d0001);
	assert_int_equal(o.dp_port, 47474);
	assert_int_equal(o.dp_nports, 2);
	assert_int_equal(o.job_id, 7);
	assert_int_equal(o.window, 64);
	assert_int_equal(o.max_elems, 256);
	assert_int_equal(o.narrow, 1);
	assert_int_equal(o.group_ip, 0xef010203);
	assert_int_equal(o.group_port, 40001);
	assert_string_equal(o.codec, "");
	m.group_ip = 0;
	strcpy(m.codec, "sparse,density=0.001,est=topk");
	roundtrip(&m, &o);
	assert_int_equal(o.group_ip, 0);
	assert_string_equal(o.codec, "sparse,density=0.001,est=topk");
	assert_false(o.rdma);
	/* An RDMA job: the dataplane's QPNs and the job's Q_Key. */
	m.rdma = 1;
	m.nqpns = TALLY_RDV_MAX_QPNS;
	for (unsigned int i = 0; i < TALLY_RDV_MAX_QPNS; i++)
		m.qpns[i] = 0xfff000 + i;
	m.qkey = 0x7fffffff;
	roundtrip(&m, &o);
	assert_true(o.rdma);
	assert_int_equal(o.nqpns, TALLY_RDV_MAX_QPNS);
	assert_memory_equal(o.qpns, m.qpns, sizeof(m.qpns));
	assert_int_equal(o.qkey, 0x7fffffff);

	m = (struct tally_rdv_msg){ .op = TALLY_RDV_MEMBER,
		.ip = 0x0a4d000c, .port = 40001 };
	roundtrip(&m, &o);
	assert_int_equal(o.ip, 0x0a4d000c);
	assert_int_equal(o.port, 40001);
	assert_int_equal(o.qpn, 0);
	m.qpn = 0xabcdef;	/* an RDMA member */
	roundtrip(&m, &o);
	assert_int_equal(o.qpn, 0xabcdef);

	m = (struct tally_rdv_msg){ .op = TALLY_RDV_READY,
		.wire_token = 0xfedcba9876543210ull, .epoch = 4000000000u };
	roundtrip(&m, &o);
	assert_true(o.wire_token == 0xfedcba9876543210ull);
	assert_int_equal(o.epoch, 4000000000u);
	assert_false(o.auth);
	/* An authenticated job's keys ride along. */
	m.auth = 1;
	for (int i = 0; i < 16; i++) {
		m.keys.up[i] = (uint8_t)i;
		m.keys.down[i] = (uint8_t)(0x80 | i);
		m.keys.result[i] = (uint8_t)(0xf0 ^ i);
	}
	roundtrip(&m, &o);
	assert_true(o.auth);
	assert_memory_equal(&o.keys, &m.keys, sizeof(m.keys));
	{
		static const char bad[] = "{\"op\":\"ready\",\"errno\":0,"
			"\"wire_token\":\"0123456789abcdef\",\"epoch\":1,"
			"\"auth\":{\"up\":\"00\",\"down\":\"00\","
			"\"result\":\"00\"}}";

		assert_int_equal(tally_rdv_parse(bad, strlen(bad), &o, NULL,
			0), -EPROTO);
	}

	m = (struct tally_rdv_msg){ .op = TALLY_RDV_ERROR, .err = EACCES };
	strcpy(m.error, "bad token for job 'x'");
	roundtrip(&m, &o);
	assert_int_equal(o.err, EACCES);
	assert_string_equal(o.error, m.error);
}

static int
parse(const char *s)
{
	struct tally_rdv_msg m;
	char why[160] = "";
	int rc = tally_rdv_parse(s, strlen(s), &m, why, sizeof(why));

	if (rc != 0)
		assert_true(why[0] != '\0');
	return rc;
}

static void
bad_messages_are_refused(void **state)
{
	static const char *const bad[] = {
		"",
		"{",
		"[]",
		"\"join\"",
		"{}",
		"{\"op\":1}",
		"{\"op\":\"hello\"}",
		/* join: each key wrong in turn */
		"{\"op\":\"join\",\"v\":2,\"job\":\"a\",\"token\":\"" TOKEN
			"\",\"rank\":0,\"world\":1}",
		"{\"op\":\"join\",\"job\":\"a\",\"token\":\"" TOKEN
			"\",\"rank\":0,\"world\":1}",
		"{\"op\":\"join\",\"v\":1,\"job\":\"\",\"token\":\"" TOKEN
			"\",\"rank\":0,\"world\":1}",
		"{\"op\":\"join\",\"v\":1,\"job\":\"a b\",\"token\":\"" TOKEN
			"\",\"rank\":0,\"world\":1}",
		"{\"op\":\"join\",\"v\":1,\"job\":\"a\",\"token\":\"00\","
			"\"rank\":0,\"world\":1}",
		"{\"op\":\"join\",\"v\":1,\"job\":\"a\",\"token\":\"" TOKEN
			"\",\"rank\":-1,\"world\":1}",
		"{\"op\":\"join\",\"v\":1,\"job\":\"a\",\"token\":\"" TOKEN
			"\",\"rank\":0,\"world\":4097}",
		"{\"op\":\"join\",\"v\":1,\"job\":\"a\",\"token\":\"" TOKEN
			"\",\"rank\":\"0\",\"world\":1}",
		"{\"op\":\"join\",\"v\":1,\"job\":\"a\",\"token\":\"" TOKEN
			"\",\"rank\":0,\"world\":1,\"extra\":1}",
		"{\"op\":\"join\",\"op\":\"join\",\"v\":1,\"job\":\"a\","
			"\"token\":\"" TOKEN "\",\"rank\":0,\"world\":1}",
		/* member */
		"{\"op\":\"member\",\"ip\":\"0.0.0.0\",\"port\":1}",
		"{\"op\":\"member\",\"ip\":\"239.1.1.1\",\"port\":1}",
		"{\"op\":\"member\",\"ip\":\"10.0.0.1\",\"port\":0}",
		"{\"op\":\"member\",\"ip\":\"10.0.0.1\",\"port\":65536}",
		"{\"op\":\"member\",\"ip\":\"10.0.0\",\"port\":1}",
		"{\"op\":\"member\",\"ip\":\"10.0.0.1\",\"port\":1,"
			"\"qpn\":0}",
		"{\"op\":\"member\",\"ip\":\"10.0.0.1\",\"port\":1,"
			"\"qpn\":16777216}",
		"{\"op\":\"member\",\"ip\":\"10.0.0.1\",\"port\":1,"
			"\"qpn\":\"7\"}",
		/* params' rdma */
		"{\"op\":\"params\",\"errno\":0,\"dp_ip\":\"10.0.0.1\","
			"\"dp_port\":1,\"dp_nports\":1,\"job_id\":1,"
			"\"window\":1,\"max_elems\":1,\"narrow\":false,"
			"\"rdma\":{\"qpns\":[],\"qkey\":1}}",
		"{\"op\":\"params\",\"errno\":0,\"dp_ip\":\"10.0.0.1\","
			"\"dp_port\":1,\"dp_nports\":1,\"job_id\":1,"
			"\"window\":1,\"max_elems\":1,\"narrow\":false,"
			"\"rdma\":{\"qpns\":[256],\"qkey\":2147483648}}",
		"{\"op\":\"params\",\"errno\":0,\"dp_ip\":\"10.0.0.1\","
			"\"dp_port\":1,\"dp_nports\":1,\"job_id\":1,"
			"\"window\":1,\"max_elems\":1,\"narrow\":false,"
			"\"rdma\":{\"qpns\":[0],\"qkey\":1}}",
		"{\"op\":\"params\",\"errno\":0,\"dp_ip\":\"10.0.0.1\","
			"\"dp_port\":1,\"dp_nports\":1,\"job_id\":1,"
			"\"window\":1,\"max_elems\":1,\"narrow\":false,"
			"\"rdma\":{\"qpns\":[256],\"qkey\":1,\"x\":1}}",
		"{\"op\":\"params\",\"errno\":0,\"dp_ip\":\"10.0.0.1\","
			"\"dp_port\":1,\"dp_nports\":1,\"job_id\":1,"
			"\"window\":1,\"max_elems\":1,\"narrow\":false,"
			"\"rdma\":[256]}",
		/* params */
		"{\"op\":\"params\",\"errno\":0,\"dp_ip\":\"10.0.0.1\","
			"\"dp_port\":65535,\"dp_nports\":2,\"job_id\":1,"
			"\"window\":1,\"max_elems\":1,\"narrow\":false}",
		"{\"op\":\"params\",\"errno\":0,\"dp_ip\":\"10.0.0.1\","
			"\"dp_port\":1,\"dp_nports\":1,\"job_id\":1,"
			"\"window\":1,\"max_elems\":8193,\"narrow\":false}",
		"{\"op\":\"params\",\"errno\":0,\"dp_ip\":\"10.0.0.1\","
			"\"dp_port\":1,\"dp_nports\":1,\"job_id\":1,"
			"\"window\":1,\"max_elems\":1,\"narrow\":0}",
		"{\"op\":\"params\",\"errno\":0,\"dp_ip\":\"10.0.0.1\","
			"\"dp_port\":1,\"dp_nports\":1,\"job_id\":1,"
			"\"window\":1,\"max_elems\":1,\"narrow\":false,"
			"\"group\":\"10.0.0.1:5\"}",
		"{\"op\":\"params\",\"errno\":0,\"dp_ip\":\"10.0.0.1\","
			"\"dp_port\":1,\"dp_nports\":1,\"job_id\":1,"
			"\"window\":1,\"max_elems\":1,\"narrow\":false,"
			"\"group\":\"239.0.0.1:-5\"}",
		"{\"op\":\"params\",\"errno\":0,\"dp_ip\":\"10.0.0.1\","
			"\"dp_port\":1,\"dp_nports\":1,\"job_id\":1,"
			"\"window\":1,\"max_elems\":1,\"narrow\":false,"
			"\"codec\":\"q9\"}",
		"{\"op\":\"params\",\"errno\":0,\"dp_ip\":\"10.0.0.1\","
			"\"dp_port\":1,\"dp_nports\":1,\"job_id\":1,"
			"\"window\":1,\"max_elems\":1,\"narrow\":false,"
			"\"codec\":8}",
		"{\"op\":\"member\",\"ip\":\"10.0.0.1\",\"port\":1,"
			"\"codec\":\"q8\"}",
		/* ready, error */
		"{\"op\":\"ready\",\"errno\":0,\"wire_token\":\"123\","
			"\"epoch\":1}",
		"{\"op\":\"ready\",\"errno\":1,\"wire_token\":"
			"\"0123456789abcdef\",\"epoch\":1}",
		"{\"op\":\"error\",\"errno\":0,\"error\":\"x\"}",
		"{\"op\":\"error\",\"errno\":13}",
	};

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (parse(bad[i]) != -EPROTO)
			fail_msg("accepted: %s", bad[i]);
	}
	/* And the good forms of the same. */
	assert_int_equal(parse("{\"op\":\"member\",\"ip\":\"10.0.0.1\","
		"\"port\":1}"), 0);
	assert_int_equal(parse("{\"op\":\"params\",\"errno\":0,\"dp_ip\":"
		"\"10.0.0.1\",\"dp_port\":65534,\"dp_nports\":2,\"job_id\":1,"
		"\"window\":1,\"max_elems\":8192,\"narrow\":false,\"group\":"
		"\"239.0.0.1:5\"}"), 0);
	assert_int_equal(parse("{\"op\":\"params\",\"errno\":0,\"dp_ip\":"
		"\"10.0.0.1\",\"dp_port\":1,\"dp_nports\":1,\"job_id\":1,"
		"\"window\":1,\"max_elems\":1,\"narrow\":false,\"rdma\":"
		"{\"qpns\":[256,257],\"qkey\":2147483647}}"), 0);
	assert_int_equal(parse("{\"op\":\"member\",\"ip\":\"10.0.0.1\","
		"\"port\":4791,\"qpn\":16777215}"), 0);
}

/*
 * A two-tier tree's PARAMS (docs/control.md, "Rendezvous protocol"): the
 * optional "tier" goes both ways, is refused out of range or beside
 * "shards", and a JOIN names a total world up to 4096.
 */
static void
params_tier(void **state)
{
	struct tally_rdv_msg m = { .op = TALLY_RDV_PARAMS,
		.dp_ip = 0x0a4d0001, .dp_port = 47474, .dp_nports = 1,
		.job_id = 3, .window = 64, .max_elems = 256, .tier_rank = 2,
		.tier_world = 3, .scale_world = 66 }, o;
	struct tally_rdv_msg j = { .op = TALLY_RDV_JOIN, .job = "t",
		.rank = 4095, .world = 4096 };
	uint8_t buf[4 + TALLY_RDV_MAX_MSG];
	const char *head = "{\"op\":\"params\",\"errno\":0,\"dp_ip\":"
		"\"10.0.0.1\",\"dp_port\":100,\"dp_nports\":1,\"job_id\":1,"
		"\"window\":1,\"max_elems\":1,\"narrow\":false,\"tier\":";
	static const char *const bad[] = {
		"{\"rank\":3,\"world\":3,\"scale_world\":6}}",
		"{\"rank\":0,\"world\":65,\"scale_world\":130}}",
		"{\"rank\":0,\"world\":3,\"scale_world\":2}}",
		"{\"rank\":0,\"world\":3,\"scale_world\":4097}}",
		"{\"rank\":0,\"world\":3}}",
		"{\"rank\":0,\"world\":3,\"scale_world\":6,\"x\":1}}",
		"[0,3,6]}",
	};
	char text[512];

	(void)state;
	roundtrip(&m, &o);
	assert_int_equal(o.tier_rank, 2);
	assert_int_equal(o.tier_world, 3);
	assert_int_equal(o.scale_world, 66);
	m.tier_rank = 3;	/* the formatter refuses what the parser would */
	assert_int_equal(tally_rdv_format(&m, buf, sizeof(buf)), -EINVAL);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(text, sizeof(text), "%s%s", head, bad[i]);
		if (parse(text) != -EPROTO)
			fail_msg("accepted: %s", text);
	}
	memset(j.token, 'a', TALLY_RDV_TOKEN_HEX);
	roundtrip(&j, &o);
	assert_int_equal(o.world, 4096);
	assert_int_equal(o.rank, 4095);
}

/*
 * A sharded job's PARAMS (docs/control.md, "Rendezvous protocol"): the
 * optional "shards" goes both ways, starts with dp_ip's dataplane, and
 * is refused out of shape; a PARAMS without it is one dataplane.
 */
static void
params_shards(void **state)
{
	struct tally_rdv_msg m = { .op = TALLY_RDV_PARAMS,
		.dp_ip = 0x0a4d0001, .dp_port = 47474, .dp_nports = 2,
		.job_id = 3, .window = 64, .max_elems = 256 }, o;
	uint8_t buf[4 + TALLY_RDV_MAX_MSG];
	const char *head = "{\"op\":\"params\",\"errno\":0,\"dp_ip\":"
		"\"10.0.0.1\",\"dp_port\":100,\"dp_nports\":1,\"job_id\":1,"
		"\"window\":1,\"max_elems\":1,\"narrow\":false,\"shards\":";
	static const char *const bad[] = {
		"[{\"ip\":\"10.0.0.1\",\"port\":100,\"nports\":1}]}",
		"[{\"ip\":\"10.0.0.2\",\"port\":100,\"nports\":1},"
			"{\"ip\":\"10.0.0.1\",\"port\":100,\"nports\":1}]}",
		"[{\"ip\":\"10.0.0.1\",\"port\":100,\"nports\":1},"
			"{\"ip\":\"10.0.0.2\",\"port\":65535,\"nports\":2}]}",
		"[{\"ip\":\"10.0.0.1\",\"port\":100,\"nports\":1},"
			"{\"ip\":\"239.0.0.2\",\"port\":100,\"nports\":1}]}",
		"[{\"ip\":\"10.0.0.1\",\"port\":100,\"nports\":1},"
			"{\"ip\":\"10.0.0.2\",\"port\":100}]}",
		"[{\"ip\":\"10.0.0.1\",\"port\":100,\"nports\":1},"
			"{\"ip\":\"10.0.0.2\",\"port\":100,\"nports\":1,"
			"\"x\":1}]}",
		"{\"ip\":\"10.0.0.1\"}}",
	};
	char text[512];

	(void)state;
	roundtrip(&m, &o);
	assert_int_equal(o.nshards, 0);
	m.nshards = TALLY_RDV_MAX_SHARDS;
	for (unsigned int h = 0; h < m.nshards; h++)
		m.shards[h] = (struct tally_rdv_shard){ 0x0a4d0001 + h,
			(uint16_t)(47474 + h), (uint16_t)(2 + h % 2) };
	m.shards[0].nports = 2;
	roundtrip(&m, &o);
	assert_int_equal(o.nshards, TALLY_RDV_MAX_SHARDS);
	assert_memory_equal(o.shards, m.shards, sizeof(m.shards));
	/* The formatter refuses what the parser would. */
	m.shards[0].port = 1;
	assert_int_equal(tally_rdv_format(&m, buf, sizeof(buf)), -EINVAL);
	m.shards[0].port = 47474;
	m.nshards = 1;
	assert_int_equal(tally_rdv_format(&m, buf, sizeof(buf)), -EINVAL);
	m.nshards = 2;
	m.rdma = 1;
	m.nqpns = 1;
	m.qpns[0] = 7;
	assert_int_equal(tally_rdv_format(&m, buf, sizeof(buf)), -EINVAL);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(text, sizeof(text), "%s%s", head, bad[i]);
		if (parse(text) != -EPROTO)
			fail_msg("accepted: %s", text);
	}
	snprintf(text, sizeof(text), "%s%s", head, "[{\"ip\":\"10.0.0.1\","
		"\"port\":100,\"nports\":1},{\"ip\":\"10.0.0.2\",\"port\":"
		"100,\"nports\":1}]}");
	assert_int_equal(parse(text), 0);
}

static void
frames_and_limits(void **state)
{
	uint8_t p[4] = { 0, 0, 0, 0 };
	struct tally_rdv_msg m = { .op = TALLY_RDV_ERROR, .err = 5000 };
	uint8_t buf[64];
	char big[TALLY_RDV_MAX_MSG + 2];

	(void)state;
	assert_int_equal(tally_rdv_frame_len(p), 0);
	p[3] = 1;
	assert_int_equal(tally_rdv_frame_len(p), 1);
	p[2] = 0x10;	/* 4097 */
	assert_int_equal(tally_rdv_frame_len(p), 0);
	p[2] = 0x10;
	p[3] = 0;	/* 4096 */
	assert_int_equal(tally_rdv_frame_len(p), 4096);
	p[0] = 0x80;
	assert_int_equal(tally_rdv_frame_len(p), 0);

	/* The formatter refuses what the parser would. */
	assert_int_equal(tally_rdv_format(&m, buf, sizeof(buf)), -EINVAL);
	m = (struct tally_rdv_msg){ .op = TALLY_RDV_JOIN, .world = 1 };
	strcpy(m.job, "a");
	strcpy(m.token, "xyz");
	assert_int_equal(tally_rdv_format(&m, buf, sizeof(buf)), -EINVAL);
	strcpy(m.token, TOKEN);
	assert_int_equal(tally_rdv_format(&m, buf, 8), -EMSGSIZE);
	m.op = (enum tally_rdv_op)99;
	assert_int_equal(tally_rdv_format(&m, buf, sizeof(buf)), -EINVAL);

	/* A body above the limit is refused before it is parsed. */
	memset(big, ' ', sizeof(big));
	assert_int_equal(tally_rdv_parse(big, sizeof(big), &m, NULL, 0),
		-EPROTO);

	assert_true(tally_rdv_name_ok("a"));
	assert_false(tally_rdv_name_ok(""));
	assert_false(tally_rdv_name_ok("a/b"));
	memset(big, 'a', 64);
	big[64] = '\0';
	assert_false(tally_rdv_name_ok(big));
	big[63] = '\0';
	assert_true(tally_rdv_name_ok(big));
}

/* Parses the JSON text s: 0 or -EPROTO. */
static int
parse_text(const char *s, struct tally_rdv_msg *m)
{
	return tally_rdv_parse(s, strlen(s), m, NULL, 0);
}

/*
 * The ring fallback's keys: JOIN's "ring" and "transport", PARAMS'
 * "fallback" (without the dataplane's keys), READY's "ring" of a world
 * of 64; and what is refused both ways.
 */
static void
ring_fallback(void **state)
{
	struct tally_rdv_msg m = { .op = TALLY_RDV_JOIN, .rank = 1,
		.world = 64, .ring_addr = { 0x0a000002, 40000 },
		.ring_want = 1 }, out;
	uint8_t buf[4 + TALLY_RDV_MAX_MSG];

	(void)state;
	strcpy(m.job, "j");
	strcpy(m.token, TOKEN);
	roundtrip(&m, &out);
	assert_int_equal(out.ring_addr.ip, 0x0a000002);
	assert_int_equal(out.ring_addr.port, 40000);
	assert_int_equal(out.ring_want, 1);
	m.ring_addr.port = 0;	/* asking for the ring needs an address */
	assert_int_equal(tally_rdv_format(&m, buf, sizeof(buf)), -EINVAL);

	m = (struct tally_rdv_msg){ .op = TALLY_RDV_PARAMS, .ring_fallback = 1,
		.window = 8, .max_elems = 256 };
	roundtrip(&m, &out);
	assert_int_equal(out.ring_fallback, 1);
	assert_int_equal(out.dp_ip, 0);
	m.ring_fallback = 0;		/* no dataplane and no fallback */
	assert_int_equal(tally_rdv_format(&m, buf, sizeof(buf)), -EINVAL);

	m = (struct tally_rdv_msg){ .op = TALLY_RDV_READY, .nring = 64,
		.wire_token = 1, .epoch = 2 };
	for (unsigned int r = 0; r < 64; r++)
		m.ring[r] = (struct tally_rdv_addr){ 0x0a000001 + r,
			(uint16_t)(40000 + r) };
	roundtrip(&m, &out);
	assert_int_equal(out.nring, 64);
	assert_memory_equal(out.ring, m.ring, sizeof(m.ring));
	m.ring[5].port = 0;
	assert_int_equal(tally_rdv_format(&m, buf, sizeof(buf)), -EINVAL);

	/* Refused: a bad address, another transport, another fallback. */
	assert_int_equal(parse_text("{\"op\":\"join\",\"v\":1,\"job\":"
		"\"j\",\"token\":\"" TOKEN "\",\"rank\":0,\"world\":2,"
		"\"ring\":\"10.0.0.1:0\"}", &out), -EPROTO);
	assert_int_equal(parse_text("{\"op\":\"join\",\"v\":1,\"job\":"
		"\"j\",\"token\":\"" TOKEN "\",\"rank\":0,\"world\":2,"
		"\"ring\":\"224.0.0.1:5\"}", &out), -EPROTO);
	assert_int_equal(parse_text("{\"op\":\"join\",\"v\":1,\"job\":"
		"\"j\",\"token\":\"" TOKEN "\",\"rank\":0,\"world\":2,"
		"\"transport\":\"ring\"}", &out), -EPROTO);
	assert_int_equal(parse_text("{\"op\":\"join\",\"v\":1,\"job\":"
		"\"j\",\"token\":\"" TOKEN "\",\"rank\":0,\"world\":2,"
		"\"ring\":\"10.0.0.1:5\",\"transport\":\"udp\"}", &out),
		-EPROTO);
	assert_int_equal(parse_text("{\"op\":\"params\",\"errno\":0,"
		"\"fallback\":\"tree\",\"job_id\":1,\"window\":8,"
		"\"max_elems\":8,\"narrow\":false}", &out), -EPROTO);
	assert_int_equal(parse_text("{\"op\":\"params\",\"errno\":0,"
		"\"job_id\":1,\"window\":8,\"max_elems\":8,"
		"\"narrow\":false}", &out), -EPROTO);
	assert_int_equal(parse_text("{\"op\":\"ready\",\"errno\":0,"
		"\"wire_token\":\"0000000000000001\",\"epoch\":1,"
		"\"ring\":[]}", &out), -EPROTO);
	assert_int_equal(parse_text("{\"op\":\"member\",\"ip\":"
		"\"10.0.0.1\",\"port\":5,\"ring\":\"10.0.0.1:5\"}", &out),
		-EPROTO);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(every_op_roundtrips),
		cmocka_unit_test(bad_messages_are_refused),
		cmocka_unit_test(frames_and_limits),
		cmocka_unit_test(params_shards),
		cmocka_unit_test(params_tier),
		cmocka_unit_test(ring_fallback),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

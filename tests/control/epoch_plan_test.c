/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Epochs' pure parts (control/tallyd/epoch.c, rejoin.c): which shards a
 * job gets when dataplanes die (survivors in slot order, a spare in a
 * dead one's place, none: no capacity), which rejoins are taken (an
 * epoch of the current membership) and which refused (one the job has
 * not had, one whose membership is over), the reason's JSON through the
 * state and its bad forms refused, and the rendezvous messages' new
 * optional keys (join's "epoch", error's "fallback") both ways.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <string.h>

#include "tallyd.h"

#define TOKEN "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"

static void
plan_survivors_and_spares(void **state)
{
	unsigned int cur[3] = { 0, 1, 2 }, out[3];

	(void)state;
	/* All live: unchanged. */
	assert_int_equal(tallyd_epoch_plan(cur, 3, 0x7, 3, out), 3);
	assert_int_equal(out[0], 0);
	assert_int_equal(out[2], 2);
	/* dp2 dead, no spare: the two survivors, in order. */
	assert_int_equal(tallyd_epoch_plan(cur, 3, 0x3, 3, out), 2);
	assert_int_equal(out[0], 0);
	assert_int_equal(out[1], 1);
	/* dp1 dead, dp3 a live spare: it takes dp1's place. */
	assert_int_equal(tallyd_epoch_plan(cur, 3, 0xd, 4, out), 3);
	assert_int_equal(out[0], 0);
	assert_int_equal(out[1], 3);
	assert_int_equal(out[2], 2);
	/* Two dead, one spare: the first dead one's place, the other goes. */
	assert_int_equal(tallyd_epoch_plan(cur, 3, 0x9, 4, out), 2);
	assert_int_equal(out[0], 0);
	assert_int_equal(out[1], 3);
	/* Every one dead, none spare: no capacity. */
	assert_int_equal(tallyd_epoch_plan(cur, 3, 0x0, 3, out), 0);
	/* A one-shard job on a dead dataplane moves to a spare. */
	cur[0] = 1;
	assert_int_equal(tallyd_epoch_plan(cur, 1, 0x5, 3, out), 1);
	assert_int_equal(out[0], 0);
}

static void
rejoin_rules(void **state)
{
	struct tallyd_job j = { .name = "a", .has_members = true,
		.formed_epoch = 4, .epoch = 7 };
	char why[200];

	(void)state;
	assert_int_equal(tallyd_epoch_rejoin_check(&j, 4, why, sizeof(why)), 0);
	assert_int_equal(tallyd_epoch_rejoin_check(&j, 7, why, sizeof(why)), 0);
	assert_int_equal(tallyd_epoch_rejoin_check(&j, 8, why, sizeof(why)),
		-EINVAL);
	assert_non_null(strstr(why, "has not had epoch 8"));
	assert_int_equal(tallyd_epoch_rejoin_check(&j, 3, why, sizeof(why)),
		-ESTALE);
	assert_non_null(strstr(why, "epoch 3 of job 'a' is over"));
	j.has_members = false;	/* no capacity ended it */
	assert_int_equal(tallyd_epoch_rejoin_check(&j, 7, why, sizeof(why)),
		-ESTALE);
}

static void
reason_json(void **state)
{
	struct tallyd_job j = { .name = "a", .epoch = 9 }, k = { .name = "a",
		.epoch = 9 };
	json_t *o = json_object();
	char why[200];

	(void)state;
	assert_true(json_is_null(tallyd_epoch_json(&j)));
	strcpy(j.ew.cause, "dataplane");
	strcpy(j.ew.dataplane, "rack3");
	strcpy(j.ew.missed, "3 admin polls");
	j.ew.at = 1700000000;
	j.ew.from = 8;
	j.formed_epoch = 5;
	json_object_set_new(o, "epoch_reason", tallyd_epoch_json(&j));
	json_object_set_new(o, "formed_epoch", json_integer(5));
	assert_int_equal(tallyd_epoch_load(&k, o, why, sizeof(why)), 0);
	assert_string_equal(k.ew.cause, "dataplane");
	assert_string_equal(k.ew.dataplane, "rack3");
	assert_string_equal(k.ew.missed, "3 admin polls");
	assert_int_equal(k.ew.at, 1700000000);
	assert_int_equal(k.ew.from, 8);
	assert_int_equal(k.formed_epoch, 5);
	/* A state from before epochs: formed at the current epoch. */
	json_object_clear(o);
	assert_int_equal(tallyd_epoch_load(&k, o, why, sizeof(why)), 0);
	assert_int_equal(k.formed_epoch, 9);
	/* Bad forms. */
	json_object_set_new(o, "formed_epoch", json_integer(10));
	assert_int_equal(tallyd_epoch_load(&k, o, why, sizeof(why)), -EINVAL);
	json_object_set_new(o, "formed_epoch", json_integer(1));
	json_object_set_new(o, "epoch_reason", json_pack("{s:s}", "cause",
		"dataplane"));
	assert_int_equal(tallyd_epoch_load(&k, o, why, sizeof(why)), -EINVAL);
	assert_non_null(strstr(why, "bad epoch_reason"));
	json_object_set_new(o, "epoch_reason", json_pack("{s:s, s:i, s:i}",
		"cause", "a-cause-far-too-long", "at", 1, "from", 1));
	assert_int_equal(tallyd_epoch_load(&k, o, why, sizeof(why)), -EINVAL);
	json_decref(o);
}

/* Formats m and parses it back into *out: 0 or the parser's -errno. */
static int
roundtrip(const struct tally_rdv_msg *m, struct tally_rdv_msg *out)
{
	uint8_t buf[4 + TALLY_RDV_MAX_MSG];
	int n = tally_rdv_format(m, buf, sizeof(buf));

	if (n < 0)
		return n;
	return tally_rdv_parse(buf + 4, (size_t)n - 4, out, NULL, 0);
}

/* Parses a message body given as text: 0 or -EPROTO. */
static int
parse(const char *s, struct tally_rdv_msg *out)
{
	return tally_rdv_parse(s, strlen(s), out, NULL, 0);
}

static void
messages(void **state)
{
	struct tally_rdv_msg m = { .op = TALLY_RDV_JOIN, .rank = 1,
		.world = 2, .epoch = 42 }, o;

	(void)state;
	strcpy(m.job, "a");
	strcpy(m.token, TOKEN);
	assert_int_equal(roundtrip(&m, &o), 0);
	assert_int_equal(o.epoch, 42);
	m.epoch = 0;		/* a plain join has no "epoch" */
	assert_int_equal(roundtrip(&m, &o), 0);
	assert_int_equal(o.epoch, 0);
	assert_int_equal(parse("{\"op\":\"join\",\"v\":1,\"job\":\"a\","
		"\"token\":\"" TOKEN "\",\"rank\":0,\"world\":1,\"epoch\":0}",
		&o), -EPROTO);
	assert_int_equal(parse("{\"op\":\"join\",\"v\":1,\"job\":\"a\","
		"\"token\":\"" TOKEN "\",\"rank\":0,\"world\":1,\"epoch\":"
		"\"1\"}", &o), -EPROTO);
	m = (struct tally_rdv_msg){ .op = TALLY_RDV_ERROR, .err = ENOSPC,
		.error = "no capacity", .fallback = "ring" };
	assert_int_equal(roundtrip(&m, &o), 0);
	assert_string_equal(o.fallback, "ring");
	assert_int_equal(o.err, ENOSPC);
	strcpy(m.fallback, "mesh");
	assert_int_equal(roundtrip(&m, &o), -EINVAL);
	assert_int_equal(parse("{\"op\":\"error\",\"errno\":28,\"error\":"
		"\"x\",\"fallback\":\"mesh\"}", &o), -EPROTO);
	assert_int_equal(parse("{\"op\":\"error\",\"errno\":28,\"error\":"
		"\"x\",\"fallback\":1}", &o), -EPROTO);
	/* Only an error may name a fallback, only a join an epoch. */
	assert_int_equal(parse("{\"op\":\"member\",\"ip\":\"10.0.0.1\","
		"\"port\":1,\"epoch\":3}", &o), -EPROTO);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(plan_survivors_and_spares),
		cmocka_unit_test(rejoin_rules),
		cmocka_unit_test(reason_json),
		cmocka_unit_test(messages),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

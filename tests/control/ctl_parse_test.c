/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Control-socket requests: each command parses with its defaults; every
 * bad field, unknown key or command, and malformed JSON is refused with
 * the right errno and a reason.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <string.h>

#include "ctl_parse.h"

static int
parse(const char *s, struct tallyd_ctl_req *r)
{
	char why[200] = "";
	int rc = tallyd_ctl_parse(s, strlen(s), r, why, sizeof(why));

	if (rc != 0 && why[0] == '\0')
		fail_msg("no reason for refusing %s", s);
	return rc;
}

static void
good_requests(void **state)
{
	struct tallyd_ctl_req r;

	(void)state;
	assert_int_equal(parse("{\"cmd\":\"ping\"}", &r), 0);
	assert_int_equal(r.cmd, TALLYD_CTL_PING);
	assert_int_equal(parse("{\"cmd\":\"job_create\",\"name\":\"s\","
		"\"world\":4,\"dataplanes\":[\"dp0\",\"b-2\",\"c.3\"]}", &r), 0);
	assert_int_equal(r.ndataplanes, 3);
	assert_string_equal(r.dataplanes[1], "b-2");
	assert_string_equal(r.dataplanes[2], "c.3");
	assert_int_equal(parse("{\"cmd\":\"job_create\",\"name\":\"s\","
		"\"world\":4}", &r), 0);
	assert_int_equal(r.ndataplanes, 0);
	assert_int_equal(r.nleaves, 0);
	/* A two-tier tree: world is the total. */
	assert_int_equal(parse("{\"cmd\":\"job_create\",\"name\":\"t\","
		"\"world\":4096,\"leaves\":[\"a\",\"b\"],\"spine\":\"s\"}",
		&r), 0);
	assert_int_equal(r.world, 4096);
	assert_int_equal(r.nleaves, 2);
	assert_string_equal(r.leaves[1], "b");
	assert_string_equal(r.spine, "s");
	assert_int_equal(parse("{\"cmd\":\"job_list\"}", &r), 0);
	assert_int_equal(r.cmd, TALLYD_CTL_JOB_LIST);
	assert_false(r.paged);
	assert_int_equal(r.limit, 0);
	assert_int_equal(parse("{\"cmd\":\"job_list\",\"after\":65535,"
		"\"limit\":1}", &r), 0);
	assert_true(r.paged);
	assert_int_equal(r.after, 65535);
	assert_int_equal(r.limit, 1);
	assert_int_equal(parse("{\"cmd\":\"job_list\",\"after\":0}", &r),
		0);
	assert_true(r.paged);
	assert_int_equal(parse("{\"cmd\":\"stats\"}", &r), 0);
	assert_int_equal(parse("{\"cmd\":\"list_commands\"}", &r), 0);
	assert_int_equal(parse("{\"cmd\":\"job_show\",\"name\":\"a.b-c_9\"}",
		&r), 0);
	assert_int_equal(r.cmd, TALLYD_CTL_JOB_SHOW);
	assert_string_equal(r.name, "a.b-c_9");
	assert_int_equal(parse("{\"cmd\":\"job_delete\",\"name\":\"x\"}", &r),
		0);
	assert_int_equal(r.cmd, TALLYD_CTL_JOB_DELETE);

	assert_int_equal(parse("{\"cmd\":\"job_create\",\"name\":\"x\","
		"\"world\":4}", &r), 0);
	assert_int_equal(r.cmd, TALLYD_CTL_JOB_CREATE);
	assert_int_equal(r.world, 4);
	assert_int_equal(r.window, 64);
	assert_int_equal(r.max_elems, 256);
	assert_false(r.narrow);
	assert_int_equal(r.group_ip, 0);
	assert_false(r.has_idle_timeout);
	assert_string_equal(r.codec, "fixp");
	assert_int_equal(parse("{\"cmd\":\"job_create\",\"name\":\"x\","
		"\"world\":4,\"codec\":\"randk,seed=0x10\"}", &r), 0);
	assert_string_equal(r.codec, "randk,seed=16");
	assert_false(r.rdma);
	assert_int_equal(parse("{\"cmd\":\"job_create\",\"name\":\"x\","
		"\"world\":4,\"transport\":\"rdma\"}", &r), 0);
	assert_true(r.rdma);
	assert_int_equal(parse("{\"cmd\":\"job_create\",\"name\":\"x\","
		"\"world\":4,\"transport\":\"udp\"}", &r), 0);
	assert_false(r.rdma);

	assert_int_equal(parse("{\"cmd\":\"job_create\",\"name\":\"x\","
		"\"world\":64,\"window\":32768,\"max_elems\":8192,"
		"\"narrow\":true,\"group\":\"239.1.2.3:40001\","
		"\"idle_timeout_s\":0}", &r), 0);
	assert_int_equal(r.world, 64);
	assert_int_equal(r.window, 32768);
	assert_int_equal(r.max_elems, 8192);
	assert_true(r.narrow);
	assert_false(r.auth);
	assert_int_equal(r.group_ip, 0xef010203);
	assert_int_equal(r.group_port, 40001);
	assert_true(r.has_idle_timeout);
	assert_int_equal(r.idle_timeout_s, 0);
}

static void
bad_requests(void **state)
{
	static const struct {
		const char *req;
		int err;
	} bad[] = {
		{ "", EINVAL },
		{ "{", EINVAL },
		{ "[1]", EINVAL },
		{ "{\"cmd\":1}", EINVAL },
		{ "{\"name\":\"x\"}", EINVAL },
		{ "{\"cmd\":\"nope\"}", EOPNOTSUPP },
		{ "{\"cmd\":\"ping\",\"x\":1}", EINVAL },
		{ "{\"cmd\":\"ping\",\"cmd\":\"ping\"}", EINVAL },
		{ "{\"cmd\":\"job_show\"}", EINVAL },
		{ "{\"cmd\":\"job_create\",\"name\":\"a\",\"world\":2,"
		  "\"dataplanes\":[]}", EINVAL },
		{ "{\"cmd\":\"job_create\",\"name\":\"a\",\"world\":2,"
		  "\"dataplanes\":\"b\"}", EINVAL },
		{ "{\"cmd\":\"job_create\",\"name\":\"a\",\"world\":2,"
		  "\"dataplanes\":[\"b\",\"b\"]}", EINVAL },
		{ "{\"cmd\":\"job_create\",\"name\":\"a\",\"world\":2,"
		  "\"dataplanes\":[\"b c\"]}", EINVAL },
		{ "{\"cmd\":\"job_create\",\"name\":\"a\",\"world\":2,"
		  "\"dataplanes\":[\"a\",\"b\",\"c\",\"d\",\"e\",\"f\","
		  "\"g\",\"h\",\"i\"]}", EINVAL },
		{ "{\"cmd\":\"job_create\",\"name\":\"a\",\"world\":2,"
		  "\"transport\":\"rdma\",\"dataplanes\":[\"b\",\"c\"]}",
		  EINVAL },
		{ "{\"cmd\":\"job_list\",\"after\":-1}", EINVAL },
		{ "{\"cmd\":\"job_list\",\"after\":65536}", EINVAL },
		{ "{\"cmd\":\"job_list\",\"limit\":0}", EINVAL },
		{ "{\"cmd\":\"job_list\",\"limit\":\"5\"}", EINVAL },
		{ "{\"cmd\":\"job_list\",\"name\":\"x\"}", EINVAL },
		{ "{\"cmd\":\"job_show\",\"name\":\"\"}", EINVAL },
		{ "{\"cmd\":\"job_show\",\"name\":\"a b\"}", EINVAL },
		{ "{\"cmd\":\"job_show\",\"name\":7}", EINVAL },
		{ "{\"cmd\":\"job_delete\",\"name\":\"../etc\"}", EINVAL },
		{ "{\"cmd\":\"job_create\",\"name\":\"x\"}", EINVAL },
		{ "{\"cmd\":\"job_create\",\"name\":\"x\",\"world\":0}",
			EINVAL },
		{ "{\"cmd\":\"job_create\",\"name\":\"x\",\"world\":65}",
			EINVAL },
		{ "{\"cmd\":\"job_create\",\"name\":\"x\",\"world\":4097,"
			"\"leaves\":[\"a\"],\"spine\":\"s\"}", EINVAL },
		{ "{\"cmd\":\"job_create\",\"name\":\"x\",\"world\":4,"
			"\"leaves\":[\"a\"]}", EINVAL },
		{ "{\"cmd\":\"job_create\",\"name\":\"x\",\"world\":4,"
			"\"spine\":\"s\"}", EINVAL },
		{ "{\"cmd\":\"job_create\",\"name\":\"x\",\"world\":4,"
			"\"leaves\":[],\"spine\":\"s\"}", EINVAL },
		{ "{\"cmd\":\"job_create\",\"name\":\"x\",\"world\":4,"
			"\"leaves\":[\"a\",\"a\"],\"spine\":\"s\"}", EINVAL },
		{ "{\"cmd\":\"job_create\",\"name\":\"x\",\"world\":4,"
			"\"leaves\":[\"a\",\"s\"],\"spine\":\"s\"}", EINVAL },
		{ "{\"cmd\":\"job_create\",\"name\":\"x\",\"world\":4,"
			"\"leaves\":[\"a b\"],\"spine\":\"s\"}", EINVAL },
		{ "{\"cmd\":\"job_create\",\"name\":\"x\",\"world\":4,"
			"\"leaves\":[\"a\"],\"spine\":7}", EINVAL },
		{ "{\"cmd\":\"job_create\",\"name\":\"x\",\"world\":4,"
			"\"leaves\":[\"a\"],\"spine\":\"s\","
			"\"dataplanes\":[\"b\"]}", EINVAL },
		{ "{\"cmd\":\"job_create\",\"name\":\"x\",\"world\":\"4\"}",
			EINVAL },
		{ "{\"cmd\":\"job_create\",\"name\":\"x\",\"world\":4,"
			"\"window\":0}", EINVAL },
		{ "{\"cmd\":\"job_create\",\"name\":\"x\",\"world\":4,"
			"\"max_elems\":8193}", EINVAL },
		{ "{\"cmd\":\"job_create\",\"name\":\"x\",\"world\":4,"
			"\"narrow\":1}", EINVAL },
		{ "{\"cmd\":\"job_create\",\"name\":\"x\",\"world\":4,"
			"\"transport\":\"ib\"}", EINVAL },
		{ "{\"cmd\":\"job_create\",\"name\":\"x\",\"world\":4,"
			"\"transport\":\"rdma\",\"group\":\"239.0.0.1:5\"}",
			EINVAL },
		{ "{\"cmd\":\"job_create\",\"name\":\"x\",\"world\":2,"
			"\"auth\":1}", EINVAL },
		{ "{\"cmd\":\"job_create\",\"name\":\"x\",\"world\":4,"
			"\"group\":\"10.0.0.1:5\"}", EINVAL },
		{ "{\"cmd\":\"job_create\",\"name\":\"x\",\"world\":4,"
			"\"group\":\"239.0.0.1\"}", EINVAL },
		{ "{\"cmd\":\"job_create\",\"name\":\"x\",\"world\":4,"
			"\"group\":\"239.0.0.1:0\"}", EINVAL },
		{ "{\"cmd\":\"job_create\",\"name\":\"x\",\"world\":4,"
			"\"idle_timeout_s\":-1}", EINVAL },
		{ "{\"cmd\":\"job_create\",\"name\":\"x\",\"world\":4,"
			"\"token\":\"00\"}", EINVAL },
		{ "{\"cmd\":\"job_create\",\"name\":\"x\",\"world\":4,"
			"\"codec\":\"q9\"}", EINVAL },
		{ "{\"cmd\":\"job_create\",\"name\":\"x\",\"world\":4,"
			"\"codec\":1}", EINVAL },
	};
	struct tallyd_ctl_req r;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int rc = parse(bad[i].req, &r);

		if (rc != -bad[i].err)
			fail_msg("%s: got %d, want %d", bad[i].req, rc,
				-bad[i].err);
	}
	/* Embedded NUL and non-UTF-8 bytes. */
	assert_int_equal(tallyd_ctl_parse("{\"cmd\":\"pi\0ng\"}", 16, &r,
		NULL, 0), -EINVAL);
	assert_int_equal(tallyd_ctl_parse("{\"cmd\":\"\xff\"}", 11, &r, NULL,
		0), -EINVAL);
}

static void
every_command_has_a_name_and_usage(void **state)
{
	(void)state;
	for (int c = 0; c < TALLYD_CTL_MAX_; c++) {
		assert_non_null(tallyd_ctl_cmd_name(c));
		assert_non_null(tallyd_ctl_cmd_usage(c));
	}
	assert_string_equal(tallyd_ctl_cmd_name(TALLYD_CTL_MAX_), "?");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(good_requests),
		cmocka_unit_test(bad_requests),
		cmocka_unit_test(every_command_has_a_name_and_usage),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

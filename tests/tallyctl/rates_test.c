/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * top's rates from two samples (exact, with a given interval), where a
 * rate cannot be known (null), and the frame's shape; tallyctl's strict
 * numbers; and the table's alignment without trailing spaces.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "num.h"
#include "rates.h"
#include "table.h"

static json_t *
load(const char *text)
{
	json_error_t err;
	json_t *j = json_loads(text, 0, &err);

	if (j == NULL)
		fail_msg("bad test JSON: %s (line %d)", err.text, err.line);
	return j;
}

/* A job_list reply with one job of these counters. */
static json_t *
list1(const char *name, int id, long long rounds, long long in,
	long long out, long long drops)
{
	return json_pack("{s:i, s:[{s:s, s:i, s:i, s:i, s:s, s:{s:I, s:I, "
		"s:I, s:I}}]}", "errno", 0, "jobs", "name", name, "id", id,
		"world", 4, "joined", 4, "state", "ready", "counters",
		"rounds", (json_int_t)rounds, "bytes_in", (json_int_t)in,
		"bytes_out", (json_int_t)out, "drops", (json_int_t)drops);
}

/* A stats reply with tally-dp's totals. */
static json_t *
stats1(long long rx, long long tx, long long completed, long long bad_token,
	long long not_ours)
{
	return json_pack("{s:i, s:{s:i, s:b}, s:{s:{s:I, s:I, s:I, s:I, s:I},"
		" s:[]}}", "errno", 0, "tallyd", "uptime_s", 60, "dp_up", 1,
		"dp", "total", "rx", (json_int_t)rx, "tx", (json_int_t)tx,
		"completed", (json_int_t)completed, "drop_bad_token",
		(json_int_t)bad_token, "drop_net_not_ours",
		(json_int_t)not_ours, "lcores");
}

static double
num(const json_t *o, const char *k)
{
	const json_t *v = json_object_get(o, k);

	if (!json_is_number(v))
		fail_msg("'%s' is not a number", k);
	return json_number_value(v);
}

static void
two_samples(void **state)
{
	json_t *pl = list1("resnet", 1, 1000, 4000000, 8000000, 2);
	json_t *ps = stats1(100, 90, 1000, 1, 0);
	json_t *l = list1("resnet", 1, 5000, 24000000, 28000000, 6);
	json_t *s = stats1(20100, 18090, 5000, 5, 2);
	json_t *f = tallyctl_top_frame(pl, ps, l, s, 2.0, 1795000200);
	const json_t *j, *dp;

	(void)state;
	assert_non_null(f);
	assert_int_equal(json_integer_value(json_object_get(f, "time")),
		1795000200);
	assert_true(num(f, "interval_s") == 2.0);
	assert_int_equal(json_integer_value(json_object_get(f, "uptime_s")),
		60);
	assert_true(json_is_true(json_object_get(f, "dp_up")));
	assert_int_equal(json_array_size(json_object_get(f, "jobs")), 1);
	j = json_array_get(json_object_get(f, "jobs"), 0);
	assert_string_equal(json_string_value(json_object_get(j, "name")),
		"resnet");
	assert_int_equal(json_integer_value(json_object_get(j, "rounds")),
		5000);
	assert_true(num(j, "rounds_per_s") == 2000.0);
	assert_true(num(j, "mb_in_per_s") == 10.0);
	assert_true(num(j, "mb_out_per_s") == 10.0);
	assert_true(num(j, "drops_per_s") == 2.0);
	dp = json_object_get(f, "dp");
	assert_true(num(dp, "rx_per_s") == 10000.0);
	assert_true(num(dp, "tx_per_s") == 9000.0);
	assert_true(num(dp, "rounds_per_s") == 2000.0);
	/* drop_bad_token 1 -> 5 and drop_net_not_ours 0 -> 2: 6 in 2 s. */
	assert_true(num(dp, "drops_per_s") == 3.0);
	json_decref(f);
	json_decref(pl);
	json_decref(ps);
	json_decref(l);
	json_decref(s);
}

/* Every rate of the frame's first job and of its dp is null. */
static void
assert_all_null(const json_t *f)
{
	const json_t *j = json_array_get(json_object_get(f, "jobs"), 0);
	static const char *const jk[] = {
		"rounds_per_s", "mb_in_per_s", "mb_out_per_s", "drops_per_s",
	};
	static const char *const dk[] = {
		"rx_per_s", "tx_per_s", "rounds_per_s", "drops_per_s",
	};

	for (size_t i = 0; i < 4; i++) {
		assert_true(json_is_null(json_object_get(j, jk[i])));
		assert_true(json_is_null(json_object_get(
			json_object_get(f, "dp"), dk[i])));
	}
}

static void
unknown_rates(void **state)
{
	json_t *l = list1("resnet", 1, 5000, 24000000, 28000000, 6);
	json_t *s = stats1(20100, 18090, 5000, 5, 2);
	json_t *other = list1("other", 1, 0, 0, 0, 0);
	json_t *renum = list1("resnet", 7, 0, 0, 0, 0);
	json_t *later = list1("resnet", 1, 9000, 30000000, 30000000, 9);
	json_t *later_s = stats1(30000, 30000, 9000, 9, 9);
	json_t *f;

	(void)state;
	/* No earlier sample. */
	f = tallyctl_top_frame(NULL, NULL, l, s, 1.0, 0);
	assert_non_null(f);
	assert_all_null(f);
	json_decref(f);
	/* The job was not there (another name; same name, another id). */
	f = tallyctl_top_frame(other, s, l, s, 1.0, 0);
	assert_true(json_is_null(json_object_get(json_array_get(
		json_object_get(f, "jobs"), 0), "rounds_per_s")));
	json_decref(f);
	f = tallyctl_top_frame(renum, s, l, s, 1.0, 0);
	assert_true(json_is_null(json_object_get(json_array_get(
		json_object_get(f, "jobs"), 0), "rounds_per_s")));
	json_decref(f);
	/* Counters that went down (tally-dp restarted), or no time. */
	f = tallyctl_top_frame(later, later_s, l, s, 1.0, 0);
	assert_all_null(f);
	json_decref(f);
	f = tallyctl_top_frame(l, s, later, later_s, 0, 0);
	assert_all_null(f);
	json_decref(f);
	json_decref(l);
	json_decref(s);
	json_decref(other);
	json_decref(renum);
	json_decref(later);
	json_decref(later_s);
}

static void
frame_shape(void **state)
{
	json_t *l = load("{\"errno\": 0, \"jobs\": ["
		"{\"name\": \"b\", \"id\": 9, \"world\": 2, \"joined\": 1,"
		" \"state\": \"forming\", \"counters\": {}},"
		"{\"name\": \"a\", \"id\": 3, \"world\": 1, \"joined\": 0,"
		" \"state\": \"waiting\"}]}");
	json_t *s = load("{\"errno\": 0, \"tallyd\": {\"uptime_s\": 4,"
		" \"dp_up\": false}, \"dp\": null}");
	json_t *f = tallyctl_top_frame(l, s, l, s, 1.0, 0);
	json_t *want = load("{\"time\": 0, \"interval_s\": 1.0,"
		" \"uptime_s\": 4, \"dp_up\": false, \"jobs\": ["
		"{\"name\": \"a\", \"id\": 3, \"state\": \"waiting\","
		" \"world\": 1, \"joined\": 0, \"rounds\": null,"
		" \"bytes_in\": null, \"bytes_out\": null, \"drops\": null,"
		" \"rounds_per_s\": null, \"mb_in_per_s\": null,"
		" \"mb_out_per_s\": null, \"drops_per_s\": null},"
		"{\"name\": \"b\", \"id\": 9, \"state\": \"forming\","
		" \"world\": 2, \"joined\": 1, \"rounds\": null,"
		" \"bytes_in\": null, \"bytes_out\": null, \"drops\": null,"
		" \"rounds_per_s\": null, \"mb_in_per_s\": null,"
		" \"mb_out_per_s\": null, \"drops_per_s\": null}],"
		" \"dp\": null}");
	json_t *bad = load("{\"errno\": 0}");

	(void)state;
	assert_non_null(f);
	if (!json_equal(f, want)) {
		char *got = json_dumps(f, 0);

		fail_msg("frame: %s", got);
	}
	errno = 0;
	assert_null(tallyctl_top_frame(NULL, NULL, bad, s, 1.0, 0));
	assert_int_equal(errno, EPROTO);
	json_decref(f);
	json_decref(want);
	json_decref(bad);
	json_decref(l);
	json_decref(s);
}

static void
strict_uints(void **state)
{
	static const char *const bad[] = {
		"", " 1", "1 ", "+1", "-1", "1x", "0x10", "1e3", "4.0",
		"\xd9\xa3",
	};
	unsigned long v = 99;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(tallyctl_parse_uint(bad[i], 0, ULONG_MAX, &v),
			-EINVAL);
	assert_int_equal(tallyctl_parse_uint(NULL, 0, 1, &v), -EINVAL);
	assert_int_equal(v, 99);
	assert_int_equal(tallyctl_parse_uint("0", 1, 64, &v), -ERANGE);
	assert_int_equal(tallyctl_parse_uint("65", 1, 64, &v), -ERANGE);
	assert_int_equal(tallyctl_parse_uint("99999999999999999999999", 0,
		ULONG_MAX, &v), -ERANGE);
	assert_int_equal(v, 99);
	assert_int_equal(tallyctl_parse_uint("64", 1, 64, &v), 0);
	assert_int_equal(v, 64);
	assert_int_equal(tallyctl_parse_uint("007", 1, 64, &v), 0);
	assert_int_equal(v, 7);
}

static void
strict_seconds(void **state)
{
	static const char *const bad[] = {
		"", ".5", "5.", "-1", "+1", "1e3", "inf", "nan", "0x1", "1.5s",
		" 1", "1..2",
	};
	double v = 99;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(tallyctl_parse_seconds(bad[i], 0, 1e9, &v),
			-EINVAL);
	assert_int_equal(tallyctl_parse_seconds("0.05", 0.1, 3600, &v),
		-ERANGE);
	assert_int_equal(tallyctl_parse_seconds("3600.5", 0.1, 3600, &v),
		-ERANGE);
	assert_true(v == 99);
	assert_int_equal(tallyctl_parse_seconds("0.25", 0.1, 3600, &v), 0);
	assert_true(v == 0.25);
	assert_int_equal(tallyctl_parse_seconds("2", 0.1, 3600, &v), 0);
	assert_true(v == 2);
}

static void
table(void **state)
{
	struct tallyctl_table *t = tallyctl_table_new(4, "lrl");
	char *out;
	size_t len;
	FILE *f;

	(void)state;
	assert_non_null(t);
	assert_int_equal(tallyctl_table_cells(t, "A", "NUM", "TEXT", "MORE",
		NULL), 0);
	assert_int_equal(tallyctl_table_cells(t, "long name", "1", "", "",
		NULL), 0);
	assert_int_equal(tallyctl_table_cells(t, "b", "12345", "x", "", NULL),
		0);
	assert_int_equal(tallyctl_table_cell(t, "%d", 42), 0);
	assert_int_equal(tallyctl_table_rows(t), 4);
	f = open_memstream(&out, &len);
	assert_non_null(f);
	assert_int_equal(tallyctl_table_print(t, f, "> "), 0);
	fclose(f);
	/* Left columns pad only before another cell: no trailing space. */
	assert_string_equal(out,
		"> A            NUM  TEXT  MORE\n"
		"> long name      1\n"
		"> b          12345  x\n"
		"> 42\n");
	free(out);
	tallyctl_table_destroy(t);
	tallyctl_table_destroy(NULL);
	assert_null(tallyctl_table_new(0, "l"));
	assert_int_equal(errno, EINVAL);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(two_samples),
		cmocka_unit_test(unknown_rates),
		cmocka_unit_test(frame_shape),
		cmocka_unit_test(strict_uints),
		cmocka_unit_test(strict_seconds),
		cmocka_unit_test(table),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

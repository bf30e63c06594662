/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tallyctl's text: replies shaped as docs/control.md shows them, printed
 * by format.h's functions and compared whole; units at their edges; an
 * empty list; replies missing what the contract promises.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"

/* 2026-11-18 11:06:40 UTC, the example job's "created". */
#define CREATED	1795000000
#define NOW	(CREATED + 200)

/* Loads a test's JSON, failing the test if it is not JSON. */
static json_t *
load(const char *text)
{
	json_error_t err;
	json_t *j = json_loads(text, 0, &err);

	if (j == NULL)
		fail_msg("bad test JSON: %s (line %d)", err.text, err.line);
	return j;
}

/*
 * Runs a print function into memory; *out is what it printed (the caller
 * frees it), the return value its result.
 */
#define CAPTURE(out, ret, call) do {					\
	size_t len_;							\
	FILE *f = open_memstream(&(out), &len_);			\
									\
	assert_non_null(f);						\
	(ret) = (call);							\
	fclose(f);							\
} while (0)

static const char job_json[] =
	"{\"name\": \"resnet\", \"id\": 1, \"world\": 4, \"window\": 64,"
	" \"max_elems\": 256, \"narrow\": false, \"codec\": \"q8,seed=7\","
	" \"group\": \"239.1.2.3:40001\", \"idle_timeout_s\": 0,"
	" \"state\": \"ready\", \"joined\": 4, \"epoch\": 2,"
	" \"created\": 1795000000, \"last_active\": 1795000123,"
	" \"members\": [{\"rank\": 0, \"ip\": \"10.77.0.12\", \"port\": 40001},"
	"  {\"rank\": 1, \"ip\": \"10.77.0.13\", \"port\": 40001},"
	"  {\"rank\": 2, \"ip\": \"10.77.0.14\", \"port\": 40001},"
	"  {\"rank\": 3, \"ip\": \"10.77.0.15\", \"port\": 40001}],"
	" \"counters\": {\"contributions\": 98310, \"elements\": 25165830,"
	"  \"bytes_in\": 103809240, \"rounds\": 49155, \"results\": 101516,"
	"  \"bytes_out\": 107193756, \"resent\": 3206, \"nacks\": 0,"
	"  \"drops\": 0}}";

static void
bytes_units(void **state)
{
	static const struct {
		uint64_t v;
		const char *want;
	} cases[] = {
		{ 0, "0 B" },
		{ 1023, "1023 B" },
		{ 1024, "1.0 KiB" },
		{ 1536, "1.5 KiB" },
		{ 1048524, "1023.9 KiB" },	/* 1023.949 KiB */
		{ 1048525, "1.0 MiB" },		/* would be "1024.0 KiB" */
		{ 64ull << 20, "64.0 MiB" },
		{ 103809240, "99.0 MiB" },
		{ 107193756, "102.2 MiB" },
		{ 3ull << 30, "3.0 GiB" },
		{ 5ull << 40, "5.0 TiB" },
		{ 7ull << 50, "7.0 PiB" },
		{ UINT64_MAX, "16.0 EiB" },
	};
	char b[32];

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		tallyctl_fmt_bytes(b, sizeof(b), cases[i].v);
		assert_string_equal(b, cases[i].want);
	}
}

static void
durations(void **state)
{
	static const struct {
		uint64_t s;
		const char *want;
	} cases[] = {
		{ 0, "0s" }, { 59, "59s" }, { 60, "1m 00s" },
		{ 3599, "59m 59s" }, { 3600, "1h 00m" }, { 3723, "1h 02m" },
		{ 86399, "23h 59m" }, { 86400, "1d 00h" },
		{ 90061, "1d 01h" }, { 400 * 86400ull, "400d 00h" },
	};
	char b[32];

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		tallyctl_fmt_duration(b, sizeof(b), cases[i].s);
		assert_string_equal(b, cases[i].want);
	}
}

static void
times_and_values(void **state)
{
	char b[64];
	json_t *v;

	(void)state;
	tallyctl_fmt_time(b, sizeof(b), CREATED, NOW);
	assert_string_equal(b, "2026-11-18 11:06:40 UTC (3m 20s ago)");
	tallyctl_fmt_time(b, sizeof(b), CREATED, CREATED);
	assert_string_equal(b, "2026-11-18 11:06:40 UTC (0s ago)");
	/* A clock behind the daemon's: no "ago". */
	tallyctl_fmt_time(b, sizeof(b), CREATED, CREATED - 5);
	assert_string_equal(b, "2026-11-18 11:06:40 UTC");
	tallyctl_fmt_time(b, sizeof(b), 0, NOW);
	assert_string_equal(b, "-");

	tallyctl_fmt_value(b, sizeof(b), NULL);
	assert_string_equal(b, "-");
	v = json_integer(-3);
	tallyctl_fmt_value(b, sizeof(b), v);
	assert_string_equal(b, "-3");
	json_decref(v);
	v = json_real(2.25);
	tallyctl_fmt_value(b, sizeof(b), v);
	assert_string_equal(b, "2.2");
	json_decref(v);
	tallyctl_fmt_value(b, sizeof(b), json_true());
	assert_string_equal(b, "true");
	tallyctl_fmt_value(b, sizeof(b), json_false());
	assert_string_equal(b, "false");
	tallyctl_fmt_value(b, sizeof(b), json_null());
	assert_string_equal(b, "-");
}

static void
job_list(void **state)
{
	/* Out of id order, as tallyd's list may be; one without counters. */
	json_t *r = load("{\"errno\": 0, \"jobs\": ["
		"{\"name\": \"bert-large\", \"id\": 12, \"world\": 16,"
		" \"joined\": 3, \"state\": \"forming\", \"counters\":"
		" {\"rounds\": 0, \"bytes_in\": 0}},"
		"{\"name\": \"resnet\", \"id\": 1, \"world\": 4, \"joined\": 4,"
		" \"state\": \"ready\", \"counters\": {\"rounds\": 49155,"
		" \"bytes_in\": 103809240}},"
		"{\"name\": \"tiny\", \"id\": 2, \"world\": 1, \"joined\": 0,"
		" \"state\": \"waiting\"}]}");
	char *out;
	int ret;

	(void)state;
	CAPTURE(out, ret, tallyctl_print_job_list(f, r));
	assert_int_equal(ret, 0);
	assert_string_equal(out,
		"NAME        ID  WORLD  JOINED  STATE    ROUNDS  BYTES_IN\n"
		"resnet       1      4       4  ready     49155  99.0 MiB\n"
		"tiny         2      1       0  waiting       -         -\n"
		"bert-large  12     16       3  forming       0       0 B\n");
	free(out);
	json_decref(r);
}

static void
job_list_empty(void **state)
{
	json_t *r = load("{\"errno\": 0, \"jobs\": []}");
	char *out;
	int ret;

	(void)state;
	CAPTURE(out, ret, tallyctl_print_job_list(f, r));
	assert_int_equal(ret, 0);
	assert_string_equal(out, "no jobs\n");
	free(out);
	json_decref(r);

	r = load("{\"errno\": 0, \"jobs\": {}}");
	CAPTURE(out, ret, tallyctl_print_job_list(f, r));
	assert_int_equal(ret, -EPROTO);
	assert_string_equal(out, "");
	free(out);
	json_decref(r);
}

static void
job_show(void **state)
{
	json_t *j = load(job_json);
	char *out;
	int ret;

	(void)state;
	CAPTURE(out, ret, tallyctl_print_job(f, j, NOW));
	assert_int_equal(ret, 0);
	assert_string_equal(out,
		"name:          resnet\n"
		"id:            1\n"
		"state:         ready\n"
		"world:         4\n"
		"joined:        4\n"
		"epoch:         2\n"
		"window:        64\n"
		"max_elems:     256\n"
		"narrow:        false\n"
		"codec:         q8,seed=7\n"
		"group:         239.1.2.3:40001\n"
		"idle_timeout:  never\n"
		"created:       2026-11-18 11:06:40 UTC (3m 20s ago)\n"
		"last_active:   2026-11-18 11:08:43 UTC (1m 17s ago)\n"
		"members:\n"
		"  RANK  IP           PORT\n"
		"     0  10.77.0.12  40001\n"
		"     1  10.77.0.13  40001\n"
		"     2  10.77.0.14  40001\n"
		"     3  10.77.0.15  40001\n"
		"counters:\n"
		"  contributions      98310\n"
		"  elements        25165830\n"
		"  bytes_in       103809240  99.0 MiB\n"
		"  rounds             49155\n"
		"  results           101516\n"
		"  bytes_out      107193756  102.2 MiB\n"
		"  resent              3206\n"
		"  nacks                  0\n"
		"  drops                  0\n");
	free(out);
	json_decref(j);
}

/*
 * A two-tier tree's "tree" (docs/scale-out.md, "Two tiers") after the
 * spine's settings: the total, the spine, a row per leaf with its
 * dataplane's two-tier counters ("-" where the dataplane is unknown).
 */
static void
tree_show(void **state)
{
	json_t *j = load("{\"name\": \"t\", \"tier\": \"spine\", \"tree\": "
		"{\"world\": 6, \"leaf_world\": 3, \"spine\": \"dp0\", "
		"\"spine_dp_tier\": null, \"leaves\": ["
		"{\"name\": \"t/0\", \"dataplane\": \"dpb\", \"state\": "
		"\"ready\", \"joined\": 3, \"epoch\": 4, \"counters\": "
		"{\"rounds\": 70}, \"dp_tier\": {\"tier_forwarded\": 70, "
		"\"tier_reforwarded\": 2, \"tier_results\": 70}},"
		"{\"name\": \"t/1\", \"dataplane\": \"dpc\", \"state\": "
		"\"forming\", \"joined\": 1, \"epoch\": 0, \"counters\": "
		"{\"rounds\": 0}, \"dp_tier\": null}]}}");
	char *out;
	int ret;

	(void)state;
	CAPTURE(out, ret, tallyctl_print_job(f, j, NOW));
	assert_int_equal(ret, 0);
	assert_non_null(strstr(out,
		"tree: 6 ranks, 2 leaves of 3, spine at dp0\n"
		"  LEAF  DATAPLANE  STATE    JOINED  EPOCH  ROUNDS  "
		"DP_FORWARDED  DP_REFORWARDED  DP_RESULTS\n"));
	assert_non_null(strstr(out, "  t/0   dpb        ready"));
	assert_non_null(strstr(out, "  t/1   dpc        forming"));
	free(out);
	json_decref(j);
}

/*
 * A sharded job's "shards" (docs/scale-out.md) under its counters, and
 * the "dataplanes" of stats when tallyd drives more than one.
 */
static void
shards_and_dataplanes(void **state)
{
	json_t *j = load("{\"name\": \"s\", \"shards\": ["
		"{\"dataplane\": \"dp0\", \"up\": true, \"in_dp\": true,"
		" \"counters\": {\"rounds\": 12, \"contributions\": 48,"
		" \"bytes_in\": 4096, \"results\": 48, \"drops\": 0}},"
		"{\"dataplane\": \"rack2\", \"up\": false, \"in_dp\": false,"
		" \"counters\": {\"rounds\": 11, \"contributions\": 44,"
		" \"bytes_in\": 3900, \"results\": 44, \"drops\": 1}}]}");
	char *out;
	int ret;

	(void)state;
	CAPTURE(out, ret, tallyctl_print_job(f, j, NOW));
	assert_int_equal(ret, 0);
	assert_non_null(strstr(out,
		"shards:\n"
		"  DATAPLANE  UP   HOLDS  ROUNDS  CONTRIBUTIONS  BYTES_IN  "
		"RESULTS  DROPS\n"
		"  dp0        yes  yes        12             48      4096  "
		"     48      0\n"
		"  rack2      no   no         11             44      3900  "
		"     44      1\n"));
	free(out);
	json_decref(j);

	j = load("{\"errno\": 0, \"tallyd\": {\"dp_up\": false}, \"dp\": null,"
		" \"dataplanes\": [{\"name\": \"dp0\", \"up\": true, \"endpoint\":"
		" \"10.77.0.1:47474+1\"}, {\"name\": \"rack2\", \"up\": false,"
		" \"endpoint\": null}]}");
	CAPTURE(out, ret, tallyctl_print_stats(f, j, false));
	assert_int_equal(ret, 0);
	assert_non_null(strstr(out,
		"dataplanes:\n"
		"  DATAPLANE  UP   ENDPOINT\n"
		"  dp0        yes  10.77.0.1:47474+1\n"
		"  rack2      no   unknown\n"
		"tally-dp: down\n"));
	free(out);
	json_decref(j);
}

/*
 * Why the epoch changed (docs/scale-out.md, "Epochs"): a dead dataplane
 * gets a line; a membership's forming (the usual) does not.
 */
static void
epoch_reason(void **state)
{
	json_t *j = load("{\"name\": \"e\", \"epoch\": 2, \"epoch_reason\":"
		" {\"cause\": \"dataplane\", \"dataplane\": \"dpc\", \"missed\":"
		" \"3 admin polls in a row (every 200 ms)\", \"at\": 0, \"from\": 1}}");
	char *out;
	int ret;

	(void)state;
	CAPTURE(out, ret, tallyctl_print_job(f, j, NOW));
	assert_int_equal(ret, 0);
	assert_non_null(strstr(out, "epoch:         2\n"));
	assert_non_null(strstr(out, "epoch_reason:  dataplane: tally-dp dpc "
		"missed 3 admin polls in a row (every 200 ms), "));
	assert_non_null(strstr(out, " (epoch 1 ended)\n"));
	free(out);
	json_decref(j);
	j = load("{\"name\": \"e\", \"epoch\": 1, \"epoch_reason\":"
		" {\"cause\": \"membership\", \"at\": 0, \"from\": 0}}");
	CAPTURE(out, ret, tallyctl_print_job(f, j, NOW));
	assert_int_equal(ret, 0);
	assert_null(strstr(out, "epoch_reason"));
	free(out);
	json_decref(j);
}

/* A unicast job forming, narrow, with an idle timeout, no members yet. */
static void
job_show_forming(void **state)
{
	json_t *j = load("{\"name\": \"gpt\", \"id\": 3, \"world\": 8,"
		" \"window\": 128, \"max_elems\": 1024, \"narrow\": true,"
		" \"idle_timeout_s\": 3600, \"state\": \"forming\","
		" \"joined\": 5, \"epoch\": 0, \"created\": 1795000000,"
		" \"last_active\": 1795000190, \"members\": [],"
		" \"counters\": {\"contributions\": 0, \"bytes_in\": 0}}");
	char *out;
	int ret;

	(void)state;
	CAPTURE(out, ret, tallyctl_print_job(f, j, NOW));
	assert_int_equal(ret, 0);
	assert_string_equal(out,
		"name:          gpt\n"
		"id:            3\n"
		"state:         forming\n"
		"world:         8\n"
		"joined:        5\n"
		"epoch:         0\n"
		"window:        128\n"
		"max_elems:     1024\n"
		"narrow:        true\n"
		"group:         none (unicast)\n"
		"idle_timeout:  1h 00m\n"
		"created:       2026-11-18 11:06:40 UTC (3m 20s ago)\n"
		"last_active:   2026-11-18 11:09:50 UTC (10s ago)\n"
		"members:       none\n"
		"counters:\n"
		"  contributions  0\n"
		"  bytes_in       0  0 B\n");
	free(out);
	json_decref(j);

	CAPTURE(out, ret, tallyctl_print_job(f, NULL, NOW));
	assert_int_equal(ret, -EPROTO);
	free(out);
}

static void
job_created(void **state)
{
	json_t *r = json_pack("{s:i, s:o, s:s}", "errno", 0, "job",
		load(job_json), "token",
		"9f86d081884c7d659a2feaa0c55ad015"
		"a3bf4f1b2b0b822cd15d6c15b0f00a08");
	char *out;
	int ret;

	(void)state;
	CAPTURE(out, ret, tallyctl_print_created(f, r, NOW));
	assert_int_equal(ret, 0);
	assert_string_equal(out,
		"name:          resnet\n"
		"id:            1\n"
		"state:         ready\n"
		"world:         4\n"
		"joined:        4\n"
		"epoch:         2\n"
		"window:        64\n"
		"max_elems:     256\n"
		"narrow:        false\n"
		"codec:         q8,seed=7\n"
		"group:         239.1.2.3:40001\n"
		"idle_timeout:  never\n"
		"created:       2026-11-18 11:06:40 UTC (3m 20s ago)\n"
		"\n"
		"token: 9f86d081884c7d659a2feaa0c55ad015"
		"a3bf4f1b2b0b822cd15d6c15b0f00a08\n"
		"warning: the token is not shown again; keep it: workers "
		"present it to join job 'resnet'\n");
	free(out);
	json_object_del(r, "token");
	CAPTURE(out, ret, tallyctl_print_created(f, r, NOW));
	assert_int_equal(ret, -EPROTO);
	free(out);
	json_decref(r);
}

static const char stats_json[] =
	"{\"errno\": 0,"
	" \"tallyd\": {\"uptime_s\": 3723, \"jobs\": 2, \"joins\": 8,"
	"  \"memberships\": 2,"
	"  \"join_failures\": {\"bad_token\": 1, \"unknown_job\": 0,"
	"   \"duplicate_rank\": 0, \"world_mismatch\": 0, \"bad_rank\": 0,"
	"   \"timeout\": 0, \"malformed\": 0, \"draining\": 0},"
	"  \"ctl_requests\": 5, \"ctl_errors\": 1,"
	"  \"dp_up\": true, \"dp_reprograms\": 1, \"dp_errors\": 0},"
	" \"dp\": {\"total\": {\"rx\": 200000, \"tx\": 199000,"
	"   \"tx_dropped\": 0, \"contributions\": 196620,"
	"   \"completed\": 49155, \"drop_bad_token\": 12,"
	"   \"drop_net_not_ours\": 0},"
	"  \"lcores\": [{\"rx\": 120000, \"tx\": 119000, \"tx_dropped\": 0,"
	"   \"contributions\": 98310, \"completed\": 24578,"
	"   \"drop_bad_token\": 12, \"drop_net_not_ours\": 0, \"lcore\": 1},"
	"   {\"rx\": 80000, \"tx\": 80000, \"tx_dropped\": 0,"
	"   \"contributions\": 98310, \"completed\": 24577,"
	"   \"drop_bad_token\": 0, \"drop_net_not_ours\": 0, \"lcore\": 2}]}}";

static const char stats_tallyd_text[] =
	"tallyd:\n"
	"  uptime         1h 02m\n"
	"  jobs                2\n"
	"  joins               8\n"
	"  memberships         2\n"
	"  ctl_requests        5\n"
	"  ctl_errors          1\n"
	"  dp_up            true\n"
	"  dp_reprograms       1\n"
	"  dp_errors           0\n"
	"join failures:\n"
	"  bad_token       1\n"
	"  unknown_job     0\n"
	"  duplicate_rank  0\n"
	"  world_mismatch  0\n"
	"  bad_rank        0\n"
	"  timeout         0\n"
	"  malformed       0\n"
	"  draining        0\n";

static void
stats_nonzero(void **state)
{
	json_t *r = load(stats_json);
	char *out, *want;
	int ret;

	(void)state;
	CAPTURE(out, ret, tallyctl_print_stats(f, r, false));
	assert_int_equal(ret, 0);
	assert_true(asprintf(&want, "%s%s", stats_tallyd_text,
		"tally-dp: up\n"
		"  COUNTER          TOTAL  LCORE1  LCORE2\n"
		"  rx              200000  120000   80000\n"
		"  tx              199000  119000   80000\n"
		"  contributions   196620   98310   98310\n"
		"  completed        49155   24578   24577\n"
		"  drop_bad_token      12      12       0\n") > 0);
	assert_string_equal(out, want);
	free(want);
	free(out);
	json_decref(r);
}

static void
stats_all(void **state)
{
	json_t *r = load(stats_json);
	char *out, *want;
	int ret;

	(void)state;
	CAPTURE(out, ret, tallyctl_print_stats(f, r, true));
	assert_int_equal(ret, 0);
	assert_true(asprintf(&want, "%s%s", stats_tallyd_text,
		"tally-dp: up\n"
		"  COUNTER             TOTAL  LCORE1  LCORE2\n"
		"  rx                 200000  120000   80000\n"
		"  tx                 199000  119000   80000\n"
		"  tx_dropped              0       0       0\n"
		"  contributions      196620   98310   98310\n"
		"  completed           49155   24578   24577\n"
		"  drop_bad_token         12      12       0\n"
		"  drop_net_not_ours       0       0       0\n") > 0);
	assert_string_equal(out, want);
	free(want);
	free(out);
	json_decref(r);
}

/* tally-dp down: "dp" is null; and a tally-dp whose counters are all 0. */
static void
stats_dp_down(void **state)
{
	json_t *r = load("{\"errno\": 0, \"tallyd\": {\"uptime_s\": 12,"
		" \"jobs\": 0, \"join_failures\": {\"timeout\": 2},"
		" \"dp_up\": false}, \"dp\": null}");
	char *out;
	int ret;

	(void)state;
	CAPTURE(out, ret, tallyctl_print_stats(f, r, false));
	assert_int_equal(ret, 0);
	assert_string_equal(out,
		"tallyd:\n"
		"  uptime    12s\n"
		"  jobs        0\n"
		"  dp_up   false\n"
		"join failures:\n"
		"  timeout  2\n"
		"tally-dp: down\n"
		"  no counters\n");
	free(out);
	json_decref(r);

	r = load("{\"errno\": 0, \"tallyd\": {\"dp_up\": true},"
		" \"dp\": {\"total\": {\"rx\": 0}, \"lcores\": [{\"lcore\": 1,"
		" \"rx\": 0}]}}");
	CAPTURE(out, ret, tallyctl_print_stats(f, r, false));
	assert_int_equal(ret, 0);
	assert_string_equal(out,
		"tallyd:\n"
		"  dp_up  true\n"
		"tally-dp: up\n"
		"  every counter is 0 (--all shows them)\n");
	free(out);
	json_decref(r);

	r = load("{\"errno\": 0}");
	CAPTURE(out, ret, tallyctl_print_stats(f, r, false));
	assert_int_equal(ret, -EPROTO);
	free(out);
	json_decref(r);
}

static void
ping(void **state)
{
	json_t *r = load("{\"errno\": 0, \"version\": \"0.1.0\","
		" \"uptime_s\": 90061, \"dp_up\": true}");
	char *out;
	int ret;

	(void)state;
	CAPTURE(out, ret, tallyctl_print_ping(f, r));
	assert_int_equal(ret, 0);
	assert_string_equal(out,
		"version:  0.1.0\n"
		"uptime:   1d 01h\n"
		"dp_up:    true\n");
	free(out);
	json_decref(r);
}

static void
top_frame(void **state)
{
	json_t *fr = load("{\"time\": 1795000200, \"interval_s\": 1.0,"
		" \"uptime_s\": 3723, \"dp_up\": true, \"jobs\": ["
		"{\"name\": \"resnet\", \"id\": 1, \"state\": \"ready\","
		" \"world\": 4, \"joined\": 4, \"rounds_per_s\": 4915.5,"
		" \"mb_in_per_s\": 10.38, \"mb_out_per_s\": 10.72,"
		" \"drops_per_s\": 0.0},"
		"{\"name\": \"new\", \"id\": 2, \"state\": \"waiting\","
		" \"world\": 2, \"joined\": 0, \"rounds_per_s\": null,"
		" \"mb_in_per_s\": null, \"mb_out_per_s\": null,"
		" \"drops_per_s\": null}],"
		" \"dp\": {\"rx_per_s\": 20000.0, \"tx_per_s\": 19900.0,"
		" \"rounds_per_s\": 4915.5, \"drops_per_s\": 1.5}}");
	char *out;
	int ret;

	(void)state;
	CAPTURE(out, ret, tallyctl_print_top(f, fr));
	assert_int_equal(ret, 0);
	assert_string_equal(out,
		"tallyd up 1h 02m, 2 jobs, tally-dp up; rates over 1.0 s\n"
		"tally-dp: rx 20000.0/s  tx 19900.0/s  rounds 4915.5/s  "
		"drops 1.5/s\n"
		"\n"
		"NAME    ID  WORLD  JOINED  STATE    ROUNDS/S  IN_MB/S  "
		"OUT_MB/S  DROPS/S\n"
		"resnet   1      4       4  ready      4915.5     10.4      "
		"10.7      0.0\n"
		"new      2      2       0  waiting         -        -         "
		"-        -\n");
	free(out);
	json_decref(fr);

	fr = load("{\"interval_s\": 0.5, \"uptime_s\": 5, \"dp_up\": false,"
		" \"jobs\": [], \"dp\": null}");
	CAPTURE(out, ret, tallyctl_print_top(f, fr));
	assert_int_equal(ret, 0);
	assert_string_equal(out,
		"tallyd up 5s, 0 jobs, tally-dp down; rates over 0.5 s\n"
		"tally-dp: no counters\n"
		"\n"
		"no jobs\n");
	free(out);
	json_decref(fr);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(bytes_units),
		cmocka_unit_test(durations),
		cmocka_unit_test(times_and_values),
		cmocka_unit_test(job_list),
		cmocka_unit_test(job_list_empty),
		cmocka_unit_test(epoch_reason),
		cmocka_unit_test(job_show),
		cmocka_unit_test(shards_and_dataplanes),
		cmocka_unit_test(tree_show),
		cmocka_unit_test(job_show_forming),
		cmocka_unit_test(job_created),
		cmocka_unit_test(stats_nonzero),
		cmocka_unit_test(stats_all),
		cmocka_unit_test(stats_dp_down),
		cmocka_unit_test(ping),
		cmocka_unit_test(top_frame),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

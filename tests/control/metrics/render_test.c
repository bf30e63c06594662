/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tallyd_metrics_render(): values land in the right families with the
 * right labels, label values are escaped, odd and missing inputs neither
 * crash nor produce invalid text (every output goes through promcheck.py).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "metrics.h"

static const char tallyd_json[] =
	"{\"uptime_s\": 12, \"jobs\": 2, \"joins\": 8, \"memberships\": 2,"
	" \"join_failures\": {\"bad_token\": 1, \"unknown_job\": 0,"
	"  \"duplicate_rank\": 0, \"world_mismatch\": 0, \"bad_rank\": 0,"
	"  \"timeout\": 3, \"malformed\": 0, \"draining\": 0,"
	"  \"address_mismatch\": 2},"
	" \"ctl_requests\": 5, \"ctl_errors\": 1,"
	" \"dp_up\": true, \"dp_reprograms\": 1, \"dp_errors\": 0,"
	" \"dp_timeouts\": 4, \"dp_mismatches\": 2, \"dp_stale_removed\": 200,"
	" \"rdv_connections\": 17, \"rdv_max_connections\": 4096,"
	" \"rdv_refused\": 4, \"rdv_evicted_per_source\": 5,"
	" \"rdv_evicted_full\": 6, \"rdv_evicted_fds\": 7,"
	" \"rdv_fd_backoffs\": 8, \"rdv_handshake_timeouts\": 9,"
	" \"rdv_tls_failures\": 10,"
	" \"ctl_send_failures\": 2, \"ctl_fd_backoffs\": 5,"
	" \"state_saves\": 9,"
	" \"state_save_failures\": 4, \"state_unsaved\": true,"
	" \"state_last_error\": \"cannot save state file x: No space left\","
	" \"state_last_error_at\": 1795000000}";

static const char jobs_json[] =
	"[{\"name\": \"resnet\", \"id\": 1, \"world\": 4, \"window\": 64,"
	"  \"max_elems\": 256, \"narrow\": false,"
	"  \"group\": \"239.1.2.3:40001\","
	"  \"idle_timeout_s\": 0, \"state\": \"ready\", \"joined\": 4,"
	"  \"epoch\": 2, \"created\": 1795000000, \"last_active\": 1795000123,"
	"  \"counters\": {\"contributions\": 400, \"elements\": 102400,"
	"   \"bytes_in\": 4096, \"rounds\": 100, \"results\": 400,"
	"   \"bytes_out\": 8192, \"resent\": 3, \"nacks\": 1, \"drops\": 7,"
	"   \"duplicates\": 11}},"
	" {\"name\": \"bert.v2\", \"id\": 2, \"world\": 8, \"window\": 64,"
	"  \"max_elems\": 256, \"narrow\": true, \"idle_timeout_s\": 60,"
	"  \"state\": \"forming\", \"joined\": 3, \"epoch\": 0,"
	"  \"created\": 1795000000, \"last_active\": 1795000000,"
	"  \"counters\": {\"contributions\": 0, \"elements\": 0,"
	"   \"bytes_in\": 0, \"rounds\": 0, \"results\": 0, \"bytes_out\": 0,"
	"   \"resent\": 0, \"nacks\": 0, \"drops\": 0}}]";

static const char dp_json[] =
	"{\"total\": {\"rx\": 150, \"tx\": 90, \"drop_bad_token\": 2,"
	"  \"drop_net_ip_cksum\": 5},"
	" \"lcores\": ["
	"  {\"lcore\": 1, \"rx\": 100, \"tx\": 60, \"tx_dropped\": 0,"
	"   \"results\": 60, \"arp_replies\": 1, \"icmp_replies\": 0,"
	"   \"dispatched\": 0, \"ring_full\": 0, \"no_neigh\": 0,"
	"   \"no_mbuf\": 0, \"misrouted\": 0, \"idle_sleeps\": 9,"
	"   \"agg_rx\": 99, \"contributions\": 97, \"elements\": 24832,"
	"   \"completed\": 24, \"retransmissions_served\": 1,"
	"   \"duplicates\": 0, \"nacks\": 0, \"drop_truncated\": 0,"
	"   \"drop_bad_token\": 2, \"drop_early\": 0, \"drop_net_runt\": 0,"
	"   \"drop_net_ip_cksum\": 0},"
	"  {\"lcore\": 2, \"rx\": 50, \"tx\": 30, \"tx_dropped\": 0,"
	"   \"results\": 30, \"arp_replies\": 0, \"icmp_replies\": 0,"
	"   \"dispatched\": 4, \"ring_full\": 0, \"no_neigh\": 0,"
	"   \"no_mbuf\": 0, \"misrouted\": 0, \"idle_sleeps\": 3,"
	"   \"agg_rx\": 45, \"contributions\": 45, \"elements\": 11520,"
	"   \"completed\": 11, \"retransmissions_served\": 0,"
	"   \"duplicates\": 0, \"nacks\": 0, \"drop_truncated\": 0,"
	"   \"drop_bad_token\": 0, \"drop_early\": 0, \"drop_net_runt\": 0,"
	"   \"drop_net_ip_cksum\": 5}]}";

static json_t *
load(const char *text)
{
	json_error_t err;
	json_t *v = json_loads(text, 0, &err);

	if (v == NULL)
		fail_msg("fixture: %s (line %d)", err.text, err.line);
	return v;
}

/* Renders, checks the text with promcheck.py, and returns it (caller frees). */
static char *
render_checked(const json_t *t, const json_t *jobs, const json_t *dp)
{
	char *text = tallyd_metrics_render(t, jobs, dp);

	assert_non_null(text);
	if (promcheck_text(text) != 0) {
		fprintf(stderr, "%s", text);
		fail_msg("promcheck.py rejected the text above");
	}
	return text;
}

static void
has(const char *text, const char *line)
{
	if (count_of(text, line) != 1) {
		fprintf(stderr, "%s", text);
		fail_msg("expected once in the text above: %s", line);
	}
}

static void
full_stats(void **state)
{
	json_t *t = load(tallyd_json), *jobs = load(jobs_json);
	json_t *dp = load(dp_json);
	char *text;

	(void)state;
	text = render_checked(t, jobs, dp);
	has(text, "\ntallyd_up 1\n");
	has(text, "\ntallyd_build_info{version=\"");
	has(text, "\ntallyd_uptime_seconds 12\n");
	has(text, "\ntallyd_jobs 2\n");
	has(text, "\ntallyd_joins_total 8\n");
	has(text, "\ntallyd_memberships_total 2\n");
	has(text, "\ntallyd_join_failures_total{reason=\"bad_token\"} 1\n");
	has(text, "\ntallyd_join_failures_total{reason=\"timeout\"} 3\n");
	has(text, "\ntallyd_join_failures_total{reason=\"draining\"} 0\n");
	has(text, "\ntallyd_ctl_requests_total 5\n");
	has(text, "\ntallyd_ctl_errors_total 1\n");
	has(text, "\ntallyd_dp_up 1\n");
	has(text, "\ntallyd_dp_reprograms_total 1\n");
	has(text, "\ntallyd_dp_errors_total 0\n");
	has(text, "\ntallyd_dp_timeouts_total 4\n");
	has(text, "\ntallyd_dp_mismatches_total 2\n");
	has(text, "\ntallyd_dp_stale_removed_total 200\n");
	has(text, "\ntallyd_join_failures_total{reason=\"address_mismatch\"} 2\n");
	has(text, "\ntallyd_rdv_connections 17\n");
	has(text, "\ntallyd_rdv_max_connections 4096\n");
	has(text, "\ntallyd_rdv_refused_total 4\n");
	has(text, "\ntallyd_rdv_evicted_total{reason=\"per_source\"} 5\n");
	has(text, "\ntallyd_rdv_evicted_total{reason=\"full\"} 6\n");
	has(text, "\ntallyd_rdv_evicted_total{reason=\"fds\"} 7\n");
	has(text, "\ntallyd_rdv_fd_backoffs_total 8\n");
	has(text, "\ntallyd_rdv_handshake_timeouts_total 9\n");
	has(text, "\ntallyd_rdv_tls_failures_total 10\n");
	has(text, "\ntallyd_ctl_send_failures_total 2\n");
	has(text, "\ntallyd_ctl_fd_backoffs_total 5\n");
	has(text, "\ntallyd_state_saves_total 9\n");
	has(text, "\ntallyd_state_save_failures_total 4\n");
	has(text, "\ntallyd_state_unsaved 1\n");
	has(text, "# TYPE tallyd_state_unsaved gauge\n");

	has(text, "\ntally_job_info{tally_job=\"resnet\",id=\"1\","
		"state=\"ready\"} 1\n");
	has(text, "\ntally_job_info{tally_job=\"bert.v2\",id=\"2\","
		"state=\"forming\"} 1\n");
	has(text, "\ntally_job_world{tally_job=\"bert.v2\"} 8\n");
	has(text, "\ntally_job_joined{tally_job=\"bert.v2\"} 3\n");
	has(text, "\ntally_job_epoch{tally_job=\"resnet\"} 2\n");
	has(text, "\ntally_job_contributions_total{tally_job=\"resnet\"} 400\n");
	has(text, "\ntally_job_elements_total{tally_job=\"resnet\"} 102400\n");
	has(text, "\ntally_job_received_bytes_total{tally_job=\"resnet\"} 4096\n");
	has(text, "\ntally_job_rounds_total{tally_job=\"resnet\"} 100\n");
	has(text, "\ntally_job_results_total{tally_job=\"resnet\"} 400\n");
	has(text, "\ntally_job_sent_bytes_total{tally_job=\"resnet\"} 8192\n");
	has(text, "\ntally_job_resent_total{tally_job=\"resnet\"} 3\n");
	has(text, "\ntally_job_nacks_total{tally_job=\"resnet\"} 1\n");
	has(text, "\ntally_job_drops_total{tally_job=\"resnet\"} 7\n");
	has(text, "\ntally_job_duplicates_total{tally_job=\"resnet\"} 11\n");
	has(text, "\ntally_job_drops_total{tally_job=\"bert.v2\"} 0\n");
	assert_int_equal(count_of(text, "bytes_in"), 0);

	has(text, "\ntally_dp_rx_total{lcore=\"1\"} 100\n");
	has(text, "\ntally_dp_rx_total{lcore=\"2\"} 50\n");
	has(text, "\ntally_dp_idle_sleeps_total{lcore=\"1\"} 9\n");
	has(text, "\ntally_dp_retransmissions_served_total{lcore=\"1\"} 1\n");
	has(text, "\ntally_dp_drops_total{lcore=\"1\",reason=\"bad_token\"} "
		"2\n");
	has(text, "\ntally_dp_drops_total{lcore=\"2\",reason=\"net_ip_cksum\"} "
		"5\n");
	has(text, "\ntally_dp_drops_total{lcore=\"1\",reason=\"truncated\"} "
		"0\n");
	has(text, "# TYPE tally_dp_drops_total counter\n");
	has(text, "# HELP tally_dp_rx_total Frames received from the port.\n");
	/* Drops only as reasons; totals only as the lcores' sum. */
	assert_int_equal(count_of(text, "tally_dp_drop_"), 0);
	assert_int_equal(count_of(text, "lcore=\"total\""), 0);
	/* 19 counters + drops, each family's header once. */
	assert_int_equal(count_of(text, "# TYPE tally_dp_"), 20);
	assert_int_equal(count_of(text, "# HELP tally_dp_"), 20);
	free(text);
	json_decref(t);
	json_decref(jobs);
	json_decref(dp);
}

/* tally-dp unreachable: tallyd and job families stay, dp_up says 0. */
static void
dp_down(void **state)
{
	json_t *t = load(tallyd_json), *jobs = load(jobs_json);
	json_t *null = json_null(), *dp = load(dp_json);
	char *text;

	(void)state;
	json_object_set_new(t, "dp_up", json_false());
	text = render_checked(t, jobs, NULL);
	has(text, "\ntallyd_dp_up 0\n");
	has(text, "\ntallyd_uptime_seconds 12\n");
	has(text, "\ntally_job_rounds_total{tally_job=\"resnet\"} 100\n");
	assert_int_equal(count_of(text, "tally_dp_"), 0);
	free(text);

	text = render_checked(t, jobs, null);
	has(text, "\ntallyd_dp_up 0\n");
	assert_int_equal(count_of(text, "tally_dp_"), 0);
	free(text);

	/* Stale counters with tallyd saying it is down: left out. */
	text = render_checked(t, jobs, dp);
	has(text, "\ntallyd_dp_up 0\n");
	assert_int_equal(count_of(text, "tally_dp_"), 0);
	free(text);

	/* tallyd up, no counters yet: down too, nothing invented. */
	json_object_set_new(t, "dp_up", json_true());
	text = render_checked(t, jobs, NULL);
	has(text, "\ntallyd_dp_up 0\n");
	free(text);
	json_decref(t);
	json_decref(jobs);
	json_decref(null);
	json_decref(dp);
}

static void
label_escaping(void **state)
{
	json_t *jobs = load("[{\"name\": \"a\\\"b\\\\c\\nd\", \"id\": 3,"
		" \"state\": \"we\\\"ird\", \"world\": 2,"
		" \"counters\": {\"rounds\": 5}}]");
	json_t *t = load("{\"join_failures\": {\"x\\\"y\": 1}}");
	char *text;

	(void)state;
	text = render_checked(t, jobs, NULL);
	has(text, "\ntally_job_info{tally_job=\"a\\\"b\\\\c\\nd\",id=\"3\","
		"state=\"we\\\"ird\"} 1\n");
	has(text, "\ntally_job_rounds_total{tally_job=\"a\\\"b\\\\c\\nd\"} 5\n");
	has(text, "\ntallyd_join_failures_total{reason=\"x\\\"y\"} 1\n");
	free(text);
	json_decref(jobs);
	json_decref(t);
}

/* Nothing at all, or every input of the wrong type. */
static void
empty_and_wrong_types(void **state)
{
	json_t *arr = json_array(), *obj = json_object();
	json_t *str = json_string("x"), *num = json_integer(3);
	json_t *in[] = { NULL, arr, obj, str, num };
	char *text;

	(void)state;
	for (size_t a = 0; a < 5; a++)
		for (size_t b = 0; b < 5; b++)
			for (size_t c = 0; c < 5; c++) {
				/* promcheck.py on the diagonal only: speed. */
				text = a == b && b == c ?
					render_checked(in[a], in[b], in[c]) :
					tallyd_metrics_render(in[a], in[b],
						in[c]);
				assert_non_null(text);
				has(text, "\ntallyd_up 1\n");
				free(text);
			}
	text = render_checked(NULL, NULL, NULL);
	has(text, "\ntallyd_dp_up 0\n");
	assert_int_equal(count_of(text, "tally_job_"), 0);
	assert_int_equal(count_of(text, "tallyd_jobs"), 0);
	free(text);
	text = render_checked(NULL, arr, NULL);
	has(text, "\ntallyd_jobs 0\n");
	free(text);
	json_decref(arr);
	json_decref(obj);
	json_decref(str);
	json_decref(num);
}

/* Malformed pieces are left out one by one; the rest still renders. */
static void
odd_values(void **state)
{
	json_t *t = load("{\"uptime_s\": \"12\", \"jobs\": -1, \"joins\": -4,"
		" \"memberships\": 2.5, \"join_failures\": [1, 2],"
		" \"ctl_requests\": true, \"ctl_errors\": null,"
		" \"dp_reprograms\": 1e300, \"dp_errors\": {}}");
	json_t *jobs = load("[1, null, \"x\", {}, {\"name\": 5},"
		" {\"name\": \"\"},"
		" {\"name\": \"j1\", \"id\": \"7\", \"world\": \"4\","
		"  \"state\": 3, \"joined\": -1, \"counters\": \"none\"},"
		" {\"name\": \"j1\", \"id\": 9, \"world\": 9},"
		" {\"name\": \"j2\", \"counters\": {\"rounds\": -3,"
		"  \"nacks\": 1.5, \"drops\": false, \"frobs\": 4,"
		"  \"received_bytes\": 6, \"\": 1, \"a b\": 2}}]");
	json_t *dp = load("{\"lcores\": [5, {\"rx\": 1}, {\"lcore\": \"1\"},"
		" {\"lcore\": 1, \"rx\": 10, \"rx-bytes\": 1, \"rx_bytes\": 2,"
		"  \"drops\": 3, \"drop_\": 4, \"\": 5, \"foo.bar\": 6,"
		"  \"tx\": \"9\", \"drop_bad_token\": -1, \"drop_early\": 2,"
		"  \"ok_total\": 1},"
		" {\"lcore\": 1, \"rx\": 11},"
		" {\"lcore\": 3}]}");
	char *text;

	(void)state;
	text = render_checked(t, jobs, dp);
	/* tallyd: strings, negative counters, arrays and null left out. */
	assert_int_equal(count_of(text, "tallyd_uptime_seconds"), 0);
	has(text, "\ntallyd_jobs -1\n");
	assert_int_equal(count_of(text, "tallyd_joins_total"), 0);
	has(text, "\ntallyd_memberships_total 2.5\n");
	assert_int_equal(count_of(text, "tallyd_join_failures_total"), 0);
	assert_int_equal(count_of(text, "tallyd_ctl_requests_total"), 0);
	assert_int_equal(count_of(text, "tallyd_ctl_errors_total"), 0);
	has(text, "\ntallyd_dp_reprograms_total 1.0000000000000001e+300\n");
	assert_int_equal(count_of(text, "tallyd_dp_errors_total"), 0);
	has(text, "\ntallyd_dp_up 1\n");

	/* Jobs: the first "j1" only, its odd values left out. */
	has(text, "\ntally_job_info{tally_job=\"j1\"} 1\n");
	has(text, "\ntally_job_joined{tally_job=\"j1\"} -1\n");
	assert_int_equal(count_of(text, "tally_job_world{"), 0);
	has(text, "\ntally_job_info{tally_job=\"j2\"} 1\n");
	assert_int_equal(count_of(text, "tally_job_rounds_total{"), 0);
	has(text, "\ntally_job_nacks_total{tally_job=\"j2\"} 1.5\n");
	assert_int_equal(count_of(text, "tally_job_drops_total{"), 0);
	has(text, "\ntally_job_frobs_total{tally_job=\"j2\"} 4\n");
	has(text, "\ntally_job_a_b_total{tally_job=\"j2\"} 2\n");
	/* "received_bytes" would be bytes_in's family: the first keeps it. */
	assert_int_equal(count_of(text, "tally_job_received_bytes_total{"), 0);

	/* tally-dp: lcore 1 once, lcore 3 with nothing, the rest skipped. */
	has(text, "\ntally_dp_rx_total{lcore=\"1\"} 10\n");
	assert_int_equal(count_of(text, "tally_dp_rx_total{"), 1);
	has(text, "\ntally_dp_rx_bytes_total{lcore=\"1\"} 1\n");
	has(text, "# TYPE tally_dp_rx_bytes_total counter\n");
	has(text, "\ntally_dp_foo_bar_total{lcore=\"1\"} 6\n");
	has(text, "# HELP tally_dp_foo_bar_total "
		"tally-dp's counter foo_bar.\n");
	has(text, "\ntally_dp_ok_total_total{lcore=\"1\"} 1\n");
	assert_int_equal(count_of(text, "tally_dp_tx_total"), 0);
	has(text, "# TYPE tally_dp_drops_total counter\n");
	has(text, "\ntally_dp_drops_total{lcore=\"1\",reason=\"early\"} 2\n");
	assert_int_equal(count_of(text, "tally_dp_drops_total{"), 1);
	assert_int_equal(count_of(text, "lcore=\"3\""), 0);
	free(text);
	json_decref(t);
	json_decref(jobs);
	json_decref(dp);
}

/* tally-dp with no lcores: up, and no tally_dp_ family at all. */
static void
dp_without_lcores(void **state)
{
	json_t *dp = load("{\"total\": {\"rx\": 3}, \"lcores\": []}");
	json_t *dp2 = load("{\"total\": {\"rx\": 3}}");
	char *text;

	(void)state;
	text = render_checked(NULL, NULL, dp);
	has(text, "\ntallyd_dp_up 1\n");
	assert_int_equal(count_of(text, "tally_dp_"), 0);
	free(text);
	text = render_checked(NULL, NULL, dp2);
	has(text, "\ntallyd_dp_up 1\n");
	assert_int_equal(count_of(text, "tally_dp_"), 0);
	free(text);
	json_decref(dp);
	json_decref(dp2);
}

/* Many jobs and lcores: the buffer grows well past its first size. */
static void
large(void **state)
{
	json_t *jobs = json_array(), *lcores = json_array(), *dp;
	json_t *base = load(jobs_json), *lc = load(dp_json);
	char name[32], *text;

	(void)state;
	for (int i = 0; i < 64; i++) {
		json_t *j = json_deep_copy(json_array_get(base, 0));

		snprintf(name, sizeof(name), "job-%02d", i);
		json_object_set_new(j, "name", json_string(name));
		json_object_set_new(j, "id", json_integer(i + 1));
		json_array_append_new(jobs, j);
	}
	for (int i = 0; i < 32; i++) {
		json_t *o = json_deep_copy(json_array_get(
			json_object_get(lc, "lcores"), 0));

		json_object_set_new(o, "lcore", json_integer(i));
		json_array_append_new(lcores, o);
	}
	dp = json_pack("{s:o}", "lcores", lcores);
	text = render_checked(NULL, jobs, dp);
	has(text, "\ntally_job_info{tally_job=\"job-63\",id=\"64\","
		"state=\"ready\"} 1\n");
	has(text, "\ntally_dp_drops_total{lcore=\"31\",reason=\"net_runt\"} "
		"0\n");
	has(text, "\ntallyd_jobs 64\n");
	assert_true(strlen(text) > 65536);
	free(text);
	json_decref(jobs);
	json_decref(dp);
	json_decref(base);
	json_decref(lc);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(full_stats),
		cmocka_unit_test(dp_down),
		cmocka_unit_test(label_escaping),
		cmocka_unit_test(empty_and_wrong_types),
		cmocka_unit_test(odd_values),
		cmocka_unit_test(dp_without_lcores),
		cmocka_unit_test(large),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * stats' reply as text: tallyd's counters, its join failures by reason,
 * whether tally-dp is up, and tally-dp's counters in one table with a
 * column for the total and one per lcore.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"
#include "table.h"

#define CELL	96

static int
print_tallyd(FILE *f, const json_t *td)
{
	struct tallyctl_table *t = tallyctl_table_new(2, "lr");
	const char *k;
	json_t *v;
	char b[CELL];
	int ret = 0;

	if (t == NULL)
		return -ENOMEM;
	/* (k is the iterator: never assign it.) */
	json_object_foreach((json_t *)td, k, v) {
		const char *label = k;

		if (strcmp(k, "join_failures") == 0)
			continue;
		if (strcmp(k, "uptime_s") == 0 && json_is_integer(v) &&
				json_integer_value(v) >= 0) {
			label = "uptime";
			tallyctl_fmt_duration(b, sizeof(b),
				(uint64_t)json_integer_value(v));
		} else if (json_is_object(v) || json_is_array(v)) {
			continue;
		} else {
			tallyctl_fmt_value(b, sizeof(b), v);
		}
		if ((ret = tallyctl_table_cells(t, label, b, NULL)) != 0)
			break;
	}
	if (ret == 0) {
		fputs("tallyd:\n", f);
		ret = tallyctl_table_print(t, f, "  ");
	}
	tallyctl_table_destroy(t);
	return ret;
}

static int
print_failures(FILE *f, const json_t *jf)
{
	struct tallyctl_table *t = tallyctl_table_new(2, "lr");
	const char *k;
	json_t *v;
	char b[CELL];
	int ret = 0;

	if (t == NULL)
		return -ENOMEM;
	json_object_foreach((json_t *)jf, k, v) {
		tallyctl_fmt_value(b, sizeof(b), v);
		if ((ret = tallyctl_table_cells(t, k, b, NULL)) != 0)
			break;
	}
	if (ret == 0) {
		fputs("join failures:\n", f);
		ret = tallyctl_table_print(t, f, "  ");
	}
	tallyctl_table_destroy(t);
	return ret;
}

/* Whether counter k is 0 in total and in every lcore. */
static bool
all_zero(const json_t *v, const json_t *lcores, const char *k)
{
	const json_t *lc;
	size_t i;

	if (!json_is_integer(v) || json_integer_value(v) != 0)
		return false;
	json_array_foreach(lcores, i, lc) {
		const json_t *x = json_object_get(lc, k);

		if (x != NULL && (!json_is_integer(x) ||
				json_integer_value(x) != 0))
			return false;
	}
	return true;
}

static int
dp_header(struct tallyctl_table *t, const json_t *lcores)
{
	const json_t *lc;
	size_t i;
	int ret;

	ret = tallyctl_table_cells(t, "COUNTER", "TOTAL", NULL);
	json_array_foreach(lcores, i, lc) {
		const json_t *id = json_object_get(lc, "lcore");

		if (ret != 0)
			break;
		if (json_is_integer(id))
			ret = tallyctl_table_cell(t,
				"LCORE%" JSON_INTEGER_FORMAT,
				json_integer_value(id));
		else
			ret = tallyctl_table_cell(t, "LCORE?");
	}
	return ret;
}

/* One row per counter of total (in its order), shown or all. */
static int
dp_rows(struct tallyctl_table *t, const json_t *total,
	const json_t *lcores, bool all, unsigned int *shown)
{
	const json_t *lc;
	const char *k;
	json_t *v;
	char b[CELL];
	size_t i;
	int ret = 0;

	json_object_foreach((json_t *)total, k, v) {
		if (!all && all_zero(v, lcores, k))
			continue;
		tallyctl_fmt_value(b, sizeof(b), v);
		if ((ret = tallyctl_table_cells(t, k, b, NULL)) != 0)
			return ret;
		json_array_foreach(lcores, i, lc) {
			tallyctl_fmt_value(b, sizeof(b),
				json_object_get(lc, k));
			if ((ret = tallyctl_table_cell(t, "%s", b)) != 0)
				return ret;
		}
		(*shown)++;
	}
	return 0;
}

static int
print_dp(FILE *f, const json_t *dp, bool all)
{
	const json_t *total = json_object_get(dp, "total");
	const json_t *lcores = json_object_get(dp, "lcores");
	struct tallyctl_table *t;
	unsigned int shown = 0;
	int ret;

	if (!json_is_object(total))
		return -EPROTO;
	t = tallyctl_table_new(2 + (unsigned int)json_array_size(lcores),
		"lr");
	if (t == NULL)
		return -ENOMEM;
	ret = dp_header(t, lcores);
	if (ret == 0)
		ret = dp_rows(t, total, lcores, all, &shown);
	if (ret == 0 && shown > 0)
		ret = tallyctl_table_print(t, f, "  ");
	else if (ret == 0)
		fputs("  every counter is 0 (--all shows them)\n", f);
	tallyctl_table_destroy(t);
	return ret;
}

/*
 * The dataplanes tallyd drives, when it drives more than one (jobs
 * sharded over them, docs/scale-out.md): name, up, and the endpoint
 * workers send to.
 */
static int
print_dataplanes(FILE *f, const json_t *dps)
{
	struct tallyctl_table *t;
	const json_t *d;
	size_t i;
	int ret;

	if (json_array_size(dps) < 2)
		return 0;
	t = tallyctl_table_new(3, "lll");
	if (t == NULL)
		return -ENOMEM;
	ret = tallyctl_table_cells(t, "DATAPLANE", "UP", "ENDPOINT", NULL);
	json_array_foreach(dps, i, d) {
		const char *n = json_string_value(json_object_get(d, "name"));
		const char *e = json_string_value(json_object_get(d,
			"endpoint"));

		if (ret != 0)
			break;
		ret = tallyctl_table_cells(t, n != NULL ? n : "?",
			json_is_true(json_object_get(d, "up")) ? "yes" : "no",
			e != NULL ? e : "unknown", NULL);
	}
	if (ret == 0) {
		fputs("dataplanes:\n", f);
		ret = tallyctl_table_print(t, f, "  ");
	}
	tallyctl_table_destroy(t);
	return ret;
}

int
tallyctl_print_stats(FILE *f, const json_t *reply, bool all)
{
	const json_t *td = json_object_get(reply, "tallyd");
	const json_t *jf = json_object_get(td, "join_failures");
	const json_t *dp = json_object_get(reply, "dp");
	const json_t *up = json_object_get(td, "dp_up");
	int ret;

	if (!json_is_object(td))
		return -EPROTO;
	ret = print_tallyd(f, td);
	if (ret == 0 && json_is_object(jf))
		ret = print_failures(f, jf);
	if (ret == 0)
		ret = print_dataplanes(f, json_object_get(reply, "dataplanes"));
	if (ret != 0)
		return ret;
	if (json_is_boolean(up))
		fprintf(f, "tally-dp: %s\n", json_is_true(up) ? "up" : "down");
	else
		fprintf(f, "tally-dp: %s\n", json_is_object(dp) ? "up" :
			"down");
	if (json_is_object(dp))
		return print_dp(f, dp, all);
	fputs("  no counters\n", f);
	return 0;
}

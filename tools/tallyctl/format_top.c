/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A frame of top as text: a line about tallyd and tally-dp, tally-dp's
 * rates, then one row of rates per job. "-" marks a rate not known yet.
 */
#include <errno.h>
#include <stdint.h>

#include "format.h"
#include "table.h"

#define CELL	96

static void
fmt_rate(char *b, size_t len, const json_t *v)
{
	if (json_is_number(v))
		snprintf(b, len, "%.1f", json_number_value(v));
	else
		snprintf(b, len, "-");
}

static void
print_head(FILE *f, const json_t *frame)
{
	const json_t *up = json_object_get(frame, "uptime_s");
	const json_t *dp_up = json_object_get(frame, "dp_up");
	const json_t *dp = json_object_get(frame, "dp");
	size_t n = json_array_size(json_object_get(frame, "jobs"));
	char u[CELL] = "-", rx[CELL], tx[CELL], r[CELL], d[CELL];

	if (json_is_integer(up) && json_integer_value(up) >= 0)
		tallyctl_fmt_duration(u, sizeof(u),
			(uint64_t)json_integer_value(up));
	fprintf(f, "tallyd up %s, %zu job%s, tally-dp %s; rates over %.1f s\n",
		u, n, n == 1 ? "" : "s", !json_is_boolean(dp_up) ? "-" :
		json_is_true(dp_up) ? "up" : "down",
		json_number_value(json_object_get(frame, "interval_s")));
	if (!json_is_object(dp)) {
		fputs("tally-dp: no counters\n", f);
		return;
	}
	fmt_rate(rx, sizeof(rx), json_object_get(dp, "rx_per_s"));
	fmt_rate(tx, sizeof(tx), json_object_get(dp, "tx_per_s"));
	fmt_rate(r, sizeof(r), json_object_get(dp, "rounds_per_s"));
	fmt_rate(d, sizeof(d), json_object_get(dp, "drops_per_s"));
	fprintf(f, "tally-dp: rx %s/s  tx %s/s  rounds %s/s  drops %s/s\n",
		rx, tx, r, d);
}

static int
job_row(struct tallyctl_table *t, const json_t *j)
{
	static const char *const plain[] = {
		"name", "id", "world", "joined", "state",
	};
	static const char *const rates[] = {
		"rounds_per_s", "mb_in_per_s", "mb_out_per_s", "drops_per_s",
	};
	char b[CELL];
	int ret = 0;

	for (size_t i = 0; i < sizeof(plain) / sizeof(plain[0]); i++) {
		tallyctl_fmt_value(b, sizeof(b), json_object_get(j, plain[i]));
		if ((ret = tallyctl_table_cell(t, "%s", b)) != 0)
			return ret;
	}
	for (size_t i = 0; i < sizeof(rates) / sizeof(rates[0]); i++) {
		fmt_rate(b, sizeof(b), json_object_get(j, rates[i]));
		if ((ret = tallyctl_table_cell(t, "%s", b)) != 0)
			return ret;
	}
	return 0;
}

int
tallyctl_print_top(FILE *f, const json_t *frame)
{
	const json_t *jobs = json_object_get(frame, "jobs");
	struct tallyctl_table *t;
	const json_t *j;
	size_t i;
	int ret;

	if (!json_is_array(jobs))
		return -EPROTO;
	print_head(f, frame);
	fputc('\n', f);
	if (json_array_size(jobs) == 0) {
		fputs("no jobs\n", f);
		return 0;
	}
	t = tallyctl_table_new(9, "lrrrlr");
	if (t == NULL)
		return -ENOMEM;
	ret = tallyctl_table_cells(t, "NAME", "ID", "WORLD", "JOINED", "STATE",
		"ROUNDS/S", "IN_MB/S", "OUT_MB/S", "DROPS/S", NULL);
	json_array_foreach(jobs, i, j)
		if (ret == 0)
			ret = job_row(t, j);
	if (ret == 0)
		ret = tallyctl_table_print(t, f, "");
	tallyctl_table_destroy(t);
	return ret;
}

/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Units (bytes, durations, times, values) and ping's reply as text. The
 * job, stats and top replies have files of their own beside this one.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "format.h"
#include "table.h"

void
tallyctl_fmt_bytes(char *buf, size_t len, uint64_t v)
{
	static const char *const unit[] = {
		"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB",
	};
	double x = (double)v;
	unsigned int u = 0;

	if (v < 1024) {
		snprintf(buf, len, "%" PRIu64 " B", v);
		return;
	}
	/* The next unit once "%.1f" would print 1024.0. */
	while (x >= 1023.95 && u + 1 < sizeof(unit) / sizeof(unit[0])) {
		x /= 1024;
		u++;
	}
	snprintf(buf, len, "%.1f %s", x, unit[u]);
}

void
tallyctl_fmt_duration(char *buf, size_t len, uint64_t s)
{
	if (s < 60)
		snprintf(buf, len, "%" PRIu64 "s", s);
	else if (s < 3600)
		snprintf(buf, len, "%" PRIu64 "m %02" PRIu64 "s", s / 60,
			s % 60);
	else if (s < 86400)
		snprintf(buf, len, "%" PRIu64 "h %02" PRIu64 "m", s / 3600,
			s % 3600 / 60);
	else
		snprintf(buf, len, "%" PRIu64 "d %02" PRIu64 "h", s / 86400,
			s % 86400 / 3600);
}

void
tallyctl_fmt_time(char *buf, size_t len, int64_t t, time_t now)
{
	time_t tt = (time_t)t;
	char ago[32];
	struct tm tm;
	size_t n;

	if (t <= 0 || gmtime_r(&tt, &tm) == NULL) {
		snprintf(buf, len, "-");
		return;
	}
	n = strftime(buf, len, "%Y-%m-%d %H:%M:%S UTC", &tm);
	if (n == 0 || (int64_t)now < t)
		return;
	tallyctl_fmt_duration(ago, sizeof(ago), (uint64_t)((int64_t)now - t));
	snprintf(buf + n, len - n, " (%s ago)", ago);
}

void
tallyctl_fmt_value(char *buf, size_t len, const json_t *v)
{
	if (json_is_integer(v))
		snprintf(buf, len, "%" JSON_INTEGER_FORMAT,
			json_integer_value(v));
	else if (json_is_real(v))
		snprintf(buf, len, "%.1f", json_real_value(v));
	else if (json_is_string(v))
		snprintf(buf, len, "%s", json_string_value(v));
	else if (json_is_boolean(v))
		snprintf(buf, len, "%s", json_is_true(v) ? "true" : "false");
	else
		snprintf(buf, len, "-");
}

const char *
tallyctl_json_str(const json_t *o, const char *k)
{
	const char *s = json_string_value(json_object_get(o, k));

	return s != NULL ? s : "-";
}

int
tallyctl_print_ping(FILE *f, const json_t *reply)
{
	const json_t *up = json_object_get(reply, "uptime_s");
	const json_t *dp = json_object_get(reply, "dp_up");
	struct tallyctl_table *t;
	char v[64] = "-";
	int ret;

	if (!json_is_object(reply))
		return -EPROTO;
	if (json_is_integer(up) && json_integer_value(up) >= 0)
		tallyctl_fmt_duration(v, sizeof(v),
			(uint64_t)json_integer_value(up));
	t = tallyctl_table_new(2, "l");
	if (t == NULL)
		return -ENOMEM;
	ret = tallyctl_table_cells(t, "version:",
		tallyctl_json_str(reply, "version"), NULL);
	if (ret == 0)
		ret = tallyctl_table_cells(t, "uptime:", v, NULL);
	if (ret == 0)
		ret = tallyctl_table_cells(t, "dp_up:", !json_is_boolean(dp) ?
			"-" : json_is_true(dp) ? "true" : "false", NULL);
	if (ret == 0)
		ret = tallyctl_table_print(t, f, "");
	tallyctl_table_destroy(t);
	return ret;
}

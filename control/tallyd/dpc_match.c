/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tally-dp's job_list entries against tallyd's jobs: whether an entry is
 * a job's own membership (its token's fingerprint, docs/control.md),
 * whether its configuration differs, and the job counters it carries
 * (last reading, base, and the fold between them).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>

#include "tally/token_fp.h"
#include "dpc.h"

void
tallyd_dpc_read_ctr(json_t *o, struct tallyd_ctr *c)
{
	uint64_t *v = (uint64_t *)(void *)c;

	memset(c, 0, sizeof(*c));
	for (size_t i = 0; i < TALLYD_NCTR; i++) {
		json_t *x = json_object_get(o, tallyd_ctr_names[i]);

		if (json_is_integer(x) && json_integer_value(x) > 0)
			v[i] = (uint64_t)json_integer_value(x);
	}
}

void
tallyd_dpc_fold(struct tallyd_job *j, struct tallyd_shard *sh)
{
	uint64_t *b = (uint64_t *)(void *)&j->base;
	const uint64_t *l = (const uint64_t *)(const void *)&sh->last;

	for (size_t i = 0; i < TALLYD_NCTR; i++)
		b[i] += l[i];
	memset(&sh->last, 0, sizeof(sh->last));
}

/* 1 if the entry's token_fp is absent, 0 if it differs, 2 if it matches. */
static int
fp_check(const struct tallyd_job *j, json_t *entry)
{
	const char *fp = json_string_value(json_object_get(entry, "token_fp"));
	char mine[17];

	if (fp == NULL)
		return 1;
	snprintf(mine, sizeof(mine), "%016llx",
		(unsigned long long)tally_token_fp(j->wire_token));
	return strcmp(fp, mine) == 0 ? 2 : 0;
}

bool
tallyd_dpc_entry_ours(const struct tallyd_job *j, json_t *entry)
{
	return j->has_members && fp_check(j, entry) != 0;
}

void
tallyd_dpc_take(struct tallyd_job *j, struct tallyd_shard *sh, json_t *entry)
{
	struct tallyd_ctr c;
	const uint64_t *cv = (const uint64_t *)(const void *)&c;
	const uint64_t *lv = (const uint64_t *)(const void *)&sh->last;
	bool reset = false, moved = false;

	tallyd_dpc_read_ctr(json_object_get(entry, "counters"), &c);
	for (size_t k = 0; k < TALLYD_NCTR; k++) {
		if (cv[k] < lv[k])
			reset = true;
		if (cv[k] != lv[k])
			moved = true;
	}
	if (reset)
		tallyd_dpc_fold(j, sh);
	sh->last = c;
	sh->moved = moved;
	if (moved)
		j->last_active = tallyd_wall_s();
}

/* An "IP" string as a host-order address, 0 if it is not one. */
static uint32_t
ip_of(json_t *s)
{
	struct in_addr a;

	if (!json_is_string(s) ||
			inet_pton(AF_INET, json_string_value(s), &a) != 1)
		return 0;
	return ntohl(a.s_addr);
}

/* Whether an integer key of o is v. */
static bool
int_is(json_t *o, const char *key, long long v)
{
	json_t *x = json_object_get(o, key);

	return json_is_integer(x) && json_integer_value(x) == v;
}

static int
members_differ(const struct tallyd_job *j, json_t *m, char *what,
	size_t wlen)
{
	json_t *o;
	size_t r;

	if (!json_is_array(m) || json_array_size(m) != j->world) {
		snprintf(what, wlen, "%zu members, not %u",
			json_array_size(m), j->world);
		return 1;
	}
	json_array_foreach(m, r, o) {
		if (ip_of(json_object_get(o, "ip")) != j->members[r].ip ||
				!int_is(o, "port", j->members[r].port)) {
			snprintf(what, wlen, "member %zu is another address",
				r);
			return 1;
		}
	}
	return 0;
}

int
tallyd_dpc_entry_differs(const struct tallyd_job *j, json_t *e, char *what,
	size_t wlen)
{
	json_t *g = json_object_get(e, "group");
	json_t *narrow = json_object_get(e, "narrow");
	static const char *const keys[] = { "world", "window", "max_elems" };
	const long long want[] = { j->world, j->window, j->max_elems };

	for (int i = 0; i < 3; i++)
		if (!int_is(e, keys[i], want[i])) {
			snprintf(what, wlen, "%s %lld, not %lld", keys[i],
				(long long)json_integer_value(
					json_object_get(e, keys[i])), want[i]);
			return 1;
		}
	if (!json_is_boolean(narrow) || json_is_true(narrow) != j->narrow) {
		snprintf(what, wlen, "narrow is not %s",
			j->narrow ? "true" : "false");
		return 1;
	}
	if (json_is_true(json_object_get(e, "auth")) != j->auth) {
		snprintf(what, wlen, "auth is not %s",
			j->auth ? "true" : "false");
		return 1;
	}
	if (members_differ(j, json_object_get(e, "members"), what, wlen))
		return 1;
	if ((j->group_ip == 0 && g != NULL && !json_is_null(g)) ||
			(j->group_ip != 0 && (ip_of(json_object_get(g, "ip")) !=
			j->group_ip || !int_is(g, "port", j->group_port)))) {
		snprintf(what, wlen, "another multicast group");
		return 1;
	}
	if (fp_check(j, e) == 0) {
		snprintf(what, wlen, "another wire token");
		return 1;
	}
	return 0;
}

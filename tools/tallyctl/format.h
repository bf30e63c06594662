/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tallyd's replies (docs/control.md) as text. Pure functions: each reads
 * the JSON it borrows and writes only to the FILE * it is given, so the
 * unit tests compare their output whole, with no daemon.
 *
 * The print functions return 0, -EPROTO when the reply lacks what the
 * contract promises (nothing or part of it is printed), or -ENOMEM. A
 * missing or mistyped field inside a job prints as "-".
 */
#ifndef TALLYCTL_FORMAT_H
#define TALLYCTL_FORMAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include <jansson.h>

/* "512 B", "1.5 KiB", "64.0 MiB" ... "16.0 EiB" (binary units). */
void tallyctl_fmt_bytes(char *buf, size_t len, uint64_t v);

/* "12s", "5m 07s", "1h 02m", "3d 04h". */
void tallyctl_fmt_duration(char *buf, size_t len, uint64_t s);

/*
 * Unix time t in UTC, "2026-11-18 22:13:20 UTC", then " (2m 03s ago)"
 * when now >= t; "-" for t <= 0.
 */
void tallyctl_fmt_time(char *buf, size_t len, int64_t t, time_t now);

/* A JSON value as a cell: integer, "%.1f" real, string, true/false, "-". */
void tallyctl_fmt_value(char *buf, size_t len, const json_t *v);

/* o's string k, or "-". Borrows o; the string lives as long as o. */
const char *tallyctl_json_str(const json_t *o, const char *k);

/* ping's reply: version, uptime, dp_up (whether tally-dp is up). */
int tallyctl_print_ping(FILE *f, const json_t *reply);

/* job_list's reply: the table, by id, or "no jobs". */
int tallyctl_print_job_list(FILE *f, const json_t *reply);

/* A job object (job_show's "job"): fields, members, counters. */
int tallyctl_print_job(FILE *f, const json_t *job, time_t now);

/*
 * A two-tier tree (job_show's "tree", docs/scale-out.md): its total
 * world and spine, then a row per leaf: its job, dataplane, state,
 * members joined, epoch, rounds, and its dataplane's two-tier counters.
 */
int tallyctl_print_tree(FILE *f, const json_t *tree);

/* job_create's reply: the job's settings, then its token, once. */
int tallyctl_print_created(FILE *f, const json_t *reply, time_t now);

/*
 * stats' reply: tallyd's counters, join failures, tally-dp up or down,
 * and tally-dp's counters, total and per lcore: the non-zero ones, or
 * all of them.
 */
int tallyctl_print_stats(FILE *f, const json_t *reply, bool all);

/* A frame of top (rates.h's tallyctl_top_frame()). */
int tallyctl_print_top(FILE *f, const json_t *frame);

#endif /* TALLYCTL_FORMAT_H */

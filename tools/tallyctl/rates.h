/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * top's rates: one frame from two consecutive samples, each sample a
 * job_list reply and a stats reply (docs/control.md). Pure: no I/O, no
 * clock; the caller measures dt and gives the time.
 */
#ifndef TALLYCTL_RATES_H
#define TALLYCTL_RATES_H

#include <time.h>

#include <jansson.h>

/*
 * The frame, a new object (docs/tools/tallyctl.md, "top"):
 *
 *   {"time": now, "interval_s": dt, "uptime_s": N, "dp_up": B,
 *    "jobs": [{"name", "id", "state", "world", "joined", "rounds",
 *              "bytes_in", "bytes_out", "drops", "rounds_per_s",
 *              "mb_in_per_s", "mb_out_per_s", "drops_per_s"}, ...],
 *    "dp": {"rx_per_s", "tx_per_s", "rounds_per_s", "drops_per_s"}}
 *
 * Jobs by id. A rate is null where it cannot be known: no earlier
 * sample (prev_list or prev_stats NULL), a job not in it (or with
 * another id), a counter that went down, or dt <= 0. "dp" is null while
 * tally-dp's counters are; its drops are every drop_* counter summed. MB
 * is 10^6 bytes. Borrows every sample. Returns NULL with errno set
 * (EPROTO: list has no "jobs" array, ENOMEM).
 */
json_t *tallyctl_top_frame(const json_t *prev_list, const json_t *prev_stats,
	const json_t *list, const json_t *stats, double dt, time_t now);

#endif /* TALLYCTL_RATES_H */

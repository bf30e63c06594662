/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tallyd's metrics in Prometheus text exposition format 0.0.4, rendered
 * from the same JSON values the control socket's "stats" and "job_list"
 * replies carry (docs/control.md). docs/metrics.md lists every family.
 */
#ifndef TALLY_TALLYD_METRICS_H
#define TALLY_TALLYD_METRICS_H

#include <jansson.h>

/*
 * Renders the exposition text. Borrows all three values:
 *  - tallyd: the "tallyd" object of the stats reply (uptime_s, jobs,
 *    joins, memberships, join_failures, ctl_requests, ctl_errors, dp_up,
 *    dp_reprograms, dp_errors, dp_timeouts, dp_mismatches,
 *    dp_stale_removed);
 *  - jobs: an array of job objects (name, id, world, state, joined,
 *    epoch, counters);
 *  - dp: tally-dp's stats, {"total": {...}, "lcores": [{"lcore": N,
 *    counter: value, ...}, ...]}, or NULL / json null while tally-dp is
 *    unreachable. Its counter set is open-ended: every numeric key of
 *    every lcore is rendered, the name sanitized to [a-zA-Z0-9_];
 *    drop_<reason> keys become tally_dp_drops_total{reason="<reason>"}.
 * Any of them may be NULL, of the wrong type, or lack keys: what is
 * missing or malformed is left out, never guessed.
 *
 * Returns NUL-terminated text the caller frees with free(), or NULL with
 * errno ENOMEM.
 */
char *tallyd_metrics_render(const json_t *tallyd, const json_t *jobs,
	const json_t *dp);

#endif /* TALLY_TALLYD_METRICS_H */

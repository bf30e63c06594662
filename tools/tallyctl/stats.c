/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tallyctl stats [--all]: tallyd's counters and tally-dp's, total and
 * per lcore; tally-dp's zero counters only with --all.
 */
#include "format.h"
#include "tallyctl.h"

int
tallyctl_stats(struct tallyctl *g, int argc, char **argv)
{
	bool all = false;
	json_t *reply;
	int i, r, ret;

	for (i = 1; i < argc; i++) {
		if ((r = tallyctl_common_arg(g, argc, argv, &i, &ret)) < 0)
			return ret;
		if (r > 0)
			continue;
		if ((r = tallyctl_opt(g, argc, argv, &i, "--all", NULL)) < 0)
			return TALLYCTL_EXIT_USAGE;
		if (r > 0) {
			all = true;
			continue;
		}
		if (argv[i][0] == '-' && argv[i][1] != '\0')
			return tallyctl_usage_error(g, "unknown option '%s'",
				argv[i]);
		return tallyctl_usage_error(g, "unexpected argument '%s'",
			argv[i]);
	}
	ret = tallyctl_call(g, json_pack("{s:s}", "cmd", "stats"), &reply);
	if (ret != 0)
		return ret;
	if (g->json)
		ret = tallyctl_print_json(g, reply);
	else
		ret = tallyctl_printed(g, tallyctl_print_stats(stdout, reply,
			all));
	json_decref(reply);
	return ret;
}

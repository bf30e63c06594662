/* SPDX-License-Identifier: BSD-3-Clause */
/* tallyctl ping: tallyd's version and uptime, and tally-dp up or down. */
#include "format.h"
#include "tallyctl.h"

int
tallyctl_ping(struct tallyctl *g, int argc, char **argv)
{
	json_t *reply;
	int ret;

	if (tallyctl_args(g, argc, argv, NULL, NULL, &ret) != 0)
		return ret;
	ret = tallyctl_call(g, json_pack("{s:s}", "cmd", "ping"), &reply);
	if (ret != 0)
		return ret;
	if (g->json)
		ret = tallyctl_print_json(g, reply);
	else
		ret = tallyctl_printed(g, tallyctl_print_ping(stdout, reply));
	json_decref(reply);
	return ret;
}

/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tallyctl: global options, then a command from the table below (a group
 * such as "job" dispatches once more through its own table). Usage:
 * tallyctl help, docs/tools/tallyctl.md, tallyctl(8).
 */
#include <stdlib.h>
#include <string.h>

#include "tally_config.h"
#include "tallyctl.h"

static int cmd_help(struct tallyctl *g, int argc, char **argv);

const struct tallyctl_cmd tallyctl_cmds[] = {
	{ "job", "COMMAND [ARGS]", "Create, list, show and delete jobs.",
	  NULL, tallyctl_job_cmds },
	{ "stats", "[--all]", "tallyd's counters and join failures, whether "
	  "tally-dp is up, and tally-dp's counters in total and per lcore "
	  "(the non-zero ones; --all: every one).", tallyctl_stats, NULL },
	{ "top", "[--interval S] [--count N]", "Rates per job and of "
	  "tally-dp, refreshed every S seconds (default 1); stops after N "
	  "frames (default 0: at q or Ctrl-C).", tallyctl_top, NULL },
	{ "ping", "", "tallyd's version and uptime, and whether tally-dp is "
	  "up.", tallyctl_ping, NULL },
	{ "help", "[COMMAND [SUBCOMMAND]]", "This help, or a command's.",
	  cmd_help, NULL },
	{ NULL, NULL, NULL, NULL, NULL },
};

static const struct tallyctl_cmd *
find(const struct tallyctl_cmd *table, const char *name)
{
	for (const struct tallyctl_cmd *c = table; c->name != NULL; c++)
		if (strcmp(c->name, name) == 0)
			return c;
	return NULL;
}

/* help [COMMAND [SUBCOMMAND]]: usage on stdout. */
static int
cmd_help(struct tallyctl *g, int argc, char **argv)
{
	const struct tallyctl_cmd *c = NULL, *s = NULL;

	if (argc > 3)
		return tallyctl_usage_error(g, "unexpected argument '%s'",
			argv[3]);
	if (argc > 1 && (c = find(tallyctl_cmds, argv[1])) == NULL)
		return tallyctl_usage_error(g, "unknown command '%s'", argv[1]);
	if (argc > 2 && (c->sub == NULL ||
			(s = find(c->sub, argv[2])) == NULL))
		return tallyctl_usage_error(g, "unknown command '%s %s'",
			argv[1], argv[2]);
	if (c == NULL)
		tallyctl_usage_all(stdout);
	else if (s != NULL)
		tallyctl_usage(stdout, c, s);
	else
		tallyctl_usage(stdout, NULL, c);
	return TALLYCTL_EXIT_OK;
}

/*
 * Runs the command argv names from table (a group's when group is not
 * NULL), after any global options. A group with no command, or an
 * unknown command, is a usage error with the group's usage (or all of
 * it); -h/--help prints that on stdout.
 */
static int
dispatch(struct tallyctl *g, const struct tallyctl_cmd *group,
	const struct tallyctl_cmd *table, int argc, char **argv)
{
	const struct tallyctl_cmd *c;
	int i, r;

	g->group = group;
	g->cmd = NULL;
	for (i = 0; i < argc && argv[i][0] == '-'; i++) {
		if (tallyctl_is_help(argv[i])) {
			tallyctl_usage(stdout, group, NULL);
			return TALLYCTL_EXIT_OK;
		}
		if (group == NULL && strcmp(argv[i], "--version") == 0) {
			printf("tallyctl %s\n", TALLY_VERSION);
			return TALLYCTL_EXIT_OK;
		}
		r = tallyctl_global_opt(g, argc, argv, &i);
		if (r < 0)
			return TALLYCTL_EXIT_USAGE;
		if (r == 0)
			return tallyctl_usage_error(g, "unknown option '%s'",
				argv[i]);
	}
	if (i == argc && group != NULL)
		return tallyctl_usage_error(g, "missing a command after '%s'",
			group->name);
	if (i == argc)
		return tallyctl_usage_error(g, "missing a command");
	c = find(table, argv[i]);
	if (c == NULL)
		return tallyctl_usage_error(g, "unknown command '%s'", argv[i]);
	if (c->sub != NULL)
		return dispatch(g, c, c->sub, argc - i - 1, argv + i + 1);
	g->cmd = c;
	return c->run(g, argc - i, argv + i);
}

int
main(int argc, char **argv)
{
	struct tallyctl g = {
		.socket = TALLYCTL_DEFAULT_SOCKET,
		.timeout_ms = TALLYCTL_DEFAULT_TIMEOUT_MS,
	};
	const char *env = getenv("TALLYCTL_SOCKET");

	if (env != NULL && env[0] != '\0')
		g.socket = env;
	return dispatch(&g, NULL, tallyctl_cmds, argc - 1, argv + 1);
}

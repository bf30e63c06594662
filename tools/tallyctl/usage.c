/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Usage text from the command tables, as WireGuard's wg prints its
 * subcommands: the tables are the one place a command's arguments are
 * written down.
 */
#include <stdio.h>
#include <string.h>

#include "tallyctl.h"

#define WIDTH	79

/*
 * Prints s from column col on, breaking lines at spaces outside [...]
 * before WIDTH, continuation lines indented to indent. Ends the line.
 */
static void
wrap(FILE *f, const char *s, size_t col, size_t indent)
{
	bool first = true;

	while (*s != '\0') {
		size_t n = 0;
		int depth = 0;

		while (*s == ' ')
			s++;
		while (s[n] != '\0' && (s[n] != ' ' || depth > 0)) {
			depth += s[n] == '[' ? 1 : s[n] == ']' ? -1 : 0;
			n++;
		}
		if (n == 0)
			break;
		if (!first && col + 1 + n > WIDTH) {
			fprintf(f, "\n%*s", (int)indent, "");
			col = indent;
		} else if (!first || col > 0) {
			fputc(' ', f);
			col++;
		}
		fprintf(f, "%.*s", (int)n, s);
		col += n;
		s += n;
		first = false;
	}
	fputc('\n', f);
}

/* "  [group ]name args" and its help line, for command lists. */
static void
list_one(FILE *f, const struct tallyctl_cmd *group,
	const struct tallyctl_cmd *c)
{
	int col;

	col = fprintf(f, "  %s%s%s", group != NULL ? group->name : "",
		group != NULL ? " " : "", c->name);
	if (c->args[0] != '\0')
		wrap(f, c->args, (size_t)col, (size_t)col + 1);
	else
		fputc('\n', f);
	fputs("     ", f);
	wrap(f, c->help, 5, 6);
}

/* Every command of table; a group's (given) or the top level's. */
static void
list(FILE *f, const struct tallyctl_cmd *group,
	const struct tallyctl_cmd *table)
{
	for (const struct tallyctl_cmd *c = table; c->name != NULL; c++) {
		if (c->sub != NULL)
			list(f, c, c->sub);
		else
			list_one(f, group, c);
	}
}

void
tallyctl_usage(FILE *f, const struct tallyctl_cmd *group,
	const struct tallyctl_cmd *c)
{
	int col;

	if (c == NULL && group == NULL) {
		tallyctl_usage_all(f);
		return;
	}
	if (c == NULL || c->sub != NULL) {
		if (c != NULL)
			group = c;
		fprintf(f, "Usage: tallyctl %s COMMAND [ARGS]\n\nCommands:\n",
			group->name);
		list(f, group, group->sub);
		return;
	}
	col = fprintf(f, "Usage: tallyctl %s%s%s", group != NULL ?
		group->name : "", group != NULL ? " " : "", c->name);
	if (c->args[0] != '\0')
		wrap(f, c->args, (size_t)col, (size_t)col + 1);
	else
		fputc('\n', f);
}

void
tallyctl_usage_all(FILE *f)
{
	fputs("Usage: tallyctl", f);
	wrap(f, "[--socket PATH] [--json] [--timeout-ms N] "
		"COMMAND [ARGS]", 15, 16);
	fputs("\nCommands:\n", f);
	list(f, NULL, tallyctl_cmds);
	fprintf(f, "\n"
		"Global options (before or after the command):\n"
		"  --socket PATH    tallyd's control socket (default: "
		"$TALLYCTL_SOCKET,\n"
		"                   else %s)\n"
		"  --json           print tallyd's reply as JSON on one line\n"
		"  --pretty         print it indented (implies --json)\n"
		"  --timeout-ms N   wait at most N ms for tallyd (default "
		"%u)\n"
		"  -h, --help       this help (after a command: its usage)\n"
		"  --version        tallyctl's version\n"
		"\n"
		"Exit status: 0 done; 1 tallyd refused the request; 2 usage "
		"error;\n"
		"3 tallyd cannot be reached (or its reply is not one).\n",
		TALLYCTL_DEFAULT_SOCKET, TALLYCTL_DEFAULT_TIMEOUT_MS);
}

/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tallyctl: the operator's command line for tallyd's control socket
 * (docs/control.md, docs/tools/tallyctl.md). What each file does:
 * main.c parses the global options and dispatches through the command
 * tables below, which also print the usage (usage.c); opt.c matches
 * options and parses their numbers; request.c sends one request and turns
 * its fate into an exit status; job.c, stats.c, top.c and ping.c are the
 * commands; format.c and rates.c turn replies into text and rates, with
 * no I/O besides the FILE * they are given.
 */
#ifndef TALLYCTL_TALLYCTL_H
#define TALLYCTL_TALLYCTL_H

#include <stdbool.h>
#include <stdio.h>

#include <jansson.h>

/* Exit statuses, as docs/man/tallyctl.8 lists them. */
enum {
	TALLYCTL_EXIT_OK = 0,
	TALLYCTL_EXIT_REFUSED = 1,	/* tallyd answered with errno != 0 */
	TALLYCTL_EXIT_USAGE = 2,	/* bad option, argument or number */
	TALLYCTL_EXIT_UNREACHABLE = 3,	/* no socket, no answer, no reply */
};

#define TALLYCTL_DEFAULT_SOCKET		"/run/tally/tallyd.sock"
#define TALLYCTL_DEFAULT_TIMEOUT_MS	10000u

struct tallyctl;

/*
 * A command, or a group of commands (sub != NULL, a table ending with a
 * NULL name). run gets argv from the command's own name on and returns
 * the exit status.
 */
struct tallyctl_cmd {
	const char *name;
	const char *args;	/* usage after the name, [optional] parts */
	const char *help;	/* one line */
	int (*run)(struct tallyctl *g, int argc, char **argv);
	const struct tallyctl_cmd *sub;
};

/* The global options and the command being run (for its usage). */
struct tallyctl {
	const char *socket;
	unsigned int timeout_ms;
	bool json;
	bool pretty;
	const struct tallyctl_cmd *group;	/* NULL: a top-level command */
	const struct tallyctl_cmd *cmd;
};

/* The top-level table (main.c) and the commands (job.c, stats.c...). */
extern const struct tallyctl_cmd tallyctl_cmds[];
extern const struct tallyctl_cmd tallyctl_job_cmds[];
int tallyctl_stats(struct tallyctl *g, int argc, char **argv);
int tallyctl_top(struct tallyctl *g, int argc, char **argv);
int tallyctl_ping(struct tallyctl *g, int argc, char **argv);

/*
 * usage.c, wrapped at 79 columns. tallyctl_usage: "Usage: tallyctl
 * [group] cmd args", or a group's usage with its commands (c->sub);
 * c NULL: the group's (group NULL: tallyctl_usage_all()).
 */
void tallyctl_usage(FILE *f, const struct tallyctl_cmd *group,
	const struct tallyctl_cmd *c);
/* The whole usage: synopsis, every command, global options, exit codes. */
void tallyctl_usage_all(FILE *f);

/*
 * opt.c. Each prints its own error, with the running command's usage, on
 * stderr, and returns -EINVAL for it.
 *
 * tallyctl_usage_error: prints "tallyctl: MESSAGE" and the usage of
 * g->cmd (or of g->group); returns TALLYCTL_EXIT_USAGE.
 */
int tallyctl_usage_error(const struct tallyctl *g, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/*
 * Whether argv[*i] is option name: 1 (with its value in *val, from
 * "name VALUE", moving *i on, or "name=VALUE"), 0 if it is not, -EINVAL
 * if a value is missing. val NULL: a flag, which takes no value.
 */
int tallyctl_opt(const struct tallyctl *g, int argc, char **argv, int *i,
	const char *name, const char **val);

/* Option opt's value s as an integer in lo..hi, strictly; or -EINVAL. */
int tallyctl_opt_uint(const struct tallyctl *g, const char *opt,
	const char *s, unsigned long lo, unsigned long hi, unsigned long *v);

/* A global option (--socket, --json, --pretty, --timeout-ms) at *i. */
int tallyctl_global_opt(struct tallyctl *g, int argc, char **argv, int *i);

/* "-h", "--help". */
bool tallyctl_is_help(const char *arg);

/*
 * Whether arg can go into a request (JSON strings are UTF-8); if not,
 * prints a usage error naming what it is and returns false.
 */
bool tallyctl_utf8_arg(const struct tallyctl *g, const char *what,
	const char *arg);

/*
 * What every command takes besides its own arguments: the global options
 * and -h/--help (its usage, on stdout). Returns 1 if argv[*i] was one of
 * them, 0 if not, or -1 when the command is to end with *status (0 after
 * help, TALLYCTL_EXIT_USAGE after a mistake).
 */
int tallyctl_common_arg(struct tallyctl *g, int argc, char **argv, int *i,
	int *status);

/*
 * The arguments of a command with no options of its own: what names its
 * one positional argument ("NAME"; NULL: none), which goes to *arg.
 * Returns 0, or -1 when the command is to end with *status.
 */
int tallyctl_args(struct tallyctl *g, int argc, char **argv,
	const char *what, const char **arg, int *status);

/*
 * request.c: sends req (consumes it) to tallyd and waits for the reply.
 * Returns TALLYCTL_EXIT_OK with *reply (the caller owns it) when its
 * errno is 0. Otherwise prints why on stderr and returns
 * TALLYCTL_EXIT_REFUSED (in JSON mode the reply goes to stdout too) or
 * TALLYCTL_EXIT_UNREACHABLE, with *reply NULL.
 */
int tallyctl_call(const struct tallyctl *g, json_t *req, json_t **reply);

/*
 * A listing (cmd "job_list", its array under key "jobs"), page after
 * page: requests with a "limit", and each reply with "more" true is
 * followed by a request with "after" set to its "next" (docs/control.md). Returns as tallyctl_call()
 * does, with *reply one object holding every page's items under key and
 * no "more" or "next".
 */
int tallyctl_call_list(const struct tallyctl *g, const char *cmd,
	const char *key, json_t **reply);

/* Prints reply without its "errno" on stdout, as --json asks. Borrows. */
int tallyctl_print_json(const struct tallyctl *g, const json_t *reply);

/* A reply missing what the contract promises: message, UNREACHABLE. */
int tallyctl_bad_reply(const struct tallyctl *g, const char *what);

/*
 * The exit status after a format.h function returned ret: 0, or the
 * reply's fault (-EPROTO, tallyctl_bad_reply()) or another error's.
 */
int tallyctl_printed(const struct tallyctl *g, int ret);

#endif /* TALLYCTL_TALLYCTL_H */

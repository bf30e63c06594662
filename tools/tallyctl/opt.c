/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Options: "--name VALUE" or "--name=VALUE", flags, the global options
 * (accepted before and after the command), and strict numbers. Every
 * mistake prints its reason and the command's usage on stderr.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "num.h"
#include "tally_config.h"
#include "tallyctl.h"

int
tallyctl_usage_error(const struct tallyctl *g, const char *fmt, ...)
{
	va_list ap;

	fputs("tallyctl: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	tallyctl_usage(stderr, g->group, g->cmd);
	return TALLYCTL_EXIT_USAGE;
}

bool
tallyctl_is_help(const char *arg)
{
	return strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0;
}

bool
tallyctl_utf8_arg(const struct tallyctl *g, const char *what,
	const char *arg)
{
	json_t *s = json_string(arg);

	if (s != NULL) {
		json_decref(s);
		return true;
	}
	tallyctl_usage_error(g, "%s is not valid UTF-8", what);
	return false;
}

int
tallyctl_opt(const struct tallyctl *g, int argc, char **argv, int *i,
	const char *name, const char **val)
{
	const char *a = argv[*i];
	size_t n = strlen(name);

	if (strncmp(a, name, n) != 0 || (a[n] != '\0' && a[n] != '='))
		return 0;
	if (val == NULL) {
		if (a[n] == '\0')
			return 1;
		tallyctl_usage_error(g, "option %s takes no value", name);
		return -EINVAL;
	}
	if (a[n] == '=') {
		*val = a + n + 1;
		return 1;
	}
	if (*i + 1 >= argc) {
		tallyctl_usage_error(g, "option %s needs a value", name);
		return -EINVAL;
	}
	*val = argv[++*i];
	return 1;
}

int
tallyctl_opt_uint(const struct tallyctl *g, const char *opt,
	const char *s, unsigned long lo, unsigned long hi, unsigned long *v)
{
	if (tallyctl_parse_uint(s, lo, hi, v) == 0)
		return 0;
	tallyctl_usage_error(g, "%s: '%s' is not a whole number in %lu..%lu",
		opt, s, lo, hi);
	return -EINVAL;
}

int
tallyctl_global_opt(struct tallyctl *g, int argc, char **argv, int *i)
{
	unsigned long ms;
	const char *v;
	int r;

	if ((r = tallyctl_opt(g, argc, argv, i, "--json", NULL)) != 0) {
		g->json = g->json || r > 0;
		return r;
	}
	if ((r = tallyctl_opt(g, argc, argv, i, "--pretty", NULL)) != 0) {
		g->json = g->pretty = r > 0;
		return r;
	}
	if ((r = tallyctl_opt(g, argc, argv, i, "--socket", &v)) > 0) {
		if (v[0] == '\0') {
			tallyctl_usage_error(g, "--socket: an empty path");
			return -EINVAL;
		}
		g->socket = v;
		return 1;
	}
	if (r != 0)
		return r;
	if ((r = tallyctl_opt(g, argc, argv, i, "--timeout-ms", &v)) > 0) {
		if (tallyctl_opt_uint(g, "--timeout-ms", v, 1, 3600000, &ms))
			return -EINVAL;
		g->timeout_ms = (unsigned int)ms;
		return 1;
	}
	return r;
}

int
tallyctl_common_arg(struct tallyctl *g, int argc, char **argv, int *i,
	int *status)
{
	int r;

	if (tallyctl_is_help(argv[*i])) {
		tallyctl_usage(stdout, g->group, g->cmd);
		*status = TALLYCTL_EXIT_OK;
		return -1;
	}
	/* A global option, so after the command too, as --help. */
	if (strcmp(argv[*i], "--version") == 0) {
		printf("tallyctl %s\n", TALLY_VERSION);
		*status = TALLYCTL_EXIT_OK;
		return -1;
	}
	r = tallyctl_global_opt(g, argc, argv, i);
	if (r < 0) {
		*status = TALLYCTL_EXIT_USAGE;
		return -1;
	}
	return r;
}

int
tallyctl_args(struct tallyctl *g, int argc, char **argv, const char *what,
	const char **arg, int *status)
{
	const char *a;
	int i, r;

	if (arg != NULL)
		*arg = NULL;
	for (i = 1; i < argc; i++) {
		if ((r = tallyctl_common_arg(g, argc, argv, &i, status)) < 0)
			return -1;
		if (r > 0)
			continue;
		a = argv[i];
		if (a[0] == '-' && a[1] != '\0')
			*status = tallyctl_usage_error(g, "unknown option '%s'",
				a);
		else if (what == NULL || *arg != NULL)
			*status = tallyctl_usage_error(g, "unexpected argument "
				"'%s'", a);
		else if (!tallyctl_utf8_arg(g, what, a))
			*status = TALLYCTL_EXIT_USAGE;
		else {
			*arg = a;
			continue;
		}
		return -1;
	}
	if (what != NULL && *arg == NULL) {
		*status = tallyctl_usage_error(g, "missing %s", what);
		return -1;
	}
	return 0;
}

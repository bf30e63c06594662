/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tallyctl top [--interval S] [--count N]: every S seconds, a job_list
 * (every page of it) and a stats request, and a frame of rates from the counters' change
 * since the sample before (rates.c), printed by format_top.c. On a
 * terminal the screen is cleared before each frame; elsewhere frames are
 * separated by a blank line (--json: one object per line). Stops after N
 * frames, at q on the terminal, or at SIGINT or SIGTERM (exit 0).
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "format.h"
#include "num.h"
#include "rates.h"
#include "tallyctl.h"

static volatile sig_atomic_t stop;

static void
on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static double
mono_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* top's own options: -1 to go on, or the status to end with. */
static int
top_args(struct tallyctl *g, int argc, char **argv, double *interval,
	unsigned long *count)
{
	const char *v;
	int i, r, status;

	for (i = 1; i < argc; i++) {
		if ((r = tallyctl_common_arg(g, argc, argv, &i, &status)) < 0)
			return status;
		if (r > 0)
			continue;
		if ((r = tallyctl_opt(g, argc, argv, &i, "--interval",
				&v)) > 0) {
			if (tallyctl_parse_seconds(v, 0.1, 3600, interval) != 0)
				return tallyctl_usage_error(g, "--interval: "
					"'%s' is not a number of seconds in "
					"0.1..3600", v);
			continue;
		}
		if (r == 0 && (r = tallyctl_opt(g, argc, argv, &i, "--count",
				&v)) > 0) {
			if (tallyctl_opt_uint(g, "--count", v, 0, 1000000000,
					count) != 0)
				return TALLYCTL_EXIT_USAGE;
			continue;
		}
		if (r < 0)
			return TALLYCTL_EXIT_USAGE;
		if (argv[i][0] == '-' && argv[i][1] != '\0')
			return tallyctl_usage_error(g, "unknown option '%s'",
				argv[i]);
		return tallyctl_usage_error(g, "unexpected argument '%s'",
			argv[i]);
	}
	return -1;
}

/* A job_list and a stats reply, and when they came. */
static int
sample(const struct tallyctl *g, json_t **list, json_t **stats, double *t)
{
	int ret;

	ret = tallyctl_call_list(g, "job_list", "jobs", list);
	if (ret != 0)
		return ret;
	ret = tallyctl_call(g, json_pack("{s:s}", "cmd", "stats"), stats);
	if (ret != 0) {
		json_decref(*list);
		*list = NULL;
		return ret;
	}
	*t = mono_s();
	return 0;
}

/*
 * Waits s seconds; true when it is time to stop instead (a signal, or q
 * or EOF on the terminal when tty is true).
 */
static bool
wait_or_quit(double s, bool tty)
{
	double deadline = mono_s() + s;
	struct pollfd p = { .fd = STDIN_FILENO, .events = POLLIN };
	char c;

	for (;;) {
		double left = deadline - mono_s();

		if (stop)
			return true;
		if (left <= 0)
			return false;
		if (poll(&p, tty ? 1 : 0, (int)(left * 1000) + 1) <= 0)
			continue;
		if (read(STDIN_FILENO, &c, 1) != 1 || c == 'q' || c == 'Q')
			return true;
	}
}

/* Prints one frame; false once stdout is gone (a closed pipe). */
static bool
show(const struct tallyctl *g, const json_t *frame, unsigned long n,
	int *ret)
{
	if (g->json)
		*ret = tallyctl_print_json(g, frame);
	else {
		if (isatty(STDOUT_FILENO))
			fputs("\033[H\033[2J", stdout);
		else if (n > 0)
			fputc('\n', stdout);
		*ret = tallyctl_printed(g, tallyctl_print_top(stdout, frame));
	}
	return fflush(stdout) == 0 && !ferror(stdout);
}

/* The frames until count, a stop, or a failed request. */
static int
loop(const struct tallyctl *g, double interval, unsigned long count,
	bool tty)
{
	json_t *pl = NULL, *ps = NULL, *l, *s, *frame;
	double t0, t1;
	int ret;

	ret = sample(g, &pl, &ps, &t0);
	for (unsigned long n = 0; ret == 0 && (count == 0 || n < count); n++) {
		if (wait_or_quit(interval, tty))
			break;
		if ((ret = sample(g, &l, &s, &t1)) != 0)
			break;
		frame = tallyctl_top_frame(pl, ps, l, s, t1 - t0, time(NULL));
		json_decref(pl);
		json_decref(ps);
		pl = l;
		ps = s;
		t0 = t1;
		if (frame == NULL) {
			ret = tallyctl_printed(g, -errno);
			break;
		}
		if (!show(g, frame, n, &ret)) {
			json_decref(frame);
			break;		/* nobody reads: stop quietly */
		}
		json_decref(frame);
	}
	json_decref(pl);
	json_decref(ps);
	return ret;
}

int
tallyctl_top(struct tallyctl *g, int argc, char **argv)
{
	struct sigaction sa = { .sa_handler = on_signal };
	struct termios saved, raw;
	unsigned long count = 0;
	double interval = 1;
	bool tty;
	int ret;

	ret = top_args(g, argc, argv, &interval, &count);
	if (ret >= 0)
		return ret;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	/* q quits: the terminal hands over keys unechoed, one at a time. */
	tty = isatty(STDIN_FILENO) && tcgetattr(STDIN_FILENO, &saved) == 0;
	if (tty) {
		raw = saved;
		raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
		raw.c_cc[VMIN] = 1;
		raw.c_cc[VTIME] = 0;
		tty = tcsetattr(STDIN_FILENO, TCSANOW, &raw) == 0;
	}
	ret = loop(g, interval, count, tty);
	if (tty)
		tcsetattr(STDIN_FILENO, TCSANOW, &saved);
	return ret;
}
